/* talloc.h — allocations that live until the test case that made them ends: the
 * kernel tests (test_ref.c, test_parity.c) take their buffers from talloc and fvec
 * and free them all at once with tfree_all, so a case that returns early leaks
 * nothing.  An allocation that fails ends the program (exit 2): the test harness's
 * own failure, not the code under test's. */
#ifndef DD_TEST_TALLOC_H
#define DD_TEST_TALLOC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TALLOC_MAX 1024
static void *talloc_live[TALLOC_MAX];
static int talloc_n;

/* bytes (at least 1) of zeros, freed by tfree_all. */
static inline void *talloc(size_t bytes)
{
	void *p = calloc(1, bytes ? bytes : 1);
	if (!p || talloc_n == TALLOC_MAX) {
		fprintf(stderr, "talloc: out of memory or more than %d allocations in a case\n", TALLOC_MAX);
		exit(2);
	}
	return talloc_live[talloc_n++] = p;
}

/* n floats of zeros, freed by tfree_all. */
static inline float *fvec(int64_t n)
{
	return talloc((size_t)n * sizeof(float));
}

/* Frees everything talloc gave since the last call. */
static inline void tfree_all(void)
{
	while (talloc_n)
		free(talloc_live[--talloc_n]);
}

#endif
