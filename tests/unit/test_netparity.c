/* test_netparity.c — whole standard networks (LeNet, AlexNet) against PyTorch.
 *
 * For each network this instantiates its TRAIN stage (LeNet: batch 8, 1x28x28;
 * AlexNet: batch 2, 3x227x227; 10 classes), lets graph_create fill the parameters,
 * and writes them with train_write_safetensors (the snapshot format of `deepdesk
 * train`) together with a seeded input and labels.  `/usr/bin/python3
 * tests/parity/nets.py DIR NAME` (run from the repository root, where tests/run.sh
 * runs the unit tests) loads that snapshot into the same network written by hand in
 * PyTorch and writes, computed in float64, the last InnerProduct's output, the
 * SoftmaxWithLoss loss and the gradient of every parameter blob.  The C side then runs
 * one training pass (zero grads, forward, backward) on every backend this build has
 * (backend_names(): the same weights and inputs copied into a graph on each) and
 * compares each by the normalised error (ggml's test-backend-ops measure, as
 * test_parity.c)
 *
 *     max|c - torch| / max(1, max|torch|)  <  tol          (LeNet 1e-5, AlexNet 1e-5)
 *
 * and, because max(1, ·) makes that an absolute bound for tensors much smaller than
 * one (AlexNet's deep gradients are ~1e-4), also by the error relative to the
 * tensor's own scale
 *
 *     max|c - torch| / max|torch|  <  rel_tol              (1e-4)
 *
 * so that a gradient of the right size but the wrong values cannot pass.  Measured
 * worst cases: the reference backend (its kernels accumulate in double) normalised
 * 6e-8 (LeNet's output), relative 1.3e-7 (AlexNet's fc6 weights); the cpu backend
 * (oneDNN, float32 accumulation) normalised 3.9e-7 (LeNet's output), relative 9.5e-7
 * (AlexNet's conv1 bias).  The bounds leave 10-25x room above the cpu figures.
 *
 * AlexNet's two Dropout layers: their dropout_ratio is set to 0 in the text before
 * parsing, so the pass runs in training mode (as a training iteration does) with every
 * value kept — the identity PyTorch computes.  Each side's mask generator differs, so
 * a ratio above 0 could not be compared.
 *
 * Without torch in /usr/bin/python3 (Debian's python3-torch, which `make test`
 * installs) each network is a counted skip, or a failure where CI is set (check_need). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../networks/graph.h"
#include "../../networks/net.h"
#include "../../networks/snapshot.h"
#include "check.h"

static const char script[] = "tests/parity/nets.py";
static const double rel_tol = 1e-4;
static char dir[64];
static const char *no_torch; /* why the last case could not ask PyTorch; the next does not build */

/* ---- the graph API in one place ---- */

/* On backend be (NULL: a reference backend of the graph's own, the oracle). */
static int np_graph_create(const struct net_graph *g, struct backend *be, uint64_t seed, struct graph **out,
			   struct dd_err *err)
{
	return graph_create(g, be, seed, out, err);
}

/* One training pass: zero the parameter gradients, forward in training mode,
 * backward.  DD_OK and *loss, or the graph's error. */
static int np_train_pass(struct graph *gr, float *loss, struct dd_err *err)
{
	graph_zero_grads(gr);
	int rc = graph_forward(gr, 1, loss, err);
	return rc ? rc : graph_backward(gr, err);
}

/* ---- small helpers ---- */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) /* [0, 1) */
{
	return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int write_f32(const char *name, const float *v, int64_t n)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(v, sizeof(float), (size_t)n, f) == (size_t)n;
	if (f && fclose(f) != 0)
		ok = 0;
	if (!ok)
		fprintf(stderr, "  cannot write %s\n", path);
	return ok;
}

static cJSON *tensor_spec(const char *file, const struct net_shape *shape)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "file", file);
	cJSON *s = cJSON_AddArrayToObject(t, "shape");
	for (int d = 0; d < shape->ndim; d++)
		cJSON_AddItemToArray(s, cJSON_CreateNumber((double)shape->dim[d]));
	return t;
}

static char *replace_all(const char *text, const char *from, const char *to)
{
	size_t lf = strlen(from), lt = strlen(to), n = 0;
	for (const char *p = text; (p = strstr(p, from)); p += lf)
		n++;
	char *out = malloc(strlen(text) + n * lt + 1), *o = out;
	if (!out)
		return NULL;
	for (const char *p = text, *q; ; p = q + lf) {
		q = strstr(p, from);
		size_t k = q ? (size_t)(q - p) : strlen(p);
		memcpy(o, p, k);
		o += k;
		if (!q)
			break;
		memcpy(o, to, lt);
		o += lt;
	}
	*o = '\0';
	return out;
}

/* ---- what PyTorch wrote ---- */

static cJSON *answer;

static float *load(const char *name, int64_t *count)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(answer, "tensors"), name);
	const cJSON *file = cJSON_GetObjectItemCaseSensitive(t, "file");
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape"), *d;
	if (!cJSON_IsString(file) || !cJSON_IsArray(shape))
		return NULL;
	int64_t n = 1;
	cJSON_ArrayForEach(d, shape)
		n *= d->valueint;
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, file->valuestring);
	float *v = malloc((size_t)(n + 1) * sizeof(float));
	size_t got = v ? check_read_f32(path, v, n) : 0;
	if (got != (size_t)n) {
		fprintf(stderr, "  %s: %zu floats, the shape says %lld\n", path, got, (long long)n);
		free(v);
		return NULL;
	}
	*count = n;
	return v;
}

/* Compare got (n values) with PyTorch's tensor `name`; prints one line. */
static void compare(const char *name, const float *got, int64_t n, const float *want, int64_t m, double tol)
{
	if (!want || m != n) {
		fprintf(stderr, "  %s: PyTorch wrote %lld values, the graph has %lld\n", name, (long long)(want ? m : 0),
			(long long)n);
		check_current_failed = 1;
		return;
	}
	double ref;
	int64_t at;
	double diff = check_max_diff(got, want, n, &ref, &at);
	double err = diff / fmax(1.0, ref), rel = ref > 0 ? diff / ref : diff;
	int bad = !(err < tol) || !(rel < rel_tol);
	printf("       %-14s max|torch| %.2e  normalised %.1e  relative %.1e%s\n", name, ref, err, rel,
	       bad ? "  FAILED" : "");
	if (bad) {
		fprintf(stderr, "  %s: error %.2e (tolerance %g), relative %.2e (%g); at [%lld]: %.8g, PyTorch %.8g\n",
			name, err, tol, rel, rel_tol, (long long)at, got[at], want[at]);
		check_current_failed = 1;
	}
}

/* ---- one network ---- */

struct np_case {
	const char *net;
	int n, c, h, w, classes;
	double tol;
	double lo, hi; /* the input's range: mean-subtracted pixels */
};

static double secs_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* The training pass on backend `name`, from src's parameters and inputs (src: the
 * graph whose snapshot PyTorch read), compared with PyTorch's answer. */
static void run_backend(const struct np_case *k, const struct net_graph *g, struct graph *src, const char *name)
{
	struct dd_err err = { 0, "" };
	struct backend *be = NULL;
	struct graph *gr = NULL;
	if (backend_create(name, &be, &err) || np_graph_create(g, be, 1, &gr, &err)) {
		fprintf(stderr, "  %s on %s: %s\n", k->net, name, err.msg);
		check_current_failed = 1;
		goto done;
	}
	int np = graph_nparam(gr);
	CHECK_EQ_INT(np, graph_nparam(src));
	for (int i = 0; i < np && i < graph_nparam(src); i++) {
		const struct graph_param *a = graph_param(src, i), *b = graph_param(gr, i);
		CHECK_EQ_INT(a->count, b->count);
		if (a->count == b->count)
			memcpy(b->w, a->w, (size_t)a->count * sizeof(float));
	}
	for (const char *const *blob = (const char *const[]){ "data", "label", NULL }; *blob; blob++) {
		struct net_shape sh;
		float *from = graph_blob(src, *blob, &sh), *to = graph_blob(gr, *blob, NULL);
		int64_t n = 1;
		for (int d = 0; d < sh.ndim; d++)
			n *= sh.dim[d];
		CHECK(from && to);
		if (from && to)
			memcpy(to, from, (size_t)n * sizeof(float));
	}

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	float loss = NAN;
	if (np_train_pass(gr, &loss, &err)) {
		fprintf(stderr, "  %s on %s: %s\n", k->net, name, err.msg);
		check_current_failed = 1;
		goto done;
	}
	printf("       %s on backend %s: one pass %.1f s\n", k->net, backend_name(be), secs_since(&t0));

	/* the output: the last InnerProduct's top */
	const char *outblob = NULL;
	for (int i = 0; i < g->nnode; i++)
		if (g->node[i].l.type == NET_INNER_PRODUCT)
			outblob = g->blob[g->node[i].top[0]].name;
	float *out = outblob ? graph_blob(gr, outblob, NULL) : NULL;
	CHECK(out != NULL);
	int64_t m = 0;
	float *want = load("out", &m);
	if (out)
		compare("out", out, (int64_t)k->n * k->classes, want, m, k->tol);
	free(want);

	const cJSON *tl = cJSON_GetObjectItemCaseSensitive(answer, "loss");
	float tloss = cJSON_IsNumber(tl) ? (float)tl->valuedouble : NAN;
	compare("loss", &loss, 1, &tloss, 1, k->tol);

	/* every parameter gradient, named as in the snapshot: "<layer>.<i>" */
	int idx = 0, compared = 0;
	const char *prev = NULL;
	for (int i = 0; i < np; i++) {
		const struct graph_param *p = graph_param(gr, i);
		idx = prev && strcmp(prev, p->layer) == 0 ? idx + 1 : 0;
		prev = p->layer;
		char pname[128];
		snprintf(pname, sizeof pname, "%s.%d", p->layer, idx);
		want = load(pname, &m);
		compare(pname, p->dw, p->count, want, m, k->tol);
		free(want);
		compared++;
	}
	CHECK(compared > 0);
	CHECK_EQ_INT(compared, cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(answer, "tensors")) - 1);
done:
	graph_free(gr);
	backend_free(be);
}

static void run_case(const struct np_case *k)
{
	struct dd_err err = { 0, "" };
	struct net *def = NULL;
	struct net_graph *g = NULL;
	struct graph *gr = NULL;
	char *text = NULL, *outjson = NULL, path[256], cmd[512];
	cJSON *spec = NULL;
	char what[64];
	answer = NULL;
	snprintf(what, sizeof what, "%s against PyTorch", k->net);
	if (no_torch) { /* AlexNet's weights are not written only to find the same */
		check_need(what, no_torch);
		return;
	}

	const char *std = net_standard_text(k->net);
	CHECK(std != NULL);
	if (!std)
		return;
	text = replace_all(std, "dropout_ratio: 0.5", "dropout_ratio: 0");
	CHECK(text != NULL);
	if (!text)
		goto done;
	struct net_input in = { .n = k->n, .c = k->c, .h = k->h, .w = k->w, .classes = k->classes };
	if (net_parse(text, strlen(text), &def, &err) || net_instantiate(def, NET_STAGE_TRAIN, &in, &g, &err) ||
	    np_graph_create(g, NULL, 20240601, &gr, &err)) {
		fprintf(stderr, "  %s: %s\n", k->net, err.msg);
		check_current_failed = 1;
		goto done;
	}

	for (int i = 0; i < g->nnode; i++) /* the ratio-0 edit took */
		if (g->node[i].l.type == NET_DROPOUT)
			CHECK(g->node[i].l.dropout.ratio == 0.0f);

	/* inputs: seeded pixels and labels */
	struct net_shape ds, ls;
	float *data = graph_blob(gr, "data", &ds), *label = graph_blob(gr, "label", &ls);
	CHECK(data && label);
	if (!data || !label)
		goto done;
	int64_t nd = 1, nl = 1;
	for (int d = 0; d < ds.ndim; d++)
		nd *= ds.dim[d];
	for (int d = 0; d < ls.ndim; d++)
		nl *= ls.dim[d];
	CHECK_EQ_INT(nd, (int64_t)k->n * k->c * k->h * k->w);
	CHECK_EQ_INT(nl, k->n);
	uint64_t s = 7;
	for (int64_t i = 0; i < nd; i++)
		data[i] = (float)(k->lo + (k->hi - k->lo) * rng_uniform(&s));
	for (int64_t i = 0; i < nl; i++)
		label[i] = (float)(rng_next(&s) % (uint64_t)k->classes);

	char fdata[64], flabel[64], fweights[64];
	snprintf(fdata, sizeof fdata, "%s_data.f32", k->net);
	snprintf(flabel, sizeof flabel, "%s_label.f32", k->net);
	snprintf(fweights, sizeof fweights, "%s.safetensors", k->net);
	snprintf(path, sizeof path, "%s/%s", dir, fweights);
	if (!write_f32(fdata, data, nd) || !write_f32(flabel, label, nl) ||
	    snapshot_save_weights(gr, path, NULL, &err)) {
		fprintf(stderr, "  %s: %s\n", k->net, err.msg);
		check_current_failed = 1;
		goto done;
	}
	spec = cJSON_CreateObject();
	cJSON_AddStringToObject(spec, "net", k->net);
	cJSON_AddNumberToObject(spec, "batch", k->n);
	cJSON_AddNumberToObject(spec, "c", k->c);
	cJSON_AddNumberToObject(spec, "h", k->h);
	cJSON_AddNumberToObject(spec, "w", k->w);
	cJSON_AddNumberToObject(spec, "classes", k->classes);
	cJSON_AddItemToObject(spec, "data", tensor_spec(fdata, &ds));
	cJSON_AddItemToObject(spec, "label", tensor_spec(flabel, &ls));
	cJSON_AddStringToObject(spec, "weights", fweights);
	char *js = cJSON_Print(spec);
	snprintf(path, sizeof path, "%s/%s_in.json", dir, k->net);
	int wrote = js && fs_write_file_atomic(path, js, strlen(js), &err) == DD_OK;
	free(js);
	CHECK(wrote);
	if (!wrote)
		goto done;

	/* PyTorch's answer */
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s", script, dir, k->net);
	int rc = system(cmd);
	int code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
	if (code == 77 || code == 127) {
		no_torch = code == 77 ? "/usr/bin/python3 has no torch (Debian's python3-torch)"
				      : "/usr/bin/python3 is missing (Debian's python3-torch)";
		check_need(what, no_torch);
		goto done;
	}
	size_t len;
	snprintf(path, sizeof path, "%s/%s_out.json", dir, k->net);
	if (code != 0 || fs_read_file(path, 1 << 20, &outjson, &len, &err) || !(answer = cJSON_Parse(outjson))) {
		fprintf(stderr, "  %s exited %d and left no readable %s\n", script, code, path);
		check_current_failed = 1;
		goto done;
	}

	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(answer, "torch");
	printf("       %s batch %d, %dx%dx%d, %d classes: PyTorch %s took %.1f s (float64); tolerance %g\n", k->net,
	       k->n, k->c, k->h, k->w, k->classes, cJSON_IsString(ver) ? ver->valuestring : "?", secs_since(&t0), k->tol);

	/* ours: one training pass on every backend, from the same weights and inputs */
	for (const char *const *b = backend_names(); *b; b++)
		run_backend(k, g, gr, *b);

done:
	for (const char *const *f = (const char *const[]){ "_data.f32", "_label.f32", ".safetensors", "_in.json",
							     "_out.json", NULL };
	     *f; f++) {
		snprintf(path, sizeof path, "%s/%s%s", dir, k->net, *f);
		unlink(path);
	}
	const cJSON *t;
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(answer, "tensors")) {
		const cJSON *file = cJSON_GetObjectItemCaseSensitive(t, "file");
		if (cJSON_IsString(file) && !strchr(file->valuestring, '/')) {
			snprintf(path, sizeof path, "%s/%s", dir, file->valuestring);
			unlink(path);
		}
	}
	cJSON_Delete(answer);
	answer = NULL;
	cJSON_Delete(spec);
	free(outjson);
	graph_free(gr);
	net_graph_free(g);
	net_free(def);
	free(text);
}

static void netparity_lenet(void)
{
	static const struct np_case k = { "lenet", 8, 1, 28, 28, 10, 1e-5, -128.0, 128.0 };
	run_case(&k);
}

static void netparity_alexnet(void)
{
	static const struct np_case k = { "alexnet", 2, 3, 227, 227, 10, 1e-5, -128.0, 128.0 };
	run_case(&k);
}

int main(void)
{
	if (access(script, R_OK) != 0)
		return check_cannot_start("test_netparity: %s not found: run from the repository root", script);
	if (!check_tmpdir(dir, sizeof dir))
		return check_cannot_start("test_netparity: mkdtemp: %s", strerror(errno));
	printf("       normalised error max|c - torch| / max(1, max|torch|), relative max|c - torch| / max|torch| < %g\n",
	       rel_tol);
	RUN(netparity_lenet);
	RUN(netparity_alexnet);
	struct dd_err err;
	fs_rm_rf(dir, &err);
	return check_summary();
}
