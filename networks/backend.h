/* backend.h — what runs a graph's layers: the reference kernels, oneDNN, cuDNN.
 *
 * A graph (graph.h) owns the order of the layers, their shapes and one arena each
 * for parameters, gradients, activations and activation gradients.  A backend owns
 * the memory those arenas live in and each layer's private state (oneDNN primitives,
 * a pooling argmax, a dropout mask, ...).  The graph asks, before anything runs,
 * whether the backend supports every layer, and then calls it one layer at a time.
 *
 *   ref   plain C loops (networks/ref.h): every layer; the oracle of every test.
 *   cpu   oneDNN (networks/cpu/): convolution, inner product, pooling, LRN, batch
 *         norm, ReLU/Sigmoid/TanH, softmax; the other layers run the ref kernels.
 *   cuda  cuDNN + cuBLAS + own kernels (networks/cuda/), a plugin
 *         (libdeepdesk-cuda.so) loaded with dlopen only when asked for: next to the
 *         executable, or where DEEPDESK_CUDA_PLUGIN says.  "cuda:N" runs on device N.
 *
 * The vtable itself is in backend_impl.h, for the backends and the graph only.
 *
 * Ownership: backend_create gives a backend the caller frees with backend_free(),
 * after every graph that uses it (a graph BORROWS its backend). */
#ifndef DD_BACKEND_H
#define DD_BACKEND_H

#include <stdint.h>

#include "../common/err.h"

struct backend;

/* "ref", "cpu", "cuda", "cuda:N" ("auto": the fastest one always present: cpu).
 * "cuda" honours DEEPDESK_CUDA_DETERMINISTIC=1 (deterministic algorithms).  DD_OK and *out, or
 * DD_EINVAL naming the unknown backend, DD_EINTERNAL when it cannot start. */
int backend_create(const char *name, struct backend **out, struct dd_err *err);
/* Accepts NULL. */
void backend_free(struct backend *be);
/* Its name ("ref", "cpu"); borrowed, static. */
const char *backend_name(const struct backend *be);
/* The names of the backends built into every binary, NULL-terminated; static.
 * ("cuda" is not among them: it exists only where its plugin loads.) */
const char *const *backend_names(void);

/* The CUDA backend on device `device` (an index after CUDA_VISIBLE_DEVICES);
 * deterministic 1: cuDNN's deterministic algorithms only, so that repeats are bit
 * for bit the same.  DD_OK and *out, or DD_EINVAL with a sentence saying what is
 * missing: the plugin (not built here), a plugin of another API version, the
 * driver, or a GPU. */
int backend_create_cuda(int device, int deterministic, struct backend **out, struct dd_err *err);

/* The math a backend's convolutions and inner products run in.  FP16 and BF16:
 * tensor-core math on half-precision copies of the inputs and weights with FP32
 * accumulation, FP32 activations and master weights; FP16 with dynamic loss
 * scaling.  Only the cuda backend has them. */
enum backend_precision { BACKEND_FP32, BACKEND_FP16, BACKEND_BF16 };
/* "fp32", "fp16", "bf16" (NULL or "": fp32) into *out; DD_EINVAL naming the value. */
int backend_precision_parse(const char *s, int *out, struct dd_err *err);
const char *backend_precision_name(int precision);
/* Before any graph is created on be.  FP32 always works; otherwise DD_EINVAL
 * saying that the precision needs the cuda backend. */
int backend_set_precision(struct backend *be, int precision, struct dd_err *err);
/* After a step's backward passes, before the solver: undo FP16's loss scale on the
 * gradient arena g (n elements).  *skipped 1: the gradients overflowed, do not take
 * this step (the scale was halved).  *scale (may be NULL): the scale now; 1 where
 * there is none.  Returns with g ready for the host to read. */
int backend_unscale(struct backend *be, float *g, int64_t n, int *skipped, float *scale, struct dd_err *err);

/* A batch of 8-bit images for a backend to transform on its device, as
 * feed_transform (feed.h) does on the host and bit for bit the same in FP32:
 *   out[s] (c*oh*ow) = (px[s] − mean) · scale over the oh×ow window at (y0[s], x0[s]),
 *   mirrored horizontally where flip[s].
 * Everything but out is host memory the call may forget once it returns; out is
 * the backend's memory (a graph's data blob), written in order with its layers. */
struct backend_upload {
	const uint8_t *px;       /* (n*c*h*w) C×H×W planes, BGR, sample after sample */
	const int32_t *y0, *x0;  /* (n) each */
	const uint8_t *flip;     /* (n) */
	int n, c, h, w, oh, ow;
	const float *mean;       /* (c*h*w) or NULL; kept on the device while the same pointer comes */
	float scale;
	float *out;
};
/* Whether be transforms uploads itself (the cuda backend). */
int backend_has_upload(const struct backend *be);
/* DD_OK, or the backend's error; DD_EINVAL where it has no upload. */
int backend_upload_batch(struct backend *be, const struct backend_upload *u, struct dd_err *err);

/* Data parallelism: n backends of one kind, one per copy of a network (train.h's
 * replicas).  "cuda"/"cuda:N": one per device in devices, joined by NCCL
 * (backend_create_cuda_group); "cpu", "ref": n independent ones (devices unused),
 * whose copies the caller averages on the host.  DD_OK and out[0..n-1], or the
 * error of the one that failed (none is left). */
int backend_create_group(const char *name, int n, const int *devices, struct backend **out, struct dd_err *err);

/* The cuda group: n backends, one per device in devices, joined by NCCL.  Each is
 * driven by a thread of its own, which calls backend_bind first (and any thread
 * that builds a graph on one binds it first); backend_allreduce then turns a
 * buffer of its memory (a gradient arena) into the mean over the n, every
 * member's thread calling it once per step.  DD_EINVAL saying what is missing (the
 * plugin, NCCL, a GPU). */
int backend_create_cuda_group(int n, const int *devices, int deterministic, struct backend **out,
			      struct dd_err *err);
void backend_bind(struct backend *be);
/* Wait until everything queued on be has run, so the host may read and write its
 * memory (a graph's arenas). */
void backend_wait(struct backend *be);
/* Whether be is one of a group that averages on its own (cuda with NCCL). */
int backend_has_allreduce(const struct backend *be);
/* buf NULL: only make room for an all-reduce of n (no collective), so that a GPU
 * short of memory fails before any of the group waits in one. */
int backend_allreduce(struct backend *be, float *buf, int64_t n, struct dd_err *err);

/* One GPU as the server reports it (/api/v1/info "gpus"). */
struct backend_gpu {
	int id;
	char name[96];
	long long memory_total;  /* bytes */
	long long memory_used;   /* bytes; -1 when NVML is not there to say */
	int utilization;         /* percent; -1 likewise */
};
/* The GPUs this machine has: names, memory, use and utilisation from NVML
 * (libnvidia-ml.so.1, part of the driver, loaded with dlopen); without NVML, from
 * the CUDA plugin if this process has loaded it (use and utilisation then -1).
 * Returns how many (at most max filled); 0 where there is no driver, no GPU or
 * neither library.  Never fails, never aborts. */
int backend_gpus(struct backend_gpu *out, int max);

#endif
