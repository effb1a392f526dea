/* executor.h — how a worker process is started, watched and signalled.
 *
 * The scheduler knows only this interface.  The local executor (exec_local.c)
 * spawns `deepdesk worker JOB_DIR` as a child in its own session; a cluster
 * executor (Slurm, later) submits the same command elsewhere.  Because a worker
 * reports only through its job folder, the scheduler needs nothing else from an
 * executor than start / check / signal, and a handle it can save in the store and
 * adopt again after a restart. */
#ifndef DD_EXECUTOR_H
#define DD_EXECUTOR_H

#include <stdint.h>

#include "../common/err.h"

struct exec_handle {
	int pid;           /* local: the worker's pid (its process group too) */
	int64_t pid_start; /* local: its start time, to tell a reused pid */
	int is_child;      /* local: spawned by this process, so waitpid works */
};

enum exec_status { EXEC_RUNNING, EXEC_EXITED, EXEC_GONE };

struct executor {
	const char *name;
	/* Start `exe worker dir`, output to dir/worker.log.  Fills h. */
	int (*start)(const char *exe, const char *dir, struct exec_handle *h, struct dd_err *err);
	/* Is it still running?  EXEC_EXITED fills *wait_status (as from waitpid);
	 * EXEC_GONE means it ended and its status cannot be known (adopted). */
	enum exec_status (*check)(struct exec_handle *h, int *wait_status);
	/* Send sig to the worker and everything it started. */
	void (*signal)(const struct exec_handle *h, int sig);
};

extern const struct executor exec_local;

/* Start time of a live pid (from /proc), or -1 when there is no such process. */
int64_t exec_local_pid_start(int pid);

#endif
