/* check.h — a tiny test harness for the C unit tests.
 *
 *   static void test_something(void) { CHECK(x == 1); CHECK_EQ_INT(a, b); }
 *   int main(void) { RUN(test_something); return check_summary(); }
 *
 * Each RUN counts as one test, failed if any CHECK in it failed.  The program
 * prints "N passed, N failed" last and exits non-zero when anything failed.
 *
 * A test that cannot run here calls one of two, inside a RUN or in main, and returns:
 *   check_skip("why")        something no machine of this suite's can be made to
 *                            have (no GPU, one GPU): a visible "SKIP: why" line
 *                            and ", N skipped" in the summary, never a pass;
 *   check_need("what", "why") a dependency `make test` installs itself (Makefile
 *                            TEST_PKGS: python3-torch, python3-lmdb/-protobuf,
 *                            dataset-fashion-mnist, ...) is missing: a skip as
 *                            above, except where the environment has CI set (CI
 *                            runs .ci/run with CI=true), where it is a failure —
 *                            there its absence is a broken install, not a machine
 *                            that lacks something.
 * tests/run.sh adds the skips up and lists their reasons. */
#ifndef DD_CHECK_H
#define DD_CHECK_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed, check_current_failed, check_skipped;
static int check_in_run, check_current_skipped; /* inside a RUN; it called check_skip */

/* One failed check: "  file:line: " and the printf-style message on stderr. */
#define CHECK_FAIL_AT(file, line, ...)                                                \
	do {                                                                          \
		fprintf(stderr, "  %s:%d: ", file, line);                             \
		fprintf(stderr, __VA_ARGS__);                                         \
		fputc('\n', stderr);                                                  \
		check_current_failed = 1;                                             \
	} while (0)

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond))                                                          \
			CHECK_FAIL_AT(__FILE__, __LINE__, "CHECK(%s) failed", #cond); \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                            \
	do {                                                                          \
		long long a_ = (long long)(a), b_ = (long long)(b);                   \
		if (a_ != b_)                                                         \
			CHECK_FAIL_AT(__FILE__, __LINE__, "%s == %s failed: %lld != %lld", #a, #b, a_, b_); \
	} while (0)

#define CHECK_STR(a, b)                                                               \
	do {                                                                          \
		const char *a_ = (a), *b_ = (b);                                      \
		if (!a_ || !b_ || strcmp(a_, b_) != 0)                                \
			CHECK_FAIL_AT(__FILE__, __LINE__, "%s == %s failed: \"%s\" != \"%s\"", #a, #b, \
				      a_ ? a_ : "(null)", b_ ? b_ : "(null)");        \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                                   \
	do {                                                                          \
		const char *h_ = (hay), *n_ = (needle);                               \
		if (!h_ || !strstr(h_, n_))                                           \
			CHECK_FAIL_AT(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", \
				      h_ ? h_ : "(null)", n_);                        \
	} while (0)

/* A test that failed any CHECK is failed (whether or not it also skipped part);
 * one that called check_skip and failed nothing is a skip, not a pass. */
#define RUN(fn)                                                                       \
	do {                                                                          \
		check_current_failed = 0;                                             \
		check_current_skipped = 0;                                            \
		check_in_run = 1;                                                     \
		fn();                                                                 \
		check_in_run = 0;                                                     \
		if (check_current_failed) {                                           \
			check_failed++;                                               \
			check_skipped -= check_current_skipped;                       \
			printf("FAIL %s\n", #fn);                                     \
		} else if (check_current_skipped) {                                   \
			printf("skip %s\n", #fn);                                     \
		} else {                                                              \
			check_passed++;                                               \
			printf("ok   %s\n", #fn);                                     \
		}                                                                     \
		fflush(stdout);                                                       \
	} while (0)

/* One skip, counted once however often a test calls it. */
static inline void check_skip(const char *reason)
{
	printf("SKIP: %s\n", reason);
	fflush(stdout);
	if (!check_in_run || !check_current_skipped)
		check_skipped++;
	check_current_skipped = check_in_run;
}

/* Whether this is CI (.ci/run under CI=true): CI set to anything but "", "0" or "false". */
static inline int check_ci(void)
{
	const char *ci = getenv("CI");
	return ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
}

/* what cannot be tested because why (a dependency `make test` installs is missing):
 * in CI a failure of the current RUN (or, in main, of the program), else a skip. */
static inline void check_need(const char *what, const char *why)
{
	char line[1024];
	snprintf(line, sizeof line, "%s, not tested: %s", what, why);
	if (!check_ci()) {
		check_skip(line);
		return;
	}
	printf("FAIL: %s (CI is set, and `make test` installs this: Makefile TEST_PKGS)\n", line);
	fflush(stdout);
	if (check_in_run)
		check_current_failed = 1;
	else
		check_failed++;
}

/* main's way out before any test could run: the reason (printf-style) on stderr and
 * a summary that counts it as one failure, for tests/run.sh.  Returns 1, main's status. */
__attribute__((format(printf, 1, 2))) static inline int check_cannot_start(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	printf("0 passed, 1 failed\n");
	return 1;
}

static inline int check_summary(void)
{
	if (check_skipped)
		printf("%d passed, %d failed, %d skipped\n", check_passed, check_failed, check_skipped);
	else
		printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

/* The largest |got[i] - want[i]| of n values (a NaN counts as infinite), at index *at;
 * *ref gets the largest |want[i]|, for a normalised error.  at and ref may be NULL. */
static inline double check_max_diff(const float *got, const float *want, int64_t n, double *ref, int64_t *at)
{
	double diff = 0.0, r = 0.0;
	int64_t where = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		if (isnan(d))
			d = INFINITY;
		if (d > diff)
			diff = d, where = i;
		r = fmax(r, fabs(want[i]));
	}
	if (ref)
		*ref = r;
	if (at)
		*at = where;
	return diff;
}

/* path's raw float32 values into out (room for n): how many the file holds, n + 1
 * meaning more than n (never read past out), 0 where it cannot be opened. */
static inline size_t check_read_f32(const char *path, float *out, int64_t n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	size_t got = fread(out, sizeof(float), (size_t)n, f);
	float extra;
	if (got == (size_t)n && fread(&extra, sizeof extra, 1, f) == 1)
		got++;
	fclose(f);
	return got;
}

/* n copies of a, then mid, then m copies of b, as one string (deeply nested input
 * for parsers); caller frees.  Exits on a failed allocation: the harness's failure. */
static inline char *check_repeat(const char *a, int n, const char *mid, const char *b, int m)
{
	size_t la = strlen(a), lm = strlen(mid), lb = strlen(b);
	char *s = malloc(la * (size_t)n + lm + lb * (size_t)m + 1), *p = s;
	if (!s) {
		fprintf(stderr, "check_repeat: out of memory\n");
		exit(2);
	}
	for (int i = 0; i < n; i++, p += la)
		memcpy(p, a, la);
	memcpy(p, mid, lm);
	p += lm;
	for (int i = 0; i < m; i++, p += lb)
		memcpy(p, b, lb);
	*p = 0;
	return s;
}

/* A fresh temporary folder; caller removes it (fs_rm_rf). */
static inline char *check_tmpdir(char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/deepdesk-unit-XXXXXX");
	return mkdtemp(buf);
}

#endif
