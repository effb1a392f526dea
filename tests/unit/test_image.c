/* test_image.c — datasets/image.c: every decoder, the refusals, channel
 * conversion, DIGITS' four resize modes and both encoders.
 *
 * Every test image is made here, with libpng, TurboJPEG or by hand, so the
 * expected pixels are known exactly.  Resize expectations are worked out by hand
 * from Pillow's algorithm (and were checked against Pillow 9.4). */
#define _POSIX_C_SOURCE 200809L
#include "../../datasets/image.h"
#include "check.h"

#include <png.h>
#include <stdint.h>
#include <time.h>
#include <turbojpeg.h>
#include <zlib.h>

/* ------------------------------------------------------------------------------
 * Makers */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void buf_put(struct buf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void t_png_write(png_structp png, png_bytep d, png_size_t n)
{
	buf_put(png_get_io_ptr(png), d, n);
}

static void t_png_flush(png_structp png)
{
	(void)png;
}

/* A PNG of the given type from raw rows (samples as PNG stores them: 16-bit big
 * endian, sub-byte depths packed).  Caller frees *out. */
static size_t make_png(int w, int h, int type, int depth, int interlace, const uint8_t *raw,
		       const png_color *pal, int npal, const uint8_t *trns, int ntrns, uint8_t **out)
{
	struct buf b = {0};
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	if (setjmp(png_jmpbuf(png)))
		abort();
	png_set_write_fn(png, &b, t_png_write, t_png_flush);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, type, interlace,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	if (pal)
		png_set_PLTE(png, info, pal, npal);
	if (trns)
		png_set_tRNS(png, info, trns, ntrns, NULL);
	png_write_info(png, info);
	int ch = type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_PALETTE ? 1
		 : type == PNG_COLOR_TYPE_GRAY_ALPHA				? 2
		 : type == PNG_COLOR_TYPE_RGB					? 3
										: 4;
	size_t stride = ((size_t)w * ch * depth + 7) / 8;
	png_bytep *rows = malloc(sizeof *rows * (size_t)h);
	for (int y = 0; y < h; y++)
		rows[y] = (png_bytep)raw + stride * y;
	png_write_image(png, rows);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	free(rows);
	*out = b.p;
	return b.len;
}

/* A JPEG from packed pixels of format pf.  Caller frees *out. */
static size_t make_jpeg(const uint8_t *px, int w, int h, int pf, int samp, int quality, int flags,
			uint8_t **out)
{
	tjhandle tj = tjInitCompress();
	unsigned char *j = NULL;
	unsigned long n = 0;
	if (tjCompress2(tj, px, w, 0, h, pf, &j, &n, samp, quality, flags) < 0) {
		fprintf(stderr, "tjCompress2: %s\n", tjGetErrorStr2(tj));
		abort();
	}
	*out = malloc(n);
	memcpy(*out, j, n);
	tjFree(j);
	tjDestroy(tj);
	return n;
}

/* Splice an APP1 Exif segment holding only an orientation tag after SOI. */
static size_t add_exif(const uint8_t *jpg, size_t n, int orientation, int little, uint8_t **out)
{
	uint8_t t[26];
	/* TIFF header, IFD0 at 8 with one entry: tag 0x0112, SHORT, count 1, value. */
	if (little) {
		const uint8_t le[26] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0,
					(uint8_t)orientation, 0, 0, 0, 0, 0, 0, 0};
		memcpy(t, le, sizeof t);
	} else {
		const uint8_t be[26] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1,
					0, (uint8_t)orientation, 0, 0, 0, 0, 0, 0};
		memcpy(t, be, sizeof t);
	}
	struct buf b = {0};
	size_t seg = 2 + 6 + sizeof t;
	uint8_t hdr[4] = {0xff, 0xe1, (uint8_t)(seg >> 8), (uint8_t)seg};
	buf_put(&b, jpg, 2);
	buf_put(&b, hdr, 4);
	buf_put(&b, "Exif\0\0", 6);
	buf_put(&b, t, sizeof t);
	buf_put(&b, jpg + 2, n - 2);
	*out = b.p;
	return b.len;
}

static int px_at(const struct image *im, int x, int y, int ch)
{
	return im->px[((size_t)y * im->w + x) * im->c + ch];
}

static int close_to(int a, int b, int tol)
{
	return a - b <= tol && b - a <= tol;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------------------
 * Names and sniffing */

static void test_names_and_sniff(void)
{
	enum resize_mode m;
	CHECK_STR(resize_mode_name(RESIZE_HALF_CROP), "half_crop");
	CHECK_EQ_INT(resize_mode_parse("fill", &m), 0);
	CHECK_EQ_INT(m, RESIZE_FILL);
	CHECK_EQ_INT(resize_mode_parse("crop", &m), 0);
	CHECK_EQ_INT(m, RESIZE_CROP);
	CHECK_EQ_INT(resize_mode_parse("Squash", &m), -1);
	CHECK_EQ_INT(resize_mode_parse(NULL, &m), -1);

	CHECK(image_has_image_ext("a/b/Cat.JPEG"));
	CHECK(image_has_image_ext("x.pgm"));
	CHECK(image_has_image_ext("x.bmp"));
	CHECK(!image_has_image_ext("x.gif"));
	CHECK(!image_has_image_ext("png"));
	CHECK(!image_has_image_ext("dir.png/file"));
	CHECK(!image_has_image_ext(NULL));

	CHECK_EQ_INT(image_sniff("\x89PNG\r\n\x1a\n....", 12), IMAGE_PNG);
	CHECK_EQ_INT(image_sniff("\xff\xd8\xff\xe0", 4), IMAGE_JPEG);
	CHECK_EQ_INT(image_sniff("P5\n1 1\n255\n", 11), IMAGE_PNM);
	CHECK_EQ_INT(image_sniff("BM is not a bitmap here", 23), IMAGE_UNKNOWN);
	CHECK_EQ_INT(image_sniff("GIF89a", 6), IMAGE_UNKNOWN);
	CHECK_EQ_INT(image_sniff(NULL, 0), IMAGE_UNKNOWN);
	image_free(NULL);
	struct image e = {0};
	image_free(&e);
}

/* ------------------------------------------------------------------------------
 * PNG */

static void test_png_gray_rgb(void)
{
	struct image im;
	struct dd_err err = {0};
	uint8_t *f;
	const uint8_t g[6] = {0, 50, 100, 150, 200, 255};
	size_t n = make_png(3, 2, PNG_COLOR_TYPE_GRAY, 8, 0, g, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "g.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.w, 3);
	CHECK_EQ_INT(im.h, 2);
	CHECK_EQ_INT(im.c, 1);
	CHECK(memcmp(im.px, g, 6) == 0);
	image_free(&im);
	free(f);

	const uint8_t rgb[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
	n = make_png(2, 2, PNG_COLOR_TYPE_RGB, 8, 0, rgb, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "c.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 3);
	CHECK(memcmp(im.px, rgb, 12) == 0);
	image_free(&im);
	free(f);

	/* 1-bit gray expands to 0/255 */
	const uint8_t bits[1] = {0xa0}; /* 1 0 1 0 */
	n = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 1, 0, bits, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, NULL, 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 1);
	CHECK(im.px && im.px[0] == 255 && im.px[1] == 0 && im.px[2] == 255 && im.px[3] == 0);
	image_free(&im);
	free(f);
}

static void test_png_alpha_on_white(void)
{
	struct image im;
	struct dd_err err = {0};
	uint8_t *f;
	/* RGBA: opaque red, fully transparent blue, half-transparent black, 1/5 green */
	const uint8_t rgba[16] = {255, 0, 0, 255, 0, 0, 255, 0, 0, 0, 0, 128, 0, 200, 0, 51};
	size_t n = make_png(4, 1, PNG_COLOR_TYPE_RGBA, 8, 0, rgba, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "a.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 3);
	const uint8_t want[12] = {255, 0, 0, 255, 255, 255,
				  /* (0*128 + 127*255)/255 = 127 */ 127, 127, 127,
				  /* R,B: 204*255/255 = 204; G: (200*51 + 204*255)/255 = 244 */
				  204, 244, 204};
	CHECK(im.px && memcmp(im.px, want, 12) == 0);
	image_free(&im);
	free(f);

	/* gray + alpha stays one channel */
	const uint8_t ga[6] = {0, 255, 0, 0, 100, 64};
	n = make_png(3, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, ga, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "ga.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 1);
	/* (100*64 + 191*255)/255 = 216.1 -> 216 */
	CHECK(im.px && im.px[0] == 0 && im.px[1] == 255 && im.px[2] == 216);
	image_free(&im);
	free(f);
}

static void test_png_16bit(void)
{
	struct image im;
	struct dd_err err = {0};
	uint8_t *f;
	/* 0, 65535, 0x8000 (-> (32768*255+32767)/65535 = 128), 0x7f80 (-> 127.5.. = 127) */
	const uint8_t g16[8] = {0, 0, 0xff, 0xff, 0x80, 0x00, 0x7f, 0x7f};
	size_t n = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 16, 0, g16, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "g16.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 1);
	CHECK(im.px && im.px[0] == 0 && im.px[1] == 255 && im.px[2] == 128 && im.px[3] == 127);
	image_free(&im);
	free(f);

	/* 16-bit RGBA, half transparent 0x1000 gray: 0x1000 -> 16, alpha 0x8000 -> 128 */
	const uint8_t c16[8] = {0x10, 0x00, 0x10, 0x00, 0x10, 0x00, 0x80, 0x00};
	n = make_png(1, 1, PNG_COLOR_TYPE_RGBA, 16, 0, c16, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "c16.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 3);
	/* (16*128 + 127*255)/255 = 135.03 -> 135 */
	CHECK(im.px && im.px[0] == 135 && im.px[1] == 135 && im.px[2] == 135);
	image_free(&im);
	free(f);
}

static void test_png_palette_trns(void)
{
	struct image im;
	struct dd_err err = {0};
	uint8_t *f;
	const png_color pal[3] = {{255, 0, 0}, {0, 0, 255}, {0, 100, 0}};
	const uint8_t trns[3] = {255, 0, 128};
	const uint8_t idx[3] = {0, 1, 2};
	size_t n = make_png(3, 1, PNG_COLOR_TYPE_PALETTE, 8, 0, idx, pal, 3, trns, 3, &f);
	CHECK_EQ_INT(image_decode(f, n, "p.png", 0, &im, &err), DD_OK);
	CHECK_EQ_INT(im.c, 3);
	/* green 100 at alpha 128: (100*128 + 127*255)/255 = 177.2 -> 177; R,B 127 */
	const uint8_t want[9] = {255, 0, 0, 255, 255, 255, 127, 177, 127};
	CHECK(im.px && memcmp(im.px, want, 9) == 0);
	image_free(&im);
	free(f);

	/* without tRNS the palette colours come through unchanged */
	n = make_png(3, 1, PNG_COLOR_TYPE_PALETTE, 8, 0, idx, pal, 3, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "p.png", 0, &im, &err), DD_OK);
	const uint8_t plain[9] = {255, 0, 0, 0, 0, 255, 0, 100, 0};
	CHECK(im.px && memcmp(im.px, plain, 9) == 0);
	image_free(&im);
	free(f);
}

static void test_png_interlaced(void)
{
	struct dd_err err = {0};
	enum { W = 13, H = 11 };
	uint8_t rgba[W * H * 4];
	for (int i = 0; i < W * H * 4; i++)
		rgba[i] = (uint8_t)(i * 37 + i / 7);
	uint8_t *f1, *f2;
	size_t n1 = make_png(W, H, PNG_COLOR_TYPE_RGBA, 8, PNG_INTERLACE_NONE, rgba, NULL, 0, NULL, 0, &f1);
	size_t n2 = make_png(W, H, PNG_COLOR_TYPE_RGBA, 8, PNG_INTERLACE_ADAM7, rgba, NULL, 0, NULL, 0, &f2);
	CHECK(n1 != n2 || memcmp(f1, f2, n1) != 0);
	struct image a, b;
	CHECK_EQ_INT(image_decode(f1, n1, "a.png", 0, &a, &err), DD_OK);
	CHECK_EQ_INT(image_decode(f2, n2, "b.png", 0, &b, &err), DD_OK);
	CHECK(a.px && b.px && a.w == b.w && a.h == b.h && memcmp(a.px, b.px, W * H * 3) == 0);
	image_free(&a);
	image_free(&b);
	free(f1);
	free(f2);

	/* interlaced gray straight into the output */
	uint8_t g[W * H];
	for (int i = 0; i < W * H; i++)
		g[i] = (uint8_t)(i * 5);
	n2 = make_png(W, H, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_ADAM7, g, NULL, 0, NULL, 0, &f2);
	CHECK_EQ_INT(image_decode(f2, n2, "g.png", 0, &b, &err), DD_OK);
	CHECK(b.px && memcmp(b.px, g, sizeof g) == 0);
	image_free(&b);
	free(f2);
}

static void test_png_refused(void)
{
	struct image im;
	struct dd_err err = {0};
	uint8_t *f;
	uint8_t g[64 * 64];
	for (size_t i = 0; i < sizeof g; i++)
		g[i] = (uint8_t)(i * 7 ^ i >> 3);
	size_t n = make_png(64, 64, PNG_COLOR_TYPE_GRAY, 8, 0, g, NULL, 0, NULL, 0, &f);

	CHECK_EQ_INT(image_decode(f, n / 2, "cat/12.png", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "cat/12.png: truncated PNG");
	CHECK(im.px == NULL && im.w == 0);
	CHECK_EQ_INT(image_decode(f, 20, "x.png", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "x.png: truncated PNG");

	/* a flipped byte inside IDAT: libpng's CRC check refuses it */
	uint8_t *bad = malloc(n);
	memcpy(bad, f, n);
	bad[n / 2] ^= 0x55;
	CHECK_EQ_INT(image_decode(bad, n, "x.png", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "x.png: truncated or corrupt PNG (");
	CHECK(im.px == NULL);
	free(bad);
	free(f);
}

/* A PNG whose IHDR (with a correct CRC) claims 100000x100000 and nothing else. */
static void test_png_huge_header(void)
{
	uint8_t f[8 + 25 + 12];
	memcpy(f, "\x89PNG\r\n\x1a\n", 8);
	uint8_t ihdr[25] = {0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 8, 2, 0, 0, 0};
	uint32_t crc = (uint32_t)crc32(0, ihdr + 4, 17);
	ihdr[21] = (uint8_t)(crc >> 24);
	ihdr[22] = (uint8_t)(crc >> 16);
	ihdr[23] = (uint8_t)(crc >> 8);
	ihdr[24] = (uint8_t)crc;
	memcpy(f + 8, ihdr, 25);
	memcpy(f + 33, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
	struct image im;
	struct dd_err err = {0};
	double t0 = now_s();
	CHECK_EQ_INT(image_decode(f, sizeof f, "big.png", 0, &im, &err), DD_ETOOBIG);
	CHECK(now_s() - t0 < 0.05);
	CHECK_CONTAINS(err.msg, "big.png: 100000x100000 pixels is over the cap of 64000000 pixels");
	CHECK(im.px == NULL);
	/* the caller's cap is the one named */
	CHECK_EQ_INT(image_decode(f, sizeof f, "big.png", 1000, &im, &err), DD_ETOOBIG);
	CHECK_CONTAINS(err.msg, "cap of 1000 pixels");
	/* with a cap above 1e10 libpng gets the file, and the missing IDAT is
	 * refused before the pixel buffer would be allocated */
	CHECK_EQ_INT(image_decode(f, sizeof f, "big.png", 20000000000ll, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "big.png: truncated or corrupt PNG (");
	CHECK(im.px == NULL);
}

/* ------------------------------------------------------------------------------
 * JPEG */

/* A 32x16 RGB image in four solid quadrants: red, green / blue, white. */
static void quadrants(uint8_t *px)
{
	for (int y = 0; y < 16; y++)
		for (int x = 0; x < 32; x++) {
			uint8_t *p = px + (y * 32 + x) * 3;
			int q = (y >= 8) * 2 + (x >= 16);
			p[0] = q == 0 || q == 3 ? 255 : 0;
			p[1] = q == 1 || q == 3 ? 255 : 0;
			p[2] = q == 2 || q == 3 ? 255 : 0;
		}
}

/* Colour of the quadrant centre near (x, y): 'r', 'g', 'b', 'w' or '?'. */
static char colour_at(const struct image *im, int x, int y)
{
	int r = px_at(im, x, y, 0), g = px_at(im, x, y, 1), b = px_at(im, x, y, 2);
	int R = r > 200, G = g > 200, B = b > 200, r0 = r < 60, g0 = g < 60, b0 = b < 60;
	if (R && g0 && b0)
		return 'r';
	if (r0 && G && b0)
		return 'g';
	if (r0 && g0 && B)
		return 'b';
	if (R && G && B)
		return 'w';
	return '?';
}

static void test_jpeg_variants(void)
{
	struct dd_err err = {0};
	enum { W = 40, H = 24 };
	uint8_t rgb[W * H * 3], gray[W * H];
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++) {
			uint8_t *p = rgb + (y * W + x) * 3;
			p[0] = (uint8_t)(x * 6);
			p[1] = (uint8_t)(y * 10);
			p[2] = (uint8_t)(128 + x - y);
			gray[y * W + x] = (uint8_t)(x * 3 + y * 4);
		}
	const int flags[2] = {0, TJFLAG_PROGRESSIVE};
	for (int i = 0; i < 2; i++) {
		uint8_t *f;
		size_t n = make_jpeg(rgb, W, H, TJPF_RGB, TJSAMP_444, 95, flags[i], &f);
		struct image im;
		CHECK_EQ_INT(image_decode(f, n, "c.jpg", 0, &im, &err), DD_OK);
		CHECK(im.w == W && im.h == H && im.c == 3);
		int worst = 0;
		for (int k = 0; im.px && k < W * H * 3; k++) {
			int d = abs(im.px[k] - rgb[k]);
			worst = d > worst ? d : worst;
		}
		CHECK(worst <= 8);
		image_free(&im);
		free(f);
	}
	uint8_t *f;
	size_t n = make_jpeg(gray, W, H, TJPF_GRAY, TJSAMP_GRAY, 95, 0, &f);
	struct image im;
	CHECK_EQ_INT(image_decode(f, n, "g.jpeg", 0, &im, &err), DD_OK);
	CHECK(im.w == W && im.h == H && im.c == 1);
	int worst = 0;
	for (int k = 0; im.px && k < W * H; k++) {
		int d = abs(im.px[k] - gray[k]);
		worst = d > worst ? d : worst;
	}
	CHECK(worst <= 4);
	image_free(&im);
	free(f);
}

static void test_jpeg_cmyk(void)
{
	struct dd_err err = {0};
	enum { W = 16, H = 16 };
	/* Inverted (Adobe) CMYK as Photoshop writes it: left half red (C0 M255 Y255
	 * K0), right half a dark teal (C200 M0 Y50 K100), each stored as 255 - v. */
	uint8_t cmyk[W * H * 4];
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++) {
			uint8_t *p = cmyk + (y * W + x) * 4;
			const uint8_t red[4] = {0, 255, 255, 0}, teal[4] = {200, 0, 50, 100};
			const uint8_t *v = x < 8 ? red : teal;
			for (int k = 0; k < 4; k++)
				p[k] = (uint8_t)(255 - v[k]);
		}
	uint8_t *f;
	size_t n = make_jpeg(cmyk, W, H, TJPF_CMYK, TJSAMP_444, 98, 0, &f);
	struct image im;
	CHECK_EQ_INT(image_decode(f, n, "cmyk.jpg", 0, &im, &err), DD_OK);
	CHECK(im.c == 3 && im.w == W && im.h == H);
	if (im.px) {
		CHECK_EQ_INT(colour_at(&im, 3, 8), 'r');
		/* teal: K100 -> nk 155; R = 155 - 200*155/255 = 33, G = 155, B = 155 - 30 = 125 */
		CHECK(close_to(px_at(&im, 12, 8, 0), 33, 6));
		CHECK(close_to(px_at(&im, 12, 8, 1), 155, 6));
		CHECK(close_to(px_at(&im, 12, 8, 2), 125, 6));
	}
	image_free(&im);
	free(f);
}

/* Where the quadrants' centres (red, green, blue, white: x, y each) land in the
 * 32x16 quadrants() image as stored (orientation 1) and under EXIF orientations
 * 6 (turned 90 clockwise: 16x32, red top-right), 3 (180) and 8 (90 counter-clockwise). */
static const int QUAD_1[8] = { 4, 4, 27, 4, 4, 11, 27, 11 }, QUAD_6[8] = { 11, 4, 11, 27, 4, 4, 4, 27 },
		 QUAD_3[8] = { 27, 11, 4, 11, 27, 4, 4, 4 }, QUAD_8[8] = { 4, 27, 4, 4, 11, 27, 11, 4 };

/* f (n bytes, decoded as name) is w x h with the quadrants where at puts them. */
static void check_quadrants(const uint8_t *f, size_t n, const char *name, int w, int h, const int at[8])
{
	struct dd_err err = {0};
	struct image im;
	CHECK_EQ_INT(image_decode(f, n, name, 0, &im, &err), DD_OK);
	CHECK(im.w == w && im.h == h);
	for (int k = 0; im.px && im.w == w && k < 4; k++) {
		char got = colour_at(&im, at[2 * k], at[2 * k + 1]);
		if (got != "rgbw"[k]) {
			fprintf(stderr, "  %s: (%d,%d) is '%c', want '%c'\n", name, at[2 * k], at[2 * k + 1], got, "rgbw"[k]);
			CHECK(0);
		}
	}
	image_free(&im);
}

static void test_jpeg_exif_orientation(void)
{
	uint8_t px[32 * 16 * 3];
	quadrants(px);
	uint8_t *plain;
	size_t pn = make_jpeg(px, 32, 16, TJPF_RGB, TJSAMP_444, 95, 0, &plain);
	/* no EXIF: the stored layout; then 6 in a big-endian TIFF, 3 and 8 in little-endian ones */
	const struct {
		int o, little, w, h;
		const int *at;
		const char *name;
	} cases[] = { { 0, 0, 32, 16, QUAD_1, "q.jpg" },
		      { 6, 0, 16, 32, QUAD_6, "q6.jpg" },
		      { 3, 1, 32, 16, QUAD_3, "q3.jpg" },
		      { 8, 1, 16, 32, QUAD_8, "q8.jpg" } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t *f = plain;
		size_t n = cases[i].o ? add_exif(plain, pn, cases[i].o, cases[i].little, &f) : pn;
		check_quadrants(f, n, cases[i].name, cases[i].w, cases[i].h, cases[i].at);
		if (f != plain)
			free(f);
	}
	free(plain);
}

/* All eight orientations on a 24x16 gray image of six 8x8 blocks
 *   A B C
 *   D E F
 * (aligned to JPEG blocks, so quality 100 keeps them flat), against the layouts
 * of PIL's exif_transpose written out by hand. */
static void test_jpeg_orientations_all(void)
{
	struct dd_err err = {0};
	const uint8_t val[6] = {0, 50, 100, 150, 200, 250}; /* A..F */
	uint8_t g[24 * 16];
	for (int y = 0; y < 16; y++)
		for (int x = 0; x < 24; x++)
			g[y * 24 + x] = val[(y / 8) * 3 + x / 8];
	uint8_t *plain;
	size_t pn = make_jpeg(g, 24, 16, TJPF_GRAY, TJSAMP_GRAY, 100, 0, &plain);
	const struct {
		int o;
		const char *grid; /* rows of blocks, top to bottom */
	} cases[] = {{1, "ABC DEF"},	{2, "CBA FED"},	  {3, "FED CBA"},   {4, "DEF ABC"},
		     {5, "AD BE CF"}, {6, "DA EB FC"}, {7, "FC EB DA"}, {8, "CF BE AD"}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t *f;
		size_t n = add_exif(plain, pn, cases[i].o, (int)(i & 1), &f);
		struct image im;
		CHECK_EQ_INT(image_decode(f, n, "o.jpg", 0, &im, &err), DD_OK);
		int swapped = cases[i].o >= 5;
		CHECK_EQ_INT(im.w, swapped ? 16 : 24);
		CHECK_EQ_INT(im.h, swapped ? 24 : 16);
		if (im.px && im.w == (swapped ? 16 : 24)) {
			int bx = 0, by = 0;
			for (const char *p = cases[i].grid; *p; p++) {
				if (*p == ' ') {
					by++;
					bx = 0;
					continue;
				}
				int got = px_at(&im, bx * 8 + 4, by * 8 + 4, 0);
				if (!close_to(got, val[*p - 'A'], 6)) {
					fprintf(stderr, "  orientation %d block (%d,%d): %d, want %c\n",
						cases[i].o, bx, by, got, *p);
					CHECK(0);
				}
				bx++;
			}
		}
		image_free(&im);
		free(f);
	}
	free(plain);
}

/* Splice an APP1 segment with any payload (plen bytes) after SOI; seglen is what
 * its length field claims (0: the true length). */
static size_t add_app1(const uint8_t *jpg, size_t n, const void *payload, size_t plen, size_t seglen,
		       uint8_t **out)
{
	struct buf b = {0};
	size_t seg = seglen ? seglen : 2 + plen;
	uint8_t hdr[4] = {0xff, 0xe1, (uint8_t)(seg >> 8), (uint8_t)seg};
	buf_put(&b, jpg, 2);
	buf_put(&b, hdr, 4);
	buf_put(&b, payload, plen);
	buf_put(&b, jpg + 2, n - 2);
	*out = b.p;
	return b.len;
}

/* An Exif payload ("Exif\0\0" and a TIFF block) of one IFD0 entry, every field
 * chosen by the caller, so each can be made wrong in turn; 6 + 26 bytes. */
static size_t exif_payload(uint8_t *p, const char order[2], unsigned magic, uint32_t ifd, unsigned count,
			   unsigned tag, unsigned type, uint32_t value)
{
	int le = order[0] == 'I';
	uint8_t *t = p + 6;
	memcpy(p, "Exif\0\0", 6);
	memset(t, 0, 26);
	t[0] = (uint8_t)order[0];
	t[1] = (uint8_t)order[1];
#define PUT16(q, v) (le ? ((q)[0] = (uint8_t)(v), (q)[1] = (uint8_t)((v) >> 8)) : ((q)[0] = (uint8_t)((v) >> 8), (q)[1] = (uint8_t)(v)))
#define PUT32(q, v) (le ? (PUT16(q, (v) & 0xffff), PUT16((q) + 2, (v) >> 16)) : (PUT16(q, (v) >> 16), PUT16((q) + 2, (v) & 0xffff)))
	PUT16(t + 2, magic);
	PUT32(t + 4, ifd);
	PUT16(t + 8, count);
	PUT16(t + 10, tag);
	PUT16(t + 12, type);
	PUT32(t + 14, 1u);
	if (type == 4)
		PUT32(t + 18, value);
	else
		PUT16(t + 18, value); /* a SHORT sits left-justified in the value field */
#undef PUT16
#undef PUT32
	return 6 + 26;
}

/* Hostile or broken Exif blocks never crash, never read past the segment, and
 * never rotate: the image comes out as stored.  The well-formed variants beside
 * them (LONG type, an XMP APP1 first) are honoured. */
static void test_jpeg_exif_malformed(void)
{
	struct dd_err err = {0};
	uint8_t px[32 * 16 * 3];
	quadrants(px);
	uint8_t *plain;
	size_t pn = make_jpeg(px, 32, 16, TJPF_RGB, TJSAMP_444, 95, 0, &plain);
	const struct {
		const char *what;
		char order[3];
		unsigned magic;
		uint32_t ifd;
		unsigned count, tag, type;
		uint32_t value;
		int cut;   /* bytes of the payload kept (0: all) */
		int want;  /* orientation expected to be applied (1: none) */
	} cases[] = {
		{"well formed, big-endian", "MM", 42, 8, 1, 0x0112, 3, 6, 0, 6},
		{"well formed, LONG type", "II", 42, 8, 1, 0x0112, 4, 6, 0, 6},
		{"IFD0 offset past the block", "II", 42, 0xfffffff0u, 1, 0x0112, 3, 6, 0, 1},
		{"IFD0 offset at the last byte", "MM", 42, 25, 1, 0x0112, 3, 6, 0, 1},
		{"IFD0 offset wrapping 32 bits", "II", 42, 0xffffffffu, 1, 0x0112, 3, 6, 0, 1},
		{"65535 entries claimed, none is the tag", "MM", 42, 8, 0xffff, 0x0100, 3, 6, 0, 1},
		{"entries cut by the segment's end", "II", 42, 8, 1, 0x0112, 3, 6, 6 + 16, 1},
		{"TIFF header cut short", "II", 42, 8, 1, 0x0112, 3, 6, 6 + 5, 1},
		{"no TIFF block at all", "II", 42, 8, 1, 0x0112, 3, 6, 6, 1},
		{"orientation 0", "II", 42, 8, 1, 0x0112, 3, 0, 0, 1},
		{"orientation 9", "MM", 42, 8, 1, 0x0112, 3, 9, 0, 1},
		{"orientation 65535", "II", 42, 8, 1, 0x0112, 3, 0xffff, 0, 1},
		{"orientation as ASCII", "II", 42, 8, 1, 0x0112, 2, 6, 0, 1},
		{"LONG orientation 0x10006", "II", 42, 8, 1, 0x0112, 4, 0x10006, 0, 1},
		{"byte order XX", "XX", 42, 8, 1, 0x0112, 3, 6, 0, 1},
		{"TIFF magic 43", "MM", 43, 8, 1, 0x0112, 3, 6, 0, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t pay[32];
		size_t plen = exif_payload(pay, cases[i].order, cases[i].magic, cases[i].ifd, cases[i].count,
					   cases[i].tag, cases[i].type, cases[i].value);
		if (cases[i].cut)
			plen = (size_t)cases[i].cut;
		/* the payload on the heap, exactly its length, so a read past it is
		 * one that a sanitizer or valgrind sees */
		uint8_t *heap = malloc(plen);
		memcpy(heap, pay, plen);
		uint8_t *f;
		size_t n = add_app1(plain, pn, heap, plen, 0, &f);
		free(heap);
		struct image im;
		int rc = image_decode(f, n, "x.jpg", 0, &im, &err);
		if (rc != DD_OK)
			fprintf(stderr, "  %s: %s\n", cases[i].what, err.msg);
		CHECK_EQ_INT(rc, DD_OK);
		int rotated = cases[i].want == 6;
		if (im.px) {
			if (im.w != (rotated ? 16 : 32))
				fprintf(stderr, "  %s: %dx%d\n", cases[i].what, im.w, im.h);
			CHECK_EQ_INT(im.w, rotated ? 16 : 32);
			if (im.w == 32)
				CHECK_EQ_INT(colour_at(&im, 4, 4), 'r');
			else if (im.w == 16)
				CHECK_EQ_INT(colour_at(&im, 11, 4), 'r');
		}
		image_free(&im);
		free(f);
	}

	/* an XMP APP1 first, then the Exif one: the Exif one counts */
	static const char xmp[] = "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>";
	uint8_t pay[32], *f1, *f2;
	size_t plen = exif_payload(pay, "II", 42, 8, 1, 0x0112, 3, 3);
	size_t n1 = add_app1(plain, pn, pay, plen, 0, &f1);
	size_t n2 = add_app1(f1, n1, xmp, sizeof xmp, 0, &f2);
	struct image im;
	CHECK_EQ_INT(image_decode(f2, n2, "x.jpg", 0, &im, &err), DD_OK);
	if (im.px && im.w == 32)
		CHECK_EQ_INT(colour_at(&im, 27, 11), 'r'); /* 3: turned half round */
	image_free(&im);
	free(f1);
	free(f2);

	/* an APP1 whose length runs past the end of the file: refused as a broken
	 * JPEG, not read out of bounds (the length field is all the scan trusts) */
	plen = exif_payload(pay, "MM", 42, 8, 1, 0x0112, 3, 6);
	size_t n = add_app1(plain, 2, pay, plen, 0xfff0, &f1); /* SOI and the segment only */
	uint8_t *heap = malloc(n);
	memcpy(heap, f1, n);
	CHECK(image_decode(heap, n, "cut.jpg", 0, &im, &err) != DD_OK);
	CHECK(im.px == NULL);
	CHECK_CONTAINS(err.msg, "cut.jpg");
	free(heap);
	free(f1);
	free(plain);
}

/* A PNG chunk (length, type, data, CRC) spliced into png at byte `at`. */
static size_t add_png_chunk(const uint8_t *png, size_t n, size_t at, const char *type, const void *data,
			    size_t dlen, uint8_t **out)
{
	struct buf b = {0};
	uint8_t len[4] = {(uint8_t)(dlen >> 24), (uint8_t)(dlen >> 16), (uint8_t)(dlen >> 8), (uint8_t)dlen};
	uLong crc = crc32(0, (const Bytef *)type, 4);
	crc = crc32(crc, data, (uInt)dlen);
	uint8_t c[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
	buf_put(&b, png, at);
	buf_put(&b, len, 4);
	buf_put(&b, type, 4);
	buf_put(&b, data, dlen);
	buf_put(&b, c, 4);
	buf_put(&b, png + at, n - at);
	*out = b.p;
	return b.len;
}

/* A PNG's eXIf chunk before IDAT turns the image as Chromium and Pillow do; one
 * after the image data (Chromium ignores it) and a broken one leave it as stored. */
static void test_png_exif_orientation(void)
{
	struct dd_err err = {0};
	uint8_t px[32 * 16 * 3];
	quadrants(px);
	uint8_t *plain;
	size_t pn = make_png(32, 16, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0, &plain);
	uint8_t pay[32];
	exif_payload(pay, "MM", 42, 8, 1, 0x0112, 3, 6);
	const uint8_t *tiff = pay + 6; /* eXIf holds the TIFF block alone */
	struct image im;
	uint8_t *f;

	size_t n = add_png_chunk(plain, pn, 33, "eXIf", tiff, 26, &f); /* right after IHDR */
	check_quadrants(f, n, "p6.png", 16, 32, QUAD_6);
	free(f);

	/* a converted (gray+alpha) image is turned too */
	exif_payload(pay, "II", 42, 8, 1, 0x0112, 3, 3);
	uint8_t ga[4 * 2 * 2];
	for (int i = 0; i < 8; i++)
		ga[2 * i] = (uint8_t)(i * 30), ga[2 * i + 1] = 255;
	uint8_t *gp;
	size_t gn = make_png(4, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, PNG_INTERLACE_NONE, ga, NULL, 0, NULL, 0, &gp);
	n = add_png_chunk(gp, gn, 33, "eXIf", pay + 6, 26, &f);
	CHECK_EQ_INT(image_decode(f, n, "ga3.png", 0, &im, &err), DD_OK);
	if (im.px && im.w == 4 && im.h == 2 && im.c == 1) {
		CHECK_EQ_INT(px_at(&im, 0, 0, 0), 7 * 30); /* turned half round: last first */
		CHECK_EQ_INT(px_at(&im, 3, 1, 0), 0);
	} else {
		CHECK(0);
	}
	image_free(&im);
	free(f);
	free(gp);

	/* after IDAT (before IEND, the last 12 bytes): as stored */
	exif_payload(pay, "MM", 42, 8, 1, 0x0112, 3, 6);
	n = add_png_chunk(plain, pn, pn - 12, "eXIf", tiff, 26, &f);
	CHECK_EQ_INT(image_decode(f, n, "late.png", 0, &im, &err), DD_OK);
	CHECK(im.w == 32 && im.h == 16);
	image_free(&im);
	free(f);

	/* broken blocks: an IFD0 offset past the end, a cut header, an empty chunk */
	exif_payload(pay, "MM", 42, 0xfffffff0u, 1, 0x0112, 3, 6);
	const size_t lens[] = {26, 26, 5, 0};
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		if (k == 1)
			exif_payload(pay, "MM", 42, 8, 0xffff, 0x0100, 3, 6);
		n = add_png_chunk(plain, pn, 33, "eXIf", tiff, lens[k], &f);
		CHECK_EQ_INT(image_decode(f, n, "bad.png", 0, &im, &err), DD_OK);
		CHECK(im.w == 32 && im.h == 16);
		image_free(&im);
		free(f);
	}
	free(plain);
}

static void test_jpeg_refused(void)
{
	struct dd_err err = {0};
	enum { W = 64, H = 64 };
	uint8_t rgb[W * H * 3];
	for (int i = 0; i < W * H * 3; i++)
		rgb[i] = (uint8_t)(i * 13 ^ i >> 4);
	uint8_t *f;
	size_t n = make_jpeg(rgb, W, H, TJPF_RGB, TJSAMP_420, 90, 0, &f);
	struct image im;
	CHECK_EQ_INT(image_decode(f, n / 2, "t.jpg", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "t.jpg: truncated JPEG");
	CHECK(im.px == NULL);
	CHECK_EQ_INT(image_decode(f, 40, "t.jpg", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "t.jpg: truncated or corrupt JPEG (");

	/* a JPEG named .png */
	CHECK_EQ_INT(image_decode(f, n, "cat/3.png", 0, &im, &err), DD_EINVAL);
	CHECK_STR(err.msg, "cat/3.png: the file is a JPEG, not a PNG as its name says");

	/* SOF patched to claim 60000x60000: refused before decoding */
	uint8_t *big = malloc(n);
	memcpy(big, f, n);
	for (size_t i = 2; i + 9 < n; i++)
		if (big[i] == 0xff && big[i + 1] == 0xc0) {
			big[i + 5] = 0xea; /* 60000 = 0xea60 */
			big[i + 6] = 0x60;
			big[i + 7] = 0xea;
			big[i + 8] = 0x60;
			break;
		}
	double t0 = now_s();
	CHECK_EQ_INT(image_decode(big, n, "big.jpg", 0, &im, &err), DD_ETOOBIG);
	CHECK(now_s() - t0 < 0.05);
	CHECK_CONTAINS(err.msg, "60000x60000 pixels is over the cap");
	free(big);
	free(f);
}

/* ------------------------------------------------------------------------------
 * PNM and BMP */

static void test_pnm(void)
{
	struct dd_err err = {0};
	struct image im;
	const char p5[] = "P5\n# a comment\n3 # width\n1\n255\n\x00\x80\xff";
	CHECK_EQ_INT(image_decode(p5, sizeof p5 - 1, "a.pgm", 0, &im, &err), DD_OK);
	CHECK(im.w == 3 && im.h == 1 && im.c == 1);
	CHECK(im.px && im.px[0] == 0 && im.px[1] == 0x80 && im.px[2] == 0xff);
	image_free(&im);

	const char p6[] = "P6 2 1 255\n\x01\x02\x03\xfa\xfb\xfc";
	CHECK_EQ_INT(image_decode(p6, sizeof p6 - 1, "a.ppm", 0, &im, &err), DD_OK);
	CHECK(im.w == 2 && im.h == 1 && im.c == 3);
	CHECK(im.px && memcmp(im.px, "\x01\x02\x03\xfa\xfb\xfc", 6) == 0);
	image_free(&im);

	/* maxval 15 scales to 0..255: 15 -> 255, 7 -> 119 */
	const char p2[] = "P2\n# gray\n2 2\n15\n0 15\n7 # mid\n 3\n";
	CHECK_EQ_INT(image_decode(p2, sizeof p2 - 1, "a.pnm", 0, &im, &err), DD_OK);
	CHECK(im.w == 2 && im.h == 2 && im.c == 1);
	CHECK(im.px && im.px[0] == 0 && im.px[1] == 255 && im.px[2] == 119 && im.px[3] == 51);
	image_free(&im);

	const char p3[] = "P3 1 2 255 10 20 30\n40 50 60";
	CHECK_EQ_INT(image_decode(p3, sizeof p3 - 1, "a.ppm", 0, &im, &err), DD_OK);
	CHECK(im.w == 1 && im.h == 2 && im.c == 3);
	CHECK(im.px && memcmp(im.px, "\x0a\x14\x1e\x28\x32\x3c", 6) == 0);
	image_free(&im);

	/* 16-bit PGM: maxval 65535, big-endian samples */
	const char p16[] = "P5 3 1 65535\n\x00\x00\xff\xff\x80\x00";
	CHECK_EQ_INT(image_decode(p16, sizeof p16 - 1, "w.pgm", 0, &im, &err), DD_OK);
	CHECK(im.px && im.px[0] == 0 && im.px[1] == 255 && im.px[2] == 128);
	image_free(&im);
	/* maxval 1000: 500 -> 127.5 -> 128 */
	const char p1k[] = "P5 1 1 1000\n\x01\xf4";
	CHECK_EQ_INT(image_decode(p1k, sizeof p1k - 1, "w.pgm", 0, &im, &err), DD_OK);
	CHECK(im.px && im.px[0] == 128);
	image_free(&im);

	const char cut[] = "P6 2 2 255\n\x01\x02\x03";
	CHECK_EQ_INT(image_decode(cut, sizeof cut - 1, "c.ppm", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "c.ppm: truncated PNM");
	const char cut2[] = "P3 2 1 255 1 2 3 4";
	CHECK_EQ_INT(image_decode(cut2, sizeof cut2 - 1, "c.ppm", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "c.ppm: truncated or corrupt PNM");
	const char pbm[] = "P4 8 1\n\xff";
	CHECK_EQ_INT(image_decode(pbm, sizeof pbm - 1, "b.pnm", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "unsupported PNM variant P4");
	const char huge[] = "P5 100000 100000 255\n";
	CHECK_EQ_INT(image_decode(huge, sizeof huge - 1, "h.pgm", 0, &im, &err), DD_ETOOBIG);
	CHECK_CONTAINS(err.msg, "over the cap");
	CHECK(im.px == NULL);
}

/* A BMP file: 14-byte file header, 40-byte info header, palette, rows. */
static size_t make_bmp(int w, int h, int bpp, uint32_t comp, const uint8_t *pal, int npal,
		       const uint8_t *rows, size_t rowbytes, uint8_t **out)
{
	size_t stride = ((size_t)w * bpp + 31) / 32 * 4;
	size_t off = 14 + 40 + (size_t)npal * 4;
	size_t total = off + stride * (size_t)(h < 0 ? -h : h);
	uint8_t *f = calloc(1, total);
	f[0] = 'B';
	f[1] = 'M';
	uint32_t v[] = {(uint32_t)total, 0, (uint32_t)off, 40, (uint32_t)w, (uint32_t)h};
	for (int i = 0; i < 6; i++)
		for (int k = 0; k < 4; k++)
			f[2 + 4 * i + k] = (uint8_t)(v[i] >> (8 * k));
	f[26] = 1;
	f[28] = (uint8_t)bpp;
	for (int k = 0; k < 4; k++) {
		f[30 + k] = (uint8_t)(comp >> (8 * k));
		f[46 + k] = (uint8_t)((uint32_t)npal >> (8 * k));
	}
	if (npal)
		memcpy(f + 54, pal, (size_t)npal * 4);
	for (int y = 0; y < (h < 0 ? -h : h); y++)
		memcpy(f + off + stride * y, rows + rowbytes * y, rowbytes);
	*out = f;
	return total;
}

static void test_bmp(void)
{
	struct dd_err err = {0};
	struct image im;
	uint8_t *f;
	/* 24-bit, bottom-up: the file's first row is the image's last. BGR order. */
	const uint8_t rows24[2][6] = {{0, 0, 255, 0, 255, 0}, /* bottom: red, green */
				      {255, 0, 0, 10, 20, 30}}; /* top: blue, (30,20,10) */
	size_t n = make_bmp(2, 2, 24, 0, NULL, 0, &rows24[0][0], 6, &f);
	CHECK_EQ_INT(image_decode(f, n, "a.bmp", 0, &im, &err), DD_OK);
	CHECK(im.w == 2 && im.h == 2 && im.c == 3);
	const uint8_t want[12] = {0, 0, 255, 30, 20, 10, 255, 0, 0, 0, 255, 0};
	CHECK(im.px && memcmp(im.px, want, 12) == 0);
	image_free(&im);
	free(f);

	/* 32-bit top-down */
	const uint8_t rows32[2][4] = {{1, 2, 3, 0}, {4, 5, 6, 0}};
	n = make_bmp(1, -2, 32, 0, NULL, 0, &rows32[0][0], 4, &f);
	CHECK_EQ_INT(image_decode(f, n, "b.bmp", 0, &im, &err), DD_OK);
	CHECK(im.w == 1 && im.h == 2 && im.px && memcmp(im.px, "\x03\x02\x01\x06\x05\x04", 6) == 0);
	image_free(&im);
	free(f);

	/* 8-bit palette: colour palette -> RGB, gray palette -> one channel */
	const uint8_t pal[8] = {0, 0, 255, 0, 255, 0, 0, 0};
	const uint8_t idx[3] = {1, 0, 1};
	n = make_bmp(3, 1, 8, 0, pal, 2, idx, 3, &f);
	CHECK_EQ_INT(image_decode(f, n, "p.bmp", 0, &im, &err), DD_OK);
	CHECK(im.c == 3 && im.px && memcmp(im.px, "\x00\x00\xff\xff\x00\x00\x00\x00\xff", 9) == 0);
	image_free(&im);
	free(f);
	const uint8_t gpal[8] = {0, 0, 0, 0, 200, 200, 200, 0};
	n = make_bmp(3, 1, 8, 0, gpal, 2, idx, 3, &f);
	CHECK_EQ_INT(image_decode(f, n, "g.bmp", 0, &im, &err), DD_OK);
	CHECK(im.c == 1 && im.px && memcmp(im.px, "\xc8\x00\xc8", 3) == 0);
	image_free(&im);
	free(f);

	/* 4-bit and 1-bit: indices packed from the high bits, rows padded to 4 bytes */
	const uint8_t pal4[12] = {0, 0, 0, 0, 0, 0, 255, 0, 255, 0, 0, 0};
	const uint8_t nib[2][4] = {{0x12, 0x00, 0, 0}, {0x21, 0x10, 0, 0}}; /* file order: bottom, top */
	n = make_bmp(3, 2, 4, 0, pal4, 3, &nib[0][0], 4, &f);
	CHECK_EQ_INT(image_decode(f, n, "n.bmp", 0, &im, &err), DD_OK);
	CHECK(im.c == 3 && im.w == 3 && im.h == 2);
	/* palette: 0 black, 1 red, 2 blue; top row 2 1 1, bottom row 1 2 0 */
	const uint8_t want4[18] = {0, 0, 255, 255, 0, 0, 255, 0, 0, /**/ 255, 0, 0, 0, 0, 255, 0, 0, 0};
	CHECK(im.px && memcmp(im.px, want4, 18) == 0);
	image_free(&im);
	free(f);
	const uint8_t gpal1[8] = {0, 0, 0, 0, 255, 255, 255, 0};
	const uint8_t bits[4] = {0xa5, 0xc0, 0, 0}; /* 1010 0101 11 */
	n = make_bmp(10, 1, 1, 0, gpal1, 2, bits, 4, &f);
	CHECK_EQ_INT(image_decode(f, n, "b1.bmp", 0, &im, &err), DD_OK);
	CHECK(im.c == 1 && im.w == 10);
	CHECK(im.px && memcmp(im.px, "\xff\x00\xff\x00\x00\xff\x00\xff\xff\xff", 10) == 0);
	image_free(&im);
	free(f);

	/* RLE8 is refused as unsupported */
	n = make_bmp(3, 1, 8, 1, gpal, 2, idx, 3, &f);
	CHECK_EQ_INT(image_decode(f, n, "r.bmp", 0, &im, &err), DD_EINVAL);
	CHECK_STR(err.msg, "r.bmp: unsupported BMP (RLE8 compression)");
	free(f);
	/* and a cut-off one as truncated */
	n = make_bmp(2, 2, 24, 0, NULL, 0, &rows24[0][0], 6, &f);
	CHECK_EQ_INT(image_decode(f, n - 4, "t.bmp", 0, &im, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "t.bmp: truncated BMP");
	free(f);
}

/* ------------------------------------------------------------------------------
 * Refusals common to all formats */

static void test_refused_common(void)
{
	struct dd_err err = {0};
	struct image im = {.w = 7};
	CHECK_EQ_INT(image_decode("", 0, "x.png", 0, &im, &err), DD_EINVAL);
	CHECK_STR(err.msg, "x.png: empty file");
	CHECK(im.w == 0 && im.px == NULL);
	CHECK_EQ_INT(image_decode("hello, world", 12, "x.png", 0, &im, &err), DD_EINVAL);
	CHECK_STR(err.msg, "x.png: not an image (unknown format)");
	CHECK_EQ_INT(image_decode("\x00\x01\x02\x03\x04\x05\x06\x07\x08", 9, NULL, 0, &im, &err),
		     DD_EINVAL);
	CHECK_CONTAINS(err.msg, "not an image (unknown format)");

	uint8_t *f;
	const uint8_t g[4] = {1, 2, 3, 4};
	size_t n = make_png(2, 2, PNG_COLOR_TYPE_GRAY, 8, 0, g, NULL, 0, NULL, 0, &f);
	CHECK_EQ_INT(image_decode(f, n, "a/b.JPG", 0, &im, &err), DD_EINVAL);
	CHECK_STR(err.msg, "a/b.JPG: the file is a PNG, not a JPEG as its name says");
	/* names without an image extension are decoded by their bytes */
	CHECK_EQ_INT(image_decode(f, n, "blob.dat", 0, &im, &err), DD_OK);
	image_free(&im);
	/* a cap below the image's size */
	CHECK_EQ_INT(image_decode(f, n, "b.png", 3, &im, &err), DD_ETOOBIG);
	CHECK(im.px == NULL);
	free(f);
}

/* ------------------------------------------------------------------------------
 * Channels */

static void test_channels(void)
{
	struct dd_err err = {0};
	struct image im = {0};
	im.w = 4;
	im.h = 1;
	im.c = 3;
	im.px = malloc(12);
	const uint8_t rgb[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30};
	memcpy(im.px, rgb, 12);
	CHECK_EQ_INT(image_set_channels(&im, 1, &err), DD_OK);
	CHECK_EQ_INT(im.c, 1);
	/* PIL convert('L'): (R*19595 + G*38470 + B*7471 + 0x8000) >> 16
	 * red 76, green 150, blue 29, (10,200,30): (195950+7694000+224130+32768)>>16 = 124 */
	CHECK(im.px[0] == 76 && im.px[1] == 150 && im.px[2] == 29 && im.px[3] == 124);
	CHECK_EQ_INT(image_set_channels(&im, 3, &err), DD_OK);
	CHECK_EQ_INT(im.c, 3);
	const uint8_t back[12] = {76, 76, 76, 150, 150, 150, 29, 29, 29, 124, 124, 124};
	CHECK(memcmp(im.px, back, 12) == 0);
	CHECK_EQ_INT(image_set_channels(&im, 3, &err), DD_OK);
	CHECK_EQ_INT(image_set_channels(&im, 2, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "2 channels");
	image_free(&im);
	/* white stays white, black stays black */
	im.w = 2;
	im.h = 1;
	im.c = 3;
	im.px = malloc(6);
	memcpy(im.px, "\xff\xff\xff\x00\x00\x00", 6);
	CHECK_EQ_INT(image_set_channels(&im, 1, &err), DD_OK);
	CHECK(im.px[0] == 255 && im.px[1] == 0);
	image_free(&im);
}

/* ------------------------------------------------------------------------------
 * Resize */

static struct image gray_img(int w, int h, const uint8_t *v)
{
	struct image im = {w, h, 1, malloc((size_t)w * h)};
	memcpy(im.px, v, (size_t)w * h);
	return im;
}

static void test_resize_identity_and_squash(void)
{
	struct dd_err err = {0};
	struct image src = gray_img(2, 2, (const uint8_t[]){0, 100, 200, 255}), out;
	CHECK_EQ_INT(image_resize(&src, 2, 2, RESIZE_FILL, 1, &out, &err), DD_OK);
	CHECK(out.px != src.px && memcmp(out.px, src.px, 4) == 0);
	image_free(&out);

	/* Pillow: 2 -> 4 uses weights [1], [.75 .25], [.25 .75], [1] on each axis,
	 * horizontal first with the intermediate rounded (half up):
	 * rows -> [0 25 75 100], [200 214 241 255]; then columns. */
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_SQUASH, 1, &out, &err), DD_OK);
	const uint8_t want[16] = {0,   25,  75,	 100, /**/ 50,	72,  117, 139,
				  150, 167, 200, 216, /**/ 200, 214, 241, 255};
	CHECK(out.w == 4 && out.h == 4 && out.c == 1);
	CHECK(out.px && memcmp(out.px, want, 16) == 0);
	for (int i = 0; out.px && i < 16; i++)
		if (out.px[i] != want[i])
			fprintf(stderr, "  squash[%d] = %d, want %d\n", i, out.px[i], want[i]);
	image_free(&out);
	image_free(&src);

	/* Shrinking widens the filter: 4 -> 2 averages three taps each,
	 * weights 3/7 3/7 1/7: (0*3 + 100*3 + 200)/7 = 71.4, (100 + 200*3 + 255*3)/7 = 209.3 */
	src = gray_img(4, 1, (const uint8_t[]){0, 100, 200, 255});
	CHECK_EQ_INT(image_resize(&src, 2, 1, RESIZE_SQUASH, 1, &out, &err), DD_OK);
	CHECK(out.px && out.px[0] == 71 && out.px[1] == 209);
	image_free(&out);
	image_free(&src);

	/* colour goes through the same arithmetic per channel */
	struct image c = {2, 1, 3, malloc(6)};
	memcpy(c.px, "\x00\x64\xc8\x64\xc8\xff", 6);
	CHECK_EQ_INT(image_resize(&c, 4, 1, RESIZE_SQUASH, 1, &out, &err), DD_OK);
	/* channel 0: 0,100 -> 0 25 75 100; channel 1: 100,200 -> 100 125 175 200;
	 * channel 2: 200,255 -> 200 214 241 255 */
	const uint8_t cw[12] = {0, 100, 200, 25, 125, 214, 75, 175, 241, 100, 200, 255};
	CHECK(out.px && memcmp(out.px, cw, 12) == 0);
	image_free(&out);
	image_free(&c);
}

static void test_resize_crop(void)
{
	struct dd_err err = {0};
	struct image out;
	/* 4x2 -> 2x2: wr 2 > hr 1, scaled to 4x2 (no change), start round(1.0) = 1 */
	struct image src = gray_img(4, 2, (const uint8_t[]){1, 2, 3, 4, 5, 6, 7, 8});
	CHECK_EQ_INT(image_resize(&src, 2, 2, RESIZE_CROP, 1, &out, &err), DD_OK);
	CHECK(out.w == 2 && out.h == 2 && out.px && memcmp(out.px, "\x02\x03\x06\x07", 4) == 0);
	image_free(&out);
	image_free(&src);

	/* 7x2 -> 2x2: start = round(2.5) = 3 with Python 2's round (Python 3 gives 2) */
	src = gray_img(7, 2, (const uint8_t[]){0, 1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14, 15, 16});
	CHECK_EQ_INT(image_resize(&src, 2, 2, RESIZE_CROP, 1, &out, &err), DD_OK);
	CHECK(out.px && memcmp(out.px, "\x03\x04\x0d\x0e", 4) == 0);
	image_free(&out);
	image_free(&src);

	/* tall: 2x6 -> 2x2 keeps rows 2 and 3 */
	src = gray_img(2, 6, (const uint8_t[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
	CHECK_EQ_INT(image_resize(&src, 2, 2, RESIZE_CROP, 1, &out, &err), DD_OK);
	CHECK(out.px && memcmp(out.px, "\x04\x05\x06\x07", 4) == 0);
	image_free(&out);
	image_free(&src);

	/* 8x2 -> 2x1: scaled to round(8/2) = 4 x 1, then columns 1..2 of that: the
	 * crop window must equal cropping the full squash */
	uint8_t v[16];
	for (int i = 0; i < 16; i++)
		v[i] = (uint8_t)(i * 15);
	src = gray_img(8, 2, v);
	struct image full;
	CHECK_EQ_INT(image_resize(&src, 4, 1, RESIZE_SQUASH, 1, &full, &err), DD_OK);
	CHECK_EQ_INT(image_resize(&src, 2, 1, RESIZE_CROP, 1, &out, &err), DD_OK);
	CHECK(out.px && full.px && out.px[0] == full.px[1] && out.px[1] == full.px[2]);
	image_free(&full);
	image_free(&out);
	image_free(&src);
}

static void test_resize_fill(void)
{
	struct dd_err err = {0};
	struct image out, again, other;
	struct image src = {4, 2, 3, malloc(24)};
	for (int i = 0; i < 24; i++)
		src.px[i] = (uint8_t)(255 - i);
	/* 4x2 -> 4x4: wr 1 > hr .5, scaled to 4 x round(2/1) = 4x2, one noise row
	 * above and one below; the original rows are in the middle */
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_FILL, 42, &out, &err), DD_OK);
	CHECK(out.w == 4 && out.h == 4 && out.c == 3);
	CHECK(out.px && memcmp(out.px + 12, src.px, 24) == 0);
	int max = 0;
	for (int i = 0; out.px && i < 12; i++) {
		max = out.px[i] > max ? out.px[i] : max;
		max = out.px[36 + i] > max ? out.px[36 + i] : max;
	}
	CHECK(max <= 254);
	/* DIGITS concatenates the same noise block on both ends */
	CHECK(out.px && memcmp(out.px, out.px + 36, 12) == 0);
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_FILL, 42, &again, &err), DD_OK);
	CHECK(again.px && memcmp(out.px, again.px, 48) == 0);
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_FILL, 43, &other, &err), DD_OK);
	CHECK(other.px && memcmp(out.px, other.px, 12) != 0);
	CHECK(other.px && memcmp(other.px + 12, src.px, 24) == 0);
	image_free(&out);
	image_free(&again);
	image_free(&other);
	image_free(&src);

	/* 2x4 -> 6x4: wr .33 < hr 1, width round(2/1) = 2, (6-2) even, two noise
	 * columns each side */
	src = gray_img(2, 4, (const uint8_t[]){1, 2, 3, 4, 5, 6, 7, 8});
	CHECK_EQ_INT(image_resize(&src, 6, 4, RESIZE_FILL, 7, &out, &err), DD_OK);
	for (int y = 0; out.px && y < 4; y++) {
		const uint8_t *r = out.px + y * 6;
		CHECK(r[2] == src.px[2 * y] && r[3] == src.px[2 * y + 1]);
		CHECK(r[0] == r[4] && r[1] == r[5]);
		CHECK(r[0] <= 254 && r[1] <= 254);
	}
	image_free(&out);
	image_free(&src);

	/* parity fix: 4x1 -> 4x4 gives height round(1/1) = 1, (4-1) odd -> 2 */
	src = gray_img(4, 1, (const uint8_t[]){9, 9, 9, 9});
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_FILL, 7, &out, &err), DD_OK);
	CHECK(out.px && memcmp(out.px + 4, "\x09\x09\x09\x09\x09\x09\x09\x09", 8) == 0);
	image_free(&out);
	image_free(&src);

	/* extreme aspect: 1000x1 -> 10x10 scales the height to 0, which becomes 1,
	 * then 2 for parity (DIGITS would fail here) */
	uint8_t *wide = calloc(1000, 1);
	src = gray_img(1000, 1, wide);
	free(wide);
	CHECK_EQ_INT(image_resize(&src, 10, 10, RESIZE_FILL, 7, &out, &err), DD_OK);
	CHECK(out.px && out.px[40] == 0 && out.px[59] == 0);
	image_free(&out);
	image_free(&src);
}

static void test_resize_half_crop(void)
{
	struct dd_err err = {0};
	struct image out;
	/* 8x2 -> 4x4: ratio (2 + .5)/2 = 1.25, scaled to round(6.4) x round(1.6) =
	 * 6x2, (4-2) even; crop columns from round(1.0) = 1, one noise row each side */
	uint8_t v[16];
	memset(v, 77, sizeof v);
	struct image src = gray_img(8, 2, v);
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_HALF_CROP, 5, &out, &err), DD_OK);
	CHECK(out.w == 4 && out.h == 4);
	CHECK(out.px && memcmp(out.px + 4, "MMMMMMMM", 8) == 0);
	CHECK(out.px && memcmp(out.px, out.px + 12, 4) == 0);
	for (int i = 0; out.px && i < 4; i++)
		CHECK(out.px[i] <= 254);
	image_free(&out);
	image_free(&src);

	/* tall: 2x8 -> 4x4, transposed case: noise columns left and right */
	src = gray_img(2, 8, v);
	CHECK_EQ_INT(image_resize(&src, 4, 4, RESIZE_HALF_CROP, 5, &out, &err), DD_OK);
	for (int y = 0; out.px && y < 4; y++) {
		CHECK(out.px[y * 4 + 1] == 77 && out.px[y * 4 + 2] == 77);
		CHECK(out.px[y * 4] == out.px[y * 4 + 3]);
	}
	image_free(&out);
	image_free(&src);

	/* equal ratios always squash, whatever the mode */
	src = gray_img(4, 2, (const uint8_t[]){0, 100, 200, 255, 0, 100, 200, 255});
	struct image sq;
	CHECK_EQ_INT(image_resize(&src, 2, 1, RESIZE_HALF_CROP, 5, &out, &err), DD_OK);
	CHECK_EQ_INT(image_resize(&src, 2, 1, RESIZE_SQUASH, 5, &sq, &err), DD_OK);
	CHECK(out.px && sq.px && memcmp(out.px, sq.px, 2) == 0);
	image_free(&sq);
	image_free(&out);
	image_free(&src);

	CHECK_EQ_INT(image_resize(&src, 2, 1, RESIZE_SQUASH, 5, &out, &err), DD_EINVAL);
	CHECK(out.px == NULL);
}

/* A large shrink and a large enlargement in one go: the sums must stay in range
 * (a constant image stays constant) and nothing reads outside the source. */
static void test_resize_constant(void)
{
	struct dd_err err = {0};
	struct image src = {97, 61, 3, malloc(97 * 61 * 3)}, out;
	memset(src.px, 255, 97 * 61 * 3);
	CHECK_EQ_INT(image_resize(&src, 7, 300, RESIZE_SQUASH, 0, &out, &err), DD_OK);
	int ok = 1;
	for (int i = 0; out.px && i < 7 * 300 * 3; i++)
		ok &= out.px[i] == 255;
	CHECK(ok);
	image_free(&out);
	memset(src.px, 0, 97 * 61 * 3);
	CHECK_EQ_INT(image_resize(&src, 256, 256, RESIZE_CROP, 0, &out, &err), DD_OK);
	ok = 1;
	for (int i = 0; out.px && i < 256 * 256 * 3; i++)
		ok &= out.px[i] == 0;
	CHECK(ok);
	image_free(&out);
	image_free(&src);
}

/* ------------------------------------------------------------------------------
 * Encoding */

static void test_encode_roundtrip(void)
{
	struct dd_err err = {0};
	for (int c = 1; c <= 3; c += 2) {
		struct image im = {37, 23, c, malloc(37 * 23 * (size_t)c)}, back;
		for (int i = 0; i < 37 * 23 * c; i++)
			im.px[i] = (uint8_t)(i * 31 + (i >> 5));
		for (int level = 0; level <= 9; level += 3) {
			uint8_t *png;
			size_t n;
			CHECK_EQ_INT(image_encode_png(&im, level, &png, &n, &err), DD_OK);
			CHECK_EQ_INT(image_sniff(png, n), IMAGE_PNG);
			CHECK_EQ_INT(image_decode(png, n, "r.png", 0, &back, &err), DD_OK);
			CHECK(back.w == 37 && back.h == 23 && back.c == c);
			CHECK(back.px && memcmp(back.px, im.px, 37 * 23 * (size_t)c) == 0);
			image_free(&back);
			free(png);
		}
		/* smooth content for JPEG */
		for (int y = 0; y < 23; y++)
			for (int x = 0; x < 37; x++)
				for (int k = 0; k < c; k++)
					im.px[(y * 37 + x) * c + k] = (uint8_t)(40 + x * 3 + y * 2 + k * 20);
		uint8_t *jpg;
		size_t n;
		CHECK_EQ_INT(image_encode_jpeg(&im, 90, &jpg, &n, &err), DD_OK);
		CHECK_EQ_INT(image_sniff(jpg, n), IMAGE_JPEG);
		CHECK_EQ_INT(image_decode(jpg, n, "r.jpg", 0, &back, &err), DD_OK);
		CHECK(back.w == 37 && back.h == 23 && back.c == c);
		int worst = 0;
		for (int i = 0; back.px && i < 37 * 23 * c; i++) {
			int d = abs(back.px[i] - im.px[i]);
			worst = d > worst ? d : worst;
		}
		CHECK(worst <= 10);
		image_free(&back);
		free(jpg);
		image_free(&im);
	}
}

static void test_encode_refused(void)
{
	struct dd_err err = {0};
	struct image im = {2, 2, 1, (uint8_t *)"\x01\x02\x03\x04"};
	uint8_t *out = (uint8_t *)&err;
	size_t n = 9;
	CHECK_EQ_INT(image_encode_png(&im, 10, &out, &n, &err), DD_EINVAL);
	CHECK(out == NULL && n == 0);
	CHECK_EQ_INT(image_encode_jpeg(&im, 0, &out, &n, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "quality 0");
	struct image empty = {0};
	CHECK_EQ_INT(image_encode_png(&empty, 6, &out, &n, &err), DD_EINVAL);
}

/* A raw Datum's data: C×H×W, colour planes B, G, R; gray is its one plane. */
static void test_planes(void)
{
	uint8_t px[] = { 1, 2, 3, 4, 5, 6 }; /* two RGB pixels */
	struct image img = { 2, 1, 3, px };
	uint8_t p8[6], back[6];
	float pf[6];
	image_to_planes(&img, p8, NULL);
	image_to_planes(&img, NULL, pf);
	static const uint8_t want[] = { 3, 6, 2, 5, 1, 4 };
	for (int i = 0; i < 6; i++) {
		CHECK_EQ_INT(p8[i], want[i]);
		CHECK(pf[i] == (float)want[i]);
	}
	struct image out = { 2, 1, 3, back };
	image_from_planes(&out, p8);
	CHECK(memcmp(back, px, 6) == 0);
	struct image gray = { 3, 1, 1, px };
	image_to_planes(&gray, p8, NULL);
	CHECK(memcmp(p8, px, 3) == 0);
}

int main(void)
{
	RUN(test_names_and_sniff);
	RUN(test_planes);
	RUN(test_png_gray_rgb);
	RUN(test_png_alpha_on_white);
	RUN(test_png_16bit);
	RUN(test_png_palette_trns);
	RUN(test_png_interlaced);
	RUN(test_png_refused);
	RUN(test_png_huge_header);
	RUN(test_jpeg_variants);
	RUN(test_jpeg_cmyk);
	RUN(test_jpeg_exif_orientation);
	RUN(test_jpeg_orientations_all);
	RUN(test_jpeg_exif_malformed);
	RUN(test_png_exif_orientation);
	RUN(test_jpeg_refused);
	RUN(test_pnm);
	RUN(test_bmp);
	RUN(test_refused_common);
	RUN(test_channels);
	RUN(test_resize_identity_and_squash);
	RUN(test_resize_crop);
	RUN(test_resize_fill);
	RUN(test_resize_half_crop);
	RUN(test_resize_constant);
	RUN(test_encode_roundtrip);
	RUN(test_encode_refused);
	return check_summary();
}
