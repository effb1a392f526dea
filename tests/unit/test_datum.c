/* test_datum.c — Datum and BlobProto: byte-exact encodings checked against bytes
 * written out by hand from the protobuf spec, round trips, the legacy and shape
 * forms of BlobProto, packed and unpacked repeated fields, unknown fields, every
 * kind of malformed input refused with a message, every truncation of a valid
 * message, and a seeded mutation run through the fuzz target. */
#define _GNU_SOURCE
#include <stdint.h>

#include "../../datasets/datum.h"
#include "check.h"
#include "mutate.h"

/* The fuzz target's invariants become CHECKs here instead of traps. */
#define FUZZ_REQUIRE(cond) CHECK(cond)
#include "../fuzz/fuzz_datum.c"

#define BYTES(...) ((const uint8_t[]){ __VA_ARGS__ }), sizeof((const uint8_t[]){ __VA_ARGS__ })

static int same_bytes(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	if (alen != blen) {
		fprintf(stderr, "  length %zu != expected %zu\n", alen, blen);
		return 0;
	}
	for (size_t i = 0; i < alen; i++)
		if (a[i] != b[i]) {
			fprintf(stderr, "  byte %zu: %02x != expected %02x\n", i, a[i], b[i]);
			return 0;
		}
	return 1;
}

/* Decode from an exact-size heap copy, so that valgrind sees any read past the end. */
static int decode_datum_exact(const uint8_t *bytes, size_t n, struct datum *d, struct dd_err *err)
{
	uint8_t *copy = malloc(n ? n : 1);
	memcpy(copy, bytes, n);
	int rc = datum_decode(copy, n, d, err);
	/* d->data points into the copy: check what we need before freeing it */
	if (rc == DD_OK && d->data) {
		static uint8_t keep[256];
		size_t k = d->data_len < sizeof keep ? d->data_len : sizeof keep;
		memcpy(keep, d->data, k);
		d->data = keep;
	}
	free(copy);
	return rc;
}

static int decode_blob_exact(const uint8_t *bytes, size_t n, struct blob *b, struct dd_err *err)
{
	uint8_t *copy = malloc(n ? n : 1);
	memcpy(copy, bytes, n);
	int rc = blob_decode(copy, n, b, err);
	free(copy);
	return rc;
}

static void test_datum_encoding_is_byte_exact(void)
{
	const uint8_t pixels[] = "abcdef";
	struct datum d = { .channels = 3, .height = 2, .width = 1, .label = 7, .data = pixels, .data_len = 6 };
	uint8_t *out;
	size_t len;
	struct dd_err err;
	CHECK_EQ_INT(datum_encode(&d, &out, &len, &err), DD_OK);
	CHECK(same_bytes(out, len, BYTES(0x08, 3, 0x10, 2, 0x18, 1, 0x22, 6, 'a', 'b', 'c', 'd', 'e', 'f', 0x28, 7)));
	free(out);

	/* a two-byte varint, and `encoded` written last and only when true */
	d.label = 300;
	d.encoded = 1;
	CHECK_EQ_INT(datum_encode(&d, &out, &len, &err), DD_OK);
	CHECK(same_bytes(out, len,
			 BYTES(0x08, 3, 0x10, 2, 0x18, 1, 0x22, 6, 'a', 'b', 'c', 'd', 'e', 'f', 0x28, 0xac, 0x02,
			       0x38, 1)));
	free(out);

	/* a negative int32 is ten bytes, sign-extended */
	struct datum neg = { .channels = 1, .height = 1, .width = 0, .label = -2 };
	CHECK_EQ_INT(datum_encode(&neg, &out, &len, &err), DD_OK);
	CHECK(same_bytes(out, len,
			 BYTES(0x08, 1, 0x10, 1, 0x18, 0, 0x28, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			       0xff, 0x01)));
	free(out);

	/* float_data is not packed in caffe.proto: one fixed32 field per value */
	float f[2] = { 1.0f, -2.0f };
	struct datum fd = { .channels = 1, .height = 1, .width = 2, .float_data = f, .n_float = 2 };
	CHECK_EQ_INT(datum_encode(&fd, &out, &len, &err), DD_OK);
	CHECK(same_bytes(out, len,
			 BYTES(0x08, 1, 0x10, 1, 0x18, 2, 0x28, 0, 0x35, 0, 0, 0x80, 0x3f, 0x35, 0, 0, 0, 0xc0)));
	free(out);
}

/* d encoded into *out (caller frees) and decoded back into *back, which borrows
 * from *out; either step failing is a failed check. */
static void round_trip(const struct datum *d, uint8_t **out, size_t *len, struct datum *back)
{
	struct dd_err err;
	CHECK_EQ_INT(datum_encode(d, out, len, &err), DD_OK);
	CHECK_EQ_INT(datum_decode(*out, *len, back, &err), DD_OK);
}

static void test_datum_round_trip_raw_and_encoded(void)
{
	size_t n = 3 * 64 * 48;
	uint8_t *px = malloc(n);
	for (size_t i = 0; i < n; i++)
		px[i] = (uint8_t)(i * 31 + 7);
	struct datum d = { .channels = 3, .height = 64, .width = 48, .label = 9, .data = px, .data_len = n };
	uint8_t *out;
	size_t len;
	struct datum back;
	round_trip(&d, &out, &len, &back);
	CHECK_EQ_INT(back.channels, 3);
	CHECK_EQ_INT(back.height, 64);
	CHECK_EQ_INT(back.width, 48);
	CHECK_EQ_INT(back.label, 9);
	CHECK_EQ_INT(back.encoded, 0);
	CHECK_EQ_INT(back.data_len, n);
	CHECK(back.data && memcmp(back.data, px, n) == 0);
	CHECK(back.data >= out && back.data + back.data_len <= out + len); /* borrowed, not copied */
	CHECK(back.float_data == NULL && back.n_float == 0);
	datum_free(&back);
	free(out);

	/* an encoded image: the bytes of a PNG file, opaque to the Datum */
	const uint8_t png[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R' };
	struct datum e = { .channels = 1, .height = 28, .width = 28, .label = 4, .encoded = 1, .data = png,
			   .data_len = sizeof png };
	round_trip(&e, &out, &len, &back);
	CHECK_EQ_INT(back.encoded, 1);
	CHECK_EQ_INT(back.channels, 1);
	CHECK_EQ_INT(back.height, 28);
	CHECK_EQ_INT(back.label, 4);
	CHECK_EQ_INT(back.data_len, sizeof png);
	CHECK(memcmp(back.data, png, sizeof png) == 0);
	datum_free(&back);
	free(out);

	/* float_data round trip, and an empty-but-present data field survives */
	float f[3] = { 0.5f, -1e30f, 3.25f };
	struct datum fl = { .channels = 3, .height = 1, .width = 1, .data = png, .data_len = 0, .float_data = f,
			    .n_float = 3 };
	round_trip(&fl, &out, &len, &back);
	CHECK_EQ_INT(back.n_float, 3);
	CHECK(back.float_data && memcmp(back.float_data, f, sizeof f) == 0);
	CHECK(back.data != NULL && back.data_len == 0);
	datum_free(&back);
	CHECK(back.float_data == NULL);
	free(out);
	free(px);
	datum_free(NULL);
}

static void test_datum_packed_and_unpacked_floats(void)
{
	struct datum d;
	struct dd_err err;
	/* packed (field 6, wire type 2) then one unpacked value: both are collected */
	CHECK_EQ_INT(datum_decode(BYTES(0x32, 8, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0x35, 0, 0, 0x40, 0x40), &d, &err),
		     DD_OK);
	CHECK_EQ_INT(d.n_float, 3);
	if (d.n_float == 3) {
		CHECK(d.float_data[0] == 1.0f);
		CHECK(d.float_data[1] == 2.0f);
		CHECK(d.float_data[2] == 3.0f);
	}
	datum_free(&d);
	/* an empty packed run is no values */
	CHECK_EQ_INT(datum_decode(BYTES(0x32, 0), &d, &err), DD_OK);
	CHECK(d.n_float == 0 && d.float_data == NULL);
	/* the empty message is a valid, all-default Datum */
	CHECK_EQ_INT(datum_decode(NULL, 0, &d, &err), DD_OK);
	CHECK(d.channels == 0 && d.data == NULL && d.label == 0);
}

static void test_datum_unknown_fields_are_skipped(void)
{
	struct datum d;
	struct dd_err err;
	/* fields 15 (varint), 16 (fixed64), 17 (bytes), 18 (fixed32) around known ones.
	 * Named arrays, not BYTES(): d.data points into the input, and a compound
	 * literal inside CHECK_EQ_INT's block is gone by the memcmp below. */
	static const uint8_t unknown[] = { 0x78, 0x96, 0x01, 0x08, 3, 0x81, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x10, 2,
					   0x8a, 0x01, 2, 'x', 'y', 0x18, 1, 0x22, 2, 'h', 'i', 0x95, 0x01, 9, 9, 9,
					   9, 0x28, 5, 0x38, 1 };
	static const uint8_t twice[] = { 0x28, 1, 0x22, 1, 'a', 0x28, 2, 0x22, 1, 'b' };
	CHECK_EQ_INT(datum_decode(unknown, sizeof unknown, &d, &err), DD_OK);
	CHECK_EQ_INT(d.channels, 3);
	CHECK_EQ_INT(d.height, 2);
	CHECK_EQ_INT(d.width, 1);
	CHECK_EQ_INT(d.label, 5);
	CHECK_EQ_INT(d.encoded, 1);
	CHECK(d.data_len == 2 && memcmp(d.data, "hi", 2) == 0);
	datum_free(&d);
	/* a later occurrence of a singular field replaces the earlier one */
	CHECK_EQ_INT(datum_decode(twice, sizeof twice, &d, &err), DD_OK);
	CHECK_EQ_INT(d.label, 2);
	CHECK(d.data_len == 1 && d.data[0] == 'b');
	datum_free(&d);
}

static void test_blob_legacy_encoding_is_byte_exact(void)
{
	float v[2] = { 1.0f, 2.0f };
	struct blob b = { .num = 1, .channels = 1, .height = 1, .width = 2, .data = v, .count = 2 };
	uint8_t *out;
	size_t len;
	struct dd_err err;
	CHECK_EQ_INT(blob_encode(&b, &out, &len, &err), DD_OK);
	CHECK(same_bytes(out, len,
			 BYTES(0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x2a, 8, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40)));
	struct blob back;
	CHECK_EQ_INT(blob_decode(out, len, &back, &err), DD_OK);
	CHECK(back.num == 1 && back.channels == 1 && back.height == 1 && back.width == 2 && back.count == 2);
	CHECK(back.data && back.data[0] == 1.0f && back.data[1] == 2.0f);
	blob_free(&back);
	free(out);

	/* a DIGITS-sized mean, 3x256x256 */
	size_t n = 3 * 256 * 256;
	float *m = malloc(n * sizeof *m);
	for (size_t i = 0; i < n; i++)
		m[i] = (float)(i % 256);
	struct blob mean = { .num = 1, .channels = 3, .height = 256, .width = 256, .data = m, .count = n };
	CHECK_EQ_INT(blob_encode(&mean, &out, &len, &err), DD_OK);
	CHECK_EQ_INT(len, 10 + 1 + 3 + n * 4); /* 256 is a 2-byte varint; the payload length 3 bytes */
	CHECK_EQ_INT(blob_decode(out, len, &back, &err), DD_OK);
	CHECK(back.channels == 3 && back.height == 256 && back.width == 256 && back.count == n);
	CHECK(back.data && memcmp(back.data, m, n * sizeof *m) == 0);
	blob_free(&back);
	blob_free(NULL);
	free(out);
	free(m);

	/* encoding refuses a shape that disagrees with the values */
	mean.count = 5;
	CHECK_EQ_INT(blob_encode(&mean, &out, &len, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "does not match");
}

static void test_blob_shape_double_and_unpacked(void)
{
	struct blob b;
	struct dd_err err;
	/* shape [3,2,2] packed; 12 packed floats */
	uint8_t buf[64] = { 0x3a, 5, 0x0a, 3, 3, 2, 2, 0x2a, 48 };
	for (int i = 0; i < 12; i++) {
		float f = (float)i + 0.5f;
		memcpy(buf + 9 + 4 * i, &f, 4); /* little-endian host, as every deepdesk target */
	}
	CHECK_EQ_INT(blob_decode(buf, 9 + 48, &b, &err), DD_OK);
	CHECK(b.num == 1 && b.channels == 3 && b.height == 2 && b.width == 2 && b.count == 12);
	CHECK(b.data && b.data[11] == 11.5f);
	blob_free(&b);

	/* shape dims unpacked, a 2-axis shape (right-aligned: 1x1xHxW), legacy fields
	 * present but overridden by shape */
	CHECK_EQ_INT(decode_blob_exact(BYTES(0x08, 7, 0x10, 7, 0x3a, 4, 0x08, 1, 0x08, 2, 0x2a, 8, 0, 0, 0x80, 0x3f,
					     0, 0, 0, 0x40),
				       &b, &err),
		     DD_OK);
	CHECK(b.num == 1 && b.channels == 1 && b.height == 1 && b.width == 2 && b.count == 2);
	blob_free(&b);

	/* double_data (field 8, packed) wins over data and is narrowed to float */
	CHECK_EQ_INT(decode_blob_exact(BYTES(0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x42, 16, 0, 0, 0, 0, 0, 0, 0xf8,
					     0x3f, 0, 0, 0, 0, 0, 0, 0xd0, 0xbf),
				       &b, &err),
		     DD_OK);
	CHECK(b.count == 2 && b.data && b.data[0] == 1.5f && b.data[1] == -0.25f);
	blob_free(&b);

	/* unpacked floats (field 5, fixed32) and unpacked doubles, diff fields dropped */
	CHECK_EQ_INT(decode_blob_exact(BYTES(0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x2d, 0, 0, 0x80, 0x3f, 0x32, 4, 1,
					     2, 3, 4, 0x2d, 0, 0, 0, 0x40, 0x4a, 0),
				       &b, &err),
		     DD_OK);
	CHECK(b.count == 2 && b.data && b.data[0] == 1.0f && b.data[1] == 2.0f);
	blob_free(&b);
	CHECK_EQ_INT(decode_blob_exact(BYTES(0x3a, 2, 0x08, 1, 0x41, 0, 0, 0, 0, 0, 0, 0x10, 0x40), &b, &err),
		     DD_OK);
	CHECK(b.count == 1 && b.data && b.data[0] == 4.0f);
	blob_free(&b);

	/* an empty BlobProto is an empty blob */
	CHECK_EQ_INT(blob_decode(NULL, 0, &b, &err), DD_OK);
	CHECK(b.count == 0 && b.data == NULL);
}

struct bad {
	int blob; /* 0 Datum, 1 BlobProto */
	const uint8_t *bytes;
	size_t len;
	const char *says;
};

#define BAD(is_blob, says, ...) { is_blob, BYTES(__VA_ARGS__), says }

static void test_malformed_input_is_refused_with_a_message(void)
{
	/* automatic, not static: the byte arrays are compound literals of this block */
	const struct bad cases[] = {
		BAD(0, "runs past the end", 0x08),
		BAD(0, "runs past the end", 0x08, 0x80, 0x80),
		BAD(0, "longer than 10 bytes", 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		BAD(0, "longer than 10 bytes", 0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02),
		BAD(0, "claims 5 bytes", 0x22, 5, 'a'),
		BAD(0, "claims", 0x22, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'),
		BAD(0, "wire type 0 (varint)", 0x20, 5),
		BAD(0, "field 1 (channels) has wire type 5", 0x0d, 0, 0, 0, 0),
		BAD(0, "field 7 (encoded) has wire type 2", 0x3a, 0),
		BAD(0, "field 6 (float_data) has wire type 0", 0x30, 1),
		BAD(0, "negative", 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		BAD(0, "negative", 0x18, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		BAD(0, "does not fit in an int32", 0x10, 0x80, 0x80, 0x80, 0x80, 0x10),
		BAD(0, "group", 0xa3, 0x01, 0x08, 1, 0xa4, 0x01),
		BAD(0, "group", 0x0b),
		BAD(0, "wire type 6", 0x4e),
		BAD(0, "wire type 7", 0x08, 1, 0x4f, 0),
		BAD(0, "invalid field number 0", 0x00),
		BAD(0, "invalid field number", 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
		BAD(0, "not a multiple of 4", 0x32, 3, 0, 0, 0),
		BAD(0, "needs 4 bytes", 0x35, 0, 0),
		BAD(0, "needs 8 bytes", 0x79, 0, 0, 0),
		BAD(1, "does not match its 1 float values", 0x08, 1, 0x10, 1, 0x18, 1, 0x20, 2, 0x2a, 4, 0, 0, 0x80, 0x3f),
		BAD(1, "does not match its 3 float values", 0x2a, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
		BAD(1, "does not match its 0 float values", 0x3a, 0),
		BAD(1, "does not match its 1 double values", 0x3a, 3, 0x0a, 1, 2, 0x42, 8, 0, 0, 0, 0, 0, 0, 0, 0,
		    0x2a, 4, 0, 0, 0, 0, 0x2d, 0, 0, 0, 0),
		BAD(1, "more than 4 axes", 0x3a, 7, 0x0a, 5, 1, 1, 1, 1, 1),
		BAD(1, "more than 4 axes", 0x3a, 6, 0x0a, 4, 1, 1, 1, 1, 0x3a, 2, 0x08, 1),
		BAD(1, "dimension -1 is negative", 0x3a, 12, 0x0a, 10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		    0xff, 0x01),
		BAD(1, "field 4 (width) is negative", 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		BAD(1, "not a multiple of 8", 0x42, 4, 0, 0, 0, 0),
		BAD(1, "shape) has wire type 0", 0x38, 1),
		BAD(1, "claims 16 bytes", 0x3a, 16, 0x08),
		BAD(1, "runs past the end", 0x3a, 2, 0x08, 0x80),
		BAD(1, "field 1 (dim) has wire type 5", 0x3a, 5, 0x0d, 1, 0, 0, 0),
		BAD(1, "field 6 (diff) has wire type 0", 0x30, 0),
		BAD(1, "does not match", 0x08, 0xff, 0xff, 0xff, 0xff, 0x07, 0x10, 0xff, 0xff, 0xff, 0xff, 0x07, 0x18,
		    0xff, 0xff, 0xff, 0xff, 0x07, 0x20, 0xff, 0xff, 0xff, 0xff, 0x07),
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct bad *c = &cases[i];
		struct dd_err err = { 0, "" };
		int rc;
		if (c->blob) {
			struct blob b;
			rc = decode_blob_exact(c->bytes, c->len, &b, &err);
			CHECK(b.data == NULL && b.count == 0);
		} else {
			struct datum d;
			rc = decode_datum_exact(c->bytes, c->len, &d, &err);
			CHECK(d.data == NULL && d.float_data == NULL && d.channels == 0);
		}
		if (rc != DD_EINVAL || !strstr(err.msg, c->says))
			fprintf(stderr, "  case %zu: rc %d, message \"%s\", wanted \"%s\"\n", i, rc, err.msg, c->says);
		CHECK_EQ_INT(rc, DD_EINVAL);
		CHECK_CONTAINS(err.msg, c->says);
		CHECK(strncmp(err.msg, c->blob ? "BlobProto" : "Datum", c->blob ? 9 : 5) == 0);
	}
	/* the encoder refuses what the decoder would refuse */
	struct datum neg = { .channels = -1 };
	uint8_t *out;
	size_t len;
	struct dd_err err;
	CHECK_EQ_INT(datum_encode(&neg, &out, &len, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "negative");
	CHECK(out == NULL);
}

/* Every prefix of a valid message either decodes (it ends between fields) or is
 * refused; none is read past its end (each prefix is an exact-size heap copy). */
static void test_every_truncation_is_safe(void)
{
	const uint8_t pixels[] = "0123456789";
	float f[2] = { 1, 2 };
	struct datum d = { .channels = 1, .height = 2, .width = 5, .label = -3, .encoded = 1, .data = pixels,
			   .data_len = 10, .float_data = f, .n_float = 2 };
	uint8_t *out;
	size_t len;
	struct dd_err err;
	CHECK_EQ_INT(datum_encode(&d, &out, &len, &err), DD_OK);
	int ok = 0, refused = 0;
	for (size_t n = 0; n <= len; n++) {
		struct datum back;
		int rc = decode_datum_exact(out, n, &back, &err);
		if (rc == DD_OK)
			ok++;
		else {
			refused++;
			CHECK_EQ_INT(rc, DD_EINVAL);
		}
		datum_free(&back);
	}
	CHECK_EQ_INT(ok, 9); /* empty, and after each of the 8 fields */
	CHECK_EQ_INT(ok + refused, (long long)len + 1);
	free(out);

	float v[6] = { 1, 2, 3, 4, 5, 6 };
	struct blob b = { .num = 1, .channels = 1, .height = 2, .width = 3, .data = v, .count = 6 };
	CHECK_EQ_INT(blob_encode(&b, &out, &len, &err), DD_OK);
	ok = 0;
	for (size_t n = 0; n <= len; n++) {
		struct blob back;
		if (decode_blob_exact(out, n, &back, &err) == DD_OK)
			ok++;
		blob_free(&back);
	}
	/* empty; after num, channels, height (a zero axis makes count 0, as in Caffe);
	 * and whole: any other prefix disagrees with its shape */
	CHECK_EQ_INT(ok, 5);
	free(out);
}

/* A small deterministic fuzz run through the libFuzzer target: mutations of valid
 * encodings (byte flips, inserted and deleted bytes, truncations). */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
	return (uint32_t)(mutate_xorshift64(&rng) >> 16);
}

static void test_fuzz_target_on_mutations(void)
{
	const uint8_t pixels[] = "abcdefgh";
	float f[3] = { 1, -2, 3 };
	struct datum d = { .channels = 2, .height = 2, .width = 2, .label = 77, .encoded = 1, .data = pixels,
			   .data_len = 8, .float_data = f, .n_float = 3 };
	struct blob b = { .num = 1, .channels = 1, .height = 1, .width = 3, .data = f, .count = 3 };
	uint8_t *seeds[3];
	size_t seed_len[3];
	struct dd_err err;
	CHECK_EQ_INT(datum_encode(&d, &seeds[0], &seed_len[0], &err), DD_OK);
	CHECK_EQ_INT(blob_encode(&b, &seeds[1], &seed_len[1], &err), DD_OK);
	static const uint8_t shaped[] = { 0x3a, 4, 0x0a, 2, 1, 3, 0x42, 24, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0,
					  0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0x08, 0x40 };
	seeds[2] = malloc(sizeof shaped);
	memcpy(seeds[2], shaped, sizeof shaped);
	seed_len[2] = sizeof shaped;
	int before = check_current_failed;
	for (int iter = 0; iter < 20000 && check_current_failed == before; iter++) {
		int s = (int)(next_rand() % 3);
		size_t n = seed_len[s];
		uint8_t *m = malloc(n + 8);
		memcpy(m, seeds[s], n);
		int edits = 1 + (int)(next_rand() % 4);
		for (int e = 0; e < edits; e++)
			mutate_bytes(m, &n, seed_len[s] + 8, next_rand(), 4);
		uint8_t *exact = malloc(n ? n : 1);
		memcpy(exact, m, n);
		LLVMFuzzerTestOneInput(exact, n);
		free(exact);
		free(m);
	}
	for (int i = 0; i < 3; i++)
		free(seeds[i]);
}

int main(void)
{
	RUN(test_datum_encoding_is_byte_exact);
	RUN(test_datum_round_trip_raw_and_encoded);
	RUN(test_datum_packed_and_unpacked_floats);
	RUN(test_datum_unknown_fields_are_skipped);
	RUN(test_blob_legacy_encoding_is_byte_exact);
	RUN(test_blob_shape_double_and_unpacked);
	RUN(test_malformed_input_is_refused_with_a_message);
	RUN(test_every_truncation_is_safe);
	RUN(test_fuzz_target_on_mutations);
	return check_summary();
}
