/* test_insides.c — networks/infer.h's "inside the network" helpers on numbers
 * worked out by hand: infer_stats (mean, std, min, max, every value in one of the
 * 20 bins, max in the last), and infer_tile (the grid, enlargement of small planes,
 * the 1024-pixel bound with only the planes that fit, the normalisation to 0..255,
 * BGR planes drawn as RGB, the colour map). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../datasets/image.h"
#include "../../networks/infer.h"
#include "check.h"

static void test_stats(void)
{
	float v[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct infer_stats s;
	infer_stats(v, 10, &s);
	CHECK(fabs(s.mean - 5.5) < 1e-9);
	CHECK(fabs(s.std - sqrt(8.25)) < 1e-6); /* population: E[x^2] - mean^2 = 38.5 - 30.25 */
	CHECK(s.min == 1 && s.max == 10);
	int64_t total = 0;
	for (int i = 0; i < INFER_HIST_BINS; i++)
		total += s.hist[i];
	CHECK_EQ_INT(total, 10);
	CHECK_EQ_INT(s.hist[0], 1);                   /* 1 in [1, 1.45) */
	CHECK_EQ_INT(s.hist[INFER_HIST_BINS - 1], 1); /* 10, the max, in the last bin */
	/* all equal: one bin, no division by zero */
	float same[4] = { 2, 2, 2, 2 };
	infer_stats(same, 4, &s);
	CHECK(s.std == 0 && s.min == 2 && s.max == 2);
	CHECK_EQ_INT(s.hist[0], 4);
}

static void test_tile_grid(void)
{
	/* 5 planes of 4×4, values 0..79: a 3×2 grid of tiles enlarged 8x to 32 px */
	float v[5 * 16];
	for (int i = 0; i < 80; i++)
		v[i] = (float)i;
	struct image im;
	int shown = 0;
	CHECK_EQ_INT(infer_tile(v, 5, 4, 4, INFER_TILE_GRAY, 1024, &im, &shown, NULL), DD_OK);
	CHECK_EQ_INT(shown, 5);
	CHECK_EQ_INT(im.c, 1);
	CHECK_EQ_INT(im.w, 3 * 33 - 1);
	CHECK_EQ_INT(im.h, 2 * 33 - 1);
	CHECK_EQ_INT(im.px[0], 0);                          /* plane 0's first value: the min */
	CHECK_EQ_INT(im.px[(size_t)(33 + 31) * im.w + 33 + 31], 255); /* plane 4's last: the max */
	CHECK_EQ_INT(im.px[32], 0);                         /* a gap column */
	image_free(&im);
}

static void test_tile_bound(void)
{
	/* 10000 planes of 10×10: at most 93×93 of 11-px cells in 1024 px, so the image
	 * stays within the bound and says how many it drew */
	int n = 10000;
	float *v = calloc((size_t)n * 100, sizeof *v);
	CHECK(v != NULL);
	if (!v)
		return;
	v[5] = 1;
	struct image im;
	int shown = 0;
	CHECK_EQ_INT(infer_tile(v, n, 10, 10, INFER_TILE_GRAY, 1024, &im, &shown, NULL), DD_OK);
	CHECK(im.w <= 1024 && im.h <= 1024);
	CHECK(shown > 0 && shown < n);
	CHECK_EQ_INT(shown, (im.w + 1) / 11 * ((im.h + 1) / 11));
	image_free(&im);
	/* one plane bigger than the bound: sampled down */
	float *big = calloc(3000 * 2000, sizeof *big);
	CHECK(big != NULL);
	if (big) {
		CHECK_EQ_INT(infer_tile(big, 1, 2000, 3000, INFER_TILE_COLOURMAP, 1024, &im, &shown, NULL), DD_OK);
		CHECK_EQ_INT(im.w, 1024);
		CHECK_EQ_INT(im.h, 682);
		CHECK_EQ_INT(im.c, 3);
		image_free(&im);
	}
	free(big);
	free(v);
}

static void test_tile_bgr(void)
{
	/* one 1×1 pixel, planes B=0 G=5 R=10: drawn as R,G,B = 255, 128, 0 */
	float v[3] = { 0, 5, 10 };
	struct image im;
	CHECK_EQ_INT(infer_tile(v, 1, 1, 1, INFER_TILE_BGR, 64, &im, NULL, NULL), DD_OK);
	CHECK_EQ_INT(im.c, 3);
	CHECK_EQ_INT(im.px[0], 255);
	CHECK_EQ_INT(im.px[1], 128);
	CHECK_EQ_INT(im.px[2], 0);
	image_free(&im);
	/* the colour map: low is dark, high is bright */
	float ramp[2] = { 0, 1 };
	CHECK_EQ_INT(infer_tile(ramp, 1, 1, 2, INFER_TILE_COLOURMAP, 64, &im, NULL, NULL), DD_OK);
	int lo = im.px[0] + im.px[1] + im.px[2];
	int hi = im.px[(size_t)im.w * 3 - 3] + im.px[(size_t)im.w * 3 - 2] + im.px[(size_t)im.w * 3 - 1];
	CHECK(lo < 200 && hi > 500);
	image_free(&im);
	CHECK(infer_tile(v, 0, 1, 1, INFER_TILE_GRAY, 64, &im, NULL, NULL) != DD_OK);
}

int main(void)
{
	RUN(test_stats);
	RUN(test_tile_grid);
	RUN(test_tile_bound);
	RUN(test_tile_bgr);
	return check_summary();
}
