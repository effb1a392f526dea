/* kind_check.h — what every kind's validate asks when it has a caller
 * (jobs/job.h, struct job_caller): may the caller use the job a field names, is a
 * server path below the server's --data-root, which file an upload id names, and
 * the caps on unpacking.  One function per rule, for every route: POST /api/v1/jobs,
 * the dedicated routes (datasets, models, evaluations), clones and resumes all
 * reach them through sched_validate. */
#ifndef DD_KIND_CHECK_H
#define DD_KIND_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "../datasets/archive.h"
#include "job.h"

/* Job id, named in field (e.g. "finetune.model"), as a job of kind `kind` that who
 * may use: DD_OK, the job's state into *state (may be NULL), its folder into dir
 * and its id into uses.  DD_EINVAL "FIELD: there is no job N" when it does not
 * exist or who may not use it (the same words either way, so that ids tell
 * nothing), or "FIELD: job N is a K job, not a KIND". */
int kind_use_job(const struct job_caller *who, struct job_uses *uses, int64_t id, const char *kind,
		 const char *field, enum job_state *state, char *dir, size_t len, struct dd_err *err);

/* kind_use_job for a finished image classification dataset: DD_ECONFLICT
 * "FIELD: job N is STATE; PURPOSE" while it is not done, DD_EINVAL when it has no
 * dataset.json or train_db. */
int kind_use_dataset(const struct job_caller *who, struct job_uses *uses, int64_t id, const char *field,
		     const char *purpose, char *dir, size_t len, struct dd_err *err);

/* Is path (which must exist) below one of s's --data-root folders after
 * realpath?  1 and the resolved path (PATH_MAX bytes) into resolved. */
int kind_path_allowed(const struct job_server *s, const char *path, char *resolved);

/* The server path obj[key] (where: "source."), which must exist and lie below a
 * --data-root after realpath; replaced by the resolved path.  DD_EPERM naming the
 * field otherwise; absent is fine unless required (DD_EINVAL). */
int kind_server_path(const struct job_caller *who, cJSON *obj, const char *where, const char *key,
		     int required, struct dd_err *err);

/* Is id an upload's id (24 lowercase hex digits)?  And the archive it names,
 * DATA/uploads/<id>.zip|.tar|.tar.gz, into path: 1 when it exists.  The only
 * code that turns an upload id into a path (app/api/api_datasets.c makes them). */
int kind_upload_id_ok(const char *id);
int kind_upload_path(const char *data_dir, const char *id, char *path, size_t len);
/* The same for a text upload (a segmentation colour map): DATA/uploads/<id>.txt.
 * Never an archive source: kind_upload_path does not find it. */
int kind_upload_text_path(const char *data_dir, const char *id, char *path, size_t len);
/* An upload's owner is kept beside it, in <file>.owner (the user id in decimal; 0
 * the local user; jobs/jobdir.h names it), from the moment it is made until it is used or swept: uploads
 * count against their owner's disk quota, and only their owner (or an admin) may
 * use one.  kind_upload_owner: the owner of the upload at path, 0 when unknown. */
int64_t kind_upload_owner(const char *path);
/* May who use the upload at path (its owner, or an admin)? */
int kind_upload_usable(const struct job_caller *who, const char *path);

/* The caps on unpacking: archive.h's defaults, lowered or raised by the server's
 * --archive-max-files and --archive-max-mib (0: the default). */
void kind_archive_limits(long long max_files, long long max_bytes, struct archive_limits *l);

/* A clone of a job made from an upload unpacks the original's kept archive (an
 * upload is used once): src (the clone's params.source) loses file, upload,
 * limits and archive_of, and gains archive_of: orig_id, which the kind's validate
 * checks the caller may use.  DD_ECONFLICT with the sentence gone when orig_dir
 * keeps no archive. */
int kind_clone_archive(cJSON *src, int64_t orig_id, const char *orig_dir, const char *gone, struct dd_err *err);

#endif
