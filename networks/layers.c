/* layers.c — every layer type deepdesk knows, one row each (net_layer_types[]),
 * with what is particular to it: its parameter messages as field descriptors (name,
 * kind, offset, bounds, default) and their cross-field checks, and its shape rule.
 *
 * Adding a type: its enum value and param struct in net.h, its row here (the
 * _Static_assert below fails without one; test_net checks each row has a name), its
 * kernels in ref.c and the switches over the type in backend_ref.c, graph.c and
 * netprint.c (none has a default:, so -Wswitch names each), each backend's support,
 * its tests.  The generic machinery (the readers, parse_msg, instantiation) is
 * net.c's; net_impl.h is what the two share. */
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "net_impl.h"

/* ---- messages ------------------------------------------------------------------------ */

/* Resolve to (h, w); def when nothing was given.  Returns 1 if anything was.
 * rep is the repeated field's name ("kernel_size"), base the _h/_w fields' ("kernel"). */
static int axes_get(struct pc *c, const char *rep, const char *base, const struct axes *a, int def, int *h, int *w,
		    int *rc)
{
	*rc = DD_OK;
	if (a->n && (a->has_h || a->has_w)) {
		*rc = net_perr(c, a->first->line, a->first->col, "%s: give %s or %s_h and %s_w, not both", c->where,
			       rep, base, base);
		return 0;
	}
	if (a->n) {
		*h = a->v[0];
		*w = a->n == 2 ? a->v[1] : a->v[0];
		return 1;
	}
	*h = a->has_h ? a->h : def;
	*w = a->has_w ? a->w : def;
	return a->has_h || a->has_w;
}

/* Field descriptors, by kind.  T is the message's struct, M the member. */
#define D_INT(n, T, M, lo, hi, d) { .name = n, .kind = F_INT, .off = offsetof(T, M), .min = lo, .max = hi, .def = d }
#define D_FLOAT(n, T, M, lo, hi, d) { .name = n, .kind = F_FLOAT, .off = offsetof(T, M), .min = lo, .max = hi, .def = d }
#define D_ANY_FLOAT(n, T, M, d) D_FLOAT(n, T, M, -FLT_MAX, FLT_MAX, d)
#define D_BOOL(n, T, M, d) { .name = n, .kind = F_BOOL, .off = offsetof(T, M), .def = d }
#define D_ENUM(n, T, M, list, d) \
	{ .name = n, .kind = F_ENUM, .off = offsetof(T, M), .names = list, .nnames = sizeof list / sizeof *list, .def = d }
#define D_FILLER(n, T, M) { .name = n, .kind = F_MSG, .off = offsetof(T, M), .sub = &filler_msg }
#define D_AXES(n, b, s, rep, lo, T, H, W, d)                                                                 \
	{ .name = n, .kind = F_AXES, .base = b, .slot = s, .repeated = rep, .min = lo, .max = MAX_KERNEL,          \
	  .off = offsetof(T, H), .cnt = offsetof(T, W), .def = d }
/* read and checked, not kept */
#define D_IGNORED_ENUM(n, list) { .name = n, .kind = F_ENUM, .off = NOWHERE, .names = list, .nnames = sizeof list / sizeof *list }
#define D_ENGINE D_IGNORED_ENUM("engine", engines) /* a backend hint: the backend decides */
#define D_IGNORED_BOOL(n) { .name = n, .kind = F_BOOL, .off = NOWHERE }
/* an int Caffe allows to vary that deepdesk takes only as 1 */
#define D_ONLY_1(n, msg) { .name = n, .kind = F_INT, .off = NOWHERE, .min = INT32_MIN, .max = INT32_MAX, .want = 1, .only = msg }
#define FIELDS(a) .field = a, .nfield = sizeof a / sizeof *a

static const char *const engines[] = { "DEFAULT", "CAFFE", "CUDNN" };

/* FillerParameter; defaults constant 0, uniform [0, 1], gaussian (0, 1), FAN_IN.
 * "bilinear" (Caffe's, graph.c) fills 4-axis weights only: net_add_param says so. */
static const char *const filler_types[] = { "constant", "uniform", "gaussian", "xavier", "msra", "bilinear" };
static const char *const variance_norms[] = { "FAN_IN", "FAN_OUT", "AVERAGE" };

static int filler_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	const struct net_filler *f = param;
	(void)ax;
	if (f->type == NET_FILLER_UNIFORM && f->min > f->max)
		return net_perr(c, m->line, m->col, "%s: uniform min %g is above max %g", c->where, f->min, f->max);
	return DD_OK;
}

static const struct field filler_fields[] = {
	{ .name = "type", .kind = F_NAMED, .off = offsetof(struct net_filler, type), .names = filler_types,
	  .nnames = sizeof filler_types / sizeof *filler_types, .noun = "filler", .def = NET_FILLER_CONSTANT },
	D_ANY_FLOAT("value", struct net_filler, value, 0),
	D_ANY_FLOAT("min", struct net_filler, min, 0),
	D_ANY_FLOAT("max", struct net_filler, max, 1),
	D_ANY_FLOAT("mean", struct net_filler, mean, 0),
	D_FLOAT("std", struct net_filler, std, 0, FLT_MAX, 1),
	D_ENUM("variance_norm", struct net_filler, variance_norm, variance_norms, NET_FAN_IN),
};
static const struct pmsg filler_msg = { "filler", sizeof(struct net_filler), FIELDS(filler_fields), .check = filler_check };

/* NetStateRule (include, exclude) */
static const char *const phases[] = { "TRAIN", "TEST" };
static const struct field rule_fields[] = {
	D_ENUM("phase", struct net_rule, phase, phases, -1),
	D_INT("min_level", struct net_rule, min_level, INT32_MIN, INT32_MAX, INT32_MIN),
	D_INT("max_level", struct net_rule, max_level, INT32_MIN, INT32_MAX, INT32_MAX),
	{ .name = "stage", .kind = F_STRINGS, .off = offsetof(struct net_rule, stage), .cnt = offsetof(struct net_rule, nstage) },
	{ .name = "not_stage", .kind = F_STRINGS, .off = offsetof(struct net_rule, not_stage),
	  .cnt = offsetof(struct net_rule, nnot_stage) },
};
const struct pmsg net_rule_msg = { "rule", sizeof(struct net_rule), FIELDS(rule_fields) };

/* ParamSpec (a layer's param { lr_mult decay_mult }) */
static const struct field param_spec_fields[] = {
	D_ANY_FLOAT("lr_mult", struct net_param_spec, lr_mult, 1),
	D_ANY_FLOAT("decay_mult", struct net_param_spec, decay_mult, 1),
	{ .name = "name", .kind = F_REFUSED, .only = "param.name: sharing parameters between layers is not supported" },
	{ .name = "share_mode", .kind = F_REFUSED,
	  .only = "param.share_mode: sharing parameters between layers is not supported" },
};
const struct pmsg net_param_spec_msg = { "param", sizeof(struct net_param_spec), FIELDS(param_spec_fields) };

/* BlobShape: shape { dim: 1 dim: 3 ... }, 1 to 4 dims, each at least 1. */
static int shape_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	const struct net_shape *s = param;
	(void)ax;
	return s->ndim ? DD_OK : net_perr(c, m->line, m->col, "%s: no dim given", c->where);
}
static const struct field shape_fields[] = {
	{ .name = "dim", .kind = F_DIMS, .off = offsetof(struct net_shape, dim), .cnt = offsetof(struct net_shape, ndim),
	  .min = 1, .max = 1 << 24 },
};
const struct pmsg net_shape_msg = { "shape", sizeof(struct net_shape), FIELDS(shape_fields), .check = shape_check };

/* data_param and transform_param: both into struct net_data_param */
static const char *const db_backends[] = { "LEVELDB", "LMDB" };
static const struct field data_fields[] = {
	D_INT("batch_size", struct net_data_param, batch_size, 1, 1 << 20, 0),
	{ .name = "source", .kind = F_STRING, .off = NOWHERE }, /* DIGITS sets it to the dataset's */
	D_IGNORED_ENUM("backend", db_backends),
};
static const struct pmsg data_msg = { "data_param", sizeof(struct net_data_param), FIELDS(data_fields) };

static int transform_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	const struct net_data_param *p = param;
	(void)ax;
	if (p->nmean_value && p->mean_file)
		return net_perr(c, m->line, m->col, "transform_param: give mean_file or mean_value, not both");
	return DD_OK;
}
static const struct field transform_fields[] = {
	{ .name = "mean_value", .kind = F_FLOATS, .off = offsetof(struct net_data_param, mean_value),
	  .cnt = offsetof(struct net_data_param, nmean_value), .min = -FLT_MAX, .max = FLT_MAX },
	D_ANY_FLOAT("scale", struct net_data_param, scale, 1),
	D_BOOL("mirror", struct net_data_param, mirror, 0),
	D_INT("crop_size", struct net_data_param, crop_size, 0, MAX_KERNEL, 0),
	{ .name = "mean_file", .kind = F_STRING, .off = offsetof(struct net_data_param, mean_file) },
};
static const struct pmsg transform_msg = { "transform_param", sizeof(struct net_data_param), FIELDS(transform_fields),
					   .check = transform_check };

static const struct field input_fields[] = {
	{ .name = "shape", .kind = F_MSGS, .off = offsetof(struct net_input_param, shape),
	  .cnt = offsetof(struct net_input_param, nshape), .sub = &net_shape_msg },
};
static const struct pmsg input_msg = { "input_param", sizeof(struct net_input_param), FIELDS(input_fields) };

/* convolution_param; the axes: ax[0] kernel, [1] stride, [2] pad, [3] dilation */
static int conv_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	struct net_conv_param *p = param;
	const struct axes *k = &ax[0];
	int rc;
	if (!net_count_of(m, "num_output"))
		return net_perr(c, m->line, m->col, "convolution_param: num_output is required");
	if (!axes_get(c, "kernel_size", "kernel", k, 0, &p->kh, &p->kw, &rc)) {
		if (rc)
			return rc;
		return net_perr(c, m->line, m->col, "convolution_param: give kernel_size, or kernel_h and kernel_w");
	}
	if ((k->has_h != k->has_w) && !k->n)
		return net_perr(c, m->line, m->col, "convolution_param: kernel_h and kernel_w go together");
	axes_get(c, "stride", "stride", &ax[1], 1, &p->sh, &p->sw, &rc);
	if (rc)
		return rc;
	axes_get(c, "pad", "pad", &ax[2], 0, &p->ph, &p->pw, &rc);
	if (rc)
		return rc;
	axes_get(c, "dilation", "dilation", &ax[3], 1, &p->dh, &p->dw, &rc);
	if (rc)
		return rc;
	if (p->num_output % p->group)
		return net_perr(c, m->line, m->col, "convolution_param: num_output %d is not a multiple of group %d",
				p->num_output, p->group);
	return DD_OK;
}
#define CP struct net_conv_param
static const struct field conv_fields[] = {
	D_AXES("kernel_size", "kernel", 0, 1, 1, CP, kh, kw, 0),
	D_AXES("stride", "stride", 1, 1, 1, CP, sh, sw, 1),
	D_AXES("pad", "pad", 2, 1, 0, CP, ph, pw, 0),
	D_AXES("dilation", NULL, 3, 1, 1, CP, dh, dw, 1),
	D_INT("num_output", CP, num_output, 1, 1 << 24, 0),
	D_BOOL("bias_term", CP, bias_term, 1),
	D_INT("group", CP, group, 1, 1 << 24, 1),
	D_FILLER("weight_filler", CP, weight_filler),
	D_FILLER("bias_filler", CP, bias_filler),
	D_ENGINE,
	D_ONLY_1("axis", "convolution_param.axis: only axis 1 (channels) is supported"),
	D_IGNORED_BOOL("force_nd_im2col"),
};
#undef CP
static const struct pmsg conv_msg = { "convolution_param", sizeof(struct net_conv_param), FIELDS(conv_fields),
				      .check = conv_check };

/* pooling_param; the axes as convolution_param's, each given once */
static int pool_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	struct net_pool_param *p = param;
	int rc;
	int has_k = axes_get(c, "kernel_size", "kernel", &ax[0], 0, &p->kh, &p->kw, &rc);
	if (rc)
		return rc;
	int has_s = axes_get(c, "stride", "stride", &ax[1], 1, &p->sh, &p->sw, &rc);
	if (rc)
		return rc;
	int has_p = axes_get(c, "pad", "pad", &ax[2], 0, &p->ph, &p->pw, &rc);
	if (rc)
		return rc;
	if (p->global) {
		if (has_k)
			return net_perr(c, m->line, m->col,
					"pooling_param: with global_pooling the kernel is the whole input; remove kernel_size");
		if ((has_p && (p->ph || p->pw)) || (has_s && (p->sh != 1 || p->sw != 1)))
			return net_perr(c, m->line, m->col, "pooling_param: global_pooling takes no pad and stride 1");
		return DD_OK;
	}
	if (!has_k)
		return net_perr(c, m->line, m->col,
				"pooling_param: give kernel_size, or kernel_h and kernel_w, or global_pooling: true");
	if (ax[0].has_h != ax[0].has_w)
		return net_perr(c, m->line, m->col, "pooling_param: kernel_h and kernel_w go together");
	if (p->ph >= p->kh || p->pw >= p->kw)
		return net_perr(c, m->line, m->col, "pooling_param: pad %dx%d must be smaller than the kernel %dx%d",
				p->ph, p->pw, p->kh, p->kw);
	return DD_OK;
}
static const char *const pool_methods[] = { "MAX", "AVE", NULL /* STOCHASTIC */ };
#define PP struct net_pool_param
static const struct field pool_fields[] = {
	D_AXES("kernel_size", "kernel", 0, 0, 1, PP, kh, kw, 0),
	D_AXES("stride", "stride", 1, 0, 1, PP, sh, sw, 1),
	D_AXES("pad", "pad", 2, 0, 0, PP, ph, pw, 0),
	D_ENUM("pool", PP, pool, pool_methods, NET_POOL_MAX),
	D_BOOL("global_pooling", PP, global, 0),
	D_ENGINE,
};
#undef PP
static const struct pmsg pool_msg = { "pooling_param", sizeof(struct net_pool_param), FIELDS(pool_fields),
				      .check = pool_check };

static const struct field ip_fields[] = {
	D_INT("num_output", struct net_ip_param, num_output, 1, 1 << 24, 0), /* 0: DIGITS' class count */
	D_BOOL("bias_term", struct net_ip_param, bias_term, 1),
	D_FILLER("weight_filler", struct net_ip_param, weight_filler),
	D_FILLER("bias_filler", struct net_ip_param, bias_filler),
	D_ONLY_1("axis", "inner_product_param.axis: only axis 1 is supported (all of C*H*W is the input)"),
	{ .name = "transpose", .kind = F_BOOL, .off = NOWHERE, .want = 0,
	  .only = "inner_product_param.transpose is not supported" },
};
static const struct pmsg ip_msg = { "inner_product_param", sizeof(struct net_ip_param), FIELDS(ip_fields) };

static const struct field relu_fields[] = {
	D_ENGINE,
	D_ANY_FLOAT("negative_slope", struct net_relu_param, negative_slope, 0),
};
static const struct pmsg relu_msg = { "relu_param", sizeof(struct net_relu_param), FIELDS(relu_fields) };

static const struct field engine_only_fields[] = { D_ENGINE };
static const struct pmsg sigmoid_msg = { "sigmoid_param", 0, FIELDS(engine_only_fields) };
static const struct pmsg tanh_msg = { "tanh_param", 0, FIELDS(engine_only_fields) };

/* Softmax's and SoftmaxWithLoss' softmax_param: the axis goes where both keep it */
_Static_assert(offsetof(struct net_softmax_param, axis) == offsetof(struct net_loss_param, axis),
	       "softmax_param's axis lands in net_softmax_param and net_loss_param alike");
static const struct field softmax_fields[] = {
	D_ENGINE,
	{ .name = "axis", .kind = F_INT, .off = offsetof(struct net_softmax_param, axis), .min = INT32_MIN,
	  .max = INT32_MAX, .def = 1, .want = 1, .only = "softmax_param.axis: only axis 1 (channels) is supported" },
};
static const struct pmsg softmax_msg = { "softmax_param", sizeof(struct net_softmax_param), FIELDS(softmax_fields) };

static const struct field power_fields[] = {
	D_ANY_FLOAT("power", struct net_power_param, power, 1),
	D_ANY_FLOAT("scale", struct net_power_param, scale, 1),
	D_ANY_FLOAT("shift", struct net_power_param, shift, 0),
};
static const struct pmsg power_msg = { "power_param", sizeof(struct net_power_param), FIELDS(power_fields) };

static int below_one(double v) { return v < 1; }
static const struct field dropout_fields[] = {
	{ .name = "dropout_ratio", .kind = F_FLOAT, .off = offsetof(struct net_dropout_param, ratio), .min = 0,
	  .max = 1, .def = 0.5, .valid = below_one, .expect = "a ratio from 0 to below 1" },
};
static const struct pmsg dropout_msg = { "dropout_param", sizeof(struct net_dropout_param), FIELDS(dropout_fields) };

static int odd(double v) { return (int)v % 2 != 0; }
static const char *const lrn_regions[] = { "ACROSS_CHANNELS", NULL /* WITHIN_CHANNEL */ };
static const struct field lrn_fields[] = {
	{ .name = "local_size", .kind = F_INT, .off = offsetof(struct net_lrn_param, local_size), .min = 1,
	  .max = 1023, .def = 5, .valid = odd, .expect = "an odd local_size" },
	D_ANY_FLOAT("alpha", struct net_lrn_param, alpha, 1),
	D_ANY_FLOAT("beta", struct net_lrn_param, beta, 0.75),
	D_FLOAT("k", struct net_lrn_param, k, 1e-30, FLT_MAX, 1),
	D_IGNORED_ENUM("norm_region", lrn_regions),
	D_ENGINE,
};
static const struct pmsg lrn_msg = { "lrn_param", sizeof(struct net_lrn_param), FIELDS(lrn_fields) };

static const struct field bn_fields[] = {
	D_BOOL("use_global_stats", struct net_bn_param, use_global_stats, -1), /* -1: by phase */
	D_FLOAT("moving_average_fraction", struct net_bn_param, moving_average_fraction, 0, 1, 0.999),
	D_FLOAT("eps", struct net_bn_param, eps, 1e-30, FLT_MAX, 1e-5),
};
static const struct pmsg bn_msg = { "batch_norm_param", sizeof(struct net_bn_param), FIELDS(bn_fields) };

static void scale_init(void *param)
{
	((struct net_scale_param *)param)->filler.value = 1; /* Caffe's: the scale starts at 1 */
}
static const struct field scale_fields[] = {
	D_BOOL("bias_term", struct net_scale_param, bias_term, 0),
	D_FILLER("filler", struct net_scale_param, filler),
	D_FILLER("bias_filler", struct net_scale_param, bias_filler),
	D_ONLY_1("axis", "scale_param.axis: only 1 is supported (one factor per channel)"),
	D_ONLY_1("num_axes", "scale_param.num_axes: only 1 is supported (one factor per channel)"),
};
static const struct pmsg scale_msg = { "scale_param", sizeof(struct net_scale_param), FIELDS(scale_fields),
				       .init = scale_init };

static int eltwise_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	const struct net_eltwise_param *p = param;
	(void)ax;
	if (p->ncoeff && p->op != NET_ELTWISE_SUM)
		return net_perr(c, m->line, m->col, "eltwise_param: coeff applies only to operation SUM");
	return DD_OK;
}
static const char *const eltwise_ops[] = { "PROD", "SUM", "MAX" };
static const struct field eltwise_fields[] = {
	{ .name = "coeff", .kind = F_FLOATS, .off = offsetof(struct net_eltwise_param, coeff),
	  .cnt = offsetof(struct net_eltwise_param, ncoeff), .min = -FLT_MAX, .max = FLT_MAX },
	D_ENUM("operation", struct net_eltwise_param, op, eltwise_ops, NET_ELTWISE_SUM),
	D_IGNORED_BOOL("stable_prod_grad"),
};
static const struct pmsg eltwise_msg = { "eltwise_param", sizeof(struct net_eltwise_param), FIELDS(eltwise_fields),
					 .check = eltwise_check };

static const struct field concat_fields[] = {
	D_ONLY_1("axis", "concat_param.axis: only 1 (channels) is supported"),
	D_ONLY_1("concat_dim", "concat_param.concat_dim: only 1 (channels) is supported"),
};
static const struct pmsg concat_msg = { "concat_param", 0, FIELDS(concat_fields) };

/* loss_param: Caffe's four normalisation modes, and the legacy normalize, which
 * gives the mode only when normalization is not given (true: VALID, false:
 * BATCH_SIZE), as Caffe's LossLayer reads them. */
_Static_assert(sizeof(enum net_loss_norm) == sizeof(int), "an enum member is as wide as an int");
static int loss_check(struct pc *c, const struct ptx_msg *m, void *param, const struct axes *ax)
{
	struct net_loss_param *p = param;
	(void)c, (void)m, (void)ax;
	if (!p->has_normalization && p->has_normalize)
		p->normalization = p->normalize ? NET_NORM_VALID : NET_NORM_BATCH_SIZE;
	return DD_OK;
}
static const char *const loss_norms[] = { "FULL", "VALID", "BATCH_SIZE", "NONE" };
static const struct field loss_fields[] = {
	{ .name = "ignore_label", .kind = F_INT, .off = offsetof(struct net_loss_param, ignore_label),
	  .min = INT32_MIN, .max = INT32_MAX, .has = offsetof(struct net_loss_param, has_ignore_label) },
	{ .name = "normalization", .kind = F_ENUM, .off = offsetof(struct net_loss_param, normalization),
	  .names = loss_norms, .nnames = sizeof loss_norms / sizeof *loss_norms, .def = NET_NORM_VALID,
	  .has = offsetof(struct net_loss_param, has_normalization) },
	{ .name = "normalize", .kind = F_BOOL, .off = offsetof(struct net_loss_param, normalize), .def = 1,
	  .has = offsetof(struct net_loss_param, has_normalize) },
};
static const struct pmsg loss_msg = { "loss_param", sizeof(struct net_loss_param), FIELDS(loss_fields),
				      .check = loss_check };

static const struct field accuracy_fields[] = {
	D_INT("top_k", struct net_accuracy_param, top_k, 1, 1 << 24, 1),
	{ .name = "ignore_label", .kind = F_INT, .off = offsetof(struct net_accuracy_param, ignore_label),
	  .min = INT32_MIN, .max = INT32_MAX, .has = offsetof(struct net_accuracy_param, has_ignore_label) },
	D_ONLY_1("axis", "accuracy_param.axis: only axis 1 is supported"),
};
static const struct pmsg accuracy_msg = { "accuracy_param", sizeof(struct net_accuracy_param), FIELDS(accuracy_fields) };

/* crop_param: axis (2; from -4, counted from the end) and the offsets, checked
 * against the bottoms' axes by infer_crop */
static const struct field crop_fields[] = {
	D_INT("axis", struct net_crop_param, axis, -NET_MAX_DIMS, NET_MAX_DIMS - 1, 2),
	{ .name = "offset", .kind = F_DIMS, .off = offsetof(struct net_crop_param, offset),
	  .cnt = offsetof(struct net_crop_param, noffset), .min = 0, .max = 1 << 24 },
};
static const struct pmsg crop_msg = { "crop_param", sizeof(struct net_crop_param), FIELDS(crop_fields) };


/* ---- shape rules ------------------------------------------------------------------- */

/* The fix for a kernel that no longer fits: the images, or the layers above, are too small. */
#define SHRINK_FIX                                                                                  \
	"use a smaller kernel_size or more pad here, fewer or gentler downsampling layers above, or a " \
	"dataset of larger images"

/* Each type's shape rule: the output shapes and parameter blobs of node nd from its
 * bottoms' shapes (s: bottom 0's, whose axes infer() has checked against the row).
 * DD_OK, or an error that names the layer. */

static const struct net_shape *bottom_shape(const struct ic *x, const struct net_node *nd, int i)
{
	return &x->g->blob[nd->bottom[i]].shape;
}

/* only the one deepdesk adds for deploy */
static int infer_input(struct ic *x, struct net_node *nd)
{
	return net_set_top(x, nd, 0, nd->l.input.shape[0].ndim, nd->l.input.shape[0].dim);
}

static int infer_data(struct ic *x, struct net_node *nd)
{
	const struct net_layer *l = &nd->l;
	int rc;
	/* Caffe's rule: one mean_value for every channel, or one per channel */
	if (l->data.nmean_value > 1 && l->data.nmean_value != x->g->in.c)
		return net_lerr(x, nd,
				"transform_param has %d mean_value entries but the images have %d channel%s: give "
				"one mean_value for all channels, or exactly %d",
				l->data.nmean_value, x->g->in.c, x->g->in.c == 1 ? "" : "s", x->g->in.c);
	int64_t d[4] = { l->data.batch_size, x->g->in.c, x->g->in.h, x->g->in.w };
	if (x->g->in.crop)
		d[2] = d[3] = x->g->in.crop;
	if ((rc = net_set_top(x, nd, 0, 4, d)))
		return rc;
	return l->ntop > 1 ? net_set_top(x, nd, 1, 1, d) : DD_OK;
}

/* What Convolution and Deconvolution start from: the bottom's shape (*s), whose
 * channels must split into the groups, and the dilated kernel's extent (*ekh x
 * *ekw).  0, or the error sent. */
static int conv_bottom(struct ic *x, struct net_node *nd, const struct net_shape **s, int64_t *ekh, int64_t *ekw)
{
	const struct net_conv_param *p = &nd->l.conv;
	*s = bottom_shape(x, nd, 0);
	*ekh = (int64_t)p->dh * (p->kh - 1) + 1;
	*ekw = (int64_t)p->dw * (p->kw - 1) + 1;
	if ((*s)->dim[1] % p->group == 0)
		return DD_OK;
	return net_lerr(x, nd, "its %lld input channels do not divide into %d groups: set group to a divisor of %lld "
			       "(1 always works)",
			(long long)(*s)->dim[1], p->group, (long long)(*s)->dim[1]);
}

static int infer_conv(struct ic *x, struct net_node *nd)
{
	const struct net_conv_param *p = &nd->l.conv;
	const struct net_shape *s;
	int64_t o[NET_MAX_DIMS], ekh, ekw;
	int rc;
	if ((rc = conv_bottom(x, nd, &s, &ekh, &ekw)))
		return rc;
	int64_t hp = s->dim[2] + 2 * p->ph, wp = s->dim[3] + 2 * p->pw;
	if (ekh > hp || ekw > wp) {
		char kern[64];
		if (p->dh > 1 || p->dw > 1)
			snprintf(kern, sizeof kern, "kernel %dx%d dilated by %d, %d (%lldx%lld)", p->kh, p->kw, p->dh,
				 p->dw, (long long)ekh, (long long)ekw);
		else
			snprintf(kern, sizeof kern, "kernel %dx%d", p->kh, p->kw);
		return net_lerr(x, nd, "%s is larger than its input %lldx%lld (padded by %d, %d): %s", kern,
				(long long)s->dim[2], (long long)s->dim[3], p->ph, p->pw, SHRINK_FIX);
	}
	o[0] = s->dim[0];
	o[1] = p->num_output;
	o[2] = (hp - ekh) / p->sh + 1;
	o[3] = (wp - ekw) / p->sw + 1;
	if ((rc = net_set_top(x, nd, 0, 4, o)))
		return rc;
	int64_t w[4] = { p->num_output, s->dim[1] / p->group, p->kh, p->kw };
	if ((rc = net_add_param(x, nd, "weights", 4, w, 0)))
		return rc;
	return p->bias_term ? net_add_param(x, nd, "bias", 1, w, 0) : DD_OK;
}

/* Deconvolution: Convolution's transpose, Caffe's shapes.  The top is
 * (N, num_output, (H-1)·sh - 2·ph + dh·(kh-1) + 1, likewise W), the weights
 * (C_in, num_output/group, kh, kw) as Caffe stores them: the weights of the
 * convolution that maps the top's shape back to the bottom's. */
static int infer_deconv(struct ic *x, struct net_node *nd)
{
	const struct net_conv_param *p = &nd->l.conv;
	const struct net_shape *s;
	int64_t o[NET_MAX_DIMS], ekh, ekw;
	int rc;
	if ((rc = conv_bottom(x, nd, &s, &ekh, &ekw)))
		return rc;
	o[0] = s->dim[0];
	o[1] = p->num_output;
	o[2] = (s->dim[2] - 1) * p->sh - 2 * (int64_t)p->ph + ekh;
	o[3] = (s->dim[3] - 1) * p->sw - 2 * (int64_t)p->pw + ekw;
	if (o[2] < 1 || o[3] < 1)
		return net_lerr(x, nd, "pad %d, %d crops away its whole output: the input %lldx%lld at stride %d, %d "
				   "with the kernel %dx%d gives %lldx%lld before the pad; use less pad",
			    p->ph, p->pw, (long long)s->dim[2], (long long)s->dim[3], p->sh, p->sw, p->kh, p->kw,
			    (long long)(o[2] + 2 * p->ph), (long long)(o[3] + 2 * p->pw));
	if ((rc = net_set_top(x, nd, 0, 4, o)))
		return rc;
	int64_t w[4] = { s->dim[1], p->num_output / p->group, p->kh, p->kw };
	if ((rc = net_add_param(x, nd, "weights", 4, w, 0)))
		return rc;
	return p->bias_term ? net_add_param(x, nd, "bias", 1, &o[1], 0) : DD_OK;
}

static int infer_pool(struct ic *x, struct net_node *nd)
{
	struct net_pool_param *p = &nd->l.pool;
	const struct net_shape *s = bottom_shape(x, nd, 0);
	int64_t o[NET_MAX_DIMS];
	if (p->global) {
		p->kh = (int)s->dim[2];
		p->kw = (int)s->dim[3];
	}
	int64_t hp = s->dim[2] + 2 * p->ph, wp = s->dim[3] + 2 * p->pw;
	if (p->kh > hp || p->kw > wp)
		return net_lerr(x, nd, "kernel %dx%d is larger than its input %lldx%lld (padded by %d, %d): %s", p->kh,
				p->kw, (long long)s->dim[2], (long long)s->dim[3], p->ph, p->pw, SHRINK_FIX);
	/* Caffe rounds up, then drops a last window that would start in the padding */
	int64_t ho = (hp - p->kh + p->sh - 1) / p->sh + 1, wo = (wp - p->kw + p->sw - 1) / p->sw + 1;
	if (p->ph || p->pw) {
		if ((ho - 1) * p->sh >= s->dim[2] + p->ph)
			ho--;
		if ((wo - 1) * p->sw >= s->dim[3] + p->pw)
			wo--;
	}
	o[0] = s->dim[0];
	o[1] = s->dim[1];
	o[2] = ho;
	o[3] = wo;
	return net_set_top(x, nd, 0, 4, o);
}

static int infer_ip(struct ic *x, struct net_node *nd)
{
	struct net_layer *l = &nd->l;
	const struct net_shape *s = bottom_shape(x, nd, 0);
	int64_t o[NET_MAX_DIMS];
	int rc;
	if (l->ip.num_output == 0) {
		if (x->g->in.classes <= 0)
			return net_lerr(x, nd, "num_output is not set, which DIGITS fills with the dataset's class "
					   "count, and no class count was given");
		l->ip.num_output = x->g->in.classes;
	}
	int64_t k = x->g->blob[nd->bottom[0]].count / s->dim[0];
	o[0] = s->dim[0];
	o[1] = l->ip.num_output;
	if ((rc = net_set_top(x, nd, 0, 2, o)))
		return rc;
	int64_t w[2] = { l->ip.num_output, k };
	if ((rc = net_add_param(x, nd, "weights", 2, w, 0)))
		return rc;
	return l->ip.bias_term ? net_add_param(x, nd, "bias", 1, w, 0) : DD_OK;
}

/* The top is the bottom's shape: ReLU, Sigmoid, TanH, Power, Dropout, LRN, Softmax. */
static int infer_same(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0);
	return net_set_top(x, nd, 0, s->ndim, s->dim);
}

static int infer_bn(struct ic *x, struct net_node *nd)
{
	struct net_layer *l = &nd->l;
	const struct net_shape *s = bottom_shape(x, nd, 0);
	int rc;
	int64_t c = s->dim[1], one = 1;
	if (l->bn.use_global_stats < 0) /* Caffe's default: batch statistics in training only */
		l->bn.use_global_stats = x->g->stage != NET_STAGE_TRAIN;
	if ((rc = net_set_top(x, nd, 0, s->ndim, s->dim)) || (rc = net_add_param(x, nd, "mean", 1, &c, 1)) ||
	    (rc = net_add_param(x, nd, "variance", 1, &c, 1)))
		return rc;
	return net_add_param(x, nd, "factor", 1, &one, 1);
}

static int infer_scale(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0);
	int rc;
	int64_t c = s->dim[1];
	if ((rc = net_set_top(x, nd, 0, s->ndim, s->dim)) || (rc = net_add_param(x, nd, "scale", 1, &c, 0)))
		return rc;
	return nd->l.scale.bias_term ? net_add_param(x, nd, "bias", 1, &c, 0) : DD_OK;
}

/* Bottom i's shape equals bottom 0's (but for axis `except`, -1: none)?  Else the
 * error, ending in `why`. */
static int same_shapes(struct ic *x, struct net_node *nd, int i, int except, const char *why)
{
	const struct net_shape *s = bottom_shape(x, nd, 0), *t = bottom_shape(x, nd, i);
	int same = t->ndim == s->ndim;
	for (int d = 0; same && d < s->ndim; d++)
		same = d == except || t->dim[d] == s->dim[d];
	if (same)
		return DD_OK;
	char a[80], b[80], sa[80], sb[80];
	net_shape_str(s, sa, sizeof sa);
	net_shape_str(t, sb, sizeof sb);
	return net_lerr(x, nd, "bottom '%s' is %s but bottom '%s' is %s: %s", net_blob_name(x, nd->bottom[0], a, sizeof a), sa,
			net_blob_name(x, nd->bottom[i], b, sizeof b), sb, why);
}

static int infer_eltwise(struct ic *x, struct net_node *nd)
{
	int rc;
	for (int i = 1; i < nd->l.nbottom; i++)
		if ((rc = same_shapes(x, nd, i, -1, "Eltwise needs equal shapes")))
			return rc;
	return infer_same(x, nd);
}

static int infer_concat(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0);
	int64_t o[NET_MAX_DIMS];
	int rc;
	int64_t c = 0;
	for (int i = 0; i < nd->l.nbottom; i++) {
		if ((rc = same_shapes(x, nd, i, 1, "Concat needs equal shapes but for the channels")))
			return rc;
		c += bottom_shape(x, nd, i)->dim[1];
	}
	memcpy(o, s->dim, sizeof o);
	o[1] = c;
	return net_set_top(x, nd, 0, s->ndim, o);
}

static int infer_flatten(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0);
	int64_t o[NET_MAX_DIMS];
	o[0] = s->dim[0];
	o[1] = x->g->blob[nd->bottom[0]].count / s->dim[0];
	return net_set_top(x, nd, 0, 2, o);
}

/* SoftmaxWithLoss and Accuracy: scores (N, classes, ...) and one label per image and position. */
static int check_labels(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0);
	char a[80], b[80], sa[80], sb[80];
	const struct net_blob *lb = &x->g->blob[nd->bottom[1]];
	int64_t inner = x->g->blob[nd->bottom[0]].count / (s->dim[0] * s->dim[1]);
	if (lb->count != s->dim[0] * inner) {
		net_shape_str(s, sa, sizeof sa);
		net_shape_str(&lb->shape, sb, sizeof sb);
		return net_lerr(x, nd, "bottom '%s' holds %lld labels (%s) but the scores '%s' (%s) need %lld, "
				   "one per image%s",
			    net_blob_name(x, nd->bottom[1], b, sizeof b), (long long)lb->count, sb,
			    net_blob_name(x, nd->bottom[0], a, sizeof a), sa, (long long)(s->dim[0] * inner),
			    inner > 1 ? " and position" : "");
	}
	return DD_OK;
}

/* a scalar */
static int infer_loss(struct ic *x, struct net_node *nd)
{
	int rc = check_labels(x, nd);
	return rc ? rc : net_set_top(x, nd, 0, 0, NULL);
}

static int infer_accuracy(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0);
	char a[80];
	int rc;
	if ((rc = check_labels(x, nd)))
		return rc;
	if (nd->l.accuracy.top_k > s->dim[1])
		return net_lerr(x, nd, "top_k %d is more than the %lld classes of '%s'", nd->l.accuracy.top_k,
				(long long)s->dim[1], net_blob_name(x, nd->bottom[0], a, sizeof a));
	return net_set_top(x, nd, 0, 0, NULL);
}


/* EuclideanLoss: two bottoms of one batch and one count per image (Caffe compares
 * count(1), so (N, 2) against a (N, 1, 1, 2) label is fine); a scalar. */
static int infer_euclidean(struct ic *x, struct net_node *nd)
{
	const struct net_shape *s = bottom_shape(x, nd, 0), *t = bottom_shape(x, nd, 1);
	if (t->ndim < 1 || t->dim[0] != s->dim[0] ||
	    x->g->blob[nd->bottom[1]].count != x->g->blob[nd->bottom[0]].count) {
		char a[80], b[80], sa[80], sb[80];
		net_shape_str(s, sa, sizeof sa);
		net_shape_str(t, sb, sizeof sb);
		return net_lerr(x, nd, "bottom '%s' is %s but bottom '%s' is %s: EuclideanLoss needs the same batch "
				       "and the same number of values per image",
				net_blob_name(x, nd->bottom[0], a, sizeof a), sa, net_blob_name(x, nd->bottom[1], b, sizeof b),
				sb);
	}
	return net_set_top(x, nd, 0, 0, NULL);
}

/* Crop: bottom 0's axes before axis, bottom 1's from it; the offsets resolved to
 * one per axis (0 before axis) in place, for the kernels. */
static int infer_crop(struct ic *x, struct net_node *nd)
{
	struct net_crop_param *p = &nd->l.crop;
	const struct net_shape *s = bottom_shape(x, nd, 0), *t = bottom_shape(x, nd, 1);
	char a[80], b[80], sa[80], sb[80];
	int64_t o[NET_MAX_DIMS], off[NET_MAX_DIMS];
	net_shape_str(s, sa, sizeof sa);
	net_shape_str(t, sb, sizeof sb);
	net_blob_name(x, nd->bottom[0], a, sizeof a);
	net_blob_name(x, nd->bottom[1], b, sizeof b);
	if (t->ndim != s->ndim)
		return net_lerr(x, nd, "bottom '%s' is %s but bottom '%s' is %s: Crop needs bottoms with the same number "
				       "of axes", a, sa, b, sb);
	int axis = p->axis < 0 ? p->axis + s->ndim : p->axis;
	if (axis < 0 || axis >= s->ndim)
		return net_lerr(x, nd, "crop_param.axis %d is outside the %d axes of bottom '%s' (%s)", p->axis, s->ndim,
				a, sa);
	int ncrop = s->ndim - axis;
	if (p->noffset > 1 && p->noffset != ncrop)
		return net_lerr(x, nd, "crop_param has %d offset values but crops %d ax%s from axis %d: give one "
				       "offset for all, or exactly %d", p->noffset, ncrop, ncrop == 1 ? "is" : "es", axis,
				ncrop);
	for (int d = 0; d < s->ndim; d++) {
		off[d] = d < axis || !p->noffset ? 0 : p->offset[p->noffset == 1 ? 0 : d - axis];
		o[d] = d < axis ? s->dim[d] : t->dim[d];
		if (d >= axis && s->dim[d] < t->dim[d] + off[d])
			return net_lerr(x, nd, "axis %d: bottom '%s' (%s) has %lld but cutting it to bottom '%s' (%s) "
					       "needs %lld + offset %lld: bottom 0 is cut to bottom 1's shape, so give a "
					       "smaller offset or swap the bottoms",
					d, a, sa, (long long)s->dim[d], b, sb, (long long)t->dim[d], (long long)off[d]);
	}
	memcpy(p->offset, off, sizeof off);
	p->noffset = s->ndim;
	p->axis = axis;
	return net_set_top(x, nd, 0, s->ndim, o);
}

/* ---- the rows ------------------------------------------------------------------------ */

static int eltwise_layer_check(struct pc *c, const struct ptx_field *lf, const struct net_layer *l)
{
	if (l->eltwise.ncoeff && l->eltwise.ncoeff != l->nbottom)
		return net_perr(c, lf->line, lf->col, "eltwise_param has %d coeff values for %d bottoms", l->eltwise.ncoeff,
				l->nbottom);
	return DD_OK;
}

static int input_layer_check(struct pc *c, const struct ptx_field *lf, const struct net_layer *l)
{
	if (l->input.nshape != 1 && l->input.nshape != l->ntop)
		return net_perr(c, lf->line, lf->col, "input_param needs one shape, or one per top (%d)", l->ntop);
	return DD_OK;
}

#define IO(b0, b1, t0, t1) .bottom_min = b0, .bottom_max = b1, .top_min = t0, .top_max = t1
#define ONE_TO_ONE IO(1, 1, 1, 1)
#define MANY (1 << 16)
#define FILLERS(w, b) .filler = { offsetof(struct net_layer, w), offsetof(struct net_layer, b) }
#define AXES(lo, hi, what) .axes_min = lo, .axes_max = hi, .axes_what = what
#define NCHW AXES(4, 4, "a 4-axis input (N, C, H, W)")
#define CHANNELS AXES(2, 4, "an input with a channel axis")
#define SCORES AXES(2, 4, "scores with a class axis (N, classes, ...)")

const struct layer_type net_layer_types[] = {
	[NET_DATA] = { .info = { .name = "Data", IO(0, 0, 1, 2) }, .msg = { &data_msg, &transform_msg },
		       .infer = infer_data },
	[NET_INPUT] = { .info = { .name = "Input", IO(0, 0, 1, MANY) }, .msg = { &input_msg },
			.check = input_layer_check, .infer = infer_input },
	[NET_CONVOLUTION] = { .info = { .name = "Convolution", ONE_TO_ONE, .reads_bottom = 1,
					FILLERS(conv.weight_filler, conv.bias_filler) },
			      .msg = { &conv_msg },
			      .required = "convolution_param { num_output: ... kernel_size: ... } is required",
			      NCHW, .infer = infer_conv },
	[NET_POOLING] = { .info = { .name = "Pooling", ONE_TO_ONE }, .msg = { &pool_msg },
			  .required = "pooling_param { kernel_size: ... } (or global_pooling: true) is required",
			  NCHW, .infer = infer_pool },
	[NET_INNER_PRODUCT] = { .info = { .name = "InnerProduct", ONE_TO_ONE, .reads_bottom = 1,
					  FILLERS(ip.weight_filler, ip.bias_filler) },
				.msg = { &ip_msg }, AXES(2, 4, "an input with a batch axis and at least one more"),
				.infer = infer_ip },
	[NET_RELU] = { .info = { .name = "ReLU", ONE_TO_ONE, .elementwise = 1, .reads_bottom = 1,
				 .reads_top = NET_READS_IN_PLACE },
		       .msg = { &relu_msg }, .infer = infer_same },
	[NET_SIGMOID] = { .info = { .name = "Sigmoid", ONE_TO_ONE, .elementwise = 1, .reads_top = NET_READS_YES },
			  .msg = { &sigmoid_msg }, .infer = infer_same },
	[NET_TANH] = { .info = { .name = "TanH", ONE_TO_ONE, .elementwise = 1, .reads_top = NET_READS_YES },
		       .msg = { &tanh_msg }, .infer = infer_same },
	[NET_POWER] = { .info = { .name = "Power", ONE_TO_ONE, .elementwise = 1, .reads_bottom = 1 },
			.msg = { &power_msg }, .infer = infer_same },
	[NET_DROPOUT] = { .info = { .name = "Dropout", ONE_TO_ONE, .elementwise = 1 }, .msg = { &dropout_msg },
			  .infer = infer_same },
	[NET_LRN] = { .info = { .name = "LRN", ONE_TO_ONE, .reads_bottom = 1, .reads_top = NET_READS_YES },
		      .msg = { &lrn_msg }, NCHW, .infer = infer_same },
	[NET_BATCH_NORM] = { .info = { .name = "BatchNorm", ONE_TO_ONE, .elementwise = 1, .reads_top = NET_READS_YES },
			     .msg = { &bn_msg }, CHANNELS, .infer = infer_bn },
	[NET_SCALE] = { .info = { .name = "Scale", ONE_TO_ONE, .elementwise = 1, .reads_bottom = 1,
				  FILLERS(scale.filler, scale.bias_filler) },
			.msg = { &scale_msg }, CHANNELS, .infer = infer_scale },
	[NET_ELTWISE] = { .info = { .name = "Eltwise", IO(2, MANY, 1, 1) }, .msg = { &eltwise_msg },
			  .check = eltwise_layer_check, .infer = infer_eltwise },
	[NET_CONCAT] = { .info = { .name = "Concat", IO(1, MANY, 1, 1) }, .msg = { &concat_msg }, /* axis 1 */
			 AXES(2, 4, "inputs with a channel axis"), .infer = infer_concat },
	[NET_FLATTEN] = { .info = { .name = "Flatten", ONE_TO_ONE }, AXES(1, 4, "an input with a batch axis"),
			  .infer = infer_flatten },
	[NET_SOFTMAX] = { .info = { .name = "Softmax", ONE_TO_ONE, .reads_top = NET_READS_YES },
			  .msg = { &softmax_msg }, AXES(2, 4, "an input with a class axis"), .infer = infer_same },
	[NET_SOFTMAX_LOSS] = { .info = { .name = "SoftmaxWithLoss", IO(2, 2, 1, 1) },
			       .msg = { &softmax_msg, &loss_msg }, .loss = 1, SCORES, .infer = infer_loss },
	[NET_ACCURACY] = { .info = { .name = "Accuracy", IO(2, 2, 1, 1) }, .msg = { &accuracy_msg }, SCORES,
			   .infer = infer_accuracy },
	[NET_EUCLIDEAN_LOSS] = { .info = { .name = "EuclideanLoss", IO(2, 2, 1, 1) }, .loss = 1,
				 AXES(1, 4, "an input with a batch axis"), .infer = infer_euclidean },
	[NET_CROP] = { .info = { .name = "Crop", IO(2, 2, 1, 1) }, .msg = { &crop_msg }, AXES(1, 4, "an input with a batch axis"),
		       .infer = infer_crop },
	[NET_DECONVOLUTION] = { .info = { .name = "Deconvolution", ONE_TO_ONE, .reads_bottom = 1,
					  FILLERS(conv.weight_filler, conv.bias_filler) },
				.msg = { &conv_msg }, /* Caffe's: the convolution's convolution_param */
				.required = "convolution_param { num_output: ... kernel_size: ... } is required",
				NCHW, .infer = infer_deconv },
};
_Static_assert(sizeof net_layer_types / sizeof net_layer_types[0] == NET_LAYER_TYPE_COUNT,
	       "every enum net_layer_type value needs its row in net_layer_types[]");

#undef IO
#undef ONE_TO_ONE
#undef MANY
#undef FILLERS
#undef AXES
#undef NCHW
#undef CHANNELS
#undef SCORES

const struct net_layer_type_info *net_layer_type_info(enum net_layer_type type)
{
	return (unsigned)type < NET_LAYER_TYPE_COUNT ? &net_layer_types[type].info : NULL;
}

const char *net_layer_type_name(enum net_layer_type type)
{
	return (unsigned)type < NET_LAYER_TYPE_COUNT ? net_layer_types[type].info.name : "?";
}

