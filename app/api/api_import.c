/* api_import.c — POST /api/v1/models/import: a model bundle (networks/bundle.h,
 * docs/bundles.md) becomes a finished model job, usable like a trained one.
 *
 * The bundle comes as a multipart form (the file in field "bundle", an optional
 * "name"), or as JSON {"upload": ID, "name"?} naming an archive sent before to
 * POST /api/v1/uploads.  It is unpacked (datasets/archive.h: no traversal, links,
 * devices, bombs) into a scratch folder under DATA/uploads with tight limits, then
 * checked as `deepdesk classify` checks a bundle: only bundle files at the top,
 * info.json's sizes and sha256 against the files, the manifest against the
 * network, the weights and labels.txt, and the model opened once.  Any failure is
 * a 400 naming the entry or file, and leaves nothing on disk: not the upload,
 * not the scratch folder, no job.
 *
 * The job is of kind "model" (not a kind of its own) so that everything that
 * takes a model takes it unchanged — classify, the bundle, `finetune.model`,
 * `network.previous`, `deepdesk classify --model DIR` — and its params carry the
 * marker {"pretrained": {"bundle", "snapshot", "sha256", "deepdesk"}} saying
 * where it came from.  Its folder is a model job's folder (jobs/kind_train.h)
 * with one snapshot and no dataset: network.prototxt, settings.json (input,
 * classes, crop_size, mean), preprocess.json (the resize mode), labels.txt,
 * mean.binaryproto and mean.png when the bundle has them, snapshot_epoch_<E>
 * .safetensors, events.jsonl with one log line, and job.json.  No worker runs:
 * the record goes queued -> running -> done at once, and job.json (which the
 * scheduler waits for before it starts a queued job) is written only once it is
 * done. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../common/version.h"
#include "../../datasets/archive.h"
#include "../../jobs/events.h"
#include "../../jobs/jobdir.h"
#include "../../networks/modeldir.h"
#include "../../jobs/sched.h"
#include "../../networks/bundle.h"
#include "../../networks/infer.h"
#include "api.h"
#include "../http/body_deadline.h"
#include "../http/server.h"
#include "../../store/store.h"

#define IMPORT_MAX_ENTRIES 16             /* a bundle has 7 files */
#define IMPORT_MAX_ENTRY (2ll << 30)      /* bytes of one file (weights) */
#define IMPORT_MAX_BYTES (4ll << 30)      /* bytes unpacked in all */
#define UPLOAD_ID_LEN 24                  /* as api_datasets.c makes them */


/* DATA/uploads/<prefix><random hex><ext> into path. */
static int scratch_path(const char *prefix, const char *ext, char *path, size_t len, struct dd_err *err)
{
	unsigned char rnd[8];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return dd_err_set(err, DD_EIO, "no randomness for a scratch name");
	char dir[PATH_MAX], hex[17];
	for (size_t i = 0; i < sizeof rnd; i++)
		sprintf(hex + 2 * i, "%02x", rnd[i]);
	jobdir_uploads(server_data_dir(), dir, sizeof dir);
	int rc = fs_mkdir_p(dir, err);
	if (rc)
		return rc;
	snprintf(path, len, "%s/%s%s%s", dir, prefix, hex, ext);
	return DD_OK;
}

/* ---- reading the request ---- */

struct form {
	char archive[PATH_MAX];  /* where the file field was stored; "" when none */
	char shown[256];         /* its file name as uploaded */
	char name[256];
	int bad;
	char why[200];
};

static int form_found(const char *key, const char *filename, char *path, size_t pathlen, void *ud)
{
	struct form *f = ud;
	if (!strcmp(key, "bundle") && filename && *filename) {
		if (f->archive[0] || !archive_is_archive_name(filename)) {
			f->bad = 1;
			snprintf(f->why, sizeof f->why, "bundle: %.100s is not one .tar.gz, .tgz or .tar file", filename);
			return MG_FORM_FIELD_STORAGE_ABORT;
		}
		if (scratch_path("import-", ".tar.gz", f->archive, sizeof f->archive, NULL) != DD_OK)
			return MG_FORM_FIELD_STORAGE_ABORT;
		snprintf(f->shown, sizeof f->shown, "%s", filename);
		snprintf(path, pathlen, "%s", f->archive);
		return MG_FORM_FIELD_STORAGE_STORE;
	}
	if (!strcmp(key, "name"))
		return MG_FORM_FIELD_STORAGE_GET;
	f->bad = 1;
	snprintf(f->why, sizeof f->why, "%.60s: unknown form field (bundle and name are known)", key);
	return MG_FORM_FIELD_STORAGE_ABORT;
}

static int form_get(const char *key, const char *value, size_t len, void *ud)
{
	struct form *f = ud;
	if (!strcmp(key, "name"))
		http_form_append(f->name, sizeof f->name, value, len);
	return MG_FORM_FIELD_HANDLE_GET;
}

/* The archive into f: a multipart form, or JSON naming an upload.  0 or the
 * status of the error sent (the stored file is then removed). */
static int read_request(struct req *r, struct form *f)
{
	const char *ct = mg_get_header(r->c, "Content-Type");
	if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
		if (r->ri->content_length > server_max_upload())
			return http_error(r->c, 413, "too_large", "the upload is %lld bytes, over the %lld-byte limit",
					  r->ri->content_length, server_max_upload());
		struct mg_form_data_handler h = { form_found, form_get, http_form_stored, f };
		int n = mg_handle_form_request(r->c, &h);
		if (!f->bad && n >= 0)
			body_deadline_done(r->c); /* all of it came; a form cut short is still watched */
		if (f->bad || n < 0 || !f->archive[0]) {
			if (f->archive[0])
				unlink(f->archive);
			return http_error(r->c, 400, "invalid", "%s",
					  f->bad ? f->why : n < 0 ? "malformed multipart form" :
								    "bundle: required, the bundle .tar.gz as a file field");
		}
		return 0;
	}
	cJSON *body = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	static const char *const fields[] = { "upload", "name", NULL };
	if ((rc = http_only_fields(r->c, body, fields, ""))) {
		cJSON_Delete(body);
		return rc;
	}
	const char *id = cJSON_GetStringValue(json_get(body, "upload"));
	const char *name = cJSON_GetStringValue(json_get(body, "name"));
	if (json_get(body, "name") && !name)
		rc = http_error(r->c, 400, "invalid", "name: must be a string");
	else if (!id)
		rc = http_error(r->c, 400, "invalid",
				"upload: required, the id POST /api/v1/uploads gave (or send a multipart form with the file "
				"in field \"bundle\")");
	else if (!api_upload_find(r, id, f->archive, sizeof f->archive))
		rc = http_error(r->c, 400, "invalid", "upload: no upload has this id (uploads are used once)");
	else {
		snprintf(f->shown, sizeof f->shown, "upload %s", id);
		snprintf(f->name, sizeof f->name, "%s", name ? name : "");
	}
	cJSON_Delete(body);
	return rc;
}

/* ---- checking the bundle ---- */

/* Only bundle files at the top of dir: no sub-folders, nothing else. */
static int check_names(const char *dir, const char *shown, struct dd_err *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return dd_err_sys(err, DD_EIO, errno, "cannot read %s", dir);
	struct dirent *e;
	int rc = DD_OK;
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[PATH_MAX + 256];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			rc = dd_err_set(err, DD_EINVAL,
					"%s: entry \"%.100s/\" is a folder; a bundle holds its files at the top, no folders",
					shown, e->d_name);
		else if (!bundle_name_ok(e->d_name))
			rc = dd_err_set(err, DD_EINVAL, "%s: entry \"%.100s\" is not a bundle file (%s and info.json)",
					shown, e->d_name, "network.prototxt, deploy.prototxt, weights.safetensors, labels.txt, "
					"mean.binaryproto, mean.png");
	}
	closedir(d);
	if (rc)
		return rc;
	char info[PATH_MAX + 16];
	snprintf(info, sizeof info, "%s/" BUNDLE_MANIFEST, dir);
	if (access(info, F_OK) != 0)
		return dd_err_set(err, DD_EINVAL, "%s: no info.json at the top: not a model bundle", shown);
	return DD_OK;
}

/* infer_open on a thread of its own: oneDNN's set-up needs more stack than a
 * CivetWeb request thread has (app/api/api_infer.c). */
struct open_task {
	const char *dir;
	int rc;
	struct dd_err err;
};

static void *open_main(void *arg)
{
	struct open_task *t = arg;
	struct infer *h = NULL;
	t->rc = infer_open(t->dir, NULL, &h, &t->err);
	infer_close(h);
	return NULL;
}

static int open_model(const char *dir, struct dd_err *err)
{
	struct open_task t = { .dir = dir };
	pthread_attr_t at;
	pthread_t th;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 16u << 20);
	int prc = pthread_create(&th, &at, open_main, &t);
	pthread_attr_destroy(&at);
	if (prc)
		return dd_err_set(err, DD_EIO, "cannot start a thread to open the model");
	pthread_join(th, NULL);
	if (t.rc)
		*err = t.err;
	return t.rc;
}

/* ---- the job ---- */

static int write_json(const char *dir, const char *file, cJSON *j, struct dd_err *err)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	char *text = j ? cJSON_Print(j) : NULL;
	if (!text)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	int rc = fs_write_file_atomic(path, text, strlen(text), err);
	free(text);
	return rc;
}

/* Move the bundle's files from src into the job folder dst and write what a model
 * folder has besides; label is the snapshot's. */
static int fill_folder(const char *src, const char *dst, const cJSON *man, const char *label, struct dd_err *err)
{
	int rc = fs_mkdir_p(dst, err);
	if (rc)
		return rc;
	static const char *const keep[][2] = { { "network.prototxt", "network.prototxt" },
					       { "labels.txt", "labels.txt" },
					       { "mean.binaryproto", "mean.binaryproto" },
					       { "mean.png", "mean.png" },
					       { "weights.safetensors", NULL } };
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
		char from[PATH_MAX + 64], to[PATH_MAX + 64];
		snprintf(from, sizeof from, "%s/%s", src, keep[i][0]);
		if (keep[i][1])
			snprintf(to, sizeof to, "%s/%s", dst, keep[i][1]);
		else
			modeldir_snapshot_path(dst, label, MODELDIR_SNAP_WEIGHTS, to, sizeof to);
		if (access(from, F_OK) != 0)
			continue;
		if (rename(from, to) != 0)
			return dd_err_sys(err, DD_EIO, errno, "cannot move %s into %s", keep[i][0], dst);
	}
	const cJSON *in = json_get(man, "input");
	cJSON *settings = cJSON_CreateObject(), *shape = cJSON_AddArrayToObject(settings, "input");
	static const char *const dims[] = { "channels", "height", "width" };
	for (int i = 0; i < 3; i++)
		cJSON_AddItemToArray(shape, cJSON_CreateNumber(json_get(in, dims[i])->valuedouble));
	cJSON_AddNumberToObject(settings, "classes", json_get(man, "classes")->valuedouble);
	cJSON_AddNumberToObject(settings, "crop_size", json_get(man, "crop")->valuedouble);
	cJSON_AddStringToObject(settings, "mean", cJSON_GetStringValue(json_get(json_get(man, "mean"), "mode")));
	cJSON_AddStringToObject(settings, "network_name", "imported bundle");
	cJSON *pre = cJSON_CreateObject();
	cJSON_AddStringToObject(pre, "resize_mode", cJSON_GetStringValue(json_get(man, "resize_mode")));
	for (int i = 0; i < 3; i++)
		cJSON_AddNumberToObject(pre, dims[i], json_get(in, dims[i])->valuedouble);
	cJSON *imported = cJSON_Duplicate(man, 1);
	rc = write_json(dst, "settings.json", settings, err);
	if (!rc)
		rc = write_json(dst, "preprocess.json", pre, err);
	if (!rc)
		rc = write_json(dst, "bundle_info.json", imported, err); /* not info.json: that marks a bundle */
	cJSON_Delete(settings);
	cJSON_Delete(pre);
	cJSON_Delete(imported);
	if (rc)
		return rc;
	struct events_writer w;
	if ((rc = events_writer_open(&w, dst, err)))
		return rc;
	cJSON *ev = events_new("log");
	cJSON_AddStringToObject(ev, "level", "info");
	cJSON_AddStringToObject(ev, "message", "imported from a model bundle; no training ran here");
	rc = events_append(&w, ev, err);
	cJSON_Delete(ev);
	events_writer_close(&w);
	return rc;
}

/* job.json, as the scheduler writes it for the jobs it queues. */
static int write_job_json(int64_t id, const char *dir, struct dd_err *err)
{
	cJSON *job = NULL;
	int rc = store_job_json(id, 1, &job, err);
	if (rc)
		return rc;
	static const char *const drop[] = { "state",   "progress", "eta_s", "started_at",	  "finished_at",
					    "error",   "events",   "pid",   "exit",	  "abort_requested",
					    "history", "children", NULL };
	for (int i = 0; drop[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(job, drop[i]);
	rc = write_json(dir, "job.json", job, err);
	cJSON_Delete(job);
	return rc;
}

int api_models_import(struct req *r)
{
	struct form f = { 0 };
	int status = read_request(r, &f);
	if (status)
		return status;
	char scratch[PATH_MAX] = "", dir[PATH_MAX] = "", label[MODELDIR_LABEL_MAX] = "1";
	struct dd_err err = { 0 };
	cJSON *man = NULL;
	int64_t id = 0;
	int rc;

	/* unpack and check, as `deepdesk classify` does */
	struct archive_limits lim;
	archive_limits_default(&lim);
	lim.max_entries = IMPORT_MAX_ENTRIES;
	lim.max_entry_bytes = IMPORT_MAX_ENTRY;
	lim.max_bytes = IMPORT_MAX_BYTES;
	int64_t files = 0;
	if ((rc = scratch_path("import-", ".d", scratch, sizeof scratch, &err)) ||
	    (rc = archive_unpack(f.archive, f.shown, scratch, &lim, &files, &err)) ||
	    (rc = check_names(scratch, f.shown, &err)))
		goto bad;
	char info[PATH_MAX + 16];
	char *text = NULL;
	snprintf(info, sizeof info, "%s/" BUNDLE_MANIFEST, scratch);
	if ((rc = fs_read_file(info, 16u << 20, &text, NULL, &err)))
		goto bad;
	struct dd_err jerr = { 0 };
	int jrc = json_parse_str(text, "info.json", &man, &jerr);
	free(text);
	if (jrc || !cJSON_IsObject(man)) {
		rc = dd_err_set(&err, DD_EINVAL, "%s: info.json is not a JSON object%s%s%s", f.shown,
				jrc ? " (" : "", jrc ? jerr.msg : "", jrc ? ")" : "");
		goto bad;
	}
	if ((rc = open_model(scratch, &err))) {
		/* name the bundle as the user knows it, not by the scratch folder */
		char *at = strstr(err.msg, scratch);
		if (at) {
			char msg[sizeof err.msg];
			snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - err.msg), err.msg, f.shown, at + strlen(scratch));
			snprintf(err.msg, sizeof err.msg, "%s", msg);
		} else
			dd_err_prefix(&err, "%s", f.shown);
		goto bad;
	}
	const char *snap = cJSON_GetStringValue(json_get(man, "snapshot"));
	if (snap && modeldir_label_ok(snap, NULL) && strlen(snap) < sizeof label)
		snprintf(label, sizeof label, "%s", snap);

	/* the job: queued (no job.json: the scheduler leaves it), its folder, done */
	char name[300];
	snprintf(name, sizeof name, "%s", f.name[0] ? f.name : "imported model");
	cJSON *params = cJSON_CreateObject(), *pre = cJSON_AddObjectToObject(params, "pretrained");
	cJSON_AddStringToObject(pre, "bundle", f.shown);
	cJSON_AddStringToObject(pre, "snapshot", label);
	const char *sha = cJSON_GetStringValue(json_get(json_get(json_get(man, "files"), "weights.safetensors"), "sha256"));
	cJSON_AddStringToObject(pre, "sha256", sha ? sha : "");
	const char *made_by = cJSON_GetStringValue(json_get(man, "deepdesk"));
	cJSON_AddStringToObject(pre, "deepdesk", made_by ? made_by : "");
	char *params_json = cJSON_PrintUnformatted(params);
	cJSON_Delete(params);
	if (!params_json) {
		rc = dd_err_set(&err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	rc = store_job_insert("model", name, server_user(r), params_json, "{\"cpu_slots\":1,\"gpus\":[]}", NULL, 0, &id,
			      &err);
	free(params_json);
	if (rc)
		goto fail;
	sched_job_dir(id, dir, sizeof dir);
	char evpath[PATH_MAX + 32];
	struct stat evst;
	jobdir_file(dir, JOBDIR_EVENTS, evpath, sizeof evpath);
	if ((rc = fill_folder(scratch, dir, man, label, &err)) || (rc = store_job_started(id, 0, 0, &err)) ||
	    (rc = store_job_tail_save(id, stat(evpath, &evst) == 0 ? (int64_t)evst.st_size : 0, 1, &err)) ||
	    (rc = store_job_progress(id, 1.0, 0, &err)) || (rc = store_job_move(id, JOB_DONE, NULL, 0, -1, &err)) ||
	    (rc = write_job_json(id, dir, &err)))
		goto fail;
	fs_rm_rf(scratch, NULL);
	api_upload_drop(f.archive);
	cJSON_Delete(man);
	sched_job_changed(id);
	cJSON *job = NULL;
	if (store_job_json(id, 1, &job, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "job", job);
	return http_json(r->c, 201, out);

bad:
	/* what the bundle is: a 400 whatever the kind of fault */
	if (rc != DD_ENOMEM && rc != DD_EIO && rc != DD_ENOSPC)
		err.code = rc = DD_EINVAL;
fail:
	if (id) {
		store_job_delete(id, NULL);
		fs_rm_rf(dir, NULL);
	}
	if (scratch[0])
		fs_rm_rf(scratch, NULL);
	api_upload_drop(f.archive);
	cJSON_Delete(man);
	if (rc == DD_EINVAL)
		return http_error(r->c, 400, "invalid", "%s", err.msg);
	return http_error_dd(r->c, &err);
}
