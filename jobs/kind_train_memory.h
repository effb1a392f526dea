/* kind_train_memory.h — the per-job memory limit, and the model kind's rule that a
 * training whose estimate (networks/memory.h) exceeds it is refused.
 *
 * One limit for the server (`deepdesk serve --job-memory-max BYTES|auto`; auto: half
 * of the machine's memory, or of the server's cgroup limit when that is lower).
 * It is checked where every route that creates or re-uses a training passes: the
 * model kind's validate() (POST /models and its sweeps, POST /jobs, clone, resume).
 * A worker runs under it too: the local executor sets its RLIMIT_DATA soft limit to
 * job_memory_cap() when it starts it (not a GPU job's: the CUDA driver's mappings), and a training lowers its own to a margin
 * over its estimate (train_memory_enter).  RLIMIT_DATA, not RLIMIT_AS: it counts
 * what malloc and anonymous mmap take, not LMDB's read-only map of a dataset (as
 * large as the database) or the address space oneDNN's and OpenMP's threads
 * reserve; cgroups are not ours to make in every container.
 *
 * The worker's folder gets memory.json ({"estimate","batch","limit"}, bytes), which
 * train_memory_death() reads when a worker ended without saying why, so the job's
 * error reads "out of memory (N MiB at batch B)" rather than a signal number. */
#ifndef DD_KIND_TRAIN_MEMORY_H
#define DD_KIND_TRAIN_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

struct net_memory;

/* Parse "auto", "off", or bytes with an optional K, M, G or T (KiB ... TiB; "MiB"
 * and "GB" read the same) into *bytes (auto: job_memory_auto(), off: 0).  DD_OK or
 * DD_EINVAL with a sentence. */
int job_memory_parse(const char *s, int64_t *bytes, struct dd_err *err);
/* Half of the physical memory, or of the server's own cgroup limit if lower. */
int64_t job_memory_auto(void);
/* The limit in force (0: none).  Until set, job_memory_auto(). */
int64_t job_memory_max(void);
void job_memory_set_max(int64_t bytes);
/* The RLIMIT_DATA soft limit a worker starts with: the limit plus a quarter, plus
 * its threads' stacks and 64 MiB; 0 when there is no limit. */
int64_t job_memory_cap(void);
/* The limit for one job of user_id (0: the local user): job_memory_max(), or the
 * user's memory quota (store_quota.memory_bytes) where that is lower; 0: none.
 * *from_quota (may be NULL) is 1 when the quota is the one in force. */
int64_t job_memory_max_for(int64_t user_id, int *from_quota);
/* Put the limit of owner_id's jobs into job.json's "guard" (as "memory_max"),
 * which the scheduler writes at every start: nothing when job has no guard. */
void train_memory_guard(cJSON *job, int64_t owner_id);
/* job_memory_cap() for the job in dir: of its guard's memory_max when job.json has
 * one (its owner's quota), else of the server's limit. */
int64_t job_memory_cap_dir(const char *dir);

/* The estimate of training text on the dataset in ds_dir with batch and crop (0:
 * the network's), solver (a name, NULL: sgd), backend (NULL: cpu) and replicas
 * copies.  DD_OK and *m, and in largest (may be NULL) the name of the layer with
 * the most parameters and in *largest_params its count; or the network's error. */
int train_memory_estimate(const char *text, const char *ds_dir, int batch, int crop, const char *solver,
			  const char *backend, int replicas, struct net_memory *m, char *largest, size_t largest_len,
			  int64_t *largest_params, struct dd_err *err);

/* The model kind's rule, on validated params: DD_OK when the training fits the
 * limit — job_memory_max_for(who's user), or the server's alone when who is NULL —
 * (or cannot be estimated here: no such dataset yet, a network that does not
 * build, which other checks report), else DD_EINVAL naming the estimate, the limit
 * (the server's, or the user's quota) and what to lower. */
struct job_caller;
int train_memory_check(const cJSON *params, const struct job_caller *who, struct dd_err *err);

/* The rule itself, on an estimate m whose largest layer is largest (may be NULL or
 * "") with lp parameters: DD_OK when m's host bytes are within job_memory_max(),
 * else DD_EINVAL: "memory: training this network at batch B needs about X (N bytes:
 * ...), over the per-job memory limit of Y (M bytes, ...): lower ...". */
int train_memory_over(const struct net_memory *m, const char *largest, int64_t lp, struct dd_err *err);

/* In a worker about to train (dir its folder): write memory.json, lower this
 * process's RLIMIT_DATA, when it started under one (the local executor's), to a
 * margin over m's host bytes (on cuda raise it back to the hard limit, since the
 * driver maps what it needs), and have a crash after a
 * failed allocation say so in worker.log.  Fills msg with a line for the job's log. */
void train_memory_enter(const char *dir, const struct net_memory *m, char *msg, size_t len);

/* "out of memory (N MiB at batch B): ..." for a job in dir whose worker ended
 * with signal sig (-1: none) or exit code (-1: unknown) and no final status, tail
 * the end of its log: 1 and why when that was memory — a SIGKILL the server did not
 * send while the kernel's out-of-memory killer killed (oom_killed: the machine's
 * count of OOM kills, /proc/vmstat oom_kill, rose during the run), or a crash or
 * exit whose log says out of memory — else 0 (a person's kill -9 stays one). */
int train_memory_death(const char *dir, int sig, int code, int oom_killed, const char *tail, char *why, size_t len);

/* The kernel's count of processes its out-of-memory killer has killed since boot
 * (/proc/vmstat oom_kill), or -1 where it is not known.  In the test build the
 * number in the file DEEPDESK_OOM_KILLS names is added, for the tests of an OOM kill. */
long long train_memory_oom_kills(void);

/* err (DD_ENOMEM from a training) as "out of memory (N MiB at batch B): MESSAGE;
 * lower ...", using dir's memory.json. */
void train_memory_oom_message(const char *dir, struct dd_err *err);

#endif
