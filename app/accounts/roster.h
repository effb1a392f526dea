/* roster.h — a class roster as CSV: one account a line, "name[,role]".
 *
 * Pure (no store, no HTTP), so that tests/unit/test_roster.c and
 * tests/fuzz/fuzz_roster.c can drive it alone.  Blank lines and lines starting
 * with '#' are skipped, as is a first line that is the header "name" or
 * "name,role".  A field may be quoted ("ann", with "" for a quote); spaces
 * around a field are dropped.  The role is "learner" (the default when empty)
 * or "instructor": a roster never makes an admin. */
#ifndef DD_ROSTER_H
#define DD_ROSTER_H

#include <stddef.h>

#include "../../common/err.h"
#include "auth.h"

#define ROSTER_MAX_LINES 1000   /* accounts in one roster */
#define ROSTER_MAX_BYTES (256u << 10)

struct roster_line {
	int line; /* 1-based, in the text */
	char name[AUTH_NAME_MAX + 1];
	enum auth_role role;
};

/* Parse len bytes of text.  On success *out (caller frees with free(); NULL
 * when *n is 0) holds the *n accounts in order.  On bad input returns
 * DD_EINVAL and err names every bad line it has room for
 * ("line 3: name: must start with a letter or a digit; line 5: ann is
 * already on line 2"), *out NULL: a roster is taken whole or not at all.
 * Names are compared without case, as account names are. */
int roster_parse(const char *text, size_t len, struct roster_line **out, int *n, struct dd_err *err);

#endif
