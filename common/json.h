/* json.h — the one door every JSON text comes in by.
 *
 * cJSON parses recursively and allows 1000 levels of nesting; CivetWeb's handler
 * threads have 100 KiB stacks (Debian builds it with USE_STACK_SIZE=102400), and
 * 800 nested '[' in a request body overflowed one and took the server down.  So
 * nothing here calls cJSON on a text before a linear, non-recursive scan has
 * checked it: at most JSON_MAX_DEPTH levels of arrays and objects, strings that
 * are valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF) with
 * valid escapes (no \u0000, surrogate escapes only in pairs), no NUL byte, at most
 * JSON_MAX_BYTES.  Every HTTP body, WebSocket frame and JSON file the server and
 * the workers read goes through json_parse (or its two wrappers below); a failure
 * is DD_EINVAL (DD_ETOOBIG for the size) with one sentence that starts with what
 * the text was: "body: nested deeper than 64 levels at byte 64". */
#ifndef DD_JSON_H
#define DD_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "err.h"

#define JSON_MAX_DEPTH 64          /* levels of [ and {; the 65th is refused */
#define JSON_MAX_BYTES (1u << 30)  /* the biggest text any caller reads (an evaluation's metrics.json) */

/* o's member k (names compare case-sensitively, as JSON's do), or NULL when o is
 * not an object or has none: the one short spelling of cJSON's lookup. */
static inline cJSON *json_get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* Check buf[0..len) without parsing it (no allocation, no recursion): DD_OK, or
 * DD_EINVAL / DD_ETOOBIG with err = "what: why at byte N".  what may be NULL
 * (no prefix).  Bytes outside strings are left to the parser, which refuses what
 * is not JSON. */
int json_check(const char *buf, size_t len, const char *what, struct dd_err *err);

/* Parse exactly one JSON value from buf[0..len) (which need not end in a NUL;
 * whitespace may follow the value, nothing else) after json_check.  DD_OK and
 * *out (caller frees with cJSON_Delete), or an error and *out = NULL; a
 * syntax error reads "what: malformed JSON at line L, column C". */
int json_parse(const char *buf, size_t len, const char *what, cJSON **out, struct dd_err *err);

/* json_parse of the NUL-terminated s; s == NULL is DD_EINVAL ("what: missing"). */
int json_parse_str(const char *s, const char *what, cJSON **out, struct dd_err *err);

/* Read the file at path (at most cap bytes, fs_read_file's errors) and
 * json_parse it, the path naming it in any error.  Caller frees *out. */
int json_read_file(const char *path, size_t cap, cJSON **out, struct dd_err *err);

/* The offset of the first byte of s[0..len) that does not begin a valid UTF-8
 * sequence, or len when all of it is valid.  *why (if non-NULL) says what is
 * wrong there ("an overlong encoding", ...). */
size_t json_utf8_check(const char *s, size_t len, const char **why);

/* A copy of s[0..len) with every invalid UTF-8 sequence replaced by U+FFFD, NUL-
 * terminated, its length in *outlen; NULL when out of memory.  Caller frees. */
char *json_utf8_fix(const char *s, size_t len, size_t *outlen);

/* The name of the first field of o that is not in allowed (NULL-terminated),
 * borrowed from o; NULL when every field is known.  Each caller words its own
 * "unknown field" error with it (the kinds' validate, http_only_fields). */
const char *json_unknown_field(const cJSON *o, const char *const *allowed);

#endif
