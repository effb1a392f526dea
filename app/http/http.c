/* http.c — see http.h. */
#define _GNU_SOURCE
#include "http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/json.h"
#include "../../common/log.h"
#include "body_deadline.h"
#include "job_view.h"

static const char *reason(int status)
{
	const char *r = mg_get_response_code_text(NULL, status);
	return r ? r : "";
}

static int https_on;

void http_set_https(int on) { https_on = on; }

#define SECURITY_TAIL "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
#define HSTS "Strict-Transport-Security: max-age=31536000; includeSubDomains\r\n"

const char *http_security_lines(void)
{
	static const char plain[] = "Content-Security-Policy: " HTTP_CSP "\r\n" SECURITY_TAIL;
	static const char tls[] = "Content-Security-Policy: " HTTP_CSP "\r\n" SECURITY_TAIL HSTS;
	return https_on ? tls : plain;
}

void http_send_head(struct mg_connection *c, const struct http_head *h)
{
	char length[64];
	if (h->len == HTTP_CHUNKED)
		snprintf(length, sizeof length, "Transfer-Encoding: chunked\r\n");
	else
		snprintf(length, sizeof length, "Content-Length: %lld\r\n", h->len);
	mg_printf(c,
		  "HTTP/1.1 %d %s\r\n%s%s%s%sCache-Control: %s\r\n%s"
		  "Content-Security-Policy: %s\r\n" SECURITY_TAIL "%s\r\n",
		  h->status, reason(h->status), h->type ? "Content-Type: " : "", h->type ? h->type : "",
		  h->type ? "\r\n" : "", length, h->cache ? h->cache : HTTP_CACHE_NONE, h->extra ? h->extra : "",
		  h->csp ? h->csp : HTTP_CSP, https_on ? HSTS : "");
}

static int send_text(struct mg_connection *c, int status, const char *type, const char *body,
		     size_t len)
{
	http_send_head(c, &(struct http_head){ .status = status, .type = type, .len = (long long)len });
	if (len)
		mg_write(c, body, len);
	return status;
}

int http_json(struct mg_connection *c, int status, cJSON *body)
{
	job_view_answer(body); /* a lab preset's hidden values, for who may not see them */
	char *text = body ? cJSON_PrintUnformatted(body) : NULL;
	cJSON_Delete(body);
	if (!text)
		return send_text(c, 500, "application/json",
				 "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}", 58);
	/* JSON is UTF-8 (RFC 8259), and cJSON copies a string's bytes as they are: a
	 * name from an archive or an old row that is not UTF-8 goes out as U+FFFD */
	size_t len = strlen(text);
	if (json_utf8_check(text, len, NULL) != len) {
		char *fixed = json_utf8_fix(text, len, &len);
		free(text);
		if (!(text = fixed))
			return send_text(c, 500, "application/json",
					 "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}", 58);
	}
	int rc = send_text(c, status, "application/json", text, len);
	free(text);
	return rc;
}

/* The answer to a request whose body the deadline cut (body_deadline.h): whatever
 * error its handler found in what came, 408, and the connection ends. */
static int body_cut_answer(struct mg_connection *c, const char *why)
{
	cJSON *body = cJSON_CreateObject();
	cJSON *e = cJSON_AddObjectToObject(body, "error");
	cJSON_AddStringToObject(e, "code", "timeout");
	cJSON_AddStringToObject(e, "message", why);
	char *text = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	size_t len = text ? strlen(text) : 0;
	http_send_head(c, &(struct http_head){ .status = 408, .type = "application/json", .len = (long long)len,
					       .extra = "Connection: close\r\n" });
	if (len)
		mg_write(c, text, len);
	free(text);
	return 408;
}

int http_error(struct mg_connection *c, int status, const char *code, const char *fmt, ...)
{
	char msg[600];
	if (body_deadline_cut(c, msg, sizeof msg))
		return body_cut_answer(c, msg);
	DD_FORMAT(msg, fmt);
	cJSON *body = cJSON_CreateObject();
	cJSON *e = cJSON_AddObjectToObject(body, "error");
	cJSON_AddStringToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", msg);
	return http_json(c, status, body);
}

int http_status_for(int code)
{
	switch (code) {
	case DD_EINVAL: return 400;
	case DD_EPERM: return 403;
	case DD_ENOENT: return 404;
	case DD_EEXIST:
	case DD_ECONFLICT: return 409;
	case DD_ETOOBIG: return 413;
	case DD_EBUSY: return 503;
	case DD_ENOSPC: return 507;
	default: return 500;
	}
}

int http_error_dd(struct mg_connection *c, const struct dd_err *err)
{
	int status = http_status_for(err->code);
	if (status == 500) {
		log_error("internal error: %s", err->msg);
		return http_error(c, 500, "internal", "internal error: the server log has the details");
	}
	return http_error(c, status, dd_err_name(err->code), "%s", err->msg);
}

int http_no_content(struct mg_connection *c)
{
	http_send_head(c, &(struct http_head){ .status = 204 });
	return 204;
}

static int cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first key that appears twice in one object anywhere in j, or NULL.  cJSON
 * keeps both and reads the first; we refuse instead of guessing. */
static const char *duplicate_key(const cJSON *j, int depth)
{
	if (!j || depth > 64)
		return NULL;
	int n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, j) n++;
	if (cJSON_IsObject(j) && n > 1) {
		const char **keys = malloc((size_t)n * sizeof *keys);
		if (!keys)
			return NULL;
		int k = 0;
		cJSON_ArrayForEach(it, j) keys[k++] = it->string;
		qsort(keys, (size_t)n, sizeof *keys, cmp_keys);
		const char *dup = NULL;
		for (int i = 1; i < n && !dup; i++)
			if (strcmp(keys[i - 1], keys[i]) == 0)
				dup = keys[i];
		free(keys);
		if (dup)
			return dup;
	}
	cJSON_ArrayForEach(it, j)
	{
		const char *d = duplicate_key(it, depth + 1);
		if (d)
			return d;
	}
	return NULL;
}

int http_read_json(struct mg_connection *c, cJSON **out)
{
	*out = NULL;
	const struct mg_request_info *ri = mg_get_request_info(c);
	if (ri->content_length > (long long)HTTP_BODY_CAP)
		return http_error(c, 413, "too_large", "request body of %lld bytes is over the %u-byte limit",
				  ri->content_length, HTTP_BODY_CAP);
	char *buf = malloc(HTTP_BODY_CAP + 1);
	if (!buf)
		return http_error(c, 500, "internal", "out of memory");
	size_t len = 0;
	for (;;) {
		int n = mg_read(c, buf + len, HTTP_BODY_CAP + 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len > HTTP_BODY_CAP) {
			free(buf);
			return http_error(c, 413, "too_large", "request body is over the %u-byte limit",
					  HTTP_BODY_CAP);
		}
	}
	buf[len] = 0;
	if (ri->content_length > 0 && (long long)len < ri->content_length) {
		free(buf); /* the reads gave up (--request-timeout), or the deadline cut it (http_error says) */
		return http_error(c, 408, "timeout", "the request body ended after %zu of its %lld bytes: nothing more "
				  "came in time", len, ri->content_length);
	}
	body_deadline_done(c);
	if (len == 0) {
		free(buf);
		return http_error(c, 400, "invalid", "the request body is empty; a JSON object was expected");
	}
	/* json_parse scans before cJSON recurses: nesting, UTF-8, escapes (json.h) */
	cJSON *obj = NULL;
	struct dd_err err = { 0 };
	int prc = json_parse(buf, len, "body", &obj, &err);
	free(buf);
	if (prc)
		return http_error(c, 400, "invalid", "%s", err.msg);
	if (!cJSON_IsObject(obj)) {
		cJSON_Delete(obj);
		return http_error(c, 400, "invalid", "the request body must be a JSON object");
	}
	const char *dup = duplicate_key(obj, 0);
	if (dup) {
		int rc = http_error(c, 400, "invalid", "%.100s: the key appears twice in one object", dup);
		cJSON_Delete(obj);
		return rc;
	}
	*out = obj;
	return 0;
}

int http_read_fields(struct mg_connection *c, const char *const *allowed, cJSON **out)
{
	int rc = http_read_json(c, out);
	if (rc == 0 && (rc = http_only_fields(c, *out, allowed, ""))) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	return rc;
}

int http_query(const struct mg_request_info *ri, const char *name, char *buf, size_t len)
{
	if (!ri->query_string)
		return 0;
	/* mg_get_var empties its buffer when the name is absent: keep the caller's default */
	char tmp[1024];
	if (len > sizeof tmp || mg_get_var(ri->query_string, strlen(ri->query_string), name, tmp, len) < 0)
		return 0;
	memcpy(buf, tmp, strlen(tmp) + 1);
	return 1;
}

int http_query_int(struct mg_connection *c, const char *name, long long dflt, long long min,
		   long long max, long long *out)
{
	char buf[32];
	*out = dflt;
	if (!http_query(mg_get_request_info(c), name, buf, sizeof buf))
		return 0;
	char *end;
	long long v = strtoll(buf, &end, 10);
	if (end == buf || *end || v < min || v > max)
		return http_error(c, 400, "invalid", "%s: must be an integer from %lld to %lld", name, min, max);
	*out = v;
	return 0;
}

int http_form_stored(const char *path, long long size, void *ud)
{
	(void)path;
	(void)size;
	(void)ud;
	return MG_FORM_FIELD_HANDLE_NEXT;
}

void http_form_append(char *dst, size_t cap, const char *value, size_t len)
{
	size_t have = strlen(dst);
	snprintf(dst + have, cap - have, "%.*s", (int)len, value);
}

int http_only_fields(struct mg_connection *c, const cJSON *obj, const char *const *allowed,
		     const char *where)
{
	const char *name = json_unknown_field(obj, allowed);
	return name ? http_error(c, 400, "invalid", "%s%s: unknown field", where, name) : 0;
}
