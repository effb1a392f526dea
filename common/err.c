/* err.c — see err.h. */
#define _GNU_SOURCE
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dd_err_set(struct dd_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

int dd_err_sys(struct dd_err *err, int code, int errno_value, const char *fmt, ...)
{
	if (errno_value == ENOSPC || errno_value == EDQUOT)
		code = DD_ENOSPC;
	else if (errno_value == ENOENT)
		code = DD_ENOENT;
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < sizeof err->msg)
			snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errno_value));
		err->code = code;
	}
	return code;
}

void dd_err_prefix(struct dd_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	char head[256], old[sizeof err->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(head, sizeof head, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
}

const char *dd_err_name(int code)
{
	switch (code) {
	case DD_OK: return "ok";
	case DD_EINVAL: return "invalid";
	case DD_ENOENT: return "not_found";
	case DD_EEXIST: return "exists";
	case DD_ECONFLICT: return "conflict";
	case DD_ETOOBIG: return "too_large";
	case DD_EIO: return "io_error";
	case DD_ENOMEM: return "out_of_memory";
	case DD_ENOSPC: return "disk_full";
	case DD_EPERM: return "forbidden";
	case DD_EBUSY: return "unavailable";
	default: return "internal";
	}
}
