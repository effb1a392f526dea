/* test_roster.c — the roster CSV parser (app/accounts/roster.c): names and roles, the
 * header, quotes, CRLF, comments; every bad line named in one message, the
 * roster refused whole; the caps; and a seeded mutation run through the fuzz
 * target (tests/fuzz/fuzz_roster.c). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../app/accounts/roster.h"
#include "check.h"
#include "mutate.h"

#define FUZZ_REQUIRE(cond) CHECK(cond)
#include "../fuzz/fuzz_roster.c"

static int parse(const char *text, struct roster_line **lines, int *n, struct dd_err *err)
{
	return roster_parse(text, strlen(text), lines, n, err);
}

static void test_names_and_roles(void)
{
	struct roster_line *l = NULL;
	int n = 0;
	struct dd_err err = { 0 };
	const char *text = "Name,Role\r\n ann \r\n\r\n# a comment\n\"ben.o\" , instructor\ncat,learner\nd_e-f,\n";
	CHECK_EQ_INT(parse(text, &l, &n, &err), DD_OK);
	CHECK_EQ_INT(n, 4);
	if (n == 4) {
		CHECK_STR(l[0].name, "ann");
		CHECK_EQ_INT(l[0].role, ROLE_LEARNER);
		CHECK_EQ_INT(l[0].line, 2);
		CHECK_STR(l[1].name, "ben.o");
		CHECK_EQ_INT(l[1].role, ROLE_INSTRUCTOR);
		CHECK_EQ_INT(l[1].line, 5);
		CHECK_STR(l[2].name, "cat");
		CHECK_EQ_INT(l[2].role, ROLE_LEARNER);
		CHECK_STR(l[3].name, "d_e-f");
		CHECK_EQ_INT(l[3].role, ROLE_LEARNER);
	}
	free(l);
	/* no header, no final newline; a name "name" after the first line is a name */
	CHECK_EQ_INT(parse("zed\nname", &l, &n, &err), DD_OK);
	CHECK_EQ_INT(n, 2);
	if (n == 2)
		CHECK_STR(l[1].name, "name");
	free(l);
	/* a quoted field with a doubled quote is one field; the name is then refused */
	CHECK_EQ_INT(parse("\"a\"\"b\"\n", &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "line 1: \"a?b\": name: only letters") != NULL);
}

static void test_bad_lines_named_together(void)
{
	struct roster_line *l = (void *)1;
	int n = 7;
	struct dd_err err = { 0 };
	const char *text = "ann\n-x\nANN\nbob,admin\ncid,teacher\ndan,learner,extra\n\"eve\n"
			   "abcdefghijklmnopqrstuvwxyz0123456789\nfay\n";
	CHECK_EQ_INT(parse(text, &l, &n, &err), DD_EINVAL);
	CHECK(l == NULL);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(err.code, DD_EINVAL);
	static const char *const want[] = {
		"line 2: \"-x\": name: must start with a letter or a digit",
		"; line 3: ANN is already on line 1",
		"; line 4: bob: role \"admin\": expected learner or instructor",
		"; line 5: cid: role \"teacher\": expected learner or instructor",
		"; line 6: expected name[,role], found more than two fields",
		"; line 7: a quote is not closed",
		"; line 8: \"abcdefghijklmnopqrstuvwxyz0123456789\": name: 1 to 32 characters",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (!strstr(err.msg, want[i])) {
			fprintf(stderr, "  missing: %s\n  in: %s\n", want[i], err.msg);
			CHECK(0);
		}
	CHECK(strstr(err.msg, "line 1:") == NULL && strstr(err.msg, "line 9:") == NULL);
	/* "local" is never an account's name */
	CHECK_EQ_INT(parse("local\n", &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "line 1: \"local\": name: \"local\" is the user") != NULL);
}

static void test_empty_and_caps(void)
{
	struct roster_line *l = NULL;
	int n = 0;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(parse("", &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "no names") != NULL);
	CHECK_EQ_INT(parse("name,role\n# nobody\n\n", &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "no names") != NULL);
	char nul[] = "ann\nb\0b\n";
	CHECK_EQ_INT(roster_parse(nul, sizeof nul - 1, &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "line 2: a NUL byte") != NULL);
	/* one line too many */
	size_t cap = (ROSTER_MAX_LINES + 1) * 8 + 1;
	char *big = malloc(cap), *p = big;
	for (int i = 0; i <= ROSTER_MAX_LINES; i++)
		p += sprintf(p, "u%d\n", i);
	CHECK_EQ_INT(parse(big, &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "more than 1000 accounts") != NULL);
	big[strlen(big) - strlen("u1000\n")] = 0;
	CHECK_EQ_INT(parse(big, &l, &n, &err), DD_OK);
	CHECK_EQ_INT(n, ROSTER_MAX_LINES);
	free(l);
	free(big);
	/* over the byte cap, refused before reading */
	char *huge = malloc(ROSTER_MAX_BYTES + 2);
	memset(huge, 'a', ROSTER_MAX_BYTES + 1);
	huge[ROSTER_MAX_BYTES + 1] = 0;
	CHECK_EQ_INT(parse(huge, &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "at most") != NULL);
	free(huge);
	/* a long report ends with an ellipsis instead of overflowing */
	char *many = malloc(200 * 8), *q = many;
	for (int i = 0; i < 200; i++)
		q += sprintf(q, "-%d\n", i);
	CHECK_EQ_INT(parse(many, &l, &n, &err), DD_EINVAL);
	CHECK(strstr(err.msg, "; …") != NULL);
	CHECK(strlen(err.msg) < sizeof err.msg);
	free(many);
}

static uint32_t rng = 12345;
static uint32_t next_rand(void)
{
	return mutate_xorshift32(&rng);
}

static void test_fuzz_mutations(void)
{
	static const char *const seeds[] = {
		"name,role\nann\nben,instructor\n\"c.d\",learner\n",
		"a\r\nb\r\n# x\r\n\"q\"\"q\",\n",
		"x,y,z\n\"open\n-bad\nok\n",
	};
	char buf[256];
	for (int iter = 0; iter < 5000; iter++) {
		const char *s = seeds[next_rand() % 3];
		size_t len = strlen(s);
		memcpy(buf, s, len);
		int edits = 1 + (int)(next_rand() % 6);
		for (int e = 0; e < edits; e++) {
			uint32_t op = next_rand() % 3, at = len ? next_rand() % (uint32_t)len : 0;
			static const char alphabet[] = "ab,\"\n\r# -._\0\x80Zlocal";
			char ch = alphabet[next_rand() % (sizeof alphabet - 1)];
			if (op == 0 && len)
				buf[at] = ch;
			else if (op == 1 && len < sizeof buf - 1) {
				memmove(buf + at + 1, buf + at, len - at);
				buf[at] = ch;
				len++;
			} else if (len) {
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
			}
		}
		LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
	}
}

int main(void)
{
	RUN(test_names_and_roles);
	RUN(test_bad_lines_named_together);
	RUN(test_empty_and_caps);
	RUN(test_fuzz_mutations);
	return check_summary();
}
