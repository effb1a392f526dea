/* test_common.c — common/: a log line cannot be forged or carry terminal escapes,
 * a CSV cell cannot become a spreadsheet formula, a full disk is one sentence, and
 * the random stream gives the numbers it always gave. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "../../common/rng.h"
#include "check.h"

/* What log_info(fmt, arg) writes to stderr, without its timestamp and level. */
static char *logged(const char *arg)
{
	static char out[4096];
	FILE *tmp = tmpfile();
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	dup2(fileno(tmp), STDERR_FILENO);
	log_info("job renamed to \"%s\"", arg);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	size_t n = fread(out, 1, sizeof out - 1, tmp);
	fclose(tmp);
	out[n] = 0;
	char *msg = strstr(out, "info  ");
	return msg ? msg + 6 : out;
}

static void test_log_escapes_controls(void)
{
	char *s = logged("x\n2026-01-01T00:00:00.000Z error admin password reset");
	CHECK_STR(s, "job renamed to \"x\\n2026-01-01T00:00:00.000Z error admin password reset\"\n");
	CHECK(strchr(s, '\n') == s + strlen(s) - 1); /* one line */
	s = logged("\x1b[2J\x1b]0;owned\x07\r\tok\x7f");
	CHECK_STR(s, "job renamed to \"\\x1b[2J\\x1b]0;owned\\x07\\r\\tok\\x7f\"\n");
	s = logged("caf\xc3\xa9 \xe2\x9c\x93"); /* UTF-8 passes as it is */
	CHECK_STR(s, "job renamed to \"caf\xc3\xa9 \xe2\x9c\x93\"\n");
}

static void test_log_long_line_is_one_line(void)
{
	char big[3000];
	memset(big, '\n', sizeof big - 1);
	big[sizeof big - 1] = 0;
	char *s = logged(big);
	CHECK(strlen(s) < 1024);
	CHECK(strchr(s, '\n') == s + strlen(s) - 1);
}

static char *csv(const char *field)
{
	static char out[512];
	memset(out, 0, sizeof out);
	FILE *f = fmemopen(out, sizeof out, "w");
	fs_csv_field(f, field);
	fclose(f);
	return out;
}

static void test_csv_fields(void)
{
	CHECK_STR(csv("cat"), "cat");
	CHECK_STR(csv("a,b"), "\"a,b\"");
	CHECK_STR(csv("say \"hi\""), "\"say \"\"hi\"\"\"");
	/* formulas are shown as text */
	CHECK_STR(csv("=HYPERLINK(\"http://x\",\"y\")"), "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"");
	CHECK_STR(csv("+cmd|' /C calc'!A0"), "\"'+cmd|' /C calc'!A0\"");
	CHECK_STR(csv("-2+3"), "\"'-2+3\"");
	CHECK_STR(csv("@SUM(A1)"), "\"'@SUM(A1)\"");
	CHECK_STR(csv("\tx"), "\"'\tx\"");
	CHECK_STR(csv("\r=x"), "\"'\r=x\"");
	/* numbers stay numbers, an empty cell stays empty */
	CHECK_STR(csv("-3"), "-3");
	CHECK_STR(csv("+1.5e-3"), "+1.5e-3");
	CHECK_STR(csv(""), "");
	CHECK_STR(csv("a=b"), "a=b");
}

/* Every full disk reads the same, with the room left measured where the write was
 * going (a file not there yet is measured at its folder). */
static void test_nospace_sentence(void)
{
	CHECK(fs_free_bytes("/tmp") >= 0);
	CHECK(fs_free_bytes("/tmp/no-such-file-here.tmp") >= 0);
	CHECK(fs_free_bytes("/no-such-folder-here/x") < 0);
	struct dd_err err = { 0 };
	CHECK_EQ_INT(fs_err_nospace(&err, "/tmp/no-such-file-here.tmp", "cannot write %s", "x.bin"), DD_ENOSPC);
	CHECK_EQ_INT(err.code, DD_ENOSPC);
	CHECK_CONTAINS(err.msg, "cannot write x.bin: no space left on the data folder's file system (");
	CHECK_CONTAINS(err.msg, " MiB free)");
	CHECK_EQ_INT(fs_err_nospace(NULL, "/tmp", "x"), DD_ENOSPC);
}

/* fs_line_next: lines cut in place, trailing \r, spaces and tabs gone, a blank line
 * kept as "", a final newline ending the text, NULL after the last. */
static void test_line_next(void)
{
	char text[] = "a\r\n\nb \t\n  c\nlast";
	char *at = text, *l;
	const char *want[] = { "a", "", "b", "  c", "last" };
	for (int i = 0; i < 5; i++) {
		l = fs_line_next(&at);
		CHECK(l && strcmp(l, want[i]) == 0);
	}
	CHECK(fs_line_next(&at) == NULL);
	CHECK(fs_line_next(&at) == NULL);
	char two[] = "x\n";
	at = two;
	l = fs_line_next(&at);
	CHECK(l && strcmp(l, "x") == 0);
	CHECK(fs_line_next(&at) == NULL);
	char none[] = "";
	at = none;
	CHECK(fs_line_next(&at) == NULL);
	at = NULL;
	CHECK(fs_line_next(&at) == NULL);
}

/* splitmix64's first outputs, as the six copies that rng.h replaced gave them
 * (seed 0's is the published reference value): shuffles, fillers, dropout masks
 * and resumed trainings depend on these exact numbers. */
static void test_rng_stream_is_pinned(void)
{
	static const uint64_t want0[] = { 0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull,
					  0x06c45d188009454full, 0xf88bb8a8724c81ecull };
	static const uint64_t want42[] = { 0xbdd732262feb6e95ull, 0x28efe333b266f103ull,
					   0x47526757130f9f52ull, 0x581ce1ff0e4ae394ull };
	uint64_t s0 = 0, s42 = 42;
	for (int i = 0; i < 4; i++) {
		CHECK(rng_next(&s0) == want0[i]);
		CHECK(rng_next(&s42) == want42[i]);
		CHECK(rng_at(0, (uint64_t)i + 1) == want0[i]); /* the GPU's way to the same value */
		CHECK(rng_at(42, (uint64_t)i + 1) == want42[i]);
	}
	CHECK(s42 == 42 + 4 * RNG_GAMMA);
	CHECK(rng_unit(want42[0]) == 0.7415648787718233);
	CHECK(rng_unit(0) == 0.0 && rng_unit(UINT64_MAX) < 1.0);
	uint64_t s = 42;
	CHECK_EQ_INT(rng_below(&s, 10), 3);
	CHECK_EQ_INT(rng_below(&s, 10), 1);
	CHECK_EQ_INT(rng_below(&s, 1), 0); /* draws nothing */
	CHECK_EQ_INT(rng_below(&s, 10), 8);
}

int main(void)
{
	RUN(test_log_escapes_controls);
	RUN(test_log_long_line_is_one_line);
	RUN(test_csv_fields);
	RUN(test_nospace_sentence);
	RUN(test_line_next);
	RUN(test_rng_stream_is_pinned);
	return check_summary();
}
