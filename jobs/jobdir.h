/* jobdir.h — the data folder's layout: the one owner of the names under DATA/.
 *
 *   DATA/jobs/<id>/            a job's folder (jobdir_job), all it owns
 *   DATA/uploads/<id><.ext>    an upload not yet used (jobdir_upload)
 *   DATA/uploads/<…>.owner     beside it, its owner's user id (jobdir_upload_owner)
 *
 * and the fixed names inside every job's folder (JOBDIR_*).  What a kind keeps
 * beside them is named by its own owner: networks/modeldir.h for a model folder,
 * datasets/dsinfo.h for a dataset's.  Every path is built into a caller's buffer
 * and cut short (snprintf) when it does not fit. */
#ifndef DD_JOBDIR_H
#define DD_JOBDIR_H

#include <stddef.h>
#include <stdint.h>

/* in every job's folder */
#define JOBDIR_JOB "job.json"           /* what the job is (sched.c writes it) */
#define JOBDIR_EVENTS "events.jsonl"    /* what happened (events.c) */
#define JOBDIR_WORKER_LOG "worker.log"  /* the worker's stdout and stderr */
#define JOBDIR_SLURM "slurm.sh"         /* the batch script (exec_slurm.c) */
#define JOBDIR_ABORT "abort.requested"  /* the mark a Slurm worker polls for */

/* in a dataset job's folder, while it runs: the unpacked images */
#define JOBDIR_SOURCE "source"

/* in an evaluation job's folder */
#define JOBDIR_METRICS "metrics.json"
#define JOBDIR_RESULTS "results.jsonl"
#define JOBDIR_RESULTS_CSV "results.csv"
#define JOBDIR_EVAL_IMAGES "images"
#define JOBDIR_EVAL_FILES "files.txt"
#define JOBDIR_EVAL_INDEX "files.idx"

/* DATA/jobs into buf. */
void jobdir_jobs(const char *data_dir, char *buf, size_t len);

/* DATA/jobs/<id> into buf. */
void jobdir_job(const char *data_dir, int64_t id, char *buf, size_t len);

/* Is path (resolved) a job's folder, DATA/jobs/<digits>?  The twin of
 * jobdir_job.  1 or 0. */
int jobdir_is_job(const char *data_dir, const char *path);

/* The folder of job id beside the job folder dir (DATA/jobs/<id>, found from
 * DATA/jobs/<other>): what a worker, which knows only its own folder, uses to
 * reach the jobs it depends on.  0, or -1 when dir has no parent folder. */
int jobdir_sibling(const char *dir, int64_t id, char *buf, size_t len);

/* DIR/NAME into buf: a file of a job's folder (name: one of the JOBDIR_* names). */
void jobdir_file(const char *dir, const char *name, char *buf, size_t len);

/* DATA/uploads into buf. */
void jobdir_uploads(const char *data_dir, char *buf, size_t len);

/* DATA/uploads/<id><ext> into buf (ext with its dot: ".zip"). */
void jobdir_upload(const char *data_dir, const char *id, const char *ext, char *buf, size_t len);

/* The owner file beside the upload at path, <path>.owner, into buf. */
void jobdir_upload_owner(const char *path, char *buf, size_t len);

/* Is name (a file name in DATA/uploads) an owner file?  Its length without
 * ".owner" (the upload's name), or 0 when it is not one. */
size_t jobdir_upload_owner_of(const char *name);

#endif
