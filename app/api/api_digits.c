/* api_digits.c — DIGITS' read-only JSON routes, at DIGITS' paths and in DIGITS'
 * shapes (docs/API.md of DIGITS 6; shared/reference/digits.md §3), so that the
 * scripts written against a DIGITS server keep working:
 *
 *   GET /index.json          {"version", "jobs_dir" (admins), "datasets": [job…], "models":
 *                            [job…]}: running (queued or running) first, then the
 *                            others, each newest first
 *   GET /datasets/{id}.json  {id, name, status, directory (admins), "ParseFolderTasks":
 *                            [{name, label_count, train_count, val_count,
 *                            test_count}], "CreateDbTasks": [{name, entries,
 *                            image_width, image_height, image_channels, backend,
 *                            encoding, compression}]}
 *   GET /models/{id}.json    {id, name, status, dataset_id, directory (admins), "job id",
 *                            "creation time", "username", "framework", "image
 *                            dimensions": [H, W, C], "image resize mode", "labels
 *                            file", "mean file", "mean subtraction", "snapshot
 *                            file", …, "snapshots": [epoch, …]}
 *
 * What DIGITS got wrong is not copied: its dataset JSON swaps image_width and
 * image_height (reference §4.8); here they are the width and the height.  The
 * states map to DIGITS' names: queued "Waiting", running "Running", done "Done",
 * error "Error", aborted and interrupted "Aborted" (DIGITS marks a job that was
 * running when it stopped Aborted).  Errors keep this API's shape
 * ({"error":{"code","message"}}, app/http/http.h), which DIGITS clients read as an
 * error either way.  DIGITS' own documentation lists no GET
 * /datasets/images/classification/json or /models/images/classification/json
 * (those paths are its POST …classification.json forms that create jobs), so
 * there are none here. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../common/version.h"
#include "../../datasets/dsinfo.h"
#include "../../jobs/jobdir.h"
#include "../../networks/modeldir.h"
#include "../../jobs/sched.h"
#include "api.h"
#include "../http/perm.h"
#include "../http/server.h"
#include "../../store/store.h"


/* DIGITS' status name of one of our states. */
static const char *digits_status(const char *state)
{
	static const char *const map[][2] = { { "queued", "Waiting" }, { "running", "Running" },
					      { "done", "Done" },	  { "error", "Error" },
					      { "aborted", "Aborted" },	  { "interrupted", "Aborted" } };
	for (size_t i = 0; state && i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(state, map[i][0]))
			return map[i][1];
	return "Initialized";
}

/* DIR/file parsed, or NULL when it is missing or not JSON. */
static cJSON *read_json(const char *dir, const char *file)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	cJSON *j = NULL;
	json_read_file(path, 16u << 20, &j, NULL);
	return j;
}

/* Python's str(datetime.fromtimestamp(t)): local time, microseconds when any. */
static void creation_time(double ms, char *buf, size_t len)
{
	time_t s = (time_t)(ms / 1000);
	int us = (int)((ms - (double)s * 1000) * 1000);
	struct tm tm;
	localtime_r(&s, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	if (us > 0 && n < len)
		snprintf(buf + n, len - n, ".%06d", us);
}

/* {id, name, status} of a job as the store lists it (our list form), the fields
 * every DIGITS job has. */
static cJSON *job_base(const cJSON *job)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddNumberToObject(d, "id", json_get(job, "id")->valuedouble);
	cJSON_AddStringToObject(d, "name", cJSON_GetStringValue(json_get(job, "name")));
	cJSON_AddStringToObject(d, "status", digits_status(cJSON_GetStringValue(json_get(job, "state"))));
	return d;
}

/* What ImageModelJob.json_dict adds: DIGITS' model fields from the job's folder;
 * verbose adds the snapshots, and the folder too when paths (for whoever may see
 * server paths: perm_sees_server_paths). */
static void model_fields(cJSON *d, const cJSON *job, int verbose, int paths)
{
	int64_t id = (int64_t)json_get(job, "id")->valuedouble;
	char dir[PATH_MAX];
	sched_job_dir(id, dir, sizeof dir);
	cJSON *settings = read_json(dir, MODELDIR_SETTINGS), *pre = read_json(dir, MODELDIR_PREPROCESS);
	const cJSON *ds = json_get(settings, "dataset");
	if (cJSON_IsNumber(ds))
		cJSON_AddNumberToObject(d, "dataset_id", ds->valuedouble);
	else
		cJSON_AddNullToObject(d, "dataset_id"); /* an imported model has none */
	cJSON_AddNumberToObject(d, "job id", (double)id);
	char when[48] = "";
	if (cJSON_IsNumber(json_get(job, "created_at")))
		creation_time(json_get(job, "created_at")->valuedouble, when, sizeof when);
	cJSON_AddStringToObject(d, "creation time", when);
	cJSON_AddStringToObject(d, "username", cJSON_GetStringValue(json_get(job, "owner")));
	cJSON_AddStringToObject(d, "framework", "caffe"); /* Caffe prototxt, DIGITS' stages */
	const cJSON *in = json_get(settings, "input");
	if (cJSON_IsArray(in) && cJSON_GetArraySize(in) == 3) {
		cJSON *dims = cJSON_AddArrayToObject(d, "image dimensions"); /* [H, W, C], as DIGITS */
		static const int order[3] = { 1, 2, 0 };
		for (int i = 0; i < 3; i++)
			cJSON_AddItemToArray(dims, cJSON_CreateNumber(cJSON_GetArrayItem(in, order[i])->valuedouble));
	}
	const char *mode = cJSON_GetStringValue(json_get(pre, "resize_mode"));
	if (mode)
		cJSON_AddStringToObject(d, "image resize mode", mode);
	cJSON_AddStringToObject(d, "labels file", "labels.txt");
	char path[PATH_MAX + 32];
	modeldir_path(dir, MODELDIR_MEAN, path, sizeof path);
	if (access(path, R_OK) == 0)
		cJSON_AddStringToObject(d, "mean file", "mean.binaryproto");
	const char *mean = cJSON_GetStringValue(json_get(settings, "mean"));
	cJSON_AddStringToObject(d, "mean subtraction", mean ? mean : "image");
	struct modeldir_snapshot *snaps = NULL;
	int n = 0;
	modeldir_snapshots(dir, &snaps, &n, NULL);
	if (n > 0) {
		char file[PATH_MAX + 64];
		modeldir_snapshot_path("", snaps[n - 1].label, MODELDIR_SNAP_WEIGHTS, file, sizeof file);
		cJSON_AddStringToObject(d, "snapshot file", file + 1); /* no leading '/' */
	} else
		cJSON_AddStringToObject(d, "snapshot file", "no snapshots");
	/* one network.prototxt holds the train, val and deploy stages */
	cJSON_AddStringToObject(d, "train_val file", "network.prototxt");
	cJSON_AddStringToObject(d, "deploy file", "network.prototxt");
	cJSON_AddStringToObject(d, "model file", "network.prototxt");
	cJSON_AddStringToObject(d, "solver file", "settings.json");
	cJSON_AddStringToObject(d, "caffe flavor", "deepdesk");
	cJSON_AddStringToObject(d, "caffe version", DD_VERSION);
	cJSON_AddStringToObject(d, "digits version", "deepdesk " DD_VERSION);
	if (verbose) {
		if (paths)
			cJSON_AddStringToObject(d, "directory", dir);
		cJSON *arr = cJSON_AddArrayToObject(d, "snapshots");
		for (int i = 0; i < n; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateNumber(snaps[i].epoch));
	}
	free(snaps);
	cJSON_Delete(settings);
	cJSON_Delete(pre);
}

/* The jobs of kind that r's user may see, running first then the rest, each newest first, as DIGITS'
 * json_dict()s into arr.  DD_OK or the store's error. */
static int list_kind(const struct req *r, const char *kind, cJSON *arr, struct dd_err *err)
{
	cJSON *all = NULL;
	int total = 0;
	int rc = store_job_list_for(perm_list_owner(r), kind, NULL, 1000000, 0, &all, &total, err);
	if (rc)
		return rc;
	for (int pass = 0; pass < 2; pass++) {
		const cJSON *job;
		cJSON_ArrayForEach(job, all)
		{
			const char *st = cJSON_GetStringValue(json_get(job, "state"));
			int running = st && (!strcmp(st, "queued") || !strcmp(st, "running"));
			if (running != (pass == 0))
				continue;
			cJSON *d = job_base(job);
			if (!strcmp(kind, "model"))
				model_fields(d, job, 0, 0);
			cJSON_AddItemToArray(arr, d);
		}
	}
	cJSON_Delete(all);
	return DD_OK;
}

int api_digits_index(struct req *r)
{
	struct dd_err err = { 0 };
	cJSON *body = cJSON_CreateObject();
	char jobs[PATH_MAX];
	jobdir_jobs(server_data_dir(), jobs, sizeof jobs);
	cJSON_AddStringToObject(body, "version", DD_VERSION);
	if (perm_sees_server_paths(r))
		cJSON_AddStringToObject(body, "jobs_dir", jobs);
	if (list_kind(r, "dataset", cJSON_AddArrayToObject(body, "datasets"), &err) ||
	    list_kind(r, "model", cJSON_AddArrayToObject(body, "models"), &err)) {
		cJSON_Delete(body);
		return http_error_dd(r->c, &err);
	}
	return http_json(r->c, 200, body);
}

/* Job r->id of kind in *job (list form) and DIGITS' view of it begun in *d
 * (job_base), both the caller's to free or send; 0 or the status of the 404 sent. */
static int find_job(struct req *r, const char *kind, cJSON **job, cJSON **d)
{
	struct dd_err err = { 0 };
	int rc = store_job_json(r->id, 0, job, &err);
	if (rc == DD_ENOENT)
		return http_error(r->c, 404, "not_found", "there is no job %lld", (long long)r->id);
	if (rc)
		return http_error_dd(r->c, &err);
	if (strcmp(cJSON_GetStringValue(json_get(*job, "kind")), kind) != 0) {
		cJSON_Delete(*job);
		*job = NULL;
		return http_error(r->c, 404, "not_found", "job %lld is not a %s", (long long)r->id, kind);
	}
	*d = job_base(*job);
	return 0;
}

int api_digits_dataset(struct req *r)
{
	cJSON *job = NULL, *d = NULL;
	int rc = find_job(r, "dataset", &job, &d);
	if (rc)
		return rc;
	char dir[PATH_MAX];
	sched_job_dir(r->id, dir, sizeof dir);
	if (perm_sees_server_paths(r))
		cJSON_AddStringToObject(d, "directory", dir);
	cJSON *parse = cJSON_AddArrayToObject(d, "ParseFolderTasks"), *dbs = cJSON_AddArrayToObject(d, "CreateDbTasks");
	cJSON *sum = NULL;
	dsinfo_read(dir, &sum, NULL); /* written when the dataset is done */
	if (sum) {
		const cJSON *opt = json_get(sum, "options"), *splits = json_get(sum, "splits");
		static const char *const names[] = { "train", "val", "test" };
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "name", "Parse Folder");
		cJSON_AddNumberToObject(p, "label_count", cJSON_GetArraySize(json_get(sum, "labels")));
		for (int i = 0; i < 3; i++) {
			char key[16];
			snprintf(key, sizeof key, "%s_count", names[i]);
			const cJSON *n = json_get(json_get(splits, names[i]), "images");
			cJSON_AddNumberToObject(p, key, cJSON_IsNumber(n) ? n->valuedouble : 0);
		}
		cJSON_AddItemToArray(parse, p);
		for (int i = 0; i < 3; i++) {
			const cJSON *n = json_get(json_get(splits, names[i]), "images");
			if (!cJSON_IsNumber(n) || n->valuedouble <= 0)
				continue;
			cJSON *t = cJSON_CreateObject();
			char name[32];
			snprintf(name, sizeof name, "Create DB (%s)", names[i]);
			cJSON_AddStringToObject(t, "name", name);
			cJSON_AddNumberToObject(t, "entries", n->valuedouble);
			static const char *const dims[][2] = { { "image_width", "width" },
							       { "image_height", "height" },
							       { "image_channels", "channels" } };
			for (int k = 0; k < 3; k++) {
				const cJSON *v = json_get(opt, dims[k][1]);
				cJSON_AddNumberToObject(t, dims[k][0], cJSON_IsNumber(v) ? v->valuedouble : 0);
			}
			cJSON_AddStringToObject(t, "backend", "lmdb");
			const char *enc = cJSON_GetStringValue(json_get(opt, "encoding"));
			cJSON_AddStringToObject(t, "encoding", enc ? enc : "none");
			cJSON_AddStringToObject(t, "compression", "none");
			cJSON_AddItemToArray(dbs, t);
		}
		cJSON_Delete(sum);
	}
	cJSON_Delete(job);
	return http_json(r->c, 200, d);
}

int api_digits_model(struct req *r)
{
	cJSON *job = NULL, *d = NULL;
	int rc = find_job(r, "model", &job, &d);
	if (rc)
		return rc;
	model_fields(d, job, 1, perm_sees_server_paths(r));
	cJSON_Delete(job);
	return http_json(r->c, 200, d);
}
