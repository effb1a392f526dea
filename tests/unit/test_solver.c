/* test_solver.c — the six solvers (networks/solver.c): each one's first step against
 * numbers worked out by hand, three steps against an independent float64 statement of
 * Caffe's rules, lr_mult 0 and decay_mult, iter_size, clipping order, learning-rate
 * policies through solver_step, bad configs, and torch.optim parity.
 *
 * Parity runs `/usr/bin/python3 tests/parity/solver.py DIR` (from the repository
 * root), which writes seeded parameters and gradients and torch's parameters after
 * each of three constant-rate steps; the comparison is the normalised error
 *
 *     max|c - torch| / max(1, max|torch|)  <  1e-5      (parity_tol)
 *
 * Without torch in /usr/bin/python3 (Debian's python3-torch, which `make test`
 * installs) that test is a counted skip, or a failure where CI is set (check_need). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../networks/graph.h"
#include "../../networks/net.h"
#include "../../networks/solver.h"
#include "../../networks/train.h"
#include "check.h"
#include "netfix.h"

/* fc1: weights (2, 3) lr_mult 1 decay_mult 1, bias (2) lr_mult 2 decay_mult 0;
 * fc2: weights (2, 2) lr_mult 0 (frozen), bias (2) lr_mult 0.5 decay_mult 2. */
static const char two_fc[] =
	"name: \"two_fc\"\n"
	"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 1 dim: 3 } } }\n"
	"layer { name: \"fc1\" type: \"InnerProduct\" bottom: \"data\" top: \"fc1\"\n"
	"  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }\n"
	"  inner_product_param { num_output: 2 weight_filler { type: \"uniform\" min: -1 max: 1 }\n"
	"    bias_filler { type: \"uniform\" min: -1 max: 1 } } }\n"
	"layer { name: \"fc2\" type: \"InnerProduct\" bottom: \"fc1\" top: \"fc2\"\n"
	"  param { lr_mult: 0 } param { lr_mult: 0.5 decay_mult: 2 }\n"
	"  inner_product_param { num_output: 2 weight_filler { type: \"uniform\" min: -1 max: 1 }\n"
	"    bias_filler { type: \"uniform\" min: -1 max: 1 } } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc2\" bottom: \"label\" top: \"loss\" }\n";

static int two_fc_setup(struct netfix *f)
{
	struct net_input in = { .n = 1, .c = 3, .h = 1, .w = 1, .classes = 2 };
	if (netfix_open(f, two_fc, &in, NULL, 3))
		return -1;
	if (graph_nparam(f->gr) != 4 || graph_param_count(f->gr) != 6 + 2 + 4 + 2) {
		fprintf(stderr, "  two_fc: %d blobs, %lld values\n", graph_nparam(f->gr),
			(long long)graph_param_count(f->gr));
		netfix_close(f);
		return -1;
	}
	return 0;
}

/* the gradient of element j of the arena at step t: fixed, varied, signs mixed */
static float grad_at(int64_t j, int t)
{
	static const float g[] = { 0.3f, -0.7f, 1.1f, -0.2f, 0.05f, -1.3f, 0.8f, 0.45f, -0.6f, 0.9f, -0.15f };
	return g[(j + 3 * t) % 11] * (t % 2 ? -1.0f : 1.0f) * (1.0f + 0.25f * (float)t);
}

static void set_grads(struct graph *gr, int t, float scale)
{
	float *g = graph_grads(gr);
	for (int64_t j = 0; j < graph_param_count(gr); j++)
		g[j] = scale * grad_at(j, t);
}

/* Caffe's rules (solver.h) for one element, in double: the statement the C code must
 * agree with, written separately from it. */
struct ref_state { double w, h, h2; };

static void ref_step(const struct solver_config *c, struct ref_state *s, double g, double lr, double decay, int t)
{
	double mu = c->momentum, d = c->delta > 0 ? c->delta : 1e-8;
	g += decay * s->w;
	switch (c->type) {
	case SOLVER_SGD:
		s->h = mu * s->h + lr * g;
		s->w -= s->h;
		break;
	case SOLVER_NESTEROV: {
		double prev = s->h;
		s->h = mu * s->h + lr * g;
		s->w -= (1 + mu) * s->h - mu * prev;
		break;
	}
	case SOLVER_ADAGRAD:
		s->h += g * g;
		s->w -= lr * g / (sqrt(s->h) + d);
		break;
	case SOLVER_RMSPROP: {
		double rho = c->rms_decay > 0 ? c->rms_decay : 0.99;
		s->h = rho * s->h + (1 - rho) * g * g;
		s->w -= lr * g / (sqrt(s->h) + d);
		break;
	}
	case SOLVER_ADADELTA: {
		s->h = mu * s->h + (1 - mu) * g * g;
		double u = g * sqrt((s->h2 + d) / (s->h + d));
		s->h2 = mu * s->h2 + (1 - mu) * u * u;
		s->w -= lr * u;
		break;
	}
	case SOLVER_ADAM: {
		double b1 = c->momentum, b2 = c->momentum2;
		s->h = b1 * s->h + (1 - b1) * g;
		s->h2 = b2 * s->h2 + (1 - b2) * g * g;
		s->w -= lr * sqrt(1 - pow(b2, t + 1)) / (1 - pow(b1, t + 1)) * s->h / (sqrt(s->h2) + d);
		break;
	}
	}
}

static const struct solver_config configs[] = {
	{ .type = SOLVER_SGD, .base_lr = 0.1, .momentum = 0.9, .weight_decay = 0.01 },
	{ .type = SOLVER_NESTEROV, .base_lr = 0.1, .momentum = 0.9, .weight_decay = 0.01 },
	{ .type = SOLVER_ADAGRAD, .base_lr = 0.1, .delta = 1e-7, .weight_decay = 0.01 },
	{ .type = SOLVER_RMSPROP, .base_lr = 0.01, .rms_decay = 0.9, .weight_decay = 0.01 },
	{ .type = SOLVER_RMSPROP, .base_lr = 0.01, .weight_decay = 0.01 }, /* rms_decay 0: 0.99 */
	{ .type = SOLVER_ADADELTA, .base_lr = 1.0, .momentum = 0.95, .delta = 1e-6, .weight_decay = 0.01 },
	{ .type = SOLVER_ADAM, .base_lr = 0.01, .momentum = 0.9, .momentum2 = 0.999, .weight_decay = 0.01 },
};

/* Three steps of every solver against ref_step, element by element, with the fixture's
 * lr_mult / decay_mult per blob; the frozen blob must not move at all. */
static void test_three_steps(void)
{
	for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
		const struct solver_config *c = &configs[k];
		struct netfix f;
		if (two_fc_setup(&f)) {
			CHECK(0);
			return;
		}
		struct solver *s = NULL;
		struct dd_err err = { 0 };
		CHECK_EQ_INT(solver_create(c, f.gr, &s, &err), DD_OK);
		if (!s) {
			fprintf(stderr, "  %s\n", err.msg);
			netfix_close(&f);
			continue;
		}
		CHECK_EQ_INT(solver_nhistory(s), c->type == SOLVER_ADAM || c->type == SOLVER_ADADELTA ? 2 : 1);
		int64_t n = graph_param_count(f.gr);
		struct ref_state ref[16];
		double lrm[16], dm[16];
		int learned[16];
		float *w = graph_params(f.gr);
		for (int i = 0; i < graph_nparam(f.gr); i++) {
			const struct graph_param *p = graph_param(f.gr, i);
			for (int64_t j = 0; j < p->count; j++) {
				int64_t a = p->w - w + j;
				ref[a] = (struct ref_state){ .w = p->w[j] };
				lrm[a] = p->lr_mult;
				dm[a] = p->decay_mult;
				learned[a] = p->learned;
			}
		}
		double worst = 0;
		for (int t = 0; t < 3; t++) {
			set_grads(f.gr, t, 1);
			double rate = solver_step(s, t);
			CHECK(rate == c->base_lr);
			for (int64_t a = 0; a < n; a++) {
				if (!learned[a]) {
					CHECK(w[a] == (float)ref[a].w); /* frozen: bit for bit */
					continue;
				}
				ref_step(c, &ref[a], grad_at(a, t), c->base_lr * lrm[a], c->weight_decay * dm[a], t);
				double e = fabs(w[a] - ref[a].w) / fmax(1, fabs(ref[a].w));
				worst = fmax(worst, e);
			}
		}
		if (!(worst < 1e-6))
			fprintf(stderr, "  %s (rms_decay %g): worst error %.2e\n", solver_type_name(c->type),
				c->rms_decay, worst);
		CHECK(worst < 1e-6);
		CHECK(!learned[8] && !learned[11] && learned[6] && learned[12]); /* fc2's weights are the frozen ones */
		solver_free(s);
		netfix_close(&f);
	}
}

/* The first step of each, by hand, for a weight of 1 and gradient 2 (decay 0, lr_mult 1). */
static void test_first_step_by_hand(void)
{
	struct {
		struct solver_config c;
		double want; /* w after one step */
	} cases[] = {
		/* v = 0.1 * 2 = 0.2; w = 1 - 0.2 */
		{ { .type = SOLVER_SGD, .base_lr = 0.1, .momentum = 0.9 }, 0.8 },
		/* v = 0.2; w = 1 - (1.9 * 0.2 - 0.9 * 0) */
		{ { .type = SOLVER_NESTEROV, .base_lr = 0.1, .momentum = 0.9 }, 0.62 },
		/* h = 4; w = 1 - 0.1 * 2 / (2 + 1e-8) */
		{ { .type = SOLVER_ADAGRAD, .base_lr = 0.1 }, 1 - 0.2 / (2 + 1e-8) },
		/* h = 0.01 * 4 = 0.04; w = 1 - 0.1 * 2 / (0.2 + 1e-8) ≈ 0 */
		{ { .type = SOLVER_RMSPROP, .base_lr = 0.1 }, 1 - 0.2 / (0.2 + 1e-8) },
		/* h = 0.05 * 4 = 0.2; u = 2 sqrt(1e-6 / (0.2 + 1e-6)); w = 1 - u */
		{ { .type = SOLVER_ADADELTA, .base_lr = 1, .momentum = 0.95, .delta = 1e-6 }, 1 - 2 * sqrt(1e-6 / 0.200001) },
		/* m = 0.2, v = 0.004; w = 1 - 0.01 * sqrt(0.001) / 0.1 * 0.2 / (sqrt(0.004) + 1e-8) ≈ 0.99 */
		{ { .type = SOLVER_ADAM, .base_lr = 0.01, .momentum = 0.9, .momentum2 = 0.999 },
		  1 - 0.01 * sqrt(0.001) / 0.1 * 0.2 / (sqrt(0.004) + 1e-8) },
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		struct netfix f;
		if (two_fc_setup(&f)) {
			CHECK(0);
			return;
		}
		struct solver *s = NULL;
		CHECK_EQ_INT(solver_create(&cases[k].c, f.gr, &s, NULL), DD_OK);
		if (s) {
			const struct graph_param *p = graph_param(f.gr, 0); /* fc1 weights: lr_mult 1 */
			memset(graph_grads(f.gr), 0, (size_t)graph_param_count(f.gr) * sizeof(float));
			p->w[0] = 1;
			p->dw[0] = 2;
			solver_step(s, 0);
			if (!(fabs(p->w[0] - cases[k].want) < 1e-6))
				fprintf(stderr, "  %s: %.9g, by hand %.9g\n", solver_type_name(cases[k].c.type), p->w[0],
					cases[k].want);
			CHECK(fabs(p->w[0] - cases[k].want) < 1e-6);
		}
		solver_free(s);
		netfix_close(&f);
	}
}

/* iter_size 2 fed the sum of two passes equals iter_size 1 fed their mean, bit for
 * bit, decay included (decay comes after the 1/iter_size). */
static void test_iter_size(void)
{
	struct netfix a, b;
	if (two_fc_setup(&a)) {
		CHECK(0);
		return;
	}
	if (two_fc_setup(&b)) {
		CHECK(0);
		netfix_close(&a);
		return;
	}
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 0.1, .momentum = 0.9, .weight_decay = 0.05 };
	struct solver *sa = NULL, *sb = NULL;
	CHECK_EQ_INT(solver_create(&c, a.gr, &sa, NULL), DD_OK);
	c.iter_size = 2;
	CHECK_EQ_INT(solver_create(&c, b.gr, &sb, NULL), DD_OK);
	CHECK_EQ_INT(solver_config_of(sa)->iter_size, 1); /* 0 became Caffe's default */
	int64_t n = graph_param_count(a.gr);
	CHECK(memcmp(graph_params(a.gr), graph_params(b.gr), (size_t)n * sizeof(float)) == 0);
	for (int t = 0; sa && sb && t < 3; t++) {
		set_grads(a.gr, t, 1);
		set_grads(b.gr, t, 2); /* two passes of the same batch add up to twice */
		solver_step(sa, t);
		solver_step(sb, t);
		CHECK(memcmp(graph_params(a.gr), graph_params(b.gr), (size_t)n * sizeof(float)) == 0);
	}
	solver_free(sa);
	solver_free(sb);
	netfix_close(&a);
	netfix_close(&b);
}

/* clip_gradients scales the learned gradients to the given norm, and (as Caffe) acts
 * on the accumulated sum before 1/iter_size. */
static void test_clip(void)
{
	struct netfix f;
	if (two_fc_setup(&f)) {
		CHECK(0);
		return;
	}
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 1, .clip_gradients = 0.5, .iter_size = 2 };
	struct solver *s = NULL;
	CHECK_EQ_INT(solver_create(&c, f.gr, &s, NULL), DD_OK);
	if (s) {
		float w0[16];
		int64_t n = graph_param_count(f.gr);
		memcpy(w0, graph_params(f.gr), (size_t)n * sizeof(float));
		set_grads(f.gr, 0, 10);
		solver_step(s, 0);
		/* with lr 1, lr_mult m and no momentum, w0 - w = m * g_used: recover g_used */
		double sq = 0;
		for (int i = 0; i < graph_nparam(f.gr); i++) {
			const struct graph_param *p = graph_param(f.gr, i);
			for (int64_t j = 0; p->learned && j < p->count; j++) {
				double g = (w0[p->w - graph_params(f.gr) + j] - p->w[j]) / p->lr_mult;
				sq += g * g;
			}
		}
		/* clipped to 0.5, then halved */
		CHECK(fabs(sqrt(sq) - 0.25) < 1e-5);
	}
	solver_free(s);
	netfix_close(&f);
}

/* solver_step uses lr_at(iter) and multiplies by lr_mult */
static void test_policy_in_step(void)
{
	struct netfix f;
	if (two_fc_setup(&f)) {
		CHECK(0);
		return;
	}
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 0.5, .policy = LR_STEP, .gamma = 0.1,
				   .stepsize = 2 };
	struct solver *s = NULL;
	CHECK_EQ_INT(solver_create(&c, f.gr, &s, NULL), DD_OK);
	const double want[] = { 0.5, 0.5, 0.05, 0.05, 0.005 };
	for (int t = 0; s && t < 5; t++) {
		const struct graph_param *bias = graph_param(f.gr, 1); /* lr_mult 2 */
		float b0 = bias->w[0];
		memset(graph_grads(f.gr), 0, (size_t)graph_param_count(f.gr) * sizeof(float));
		bias->dw[0] = 1;
		double r = solver_step(s, t);
		CHECK(fabs(r - want[t]) < 1e-12);
		CHECK(fabsf((b0 - bias->w[0]) - (float)(2 * want[t])) < 1e-6f);
	}
	solver_free(s);
	netfix_close(&f);
	/* every policy: the rate solver_step returns and uses is lr_at's */
	for (int pol = LR_FIXED; pol <= LR_SIGMOID; pol++) {
		struct solver_config pc = { .type = SOLVER_SGD, .base_lr = 0.1, .policy = (enum lr_policy)pol,
					    .gamma = 0.5, .power = 2, .stepsize = 3, .max_iter = 10,
					    .stepvalue = { 2, 5 }, .nstepvalue = 2 };
		if (pol == LR_INV || pol == LR_SIGMOID)
			pc.gamma = 0.3;
		if (two_fc_setup(&f)) {
			CHECK(0);
			return;
		}
		s = NULL;
		CHECK_EQ_INT(solver_create(&pc, f.gr, &s, NULL), DD_OK);
		for (int t = 0; s && t < 8; t++) {
			const struct graph_param *w = graph_param(f.gr, 0); /* lr_mult 1 */
			float w0 = w->w[3];
			memset(graph_grads(f.gr), 0, (size_t)graph_param_count(f.gr) * sizeof(float));
			w->dw[3] = 1;
			double r = solver_step(s, t);
			CHECK(r == lr_at(&pc, t));
			if (!(fabsf((w0 - w->w[3]) - (float)r) < 1e-6f))
				fprintf(stderr, "  %s at %d: moved %g, rate %g\n", lr_policy_name((enum lr_policy)pol), t,
					w0 - w->w[3], r);
			CHECK(fabsf((w0 - w->w[3]) - (float)r) < 1e-6f);
		}
		solver_free(s);
		netfix_close(&f);
	}
}

static void test_names(void)
{
	static const char *names[] = { "sgd", "nesterov", "adagrad", "rmsprop", "adadelta", "adam" };
	for (int i = 0; i < 6; i++) {
		enum solver_type t;
		CHECK_EQ_INT(solver_type_parse(names[i], &t, NULL), DD_OK);
		CHECK_STR(solver_type_name(t), names[i]);
	}
	enum solver_type t;
	CHECK_EQ_INT(solver_type_parse("SGD", &t, NULL), DD_EINVAL); /* Caffe's type is case-sensitive too */
	struct dd_err err = { 0 };
	CHECK_EQ_INT(solver_type_parse("lbfgs", &t, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "lbfgs");
	CHECK_CONTAINS(err.msg, "adadelta");
	CHECK_EQ_INT(solver_type_parse(NULL, &t, &err), DD_EINVAL);
	CHECK_STR(solver_type_name((enum solver_type)99), "?");
}

static void test_bad_configs(void)
{
	struct netfix f;
	if (two_fc_setup(&f)) {
		CHECK(0);
		return;
	}
	struct {
		struct solver_config c;
		const char *field;
	} bad[] = {
		{ { .type = SOLVER_SGD, .base_lr = -1 }, "base_lr" },
		{ { .type = SOLVER_SGD, .base_lr = 0.1, .momentum = 1 }, "momentum" },
		{ { .type = SOLVER_ADAM, .base_lr = 0.1, .momentum = 0.9, .momentum2 = 1.5 }, "momentum2" },
		{ { .type = SOLVER_RMSPROP, .base_lr = 0.1, .rms_decay = 1 }, "rms_decay" },
		{ { .type = SOLVER_ADAGRAD, .base_lr = 0.1, .delta = -1 }, "delta" },
		{ { .type = SOLVER_SGD, .base_lr = 0.1, .iter_size = -2 }, "iter_size" },
		{ { .type = SOLVER_SGD, .base_lr = 0.1, .weight_decay = -0.1 }, "weight_decay" },
		{ { .type = (enum solver_type)42, .base_lr = 0.1 }, "solver type" },
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		struct solver *s = (struct solver *)&f; /* must come back NULL */
		struct dd_err err = { 0 };
		CHECK_EQ_INT(solver_create(&bad[k].c, f.gr, &s, &err), DD_EINVAL);
		CHECK(s == NULL);
		CHECK_CONTAINS(err.msg, bad[k].field);
	}
	solver_free(NULL);
	netfix_close(&f);
}

/* ---- torch.optim parity ---- */

static const double parity_tol = 1e-5;
static char parity_dir[64];

static char *read_all(const char *path)
{
	char *buf = NULL;
	size_t len;
	return fs_read_file(path, 16u << 20, &buf, &len, NULL) == DD_OK ? buf : NULL;
}

/* n floats of the case's tensor name into out; 0, or -1 with a message */
static int load(const cJSON *cs, const char *name, float *out, int64_t n)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "tensors"), name);
	const cJSON *file = cJSON_GetObjectItemCaseSensitive(t, "file");
	if (!cJSON_IsString(file)) {
		fprintf(stderr, "  manifest: no tensor %s\n", name);
		return -1;
	}
	char path[512];
	snprintf(path, sizeof path, "%s/%s", parity_dir, file->valuestring);
	size_t got = check_read_f32(path, out, n);
	if (got != (size_t)n) {
		fprintf(stderr, "  %s: %zu floats, want %lld\n", path, got, (long long)n);
		return -1;
	}
	return 0;
}

static double pnum(const cJSON *cs, const char *key, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "params"), key);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static double nerr(const float *got, const float *want, int64_t n)
{
	double ref;
	double diff = check_max_diff(got, want, n, &ref, NULL);
	return diff / fmax(1, ref);
}

static void parity_case(const cJSON *cs, double *worst_all)
{
	const char *name = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
	const char *solver = cJSON_GetObjectItemCaseSensitive(cs, "solver")->valuestring;
	int m = cJSON_GetObjectItemCaseSensitive(cs, "m")->valueint, k = cJSON_GetObjectItemCaseSensitive(cs, "k")->valueint;
	int steps = cJSON_GetObjectItemCaseSensitive(cs, "steps")->valueint;
	char text[1024];
	snprintf(text, sizeof text,
		 "name: \"p\"\n"
		 "layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 1 dim: %d } } }\n"
		 "layer { name: \"fc\" type: \"InnerProduct\" bottom: \"data\" top: \"fc\"\n"
		 "  inner_product_param { num_output: %d } }\n"
		 "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n",
		 k, m);
	struct net_input in = { .n = 1, .c = k, .h = 1, .w = 1, .classes = m };
	struct netfix f;
	if (m < 1 || k < 1 || m * k > 4096 || netfix_open(&f, text, &in, NULL, 3)) {
		CHECK(0);
		return;
	}
	struct solver_config c = { .base_lr = pnum(cs, "lr", 0), .momentum = pnum(cs, "momentum", 0),
				   .momentum2 = pnum(cs, "momentum2", 0), .delta = pnum(cs, "delta", 0),
				   .rms_decay = pnum(cs, "rms_decay", 0), .weight_decay = pnum(cs, "weight_decay", 0) };
	struct solver *s = NULL;
	struct dd_err err = { 0 };
	const struct graph_param *w = graph_param(f.gr, 0), *b = graph_param(f.gr, 1);
	static float want_w[4096], want_b[64];
	if (solver_type_parse(solver, &c.type, &err) || solver_create(&c, f.gr, &s, &err) || graph_nparam(f.gr) != 2 ||
	    w->count != (int64_t)m * k || b->count != m || m > 64) {
		fprintf(stderr, "  %s: %s\n", name, err.msg);
		CHECK(0);
		goto out;
	}
	if (load(cs, "w0", w->w, w->count) || load(cs, "b0", b->w, b->count)) {
		CHECK(0);
		goto out;
	}
	double worst = 0;
	for (int t = 0; t < steps; t++) {
		char gw[16], gb[16], ww[16], wb[16];
		snprintf(gw, sizeof gw, "gw%d", t);
		snprintf(gb, sizeof gb, "gb%d", t);
		snprintf(ww, sizeof ww, "w%d", t + 1);
		snprintf(wb, sizeof wb, "b%d", t + 1);
		if (load(cs, gw, w->dw, w->count) || load(cs, gb, b->dw, b->count) || load(cs, ww, want_w, w->count) ||
		    load(cs, wb, want_b, b->count)) {
			CHECK(0);
			goto out;
		}
		solver_step(s, t);
		worst = fmax(worst, fmax(nerr(w->w, want_w, w->count), nerr(b->w, want_b, b->count)));
	}
	printf("       %-22s normalised error %.2e after %d steps\n", name, worst, steps);
	*worst_all = fmax(*worst_all, worst);
	if (!(worst < parity_tol))
		fprintf(stderr, "  %s: normalised error %.2e >= %g\n", name, worst, parity_tol);
	CHECK(worst < parity_tol);
out:
	solver_free(s);
	netfix_close(&f);
}

static void parity_torch(void)
{
	if (access("tests/parity/solver.py", R_OK) != 0) {
		fprintf(stderr, "  tests/parity/solver.py not found: run from the repository root\n");
		check_current_failed = 1;
		return;
	}
	if (!check_tmpdir(parity_dir, sizeof parity_dir)) {
		check_current_failed = 1;
		return;
	}
	char cmd[256];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/parity/solver.py %s", parity_dir);
	int rc = system(cmd);
	int code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
	if (code == 77 || code == 127) {
		fs_rm_rf(parity_dir, NULL);
		check_need("torch.optim parity",
			   code == 77 ? "/usr/bin/python3 has no torch (Debian's python3-torch)"
				      : "/usr/bin/python3 is missing (Debian's python3-torch)");
		return;
	}
	char mpath[128];
	snprintf(mpath, sizeof mpath, "%s/manifest.json", parity_dir);
	char *text = code == 0 ? read_all(mpath) : NULL;
	cJSON *man = text ? cJSON_Parse(text) : NULL;
	free(text);
	if (!man) {
		fprintf(stderr, "  solver.py exited %d and left no readable %s\n", code, mpath);
		check_current_failed = 1;
		fs_rm_rf(parity_dir, NULL);
		return;
	}
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(man, "torch"), *cs;
	printf("       PyTorch %s, tolerance max|c - torch| / max(1, max|torch|) < %g\n",
	       cJSON_IsString(ver) ? ver->valuestring : "?", parity_tol);
	double worst = 0;
	int ncase = 0;
	cJSON_ArrayForEach(cs, cJSON_GetObjectItemCaseSensitive(man, "cases"))
	{
		parity_case(cs, &worst);
		ncase++;
	}
	CHECK(ncase >= 6);
	printf("       worst over %d cases: %.2e\n", ncase, worst);
	cJSON_Delete(man);
	fs_rm_rf(parity_dir, NULL);
}

/* train_lr_config: DIGITS' positions as percentages of all iterations, and the
 * defaults train_run falls back on (what the LR preview shows) */
static void test_lr_config(void)
{
	struct train_opts o;
	struct solver_config c;
	train_opts_default(&o); /* step, 33%, gamma 0.1, base 0.01 */
	train_lr_config(&o, 300, &c);
	CHECK(c.policy == LR_STEP && c.base_lr == 0.01 && c.gamma == 0.1);
	CHECK_EQ_INT(c.stepsize, 99);
	CHECK_EQ_INT(c.max_iter, 300);
	CHECK(lr_at(&c, 98) == 0.01 && fabs(lr_at(&c, 99) - 0.001) < 1e-15);
	train_lr_config(&o, 10, &c); /* 3.3 rounds to 3 */
	CHECK_EQ_INT(c.stepsize, 3);
	train_lr_config(&o, 1, &c); /* never below 1 */
	CHECK_EQ_INT(c.stepsize, 1);
	o.policy = LR_MULTISTEP;
	o.multistep_pct[0] = 50;
	o.multistep_pct[1] = 85;
	o.nmultistep = 2;
	o.gamma = 0.5;
	train_lr_config(&o, 100, &c);
	CHECK_EQ_INT(c.nstepvalue, 2);
	CHECK_EQ_INT(c.stepvalue[0], 50);
	CHECK_EQ_INT(c.stepvalue[1], 85);
	CHECK(lr_at(&c, 49) == 0.01 && lr_at(&c, 50) == 0.005 && lr_at(&c, 85) == 0.0025);
	train_opts_default(&o);
	o.policy = LR_INV;
	o.base_lr = 0;
	o.gamma = 0;
	train_lr_config(&o, 100, &c);
	CHECK(c.base_lr == 0.01 && c.gamma == 0.1 && c.power == 0.75); /* 0: the defaults */
	o.policy = LR_POLY;
	train_lr_config(&o, 100, &c);
	CHECK(c.power == 1 && lr_at(&c, 50) == 0.005);
	o.policy = LR_SIGMOID;
	o.step_pct = 50;
	train_lr_config(&o, 300, &c);
	CHECK_EQ_INT(c.stepsize, 150);
	CHECK(lr_at(&c, 150) == 0.005);
}

int main(void)
{
	RUN(test_lr_config);
	RUN(test_names);
	RUN(test_bad_configs);
	RUN(test_first_step_by_hand);
	RUN(test_three_steps);
	RUN(test_iter_size);
	RUN(test_clip);
	RUN(test_policy_in_step);
	RUN(parity_torch);
	return check_summary();
}
