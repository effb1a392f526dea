/* json.c — see json.h.  The scanner is a loop over bytes with two states (inside
 * a string or not) and a depth counter; it never recurses and never allocates, so
 * it is safe on any thread and on any input, whatever its size. */
#include "json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"

/* The length of the valid UTF-8 sequence at p (left bytes available), or 0 with
 * *why set.  RFC 3629: U+0000..U+10FFFF in the shortest form, no surrogates. */
static size_t utf8_seq(const unsigned char *p, size_t left, const char **why)
{
	unsigned char c = p[0];
	size_t n;
	if (c < 0x80)
		return 1;
	if (c < 0xc0) {
		*why = "a continuation byte with no lead byte";
		return 0;
	}
	if (c < 0xc2) {
		*why = "an overlong encoding";
		return 0;
	}
	if (c < 0xe0)
		n = 2;
	else if (c < 0xf0)
		n = 3;
	else if (c < 0xf5)
		n = 4;
	else {
		*why = c < 0xf8 ? "a code point above U+10FFFF" : "a byte that is never UTF-8";
		return 0;
	}
	for (size_t i = 1; i < n; i++)
		if (i >= left || (p[i] & 0xc0) != 0x80) {
			*why = "an incomplete sequence";
			return 0;
		}
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xf0 && p[1] < 0x90)) {
		*why = "an overlong encoding";
		return 0;
	}
	if (c == 0xed && p[1] >= 0xa0) {
		*why = "a UTF-16 surrogate (U+D800..U+DFFF)";
		return 0;
	}
	if (c == 0xf4 && p[1] >= 0x90) {
		*why = "a code point above U+10FFFF";
		return 0;
	}
	return n;
}

size_t json_utf8_check(const char *s, size_t len, const char **why)
{
	const unsigned char *p = (const unsigned char *)s;
	const char *w = NULL;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i, &w);
		if (!n) {
			if (why)
				*why = w;
			return i;
		}
		i += n;
	}
	return len;
}

char *json_utf8_fix(const char *s, size_t len, size_t *outlen)
{
	/* each bad byte becomes 3 bytes at most */
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *)s;
	const char *why;
	size_t k = 0;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i, &why);
		if (n) {
			memcpy(out + k, p + i, n);
			k += n;
			i += n;
		} else {
			memcpy(out + k, "\xef\xbf\xbd", 3);
			k += 3;
			i++;
		}
	}
	out[k] = 0;
	if (outlen)
		*outlen = k;
	return out;
}

static int hex4(const unsigned char *p, size_t left, unsigned *v)
{
	if (left < 4)
		return 0;
	*v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned char c = p[i];
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') :
			     c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) :
			     c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
		if (d == 16)
			return 0;
		*v = *v << 4 | d;
	}
	return 1;
}

int json_check(const char *buf, size_t len, const char *what, struct dd_err *err)
{
	const char *w = what ? what : "JSON";
	if (len > JSON_MAX_BYTES)
		return dd_err_set(err, DD_ETOOBIG, "%s: %zu bytes of JSON, over the %u-byte limit", w, len,
				  JSON_MAX_BYTES);
	const unsigned char *p = (const unsigned char *)buf;
	int depth = 0, in_string = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[i];
		if (c == 0)
			return dd_err_set(err, DD_EINVAL, "%s: a NUL byte at byte %zu", w, i);
		if (!in_string) {
			if (c == '"')
				in_string = 1;
			else if (c == '[' || c == '{') {
				if (++depth > JSON_MAX_DEPTH)
					return dd_err_set(err, DD_EINVAL, "%s: nested deeper than %d levels at byte %zu", w,
							  JSON_MAX_DEPTH, i);
			} else if ((c == ']' || c == '}') && depth > 0)
				depth--;
			continue; /* anything else outside strings is the parser's to judge */
		}
		if (c == '"') {
			in_string = 0;
		} else if (c == '\\') {
			if (i + 1 >= len)
				break; /* unterminated: the parser says so */
			unsigned char e = p[++i];
			if (e == 'u') {
				unsigned v, lo;
				if (!hex4(p + i + 1, len - i - 1, &v))
					return dd_err_set(err, DD_EINVAL, "%s: a \\u escape without 4 hex digits at byte %zu", w,
							  i - 1);
				if (v == 0)
					return dd_err_set(err, DD_EINVAL, "%s: a \\u0000 escape (NUL) at byte %zu", w, i - 1);
				if (v >= 0xdc00 && v <= 0xdfff)
					return dd_err_set(err, DD_EINVAL, "%s: a lone low surrogate \\u%04x at byte %zu", w, v,
							  i - 1);
				if (v >= 0xd800 && v <= 0xdbff) {
					size_t at = i + 5; /* just past the 4 digits */
					if (at + 1 >= len || p[at] != '\\' || p[at + 1] != 'u' ||
					    !hex4(p + at + 2, len - at - 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
						return dd_err_set(err, DD_EINVAL,
								  "%s: a high surrogate \\u%04x not followed by a low one at byte %zu",
								  w, v, i - 1);
					i = at + 5;
				} else {
					i += 4;
				}
			} else if (!strchr("\"\\/bfnrt", e) || e == 0) {
				return dd_err_set(err, DD_EINVAL, "%s: an invalid escape at byte %zu", w, i - 1);
			}
		} else if (c >= 0x80) {
			const char *why = NULL;
			size_t n = utf8_seq(p + i, len - i, &why);
			if (!n)
				return dd_err_set(err, DD_EINVAL, "%s: invalid UTF-8 (%s) at byte %zu", w, why, i);
			i += n - 1;
		}
	}
	return DD_OK;
}

int json_parse(const char *buf, size_t len, const char *what, cJSON **out, struct dd_err *err)
{
	const char *w = what ? what : "JSON";
	*out = NULL;
	int rc = json_check(buf, len, what, err);
	if (rc)
		return rc;
	size_t start = 0;
	while (start < len && strchr(" \t\r\n", buf[start]))
		start++;
	if (start == len)
		return dd_err_set(err, DD_EINVAL, "%s: empty (a JSON value was expected)", w);
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
	size_t at = end ? (size_t)(end - buf) : len;
	if (j)
		while (at < len && strchr(" \t\r\n", buf[at]))
			at++;
	if (!j || at < len) {
		int line = 1, col = 1;
		for (size_t i = 0; i < at && i < len; i++, col++)
			if (buf[i] == '\n')
				line++, col = 0;
		cJSON_Delete(j);
		if (j)
			return dd_err_set(err, DD_EINVAL, "%s: malformed JSON at line %d, column %d: text after the value", w,
					  line, col);
		return dd_err_set(err, DD_EINVAL, "%s: malformed JSON at line %d, column %d", w, line, col);
	}
	*out = j;
	return DD_OK;
}

int json_parse_str(const char *s, const char *what, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	if (!s)
		return dd_err_set(err, DD_EINVAL, "%s: missing", what ? what : "JSON");
	return json_parse(s, strlen(s), what, out, err);
}

int json_read_file(const char *path, size_t cap, cJSON **out, struct dd_err *err)
{
	char *text = NULL;
	size_t len = 0;
	*out = NULL;
	int rc = fs_read_file(path, cap, &text, &len, err);
	if (rc)
		return rc;
	rc = json_parse(text, len, path, out, err);
	free(text);
	return rc;
}

const char *json_unknown_field(const cJSON *o, const char *const *allowed)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		int known = 0;
		for (int i = 0; allowed[i] && !known; i++)
			known = strcmp(it->string, allowed[i]) == 0;
		if (!known)
			return it->string;
	}
	return NULL;
}
