/* sched.h — the job scheduler: queue, resources, workers, and their event logs.
 *
 * One scheduler thread owns the table of running workers.  Each tick (every
 * poll_ms, or at once when woken) it tails the event log of every running job
 * into the store and to the listener, reaps workers that ended and decides their
 * final state, enforces abort deadlines, and starts queued jobs oldest first while
 * CPU slots are free.  Other threads only submit, abort, delete and wake. */
#ifndef DD_SCHED_H
#define DD_SCHED_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "executor.h"
#include "job.h"

struct sched_config {
	const char *data_dir; /* jobs live in DATA/jobs/<id> */
	const char *exe;      /* the deepdesk binary workers run */
	int cpu_slots;        /* how many CPU slots jobs may hold at once */
	int abort_grace_ms;   /* SIGTERM, then SIGKILL this long after */
	int poll_ms;          /* event-log poll period */
	const struct executor *executor;
	/* Optional: the executor for jobs of a kind (`--executor model=slurm`); NULL
	 * or a NULL answer means `executor`.  Jobs an executor without EXEC_LOCAL
	 * runs (a cluster) hold no local CPU slots: the cluster queues them. */
	const struct executor *(*executor_for)(const char *kind);
	/* What jobs may use (jobs/job.h, struct job_server): the --data-root folders
	 * server paths must lie below, and the caps on unpacking an archive (0: the
	 * defaults).  Every validation gets them, and so does every worker (job.json's
	 * "guard"), never from a job's params. */
	const char *const *data_roots;
	int nroots;
	long long archive_max_files, archive_max_bytes;
};

/* What happened, for the web layer to push: "job" with the job's list-form JSON,
 * "deleted" with NULL, or "events" with an array of events (each with "seq").
 * Called from the scheduler thread or an API thread; payload is borrowed. */
typedef void (*sched_listener)(void *ctx, int64_t job_id, const char *what, cJSON *payload);

/* Recover jobs that were running when the last server stopped (adopt live workers,
 * settle dead ones), then start the scheduler thread.  Undo with sched_stop(). */
int sched_start(const struct sched_config *cfg, sched_listener fn, void *ctx, struct dd_err *err);
/* Stop the thread.  Workers keep running; the next sched_start adopts them. */
void sched_stop(void);

/* What jobs may use, from the configuration sched_start was given (borrowed). */
const struct job_server *sched_server(void);

/* Every check a job of kind must pass for caller who (jobs/job.h), whichever
 * route it came by: the kind's validate with the caller (the jobs its params name,
 * server paths, uploads; params normalised in place, not consumed), and each of
 * parents (np of them) a job who may use.  DD_OK and the jobs it names with the
 * parents, once each, into *all (may be NULL).  DD_EINVAL naming the field for a
 * bad or unknown value (a job who may not see reads as none), DD_EPERM for a
 * server path outside --data-root or a kind who may not submit (a kind with no
 * validate, the test kind: admins only). */
int sched_validate(const char *kind, cJSON *params, const struct job_caller *who, const int64_t *parents,
		   int np, struct job_uses *all, struct dd_err *err);
/* Create a queued job owned by who->user, after sched_validate; its parents are
 * parents and the jobs its params name.  *id gets the new job's id. */
int sched_submit(const char *kind, const char *name, const struct job_caller *who, cJSON *params,
		 int cpu_slots, const int64_t *parents, int nparents, int64_t *id,
		 struct dd_err *err);
/* Abort: a queued job ends at once; a running one gets SIGTERM and, after the
 * grace period, SIGKILL.  DD_ECONFLICT when it already ended. */
int sched_abort(int64_t id, struct dd_err *err);
/* Delete a job and its folder; DD_ECONFLICT while it runs or has dependants. */
int sched_delete(int64_t id, struct dd_err *err);
/* A queued copy of a job (same kind, params, parents, resources), checked again
 * by sched_validate as who (its owner: perm_caller_owner), so that a clone uses
 * nothing its owner may no longer use. */
int sched_clone(int64_t id, const struct job_caller *who, int64_t *new_id, struct dd_err *err);
/* Queue a job that ended (done, error, aborted or interrupted) again, the same
 * id and folder, with params (checked by sched_validate as who, its owner; not
 * consumed): its next
 * worker appends to the same event log, so its record and curves continue.
 * DD_ECONFLICT while it is queued or running. */
int sched_requeue(int64_t id, cJSON *params, const struct job_caller *who, struct dd_err *err);
/* Tell listeners a job record changed outside the scheduler (a rename). */
void sched_job_changed(int64_t id);
/* DATA/jobs/<id> into buf. */
void sched_job_dir(int64_t id, char *buf, size_t len);
/* Slots in use and in all. */
void sched_slots(int *used, int *total);

/* ---- the fair queue and quotas ---- */
/* Where queued job id stands: {"position","ahead","queued","priority",
 * "cpu_slots","cpu_slots_free","running_jobs","running_limit","reason"}, or
 * NULL when it is not queued.  Caller frees. */
cJSON *sched_queue_json(int64_t id);
/* Put a queued job before every other (DD_ECONFLICT when it is not queued). */
int sched_move_to_front(int64_t id, struct dd_err *err);
/* Set a queued job's priority (higher first; 0 is everyone's). */
int sched_set_priority(int64_t id, int priority, struct dd_err *err);
/* DD_OK, or DD_EPERM naming the limit and the usage when owner_id (0: the
 * local user, never limited) may not queue another job (gpu: one that asks
 * for a GPU) today. */
int sched_quota_check(int64_t owner_id, int gpu, struct dd_err *err);
/* The bytes of owner_id's job folders and of their uploads not yet used. */
void sched_owner_disk(int64_t owner_id, uint64_t *bytes);
/* May owner_id store `more` bytes more (an upload) within their disk quota?  DD_OK, or
 * DD_EPERM saying what they use and their limit.  Uploads count from their first
 * byte until a job takes them in (or they are swept after a day). */
int sched_quota_disk_room(int64_t owner_id, int64_t more, struct dd_err *err);

struct backend_gpu;
/* The GPUs the scheduler hands out (found at sched_start), at most max into out,
 * and in holder[i] (may be NULL) the id of the job holding GPU i, 0 when free.
 * Returns how many. */
int sched_gpus(struct backend_gpu *out, int64_t *holder, int max);
/* The same as /api/v1/info's "gpus": [{"id","name","memory_total","memory_used"?,
 * "utilization"?,"job"?}] (use and utilisation from NVML where it answers; job:
 * the one holding it).  Caller frees with cJSON_Delete (or adds it to a tree). */
cJSON *sched_gpus_json(void);

#endif
