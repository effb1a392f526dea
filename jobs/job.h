/* job.h — what a job is: its states, the transitions between them, and the kinds of
 * work a worker knows how to run.
 *
 *   queued ──start──> running ──> done | error | aborted
 *     │                  └──server died, worker gone without a final status──> interrupted
 *     └──abort──> aborted
 *   done | error | aborted | interrupted ──resume──> queued   (the same job, its event
 *                                                    log continued: sched_requeue)
 *
 * A job's record lives in SQLite (app/store); its own record of what happened is the
 * append-only events.jsonl in its folder (jobs/events). */
#ifndef DD_JOB_H
#define DD_JOB_H

#include <cjson/cJSON.h>

#include "../common/err.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_ERROR, JOB_ABORTED, JOB_INTERRUPTED };
#define JOB_STATE_COUNT 6

/* The exact string the API uses ("queued", ...). */
const char *job_state_name(enum job_state s);
/* Parse a state name; returns 0 and sets *out, or -1. */
int job_state_parse(const char *s, enum job_state *out);
/* Whether a job in this state will never change again by itself (only a resume,
 * asked for, puts it back in the queue). */
int job_state_final(enum job_state s);
/* Whether the move from -> to is allowed (the diagram above). */
int job_state_can_move(enum job_state from, enum job_state to);

struct worker;

/* A kind of job: how to check its parameters when it is created, and how a worker
 * runs it.  Kinds register in jobs/kinds.c; a kind marked test_only exists only in
 * the test build (DD_TESTING). */
struct job_kind {
	const char *name;
	const char *title; /* for people: "Image classification dataset" */
	/* Check and normalise params in place; NULL means any object is fine. */
	int (*validate)(cJSON *params, struct dd_err *err);
	/* Run the job; returns DD_OK when done, a DD_E* code with err filled on failure.
	 * Must return promptly (with DD_OK or an error) once worker_should_stop(). */
	int (*run)(struct worker *w, struct dd_err *err);
	int default_cpu_slots;   /* slots a job holds unless asked; -1: all the server has */
	/* Optional: adjust a copy of params for a clone of the job whose folder is
	 * orig_dir (e.g. point at that job's own copy of an upload). */
	int (*clone_params)(cJSON *params, const char *orig_dir, struct dd_err *err);
};

/* The kind named `name`, or NULL when there is none in this build. */
const struct job_kind *job_kind_find(const char *name);
/* NULL-terminated list of every kind in this build. */
const struct job_kind *const *job_kinds(void);

#endif
