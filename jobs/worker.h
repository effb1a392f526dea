/* worker.h — the process that runs one job: `deepdesk worker JOB_DIR`.
 *
 * It reads JOB_DIR/job.json, appends everything it has to say to
 * JOB_DIR/events.jsonl, and exits 0 (done), 1 (error) or 2 (aborted).  It never
 * talks to the server any other way, so any executor that can start the command
 * on a machine that sees the folder can run it.  SIGTERM asks it to stop: the
 * kind's run() sees worker_should_stop() and returns after its current step. */
#ifndef DD_WORKER_H
#define DD_WORKER_H

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
/* Nonzero once SIGTERM arrived. */
int worker_should_stop(const struct worker *w);

#endif
