/* cpu_ops.h — convolution and inner product on oneDNN 2.6 (the CPU backend's
 * fast path).  Same arguments and semantics as the reference kernels in
 * networks/ref.h, which are the oracle these are tested against
 * (tests/unit/test_dnnl.c):
 *
 *   - outputs first, then inputs, then the shape descriptor; float32, dense NCHW;
 *   - a forward overwrites its output;
 *   - a backward ADDS into din, dw and db, and any of them may be NULL (that
 *     gradient is then not computed);
 *   - Caffe's convolution: group, dilation (Caffe's 1 = none; oneDNN's is d - 1),
 *     per-axis pad and stride, output size from conv_out_size().
 *
 * Unlike the reference kernels these can fail, so they return an int status:
 * DD_OK (0), or a negative DD_E* code from common/err.h —
 *   DD_EINVAL    a descriptor oneDNN rejects (inconsistent sizes, group not
 *                dividing the channels, ...);
 *   DD_ENOMEM    a temporary gradient buffer could not be allocated;
 *   DD_EINTERNAL oneDNN failed otherwise (no CPU engine, no implementation,
 *                execution failed).
 * On failure a forward's `out` is unspecified; a backward has added nothing (its
 * primitives all run into temporaries before any gradient is touched).
 *
 * One CPU engine (index 0) and one stream are created, once, by the first call
 * (pthread_once); they live until the process exits.  Calls may come from
 * several threads, but each runs its primitive on the same stream and oneDNN's
 * CPU runtime parallelises inside a call, so concurrent calls are not expected.
 * Primitives are created per call for now (TODO: a cache keyed by the
 * descriptor, as the layer set of a network is fixed after it is built).
 *
 * NOTE: oneDNN owns the dnnl_ prefix; the functions below are ours. */
#ifndef DD_CPU_OPS_H
#define DD_CPU_OPS_H

#include "../ref.h"

/* out (N,C_out,Ho,Wo); in (N,C_in,H,W); w (C_out, C_in/group, kh, kw); b (C_out) or NULL */
int cpu_conv_forward(float *out, const float *in, const float *w, const float *b,
		      const struct conv_desc *d);
/* din (N,C_in,H,W) += ∂L/∂in; dw (C_out, C_in/group, kh, kw) += ∂L/∂w; db (C_out) += ∂L/∂b;
 * each may be NULL.  dout (N,C_out,Ho,Wo); in and w as the forward's. */
int cpu_conv_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		       const float *w, const struct conv_desc *d);

/* out (N,M) = in (N,K) · w (M,K)ᵀ + b (M) or NULL */
int cpu_ip_forward(float *out, const float *in, const float *w, const float *b,
		    const struct ip_desc *d);
/* din (N,K) +=, dw (M,K) +=, db (M) +=; each may be NULL. */
int cpu_ip_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		     const float *w, const struct ip_desc *d);

#endif
