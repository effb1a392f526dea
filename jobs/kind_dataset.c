/* kind_dataset.c — the "dataset" job kind: a worker that builds an image dataset
 * into its job folder with datasets/create.
 *
 * params = {
 *   "source": {"type":"folder", "train":DIR, "val"?:DIR, "test"?:DIR}
 *           | {"type":"upload", "upload":ID | "archive_of":DATASET_JOB_ID, "name"?:ORIGINAL_NAME,
 *              "train_list"?, "val_list"?, "test_list"?, "labels"?  (names inside it)}
 *           | {"type":"lists", "train":FILE, "val"?:FILE, "test"?:FILE,
 *              "labels":FILE, "base"?:DIR (the train list's folder)}
 *           | {"type":"example", "name":"fashion-mnist"},
 *   "options": { see ds_options_from_json },
 *   "group"?: "…",
 *   "task"?: "classification" (the default) | "segmentation",
 *   "colormap"?: {"text": "R G B lines"} | {"upload": ID of a .txt upload}   (segmentation)
 * }
 * A segmentation dataset (datasets/segment.c) takes an upload whose archive holds
 * images/ and labels/, a server folder {"type":"folder", "train":DIR, "val"?:DIR}
 * of the same shape, or {"type":"example", "name":"segmentation"}; its colour map
 * is checked line by line in validate, and an uploaded one is read there and
 * kept inline, so the worker never reads an upload it was not given.
 * validate() with a caller checks every server path against --data-root (after
 * realpath, so a symlink or ".." leading out is refused) and takes an upload by
 * its id only, whichever route the job came by; the caps on unpacking are the
 * server's, never the params'.  The worker checks each path again against the
 * guard the scheduler wrote into job.json (worker_path_allowed) before it reads
 * anything, and moves only DATA/uploads/<id>.<ext> into its own folder.  An
 * uploaded archive is unpacked into JOB/source/ and that copy deleted once the
 * databases exist; the archive stays (JOB/archive.<ext>) for clones, which name
 * the original in source.archive_of. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../datasets/archive.h"
#include "../datasets/create.h"
#include "../datasets/dsinfo.h"
#include "../datasets/example.h"
#include "../datasets/segment.h"
#include "job.h"
#include "jobdir.h"
#include "kind_check.h"
#include "worker.h"

static const char *str(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* The fields each source type takes. */
static const char *const folder_fields[] = { "type", "train", "val", "test", NULL };
static const char *const lists_fields[] = { "type", "train", "val", "test", "labels", "base", NULL };
static const char *const upload_fields[] = { "type", "upload", "archive_of", "name", "train_list",
					     "val_list", "test_list", "labels", NULL };
static const char *const example_fields[] = { "type", "name", NULL };

static int only(const cJSON *o, const char *const *allowed, const char *where, struct dd_err *err)
{
	const char *name = json_unknown_field(o, allowed);
	if (!name)
		return DD_OK;
	if (!strcmp(name, "file"))
		return dd_err_set(err, DD_EINVAL, "%sfile: unknown field; give an upload by its id, {\"upload\": ID}", where);
	if (!strcmp(name, "limits"))
		return dd_err_set(err, DD_EINVAL,
				  "%slimits: unknown field; the caps on unpacking are the server's "
				  "(--archive-max-files, --archive-max-mib)", where);
	return dd_err_set(err, DD_EINVAL, "%s%s: unknown field", where, name);
}

static int is_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 9007199254740991.0 &&
	       v->valuedouble == (double)(int64_t)v->valuedouble;
}

/* The rules of a dataset's source, with the caller: server paths below
 * --data-root (resolved), an upload by its id, a clone's archive from a dataset
 * the caller may use, the example installed. */
static int check_source(cJSON *src, const char *type, const struct job_caller *who, struct dd_err *err)
{
	int rc;
	if (strcmp(type, "folder") == 0)
		return (rc = kind_server_path(who, src, "source.", "train", 1, err)) ||
				       (rc = kind_server_path(who, src, "source.", "val", 0, err)) ?
			       rc :
			       kind_server_path(who, src, "source.", "test", 0, err);
	if (strcmp(type, "lists") == 0) {
		if ((rc = kind_server_path(who, src, "source.", "train", 1, err)) ||
		    (rc = kind_server_path(who, src, "source.", "val", 0, err)) ||
		    (rc = kind_server_path(who, src, "source.", "test", 0, err)) ||
		    (rc = kind_server_path(who, src, "source.", "labels", 1, err)))
			return rc;
		if (!cJSON_GetObjectItemCaseSensitive(src, "base")) {
			/* the train list's folder (resolved above, so it has a '/') */
			char base[PATH_MAX];
			snprintf(base, sizeof base, "%s", str(src, "train"));
			char *slash = strrchr(base, '/');
			if (slash)
				*(slash == base ? slash + 1 : slash) = 0;
			cJSON_AddStringToObject(src, "base", base);
		}
		return kind_server_path(who, src, "source.", "base", 1, err);
	}
	if (strcmp(type, "upload") == 0) {
		const char *id = str(src, "upload");
		const cJSON *of = cJSON_GetObjectItemCaseSensitive(src, "archive_of");
		if (of) {
			/* a clone's: the kept archive of a dataset job the caller may use */
			char dir[PATH_MAX], kept[PATH_MAX];
			if (!is_id(of))
				return dd_err_set(err, DD_EINVAL, "source.archive_of: must be a dataset job id");
			if ((rc = kind_use_job(who, NULL, (int64_t)of->valuedouble, "dataset", "source.archive_of", NULL,
					       dir, sizeof dir, err)))
				return rc;
			if (!archive_kept_find(dir, kept, sizeof kept))
				return dd_err_set(err, DD_ECONFLICT,
						  "the archive this dataset was made from is gone; upload it again to make a new dataset");
			return DD_OK;
		}
		char path[PATH_MAX];
		/* another user's upload reads as none: ids tell nothing */
		if (!kind_upload_path(who->server->data_dir, id, path, sizeof path) || !kind_upload_usable(who, path))
			return dd_err_set(err, DD_EINVAL, "source.upload: no upload has this id (uploads are used once)");
		return DD_OK;
	}
	if (!example_fashion_mnist_available())
		return dd_err_set(err, DD_EINVAL,
				  "source: Fashion-MNIST is not installed on the server (apt-get install dataset-fashion-mnist)");
	return DD_OK;
}

static int is_segmentation(const cJSON *params)
{
	const char *t = str(params, "task");
	return t && strcmp(t, "segmentation") == 0;
}

#define COLORMAP_CAP (64u << 10)

/* A segmentation dataset's task-specific rules: the sources it takes, and its
 * colour map, parsed here so that a bad line is the submitter's error; an
 * uploaded map (who's own) is read and kept inline. */
static int validate_segmentation(cJSON *params, const char *type, const struct job_caller *who, struct dd_err *err)
{
	cJSON *src = cJSON_GetObjectItemCaseSensitive(params, "source");
	if (strcmp(type, "lists") == 0)
		return dd_err_set(err, DD_EINVAL, "source.type: a segmentation dataset comes from an upload, a folder or the example, not list files");
	if (strcmp(type, "upload") == 0 && (str(src, "train_list") || str(src, "labels")))
		return dd_err_set(err, DD_EINVAL, "source: a segmentation archive holds images/ and labels/ folders; list files are for classification");
	if (strcmp(type, "folder") == 0 && cJSON_GetObjectItemCaseSensitive(src, "test"))
		return dd_err_set(err, DD_EINVAL, "source.test: a segmentation dataset has train and val splits only");
	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(params, "options");
	static const char *const not_here[] = { "test_pct", "min_per_class", "max_per_class", NULL };
	for (int i = 0; not_here[i]; i++)
		if (cJSON_GetObjectItemCaseSensitive(opts, not_here[i]))
			return dd_err_set(err, DD_EINVAL,
					  "options.%s: not for a segmentation dataset (train and val splits of image and label pairs)",
					  not_here[i]);
	cJSON *cm = cJSON_GetObjectItemCaseSensitive(params, "colormap");
	if (!cm)
		return DD_OK;
	static const char *const cm_fields[] = { "text", "upload", NULL };
	int rc;
	if (!cJSON_IsObject(cm) || (rc = only(cm, cm_fields, "colormap.", err)) != DD_OK ||
	    !!str(cm, "text") == !!str(cm, "upload"))
		return cJSON_IsObject(cm) && json_unknown_field(cm, cm_fields) ?
			       dd_err_set(err, DD_EINVAL, "colormap.%s: unknown field", json_unknown_field(cm, cm_fields)) :
			       dd_err_set(err, DD_EINVAL, "colormap: {\"text\": \"R G B lines\"} or {\"upload\": ID of a .txt upload}");
	char *text = NULL;
	const char *t = str(cm, "text");
	if (!t) {
		char path[PATH_MAX];
		size_t len;
		if (!who) /* checked, read and made inline when the caller is known */
			return kind_upload_id_ok(str(cm, "upload")) ? DD_OK :
									dd_err_set(err, DD_EINVAL, "colormap.upload: not an upload id");
		if (!kind_upload_text_path(who->server->data_dir, str(cm, "upload"), path, sizeof path) ||
		    !kind_upload_usable(who, path))
			return dd_err_set(err, DD_EINVAL, "colormap.upload: no .txt upload has this id");
		if ((rc = fs_read_file(path, COLORMAP_CAP, &text, &len, err)))
			return dd_err_set(err, rc, "colormap.upload: %s", rc == DD_ETOOBIG ? "over 64 KiB" : "cannot be read");
		t = text;
	}
	if (strlen(t) > COLORMAP_CAP) {
		free(text);
		return dd_err_set(err, DD_EINVAL, "colormap.text: over 64 KiB");
	}
	uint8_t rgb[3 * SEG_MAX_CLASSES];
	int n;
	rc = seg_colormap_parse(t, "colormap", rgb, &n, err);
	if (rc == DD_OK && text) {
		cJSON_ReplaceItemInObjectCaseSensitive(params, "colormap", cJSON_CreateObject());
		cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(params, "colormap"), "text", text);
	}
	free(text);
	return rc;
}

static int validate(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err)
{
	static const char *const top[] = { "source", "options", "group", "task", "colormap", NULL };
	(void)uses; /* a dataset uses no other job (a clone's archive_of is read, not kept as a parent) */
	int rc;
	if (!cJSON_IsObject(params))
		return dd_err_set(err, DD_EINVAL, "params: must be an object");
	if ((rc = only(params, top, "params.", err)))
		return rc;
	cJSON *src = cJSON_GetObjectItemCaseSensitive(params, "source");
	const char *type = str(src, "type");
	if (!cJSON_IsObject(src) || !type)
		return dd_err_set(err, DD_EINVAL, "source: required, an object with \"type\": upload, folder, lists or example");
	if (strcmp(type, "folder") == 0) {
		if ((rc = only(src, folder_fields, "source.", err)))
			return rc;
		if (!str(src, "train"))
			return dd_err_set(err, DD_EINVAL, "source.train: required, a folder");
	} else if (strcmp(type, "upload") == 0) {
		if ((rc = only(src, upload_fields, "source.", err)))
			return rc;
		const cJSON *of = cJSON_GetObjectItemCaseSensitive(src, "archive_of");
		if (!!str(src, "upload") == !!of)
			return dd_err_set(err, DD_EINVAL, "source.upload: required, the id of an upload (POST /api/v1/uploads)");
	} else if (strcmp(type, "example") == 0) {
		if ((rc = only(src, example_fields, "source.", err)))
			return rc;
		const char *want = is_segmentation(params) ? "segmentation" : "fashion-mnist";
		if (!str(src, "name") || strcmp(str(src, "name"), want) != 0)
			return dd_err_set(err, DD_EINVAL, "source.name: the example is \"%s\"", want);
	} else if (strcmp(type, "lists") == 0) {
		if ((rc = only(src, lists_fields, "source.", err)))
			return rc;
		if (!str(src, "train") || !str(src, "labels"))
			return dd_err_set(err, DD_EINVAL, "source: list files need train and labels (and base, by default the train list's folder)");
	} else {
		return dd_err_set(err, DD_EINVAL, "source.type: must be upload, folder, lists or example");
	}
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(params, "group");
	if (g && (!cJSON_IsString(g) || strlen(g->valuestring) > 200))
		return dd_err_set(err, DD_EINVAL, "group: must be a string of at most 200 characters");
	struct ds_options o;
	ds_options_default(&o);
	if ((rc = ds_options_from_json(cJSON_GetObjectItemCaseSensitive(params, "options"), &o, err)))
		return rc;
	const cJSON *task = cJSON_GetObjectItemCaseSensitive(params, "task");
	if (task && (!cJSON_IsString(task) ||
		     (strcmp(task->valuestring, "classification") && strcmp(task->valuestring, "segmentation"))))
		return dd_err_set(err, DD_EINVAL, "task: must be \"classification\" or \"segmentation\"");
	if (is_segmentation(params)) {
		if ((rc = validate_segmentation(params, type, who, err)))
			return rc;
	} else if (cJSON_GetObjectItemCaseSensitive(params, "colormap")) {
		return dd_err_set(err, DD_EINVAL, "colormap: only for \"task\": \"segmentation\"");
	}
	if (who && strcmp(type, "example") == 0 && is_segmentation(params))
		return DD_OK; /* made here: nothing to install */
	return who ? check_source(src, type, who, err) : DD_OK;
}

/* The worker's own check of a server path field of src (absent: fine): inside
 * the guard's --data-root folders, whatever the params say.  *out gets the
 * resolved path (into buf) or NULL. */
static int guarded(struct worker *w, const cJSON *src, const char *key, char *buf, const char **out,
		   struct dd_err *err)
{
	const char *v = str(src, key);
	*out = NULL;
	if (!v)
		return DD_OK;
	if (!worker_path_allowed(w, v, buf))
		return dd_err_set(err, DD_EPERM, "source.%s: %.300s is not below the server's --data-root folders", key, v);
	*out = buf;
	return DD_OK;
}

struct run_ctx {
	struct worker *w; /* first: worker_hook_log and worker_hook_stop read it */
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

/* Unpack an upload into JOB/source (the server's caps); its path into unpacked. */
static int unpack_upload(struct worker *w, const cJSON *src, char *unpacked, size_t len, struct dd_err *err)
{
	char file[PATH_MAX];
	int rc;
	if ((rc = worker_archive(w, src, file, sizeof file, err)))
		return rc;
	jobdir_file(w->dir, JOBDIR_SOURCE, unpacked, len);
	fs_rm_rf(unpacked, NULL);
	const char *shown = str(src, "name") ? str(src, "name") : strrchr(file, '/') + 1;
	worker_log(w, "info", "unpacking %s", shown);
	int64_t files = 0;
	struct archive_limits lim;
	worker_archive_limits(w, &lim); /* the server's caps, never the params' */
	if ((rc = archive_unpack(file, shown, unpacked, &lim, &files, err)))
		return rc;
	worker_log(w, "info", "unpacked %lld files", (long long)files);
	return DD_OK;
}

/* A segmentation dataset (datasets/segment.c) from an upload, a server folder or
 * the synthetic example. */
static int run_segmentation(struct worker *w, const cJSON *src, const char *type, struct ds_options *o,
			    struct dd_err *err)
{
	char unpacked[PATH_MAX], root[PATH_MAX], vroot[PATH_MAX], train[PATH_MAX], val[PATH_MAX];
	const char *tp = NULL, *vp = NULL;
	struct seg_source s = { 0 };
	int rc, drop_after = 0;
	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(w->params, "options");
	if (!cJSON_GetObjectItemCaseSensitive(opts, "val_pct"))
		o->val_pct = 10; /* DIGITS' segmentation default */
	if (strcmp(type, "upload") == 0) {
		if ((rc = unpack_upload(w, src, unpacked, sizeof unpacked, err)))
			return rc;
		drop_after = 1;
		tp = unpacked;
	} else if (strcmp(type, "example") == 0) {
		jobdir_file(w->dir, JOBDIR_SOURCE, unpacked, sizeof unpacked);
		fs_rm_rf(unpacked, NULL);
		worker_log(w, "info", "drawing the synthetic segmentation example (200 pairs of 128x128)");
		struct run_ctx ec = { w, fs_mono_ms() };
		drop_after = 1;
		rc = example_segmentation(unpacked, 200, 128, 128, o->seed, on_example, &ec, err);
		if (rc == DD_ECONFLICT && worker_should_stop(w))
			return DD_OK;
		if (rc)
			return rc;
		tp = unpacked;
	} else if (strcmp(type, "folder") == 0) {
		if ((rc = guarded(w, src, "train", train, &tp, err)) || (rc = guarded(w, src, "val", val, &vp, err)))
			return rc;
		if (!tp)
			return dd_err_set(err, DD_EINVAL, "source.train: required, a folder");
	} else {
		return dd_err_set(err, DD_EINVAL, "source.type: a segmentation dataset comes from an upload, a folder or the example");
	}
	if (!seg_layout_resolve(tp, root))
		return dd_err_set(err, DD_EINVAL,
				  "%s holds no images/ and labels/ folders: a segmentation source has one label per image, of the same name",
				  strcmp(type, "upload") == 0 ? "the archive" : "source.train");
	if (vp && !seg_layout_resolve(vp, vroot))
		return dd_err_set(err, DD_EINVAL, "source.val holds no images/ and labels/ folders");
	s.root = root;
	s.val_root = vp ? vroot : NULL;
	s.colormap_text = str(cJSON_GetObjectItemCaseSensitive(w->params, "colormap"), "text");
	struct run_ctx c = { w, fs_mono_ms() };
	struct ds_progress prog = { &c, on_progress, worker_hook_log, worker_hook_stop };
	cJSON *summary = NULL;
	rc = seg_create(&s, o, w->dir, &prog, &summary, err);
	if (rc == DD_ECONFLICT && worker_should_stop(w))
		return DD_OK;
	if (rc)
		return rc;
	if (drop_after)
		fs_rm_rf(unpacked, NULL);
	const cJSON *splits = cJSON_GetObjectItemCaseSensitive(summary, "splits");
	worker_log(w, "info", "segmentation dataset ready: %d classes, %d train, %d val pairs, %d files skipped",
		   cJSON_GetObjectItem(summary, "classes")->valueint,
		   cJSON_GetObjectItem(cJSON_GetObjectItem(splits, "train"), "images")->valueint,
		   cJSON_GetObjectItem(cJSON_GetObjectItem(splits, "val"), "images")->valueint,
		   cJSON_GetArraySize(cJSON_GetObjectItem(summary, "skipped")));
	cJSON_Delete(summary);
	return DD_OK;
}

static int run(struct worker *w, struct dd_err *err)
{
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(w->params, "source");
	const char *type = str(src, "type");
	if (!type)
		return dd_err_set(err, DD_EINVAL, "source.type: required");
	struct ds_options o;
	ds_options_default(&o);
	int rc = ds_options_from_json(cJSON_GetObjectItemCaseSensitive(w->params, "options"), &o, err);
	if (rc)
		return rc;
	if (is_segmentation(w->params))
		return run_segmentation(w, src, type, &o, err);
	struct ds_source s = { 0 };
	char train[PATH_MAX], val[PATH_MAX], test[PATH_MAX], unpacked[PATH_MAX];
	char lists[4][PATH_MAX];
	int drop_after = 0; /* the unpacked images are ours to remove once the databases exist */
	if (strcmp(type, "upload") == 0) {
		if ((rc = unpack_upload(w, src, unpacked, sizeof unpacked, err)))
			return rc;
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
		jobdir_file(w->dir, JOBDIR_SOURCE, unpacked, sizeof unpacked);
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
		if ((rc = guarded(w, src, "train", train, &s.folder[DS_TRAIN], err)) ||
		    (rc = guarded(w, src, "val", val, &s.folder[DS_VAL], err)) ||
		    (rc = guarded(w, src, "test", test, &s.folder[DS_TEST], err)))
			return rc;
		if (!s.folder[DS_TRAIN])
			return dd_err_set(err, DD_EINVAL, "source.train: required, a folder");
	} else if (strcmp(type, "lists") == 0) {
		if ((rc = guarded(w, src, "train", lists[0], &s.list[DS_TRAIN], err)) ||
		    (rc = guarded(w, src, "val", lists[1], &s.list[DS_VAL], err)) ||
		    (rc = guarded(w, src, "test", lists[2], &s.list[DS_TEST], err)) ||
		    (rc = guarded(w, src, "labels", lists[3], &s.labels_file, err)) ||
		    (rc = guarded(w, src, "base", unpacked, &s.list_base, err)))
			return rc;
		if (!s.list[DS_TRAIN] || !s.labels_file || !s.list_base)
			return dd_err_set(err, DD_EINVAL, "source: list files need train, labels and base");
	} else {
		return dd_err_set(err, DD_EINVAL, "source.type: must be folder, upload, lists or example");
	}
	struct run_ctx c = { w, fs_mono_ms() };
	struct ds_progress prog = { &c, on_progress, worker_hook_log, worker_hook_stop };
	cJSON *summary = NULL;
	rc = ds_create(&s, &o, w->dir, &prog, &summary, err);
	if (rc == DD_ECONFLICT && worker_should_stop(w))
		return DD_OK; /* stopped on request: the worker reports "aborted" */
	if (rc)
		return rc;
	if (drop_after) {
		/* the databases hold every image now; the unpacked copy would double the
		 * dataset's disk use (the archive itself stays for clones).  Any other way
		 * out leaves it to ended(). */
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

/* A clone unpacks the original job's kept archive (uploads are used once):
 * source.archive_of names the original, which validate checks the caller may use. */
static int clone_params(cJSON *params, int64_t orig_id, const char *orig_dir, struct dd_err *err)
{
	cJSON *src = cJSON_GetObjectItemCaseSensitive(params, "source");
	const char *type = str(src, "type");
	if (!type || strcmp(type, "upload") != 0)
		return DD_OK;
	return kind_clone_archive(src, orig_id, orig_dir,
				  "the archive this dataset was made from is gone; upload it again to make a new dataset", err);
}

/* Once the job has ended, whatever way: its unpacked images (JOB/source, from an
 * upload or the example) are not kept — the databases hold them when it is done,
 * and a failed, aborted or killed build leaves a partial copy that would only
 * count against its owner's disk quota.  The archive itself stays for clones. */
static void ended(const char *dir)
{
	char unpacked[PATH_MAX];
	jobdir_file(dir, JOBDIR_SOURCE, unpacked, sizeof unpacked);
	fs_rm_rf(unpacked, NULL);
}

/* Started again on its own folder (job.h, struct job_restart): a dataset build
 * has no snapshot, so it starts over, without the half-written databases of the
 * run that was stopped. */
static void restart(struct worker *w, const struct job_restart *how)
{
	if (!how->unfinished)
		return;
	static const char *const dbs[] = { DSINFO_DB("train"), DSINFO_DB("val"), DSINFO_DB("test"),
					   DSINFO_LABELS_DB("train"), DSINFO_LABELS_DB("val"), NULL };
	char path[PATH_MAX + 16];
	for (int i = 0; dbs[i]; i++) {
		snprintf(path, sizeof path, "%s/%s", w->dir, dbs[i]);
		fs_rm_rf(path, NULL);
	}
	worker_log(w, "info", "started again%s: building the dataset from the start", how->by);
}

const struct job_kind dataset_job_kind = {
	.name = "dataset",
	.title = "Image dataset (classification or segmentation)",
	.validate = validate,
	.run = run,
	.default_cpu_slots = 1,
	.clone_params = clone_params,
	.restart = restart,
	.ended = ended,
};
