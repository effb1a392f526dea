/* weights.h — two snapshots' weights compared, for the training tests
 * (test_train, test_cuda).  Header-only; every function is static. */
#ifndef DD_TEST_WEIGHTS_H
#define DD_TEST_WEIGHTS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../networks/snapshot.h"

/* The tensors of safetensors files a and b: 1 when they hold the same names and
 * shapes, with *rel = max|a − b| / max|a| over all of them and *same 1 when every
 * tensor is equal bit for bit (name_diffs 1: a differing one is named on stderr);
 * 0, with a line saying why, when the files or their tensors do not match. */
static int weights_compare(const char *a, const char *b, int name_diffs, double *rel, int *same)
{
	struct dd_err err = { 0 };
	struct st_file *fa = NULL, *fb = NULL;
	double dmax = 0, amax = 0;
	*rel = 1;
	*same = 0;
	int ok = st_open(a, &fa, &err) == DD_OK && st_open(b, &fb, &err) == DD_OK && st_count(fa) == st_count(fb);
	if (!ok)
		fprintf(stderr, "  %s\n", err.msg[0] ? err.msg : "the two hold different tensors");
	int bitwise = 1;
	for (int i = 0; ok && i < st_count(fa); i++) {
		struct st_tensor ta, tb;
		st_get(fa, i, &ta);
		ok = st_find(fb, ta.name, &tb) == DD_OK && ta.ndim == tb.ndim;
		int64_t n = 1;
		for (int d = 0; ok && d < ta.ndim; d++) {
			ok = ta.shape[d] == tb.shape[d];
			n *= ta.shape[d];
		}
		if (!ok) {
			fprintf(stderr, "  %s: not in both, or of another shape\n", ta.name);
			break;
		}
		const float *x = ta.data, *y = tb.data;
		if (memcmp(x, y, (size_t)n * sizeof(float)) != 0) {
			bitwise = 0;
			if (name_diffs)
				fprintf(stderr, "  %s differs\n", ta.name);
		}
		for (int64_t k = 0; k < n; k++) {
			dmax = fmax(dmax, fabs((double)x[k] - y[k]));
			amax = fmax(amax, fabs((double)x[k]));
		}
	}
	st_close(fa);
	st_close(fb);
	if (ok) {
		*rel = amax > 0 ? dmax / amax : dmax > 0;
		*same = bitwise;
	}
	return ok;
}

/* 1 if two snapshots hold the same tensors, bit for bit. */
__attribute__((unused)) static int same_weights(const char *a, const char *b)
{
	double rel;
	int same;
	return weights_compare(a, b, 1, &rel, &same) && same;
}

/* max|a − b| / max|a| over two snapshots' tensors; 1 when they do not match. */
__attribute__((unused)) static double weights_diff(const char *a, const char *b)
{
	double rel;
	int same;
	return weights_compare(a, b, 0, &rel, &same) ? rel : 1;
}

#endif
