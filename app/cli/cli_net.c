/* cli_net.c — `deepdesk net`: check a network description as training would see it
 * (the same networks/net.c code the web editor calls), list and print the standard
 * networks, and time one (`net time`, Caffe's `caffe time`). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/rng.h"
#include "../../networks/graph.h"
#include "../../networks/memory.h"
#include "../../networks/net.h"
#include "../../networks/prototxt.h"
#include "../../networks/solver.h"
#include "cli.h"

const char cli_net_usage[] =
	"usage: deepdesk net check FILE|NAME [OPTIONS]\n"
	"       deepdesk net time FILE|NAME [OPTIONS]\n"
	"       deepdesk net list\n"
	"       deepdesk net show NAME\n"
	"\n"
	"check  parse a Caffe prototxt and instantiate it as training would for a dataset\n"
	"       (DIGITS' stages and clean-up, shapes, parameter counts); print one line per\n"
	"       layer (name, type, top shapes, parameters) and a total, or the first error as\n"
	"       FILE:LINE:COL: message on stderr and exit 1.  NAME is a standard network.\n"
	"       Without --stage all three stages are checked and the train stage is shown,\n"
	"       then the memory a training takes at that batch (SGD on the CPU: the estimate\n"
	"       deepdesk serve checks against --job-memory-max; JSON: \"memory\").\n"
	"time   instantiate the network with seeded random data and labels and time it as\n"
	"       `caffe time` does: warm-up passes, then --iters training iterations (forward,\n"
	"       backward and an SGD momentum update) or, with --stage deploy, forward passes;\n"
	"       print ms per pass and per iteration, images/s and the peak memory\n"
	"list   the standard networks, with the image shape each is meant for\n"
	"show   print a standard network's prototxt (to start a custom one from)\n"
	"\n"
	"options of check:\n"
	"  --stage STAGE   train, val or deploy\n"
	"  --input CxHxW   the dataset's image shape, e.g. 3x256x256 (default: the standard\n"
	"                  network's, else the description's own Input shape)\n"
	"  --batch N       batch size (default: the data layer's batch_size, else 16; deploy 1)\n"
	"  --crop N        crop size, as DIGITS' form field (default: the data layer's crop_size)\n"
	"  --classes N     class count for InnerProducts without num_output (default: the\n"
	"                  standard network's)\n"
	"  --json          print JSON on stdout instead, errors too\n"
	"  -h, --help      this text\n"
	"\n"
	"options of time (and --input, --batch, --crop, --classes, --json as above):\n"
	"  --stage STAGE   train (default: forward + backward + update) or deploy (forward)\n"
	"  --iters N       timed iterations (default 20)\n"
	"  --warmup N      untimed iterations first (default 2)\n"
	"  --max-seconds S stop the timed iterations once S seconds have passed (at least one\n"
	"                  runs; the output's iteration count says how many did)\n"
	"  --backend NAME  ref, cpu, cuda[:N] or auto (default auto: the fastest this build has)\n"
	"  --precision P   fp32 (default), fp16 or bf16: convolutions and inner products in half\n"
	"                  precision on tensor cores (cuda only; fp16 with dynamic loss scaling)\n"
	"  --no-update     train stage without the solver update (forward + backward only)\n"
	"  --seed N        weights and data (default 1)\n";

static int parse_chw(const char *s, struct net_input *in)
{
	int c, h, w, used = 0;
	if (sscanf(s, "%dx%dx%d%n", &c, &h, &w, &used) != 3 || s[used] || c < 1 || c > 4096 || h < 1 ||
	    h > 65536 || w < 1 || w > 65536) {
		fprintf(stderr, "deepdesk: --input: expected CxHxW (e.g. 3x256x256), got \"%s\"\n", s);
		return -1;
	}
	in->c = c;
	in->h = h;
	in->w = w;
	return 0;
}

/* Report err for `what` (the file) in `stage` (NULL: not stage-specific). */
static int report(const char *what, const char *stage, const struct dd_err *err, int json)
{
	int line, col;
	int has_pos = net_err_pos(err, &line, &col);
	if (json) {
		cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
		if (root && e && cJSON_AddItemToObject(root, "error", e)) {
			cJSON_AddStringToObject(e, "code", dd_err_name(err->code));
			cJSON_AddStringToObject(e, "message", err->msg);
			if (has_pos) {
				cJSON_AddNumberToObject(e, "line", line);
				cJSON_AddNumberToObject(e, "col", col);
			}
			if (stage)
				cJSON_AddStringToObject(e, "stage", stage);
			char *s = cJSON_Print(root);
			if (s)
				puts(s);
			free(s);
		} else {
			cJSON_Delete(e);
		}
		cJSON_Delete(root);
	} else {
		/* FILE:LINE:COL: message, as compilers write it, so editors can jump there */
		fprintf(stderr, "%s:%s%s", what, has_pos ? "" : " ", err->msg);
		if (stage)
			fprintf(stderr, " (%s stage)", stage);
		fputc('\n', stderr);
	}
	return 1;
}

static int net_list(void)
{
	for (const struct net_standard *s = net_standards; s->name; s++)
		printf("%-13s %-10s %dx%dx%d  %s\n", s->name, s->title, s->c, s->h, s->w, s->about);
	return 0;
}

static int net_show(int argc, char **argv)
{
	if (argc != 2) {
		fputs(cli_net_usage, stderr);
		return 2;
	}
	const char *text = net_standard_text(argv[1]);
	if (!text) {
		fprintf(stderr, "deepdesk: no standard network \"%s\" (deepdesk net list shows them)\n", argv[1]);
		return 1;
	}
	fputs(text, stdout);
	return 0;
}

/* Read what (a file, else a standard network's name) into *def (the caller frees it
 * with net_free, then *text with free) and settle the input shape and class count
 * the options left unset: the standard network's, else the description's own Input
 * shape.  0, or 1 after reporting the error. */
static int open_def(const char *what, int json, struct net_input *in, int input_given, int classes_given,
		    char **text, struct net **def)
{
	struct dd_err err = { 0, "" };
	const struct net_standard *std = NULL;
	size_t len = 0;
	*text = NULL;
	*def = NULL;
	if (access(what, F_OK) == 0) {
		if (fs_read_file(what, PTX_MAX_INPUT, text, &len, &err))
			return report(what, NULL, &err, json);
	} else if ((std = net_standard_find(what))) {
		len = strlen(std->text);
	} else {
		dd_err_set(&err, DD_ENOENT, "no such file, nor a standard network (lenet, alexnet, googlenet, resnet_small)");
		return report(what, NULL, &err, json);
	}
	if (net_parse(std ? std->text : *text, len, def, &err))
		return report(what, NULL, &err, json);
	if (!input_given) {
		if (std) {
			in->c = std->c;
			in->h = std->h;
			in->w = std->w;
		} else {
			struct net_input decl = *in;
			if (net_declared_input(*def, &decl) != DD_OK) {
				dd_err_set(&err, DD_EINVAL,
					   "no input shape: give the dataset's image shape with --input CxHxW");
				return report(what, NULL, &err, json);
			}
			in->c = decl.c;
			in->h = decl.h;
			in->w = decl.w;
		}
	}
	if (!classes_given && std)
		in->classes = std->classes;
	return 0;
}

/* The options of both `net check` and `net time`; each verb's own follow O_OWN. */
enum { O_STAGE = 1, O_INPUT, O_BATCH, O_CROP, O_CLASSES, O_JSON, O_OWN };
#define SHARED_OPTIONS                                                \
	{ "stage", required_argument, NULL, O_STAGE },                \
	{ "input", required_argument, NULL, O_INPUT },                \
	{ "batch", required_argument, NULL, O_BATCH },                \
	{ "crop", required_argument, NULL, O_CROP },                  \
	{ "classes", required_argument, NULL, O_CLASSES },            \
	{ "json", no_argument, NULL, O_JSON },                        \
	{ "help", no_argument, NULL, 'h' }

/* The shared option opt (any but --stage, whose values the verbs differ on) with
 * its value arg: into in and *json, noting in *input_given / *classes_given that
 * the user chose them.  -1 when it was taken, else the verb's exit status: 0 after
 * the help, 2 after the message for a bad value or the usage for an unknown option. */
static int shared_option(int opt, const char *arg, struct net_input *in, int *input_given, int *classes_given,
			 int *json)
{
	switch (opt) {
	case O_INPUT:
		if (parse_chw(arg, in))
			return 2;
		*input_given = 1;
		return -1;
	case O_BATCH: return cli_int("--batch", arg, 1, 1 << 20, &in->n) ? 2 : -1;
	case O_CROP: return cli_int("--crop", arg, 1, 65536, &in->crop) ? 2 : -1;
	case O_CLASSES:
		if (cli_int("--classes", arg, 1, 1 << 24, &in->classes))
			return 2;
		*classes_given = 1;
		return -1;
	case O_JSON: *json = 1; return -1;
	case 'h': fputs(cli_net_usage, stdout); return 0;
	}
	fputs(cli_net_usage, stderr);
	return 2;
}

/* The one operand after the options (the network), or NULL after the usage. */
static const char *net_operand(int argc, char **argv)
{
	if (optind != argc - 1) {
		fputs(cli_net_usage, stderr);
		return NULL;
	}
	return argv[optind];
}

static int net_check(int argc, char **argv)
{
	static const struct option longopts[] = {
		SHARED_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct net_input in = { 0 };
	int json = 0, stage_given = 0, input_given = 0, classes_given = 0, c, taken;
	enum net_stage stage = NET_STAGE_TRAIN;
	struct dd_err err = { 0, "" };
	optind = 0; /* glibc: a full reset, for callers that run verbs in-process (the tests) */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_STAGE:
			if (net_stage_parse(optarg, &stage, &err)) {
				fprintf(stderr, "deepdesk: --stage: %s\n", err.msg);
				return 2;
			}
			stage_given = 1;
			break;
		default:
			if ((taken = shared_option(c, optarg, &in, &input_given, &classes_given, &json)) >= 0)
				return taken;
		}
	}
	const char *what = net_operand(argc, argv);
	if (!what)
		return 2;
	char *text = NULL;
	struct net *def = NULL;
	struct net_graph *g = NULL;
	int rc = 1;

	if (open_def(what, json, &in, input_given, classes_given, &text, &def))
		goto done;

	/* check every stage unless one was asked for; show the one asked for (or train) */
	for (int s = NET_STAGE_TRAIN; s <= NET_STAGE_DEPLOY; s++) {
		if (stage_given && s != (int)stage)
			continue;
		struct net_graph *one = NULL;
		if (net_instantiate(def, (enum net_stage)s, &in, &one, &err)) {
			report(what, net_stage_name((enum net_stage)s), &err, json);
			goto done;
		}
		if (s == (int)stage)
			g = one;
		else
			net_graph_free(one);
	}
	/* what training it takes (SGD on oneDNN), for the train and val stages at this input */
	struct net_graph *tg = NULL, *vg = NULL;
	struct net_memory mem;
	int have_mem = net_instantiate(def, NET_STAGE_TRAIN, &in, &tg, &err) == DD_OK &&
		       net_instantiate(def, NET_STAGE_VAL, &in, &vg, &err) == DD_OK &&
		       net_memory_estimate(tg, vg, SOLVER_SGD, "cpu", 1, &mem) == DD_OK;
	net_graph_free(tg);
	net_graph_free(vg);
	if (json) {
		cJSON *j = net_graph_json(g);
		if (j && have_mem)
			cJSON_AddItemToObject(j, "memory", net_memory_json(&mem));
		char *s = j ? cJSON_Print(j) : NULL;
		cJSON_Delete(j);
		if (!s) {
			fprintf(stderr, "deepdesk: out of memory\n");
			goto done;
		}
		puts(s);
		free(s);
	} else if (net_graph_print(g, stdout)) {
		goto done;
	} else if (have_mem) {
		char h[32];
		net_memory_human(mem.total, h, sizeof h);
		printf("training at batch %d (SGD, cpu): about %s of memory\n", mem.batch, h);
	}
	rc = 0;
done:
	net_graph_free(g);
	net_free(def);
	free(text);
	return rc;
}

/* ---- net time ------------------------------------------------------------------- */

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* VmHWM of this process in KiB (the peak resident set), or -1. */
static long peak_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* Fill "data" with seeded mean-subtracted pixels (uniform in [-128, 128)) and
 * "label", when the stage has one, with classes in [0, classes). */
static void fill_inputs(struct graph *gr, int classes, uint64_t seed)
{
	struct net_shape sh;
	uint64_t s = seed ^ 0xD1B54A32D192ED03ull;
	float *v = graph_blob(gr, "data", &sh);
	int64_t n = 1;
	for (int d = 0; d < sh.ndim; d++)
		n *= sh.dim[d];
	for (int64_t i = 0; v && i < n; i++)
		v[i] = (float)(rng_unit(rng_next(&s)) * 256.0 - 128.0);
	v = graph_blob(gr, "label", &sh);
	n = 1;
	for (int d = 0; d < sh.ndim; d++)
		n *= sh.dim[d];
	for (int64_t i = 0; v && i < n; i++)
		v[i] = (float)(rng_next(&s) % (uint64_t)(classes > 0 ? classes : 1));
}

struct layer_time {
	int node;
	double fwd, bwd; /* ms per iteration */
};

static int by_time(const void *a, const void *b)
{
	const struct layer_time *x = a, *y = b;
	double tx = x->fwd + x->bwd, ty = y->fwd + y->bwd;
	return tx < ty ? 1 : tx > ty ? -1 : x->node - y->node;
}

static int net_time(int argc, char **argv)
{
	enum { O_ITERS = O_OWN, O_WARMUP, O_BACKEND, O_NO_UPDATE, O_SEED, O_MAX_SECONDS, O_PRECISION };
	static const struct option longopts[] = {
		SHARED_OPTIONS,
		{ "iters", required_argument, NULL, O_ITERS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "no-update", no_argument, NULL, O_NO_UPDATE },
		{ "seed", required_argument, NULL, O_SEED },
		{ "max-seconds", required_argument, NULL, O_MAX_SECONDS },
		{ "precision", required_argument, NULL, O_PRECISION },
		{ NULL, 0, NULL, 0 },
	};
	struct net_input in = { 0 };
	int json = 0, input_given = 0, classes_given = 0, iters = 20, warmup = 2, update = 1, seed = 1, c, taken;
	const char *backend = "auto";
	int precision = BACKEND_FP32;
	double max_ms = 0; /* 0: no limit */
	enum net_stage stage = NET_STAGE_TRAIN;
	struct dd_err err = { 0, "" };
	optind = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_STAGE:
			if (net_stage_parse(optarg, &stage, &err) || stage == NET_STAGE_VAL) {
				fprintf(stderr, "deepdesk: --stage: train or deploy, got \"%s\"\n", optarg);
				return 2;
			}
			break;
		case O_ITERS:
			if (cli_int("--iters", optarg, 1, 1 << 24, &iters))
				return 2;
			break;
		case O_WARMUP:
			if (cli_int("--warmup", optarg, 0, 1 << 24, &warmup))
				return 2;
			break;
		case O_BACKEND: backend = optarg; break;
		case O_PRECISION:
			if (backend_precision_parse(optarg, &precision, &err)) {
				fprintf(stderr, "deepdesk: --precision: %s\n", err.msg);
				return 2;
			}
			break;
		case O_NO_UPDATE: update = 0; break;
		case O_MAX_SECONDS: {
			char *end;
			double v = strtod(optarg, &end);
			if (end == optarg || *end || !(v > 0 && v <= 86400)) {
				fprintf(stderr, "deepdesk: --max-seconds: a number of seconds above 0, got \"%s\"\n",
					optarg);
				return 2;
			}
			max_ms = v * 1e3;
			break;
		}
		case O_SEED:
			if (cli_int("--seed", optarg, 0, 0x7fffffff, &seed))
				return 2;
			break;
		default:
			if ((taken = shared_option(c, optarg, &in, &input_given, &classes_given, &json)) >= 0)
				return taken;
		}
	}
	const char *what = net_operand(argc, argv);
	if (!what)
		return 2;
	char *text = NULL;
	struct net *def = NULL;
	struct net_graph *g = NULL;
	struct backend *be = NULL;
	struct graph *gr = NULL;
	struct solver *sv = NULL;
	struct layer_time *lt = NULL;
	cJSON *root = NULL;
	int rc = 1;

	if (open_def(what, json, &in, input_given, classes_given, &text, &def))
		goto done;
	if (net_instantiate(def, stage, &in, &g, &err)) {
		report(what, net_stage_name(stage), &err, json);
		goto done;
	}
	if (backend_create(backend, &be, &err)) {
		fprintf(stderr, "deepdesk: --backend: %s\n", err.msg);
		rc = 2;
		goto done;
	}
	if (backend_set_precision(be, precision, &err)) {
		fprintf(stderr, "deepdesk: --precision: %s\n", err.msg);
		rc = 2;
		goto done;
	}
	if (graph_create(g, be, (uint64_t)seed, &gr, &err)) {
		report(what, net_stage_name(stage), &err, json);
		goto done;
	}
	int train = stage == NET_STAGE_TRAIN;
	if (train && update) {
		/* DIGITS' defaults, at a rate small enough that random data keeps the
		 * weights finite over many iterations */
		struct solver_config sc = { .type = SOLVER_SGD, .base_lr = 1e-4, .policy = LR_FIXED,
					    .momentum = 0.9, .weight_decay = 5e-4 };
		if (solver_create(&sc, gr, &sv, &err)) {
			report(what, NULL, &err, json);
			goto done;
		}
	}
	fill_inputs(gr, g->in.classes, (uint64_t)seed);

	int nnode = g->nnode;
	if (!(lt = calloc((size_t)nnode, sizeof *lt))) {
		fprintf(stderr, "deepdesk: out of memory\n");
		goto done;
	}

	/* warm up, then time each phase of every iteration; the graph times every layer
	 * meanwhile (two clock reads per layer and pass: noise next to any layer) */
	double fwd = 0, bwd = 0, upd = 0, t_start = 0;
	float loss = 0;
	int ran = 0;
	for (int it = 0; it < warmup + iters; it++) {
		if (it > warmup && max_ms > 0 && now_ms() - t_start >= max_ms)
			break;
		if (it == warmup) {
			graph_set_profiling(gr, 1);
			fwd = bwd = upd = 0;
			t_start = now_ms();
		}
		double a = now_ms();
		if (train)
			graph_zero_grads(gr);
		if (graph_forward(gr, train, &loss, &err)) {
			report(what, net_stage_name(stage), &err, json);
			goto done;
		}
		double b = now_ms();
		if (train && graph_backward(gr, &err)) {
			report(what, net_stage_name(stage), &err, json);
			goto done;
		}
		double d = now_ms();
		int skipped = 0;
		if (sv && backend_unscale(be, graph_grads(gr), graph_param_count(gr), &skipped, NULL, &err)) {
			report(what, net_stage_name(stage), &err, json);
			goto done;
		}
		if (sv && !skipped)
			solver_step(sv, it);
		double e = now_ms();
		fwd += b - a;
		bwd += d - b;
		upd += e - d;
		ran += it >= warmup;
	}
	iters = ran;
	double total = (now_ms() - t_start) / iters;
	fwd /= iters;
	bwd = train ? bwd / iters : 0;
	upd = sv ? upd / iters : 0;
	double ips = total > 0 ? g->in.n * 1000.0 / total : 0;
	long rss = peak_rss_kib();
	int nlt = 0;
	for (int i = 0; i < nnode; i++) {
		double f = 0, bw = 0;
		if (g->node[i].l.type == NET_DATA || g->node[i].l.type == NET_INPUT ||
		    graph_layer_time(gr, i, &f, &bw) != DD_OK)
			continue;
		lt[nlt++] = (struct layer_time){ i, f, train ? bw : 0 };
	}
	qsort(lt, (size_t)nlt, sizeof *lt, by_time);
	const char *bname = backend_name(be);
	const char *mode = !train ? "forward" : sv ? "forward + backward + SGD update" : "forward + backward";
	const char *title = g->name && *g->name ? g->name : what;

	if (json) {
		root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "net", title);
		cJSON_AddStringToObject(root, "stage", net_stage_name(stage));
		cJSON_AddStringToObject(root, "backend", bname);
		cJSON_AddStringToObject(root, "precision", backend_precision_name(precision));
		cJSON_AddStringToObject(root, "mode", mode);
		cJSON_AddNumberToObject(root, "batch", g->in.n);
		cJSON *inj = cJSON_AddObjectToObject(root, "input");
		cJSON_AddNumberToObject(inj, "c", in.c);
		cJSON_AddNumberToObject(inj, "h", in.h);
		cJSON_AddNumberToObject(inj, "w", in.w);
		cJSON_AddNumberToObject(inj, "crop", g->in.crop);
		cJSON_AddNumberToObject(root, "classes", g->in.classes);
		cJSON_AddNumberToObject(root, "iters", iters);
		cJSON_AddNumberToObject(root, "warmup", warmup);
		cJSON_AddNumberToObject(root, "forward_ms", fwd);
		cJSON_AddNumberToObject(root, "backward_ms", bwd);
		cJSON_AddNumberToObject(root, "update_ms", upd);
		cJSON_AddNumberToObject(root, "total_ms", total);
		cJSON_AddNumberToObject(root, "images_per_s", ips);
		if (train)
			cJSON_AddNumberToObject(root, "loss", loss);
		cJSON_AddNumberToObject(root, "params", (double)g->params);
		if (rss >= 0)
			cJSON_AddNumberToObject(root, "peak_rss_kib", (double)rss);
		else
			cJSON_AddNullToObject(root, "peak_rss_kib");
		{
			cJSON *arr = cJSON_AddArrayToObject(root, "layers");
			for (int i = 0; i < nlt; i++) {
				const struct net_node *nd = &g->node[lt[i].node];
				cJSON *o = cJSON_CreateObject();
				cJSON_AddStringToObject(o, "name", nd->l.name);
				cJSON_AddStringToObject(o, "type", net_layer_type_name(nd->l.type));
				cJSON_AddNumberToObject(o, "forward_ms", lt[i].fwd);
				cJSON_AddNumberToObject(o, "backward_ms", lt[i].bwd);
				cJSON_AddItemToArray(arr, o);
			}
		}
		char *js = cJSON_Print(root);
		if (!js) {
			fprintf(stderr, "deepdesk: out of memory\n");
			goto done;
		}
		puts(js);
		free(js);
	} else {
		printf("%s, %s stage, batch %d, %dx%dx%d", title, net_stage_name(stage), g->in.n, in.c, in.h, in.w);
		if (g->in.crop)
			printf(" cropped to %dx%d", g->in.crop, g->in.crop);
		printf(", %d classes, backend %s\n", g->in.classes, bname);
		printf("%d iterations after %d warm-up (%s)\n\n", iters, warmup, mode);
		printf("  %-10s %10.3f ms  %5.1f %%\n", "forward", fwd, total > 0 ? 100 * fwd / total : 0);
		if (train)
			printf("  %-10s %10.3f ms  %5.1f %%\n", "backward", bwd, total > 0 ? 100 * bwd / total : 0);
		if (sv)
			printf("  %-10s %10.3f ms  %5.1f %%\n", "update", upd, total > 0 ? 100 * upd / total : 0);
		printf("  %-10s %10.3f ms per iteration, %.1f images/s\n", "total", total, ips);
		if (train)
			printf("  %-10s %10.4f (last iteration)\n", "loss", loss);
		if (rss >= 0)
			printf("  %-10s %10.1f MiB\n", "peak RSS", rss / 1024.0);
		{
			double sum = 0;
			for (int i = 0; i < nlt; i++)
				sum += lt[i].fwd + lt[i].bwd;
			printf("\n  %-16s %-16s %12s %12s %7s\n", "layer", "type", "forward ms", "backward ms", "%");
			for (int i = 0; i < nlt; i++) {
				const struct net_node *nd = &g->node[lt[i].node];
				printf("  %-16s %-16s %12.3f %12.3f %6.1f%%\n", nd->l.name,
				       net_layer_type_name(nd->l.type), lt[i].fwd, lt[i].bwd,
				       sum > 0 ? 100 * (lt[i].fwd + lt[i].bwd) / sum : 0);
			}
		}
	}
	rc = 0;
done:
	cJSON_Delete(root);
	free(lt);
	solver_free(sv);
	graph_free(gr);
	backend_free(be);
	net_graph_free(g);
	net_free(def);
	free(text);
	return rc;
}

int cli_net(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(cli_net_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "check"))
		return net_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "time"))
		return net_time(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return net_list();
	if (!strcmp(argv[1], "show"))
		return net_show(argc - 1, argv + 1);
	fprintf(stderr, "deepdesk: net: unknown command \"%s\" (check, time, list or show)\n", argv[1]);
	return 2;
}
