/* graph.c — a runnable network: memory, order, and calls into a backend.
 *
 * Design note.
 *
 * Memory, in the llm.c way: five allocations for the whole network, made through
 * the backend (backend_alloc) because a backend owns the memory its layers run on.
 *
 *   params   every parameter blob of every layer, in layer order, then role order
 *            (the order net_instantiate lists them, which is a snapshot's order)
 *   grads    the same layout: grads[i] is d loss / d params[i]
 *   acts     every blob once (an in-place layer's top IS its bottom, as in Caffe)
 *   dacts    the same layout as acts
 *   scratch  the saved inputs and outputs of layers whose backward reads a value a
 *            later in-place layer overwrites, and one shared buffer (tmp) for an
 *            in-place layer's output gradient
 *
 * What a layer keeps between its forward and backward (a pooling argmax, a dropout
 * mask, LRN scale, batch-norm statistics, softmax probabilities, oneDNN primitives)
 * is the backend's per-layer state, built once by backend_layer_init from the
 * node's struct backend_layer: its descriptors and the fixed pointers into the
 * arenas it reads and writes (backend_impl.h).
 *
 * A pass:  graph_forward runs node 0..n-1; the data node does nothing (the caller
 * filled "data" and "label").  graph_backward zeroes dacts, writes loss_weight into
 * the gradient of each loss top (Caffe's seeding), and runs the nodes in reverse.
 * Backward kernels ADD into input and parameter gradients, so a blob read by two
 * layers gets both contributions.  An in-place layer cannot add into the gradient
 * it reads, so its output gradient is first copied to tmp and the blob's gradient
 * zeroed; what the layer then adds is its input's gradient (Caffe's in-place
 * semantics: the same diff, overwritten).  Blobs with nothing learned upstream (the
 * data, and what parameter-free layers compute from it) get no gradient: NULL to
 * the backend, and a layer whose top has none is skipped in the backward.
 *
 * The copies and fills here (saved values, tmp, zeroing) go through the backend
 * (backend_copy, backend_zero: the C library on the ref and cpu backends, queued on
 * the device by cuda), and so the host touches the arenas itself only after
 * backend_sync: graph_forward and graph_backward end with one, and the loss is read
 * after it.
 *
 * Invariant: every pointer in struct gnode and its backend_layer points into one of
 * the arenas of its struct graph; nothing is allocated per pass. */
#define _GNU_SOURCE
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/rng.h"
#include "backend_impl.h"
#include "ref.h"

struct gnode {
	const struct net_node *nd;
	struct backend_layer bl;  /* what the backend sees; pointers fixed at create */
	void *state;              /* the backend's, from backend_layer_init */
	float *w[3], *dw[3];      /* the node's parameter blobs and their gradients */
	float *saved_in;          /* the input (count of bottom 0), when an in-place layer
				   * destroys it before this layer's backward reads it */
	float *saved_out;         /* the output (count), likewise */
	int64_t in_count;         /* elements of bottom 0 */
	int64_t fwd_ns, bwd_ns;   /* time spent, when profiling */
	int64_t nfwd, nbwd;
};

struct graph {
	const struct net_graph *g;
	struct backend *be;       /* borrowed, or own_be */
	struct backend *own_be;   /* the reference backend made for a NULL one */
	float *params;  /* (nparams) */
	float *grads;   /* (nparams) */
	float *acts;    /* (sum of blob counts) */
	float *dacts;   /* (same) */
	float *scratch; /* saved inputs and outputs, and tmp */
	void *ptrs;     /* the nodes' x, dx and cs arrays */
	int64_t nparams, nacts;
	float **blob;   /* (nblob) pointers into acts */
	float **dblob;  /* (nblob) into dacts; NULL for blobs the data node makes */
	struct gnode *node; /* (nnode) */
	struct graph_param *param; /* (nparam) */
	int nparam;
	float *tmp;     /* in-place output gradient (max in-place count) */
	uint64_t rng;   /* dropout's splitmix64 state */
	int training;   /* of the last forward */
	int profiling;
};

/* ---- the PRNG of the fillers: splitmix64 (common/rng.h), as dropout's ---- */

/* uniform in [0, 1) */
static double next_unit(uint64_t *s)
{
	return rng_unit(rng_next(s));
}

static double next_gauss(uint64_t *s)
{
	double u1 = next_unit(s), u2 = next_unit(s);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Caffe's BilinearFiller, the weights of a Deconvolution that upsamples by bilinear
 * interpolation: every (kh, kw) kernel of the 4-axis blob (net_add_param refuses
 * others) is the same, the same for every (C_in, C_out) pair.  Caffe's centre formula
 * exactly, per axis of kernel size k:
 *   f = ceil(k / 2),  c = (2f - 1 - f % 2) / (2f),  w(x) = 1 - |x / f - c|,
 * and w(y, x) = w_h(y) · w_w(x).  k = 4: f = 2, c = 3/4, w = 1/4 3/4 3/4 1/4
 * (upsampling by 2 with stride 2, pad 1).  For an odd k with an even f (k = 3: f = 2,
 * c = 3/4, w = 1/4 3/4 3/4) the kernel is not symmetric: Caffe's formula is meant for
 * k = 2f - f % 2, and is kept so that a Caffe net's weights are the same here.
 * Caffe requires kh = kw; per axis, a square kernel is Caffe's. */
static void fill_bilinear(float *w, const struct net_param_blob *p)
{
	int kh = (int)p->shape.dim[2], kw = (int)p->shape.dim[3];
	int fh = (kh + 1) / 2, fw = (kw + 1) / 2;
	double ch = (2.0 * fh - 1 - fh % 2) / (2.0 * fh), cw = (2.0 * fw - 1 - fw % 2) / (2.0 * fw);
	for (int64_t i = 0; i < p->count; i++) {
		int x = (int)(i % kw), y = (int)(i / kw % kh);
		w[i] = (float)((1.0 - fabs((double)x / fw - cw)) * (1.0 - fabs((double)y / fh - ch)));
	}
}

/* Caffe's fillers; fan_in = count / shape[0], fan_out = count / shape[1] (count
 * for a 1-axis blob), as Caffe's XavierFiller and MSRAFiller compute them. */
static void fill(float *w, const struct net_param_blob *p, const struct net_filler *f, uint64_t *rng)
{
	int64_t n = p->count;
	double fan_in = p->shape.ndim > 0 && p->shape.dim[0] ? (double)n / p->shape.dim[0] : (double)n;
	double fan_out = p->shape.ndim > 1 && p->shape.dim[1] ? (double)n / p->shape.dim[1] : (double)n;
	double fan = f->variance_norm == NET_FAN_OUT ? fan_out
		     : f->variance_norm == NET_FAN_AVERAGE ? (fan_in + fan_out) / 2.0
							   : fan_in;
	if (fan <= 0)
		fan = 1;
	switch (f->type) {
	case NET_FILLER_CONSTANT:
		for (int64_t i = 0; i < n; i++)
			w[i] = f->value;
		break;
	case NET_FILLER_UNIFORM:
		for (int64_t i = 0; i < n; i++)
			w[i] = (float)(f->min + (f->max - f->min) * next_unit(rng));
		break;
	case NET_FILLER_GAUSSIAN:
		for (int64_t i = 0; i < n; i++)
			w[i] = (float)(f->mean + f->std * next_gauss(rng));
		break;
	case NET_FILLER_XAVIER: {
		double a = sqrt(3.0 / fan);
		for (int64_t i = 0; i < n; i++)
			w[i] = (float)(-a + 2.0 * a * next_unit(rng));
		break;
	}
	case NET_FILLER_MSRA: {
		double sd = sqrt(2.0 / fan);
		for (int64_t i = 0; i < n; i++)
			w[i] = (float)(sd * next_gauss(rng));
		break;
	}
	case NET_FILLER_BILINEAR:
		fill_bilinear(w, p);
		break;
	}
}

/* The filler of parameter blob i of a layer (its type's row says where it is);
 * NULL: zeros (BatchNorm's statistics). */
static const struct net_filler *filler_of(const struct net_layer *l, int i)
{
	size_t off = net_layer_type_info(l->type)->filler[i > 0];
	return off ? (const struct net_filler *)((const char *)l + off) : NULL;
}

/* ---- carving the scratch arena: pass 1 measures (base NULL), pass 2 assigns ---- */

struct carve {
	unsigned char *base;
	size_t off;
};

static void *take(struct carve *c, size_t bytes)
{
	void *p = c->base ? c->base + c->off : NULL;
	c->off += (bytes + 63) & ~(size_t)63;
	return p;
}

static int64_t blob_count(const struct graph *gr, int b)
{
	return gr->g->blob[b].count;
}

/* Does the backward of this type read bottom 0's values? */
static int reads_input(enum net_layer_type t)
{
	return net_layer_type_info(t)->reads_bottom;
}

/* Does it read its top's values?  (An in-place ReLU reads its output for the sign.) */
static int reads_output(enum net_layer_type t, int in_place)
{
	enum net_reads r = net_layer_type_info(t)->reads_top;
	return r == NET_READS_YES || (r == NET_READS_IN_PLACE && in_place);
}

/* Does a node after nd overwrite blob b in place (so nd's backward would find the
 * values of a later layer there)? */
static int later_in_place(const struct graph *gr, const struct net_node *nd, int b)
{
	for (const struct net_node *j = nd + 1; j < gr->g->node + gr->g->nnode; j++)
		if (j->in_place && j->top[0] == b)
			return 1;
	return 0;
}

/* The saved copies node k needs, in the tensor scratch (both passes). */
static void plan_saves(struct graph *gr, struct gnode *gn, struct carve *c, int64_t *tmp_max)
{
	const struct net_node *nd = gn->nd;
	const struct net_layer *l = &nd->l;
	int64_t count = l->ntop ? blob_count(gr, nd->top[0]) : 0;
	if (nd->in_place && count > *tmp_max)
		*tmp_max = count;
	if (l->nbottom && l->ntop && reads_input(l->type) &&
	    ((nd->in_place && l->type != NET_RELU) || (!nd->in_place && later_in_place(gr, nd, nd->bottom[0]))))
		gn->saved_in = take(c, (size_t)blob_count(gr, nd->bottom[0]) * sizeof(float));
	if (l->ntop && reads_output(l->type, nd->in_place) && later_in_place(gr, nd, nd->top[0]))
		gn->saved_out = take(c, (size_t)count * sizeof(float));
}

int graph_bytes_plan(const struct net_graph *g, struct graph_bytes *b)
{
	memset(b, 0, sizeof *b);
	struct graph gr = { .g = g };
	gr.node = calloc((size_t)g->nnode + 1, sizeof *gr.node);
	if (!gr.node)
		return DD_ENOMEM;
	struct carve c = { NULL, 0 };
	int64_t tmp_max = 0, np = 0, na = 0;
	for (int k = 0; k < g->nnode; k++) {
		gr.node[k].nd = &g->node[k];
		np += g->node[k].nparams;
	}
	for (int k = 0; k < g->nnode; k++)
		plan_saves(&gr, &gr.node[k], &c, &tmp_max);
	take(&c, (size_t)tmp_max * sizeof(float));
	for (int i = 0; i < g->nblob; i++)
		na += g->blob[i].count;
	int infer = g->stage == NET_STAGE_DEPLOY;
	b->params = np * (int64_t)sizeof(float);
	b->grads = infer ? 0 : b->params;
	b->acts = na * (int64_t)sizeof(float);
	b->dacts = infer ? 0 : b->acts;
	b->saved = (int64_t)c.off;
	free(gr.node);
	return DD_OK;
}

void graph_bytes_of(const struct graph *gr, struct graph_bytes *b)
{
	b->params = gr->nparams * (int64_t)sizeof(float);
	b->grads = gr->grads ? b->params : 0;
	b->acts = gr->nacts * (int64_t)sizeof(float);
	b->dacts = gr->dacts ? b->acts : 0;
	/* the scratch arena: its carving ends at tmp + the largest in-place count */
	int64_t tmp_max = 0;
	for (int k = 0; k < gr->g->nnode; k++) {
		const struct net_node *nd = &gr->g->node[k];
		if (nd->in_place && nd->l.ntop && gr->g->blob[nd->top[0]].count > tmp_max)
			tmp_max = gr->g->blob[nd->top[0]].count;
	}
	b->saved = (int64_t)((unsigned char *)gr->tmp - (unsigned char *)gr->scratch) +
		   (int64_t)(((size_t)tmp_max * sizeof(float) + 63) & ~(size_t)63);
}

/* Fill node k's struct backend_layer: descriptors and the pointers it reads and
 * writes.  x, dx and cs are the node's slices of the pointer arena. */
static void describe_node(struct graph *gr, struct gnode *gn, const float **x, float **dx, int *cs)
{
	const struct net_node *nd = gn->nd;
	const struct net_layer *l = &nd->l;
	const struct net_graph *g = gr->g;
	struct backend_layer *bl = &gn->bl;
	const struct net_shape *s = l->nbottom ? &g->blob[nd->bottom[0]].shape : NULL;
	const struct net_shape *t = l->ntop ? &g->blob[nd->top[0]].shape : NULL;
	memset(bl, 0, sizeof *bl);
	bl->l = l;
	bl->nbottom = l->nbottom;
	bl->in_place = nd->in_place;
	bl->count = l->ntop ? blob_count(gr, nd->top[0]) : 0;
	bl->rng = &gr->rng;
	if (s) {
		gn->in_count = blob_count(gr, nd->bottom[0]);
		bl->n = s->ndim > 0 ? (int)s->dim[0] : 1;
		bl->c = s->ndim > 1 ? (int)s->dim[1] : 1;
		bl->inner = (int)(gn->in_count / ((int64_t)bl->n * bl->c));
	}
	for (int i = 0; i < l->nbottom; i++) {
		x[i] = gr->blob[nd->bottom[i]];
		dx[i] = gr->dblob[nd->bottom[i]];
		cs[i] = g->blob[nd->bottom[i]].shape.ndim > 1 ? (int)g->blob[nd->bottom[i]].shape.dim[1] : 1;
	}
	if (gn->saved_in)
		x[0] = gn->saved_in; /* the forward copies the input there first */
	bl->x = x;
	bl->dx = dx;
	bl->cs = cs;
	bl->y = l->ntop ? gr->blob[nd->top[0]] : NULL;
	bl->bx = gn->saved_in ? gn->saved_in : nd->in_place ? bl->y : l->nbottom ? gr->blob[nd->bottom[0]] : NULL;
	bl->by = gn->saved_out ? gn->saved_out : bl->y;
	bl->dy = nd->in_place ? gr->tmp : l->ntop ? gr->dblob[nd->top[0]] : NULL;
	for (int i = 0; i < nd->nparam && i < 3; i++) {
		bl->w[i] = gn->w[i];
		bl->dw[i] = nd->param[i].learned ? gn->dw[i] : NULL;
	}
	if (l->type == NET_CONCAT && t)
		bl->concat_inner = (int)(bl->count / ((int64_t)bl->n * t->dim[1]));
	switch (l->type) {
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION: { /* c_in, h_in, w_in: the bottom's; c_out, h_out, w_out: the top's */
		const struct net_conv_param *p = &l->conv;
		bl->d.conv = (struct conv_desc){ .n = bl->n, .c_in = bl->c, .h_in = (int)s->dim[2], .w_in = (int)s->dim[3],
						 .c_out = (int)t->dim[1], .h_out = (int)t->dim[2], .w_out = (int)t->dim[3],
						 .kh = p->kh, .kw = p->kw, .sh = p->sh, .sw = p->sw, .ph = p->ph,
						 .pw = p->pw, .dh = p->dh, .dw = p->dw, .group = p->group,
						 .bias = p->bias_term };
		break;
	}
	case NET_POOLING: {
		const struct net_pool_param *p = &l->pool;
		bl->d.pool = (struct pool_desc){ .n = bl->n, .c = bl->c, .h_in = (int)s->dim[2], .w_in = (int)s->dim[3],
						 .h_out = (int)t->dim[2], .w_out = (int)t->dim[3], .kh = p->kh,
						 .kw = p->kw, .sh = p->sh, .sw = p->sw, .ph = p->ph, .pw = p->pw,
						 .method = p->pool == NET_POOL_MAX ? POOL_MAX : POOL_AVE,
						 .global = p->global };
		break;
	}
	case NET_INNER_PRODUCT:
		bl->d.ip = (struct ip_desc){ .n = bl->n, .k = (int)(gn->in_count / bl->n), .m = l->ip.num_output,
					     .bias = l->ip.bias_term };
		break;
	case NET_LRN:
		bl->d.lrn = (struct lrn_desc){ .n = bl->n, .c = bl->c, .h = (int)s->dim[2], .w = (int)s->dim[3],
					       .size = l->lrn.local_size, .alpha = l->lrn.alpha, .beta = l->lrn.beta,
					       .k = l->lrn.k };
		break;
	case NET_BATCH_NORM:
		bl->d.bn = (struct bn_desc){ .n = bl->n, .c = bl->c, .h = s->ndim > 2 ? (int)s->dim[2] : 1,
					     .w = (int)(bl->inner / (s->ndim > 2 ? s->dim[2] : 1)), .eps = l->bn.eps,
					     .moving_average_fraction = l->bn.moving_average_fraction,
					     .use_global_stats = l->bn.use_global_stats > 0 };
		break;
	case NET_SCALE:
		bl->d.scale = (struct scale_desc){ .n = bl->n, .c = bl->c, .inner = bl->inner, .bias = l->scale.bias_term };
		break;
	case NET_CROP:
		bl->d.crop.ndim = s->ndim;
		for (int a = 0; a < s->ndim; a++) {
			bl->d.crop.in[a] = (int)s->dim[a];
			bl->d.crop.out[a] = (int)t->dim[a];
			bl->d.crop.off[a] = (int)l->crop.offset[a]; /* one per axis once instantiated */
		}
		break;
	case NET_DATA:
	case NET_INPUT:
	case NET_RELU:
	case NET_SIGMOID:
	case NET_TANH:
	case NET_POWER:
	case NET_DROPOUT:
	case NET_ELTWISE:
	case NET_CONCAT:
	case NET_FLATTEN:
	case NET_SOFTMAX:
	case NET_SOFTMAX_LOSS:
	case NET_ACCURACY:
	case NET_EUCLIDEAN_LOSS:
	case NET_LAYER_TYPE_COUNT: /* no descriptor: the kernels read the layer and the counts */
		break;
	}
}

int graph_create(const struct net_graph *g, struct backend *be, uint64_t seed, struct graph **out,
		 struct dd_err *err)
{
	*out = NULL;
	struct graph *gr = calloc(1, sizeof *gr);
	if (!gr)
		return dd_err_set(err, DD_ENOMEM, "out of memory for the network");
	gr->g = g;
	gr->rng = seed ^ 0x5DEECE66Dull;
	if (!be) {
		if (backend_ref_create(&gr->own_be, err))
			goto fail;
		be = gr->own_be;
	}
	gr->be = be;

	/* ask before anything is allocated */
	for (int k = 0; k < g->nnode; k++)
		if (g->node[k].l.type >= NET_LAYER_TYPE_COUNT || !backend_supports(be, &g->node[k].l)) {
			dd_err_set(err, DD_EINVAL, "layer '%s': the %s backend cannot run its type", g->node[k].l.name,
				   backend_name(be));
			goto fail;
		}

	int64_t nptr = 0;
	for (int k = 0; k < g->nnode; k++) {
		gr->nparams += g->node[k].nparams;
		gr->nparam += g->node[k].nparam;
		nptr += g->node[k].l.nbottom;
	}
	for (int b = 0; b < g->nblob; b++)
		gr->nacts += g->blob[b].count;

	gr->node = calloc((size_t)g->nnode ? (size_t)g->nnode : 1, sizeof *gr->node);
	gr->param = calloc((size_t)gr->nparam ? (size_t)gr->nparam : 1, sizeof *gr->param);
	gr->blob = calloc((size_t)g->nblob ? (size_t)g->nblob : 1, sizeof *gr->blob);
	gr->dblob = calloc((size_t)g->nblob ? (size_t)g->nblob : 1, sizeof *gr->dblob);
	gr->ptrs = calloc((size_t)nptr + 1, 2 * sizeof(float *) + sizeof(int));
	gr->params = backend_alloc(be, ((size_t)gr->nparams + 1) * sizeof(float));
	/* a deploy network only infers: no gradients at all */
	int infer = g->stage == NET_STAGE_DEPLOY;
	gr->grads = infer ? NULL : backend_alloc(be, ((size_t)gr->nparams + 1) * sizeof(float));
	gr->acts = backend_alloc(be, ((size_t)gr->nacts + 1) * sizeof(float));
	gr->dacts = infer ? NULL : backend_alloc(be, ((size_t)gr->nacts + 1) * sizeof(float));
	if (!gr->node || !gr->param || !gr->blob || !gr->dblob || !gr->ptrs || !gr->params ||
	    (!infer && (!gr->grads || !gr->dacts)) || !gr->acts) {
		dd_err_set(err, DD_ENOMEM,
			   "%s for the network's %lld parameters and %lld activations at batch size %d: "
			   "try a smaller batch size",
			   be->ops->sync ? "out of device memory" : "out of memory", (long long)gr->nparams,
			   (long long)gr->nacts, g->in.n);
		goto fail;
	}

	/* blobs into acts / dacts.  A blob gets a gradient only when something learned
	 * lies upstream of it (Caffe's need_backward): not the data, nor what
	 * parameter-free layers make of it, so the first convolution computes no
	 * gradient for its input. */
	unsigned char *need = calloc((size_t)g->nblob + 1, 1);
	if (!need) {
		dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		int nk = 0;
		for (int i = 0; i < nd->nparam; i++)
			nk |= nd->param[i].learned;
		for (int i = 0; i < nd->l.nbottom; i++)
			nk |= need[nd->bottom[i]];
		if (nd->l.type == NET_DATA || nd->l.type == NET_INPUT || infer)
			nk = 0;
		for (int i = 0; i < nd->l.ntop; i++)
			need[nd->top[i]] |= (unsigned char)nk;
	}
	int64_t off = 0;
	for (int b = 0; b < g->nblob; b++) {
		gr->blob[b] = gr->acts + off;
		gr->dblob[b] = need[b] ? gr->dacts + off : NULL;
		off += g->blob[b].count;
	}
	free(need);

	/* parameters into params / grads, filled */
	uint64_t frng = seed;
	off = 0;
	int pi = 0;
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		gr->node[k].nd = nd;
		for (int i = 0; i < nd->nparam; i++) {
			const struct net_param_blob *p = &nd->param[i];
			struct graph_param *gp = &gr->param[pi++];
			gp->layer = nd->l.name;
			gp->role = p->role;
			gp->w = gr->params + off;
			gp->dw = gr->grads ? gr->grads + off : NULL;
			gp->shape = p->shape;
			gp->count = p->count;
			gp->lr_mult = p->lr_mult;
			gp->decay_mult = p->decay_mult;
			gp->learned = p->learned;
			if (i < 3) {
				gr->node[k].w[i] = gp->w;
				gr->node[k].dw[i] = gp->dw;
			}
			const struct net_filler *f = filler_of(&nd->l, i);
			if (f)
				fill(gp->w, p, f, &frng);
			off += p->count;
		}
	}

	/* saved copies and tmp: measure, allocate, carve */
	struct carve c = { NULL, 0 };
	int64_t tmp_max = 0;
	for (int k = 0; k < g->nnode; k++)
		plan_saves(gr, &gr->node[k], &c, &tmp_max);
	take(&c, (size_t)tmp_max * sizeof(float));
	gr->scratch = backend_alloc(be, c.off + 64);
	if (!gr->scratch) {
		dd_err_set(err, DD_ENOMEM, "out of memory for the network's %zu bytes of saved values", c.off);
		goto fail;
	}
	c = (struct carve){ (unsigned char *)gr->scratch, 0 };
	tmp_max = 0;
	for (int k = 0; k < g->nnode; k++)
		plan_saves(gr, &gr->node[k], &c, &tmp_max);
	gr->tmp = take(&c, (size_t)tmp_max * sizeof(float));

	/* what each layer sees, and its backend state */
	const float **xs = gr->ptrs;
	float **dxs = (float **)(xs + nptr);
	int *css = (int *)(dxs + nptr);
	for (int k = 0; k < g->nnode; k++) {
		struct gnode *gn = &gr->node[k];
		describe_node(gr, gn, xs, dxs, css);
		xs += gn->nd->l.nbottom;
		dxs += gn->nd->l.nbottom;
		css += gn->nd->l.nbottom;
		if (backend_layer_init(be, &gn->bl, &gn->state, err))
			goto fail;
	}

	*out = gr;
	return DD_OK;
fail:
	graph_free(gr);
	return err ? err->code : DD_ENOMEM;
}

void graph_free(struct graph *gr)
{
	if (!gr)
		return;
	struct backend *be = gr->be;
	for (int k = 0; gr->node && k < gr->g->nnode; k++)
		if (gr->node[k].state)
			backend_layer_fini(be, gr->node[k].state);
	if (be) {
		backend_release(be, gr->scratch);
		backend_release(be, gr->dacts);
		backend_release(be, gr->acts);
		backend_release(be, gr->grads);
		backend_release(be, gr->params);
	}
	free(gr->ptrs);
	free(gr->dblob);
	free(gr->blob);
	free(gr->param);
	free(gr->node);
	backend_free(gr->own_be);
	free(gr);
}

/* ---- forward ---- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int graph_forward(struct graph *gr, int training, float *loss_out, struct dd_err *err)
{
	gr->training = training;
	float loss = 0;
	for (int k = 0; k < gr->g->nnode; k++) {
		struct gnode *gn = &gr->node[k];
		const struct net_node *nd = gn->nd;
		if (nd->l.type == NET_DATA || nd->l.type == NET_INPUT)
			continue;
		int64_t t0 = gr->profiling ? now_ns() : 0;
		if (gn->saved_in) /* the input will be gone by the backward: keep it */
			backend_copy(gr->be, gn->saved_in, gr->blob[nd->bottom[0]], (size_t)gn->in_count * sizeof(float));
		int rc = backend_forward(gr->be, gn->state, &gn->bl, training, err);
		if (rc)
			return rc;
		if (gn->saved_out) /* a later in-place layer overwrites it */
			backend_copy(gr->be, gn->saved_out, gn->bl.y, (size_t)gn->bl.count * sizeof(float));
		if (gr->profiling) {
			backend_sync(gr->be);
			gn->fwd_ns += now_ns() - t0;
			gn->nfwd++;
		}
	}
	backend_sync(gr->be);
	for (int k = 0; k < gr->g->nnode; k++) {
		const struct gnode *gn = &gr->node[k];
		if (gn->nd->loss_weight != 0 && gn->nd->l.ntop)
			loss += gn->nd->loss_weight * gn->bl.y[0];
	}
	if (loss_out)
		*loss_out = loss;
	return DD_OK;
}

/* ---- backward ---- */

int graph_backward(struct graph *gr, struct dd_err *err)
{
	if (!gr->dacts)
		return dd_err_set(err, DD_EINVAL, "a deploy network only runs forward");
	backend_zero(gr->be, gr->dacts, (size_t)gr->nacts * sizeof(float));
	backend_sync(gr->be); /* the seeds below are written by the host */
	for (int k = 0; k < gr->g->nnode; k++) {
		const struct net_node *nd = gr->node[k].nd;
		if (nd->loss_weight != 0 && nd->l.ntop && gr->dblob[nd->top[0]])
			gr->dblob[nd->top[0]][0] = nd->loss_weight;
	}
	for (int k = gr->g->nnode - 1; k >= 0; k--) {
		struct gnode *gn = &gr->node[k];
		const struct net_node *nd = gn->nd;
		const struct net_layer *l = &nd->l;
		if (l->type == NET_DATA || l->type == NET_INPUT || l->type == NET_ACCURACY || !l->ntop ||
		    !gr->dblob[nd->top[0]])
			continue;
		int64_t t0 = gr->profiling ? now_ns() : 0;
		if (nd->in_place) {
			float *din = gn->bl.dx[0];
			if (!din) /* the data itself, changed in place: nothing upstream wants it */
				continue;
			backend_copy(gr->be, gr->tmp, gr->dblob[nd->top[0]], (size_t)gn->bl.count * sizeof(float));
			backend_zero(gr->be, din, (size_t)gn->bl.count * sizeof(float));
		}
		int rc = backend_backward(gr->be, gn->state, &gn->bl, gr->training, err);
		if (rc)
			return rc;
		if (gr->profiling) {
			backend_sync(gr->be);
			gn->bwd_ns += now_ns() - t0;
			gn->nbwd++;
		}
	}
	backend_sync(gr->be);
	return DD_OK;
}

void graph_set_profiling(struct graph *gr, int on)
{
	gr->profiling = on;
	for (int k = 0; k < gr->g->nnode; k++)
		gr->node[k].fwd_ns = gr->node[k].bwd_ns = gr->node[k].nfwd = gr->node[k].nbwd = 0;
}

int graph_layer_time(const struct graph *gr, int k, double *fwd_ms, double *bwd_ms)
{
	if (k < 0 || k >= gr->g->nnode)
		return DD_EINVAL;
	const struct gnode *gn = &gr->node[k];
	*fwd_ms = gn->nfwd ? gn->fwd_ns / 1e6 / (double)gn->nfwd : 0;
	*bwd_ms = gn->nbwd ? gn->bwd_ns / 1e6 / (double)gn->nbwd : 0;
	return DD_OK;
}

struct backend *graph_backend(const struct graph *gr) { return gr->be; }
uint64_t *graph_rng(struct graph *gr) { return &gr->rng; }

void graph_zero_grads(struct graph *gr)
{
	if (gr->grads)
		backend_zero(gr->be, gr->grads, (size_t)gr->nparams * sizeof(float));
}

/* ---- lookups ---- */

static int find_blob(const struct graph *gr, const char *name)
{
	for (int b = 0; b < gr->g->nblob; b++)
		if (!strcmp(gr->g->blob[b].name, name))
			return b;
	return -1;
}

float *graph_blob(struct graph *gr, const char *name, struct net_shape *shape)
{
	int b = find_blob(gr, name);
	if (b < 0)
		return NULL;
	if (shape)
		*shape = gr->g->blob[b].shape;
	return gr->blob[b];
}

float *graph_blob_grad(struct graph *gr, const char *name)
{
	int b = find_blob(gr, name);
	return b < 0 ? NULL : gr->dblob[b];
}

float graph_value(struct graph *gr, const char *name)
{
	int b = find_blob(gr, name);
	return b < 0 ? NAN : gr->blob[b][0];
}

int64_t graph_param_count(const struct graph *gr) { return gr->nparams; }
int graph_nparam(const struct graph *gr) { return gr->nparam; }
const struct graph_param *graph_param(const struct graph *gr, int i)
{
	return i >= 0 && i < gr->nparam ? &gr->param[i] : NULL;
}
float *graph_params(struct graph *gr) { return gr->params; }
float *graph_grads(struct graph *gr) { return gr->grads; }
