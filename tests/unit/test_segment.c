/* test_segment.c — the segmentation dataset: each label mode, the colour map and
 * its bad lines, every skip reason named, nearest-neighbour label resizing, the
 * features' and labels' keys, determinism for a seed, and the synthetic example
 * at a realistic size (640x480). */
#define _GNU_SOURCE
#include <limits.h>
#include <lmdb.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/rng.h"
#include "../../datasets/datum.h"
#include "../../datasets/dsinfo.h"
#include "../../datasets/example.h"
#include "../../datasets/image.h"
#include "../../datasets/lmdbio.h"
#include "../../datasets/segment.h"
#include "fixture.h"

/* A case: its input (a colour map's text, a pair's path) and what the message
 * about it must contain. */
struct case_msg {
	const char *in, *want;
};

static char dir[64];

static const uint8_t pal4[12] = { 0, 0, 0, 200, 0, 0, 0, 200, 0, 0, 0, 200 };

static void put(const char *path, const uint8_t *buf, size_t len)
{
	char d[PATH_MAX];
	snprintf(d, sizeof d, "%s", path);
	*strrchr(d, '/') = 0;
	fs_mkdir_p(d, NULL);
	fs_write_file_atomic(path, buf, len, NULL);
}

/* an image w x h, c channels, whose pixel (x, y) is f(x, y) */
static void write_img(const char *path, int w, int h, int c, int palette, uint8_t (*f)(int x, int y, int ch))
{
	struct image img = { w, h, c, malloc((size_t)w * h * c) };
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int k = 0; k < c; k++)
				img.px[((size_t)y * w + x) * c + k] = f(x, y, k);
	uint8_t *buf;
	size_t len;
	if (palette)
		image_encode_png_palette(&img, pal4, 4, &buf, &len, NULL);
	else
		image_encode_png(&img, 1, &buf, &len, NULL);
	put(path, buf, len);
	free(buf);
	free(img.px);
}

/* an RGBA PNG (a label of the wrong mode), written with libpng directly */
static void write_rgba(const char *path, int w, int h)
{
	FILE *f = fopen(path, "wb");
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	png_init_io(png, f);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB_ALPHA, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	uint8_t *row = calloc((size_t)w, 4);
	for (int y = 0; y < h; y++)
		png_write_row(png, row);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	fclose(f);
	free(row);
}

/* A 1-channel PNG of `depth` bits (gray, or palette with 16 colours) whose
 * samples are v[y*w+x], written with libpng directly (a palette of 2^depth
 * colours, at most 16). */
static void write_raw(const char *path, int w, int h, int depth, int palette, const uint16_t *v)
{
	FILE *f = fopen(path, "wb");
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	png_init_io(png, f);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, palette ? PNG_COLOR_TYPE_PALETTE : PNG_COLOR_TYPE_GRAY,
		     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	if (palette) {
		png_color pal[16];
		int n = depth >= 4 ? 16 : 1 << depth;
		for (int i = 0; i < n; i++)
			pal[i] = (png_color){ (png_byte)(i * 16), 0, 0 };
		png_set_PLTE(png, info, pal, n);
	}
	png_write_info(png, info);
	if (depth < 8)
		png_set_packing(png);
	uint8_t *row = calloc((size_t)w, 2);
	for (int y = 0; y < h; y++) {
		for (int x = 0; x < w; x++) {
			uint16_t s = v[y * w + x];
			if (depth == 16)
				row[2 * x] = (uint8_t)(s >> 8), row[2 * x + 1] = (uint8_t)s;
			else
				row[x] = (uint8_t)s;
		}
		png_write_row(png, row);
	}
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	fclose(f);
	free(row);
}

/* Low and high bit depths: the samples as stored, never scaled. */
static void test_label_depths(void)
{
	static const struct {
		int depth, palette;
		uint16_t max;
		int ok;
	} cases[] = { { 1, 0, 1, 1 }, { 2, 0, 3, 1 }, { 4, 0, 15, 1 }, { 16, 0, 255, 1 }, { 16, 0, 256, 0 },
		      { 4, 1, 15, 1 }, { 2, 1, 3, 1 } };
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/depth.png", dir);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint16_t v[6 * 5];
		for (int k = 0; k < 30; k++)
			v[k] = (uint16_t)(k % (cases[i].max + 1));
		v[29] = cases[i].max;
		write_raw(p, 6, 5, cases[i].depth, cases[i].palette, v);
		char *data;
		size_t len;
		CHECK_EQ_INT(fs_read_file(p, 1 << 20, &data, &len, NULL), DD_OK);
		struct image lab;
		enum image_label_kind kind;
		uint8_t pal[768];
		int npal;
		struct dd_err e = { 0 };
		int rc = image_decode_label(data, len, "depth.png", 0, &lab, &kind, pal, &npal, &e);
		free(data);
		if (!cases[i].ok) {
			CHECK_EQ_INT(rc, DD_EINVAL);
			CHECK(strstr(e.msg, "16-bit grayscale value 256 at (5, 4) is not a class index"));
			continue;
		}
		CHECK_EQ_INT(rc, DD_OK);
		CHECK_EQ_INT(kind, cases[i].palette ? IMAGE_LABEL_PALETTE : IMAGE_LABEL_GRAY);
		CHECK_EQ_INT(npal, !cases[i].palette ? 0 : cases[i].depth >= 4 ? 16 : 1 << cases[i].depth);
		int same = lab.c == 1;
		for (int k = 0; k < 30 && same; k++)
			same = lab.px[k] == v[k];
		if (!same)
			CHECK_FAIL_AT(__FILE__, __LINE__, "case %zu (depth %d): samples changed", i, cases[i].depth);
		image_free(&lab);
	}
	/* not a PNG at all */
	struct image lab;
	enum image_label_kind kind;
	uint8_t pal[768];
	int npal;
	struct dd_err e = { 0 };
	CHECK_EQ_INT(image_decode_label("P5\n1 1\n255\n\0", 12, "x.pgm", 0, &lab, &kind, pal, &npal, &e), DD_EINVAL);
	CHECK(strstr(e.msg, "x.pgm: a label must be a PNG"));
}

/* the left half class 1, the right half class 2, the top-left 4x4 corner 255 */
static uint8_t halves(int x, int y, int ch)
{
	(void)ch;
	return x < 4 && y < 4 ? 255 : x < 16 ? 1 : 2;
}
static uint8_t halves_pal(int x, int y, int ch)
{
	(void)ch, (void)y;
	return x < 16 ? 1 : 2;
}
static uint8_t halves_rgb(int x, int y, int ch)
{
	(void)y;
	return x < 16 ? (ch == 0 ? 200 : 0) : (ch == 1 ? 200 : 0);
}
static uint8_t photo(int x, int y, int ch) { return (uint8_t)(x * 7 + y * 3 + ch * 50); }
static uint8_t gray5(int x, int y, int ch) { (void)ch; return x == 3 && y == 3 ? 5 : 1; }
static uint8_t unmapped(int x, int y, int ch) { (void)ch; return x == 2 && y == 1 ? 77 : 0; }

struct out {
	cJSON *sum;
	int rc;
	struct dd_err err;
};

static struct out build(const char *src, const char *out, const char *cmap_text, int w, int h, int val_pct)
{
	struct ds_options o;
	ds_options_default(&o);
	o.width = w, o.height = h, o.val_pct = val_pct, o.threads = 2, o.seed = 7;
	struct seg_source s = { .root = src, .colormap_text = cmap_text };
	struct out r = { 0 };
	r.rc = seg_create(&s, &o, out, NULL, &r.sum, &r.err);
	if (r.rc)
		fprintf(stderr, "  seg_create: %s\n", r.err.msg);
	return r;
}

/* The labels of record i of DIR/<split>_labels_db into buf (w*h bytes). */
static int read_label(const char *out, const char *split, int64_t i, uint8_t *buf, size_t n)
{
	char p[PATH_MAX];
	dsinfo_labels_db_path(out, split, p, sizeof p);
	struct lmdbr *r;
	if (lmdbr_open(p, &r, NULL))
		return -1;
	const uint8_t *v;
	size_t len;
	struct datum d;
	int rc = -1;
	if (lmdbr_get(r, i, &v, &len, NULL, NULL) == DD_OK && datum_decode(v, len, &d, NULL) == DD_OK) {
		if (d.channels == 1 && !d.encoded && d.data_len == n) {
			memcpy(buf, d.data, n);
			rc = 0;
		}
		datum_free(&d);
	}
	lmdbr_close(r);
	return rc;
}

static const char *reason_for(const cJSON *sum, const char *path)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(sum, "skipped"))
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(it, "path")), path) == 0)
			return cJSON_GetStringValue(cJSON_GetObjectItem(it, "reason"));
	return NULL;
}

static void test_colormap(void)
{
	uint8_t rgb[3 * SEG_MAX_CLASSES];
	int n;
	struct dd_err e = { 0 };
	CHECK_EQ_INT(seg_colormap_parse("0 0 0\n255,0,0\r\n  0 , 255 ,\t0  \n# a comment\n\n1 2 3", "map.txt", rgb, &n, &e),
		     DD_OK);
	CHECK_EQ_INT(n, 4);
	CHECK(rgb[3] == 255 && rgb[4] == 0 && rgb[7] == 255 && rgb[9] == 1 && rgb[11] == 3);
	static const struct case_msg bad[] = {
		{ "0 0 0\n1 2\n", "map.txt line 2: expected three numbers 0 to 255" },
		{ "0 0 0\n\n1 2 256\n", "map.txt line 3: expected three numbers" },
		{ "red green blue\n", "map.txt line 1: expected three numbers" },
		{ "1 2 3 4\n", "map.txt line 1: expected three numbers" },
		{ "1 2 -3\n", "map.txt line 1:" },
		{ "9 9 9\n1 1 1\n9,9,9\n", "map.txt line 3: colour 9 9 9 is class 0 already" },
		{ "# only a comment\n", "map.txt: no \"R G B\" line" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		e = (struct dd_err){ 0 };
		CHECK_EQ_INT(seg_colormap_parse(bad[i].in, "map.txt", rgb, &n, &e), DD_EINVAL);
		if (!strstr(e.msg, bad[i].want))
			CHECK_FAIL_AT(__FILE__, __LINE__, "case %zu: \"%s\" lacks \"%s\"", i, e.msg, bad[i].want);
	}
}

/* The same picture as a palette, a grayscale and an RGB (with a map) label gives
 * the same class indices; 255 stays the ignore value. */
static void test_label_modes(void)
{
	static const char *const modes[] = { "palette", "gray", "rgb" };
	uint8_t want[32 * 32], got[32 * 32];
	for (int m = 0; m < 3; m++) {
		char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX];
		snprintf(src, sizeof src, "%s/modes_%s", dir, modes[m]);
		snprintf(out, sizeof out, "%s/modes_%s_out", dir, modes[m]);
		for (int i = 0; i < 3; i++) {
			snprintf(p, sizeof p, "%s/images/p%d.png", src, i);
			write_img(p, 32, 32, 3, 0, photo);
			snprintf(p, sizeof p, "%s/labels/p%d.png", src, i);
			write_img(p, 32, 32, m == 2 ? 3 : 1, m == 0, m == 0 ? halves_pal : m == 1 ? halves : halves_rgb);
		}
		struct out r = build(src, out, m == 2 ? "0 0 0\n200 0 0\n0 200 0\n" : NULL, 32, 32, 0);
		CHECK_EQ_INT(r.rc, DD_OK);
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(r.sum, "task")), "segmentation");
		CHECK_EQ_INT(cJSON_GetObjectItem(r.sum, "classes")->valueint, 3);
		CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.sum, "skipped")), 0);
		const char *mode = cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(r.sum, "label_modes"), 0));
		CHECK_STR(mode, m == 0 ? "palette" : m == 1 ? "grayscale" : "rgb");
		/* the palette: the label's own, or the colour map */
		cJSON *c1 = cJSON_GetArrayItem(cJSON_GetObjectItem(r.sum, "palette"), 1);
		if (m != 1)
			CHECK(cJSON_GetArrayItem(c1, 0)->valueint == 200 && cJSON_GetArrayItem(c1, 1)->valueint == 0);
		CHECK_EQ_INT(read_label(out, "train", 0, got, sizeof got), 0);
		for (int y = 0; y < 32; y++)
			for (int x = 0; x < 32; x++)
				want[y * 32 + x] = m == 1 ? halves(x, y, 0) : halves_pal(x, y, 0);
		CHECK(memcmp(got, want, sizeof got) == 0);
		cJSON *info = NULL;
		CHECK_EQ_INT(dsinfo_read(out, &info, NULL), DD_OK);
		CHECK_EQ_INT(dsinfo_task(info), DSINFO_SEGMENTATION);
		cJSON_Delete(info);
		cJSON_Delete(r.sum);
	}
	/* a classification dataset.json (no task) is classification */
	cJSON *old = cJSON_Parse("{\"options\":{}}"), *odd = cJSON_Parse("{\"task\":\"poetry\"}");
	CHECK_EQ_INT(dsinfo_task(old), DSINFO_CLASSIFICATION);
	CHECK_EQ_INT(dsinfo_task(odd), -1);
	cJSON_Delete(old);
	cJSON_Delete(odd);
}

/* Every reason a pair is skipped, each named, and the rest of the dataset made. */
static void test_skips(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX];
	snprintf(src, sizeof src, "%s/skips", dir);
	snprintf(out, sizeof out, "%s/skips_out", dir);
#define IMG(name, w, h) (snprintf(p, sizeof p, "%s/images/%s", src, name), write_img(p, w, h, 3, 0, photo))
#define LAB(name, w, h, c, pal, f) (snprintf(p, sizeof p, "%s/labels/%s", src, name), write_img(p, w, h, c, pal, f))
	for (int i = 0; i < 4; i++) {
		char n[32];
		snprintf(n, sizeof n, "good%d.png", i);
		IMG(n, 32, 32);
		LAB(n, 32, 32, 1, 1, halves_pal);
	}
	IMG("nolabel.png", 32, 32);
	LAB("noimage.png", 32, 32, 1, 1, halves_pal);
	IMG("size.png", 32, 32);
	LAB("size.png", 31, 32, 1, 1, halves_pal);
	IMG("alpha.png", 8, 8);
	snprintf(p, sizeof p, "%s/labels/alpha.png", src);
	write_rgba(p, 8, 8);
	IMG("rgb.png", 8, 8);
	LAB("rgb.png", 8, 8, 3, 0, unmapped); /* RGB, and no colour map */
	IMG("past.png", 8, 8);
	LAB("past.png", 8, 8, 1, 0, gray5); /* value 5, and labels.txt names 3 classes */
	snprintf(p, sizeof p, "%s/images/notes.txt", src);
	put(p, (const uint8_t *)"hello", 5);
	snprintf(p, sizeof p, "%s/labels.txt", src);
	put(p, (const uint8_t *)"background\nleft\nright\n", 22);
	struct out r = build(src, out, NULL, 16, 16, 0);
	CHECK_EQ_INT(r.rc, DD_OK);
	static const struct case_msg why[] = {
		{ "images/nolabel.png", "an image with no label" },
		{ "labels/noimage.png", "a label with no image" },
		{ "images/size.png", "its label size.png is 31x32 but the image is 32x32" },
		{ "images/alpha.png", "must be palette, grayscale or RGB, and this one is RGBA" },
		{ "images/rgb.png", "an RGB label needs a colour map" },
		{ "images/past.png", "class value 5 at (3, 3) is past the last class (3 classes" },
		{ "images/notes.txt", "not an image file name" },
	};
	for (size_t i = 0; i < sizeof why / sizeof *why; i++) {
		const char *got = reason_for(r.sum, why[i].in);
		if (!got || !strstr(got, why[i].want))
			CHECK_FAIL_AT(__FILE__, __LINE__, "%s: reason \"%s\" lacks \"%s\"", why[i].in, got ? got : "(not skipped)",
				      why[i].want);
	}
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.sum, "skipped")), 7);
	cJSON *train = cJSON_GetObjectItem(cJSON_GetObjectItem(r.sum, "splits"), "train");
	CHECK_EQ_INT(cJSON_GetObjectItem(train, "images")->valueint, 4);
	cJSON *labels = cJSON_GetObjectItem(r.sum, "labels");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(labels, 2)), "right");
	cJSON_Delete(r.sum);

	/* an RGB colour not in the map */
	snprintf(p, sizeof p, "%s/labels.txt", src);
	unlink(p);
	r = build(src, out, "0 0 0\n200 0 0\n0 200 0\n0 0 200\n", 16, 16, 0);
	CHECK_EQ_INT(r.rc, DD_OK);
	const char *got = reason_for(r.sum, "images/rgb.png");
	CHECK(got && strstr(got, "colour 77 77 77 at (2, 1) is not in the colour map"));
	/* palette labels with a map: their colours say the class, so they pass */
	CHECK(!reason_for(r.sum, "images/good0.png"));
	cJSON_Delete(r.sum);
	/* a bad map refuses the dataset, naming the line */
	r = build(src, out, "0 0 0\n1 2\n", 16, 16, 0);
	CHECK_EQ_INT(r.rc, DD_EINVAL);
	CHECK(strstr(r.err.msg, "colormap line 2"));
	CHECK(access(out, F_OK) != 0 || !dsinfo_ready(out));
#undef IMG
#undef LAB
}

static void test_nearest(void)
{
	struct image lab = { 37, 23, 1, malloc(37 * 23) };
	static const uint8_t vals[] = { 0, 1, 2, 255 };
	uint64_t s = 1;
	for (int i = 0; i < 37 * 23; i++)
		lab.px[i] = vals[rng_below(&s, 4)];
	static const enum resize_mode modes[] = { RESIZE_SQUASH, RESIZE_CROP, RESIZE_FILL, RESIZE_HALF_CROP };
	static const int sizes[][2] = { { 64, 64 }, { 16, 16 }, { 37, 50 }, { 100, 7 } };
	for (int m = 0; m < 4; m++)
		for (int k = 0; k < 4; k++) {
			struct image out;
			CHECK_EQ_INT(image_resize_nearest(&lab, sizes[k][0], sizes[k][1], modes[m], 0, &out, NULL), DD_OK);
			for (int i = 0; i < out.w * out.h; i++)
				if (out.px[i] != 0 && out.px[i] != 1 && out.px[i] != 2 && out.px[i] != 255) {
					CHECK_FAIL_AT(__FILE__, __LINE__, "mode %d size %d: value %d", m, k, out.px[i]);
					break;
				}
			image_free(&out);
		}
	/* twice the size, squashed: each source pixel becomes a 2x2 block */
	struct image big;
	CHECK_EQ_INT(image_resize_nearest(&lab, 74, 46, RESIZE_SQUASH, 0, &big, NULL), DD_OK);
	int same = 1;
	for (int y = 0; y < 46; y++)
		for (int x = 0; x < 74; x++)
			same &= big.px[y * 74 + x] == lab.px[(y / 2) * 37 + x / 2];
	CHECK(same);
	image_free(&big);
	/* fill pads where the image gets noise: with the pad value */
	struct image pad;
	CHECK_EQ_INT(image_resize_nearest(&lab, 37, 37, RESIZE_FILL, 0, &pad, NULL), DD_OK);
	CHECK(pad.px[0] == 0 && pad.px[36 * 37 + 36] == 0);
	image_free(&pad);
	free(lab.px);
}

/* The keys of every features database and its labels database, in order. */
static int keys_match(const char *a, const char *b, int64_t *n)
{
	MDB_env *env[2];
	MDB_txn *txn[2];
	MDB_dbi dbi[2];
	MDB_cursor *cur[2];
	const char *dirs[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		mdb_env_create(&env[i]);
		if (mdb_env_open(env[i], dirs[i], MDB_RDONLY | MDB_NOLOCK, 0600))
			return 0;
		mdb_txn_begin(env[i], NULL, MDB_RDONLY, &txn[i]);
		mdb_dbi_open(txn[i], NULL, 0, &dbi[i]);
		mdb_cursor_open(txn[i], dbi[i], &cur[i]);
	}
	MDB_val k[2], v[2];
	int ok = 1, ra, rb;
	*n = 0;
	for (;;) {
		ra = mdb_cursor_get(cur[0], &k[0], &v[0], MDB_NEXT);
		rb = mdb_cursor_get(cur[1], &k[1], &v[1], MDB_NEXT);
		if (ra || rb) {
			ok &= ra == rb;
			break;
		}
		ok &= k[0].mv_size == k[1].mv_size && memcmp(k[0].mv_data, k[1].mv_data, k[0].mv_size) == 0;
		(*n)++;
	}
	for (int i = 0; i < 2; i++) {
		mdb_cursor_close(cur[i]);
		mdb_txn_abort(txn[i]);
		mdb_env_close(env[i]);
	}
	return ok;
}

static int same_file(const char *a, const char *b)
{
	char *x = NULL, *y = NULL;
	size_t nx = 0, ny = 0;
	int same = fs_read_file(a, 1u << 26, &x, &nx, NULL) == DD_OK && fs_read_file(b, 1u << 26, &y, &ny, NULL) == DD_OK &&
		   nx == ny && memcmp(x, y, nx) == 0;
	free(x);
	free(y);
	return same;
}

/* The example at 640x480, built into a dataset at 320x240 twice with the same
 * seed (the same records) and once with another (another split). */
static void test_example_realistic(void)
{
	char ex[PATH_MAX], ex2[PATH_MAX], ex3[PATH_MAX], a[PATH_MAX], b[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	snprintf(ex, sizeof ex, "%s/ex", dir);
	snprintf(ex2, sizeof ex2, "%s/ex2", dir);
	snprintf(ex3, sizeof ex3, "%s/ex3", dir);
	CHECK_EQ_INT(example_segmentation(ex, 12, 640, 480, 5, NULL, NULL, NULL), DD_OK);
	CHECK_EQ_INT(example_segmentation(ex2, 12, 640, 480, 5, NULL, NULL, NULL), DD_OK);
	CHECK_EQ_INT(example_segmentation(ex3, 2, 640, 480, 6, NULL, NULL, NULL), DD_OK);
	int same = 1;
	for (int i = 0; i < 12; i++) {
		snprintf(p, sizeof p, "%s/images/%05d.png", ex, i);
		snprintf(q, sizeof q, "%s/images/%05d.png", ex2, i);
		same &= same_file(p, q);
		snprintf(p, sizeof p, "%s/labels/%05d.png", ex, i);
		snprintf(q, sizeof q, "%s/labels/%05d.png", ex2, i);
		same &= same_file(p, q);
	}
	CHECK(same);
	snprintf(p, sizeof p, "%s/labels/00000.png", ex);
	snprintf(q, sizeof q, "%s/labels/00000.png", ex3);
	CHECK(!same_file(p, q));

	snprintf(a, sizeof a, "%s/ex_a", dir);
	snprintf(b, sizeof b, "%s/ex_b", dir);
	struct out r = build(ex, a, NULL, 320, 240, 25);
	struct out r2 = build(ex, b, NULL, 320, 240, 25);
	CHECK_EQ_INT(r.rc, DD_OK);
	CHECK_EQ_INT(r2.rc, DD_OK);
	CHECK_EQ_INT(cJSON_GetObjectItem(r.sum, "classes")->valueint, 4);
	cJSON *sp = cJSON_GetObjectItem(r.sum, "splits");
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "train"), "images")->valueint, 9);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "val"), "images")->valueint, 3);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(r.sum, "labels"), 3)), "triangle");
	/* the train images' mean, at the dataset's size */
	char mp[PATH_MAX], *mdata = NULL;
	size_t mlen = 0;
	struct blob mb = { 0 };
	dsinfo_path(a, DSINFO_MEAN, mp, sizeof mp);
	CHECK_EQ_INT(fs_read_file(mp, 1 << 24, &mdata, &mlen, NULL), DD_OK);
	CHECK_EQ_INT(blob_decode((const uint8_t *)mdata, mlen, &mb, NULL), DD_OK);
	CHECK(mb.channels == 3 && mb.height == 240 && mb.width == 320);
	blob_free(&mb);
	free(mdata);
	static const char *const splits[] = { "train", "val" };
	for (int s = 0; s < 2; s++) {
		char fa[PATH_MAX], la[PATH_MAX], fb[PATH_MAX];
		dsinfo_db_path(a, splits[s], fa, sizeof fa);
		dsinfo_labels_db_path(a, splits[s], la, sizeof la);
		dsinfo_db_path(b, splits[s], fb, sizeof fb);
		int64_t n = 0;
		CHECK(keys_match(fa, la, &n));
		CHECK_EQ_INT(n, s ? 3 : 9);
		/* the same seed, the same records */
		struct lmdbr *ra, *rb;
		CHECK_EQ_INT(lmdbr_open(fa, &ra, NULL), DD_OK);
		CHECK_EQ_INT(lmdbr_open(fb, &rb, NULL), DD_OK);
		for (int64_t i = 0; i < n; i++) {
			const uint8_t *va, *vb;
			size_t na, nb;
			lmdbr_get(ra, i, &va, &na, NULL, NULL);
			lmdbr_get(rb, i, &vb, &nb, NULL, NULL);
			CHECK(na == nb && memcmp(va, vb, na) == 0);
		}
		lmdbr_close(ra);
		lmdbr_close(rb);
		/* labels hold only the classes, at the dataset's size */
		uint8_t *lab = malloc(320 * 240);
		for (int64_t i = 0; i < n; i++) {
			CHECK_EQ_INT(read_label(a, splits[s], i, lab, 320 * 240), 0);
			int bad = 0;
			for (int k = 0; k < 320 * 240; k++)
				bad |= lab[k] > 3;
			CHECK(!bad);
		}
		free(lab);
	}
	cJSON_Delete(r.sum);
	cJSON_Delete(r2.sum);
	/* another seed, another split */
	snprintf(b, sizeof b, "%s/ex_c", dir);
	struct ds_options o;
	ds_options_default(&o);
	o.width = 320, o.height = 240, o.val_pct = 25, o.seed = 99, o.threads = 1;
	struct seg_source s = { .root = ex };
	cJSON *sum = NULL;
	CHECK_EQ_INT(seg_create(&s, &o, b, NULL, &sum, NULL), DD_OK);
	char fa[PATH_MAX], fb[PATH_MAX];
	dsinfo_db_path(a, "val", fa, sizeof fa);
	dsinfo_db_path(b, "val", fb, sizeof fb);
	struct lmdbr *ra, *rb;
	CHECK_EQ_INT(lmdbr_open(fa, &ra, NULL), DD_OK);
	CHECK_EQ_INT(lmdbr_open(fb, &rb, NULL), DD_OK);
	int differ = 0;
	for (int64_t i = 0; i < 3; i++) {
		const uint8_t *va, *vb;
		size_t na, nb;
		lmdbr_get(ra, i, &va, &na, NULL, NULL);
		lmdbr_get(rb, i, &vb, &nb, NULL, NULL);
		differ |= na != nb || memcmp(va, vb, na) != 0;
	}
	CHECK(differ);
	lmdbr_close(ra);
	lmdbr_close(rb);
	cJSON_Delete(sum);
}

/* An archive's top folder is looked through; a folder without images/ is not a
 * source. */
static void test_layout(void)
{
	char p[PATH_MAX], found[PATH_MAX], want[PATH_MAX];
	snprintf(p, sizeof p, "%s/lay/top/inner/images", dir);
	fs_mkdir_p(p, NULL);
	snprintf(p, sizeof p, "%s/lay/top/inner/labels", dir);
	fs_mkdir_p(p, NULL);
	snprintf(p, sizeof p, "%s/lay", dir);
	snprintf(want, sizeof want, "%s/lay/top/inner", dir);
	CHECK(seg_layout_resolve(p, found));
	CHECK_STR(found, want);
	snprintf(p, sizeof p, "%s/lay/top/inner/images", dir);
	CHECK(!seg_layout_resolve(p, found));
}

static void tests(void)
{
	RUN(test_colormap);
	RUN(test_label_modes);
	RUN(test_label_depths);
	RUN(test_skips);
	RUN(test_nearest);
	RUN(test_example_realistic);
	RUN(test_layout);
}

int main(void) { return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests); }
