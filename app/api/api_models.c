/* api_models.c — /api/v1/models: start training jobs (kind "model", jobs/kind_train.c),
 * one or a sweep of them, list and read them with their snapshots and last metrics,
 * resume or extend one, download a snapshot, and delete snapshots (one, or all but
 * the last N or the best).
 *
 * Creating a model is checked by the model kind with the caller (sched_validate,
 * the same for POST /api/v1/jobs): the dataset is a finished image classification
 * dataset the caller may use, a previous or fine-tuned model is one they may use
 * and has what is asked of it, and the network fits the dataset's image shape, so
 * that a bad network is refused at once with the layer and LINE:COL, not minutes
 * later by a worker.  The dataset (and a previous or fine-tuned model) become the
 * job's parents, so they cannot be deleted while the model exists. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../jobs/events.h"
#include "../../jobs/job.h"
#include "../../jobs/jobdir.h"
#include "../../jobs/kind_train.h" /* train_model_fields */
#include "../../networks/modeldir.h"
#include "../../jobs/sched.h"
#include "../../networks/net.h"
#include "api.h"
#include "../http/perm.h"
#include "../http/server.h"
#include "../../store/store.h"


static int64_t id_of(const cJSON *v) { return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0; }

/* {"job": detail} as POST /api/v1/datasets answers. */
static int reply_job(struct req *r, int status, int64_t id)
{
	struct dd_err err = { 0 };
	cJSON *job = NULL;
	if (store_job_json(id, 1, &job, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "job", job);
	return http_json(r->c, status, out);
}

/* ---- creating, and sweeps ---- */

#define SWEEP_MAX 64 /* combinations one request may create */

/* One axis of a sweep: v (body's solver.base_lr or batch_size, may be NULL) is one
 * value or an array of distinct numbers; vals[] gets them (borrowed from v; one
 * NULL when v is absent), *n their count.  0 or the status of the 400 sent. */
static int sweep_axis(struct req *r, cJSON *v, const char *field, cJSON **vals, int *n)
{
	*n = 1;
	vals[0] = v;
	if (!cJSON_IsArray(v))
		return 0; /* one value: validate() judges it */
	int k = cJSON_GetArraySize(v), i = 0;
	if (k < 1 || k > SWEEP_MAX)
		return http_error(r->c, 400, "invalid", "%s: a sweep lists 1 to %d numbers; this list has %d", field,
				  SWEEP_MAX, k);
	cJSON *e;
	cJSON_ArrayForEach(e, v)
	{
		if (!cJSON_IsNumber(e))
			return http_error(r->c, 400, "invalid", "%s: item %d of the sweep is not a number", field, i + 1);
		for (int j = 0; j < i; j++)
			if (vals[j]->valuedouble == e->valuedouble)
				return http_error(r->c, 400, "invalid", "%s: %g is listed twice in the sweep", field,
						  e->valuedouble);
		vals[i++] = e;
	}
	*n = k;
	return 0;
}

/* " lr=0.01 bs=32": what sets a sweep's combination apart (the axes with more than
 * one value), into buf; "" for a single model. */
static void combo_text(char *buf, size_t len, const cJSON *lr, int nl, const cJSON *bs, int nb)
{
	buf[0] = 0;
	if (nl > 1)
		snprintf(buf, len, " lr=%g", lr->valuedouble);
	if (nb > 1)
		snprintf(buf + strlen(buf), len - strlen(buf), " bs=%g", bs->valuedouble);
}

/* POST /api/v1/models.  solver.base_lr and batch_size may each be a list (DIGITS'
 * sweeps): one job per combination, all in one group (the body's, or the name).
 * Every combination is validated and checked against the dataset before the first
 * job is created, so a bad one creates none.  One combination answers
 * {"job": detail}; several {"group", "models": [detail, …]}. */
int api_models_create(struct req *r)
{
	cJSON *body = NULL, *detached = NULL, *out = NULL;
	cJSON *params[SWEEP_MAX] = { 0 };
	int64_t ids[SWEEP_MAX];
	int made = 0, nc = 0;
	struct perm_caller pc;
	perm_caller(r, &pc);
	char (*names)[256] = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	/* labs (api_classes.c): a lab preset's settings under the body's unlocked fields */
	if (json_get(body, "preset") && (rc = api_preset_apply(r, &body)))
		goto out;
	struct dd_err err = { 0 };
	if (json_get(body, "resume")) {
		rc = http_error(r->c, 400, "invalid", "resume: a new model starts from scratch; resume one with POST /api/v1/models/{id}/resume");
		goto out;
	}
	/* the job's name, and the kind's own fields (jobs/kind_train.h) */
	detached = cJSON_DetachItemFromObjectCaseSensitive(body, "name");
	if ((rc = http_only_fields(r->c, body, train_model_fields, "")))
		goto out;
	if (!cJSON_IsString(detached) || !*detached->valuestring || strlen(detached->valuestring) > 200) {
		rc = http_error(r->c, 400, "invalid", "name: required, a string of 1 to 200 characters");
		goto out;
	}
	cJSON *lrs[SWEEP_MAX], *bss[SWEEP_MAX];
	int nl, nb;
	cJSON *solver = json_get(body, "solver");
	if ((rc = sweep_axis(r, cJSON_IsObject(solver) ? json_get(solver, "base_lr") : NULL, "solver.base_lr", lrs, &nl)) ||
	    (rc = sweep_axis(r, json_get(body, "batch_size"), "batch_size", bss, &nb)))
		goto out;
	if (nl * nb > SWEEP_MAX) {
		rc = http_error(r->c, 400, "invalid",
				"solver.base_lr, batch_size: %d learning rates times %d batch sizes is %d jobs; a sweep makes at most %d",
				nl, nb, nl * nb, SWEEP_MAX);
		goto out;
	}
	nc = nl * nb;
	if (!(names = calloc((size_t)nc, sizeof *names))) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	cJSON *group = json_get(body, "group");
	for (int i = 0; i < nc; i++) {
		const cJSON *lr = lrs[i / nb], *bs = bss[i % nb];
		char what[64];
		combo_text(what, sizeof what, lr, nl, bs, nb);
		snprintf(names[i], sizeof names[i], "%s%s", detached->valuestring, what);
		cJSON *p = params[i] = cJSON_Duplicate(body, 1);
		if (!p) {
			rc = http_error(r->c, 500, "internal", "out of memory");
			goto out;
		}
		if (cJSON_IsArray(json_get(json_get(p, "solver"), "base_lr")))
			cJSON_ReplaceItemInObjectCaseSensitive(json_get(p, "solver"), "base_lr", cJSON_Duplicate(lr, 0));
		if (cJSON_IsArray(json_get(p, "batch_size")))
			cJSON_ReplaceItemInObjectCaseSensitive(p, "batch_size", cJSON_Duplicate(bs, 0));
		if (nc > 1 && !group)
			cJSON_AddStringToObject(p, "group", detached->valuestring);
		char in_combo[96] = "";
		if (nc > 1)
			snprintf(in_combo, sizeof in_combo, " (the sweep's combination%s)", what);
		/* every rule, with the caller (the dataset and models it names are theirs
		 * to use, the network fits): the kind's, as for POST /api/v1/jobs */
		if (sched_validate("model", p, &pc.c, NULL, 0, NULL, &err) != DD_OK) {
			size_t l = strlen(err.msg);
			snprintf(err.msg + l, sizeof err.msg - l, "%s", in_combo);
			rc = http_error_dd(r->c, &err);
			goto out;
		}
	}
	for (; made < nc; made++) {
		if (sched_submit("model", names[made], &pc.c, params[made], 0, NULL, 0, &ids[made], &err) != DD_OK) {
			/* the store failed midway: take back what was queued, so that a
			 * sweep is all there or not at all */
			for (int i = 0; i < made; i++) {
				struct dd_err ignore = { 0 };
				if (sched_abort(ids[i], &ignore) == DD_OK || ignore.code == DD_ECONFLICT)
					sched_delete(ids[i], &ignore);
			}
			rc = http_error_dd(r->c, &err);
			goto out;
		}
	}
	if (nc == 1) {
		rc = reply_job(r, 202, ids[0]);
		goto out;
	}
	out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "group", cJSON_GetStringValue(json_get(params[0], "group")));
	cJSON *models = cJSON_AddArrayToObject(out, "models");
	for (int i = 0; i < nc; i++) {
		cJSON *job = NULL;
		if (store_job_json(ids[i], 1, &job, &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		cJSON_AddItemToArray(models, job);
	}
	rc = http_json(r->c, 202, out);
	out = NULL;
out:
	cJSON_Delete(out);
	for (int i = 0; i < nc; i++)
		cJSON_Delete(params[i]);
	free(names);
	cJSON_Delete(detached);
	cJSON_Delete(body);
	return rc;
}

/* ---- reading ---- */

struct scan {
	cJSON *train, *val, *result; /* the last of each */
};

static void scan_event(void *vctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct scan *s = vctx;
	const char *type = cJSON_GetStringValue(json_get(ev, "type"));
	if (!type)
		return;
	cJSON **slot = NULL;
	if (strcmp(type, "metric") == 0) {
		const char *kind = cJSON_GetStringValue(json_get(ev, "kind"));
		slot = kind && !strcmp(kind, "train") ? &s->train : kind && !strcmp(kind, "val") ? &s->val : NULL;
	} else if (strcmp(type, "result") == 0) {
		slot = &s->result;
	}
	if (!slot)
		return;
	cJSON_Delete(*slot);
	*slot = cJSON_Duplicate(ev, 1);
	static const char *const drop[] = { "type", "t", "eta_s", NULL };
	for (int i = 0; *slot && drop[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(*slot, drop[i]);
}

/* Add to job (a store_job_json object of kind model) what a model page shows:
 * dataset, network, settings, snapshots and the last metrics. */
static void add_model_fields(cJSON *job, int detail)
{
	int64_t id = id_of(json_get(job, "id"));
	char dir[PATH_MAX], path[PATH_MAX + 32];
	sched_job_dir(id, dir, sizeof dir);
	cJSON *params = NULL, *settings = NULL;
	modeldir_path(dir, MODELDIR_SETTINGS, path, sizeof path);
	char *text = NULL;
	if (fs_read_file(path, 8u << 20, &text, NULL, NULL) == DD_OK)
		json_parse_str(text, path, &settings, NULL);
	free(text);
	if (!cJSON_IsObject(settings)) {
		cJSON_Delete(settings);
		settings = NULL;
	}
	if (!settings) {
		/* not started yet: the params are the settings so far (job.json has them) */
		jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
		text = NULL;
		if (fs_read_file(path, 8u << 20, &text, NULL, NULL) == DD_OK) {
			cJSON *j = NULL;
			json_parse_str(text, path, &j, NULL);
			params = cJSON_DetachItemFromObjectCaseSensitive(j, "params");
			cJSON_Delete(j);
		}
		free(text);
	}
	const cJSON *src = settings ? settings : params;
	cJSON *ds = json_get(src, "dataset");
	if (cJSON_IsNumber(ds))
		cJSON_AddNumberToObject(job, "dataset", ds->valuedouble);
	else
		cJSON_AddNullToObject(job, "dataset");
	const cJSON *net = json_get(src, "network");
	char netname[96] = "";
	if (cJSON_IsString(json_get(src, "network_name")))
		snprintf(netname, sizeof netname, "%s", json_get(src, "network_name")->valuestring);
	else if (cJSON_IsString(json_get(net, "standard")))
		snprintf(netname, sizeof netname, "%s", json_get(net, "standard")->valuestring);
	else if (json_get(net, "prototxt"))
		snprintf(netname, sizeof netname, "custom");
	else if (cJSON_IsNumber(json_get(net, "previous")))
		snprintf(netname, sizeof netname, "model %lld's network", (long long)id_of(json_get(net, "previous")));
	if (netname[0])
		cJSON_AddStringToObject(job, "network", netname);
	else
		cJSON_AddNullToObject(job, "network");
	cJSON *epochs = json_get(src, "epochs");
	if (cJSON_IsNumber(epochs))
		cJSON_AddNumberToObject(job, "epochs", epochs->valuedouble);
	else
		cJSON_AddNullToObject(job, "epochs");

	struct modeldir_snapshot *snaps = NULL;
	int n = 0;
	modeldir_snapshots(dir, &snaps, &n, NULL);
	if (detail) {
		cJSON *arr = cJSON_AddArrayToObject(job, "snapshots");
		for (int i = 0; i < n; i++) {
			struct stat st;
			modeldir_snapshot_path(dir, snaps[i].label, MODELDIR_SNAP_WEIGHTS, path, sizeof path);
			if (stat(path, &st) != 0)
				continue;
			cJSON *s = cJSON_CreateObject();
			cJSON_AddNumberToObject(s, "epoch", snaps[i].epoch);
			cJSON_AddStringToObject(s, "label", snaps[i].label);
			int64_t it = modeldir_snapshot_iteration(path); /* reads the header only */
			if (it >= 0)
				cJSON_AddNumberToObject(s, "iteration", (double)it);
			cJSON_AddNumberToObject(s, "bytes", (double)st.st_size);
			char url[128];
			snprintf(url, sizeof url, "/api/v1/models/%lld/snapshots/%s", (long long)id, snaps[i].label);
			cJSON_AddStringToObject(s, "url", url);
			modeldir_snapshot_path(dir, snaps[i].label, MODELDIR_SNAP_STATE, path, sizeof path);
			cJSON_AddBoolToObject(s, "resumable", access(path, R_OK) == 0);
			cJSON_AddItemToArray(arr, s);
		}
		if (settings) {
			cJSON_AddItemToObject(job, "settings", settings);
			settings = NULL;
		} else if (params) {
			cJSON_AddItemToObject(job, "settings", params);
			params = NULL;
		} else {
			cJSON_AddNullToObject(job, "settings");
		}
	} else {
		cJSON_AddNumberToObject(job, "snapshots", n);
	}
	free(snaps);

	struct scan s = { 0 };
	struct events_tail t = { .offset = 0, .seq = 0 };
	jobdir_file(dir, JOBDIR_EVENTS, t.path, sizeof t.path);
	events_tail_poll(&t, scan_event, &s, NULL);
	cJSON *last = cJSON_AddObjectToObject(job, "last");
	cJSON_AddItemToObject(last, "train", s.train ? s.train : cJSON_CreateNull());
	cJSON_AddItemToObject(last, "val", s.val ? s.val : cJSON_CreateNull());
	if (detail)
		cJSON_AddItemToObject(job, "result", s.result ? s.result : cJSON_CreateNull());
	else
		cJSON_Delete(s.result);
	cJSON_Delete(settings);
	cJSON_Delete(params);
}

static void add_list_fields(struct req *r, cJSON *j) { add_model_fields(j, 0); }

int api_models_list(struct req *r) { return api_jobs_page(r, "model", "models", add_list_fields); }

int api_model_get(struct req *r)
{
	struct job_row row;
	int rc = api_job_row(r, "model", &row);
	cJSON *job = NULL;
	if (rc || (rc = api_job_json(r, &job)))
		return rc;
	add_model_fields(job, 1);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "model", job);
	return http_json(r->c, 200, body);
}

/* POST /api/v1/models/{id}/resume {"epochs"?: NEW_TOTAL, "snapshot"?: EPOCH}: the same
 * job back in the queue, to go on from a snapshot (the latest by default).  EPOCH is
 * a snapshot's epoch, fractional for one taken inside an epoch (1.4167), or its
 * label ("1.4167"); the snapshot needs its .solverstate. */
int api_model_resume(struct req *r)
{
	static const char *const fields[] = { "epochs", "snapshot", NULL };
	struct job_row row;
	int rc = api_job_row(r, "model", &row);
	if (rc)
		return rc;
	cJSON *body = NULL, *job = NULL;
	struct modeldir_snapshot *snaps = NULL;
	/* the body is optional: no body (or an empty one) resumes as it was */
	int has_body = r->ri->content_length > 0 ||
		       (r->ri->content_length < 0 && mg_get_header(r->c, "Transfer-Encoding"));
	if (has_body && (rc = http_read_json(r->c, &body)))
		return rc;
	if (!body)
		body = cJSON_CreateObject();
	struct dd_err err = { 0 };
	if ((rc = http_only_fields(r->c, body, fields, "")))
		goto out;
	if (row.state == JOB_QUEUED || row.state == JOB_RUNNING) {
		rc = http_error(r->c, 409, "conflict", "model %lld is %s; it can be resumed once it has ended",
				(long long)r->id, job_state_name(row.state));
		goto out;
	}
	cJSON *ep = json_get(body, "epochs"), *sn = json_get(body, "snapshot");
	if (ep && (!cJSON_IsNumber(ep) || ep->valuedouble != floor(ep->valuedouble) || ep->valuedouble < 1 ||
		   ep->valuedouble > 10000)) {
		rc = http_error(r->c, 400, "invalid", "epochs: must be an integer from 1 to 10000 (the new total)");
		goto out;
	}
	double want = -1; /* the latest */
	int sn_ok = !sn;
	if (cJSON_IsNumber(sn) && isfinite(sn->valuedouble) && sn->valuedouble >= 0 && sn->valuedouble <= 10000) {
		want = sn->valuedouble;
		sn_ok = 1;
	} else if (cJSON_IsString(sn)) {
		sn_ok = modeldir_label_ok(sn->valuestring, &want);
	}
	if (!sn_ok) {
		rc = http_error(r->c, 400, "invalid",
				"snapshot: must be the epoch of one of the model's snapshots (a number like 3 or 1.4167, or its label)");
		goto out;
	}
	char dir[PATH_MAX], path[PATH_MAX + 64];
	sched_job_dir(r->id, dir, sizeof dir);
	int n = 0;
	modeldir_snapshots(dir, &snaps, &n, NULL);
	int i = modeldir_snapshot_find(snaps, n, want);
	if (i < 0) {
		rc = sn ? http_error(r->c, 400, "invalid", "snapshot: model %lld has no snapshot at epoch %g",
				     (long long)r->id, want) :
			  http_error(r->c, 409, "conflict", "model %lld has no snapshot to resume from; clone it to train again",
				     (long long)r->id);
		goto out;
	}
	const struct modeldir_snapshot *from = &snaps[i];
	modeldir_snapshot_path(dir, from->label, MODELDIR_SNAP_STATE, path, sizeof path);
	if (access(path, R_OK) != 0) {
		rc = http_error(r->c, 409, "conflict",
				"model %lld's snapshot at epoch %s has no .solverstate beside it, so it cannot be resumed; "
				"fine-tune a new model from it instead",
				(long long)r->id, from->label);
		goto out;
	}
	if ((rc = store_job_json(r->id, 1, &job, &err)) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	cJSON *params = json_get(job, "params");
	int total = ep ? (int)ep->valuedouble : (int)id_of(json_get(params, "epochs"));
	if (total <= from->epoch) {
		rc = http_error(r->c, 400, "invalid",
				"epochs: the snapshot is at epoch %s and the model trains %d epochs in all; give a larger total",
				from->label, total);
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(params, "epochs");
	cJSON_AddNumberToObject(params, "epochs", total);
	cJSON_DeleteItemFromObjectCaseSensitive(params, "resume");
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(params, "resume"), "snapshot", from->epoch);
	struct perm_caller owner; /* the resumed run is the owner's: checked as the owner, now */
	if (perm_caller_owner(r, r->id, &owner, &err) != DD_OK || sched_requeue(r->id, params, &owner.c, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	rc = reply_job(r, 202, r->id);
out:
	free(snaps);
	cJSON_Delete(job);
	cJSON_Delete(body);
	return rc;
}

/* GET /api/v1/models/{id}/snapshots/{name}: the weights, streamed from the file;
 * {name} is the snapshot's label ("3", "1.4167"). */
int api_model_snapshot(struct req *r)
{
	struct job_row row;
	int rc = api_job_row(r, "model", &row);
	if (rc)
		return rc;
	char dir[PATH_MAX], path[PATH_MAX + 64];
	sched_job_dir(r->id, dir, sizeof dir);
	struct stat st;
	if (!modeldir_label_ok(r->name, NULL))
		return http_error(r->c, 404, "not_found",
				  "model %lld has no snapshot \"%.32s\": a snapshot is named by its epoch, like 3 or 1.4167",
				  (long long)r->id, r->name);
	modeldir_snapshot_path(dir, r->name, MODELDIR_SNAP_WEIGHTS, path, sizeof path);
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return http_error(r->c, 404, "not_found", "model %lld has no snapshot at epoch %s", (long long)r->id,
				  r->name);
	/* CivetWeb writes this answer (ranges, HEAD): its Cache-Control is server.c's
	 * static_file_cache_control, private and never stored */
	char headers[1024];
	snprintf(headers, sizeof headers,
		 "Content-Disposition: attachment; filename=\"model%lld_epoch%s.safetensors\"\r\n%s",
		 (long long)r->id, r->name, http_security_lines());
	mg_send_mime_file2(r->c, path, "application/octet-stream", headers);
	return 200;
}

/* ---- deleting snapshots ----
 *
 * Both routes are refused (409) while the job is queued or running: a running
 * worker writes snapshots and a queued resume is about to read one, and a file
 * deleted under either would turn into a failed job.  Once it has ended nothing
 * else writes the folder.  The latest snapshot is never deleted, so the model can
 * always be resumed, classified with and bundled. */

/* The validations that count, as the model page draws them: a resumed run starts
 * again from a snapshot, so a validation is superseded by a later one at the same or an
 * earlier iteration.  The best is then the first with the highest accuracy, or without
 * accuracy the first with the lowest loss (ui/js/model_view.js best()). */
struct val_point {
	double iteration, epoch, acc, loss; /* acc, loss: NAN when absent */
};

struct vals {
	struct val_point *v;
	int n, cap, oom;
};

static void val_event(void *vctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct vals *vs = vctx;
	const cJSON *it = json_get(ev, "iteration"), *ep = json_get(ev, "epoch"), *acc = json_get(ev, "accuracy"), *loss = json_get(ev, "loss");
	const char *type = cJSON_GetStringValue(json_get(ev, "type")), *kind = cJSON_GetStringValue(json_get(ev, "kind"));
	if (!type || strcmp(type, "metric") != 0 || !kind || strcmp(kind, "val") != 0 || !cJSON_IsNumber(ep) ||
	    !cJSON_IsNumber(it))
		return;
	while (vs->n && vs->v[vs->n - 1].iteration >= it->valuedouble)
		vs->n--;
	if (vs->n == vs->cap) {
		int cap = vs->cap ? vs->cap * 2 : 64;
		struct val_point *g = realloc(vs->v, (size_t)cap * sizeof *g);
		if (!g) {
			vs->oom = 1;
			return;
		}
		vs->v = g;
		vs->cap = cap;
	}
	vs->v[vs->n++] = (struct val_point){ it->valuedouble, ep->valuedouble,
					     cJSON_IsNumber(acc) ? acc->valuedouble : NAN,
					     cJSON_IsNumber(loss) ? loss->valuedouble : NAN };
}

/* The index in vs of the best validation, and *by_acc whether accuracy decided; -1
 * when there is none. */
static int val_best(const struct vals *vs, int *by_acc)
{
	int k = -1;
	*by_acc = 0;
	for (int i = 0; i < vs->n; i++)
		if (!isnan(vs->v[i].acc) && (k < 0 || vs->v[i].acc > vs->v[k].acc))
			k = i;
	if (k >= 0) {
		*by_acc = 1;
		return k;
	}
	for (int i = 0; i < vs->n; i++)
		if (!isnan(vs->v[i].loss) && (k < 0 || vs->v[i].loss < vs->v[k].loss))
			k = i;
	return k;
}

/* Delete (or with dry, only measure) the snapshots of dir whose drop[i] is set,
 * each with its .solverstate, and answer {"deleted": [{"label","epoch","bytes"}],
 * "kept": [label, …], "freed_bytes", "dry_run"} plus extra (taken over, may be
 * NULL) as "best". */
static int remove_snapshots(struct req *r, const char *dir, const struct modeldir_snapshot *snaps, int n,
			    const char *drop, int dry, cJSON *extra)
{
	static const char *const exts[] = { MODELDIR_SNAP_WEIGHTS, MODELDIR_SNAP_STATE, NULL };
	cJSON *out = cJSON_CreateObject();
	cJSON *deleted = cJSON_AddArrayToObject(out, "deleted"), *kept = cJSON_AddArrayToObject(out, "kept");
	double freed = 0;
	for (int i = 0; i < n; i++) {
		if (!drop[i]) {
			cJSON_AddItemToArray(kept, cJSON_CreateString(snaps[i].label));
			continue;
		}
		double bytes = 0;
		for (int k = 0; exts[k]; k++) {
			char path[PATH_MAX + 64];
			struct stat st;
			modeldir_snapshot_path(dir, snaps[i].label, exts[k], path, sizeof path);
			if (stat(path, &st) != 0)
				continue;
			if (!dry && unlink(path) != 0) {
				if (errno == ENOENT)
					continue; /* a second request got there first */
				struct dd_err err = { 0 };
				dd_err_sys(&err, DD_EIO, errno, "cannot delete %s", path);
				cJSON_Delete(out);
				cJSON_Delete(extra);
				return http_error_dd(r->c, &err);
			}
			bytes += (double)st.st_size;
		}
		cJSON *s = cJSON_CreateObject();
		cJSON_AddStringToObject(s, "label", snaps[i].label);
		cJSON_AddNumberToObject(s, "epoch", snaps[i].epoch);
		cJSON_AddNumberToObject(s, "bytes", bytes);
		cJSON_AddItemToArray(deleted, s);
		freed += bytes;
	}
	cJSON_AddNumberToObject(out, "freed_bytes", freed);
	cJSON_AddBoolToObject(out, "dry_run", dry);
	if (extra)
		cJSON_AddItemToObject(out, "best", extra);
	if (!dry && freed > 0)
		sched_job_changed(r->id);
	return http_json(r->c, 200, out);
}

/* The model r->id when it has ended, its folder into dir and its snapshots into
 * *snaps (caller frees); 0 or the status of the error sent. */
static int ended_model(struct req *r, char *dir, size_t len, struct modeldir_snapshot **snaps, int *n)
{
	struct job_row row;
	int rc = api_job_row(r, "model", &row);
	if (rc)
		return rc;
	if (row.state == JOB_QUEUED || row.state == JOB_RUNNING)
		return http_error(r->c, 409, "conflict",
				  "model %lld is %s; its snapshots can be deleted once it has ended (abort it first)",
				  (long long)r->id, job_state_name(row.state));
	sched_job_dir(r->id, dir, len);
	struct dd_err err = { 0 };
	if (modeldir_snapshots(dir, snaps, n, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	return 0;
}

/* DELETE /api/v1/models/{id}/snapshots/{name}: one snapshot (not the latest). */
int api_model_snapshot_delete(struct req *r)
{
	char dir[PATH_MAX];
	struct modeldir_snapshot *snaps = NULL;
	char *drop = NULL;
	int n = 0, rc = ended_model(r, dir, sizeof dir, &snaps, &n);
	if (rc)
		return rc;
	int i = 0;
	while (i < n && strcmp(snaps[i].label, r->name) != 0)
		i++;
	if (i == n)
		rc = http_error(r->c, 404, "not_found", "model %lld has no snapshot at epoch \"%.32s\"", (long long)r->id,
				r->name);
	else if (i == n - 1)
		rc = http_error(r->c, 409, "conflict",
				"the snapshot at epoch %s is model %lld's latest, kept so that it can be resumed; delete the model to remove it",
				snaps[i].label, (long long)r->id);
	else if (!(drop = calloc((size_t)n, 1)))
		rc = http_error(r->c, 500, "internal", "out of memory");
	else {
		drop[i] = 1;
		rc = remove_snapshots(r, dir, snaps, n, drop, 0, NULL);
	}
	free(drop);
	free(snaps);
	return rc;
}

/* POST /api/v1/models/{id}/snapshots/prune {"keep_last": N} | {"keep": "best"},
 * "dry_run"?: true.  keep_last keeps the N latest; best keeps the snapshot taken at
 * the best validation (val_best(); the nearest snapshot when none was taken at that
 * epoch).  The latest is kept
 * either way.  dry_run answers what would go, deleting nothing. */
int api_model_snapshots_prune(struct req *r)
{
	static const char *const fields[] = { "keep_last", "keep", "dry_run", NULL };
	cJSON *body = NULL, *extra = NULL;
	struct modeldir_snapshot *snaps = NULL;
	char *drop = NULL;
	int n = 0, rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	if ((rc = http_only_fields(r->c, body, fields, "")))
		goto out;
	cJSON *kl = json_get(body, "keep_last"), *keep = json_get(body, "keep"), *dry = json_get(body, "dry_run");
	if (!!kl == !!keep) {
		rc = http_error(r->c, 400, "invalid", "keep_last or keep: give one, {\"keep_last\": N} or {\"keep\": \"best\"}");
		goto out;
	}
	if (kl && (!cJSON_IsNumber(kl) || kl->valuedouble != floor(kl->valuedouble) || kl->valuedouble < 1 ||
		   kl->valuedouble > 10000)) {
		rc = http_error(r->c, 400, "invalid", "keep_last: must be an integer from 1 to 10000");
		goto out;
	}
	if (keep && (!cJSON_IsString(keep) || strcmp(keep->valuestring, "best") != 0)) {
		rc = http_error(r->c, 400, "invalid", "keep: must be \"best\" (or give keep_last: N)");
		goto out;
	}
	if (dry && !cJSON_IsBool(dry)) {
		rc = http_error(r->c, 400, "invalid", "dry_run: must be true or false");
		goto out;
	}
	char dir[PATH_MAX];
	if ((rc = ended_model(r, dir, sizeof dir, &snaps, &n)))
		goto out;
	if (!(drop = calloc((size_t)n + 1, 1))) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	if (kl) {
		for (int i = 0; i < n - (int)kl->valuedouble; i++)
			drop[i] = 1;
	} else {
		struct vals vs = { 0 };
		struct events_tail t = { .offset = 0, .seq = 0 };
		jobdir_file(dir, JOBDIR_EVENTS, t.path, sizeof t.path);
		events_tail_poll(&t, val_event, &vs, NULL);
		int by_acc, b = vs.oom ? -1 : val_best(&vs, &by_acc);
		if (b < 0) {
			free(vs.v);
			rc = vs.oom ? http_error(r->c, 500, "internal", "out of memory") :
				      http_error(r->c, 409, "conflict",
						 "model %lld has no validation metrics to tell the best snapshot by; use keep_last",
						 (long long)r->id);
			goto out;
		}
		struct val_point best = vs.v[b];
		free(vs.v);
		int k = -1;
		for (int i = 0; i < n; i++)
			if (k < 0 || fabs(snaps[i].epoch - best.epoch) < fabs(snaps[k].epoch - best.epoch))
				k = i;
		for (int i = 0; i < n; i++)
			drop[i] = i != k;
		extra = cJSON_CreateObject();
		cJSON_AddStringToObject(extra, "by", by_acc ? "accuracy" : "loss");
		cJSON_AddNumberToObject(extra, "value", by_acc ? best.acc : best.loss);
		cJSON_AddNumberToObject(extra, "epoch", best.epoch);
		if (k >= 0)
			cJSON_AddStringToObject(extra, "label", snaps[k].label);
	}
	if (n > 0)
		drop[n - 1] = 0; /* the latest stays */
	rc = remove_snapshots(r, dir, snaps, n, drop, cJSON_IsTrue(dry), extra);
	extra = NULL;
out:
	cJSON_Delete(extra);
	free(drop);
	free(snaps);
	cJSON_Delete(body);
	return rc;
}
