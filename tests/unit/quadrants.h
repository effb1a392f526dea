/* quadrants.h — the tiny image dataset the training and inference tests share:
 * four classes of 16x16 gray PNGs, each a bright quadrant (class k: quadrant k, in
 * row order) on a dark ground with noise, 60 a class, 25% held out for validation
 * (180 train, 60 val), built by datasets/create.c.  Seeded: the same every run.
 * QUADRANTS_NET is a small network that learns it in a few epochs, and
 * quadrants_train_opts the options of a training on it; quadrants_gray_options the
 * options that build it (and test_fmnist's small gray Fashion-MNIST).
 * Header-only for the tests; every function is static inline, so a test that uses
 * only some of them builds without warnings. */
#ifndef DD_TEST_QUADRANTS_H
#define DD_TEST_QUADRANTS_H

#include <stdio.h>
#include <stdlib.h>

#include "../../common/fsutil.h"
#include "../../datasets/create.h"
#include "../../datasets/image.h"
#include "../../networks/train.h"

/* conv 8x3x3, ReLU, max pool 2, InnerProduct, loss; val accuracy; the scale of the
 * standard networks.  Train and val stages: a deploy Softmax is the caller's to add. */
#define QUADRANTS_NET \
	"name: \"tiny\"\n" \
	"layer { name: \"train-data\" type: \"Data\" top: \"data\" top: \"label\"\n" \
	"  include { stage: \"train\" } data_param { batch_size: 16 } transform_param { scale: 0.0125 } }\n" \
	"layer { name: \"val-data\" type: \"Data\" top: \"data\" top: \"label\"\n" \
	"  include { stage: \"val\" } data_param { batch_size: 16 } transform_param { scale: 0.0125 } }\n" \
	"layer { name: \"conv1\" type: \"Convolution\" bottom: \"data\" top: \"conv1\"\n" \
	"  convolution_param { num_output: 8 kernel_size: 3 stride: 1 weight_filler { type: \"xavier\" } } }\n" \
	"layer { name: \"relu1\" type: \"ReLU\" bottom: \"conv1\" top: \"conv1\" }\n" \
	"layer { name: \"pool1\" type: \"Pooling\" bottom: \"conv1\" top: \"pool1\"\n" \
	"  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n" \
	"layer { name: \"fc\" type: \"InnerProduct\" bottom: \"pool1\" top: \"fc\"\n" \
	"  inner_product_param { weight_filler { type: \"xavier\" } } }\n" \
	"layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"fc\" bottom: \"label\" top: \"loss\"\n" \
	"  exclude { stage: \"deploy\" } }\n" \
	"layer { name: \"accuracy\" type: \"Accuracy\" bottom: \"fc\" bottom: \"label\" top: \"accuracy\"\n" \
	"  include { stage: \"val\" } }\n"

static inline int quadrants_rnd(uint64_t *s, int n)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (int)((*s >> 33) % (uint64_t)n);
}

/* o: ds_options_default's for a small gray dataset: side x side, one channel, stored
 * as PNG, val_pct% held out for validation; the caller sets the rest. */
static inline void quadrants_gray_options(struct ds_options *o, int side, int val_pct)
{
	ds_options_default(o);
	o->width = o->height = side;
	o->channels = 1;
	o->encoding = DS_ENC_PNG;
	o->val_pct = val_pct;
}

/* Write the images under TMP/src and build the dataset into dsdir (TMP/ds).  A
 * quadrant's pixels are bright + [0, 60), the rest dark + [0, 60).  0 or -1. */
static inline int quadrants_dataset(const char *tmp, int bright, int dark, char *dsdir, size_t dslen)
{
	struct dd_err err = { 0 };
	char src[512], path[768];
	uint64_t rs = 12345;
	snprintf(src, sizeof src, "%s/src", tmp);
	for (int cl = 0; cl < 4; cl++) {
		snprintf(path, sizeof path, "%s/class%d", src, cl);
		if (fs_mkdir_p(path, &err))
			return -1;
		for (int k = 0; k < 60; k++) {
			struct image im = { .w = 16, .h = 16, .c = 1, .px = malloc(256) };
			if (!im.px)
				return -1;
			for (int y = 0; y < 16; y++)
				for (int x = 0; x < 16; x++) {
					int q = (y >= 8) * 2 + (x >= 8);
					im.px[y * 16 + x] = (uint8_t)((q == cl ? bright : dark) + quadrants_rnd(&rs, 60));
				}
			uint8_t *png;
			size_t len;
			int rc = image_encode_png(&im, 1, &png, &len, &err);
			image_free(&im);
			if (rc)
				return -1;
			snprintf(path, sizeof path, "%s/class%d/%03d.png", src, cl, k);
			rc = fs_write_file_atomic(path, png, len, &err);
			free(png);
			if (rc)
				return -1;
		}
	}
	struct ds_options o;
	quadrants_gray_options(&o, 16, 25);
	struct ds_source s = { .folder = { src } };
	snprintf(dsdir, dslen, "%s/ds", tmp);
	int rc = ds_create(&s, &o, dsdir, NULL, NULL, &err);
	if (rc)
		fprintf(stderr, "ds_create: %s\n", err.msg);
	return rc;
}

/* o: train_opts_default's, then text trained on the quadrants dataset dsdir into out
 * for epochs; the caller sets the rest. */
static inline void quadrants_train_opts(struct train_opts *o, const char *dsdir, const char *text, const char *out,
					int epochs)
{
	train_opts_default(o);
	o->dataset_dir = dsdir;
	o->network_text = text;
	o->out_dir = out;
	o->epochs = epochs;
}

#endif
