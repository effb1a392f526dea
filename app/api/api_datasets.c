/* api_datasets.c — /api/v1/uploads and /api/v1/datasets: receive archives, start
 * dataset jobs, and browse finished datasets (summary, pages of images, files).
 *
 * Uploads are streamed to DATA/uploads/<id>.<ext> as they arrive (never held in
 * memory) and consumed by the dataset job that unpacks them.  Browsing reads the
 * LMDB through a small cache of open readers, so a page of thumbnails costs one
 * B-tree lookup per image however large the dataset. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../datasets/archive.h"
#include "../../datasets/create.h"
#include "../../datasets/datum.h"
#include "../../datasets/dsinfo.h"
#include "../../datasets/example.h"
#include "../../datasets/image.h"
#include "../../datasets/lmdbio.h"
#include "../../jobs/kind_check.h"
#include "../../jobs/jobdir.h"
#include "../../jobs/sched.h"
#include "api.h"
#include "../http/body_deadline.h"
#include "../http/perm.h"
#include "../http/server.h"
#include "../../store/store.h"

#define UPLOAD_ID_LEN 24

/* ---- uploads ---- */

static void upload_dir(char *buf, size_t len) { jobdir_uploads(server_data_dir(), buf, len); }

static const char *archive_ext(const char *name)
{
	size_t n = strlen(name);
	if (n > 7 && strcasecmp(name + n - 7, ".tar.gz") == 0)
		return ".tar.gz";
	const char *dot = strrchr(name, '.');
	return dot ? dot : "";
}

/* A fresh upload path; id gets the random hex id. */
/* A text upload (a segmentation colour map, named *.txt), beside the archives. */
static int upload_is_text(const char *name)
{
	size_t n = strlen(name);
	return n > 4 && strcasecmp(name + n - 4, ".txt") == 0;
}

static int new_upload_path(const char *name, char *path, size_t len, char *id, struct dd_err *err)
{
	unsigned char rnd[UPLOAD_ID_LEN / 2];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return dd_err_set(err, DD_EIO, "no randomness for an upload id");
	for (size_t i = 0; i < sizeof rnd; i++)
		sprintf(id + 2 * i, "%02x", rnd[i]);
	char dir[PATH_MAX];
	upload_dir(dir, sizeof dir);
	int rc = fs_mkdir_p(dir, err);
	if (rc)
		return rc;
	const char *ext = upload_is_text(name) ? ".txt" : archive_ext(name);
	jobdir_upload(server_data_dir(), id, strcasecmp(ext, ".tgz") == 0 ? ".tar.gz" : ext, path, len);
	return DD_OK;
}

/* A new upload of r's user: its path and id, with its owner written beside it
 * (kind_check.h), once the user's disk quota has room for the request's bytes (an
 * upload counts from its first byte).  api_upload_drop undoes it. */
static int upload_begin(const struct req *r, const char *name, char *path, size_t len, char *id, struct dd_err *err)
{
	struct perm_caller pc;
	perm_caller(r, &pc);
	int rc = sched_quota_disk_room(pc.c.user_id, r->ri->content_length, err);
	if (rc || (rc = new_upload_path(name, path, len, id, err)))
		return rc;
	char side[PATH_MAX + 8], num[32];
	jobdir_upload_owner(path, side, sizeof side);
	int n = snprintf(num, sizeof num, "%lld\n", (long long)pc.c.user_id);
	return fs_write_file_atomic(side, num, (size_t)n, err);
}

void api_upload_drop(const char *path)
{
	char side[PATH_MAX + 8];
	jobdir_upload_owner(path, side, sizeof side);
	unlink(path);
	unlink(side);
}

/* The stored file of upload id, when r's user may use it (its owner, or an admin);
 * 1 found.  Another user's upload is not found: ids tell nothing. */
int api_upload_find(const struct req *r, const char *id, char *path, size_t len)
{
	struct perm_caller pc;
	perm_caller(r, &pc);
	return kind_upload_path(server_data_dir(), id, path, len) && kind_upload_usable(&pc.c, path);
}

/* Stream the request body into path; 0 or the status of the error sent. */
static int stream_body(struct mg_connection *c, const char *path, long long *bytes)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	long long cap = server_max_upload();
	if (ri->content_length > cap)
		return http_error(c, 413, "too_large", "the upload is %lld bytes, over the %lld-byte limit",
				  ri->content_length, cap);
	/* An upload that cannot fit is refused before a byte is stored; one that fills
	 * the disk anyway (another writer, no Content-Length) is caught by write(). */
	struct dd_err err = { 0 };
	int64_t room = fs_free_bytes(path);
	if (ri->content_length > 0 && room >= 0 && ri->content_length > room) {
		fs_err_nospace(&err, path, "the upload of %.1f MiB was not kept",
			       (double)ri->content_length / (1024.0 * 1024.0));
		return http_error_dd(c, &err);
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (errno != ENOSPC && errno != EDQUOT)
			return http_error(c, 500, "internal", "cannot store the upload");
		fs_err_nospace(&err, path, "the upload was not kept");
		return http_error_dd(c, &err);
	}
	char *buf = malloc(1 << 16);
	long long total = 0;
	int status = 0;
	for (;;) {
		int n = buf ? mg_read(c, buf, 1 << 16) : -1;
		if (n == 0 && ri->content_length >= 0 && total < ri->content_length) {
			/* mg_read gives up after --request-timeout without a byte */
			status = http_error(c, 408, "timeout", "the upload stopped after %lld of its %lld bytes: nothing came "
					    "for too long, and it was not kept; send it again", total, ri->content_length);
			break;
		}
		if (n == 0)
			break;
		if (n < 0) {
			status = http_error(c, 400, "invalid", "the upload was cut off after %lld bytes", total);
			break;
		}
		total += n;
		if (total > cap) {
			status = http_error(c, 413, "too_large", "the upload is over the %lld-byte limit", cap);
			break;
		}
		if (fs_write_all(fd, buf, (size_t)n) != 0) {
			if (errno == ENOSPC || errno == EDQUOT) {
				/* measured before the partial file goes (below): what the
				 * writer found */
				fs_err_nospace(&err, path, "the upload was not kept (%.1f MiB received)",
					       (double)total / (1024.0 * 1024.0));
				status = http_error_dd(c, &err);
			} else {
				status = http_error(c, 500, "internal", "cannot store the upload");
			}
			break;
		}
	}
	free(buf);
	if (!status)
		body_deadline_done(c); /* all of it came */
	if (close(fd) != 0 && !status) {
		if (errno == ENOSPC || errno == EDQUOT) {
			fs_err_nospace(&err, path, "the upload was not kept");
			status = http_error_dd(c, &err);
		} else {
			status = http_error(c, 500, "internal", "cannot store the upload");
		}
	}
	if (!status && total == 0)
		status = http_error(c, 400, "invalid", "the upload is empty");
	*bytes = total;
	return status;
}

int api_uploads_create(struct req *r)
{
	char name[256];
	if (!http_query(r->ri, "name", name, sizeof name) || (!archive_is_archive_name(name) && !upload_is_text(name)))
		return http_error(r->c, 400, "invalid",
				  "name: give the file name in ?name=, ending in .zip, .tar, .tar.gz or .tgz (or .txt, a colour map)");
	char path[PATH_MAX], id[UPLOAD_ID_LEN + 1];
	struct dd_err err = { 0 };
	if (upload_begin(r, name, path, sizeof path, id, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	long long bytes = 0;
	int status = stream_body(r->c, path, &bytes);
	if (status) {
		api_upload_drop(path);
		return status;
	}
	cJSON *body = cJSON_CreateObject();
	cJSON *u = cJSON_AddObjectToObject(body, "upload");
	cJSON_AddStringToObject(u, "id", id);
	cJSON_AddStringToObject(u, "name", name);
	cJSON_AddNumberToObject(u, "bytes", (double)bytes);
	return http_json(r->c, 201, body);
}

/* ---- creating a dataset ---- */

/* Submit a dataset job from {name, group?, source, options?}; body is consumed. */
static int submit_dataset(struct req *r, cJSON *body)
{
	static const char *const fields[] = { "name", "group", "source", "options", "task", "colormap", NULL };
	int rc = http_only_fields(r->c, body, fields, "");
	cJSON *name = cJSON_GetObjectItemCaseSensitive(body, "name");
	if (!rc && (!cJSON_IsString(name) || !*name->valuestring || strlen(name->valuestring) > 200))
		rc = http_error(r->c, 400, "invalid", "name: required, a string of 1 to 200 characters");
	if (rc) {
		cJSON_Delete(body);
		return rc;
	}
	cJSON *params = cJSON_CreateObject();
	cJSON_AddItemToObject(params, "source", cJSON_DetachItemFromObjectCaseSensitive(body, "source"));
	cJSON *opts = cJSON_DetachItemFromObjectCaseSensitive(body, "options");
	if (opts)
		cJSON_AddItemToObject(params, "options", opts);
	static const char *const moved[] = { "group", "task", "colormap", NULL };
	for (int i = 0; moved[i]; i++) {
		cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(body, moved[i]);
		if (v)
			cJSON_AddItemToObject(params, moved[i], v);
	}
	struct dd_err err = { 0 };
	int64_t id;
	/* the source's rules (server paths below --data-root, an upload by its id,
	 * the server's caps) are the kind's, with the caller, as for POST /api/v1/jobs */
	struct perm_caller pc;
	perm_caller(r, &pc);
	rc = sched_submit("dataset", name->valuestring, &pc.c, params, 0, NULL, 0, &id, &err);
	cJSON_Delete(params);
	cJSON_Delete(body);
	if (rc != DD_OK) {
		/* a dataset's own fields are "options.…": say where they belong */
		return http_error_dd(r->c, &err);
	}
	cJSON *job = NULL;
	if (store_job_json(id, 1, &job, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "job", job);
	return http_json(r->c, 202, out);
}

/* multipart/form-data: fields name, group, options (JSON text), source (JSON
 * text, optional) and the file field "archive". */
struct form {
	char name[256], group[256];
	char *options, *source;
	char archive_path[PATH_MAX], archive_id[UPLOAD_ID_LEN + 1], archive_name[256];
	const struct req *r; /* whose upload the file field becomes */
	int bad, bad_status; /* bad_status: 400 unless it says otherwise (403 for a quota) */
	char why[200];
};

static int form_found(const char *key, const char *filename, char *path, size_t pathlen, void *ud)
{
	struct form *f = ud;
	if (strcmp(key, "archive") == 0 && filename && *filename) {
		if (!archive_is_archive_name(filename)) {
			f->bad = 1;
			snprintf(f->why, sizeof f->why, "archive: %s is not a .zip, .tar, .tar.gz or .tgz file", filename);
			return MG_FORM_FIELD_STORAGE_ABORT;
		}
		struct dd_err err = { 0 };
		if (upload_begin(f->r, filename, f->archive_path, sizeof f->archive_path, f->archive_id, &err) != DD_OK) {
			f->bad = 1;
			f->bad_status = err.code == DD_EPERM ? 403 : 500;
			snprintf(f->why, sizeof f->why, "archive: %s", err.msg);
			f->archive_path[0] = 0;
			return MG_FORM_FIELD_STORAGE_ABORT;
		}
		snprintf(f->archive_name, sizeof f->archive_name, "%s", filename);
		snprintf(path, pathlen, "%s", f->archive_path);
		return MG_FORM_FIELD_STORAGE_STORE;
	}
	if (!strcmp(key, "name") || !strcmp(key, "group") || !strcmp(key, "options") || !strcmp(key, "source"))
		return MG_FORM_FIELD_STORAGE_GET;
	f->bad = 1;
	snprintf(f->why, sizeof f->why, "%.60s: unknown form field", key);
	return MG_FORM_FIELD_STORAGE_ABORT;
}

/* Add a chunk of a text field to *dst; -1 once the field passes 64 KiB. */
static int append(char **dst, const char *v, size_t len)
{
	size_t have = *dst ? strlen(*dst) : 0;
	if (have + len > 65536)
		return -1;
	char *g = realloc(*dst, have + len + 1);
	if (!g)
		return -1;
	memcpy(g + have, v, len);
	g[have + len] = 0;
	*dst = g;
	return 0;
}

static int form_get(const char *key, const char *value, size_t len, void *ud)
{
	struct form *f = ud;
	if (!strcmp(key, "name"))
		http_form_append(f->name, sizeof f->name, value, len);
	else if (!strcmp(key, "group"))
		http_form_append(f->group, sizeof f->group, value, len);
	else if ((!strcmp(key, "options") && append(&f->options, value, len)) ||
		 (!strcmp(key, "source") && append(&f->source, value, len))) {
		f->bad = 1;
		snprintf(f->why, sizeof f->why, "%s: over 64 KiB of JSON", key);
		return MG_FORM_FIELD_HANDLE_ABORT;
	}
	return MG_FORM_FIELD_HANDLE_GET;
}

/* The JSON object a form field named what holds (text), into *out (caller frees
 * with cJSON_Delete()); 0 or the status of the 400 sent. */
static int form_object(struct req *r, const char *text, const char *what, cJSON **out)
{
	struct dd_err jerr = { 0 };
	*out = NULL;
	if (json_parse_str(text, what, out, &jerr))
		return http_error(r->c, 400, "invalid", "%s", jerr.msg);
	if (!cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return http_error(r->c, 400, "invalid", "%s: must be a JSON object", what);
	}
	return 0;
}

static int create_multipart(struct req *r)
{
	if (r->ri->content_length < 0)
		return http_error(r->c, 411, "invalid", "a multipart upload needs a Content-Length");
	if (r->ri->content_length > server_max_upload())
		return http_error(r->c, 413, "too_large", "the upload is %lld bytes, over the %lld-byte limit",
				  r->ri->content_length, server_max_upload());
	struct form f = { .r = r };
	struct mg_form_data_handler h = { form_found, form_get, http_form_stored, &f };
	int n = mg_handle_form_request(r->c, &h);
	if (!f.bad && n >= 0)
		body_deadline_done(r->c); /* all of it came; a form cut short is still watched */
	int status = 0;
	cJSON *body = NULL;
	if (f.bad || n < 0) {
		status = f.bad_status == 403 ? http_error(r->c, 403, "forbidden", "%s", f.why)
			 : http_error(r->c, f.bad_status ? f.bad_status : 400, f.bad_status ? "internal" : "invalid", "%s",
				      f.bad ? f.why : "malformed multipart form");
		goto out;
	}
	/* what a JSON body could not carry (json.h) a form must not bring either:
	 * text that is not UTF-8 (a name cut at 255 bytes is refused here too) */
	const char *const texts[][2] = { { "name", f.name }, { "group", f.group }, { "archive", f.archive_name } };
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		const char *why = NULL;
		size_t tl = strlen(texts[i][1]), at = json_utf8_check(texts[i][1], tl, &why);
		if (at != tl) {
			status = http_error(r->c, 400, "invalid", "%s: not valid UTF-8 (%s at byte %zu)", texts[i][0], why, at);
			goto out;
		}
	}
	body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "name", f.name);
	if (f.group[0])
		cJSON_AddStringToObject(body, "group", f.group);
	if (f.options && *f.options) {
		cJSON *o = NULL;
		if ((status = form_object(r, f.options, "options", &o)))
			goto out;
		cJSON_AddItemToObject(body, "options", o);
	}
	cJSON *src = NULL;
	if (!(f.source && *f.source)) {
		if (!(src = cJSON_CreateObject())) {
			status = http_error(r->c, 400, "invalid", "source: must be a JSON object");
			goto out;
		}
	} else if ((status = form_object(r, f.source, "source", &src)))
		goto out;
	if (f.archive_id[0]) {
		cJSON_DeleteItemFromObjectCaseSensitive(src, "type");
		cJSON_DeleteItemFromObjectCaseSensitive(src, "upload");
		cJSON_AddStringToObject(src, "type", "upload");
		cJSON_AddStringToObject(src, "upload", f.archive_id);
		cJSON_AddStringToObject(src, "name", f.archive_name);
	}
	cJSON_AddItemToObject(body, "source", src);
	status = submit_dataset(r, body);
	body = NULL;
	if (status != 202 && f.archive_path[0])
		api_upload_drop(f.archive_path);
	f.archive_path[0] = 0;
out:
	if (status != 202 && f.archive_path[0])
		api_upload_drop(f.archive_path);
	cJSON_Delete(body);
	free(f.options);
	free(f.source);
	return status;
}

int api_datasets_create(struct req *r)
{
	const char *ct = mg_get_header(r->c, "Content-Type");
	if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0)
		return create_multipart(r);
	cJSON *body = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	return submit_dataset(r, body);
}

/* ---- reading datasets ---- */

/* The dataset job's folder and its dataset.json; 0 or the status sent. */
static int load_summary(struct req *r, char *dir, size_t len, cJSON **summary)
{
	*summary = NULL;
	struct job_row row;
	int rc = api_job_row(r, "dataset", &row);
	if (rc)
		return rc;
	sched_job_dir(r->id, dir, len);
	if (row.state == JOB_DONE)
		dsinfo_read(dir, summary, NULL); /* none: not finished, no summary yet */
	return 0;
}

/* load_summary of a dataset that must be finished: 409 while it is not. */
static int finished_summary(struct req *r, char *dir, size_t len, cJSON **summary)
{
	int rc = load_summary(r, dir, len, summary);
	if (rc == 0 && !*summary)
		rc = http_error(r->c, 409, "conflict", "dataset %lld is not finished", (long long)r->id);
	return rc;
}

/* The dataset job's folder, for a route that reads what is in it rather than its
 * summary; with finished, 409 while the dataset is not.  0 or the status sent. */
static int dataset_dir(struct req *r, int finished, char *dir, size_t len)
{
	cJSON *summary = NULL;
	int rc = finished ? finished_summary(r, dir, len, &summary) : load_summary(r, dir, len, &summary);
	cJSON_Delete(summary);
	return rc;
}

/* A dataset of the list (j, seen by r): its summary, less the skipped files. */
static void add_list_summary(struct req *r, cJSON *j)
{
	struct req one = *r;
	one.id = (int64_t)cJSON_GetObjectItem(j, "id")->valuedouble;
	char dir[PATH_MAX];
	cJSON *summary = NULL;
	load_summary(&one, dir, sizeof dir, &summary);
	if (summary) {
		/* the list carries the headline, not every skipped file */
		cJSON_DeleteItemFromObjectCaseSensitive(summary, "skipped");
		cJSON_AddItemToObject(j, "summary", summary);
	} else {
		cJSON_AddNullToObject(j, "summary");
	}
}

int api_datasets_list(struct req *r) { return api_jobs_page(r, "dataset", "datasets", add_list_summary); }

int api_dataset_get(struct req *r)
{
	char dir[PATH_MAX];
	cJSON *summary = NULL;
	int rc = load_summary(r, dir, sizeof dir, &summary);
	if (rc)
		return rc;
	cJSON *job = NULL;
	if ((rc = api_job_json(r, &job))) {
		cJSON_Delete(summary);
		return rc;
	}
	cJSON_AddItemToObject(job, "summary", summary ? summary : cJSON_CreateNull());
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "dataset", job);
	return http_json(r->c, 200, body);
}

/* A few open readers, shared by all request threads, each used under its lock. */
#define CACHE 8
static struct cached {
	int64_t id;
	int split;
	struct lmdbr *rd;
	int64_t used;
	pthread_mutex_t use;
} cache[CACHE];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t cache_clock;

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static void cache_init(void)
{
	for (int i = 0; i < CACHE; i++)
		pthread_mutex_init(&cache[i].use, NULL);
}

/* The cache entry for (id, split), opened if needed, returned with its `use` lock
 * held (the caller unlocks); NULL with err filled.  The entry is locked before
 * cache_lock is released, so it cannot be swapped for another dataset's reader
 * in between. */
static struct cached *reader(int64_t id, int split, const char *dir, struct dd_err *err)
{
	pthread_once(&cache_once, cache_init);
	pthread_mutex_lock(&cache_lock);
	struct cached *hit = NULL, *victim = NULL;
	for (int i = 0; i < CACHE && !hit; i++) {
		if (cache[i].rd && cache[i].id == id && cache[i].split == split)
			hit = &cache[i];
		else if (!victim || (victim->rd && (!cache[i].rd || cache[i].used < victim->used)))
			victim = &cache[i];
	}
	if (hit) {
		pthread_mutex_lock(&hit->use);
	} else {
		hit = victim;
		pthread_mutex_lock(&hit->use); /* waits out its current user */
		lmdbr_close(hit->rd);
		hit->rd = NULL;
		char path[PATH_MAX + 16];
		dsinfo_db_path(dir, ds_split_name((enum ds_split)split), path, sizeof path);
		if (lmdbr_open(path, &hit->rd, err) != DD_OK) {
			hit->rd = NULL;
			pthread_mutex_unlock(&hit->use);
			pthread_mutex_unlock(&cache_lock);
			return NULL;
		}
		hit->id = id;
		hit->split = split;
	}
	hit->used = ++cache_clock;
	pthread_mutex_unlock(&cache_lock);
	return hit;
}

static int parse_split(const char *s)
{
	for (int i = 0; i < DS_SPLITS; i++)
		if (strcmp(s, ds_split_name((enum ds_split)i)) == 0)
			return i;
	return -1;
}

int api_dataset_images(struct req *r)
{
	char dir[PATH_MAX], split_s[16] = "train";
	cJSON *summary = NULL;
	int rc = finished_summary(r, dir, sizeof dir, &summary);
	if (rc)
		return rc;
	http_query(r->ri, "split", split_s, sizeof split_s);
	int split = parse_split(split_s);
	long long label, page, size;
	int nlabels = cJSON_GetArraySize(cJSON_GetObjectItem(summary, "labels"));
	cJSON_Delete(summary);
	if (split < 0)
		return http_error(r->c, 400, "invalid", "split: must be train, val or test");
	if ((rc = http_query_int(r->c, "label", -1, -1, nlabels - 1, &label)) ||
	    (rc = http_query_int(r->c, "page", 0, 0, INT_MAX, &page)) ||
	    (rc = http_query_int(r->c, "size", 25, 1, 200, &size)))
		return rc;
	struct dd_err err = { 0 };
	struct cached *c = reader(r->id, split, dir, &err);
	if (!c)
		return http_error(r->c, 404, "not_found", "dataset %lld has no %s split", (long long)r->id, split_s);
	int64_t total = label < 0 ? lmdbr_count(c->rd) : lmdbr_label_count(c->rd, (int)label);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "split", split_s);
	if (label < 0)
		cJSON_AddNullToObject(body, "label");
	else
		cJSON_AddNumberToObject(body, "label", (double)label);
	cJSON_AddNumberToObject(body, "page", (double)page);
	cJSON_AddNumberToObject(body, "size", (double)size);
	cJSON_AddNumberToObject(body, "total", (double)total);
	cJSON *imgs = cJSON_AddArrayToObject(body, "images");
	for (int64_t k = page * size; k < (page + 1) * size && k < total; k++) {
		const uint8_t *v;
		size_t len;
		int64_t index = k;
		int lab = (int)label;
		int g = label < 0 ? lmdbr_get(c->rd, k, &v, &len, &lab, &err) :
				    lmdbr_get_in_label(c->rd, (int)label, k, &index, &v, &len, &err);
		if (g != DD_OK)
			break;
		cJSON *im = cJSON_CreateObject();
		cJSON_AddNumberToObject(im, "index", (double)index);
		cJSON_AddNumberToObject(im, "label", lab);
		char url[128];
		snprintf(url, sizeof url, "/api/v1/datasets/%lld/images/%s/%lld", (long long)r->id, split_s,
			 (long long)index);
		cJSON_AddStringToObject(im, "url", url);
		cJSON_AddItemToArray(imgs, im);
	}
	pthread_mutex_unlock(&c->use);
	return http_json(r->c, 200, body);
}

static void send_blob(struct mg_connection *c, const char *type, const void *data, size_t len)
{
	http_send_head(c, &(struct http_head){ .status = 200, .type = type, .len = (long long)len,
					       .cache = HTTP_CACHE_USER_IMAGE });
	mg_write(c, data, len);
}

int api_dataset_image(struct req *r)
{
	char dir[PATH_MAX];
	int rc = dataset_dir(r, 1, dir, sizeof dir);
	if (rc)
		return rc;
	int split = parse_split(r->name);
	if (split < 0)
		return http_error(r->c, 404, "not_found", "no split named %s", r->name);
	struct dd_err err = { 0 };
	struct cached *c = reader(r->id, split, dir, &err);
	if (!c)
		return http_error(r->c, 404, "not_found", "dataset %lld has no %s split", (long long)r->id, r->name);
	const uint8_t *v;
	size_t len;
	int label;
	struct datum d = { 0 };
	uint8_t *png = NULL;
	size_t plen = 0;
	int status;
	if (lmdbr_get(c->rd, r->n, &v, &len, &label, &err) != DD_OK) {
		status = http_error(r->c, 404, "not_found", "%s has no record %lld", r->name, (long long)r->n);
	} else if (datum_decode(v, len, &d, &err) != DD_OK) {
		status = http_error(r->c, 500, "internal", "record %lld is not a Datum: %s", (long long)r->n, err.msg);
	} else if (d.encoded) {
		enum image_format f = image_sniff(d.data, d.data_len);
		send_blob(r->c, f == IMAGE_JPEG ? "image/jpeg" : f == IMAGE_PNG ? "image/png" : "application/octet-stream",
			  d.data, d.data_len);
		status = 200;
	} else if ((size_t)d.channels * d.height * d.width != d.data_len || (d.channels != 1 && d.channels != 3)) {
		status = http_error(r->c, 500, "internal", "record %lld: raw data does not match its shape", (long long)r->n);
	} else {
		/* raw records are C×H×W with BGR planes: back to interleaved RGB */
		struct image img = { d.width, d.height, d.channels, malloc(d.data_len) };
		if (img.px)
			image_from_planes(&img, d.data);
		if (img.px && image_encode_png(&img, 1, &png, &plen, &err) == DD_OK) {
			send_blob(r->c, "image/png", png, plen);
			status = 200;
		} else {
			status = http_error(r->c, 500, "internal", "cannot encode record %lld", (long long)r->n);
		}
		free(img.px);
	}
	pthread_mutex_unlock(&c->use);
	datum_free(&d);
	free(png);
	return status;
}

int api_dataset_file(struct req *r)
{
	static const char *const files[][2] = {
		{ "labels.txt", "text/plain; charset=utf-8" },   { "mean.png", "image/png" },
		{ "mean.binaryproto", "application/octet-stream" }, { "dataset.json", "application/json" },
		{ "train.txt", "text/plain; charset=utf-8" },    { "val.txt", "text/plain; charset=utf-8" },
		{ "test.txt", "text/plain; charset=utf-8" },
	};
	const char *type = NULL;
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		if (strcmp(r->name, files[i][0]) == 0)
			type = files[i][1];
	if (!type)
		return http_error(r->c, 404, "not_found", "a dataset has no file %s (labels.txt, mean.png, mean.binaryproto, dataset.json, train.txt, val.txt, test.txt)", r->name);
	char dir[PATH_MAX];
	int rc = dataset_dir(r, 0, dir, sizeof dir);
	if (rc)
		return rc;
	char path[PATH_MAX + 80], *data = NULL;
	size_t len;
	snprintf(path, sizeof path, "%s/%s", dir, r->name);
	if (fs_read_file(path, 512u << 20, &data, &len, NULL) != DD_OK)
		return http_error(r->c, 404, "not_found", "dataset %lld has no %s (yet)", (long long)r->id, r->name);
	send_blob(r->c, type, data, len);
	free(data);
	return 200;
}

/* GET /api/v1/datasets/preview?width=&height=&channels=&resize_mode=&encoding=&seed=
 * The built-in picture after the chosen conversion, resize and encoding, with
 * the encoded size in X-Encoded-Bytes: what one record of such a dataset holds. */
int api_datasets_preview(struct req *r)
{
	struct ds_options o;
	ds_options_default(&o);
	long long w, h, ch, seed;
	int rc;
	if ((rc = http_query_int(r->c, "width", 256, 1, 4096, &w)) ||
	    (rc = http_query_int(r->c, "height", 256, 1, 4096, &h)) ||
	    (rc = http_query_int(r->c, "channels", 3, 1, 3, &ch)) ||
	    (rc = http_query_int(r->c, "seed", 0, 0, INT_MAX, &seed)))
		return rc;
	if (ch == 2)
		return http_error(r->c, 400, "invalid", "channels: must be 1 or 3");
	char mode[16] = "squash", enc[8] = "png";
	http_query(r->ri, "resize_mode", mode, sizeof mode);
	http_query(r->ri, "encoding", enc, sizeof enc);
	if (resize_mode_parse(mode, &o.resize) != 0)
		return http_error(r->c, 400, "invalid", "resize_mode: must be squash, crop, fill or half_crop");
	if (ds_encoding_parse(enc, &o.encoding) != 0)
		return http_error(r->c, 400, "invalid", "encoding: must be png, jpg or none");
	struct dd_err err = { 0 };
	struct image src = { 0 }, out = { 0 };
	uint8_t *data = NULL;
	size_t len = 0, encoded = 0;
	if ((rc = example_preview_image(&src, &err)) || (rc = image_set_channels(&src, (int)ch, &err)) ||
	    (rc = image_resize(&src, (int)w, (int)h, o.resize, (uint64_t)seed, &out, &err)))
		goto out;
	/* show the record as it is stored; raw records are shown as PNG but their
	 * size is the raw C×H×W bytes */
	if (o.encoding == DS_ENC_JPG)
		rc = image_encode_jpeg(&out, 90, &data, &len, &err);
	else
		rc = image_encode_png(&out, 6, &data, &len, &err);
	encoded = o.encoding == DS_ENC_NONE ? (size_t)out.w * out.h * out.c : len;
out:
	image_free(&src);
	image_free(&out);
	if (rc) {
		free(data);
		return http_error_dd(r->c, &err);
	}
	char extra[96];
	snprintf(extra, sizeof extra, "X-Encoded-Bytes: %zu\r\nAccess-Control-Expose-Headers: X-Encoded-Bytes\r\n", encoded);
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = o.encoding == DS_ENC_JPG ? "image/jpeg" : "image/png",
						  .len = (long long)len, .extra = extra });
	mg_write(r->c, data, len);
	free(data);
	return 200;
}

int api_finished_dataset(struct req *r, int64_t id, const char *field, const char *purpose, char *dir,
			 size_t dirlen)
{
	struct dd_err err = { 0 };
	struct perm_caller pc;
	perm_caller(r, &pc);
	if (kind_use_dataset(&pc.c, NULL, id, field, purpose, dir, dirlen, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	return 0;
}
