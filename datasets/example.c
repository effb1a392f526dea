/* example.c — see example.h.  IDX format: a big-endian magic (0x00000803 for
 * images, 0x00000801 for labels), the dimension sizes as big-endian uint32, then
 * the bytes. */
#define _GNU_SOURCE
#include "example.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/fsutil.h"
#include "../common/rng.h"
#include "image.h"

static const char *const classes[10] = { "T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
					 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle_boot" };

int example_fashion_mnist_available(void)
{
	return access(FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0 &&
	       access(FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK) == 0;
}

/* Read a gzipped IDX file: dims[0..ndim) and the data (caller frees). */
static int read_idx(const char *path, int want_ndim, uint32_t *dims, uint8_t **data, size_t *len,
		    struct dd_err *err)
{
	gzFile f = gzopen(path, "rb");
	if (!f)
		return dd_err_set(err, DD_ENOENT, "%s: cannot open (is dataset-fashion-mnist installed?)", path);
	uint8_t head[4 + 4 * 3];
	int hl = 4 + 4 * want_ndim;
	int rc = DD_OK;
	*data = NULL;
	if (gzread(f, head, (unsigned)hl) != hl || head[0] || head[1] || head[2] != 8 || head[3] != want_ndim) {
		rc = dd_err_set(err, DD_EINVAL, "%s: not an IDX file of unsigned bytes with %d dimensions", path, want_ndim);
		goto out;
	}
	size_t n = 1;
	for (int i = 0; i < want_ndim; i++) {
		const uint8_t *p = head + 4 + 4 * i;
		dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		n *= dims[i];
	}
	if (n > (512u << 20)) {
		rc = dd_err_set(err, DD_EINVAL, "%s: implausibly large (%zu bytes)", path, n);
		goto out;
	}
	*data = malloc(n ? n : 1);
	if (!*data) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	if ((size_t)gzread(f, *data, (unsigned)n) != n) {
		rc = dd_err_set(err, DD_EINVAL, "%s: truncated", path);
		free(*data);
		*data = NULL;
		goto out;
	}
	*len = n;
out:
	gzclose(f);
	return rc;
}

static int write_split(const char *dir, const char *split, const char *images, const char *labels,
		       int64_t *done, int64_t total, int (*progress)(void *, int64_t, int64_t),
		       void *ctx, struct dd_err *err)
{
	char ip[PATH_MAX], lp[PATH_MAX];
	snprintf(ip, sizeof ip, "%s/%s", FASHION_MNIST_DIR, images);
	snprintf(lp, sizeof lp, "%s/%s", FASHION_MNIST_DIR, labels);
	uint32_t idim[3], ldim[1];
	uint8_t *px = NULL, *lb = NULL;
	size_t plen, llen;
	int rc = read_idx(ip, 3, idim, &px, &plen, err);
	if (rc == DD_OK)
		rc = read_idx(lp, 1, ldim, &lb, &llen, err);
	if (rc == DD_OK && ldim[0] != idim[0])
		rc = dd_err_set(err, DD_EINVAL, "%s and %s disagree on the count", images, labels);
	for (int c = 0; c < 10 && rc == DD_OK; c++) {
		char d[PATH_MAX];
		snprintf(d, sizeof d, "%s/%s/%s", dir, split, classes[c]);
		rc = fs_mkdir_p(d, err);
	}
	size_t img_bytes = rc == DD_OK ? (size_t)idim[1] * idim[2] : 0;
	for (uint32_t i = 0; rc == DD_OK && i < idim[0]; i++) {
		if (lb[i] > 9) {
			rc = dd_err_set(err, DD_EINVAL, "%s: label %d out of range at %u", labels, lb[i], i);
			break;
		}
		struct image img = { (int)idim[2], (int)idim[1], 1, px + (size_t)i * img_bytes };
		uint8_t *png;
		size_t len;
		if ((rc = image_encode_png(&img, 6, &png, &len, err)))
			break;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s/%s/%05u.png", dir, split, classes[lb[i]], i);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(png, 1, len, f) != len) {
			rc = dd_err_sys(err, DD_EIO, errno, "cannot write %s", path);
			if (f)
				fclose(f);
			free(png);
			break;
		}
		free(png);
		if (fclose(f) != 0) {
			rc = dd_err_sys(err, DD_EIO, errno, "cannot write %s", path);
			break;
		}
		if (++*done % 100 == 0 && progress && progress(ctx, *done, total)) {
			rc = dd_err_set(err, DD_ECONFLICT, "aborted");
			break;
		}
	}
	free(px);
	free(lb);
	return rc;
}

int example_fashion_mnist(const char *dir, int (*progress)(void *ctx, int64_t done, int64_t total),
			  void *ctx, struct dd_err *err)
{
	if (!example_fashion_mnist_available())
		return dd_err_set(err, DD_ENOENT,
				  "Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist");
	int64_t done = 0, total = 70000;
	int rc = write_split(dir, "train", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", &done,
			     total, progress, ctx, err);
	if (rc == DD_OK)
		rc = write_split(dir, "test", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", &done,
				 total, progress, ctx, err);
	if (rc == DD_OK && progress)
		progress(ctx, done, total);
	return rc;
}

int example_preview_image(struct image *out, struct dd_err *err)
{
	const int w = 400, h = 300;
	uint8_t *px = malloc((size_t)w * h * 3);
	if (!px)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			uint8_t *p = px + ((size_t)y * w + x) * 3;
			double fy = (double)y / h;
			/* sky: deep blue to pale at the horizon */
			int r = (int)(60 + 150 * fy), g = (int)(120 + 110 * fy), b = (int)(220 + 30 * fy);
			/* sun */
			double dx = x - 300.0, dy = y - 70.0;
			if (dx * dx + dy * dy < 35 * 35)
				r = 255, g = 214, b = 90;
			/* two hills */
			double hill1 = 210 - 50 * sin((x + 40) / 70.0), hill2 = 240 - 30 * sin((x - 120) / 45.0);
			if (y > hill1)
				r = 70, g = 150 - (y - (int)hill1) / 4, b = 60;
			if (y > hill2)
				r = 40, g = 115 - (y - (int)hill2) / 5, b = 45;
			/* a house: red roof over a cream wall */
			if (x >= 90 && x < 160 && y >= 170 && y < 225)
				r = 235, g = 225, b = 200;
			if (y >= 135 && y < 170 && x >= 80 + (y - 135) * 0 && abs(x - 125) <= (y - 135))
				r = 190, g = 50, b = 45;
			if (x >= 115 && x < 135 && y >= 195 && y < 225)
				r = 110, g = 70, b = 40;
			p[0] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
			p[1] = (uint8_t)(g < 0 ? 0 : g > 255 ? 255 : g);
			p[2] = (uint8_t)(b < 0 ? 0 : b > 255 ? 255 : b);
		}
	*out = (struct image){ w, h, 3, px };
	return DD_OK;
}

/* ---- the synthetic segmentation example ----
 *
 * Each image: a background of two blended noise fields (a coarse one, bilinear
 * from a small grid, and fine per-pixel grain) with diagonal stripes at a random
 * angle, so that a flat colour does not say "background"; then 1 to 4 shapes
 * (a circle, a square, a triangle), each filled with its own colour plus grain,
 * later shapes over earlier ones.  The label holds each pixel's class: what the
 * last shape covering it was, else background.  Everything comes from one
 * splitmix64 stream seeded with `seed`, so a seed gives the same files. */

static const char *const seg_names[EXAMPLE_SEG_CLASSES] = { "background", "circle", "square", "triangle" };
static const uint8_t seg_palette[3 * EXAMPLE_SEG_CLASSES] = { 0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0 };

static double unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Does (x, y) fall inside shape k (1 circle, 2 square, 3 triangle) centred at
 * cx, cy with radius r and angle a? */
static int inside(int k, double x, double y, double cx, double cy, double r, double a)
{
	double dx = x - cx, dy = y - cy;
	double u = dx * cos(a) + dy * sin(a), v = -dx * sin(a) + dy * cos(a);
	if (k == 1)
		return dx * dx + dy * dy <= r * r;
	if (k == 2)
		return fabs(u) <= r * 0.8 && fabs(v) <= r * 0.8;
	/* an equilateral triangle, apex up in its own frame: three half-planes */
	for (int e = 0; e < 3; e++) {
		double t = a + e * 2.0943951023931953 + 1.5707963267948966;
		if (dx * cos(t) + dy * sin(t) > r * 0.5)
			return 0;
	}
	return 1;
}

static void draw_one(uint64_t *s, int w, int h, uint8_t *rgb, uint8_t *cls)
{
	uint8_t grid[5][5][3];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++)
			for (int c = 0; c < 3; c++)
				grid[i][j][c] = (uint8_t)(40 + rng_below(s, 176));
	double ang = unit(s) * 3.14159265, period = 6 + unit(s) * 18, amp = 10 + unit(s) * 30;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			double gx = (double)x / w * 4, gy = (double)y / h * 4;
			int ix = (int)gx, iy = (int)gy;
			double fx = gx - ix, fy = gy - iy;
			double stripe = amp * sin((x * cos(ang) + y * sin(ang)) * 6.2831853 / period);
			for (int c = 0; c < 3; c++) {
				double v = (1 - fx) * (1 - fy) * grid[iy][ix][c] + fx * (1 - fy) * grid[iy][ix + 1][c] +
					   (1 - fx) * fy * grid[iy + 1][ix][c] + fx * fy * grid[iy + 1][ix + 1][c];
				v += stripe + (double)rng_below(s, 41) - 20;
				rgb[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
			cls[(size_t)y * w + x] = 0;
		}
	int nshapes = 1 + (int)rng_below(s, 4), side = w < h ? w : h;
	for (int k = 0; k < nshapes; k++) {
		int kind = 1 + (int)rng_below(s, 3);
		double r = side * (0.08 + unit(s) * 0.14);
		double cx = r + unit(s) * (w - 2 * r), cy = r + unit(s) * (h - 2 * r), a = unit(s) * 6.2831853;
		uint8_t col[3];
		for (int c = 0; c < 3; c++)
			col[c] = (uint8_t)rng_below(s, 256);
		int x0 = (int)(cx - r - 1), x1 = (int)(cx + r + 1), y0 = (int)(cy - r - 1), y1 = (int)(cy + r + 1);
		for (int y = y0 < 0 ? 0 : y0; y <= y1 && y < h; y++)
			for (int x = x0 < 0 ? 0 : x0; x <= x1 && x < w; x++) {
				if (!inside(kind, x + 0.5, y + 0.5, cx, cy, r, a))
					continue;
				for (int c = 0; c < 3; c++) {
					int v = col[c] + (int)rng_below(s, 31) - 15;
					rgb[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
				}
				cls[(size_t)y * w + x] = (uint8_t)kind;
			}
	}
}

int example_segmentation(const char *dir, int count, int w, int h, uint64_t seed,
			 int (*progress)(void *ctx, int64_t done, int64_t total), void *ctx, struct dd_err *err)
{
	if (count < 1 || count > 100000 || w < 8 || h < 8 || w > 4096 || h > 4096)
		return dd_err_set(err, DD_EINVAL, "the example needs 1 to 100000 images of 8x8 to 4096x4096 pixels");
	char p[PATH_MAX];
	int rc;
	snprintf(p, sizeof p, "%s/images", dir);
	if ((rc = fs_mkdir_p(p, err)))
		return rc;
	snprintf(p, sizeof p, "%s/labels", dir);
	if ((rc = fs_mkdir_p(p, err)))
		return rc;
	char names[128] = "";
	for (int k = 0; k < EXAMPLE_SEG_CLASSES; k++)
		snprintf(names + strlen(names), sizeof names - strlen(names), "%s\n", seg_names[k]);
	snprintf(p, sizeof p, "%s/labels.txt", dir);
	if ((rc = fs_write_file_atomic(p, names, strlen(names), err)))
		return rc;
	struct image img = { 0 }, lab = { 0 };
	img.w = lab.w = w, img.h = lab.h = h, img.c = 3, lab.c = 1;
	img.px = malloc((size_t)w * h * 3);
	lab.px = malloc((size_t)w * h);
	if (!img.px || !lab.px) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	uint64_t s = seed ^ 0x5e6e7a11ull;
	for (int i = 0; i < count && rc == DD_OK; i++) {
		draw_one(&s, w, h, img.px, lab.px);
		uint8_t *buf = NULL;
		size_t len = 0;
		if ((rc = image_encode_png(&img, 6, &buf, &len, err)))
			break;
		snprintf(p, sizeof p, "%s/images/%05d.png", dir, i);
		rc = fs_write_file_atomic(p, buf, len, err);
		free(buf);
		buf = NULL;
		if (rc == DD_OK)
			rc = image_encode_png_palette(&lab, seg_palette, EXAMPLE_SEG_CLASSES, &buf, &len, err);
		if (rc == DD_OK) {
			snprintf(p, sizeof p, "%s/labels/%05d.png", dir, i);
			rc = fs_write_file_atomic(p, buf, len, err);
		}
		free(buf);
		if (rc == DD_OK && progress && (i + 1) % 20 == 0 && progress(ctx, i + 1, count))
			rc = dd_err_set(err, DD_ECONFLICT, "aborted");
	}
out:
	image_free(&img);
	image_free(&lab);
	return rc;
}
