/* test_memory.c — networks/memory.c's estimate, against figures computed by hand
 * from the layer tables of `deepdesk net check`, and against the arenas graph.c
 * really allocates. */
#define _GNU_SOURCE
#include <string.h>

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
 *   feed: 4·(2·64·784 + 784) per feed */
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
	CHECK_EQ_INT(m.total, m.params + m.grads + m.history + m.activations + m.act_grads + m.saved + m.layer_state +
				      m.workspace + m.feed + m.runtime);
	CHECK_EQ_INT(m.host, m.total);
	printf("lenet b64 cpu sgd: total %.1f MiB (runtime %.0f)\n", (double)m.total / MIB, (double)m.runtime / MIB);
	/* Adam keeps two histories; the reference backend no workspace */
	struct net_memory a;
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_ADAM, "ref", 1, &a), DD_OK);
	CHECK_EQ_INT(a.history, 2 * 4 * 431080LL);
	CHECK_EQ_INT(a.workspace, 0);
	/* two copies: two train graphs and histories, one val graph */
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "ref", 2, &a), DD_OK);
	CHECK_EQ_INT(a.params, 3 * 4 * 431080LL);
	CHECK_EQ_INT(a.history, 2 * 4 * 431080LL);
	CHECK_EQ_INT(a.feed, 4 * (2 * 128 * 784LL + 784) + 4 * (2 * 64 * 784LL + 784));
	/* on a GPU only the feeds and the runtime are the machine's */
	CHECK_EQ_INT(net_memory_estimate(n.tg, n.vg, SOLVER_SGD, "cuda:0", 1, &a), DD_OK);
	CHECK(a.device && a.host == a.feed + a.runtime && a.host < a.total);
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
	RUN(test_plan_is_real);
	RUN(test_human);
	return check_summary();
}
