/* dsinfo.c — a dataset folder's names and the reader of its dataset.json
 * (dsinfo.h). */
#include "dsinfo.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/json.h"

void dsinfo_path(const char *dir, const char *name, char *buf, size_t len) { snprintf(buf, len, "%s/%s", dir, name); }

void dsinfo_db_path(const char *dir, const char *split, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s" DSINFO_DB(""), dir, split);
}

void dsinfo_labels_db_path(const char *dir, const char *split, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s" DSINFO_LABELS_DB(""), dir, split);
}

static const char *const task_names[] = { "classification", "segmentation" };

const char *dsinfo_task_name(enum dsinfo_task t) { return (unsigned)t < 2 ? task_names[t] : "?"; }

int dsinfo_task(const cJSON *info)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(info, "task");
	if (!t)
		return DSINFO_CLASSIFICATION;
	for (int i = 0; i < 2; i++)
		if (cJSON_IsString(t) && strcmp(t->valuestring, task_names[i]) == 0)
			return i;
	return -1;
}

int dsinfo_ready(const char *dir)
{
	char db[PATH_MAX + 16], json[PATH_MAX + 16];
	dsinfo_db_path(dir, "train", db, sizeof db);
	dsinfo_path(dir, DSINFO_FILE, json, sizeof json);
	return access(db, R_OK) == 0 && access(json, R_OK) == 0;
}

int dsinfo_read(const char *dir, cJSON **out, struct dd_err *err)
{
	char path[PATH_MAX + 16];
	dsinfo_path(dir, DSINFO_FILE, path, sizeof path);
	return json_read_file(path, DSINFO_CAP, out, err);
}

const cJSON *dsinfo_options(const cJSON *info) { return cJSON_GetObjectItemCaseSensitive(info, "options"); }

int dsinfo_shape(const cJSON *info, struct dsinfo_shape *out)
{
	const cJSON *opt = dsinfo_options(info);
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(opt, "width");
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(opt, "height");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(opt, "channels");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(info, "labels");
	if (!cJSON_IsNumber(w) || !cJSON_IsNumber(h) || !cJSON_IsNumber(c) || !cJSON_IsArray(labels))
		return 0;
	out->width = w->valueint;
	out->height = h->valueint;
	out->channels = c->valueint;
	out->classes = cJSON_GetArraySize(labels);
	return 1;
}
