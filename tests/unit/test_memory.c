/* test_memory.c — networks/memory.c's estimate, against figures computed by hand
 * from the layer tables of `deepdesk net check`, and against the arenas graph.c
 * really allocates. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include <signal.h>

#include "../../jobs/kind_train_memory.h"
#include "../../networks/backend.h"
#include "../../networks/graph.h"
#include "../../networks/memory.h"
#include "../../networks/net.h"
#include "check.h"

#include <cjson/cJSON.h>

#define MIB (1024 * 1024LL)

struct nets {
	struct net *def;
	struct net_graph *tg, *vg;
};

static int load(struct nets *n, const char *name, int c, int h, int w, int classes, int batch)
{
	struct dd_err err = { 0 };
	const char *text = net_standard_text(name);
	struct net_input in = { .n = batch, .c = c, .h = h, .w = w, .classes = classes };
	memset(n, 0, sizeof *n);
	if (!text || net_parse(text, strlen(text), &n->def, &err) ||
	    net_instantiate(n->def, NET_STAGE_TRAIN, &in, &n->tg, &err) ||
	    net_instantiate(n->def, NET_STAGE_VAL, &in, &n->vg, &err)) {
		fprintf(stderr, "%s: %s\n", name, err.msg);
		return -1;
	}
	return 0;
}

static void unload(struct nets *n)
{
	net_graph_free(n->tg);
	net_graph_free(n->vg);
	net_free(n->def);
}

/* LeNet on 1x28x28, 10 classes, batch 64, SGD on oneDNN, by hand:
 *   P = 431,080; A_train = 1,310,657, A_val = 1,310,658 (the val stage's accuracy)
 *   saved: relu1 in place on ip1: tmp 64·500 floats = 128,000 bytes per graph
 *   layer state: pool1 4·64·20·12·12 + pool2 4·64·50·4·4 + loss 4·64·10 = 944,640
 *   workspace: tmp pool1's input 64·20·24·24 = 737,280 (more than ip1's 64·800 +
 *              400,500); stage conv1 (1 channel: blocked) 64·784 + 520 + 737,280 =
 *              787,976; 4·(737,280 + 787,976)
 *   feed: 4·(2·64·784 + 784) per feed; snapshot: the weights file, 4·P */
static void test_lenet(void)
{
	struct nets n;
	if (load(&n, "lenet", 1, 28, 28, 10, 64)) {
		CHECK(0);
		return;
	}
	struct net_memory m;
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "cpu", 1, &m), DD_OK);
	CHECK_EQ_INT(m.batch, 64);
	CHECK_EQ_INT(m.params, 2 * 4 * 431080LL);
	CHECK_EQ_INT(m.grads, 2 * 4 * 431080LL);
	CHECK_EQ_INT(m.history, 4 * 431080LL);
	CHECK_EQ_INT(m.activations, 4 * (1310657LL + 1310658LL));
	CHECK_EQ_INT(m.act_grads, m.activations);
	CHECK_EQ_INT(m.saved, 2 * 128000LL);
	CHECK_EQ_INT(m.layer_state, 2 * 944640LL);
	CHECK_EQ_INT(m.workspace, 4 * (737280LL + 787976LL));
	CHECK_EQ_INT(m.feed, 2 * 4 * (2 * 64 * 784LL + 784));
	CHECK_EQ_INT(m.snapshot, 4 * 431080LL);
	CHECK_EQ_INT(m.total, m.params + m.grads + m.history + m.activations + m.act_grads + m.saved + m.layer_state +
				      m.workspace + m.feed + m.snapshot + m.runtime);
	CHECK_EQ_INT(m.host, m.total);
	printf("lenet b64 cpu sgd: total %.1f MiB (runtime %.0f)\n", (double)m.total / MIB, (double)m.runtime / MIB);
	/* Adam keeps two histories; the reference backend no workspace */
	struct net_memory a;
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_ADAM, "ref", 1, &a), DD_OK);
	CHECK_EQ_INT(a.history, 2 * 4 * 431080LL);
	CHECK_EQ_INT(a.workspace, 0);
	CHECK_EQ_INT(a.snapshot, 2 * 4 * 431080LL); /* the solver state, the larger file */
	/* two copies: two train graphs and histories, one val graph */
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "ref", 2, &a), DD_OK);
	CHECK_EQ_INT(a.params, 3 * 4 * 431080LL);
	CHECK_EQ_INT(a.history, 2 * 4 * 431080LL);
	CHECK_EQ_INT(a.feed, 4 * (2 * 128 * 784LL + 784) + 4 * (2 * 64 * 784LL + 784));
	/* on a GPU only the feeds and the runtime are the machine's */
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "cuda:0", 1, &a), DD_OK);
	CHECK(a.device && a.host == a.feed + a.snapshot + a.runtime && a.host < a.total);
	cJSON *j = net_memory_json(&m);
	CHECK(j && cJSON_GetObjectItem(j, "total")->valuedouble == (double)m.total);
	CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "breakdown"), "history")->valuedouble == 4 * 431080.0);
	cJSON_Delete(j);
	CHECK_EQ_INT(strcmp(n.tg->node[net_memory_largest_layer(n.tg)].l.name, "ip1"), 0);
	unload(&n);
}

/* AlexNet on 3x256x256 (cropped to 227), 4 classes, batch 32:
 *   P = 56,884,612; A_train = 45,195,265, A_val = 45,195,266; fc6 is the largest layer
 *   workspace tmp: fc6's 32·9216 + 37,752,832 floats */
static void test_alexnet(void)
{
	struct nets n;
	if (load(&n, "alexnet", 3, 256, 256, 4, 32)) {
		CHECK(0);
		return;
	}
	struct net_memory m;
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "cpu", 1, &m), DD_OK);
	CHECK_EQ_INT(m.params, 2 * 4 * 56884612LL);
	CHECK_EQ_INT(m.history, 4 * 56884612LL);
	CHECK_EQ_INT(m.activations, 4 * (45195265LL + 45195266LL));
	CHECK(m.workspace >= 4 * (32 * 9216LL + 37752832LL));
	CHECK_EQ_INT(m.feed, 2 * 4 * (2 * 32 * 3 * 227 * 227LL + 3 * 227 * 227));
	CHECK_EQ_INT(strcmp(n.tg->node[net_memory_largest_layer(n.tg)].l.name, "fc6"), 0);
	printf("alexnet b32 cpu sgd: total %.1f MiB: params %.0f grads %.0f hist %.0f acts %.0f dacts %.0f saved %.0f "
	       "state %.0f ws %.0f feed %.0f\n",
	       (double)m.total / MIB, (double)m.params / MIB, (double)m.grads / MIB, (double)m.history / MIB,
	       (double)m.activations / MIB, (double)m.act_grads / MIB, (double)m.saved / MIB,
	       (double)m.layer_state / MIB, (double)m.workspace / MIB, (double)m.feed / MIB);
	unload(&n);
}

/* ResNet-20 (BatchNorm, in-place Scale and ReLU: saved copies) at batch 128: the
 * total against the peak measured by hand (`deepdesk train --threads 2`: VmData
 * 1459 MiB, RSS 1428 MiB), within 15%. */
static void test_resnet(void)
{
	struct nets n;
	if (load(&n, "resnet_small", 3, 32, 32, 4, 128)) {
		CHECK(0);
		return;
	}
	struct net_memory m;
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "cpu", 1, &m), DD_OK);
	CHECK(m.saved > 0);
	printf("resnet_small b128 cpu sgd: total %.1f MiB: acts %.0f dacts %.0f saved %.0f state %.0f ws %.0f\n",
	       (double)m.total / MIB, (double)m.activations / MIB, (double)m.act_grads / MIB, (double)m.saved / MIB,
	       (double)m.layer_state / MIB, (double)m.workspace / MIB);
	CHECK(m.total > 1459 * MIB * 85 / 100 && m.total < 1459 * MIB * 115 / 100);
	unload(&n);
}

/* The plan is what graph_create allocates, arena by arena. */
static void test_plan_is_real(void)
{
	static const char *const names[] = { "lenet", "resnet_small", NULL };
	for (int i = 0; names[i]; i++) {
		struct nets n;
		const struct net_standard *s = net_standard_find(names[i]);
		if (load(&n, names[i], s->c, s->h, s->w, s->classes, 8)) {
			CHECK(0);
			continue;
		}
		struct dd_err err = { 0 };
		struct graph *gr = NULL;
		struct graph_bytes plan, real;
		CHECK_EQ_INT(graph_bytes_plan(n.tg, &plan), DD_OK);
		CHECK_EQ_INT(graph_create(n.tg, NULL, 1, &gr, &err), DD_OK);
		if (gr) {
			graph_bytes_of(gr, &real);
			CHECK_EQ_INT(plan.params, real.params);
			CHECK_EQ_INT(plan.grads, real.grads);
			CHECK_EQ_INT(plan.acts, real.acts);
			CHECK_EQ_INT(plan.dacts, real.dacts);
			CHECK_EQ_INT(plan.saved, real.saved);
		}
		graph_free(gr);
		unload(&n);
	}
}

/* The limit's syntax, the refusal's sentence and the end of a worker that ran out. */
static void test_limit_and_death(void)
{
	int64_t b = 0;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(job_memory_parse("4G", &b, &err), DD_OK);
	CHECK_EQ_INT(b, 4LL << 30);
	CHECK_EQ_INT(job_memory_parse("512MiB", &b, &err), DD_OK);
	CHECK_EQ_INT(b, 512LL << 20);
	CHECK_EQ_INT(job_memory_parse("1000000", &b, &err), DD_OK);
	CHECK_EQ_INT(b, 1000000);
	CHECK_EQ_INT(job_memory_parse("off", &b, &err), DD_OK);
	CHECK_EQ_INT(b, 0);
	CHECK_EQ_INT(job_memory_parse("auto", &b, &err), DD_OK);
	CHECK(b > 0 && b == job_memory_auto());
	CHECK_EQ_INT(job_memory_parse("4X", &b, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "--job-memory-max");
	CHECK_EQ_INT(job_memory_parse("-1", &b, &err), DD_EINVAL);
	CHECK_EQ_INT(job_memory_parse("4 ", &b, &err), DD_EINVAL);
	CHECK_EQ_INT(job_memory_parse("4GX", &b, &err), DD_EINVAL);
	CHECK_EQ_INT(job_memory_parse("", &b, &err), DD_EINVAL);
	CHECK_EQ_INT(job_memory_parse("1.5k", &b, &err), DD_OK);
	CHECK_EQ_INT(b, 1536);

	/* over the limit: the figure, the limit and what to lower */
	struct net_memory m = { .batch = 64, .params = 300 * MIB, .grads = 300 * MIB, .history = 300 * MIB,
				.activations = 10 * MIB, .host = 1000 * MIB, .total = 1000 * MIB };
	job_memory_set_max(512 * MIB);
	CHECK(job_memory_cap() > 640 * MIB);
	CHECK_EQ_INT(train_memory_over(&m, "fc6", 1234, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "at batch 64 needs about 1000 MiB (1048576000 bytes");
	CHECK_CONTAINS(err.msg, "limit of 512 MiB (536870912 bytes");
	CHECK_CONTAINS(err.msg, "num_output of layer 'fc6' (1234 parameters)");
	m.activations = 1000 * MIB; /* activations dominate: the batch first */
	CHECK_EQ_INT(train_memory_over(&m, "fc6", 1234, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "lower batch_size (now 64)");
	m.host = 100 * MIB;
	CHECK_EQ_INT(train_memory_over(&m, "fc6", 1234, &err), DD_OK);
	job_memory_set_max(0); /* off */
	CHECK_EQ_INT(job_memory_cap(), 0);
	m.host = 100000 * MIB;
	CHECK_EQ_INT(train_memory_over(&m, NULL, 0, &err), DD_OK);

	/* a worker's end: memory.json gives the figure */
	char dir[] = "/tmp/dd-memory-XXXXXX", path[64], why[1024];
	if (!mkdtemp(dir)) {
		CHECK(0);
		return;
	}
	snprintf(path, sizeof path, "%s/memory.json", dir);
	FILE *f = fopen(path, "w");
	fputs("{\"estimate\":104857600,\"batch\":32,\"limit\":209715200}\n", f);
	fclose(f);
	CHECK_EQ_INT(train_memory_death(dir, SIGKILL, -1, 1, "", why, sizeof why), 1);
	CHECK_CONTAINS(why, "out of memory (100 MiB at batch 32, limit 200 MiB): the worker was killed by signal 9");
	/* a SIGKILL while the OOM killer killed nothing is a person's kill -9: the scheduler tells it */
	CHECK_EQ_INT(train_memory_death(dir, SIGKILL, -1, 0, "", why, sizeof why), 0);
	CHECK_EQ_INT(train_memory_death(dir, SIGSEGV, -1, 0, "deepdesk worker: out of memory (an allocation failed)", why,
					 sizeof why),
		     1);
	CHECK_CONTAINS(why, "out of memory (100 MiB at batch 32, limit 200 MiB): the worker crashed (signal 11");
	CHECK_EQ_INT(train_memory_death(dir, -1, 1, 0, "libgomp: Out of memory allocating 4096 bytes", why, sizeof why), 1);
	CHECK_CONTAINS(why, "exited with status 1 after an allocation failed");
	/* a crash that is not memory's stays the scheduler's to tell */
	CHECK_EQ_INT(train_memory_death(dir, SIGSEGV, -1, 0, "segfault somewhere", why, sizeof why), 0);
	CHECK_EQ_INT(train_memory_death(dir, -1, 3, 0, "", why, sizeof why), 0);
	remove(path);
	/* not a training (no memory.json): no figure, no advice about batches */
	CHECK_EQ_INT(train_memory_death(dir, SIGKILL, -1, 1, "", why, sizeof why), 1);
	CHECK_STR(why, "out of memory: the worker was killed by signal 9 (SIGKILL), as the kernel's out-of-memory killer "
		       "ends a process");
	f = fopen(path, "w");
	fputs("{\"estimate\":104857600,\"batch\":32,\"limit\":209715200}\n", f);
	fclose(f);
	dd_err_set(&err, DD_ENOMEM, "out of memory for the network's 5 parameters");
	train_memory_oom_message(dir, &err);
	CHECK_CONTAINS(err.msg, "out of memory (100 MiB at batch 32, limit 200 MiB): out of memory for the network's 5");
	CHECK_CONTAINS(err.msg, "lower batch_size");
	remove(path);
	rmdir(dir);
}

static void test_human(void)
{
	char b[32];
	net_memory_human(1288490189LL, b, sizeof b);
	CHECK_STR(b, "1.2 GiB");
	net_memory_human(312 * MIB, b, sizeof b);
	CHECK_STR(b, "312 MiB");
	net_memory_human(48 * 1024, b, sizeof b);
	CHECK_STR(b, "48 KiB");
}

int main(void)
{
	RUN(test_lenet);
	RUN(test_alexnet);
	RUN(test_resnet);
	RUN(test_plan_is_real);
	RUN(test_human);
	RUN(test_limit_and_death);
	return check_summary();
}
