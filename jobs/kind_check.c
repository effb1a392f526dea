/* kind_check.c — see kind_check.h. */
#define _GNU_SOURCE
#include "kind_check.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../store/store.h"
#include "../common/fsutil.h"
#include "../datasets/dsinfo.h"
#include "jobdir.h"

#define UPLOAD_ID_LEN 24

int kind_use_job(const struct job_caller *who, struct job_uses *uses, int64_t id, const char *kind,
		 const char *field, enum job_state *state, char *dir, size_t len, struct dd_err *err)
{
	struct job_row row;
	struct dd_err e = { 0 };
	int visible = id > 0 && (who->admin || (who->may_use && who->may_use(who, id)));
	int rc = visible ? store_job_row(id, &row, &e) : DD_ENOENT;
	if (rc == DD_ENOENT)
		return dd_err_set(err, DD_EINVAL, "%s: there is no job %lld", field, (long long)(id > 0 ? id : 0));
	if (rc) {
		if (err)
			*err = e;
		return rc;
	}
	if (strcmp(row.kind, kind) != 0)
		return dd_err_set(err, DD_EINVAL, "%s: job %lld is a %s job, not a %s", field, (long long)id, row.kind,
				  kind);
	if (state)
		*state = row.state;
	if (dir)
		jobdir_job(who->server->data_dir, id, dir, len);
	return uses ? job_uses_add(uses, id, err) : DD_OK;
}

int kind_use_dataset(const struct job_caller *who, struct job_uses *uses, int64_t id, const char *field,
		     const char *purpose, char *dir, size_t len, struct dd_err *err)
{
	enum job_state st;
	int rc = kind_use_job(who, uses, id, "dataset", field, &st, dir, len, err);
	if (rc)
		return rc;
	if (st != JOB_DONE)
		return dd_err_set(err, DD_ECONFLICT, "%s: job %lld is %s; %s", field, (long long)id, job_state_name(st),
				  purpose);
	if (!dsinfo_ready(dir))
		return dd_err_set(err, DD_EINVAL,
				  "%s: job %lld is not an image classification dataset (no dataset.json or train_db)",
				  field, (long long)id);
	return DD_OK;
}

int kind_path_allowed(const struct job_server *s, const char *path, char *resolved)
{
	for (int i = 0; s && i < s->nroots; i++)
		if (fs_path_under(path, s->roots[i], resolved))
			return 1;
	return 0;
}

int kind_server_path(const struct job_caller *who, cJSON *obj, const char *where, const char *key,
		     int required, struct dd_err *err)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v && !required)
		return DD_OK;
	if (!cJSON_IsString(v) || !*v->valuestring)
		return dd_err_set(err, DD_EINVAL, "%s%s: required, a server path", where, key);
	char real[PATH_MAX];
	struct stat st;
	if (stat(v->valuestring, &st) != 0 || !kind_path_allowed(who->server, v->valuestring, real))
		return dd_err_set(err, DD_EPERM, "%s%s: %.300s is not a folder or file below an allowed --data-root",
				  where, key, v->valuestring);
	cJSON_SetValuestring(v, real);
	return DD_OK;
}

int kind_upload_id_ok(const char *id)
{
	return id && strlen(id) == UPLOAD_ID_LEN && strspn(id, "0123456789abcdef") == UPLOAD_ID_LEN;
}

int kind_upload_path(const char *data_dir, const char *id, char *path, size_t len)
{
	if (!kind_upload_id_ok(id))
		return 0;
	static const char *const exts[] = { ".zip", ".tar", ".tar.gz", NULL };
	for (int i = 0; exts[i]; i++) {
		jobdir_upload(data_dir, id, exts[i], path, len);
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			return 1;
	}
	return 0;
}

int kind_upload_text_path(const char *data_dir, const char *id, char *path, size_t len)
{
	if (!kind_upload_id_ok(id))
		return 0;
	jobdir_upload(data_dir, id, ".txt", path, len);
	struct stat st;
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int64_t kind_upload_owner(const char *path)
{
	char side[PATH_MAX + 8], buf[32] = "";
	jobdir_upload_owner(path, side, sizeof side);
	FILE *f = fopen(side, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return strtoll(buf, NULL, 10);
}

int kind_upload_usable(const struct job_caller *who, const char *path)
{
	return who->admin || kind_upload_owner(path) == who->user_id;
}

int kind_clone_archive(cJSON *src, int64_t orig_id, const char *orig_dir, const char *gone, struct dd_err *err)
{
	char p[PATH_MAX];
	if (!archive_kept_find(orig_dir, p, sizeof p))
		return dd_err_set(err, DD_ECONFLICT, "%s", gone);
	static const char *const drop[] = { "file", "upload", "limits", "archive_of", NULL };
	for (int i = 0; drop[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(src, drop[i]);
	cJSON_AddNumberToObject(src, "archive_of", (double)orig_id);
	return DD_OK;
}

void kind_archive_limits(long long max_files, long long max_bytes, struct archive_limits *l)
{
	archive_limits_default(l);
	if (max_files > 0)
		l->max_entries = max_files;
	if (max_bytes > 0)
		l->max_bytes = max_bytes;
}
