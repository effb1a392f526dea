/* graph.h — an instantiated network made runnable: memory, forward, backward.
 *
 * A struct graph takes a struct net_graph (net_instantiate's layers in order, with
 * blob and parameter shapes) and gives it storage in the llm.c way: one float arena
 * for every learned and stored parameter blob, one for their gradients, one for
 * every activation blob, one for the activation gradients, and one scratch arena
 * for the saved inputs and outputs of layers whose backward reads a value a later
 * in-place layer overwrites, plus the in-place layers' output gradient (graph.c's
 * design note).  Every tensor is a pointer into its arena.  What a layer keeps
 * between forward and backward (pooling argmax, dropout masks, LRN scale,
 * batch-norm statistics, softmax probabilities) is not in the arenas: it is the
 * backend's per-layer state.  A backend (backend.h: the reference kernels, oneDNN,
 * the CUDA plugin) runs the layers and owns the memory and that state.
 *
 * The data layer's tops ("data" and, in train/val, "label") are inputs: the caller
 * fills them through graph_blob() before graph_forward().
 *
 * A graph of the deploy stage only infers: it has no gradient arenas (graph_grads
 * and every dw are NULL, graph_backward refuses).
 *
 * Ownership: a graph BORROWS the net_graph (and through it the struct net) and the
 * backend: free the graph first (graph_free), then the net_graph, then the net, and
 * the backend after every graph on it. */
#ifndef DD_GRAPH_H
#define DD_GRAPH_H

#include <stdint.h>

#include "../common/err.h"
#include "backend.h"
#include "net.h"

struct graph;

/* One parameter blob: a view into the arenas. */
struct graph_param {
	const char *layer;  /* the layer's name (borrowed) */
	const char *role;   /* "weights", "bias", "scale", "mean", "variance", "factor" */
	float *w;           /* (count) in the parameter arena; shape as in `shape` */
	float *dw;          /* (count) in the gradient arena */
	struct net_shape shape;
	int64_t count;
	float lr_mult, decay_mult;
	int learned;        /* the solver updates it (BatchNorm statistics and lr_mult 0: no) */
};

/* Allocate the arenas on backend be (NULL: a reference backend of its own), fill the
 * parameters with their layers' fillers (Caffe's constant, uniform, gaussian, xavier,
 * msra), drawn from a PRNG seeded with seed, and build every layer's backend state.
 * DD_OK and *out, which the caller frees with graph_free(); DD_ENOMEM, DD_EINVAL (a
 * layer the backend cannot run, named) or the backend's error, with *out NULL. */
int graph_create(const struct net_graph *g, struct backend *be, uint64_t seed, struct graph **out,
		 struct dd_err *err);
/* Accepts NULL. */
void graph_free(struct graph *gr);

/* Run every layer in order (training selects dropout's and batch norm's training
 * behaviour).  *loss (may be NULL) gets the total loss: the sum over loss layers of
 * loss_weight * loss.  DD_OK, or the backend's error naming the layer. */
int graph_forward(struct graph *gr, int training, float *loss, struct dd_err *err);
/* Zero the activation gradients, seed each loss top with its loss_weight and run the
 * layers backwards; parameter gradients are ADDED to (call graph_zero_grads first).
 * DD_OK, or the backend's error naming the layer. */
int graph_backward(struct graph *gr, struct dd_err *err);
/* Zero the parameter gradients. */
void graph_zero_grads(struct graph *gr);

/* A blob's values by name (borrowed, valid until graph_free), or NULL.  shape (may be
 * NULL) receives its shape.  A scalar top (a loss, an accuracy) holds one value. */
float *graph_blob(struct graph *gr, const char *name, struct net_shape *shape);
/* The gradient of a blob after graph_backward, or NULL. */
float *graph_blob_grad(struct graph *gr, const char *name);
/* The value of a scalar top (a loss or an accuracy) after graph_forward; NAN if none. */
float graph_value(struct graph *gr, const char *name);

/* Elements in the parameter arena (learned and stored blobs). */
int64_t graph_param_count(const struct graph *gr);
/* Parameter blobs: i in [0, graph_nparam()); borrowed. */
int graph_nparam(const struct graph *gr);
const struct graph_param *graph_param(const struct graph *gr, int i);
/* The arenas themselves (for a snapshot or a checksum): (graph_param_count) each. */
float *graph_params(struct graph *gr);
float *graph_grads(struct graph *gr);
/* Time every layer's forward and backward from now on (on: 1), or stop; the
 * counters restart either way. */
void graph_set_profiling(struct graph *gr, int on);
/* Mean milliseconds per call of node k's forward and backward while profiling
 * (0 when it did not run); DD_EINVAL for k out of range. */
int graph_layer_time(const struct graph *gr, int k, double *fwd_ms, double *bwd_ms);
/* Dropout's PRNG state, for a snapshot to save and a resume to restore. */
uint64_t *graph_rng(struct graph *gr);
/* The backend it runs on (borrowed). */
struct backend *graph_backend(const struct graph *gr);
/* The bytes of graph_create's five arenas for g (graph.c's design note), without
 * allocating them: what a graph of g on any backend holds before the backend's own
 * per-layer state and temporaries.  grads and dacts are 0 for a deploy graph.
 * DD_OK, or DD_ENOMEM for the small planning array. */
struct graph_bytes {
	int64_t params;  /* 4 x parameter elements */
	int64_t grads;   /* the same, for their gradients */
	int64_t acts;    /* 4 x blob elements (an in-place top shares its bottom's) */
	int64_t dacts;   /* the same, for the activation gradients */
	int64_t saved;   /* the scratch arena: saved inputs/outputs and the in-place tmp */
};
int graph_bytes_plan(const struct net_graph *g, struct graph_bytes *b);
/* What gr's arenas really hold (the + 1 and alignment slack left out): equal to
 * graph_bytes_plan of its net_graph, which tests/unit/test_memory.c checks. */
void graph_bytes_of(const struct graph *gr, struct graph_bytes *b);

#endif
