/* test_infer.c — networks/infer.c: a tiny model trained on a generated dataset (four
 * classes of 16x16 gray images, a bright quadrant each, as test_train.c), opened
 * from its job folder and from a bundle folder; an image file prepared exactly as the
 * validation feed prepared its record; top-1 agreeing with the validation accuracy;
 * probabilities summing to 1; the cache's bounds and LRU order. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/create.h"
#include "../../datasets/image.h"
#include "../../jobs/kind_train.h"
#include "../../networks/modeldir.h"
#include "../../networks/feed.h"
#include "../../networks/graph.h"
#include "../../networks/bundle.h"
#include "../../networks/infer.h"
#include "../../networks/net.h"
#include "../../networks/snapshot.h"
#include "../../networks/train.h"
#include "check.h"
#include "quadrants.h"

static char tmp[256], dsdir[512], jobdir[512];
static double val_accuracy;

/* scale as the standard networks; mean image (DIGITS' default) */
static const char small_net[] = QUADRANTS_NET
	"layer { name: \"softmax\" type: \"Softmax\" bottom: \"fc\" top: \"softmax\" include { stage: \"deploy\" } }\n";

static int make_dataset(void)
{
	return quadrants_dataset(tmp, 150, 60, dsdir, sizeof dsdir);
}

/* Train 3 epochs into jobdir, written as a model job's folder. */
static int train_model(void)
{
	struct dd_err err = { 0 };
	struct train_opts o;
	struct train_result r;
	snprintf(jobdir, sizeof jobdir, "%s/jobs/2", tmp);
	quadrants_train_opts(&o, dsdir, small_net, jobdir, 3);
	o.network_name = "tiny";
	o.seed = 1;
	o.threads = 1;
	o.result = &r;
	int rc = model_write_folder(jobdir, small_net, "tiny", dsdir, 0, 0, model_settings_from_opts(&o), &err);
	if (!rc)
		rc = train_run(&o, NULL, &err);
	if (rc)
		fprintf(stderr, "  train: %s\n", err.msg);
	val_accuracy = r.val_accuracy;
	printf("  trained: val accuracy %.4f\n", val_accuracy);
	return rc;
}

static void snapshot(int epoch, char *buf, size_t len)
{
	char label[8];
	snprintf(label, sizeof label, "%d", epoch);
	modeldir_snapshot_path(jobdir, label, MODELDIR_SNAP_WEIGHTS, buf, len);
}

/* Every val image: its file classified equals its record fed; top-1 accuracy as
 * validation measured it; probabilities summing to 1. */
static void test_val(void)
{
	struct dd_err err = { 0 };
	char w[PATH_MAX], path[PATH_MAX];
	snapshot(3, w, sizeof w);
	struct infer *h = NULL;
	CHECK_EQ_INT(infer_open(jobdir, w, &h, &err), DD_OK);
	if (!h) {
		fprintf(stderr, "  infer_open: %s\n", err.msg);
		return;
	}
	const struct infer_prep *p = infer_prep(h);
	CHECK(p->c == 1 && p->h == 16 && p->w == 16 && p->classes == 4 && p->crop == 0);
	CHECK_STR(p->mean, "image");
	CHECK_STR(p->resize, "squash");
	CHECK(fabsf(p->scale - 0.0125f) < 1e-9f);
	CHECK_STR(infer_label(h, 2), "class2");

	struct feed *f = NULL;
	struct feed_opts fo = { .train = 0, .scale = 0.0125f, .mean = FEED_MEAN_IMAGE };
	CHECK_EQ_INT(feed_open(dsdir, "val", &fo, &f, &err), DD_OK);
	snprintf(path, sizeof path, "%s/val.txt", dsdir);
	FILE *list = fopen(path, "r");
	CHECK(list && f);
	if (!list || !f) {
		if (list)
			fclose(list);
		feed_close(f);
		infer_close(h);
		return;
	}
	char line[PATH_MAX + 32];
	int n = 0, right = 0, same_input = 0;
	double worst_sum = 0;
	while (fgets(line, sizeof line, list)) {
		char *sp = strrchr(line, ' ');
		if (!sp)
			continue;
		*sp = 0;
		int label = atoi(sp + 1);
		char *bytes = NULL;
		size_t len = 0;
		if (fs_read_file(line, 1 << 20, &bytes, &len, &err)) {
			CHECK(0);
			break;
		}
		struct infer_pred pred[5];
		int np = 0, iw = 0, ih = 0;
		int rc = infer_classify(h, bytes, len, line, 5, pred, &np, &iw, &ih, &err);
		free(bytes);
		CHECK_EQ_INT(rc, DD_OK);
		if (rc) {
			fprintf(stderr, "  %s\n", err.msg);
			break;
		}
		CHECK_EQ_INT(np, 4);
		CHECK(iw == 16 && ih == 16);
		CHECK(pred[0].probability >= pred[1].probability && pred[1].probability >= pred[2].probability);
		double s = 0;
		const float *prob = infer_probabilities(h);
		for (int k = 0; k < 4; k++)
			s += prob[k];
		if (fabs(s - 1) > worst_sum)
			worst_sum = fabs(s - 1);
		right += pred[0].index == label;

		/* the same input the validation feed gave this record */
		float data[256], lab;
		CHECK_EQ_INT(feed_next(f, data, &lab, 1, &err), DD_OK);
		size_t cnt = 0;
		const float *in = infer_input(h, &cnt);
		CHECK_EQ_INT(cnt, 256);
		same_input += (int)lab == label && memcmp(in, data, sizeof data) == 0;
		n++;
	}
	fclose(list);
	feed_close(f);
	printf("  %d val images: %d right by infer (%.4f), validation said %.4f; |sum p - 1| <= %.2g\n", n, right,
	       (double)right / n, val_accuracy, worst_sum);
	CHECK_EQ_INT(n, 60);
	CHECK_EQ_INT(same_input, n);
	CHECK(worst_sum < 1e-5);
	/* validation ran ceil(60/16) = 4 batches: the last wrapped around to 4 records
	 * again, so its accuracy is over 64 images with 4 counted twice */
	CHECK(fabs((double)right / n - val_accuracy) <= 4.0 / 64 + 1e-9);
	CHECK(right >= 55);

	/* an image of another size and colour: converted and resized as the dataset's */
	struct image big = { 40, 40, 3, malloc(40 * 40 * 3) };
	for (int y = 0; y < 40; y++)
		for (int x = 0; x < 40; x++)
			for (int c = 0; c < 3; c++)
				big.px[(y * 40 + x) * 3 + c] = (y >= 20 && x < 20) ? 200 : 70; /* class 2 */
	uint8_t *png = NULL;
	size_t plen = 0;
	CHECK_EQ_INT(image_encode_png(&big, 1, &png, &plen, &err), DD_OK);
	image_free(&big);
	struct infer_pred pred[2];
	int np = 0, iw = 0, ih = 0;
	CHECK_EQ_INT(infer_classify(h, png, plen, "big.png", 2, pred, &np, &iw, &ih, &err), DD_OK);
	CHECK(np == 2 && iw == 40 && ih == 40 && pred[0].index == 2);
	free(png);

	/* bad input: not an image; an empty one */
	CHECK_EQ_INT(infer_classify(h, "hello", 5, "x.txt", 2, pred, &np, NULL, NULL, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "x.txt") != NULL);
	CHECK_EQ_INT(infer_classify(h, "", 0, NULL, 2, pred, &np, NULL, NULL, &err), DD_EINVAL);
	infer_close(h);

	/* a job folder names its snapshot; a missing one is ENOENT */
	CHECK_EQ_INT(infer_open(jobdir, NULL, &h, &err), DD_EINVAL);
	snprintf(path, sizeof path, "%s/snapshot_epoch_9.safetensors", jobdir);
	CHECK_EQ_INT(infer_open(jobdir, path, &h, &err), DD_ENOENT);
	CHECK(h == NULL);
}

static int copy(const char *from, const char *to)
{
	struct dd_err err;
	char *buf = NULL;
	size_t len = 0;
	int rc = fs_read_file(from, 1 << 26, &buf, &len, &err);
	if (!rc)
		rc = fs_write_file_atomic(to, buf, len, &err);
	free(buf);
	return rc;
}

/* A bundle folder (what the bundle route packs) answers as the job folder does,
 * without the dataset. */
static void test_bundle_folder(void)
{
	struct dd_err err = { 0 };
	char w[PATH_MAX], bdir[PATH_MAX], a[PATH_MAX + 32], b[PATH_MAX + 32];
	snapshot(3, w, sizeof w);
	struct infer *h = NULL, *hb = NULL;
	CHECK_EQ_INT(infer_open(jobdir, w, &h, &err), DD_OK);
	if (!h)
		return;
	snprintf(bdir, sizeof bdir, "%s/bundle", tmp);
	CHECK_EQ_INT(fs_mkdir_p(bdir, &err), DD_OK);
	cJSON *m = infer_manifest(h, "3");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "input"), "order")), "gray");
	CHECK(cJSON_GetObjectItem(m, "settings") != NULL);
	snprintf(b, sizeof b, "%s/network.prototxt", bdir);
	CHECK_EQ_INT(fs_write_file_atomic(b, infer_network_text(h), strlen(infer_network_text(h)), &err), DD_OK);
	snprintf(b, sizeof b, "%s/weights.safetensors", bdir);
	CHECK_EQ_INT(copy(w, b), 0);
	snprintf(b, sizeof b, "%s/mean.binaryproto", bdir);
	CHECK(infer_mean_path(h) != NULL);
	CHECK_EQ_INT(copy(infer_mean_path(h), b), 0);
	snprintf(a, sizeof a, "%s/labels.txt", jobdir);
	snprintf(b, sizeof b, "%s/labels.txt", bdir);
	CHECK_EQ_INT(copy(a, b), 0);
	/* the size and sha256 of each file, as the bundle route records them (bundle.h) */
	static const char *const files[] = { "network.prototxt", "weights.safetensors", "mean.binaryproto", "labels.txt" };
	for (int i = 0; i < 4; i++) {
		snprintf(b, sizeof b, "%s/%s", bdir, files[i]);
		CHECK_EQ_INT(bundle_manifest_add_file(m, files[i], b, &err), DD_OK);
	}
	char *text = cJSON_Print(m);
	snprintf(a, sizeof a, "%s/info.json", bdir);
	CHECK_EQ_INT(fs_write_file_atomic(a, text, strlen(text), &err), DD_OK);
	free(text);
	cJSON_Delete(m);
	CHECK_EQ_INT(infer_open(bdir, NULL, &hb, &err), DD_OK);
	if (!hb) {
		fprintf(stderr, "  %s\n", err.msg);
		infer_close(h);
		return;
	}
	struct image im = { 16, 16, 1, malloc(256) };
	for (int i = 0; i < 256; i++)
		im.px[i] = (uint8_t)(i * 7);
	struct infer_pred p1[4], p2[4];
	int n1 = 0, n2 = 0;
	CHECK_EQ_INT(infer_classify_image(h, &im, 4, p1, &n1, &err), DD_OK);
	CHECK_EQ_INT(infer_classify_image(hb, &im, 4, p2, &n2, &err), DD_OK);
	image_free(&im);
	CHECK(n1 == 4 && n2 == 4);
	for (int i = 0; i < 4 && n1 == 4 && n2 == 4; i++) {
		CHECK_EQ_INT(p1[i].index, p2[i].index);
		CHECK(p1[i].probability == p2[i].probability);
		CHECK_STR(p1[i].label, p2[i].label);
	}
	infer_close(hb);

	/* a tampered manifest is refused, naming the file */
	snprintf(a, sizeof a, "%s/info.json", bdir);
	CHECK_EQ_INT(fs_write_file_atomic(a, "{\"input\":{\"channels\":1}}", 24, &err), DD_OK);
	CHECK_EQ_INT(infer_open(bdir, NULL, &hb, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "info.json") != NULL);
	infer_close(h);
}

/* The cache: a hit costs no load; the count and byte bounds evict the least
 * recently used idle handle; a lent handle is never evicted. */
/* w's model taken from c and given back: 1 a hit, 0 loaded, -1 (said) the get
 * failed.  *got (where not NULL) is the model, to compare, not to use. */
static int cache_use(struct infer_cache *c, const char *w, struct infer **got)
{
	struct dd_err err = { 0 };
	struct infer *x = NULL;
	int hit = -1;
	if (infer_cache_get(c, jobdir, w, &x, &hit, &err) != DD_OK) {
		fprintf(stderr, "  infer_cache_get %s: %s\n", w, err.msg);
		return -1;
	}
	if (got)
		*got = x;
	infer_cache_release(c, x);
	return hit;
}

static void test_cache(void)
{
	struct dd_err err = { 0 };
	char w1[PATH_MAX], w2[PATH_MAX], w3[PATH_MAX];
	snapshot(1, w1, sizeof w1);
	snapshot(2, w2, sizeof w2);
	snapshot(3, w3, sizeof w3);
	struct infer_cache *c = infer_cache_new(2, 0);
	struct infer *a = NULL, *b = NULL, *x = NULL;
	int hit = -1, models = 0;
	size_t bytes = 0;
	CHECK_EQ_INT(cache_use(c, w1, &a), 0);
	CHECK(a != NULL);
	CHECK_EQ_INT(cache_use(c, w1, &x), 1);
	CHECK(x == a);
	CHECK_EQ_INT(cache_use(c, w2, NULL), 0);
	/* w1 used last: a third model evicts w2 */
	CHECK_EQ_INT(cache_use(c, w1, NULL), 1);
	CHECK(cache_use(c, w3, NULL) >= 0);
	infer_cache_stats(c, &models, &bytes);
	CHECK_EQ_INT(models, 2);
	CHECK_EQ_INT(cache_use(c, w1, NULL), 1);
	CHECK_EQ_INT(cache_use(c, w2, NULL), 0);
	/* a missing snapshot: ENOENT, nothing cached */
	char gone[PATH_MAX];
	snprintf(gone, sizeof gone, "%s/snapshot_epoch_7.safetensors", jobdir);
	CHECK_EQ_INT(infer_cache_get(c, jobdir, gone, &x, &hit, &err), DD_ENOENT);
	infer_cache_free(c);

	/* bytes: room for one model only; the lent one stays while another loads */
	struct infer *probe = NULL;
	CHECK_EQ_INT(infer_open(jobdir, w1, &probe, &err), DD_OK);
	size_t sz = probe ? infer_bytes(probe) : 1;
	infer_close(probe);
	c = infer_cache_new(10, sz + sz / 2);
	CHECK_EQ_INT(infer_cache_get(c, jobdir, w1, &a, &hit, &err), DD_OK);
	CHECK_EQ_INT(infer_cache_get(c, jobdir, w2, &b, &hit, &err), DD_OK);
	infer_cache_stats(c, &models, &bytes);
	CHECK_EQ_INT(models, 2); /* both lent: over the bound until one comes back */
	infer_cache_release(c, a);
	infer_cache_stats(c, &models, &bytes);
	CHECK_EQ_INT(models, 1);
	CHECK(bytes <= sz + sz / 2);
	infer_cache_release(c, b);
	CHECK_EQ_INT(infer_cache_get(c, jobdir, w2, &x, &hit, &err), DD_OK);
	CHECK(hit == 1 && x == b);
	infer_cache_release(c, x);
	infer_cache_free(c);
}


/* Two instantiated graphs with the same layers, blobs and parameter shapes. */
static int same_graph(const struct net_graph *a, const struct net_graph *b)
{
	if (a->nnode != b->nnode || a->params != b->params || a->nblob != b->nblob)
		return 0;
	for (int k = 0; k < a->nnode; k++) {
		const struct net_node *x = &a->node[k], *y = &b->node[k];
		if (x->l.type != y->l.type || x->nparam != y->nparam || x->l.ntop != y->l.ntop)
			return 0;
		for (int i = 0; i < x->nparam; i++)
			if (x->param[i].count != y->param[i].count)
				return 0;
		for (int i = 0; i < x->l.ntop; i++) {
			const struct net_blob *bx = &a->blob[x->top[i]], *by = &b->blob[y->top[i]];
			if (strcmp(bx->name, by->name) || bx->count != by->count)
				return 0;
		}
	}
	return 1;
}

/* deploy.prototxt: a network's deploy stage printed, parsed and instantiated again
 * is the same graph, and printing that gives the same text; *out (when not NULL)
 * keeps the text, which the caller frees. */
static void deploy_round_trip(const char *name, const char *src, int c, int h, int w, int classes, char **out)
{
	struct dd_err err = { 0 };
	struct net *def = NULL, *def2 = NULL;
	struct net_graph *g = NULL, *g2 = NULL;
	char *text = NULL, *text2 = NULL;
	struct net_input in = { .c = c, .h = h, .w = w, .classes = classes };
	CHECK_EQ_INT(net_parse(src, strlen(src), &def, &err), DD_OK);
	CHECK_EQ_INT(net_instantiate(def, NET_STAGE_DEPLOY, &in, &g, &err), DD_OK);
	if (g)
		text = net_graph_prototxt(g);
	CHECK(text != NULL);
	if (text) {
		int side = g->in.crop;
		struct net_input in2 = { .c = c, .h = side ? side : h, .w = side ? side : w, .classes = classes };
		int rc = net_parse(text, strlen(text), &def2, &err);
		if (!rc)
			rc = net_instantiate(def2, NET_STAGE_DEPLOY, &in2, &g2, &err);
		if (rc)
			fprintf(stderr, "  %s: %s\n", name, err.msg);
		CHECK_EQ_INT(rc, DD_OK);
		if (g2) {
			CHECK(same_graph(g, g2));
			text2 = net_graph_prototxt(g2);
			CHECK(text2 && strcmp(text, text2) == 0);
		}
	}
	if (out)
		*out = text;
	else
		free(text);
	free(text2);
	net_graph_free(g2);
	net_free(def2);
	net_graph_free(g);
	net_free(def);
}

/* every standard network's, and a Deconvolution's with all its fields */
static void test_deploy_text(void)
{
	for (const struct net_standard *s = net_standards; s->name; s++)
		deploy_round_trip(s->name, s->text, s->c, s->h, s->w, s->classes, NULL);
	static const char deconv[] =
		"layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\" }\n"
		"layer { name: \"up\" type: \"Deconvolution\" bottom: \"data\" top: \"up\" convolution_param { num_output: 4\n"
		"  group: 2 kernel_h: 4 kernel_w: 3 stride: 2 pad: 1 dilation: 2 bias_term: false weight_filler { type: \"bilinear\" } } }\n"
		"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"up\" top: \"fc\" inner_product_param { num_output: 3 } }\n"
		"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\" exclude { stage: \"deploy\" } }\n"
		"layer { name: \"prob\" type: \"Softmax\" bottom: \"fc\" top: \"prob\" include { stage: \"deploy\" } }\n";
	char *text = NULL;
	deploy_round_trip("deconv", deconv, 2, 5, 5, 3, &text);
	CHECK(text && strstr(text, "type: \"Deconvolution\""));
	CHECK(text && strstr(text, "convolution_param { num_output: 4 kernel_h: 4 kernel_w: 3 stride: 2 pad: 1 "
				   "dilation: 2 dilation: 2 group: 2 bias_term: false }"));
	free(text);
}

/* The tiny model's deploy.prototxt with its weights answers as the handle does. */
static void test_deploy_weights(void)
{
	struct dd_err err = { 0 };
	char w[PATH_MAX];
	snapshot(3, w, sizeof w);
	struct infer *h = NULL;
	CHECK_EQ_INT(infer_open(jobdir, w, &h, &err), DD_OK);
	if (!h)
		return;
	char *text = infer_deploy_text(h);
	struct net *def = NULL;
	struct net_graph *g = NULL;
	struct graph *gr = NULL;
	struct net_input in = { .c = 1, .h = 16, .w = 16, .classes = 4 };
	CHECK(text && strstr(text, "input_shape { dim: 1 dim: 1 dim: 16 dim: 16 }"));
	CHECK(text && strstr(text, "num_output: 4"));
	int rc = text ? net_parse(text, strlen(text), &def, &err) : DD_ENOMEM;
	if (!rc)
		rc = net_instantiate(def, NET_STAGE_DEPLOY, &in, &g, &err);
	if (!rc)
		rc = graph_create(g, NULL, 0, &gr, &err);
	if (!rc)
		rc = snapshot_load_weights(gr, w, 0, NULL, 0, &err);
	if (rc)
		fprintf(stderr, "  %s\n", err.msg);
	CHECK_EQ_INT(rc, DD_OK);
	struct image im = { 16, 16, 1, malloc(256) };
	for (int i = 0; i < 256; i++)
		im.px[i] = (uint8_t)(i * 11);
	struct infer_pred pred[4];
	int np = 0;
	CHECK_EQ_INT(infer_classify_image(h, &im, 4, pred, &np, &err), DD_OK);
	image_free(&im);
	if (!rc) {
		size_t cnt = 0;
		const float *x = infer_input(h, &cnt);
		memcpy(graph_blob(gr, "data", NULL), x, cnt * sizeof(float));
		CHECK_EQ_INT(graph_forward(gr, 0, NULL, &err), DD_OK);
		const float *p = graph_blob(gr, "softmax", NULL), *q = infer_probabilities(h);
		double worst = 0;
		for (int k = 0; k < 4; k++)
			worst = fabs(p[k] - q[k]) > worst ? fabs(p[k] - q[k]) : worst;
		CHECK(worst < 1e-5); /* the reference kernels against oneDNN */
	}
	graph_free(gr);
	net_graph_free(g);
	net_free(def);
	free(text);
	infer_close(h);
}

int main(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/dd_test_infer_%d", (int)getpid());
	if (make_dataset() || train_model()) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	RUN(test_val);
	RUN(test_bundle_folder);
	RUN(test_cache);
	RUN(test_deploy_text);
	RUN(test_deploy_weights);
	struct dd_err err;
	fs_rm_rf(tmp, &err);
	return check_summary();
}
