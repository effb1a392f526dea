/* backend_cpu.c — the "cpu" backend: a graph's layers on oneDNN 2.6 (C API, op
 * descriptors), the layers oneDNN cannot match exactly on the reference kernels.
 *
 * Native: Convolution and Deconvolution (group, dilation, optional bias), InnerProduct, Pooling MAX
 * and AVE where oneDNN's windows are Caffe's (see pool_plan), LRN across channels,
 * BatchNorm, ReLU, Sigmoid, TanH, Softmax (axis 1), Crop (a reorder of a sub-memory;
 * see crop_init).  Everything else — and any
 * layer whose size is 0 — is delegated to ref_layer_* (backend_ref.c); the layer's
 * state then only wraps the reference state.
 *
 * Design note.
 *
 * layer_init builds everything once, since a layer's shapes never change: the
 * primitives (forward, backward data, backward weights), and one oneDNN memory
 * object per role (struct cpu_layer's slots) created without a buffer.  forward and
 * backward point each slot at the layer's arrays of the moment
 * (dnnl_memory_set_data_handle, a pointer store) and execute.  The slots are dense
 * plain (nchw, oihw/goihw, x, nc), the arenas' layout, and most primitives work on
 * them in place.  A convolution may instead run in oneDNN's blocked layouts
 * (conv_init says when): each primitive argument whose layout differs from its
 * slot's gets a struct stage, a buffer and a reorder built once, run before the
 * primitive (inputs) or after it (outputs).  A staged buffer lives only while its
 * primitive runs, so all of them are carved from one backend-wide arena (struct
 * cpu_ctx's stage), sized to the largest primitive's need.
 *
 * oneDNN's backward primitives overwrite their outputs, while a backward here ADDS
 * (backend_impl.h).  So each gradient is computed into the backend's shared
 * temporary (struct cpu_ctx's tmp, grown by layer_init to the largest layer's need;
 * layers run one at a time) and then added — except for an in-place layer, whose
 * input gradient the graph has zeroed: there oneDNN writes it directly.
 *
 * BatchNorm's backward must not read its input, which an in-place BatchNorm has
 * overwritten.  It runs oneDNN's backward on the normalised output y with mean 0 and
 * variance 1 - eps, which makes x̂ = y and invstd 1:
 *   tmp = dy - mean(dy) - y·mean(dy·y),
 * and the true 1/std of each channel is applied while adding (dx += tmp·invstd).
 *
 * Invariant: a struct cpu_layer is either delegated (ref is the reference state,
 * possibly NULL) or has every primitive its type needs; nothing is created after
 * layer_init. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "../../common/err.h"
#include "../backend_impl.h"

struct cpu_ctx {
	dnnl_engine_t engine;   /* CPU engine 0 */
	dnnl_stream_t stream;   /* on engine */
	float *tmp;             /* (tmp_count) gradients before they are added */
	size_t tmp_count;
	void *stage;            /* (stage_bytes) staged arguments of the running primitive */
	size_t stage_bytes;
};

/* The memory objects of a layer, one per role; a slot's buffer is set per call,
 * except S_WS, S_MEAN, S_VAR, S_ZERO, S_ONE, which oneDNN allocated. */
enum slot {
	S_SRC,   /* x[0] (forward) or bx (backward) */
	S_DST,   /* y (forward) or by (backward) */
	S_WEI,   /* w[0] */
	S_BIAS,  /* w[1] */
	S_DDST,  /* dy */
	S_DSRC,  /* tmp, or dx[0] when in place */
	S_DWEI,  /* tmp + n_src */
	S_DBIAS, /* tmp + n_src + n_wei */
	S_WS,    /* pooling MAX argmax, LRN scale: forward to backward */
	S_MEAN,  /* BatchNorm: batch mean, or mean_acc/factor */
	S_VAR,   /* BatchNorm: batch variance (biased), or var_acc/factor */
	S_ZERO,  /* BatchNorm backward: mean 0 */
	S_ONE,   /* BatchNorm backward: variance 1 - eps */
	NSLOT
};

#define MAX_ARGS 6

/* A primitive's view of a slot in the layout oneDNN chose for it (a convolution's
 * blocked layouts): its own buffer and the reorder from the slot (an input) or to
 * it (an output). */
struct stage {
	dnnl_memory_t mem;      /* in the primitive's layout, at off in cpu_ctx's stage */
	size_t off;
	dnnl_primitive_t reorder;
	dnnl_exec_arg_t args[2]; /* DNNL_ARG_FROM, DNNL_ARG_TO */
};

/* One primitive and its arguments, bound to slots of its layer, with the reorders
 * that run before (inputs) and after it (outputs). */
struct prim {
	dnnl_primitive_t p;     /* NULL: not built */
	int nargs, npre, npost;
	size_t stage_bytes;     /* its stages together */
	dnnl_exec_arg_t args[MAX_ARGS];
	struct stage pre[MAX_ARGS], post[MAX_ARGS];
};

struct cpu_layer {
	void *ref;              /* delegated: the reference backend's state */
	int delegated;
	dnnl_memory_t mem[NSLOT];
	struct prim fwd;        /* BatchNorm: with batch statistics */
	struct prim fwd_global; /* BatchNorm: with the stored ones */
	struct prim bwd_data;
	struct prim bwd_w;      /* convolution, inner product */
	size_t n_src, n_wei, n_bias; /* floats of x[0] (bottom), w[0], w[1] */
	size_t batch, inner;    /* top as (batch, n_bias, inner): the bias gradient */
	int nc;                 /* BatchNorm's channels */
	size_t plane;           /* BatchNorm: H*W */
	float *invstd;          /* BatchNorm (nc): of the last forward */
};

/* ---- errors -------------------------------------------------------------------- */

static const char *status_name(dnnl_status_t s)
{
	switch (s) {
	case dnnl_out_of_memory: return "out of memory";
	case dnnl_invalid_arguments: return "invalid arguments";
	case dnnl_unimplemented: return "no implementation";
	case dnnl_runtime_error: return "runtime error";
	default: return "failure";
	}
}

static int fail(struct dd_err *err, const struct backend_layer *bl, dnnl_status_t s, const char *what)
{
	int code = s == dnnl_invalid_arguments ? DD_EINVAL : s == dnnl_out_of_memory ? DD_ENOMEM : DD_EINTERNAL;
	return dd_err_set(err, code, "layer '%s': oneDNN could not %s (%s)", bl->l->name, what, status_name(s));
}

#define TRY(call, what)                                      \
	do {                                                 \
		dnnl_status_t s_ = (call);                   \
		if (s_ != dnnl_success) {                    \
			rc = fail(err, bl, s_, what);        \
			goto out;                            \
		}                                            \
	} while (0)

/* ---- building ------------------------------------------------------------------ */

/* The memory of a slot, described by md; the first description of a slot wins
 * (every primitive of a layer agrees on it, the layouts being plain).  With
 * allocate, oneDNN owns a zeroed buffer (the workspace, the statistics). */
static dnnl_status_t slot_make(struct cpu_ctx *cx, struct cpu_layer *st, enum slot k, const dnnl_memory_desc_t *md,
			       int allocate)
{
	if (st->mem[k])
		return dnnl_success;
	dnnl_status_t s = dnnl_memory_create(&st->mem[k], md, cx->engine, allocate ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE);
	if (s != dnnl_success) {
		st->mem[k] = NULL;
		return s;
	}
	if (allocate) {
		void *p = NULL;
		s = dnnl_memory_get_data_handle(st->mem[k], &p);
		if (s == dnnl_success && p)
			memset(p, 0, dnnl_memory_desc_get_size(md));
	}
	return s;
}

static float *slot_data(struct cpu_layer *st, enum slot k)
{
	void *p = NULL;
	return dnnl_memory_get_data_handle(st->mem[k], &p) == dnnl_success ? p : NULL;
}

/* Build pr from op (hint: the forward's descriptor, for a backward op).  *pd gets
 * the primitive descriptor (to be a hint, to be queried); caller destroys it. */
static dnnl_status_t prim_make(struct cpu_ctx *cx, struct prim *pr, const_dnnl_op_desc_t op,
			       const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd)
{
	dnnl_status_t s = dnnl_primitive_desc_create(pd, op, NULL, cx->engine, hint);
	if (s != dnnl_success) {
		*pd = NULL;
		return s;
	}
	s = dnnl_primitive_create(&pr->p, *pd);
	if (s != dnnl_success)
		pr->p = NULL;
	return s;
}

static void prim_arg(struct prim *pr, struct cpu_layer *st, int arg, enum slot k)
{
	pr->args[pr->nargs++] = (dnnl_exec_arg_t){ arg, st->mem[k] };
}

/* Argument arg of pr (built from pd) bound to slot k, through a reorder when the
 * layout pd chose for it is not the slot's plain one. */
static dnnl_status_t prim_arg_staged(struct cpu_ctx *cx, struct prim *pr, struct cpu_layer *st, int arg,
				     enum slot k, const_dnnl_primitive_desc_t pd, int output)
{
	const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
	const dnnl_memory_desc_t *plain = NULL;
	dnnl_primitive_desc_t rpd = NULL;
	dnnl_status_t s = dnnl_memory_get_memory_desc(st->mem[k], &plain);
	if (s != dnnl_success || !want)
		return s != dnnl_success ? s : dnnl_invalid_arguments;
	if (dnnl_memory_desc_equal(want, plain)) {
		prim_arg(pr, st, arg, k);
		return dnnl_success;
	}
	struct stage *sg = output ? &pr->post[pr->npost++] : &pr->pre[pr->npre++];
	sg->off = pr->stage_bytes;
	pr->stage_bytes += (dnnl_memory_desc_get_size(want) + 63) & ~(size_t)63;
	s = dnnl_memory_create(&sg->mem, want, cx->engine, DNNL_MEMORY_NONE);
	if (s != dnnl_success) {
		sg->mem = NULL;
		return s;
	}
	s = output ? dnnl_reorder_primitive_desc_create(&rpd, want, cx->engine, plain, cx->engine, NULL)
		   : dnnl_reorder_primitive_desc_create(&rpd, plain, cx->engine, want, cx->engine, NULL);
	if (s != dnnl_success)
		return s;
	s = dnnl_primitive_create(&sg->reorder, rpd);
	if (s != dnnl_success)
		sg->reorder = NULL;
	dnnl_primitive_desc_destroy(rpd);
	sg->args[0] = (dnnl_exec_arg_t){ DNNL_ARG_FROM, output ? sg->mem : st->mem[k] };
	sg->args[1] = (dnnl_exec_arg_t){ DNNL_ARG_TO, output ? st->mem[k] : sg->mem };
	pr->args[pr->nargs++] = (dnnl_exec_arg_t){ arg, sg->mem };
	return s;
}

/* The plain slots of a layer's input (described by src), output (dst) and their
 * gradients: DD_OK, or the failure, naming the slot after what ("the LRN"). */
static int io_slots(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl,
		    const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, const char *what, struct dd_err *err)
{
	static const struct {
		enum slot k;
		int out;
		const char *name;
	} io[] = { { S_SRC, 0, "input" }, { S_DST, 1, "output" }, { S_DDST, 1, "output gradient" },
		   { S_DSRC, 0, "input gradient" } };
	for (size_t i = 0; i < sizeof io / sizeof io[0]; i++) {
		dnnl_status_t s = slot_make(cx, st, io[i].k, io[i].out ? dst : src, 0);
		if (s != dnnl_success) {
			char msg[96];
			snprintf(msg, sizeof msg, "describe %s %s", what, io[i].name);
			return fail(err, bl, s, msg);
		}
	}
	return DD_OK;
}

static void pd_free(dnnl_primitive_desc_t pd)
{
	if (pd)
		dnnl_primitive_desc_destroy(pd);
}

/* The workspace of a forward pd, if it has one: into S_WS. */
static dnnl_status_t ws_make(struct cpu_ctx *cx, struct cpu_layer *st, const_dnnl_primitive_desc_t pd, int *has)
{
	const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
	*has = md && dnnl_memory_desc_get_size(md) > 0;
	return *has ? slot_make(cx, st, S_WS, md, 1) : dnnl_success;
}

/* Grow the shared stage arena to the staged arguments of st's primitives: DD_OK or
 * DD_ENOMEM.  Its contents need not survive. */
static int stage_need(struct cpu_ctx *cx, const struct cpu_layer *st)
{
	size_t bytes = 0;
	const struct prim *prims[] = { &st->fwd, &st->fwd_global, &st->bwd_data, &st->bwd_w };
	for (int i = 0; i < 4; i++)
		if (prims[i]->stage_bytes > bytes)
			bytes = prims[i]->stage_bytes;
	if (bytes <= cx->stage_bytes)
		return DD_OK;
	void *p = aligned_alloc(64, bytes);
	if (!p)
		return DD_ENOMEM;
	free(cx->stage);
	cx->stage = p;
	cx->stage_bytes = bytes;
	return DD_OK;
}

/* Grow the shared gradient temporary to count floats: DD_OK or DD_ENOMEM. */
static int tmp_need(struct cpu_ctx *cx, size_t count)
{
	if (count <= cx->tmp_count)
		return DD_OK;
	float *p = realloc(cx->tmp, count * sizeof *p);
	if (!p)
		return DD_ENOMEM;
	cx->tmp = p;
	cx->tmp_count = count;
	return DD_OK;
}

/* Convolution and inner product: src, weights, optional bias -> dst; the three
 * primitives from the three op descriptors (fwd, bwd_data, bwd_w). */
static int linear_build(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl,
			const_dnnl_op_desc_t fwd, const_dnnl_op_desc_t bwd_data, const_dnnl_op_desc_t bwd_w,
			const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
			const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, struct dd_err *err)
{
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL;
	int rc = DD_OK;
	TRY(slot_make(cx, st, S_SRC, src, 0), "describe the input");
	TRY(slot_make(cx, st, S_DST, dst, 0), "describe the output");
	TRY(slot_make(cx, st, S_WEI, wei, 0), "describe the weights");
	TRY(slot_make(cx, st, S_DDST, dst, 0), "describe the output gradient");
	TRY(slot_make(cx, st, S_DSRC, src, 0), "describe the input gradient");
	TRY(slot_make(cx, st, S_DWEI, wei, 0), "describe the weights gradient");
	if (bias) {
		TRY(slot_make(cx, st, S_BIAS, bias, 0), "describe the bias");
		TRY(slot_make(cx, st, S_DBIAS, bias, 0), "describe the bias gradient");
	}
	TRY(prim_make(cx, &st->fwd, fwd, NULL, &pd), "create the forward primitive");
	TRY(prim_arg_staged(cx, &st->fwd, st, DNNL_ARG_SRC, S_SRC, pd, 0), "stage the input");
	TRY(prim_arg_staged(cx, &st->fwd, st, DNNL_ARG_WEIGHTS, S_WEI, pd, 0), "stage the weights");
	if (bias)
		TRY(prim_arg_staged(cx, &st->fwd, st, DNNL_ARG_BIAS, S_BIAS, pd, 0), "stage the bias");
	TRY(prim_arg_staged(cx, &st->fwd, st, DNNL_ARG_DST, S_DST, pd, 1), "stage the output");

	TRY(prim_make(cx, &st->bwd_data, bwd_data, pd, &pd2), "create the backward-data primitive");
	TRY(prim_arg_staged(cx, &st->bwd_data, st, DNNL_ARG_DIFF_DST, S_DDST, pd2, 0), "stage the output gradient");
	TRY(prim_arg_staged(cx, &st->bwd_data, st, DNNL_ARG_WEIGHTS, S_WEI, pd2, 0), "stage the weights");
	TRY(prim_arg_staged(cx, &st->bwd_data, st, DNNL_ARG_DIFF_SRC, S_DSRC, pd2, 1), "stage the input gradient");
	dnnl_primitive_desc_destroy(pd2);
	pd2 = NULL;

	TRY(prim_make(cx, &st->bwd_w, bwd_w, pd, &pd2), "create the backward-weights primitive");
	TRY(prim_arg_staged(cx, &st->bwd_w, st, DNNL_ARG_SRC, S_SRC, pd2, 0), "stage the input");
	TRY(prim_arg_staged(cx, &st->bwd_w, st, DNNL_ARG_DIFF_DST, S_DDST, pd2, 0), "stage the output gradient");
	TRY(prim_arg_staged(cx, &st->bwd_w, st, DNNL_ARG_DIFF_WEIGHTS, S_DWEI, pd2, 1), "stage the weights gradient");
	if (bias)
		TRY(prim_arg_staged(cx, &st->bwd_w, st, DNNL_ARG_DIFF_BIAS, S_DBIAS, pd2, 1), "stage the bias gradient");
out:
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* Caffe's convolution: groups as goihw (the bytes of (C_out, C_in/group, kh, kw)),
 * oneDNN's dilation d - 1, right padding equal to the left (oneDNN's floor gives
 * conv_out_size's output).  Caffe's Deconvolution on oneDNN's deconvolution, whose
 * output size and padding are Caffe's too: its weights (C_in, C_out/group, kh, kw)
 * are oneDNN's (C_out, C_in) weights in the iohw (giohw) layout. */
static int conv_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	const struct conv_desc *d = &bl->d.conv;
	int rc = DD_OK, gr = d->group, de = bl->l->type == NET_DECONVOLUTION;
	dnnl_memory_desc_t src, dst, wei, bias;
	dnnl_convolution_desc_t fwd, bwd_data, bwd_w; /* dnnl_deconvolution_desc_t is the same type */
	dnnl_dims_t sd = { d->n, d->c_in, d->h_in, d->w_in }, dd = { d->n, d->c_out, d->h_out, d->w_out };
	dnnl_dims_t bd = { d->c_out }, wd = { d->c_out, d->c_in, d->kh, d->kw };
	dnnl_dims_t gwd = { gr, d->c_out / gr, d->c_in / gr, d->kh, d->kw };
	dnnl_dims_t strides = { d->sh, d->sw }, dil = { d->dh - 1, d->dw - 1 }, pad = { d->ph, d->pw };
	TRY(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_nchw), "describe the convolution input");
	TRY(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_nchw), "describe the convolution output");
	TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_x), "describe the convolution bias");
	TRY(gr == 1 ? dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, de ? dnnl_iohw : dnnl_oihw)
		    : dnnl_memory_desc_init_by_tag(&wei, 5, gwd, dnnl_f32, de ? dnnl_giohw : dnnl_goihw),
	    "describe the convolution weights");
	const dnnl_memory_desc_t *b = d->bias ? &bias : NULL;
	/* oneDNN's blocked layouts (format any; reorders to and from the plain arenas)
	 * beat its plain-layout gemm path where the input has few channels (a first
	 * layer reads nchw directly) or the channels per group fill its 16-wide blocks;
	 * elsewhere the padded blocks and reorders cost more.  Measured forward +
	 * backward, blocked vs plain, AVX-512, 1 thread: LeNet conv1 1.8 vs 2.9 ms,
	 * AlexNet conv1 137 vs 209, conv2 372 vs 587, conv3 262 vs 429, but LeNet conv2
	 * (20 -> 50) 12.6 vs 10.8; 2 threads, primitives alone: AlexNet conv1 68 vs
	 * 187, LeNet conv2 6.7 vs 5.1.  A deconvolution always lets oneDNN choose: its
	 * plain iohw weights have only the reference implementation behind them. */
	int cin = d->c_in / gr, cout = d->c_out / gr;
	dnnl_memory_desc_t asrc = src, awei = wei, adst = dst;
	if (de || cin < 16 || (cin % 16 == 0 && cout % 16 == 0)) {
		TRY(dnnl_memory_desc_init_by_tag(&asrc, 4, sd, dnnl_f32, dnnl_format_tag_any), "describe the convolution input");
		TRY(dnnl_memory_desc_init_by_tag(&adst, 4, dd, dnnl_f32, dnnl_format_tag_any), "describe the convolution output");
		TRY(gr == 1 ? dnnl_memory_desc_init_by_tag(&awei, 4, wd, dnnl_f32, dnnl_format_tag_any)
			    : dnnl_memory_desc_init_by_tag(&awei, 5, gwd, dnnl_f32, dnnl_format_tag_any),
		    "describe the convolution weights");
	}
	if (de) {
		TRY(dnnl_dilated_deconvolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_deconvolution_direct,
								 &asrc, &awei, b, &adst, strides, dil, pad, pad),
		    "describe the deconvolution");
		TRY(dnnl_dilated_deconvolution_backward_data_desc_init(&bwd_data, dnnl_deconvolution_direct, &asrc, &awei,
								       &adst, strides, dil, pad, pad),
		    "describe the deconvolution's backward data");
		TRY(dnnl_dilated_deconvolution_backward_weights_desc_init(&bwd_w, dnnl_deconvolution_direct, &asrc, &awei,
									  b, &adst, strides, dil, pad, pad),
		    "describe the deconvolution's backward weights");
	} else {
		TRY(dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &asrc,
							       &awei, b, &adst, strides, dil, pad, pad),
		    "describe the convolution");
		TRY(dnnl_dilated_convolution_backward_data_desc_init(&bwd_data, dnnl_convolution_direct, &asrc, &awei,
								     &adst, strides, dil, pad, pad),
		    "describe the convolution's backward data");
		TRY(dnnl_dilated_convolution_backward_weights_desc_init(&bwd_w, dnnl_convolution_direct, &asrc, &awei, b,
									&adst, strides, dil, pad, pad),
		    "describe the convolution's backward weights");
	}
	st->n_src = (size_t)d->n * d->c_in * d->h_in * d->w_in;
	st->n_wei = (size_t)d->c_out * (d->c_in / gr) * d->kh * d->kw;
	st->n_bias = d->bias ? (size_t)d->c_out : 0;
	st->batch = (size_t)d->n;
	st->inner = (size_t)d->h_out * d->w_out;
	return linear_build(cx, st, bl, &fwd, &bwd_data, &bwd_w, &src, &wei, b, &dst, err);
out:
	return rc;
}

static int ip_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	const struct ip_desc *d = &bl->d.ip;
	int rc = DD_OK;
	dnnl_memory_desc_t src, dst, wei, bias;
	dnnl_inner_product_desc_t fwd, bwd_data, bwd_w;
	dnnl_dims_t sd = { d->n, d->k }, wd = { d->m, d->k }, dd = { d->n, d->m }, bd = { d->m };
	TRY(dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_f32, dnnl_nc), "describe the inner product input");
	TRY(dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_f32, dnnl_oi), "describe the inner product weights");
	TRY(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_nc), "describe the inner product output");
	TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_x), "describe the inner product bias");
	const dnnl_memory_desc_t *b = d->bias ? &bias : NULL;
	TRY(dnnl_inner_product_forward_desc_init(&fwd, dnnl_forward_training, &src, &wei, b, &dst),
	    "describe the inner product");
	TRY(dnnl_inner_product_backward_data_desc_init(&bwd_data, &src, &wei, &dst),
	    "describe the inner product's backward data");
	TRY(dnnl_inner_product_backward_weights_desc_init(&bwd_w, &src, &wei, b, &dst),
	    "describe the inner product's backward weights");
	st->n_src = (size_t)d->n * d->k;
	st->n_wei = (size_t)d->m * d->k;
	st->n_bias = d->bias ? (size_t)d->m : 0;
	st->batch = (size_t)d->n;
	st->inner = 1;
	return linear_build(cx, st, bl, &fwd, &bwd_data, &bwd_w, &src, &wei, b, &dst, err);
out:
	return rc;
}

/* A pooling oneDNN computes exactly as pool_forward: the windows, oneDNN's
 * algorithm, its right padding (so that its floor rule gives Caffe's ceil-rounded
 * output).  Returns 0 when none does:
 *   - a window holding no input pixel (Caffe without padding, kernel < stride);
 *   - AVE with padding where a window hangs beyond the right padding (Caffe divides
 *     by the window clipped to input + pad: oneDNN's include_padding divides by
 *     the whole kernel).
 * AVE without padding is exclude_padding (the window clipped to the input), with
 * padding inside the padded input include_padding; MAX ignores padding in both. */
struct pool_plan {
	dnnl_dims_t kernel, strides, pad_l, pad_r;
	dnnl_alg_kind_t alg;
};

static int pool_plan(struct pool_plan *pp, const struct pool_desc *d)
{
	int k[2] = { d->kh, d->kw }, s[2] = { d->sh, d->sw }, p[2] = { d->ph, d->pw };
	int in[2] = { d->h_in, d->w_in }, out[2] = { d->h_out, d->w_out };
	if (d->global)
		k[0] = d->h_in, k[1] = d->w_in, s[0] = s[1] = 1, p[0] = p[1] = 0;
	int any_pad = 0;
	for (int i = 0; i < 2; i++) {
		int pr = (out[i] - 1) * s[i] + k[i] - in[i] - p[i];
		if (k[i] <= 0 || s[i] <= 0 || p[i] < 0 || p[i] >= k[i] || pr < 0 || pr >= k[i])
			return 0;
		if ((out[i] - 1) * s[i] - p[i] >= in[i]) /* the last window sees no input */
			return 0;
		if (d->method == POOL_AVE && p[i] > 0 && pr > p[i])
			return 0;
		any_pad |= p[i] > 0;
		pp->kernel[i] = k[i], pp->strides[i] = s[i], pp->pad_l[i] = p[i], pp->pad_r[i] = pr;
	}
	pp->alg = d->method == POOL_MAX ? dnnl_pooling_max
		  : any_pad		? dnnl_pooling_avg_include_padding
					: dnnl_pooling_avg_exclude_padding;
	return 1;
}

static int pool_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct pool_plan *pp,
		     struct dd_err *err)
{
	const struct pool_desc *d = &bl->d.pool;
	int rc = DD_OK, has_ws;
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL;
	dnnl_memory_desc_t src, dst;
	dnnl_pooling_desc_t fwd, bwd;
	dnnl_dims_t sd = { d->n, d->c, d->h_in, d->w_in }, dd = { d->n, d->c, d->h_out, d->w_out };
	TRY(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_nchw), "describe the pooling input");
	TRY(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_nchw), "describe the pooling output");
	TRY(dnnl_pooling_forward_desc_init(&fwd, dnnl_forward_training, pp->alg, &src, &dst, pp->strides, pp->kernel,
					   pp->pad_l, pp->pad_r),
	    "describe the pooling");
	TRY(dnnl_pooling_backward_desc_init(&bwd, pp->alg, &src, &dst, pp->strides, pp->kernel, pp->pad_l, pp->pad_r),
	    "describe the pooling's backward");
	if ((rc = io_slots(cx, st, bl, &src, &dst, "the pooling", err)))
		goto out;
	TRY(prim_make(cx, &st->fwd, &fwd, NULL, &pd), "create the pooling primitive");
	TRY(ws_make(cx, st, pd, &has_ws), "allocate the pooling workspace");
	prim_arg(&st->fwd, st, DNNL_ARG_SRC, S_SRC);
	prim_arg(&st->fwd, st, DNNL_ARG_DST, S_DST);
	if (has_ws)
		prim_arg(&st->fwd, st, DNNL_ARG_WORKSPACE, S_WS);
	TRY(prim_make(cx, &st->bwd_data, &bwd, pd, &pd2), "create the pooling's backward primitive");
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_DST, S_DDST);
	if (has_ws)
		prim_arg(&st->bwd_data, st, DNNL_ARG_WORKSPACE, S_WS);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_SRC, S_DSRC);
	st->n_src = (size_t)d->n * d->c * d->h_in * d->w_in;
out:
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* The forward and backward primitive descriptors of an LRN over tensors of layout
 * tag; on failure both NULL. */
static dnnl_status_t lrn_pds(struct cpu_ctx *cx, const struct lrn_desc *d, dnnl_format_tag_t tag,
			     dnnl_primitive_desc_t *pd, dnnl_primitive_desc_t *pd2)
{
	dnnl_memory_desc_t md;
	dnnl_lrn_desc_t fwd, bwd;
	dnnl_dims_t dims = { d->n, d->c, d->h, d->w };
	*pd = *pd2 = NULL;
	dnnl_status_t s = dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, tag);
	if (s == dnnl_success)
		s = dnnl_lrn_forward_desc_init(&fwd, dnnl_forward_training, dnnl_lrn_across_channels, &md, d->size,
					       d->alpha, d->beta, d->k);
	if (s == dnnl_success)
		s = dnnl_lrn_backward_desc_init(&bwd, dnnl_lrn_across_channels, &md, &md, d->size, d->alpha, d->beta,
						d->k);
	if (s == dnnl_success)
		s = dnnl_primitive_desc_create(pd, &fwd, NULL, cx->engine, NULL);
	if (s == dnnl_success)
		s = dnnl_primitive_desc_create(pd2, &bwd, NULL, cx->engine, *pd);
	if (s != dnnl_success) {
		if (*pd)
			dnnl_primitive_desc_destroy(*pd);
		*pd = *pd2 = NULL;
	}
	return s;
}

/* Is pd's implementation oneDNN's reference loop? */
static int is_ref_impl(const_dnnl_primitive_desc_t pd)
{
	const char *impl = NULL;
	return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
	       strstr(impl, "ref");
}

/* Caffe's LRN across channels is oneDNN's lrn_across_channels: both divide alpha
 * by the window size and treat channels beyond the edges as zeros.  oneDNN's
 * backward for plain nchw is its reference loop (AlexNet's norm1 at batch 32:
 * 530 ms, 2 threads); for 16-channel blocks it has a JIT one, used through staged
 * reorders where it exists. */
static int lrn_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	const struct lrn_desc *d = &bl->d.lrn;
	int rc = DD_OK, has_ws;
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL;
	dnnl_memory_desc_t md;
	dnnl_dims_t dims = { d->n, d->c, d->h, d->w };
	TRY(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nchw), "describe the LRN tensors");
	if ((rc = io_slots(cx, st, bl, &md, &md, "the LRN", err)))
		goto out;
	if (d->c % 16 == 0 && lrn_pds(cx, d, dnnl_nChw16c, &pd, &pd2) == dnnl_success && is_ref_impl(pd2)) {
		dnnl_primitive_desc_destroy(pd2);
		dnnl_primitive_desc_destroy(pd);
		pd = pd2 = NULL;
	}
	if (!pd)
		TRY(lrn_pds(cx, d, dnnl_nchw, &pd, &pd2), "describe the LRN");
	TRY(dnnl_primitive_create(&st->fwd.p, pd), "create the LRN primitive");
	TRY(ws_make(cx, st, pd, &has_ws), "allocate the LRN workspace");
	TRY(prim_arg_staged(cx, &st->fwd, st, DNNL_ARG_SRC, S_SRC, pd, 0), "stage the LRN input");
	TRY(prim_arg_staged(cx, &st->fwd, st, DNNL_ARG_DST, S_DST, pd, 1), "stage the LRN output");
	if (has_ws)
		prim_arg(&st->fwd, st, DNNL_ARG_WORKSPACE, S_WS);
	TRY(dnnl_primitive_create(&st->bwd_data.p, pd2), "create the LRN's backward primitive");
	TRY(prim_arg_staged(cx, &st->bwd_data, st, DNNL_ARG_SRC, S_SRC, pd2, 0), "stage the LRN input");
	TRY(prim_arg_staged(cx, &st->bwd_data, st, DNNL_ARG_DIFF_DST, S_DDST, pd2, 0), "stage the LRN output gradient");
	if (has_ws)
		prim_arg(&st->bwd_data, st, DNNL_ARG_WORKSPACE, S_WS);
	TRY(prim_arg_staged(cx, &st->bwd_data, st, DNNL_ARG_DIFF_SRC, S_DSRC, pd2, 1), "stage the LRN input gradient");
	st->n_src = (size_t)d->n * d->c * d->h * d->w;
out:
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* BatchNorm without scale and shift: forward with batch statistics (S_MEAN, S_VAR
 * out) and with the stored ones (S_MEAN, S_VAR in); the backward of the file
 * header (mean S_ZERO, variance S_ONE, src = the output). */
static int bn_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	const struct bn_desc *d = &bl->d.bn;
	int rc = DD_OK;
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL, pd3 = NULL;
	dnnl_memory_desc_t md, cmd;
	dnnl_batch_normalization_desc_t fwd, fwd_global, bwd;
	dnnl_dims_t dims = { d->n, d->c, d->h, d->w }, cdims = { d->c };
	TRY(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nchw), "describe the batch norm tensors");
	TRY(dnnl_memory_desc_init_by_tag(&cmd, 1, cdims, dnnl_f32, dnnl_x), "describe the batch norm statistics");
	TRY(dnnl_batch_normalization_forward_desc_init(&fwd, dnnl_forward_training, &md, d->eps, 0),
	    "describe the batch norm");
	TRY(dnnl_batch_normalization_forward_desc_init(&fwd_global, dnnl_forward_training, &md, d->eps,
						       dnnl_use_global_stats),
	    "describe the batch norm with stored statistics");
	TRY(dnnl_batch_normalization_backward_desc_init(&bwd, dnnl_backward_data, &md, &md, d->eps, 0),
	    "describe the batch norm's backward");
	if ((rc = io_slots(cx, st, bl, &md, &md, "the batch norm", err)))
		goto out;
	for (enum slot k = S_MEAN; k <= S_ONE; k++)
		TRY(slot_make(cx, st, k, &cmd, 1), "allocate the batch norm statistics");
	float *one = slot_data(st, S_ONE);
	st->invstd = calloc((size_t)d->c, sizeof *st->invstd);
	if (!one || !st->invstd) {
		rc = dd_err_set(err, DD_ENOMEM, "layer '%s': out of memory for the batch norm statistics", bl->l->name);
		goto out;
	}
	for (int c = 0; c < d->c; c++)
		one[c] = 1.0f - d->eps;

	TRY(prim_make(cx, &st->fwd, &fwd, NULL, &pd), "create the batch norm primitive");
	prim_arg(&st->fwd, st, DNNL_ARG_SRC, S_SRC);
	prim_arg(&st->fwd, st, DNNL_ARG_DST, S_DST);
	prim_arg(&st->fwd, st, DNNL_ARG_MEAN, S_MEAN);
	prim_arg(&st->fwd, st, DNNL_ARG_VARIANCE, S_VAR);
	TRY(prim_make(cx, &st->fwd_global, &fwd_global, NULL, &pd2), "create the batch norm primitive");
	prim_arg(&st->fwd_global, st, DNNL_ARG_SRC, S_SRC);
	prim_arg(&st->fwd_global, st, DNNL_ARG_DST, S_DST);
	prim_arg(&st->fwd_global, st, DNNL_ARG_MEAN, S_MEAN);
	prim_arg(&st->fwd_global, st, DNNL_ARG_VARIANCE, S_VAR);
	TRY(prim_make(cx, &st->bwd_data, &bwd, pd, &pd3), "create the batch norm's backward primitive");
	prim_arg(&st->bwd_data, st, DNNL_ARG_SRC, S_DST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_MEAN, S_ZERO);
	prim_arg(&st->bwd_data, st, DNNL_ARG_VARIANCE, S_ONE);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_DST, S_DDST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_SRC, S_DSRC);
	st->nc = d->c;
	st->plane = (size_t)d->h * d->w;
	st->batch = (size_t)d->n;
	st->n_src = (size_t)d->n * d->c * st->plane;
out:
	pd_free(pd3);
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* ReLU, Sigmoid, TanH over `count` values.  ReLU's backward reads its output
 * (which an in-place ReLU leaves) when the slope is not negative — the output's
 * sign is then the input's, and at 0 both take the slope; Sigmoid and TanH always
 * read the output. */
static int eltwise_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	int rc = DD_OK, use_src = 0;
	float alpha = 0.0f;
	dnnl_alg_kind_t fa, ba;
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL;
	dnnl_memory_desc_t md;
	dnnl_eltwise_desc_t fwd, bwd;
	dnnl_dims_t dims = { bl->count };
	switch (bl->l->type) {
	case NET_RELU:
		alpha = bl->l->relu.negative_slope;
		fa = dnnl_eltwise_relu;
		use_src = alpha < 0;
		ba = use_src ? dnnl_eltwise_relu : dnnl_eltwise_relu_use_dst_for_bwd;
		break;
	case NET_SIGMOID:
		fa = dnnl_eltwise_logistic, ba = dnnl_eltwise_logistic_use_dst_for_bwd;
		break;
	default:
		fa = dnnl_eltwise_tanh, ba = dnnl_eltwise_tanh_use_dst_for_bwd;
		break;
	}
	TRY(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_f32, dnnl_a), "describe the activation's tensors");
	TRY(dnnl_eltwise_forward_desc_init(&fwd, dnnl_forward_training, fa, &md, alpha, 0.0f), "describe the activation");
	TRY(dnnl_eltwise_backward_desc_init(&bwd, ba, &md, &md, alpha, 0.0f), "describe the activation's backward");
	if ((rc = io_slots(cx, st, bl, &md, &md, "the activation's", err)))
		goto out;
	TRY(prim_make(cx, &st->fwd, &fwd, NULL, &pd), "create the activation primitive");
	prim_arg(&st->fwd, st, DNNL_ARG_SRC, S_SRC);
	prim_arg(&st->fwd, st, DNNL_ARG_DST, S_DST);
	TRY(prim_make(cx, &st->bwd_data, &bwd, pd, &pd2), "create the activation's backward primitive");
	prim_arg(&st->bwd_data, st, use_src ? DNNL_ARG_SRC : DNNL_ARG_DST, use_src ? S_SRC : S_DST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_DST, S_DDST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_SRC, S_DSRC);
	st->n_src = (size_t)bl->count;
out:
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* Softmax over axis 1 of (N, C, inner). */
static int softmax_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	int rc = DD_OK;
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL;
	dnnl_memory_desc_t md;
	dnnl_softmax_desc_t fwd, bwd;
	dnnl_dims_t dims = { bl->n, bl->c, bl->inner };
	TRY(dnnl_memory_desc_init_by_tag(&md, 3, dims, dnnl_f32, dnnl_abc), "describe the softmax tensors");
	TRY(dnnl_softmax_forward_desc_init(&fwd, dnnl_forward_training, &md, 1), "describe the softmax");
	TRY(dnnl_softmax_backward_desc_init(&bwd, &md, &md, 1), "describe the softmax's backward");
	if ((rc = io_slots(cx, st, bl, &md, &md, "the softmax", err)))
		goto out;
	TRY(prim_make(cx, &st->fwd, &fwd, NULL, &pd), "create the softmax primitive");
	prim_arg(&st->fwd, st, DNNL_ARG_SRC, S_SRC);
	prim_arg(&st->fwd, st, DNNL_ARG_DST, S_DST);
	TRY(prim_make(cx, &st->bwd_data, &bwd, pd, &pd2), "create the softmax's backward primitive");
	prim_arg(&st->bwd_data, st, DNNL_ARG_DST, S_DST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_DST, S_DDST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_DIFF_SRC, S_DSRC);
	st->n_src = (size_t)bl->count;
out:
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* Crop: a reorder from the window of the input (a sub-memory of its plain layout,
 * at the offsets) to the dense output.  The backward reorders the output gradient
 * into the same window of dx[0] with a sum post-op: it adds, as backend_impl.h
 * wants, and leaves the rest of dx[0] as it was (its gradient is 0), with no tmp. */
static int crop_init(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	static const dnnl_format_tag_t tags[] = { dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd };
	const struct crop_desc *d = &bl->d.crop;
	int rc = DD_OK;
	dnnl_primitive_desc_t pd = NULL, pd2 = NULL;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_memory_desc_t in_md, win_md, out_md;
	dnnl_dims_t in, out, off;
	if (d->ndim < 1 || d->ndim > 4)
		return dd_err_set(err, DD_EINTERNAL, "layer '%s': a crop of %d axes", bl->l->name, d->ndim);
	for (int a = 0; a < d->ndim; a++)
		in[a] = d->in[a], out[a] = d->out[a], off[a] = d->off[a];
	TRY(dnnl_memory_desc_init_by_tag(&in_md, d->ndim, in, dnnl_f32, tags[d->ndim - 1]), "describe the crop's input");
	TRY(dnnl_memory_desc_init_submemory(&win_md, &in_md, out, off), "describe the crop window");
	TRY(dnnl_memory_desc_init_by_tag(&out_md, d->ndim, out, dnnl_f32, tags[d->ndim - 1]), "describe the crop's output");
	if ((rc = io_slots(cx, st, bl, &win_md, &out_md, "the crop", err)))
		goto out;
	TRY(dnnl_reorder_primitive_desc_create(&pd, &win_md, cx->engine, &out_md, cx->engine, NULL),
	    "describe the crop");
	TRY(dnnl_primitive_create(&st->fwd.p, pd), "create the crop primitive");
	prim_arg(&st->fwd, st, DNNL_ARG_FROM, S_SRC);
	prim_arg(&st->fwd, st, DNNL_ARG_TO, S_DST);
	TRY(dnnl_post_ops_create(&po), "describe the crop's backward");
	TRY(dnnl_post_ops_append_sum(po, 1.0f), "describe the crop's backward");
	TRY(dnnl_primitive_attr_create(&attr), "describe the crop's backward");
	TRY(dnnl_primitive_attr_set_post_ops(attr, po), "describe the crop's backward");
	TRY(dnnl_reorder_primitive_desc_create(&pd2, &out_md, cx->engine, &win_md, cx->engine, attr),
	    "describe the crop's backward");
	TRY(dnnl_primitive_create(&st->bwd_data.p, pd2), "create the crop's backward primitive");
	prim_arg(&st->bwd_data, st, DNNL_ARG_FROM, S_DDST);
	prim_arg(&st->bwd_data, st, DNNL_ARG_TO, S_DSRC);
out:
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (po)
		dnnl_post_ops_destroy(po);
	pd_free(pd2);
	pd_free(pd);
	return rc;
}

/* ---- the vtable ------------------------------------------------------------------ */

static void cpu_layer_fini(struct backend *be, void *state)
{
	struct cpu_layer *st = state;
	if (!st)
		return;
	if (st->delegated)
		ref_layer_fini(be, st->ref);
	struct prim *prims[] = { &st->fwd, &st->fwd_global, &st->bwd_data, &st->bwd_w };
	for (int i = 3; i >= 0; i--) {
		struct prim *pr = prims[i];
		for (int j = 0; j < pr->npre + pr->npost; j++) {
			struct stage *sg = j < pr->npre ? &pr->pre[j] : &pr->post[j - pr->npre];
			if (sg->reorder)
				dnnl_primitive_destroy(sg->reorder);
			if (sg->mem)
				dnnl_memory_destroy(sg->mem);
		}
		if (pr->p)
			dnnl_primitive_destroy(pr->p);
	}
	for (int k = NSLOT - 1; k >= 0; k--)
		if (st->mem[k])
			dnnl_memory_destroy(st->mem[k]);
	free(st->invstd);
	free(st);
}

/* Is this layer native, given its sizes?  (*pp filled for a pooling.) */
static int native(const struct backend_layer *bl, struct pool_plan *pp)
{
	if (bl->count <= 0 || (bl->nbottom > 0 && bl->n <= 0))
		return 0;
	switch (bl->l->type) {
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION:
	case NET_INNER_PRODUCT:
	case NET_LRN:
	case NET_BATCH_NORM:
	case NET_RELU:
	case NET_SIGMOID:
	case NET_TANH:
	case NET_SOFTMAX:
	case NET_CROP:
		return 1;
	case NET_POOLING:
		return pool_plan(pp, &bl->d.pool);
	default:
		return 0;
	}
}

static int cpu_layer_init(struct backend *be, const struct backend_layer *bl, void **state, struct dd_err *err)
{
	struct cpu_ctx *cx = be->ctx;
	struct pool_plan pp;
	int rc;
	struct cpu_layer *st = calloc(1, sizeof *st);
	if (!st)
		return dd_err_set(err, DD_ENOMEM, "layer '%s': out of memory for its state", bl->l->name);
	if (!native(bl, &pp)) {
		st->delegated = 1;
		rc = ref_layer_init(be, bl, &st->ref, err);
		if (rc != DD_OK)
			st->delegated = 0; /* nothing to finish */
		goto done;
	}
	switch (bl->l->type) {
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION: rc = conv_init(cx, st, bl, err); break;
	case NET_INNER_PRODUCT: rc = ip_init(cx, st, bl, err); break;
	case NET_POOLING: rc = pool_init(cx, st, bl, &pp, err); break;
	case NET_LRN: rc = lrn_init(cx, st, bl, err); break;
	case NET_BATCH_NORM: rc = bn_init(cx, st, bl, err); break;
	case NET_SOFTMAX: rc = softmax_init(cx, st, bl, err); break;
	case NET_CROP: rc = crop_init(cx, st, bl, err); break;
	default: rc = eltwise_init(cx, st, bl, err); break;
	}
	if (rc == DD_OK && (tmp_need(cx, st->n_src + st->n_wei + st->n_bias) != DD_OK ||
			    stage_need(cx, st) != DD_OK))
		rc = dd_err_set(err, DD_ENOMEM, "layer '%s': out of memory for its gradient and staging buffers",
				bl->l->name);
done:
	if (rc != DD_OK) {
		cpu_layer_fini(be, st);
		return rc;
	}
	*state = st;
	return DD_OK;
}

/* Point slot k at p (oneDNN's handle is not const; inputs are only read). */
static dnnl_status_t bind(struct cpu_layer *st, enum slot k, const void *p)
{
	return dnnl_memory_set_data_handle(st->mem[k], (void *)p);
}

static dnnl_status_t exec(struct cpu_ctx *cx, const struct prim *pr)
{
	dnnl_status_t s = dnnl_success;
	for (int i = 0; i < pr->npre + pr->npost && s == dnnl_success; i++) {
		const struct stage *sg = i < pr->npre ? &pr->pre[i] : &pr->post[i - pr->npre];
		s = dnnl_memory_set_data_handle(sg->mem, (char *)cx->stage + sg->off);
	}
	for (int i = 0; i < pr->npre && s == dnnl_success; i++)
		s = dnnl_primitive_execute(pr->pre[i].reorder, cx->stream, 2, pr->pre[i].args);
	if (s == dnnl_success)
		s = dnnl_primitive_execute(pr->p, cx->stream, pr->nargs, pr->args);
	for (int i = 0; i < pr->npost && s == dnnl_success; i++)
		s = dnnl_primitive_execute(pr->post[i].reorder, cx->stream, 2, pr->post[i].args);
	return s;
}

static void add_into(float *dst, const float *src, size_t count)
{
	for (size_t i = 0; i < count; i++)
		dst[i] += src[i];
}

/* db[c] += Σ_{n, p} dy[n, c, p] — cheaper than the weights primitive when only
 * the bias gradient is wanted. */
static void bias_grad(float *db, const float *dy, const struct cpu_layer *st)
{
	for (size_t c = 0; c < st->n_bias; c++) {
		double acc = 0.0;
		for (size_t n = 0; n < st->batch; n++) {
			const float *g = dy + (n * st->n_bias + c) * st->inner; /* (inner) */
			for (size_t p = 0; p < st->inner; p++)
				acc += g[p];
		}
		db[c] += (float)acc;
	}
}

/* Caffe's running statistics from the batch's (S_MEAN, S_VAR: biased variance),
 * as bn_forward; and 1/std for the backward. */
static void bn_update(struct cpu_layer *st, const struct backend_layer *bl)
{
	const struct bn_desc *d = &bl->d.bn;
	const float *mean = slot_data(st, S_MEAN), *var = slot_data(st, S_VAR);
	double m = (double)st->batch * st->plane;
	double correction = m > 1 ? m / (m - 1) : 1.0;
	float maf = d->moving_average_fraction;
	for (int c = 0; c < st->nc; c++) {
		bl->w[0][c] = (float)(maf * bl->w[0][c] + mean[c]);
		bl->w[1][c] = (float)(maf * bl->w[1][c] + correction * var[c]);
		st->invstd[c] = (float)(1.0 / sqrt((double)var[c] + d->eps));
	}
	bl->w[2][0] = maf * bl->w[2][0] + 1.0f;
}

/* The stored statistics into S_MEAN, S_VAR (mean_acc/factor, var_acc/factor; 0 when
 * factor is 0), as bn_forward. */
static void bn_global(struct cpu_layer *st, const struct backend_layer *bl)
{
	float *mean = slot_data(st, S_MEAN), *var = slot_data(st, S_VAR);
	double s = bl->w[2][0] == 0.0f ? 0.0 : 1.0 / bl->w[2][0];
	for (int c = 0; c < st->nc; c++) {
		mean[c] = (float)(s * bl->w[0][c]);
		var[c] = (float)(s * bl->w[1][c]);
		st->invstd[c] = (float)(1.0 / sqrt((double)var[c] + bl->d.bn.eps));
	}
}

static int cpu_forward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		       struct dd_err *err)
{
	struct cpu_ctx *cx = be->ctx;
	struct cpu_layer *st = state;
	int rc = DD_OK;
	if (st->delegated)
		return ref_layer_forward(be, st->ref, bl, training, err);
	enum net_layer_type t = bl->l->type;
	/* oneDNN's LRN reads neighbouring channels it may already have written */
	float *y = t == NET_LRN && bl->in_place ? cx->tmp : bl->y;
	TRY(bind(st, S_SRC, bl->x[0]), "bind the input");
	TRY(bind(st, S_DST, y), "bind the output");
	if (t == NET_CONVOLUTION || t == NET_DECONVOLUTION || t == NET_INNER_PRODUCT) {
		TRY(bind(st, S_WEI, bl->w[0]), "bind the weights");
		if (st->n_bias)
			TRY(bind(st, S_BIAS, bl->w[1]), "bind the bias");
	}
	if (t == NET_BATCH_NORM && (bl->d.bn.use_global_stats || !training)) {
		bn_global(st, bl);
		TRY(exec(cx, &st->fwd_global), "run the forward");
	} else {
		TRY(exec(cx, &st->fwd), "run the forward");
	}
	TRY(dnnl_stream_wait(cx->stream), "finish the forward");
	if (y != bl->y)
		memcpy(bl->y, y, (size_t)bl->count * sizeof *y);
	if (t == NET_BATCH_NORM && !(bl->d.bn.use_global_stats || !training))
		bn_update(st, bl);
out:
	return rc;
}

/* dx[0] += the input gradient of the layer's one backward-data primitive (tmp
 * unless in place), for pooling, LRN, the activations and softmax. */
static int data_backward(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, float *dx,
			 struct dd_err *err)
{
	int rc = DD_OK;
	float *into = bl->in_place ? dx : cx->tmp;
	TRY(bind(st, S_SRC, bl->bx), "bind the input");
	TRY(bind(st, S_DST, bl->by), "bind the output");
	TRY(bind(st, S_DDST, bl->dy), "bind the output gradient");
	TRY(bind(st, S_DSRC, into), "bind the input gradient");
	TRY(exec(cx, &st->bwd_data), "run the backward");
	TRY(dnnl_stream_wait(cx->stream), "finish the backward");
	if (bl->l->type == NET_BATCH_NORM) {
		/* into = dy - mean(dy) - y·mean(dy·y); dx += into · invstd (see the header) */
		for (size_t n = 0; n < st->batch; n++)
			for (int c = 0; c < st->nc; c++) {
				size_t at = (n * st->nc + c) * st->plane;
				float s = st->invstd[c];
				for (size_t p = 0; p < st->plane; p++)
					dx[at + p] = (into == dx ? 0.0f : dx[at + p]) + into[at + p] * s;
			}
	} else if (into != dx) {
		add_into(dx, into, st->n_src);
	}
out:
	return rc;
}

/* Crop: dx's window += dy, by the reorder with a sum post-op (crop_init). */
static int crop_backward_dnnl(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl, float *dx,
			      struct dd_err *err)
{
	int rc = DD_OK;
	TRY(bind(st, S_DDST, bl->dy), "bind the output gradient");
	TRY(bind(st, S_DSRC, dx), "bind the input gradient");
	TRY(exec(cx, &st->bwd_data), "run the backward");
	TRY(dnnl_stream_wait(cx->stream), "finish the backward");
out:
	return rc;
}

/* BatchNorm with the stored statistics: dx += dy · invstd. */
static void bn_backward_global(struct cpu_layer *st, const struct backend_layer *bl, float *dx)
{
	for (size_t n = 0; n < st->batch; n++)
		for (int c = 0; c < st->nc; c++) {
			size_t at = (n * st->nc + c) * st->plane;
			float s = st->invstd[c];
			for (size_t p = 0; p < st->plane; p++)
				dx[at + p] += bl->dy[at + p] * s;
		}
}

/* Convolution, deconvolution and inner product: both primitives run before anything is added. */
static int linear_backward(struct cpu_ctx *cx, struct cpu_layer *st, const struct backend_layer *bl,
			   struct dd_err *err)
{
	int rc = DD_OK;
	float *dx = bl->dx[0], *dw = bl->dw[0], *db = st->n_bias ? bl->dw[1] : NULL;
	float *tdx = cx->tmp, *tdw = cx->tmp + st->n_src, *tdb = tdw + st->n_wei;
	if (dx || dw) {
		TRY(bind(st, S_DDST, bl->dy), "bind the output gradient");
		TRY(bind(st, S_WEI, bl->w[0]), "bind the weights");
	}
	if (dx) {
		TRY(bind(st, S_DSRC, tdx), "bind the input gradient");
		TRY(exec(cx, &st->bwd_data), "run the backward data");
	}
	if (dw) {
		TRY(bind(st, S_SRC, bl->bx), "bind the input");
		TRY(bind(st, S_DWEI, tdw), "bind the weights gradient");
		if (st->n_bias)
			TRY(bind(st, S_DBIAS, tdb), "bind the bias gradient");
		TRY(exec(cx, &st->bwd_w), "run the backward weights");
	}
	TRY(dnnl_stream_wait(cx->stream), "finish the backward");
	if (dx)
		add_into(dx, tdx, st->n_src);
	if (dw)
		add_into(dw, tdw, st->n_wei);
	if (db && dw)
		add_into(db, tdb, st->n_bias);
	else if (db)
		bias_grad(db, bl->dy, st);
out:
	return rc;
}

static int cpu_backward(struct backend *be, void *state, const struct backend_layer *bl, int training,
			struct dd_err *err)
{
	struct cpu_ctx *cx = be->ctx;
	struct cpu_layer *st = state;
	if (st->delegated)
		return ref_layer_backward(be, st->ref, bl, training, err);
	enum net_layer_type t = bl->l->type;
	if (t == NET_CONVOLUTION || t == NET_DECONVOLUTION || t == NET_INNER_PRODUCT)
		return linear_backward(cx, st, bl, err);
	float *dx = bl->dx[0];
	if (!dx)
		return DD_OK;
	if (t == NET_CROP)
		return crop_backward_dnnl(cx, st, bl, dx, err);
	if (t == NET_BATCH_NORM && (bl->d.bn.use_global_stats || !training)) {
		bn_backward_global(st, bl, dx);
		return DD_OK;
	}
	return data_backward(cx, st, bl, dx, err);
}

static int cpu_supports(struct backend *be, const struct net_layer *l)
{
	return l->type < NET_LAYER_TYPE_COUNT;
}

/* Zeroed, 64-byte aligned (oneDNN's kernels prefer it). */
static void *cpu_alloc(struct backend *be, size_t bytes)
{
	size_t n = (bytes + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, n ? n : 64);
	if (p)
		memset(p, 0, n ? n : 64);
	return p;
}

static void cpu_free(struct backend *be, void *p)
{
	free(p);
}

static void cpu_destroy(struct backend *be)
{
	if (!be)
		return;
	struct cpu_ctx *cx = be->ctx;
	if (cx) {
		free(cx->stage);
		free(cx->tmp);
		if (cx->stream)
			dnnl_stream_destroy(cx->stream);
		if (cx->engine)
			dnnl_engine_destroy(cx->engine);
		free(cx);
	}
	free(be);
}

static const struct backend_ops cpu_ops = {
	.api_version = BACKEND_API_VERSION,
	.name = "cpu",
	.destroy = cpu_destroy,
	.supports = cpu_supports,
	.layer_init = cpu_layer_init,
	.layer_fini = cpu_layer_fini,
	.forward = cpu_forward,
	.backward = cpu_backward,
	.alloc = cpu_alloc,
	.free = cpu_free,
};

int backend_cpu_create(struct backend **out, struct dd_err *err)
{
	*out = NULL;
	struct backend *be = calloc(1, sizeof *be);
	struct cpu_ctx *cx = calloc(1, sizeof *cx);
	if (!be || !cx) {
		free(cx);
		free(be);
		return dd_err_set(err, DD_ENOMEM, "out of memory for the cpu backend");
	}
	be->ops = &cpu_ops;
	be->ctx = cx;
	if (dnnl_engine_create(&cx->engine, dnnl_cpu, 0) != dnnl_success) {
		cx->engine = NULL;
		cpu_destroy(be);
		return dd_err_set(err, DD_EINTERNAL, "the cpu backend: oneDNN has no CPU engine");
	}
	if (dnnl_stream_create(&cx->stream, cx->engine, dnnl_stream_default_flags) != dnnl_success) {
		cx->stream = NULL;
		cpu_destroy(be);
		return dd_err_set(err, DD_EINTERNAL, "the cpu backend: oneDNN could not create a stream");
	}
	*out = be;
	return DD_OK;
}
