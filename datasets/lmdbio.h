/* lmdbio.h — LMDB environments of Datum records, as Caffe and DIGITS keep them.
 *
 * Keys are "%08d_%d" (write index, label); values are Datum protobufs.  The writer
 * batches puts into large transactions and grows the map when it fills.  Beside
 * the environment the writer keeps an index file (DIR/index.bin: per record its
 * label, from which the reader derives per label the list of record indexes) so
 * that a reader opens record i, or the k-th record of label L, with one B-tree
 * lookup (MDB_SET_RANGE on "%08d_") — never by walking from the start.  An LMDB
 * made elsewhere (no index.bin) is still readable: lmdbr_open builds the index in
 * one pass and keeps it in memory (labels from the key's "_<label>" suffix, else
 * from the Datum); keys of another shape (not "<digits>_..." numbered 0, 1, 2, ...)
 * are kept in memory too, and record i is then the i-th key.  The index.bin format
 * is described at the top of lmdbio.c.
 *
 * Rules LMDB imposes: do not open the same DIR twice at once in one process (a
 * writer and a reader of one DIR included): LMDB's locks are per process and the
 * first close would drop the other's.  A writer or reader is used by one thread
 * at a time. */
#ifndef DD_LMDBIO_H
#define DD_LMDBIO_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "datum.h"

struct lmdbw; /* a writer */
struct lmdbr; /* a reader */

/* Create DIR (must not hold an environment yet: DD_EEXIST) for writing.  batch:
 * puts per transaction (0: 1000); a batch is also committed early when its values
 * reach 8 MiB (bounding the writer's memory).  The map starts at 64 MiB and doubles whenever it fills.  Undo
 * with lmdbw_close (commits) or lmdbw_abort. */
int lmdbw_open(const char *dir, int batch, struct lmdbw **out, struct dd_err *err);
/* The same with the map's starting size in bytes (0: 64 MiB): a caller that knows
 * the dataset's size avoids regrowing; tests start tiny to force growth. */
int lmdbw_open_sized(const char *dir, int batch, size_t initial_map, struct lmdbw **out,
		     struct dd_err *err);
/* Append one record under the next index with label (0 .. 2^24-1); value is an
 * encoded Datum, copied (the caller keeps its buffer).  At most 10^8 records. */
int lmdbw_put(struct lmdbw *w, int label, const uint8_t *value, size_t len, struct dd_err *err);
/* Records written so far. */
int64_t lmdbw_count(const struct lmdbw *w);
/* Commit what is pending, write index.bin, close.  Frees w whatever happens. */
int lmdbw_close(struct lmdbw *w, struct dd_err *err);
/* Close without committing the pending batch and remove DIR. Accepts NULL. */
void lmdbw_abort(struct lmdbw *w);

/* Open DIR read-only.  A missing folder is DD_ENOENT; a folder without data.mdb,
 * or whose data.mdb is not LMDB, DD_EINVAL.  One read transaction lasts until
 * lmdbr_close, so the reader sees one snapshot.  Caller closes with lmdbr_close
 * (accepts NULL). */
int lmdbr_open(const char *dir, struct lmdbr **out, struct dd_err *err);
void lmdbr_close(struct lmdbr *r);
/* Number of records; number per label (labels 0..n_labels-1). */
int64_t lmdbr_count(const struct lmdbr *r);
int lmdbr_n_labels(const struct lmdbr *r);
int64_t lmdbr_label_count(const struct lmdbr *r, int label);
/* Record i (0-based, key order) into *value (borrowed, valid until the next call on
 * r) and its label.  value, len and label may be NULL.  i out of range: DD_ENOENT;
 * a record missing from the environment: DD_EIO. */
int lmdbr_get(struct lmdbr *r, int64_t i, const uint8_t **value, size_t *len, int *label,
	      struct dd_err *err);
/* The k-th record (0-based) with `label`: its index i, then as lmdbr_get. */
int lmdbr_get_in_label(struct lmdbr *r, int label, int64_t k, int64_t *index,
		       const uint8_t **value, size_t *len, struct dd_err *err);
/* Sequential walk for consumers that read everything (training): call with
 * *cursor = 0 first; returns DD_OK and advances, or DD_ENOENT at the end. */
int lmdbr_next(struct lmdbr *r, int64_t *cursor, const uint8_t **value, size_t *len, int *label,
	       struct dd_err *err);

#endif
