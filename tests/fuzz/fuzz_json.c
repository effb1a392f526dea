/* fuzz_json.c — libFuzzer target for the one JSON entry point (common/json.c).
 *
 * Every input goes through json_parse.  It either fails with DD_EINVAL and a
 * message that starts with the name it was given, or gives a tree no deeper than
 * JSON_MAX_DEPTH that cJSON prints as valid UTF-8 and that json_parse takes back.
 * json_utf8_check is compared with a plain code-point decoder written here (no
 * shared code), and json_utf8_fix must give valid UTF-8, equal to the input when
 * the input was valid.  AddressSanitizer catches any read past the input (which
 * is not NUL-terminated here) and LeakSanitizer any leak on an error path; a stack
 * overflow in cJSON (what 800 nested '[' did to the server) is a crash.
 *
 * Not part of `make test` (it needs clang):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -o build/fuzz_json \
 *     tests/fuzz/fuzz_json.c common/json.c common/fsutil.c common/err.c common/log.c -lcjson
 *   mkdir -p build/fuzz-json && build/fuzz_json -max_total_time=60 -max_len=4096 build/fuzz-json
 * tests/unit/test_json.c includes this file and feeds it seeded mutations, so the
 * target always compiles and its checks run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/json.h"

#include "fuzz.h"

static int tree_depth(const cJSON *j)
{
	int d = 0;
	if (!cJSON_IsArray(j) && !cJSON_IsObject(j))
		return 0;
	for (const cJSON *c = j->child; c; c = c->next) {
		int k = tree_depth(c);
		if (k > d)
			d = k;
	}
	return d + 1;
}

/* The reference: the offset of the first byte that does not start a valid
 * sequence, decoding code points and checking ranges after the fact. */
static size_t ref_utf8(const uint8_t *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint8_t c = s[i];
		size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		if (!n || i + n > len)
			return i;
		uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1fu : n == 3 ? c & 0x0fu : c & 0x07u;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] >> 6) != 2)
				return i;
			cp = cp << 6 | (s[i + k] & 0x3fu);
		}
		static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += n;
	}
	return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes, so that ASan sees a read past the end */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);

	cJSON *j = (cJSON *)1;
	struct dd_err err = { 0 };
	int rc = json_parse(text, size, "fuzz", &j, &err);
	if (rc != DD_OK) {
		FUZZ_REQUIRE(rc == DD_EINVAL);
		FUZZ_REQUIRE(j == NULL);
		FUZZ_REQUIRE(err.code == rc && memchr(err.msg, 0, sizeof err.msg) && strncmp(err.msg, "fuzz: ", 6) == 0);
	} else {
		FUZZ_REQUIRE(j != NULL);
		FUZZ_REQUIRE(tree_depth(j) <= JSON_MAX_DEPTH);
		char *out = cJSON_PrintUnformatted(j);
		if (out) {
			size_t n = strlen(out);
			FUZZ_REQUIRE(json_utf8_check(out, n, NULL) == n);
			cJSON *back = NULL;
			FUZZ_REQUIRE(json_parse(out, n, "again", &back, NULL) == DD_OK);
			cJSON_Delete(back);
			free(out);
		}
		cJSON_Delete(j);
	}

	const char *why = NULL;
	size_t at = json_utf8_check(text, size, &why);
	FUZZ_REQUIRE(at == ref_utf8(data, size));
	FUZZ_REQUIRE(at == size || why != NULL);
	size_t n = 0;
	char *fixed = json_utf8_fix(text, size, &n);
	if (fixed) {
		FUZZ_REQUIRE(json_utf8_check(fixed, n, NULL) == n);
		if (at == size)
			FUZZ_REQUIRE(n == size && memcmp(fixed, text, size) == 0);
		free(fixed);
	}
	free(text);
	return 0;
}
