/* test_train.c — networks/feed.c and networks/train.c on a tiny generated dataset:
 * four classes of 16x16 gray images (a bright quadrant each, plus noise). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/create.h"
#include "../../datasets/image.h"
#include "../../networks/feed.h"
#include "../../networks/snapshot.h"
#include "../../networks/train.h"
#include "check.h"
#include "quadrants.h"
#include "weights.h"

static char tmp[256], dsdir[512];

static const char small_net[] = QUADRANTS_NET;

static int make_dataset(void)
{
	return quadrants_dataset(tmp, 170, 40, dsdir, sizeof dsdir);
}

/* One training of small_net on the dataset into TMP/NAME: its options, its result
 * and the folder it writes (o.out_dir points into it, so it is not copied). */
struct small_run {
	struct train_opts o;
	struct train_result r;
	char out[600];
};

/* s: small_net trained for epochs into TMP/name, its result into s->r; the caller
 * sets the rest of s->o. */
static void small_run_init(struct small_run *s, const char *name, int epochs)
{
	snprintf(s->out, sizeof s->out, "%s/%s", tmp, name);
	quadrants_train_opts(&s->o, dsdir, small_net, s->out, epochs);
	s->o.result = &s->r;
}

static void test_feed(void)
{
	struct dd_err err = { 0 };
	struct feed *f = NULL;
	struct feed_opts o = { .train = 1, .crop = 12, .mirror = 1, .scale = 1, .mean = FEED_MEAN_PIXEL, .seed = 3 };
	CHECK_EQ_INT(feed_open(dsdir, "train", &o, &f, &err), DD_OK);
	if (!f) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	CHECK_EQ_INT(feed_epoch_size(f), 180);
	int c, h, w;
	feed_shape(f, &c, &h, &w);
	CHECK(c == 1 && h == 12 && w == 12);
	float data[4 * 144], lab[4];
	CHECK_EQ_INT(feed_next(f, data, lab, 4, &err), DD_OK);
	double s = 0;
	for (int i = 0; i < 4 * 144; i++)
		s += data[i];
	CHECK(fabs(s / (4 * 144)) < 40); /* mean-subtracted */
	for (int i = 0; i < 4; i++)
		CHECK(lab[i] >= 0 && lab[i] < 4);
	feed_close(f);

	/* val: in order, no mean; values are the raw pixels */
	struct feed_opts v = { .train = 0 };
	CHECK_EQ_INT(feed_open(dsdir, "val", &v, &f, &err), DD_OK);
	if (!f)
		return;
	CHECK_EQ_INT(feed_epoch_size(f), 60);
	float d2[256], l2;
	CHECK_EQ_INT(feed_next(f, d2, &l2, 1, &err), DD_OK);
	int lab0 = (int)l2, bright = 0;
	for (int y = 0; y < 16; y++)
		for (int x = 0; x < 16; x++)
			if (d2[y * 16 + x] >= 170)
				bright |= 1 << ((y >= 8) * 2 + (x >= 8));
	CHECK(d2[0] >= 40 && d2[0] < 230);
	(void)lab0;
	CHECK(bright != 0);
	feed_close(f);

	CHECK_EQ_INT(feed_open(dsdir, "nope", &v, &f, &err), DD_EINVAL);
	struct feed_opts big = { .crop = 17 };
	CHECK_EQ_INT(feed_open(dsdir, "val", &big, &f, &err), DD_EINVAL);
}

static int nmetric_train, nmetric_val;
static double val_acc[16];
static void on_metric(void *ctx, const struct train_metric *m)
{
	if (strcmp(m->kind, "train") == 0)
		nmetric_train++;
	else if (nmetric_val < 16)
		val_acc[nmetric_val++] = m->accuracy;
}

static void test_train(void)
{
	struct dd_err err = { 0 };
	struct small_run s;
	small_run_init(&s, "job", 3);
	s.o.network_name = "tiny";
	s.o.seed = 1;
	struct train_hooks h = { .metric = on_metric };
	int64_t t0 = fs_mono_ms();
	int rc = train_run(&s.o, &h, &err);
	if (rc)
		fprintf(stderr, "  train_run: %s\n", err.msg);
	CHECK_EQ_INT(rc, DD_OK);
	printf("  val accuracy %.3f loss %.3f -> %.3f in %lld ms (%d train metrics)\n", s.r.val_accuracy,
	       s.r.first_train_loss, s.r.train_loss, (long long)(fs_mono_ms() - t0), nmetric_train);
	CHECK(s.r.val_accuracy > 0.9);
	CHECK(s.r.train_loss < s.r.first_train_loss);
	CHECK_EQ_INT(nmetric_val, 3);
	CHECK(nmetric_train >= 3 * 8);
	CHECK_EQ_INT(s.r.iterations, 3 * 12); /* ceil(180/16) = 12 */

	/* the snapshot */
	char path[700];
	snprintf(path, sizeof path, "%s/snapshot_epoch_3.safetensors", s.out);
	CHECK_STR(s.r.snapshot, path);
	char *buf = NULL;
	size_t len = 0;
	CHECK_EQ_INT(fs_read_file(path, 1 << 24, &buf, &len, &err), DD_OK);
	if (!buf)
		return;
	uint64_t hl = 0;
	for (int b = 7; b >= 0; b--)
		hl = hl << 8 | (uint8_t)buf[b];
	CHECK(hl % 8 == 0 && 8 + hl <= len);
	char *js = strndup(buf + 8, hl);
	cJSON *j = cJSON_Parse(js);
	CHECK(j != NULL);
	int nt = 0;
	double end = 0;
	int64_t expect[] = { 8 * 1 * 3 * 3, 8, 4 * 8 * 7 * 7, 4 };
	const char *names[] = { "conv1.0", "conv1.1", "fc.0", "fc.1" };
	for (cJSON *t = j ? j->child : NULL; t; t = t->next) {
		if (strcmp(t->string, "__metadata__") == 0)
			continue;
		nt++;
		cJSON *offs = cJSON_GetObjectItem(t, "data_offsets");
		double a = cJSON_GetArrayItem(offs, 0)->valuedouble, b = cJSON_GetArrayItem(offs, 1)->valuedouble;
		if (b > end)
			end = b;
		for (int k = 0; k < 4; k++)
			if (strcmp(t->string, names[k]) == 0)
				CHECK_EQ_INT((int64_t)(b - a), expect[k] * 4);
		CHECK_STR(cJSON_GetObjectItem(t, "dtype")->valuestring, "F32");
	}
	CHECK_EQ_INT(nt, 4);
	CHECK_EQ_INT((int64_t)end, (int64_t)(len - 8 - hl));
	cJSON *meta = cJSON_GetObjectItem(j, "__metadata__");
	CHECK(meta && cJSON_IsString(cJSON_GetObjectItem(meta, "epoch")));
	cJSON_Delete(j);
	free(js);
	free(buf);
}

static void test_errors(void)
{
	struct dd_err err = { 0 };
	struct train_opts o;
	quadrants_train_opts(&o, dsdir, small_net, "/tmp/nowhere-deepdesk", 1);
	o.base_lr = 1e30;
	int rc = train_run(&o, NULL, &err);
	CHECK_EQ_INT(rc, DD_EINVAL);
	CHECK_CONTAINS(err.msg, "the loss became NaN at epoch");
	o.base_lr = 0.01;
	o.network_text = "layer { name: \"x\" type: \"Bogus\" }";
	CHECK(train_run(&o, NULL, &err) != DD_OK);
	o.network_text = small_net;
	o.dataset_dir = "/nonexistent/ds";
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_ENOENT);
}

static int stop_after;
static int should_stop(void *ctx) { return --stop_after <= 0; }

static void test_stop(void)
{
	struct dd_err err = { 0 };
	struct small_run s;
	small_run_init(&s, "job2", 5);
	s.o.solver = SOLVER_ADAM;
	s.o.base_lr = 0.001;
	stop_after = 5;
	struct train_hooks h = { .should_stop = should_stop };
	CHECK_EQ_INT(train_run(&s.o, &h, &err), DD_OK);
	CHECK(s.r.stopped);
	CHECK_EQ_INT(s.r.iterations, 5);
	struct stat st;
	char path[700];
	snprintf(path, sizeof path, "%s/snapshot_epoch_0.4167.safetensors", s.out); /* 5 of 12 */
	CHECK(stat(path, &st) == 0);
	snprintf(path, sizeof path, "%s/snapshot_epoch_0.4167.solverstate", s.out);
	CHECK(stat(path, &st) == 0);
}

/* The small net with dropout, so a resume must restore its PRNG too. */
static char *net_with_dropout(void)
{
	static char text[4096];
	const char *at = strstr(small_net, "layer { name: \"fc\"");
	snprintf(text, sizeof text, "%.*slayer { name: \"drop\" type: \"Dropout\" bottom: \"pool1\" top: \"pool1\" "
		 "dropout_param { dropout_ratio: 0.3 } }\n%s", (int)(at - small_net), small_net, at);
	return text;
}

static void resume_opts(struct train_opts *o, struct train_result *r, const char *out, const char *backend)
{
	quadrants_train_opts(o, dsdir, net_with_dropout(), out, 4);
	o->crop = 14; /* random crops and mirrors from the feed's counters */
	o->seed = 7;
	o->backend = backend;
	o->result = r;
}

/* N epochs straight == stopped mid-epoch + resumed, and == N/2 then extended to N. */
static void check_resume(const char *backend)
{
	struct dd_err err = { 0 };
	struct train_opts o;
	struct train_result r;
	char a[600], b[600], c[600], pa[700], pb[700], pc[700], mid[700];
	snprintf(a, sizeof a, "%s/%s-straight", tmp, backend);
	snprintf(b, sizeof b, "%s/%s-stopped", tmp, backend);
	snprintf(c, sizeof c, "%s/%s-extended", tmp, backend);
	resume_opts(&o, &r, a, backend);
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_OK);
	snprintf(pa, sizeof pa, "%s/snapshot_epoch_4.safetensors", a);
	CHECK_STR(r.snapshot, pa);

	/* stopped after 17 iterations (epoch 1.4167), resumed */
	resume_opts(&o, &r, b, backend);
	stop_after = 17;
	struct train_hooks h = { .should_stop = should_stop };
	CHECK_EQ_INT(train_run(&o, &h, &err), DD_OK);
	CHECK(r.stopped);
	snprintf(mid, sizeof mid, "%s/snapshot_epoch_1.4167.safetensors", b);
	CHECK_STR(r.snapshot, mid);
	resume_opts(&o, &r, b, backend);
	o.resume = mid;
	int rc = train_run(&o, NULL, &err);
	if (rc)
		fprintf(stderr, "  resume: %s\n", err.msg);
	CHECK_EQ_INT(rc, DD_OK);
	CHECK_EQ_INT(r.iterations, 48);
	snprintf(pb, sizeof pb, "%s/snapshot_epoch_4.safetensors", b);
	CHECK(same_weights(pa, pb));

	/* 2 epochs, then extended to 4: with a fixed rate the schedule is the same */
	resume_opts(&o, &r, c, backend);
	o.policy = LR_FIXED;
	o.epochs = 2;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_OK);
	snprintf(mid, sizeof mid, "%s/snapshot_epoch_2.safetensors", c);
	resume_opts(&o, &r, c, backend);
	o.policy = LR_FIXED;
	o.resume = mid;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_OK);
	snprintf(pc, sizeof pc, "%s/snapshot_epoch_4.safetensors", c);
	char d[600], pd[700];
	snprintf(d, sizeof d, "%s/%s-fixed", tmp, backend);
	resume_opts(&o, &r, d, backend);
	o.policy = LR_FIXED;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_OK);
	snprintf(pd, sizeof pd, "%s/snapshot_epoch_4.safetensors", d);
	CHECK(same_weights(pc, pd));

	/* a weights file without its solver state cannot resume */
	snprintf(mid, sizeof mid, "%s/snapshot_epoch_2.solverstate", c);
	CHECK(unlink(mid) == 0);
	snprintf(mid, sizeof mid, "%s/snapshot_epoch_2.safetensors", c);
	resume_opts(&o, &r, c, backend);
	o.resume = mid;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_ENOENT);
	CHECK_CONTAINS(err.msg, "no solver state");
}

/* Deterministic mode: the same seed, backend and thread count give the same curve
 * and the same weights. */
static double curve[2][64];
static int ncurve[2], which;
static void record(void *ctx, const struct train_metric *m)
{
	if (ncurve[which] < 64)
		curve[which][ncurve[which]++] = m->loss;
}

static void test_deterministic(void)
{
	struct dd_err err = { 0 };
	struct train_opts o;
	struct train_result r;
	char out[2][600], snap[2][700];
	struct train_hooks h = { .metric = record };
	for (which = 0; which < 2; which++) {
		snprintf(out[which], sizeof out[which], "%s/determinism-%d", tmp, which);
		resume_opts(&o, &r, out[which], "cpu");
		o.epochs = 2;
		o.threads = 2;
		CHECK_EQ_INT(train_run(&o, &h, &err), DD_OK);
		snprintf(snap[which], sizeof snap[which], "%s", r.snapshot);
	}
	CHECK(ncurve[0] > 8 && ncurve[0] == ncurve[1]);
	CHECK(memcmp(curve[0], curve[1], (size_t)ncurve[0] * sizeof(double)) == 0);
	CHECK(same_weights(snap[0], snap[1]));
}

static void test_resume_ref(void) { check_resume("ref"); }
static void test_resume_cpu(void) { check_resume("cpu"); }

/* Fine-tuning: conv1 of another width is initialised afresh, fc too (its input
 * changed); loading must then still train. */
static void test_finetune(void)
{
	struct dd_err err = { 0 };
	struct train_opts o;
	struct train_result r;
	char out[600], src[700];
	snprintf(out, sizeof out, "%s/finetune", tmp);
	snprintf(src, sizeof src, "%s/ref-straight/snapshot_epoch_4.safetensors", tmp);
	static char text[4096];
	snprintf(text, sizeof text, "%s", small_net);
	char *p = strstr(text, "num_output: 8");
	CHECK(p != NULL);
	if (!p)
		return;
	p[12] = '6';
	quadrants_train_opts(&o, dsdir, text, out, 1);
	o.backend = "ref";
	o.crop = 14; /* as the source was trained */
	o.finetune = src;
	o.result = &r;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_OK);
	/* the same net: everything loads, and training goes on from there */
	o.network_text = small_net;
	o.epochs = 1;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_OK);
	printf("  fine-tuned from a trained net: first loss %.4f\n", r.first_train_loss);
	CHECK(r.first_train_loss < 0.5); /* it starts trained */
	o.finetune = "/nonexistent.safetensors";
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_ENOENT);
}

/* Data parallelism (train_opts.replicas): 2 copies of batch 8, their gradients
 * averaged each step, train as one copy of batch 16 — the same images in the same
 * order, the same updates up to rounding — on the reference and the oneDNN
 * backends; a stopped and resumed 2-copy run with dropout repeats the straight one
 * bit for bit (each copy's dropout stream is in the solverstate); and the limits. */
static void test_replicas(void)
{
	struct dd_err err = { 0 };
	struct train_opts o;
	struct train_result r;
	static const char *const backends[] = { "ref", "cpu" };
	for (int b = 0; b < 2; b++) {
		char out[2][600], snap[2][700];
		double vloss[2];
		int64_t iters[2];
		for (int k = 0; k < 2; k++) {
			snprintf(out[k], sizeof out[k], "%s/replicas-%s-%d", tmp, backends[b], k);
			quadrants_train_opts(&o, dsdir, small_net, out[k], 2);
			o.crop = 14;
			o.mirror = 1;
			o.seed = 11;
			o.backend = backends[b];
			o.threads = 1;
			o.batch = k ? 8 : 16;
			o.replicas = k ? 2 : 0;
			o.result = &r;
			int rc = train_run(&o, NULL, &err);
			if (rc)
				fprintf(stderr, "  %s, %d copies: %s\n", backends[b], k + 1, err.msg);
			CHECK_EQ_INT(rc, DD_OK);
			snprintf(snap[k], sizeof snap[k], "%s", r.snapshot);
			vloss[k] = r.val_loss;
			iters[k] = r.iterations;
		}
		double d = weights_diff(snap[0], snap[1]);
		printf("  %s: 2 copies of batch 8 against 1 of 16 after %lld iterations: weights differ by %.2g "
		       "(relative), val loss %.6f and %.6f\n",
		       backends[b], (long long)iters[1], d, vloss[0], vloss[1]);
		CHECK_EQ_INT(iters[0], 24); /* ceil(180 / 16) per epoch either way */
		CHECK_EQ_INT(iters[1], 24);
		CHECK(d < (b == 0 ? 1e-5 : 1e-4));
		CHECK(fabs(vloss[0] - vloss[1]) < 1e-4 * fmax(1, fabs(vloss[0])));
	}

	/* stopped after 7 iterations and resumed == straight, with dropout, 2 copies */
	char a[600], c[600], pa[700], pc[700], mid[700];
	snprintf(a, sizeof a, "%s/replicas-straight", tmp);
	snprintf(c, sizeof c, "%s/replicas-stopped", tmp);
	for (int k = 0; k < 3; k++) {
		resume_opts(&o, &r, k ? c : a, "ref");
		o.epochs = 2;
		o.batch = 8;
		o.replicas = 2;
		stop_after = 7;
		struct train_hooks h = { .should_stop = should_stop };
		if (k == 2)
			o.resume = mid;
		int rc = train_run(&o, k == 1 ? &h : NULL, &err);
		if (rc)
			fprintf(stderr, "  run %d: %s\n", k, err.msg);
		CHECK_EQ_INT(rc, DD_OK);
		if (k == 1) {
			CHECK(r.stopped);
			snprintf(mid, sizeof mid, "%s", r.snapshot);
		}
	}
	snprintf(pa, sizeof pa, "%s/snapshot_epoch_2.safetensors", a);
	snprintf(pc, sizeof pc, "%s/snapshot_epoch_2.safetensors", c);
	CHECK(same_weights(pa, pc));
	/* and the copies did not drop the same units: copy 1's stream is its own */
	struct st_file *f = NULL;
	snprintf(mid, sizeof mid, "%s/snapshot_epoch_2.solverstate", a);
	CHECK_EQ_INT(st_open(mid, &f, &err), DD_OK);
	if (f) {
		const char *r0 = st_meta(f, "dropout_rng"), *r1 = st_meta(f, "dropout_rng_1");
		CHECK(r0 && r1 && strcmp(r0, r1) != 0);
		st_close(f);
	}

	/* the limits */
	train_opts_default(&o);
	o.dataset_dir = dsdir;
	o.network_text = small_net;
	o.out_dir = a;
	o.backend = "ref";
	o.replicas = TRAIN_MAX_REPLICAS + 1;
	CHECK_EQ_INT(train_run(&o, NULL, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "too many");
	o.replicas = 2;
	o.backend = "cuda";
	o.gpus[1] = 1;
	CHECK(train_run(&o, NULL, &err) != DD_OK);
	CHECK(strncmp(err.msg, "cuda", 4) == 0);
	printf("  2 GPUs here: %s\n", err.msg);
}

int main(void)
{
	if (!check_tmpdir(tmp, sizeof tmp) || make_dataset()) {
		fprintf(stderr, "cannot make the dataset\n");
		return 1;
	}
	RUN(test_feed);
	RUN(test_train);
	RUN(test_errors);
	RUN(test_stop);
	RUN(test_deterministic);
	RUN(test_resume_ref);
	RUN(test_resume_cpu);
	RUN(test_finetune);
	RUN(test_replicas);
	fs_rm_rf(tmp, NULL);
	return check_summary();
}
