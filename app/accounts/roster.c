/* roster.c — see roster.h. */
#define _GNU_SOURCE
#include "roster.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One CSV field starting at *p (within end), into buf (NUL-terminated, at most
 * cap-1 bytes; *too_long set when it did not fit).  Leaves *p at the ',' or the
 * end of the line.  Returns -1 on an unterminated quote or text after a closing
 * quote. */
static int field(const char **p, const char *end, char *buf, size_t cap, int *too_long)
{
	const char *s = *p;
	size_t k = 0;
	*too_long = 0;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	int quoted = s < end && *s == '"';
	if (quoted) {
		s++;
		for (;;) {
			if (s >= end)
				return -1;
			if (*s == '"') {
				if (s + 1 < end && s[1] == '"') {
					s++;
				} else {
					s++;
					break;
				}
			}
			if (k + 1 < cap)
				buf[k++] = *s;
			else
				*too_long = 1;
			s++;
		}
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s < end && *s != ',')
			return -1;
	} else {
		const char *start = s;
		while (s < end && *s != ',')
			s++;
		const char *e = s;
		while (e > start && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		for (const char *q = start; q < e; q++) {
			if (k + 1 < cap)
				buf[k++] = *q;
			else
				*too_long = 1;
		}
	}
	buf[k] = 0;
	*p = s;
	return 0;
}

/* Append "; line N: <message>" to the running report in err, while it has room. */
static void report(struct dd_err *err, int *bad, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void report(struct dd_err *err, int *bad, int line, const char *fmt, ...)
{
	(*bad)++;
	if (!err)
		return;
	char one[200];
	DD_FORMAT(one, fmt);
	size_t used = *bad == 1 ? 0 : strlen(err->msg);
	char piece[240];
	int len = snprintf(piece, sizeof piece, "%sline %d: %s", *bad == 1 ? "" : "; ", line, one);
	if (used + (size_t)len + 16 < sizeof err->msg)
		memcpy(err->msg + used, piece, (size_t)len + 1);
	else if (!strstr(err->msg, "; …"))
		snprintf(err->msg + used, sizeof err->msg - used, "; …");
}

/* A printable rendering of a user's field for a message: at most 40 bytes,
 * anything but printable ASCII as '?'. */
static void shown(char *out, size_t cap, const char *s)
{
	size_t k = 0;
	for (; *s && k + 1 < cap && k < 40; s++)
		out[k++] = (*s >= 0x20 && *s < 0x7f && *s != '"') ? *s : '?';
	out[k] = 0;
}

int roster_parse(const char *text, size_t len, struct roster_line **out, int *n, struct dd_err *err)
{
	*out = NULL;
	*n = 0;
	if (err) {
		err->code = DD_OK;
		err->msg[0] = 0;
	}
	if (len > ROSTER_MAX_BYTES)
		return dd_err_set(err, DD_EINVAL, "roster: %zu bytes; at most %u", len, ROSTER_MAX_BYTES);
	struct roster_line *lines = NULL;
	int count = 0, cap = 0, bad = 0, lineno = 0, first = 1;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *stop = eol ? eol : end;
		const char *next = eol ? eol + 1 : end;
		lineno++;
		if (stop > p && stop[-1] == '\r')
			stop--;
		const char *s = p;
		p = next;
		while (s < stop && (*s == ' ' || *s == '\t'))
			s++;
		if (s == stop || *s == '#')
			continue;
		if (memchr(s, 0, (size_t)(stop - s))) {
			report(err, &bad, lineno, "a NUL byte: a roster is text");
			continue;
		}
		char name[AUTH_NAME_MAX + 8], role[24], extra[8];
		int long_name, long_role, long_extra;
		role[0] = 0;
		int ok = field(&s, stop, name, sizeof name, &long_name) == 0;
		if (ok && s < stop) {
			s++;
			ok = field(&s, stop, role, sizeof role, &long_role) == 0;
		}
		if (ok && s < stop) {
			s++;
			field(&s, stop, extra, sizeof extra, &long_extra);
			report(err, &bad, lineno, "expected name[,role], found more than two fields");
			continue;
		}
		if (!ok) {
			report(err, &bad, lineno, "a quote is not closed, or text follows a closing quote");
			continue;
		}
		int header = first && strcasecmp(name, "name") == 0 && (!role[0] || strcasecmp(role, "role") == 0);
		first = 0;
		if (header)
			continue;
		char show[48];
		shown(show, sizeof show, name);
		struct dd_err ne = { 0 };
		if (long_name)
			dd_err_set(&ne, DD_EINVAL, "name: 1 to %d characters", AUTH_NAME_MAX);
		else
			auth_name_check(name, &ne);
		if (ne.code) {
			report(err, &bad, lineno, "\"%s\": %s", show, ne.msg);
			continue;
		}
		enum auth_role r = ROLE_LEARNER;
		if (role[0] && (long_role || auth_role_parse(role, &r) != 0 || r == ROLE_ADMIN)) {
			char rs[48];
			shown(rs, sizeof rs, role);
			report(err, &bad, lineno, "%s: role \"%s\": expected learner or instructor", show, rs);
			continue;
		}
		int dup = 0;
		for (int i = 0; i < count && !dup; i++)
			if (strcasecmp(lines[i].name, name) == 0) {
				report(err, &bad, lineno, "%s is already on line %d", show, lines[i].line);
				dup = 1;
			}
		if (dup)
			continue;
		if (count >= ROSTER_MAX_LINES) {
			report(err, &bad, lineno, "more than %d accounts in one roster", ROSTER_MAX_LINES);
			break;
		}
		if (count == cap) {
			int nc = cap ? cap * 2 : 32;
			struct roster_line *grown = realloc(lines, (size_t)nc * sizeof *grown);
			if (!grown) {
				free(lines);
				return dd_err_set(err, DD_ENOMEM, "roster: out of memory");
			}
			lines = grown;
			cap = nc;
		}
		lines[count].line = lineno;
		memcpy(lines[count].name, name, strlen(name) + 1);
		lines[count].role = r;
		count++;
	}
	if (bad) {
		free(lines);
		if (err)
			err->code = DD_EINVAL;
		return DD_EINVAL;
	}
	if (count == 0) {
		free(lines);
		return dd_err_set(err, DD_EINVAL, "roster: no names in it (one a line: name[,role])");
	}
	*out = lines;
	*n = count;
	return DD_OK;
}
