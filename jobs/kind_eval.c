/* kind_eval.c — the "evaluation" job kind: classify many images with a trained
 * model (a dataset's split, or an uploaded archive of images) in batches, stream
 * every answer to results.csv and results.jsonl, and end with metrics.json
 * (kind_eval.h says what each file holds).
 *
 * params = {
 *   "model": MODEL_JOB_ID,
 *   "snapshot": LABEL,                  the API resolves "latest" to a label
 *   "source": {"dataset": ID, "split": "val"|"test"|"train"}
 *           | {"upload": ID | "archive_of": EVALUATION_JOB_ID (a clone's),
 *              "name"?: ORIGINAL_NAME}
 *   "top_n"?: N (images per class, default 10), "batch_size"?: B (default 64),
 *   "group"?: "…"
 * }
 * The model's and the dataset's folders are siblings of the job's own (DATA/jobs/
 * <id>); an upload is DATA/uploads/<ID>.<ext>, moved into the job folder by
 * worker_archive (the only file outside its folder a worker moves).  validate
 * with a caller checks the model, the dataset and the upload as every route
 * needs (check_related).  An upload's images keep their
 * label when their folder is named after one of the model's labels.  An image that
 * cannot be read is a row with an error naming the file, and the job goes on.
 *
 * Memory: one batch of images, the statistics (kind_eval.h) and a sorted table of
 * the labels; nothing per image. */
#define _GNU_SOURCE
#include "kind_eval.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../common/testhooks.h"
#include "../datasets/archive.h"
#include "../datasets/datum.h"
#include "../datasets/dsinfo.h"
#include "../datasets/image.h"
#include "../datasets/lmdbio.h"
#include "../networks/infer.h"
#include "job.h"
#include "jobdir.h"
#include "kind_check.h"
#include "../networks/modeldir.h"
#include "worker.h"

#define MAX_ID 9007199254740991.0
#define IMAGE_FILE_CAP (64u << 20)


/* ---- the statistics ---- */

static void heap_swap(struct eval_item *a, int i, int j)
{
	struct eval_item t = a[i];
	a[i] = a[j];
	a[j] = t;
}

/* Offer it to h: kept while h has room or it beats the smallest key. */
static void heap_offer(struct eval_heap *h, const struct eval_item *it)
{
	if (h->cap < 1)
		return;
	int i;
	if (h->n < h->cap) {
		i = h->n++;
		h->a[i] = *it;
		while (i > 0 && h->a[(i - 1) / 2].key > h->a[i].key) {
			heap_swap(h->a, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
		return;
	}
	if (!(it->key > h->a[0].key))
		return;
	h->a[0] = *it;
	i = 0;
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && h->a[l].key < h->a[m].key)
			m = l;
		if (r < h->n && h->a[r].key < h->a[m].key)
			m = r;
		if (m == i)
			break;
		heap_swap(h->a, i, m);
		i = m;
	}
}

int eval_stats_init(struct eval_stats *s, int classes, int top_n, int max_mis, struct dd_err *err)
{
	memset(s, 0, sizeof *s);
	if (classes < 1 || top_n < 0 || top_n > 1000 || max_mis < 0)
		return dd_err_set(err, DD_EINVAL, "evaluation: %d classes, %d per class: out of range", classes, top_n);
	s->classes = classes;
	s->top_n = top_n;
	s->confusion = calloc((size_t)classes * classes, sizeof *s->confusion);
	s->predicted = calloc((size_t)classes, sizeof *s->predicted);
	s->top = calloc((size_t)classes, sizeof *s->top);
	s->mis.a = malloc(((size_t)max_mis + 1) * sizeof *s->mis.a);
	s->mis.cap = max_mis;
	if (!s->confusion || !s->predicted || !s->top || !s->mis.a)
		return dd_err_set(err, DD_ENOMEM, "out of memory for a %d-class confusion matrix", classes);
	for (int k = 0; k < classes; k++) {
		s->top[k].a = malloc(((size_t)top_n + 1) * sizeof *s->top[k].a);
		s->top[k].cap = top_n;
		if (!s->top[k].a)
			return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	return DD_OK;
}

void eval_stats_fini(struct eval_stats *s)
{
	if (!s)
		return;
	for (int k = 0; s->top && k < s->classes; k++)
		free(s->top[k].a);
	free(s->top);
	free(s->mis.a);
	free(s->confusion);
	free(s->predicted);
	memset(s, 0, sizeof *s);
}

void eval_stats_add(struct eval_stats *s, int64_t n, int truth, const float *probs)
{
	int C = s->classes, pred = 0;
	for (int k = 1; k < C; k++)
		if (probs[k] > probs[pred])
			pred = k;
	if (truth >= C)
		truth = -1;
	s->count++;
	s->predicted[pred]++;
	struct eval_item it = { n, truth, pred, 0, probs[pred], truth >= 0 ? probs[truth] : 0 };
	if (truth >= 0) {
		/* the truth's rank: classes above it, and those level with it of lower index */
		int rank = 0;
		float pt = probs[truth];
		for (int k = 0; k < C; k++)
			rank += probs[k] > pt || (probs[k] == pt && k < truth);
		s->labelled++;
		s->correct1 += rank == 0;
		s->correct5 += rank < 5;
		s->confusion[(size_t)truth * C + pred]++;
		if (pred != truth) {
			it.key = probs[pred];
			heap_offer(&s->mis, &it);
		}
	}
	for (int k = 0; s->top_n > 0 && k < C; k++) {
		struct eval_heap *h = &s->top[k];
		if (h->n == h->cap && !(probs[k] > h->a[0].key))
			continue; /* the common case, settled without a copy */
		it.key = probs[k];
		heap_offer(h, &it);
	}
}

static int by_key_desc(const void *a, const void *b)
{
	const struct eval_item *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return x->n < y->n ? -1 : x->n > y->n;
}

static double ratio(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0; }

static cJSON *item_json(const struct eval_item *it, const char *const *labels, eval_name_fn name, void *ctx,
			int mis)
{
	cJSON *o = cJSON_CreateObject();
	char buf[PATH_MAX];
	cJSON_AddNumberToObject(o, "n", (double)it->n);
	buf[0] = 0;
	if (name)
		name(ctx, it->n, buf, sizeof buf);
	cJSON_AddStringToObject(o, "name", buf);
	if (it->truth >= 0)
		cJSON_AddStringToObject(o, "true", labels[it->truth]);
	else
		cJSON_AddNullToObject(o, "true");
	cJSON_AddStringToObject(o, "predicted", labels[it->pred]);
	cJSON_AddNumberToObject(o, "probability", mis ? it->prob_pred : it->key);
	if (mis)
		cJSON_AddNumberToObject(o, "probability_true", it->prob_true);
	return o;
}

static cJSON *heap_json(const struct eval_heap *h, const char *const *labels, eval_name_fn name, void *ctx, int mis)
{
	cJSON *arr = cJSON_CreateArray();
	struct eval_item *sorted = malloc(((size_t)h->n + 1) * sizeof *sorted);
	if (!arr || !sorted) {
		free(sorted);
		cJSON_Delete(arr);
		return NULL;
	}
	memcpy(sorted, h->a, (size_t)h->n * sizeof *sorted);
	qsort(sorted, (size_t)h->n, sizeof *sorted, by_key_desc);
	for (int i = 0; i < h->n; i++)
		cJSON_AddItemToArray(arr, item_json(&sorted[i], labels, name, ctx, mis));
	free(sorted);
	return arr;
}

cJSON *eval_metrics_json(const struct eval_stats *s, const char *const *labels, eval_name_fn name, void *ctx)
{
	int C = s->classes;
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "count", (double)s->count);
	cJSON_AddNumberToObject(j, "labelled", (double)s->labelled);
	cJSON_AddNumberToObject(j, "errors", (double)s->errors);
	if (s->labelled > 0) {
		cJSON_AddNumberToObject(j, "accuracy", ratio(s->correct1, s->labelled));
		cJSON_AddNumberToObject(j, "accuracy_top5", ratio(s->correct5, s->labelled));
	} else {
		cJSON_AddNullToObject(j, "accuracy");
		cJSON_AddNullToObject(j, "accuracy_top5");
	}
	cJSON *classes = cJSON_AddArrayToObject(j, "classes");
	double sp = 0, sr = 0, sf = 0;
	int counted = 0;
	for (int k = 0; k < C; k++) {
		int64_t tp = s->confusion[(size_t)k * C + k], support = 0, col = 0;
		for (int i = 0; i < C; i++) {
			support += s->confusion[(size_t)k * C + i];
			col += s->confusion[(size_t)i * C + k];
		}
		double p = ratio(tp, col), r = ratio(tp, support), f = p + r > 0 ? 2 * p * r / (p + r) : 0;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "label", labels[k]);
		cJSON_AddNumberToObject(o, "precision", p);
		cJSON_AddNumberToObject(o, "recall", r);
		cJSON_AddNumberToObject(o, "f1", f);
		cJSON_AddNumberToObject(o, "support", (double)support);
		cJSON_AddNumberToObject(o, "predicted", (double)col);
		cJSON_AddItemToArray(classes, o);
		if (support > 0 || col > 0) {
			sp += p;
			sr += r;
			sf += f;
			counted++;
		}
	}
	cJSON *macro = cJSON_AddObjectToObject(j, "macro");
	cJSON_AddNumberToObject(macro, "precision", counted ? sp / counted : 0);
	cJSON_AddNumberToObject(macro, "recall", counted ? sr / counted : 0);
	cJSON_AddNumberToObject(macro, "f1", counted ? sf / counted : 0);
	cJSON *lab = cJSON_AddArrayToObject(j, "labels");
	for (int k = 0; k < C; k++)
		cJSON_AddItemToArray(lab, cJSON_CreateString(labels[k]));
	cJSON *conf = cJSON_AddArrayToObject(j, "confusion");
	for (int i = 0; i < C; i++) {
		cJSON *row = cJSON_CreateArray();
		for (int k = 0; k < C; k++)
			cJSON_AddItemToArray(row, cJSON_CreateNumber((double)s->confusion[(size_t)i * C + k]));
		cJSON_AddItemToArray(conf, row);
	}
	cJSON_AddItemToObject(j, "misclassified", heap_json(&s->mis, labels, name, ctx, 1));
	cJSON *top = cJSON_AddArrayToObject(j, "top");
	for (int k = 0; k < C; k++)
		cJSON_AddItemToArray(top, heap_json(&s->top[k], labels, name, ctx, 0));
	cJSON_AddNumberToObject(j, "top_n", s->top_n);
	return j;
}

/* ---- params ---- */

static int is_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= MAX_ID &&
	       v->valuedouble == floor(v->valuedouble);
}

static int int_field(cJSON *params, const char *key, int lo, int hi, struct dd_err *err)
{
	const cJSON *v = json_get(params, key);
	if (!v)
		return DD_OK;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
		return dd_err_set(err, DD_EINVAL, "%s: must be a whole number from %d to %d", key, lo, hi);
	return DD_OK;
}

static int only(const cJSON *o, const char *const *allowed, const char *where, struct dd_err *err)
{
	const char *name = json_unknown_field(o, allowed);
	return name ? dd_err_set(err, DD_EINVAL, "%s%s: unknown field", where, name) : DD_OK;
}

/* What needs other jobs, with the caller: the model is one who may use and has
 * the snapshot (the latest unless one is named, set as its label), the dataset is
 * a finished one who may use with the split, an upload is named by its id (a
 * clone's, archive_of: an evaluation who may use, with its kept archive). */
static int check_related(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	enum job_state st;
	int64_t model = (int64_t)json_get(params, "model")->valuedouble;
	int rc = kind_use_job(who, uses, model, "model", "model", &st, dir, sizeof dir, err);
	if (rc)
		return rc;
	struct modeldir_snapshot *snaps = NULL;
	int n = 0;
	if ((rc = modeldir_snapshots(dir, &snaps, &n, err)))
		return rc;
	const char *want = cJSON_GetStringValue(json_get(params, "snapshot"));
	double epoch = -1;
	if (want)
		modeldir_label_ok(want, &epoch);
	int i = modeldir_snapshot_find(snaps, n, epoch);
	if (i < 0) {
		free(snaps);
		if (want)
			return dd_err_set(err, DD_ENOENT, "snapshot: model %lld has no snapshot at epoch %s", (long long)model,
					  want);
		return dd_err_set(err, DD_ECONFLICT, "model: model %lld has no snapshot yet (%s)", (long long)model,
				  st == JOB_QUEUED || st == JOB_RUNNING ? "it is still training" : "it ended before writing one");
	}
	cJSON_DeleteItemFromObjectCaseSensitive(params, "snapshot");
	cJSON_AddStringToObject(params, "snapshot", snaps[i].label);
	free(snaps);
	cJSON *src = json_get(params, "source");
	if (json_get(src, "dataset")) {
		int64_t ds = (int64_t)json_get(src, "dataset")->valuedouble;
		if ((rc = kind_use_dataset(who, uses, ds, "source.dataset", "an evaluation needs a finished dataset", dir,
					   sizeof dir, err)))
			return rc;
		const char *split = cJSON_GetStringValue(json_get(src, "split"));
		dsinfo_db_path(dir, split, path, sizeof path);
		strncat(path, "/data.mdb", sizeof path - strlen(path) - 1);
		if (access(path, R_OK) != 0)
			return dd_err_set(err, DD_EINVAL, "source.split: dataset %lld has no %s split", (long long)ds, split);
		return DD_OK;
	}
	const cJSON *of = json_get(src, "archive_of");
	if (of) {
		char kept[PATH_MAX];
		if ((rc = kind_use_job(who, NULL, (int64_t)of->valuedouble, "evaluation", "source.archive_of", NULL, dir,
				       sizeof dir, err)))
			return rc;
		if (!archive_kept_find(dir, kept, sizeof kept))
			return dd_err_set(err, DD_ECONFLICT, "the archive this evaluation classified is gone; upload it again");
		return DD_OK;
	}
	const char *id = cJSON_GetStringValue(json_get(src, "upload"));
	if (!kind_upload_path(who->server->data_dir, id, path, sizeof path) || !kind_upload_usable(who, path))
		return dd_err_set(err, DD_EINVAL, "source.upload: no upload has this id (uploads are used once)");
	if (!json_get(src, "name"))
		cJSON_AddStringToObject(src, "name", strrchr(path, '/') + 1);
	return DD_OK;
}

static int validate(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err)
{
	static const char *const top[] = { "model", "snapshot", "source", "top_n", "batch_size", "group", NULL };
	static const char *const ds[] = { "dataset", "split", NULL };
	static const char *const up[] = { "upload", "archive_of", "name", NULL };
	int rc;
	if ((rc = only(params, top, "", err)))
		return rc;
	if (!is_id(json_get(params, "model")))
		return dd_err_set(err, DD_EINVAL, "model: required, the id of a model job");
	cJSON *snap = json_get(params, "snapshot");
	if (cJSON_IsNumber(snap)) {
		/* an epoch given as a number: the label it is written under */
		char label[MODELDIR_LABEL_MAX];
		modeldir_label_of(snap->valuedouble, label, sizeof label);
		cJSON_ReplaceItemInObjectCaseSensitive(params, "snapshot", cJSON_CreateString(label));
		snap = json_get(params, "snapshot");
	}
	if (snap && !cJSON_IsNull(snap) &&
	    (!cJSON_IsString(snap) || !modeldir_label_ok(snap->valuestring, NULL)))
		return dd_err_set(err, DD_EINVAL, "snapshot: must be a snapshot's epoch (a number like 3 or 1.4167)");
	cJSON *src = json_get(params, "source");
	if (!cJSON_IsObject(src))
		return dd_err_set(err, DD_EINVAL,
				  "source: required, {\"dataset\": ID, \"split\": \"val\"|\"test\"|\"train\"} or {\"upload\": ID}");
	if (json_get(src, "dataset")) {
		if ((rc = only(src, ds, "source.", err)))
			return rc;
		if (!is_id(json_get(src, "dataset")))
			return dd_err_set(err, DD_EINVAL, "source.dataset: must be the id of a dataset job");
		const char *split = cJSON_GetStringValue(json_get(src, "split"));
		if (json_get(src, "split") && (!split || (strcmp(split, "val") && strcmp(split, "test") && strcmp(split, "train"))))
			return dd_err_set(err, DD_EINVAL, "source.split: must be \"val\", \"test\" or \"train\"");
		if (!split)
			cJSON_AddStringToObject(src, "split", "val");
	} else if (json_get(src, "upload") || json_get(src, "archive_of") || json_get(src, "file")) {
		if (json_get(src, "file"))
			return dd_err_set(err, DD_EINVAL, "source.file: unknown field; give an upload by its id, {\"upload\": ID}");
		if (json_get(src, "limits"))
			return dd_err_set(err, DD_EINVAL,
					  "source.limits: unknown field; the caps on unpacking are the server's "
					  "(--archive-max-files, --archive-max-mib)");
		if ((rc = only(src, up, "source.", err)))
			return rc;
		if (!!json_get(src, "upload") == !!json_get(src, "archive_of"))
			return dd_err_set(err, DD_EINVAL, "source.upload: required, an upload's id");
		if (json_get(src, "upload") && !cJSON_IsString(json_get(src, "upload")))
			return dd_err_set(err, DD_EINVAL, "source.upload: must be an upload's id");
		if (json_get(src, "archive_of") && !is_id(json_get(src, "archive_of")))
			return dd_err_set(err, DD_EINVAL, "source.archive_of: must be an evaluation job id");
		if (json_get(src, "name") && !cJSON_IsString(json_get(src, "name")))
			return dd_err_set(err, DD_EINVAL, "source.name: must be a string");
	} else {
		return dd_err_set(err, DD_EINVAL, "source: needs \"dataset\" (with \"split\") or \"upload\"");
	}
	if ((rc = int_field(params, "top_n", 0, 1000, err)) || (rc = int_field(params, "batch_size", 1, 1024, err)))
		return rc;
	const cJSON *g = json_get(params, "group");
	if (g && (!cJSON_IsString(g) || strlen(g->valuestring) > 200))
		return dd_err_set(err, DD_EINVAL, "group: must be a string of at most 200 characters");
	return who ? check_related(params, who, uses, err) : DD_OK;
}

/* ---- the run ---- */

/* An image of the batch: where it came from and how it went. */
struct slot_item {
	int64_t n;
	int truth;
	int slot;             /* -1: not classified (error holds why) */
	char name[PATH_MAX];
	char error[512];
};

struct run {
	struct worker *w;
	struct infer *h;
	int classes, bsz;
	const char *const *labels;
	FILE *csv, *jsonl;
	struct eval_stats st;
	/* a dataset */
	struct lmdbr *rd;
	int *label_map;       /* dataset label -> model class, -1 unknown */
	int nmap;
	char split[8];
	int64_t ds_id;
	/* an upload */
	FILE *files;          /* files.txt being read */
	char images[PATH_MAX];
	int *sorted;          /* model classes sorted by label, for the folder lookup */
	int64_t total;
	int64_t t0;
};

/* qsort_r's order of class indexes by their labels (ctx: the labels). */
static int by_label(const void *a, const void *b, void *ctx)
{
	const char *const *labels = ctx;
	return strcmp(labels[*(const int *)a], labels[*(const int *)b]);
}

static int class_of(struct run *r, const char *label)
{
	int lo = 0, hi = r->classes - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(label, r->labels[r->sorted[mid]]);
		if (!c)
			return r->sorted[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

static void write_row(struct run *r, const struct slot_item *it, const struct infer_pred *pred, int np)
{
	fprintf(r->csv, "%lld,", (long long)it->n);
	fs_csv_field(r->csv, it->name);
	fputc(',', r->csv);
	fs_csv_field(r->csv, it->truth >= 0 ? r->labels[it->truth] : "");
	for (int i = 0; i < 5; i++) {
		if (i < np) {
			fputc(',', r->csv);
			fs_csv_field(r->csv, pred[i].label);
			fprintf(r->csv, ",%.6g", pred[i].probability);
		} else {
			fputs(",,", r->csv);
		}
	}
	fputc(',', r->csv);
	fs_csv_field(r->csv, it->error);
	fputc('\n', r->csv);

	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "n", (double)it->n);
	cJSON_AddStringToObject(o, "name", it->name);
	if (it->truth >= 0)
		cJSON_AddStringToObject(o, "true", r->labels[it->truth]);
	else
		cJSON_AddNullToObject(o, "true");
	if (it->slot >= 0)
		cJSON_AddItemToObject(o, "top", infer_predictions_json(pred, np));
	else
		cJSON_AddStringToObject(o, "error", it->error);
	char *line = cJSON_PrintUnformatted(o);
	if (line) {
		fputs(line, r->jsonl);
		fputc('\n', r->jsonl);
	}
	free(line);
	cJSON_Delete(o);
}

/* Fill it (and a slot of the batch) with the source's next image; DD_ENOENT at the
 * end.  An image that cannot be read still fills it, with the error. */
static int next_dataset(struct run *r, int64_t n, struct slot_item *it, int slot, struct dd_err *err)
{
	const uint8_t *v;
	size_t len;
	int label = -1;
	if (n >= r->total)
		return DD_ENOENT;
	struct dd_err e = { 0 };
	int rc = lmdbr_get(r->rd, n, &v, &len, &label, &e);
	it->truth = label >= 0 && label < r->nmap ? r->label_map[label] : -1;
	snprintf(it->name, sizeof it->name, "%08lld_%d", (long long)n, label);
	if (rc == DD_OK) {
		struct datum d = { 0 };
		rc = datum_decode(v, len, &d, &e);
		if (rc == DD_OK)
			rc = infer_batch_set_datum(r->h, slot, &d, it->name, &e);
		datum_free(&d);
	}
	if (rc == DD_ENOMEM)
		return dd_err_set(err, rc, "%s", e.msg);
	if (rc)
		snprintf(it->error, sizeof it->error, "%s", e.msg);
	it->slot = rc ? -1 : slot;
	return DD_OK;
}

static int next_upload(struct run *r, int64_t n, struct slot_item *it, int slot, struct dd_err *err)
{
	char line[PATH_MAX];
	if (!fgets(line, sizeof line, r->files))
		return DD_ENOENT;
	line[strcspn(line, "\n")] = 0;
	snprintf(it->name, sizeof it->name, "%s", line);
	/* the label: the folder the image is in, when a label is named so */
	it->truth = -1;
	char *slash = strrchr(line, '/');
	if (slash) {
		*slash = 0;
		char *dir = strrchr(line, '/');
		it->truth = class_of(r, dir ? dir + 1 : line);
	}
	char path[PATH_MAX * 2];
	snprintf(path, sizeof path, "%s/%s", r->images, it->name);
	char *data = NULL;
	size_t len = 0;
	struct dd_err e = { 0 };
	int rc = fs_read_file(path, IMAGE_FILE_CAP, &data, &len, &e);
	if (rc == DD_OK)
		rc = infer_batch_set_encoded(r->h, slot, data, len, it->name, &e);
	else
		snprintf(e.msg, sizeof e.msg, "%s: cannot be read", it->name);
	free(data);
	if (rc == DD_ENOMEM)
		return dd_err_set(err, rc, "%s", e.msg);
	if (rc)
		snprintf(it->error, sizeof it->error, "%s", e.msg);
	it->slot = rc ? -1 : slot;
	(void)n;
	return DD_OK;
}

static void event_partial(struct run *r, int64_t done, int final)
{
	double el = (double)(fs_mono_ms() - r->t0) / 1000.0;
	double ips = el > 0 ? (double)done / el : 0;
	double frac = r->total > 0 ? (double)done / (double)r->total : 0;
	worker_progress(r->w, frac, done > 0 && !final ? el * (double)(r->total - done) / (double)done : -1);
	cJSON *ev = events_new("metric");
	cJSON_AddStringToObject(ev, "kind", final ? "evaluation" : "partial");
	cJSON_AddNumberToObject(ev, "count", (double)r->st.count);
	cJSON_AddNumberToObject(ev, "total", (double)r->total);
	cJSON_AddNumberToObject(ev, "errors", (double)r->st.errors);
	cJSON_AddNumberToObject(ev, "labelled", (double)r->st.labelled);
	if (r->st.labelled > 0) {
		cJSON_AddNumberToObject(ev, "accuracy", ratio(r->st.correct1, r->st.labelled));
		cJSON_AddNumberToObject(ev, "accuracy_top5", ratio(r->st.correct5, r->st.labelled));
	}
	cJSON_AddNumberToObject(ev, "images_per_s", round(ips * 10) / 10);
	worker_event(r->w, ev);
}

static void name_item(void *ctx, int64_t n, char *buf, size_t len)
{
	struct run *r = ctx;
	buf[0] = 0;
	if (r->rd) {
		const uint8_t *v;
		size_t l;
		int label = -1;
		lmdbr_get(r->rd, n, &v, &l, &label, NULL);
		snprintf(buf, len, "%08lld_%d", (long long)n, label);
		return;
	}
	char idx[PATH_MAX + 16], txt[PATH_MAX + 16];
	jobdir_file(r->w->dir, JOBDIR_EVAL_INDEX, idx, sizeof idx);
	jobdir_file(r->w->dir, JOBDIR_EVAL_FILES, txt, sizeof txt);
	FILE *fi = fopen(idx, "rb"), *ft = fopen(txt, "r");
	uint8_t b[8];
	if (fi && ft && fseeko(fi, (off_t)n * 8, SEEK_SET) == 0 && fread(b, 1, 8, fi) == 8) {
		uint64_t off = 0;
		for (int i = 7; i >= 0; i--)
			off = off << 8 | b[i];
		if (fseeko(ft, (off_t)off, SEEK_SET) == 0 && fgets(buf, (int)len, ft))
			buf[strcspn(buf, "\n")] = 0;
	}
	if (fi)
		fclose(fi);
	if (ft)
		fclose(ft);
}

/* ---- an upload's images: unpack, then list ---- */

struct lister {
	FILE *txt, *idx;
	uint64_t off;
	int64_t count;
};

static int list_dir(struct lister *l, const char *root, const char *rel, int depth, struct dd_err *err)
{
	if (depth > 32)
		return DD_OK;
	char dir[PATH_MAX * 2];
	snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot list %s", *rel ? rel : "the upload");
	int rc = DD_OK;
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		char sub[PATH_MAX], full[PATH_MAX * 3];
		if (rc || nm[0] == '.' || snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", nm) >= (int)sizeof sub)
			continue;
		snprintf(full, sizeof full, "%s/%s", root, sub);
		struct stat st;
		if (lstat(full, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			rc = list_dir(l, root, sub, depth + 1, err);
		} else if (S_ISREG(st.st_mode) && image_has_image_ext(nm) && !strchr(sub, '\n')) {
			uint8_t b[8];
			for (int k = 0; k < 8; k++)
				b[k] = (uint8_t)(l->off >> (8 * k));
			if (fprintf(l->txt, "%s\n", sub) < 0 || fwrite(b, 1, 8, l->idx) != 8)
				rc = dd_err_sys(err, DD_EIO, errno, "cannot write the list of images");
			l->off += strlen(sub) + 1;
			l->count++;
		}
	}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	return rc;
}

static int prepare_upload(struct run *r, const cJSON *src, struct dd_err *err)
{
	struct worker *w = r->w;
	char kept[PATH_MAX], path[PATH_MAX + 32];
	int rc = worker_archive(w, src, kept, sizeof kept, err);
	if (rc)
		return rc;
	const char *shown = cJSON_GetStringValue(json_get(src, "name"));
	jobdir_file(w->dir, JOBDIR_EVAL_IMAGES, r->images, sizeof r->images);
	fs_rm_rf(r->images, NULL);
	struct archive_limits lim;
	worker_archive_limits(w, &lim); /* the server's caps, never the params' */
	int64_t files = 0;
	worker_log(w, "info", "unpacking %s", shown ? shown : "the upload");
	rc = archive_unpack(kept, shown, r->images, &lim, &files, err);
	if (rc)
		return rc;
	struct lister ls = { 0 };
	jobdir_file(w->dir, JOBDIR_EVAL_FILES, path, sizeof path);
	ls.txt = fopen(path, "w");
	jobdir_file(w->dir, JOBDIR_EVAL_INDEX, path, sizeof path);
	ls.idx = fopen(path, "wb");
	if (!ls.txt || !ls.idx)
		rc = dd_err_sys(err, DD_EIO, errno, "cannot write the list of images");
	else
		rc = list_dir(&ls, r->images, "", 0, err);
	if (ls.txt && fclose(ls.txt) != 0 && !rc)
		rc = dd_err_sys(err, DD_EIO, errno, "cannot write the list of images");
	if (ls.idx && fclose(ls.idx) != 0 && !rc)
		rc = dd_err_sys(err, DD_EIO, errno, "cannot write the list of images");
	if (rc)
		return rc;
	if (ls.count == 0)
		return dd_err_set(err, DD_EINVAL, "%s holds no images (.png, .jpg, .jpeg, .bmp, .ppm)",
				  shown ? shown : "the upload");
	r->total = ls.count;
	jobdir_file(w->dir, JOBDIR_EVAL_FILES, path, sizeof path);
	r->files = fopen(path, "r");
	if (!r->files)
		return dd_err_sys(err, DD_EIO, errno, "cannot read %s", path);
	worker_log(w, "info", "%lld images in %lld files", (long long)ls.count, (long long)files);
	return DD_OK;
}

/* The dataset's labels.txt against the model's labels: index -> model class. */
static int prepare_dataset(struct run *r, const cJSON *src, struct dd_err *err)
{
	r->ds_id = (int64_t)json_get(src, "dataset")->valuedouble;
	snprintf(r->split, sizeof r->split, "%s", cJSON_GetStringValue(json_get(src, "split")));
	char ds[PATH_MAX], path[PATH_MAX + 32];
	jobdir_sibling(r->w->dir, r->ds_id, ds, sizeof ds);
	dsinfo_db_path(ds, r->split, path, sizeof path);
	int rc = lmdbr_open(path, &r->rd, err);
	if (rc == DD_ENOENT)
		return dd_err_set(err, DD_ENOENT, "source.split: dataset %lld has no %s split", (long long)r->ds_id, r->split);
	if (rc)
		return rc;
	r->total = lmdbr_count(r->rd);
	char *text = NULL;
	dsinfo_path(ds, DSINFO_LABELS, path, sizeof path);
	int n = lmdbr_n_labels(r->rd);
	if (n < r->classes)
		n = r->classes;
	r->nmap = n;
	r->label_map = malloc((size_t)n * sizeof *r->label_map);
	if (!r->label_map)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	for (int i = 0; i < n; i++)
		r->label_map[i] = i < r->classes ? i : -1;
	if (fs_read_file(path, 64u << 20, &text, NULL, NULL) == DD_OK) {
		/* by name, so that another dataset with the same classes in another order
		 * is scored right */
		char *p = text;
		for (int i = 0; i < n && p && *p; i++) {
			char *nl = strchr(p, '\n');
			if (nl)
				*nl = 0;
			size_t l = strlen(p);
			if (l && p[l - 1] == '\r')
				p[l - 1] = 0;
			r->label_map[i] = class_of(r, p);
			p = nl ? nl + 1 : NULL;
		}
		free(text);
	}
	return DD_OK;
}

/* A line of /proc/self/status in KiB ("VmHWM", "RssAnon", ...), -1 when unknown. */
static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	size_t fl = strlen(field);
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':' && sscanf(line + fl + 1, "%ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static long peak_rss_kb(void) { return status_kb("VmHWM"); }

static int write_metrics(struct run *r, int complete, const char *snapshot, struct dd_err *err)
{
	cJSON *m = eval_metrics_json(&r->st, r->labels, name_item, r);
	if (!m)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	cJSON_AddBoolToObject(m, "complete", complete);
	cJSON_AddNumberToObject(m, "total", (double)r->total);
	cJSON_AddStringToObject(m, "snapshot", snapshot);
	double el = (double)(fs_mono_ms() - r->t0) / 1000.0;
	cJSON_AddNumberToObject(m, "seconds", el);
	cJSON_AddNumberToObject(m, "images_per_s", el > 0 ? (double)(r->st.count + r->st.errors) / el : 0);
	/* peak resident memory, and now: anonymous (the heap: what must stay flat) and
	 * file-backed (the dataset's LMDB pages read through its map: page cache) */
	cJSON *mem = cJSON_AddObjectToObject(m, "memory_kb");
	cJSON_AddNumberToObject(mem, "peak", (double)peak_rss_kb());
	cJSON_AddNumberToObject(mem, "anon", (double)status_kb("RssAnon"));
	cJSON_AddNumberToObject(mem, "file", (double)status_kb("RssFile"));
	cJSON *src = cJSON_AddObjectToObject(m, "source");
	char base[128];
	if (r->rd) {
		cJSON_AddNumberToObject(src, "dataset", (double)r->ds_id);
		cJSON_AddStringToObject(src, "split", r->split);
		snprintf(base, sizeof base, "/api/v1/datasets/%lld/images/%s/", (long long)r->ds_id, r->split);
	} else {
		const cJSON *id = json_get(r->w->job, "id");
		cJSON_AddStringToObject(src, "upload", cJSON_GetStringValue(json_get(json_get(r->w->params, "source"), "name")) ?
							      cJSON_GetStringValue(json_get(json_get(r->w->params, "source"), "name")) :
							      "upload");
		snprintf(base, sizeof base, "/api/v1/evaluations/%lld/images/",
			 cJSON_IsNumber(id) ? (long long)id->valuedouble : 0LL);
	}
	cJSON_AddStringToObject(m, "image_base", base);
	char *text = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	if (!text)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	char path[PATH_MAX + 32];
	jobdir_file(r->w->dir, JOBDIR_METRICS, path, sizeof path);
	int rc = fs_write_file_atomic(path, text, strlen(text), err);
	free(text);
	return rc;
}

static int run(struct worker *w, struct dd_err *err)
{
	const cJSON *p = w->params, *src = json_get(p, "source");
	struct run r = { .w = w };
	struct slot_item *items = NULL;
	char mdir[PATH_MAX], weights[PATH_MAX + 64], path[PATH_MAX + 32];
	int rc;
	int64_t model = (int64_t)json_get(p, "model")->valuedouble;
	if (jobdir_sibling(w->dir, model, mdir, sizeof mdir))
		return dd_err_set(err, DD_EINTERNAL, "the job folder %s has no parent folder", w->dir);
	const char *snapshot = cJSON_GetStringValue(json_get(p, "snapshot"));
	char latest[MODELDIR_LABEL_MAX];
	if (!snapshot) {
		struct modeldir_snapshot *snaps = NULL;
		int ns = 0;
		if ((rc = modeldir_snapshots(mdir, &snaps, &ns, err)))
			return rc;
		int i = modeldir_snapshot_find(snaps, ns, -1);
		if (i >= 0)
			snprintf(latest, sizeof latest, "%s", snaps[i].label);
		free(snaps);
		if (i < 0)
			return dd_err_set(err, DD_ECONFLICT, "model %lld has no snapshot yet", (long long)model);
		snapshot = latest;
	}
	modeldir_snapshot_path(mdir, snapshot, MODELDIR_SNAP_WEIGHTS, weights, sizeof weights);
	if (access(weights, R_OK) != 0)
		return dd_err_set(err, DD_ENOENT, "snapshot: model %lld has no snapshot at epoch %s (deleted?)",
				  (long long)model, snapshot);
	const cJSON *b = json_get(p, "batch_size"), *tn = json_get(p, "top_n");
	r.bsz = cJSON_IsNumber(b) ? b->valueint : 64;
	int top_n = cJSON_IsNumber(tn) ? tn->valueint : 10;

	const cJSON *slots = json_get(json_get(w->job, "resources"), "cpu_slots");
	if (cJSON_IsNumber(slots) && slots->valuedouble >= 1)
		omp_set_num_threads((int)slots->valuedouble);
	worker_log(w, "info", "model %lld, snapshot %s, batches of %d", (long long)model, snapshot, r.bsz);
	if ((rc = infer_batch_open(mdir, weights, r.bsz, &r.h, err)))
		goto out;
	r.classes = infer_prep(r.h)->classes;
	r.labels = malloc((size_t)r.classes * sizeof *r.labels);
	r.sorted = malloc((size_t)r.classes * sizeof *r.sorted);
	items = calloc((size_t)r.bsz, sizeof *items);
	if (!r.labels || !r.sorted || !items) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	for (int k = 0; k < r.classes; k++) {
		((const char **)r.labels)[k] = infer_label(r.h, k);
		r.sorted[k] = k;
	}
	qsort_r(r.sorted, (size_t)r.classes, sizeof *r.sorted, by_label, (void *)r.labels);
	if ((rc = eval_stats_init(&r.st, r.classes, top_n, EVAL_MAX_MISCLASSIFIED, err)))
		goto out;
	if ((rc = json_get(src, "dataset") ? prepare_dataset(&r, src, err) : prepare_upload(&r, src, err)))
		goto out;

	jobdir_file(w->dir, JOBDIR_RESULTS_CSV, path, sizeof path);
	r.csv = fopen(path, "w");
	jobdir_file(w->dir, JOBDIR_RESULTS, path, sizeof path);
	r.jsonl = fopen(path, "w");
	if (!r.csv || !r.jsonl) {
		rc = dd_err_sys(err, DD_EIO, errno, "cannot write the results");
		goto out;
	}
	fputs("n,name,true_label,top1_label,top1_probability,top2_label,top2_probability,top3_label,"
	      "top3_probability,top4_label,top4_probability,top5_label,top5_probability,error\n",
	      r.csv);
	worker_log(w, "info", "classifying %lld images", (long long)r.total);
	r.t0 = fs_mono_ms();
	int64_t n = 0, last = r.t0;
	/* a pause after each batch (test build only), so that a test can stop an
	 * evaluation of tiny images midway, which otherwise ends in a blink */
	int delay_ms = testhook_int(TESTHOOK_EVAL_DELAY_MS);
	int stopped = 0;
	for (;;) {
		if (worker_should_stop(w)) {
			stopped = 1;
			break;
		}
		int filled = 0, used = 0; /* items in the batch; slots of them that classify */
		while (filled < r.bsz) {
			struct slot_item *it = &items[filled];
			it->n = n;
			it->error[0] = 0;
			rc = r.rd ? next_dataset(&r, n, it, used, err) : next_upload(&r, n, it, used, err);
			if (rc == DD_ENOENT)
				break;
			if (rc)
				goto out;
			used += it->slot >= 0;
			filled++;
			n++;
		}
		rc = DD_OK;
		if (!filled)
			break;
		if (used && (rc = infer_batch_run(r.h, used, err)))
			goto out;
		for (int i = 0; i < filled; i++) {
			struct slot_item *it = &items[i];
			struct infer_pred pred[5];
			int np = 0;
			if (it->slot >= 0) {
				const float *probs = infer_batch_probabilities(r.h, it->slot);
				np = infer_top(r.h, probs, 5, pred);
				eval_stats_add(&r.st, it->n, it->truth, probs);
			} else {
				r.st.errors++;
			}
			write_row(&r, it, pred, np);
		}
		if (fflush(r.csv) != 0 || fflush(r.jsonl) != 0) {
			rc = dd_err_sys(err, DD_EIO, errno, "cannot write the results");
			goto out;
		}
		if (delay_ms > 0 && delay_ms <= 1000)
			usleep((useconds_t)delay_ms * 1000);
		int64_t now = fs_mono_ms();
		if (now - last >= 1000) {
			event_partial(&r, n, 0);
			last = now;
		}
	}
	if (ferror(r.csv) || ferror(r.jsonl)) {
		rc = dd_err_set(err, DD_EIO, "cannot write the results");
		goto out;
	}
	event_partial(&r, n, !stopped);
	if ((rc = write_metrics(&r, !stopped, snapshot, err)))
		goto out;
	if (r.st.labelled > 0)
		worker_log(w, "info", "%lld images (%lld unreadable): top-1 %.2f%%, top-5 %.2f%%; peak memory %ld KiB",
			   (long long)r.st.count, (long long)r.st.errors, 100 * ratio(r.st.correct1, r.st.labelled),
			   100 * ratio(r.st.correct5, r.st.labelled), peak_rss_kb());
	else
		worker_log(w, "info", "%lld images (%lld unreadable), none with a known label", (long long)r.st.count,
			   (long long)r.st.errors);
out:
	if (r.csv)
		fclose(r.csv);
	if (r.jsonl)
		fclose(r.jsonl);
	if (r.files)
		fclose(r.files);
	lmdbr_close(r.rd);
	eval_stats_fini(&r.st);
	infer_close(r.h);
	free(items);
	free((void *)r.labels);
	free(r.sorted);
	free(r.label_map);
	return rc;
}

/* A clone of an upload's evaluation unpacks the original job's kept archive (an
 * upload is used once): source.archive_of names the original, which validate
 * checks the caller may use. */
static int clone_params(cJSON *params, int64_t orig_id, const char *orig_dir, struct dd_err *err)
{
	cJSON *src = json_get(params, "source");
	if (!cJSON_IsObject(src) || json_get(src, "dataset"))
		return DD_OK;
	return kind_clone_archive(src, orig_id, orig_dir, "the archive this evaluation classified is gone; upload it again",
				  err);
}

const struct job_kind eval_job_kind = {
	.name = "evaluation",
	.title = "Evaluation (classify many)",
	.validate = validate,
	.run = run,
	.default_cpu_slots = -1, /* every slot: batches use every core */
	.clone_params = clone_params,
};
