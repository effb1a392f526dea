/* api_evals.c — /api/v1/evaluations: classify many images with a trained model as a
 * job (kind "evaluation", jobs/kind_eval.c), and read what it found.
 *
 *   POST /api/v1/evaluations                 {name?, model, snapshot?, source, top_n?,
 *                                            batch_size?, group?} -> 202 {"job"}
 *   GET  /api/v1/evaluations/{id}            {"evaluation": job + "partial" (the last
 *                                            running figures) + "metrics" (at the end,
 *                                            without the matrix and the lists)}
 *   GET  .../{id}/confusion?format=json|csv  the confusion matrix (rows: truth)
 *   GET  .../{id}/misclassified?offset&limit most confident first
 *   GET  .../{id}/top?class=K                the images class K scores highest
 *   GET  .../{id}/results.csv, results.json  the rows so far, streamed from the files
 *   GET  .../{id}/images/{n}                 an uploaded image, as uploaded
 *
 * Creating one is checked by the evaluation kind with the caller (sched_validate,
 * as for POST /api/v1/jobs): the model is theirs to use and has the snapshot (409
 * when it has none yet), the dataset is finished, theirs to use and has the split,
 * the upload exists.  The model and the dataset become the job's parents. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../datasets/image.h"
#include "../../jobs/events.h"
#include "../../jobs/job.h"
#include "../../jobs/jobdir.h"
#include "../../jobs/kind_train.h"
#include "../../jobs/sched.h"
#include "api.h"
#include "../http/perm.h"
#include "../http/server.h"
#include "../../store/store.h"


int api_evals_create(struct req *r)
{
	static const char *const fields[] = { "name", "model", "snapshot", "source", "top_n", "batch_size", "group", NULL };
	cJSON *body = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	struct dd_err err = { 0 };
	int64_t id = 0;
	char name[256];
	if ((rc = http_only_fields(r->c, body, fields, "")))
		goto out;
	cJSON *nm = json_get(body, "name");
	if (nm && (!cJSON_IsString(nm) || !*nm->valuestring || strlen(nm->valuestring) > 200)) {
		rc = http_error(r->c, 400, "invalid", "name: a string of 1 to 200 characters");
		goto out;
	}
	int named = nm != NULL;
	if (named)
		snprintf(name, sizeof name, "%s", nm->valuestring);
	cJSON_DeleteItemFromObjectCaseSensitive(body, "name"); /* the job's name, not a param */
	/* the model, its snapshot, the dataset or upload: the kind's rules with the
	 * caller (as for POST /api/v1/jobs); the default name needs the snapshot */
	struct perm_caller pc;
	perm_caller(r, &pc);
	if (sched_validate("evaluation", body, &pc.c, NULL, 0, NULL, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	if (!named)
		snprintf(name, sizeof name, "Evaluation of model %lld, epoch %s",
			 (long long)json_get(body, "model")->valuedouble, cJSON_GetStringValue(json_get(body, "snapshot")));
	if ((rc = sched_submit("evaluation", name, &pc.c, body, 0, NULL, 0, &id, &err)) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	cJSON *job = NULL;
	if (store_job_json(id, 1, &job, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	cJSON *reply = cJSON_CreateObject();
	cJSON_AddItemToObject(reply, "job", job);
	rc = http_json(r->c, 202, reply);
out:
	cJSON_Delete(body);
	return rc;
}

/* ---- reading ---- */

/* The evaluation job r->id: its folder into dir; 0 or the status sent. */
static int eval_dir(struct req *r, char *dir, size_t len)
{
	struct job_row row;
	int rc = api_job_row(r, "evaluation", &row);
	if (rc == 0)
		sched_job_dir(r->id, dir, len);
	return rc;
}

/* metrics.json of the evaluation folder dir, parsed into *m (caller frees with
 * cJSON_Delete(); NULL where it does not parse).  0, or -1 where there is none to
 * read yet (it is written when the evaluation ends). */
static int read_metrics(const char *dir, cJSON **m)
{
	char path[PATH_MAX + 32];
	*m = NULL;
	jobdir_file(dir, JOBDIR_METRICS, path, sizeof path);
	char *text = NULL;
	if (fs_read_file(path, 1u << 30, &text, NULL, NULL) != DD_OK)
		return -1;
	json_parse_str(text, "metrics.json", m, NULL);
	free(text);
	return 0;
}

/* metrics.json of the evaluation, parsed; 0 or the status sent (409 while it runs). */
static int load_metrics(struct req *r, cJSON **out)
{
	char dir[PATH_MAX];
	*out = NULL;
	int rc = eval_dir(r, dir, sizeof dir);
	if (rc)
		return rc;
	if (read_metrics(dir, out))
		return http_error(r->c, 409, "conflict", "evaluation %lld has no metrics yet: they come when it ends",
				  (long long)r->id);
	if (!*out)
		return http_error(r->c, 500, "internal", "evaluation %lld: metrics.json does not parse", (long long)r->id);
	return 0;
}

struct last_partial {
	cJSON *ev;
};

static void scan_partial(void *vctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct last_partial *p = vctx;
	if (!cJSON_IsString(json_get(ev, "type")) || strcmp(json_get(ev, "type")->valuestring, "metric") != 0 ||
	    !cJSON_IsString(json_get(ev, "kind")))
		return;
	cJSON_Delete(p->ev);
	p->ev = cJSON_Duplicate(ev, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(p->ev, "type");
	cJSON_DeleteItemFromObjectCaseSensitive(p->ev, "t");
}

int api_eval_get(struct req *r)
{
	char dir[PATH_MAX];
	int rc = eval_dir(r, dir, sizeof dir);
	cJSON *job = NULL;
	if (rc || (rc = api_job_json(r, &job)))
		return rc;
	struct last_partial p = { 0 };
	struct events_tail t = { .offset = 0, .seq = 0 };
	jobdir_file(dir, JOBDIR_EVENTS, t.path, sizeof t.path);
	events_tail_poll(&t, scan_partial, &p, NULL);
	cJSON_AddItemToObject(job, "partial", p.ev ? p.ev : cJSON_CreateNull());
	cJSON *m = NULL;
	read_metrics(dir, &m); /* none yet, or none that parses: null */
	if (m) {
		/* the big parts have routes of their own */
		static const char *const drop[] = { "confusion", "misclassified", "top", NULL };
		for (int i = 0; drop[i]; i++)
			cJSON_DeleteItemFromObjectCaseSensitive(m, drop[i]);
	}
	cJSON_AddItemToObject(job, "metrics", m ? m : cJSON_CreateNull());
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "evaluation", job);
	return http_json(r->c, 200, body);
}

/* Send what f (an open_memstream of q) holds as one chunk, and free it. */
static void send_row(struct mg_connection *c, FILE *f, char **q, size_t *ql)
{
	fclose(f);
	mg_send_chunk(c, *q, (unsigned)*ql);
	free(*q);
	*q = NULL;
	*ql = 0;
}

int api_eval_confusion(struct req *r)
{
	char format[8] = "json";
	http_query(r->ri, "format", format, sizeof format);
	if (strcmp(format, "json") != 0 && strcmp(format, "csv") != 0)
		return http_error(r->c, 400, "invalid", "format: must be json or csv");
	cJSON *m = NULL;
	int rc = load_metrics(r, &m);
	if (rc)
		return rc;
	cJSON *labels = cJSON_DetachItemFromObjectCaseSensitive(m, "labels");
	cJSON *conf = cJSON_DetachItemFromObjectCaseSensitive(m, "confusion");
	cJSON_Delete(m);
	if (strcmp(format, "json") == 0) {
		cJSON *body = cJSON_CreateObject();
		cJSON_AddItemToObject(body, "labels", labels);
		cJSON_AddItemToObject(body, "matrix", conf);
		return http_json(r->c, 200, body);
	}
	char disposition[96];
	snprintf(disposition, sizeof disposition,
		 "Content-Disposition: attachment; filename=\"evaluation%lld_confusion.csv\"\r\n", (long long)r->id);
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = "text/csv; charset=utf-8", .len = HTTP_CHUNKED,
						  .cache = HTTP_CACHE_USER_DATA, .extra = disposition });
	/* chunked: a 1,000-class matrix is megabytes; one row at a time */
	char *q = NULL;
	size_t ql = 0;
	FILE *mf = open_memstream(&q, &ql);
	cJSON *l, *row, *v;
	if (mf) {
		fputs("true \\ predicted", mf);
		cJSON_ArrayForEach(l, labels)
		{
			fputc(',', mf);
			fs_csv_field(mf, cJSON_GetStringValue(l));
		}
		fputc('\n', mf);
		send_row(r->c, mf, &q, &ql);
	}
	int k = 0;
	cJSON_ArrayForEach(row, conf)
	{
		if (!(mf = open_memstream(&q, &ql)))
			break;
		fs_csv_field(mf, cJSON_GetStringValue(cJSON_GetArrayItem(labels, k++)));
		cJSON_ArrayForEach(v, row)
			fprintf(mf, ",%.0f", v->valuedouble);
		fputc('\n', mf);
		send_row(r->c, mf, &q, &ql);
	}
	mg_send_chunk(r->c, "", 0);
	cJSON_Delete(labels);
	cJSON_Delete(conf);
	return 200;
}

/* Add "image" (its URL) to each item of arr. */
static void add_urls(cJSON *arr, const char *base)
{
	cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		char url[256];
		snprintf(url, sizeof url, "%s%.0f", base, json_get(it, "n")->valuedouble);
		cJSON_AddStringToObject(it, "image", url);
	}
}

int api_eval_misclassified(struct req *r)
{
	long long offset, limit;
	int rc;
	if ((rc = http_query_int(r->c, "offset", 0, 0, 1000000, &offset)) ||
	    (rc = http_query_int(r->c, "limit", 50, 1, 1000, &limit)))
		return rc;
	cJSON *m = NULL;
	if ((rc = load_metrics(r, &m)))
		return rc;
	cJSON *all = json_get(m, "misclassified");
	const char *base = cJSON_GetStringValue(json_get(m, "image_base"));
	int total = cJSON_GetArraySize(all);
	cJSON *items = cJSON_CreateArray();
	for (long long i = offset; i < total && i < offset + limit; i++)
		cJSON_AddItemToArray(items, cJSON_Duplicate(cJSON_GetArrayItem(all, (int)i), 1));
	add_urls(items, base ? base : "");
	cJSON *body = cJSON_CreateObject();
	cJSON_AddNumberToObject(body, "total", total);
	cJSON_AddNumberToObject(body, "offset", (double)offset);
	cJSON_AddNumberToObject(body, "limit", (double)limit);
	cJSON_AddItemToObject(body, "items", items);
	cJSON_Delete(m);
	return http_json(r->c, 200, body);
}

int api_eval_top(struct req *r)
{
	char want[256] = "";
	if (!http_query(r->ri, "class", want, sizeof want) || !*want)
		return http_error(r->c, 400, "invalid", "class: required, a class index or label");
	cJSON *m = NULL;
	int rc = load_metrics(r, &m);
	if (rc)
		return rc;
	cJSON *labels = json_get(m, "labels");
	int nclass = cJSON_GetArraySize(labels), k = -1;
	for (int i = 0; i < nclass && k < 0; i++)
		if (strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(labels, i)), want) == 0)
			k = i;
	if (k < 0 && strspn(want, "0123456789") == strlen(want) && strlen(want) < 9 && atoi(want) < nclass)
		k = atoi(want);
	if (k < 0) {
		cJSON_Delete(m);
		return http_error(r->c, 404, "not_found", "class: the model has no class \"%.64s\"", want);
	}
	cJSON *items = cJSON_DetachItemFromArray(json_get(m, "top"), k);
	const char *base = cJSON_GetStringValue(json_get(m, "image_base"));
	add_urls(items, base ? base : "");
	cJSON *body = cJSON_CreateObject();
	cJSON_AddNumberToObject(body, "index", k);
	cJSON_AddStringToObject(body, "label", cJSON_GetStringValue(cJSON_GetArrayItem(labels, k)));
	cJSON_AddItemToObject(body, "items", items ? items : cJSON_CreateArray());
	cJSON_Delete(m);
	return http_json(r->c, 200, body);
}

/* Where the n-th last of the lines ending before len begins (0 when there are no
 * more than n).  Reads backwards in blocks. */
static off_t lines_start(FILE *f, off_t len, long n)
{
	char blk[4096];
	long seen = 0; /* line ends met, the one at len - 1 included */
	off_t pos = len;
	while (pos > 0) {
		off_t from = pos > (off_t)sizeof blk ? pos - (off_t)sizeof blk : 0;
		size_t got = fseeko(f, from, SEEK_SET) == 0 ? fread(blk, 1, (size_t)(pos - from), f) : 0;
		if (!got)
			return 0;
		for (size_t i = got; i > 0; i--)
			if (blk[i - 1] == '\n' && ++seen == n + 1)
				return from + (off_t)i;
		pos = from;
	}
	return 0;
}

/* Stream dir/file up to its last complete line (a worker may be mid-write), from
 * its tail-th last line (tail 0: all): as it is (csv), or with its lines as the
 * elements of a JSON array (jsonl -> json). */
static int stream_lines(struct req *r, const char *file, int as_array, long tail, const char *type,
			const char *download)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	int rc = eval_dir(r, dir, sizeof dir);
	if (rc)
		return rc;
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "rb");
	if (!f)
		return http_error(r->c, 409, "conflict", "evaluation %lld has no results yet", (long long)r->id);
	/* on the heap: CivetWeb's request threads have small stacks */
	size_t cap = 65536;
	char *buf = malloc(cap);
	if (!buf) {
		fclose(f);
		return http_error(r->c, 500, "internal", "out of memory");
	}
	struct stat st;
	off_t len = 0, start = 0;
	if (fstat(fileno(f), &st) == 0 && st.st_size > 0) {
		/* the end of the last complete line */
		off_t pos = st.st_size;
		while (pos > 0 && !len) {
			off_t from = pos > (off_t)cap ? pos - (off_t)cap : 0;
			size_t got = (fseeko(f, from, SEEK_SET) == 0) ? fread(buf, 1, (size_t)(pos - from), f) : 0;
			if (!got)
				break;
			for (size_t i = got; i > 0 && !len; i--)
				if (buf[i - 1] == '\n')
					len = from + (off_t)i;
			pos = from;
		}
		if (tail > 0 && len > 0)
			start = lines_start(f, len, tail);
	}
	fseeko(f, start, SEEK_SET);
	off_t left = len - start;
	long long total = as_array ? (left ? (long long)left + 1 : 2) : (long long)left;
	char disposition[128];
	snprintf(disposition, sizeof disposition, "Content-Disposition: attachment; filename=\"evaluation%lld_%s\"\r\n",
		 (long long)r->id, download);
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = type, .len = total, .cache = HTTP_CACHE_USER_DATA,
						  .extra = disposition });
	if (as_array)
		mg_write(r->c, "[", 1);
	int empty = left == 0;
	while (left > 0) {
		size_t want = left > (off_t)cap ? cap : (size_t)left;
		size_t got = fread(buf, 1, want, f);
		if (!got)
			break;
		left -= (off_t)got;
		if (as_array)
			for (size_t i = 0; i < got; i++)
				if (buf[i] == '\n')
					buf[i] = left == 0 && i == got - 1 ? ']' : ',';
		if (mg_write(r->c, buf, got) <= 0)
			break;
	}
	if (as_array && empty)
		mg_write(r->c, "]", 1);
	free(buf);
	fclose(f);
	return 200;
}

int api_eval_results_csv(struct req *r)
{
	return stream_lines(r, JOBDIR_RESULTS_CSV, 0, 0, "text/csv; charset=utf-8", "results.csv");
}

int api_eval_results_json(struct req *r)
{
	long long tail;
	int rc = http_query_int(r->c, "tail", 0, 0, 10000, &tail);
	if (rc)
		return rc;
	return stream_lines(r, JOBDIR_RESULTS, 1, (long)tail, "application/json", "results.json");
}

/* api_eval_image with its buffers (PATH_MAX, PATH_MAX + 32, PATH_MAX, 2 * PATH_MAX, PATH_MAX + 16 bytes). */
static int serve_image(struct req *r, char *dir, char *path, char *rel, char *full, char *images)
{
	int rc = eval_dir(r, dir, (PATH_MAX));
	if (rc)
		return rc;
	jobdir_file(dir, JOBDIR_EVAL_INDEX, path, (PATH_MAX + 32));
	FILE *fi = fopen(path, "rb");
	jobdir_file(dir, JOBDIR_EVAL_FILES, path, (PATH_MAX + 32));
	FILE *ft = fopen(path, "r");
	uint8_t b[8];
	int found = 0;
	if (fi && ft && fseeko(fi, (off_t)r->n * 8, SEEK_SET) == 0 && fread(b, 1, 8, fi) == 8) {
		uint64_t off = 0;
		for (int i = 7; i >= 0; i--)
			off = off << 8 | b[i];
		if (fseeko(ft, (off_t)off, SEEK_SET) == 0 && fgets(rel, (PATH_MAX), ft)) {
			rel[strcspn(rel, "\n")] = 0;
			found = 1;
		}
	}
	if (fi)
		fclose(fi);
	if (ft)
		fclose(ft);
	if (!found)
		return http_error(r->c, 404, "not_found", "evaluation %lld has no uploaded image %lld", (long long)r->id,
				  (long long)r->n);
	jobdir_file(dir, JOBDIR_EVAL_IMAGES, images, (PATH_MAX + 16));
	snprintf(full, (PATH_MAX * 2), "%s/%s", images, rel);
	char *data = NULL;
	size_t len = 0;
	struct dd_err err = { 0 };
	if (!fs_path_under(full, images, NULL) || fs_read_file(full, 64u << 20, &data, &len, &err) != DD_OK)
		return http_error(r->c, 404, "not_found", "evaluation %lld: image %lld is gone", (long long)r->id,
				  (long long)r->n);
	enum image_format fmt = image_sniff(data, len);
	const char *type = fmt == IMAGE_PNG ? "image/png" : fmt == IMAGE_JPEG ? "image/jpeg" : "application/octet-stream";
	if (fmt == IMAGE_PNM || fmt == IMAGE_BMP) {
		/* what browsers do not show: as PNG */
		struct image im = { 0 };
		uint8_t *png = NULL;
		size_t plen = 0;
		if (image_decode(data, len, rel, 0, &im, &err) == DD_OK && image_encode_png(&im, 1, &png, &plen, &err) == DD_OK) {
			free(data);
			data = (char *)png;
			len = plen;
			type = "image/png";
		}
		image_free(&im);
	}
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = type, .len = (long long)len,
						  .cache = HTTP_CACHE_USER_IMAGE });
	mg_write(r->c, data, len);
	free(data);
	return 200;
}

int api_eval_image(struct req *r)
{
	/* paths on the heap: CivetWeb's request threads have small stacks */
	struct paths {
		char dir[PATH_MAX], path[PATH_MAX + 32], rel[PATH_MAX], full[PATH_MAX * 2], images[PATH_MAX + 16];
	} *p = malloc(sizeof *p);
	if (!p)
		return http_error(r->c, 500, "internal", "out of memory");
	int status = serve_image(r, p->dir, p->path, p->rel, p->full, p->images);
	free(p);
	return status;
}
