/* test_graph.c — the runnable graph and the solver: whole-network gradient checks
 * by finite differences (segmentation's Crop, per-pixel losses and EuclideanLoss
 * among them), a small training run that must learn, LeNet's size and one pass, and
 * Caffe's learning-rate formulas. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../networks/backend.h"
#include "../../networks/graph.h"
#include "../../networks/net.h"
#include "../../networks/solver.h"
#include "check.h"
#include "netfix.h"

/* The backend under test: DD_BACKEND (ref, cpu), or the reference. */
static struct backend *test_be;

/* A forward that must succeed; its loss. */
static float fwd(struct graph *gr, int training)
{
	struct dd_err err = { 0 };
	float loss = NAN;
	if (graph_forward(gr, training, &loss, &err) != DD_OK) {
		fprintf(stderr, "  forward: %s\n", err.msg);
		CHECK(0);
	}
	return loss;
}

static void bwd(struct graph *gr)
{
	struct dd_err err = { 0 };
	if (graph_backward(gr, &err) != DD_OK) {
		fprintf(stderr, "  backward: %s\n", err.msg);
		CHECK(0);
	}
}

static uint64_t rng_state = 42;
static double urand(void) /* [0, 1) */
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static const char tiny_net[] =
	"name: \"tiny\"\n"
	"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } } }\n"
	"layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"conv\"\n"
	"  convolution_param { num_output: 3 kernel_size: 3\n"
	"    weight_filler { type: \"gaussian\" std: 0.5 } bias_filler { type: \"uniform\" min: -0.2 max: 0.2 } } }\n"
	"layer { name: \"relu\" type: \"ReLU\" bottom: \"conv\" top: \"conv\" }\n"
	"layer { name: \"pool\" type: \"Pooling\" bottom: \"conv\" top: \"pool\" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"pool\" top: \"fc\"\n"
	"  inner_product_param { num_output: 4 weight_filler { type: \"xavier\" } bias_filler { type: \"gaussian\" std: 0.1 } } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n";

/* Every learned parameter's analytic gradient against central differences of the
 * loss; returns how many were checked and sets *nbad to those over 1e-2 relative. */
static int grad_check(struct graph *gr, const char *what, float h, int *nbad)
{
	int checked = 0, bad = 0;
	double worst = 0;
	for (int p = 0; p < graph_nparam(gr); p++) {
		const struct graph_param *gp = graph_param(gr, p);
		if (!gp->learned)
			continue;
		for (int64_t j = 0; j < gp->count; j++) {
			float w0 = gp->w[j];
			gp->w[j] = w0 + h;
			double lp = fwd(gr, 1);
			gp->w[j] = w0 - h;
			double lm = fwd(gr, 1);
			gp->w[j] = w0;
			double num = (lp - lm) / (2.0 * h), ana = gp->dw[j];
			double scale = fmax(fmax(fabs(num), fabs(ana)), 1e-2);
			double rel = fabs(num - ana) / scale;
			if (rel > worst)
				worst = rel;
			if (rel >= 1e-2) {
				bad++;
				fprintf(stderr, "  %s %s[%lld]: analytic %g numeric %g\n", gp->layer, gp->role, (long long)j,
					ana, num);
			}
			checked++;
		}
	}
	printf("  gradient check %s: %d parameters, worst relative error %.2e\n", what, checked, worst);
	*nbad = bad;
	return checked;
}

/* (a) d loss / d every parameter, analytic against central differences */
static void test_gradient_check(void)
{
	struct netfix f;
	struct net_input in = { .n = 2, .c = 1, .h = 6, .w = 6, .classes = 4 };
	if (netfix_open(&f, tiny_net, &in, test_be, 7)) {
		CHECK(0);
		return;
	}
	struct net_shape ds, ls;
	float *data = graph_blob(f.gr, "data", &ds), *label = graph_blob(f.gr, "label", &ls);
	CHECK(data && label);
	CHECK_EQ_INT(ds.ndim, 4);
	CHECK_EQ_INT(ds.dim[0], 2);
	CHECK_EQ_INT(ds.dim[2], 6);
	CHECK_EQ_INT(graph_nparam(f.gr), 4);
	CHECK_EQ_INT(graph_param_count(f.gr), 3 * 9 + 3 + 4 * 12 + 4);
	rng_state = 1;
	for (int i = 0; i < 72; i++)
		data[i] = (float)(urand() * 2 - 1);
	label[0] = 1;
	label[1] = 3;

	graph_zero_grads(f.gr);
	float loss = fwd(f.gr, 1);
	CHECK(isfinite(loss) && loss > 0);
	CHECK(fabsf(graph_value(f.gr, "loss") - loss) < 1e-6f);
	bwd(f.gr);

	int bad = 0, checked = grad_check(f.gr, "tiny", 1e-3f, &bad);
	CHECK_EQ_INT(checked, 82);
	CHECK_EQ_INT(bad, 0);
	netfix_close(&f);
}

/* the other layer types, with BatchNorm, Scale and Power in place */
static const char wide_net[] =
	"layer { name: \"c1\" type: \"Convolution\" bottom: \"data\" top: \"c1\"\n"
	"  convolution_param { num_output: 2 kernel_size: 3 pad: 1 weight_filler { type: \"gaussian\" std: 0.5 } } }\n"
	"layer { name: \"c2\" type: \"Convolution\" bottom: \"data\" top: \"c2\"\n"
	"  convolution_param { num_output: 2 kernel_size: 3 pad: 1 weight_filler { type: \"msra\" } bias_filler { type: \"constant\" value: 0.1 } } }\n"
	"layer { name: \"sum\" type: \"Eltwise\" bottom: \"c1\" bottom: \"c2\" top: \"e\" eltwise_param { coeff: 1 coeff: -0.5 } }\n"
	"layer { name: \"prod\" type: \"Eltwise\" bottom: \"c1\" bottom: \"e\" top: \"p\" eltwise_param { operation: PROD } }\n"
	"layer { name: \"cat\" type: \"Concat\" bottom: \"c1\" bottom: \"e\" bottom: \"p\" top: \"cat\" }\n"
	"layer { name: \"bn\" type: \"BatchNorm\" bottom: \"cat\" top: \"cat\" }\n"
	"layer { name: \"sc\" type: \"Scale\" bottom: \"cat\" top: \"cat\"\n"
	"  scale_param { bias_term: true filler { type: \"uniform\" min: 0.5 max: 1.5 } bias_filler { type: \"gaussian\" std: 0.1 } } }\n"
	"layer { name: \"pw\" type: \"Power\" bottom: \"cat\" top: \"cat\" power_param { power: 2 scale: 0.5 shift: 1 } }\n"
	"layer { name: \"lrn\" type: \"LRN\" bottom: \"cat\" top: \"lrn\" lrn_param { local_size: 3 alpha: 0.5 } }\n"
	"layer { name: \"th\" type: \"TanH\" bottom: \"lrn\" top: \"lrn\" }\n"
	"layer { name: \"pool\" type: \"Pooling\" bottom: \"lrn\" top: \"pool\" pooling_param { pool: AVE kernel_size: 3 stride: 2 } }\n"
	"layer { name: \"sg\" type: \"Sigmoid\" bottom: \"pool\" top: \"sg\" }\n"
	"layer { name: \"fl\" type: \"Flatten\" bottom: \"sg\" top: \"fl\" }\n"
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"fl\" top: \"fc\"\n"
	"  param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }\n"
	"  inner_product_param { num_output: 3 weight_filler { type: \"xavier\" variance_norm: AVERAGE } } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" loss_weight: 2 }\n";

static void test_gradient_check_wide(void)
{
	struct netfix f;
	struct net_input in = { .n = 3, .c = 1, .h = 5, .w = 5, .classes = 3 };
	if (netfix_open(&f, wide_net, &in, test_be, 3)) {
		CHECK(0);
		return;
	}
	float *data = graph_blob(f.gr, "data", NULL), *label = graph_blob(f.gr, "label", NULL);
	rng_state = 2;
	for (int i = 0; i < 75; i++)
		data[i] = (float)(urand() * 2 - 1);
	for (int i = 0; i < 3; i++)
		label[i] = (float)i;
	graph_zero_grads(f.gr);
	float loss = fwd(f.gr, 1);
	CHECK(isfinite(loss));
	CHECK(fabsf(loss - 2 * graph_value(f.gr, "loss")) < 1e-5f);
	bwd(f.gr);
	int bad = 0, checked = grad_check(f.gr, "wide", 1e-2f, &bad);
	/* c1 18+2, c2 18+2, sc 6+6, fc 3*6*2*2... all learned; bn's 13 statistics are not */
	CHECK(checked > 0);
	CHECK_EQ_INT(checked, graph_param_count(f.gr) - 6 - 6 - 1);
	CHECK_EQ_INT(bad, 0);
	netfix_close(&f);
}

/* segmentation's layers in one graph: the scores of a padded convolution cropped back
 * to the image (Crop, offset 1), SoftmaxWithLoss per pixel against N x 1 x H x W
 * labels with ignore_label 255 and FULL normalisation, Accuracy per pixel, and an
 * EuclideanLoss between two learned blobs (its gradient goes into both).  The labels
 * are the data itself; the scores see a scaled copy. */
static const char seg_net[] =
	"layer { name: \"s\" type: \"Power\" bottom: \"data\" top: \"s\" power_param { scale: 0.01 } }\n"
	"layer { name: \"c1\" type: \"Convolution\" bottom: \"s\" top: \"c1\"\n"
	"  convolution_param { num_output: 3 kernel_size: 3 pad: 2 weight_filler { type: \"gaussian\" std: 0.5 }\n"
	"    bias_filler { type: \"uniform\" min: -0.3 max: 0.3 } } }\n"
	"layer { name: \"k\" type: \"Crop\" bottom: \"c1\" bottom: \"data\" top: \"k\" crop_param { axis: 2 offset: 1 } }\n"
	"layer { name: \"c2\" type: \"Convolution\" bottom: \"s\" top: \"c2\"\n"
	"  convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: \"gaussian\" std: 0.5 } } }\n"
	"layer { name: \"e\" type: \"EuclideanLoss\" bottom: \"k\" bottom: \"c2\" top: \"e\" loss_weight: 0.3 }\n"
	"layer { name: \"acc\" type: \"Accuracy\" bottom: \"k\" bottom: \"data\" top: \"acc\" accuracy_param { ignore_label: 255 } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"k\" bottom: \"data\" top: \"loss\"\n"
	"  loss_param { ignore_label: 255 normalization: FULL } }\n";

static void test_gradient_check_seg(void)
{
	struct netfix f;
	struct net_input in = { .n = 2, .c = 1, .h = 6, .w = 6, .classes = 3 };
	if (netfix_open(&f, seg_net, &in, test_be, 5)) {
		CHECK(0);
		return;
	}
	struct net_shape ks;
	float *data = graph_blob(f.gr, "data", NULL);
	CHECK(graph_blob(f.gr, "k", &ks) != NULL);
	CHECK(ks.ndim == 4 && ks.dim[1] == 3 && ks.dim[2] == 6 && ks.dim[3] == 6);
	for (int i = 0; i < 72; i++)
		data[i] = i % 9 == 4 ? 255.0f : (float)((i * 7 + i / 6) % 3);
	graph_zero_grads(f.gr);
	float loss = fwd(f.gr, 1);
	CHECK(isfinite(loss));
	CHECK(fabsf(loss - (graph_value(f.gr, "loss") + 0.3f * graph_value(f.gr, "e"))) < 1e-5f);
	CHECK(graph_value(f.gr, "e") > 0);
	bwd(f.gr);
	int bad = 0, checked = grad_check(f.gr, "seg", 1e-2f, &bad);
	CHECK_EQ_INT(checked, graph_param_count(f.gr)); /* c1 27+3, c2 27+3 */
	CHECK_EQ_INT(checked, 60);
	CHECK_EQ_INT(bad, 0);
	netfix_close(&f);
}

/* Deconvolution in a network: its weights' and bias's gradients, and its input's
 * (which the convolution below it learns from), against central differences. */
static const char deconv_net[] =
	"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" }\n"
	"layer { name: \"c\" type: \"Convolution\" bottom: \"data\" top: \"c\"\n"
	"  convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: \"gaussian\" std: 0.5 } } }\n"
	"layer { name: \"up\" type: \"Deconvolution\" bottom: \"c\" top: \"up\" convolution_param { num_output: 4\n"
	"  group: 2 kernel_size: 4 stride: 2 pad: 1 weight_filler { type: \"gaussian\" std: 0.5 }\n"
	"  bias_filler { type: \"uniform\" min: -0.2 max: 0.2 } } }\n"
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"up\" top: \"fc\"\n"
	"  inner_product_param { num_output: 3 weight_filler { type: \"gaussian\" std: 0.1 } } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n";

static void test_gradient_check_deconv(void)
{
	struct netfix f;
	struct net_input in = { .n = 2, .c = 1, .h = 3, .w = 3, .classes = 3 };
	if (netfix_open(&f, deconv_net, &in, test_be, 5)) {
		CHECK(0);
		return;
	}
	float *data = graph_blob(f.gr, "data", NULL), *label = graph_blob(f.gr, "label", NULL);
	rng_state = 4;
	for (int i = 0; i < 18; i++)
		data[i] = (float)(urand() * 2 - 1);
	label[0] = 2;
	label[1] = 0;
	graph_zero_grads(f.gr);
	CHECK(isfinite(fwd(f.gr, 1)));
	bwd(f.gr);
	int bad = 0, checked = grad_check(f.gr, "deconv", 1e-3f, &bad);
	/* c 4*9+4, up 4*2*16+4, fc 3*4*6*6+3 */
	CHECK_EQ_INT(checked, 40 + 132 + 435);
	CHECK_EQ_INT(bad, 0);
	netfix_close(&f);
}

/* (d) Caffe's learning-rate formulas */
/* Caffe's bilinear filler, against values worked out by hand:
 *   k = 4: f = 2, c = (4 - 1 - 0) / 4 = 0.75, 1 - |x/2 - 0.75| = 0.25 0.75 0.75 0.25;
 *   k = 3: f = 2, c = 0.75 again, so 0.25 0.75 0.75 (Caffe's formula, not symmetric);
 * every kernel of the blob the same; and with one group per channel, k 4, stride 2,
 * pad 1 it upsamples by 2: a constant image stays constant away from the border. */
static void test_bilinear_filler(void)
{
	static const char text[] =
		"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" }\n"
		"layer { name: \"up4\" type: \"Deconvolution\" bottom: \"data\" top: \"up4\" convolution_param {\n"
		"  num_output: 2 group: 2 kernel_size: 4 stride: 2 pad: 1 bias_term: false weight_filler { type: \"bilinear\" } } }\n"
		"layer { name: \"up3\" type: \"Deconvolution\" bottom: \"data\" top: \"up3\" convolution_param {\n"
		"  num_output: 2 kernel_size: 3 weight_filler { type: \"bilinear\" } bias_filler { type: \"constant\" value: 0.5 } } }\n"
		"layer { name: \"ip\" type: \"InnerProduct\" bottom: \"up4\" top: \"ip\" inner_product_param { num_output: 2 } }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n";
	static const double k4[4] = { 0.25, 0.75, 0.75, 0.25 }, k3[3] = { 0.25, 0.75, 0.75 };
	struct netfix f;
	struct net_input in = { .n = 1, .c = 2, .h = 3, .w = 3, .classes = 2 };
	if (netfix_open(&f, text, &in, test_be, 7)) {
		CHECK(0);
		return;
	}
	int seen = 0;
	for (int p = 0; p < graph_nparam(f.gr); p++) {
		const struct graph_param *gp = graph_param(f.gr, p);
		int k = !strcmp(gp->layer, "up4") ? 4 : !strcmp(gp->layer, "up3") ? 3 : 0;
		if (!k)
			continue;
		if (!strcmp(gp->role, "bias")) {
			CHECK(gp->w[0] == 0.5f && gp->w[1] == 0.5f);
			continue;
		}
		const double *v = k == 4 ? k4 : k3;
		CHECK_EQ_INT(gp->count, (k == 4 ? 2 * 1 : 2 * 2) * k * k); /* (C_in, C_out/group, k, k) */
		int bad = 0;
		for (int64_t i = 0; i < gp->count; i++)
			if (fabs(gp->w[i] - v[i / k % k] * v[i % k]) > 1e-7)
				bad++;
		CHECK_EQ_INT(bad, 0);
		seen++;
	}
	CHECK_EQ_INT(seen, 2);
	struct net_shape ds, us;
	float *data = graph_blob(f.gr, "data", &ds);
	for (int i = 0; i < 2 * 3 * 3; i++)
		data[i] = i < 9 ? 1.0f : 3.0f;
	graph_blob(f.gr, "label", NULL)[0] = 1;
	fwd(f.gr, 0);
	const float *up = graph_blob(f.gr, "up4", &us);
	CHECK_EQ_INT(us.dim[2], 6);
	CHECK_EQ_INT(us.dim[3], 6);
	int off = 0;
	for (int c = 0; c < 2; c++)
		for (int y = 1; y < 5; y++)
			for (int x = 1; x < 5; x++)
				off += fabsf(up[(c * 6 + y) * 6 + x] - (c ? 3.0f : 1.0f)) > 1e-6f;
	CHECK_EQ_INT(off, 0);
	CHECK(fabsf(up[0] - 0.75f * 0.75f) < 1e-6f); /* a corner: one tap each way */
	netfix_close(&f);
}

/* (b) four classes: which quadrant of a 6x6 image is bright */
static void make_quadrants(float *x, float *y, int n)
{
	for (int i = 0; i < n; i++) {
		int q = i % 4;
		y[i] = (float)q;
		for (int r = 0; r < 6; r++)
			for (int c = 0; c < 6; c++) {
				int in_q = (r / 3) * 2 + (c / 3) == q;
				x[i * 36 + r * 6 + c] = (float)((in_q ? 1.0 : 0.0) + 0.3 * (urand() - 0.5));
			}
	}
}

static const char train_net[] =
	"layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"conv\"\n"
	"  convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: \"xavier\" } } }\n"
	"layer { name: \"relu\" type: \"ReLU\" bottom: \"conv\" top: \"conv\" }\n"
	"layer { name: \"pool\" type: \"Pooling\" bottom: \"conv\" top: \"pool\" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"pool\" top: \"fc\" inner_product_param { weight_filler { type: \"xavier\" } } }\n"
	"layer { name: \"acc\" type: \"Accuracy\" bottom: \"fc\" bottom: \"label\" top: \"accuracy\" }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n";

/* mean loss and accuracy over the whole set, batch by batch */
static void evaluate(struct graph *gr, const float *x, const float *y, int n, int batch, double *loss, double *acc)
{
	float *data = graph_blob(gr, "data", NULL), *label = graph_blob(gr, "label", NULL);
	*loss = *acc = 0;
	for (int b = 0; b < n / batch; b++) {
		memcpy(data, x + (size_t)b * batch * 36, (size_t)batch * 36 * sizeof(float));
		memcpy(label, y + (size_t)b * batch, (size_t)batch * sizeof(float));
		*loss += fwd(gr, 0);
		*acc += graph_value(gr, "accuracy");
	}
	*loss /= n / batch;
	*acc /= n / batch;
}

/* train_net learns the quadrants with sc: 200 steps of batch 16 over 256 images made
 * from rng, its parameters filled from seed; the loss falls below a fifth of where it
 * started and the accuracy passes 0.9.  what names the run on stdout. */
static void train_quadrants(const char *what, const struct solver_config *sc, uint64_t rng, uint64_t seed)
{
	enum { N = 256, B = 16 };
	static float x[N * 36], y[N];
	rng_state = rng;
	make_quadrants(x, y, N);
	struct netfix f;
	struct net_input in = { .n = B, .c = 1, .h = 6, .w = 6, .classes = 4 };
	if (netfix_open(&f, train_net, &in, test_be, seed)) {
		CHECK(0);
		return;
	}
	struct solver *s = NULL;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(solver_create(sc, f.gr, &s, &err), DD_OK);
	if (!s) {
		netfix_close(&f);
		return;
	}
	double loss0, acc0, loss1, acc1;
	evaluate(f.gr, x, y, N, B, &loss0, &acc0);
	float *data = graph_blob(f.gr, "data", NULL), *label = graph_blob(f.gr, "label", NULL);
	for (int it = 0; it < 200; it++) {
		int b = it % (N / B);
		memcpy(data, x + (size_t)b * B * 36, sizeof(float) * B * 36);
		memcpy(label, y + (size_t)b * B, sizeof(float) * B);
		graph_zero_grads(f.gr);
		float l = fwd(f.gr, 1);
		CHECK(isfinite(l));
		bwd(f.gr);
		solver_step(s, it);
	}
	evaluate(f.gr, x, y, N, B, &loss1, &acc1);
	printf("  %s: loss %.4f -> %.4f, accuracy %.3f -> %.3f\n", what, loss0, loss1, acc0, acc1);
	CHECK(loss1 < 0.2 * loss0);
	CHECK(acc1 > 0.9);
	solver_free(s);
	netfix_close(&f);
}

static void test_training(void)
{
	struct solver_config sc = { .type = SOLVER_SGD, .base_lr = 0.05, .policy = LR_FIXED, .momentum = 0.9,
				    .weight_decay = 1e-4 };
	train_quadrants("training", &sc, 3, 11);
}

/* Adam learns the same problem too */
static void test_training_adam(void)
{
	struct solver_config sc = { .type = SOLVER_ADAM, .base_lr = 0.01, .policy = LR_FIXED, .momentum = 0.9,
				    .momentum2 = 0.999, .delta = 1e-8 };
	train_quadrants("adam", &sc, 5, 13);
}

/* one SGD step by hand: v = m*v + lr*lr_mult*(g + wd*decay_mult*w); w -= v */
static void test_sgd_update(void)
{
	struct netfix f;
	struct net_input in = { .n = 2, .c = 1, .h = 6, .w = 6, .classes = 4 };
	if (netfix_open(&f, tiny_net, &in, test_be, 7)) {
		CHECK(0);
		return;
	}
	struct solver_config sc = { .type = SOLVER_SGD, .base_lr = 0.1, .policy = LR_FIXED, .momentum = 0.5,
				    .weight_decay = 0.01 };
	struct solver *s = NULL;
	CHECK_EQ_INT(solver_create(&sc, f.gr, &s, NULL), DD_OK);
	const struct graph_param *p = graph_param(f.gr, 0);
	float w0 = p->w[0];
	p->dw[0] = 2.0f;
	solver_step(s, 0);
	float v1 = 0.1f * (2.0f + 0.01f * w0), w1 = w0 - v1;
	CHECK(fabsf(p->w[0] - w1) < 1e-6f);
	p->dw[0] = 1.0f;
	solver_step(s, 1);
	float v2 = 0.5f * v1 + 0.1f * (1.0f + 0.01f * w1);
	CHECK(fabsf(p->w[0] - (w1 - v2)) < 1e-6f);
	solver_free(s);
	netfix_close(&f);
}

/* (c) LeNet: its size, and one pass */
static void test_lenet(void)
{
	const char *text = net_standard_text("lenet");
	CHECK(text != NULL);
	if (!text)
		return;
	struct netfix f;
	struct net_input in = { .n = 4, .c = 1, .h = 28, .w = 28, .classes = 10 };
	if (netfix_open(&f, text, &in, test_be, 1)) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(graph_param_count(f.gr), 431080);
	struct net_shape ds;
	float *data = graph_blob(f.gr, "data", &ds), *label = graph_blob(f.gr, "label", NULL);
	CHECK(data && label);
	CHECK_EQ_INT(ds.dim[0], 4);
	CHECK_EQ_INT(ds.dim[1] * ds.dim[2] * ds.dim[3], 784);
	rng_state = 9;
	for (int i = 0; i < 4 * 784; i++)
		data[i] = (float)(urand() * 255);
	for (int i = 0; i < 4; i++)
		label[i] = (float)i;
	graph_zero_grads(f.gr);
	float loss = fwd(f.gr, 1);
	bwd(f.gr);
	printf("  lenet: loss %.4f\n", loss);
	CHECK(isfinite(loss) && loss > 0);
	double sq = 0;
	const float *g = graph_grads(f.gr);
	int finite = 1;
	for (int64_t i = 0; i < graph_param_count(f.gr); i++) {
		finite &= isfinite(g[i]) != 0;
		sq += (double)g[i] * g[i];
	}
	CHECK(finite);
	CHECK(sq > 0);
	netfix_close(&f);
}

/* (d) Caffe's learning-rate formulas */
static void test_lr_policies(void)
{
	struct solver_config c = { .base_lr = 0.01, .gamma = 0.1, .stepsize = 100, .power = 0.75, .max_iter = 1000 };
#define NEAR(a, b) CHECK(fabs((a) - (b)) <= 1e-12 + 1e-9 * fabs(b))
	c.policy = LR_FIXED;
	NEAR(lr_at(&c, 0), 0.01);
	NEAR(lr_at(&c, 12345), 0.01);
	c.policy = LR_STEP;
	NEAR(lr_at(&c, 0), 0.01);
	NEAR(lr_at(&c, 99), 0.01);
	NEAR(lr_at(&c, 100), 0.001);
	NEAR(lr_at(&c, 250), 0.0001);
	c.policy = LR_MULTISTEP;
	c.stepvalue[0] = 10;
	c.stepvalue[1] = 50;
	c.stepvalue[2] = 200;
	c.nstepvalue = 3;
	NEAR(lr_at(&c, 9), 0.01);
	NEAR(lr_at(&c, 10), 0.001);
	NEAR(lr_at(&c, 49), 0.001);
	NEAR(lr_at(&c, 50), 0.0001);
	NEAR(lr_at(&c, 1000), 0.00001);
	c.policy = LR_EXP;
	c.gamma = 0.99;
	NEAR(lr_at(&c, 3), 0.01 * 0.99 * 0.99 * 0.99);
	c.policy = LR_INV;
	c.gamma = 0.0001;
	NEAR(lr_at(&c, 0), 0.01);
	NEAR(lr_at(&c, 10000), 0.01 * pow(2.0, -0.75)); /* (1 + 1e-4 * 1e4)^-0.75 */
	c.policy = LR_POLY;
	c.power = 2;
	NEAR(lr_at(&c, 500), 0.01 * 0.25);
	NEAR(lr_at(&c, 1000), 0.0);
	c.policy = LR_SIGMOID;
	c.gamma = 0.05;
	NEAR(lr_at(&c, 100), 0.005); /* at the centre: half */
	NEAR(lr_at(&c, 120), 0.01 / (1 + exp(-1.0)));
	enum lr_policy p;
	CHECK_EQ_INT(lr_policy_parse("multistep", &p, NULL), DD_OK);
	CHECK_EQ_INT(p, LR_MULTISTEP);
	CHECK_STR(lr_policy_name(LR_POLY), "poly");
	struct dd_err err = { 0 };
	CHECK_EQ_INT(lr_policy_parse("cosine", &p, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "cosine");
#undef NEAR
}

int main(void)
{
	struct dd_err err = { 0 };
	const char *bname = getenv("DD_BACKEND") ? getenv("DD_BACKEND") : "ref";
	if (backend_create(bname, &test_be, &err) != DD_OK) {
		fprintf(stderr, "backend %s: %s\n", bname, err.msg);
		return 1;
	}
	printf("backend: %s\n", backend_name(test_be));
	RUN(test_gradient_check);
	RUN(test_gradient_check_wide);
	RUN(test_gradient_check_seg);
	RUN(test_gradient_check_deconv);
	RUN(test_bilinear_filler);
	RUN(test_sgd_update);
	RUN(test_training);
	RUN(test_training_adam);
	RUN(test_lenet);
	RUN(test_lr_policies);
	backend_free(test_be);
	return check_summary();
}
