/* test_parity.c — the reference layers (networks/ref.c) against PyTorch.
 *
 * Runs `/usr/bin/python3 tests/parity/layers.py DIR` (from the repository root, where
 * tests/run.sh runs every unit test), which writes seeded inputs, parameters, a
 * random R and PyTorch's float64 outputs and gradients of loss = Σ out·R as raw
 * float32 files with a JSON manifest.  Each case is fed to the C forward and backward
 * and every output and gradient is compared by the normalised error
 *
 *     max|c - torch| / max(1, max|torch|)  <  1e-4      (parity_tol)
 *
 * (ggml's test-backend-ops measure).  Which PyTorch call stands for which Caffe layer,
 * and where the two differ, is written at the top of layers.py.  Without torch in
 * /usr/bin/python3 (Debian's python3-torch, which `make test` installs) the whole
 * test is one counted skip, or a failure where CI is set (check_need). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../networks/ref.h"
#include "check.h"
#include "talloc.h"

static const double parity_tol = 1e-4;
static const char parity_script[] = "tests/parity/layers.py";

static char parity_dir[64];
static cJSON *manifest;

/* ---- reading a case (buffers from talloc.h, freed when the case ends) ---- */

static int pint(const cJSON *cs, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "params"), key);
	if (!cJSON_IsNumber(v)) {
		fprintf(stderr, "  manifest: no number params.%s\n", key);
		check_current_failed = 1;
		return 0;
	}
	return v->valueint;
}

static double pnum(const cJSON *cs, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "params"), key);
	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *pstr(const cJSON *cs, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "params"), key);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static const cJSON *tensor(const cJSON *cs, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "tensors"), name);
}

/* dimension i of a tensor's shape, -1 if absent */
static int dim(const cJSON *cs, const char *name, int i)
{
	const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(tensor(cs, name), "shape"), i);
	return cJSON_IsNumber(v) ? v->valueint : -1;
}

/* The tensor's values (freed with the case), or NULL when the manifest has no such
 * tensor; *count gets its element count.  A file of the wrong size fails the case. */
static float *load(const cJSON *cs, const char *name, int64_t *count)
{
	const cJSON *t = tensor(cs, name);
	const cJSON *file = cJSON_GetObjectItemCaseSensitive(t, "file");
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
	if (!cJSON_IsString(file) || !cJSON_IsArray(shape))
		return NULL;
	int64_t n = 1;
	const cJSON *d;
	cJSON_ArrayForEach(d, shape)
		n *= d->valueint;
	char path[512];
	snprintf(path, sizeof path, "%s/%s", parity_dir, file->valuestring);
	float *v = fvec(n);
	size_t got = check_read_f32(path, v, n);
	if (got != (size_t)n) {
		fprintf(stderr, "  %s: %zu floats, the shape says %lld\n", path, got, (long long)n);
		check_current_failed = 1;
	}
	if (count)
		*count = n;
	return v;
}

/* R_out of case cs has n values where the layer's output has want: a failure. */
static void bad_size(const cJSON *cs, int64_t n, int64_t want)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(cs, "name");
	fprintf(stderr, "  %s: R_out has %lld values, the output %lld\n", cJSON_IsString(name) ? name->valuestring : "?",
		(long long)n, (long long)want);
	check_current_failed = 1;
}

static float *must_load(const cJSON *cs, const char *name, int64_t *count)
{
	float *v = load(cs, name, count);
	if (!v) {
		fprintf(stderr, "  manifest: case has no tensor %s\n", name);
		check_current_failed = 1;
		v = fvec(1);
		if (count)
			*count = 1;
	}
	return v;
}

/* ---- comparing ---- */

static double case_worst;

static void compare(const cJSON *cs, const char *name, const float *got, int64_t n)
{
	int64_t m;
	const char *cname = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
	float *want = load(cs, name, &m);
	if (!want) {
		fprintf(stderr, "  %s: PyTorch wrote no %s\n", cname, name);
		check_current_failed = 1;
		return;
	}
	if (m != n) {
		fprintf(stderr, "  %s: %s has %lld values, PyTorch's %lld\n", cname, name, (long long)n, (long long)m);
		check_current_failed = 1;
		return;
	}
	double ref;
	int64_t at;
	double diff = check_max_diff(got, want, n, &ref, &at);
	double err = diff / fmax(1.0, ref);
	if (err > case_worst)
		case_worst = err;
	if (!(err < parity_tol)) {
		fprintf(stderr, "  %s: %s normalised error %.2e >= %g (at [%lld]: %.8g, PyTorch %.8g)\n", cname,
			name, err, parity_tol, (long long)at, got[at], want[at]);
		check_current_failed = 1;
	}
}

/* ---- one runner per layer type ---- */

/* A layer with weights (Convolution, InnerProduct): PyTorch's in, w, b (with bias)
 * and R_out, and room for the C side's out and gradients; n_b biases. */
struct weighted {
	int bias;
	int64_t n_in, n_w, n_out, n_b;
	float *in, *w, *b, *r, *out, *din, *dw, *db;
};

/* t loaded for case cs, whose output the layer says has n_out values; -1 (a failure)
 * where the manifest disagrees. */
static int weighted_load(const cJSON *cs, int bias, int64_t n_out, int64_t n_b, struct weighted *t)
{
	t->bias = bias;
	t->n_b = n_b;
	t->in = must_load(cs, "in", &t->n_in);
	t->w = must_load(cs, "w", &t->n_w);
	t->b = bias ? must_load(cs, "b", NULL) : NULL;
	t->r = must_load(cs, "R_out", &t->n_out);
	if (t->n_out != n_out) { /* the manifest and the layer disagree */
		bad_size(cs, t->n_out, n_out);
		return -1;
	}
	t->out = fvec(t->n_out), t->din = fvec(t->n_in), t->dw = fvec(t->n_w), t->db = fvec(n_b);
	return 0;
}

/* The C side's output and gradients (out, d_in, d_w, d_b) against PyTorch's. */
static void weighted_compare(const cJSON *cs, const struct weighted *t)
{
	compare(cs, "out", t->out, t->n_out);
	compare(cs, "d_in", t->din, t->n_in);
	compare(cs, "d_w", t->dw, t->n_w);
	if (t->bias)
		compare(cs, "d_b", t->db, t->n_b);
}

/* A convolution's or deconvolution's descriptor from its case; the output size is
 * for the caller (each type has its rule). */
static struct conv_desc conv_desc_of(const cJSON *cs)
{
	return (struct conv_desc){ .n = pint(cs, "n"), .c_in = pint(cs, "c_in"), .h_in = pint(cs, "h"),
				   .w_in = pint(cs, "w"), .c_out = pint(cs, "c_out"), .kh = pint(cs, "kh"),
				   .kw = pint(cs, "kw"), .sh = pint(cs, "sh"), .sw = pint(cs, "sw"),
				   .ph = pint(cs, "ph"), .pw = pint(cs, "pw"), .dh = pint(cs, "dh"),
				   .dw = pint(cs, "dw"), .group = pint(cs, "group"), .bias = pint(cs, "bias") };
}

/* against F.conv2d (de 0) or F.conv_transpose2d (de 1) */
static void run_conv_or_deconv(const cJSON *cs, int de)
{
	struct conv_desc d = conv_desc_of(cs);
	if (de) { /* Caffe's size, and PyTorch's without output_padding */
		d.h_out = (d.h_in - 1) * d.sh - 2 * d.ph + d.dh * (d.kh - 1) + 1;
		d.w_out = (d.w_in - 1) * d.sw - 2 * d.pw + d.dw * (d.kw - 1) + 1;
	} else {
		conv_out_size(&d);
	}
	CHECK_EQ_INT(d.h_out, dim(cs, "out", 2));
	CHECK_EQ_INT(d.w_out, dim(cs, "out", 3));
	/* in (N, C_in, H, W), w (C_out, C_in/group, kh, kw) or, deconv, (C_in, C_out/group, kh, kw),
	 * b (C_out), out (N, C_out, H_out, W_out) */
	struct weighted t;
	if (weighted_load(cs, d.bias, (int64_t)d.n * d.c_out * d.h_out * d.w_out, d.c_out, &t))
		return;
	if (de) {
		deconv_forward(t.out, t.in, t.w, t.b, &d);
		deconv_backward(t.din, t.dw, d.bias ? t.db : NULL, t.r, t.in, t.w, &d);
	} else {
		conv_forward(t.out, t.in, t.w, t.b, &d);
		conv_backward(t.din, t.dw, d.bias ? t.db : NULL, t.r, t.in, t.w, &d);
	}
	weighted_compare(cs, &t);
}

static void run_conv(const cJSON *cs) { run_conv_or_deconv(cs, 0); }
static void run_deconv(const cJSON *cs) { run_conv_or_deconv(cs, 1); }

static void run_ip(const cJSON *cs)
{
	struct ip_desc d = { .n = pint(cs, "n"), .k = pint(cs, "k"), .m = pint(cs, "m"), .bias = pint(cs, "bias") };
	/* in (N, K), w (M, K), b (M), out (N, M) */
	struct weighted t;
	if (weighted_load(cs, d.bias, (int64_t)d.n * d.m, d.m, &t))
		return;
	ip_forward(t.out, t.in, t.w, t.b, &d);
	ip_backward(t.din, t.dw, d.bias ? t.db : NULL, t.r, t.in, t.w, &d);
	weighted_compare(cs, &t);
}

static void run_pool(const cJSON *cs)
{
	struct pool_desc d = { .n = pint(cs, "n"), .c = pint(cs, "c"), .h_in = pint(cs, "h"), .w_in = pint(cs, "w"),
			       .kh = pint(cs, "kh"), .kw = pint(cs, "kw"), .sh = pint(cs, "sh"), .sw = pint(cs, "sw"),
			       .ph = pint(cs, "ph"), .pw = pint(cs, "pw"), .global = pint(cs, "glob"),
			       .method = strcmp(pstr(cs, "method"), "MAX") == 0 ? POOL_MAX : POOL_AVE };
	pool_out_size(&d);
	CHECK_EQ_INT(d.h_out, dim(cs, "out", 2));
	CHECK_EQ_INT(d.w_out, dim(cs, "out", 3));
	int64_t n_in, n_out;
	float *in = must_load(cs, "in", &n_in);    /* (N, C, H, W) */
	float *r = must_load(cs, "R_out", &n_out); /* (N, C, H_out, W_out) */
	if (n_out != (int64_t)d.n * d.c * d.h_out * d.w_out) { /* the manifest and the layer disagree */
		bad_size(cs, n_out, (int64_t)d.n * d.c * d.h_out * d.w_out);
		return;
	}
	float *out = fvec(n_out), *din = fvec(n_in);
	int32_t *mask = talloc((size_t)n_out * sizeof(int32_t));
	pool_forward(out, mask, in, &d);
	compare(cs, "out", out, n_out);
	pool_backward(din, r, mask, &d);
	compare(cs, "d_in", din, n_in);
}

/* relu, sigmoid, tanh, power: one input, one output of the same size */
static void run_act(const cJSON *cs)
{
	const char *layer = cJSON_GetObjectItemCaseSensitive(cs, "layer")->valuestring;
	int64_t n;
	float *in = must_load(cs, "in", &n), *r = must_load(cs, "R_out", NULL);
	float *out = fvec(n), *din = fvec(n);
	float slope = (float)pnum(cs, "slope"), power = (float)pnum(cs, "power");
	float scale = (float)pnum(cs, "scale"), shift = (float)pnum(cs, "shift");
	if (strcmp(layer, "relu") == 0) {
		relu_forward(out, in, n, slope);
		relu_backward(din, r, in, n, slope);
	} else if (strcmp(layer, "sigmoid") == 0) {
		sigmoid_forward(out, in, n);
		sigmoid_backward(din, r, out, n);
	} else if (strcmp(layer, "tanh") == 0) {
		tanh_forward(out, in, n);
		tanh_backward(din, r, out, n);
	} else {
		power_forward(out, in, n, power, scale, shift);
		power_backward(din, r, in, n, power, scale, shift);
	}
	compare(cs, "out", out, n);
	compare(cs, "d_in", din, n);
}

static void run_lrn(const cJSON *cs)
{
	struct lrn_desc d = { .n = pint(cs, "n"), .c = pint(cs, "c"), .h = pint(cs, "h"), .w = pint(cs, "w"),
			      .size = pint(cs, "size"), .alpha = (float)pnum(cs, "alpha"),
			      .beta = (float)pnum(cs, "beta"), .k = (float)pnum(cs, "k") };
	int64_t n;
	float *in = must_load(cs, "in", &n), *r = must_load(cs, "R_out", NULL); /* (N, C, H, W) */
	float *out = fvec(n), *scale = fvec(n), *din = fvec(n);
	lrn_forward(out, scale, in, &d);
	compare(cs, "out", out, n);
	lrn_backward(din, r, out, in, scale, &d);
	compare(cs, "d_in", din, n);
}

static void run_bn(const cJSON *cs)
{
	struct bn_desc d = { .n = pint(cs, "n"), .c = pint(cs, "c"), .h = pint(cs, "h"), .w = pint(cs, "w"),
			     .eps = (float)pnum(cs, "eps"), .moving_average_fraction = 0.999f,
			     .use_global_stats = pint(cs, "global_stats") };
	int64_t n;
	float *in = must_load(cs, "in", &n), *r = must_load(cs, "R_out", NULL); /* (N, C, H, W) */
	float *out = fvec(n), *din = fvec(n);
	float *mean_acc = fvec(d.c), *var_acc = fvec(d.c), factor = 0.0f; /* (C), (C), (1) */
	float *saved_mean = fvec(d.c), *saved_invstd = fvec(d.c);
	if (d.use_global_stats) {
		memcpy(mean_acc, must_load(cs, "mean_acc", NULL), (size_t)d.c * sizeof(float));
		memcpy(var_acc, must_load(cs, "var_acc", NULL), (size_t)d.c * sizeof(float));
		factor = must_load(cs, "factor", NULL)[0];
	}
	bn_forward(out, mean_acc, var_acc, &factor, saved_mean, saved_invstd, in, &d, 1);
	compare(cs, "out", out, n);
	if (!d.use_global_stats) { /* one step from zero: the batch mean and unbiased variance */
		compare(cs, "mean_acc", mean_acc, d.c);
		compare(cs, "var_acc", var_acc, d.c);
		CHECK(factor == 1.0f);
	}
	bn_backward(din, r, out, saved_invstd, &d, d.use_global_stats);
	compare(cs, "d_in", din, n);
}

static void run_scale(const cJSON *cs)
{
	struct scale_desc d = { .n = pint(cs, "n"), .c = pint(cs, "c"), .inner = pint(cs, "inner"),
				.bias = pint(cs, "bias") };
	int64_t n;
	float *in = must_load(cs, "in", &n), *r = must_load(cs, "R_out", NULL); /* (N, C, inner) */
	float *gamma = must_load(cs, "gamma", NULL);                            /* (C) */
	float *beta = d.bias ? must_load(cs, "beta", NULL) : NULL;              /* (C) */
	float *out = fvec(n), *din = fvec(n), *dg = fvec(d.c), *dbeta = fvec(d.c);
	scale_forward(out, in, gamma, beta, &d);
	compare(cs, "out", out, n);
	scale_backward(din, dg, d.bias ? dbeta : NULL, r, in, gamma, &d);
	compare(cs, "d_in", din, n);
	compare(cs, "d_gamma", dg, d.c);
	if (d.bias)
		compare(cs, "d_beta", dbeta, d.c);
}

#define MAXK 8

static void run_eltwise(const cJSON *cs)
{
	int k = pint(cs, "k");
	const char *op = pstr(cs, "op");
	enum eltwise_op e = strcmp(op, "SUM") == 0 ? ELTWISE_SUM : strcmp(op, "PROD") == 0 ? ELTWISE_PROD : ELTWISE_MAX;
	float coeffs[MAXK];
	const cJSON *cj = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "params"), "coeffs");
	int nco = cJSON_GetArraySize(cj);
	for (int i = 0; i < nco && i < MAXK; i++)
		coeffs[i] = (float)cJSON_GetArrayItem(cj, i)->valuedouble;
	if (k < 1 || k > MAXK) {
		check_current_failed = 1;
		return;
	}
	const float *in[MAXK];
	float *din[MAXK];
	int64_t n = 0;
	for (int i = 0; i < k; i++) {
		char name[16];
		snprintf(name, sizeof name, "in%d", i);
		in[i] = must_load(cs, name, &n); /* (N, C, H, W) each */
		din[i] = fvec(n);
	}
	float *r = must_load(cs, "R_out", NULL), *out = fvec(n);
	int32_t *argmax = talloc((size_t)n * sizeof(int32_t));
	eltwise_forward(out, argmax, in, k, n, e, nco ? coeffs : NULL);
	compare(cs, "out", out, n);
	eltwise_backward(din, r, in, out, argmax, k, n, e, nco ? coeffs : NULL);
	for (int i = 0; i < k; i++) {
		char name[16];
		snprintf(name, sizeof name, "d_in%d", i);
		compare(cs, name, din[i], n);
	}
}

static void run_concat(const cJSON *cs)
{
	const cJSON *cj = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "params"), "c");
	int k = cJSON_GetArraySize(cj), n = pint(cs, "n"), inner = pint(cs, "inner"), c[MAXK], ctot = 0;
	if (k < 1 || k > MAXK) {
		check_current_failed = 1;
		return;
	}
	const float *in[MAXK];
	float *din[MAXK];
	int64_t sz[MAXK];
	for (int i = 0; i < k; i++) {
		char name[16];
		c[i] = cJSON_GetArrayItem(cj, i)->valueint;
		ctot += c[i];
		snprintf(name, sizeof name, "in%d", i);
		in[i] = must_load(cs, name, &sz[i]); /* (N, C_i, inner) */
		din[i] = fvec(sz[i]);
	}
	int64_t n_out = (int64_t)n * ctot * inner; /* (N, ΣC_i, inner) */
	float *r = must_load(cs, "R_out", NULL), *out = fvec(n_out);
	concat_forward(out, in, c, k, n, inner);
	compare(cs, "out", out, n_out);
	concat_backward(din, r, c, k, n, inner);
	for (int i = 0; i < k; i++) {
		char name[16];
		snprintf(name, sizeof name, "d_in%d", i);
		compare(cs, name, din[i], sz[i]);
	}
}

static void run_softmax(const cJSON *cs)
{
	int n = pint(cs, "n"), c = pint(cs, "c"), inner = pint(cs, "inner");
	int64_t cnt;
	float *in = must_load(cs, "in", &cnt), *r = must_load(cs, "R_out", NULL); /* (N, C, inner) */
	float *out = fvec(cnt), *din = fvec(cnt);
	softmax_forward(out, in, n, c, inner);
	compare(cs, "out", out, cnt);
	softmax_backward(din, r, out, n, c, inner);
	compare(cs, "d_in", din, cnt);
}

static void run_softmax_loss(const cJSON *cs)
{
	int n = pint(cs, "n"), c = pint(cs, "c"), inner = pint(cs, "inner"), ignore = pint(cs, "ignore_label");
	float lw = (float)pnum(cs, "loss_weight");
	int64_t cnt;
	float *in = must_load(cs, "in", &cnt);           /* (N, C, inner) */
	float *labels = must_load(cs, "labels", NULL);   /* (N, inner) */
	float *prob = fvec(cnt), *din = fvec(cnt);
	static const char *const norms[] = { "FULL", "VALID", "BATCH_SIZE", "NONE" };
	enum loss_norm norm = LOSS_NORM_VALID;
	for (int k = 0; k < 4; k++)
		if (!strcmp(pstr(cs, "norm"), norms[k]))
			norm = (enum loss_norm)k;
	float loss = softmax_loss_forward(prob, in, labels, n, c, inner, ignore, norm);
	compare(cs, "prob", prob, cnt);
	compare(cs, "loss", &loss, 1);
	softmax_loss_backward(din, prob, labels, n, c, inner, ignore, norm, lw);
	compare(cs, "d_in", din, cnt);
}

static void run_accuracy(const cJSON *cs)
{
	float *in = must_load(cs, "in", NULL), *labels = must_load(cs, "labels", NULL);
	float acc = accuracy_forward(in, labels, pint(cs, "n"), pint(cs, "c"), pint(cs, "inner"),
				     pint(cs, "top_k"), pint(cs, "ignore_label"));
	compare(cs, "acc", &acc, 1);
}

/* loss = Σ(a−b)²/(2N); R_loss plays the loss weight, into both bottoms */
static void run_euclidean(const cJSON *cs)
{
	int64_t cnt;
	float *a = must_load(cs, "a", &cnt), *b = must_load(cs, "b", NULL), *r = must_load(cs, "R_loss", NULL);
	float *diff = fvec(cnt), *da = fvec(cnt), *db = fvec(cnt);
	float loss = euclidean_loss_forward(diff, a, b, pint(cs, "n"), cnt);
	compare(cs, "loss", &loss, 1);
	euclidean_loss_backward(da, db, diff, pint(cs, "n"), cnt, r[0]);
	compare(cs, "d_a", da, cnt);
	compare(cs, "d_b", db, cnt);
}

/* params in_shape, out_shape, off: one per axis (0 before crop_param.axis) */
static void run_crop(const cJSON *cs)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(cs, "params");
	struct crop_desc d = { .ndim = 4 };
	for (int a = 0; a < 4; a++) {
		d.in[a] = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "in_shape"), a)->valueint;
		d.out[a] = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "out_shape"), a)->valueint;
		d.off[a] = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "off"), a)->valueint;
	}
	int64_t cnt, n_out;
	float *in = must_load(cs, "in", &cnt), *r = must_load(cs, "R_out", &n_out);
	float *out = fvec(n_out), *din = fvec(cnt);
	crop_forward(out, in, &d);
	compare(cs, "out", out, n_out);
	crop_backward(din, r, &d);
	compare(cs, "d_in", din, cnt);
}

/* Runs fn on every case of the given layer types (a NULL-terminated list) */
static void for_cases(const char *const *layers, void (*fn)(const cJSON *))
{
	const cJSON *cs;
	int ran = 0;
	cJSON_ArrayForEach(cs, cJSON_GetObjectItemCaseSensitive(manifest, "cases")) {
		const cJSON *layer = cJSON_GetObjectItemCaseSensitive(cs, "layer");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(cs, "name");
		if (!cJSON_IsString(layer) || !cJSON_IsString(name))
			continue;
		int match = 0;
		for (const char *const *l = layers; *l; l++)
			match |= strcmp(layer->valuestring, *l) == 0;
		if (!match)
			continue;
		case_worst = 0.0;
		int before = check_current_failed;
		check_current_failed = 0;
		fn(cs);
		printf("       %-58s worst %.1e%s\n", name->valuestring, case_worst,
		       check_current_failed ? "  FAILED" : "");
		check_current_failed |= before;
		tfree_all();
		ran++;
	}
	if (!ran)
		fprintf(stderr, "  the manifest has no %s case\n", layers[0]);
	CHECK(ran > 0);
}

#define PARITY(fn, ...)                                                  \
	static void parity_##fn(void)                                    \
	{                                                                \
		static const char *const layers[] = { __VA_ARGS__, NULL }; \
		for_cases(layers, run_##fn);                             \
	}

PARITY(conv, "conv")
PARITY(deconv, "deconv")
PARITY(ip, "ip")
PARITY(pool, "pool")
PARITY(act, "relu", "sigmoid", "tanh", "power")
PARITY(lrn, "lrn")
PARITY(bn, "bn")
PARITY(scale, "scale")
PARITY(eltwise, "eltwise")
PARITY(concat, "concat")
PARITY(softmax, "softmax")
PARITY(softmax_loss, "softmax_loss")
PARITY(accuracy, "accuracy")
PARITY(euclidean, "euclidean")
PARITY(crop, "crop")

/* ---- running the script and cleaning up ---- */

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0, got;
	do {
		if (len + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = 2 * cap + 4096 + 1);
			if (!nb)
				break;
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
	} while (got > 0);
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

static void remove_outputs(void)
{
	char path[512];
	const cJSON *cs, *t;
	cJSON_ArrayForEach(cs, cJSON_GetObjectItemCaseSensitive(manifest, "cases"))
		cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(cs, "tensors")) {
			const cJSON *file = cJSON_GetObjectItemCaseSensitive(t, "file");
			if (cJSON_IsString(file) && !strchr(file->valuestring, '/')) {
				snprintf(path, sizeof path, "%s/%s", parity_dir, file->valuestring);
				unlink(path);
			}
		}
	snprintf(path, sizeof path, "%s/manifest.json", parity_dir);
	unlink(path);
	if (rmdir(parity_dir) != 0)
		fprintf(stderr, "  note: %s was left behind (files the manifest does not name)\n", parity_dir);
}

int main(void)
{
	if (access(parity_script, R_OK) != 0)
		return check_cannot_start("test_parity: %s not found: run from the repository root", parity_script);
	if (!check_tmpdir(parity_dir, sizeof parity_dir))
		return check_cannot_start("test_parity: mkdtemp: %s", strerror(errno));
	char cmd[256];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", parity_script, parity_dir);
	int rc = system(cmd);
	int code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
	if (code == 77 || code == 127) {
		rmdir(parity_dir);
		check_need("the reference layers against PyTorch",
			   code == 77 ? "/usr/bin/python3 has no torch (Debian's python3-torch)"
				      : "/usr/bin/python3 is missing (Debian's python3-torch)");
		return check_summary();
	}
	char mpath[128];
	snprintf(mpath, sizeof mpath, "%s/manifest.json", parity_dir);
	char *text = code == 0 ? read_all(mpath) : NULL;
	manifest = text ? cJSON_Parse(text) : NULL;
	free(text);
	if (!manifest)
		return check_cannot_start("test_parity: %s exited %d and left no readable %s", parity_script, code, mpath);
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(manifest, "torch");
	printf("       PyTorch %s, tolerance max|c - torch| / max(1, max|torch|) < %g\n",
	       cJSON_IsString(ver) ? ver->valuestring : "?", parity_tol);

	RUN(parity_conv);
	RUN(parity_deconv);
	RUN(parity_ip);
	RUN(parity_pool);
	RUN(parity_act);
	RUN(parity_lrn);
	RUN(parity_bn);
	RUN(parity_scale);
	RUN(parity_eltwise);
	RUN(parity_concat);
	RUN(parity_softmax);
	RUN(parity_softmax_loss);
	RUN(parity_accuracy);
	RUN(parity_euclidean);
	RUN(parity_crop);

	remove_outputs();
	cJSON_Delete(manifest);
	return check_summary();
}
