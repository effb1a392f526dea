/* api_infer.c — classify with a trained model, and take it home:
 *
 *   POST /api/v1/models/{id}/classify?snapshot=LABEL&top=K   one image (a raw body,
 *        or multipart/form-data with the file in field "image") -> the top K
 *        classes with their probabilities
 *   GET  /api/v1/models/{id}/bundle?snapshot=LABEL           the model as a .tar.gz
 *        (networks/infer.h: info.json, network.prototxt, deploy.prototxt,
 *        weights.safetensors, labels.txt, mean.binaryproto and mean.png), streamed
 *        as it is packed
 *   POST /models/images/classification/classify_one.json      DIGITS' route: form
 *        fields job_id, image_file, snapshot_epoch -> {"predictions": [[label, %]]}
 *
 * Models stay open in the inference lanes' caches (networks/infer.h: 4 models and
 * 1 GiB in all, least recently used out), keyed by the snapshot file as it is on
 * disk, so a request costs one forward pass.  A model still training answers with its latest
 * snapshot.  The snapshot is checked on every request: a deleted one is a 404 even
 * while its handle is still cached. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/log.h"
#include "../jobs/job.h"
#include "../jobs/kind_train.h"
#include "../jobs/sched.h"
#include "../networks/bundle.h"
#include "../networks/infer.h"
#include "api.h"
#include "server.h"
#include "store.h"

#define IMAGE_UPLOAD_CAP (64u << 20) /* bytes of one uploaded image */

/* ---- the inference threads ----
 *
 * CivetWeb's request threads have small stacks (oneDNN's primitive set-up overflows
 * them) and come and go by the hundred; OpenMP keeps a thread team per thread that
 * calls it; and a oneDNN primitive must run on the thread that made it (its
 * scratchpad is that thread's).  So the work of loading and running a model is
 * handed to a few long-lived lanes: a thread of our own with a 16 MiB stack, its
 * share of the cores for OpenMP, a queue, and a cache of the models it has open.
 * A model always goes to the same lane (a hash of its weights file), so it is
 * loaded once and runs on the thread that loaded it; the request thread waits for
 * its answer. */

#define LANES 2
#define LANE_STACK (16u << 20)

struct task {
	void (*fn)(struct infer_cache *cache, void *arg);
	void *arg;
	int done;
	pthread_cond_t cv;      /* signalled when done: only its own waiter wakes */
	struct task *next;
};

struct lane {
	pthread_mutex_t mu;
	pthread_cond_t more;
	struct task *head, *tail;
	struct infer_cache *cache; /* 4 models and 1 GiB over all lanes */
	int ok;
};

static struct lane lanes[LANES];
static pthread_once_t lanes_once = PTHREAD_ONCE_INIT;

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	omp_set_num_threads(cores / LANES > 1 ? (int)(cores / LANES) : 1);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->head)
			pthread_cond_wait(&l->more, &l->mu);
		struct task *t = l->head;
		l->head = t->next;
		if (!l->head)
			l->tail = NULL;
		pthread_mutex_unlock(&l->mu);
		t->fn(l->cache, t->arg);
		pthread_mutex_lock(&l->mu);
		t->done = 1;
		pthread_cond_signal(&t->cv);
	}
	return NULL;
}

static void lanes_init(void)
{
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, LANE_STACK);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < LANES; i++) {
		struct lane *l = &lanes[i];
		pthread_mutex_init(&l->mu, NULL);
		pthread_cond_init(&l->more, NULL);
		l->cache = infer_cache_new(4 / LANES, ((size_t)1 << 30) / LANES);
		pthread_t th;
		l->ok = l->cache && pthread_create(&th, &at, lane_main, l) == 0;
		if (!l->ok)
			log_error("cannot start inference thread %d: its models answer 500", i);
	}
	pthread_attr_destroy(&at);
}

/* Run fn(cache, arg) on the lane of the model whose weights are at key, and wait
 * for it.  0, or -1 when that lane did not start. */
static int lane_run(const char *key, void (*fn)(struct infer_cache *, void *), void *arg)
{
	pthread_once(&lanes_once, lanes_init);
	uint32_t hsh = 2166136261u; /* FNV-1a */
	for (const char *c = key; *c; c++)
		hsh = (hsh ^ (uint8_t)*c) * 16777619u;
	struct lane *l = &lanes[hsh % LANES];
	if (!l->ok)
		return -1;
	struct task t = { .fn = fn, .arg = arg };
	pthread_cond_init(&t.cv, NULL);
	pthread_mutex_lock(&l->mu);
	if (l->tail)
		l->tail->next = &t;
	else
		l->head = &t;
	l->tail = &t;
	pthread_cond_signal(&l->more);
	while (!t.done)
		pthread_cond_wait(&t.cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	pthread_cond_destroy(&t.cv);
	return 0;
}

/* ---- which model and snapshot ---- */

struct pick {
	char dir[PATH_MAX];
	char weights[PATH_MAX + 64];
	char label[MODEL_LABEL_MAX];
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
	if (want && *want && !model_snapshot_label_ok(want, &epoch))
		return http_error(c, 400, "invalid",
				  "snapshot: \"%.32s\" is not a snapshot's epoch (a number like 3 or 1.4167)", want);
	sched_job_dir(id, p->dir, sizeof p->dir);
	struct model_snapshot *snaps = NULL;
	int n = 0;
	if (model_snapshots(p->dir, &snaps, &n, &err) != DD_OK)
		return http_error_dd(c, &err);
	int i = model_snapshot_find(snaps, n, epoch);
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
	model_snapshot_path(p->dir, p->label, "safetensors", p->weights, sizeof p->weights);
	return 0;
}

/* ---- reading the image ---- */

struct upload {
	char *data;
	size_t len;
	int too_big, bad;
	char why[200];
	const char *file_field;   /* "image" or "image_file" */
	char job_id[32], snapshot_epoch[32];
	int digits;               /* the DIGITS form: job_id and snapshot_epoch allowed */
};

static int up_found(const char *key, const char *filename, char *path, size_t pathlen, void *ud)
{
	(void)filename;
	(void)path;
	(void)pathlen;
	struct upload *u = ud;
	if (strcmp(key, u->file_field) == 0)
		return MG_FORM_FIELD_STORAGE_GET;
	if (u->digits && (!strcmp(key, "job_id") || !strcmp(key, "snapshot_epoch")))
		return MG_FORM_FIELD_STORAGE_GET;
	u->bad = 1;
	snprintf(u->why, sizeof u->why, "%.60s: unknown form field (the image goes in field \"%s\")", key,
		 u->file_field);
	return MG_FORM_FIELD_STORAGE_ABORT;
}

static int up_get(const char *key, const char *value, size_t len, void *ud)
{
	struct upload *u = ud;
	if (!strcmp(key, "job_id") || !strcmp(key, "snapshot_epoch")) {
		char *dst = key[0] == 'j' ? u->job_id : u->snapshot_epoch;
		size_t have = strlen(dst);
		if (have + len >= sizeof u->job_id) {
			u->bad = 1;
			snprintf(u->why, sizeof u->why, "%s: too long", key);
			return MG_FORM_FIELD_HANDLE_ABORT;
		}
		memcpy(dst + have, value, len);
		dst[have + len] = 0;
		return MG_FORM_FIELD_HANDLE_NEXT;
	}
	if (u->len + len > IMAGE_UPLOAD_CAP) {
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
	return MG_FORM_FIELD_HANDLE_NEXT;
}

static int up_store(const char *path, long long size, void *ud)
{
	(void)path;
	(void)size;
	(void)ud;
	return MG_FORM_FIELD_HANDLE_NEXT;
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
		struct mg_form_data_handler h = { up_found, up_get, up_store, u };
		int n = mg_handle_form_request(c, &h);
		if (u->too_big)
			return http_error(c, 413, "too_large", "the image is over the %u-byte limit", IMAGE_UPLOAD_CAP);
		if (u->bad || n < 0)
			return http_error(c, 400, "invalid", "%s", u->bad ? u->why : "malformed multipart form");
	} else if (!u->digits) {
		u->data = malloc(1 << 16);
		size_t cap = 1 << 16;
		for (;;) {
			if (!u->data)
				return http_error(c, 500, "internal", "out of memory");
			if (u->len == cap) {
				if (cap >= IMAGE_UPLOAD_CAP)
					return http_error(c, 413, "too_large", "the image is over the %u-byte limit",
							  IMAGE_UPLOAD_CAP);
				char *g = realloc(u->data, cap *= 2);
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
		return http_error(c, 400, "invalid", "send a multipart/form-data form with job_id and image_file");
	if (!u->len)
		return http_error(c, 400, "invalid", "no image: send its bytes as the body, or a form with field \"%s\"",
				  u->file_field);
	return 0;
}

/* One classification, done on an inference thread. */
struct classify_task {
	struct pick *p;
	struct upload *u;
	int top;
	struct infer_pred *pred;
	char (*labels)[256];   /* pred's labels, copied out of the handle */
	int npred, w, h, rc;
	struct dd_err err;
};

static void classify_work(struct infer_cache *cache, void *arg)
{
	struct classify_task *t = arg;
	struct infer *m = NULL;
	if ((t->rc = infer_cache_get(cache, t->p->dir, t->p->weights, &m, NULL, &t->err)))
		return;
	t->rc = infer_classify(m, t->u->data, t->u->len, "the image", t->top, t->pred, &t->npred, &t->w, &t->h,
			       &t->err);
	for (int i = 0; !t->rc && i < t->npred; i++) {
		/* labels are the handle's: copy them before it is lent again */
		snprintf(t->labels[i], sizeof t->labels[i], "%s", t->pred[i].label);
		t->pred[i].label = t->labels[i];
	}
	infer_cache_release(cache, m);
}

/* Classify u's image with model id's snapshot (p, when p->weights is set: picked
 * already); the predictions into pred, their labels in labels.  0, or the status of
 * the error sent. */
static int classify(struct mg_connection *c, int64_t id, const char *snapshot, struct upload *u, int top,
		    struct pick *p, struct infer_pred *pred, char (*labels)[256], int *npred, int *w, int *h)
{
	int rc = p->weights[0] ? 0 : pick_snapshot(c, id, snapshot, p);
	if (rc)
		return rc;
	struct classify_task t = { .p = p, .u = u, .top = top, .pred = pred, .labels = labels };
	if (lane_run(p->weights, classify_work, &t))
		return http_error(c, 500, "internal", "the inference threads did not start");
	if (t.rc == DD_ENOENT) /* deleted between the listing and now */
		return http_error(c, 404, "not_found", "model %lld has no snapshot at epoch %s", (long long)id, p->label);
	if (t.rc)
		return http_error_dd(c, &t.err);
	*npred = t.npred;
	*w = t.w;
	*h = t.h;
	return 0;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int api_model_classify(struct req *r)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long long top = 5;
	int rc = http_query_int(r->c, "top", 5, 1, INFER_MAX_TOP, &top);
	if (rc)
		return rc;
	char snapshot[64] = "";
	http_query(r->ri, "snapshot", snapshot, sizeof snapshot);
	struct upload u = { .file_field = "image" };
	struct pick p;
	struct infer_pred pred[INFER_MAX_TOP];
	char (*labels)[256] = malloc(INFER_MAX_TOP * sizeof *labels);
	int np = 0, w = 0, h = 0;
	if (!labels) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	/* the model and snapshot first: a bad one costs no upload */
	if ((rc = pick_snapshot(r->c, r->id, snapshot, &p)) || (rc = read_image(r->c, &u)) ||
	    (rc = classify(r->c, r->id, snapshot, &u, (int)top, &p, pred, labels, &np, &w, &h)))
		goto out;
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "predictions", infer_predictions_json(pred, np));
	cJSON_AddNumberToObject(body, "model", (double)r->id);
	cJSON_AddStringToObject(body, "snapshot", p.label);
	cJSON *im = cJSON_AddObjectToObject(body, "image");
	cJSON_AddNumberToObject(im, "width", w);
	cJSON_AddNumberToObject(im, "height", h);
	cJSON_AddNumberToObject(body, "time_ms", ms_since(&t0));
	rc = http_json(r->c, 200, body);
out:
	free(labels);
	free(u.data);
	return rc;
}

/* DIGITS' POST /models/images/classification/classify_one.json: a form with
 * job_id, image_file and snapshot_epoch (optional) -> {"predictions": [["label",
 * 99.87], ...]}, the top 5 as percentages rounded to 2 decimals, as DIGITS sends. */
int api_digits_classify_one(struct req *r)
{
	struct upload u = { .file_field = "image_file", .digits = 1 };
	struct pick p = { .weights = "" };
	struct infer_pred pred[5];
	char labels[5][256];
	int np = 0, w, h, rc;
	if ((rc = read_image(r->c, &u)))
		goto out;
	char *end;
	long long id = strtoll(u.job_id, &end, 10);
	if (!u.job_id[0] || *end || id < 1) {
		rc = http_error(r->c, 400, "invalid", "job_id: the model's job id is required");
		goto out;
	}
	/* DIGITS' snapshot_epoch is a number; "3.0" is epoch 3's label "3" */
	char label[32];
	snprintf(label, sizeof label, "%s", u.snapshot_epoch);
	char *dot = strchr(label, '.');
	if (dot) {
		char *z = label + strlen(label);
		while (z > dot + 1 && z[-1] == '0')
			*--z = 0;
		if (z == dot + 1)
			*dot = 0;
	}
	if ((rc = classify(r->c, id, label, &u, 5, &p, pred, labels, &np, &w, &h)))
		goto out;
	cJSON *body = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(body, "predictions");
	for (int i = 0; i < np; i++) {
		cJSON *pair = cJSON_CreateArray();
		cJSON_AddItemToArray(pair, cJSON_CreateString(pred[i].label));
		double pct = (double)pred[i].probability * 100.0;
		cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)(long long)(pct * 100.0 + 0.5) / 100.0));
		cJSON_AddItemToArray(arr, pair);
	}
	rc = http_json(r->c, 200, body);
out:
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

/* What a bundle needs of the open model, copied out on an inference thread. */
struct bundle_task {
	struct pick *p;
	cJSON *man;            /* info.json, less its "files"; the caller frees it */
	char *text;            /* the network; the caller frees it */
	char *deploy;          /* deploy.prototxt; the caller frees it */
	char mean[PATH_MAX];   /* "" when no mean file */
	int rc;
	struct dd_err err;
};

static void bundle_work(struct infer_cache *cache, void *arg)
{
	struct bundle_task *t = arg;
	struct infer *m = NULL;
	if ((t->rc = infer_cache_get(cache, t->p->dir, t->p->weights, &m, NULL, &t->err)))
		return;
	t->man = infer_manifest(m, t->p->label);
	t->text = strdup(infer_network_text(m));
	t->deploy = infer_deploy_text(m);
	snprintf(t->mean, sizeof t->mean, "%s", infer_mean_path(m) ? infer_mean_path(m) : "");
	infer_cache_release(cache, m);
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
	if (lane_run(p.weights, bundle_work, &t))
		return http_error(r->c, 500, "internal", "the inference threads did not start");
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
	snprintf(labels, sizeof labels, "%s/labels.txt", p.dir);
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

	mg_printf(r->c,
		  "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nTransfer-Encoding: chunked\r\n"
		  "Content-Disposition: attachment; filename=\"model%lld_epoch%s.tar.gz\"\r\n"
		  "X-Content-Type-Options: nosniff\r\n\r\n",
		  (long long)r->id, p.label);
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
