/* test_snapshot.c — safetensors writing and strict reading (networks/snapshot.c):
 * bit-exact round trips of tensors, graph weights and solver state (a resumed solver
 * takes the same steps as one never stopped), finetuning onto a changed last layer,
 * every validation error by a hand-made file, the fuzz target over truncated,
 * bit-flipped and garbage inputs, and a check by /usr/bin/python3 (json + struct
 * only) that our files are what the format says. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../networks/graph.h"
#include "../../networks/net.h"
#include "../../networks/snapshot.h"
#include "../../networks/solver.h"
#include "check.h"
#include "netfix.h"

#define FUZZ_REQUIRE(cond) CHECK(cond)
#include "../fuzz/fuzz_safetensors.c"

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
	static char buf[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
	return buf[k];
}

/* files in tmpdir whose name contains ".tmp." (left by an atomic write) */
static int leftovers(void)
{
	DIR *d = opendir(tmpdir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	return n;
}

/* ---- networks ---- */

/* text on 2×1×6×6 inputs of 4 classes, on the reference backend */
static int setup(struct netfix *f, const char *text, uint64_t seed)
{
	struct net_input in = { .n = 2, .c = 1, .h = 6, .w = 6, .classes = 4 };
	return netfix_open(f, text, &in, NULL, seed);
}

#define NET_HEAD                                                                                          \
	"name: \"small\"\n"                                                                               \
	"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } } }\n" \
	"layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"conv\"\n"                   \
	"  convolution_param { num_output: 3 kernel_size: 3\n"                                            \
	"    weight_filler { type: \"gaussian\" std: 0.5 } bias_filler { type: \"uniform\" min: -0.2 max: 0.2 } } }\n" \
	"layer { name: \"pool\" type: \"Pooling\" bottom: \"conv\" top: \"pool\" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
#define NET_FC(name, n)                                                                                   \
	"layer { name: \"" name "\" type: \"InnerProduct\" bottom: \"pool\" top: \"fc\"\n"                \
	"  inner_product_param { num_output: " #n " weight_filler { type: \"xavier\" }\n"                 \
	"    bias_filler { type: \"gaussian\" std: 0.1 } } }\n"                                           \
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n"

static const char net4[] = NET_HEAD NET_FC("fc", 4);
static const char net3[] = NET_HEAD NET_FC("fc", 3);        /* the last layer changed */
static const char net_renamed[] = NET_HEAD NET_FC("fc_new", 4);
static const char net_other[] = /* nothing in common with net4 */
	"name: \"other\"\n"
	"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } } }\n"
	"layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"fc\" inner_product_param { num_output: 4 } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" }\n";

static int params_equal(struct graph *a, struct graph *b)
{
	return graph_param_count(a) == graph_param_count(b) &&
	       memcmp(graph_params(a), graph_params(b), (size_t)graph_param_count(a) * sizeof(float)) == 0;
}

/* ---- tensors ---- */

static void test_st_roundtrip(void)
{
	float a[6] = { 1.5f, -0.0f, NAN, INFINITY, 1e-40f /* subnormal */, -3.25f };
	float s = 42.0f;
	struct st_tensor t[] = {
		{ .name = "a", .ndim = 2, .shape = { 2, 3 }, .data = a },
		{ .name = "scalar", .ndim = 0, .data = &s },
		{ .name = "empty", .ndim = 2, .shape = { 0, 5 }, .data = NULL },
		{ .name = "z.last", .ndim = 1, .shape = { 6 }, .data = a },
	};
	const char *meta[] = { "format", "deepdesk", "iteration", "1234", "rng", "0123456789abcdef", NULL };
	struct dd_err err = { 0 };
	const char *path = tmp_path("t.safetensors");
	CHECK_EQ_INT(st_write(path, t, 4, meta, &err), DD_OK);
	CHECK_EQ_INT(leftovers(), 0);
	struct st_file *f = NULL;
	CHECK_EQ_INT(st_open(path, &f, &err), DD_OK);
	if (!f) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	CHECK_STR(st_meta(f, "iteration"), "1234");
	CHECK_STR(st_meta(f, "rng"), "0123456789abcdef");
	CHECK(st_meta(f, "nope") == NULL);
	CHECK_EQ_INT(st_count(f), 4);
	struct st_tensor u;
	CHECK_EQ_INT(st_find(f, "a", &u), DD_OK);
	CHECK_EQ_INT(u.ndim, 2);
	CHECK_EQ_INT(u.shape[0], 2);
	CHECK_EQ_INT(u.shape[1], 3);
	CHECK(memcmp(u.data, a, sizeof a) == 0); /* bit for bit: NaN, -0, subnormal */
	CHECK_EQ_INT(st_find(f, "scalar", &u), DD_OK);
	CHECK_EQ_INT(u.ndim, 0);
	CHECK(u.data[0] == 42.0f);
	CHECK_EQ_INT(st_find(f, "empty", &u), DD_OK);
	CHECK_EQ_INT(u.shape[0], 0);
	CHECK_EQ_INT(st_find(f, "z.last", &u), DD_OK);
	CHECK(memcmp(u.data, a, sizeof a) == 0);
	CHECK_EQ_INT(st_find(f, "b", &u), DD_ENOENT);
	st_get(f, 0, &u); /* offset order: as written */
	CHECK_STR(u.name, "a");
	st_close(f);
	st_close(NULL);

	/* overwriting is atomic and leaves nothing behind; a refused write leaves the old file */
	CHECK_EQ_INT(st_write(path, t, 1, NULL, &err), DD_OK);
	struct st_tensor dup[] = { t[0], t[0] };
	CHECK_EQ_INT(st_write(path, dup, 2, NULL, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "twice");
	const char *dupmeta[] = { "k", "1", "k", "2", NULL };
	CHECK_EQ_INT(st_write(path, t, 1, dupmeta, &err), DD_EINVAL);
	struct st_tensor badshape = { .name = "x", .ndim = 1, .shape = { -1 }, .data = a };
	CHECK_EQ_INT(st_write(path, &badshape, 1, NULL, &err), DD_EINVAL);
	struct st_tensor reserved = { .name = "__metadata__", .ndim = 1, .shape = { 1 }, .data = a };
	CHECK_EQ_INT(st_write(path, &reserved, 1, NULL, &err), DD_EINVAL);
	CHECK_EQ_INT(st_open(path, &f, &err), DD_OK);
	CHECK(f && st_count(f) == 1 && st_meta(f, "format") == NULL);
	st_close(f);
	CHECK_EQ_INT(st_write(tmp_path("no/such/dir/x.safetensors"), t, 1, NULL, &err) < 0, 1);
	CHECK_CONTAINS(err.msg, "no/such/dir");
	CHECK_EQ_INT(leftovers(), 0);
	CHECK_EQ_INT(st_open(tmp_path("missing.safetensors"), &f, &err), DD_ENOENT);
	CHECK(f == NULL);
}

/* Python, with nothing but json and struct, agrees with our header and data. */
static void test_python_reads(void)
{
	float a[] = { 0.5f, -1.25f, 3.0f, 1e-3f, 7.0f, -8.5f };
	struct st_tensor t[] = { { .name = "conv.0", .ndim = 3, .shape = { 1, 2, 3 }, .data = a },
				 { .name = "conv.1", .ndim = 1, .shape = { 2 }, .data = a + 4 } };
	const char *meta[] = { "format", "deepdesk", NULL };
	const char *path = tmp_path("py.safetensors");
	CHECK_EQ_INT(st_write(path, t, 2, meta, NULL), DD_OK);
	if (access("/usr/bin/python3", X_OK) != 0) {
		check_need("safetensors read by Python", "no /usr/bin/python3 (Debian's python3)");
		return;
	}
	char cmd[1536];
	snprintf(cmd, sizeof cmd,
		 "/usr/bin/python3 -c '\n"
		 "import json, struct, sys\n"
		 "b = open(sys.argv[1], \"rb\").read()\n"
		 "n = struct.unpack(\"<Q\", b[:8])[0]\n"
		 "assert n %% 8 == 0 and 8 + n <= len(b)\n"
		 "h = json.loads(b[8:8 + n].decode(\"utf-8\"))\n"
		 "assert h.pop(\"__metadata__\") == {\"format\": \"deepdesk\"}\n"
		 "d = b[8 + n:]\n"
		 "at = 0\n"
		 "for k, v in sorted(h.items(), key=lambda kv: kv[1][\"data_offsets\"]):\n"
		 "    s, e = v[\"data_offsets\"]\n"
		 "    assert v[\"dtype\"] == \"F32\" and s == at\n"
		 "    at = e\n"
		 "assert at == len(d)\n"
		 "s, e = h[\"conv.0\"][\"data_offsets\"]\n"
		 "assert h[\"conv.0\"][\"shape\"] == [1, 2, 3]\n"
		 "assert struct.unpack(\"<6f\", d[s:e]) == (0.5, -1.25, 3.0, struct.unpack(\"<f\", struct.pack(\"<f\", 1e-3))[0], 7.0, -8.5)\n"
		 "s, e = h[\"conv.1\"][\"data_offsets\"]\n"
		 "assert struct.unpack(\"<2f\", d[s:e]) == (7.0, -8.5)\n"
		 "' %s",
		 path);
	int rc = system(cmd);
	CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
}

/* ---- weights ---- */

static void test_weights_roundtrip(void)
{
	struct netfix a, b;
	if (setup(&a, net4, 1)) {
		CHECK(0);
		return;
	}
	if (setup(&b, net4, 2)) {
		CHECK(0);
		netfix_close(&a);
		return;
	}
	CHECK(!params_equal(a.gr, b.gr));
	const char *path = tmp_path("w.safetensors");
	const char *meta[] = { "network", "small", NULL };
	struct dd_err err = { 0 };
	CHECK_EQ_INT(snapshot_save_weights(a.gr, path, meta, &err), DD_OK);
	char report[256] = "junk";
	CHECK_EQ_INT(snapshot_load_weights(b.gr, path, 0, report, sizeof report, &err), DD_OK);
	CHECK(params_equal(a.gr, b.gr));
	CHECK_STR(report, "");
	struct st_file *f = NULL;
	CHECK_EQ_INT(st_open(path, &f, &err), DD_OK);
	if (f) {
		struct st_tensor t;
		CHECK_STR(st_meta(f, "network"), "small");
		CHECK_EQ_INT(st_count(f), 4);
		CHECK_EQ_INT(st_find(f, "conv.0", &t), DD_OK);
		CHECK_EQ_INT(t.ndim, 4);
		CHECK_EQ_INT(t.shape[0], 3);
		CHECK_EQ_INT(st_find(f, "fc.1", &t), DD_OK);
		CHECK_EQ_INT(t.shape[0], 4);
	}
	st_close(f);
	netfix_close(&a);
	netfix_close(&b);
}

static void test_finetune(void)
{
	struct netfix a, b, c, d;
	int ok = !setup(&a, net4, 1) + !setup(&b, net3, 2) + !setup(&c, net_renamed, 3) + !setup(&d, net_other, 4);
	if (ok != 4) {
		CHECK(0);
		return;
	}
	const char *path = tmp_path("ft.safetensors");
	struct dd_err err = { 0 };
	char report[256];
	CHECK_EQ_INT(snapshot_save_weights(a.gr, path, NULL, &err), DD_OK);

	/* strict: the changed layer is an error naming the blob and both shapes; nothing changes */
	float before[512];
	int64_t nb = graph_param_count(b.gr);
	CHECK(nb <= 512);
	memcpy(before, graph_params(b.gr), (size_t)nb * sizeof(float));
	CHECK_EQ_INT(snapshot_load_weights(b.gr, path, 0, report, sizeof report, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "fc.0");
	CHECK_CONTAINS(err.msg, "4x12");
	CHECK_CONTAINS(err.msg, "3x12");
	CHECK(memcmp(before, graph_params(b.gr), (size_t)nb * sizeof(float)) == 0);

	/* finetune: conv copied, fc keeps its fresh initialisation */
	CHECK_EQ_INT(snapshot_load_weights(b.gr, path, 1, report, sizeof report, &err), DD_OK);
	CHECK_STR(report, "re-initialised: fc.0 (4x12 \xe2\x86\x92 3x12), fc.1 (4 \xe2\x86\x92 3)");
	for (int i = 0; i < 2; i++) { /* conv.0, conv.1 */
		const struct graph_param *pa = graph_param(a.gr, i), *pb = graph_param(b.gr, i);
		CHECK(memcmp(pa->w, pb->w, (size_t)pa->count * sizeof(float)) == 0);
	}
	for (int i = 2; i < 4; i++) {
		const struct graph_param *pb = graph_param(b.gr, i);
		CHECK(memcmp(pb->w, before + (pb->w - graph_params(b.gr)), (size_t)pb->count * sizeof(float)) == 0);
	}

	/* a renamed layer: missing by name */
	CHECK_EQ_INT(snapshot_load_weights(c.gr, path, 0, report, sizeof report, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "no tensor fc_new.0");
	CHECK_EQ_INT(snapshot_load_weights(c.gr, path, 1, report, sizeof report, &err), DD_OK);
	CHECK_STR(report, "re-initialised: fc_new.0 (not in the snapshot), fc_new.1 (not in the snapshot)");

	/* a short report buffer ends in an ellipsis, whole pieces only */
	char small[40];
	CHECK_EQ_INT(snapshot_load_weights(c.gr, path, 1, small, sizeof small, &err), DD_OK);
	CHECK_STR(small, "re-initialised: \xe2\x80\xa6");
	CHECK_EQ_INT(snapshot_load_weights(c.gr, path, 1, NULL, 0, &err), DD_OK);

	/* nothing in common: an error even when finetuning */
	CHECK_EQ_INT(snapshot_load_weights(d.gr, path, 1, report, sizeof report, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "none of the network's");
	CHECK_STR(report, "");
	CHECK_EQ_INT(snapshot_load_weights(d.gr, tmp_path("nope"), 1, report, sizeof report, &err), DD_ENOENT);
	netfix_close(&a);
	netfix_close(&b);
	netfix_close(&c);
	netfix_close(&d);
}

/* standard networks, BatchNorm statistics included, round trip bit for bit (AlexNet,
 * 240 MB of weights, only adds time) */
static void test_standard_networks(void)
{
	static const char *const names[] = { "lenet", "alexnet", "googlenet", "resnet_small" };
	for (int k = 0; k < 4; k++) {
		if (k == 1)
			continue;
		const char *text = net_standard_text(names[k]);
		struct net_input in = { .n = 1, .c = k == 0 ? 1 : 3, .h = k == 0 ? 28 : k == 3 ? 32 : 256,
					.w = k == 0 ? 28 : k == 3 ? 32 : 256, .classes = 10 };
		struct net *def = NULL;
		struct net_graph *g = NULL;
		struct graph *a = NULL, *b = NULL;
		struct dd_err err = { 0 };
		const char *path = tmp_path("std.safetensors");
		int rc = !text ? DD_ENOENT : net_parse(text, strlen(text), &def, &err);
		if (!rc)
			rc = net_instantiate(def, NET_STAGE_TRAIN, &in, &g, &err);
		if (!rc)
			rc = graph_create(g, NULL, 1, &a, &err);
		if (!rc)
			rc = graph_create(g, NULL, 2, &b, &err);
		if (!rc)
			rc = snapshot_save_weights(a, path, NULL, &err);
		if (!rc)
			rc = snapshot_load_weights(b, path, 0, NULL, 0, &err);
		if (rc)
			fprintf(stderr, "  %s: %s\n", names[k], err.msg);
		CHECK_EQ_INT(rc, DD_OK);
		CHECK(!rc && params_equal(a, b));
		graph_free(a);
		graph_free(b);
		net_graph_free(g);
		net_free(def);
	}
}

/* ---- solver state ---- */

static void set_grads(struct graph *gr, int t)
{
	float *g = graph_grads(gr);
	for (int64_t j = 0; j < graph_param_count(gr); j++)
		g[j] = (float)sin(0.7 * (double)j + 1.3 * t) * 0.1f;
}

static void test_solver_roundtrip(void)
{
	static const enum solver_type types[] = { SOLVER_SGD, SOLVER_ADADELTA, SOLVER_ADAM };
	for (int k = 0; k < 3; k++) {
		struct netfix a, b;
		if (setup(&a, net4, 1) || setup(&b, net4, 9)) {
			CHECK(0);
			return;
		}
		struct solver_config c = { .type = types[k], .base_lr = 0.01, .momentum = 0.9, .momentum2 = 0.999,
					   .weight_decay = 1e-3 };
		struct solver *sa = NULL, *sb = NULL;
		struct dd_err err = { 0 };
		CHECK_EQ_INT(solver_create(&c, a.gr, &sa, &err), DD_OK);
		CHECK_EQ_INT(solver_create(&c, b.gr, &sb, &err), DD_OK);
		if (!sa || !sb) {
			solver_free(sa);
			solver_free(sb);
			netfix_close(&a);
			netfix_close(&b);
			continue;
		}
		for (int t = 0; t < 3; t++) {
			set_grads(a.gr, t);
			solver_step(sa, t);
		}
		const char *wpath = tmp_path("r.safetensors"), *spath = tmp_path("r.solverstate");
		const char *meta[] = { "iteration", "3", "rng", "feedface", NULL };
		CHECK_EQ_INT(snapshot_save_weights(a.gr, wpath, meta, &err), DD_OK);
		CHECK_EQ_INT(snapshot_save_solver(sa, spath, meta, &err), DD_OK);
		CHECK_EQ_INT(snapshot_load_weights(b.gr, wpath, 0, NULL, 0, &err), DD_OK);
		CHECK_EQ_INT(snapshot_load_solver(sb, spath, &err), DD_OK);
		int64_t n = graph_param_count(a.gr);
		for (int h = 0; h < solver_nhistory(sa); h++)
			CHECK(memcmp(solver_history(sa, h), solver_history(sb, h), (size_t)n * sizeof(float)) == 0);
		struct st_file *f = NULL;
		CHECK_EQ_INT(st_open(spath, &f, &err), DD_OK);
		if (f) {
			CHECK_STR(st_meta(f, "iteration"), "3");
			CHECK_STR(st_meta(f, "solver_type"), solver_type_name(types[k]));
			CHECK_EQ_INT(st_count(f), solver_nhistory(sa));
		}
		st_close(f);
		/* resumed: the next steps are the same, bit for bit */
		for (int t = 3; t < 6; t++) {
			set_grads(a.gr, t);
			set_grads(b.gr, t);
			solver_step(sa, t);
			solver_step(sb, t);
		}
		CHECK(params_equal(a.gr, b.gr));
		solver_free(sa);
		solver_free(sb);
		netfix_close(&a);
		netfix_close(&b);
	}
}

static void test_solver_errors(void)
{
	struct netfix a, b;
	if (setup(&a, net4, 1) || setup(&b, net3, 1)) {
		CHECK(0);
		return;
	}
	struct solver_config c = { .type = SOLVER_SGD, .base_lr = 0.01, .momentum = 0.9 };
	struct solver *sgd = NULL, *adam = NULL, *other = NULL;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(solver_create(&c, a.gr, &sgd, &err), DD_OK);
	CHECK_EQ_INT(solver_create(&c, b.gr, &other, &err), DD_OK);
	c.type = SOLVER_ADAM;
	c.momentum2 = 0.999;
	CHECK_EQ_INT(solver_create(&c, a.gr, &adam, &err), DD_OK);
	if (!sgd || !adam || !other)
		goto out;
	const char *spath = tmp_path("e.solverstate"), *wpath = tmp_path("e.safetensors");
	solver_history(sgd, 0)[0] = 5;
	CHECK_EQ_INT(snapshot_save_solver(sgd, spath, NULL, &err), DD_OK);
	CHECK_EQ_INT(snapshot_load_solver(adam, spath, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "sgd");
	CHECK_CONTAINS(err.msg, "adam");
	CHECK(solver_history(adam, 0)[0] == 0);
	CHECK_EQ_INT(snapshot_load_solver(other, spath, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "parameters");
	CHECK_EQ_INT(snapshot_save_weights(a.gr, wpath, NULL, &err), DD_OK);
	CHECK_EQ_INT(snapshot_load_solver(sgd, wpath, &err), DD_EINVAL); /* a weights file */
	CHECK_CONTAINS(err.msg, "solver_type");
	const char *reserved[] = { "solver_type", "x", NULL };
	CHECK_EQ_INT(snapshot_save_solver(sgd, spath, reserved, &err), DD_EINVAL);
	CHECK_EQ_INT(snapshot_load_solver(sgd, tmp_path("nope"), &err), DD_ENOENT);
	/* a solver state with its history missing */
	const char *meta[] = { "solver_type", "sgd", NULL };
	float x = 1;
	struct st_tensor t = { .name = "history.7", .ndim = 1, .shape = { 1 }, .data = &x };
	CHECK_EQ_INT(st_write(spath, &t, 1, meta, &err), DD_OK);
	CHECK_EQ_INT(snapshot_load_solver(sgd, spath, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "history.0");
out:
	solver_free(sgd);
	solver_free(adam);
	solver_free(other);
	netfix_close(&a);
	netfix_close(&b);
}

/* ---- validation ---- */

/* a file of header (padded with spaces to pad bytes when pad > its length) and
 * ndata zero bytes; *len gets its size; caller frees */
static uint8_t *make_file(const char *header, size_t pad, size_t ndata, uint64_t claim, size_t *len)
{
	size_t hl = strlen(header), ph = pad > hl ? pad : hl;
	uint8_t *b = calloc(1, 8 + ph + ndata);
	uint64_t n = claim ? claim : ph;
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(n >> (8 * i));
	memcpy(b + 8, header, hl);
	memset(b + 8 + hl, ' ', ph - hl);
	*len = 8 + ph + ndata;
	return b;
}

static void expect_bad(const char *header, size_t ndata, uint64_t claim, const char *why)
{
	size_t len;
	uint8_t *b = make_file(header, 0, ndata, claim, &len);
	struct st_file *f = (struct st_file *)b;
	struct dd_err err = { 0 };
	int rc = st_open_mem(b, len, "bad.safetensors", &f, &err);
	if (rc != DD_EINVAL || !strstr(err.msg, why))
		fprintf(stderr, "  header %s: rc %d \"%s\", want \"%s\"\n", header, rc, err.msg, why);
	CHECK_EQ_INT(rc, DD_EINVAL);
	CHECK(f == NULL);
	CHECK_CONTAINS(err.msg, "bad.safetensors");
	CHECK_CONTAINS(err.msg, why);
	free(b);
}

#define T(name, dtype, shape, b, e) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}"

static void test_validation(void)
{
	struct st_file *f = NULL;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(st_open_mem("1234", 4, "bad.safetensors", &f, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "too short");
	expect_bad("{}", 0, 200u << 20, "over the");
	expect_bad("{}", 0, 1000, "runs past the end");
	expect_bad("{\"a\":", 0, 0, "not valid JSON");
	expect_bad("[1,2]", 0, 0, "not a JSON object");
	expect_bad("{} x", 0, 0, "after the header");
	expect_bad("{" T("a", "F16", "[2]", "0", "4") "}", 4, 0, "only F32");
	expect_bad("{" T("a", "F32", "[-1]", "0", "4") "}", 4, 0, "shape[0]");
	expect_bad("{" T("a", "F32", "[1.5]", "0", "4") "}", 4, 0, "shape[0]");
	expect_bad("{" T("a", "F32", "[\"2\"]", "0", "8") "}", 8, 0, "shape[0]");
	expect_bad("{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", "0", "4") "}", 4, 0, "dimensions");
	expect_bad("{" T("a", "F32", "[4294967296,4294967296,4294967296]", "0", "4") "}", 4, 0, "overflows");
	expect_bad("{" T("a", "F32", "[2]", "0", "12") "}", 12, 0, "its shape needs 8");
	expect_bad("{" T("a", "F32", "[2]", "0", "8") "}", 4, 0, "outside");
	expect_bad("{" T("a", "F32", "[2]", "8", "0") "}", 8, 0, "outside");
	expect_bad("{" T("a", "F32", "[2]", "-8", "0") "}", 8, 0, "data_offsets");
	expect_bad("{" T("a", "F32", "[1]", "2", "6") "}", 8, 0, "multiple of 4");
	expect_bad("{" T("a", "F32", "[2]", "0", "8") "," T("b", "F32", "[2]", "4", "12") "}", 12, 0, "overlaps");
	expect_bad("{" T("a", "F32", "[1]", "0", "4") "," T("b", "F32", "[1]", "8", "12") "}", 12, 0, "holes");
	expect_bad("{" T("a", "F32", "[1]", "0", "4") "}", 8, 0, "after the last tensor");
	expect_bad("{" T("a", "F32", "[1]", "0", "4") "," T("a", "F32", "[1]", "4", "8") "}", 8, 0, "twice");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, 0, "lacks");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, 0, "two byte offsets");
	expect_bad("{\"a\":3}", 0, 0, "not a JSON object");
	expect_bad("{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, 0, "empty name");
	expect_bad("{\"__metadata__\":{\"k\":1}}", 0, 0, "not a string");
	expect_bad("{\"__metadata__\":[]}", 0, 0, "not a JSON object");
	expect_bad("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, 0, "appears twice");
	expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, "appears twice");

	/* accepted: an unpadded header of odd length (data moved onto a float boundary),
	 * zero tensors, and a scalar */
	size_t len;
	const char *base = "{" T("a", "F32", "[2]", "0", "8") "," T("s", "F32", "[]", "8", "12") "}";
	char odd[256];
	snprintf(odd, sizeof odd, "%s%s", base, strlen(base) % 4 ? "" : " ");
	uint8_t *b = make_file(odd, 0, 12, 0, &len);
	CHECK(strlen(odd) % 4 != 0);
	float v[3] = { 1.25f, -2.0f, 9.0f };
	memcpy(b + len - 12, v, 12);
	CHECK_EQ_INT(st_open_mem(b, len, "odd", &f, &err), DD_OK);
	struct st_tensor t;
	if (f) {
		CHECK_EQ_INT(st_find(f, "a", &t), DD_OK);
		CHECK(((uintptr_t)t.data & 3) == 0 && t.data[0] == 1.25f && t.data[1] == -2.0f);
		CHECK_EQ_INT(st_find(f, "s", &t), DD_OK);
		CHECK(t.ndim == 0 && t.data[0] == 9.0f);
	}
	st_close(f);
	free(b);
	b = make_file("{}", 8, 0, 0, &len);
	CHECK_EQ_INT(st_open_mem(b, len, "empty", &f, &err), DD_OK);
	CHECK(f && st_count(f) == 0);
	st_close(f);
	free(b);
}

/* ---- fuzzing ---- */

static uint64_t rng = 0x5eed;
static uint32_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

static void test_fuzz(void)
{
	/* a valid seed: weights of the small network plus metadata */
	struct netfix a;
	if (setup(&a, net4, 1)) {
		CHECK(0);
		return;
	}
	const char *path = tmp_path("seed.safetensors");
	const char *meta[] = { "format", "deepdesk", "iteration", "77", NULL };
	CHECK_EQ_INT(snapshot_save_weights(a.gr, path, meta, NULL), DD_OK);
	netfix_close(&a);
	char *seed = NULL;
	size_t n = 0;
	CHECK_EQ_INT(fs_read_file(path, 1 << 20, &seed, &n, NULL), DD_OK);
	if (!seed)
		return;
	uint64_t hl = 0;
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)(uint8_t)seed[i] << (8 * i);
	int runs = 0, accepted = 0;
	CHECK_EQ_INT(LLVMFuzzerTestOneInput((const uint8_t *)seed, n), 0);
	/* every truncation */
	for (size_t k = 0; k < n; k++, runs++)
		LLVMFuzzerTestOneInput((const uint8_t *)seed, k);
	uint8_t *m = malloc(n + 64);
	for (int iter = 0; iter < 3000; iter++, runs++) {
		size_t len = n;
		memcpy(m, seed, n);
		int kind = iter % 6, edits = 1 + (int)(rnd() % 4);
		for (int e = 0; e < edits; e++) {
			/* mostly in the header, where the parser works */
			size_t at = kind == 5 ? rnd() % len : 8 + rnd() % (size_t)(hl ? hl : 1);
			if (at >= len)
				at = rnd() % len;
			switch (kind) {
			case 0: m[at] ^= (uint8_t)(1u << (rnd() % 8)); break;             /* bit flip */
			case 1: m[at] = (uint8_t)"0123456789-,:[]{}\". e"[rnd() % 22]; break; /* JSON-ish byte */
			case 2: m[at] = (uint8_t)rnd(); break;                            /* any byte */
			case 3: m[rnd() % 8] = (uint8_t)rnd(); break;                     /* the length */
			case 4: len = rnd() % (n + 1); break;                             /* truncate */
			case 5: m[at] = (uint8_t)rnd(); break;                            /* anywhere */
			}
			if (len == 0)
				break;
		}
		struct st_file *f = NULL;
		if (st_open_mem(m, len, "m", &f, NULL) == DD_OK)
			accepted++;
		st_close(f);
		LLVMFuzzerTestOneInput(m, len);
	}
	/* garbage, and garbage behind a plausible length */
	for (int iter = 0; iter < 500; iter++, runs++) {
		size_t len = rnd() % (n + 64);
		for (size_t k = 0; k < len; k++)
			m[k] = (uint8_t)rnd();
		if (iter % 2 && len >= 8) {
			uint64_t claim = rnd() % len;
			for (int i = 0; i < 8; i++)
				m[i] = (uint8_t)(claim >> (8 * i));
			if (len > 8)
				m[8] = '{';
		}
		LLVMFuzzerTestOneInput(m, len);
	}
	printf("       fuzz: %d inputs, %d mutations still valid\n", runs, accepted);
	CHECK(accepted > 0); /* bit flips in data bytes leave valid files */
	free(m);
	free(seed);
}

int main(void)
{
	if (!check_tmpdir(tmpdir, sizeof tmpdir))
		return check_cannot_start("test_snapshot: mkdtemp: %s", strerror(errno));
	RUN(test_st_roundtrip);
	RUN(test_python_reads);
	RUN(test_weights_roundtrip);
	RUN(test_finetune);
	RUN(test_standard_networks);
	RUN(test_solver_roundtrip);
	RUN(test_solver_errors);
	RUN(test_validation);
	RUN(test_fuzz);
	fs_rm_rf(tmpdir, NULL);
	return check_summary();
}
