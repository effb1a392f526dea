/* check.h — a tiny test harness for the C unit tests.
 *
 *   static void test_something(void) { CHECK(x == 1); CHECK_EQ_INT(a, b); }
 *   int main(void) { RUN(test_something); return check_summary(); }
 *
 * Each RUN counts as one test, failed if any CHECK in it failed.  The program
 * prints "N passed, N failed" last and exits non-zero when anything failed.
 * A test that cannot run here (no GPU) calls check_skip("why"): a visible
 * "SKIP: why" line, and ", N skipped" in the summary, which tests/run.sh adds up. */
#ifndef DD_CHECK_H
#define DD_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed, check_current_failed, check_skipped;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			check_current_failed = 1;                                     \
		}                                                                     \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                            \
	do {                                                                          \
		long long a_ = (long long)(a), b_ = (long long)(b);                   \
		if (a_ != b_) {                                                       \
			fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
				#a, #b, a_, b_);                                      \
			check_current_failed = 1;                                     \
		}                                                                     \
	} while (0)

#define CHECK_STR(a, b)                                                               \
	do {                                                                          \
		const char *a_ = (a), *b_ = (b);                                      \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                              \
			fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, \
				__LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
			check_current_failed = 1;                                     \
		}                                                                     \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                                   \
	do {                                                                          \
		const char *h_ = (hay), *n_ = (needle);                               \
		if (!h_ || !strstr(h_, n_)) {                                         \
			fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
				h_ ? h_ : "(null)", n_);                              \
			check_current_failed = 1;                                     \
		}                                                                     \
	} while (0)

#define RUN(fn)                                                                       \
	do {                                                                          \
		check_current_failed = 0;                                             \
		fn();                                                                 \
		if (check_current_failed) {                                           \
			check_failed++;                                               \
			printf("FAIL %s\n", #fn);                                     \
		} else {                                                              \
			check_passed++;                                               \
			printf("ok   %s\n", #fn);                                     \
		}                                                                     \
		fflush(stdout);                                                       \
	} while (0)

static inline void check_skip(const char *reason)
{
	printf("SKIP: %s\n", reason);
	fflush(stdout);
	check_skipped++;
}

static inline int check_summary(void)
{
	if (check_skipped)
		printf("%d passed, %d failed, %d skipped\n", check_passed, check_failed, check_skipped);
	else
		printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

/* A fresh temporary folder; caller removes it (fs_rm_rf). */
static inline char *check_tmpdir(char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/deepdesk-unit-XXXXXX");
	return mkdtemp(buf);
}

#endif
