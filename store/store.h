/* store.h — deepdesk.db, the store: jobs, the fair queue and quotas, classes
 * (their members, shared datasets and lab presets), and through accounts.h the
 * accounts tables.  store/ is the only code that speaks SQL; this header knows
 * no SQLite, and callers see rows, JSON and DD_E* codes.
 *
 * One connection per thread (opened on first use, closed by store_thread_end), WAL,
 * a busy timeout and foreign keys on (store/db.c).  The schema is versioned in
 * PRAGMA user_version and moved forward by store_init's migrations, each in one
 * transaction.  Everything that changes a job's state goes through
 * store_job_move so that the transition rules (jobs/job.h) and the state history
 * are kept in one place. */
#ifndef DD_STORE_H
#define DD_STORE_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "../jobs/job.h"
#include "accounts.h"

#define STORE_FILE "deepdesk.db"

/* What the scheduler needs of a job, without JSON. */
struct job_row {
	int64_t id;
	char kind[32];
	enum job_state state;
	int pid;           /* 0 when none */
	int64_t pid_start; /* /proc start time of pid, to tell a reused pid */
	int64_t ev_offset, ev_seq;
	int abort_requested;
	int cpu_slots;
	int64_t owner_id; /* 0: the local user, or a removed account */
	int priority;     /* higher goes first in the queue */
};

/* Open (creating) DATA/deepdesk.db and migrate it to the current schema. */
int store_init(const char *data_dir, struct dd_err *err);
/* The schema version this build writes. */
int store_schema_version(void);
/* Close this thread's connection (call as a thread ends; harmless when none). */
void store_thread_end(void);

/* A new queued job; *id gets its id.  parents must exist (DD_EINVAL otherwise). */
int store_job_insert(const char *kind, const char *name, const char *owner,
		     const char *params_json, const char *resources_json, const int64_t *parents,
		     int nparents, int64_t *id, struct dd_err *err);

/* The job as the API shows it; with detail, also notes, params, resources, history,
 * children, pid and exit.  Caller frees *out with cJSON_Delete. */
int store_job_json(int64_t id, int detail, cJSON **out, struct dd_err *err);

/* Jobs newest first, optionally of one kind and/or state; *out is an array, *total
 * the count matching before limit/offset.  Caller frees *out. */
int store_job_list(const char *kind, const char *state, int limit, int offset, cJSON **out,
		   int *total, struct dd_err *err);

/* The same, only the jobs account owner_id may see (owner_id < 0: everyone's):
 * its own, those of the members of the classes it instructs, and the datasets
 * shared with the classes it is in (perm.c says the same for one job). */
int store_job_list_for(int64_t owner_id, const char *kind, const char *state, int limit, int offset,
		       cJSON **out, int *total, struct dd_err *err);
/* The account that owns job id into *owner_id (0: the local user); DD_ENOENT
 * when there is no such job. */
int store_job_owner(int64_t id, int64_t *owner_id, struct dd_err *err);

int store_job_row(int64_t id, struct job_row *row, struct dd_err *err);
/* Every job in `state`, oldest first; caller frees *rows with free(). */
int store_jobs_in_state(enum job_state state, struct job_row **rows, int *n, struct dd_err *err);

/* Move a job to `to` if the rules allow (DD_ECONFLICT otherwise), stamping the
 * time, history, and for final states the error message and exit status
 * (exit_code/exit_signal < 0 when unknown). */
int store_job_move(int64_t id, enum job_state to, const char *error, int exit_code,
		   int exit_signal, struct dd_err *err);
/* queued -> running with the worker's pid. */
int store_job_started(int64_t id, int pid, int64_t pid_start, struct dd_err *err);
int store_job_progress(int64_t id, double progress, double eta_s, struct dd_err *err);
int store_job_tail_save(int64_t id, int64_t offset, int64_t seq, struct dd_err *err);
/* Rename and/or change notes (NULL leaves a field as it is). */
int store_job_patch(int64_t id, const char *name, const char *notes, struct dd_err *err);
/* Replace the params of a job that is not queued or running (a resume changes
 * them before it queues the job again); DD_ECONFLICT while it is. */
int store_job_set_params(int64_t id, const char *params_json, struct dd_err *err);
int store_job_request_abort(int64_t id, struct dd_err *err);
/* Delete a job record; DD_ECONFLICT naming a dependant while one exists. */
int store_job_delete(int64_t id, struct dd_err *err);
/* Number of jobs (for /info and tests). */
int store_job_count(int64_t *n, struct dd_err *err);

/* Where a job runs when a cluster executor runs it.  exec_set records the executor
 * and its id there (name NULL or ext_id "" forgets it: a local run); exec_state
 * what the cluster last said; exec_get reads name and id back (0, or -1 when the
 * job runs locally).  exec_json adds "executor": {name, job_id, state, reason,
 * position, restarts} to a job's JSON when there is one. */
int store_job_exec_set(int64_t id, const char *name, const char *ext_id, struct dd_err *err);
int store_job_exec_state(int64_t id, const char *state, const char *reason, int position, int restarts,
			 struct dd_err *err);
int store_job_exec_get(int64_t id, char *name, size_t name_len, char *ext_id, size_t ext_len);
void store_job_exec_json(int64_t id, cJSON *job);

/* ---- the fair queue and quotas (jobs/sched.c's fair section, app/api/api_users.c) ---- */

/* Every queued job, highest priority first, then oldest first; caller frees. */
int store_jobs_queue(struct job_row **rows, int *n, struct dd_err *err);
/* Set the priority of a queued job; DD_ECONFLICT when it is not queued. */
int store_job_set_priority(int64_t id, int priority, struct dd_err *err);
/* The highest priority among queued jobs (0 when none). */
int store_queue_max_priority(int *max, struct dd_err *err);

/* A user's limits; 0 in a field is no limit. */
struct store_quota {
	int64_t jobs;        /* running at once */
	int64_t cpu_minutes; /* CPU-slot minutes per UTC day */
	int64_t gpu_minutes; /* GPU minutes per UTC day */
	int64_t disk_bytes;  /* the user's job folders together */
	int64_t memory_bytes; /* one job's memory (its estimate; jobs/kind_train_memory.h), within the server's */
};
/* What a user uses: minutes since a time, jobs running and queued now. */
struct store_usage {
	double cpu_minutes, gpu_minutes;
	int running, queued;
};
/* The defaults of a role ("learner", …). */
void store_quota_default(const char *role, struct store_quota *q);
/* The quota in force for user_id (its role's defaults where it has none of its
 * own); all zero (no limit) for user 0 or an account that no longer exists. */
int store_quota_get(int64_t user_id, struct store_quota *q, struct dd_err *err);
/* Change user_id's quota: per field -2 leaves it, -1 goes back to the role's
 * default, 0 or more sets it.  DD_ENOENT when there is no such user. */
int store_quota_set(int64_t user_id, const struct store_quota *q, struct dd_err *err);
/* user_id's usage since since_ms (epoch ms). */
int store_usage(int64_t user_id, int64_t since_ms, struct store_usage *u, struct dd_err *err);
/* The ids of user_id's jobs; caller frees *ids. */
int store_job_ids_of(int64_t user_id, int64_t **ids, int *n, struct dd_err *err);
/* How many GPUs job id holds in its run (counted into its owner's GPU minutes). */
int store_job_set_gpus_held(int64_t id, int n, struct dd_err *err);
/* When a job of owner_id (0: the local user) last started, epoch ms; 0: never. */
int64_t store_owner_last_start(int64_t owner_id);
/* For /metrics: how long the oldest queued job has waited, and the sum and
 * count of the waits (creation to start) of every job that started. */
void store_queue_waits(double *oldest_s, double *sum_s, double *count);
/* {"queued": n, "running": n, …} over all jobs; caller frees *out. */
int store_jobs_by_state(cJSON **out, struct dd_err *err);

/* ---- classes (app/api/api_classes.c): an instructor's class, its members, the
 * datasets shared with it, its lab presets.  Lists and JSON: caller frees *out. */
int store_class_create(const char *name, int64_t instructor_id, int64_t *id, struct dd_err *err);
/* The instructor of class id into *instructor_id (0: none any more); DD_ENOENT
 * when there is no such class. */
int store_class_instructor(int64_t id, int64_t *instructor_id, struct dd_err *err);
/* Delete a class with its memberships, shares and presets (never a job). */
int store_class_delete(int64_t id, struct dd_err *err);
/* The classes user_id instructs or is a member of (user_id < 0: all):
 * [{id,name,instructor:{id,name}|null,created,member_count}]. */
int store_class_list(int64_t user_id, cJSON **out, struct dd_err *err);
/* One class as in the list, plus members [{id,name,role}] and datasets
 * [{id,name,state}]; DD_ENOENT when there is none. */
int store_class_json(int64_t id, cJSON **out, struct dd_err *err);
/* Add (idempotent) or remove (DD_ENOENT when not a member) a member. */
int store_class_member_add(int64_t class_id, int64_t user_id, struct dd_err *err);
int store_class_member_remove(int64_t class_id, int64_t user_id, struct dd_err *err);
/* Share (idempotent) or unshare (DD_ENOENT when not shared) a dataset job. */
int store_class_dataset_add(int64_t class_id, int64_t job_id, struct dd_err *err);
int store_class_dataset_remove(int64_t class_id, int64_t job_id, struct dd_err *err);
/* 1 when user_id is a member of class_id; 0 otherwise (and on any failure). */
int store_class_is_member(int64_t class_id, int64_t user_id);
/* 1 when user_id is a learner and a member of some class that instructor_id
 * instructs (an admin or an instructor enrolled gives no rights over their work). */
int store_class_instructs(int64_t instructor_id, int64_t user_id);
/* 1 when job_id is shared with some class user_id is a member of. */
int store_class_dataset_shared(int64_t job_id, int64_t user_id);

/* One line of a roster: an existing account (user_id > 0, pwhash NULL) or a new
 * one (pwhash its Argon2id string, role its role; user_id filled on success). */
struct store_roster_entry {
	int line;           /* of the CSV, for errors */
	const char *name;
	const char *role;
	const char *pwhash; /* NULL: existing account user_id */
	int64_t user_id;
};
/* In one transaction: make the new accounts and add every entry to class_id.
 * All or nothing; DD_ECONFLICT naming the line when a new name was taken
 * meanwhile. */
int store_class_roster(int64_t class_id, struct store_roster_entry *e, int n, struct dd_err *err);

/* Lab presets: settings, locked and hidden are JSON texts (an object, two
 * arrays of field names). */
int store_preset_add(int64_t class_id, const char *name, const char *settings, const char *locked,
		     const char *hidden, int64_t *id, struct dd_err *err);
int store_preset_delete(int64_t class_id, int64_t id, struct dd_err *err);
/* {id,class_id,class_name,name,settings,locked,hidden,created}; DD_ENOENT. */
int store_preset_json(int64_t id, cJSON **out, struct dd_err *err);
/* Presets of the classes user_id instructs or is in (user_id < 0: all), of
 * class_id only when class_id > 0. */
int store_preset_list(int64_t user_id, int64_t class_id, cJSON **out, struct dd_err *err);
/* Every model job of class_id's members, by member name then id:
 * [{user:{id,name},id,name,state,progress,created_at,started_at,finished_at}]. */
int store_class_runs(int64_t class_id, cJSON **out, struct dd_err *err);

#endif
