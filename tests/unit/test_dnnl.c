/* test_dnnl.c — the oneDNN kernels (networks/cpu/cpu_ops.h) against the reference
 * kernels (networks/ref.h), in ggml's test-backend-ops manner: for every case in a
 * table, seeded random inputs, both implementations, compared by normalised error
 * max|a - b| / max(1, max|ref|) < 1e-4, forward and backward.  Gradient buffers are
 * pre-filled with a constant before the backward, so that a backward which
 * overwrote instead of adding would fail; each NULL-gradient combination is run too.
 *
 *   test_dnnl          the tests; exits non-zero when any failed
 *   test_dnnl bench    also times cpu_conv_forward against conv_forward on LeNet's
 *                      conv2 and AlexNet's conv2 shapes (ms per call)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "../../common/err.h"
#include "../../networks/cpu/cpu_ops.h"
#include "../../networks/ref.h"

#define TOL 1e-4
#define PREFILL 0.25f /* what every gradient buffer holds before a backward */

static uint64_t rng_state;

static float rnd(void) /* uniform in [-1, 1), splitmix64 */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (float)((double)(z >> 40) / (double)(1ULL << 23) - 1.0);
}

static float *rnd_buf(size_t count)
{
	float *p = malloc((count ? count : 1) * sizeof *p);
	if (p)
		for (size_t i = 0; i < count; i++)
			p[i] = rnd();
	return p;
}

static float *const_buf(size_t count, float v)
{
	float *p = malloc((count ? count : 1) * sizeof *p);
	if (p)
		for (size_t i = 0; i < count; i++)
			p[i] = v;
	return p;
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

static int close_enough(const char *what, const char *name, const float *a, const float *ref,
			size_t count)
{
	double e = nerr(a, ref, count);
	if (e < TOL)
		return 1;
	fprintf(stderr, "  %s: %s: normalised error %.3g\n", name, what, e);
	return 0;
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
	{ 1, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },    /* pad 1 (same) */
	{ 4, 8, 6, 6, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1 },    /* kernel 1 */
	{ 1, 2, 12, 12, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1 },  /* kernel 5 */
	{ 4, 3, 10, 11, 4, 5, 5, 2, 2, 0, 0, 1, 1, 1, 0 },  /* kernel 5, stride 2 (floors) */
	{ 4, 4, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1 },    /* group 2 */
	{ 1, 6, 7, 9, 4, 3, 3, 2, 1, 1, 0, 1, 1, 2, 0 },    /* group 2, non-square, no bias */
	{ 4, 3, 11, 11, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1 },  /* dilation 2 */
	{ 1, 4, 10, 12, 4, 3, 2, 1, 2, 0, 1, 2, 3, 2, 1 },  /* dilation 2x3, group 2 */
	{ 4, 3, 7, 10, 5, 3, 5, 2, 3, 1, 2, 1, 1, 1, 1 },   /* non-square everything */
	{ 1, 1, 6, 5, 2, 2, 3, 3, 2, 0, 1, 1, 1, 1, 1 },    /* stride > kernel */
	{ 4, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 1 },    /* depthwise (group = C) */
};

static struct conv_desc conv_desc_of(const struct conv_case *c)
{
	struct conv_desc d = { .n = c->n, .c_in = c->cin, .h_in = c->h, .w_in = c->w,
			       .c_out = c->cout, .kh = c->kh, .kw = c->kw, .sh = c->sh, .sw = c->sw,
			       .ph = c->ph, .pw = c->pw, .dh = c->dh, .dw = c->dw,
			       .group = c->group, .bias = c->bias };
	conv_out_size(&d);
	return d;
}

/* One case: forward, then the backward with every subset of (din, dw, db). */
static void check_conv_case(const struct conv_case *c, int idx)
{
	struct conv_desc d = conv_desc_of(c);
	char name[160];
	snprintf(name, sizeof name, "conv#%d %dx%dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d%s", idx,
		 d.n, d.c_in, d.h_in, d.w_in, d.c_out, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw,
		 d.group, d.bias ? " bias" : "");
	size_t n_in = (size_t)d.n * d.c_in * d.h_in * d.w_in;
	size_t n_out = (size_t)d.n * d.c_out * d.h_out * d.w_out;
	size_t n_w = (size_t)d.c_out * (d.c_in / d.group) * d.kh * d.kw;
	size_t n_b = (size_t)d.c_out;

	rng_state = 1234 + (uint64_t)idx;
	float *in = rnd_buf(n_in), *w = rnd_buf(n_w), *b = rnd_buf(n_b), *dout = rnd_buf(n_out);
	float *out_ref = const_buf(n_out, NAN), *out_dnnl = const_buf(n_out, NAN);
	float *gi[2], *gw[2], *gb[2];
	for (int i = 0; i < 2; i++) {
		gi[i] = malloc(n_in * sizeof(float));
		gw[i] = malloc(n_w * sizeof(float));
		gb[i] = malloc(n_b * sizeof(float));
	}
	CHECK(in && w && b && dout && out_ref && out_dnnl && gi[0] && gi[1] && gw[0] && gw[1] &&
	      gb[0] && gb[1]);
	if (!(in && w && b && dout && out_ref && out_dnnl && gi[0] && gi[1] && gw[0] && gw[1] &&
	      gb[0] && gb[1]))
		goto done;

	const float *bias = d.bias ? b : NULL;
	conv_forward(out_ref, in, w, bias, &d);
	CHECK_EQ_INT(cpu_conv_forward(out_dnnl, in, w, bias, &d), DD_OK);
	if (!close_enough("forward", name, out_dnnl, out_ref, n_out))
		check_current_failed = 1;

	for (int mask = 0; mask < 8; mask++) {
		int want_i = mask & 1, want_w = mask & 2, want_b = (mask & 4) && d.bias;
		if ((mask & 4) && !d.bias)
			continue;
		for (int i = 0; i < 2; i++) {
			for (size_t k = 0; k < n_in; k++)
				gi[i][k] = PREFILL;
			for (size_t k = 0; k < n_w; k++)
				gw[i][k] = PREFILL;
			for (size_t k = 0; k < n_b; k++)
				gb[i][k] = PREFILL;
		}
		conv_backward(want_i ? gi[0] : NULL, want_w ? gw[0] : NULL, want_b ? gb[0] : NULL, dout,
			      in, w, &d);
		CHECK_EQ_INT(cpu_conv_backward(want_i ? gi[1] : NULL, want_w ? gw[1] : NULL,
						want_b ? gb[1] : NULL, dout, in, w, &d),
			     DD_OK);
		char what[64];
		snprintf(what, sizeof what, "backward din (mask %d)", mask);
		if (!close_enough(what, name, gi[1], gi[0], n_in))
			check_current_failed = 1;
		snprintf(what, sizeof what, "backward dw (mask %d)", mask);
		if (!close_enough(what, name, gw[1], gw[0], n_w))
			check_current_failed = 1;
		snprintf(what, sizeof what, "backward db (mask %d)", mask);
		if (!close_enough(what, name, gb[1], gb[0], n_b))
			check_current_failed = 1;
	}
	/* the pre-fill really was added to: a gradient that was asked for is not
	 * simply the reference's fresh gradient (guards against a ref that overwrites
	 * and a dnnl that overwrites agreeing with each other) */
	{
		float *fresh = const_buf(n_w, 0.0f);
		CHECK(fresh != NULL);
		if (fresh) {
			for (size_t k = 0; k < n_w; k++)
				gw[1][k] = PREFILL;
			conv_backward(NULL, fresh, NULL, dout, in, w, &d);
			CHECK_EQ_INT(cpu_conv_backward(NULL, gw[1], NULL, dout, in, w, &d), DD_OK);
			for (size_t k = 0; k < n_w; k++)
				fresh[k] += PREFILL;
			if (!close_enough("backward dw adds to its pre-fill", name, gw[1], fresh, n_w))
				check_current_failed = 1;
			free(fresh);
		}
	}
done:
	for (int i = 0; i < 2; i++) {
		free(gi[i]);
		free(gw[i]);
		free(gb[i]);
	}
	free(out_dnnl);
	free(out_ref);
	free(dout);
	free(b);
	free(w);
	free(in);
}

static void test_conv(void)
{
	for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
		check_conv_case(&conv_cases[i], (int)i);
}

static void test_conv_invalid(void)
{
	float x[64] = { 0 }, y[64], wt[64] = { 0 };
	struct conv_case c = { 1, 3, 4, 4, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0 };
	struct conv_desc d = conv_desc_of(&c);
	d.group = 2; /* does not divide C_in = 3 */
	CHECK_EQ_INT(cpu_conv_forward(y, x, wt, NULL, &d), DD_EINVAL);
	CHECK_EQ_INT(cpu_conv_backward(y, wt, NULL, x, x, wt, &d), DD_EINVAL);
	d = conv_desc_of(&c);
	d.h_out = 3; /* inconsistent with the input: 4 - 3 + 1 = 2 */
	CHECK_EQ_INT(cpu_conv_forward(y, x, wt, NULL, &d), DD_EINVAL);
	/* a rejected backward adds nothing */
	for (int i = 0; i < 64; i++)
		y[i] = PREFILL;
	CHECK(cpu_conv_backward(y, NULL, NULL, x, x, wt, &d) < 0);
	int same = 1;
	for (int i = 0; i < 64; i++)
		same &= y[i] == PREFILL;
	CHECK(same);
}

/* ---- inner product ---- */

struct ip_case {
	int n, k, m, bias;
};

static const struct ip_case ip_cases[] = {
	{ 1, 10, 7, 1 }, { 4, 10, 7, 1 }, { 1, 33, 5, 0 }, { 4, 50, 20, 0 }, { 4, 800, 500, 1 },
};

static void check_ip_case(const struct ip_case *c, int idx)
{
	struct ip_desc d = { .n = c->n, .k = c->k, .m = c->m, .bias = c->bias };
	char name[96];
	snprintf(name, sizeof name, "ip#%d %dx%d->%d%s", idx, d.n, d.k, d.m, d.bias ? " bias" : "");
	size_t n_in = (size_t)d.n * d.k, n_out = (size_t)d.n * d.m, n_w = (size_t)d.m * d.k;
	size_t n_b = (size_t)d.m;

	rng_state = 99 + (uint64_t)idx;
	float *in = rnd_buf(n_in), *w = rnd_buf(n_w), *b = rnd_buf(n_b), *dout = rnd_buf(n_out);
	float *out_ref = const_buf(n_out, NAN), *out_dnnl = const_buf(n_out, NAN);
	float *gi[2], *gw[2], *gb[2];
	for (int i = 0; i < 2; i++) {
		gi[i] = malloc(n_in * sizeof(float));
		gw[i] = malloc(n_w * sizeof(float));
		gb[i] = malloc(n_b * sizeof(float));
	}
	int ok = in && w && b && dout && out_ref && out_dnnl && gi[0] && gi[1] && gw[0] && gw[1] &&
		 gb[0] && gb[1];
	CHECK(ok);
	if (!ok)
		goto done;

	const float *bias = d.bias ? b : NULL;
	ip_forward(out_ref, in, w, bias, &d);
	CHECK_EQ_INT(cpu_ip_forward(out_dnnl, in, w, bias, &d), DD_OK);
	if (!close_enough("forward", name, out_dnnl, out_ref, n_out))
		check_current_failed = 1;

	for (int mask = 0; mask < 8; mask++) {
		int want_i = mask & 1, want_w = mask & 2, want_b = (mask & 4) && d.bias;
		if ((mask & 4) && !d.bias)
			continue;
		for (int i = 0; i < 2; i++) {
			for (size_t k = 0; k < n_in; k++)
				gi[i][k] = PREFILL;
			for (size_t k = 0; k < n_w; k++)
				gw[i][k] = PREFILL;
			for (size_t k = 0; k < n_b; k++)
				gb[i][k] = PREFILL;
		}
		ip_backward(want_i ? gi[0] : NULL, want_w ? gw[0] : NULL, want_b ? gb[0] : NULL, dout,
			    in, w, &d);
		CHECK_EQ_INT(cpu_ip_backward(want_i ? gi[1] : NULL, want_w ? gw[1] : NULL,
					      want_b ? gb[1] : NULL, dout, in, w, &d),
			     DD_OK);
		char what[64];
		snprintf(what, sizeof what, "backward din (mask %d)", mask);
		if (!close_enough(what, name, gi[1], gi[0], n_in))
			check_current_failed = 1;
		snprintf(what, sizeof what, "backward dw (mask %d)", mask);
		if (!close_enough(what, name, gw[1], gw[0], n_w))
			check_current_failed = 1;
		snprintf(what, sizeof what, "backward db (mask %d)", mask);
		if (!close_enough(what, name, gb[1], gb[0], n_b))
			check_current_failed = 1;
	}
done:
	for (int i = 0; i < 2; i++) {
		free(gi[i]);
		free(gw[i]);
		free(gb[i]);
	}
	free(out_dnnl);
	free(out_ref);
	free(dout);
	free(b);
	free(w);
	free(in);
}

static void test_ip(void)
{
	for (size_t i = 0; i < sizeof ip_cases / sizeof ip_cases[0]; i++)
		check_ip_case(&ip_cases[i], (int)i);
}

static void test_ip_invalid(void)
{
	float x[8] = { 0 }, y[8], wt[8] = { 0 };
	struct ip_desc d = { .n = 1, .k = 0, .m = 2 };
	CHECK_EQ_INT(cpu_ip_forward(y, x, wt, NULL, &d), DD_EINVAL);
	CHECK_EQ_INT(cpu_ip_backward(y, wt, NULL, x, x, wt, &d), DD_EINVAL);
}

/* ---- the benchmark (only with "bench") ---- */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void bench_conv(const char *label, struct conv_desc d, int ref_reps, int dnnl_reps)
{
	conv_out_size(&d);
	size_t n_in = (size_t)d.n * d.c_in * d.h_in * d.w_in;
	size_t n_out = (size_t)d.n * d.c_out * d.h_out * d.w_out;
	size_t n_w = (size_t)d.c_out * (d.c_in / d.group) * d.kh * d.kw;
	rng_state = 7;
	float *in = rnd_buf(n_in), *w = rnd_buf(n_w), *b = rnd_buf(d.c_out);
	float *o1 = malloc(n_out * sizeof(float)), *o2 = malloc(n_out * sizeof(float));
	if (!in || !w || !b || !o1 || !o2) {
		printf("bench %s: out of memory\n", label);
		goto done;
	}
	double t0 = now_ms();
	for (int i = 0; i < ref_reps; i++)
		conv_forward(o1, in, w, b, &d);
	double ref_ms = (now_ms() - t0) / ref_reps;
	int rc = cpu_conv_forward(o2, in, w, b, &d); /* warm-up: engine, JIT */
	t0 = now_ms();
	for (int i = 0; i < dnnl_reps && rc == DD_OK; i++)
		rc = cpu_conv_forward(o2, in, w, b, &d);
	double dnnl_ms = (now_ms() - t0) / dnnl_reps;
	printf("bench %-34s ref %9.2f ms/call (%d)  dnnl %8.3f ms/call (%d)  x%.0f  err %.2g%s\n",
	       label, ref_ms, ref_reps, dnnl_ms, dnnl_reps, ref_ms / dnnl_ms, nerr(o2, o1, n_out),
	       rc == DD_OK ? "" : "  (dnnl FAILED)");
done:
	free(o2);
	free(o1);
	free(b);
	free(w);
	free(in);
}

int main(int argc, char **argv)
{
	RUN(test_conv);
	RUN(test_conv_invalid);
	RUN(test_ip);
	RUN(test_ip_invalid);
	if (argc > 1 && strcmp(argv[1], "bench") == 0) {
		bench_conv("LeNet conv2 N64 20->50 12x12 k5",
			   (struct conv_desc){ .n = 64, .c_in = 20, .h_in = 12, .w_in = 12, .c_out = 50,
					       .kh = 5, .kw = 5, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
					       .group = 1, .bias = 1 },
			   5, 50);
		bench_conv("AlexNet conv2 N32 96->256 g2 27x27",
			   (struct conv_desc){ .n = 32, .c_in = 96, .h_in = 27, .w_in = 27, .c_out = 256,
					       .kh = 5, .kw = 5, .sh = 1, .sw = 1, .ph = 2, .pw = 2,
					       .dh = 1, .dw = 1, .group = 2, .bias = 1 },
			   1, 10);
	}
	return check_summary();
}
