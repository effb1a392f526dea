/* worker.c — see worker.h. */
#define _GNU_SOURCE
#include "worker.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../datasets/archive.h"
#include "executor.h"
#include "job.h"
#include "jobdir.h"
#include "kind_check.h"

/* Bytes set aside beside events.jsonl for the final status (a few lines). */
#define WORKER_EVENTS_RESERVE (64 << 10)

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
}

int worker_should_stop(const struct worker *w)
{
	(void)w;
	return stop_requested;
}

void worker_hook_log(void *ctx, const char *level, const char *msg) { worker_log(*(struct worker **)ctx, level, "%s", msg); }

int worker_hook_stop(void *ctx) { return worker_should_stop(*(struct worker **)ctx); }

static void append(struct worker *w, cJSON *ev)
{
	if (!ev)
		return;
	struct dd_err err = { 0 };
	if (events_append(&w->ev, ev, &err) != DD_OK && !w->event_failed) {
		w->event_failed = 1;
		w->event_err = err;
	}
	cJSON_Delete(ev);
}

void worker_event(struct worker *w, cJSON *ev) { append(w, ev); }

void worker_progress(struct worker *w, double fraction, double eta_s)
{
	cJSON *ev = events_new("progress");
	cJSON_AddNumberToObject(ev, "progress", fraction);
	if (eta_s >= 0)
		cJSON_AddNumberToObject(ev, "eta_s", eta_s);
	append(w, ev);
}

void worker_metric(struct worker *w, const char *name, double value, const char *step_key,
		   double step)
{
	cJSON *ev = events_new("metric");
	cJSON_AddStringToObject(ev, "name", name);
	cJSON_AddNumberToObject(ev, "value", value);
	if (step_key)
		cJSON_AddNumberToObject(ev, step_key, step);
	append(w, ev);
}

void worker_log(struct worker *w, const char *level, const char *fmt, ...)
{
	char msg[2048];
	DD_FORMAT(msg, fmt);
	cJSON *ev = events_new("log");
	cJSON_AddStringToObject(ev, "level", level);
	cJSON_AddStringToObject(ev, "msg", msg);
	append(w, ev);
}

void worker_status(struct worker *w, const char *state, const char *message)
{
	cJSON *ev = events_new("status");
	cJSON_AddStringToObject(ev, "state", state);
	if (message)
		cJSON_AddStringToObject(ev, "message", message);
	cJSON_AddNumberToObject(ev, "pid", (double)getpid());
	append(w, ev);
}

/* ---- the guard ---- */

void worker_data_dir(const struct worker *w, char *buf, size_t len)
{
	snprintf(buf, len, "%s", w->dir);
	for (int up = 0; up < 2; up++) {
		char *s = strrchr(buf, '/');
		if (s && s != buf)
			*s = 0;
	}
}

int worker_path_allowed(const struct worker *w, const char *path, char *resolved)
{
	if (!path || !*path)
		return 0;
	if (fs_path_under(path, w->dir, resolved))
		return 1;
	const cJSON *roots = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(w->job, "guard"), "roots");
	const cJSON *r;
	cJSON_ArrayForEach(r, roots)
	{
		if (cJSON_IsString(r) && *r->valuestring && fs_path_under(path, r->valuestring, resolved))
			return 1;
	}
	return 0;
}

void worker_archive_limits(const struct worker *w, struct archive_limits *l)
{
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(w->job, "guard");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(g, "max_files");
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(g, "max_bytes");
	kind_archive_limits(cJSON_IsNumber(f) ? (long long)f->valuedouble : 0,
			    cJSON_IsNumber(b) ? (long long)b->valuedouble : 0, l);
}

/* See worker.h.  The upload's path is built here from its id (kind_upload_path),
 * never taken from the params, so the one rename a worker makes outside its
 * folder is DATA/uploads/<id>.<ext> -> JOB/archive.<ext>. */
int worker_archive(struct worker *w, const cJSON *src, char *file, size_t len, struct dd_err *err)
{
	char data[PATH_MAX], path[PATH_MAX], kept[PATH_MAX];
	worker_data_dir(w, data, sizeof data);
	if (archive_kept_find(w->dir, file, len))
		return DD_OK;
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, "upload"));
	const char *old = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, "file"));
	const cJSON *of = cJSON_GetObjectItemCaseSensitive(src, "archive_of");
	if (id) {
		if (!kind_upload_path(data, id, path, sizeof path))
			return dd_err_set(err, DD_ENOENT, "source.upload: no upload has this id (uploads are used once)");
	} else if (cJSON_IsNumber(of) && of->valuedouble >= 1) {
		char dir[PATH_MAX + 32];
		jobdir_job(data, (int64_t)of->valuedouble, dir, sizeof dir);
		if (!archive_kept_find(dir, file, len))
			return dd_err_set(err, DD_ENOENT, "the archive the original job was made from is gone; upload it again");
		return DD_OK;
	} else if (old) {
		/* params from an older server: DATA/uploads/<id>.<ext> itself, nothing else */
		const char *base = strrchr(old, '/');
		const char *dot = base ? strchr(base + 1, '.') : NULL;
		char idbuf[32] = "", real[PATH_MAX], want[PATH_MAX];
		if (dot && dot - (base + 1) < (long)sizeof idbuf)
			snprintf(idbuf, sizeof idbuf, "%.*s", (int)(dot - (base + 1)), base + 1);
		if (!kind_upload_path(data, idbuf, path, sizeof path) || !realpath(old, real) || !realpath(path, want) ||
		    strcmp(real, want) != 0)
			return dd_err_set(err, DD_EPERM, "source.file: %.300s is not an upload", old);
	} else {
		return dd_err_set(err, DD_EINVAL, "source.upload: required, the id of an upload");
	}
	archive_kept_path(w->dir, path, kept, sizeof kept);
	/* the upload becomes the job's own archive (a rename inside the data folder),
	 * so that a clone can unpack it again */
	if (rename(path, kept) != 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot keep the upload");
	char side[PATH_MAX + 8];
	jobdir_upload_owner(path, side, sizeof side);
	unlink(side); /* the job's folder counts against its owner now */
	snprintf(file, len, "%s", kept);
	return DD_OK;
}

/* ---- starting again where an earlier run of this folder stopped ---- */

/* What an earlier run of this folder left, for the kind's restart hook (job.h,
 * struct job_restart): its last status in the event log, and whether the cluster
 * started this run again. */
static void restart_kind(struct worker *w, const struct job_kind *kind)
{
	char state[16], by[64] = "";
	if (!kind->restart)
		return;
	events_last_state(w->dir, state, sizeof state);
	const char *restarts = getenv("SLURM_RESTART_COUNT");
	int restarted = restarts && atoi(restarts) > 0;
	if (restarted)
		snprintf(by, sizeof by, " by Slurm, restart %.32s", restarts);
	struct job_restart how = {
		.last_state = state,
		.unfinished = strcmp(state, "running") == 0 || strcmp(state, "interrupted") == 0,
		.by_cluster = restarted,
		.by = by,
	};
	kind->restart(w, &how);
}

/* Under Slurm a SIGTERM is an abort only when the server left its marker in the
 * folder; otherwise Slurm is requeueing, preempting or timing the job out. */
static int stopped_by_cluster(const char *dir)
{
	if (!getenv("SLURM_JOB_ID"))
		return 0;
	char path[PATH_MAX + 32];
	jobdir_file(dir, JOBDIR_ABORT, path, sizeof path);
	return access(path, F_OK) != 0;
}

int worker_main(const char *dir)
{
	struct worker w = { .dir = dir, .ev = { -1 } };
	int wait_for_cluster = 0;
	struct dd_err err = { 0 };
	char path[PATH_MAX];
	char *text = NULL;
	int code = WORKER_EXIT_ERROR;

	umask(077); /* as the server's: a job's files are its user's alone (app/http/server.c) */
	struct sigaction sa = { .sa_handler = on_term };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (events_writer_open(&w.ev, dir, &err) != DD_OK) {
		fprintf(stderr, "deepdesk worker: %s\n", err.msg);
		return WORKER_EXIT_ERROR; /* nowhere to report: the exit status says it */
	}
	/* room for the final status, should the job fill the disk (best effort: on a
	 * disk full already, the first event fails and says so) */
	events_writer_reserve(&w.ev, WORKER_EVENTS_RESERVE, NULL);
	jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
	if (fs_read_file(path, 1 << 20, &text, NULL, &err) != DD_OK) {
		worker_status(&w, "error", err.msg);
		goto out;
	}
	if (json_parse_str(text, "job.json", &w.job, &err) != DD_OK) {
		worker_status(&w, "error", err.msg);
		goto out;
	}
	if (!cJSON_IsObject(w.job)) {
		worker_status(&w, "error", "job.json is not a JSON object");
		goto out;
	}
	const char *kind_name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w.job, "kind"));
	const struct job_kind *kind = job_kind_find(kind_name);
	if (!kind) {
		char msg[256];
		snprintf(msg, sizeof msg, "this deepdesk cannot run jobs of kind \"%s\"",
			 kind_name ? kind_name : "(none)");
		worker_status(&w, "error", msg);
		goto out;
	}
	w.params = cJSON_GetObjectItemCaseSensitive(w.job, "params");
	if (!cJSON_IsObject(w.params)) {
		w.params = cJSON_CreateObject();
		cJSON_AddItemToObject(w.job, "params", w.params);
	}
	restart_kind(&w, kind);
	worker_status(&w, "running", NULL);
	int rc = kind->run(&w, &err);
	events_writer_release(&w.ev); /* the room set aside is for what follows */
	if (rc == DD_OK && w.event_failed) {
		err = w.event_err;
		rc = err.code ? err.code : DD_EIO;
	}
	if (rc != DD_OK) {
		worker_status(&w, "error", err.msg[0] ? err.msg : "the job failed");
		code = WORKER_EXIT_ERROR;
	} else if (stop_requested && stopped_by_cluster(dir)) {
		/* not an end: Slurm starts it again (requeue), or the server says why
		 * it ended (time limit, preemption) */
		worker_status(&w, "interrupted", "stopped by Slurm (a requeue, a preemption or the time limit); "
						 "the last snapshot is kept and a restart resumes from it");
		code = WORKER_EXIT_ABORTED;
		wait_for_cluster = 1;
	} else if (stop_requested) {
		worker_status(&w, "aborted", "stopped on request");
		code = WORKER_EXIT_ABORTED;
	} else {
		worker_status(&w, "done", NULL);
		code = WORKER_EXIT_DONE;
	}
	if (w.event_failed && code != WORKER_EXIT_ERROR)
		code = WORKER_EXIT_ERROR; /* the final status itself could not be written */
out:
	if (w.event_failed)
		fprintf(stderr, "deepdesk worker: %s\n", w.event_err.msg);
	cJSON_Delete(w.job);
	free(text);
	events_writer_close(&w.ev);
	if (wait_for_cluster) {
		/* Snapshot written.  Leaving now would end the batch job as FAILED a
		 * minute before its time limit (--signal=B:TERM@60); waiting lets Slurm end
		 * it in its own words (TIMEOUT, REQUEUED, PREEMPTED), which the server
		 * shows.  Bounded, for a stray TERM from a person. */
		for (int i = 0; i < 120; i++)
			sleep(1);
	}
	return code;
}
