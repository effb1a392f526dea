/* auth.c — see auth.h. */
#define _GNU_SOURCE
#include "auth.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "../../store/store.h"

static struct auth_config cfg = { 0, 0, 8ll * 3600 * 1000, 7ll * 24 * 3600 * 1000 };

void auth_configure(const struct auth_config *c)
{
	cfg = *c;
	if (cfg.idle_ms <= 0)
		cfg.idle_ms = 8ll * 3600 * 1000;
	if (cfg.max_ms <= 0)
		cfg.max_ms = 7ll * 24 * 3600 * 1000;
}

const struct auth_config *auth_config(void) { return &cfg; }

const char *auth_role_name(enum auth_role role)
{
	switch (role) {
	case ROLE_ADMIN: return "admin";
	case ROLE_INSTRUCTOR: return "instructor";
	default: return "learner";
	}
}

int auth_role_parse(const char *s, enum auth_role *out)
{
	if (!s)
		return -1;
	if (strcmp(s, "learner") == 0)
		*out = ROLE_LEARNER;
	else if (strcmp(s, "instructor") == 0)
		*out = ROLE_INSTRUCTOR;
	else if (strcmp(s, "admin") == 0)
		*out = ROLE_ADMIN;
	else
		return -1;
	return 0;
}

/* ---- pure parts ---- */

/* sodium_init is cheap after the first call and safe from any thread. */
static int sodium_ready(struct dd_err *err)
{
	if (sodium_init() < 0)
		return dd_err_set(err, DD_EINTERNAL, "libsodium cannot start");
	return DD_OK;
}

/* Each hash takes 64 MiB for a moment: at most HASHES_AT_ONCE at a time, so that
 * a crowd of logins (or an attacker's) waits instead of exhausting memory. */
#define HASHES_AT_ONCE 4
static pthread_mutex_t hash_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hash_free = PTHREAD_COND_INITIALIZER;
static int hashing;

static void hash_enter(void)
{
	pthread_mutex_lock(&hash_lock);
	while (hashing >= HASHES_AT_ONCE)
		pthread_cond_wait(&hash_free, &hash_lock);
	hashing++;
	pthread_mutex_unlock(&hash_lock);
}

static void hash_leave(void)
{
	pthread_mutex_lock(&hash_lock);
	hashing--;
	pthread_cond_signal(&hash_free);
	pthread_mutex_unlock(&hash_lock);
}

int auth_password_hash(const char *pw, char out[AUTH_HASH_LEN], struct dd_err *err)
{
	int rc = sodium_ready(err);
	if (rc)
		return rc;
	_Static_assert(AUTH_HASH_LEN == crypto_pwhash_STRBYTES, "hash buffer size");
	hash_enter();
	rc = crypto_pwhash_str(out, pw, strlen(pw), crypto_pwhash_OPSLIMIT_INTERACTIVE,
			       crypto_pwhash_MEMLIMIT_INTERACTIVE);
	hash_leave();
	if (rc != 0)
		return dd_err_set(err, DD_ENOMEM, "not enough memory to hash a password (64 MiB)");
	return DD_OK;
}

int auth_password_verify(const char *hash, const char *pw)
{
	if (sodium_ready(NULL) || !hash || !pw || strlen(hash) >= AUTH_HASH_LEN)
		return 0;
	hash_enter();
	int ok = crypto_pwhash_str_verify(hash, pw, strlen(pw)) == 0;
	hash_leave();
	return ok;
}

int auth_password_check(const char *pw, struct dd_err *err)
{
	size_t n = strlen(pw);
	if (n < AUTH_PASSWORD_MIN)
		return dd_err_set(err, DD_EINVAL, "password: at least %d characters, please", AUTH_PASSWORD_MIN);
	if (n > AUTH_PASSWORD_MAX)
		return dd_err_set(err, DD_EINVAL, "password: at most %d characters", AUTH_PASSWORD_MAX);
	return DD_OK;
}

int auth_name_check(const char *name, struct dd_err *err)
{
	size_t n = strlen(name);
	if (n == 0 || n > AUTH_NAME_MAX)
		return dd_err_set(err, DD_EINVAL, "name: 1 to %d characters", AUTH_NAME_MAX);
	if (!isalnum((unsigned char)name[0]))
		return dd_err_set(err, DD_EINVAL, "name: must start with a letter or a digit");
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (!(isalnum(ch) || ch == '.' || ch == '_' || ch == '-') || ch > 127)
			return dd_err_set(err, DD_EINVAL,
					  "name: only letters, digits, '.', '_' and '-' (\"%c\" is not)", ch);
	}
	if (strcasecmp(name, "local") == 0)
		return dd_err_set(err, DD_EINVAL, "name: \"local\" is the user of a server without accounts");
	return DD_OK;
}

void auth_token_new(char out[AUTH_TOKEN_LEN + 1])
{
	unsigned char raw[32];
	if (sodium_ready(NULL) == DD_OK)
		randombytes_buf(raw, sizeof raw);
	sodium_bin2base64(out, AUTH_TOKEN_LEN + 1, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof raw);
}

void auth_token_digest(const char *token, char hex[65])
{
	unsigned char d[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(d, (const unsigned char *)token, strlen(token));
	sodium_bin2hex(hex, 65, d, sizeof d);
}

/* ---- rate limiter ---- */

#define RL_SLOTS 1024

struct rl_entry {
	char key[96];
	int fails;
	int64_t last_fail;
};

struct ratelimit {
	pthread_mutex_t lock;
	int threshold;
	int64_t base_ms, max_ms, forget_ms;
	struct rl_entry e[RL_SLOTS];
};

struct ratelimit *ratelimit_create(int threshold, int64_t base_ms, int64_t max_ms, int64_t forget_ms)
{
	struct ratelimit *rl = calloc(1, sizeof *rl);
	if (!rl)
		return NULL;
	pthread_mutex_init(&rl->lock, NULL);
	rl->threshold = threshold;
	rl->base_ms = base_ms;
	rl->max_ms = max_ms;
	rl->forget_ms = forget_ms;
	return rl;
}

void ratelimit_destroy(struct ratelimit *rl)
{
	if (!rl)
		return;
	pthread_mutex_destroy(&rl->lock);
	free(rl);
}

/* The entry for key (lock held), or NULL; with make, a new one in a free slot
 * or in place of the one whose last failure is oldest. */
static struct rl_entry *rl_find(struct ratelimit *rl, const char *key, int make, int64_t now)
{
	struct rl_entry *free_slot = NULL, *oldest = &rl->e[0];
	for (int i = 0; i < RL_SLOTS; i++) {
		struct rl_entry *e = &rl->e[i];
		if (e->key[0] && now - e->last_fail > rl->forget_ms)
			e->key[0] = 0; /* forgotten */
		if (e->key[0] && strncmp(e->key, key, sizeof e->key - 1) == 0)
			return e;
		if (!e->key[0] && !free_slot)
			free_slot = e;
		if (e->last_fail < oldest->last_fail)
			oldest = e;
	}
	if (!make)
		return NULL;
	struct rl_entry *e = free_slot ? free_slot : oldest;
	memset(e, 0, sizeof *e);
	snprintf(e->key, sizeof e->key, "%s", key);
	return e;
}

int64_t ratelimit_wait(struct ratelimit *rl, const char *key, int64_t now_ms)
{
	pthread_mutex_lock(&rl->lock);
	struct rl_entry *e = rl_find(rl, key, 0, now_ms);
	int64_t wait = 0;
	if (e && e->fails >= rl->threshold) {
		int shift = e->fails - rl->threshold;
		int64_t delay = shift >= 30 ? rl->max_ms : rl->base_ms << shift;
		if (delay > rl->max_ms)
			delay = rl->max_ms;
		if (e->last_fail + delay > now_ms)
			wait = e->last_fail + delay - now_ms;
	}
	pthread_mutex_unlock(&rl->lock);
	return wait;
}

void ratelimit_fail(struct ratelimit *rl, const char *key, int64_t now_ms)
{
	pthread_mutex_lock(&rl->lock);
	struct rl_entry *e = rl_find(rl, key, 1, now_ms);
	e->fails++;
	e->last_fail = now_ms;
	pthread_mutex_unlock(&rl->lock);
}

void ratelimit_reset(struct ratelimit *rl, const char *key)
{
	pthread_mutex_lock(&rl->lock);
	struct rl_entry *e = rl_find(rl, key, 0, INT64_MIN / 2);
	if (e)
		e->key[0] = 0;
	pthread_mutex_unlock(&rl->lock);
}

/* ---- accounts in the store ---- */

_Static_assert(STORE_HASH_LEN == AUTH_HASH_LEN, "the store keeps whole Argon2id strings");
_Static_assert(STORE_NAME_LEN > AUTH_NAME_MAX, "the store keeps whole names");
_Static_assert(STORE_CSRF_LEN > AUTH_TOKEN_LEN, "the store keeps whole CSRF tokens");

/* u from the store's row (an unknown role reads as a learner). */
static void user_of(const struct store_user *su, struct auth_user *u)
{
	u->id = su->id;
	snprintf(u->name, sizeof u->name, "%s", su->name);
	if (auth_role_parse(su->role, &u->role) != 0)
		u->role = ROLE_LEARNER;
}

cJSON *auth_user_json(const struct auth_user *u)
{
	cJSON *o = cJSON_CreateObject();
	if (u->id)
		cJSON_AddNumberToObject(o, "id", (double)u->id);
	else
		cJSON_AddNullToObject(o, "id");
	cJSON_AddStringToObject(o, "name", u->name);
	cJSON_AddStringToObject(o, "role", auth_role_name(u->role));
	return o;
}

/* {key: list} or, when list is NULL (the store failed), rc and *out NULL. */
static int wrap_list(int rc, const char *key, cJSON *list, cJSON **out)
{
	*out = NULL;
	if (rc != DD_OK)
		return rc;
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, key, list);
	*out = body;
	return DD_OK;
}

/* ---- users ---- */

int auth_user_add(const char *name, enum auth_role role, const char *pw, int64_t *id, struct dd_err *err)
{
	int rc;
	char hash[AUTH_HASH_LEN];
	if ((rc = auth_name_check(name, err)) || (rc = auth_password_check(pw, err)) ||
	    (rc = auth_password_hash(pw, hash, err)))
		return rc;
	rc = store_user_add(name, auth_role_name(role), hash, fs_now_ms(), id, err);
	sodium_memzero(hash, sizeof hash);
	return rc;
}

int auth_user_find(const char *name, struct auth_user *u, char hash[AUTH_HASH_LEN], int *disabled,
		   struct dd_err *err)
{
	struct store_user su;
	int rc = store_user_find(name, &su, hash, err);
	if (rc == DD_OK) {
		user_of(&su, u);
		if (disabled)
			*disabled = su.disabled;
	}
	return rc;
}

int auth_user_get(int64_t id, struct auth_user *u, char hash[AUTH_HASH_LEN], struct dd_err *err)
{
	struct store_user su;
	int rc = store_user_get(id, &su, hash, err);
	if (rc == DD_OK)
		user_of(&su, u);
	return rc;
}

int auth_user_list(cJSON **out, struct dd_err *err)
{
	struct store_user *rows = NULL;
	int n = 0;
	int rc = store_user_list(&rows, &n, err);
	cJSON *arr = rc == DD_OK ? cJSON_CreateArray() : NULL;
	for (int i = 0; arr && i < n; i++) {
		struct auth_user u;
		user_of(&rows[i], &u);
		cJSON *o = auth_user_json(&u);
		cJSON_AddNumberToObject(o, "created_at", (double)rows[i].created_at);
		cJSON_AddBoolToObject(o, "disabled", rows[i].disabled);
		cJSON_AddItemToArray(arr, o);
	}
	free(rows);
	return wrap_list(rc, "users", arr, out);
}

int auth_user_count(int64_t *n, struct dd_err *err)
{
	return store_user_count(n, err);
}

int auth_user_set_password(int64_t id, const char *pw, int64_t keep_session, int revoke_tokens,
			   struct dd_err *err)
{
	int rc;
	char hash[AUTH_HASH_LEN];
	if ((rc = auth_password_check(pw, err)) || (rc = auth_password_hash(pw, hash, err)))
		return rc;
	rc = store_user_set_pwhash(id, hash, err);
	sodium_memzero(hash, sizeof hash);
	if (rc || (rc = store_sessions_end(id, keep_session, err)) || !revoke_tokens)
		return rc;
	return store_tokens_revoke_all(id, fs_now_ms(), err);
}

int auth_user_set_role(int64_t id, enum auth_role role, struct dd_err *err)
{
	return store_user_set_role(id, auth_role_name(role), err);
}

int auth_user_remove(int64_t id, struct dd_err *err)
{
	return store_user_remove(id, err);
}

/* ---- sessions ---- */

int auth_session_create(int64_t user_id, char token[AUTH_TOKEN_LEN + 1], char csrf[AUTH_TOKEN_LEN + 1],
			int64_t *session_id, int64_t *expires_ms, struct dd_err *err)
{
	char digest[65];
	auth_token_new(token);
	auth_token_new(csrf);
	auth_token_digest(token, digest);
	int64_t now = fs_now_ms();
	*expires_ms = now + cfg.max_ms;
	return store_session_add(user_id, digest, csrf, now, *expires_ms, session_id, err);
}

int auth_sessions_sweep(struct dd_err *err)
{
	int64_t now = fs_now_ms();
	return store_sessions_sweep(now, now - cfg.idle_ms, err);
}

int auth_session_delete(int64_t session_id, struct dd_err *err)
{
	return store_session_delete(session_id, err);
}

int auth_session_refresh(struct auth_state *as)
{
	if (!as->session_id && !as->token_id)
		return 0;
	struct store_user su;
	int live = as->session_id ? store_session_user(as->session_id, fs_now_ms(), &su)
				  : store_token_user(as->token_id, &su);
	if (live > 0)
		user_of(&su, &as->user);
	/* the store could not say (busy): keep what we had, ask again later */
	return live == 0 ? -1 : 0;
}

/* The session whose token is token, into st; 0 when none is live. */
static int session_lookup(const char *token, struct auth_state *as)
{
	char digest[65];
	auth_token_digest(token, digest);
	struct store_session s;
	if (!store_session_find(digest, &s))
		return 0;
	int64_t now = fs_now_ms();
	if (now >= s.expires_at || now - s.last_seen >= cfg.idle_ms) {
		auth_session_delete(s.id, NULL);
		return 0;
	}
	user_of(&s.user, &as->user);
	as->session_id = s.id;
	snprintf(as->csrf, sizeof as->csrf, "%s", s.csrf);
	/* last_seen is written at most every quarter of the idle time (and every
	 * minute at most), not on every request */
	int64_t every = cfg.idle_ms / 4 < 60000 ? cfg.idle_ms / 4 : 60000;
	if (now - s.last_seen >= every)
		store_session_touch(s.id, now);
	return 1;
}

/* ---- API tokens ---- */

int auth_apitoken_create(int64_t user_id, const char *name, char secret[AUTH_TOKEN_LEN + 8],
			 int64_t *id, struct dd_err *err)
{
	char raw[AUTH_TOKEN_LEN + 1], digest[65];
	auth_token_new(raw);
	snprintf(secret, AUTH_TOKEN_LEN + 8, AUTH_API_PREFIX "%s", raw);
	auth_token_digest(secret, digest);
	return store_token_add(user_id, name, digest, id, err);
}

int auth_apitoken_list(int64_t user_id, cJSON **out, struct dd_err *err)
{
	cJSON *list = NULL;
	int rc = store_token_list(user_id, &list, err);
	return wrap_list(rc, "tokens", list, out);
}

int auth_apitoken_revoke(int64_t user_id, int64_t id, struct dd_err *err)
{
	int rc = store_token_revoke(user_id, id, fs_now_ms(), err);
	if (rc == DD_ENOENT)
		return dd_err_set(err, DD_ENOENT, "you have no API token %lld", (long long)id);
	return rc;
}

static int apitoken_lookup(const char *secret, struct auth_state *as)
{
	char digest[65];
	auth_token_digest(secret, digest);
	struct store_token t;
	if (!store_token_find(digest, &t))
		return 0;
	user_of(&t.user, &as->user);
	as->token_id = t.id;
	int64_t now = fs_now_ms();
	if (now - t.last_used >= 60000) /* last_used to the minute */
		store_token_touch(t.id, now);
	return 1;
}

/* ---- who is asking ---- */

void auth_identify(const struct mg_connection *c, struct auth_state *as)
{
	memset(as, 0, sizeof *as);
	const struct mg_request_info *ri = mg_get_request_info(c);
	snprintf(as->address, sizeof as->address, "%s", ri && ri->remote_addr[0] ? ri->remote_addr : "?");
	as->accounts = cfg.accounts;
	if (!cfg.accounts) {
		as->authenticated = 1;
		snprintf(as->user.name, sizeof as->user.name, "local");
		as->user.role = ROLE_ADMIN;
		return;
	}
	const char *authz = mg_get_header(c, "Authorization");
	if (authz && strncasecmp(authz, "Bearer ", 7) == 0) {
		const char *tok = authz + 7;
		while (*tok == ' ')
			tok++;
		/* a bearer token that does not match is no identity, even with a cookie */
		if (strlen(tok) < 200)
			as->authenticated = apitoken_lookup(tok, as);
		return;
	}
	const char *cookies = mg_get_header(c, "Cookie");
	char token[128];
	if (cookies && mg_get_cookie(cookies, AUTH_COOKIE, token, sizeof token) == AUTH_TOKEN_LEN)
		as->authenticated = session_lookup(token, as);
	sodium_memzero(token, sizeof token);
}

/* ---- audit ---- */

void auth_audit(const struct auth_user *u, const char *action, const char *target, const char *address)
{
	struct dd_err err = { 0 };
	if (store_audit_add(fs_now_ms(), u ? u->id : 0, u && u->name[0] ? u->name : NULL, action, target, address,
			    &err) != DD_OK)
		log_warn("audit: %s (%s %s)", err.msg, action, target ? target : "");
}

int auth_audit_list(int limit, cJSON **out, struct dd_err *err)
{
	cJSON *list = NULL;
	int rc = store_audit_list(limit, &list, err);
	return wrap_list(rc, "audit", list, out);
}
