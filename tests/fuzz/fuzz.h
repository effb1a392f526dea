/* fuzz.h — what every libFuzzer target in tests/fuzz/ shares: libFuzzer's entry
 * point, and FUZZ_REQUIRE, an invariant that traps (so the fuzzer keeps the input)
 * unless the unit test that includes the target has defined it as a CHECK first. */
#ifndef DD_FUZZ_H
#define DD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#ifndef FUZZ_REQUIRE
#define FUZZ_REQUIRE(cond)               \
	do {                             \
		if (!(cond))             \
			__builtin_trap(); \
	} while (0)
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
