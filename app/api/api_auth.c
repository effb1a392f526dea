/* api_auth.c — logging in and out, the user's own account (/me), API tokens and
 * the audit log.  Who a request is from was settled by api_dispatch
 * (auth_identify) and whether it may come here by perm_check; these handlers do
 * the rest.
 *
 * Login failures are counted per account name and per client address
 * (auth.c's rate limiter): 5 per name, 20 per address are free, after which each
 * attempt waits 1 s, doubled for each further failure, up to 15 minutes: 429
 * with Retry-After.  The answer to a failed login never says whether the name or
 * the password was wrong, and a name that does not exist costs the same hash as
 * one that does. */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "api.h"
#include "../accounts/auth.h"
#include "../http/perm.h"

#define LOGIN_NAME_MAX 256
#define TOKEN_NAME_MAX 64

static pthread_once_t limiters_once = PTHREAD_ONCE_INIT;
static struct ratelimit *by_name, *by_address;
static char dummy_hash[AUTH_HASH_LEN];

static void limiters_init(void)
{
	by_name = ratelimit_create(5, 1000, 15 * 60 * 1000, 15 * 60 * 1000);
	by_address = ratelimit_create(20, 1000, 15 * 60 * 1000, 15 * 60 * 1000);
	/* verified against when the name does not exist, so that it takes as long */
	if (auth_password_hash("not a password of anyone's", dummy_hash, NULL) != DD_OK)
		dummy_hash[0] = 0;
}

/* Send body (consumed) as JSON with status and extra header lines (each ending
 * in \r\n). */
static int reply(struct mg_connection *c, int status, const char *extra, cJSON *body)
{
	char *text = body ? cJSON_PrintUnformatted(body) : NULL;
	cJSON_Delete(body);
	size_t len = text ? strlen(text) : 0;
	http_send_head(c, &(struct http_head){ .status = status, .type = "application/json", .len = (long long)len,
					       .extra = extra });
	if (len)
		mg_write(c, text, len);
	free(text);
	return status;
}

static int accounts_off(struct req *r)
{
	return http_error(r->c, 409, "conflict",
			  "accounts are off on this server (it listens on loopback only): everything belongs "
			  "to the local user and no login is needed");
}

/* The string field key of body; 0 with *out, or the status of the 400 sent. */
static int string_field(struct req *r, cJSON *body, const char *key, size_t max, const char **out)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
	if (!cJSON_IsString(v) || !v->valuestring[0])
		return http_error(r->c, 400, "invalid", "%s: required, a non-empty string", key);
	if (strlen(v->valuestring) > max)
		return http_error(r->c, 400, "invalid", "%s: longer than %zu characters", key, max);
	*out = v->valuestring;
	return 0;
}

static void session_cookie(char *buf, size_t len, const char *token, int64_t max_age_s)
{
	snprintf(buf, len, "Set-Cookie: " AUTH_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%lld%s\r\n",
		 token, (long long)max_age_s, auth_config()->tls ? "; Secure" : "");
}

/* The rate limiter's key for a name: names are case-insensitive. */
static void name_key(const char *name, char key[LOGIN_NAME_MAX + 8])
{
	size_t i = 0;
	key[i++] = 'n';
	key[i++] = ':';
	for (; *name && i < LOGIN_NAME_MAX + 6; name++)
		key[i++] = (char)tolower((unsigned char)*name);
	key[i] = 0;
}

int api_login(struct req *r)
{
	static const char *const fields[] = { "name", "password", NULL };
	if (!r->auth->accounts)
		return accounts_off(r);
	pthread_once(&limiters_once, limiters_init);
	if (!by_name || !by_address)
		return http_error(r->c, 500, "internal", "out of memory");
	cJSON *body = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	const char *name = NULL, *pw = NULL;
	if ((rc = string_field(r, body, "name", LOGIN_NAME_MAX, &name)) ||
	    (rc = string_field(r, body, "password", AUTH_PASSWORD_MAX, &pw)))
		goto out;

	char nkey[LOGIN_NAME_MAX + 8], akey[64];
	name_key(name, nkey);
	snprintf(akey, sizeof akey, "a:%s", r->auth->address);
	int64_t now = fs_mono_ms();
	int64_t wait = ratelimit_wait(by_name, nkey, now), wait_a = ratelimit_wait(by_address, akey, now);
	if (wait_a > wait)
		wait = wait_a;
	if (wait > 0) {
		long long s = (wait + 999) / 1000;
		char extra[64];
		snprintf(extra, sizeof extra, "Retry-After: %lld\r\n", s);
		cJSON *e = cJSON_CreateObject(), *eo = cJSON_AddObjectToObject(e, "error");
		char msg[160];
		snprintf(msg, sizeof msg, "too many failed logins: try again in %lld second%s", s, s == 1 ? "" : "s");
		cJSON_AddStringToObject(eo, "code", "rate_limited");
		cJSON_AddStringToObject(eo, "message", msg);
		rc = reply(r->c, 429, extra, e);
		goto out;
	}

	struct auth_user u = { 0 };
	char hash[AUTH_HASH_LEN] = "";
	int disabled = 0;
	int found = auth_user_find(name, &u, hash, &disabled, NULL) == DD_OK;
	int ok = auth_password_verify(found ? hash : dummy_hash, pw) && found && !disabled;
	if (!ok) {
		ratelimit_fail(by_name, nkey, now);
		ratelimit_fail(by_address, akey, now);
		char target[AUTH_NAME_MAX + 1];
		snprintf(target, sizeof target, "%s", name);
		auth_audit(NULL, "login_failed", target, r->auth->address);
		rc = http_error(r->c, 401, "unauthenticated", "wrong name or password");
		goto out;
	}
	ratelimit_reset(by_name, nkey);
	/* A new session at each login, whatever came with the request: a session
	 * token planted before login (fixation) never becomes a logged-in one.  The
	 * old session, if the request had one, ends. */
	if (r->auth->session_id)
		auth_session_delete(r->auth->session_id, NULL);
	char token[AUTH_TOKEN_LEN + 1], csrf[AUTH_TOKEN_LEN + 1];
	int64_t sid, expires;
	struct dd_err err = { 0 };
	if (auth_session_create(u.id, token, csrf, &sid, &expires, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	auth_audit(&u, "login", NULL, r->auth->address);
	char cookie[256];
	session_cookie(cookie, sizeof cookie, token, auth_config()->max_ms / 1000);
	sodium_memzero(token, sizeof token);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "user", auth_user_json(&u));
	cJSON_AddStringToObject(o, "csrf_token", csrf);
	cJSON_AddNumberToObject(o, "expires_at", (double)expires);
	rc = reply(r->c, 200, cookie, o);
out:
	cJSON_Delete(body);
	return rc;
}

int api_logout(struct req *r)
{
	if (!r->auth->accounts)
		return accounts_off(r);
	if (r->auth->session_id) {
		auth_session_delete(r->auth->session_id, NULL);
		auth_audit(&r->auth->user, "logout", NULL, r->auth->address);
	}
	char cookie[256];
	session_cookie(cookie, sizeof cookie, "", 0);
	http_send_head(r->c, &(struct http_head){ .status = 204, .extra = cookie });
	return 204;
}

int api_me(struct req *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "user", auth_user_json(&r->auth->user));
	cJSON_AddBoolToObject(o, "accounts", r->auth->accounts);
	if (r->auth->session_id)
		cJSON_AddStringToObject(o, "csrf_token", r->auth->csrf);
	/* ?usage=1: one's own limits and today's use (the account page); not on every
	 * page load, since the disk use walks the user's job folders */
	char usage[8] = "";
	if (r->auth->accounts && http_query(mg_get_request_info(r->c), "usage", usage, sizeof usage) > 0 &&
	    !strcmp(usage, "1")) {
		cJSON_AddNumberToObject(o, "id", (double)r->auth->user.id); /* what the helper reads */
		api_users_add_quota_usage(o);
		cJSON_DeleteItemFromObjectCaseSensitive(o, "id");
	}
	return http_json(r->c, 200, o);
}

int api_me_password(struct req *r)
{
	static const char *const fields[] = { "current", "new", "revoke_tokens", NULL };
	if (!r->auth->accounts)
		return accounts_off(r);
	pthread_once(&limiters_once, limiters_init);
	cJSON *body = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	const char *cur = NULL, *pw = NULL;
	if ((rc = string_field(r, body, "current", AUTH_PASSWORD_MAX, &cur)) ||
	    (rc = string_field(r, body, "new", AUTH_PASSWORD_MAX, &pw)))
		goto out;
	const cJSON *revoke = cJSON_GetObjectItemCaseSensitive(body, "revoke_tokens");
	if (revoke && !cJSON_IsBool(revoke)) {
		rc = http_error(r->c, 400, "invalid", "revoke_tokens: must be true or false");
		goto out;
	}
	struct dd_err err = { 0 };
	if (auth_password_check(pw, &err) != DD_OK) {
		rc = http_error(r->c, 400, "invalid", "new: %s", err.msg + strlen("password: "));
		goto out;
	}
	/* a stolen session must not be a way to guess the password: the same limiter */
	char nkey[LOGIN_NAME_MAX + 8];
	name_key(r->auth->user.name, nkey);
	int64_t now = fs_mono_ms(), wait = by_name ? ratelimit_wait(by_name, nkey, now) : 0;
	if (wait > 0) {
		rc = http_error(r->c, 429, "rate_limited", "too many wrong passwords: try again in %lld seconds",
				(long long)(wait + 999) / 1000);
		goto out;
	}
	struct auth_user u;
	char hash[AUTH_HASH_LEN];
	if (auth_user_get(r->auth->user.id, &u, hash, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	if (!auth_password_verify(hash, cur)) {
		if (by_name)
			ratelimit_fail(by_name, nkey, now);
		rc = http_error(r->c, 403, "forbidden", "current: that is not your current password");
		goto out;
	}
	if (auth_user_set_password(u.id, pw, r->auth->session_id, cJSON_IsTrue(revoke), &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	auth_audit(&u, "password_change", u.name, r->auth->address);
	rc = http_no_content(r->c);
out:
	cJSON_Delete(body);
	return rc;
}

int api_me_tokens_list(struct req *r)
{
	if (!r->auth->accounts)
		return accounts_off(r);
	struct dd_err err = { 0 };
	cJSON *o = NULL;
	if (auth_apitoken_list(r->auth->user.id, &o, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	return http_json(r->c, 200, o);
}

int api_me_tokens_create(struct req *r)
{
	static const char *const fields[] = { "name", NULL };
	if (!r->auth->accounts)
		return accounts_off(r);
	cJSON *body = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	const char *name = NULL;
	if ((rc = string_field(r, body, "name", TOKEN_NAME_MAX, &name)))
		goto out;
	char secret[AUTH_TOKEN_LEN + 8];
	int64_t id;
	struct dd_err err = { 0 };
	if (auth_apitoken_create(r->auth->user.id, name, secret, &id, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	auth_audit(&r->auth->user, "token_create", name, r->auth->address);
	cJSON *o = cJSON_CreateObject(), *t = cJSON_AddObjectToObject(o, "token");
	cJSON_AddNumberToObject(t, "id", (double)id);
	cJSON_AddStringToObject(t, "name", name);
	cJSON_AddStringToObject(t, "secret", secret);
	sodium_memzero(secret, sizeof secret);
	rc = http_json(r->c, 201, o);
out:
	cJSON_Delete(body);
	return rc;
}

int api_me_token_revoke(struct req *r)
{
	if (!r->auth->accounts)
		return accounts_off(r);
	struct dd_err err = { 0 };
	if (auth_apitoken_revoke(r->auth->user.id, r->id, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	char target[32];
	snprintf(target, sizeof target, "token %lld", (long long)r->id);
	auth_audit(&r->auth->user, "token_revoke", target, r->auth->address);
	return http_no_content(r->c);
}

int api_audit_list(struct req *r)
{
	long long limit;
	int rc = http_query_int(r->c, "limit", 100, 1, 1000, &limit);
	if (rc)
		return rc;
	struct dd_err err = { 0 };
	cJSON *o = NULL;
	if (auth_audit_list((int)limit, &o, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	return http_json(r->c, 200, o);
}
