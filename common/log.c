/* log.c — see log.h.  Each message is formatted into one buffer and written with a
 * single write(2) so lines from different threads never interleave. */
#define _GNU_SOURCE
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level current = LOG_INFO;
static const char *names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *s, enum log_level *out)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	return -1;
}

void log_set_level(enum log_level level) { current = level; }

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (level > current)
		return;
	char line[1024];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, names[level]);
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	size_t mlen = m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
	/* Names and reasons in a message may come from users (a job's name, an archive
	 * entry): every control byte is written as an escape, so no message can start a
	 * forged line of its own or send the terminal an ANSI sequence. */
	size_t len = (size_t)n;
	for (size_t i = 0; i < mlen && len < sizeof line - 6; i++) {
		unsigned char ch = (unsigned char)msg[i];
		if (ch >= 0x20 && ch != 0x7f)
			line[len++] = (char)ch;
		else if (ch == '\n' || ch == '\r' || ch == '\t') {
			line[len++] = '\\';
			line[len++] = ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't';
		} else
			len += (size_t)snprintf(line + len, 5, "\\x%02x", ch);
	}
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
