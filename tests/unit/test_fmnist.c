/* test_fmnist.c — LeNet learns Fashion-MNIST: the quick version of the accuracy
 * check (the full one, against PyTorch with the same net, solver and epochs, is
 * bench/train's accuracy run).
 *
 * The first 15,000 training images of Debian's dataset-fashion-mnist, at most 1,500
 * a class (20% held out for validation: about 12,000 train, 3,000 val), 28×28 gray, DIGITS' standard LeNet, SGD lr
 * 0.01 momentum 0.9, batch 64, two epochs on the default backend.  A LeNet that
 * trains correctly is near 0.84 here; the bar is 0.80.  Without the package (which
 * `make test` installs) the test is a counted skip, or a failure where CI is set. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../common/fsutil.h"
#include "../../datasets/create.h"
#include "../../datasets/example.h"
#include "../../networks/net.h"
#include "../../networks/train.h"
#include "check.h"
#include "quadrants.h"

static char tmp[256];

static int enough(void *ctx, int64_t done, int64_t total) { return done >= 15000; }

static void test_lenet_learns(void)
{
	struct dd_err err = { 0 };
	char src[512], ds[512], out[512], train[600];
	snprintf(src, sizeof src, "%s/fm", tmp);
	snprintf(ds, sizeof ds, "%s/ds", tmp);
	snprintf(out, sizeof out, "%s/model", tmp);
	snprintf(train, sizeof train, "%s/train", src);
	int64_t t0 = fs_mono_ms();
	/* the first 15,000 training images (the set is shuffled: ~1,500 a class) */
	CHECK_EQ_INT(example_fashion_mnist(src, enough, NULL, &err), DD_ECONFLICT);
	struct ds_options o;
	quadrants_gray_options(&o, 28, 20);
	o.max_per_class = 1500;
	struct ds_source s = { .folder = { train } };
	int rc = ds_create(&s, &o, ds, NULL, NULL, &err);
	if (rc)
		fprintf(stderr, "  ds_create: %s\n", err.msg);
	CHECK_EQ_INT(rc, DD_OK);
	int64_t t1 = fs_mono_ms();

	struct train_opts to;
	struct train_result r;
	train_opts_default(&to);
	to.dataset_dir = ds;
	to.network_text = net_standard_text("lenet");
	to.network_name = "lenet";
	to.out_dir = out;
	to.epochs = 2;
	to.batch = 64;
	to.policy = LR_FIXED;
	to.seed = 1;
	to.result = &r;
	rc = train_run(&to, NULL, &err);
	if (rc)
		fprintf(stderr, "  train_run: %s\n", err.msg);
	CHECK_EQ_INT(rc, DD_OK);
	int64_t t2 = fs_mono_ms();
	printf("  val accuracy %.4f (loss %.4f) after 2 epochs of 12,000; dataset %.1f s, training %.1f s\n",
	       r.val_accuracy, r.val_loss, (t1 - t0) / 1000.0, (t2 - t1) / 1000.0);
	CHECK(r.val_accuracy >= 0.80);
}

int main(void)
{
	if (!example_fashion_mnist_available()) {
		check_need("LeNet learning Fashion-MNIST",
			   "dataset-fashion-mnist is not installed (no " FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz)");
		return check_summary();
	}
	if (!check_tmpdir(tmp, sizeof tmp))
		return check_cannot_start("test_fmnist: mkdtemp: %s", strerror(errno));
	RUN(test_lenet_learns);
	fs_rm_rf(tmp, NULL);
	return check_summary();
}
