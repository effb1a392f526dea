/* test_json.c — common/json.c, the one JSON entry point: the nesting scan (which
 * must skip brackets inside strings and escaped quotes), the UTF-8 and escape
 * checks, the parse wrapper's errors, the UTF-8 repair used for outgoing frames,
 * and a seeded mutation run through the fuzz target (tests/fuzz/fuzz_json.c). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "check.h"

#define FUZZ_REQUIRE(cond) CHECK(cond)
#include "../fuzz/fuzz_json.c"

/* n opens, middle, then n closes (caller frees) */
static char *nested(int n, const char *open, const char *close, const char *middle)
{
	return check_repeat(open, n, middle, close, n);
}

static int parse_ok(const char *s)
{
	cJSON *j = NULL;
	struct dd_err err = { 0 };
	int rc = json_parse(s, strlen(s), "t", &j, &err);
	if (rc)
		fprintf(stderr, "    (%s)\n", err.msg);
	cJSON_Delete(j);
	return rc == DD_OK;
}

/* json_parse(s) must fail with DD_EINVAL and a message containing want. */
static void expect_bad(const char *s, size_t len, const char *want)
{
	cJSON *j = (cJSON *)1;
	struct dd_err err = { 0 };
	int rc = json_parse(s, len, "body", &j, &err);
	CHECK_EQ_INT(rc, DD_EINVAL);
	CHECK(j == NULL);
	CHECK_CONTAINS(err.msg, want);
	CHECK(strncmp(err.msg, "body: ", 6) == 0);
}
#define BAD(lit, want) expect_bad(lit, sizeof lit - 1, want)

static void test_depth(void)
{
	char *s64 = nested(64, "[", "]", ""), *s65 = nested(65, "[", "]", "");
	CHECK(parse_ok(s64));
	expect_bad(s65, strlen(s65), "nested deeper than 64 levels at byte 64");
	char *o64 = nested(63, "{\"a\":", "}", "[]"), *o65 = nested(64, "{\"a\":", "}", "[1]");
	CHECK(parse_ok(o64));
	expect_bad(o65, strlen(o65), "nested deeper than 64 levels");
	/* the attack of issue 16: 800 and 100000 levels, refused at the 65th */
	char *deep = nested(100000, "[", "]", "");
	expect_bad(deep, strlen(deep), "at byte 64");
	/* unbalanced: never closed, still refused at 65 */
	expect_bad(deep, 50000, "at byte 64");
	free(s64), free(s65), free(o64), free(o65), free(deep);
	/* closing brackets that were never opened do not let the count go negative */
	BAD("]]]]]]]]]]", "malformed JSON");
}

static void test_strings_are_skipped(void)
{
	/* brackets inside strings are not nesting */
	char *inside = nested(1000, "[", "]", "");
	size_t n = strlen(inside);
	char *s = malloc(n + 16);
	snprintf(s, n + 16, "{\"x\":\"%s\"}", inside);
	CHECK(parse_ok(s));
	free(s);
	free(inside);
	/* an escaped quote does not end the string: the '[' after it are still inside */
	CHECK(parse_ok("[\"a\\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"]"));
	/* an escaped backslash before the quote: the string ends there, the [ count */
	char *deep = nested(70, "[", "]", "");
	size_t dn = strlen(deep);
	char *t = malloc(dn + 16);
	snprintf(t, dn + 16, "[\"\\\\\",%s]", deep);
	expect_bad(t, strlen(t), "nested deeper than 64");
	free(t);
	free(deep);
	CHECK(parse_ok("{\"a\":\"}}}]]]{{{\",\"b\":[\"\\\\\",\"\\\"\",\"\\/\\b\\f\\n\\r\\t\"]}"));
}

static void test_escapes(void)
{
	CHECK(parse_ok("\"\\u00e9\\u4e2d\\ud83d\\ude00\""));
	BAD("\"\\u0000\"", "\\u0000");
	BAD("\"\\ud800\"", "high surrogate");
	BAD("\"\\ud800\\u0041\"", "high surrogate");
	BAD("\"\\udc00\"", "lone low surrogate");
	BAD("\"\\u12g4\"", "4 hex digits");
	BAD("\"\\u12\"", "4 hex digits");
	BAD("\"\\x41\"", "invalid escape");
	BAD("\"\\'\"", "invalid escape");
}

static void test_utf8(void)
{
	CHECK(parse_ok("\"\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf\""));
	BAD("\"\xc0\xaf\"", "overlong");         /* '/' in two bytes */
	BAD("\"\xc1\xbf\"", "overlong");
	BAD("\"\xe0\x80\xaf\"", "overlong");     /* three bytes */
	BAD("\"\xf0\x80\x80\xaf\"", "overlong"); /* four bytes */
	BAD("\"\xed\xa0\x80\"", "surrogate");    /* U+D800 */
	BAD("\"\xed\xbf\xbf\"", "surrogate");    /* U+DFFF */
	BAD("\"\xf4\x90\x80\x80\"", "above U+10FFFF");
	BAD("\"\xf5\x80\x80\x80\"", "above U+10FFFF");
	BAD("\"\xff\"", "never UTF-8");
	BAD("\"\x80\"", "continuation byte");
	BAD("\"\xe4\xb8\"", "incomplete");
	BAD("\"\xe4\"", "incomplete");
	BAD("[\"ok\",\"\xc3\"]", "at byte 7");
	/* a NUL anywhere */
	BAD("{\"a\":\"x\0y\"}", "NUL byte at byte 7");
	BAD("{}\0", "NUL byte");
	/* outside strings, bytes that are not JSON are a syntax error */
	BAD("{\xff}", "malformed JSON at line 1, column");
	size_t at;
	const char *why = NULL;
	at = json_utf8_check("ab\xe4\xb8", 4, &why);
	CHECK_EQ_INT(at, 2);
	CHECK_CONTAINS(why, "incomplete");
	CHECK_EQ_INT(json_utf8_check("\xe4\xb8\xad", 3, NULL), 3);
}

static void test_parse_errors(void)
{
	BAD("", "empty");
	BAD("  \n ", "empty");
	BAD("{\"a\":1,}", "malformed JSON at line 1");
	BAD("{\n\n  \"a\": ]", "malformed JSON at line 3, column");
	BAD("{} x", "text after the value");
	BAD("[1] [2]", "text after the value");
	CHECK(parse_ok("  {\"a\": [1, 2.5e3, true, null, \"s\"]}  \n"));
	CHECK(parse_ok("42"));
	/* the buffer need not end in a NUL: only len bytes are read */
	cJSON *j = NULL;
	CHECK_EQ_INT(json_parse("[1,2]xxxx", 5, NULL, &j, NULL), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(j), 2);
	cJSON_Delete(j);
	struct dd_err err = { 0 };
	CHECK_EQ_INT(json_parse_str(NULL, "row 3", &j, &err), DD_EINVAL);
	CHECK_STR(err.msg, "row 3: missing");
	CHECK_EQ_INT(json_check("x", (size_t)JSON_MAX_BYTES + 1, "big", &err), DD_ETOOBIG);
	CHECK_CONTAINS(err.msg, "over the");
}

static void test_read_file(void)
{
	char dir[64], path[128];
	CHECK(check_tmpdir(dir, sizeof dir) != NULL);
	snprintf(path, sizeof path, "%s/job.json", dir);
	char *deep = nested(800, "[", "]", "");
	CHECK_EQ_INT(fs_write_file_atomic(path, deep, strlen(deep), NULL), DD_OK);
	cJSON *j = NULL;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(json_read_file(path, 1 << 20, &j, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "job.json: nested deeper than 64 levels at byte 64");
	CHECK_EQ_INT(fs_write_file_atomic(path, "{\"id\":3}", 8, NULL), DD_OK);
	CHECK_EQ_INT(json_read_file(path, 1 << 20, &j, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetObjectItem(j, "id")->valueint, 3);
	cJSON_Delete(j);
	CHECK_EQ_INT(json_read_file(path, 4, &j, &err), DD_ETOOBIG);
	free(deep);
	fs_rm_rf(dir, NULL);
}

static void test_utf8_fix(void)
{
	size_t n = 0;
	char *s = json_utf8_fix("a\xff" "b\xed\xa0\x80" "c\xc3\xa9", 9, &n);
	CHECK_STR(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "c\xc3\xa9");
	CHECK_EQ_INT(n, strlen(s));
	CHECK_EQ_INT(json_utf8_check(s, n, NULL), n);
	free(s);
	s = json_utf8_fix("", 0, &n);
	CHECK_STR(s, "");
	free(s);
}

/* Seeded mutations of good and hostile texts through the fuzz target. */
static void test_fuzz_mutations(void)
{
	static const char *const seeds[] = {
		"{\"subscribe\":\"all\"}", "[[[[[[[[[[]]]]]]]]]]", "{\"a\":\"\\ud83d\\ude00\\\"[\"}",
		"\"\xc3\xa9\xe4\xb8\xad\"", "{\"kind\":\"test\",\"params\":{\"steps\":[1,2,{\"x\":null}]}}",
	};
	uint32_t r = 12345;
	unsigned char buf[256];
	for (int it = 0; it < 20000; it++) {
		const char *seed = seeds[it % 5];
		size_t n = strlen(seed);
		memcpy(buf, seed, n);
		for (int k = 0; k < 1 + it % 4; k++) {
			r = r * 1103515245u + 12345u;
			size_t at = (r >> 8) % (n + 1);
			unsigned char b = (unsigned char)(r >> 20);
			static const unsigned char pick[] = { '[', '{', ']', '}', '"', '\\', 'u', 0xc3, 0xed, 0xf4, 0x80, 0 };
			if (r & 1)
				b = pick[(r >> 3) % sizeof pick];
			if ((r >> 2) & 1 && n < sizeof buf - 1)
				memmove(buf + at + 1, buf + at, n - at), buf[at] = b, n++;
			else if (at < n)
				buf[at] = b;
		}
		LLVMFuzzerTestOneInput(buf, n);
	}
}

int main(void)
{
	RUN(test_depth);
	RUN(test_strings_are_skipped);
	RUN(test_escapes);
	RUN(test_utf8);
	RUN(test_parse_errors);
	RUN(test_read_file);
	RUN(test_utf8_fix);
	RUN(test_fuzz_mutations);
	return check_summary();
}
