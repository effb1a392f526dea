/* test_backend.c — the cpu backend (networks/cpu/backend_cpu.c) against the reference
 * kernels (networks/ref.h), in ggml's test-backend-ops manner: each case builds a
 * struct backend_layer by hand over seeded random tensors, runs the layer's forward
 * and backward through the backend's vtable and the same through the ref.h kernels
 * directly, and compares every output by normalised error
 *     max|cpu - ref| / max(1, max|ref|) < 1e-4.
 * Gradient buffers are pre-filled with a constant before a backward, so a backward
 * that overwrote instead of adding fails; every combination of NULL gradients is
 * run; in-place cases follow backend_impl.h's contract (y == x[0], dy a copy, dx[0]
 * zeroed, bx/by the saved values).  The forward runs twice, first over other
 * buffers, so that a backend that kept the first call's pointers fails.
 *
 *   test_backend          the tests; exits non-zero when any failed
 *   test_backend bench    also times LeNet's and AlexNet's first layers,
 *                         forward + backward, ref kernels against the cpu backend
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "../../common/err.h"
#include "../../networks/backend_impl.h"
#include "../../networks/ref.h"

#define TOL 1e-4
#define PREFILL 0.25f /* what every gradient buffer holds before a backward */

static struct backend *be;
static uint64_t rng_state;

static float rnd(void) /* uniform in [-1, 1), splitmix64 */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (float)((double)(z >> 40) / (double)(1ULL << 23) - 1.0);
}

static float *buf(size_t count)
{
	return calloc(count ? count : 1, sizeof(float));
}

static float *rnd_buf(size_t count)
{
	float *p = buf(count);
	if (p)
		for (size_t i = 0; i < count; i++)
			p[i] = rnd();
	return p;
}

static void fill(float *p, size_t count, float v)
{
	for (size_t i = 0; i < count; i++)
		p[i] = v;
}

static float *dup(const float *p, size_t count)
{
	float *q = buf(count);
	if (q && count)
		memcpy(q, p, count * sizeof *q);
	return q;
}

/* max|a - ref| / max(1, max|ref|) */
static double nerr(const float *a, const float *ref, size_t count)
{
	double md = 0.0, mr = 0.0;
	for (size_t i = 0; i < count; i++) {
		double diff = fabs((double)a[i] - ref[i]);
		if (!(diff <= md)) /* NaN counts as infinitely wrong */
			md = isnan(diff) ? INFINITY : diff;
		if (fabs(ref[i]) > mr)
			mr = fabs(ref[i]);
	}
	return md / (mr > 1.0 ? mr : 1.0);
}

static void expect_close(const char *name, const char *what, const float *a, const float *ref, size_t count)
{
	double e = nerr(a, ref, count);
	if (e < TOL)
		return;
	fprintf(stderr, "  %s: %s: normalised error %.3g\n", name, what, e);
	check_current_failed = 1;
}

/* ---- one case: a layer on both sides ---- */

struct tcase {
	char name[160];
	struct net_layer l;
	struct backend_layer bl;     /* the desc, n/c/inner, count, in_place */
	size_t nx, ny, nw[3];
	int nparam;                  /* parameter blobs (w[0..nparam)) */
	int learned[3];              /* which get a gradient */
	int training;
	/* the reference's scratch, sized by the case */
	int32_t *argmax;
	float *lrn_scale, *bn_mean, *bn_invstd;
};

static void ref_forward(struct tcase *t, float *y, const float *x, float *const *w)
{
	const struct backend_layer *bl = &t->bl;
	switch (t->l.type) {
	case NET_CONVOLUTION:
		conv_forward(y, x, w[0], bl->d.conv.bias ? w[1] : NULL, &bl->d.conv);
		break;
	case NET_DECONVOLUTION:
		deconv_forward(y, x, w[0], bl->d.conv.bias ? w[1] : NULL, &bl->d.conv);
		break;
	case NET_INNER_PRODUCT:
		ip_forward(y, x, w[0], bl->d.ip.bias ? w[1] : NULL, &bl->d.ip);
		break;
	case NET_POOLING:
		pool_forward(y, t->argmax, x, &bl->d.pool);
		break;
	case NET_LRN:
		lrn_forward(y, t->lrn_scale, x, &bl->d.lrn);
		break;
	case NET_BATCH_NORM:
		bn_forward(y, w[0], w[1], w[2], t->bn_mean, t->bn_invstd, x, &bl->d.bn, t->training);
		break;
	case NET_RELU:
		relu_forward(y, x, bl->count, t->l.relu.negative_slope);
		break;
	case NET_SIGMOID:
		sigmoid_forward(y, x, bl->count);
		break;
	case NET_TANH:
		tanh_forward(y, x, bl->count);
		break;
	case NET_SOFTMAX:
		softmax_forward(y, x, bl->n, bl->c, bl->inner);
		break;
	case NET_POWER:
		power_forward(y, x, bl->count, t->l.power.power, t->l.power.scale, t->l.power.shift);
		break;
	default:
		break;
	}
}

static void ref_backward(struct tcase *t, float *dx, float *const *dw, const float *dy, const float *x,
			 const float *y, float *const *w)
{
	const struct backend_layer *bl = &t->bl;
	switch (t->l.type) {
	case NET_CONVOLUTION:
		conv_backward(dx, dw[0], bl->d.conv.bias ? dw[1] : NULL, dy, x, w[0], &bl->d.conv);
		break;
	case NET_DECONVOLUTION:
		deconv_backward(dx, dw[0], bl->d.conv.bias ? dw[1] : NULL, dy, x, w[0], &bl->d.conv);
		break;
	case NET_INNER_PRODUCT:
		ip_backward(dx, dw[0], bl->d.ip.bias ? dw[1] : NULL, dy, x, w[0], &bl->d.ip);
		break;
	case NET_POOLING:
		pool_backward(dx, dy, t->argmax, &bl->d.pool);
		break;
	case NET_LRN:
		lrn_backward(dx, dy, y, x, t->lrn_scale, &bl->d.lrn);
		break;
	case NET_BATCH_NORM:
		bn_backward(dx, dy, y, t->bn_invstd, &bl->d.bn, !t->training);
		break;
	case NET_RELU:
		relu_backward(dx, dy, x, bl->count, t->l.relu.negative_slope);
		break;
	case NET_SIGMOID:
		sigmoid_backward(dx, dy, y, bl->count);
		break;
	case NET_TANH:
		tanh_backward(dx, dy, y, bl->count);
		break;
	case NET_SOFTMAX:
		softmax_backward(dx, dy, y, bl->n, bl->c, bl->inner);
		break;
	case NET_POWER:
		power_backward(dx, dy, x, bl->count, t->l.power.power, t->l.power.scale, t->l.power.shift);
		break;
	default:
		break;
	}
}

/* Fill the parameters: BatchNorm's statistics are a running sum (variance > 0) and
 * a factor; others uniform. */
static void fill_params(struct tcase *t, float **w)
{
	for (int i = 0; i < t->nparam; i++)
		for (size_t k = 0; k < t->nw[i]; k++)
			w[i][k] = rnd();
	if (t->l.type == NET_BATCH_NORM) {
		for (size_t k = 0; k < t->nw[1]; k++)
			w[1][k] = 1.5f + w[1][k];
		w[2][0] = 1.7f;
	}
}

/* Run t: forward (twice), the running statistics, then the backward for every
 * subset of the wanted gradients. */
static void run_case(struct tcase *t, uint64_t seed)
{
	struct backend_layer *bl = &t->bl;
	struct dd_err err = { 0 };
	void *state = NULL;
	int in_place = bl->in_place, rc;
	float *x = NULL, *x2 = NULL, *y2 = NULL, *dy = NULL, *ry = NULL, *cy = NULL, *saved_x = NULL;
	float *rdx = NULL, *cdx = NULL, *rw[3] = { 0 }, *cw[3] = { 0 }, *w0[3] = { 0 }, *rdw[3] = { 0 }, *cdw[3] = { 0 };
	const float *xs[1];
	float *dxs[1];

	rng_state = seed;
	x = rnd_buf(t->nx);
	x2 = rnd_buf(t->nx);
	dy = rnd_buf(t->ny);
	ry = buf(t->ny);
	cy = buf(t->ny > t->nx ? t->ny : t->nx);
	y2 = buf(t->ny);
	rdx = buf(t->nx);
	cdx = buf(t->nx);
	int ok = x && x2 && dy && ry && cy && y2 && rdx && cdx;
	for (int i = 0; i < t->nparam; i++) {
		w0[i] = buf(t->nw[i]);
		rw[i] = buf(t->nw[i]);
		cw[i] = buf(t->nw[i]);
		rdw[i] = buf(t->nw[i]);
		cdw[i] = buf(t->nw[i]);
		ok = ok && w0[i] && rw[i] && cw[i] && rdw[i] && cdw[i];
	}
	if (t->l.type == NET_POOLING)
		ok = ok && (t->argmax = calloc(t->ny, sizeof *t->argmax));
	if (t->l.type == NET_LRN)
		ok = ok && (t->lrn_scale = buf(t->ny));
	if (t->l.type == NET_BATCH_NORM)
		ok = ok && (t->bn_mean = buf((size_t)bl->c)) && (t->bn_invstd = buf((size_t)bl->c));
	CHECK(ok);
	if (!ok)
		goto done;
	fill_params(t, w0);
	for (int i = 0; i < t->nparam; i++) {
		memcpy(rw[i], w0[i], t->nw[i] * sizeof(float));
		memcpy(cw[i], w0[i], t->nw[i] * sizeof(float));
	}

	/* the reference */
	ref_forward(t, ry, x, rw);

	/* the backend: init, a forward over other buffers, then the real one */
	bl->l = &t->l;
	bl->nbottom = 1;
	bl->x = xs;
	bl->dx = dxs;
	for (int i = 0; i < 3; i++)
		bl->w[i] = i < t->nparam ? cw[i] : NULL;
	rc = backend_layer_init(be, bl, &state, &err);
	CHECK_EQ_INT(rc, DD_OK);
	if (rc != DD_OK) {
		fprintf(stderr, "  %s: %s\n", t->name, err.msg);
		goto done;
	}
	if (t->l.type != NET_BATCH_NORM || !t->training || bl->d.bn.use_global_stats) {
		/* (a training BatchNorm would update its statistics twice) */
		xs[0] = x2;
		bl->y = in_place ? x2 : y2;
		CHECK_EQ_INT(backend_forward(be, state, bl, t->training, &err), DD_OK);
	}
	if (in_place) { /* y == x[0]: the input is gone after the forward */
		memcpy(cy, x, t->nx * sizeof(float));
		saved_x = dup(x, t->nx);
		CHECK(saved_x != NULL);
		if (!saved_x)
			goto done;
		xs[0] = cy;
	} else {
		xs[0] = x;
	}
	bl->y = cy;
	rc = backend_forward(be, state, bl, t->training, &err);
	CHECK_EQ_INT(rc, DD_OK);
	if (rc != DD_OK)
		fprintf(stderr, "  %s: forward: %s\n", t->name, err.msg);
	expect_close(t->name, "forward", cy, ry, t->ny);
	for (int i = 0; i < t->nparam; i++)
		expect_close(t->name, "parameters after the forward (running statistics)", cw[i], rw[i], t->nw[i]);

	/* backward: bit 0 dx, bit 1+i dw[i] */
	bl->bx = in_place ? saved_x : x;
	bl->by = cy;
	bl->dy = dy;
	for (int mask = 0; mask < 1 << (1 + t->nparam); mask++) {
		int skip = 0;
		for (int i = 0; i < t->nparam; i++)
			skip |= (mask >> (1 + i) & 1) && !t->learned[i];
		if (skip || (in_place && !(mask & 1)))
			continue;
		/* in place, the graph has zeroed dx[0]; otherwise it holds other gradients */
		fill(rdx, t->nx, in_place ? 0.0f : PREFILL);
		fill(cdx, t->nx, in_place ? 0.0f : PREFILL);
		for (int i = 0; i < t->nparam; i++) {
			fill(rdw[i], t->nw[i], PREFILL);
			fill(cdw[i], t->nw[i], PREFILL);
		}
		float *rdws[3], *cdws[3];
		for (int i = 0; i < 3; i++) {
			int want = i < t->nparam && (mask >> (1 + i) & 1);
			rdws[i] = want ? rdw[i] : NULL;
			cdws[i] = want ? cdw[i] : NULL;
			bl->dw[i] = cdws[i];
		}
		dxs[0] = mask & 1 ? cdx : NULL;
		ref_backward(t, mask & 1 ? rdx : NULL, rdws, dy, x, ry, rw);
		rc = backend_backward(be, state, bl, t->training, &err);
		CHECK_EQ_INT(rc, DD_OK);
		if (rc != DD_OK)
			fprintf(stderr, "  %s: backward: %s\n", t->name, err.msg);
		char what[64];
		snprintf(what, sizeof what, "backward dx (mask %d)", mask);
		expect_close(t->name, what, cdx, rdx, t->nx);
		for (int i = 0; i < t->nparam; i++) {
			snprintf(what, sizeof what, "backward dw[%d] (mask %d)", i, mask);
			expect_close(t->name, what, cdw[i], rdw[i], t->nw[i]);
		}
	}
	/* a backward adds: dx = PREFILL + the gradient alone, which is not 0 */
	if (!in_place) {
		double moved = 0.0;
		for (size_t k = 0; k < t->nx; k++)
			moved += fabs(rdx[k] - PREFILL);
		CHECK(moved > 0.0 || t->l.type == NET_POOLING); /* (a pooling may route to no pixel of a row) */
	}
done:
	backend_layer_fini(be, state);
	free(t->argmax);
	free(t->lrn_scale);
	free(t->bn_mean);
	free(t->bn_invstd);
	t->argmax = NULL, t->lrn_scale = t->bn_mean = t->bn_invstd = NULL;
	for (int i = 0; i < 3; i++) {
		free(cdw[i]);
		free(rdw[i]);
		free(cw[i]);
		free(rw[i]);
		free(w0[i]);
	}
	free(saved_x);
	free(cdx);
	free(rdx);
	free(y2);
	free(cy);
	free(ry);
	free(dy);
	free(x2);
	free(x);
}

/* ---- convolution ---- */

struct conv_case {
	int n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, group, bias;
};

static const struct conv_case conv_cases[] = {
	/* n cin  h   w cout kh kw sh sw ph pw dh dw  g bias */
	{ 1, 3, 8, 8, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1 },    /* plain, bias */
	{ 4, 3, 8, 8, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0 },    /* no bias, batch 4 */
	{ 4, 3, 9, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1 },    /* stride 2, pad 1 */
	{ 4, 8, 6, 6, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1 },    /* kernel 1 */
	{ 4, 3, 10, 11, 4, 5, 5, 2, 2, 0, 0, 1, 1, 1, 0 },  /* kernel 5, stride 2 (floors) */
	{ 4, 4, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1 },    /* group 2 */
	{ 1, 6, 7, 9, 4, 3, 3, 2, 1, 1, 0, 1, 1, 2, 0 },    /* group 2, non-square, no bias */
	{ 4, 3, 11, 11, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1 },  /* dilation 2 */
	{ 1, 4, 10, 12, 4, 3, 2, 1, 2, 0, 1, 2, 3, 2, 1 },  /* dilation 2x3, group 2 */
	{ 4, 3, 7, 10, 5, 3, 5, 2, 3, 1, 2, 1, 1, 1, 1 },   /* non-square everything */
	{ 1, 1, 6, 5, 2, 2, 3, 3, 2, 0, 1, 1, 1, 1, 1 },    /* stride > kernel */
	{ 4, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 1 },    /* depthwise (group = C) */
	{ 2, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1, 1, 1 }, /* LeNet conv1 (blocked output) */
	{ 2, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1, 1 }, /* LeNet conv2 (plain layouts) */
	{ 2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },  /* 16-channel blocks: reorders both ways */
	{ 2, 64, 7, 7, 32, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0 },  /* blocked, group 2, stride 2 */
	{ 2, 3, 35, 35, 8, 11, 11, 4, 4, 0, 0, 1, 1, 1, 1 }, /* AlexNet conv1's geometry */
};

/* Each case as a convolution (type NET_CONVOLUTION) or a deconvolution: the same
 * descriptor, the top's size by the type's rule; the weights hold
 * C_out·C_in/group·kh·kw values either way. */
static void run_conv_cases(enum net_layer_type type, const struct conv_case *cases, size_t ncase, uint64_t seed)
{
	int de = type == NET_DECONVOLUTION;
	for (size_t i = 0; i < ncase; i++) {
		const struct conv_case *c = &cases[i];
		struct tcase t = { .l = { .name = de ? "deconv" : "conv", .type = type }, .training = 1 };
		struct conv_desc *d = &t.bl.d.conv;
		*d = (struct conv_desc){ .n = c->n, .c_in = c->cin, .h_in = c->h, .w_in = c->w, .c_out = c->cout,
					 .kh = c->kh, .kw = c->kw, .sh = c->sh, .sw = c->sw, .ph = c->ph, .pw = c->pw,
					 .dh = c->dh, .dw = c->dw, .group = c->group, .bias = c->bias };
		if (de) {
			d->h_out = (d->h_in - 1) * d->sh - 2 * d->ph + d->dh * (d->kh - 1) + 1;
			d->w_out = (d->w_in - 1) * d->sw - 2 * d->pw + d->dw * (d->kw - 1) + 1;
		} else {
			conv_out_size(d);
		}
		snprintf(t.name, sizeof t.name, "%s#%zu %dx%dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d%s", t.l.name, i,
			 d->n, d->c_in, d->h_in, d->w_in, d->c_out, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh,
			 d->dw, d->group, d->bias ? " bias" : "");
		t.bl.n = d->n, t.bl.c = d->c_in, t.bl.inner = d->h_in * d->w_in;
		t.nx = (size_t)d->n * d->c_in * d->h_in * d->w_in;
		t.ny = (size_t)d->n * d->c_out * d->h_out * d->w_out;
		t.bl.count = (int64_t)t.ny;
		t.nparam = d->bias ? 2 : 1;
		t.nw[0] = (size_t)d->c_out * (d->c_in / d->group) * d->kh * d->kw;
		t.nw[1] = (size_t)d->c_out;
		t.learned[0] = t.learned[1] = 1;
		run_case(&t, seed + i);
	}
}

static void test_conv(void)
{
	run_conv_cases(NET_CONVOLUTION, conv_cases, sizeof conv_cases / sizeof conv_cases[0], 1000);
}

/* ---- deconvolution ---- */

static const struct conv_case deconv_cases[] = {
	/* n cin  h   w cout kh kw sh sw ph pw dh dw  g bias */
	{ 1, 3, 5, 5, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1 },    /* plain, bias */
	{ 4, 3, 4, 5, 2, 4, 4, 2, 2, 1, 1, 1, 1, 1, 0 },    /* FCN's 2x upsampling, no bias */
	{ 2, 4, 5, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1 },    /* group 2, stride 2, pad 1 */
	{ 2, 8, 4, 4, 8, 4, 4, 2, 2, 1, 1, 1, 1, 8, 0 },    /* one group per channel (bilinear upsampling) */
	{ 2, 3, 6, 5, 4, 3, 2, 2, 3, 1, 0, 2, 1, 1, 1 },    /* non-square, dilation */
	{ 2, 21, 5, 5, 21, 16, 16, 8, 8, 4, 4, 1, 1, 1, 0 }, /* FCN-AlexNet's upscore's geometry, smaller */
	{ 2, 32, 4, 4, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1 },  /* 16-channel blocks */
};

static void test_deconv(void)
{
	run_conv_cases(NET_DECONVOLUTION, deconv_cases, sizeof deconv_cases / sizeof deconv_cases[0], 1100);
}

/* ---- inner product ---- */

static void test_ip(void)
{
	static const int cases[][4] = { /* n k m bias */
		{ 1, 10, 7, 1 }, { 4, 10, 7, 1 }, { 3, 33, 5, 0 }, { 64, 800, 500, 1 }, { 5, 1, 3, 1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tcase t = { .l = { .name = "ip", .type = NET_INNER_PRODUCT }, .training = 1 };
		struct ip_desc *d = &t.bl.d.ip;
		*d = (struct ip_desc){ .n = cases[i][0], .k = cases[i][1], .m = cases[i][2], .bias = cases[i][3] };
		snprintf(t.name, sizeof t.name, "ip#%zu %dx%d->%d%s", i, d->n, d->k, d->m, d->bias ? " bias" : "");
		t.bl.n = d->n, t.bl.c = d->k, t.bl.inner = 1;
		t.nx = (size_t)d->n * d->k;
		t.ny = (size_t)d->n * d->m;
		t.bl.count = (int64_t)t.ny;
		t.nparam = d->bias ? 2 : 1;
		t.nw[0] = (size_t)d->m * d->k;
		t.nw[1] = (size_t)d->m;
		t.learned[0] = t.learned[1] = 1;
		run_case(&t, 2000 + i);
	}
}

/* ---- pooling ---- */

struct pool_case {
	int n, c, h, w, kh, kw, sh, sw, ph, pw, ave, global;
	const char *what;
};

static const struct pool_case pool_cases[] = {
	{ 4, 3, 24, 24, 2, 2, 2, 2, 0, 0, 0, 0, "LeNet MAX k2 s2" },
	{ 2, 3, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0, "AlexNet MAX k3 s2" },
	{ 2, 3, 12, 11, 3, 3, 2, 2, 0, 0, 0, 0, "MAX ceil rule: last window past the input" },
	{ 2, 3, 6, 7, 3, 3, 2, 2, 1, 1, 0, 0, "MAX pad 1, ceil rule" },
	{ 2, 3, 7, 9, 3, 2, 2, 3, 1, 1, 0, 0, "MAX non-square, pad" },
	{ 2, 3, 7, 7, 2, 2, 3, 3, 0, 0, 0, 0, "MAX kernel < stride" },
	{ 2, 3, 7, 7, 3, 3, 2, 2, 1, 1, 1, 0, "AVE pad 1, windows inside the padding" },
	{ 2, 3, 12, 12, 3, 3, 2, 2, 0, 0, 1, 0, "AVE ceil rule, no pad (clipped windows)" },
	{ 2, 3, 6, 6, 3, 3, 2, 2, 1, 1, 1, 0, "AVE pad 1, window beyond the padding (ref)" },
	{ 2, 3, 6, 6, 1, 1, 3, 3, 0, 0, 0, 0, "MAX window of padding only (ref)" },
	{ 2, 5, 7, 5, 0, 0, 0, 0, 0, 0, 1, 1, "AVE global" },
	{ 2, 5, 6, 6, 0, 0, 0, 0, 0, 0, 0, 1, "MAX global" },
};

static void test_pool(void)
{
	for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
		const struct pool_case *c = &pool_cases[i];
		struct tcase t = { .l = { .name = "pool", .type = NET_POOLING }, .training = 1 };
		struct pool_desc *d = &t.bl.d.pool;
		*d = (struct pool_desc){ .n = c->n, .c = c->c, .h_in = c->h, .w_in = c->w, .kh = c->kh, .kw = c->kw,
					 .sh = c->sh, .sw = c->sw, .ph = c->ph, .pw = c->pw,
					 .method = c->ave ? POOL_AVE : POOL_MAX, .global = c->global };
		pool_out_size(d);
		snprintf(t.name, sizeof t.name, "pool#%zu %s (%dx%d -> %dx%d)", i, c->what, d->h_in, d->w_in, d->h_out,
			 d->w_out);
		t.bl.n = d->n, t.bl.c = d->c, t.bl.inner = d->h_in * d->w_in;
		t.nx = (size_t)d->n * d->c * d->h_in * d->w_in;
		t.ny = (size_t)d->n * d->c * d->h_out * d->w_out;
		t.bl.count = (int64_t)t.ny;
		run_case(&t, 3000 + i);
	}
}

/* ---- LRN ---- */

static void test_lrn(void)
{
	static const struct { int n, c, h, w, size; float alpha, beta, k; } cases[] = {
		{ 2, 7, 5, 6, 5, 1e-4f, 0.75f, 1.0f }, /* AlexNet's */
		{ 2, 7, 5, 6, 5, 1.0f, 0.75f, 1.0f },  /* alpha large enough to tell /size from not */
		{ 2, 4, 3, 3, 3, 0.5f, 0.6f, 2.0f },
		{ 1, 2, 4, 5, 5, 2.0f, 0.75f, 1.0f },  /* window wider than the channels */
		{ 2, 32, 5, 7, 5, 1.0f, 0.75f, 1.0f }, /* 16-channel blocks (oneDNN's JIT backward) */
		{ 2, 16, 3, 3, 3, 0.5f, 0.75f, 2.0f },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int in_place = 0; in_place < 2; in_place++) {
			struct tcase t = { .l = { .name = "lrn", .type = NET_LRN }, .training = 1 };
			t.bl.d.lrn = (struct lrn_desc){ .n = cases[i].n, .c = cases[i].c, .h = cases[i].h, .w = cases[i].w,
							.size = cases[i].size, .alpha = cases[i].alpha,
							.beta = cases[i].beta, .k = cases[i].k };
			snprintf(t.name, sizeof t.name, "lrn#%zu size %d alpha %g%s", i, cases[i].size, cases[i].alpha,
				 in_place ? " in place" : "");
			t.bl.n = cases[i].n, t.bl.c = cases[i].c, t.bl.inner = cases[i].h * cases[i].w;
			t.nx = t.ny = (size_t)t.bl.n * t.bl.c * t.bl.inner;
			t.bl.count = (int64_t)t.ny;
			t.bl.in_place = in_place;
			run_case(&t, 4000 + i);
		}
}

/* ---- batch norm ---- */

static void test_bn(void)
{
	static const struct { int n, c, h, w, global, training; const char *what; } cases[] = {
		{ 4, 3, 5, 6, 0, 1, "training, batch statistics" },
		{ 2, 5, 1, 1, 0, 1, "training, (N, C) input" },
		{ 4, 3, 5, 6, 1, 1, "use_global_stats" },
		{ 4, 3, 5, 6, 0, 0, "test phase" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int in_place = 0; in_place < 2; in_place++) {
			struct tcase t = { .l = { .name = "bn", .type = NET_BATCH_NORM }, .training = cases[i].training };
			t.bl.d.bn = (struct bn_desc){ .n = cases[i].n, .c = cases[i].c, .h = cases[i].h, .w = cases[i].w,
						      .eps = 1e-5f, .moving_average_fraction = 0.999f,
						      .use_global_stats = cases[i].global };
			snprintf(t.name, sizeof t.name, "bn#%zu %s%s", i, cases[i].what, in_place ? " in place" : "");
			t.bl.n = cases[i].n, t.bl.c = cases[i].c, t.bl.inner = cases[i].h * cases[i].w;
			t.nx = t.ny = (size_t)t.bl.n * t.bl.c * t.bl.inner;
			t.bl.count = (int64_t)t.ny;
			t.bl.in_place = in_place;
			t.nparam = 3;
			t.nw[0] = t.nw[1] = (size_t)cases[i].c;
			t.nw[2] = 1;
			run_case(&t, 5000 + i);
		}
}

/* ---- activations and softmax ---- */

static void test_eltwise(void)
{
	static const struct { enum net_layer_type type; float slope; const char *what; } cases[] = {
		{ NET_RELU, 0.0f, "ReLU" },
		{ NET_RELU, 0.1f, "ReLU slope 0.1" },
		{ NET_RELU, -0.2f, "ReLU slope -0.2" },
		{ NET_SIGMOID, 0.0f, "Sigmoid" },
		{ NET_TANH, 0.0f, "TanH" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int in_place = 0; in_place < 2; in_place++) {
			struct tcase t = { .l = { .name = "act", .type = cases[i].type }, .training = 1 };
			t.l.relu.negative_slope = cases[i].slope;
			snprintf(t.name, sizeof t.name, "act#%zu %s%s", i, cases[i].what, in_place ? " in place" : "");
			t.bl.n = 3, t.bl.c = 5, t.bl.inner = 7 * 3;
			t.nx = t.ny = 3 * 5 * 7 * 3;
			t.bl.count = (int64_t)t.ny;
			t.bl.in_place = in_place;
			run_case(&t, 6000 + i);
		}
}

static void test_softmax(void)
{
	static const int cases[][4] = { { 4, 10, 1, 0 }, { 2, 5, 6, 0 }, { 1, 3, 7, 0 }, { 2, 5, 6, 1 } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct tcase t = { .l = { .name = "softmax", .type = NET_SOFTMAX }, .training = 1 };
		snprintf(t.name, sizeof t.name, "softmax#%zu (%d, %d, %d)%s", i, cases[i][0], cases[i][1], cases[i][2],
			 cases[i][3] ? " in place" : "");
		t.bl.n = cases[i][0], t.bl.c = cases[i][1], t.bl.inner = cases[i][2];
		t.nx = t.ny = (size_t)cases[i][0] * cases[i][1] * cases[i][2];
		t.bl.count = (int64_t)t.ny;
		t.bl.in_place = cases[i][3];
		run_case(&t, 7000 + i);
	}
}

/* ---- two-bottom layers: the losses, Accuracy and Crop ----
 *
 * Built by hand as graph.c would: x[0] the scores (or EuclideanLoss' a, Crop's
 * input), x[1] the labels (b, Crop's reference, unread); the ref.h kernels called
 * directly are the oracle.  The backward runs with every pair of wanted gradients
 * over buffers pre-filled with PREFILL, and a loss' dy is its loss weight. */
struct pair_case {
	char name[160];
	struct net_layer l;
	struct backend_layer bl;
	size_t n0, n1, ny;       /* bottom 0, bottom 1, top */
	const float *labels;     /* bottom 1's values; NULL: random */
};

static void pair_ref(struct pair_case *t, float *y, float *dx0, float *dx1, const float *x0, const float *x1,
		     const float *dy, float *scratch)
{
	const struct backend_layer *bl = &t->bl;
	const struct net_layer *l = &t->l;
	int ig = l->loss.has_ignore_label ? l->loss.ignore_label : -1;
	switch (l->type) {
	case NET_SOFTMAX_LOSS:
		y[0] = softmax_loss_forward(scratch, x0, x1, bl->n, bl->c, bl->inner, ig, (enum loss_norm)l->loss.normalization);
		if (dx0)
			softmax_loss_backward(dx0, scratch, x1, bl->n, bl->c, bl->inner, ig,
					      (enum loss_norm)l->loss.normalization, dy[0]);
		break;
	case NET_ACCURACY:
		y[0] = accuracy_forward(x0, x1, bl->n, bl->c, bl->inner, l->accuracy.top_k,
					l->accuracy.has_ignore_label ? l->accuracy.ignore_label : -1);
		break;
	case NET_EUCLIDEAN_LOSS:
		y[0] = euclidean_loss_forward(scratch, x0, x1, bl->n, (int64_t)t->n0);
		euclidean_loss_backward(dx0, dx1, scratch, bl->n, (int64_t)t->n0, dy[0]);
		break;
	case NET_CROP:
		crop_forward(y, x0, &bl->d.crop);
		crop_backward(dx0, dy, &bl->d.crop);
		break;
	default:
		CHECK(0);
	}
}

static void run_pair(struct pair_case *t, uint64_t seed)
{
	struct backend_layer *bl = &t->bl;
	struct dd_err err = { 0 };
	void *state = NULL;
	rng_state = seed;
	float *x0 = rnd_buf(t->n0), *x1 = t->labels ? dup(t->labels, t->n1) : rnd_buf(t->n1);
	float *dy = rnd_buf(t->ny), *ry = buf(t->ny), *cy = buf(t->ny), *scratch = buf(t->n0);
	float *rdx[2] = { buf(t->n0), buf(t->n1) }, *cdx[2] = { buf(t->n0), buf(t->n1) };
	int ok = x0 && x1 && dy && ry && cy && scratch && rdx[0] && rdx[1] && cdx[0] && cdx[1];
	CHECK(ok);
	if (!ok)
		goto done;
	if (t->l.type != NET_CROP)
		dy[0] = 0.75f; /* the loss weight */
	const float *xs[2] = { x0, x1 };
	bl->l = &t->l;
	bl->nbottom = 2;
	bl->x = xs;
	bl->bx = x0;
	bl->dy = dy;
	bl->y = cy;
	bl->by = cy;
	int rc = backend_layer_init(be, bl, &state, &err);
	CHECK(rc == DD_OK);
	if (rc) {
		fprintf(stderr, "  %s: %s\n", t->name, err.msg);
		goto done;
	}
	for (int want = 0; want < 4; want++) {
		for (int i = 0; i < 2; i++) {
			fill(rdx[i], i ? t->n1 : t->n0, PREFILL);
			fill(cdx[i], i ? t->n1 : t->n0, PREFILL);
		}
		float *wanted[2] = { want & 1 ? cdx[0] : NULL, want & 2 ? cdx[1] : NULL };
		bl->dx = wanted;
		rc = backend_forward(be, state, bl, 1, &err);
		if (rc == DD_OK && t->l.type != NET_ACCURACY)
			rc = backend_backward(be, state, bl, 1, &err);
		CHECK(rc == DD_OK);
		if (rc) {
			fprintf(stderr, "  %s: %s\n", t->name, err.msg);
			break;
		}
		int grads = t->l.type != NET_ACCURACY;
		pair_ref(t, ry, grads && (want & 1) ? rdx[0] : NULL, grads && (want & 2) ? rdx[1] : NULL, x0, x1, dy,
			 scratch);
		expect_close(t->name, "forward", cy, ry, t->ny);
		expect_close(t->name, "bottom 0 gradient", cdx[0], rdx[0], t->n0);
		expect_close(t->name, "bottom 1 gradient", cdx[1], rdx[1], t->n1);
	}
	backend_layer_fini(be, state);
done:
	free(x0), free(x1), free(dy), free(ry), free(cy), free(scratch);
	free(rdx[0]), free(rdx[1]), free(cdx[0]), free(cdx[1]);
}

/* Segmentation's labels: classes 0..c-1 with every fifth position 255 (ignored). */
static float *seg_labels(size_t count, int c, uint64_t seed)
{
	float *p = buf(count);
	uint64_t r = seed;
	for (size_t i = 0; p && i < count; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = i % 5 == 2 ? 255.0f : (float)((r >> 33) % (uint64_t)c);
	}
	return p;
}

/* SoftmaxWithLoss in Caffe's four normalisations and Accuracy, over N×C×H×W scores
 * against N×H×W labels with ignore_label 255; EuclideanLoss into both bottoms. */
static void test_losses(void)
{
	const int n = 2, c = 4, inner = 5 * 6;
	float *labels = seg_labels((size_t)n * inner, c, 9000);
	CHECK(labels != NULL);
	for (int norm = NET_NORM_FULL; norm <= NET_NORM_NONE; norm++)
		for (int ignore = 0; ignore < 2; ignore++) {
			struct pair_case t = { .l = { .name = "loss", .type = NET_SOFTMAX_LOSS } };
			t.l.loss.normalization = (enum net_loss_norm)norm;
			t.l.loss.has_ignore_label = ignore, t.l.loss.ignore_label = 255;
			snprintf(t.name, sizeof t.name, "SoftmaxWithLoss 2x4x5x6 norm %d%s", norm, ignore ? " ignore 255" : "");
			t.bl.n = n, t.bl.c = c, t.bl.inner = inner, t.bl.count = 1;
			t.n0 = (size_t)n * c * inner, t.n1 = (size_t)n * inner, t.ny = 1;
			t.labels = labels;
			run_pair(&t, 9100 + (uint64_t)(norm * 2 + ignore));
		}
	for (int k = 1; k <= 3; k += 2) {
		struct pair_case t = { .l = { .name = "acc", .type = NET_ACCURACY } };
		t.l.accuracy.top_k = k, t.l.accuracy.has_ignore_label = 1, t.l.accuracy.ignore_label = 255;
		snprintf(t.name, sizeof t.name, "Accuracy 2x4x5x6 top-%d ignore 255", k);
		t.bl.n = n, t.bl.c = c, t.bl.inner = inner, t.bl.count = 1;
		t.n0 = (size_t)n * c * inner, t.n1 = (size_t)n * inner, t.ny = 1;
		t.labels = labels;
		run_pair(&t, 9200 + (uint64_t)k);
	}
	struct pair_case e = { .l = { .name = "euclid", .type = NET_EUCLIDEAN_LOSS } };
	snprintf(e.name, sizeof e.name, "EuclideanLoss 3x2x4x4");
	e.bl.n = 3, e.bl.c = 2, e.bl.inner = 16, e.bl.count = 1;
	e.n0 = e.n1 = 3 * 2 * 16, e.ny = 1;
	run_pair(&e, 9300);
	free(labels);
}

static void test_crop(void)
{
	static const struct crop_desc cases[] = {
		{ .ndim = 4, .in = { 2, 3, 9, 8 }, .out = { 2, 3, 5, 4 }, .off = { 0, 0, 2, 3 } },
		{ .ndim = 4, .in = { 2, 5, 6, 6 }, .out = { 2, 2, 3, 6 }, .off = { 0, 1, 2, 0 } },
		{ .ndim = 2, .in = { 3, 7 }, .out = { 3, 4 }, .off = { 0, 2 } },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct crop_desc *d = &cases[i];
		struct pair_case t = { .l = { .name = "crop", .type = NET_CROP } };
		size_t in = 1, out = 1;
		for (int a = 0; a < d->ndim; a++)
			in *= (size_t)d->in[a], out *= (size_t)d->out[a];
		snprintf(t.name, sizeof t.name, "Crop#%zu", i);
		t.bl.d.crop = *d;
		t.bl.n = d->in[0], t.bl.c = d->in[1], t.bl.inner = (int)(in / ((size_t)d->in[0] * d->in[1]));
		t.bl.count = (int64_t)out;
		t.n0 = in, t.n1 = out, t.ny = out;
		run_pair(&t, 9400 + i);
	}
}

/* A layer oneDNN rejects fails layer_init with an error naming it, and leaves no
 * state behind. */
static void test_invalid(void)
{
	struct net_layer l = { .name = "conv_bad", .type = NET_CONVOLUTION };
	struct backend_layer bl = { .l = &l, .nbottom = 1, .n = 2, .c = 3, .inner = 16, .count = 2 * 4 * 2 * 2 };
	bl.d.conv = (struct conv_desc){ .n = 2, .c_in = 3, .h_in = 4, .w_in = 4, .c_out = 4, .h_out = 2, .w_out = 2,
					.kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .group = 2 };
	struct dd_err err = { 0 };
	void *state = (void *)&bl;
	int rc = backend_layer_init(be, &bl, &state, &err); /* group 2 does not divide 3 channels */
	CHECK(rc == DD_EINVAL || rc == DD_EINTERNAL);
	CHECK(state == NULL);
	CHECK_CONTAINS(err.msg, "conv_bad");
	bl.d.conv.group = 1;
	bl.d.conv.h_out = 3; /* inconsistent: 4 - 3 + 1 = 2 */
	err = (struct dd_err){ 0 };
	rc = backend_layer_init(be, &bl, &state, &err);
	CHECK(rc == DD_EINVAL || rc == DD_EINTERNAL);
	CHECK_CONTAINS(err.msg, "conv_bad");
	backend_layer_fini(be, NULL);
}

/* A type the cpu backend does not run itself goes to the reference kernels. */
static void test_delegated(void)
{
	struct tcase t = { .l = { .name = "power", .type = NET_POWER }, .training = 1 };
	t.l.power.power = 2.0f, t.l.power.scale = 0.5f, t.l.power.shift = 1.0f;
	snprintf(t.name, sizeof t.name, "Power (delegated)");
	t.bl.n = 2, t.bl.c = 3, t.bl.inner = 4;
	t.nx = t.ny = 24;
	t.bl.count = 24;
	run_case(&t, 8000);
	CHECK(backend_supports(be, &t.l));
	CHECK_STR(be->ops->name, "cpu");
	CHECK_EQ_INT(be->ops->api_version, BACKEND_API_VERSION);
}

/* ---- bench: ms per forward + backward, ref kernels against the backend ---- */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One layer: conv (d.kh > 0) or inner product; dx wanted unless the first layer. */
static void bench(const char *label, struct tcase *t, int want_dx, int ref_reps, int reps)
{
	struct backend_layer *bl = &t->bl;
	struct dd_err err = { 0 };
	void *state = NULL;
	float *x = rnd_buf(t->nx), *y = buf(t->ny), *dy = rnd_buf(t->ny), *dx = buf(t->nx);
	float *w[2] = { rnd_buf(t->nw[0]), rnd_buf(t->nw[1]) }, *dw[2] = { buf(t->nw[0]), buf(t->nw[1]) };
	const float *xs[1] = { x };
	float *dxs[1] = { want_dx ? dx : NULL };
	if (!x || !y || !dy || !dx || !w[0] || !w[1] || !dw[0] || !dw[1]) {
		printf("bench %s: out of memory\n", label);
		goto done;
	}
	int conv = t->l.type == NET_CONVOLUTION;
	double t0 = now_ms();
	for (int i = 0; i < ref_reps; i++) {
		if (conv) {
			conv_forward(y, x, w[0], w[1], &bl->d.conv);
			conv_backward(dxs[0], dw[0], dw[1], dy, x, w[0], &bl->d.conv);
		} else {
			ip_forward(y, x, w[0], w[1], &bl->d.ip);
			ip_backward(dxs[0], dw[0], dw[1], dy, x, w[0], &bl->d.ip);
		}
	}
	double ref_ms = (now_ms() - t0) / ref_reps;
	bl->l = &t->l, bl->nbottom = 1, bl->x = xs, bl->y = y, bl->bx = x, bl->by = y, bl->dy = dy, bl->dx = dxs;
	bl->w[0] = w[0], bl->w[1] = w[1], bl->dw[0] = dw[0], bl->dw[1] = dw[1];
	int rc = backend_layer_init(be, bl, &state, &err);
	for (int i = 0; i < 2 && rc == DD_OK; i++) /* warm-up */
		rc = backend_forward(be, state, bl, 1, &err) || backend_backward(be, state, bl, 1, &err);
	/* the fastest of reps: the machine may be shared */
	double f = INFINITY, b = INFINITY;
	for (int i = 0; i < reps && rc == DD_OK; i++) {
		t0 = now_ms();
		rc = backend_forward(be, state, bl, 1, &err);
		double t1 = now_ms();
		rc = rc || backend_backward(be, state, bl, 1, &err);
		double t2 = now_ms();
		f = fmin(f, t1 - t0), b = fmin(b, t2 - t1);
	}
	printf("bench %-40s ref %9.2f ms  cpu %8.3f ms (fwd %.3f + bwd %.3f, best of %d)  x%.0f%s\n", label, ref_ms,
	       f + b, f, b, reps, ref_ms / (f + b), rc == DD_OK ? "" : "  (cpu FAILED)");
	backend_layer_fini(be, state);
done:
	free(dw[1]);
	free(dw[0]);
	free(w[1]);
	free(w[0]);
	free(dx);
	free(dy);
	free(y);
	free(x);
}

static void bench_conv(const char *label, struct conv_desc d, int want_dx, int ref_reps, int reps)
{
	struct tcase t = { .l = { .name = label, .type = NET_CONVOLUTION } };
	conv_out_size(&d);
	t.bl.d.conv = d;
	t.nx = (size_t)d.n * d.c_in * d.h_in * d.w_in;
	t.ny = (size_t)d.n * d.c_out * d.h_out * d.w_out;
	t.nw[0] = (size_t)d.c_out * (d.c_in / d.group) * d.kh * d.kw;
	t.nw[1] = (size_t)d.c_out;
	t.bl.n = d.n, t.bl.c = d.c_in, t.bl.inner = d.h_in * d.w_in, t.bl.count = (int64_t)t.ny;
	bench(label, &t, want_dx, ref_reps, reps);
}

static void run_bench(void)
{
	rng_state = 7;
	bench_conv("LeNet conv1 64x1x28x28 -> 20 k5",
		   (struct conv_desc){ .n = 64, .c_in = 1, .h_in = 28, .w_in = 28, .c_out = 20, .kh = 5, .kw = 5,
				       .sh = 1, .sw = 1, .dh = 1, .dw = 1, .group = 1, .bias = 1 },
		   0, 3, 50);
	bench_conv("LeNet conv2 64x20x12x12 -> 50 k5",
		   (struct conv_desc){ .n = 64, .c_in = 20, .h_in = 12, .w_in = 12, .c_out = 50, .kh = 5, .kw = 5,
				       .sh = 1, .sw = 1, .dh = 1, .dw = 1, .group = 1, .bias = 1 },
		   1, 2, 50);
	struct tcase t = { .l = { .name = "ip1", .type = NET_INNER_PRODUCT } };
	t.bl.d.ip = (struct ip_desc){ .n = 64, .k = 800, .m = 500, .bias = 1 };
	t.nx = 64 * 800, t.ny = 64 * 500, t.nw[0] = 500 * 800, t.nw[1] = 500;
	t.bl.n = 64, t.bl.c = 800, t.bl.inner = 1, t.bl.count = 64 * 500;
	bench("LeNet ip1 64x800 -> 500", &t, 1, 2, 50);
	bench_conv("AlexNet conv1 32x3x227x227 -> 96 k11 s4",
		   (struct conv_desc){ .n = 32, .c_in = 3, .h_in = 227, .w_in = 227, .c_out = 96, .kh = 11, .kw = 11,
				       .sh = 4, .sw = 4, .dh = 1, .dw = 1, .group = 1, .bias = 1 },
		   0, 1, 10);
	bench_conv("AlexNet conv2 32x96x27x27 -> 256 k5 p2 g2",
		   (struct conv_desc){ .n = 32, .c_in = 96, .h_in = 27, .w_in = 27, .c_out = 256, .kh = 5, .kw = 5,
				       .sh = 1, .sw = 1, .ph = 2, .pw = 2, .dh = 1, .dw = 1, .group = 2, .bias = 1 },
		   1, 1, 5);
	bench_conv("AlexNet conv3 32x256x13x13 -> 384 k3 p1",
		   (struct conv_desc){ .n = 32, .c_in = 256, .h_in = 13, .w_in = 13, .c_out = 384, .kh = 3, .kw = 3,
				       .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .group = 1, .bias = 1 },
		   1, 1, 5);
}

int main(int argc, char **argv)
{
	struct dd_err err = { 0 };
	if (backend_cpu_create(&be, &err) != DD_OK) {
		printf("FAIL backend_cpu_create: %s\n", err.msg);
		return 1;
	}
	RUN(test_conv);
	RUN(test_deconv);
	RUN(test_ip);
	RUN(test_pool);
	RUN(test_lrn);
	RUN(test_bn);
	RUN(test_eltwise);
	RUN(test_softmax);
	RUN(test_losses);
	RUN(test_crop);
	RUN(test_delegated);
	RUN(test_invalid);
	if (argc > 1 && strcmp(argv[1], "bench") == 0)
		run_bench();
	be->ops->destroy(be);
	return check_summary();
}
