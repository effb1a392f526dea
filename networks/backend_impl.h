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

#include "backend.h"
#include "net.h"
#include "ref.h"

#define BACKEND_API_VERSION 1

struct backend_layer {
	const struct net_layer *l;  /* type and parameters (borrowed from the net) */
	union {
		struct conv_desc conv;
		struct pool_desc pool;
		struct ip_desc ip;
		struct lrn_desc lrn;
		struct bn_desc bn;
		struct scale_desc scale;
	} d;                        /* filled for those six types */
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

struct backend_ops {
	int api_version;            /* BACKEND_API_VERSION */
	const char *name;
	void (*destroy)(struct backend *be);
	/* optional (NULL: every type): 1 if it runs this layer, else 0 */
	int (*supports)(struct backend *be, const struct net_layer *l);
	/* optional: per-layer state, built once; *state may stay NULL */
	int (*layer_init)(struct backend *be, const struct backend_layer *bl, void **state, struct dd_err *err);
	/* optional; accepts a NULL state */
	void (*layer_fini)(struct backend *be, void *state);
	int (*forward)(struct backend *be, void *state, const struct backend_layer *bl, int training,
		       struct dd_err *err);
	int (*backward)(struct backend *be, void *state, const struct backend_layer *bl, int training,
			struct dd_err *err);
	/* optional (NULL: calloc/free): zeroed memory for the arenas */
	void *(*alloc)(struct backend *be, size_t bytes);
	void (*free)(struct backend *be, void *p);
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

#endif
