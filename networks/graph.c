/* graph.c — a runnable network on the reference kernels.
 *
 * Design note.
 *
 * Memory, in the llm.c way: five allocations for the whole network.
 *
 *   params   every parameter blob of every layer, in layer order, then role order
 *            (the order net_instantiate lists them, which is a snapshot's order)
 *   grads    the same layout: grads[i] is d loss / d params[i]
 *   acts     every blob once (an in-place layer's top IS its bottom, as in Caffe)
 *   dacts    the same layout as acts
 *   scratch  bytes: per-layer state kept from forward to backward (pooling and
 *            eltwise argmax, dropout masks, LRN scale, batch-norm saved mean and
 *            1/std, softmax-loss probabilities, a saved input for the in-place
 *            layers whose backward reads their input) and one shared buffer for an
 *            in-place layer's output gradient
 *
 * A pass:  graph_forward runs node 0..n-1; the data node does nothing (the caller
 * filled "data" and "label").  graph_backward zeroes dacts, writes loss_weight into
 * the gradient of each loss top (Caffe's seeding), and runs the nodes in reverse.
 * The ref kernels ADD into input and parameter gradients, so a blob read by two
 * layers gets both contributions.  An in-place layer cannot add into the gradient
 * it reads, so its output gradient is first copied to the shared buffer and the
 * blob's gradient zeroed; what the layer then adds is its input's gradient (Caffe's
 * in-place semantics: the same diff, overwritten).  The blobs the data node makes
 * get no gradient (NULL into the kernels).
 *
 * Invariant: every pointer in struct gnode points into one of the arenas of its
 * struct graph; nothing is allocated per pass. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

struct gnode {
	const struct net_node *nd;
	float *w[3], *dw[3];    /* the node's parameter blobs and their gradients */
	int32_t *argmax;        /* pool MAX (N,C,Ho,Wo); eltwise MAX (count) */
	uint8_t *mask;          /* dropout (count) */
	float *lrn_scale;       /* (N,C,H,W) */
	float *bn_mean, *bn_invstd; /* (C) each */
	float *prob;            /* softmax loss (N,C,inner) */
	float *saved_in;        /* the input (count of bottom 0), when an in-place layer
				 * destroys it before this layer's backward reads it */
	float *saved_out;       /* the output (count), likewise */
	const float **ins;      /* (nbottom) eltwise, concat */
	float **dins;           /* (nbottom) */
	int *cs;                /* (nbottom) concat channels */
	union {
		struct conv_desc conv;
		struct pool_desc pool;
		struct ip_desc ip;
		struct lrn_desc lrn;
		struct bn_desc bn;
		struct scale_desc scale;
	} d;
	int n, c, inner;        /* of bottom 0: batch, channels, the rest */
	int64_t count;          /* elements of top 0 */
};

struct graph {
	const struct net_graph *g;
	float *params;  /* (nparams) */
	float *grads;   /* (nparams) */
	float *acts;    /* (sum of blob counts) */
	float *dacts;   /* (same) */
	unsigned char *scratch;
	int64_t nparams, nacts;
	float **blob;   /* (nblob) pointers into acts */
	float **dblob;  /* (nblob) into dacts; NULL for blobs the data node makes */
	struct gnode *node; /* (nnode) */
	struct graph_param *param; /* (nparam) */
	int nparam;
	float *tmp;     /* in-place output gradient (max in-place count) */
	uint64_t rng;   /* dropout's splitmix64 state */
	int training;   /* of the last forward */
};

/* ---- the PRNG of the fillers: splitmix64, as dropout's ---- */

static uint64_t next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double next_unit(uint64_t *s)
{
	return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double next_gauss(uint64_t *s)
{
	double u1 = next_unit(s), u2 = next_unit(s);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
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
	}
}

/* The filler of parameter blob i of a layer; NULL: zeros (BatchNorm's statistics). */
static const struct net_filler *filler_of(const struct net_layer *l, int i)
{
	switch (l->type) {
	case NET_CONVOLUTION: return i == 0 ? &l->conv.weight_filler : &l->conv.bias_filler;
	case NET_INNER_PRODUCT: return i == 0 ? &l->ip.weight_filler : &l->ip.bias_filler;
	case NET_SCALE: return i == 0 ? &l->scale.filler : &l->scale.bias_filler;
	default: return NULL;
	}
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
	return t == NET_CONVOLUTION || t == NET_INNER_PRODUCT || t == NET_RELU || t == NET_POWER || t == NET_LRN ||
	       t == NET_SCALE;
}

/* Does it read its top's values?  (An in-place ReLU reads its output for the sign.) */
static int reads_output(enum net_layer_type t, int in_place)
{
	return t == NET_SIGMOID || t == NET_TANH || t == NET_BATCH_NORM || t == NET_LRN || t == NET_SOFTMAX ||
	       (t == NET_RELU && in_place);
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

/* Descriptors and scratch of node k (both passes). */
static void plan_node(struct graph *gr, struct gnode *gn, struct carve *c, int64_t *tmp_max)
{
	const struct net_node *nd = gn->nd;
	const struct net_layer *l = &nd->l;
	const struct net_graph *g = gr->g;
	const struct net_shape *s = l->nbottom ? &g->blob[nd->bottom[0]].shape : NULL;
	const struct net_shape *t = l->ntop ? &g->blob[nd->top[0]].shape : NULL;
	gn->count = l->ntop ? blob_count(gr, nd->top[0]) : 0;
	if (s) {
		int64_t bc = blob_count(gr, nd->bottom[0]);
		gn->n = s->ndim > 0 ? (int)s->dim[0] : 1;
		gn->c = s->ndim > 1 ? (int)s->dim[1] : 1;
		gn->inner = (int)(bc / ((int64_t)gn->n * gn->c));
	}
	if (nd->in_place && gn->count > *tmp_max)
		*tmp_max = gn->count;
	if (l->nbottom && l->ntop && reads_input(l->type) &&
	    ((nd->in_place && l->type != NET_RELU) || (!nd->in_place && later_in_place(gr, nd, nd->bottom[0]))))
		gn->saved_in = take(c, (size_t)blob_count(gr, nd->bottom[0]) * sizeof(float));
	if (l->ntop && reads_output(l->type, nd->in_place) && later_in_place(gr, nd, nd->top[0]))
		gn->saved_out = take(c, (size_t)gn->count * sizeof(float));
	switch (l->type) {
	case NET_CONVOLUTION: {
		struct conv_desc *d = &gn->d.conv;
		const struct net_conv_param *p = &l->conv;
		*d = (struct conv_desc){ .n = gn->n, .c_in = gn->c, .h_in = (int)s->dim[2], .w_in = (int)s->dim[3],
					 .c_out = (int)t->dim[1], .h_out = (int)t->dim[2], .w_out = (int)t->dim[3],
					 .kh = p->kh, .kw = p->kw, .sh = p->sh, .sw = p->sw, .ph = p->ph, .pw = p->pw,
					 .dh = p->dh, .dw = p->dw, .group = p->group, .bias = p->bias_term };
		break;
	}
	case NET_POOLING: {
		struct pool_desc *d = &gn->d.pool;
		const struct net_pool_param *p = &l->pool;
		*d = (struct pool_desc){ .n = gn->n, .c = gn->c, .h_in = (int)s->dim[2], .w_in = (int)s->dim[3],
					 .h_out = (int)t->dim[2], .w_out = (int)t->dim[3], .kh = p->kh, .kw = p->kw,
					 .sh = p->sh, .sw = p->sw, .ph = p->ph, .pw = p->pw,
					 .method = p->pool == NET_POOL_MAX ? POOL_MAX : POOL_AVE, .global = p->global };
		if (p->pool == NET_POOL_MAX)
			gn->argmax = take(c, (size_t)gn->count * sizeof(int32_t));
		break;
	}
	case NET_INNER_PRODUCT:
		gn->d.ip = (struct ip_desc){ .n = gn->n, .k = (int)(blob_count(gr, nd->bottom[0]) / gn->n),
					     .m = l->ip.num_output, .bias = l->ip.bias_term };
		break;
	case NET_DROPOUT:
		gn->mask = take(c, (size_t)gn->count);
		break;
	case NET_LRN:
		gn->d.lrn = (struct lrn_desc){ .n = gn->n, .c = gn->c, .h = (int)s->dim[2], .w = (int)s->dim[3],
					       .size = l->lrn.local_size, .alpha = l->lrn.alpha, .beta = l->lrn.beta,
					       .k = l->lrn.k };
		gn->lrn_scale = take(c, (size_t)gn->count * sizeof(float));
		break;
	case NET_BATCH_NORM:
		gn->d.bn = (struct bn_desc){ .n = gn->n, .c = gn->c,
					     .h = s->ndim > 2 ? (int)s->dim[2] : 1,
					     .w = (int)(gn->inner / (s->ndim > 2 ? s->dim[2] : 1)),
					     .eps = l->bn.eps, .moving_average_fraction = l->bn.moving_average_fraction,
					     .use_global_stats = l->bn.use_global_stats > 0 };
		gn->bn_mean = take(c, (size_t)gn->c * sizeof(float));
		gn->bn_invstd = take(c, (size_t)gn->c * sizeof(float));
		break;
	case NET_SCALE:
		gn->d.scale = (struct scale_desc){ .n = gn->n, .c = gn->c, .inner = gn->inner, .bias = l->scale.bias_term };
		break;
	case NET_ELTWISE:
		if (l->eltwise.op == NET_ELTWISE_MAX)
			gn->argmax = take(c, (size_t)gn->count * sizeof(int32_t));
		/* fall through */
	case NET_CONCAT:
		gn->ins = take(c, (size_t)l->nbottom * sizeof *gn->ins);
		gn->dins = take(c, (size_t)l->nbottom * sizeof *gn->dins);
		gn->cs = take(c, (size_t)l->nbottom * sizeof *gn->cs);
		break;
	case NET_SOFTMAX_LOSS:
		gn->prob = take(c, (size_t)blob_count(gr, nd->bottom[0]) * sizeof(float));
		break;
	default:
		break;
	}
}

int graph_create(const struct net_graph *g, uint64_t seed, struct graph **out, struct dd_err *err)
{
	*out = NULL;
	struct graph *gr = calloc(1, sizeof *gr);
	if (!gr)
		return dd_err_set(err, DD_ENOMEM, "out of memory for the network");
	gr->g = g;
	gr->rng = seed ^ 0x5DEECE66Dull;

	/* the kernels cover every type but Input outside deploy; check first */
	for (int k = 0; k < g->nnode; k++)
		if (g->node[k].l.type >= NET_LAYER_TYPE_COUNT) {
			dd_err_set(err, DD_EINVAL, "layer '%s': no kernel for its type", g->node[k].l.name);
			goto fail;
		}

	for (int k = 0; k < g->nnode; k++) {
		gr->nparams += g->node[k].nparams;
		gr->nparam += g->node[k].nparam;
	}
	for (int b = 0; b < g->nblob; b++)
		gr->nacts += g->blob[b].count;

	gr->node = calloc((size_t)g->nnode ? (size_t)g->nnode : 1, sizeof *gr->node);
	gr->param = calloc((size_t)gr->nparam ? (size_t)gr->nparam : 1, sizeof *gr->param);
	gr->blob = calloc((size_t)g->nblob ? (size_t)g->nblob : 1, sizeof *gr->blob);
	gr->dblob = calloc((size_t)g->nblob ? (size_t)g->nblob : 1, sizeof *gr->dblob);
	gr->params = calloc((size_t)gr->nparams + 1, sizeof(float));
	gr->grads = calloc((size_t)gr->nparams + 1, sizeof(float));
	gr->acts = calloc((size_t)gr->nacts + 1, sizeof(float));
	gr->dacts = calloc((size_t)gr->nacts + 1, sizeof(float));
	if (!gr->node || !gr->param || !gr->blob || !gr->dblob || !gr->params || !gr->grads || !gr->acts ||
	    !gr->dacts) {
		dd_err_set(err, DD_ENOMEM, "out of memory for the network's %lld parameters and %lld activations",
			   (long long)gr->nparams, (long long)gr->nacts);
		goto fail;
	}

	/* blobs into acts / dacts */
	int64_t off = 0;
	for (int b = 0; b < g->nblob; b++) {
		int prod = g->blob[b].producer;
		enum net_layer_type pt = g->node[prod].l.type;
		gr->blob[b] = gr->acts + off;
		gr->dblob[b] = pt == NET_DATA || pt == NET_INPUT ? NULL : gr->dacts + off;
		off += g->blob[b].count;
	}

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
			gp->dw = gr->grads + off;
			gp->shape = p->shape;
			gp->count = p->count;
			gp->lr_mult = p->lr_mult;
			gp->decay_mult = p->decay_mult;
			gp->learned = p->learned;
			gr->node[k].w[i] = gp->w;
			gr->node[k].dw[i] = gp->dw;
			const struct net_filler *f = filler_of(&nd->l, i);
			if (f)
				fill(gp->w, p, f, &frng);
			off += p->count;
		}
	}

	/* scratch: measure, allocate, carve */
	struct carve c = { NULL, 0 };
	int64_t tmp_max = 0;
	for (int k = 0; k < g->nnode; k++)
		plan_node(gr, &gr->node[k], &c, &tmp_max);
	take(&c, (size_t)tmp_max * sizeof(float));
	gr->scratch = calloc(c.off + 64, 1);
	if (!gr->scratch) {
		dd_err_set(err, DD_ENOMEM, "out of memory for the network's %zu bytes of layer state", c.off);
		goto fail;
	}
	c = (struct carve){ gr->scratch, 0 };
	tmp_max = 0;
	for (int k = 0; k < g->nnode; k++)
		plan_node(gr, &gr->node[k], &c, &tmp_max);
	gr->tmp = take(&c, (size_t)tmp_max * sizeof(float));

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
	free(gr->scratch);
	free(gr->dacts);
	free(gr->acts);
	free(gr->grads);
	free(gr->params);
	free(gr->dblob);
	free(gr->blob);
	free(gr->param);
	free(gr->node);
	free(gr);
}

/* ---- forward ---- */

static void node_forward(struct graph *gr, struct gnode *gn, int training)
{
	const struct net_node *nd = gn->nd;
	const struct net_layer *l = &nd->l;
	const float *in = l->nbottom ? gr->blob[nd->bottom[0]] : NULL;
	float *out = l->ntop ? gr->blob[nd->top[0]] : NULL;
	if (gn->saved_in) { /* the input will be gone by the backward: keep it */
		memcpy(gn->saved_in, in, (size_t)gr->g->blob[nd->bottom[0]].count * sizeof(float));
		in = gn->saved_in;
	}
	switch (l->type) {
	case NET_DATA:
	case NET_INPUT:
		break;
	case NET_CONVOLUTION:
		conv_forward(out, in, gn->w[0], gn->d.conv.bias ? gn->w[1] : NULL, &gn->d.conv);
		break;
	case NET_POOLING:
		pool_forward(out, gn->argmax, in, &gn->d.pool);
		break;
	case NET_INNER_PRODUCT:
		ip_forward(out, in, gn->w[0], gn->d.ip.bias ? gn->w[1] : NULL, &gn->d.ip);
		break;
	case NET_RELU:
		relu_forward(out, in, gn->count, l->relu.negative_slope);
		break;
	case NET_SIGMOID:
		sigmoid_forward(out, in, gn->count);
		break;
	case NET_TANH:
		tanh_forward(out, in, gn->count);
		break;
	case NET_POWER:
		power_forward(out, in, gn->count, l->power.power, l->power.scale, l->power.shift);
		break;
	case NET_DROPOUT:
		dropout_forward(out, gn->mask, in, gn->count, l->dropout.ratio, training, &gr->rng);
		break;
	case NET_LRN:
		lrn_forward(out, gn->lrn_scale, in, &gn->d.lrn);
		break;
	case NET_BATCH_NORM:
		bn_forward(out, gn->w[0], gn->w[1], gn->w[2], gn->bn_mean, gn->bn_invstd, in, &gn->d.bn, training);
		break;
	case NET_SCALE:
		scale_forward(out, in, gn->w[0], gn->d.scale.bias ? gn->w[1] : NULL, &gn->d.scale);
		break;
	case NET_ELTWISE:
		for (int i = 0; i < l->nbottom; i++)
			gn->ins[i] = gr->blob[nd->bottom[i]];
		eltwise_forward(out, gn->argmax, gn->ins, l->nbottom, gn->count, (enum eltwise_op)l->eltwise.op,
				l->eltwise.op == NET_ELTWISE_SUM ? l->eltwise.coeff : NULL);
		break;
	case NET_CONCAT:
		for (int i = 0; i < l->nbottom; i++) {
			gn->ins[i] = gr->blob[nd->bottom[i]];
			gn->cs[i] = (int)gr->g->blob[nd->bottom[i]].shape.dim[1];
		}
		concat_forward(out, gn->ins, gn->cs, l->nbottom, gn->n,
			       (int)(gn->count / ((int64_t)gn->n * gr->g->blob[nd->top[0]].shape.dim[1])));
		break;
	case NET_FLATTEN:
		if (out != in)
			memcpy(out, in, (size_t)gn->count * sizeof(float));
		break;
	case NET_SOFTMAX:
		softmax_forward(out, in, gn->n, gn->c, gn->inner);
		break;
	case NET_SOFTMAX_LOSS:
		out[0] = softmax_loss_forward(gn->prob, in, gr->blob[nd->bottom[1]], gn->n, gn->c, gn->inner,
					      l->loss.has_ignore_label ? l->loss.ignore_label : -1);
		break;
	case NET_ACCURACY:
		out[0] = accuracy_forward(in, gr->blob[nd->bottom[1]], gn->n, gn->c, gn->inner, l->accuracy.top_k,
					  l->accuracy.has_ignore_label ? l->accuracy.ignore_label : -1);
		break;
	default:
		break;
	}
}

float graph_forward(struct graph *gr, int training)
{
	gr->training = training;
	float loss = 0;
	for (int k = 0; k < gr->g->nnode; k++) {
		struct gnode *gn = &gr->node[k];
		node_forward(gr, gn, training);
		if (gn->saved_out) /* a later in-place layer overwrites it */
			memcpy(gn->saved_out, gr->blob[gn->nd->top[0]], (size_t)gn->count * sizeof(float));
		if (gn->nd->loss_weight != 0 && gn->nd->l.ntop)
			loss += gn->nd->loss_weight * gr->blob[gn->nd->top[0]][0];
	}
	return loss;
}

/* ---- backward ---- */

/* A parameter gradient, or NULL when the solver does not want it. */
static float *pgrad(const struct gnode *gn, int i)
{
	return gn->nd->param[i].learned ? gn->dw[i] : NULL;
}

static void node_backward(struct graph *gr, struct gnode *gn)
{
	const struct net_node *nd = gn->nd;
	const struct net_layer *l = &nd->l;
	if (l->type == NET_DATA || l->type == NET_INPUT || l->type == NET_ACCURACY)
		return;
	const float *in = l->nbottom ? gr->blob[nd->bottom[0]] : NULL;
	float *din = l->nbottom ? gr->dblob[nd->bottom[0]] : NULL;
	const float *out = gn->saved_out ? gn->saved_out : l->ntop ? gr->blob[nd->top[0]] : NULL;
	if (gn->saved_in)
		in = gn->saved_in;
	const float *dout = l->ntop ? gr->dblob[nd->top[0]] : NULL;
	if (!dout)
		return;
	if (nd->in_place) {
		if (!din) /* the data itself, changed in place: nothing upstream wants it */
			return;
		memcpy(gr->tmp, dout, (size_t)gn->count * sizeof(float));
		memset(din, 0, (size_t)gn->count * sizeof(float));
		dout = gr->tmp;
		/* the input is gone: Power, LRN, Scale (any that read it) saved it; an
		 * in-place ReLU reads its output, which has the input's sign */
		in = gn->saved_in ? gn->saved_in : out;
	}
	switch (l->type) {
	case NET_CONVOLUTION:
		conv_backward(din, pgrad(gn, 0), gn->d.conv.bias ? pgrad(gn, 1) : NULL, dout, in, gn->w[0],
			      &gn->d.conv);
		break;
	case NET_POOLING:
		pool_backward(din, dout, gn->argmax, &gn->d.pool);
		break;
	case NET_INNER_PRODUCT:
		ip_backward(din, pgrad(gn, 0), gn->d.ip.bias ? pgrad(gn, 1) : NULL, dout, in, gn->w[0], &gn->d.ip);
		break;
	case NET_RELU:
		relu_backward(din, dout, in, gn->count, l->relu.negative_slope);
		break;
	case NET_SIGMOID:
		sigmoid_backward(din, dout, out, gn->count);
		break;
	case NET_TANH:
		tanh_backward(din, dout, out, gn->count);
		break;
	case NET_POWER:
		power_backward(din, dout, in, gn->count, l->power.power, l->power.scale, l->power.shift);
		break;
	case NET_DROPOUT:
		dropout_backward(din, dout, gr->training ? gn->mask : NULL, gn->count, l->dropout.ratio);
		break;
	case NET_LRN:
		lrn_backward(din, dout, out, in, gn->lrn_scale, &gn->d.lrn);
		break;
	case NET_BATCH_NORM:
		bn_backward(din, dout, out, gn->bn_invstd, &gn->d.bn, gn->d.bn.use_global_stats || !gr->training);
		break;
	case NET_SCALE:
		scale_backward(din, pgrad(gn, 0), gn->d.scale.bias ? pgrad(gn, 1) : NULL, dout, in, gn->w[0],
			       &gn->d.scale);
		break;
	case NET_ELTWISE:
		for (int i = 0; i < l->nbottom; i++) {
			gn->ins[i] = gr->blob[nd->bottom[i]];
			gn->dins[i] = gr->dblob[nd->bottom[i]];
		}
		eltwise_backward(gn->dins, dout, gn->ins, out, gn->argmax, l->nbottom, gn->count,
				 (enum eltwise_op)l->eltwise.op, l->eltwise.op == NET_ELTWISE_SUM ? l->eltwise.coeff : NULL);
		break;
	case NET_CONCAT:
		for (int i = 0; i < l->nbottom; i++)
			gn->dins[i] = gr->dblob[nd->bottom[i]];
		concat_backward(gn->dins, dout, gn->cs, l->nbottom, gn->n,
				(int)(gn->count / ((int64_t)gn->n * gr->g->blob[nd->top[0]].shape.dim[1])));
		break;
	case NET_FLATTEN:
		if (din)
			for (int64_t i = 0; i < gn->count; i++)
				din[i] += dout[i];
		break;
	case NET_SOFTMAX:
		softmax_backward(din, dout, out, gn->n, gn->c, gn->inner);
		break;
	case NET_SOFTMAX_LOSS:
		if (din)
			softmax_loss_backward(din, gn->prob, gr->blob[nd->bottom[1]], gn->n, gn->c, gn->inner,
					      l->loss.has_ignore_label ? l->loss.ignore_label : -1, dout[0]);
		break;
	default:
		break;
	}
}

void graph_backward(struct graph *gr)
{
	memset(gr->dacts, 0, (size_t)gr->nacts * sizeof(float));
	for (int k = 0; k < gr->g->nnode; k++) {
		const struct net_node *nd = gr->node[k].nd;
		if (nd->loss_weight != 0 && nd->l.ntop && gr->dblob[nd->top[0]])
			gr->dblob[nd->top[0]][0] = nd->loss_weight;
	}
	for (int k = gr->g->nnode - 1; k >= 0; k--)
		node_backward(gr, &gr->node[k]);
}

void graph_zero_grads(struct graph *gr)
{
	memset(gr->grads, 0, (size_t)gr->nparams * sizeof(float));
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
const struct net_graph *graph_net(const struct graph *gr) { return gr->g; }
