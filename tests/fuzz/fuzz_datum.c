/* fuzz_datum.c — libFuzzer target for the hand-written protobuf decoders.
 *
 * Every input is given to datum_decode and blob_decode.  A decode must either
 * succeed or fail with a message; a success must survive encode → decode with the
 * same fields (so encoder and decoder agree on everything the decoder accepts).
 * AddressSanitizer catches any read past the input.
 *
 * Not part of `make test` (it needs clang and runs for as long as one lets it):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -o build/fuzz_datum \
 *         tests/fuzz/fuzz_datum.c datasets/datum.c common/err.c
 *   mkdir -p build/fuzz-corpus && build/fuzz_datum -max_total_time=60 build/fuzz-corpus
 * tests/unit/test_datum.c includes this file and feeds it mutated encodings, so the
 * target always compiles and its checks run under valgrind with the unit tests. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../datasets/datum.h"

#include "fuzz.h"

static void fuzz_datum(const uint8_t *data, size_t size)
{
	struct datum d, again;
	struct dd_err err = { 0, "" };
	uint8_t *out = NULL;
	size_t len = 0;
	if (datum_decode(data, size, &d, &err) != DD_OK) {
		FUZZ_REQUIRE(err.code == DD_EINVAL && err.msg[0] != '\0');
		FUZZ_REQUIRE(d.data == NULL && d.float_data == NULL);
		return;
	}
	FUZZ_REQUIRE(d.channels >= 0 && d.height >= 0 && d.width >= 0);
	FUZZ_REQUIRE(!d.data || (d.data >= data && d.data + d.data_len <= data + size));
	FUZZ_REQUIRE((d.n_float == 0) == (d.float_data == NULL));
	if (datum_encode(&d, &out, &len, &err) == DD_OK) {
		FUZZ_REQUIRE(datum_decode(out, len, &again, &err) == DD_OK);
		FUZZ_REQUIRE(again.channels == d.channels && again.height == d.height &&
			     again.width == d.width && again.label == d.label && again.encoded == d.encoded);
		FUZZ_REQUIRE(again.data_len == d.data_len && (!d.data_len || memcmp(again.data, d.data, d.data_len) == 0));
		FUZZ_REQUIRE(again.n_float == d.n_float &&
			     (!d.n_float || memcmp(again.float_data, d.float_data, d.n_float * sizeof(float)) == 0));
		datum_free(&again);
		free(out);
	}
	datum_free(&d);
}

static void fuzz_blob(const uint8_t *data, size_t size)
{
	struct blob b, again;
	struct dd_err err = { 0, "" };
	uint8_t *out = NULL;
	size_t len = 0;
	if (blob_decode(data, size, &b, &err) != DD_OK) {
		FUZZ_REQUIRE(err.msg[0] != '\0');
		FUZZ_REQUIRE(b.data == NULL && b.count == 0);
		return;
	}
	FUZZ_REQUIRE(b.num >= 0 && b.channels >= 0 && b.height >= 0 && b.width >= 0);
	FUZZ_REQUIRE((uint64_t)b.num * (uint64_t)b.channels * (uint64_t)b.height * (uint64_t)b.width == b.count);
	FUZZ_REQUIRE((b.count == 0) == (b.data == NULL));
	if (blob_encode(&b, &out, &len, &err) == DD_OK) {
		FUZZ_REQUIRE(blob_decode(out, len, &again, &err) == DD_OK);
		FUZZ_REQUIRE(again.num == b.num && again.channels == b.channels && again.height == b.height &&
			     again.width == b.width && again.count == b.count);
		FUZZ_REQUIRE(!b.count || memcmp(again.data, b.data, b.count * sizeof(float)) == 0);
		blob_free(&again);
		free(out);
	}
	blob_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_datum(data, size);
	fuzz_blob(data, size);
	return 0;
}
