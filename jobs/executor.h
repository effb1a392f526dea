/* executor.h — how a worker process is started, watched and signalled.
 *
 * The scheduler knows only this interface.  The local executor (exec_local.c)
 * spawns `deepdesk worker JOB_DIR` as a child in its own session; the Slurm
 * executor (exec_slurm.c) submits the same command to a cluster that mounts the
 * same data folder.  Because a worker reports only through its job folder, the
 * scheduler needs nothing else from an executor than start / check / signal, a
 * handle it can save in the store and adopt again after a restart, and what the
 * executor can do (its flags), which it asks instead of its name. */
#ifndef DD_EXECUTOR_H
#define DD_EXECUTOR_H

#include <stdint.h>

#include "../common/err.h"
#include "jobdir.h"

struct exec_handle {
	int pid;           /* local: the worker's pid (its process group too) */
	int64_t pid_start; /* local: its start time, to tell a reused pid */
	int is_child;      /* local: spawned by this process, so waitpid works */
	/* Cluster executors (Slurm).  ext_id is what the store keeps and a restarted
	 * server adopts again; the rest is what the last check saw, for the API. */
	char ext_id[32];      /* Slurm's job id; "" for a local worker */
	char dir[4096];       /* the job folder (where the abort marker goes) */
	char ext_state[24];   /* PENDING, RUNNING, COMPLETED, TIMEOUT, ... */
	char ext_reason[128]; /* Slurm's pending reason (Resources, Priority, ...) */
	int ext_position;     /* place among pending jobs of its partition, 1 first; 0 when running */
	int ext_restarts;     /* how many times Slurm requeued it */
	int ext_changed;      /* check() saw a new state/reason/position: save and push it */
	char end_why[256];    /* after EXEC_EXITED/EXEC_GONE: why it ended, in words ("" unknown) */
	int end_failed;       /* the cluster ended it for a reason of its own (time limit, OOM, ...) */
	int64_t submitted_ms; /* monotonic time of start(), to tell "not listed yet" */
};

enum exec_status { EXEC_RUNNING, EXEC_EXITED, EXEC_GONE };

/* What an executor is, for the scheduler to ask (struct executor.flags). */
enum {
	/* Its workers run on this machine: each holds this server's CPU slots and
	 * GPUs while it runs, and a job asks no more than the server has.  Without
	 * it the workers run elsewhere (a cluster, which queues them itself): they
	 * hold none of this server's, and the cluster picks their GPUs. */
	EXEC_LOCAL = 1 << 0,
	/* A restarted server adopts its workers by pid and start time (exec_handle
	 * pid, pid_start), which only this machine can see. */
	EXEC_ADOPT_PID = 1 << 1,
	/* A restarted server adopts its workers by the id the executor gave them
	 * (exec_handle.ext_id), which the store keeps with the executor's name. */
	EXEC_ADOPT_ID = 1 << 2,
};

struct executor {
	const char *name;  /* as `--executor` and the store name it */
	unsigned flags;    /* EXEC_* above */
	/* Start `exe worker dir`, output to dir/worker.log.  Fills h. */
	int (*start)(const char *exe, const char *dir, struct exec_handle *h, struct dd_err *err);
	/* Is it still running?  EXEC_EXITED fills *wait_status (as from waitpid);
	 * EXEC_GONE means it ended and its status cannot be known (adopted). */
	enum exec_status (*check)(struct exec_handle *h, int *wait_status);
	/* Send sig to the worker and everything it started. */
	void (*signal)(const struct exec_handle *h, int sig);
};

extern const struct executor exec_local;
extern const struct executor exec_slurm;

/* The Slurm executor's defaults, from `deepdesk serve --slurm-*` (NULL or 0: none,
 * let Slurm decide).  Call before the scheduler starts. */
struct slurm_opts {
	const char *partition, *account;
	int cpus;          /* 0: the job's CPU slots */
	const char *mem;   /* "4G" */
	const char *time;  /* "2:00:00" */
	int poll_ms;       /* squeue no more often than this (default 3000) */
};
void exec_slurm_configure(const struct slurm_opts *o);
/* Is the Slurm client (sbatch, squeue) on PATH?  For a clear error at start-up. */
int exec_slurm_available(struct dd_err *err);
/* The file in a job folder whose presence tells a worker under Slurm that a SIGTERM
 * is a user's abort, not Slurm's requeue, preemption or time limit. */
#define EXEC_ABORT_MARKER JOBDIR_ABORT /* jobs/jobdir.h names it */


/* Start time of a live pid (from /proc), or -1 when there is no such process. */
int64_t exec_local_pid_start(int pid);

#endif
