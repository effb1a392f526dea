/* snapshot.c — safetensors writing and strict reading; graph weights and solver
 * state through them (see snapshot.h for the format and the API).
 *
 * Reading.  st_open reads the whole file into one buffer and validates it before
 * st_find can hand out a pointer: the header length against ST_MAX_HEADER and the
 * file size; the JSON (cJSON, which bounds nesting); every entry's dtype, shape
 * (at most ST_MAX_DIMS integral dimensions, product checked for overflow) and
 * data_offsets (integral, begin <= end <= data size, end - begin == 4 * product);
 * and, as the reference implementation does, that the tensors sorted by offset tile
 * the data section exactly (no hole, no overlap, nothing after).  Names and metadata
 * keys must be unique.  Sorting (not pairwise comparison) keeps a hostile header of
 * millions of entries at n log n.
 *
 * Invariants of struct st_file: ent[] is sorted by data offset and byname[] indexes
 * it by name; data points at the data section, moved down to a 4-byte boundary
 * inside buf (the JSON it overwrites was parsed already), so that every entry's
 * begin (a multiple of 4, checked) gives aligned floats.
 *
 * Writing.  st_write streams header and tensors into "<path>.tmp.<pid>", fsyncs it,
 * renames it over path and fsyncs the folder, so a crash at any point leaves either
 * the old file or the new one under path.  Floats are written in host order: the
 * build refuses a big-endian host. */
#define _GNU_SOURCE
#include "snapshot.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "graph.h"
#include "solver.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot.c stores float32 in host order, which safetensors requires to be little-endian"
#endif

#define ST_MAX_FILE ((size_t)64 << 30) /* bytes st_open will read */
#define ST_MAX_INT 9007199254740992.0  /* 2^53: the largest integer a JSON double holds exactly */

struct st_entry {
	const char *name;   /* borrowed from hdr */
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	uint64_t begin, end; /* bytes into the data section */
};

struct st_file {
	char *what;            /* path or caller's name, for messages */
	uint8_t *buf;          /* the whole file */
	size_t len;
	const uint8_t *data;   /* the data section, 4-byte aligned, inside buf */
	uint64_t data_len;
	cJSON *hdr;
	const cJSON *meta;     /* "__metadata__" or NULL */
	int n;
	struct st_entry *ent;  /* (n) by offset */
	const struct st_entry **byname; /* (n) into ent, by name */
};

/* ---- reading ---- */

static int cmp_offset(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((*(const struct st_entry *const *)a)->name, (*(const struct st_entry *const *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* an integral JSON number in [0, 2^53] */
static int get_uint(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return -1;
	double d = v->valuedouble;
	if (!(d >= 0 && d <= ST_MAX_INT && d == floor(d)))
		return -1;
	*out = (uint64_t)d;
	return 0;
}

static int check_meta(struct st_file *f, const cJSON *m, struct dd_err *err)
{
	if (!cJSON_IsObject(m))
		return dd_err_set(err, DD_EINVAL, "%s: __metadata__ is not a JSON object", f->what);
	int n = 0;
	const cJSON *kv;
	cJSON_ArrayForEach(kv, m)
	{
		if (!cJSON_IsString(kv) || !kv->string)
			return dd_err_set(err, DD_EINVAL, "%s: metadata '%.64s' is not a string", f->what,
					  kv->string ? kv->string : "");
		n++;
	}
	if (n < 2)
		return DD_OK;
	const char **keys = malloc((size_t)n * sizeof *keys);
	if (!keys)
		return dd_err_set(err, DD_ENOMEM, "%s: out of memory for its metadata", f->what);
	n = 0;
	cJSON_ArrayForEach(kv, m)
		keys[n++] = kv->string;
	qsort(keys, (size_t)n, sizeof *keys, cmp_str);
	int rc = DD_OK;
	for (int i = 1; i < n && !rc; i++)
		if (strcmp(keys[i - 1], keys[i]) == 0)
			rc = dd_err_set(err, DD_EINVAL, "%s: metadata key '%.64s' appears twice", f->what, keys[i]);
	free(keys);
	return rc;
}

static int check_entry(struct st_file *f, const cJSON *t, struct st_entry *e, struct dd_err *err)
{
	const char *nm = t->string;
	e->name = nm;
	if (!*nm)
		return dd_err_set(err, DD_EINVAL, "%s: a tensor has an empty name", f->what);
	if (!cJSON_IsObject(t))
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s is not a JSON object", f->what, nm);
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
	if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s lacks dtype, shape or data_offsets", f->what, nm);
	if (strcmp(dt->valuestring, "F32") != 0)
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s is %.16s; deepdesk reads only F32", f->what, nm,
				  dt->valuestring);
	int nd = cJSON_GetArraySize(sh);
	if (nd > ST_MAX_DIMS)
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s has %d dimensions, at most %d", f->what, nm, nd,
				  ST_MAX_DIMS);
	e->ndim = nd;
	uint64_t count = 1;
	int k = 0;
	const cJSON *d;
	cJSON_ArrayForEach(d, sh)
	{
		uint64_t v;
		if (get_uint(d, &v) || v > INT64_MAX)
			return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s: shape[%d] is not a size", f->what, nm, k);
		e->shape[k++] = (int64_t)v;
		if (__builtin_mul_overflow(count, v, &count))
			return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s: the shape's product overflows", f->what, nm);
	}
	uint64_t bytes;
	if (__builtin_mul_overflow(count, 4, &bytes))
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s: the shape's product overflows", f->what, nm);
	if (cJSON_GetArraySize(off) != 2 || get_uint(cJSON_GetArrayItem(off, 0), &e->begin) ||
	    get_uint(cJSON_GetArrayItem(off, 1), &e->end))
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s: data_offsets is not two byte offsets", f->what, nm);
	if (e->begin > e->end || e->end > f->data_len)
		return dd_err_set(err, DD_EINVAL,
				  "%s: tensor %.64s: data_offsets [%llu, %llu] outside the %llu bytes of data", f->what,
				  nm, (unsigned long long)e->begin, (unsigned long long)e->end,
				  (unsigned long long)f->data_len);
	if (e->end - e->begin != bytes)
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s: %llu bytes of data, its shape needs %llu", f->what,
				  nm, (unsigned long long)(e->end - e->begin), (unsigned long long)bytes);
	if (e->begin % 4)
		return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s starts at byte %llu, not a multiple of 4", f->what,
				  nm, (unsigned long long)e->begin);
	return DD_OK;
}

/* Validate f->buf (f->len bytes, owned by f) and index it; see the file's comment. */
static int parse(struct st_file *f, struct dd_err *err)
{
	if (f->len < 8)
		return dd_err_set(err, DD_EINVAL, "%s: %zu bytes, too short for a safetensors file", f->what, f->len);
	uint64_t hl = 0;
	for (int b = 0; b < 8; b++)
		hl |= (uint64_t)f->buf[b] << (8 * b);
	if (hl > ST_MAX_HEADER)
		return dd_err_set(err, DD_EINVAL, "%s: a header of %llu bytes, over the %u-byte limit (not safetensors?)",
				  f->what, (unsigned long long)hl, ST_MAX_HEADER);
	if (hl > f->len - 8)
		return dd_err_set(err, DD_EINVAL, "%s: the header (%llu bytes) runs past the end of the file (%zu bytes)",
				  f->what, (unsigned long long)hl, f->len);
	const char *js = (const char *)f->buf + 8, *end = NULL;
	f->data_len = f->len - 8 - hl;
	/* the scan first (nesting, UTF-8), then cJSON, whose end pointer says where
	 * trailing bytes begin (padding spaces are allowed, anything else is not) */
	struct dd_err jerr = { 0 };
	if (json_check(js, (size_t)hl, "header", &jerr) != DD_OK)
		return dd_err_set(err, DD_EINVAL, "%s: the header is not valid JSON (%s)", f->what, jerr.msg);
	f->hdr = cJSON_ParseWithLengthOpts(js, (size_t)hl, &end, 0);
	if (!f->hdr)
		return dd_err_set(err, DD_EINVAL, "%s: the header is not valid JSON (at byte %lld of it)", f->what,
				  end ? (long long)(end - js) : -1LL);
	for (const char *p = end; p < js + hl; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return dd_err_set(err, DD_EINVAL, "%s: bytes after the header's JSON (at byte %lld of it)",
					  f->what, (long long)(p - js));
	if (!cJSON_IsObject(f->hdr))
		return dd_err_set(err, DD_EINVAL, "%s: the header is not a JSON object", f->what);

	int n = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, f->hdr)
	{
		if (!c->string)
			return dd_err_set(err, DD_EINVAL, "%s: a header entry has no name", f->what);
		if (strcmp(c->string, "__metadata__") == 0) {
			if (f->meta)
				return dd_err_set(err, DD_EINVAL, "%s: __metadata__ appears twice", f->what);
			int rc = check_meta(f, c, err);
			if (rc)
				return rc;
			f->meta = c;
		} else if (n == INT_MAX) {
			return dd_err_set(err, DD_EINVAL, "%s: too many tensors", f->what);
		} else {
			n++;
		}
	}
	f->ent = calloc((size_t)n + 1, sizeof *f->ent);
	f->byname = calloc((size_t)n + 1, sizeof *f->byname);
	if (!f->ent || !f->byname)
		return dd_err_set(err, DD_ENOMEM, "%s: out of memory for %d tensor entries", f->what, n);
	f->n = 0;
	cJSON_ArrayForEach(c, f->hdr)
	{
		if (c == f->meta)
			continue;
		int rc = check_entry(f, c, &f->ent[f->n], err);
		if (rc)
			return rc;
		f->n++;
	}
	qsort(f->ent, (size_t)n, sizeof *f->ent, cmp_offset);
	uint64_t at = 0;
	for (int i = 0; i < n; i++) {
		if (f->ent[i].begin != at)
			return dd_err_set(err, DD_EINVAL,
					  "%s: tensor %.64s starts at byte %llu of the data, where the one before ends at "
					  "%llu (holes and overlaps are not allowed)",
					  f->what, f->ent[i].name, (unsigned long long)f->ent[i].begin,
					  (unsigned long long)at);
		at = f->ent[i].end;
	}
	if (at != f->data_len)
		return dd_err_set(err, DD_EINVAL, "%s: %llu bytes after the last tensor", f->what,
				  (unsigned long long)(f->data_len - at));
	for (int i = 0; i < n; i++)
		f->byname[i] = &f->ent[i];
	qsort(f->byname, (size_t)n, sizeof *f->byname, cmp_name);
	for (int i = 1; i < n; i++)
		if (strcmp(f->byname[i - 1]->name, f->byname[i]->name) == 0)
			return dd_err_set(err, DD_EINVAL, "%s: tensor %.64s appears twice", f->what, f->byname[i]->name);
	size_t start = 8 + (size_t)hl, aligned = start & ~(size_t)3;
	if (aligned != start) /* the JSON below is parsed already: slide the data onto a float boundary */
		memmove(f->buf + aligned, f->buf + start, (size_t)f->data_len);
	f->data = f->buf + aligned;
	return DD_OK;
}

/* Takes buf (malloc'd, len bytes) whatever happens. */
static int open_owned(uint8_t *buf, size_t len, const char *what, struct st_file **out, struct dd_err *err)
{
	*out = NULL;
	struct st_file *f = calloc(1, sizeof *f);
	if (!f) {
		free(buf);
		return dd_err_set(err, DD_ENOMEM, "out of memory opening %s", what);
	}
	f->buf = buf;
	f->len = len;
	f->what = strdup(what);
	if (!f->what) {
		st_close(f);
		return dd_err_set(err, DD_ENOMEM, "out of memory opening %s", what);
	}
	int rc = parse(f, err);
	if (rc) {
		st_close(f);
		return rc;
	}
	*out = f;
	return DD_OK;
}

int st_open(const char *path, struct st_file **out, struct dd_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	*out = NULL;
	int rc = fs_read_file(path, ST_MAX_FILE, &buf, &len, err);
	if (rc)
		return rc;
	return open_owned((uint8_t *)buf, len, path, out, err);
}

int st_open_mem(const void *data, size_t len, const char *what, struct st_file **out, struct dd_err *err)
{
	*out = NULL;
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return dd_err_set(err, DD_ENOMEM, "out of memory for %zu bytes of safetensors", len);
	if (len)
		memcpy(buf, data, len);
	return open_owned(buf, len, what ? what : "safetensors", out, err);
}

void st_close(struct st_file *f)
{
	if (!f)
		return;
	free(f->byname);
	free(f->ent);
	cJSON_Delete(f->hdr);
	free(f->buf);
	free(f->what);
	free(f);
}

const char *st_meta(const struct st_file *f, const char *key)
{
	const cJSON *v = f->meta ? cJSON_GetObjectItemCaseSensitive(f->meta, key) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int st_count(const struct st_file *f)
{
	return f->n;
}

void st_get(const struct st_file *f, int i, struct st_tensor *out)
{
	const struct st_entry *e = &f->ent[i];
	memset(out, 0, sizeof *out);
	out->name = e->name;
	out->ndim = e->ndim;
	memcpy(out->shape, e->shape, sizeof out->shape);
	out->data = (const float *)(const void *)(f->data + e->begin);
}

int st_find(const struct st_file *f, const char *name, struct st_tensor *out)
{
	int lo = 0, hi = f->n - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(name, f->byname[mid]->name);
		if (c == 0) {
			st_get(f, (int)(f->byname[mid] - f->ent), out);
			return DD_OK;
		}
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return DD_ENOENT;
}

/* ---- writing ---- */

/* fsync the folder holding path, so that the rename survives a crash; best effort
 * (some file systems refuse fsync on a folder). */
static void sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* err for a failed write of path: a full disk in fs_err_nospace's sentence (called
 * while the temporary file still holds what fitted, so the space is what the
 * writer found), anything else with its errno. */
static int write_failed(struct dd_err *err, int e, const char *path)
{
	if (e == ENOSPC || e == EDQUOT)
		return fs_err_nospace(err, path, "cannot write %s", path);
	return dd_err_sys(err, DD_EIO, e, "cannot write %s", path);
}

static int tensor_bytes(const struct st_tensor *t, uint64_t *bytes)
{
	uint64_t c = 1;
	for (int d = 0; d < t->ndim; d++)
		if (t->shape[d] < 0 || __builtin_mul_overflow(c, (uint64_t)t->shape[d], &c))
			return -1;
	if (__builtin_mul_overflow(c, 4, bytes) || *bytes > (uint64_t)ST_MAX_INT)
		return -1;
	return 0;
}

/* The header JSON for st_write (caller frees), or NULL with err set. */
static char *build_header(const struct st_tensor *t, int n, const char *const *meta, struct dd_err *err)
{
	cJSON *hdr = cJSON_CreateObject();
	int ok = hdr != NULL;
	if (ok && meta && meta[0] && meta[1]) {
		cJSON *m = cJSON_AddObjectToObject(hdr, "__metadata__");
		ok = m != NULL;
		for (int k = 0; ok && meta[k] && meta[k + 1]; k += 2)
			ok = cJSON_AddStringToObject(m, meta[k], meta[k + 1]) != NULL;
	}
	uint64_t off = 0;
	for (int i = 0; ok && i < n; i++) {
		uint64_t bytes = 0;
		(void)tensor_bytes(&t[i], &bytes); /* checked by st_write */
		cJSON *e = cJSON_AddObjectToObject(hdr, t[i].name);
		cJSON *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
		cJSON *offs = shape ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
		ok = offs && cJSON_AddStringToObject(e, "dtype", "F32");
		for (int d = 0; ok && d < t[i].ndim; d++) {
			cJSON *v = cJSON_CreateNumber((double)t[i].shape[d]);
			ok = v && cJSON_AddItemToArray(shape, v);
		}
		cJSON *b = ok ? cJSON_CreateNumber((double)off) : NULL;
		ok = b && cJSON_AddItemToArray(offs, b);
		cJSON *en = ok ? cJSON_CreateNumber((double)(off + bytes)) : NULL;
		ok = en && cJSON_AddItemToArray(offs, en);
		off += bytes;
	}
	char *js = ok ? cJSON_PrintUnformatted(hdr) : NULL;
	cJSON_Delete(hdr);
	if (!js)
		dd_err_set(err, DD_ENOMEM, "out of memory for a safetensors header");
	return js;
}

int st_write(const char *path, const struct st_tensor *t, int n, const char *const *meta, struct dd_err *err)
{
	if (n < 0 || (n > 0 && !t))
		return dd_err_set(err, DD_EINVAL, "%s: %d tensors to write", path, n);
	for (int i = 0; i < n; i++) {
		uint64_t bytes;
		if (!t[i].name || !*t[i].name || strcmp(t[i].name, "__metadata__") == 0)
			return dd_err_set(err, DD_EINVAL, "%s: tensor %d has no usable name", path, i);
		if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS || tensor_bytes(&t[i], &bytes))
			return dd_err_set(err, DD_EINVAL, "%s: tensor %s has a bad shape", path, t[i].name);
		if (bytes && !t[i].data)
			return dd_err_set(err, DD_EINVAL, "%s: tensor %s has no data", path, t[i].name);
		for (int j = 0; j < i; j++)
			if (strcmp(t[i].name, t[j].name) == 0)
				return dd_err_set(err, DD_EINVAL, "%s: tensor %s given twice", path, t[i].name);
	}
	for (int k = 0; meta && meta[k] && meta[k + 1]; k += 2)
		for (int j = 0; j < k; j += 2)
			if (strcmp(meta[k], meta[j]) == 0)
				return dd_err_set(err, DD_EINVAL, "%s: metadata key %s given twice", path, meta[k]);

	char *js = build_header(t, n, meta, err);
	if (!js)
		return DD_ENOMEM;
	size_t hl = strlen(js), padded = (hl + 7) & ~(size_t)7;
	char tmp[PATH_MAX];
	int rc = DD_OK, fd = -1, made = 0;
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
		rc = dd_err_set(err, DD_EINVAL, "path too long: %s", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = dd_err_sys(err, DD_EIO, errno, "cannot create %s", tmp);
		goto out;
	}
	made = 1;
	uint8_t lenb[8];
	for (int b = 0; b < 8; b++)
		lenb[b] = (uint8_t)((uint64_t)padded >> (8 * b));
	int bad = fs_write_all(fd, lenb, 8) || fs_write_all(fd, js, hl) || fs_write_all(fd, "        ", padded - hl);
	for (int i = 0; !bad && i < n; i++) {
		uint64_t bytes = 0;
		(void)tensor_bytes(&t[i], &bytes);
		bad = bytes && fs_write_all(fd, t[i].data, (size_t)bytes);
	}
	if (bad || fsync(fd) != 0) {
		rc = write_failed(err, errno, path);
		goto out;
	}
	int cl = close(fd);
	fd = -1;
	if (cl != 0 || rename(tmp, path) != 0) {
		rc = write_failed(err, errno, path);
		goto out;
	}
	sync_dir(path);
out:
	if (fd >= 0)
		close(fd);
	if (rc && made)
		unlink(tmp);
	free(js);
	return rc;
}

/* ---- graph weights ---- */

/* The snapshot name of every parameter blob of gr: "<layer>.<i>".  *out (n strings
 * in one allocation, caller frees *out with free()); DD_OK or DD_ENOMEM. */
static int param_names(struct graph *gr, char ***out, struct dd_err *err)
{
	int n = graph_nparam(gr);
	size_t bytes = (size_t)(n + 1) * sizeof(char *);
	for (int i = 0; i < n; i++)
		bytes += strlen(graph_param(gr, i)->layer) + 16;
	char **names = malloc(bytes);
	if (!names)
		return dd_err_set(err, DD_ENOMEM, "out of memory for %d blob names", n);
	char *p = (char *)(names + n + 1);
	const char *prev = NULL;
	int idx = 0;
	for (int i = 0; i < n; i++) {
		const struct graph_param *gp = graph_param(gr, i);
		idx = prev && strcmp(prev, gp->layer) == 0 ? idx + 1 : 0;
		prev = gp->layer;
		names[i] = p;
		p += sprintf(p, "%s.%d", gp->layer, idx) + 1;
	}
	names[n] = NULL;
	*out = names;
	return DD_OK;
}

int snapshot_save_weights(struct graph *gr, const char *path, const char *const *meta, struct dd_err *err)
{
	int n = graph_nparam(gr);
	char **names = NULL;
	int rc = param_names(gr, &names, err);
	if (rc)
		return rc;
	struct st_tensor *t = calloc((size_t)n + 1, sizeof *t);
	if (!t) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory for %d tensors", n);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const struct graph_param *gp = graph_param(gr, i);
		t[i].name = names[i];
		t[i].ndim = gp->shape.ndim;
		for (int d = 0; d < gp->shape.ndim && d < ST_MAX_DIMS; d++)
			t[i].shape[d] = gp->shape.dim[d];
		t[i].data = gp->w;
		int64_t c = 1;
		for (int d = 0; d < gp->shape.ndim; d++)
			c *= gp->shape.dim[d];
		if (c != gp->count || gp->shape.ndim > ST_MAX_DIMS) {
			rc = dd_err_set(err, DD_EINTERNAL, "blob %s: its shape does not match its %lld values", names[i],
					(long long)gp->count);
			goto out;
		}
	}
	rc = st_write(path, t, n, meta, err);
out:
	free(t);
	free(names);
	return rc;
}

/* "1000x4096", "scalar" */
static const char *shape_str(int ndim, const int64_t *dim, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	if (ndim == 0)
		snprintf(buf, len, "scalar");
	for (int d = 0; d < ndim && at < len; d++) {
		int w = snprintf(buf + at, len - at, d ? "x%lld" : "%lld", (long long)dim[d]);
		if (w < 0)
			break;
		at += (size_t)w;
	}
	return buf;
}

/* Append piece to report (len bytes) unless it would not fit with room for "…",
 * in which case "…" ends the report for good (*full). */
static void report_add(char *report, size_t len, int *full, const char *piece)
{
	if (!report || !len || *full)
		return;
	size_t used = strlen(report), add = strlen(piece);
	static const char more[] = "\xe2\x80\xa6"; /* … */
	if (used + add + sizeof more <= len) {
		memcpy(report + used, piece, add + 1);
		return;
	}
	*full = 1;
	if (used + sizeof more <= len)
		memcpy(report + used, more, sizeof more);
}

int snapshot_load_weights(struct graph *gr, const char *path, int finetune, char *report, size_t report_len,
			  struct dd_err *err)
{
	struct st_file *f = NULL;
	char **names = NULL;
	const float **src = NULL;
	int n = graph_nparam(gr), matched = 0, nre = 0, full = 0;
	if (report && report_len)
		report[0] = 0;
	int rc = st_open(path, &f, err);
	if (rc)
		return rc;
	if ((rc = param_names(gr, &names, err)))
		goto out;
	src = calloc((size_t)n + 1, sizeof *src);
	if (!src) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	/* first decide every blob, then copy: an error leaves the graph untouched */
	for (int i = 0; i < n; i++) {
		const struct graph_param *gp = graph_param(gr, i);
		struct st_tensor t;
		char have[96], want[96], piece[512];
		int found = st_find(f, names[i], &t) == DD_OK;
		int same = found && t.ndim == gp->shape.ndim;
		for (int d = 0; same && d < t.ndim; d++)
			same = t.shape[d] == gp->shape.dim[d];
		shape_str(gp->shape.ndim, gp->shape.dim, want, sizeof want);
		if (found)
			shape_str(t.ndim, t.shape, have, sizeof have);
		if (same) {
			src[i] = t.data;
			matched++;
			continue;
		}
		if (!finetune) {
			rc = found ? dd_err_set(err, DD_EINVAL, "%s: %s: the snapshot has %s, the network %s", path,
						names[i], have, want)
				   : dd_err_set(err, DD_EINVAL,
						"%s has no tensor %s (%s): a snapshot of another network?", path,
						names[i], want);
			goto out;
		}
		const char *sep = nre++ ? ", " : "";
		if (!sep[0])
			report_add(report, report_len, &full, "re-initialised: ");
		if (found)
			snprintf(piece, sizeof piece, "%s%s (%s \xe2\x86\x92 %s)", sep, names[i], have, want);
		else
			snprintf(piece, sizeof piece, "%s%s (not in the snapshot)", sep, names[i]);
		report_add(report, report_len, &full, piece);
	}
	if (finetune && n > 0 && matched == 0) {
		rc = dd_err_set(err, DD_EINVAL, "%s: none of the network's %d parameter blobs is in it by name and shape",
				path, n);
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (src[i]) {
			const struct graph_param *gp = graph_param(gr, i);
			memcpy(gp->w, src[i], (size_t)gp->count * sizeof(float));
		}
out:
	if (rc && report && report_len)
		report[0] = 0;
	free(src);
	free(names);
	st_close(f);
	return rc;
}

/* ---- solver state ---- */

int snapshot_save_solver(struct solver *s, const char *path, const char *const *meta, struct dd_err *err)
{
	int nh = solver_nhistory(s), m = 0;
	int64_t count = graph_param_count(solver_graph(s));
	while (meta && meta[m] && meta[m + 1]) {
		if (strcmp(meta[m], "solver_type") == 0)
			return dd_err_set(err, DD_EINVAL, "%s: solver_type is the solver's own metadata key", path);
		m += 2;
	}
	const char **all = malloc(((size_t)m + 3) * sizeof *all);
	if (!all)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	for (int k = 0; k < m; k++)
		all[k] = meta[k];
	all[m] = "solver_type";
	all[m + 1] = solver_type_name(solver_config_of(s)->type);
	all[m + 2] = NULL;
	struct st_tensor t[2];
	char names[2][16];
	for (int k = 0; k < nh && k < 2; k++) {
		snprintf(names[k], sizeof names[k], "history.%d", k);
		t[k] = (struct st_tensor){ .name = names[k], .ndim = 1, .shape = { count }, .data = solver_history(s, k) };
	}
	int rc = st_write(path, t, nh, all, err);
	free(all);
	return rc;
}

int snapshot_load_solver(struct solver *s, const char *path, struct dd_err *err)
{
	struct st_file *f = NULL;
	int rc = st_open(path, &f, err);
	if (rc)
		return rc;
	int nh = solver_nhistory(s);
	int64_t count = graph_param_count(solver_graph(s));
	const char *mine = solver_type_name(solver_config_of(s)->type), *theirs = st_meta(f, "solver_type");
	struct st_tensor t[2];
	if (!theirs) {
		rc = dd_err_set(err, DD_EINVAL, "%s has no solver_type: not a deepdesk solver state", path);
		goto out;
	}
	if (strcmp(theirs, mine) != 0) {
		rc = dd_err_set(err, DD_EINVAL, "%s was saved by the %.32s solver; this run uses %s", path, theirs, mine);
		goto out;
	}
	for (int k = 0; k < nh && k < 2; k++) {
		char name[16];
		snprintf(name, sizeof name, "history.%d", k);
		if (st_find(f, name, &t[k]) != DD_OK) {
			rc = dd_err_set(err, DD_EINVAL, "%s has no %s", path, name);
			goto out;
		}
		if (t[k].ndim != 1 || t[k].shape[0] != count) {
			char sh[96];
			rc = dd_err_set(err, DD_EINVAL,
					"%s: %s has shape %s, the network has %lld parameters (a solver state of another "
					"network?)",
					path, name, shape_str(t[k].ndim, t[k].shape, sh, sizeof sh), (long long)count);
			goto out;
		}
	}
	for (int k = 0; k < nh && k < 2; k++)
		memcpy(solver_history(s, k), t[k].data, (size_t)count * sizeof(float));
out:
	st_close(f);
	return rc;
}
