/* graph.h — an instantiated network made runnable: memory, forward, backward.
 *
 * A struct graph takes a struct net_graph (net_instantiate's layers in order, with
 * blob and parameter shapes) and gives it storage in the llm.c way: one float arena
 * for every learned and stored parameter blob, one for their gradients, one for
 * every activation blob, one for the activation gradients, and one scratch arena for
 * what layers keep between forward and backward (pooling argmax, dropout masks, LRN
 * scale, batch-norm statistics, softmax probabilities).  Every tensor is a pointer
 * into its arena.  The kernels are the reference ones of ref.h.
 *
 * The data layer's tops ("data" and, in train/val, "label") are inputs: the caller
 * fills them through graph_blob() before graph_forward().
 *
 * Ownership: a graph BORROWS the net_graph (and through it the struct net): free
 * the graph first (graph_free), then the net_graph, then the net. */
#ifndef DD_GRAPH_H
#define DD_GRAPH_H

#include <stdint.h>

#include "../common/err.h"
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

/* Allocate the arenas and fill the parameters with their layers' fillers (Caffe's
 * constant, uniform, gaussian, xavier, msra), drawn from a PRNG seeded with seed.
 * DD_OK and *out, which the caller frees with graph_free(); DD_ENOMEM or
 * DD_EINVAL (a layer type without a kernel) with *out NULL. */
int graph_create(const struct net_graph *g, uint64_t seed, struct graph **out, struct dd_err *err);
/* Accepts NULL. */
void graph_free(struct graph *gr);

/* Run every layer in order (training selects dropout's and batch norm's training
 * behaviour).  Returns the total loss: the sum over loss layers of loss_weight * loss. */
float graph_forward(struct graph *gr, int training);
/* Zero the activation gradients, seed each loss top with its loss_weight and run the
 * layers backwards; parameter gradients are ADDED to (call graph_zero_grads first). */
void graph_backward(struct graph *gr);
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
/* The instantiated network it runs (borrowed). */
const struct net_graph *graph_net(const struct graph *gr);

#endif
