/* job.h — what a job is: its states, the transitions between them, and the kinds of
 * work a worker knows how to run.
 *
 *   queued ──start──> running ──> done | error | aborted
 *     │                  └──server died, worker gone without a final status──> interrupted
 *     └──abort──> aborted
 *   done | error | aborted | interrupted ──resume──> queued   (the same job, its event
 *                                                    log continued: sched_requeue)
 *
 * A job's record lives in SQLite (store/store.c); its own record of what happened is
 * the append-only events.jsonl in its folder (jobs/events.c), and what it is, the
 * worker's whole input, is job.json beside it (job_spec).
 *
 * What differs between kinds is in their row (struct job_kind), never in a
 * compare of a kind's name: the scheduler and the worker ask the row. */
#ifndef DD_JOB_H
#define DD_JOB_H

#include <stdint.h>

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

/* What the server lets jobs use, from its own configuration only (never from a
 * request or a job's params): the data folder (jobs in DATA/jobs/<id>, uploads in
 * DATA/uploads), the --data-root folders server paths must lie below, and the caps
 * on unpacking an archive (0: archive.h's defaults).  The scheduler owns it
 * (sched_config) and gives it to every validation, and writes it into each job's
 * job.json as "guard" for the worker's own checks (worker_path_allowed). */
struct job_server {
	const char *data_dir;
	const char *const *roots;
	int nroots;
	long long max_files, max_bytes;
};

/* Who asks for a job: the account it will belong to and what that account may
 * use.  The web layer fills it from the request (perm_caller); a clone or a resume
 * is checked as its owner (perm_caller_owner).  admin: sees every job (an admin,
 * or accounts off).  may_use(who, id): may the caller use job id, named in params
 * or as a parent (their own, their classes' learners' for an instructor, a dataset
 * shared with a class of theirs); NULL when admin.  server is set by the
 * scheduler, which is the only caller of a kind's validate with a caller. */
struct job_caller {
	int64_t user_id;   /* 0: the local user (accounts off) */
	const char *user;  /* the owner's name the job gets */
	int admin;
	int (*may_use)(const struct job_caller *who, int64_t id);
	const void *ctx;   /* for may_use */
	const struct job_server *server;
};

/* The jobs a job's params name (a dataset to train on, a model to evaluate): they
 * become its parents, so that they cannot be deleted under it. */
#define JOB_MAX_USES 8
struct job_uses {
	int64_t id[JOB_MAX_USES];
	int n;
};

/* What a job needs of the machine that runs it besides CPU slots (job_kind
 * resources): gpus GPUs, any of them (nids 0) or those ids. */
#define JOB_MAX_GPUS 16
struct job_need {
	int gpus; /* 0: it runs on the CPU */
	int ids[JOB_MAX_GPUS];
	int nids;
};

/* What a worker finds when it starts on a folder an earlier run of the same job
 * used: a cluster that requeued the job (a node failed, a preemption, `scontrol
 * requeue`) starts the same worker on the same folder with the same job.json, and
 * a resume through the API queues it again.  Filled by the worker from the
 * folder's event log and the cluster's environment, for the kind's restart hook. */
struct job_restart {
	const char *last_state; /* the earlier run's last status ("running", "done", ...; "" none) */
	int unfinished;         /* it started and never wrote its end, or the cluster stopped it
				 * ("interrupted") */
	int by_cluster;         /* the cluster started this run again (Slurm's restart count > 0) */
	const char *by;         /* for a log line: " by Slurm, restart N", or "" */
};

/* A kind of job: how to check its parameters when it is created, what it needs,
 * how a worker runs it, restarts it on its own folder and clones it, and what is
 * cleared once it ends.  Kinds register in jobs/job.c; the "test" kind exists only
 * in the test build (DD_TESTING). */
struct job_kind {
	const char *name;
	const char *title; /* for people: "Image classification dataset" */
	/* Check and normalise params in place: every rule a job of this kind obeys,
	 * whichever route it came by.  With a caller (who, uses non-NULL; the
	 * scheduler's sched_validate) also everything that needs the caller: each
	 * job named is one who may use (into uses), each server path is below the
	 * server's --data-root after realpath, an upload is named by its id, caps come
	 * from who->server only.  who NULL checks the shape alone, for a preview
	 * that creates nothing (lr-preview, a preset's settings).  The params it
	 * leaves must pass it again (a clone or a resume re-runs it with the caller).
	 * NULL: the kind takes any object, and only admins may submit it. */
	int (*validate)(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err);
	/* Run the job; returns DD_OK when done, a DD_E* code with err filled on failure.
	 * Must return promptly (with DD_OK or an error) once worker_should_stop(). */
	int (*run)(struct worker *w, struct dd_err *err);
	int default_cpu_slots;   /* slots a job holds unless asked; -1: all the server has */
	/* Optional: what a job with these params needs besides CPU slots, into need
	 * (zeroed by the caller): the GPUs it asks for, of the ngpu this server has,
	 * or (cluster 1: a cluster runs it and picks them) a count.  DD_EINVAL naming
	 * the field when they cannot be had.  NULL: jobs of this kind use no GPU.
	 * The scheduler asks it when a job is checked and again when it starts. */
	int (*resources)(const cJSON *params, int ngpu, int cluster, struct job_need *need, struct dd_err *err);
	/* Optional: adjust a copy of params for a clone of job orig_id, whose folder
	 * is orig_dir (e.g. name that job's own copy of an upload); validate then
	 * checks the result with the caller, as for any new job. */
	int (*clone_params)(cJSON *params, int64_t orig_id, const char *orig_dir, struct dd_err *err);
	/* Optional: called by the worker before run(), with what an earlier run of
	 * the folder left (how): go on from it (a training resumes from its latest
	 * snapshot: params "resume") or clear what it half wrote (a dataset's
	 * databases).  NULL: run() starts as if the folder were new. */
	void (*restart)(struct worker *w, const struct job_restart *how);
	/* Optional: called by the server once a job of this kind has ended, however
	 * (its worker's own end, an abort, a kill -9, a server that found it gone),
	 * with the job's folder: remove what only a running job needs (a dataset's
	 * unpacked images), which a worker that died could not. */
	void (*ended)(const char *dir);
};

/* The kind named `name`, or NULL when there is none in this build. */
const struct job_kind *job_kind_find(const char *name);
/* NULL-terminated list of every kind in this build. */
const struct job_kind *const *job_kinds(void);

/* job.json, a worker's whole input, from job (the record as store_job_json gives
 * it with detail): a new object with only the keys a worker and an executor read
 * — "id", "kind", "name", "owner", "parents", "params", "resources" — copied, so
 * that a field the API adds to a job's record never reaches a worker.  The
 * scheduler adds its "guard".  NULL when out of memory; caller frees with
 * cJSON_Delete. */
cJSON *job_spec(const cJSON *job);

/* Add id to uses once; DD_EINVAL when there are already JOB_MAX_USES. */
int job_uses_add(struct job_uses *uses, int64_t id, struct dd_err *err);

#endif
