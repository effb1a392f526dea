/* test_eval.c — the evaluation job (jobs/kind_eval.c) and the batched inference it
 * runs on (networks/infer.c):
 *   - the metrics on a hand-computed confusion matrix (precision, recall, F1, macro,
 *     top-1/top-5, the misclassified heap's bound and order, top-N per class);
 *   - a batch gives, slot for slot, what classifying each image alone gives (raw
 *     records, encoded records, decoded images, a partial last batch);
 *   - a real worker (`deepdesk-test worker DIR`) over a generated LMDB of LeNet
 *     28×28 images: every image counted, the CSV complete, and its peak memory
 *     (VmHWM, in metrics.json) flat between a small and a 20× larger set.
 *     DD_EVAL_IMAGES=100000 makes the large set 100,000 images (the bench figure).
 * The model is LeNet with its fillers' random weights (no training needed to
 * count and to compare). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/datum.h"
#include "../../datasets/image.h"
#include "../../datasets/lmdbio.h"
#include "../../jobs/kind_eval.h"
#include "../../jobs/kind_train.h"
#include "../../networks/modeldir.h"
#include "../../networks/backend.h"
#include "../../networks/graph.h"
#include "../../networks/infer.h"
#include "../../networks/net.h"
#include "../../networks/snapshot.h"
#include "check.h"

static char tmp[256], jobs[512], model_dir[600], weights[700];

static int near(double a, double b) { return fabs(a - b) < 1e-4; }

/* ---- the metrics by hand ---- */

/* probs for 3 classes with the given winner and its probability */
static void probs3(float *p, int win, float pw)
{
	for (int k = 0; k < 3; k++)
		p[k] = (1 - pw) / 2;
	p[win] = pw;
}

static void test_metrics_by_hand(void)
{
	/* confusion (rows truth, columns predicted):
	 *        0  1  2
	 *   0 [  3  1  0 ]
	 *   1 [  0  2  0 ]
	 *   2 [  1  0  1 ]        and one image with no label, predicted 2
	 * accuracy 6/8; precision 3/4, 2/3, 1/1; recall 3/4, 2/2, 1/2;
	 * F1 .75, .8, 2/3; macro P .805556, R .75, F1 .738889 */
	struct eval_stats s;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(eval_stats_init(&s, 3, 2, 1000, &err), DD_OK);
	static const int truth[] = { 0, 0, 0, 0, 1, 1, 2, 2, -1 };
	static const int pred[] = { 0, 0, 0, 1, 1, 1, 0, 2, 2 };
	static const float conf[] = { .9f, .8f, .7f, .6f, .95f, .5f, .85f, .4f, .99f };
	for (int i = 0; i < 9; i++) {
		float p[3];
		probs3(p, pred[i], conf[i]);
		eval_stats_add(&s, i, truth[i], p);
	}
	const char *labels[] = { "cat", "dog", "fish" };
	cJSON *m = eval_metrics_json(&s, labels, NULL, NULL);
	CHECK(m != NULL);
	CHECK_EQ_INT(cJSON_GetObjectItem(m, "count")->valueint, 9);
	CHECK_EQ_INT(cJSON_GetObjectItem(m, "labelled")->valueint, 8);
	CHECK(near(cJSON_GetObjectItem(m, "accuracy")->valuedouble, 0.75));
	CHECK(near(cJSON_GetObjectItem(m, "accuracy_top5")->valuedouble, 1.0));
	static const double P[] = { .75, 2.0 / 3, 1 }, R[] = { .75, 1, .5 }, F[] = { .75, .8, 2.0 / 3 };
	static const int support[] = { 4, 2, 2 }, predicted[] = { 4, 3, 1 };
	cJSON *cl = cJSON_GetObjectItem(m, "classes");
	CHECK_EQ_INT(cJSON_GetArraySize(cl), 3);
	for (int k = 0; k < 3; k++) {
		cJSON *c = cJSON_GetArrayItem(cl, k);
		CHECK_STR(cJSON_GetObjectItem(c, "label")->valuestring, labels[k]);
		CHECK(near(cJSON_GetObjectItem(c, "precision")->valuedouble, P[k]));
		CHECK(near(cJSON_GetObjectItem(c, "recall")->valuedouble, R[k]));
		CHECK(near(cJSON_GetObjectItem(c, "f1")->valuedouble, F[k]));
		CHECK_EQ_INT(cJSON_GetObjectItem(c, "support")->valueint, support[k]);
		CHECK_EQ_INT(cJSON_GetObjectItem(c, "predicted")->valueint, predicted[k]);
	}
	cJSON *macro = cJSON_GetObjectItem(m, "macro");
	CHECK(near(cJSON_GetObjectItem(macro, "precision")->valuedouble, (0.75 + 2.0 / 3 + 1) / 3));
	CHECK(near(cJSON_GetObjectItem(macro, "recall")->valuedouble, 0.75));
	CHECK(near(cJSON_GetObjectItem(macro, "f1")->valuedouble, (0.75 + 0.8 + 2.0 / 3) / 3));
	static const int C[3][3] = { { 3, 1, 0 }, { 0, 2, 0 }, { 1, 0, 1 } };
	cJSON *cm = cJSON_GetObjectItem(m, "confusion");
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 3; k++)
			CHECK_EQ_INT(cJSON_GetArrayItem(cJSON_GetArrayItem(cm, i), k)->valueint, C[i][k]);
	/* misclassified: image 6 (fish as cat, .85) before image 3 (cat as dog, .6) */
	cJSON *mis = cJSON_GetObjectItem(m, "misclassified");
	CHECK_EQ_INT(cJSON_GetArraySize(mis), 2);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(mis, 0), "n")->valueint, 6);
	CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(mis, 0), "true")->valuestring, "fish");
	CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(mis, 0), "predicted")->valuestring, "cat");
	CHECK(near(cJSON_GetObjectItem(cJSON_GetArrayItem(mis, 0), "probability")->valuedouble, .85));
	CHECK(near(cJSON_GetObjectItem(cJSON_GetArrayItem(mis, 0), "probability_true")->valuedouble, .075));
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(mis, 1), "n")->valueint, 3);
	/* top 2 of "cat": images 0 (.9) and 6 (.85); of "fish": 8 (.99) then 7 (.4) */
	cJSON *top = cJSON_GetObjectItem(m, "top");
	cJSON *cat = cJSON_GetArrayItem(top, 0), *fish = cJSON_GetArrayItem(top, 2);
	CHECK_EQ_INT(cJSON_GetArraySize(cat), 2);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(cat, 0), "n")->valueint, 0);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(cat, 1), "n")->valueint, 6);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(fish, 0), "n")->valueint, 8);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(fish, 0), "true")));
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(fish, 1), "n")->valueint, 7);
	cJSON_Delete(m);
	eval_stats_fini(&s);
}

static void test_top5_and_bounds(void)
{
	/* 8 classes: the truth ranked 0..7 in turn; top-5 holds for ranks 0..4 */
	struct eval_stats s;
	CHECK_EQ_INT(eval_stats_init(&s, 8, 3, 4, NULL), DD_OK);
	for (int rank = 0; rank < 8; rank++) {
		float p[8];
		for (int k = 0; k < 8; k++)
			p[k] = (float)(8 - k) / 36; /* class k ranks k */
		eval_stats_add(&s, rank, rank, p);
	}
	CHECK_EQ_INT(s.correct1, 1);
	CHECK_EQ_INT(s.correct5, 5);
	/* a tie counts for the lower index: truth 1 level with class 0 is rank 1 */
	float tie[8] = { .3f, .3f, .1f, .1f, .1f, .05f, .05f, 0 };
	eval_stats_add(&s, 8, 1, tie);
	CHECK_EQ_INT(s.correct1, 1);
	CHECK_EQ_INT(s.correct5, 6);
	/* the misclassified heap keeps the 4 most confident of 100: class 0 predicted
	 * for truth 1 with probabilities .505 ... 1.0 */
	for (int i = 0; i < 100; i++) {
		float p[8] = { 0 };
		p[0] = 0.5f + (float)(i + 1) / 200;
		p[1] = 1 - p[0];
		eval_stats_add(&s, 100 + i, 1, p);
	}
	CHECK_EQ_INT(s.mis.n, 4);
	const char *labels[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	cJSON *m = eval_metrics_json(&s, labels, NULL, NULL);
	cJSON *mis = cJSON_GetObjectItem(m, "misclassified");
	CHECK_EQ_INT(cJSON_GetArraySize(mis), 4);
	double prev = 2;
	for (int i = 0; i < 4; i++) {
		double pr = cJSON_GetObjectItem(cJSON_GetArrayItem(mis, i), "probability")->valuedouble;
		CHECK(pr <= prev);
		CHECK(pr >= 0.985 - 1e-6); /* 1.0, .995, .99, .985 */
		prev = pr;
	}
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "top"), 0)), 3);
	cJSON_Delete(m);
	eval_stats_fini(&s);
}

/* ---- a LeNet model and a generated dataset ---- */

/* Image n of the generated set: 28×28 gray, a bar whose place follows its label. */
static void gen_image(int64_t n, int label, uint8_t *px)
{
	uint64_t x = (uint64_t)n * 2654435761u + 7;
	for (int i = 0; i < 28 * 28; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		px[i] = (uint8_t)(x >> 58);
	}
	for (int y = 0; y < 28; y++)
		for (int c = 0; c < 3; c++)
			px[y * 28 + label * 2 + 4 + c] = 220;
}

/* A dataset job folder jobs/<id> with a val_db of n raw records. */
static int make_dataset(int id, int64_t n)
{
	struct dd_err err = { 0 };
	char dir[700], path[800];
	snprintf(dir, sizeof dir, "%s/%d", jobs, id);
	if (fs_mkdir_p(dir, &err))
		return -1;
	snprintf(path, sizeof path, "%s/labels.txt", dir);
	const char *labels = "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n";
	const char *json = "{\"options\":{\"width\":28,\"height\":28,\"channels\":1,\"resize_mode\":\"squash\"},"
			   "\"labels\":[\"zero\",\"one\",\"two\",\"three\",\"four\",\"five\",\"six\",\"seven\",\"eight\",\"nine\"]}";
	if (fs_write_file_atomic(path, labels, strlen(labels), &err))
		return -1;
	snprintf(path, sizeof path, "%s/dataset.json", dir);
	if (fs_write_file_atomic(path, json, strlen(json), &err))
		return -1;
	snprintf(path, sizeof path, "%s/val_db", dir);
	struct lmdbw *w = NULL;
	if (lmdbw_open(path, 0, &w, &err))
		return -1;
	uint8_t px[28 * 28];
	for (int64_t i = 0; i < n; i++) {
		int label = (int)(i % 10);
		gen_image(i, label, px);
		struct datum d = { .channels = 1, .height = 28, .width = 28, .label = label, .data = px,
				   .data_len = sizeof px };
		uint8_t *buf;
		size_t len;
		if (datum_encode(&d, &buf, &len, &err) || lmdbw_put(w, label, buf, len, &err)) {
			fprintf(stderr, "  dataset: %s\n", err.msg);
			lmdbw_abort(w);
			return -1;
		}
		free(buf);
	}
	return lmdbw_close(w, &err) ? -1 : 0;
}

/* The model job folder jobs/2 for dataset jobs/1: LeNet, no mean, weights from its
 * fillers saved as snapshot 1. */
static int make_model(void)
{
	struct dd_err err = { 0 };
	char ds[700];
	snprintf(ds, sizeof ds, "%s/1", jobs);
	snprintf(model_dir, sizeof model_dir, "%s/2", jobs);
	const char *text = net_standard_text("lenet");
	cJSON *settings = cJSON_CreateObject();
	cJSON_AddStringToObject(settings, "mean", "none");
	cJSON_AddNumberToObject(settings, "dataset", 1);
	if (!text || model_write_folder(model_dir, text, "lenet", ds, 0, 0, settings, &err)) {
		fprintf(stderr, "  model: %s\n", err.msg);
		return -1;
	}
	struct net *def = NULL;
	struct net_graph *ng = NULL;
	struct backend *be = NULL;
	struct graph *gr = NULL;
	struct net_input in = { .n = 1, .c = 1, .h = 28, .w = 28, .classes = 10 };
	int rc = -1;
	modeldir_snapshot_path(model_dir, "1", MODELDIR_SNAP_WEIGHTS, weights, sizeof weights);
	if (net_parse(text, strlen(text), &def, &err) || net_instantiate(def, NET_STAGE_DEPLOY, &in, &ng, &err) ||
	    backend_create("cpu", &be, &err) || graph_create(ng, be, 7, &gr, &err) ||
	    snapshot_save_weights(gr, weights, NULL, &err))
		fprintf(stderr, "  model: %s\n", err.msg);
	else
		rc = 0;
	graph_free(gr);
	backend_free(be);
	net_graph_free(ng);
	net_free(def);
	return rc;
}

/* ---- a batch against one image at a time ---- */

static void test_batch_equals_single(void)
{
	struct dd_err err = { 0 };
	struct infer *one = NULL, *many = NULL;
	CHECK_EQ_INT(infer_open(model_dir, weights, &one, &err), DD_OK);
	CHECK_EQ_INT(infer_batch_open(model_dir, weights, 7, &many, &err), DD_OK);
	struct infer *none = NULL;
	CHECK_EQ_INT(infer_batch_open(model_dir, weights, 0, &none, &err), DD_EINVAL);
	CHECK(none == NULL);
	if (!one || !many) {
		fprintf(stderr, "  %s\n", err.msg);
		infer_close(one);
		infer_close(many);
		check_current_failed = 1;
		return;
	}
	CHECK_EQ_INT(infer_batch_size(many), 7);
	enum { N = 19 }; /* 7 + 7 + 5: the last batch partial */
	static float expect[N][10];
	uint8_t px[28 * 28];
	for (int i = 0; i < N; i++) {
		gen_image(i, i % 10, px);
		struct image im = { 28, 28, 1, px };
		struct infer_pred pred[10];
		int np = 0;
		CHECK_EQ_INT(infer_classify_image(one, &im, 10, pred, &np, &err), DD_OK);
		memcpy(expect[i], infer_probabilities(one), sizeof expect[i]);
	}
	/* three ways into the slots: raw record, encoded record (PNG), decoded image */
	for (int way = 0; way < 3; way++) {
		double worst = 0;
		for (int b0 = 0; b0 < N; b0 += 7) {
			int n = N - b0 < 7 ? N - b0 : 7;
			for (int s = 0; s < n; s++) {
				int i = b0 + s;
				gen_image(i, i % 10, px);
				struct image im = { 28, 28, 1, px };
				uint8_t *png = NULL;
				size_t plen = 0;
				struct datum d = { .channels = 1, .height = 28, .width = 28, .label = i % 10, .data = px,
						   .data_len = sizeof px };
				if (way == 1) {
					CHECK_EQ_INT(image_encode_png(&im, 1, &png, &plen, &err), DD_OK);
					d = (struct datum){ .encoded = 1, .data = png, .data_len = plen };
				}
				int rc = way == 2 ? infer_batch_set_image(many, s, &im, &err) :
						    infer_batch_set_datum(many, s, &d, "rec", &err);
				CHECK_EQ_INT(rc, DD_OK);
				free(png);
			}
			CHECK_EQ_INT(infer_batch_run(many, n, &err), DD_OK);
			for (int s = 0; s < n; s++) {
				const float *p = infer_batch_probabilities(many, s);
				for (int k = 0; k < 10; k++) {
					double d = fabs((double)p[k] - expect[b0 + s][k]);
					worst = d > worst ? d : worst;
				}
				struct infer_pred top[5];
				CHECK_EQ_INT(infer_top(many, p, 5, top), 5);
				for (int t = 1; t < 5; t++)
					CHECK(top[t - 1].probability >= top[t].probability);
			}
		}
		printf("  way %d: largest difference batch vs one at a time %.3g\n", way, worst);
		CHECK(worst < 1e-5);
	}
	/* what is not an image names itself and leaves the slot as it was */
	CHECK_EQ_INT(infer_batch_set_encoded(many, 0, "nope", 4, "bad.png", &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "bad.png");
	CHECK_EQ_INT(infer_batch_run(many, 8, &err), DD_EINVAL);
	infer_close(one);
	infer_close(many);
}

/* ---- the worker over many images ---- */

/* Run `deepdesk-test worker jobs/<id>` for an evaluation of dataset 1's val split;
 * its metrics.json, parsed (caller frees), or NULL. */
static cJSON *run_eval(int id, int batch)
{
	char dir[700], path[800];
	struct dd_err err = { 0 };
	snprintf(dir, sizeof dir, "%s/%d", jobs, id);
	if (fs_mkdir_p(dir, &err))
		return NULL;
	char job[512];
	snprintf(job, sizeof job,
		 "{\"id\":%d,\"kind\":\"evaluation\",\"params\":{\"model\":2,\"snapshot\":\"1\","
		 "\"source\":{\"dataset\":1,\"split\":\"val\"},\"batch_size\":%d,\"top_n\":5}}",
		 id, batch);
	snprintf(path, sizeof path, "%s/job.json", dir);
	if (fs_write_file_atomic(path, job, strlen(job), &err))
		return NULL;
	const char *bin = getenv("DEEPDESK_BIN") ? getenv("DEEPDESK_BIN") : "build/deepdesk-test";
	pid_t pid = fork();
	if (pid == 0) {
		execl(bin, bin, "worker", dir, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "  worker for %s failed (status %d); its events:\n", dir, status);
		snprintf(path, sizeof path, "tail -3 %s/events.jsonl >&2", dir);
		if (system(path)) { /* best effort */
		}
		return NULL;
	}
	snprintf(path, sizeof path, "%s/metrics.json", dir);
	char *text = NULL;
	if (fs_read_file(path, 1u << 30, &text, NULL, &err))
		return NULL;
	cJSON *m = cJSON_Parse(text);
	free(text);
	return m;
}

static int64_t lines_of(const char *path)
{
	FILE *f = fopen(path, "r");
	int64_t n = 0;
	int ch;
	while (f && (ch = fgetc(f)) != EOF)
		n += ch == '\n';
	if (f)
		fclose(f);
	return n;
}

static void test_worker_memory_flat(void)
{
	long big = getenv("DD_EVAL_IMAGES") ? atol(getenv("DD_EVAL_IMAGES")) : 20000, small = 1000;
	double rss[2] = { 0 }, anon[2] = { 0 }, ips = 0;
	for (int run = 0; run < 2; run++) {
		long n = run ? big : small;
		char ds[700];
		snprintf(ds, sizeof ds, "%s/1/val_db", jobs);
		fs_rm_rf(ds, NULL);
		CHECK_EQ_INT(make_dataset(1, n), 0);
		int64_t t0 = fs_mono_ms();
		cJSON *m = run_eval(10 + run, 64);
		double secs = (double)(fs_mono_ms() - t0) / 1000.0;
		CHECK(m != NULL);
		if (!m)
			return;
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "count")->valuedouble, n);
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "labelled")->valuedouble, n);
		CHECK(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")));
		/* the confusion matrix holds every image once */
		double sum = 0;
		cJSON *row, *v;
		cJSON_ArrayForEach(row, cJSON_GetObjectItem(m, "confusion")) cJSON_ArrayForEach(v, row) sum += v->valuedouble;
		CHECK_EQ_INT(sum, n);
		CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "top"), 3)), 5);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(m, "misclassified")) <= EVAL_MAX_MISCLASSIFIED);
		char path[800];
		snprintf(path, sizeof path, "%s/%d/results.csv", jobs, 10 + run);
		CHECK_EQ_INT(lines_of(path), n + 1);
		snprintf(path, sizeof path, "%s/%d/results.jsonl", jobs, 10 + run);
		CHECK_EQ_INT(lines_of(path), n);
		cJSON *mem = cJSON_GetObjectItem(m, "memory_kb");
		rss[run] = cJSON_GetObjectItem(mem, "peak")->valuedouble;
		anon[run] = cJSON_GetObjectItem(mem, "anon")->valuedouble;
		ips = cJSON_GetObjectItem(m, "images_per_s")->valuedouble;
		printf("  %ld images: peak RSS (VmHWM) %.0f KiB, of it at the end anonymous %.0f KiB and file-backed "
		       "(LMDB map) %.0f KiB; %.0f images/s in the worker, %.1f s in all\n",
		       n, rss[run], anon[run], cJSON_GetObjectItem(mem, "file")->valuedouble, ips, secs);
		cJSON_Delete(m);
	}
	/* flat: 20x (or 100x) the images, at most 2 MiB more heap (a leak of 100 bytes
	 * an image over 19,000 more images would show).  The peak grows by the LMDB
	 * pages mapped in (file-backed, the page cache's), not by anything we keep. */
	CHECK(anon[0] > 0 && anon[1] - anon[0] < 2048);
}

int main(void)
{
	snprintf(tmp, sizeof tmp, "%s/dd-test-eval-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(jobs, sizeof jobs, "%s/jobs", tmp);
	RUN(test_metrics_by_hand);
	RUN(test_top5_and_bounds);
	if (make_dataset(1, 10) != 0 || make_model() != 0) {
		fprintf(stderr, "cannot make the model\n");
		check_failed++;
	} else {
		RUN(test_batch_equals_single);
		RUN(test_worker_memory_flat);
	}
	fs_rm_rf(tmp, NULL);
	return check_summary();
}
