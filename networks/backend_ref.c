/* backend_ref.c — the reference backend: every layer on the plain loops of ref.h.
 *
 * Per-layer state is what ref.h's kernels keep between a forward and its backward:
 * a pooling or eltwise-MAX argmax, a dropout mask, the LRN scale, batch norm's saved
 * mean and 1/std, the softmax-loss probabilities.  It is one allocation per layer,
 * carved in layer_init and freed by layer_fini.  Memory for the arenas is the
 * default (calloc): the graph's arenas are host memory.
 *
 * Other backends call ref_layer_* for the layers they do not run themselves. */
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"

struct ref_state {
	int32_t *argmax;        /* pool MAX (N,C,Ho,Wo); eltwise MAX (count) */
	uint8_t *mask;          /* dropout (count) */
	float *lrn_scale;       /* (N,C,H,W) */
	float *bn_mean, *bn_invstd; /* (C) each */
	float *prob;            /* softmax loss (N,C,inner); EuclideanLoss's a − b (N,C,inner) */
	unsigned char mem[];
};

_Static_assert((int)LOSS_NORM_FULL == NET_NORM_FULL && (int)LOSS_NORM_VALID == NET_NORM_VALID &&
		       (int)LOSS_NORM_BATCH_SIZE == NET_NORM_BATCH_SIZE && (int)LOSS_NORM_NONE == NET_NORM_NONE,
	       "ref.h's loss normalisations are net.h's, in order");

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static int no_kernel(const struct net_layer *l, struct dd_err *err)
{
	return dd_err_set(err, DD_EINVAL, "layer '%s': no reference kernel for its type", l->name);
}

int ref_layer_init(struct backend *be, const struct backend_layer *bl, void **state, struct dd_err *err)
{
	const struct net_layer *l = bl->l;
	size_t argmax = 0, mask = 0, lrn = 0, bn = 0, prob = 0;
	switch (l->type) {
	case NET_POOLING:
		if (bl->d.pool.method == POOL_MAX)
			argmax = (size_t)bl->count;
		break;
	case NET_ELTWISE:
		if (l->eltwise.op == NET_ELTWISE_MAX)
			argmax = (size_t)bl->count;
		break;
	case NET_DROPOUT: mask = (size_t)bl->count; break;
	case NET_LRN: lrn = (size_t)bl->count; break;
	case NET_BATCH_NORM: bn = (size_t)bl->c; break;
	case NET_SOFTMAX_LOSS:
	case NET_EUCLIDEAN_LOSS: prob = (size_t)bl->n * (size_t)bl->c * (size_t)bl->inner; break;
	case NET_DATA: /* no state */
	case NET_INPUT:
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION:
	case NET_INNER_PRODUCT:
	case NET_RELU:
	case NET_SIGMOID:
	case NET_TANH:
	case NET_POWER:
	case NET_SCALE:
	case NET_CONCAT:
	case NET_FLATTEN:
	case NET_SOFTMAX:
	case NET_ACCURACY:
	case NET_CROP:
	case NET_LAYER_TYPE_COUNT:
		break;
	}
	size_t bytes = round64(argmax * 4) + round64(mask) + round64(lrn * 4) + 2 * round64(bn * 4) + round64(prob * 4);
	*state = NULL;
	if (!bytes)
		return DD_OK;
	struct ref_state *s = calloc(1, sizeof *s + bytes + 64);
	if (!s)
		return dd_err_set(err, DD_ENOMEM, "layer '%s': out of memory for %zu bytes of layer state", l->name,
				  bytes);
	unsigned char *p = (unsigned char *)(((uintptr_t)s->mem + 63) & ~(uintptr_t)63);
#define CARVE(field, n, size)                                  \
	if (n) {                                               \
		s->field = (void *)p;                          \
		p += round64((n) * (size));                    \
	}
	CARVE(argmax, argmax, 4)
	CARVE(mask, mask, 1)
	CARVE(lrn_scale, lrn, 4)
	CARVE(bn_mean, bn, 4)
	CARVE(bn_invstd, bn, 4)
	CARVE(prob, prob, 4)
#undef CARVE
	*state = s;
	return DD_OK;
}

void ref_layer_fini(struct backend *be, void *state)
{
	free(state);
}

int ref_layer_forward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		      struct dd_err *err)
{
	struct ref_state *s = state;
	const struct net_layer *l = bl->l;
	const float *in = bl->nbottom ? bl->x[0] : NULL;
	float *out = bl->y;
	if ((unsigned)l->type >= NET_LAYER_TYPE_COUNT)
		return no_kernel(l, err);
	switch (l->type) {
	case NET_DATA:
	case NET_INPUT:
		break;
	case NET_CONVOLUTION:
		conv_forward(out, in, bl->w[0], bl->d.conv.bias ? bl->w[1] : NULL, &bl->d.conv);
		break;
	case NET_DECONVOLUTION:
		deconv_forward(out, in, bl->w[0], bl->d.conv.bias ? bl->w[1] : NULL, &bl->d.conv);
		break;
	case NET_POOLING:
		pool_forward(out, s ? s->argmax : NULL, in, &bl->d.pool);
		break;
	case NET_INNER_PRODUCT:
		ip_forward(out, in, bl->w[0], bl->d.ip.bias ? bl->w[1] : NULL, &bl->d.ip);
		break;
	case NET_RELU:
		relu_forward(out, in, bl->count, l->relu.negative_slope);
		break;
	case NET_SIGMOID:
		sigmoid_forward(out, in, bl->count);
		break;
	case NET_TANH:
		tanh_forward(out, in, bl->count);
		break;
	case NET_POWER:
		power_forward(out, in, bl->count, l->power.power, l->power.scale, l->power.shift);
		break;
	case NET_DROPOUT:
		dropout_forward(out, s->mask, in, bl->count, l->dropout.ratio, training, bl->rng);
		break;
	case NET_LRN:
		lrn_forward(out, s->lrn_scale, in, &bl->d.lrn);
		break;
	case NET_BATCH_NORM:
		bn_forward(out, bl->w[0], bl->w[1], bl->w[2], s->bn_mean, s->bn_invstd, in, &bl->d.bn, training);
		break;
	case NET_SCALE:
		scale_forward(out, in, bl->w[0], bl->d.scale.bias ? bl->w[1] : NULL, &bl->d.scale);
		break;
	case NET_ELTWISE:
		eltwise_forward(out, s ? s->argmax : NULL, bl->x, bl->nbottom, bl->count, (enum eltwise_op)l->eltwise.op,
				l->eltwise.op == NET_ELTWISE_SUM ? l->eltwise.coeff : NULL);
		break;
	case NET_CONCAT:
		concat_forward(out, bl->x, bl->cs, bl->nbottom, bl->n, bl->concat_inner);
		break;
	case NET_FLATTEN:
		if (out != in)
			memcpy(out, in, (size_t)bl->count * sizeof(float));
		break;
	case NET_SOFTMAX:
		softmax_forward(out, in, bl->n, bl->c, bl->inner);
		break;
	case NET_SOFTMAX_LOSS:
		out[0] = softmax_loss_forward(s->prob, in, bl->x[1], bl->n, bl->c, bl->inner,
					      l->loss.has_ignore_label ? l->loss.ignore_label : -1,
					      (enum loss_norm)l->loss.normalization);
		break;
	case NET_ACCURACY:
		out[0] = accuracy_forward(in, bl->x[1], bl->n, bl->c, bl->inner, l->accuracy.top_k,
					  l->accuracy.has_ignore_label ? l->accuracy.ignore_label : -1);
		break;
	case NET_EUCLIDEAN_LOSS:
		out[0] = euclidean_loss_forward(s->prob, in, bl->x[1], bl->n, (int64_t)bl->n * bl->c * bl->inner);
		break;
	case NET_CROP:
		crop_forward(out, in, &bl->d.crop);
		break;
	case NET_LAYER_TYPE_COUNT: /* refused above */
		break;
	}
	return DD_OK;
}

int ref_layer_backward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		       struct dd_err *err)
{
	struct ref_state *s = state;
	const struct net_layer *l = bl->l;
	float *din = bl->nbottom ? bl->dx[0] : NULL;
	const float *in = bl->bx, *out = bl->by, *dout = bl->dy;
	if ((unsigned)l->type >= NET_LAYER_TYPE_COUNT)
		return no_kernel(l, err);
	switch (l->type) {
	case NET_DATA:
	case NET_INPUT:
	case NET_ACCURACY:
		break;
	case NET_CONVOLUTION:
		conv_backward(din, bl->dw[0], bl->d.conv.bias ? bl->dw[1] : NULL, dout, in, bl->w[0], &bl->d.conv);
		break;
	case NET_DECONVOLUTION:
		deconv_backward(din, bl->dw[0], bl->d.conv.bias ? bl->dw[1] : NULL, dout, in, bl->w[0], &bl->d.conv);
		break;
	case NET_POOLING:
		if (din)
			pool_backward(din, dout, s ? s->argmax : NULL, &bl->d.pool);
		break;
	case NET_INNER_PRODUCT:
		ip_backward(din, bl->dw[0], bl->d.ip.bias ? bl->dw[1] : NULL, dout, in, bl->w[0], &bl->d.ip);
		break;
	case NET_RELU:
		relu_backward(din, dout, in, bl->count, l->relu.negative_slope);
		break;
	case NET_SIGMOID:
		sigmoid_backward(din, dout, out, bl->count);
		break;
	case NET_TANH:
		tanh_backward(din, dout, out, bl->count);
		break;
	case NET_POWER:
		power_backward(din, dout, in, bl->count, l->power.power, l->power.scale, l->power.shift);
		break;
	case NET_DROPOUT:
		dropout_backward(din, dout, training ? s->mask : NULL, bl->count, l->dropout.ratio);
		break;
	case NET_LRN:
		lrn_backward(din, dout, out, in, s->lrn_scale, &bl->d.lrn);
		break;
	case NET_BATCH_NORM:
		bn_backward(din, dout, out, s->bn_invstd, &bl->d.bn, bl->d.bn.use_global_stats || !training);
		break;
	case NET_SCALE:
		scale_backward(din, bl->dw[0], bl->d.scale.bias ? bl->dw[1] : NULL, dout, in, bl->w[0], &bl->d.scale);
		break;
	case NET_ELTWISE:
		eltwise_backward(bl->dx, dout, bl->x, out, s ? s->argmax : NULL, bl->nbottom, bl->count,
				 (enum eltwise_op)l->eltwise.op, l->eltwise.op == NET_ELTWISE_SUM ? l->eltwise.coeff : NULL);
		break;
	case NET_CONCAT:
		concat_backward(bl->dx, dout, bl->cs, bl->nbottom, bl->n, bl->concat_inner);
		break;
	case NET_FLATTEN:
		if (din)
			for (int64_t i = 0; i < bl->count; i++)
				din[i] += dout[i];
		break;
	case NET_SOFTMAX:
		softmax_backward(din, dout, out, bl->n, bl->c, bl->inner);
		break;
	case NET_SOFTMAX_LOSS:
		if (din)
			softmax_loss_backward(din, s->prob, bl->x[1], bl->n, bl->c, bl->inner,
					      l->loss.has_ignore_label ? l->loss.ignore_label : -1,
					      (enum loss_norm)l->loss.normalization, dout[0]);
		break;
	case NET_EUCLIDEAN_LOSS:
		euclidean_loss_backward(din, bl->dx[1], s->prob, bl->n, (int64_t)bl->n * bl->c * bl->inner, dout[0]);
		break;
	case NET_CROP:
		crop_backward(din, dout, &bl->d.crop);
		break;
	case NET_LAYER_TYPE_COUNT: /* refused above */
		break;
	}
	return DD_OK;
}

static int ref_supports(struct backend *be, const struct net_layer *l)
{
	return l->type < NET_LAYER_TYPE_COUNT;
}

static void ref_destroy(struct backend *be)
{
	free(be);
}

static const struct backend_ops ref_ops = {
	.api_version = BACKEND_API_VERSION,
	.name = "ref",
	.destroy = ref_destroy,
	.supports = ref_supports,
	.layer_init = ref_layer_init,
	.layer_fini = ref_layer_fini,
	.forward = ref_layer_forward,
	.backward = ref_layer_backward,
};

int backend_ref_create(struct backend **out, struct dd_err *err)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	(*out)->ops = &ref_ops;
	return DD_OK;
}
