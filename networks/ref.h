/* ref.h — the reference implementation of every layer: plain C loops, written to be
 * obviously right rather than fast.  It is the oracle that every fast path (the
 * oneDNN CPU backend, the cuDNN backend) is tested against, and itself is tested by
 * finite differences and against PyTorch.
 *
 * Conventions (as in llm.c): outputs first, then inputs, then the shape descriptor.
 * Tensors are float32, dense, NCHW.  A forward writes (overwrites) its output.  A
 * backward ADDS into the gradients of its inputs and of its parameters (a blob read
 * by two layers gets both contributions; the graph zeroes gradients before a
 * backward pass).  Any gradient pointer may be NULL when that gradient is not needed
 * (the data input of the first layer, frozen parameters).  Scratch state a layer
 * keeps between its forward and backward (a max-pooling argmax, a dropout mask, the
 * batch statistics of batch norm) is passed in by the caller, sized as each
 * descriptor says. */
#ifndef DD_REF_H
#define DD_REF_H

#include <stdint.h>

/* ---- convolution (Caffe semantics: group, dilation, pad/stride per axis) ---- */
struct conv_desc {
	int n, c_in, h_in, w_in;     /* input (N, C_in, H, W) */
	int c_out, h_out, w_out;     /* output (N, C_out, H_out, W_out) */
	int kh, kw, sh, sw, ph, pw, dh, dw; /* kernel, stride, pad, dilation */
	int group;                   /* C_in and C_out divisible by it */
	int bias;                    /* bias_term */
};
/* H_out = (H + 2*ph - (dh*(kh-1)+1)) / sh + 1, likewise W_out. */
void conv_out_size(struct conv_desc *d);
/* out (N,C_out,Ho,Wo); in (N,C_in,H,W); w (C_out, C_in/group, kh, kw); b (C_out) or NULL */
void conv_forward(float *out, const float *in, const float *w, const float *b, const struct conv_desc *d);
void conv_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		   const float *w, const struct conv_desc *d);

/* ---- deconvolution (Caffe's Deconvolution: the transpose of a convolution) ----
 * The same descriptor, read as the layer's: c_in, h_in, w_in the bottom's, c_out,
 * h_out, w_out the top's, H_out = (H - 1)*sh - 2*ph + dh*(kh-1) + 1, likewise W_out;
 * the convolution from (C_out, H_out, W_out) back to (C_in, H, W) with the same
 * kernel, stride, pad, dilation and group has these weights and is its transpose. */
/* out (N,C_out,Ho,Wo); in (N,C_in,H,W); w (C_in, C_out/group, kh, kw); b (C_out) or NULL */
void deconv_forward(float *out, const float *in, const float *w, const float *b, const struct conv_desc *d);
void deconv_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		     const float *w, const struct conv_desc *d);

/* ---- inner product: out = in · Wᵀ + b, Caffe's weight layout (M, K) ---- */
struct ip_desc {
	int n, k, m; /* batch, inputs (C*H*W of the bottom), outputs (num_output) */
	int bias;
};
/* out (N,M); in (N,K); w (M,K); b (M) or NULL */
void ip_forward(float *out, const float *in, const float *w, const float *b, const struct ip_desc *d);
void ip_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		 const float *w, const struct ip_desc *d);

/* ---- pooling (Caffe: output size rounds UP, windows clipped to the padded input;
 * AVE divides by the window size clipped to input+pad, as Caffe does) ---- */
enum pool_method { POOL_MAX, POOL_AVE };
struct pool_desc {
	int n, c, h_in, w_in, h_out, w_out;
	int kh, kw, sh, sw, ph, pw;
	enum pool_method method;
	int global; /* kernel = whole input, stride 1, pad 0 */
};
/* Caffe's rule: H_out = ceil((H + 2*ph - kh) / sh) + 1, minus one if there is padding
 * and the last window would start at or beyond H + ph (in the padding only).  Without
 * padding Caffe keeps such a window (only possible when kernel < stride; PyTorch's
 * ceil_mode drops it); it holds no input and pool_forward writes 0 there (mask -1).
 * Global pooling: sets kh, kw to H, W, stride 1, pad 0 (the forward honours `global`
 * even when this was not called). */
void pool_out_size(struct pool_desc *d);
/* mask (N,C,Ho,Wo) int32: index iy*W+ix of the max within the input plane, the first
 * in row order on ties (MAX only; may be NULL for AVE and when no backward follows) */
void pool_forward(float *out, int32_t *mask, const float *in, const struct pool_desc *d);
void pool_backward(float *din, const float *dout, const int32_t *mask, const struct pool_desc *d);

/* ---- element-wise activations over `count` values ---- */
void relu_forward(float *out, const float *in, int64_t count, float negative_slope);
void relu_backward(float *din, const float *dout, const float *in, int64_t count, float negative_slope);
void sigmoid_forward(float *out, const float *in, int64_t count);
void sigmoid_backward(float *din, const float *dout, const float *out, int64_t count);
void tanh_forward(float *out, const float *in, int64_t count);
void tanh_backward(float *din, const float *dout, const float *out, int64_t count);
/* Caffe's Power: out = (shift + scale * in) ^ power; power*scale == 0 gives the constant
 * 1 (power 0) or shift^power, with gradient 0.  The gradient is
 * power*scale*(shift + scale*in)^(power-1), equal to Caffe's power*y/(shift + scale*in)
 * except where that base is 0 (Caffe: NaN; here the limit). */
void power_forward(float *out, const float *in, int64_t count, float power, float scale, float shift);
void power_backward(float *din, const float *dout, const float *in, int64_t count, float power,
		    float scale, float shift);

/* ---- dropout: inverted (Caffe scales by 1/(1-ratio) in training, identity in test) ---- */
/* mask (count) uint8 1 = kept, drawn from *rng (a splitmix64 state) in training: a value
 * is kept with probability 1 - ratio.  Test phase (training 0): out = in, mask (if not
 * NULL) set to all ones, rng unused (may be NULL).  Backward: a NULL mask means the
 * test phase, din += dout. */
void dropout_forward(float *out, uint8_t *mask, const float *in, int64_t count, float ratio,
		     int training, uint64_t *rng);
void dropout_backward(float *din, const float *dout, const uint8_t *mask, int64_t count, float ratio);

/* ---- LRN across channels (Caffe): scale = k + alpha/size * sum(x² over the window),
 * out = in * scale^-beta ---- */
struct lrn_desc {
	int n, c, h, w;
	int size; /* odd */
	float alpha, beta, k;
};
/* scale (N,C,H,W) scratch written by forward, read by backward; out is the forward's */
void lrn_forward(float *out, float *scale, const float *in, const struct lrn_desc *d);
void lrn_backward(float *din, const float *dout, const float *out, const float *in,
		  const float *scale, const struct lrn_desc *d);

/* ---- batch norm (Caffe's BatchNorm: normalisation only, no affine; Scale follows) ----
 * Training: batch mean/variance over (N,H,W) per channel; the stored statistics
 * are updated as Caffe does: mean_acc = maf*mean_acc + mean, var_acc likewise with
 * the unbiased variance, factor = maf*factor + 1; use_global: normalise with
 * mean_acc/factor and var_acc/factor. */
struct bn_desc {
	int n, c, h, w;
	float eps;                     /* 1e-5 */
	float moving_average_fraction; /* 0.999 */
	int use_global_stats;          /* test phase */
};
/* stats: mean_acc (C), var_acc (C), factor (1) — Caffe's three blobs, updated in
 * training.  saved_mean, saved_invstd (C): scratch for backward (either may be NULL
 * when none follows).  Batch statistics are used when training && !use_global_stats
 * (the caller resolves Caffe's default use_global_stats = phase == TEST into the
 * desc); otherwise mean = mean_acc/factor, var = var_acc/factor (0 when factor is 0)
 * and the blobs are not touched.  out = (in - mean) / sqrt(var + eps).
 * bn_backward: `out` is the normalised output bn_forward wrote (Caffe's x_norm — keep
 * it if a Scale runs in place); `global` (or d->use_global_stats) selects
 * din += dout*invstd, else the batch-statistics gradient. */
void bn_forward(float *out, float *mean_acc, float *var_acc, float *factor, float *saved_mean,
		float *saved_invstd, const float *in, const struct bn_desc *d, int training);
void bn_backward(float *din, const float *dout, const float *out, const float *saved_invstd,
		 const struct bn_desc *d, int global);

/* ---- Scale (per-channel γ, optional β, axis 1) ---- */
struct scale_desc {
	int n, c, inner; /* inner = H*W */
	int bias;
};
void scale_forward(float *out, const float *in, const float *gamma, const float *beta,
		   const struct scale_desc *d);
void scale_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
		    const float *gamma, const struct scale_desc *d);

/* ---- Eltwise over k inputs of `count` values ---- */
enum eltwise_op { ELTWISE_PROD, ELTWISE_SUM, ELTWISE_MAX };
/* coeffs (k) for SUM or NULL for all 1; argmax (count) int32 scratch for MAX (may be
 * NULL when no backward follows).  MAX ties as Caffe: between inputs 0 and 1 input 1
 * wins, a later input must be strictly greater.  PROD's gradient is the product of
 * the other inputs (Caffe's stable_prod_grad); `out` is unused.  din or any din[i]
 * may be NULL. */
void eltwise_forward(float *out, int32_t *argmax, const float *const *in, int k, int64_t count,
		     enum eltwise_op op, const float *coeffs);
void eltwise_backward(float *const *din, const float *dout, const float *const *in,
		      const float *out, const int32_t *argmax, int k, int64_t count, enum eltwise_op op,
		      const float *coeffs);

/* ---- Concat along channels (axis 1) of k inputs (N, C_i, inner) ---- */
void concat_forward(float *out, const float *const *in, const int *c, int k, int n, int inner);
void concat_backward(float *const *din, const float *dout, const int *c, int k, int n, int inner);

/* ---- softmax over axis 1: (N, C, inner) ---- */
void softmax_forward(float *out, const float *in, int n, int c, int inner);
void softmax_backward(float *din, const float *dout, const float *out, int n, int c, int inner);

/* ---- SoftmaxWithLoss: cross-entropy summed over the N*inner labelled positions and
 * divided by Caffe's normaliser (loss_normalizer); a label equal to ignore_label (< 0
 * means none) is skipped, and so is one outside [0, C), which Caffe would read out
 * of bounds.  -log clamps the probability at FLT_MIN as Caffe.  labels (N, inner) as
 * floats, Caffe's label blob.  prob (N,C,inner) is written; returns the loss. ---- */
enum loss_norm { LOSS_NORM_FULL, LOSS_NORM_VALID, LOSS_NORM_BATCH_SIZE, LOSS_NORM_NONE }; /* net.h's order */
/* Caffe's LossLayer::GetNormalizer: FULL n*inner, VALID valid, BATCH_SIZE n, NONE 1;
 * never below 1. */
double loss_normalizer(enum loss_norm norm, int n, int inner, int valid);
float softmax_loss_forward(float *prob, const float *in, const float *labels, int n, int c,
			   int inner, int ignore_label, enum loss_norm norm);
/* din += loss_weight * (prob - onehot) / normaliser */
void softmax_loss_backward(float *din, const float *prob, const float *labels, int n, int c,
			   int inner, int ignore_label, enum loss_norm norm, float loss_weight);

/* ---- EuclideanLoss (Caffe): loss = Σ (a − b)² / (2N) over count values, N the
 * batch.  diff (count) = a − b is written for the backward. ---- */
float euclidean_loss_forward(float *diff, const float *a, const float *b, int n, int64_t count);
/* da += loss_weight · diff / N, db −= the same; either may be NULL */
void euclidean_loss_backward(float *da, float *db, const float *diff, int n, int64_t count, float loss_weight);

/* ---- Crop (Caffe): out = in[off0 : off0 + out0, ..., off3 : off3 + out3], both
 * dense with ndim axes (1 to 4); off is 0 on the axes before crop_param.axis ---- */
struct crop_desc {
	int ndim;
	int in[4], out[4], off[4]; /* shapes and the window's start, per axis */
};
void crop_forward(float *out, const float *in, const struct crop_desc *d);
/* din += dout inside the window; nothing outside it (its gradient is 0) */
void crop_backward(float *din, const float *dout, const struct crop_desc *d);

/* ---- Accuracy: fraction of the N*inner positions whose label is in the top_k
 * scores.  Ties count against the label, as Caffe since its 2017 rewrite: a position
 * is correct when fewer than top_k OTHER classes score >= the label's score (so a
 * constant output scores 0, not 1).  Positions labelled ignore_label (< 0 means none)
 * are not counted; a label outside [0, C) counts as a miss; 0 when none counts. ---- */
float accuracy_forward(const float *in, const float *labels, int n, int c, int inner, int top_k,
		       int ignore_label);

#endif
