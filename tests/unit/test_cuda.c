/* test_cuda.c — the cuda backend (networks/cuda/) against the cpu backend.
 *
 * Each layer type runs inside a small network, Input → Convolution → the layer →
 * InnerProduct → SoftmaxWithLoss (+ Accuracy), built twice from the same seed (the
 * same filler weights) on cpu and on cuda and fed the same data: one training
 * forward and backward, then every blob, every blob gradient, every parameter and
 * every parameter gradient compared by normalised error
 *     max|cuda − cpu| / max(1, max|cpu|) < TOL.
 * Segmentation's losses run in their own small network: spatial scores against
 * N×1×H×W labels with ignore_label 255, SoftmaxWithLoss in each of Caffe's four
 * normalisations and Accuracy top-1 and top-2.
 * Going through the graph means the backend meets what training gives it: in-place
 * layers with their saved values, gradients that must be added, the dropout stream.
 * Then LeNet and AlexNet take two solver steps on both backends (the same loss and
 * weights within tolerance), every solver type's device update is held to the
 * host's, deterministic mode repeats bit for bit, a batch too large for the GPU
 * is a clear error naming the batch size, and a whole training run (train_run: the
 * feed, validation, snapshots) on cuda learns what it learns on cpu.
 *
 * Mixed precision: every layer case again with BF16 convolutions and inner products
 * (a looser tolerance, BF16_TOL); LeNet trained MIXED_STEPS steps in FP32, FP16 and
 * BF16 on cuda from the same weights and data, the half-precision losses within
 * FP16_LOSS_TOL / BF16_LOSS_TOL of FP32's; FP16's loss scaling skipping a step on an
 * injected inf, halving its scale, and unscaling the next step's gradients to
 * FP32's.  On every machine: a half precision on a backend other than cuda is
 * refused, by name.
 *
 * Device data preparation: an 8-bit batch uploaded and transformed on the GPU
 * (mean, scale, crop window, mirror) is feed_transform's output bit for bit, and a
 * feed handing its batches to the device feeds exactly what the host path feeds.
 * On every machine the feed's side is checked with the cpu backend as its device
 * (no upload op: the host path) and with the cpu backend plus an upload done on
 * the host (the 8-bit path: planes, windows and flips as the feed hands them).
 *
 * NCCL on any GPU machine: a group of one GPU all-reduces a gradient arena and
 * leaves it as it was.  Several GPUs (skipped with fewer than two): LeNet on a group of two, 32 images
 * each, one thread per GPU, gradients averaged with NCCL, gives one GPU's
 * gradients for the 64 together, and a solver step leaves both replicas' weights
 * bit for bit the same and the single GPU's within tolerance; and a whole
 * train_run on two GPUs of batch 6 trains as one of batch 12.
 *
 * Where no GPU answers (or the plugin was not built) the GPU tests print a visible
 * "SKIP: <reason>" and the summary counts them; what runs here then is the check
 * that the refusal says why, and a dry run of the comparisons with the ref backend
 * in cuda's place (also `test_cuda --against ref|cpu` anywhere): this file's
 * networks, tolerances and harness, and train_run on two host copies. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../networks/backend.h"
#include "../../networks/backend_impl.h"
#include "../../networks/feed.h"
#include "../../networks/graph.h"
#include "../../networks/net.h"
#include "../../networks/snapshot.h"
#include "../../networks/solver.h"
#include "../../networks/train.h"
#include "check.h"
#include "quadrants.h"
#include "weights.h"

#define TOL 1e-3

static struct backend *cpu, *cu;

/* max|a − ref| / max(1, max|ref|); NaN counts as infinitely wrong */
static double nerr(const float *a, const float *ref, int64_t count)
{
	double md = 0.0, mr = 0.0;
	for (int64_t i = 0; i < count; i++) {
		double diff = fabs((double)a[i] - ref[i]);
		if (!(diff <= md))
			md = isnan(diff) ? INFINITY : diff;
		if (fabs(ref[i]) > mr)
			mr = fabs(ref[i]);
	}
	return md / (mr > 1.0 ? mr : 1.0);
}

static void expect_close(const char *net, const char *what, const char *name, const float *a, const float *ref,
			 int64_t count, double tol)
{
	double e = nerr(a, ref, count);
	if (e < tol)
		return;
	fprintf(stderr, "  %s: %s '%s': normalised error %.3g (tolerance %g)\n", net, what, name, e, tol);
	check_current_failed = 1;
}

/* A network instantiated for training and its graph on one backend. */
struct side {
	struct net *def;
	struct net_graph *g;
	struct graph *gr;
};

static void side_free(struct side *s)
{
	graph_free(s->gr);
	net_graph_free(s->g);
	net_free(s->def);
	memset(s, 0, sizeof *s);
}

static int side_make(struct side *s, const char *text, const struct net_input *in, struct backend *be, uint64_t seed)
{
	struct dd_err err = { 0 };
	memset(s, 0, sizeof *s);
	if (net_parse(text, strlen(text), &s->def, &err) || net_instantiate(s->def, NET_STAGE_TRAIN, in, &s->g, &err) ||
	    graph_create(s->g, be, seed, &s->gr, &err)) {
		fprintf(stderr, "  on %s: %s\n", backend_name(be), err.msg);
		side_free(s);
		return -1;
	}
	return 0;
}

/* The same data and labels into a graph: a fixed pseudo-random pattern. */
static void feed(struct side *s, int classes, uint64_t seed)
{
	struct net_shape ds, ls;
	float *data = graph_blob(s->gr, "data", &ds), *label = graph_blob(s->gr, "label", &ls);
	uint64_t r = seed;
	int64_t n = 1, nl = 1;
	for (int i = 0; i < ds.ndim; i++)
		n *= ds.dim[i];
	for (int i = 0; i < ls.ndim; i++)
		nl *= ls.dim[i];
	for (int64_t i = 0; data && i < n; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		data[i] = (float)((double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0);
	}
	for (int64_t i = 0; label && i < nl; i++)
		label[i] = (float)(i % classes);
}

static int pass(struct side *s, float *loss)
{
	struct dd_err err = { 0 };
	graph_zero_grads(s->gr);
	if (graph_forward(s->gr, 1, loss, &err) || graph_backward(s->gr, &err)) {
		fprintf(stderr, "  %s: %s\n", backend_name(graph_backend(s->gr)), err.msg);
		return -1;
	}
	return 0;
}

/* Every blob, blob gradient, parameter and parameter gradient of b against a. */
static void compare(const char *net, struct side *a, struct side *b, double tol)
{
	const struct net_graph *g = a->g;
	for (int k = 0; k < g->nblob; k++) {
		const char *name = g->blob[k].name;
		float *va = graph_blob(a->gr, name, NULL), *vb = graph_blob(b->gr, name, NULL);
		expect_close(net, "blob", name, vb, va, g->blob[k].count, tol);
		float *ga = graph_blob_grad(a->gr, name), *gb = graph_blob_grad(b->gr, name);
		CHECK((ga == NULL) == (gb == NULL));
		if (ga && gb)
			expect_close(net, "blob gradient", name, gb, ga, g->blob[k].count, tol);
	}
	for (int i = 0; i < graph_nparam(a->gr); i++) {
		const struct graph_param *pa = graph_param(a->gr, i), *pb = graph_param(b->gr, i);
		char name[160];
		snprintf(name, sizeof name, "%s.%s", pa->layer, pa->role);
		expect_close(net, "parameter", name, pb->w, pa->w, pa->count, tol);
		if (pa->dw && pb->dw)
			expect_close(net, "parameter gradient", name, pb->dw, pa->dw, pa->count, tol);
	}
}

/* ---- every layer type inside a small network ---- */

static const char head[] =
	"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 4 dim: 3 dim: 12 dim: 12 } } }\n"
	"layer { name: \"c0\" type: \"Convolution\" bottom: \"data\" top: \"c0\"\n"
	"  convolution_param { num_output: 6 kernel_size: 3 pad: 1\n"
	"    weight_filler { type: \"gaussian\" std: 0.3 } bias_filler { type: \"uniform\" min: -0.1 max: 0.1 } } }\n";
static const char tail[] =
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"mid\" top: \"fc\"\n"
	"  inner_product_param { num_output: 5 weight_filler { type: \"xavier\" } bias_filler { type: \"gaussian\" std: 0.1 } } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n"
	"layer { name: \"acc\" type: \"Accuracy\" bottom: \"fc\" bottom: \"label\" top: \"acc\" }\n";
#define CONV(name, bottom, top, params)                                                                         \
	"layer { name: \"" name "\" type: \"Convolution\" bottom: \"" bottom "\" top: \"" top "\"\n"          \
	"  convolution_param { " params " weight_filler { type: \"gaussian\" std: 0.2 }\n"                     \
	"    bias_filler { type: \"uniform\" min: -0.1 max: 0.1 } } }\n"

#define DECONV(name, bottom, top, params)                                                                       \
	"layer { name: \"" name "\" type: \"Deconvolution\" bottom: \"" bottom "\" top: \"" top "\"\n"        \
	"  convolution_param { " params " weight_filler { type: \"gaussian\" std: 0.2 }\n"                     \
	"    bias_filler { type: \"uniform\" min: -0.1 max: 0.1 } } }\n"

static const struct {
	const char *what, *body;
} layer_cases[] = {
	{ "conv 3x3 pad 1", CONV("t", "c0", "mid", "num_output: 4 kernel_size: 3 pad: 1") },
	{ "conv stride 2, no bias", CONV("t", "c0", "mid", "num_output: 4 kernel_size: 3 stride: 2 bias_term: false") },
	{ "conv group 2", CONV("t", "c0", "mid", "num_output: 4 kernel_size: 3 group: 2") },
	{ "conv depthwise (group 6)", CONV("t", "c0", "mid", "num_output: 6 kernel_size: 3 pad: 1 group: 6") },
	{ "conv dilation 2", CONV("t", "c0", "mid", "num_output: 4 kernel_size: 3 dilation: 2 pad: 2") },
	{ "conv 1x1", CONV("t", "c0", "mid", "num_output: 8 kernel_size: 1") },
	{ "conv 5x5 stride 3 (AlexNet-like)", CONV("t", "c0", "mid", "num_output: 8 kernel_size: 5 stride: 3 pad: 1") },
	{ "deconv k4 s2 pad 1 (2x upsampling), no bias",
	  DECONV("t", "c0", "mid", "num_output: 4 kernel_size: 4 stride: 2 pad: 1 bias_term: false") },
	{ "deconv group 2, stride 2", DECONV("t", "c0", "mid", "num_output: 4 kernel_size: 3 stride: 2 group: 2") },
	{ "deconv dilation 2, non-square", DECONV("t", "c0", "mid", "num_output: 3 kernel_h: 3 kernel_w: 2 dilation: 2 pad: 1") },
	{ "deconv bilinear, one group per channel",
	  "layer { name: \"t\" type: \"Deconvolution\" bottom: \"c0\" top: \"mid\" convolution_param { num_output: 6 group: 6\n"
	  "  kernel_size: 4 stride: 2 pad: 1 bias_term: false weight_filler { type: \"bilinear\" } } }\n" },
	{ "pool MAX k3 s2 (ceil)",
	  "layer { name: \"t\" type: \"Pooling\" bottom: \"c0\" top: \"mid\" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n" },
	{ "pool MAX k2 s2",
	  "layer { name: \"t\" type: \"Pooling\" bottom: \"c0\" top: \"mid\" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n" },
	{ "pool MAX pad 1",
	  "layer { name: \"t\" type: \"Pooling\" bottom: \"c0\" top: \"mid\" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }\n" },
	{ "pool AVE pad 1",
	  "layer { name: \"t\" type: \"Pooling\" bottom: \"c0\" top: \"mid\" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }\n" },
	{ "pool AVE global",
	  "layer { name: \"t\" type: \"Pooling\" bottom: \"c0\" top: \"mid\" pooling_param { pool: AVE global_pooling: true } }\n" },
	{ "ReLU in place", "layer { name: \"t\" type: \"ReLU\" bottom: \"c0\" top: \"c0\" }\n"
			   "layer { name: \"f\" type: \"Flatten\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "leaky ReLU", "layer { name: \"t\" type: \"ReLU\" bottom: \"c0\" top: \"mid\" relu_param { negative_slope: 0.1 } }\n" },
	{ "Sigmoid", "layer { name: \"t\" type: \"Sigmoid\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "TanH in place", "layer { name: \"t\" type: \"TanH\" bottom: \"c0\" top: \"c0\" }\n"
			   "layer { name: \"f\" type: \"Flatten\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "Power", "layer { name: \"t\" type: \"Power\" bottom: \"c0\" top: \"mid\" power_param { power: 2 scale: 0.5 shift: 1 } }\n" },
	{ "LRN (AlexNet's)",
	  "layer { name: \"t\" type: \"LRN\" bottom: \"c0\" top: \"mid\" lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }\n" },
	{ "LRN alpha 1",
	  "layer { name: \"t\" type: \"LRN\" bottom: \"c0\" top: \"mid\" lrn_param { local_size: 3 alpha: 1 beta: 0.75 k: 2 } }\n" },
	{ "Dropout in place", "layer { name: \"t\" type: \"Dropout\" bottom: \"c0\" top: \"c0\" dropout_param { dropout_ratio: 0.5 } }\n"
			      "layer { name: \"f\" type: \"Flatten\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "Dropout 0.3", "layer { name: \"t\" type: \"Dropout\" bottom: \"c0\" top: \"mid\" dropout_param { dropout_ratio: 0.3 } }\n" },
	{ "BatchNorm + Scale",
	  "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"c0\" top: \"bn\" }\n"
	  "layer { name: \"t\" type: \"Scale\" bottom: \"bn\" top: \"mid\" scale_param { bias_term: true } }\n" },
	{ "BatchNorm + Scale in place",
	  "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"c0\" top: \"c0\" }\n"
	  "layer { name: \"t\" type: \"Scale\" bottom: \"c0\" top: \"c0\" scale_param { bias_term: true } }\n"
	  "layer { name: \"f\" type: \"Flatten\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "Eltwise SUM with coefficients",
	  CONV("b", "c0", "b", "num_output: 6 kernel_size: 3 pad: 1")
	  "layer { name: \"t\" type: \"Eltwise\" bottom: \"c0\" bottom: \"b\" top: \"mid\" eltwise_param { operation: SUM coeff: 1 coeff: -0.5 } }\n" },
	{ "Eltwise PROD",
	  CONV("b", "c0", "b", "num_output: 6 kernel_size: 3 pad: 1")
	  "layer { name: \"t\" type: \"Eltwise\" bottom: \"c0\" bottom: \"b\" top: \"mid\" eltwise_param { operation: PROD } }\n" },
	{ "Eltwise MAX",
	  CONV("b", "c0", "b", "num_output: 6 kernel_size: 3 pad: 1")
	  "layer { name: \"t\" type: \"Eltwise\" bottom: \"c0\" bottom: \"b\" top: \"mid\" eltwise_param { operation: MAX } }\n" },
	{ "Concat",
	  CONV("b", "c0", "b", "num_output: 3 kernel_size: 3 pad: 1")
	  "layer { name: \"t\" type: \"Concat\" bottom: \"c0\" bottom: \"b\" top: \"mid\" }\n" },
	{ "Softmax", "layer { name: \"t\" type: \"Softmax\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "Crop axis 2 offset 3",
	  "layer { name: \"p\" type: \"Pooling\" bottom: \"c0\" top: \"p\" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
	  "layer { name: \"t\" type: \"Crop\" bottom: \"c0\" bottom: \"p\" top: \"mid\" crop_param { offset: 3 } }\n" },
	{ "Crop axis 1 offsets 2, 1, 0",
	  CONV("b", "c0", "b", "num_output: 2 kernel_size: 3 pad: 0")
	  "layer { name: \"t\" type: \"Crop\" bottom: \"c0\" bottom: \"b\" top: \"mid\" crop_param { axis: 1 offset: 2 offset: 1 offset: 0 } }\n" },
	{ "EuclideanLoss into both bottoms",
	  CONV("b", "c0", "b", "num_output: 6 kernel_size: 3 pad: 1")
	  "layer { name: \"e\" type: \"EuclideanLoss\" bottom: \"c0\" bottom: \"b\" top: \"e\" loss_weight: 0.5 }\n"
	  "layer { name: \"f\" type: \"Flatten\" bottom: \"c0\" top: \"mid\" }\n" },
	{ "InnerProduct chain",
	  "layer { name: \"t\" type: \"InnerProduct\" bottom: \"c0\" top: \"mid\"\n"
	  "  inner_product_param { num_output: 17 weight_filler { type: \"gaussian\" std: 0.05 } bias_filler { type: \"constant\" value: 0.1 } } }\n" },
};

/* Layer case i of text on the CPU (a) and on other (b), both with parameters from
 * seed 11 + i and fed the same 5-class data from seed 100 + i.  0, or -1 with the
 * case named and neither side left. */
static int case_pair(struct side *a, struct side *b, const char *text, const struct net_input *in, struct backend *other,
		     size_t i)
{
	if (side_make(a, text, in, cpu, 11 + i) || side_make(b, text, in, other, 11 + i)) {
		fprintf(stderr, "  case %s\n", layer_cases[i].what);
		side_free(a);
		return -1;
	}
	feed(a, 5, 100 + i);
	feed(b, 5, 100 + i);
	return 0;
}

/* Every layer case on the CPU and on other, forward and backward, within tol.  With
 * bf16 (other computes in BF16) its gradients unscale with nothing skipped, as BF16
 * has no loss scale; without, both accuracies are the same to the bit too. */
static void layer_cases_against(struct backend *other, double tol, int bf16)
{
	char text[4096];
	struct net_input in = { .n = 4, .c = 3, .h = 12, .w = 12, .classes = 5 };
	for (size_t i = 0; i < sizeof layer_cases / sizeof *layer_cases; i++) {
		snprintf(text, sizeof text, "name: \"case\"\n%s%s%s", head, layer_cases[i].body, tail);
		struct side a, b;
		if (case_pair(&a, &b, text, &in, other, i)) {
			CHECK(0);
			continue;
		}
		float la = NAN, lb = NAN;
		CHECK(pass(&a, &la) == 0);
		CHECK(pass(&b, &lb) == 0);
		if (bf16) {
			int skipped = 1;
			struct dd_err err = { 0 };
			CHECK(backend_unscale(other, graph_grads(b.gr), graph_param_count(b.gr), &skipped, NULL, &err) == DD_OK);
			CHECK_EQ_INT(skipped, 0);
		}
		compare(layer_cases[i].what, &a, &b, tol);
		CHECK(fabs(la - lb) <= tol * fmax(1.0, fabs(la)));
		if (!bf16)
			CHECK(graph_value(a.gr, "acc") == graph_value(b.gr, "acc"));
		side_free(&b);
		side_free(&a);
	}
}

static void test_layers(void)
{
	layer_cases_against(cu, TOL, 0);
}

/* Segmentation's losses: N×C×H×W scores against N×1×H×W labels (classes 0..4, every
 * seventh position 255), SoftmaxWithLoss in Caffe's four normalisations with
 * ignore_label, Accuracy top-1 and top-2 with ignore_label.  The labels are the data
 * itself (written here, after the graph's own feed), the scores a convolution of a
 * scaled copy of it. */
static void test_spatial_losses(void)
{
	static const char *const norms[] = { "FULL", "VALID", "BATCH_SIZE", "NONE" };
	char text[4096];
	struct net_input in = { .n = 4, .c = 1, .h = 8, .w = 8, .classes = 5 };
	for (int k = 0; k < 8; k++) {
		snprintf(text, sizeof text,
			 "name: \"seg\"\n"
			 "layer { name: \"s\" type: \"Power\" bottom: \"data\" top: \"s\" power_param { scale: 0.01 } }\n"
			 "layer { name: \"c0\" type: \"Convolution\" bottom: \"s\" top: \"c0\"\n"
			 "  convolution_param { num_output: 5 kernel_size: 3 pad: 1\n"
			 "    weight_filler { type: \"gaussian\" std: 0.5 } bias_filler { type: \"uniform\" min: -0.5 max: 0.5 } } }\n"
			 "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"c0\" bottom: \"data\" top: \"loss\"\n"
			 "  loss_param { ignore_label: 255 normalization: %s } }\n"
			 "layer { name: \"acc\" type: \"Accuracy\" bottom: \"c0\" bottom: \"data\" top: \"acc\"\n"
			 "  accuracy_param { ignore_label: 255 top_k: %d } }\n",
			 norms[k % 4], 1 + k / 4);
		struct side a, b;
		if (side_make(&a, text, &in, cpu, 300 + (uint64_t)k) || side_make(&b, text, &in, cu, 300 + (uint64_t)k)) {
			side_free(&a);
			CHECK(0);
			continue;
		}
		struct side *both[2] = { &a, &b };
		for (int j = 0; j < 2; j++) {
			struct net_shape ds;
			float *data = graph_blob(both[j]->gr, "data", &ds);
			CHECK(data != NULL && ds.ndim == 4);
			for (int64_t i = 0; data && i < 4 * 8 * 8; i++)
				data[i] = i % 7 == 3 ? 255.0f : (float)((i * 13 + i / 8) % 5);
		}
		float la = NAN, lb = NAN;
		CHECK(pass(&a, &la) == 0);
		CHECK(pass(&b, &lb) == 0);
		char what[64];
		snprintf(what, sizeof what, "spatial %s, top-%d", norms[k % 4], 1 + k / 4);
		compare(what, &a, &b, TOL);
		CHECK(fabs(la - lb) <= TOL * fmax(1.0, fabs(la)));
		CHECK(graph_value(a.gr, "acc") == graph_value(b.gr, "acc"));
		CHECK(graph_value(a.gr, "acc") > 0 && graph_value(a.gr, "acc") < 1);
		side_free(&b);
		side_free(&a);
	}
}

/* ---- the solvers: the device update against the host's ---- */

static void test_solvers(void)
{
	char text[4096];
	snprintf(text, sizeof text, "name: \"solvers\"\n%s%s%s", head,
		 "layer { name: \"t\" type: \"ReLU\" bottom: \"c0\" top: \"mid\" }\n", tail);
	struct net_input in = { .n = 4, .c = 3, .h = 12, .w = 12, .classes = 5 };
	static const enum solver_type types[] = { SOLVER_SGD,     SOLVER_NESTEROV, SOLVER_ADAGRAD,
						  SOLVER_RMSPROP, SOLVER_ADADELTA, SOLVER_ADAM };
	for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
		struct solver_config c = { .type = types[t], .base_lr = types[t] == SOLVER_ADADELTA ? 1.0 : 0.01,
					   .momentum = types[t] == SOLVER_ADADELTA ? 0.95 : 0.9, .momentum2 = 0.999,
					   .weight_decay = 5e-4, .iter_size = 2, .delta = 1e-6 };
		if (types[t] == SOLVER_ADAGRAD || types[t] == SOLVER_RMSPROP)
			c.momentum = 0;
		struct side a, b;
		struct solver *sa = NULL, *sb = NULL;
		struct dd_err err = { 0 };
		if (side_make(&a, text, &in, cpu, 3) || side_make(&b, text, &in, cu, 3) ||
		    solver_create(&c, a.gr, &sa, &err) || solver_create(&c, b.gr, &sb, &err)) {
			fprintf(stderr, "  %s: %s\n", solver_type_name(types[t]), err.msg);
			CHECK(0);
		} else {
			for (int it = 0; it < 3; it++) {
				feed(&a, 5, 40 + it);
				feed(&b, 5, 40 + it);
				float la, lb;
				CHECK(pass(&a, &la) == 0 && pass(&b, &lb) == 0);
				solver_step(sa, it);
				solver_step(sb, it);
			}
			char what[64];
			snprintf(what, sizeof what, "solver %s", solver_type_name(types[t]));
			compare(what, &a, &b, TOL);
			for (int h = 0; h < solver_nhistory(sa); h++)
				expect_close(what, "history", "all", solver_history(sb, h), solver_history(sa, h),
					     graph_param_count(a.gr), TOL);
		}
		solver_free(sb);
		solver_free(sa);
		side_free(&b);
		side_free(&a);
	}
}

/* ---- mixed precision ---- */

/* BF16 keeps 8 bits of mantissa: a rounding of 2^-9 relative on every input and
 * weight of a convolution or inner product, FP32 accumulation. */
#define BF16_TOL 5e-2
#define MIXED_STEPS 30
#define FP16_LOSS_TOL 0.05
#define BF16_LOSS_TOL 0.10
#define FIRST_LOSS_TOL 0.02 /* the first loss: the same weights, one forward */

static struct backend *cuda_at(int precision)
{
	struct backend *b = NULL;
	struct dd_err err = { 0 };
	if (backend_create_cuda(0, 0, &b, &err) || backend_set_precision(b, precision, &err)) {
		fprintf(stderr, "  cuda %s: %s\n", backend_precision_name(precision), err.msg);
		backend_free(b);
		return NULL;
	}
	return b;
}

static void test_layers_bf16(void)
{
	struct backend *b16 = cuda_at(BACKEND_BF16);
	CHECK(b16 != NULL);
	if (!b16)
		return;
	layer_cases_against(b16, BF16_TOL, 1);
	backend_free(b16);
}

/* LeNet on cuda in one precision, MIXED_STEPS SGD steps from seed 1 on the fixed
 * data; the first and the last loss; how many steps loss scaling skipped. */
static int lenet_run(int precision, float *first, float *last, int *skips)
{
	struct net_input in = { .n = 64, .c = 1, .h = 28, .w = 28, .classes = 10 };
	struct backend *be = cuda_at(precision);
	struct side s = { 0 };
	struct solver *sv = NULL;
	struct dd_err err = { 0 };
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4 };
	int rc = -1;
	*skips = 0;
	if (!be || side_make(&s, net_standard_text("lenet"), &in, be, 1) || solver_create(&c, s.gr, &sv, &err))
		goto done;
	for (int it = 0; it < MIXED_STEPS; it++) {
		float loss = NAN;
		int skipped = 0;
		feed(&s, 10, 7 + it % 4); /* four batches, seen again and again: the loss falls */
		if (pass(&s, &loss) ||
		    backend_unscale(be, graph_grads(s.gr), graph_param_count(s.gr), &skipped, NULL, &err))
			goto done;
		if (it == 0)
			*first = loss;
		*last = loss;
		*skips += skipped;
		if (!skipped)
			solver_step(sv, it);
	}
	rc = 0;
done:
	if (rc && err.msg[0])
		fprintf(stderr, "  lenet %s: %s\n", backend_precision_name(precision), err.msg);
	solver_free(sv);
	side_free(&s);
	backend_free(be);
	return rc;
}

static void test_lenet_mixed(void)
{
	float f[3] = { NAN, NAN, NAN }, l[3] = { NAN, NAN, NAN };
	int skips[3] = { 0, 0, 0 };
	for (int p = BACKEND_FP32; p <= BACKEND_BF16; p++) {
		CHECK(lenet_run(p, &f[p], &l[p], &skips[p]) == 0);
		printf("  lenet %s: loss %.5f -> %.5f after %d steps, %d skipped\n", backend_precision_name(p), f[p], l[p],
		       MIXED_STEPS, skips[p]);
	}
	CHECK(l[0] < f[0]); /* FP32 learns, so the comparison means something */
	CHECK(fabs(f[1] - f[0]) <= FIRST_LOSS_TOL * fmax(1.0, f[0]));
	CHECK(fabs(f[2] - f[0]) <= FIRST_LOSS_TOL * fmax(1.0, f[0]));
	CHECK(fabs(l[1] - l[0]) <= FP16_LOSS_TOL * fmax(1.0, l[0]));
	CHECK(fabs(l[2] - l[0]) <= BF16_LOSS_TOL * fmax(1.0, l[0]));
	CHECK(skips[0] == 0 && skips[2] == 0);
	CHECK(skips[1] <= 3); /* a few at most while the scale finds its level */
}

/* An inf injected into FP16's gradients: the step is skipped and the scale halved;
 * the next, clean step's gradients come back unscaled, FP32's within tolerance. */
static void test_loss_scale_overflow(void)
{
	struct net_input in = { .n = 64, .c = 1, .h = 28, .w = 28, .classes = 10 };
	struct backend *h = cuda_at(BACKEND_FP16), *f = cuda_at(BACKEND_FP32);
	struct side a = { 0 }, b = { 0 };
	struct dd_err err = { 0 };
	const char *text = net_standard_text("lenet");
	CHECK(h && f);
	if (!h || !f || side_make(&a, text, &in, f, 1) || side_make(&b, text, &in, h, 1)) {
		CHECK(0);
		goto done;
	}
	float la, lb, scale = 0;
	int skipped = 0;
	int64_t n = graph_param_count(b.gr);
	feed(&b, 10, 9);
	CHECK(pass(&b, &lb) == 0);
	graph_grads(b.gr)[n / 2] = INFINITY; /* the arena is host-visible after the pass */
	CHECK(backend_unscale(h, graph_grads(b.gr), n, &skipped, &scale, &err) == DD_OK);
	CHECK_EQ_INT(skipped, 1);
	printf("  injected inf: skipped %d, scale now %g\n", skipped, scale);
	CHECK(scale == 32768.0f);
	/* a clean pass: unscaled gradients, FP32's */
	feed(&a, 10, 9);
	feed(&b, 10, 9);
	CHECK(pass(&a, &la) == 0 && pass(&b, &lb) == 0);
	CHECK(backend_unscale(h, graph_grads(b.gr), n, &skipped, &scale, &err) == DD_OK);
	CHECK_EQ_INT(skipped, 0);
	CHECK(scale == 32768.0f);
	double e = nerr(graph_grads(b.gr), graph_grads(a.gr), n);
	printf("  after the skip: loss fp32 %.5f fp16 %.5f, gradients' normalised error %.3g\n", la, lb, e);
	CHECK(e < 2e-2);
	CHECK(fabs(la - lb) <= FP16_LOSS_TOL * fmax(1.0, la));
done:
	side_free(&b);
	side_free(&a);
	backend_free(f);
	backend_free(h);
}

/* On every machine: a half precision needs cuda, said by name. */
static void test_precision_refused(void)
{
	struct dd_err err = { 0 };
	int p = -1;
	CHECK_EQ_INT(backend_precision_parse("fp16", &p, &err), DD_OK);
	CHECK_EQ_INT(p, BACKEND_FP16);
	CHECK_EQ_INT(backend_precision_parse(NULL, &p, &err), DD_OK);
	CHECK_EQ_INT(p, BACKEND_FP32);
	CHECK_EQ_INT(backend_precision_parse("fp8", &p, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "'fp8'");
	CHECK_EQ_INT(backend_set_precision(cpu, BACKEND_FP32, &err), DD_OK);
	CHECK_EQ_INT(backend_set_precision(cpu, BACKEND_BF16, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "bf16 needs the cuda backend");
	CHECK_CONTAINS(err.msg, "cpu");
	/* nothing to unscale on the cpu */
	float g[3] = { 1, INFINITY, 3 }, scale = 0;
	int skipped = 1;
	CHECK_EQ_INT(backend_unscale(cpu, g, 3, &skipped, &scale, &err), DD_OK);
	CHECK(skipped == 0 && scale == 1 && g[0] == 1 && g[2] == 3);
	/* and a training run asking for fp16 on the cpu stops before it starts */
	struct train_opts o;
	train_opts_default(&o);
	o.dataset_dir = "/nonexistent";
	o.network_text = net_standard_text("lenet");
	o.out_dir = "/nonexistent/out";
	o.backend = "cpu";
	o.precision = "fp16";
	int rc = train_run(&o, NULL, &err);
	CHECK_EQ_INT(rc, DD_EINVAL);
	CHECK_CONTAINS(err.msg, "fp16 needs the cuda backend");
	printf("  %s\n", err.msg);
	o.precision = "half";
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "precision 'half'");
}

/* ---- data preparation on the device ---- */

static void test_upload_matches_host(void)
{
	enum { N = 3, C = 3, H = 10, W = 12, OH = 7, OW = 9 };
	static uint8_t px[N * C * H * W];
	static float planes[C * H * W], mean[C * H * W], want[N * C * OH * OW];
	int32_t y0[N] = { 0, 3, 1 }, x0[N] = { 3, 0, 2 };
	uint8_t flip[N] = { 1, 0, 1 };
	uint64_t r = 99;
	for (size_t i = 0; i < sizeof px; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		px[i] = (uint8_t)(r >> 56);
	}
	for (int i = 0; i < C * H * W; i++)
		mean[i] = 100.0f + 0.37f * (float)(i % 97);
	float *out = backend_alloc(cu, sizeof want);
	CHECK(out != NULL);
	if (!out)
		return;
	for (int with_mean = 0; with_mean < 2; with_mean++) {
		const float *m = with_mean ? mean : NULL;
		float scale = with_mean ? 0.0173f : 1.0f / 255;
		for (int s = 0; s < N; s++) {
			for (int i = 0; i < C * H * W; i++)
				planes[i] = px[s * C * H * W + i];
			feed_transform(planes, C, H, W, m, scale, y0[s], x0[s], OH, OW, flip[s], want + s * C * OH * OW);
		}
		struct backend_upload u = { .px = px, .y0 = y0, .x0 = x0, .flip = flip, .n = N, .c = C, .h = H, .w = W,
					    .oh = OH, .ow = OW, .mean = m, .scale = scale, .out = out };
		struct dd_err err = { 0 };
		CHECK_EQ_INT(backend_upload_batch(cu, &u, &err), DD_OK);
		backend_sync(cu);
		int same = memcmp(out, want, sizeof want) == 0;
		CHECK(same);
		printf("  %s mean: %s\n", with_mean ? "with a" : "without a",
		       same ? "the host's floats bit for bit" : "differs from the host");
	}
	/* a window outside the image is refused, by sample */
	y0[1] = H - OH + 1;
	struct backend_upload bad = { .px = px, .y0 = y0, .x0 = x0, .flip = flip, .n = N, .c = C, .h = H, .w = W,
				      .oh = OH, .ow = OW, .scale = 1, .out = out };
	struct dd_err err = { 0 };
	CHECK_EQ_INT(backend_upload_batch(cu, &bad, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "sample 1");
	backend_release(cu, out);
}

/* Three training batches (random crops, mirrors, the image mean) through a feed
 * whose device is dev, against a feed without one. */
static void feed_with_device(struct backend *dev)
{
	char tmp[64], ds[512];
	struct dd_err err = { 0 };
	if (!check_tmpdir(tmp, sizeof tmp) || quadrants_dataset(tmp, 170, 40, ds, sizeof ds)) {
		CHECK(0);
		return;
	}
	enum { B = 8 };
	struct feed_opts o = { .train = 1, .crop = 12, .mirror = 1, .scale = 0.0125f, .mean = FEED_MEAN_IMAGE,
			       .seed = 4, .prefetch = B };
	struct feed *host = NULL, *dv = NULL;
	CHECK_EQ_INT(feed_open(ds, "train", &o, &host, &err), DD_OK);
	o.device = dev;
	CHECK_EQ_INT(feed_open(ds, "train", &o, &dv, &err), DD_OK);
	size_t cnt = (size_t)B * 12 * 12;
	float *a = malloc(cnt * sizeof(float)), *b = backend_alloc(dev, cnt * sizeof(float));
	float la[B], lb[B];
	int same = 1;
	CHECK(a && b);
	for (int k = 0; host && dv && a && b && k < 3; k++) {
		CHECK_EQ_INT(feed_next(host, a, la, B, &err), DD_OK);
		CHECK_EQ_INT(feed_next(dv, b, lb, B, &err), DD_OK);
		backend_sync(dev);
		same = same && memcmp(a, b, cnt * sizeof(float)) == 0 && memcmp(la, lb, sizeof la) == 0;
	}
	CHECK(same);
	printf("  %s as the feed's device: 3 batches %s\n", backend_name(dev),
	       same ? "as the host feeds them" : "DIFFER from the host's");
	free(a);
	if (b)
		backend_release(dev, b);
	feed_close(dv);
	feed_close(host);
	fs_rm_rf(tmp, NULL);
}

static void test_feed_on_device(void) { feed_with_device(cu); }
static void test_feed_device_without_upload(void) { feed_with_device(cpu); }

/* The feed's side of an upload on any machine: the cpu backend's operations plus an
 * upload done on the host with feed_transform. */
static int host_upload(struct backend *be, const struct backend_upload *u, struct dd_err *err)
{
	size_t img = (size_t)u->c * u->h * u->w, out = (size_t)u->c * u->oh * u->ow;
	float *planes = malloc(img * sizeof(float));
	if (!planes)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	for (int s = 0; s < u->n; s++) {
		for (size_t i = 0; i < img; i++)
			planes[i] = u->px[s * img + i];
		feed_transform(planes, u->c, u->h, u->w, u->mean, u->scale, u->y0[s], u->x0[s], u->oh, u->ow, u->flip[s],
			       u->out + s * out);
	}
	free(planes);
	return DD_OK;
}

static void test_feed_raw_path(void)
{
	struct backend_ops ops = *cpu->ops;
	ops.upload = host_upload;
	struct backend up = { &ops, cpu->ctx };
	CHECK(backend_has_upload(&up));
	feed_with_device(&up);
}

/* ---- two GPUs, NCCL ---- */

struct replica {
	struct backend *be;
	struct side s;
	float loss;
	int rc;
	struct dd_err err;
};

static void *replica_step(void *arg)
{
	struct replica *r = arg;
	backend_bind(r->be);
	r->rc = pass(&r->s, &r->loss);
	if (!r->rc)
		r->rc = backend_allreduce(r->be, graph_grads(r->s.gr), graph_param_count(r->s.gr), &r->err);
	backend_sync(r->be);
	return NULL;
}

static void test_two_gpus(void)
{
	struct backend_gpu g[8];
	if (backend_gpus(g, 8) < 2) {
		check_skip("fewer than two GPUs: data parallelism is not tested");
		return;
	}
	const char *text = net_standard_text("lenet");
	struct net_input one = { .n = 64, .c = 1, .h = 28, .w = 28, .classes = 10 };
	struct net_input half = one;
	half.n = 32;
	struct backend *grp[2] = { NULL, NULL };
	struct replica rp[2];
	struct side big = { 0 };
	struct solver *sv[3] = { NULL, NULL, NULL };
	struct dd_err err = { 0 };
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4 };
	int devices[2] = { 0, 1 };
	memset(rp, 0, sizeof rp);
	if (backend_create_cuda_group(2, devices, 0, grp, &err)) {
		fprintf(stderr, "  group: %s\n", err.msg);
		CHECK(0);
		return;
	}
	backend_bind(cu); /* making the group left this thread on GPU 1 */
	int ok = side_make(&big, text, &one, cu, 1) == 0;
	for (int i = 0; i < 2 && ok; i++) {
		rp[i].be = grp[i];
		backend_bind(grp[i]);
		ok = side_make(&rp[i].s, text, &half, grp[i], 1) == 0 && !solver_create(&c, rp[i].s.gr, &sv[i], &err);
	}
	backend_bind(cu);
	ok = ok && !solver_create(&c, big.gr, &sv[2], &err);
	CHECK(ok);
	if (!ok)
		goto done;
	/* the 64 images of one batch, halved between the two */
	feed(&big, 10, 21);
	struct net_shape ds;
	float *bd = graph_blob(big.gr, "data", &ds), *bl = graph_blob(big.gr, "label", NULL);
	size_t img = (size_t)28 * 28;
	for (int i = 0; i < 2; i++) {
		memcpy(graph_blob(rp[i].s.gr, "data", NULL), bd + i * 32 * img, 32 * img * sizeof(float));
		memcpy(graph_blob(rp[i].s.gr, "label", NULL), bl + i * 32, 32 * sizeof(float));
	}
	float lbig = NAN;
	CHECK(pass(&big, &lbig) == 0);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, replica_step, &rp[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		if (rp[i].rc)
			fprintf(stderr, "  GPU %d: %s\n", i, rp[i].err.msg);
	CHECK(rp[0].rc == 0 && rp[1].rc == 0);
	int64_t n = graph_param_count(big.gr);
	double e = nerr(graph_grads(rp[0].s.gr), graph_grads(big.gr), n);
	printf("  loss: one GPU %.5f, two %.5f + %.5f (mean %.5f); averaged gradients' error %.3g\n", lbig, rp[0].loss,
	       rp[1].loss, (rp[0].loss + rp[1].loss) / 2, e);
	CHECK(e < TOL);
	CHECK(fabs((rp[0].loss + rp[1].loss) / 2 - lbig) <= TOL * fmax(1.0, lbig));
	CHECK(memcmp(graph_grads(rp[0].s.gr), graph_grads(rp[1].s.gr), (size_t)n * sizeof(float)) == 0);
	for (int i = 0; i < 2; i++) {
		backend_bind(grp[i]);
		solver_step(sv[i], 0);
		backend_sync(grp[i]);
	}
	backend_bind(cu);
	solver_step(sv[2], 0);
	backend_sync(cu);
	CHECK(memcmp(graph_params(rp[0].s.gr), graph_params(rp[1].s.gr), (size_t)n * sizeof(float)) == 0);
	CHECK(nerr(graph_params(rp[0].s.gr), graph_params(big.gr), n) < TOL);
done:
	for (int i = 0; i < 2; i++) {
		backend_bind(grp[i]);
		solver_free(sv[i]);
		side_free(&rp[i].s);
		backend_free(grp[i]);
	}
	backend_bind(cu);
	solver_free(sv[2]);
	side_free(&big);
}

/* NCCL on the one GPU every GPU machine has: a group of one loads NCCL, makes its
 * communicator, makes room (a NULL buffer: no collective) and all-reduces a
 * gradient arena, which the mean over one leaves as it was, bit for bit. */
static void test_group_of_one(void)
{
	struct backend *grp[1] = { NULL };
	struct dd_err err = { 0 };
	int dev[1] = { 0 };
	if (backend_create_cuda_group(1, dev, 0, grp, &err)) {
		if (strstr(err.msg, "NCCL")) {
			char why[600];
			snprintf(why, sizeof why, "NCCL is not usable here, several GPUs could not train: %s", err.msg);
			check_skip(why);
			return;
		}
		fprintf(stderr, "  group of one: %s\n", err.msg);
		CHECK(0);
		return;
	}
	struct net_input in = { .n = 8, .c = 1, .h = 28, .w = 28, .classes = 10 };
	struct side s = { 0 };
	backend_bind(grp[0]);
	int ok = side_make(&s, net_standard_text("lenet"), &in, grp[0], 5) == 0;
	CHECK(ok);
	if (ok) {
		feed(&s, 10, 9);
		float loss;
		CHECK(pass(&s, &loss) == 0);
		int64_t n = graph_param_count(s.gr);
		float *before = malloc((size_t)n * sizeof(float));
		CHECK(before != NULL);
		if (before) {
			memcpy(before, graph_grads(s.gr), (size_t)n * sizeof(float));
			CHECK_EQ_INT(backend_allreduce(grp[0], NULL, n, &err), DD_OK);
			int rc = backend_allreduce(grp[0], graph_grads(s.gr), n, &err);
			if (rc)
				fprintf(stderr, "  all-reduce: %s\n", err.msg);
			CHECK_EQ_INT(rc, DD_OK);
			backend_sync(grp[0]);
			CHECK(memcmp(before, graph_grads(s.gr), (size_t)n * sizeof(float)) == 0);
			printf("  NCCL group of one: %lld gradients all-reduced, unchanged\n", (long long)n);
			free(before);
		}
	}
	side_free(&s);
	backend_free(grp[0]);
	backend_bind(cu);
}

/* ---- LeNet and AlexNet: two training steps ---- */

static void train_steps(const char *net, const struct net_input *in, int steps, double tol)
{
	const char *text = net_standard_text(net);
	CHECK(text != NULL);
	if (!text)
		return;
	struct side a, b;
	struct solver *sa = NULL, *sb = NULL;
	struct dd_err err = { 0 };
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4 };
	if (side_make(&a, text, in, cpu, 1) || side_make(&b, text, in, cu, 1) || solver_create(&c, a.gr, &sa, &err) ||
	    solver_create(&c, b.gr, &sb, &err)) {
		fprintf(stderr, "  %s: %s\n", net, err.msg);
		CHECK(0);
		goto done;
	}
	for (int it = 0; it < steps; it++) {
		feed(&a, in->classes, 7 + it);
		feed(&b, in->classes, 7 + it);
		float la = NAN, lb = NAN;
		CHECK(pass(&a, &la) == 0 && pass(&b, &lb) == 0);
		printf("  %s step %d: loss cpu %.6f cuda %.6f\n", net, it, la, lb);
		CHECK(isfinite(lb) && fabs(la - lb) <= tol * fmax(1.0, fabs(la)));
		solver_step(sa, it);
		solver_step(sb, it);
	}
	{
		double e = nerr(graph_params(b.gr), graph_params(a.gr), graph_param_count(a.gr));
		printf("  %s: weights after %d steps, normalised error %.3g\n", net, steps, e);
		CHECK(e < tol);
	}
done:
	solver_free(sb);
	solver_free(sa);
	side_free(&b);
	side_free(&a);
}

static void test_lenet(void)
{
	struct net_input in = { .n = 64, .c = 1, .h = 28, .w = 28, .classes = 10 };
	train_steps("lenet", &in, 2, TOL);
}

static void test_alexnet(void)
{
	struct net_input in = { .n = 16, .c = 3, .h = 227, .w = 227, .classes = 10 };
	train_steps("alexnet", &in, 2, 2 * TOL);
}

/* ---- deterministic mode: the same steps twice, bit for bit ---- */

static void test_deterministic(void)
{
	struct dd_err err = { 0 };
	const char *text = net_standard_text("alexnet");
	struct net_input in = { .n = 8, .c = 3, .h = 227, .w = 227, .classes = 10 };
	float *first = NULL;
	int64_t n = 0;
	for (int run = 0; run < 2; run++) {
		struct backend *det = NULL;
		struct side s = { 0 };
		struct solver *sv = NULL;
		struct solver_config c = { .type = SOLVER_ADAM, .base_lr = 0.001, .momentum = 0.9, .momentum2 = 0.999 };
		if (backend_create_cuda(0, 1, &det, &err) || side_make(&s, text, &in, det, 5) ||
		    solver_create(&c, s.gr, &sv, &err)) {
			fprintf(stderr, "  deterministic: %s\n", err.msg);
			CHECK(0);
		} else {
			float loss;
			for (int it = 0; it < 2; it++) {
				feed(&s, 10, 70 + it);
				CHECK(pass(&s, &loss) == 0);
				solver_step(sv, it);
			}
			n = graph_param_count(s.gr);
			if (run == 0) {
				first = malloc((size_t)n * sizeof(float));
				CHECK(first != NULL);
				if (first)
					memcpy(first, graph_params(s.gr), (size_t)n * sizeof(float));
			} else if (first) {
				CHECK(memcmp(first, graph_params(s.gr), (size_t)n * sizeof(float)) == 0);
			}
		}
		solver_free(sv);
		side_free(&s);
		backend_free(det);
	}
	free(first);
}

/* ---- a batch too large for the GPU: a clear error naming it ----
 * The backend holds its arenas to the GPU's free memory; DEEPDESK_CUDA_MEMORY_MB
 * lowers that budget, so a batch of 20000 LeNet images (about 3 GB of activations
 * and their gradients) meets a 1 GiB budget on any GPU, quickly. */

static void test_out_of_memory(void)
{
	struct backend *small = NULL;
	struct net *def = NULL;
	struct net_graph *ng = NULL;
	struct graph *gr = NULL;
	struct dd_err err = { 0 };
	setenv("DEEPDESK_CUDA_MEMORY_MB", "1024", 1);
	int rc = backend_create_cuda(0, 0, &small, &err);
	unsetenv("DEEPDESK_CUDA_MEMORY_MB");
	CHECK_EQ_INT(rc, DD_OK);
	if (rc)
		return;
	struct net_input in = { .n = 20000, .c = 1, .h = 28, .w = 28, .classes = 10 };
	const char *text = net_standard_text("lenet");
	CHECK(net_parse(text, strlen(text), &def, &err) == DD_OK);
	CHECK(def && net_instantiate(def, NET_STAGE_TRAIN, &in, &ng, &err) == DD_OK);
	if (ng) {
		rc = graph_create(ng, small, 1, &gr, &err);
		CHECK_EQ_INT(rc, DD_ENOMEM);
		CHECK(gr == NULL);
		CHECK_CONTAINS(err.msg, "batch size 20000");
		CHECK_CONTAINS(err.msg, "smaller batch");
		printf("  %s\n", err.msg);
	}
	graph_free(gr);
	net_graph_free(ng);
	net_free(def);
	/* the same backend then runs a batch that fits */
	struct net_input fits = { .n = 64, .c = 1, .h = 28, .w = 28, .classes = 10 };
	struct side s;
	float loss = NAN;
	CHECK(side_make(&s, text, &fits, small, 1) == 0);
	if (s.gr) {
		feed(&s, 10, 3);
		CHECK(pass(&s, &loss) == 0 && isfinite(loss));
	}
	side_free(&s);
	backend_free(small);
}

/* ---- a whole training run, as a job's worker makes it ---- */

static const char quad_net[] =
	"name: \"quad\"\n"
	"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\"\n"
	"  include { stage: \"train\" } data_param { batch_size: 12 } transform_param { scale: 0.01 } }\n"
	"layer { name: \"v\" type: \"Data\" top: \"data\" top: \"label\"\n"
	"  include { stage: \"val\" } data_param { batch_size: 12 } transform_param { scale: 0.01 } }\n"
	CONV("c1", "data", "c1", "num_output: 6 kernel_size: 3 pad: 1")
	"layer { name: \"r1\" type: \"ReLU\" bottom: \"c1\" top: \"c1\" }\n"
	"layer { name: \"p1\" type: \"Pooling\" bottom: \"c1\" top: \"p1\" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n"
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"p1\" top: \"fc\"\n"
	"  inner_product_param { weight_filler { type: \"xavier\" } } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\"\n"
	"  exclude { stage: \"deploy\" } }\n"
	"layer { name: \"acc\" type: \"Accuracy\" bottom: \"fc\" bottom: \"label\" top: \"acc\" include { stage: \"val\" } }\n";

static const char *train_other = "cuda";

static void test_train_run(void)
{
	char tmp[64], ds[512], out[600];
	struct dd_err err = { 0 };
	if (!check_tmpdir(tmp, sizeof tmp) || quadrants_dataset(tmp, 170, 40, ds, sizeof ds)) {
		CHECK(0);
		return;
	}
	struct train_result r[2];
	const char *names[2] = { "cpu", train_other };
	for (int b = 0; b < 2; b++) {
		struct train_opts o;
		train_opts_default(&o);
		snprintf(out, sizeof out, "%s/%s", tmp, names[b]);
		o.dataset_dir = ds;
		o.network_text = quad_net;
		o.network_name = "quad";
		o.out_dir = out;
		o.backend = names[b];
		o.epochs = 3;
		o.seed = 1;
		o.result = &r[b];
		int rc = train_run(&o, NULL, &err);
		if (rc)
			fprintf(stderr, "  train_run on %s: %s\n", names[b], err.msg);
		CHECK_EQ_INT(rc, DD_OK);
		printf("  %s: loss %.4f -> %.4f, val accuracy %.3f, %s\n", names[b], r[b].first_train_loss,
		       r[b].train_loss, r[b].val_accuracy, r[b].snapshot);
	}
	CHECK(r[1].val_accuracy > 0.9);
	CHECK(r[1].snapshot[0] != 0);
	CHECK(fabs(r[0].first_train_loss - r[1].first_train_loss) <= TOL * fmax(1.0, r[0].first_train_loss));
	CHECK(fabs(r[0].train_loss - r[1].train_loss) <= 0.05 * fmax(0.1, r[0].train_loss));
	fs_rm_rf(tmp, NULL);
}

/* Data parallelism through train_run, as a job's worker asks for it: two copies of
 * batch 6 (on GPUs 0 and 1, joined by NCCL) train as one of batch 12 — the same
 * iterations, weights and validation within the parity tolerance.  With
 * --against, train_other's copies average on the host. */
static void test_train_replicas(void)
{
	int cuda = !strcmp(train_other, "cuda");
	struct backend_gpu g[8];
	if (cuda && backend_gpus(g, 8) < 2) {
		check_skip("fewer than two GPUs: training on several is not tested");
		return;
	}
	char tmp[64], ds[512], out[2][600], snap[2][4096];
	struct dd_err err = { 0 };
	if (!check_tmpdir(tmp, sizeof tmp) || quadrants_dataset(tmp, 170, 40, ds, sizeof ds)) {
		CHECK(0);
		return;
	}
	struct train_result r[2];
	for (int k = 0; k < 2; k++) {
		struct train_opts o;
		train_opts_default(&o);
		snprintf(out[k], sizeof out[k], "%s/copies-%d", tmp, k + 1);
		o.dataset_dir = ds;
		o.network_text = quad_net;
		o.network_name = "quad";
		o.out_dir = out[k];
		o.backend = train_other;
		o.epochs = 2;
		o.seed = 1;
		o.batch = k ? 6 : 12;
		o.replicas = k ? 2 : 1;
		o.gpus[0] = 0;
		o.gpus[1] = 1;
		o.result = &r[k];
		int rc = train_run(&o, NULL, &err);
		if (rc)
			fprintf(stderr, "  train_run, %d copies: %s\n", k + 1, err.msg);
		CHECK_EQ_INT(rc, DD_OK);
		snprintf(snap[k], sizeof snap[k], "%s", r[k].snapshot);
	}
	double rel = weights_diff(snap[0], snap[1]);
	printf("  %s: 2 copies of batch 6 against 1 of 12, %lld and %lld iterations: weights differ by %.3g "
	       "(relative), val accuracy %.3f and %.3f\n",
	       train_other, (long long)r[0].iterations, (long long)r[1].iterations, rel,
	       r[0].val_accuracy, r[1].val_accuracy);
	CHECK_EQ_INT(r[0].iterations, r[1].iterations);
	CHECK(rel < 10 * TOL);
	CHECK(fabs(r[0].val_loss - r[1].val_loss) <= 10 * TOL * fmax(1.0, r[0].val_loss));
	fs_rm_rf(tmp, NULL);
}

/* ---- without a GPU: the refusal says why ---- */

static struct dd_err refusal;

static void test_refusal_names_the_reason(void)
{
	CHECK_CONTAINS(refusal.msg, "cuda: ");
	CHECK(strstr(refusal.msg, "no GPU") || strstr(refusal.msg, "no CUDA backend") ||
	      strstr(refusal.msg, "does not load") || strstr(refusal.msg, "API version"));
	CHECK(refusal.code == DD_EINVAL);
	/* a device number is checked before anything loads */
	struct backend *b = NULL;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(backend_create("cuda:x", &b, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "cuda:N");
	CHECK(b == NULL);
	/* the GPU list is empty rather than an error */
	struct backend_gpu g[4];
	CHECK_EQ_INT(backend_gpus(g, 4), 0);
}

/* ---- a plugin of another API version is refused, by name ----
 * A stand-in plugin built here with cc (exporting version 999) is offered to the
 * program through DEEPDESK_CUDA_PLUGIN, in a process of its own (a process loads
 * its plugin once). */

static void test_version_mismatch(void)
{
	char dir[64], cmd[1024], out[2048] = "";
	if (!check_tmpdir(dir, sizeof dir)) {
		CHECK(0);
		return;
	}
	snprintf(cmd, sizeof cmd,
		 "printf 'const int deepdesk_backend_api_version = 999;\\n"
		 "int deepdesk_cuda_create(void) { return -1; }\\nint deepdesk_cuda_devices(void) { return 0; }\\n' "
		 "> %s/fake.c && cc -shared -fPIC -o %s/fake.so %s/fake.c 2>&1",
		 dir, dir, dir);
	if (system(cmd) != 0) {
		check_need("the plugin's version check", "no C compiler (cc, Debian's gcc) to build a stand-in plugin");
		goto done;
	}
	char exe[1024];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
	CHECK(n > 0);
	if (n <= 0)
		goto done;
	exe[n] = 0;
	*strrchr(exe, '/') = 0; /* build/tests */
	snprintf(cmd, sizeof cmd,
		 "DEEPDESK_CUDA_PLUGIN=%s/fake.so %s/../deepdesk net time lenet --backend cuda --iters 1 2>&1", dir, exe);
	FILE *f = popen(cmd, "r");
	CHECK(f != NULL);
	if (f) {
		size_t got = fread(out, 1, sizeof out - 1, f);
		out[got] = 0;
		CHECK(pclose(f) != 0);
	}
	CHECK_CONTAINS(out, "fake.so has backend API version 999, this program 3");
	printf("  %s", out);
	/* and a plugin that is not there is named too */
	snprintf(cmd, sizeof cmd,
		 "DEEPDESK_CUDA_PLUGIN=%s/none.so %s/../deepdesk net time lenet --backend cuda --iters 1 2>&1", dir, exe);
	out[0] = 0;
	if ((f = popen(cmd, "r"))) {
		size_t got = fread(out, 1, sizeof out - 1, f);
		out[got] = 0;
		CHECK(pclose(f) != 0);
	}
	CHECK_CONTAINS(out, "none.so does not load");
	printf("  %s", out);
done:
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
	struct dd_err err = { 0 };
	if (backend_create("cpu", &cpu, &err)) {
		printf("FAIL cpu backend: %s\n", err.msg);
		return 1;
	}
	const char *against = argc > 2 && !strcmp(argv[1], "--against") ? argv[2] : NULL;
	if (!against && backend_create("cuda", &cu, &refusal)) {
		char why[600];
		snprintf(why, sizeof why, "no CUDA backend here, the GPU tests do not run: %s", refusal.msg);
		check_skip(why);
		RUN(test_refusal_names_the_reason);
		RUN(test_version_mismatch);
		against = "ref"; /* and the harness's dry run, below */
	}
	if (against) {
		/* a dry run of the comparisons with another backend in cuda's place (ref
		 * where there is no GPU): checks this file's networks and harness, and
		 * data-parallel training on host copies */
		printf("  the comparisons with %s in cuda's place (a dry run of the harness)\n", against);
		train_other = against;
		if (backend_create(against, &cu, &err)) {
			printf("FAIL %s: %s\n", against, err.msg);
			return 1;
		}
		RUN(test_layers);
		RUN(test_spatial_losses);
		RUN(test_solvers);
		RUN(test_lenet);
		RUN(test_train_run);
		RUN(test_train_replicas);
		RUN(test_precision_refused);
		RUN(test_feed_device_without_upload);
		RUN(test_feed_raw_path);
	} else {
		RUN(test_version_mismatch);
		struct backend_gpu g[8];
		int n = backend_gpus(g, 8);
		for (int i = 0; i < n; i++)
			printf("  GPU %d: %s, %.1f GiB\n", g[i].id, g[i].name, g[i].memory_total / 1073741824.0);
		RUN(test_layers);
		RUN(test_spatial_losses);
		RUN(test_solvers);
		RUN(test_lenet);
		RUN(test_alexnet);
		RUN(test_deterministic);
		RUN(test_out_of_memory);
		RUN(test_train_run);
		RUN(test_precision_refused);
		RUN(test_layers_bf16);
		RUN(test_lenet_mixed);
		RUN(test_loss_scale_overflow);
		RUN(test_upload_matches_host);
		RUN(test_feed_on_device);
		RUN(test_feed_device_without_upload);
		RUN(test_feed_raw_path);
		RUN(test_group_of_one);
		RUN(test_two_gpus);
		RUN(test_train_replicas);
	}
	backend_free(cu);
	backend_free(cpu);
	return check_summary();
}
