/* kind_dataset.c — the "dataset" job kind: a worker that builds an image dataset
 * into its job folder with datasets/create.
 *
 * params = {
 *   "source": {"type":"folder", "train":DIR, "val"?:DIR, "test"?:DIR}
 *           | {"type":"upload", "file":PATH, "name"?:ORIGINAL_NAME,
 *              "train_list"?, "val_list"?, "test_list"?, "labels"?  (names inside it)}
 *           | {"type":"lists", "train":FILE, "val"?:FILE, "test"?:FILE,
 *              "labels":FILE, "base":DIR}
 *           | {"type":"example", "name":"fashion-mnist"},
 *   "options": { see ds_options_from_json },
 *   "group"?: "…"
 * }
 * Server paths are checked against --data-root by the API before a job exists;
 * an uploaded archive is unpacked into JOB/source/ and then deleted. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../datasets/archive.h"
#include "../datasets/create.h"
#include "../datasets/example.h"
#include "job.h"
#include "worker.h"

static const char *str(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int validate(cJSON *params, struct dd_err *err)
{
	static const char *const top[] = { "source", "options", "group", NULL };
	const cJSON *it;
	cJSON_ArrayForEach(it, params)
	{
		int known = 0;
		for (int i = 0; top[i]; i++)
			known |= strcmp(it->string, top[i]) == 0;
		if (!known)
			return dd_err_set(err, DD_EINVAL, "params.%s: unknown field", it->string);
	}
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(params, "source");
	const char *type = str(src, "type");
	if (!cJSON_IsObject(src) || !type)
		return dd_err_set(err, DD_EINVAL, "source: required, an object with a \"type\"");
	if (strcmp(type, "folder") == 0) {
		if (!str(src, "train"))
			return dd_err_set(err, DD_EINVAL, "source.train: required, a folder");
	} else if (strcmp(type, "upload") == 0) {
		if (!str(src, "file"))
			return dd_err_set(err, DD_EINVAL, "source.file: required, the uploaded archive");
	} else if (strcmp(type, "example") == 0) {
		if (!str(src, "name") || strcmp(str(src, "name"), "fashion-mnist") != 0)
			return dd_err_set(err, DD_EINVAL, "source.name: the example is \"fashion-mnist\"");
	} else if (strcmp(type, "lists") == 0) {
		if (!str(src, "train") || !str(src, "labels") || !str(src, "base"))
			return dd_err_set(err, DD_EINVAL, "source: list files need train, labels and base");
	} else {
		return dd_err_set(err, DD_EINVAL, "source.type: must be folder, upload, lists or example");
	}
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(params, "group");
	if (g && (!cJSON_IsString(g) || strlen(g->valuestring) > 200))
		return dd_err_set(err, DD_EINVAL, "group: must be a string of at most 200 characters");
	struct ds_options o;
	ds_options_default(&o);
	return ds_options_from_json(cJSON_GetObjectItemCaseSensitive(params, "options"), &o, err);
}

struct run_ctx {
	struct worker *w;
	int64_t t0;
};

static void on_progress(void *vctx, const char *phase, int64_t done, int64_t total)
{
	struct run_ctx *c = vctx;
	double frac = total > 0 ? (double)done / (double)total : 0;
	double el = (double)(fs_mono_ms() - c->t0) / 1000.0;
	double eta = done > 0 ? el * (double)(total - done) / (double)done : -1;
	worker_progress(c->w, frac, eta);
	(void)phase;
}

static int on_example(void *vctx, int64_t done, int64_t total)
{
	struct run_ctx *c = vctx;
	/* writing the example is the first tenth of the job */
	worker_progress(c->w, 0.1 * (double)done / (double)total, -1);
	return worker_should_stop(c->w);
}

static void on_log(void *vctx, const char *level, const char *msg)
{
	struct run_ctx *c = vctx;
	worker_log(c->w, level, "%s", msg);
}

static int on_stop(void *vctx)
{
	struct run_ctx *c = vctx;
	return worker_should_stop(c->w);
}

static int run(struct worker *w, struct dd_err *err)
{
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(w->params, "source");
	const char *type = str(src, "type");
	struct ds_options o;
	ds_options_default(&o);
	int rc = ds_options_from_json(cJSON_GetObjectItemCaseSensitive(w->params, "options"), &o, err);
	if (rc)
		return rc;
	struct ds_source s = { 0 };
	char train[PATH_MAX], val[PATH_MAX], test[PATH_MAX], unpacked[PATH_MAX];
	char lists[4][PATH_MAX];
	int drop_after = 0; /* the unpacked images are ours to remove once the databases exist */
	if (strcmp(type, "upload") == 0) {
		const char *file = str(src, "file");
		char kept[PATH_MAX];
		/* The upload becomes the job's own archive (a rename inside the data
		 * folder), so a clone of this job can unpack it again. */
		archive_kept_path(w->dir, file, kept, sizeof kept);
		if (strstr(file, "/uploads/") && rename(file, kept) == 0)
			file = kept;
		snprintf(unpacked, sizeof unpacked, "%s/source", w->dir);
		fs_rm_rf(unpacked, NULL);
		const char *shown = str(src, "name") ? str(src, "name") : strrchr(file, '/') + 1;
		worker_log(w, "info", "unpacking %s", shown);
		int64_t files = 0;
		struct archive_limits lim;
		archive_limits_default(&lim);
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(src, "limits");
		const cJSON *mf = cJSON_GetObjectItemCaseSensitive(l, "max_files");
		const cJSON *mb = cJSON_GetObjectItemCaseSensitive(l, "max_bytes");
		if (cJSON_IsNumber(mf) && mf->valuedouble >= 1)
			lim.max_entries = (int64_t)mf->valuedouble;
		if (cJSON_IsNumber(mb) && mb->valuedouble >= 1)
			lim.max_bytes = (int64_t)mb->valuedouble;
		if ((rc = archive_unpack(file, shown, unpacked, &lim, &files, err)))
			return rc;
		worker_log(w, "info", "unpacked %lld files", (long long)files);
		drop_after = 1;
		if (str(src, "train_list")) {
			static const char *const keys[4] = { "train_list", "val_list", "test_list", "labels" };
			for (int i = 0; i < 4; i++) {
				const char *name = str(src, keys[i]);
				if (!name)
					continue;
				snprintf(lists[i], PATH_MAX, "%s/%s", unpacked, name);
				if (!fs_path_under(lists[i], unpacked, NULL))
					return dd_err_set(err, DD_EINVAL, "source.%s: %s is not in the archive", keys[i], name);
			}
			s.list[DS_TRAIN] = lists[0];
			s.list[DS_VAL] = str(src, "val_list") ? lists[1] : NULL;
			s.list[DS_TEST] = str(src, "test_list") ? lists[2] : NULL;
			s.labels_file = str(src, "labels") ? lists[3] : NULL;
			s.list_base = unpacked;
			if (!s.labels_file)
				return dd_err_set(err, DD_EINVAL, "source.labels: list files need a labels file");
		} else {
			if ((rc = ds_layout_resolve(unpacked, train, val, test, err)))
				return rc;
			s.folder[DS_TRAIN] = train;
			s.folder[DS_VAL] = val[0] ? val : NULL;
			s.folder[DS_TEST] = test[0] ? test : NULL;
		}
	} else if (strcmp(type, "example") == 0) {
		snprintf(unpacked, sizeof unpacked, "%s/source", w->dir);
		fs_rm_rf(unpacked, NULL);
		worker_log(w, "info", "writing Fashion-MNIST's 70,000 images from %s", FASHION_MNIST_DIR);
		struct run_ctx ec = { w, fs_mono_ms() };
		drop_after = 1;
		rc = example_fashion_mnist(unpacked, on_example, &ec, err);
		if (rc == DD_ECONFLICT && worker_should_stop(w))
			return DD_OK; /* stopped on request: the worker reports "aborted" */
		if (rc)
			return rc;
		if ((rc = ds_layout_resolve(unpacked, train, val, test, err)))
			return rc;
		s.folder[DS_TRAIN] = train;
		s.folder[DS_VAL] = val[0] ? val : NULL;
		s.folder[DS_TEST] = test[0] ? test : NULL;
	} else if (strcmp(type, "folder") == 0) {
		s.folder[DS_TRAIN] = str(src, "train");
		s.folder[DS_VAL] = str(src, "val");
		s.folder[DS_TEST] = str(src, "test");
	} else {
		s.list[DS_TRAIN] = str(src, "train");
		s.list[DS_VAL] = str(src, "val");
		s.list[DS_TEST] = str(src, "test");
		s.labels_file = str(src, "labels");
		s.list_base = str(src, "base");
	}
	struct run_ctx c = { w, fs_mono_ms() };
	struct ds_progress prog = { &c, on_progress, on_log, on_stop };
	cJSON *summary = NULL;
	rc = ds_create(&s, &o, w->dir, &prog, &summary, err);
	if (rc == DD_ECONFLICT && worker_should_stop(w))
		return DD_OK; /* stopped on request: the worker reports "aborted" */
	if (rc)
		return rc;
	if (drop_after) {
		/* the databases hold every image now; the unpacked copy would double the
		 * dataset's disk use (the archive itself stays for clones) */
		fs_rm_rf(unpacked, NULL);
	}
	const cJSON *splits = cJSON_GetObjectItemCaseSensitive(summary, "splits");
	worker_log(w, "info", "dataset ready: %d train, %d val, %d test images, %d files skipped",
		   cJSON_GetObjectItem(cJSON_GetObjectItem(splits, "train"), "images")->valueint,
		   cJSON_GetObjectItem(cJSON_GetObjectItem(splits, "val"), "images")->valueint,
		   cJSON_GetObjectItem(cJSON_GetObjectItem(splits, "test"), "images")->valueint,
		   cJSON_GetArraySize(cJSON_GetObjectItem(summary, "skipped")));
	cJSON_Delete(summary);
	return DD_OK;
}

/* A clone unpacks the original job's kept archive (uploads are used once). */
static int clone_params(cJSON *params, const char *orig_dir, struct dd_err *err)
{
	cJSON *src = cJSON_GetObjectItemCaseSensitive(params, "source");
	const char *type = str(src, "type");
	if (!type || strcmp(type, "upload") != 0)
		return DD_OK;
	char p[PATH_MAX];
	if (archive_kept_find(orig_dir, p, sizeof p)) {
		cJSON_DeleteItemFromObjectCaseSensitive(src, "file");
		cJSON_AddStringToObject(src, "file", p);
		return DD_OK;
	}
	return dd_err_set(err, DD_ECONFLICT, "the archive this dataset was made from is gone; upload it again to make a new dataset");
}

const struct job_kind dataset_job_kind = {
	.name = "dataset",
	.title = "Image classification dataset",
	.validate = validate,
	.run = run,
	.default_cpu_slots = 1,
	.clone_params = clone_params,
};
