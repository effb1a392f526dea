/* http.h — what every REST handler uses: the request as parsed by the router, JSON
 * bodies in and out, and errors in the API's one shape
 * {"error":{"code":"…","message":"…"}}.  Each reply function returns the HTTP
 * status it sent, so a handler ends with `return http_json(...)`. */
#ifndef DD_HTTP_H
#define DD_HTTP_H

#include <stdint.h>

#include <civetweb.h>
#include <cjson/cJSON.h>

#include "../../common/err.h"

struct auth_state;

#define HTTP_BODY_CAP (1u << 20) /* JSON bodies: 1 MiB */

/* The headers every response carries (the UI, the API, files): scripts and
 * styles only from this origin (no inline script; styles set through the DOM,
 * as Chart.js and CodeMirror do, are not inline styles), no framing, no
 * sniffing, no referrer.  Each line ends in CRLF. */
#define HTTP_CSP                                                                                   \
	"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "        \
	"connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none'; "             \
	"form-action 'self'; frame-ancestors 'none'"

/* Cache-Control values.  A user's data (results, CSVs, snapshots, bundles) is
 * private and never stored; a dataset's or an evaluation's images, which the
 * explore views load by the hundred and which never change, may stay in that
 * browser's own cache; the UI's files may be cached anywhere. */
#define HTTP_CACHE_NONE "no-store"
#define HTTP_CACHE_USER_DATA "private, no-store"
#define HTTP_CACHE_USER_IMAGE "private, max-age=86400"

#define HTTP_CHUNKED (-1LL) /* http_head.len: Transfer-Encoding: chunked */

/* The head of an answer a handler writes itself. */
struct http_head {
	int status;
	const char *type;  /* Content-Type, or NULL for none */
	long long len;     /* Content-Length, or HTTP_CHUNKED */
	const char *cache; /* Cache-Control; NULL: HTTP_CACHE_NONE */
	const char *extra; /* more header lines, each ending in CRLF, or NULL */
	const char *csp;   /* Content-Security-Policy; NULL: HTTP_CSP */
};

/* Write h: the status line, its headers, the security headers every answer carries
 * (CSP, nosniff, no framing, no referrer) and, when the server speaks HTTPS,
 * Strict-Transport-Security; then the blank line.  Every answer goes through here
 * (the JSON replies below too), so none can lack them. */
void http_send_head(struct mg_connection *c, const struct http_head *h);
/* The security header lines of http_send_head (HTTP_CSP's), for an answer
 * CivetWeb writes itself (mg_send_mime_file2's extra headers). */
const char *http_security_lines(void);
/* Whether the server speaks HTTPS (set once at start, before any request). */
void http_set_https(int on);

struct req {
	struct mg_connection *c;
	const struct mg_request_info *ri;
	int64_t id;    /* the {id} path segment, when the route has one */
	int64_t n;     /* a second number segment, {n} */
	char name[64]; /* a word segment, {name} (letters, digits, '_', '-', '.') */
	struct auth_state *auth; /* who asks (auth.h), set by api_dispatch */
};

/* Send body (consumed) as JSON with status. */
int http_json(struct mg_connection *c, int status, cJSON *body);
/* Send an error; code is the stable string ("invalid", …). */
int http_error(struct mg_connection *c, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Send err as an error, the status chosen from err->code.  Internal errors are
 * logged with their detail and sent without it. */
int http_error_dd(struct mg_connection *c, const struct dd_err *err);
/* 204 No Content. */
int http_no_content(struct mg_connection *c);
/* HTTP status for a DD_E* code. */
int http_status_for(int code);

/* Read a JSON object body of at most HTTP_BODY_CAP bytes, through json_parse
 * (common/json.h: at most 64 levels deep, UTF-8, nothing after the value), with
 * no key twice in one object.  On failure the error reply has been sent and its
 * status is returned (400/413); on success returns 0 and *out is the object
 * (caller frees). */
int http_read_json(struct mg_connection *c, cJSON **out);
/* The same, and refuse a field not in allowed (NULL-terminated) as http_only_fields
 * does; on failure nothing is left to free. */
int http_read_fields(struct mg_connection *c, const char *const *allowed, cJSON **out);

/* Query parameter `name` into buf (at most 1024 bytes); 1 when present, 0 when
 * absent, and then buf is left as it was (a default survives). */
int http_query(const struct mg_request_info *ri, const char *name, char *buf, size_t len);
/* Integer query parameter with bounds; absent -> dflt.  Returns 0 on success,
 * or sends a 400 naming the parameter and returns 400. */
int http_query_int(struct mg_connection *c, const char *name, long long dflt, long long min,
		   long long max, long long *out);

/* Multipart forms (mg_handle_form_request).  http_form_stored: the field_store
 * callback of a form whose files the field_found callback wrote itself (nothing
 * to do: on to the next field).  http_form_append: add a piece of a field's value
 * (len bytes; CivetWeb hands a long value over in pieces) to the string dst of
 * cap bytes, cut short when it is full. */
int http_form_stored(const char *path, long long size, void *ud);
void http_form_append(char *dst, size_t cap, const char *value, size_t len);

/* Reject fields of obj that are not in allowed (NULL-terminated): sends 400 naming
 * the first unknown one and returns 400, or returns 0. */
int http_only_fields(struct mg_connection *c, const cJSON *obj, const char *const *allowed,
		     const char *where);

#endif
