/* api_infer.c — classify with a trained model, and take it home:
 *
 *   POST /api/v1/models/{id}/classify?snapshot=LABEL&top=K&insides=1   one image (a
 *        raw body, or multipart/form-data with the file in field "image") -> the
 *        top K classes with their probabilities; with insides=1 also the image as
 *        the network saw it and every blob of the forward pass (shape, statistics,
 *        histogram, tiles as PNG; a convolution's weights too)
 *   GET  /api/v1/models/{id}/bundle?snapshot=LABEL           the model as a .tar.gz
 *        (networks/infer.h: info.json, network.prototxt, deploy.prototxt,
 *        weights.safetensors, labels.txt, mean.binaryproto and mean.png), streamed
 *        as it is packed
 *   POST /models/images/classification/classify_one.json      DIGITS' route: form
 *        fields job_id, image_file, snapshot_epoch -> {"predictions": [[label, %]]}
 *   POST /models/images/classification/classify_many.json     DIGITS' route: form
 *        fields job_id, image_list (a file of server paths, one a line, an optional
 *        label after a space), image_folder, num_test_images, snapshot_epoch ->
 *        {"classifications": {path: [[label, %], ...]}}
 *
 * This process never decodes an image nor opens a model: it picks the snapshot,
 * reads the upload, and passes both to the inference service (infer_service.h),
 * which keeps recently used models loaded, so a request costs one forward pass.  A
 * model still training answers with its latest snapshot.  The snapshot is checked
 * on every request: a deleted one is a 404 even while its handle is still cached. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../common/log.h"
#include "../../jobs/job.h"
#include "../../networks/modeldir.h"
#include "../../jobs/sched.h"
#include "../../networks/bundle.h"
#include "../../networks/infer.h"
#include "api.h"
#include "../infer/infer_service.h"
#include "../http/body_deadline.h"
#include "../http/perm.h"
#include "../http/server.h"
#include "../../store/store.h"

#define IMAGE_UPLOAD_CAP (64u << 20) /* bytes of one uploaded image */
#define MANY_MAX 1000                /* images of one classify_many request */
#define LIST_CAP (1u << 20)          /* bytes of its image_list */

/* ---- which model and snapshot ---- */

struct pick {
	char dir[PATH_MAX];
	char weights[PATH_MAX + 64];
	char label[MODELDIR_LABEL_MAX];
};

/* Model id's snapshot `want` (a label; NULL or "": the latest) into p.  0, or the
 * status of the error sent. */
static int pick_snapshot(struct mg_connection *c, int64_t id, const char *want, struct pick *p)
{
	struct job_row row;
	struct dd_err err = { 0 };
	int rc = store_job_row(id, &row, &err);
	if (rc == DD_ENOENT)
		return http_error(c, 404, "not_found", "there is no model %lld", (long long)id);
	if (rc)
		return http_error_dd(c, &err);
	if (strcmp(row.kind, "model") != 0)
		return http_error(c, 404, "not_found", "job %lld is not a model", (long long)id);
	double epoch = -1;
	if (want && *want && !modeldir_label_ok(want, &epoch))
		return http_error(c, 400, "invalid",
				  "snapshot: \"%.32s\" is not a snapshot's epoch (a number like 3 or 1.4167)", want);
	sched_job_dir(id, p->dir, sizeof p->dir);
	struct modeldir_snapshot *snaps = NULL;
	int n = 0;
	if (modeldir_snapshots(p->dir, &snaps, &n, &err) != DD_OK)
		return http_error_dd(c, &err);
	int i = modeldir_snapshot_find(snaps, n, epoch);
	if (i < 0) {
		free(snaps);
		if (epoch >= 0)
			return http_error(c, 404, "not_found", "model %lld has no snapshot at epoch %s", (long long)id, want);
		return http_error(c, 409, "conflict", "model %lld has no snapshot yet (%s)", (long long)id,
				  row.state == JOB_QUEUED || row.state == JOB_RUNNING ?
					  "it is still training; the first comes at the end of its first snapshot interval" :
					  "it ended before writing one");
	}
	snprintf(p->label, sizeof p->label, "%s", snaps[i].label);
	free(snaps);
	modeldir_snapshot_path(p->dir, p->label, MODELDIR_SNAP_WEIGHTS, p->weights, sizeof p->weights);
	return 0;
}

/* ---- reading the upload ---- */

struct upload {
	char *data;
	size_t len;
	int too_big, bad;
	char why[200];
	char name[96];            /* the file's name as sent, for messages */
	const char *file_field;   /* "image", "image_file" or "image_list" */
	char job_id[32], snapshot_epoch[32], num_test_images[32];
	char image_folder[PATH_MAX];
	int digits;               /* the DIGITS form: its other fields allowed */
};

/* The DIGITS form's text fields (besides the file) and where each goes. */
static char *text_field(struct upload *u, const char *key, size_t *cap)
{
	if (!u->digits)
		return NULL;
	if (!strcmp(key, "job_id"))
		return *cap = sizeof u->job_id, u->job_id;
	if (!strcmp(key, "snapshot_epoch"))
		return *cap = sizeof u->snapshot_epoch, u->snapshot_epoch;
	if (!strcmp(u->file_field, "image_list") && !strcmp(key, "num_test_images"))
		return *cap = sizeof u->num_test_images, u->num_test_images;
	if (!strcmp(u->file_field, "image_list") && !strcmp(key, "image_folder"))
		return *cap = sizeof u->image_folder, u->image_folder;
	return NULL;
}

static int up_found(const char *key, const char *filename, char *path, size_t pathlen, void *ud)
{
	(void)path;
	(void)pathlen;
	struct upload *u = ud;
	size_t cap;
	if (strcmp(key, u->file_field) == 0) {
		if (filename && *filename)
			snprintf(u->name, sizeof u->name, "%s", filename);
		return MG_FORM_FIELD_STORAGE_GET;
	}
	if (text_field(u, key, &cap))
		return MG_FORM_FIELD_STORAGE_GET;
	u->bad = 1;
	snprintf(u->why, sizeof u->why, "%.60s: unknown form field (the %s goes in field \"%s\")", key,
		 strcmp(u->file_field, "image_list") ? "image" : "list of images", u->file_field);
	return MG_FORM_FIELD_STORAGE_ABORT;
}

static int up_get(const char *key, const char *value, size_t len, void *ud)
{
	struct upload *u = ud;
	size_t cap;
	char *dst = strcmp(key, u->file_field) ? text_field(u, key, &cap) : NULL;
	if (dst) {
		size_t have = strlen(dst);
		if (have + len >= cap) {
			u->bad = 1;
			snprintf(u->why, sizeof u->why, "%s: too long", key);
			return MG_FORM_FIELD_HANDLE_ABORT;
		}
		memcpy(dst + have, value, len);
		dst[have + len] = 0;
		return MG_FORM_FIELD_HANDLE_GET;
	}
	size_t limit = strcmp(u->file_field, "image_list") ? IMAGE_UPLOAD_CAP : LIST_CAP;
	if (u->len + len > limit) {
		u->too_big = 1;
		return MG_FORM_FIELD_HANDLE_ABORT;
	}
	char *g = realloc(u->data, u->len + len + 1);
	if (!g) {
		u->too_big = 1;
		return MG_FORM_FIELD_HANDLE_ABORT;
	}
	memcpy(g + u->len, value, len);
	u->data = g;
	u->len += len;
	u->data[u->len] = 0;
	return MG_FORM_FIELD_HANDLE_GET;
}

/* Read the image: a multipart form's file field, or the raw body.  0, or the status
 * of the error sent; u->data is the caller's to free. */
static int read_image(struct mg_connection *c, struct upload *u)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	if (ri->content_length > (long long)IMAGE_UPLOAD_CAP + (1 << 16))
		return http_error(c, 413, "too_large", "the upload is %lld bytes; an image may have at most %u",
				  ri->content_length, IMAGE_UPLOAD_CAP);
	const char *ct = mg_get_header(c, "Content-Type");
	if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
		struct mg_form_data_handler h = { up_found, up_get, http_form_stored, u };
		int n = mg_handle_form_request(c, &h);
		if (!u->too_big && !u->bad && n >= 0)
			body_deadline_done(c); /* all of it came; a form cut short is still watched */
		if (u->too_big)
			return http_error(c, 413, "too_large", "%s is over the %u-byte limit", u->file_field,
					  strcmp(u->file_field, "image_list") ? IMAGE_UPLOAD_CAP : LIST_CAP);
		if (u->bad || n < 0)
			return http_error(c, 400, "invalid", "%s", u->bad ? u->why : "malformed multipart form");
	} else if (!u->digits) {
		u->data = malloc(1 << 16);
		size_t cap = 1 << 16;
		for (;;) {
			if (!u->data)
				return http_error(c, 500, "internal", "out of memory");
			if (u->len == cap) {
				/* room for one byte past the cap: an image of exactly the cap
				 * fits (as it does in a form), one byte more is refused */
				if (cap > IMAGE_UPLOAD_CAP)
					return http_error(c, 413, "too_large", "the image is over the %u-byte limit",
							  IMAGE_UPLOAD_CAP);
				cap = cap * 2 > IMAGE_UPLOAD_CAP ? (size_t)IMAGE_UPLOAD_CAP + 1 : cap * 2;
				char *g = realloc(u->data, cap);
				if (!g)
					return http_error(c, 500, "internal", "out of memory");
				u->data = g;
			}
			int got = mg_read(c, u->data + u->len, cap - u->len);
			if (got < 0)
				return http_error(c, 400, "invalid", "the upload was cut off after %zu bytes", u->len);
			if (got == 0)
				break;
			u->len += (size_t)got;
		}
	} else
		return http_error(c, 400, "invalid", "send a multipart/form-data form with job_id and %s", u->file_field);
	body_deadline_done(c);
	if (!u->len)
		return http_error(c, 400, "invalid", "no %s: send %s as the body, or a form with field \"%s\"",
				  strcmp(u->file_field, "image_list") ? "image" : "image list",
				  strcmp(u->file_field, "image_list") ? "its bytes" : "it", u->file_field);
	return 0;
}

/* ---- asking the service ---- */

/* Classify len bytes of data (named name in messages) with snapshot p of model id:
 * the service's answer {"predictions", "width", "height"[, "input", "layers"]} into
 * *out (caller frees).  0, or the status of the error sent. */
static int classify(struct mg_connection *c, int64_t id, const struct pick *p, const void *data, size_t len,
		    const char *name, int top, int insides, int input, cJSON **out)
{
	*out = NULL;
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "classify");
	cJSON_AddStringToObject(req, "dir", p->dir);
	cJSON_AddStringToObject(req, "weights", p->weights);
	cJSON_AddStringToObject(req, "name", name);
	cJSON_AddNumberToObject(req, "top", top);
	cJSON_AddBoolToObject(req, "insides", insides);
	cJSON_AddBoolToObject(req, "input", input);
	struct dd_err err = { 0 };
	int rc = infer_service_call(req, data, len, out, &err);
	cJSON_Delete(req);
	if (rc == INFER_SERVICE_DIED)
		return http_error(c, 503, "unavailable",
				  "the inference worker stopped while classifying %s; it has been restarted", name);
	if (rc == DD_ENOENT) /* deleted between the listing and now */
		return http_error(c, 404, "not_found", "model %lld has no snapshot at epoch %s", (long long)id, p->label);
	if (rc)
		return http_error_dd(c, &err);
	return 0;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static cJSON *take(cJSON *from, const char *key)
{
	return cJSON_DetachItemFromObjectCaseSensitive(from, key);
}

int api_model_classify(struct req *r)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long long top = 5, insides = 0, input = 0;
	int rc = http_query_int(r->c, "top", 5, 1, INFER_MAX_TOP, &top);
	if (rc || (rc = http_query_int(r->c, "insides", 0, 0, 1, &insides)) ||
	    (rc = http_query_int(r->c, "input", 0, 0, 1, &input)))
		return rc;
	char snapshot[64] = "";
	http_query(r->ri, "snapshot", snapshot, sizeof snapshot);
	struct upload u = { .file_field = "image", .name = "the image" };
	struct pick p;
	cJSON *ans = NULL;
	/* the model and snapshot first: a bad one costs no upload */
	if ((rc = pick_snapshot(r->c, r->id, snapshot, &p)) || (rc = read_image(r->c, &u)) ||
	    (rc = classify(r->c, r->id, &p, u.data, u.len, u.name, (int)top, (int)insides, (int)input, &ans)))
		goto out;
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "predictions", take(ans, "predictions"));
	cJSON_AddNumberToObject(body, "model", (double)r->id);
	cJSON_AddStringToObject(body, "snapshot", p.label);
	cJSON *im = cJSON_AddObjectToObject(body, "image");
	cJSON_AddItemToObject(im, "width", take(ans, "width"));
	cJSON_AddItemToObject(im, "height", take(ans, "height"));
	if (cJSON_HasObjectItem(ans, "input"))
		cJSON_AddItemToObject(body, "input", take(ans, "input"));
	if (cJSON_HasObjectItem(ans, "layers"))
		cJSON_AddItemToObject(body, "layers", take(ans, "layers"));
	cJSON_AddNumberToObject(body, "time_ms", ms_since(&t0));
	rc = http_json(r->c, 200, body);
out:
	cJSON_Delete(ans);
	free(u.data);
	return rc;
}

/* The DIGITS form's job_id and snapshot_epoch into p ("3.0" is epoch 3's label
 * "3").  0, or the status of the error sent. */
static int digits_pick(struct req *r, const struct upload *u, struct pick *p, int64_t *id)
{
	struct mg_connection *c = r->c;
	char *end;
	long long v = strtoll(u->job_id, &end, 10);
	if (!u->job_id[0] || *end || v < 1)
		return http_error(c, 400, "invalid", "job_id: the model's job id is required");
	if (!perm_job_visible(r, v)) /* another learner's model reads as none */
		return http_error(c, 404, "not_found", "there is no model %lld", v);
	char label[32];
	snprintf(label, sizeof label, "%s", u->snapshot_epoch);
	char *dot = strchr(label, '.');
	if (dot) {
		char *z = label + strlen(label);
		while (z > dot + 1 && z[-1] == '0')
			*--z = 0;
		if (z == dot + 1)
			*dot = 0;
	}
	*id = v;
	return pick_snapshot(c, v, label, p);
}

/* [[label, percent], ...] as DIGITS sends: percentages rounded to 2 decimals. */
static cJSON *digits_pairs(const cJSON *preds)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *pr;
	cJSON_ArrayForEach(pr, preds)
	{
		cJSON *pair = cJSON_CreateArray();
		cJSON_AddItemToArray(pair, cJSON_CreateString(
						   cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pr, "label"))));
		double pct = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(pr, "probability")) * 100.0;
		cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)(long long)(pct * 100.0 + 0.5) / 100.0));
		cJSON_AddItemToArray(arr, pair);
	}
	return arr;
}

/* DIGITS' POST /models/images/classification/classify_one.json: a form with
 * job_id, image_file and snapshot_epoch (optional) -> {"predictions": [["label",
 * 99.87], ...]}, the top 5 as percentages rounded to 2 decimals, as DIGITS sends. */
int api_digits_classify_one(struct req *r)
{
	struct upload u = { .file_field = "image_file", .digits = 1, .name = "the image" };
	struct pick p;
	int64_t id = 0;
	cJSON *ans = NULL;
	int rc;
	if ((rc = read_image(r->c, &u)) || (rc = digits_pick(r, &u, &p, &id)) ||
	    (rc = classify(r->c, id, &p, u.data, u.len, u.name, 5, 0, 0, &ans)))
		goto out;
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "predictions",
			      digits_pairs(cJSON_GetObjectItemCaseSensitive(ans, "predictions")));
	rc = http_json(r->c, 200, body);
out:
	cJSON_Delete(ans);
	free(u.data);
	return rc;
}

/* A server path of the list, below image_folder when relative: resolved into real
 * when it is below an allowed --data-root.  0, or the status of the error sent. */
static int many_path(struct mg_connection *c, const struct upload *u, const char *line, int n, char *real)
{
	char path[PATH_MAX * 2];
	if (line[0] == '/')
		snprintf(path, sizeof path, "%s", line);
	else if (u->image_folder[0])
		snprintf(path, sizeof path, "%s/%s", u->image_folder, line);
	else
		return http_error(c, 400, "invalid",
				  "image_list line %d: %.200s is a relative path and no image_folder was given", n, line);
	/* allowed first: a missing file outside the roots must read as an existing one
	 * there, or the answers would tell which files exist anywhere */
	struct stat st;
	if (!server_path_allowed(path, real) || stat(real, &st) != 0)
		return http_error(c, 403, "forbidden",
				  "image_list line %d: %.200s is not a file below a folder the server allows (--data-root)",
				  n, path);
	if (!S_ISREG(st.st_mode))
		return http_error(c, 400, "invalid", "image_list line %d: %.200s is not a file", n, path);
	if (st.st_size > (off_t)IMAGE_UPLOAD_CAP)
		return http_error(c, 413, "too_large", "image_list line %d: %.200s is over the %u-byte limit", n, path,
				  IMAGE_UPLOAD_CAP);
	return 0;
}

/* DIGITS' POST /models/images/classification/classify_many.json: a form with
 * job_id, image_list (a file: one server path a line, a label after a space
 * allowed and ignored), image_folder (the folder of relative paths),
 * num_test_images (the first N only) and snapshot_epoch -> {"classifications":
 * {path: [["label", 99.87], ...]}}, the top 5 of each image as DIGITS sends; paths
 * as written in the list, so duplicates collapse as in DIGITS.  Every path must
 * be below a --data-root; at most MANY_MAX images.  The whole list is checked
 * before any image is classified. */
int api_digits_classify_many(struct req *r)
{
	struct upload u = { .file_field = "image_list", .digits = 1, .name = "the image list" };
	struct pick p;
	int64_t id = 0;
	cJSON *body = NULL, *map = NULL;
	char **lines = NULL, *real = NULL;
	int n = 0, rc;
	if ((rc = read_image(r->c, &u)) || (rc = digits_pick(r, &u, &p, &id)))
		goto out;
	long long limit = MANY_MAX;
	if (u.num_test_images[0]) {
		char *end;
		limit = strtoll(u.num_test_images, &end, 10);
		if (*end || limit < 1) {
			rc = http_error(r->c, 400, "invalid", "num_test_images: must be a positive whole number");
			goto out;
		}
	}
	lines = calloc(MANY_MAX, sizeof *lines);
	real = malloc(PATH_MAX);
	if (!lines || !real) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	int lineno = 0;
	char *at = u.data;
	for (char *s; n < limit && (s = fs_line_next(&at));) {
		lineno++;
		char *sp = strrchr(s, ' '); /* "path label": the label is DIGITS' ground truth */
		if (sp && sp[1] && strspn(sp + 1, "0123456789") == strlen(sp + 1))
			*sp = 0;
		if (!*s)
			continue;
		if (n == MANY_MAX) {
			rc = http_error(r->c, 413, "too_large",
					"image_list: more than %d images; send num_test_images or split the list", MANY_MAX);
			goto out;
		}
		if ((rc = many_path(r->c, &u, s, lineno, real)))
			goto out;
		lines[n++] = s;
	}
	if (!n) {
		rc = http_error(r->c, 400, "invalid", "image_list: no image paths in it");
		goto out;
	}
	body = cJSON_CreateObject();
	map = cJSON_AddObjectToObject(body, "classifications");
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX * 2];
		if (lines[i][0] == '/')
			snprintf(path, sizeof path, "%s", lines[i]);
		else
			snprintf(path, sizeof path, "%s/%s", u.image_folder, lines[i]);
		char *data = NULL;
		size_t len = 0;
		struct dd_err err = { 0 };
		cJSON *ans = NULL;
		if (!server_path_allowed(path, real) || fs_read_file(real, IMAGE_UPLOAD_CAP, &data, &len, &err)) {
			rc = err.code ? http_error_dd(r->c, &err) :
					http_error(r->c, 403, "forbidden", "%.200s: no longer below a --data-root", path);
			goto out;
		}
		rc = classify(r->c, id, &p, data, len, lines[i], 5, 0, 0, &ans);
		free(data);
		if (rc)
			goto out;
		cJSON_DeleteItemFromObjectCaseSensitive(map, lines[i]);
		cJSON_AddItemToObject(map, lines[i], digits_pairs(cJSON_GetObjectItemCaseSensitive(ans, "predictions")));
		cJSON_Delete(ans);
	}
	rc = http_json(r->c, 200, body);
	body = NULL;
out:
	cJSON_Delete(body);
	free(lines);
	free(real);
	free(u.data);
	return rc;
}

/* ---- the bundle ---- */

static int chunk_write_open(struct archive *a, void *ud)
{
	(void)a;
	(void)ud;
	return ARCHIVE_OK;
}

static la_ssize_t chunk_write(struct archive *a, void *ud, const void *buf, size_t len)
{
	(void)a;
	if (len && mg_send_chunk(ud, buf, (unsigned)len) < 0)
		return -1; /* the client went away */
	return (la_ssize_t)len;
}

static int add_bytes(struct archive *a, const char *name, const void *data, size_t len)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, time(NULL), 0);
	int rc = archive_write_header(a, e) == ARCHIVE_OK &&
				 (len == 0 || archive_write_data(a, data, len) == (la_ssize_t)len) ?
			 0 :
			 -1;
	archive_entry_free(e);
	return rc;
}

/* A file into the archive as name, read in pieces; a missing optional file is
 * skipped. */
static int add_file(struct archive *a, const char *name, const char *path, int optional)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return optional ? 0 : -1;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, st.st_size);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, st.st_mtime, 0);
	int rc = archive_write_header(a, e) == ARCHIVE_OK ? 0 : -1;
	archive_entry_free(e);
	enum { BUF = 1 << 16 };
	char *buf = malloc(BUF); /* not on the stack: CivetWeb's threads have small ones */
	if (!buf)
		rc = -1;
	off_t left = st.st_size;
	while (!rc && left > 0) {
		ssize_t n = read(fd, buf, BUF);
		if (n <= 0 || archive_write_data(a, buf, (size_t)n) != n)
			rc = -1;
		else
			left -= n;
	}
	free(buf);
	close(fd);
	return rc;
}

/* What a bundle needs of the open model, copied out by the inference service. */
struct bundle_task {
	struct pick *p;
	cJSON *man;            /* info.json, less its "files"; the caller frees it */
	char *text;            /* the network; the caller frees it */
	char *deploy;          /* deploy.prototxt; the caller frees it */
	char mean[PATH_MAX];   /* "" when no mean file */
	int rc;
	struct dd_err err;
};

/* The service opens the model and sends these back (app/infer/service.c). */
static void bundle_work(void *arg)
{
	struct bundle_task *t = arg;
	cJSON *req = cJSON_CreateObject(), *ans = NULL;
	cJSON_AddStringToObject(req, "op", "bundle");
	cJSON_AddStringToObject(req, "dir", t->p->dir);
	cJSON_AddStringToObject(req, "weights", t->p->weights);
	cJSON_AddStringToObject(req, "label", t->p->label);
	t->rc = infer_service_call(req, NULL, 0, &ans, &t->err);
	cJSON_Delete(req);
	if (t->rc)
		return;
	const char *s;
	t->man = NULL;
	json_parse_str(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "info")), "info.json", &t->man, NULL);
	t->text = (s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "text"))) ? strdup(s) : NULL;
	t->deploy = (s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "deploy"))) ? strdup(s) : NULL;
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ans, "mean"));
	snprintf(t->mean, sizeof t->mean, "%s", s ? s : "");
	cJSON_Delete(ans);
}

int api_model_bundle(struct req *r)
{
	char snapshot[64] = "";
	http_query(r->ri, "snapshot", snapshot, sizeof snapshot);
	struct pick p;
	int rc = pick_snapshot(r->c, r->id, snapshot, &p);
	if (rc)
		return rc;
	struct bundle_task t = { .p = &p };
	bundle_work(&t);
	if (t.rc == INFER_SERVICE_DIED)
		return http_error(r->c, 503, "unavailable",
				  "the inference worker stopped while opening model %lld; it has been restarted",
				  (long long)r->id);
	if (t.rc == DD_ENOENT)
		return http_error(r->c, 404, "not_found", "model %lld has no snapshot at epoch %s", (long long)r->id,
				  p.label);
	if (t.rc) {
		dd_err_prefix(&t.err, "model %lld", (long long)r->id);
		return http_error_dd(r->c, &t.err);
	}
	char *info = NULL, *text = t.text, *deploy = t.deploy, *mean = t.mean, mean_png[PATH_MAX + 8] = "";
	if (mean[0])
		snprintf(mean_png, sizeof mean_png, "%.*s.png", (int)(strlen(mean) - strlen(".binaryproto")), mean);
	char labels[PATH_MAX + 16];
	modeldir_path(p.dir, MODELDIR_LABELS, labels, sizeof labels);
	/* the size and sha256 of every other file into the manifest (networks/bundle.h),
	 * hashed here, before the status is sent, so a file that cannot be read is
	 * still a clean error */
	struct dd_err herr = { 0 };
	int hrc = !t.man || !text || !deploy ? DD_ENOMEM : DD_OK;
	if (!hrc)
		hrc = bundle_manifest_add_bytes(t.man, "network.prototxt", text, strlen(text));
	if (!hrc)
		hrc = bundle_manifest_add_bytes(t.man, "deploy.prototxt", deploy, strlen(deploy));
	if (!hrc)
		hrc = bundle_manifest_add_file(t.man, "weights.safetensors", p.weights, &herr);
	if (!hrc && access(labels, F_OK) == 0)
		hrc = bundle_manifest_add_file(t.man, "labels.txt", labels, &herr);
	if (!hrc && mean[0]) {
		hrc = bundle_manifest_add_file(t.man, "mean.binaryproto", mean, &herr);
		if (!hrc && access(mean_png, F_OK) == 0)
			hrc = bundle_manifest_add_file(t.man, "mean.png", mean_png, &herr);
	}
	if (!hrc)
		info = cJSON_Print(t.man);
	cJSON_Delete(t.man);
	if (hrc || !info) {
		free(info);
		free(text);
		free(deploy);
		if (hrc && hrc != DD_ENOMEM)
			return http_error_dd(r->c, &herr);
		return http_error(r->c, 500, "internal", "out of memory");
	}

	char disposition[128];
	snprintf(disposition, sizeof disposition, "Content-Disposition: attachment; filename=\"model%lld_epoch%s.tar.gz\"\r\n",
		 (long long)r->id, p.label);
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = "application/gzip", .len = HTTP_CHUNKED,
						  .cache = HTTP_CACHE_USER_DATA, .extra = disposition });
	struct archive *a = archive_write_new();
	int bad = !a || archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
		  archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
		  archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
		  archive_write_open(a, r->c, chunk_write_open, chunk_write, NULL) != ARCHIVE_OK;
	bad = bad || add_bytes(a, "info.json", info, strlen(info)) ||
	      add_bytes(a, "network.prototxt", text, strlen(text)) ||
	      add_bytes(a, "deploy.prototxt", deploy, strlen(deploy)) ||
	      add_file(a, "weights.safetensors", p.weights, 0) || add_file(a, "labels.txt", labels, 1) ||
	      (mean[0] && (add_file(a, "mean.binaryproto", mean, 0) || add_file(a, "mean.png", mean_png, 1)));
	if (a) {
		if (archive_write_close(a) != ARCHIVE_OK)
			bad = 1;
		archive_write_free(a);
	}
	if (bad)
		/* the status is sent: all that is left is to cut the stream short, which a
		 * client sees as a truncated download, never as a whole bundle */
		log_warn("model %lld: the bundle of epoch %s was cut short", (long long)r->id, p.label);
	else
		mg_send_chunk(r->c, "", 0);
	free(info);
	free(text);
	free(deploy);
	return 200;
}
