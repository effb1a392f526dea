/* lmdbio.c — LMDB environments of Datum records: the writer, the reader, index.bin.
 *
 * Writer.  Records are appended under keys "%08d_%d" (index, label), which sort in
 * index order up to 99,999,999 records, so every put uses MDB_APPEND (no B-tree
 * search, pages filled completely).  Puts are gathered into a pending batch that is
 * committed as one transaction when it holds `batch` records or 8 MiB, whichever
 * comes first (the byte cap bounds memory and keeps a transaction well under
 * LMDB's dirty-page limit).  The pending records stay in memory until their commit
 * succeeds: when LMDB reports MDB_MAP_FULL, the transaction is aborted, the map is
 * doubled (legal only with no transaction open) and the batch is replayed.
 * The environment is opened with MDB_NOSYNC and synced once at close: a crash may
 * lose the last transactions but never corrupts the file.  MDB_WRITEMAP is not
 * used on purpose: with it a full disk arrives as SIGBUS instead of ENOSPC, and the
 * data file is extended (sparse) to the whole map size.
 *
 * index.bin (version 1), written atomically at lmdbw_close beside data.mdb, all
 * integers little-endian:
 *     0   8  magic "DDLMDBIX"
 *     8   4  version (uint32, 1)
 *    12   4  n_labels (int32: 1 + the largest label, 0 when empty)
 *    16   8  count (int64: records)
 *    24  4n  labels[count] (int32, label of record i)
 *  24+4n  8  FNV-1a 64 of every byte before it
 * The per-label lists are not stored: the reader derives them from labels[] with a
 * counting sort in O(count), which is cheaper than reading them from disk.
 *
 * Reader.  One read-only transaction lives as long as the reader, so every pointer
 * it returns stays valid and the view is one snapshot even if a writer runs.  The
 * reader knows for each record its label (label_of) and, per label, the ascending
 * list of its record indexes (a CSR pair label_start/members).  Record i is found
 * by one B-tree lookup, MDB_SET_RANGE on "%08d_", whose result must carry index i;
 * a walk in order (lmdbr_next, or get(i) right after get(i-1)) uses MDB_NEXT.
 * Without a usable index.bin (an LMDB from DIGITS or Caffe, or a damaged file) the
 * reader walks the cursor once at open: the label is the key's "_<digits>" suffix,
 * or else the Datum's label field (Caffe's convert_imageset writes "%08d_<file>").
 * If some key is not "<digits>_..." numbered 0, 1, 2, ... in key order, record i
 * is instead the i-th key, and the reader keeps every key in memory (a second
 * pass at open; memory = total key bytes + 8 bytes per record). */
#define _GNU_SOURCE
#include "lmdbio.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/fsutil.h"

#define DEFAULT_BATCH 1000
#define DEFAULT_MAP ((size_t)64 << 20)
#define PENDING_BYTES_MAX ((size_t)8 << 20)
#define MAP_MAX ((size_t)1 << 40)  /* 1 TiB: past this a "full map" is a full disk */
#define MAX_RECORDS 100000000      /* "%08d" keeps key order = index order below this */
#define MAX_LABELS (1 << 24)       /* bounds the per-label table a foreign DB can make us allocate */
#define INDEX_FILE "index.bin"
#define INDEX_MAGIC "DDLMDBIX"
#define INDEX_VERSION 1
#define INDEX_HEADER 24

/* Fill err from an LMDB return code (LMDB's own codes or an errno). */
static int lmdb_fail(struct dd_err *err, int rc, const char *what, const char *dir)
{
	if (rc == ENOSPC || rc == EDQUOT)
		return fs_err_nospace(err, dir, "%s: %s", dir, what);
	if (rc == ENOMEM)
		return dd_err_set(err, DD_ENOMEM, "%s: %s: %s", dir, what, mdb_strerror(rc));
	return dd_err_set(err, DD_EIO, "%s: %s: %s", dir, what, mdb_strerror(rc));
}

/* lmdb_fail for the writer.  LMDB 0.9 reports a short write (what a file system
 * that fills up mid-write gives) as EIO, not ENOSPC: a write's EIO on a file
 * system with under a MiB left is taken for what it almost surely is, a full
 * disk. */
static int write_fail(struct dd_err *err, int rc, const char *what, const char *dir)
{
	int64_t room = rc == EIO ? fs_free_bytes(dir) : -1;
	if (room >= 0 && room < ((int64_t)1 << 20))
		rc = ENOSPC;
	return lmdb_fail(err, rc, what, dir);
}

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void put_le(uint8_t *o, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		o[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

/* --- writer ------------------------------------------------------------------- */

/* Invariant: records [0, committed) are in LMDB; [committed, count) are pending,
 * their values concatenated in pend (record committed+k ends at pend_end[k]);
 * labels[] holds every record's label, committed or not. */
struct lmdbw {
	char dir[PATH_MAX];
	MDB_env *env;
	MDB_dbi dbi;
	size_t map_size;
	int batch;
	int64_t count, committed;
	int32_t *labels;
	size_t labels_cap;
	int32_t max_label;
	uint8_t *pend;
	size_t pend_len, pend_cap;
	size_t *pend_end; /* batch entries */
	int n_pending;
};

int lmdbw_open(const char *dir, int batch, struct lmdbw **out, struct dd_err *err)
{
	return lmdbw_open_sized(dir, batch, 0, out, err);
}

int lmdbw_open_sized(const char *dir, int batch, size_t initial_map, struct lmdbw **out,
		     struct dd_err *err)
{
	struct lmdbw *w = NULL;
	MDB_txn *txn = NULL;
	char path[PATH_MAX];
	struct stat st;
	int rc, mrc;
	*out = NULL;
	if (batch < 0)
		return dd_err_set(err, DD_EINVAL, "%s: batch must be 0 (the default) or positive, not %d", dir, batch);
	if (snprintf(path, sizeof path, "%s/" INDEX_FILE ".tmp.0000000000", dir) >= (int)sizeof path)
		return dd_err_set(err, DD_EINVAL, "path too long: %s", dir);
	if ((rc = fs_mkdir_p(dir, err)))
		return rc;
	snprintf(path, sizeof path, "%s/data.mdb", dir);
	if (stat(path, &st) == 0)
		return dd_err_set(err, DD_EEXIST, "%s already holds an LMDB environment", dir);

	w = calloc(1, sizeof *w);
	if (!w)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	snprintf(w->dir, sizeof w->dir, "%s", dir);
	w->batch = batch ? batch : DEFAULT_BATCH;
	w->map_size = initial_map ? initial_map : DEFAULT_MAP;
	w->max_label = -1;
	w->pend_cap = 64 << 10;
	w->pend = malloc(w->pend_cap);
	w->pend_end = malloc((size_t)w->batch * sizeof *w->pend_end);
	if (!w->pend || !w->pend_end) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory for a batch of %d records", w->batch);
		goto fail;
	}
	if ((mrc = mdb_env_create(&w->env))) {
		rc = write_fail(err, mrc, "cannot create an LMDB environment", dir);
		goto fail;
	}
	if ((mrc = mdb_env_set_mapsize(w->env, w->map_size)) ||
	    (mrc = mdb_env_open(w->env, dir, MDB_NOSYNC, 0644))) {
		rc = write_fail(err, mrc, "cannot open the LMDB environment for writing", dir);
		goto fail;
	}
	if ((mrc = mdb_txn_begin(w->env, NULL, 0, &txn)) || (mrc = mdb_dbi_open(txn, NULL, 0, &w->dbi))) {
		rc = write_fail(err, mrc, "cannot open the main database", dir);
		goto fail;
	}
	mrc = mdb_txn_commit(txn); /* frees txn whatever it returns */
	txn = NULL;
	if (mrc) {
		rc = write_fail(err, mrc, "cannot open the main database", dir);
		goto fail;
	}
	*out = w;
	return DD_OK;
fail:
	if (txn)
		mdb_txn_abort(txn);
	if (w) {
		if (w->env)
			mdb_env_close(w->env);
		free(w->pend);
		free(w->pend_end);
		free(w);
	}
	return rc;
}

/* Double the map.  LMDB allows this only with no transaction open in the process. */
static int grow_map(struct lmdbw *w, struct dd_err *err)
{
	if (w->map_size >= MAP_MAX)
		return dd_err_set(err, DD_ENOSPC, "%s: the LMDB map would grow past %zu GiB", w->dir,
				  MAP_MAX >> 30);
	size_t next = w->map_size * 2;
	int mrc = mdb_env_set_mapsize(w->env, next);
	if (mrc)
		return write_fail(err, mrc, "cannot grow the LMDB map", w->dir);
	w->map_size = next;
	return DD_OK;
}

/* Commit the pending batch as one transaction, growing the map and replaying the
 * batch for as long as LMDB says the map is full. */
static int flush(struct lmdbw *w, struct dd_err *err)
{
	int rc;
	if (w->n_pending == 0)
		return DD_OK;
	for (;;) {
		MDB_txn *txn;
		int mrc = mdb_txn_begin(w->env, NULL, 0, &txn);
		if (mrc)
			return write_fail(err, mrc, "cannot begin a write transaction", w->dir);
		size_t start = 0;
		for (int k = 0; k < w->n_pending && mrc == 0; k++) {
			int64_t i = w->committed + k;
			char key[32];
			int klen = snprintf(key, sizeof key, "%08d_%d", (int)i, (int)w->labels[i]);
			MDB_val kv = { (size_t)klen, key };
			MDB_val dv = { w->pend_end[k] - start, w->pend + start };
			mrc = mdb_put(txn, w->dbi, &kv, &dv, MDB_APPEND);
			start = w->pend_end[k];
		}
		if (mrc == 0)
			mrc = mdb_txn_commit(txn); /* frees txn whatever it returns */
		else
			mdb_txn_abort(txn);
		if (mrc == 0)
			break;
		if (mrc != MDB_MAP_FULL)
			return write_fail(err, mrc, "cannot write records", w->dir);
		if ((rc = grow_map(w, err)))
			return rc;
	}
	w->committed += w->n_pending;
	w->n_pending = 0;
	w->pend_len = 0;
	return DD_OK;
}

int lmdbw_put(struct lmdbw *w, int label, const uint8_t *value, size_t len, struct dd_err *err)
{
	int rc;
	if (label < 0 || label >= MAX_LABELS)
		return dd_err_set(err, DD_EINVAL, "%s: label %d is outside 0..%d", w->dir, label, MAX_LABELS - 1);
	if (w->count >= MAX_RECORDS)
		return dd_err_set(err, DD_ETOOBIG, "%s: more than %d records would break the key order of \"%%08d_%%d\"",
				  w->dir, MAX_RECORDS);
	if (len && !value)
		return dd_err_set(err, DD_EINVAL, "%s: record %" PRId64 " has a length but no value", w->dir,
				  w->count);
	if ((size_t)w->count == w->labels_cap) {
		size_t cap = w->labels_cap ? w->labels_cap * 2 : 1024;
		int32_t *l = realloc(w->labels, cap * sizeof *l);
		if (!l)
			return dd_err_set(err, DD_ENOMEM, "out of memory");
		w->labels = l;
		w->labels_cap = cap;
	}
	if (len > w->pend_cap - w->pend_len) {
		size_t cap = w->pend_cap;
		while (cap - w->pend_len < len) {
			if (cap > SIZE_MAX / 2)
				return dd_err_set(err, DD_ENOMEM, "out of memory");
			cap *= 2;
		}
		uint8_t *p = realloc(w->pend, cap);
		if (!p)
			return dd_err_set(err, DD_ENOMEM, "out of memory for a %zu-byte record", len);
		w->pend = p;
		w->pend_cap = cap;
	}
	if (len)
		memcpy(w->pend + w->pend_len, value, len);
	w->pend_len += len;
	w->pend_end[w->n_pending++] = w->pend_len;
	w->labels[w->count++] = label;
	if (label > w->max_label)
		w->max_label = label;
	if (w->n_pending == w->batch || w->pend_len >= PENDING_BYTES_MAX)
		if ((rc = flush(w, err)))
			return rc;
	return DD_OK;
}

int64_t lmdbw_count(const struct lmdbw *w)
{
	return w ? w->count : 0;
}

static int write_index(struct lmdbw *w, struct dd_err *err)
{
	char path[PATH_MAX + 16]; /* w->dir was checked to leave room at open */
	size_t n = (size_t)w->count, size = INDEX_HEADER + 4 * n + 8;
	uint8_t *buf = malloc(size);
	if (!buf)
		return dd_err_set(err, DD_ENOMEM, "out of memory writing %s/" INDEX_FILE, w->dir);
	memcpy(buf, INDEX_MAGIC, 8);
	put_le(buf + 8, INDEX_VERSION, 4);
	put_le(buf + 12, (uint32_t)(w->max_label + 1), 4);
	put_le(buf + 16, (uint64_t)w->count, 8);
	for (size_t i = 0; i < n; i++)
		put_le(buf + INDEX_HEADER + 4 * i, (uint32_t)w->labels[i], 4);
	put_le(buf + size - 8, fnv1a64(buf, size - 8), 8);
	snprintf(path, sizeof path, "%s/" INDEX_FILE, w->dir);
	int rc = fs_write_file_atomic(path, buf, size, err);
	free(buf);
	return rc;
}

static void writer_free(struct lmdbw *w)
{
	if (w->env)
		mdb_env_close(w->env);
	free(w->labels);
	free(w->pend);
	free(w->pend_end);
	free(w);
}

int lmdbw_close(struct lmdbw *w, struct dd_err *err)
{
	if (!w)
		return DD_OK;
	int rc = flush(w, err);
	if (rc == DD_OK) {
		int mrc = mdb_env_sync(w->env, 1);
		if (mrc)
			rc = write_fail(err, mrc, "cannot sync the LMDB environment", w->dir);
	}
	/* the index goes last, after the records it describes are on disk */
	if (rc == DD_OK)
		rc = write_index(w, err);
	writer_free(w);
	return rc;
}

void lmdbw_abort(struct lmdbw *w)
{
	if (!w)
		return;
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", w->dir);
	writer_free(w); /* no transaction is open between calls: closing drops nothing committed halfway */
	fs_rm_rf(dir, NULL);
}

/* --- reader ------------------------------------------------------------------- */

/* Invariant: txn and cur live from open to close; `at` is the record the cursor
 * stands on, or -1.  In prefix mode (keys == NULL) record i's key starts "%08d_"
 * with i; otherwise record i's key is keys + key_off[i], key_off[i+1]-key_off[i]
 * bytes long. */
struct lmdbr {
	char dir[PATH_MAX];
	MDB_env *env;
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_dbi dbi;
	int64_t count;
	int n_labels;
	int32_t *label_of;    /* count */
	int64_t *label_start; /* n_labels + 1: label L's records are members[label_start[L] ..) */
	int64_t *members;     /* count */
	char *keys;           /* positional mode only */
	size_t *key_off;      /* count + 1, positional mode only */
	int64_t at;
};

/* The record index a key starts with ("<at least 8 digits>_"), and where its
 * suffix begins.  Returns 0 for a key of any other shape. */
static int key_index(const MDB_val *k, int64_t *index, const char **suffix, size_t *suffix_len)
{
	const char *s = k->mv_data;
	size_t n = k->mv_size, i = 0;
	int64_t v = 0;
	while (i < n && s[i] >= '0' && s[i] <= '9' && i < 18)
		v = v * 10 + (s[i++] - '0');
	if (i < 8 || i >= n || s[i] != '_')
		return 0;
	*index = v;
	*suffix = s + i + 1;
	*suffix_len = n - i - 1;
	return 1;
}

/* A label written by DIGITS in the key suffix: 1 to 9 decimal digits, nothing else. */
static int suffix_label(const char *s, size_t n, int32_t *label)
{
	int32_t v = 0;
	if (n == 0 || n > 9)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	*label = v;
	return 1;
}

static void key_text(const MDB_val *k, char *out, size_t cap)
{
	size_t n = k->mv_size < cap - 1 ? k->mv_size : cap - 1;
	for (size_t i = 0; i < n; i++) {
		char c = ((const char *)k->mv_data)[i];
		out[i] = (c >= 32 && c < 127) ? c : '?';
	}
	out[n] = '\0';
}

/* Use DIR/index.bin if it is whole and agrees with the environment: same count,
 * and the last key carries the last index and its label.  Returns 1 when it was
 * loaded into r->label_of / r->n_labels, 0 when the caller must scan instead. */
static int load_index(struct lmdbr *r)
{
	char path[PATH_MAX + 16], *text = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "%s/" INDEX_FILE, r->dir);
	size_t want = INDEX_HEADER + 4 * (size_t)r->count + 8;
	if (fs_read_file(path, want, &text, &len, NULL) != DD_OK)
		return 0;
	const uint8_t *b = (const uint8_t *)text;
	int ok = len == want && memcmp(b, INDEX_MAGIC, 8) == 0 && get_le(b + 8, 4) == INDEX_VERSION &&
		 get_le(b + 12, 4) <= MAX_LABELS && get_le(b + 16, 8) == (uint64_t)r->count &&
		 get_le(b + len - 8, 8) == fnv1a64(b, len - 8);
	int32_t *labels = NULL;
	int n_labels = ok ? (int)get_le(b + 12, 4) : 0;
	if (ok && r->count > 0) {
		labels = malloc((size_t)r->count * sizeof *labels);
		ok = labels != NULL;
	}
	for (int64_t i = 0; ok && i < r->count; i++) {
		labels[i] = (int32_t)get_le(b + INDEX_HEADER + 4 * i, 4);
		ok = labels[i] >= 0 && labels[i] < n_labels;
	}
	if (ok && r->count > 0) {
		MDB_val k, v;
		int64_t idx;
		const char *suf;
		size_t sn;
		int32_t lab;
		ok = mdb_cursor_get(r->cur, &k, &v, MDB_LAST) == 0 && key_index(&k, &idx, &suf, &sn) &&
		     idx == r->count - 1 && suffix_label(suf, sn, &lab) && lab == labels[r->count - 1];
	}
	free(text);
	if (!ok) {
		free(labels);
		return 0;
	}
	r->label_of = labels;
	r->n_labels = n_labels;
	return 1;
}

/* One pass over the cursor: each record's label, and whether the keys are numbered
 * in order (prefix mode).  If not, a second pass keeps every key. */
static int scan(struct lmdbr *r, struct dd_err *err)
{
	MDB_val k, v;
	int prefix = 1, mrc, rc;
	int32_t max_label = -1;
	int64_t i = 0;
	if (r->count > 0 && !(r->label_of = malloc((size_t)r->count * sizeof *r->label_of)))
		return dd_err_set(err, DD_ENOMEM, "out of memory indexing %s", r->dir);
	for (mrc = mdb_cursor_get(r->cur, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(r->cur, &k, &v, MDB_NEXT), i++) {
		int64_t idx;
		const char *suf = NULL;
		size_t sn = 0;
		int32_t lab;
		if (i >= r->count)
			break;
		if (!key_index(&k, &idx, &suf, &sn) || idx != i)
			prefix = 0;
		if (!suf || !suffix_label(suf, sn, &lab)) {
			struct datum d;
			char kt[64];
			if ((rc = datum_decode(v.mv_data, v.mv_size, &d, err))) {
				key_text(&k, kt, sizeof kt);
				dd_err_prefix(err, "%s: record %" PRId64 " (key %s) has no label in its key and is not a Datum",
					      r->dir, i, kt);
				return rc;
			}
			lab = d.label;
			datum_free(&d);
		}
		if (lab < 0 || lab >= MAX_LABELS) {
			char kt[64];
			key_text(&k, kt, sizeof kt);
			return dd_err_set(err, DD_EINVAL, "%s: record %" PRId64 " (key %s) has label %d, outside 0..%d",
					  r->dir, i, kt, (int)lab, MAX_LABELS - 1);
		}
		r->label_of[i] = lab;
		if (lab > max_label)
			max_label = lab;
	}
	if (mrc != 0 && mrc != MDB_NOTFOUND)
		return lmdb_fail(err, mrc, "cannot read the records", r->dir);
	if (i != r->count)
		return dd_err_set(err, DD_EIO, "%s: the database says %" PRId64 " records but holds %" PRId64,
				  r->dir, r->count, i);
	r->n_labels = max_label + 1;
	if (prefix)
		return DD_OK;

	/* Positional mode: record i is the i-th key; keep the keys. */
	size_t total = 0, off = 0;
	for (mrc = mdb_cursor_get(r->cur, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(r->cur, &k, &v, MDB_NEXT))
		total += k.mv_size;
	if (mrc != MDB_NOTFOUND)
		return lmdb_fail(err, mrc, "cannot read the keys", r->dir);
	r->keys = malloc(total ? total : 1);
	r->key_off = malloc(((size_t)r->count + 1) * sizeof *r->key_off);
	if (!r->keys || !r->key_off)
		return dd_err_set(err, DD_ENOMEM, "out of memory keeping the %" PRId64 " keys of %s", r->count,
				  r->dir);
	i = 0;
	for (mrc = mdb_cursor_get(r->cur, &k, &v, MDB_FIRST); mrc == 0 && i < r->count;
	     mrc = mdb_cursor_get(r->cur, &k, &v, MDB_NEXT), i++) {
		r->key_off[i] = off;
		memcpy(r->keys + off, k.mv_data, k.mv_size);
		off += k.mv_size;
	}
	r->key_off[i] = off;
	return DD_OK;
}

/* Per-label lists from label_of, by counting sort: ascending indexes per label. */
static int build_label_lists(struct lmdbr *r, struct dd_err *err)
{
	r->label_start = calloc((size_t)r->n_labels + 1, sizeof *r->label_start);
	r->members = malloc(((size_t)r->count + 1) * sizeof *r->members);
	if (!r->label_start || !r->members)
		return dd_err_set(err, DD_ENOMEM, "out of memory indexing %s", r->dir);
	for (int64_t i = 0; i < r->count; i++)
		r->label_start[r->label_of[i] + 1]++;
	for (int l = 0; l < r->n_labels; l++)
		r->label_start[l + 1] += r->label_start[l];
	int64_t *fill = malloc(((size_t)r->n_labels + 1) * sizeof *fill);
	if (!fill)
		return dd_err_set(err, DD_ENOMEM, "out of memory indexing %s", r->dir);
	memcpy(fill, r->label_start, ((size_t)r->n_labels + 1) * sizeof *fill);
	for (int64_t i = 0; i < r->count; i++)
		r->members[fill[r->label_of[i]]++] = i;
	free(fill);
	return DD_OK;
}

int lmdbr_open(const char *dir, struct lmdbr **out, struct dd_err *err)
{
	struct lmdbr *r = NULL;
	char path[PATH_MAX];
	struct stat st;
	MDB_stat ms;
	int rc, mrc;
	*out = NULL;
	if (snprintf(path, sizeof path, "%s/" INDEX_FILE, dir) >= (int)sizeof path)
		return dd_err_set(err, DD_EINVAL, "path too long: %s", dir);
	if (stat(dir, &st) != 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot open the LMDB environment %s", dir);
	if (!S_ISDIR(st.st_mode))
		return dd_err_set(err, DD_EINVAL, "%s is not a folder (an LMDB environment is a folder holding data.mdb)",
				  dir);
	/* checked before LMDB sees the folder, which would otherwise leave a lock.mdb in it */
	snprintf(path, sizeof path, "%s/data.mdb", dir);
	if (stat(path, &st) != 0)
		return dd_err_set(err, DD_EINVAL, "%s is not an LMDB environment (it has no data.mdb)", dir);

	r = calloc(1, sizeof *r);
	if (!r)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	snprintf(r->dir, sizeof r->dir, "%s", dir);
	r->at = -1;
	if ((mrc = mdb_env_create(&r->env))) {
		rc = lmdb_fail(err, mrc, "cannot create an LMDB environment", dir);
		goto fail;
	}
	/* MDB_RDONLY but not MDB_NOLOCK: a writer may be active and the lock table is
	 * what keeps it from reusing pages we read.  MDB_NOTLS ties the reader slot to
	 * our transaction, not to the thread that opened it, so the handle may move
	 * between threads (used by one at a time). */
	if ((mrc = mdb_env_open(r->env, dir, MDB_RDONLY | MDB_NOTLS, 0644))) {
		if (mrc == MDB_INVALID)
			rc = dd_err_set(err, DD_EINVAL, "%s/data.mdb is not an LMDB file", dir);
		else if (mrc == MDB_VERSION_MISMATCH)
			rc = dd_err_set(err, DD_EINVAL, "%s/data.mdb was written by an incompatible LMDB version", dir);
		else
			rc = lmdb_fail(err, mrc, "cannot open the LMDB environment", dir);
		goto fail;
	}
	if ((mrc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &r->txn)) ||
	    (mrc = mdb_dbi_open(r->txn, NULL, 0, &r->dbi)) || (mrc = mdb_cursor_open(r->txn, r->dbi, &r->cur)) ||
	    (mrc = mdb_stat(r->txn, r->dbi, &ms))) {
		rc = lmdb_fail(err, mrc, "cannot read the main database", dir);
		goto fail;
	}
	r->count = (int64_t)ms.ms_entries;
	if (!load_index(r) && (rc = scan(r, err)))
		goto fail;
	if ((rc = build_label_lists(r, err)))
		goto fail;
	*out = r;
	return DD_OK;
fail:
	lmdbr_close(r);
	return rc;
}

void lmdbr_close(struct lmdbr *r)
{
	if (!r)
		return;
	if (r->cur)
		mdb_cursor_close(r->cur);
	if (r->txn)
		mdb_txn_abort(r->txn);
	if (r->env)
		mdb_env_close(r->env);
	free(r->label_of);
	free(r->label_start);
	free(r->members);
	free(r->keys);
	free(r->key_off);
	free(r);
}

int64_t lmdbr_count(const struct lmdbr *r)
{
	return r ? r->count : 0;
}

int lmdbr_n_labels(const struct lmdbr *r)
{
	return r ? r->n_labels : 0;
}

int64_t lmdbr_label_count(const struct lmdbr *r, int label)
{
	if (!r || label < 0 || label >= r->n_labels)
		return 0;
	return r->label_start[label + 1] - r->label_start[label];
}

/* Put the cursor on record i: MDB_NEXT when it stands on i-1, else one lookup. */
static int seek(struct lmdbr *r, int64_t i, MDB_val *k, MDB_val *v, struct dd_err *err)
{
	char want[32];
	int mrc;
	if (r->at >= 0 && i == r->at + 1) {
		mrc = mdb_cursor_get(r->cur, k, v, MDB_NEXT);
	} else if (i == r->at) {
		mrc = mdb_cursor_get(r->cur, k, v, MDB_GET_CURRENT);
	} else if (r->keys) {
		k->mv_data = r->keys + r->key_off[i];
		k->mv_size = r->key_off[i + 1] - r->key_off[i];
		mrc = mdb_cursor_get(r->cur, k, v, MDB_SET_KEY);
	} else {
		k->mv_size = (size_t)snprintf(want, sizeof want, "%08" PRId64 "_", i);
		k->mv_data = want;
		mrc = mdb_cursor_get(r->cur, k, v, MDB_SET_RANGE);
	}
	r->at = -1;
	if (mrc == MDB_NOTFOUND)
		return dd_err_set(err, DD_EIO, "%s: record %" PRId64 " is missing", r->dir, i);
	if (mrc)
		return lmdb_fail(err, mrc, "cannot read a record", r->dir);
	/* the key found must be record i's: a gap in the numbering would otherwise
	 * hand back a neighbour */
	int64_t idx;
	const char *suf;
	size_t sn;
	int ok = r->keys ? (k->mv_size == r->key_off[i + 1] - r->key_off[i] &&
			    memcmp(k->mv_data, r->keys + r->key_off[i], k->mv_size) == 0)
			 : (key_index(k, &idx, &suf, &sn) && idx == i);
	if (!ok) {
		char kt[64];
		key_text(k, kt, sizeof kt);
		return dd_err_set(err, DD_EIO, "%s: record %" PRId64 " is missing (found key %s in its place)",
				  r->dir, i, kt);
	}
	r->at = i;
	return DD_OK;
}

int lmdbr_get(struct lmdbr *r, int64_t i, const uint8_t **value, size_t *len, int *label,
	      struct dd_err *err)
{
	MDB_val k, v;
	int rc;
	if (i < 0 || i >= r->count)
		return dd_err_set(err, DD_ENOENT, "%s: no record %" PRId64 " (it holds %" PRId64 ")", r->dir, i,
				  r->count);
	if ((rc = seek(r, i, &k, &v, err)))
		return rc;
	if (value)
		*value = v.mv_data;
	if (len)
		*len = v.mv_size;
	if (label)
		*label = r->label_of[i];
	return DD_OK;
}

int lmdbr_get_in_label(struct lmdbr *r, int label, int64_t k, int64_t *index, const uint8_t **value,
		       size_t *len, struct dd_err *err)
{
	int64_t n = lmdbr_label_count(r, label);
	if (k < 0 || k >= n)
		return dd_err_set(err, DD_ENOENT, "%s: no record %" PRId64 " in label %d (it has %" PRId64 ")",
				  r->dir, k, label, n);
	int64_t i = r->members[r->label_start[label] + k];
	if (index)
		*index = i;
	return lmdbr_get(r, i, value, len, NULL, err);
}

int lmdbr_next(struct lmdbr *r, int64_t *cursor, const uint8_t **value, size_t *len, int *label,
	       struct dd_err *err)
{
	if (*cursor < 0 || *cursor >= r->count)
		return dd_err_set(err, DD_ENOENT, "%s: no more records", r->dir);
	int rc = lmdbr_get(r, *cursor, value, len, label, err);
	if (rc == DD_OK)
		(*cursor)++;
	return rc;
}
