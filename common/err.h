/* err.h — one error shape for the whole program.
 *
 * Functions that can fail return DD_OK (0) or a negative DD_E* code and, when
 * given a non-NULL `struct dd_err *`, fill it with one sentence a user can act
 * on ("jobs/12/job.json: unexpected end of input at line 3").  The REST layer
 * maps codes to HTTP statuses and stable error-code strings (dd_err_name). */
#ifndef DD_ERR_H
#define DD_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

enum {
	DD_OK = 0,
	DD_EINVAL = -1,    /* bad input from a user: 400 */
	DD_ENOENT = -2,    /* no such thing: 404 */
	DD_EEXIST = -3,    /* already there: 409 */
	DD_ECONFLICT = -4, /* not possible in the current state: 409 */
	DD_ETOOBIG = -5,   /* over a size cap: 413 */
	DD_EIO = -6,       /* disk or OS failure: 500 */
	DD_ENOMEM = -7,    /* allocation failed: 500 */
	DD_ENOSPC = -8,    /* disk full: 507 */
	DD_EPERM = -9,     /* not allowed: 403 */
	DD_EBUSY = -10,    /* try again later (shutting down): 503 */
	DD_EINTERNAL = -11 /* our own bug: 500 */
};

struct dd_err {
	int code;
	char msg[480];
};

/* Fill err (if non-NULL) with code and a printf-style message; returns code so
 * that callers can write `return dd_err_set(err, DD_EINVAL, "...")`. */
int dd_err_set(struct dd_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like dd_err_set, with ": strerror(errno_value)" appended; maps ENOSPC/EDQUOT to
 * DD_ENOSPC and ENOENT to DD_ENOENT, everything else to `code`. */
int dd_err_sys(struct dd_err *err, int code, int errno_value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefix an existing message: "what: <old message>". */
void dd_err_prefix(struct dd_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Stable name of a code for the API ("invalid", "not_found", ...). */
const char *dd_err_name(int code);

/* Format the calling function's variable arguments, which follow its parameter
 * fmt, into buf (an array, not a pointer: its size is taken), cut to fit. */
#define DD_FORMAT(buf, fmt)                                  \
	do {                                                 \
		va_list dd_ap_;                              \
		va_start(dd_ap_, fmt);                       \
		vsnprintf((buf), sizeof(buf), (fmt), dd_ap_); \
		va_end(dd_ap_);                              \
	} while (0)

#endif
