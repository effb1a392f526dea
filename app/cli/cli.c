/* cli.c — what the verbs share: reading a whole-number option. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int cli_number(const char *opt, const char *s, long long min, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || *end || errno || v < min || v > max) {
		fprintf(stderr, "deepdesk: %s: expected a whole number from %lld to %lld, got \"%s\"\n", opt,
			min, max, s);
		return -1;
	}
	*out = v;
	return 0;
}
