/* jobdir.c — the data folder's layout (jobdir.h): DATA/jobs/<id>, DATA/uploads
 * and the fixed names of a job's folder, built in one place. */
#include "jobdir.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define OWNER_SUFFIX ".owner"

void jobdir_jobs(const char *data_dir, char *buf, size_t len) { snprintf(buf, len, "%s/jobs", data_dir); }

void jobdir_job(const char *data_dir, int64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs/%lld", data_dir, (long long)id);
}

int jobdir_is_job(const char *data_dir, const char *path)
{
	char jobs[PATH_MAX];
	jobdir_jobs(data_dir, jobs, sizeof jobs);
	size_t n = strlen(jobs);
	if (strncmp(path, jobs, n) != 0 || path[n] != '/' || !path[n + 1])
		return 0;
	return strspn(path + n + 1, "0123456789") == strlen(path + n + 1);
}

int jobdir_sibling(const char *dir, int64_t id, char *buf, size_t len)
{
	const char *slash = strrchr(dir, '/');
	if (!slash)
		return -1;
	snprintf(buf, len, "%.*s/%lld", (int)(slash - dir), dir, (long long)id);
	return 0;
}

void jobdir_file(const char *dir, const char *name, char *buf, size_t len) { snprintf(buf, len, "%s/%s", dir, name); }

void jobdir_uploads(const char *data_dir, char *buf, size_t len) { snprintf(buf, len, "%s/uploads", data_dir); }

void jobdir_upload(const char *data_dir, const char *id, const char *ext, char *buf, size_t len)
{
	snprintf(buf, len, "%s/uploads/%s%s", data_dir, id, ext);
}

void jobdir_upload_owner(const char *path, char *buf, size_t len) { snprintf(buf, len, "%s" OWNER_SUFFIX, path); }

size_t jobdir_upload_owner_of(const char *name)
{
	size_t n = strlen(name), s = sizeof OWNER_SUFFIX - 1;
	return n > s && strcmp(name + n - s, OWNER_SUFFIX) == 0 ? n - s : 0;
}
