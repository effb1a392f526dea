/* modeldir.c — the names inside a model folder and its snapshots (modeldir.h):
 * building a snapshot's file name and parsing it back, listing a folder's
 * snapshots by epoch, finding one, and reading a snapshot's iteration. */
#include "modeldir.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../common/json.h"

#define SNAP_PREFIX "snapshot_epoch_"

void modeldir_path(const char *dir, const char *name, char *buf, size_t len) { snprintf(buf, len, "%s/%s", dir, name); }

void modeldir_label_at(int64_t it, int64_t ipe, char *buf, size_t len)
{
	if (it % ipe == 0)
		snprintf(buf, len, "%lld", (long long)(it / ipe));
	else {
		snprintf(buf, len, "%.4f", (double)it / (double)ipe);
		size_t n = strlen(buf);
		while (n > 0 && buf[n - 1] == '0')
			buf[--n] = 0;
	}
}

void modeldir_label_of(double epoch, char *buf, size_t len)
{
	snprintf(buf, len, "%.4f", epoch);
	char *e = buf + strlen(buf) - 1;
	while (*e == '0')
		*e-- = 0;
	if (*e == '.')
		*e = 0;
}

int modeldir_state_of(const char *weights, char *buf, size_t len)
{
	static const char ext[] = "." MODELDIR_SNAP_WEIGHTS;
	size_t n = strlen(weights);
	if (n > sizeof ext - 1 && !strcmp(weights + n - (sizeof ext - 1), ext))
		n -= sizeof ext - 1;
	if (n + 16 > len)
		return -1;
	snprintf(buf, len, "%.*s." MODELDIR_SNAP_STATE, (int)n, weights);
	return 0;
}

int modeldir_label_ok(const char *s, double *epoch)
{
	size_t i = 0, n = strlen(s);
	if (n == 0 || n >= MODELDIR_LABEL_MAX || (s[0] == '0' && s[1] && s[1] != '.'))
		return 0;
	while (s[i] >= '0' && s[i] <= '9')
		i++;
	if (i == 0)
		return 0;
	if (s[i] == '.') {
		size_t f = ++i;
		while (s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == f)
			return 0;
	}
	if (s[i])
		return 0;
	if (epoch)
		*epoch = strtod(s, NULL);
	return 1;
}

void modeldir_snapshot_path(const char *dir, const char *label, const char *ext, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" SNAP_PREFIX "%s.%s", dir, label, ext);
}

int modeldir_snapshot_parse(const char *name, struct modeldir_snapshot *out)
{
	static const char pre[] = SNAP_PREFIX, ext[] = "." MODELDIR_SNAP_WEIGHTS;
	const char *slash = strrchr(name, '/');
	if (slash)
		name = slash + 1;
	size_t len = strlen(name);
	if (strncmp(name, pre, sizeof pre - 1) != 0 || len < sizeof pre + sizeof ext - 2 ||
	    strcmp(name + len - (sizeof ext - 1), ext) != 0)
		return 0;
	size_t ll = len - (sizeof pre - 1) - (sizeof ext - 1);
	if (ll >= sizeof out->label)
		return 0;
	memcpy(out->label, name + sizeof pre - 1, ll);
	out->label[ll] = 0;
	return modeldir_label_ok(out->label, &out->epoch);
}

static int cmp_snap(const void *a, const void *b)
{
	double x = ((const struct modeldir_snapshot *)a)->epoch, y = ((const struct modeldir_snapshot *)b)->epoch;
	return (x > y) - (x < y);
}

int modeldir_snapshots(const char *dir, struct modeldir_snapshot **snaps, int *n, struct dd_err *err)
{
	*snaps = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return DD_OK; /* no folder yet: no snapshots */
	int cap = 0;
	struct dirent *e;
	int rc = DD_OK;
	while ((e = readdir(d))) {
		struct modeldir_snapshot one;
		if (!modeldir_snapshot_parse(e->d_name, &one))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			struct modeldir_snapshot *g = realloc(*snaps, (size_t)cap * sizeof *g);
			if (!g) {
				rc = dd_err_set(err, DD_ENOMEM, "out of memory");
				break;
			}
			*snaps = g;
		}
		(*snaps)[(*n)++] = one;
	}
	closedir(d);
	if (rc) {
		free(*snaps);
		*snaps = NULL;
		*n = 0;
		return rc;
	}
	if (*n)
		qsort(*snaps, (size_t)*n, sizeof **snaps, cmp_snap);
	return DD_OK;
}

int modeldir_snapshot_find(const struct modeldir_snapshot *snaps, int n, double epoch)
{
	if (epoch < 0)
		return n - 1;
	for (int i = 0; i < n; i++)
		if (fabs(snaps[i].epoch - epoch) <= 1e-6)
			return i;
	return -1;
}

int64_t modeldir_snapshot_iteration(const char *path)
{
	/* safetensors: an 8-byte little-endian header length, then the JSON header, whose
	 * "__metadata__" holds string pairs; the tensors after it are not read */
	int64_t it = -1;
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	unsigned char b[8];
	char *hdr = NULL;
	cJSON *j = NULL;
	if (fread(b, 1, 8, f) != 8)
		goto out;
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | b[i];
	if (hl == 0 || hl > (1u << 20) || !(hdr = malloc((size_t)hl + 1)) || fread(hdr, 1, (size_t)hl, f) != hl)
		goto out;
	hdr[hl] = 0;
	json_parse(hdr, (size_t)hl, "a snapshot's header", &j, NULL);
	const char *v = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "__metadata__"), "iteration"));
	char *end;
	long long x = v ? strtoll(v, &end, 10) : -1;
	if (v && *v && !*end && x >= 0)
		it = x;
out:
	cJSON_Delete(j);
	free(hdr);
	fclose(f);
	return it;
}

