/* test_common.c — common/: a log line cannot be forged or carry terminal escapes,
 * a CSV cell cannot become a spreadsheet formula, and a full disk is one sentence. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
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

int main(void)
{
	RUN(test_log_escapes_controls);
	RUN(test_log_long_line_is_one_line);
	RUN(test_csv_fields);
	RUN(test_nospace_sentence);
	return check_summary();
}
