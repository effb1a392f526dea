/* test_fuzz_image.c — the image fuzz target (tests/fuzz/fuzz_image.c) on seeded
 * mutations of real encodings: PNG (grey, colour), JPEG (grey, colour), PPM, PGM
 * and BMP.  Byte flips, overwrites, insertions, deletions and truncations; every
 * result must be a clean decode or a clean error, never a crash (run it under
 * `make asan` to catch reads past the input). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mutate.h"

/* The fuzz target's invariants become CHECKs here instead of traps. */
#define FUZZ_REQUIRE(cond) CHECK(cond)
#include "../fuzz/fuzz_image.c"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_rand(void)
{
	return (uint32_t)(mutate_xorshift64(&rng) >> 16);
}

/* A small picture with some structure (a gradient and a square), w×h×c. */
static struct image picture(int w, int h, int c)
{
	struct image im = { w, h, c, malloc((size_t)w * h * c) };
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int k = 0; k < c; k++)
				im.px[((size_t)y * w + x) * c + k] =
					(uint8_t)((x * 7 + y * 3 + k * 50) ^ (x > w / 3 && x < w / 2 && y > h / 4 ? 0xff : 0));
	return im;
}

static void add(uint8_t **seeds, size_t *lens, int *n, uint8_t *data, size_t len)
{
	seeds[*n] = data;
	lens[(*n)++] = len;
}

/* A PNM or BMP file of im, by hand (the program decodes these, it does not write them). */
static void add_pnm(uint8_t **seeds, size_t *lens, int *n, const struct image *im)
{
	char head[64];
	int hl = snprintf(head, sizeof head, "P%d\n%d %d\n255\n", im->c == 3 ? 6 : 5, im->w, im->h);
	size_t px = (size_t)im->w * im->h * im->c;
	uint8_t *b = malloc((size_t)hl + px);
	memcpy(b, head, (size_t)hl);
	memcpy(b + hl, im->px, px);
	add(seeds, lens, n, b, (size_t)hl + px);
}

static void add_bmp(uint8_t **seeds, size_t *lens, int *n, const struct image *im)
{
	size_t row = ((size_t)im->w * 3 + 3) & ~(size_t)3, size = 54 + row * im->h;
	uint8_t *b = calloc(1, size);
	b[0] = 'B', b[1] = 'M';
	uint32_t v[] = { (uint32_t)size, 0, 54, 40, (uint32_t)im->w, (uint32_t)im->h };
	memcpy(b + 2, &v[0], 4), memcpy(b + 10, &v[2], 4), memcpy(b + 14, &v[3], 4);
	memcpy(b + 18, &v[4], 4), memcpy(b + 22, &v[5], 4);
	b[26] = 1, b[28] = 24;
	for (int y = 0; y < im->h; y++)
		for (int x = 0; x < im->w; x++)
			for (int k = 0; k < 3; k++)
				b[54 + (size_t)(im->h - 1 - y) * row + (size_t)x * 3 + (2 - k)] =
					im->px[((size_t)y * im->w + x) * im->c + (im->c == 3 ? k : 0)];
	add(seeds, lens, n, b, size);
}

static void test_decoders_on_mutations(void)
{
	uint8_t *seeds[8];
	size_t lens[8];
	int n = 0;
	struct dd_err err;
	struct image colour = picture(23, 17, 3), grey = picture(9, 30, 1);
	uint8_t *out;
	size_t len;
	CHECK_EQ_INT(image_encode_png(&colour, 6, &out, &len, &err), DD_OK);
	add(seeds, lens, &n, out, len);
	CHECK_EQ_INT(image_encode_png(&grey, 0, &out, &len, &err), DD_OK);
	add(seeds, lens, &n, out, len);
	CHECK_EQ_INT(image_encode_jpeg(&colour, 90, &out, &len, &err), DD_OK);
	add(seeds, lens, &n, out, len);
	CHECK_EQ_INT(image_encode_jpeg(&grey, 50, &out, &len, &err), DD_OK);
	add(seeds, lens, &n, out, len);
	static uint8_t pal[768];
	for (int i = 0; i < 768; i++)
		pal[i] = (uint8_t)(i * 37);
	struct image idx = { grey.w, grey.h, 1, grey.px };
	CHECK_EQ_INT(image_encode_png_palette(&idx, pal, 256, &out, &len, &err), DD_OK); /* a label's seed */
	add(seeds, lens, &n, out, len);
	add_pnm(seeds, lens, &n, &colour);
	add_pnm(seeds, lens, &n, &grey);
	add_bmp(seeds, lens, &n, &colour);
	/* every seed decodes as it is */
	for (int s = 0; s < n; s++) {
		struct image im = { 0 };
		CHECK_EQ_INT(image_decode(seeds[s], lens[s], NULL, 0, &im, &err), DD_OK);
		image_free(&im);
	}
	int before = check_current_failed, decoded = 0, refused = 0;
	for (int iter = 0; iter < 40000 && check_current_failed == before; iter++) {
		int s = (int)(next_rand() % (uint32_t)n);
		size_t len0 = lens[s], m_len = len0;
		uint8_t *m = malloc(len0 + 16);
		memcpy(m, seeds[s], len0);
		int edits = 1 + (int)(next_rand() % 6);
		for (int e = 0; e < edits; e++)
			mutate_bytes(m, &m_len, len0 + 16, next_rand(), 5);
		/* an exact-size copy, so that ASan sees a read one byte past the input */
		uint8_t *exact = malloc(m_len ? m_len : 1);
		memcpy(exact, m, m_len);
		struct image probe = { 0 };
		struct dd_err e2 = { 0 };
		if (image_decode(exact, m_len, NULL, FUZZ_MAX_PIXELS, &probe, &e2) == DD_OK)
			decoded++;
		else
			refused++;
		image_free(&probe);
		LLVMFuzzerTestOneInput(exact, m_len);
		free(exact);
		free(m);
	}
	printf("  %d mutations decoded, %d refused with a message\n", decoded, refused);
	CHECK(decoded > 1000 && refused > 1000); /* the run reached both sides */
	for (int s = 0; s < n; s++)
		free(seeds[s]);
	image_free(&colour);
	image_free(&grey);
}

int main(void)
{
	RUN(test_decoders_on_mutations);
	return check_summary();
}
