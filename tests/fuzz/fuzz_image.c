/* fuzz_image.c — libFuzzer target for the image decoders (PNG, JPEG, PNM, BMP),
 * and what every decoded image goes through next.
 *
 * Every input is given to image_decode with a small pixel cap.  A decode must
 * either succeed or fail with a message and an empty image; a success must have
 * the size it says, survive conversion to grey and to colour, a resize to 16×16 in
 * each of DIGITS' modes, and a PNG round trip that gives back the same pixels.
 * AddressSanitizer catches any read past the input or the pixels.
 *
 * Not part of `make test` (it needs clang and runs for as long as one lets it):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -o build/fuzz_image \
 *         tests/fuzz/fuzz_image.c datasets/image.c common/err.c -lpng -lturbojpeg -lz -lm
 *   mkdir -p build/fuzz-corpus-image && build/fuzz_image -max_total_time=60 build/fuzz-corpus-image
 * tests/unit/test_fuzz_image.c includes this file and feeds it seeded mutations of
 * real encodings, so the target always compiles and its checks run in `make test`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../datasets/image.h"

#include "fuzz.h"

#define FUZZ_MAX_PIXELS (1 << 20) /* a hostile header may claim any size: this caps the work */

/* A segmentation label's decoder on the same bytes: a clean refusal, or samples
 * of a sane shape that the nearest-neighbour resize takes in every mode. */
static void label_one(const uint8_t *data, size_t size)
{
	struct image lab = { 0 };
	struct dd_err err = { 0, "" };
	enum image_label_kind kind;
	uint8_t pal[768];
	int npal = -1;
	if (image_decode_label(data, size, NULL, FUZZ_MAX_PIXELS, &lab, &kind, pal, &npal, &err) != DD_OK) {
		FUZZ_REQUIRE(err.code != DD_OK && err.msg[0] != '\0' && lab.px == NULL);
		return;
	}
	FUZZ_REQUIRE(lab.w > 0 && lab.h > 0 && lab.px != NULL && (int64_t)lab.w * lab.h <= FUZZ_MAX_PIXELS);
	FUZZ_REQUIRE(lab.c == (kind == IMAGE_LABEL_RGB ? 3 : 1) && npal >= 0 && npal <= 256);
	for (int m = RESIZE_SQUASH; m <= RESIZE_HALF_CROP; m++) {
		struct image out = { 0 };
		FUZZ_REQUIRE(image_resize_nearest(&lab, 16, 9, (enum resize_mode)m, 0, &out, &err) == DD_OK);
		FUZZ_REQUIRE(out.w == 16 && out.h == 9 && out.c == lab.c);
		image_free(&out);
	}
	image_free(&lab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image img = { 0 }, grey = { 0 }, back = { 0 };
	struct dd_err err = { 0, "" };
	label_one(data, size);
	if (image_decode(data, size, NULL, FUZZ_MAX_PIXELS, &img, &err) != DD_OK) {
		FUZZ_REQUIRE(err.code != DD_OK && err.msg[0] != '\0');
		FUZZ_REQUIRE(img.px == NULL);
		return 0;
	}
	FUZZ_REQUIRE(img.w > 0 && img.h > 0 && (img.c == 1 || img.c == 3) && img.px != NULL);
	FUZZ_REQUIRE((int64_t)img.w * img.h <= FUZZ_MAX_PIXELS);
	/* grey and colour, each resized in every mode */
	grey.w = img.w, grey.h = img.h, grey.c = img.c;
	grey.px = malloc((size_t)img.w * img.h * img.c);
	FUZZ_REQUIRE(grey.px != NULL);
	memcpy(grey.px, img.px, (size_t)img.w * img.h * img.c);
	FUZZ_REQUIRE(image_set_channels(&grey, 1, &err) == DD_OK && grey.c == 1);
	FUZZ_REQUIRE(image_set_channels(&img, 3, &err) == DD_OK && img.c == 3);
	for (int m = RESIZE_SQUASH; m <= RESIZE_HALF_CROP; m++) {
		struct image out = { 0 };
		FUZZ_REQUIRE(image_resize(&img, 16, 16, (enum resize_mode)m, 7, &out, &err) == DD_OK);
		FUZZ_REQUIRE(out.w == 16 && out.h == 16 && out.c == 3);
		image_free(&out);
		FUZZ_REQUIRE(image_resize(&grey, 16, 16, (enum resize_mode)m, 7, &out, &err) == DD_OK);
		FUZZ_REQUIRE(out.w == 16 && out.h == 16 && out.c == 1);
		image_free(&out);
	}
	/* PNG is lossless: the same pixels come back */
	uint8_t *png = NULL;
	size_t len = 0;
	FUZZ_REQUIRE(image_encode_png(&grey, 1, &png, &len, &err) == DD_OK);
	FUZZ_REQUIRE(image_decode(png, len, NULL, FUZZ_MAX_PIXELS, &back, &err) == DD_OK);
	FUZZ_REQUIRE(back.w == grey.w && back.h == grey.h && back.c == 1 &&
		     memcmp(back.px, grey.px, (size_t)grey.w * grey.h) == 0);
	free(png);
	image_free(&back);
	image_free(&grey);
	image_free(&img);
	return 0;
}
