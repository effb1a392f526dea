/* snapshot.h — weights and solver state on disk, in the safetensors format.
 *
 * The format (https://huggingface.co/docs/safetensors): 8 bytes, the header's length
 * N as a little-endian u64; N bytes of JSON, an object mapping each tensor's name to
 * {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets into what follows)
 * plus an optional "__metadata__" object of string to string; then the tensors'
 * bytes.  deepdesk writes and reads only dtype "F32" (little-endian float32, C order).
 *
 * Two layers:
 *   st_*        a generic writer (st_write: atomic, never a half file under the final
 *               name) and a strict reader (st_open: every offset, shape and size is
 *               checked before anything is handed out; no input makes it crash).
 *   snapshot_*  a graph's parameter blobs ("<layer>.<i>", i counting the layer's
 *               blobs from 0: "conv1.0" weights, "conv1.1" bias) and a solver's
 *               history arenas ("history.<k>", graph_param_count values each). */
#ifndef DD_SNAPSHOT_H
#define DD_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

struct graph;
struct solver;
struct st_file;

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20) /* bytes of JSON header accepted (safetensors' own cap) */

/* One F32 tensor.  For st_write the caller owns every pointer; from st_find/st_get
 * name and data are borrowed from the st_file, valid until st_close. */
struct st_tensor {
	const char *name;
	int ndim;                     /* 0 .. ST_MAX_DIMS; 0 is a scalar (one value) */
	int64_t shape[ST_MAX_DIMS];
	const float *data;            /* product(shape) values */
};

/* Write n tensors and the metadata pairs meta (key, value, ..., NULL; may be NULL)
 * to path, atomically: a temporary file beside it, fsync, rename, fsync of the
 * folder.  A crash leaves the old file or the new one, never a torn one.
 * DD_OK; DD_EINVAL for a bad tensor (a name repeated, empty or "__metadata__", ndim
 * out of range, a negative dimension) or a metadata key given twice; DD_EIO or
 * DD_ENOSPC naming the path; DD_ENOMEM. */
int st_write(const char *path, const struct st_tensor *t, int n, const char *const *meta, struct dd_err *err);

/* Read and validate path.  DD_OK and *out (caller frees with st_close); DD_ENOENT
 * when there is no such file; DD_EINVAL with a sentence naming the file and what is
 * wrong (a header length beyond the file or over ST_MAX_HEADER, JSON that does not
 * parse, a dtype other than F32, offsets out of order, overlapping or leaving holes,
 * a size that is not product(shape) * 4, a repeated name); DD_ETOOBIG for a file
 * over 64 GiB; DD_EIO; DD_ENOMEM. */
int st_open(const char *path, struct st_file **out, struct dd_err *err);
/* The same from memory (copied; what == the name used in messages, may be NULL).
 * The fuzz target's entry. */
int st_open_mem(const void *data, size_t len, const char *what, struct st_file **out, struct dd_err *err);
/* Accepts NULL. */
void st_close(struct st_file *f);

/* A metadata value, borrowed until st_close, or NULL when the key is absent. */
const char *st_meta(const struct st_file *f, const char *key);
/* The tensor called name into *out (borrowed fields): DD_OK or DD_ENOENT. */
int st_find(const struct st_file *f, const char *name, struct st_tensor *out);
/* Tensors in the file, and the i-th (0 <= i < st_count) in file-offset order. */
int st_count(const struct st_file *f);
void st_get(const struct st_file *f, int i, struct st_tensor *out);

/* Every parameter blob of gr (learned and stored, BatchNorm statistics included)
 * as "<layer>.<i>" with its shape, plus meta; through st_write. */
int snapshot_save_weights(struct graph *gr, const char *path, const char *const *meta, struct dd_err *err);

/* Fill gr's parameter blobs from path by name.  Tensors in the file that no blob
 * names are ignored (Caffe's CopyTrainedLayersFrom does the same).
 *   finetune 0: every blob must be in the file with its shape, else DD_EINVAL naming
 *               the first that is not ("fc8.0: the snapshot has 1000x4096, the
 *               network 10x4096"); the graph is unchanged on any error.
 *   finetune 1: blobs missing from the file or of another shape keep their fresh
 *               initialisation and are listed in report (may be NULL), e.g.
 *               "re-initialised: fc8.0 (1000x4096 → 10x4096), fc8.1 (1000 → 10)"
 *               (the snapshot's shape → the network's), or "" when all matched;
 *               DD_EINVAL when no blob matched at all (the wrong file?).
 * report is always NUL-terminated when report_len > 0; a long list ends in "…".
 * Errors of st_open pass through. */
int snapshot_load_weights(struct graph *gr, const char *path, int finetune, char *report, size_t report_len,
			  struct dd_err *err);

/* The solver's history arenas as "history.<k>" (k < solver_nhistory, shape
 * [graph_param_count]) plus meta and "solver_type" (solver_type_name), which meta
 * must not hold itself (DD_EINVAL).  The training loop puts its iteration, RNG state
 * and data position in meta and reads them back with st_open/st_meta. */
int snapshot_save_solver(struct solver *s, const char *path, const char *const *meta, struct dd_err *err);

/* Fill the solver's history arenas from path.  DD_EINVAL when the file was written
 * by another solver type or for another parameter count (both named), or lacks a
 * history; the histories are unchanged on any error.  Errors of st_open pass through. */
int snapshot_load_solver(struct solver *s, const char *path, struct dd_err *err);

#endif
