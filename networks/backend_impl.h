/* backend_impl.h — the backend vtable: for graph.c and the backends, nobody else.
 *
 * Every backend fills a struct backend_ops; graph.c calls it only through the
 * static inline wrappers below (STYLE.md habit 2).  Members marked optional may be
 * NULL.
 *
 * A layer, as the graph hands it to a backend (struct backend_layer), is a layer
 * description and pointers fixed when the graph was built: the same struct is
 * passed to every forward and backward of that layer, so a backend may build its
 * state (oneDNN primitives, memory descriptors) once in layer_init.  All pointers
 * are into memory from the backend's alloc.
 *
 * Semantics are the reference kernels' (ref.h): a forward overwrites its top; a
 * backward ADDS into dx[i] and dw[i], any of which may be NULL (not wanted).  For an
 * in-place layer (y == x[0]) the graph has already copied the top's gradient aside
 * (dy points at the copy) and zeroed dx[0], and bx/by point at values saved by the
 * forward where a later layer overwrote them. */
#ifndef DD_BACKEND_IMPL_H
#define DD_BACKEND_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "net.h"
#include "ref.h"

/* 2: the optional device operations (sync, copy, zero, update) and the plugin
 * entry points below.  3: set_precision and unscale (mixed precision), upload
 * (8-bit batches transformed on the device), bind and allreduce (a group of GPUs). */
#define BACKEND_API_VERSION 3

struct backend_layer {
	const struct net_layer *l;  /* type and parameters (borrowed from the net) */
	union {
		struct conv_desc conv;
		struct pool_desc pool;
		struct ip_desc ip;
		struct lrn_desc lrn;
		struct bn_desc bn;
		struct scale_desc scale;
		struct crop_desc crop;
	} d;                        /* filled for those seven types */
	int n, c, inner;            /* bottom 0 as (N, C, the rest) */
	int64_t count;              /* elements of top 0 */
	int in_place;               /* y == x[0] */
	int nbottom;
	/* forward */
	const float *const *x;      /* (nbottom) bottoms; x[1] of a loss or accuracy: labels */
	float *y;                   /* top 0; a loss or accuracy writes one value */
	/* backward */
	const float *bx;            /* bottom 0's values as the backward must read them */
	const float *by;            /* top 0's values likewise */
	const float *dy;            /* top 0's gradient; a loss: its loss_weight */
	float *const *dx;           /* (nbottom) += ; an entry NULL: not wanted */
	float *w[3];                /* parameter blobs, in net_instantiate's role order */
	float *dw[3];               /* += ; NULL for a blob not learned */
	const int *cs;              /* concat: (nbottom) channels of each bottom */
	int concat_inner;           /* concat: H*W of the top */
	uint64_t *rng;              /* dropout's PRNG state (the graph's) */
};

/* The per-layer operations, as a backend's vtable and the CUDA plugin's host
 * (struct backend_host) both hold them. */
typedef int backend_layer_init_fn(struct backend *be, const struct backend_layer *bl, void **state,
				  struct dd_err *err);
typedef void backend_layer_fini_fn(struct backend *be, void *state);
typedef int backend_layer_run_fn(struct backend *be, void *state, const struct backend_layer *bl, int training,
				 struct dd_err *err);

/* One learned blob's solver update (solver.h steps 2 to 4), for a backend whose
 * arenas live on a device: g ← g·norm + decay·w, then the type's rule on w, h, h2.
 * type is an enum solver_type; h2 is NULL unless the type keeps two histories. */
struct backend_update {
	int type;
	float *w, *g, *h, *h2;      /* (n) each, from the backend's alloc */
	int64_t n;
	float lr, momentum, momentum2, delta, rms_decay, decay, norm;
	float adam_step;            /* lr · √(1−β₂ᵗ)/(1−β₁ᵗ), Adam only */
};

struct backend_ops {
	int api_version;            /* BACKEND_API_VERSION */
	const char *name;
	void (*destroy)(struct backend *be);
	/* optional (NULL: every type): 1 if it runs this layer, else 0 */
	int (*supports)(struct backend *be, const struct net_layer *l);
	/* optional: per-layer state, built once; *state may stay NULL */
	backend_layer_init_fn *layer_init;
	/* optional; accepts a NULL state */
	backend_layer_fini_fn *layer_fini;
	backend_layer_run_fn *forward;
	backend_layer_run_fn *backward;
	/* optional (NULL: calloc/free): zeroed memory for the arenas */
	void *(*alloc)(struct backend *be, size_t bytes);
	void (*free)(struct backend *be, void *p);
	/* optional (NULL: the host's memcpy/memset and nothing to wait for) — a backend
	 * whose layers run asynchronously on a device.  sync waits until every queued
	 * operation has finished, so the host may read and write the arenas; copy and
	 * zero are queued in order with the layers (bytes in arena memory). */
	void (*sync)(struct backend *be);
	void (*copy)(struct backend *be, void *dst, const void *src, size_t bytes);
	void (*zero)(struct backend *be, void *p, size_t bytes);
	/* optional (NULL: the solver updates on the host): one blob's update, queued */
	int (*update)(struct backend *be, const struct backend_update *u, struct dd_err *err);
	/* optional (NULL: FP32 only): the math of the layers built from now on, an
	 * enum backend_precision; called before any graph is created on it */
	int (*set_precision)(struct backend *be, int precision, struct dd_err *err);
	/* optional (NULL: nothing to do): after the backward passes of a step and before
	 * the solver, the gradient arena g (n): undo the loss scale, or on an inf/NaN
	 * set *skipped (the step must not be taken) and lower the scale; *scale is the
	 * scale the next step uses */
	int (*unscale)(struct backend *be, float *g, int64_t n, int *skipped, float *scale, struct dd_err *err);
	/* optional (NULL: the host transforms): struct backend_upload (backend.h) */
	int (*upload)(struct backend *be, const struct backend_upload *u, struct dd_err *err);
	/* optional: make the calling thread's device this backend's (a thread per GPU) */
	void (*bind)(struct backend *be);
	/* optional (only a group's members have it working): buf (n, arena memory)
	 * becomes its mean over the group, queued; each member's thread calls it */
	int (*allreduce)(struct backend *be, float *buf, int64_t n, struct dd_err *err);
};

struct backend {
	const struct backend_ops *ops;
	void *ctx;                  /* the backend's own */
};

static inline int backend_supports(struct backend *be, const struct net_layer *l)
{
	return !be->ops->supports || be->ops->supports(be, l);
}
static inline int backend_layer_init(struct backend *be, const struct backend_layer *bl, void **state,
				     struct dd_err *err)
{
	*state = NULL;
	return be->ops->layer_init ? be->ops->layer_init(be, bl, state, err) : 0;
}
static inline void backend_layer_fini(struct backend *be, void *state)
{
	if (be->ops->layer_fini)
		be->ops->layer_fini(be, state);
}
static inline int backend_forward(struct backend *be, void *state, const struct backend_layer *bl, int training,
				  struct dd_err *err)
{
	return be->ops->forward(be, state, bl, training, err);
}
static inline int backend_backward(struct backend *be, void *state, const struct backend_layer *bl, int training,
				   struct dd_err *err)
{
	return be->ops->backward(be, state, bl, training, err);
}
static inline void *backend_alloc(struct backend *be, size_t bytes)
{
	return be->ops->alloc ? be->ops->alloc(be, bytes) : calloc(1, bytes ? bytes : 1);
}
static inline void backend_release(struct backend *be, void *p)
{
	if (be->ops->free)
		be->ops->free(be, p);
	else
		free(p);
}

static inline void backend_sync(struct backend *be)
{
	if (be->ops->sync)
		be->ops->sync(be);
}
static inline void backend_copy(struct backend *be, void *dst, const void *src, size_t bytes)
{
	if (be->ops->copy)
		be->ops->copy(be, dst, src, bytes);
	else
		memcpy(dst, src, bytes);
}
static inline void backend_zero(struct backend *be, void *p, size_t bytes)
{
	if (be->ops->zero)
		be->ops->zero(be, p, bytes);
	else
		memset(p, 0, bytes);
}
static inline int backend_has_update(const struct backend *be)
{
	return be->ops->update != NULL;
}
static inline int backend_update(struct backend *be, const struct backend_update *u, struct dd_err *err)
{
	return be->ops->update(be, u, err);
}

/* The reference backend's layer functions, for backends that fall back to them
 * for the layers they do not run themselves (backend_ref.c). */
int ref_layer_init(struct backend *be, const struct backend_layer *bl, void **state, struct dd_err *err);
void ref_layer_fini(struct backend *be, void *state);
int ref_layer_forward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		      struct dd_err *err);
int ref_layer_backward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		       struct dd_err *err);

/* The constructors backend_create dispatches to. */
int backend_ref_create(struct backend **out, struct dd_err *err);
int backend_cpu_create(struct backend **out, struct dd_err *err);

/* ---- the CUDA plugin (build/libdeepdesk-cuda.so, networks/cuda/) ----
 * It links no part of the program: what it needs from it comes in struct
 * backend_host.  Its exported symbols:
 *   const int deepdesk_backend_api_version;      BACKEND_API_VERSION it was built for
 *   int deepdesk_cuda_create(const struct backend_host *, struct backend **, struct dd_err *);
 *   int deepdesk_cuda_devices(struct backend_gpu *, int max, struct dd_err *);
 * create: DD_OK and *out, or an error naming what is missing (no driver, no GPU,
 * out of memory).  devices: how many GPUs answer (at most max filled), or an error. */
struct backend_host {
	backend_layer_init_fn *layer_init;
	backend_layer_fini_fn *layer_fini;
	backend_layer_run_fn *forward;
	backend_layer_run_fn *backward;
	int device;          /* the CUDA device to run on (after CUDA_VISIBLE_DEVICES) */
	int deterministic;   /* 1: cuDNN's deterministic algorithms only */
};
#define BACKEND_CUDA_CREATE "deepdesk_cuda_create"
#define BACKEND_CUDA_DEVICES "deepdesk_cuda_devices"
#define BACKEND_CUDA_VERSION "deepdesk_backend_api_version"
/*   int deepdesk_cuda_create_group(const struct backend_host *, int n, const int *devices,
 *                                  struct backend **out (n), struct dd_err *);
 * n backends joined by NCCL (loaded with dlopen: a plugin without it still loads). */
#define BACKEND_CUDA_CREATE_GROUP "deepdesk_cuda_create_group"
typedef int (*backend_cuda_create_group_fn)(const struct backend_host *host, int n, const int *devices,
					    struct backend **out, struct dd_err *err);
typedef int (*backend_cuda_create_fn)(const struct backend_host *host, struct backend **out, struct dd_err *err);
typedef int (*backend_cuda_devices_fn)(struct backend_gpu *out, int max, struct dd_err *err);

#endif
