/* backend_cuda.cu — the "cuda" backend: a graph's layers on an NVIDIA GPU, built as
 * the plugin build/libdeepdesk-cuda.so that networks/backend.c loads with dlopen.
 *
 * Native: Convolution on cuDNN (forward, backward data, backward filter; the
 * algorithm from cuDNN's v7 heuristics under a workspace cap, deterministic ones
 * only when asked), Deconvolution on the same three passes swapped (deconv_init;
 * FP32 always), LRN on cuDNN, InnerProduct on cuBLAS,
 * and small kernels for the rest: bias add and bias/scale gradients, pooling (Caffe's
 * ceil-mode windows exactly, which cuDNN cannot express), ReLU, Sigmoid, TanH, Power,
 * Dropout (the graph's splitmix64 stream, one counter per element), Softmax,
 * SoftmaxWithLoss, Accuracy, BatchNorm, Eltwise, Concat, Scale, Flatten, and the
 * solver updates.  Only an in-place LRN and an Eltwise of more than 8 inputs run
 * on the reference kernels, on the host (host fallback).
 *
 * Design note.
 *
 * Memory: the graph's arenas come from cudaMallocManaged (the alloc hook), so the
 * host code that still touches blobs — the feed writing a batch, the loss read,
 * snapshots, a host-fallback layer — reads and writes them directly.  Everything
 * the device does is queued on one stream; the graph and the solver call sync
 * before the host touches the arenas, and a host-fallback layer syncs before it
 * runs.  The data blob, which the host writes every step, is moved in bulk:
 * to the device before the first layer reads it, back to the host after the last
 * (prefetch_data).  The arenas are held to the GPU's free memory (cu_alloc), since
 * managed memory would rather page than fail.  Per-layer state (a pooling argmax,
 * a dropout mask, softmax probabilities) is device memory from cudaMalloc, owned
 * by the layer's struct cu_layer.
 *
 * Semantics are the reference kernels' (ref.h, backend_impl.h): a forward
 * overwrites its top, a backward ADDS into dx and dw — cuDNN and cuBLAS are called
 * with beta = 1 for gradients, and the kernels below add.  Reductions that the
 * reference does in double (softmax sums, the loss, bias and scale gradients) are
 * done in double here too, each by one thread or one block in a fixed order, so
 * that a run repeats bit for bit (deterministic mode only has to pin cuDNN).
 *
 * Precision: FP32 by default; cuDNN is held to FMA math (no TF32) so that the
 * parity tests compare like with like.  DEEPDESK_CUDA_TF32=1 lets cuDNN and cuBLAS
 * use TF32 tensor cores (faster, ~1e-3 relative error).
 *
 * Mixed precision (set_precision, FP16 or BF16) touches convolution and inner
 * product only, at their boundaries: their inputs, weights and incoming gradients
 * are converted into a shared half-precision scratch (lp), cuDNN runs with half
 * tensors, FP32 compute and tensor-op math, and cuBLAS with cublasGemmEx
 * (CUBLAS_COMPUTE_32F) writing FP32 directly; cuDNN's half results are widened and
 * added into the FP32 blobs.  Activations, their gradients, the master weights and
 * the solver stay FP32.  Why boundaries and not half activations: every other
 * kernel, the host-fallback layers, snapshots and the feed keep working unchanged,
 * and the conversions are elementwise passes that cost little next to the
 * convolutions; the price is the extra memory traffic and the scratch.  FP16 uses
 * dynamic loss scaling: the softmax loss's seed gradient is multiplied by the scale
 * S (2^16 at first), and a convolution's weight gradient (a sum over the batch) is
 * written in half precision unscaled and rescaled in FP32; unscale checks the gradient arena for inf/NaN — then the step
 * is skipped and S halved — else multiplies it by 1/S, and doubles S after
 * GROWTH_STEPS clean steps.  BF16 has FP32's range and needs no scaling.
 *
 * Uploads (cu_upload, feed.h's device path): a batch of 8-bit planes and its crop
 * windows and flips are copied into device buffers of the context's own and
 * k_upload writes the data blob with feed_transform's FP32 operations (explicitly
 * rounded, so no FMA contraction can change a bit); the mean is copied once per
 * host pointer.
 *
 * Errors: every CUDA, cuDNN and cuBLAS status is checked; a failure becomes a
 * struct dd_err naming the layer, and running out of GPU memory names the batch
 * size and suggests a smaller one.  Nothing here aborts.
 *
 * Invariant: a struct cu_layer is either host (ref holds the reference state, the
 * layer runs on the host after a sync) or has every descriptor, algorithm and
 * buffer its type needs; nothing is allocated after layer_init except the shared
 * workspace, which only grows there. */
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <nccl.h>

#include "../../common/rng.h"

extern "C" {
#include "../backend_impl.h"
}

/* the cap on a convolution's cuDNN workspace */
#define WS_CAP ((size_t)1 << 30)
/* FP16's loss scale: the first, and clean steps before it doubles (PyTorch's
 * GradScaler uses the same two) */
#define SCALE_START 65536.0f
#define GROWTH_STEPS 2000

struct cuda_ctx {
	struct backend be;          /* what the program holds; be.ctx points here */
	struct backend_host host;   /* the reference kernels, for host-fallback layers */
	int device;
	int deterministic;
	int tf32;
	cudaStream_t stream;
	cudnnHandle_t dnn;
	cublasHandle_t blas;
	void *ws;                   /* (ws_bytes) the running convolution's workspace */
	size_t ws_bytes;
	char gpu_name[96];
	size_t budget;              /* bytes the arenas may take: free memory at start less a reserve */
	size_t used;                /* bytes the arenas take now */
	/* the data blobs the host writes each step (a data layer's top), prefetched to
	 * the device when a layer reads them rather than faulted in page by page */
	const void *data[8];
	size_t data_bytes[8];
	int data_uploaded[8];       /* written by cu_upload on the device: never sent back to the host */
	int ndata;
	/* mixed precision */
	int prec;                   /* enum backend_precision */
	void *lp;                   /* (lp_bytes) half-precision scratch of the running layer */
	size_t lp_bytes;
	float scale;                /* FP16's loss scale (1 otherwise) */
	int clean;                  /* steps since the scale last changed */
	int *flag;                  /* (1) device: a non-finite gradient was seen */
	int nlayers;                /* layer states alive (the precision is fixed while any is) */
	/* uploads (cu_upload): device copies of the last batch, its geometry, the mean */
	uint8_t *up_px;
	size_t up_px_bytes;
	int32_t *up_geo;            /* (3 n): y0, x0, flip of each sample */
	size_t up_geo_bytes;
	float *up_mean;
	size_t up_mean_bytes;
	const float *up_mean_of;    /* the host mean up_mean copies */
	/* a group of GPUs (deepdesk_cuda_create_group): this one's NCCL communicator */
	ncclComm_t nccl;
	cudaError_t async_err;      /* the first error a sync saw (a kernel that failed after its launch) */
	float *ar_buf;              /* device memory the all-reduce runs in (not managed) */
	size_t ar_bytes;
};

struct cu_layer {
	int host;                   /* 1: runs on the reference kernels on the host */
	void *ref;                  /* their state, when host */
	/* convolution */
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	cudnnConvolutionFwdAlgo_t fwd_algo;
	cudnnConvolutionBwdDataAlgo_t bwd_data_algo;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo;
	cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math; /* what each algorithm asked for */
	/* LRN */
	cudnnLRNDescriptor_t lrn;
	/* device scratch */
	int32_t *argmax;            /* pool MAX (N,C,Ho,Wo); eltwise MAX (count) */
	uint8_t *mask;              /* dropout (count) */
	float *prob;                /* softmax loss (N,C,inner) */
	int *valid;                 /* softmax loss: counted positions (1) */
	float *invstd;              /* batch norm: 1/std of each channel, forward to backward (C) */
	int lp;                     /* conv/IP: runs in cx->prec (layer_init's) */
	int64_t nx, nw, ny;         /* lp: elements of input, weights, output, each padded to 64 */
	const void *data;           /* a data layer: its top, registered for prefetching */
};

static struct cuda_ctx *ctx_of(struct backend *be) { return (struct cuda_ctx *)be->ctx; }

/* ---- errors (dd_err_set: common/err.c, linked into the plugin) ---- */

static const char *lname(const struct backend_layer *bl) { return bl && bl->l ? bl->l->name : "?"; }
static int batch_of(const struct backend_layer *bl) { return bl ? bl->n : 0; }

/* What CUDA, cuDNN and cuBLAS all say when the device's memory ran out. */
static int gpu_oom(struct dd_err *err, const struct backend_layer *bl, const char *what)
{
	return dd_err_set(err, DD_ENOMEM, "layer '%s': out of GPU memory (%s) at batch size %d: try a smaller batch size",
			  lname(bl), what, batch_of(bl));
}

static int cuda_fail(struct dd_err *err, const struct backend_layer *bl, cudaError_t e, const char *what)
{
	cudaGetLastError(); /* clear a sticky-less error so the next call starts clean */
	if (e == cudaErrorMemoryAllocation)
		return gpu_oom(err, bl, what);
	return dd_err_set(err, DD_EINTERNAL, "layer '%s': %s: %s", lname(bl), what, cudaGetErrorString(e));
}

/* The thread on cx's GPU, and an error that an earlier kernel left (cu_sync saw
 * it) reported before anything more is queued behind it. */
static int ready(struct cuda_ctx *cx, const struct backend_layer *bl, struct dd_err *err);

static int dnn_fail(struct dd_err *err, const struct backend_layer *bl, cudnnStatus_t s, const char *what)
{
	if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
	    s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
		return gpu_oom(err, bl, what);
	return dd_err_set(err, DD_EINTERNAL, "layer '%s': cuDNN %s: %s", lname(bl), what, cudnnGetErrorString(s));
}

static int blas_fail(struct dd_err *err, const struct backend_layer *bl, cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_ALLOC_FAILED)
		return gpu_oom(err, bl, what);
	return dd_err_set(err, DD_EINTERNAL, "layer '%s': cuBLAS %s failed (status %d)", lname(bl), what, (int)s);
}

/* Return fail(err, bl, status, what) when call's status of type T is not ok. */
#define CALL_OK(T, ok, fail, call, what)                          \
	do {                                                      \
		T st_ = (call);                                   \
		if (st_ != (ok))                                  \
			return fail(err, bl, st_, what);          \
	} while (0)
#define CU(call, what) CALL_OK(cudaError_t, cudaSuccess, cuda_fail, call, what)
#define DNN(call, what) CALL_OK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, dnn_fail, call, what)
#define BLAS(call, what) CALL_OK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, blas_fail, call, what)
/* after a kernel launch */
#define LAUNCHED(what) CU(cudaGetLastError(), what)

/* ---- kernels ---- */

#define THREADS 256
static unsigned blocks_for(int64_t n)
{
	int64_t b = (n + THREADS - 1) / THREADS;
	return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}
#define FOR_EACH(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* y[(n, c, p)] += b[c] */
__global__ void k_bias_add(float *y, const float *b, int64_t count, int c, int inner)
{
	FOR_EACH(i, count) y[i] += b[(i / inner) % c];
}

/* mixed precision: FP32 to half and back; k_widen: y = beta·y + x (beta 0 or 1) */
__device__ inline void narrow_to(__half *o, float v) { *o = __float2half_rn(v); }
__device__ inline void narrow_to(__nv_bfloat16 *o, float v) { *o = __float2bfloat16_rn(v); }
__device__ inline float widen_of(__half v) { return __half2float(v); }
__device__ inline float widen_of(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __global__ void k_narrow(T *o, const float *x, int64_t n)
{
	FOR_EACH(i, n) narrow_to(&o[i], x[i]);
}
template <typename T> __global__ void k_widen(float *y, const T *x, int64_t n, int add, float mult)
{
	FOR_EACH(i, n) y[i] = add ? y[i] + mult * widen_of(x[i]) : mult * widen_of(x[i]);
}
/* x[i] *= a */
__global__ void k_scale_by(float *x, int64_t n, float a)
{
	FOR_EACH(i, n) x[i] *= a;
}
/* *flag = 1 if some x[i] is inf or NaN */
__global__ void k_nonfinite(int *flag, const float *x, int64_t n)
{
	FOR_EACH(i, n) if (!isfinite(x[i])) *flag = 1;
}

/* an upload (backend_upload): out = (px − mean) · scale over each sample's window,
 * mirrored where its flip says; the same FP32 operations as feed_transform */
struct upload_k {
	int n, c, h, w, oh, ow;
	float scale;
};
__global__ void k_upload(float *out, const uint8_t *px, const int32_t *geo, const float *mean, struct upload_k u)
{
	int64_t per = (int64_t)u.c * u.oh * u.ow, total = per * u.n;
	FOR_EACH(i, total) {
		int64_t s = i / per, r = i % per;
		int ch = (int)(r / ((int64_t)u.oh * u.ow));
		int y = (int)(r / u.ow % u.oh), xo = (int)(r % u.ow);
		int y0 = geo[3 * s], x0 = geo[3 * s + 1], flip = geo[3 * s + 2];
		int x = flip ? u.ow - 1 - xo : xo;
		int64_t at = ((int64_t)ch * u.h + y + y0) * u.w + x0 + x;
		float v = (float)px[s * (int64_t)u.c * u.h * u.w + at];
		out[i] = mean ? __fmul_rn(__fsub_rn(v, mean[at]), u.scale) : __fmul_rn(v, u.scale);
	}
}

/* The sum of v over the block (every thread gets it); red: THREADS doubles. */
__device__ double block_sum(double v, double *red)
{
	red[threadIdx.x] = v;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			red[threadIdx.x] += red[threadIdx.x + w];
		__syncthreads();
	}
	double r = red[0];
	__syncthreads();
	return r;
}

/* out[c] += Σ_{n,p} a[n,c,p] · (m ? m[n,c,p] : 1), in double, one block per channel
 * in a fixed order (bias and scale gradients) */
__global__ void k_channel_sum(float *out, const float *a, const float *m, int n, int c, int inner)
{
	__shared__ double part[THREADS];
	int ch = blockIdx.x;
	double s = 0;
	int64_t total = (int64_t)n * inner;
	for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
		int64_t b = j / inner, p = j % inner;
		int64_t at = (b * c + ch) * inner + p;
		s += m ? (double)a[at] * m[at] : (double)a[at];
	}
	s = block_sum(s, part);
	if (threadIdx.x == 0)
		out[ch] += (float)s;
}

__global__ void k_add(float *dst, const float *src, int64_t n)
{
	FOR_EACH(i, n) dst[i] += src[i];
}

__global__ void k_relu_fwd(float *y, const float *x, int64_t n, float slope)
{
	FOR_EACH(i, n) y[i] = x[i] > 0 ? x[i] : x[i] * slope;
}
__global__ void k_relu_bwd(float *dx, const float *dy, const float *x, int64_t n, float slope)
{
	FOR_EACH(i, n) dx[i] += dy[i] * (x[i] > 0 ? 1.0f : slope);
}
__global__ void k_sigmoid_fwd(float *y, const float *x, int64_t n)
{
	FOR_EACH(i, n) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
__global__ void k_sigmoid_bwd(float *dx, const float *dy, const float *y, int64_t n)
{
	FOR_EACH(i, n) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}
__global__ void k_tanh_fwd(float *y, const float *x, int64_t n)
{
	FOR_EACH(i, n) y[i] = tanhf(x[i]);
}
__global__ void k_tanh_bwd(float *dx, const float *dy, const float *y, int64_t n)
{
	FOR_EACH(i, n) dx[i] += dy[i] * (1.0f - y[i] * y[i]);
}
__global__ void k_power_fwd(float *y, const float *x, int64_t n, float power, float scale, float shift)
{
	FOR_EACH(i, n)
	{
		if (power * scale == 0.0f) {
			y[i] = power == 0.0f ? 1.0f : powf(shift, power);
		} else {
			float u = shift + scale * x[i];
			y[i] = power == 1.0f ? u : powf(u, power);
		}
	}
}
/* ref.h: d/dx = power·scale·(shift + scale·x)^(power-1); 0 when power·scale is 0 */
__global__ void k_power_bwd(float *dx, const float *dy, const float *x, int64_t n, float power, float scale,
			    float shift)
{
	FOR_EACH(i, n)
	{
		if (power * scale == 0.0f)
			continue;
		float u = shift + scale * x[i];
		float g = power == 1.0f ? scale : power == 2.0f ? 2.0f * scale * u : power * scale * powf(u, power - 1.0f);
		dx[i] += dy[i] * g;
	}
}

/* Dropout on the graph's splitmix64 stream (common/rng.h): element i takes the
 * (i+1)-th value after state s0, which is what the reference's sequential draws give. */
__global__ void k_dropout_fwd(float *y, uint8_t *mask, const float *x, int64_t n, float ratio, float scale,
			      uint64_t s0)
{
	FOR_EACH(i, n)
	{
		double u = rng_unit(rng_at(s0, (uint64_t)(i + 1)));
		uint8_t keep = u >= ratio;
		mask[i] = keep;
		y[i] = keep ? x[i] * scale : 0.0f;
	}
}
__global__ void k_dropout_bwd(float *dx, const float *dy, const uint8_t *mask, int64_t n, float scale)
{
	FOR_EACH(i, n) dx[i] += mask ? (mask[i] ? dy[i] * scale : 0.0f) : dy[i];
}

/* ref.c's ceil-mode pooling, one output per thread (forward) and one input per
 * thread, gathering its windows in output order (backward: no atomics, the
 * reference's order of additions). */
struct pool_k {
	int n, c, h, w, ho, wo, kh, kw, sh, sw, ph, pw, max;
};
__global__ void k_pool_fwd(float *y, int32_t *argmax, const float *x, struct pool_k p)
{
	int64_t total = (int64_t)p.n * p.c * p.ho * p.wo;
	FOR_EACH(i, total)
	{
		int ox = (int)(i % p.wo), oy = (int)((i / p.wo) % p.ho);
		int64_t nc = i / ((int64_t)p.wo * p.ho);
		const float *ip = x + nc * p.h * p.w;
		int y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw, y1 = y0 + p.kh, x1 = x0 + p.kw;
		if (p.max) {
			y1 = min(y1, p.h), x1 = min(x1, p.w), y0 = max(y0, 0), x0 = max(x0, 0);
			float best = -FLT_MAX;
			int32_t arg = -1;
			for (int iy = y0; iy < y1; iy++)
				for (int ix = x0; ix < x1; ix++)
					if (arg < 0 || ip[iy * p.w + ix] > best) {
						best = ip[iy * p.w + ix];
						arg = iy * p.w + ix;
					}
			y[i] = arg < 0 ? 0.0f : best;
			if (argmax)
				argmax[i] = arg;
		} else {
			y1 = min(y1, p.h + p.ph), x1 = min(x1, p.w + p.pw);
			int size = (y1 - y0) * (x1 - x0);
			y0 = max(y0, 0), x0 = max(x0, 0), y1 = min(y1, p.h), x1 = min(x1, p.w);
			double acc = 0;
			for (int iy = y0; iy < y1; iy++)
				for (int ix = x0; ix < x1; ix++)
					acc += ip[iy * p.w + ix];
			y[i] = (y0 < y1 && x0 < x1) ? (float)(acc / size) : 0.0f;
		}
	}
}
__global__ void k_pool_bwd(float *dx, const float *dy, const int32_t *argmax, struct pool_k p)
{
	int64_t total = (int64_t)p.n * p.c * p.h * p.w;
	FOR_EACH(i, total)
	{
		int ix = (int)(i % p.w), iy = (int)((i / p.w) % p.h);
		int64_t nc = i / ((int64_t)p.w * p.h);
		const float *go = dy + nc * p.ho * p.wo;
		/* windows oy with oy·sh − ph ≤ iy < oy·sh − ph + kh */
		int oy0 = iy + p.ph - p.kh + 1, ox0 = ix + p.pw - p.kw + 1;
		oy0 = oy0 <= 0 ? 0 : (oy0 + p.sh - 1) / p.sh;
		ox0 = ox0 <= 0 ? 0 : (ox0 + p.sw - 1) / p.sw;
		int oy1 = min((iy + p.ph) / p.sh + 1, p.ho), ox1 = min((ix + p.pw) / p.sw + 1, p.wo);
		float acc = dx[i];
		for (int oy = oy0; oy < oy1; oy++)
			for (int ox = ox0; ox < ox1; ox++) {
				int o = oy * p.wo + ox;
				if (p.max) {
					if (argmax[nc * p.ho * p.wo + o] == iy * p.w + ix)
						acc += go[o];
				} else {
					int y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
					int y1 = min(y0 + p.kh, p.h + p.ph), x1 = min(x0 + p.kw, p.w + p.pw);
					int size = (y1 - y0) * (x1 - x0);
					acc += go[o] / (float)size;
				}
			}
		dx[i] = acc;
	}
}

/* softmax over axis 1 of (N, C, inner), one position per thread, sums in double */
__global__ void k_softmax_fwd(float *y, const float *x, int n, int c, int inner)
{
	FOR_EACH(i, (int64_t)n * inner)
	{
		int64_t b = i / inner, p = i % inner;
		const float *xp = x + b * c * inner + p;
		float *yp = y + b * c * inner + p;
		float mx = xp[0];
		for (int j = 1; j < c; j++)
			mx = fmaxf(mx, xp[(int64_t)j * inner]);
		double sum = 0;
		for (int j = 0; j < c; j++)
			sum += exp((double)xp[(int64_t)j * inner] - mx);
		for (int j = 0; j < c; j++)
			yp[(int64_t)j * inner] = (float)(exp((double)xp[(int64_t)j * inner] - mx) / sum);
	}
}
__global__ void k_softmax_bwd(float *dx, const float *dy, const float *y, int n, int c, int inner)
{
	FOR_EACH(i, (int64_t)n * inner)
	{
		int64_t b = i / inner, p = i % inner;
		int64_t at = b * c * inner + p;
		double dot = 0;
		for (int j = 0; j < c; j++)
			dot += (double)dy[at + (int64_t)j * inner] * y[at + (int64_t)j * inner];
		for (int j = 0; j < c; j++) {
			int64_t q = at + (int64_t)j * inner;
			dx[q] += (float)(y[q] * (dy[q] - dot));
		}
	}
}

__device__ int label_counts(int label, int c, int ignore)
{
	return !(ignore >= 0 && label == ignore) && label >= 0 && label < c;
}

/* ref.c's loss_normalizer (norm: enum loss_norm) */
__device__ double normalizer_of(int norm, int n, int inner, int valid)
{
	double v = norm == LOSS_NORM_FULL ? (double)n * inner
		 : norm == LOSS_NORM_VALID ? valid
		 : norm == LOSS_NORM_BATCH_SIZE ? n
					      : 1;
	return v > 1 ? v : 1;
}

/* one block: loss = −Σ log(max(prob[label], FLT_MIN)) / the normaliser into out[0] */
__global__ void k_softmax_loss(float *out, int *valid_out, const float *prob, const float *labels, int n, int c,
			       int inner, int ignore, int norm)
{
	__shared__ double part[THREADS];
	double s = 0;
	int v = 0;
	for (int i = threadIdx.x; i < n * inner; i += blockDim.x) {
		int b = i / inner, p = i % inner;
		int label = (int)labels[i];
		if (!label_counts(label, c, ignore))
			continue;
		float pr = prob[((int64_t)b * c + label) * inner + p];
		s -= log(pr > FLT_MIN ? (double)pr : (double)FLT_MIN);
		v++;
	}
	s = block_sum(s, part);
	v = (int)block_sum(v, part); /* a count, exact in a double */
	if (threadIdx.x == 0) {
		*valid_out = v;
		out[0] = (float)(s / normalizer_of(norm, n, inner, v));
	}
}
__global__ void k_softmax_loss_bwd(float *dx, const float *prob, const float *labels, const int *valid,
				   const float *lw, int n, int c, int inner, int ignore, int norm)
{
	FOR_EACH(i, (int64_t)n * c * inner)
	{
		int64_t p = i % inner, b = i / ((int64_t)c * inner);
		int j = (int)((i / inner) % c);
		int label = (int)labels[b * inner + p];
		if (!label_counts(label, c, ignore))
			continue;
		double w = (double)lw[0] / normalizer_of(norm, n, inner, *valid);
		dx[i] += (float)(w * (prob[i] - (j == label ? 1.0 : 0.0)));
	}
}

/* EuclideanLoss: diff = a − b, then one block sums diff² / (2n) into out[0] */
__global__ void k_sub(float *d, const float *a, const float *b, int64_t m)
{
	FOR_EACH(i, m) d[i] = a[i] - b[i];
}
__global__ void k_euclidean(float *out, const float *d, int64_t m, int n)
{
	__shared__ double part[THREADS];
	double s = 0;
	for (int64_t i = threadIdx.x; i < m; i += blockDim.x)
		s += (double)d[i] * d[i];
	s = block_sum(s, part);
	if (threadIdx.x == 0)
		out[0] = (float)(s / (2.0 * (n > 0 ? n : 1)));
}
/* x += sign · lw[0] / n · d */
__global__ void k_euclidean_bwd(float *x, const float *d, const float *lw, int64_t m, int n, float sign)
{
	float w = sign * lw[0] / (float)(n > 0 ? n : 1);
	FOR_EACH(i, m) x[i] += w * d[i];
}

/* Crop (ref.c's crop_desc as four axes, leading ones 1): input index of output i */
struct crop_k {
	int in[4], out[4], off[4];
};
static struct crop_k crop_k_of(const struct crop_desc *d)
{
	struct crop_k k;
	int lead = 4 - d->ndim;
	for (int a = 0; a < 4; a++) {
		int j = a - lead;
		k.in[a] = j < 0 ? 1 : d->in[j];
		k.out[a] = j < 0 ? 1 : d->out[j];
		k.off[a] = j < 0 ? 0 : d->off[j];
	}
	return k;
}
__device__ int64_t crop_src(const struct crop_k *k, int64_t i)
{
	int64_t src = 0, rest = i, stride = 1;
	for (int a = 3; a >= 0; a--) {
		int64_t pos = rest % k->out[a] + k->off[a];
		rest /= k->out[a];
		src += pos * stride;
		stride *= k->in[a];
	}
	return src;
}
/* forward: y[i] = x[src(i)]; backward: x[src(i)] += y[i] (the windows do not overlap) */
__global__ void k_crop(float *y, float *x, struct crop_k k, int64_t m, int backward)
{
	FOR_EACH(i, m)
	{
		int64_t j = crop_src(&k, i);
		if (backward)
			x[j] += y[i];
		else
			y[i] = x[j];
	}
}

/* one block: ref.c's accuracy (ties count against the label) into out[0] */
__global__ void k_accuracy(float *out, const float *x, const float *labels, int n, int c, int inner, int top_k,
			   int ignore)
{
	__shared__ double red[THREADS];
	int h = 0, v = 0;
	for (int i = threadIdx.x; i < n * inner; i += blockDim.x) {
		int b = i / inner, p = i % inner;
		int label = (int)labels[i];
		if (ignore >= 0 && label == ignore)
			continue;
		v++;
		if (label < 0 || label >= c)
			continue;
		const float *xp = x + (int64_t)b * c * inner + p;
		float s = xp[(int64_t)label * inner];
		int better = 0;
		for (int j = 0; j < c; j++)
			if (j != label && xp[(int64_t)j * inner] >= s)
				better++;
		h += better < top_k;
	}
	h = (int)block_sum(h, red); /* counts, exact in a double */
	v = (int)block_sum(v, red);
	if (threadIdx.x == 0)
		out[0] = v ? (float)h / (float)v : 0.0f;
}

/* Eltwise over k ≤ 8 inputs (x: k device pointers); SUM's coefficients by value */
struct coeff8 {
	float v[8];
	int has;
};
struct ptr8 { /* the inputs, by value */
	const float *p[8];
};
static struct ptr8 ptr8_of(const struct backend_layer *bl)
{
	struct ptr8 x;
	memset(&x, 0, sizeof x);
	for (int j = 0; j < bl->nbottom && j < 8; j++)
		x.p[j] = bl->x[j];
	return x;
}
__global__ void k_eltwise_fwd(float *y, int32_t *argmax, struct ptr8 xs, int k, int64_t n, int op,
			      struct coeff8 co)
{
	const float *const *x = xs.p;
	FOR_EACH(i, n)
	{
		if (op == ELTWISE_PROD) {
			float v = x[0][i];
			for (int j = 1; j < k; j++)
				v *= x[j][i];
			y[i] = v;
		} else if (op == ELTWISE_SUM) {
			double v = 0;
			for (int j = 0; j < k; j++)
				v += (double)(co.has ? co.v[j] : 1.0f) * x[j][i];
			y[i] = (float)v;
		} else {
			int32_t arg = 0;
			if (k > 1)
				arg = x[0][i] > x[1][i] ? 0 : 1;
			float v = x[arg][i];
			for (int j = 2; j < k; j++)
				if (x[j][i] > v)
					v = x[j][i], arg = j;
			y[i] = v;
			if (argmax)
				argmax[i] = arg;
		}
	}
}
__global__ void k_eltwise_bwd(float *dx, int j, const float *dy, struct ptr8 xs, const int32_t *argmax, int k,
			      int64_t n, int op, float coeff)
{
	const float *const *x = xs.p;
	FOR_EACH(i, n)
	{
		if (op == ELTWISE_PROD) {
			float v = dy[i];
			for (int q = 0; q < k; q++)
				if (q != j)
					v *= x[q][i];
			dx[i] += v;
		} else if (op == ELTWISE_SUM) {
			dx[i] += coeff * dy[i];
		} else if (argmax[i] == j) {
			dx[i] += dy[i];
		}
	}
}

/* Concat: copy (add, backward) input i's (N, c_i, inner) block at channel offset */
__global__ void k_concat(float *y, const float *x, int n, int ci, int ctot, int off, int inner, int backward)
{
	FOR_EACH(i, (int64_t)n * ci * inner)
	{
		int64_t b = i / ((int64_t)ci * inner), r = i % ((int64_t)ci * inner);
		int64_t o = b * ctot * inner + (int64_t)off * inner + r;
		if (backward)
			((float *)x)[i] += y[o];
		else
			y[o] = x[i];
	}
}

/* Scale: y = x·γ[c] + β[c];  dx += dy·γ[c] */
__global__ void k_scale_fwd(float *y, const float *x, const float *g, const float *b, int64_t n, int c, int inner)
{
	FOR_EACH(i, n)
	{
		int ch = (int)((i / inner) % c);
		y[i] = x[i] * g[ch] + (b ? b[ch] : 0.0f);
	}
}
__global__ void k_scale_bwd(float *dx, const float *dy, const float *g, int64_t n, int c, int inner)
{
	FOR_EACH(i, n) dx[i] += dy[i] * g[(i / inner) % c];
}

/* BatchNorm as ref.c's bn_forward, one block per channel: batch statistics in
 * double (then Caffe's running sums), or the stored ones; y may be x. */
__global__ void k_bn_fwd(float *y, float *mean_acc, float *var_acc, const float *factor, float *saved_invstd,
			 const float *x, int n, int c, int64_t plane, float eps, float maf, int global)
{
	__shared__ double red[THREADS];
	int ch = blockIdx.x;
	int64_t total = (int64_t)n * plane;
	double m = (double)total, mean, var;
	if (global) {
		double s = *factor == 0.0f ? 0.0 : 1.0 / *factor;
		mean = (float)(s * mean_acc[ch]);
		var = (float)(s * var_acc[ch]);
	} else {
		double sum = 0;
		for (int64_t j = threadIdx.x; j < total; j += blockDim.x)
			sum += x[((j / plane) * c + ch) * plane + j % plane];
		mean = block_sum(sum, red) / m;
		double sq = 0;
		for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
			double d = x[((j / plane) * c + ch) * plane + j % plane] - mean;
			sq += d * d;
		}
		var = block_sum(sq, red) / m;
		if (threadIdx.x == 0) {
			double correction = m > 1 ? m / (m - 1) : 1.0;
			mean_acc[ch] = (float)(maf * mean_acc[ch] + mean);
			var_acc[ch] = (float)(maf * var_acc[ch] + correction * var);
		}
	}
	double invstd = 1.0 / sqrt(var + eps);
	for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
		int64_t at = ((j / plane) * c + ch) * plane + j % plane;
		y[at] = (float)((x[at] - mean) * invstd);
	}
	if (threadIdx.x == 0)
		saved_invstd[ch] = (float)invstd;
}
__global__ void k_bn_factor(float *factor, float maf)
{
	*factor = maf * *factor + 1.0f;
}
/* din += (dy − mean(dy) − mean(dy·y)·y)·invstd, or dy·invstd with stored statistics */
__global__ void k_bn_bwd(float *dx, const float *dy, const float *y, const float *saved_invstd, int n, int c,
			 int64_t plane, int global)
{
	__shared__ double red[THREADS];
	int ch = blockIdx.x;
	int64_t total = (int64_t)n * plane;
	double invstd = saved_invstd[ch], mean_dy = 0, mean_dyy = 0;
	if (!global) {
		double a = 0, b = 0;
		for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
			int64_t at = ((j / plane) * c + ch) * plane + j % plane;
			a += dy[at];
			b += (double)dy[at] * y[at];
		}
		mean_dy = block_sum(a, red) / (double)total;
		mean_dyy = block_sum(b, red) / (double)total;
	}
	for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
		int64_t at = ((j / plane) * c + ch) * plane + j % plane;
		double g = global ? dy[at] : dy[at] - mean_dy - mean_dyy * y[at];
		dx[at] += (float)(g * invstd);
	}
}

/* The solver updates of solver.c, operation for operation (solver.h steps 2–4). */
__global__ void k_update(struct backend_update u)
{
	FOR_EACH(j, u.n)
	{
		float g = u.g[j], w = u.w[j];
		if (u.norm != 1.0f)
			g *= u.norm;
		if (u.decay != 0)
			g += u.decay * w;
		float *h = u.h, *h2 = u.h2;
		switch (u.type) {
		case 0: /* SOLVER_SGD */
			h[j] = u.momentum * h[j] + u.lr * g;
			w -= h[j];
			break;
		case 2: { /* SOLVER_NESTEROV */
			float prev = h[j];
			h[j] = u.momentum * h[j] + u.lr * g;
			w -= (1 + u.momentum) * h[j] - u.momentum * prev;
			break;
		}
		case 3: /* SOLVER_ADAGRAD */
			h[j] += g * g;
			w -= u.lr * (g / (sqrtf(h[j]) + u.delta));
			break;
		case 4: /* SOLVER_RMSPROP */
			h[j] = (1 - u.rms_decay) * (g * g) + u.rms_decay * h[j];
			w -= u.lr * (g / (sqrtf(h[j]) + u.delta));
			break;
		case 5: { /* SOLVER_ADADELTA */
			h[j] = (1 - u.momentum) * (g * g) + u.momentum * h[j];
			float v = g * sqrtf((h2[j] + u.delta) / (h[j] + u.delta));
			h2[j] = (1 - u.momentum) * (v * v) + u.momentum * h2[j];
			w -= u.lr * v;
			break;
		}
		case 1: /* SOLVER_ADAM */
			h[j] = u.momentum * h[j] + (1 - u.momentum) * g;
			h2[j] = u.momentum2 * h2[j] + (1 - u.momentum2) * (g * g);
			w -= u.adam_step * (h[j] / (sqrtf(h2[j]) + u.delta));
			break;
		}
		u.g[j] = g;
		u.w[j] = w;
	}
}

/* ---- mixed precision ---- */

static cudnnDataType_t dnn_type(int prec)
{
	return prec == BACKEND_FP16 ? CUDNN_DATA_HALF : prec == BACKEND_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}
static cudaDataType_t blas_type(int prec) { return prec == BACKEND_FP16 ? CUDA_R_16F : CUDA_R_16BF; }
static int64_t pad64(int64_t n) { return (n + 63) / 64 * 64; }

/* The scratch regions of a mixed-precision layer (2-byte elements): input, weights,
 * output (or its gradient), and a result as large as the input or the weights. */
static void *lp_x(struct cuda_ctx *cx, const struct cu_layer *st) { (void)st; return cx->lp; }
static void *lp_w(struct cuda_ctx *cx, const struct cu_layer *st) { return (char *)cx->lp + 2 * st->nx; }
static void *lp_y(struct cuda_ctx *cx, const struct cu_layer *st) { return (char *)cx->lp + 2 * (st->nx + st->nw); }
static void *lp_r(struct cuda_ctx *cx, const struct cu_layer *st)
{
	return (char *)cx->lp + 2 * (st->nx + st->nw + st->ny);
}

/* Grow one of the context's shared device buffers (*buf, *have bytes) to at least
 * bytes, once the stream has finished with the old one (layer_init only). */
static int grow_shared(struct cuda_ctx *cx, void **buf, size_t *have, size_t bytes, const char *what,
		       const struct backend_layer *bl, struct dd_err *err)
{
	if (bytes <= *have)
		return DD_OK;
	CU(cudaStreamSynchronize(cx->stream), "waiting for the device");
	cudaFree(*buf);
	*buf = NULL;
	*have = 0;
	CU(cudaMalloc(buf, bytes), what);
	*have = bytes;
	return DD_OK;
}

/* Grow the shared scratch for a layer of these sizes (layer_init only). */
static int lp_init(struct cuda_ctx *cx, struct cu_layer *st, int64_t nx, int64_t nw, int64_t ny,
		   const struct backend_layer *bl, struct dd_err *err)
{
	st->lp = 1;
	st->nx = pad64(nx), st->nw = pad64(nw), st->ny = pad64(ny);
	size_t bytes = 2 * (size_t)(st->nx + st->nw + st->ny + (st->nx > st->nw ? st->nx : st->nw));
	return grow_shared(cx, &cx->lp, &cx->lp_bytes, bytes, "the half-precision scratch", bl, err);
}

/* o (half, n) ← x (FP32), queued */
static int narrow(struct cuda_ctx *cx, void *o, const float *x, int64_t n, const struct backend_layer *bl,
		  struct dd_err *err)
{
	if (cx->prec == BACKEND_FP16)
		k_narrow<<<blocks_for(n), THREADS, 0, cx->stream>>>((__half *)o, x, n);
	else
		k_narrow<<<blocks_for(n), THREADS, 0, cx->stream>>>((__nv_bfloat16 *)o, x, n);
	LAUNCHED("to half precision");
	return DD_OK;
}
/* y (FP32, n) ← (add ? y : 0) + mult · x (half), queued */
static int widen(struct cuda_ctx *cx, float *y, const void *x, int64_t n, int add, float mult,
		 const struct backend_layer *bl, struct dd_err *err)
{
	if (cx->prec == BACKEND_FP16)
		k_widen<<<blocks_for(n), THREADS, 0, cx->stream>>>(y, (const __half *)x, n, add, mult);
	else
		k_widen<<<blocks_for(n), THREADS, 0, cx->stream>>>(y, (const __nv_bfloat16 *)x, n, add, mult);
	LAUNCHED("from half precision");
	return DD_OK;
}

/* ---- layer state ---- */

/* Which layers run on the device (LRN: within cuDNN's limits); the others run
 * the reference kernels on the host. */
static int native(const struct backend_layer *bl)
{
	const struct net_layer *l = bl->l;
	switch (l->type) {
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION:
	case NET_INNER_PRODUCT:
	case NET_POOLING:
	case NET_RELU:
	case NET_SIGMOID:
	case NET_TANH:
	case NET_POWER:
	case NET_DROPOUT:
	case NET_SOFTMAX:
	case NET_SOFTMAX_LOSS:
	case NET_ACCURACY:
	case NET_CONCAT:
	case NET_SCALE:
	case NET_FLATTEN:
	case NET_BATCH_NORM:
	case NET_DATA:
	case NET_INPUT:
	case NET_EUCLIDEAN_LOSS:
	case NET_CROP:
		return 1;
	case NET_ELTWISE:
		return bl->nbottom <= 8;
	case NET_LRN: /* (cuDNN's LRN is not documented to run in place) */
		return !bl->in_place && bl->d.lrn.size >= CUDNN_LRN_MIN_N && bl->d.lrn.size <= CUDNN_LRN_MAX_N &&
		       bl->d.lrn.k >= CUDNN_LRN_MIN_K && bl->d.lrn.beta >= CUDNN_LRN_MIN_BETA;
	default:
		return 0;
	}
}

static void cu_layer_fini(struct backend *be, void *state)
{
	struct cu_layer *st = (struct cu_layer *)state;
	if (!st)
		return;
	struct cuda_ctx *cx = ctx_of(be);
	cx->nlayers--;
	if (st->ref)
		cx->host.layer_fini(be, st->ref);
	for (int i = 0; st->data && i < cx->ndata; i++)
		if (cx->data[i] == st->data) { /* forget it: the memory may be reused */
			cx->data[i] = cx->data[--cx->ndata];
			cx->data_bytes[i] = cx->data_bytes[cx->ndata];
			cx->data_uploaded[i] = cx->data_uploaded[cx->ndata];
			break;
		}
	if (st->xd)
		cudnnDestroyTensorDescriptor(st->xd);
	if (st->yd)
		cudnnDestroyTensorDescriptor(st->yd);
	if (st->wd)
		cudnnDestroyFilterDescriptor(st->wd);
	if (st->cd)
		cudnnDestroyConvolutionDescriptor(st->cd);
	if (st->lrn)
		cudnnDestroyLRNDescriptor(st->lrn);
	cudaFree(st->argmax);
	cudaFree(st->mask);
	cudaFree(st->prob);
	cudaFree(st->valid);
	cudaFree(st->invstd);
	free(st);
}

/* Grow the shared workspace to at least bytes (layer_init only). */
static int ws_need(struct cuda_ctx *cx, size_t bytes, const struct backend_layer *bl, struct dd_err *err)
{
	return grow_shared(cx, &cx->ws, &cx->ws_bytes, bytes, "the convolution workspace", bl, err);
}

/* cuDNN's v7 heuristics give algorithms best first: take the first that works with
 * our math, fits the cap and, in deterministic mode, is deterministic.  Our math:
 * FP32 FMA first (pass 0), then cuDNN's default math (pass 1; NVIDIA_TF32_OVERRIDE=0
 * keeps it off TF32); anything with DEEPDESK_CUDA_TF32=1.  Each algorithm's math
 * type is set on the descriptor before it runs. */
static int math_ok(const struct cuda_ctx *cx, cudnnMathType_t m, int pass)
{
	return cx->tf32 || cx->prec != BACKEND_FP32 || m == CUDNN_FMA_MATH || (pass > 0 && m == CUDNN_DEFAULT_MATH);
}
/* The first of cuDNN's n ranked algorithms (forward, backward data or backward
 * filter: their perf structs differ only in type) that succeeded, fits WS_CAP, has
 * an allowed math type (FMA first, then the default) and, in deterministic mode,
 * is deterministic: 1 with *algo and *mathType set, or 0. */
template <typename Perf, typename Algo>
static int pick_algo(const struct cuda_ctx *cx, const Perf *p, int n, Algo *algo, cudnnMathType_t *mathType)
{
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++)
			if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].memory <= WS_CAP &&
			    math_ok(cx, p[i].mathType, pass) &&
			    (!cx->deterministic || p[i].determinism == CUDNN_DETERMINISTIC)) {
				*algo = p[i].algo;
				*mathType = p[i].mathType;
				return 1;
			}
	return 0;
}
/* One of a convolution's three passes, given cuDNN's n ranked algorithms p for it:
 * pick one (pick_algo), set its math type on the descriptor, and raise *need to its
 * workspace (ws(&bytes) asks cuDNN for the chosen algorithm's).  pass names it in
 * messages ("forward", "backward data", "backward filter"). */
template <typename Perf, typename Algo, typename Ws>
static int conv_pass(struct cuda_ctx *cx, struct cu_layer *st, const struct backend_layer *bl, const Perf *p, int n,
		     const char *pass, Algo *algo, cudnnMathType_t *math, size_t *need, struct dd_err *err, Ws ws)
{
	int fwd = strcmp(pass, "forward") == 0;
	if (!pick_algo(cx, p, n, algo, math)) {
		if (fwd)
			return dd_err_set(err, DD_EINTERNAL, "layer '%s': cuDNN offers no forward algorithm within %zu MiB",
				       lname(bl), WS_CAP >> 20);
		/* "backward-data", as the message always said */
		return dd_err_set(err, DD_EINTERNAL, "layer '%s': cuDNN offers no %.8s-%s algorithm%s", lname(bl), pass,
			       pass + 9, cx->deterministic ? " that is deterministic" : "");
	}
	DNN(cudnnSetConvolutionMathType(st->cd, *math), "math type");
	size_t bytes = 0;
	char what[48];
	snprintf(what, sizeof what, "%s workspace", pass);
	DNN(ws(&bytes), what);
	*need = bytes > *need ? bytes : *need;
	return DD_OK;
}
/* The descriptors and the three algorithms of the convolution d (x (N, C_in, H, W),
 * w (C_out, C_in/group, kh, kw), y (N, C_out, H_out, W_out)), its tensors in
 * precision prec (the half-precision scratch too, unless FP32). */
static int conv_descs(struct cuda_ctx *cx, struct cu_layer *st, const struct backend_layer *bl,
		      const struct conv_desc *d, int prec, struct dd_err *err)
{
	cudnnMathType_t math = cx->tf32 || prec != BACKEND_FP32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
	cudnnDataType_t dt = dnn_type(prec); /* the compute type stays FP32 */
	if (prec != BACKEND_FP32) {
		int rc = lp_init(cx, st, (int64_t)d->n * d->c_in * d->h_in * d->w_in,
				 (int64_t)d->c_out * (d->c_in / d->group) * d->kh * d->kw,
				 (int64_t)d->n * d->c_out * d->h_out * d->w_out, bl, err);
		if (rc)
			return rc;
	}
	DNN(cudnnCreateTensorDescriptor(&st->xd), "tensor descriptor");
	DNN(cudnnCreateTensorDescriptor(&st->yd), "tensor descriptor");
	DNN(cudnnCreateFilterDescriptor(&st->wd), "filter descriptor");
	DNN(cudnnCreateConvolutionDescriptor(&st->cd), "convolution descriptor");
	DNN(cudnnSetTensor4dDescriptor(st->xd, CUDNN_TENSOR_NCHW, dt, d->n, d->c_in, d->h_in, d->w_in),
	    "input descriptor");
	DNN(cudnnSetTensor4dDescriptor(st->yd, CUDNN_TENSOR_NCHW, dt, d->n, d->c_out, d->h_out, d->w_out),
	    "output descriptor");
	DNN(cudnnSetFilter4dDescriptor(st->wd, dt, CUDNN_TENSOR_NCHW, d->c_out, d->c_in / d->group, d->kh,
				       d->kw),
	    "filter descriptor");
	DNN(cudnnSetConvolution2dDescriptor(st->cd, d->ph, d->pw, d->sh, d->sw, d->dh, d->dw, CUDNN_CROSS_CORRELATION,
					    CUDNN_DATA_FLOAT),
	    "convolution descriptor");
	DNN(cudnnSetConvolutionGroupCount(st->cd, d->group), "group count");
	DNN(cudnnSetConvolutionMathType(st->cd, math), "math type");
	int n, rc;
	size_t need = 0;

	cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	DNN(cudnnGetConvolutionForwardAlgorithm_v7(cx->dnn, st->xd, st->wd, st->cd, st->yd,
						   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp),
	    "forward algorithm");
	if ((rc = conv_pass(cx, st, bl, fp, n, "forward", &st->fwd_algo, &st->fwd_math, &need, err,
			    [&](size_t *bytes) {
				    return cudnnGetConvolutionForwardWorkspaceSize(cx->dnn, st->xd, st->wd, st->cd, st->yd,
										   st->fwd_algo, bytes);
			    })))
		return rc;

	cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(cx->dnn, st->wd, st->yd, st->cd, st->xd,
							CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp),
	    "backward data algorithm");
	if ((rc = conv_pass(cx, st, bl, dp, n, "backward data", &st->bwd_data_algo, &st->bwd_data_math, &need, err,
			    [&](size_t *bytes) {
				    return cudnnGetConvolutionBackwardDataWorkspaceSize(cx->dnn, st->wd, st->yd, st->cd,
											st->xd, st->bwd_data_algo, bytes);
			    })))
		return rc;

	cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cx->dnn, st->xd, st->yd, st->cd, st->wd,
							  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp),
	    "backward filter algorithm");
	if ((rc = conv_pass(cx, st, bl, wp, n, "backward filter", &st->bwd_filter_algo, &st->bwd_filter_math, &need,
			    err, [&](size_t *bytes) {
				    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
					    cx->dnn, st->xd, st->yd, st->cd, st->wd, st->bwd_filter_algo, bytes);
			    })))
		return rc;
	return ws_need(cx, need, bl, err);
}

static int conv_init(struct cuda_ctx *cx, struct cu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	return conv_descs(cx, st, bl, &bl->d.conv, cx->prec, err);
}

/* A deconvolution is the transpose of the convolution from its top's shape to its
 * bottom's, whose weights (C_out = the deconvolution's C_in, its C_out/group, kh, kw)
 * are Caffe's Deconvolution weights: that convolution's descriptors (x its top, y
 * its bottom), and its passes swapped, as Caffe's CuDNNDeconvolutionLayer does:
 *   forward          y_top     = cudnnConvolutionBackwardData(w, x_bottom)
 *   backward data    dx_bottom += cudnnConvolutionForward(dy_top, w)
 *   backward filter  dw        += cudnnConvolutionBackwardFilter(x = dy_top, dy = x_bottom).
 * Always FP32: the half-precision path of conv/IP stays theirs alone. */
static int deconv_init(struct cuda_ctx *cx, struct cu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	const struct conv_desc *d = &bl->d.conv;
	struct conv_desc t = *d;
	t.c_in = d->c_out, t.h_in = d->h_out, t.w_in = d->w_out;
	t.c_out = d->c_in, t.h_out = d->h_in, t.w_out = d->w_in;
	return conv_descs(cx, st, bl, &t, BACKEND_FP32, err);
}

static int lrn_init(struct cuda_ctx *cx, struct cu_layer *st, const struct backend_layer *bl, struct dd_err *err)
{
	const struct lrn_desc *d = &bl->d.lrn;
	DNN(cudnnCreateTensorDescriptor(&st->xd), "tensor descriptor");
	DNN(cudnnSetTensor4dDescriptor(st->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n, d->c, d->h, d->w),
	    "LRN descriptor");
	DNN(cudnnCreateLRNDescriptor(&st->lrn), "LRN descriptor");
	/* cuDNN divides alpha by the window size, as Caffe does */
	DNN(cudnnSetLRNDescriptor(st->lrn, (unsigned)d->size, d->alpha, d->beta, d->k), "LRN descriptor");
	return DD_OK;
}

static int cu_layer_init(struct backend *be, const struct backend_layer *bl, void **state, struct dd_err *err)
{
	struct cuda_ctx *cx = ctx_of(be);
	cudaSetDevice(cx->device); /* its buffers on its GPU, whichever thread builds it */
	const struct net_layer *l = bl->l;
	*state = NULL;
	struct cu_layer *st = (struct cu_layer *)calloc(1, sizeof *st);
	if (!st)
		return dd_err_set(err, DD_ENOMEM, "layer '%s': out of memory", lname(bl));
	*state = st;
	cx->nlayers++;
	if (!native(bl)) {
		st->host = 1;
		return cx->host.layer_init(be, bl, &st->ref, err);
	}
	if (bl->count == 0)
		return DD_OK;
	switch (l->type) {
	case NET_DATA:
	case NET_INPUT:
		if (cx->ndata < 8) {
			st->data = bl->y;
			cx->data[cx->ndata] = bl->y;
			cx->data_uploaded[cx->ndata] = 0;
			cx->data_bytes[cx->ndata++] = (size_t)bl->count * sizeof(float);
		}
		break;
	case NET_CONVOLUTION:
		return conv_init(cx, st, bl, err);
	case NET_DECONVOLUTION:
		return deconv_init(cx, st, bl, err);
	case NET_INNER_PRODUCT:
		if (cx->prec != BACKEND_FP32) {
			const struct ip_desc *d = &bl->d.ip;
			return lp_init(cx, st, (int64_t)d->n * d->k, (int64_t)d->m * d->k, (int64_t)d->n * d->m, bl, err);
		}
		break;
	case NET_LRN:
		return lrn_init(cx, st, bl, err);
	case NET_POOLING:
		if (bl->d.pool.method == POOL_MAX)
			CU(cudaMalloc(&st->argmax, (size_t)bl->count * sizeof(int32_t)), "the pooling argmax");
		break;
	case NET_ELTWISE:
		if (l->eltwise.op == NET_ELTWISE_MAX)
			CU(cudaMalloc(&st->argmax, (size_t)bl->count * sizeof(int32_t)), "the eltwise argmax");
		break;
	case NET_DROPOUT:
		CU(cudaMalloc(&st->mask, (size_t)bl->count), "the dropout mask");
		break;
	case NET_BATCH_NORM:
		CU(cudaMalloc(&st->invstd, (size_t)bl->d.bn.c * sizeof(float)), "the batch norm statistics");
		break;
	case NET_SOFTMAX_LOSS:
		CU(cudaMalloc(&st->prob, (size_t)bl->n * bl->c * bl->inner * sizeof(float)), "the softmax probabilities");
		CU(cudaMalloc(&st->valid, sizeof(int)), "the softmax loss");
		break;
	case NET_EUCLIDEAN_LOSS: /* a − b */
		CU(cudaMalloc(&st->prob, (size_t)bl->n * bl->c * bl->inner * sizeof(float)), "the euclidean loss difference");
		break;
	default:
		break;
	}
	return DD_OK;
}

/* ---- forward ---- */

static struct pool_k pool_k_of(const struct pool_desc *d)
{
	struct pool_k p = { d->n, d->c, d->h_in, d->w_in, d->h_out, d->w_out, d->kh, d->kw, d->sh, d->sw,
			    d->ph, d->pw, d->method == POOL_MAX };
	if (d->global) {
		p.kh = d->h_in, p.kw = d->w_in, p.sh = p.sw = 1, p.ph = p.pw = 0;
	}
	return p;
}

/* If p is a data layer's top, move it in bulk to the device (to_host 0) or back to
 * the host, where the feed writes the next batch (1), queued on the stream; returns
 * whether it is one.  Bulk moves beat the page faults that the host's writes and
 * the device's reads would otherwise take page by page.  Only a hint: errors are
 * dropped. */
static int prefetch_data(struct cuda_ctx *cx, const void *p, int to_host)
{
	for (int i = 0; p && i < cx->ndata; i++)
		if (p == cx->data[i]) {
			if (to_host && cx->data_uploaded[i]) /* the host does not write it: stay */
				return 1;
			struct cudaMemLocation at;
			memset(&at, 0, sizeof at);
			at.type = to_host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
			at.id = to_host ? 0 : cx->device;
			if (cudaMemPrefetchAsync(p, cx->data_bytes[i], at, 0, cx->stream) != cudaSuccess)
				cudaGetLastError();
			return 1;
		}
	return 0;
}

static int host_run(struct cuda_ctx *cx, struct cu_layer *st, const struct backend_layer *bl, int training,
		    int backward, struct dd_err *err)
{
	CU(cudaStreamSynchronize(cx->stream), "waiting for the device");
	return backward ? cx->host.backward(&cx->be, st->ref, bl, training, err)
			: cx->host.forward(&cx->be, st->ref, bl, training, err);
}

static int cu_forward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		      struct dd_err *err)
{
	struct cuda_ctx *cx = ctx_of(be);
	struct cu_layer *st = (struct cu_layer *)state;
	const struct net_layer *l = bl->l;
	int rc = ready(cx, bl, err);
	if (rc)
		return rc;
	if (st && st->host)
		return host_run(cx, st, bl, training, 0, err);
	if (bl->count == 0 || l->type == NET_DATA || l->type == NET_INPUT)
		return DD_OK;
	cudaStream_t s = cx->stream;
	const float *x = bl->nbottom ? bl->x[0] : NULL;
	float *y = bl->y;
	int64_t n = bl->count;
	const float one = 1.0f, zero = 0.0f;
	int reads_data = prefetch_data(cx, x, 0);
	switch (l->type) {
	case NET_CONVOLUTION: {
		const struct conv_desc *d = &bl->d.conv;
		DNN(cudnnSetConvolutionMathType(st->cd, st->fwd_math), "math type");
		if (st->lp) {
			int64_t nx = (int64_t)d->n * d->c_in * d->h_in * d->w_in;
			int64_t nw = (int64_t)d->c_out * (d->c_in / d->group) * d->kh * d->kw;
			int rc;
			if ((rc = narrow(cx, lp_x(cx, st), x, nx, bl, err)) ||
			    (rc = narrow(cx, lp_w(cx, st), bl->w[0], nw, bl, err)))
				return rc;
			DNN(cudnnConvolutionForward(cx->dnn, &one, st->xd, lp_x(cx, st), st->wd, lp_w(cx, st), st->cd,
						    st->fwd_algo, cx->ws, cx->ws_bytes, &zero, st->yd, lp_y(cx, st)),
			    "convolution forward");
			if ((rc = widen(cx, y, lp_y(cx, st), n, 0, 1.0f, bl, err)))
				return rc;
		} else {
			DNN(cudnnConvolutionForward(cx->dnn, &one, st->xd, x, st->wd, bl->w[0], st->cd, st->fwd_algo, cx->ws,
						    cx->ws_bytes, &zero, st->yd, y),
			    "convolution forward");
		}
		if (d->bias) {
			k_bias_add<<<blocks_for(n), THREADS, 0, s>>>(y, bl->w[1], n, d->c_out, d->h_out * d->w_out);
			LAUNCHED("bias");
		}
		break;
	}
	case NET_DECONVOLUTION: { /* deconv_init: the convolution's backward data */
		const struct conv_desc *d = &bl->d.conv;
		DNN(cudnnSetConvolutionMathType(st->cd, st->bwd_data_math), "math type");
		DNN(cudnnConvolutionBackwardData(cx->dnn, &one, st->wd, bl->w[0], st->yd, x, st->cd, st->bwd_data_algo,
						 cx->ws, cx->ws_bytes, &zero, st->xd, y),
		    "deconvolution forward (convolution backward data)");
		if (d->bias) {
			k_bias_add<<<blocks_for(n), THREADS, 0, s>>>(y, bl->w[1], n, d->c_out, d->h_out * d->w_out);
			LAUNCHED("bias");
		}
		break;
	}
	case NET_INNER_PRODUCT: {
		const struct ip_desc *d = &bl->d.ip;
		/* row-major out(N,M) = in(N,K)·W(M,K)ᵀ is column-major outᵀ = Wᵀ_cm·in_cm */
		if (st->lp) {
			int rc;
			cudaDataType_t t = blas_type(cx->prec);
			if ((rc = narrow(cx, lp_x(cx, st), x, (int64_t)d->n * d->k, bl, err)) ||
			    (rc = narrow(cx, lp_w(cx, st), bl->w[0], (int64_t)d->m * d->k, bl, err)))
				return rc;
			BLAS(cublasGemmEx(cx->blas, CUBLAS_OP_T, CUBLAS_OP_N, d->m, d->n, d->k, &one, lp_w(cx, st), t, d->k,
					  lp_x(cx, st), t, d->k, &zero, y, CUDA_R_32F, d->m, CUBLAS_COMPUTE_32F,
					  CUBLAS_GEMM_DEFAULT),
			     "gemm (inner product forward, half precision)");
		} else {
			BLAS(cublasSgemm(cx->blas, CUBLAS_OP_T, CUBLAS_OP_N, d->m, d->n, d->k, &one, bl->w[0], d->k, x, d->k,
					 &zero, y, d->m),
			     "sgemm (inner product forward)");
		}
		if (d->bias) {
			k_bias_add<<<blocks_for(n), THREADS, 0, s>>>(y, bl->w[1], n, d->m, 1);
			LAUNCHED("bias");
		}
		break;
	}
	case NET_POOLING:
		k_pool_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, st->argmax, x, pool_k_of(&bl->d.pool));
		LAUNCHED("pooling");
		break;
	case NET_RELU:
		k_relu_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, x, n, l->relu.negative_slope);
		LAUNCHED("relu");
		break;
	case NET_SIGMOID:
		k_sigmoid_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, x, n);
		LAUNCHED("sigmoid");
		break;
	case NET_TANH:
		k_tanh_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, x, n);
		LAUNCHED("tanh");
		break;
	case NET_POWER:
		k_power_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, x, n, l->power.power, l->power.scale, l->power.shift);
		LAUNCHED("power");
		break;
	case NET_DROPOUT:
		if (training) {
			uint64_t s0 = *bl->rng;
			*bl->rng += (uint64_t)n * RNG_GAMMA; /* n draws, as the reference makes */
			k_dropout_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, st->mask, x, n, l->dropout.ratio,
									 1.0f / (1.0f - l->dropout.ratio), s0);
			LAUNCHED("dropout");
		} else if (y != x) {
			CU(cudaMemcpyAsync(y, x, (size_t)n * sizeof(float), cudaMemcpyDefault, s), "dropout copy");
		}
		break;
	case NET_LRN:
		DNN(cudnnLRNCrossChannelForward(cx->dnn, st->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, st->xd, x, &zero,
						st->xd, y),
		    "LRN forward");
		break;
	case NET_SOFTMAX:
		k_softmax_fwd<<<blocks_for((int64_t)bl->n * bl->inner), THREADS, 0, s>>>(y, x, bl->n, bl->c, bl->inner);
		LAUNCHED("softmax");
		break;
	case NET_BATCH_NORM: {
		const struct bn_desc *d = &bl->d.bn;
		int global = d->use_global_stats || !training;
		k_bn_fwd<<<d->c, THREADS, 0, s>>>(y, bl->w[0], bl->w[1], bl->w[2], st->invstd, x, d->n, d->c,
						  (int64_t)d->h * d->w, d->eps, d->moving_average_fraction, global);
		LAUNCHED("batch norm");
		if (!global) {
			k_bn_factor<<<1, 1, 0, s>>>(bl->w[2], d->moving_average_fraction);
			LAUNCHED("batch norm factor");
		}
		break;
	}
	case NET_SOFTMAX_LOSS:
		k_softmax_fwd<<<blocks_for((int64_t)bl->n * bl->inner), THREADS, 0, s>>>(st->prob, x, bl->n, bl->c,
											 bl->inner);
		LAUNCHED("softmax");
		k_softmax_loss<<<1, THREADS, 0, s>>>(y, st->valid, st->prob, bl->x[1], bl->n, bl->c, bl->inner,
						     l->loss.has_ignore_label ? l->loss.ignore_label : -1,
						     (int)l->loss.normalization);
		LAUNCHED("softmax loss");
		break;
	case NET_EUCLIDEAN_LOSS: {
		int64_t m = (int64_t)bl->n * bl->c * bl->inner;
		k_sub<<<blocks_for(m), THREADS, 0, s>>>(st->prob, x, bl->x[1], m);
		LAUNCHED("euclidean loss difference");
		k_euclidean<<<1, THREADS, 0, s>>>(y, st->prob, m, bl->n);
		LAUNCHED("euclidean loss");
		break;
	}
	case NET_CROP:
		k_crop<<<blocks_for(n), THREADS, 0, s>>>(y, (float *)x, crop_k_of(&bl->d.crop), n, 0);
		LAUNCHED("crop");
		break;
	case NET_ACCURACY:
		k_accuracy<<<1, THREADS, 0, s>>>(y, x, bl->x[1], bl->n, bl->c, bl->inner, l->accuracy.top_k,
						 l->accuracy.has_ignore_label ? l->accuracy.ignore_label : -1);
		LAUNCHED("accuracy");
		break;
	case NET_ELTWISE: {
		struct coeff8 co;
		memset(&co, 0, sizeof co);
		co.has = l->eltwise.op == NET_ELTWISE_SUM && l->eltwise.coeff;
		for (int j = 0; co.has && j < bl->nbottom; j++)
			co.v[j] = l->eltwise.coeff[j];
		k_eltwise_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, st->argmax, ptr8_of(bl),
								bl->nbottom, n, (int)l->eltwise.op, co);
		LAUNCHED("eltwise");
		break;
	}
	case NET_CONCAT: {
		int ctot = 0, off = 0;
		for (int i = 0; i < bl->nbottom; i++)
			ctot += bl->cs[i];
		for (int i = 0; i < bl->nbottom; i++) {
			int64_t m = (int64_t)bl->n * bl->cs[i] * bl->concat_inner;
			k_concat<<<blocks_for(m), THREADS, 0, s>>>(y, bl->x[i], bl->n, bl->cs[i], ctot, off,
								   bl->concat_inner, 0);
			LAUNCHED("concat");
			off += bl->cs[i];
		}
		break;
	}
	case NET_SCALE: {
		const struct scale_desc *d = &bl->d.scale;
		k_scale_fwd<<<blocks_for(n), THREADS, 0, s>>>(y, x, bl->w[0], d->bias ? bl->w[1] : NULL, n, d->c, d->inner);
		LAUNCHED("scale");
		break;
	}
	case NET_FLATTEN:
		if (y != x)
			CU(cudaMemcpyAsync(y, x, (size_t)n * sizeof(float), cudaMemcpyDefault, s), "flatten copy");
		break;
	default:
		return dd_err_set(err, DD_EINTERNAL, "layer '%s': no CUDA kernel for its type", lname(bl));
	}
	if (reads_data && (!training || !bl->dy)) /* no backward of this layer will read it */
		prefetch_data(cx, x, 1);
	return DD_OK;
}

/* ---- backward ---- */

static int cu_backward(struct backend *be, void *state, const struct backend_layer *bl, int training,
		       struct dd_err *err)
{
	struct cuda_ctx *cx = ctx_of(be);
	struct cu_layer *st = (struct cu_layer *)state;
	const struct net_layer *l = bl->l;
	int rc0 = ready(cx, bl, err);
	if (rc0)
		return rc0;
	if ((l->type == NET_SOFTMAX_LOSS || l->type == NET_EUCLIDEAN_LOSS) && cx->prec == BACKEND_FP16 && bl->dy &&
	    cx->scale != 1) {
		/* FP16's loss scale, on the seed graph_backward wrote (it writes it every pass) */
		k_scale_by<<<1, 1, 0, cx->stream>>>((float *)bl->dy, 1, cx->scale);
		LAUNCHED("loss scale");
	}
	if (st && st->host)
		return host_run(cx, st, bl, training, 1, err);
	if (bl->count == 0)
		return DD_OK;
	cudaStream_t s = cx->stream;
	float *dx = bl->nbottom ? bl->dx[0] : NULL;
	const float *x = bl->bx, *y = bl->by, *dy = bl->dy;
	int64_t n = bl->count;
	const float one = 1.0f;
	switch (l->type) {
	case NET_DATA:
	case NET_INPUT:
	case NET_ACCURACY:
		break;
	case NET_CONVOLUTION: {
		const struct conv_desc *d = &bl->d.conv;
		if (st->lp) {
			int64_t nx = (int64_t)d->n * d->c_in * d->h_in * d->w_in;
			int64_t nw = (int64_t)d->c_out * (d->c_in / d->group) * d->kh * d->kw;
			const float zero = 0.0f;
			int rc;
			if ((rc = narrow(cx, lp_y(cx, st), dy, n, bl, err)))
				return rc;
			if (bl->dw[0]) {
				/* the weight gradient sums over the whole batch: in half precision it
				 * is written unscaled (alpha 1/S), where a scaled one would overflow
				 * long before the activation gradients do, and scaled back in FP32 */
				float inv = 1.0f / cx->scale;
				if ((rc = narrow(cx, lp_x(cx, st), x, nx, bl, err)))
					return rc;
				DNN(cudnnSetConvolutionMathType(st->cd, st->bwd_filter_math), "math type");
				DNN(cudnnConvolutionBackwardFilter(cx->dnn, &inv, st->xd, lp_x(cx, st), st->yd, lp_y(cx, st),
								   st->cd, st->bwd_filter_algo, cx->ws, cx->ws_bytes, &zero,
								   st->wd, lp_r(cx, st)),
				    "convolution backward filter");
				if ((rc = widen(cx, bl->dw[0], lp_r(cx, st), nw, 1, cx->scale, bl, err)))
					return rc;
			}
			if (dx) {
				if ((rc = narrow(cx, lp_w(cx, st), bl->w[0], nw, bl, err)))
					return rc;
				DNN(cudnnSetConvolutionMathType(st->cd, st->bwd_data_math), "math type");
				DNN(cudnnConvolutionBackwardData(cx->dnn, &one, st->wd, lp_w(cx, st), st->yd, lp_y(cx, st),
								 st->cd, st->bwd_data_algo, cx->ws, cx->ws_bytes, &zero,
								 st->xd, lp_r(cx, st)),
				    "convolution backward data");
				if ((rc = widen(cx, dx, lp_r(cx, st), nx, 1, 1.0f, bl, err)))
					return rc;
			}
			if (d->bias && bl->dw[1]) {
				k_channel_sum<<<d->c_out, THREADS, 0, s>>>(bl->dw[1], dy, NULL, d->n, d->c_out,
									   d->h_out * d->w_out);
				LAUNCHED("bias gradient");
			}
			break;
		}
		if (bl->dw[0]) {
			DNN(cudnnSetConvolutionMathType(st->cd, st->bwd_filter_math), "math type");
			DNN(cudnnConvolutionBackwardFilter(cx->dnn, &one, st->xd, x, st->yd, dy, st->cd, st->bwd_filter_algo,
							   cx->ws, cx->ws_bytes, &one, st->wd, bl->dw[0]),
			    "convolution backward filter");
		}
		if (d->bias && bl->dw[1]) {
			k_channel_sum<<<d->c_out, THREADS, 0, s>>>(bl->dw[1], dy, NULL, d->n, d->c_out, d->h_out * d->w_out);
			LAUNCHED("bias gradient");
		}
		if (dx) {
			DNN(cudnnSetConvolutionMathType(st->cd, st->bwd_data_math), "math type");
			DNN(cudnnConvolutionBackwardData(cx->dnn, &one, st->wd, bl->w[0], st->yd, dy, st->cd,
							 st->bwd_data_algo, cx->ws, cx->ws_bytes, &one, st->xd, dx),
			    "convolution backward data");
		}
		break;
	}
	case NET_DECONVOLUTION: { /* deconv_init: x and dy of the convolution's passes swapped */
		const struct conv_desc *d = &bl->d.conv;
		if (bl->dw[0]) {
			DNN(cudnnSetConvolutionMathType(st->cd, st->bwd_filter_math), "math type");
			DNN(cudnnConvolutionBackwardFilter(cx->dnn, &one, st->xd, dy, st->yd, x, st->cd, st->bwd_filter_algo,
							   cx->ws, cx->ws_bytes, &one, st->wd, bl->dw[0]),
			    "deconvolution backward filter (convolution backward filter)");
		}
		if (d->bias && bl->dw[1]) {
			k_channel_sum<<<d->c_out, THREADS, 0, s>>>(bl->dw[1], dy, NULL, d->n, d->c_out, d->h_out * d->w_out);
			LAUNCHED("bias gradient");
		}
		if (dx) {
			DNN(cudnnSetConvolutionMathType(st->cd, st->fwd_math), "math type");
			DNN(cudnnConvolutionForward(cx->dnn, &one, st->xd, dy, st->wd, bl->w[0], st->cd, st->fwd_algo, cx->ws,
						    cx->ws_bytes, &one, st->yd, dx),
			    "deconvolution backward data (convolution forward)");
		}
		break;
	}
	case NET_INNER_PRODUCT: {
		const struct ip_desc *d = &bl->d.ip;
		if (st->lp) { /* as below, in cublasGemmEx on half copies, FP32 accumulation and results */
			cudaDataType_t t = blas_type(cx->prec);
			int rc;
			if ((rc = narrow(cx, lp_y(cx, st), dy, (int64_t)d->n * d->m, bl, err)))
				return rc;
			if (bl->dw[0]) {
				if ((rc = narrow(cx, lp_x(cx, st), x, (int64_t)d->n * d->k, bl, err)))
					return rc;
				BLAS(cublasGemmEx(cx->blas, CUBLAS_OP_N, CUBLAS_OP_T, d->k, d->m, d->n, &one, lp_x(cx, st), t,
						  d->k, lp_y(cx, st), t, d->m, &one, bl->dw[0], CUDA_R_32F, d->k,
						  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
				     "gemm (inner product weights, half precision)");
			}
			if (dx) {
				if ((rc = narrow(cx, lp_w(cx, st), bl->w[0], (int64_t)d->m * d->k, bl, err)))
					return rc;
				BLAS(cublasGemmEx(cx->blas, CUBLAS_OP_N, CUBLAS_OP_N, d->k, d->n, d->m, &one, lp_w(cx, st), t,
						  d->k, lp_y(cx, st), t, d->m, &one, dx, CUDA_R_32F, d->k, CUBLAS_COMPUTE_32F,
						  CUBLAS_GEMM_DEFAULT),
				     "gemm (inner product input, half precision)");
			}
			if (d->bias && bl->dw[1]) {
				k_channel_sum<<<d->m, THREADS, 0, s>>>(bl->dw[1], dy, NULL, d->n, d->m, 1);
				LAUNCHED("bias gradient");
			}
			break;
		}
		if (bl->dw[0]) /* dW(M,K) += dyᵀ·in: column-major dWᵀ = in_cm · dy_cmᵀ */
			BLAS(cublasSgemm(cx->blas, CUBLAS_OP_N, CUBLAS_OP_T, d->k, d->m, d->n, &one, x, d->k, dy, d->m, &one,
					 bl->dw[0], d->k),
			     "sgemm (inner product weights)");
		if (d->bias && bl->dw[1]) {
			k_channel_sum<<<d->m, THREADS, 0, s>>>(bl->dw[1], dy, NULL, d->n, d->m, 1);
			LAUNCHED("bias gradient");
		}
		if (dx) /* din(N,K) += dy·W: column-major dinᵀ = W_cm · dy_cm */
			BLAS(cublasSgemm(cx->blas, CUBLAS_OP_N, CUBLAS_OP_N, d->k, d->n, d->m, &one, bl->w[0], d->k, dy, d->m,
					 &one, dx, d->k),
			     "sgemm (inner product input)");
		break;
	}
	case NET_POOLING:
		if (dx) {
			const struct pool_desc *d = &bl->d.pool;
			int64_t m = (int64_t)d->n * d->c * d->h_in * d->w_in;
			k_pool_bwd<<<blocks_for(m), THREADS, 0, s>>>(dx, dy, st->argmax, pool_k_of(d));
			LAUNCHED("pooling backward");
		}
		break;
	case NET_RELU:
		if (dx) {
			k_relu_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, x, n, l->relu.negative_slope);
			LAUNCHED("relu backward");
		}
		break;
	case NET_SIGMOID:
		if (dx) {
			k_sigmoid_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, y, n);
			LAUNCHED("sigmoid backward");
		}
		break;
	case NET_TANH:
		if (dx) {
			k_tanh_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, y, n);
			LAUNCHED("tanh backward");
		}
		break;
	case NET_POWER:
		if (dx) {
			k_power_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, x, n, l->power.power, l->power.scale,
								      l->power.shift);
			LAUNCHED("power backward");
		}
		break;
	case NET_DROPOUT:
		if (dx) {
			k_dropout_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, training ? st->mask : NULL, n,
									 1.0f / (1.0f - l->dropout.ratio));
			LAUNCHED("dropout backward");
		}
		break;
	case NET_LRN:
		if (dx)
			DNN(cudnnLRNCrossChannelBackward(cx->dnn, st->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, st->xd, y,
							 st->xd, dy, st->xd, x, &one, st->xd, dx),
			    "LRN backward");
		break;
	case NET_BATCH_NORM:
		if (dx) {
			const struct bn_desc *d = &bl->d.bn;
			k_bn_bwd<<<d->c, THREADS, 0, s>>>(dx, dy, y, st->invstd, d->n, d->c, (int64_t)d->h * d->w,
							  d->use_global_stats || !training);
			LAUNCHED("batch norm backward");
		}
		break;
	case NET_SOFTMAX:
		if (dx) {
			k_softmax_bwd<<<blocks_for((int64_t)bl->n * bl->inner), THREADS, 0, s>>>(dx, dy, y, bl->n, bl->c,
												 bl->inner);
			LAUNCHED("softmax backward");
		}
		break;
	case NET_SOFTMAX_LOSS:
		if (dx) {
			int64_t m = (int64_t)bl->n * bl->c * bl->inner;
			k_softmax_loss_bwd<<<blocks_for(m), THREADS, 0, s>>>(dx, st->prob, bl->x[1], st->valid, dy, bl->n,
									     bl->c, bl->inner,
									     l->loss.has_ignore_label ? l->loss.ignore_label
												      : -1,
									     (int)l->loss.normalization);
			LAUNCHED("softmax loss backward");
		}
		break;
	case NET_EUCLIDEAN_LOSS: {
		int64_t m = (int64_t)bl->n * bl->c * bl->inner;
		for (int j = 0; j < 2; j++)
			if (bl->dx[j]) {
				k_euclidean_bwd<<<blocks_for(m), THREADS, 0, s>>>(bl->dx[j], st->prob, dy, m, bl->n,
										  j ? -1.0f : 1.0f);
				LAUNCHED("euclidean loss backward");
			}
		break;
	}
	case NET_CROP:
		if (dx) {
			k_crop<<<blocks_for(n), THREADS, 0, s>>>((float *)dy, dx, crop_k_of(&bl->d.crop), n, 1);
			LAUNCHED("crop backward");
		}
		break;
	case NET_ELTWISE:
		for (int j = 0; j < bl->nbottom; j++)
			if (bl->dx[j]) {
				k_eltwise_bwd<<<blocks_for(n), THREADS, 0, s>>>(bl->dx[j], j, dy, ptr8_of(bl),
										 st->argmax, bl->nbottom, n,
										 (int)l->eltwise.op,
										 l->eltwise.op == NET_ELTWISE_SUM && l->eltwise.coeff
											 ? l->eltwise.coeff[j]
											 : 1.0f);
				LAUNCHED("eltwise backward");
			}
		break;
	case NET_CONCAT: {
		int ctot = 0, off = 0;
		for (int i = 0; i < bl->nbottom; i++)
			ctot += bl->cs[i];
		for (int i = 0; i < bl->nbottom; i++) {
			if (bl->dx[i]) {
				int64_t m = (int64_t)bl->n * bl->cs[i] * bl->concat_inner;
				k_concat<<<blocks_for(m), THREADS, 0, s>>>((float *)dy, bl->dx[i], bl->n, bl->cs[i], ctot, off,
									   bl->concat_inner, 1);
				LAUNCHED("concat backward");
			}
			off += bl->cs[i];
		}
		break;
	}
	case NET_SCALE: {
		const struct scale_desc *d = &bl->d.scale;
		if (bl->dw[0]) {
			k_channel_sum<<<d->c, THREADS, 0, s>>>(bl->dw[0], dy, x, d->n, d->c, d->inner);
			LAUNCHED("scale gradient");
		}
		if (d->bias && bl->dw[1]) {
			k_channel_sum<<<d->c, THREADS, 0, s>>>(bl->dw[1], dy, NULL, d->n, d->c, d->inner);
			LAUNCHED("scale bias gradient");
		}
		if (dx) {
			k_scale_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, bl->w[0], n, d->c, d->inner);
			LAUNCHED("scale backward");
		}
		break;
	}
	case NET_FLATTEN:
		if (dx) {
			k_add<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, n);
			LAUNCHED("flatten backward");
		}
		break;
	default:
		return dd_err_set(err, DD_EINTERNAL, "layer '%s': no CUDA kernel for its type", lname(bl));
	}
	prefetch_data(cx, x, 1); /* the data, read for the last time this step */
	return DD_OK;
}

/* ---- memory, sync, solver ---- */

/* Managed memory can be oversubscribed: an arena larger than the GPU would page
 * between host and device for ever instead of failing.  So the arenas are held to
 * a budget (the free memory when the backend started, less a reserve for cuDNN,
 * cuBLAS and the workspace), and each block carries its size in a 64-byte header
 * for cu_free to give back. */
#define HEADER 64
#define RESERVE ((size_t)1536 << 20)

static void *cu_alloc(struct backend *be, size_t bytes)
{
	struct cuda_ctx *cx = ctx_of(be);
	cudaSetDevice(cx->device);
	size_t total = bytes + HEADER;
	if (total > cx->budget || cx->used > cx->budget - total)
		return NULL;
	unsigned char *base = NULL;
	if (cudaMallocManaged((void **)&base, total, cudaMemAttachGlobal) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	/* zeroed, as the vtable promises; the host may write it at once (fillers) */
	if (cudaMemsetAsync(base, 0, total, cx->stream) != cudaSuccess ||
	    cudaStreamSynchronize(cx->stream) != cudaSuccess) {
		cudaGetLastError();
		cudaFree(base);
		return NULL;
	}
	*(size_t *)base = total;
	cx->used += total;
	return base + HEADER;
}

static void cu_free(struct backend *be, void *p)
{
	if (!p)
		return;
	struct cuda_ctx *cx = ctx_of(be);
	unsigned char *base = (unsigned char *)p - HEADER;
	cudaSetDevice(cx->device);
	cudaStreamSynchronize(cx->stream);
	cx->used -= *(size_t *)base;
	cudaFree(base);
}

static void cu_sync(struct backend *be)
{
	struct cuda_ctx *cx = ctx_of(be);
	cudaError_t e = cudaStreamSynchronize(cx->stream);
	if (e != cudaSuccess && cx->async_err == cudaSuccess) {
		cx->async_err = e;
		fprintf(stderr, "cuda: GPU %d: %s (a kernel failed after its launch)\n", cx->device, cudaGetErrorString(e));
	}
}

static int ready(struct cuda_ctx *cx, const struct backend_layer *bl, struct dd_err *err)
{
	cudaSetDevice(cx->device);
	if (cx->async_err != cudaSuccess)
		return cuda_fail(err, bl, cx->async_err, "an earlier operation on the GPU");
	return DD_OK;
}

static void cu_copy(struct backend *be, void *dst, const void *src, size_t bytes)
{
	cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx_of(be)->stream);
}

static void cu_zero(struct backend *be, void *p, size_t bytes)
{
	cudaMemsetAsync(p, 0, bytes, ctx_of(be)->stream);
}

static int cu_update(struct backend *be, const struct backend_update *u, struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	int rc = ready(ctx_of(be), bl, err);
	if (rc || u->n <= 0)
		return rc;
	if ((u->type == 1 || u->type == 5) && !u->h2)
		return dd_err_set(err, DD_EINVAL, "solver type %d needs two histories", u->type);
	k_update<<<blocks_for(u->n), THREADS, 0, ctx_of(be)->stream>>>(*u);
	LAUNCHED("solver update");
	return DD_OK;
}

static int cu_set_precision(struct backend *be, int precision, struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	struct cuda_ctx *cx = ctx_of(be);
	if (precision < BACKEND_FP32 || precision > BACKEND_BF16)
		return dd_err_set(err, DD_EINVAL, "precision %d: fp32, fp16 or bf16", precision);
	if (cx->nlayers > 0 && precision != cx->prec)
		return dd_err_set(err, DD_EINVAL, "the precision is set before a graph is built on the backend");
	cudaSetDevice(cx->device); /* whichever GPU the calling thread was on */
	if (precision != BACKEND_FP32 && !cx->flag)
		CU(cudaMalloc(&cx->flag, sizeof(int)), "the overflow flag");
	cx->prec = precision;
	cx->scale = precision == BACKEND_FP16 ? SCALE_START : 1.0f;
	cx->clean = 0;
	return DD_OK;
}

static int cu_unscale(struct backend *be, float *g, int64_t n, int *skipped, float *scale, struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	struct cuda_ctx *cx = ctx_of(be);
	*skipped = 0;
	*scale = cx->scale;
	int rc = ready(cx, bl, err);
	if (rc)
		return rc;
	if (cx->prec != BACKEND_FP16 || n <= 0)
		return DD_OK;
	int bad = 0;
	CU(cudaMemsetAsync(cx->flag, 0, sizeof(int), cx->stream), "the overflow flag");
	k_nonfinite<<<blocks_for(n), THREADS, 0, cx->stream>>>(cx->flag, g, n);
	LAUNCHED("the overflow check");
	CU(cudaMemcpyAsync(&bad, cx->flag, sizeof(int), cudaMemcpyDeviceToHost, cx->stream), "the overflow flag");
	CU(cudaStreamSynchronize(cx->stream), "waiting for the device");
	if (bad) {
		*skipped = 1;
		cx->scale = cx->scale / 2 < 1.0f / 65536 ? 1.0f / 65536 : cx->scale / 2;
		cx->clean = 0;
	} else {
		k_scale_by<<<blocks_for(n), THREADS, 0, cx->stream>>>(g, n, 1.0f / cx->scale);
		LAUNCHED("the loss unscale");
		CU(cudaStreamSynchronize(cx->stream), "waiting for the device"); /* the host may read g */
		if (++cx->clean >= GROWTH_STEPS && cx->scale < 65536.0f * 65536.0f) {
			cx->scale *= 2;
			cx->clean = 0;
		}
	}
	*scale = cx->scale;
	return DD_OK;
}

/* Device memory of at least bytes in *p (cap *have), its contents dropped. */
static int up_grow(struct cuda_ctx *cx, void **p, size_t *have, size_t bytes, struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	if (bytes <= *have)
		return DD_OK;
	CU(cudaStreamSynchronize(cx->stream), "waiting for the device");
	cudaFree(*p);
	*p = NULL;
	*have = 0;
	CU(cudaMalloc(p, bytes), "the upload buffers");
	*have = bytes;
	return DD_OK;
}

static int cu_upload(struct backend *be, const struct backend_upload *u, struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	struct cuda_ctx *cx = ctx_of(be);
	int rc0 = ready(cx, bl, err);
	if (rc0 || u->n <= 0)
		return rc0;
	if (u->oh > u->h || u->ow > u->w || u->c <= 0)
		return dd_err_set(err, DD_EINVAL, "upload: a %dx%d window of %dx%d images", u->ow, u->oh, u->w, u->h);
	size_t img = (size_t)u->c * u->h * u->w, npx = img * u->n;
	int rc;
	if ((rc = up_grow(cx, (void **)&cx->up_px, &cx->up_px_bytes, npx, err)) ||
	    (rc = up_grow(cx, (void **)&cx->up_geo, &cx->up_geo_bytes, 3 * sizeof(int32_t) * u->n, err)))
		return rc == DD_ENOMEM ? dd_err_set(err, DD_ENOMEM, "out of GPU memory uploading a batch of %d images: "
						 "try a smaller batch size", u->n) : rc;
	if (u->mean && (u->mean != cx->up_mean_of || cx->up_mean_bytes < img * sizeof(float))) {
		if ((rc = up_grow(cx, (void **)&cx->up_mean, &cx->up_mean_bytes, img * sizeof(float), err)))
			return rc;
		CU(cudaMemcpyAsync(cx->up_mean, u->mean, img * sizeof(float), cudaMemcpyHostToDevice, cx->stream),
		   "the mean");
		cx->up_mean_of = u->mean;
	}
	int32_t *geo = (int32_t *)malloc(3 * sizeof(int32_t) * u->n);
	if (!geo)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	for (int s = 0; s < u->n; s++) {
		geo[3 * s] = u->y0[s];
		geo[3 * s + 1] = u->x0[s];
		geo[3 * s + 2] = u->flip[s] != 0;
		if (u->y0[s] < 0 || u->x0[s] < 0 || u->y0[s] + u->oh > u->h || u->x0[s] + u->ow > u->w) {
			free(geo);
			return dd_err_set(err, DD_EINVAL, "upload: sample %d's window at (%d, %d) leaves the image", s, u->x0[s],
				       u->y0[s]);
		}
	}
	/* copies on the stream, after the last batch's kernel has read the buffers;
	 * from pageable memory they return once the host's bytes are staged, so the
	 * caller may reuse px at once (and geo is freed after a sync) */
	cudaError_t e = cudaMemcpyAsync(cx->up_px, u->px, npx, cudaMemcpyHostToDevice, cx->stream);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(cx->up_geo, geo, 3 * sizeof(int32_t) * u->n, cudaMemcpyHostToDevice, cx->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(cx->stream);
	free(geo);
	if (e != cudaSuccess)
		return cuda_fail(err, bl, e, "uploading a batch");
	for (int i = 0; i < cx->ndata; i++)
		if (cx->data[i] == u->out)
			cx->data_uploaded[i] = 1;
	struct upload_k k = { u->n, u->c, u->h, u->w, u->oh, u->ow, u->scale };
	int64_t total = (int64_t)u->n * u->c * u->oh * u->ow;
	k_upload<<<blocks_for(total), THREADS, 0, cx->stream>>>(u->out, cx->up_px, cx->up_geo,
							       u->mean ? cx->up_mean : NULL, k);
	LAUNCHED("the upload transform");
	return DD_OK;
}

/* ---- NCCL, by dlopen (libnccl.so.2): a machine without it still loads the plugin ---- */

static struct {
	int tried;
	void *h;
	ncclResult_t (*init_all)(ncclComm_t *, int, const int *);
	ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
				   cudaStream_t);
	ncclResult_t (*destroy)(ncclComm_t);
	const char *(*error)(ncclResult_t);
} nc;

static int nccl_load(struct dd_err *err)
{
	if (!nc.tried) {
		nc.tried = 1;
		nc.h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
		if (nc.h) {
			*(void **)&nc.init_all = dlsym(nc.h, "ncclCommInitAll");
			*(void **)&nc.all_reduce = dlsym(nc.h, "ncclAllReduce");
			*(void **)&nc.destroy = dlsym(nc.h, "ncclCommDestroy");
			*(void **)&nc.error = dlsym(nc.h, "ncclGetErrorString");
			if (!nc.init_all || !nc.all_reduce || !nc.destroy || !nc.error)
				nc.h = NULL;
		}
	}
	if (!nc.h)
		return dd_err_set(err, DD_EINVAL, "several GPUs need NCCL (libnccl.so.2), which does not load here");
	return DD_OK;
}

static void cu_bind(struct backend *be) { cudaSetDevice(ctx_of(be)->device); }

/* The mean of buf over the group, in place, queued; every GPU's thread calls it.
 * NCCL reduces a copy in plain device memory (ar_buf) rather than the managed
 * arena itself: its transports (peer-to-peer, NVLink SHARP) are made for
 * cudaMalloc memory, and the two device-to-device copies cost little next to the
 * reduction. */
static int cu_allreduce(struct backend *be, float *buf, int64_t n, struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	struct cuda_ctx *cx = ctx_of(be);
	if (!cx->nccl)
		return dd_err_set(err, DD_EINVAL, "this GPU is not in a group");
	int rc = ready(cx, bl, err);
	if (rc || n <= 0)
		return rc;
	size_t bytes = (size_t)n * sizeof(float);
	if ((rc = up_grow(cx, (void **)&cx->ar_buf, &cx->ar_bytes, bytes, err)))
		return rc == DD_ENOMEM ? dd_err_set(err, DD_ENOMEM, "out of GPU memory for the all-reduce of %lld "
								 "gradients: try a smaller batch size",
						 (long long)n)
				       : rc;
	if (!buf) /* only the room: taken by every GPU before any waits in a collective */
		return DD_OK;
	CU(cudaMemcpyAsync(cx->ar_buf, buf, bytes, cudaMemcpyDefault, cx->stream), "the gradients to all-reduce");
	ncclResult_t r = nc.all_reduce(cx->ar_buf, cx->ar_buf, (size_t)n, ncclFloat, ncclAvg, cx->nccl, cx->stream);
	if (r != ncclSuccess)
		return dd_err_set(err, DD_EINTERNAL, "NCCL all-reduce on GPU %d: %s", cx->device, nc.error(r));
	CU(cudaMemcpyAsync(buf, cx->ar_buf, bytes, cudaMemcpyDefault, cx->stream), "the all-reduced gradients");
	return DD_OK;
}

static int cu_supports(struct backend *be, const struct net_layer *l)
{
	return l->type < NET_LAYER_TYPE_COUNT;
}

static void cu_destroy(struct backend *be)
{
	struct cuda_ctx *cx = ctx_of(be);
	if (!cx)
		return;
	cudaSetDevice(cx->device);
	if (cx->stream)
		cudaStreamSynchronize(cx->stream);
	if (cx->nccl)
		nc.destroy(cx->nccl);
	cudaFree(cx->ws);
	cudaFree(cx->lp);
	cudaFree(cx->flag);
	cudaFree(cx->up_px);
	cudaFree(cx->up_geo);
	cudaFree(cx->up_mean);
	cudaFree(cx->ar_buf);
	if (cx->blas)
		cublasDestroy(cx->blas);
	if (cx->dnn)
		cudnnDestroy(cx->dnn);
	if (cx->stream)
		cudaStreamDestroy(cx->stream);
	free(cx);
}

static const struct backend_ops cuda_ops = {
	BACKEND_API_VERSION, /* api_version */
	"cuda",              /* name */
	cu_destroy,
	cu_supports,
	cu_layer_init,
	cu_layer_fini,
	cu_forward,
	cu_backward,
	cu_alloc,
	cu_free,
	cu_sync,
	cu_copy,
	cu_zero,
	cu_update,
	cu_set_precision,
	cu_unscale,
	cu_upload,
	cu_bind,
	cu_allreduce,
};

/* ---- the plugin's entry points ---- */

extern "C" {

__attribute__((visibility("default"))) extern const int deepdesk_backend_api_version;
const int deepdesk_backend_api_version = BACKEND_API_VERSION;

/* No driver, no GPU: a sentence; else the device count. */
static int device_count(int *n, struct dd_err *err)
{
	cudaError_t e = cudaGetDeviceCount(n);
	if (e == cudaErrorInsufficientDriver) {
		int rt = 0;
		cudaGetLastError();
		cudaRuntimeGetVersion(&rt);
		return dd_err_set(err, DD_EINVAL,
			       "no GPU usable here: the NVIDIA driver is missing or older than CUDA %d.%d needs (%s)",
			       rt / 1000, rt % 1000 / 10, cudaGetErrorString(e));
	}
	if (e == cudaErrorNoDevice || e == cudaErrorInitializationError || e == cudaErrorSystemDriverMismatch ||
	    e == cudaErrorCompatNotSupportedOnDevice) {
		cudaGetLastError();
		return dd_err_set(err, DD_EINVAL, "no GPU on this machine (%s)", cudaGetErrorString(e));
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		return dd_err_set(err, DD_EINVAL, "the CUDA runtime cannot see a GPU (%s)", cudaGetErrorString(e));
	}
	if (*n <= 0)
		return dd_err_set(err, DD_EINVAL, "no GPU on this machine (the driver lists none)");
	return DD_OK;
}

__attribute__((visibility("default"))) int deepdesk_cuda_devices(struct backend_gpu *out, int max, struct dd_err *err)
{
	int n = 0;
	int rc = device_count(&n, err);
	if (rc)
		return rc;
	int k = 0;
	for (int i = 0; i < n && k < max; i++) {
		struct cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
			continue;
		struct backend_gpu *g = &out[k++];
		memset(g, 0, sizeof *g);
		g->id = i;
		snprintf(g->name, sizeof g->name, "%s", p.name);
		g->memory_total = (long long)p.totalGlobalMem;
		g->memory_used = -1;
		g->utilization = -1;
	}
	return k;
}

__attribute__((visibility("default"))) int deepdesk_cuda_create(const struct backend_host *host, struct backend **out,
								  struct dd_err *err)
{
	const struct backend_layer *bl = NULL;
	*out = NULL;
	int n = 0;
	int rc = device_count(&n, err);
	if (rc)
		return rc;
	if (host->device < 0 || host->device >= n)
		return dd_err_set(err, DD_EINVAL, "no GPU %d: this machine has %d (0 to %d)", host->device, n, n - 1);
	struct cuda_ctx *cx = (struct cuda_ctx *)calloc(1, sizeof *cx);
	if (!cx)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	cx->host = *host;
	cx->device = host->device;
	cx->deterministic = host->deterministic;
	cx->scale = 1.0f;
	const char *tf = getenv("DEEPDESK_CUDA_TF32");
	cx->tf32 = tf && !strcmp(tf, "1");
	if (!cx->tf32) /* cuDNN's and cuBLAS's default math would use TF32 on Ampere and later */
		setenv("NVIDIA_TF32_OVERRIDE", "0", 0);
	cx->be.ops = &cuda_ops;
	cx->be.ctx = cx;
	struct cudaDeviceProp p;
	cudaError_t e = cudaSetDevice(cx->device);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&p, cx->device);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		rc = cuda_fail(err, bl, e, "starting the device");
		goto fail;
	}
	snprintf(cx->gpu_name, sizeof cx->gpu_name, "%s", p.name);
	{
		size_t free_b = 0, total_b = 0;
		e = cudaMemGetInfo(&free_b, &total_b);
		if (e != cudaSuccess) {
			rc = cuda_fail(err, bl, e, "reading the free memory");
			goto fail;
		}
		const char *cap = getenv("DEEPDESK_CUDA_MEMORY_MB"); /* a smaller budget, for tests */
		cx->budget = free_b > RESERVE ? free_b - RESERVE : free_b / 2;
		if (cap && atol(cap) > 0 && (size_t)atol(cap) << 20 < cx->budget)
			cx->budget = (size_t)atol(cap) << 20;
	}
	{
		cudnnStatus_t ds = cudnnCreate(&cx->dnn);
		if (ds == CUDNN_STATUS_SUCCESS)
			ds = cudnnSetStream(cx->dnn, cx->stream);
		if (ds != CUDNN_STATUS_SUCCESS) {
			rc = dnn_fail(err, bl, ds, "start");
			goto fail;
		}
		cublasStatus_t bs = cublasCreate(&cx->blas);
		if (bs == CUBLAS_STATUS_SUCCESS)
			bs = cublasSetStream(cx->blas, cx->stream);
		if (bs == CUBLAS_STATUS_SUCCESS)
			bs = cublasSetMathMode(cx->blas, cx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
		if (bs != CUBLAS_STATUS_SUCCESS) {
			rc = blas_fail(err, bl, bs, "start");
			goto fail;
		}
	}
	*out = &cx->be;
	return DD_OK;
fail:
	cu_destroy(&cx->be);
	return rc;
}

/* n backends, one per device in devices, whose allreduce averages over all n with
 * NCCL (one process; each GPU is driven by a thread of its own, which calls bind
 * first). */
__attribute__((visibility("default"))) int deepdesk_cuda_create_group(const struct backend_host *host, int n,
									const int *devices, struct backend **out,
									struct dd_err *err)
{
	for (int i = 0; i < n; i++)
		out[i] = NULL;
	if (n < 1 || n > 64)
		return dd_err_set(err, DD_EINVAL, "a group of %d GPUs", n);
	int rc = nccl_load(err);
	if (rc)
		return rc;
	ncclComm_t comms[64];
	for (int i = 0; i < n; i++) {
		struct backend_host h = *host;
		h.device = devices[i];
		if ((rc = deepdesk_cuda_create(&h, &out[i], err)))
			goto fail;
	}
	{
		ncclResult_t r = nc.init_all(comms, n, devices);
		if (r != ncclSuccess) {
			rc = dd_err_set(err, DD_EINTERNAL, "NCCL cannot join the %d GPUs: %s", n, nc.error(r));
			goto fail;
		}
	}
	for (int i = 0; i < n; i++) {
		struct cuda_ctx *cx = ctx_of(out[i]);
		cx->nccl = comms[i];
		/* NCCL's own buffers (NVLink SHARP's among them) came out of the memory the
		 * budget was taken from */
		size_t free_b = 0, total_b = 0;
		cudaSetDevice(cx->device);
		if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
			size_t b = free_b > RESERVE ? free_b - RESERVE : free_b / 2;
			if (b < cx->budget)
				cx->budget = b;
		}
	}
	cudaSetDevice(devices[0]);
	return DD_OK;
fail:
	for (int i = 0; i < n; i++) {
		if (out[i])
			cu_destroy(out[i]);
		out[i] = NULL;
	}
	return rc;
}

} /* extern "C" */
