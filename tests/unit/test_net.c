/* test_net.c — network descriptions: the four standard networks in each of DIGITS'
 * stages with their shapes and parameter counts (LeNet 431,080 on 1x28x28 with 10
 * classes; AlexNet 60,965,224 on 227x227 crops with 1000; GoogLeNet 13,378,280 in
 * training with its auxiliary heads and 6,998,552 deployed, as Caffe's
 * bvlc_googlenet; ResNet-20 272,474 learned), Caffe's include/exclude rules, DIGITS'
 * clean-up, Caffe's output-size formulas, every schema and graph error with the
 * layer it names and its LINE:COL, the reports, and the `deepdesk net` verb. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "../../networks/net.h"
#include "check.h"

/* The verb lives in app/ (not in the library the tests link): build it in. */
#include "../../app/cli/cli.c"
#include "../../app/cli/cli_net.c"

static struct net *parse_ok(const char *text)
{
	struct net *net = NULL;
	struct dd_err err = { 0, "" };
	int rc = net_parse(text, strlen(text), &net, &err);
	if (rc != DD_OK)
		fprintf(stderr, "  unexpected parse error: %s\n", err.msg);
	CHECK(rc == DD_OK && net);
	return net;
}

static struct net_input input(int c, int h, int w, int classes)
{
	struct net_input in = { .c = c, .h = h, .w = w, .classes = classes };
	return in;
}

static struct net_graph *inst(const struct net *def, enum net_stage s, struct net_input in)
{
	struct net_graph *g = NULL;
	struct dd_err err = { 0, "" };
	if (!def)
		return NULL;
	int rc = net_instantiate(def, s, &in, &g, &err);
	if (rc != DD_OK)
		fprintf(stderr, "  unexpected instantiate error (%s): %s\n", net_stage_name(s), err.msg);
	CHECK(rc == DD_OK && g);
	return g;
}

static const struct net_node *node(const struct net_graph *g, const char *name)
{
	for (int k = 0; g && k < g->nnode; k++)
		if (!strcmp(g->node[k].l.name, name))
			return &g->node[k];
	return NULL;
}

static int has(const struct net_graph *g, const char *name)
{
	return node(g, name) != NULL;
}

/* "64x20x24x24" for blob `name`; "?" if there is none. */
static const char *shape(const struct net_graph *g, const char *name)
{
	static char buf[8][64];
	static int turn;
	char *s = buf[turn++ % 8];
	strcpy(s, "?");
	for (int b = 0; g && b < g->nblob; b++)
		if (!strcmp(g->blob[b].name, name)) {
			size_t k = 0;
			s[0] = 0;
			if (!g->blob[b].shape.ndim)
				strcpy(s, "scalar");
			for (int d = 0; d < g->blob[b].shape.ndim; d++)
				k += (size_t)snprintf(s + k, 64 - k, "%s%lld", d ? "x" : "", (long long)g->blob[b].shape.dim[d]);
		}
	return s;
}

static int64_t params_of(const struct net_graph *g, const char *layer)
{
	const struct net_node *n = node(g, layer);
	return n ? n->nparams : -1;
}

static int count_type(const struct net_graph *g, enum net_layer_type t)
{
	int n = 0;
	for (int k = 0; g && k < g->nnode; k++)
		n += g->node[k].l.type == t;
	return n;
}

/* The error net_parse gives, or "" */
static const char *parse_error(const char *text)
{
	static struct dd_err err;
	struct net *net = NULL;
	memset(&err, 0, sizeof err);
	if (net_parse(text, strlen(text), &net, &err) == DD_OK) {
		net_free(net);
		return "";
	}
	CHECK(net == NULL);
	CHECK(err.code != DD_OK);
	return err.msg;
}

/* The error instantiating text for stage s gives, or "" */
static const char *inst_error(const char *text, enum net_stage s, struct net_input in)
{
	static struct dd_err err;
	struct net *net = NULL;
	struct net_graph *g = NULL;
	memset(&err, 0, sizeof err);
	if (net_parse(text, strlen(text), &net, &err) != DD_OK) {
		fprintf(stderr, "  parse error instead: %s\n", err.msg);
		CHECK(0);
		return err.msg;
	}
	int rc = net_instantiate(net, s, &in, &g, &err);
	net_graph_free(g);
	net_free(net);
	if (rc == DD_OK)
		return "";
	CHECK(g == NULL || rc != DD_OK);
	return err.msg;
}

/* ---- the standard networks ---------------------------------------------------- */

static void test_lenet(void)
{
	struct net *def = parse_ok(net_standard_text("lenet"));
	struct net_input in = input(1, 28, 28, 10);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, in), *v = inst(def, NET_STAGE_VAL, in),
			 *d = inst(def, NET_STAGE_DEPLOY, in);
	if (!t || !v || !d)
		goto out;
	CHECK_STR(t->name, "LeNet");
	CHECK_EQ_INT(t->nnode, 10);
	CHECK_STR(t->node[0].l.name, "train-data");
	CHECK_STR(shape(t, "data"), "64x1x28x28");
	CHECK_STR(shape(t, "label"), "64");
	CHECK_STR(shape(t, "scaled"), "64x1x28x28");
	CHECK_STR(shape(t, "conv1"), "64x20x24x24");
	CHECK_STR(shape(t, "pool1"), "64x20x12x12");
	CHECK_STR(shape(t, "conv2"), "64x50x8x8");
	CHECK_STR(shape(t, "pool2"), "64x50x4x4");
	CHECK_STR(shape(t, "ip1"), "64x500");
	CHECK_STR(shape(t, "ip2"), "64x10");
	CHECK_STR(shape(t, "loss"), "scalar");
	CHECK_EQ_INT(params_of(t, "conv1"), 520);
	CHECK_EQ_INT(params_of(t, "conv2"), 25050);
	CHECK_EQ_INT(params_of(t, "ip1"), 400500);
	CHECK_EQ_INT(params_of(t, "ip2"), 5010);
	CHECK_EQ_INT(t->params, 431080);
	CHECK_EQ_INT(t->learned, 431080);
	CHECK(node(t, "relu1")->in_place);
	CHECK(!has(t, "accuracy") && !has(t, "softmax") && !has(t, "val-data"));
	CHECK(node(t, "loss")->loss_weight == 1);
	CHECK(node(t, "scale")->l.power.scale == 0.0125f);
	/* resolved params: DIGITS' class count, the weight layout, lr_mult 2 on biases */
	const struct net_node *ip2 = node(t, "ip2");
	CHECK_EQ_INT(ip2->l.ip.num_output, 10);
	CHECK_EQ_INT(ip2->nparam, 2);
	CHECK_STR(ip2->param[0].role, "weights");
	CHECK_EQ_INT(ip2->param[0].shape.dim[0], 10);
	CHECK_EQ_INT(ip2->param[0].shape.dim[1], 500);
	CHECK(ip2->param[1].lr_mult == 2 && ip2->param[0].lr_mult == 1);
	CHECK(ip2->l.ip.weight_filler.type == NET_FILLER_XAVIER);
	const struct net_node *c1 = node(t, "conv1");
	CHECK(c1->param[0].shape.ndim == 4 && c1->param[0].shape.dim[0] == 20 && c1->param[0].shape.dim[1] == 1 &&
	      c1->param[0].shape.dim[2] == 5 && c1->param[0].shape.dim[3] == 5);
	/* the original def keeps num_output unset */
	CHECK_EQ_INT(def->layer[8].ip.num_output, 0);

	CHECK_EQ_INT(v->nnode, 11);
	CHECK_STR(v->node[0].l.name, "val-data");
	CHECK_STR(shape(v, "data"), "32x1x28x28");
	CHECK_STR(shape(v, "accuracy"), "scalar");
	CHECK(has(v, "loss") && !has(v, "softmax"));
	CHECK_EQ_INT(v->params, 431080);

	CHECK_EQ_INT(d->nnode, 10);
	CHECK(d->node[0].l.type == NET_INPUT && d->node[0].index == -1 && d->node[0].l.line == 0);
	CHECK_STR(shape(d, "data"), "1x1x28x28");
	CHECK_STR(shape(d, "softmax"), "1x10");
	CHECK(!has(d, "loss") && !has(d, "accuracy"));
	CHECK_EQ_INT(d->params, 431080);
out:
	net_graph_free(t);
	net_graph_free(v);
	net_graph_free(d);
	net_free(def);
}

static void test_alexnet(void)
{
	struct net *def = parse_ok(net_standard_text("alexnet"));
	struct net_input in = input(3, 256, 256, 1000);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, in), *v = inst(def, NET_STAGE_VAL, in),
			 *d = inst(def, NET_STAGE_DEPLOY, in);
	if (!t || !v || !d)
		goto out;
	CHECK_EQ_INT(def->nlayer, 27);
	CHECK_STR(shape(t, "data"), "128x3x227x227");
	CHECK_EQ_INT(t->in.crop, 227);
	CHECK_STR(shape(t, "conv1"), "128x96x55x55");
	CHECK_STR(shape(t, "norm1"), "128x96x55x55");
	CHECK_STR(shape(t, "pool1"), "128x96x27x27");
	CHECK_STR(shape(t, "conv2"), "128x256x27x27");
	CHECK_STR(shape(t, "pool2"), "128x256x13x13");
	CHECK_STR(shape(t, "conv5"), "128x256x13x13");
	CHECK_STR(shape(t, "pool5"), "128x256x6x6");
	CHECK_STR(shape(t, "fc6"), "128x4096");
	CHECK_STR(shape(t, "fc8"), "128x1000");
	CHECK_EQ_INT(params_of(t, "conv1"), 34944);
	CHECK_EQ_INT(params_of(t, "conv2"), 307456); /* group 2: 256 x 48 x 5 x 5 + 256 */
	CHECK_EQ_INT(node(t, "conv2")->param[0].shape.dim[1], 48);
	CHECK_EQ_INT(params_of(t, "fc6"), 37752832);
	CHECK_EQ_INT(t->params, 60965224);
	CHECK(node(t, "conv1")->param[1].decay_mult == 0);
	CHECK(node(t, "drop6")->l.dropout.ratio == 0.5f && node(t, "drop6")->in_place);
	CHECK_EQ_INT(node(t, "norm1")->l.lrn.local_size, 5);
	CHECK(node(t, "norm1")->l.lrn.alpha == 0.0001f && node(t, "norm1")->l.lrn.beta == 0.75f);
	CHECK(node(t, "train-data")->l.data.mirror && !node(v, "val-data")->l.data.mirror);
	CHECK_EQ_INT(count_type(t, NET_CONVOLUTION), 5);
	CHECK_EQ_INT(count_type(t, NET_RELU), 7);
	CHECK_EQ_INT(count_type(t, NET_LRN), 2);
	CHECK_EQ_INT(count_type(t, NET_POOLING), 3);
	CHECK_EQ_INT(count_type(t, NET_INNER_PRODUCT), 3);
	CHECK_EQ_INT(count_type(t, NET_DROPOUT), 2);
	CHECK_STR(shape(v, "data"), "32x3x227x227");
	CHECK_STR(shape(d, "data"), "1x3x227x227");
	CHECK_STR(shape(d, "softmax"), "1x1000");
	CHECK_EQ_INT(d->params, 60965224);
out:
	net_graph_free(t);
	net_graph_free(v);
	net_graph_free(d);
	/* ten classes: fc8 shrinks to 4096 x 10 + 10 */
	t = inst(def, NET_STAGE_TRAIN, input(3, 256, 256, 10));
	if (t)
		CHECK_EQ_INT(t->params, 60965224 - 4097000 + 40970);
	net_graph_free(t);
	net_free(def);
}

static void test_googlenet(void)
{
	struct net *def = parse_ok(net_standard_text("googlenet"));
	struct net_input in = input(3, 256, 256, 1000);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, in), *v = inst(def, NET_STAGE_VAL, in),
			 *d = inst(def, NET_STAGE_DEPLOY, in);
	if (!t || !v || !d)
		goto out;
	CHECK_STR(shape(t, "data"), "32x3x224x224");
	CHECK_STR(shape(t, "conv1/7x7_s2"), "32x64x112x112");
	CHECK_STR(shape(t, "pool1/3x3_s2"), "32x64x56x56");
	CHECK_STR(shape(t, "pool2/3x3_s2"), "32x192x28x28");
	CHECK_STR(shape(t, "inception_3a/output"), "32x256x28x28");
	CHECK_STR(shape(t, "inception_3b/output"), "32x480x28x28");
	CHECK_STR(shape(t, "pool3/3x3_s2"), "32x480x14x14");
	CHECK_STR(shape(t, "inception_4a/output"), "32x512x14x14");
	CHECK_STR(shape(t, "loss1/ave_pool"), "32x512x4x4");
	CHECK_STR(shape(t, "loss1/fc"), "32x1024");
	CHECK_STR(shape(t, "inception_4d/output"), "32x528x14x14");
	CHECK_STR(shape(t, "inception_4e/output"), "32x832x14x14");
	CHECK_STR(shape(t, "pool4/3x3_s2"), "32x832x7x7");
	CHECK_STR(shape(t, "inception_5b/output"), "32x1024x7x7");
	CHECK_STR(shape(t, "pool5/7x7_s1"), "32x1024x1x1");
	CHECK_STR(shape(t, "loss3/classifier"), "32x1000");
	CHECK_EQ_INT(t->params, 13378280);
	CHECK_EQ_INT(count_type(t, NET_CONVOLUTION), 59);
	CHECK_EQ_INT(count_type(t, NET_RELU), 61);
	CHECK_EQ_INT(count_type(t, NET_POOLING), 16);
	CHECK_EQ_INT(count_type(t, NET_CONCAT), 9);
	CHECK_EQ_INT(count_type(t, NET_LRN), 2);
	CHECK_EQ_INT(count_type(t, NET_INNER_PRODUCT), 5);
	CHECK_EQ_INT(count_type(t, NET_DROPOUT), 3);
	CHECK_EQ_INT(count_type(t, NET_SOFTMAX_LOSS), 3);
	CHECK_EQ_INT(count_type(t, NET_ACCURACY), 0);
	CHECK(node(t, "loss1/loss")->loss_weight == 0.3f);
	CHECK(node(t, "loss2/loss")->loss_weight == 0.3f);
	CHECK(node(t, "loss3/loss")->loss_weight == 1.0f);
	CHECK_STR(shape(v, "data"), "16x3x224x224");
	CHECK_EQ_INT(count_type(v, NET_ACCURACY), 6);
	CHECK_EQ_INT(node(v, "loss3/top-5")->l.accuracy.top_k, 5);
	/* deployed: no auxiliary heads, Caffe's bvlc_googlenet count */
	CHECK_EQ_INT(d->params, 6998552);
	CHECK(!has(d, "loss1/conv") && !has(d, "loss2/classifier") && has(d, "softmax"));
	CHECK_STR(shape(d, "softmax"), "1x1000");
out:
	net_graph_free(t);
	net_graph_free(v);
	net_graph_free(d);
	/* four classes: DIGITS drops the top-5 accuracies */
	v = inst(def, NET_STAGE_VAL, input(3, 256, 256, 4));
	if (v) {
		CHECK_EQ_INT(count_type(v, NET_ACCURACY), 3);
		CHECK(!has(v, "loss1/top-5") && has(v, "loss1/top-1"));
	}
	net_graph_free(v);
	net_free(def);
}

static void test_resnet_small(void)
{
	struct net *def = parse_ok(net_standard_text("resnet_small"));
	struct net_input in = input(3, 32, 32, 10);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, in), *v = inst(def, NET_STAGE_VAL, in),
			 *d = inst(def, NET_STAGE_DEPLOY, in);
	if (!t || !v || !d)
		goto out;
	CHECK_STR(shape(t, "data"), "128x3x32x32");
	CHECK_STR(shape(t, "conv1_scale"), "128x16x32x32");
	CHECK_STR(shape(t, "s1b3_sum"), "128x16x32x32");
	CHECK_STR(shape(t, "s2b1_conv1"), "128x32x16x16");
	CHECK_STR(shape(t, "s2b1_proj_scale"), "128x32x16x16");
	CHECK_STR(shape(t, "s3b3_sum"), "128x64x8x8");
	CHECK_STR(shape(t, "pool"), "128x64x1x1");
	CHECK_STR(shape(t, "fc"), "128x10");
	CHECK_EQ_INT(node(t, "pool")->l.pool.kh, 8); /* global pooling resolved */
	CHECK(node(t, "pool")->l.pool.pool == NET_POOL_AVE);
	CHECK_EQ_INT(t->learned, 272474);
	CHECK_EQ_INT(t->params, 274063); /* with BatchNorm's statistics: 2C + 1 each */
	const struct net_node *bn = node(t, "conv1_bn");
	CHECK_EQ_INT(bn->nparams, 33);
	CHECK(!bn->param[0].learned && !bn->param[2].learned);
	CHECK_STR(bn->param[1].role, "variance");
	CHECK(bn->l.bn.use_global_stats == 0 && bn->l.bn.eps == 1e-5f); /* resolved: training */
	CHECK_EQ_INT(node(v, "conv1_bn")->l.bn.use_global_stats, 1);
	CHECK_EQ_INT(def->layer[3].bn.use_global_stats, -1);
	CHECK_EQ_INT(params_of(t, "conv1_scale"), 32);
	CHECK_EQ_INT(params_of(t, "conv1"), 432); /* no bias */
	CHECK(node(t, "s1b1_sum")->l.eltwise.op == NET_ELTWISE_SUM);
	CHECK_EQ_INT(count_type(t, NET_ELTWISE), 9);
	CHECK_EQ_INT(count_type(t, NET_BATCH_NORM), 21);
	CHECK_STR(shape(v, "data"), "100x3x32x32");
	CHECK_STR(shape(d, "softmax"), "1x10");
out:
	net_graph_free(t);
	net_graph_free(v);
	net_graph_free(d);
	net_free(def);
}

static void test_standard_table(void)
{
	int n = 0;
	for (const struct net_standard *s = net_standards; s->name; s++, n++) {
		CHECK(s->text && s->title && s->about && s->c > 0 && s->classes > 0);
		CHECK(net_standard_find(s->name) == s);
		CHECK(net_standard_text(s->name) == s->text);
	}
	CHECK_EQ_INT(n, 4);
	CHECK(net_standard_find("vgg16") == NULL && net_standard_text(NULL) == NULL);
	CHECK_EQ_INT(net_standard_find("lenet")->c, 1);
	CHECK_EQ_INT(net_standard_find("resnet_small")->h, 32);
}

/* ---- stages and DIGITS' clean-up -------------------------------------------------- */

static const char rules_net[] =
	"name: \"rules\"\n"
	"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" data_param { batch_size: 4 } }\n"
	"layer { name: \"always\" type: \"ReLU\" bottom: \"data\" top: \"data\" }\n"
	"layer { name: \"train_phase\" type: \"Sigmoid\" bottom: \"data\" top: \"data\" include { phase: TRAIN } }\n"
	"layer { name: \"test_phase\" type: \"TanH\" bottom: \"data\" top: \"data\" include { phase: TEST } }\n"
	"layer { name: \"val_only\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { stage: \"val\" } }\n"
	"layer { name: \"not_deploy\" type: \"ReLU\" bottom: \"data\" top: \"data\" exclude { stage: \"deploy\" } }\n"
	"layer { name: \"not_stage\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { not_stage: \"train\" } }\n"
	"layer { name: \"either\" type: \"ReLU\" bottom: \"data\" top: \"data\"\n"
	"        include { stage: \"train\" } include { stage: \"deploy\" } }\n"
	"layer { name: \"both\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { stage: \"train\" stage: \"val\" } }\n"
	"layer { name: \"level1\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { min_level: 1 } }\n"
	"layer { name: \"below0\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { max_level: -1 } }\n"
	"layer { name: \"level0\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { min_level: 0 max_level: 0 } }\n"
	"layer { name: \"test_deploy\" type: \"ReLU\" bottom: \"data\" top: \"data\" include { phase: TEST stage: \"deploy\" } }\n"
	"layer { name: \"train_val\" type: \"ReLU\" bottom: \"data\" top: \"data\" exclude { phase: TEST stage: \"deploy\" } }\n"
	"layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 3 } }\n"
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" exclude { stage: \"deploy\" } }\n"
	"layer { name: \"prob\" type: \"Softmax\" bottom: \"ip\" top: \"prob\" include { stage: \"deploy\" } }\n";

static void test_stage_rules(void)
{
	struct net *def = parse_ok(rules_net);
	struct net_input in = input(1, 4, 4, 0);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, in), *v = inst(def, NET_STAGE_VAL, in),
			 *d = inst(def, NET_STAGE_DEPLOY, in);
	if (t && v && d) {
		static const struct {
			const char *name;
			int train, val, deploy;
		} want[] = {
			{ "always", 1, 1, 1 },     { "train_phase", 1, 0, 0 }, { "test_phase", 0, 1, 1 },
			{ "val_only", 0, 1, 0 },   { "not_deploy", 1, 1, 0 },  { "not_stage", 0, 1, 1 },
			{ "either", 1, 0, 1 },     { "both", 0, 0, 0 },        { "level1", 0, 0, 0 },
			{ "below0", 0, 0, 0 },     { "level0", 1, 1, 1 },      { "test_deploy", 0, 0, 1 },
			{ "train_val", 1, 1, 0 },  { "loss", 1, 1, 0 },        { "prob", 0, 0, 1 },
		};
		for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
			if (has(t, want[i].name) != want[i].train || has(v, want[i].name) != want[i].val ||
			    has(d, want[i].name) != want[i].deploy)
				fprintf(stderr, "  layer %s: train %d val %d deploy %d\n", want[i].name,
					has(t, want[i].name), has(v, want[i].name), has(d, want[i].name));
			CHECK_EQ_INT(has(t, want[i].name), want[i].train);
			CHECK_EQ_INT(has(v, want[i].name), want[i].val);
			CHECK_EQ_INT(has(d, want[i].name), want[i].deploy);
		}
		/* a Data layer without rules is in train and val, never in deploy */
		CHECK(has(t, "d") && has(v, "d") && !has(d, "d"));
		CHECK_STR(shape(t, "data"), "4x1x4x4");
		CHECK_STR(shape(d, "data"), "1x1x4x4");
		CHECK_EQ_INT(t->params, 16 * 3 + 3); /* K = 1x4x4 */
	}
	net_graph_free(t);
	net_graph_free(v);
	net_graph_free(d);
	net_free(def);
	enum net_stage s;
	CHECK(net_stage_parse("val", &s, NULL) == DD_OK && s == NET_STAGE_VAL);
	struct dd_err err;
	CHECK(net_stage_parse("test", &s, &err) == DD_EINVAL);
	CHECK_STR(err.msg, "unknown stage \"test\": expected train, val or deploy");
	CHECK_STR(net_stage_name(NET_STAGE_DEPLOY), "deploy");
}

static void test_digits_cleanup(void)
{
	/* an Input layer goes; a missing data layer is added (batch 16); an InnerProduct
	 * without num_output takes the class count; a top-5 Accuracy goes below 5 classes */
	static const char text[] =
		"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n"
		"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"data\" top: \"fc\" }\n"
		"layer { name: \"top1\" type: \"Accuracy\" bottom: \"fc\" bottom: \"label\" top: \"a1\" include { stage: \"val\" } }\n"
		"layer { name: \"top5\" type: \"Accuracy\" bottom: \"fc\" bottom: \"label\" top: \"a5\" include { stage: \"val\" }\n"
		"        accuracy_param { top_k: 5 } }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" exclude { stage: \"deploy\" } }\n"
		"layer { name: \"prob\" type: \"Softmax\" bottom: \"fc\" top: \"prob\" include { stage: \"deploy\" } }\n";
	struct net *def = parse_ok(text);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, input(3, 8, 8, 4));
	struct net_graph *v = inst(def, NET_STAGE_VAL, input(3, 8, 8, 4));
	struct net_graph *v9 = inst(def, NET_STAGE_VAL, input(3, 8, 8, 9));
	if (t && v && v9) {
		CHECK(!has(t, "in"));
		CHECK_STR(t->node[0].l.name, "data");
		CHECK(t->node[0].index == -1 && t->node[0].l.type == NET_DATA);
		CHECK_STR(shape(t, "data"), "16x3x8x8");
		CHECK_STR(shape(t, "label"), "16");
		CHECK_STR(shape(t, "fc"), "16x4");
		CHECK_EQ_INT(t->in.n, 16);
		CHECK(has(v, "top1") && !has(v, "top5"));
		CHECK(has(v9, "top1") && has(v9, "top5"));
	}
	net_graph_free(t);
	net_graph_free(v);
	net_graph_free(v9);
	/* no class count: the InnerProduct cannot be sized */
	struct net_graph *g = NULL;
	struct dd_err err;
	struct net_input in = input(3, 8, 8, 0);
	CHECK_EQ_INT(net_instantiate(def, NET_STAGE_TRAIN, &in, &g, &err), DD_EINVAL);
	CHECK_STR(err.msg, "2:1: layer 'fc': num_output is not set, which DIGITS fills with the dataset's class "
			   "count, and no class count was given");
	CHECK(g == NULL);
	net_free(def);

	/* batch and crop: the form's values win; the prototxt's crop is clamped */
	def = parse_ok(net_standard_text("alexnet"));
	in = input(3, 256, 256, 10);
	in.n = 7;
	in.crop = 200;
	t = inst(def, NET_STAGE_TRAIN, in);
	if (t) {
		CHECK_STR(shape(t, "data"), "7x3x200x200");
		CHECK_EQ_INT(node(t, "train-data")->l.data.batch_size, 7);
		CHECK_EQ_INT(node(t, "train-data")->l.data.crop_size, 200);
	}
	net_graph_free(t);
	in = input(3, 100, 120, 10); /* crop 227 clamped to 100 */
	struct net_graph *dd = inst(def, NET_STAGE_DEPLOY, in);
	t = inst(def, NET_STAGE_TRAIN, in);
	if (t && dd) {
		CHECK_STR(shape(t, "data"), "128x3x100x100");
		CHECK_STR(shape(dd, "data"), "1x3x100x100");
		CHECK_EQ_INT(t->in.crop, 100);
	}
	net_graph_free(t);
	net_graph_free(dd);
	in = input(3, 100, 120, 10);
	in.crop = 101;
	CHECK_EQ_INT(net_instantiate(def, NET_STAGE_TRAIN, &in, &g, &err), DD_EINVAL);
	CHECK_STR(err.msg, "crop size 101 does not fit the 100x120 images: choose a crop size of at most 100, or build the dataset with larger images");
	in = input(0, 0, 0, 10);
	CHECK_EQ_INT(net_instantiate(def, NET_STAGE_TRAIN, &in, &g, &err), DD_EINVAL);
	CHECK_STR(err.msg, "no input shape: give the dataset's image shape (channels x height x width)");
	net_free(def);

	/* the deploy input is named after the data layer's top */
	def = parse_ok("layer { name: \"d\" type: \"Data\" top: \"image\" top: \"label\" include { stage: \"train\" } }\n"
		       "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"image\" top: \"ip\" }\n"
		       "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"l\" exclude { stage: \"deploy\" } }\n"
		       "layer { name: \"sm\" type: \"Softmax\" bottom: \"ip\" top: \"sm\" include { stage: \"deploy\" } }\n");
	in = input(1, 5, 5, 2);
	in.n = 3;
	dd = inst(def, NET_STAGE_DEPLOY, in);
	if (dd) {
		CHECK_STR(shape(dd, "image"), "3x1x5x5");
		CHECK_STR(shape(dd, "sm"), "3x2");
	}
	net_graph_free(dd);
	net_free(def);
}

/* ---- Caffe's formulas ------------------------------------------------------------- */

static void test_shape_formulas(void)
{
	static const char text[] =
		"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" data_param { batch_size: 2 } }\n"
		/* rectangular kernel, stride and pad, dilation 2: H (32+2-5)/2+1 = 15, W (40+4-9)/1+1 = 36 */
		"layer { name: \"c\" type: \"Convolution\" bottom: \"data\" top: \"c\" convolution_param {\n"
		"  num_output: 6 kernel_h: 3 kernel_w: 5 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 2 dilation: 2 group: 3 } }\n"
		/* pooling rounds up: (15-3)/2 = 6 -> 7; (36-3)/2 = 16.5 -> 18 */
		"layer { name: \"p\" type: \"Pooling\" bottom: \"c\" top: \"p\" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n"
		/* H: ceil((7+2-2)/3)+1 = 4, but the last window would start in the padding (3*3 >= 7+1): 3;
		 * W: ceil((18+2-2)/3)+1 = 7, and 6*3 < 18+1 keeps it */
		"layer { name: \"q\" type: \"Pooling\" bottom: \"p\" top: \"q\" pooling_param { pool: AVE kernel_size: 2 stride: 3 pad: 1 } }\n"
		"layer { name: \"k\" type: \"Convolution\" bottom: \"data\" top: \"k\" convolution_param {\n"
		"  num_output: 4 kernel_size: [3, 5] stride: [1, 2] pad: 0 bias_term: false } }\n"
		"layer { name: \"g\" type: \"Pooling\" bottom: \"k\" top: \"g\" pooling_param { pool: AVE global_pooling: true } }\n"
		"layer { name: \"f\" type: \"Flatten\" bottom: \"p\" top: \"f\" }\n"
		"layer { name: \"bn\" type: \"BatchNorm\" bottom: \"q\" top: \"bn\" batch_norm_param { eps: 0.001 } }\n"
		"layer { name: \"sc\" type: \"Scale\" bottom: \"bn\" top: \"bn\" scale_param { bias_term: true } }\n"
		"layer { name: \"cat\" type: \"Concat\" bottom: \"bn\" bottom: \"q\" top: \"cat\" }\n"
		"layer { name: \"sum\" type: \"Eltwise\" bottom: \"bn\" bottom: \"q\" top: \"sum\" eltwise_param { coeff: 1 coeff: -1 } }\n"
		"layer { name: \"ip\" type: \"InnerProduct\" bottom: \"cat\" top: \"ip\" param { lr_mult: 0 } inner_product_param { num_output: 5 } }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" loss_weight: 2 }\n";
	struct net *def = parse_ok(text);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, input(3, 32, 40, 0));
	if (t) {
		CHECK_STR(shape(t, "c"), "2x6x15x36");
		CHECK_EQ_INT(params_of(t, "c"), 6 * 1 * 3 * 5 + 6);
		CHECK_STR(shape(t, "p"), "2x6x7x18");
		CHECK_STR(shape(t, "q"), "2x6x3x7");
		CHECK_STR(shape(t, "k"), "2x4x30x18");
		CHECK_EQ_INT(params_of(t, "k"), 4 * 3 * 3 * 5);
		CHECK_STR(shape(t, "g"), "2x4x1x1");
		CHECK_STR(shape(t, "f"), "2x756");
		CHECK_STR(shape(t, "bn"), "2x6x3x7");
		CHECK(node(t, "sc")->in_place);
		CHECK_EQ_INT(params_of(t, "bn"), 13);
		CHECK_EQ_INT(params_of(t, "sc"), 12);
		CHECK_STR(shape(t, "cat"), "2x12x3x7");
		CHECK_STR(shape(t, "sum"), "2x6x3x7");
		CHECK(node(t, "sum")->l.eltwise.ncoeff == 2 && node(t, "sum")->l.eltwise.coeff[1] == -1);
		CHECK_STR(shape(t, "ip"), "2x5");
		CHECK_EQ_INT(params_of(t, "ip"), 12 * 3 * 7 * 5 + 5);
		/* lr_mult 0 freezes the weights; the bias (no param block) learns */
		CHECK(!node(t, "ip")->param[0].learned && node(t, "ip")->param[1].learned);
		CHECK_EQ_INT(t->params - t->learned, 12 * 3 * 7 * 5 + 13);
		CHECK(node(t, "loss")->loss_weight == 2);
		/* the activations count each blob once, in-place ones too */
		int64_t sum = 0;
		for (int b = 0; b < t->nblob; b++)
			sum += t->blob[b].count;
		CHECK_EQ_INT(t->activations, sum);
	}
	net_graph_free(t);
	net_free(def);
}

/* Deconvolution: (in - 1)·s - 2p + d·(k - 1) + 1, weights (C_in, C_out/group, kh, kw) */
static void test_deconv_shapes(void)
{
	static const char text[] =
		"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" data_param { batch_size: 2 } }\n"
		/* FCN's 2x upsampling: (8-1)*2 - 2 + 4 = 16 */
		"layer { name: \"up\" type: \"Deconvolution\" bottom: \"data\" top: \"up\" convolution_param {\n"
		"  num_output: 6 kernel_size: 4 stride: 2 pad: 1 group: 3 bias_term: false weight_filler { type: \"bilinear\" } } }\n"
		/* H (8-1)*3 - 0 + 2*(3-1) + 1 = 26, W (10-1)*1 - 2*1 + 1*(2-1) + 1 = 9 */
		"layer { name: \"r\" type: \"Deconvolution\" bottom: \"data\" top: \"r\" convolution_param {\n"
		"  num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 3 stride_w: 1 pad_h: 0 pad_w: 1 dilation: 2 dilation: 1 } }\n"
		"layer { name: \"f\" type: \"Flatten\" bottom: \"up\" top: \"f\" }\n"
		"layer { name: \"ip\" type: \"InnerProduct\" bottom: \"f\" top: \"ip\" inner_product_param { num_output: 4 } }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n";
	struct net *def = parse_ok(text);
	struct net_graph *t = inst(def, NET_STAGE_TRAIN, input(3, 8, 10, 0));
	if (t) {
		CHECK_STR(shape(t, "up"), "2x6x16x20");
		CHECK_EQ_INT(node(t, "up")->nparam, 1);
		CHECK_EQ_INT(node(t, "up")->param[0].shape.dim[0], 3);
		CHECK_EQ_INT(node(t, "up")->param[0].shape.dim[1], 2);
		CHECK_EQ_INT(params_of(t, "up"), 3 * 2 * 4 * 4);
		CHECK_STR(shape(t, "r"), "2x2x26x9");
		CHECK_EQ_INT(params_of(t, "r"), 3 * 2 * 3 * 2 + 2);
		CHECK_STR(node(t, "r")->param[1].role, "bias");
	}
	net_graph_free(t);
	net_free(def);
}

/* ---- errors ------------------------------------------------------------------------- */

static void test_parse_errors(void)
{
	static const struct {
		const char *in, *msg;
	} cases[] = {
		{ "layer {\n  name: \"conv1\"\n  type: \"Convolution\"\n  bottom: \"data\" top: \"conv1\"\n"
		  "  convolution_param {\n    num_output: 20\n    kernal_size: 5\n  }\n}",
		  "7:5: layer 'conv1': unknown field 'kernal_size' in convolution_param" },
		{ "layer { name: \"a\" type: \"ReLU\" bottom: \"x\" top: \"x\" botom: \"y\" }",
		  "1:53: layer 'a': unknown field 'botom'" },
		{ "nme: \"x\"", "1:1: unknown field 'nme' at the top level (expected name, layer, input, input_shape or input_dim)" },
		{ "layers { name: \"a\" type: RELU }",
		  "1:1: 'layers' is Caffe's old (V1) format: write 'layer' blocks with string types (Caffe's upgrade_net_proto_text converts a file)" },
		{ "layer { name: \"a\" type: RELU }",
		  "1:25: layer 'a': type RELU is Caffe's old (V1) spelling; write the type as a string, e.g. type: \"Convolution\"" },
		{ "layer { name: \"a\" type: \"Conv\" }",
		  "1:25: layer 'a': unknown type \"Conv\" (deepdesk knows Data, Input, Convolution, Pooling, InnerProduct, "
		  "ReLU, Sigmoid, TanH, Power, Dropout, LRN, BatchNorm, Scale, Eltwise, Concat, Flatten, Softmax, "
		  "SoftmaxWithLoss, Accuracy, EuclideanLoss, Crop, Deconvolution)" },
		{ "layer { name: \"a\" }", "1:1: layer 'a': no type given (type: \"Convolution\", ...)" },
		{ "layer { type: \"ReLU\" }\nlayer { type: \"ReLU\" bottom: \"x\" }",
		  "1:1: layer #1: a ReLU layer takes 1 bottom, not 0" },
		{ "layer { name: \"a\" name: \"b\" }", "1:19: name is given twice (first at 1:9)" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\"\n"
		  "  convolution_param { num_output: 2 num_output: 3 kernel_size: 1 } }",
		  "2:37: layer 'a': convolution_param.num_output is given twice (first at 2:23)" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 2.5 kernel_size: 1 } }",
		  "1:92: layer 'a': convolution_param.num_output: expected an integer of at least 1, got 2.5" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 99999999999999999999 kernel_size: 1 } }",
		  "1:92: layer 'a': convolution_param.num_output: expected an integer of at least 1, got 99999999999999999999" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 1 kernel_size: -3 } }",
		  "1:107: layer 'a': convolution_param.kernel_size: expected an integer from 1 to 65535, got -3" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: \"4\" kernel_size: 1 } }",
		  "1:92: layer 'a': convolution_param.num_output: expected an integer of at least 1, got \"4\"" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { kernel_size: 1 } }",
		  "1:78: layer 'a': convolution_param: num_output is required" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 1 } }",
		  "1:78: layer 'a': convolution_param: give kernel_size, or kernel_h and kernel_w" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 1 kernel_size: 3 kernel_h: 3 } }",
		  "1:94: layer 'a': convolution_param: give kernel_size or kernel_h and kernel_w, not both" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 1 kernel_size: [1, 2, 3] } }",
		  "1:94: layer 'a': convolution_param.kernel_size: at most two values (height, width)" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 3 kernel_size: 1 group: 2 } }",
		  "1:78: layer 'a': convolution_param: num_output 3 is not a multiple of group 2" },
		{ "layer { name: \"a\" type: \"Convolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 3 kernel_size: 1\n"
		  "  weight_filler { type: \"positive_unitball\" } } }",
		  "2:25: layer 'a': convolution_param.weight_filler.type: filler \"positive_unitball\" is not supported (constant, uniform, gaussian, xavier, msra or bilinear)" },
		{ "layer { name: \"a\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 3 kernel_size: 2 group: 2 } }",
		  "1:80: layer 'a': convolution_param: num_output 3 is not a multiple of group 2" },
		{ "layer { name: \"a\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" convolution_param { kernel_size: 2 } }",
		  "1:80: layer 'a': convolution_param: num_output is required" },
		{ "layer { name: \"a\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" convolution_param { num_output: 1 kernel_size: 0 } }",
		  "1:109: layer 'a': convolution_param.kernel_size: expected an integer from 1 to 65535, got 0" },
		{ "layer { name: \"c\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" }",
		  "1:1: layer 'c': convolution_param { num_output: ... kernel_size: ... } is required" },
		{ "layer { name: \"a\" type: \"InnerProduct\" bottom: \"x\" top: \"y\" inner_product_param {\n"
		  "  weight_filler { type: \"uniform\" min: 1 max: -1 } } }",
		  "2:17: layer 'a': inner_product_param.weight_filler: uniform min 1 is above max -1" },
		{ "layer { name: \"a\" type: \"InnerProduct\" bottom: \"x\" top: \"y\" inner_product_param { axis: 2 } }",
		  "1:89: layer 'a': inner_product_param.axis: only axis 1 is supported (all of C*H*W is the input)" },
		{ "layer { name: \"c\" type: \"Convolution\" bottom: \"x\" top: \"y\" }",
		  "1:1: layer 'c': convolution_param { num_output: ... kernel_size: ... } is required" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" }",
		  "1:1: layer 'p': pooling_param { kernel_size: ... } (or global_pooling: true) is required" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { pool: STOCHASTIC kernel_size: 2 } }",
		  "1:78: layer 'p': pooling_param.pool: expected MAX or AVE, got STOCHASTIC" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { pool: MAX } }",
		  "1:70: layer 'p': pooling_param: give kernel_size, or kernel_h and kernel_w, or global_pooling: true" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { global_pooling: true kernel_size: 2 } }",
		  "1:70: layer 'p': pooling_param: with global_pooling the kernel is the whole input; remove kernel_size" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { kernel_size: 2 pad: 2 } }",
		  "1:70: layer 'p': pooling_param: pad 2x2 must be smaller than the kernel 2x2" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { kernel_size: 2 kernel_size: 3 } }",
		  "1:87: layer 'p': pooling_param.kernel_size is given twice (first at 1:72)" },
		{ "layer { name: \"d\" type: \"Dropout\" bottom: \"x\" top: \"x\" dropout_param { dropout_ratio: 1 } }",
		  "1:87: layer 'd': dropout_param.dropout_ratio: expected a ratio from 0 to below 1, got 1" },
		{ "layer { name: \"n\" type: \"LRN\" bottom: \"x\" top: \"y\" lrn_param { local_size: 4 } }",
		  "1:76: layer 'n': lrn_param.local_size: expected an odd local_size, got 4" },
		{ "layer { name: \"n\" type: \"LRN\" bottom: \"x\" top: \"y\" lrn_param { norm_region: WITHIN_CHANNEL } }",
		  "1:77: layer 'n': lrn_param.norm_region: expected ACROSS_CHANNELS, got WITHIN_CHANNEL" },
		{ "layer { name: \"n\" type: \"Power\" bottom: \"x\" top: \"y\" power_param { scale: inf } }",
		  "1:75: layer 'n': power_param.scale: expected a finite number, got inf" },
		{ "layer { name: \"n\" type: \"Power\" bottom: \"x\" top: \"y\" power_param { scale: 1e999 } }",
		  "1:75: layer 'n': power_param.scale: expected a finite number, got 1e999" },
		{ "layer { name: \"n\" type: \"Power\" bottom: \"x\" top: \"y\" power_param { scale: MAX } }",
		  "1:75: layer 'n': power_param.scale: expected a finite number, got MAX" },
		{ "layer { name: \"b\" type: \"BatchNorm\" bottom: \"x\" top: \"x\" batch_norm_param { use_global_stats: yes } }",
		  "1:95: layer 'b': batch_norm_param.use_global_stats: expected true or false, got yes" },
		{ "layer { name: \"l\" type: \"SoftmaxWithLoss\" bottom: \"x\" bottom: \"y\" top: \"l\" loss_param { normalization: HALF } }",
		  "1:104: layer 'l': loss_param.normalization: expected FULL, VALID, BATCH_SIZE or NONE, got HALF" },
		{ "layer { name: \"l\" type: \"SoftmaxWithLoss\" bottom: \"x\" bottom: \"y\" top: \"l\" loss_param { normalize: maybe } }",
		  "1:100: layer 'l': loss_param.normalize: expected true or false, got maybe" },
		{ "layer { name: \"c\" type: \"Crop\" bottom: \"x\" bottom: \"y\" top: \"c\" crop_param { axis: 4 } }", "1:84: layer 'c': crop_param.axis: expected an integer from -4 to 3, got 4" },
		{ "layer { name: \"c\" type: \"Crop\" bottom: \"x\" bottom: \"y\" top: \"c\" crop_param { offset: -1 } }", "1:86: layer 'c': crop_param.offset: expected an integer of at least 0, got -1" },
		{ "layer { name: \"c\" type: \"Crop\" bottom: \"x\" top: \"c\" }", "1:1: layer 'c': a Crop layer takes 2 bottoms, not 1" },
		{ "layer { name: \"c\" type: \"Crop\" bottom: \"x\" bottom: \"y\" top: \"c\" crop_param { offst: 1 } }", "1:78: layer 'c': unknown field 'offst' in crop_param" },
		{ "layer { name: \"e\" type: \"EuclideanLoss\" bottom: \"x\" top: \"e\" }", "1:1: layer 'e': an EuclideanLoss layer takes 2 bottoms, not 1" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" param { name: \"shared\" } }",
		  "1:61: layer 'c': param.name: sharing parameters between layers is not supported" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" include { stage: \"a\" } exclude { stage: \"b\" } }",
		  "1:1: layer 'c': give include rules or exclude rules, not both (as Caffe requires)" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" include { phase: VAL } }",
		  "1:70: layer 'c': include.phase: expected TRAIN or TEST, got VAL" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" include { stage: val } }",
		  "1:70: layer 'c': include.stage: expected a string in quotes, got val" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" convolution_param { num_output: 1 } }",
		  "1:53: layer 'c': convolution_param does not apply to a ReLU layer" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" relu_param: 1 }",
		  "1:65: layer 'c': relu_param: expected a message { ... }, got 1" },
		{ "layer { name: \"e\" type: \"Eltwise\" bottom: \"x\" top: \"z\" }",
		  "1:1: layer 'e': an Eltwise layer takes at least 2 bottoms, not 1" },
		{ "layer { name: \"e\" type: \"Eltwise\" bottom: \"x\" bottom: \"y\" top: \"z\" eltwise_param { operation: PROD coeff: 2 coeff: 1 } }",
		  "1:82: layer 'e': eltwise_param: coeff applies only to operation SUM" },
		{ "layer { name: \"e\" type: \"Eltwise\" bottom: \"x\" bottom: \"y\" top: \"z\" eltwise_param { coeff: 2 } }",
		  "1:1: layer 'e': eltwise_param has 1 coeff values for 2 bottoms" },
		{ "layer { name: \"s\" type: \"Softmax\" bottom: \"x\" top: \"y\" top: \"z\" }",
		  "1:1: layer 's': a Softmax layer makes 1 top, not 2" },
		{ "layer { name: \"d\" type: \"Data\" }", "1:1: layer 'd': a Data layer makes 1 to 2 tops, not 0" },
		{ "layer { name: \"c\" type: \"Convolution\" bottom: \"x\" top: \"x\" convolution_param { num_output: 1 kernel_size: 1 } }",
		  "1:1: layer 'c': a Convolution layer cannot work in place (top 'x' is also its bottom)" },
		{ "layer { name: \"l\" type: \"SoftmaxWithLoss\" bottom: \"x\" bottom: \"y\" top: \"l\" loss_weight: 1 loss_weight: 2 }",
		  "1:1: layer 'l': 2 loss_weight values for 1 tops: give one per top or none" },
		{ "layer { name: \"c\" type: \"ReLU\" bottom: \"x\" top: \"x\" loss_weight: 1 }",
		  "1:1: layer 'c': loss_weight applies only to loss layers (SoftmaxWithLoss, EuclideanLoss)" },
		{ "layer { name: \"c\" type: \"Concat\" bottom: \"x\" top: \"y\" concat_param { axis: 2 } }",
		  "1:76: layer 'c': concat_param.axis: only 1 (channels) is supported" },
		{ "layer { name: \"a\" type: \"Accuracy\" bottom: \"x\" bottom: \"y\" top: \"a\" accuracy_param { top_k: 0 } }",
		  "1:93: layer 'a': accuracy_param.top_k: expected an integer of at least 1, got 0" },
		{ "layer { name: \"a\" type: \"Data\" top: \"x\" transform_param { mean_file: \"m\" mean_value: 1 } }",
		  "1:57: layer 'a': transform_param: give mean_file or mean_value, not both" },
		{ "layer { name: \"i\" type: \"Input\" top: \"x\" input_param { shape { } } }",
		  "1:62: layer 'i': input_param.shape: no dim given" },
		{ "layer { name: \"i\" type: \"Input\" top: \"x\" input_param { shape { dim: 1 dim: 1 dim: 1 dim: 1 dim: 1 } } }",
		  "1:92: layer 'i': input_param.shape: at most 4 dims (N, C, H, W)" },
		{ "layer { name: \"a\\0b\" type: \"ReLU\" }", "1:15: name: a NUL byte is not allowed in it" },
		{ "input: \"data\"\ninput_dim: 1\ninput_dim: 3", "2:1: input_dim needs four values (N, C, H, W) per input, got 2" },
		{ "input: \"data\"\ninput_dim: 1\ninput_shape { dim: 1 }", "2:1: give input_shape or input_dim, not both" },
		{ "input: \"a\"\ninput: \"b\"\ninput_shape { dim: 1 }", "1:1: 1 input shape for 2 inputs: give each input its shape" },
		{ "layer {\n  name: \"x\"\n  type: \"ReLU\"\n  bottom: \"a\" top: \"a\"\n  relu_param { negative_slope: }\n}",
		  "5:32: expected a value after ':' (a number, a string, an identifier or '{')" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *got = parse_error(cases[i].in);
		if (strcmp(got, cases[i].msg) != 0)
			fprintf(stderr, "  case %zu\n", i);
		CHECK_STR(got, cases[i].msg);
	}
	/* accepted spellings: enums by number, booleans as 1/t/True, engines, inf in a float field */
	struct net *net = parse_ok(
		"force_backward: true\n"
		"layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { pool: 1 kernel_size: 2 engine: CUDNN } }\n"
		"layer { name: \"r\" type: \"ReLU\" bottom: \"y\" top: \"y\" relu_param { negative_slope: 0.1 engine: CAFFE } }\n"
		"layer { name: \"b\" type: \"BatchNorm\" bottom: \"y\" top: \"y\" batch_norm_param { use_global_stats: t } }\n"
		"layer { name: \"s\" type: \"Scale\" bottom: \"y\" top: \"y\" scale_param { bias_term: True filler { value: 2 } } }\n"
		"layer { name: \"q\" type: \"Power\" bottom: \"y\" top: \"y\" power_param { power: 2 shift: -1 } }\n"
		"layer { name: \"f\" type: \"Flatten\" bottom: \"y\" top: \"f\" }\n"
		"layer { name: \"c\" type: \"Convolution\" bottom: \"x\" top: \"c\" convolution_param { num_output: 2 kernel_h: 1 kernel_w: 3 engine: CAFFE }\n"
		"        param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 } }\n"
		"layer { name: \"l\" type: \"SoftmaxWithLoss\" bottom: \"f\" bottom: \"x\" top: \"l\"\n"
		"        loss_param { ignore_label: -1 normalize: true normalization: VALID } softmax_param { axis: 1 } }\n"
		"layer { name: \"d\" type: \"Data\" top: \"x\" data_param { source: \"/ignored\" backend: LMDB batch_size: 3 }\n"
		"        transform_param { mirror: 1 scale: 0.00390625 mean_value: 104 mean_value: 117 mean_value: 123 } }\n");
	if (net) {
		CHECK_EQ_INT(net->nlayer, 9);
		CHECK(net->layer[0].pool.pool == NET_POOL_AVE);
		CHECK(net->layer[1].relu.negative_slope == 0.1f);
		CHECK_EQ_INT(net->layer[2].bn.use_global_stats, 1);
		CHECK(net->layer[3].scale.bias_term && net->layer[3].scale.filler.value == 2);
		CHECK(net->layer[4].power.shift == -1 && net->layer[4].power.power == 2 && net->layer[4].power.scale == 1);
		CHECK(net->layer[6].conv.kh == 1 && net->layer[6].conv.kw == 3 && net->layer[6].nparam == 2);
		CHECK(net->layer[7].loss.has_ignore_label && net->layer[7].loss.ignore_label == -1);
		const struct net_data_param *dp = &net->layer[8].data;
		CHECK(dp->batch_size == 3 && dp->mirror && dp->scale == 0.00390625f && dp->nmean_value == 3 &&
		      dp->mean_value[2] == 123);
	}
	net_free(net);
	/* a syntax error is the parser's, with its place */
	struct dd_err err;
	CHECK_EQ_INT(net_parse("layer {", 7, &net, &err), DD_EINVAL);
	CHECK_STR(err.msg, "1:8: unexpected end of input: the '{' at 1:7 is not closed");
	CHECK(net == NULL);
	net_free(NULL);
}

static const char head[] =
	"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" data_param { batch_size: 2 } }\n";

static void test_graph_errors(void)
{
	struct net_input in = input(3, 8, 8, 4);
	char buf[2048];
	static const struct {
		const char *body, *msg;
		enum net_stage stage;
	} cases[] = {
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"nothing\" top: \"ip\" }",
		  "2:1: layer 'ip': bottom 'nothing' is not made by any layer", NET_STAGE_TRAIN },
		{ "layer { name: \"a\" type: \"ReLU\" bottom: \"b\" top: \"a\" }\n"
		  "layer { name: \"b\" type: \"ReLU\" bottom: \"data\" top: \"b\" }",
		  "2:1: layer 'a': bottom 'b' is made by layer 'b' (line 3), which comes later: layers run in the order "
		  "written, so move it above", NET_STAGE_TRAIN },
		{ "layer { name: \"a\" type: \"Eltwise\" bottom: \"data\" bottom: \"c\" top: \"a\" }\n"
		  "layer { name: \"b\" type: \"ReLU\" bottom: \"a\" top: \"b\" }\n"
		  "layer { name: \"c\" type: \"Sigmoid\" bottom: \"b\" top: \"c\" }",
		  "2:1: layer 'a': bottom 'c' is made by layer 'c' (line 4), which itself depends on this layer: the "
		  "layers form a cycle", NET_STAGE_TRAIN },
		{ "layer { name: \"a\" type: \"ReLU\" bottom: \"data\" top: \"x\" }\n"
		  "layer { name: \"b\" type: \"Sigmoid\" bottom: \"data\" top: \"x\" }",
		  "3:1: layer 'b': top 'x' is already made by layer 'a': each blob is made once (only an element-wise "
		  "layer may rewrite its bottom, in place)", NET_STAGE_TRAIN },
		{ "layer { name: \"a\" type: \"ReLU\" bottom: \"data\" top: \"label\" }",
		  "2:1: layer 'a': top 'label' is already made by layer 'd': each blob is made once (only an "
		  "element-wise layer may rewrite its bottom, in place)", NET_STAGE_TRAIN },
		{ "layer { name: \"a\" type: \"ReLU\" bottom: \"data\" top: \"x\" }\n"
		  "layer { name: \"a\" type: \"Sigmoid\" bottom: \"x\" top: \"y\" }",
		  "3:1: layer 'a': the name is already used by the layer at line 2", NET_STAGE_TRAIN },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\" pooling_param { kernel_size: 2 stride: 2 } }\n"
		  "layer { name: \"e\" type: \"Eltwise\" bottom: \"data\" bottom: \"p\" top: \"e\" }",
		  "3:1: layer 'e': bottom 'data' is 2x3x8x8 but bottom 'p' is 2x3x4x4: Eltwise needs equal shapes", NET_STAGE_TRAIN },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\" pooling_param { kernel_size: 2 stride: 2 } }\n"
		  "layer { name: \"c\" type: \"Concat\" bottom: \"data\" bottom: \"p\" top: \"c\" }",
		  "3:1: layer 'c': bottom 'data' is 2x3x8x8 but bottom 'p' is 2x3x4x4: Concat needs equal shapes but for "
		  "the channels", NET_STAGE_TRAIN },
		{ "layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"c\" convolution_param { num_output: 2 kernel_size: 9 } }",
		  "2:1: layer 'conv': kernel 9x9 is larger than its input 8x8 (padded by 0, 0): "
		  "use a smaller kernel_size or more pad here, fewer or gentler downsampling layers above, or a dataset of larger images", NET_STAGE_TRAIN },
		{ "layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"c\" convolution_param { num_output: 2 kernel_size: 3 dilation: 5 pad: 1 } }",
		  "2:1: layer 'conv': kernel 3x3 dilated by 5, 5 (11x11) is larger than its input 8x8 (padded by 1, 1): "
		  "use a smaller kernel_size or more pad here, fewer or gentler downsampling layers above, or a dataset of larger images", NET_STAGE_TRAIN },
		{ "layer { name: \"pool\" type: \"Pooling\" bottom: \"data\" top: \"p\" pooling_param { kernel_h: 9 kernel_w: 2 } }",
		  "2:1: layer 'pool': kernel 9x2 is larger than its input 8x8 (padded by 0, 0): "
		  "use a smaller kernel_size or more pad here, fewer or gentler downsampling layers above, or a dataset of larger images", NET_STAGE_TRAIN },
		{ "layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"c\" convolution_param { num_output: 2 kernel_size: 1 group: 2 } }",
		  "2:1: layer 'conv': its 3 input channels do not divide into 2 groups: set group to a divisor of 3 (1 always works)", NET_STAGE_TRAIN },
		{ "layer { name: \"up\" type: \"Deconvolution\" bottom: \"data\" top: \"u\" convolution_param { num_output: 2 kernel_size: 2 pad: 5 } }",
		  "2:1: layer 'up': pad 5, 5 crops away its whole output: the input 8x8 at stride 1, 1 with the kernel 2x2 "
		  "gives 9x9 before the pad; use less pad", NET_STAGE_TRAIN },
		{ "layer { name: \"up\" type: \"Deconvolution\" bottom: \"data\" top: \"u\" convolution_param { num_output: 2 kernel_size: 2 group: 2 } }",
		  "2:1: layer 'up': its 3 input channels do not divide into 2 groups: set group to a divisor of 3 (1 always works)", NET_STAGE_TRAIN },
		{ "layer { name: \"up\" type: \"Deconvolution\" bottom: \"data\" top: \"u\" convolution_param { num_output: 2 kernel_size: 2\n"
		  "  bias_filler { type: \"bilinear\" } } }",
		  "2:1: layer 'up': the bilinear filler fills 4-axis weights (..., kh, kw), not its bias (2): give its "
		  "bias_filler another filler", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 4 } }\n"
		  "layer { name: \"up\" type: \"Deconvolution\" bottom: \"ip\" top: \"u\" convolution_param { num_output: 2 kernel_size: 2 } }",
		  "3:1: layer 'up': needs a 4-axis input (N, C, H, W); bottom 'ip' is 2x4", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 4\n"
		  "  weight_filler { type: \"bilinear\" } } }",
		  "2:1: layer 'ip': the bilinear filler fills 4-axis weights (..., kh, kw), not its weights (4x192): give its "
		  "weight_filler another filler", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 4 } }\n"
		  "layer { name: \"conv\" type: \"Convolution\" bottom: \"ip\" top: \"c\" convolution_param { num_output: 2 kernel_size: 1 } }",
		  "3:1: layer 'conv': needs a 4-axis input (N, C, H, W); bottom 'ip' is 2x4", NET_STAGE_TRAIN },
		{ "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"data\" bottom: \"label\" top: \"loss\" }",
		  "2:1: layer 'loss': bottom 'label' holds 2 labels (2) but the scores 'data' (2x3x8x8) need 128, one per "
		  "image and position", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 3 } }\n"
		  "layer { name: \"acc\" type: \"Accuracy\" bottom: \"ip\" bottom: \"label\" top: \"acc\" accuracy_param { top_k: 4 } }",
		  "3:1: layer 'acc': top_k 4 is more than the 3 classes of 'ip'", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" param { } param { } param { } }",
		  "2:1: layer 'ip': 3 param { } blocks for 2 parameter blobs", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
		  "layer { name: \"sm\" type: \"Softmax\" bottom: \"ip\" top: \"sm\" }",
		  "the train stage has no loss layer (SoftmaxWithLoss, EuclideanLoss), so there is nothing to learn: add a "
		  "SoftmaxWithLoss layer after layer 'ip' (bottom: \"ip\" bottom: \"label\")", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
		  "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" exclude { stage: \"deploy\" } }",
		  "the deploy stage has no Softmax layer, which DIGITS requires to turn scores into probabilities: add "
		  "one after layer 'ip' (bottom: \"ip\") with include { stage: \"deploy\" }",
		  NET_STAGE_DEPLOY },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
		  "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }",
		  "3:1: layer 'loss': bottom 'label' comes from data layer 'd', which the deploy stage does not have (it "
		  "reads images only): exclude this layer from deploy with exclude { stage: \"deploy\" }",
		  NET_STAGE_DEPLOY },
		{ "layer { name: \"r\" type: \"ReLU\" bottom: \"data\" top: \"r\" include { stage: \"val\" } }\n"
		  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"r\" top: \"ip\" }",
		  "3:1: layer 'ip': bottom 'r' is made by layer 'r' (line 2), which is not in the train stage", NET_STAGE_TRAIN },
		{ "layer { name: \"in\" type: \"Input\" top: \"input\" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n"
		  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"input\" top: \"ip\" }",
		  "3:1: layer 'ip': bottom 'input' comes from Input layer 'in', which deepdesk replaces (as DIGITS does) by "
		  "the dataset's images in \"data\" (and labels in \"label\")", NET_STAGE_TRAIN },
		{ "layer { name: \"d2\" type: \"Data\" top: \"x\" }",
		  "2:1: layer 'd2': a second data layer in the train stage (the first is 'd'): give each its stage with "
		  "include { stage: \"train\" } or { stage: \"val\" }", NET_STAGE_TRAIN },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 16777216 } }",
		  "2:1: layer 'ip': its weights would be 16777216x192: more than 2147483647 values", NET_STAGE_TRAIN },
		{ "layer { name: \"c\" type: \"Convolution\" bottom: \"data\" top: \"c\" convolution_param { num_output: 16777216 kernel_size: 1 } }",
		  "2:1: layer 'c': top 'c' would be 2x16777216x8x8: more than 2147483647 values in one blob", NET_STAGE_TRAIN },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(buf, sizeof buf, "%s%s\n", head, cases[i].body);
		const char *got = inst_error(buf, cases[i].stage, in);
		if (strcmp(got, cases[i].msg) != 0)
			fprintf(stderr, "  case %zu\n", i);
		CHECK_STR(got, cases[i].msg);
	}
	/* mean_value: one for all channels or one per channel (a colour net's three on gray images) */
	static const char mv_tail[] =
		"layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n";
	snprintf(buf, sizeof buf, "layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\"\n"
		 "  transform_param { mean_value: 104 mean_value: 117 mean_value: 123 } }\n%s", mv_tail);
	CHECK_STR(inst_error(buf, NET_STAGE_TRAIN, input(1, 8, 8, 4)),
		  "1:1: layer 'd': transform_param has 3 mean_value entries but the images have 1 channel: give one "
		  "mean_value for all channels, or exactly 1");
	CHECK_STR(inst_error(buf, NET_STAGE_TRAIN, input(3, 8, 8, 4)), "");
	snprintf(buf, sizeof buf, "layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\"\n"
		 "  transform_param { mean_value: 104 mean_value: 117 } }\n%s", mv_tail);
	CHECK_STR(inst_error(buf, NET_STAGE_VAL, input(3, 8, 8, 4)),
		  "1:1: layer 'd': transform_param has 2 mean_value entries but the images have 3 channels: give one "
		  "mean_value for all channels, or exactly 3");
	snprintf(buf, sizeof buf, "layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\"\n"
		 "  transform_param { mean_value: 104 } }\n%s", mv_tail);
	CHECK_STR(inst_error(buf, NET_STAGE_TRAIN, input(3, 8, 8, 4)), "");
	/* the missing loss is placed after the last layer with scores, whatever follows it */
	CHECK_STR(inst_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
			     "layer { name: \"relu\" type: \"ReLU\" bottom: \"ip\" top: \"ip\" }\n",
			     NET_STAGE_TRAIN, in),
		  "the train stage has no loss layer (SoftmaxWithLoss, EuclideanLoss), so there is nothing to learn: add a "
		  "SoftmaxWithLoss layer after layer 'relu' (bottom: \"ip\" bottom: \"label\")");
	CHECK_STR(parse_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"data\" }"),
		  "1:1: layer 'ip': an InnerProduct layer cannot work in place (top 'data' is also its bottom)");
	/* a scalar (a loss) has no batch axis to flatten */
	CHECK_STR(inst_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
			     "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n"
			     "layer { name: \"f\" type: \"Flatten\" bottom: \"loss\" top: \"f\" }\n",
			     NET_STAGE_TRAIN, in),
		  "3:1: layer 'f': needs an input with a batch axis; bottom 'loss' is scalar");
	/* the name of the layer deepdesk adds is taken */
	CHECK_STR(inst_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
			     "layer { name: \"data\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n",
			     NET_STAGE_TRAIN, in),
		  "2:1: layer 'data': the name is already used by the data layer deepdesk adds for this stage; rename it");
	/* out-of-range inputs */
	struct net *net = parse_ok(net_standard_text("lenet"));
	struct net_graph *g = NULL;
	struct dd_err err;
	struct net_input bad = input(1, 28, 28, 10);
	bad.n = -1;
	CHECK_EQ_INT(net_instantiate(net, NET_STAGE_TRAIN, &bad, &g, &err), DD_EINVAL);
	CHECK_STR(err.msg, "batch size -1 is out of range (1 to 1048576)");
	bad = input(5000, 28, 28, 10);
	CHECK_EQ_INT(net_instantiate(net, NET_STAGE_TRAIN, &bad, &g, &err), DD_EINVAL);
	CHECK_STR(err.msg, "input 5000x28x28 is too large (at most 4096 channels, 65536x65536)");
	bad = input(1, 28, 28, 10);
	CHECK_EQ_INT(net_instantiate(net, (enum net_stage)7, &bad, &g, &err), DD_EINVAL);
	/* LeNet on images too small for it */
	bad = input(1, 10, 10, 10);
	CHECK_EQ_INT(net_instantiate(net, NET_STAGE_TRAIN, &bad, &g, &err), DD_EINVAL);
	CHECK_STR(err.msg, "56:1: layer 'conv2': kernel 5x5 is larger than its input 3x3 (padded by 0, 0): "
		  "use a smaller kernel_size or more pad here, fewer or gentler downsampling layers above, or a dataset of larger images");
	CHECK(g == NULL);
	net_free(net);
	/* an error of a layer deepdesk added is marked as such */
	CHECK_STR(inst_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" }\n"
			     "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n",
			     NET_STAGE_TRAIN, input(1, 70000, 70000, 0)),
		  "input 1x70000x70000 is too large (at most 4096 channels, 65536x65536)");
	CHECK_STR(inst_error("layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 2 } }\n"
			     "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n",
			     NET_STAGE_TRAIN, input(1024, 65536, 65536, 0)),
		  "layer 'data' (added by deepdesk): top 'data' would be 16x1024x65536x65536: more than 2147483647 "
		  "values in one blob");
}

/* EuclideanLoss, Crop and SoftmaxWithLoss' normalisations: shapes, the resolved
 * params, the printed prototxt, and the shape errors, each naming the layer. */
static void test_seg_layers(void)
{
	static const char text[] =
		"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" data_param { batch_size: 2 } }\n"
		"layer { name: \"c\" type: \"Convolution\" bottom: \"data\" top: \"c\" convolution_param { num_output: 5 kernel_size: 1 pad: 4 } }\n"
		/* (2,5,24,24) cut to data's (2,3,16,16) from axis 1: offsets 1, 3, 5 */
		"layer { name: \"k\" type: \"Crop\" bottom: \"c\" bottom: \"data\" top: \"k\" crop_param { axis: 1 offset: 1 offset: 3 offset: 5 } }\n"
		/* from axis -2 (2) with one offset for both: (2,5,16,16) */
		"layer { name: \"s\" type: \"Crop\" bottom: \"c\" bottom: \"data\" top: \"s\" crop_param { axis: -2 offset: 4 } }\n"
		/* the default axis 2, no offset: (2,5,16,16) at the corner */
		"layer { name: \"z\" type: \"Crop\" bottom: \"c\" bottom: \"data\" top: \"z\" }\n"
		"layer { name: \"e\" type: \"EuclideanLoss\" bottom: \"k\" bottom: \"data\" top: \"e\" loss_weight: 0.5 }\n"
		"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"s\" top: \"fc\" inner_product_param { num_output: 4 } }\n"
		"layer { name: \"l1\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"l1\" loss_param { normalize: false } }\n"
		"layer { name: \"l2\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"l2\" loss_param { normalize: false normalization: FULL } }\n"
		"layer { name: \"l3\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"l3\" loss_param { ignore_label: 255 } }\n"
		"layer { name: \"l4\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"l4\" loss_param { normalization: NONE } }\n";
	struct net *def = parse_ok(text);
	struct net_graph *g = inst(def, NET_STAGE_TRAIN, input(3, 16, 16, 4));
	if (g) {
		CHECK_STR(shape(g, "c"), "2x5x24x24");
		CHECK_STR(shape(g, "k"), "2x3x16x16");
		CHECK_STR(shape(g, "s"), "2x5x16x16");
		CHECK_STR(shape(g, "z"), "2x5x16x16");
		const struct net_crop_param *k = &node(g, "k")->l.crop, *sc = &node(g, "s")->l.crop;
		CHECK(k->axis == 1 && k->noffset == 4 && k->offset[0] == 0 && k->offset[1] == 1 && k->offset[2] == 3 &&
		      k->offset[3] == 5);
		CHECK(sc->axis == 2 && sc->offset[1] == 0 && sc->offset[2] == 4 && sc->offset[3] == 4);
		CHECK(node(g, "z")->l.crop.offset[2] == 0 && node(g, "z")->l.crop.offset[3] == 0);
		CHECK_STR(shape(g, "e"), "scalar");
		CHECK(node(g, "e")->loss_weight == 0.5f);
		CHECK_EQ_INT(node(g, "l1")->l.loss.normalization, NET_NORM_BATCH_SIZE);
		CHECK_EQ_INT(node(g, "l2")->l.loss.normalization, NET_NORM_FULL); /* normalization wins */
		CHECK_EQ_INT(node(g, "l3")->l.loss.normalization, NET_NORM_VALID); /* Caffe's default */
		CHECK_EQ_INT(node(g, "l4")->l.loss.normalization, NET_NORM_NONE);
		char *p = net_graph_prototxt(g);
		CHECK(p != NULL);
		if (p) {
			CHECK_CONTAINS(p, "crop_param { axis: 1 offset: 1 offset: 3 offset: 5 }");
			CHECK_CONTAINS(p, "crop_param { axis: 2 offset: 4 offset: 4 }");
			CHECK_CONTAINS(p, "type: \"EuclideanLoss\"");
			CHECK_CONTAINS(p, "loss_param { normalization: BATCH_SIZE }");
			CHECK_CONTAINS(p, "loss_param { ignore_label: 255 }");
			/* and it reads back to the same shapes */
			struct net *back = parse_ok(p);
			struct net_input bi = input(3, 16, 16, 4);
			bi.n = 2;
			struct net_graph *g2 = back ? inst(back, NET_STAGE_TRAIN, bi) : NULL;
			if (g2) {
				CHECK_STR(shape(g2, "k"), "2x3x16x16");
				CHECK_STR(shape(g2, "s"), "2x5x16x16");
				CHECK_EQ_INT(node(g2, "l1")->l.loss.normalization, NET_NORM_BATCH_SIZE);
			}
			net_graph_free(g2);
			net_free(back);
			free(p);
		}
	}
	net_graph_free(g);
	net_free(def);

	/* spatial scores (N, C, H, W) against N x H x W labels, or N x 1 x H x W */
	static const char seg[] =
		"layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }\n"
		"layer { name: \"lab\" type: \"Convolution\" bottom: \"data\" top: \"lab\" convolution_param { num_output: 1 kernel_size: 1 } }\n"
		"layer { name: \"sc\" type: \"Convolution\" bottom: \"data\" top: \"sc\" convolution_param { num_output: 5 kernel_size: 1 } }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"sc\" bottom: \"lab\" top: \"loss\" loss_param { ignore_label: 255 normalization: FULL } }\n"
		"layer { name: \"acc\" type: \"Accuracy\" bottom: \"sc\" bottom: \"lab\" top: \"acc\" accuracy_param { top_k: 2 ignore_label: 255 } }\n";
	CHECK_STR(inst_error(seg, NET_STAGE_TRAIN, input(3, 8, 8, 5)), "");

	struct net_input in = input(3, 8, 8, 4);
	static const struct {
		const char *body, *msg;
	} cases[] = {
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\" pooling_param { kernel_size: 2 stride: 2 } }\n"
		  "layer { name: \"k\" type: \"Crop\" bottom: \"p\" bottom: \"data\" top: \"k\" }", "3:1: layer 'k': axis 2: bottom 'p' (2x3x4x4) has 4 but cutting it to bottom 'data' (2x3x8x8) needs 8 + offset 0: bottom 0 is cut to bottom 1's shape, so give a smaller offset or swap the bottoms" },
		{ "layer { name: \"k\" type: \"Crop\" bottom: \"data\" bottom: \"data\" top: \"k\" crop_param { offset: 1 } }", "2:1: layer 'k': axis 2: bottom 'data' (2x3x8x8) has 8 but cutting it to bottom 'data' (2x3x8x8) needs 8 + offset 1: bottom 0 is cut to bottom 1's shape, so give a smaller offset or swap the bottoms" },
		{ "layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\" pooling_param { kernel_size: 2 stride: 2 } }\n"
		  "layer { name: \"k\" type: \"Crop\" bottom: \"data\" bottom: \"p\" top: \"k\" crop_param { offset: 1 offset: 2 offset: 3 } }", "3:1: layer 'k': crop_param has 3 offset values but crops 2 axes from axis 2: give one offset for all, or exactly 2" },
		{ "layer { name: \"k\" type: \"Crop\" bottom: \"data\" bottom: \"label\" top: \"k\" crop_param { axis: 0 } }", "2:1: layer 'k': bottom 'data' is 2x3x8x8 but bottom 'label' is 2: Crop needs bottoms with the same number of axes" },
		{ "layer { name: \"f\" type: \"Flatten\" bottom: \"data\" top: \"f\" }\n"
		  "layer { name: \"k\" type: \"Crop\" bottom: \"f\" bottom: \"f\" top: \"k\" crop_param { axis: 2 } }", "3:1: layer 'k': crop_param.axis 2 is outside the 2 axes of bottom 'f' (2x192)" },
		{ "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 3 } }\n"
		  "layer { name: \"e\" type: \"EuclideanLoss\" bottom: \"ip\" bottom: \"label\" top: \"e\" }", "3:1: layer 'e': bottom 'ip' is 2x3 but bottom 'label' is 2: EuclideanLoss needs the same batch and the same number of values per image" },
	};
	char buf[2048];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(buf, sizeof buf, "layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" data_param { batch_size: 2 } }\n%s\n"
			 "layer { name: \"ipl\" type: \"InnerProduct\" bottom: \"data\" top: \"ipl\" }\n"
			 "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ipl\" bottom: \"label\" top: \"loss\" }\n",
			 cases[i].body);
		const char *got = inst_error(buf, NET_STAGE_TRAIN, in);
		if (strcmp(got, cases[i].msg) != 0)
			fprintf(stderr, "  case %zu\n", i);
		CHECK_STR(got, cases[i].msg);
	}
	/* EuclideanLoss alone is a loss the train stage accepts: (N, 2) against a (N, 1, 1, 2) blob */
	CHECK_STR(inst_error("layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }\n"
			     "layer { name: \"t\" type: \"Convolution\" bottom: \"data\" top: \"t\" convolution_param { num_output: 1 kernel_size: [4, 3] } }\n"
			     "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 2 } }\n"
			     "layer { name: \"e\" type: \"EuclideanLoss\" bottom: \"ip\" bottom: \"t\" top: \"e\" }\n",
			     NET_STAGE_TRAIN, input(3, 4, 4, 0)),
		  "");
}

static void test_declared_inputs(void)
{
	struct net_input in = { 0 };
	struct net *net = parse_ok("input: \"data\"\ninput_shape { dim: 1 dim: 3 dim: 32 dim: 24 }\n");
	if (net) {
		CHECK_EQ_INT(net->ninput, 1);
		CHECK_STR(net->input[0], "data");
		CHECK_EQ_INT(net_declared_input(net, &in), DD_OK);
		CHECK(in.n == 1 && in.c == 3 && in.h == 32 && in.w == 24);
	}
	net_free(net);
	net = parse_ok("input: \"data\"\ninput_dim: 10\ninput_dim: 1\ninput_dim: 28\ninput_dim: 28\n");
	memset(&in, 0, sizeof in);
	if (net) {
		CHECK_EQ_INT(net->ninput_shape, 1);
		CHECK_EQ_INT(net_declared_input(net, &in), DD_OK);
		CHECK(in.n == 10 && in.c == 1 && in.h == 28 && in.w == 28);
	}
	net_free(net);
	net = parse_ok("layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 1 dim: 2 } } }");
	memset(&in, 0, sizeof in);
	if (net) {
		CHECK_EQ_INT(net_declared_input(net, &in), DD_OK);
		CHECK(in.c == 2 && in.h == 1 && in.w == 1);
	}
	net_free(net);
	net = parse_ok(net_standard_text("lenet"));
	if (net)
		CHECK_EQ_INT(net_declared_input(net, &in), DD_ENOENT);
	net_free(net);
}

static void test_reports(void)
{
	struct net *def = parse_ok(net_standard_text("lenet"));
	struct net_graph *g = inst(def, NET_STAGE_TRAIN, input(1, 28, 28, 10));
	if (!g)
		goto out;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	CHECK_EQ_INT(net_graph_print(g, f), DD_OK);
	fclose(f);
	CHECK_CONTAINS(text, "LeNet, train stage: batch 64, input 1x28x28, 10 classes\n");
	CHECK_CONTAINS(text, "layer       type             top     shape              params\n");
	CHECK_CONTAINS(text, "conv2       Convolution      conv2   64x50x8x8          25,050\n");
	CHECK_CONTAINS(text, "train-data  Data             data    64x1x28x28              0\n"
			     "                             label   64\n");
	CHECK_CONTAINS(text, "loss        SoftmaxWithLoss  loss    scalar                  0\n");
	CHECK_CONTAINS(text, "10 layers, 431,080 parameters (431,080 learned), 1,310,657 activation values per batch");
	free(text);

	cJSON *j = net_graph_json(g);
	CHECK(j != NULL);
	if (j) {
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "stage")), "train");
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "params")), 431080);
		cJSON *layers = cJSON_GetObjectItem(j, "layers");
		CHECK_EQ_INT(cJSON_GetArraySize(layers), 10);
		cJSON *conv1 = cJSON_GetArrayItem(layers, 2);
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(conv1, "name")), "conv1");
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(conv1, "line")), 34);
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(conv1, "col")), 1);
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(conv1, "param_count")), 520);
		cJSON *top = cJSON_GetArrayItem(cJSON_GetObjectItem(conv1, "tops"), 0);
		cJSON *shp = cJSON_GetObjectItem(top, "shape");
		CHECK_EQ_INT(cJSON_GetArraySize(shp), 4);
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetArrayItem(shp, 1)), 20);
		cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItem(conv1, "params"), 0);
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(w, "role")), "weights");
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(w, "count")), 500);
		cJSON *in = cJSON_GetObjectItem(j, "input");
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(in, "n")), 64);
		cJSON *loss = cJSON_GetArrayItem(layers, 9);
		CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(loss, "tops"), 0), "shape")), 0);
		cJSON_Delete(j);
	}
out:
	net_graph_free(g);
	net_free(def);
	net_graph_free(NULL);

	int line = 0, col = 0;
	struct dd_err err = { DD_EINVAL, "12:5: layer 'conv1': unknown field" };
	CHECK(net_err_pos(&err, &line, &col) && line == 12 && col == 5);
	strcpy(err.msg, "the train stage has no loss layer");
	CHECK(!net_err_pos(&err, &line, &col));
	strcpy(err.msg, "12: x");
	CHECK(!net_err_pos(&err, &line, &col));
	CHECK(!net_err_pos(NULL, &line, &col));
	CHECK_STR(net_layer_type_name(NET_SOFTMAX_LOSS), "SoftmaxWithLoss");
	CHECK_STR(net_layer_type_name(NET_LAYER_TYPE_COUNT), "?");
}

/* Every layer type has its row: a name that parses back to the type, counts that
 * make sense, fillers only where there are parameter blobs. */
static void test_type_rows(void)
{
	for (int t = 0; t < NET_LAYER_TYPE_COUNT; t++) {
		const struct net_layer_type_info *ti = net_layer_type_info((enum net_layer_type)t);
		CHECK(ti != NULL && ti->name != NULL);
		if (!ti || !ti->name)
			continue;
		CHECK_STR(net_layer_type_name((enum net_layer_type)t), ti->name);
		CHECK(ti->bottom_min >= 0 && ti->bottom_min <= ti->bottom_max);
		CHECK(ti->top_min >= 1 && ti->top_min <= ti->top_max);
		CHECK(!ti->elementwise || (ti->bottom_max == 1 && ti->top_max == 1));
		CHECK((ti->filler[0] == 0) == (ti->filler[1] == 0));
		for (int u = 0; u < t; u++)
			CHECK(strcmp(net_layer_type_info((enum net_layer_type)u)->name, ti->name) != 0);
		/* the name is what a description's type: says */
		char text[256];
		snprintf(text, sizeof text, "layer { name: \"x\" type: \"%s\" }", ti->name);
		struct net *def = NULL;
		struct dd_err err = { 0 };
		int rc = net_parse(text, strlen(text), &def, &err);
		CHECK(rc == DD_OK || strstr(err.msg, "unknown type") == NULL);
		if (rc == DD_OK)
			CHECK(def->nlayer == 1 && def->layer[0].type == (enum net_layer_type)t);
		net_free(def);
	}
	CHECK(net_layer_type_info(NET_LAYER_TYPE_COUNT) == NULL);
}

/* ---- the verb ------------------------------------------------------------------------ */

struct captured {
	int rc;
	char out[65536], err[4096];
};

static void slurp(int fd, char *buf, size_t n)
{
	lseek(fd, 0, SEEK_SET);
	ssize_t k = read(fd, buf, n - 1);
	buf[k > 0 ? k : 0] = 0;
}

/* Run `deepdesk net ARGS...` in-process with stdout and stderr captured. */
static void run_cli(struct captured *c, int argc, char **argv)
{
	char tmpl1[] = "/tmp/dd-net-out-XXXXXX", tmpl2[] = "/tmp/dd-net-err-XXXXXX";
	int o = mkstemp(tmpl1), e = mkstemp(tmpl2);
	unlink(tmpl1);
	unlink(tmpl2);
	fflush(stdout);
	fflush(stderr);
	int so = dup(1), se = dup(2);
	dup2(o, 1);
	dup2(e, 2);
	c->rc = cli_net(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	slurp(o, c->out, sizeof c->out);
	slurp(e, c->err, sizeof c->err);
	close(o);
	close(e);
}

#define CLI(c, ...)                                                          \
	do {                                                                 \
		char *argv_[] = { "net", __VA_ARGS__, NULL };                \
		run_cli((c), (int)(sizeof argv_ / sizeof argv_[0]) - 1, argv_); \
	} while (0)

static void test_cli(void)
{
	static struct captured c;
	CLI(&c, "check", "lenet");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "10 layers, 431,080 parameters");
	CHECK_STR(c.err, "");

	CLI(&c, "check", "alexnet", "--stage", "deploy", "--classes", "10");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "AlexNet, deploy stage: batch 1, input 3x256x256 cropped to 227x227, 10 classes");
	CHECK_CONTAINS(c.out, "softmax  Softmax       softmax  1x10");

	CLI(&c, "check", "resnet_small", "--input", "3x40x40", "--batch", "8", "--crop", "32", "--json");
	CHECK_EQ_INT(c.rc, 0);
	cJSON *j = cJSON_Parse(c.out);
	CHECK(j != NULL);
	if (j) {
		cJSON *in = cJSON_GetObjectItem(j, "input");
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(in, "n")), 8);
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(in, "crop")), 32);
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "learned")), 272474);
		cJSON_Delete(j);
	}

	char dir[64], path[128];
	CHECK(check_tmpdir(dir, sizeof dir) != NULL);
	snprintf(path, sizeof path, "%s/bad.prototxt", dir);
	FILE *f = fopen(path, "w");
	fputs("layer {\n  name: \"conv1\"\n  type: \"Convolution\"\n  bottom: \"data\"\n  top: \"conv1\"\n"
	      "  convolution_param { num_output: 20 kernal_size: 5 }\n}\n",
	      f);
	fclose(f);
	CLI(&c, "check", path, "--input", "1x28x28");
	CHECK_EQ_INT(c.rc, 1);
	char want[256];
	snprintf(want, sizeof want, "%s:6:38: layer 'conv1': unknown field 'kernal_size' in convolution_param\n", path);
	CHECK_STR(c.err, want);
	CHECK_STR(c.out, "");

	CLI(&c, "check", path, "--input", "1x28x28", "--json");
	CHECK_EQ_INT(c.rc, 1);
	j = cJSON_Parse(c.out);
	CHECK(j != NULL);
	if (j) {
		cJSON *e = cJSON_GetObjectItem(j, "error");
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")), "invalid");
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "line")), 6);
		CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "col")), 38);
		cJSON_Delete(j);
	}

	/* an error in one stage is reported with the stage, even when another is shown */
	f = fopen(path, "w");
	fputs("layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 1 dim: 1 dim: 6 dim: 6 } } }\n"
	      "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\" inner_product_param { num_output: 3 } }\n"
	      "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n",
	      f);
	fclose(f);
	CLI(&c, "check", path);
	CHECK_EQ_INT(c.rc, 1);
	snprintf(want, sizeof want,
		 "%s:3:1: layer 'loss': bottom 'label' is not made by any layer (deploy stage)\n", path);
	CHECK_STR(c.err, want);
	CLI(&c, "check", path, "--stage", "train");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "batch 16, input 1x6x6");
	CHECK_CONTAINS(c.out, "data   Data             data   16x1x6x6");
	CHECK_CONTAINS(c.out, "641 activation values per batch (2.5 KiB as float)");

	CLI(&c, "check", "/no/such/file.prototxt");
	CHECK_EQ_INT(c.rc, 1);
	CHECK_CONTAINS(c.err, "/no/such/file.prototxt: no such file, nor a standard network");
	CLI(&c, "check", "lenet", "--stage", "test");
	CHECK_EQ_INT(c.rc, 2);
	CHECK_CONTAINS(c.err, "unknown stage \"test\"");
	CLI(&c, "check", "lenet", "--input", "28x28");
	CHECK_EQ_INT(c.rc, 2);
	CHECK_CONTAINS(c.err, "--input: expected CxHxW");
	CLI(&c, "check");
	CHECK_EQ_INT(c.rc, 2);
	CLI(&c, "frobnicate");
	CHECK_EQ_INT(c.rc, 2);
	CLI(&c, "list");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "googlenet");
	CHECK_CONTAINS(c.out, "resnet_small");
	CLI(&c, "show", "lenet");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "name: \"LeNet\"");
	CLI(&c, "show", "vgg");
	CHECK_EQ_INT(c.rc, 1);
	CLI(&c, "--help");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "usage: deepdesk net check");
	unlink(path);
	rmdir(dir);
}

/* `net time`: a short run in each mode; the figures themselves are the bench's. */
static void test_cli_time(void)
{
	static struct captured c;
	CLI(&c, "time", "lenet", "--batch", "2", "--iters", "2", "--warmup", "1", "--backend", "ref");
	CHECK_EQ_INT(c.rc, 0);
	CHECK_CONTAINS(c.out, "LeNet, train stage, batch 2, 1x28x28, 10 classes, backend ref");
	CHECK_CONTAINS(c.out, "forward + backward + SGD update");
	CHECK_CONTAINS(c.out, "images/s");
	CHECK_CONTAINS(c.out, "conv2            Convolution");
	CHECK_STR(c.err, "");

	CLI(&c, "time", "lenet", "--stage", "deploy", "--batch", "3", "--iters", "1", "--json");
	CHECK_EQ_INT(c.rc, 0);
	cJSON *j = cJSON_Parse(c.out);
	CHECK(j != NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "stage")), "deploy");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "mode")), "forward");
	CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "batch")), 3);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "images_per_s")) > 0);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "backward_ms")) == 0);
	CHECK(cJSON_GetObjectItem(j, "loss") == NULL);
	const cJSON *layers = cJSON_GetObjectItem(j, "layers");
	CHECK_EQ_INT(cJSON_GetArraySize(layers), 9); /* deploy LeNet: its Input is not timed */
	cJSON_Delete(j);

	CLI(&c, "time", "lenet", "--batch", "1", "--iters", "100000", "--warmup", "0", "--max-seconds", "0.05",
	    "--json");
	CHECK_EQ_INT(c.rc, 0);
	j = cJSON_Parse(c.out);
	double iters = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "iters"));
	CHECK(iters >= 1 && iters < 100000); /* stopped by the clock */
	cJSON_Delete(j);
	CLI(&c, "time", "lenet", "--max-seconds", "0");
	CHECK_EQ_INT(c.rc, 2);
	CHECK_CONTAINS(c.err, "--max-seconds: a number of seconds above 0");

	CLI(&c, "time", "lenet", "--backend", "tpu");
	CHECK_EQ_INT(c.rc, 2);
	CHECK_CONTAINS(c.err, "unknown backend 'tpu'");
	CLI(&c, "time", "lenet", "--stage", "val");
	CHECK_EQ_INT(c.rc, 2);
	CHECK_CONTAINS(c.err, "--stage: train or deploy");
	CLI(&c, "time", "lenet", "--iters", "0");
	CHECK_EQ_INT(c.rc, 2);
	CLI(&c, "time", "nonet");
	CHECK_EQ_INT(c.rc, 1);
	CHECK_CONTAINS(c.err, "nonet: no such file, nor a standard network");
}

int main(void)
{
	RUN(test_lenet);
	RUN(test_alexnet);
	RUN(test_googlenet);
	RUN(test_resnet_small);
	RUN(test_standard_table);
	RUN(test_stage_rules);
	RUN(test_digits_cleanup);
	RUN(test_shape_formulas);
	RUN(test_deconv_shapes);
	RUN(test_parse_errors);
	RUN(test_graph_errors);
	RUN(test_seg_layers);
	RUN(test_declared_inputs);
	RUN(test_type_rows);
	RUN(test_reports);
	RUN(test_cli);
	RUN(test_cli_time);
	return check_summary();
}
