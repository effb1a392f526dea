/* test_ref.c — the reference layers (networks/ref.c) checked two ways.
 *
 * 1. Finite differences, Caffe's GradientChecker: seeded random inputs and
 *    parameters, a fixed random R, loss = Σ out·R accumulated in double; every input
 *    and parameter element is moved by ±h (h = 1e-2) and the central difference is
 *    compared with the analytic gradient by |a - n| / max(|a|, |n|, 1) < tol.
 *    Kinks are kept away: ReLU skips inputs within 2h of 0; MAX pooling and MAX
 *    eltwise draw their inputs as a shuffled ladder of values 0.05 apart, so no ±h
 *    move changes a winner.  Every case also checks that backward ADDS (a second
 *    backward doubles the gradients) and that NULL gradient pointers are accepted.
 * 2. Hand-computed forward values: output sizes of Caffe's pooling rule, a 3x3
 *    convolution on a 4x4 input, a deconvolution's blocks, crops, overlaps and
 *    groups, pooling values and masks, LRN, BN statistics, softmax loss with
 *    ignore_label and Caffe's four normalisers, EuclideanLoss, Crop windows, top-k
 *    accuracy with ties and over spatial positions.
 * 3. The deconvolution is the convolution's transpose: <deconv(x), y> = <x, conv(y)>
 *    with the same weights. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>

#include "../../networks/ref.h"
#include "check.h"
#include "talloc.h"

/* ---- small helpers: a seeded generator and allocations freed per test ---- */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s;
}

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static float urand(float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0));
}

static float *frand(int64_t n, float lo, float hi)
{
	float *v = fvec(n);
	for (int64_t i = 0; i < n; i++)
		v[i] = urand(lo, hi);
	return v;
}

/* n values 0.05 apart around 0, in random order: no two within ±h of each other */
static float *fladder(int64_t n)
{
	float *v = fvec(n);
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)(0.05 * (double)(i - n / 2));
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1));
		float t = v[i];
		v[i] = v[j], v[j] = t;
	}
	return v;
}

static int near(double a, double b, double tol)
{
	return fabs(a - b) <= tol * fmax(1.0, fabs(b));
}

#define CHECK_NEAR(a, b, tol)                                                                  \
	do {                                                                                   \
		double a__ = (a), b__ = (b);                                                   \
		if (!near(a__, b__, tol)) {                                                    \
			fprintf(stderr, "  %s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, \
				a__, b__);                                                     \
			check_current_failed = 1;                                              \
		}                                                                              \
	} while (0)

/* ---- the gradient checker ---- */

#define GC_MAXB 6
struct gc {
	char name[96];
	void (*forward)(struct gc *g);  /* x[] → out */
	void (*backward)(struct gc *g); /* dout → ADD into dx[] (any may be NULL) */
	void *p;                        /* the case's own descriptor and scratch */
	int nb;
	float *x[GC_MAXB];  /* inputs and parameters, each checked element by element */
	int64_t n[GC_MAXB];
	float *dx[GC_MAXB]; /* their gradients, allocated by gc_check */
	float *out, *dout;  /* (n_out) */
	int64_t n_out;
	int (*skip)(struct gc *g, int b, int64_t i); /* near a kink: leave out */
	double tol;
};

static const float gc_step = 1e-2f;

static double gc_loss(struct gc *g, const float *r)
{
	g->forward(g);
	double l = 0.0;
	for (int64_t i = 0; i < g->n_out; i++)
		l += (double)g->out[i] * r[i];
	return l;
}

static void gc_check(struct gc *g)
{
	double tol = g->tol > 0 ? g->tol : 1e-3;
	float *r = frand(g->n_out, -1.0f, 1.0f);
	float *g1[GC_MAXB];
	g->dout = r;
	for (int b = 0; b < g->nb; b++) {
		g->dx[b] = fvec(g->n[b]);
		g1[b] = fvec(g->n[b]);
	}

	/* the analytic gradient, then a second backward must double it (it adds) */
	g->forward(g);
	g->backward(g);
	for (int b = 0; b < g->nb; b++)
		memcpy(g1[b], g->dx[b], (size_t)g->n[b] * sizeof(float));
	g->backward(g);
	int not_added = 0;
	for (int b = 0; b < g->nb; b++)
		for (int64_t i = 0; i < g->n[b]; i++)
			if (!near(g->dx[b][i], 2.0 * g1[b][i], 1e-5))
				not_added++;
	if (not_added)
		fprintf(stderr, "  %s: %d gradients not accumulated by a second backward\n", g->name, not_added);
	CHECK(not_added == 0);

	/* every gradient pointer NULL: must write nothing and not crash */
	float *keep[GC_MAXB];
	for (int b = 0; b < g->nb; b++)
		keep[b] = g->dx[b], g->dx[b] = NULL;
	g->backward(g);
	for (int b = 0; b < g->nb; b++)
		g->dx[b] = keep[b];

	/* central differences */
	double worst = 0.0;
	int bad = 0, checked = 0, skipped = 0;
	for (int b = 0; b < g->nb; b++)
		for (int64_t i = 0; i < g->n[b]; i++) {
			if (g->skip && g->skip(g, b, i)) {
				skipped++;
				continue;
			}
			float v = g->x[b][i], vp = v + gc_step, vm = v - gc_step;
			g->x[b][i] = vp;
			double lp = gc_loss(g, r);
			g->x[b][i] = vm;
			double lm = gc_loss(g, r);
			g->x[b][i] = v;
			double num = (lp - lm) / ((double)vp - (double)vm), ana = g1[b][i];
			double err = fabs(ana - num) / fmax(fmax(fabs(ana), fabs(num)), 1.0);
			if (err > worst)
				worst = err;
			if (err > tol && bad++ < 5)
				fprintf(stderr, "  %s: blob %d [%lld]: analytic %.7g, numeric %.7g\n", g->name, b,
					(long long)i, ana, num);
			checked++;
		}
	g->forward(g); /* leave the outputs as the unperturbed forward wrote them */
	printf("       %-58s %5d checked, %3d skipped, worst %.1e\n", g->name, checked, skipped, worst);
	if (bad)
		fprintf(stderr, "  %s: %d of %d gradients off by more than %g\n", g->name, bad, checked, tol);
	CHECK(bad == 0);
	CHECK(checked > 0);
}

/* ---- convolution ---- */

struct conv_case {
	struct conv_desc d;
};

static void conv_f(struct gc *g)
{
	struct conv_case *c = g->p;
	conv_forward(g->out, g->x[0], g->x[1], c->d.bias ? g->x[2] : NULL, &c->d);
}

static void conv_b(struct gc *g)
{
	struct conv_case *c = g->p;
	conv_backward(g->dx[0], g->dx[1], c->d.bias ? g->dx[2] : NULL, g->dout, g->x[0], g->x[1], &c->d);
}

static void deconv_f(struct gc *g);
static void deconv_b(struct gc *g);
static void deconv_size(struct conv_desc *d);

/* A convolution's (de 0) or a deconvolution's (de 1) gradients by finite differences. */
static void check_conv_or_deconv(int de, int n, int cin, int h, int w, int cout, int kh, int kw, int sh, int sw,
				 int ph, int pw, int dh, int dw, int group, int bias)
{
	struct conv_case c = { { .n = n, .c_in = cin, .h_in = h, .w_in = w, .c_out = cout, .kh = kh,
				 .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw, .dh = dh, .dw = dw,
				 .group = group, .bias = bias } };
	if (de)
		deconv_size(&c.d);
	else
		conv_out_size(&c.d);
	struct gc g = { .forward = de ? deconv_f : conv_f, .backward = de ? deconv_b : conv_b, .p = &c };
	snprintf(g.name, sizeof g.name, "%s %dx%dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d%s", de ? "deconv" : "conv",
		 n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, group, bias ? " bias" : "");
	g.nb = bias ? 3 : 2;
	g.n[0] = (int64_t)n * cin * h * w;                   /* (N, C_in, H, W) */
	g.n[1] = (int64_t)cout * (cin / group) * kh * kw;    /* conv (C_out, C_in/group, kh, kw); deconv
							      * (C_in, C_out/group, kh, kw): as many */
	g.n[2] = cout;                                       /* (C_out) */
	for (int b = 0; b < g.nb; b++)
		g.x[b] = frand(g.n[b], -1.0f, 1.0f);
	g.n_out = (int64_t)n * cout * c.d.h_out * c.d.w_out; /* (N, C_out, H_out, W_out) */
	g.out = fvec(g.n_out);
	gc_check(&g);
}
#define check_conv(...) check_conv_or_deconv(0, __VA_ARGS__)
#define check_deconv(...) check_conv_or_deconv(1, __VA_ARGS__)

static void test_conv_sizes(void)
{
	struct conv_desc d = { .n = 1, .c_in = 3, .h_in = 227, .w_in = 227, .c_out = 96, .kh = 11, .kw = 11,
			       .sh = 4, .sw = 4, .ph = 0, .pw = 0, .dh = 1, .dw = 1, .group = 1 };
	conv_out_size(&d); /* AlexNet conv1 */
	CHECK_EQ_INT(d.h_out, 55);
	CHECK_EQ_INT(d.w_out, 55);
	d = (struct conv_desc){ .h_in = 7, .w_in = 9, .kh = 3, .kw = 2, .sh = 2, .sw = 3, .ph = 1, .pw = 0,
				.dh = 2, .dw = 3, .group = 1 };
	conv_out_size(&d); /* H: (7+2-5)/2+1 = 3;  W: (9+0-4)/3+1 = 2 */
	CHECK_EQ_INT(d.h_out, 3);
	CHECK_EQ_INT(d.w_out, 2);
}

static void test_conv_values(void)
{
	float in[16], w[9] = { 0 }, b = 1.0f, out[4];
	for (int i = 0; i < 16; i++)
		in[i] = (float)i; /* (1, 1, 4, 4): rows 0..3, 4..7, 8..11, 12..15 */
	struct conv_desc d = { .n = 1, .c_in = 1, .h_in = 4, .w_in = 4, .c_out = 1, .kh = 3, .kw = 3, .sh = 1,
			       .sw = 1, .dh = 1, .dw = 1, .group = 1, .bias = 1 };
	conv_out_size(&d);
	CHECK_EQ_INT(d.h_out, 2);
	for (int i = 0; i < 9; i++)
		w[i] = 1.0f;
	conv_forward(out, in, w, &b, &d); /* window sums + 1 */
	CHECK_NEAR(out[0], 46, 1e-6);
	CHECK_NEAR(out[1], 55, 1e-6);
	CHECK_NEAR(out[2], 82, 1e-6);
	CHECK_NEAR(out[3], 91, 1e-6);
	/* cross-correlation, not convolution: a lone top-left tap reads the top-left pixel */
	memset(w, 0, sizeof w);
	w[0] = 1.0f;
	conv_forward(out, in, w, NULL, &d);
	CHECK_NEAR(out[0], 0, 1e-6);
	CHECK_NEAR(out[1], 1, 1e-6);
	CHECK_NEAR(out[2], 4, 1e-6);
	CHECK_NEAR(out[3], 5, 1e-6);
	/* dilation 2, pad 1: taps at -1, 1, 3 from the corner */
	for (int i = 0; i < 9; i++)
		w[i] = 1.0f;
	d.dh = d.dw = 2, d.ph = d.pw = 1;
	conv_out_size(&d);
	CHECK_EQ_INT(d.h_out, 2);
	CHECK_EQ_INT(d.w_out, 2);
	conv_forward(out, in, w, NULL, &d);
	CHECK_NEAR(out[0], 5 + 7 + 13 + 15, 1e-6);
	CHECK_NEAR(out[1], 4 + 6 + 12 + 14, 1e-6);
	CHECK_NEAR(out[2], 1 + 3 + 9 + 11, 1e-6);
	CHECK_NEAR(out[3], 0 + 2 + 8 + 10, 1e-6);
	/* group 2 with 1x1 kernels: each output sees only its own input channel */
	float in2[2] = { 5, 7 }, w2[2] = { 2, 3 }, out2[2];
	struct conv_desc g = { .n = 1, .c_in = 2, .h_in = 1, .w_in = 1, .c_out = 2, .kh = 1, .kw = 1, .sh = 1,
			       .sw = 1, .dh = 1, .dw = 1, .group = 2 };
	conv_out_size(&g);
	conv_forward(out2, in2, w2, NULL, &g);
	CHECK_NEAR(out2[0], 10, 1e-6);
	CHECK_NEAR(out2[1], 21, 1e-6);
}

static void test_conv_grad(void)
{
	rng_seed(1);
	/*         n cin h  w cout kh kw sh sw ph pw dh dw g bias */
	check_conv(2, 3, 5, 5, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1);
	check_conv(2, 3, 5, 5, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0);
	check_conv(1, 2, 7, 7, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);  /* stride 2, pad 1 */
	check_conv(2, 3, 4, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1);  /* 1x1 */
	check_conv(1, 2, 7, 6, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1);  /* 5x5, pad 2 */
	check_conv(2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1);  /* group 2 */
	check_conv(1, 2, 7, 7, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1);  /* dilation 2 */
	check_conv(1, 2, 8, 7, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1);  /* non-square k, s, p */
	check_conv(2, 4, 9, 8, 4, 2, 3, 3, 2, 0, 2, 2, 1, 2, 0);  /* everything at once */
	tfree_all();
}

/* ---- deconvolution ---- */

static void deconv_f(struct gc *g)
{
	struct conv_case *c = g->p;
	deconv_forward(g->out, g->x[0], g->x[1], c->d.bias ? g->x[2] : NULL, &c->d);
}

static void deconv_b(struct gc *g)
{
	struct conv_case *c = g->p;
	deconv_backward(g->dx[0], g->dx[1], c->d.bias ? g->dx[2] : NULL, g->dout, g->x[0], g->x[1], &c->d);
}

/* Caffe's Deconvolution output size: (in - 1)·s - 2p + d·(k - 1) + 1 */
static void deconv_size(struct conv_desc *d)
{
	d->h_out = (d->h_in - 1) * d->sh - 2 * d->ph + d->dh * (d->kh - 1) + 1;
	d->w_out = (d->w_in - 1) * d->sw - 2 * d->pw + d->dw * (d->kw - 1) + 1;
}

static void test_deconv_values(void)
{
	/* stride 2, kernel 2: each input pixel paints its own 2x2 block, times the kernel */
	float in[4] = { 1, 2, 3, 4 }, w[4] = { 1, 10, 100, 1000 }, b = 0.5f, out[16];
	struct conv_desc d = { .n = 1, .c_in = 1, .h_in = 2, .w_in = 2, .c_out = 1, .kh = 2, .kw = 2, .sh = 2,
			       .sw = 2, .dh = 1, .dw = 1, .group = 1, .bias = 1 };
	deconv_size(&d);
	CHECK_EQ_INT(d.h_out, 4);
	CHECK_EQ_INT(d.w_out, 4);
	deconv_forward(out, in, w, &b, &d);
	static const float want[16] = { 1, 10, 2, 20, 100, 1000, 200, 2000, 3, 30, 4, 40, 300, 3000, 400, 4000 };
	for (int i = 0; i < 16; i++)
		CHECK_NEAR(out[i], want[i] + 0.5, 1e-6);
	/* pad 1 crops one row and column off each side of the 4x4 */
	d.ph = d.pw = 1;
	deconv_size(&d);
	CHECK_EQ_INT(d.h_out, 2);
	deconv_forward(out, in, w, NULL, &d);
	CHECK_NEAR(out[0], 1000, 1e-6);
	CHECK_NEAR(out[1], 200, 1e-6);
	CHECK_NEAR(out[2], 30, 1e-6);
	CHECK_NEAR(out[3], 4, 1e-6);
	/* overlapping windows (k 3, s 1) add: a 1x1 input of 2 is the kernel times 2 */
	float w9[9], o9[9], two = 2;
	for (int i = 0; i < 9; i++)
		w9[i] = (float)i;
	d = (struct conv_desc){ .n = 1, .c_in = 1, .h_in = 1, .w_in = 1, .c_out = 1, .kh = 3, .kw = 3, .sh = 1,
				.sw = 1, .dh = 1, .dw = 1, .group = 1 };
	deconv_size(&d);
	CHECK_EQ_INT(d.h_out, 3);
	deconv_forward(o9, &two, w9, NULL, &d);
	for (int i = 0; i < 9; i++)
		CHECK_NEAR(o9[i], 2.0 * i, 1e-6);
	/* group 2, two outputs per group: w (C_in 2, C_out/group 2, 1, 1) */
	float in2[2] = { 5, 7 }, w2[4] = { 1, 2, 3, 4 }, out2[4];
	d = (struct conv_desc){ .n = 1, .c_in = 2, .h_in = 1, .w_in = 1, .c_out = 4, .kh = 1, .kw = 1, .sh = 1,
				.sw = 1, .dh = 1, .dw = 1, .group = 2 };
	deconv_size(&d);
	deconv_forward(out2, in2, w2, NULL, &d);
	CHECK_NEAR(out2[0], 5, 1e-6);
	CHECK_NEAR(out2[1], 10, 1e-6);
	CHECK_NEAR(out2[2], 21, 1e-6);
	CHECK_NEAR(out2[3], 28, 1e-6);
}

/* A deconvolution is the transpose of the convolution with the same weights from
 * its top's shape to its bottom's: <deconv(x), y> = <x, conv(y)> for every x, y. */
static void check_transpose(int cin, int h, int w, int cout, int k, int s, int p, int dil, int group)
{
	struct conv_desc d = { .n = 2, .c_in = cin, .h_in = h, .w_in = w, .c_out = cout, .kh = k, .kw = k,
			       .sh = s, .sw = s, .ph = p, .pw = p, .dh = dil, .dw = dil, .group = group };
	deconv_size(&d);
	struct conv_desc c = { .n = 2, .c_in = cout, .h_in = d.h_out, .w_in = d.w_out, .c_out = cin, .kh = k,
			       .kw = k, .sh = s, .sw = s, .ph = p, .pw = p, .dh = dil, .dw = dil, .group = group };
	conv_out_size(&c);
	CHECK_EQ_INT(c.h_out, h);
	CHECK_EQ_INT(c.w_out, w);
	int64_t nx = 2LL * cin * h * w, ny = 2LL * cout * d.h_out * d.w_out, nw = (int64_t)cin * (cout / group) * k * k;
	float *x = frand(nx, -1, 1), *y = frand(ny, -1, 1), *wt = frand(nw, -1, 1);
	float *dx = fvec(ny), *cy = fvec(nx);
	deconv_forward(dx, x, wt, NULL, &d);
	conv_forward(cy, y, wt, NULL, &c);
	double a = 0, b = 0;
	for (int64_t i = 0; i < ny; i++)
		a += (double)dx[i] * y[i];
	for (int64_t i = 0; i < nx; i++)
		b += (double)x[i] * cy[i];
	CHECK_NEAR(a, b, 1e-5);
}

static void test_deconv_grad(void)
{
	rng_seed(3);
	check_transpose(3, 4, 5, 4, 3, 2, 1, 1, 1);
	check_transpose(4, 3, 3, 6, 4, 2, 1, 1, 2);
	check_transpose(2, 3, 4, 2, 3, 3, 0, 2, 2);
	/*           n cin h  w cout kh kw sh sw ph pw dh dw g bias */
	check_deconv(2, 3, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1);
	check_deconv(2, 3, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0);
	check_deconv(1, 2, 3, 4, 3, 4, 4, 2, 2, 1, 1, 1, 1, 1, 0);  /* FCN's upsampling: k 4, s 2, p 1 */
	check_deconv(2, 4, 3, 3, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1);  /* group 2, stride 2, pad 1 */
	check_deconv(1, 4, 3, 3, 4, 4, 4, 2, 2, 1, 1, 1, 1, 4, 0);  /* one group per channel */
	check_deconv(1, 2, 3, 3, 2, 3, 3, 1, 1, 1, 1, 2, 2, 1, 1);  /* dilation 2 */
	check_deconv(2, 2, 3, 4, 3, 3, 2, 2, 3, 1, 0, 1, 1, 1, 1);  /* non-square k, s, p */
	check_deconv(1, 4, 2, 3, 2, 2, 3, 3, 2, 0, 1, 2, 1, 2, 0);  /* everything at once */
	tfree_all();
}

/* ---- inner product ---- */

struct ip_case {
	struct ip_desc d;
};

static void ip_f(struct gc *g)
{
	struct ip_case *c = g->p;
	ip_forward(g->out, g->x[0], g->x[1], c->d.bias ? g->x[2] : NULL, &c->d);
}

static void ip_b(struct gc *g)
{
	struct ip_case *c = g->p;
	ip_backward(g->dx[0], g->dx[1], c->d.bias ? g->dx[2] : NULL, g->dout, g->x[0], g->x[1], &c->d);
}

static void check_ip(int n, int k, int m, int bias)
{
	struct ip_case c = { { .n = n, .k = k, .m = m, .bias = bias } };
	struct gc g = { .forward = ip_f, .backward = ip_b, .p = &c, .nb = bias ? 3 : 2 };
	snprintf(g.name, sizeof g.name, "ip n%d k%d m%d%s", n, k, m, bias ? " bias" : "");
	g.n[0] = (int64_t)n * k; /* (N, K) */
	g.n[1] = (int64_t)m * k; /* (M, K) */
	g.n[2] = m;              /* (M) */
	for (int b = 0; b < g.nb; b++)
		g.x[b] = frand(g.n[b], -1.0f, 1.0f);
	g.n_out = (int64_t)n * m; /* (N, M) */
	g.out = fvec(g.n_out);
	gc_check(&g);
}

static void test_ip(void)
{
	float in[3] = { 1, 2, 3 }, w[6] = { 1, 0, -1, 2, 2, 2 }, b[2] = { 0.5f, -1 }, out[2];
	struct ip_desc d = { .n = 1, .k = 3, .m = 2, .bias = 1 };
	ip_forward(out, in, w, b, &d);
	CHECK_NEAR(out[0], -1.5, 1e-6);
	CHECK_NEAR(out[1], 11, 1e-6);
	rng_seed(2);
	check_ip(3, 7, 5, 1);
	check_ip(2, 12, 4, 0);
	tfree_all();
}

/* ---- pooling ---- */

struct pool_case {
	struct pool_desc d;
	int32_t *mask;
};

static void pool_f(struct gc *g)
{
	struct pool_case *c = g->p;
	pool_forward(g->out, c->mask, g->x[0], &c->d);
}

static void pool_b(struct gc *g)
{
	struct pool_case *c = g->p;
	pool_backward(g->dx[0], g->dout, c->mask, &c->d);
}

static void check_pool(int n, int ch, int h, int w, int kh, int kw, int sh, int sw, int ph, int pw,
		       enum pool_method m, int global, int want_h, int want_w)
{
	struct pool_case c = { .d = { .n = n, .c = ch, .h_in = h, .w_in = w, .kh = kh, .kw = kw, .sh = sh,
				 .sw = sw, .ph = ph, .pw = pw, .method = m, .global = global } };
	pool_out_size(&c.d);
	CHECK_EQ_INT(c.d.h_out, want_h);
	CHECK_EQ_INT(c.d.w_out, want_w);
	struct gc g = { .forward = pool_f, .backward = pool_b, .p = &c, .nb = 1 };
	snprintf(g.name, sizeof g.name, "pool %s %dx%dx%dx%d k%dx%d s%dx%d p%dx%d%s -> %dx%d",
		 m == POOL_MAX ? "MAX" : "AVE", n, ch, h, w, kh, kw, sh, sw, ph, pw, global ? " global" : "",
		 c.d.h_out, c.d.w_out);
	g.n[0] = (int64_t)n * ch * h * w; /* (N, C, H, W) */
	g.x[0] = m == POOL_MAX ? fladder(g.n[0]) : frand(g.n[0], -1.0f, 1.0f);
	g.n_out = (int64_t)n * ch * c.d.h_out * c.d.w_out; /* (N, C, H_out, W_out) */
	g.out = fvec(g.n_out);
	c.mask = talloc((size_t)g.n_out * sizeof(int32_t));
	gc_check(&g);
}

static int pool_size(int h, int k, int s, int p)
{
	struct pool_desc d = { .n = 1, .c = 1, .h_in = h, .w_in = h, .kh = k, .kw = k, .sh = s, .sw = s,
			       .ph = p, .pw = p };
	pool_out_size(&d);
	return d.h_out;
}

static void test_pool_sizes(void)
{
	CHECK_EQ_INT(pool_size(28, 2, 2, 0), 14);  /* LeNet */
	CHECK_EQ_INT(pool_size(13, 3, 2, 0), 6);   /* AlexNet pool5 */
	CHECK_EQ_INT(pool_size(55, 3, 2, 0), 27);  /* AlexNet pool1 */
	CHECK_EQ_INT(pool_size(5, 3, 2, 1), 3);
	CHECK_EQ_INT(pool_size(6, 3, 2, 0), 3);    /* ceil adds a window (floor: 2) */
	CHECK_EQ_INT(pool_size(112, 3, 2, 0), 56); /* GoogLeNet pool1 (floor: 55) */
	CHECK_EQ_INT(pool_size(5, 2, 2, 1), 3);    /* ceil gives 4, the last starts in the pad: 3 */
	CHECK_EQ_INT(pool_size(4, 3, 2, 1), 3);    /* last window starts inside: kept */
	CHECK_EQ_INT(pool_size(5, 1, 3, 0), 3);    /* no pad: Caffe keeps an empty window */
	struct pool_desc d = { .n = 1, .c = 1, .h_in = 6, .w_in = 5, .kh = 3, .kw = 2, .sh = 2, .sw = 2,
			       .ph = 1, .pw = 1 };
	pool_out_size(&d); /* H: ceil(5/2)+1 = 4 kept;  W: ceil(5/2)+1 = 4, 3·2 ≥ 5+1 → 3 */
	CHECK_EQ_INT(d.h_out, 4);
	CHECK_EQ_INT(d.w_out, 3);
	d = (struct pool_desc){ .n = 1, .c = 1, .h_in = 7, .w_in = 5, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
				.ph = 1, .pw = 1, .global = 1 };
	pool_out_size(&d);
	CHECK_EQ_INT(d.h_out, 1);
	CHECK_EQ_INT(d.w_out, 1);
	CHECK_EQ_INT(d.kh, 7);
	CHECK_EQ_INT(d.kw, 5);
	CHECK_EQ_INT(d.ph, 0);
	CHECK_EQ_INT(d.sh, 1);
}

static void test_pool_values(void)
{
	/* MAX 4x4 k2 s2: values and the flat indices of the maxima */
	float in[16] = { 1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 9, 2, 7, 1, 3, 3 }, out[16], din[16] = { 0 };
	int32_t mask[16];
	struct pool_desc d = { .n = 1, .c = 1, .h_in = 4, .w_in = 4, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
			       .method = POOL_MAX };
	pool_out_size(&d);
	pool_forward(out, mask, in, &d);
	CHECK_NEAR(out[0], 5, 0);
	CHECK_NEAR(out[1], 8, 0);
	CHECK_NEAR(out[2], 7, 0);
	CHECK_NEAR(out[3], 9, 0);
	CHECK_EQ_INT(mask[0], 1);
	CHECK_EQ_INT(mask[1], 6);
	CHECK_EQ_INT(mask[2], 12);
	CHECK_EQ_INT(mask[3], 10);
	float dout[4] = { 1, 2, 3, 4 };
	pool_backward(din, dout, mask, &d);
	CHECK_NEAR(din[1], 1, 0);
	CHECK_NEAR(din[6], 2, 0);
	CHECK_NEAR(din[12], 3, 0);
	CHECK_NEAR(din[10], 4, 0);
	CHECK_NEAR(din[0] + din[2] + din[15], 0, 0);

	/* overlapping windows that share one maximum: its gradient is the sum; a tie
	 * goes to the first pixel in row order */
	float in3[9] = { 0, 1, 0, 1, 5, 1, 0, 1, 0 }, din3[9] = { 0 }, dout3[4] = { 1, 2, 3, 4 };
	d = (struct pool_desc){ .n = 1, .c = 1, .h_in = 3, .w_in = 3, .kh = 2, .kw = 2, .sh = 1, .sw = 1,
				.method = POOL_MAX };
	pool_out_size(&d);
	pool_forward(out, mask, in3, &d);
	pool_backward(din3, dout3, mask, &d);
	CHECK_NEAR(din3[4], 10, 0);
	float tie[4] = { 2, 2, 2, 2 };
	d = (struct pool_desc){ .n = 1, .c = 1, .h_in = 2, .w_in = 2, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
				.method = POOL_MAX };
	pool_out_size(&d);
	pool_forward(out, mask, tie, &d);
	CHECK_EQ_INT(mask[0], 0);

	/* AVE 2x2 ones k2 s1 p1 → 3x3: padding counts in the divisor */
	float ones[16];
	for (int i = 0; i < 16; i++)
		ones[i] = 1.0f;
	d = (struct pool_desc){ .n = 1, .c = 1, .h_in = 2, .w_in = 2, .kh = 2, .kw = 2, .sh = 1, .sw = 1,
				.ph = 1, .pw = 1, .method = POOL_AVE };
	pool_out_size(&d);
	CHECK_EQ_INT(d.h_out, 3);
	pool_forward(out, NULL, ones, &d);
	const float want[9] = { 0.25f, 0.5f, 0.25f, 0.5f, 1, 0.5f, 0.25f, 0.5f, 0.25f };
	for (int i = 0; i < 9; i++)
		CHECK_NEAR(out[i], want[i], 1e-7);

	/* AVE 4x4 ones k3 s2 p1 → 3x3: the last window overhangs the pad, which does
	 * not count: [-1,2)→9 cells 4 real; [3,6) clipped to [3,5)→ 2 rows, 1 real */
	d = (struct pool_desc){ .n = 1, .c = 1, .h_in = 4, .w_in = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
				.ph = 1, .pw = 1, .method = POOL_AVE };
	pool_out_size(&d);
	CHECK_EQ_INT(d.h_out, 3);
	pool_forward(out, NULL, ones, &d);
	CHECK_NEAR(out[0], 4.0 / 9, 1e-6);
	CHECK_NEAR(out[2], 2.0 / 6, 1e-6);
	CHECK_NEAR(out[4], 1, 1e-6);
	CHECK_NEAR(out[8], 1.0 / 4, 1e-6);
	float gin[16] = { 0 }, gout[9] = { 0 };
	gout[8] = 1.0f; /* the corner window spreads 1/4 to its single real pixel */
	pool_backward(gin, gout, NULL, &d);
	CHECK_NEAR(gin[15], 0.25, 1e-7);
	CHECK_NEAR(gin[14], 0, 0);

	/* kernel < stride without pad: Caffe keeps a window past the input; it is 0 */
	float row[5] = { 1, 2, 3, 4, 5 }, o3[3], g5[5] = { 0 }, d3[3] = { 1, 1, 1 };
	int32_t m3[3];
	d = (struct pool_desc){ .n = 1, .c = 1, .h_in = 1, .w_in = 5, .kh = 1, .kw = 1, .sh = 1, .sw = 3,
				.method = POOL_MAX };
	pool_out_size(&d);
	CHECK_EQ_INT(d.w_out, 3);
	pool_forward(o3, m3, row, &d);
	CHECK_NEAR(o3[0], 1, 0);
	CHECK_NEAR(o3[1], 4, 0);
	CHECK_NEAR(o3[2], 0, 0);
	CHECK_EQ_INT(m3[2], -1);
	pool_backward(g5, d3, m3, &d);
	CHECK_NEAR(g5[0] + g5[3], 2, 0);
	d.method = POOL_AVE;
	pool_forward(o3, NULL, row, &d);
	CHECK_NEAR(o3[2], 0, 0);
	CHECK(!isnan(o3[2]));
}

static void test_pool_grad(void)
{
	rng_seed(3);
	/*         n c  h  w kh kw sh sw ph pw method  glob  want */
	check_pool(2, 2, 6, 6, 2, 2, 2, 2, 0, 0, POOL_MAX, 0, 3, 3);
	check_pool(2, 2, 6, 6, 2, 2, 2, 2, 0, 0, POOL_AVE, 0, 3, 3);
	check_pool(1, 3, 7, 7, 3, 3, 2, 2, 0, 0, POOL_MAX, 0, 3, 3); /* exact: (7-3)/2+1 */
	check_pool(1, 3, 6, 6, 3, 3, 2, 2, 0, 0, POOL_MAX, 0, 3, 3); /* ceil adds a window */
	check_pool(1, 3, 6, 6, 3, 3, 2, 2, 0, 0, POOL_AVE, 0, 3, 3);
	check_pool(1, 2, 5, 5, 3, 3, 2, 2, 1, 1, POOL_MAX, 0, 3, 3); /* pad */
	check_pool(1, 2, 5, 5, 3, 3, 2, 2, 1, 1, POOL_AVE, 0, 3, 3);
	check_pool(1, 2, 5, 5, 2, 2, 2, 2, 1, 1, POOL_MAX, 0, 3, 3); /* correction drops one */
	check_pool(1, 2, 5, 5, 2, 2, 2, 2, 1, 1, POOL_AVE, 0, 3, 3);
	check_pool(2, 2, 5, 5, 3, 3, 1, 1, 1, 1, POOL_MAX, 0, 5, 5); /* overlapping, stride 1 */
	check_pool(1, 2, 6, 5, 3, 2, 2, 2, 1, 1, POOL_MAX, 0, 4, 3); /* non-square */
	check_pool(1, 2, 6, 5, 3, 2, 2, 2, 1, 1, POOL_AVE, 0, 4, 3);
	check_pool(2, 3, 4, 5, 0, 0, 0, 0, 0, 0, POOL_MAX, 1, 1, 1); /* global */
	check_pool(2, 3, 4, 5, 0, 0, 0, 0, 0, 0, POOL_AVE, 1, 1, 1);
	tfree_all();
}

/* ---- element-wise activations ---- */

struct act_case {
	int kind; /* 0 relu, 1 sigmoid, 2 tanh, 3 power */
	float slope, power, scale, shift;
};

static void act_f(struct gc *g)
{
	struct act_case *c = g->p;
	switch (c->kind) {
	case 0: relu_forward(g->out, g->x[0], g->n_out, c->slope); break;
	case 1: sigmoid_forward(g->out, g->x[0], g->n_out); break;
	case 2: tanh_forward(g->out, g->x[0], g->n_out); break;
	default: power_forward(g->out, g->x[0], g->n_out, c->power, c->scale, c->shift); break;
	}
}

static void act_b(struct gc *g)
{
	struct act_case *c = g->p;
	switch (c->kind) {
	case 0: relu_backward(g->dx[0], g->dout, g->x[0], g->n_out, c->slope); break;
	case 1: sigmoid_backward(g->dx[0], g->dout, g->out, g->n_out); break;
	case 2: tanh_backward(g->dx[0], g->dout, g->out, g->n_out); break;
	default: power_backward(g->dx[0], g->dout, g->x[0], g->n_out, c->power, c->scale, c->shift); break;
	}
}

static int relu_kink(struct gc *g, int b, int64_t i)
{
	return fabsf(g->x[b][i]) < 2 * gc_step;
}

static void check_act(const char *name, struct act_case c, float lo, float hi)
{
	struct gc g = { .forward = act_f, .backward = act_b, .p = &c, .nb = 1, .n_out = 60 };
	snprintf(g.name, sizeof g.name, "%s", name);
	g.n[0] = g.n_out;
	g.x[0] = frand(g.n[0], lo, hi);
	g.out = fvec(g.n_out);
	if (c.kind == 0)
		g.skip = relu_kink;
	gc_check(&g);
}

static void test_activations(void)
{
	float in[4] = { -2, -0.5f, 0, 3 }, out[4], din[4] = { 0 }, one[4] = { 1, 1, 1, 1 };
	relu_forward(out, in, 4, 0.0f);
	CHECK(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == 3);
	relu_forward(out, in, 4, 0.1f);
	CHECK_NEAR(out[0], -0.2, 1e-7);
	relu_backward(din, one, in, 4, 0.1f);
	CHECK_NEAR(din[2], 0.1, 1e-7); /* Caffe: the slope at exactly 0 */
	CHECK_NEAR(din[3], 1, 0);
	sigmoid_forward(out, in, 4);
	CHECK_NEAR(out[2], 0.5, 1e-7);
	CHECK_NEAR(out[3], 1 / (1 + exp(-3.0)), 1e-6);
	tanh_forward(out, in, 4);
	CHECK_NEAR(out[0], tanh(-2.0), 1e-6);

	rng_seed(4);
	check_act("relu slope 0", (struct act_case){ 0, 0.0f, 0, 0, 0 }, -1, 1);
	check_act("relu slope 0.1", (struct act_case){ 0, 0.1f, 0, 0, 0 }, -1, 1);
	check_act("sigmoid", (struct act_case){ 1, 0, 0, 0, 0 }, -4, 4);
	check_act("tanh", (struct act_case){ 2, 0, 0, 0, 0 }, -2, 2);
	tfree_all();
}

static void test_power(void)
{
	float in[3] = { -1, 0.5f, 2 }, out[3], din[3] = { 0 }, one[3] = { 1, 1, 1 };
	power_forward(out, in, 3, 2.0f, 3.0f, 1.0f); /* (1 + 3x)² */
	CHECK_NEAR(out[0], 4, 1e-6);
	CHECK_NEAR(out[1], 6.25, 1e-6);
	CHECK_NEAR(out[2], 49, 1e-6);
	power_backward(din, one, in, 3, 2.0f, 3.0f, 1.0f); /* 6(1 + 3x) */
	CHECK_NEAR(din[0], -12, 1e-6);
	CHECK_NEAR(din[2], 42, 1e-6);
	power_forward(out, in, 3, 0.0f, 3.0f, 5.0f); /* power 0: 1 */
	CHECK(out[0] == 1 && out[1] == 1 && out[2] == 1);
	power_forward(out, in, 3, 3.0f, 0.0f, 2.0f); /* scale 0: shift^power */
	CHECK_NEAR(out[1], 8, 1e-6);
	memset(din, 0, sizeof din);
	power_backward(din, one, in, 3, 3.0f, 0.0f, 2.0f);
	CHECK(din[0] == 0 && din[1] == 0 && din[2] == 0);
	power_forward(out, in, 3, 1.0f, -2.0f, 1.0f); /* power 1: affine */
	CHECK_NEAR(out[2], -3, 1e-6);
	power_forward(out, in, 3, 0.5f, 1.0f, 2.0f);
	CHECK_NEAR(out[2], 2, 1e-6);

	rng_seed(5);
	/*                                                 power scale shift   input range */
	check_act("power 2 scale 1.5 shift 0.5", (struct act_case){ 3, 0, 2.0f, 1.5f, 0.5f }, -1, 1);
	check_act("power 3 scale -0.7 shift 0.2", (struct act_case){ 3, 0, 3.0f, -0.7f, 0.2f }, -1, 1);
	check_act("power 0.5 scale 1 shift 2", (struct act_case){ 3, 0, 0.5f, 1.0f, 2.0f }, -1, 1);
	check_act("power -1.5 scale 0.5 shift 2", (struct act_case){ 3, 0, -1.5f, 0.5f, 2.0f }, -1, 1);
	check_act("power 2.5 scale 2 shift 0 (x > 0)", (struct act_case){ 3, 0, 2.5f, 2.0f, 0.0f }, 0.2f, 1);
	check_act("power 1 scale -2 shift 0.3", (struct act_case){ 3, 0, 1.0f, -2.0f, 0.3f }, -1, 1);
	check_act("power 0 scale 1 shift 1 (constant)", (struct act_case){ 3, 0, 0.0f, 1.0f, 1.0f }, -1, 1);
	check_act("power 2 scale 0 shift 3 (constant)", (struct act_case){ 3, 0, 2.0f, 0.0f, 3.0f }, -1, 1);
	tfree_all();
}

/* ---- dropout ---- */

struct drop_case {
	uint8_t *mask;
	float ratio;
	uint64_t seed;
};

static void drop_f(struct gc *g)
{
	struct drop_case *c = g->p;
	uint64_t rng = c->seed; /* the same mask on every call */
	dropout_forward(g->out, c->mask, g->x[0], g->n_out, c->ratio, 1, &rng);
}

static void drop_b(struct gc *g)
{
	struct drop_case *c = g->p;
	dropout_backward(g->dx[0], g->dout, c->mask, g->n_out, c->ratio);
}

static void test_dropout(void)
{
	enum { N = 10000 };
	float *in = fvec(N), *out = fvec(N), *din = fvec(N), *one = fvec(N);
	uint8_t *mask = talloc(N);
	for (int i = 0; i < N; i++)
		in[i] = 1.0f + (float)(i % 7), one[i] = 1.0f;
	uint64_t rng = 42;
	dropout_forward(out, mask, in, N, 0.3f, 1, &rng);
	int kept = 0, consistent = 1;
	for (int i = 0; i < N; i++) {
		kept += mask[i];
		float want = mask[i] ? in[i] / 0.7f : 0.0f;
		if (!near(out[i], want, 1e-6))
			consistent = 0;
	}
	CHECK(consistent);
	CHECK(kept > 6700 && kept < 7300); /* 7000 ± 6.5σ */
	uint64_t rng2 = 42;                 /* the same seed, the same mask */
	dropout_forward(din, mask, in, N, 0.3f, 1, &rng2);
	CHECK(memcmp(din, out, N * sizeof(float)) == 0);

	/* test phase: identity, and the mask becomes all ones */
	dropout_forward(out, mask, in, N, 0.3f, 0, &rng);
	CHECK(memcmp(out, in, N * sizeof(float)) == 0);
	int ones = 0;
	for (int i = 0; i < N; i++)
		ones += mask[i];
	CHECK_EQ_INT(ones, N);
	memset(din, 0, N * sizeof(float));
	dropout_backward(din, one, NULL, N, 0.3f);
	CHECK(din[0] == 1.0f && din[N - 1] == 1.0f);
	dropout_forward(out, NULL, in, N, 0.3f, 0, NULL); /* test phase needs no mask, no rng */
	CHECK(out[5] == in[5]);

	rng_seed(6);
	struct drop_case c = { .ratio = 0.3f, .seed = 7 };
	struct gc g = { .forward = drop_f, .backward = drop_b, .p = &c, .nb = 1, .n_out = 80 };
	snprintf(g.name, sizeof g.name, "dropout 0.3 (fixed mask)");
	c.mask = talloc(80);
	g.n[0] = 80;
	g.x[0] = frand(80, -1, 1);
	g.out = fvec(80);
	gc_check(&g);
	tfree_all();
}

/* ---- LRN ---- */

struct lrn_case {
	struct lrn_desc d;
	float *scale;
};

static void lrn_f(struct gc *g)
{
	struct lrn_case *c = g->p;
	lrn_forward(g->out, c->scale, g->x[0], &c->d);
}

static void lrn_b(struct gc *g)
{
	struct lrn_case *c = g->p;
	lrn_backward(g->dx[0], g->dout, g->out, g->x[0], c->scale, &c->d);
}

static void check_lrn(int n, int ch, int h, int w, int size, float alpha, float beta, float k, float range)
{
	struct lrn_case c = { .d = { .n = n, .c = ch, .h = h, .w = w, .size = size, .alpha = alpha, .beta = beta,
				.k = k } };
	struct gc g = { .forward = lrn_f, .backward = lrn_b, .p = &c, .nb = 1 };
	snprintf(g.name, sizeof g.name, "lrn %dx%dx%dx%d size %d alpha %g beta %g k %g", n, ch, h, w, size,
		 alpha, beta, k);
	g.n[0] = g.n_out = (int64_t)n * ch * h * w; /* (N, C, H, W) */
	g.x[0] = frand(g.n[0], -range, range);
	g.out = fvec(g.n_out);
	c.scale = fvec(g.n_out);
	gc_check(&g);
}

static void test_lrn(void)
{
	float in[3] = { 1, 2, 3 }, out[3], scale[3];
	struct lrn_desc d = { .n = 1, .c = 3, .h = 1, .w = 1, .size = 3, .alpha = 3, .beta = 1, .k = 1 };
	lrn_forward(out, scale, in, &d); /* scale = 1 + (3/3)·Σ x² over the window */
	CHECK_NEAR(scale[0], 6, 1e-6);
	CHECK_NEAR(scale[1], 15, 1e-6);
	CHECK_NEAR(scale[2], 14, 1e-6);
	CHECK_NEAR(out[0], 1.0 / 6, 1e-6);
	CHECK_NEAR(out[1], 2.0 / 15, 1e-6);
	CHECK_NEAR(out[2], 3.0 / 14, 1e-6);

	rng_seed(8);
	check_lrn(2, 7, 3, 3, 5, 1e-4f, 0.75f, 1.0f, 10.0f); /* AlexNet: nearly linear */
	check_lrn(2, 7, 3, 3, 5, 1.0f, 0.75f, 2.0f, 1.0f);   /* strongly non-linear */
	check_lrn(1, 4, 2, 3, 3, 0.5f, 0.6f, 1.0f, 1.5f);
	tfree_all();
}

/* ---- batch norm ---- */

struct bn_case {
	struct bn_desc d;
	int training;
	float *mean_acc, *var_acc, factor, *saved_mean, *saved_invstd;
};

static void bn_f(struct gc *g)
{
	struct bn_case *c = g->p;
	bn_forward(g->out, c->mean_acc, c->var_acc, &c->factor, c->saved_mean, c->saved_invstd, g->x[0],
		   &c->d, c->training);
}

static void bn_b(struct gc *g)
{
	struct bn_case *c = g->p;
	bn_backward(g->dx[0], g->dout, g->out, c->saved_invstd, &c->d, !c->training);
}

static void check_bn(int n, int ch, int h, int w, int training, int use_global, double tol)
{
	struct bn_case c = { .d = { .n = n, .c = ch, .h = h, .w = w, .eps = 1e-5f,
				    .moving_average_fraction = 0.999f, .use_global_stats = use_global },
			     .training = training };
	struct gc g = { .forward = bn_f, .backward = bn_b, .p = &c, .nb = 1, .tol = tol };
	snprintf(g.name, sizeof g.name, "batchnorm %dx%dx%dx%d %s%s", n, ch, h, w,
		 training ? "training" : "test", use_global ? " use_global_stats" : "");
	g.n[0] = g.n_out = (int64_t)n * ch * h * w; /* (N, C, H, W) */
	g.x[0] = frand(g.n[0], -1, 2);
	g.out = fvec(g.n_out);
	c.mean_acc = frand(ch, -1, 1);  /* (C) */
	c.var_acc = frand(ch, 0.5f, 2); /* (C) */
	c.factor = 1.7f;
	c.saved_mean = fvec(ch);
	c.saved_invstd = fvec(ch);
	gc_check(&g);
}

static void test_bn(void)
{
	/* N=2, C=1, 1x1: x = [1, 3] → mean 2, biased var 1, unbiased 2 */
	float in[2] = { 1, 3 }, out[2], mean_acc = 0, var_acc = 0, factor = 0, sm, si;
	struct bn_desc d = { .n = 2, .c = 1, .h = 1, .w = 1, .eps = 1e-5f, .moving_average_fraction = 0.5f };
	bn_forward(out, &mean_acc, &var_acc, &factor, &sm, &si, in, &d, 1);
	CHECK_NEAR(out[0], -1 / sqrt(1 + 1e-5), 1e-6);
	CHECK_NEAR(out[1], 1 / sqrt(1 + 1e-5), 1e-6);
	CHECK_NEAR(sm, 2, 1e-7);
	CHECK_NEAR(si, 1 / sqrt(1 + 1e-5), 1e-6);
	CHECK_NEAR(mean_acc, 2, 1e-7);
	CHECK_NEAR(var_acc, 2, 1e-7);
	CHECK_NEAR(factor, 1, 0);
	float in2[2] = { 0, 8 }; /* mean 4, var 16, unbiased 32 */
	bn_forward(out, &mean_acc, &var_acc, &factor, &sm, &si, in2, &d, 1);
	CHECK_NEAR(factor, 1.5, 1e-7);
	CHECK_NEAR(mean_acc, 0.5 * 2 + 4, 1e-6);
	CHECK_NEAR(var_acc, 0.5 * 2 + 32, 1e-6);
	/* test phase: mean = 5/1.5, var = 33/1.5 = 22, stats untouched */
	bn_forward(out, &mean_acc, &var_acc, &factor, &sm, &si, in, &d, 0);
	CHECK_NEAR(out[0], (1 - 5 / 1.5) / sqrt(22 + 1e-5), 1e-6);
	CHECK_NEAR(factor, 1.5, 0);
	CHECK_NEAR(mean_acc, 5, 1e-6);
	/* use_global_stats overrides training; factor 0 means mean = var = 0 */
	d.use_global_stats = 1;
	factor = 0;
	bn_forward(out, &mean_acc, &var_acc, &factor, &sm, &si, in, &d, 1);
	CHECK_NEAR(out[1], 3 / sqrt(1e-5), 1e-5);
	CHECK_NEAR(factor, 0, 0);
	/* a single value per channel: no bias correction (m = 1) */
	float one = 4, o1, ma = 0, va = 0, f1 = 0;
	struct bn_desc d1 = { .n = 1, .c = 1, .h = 1, .w = 1, .eps = 1e-5f, .moving_average_fraction = 0.9f };
	bn_forward(&o1, &ma, &va, &f1, NULL, NULL, &one, &d1, 1);
	CHECK_NEAR(o1, 0, 0);
	CHECK_NEAR(va, 0, 0);

	rng_seed(9);
	check_bn(2, 3, 3, 2, 1, 0, 1e-3);
	/* four values per channel: the statistics bend sharply, and the central
	 * difference's h² error reaches ~1e-3 — Caffe's threshold, 1e-2, here */
	check_bn(4, 2, 1, 1, 1, 0, 1e-2);
	check_bn(2, 3, 3, 2, 0, 0, 1e-3);
	check_bn(2, 3, 3, 2, 1, 1, 1e-3);
	tfree_all();
}

/* ---- Scale ---- */

struct scale_case {
	struct scale_desc d;
};

static void scale_f(struct gc *g)
{
	struct scale_case *c = g->p;
	scale_forward(g->out, g->x[0], g->x[1], c->d.bias ? g->x[2] : NULL, &c->d);
}

static void scale_b(struct gc *g)
{
	struct scale_case *c = g->p;
	scale_backward(g->dx[0], g->dx[1], c->d.bias ? g->dx[2] : NULL, g->dout, g->x[0], g->x[1], &c->d);
}

static void test_scale(void)
{
	float in[4] = { 1, 2, 3, 4 }, gamma[2] = { 2, -1 }, beta[2] = { 0.5f, 1 }, out[4];
	struct scale_desc d = { .n = 1, .c = 2, .inner = 2, .bias = 1 };
	scale_forward(out, in, gamma, beta, &d);
	CHECK_NEAR(out[1], 4.5, 0);
	CHECK_NEAR(out[2], -2, 0);

	rng_seed(10);
	for (int bias = 0; bias <= 1; bias++) {
		struct scale_case c = { { .n = 2, .c = 3, .inner = 4, .bias = bias } };
		struct gc g = { .forward = scale_f, .backward = scale_b, .p = &c, .nb = bias ? 3 : 2 };
		snprintf(g.name, sizeof g.name, "scale 2x3x4%s", bias ? " bias" : "");
		g.n[0] = g.n_out = 24; /* (N, C, inner) */
		g.n[1] = g.n[2] = 3;   /* (C) */
		for (int b = 0; b < g.nb; b++)
			g.x[b] = frand(g.n[b], -1, 1);
		g.out = fvec(24);
		gc_check(&g);
	}
	tfree_all();
}

/* ---- Eltwise and Concat ---- */

struct elt_case {
	enum eltwise_op op;
	const float *coeffs;
	int32_t *argmax;
	int concat;
	int c[GC_MAXB], n, inner;
};

static void elt_f(struct gc *g)
{
	struct elt_case *c = g->p;
	if (c->concat)
		concat_forward(g->out, (const float *const *)g->x, c->c, g->nb, c->n, c->inner);
	else
		eltwise_forward(g->out, c->argmax, (const float *const *)g->x, g->nb, g->n_out, c->op, c->coeffs);
}

static void elt_b(struct gc *g)
{
	struct elt_case *c = g->p;
	if (c->concat)
		concat_backward(g->dx, g->dout, c->c, g->nb, c->n, c->inner);
	else
		eltwise_backward(g->dx, g->dout, (const float *const *)g->x, g->out, c->argmax, g->nb, g->n_out,
				 c->op, c->coeffs);
}

static void check_eltwise(const char *name, enum eltwise_op op, int k, const float *coeffs)
{
	struct elt_case c = { .op = op, .coeffs = coeffs };
	struct gc g = { .forward = elt_f, .backward = elt_b, .p = &c, .nb = k, .n_out = 30 };
	snprintf(g.name, sizeof g.name, "%s", name);
	float *ladder = op == ELTWISE_MAX ? fladder(30 * k) : NULL;
	for (int b = 0; b < k; b++) {
		g.n[b] = 30;
		g.x[b] = ladder ? ladder + 30 * b : frand(30, -1.5f, 1.5f);
	}
	g.out = fvec(30);
	c.argmax = talloc(30 * sizeof(int32_t));
	gc_check(&g);
}

static void test_eltwise(void)
{
	float a[3] = { 1, 5, 2 }, b[3] = { 1, 3, 4 }, e[3] = { 1, 5, 0 }, out[3];
	const float *in[3] = { a, b, e };
	int32_t arg[3];
	eltwise_forward(out, arg, in, 2, 3, ELTWISE_MAX, NULL);
	CHECK_EQ_INT(arg[0], 1); /* Caffe: a tie between inputs 0 and 1 goes to 1 */
	CHECK_EQ_INT(arg[1], 0);
	CHECK_EQ_INT(arg[2], 1);
	eltwise_forward(out, arg, in, 3, 3, ELTWISE_MAX, NULL);
	CHECK_EQ_INT(arg[0], 1); /* ...but input 2 must be strictly greater */
	CHECK_EQ_INT(arg[1], 0);
	const float coeffs[3] = { 1, -0.5f, 2 };
	eltwise_forward(out, NULL, in, 3, 3, ELTWISE_SUM, coeffs);
	CHECK_NEAR(out[1], 5 - 1.5 + 10, 1e-6);
	eltwise_forward(out, NULL, in, 3, 3, ELTWISE_PROD, NULL);
	CHECK_NEAR(out[1], 75, 0);
	CHECK_NEAR(out[2], 0, 0);
	/* PROD's gradient with a zero input is the product of the others, not 0/0 */
	float g0[3] = { 0 }, g1[3] = { 0 }, g2[3] = { 0 }, one[3] = { 1, 1, 1 };
	float *din[3] = { g0, g1, g2 };
	eltwise_backward(din, one, in, out, NULL, 3, 3, ELTWISE_PROD, NULL);
	CHECK_NEAR(g2[2], 8, 0);
	CHECK_NEAR(g0[2], 0, 0);

	rng_seed(11);
	check_eltwise("eltwise SUM k2", ELTWISE_SUM, 2, NULL);
	check_eltwise("eltwise SUM k3 coeffs 1 -0.5 2", ELTWISE_SUM, 3, coeffs);
	check_eltwise("eltwise PROD k2", ELTWISE_PROD, 2, NULL);
	check_eltwise("eltwise PROD k3", ELTWISE_PROD, 3, NULL);
	check_eltwise("eltwise MAX k2", ELTWISE_MAX, 2, NULL);
	check_eltwise("eltwise MAX k3", ELTWISE_MAX, 3, NULL);
	tfree_all();
}

static void test_concat(void)
{
	float a[4] = { 1, 2, 3, 4 }, b[2] = { 9, 8 }, out[6];
	const float *in[2] = { a, b };
	int c[2] = { 2, 1 };
	concat_forward(out, in, c, 2, 2, 1); /* (2,2,1) ++ (2,1,1) → (2,3,1) */
	const float want[6] = { 1, 2, 9, 3, 4, 8 };
	for (int i = 0; i < 6; i++)
		CHECK_NEAR(out[i], want[i], 0);

	rng_seed(12);
	struct elt_case ec = { .concat = 1, .c = { 2, 1, 3 }, .n = 2, .inner = 5 };
	struct gc g = { .forward = elt_f, .backward = elt_b, .p = &ec, .nb = 3, .n_out = 2 * 6 * 5 };
	snprintf(g.name, sizeof g.name, "concat (2,2|1|3,5)");
	for (int i = 0; i < 3; i++) {
		g.n[i] = 2 * ec.c[i] * 5; /* (N, C_i, inner) */
		g.x[i] = frand(g.n[i], -1, 1);
	}
	g.out = fvec(g.n_out); /* (N, ΣC_i, inner) */
	gc_check(&g);
	tfree_all();
}

/* ---- softmax and its loss ---- */

struct sm_case {
	int n, c, inner, ignore_label;
	enum loss_norm norm;
	float *labels, *prob;
};

static void sm_f(struct gc *g)
{
	struct sm_case *c = g->p;
	softmax_forward(g->out, g->x[0], c->n, c->c, c->inner);
}

static void sm_b(struct gc *g)
{
	struct sm_case *c = g->p;
	softmax_backward(g->dx[0], g->dout, g->out, c->n, c->c, c->inner);
}

static void sml_f(struct gc *g)
{
	struct sm_case *c = g->p;
	g->out[0] = softmax_loss_forward(c->prob, g->x[0], c->labels, c->n, c->c, c->inner, c->ignore_label, c->norm);
}

static void sml_b(struct gc *g)
{
	struct sm_case *c = g->p; /* dout[0] plays the loss weight */
	softmax_loss_backward(g->dx[0], c->prob, c->labels, c->n, c->c, c->inner, c->ignore_label, c->norm, g->dout[0]);
}

static void check_softmax_norm(int loss, int n, int ch, int inner, int ignore_label, enum loss_norm norm)
{
	static const char *const norms[] = { "FULL", "VALID", "BATCH_SIZE", "NONE" };
	struct sm_case c = { .n = n, .c = ch, .inner = inner, .ignore_label = ignore_label, .norm = norm };
	struct gc g = { .forward = loss ? sml_f : sm_f, .backward = loss ? sml_b : sm_b, .p = &c, .nb = 1 };
	snprintf(g.name, sizeof g.name, "%s %dx%dx%d%s %s", loss ? "softmax loss" : "softmax", n, ch, inner,
		 loss && ignore_label >= 0 ? " ignore_label" : "", loss ? norms[norm] : "");
	g.n[0] = (int64_t)n * ch * inner; /* (N, C, inner) */
	g.x[0] = frand(g.n[0], -3, 3);
	g.n_out = loss ? 1 : g.n[0];
	g.out = fvec(g.n_out);
	c.prob = fvec(g.n[0]);
	c.labels = fvec((int64_t)n * inner); /* (N, inner) */
	for (int i = 0; i < n * inner; i++)
		c.labels[i] = (float)(rng_next() % (uint64_t)ch);
	if (ignore_label >= 0)
		c.labels[1] = (float)ignore_label, c.labels[n * inner - 1] = (float)ignore_label;
	gc_check(&g);
}

static void check_softmax(int loss, int n, int ch, int inner, int ignore_label)
{
	check_softmax_norm(loss, n, ch, inner, ignore_label, LOSS_NORM_VALID);
}

static void test_softmax(void)
{
	float in[4] = { 0, 0, (float)log(3.0), 0 }, prob[4], labels[2] = { 0, 1 }, din[4] = { 0 };
	/* (N=2, C=2): [0,0] label 0 → ln 2;  [ln 3, 0] label 1 → p = 1/4 → ln 4 */
	float loss = softmax_loss_forward(prob, in, labels, 2, 2, 1, -1, LOSS_NORM_VALID);
	CHECK_NEAR(prob[2], 0.75, 1e-6);
	CHECK_NEAR(loss, 1.5 * log(2.0), 1e-6);
	CHECK_NEAR(softmax_loss_forward(prob, in, labels, 2, 2, 1, 1, LOSS_NORM_VALID), log(2.0), 1e-6);
	softmax_loss_backward(din, prob, labels, 2, 2, 1, -1, LOSS_NORM_VALID, 2.0f); /* 2·(p - onehot)/2 */
	CHECK_NEAR(din[0], -0.5, 1e-6);
	CHECK_NEAR(din[3], -0.75, 1e-6);
	float none[2] = { 1, 1 };
	CHECK_NEAR(softmax_loss_forward(prob, in, none, 2, 2, 1, 1, LOSS_NORM_VALID), 0, 0); /* all ignored */
	memset(din, 0, sizeof din);
	softmax_loss_backward(din, prob, none, 2, 2, 1, 1, LOSS_NORM_VALID, 1.0f);
	CHECK(din[0] == 0 && din[1] == 0 && din[2] == 0 && din[3] == 0);
	/* huge logits stay finite (the max is subtracted) */
	float big[2] = { 1000, 0 }, p2[2];
	softmax_forward(p2, big, 1, 2, 1);
	CHECK_NEAR(p2[0], 1, 1e-7);
	CHECK(p2[1] >= 0 && !isnan(p2[1]));
	/* a certain wrong answer: -log(FLT_MIN), not infinity */
	float sure[2] = { 0, 200 }, l0[1] = { 0 };
	CHECK_NEAR(softmax_loss_forward(p2, sure, l0, 1, 2, 1, -1, LOSS_NORM_VALID), 87.3365447, 1e-6);

	rng_seed(13);
	check_softmax(0, 2, 5, 1, -1);
	check_softmax(0, 2, 4, 3, -1);
	check_softmax(1, 3, 5, 1, -1);
	check_softmax(1, 2, 4, 3, -1);
	check_softmax(1, 2, 4, 3, 2);
	tfree_all();
}

/* Caffe's four normalisers on a spatial loss: the same summed loss divided by the
 * count of valid positions, of all positions, by the batch, or by nothing. */
static void test_softmax_norm(void)
{
	/* (N=2, C=2, inner 3): every position at [0, 0] (each -log p = ln 2), label 1
	 * ignored at two positions: 4 valid of 6 */
	float in[12] = { 0 }, prob[12], labels[6] = { 0, 1, 0, 0, 1, 0 };
	double sum = 4 * log(2.0);
	CHECK_NEAR(softmax_loss_forward(prob, in, labels, 2, 2, 3, 1, LOSS_NORM_VALID), sum / 4, 1e-6);
	CHECK_NEAR(softmax_loss_forward(prob, in, labels, 2, 2, 3, 1, LOSS_NORM_FULL), sum / 6, 1e-6);
	CHECK_NEAR(softmax_loss_forward(prob, in, labels, 2, 2, 3, 1, LOSS_NORM_BATCH_SIZE), sum / 2, 1e-6);
	CHECK_NEAR(softmax_loss_forward(prob, in, labels, 2, 2, 3, 1, LOSS_NORM_NONE), sum, 1e-6);
	CHECK_NEAR(loss_normalizer(LOSS_NORM_VALID, 2, 3, 0), 1, 0); /* never below 1 */
	CHECK_NEAR(loss_normalizer(LOSS_NORM_FULL, 2, 3, 0), 6, 0);
	/* the gradient is divided alike: position 0 of image 0, class 0: (0.5 - 1) / 2 */
	float din[12] = { 0 };
	softmax_loss_backward(din, prob, labels, 2, 2, 3, 1, LOSS_NORM_BATCH_SIZE, 1.0f);
	CHECK_NEAR(din[0], -0.25, 1e-6);
	CHECK_NEAR(din[1], 0, 0); /* position 1 ignored */

	rng_seed(17);
	for (int norm = LOSS_NORM_FULL; norm <= LOSS_NORM_NONE; norm++) {
		check_softmax_norm(1, 2, 4, 6, 2, (enum loss_norm)norm);
		check_softmax_norm(1, 3, 3, 4, -1, (enum loss_norm)norm);
	}
	tfree_all();
}

/* ---- EuclideanLoss ---- */

struct eu_case {
	int n;
	int64_t count;
	float *diff;
};

static void eu_f(struct gc *g)
{
	struct eu_case *c = g->p;
	g->out[0] = euclidean_loss_forward(c->diff, g->x[0], g->x[1], c->n, c->count);
}

static void eu_b(struct gc *g)
{
	struct eu_case *c = g->p; /* dout[0] plays the loss weight */
	euclidean_loss_backward(g->dx[0], g->dx[1], c->diff, c->n, c->count, g->dout[0]);
}

static void test_euclidean(void)
{
	/* (N=2, 2 values): ((1-0)² + (2-4)² + (0-0)² + (-1-2)²) / (2·2) = 14/4 */
	const float a[4] = { 1, 2, 0, -1 }, b[4] = { 0, 4, 0, 2 };
	float diff[4], da[4] = { 0 }, db[4] = { 0 };
	CHECK_NEAR(euclidean_loss_forward(diff, a, b, 2, 4), 3.5, 1e-7);
	euclidean_loss_backward(da, db, diff, 2, 4, 2.0f); /* ±2·(a−b)/2 */
	CHECK_NEAR(da[1], -2, 1e-7);
	CHECK_NEAR(db[1], 2, 1e-7);
	CHECK_NEAR(da[3], -3, 1e-7);
	euclidean_loss_backward(NULL, db, diff, 2, 4, 1.0f); /* either may be NULL */
	CHECK_NEAR(db[3], 4.5, 1e-7);

	rng_seed(18);
	const int shapes[2][2] = { { 3, 4 }, { 2, 2 * 3 * 5 } };
	for (int k = 0; k < 2; k++) {
		struct eu_case c = { .n = shapes[k][0], .count = (int64_t)shapes[k][0] * shapes[k][1] };
		struct gc g = { .forward = eu_f, .backward = eu_b, .p = &c, .nb = 2, .n_out = 1 };
		snprintf(g.name, sizeof g.name, "euclidean loss %dx%d", shapes[k][0], shapes[k][1]);
		g.n[0] = g.n[1] = c.count;
		g.x[0] = frand(c.count, -2, 2);
		g.x[1] = frand(c.count, -2, 2);
		c.diff = fvec(c.count);
		g.out = fvec(1);
		gc_check(&g);
	}
	tfree_all();
}

/* ---- Crop ---- */

static void crop_f(struct gc *g)
{
	crop_forward(g->out, g->x[0], g->p);
}

static void crop_b(struct gc *g)
{
	crop_backward(g->dx[0], g->dout, g->p);
}

static void test_crop(void)
{
	/* (1,1,3,4) → (1,1,2,2) from (1, 2) */
	const float in[12] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
	struct crop_desc d = { .ndim = 4, .in = { 1, 1, 3, 4 }, .out = { 1, 1, 2, 2 }, .off = { 0, 0, 1, 2 } };
	float out[4], din[12] = { 0 };
	const float dout[4] = { 1, 2, 3, 4 };
	crop_forward(out, in, &d);
	CHECK(out[0] == 6 && out[1] == 7 && out[2] == 10 && out[3] == 11);
	crop_backward(din, dout, &d);
	CHECK(din[6] == 1 && din[7] == 2 && din[10] == 3 && din[11] == 4);
	double outside = 0;
	for (int i = 0; i < 12; i++)
		outside += i == 6 || i == 7 || i == 10 || i == 11 ? 0 : fabs(din[i]);
	CHECK(outside == 0); /* zeros outside the window */
	/* 2 axes (N, C) cropped from axis 1 */
	struct crop_desc d2 = { .ndim = 2, .in = { 2, 5 }, .out = { 2, 2 }, .off = { 0, 3 } };
	const float in2[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	crop_forward(out, in2, &d2);
	CHECK(out[0] == 3 && out[1] == 4 && out[2] == 8 && out[3] == 9);

	rng_seed(19);
	struct crop_desc cases[2] = {
		{ .ndim = 4, .in = { 2, 3, 7, 6 }, .out = { 2, 3, 4, 3 }, .off = { 0, 0, 2, 1 } },
		{ .ndim = 4, .in = { 2, 4, 5, 5 }, .out = { 2, 2, 3, 4 }, .off = { 0, 1, 1, 0 } }, /* axis 1 */
	};
	for (int k = 0; k < 2; k++) {
		struct crop_desc *c = &cases[k];
		struct gc g = { .forward = crop_f, .backward = crop_b, .p = c, .nb = 1 };
		snprintf(g.name, sizeof g.name, "crop %dx%dx%dx%d → %dx%dx%dx%d", c->in[0], c->in[1], c->in[2], c->in[3],
			 c->out[0], c->out[1], c->out[2], c->out[3]);
		g.n[0] = (int64_t)c->in[0] * c->in[1] * c->in[2] * c->in[3];
		g.x[0] = frand(g.n[0], -1, 1);
		g.n_out = (int64_t)c->out[0] * c->out[1] * c->out[2] * c->out[3];
		g.out = fvec(g.n_out);
		gc_check(&g);
	}
	tfree_all();
}

static void test_accuracy(void)
{
	/* (N=5, C=5, inner 1) */
	const float s[25] = {
		0.1f, 0.5f, 0.2f, 0.9f, 0.3f, /* label 1: one better */
		1, 1, 1, 1, 1,                /* label 2: a four-way tie, counted against it */
		0.3f, 0.7f, 0.7f, 0.1f, 0,    /* label 1: tied with class 2 */
		0.9f, 0.1f, 0.2f, 0.3f, 0.4f, /* label 0: the best */
		0, 0, 0, 0, 1,                /* label 7: ignored (or a miss: out of range) */
	};
	const float labels[5] = { 1, 2, 1, 0, 7 };
	CHECK_NEAR(accuracy_forward(s, labels, 5, 5, 1, 1, 7), 1.0 / 4, 1e-7);
	CHECK_NEAR(accuracy_forward(s, labels, 5, 5, 1, 2, 7), 3.0 / 4, 1e-7);
	CHECK_NEAR(accuracy_forward(s, labels, 5, 5, 1, 5, 7), 1, 1e-7);
	CHECK_NEAR(accuracy_forward(s, labels, 5, 5, 1, 1, -1), 1.0 / 5, 1e-7);
	CHECK_NEAR(accuracy_forward(s, labels, 5, 5, 1, 5, -1), 4.0 / 5, 1e-7);
	const float all7[5] = { 7, 7, 7, 7, 7 };
	CHECK_NEAR(accuracy_forward(s, all7, 5, 5, 1, 1, 7), 0, 0); /* nothing counted */
	/* (N=1, C=3, inner 2): the scores of a position are strided by inner */
	const float sp[6] = { 0.1f, 0.9f, 0.5f, 0.2f, 0.4f, 0.3f }, lp[2] = { 2, 0 };
	CHECK_NEAR(accuracy_forward(sp, lp, 1, 3, 2, 1, -1), 0.5, 1e-7);
	CHECK_NEAR(accuracy_forward(sp, lp, 1, 3, 2, 2, -1), 1, 1e-7);
	/* (N=2, C=3, H×W = 2×2) against (N, H, W) labels, 255 ignored */
	const float sp4[24] = {
		/* image 0: classes × 4 positions */ 1, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 0, 0, 1, 1,
		/* image 1 */ 0, 0, 1, 0, /**/ 1, 1, 0, 0, /**/ 0, 0, 0, 1,
	};
	const float lp4[8] = { 0, 1, 2, 0, /**/ 1, 255, 0, 2 }; /* argmax: 0 1 2 2 | 1 1 0 2 */
	CHECK_NEAR(accuracy_forward(sp4, lp4, 2, 3, 4, 1, 255), 6.0 / 7, 1e-7);
	CHECK_NEAR(accuracy_forward(sp4, lp4, 2, 3, 4, 1, -1), 6.0 / 8, 1e-7); /* 255 a miss */
	CHECK_NEAR(accuracy_forward(sp4, lp4, 2, 3, 4, 3, 255), 1, 1e-7);
}

int main(void)
{
	RUN(test_conv_sizes);
	RUN(test_conv_values);
	RUN(test_conv_grad);
	RUN(test_deconv_values);
	RUN(test_deconv_grad);
	RUN(test_ip);
	RUN(test_pool_sizes);
	RUN(test_pool_values);
	RUN(test_pool_grad);
	RUN(test_activations);
	RUN(test_power);
	RUN(test_dropout);
	RUN(test_lrn);
	RUN(test_bn);
	RUN(test_scale);
	RUN(test_eltwise);
	RUN(test_concat);
	RUN(test_softmax);
	RUN(test_softmax_norm);
	RUN(test_euclidean);
	RUN(test_crop);
	RUN(test_accuracy);
	return check_summary();
}
