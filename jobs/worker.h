/* worker.h — the process that runs one job: `deepdesk worker JOB_DIR`.
 *
 * It reads JOB_DIR/job.json, appends everything it has to say to
 * JOB_DIR/events.jsonl, and exits 0 (done), 1 (error) or 2 (aborted).  It never
 * talks to the server any other way, so any executor that can start the command
 * on a machine that sees the folder can run it.  SIGTERM asks it to stop: the
 * kind's run() sees worker_should_stop() and returns after its current step. */
#ifndef DD_WORKER_H
#define DD_WORKER_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "events.h"

enum { WORKER_EXIT_DONE = 0, WORKER_EXIT_ERROR = 1, WORKER_EXIT_ABORTED = 2 };

struct worker {
	const char *dir;   /* the job folder */
	cJSON *job;        /* job.json, borrowed for the run */
	cJSON *params;     /* job.json "params" (never NULL) */
	struct events_writer ev;
	int event_failed;  /* an append failed: the run should end with an error */
	struct dd_err event_err;
};

/* Run the job in dir; returns the process exit code.  Used by `deepdesk worker`. */
int worker_main(const char *dir);

/* What a kind's run() reports.  Each appends one event; a failed append (disk full)
 * is remembered and turns the run into an error. */
void worker_progress(struct worker *w, double fraction, double eta_s);
void worker_metric(struct worker *w, const char *name, double value, const char *step_key,
		   double step);
void worker_log(struct worker *w, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Append ev (a JSON object with its "type"; consumed), for events of a kind's own
 * shape (a model's "metric" and "result"). */
void worker_event(struct worker *w, cJSON *ev);
/* A "status" event: state "running", "done", "error" or "aborted", message (may be
 * NULL), and this process's pid.  worker_main writes them around run(); `deepdesk
 * train` too, into its own folder. */
void worker_status(struct worker *w, const char *state, const char *message);
/* The worker's own line of defence, whatever its job.json says: before a kind
 * opens, renames or deletes a file it did not make, the path must resolve
 * (realpath) inside the job's own folder or below one of the --data-root folders
 * the server wrote into job.json's "guard" at the job's start (none: no server
 * folder at all).  1 and the resolved path (PATH_MAX bytes; may be NULL) into
 * resolved; 0 if not (or if it does not exist). */
int worker_path_allowed(const struct worker *w, const char *path, char *resolved);
/* The data folder (the job folder's grandparent, DATA/jobs/<id>) into buf. */
void worker_data_dir(const struct worker *w, char *buf, size_t len);
/* The caps on unpacking an archive: the guard's, never the params'. */
struct archive_limits;
void worker_archive_limits(const struct worker *w, struct archive_limits *l);

/* The archive an upload source names (src: a job's params.source), into file:
 * the job's own kept copy (a run after the first), else the upload
 * DATA/uploads/<src.upload>.<ext>, moved into the job folder (uploads are used
 * once; it stays there for clones), else for a clone (src.archive_of) the
 * original job's kept copy, read and never moved.  A path from an older server's
 * params (src.file) is taken only when it is such an upload itself.  DD_EPERM
 * for any other path. */
int worker_archive(struct worker *w, const cJSON *src, char *file, size_t len, struct dd_err *err);

/* Nonzero once SIGTERM arrived. */
int worker_should_stop(const struct worker *w);
/* The log and should-stop hooks of datasets/create.h and networks/train.h for a
 * kind whose hooks' context begins with its struct worker * (ctx points at it):
 * worker_log and worker_should_stop of that worker. */
void worker_hook_log(void *ctx, const char *level, const char *msg);
int worker_hook_stop(void *ctx);

#endif
