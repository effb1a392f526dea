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

/* ---- store helpers ---- */

/* A statement on this thread's connection; finalize after use. */
static sqlite3_stmt *prep(const char *sql, struct dd_err *err)
{
	sqlite3 *db = store_conn(err);
	if (!db)
		return NULL;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		dd_err_set(err, DD_EIO, "store: %s", sqlite3_errmsg(db));
		return NULL;
	}
	return st;
}

static int fail_db(sqlite3_stmt *st, const char *what, struct dd_err *err)
{
	sqlite3 *db = sqlite3_db_handle(st);
	int rc = dd_err_set(err, sqlite3_errcode(db) == SQLITE_BUSY ? DD_EBUSY : DD_EIO, "store: %s: %s", what,
			    sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return rc;
}

/* Step a query and finalize it: *out = {key: [row(st) for each row]}.  DD_OK, or
 * the store's error saying what it was doing (and *out NULL). */
static int list_rows(sqlite3_stmt *st, const char *key, cJSON *(*row)(sqlite3_stmt *st), const char *what,
		     cJSON **out, struct dd_err *err)
{
	cJSON *body = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(body, key);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(arr, row(st));
	if (rc != SQLITE_DONE) {
		cJSON_Delete(body);
		return fail_db(st, what, err);
	}
	sqlite3_finalize(st);
	*out = body;
	return DD_OK;
}

/* Step a statement that returns nothing and finalize it; *changes gets the
 * number of rows changed when not NULL. */
static int run(sqlite3_stmt *st, const char *what, int *changes, struct dd_err *err)
{
	if (!st)
		return err ? err->code : DD_EIO;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_CONSTRAINT)
		return fail_db(st, what, err), DD_EEXIST;
	if (rc != SQLITE_DONE)
		return fail_db(st, what, err);
	if (changes)
		*changes = sqlite3_changes(sqlite3_db_handle(st));
	sqlite3_finalize(st);
	return DD_OK;
}

static void fill_user(sqlite3_stmt *st, int col, struct auth_user *u)
{
	u->id = sqlite3_column_int64(st, col);
	snprintf(u->name, sizeof u->name, "%s", (const char *)sqlite3_column_text(st, col + 1));
	if (auth_role_parse((const char *)sqlite3_column_text(st, col + 2), &u->role) != 0)
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

/* ---- users ---- */

int auth_user_add(const char *name, enum auth_role role, const char *pw, int64_t *id, struct dd_err *err)
{
	int rc;
	char hash[AUTH_HASH_LEN];
	if ((rc = auth_name_check(name, err)) || (rc = auth_password_check(pw, err)) ||
	    (rc = auth_password_hash(pw, hash, err)))
		return rc;
	sqlite3_stmt *st = prep("INSERT INTO users(name,role,pwhash,created_at) VALUES(?,?,?,?)", err);
	if (st) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, auth_role_name(role), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 4, fs_now_ms());
	}
	rc = run(st, "adding a user", NULL, err);
	sodium_memzero(hash, sizeof hash);
	if (rc == DD_EEXIST)
		return dd_err_set(err, DD_EEXIST, "a user called \"%s\" already exists", name);
	if (rc == DD_OK && id)
		*id = sqlite3_last_insert_rowid(store_conn(NULL));
	return rc;
}

static int user_lookup(sqlite3_stmt *st, const char *what, struct auth_user *u, char *hash, int *disabled,
		       struct dd_err *err)
{
	if (!st)
		return err ? err->code : DD_EIO;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_finalize(st);
		return dd_err_set(err, DD_ENOENT, "there is no user %s", what);
	}
	if (rc != SQLITE_ROW)
		return fail_db(st, "reading a user", err);
	fill_user(st, 0, u);
	if (hash)
		snprintf(hash, AUTH_HASH_LEN, "%s", (const char *)sqlite3_column_text(st, 3));
	if (disabled)
		*disabled = sqlite3_column_int(st, 4);
	sqlite3_finalize(st);
	return DD_OK;
}

int auth_user_find(const char *name, struct auth_user *u, char hash[AUTH_HASH_LEN], int *disabled,
		   struct dd_err *err)
{
	sqlite3_stmt *st = prep("SELECT id,name,role,pwhash,disabled FROM users WHERE name=?", err);
	if (st)
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	char what[AUTH_NAME_MAX + 8];
	snprintf(what, sizeof what, "\"%.*s\"", AUTH_NAME_MAX, name);
	return user_lookup(st, what, u, hash, disabled, err);
}

int auth_user_get(int64_t id, struct auth_user *u, char hash[AUTH_HASH_LEN], struct dd_err *err)
{
	sqlite3_stmt *st = prep("SELECT id,name,role,pwhash,disabled FROM users WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	char what[32];
	snprintf(what, sizeof what, "%lld", (long long)id);
	return user_lookup(st, what, u, hash, NULL, err);
}

static cJSON *user_row(sqlite3_stmt *st)
{
	struct auth_user u;
	fill_user(st, 0, &u);
	cJSON *o = auth_user_json(&u);
	cJSON_AddNumberToObject(o, "created_at", (double)sqlite3_column_int64(st, 3));
	cJSON_AddBoolToObject(o, "disabled", sqlite3_column_int(st, 4));
	return o;
}

int auth_user_list(cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT id,name,role,created_at,disabled FROM users ORDER BY name", err);
	if (!st)
		return err ? err->code : DD_EIO;
	return list_rows(st, "users", user_row, "listing users", out, err);
}

int auth_user_count(int64_t *n, struct dd_err *err)
{
	*n = 0;
	sqlite3_stmt *st = prep("SELECT count(*) FROM users WHERE disabled=0", err);
	if (!st)
		return err ? err->code : DD_EIO;
	if (sqlite3_step(st) == SQLITE_ROW)
		*n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return DD_OK;
}

static int one_user_changed(int rc, int changes, int64_t id, struct dd_err *err)
{
	if (rc == DD_OK && changes == 0)
		return dd_err_set(err, DD_ENOENT, "there is no user %lld", (long long)id);
	return rc;
}

int auth_user_set_password(int64_t id, const char *pw, int64_t keep_session, int revoke_tokens,
			   struct dd_err *err)
{
	int rc, changes = 0;
	char hash[AUTH_HASH_LEN];
	if ((rc = auth_password_check(pw, err)) || (rc = auth_password_hash(pw, hash, err)))
		return rc;
	sqlite3_stmt *st = prep("UPDATE users SET pwhash=? WHERE id=?", err);
	if (st) {
		sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, id);
	}
	rc = run(st, "changing a password", &changes, err);
	rc = one_user_changed(rc, changes, id, err);
	sodium_memzero(hash, sizeof hash);
	if (rc)
		return rc;
	st = prep("DELETE FROM sessions WHERE user_id=? AND id<>?", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, keep_session);
	}
	if ((rc = run(st, "ending the other sessions", NULL, err)) || !revoke_tokens)
		return rc;
	st = prep("UPDATE api_tokens SET revoked_at=? WHERE user_id=? AND revoked_at IS NULL", err);
	if (st) {
		sqlite3_bind_int64(st, 1, fs_now_ms());
		sqlite3_bind_int64(st, 2, id);
	}
	return run(st, "revoking the API tokens", NULL, err);
}

int auth_user_set_role(int64_t id, enum auth_role role, struct dd_err *err)
{
	int changes = 0;
	sqlite3_stmt *st = prep("UPDATE users SET role=? WHERE id=?", err);
	if (st) {
		sqlite3_bind_text(st, 1, auth_role_name(role), -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, id);
	}
	int rc = run(st, "changing a role", &changes, err);
	return one_user_changed(rc, changes, id, err);
}

int auth_user_remove(int64_t id, struct dd_err *err)
{
	int changes = 0;
	sqlite3_stmt *st = prep("DELETE FROM users WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	int rc = run(st, "removing a user", &changes, err);
	return one_user_changed(rc, changes, id, err);
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
	sqlite3_stmt *st = prep("INSERT INTO sessions(token_hash,user_id,created_at,expires_at,last_seen,csrf)"
				" VALUES(?,?,?,?,?,?)",
				err);
	if (st) {
		sqlite3_bind_text(st, 1, digest, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, user_id);
		sqlite3_bind_int64(st, 3, now);
		sqlite3_bind_int64(st, 4, *expires_ms);
		sqlite3_bind_int64(st, 5, now);
		sqlite3_bind_text(st, 6, csrf, -1, SQLITE_TRANSIENT);
	}
	int rc = run(st, "starting a session", NULL, err);
	if (rc == DD_OK)
		*session_id = sqlite3_last_insert_rowid(store_conn(NULL));
	return rc;
}

int auth_sessions_sweep(struct dd_err *err)
{
	int64_t now = fs_now_ms();
	sqlite3_stmt *st = prep("DELETE FROM sessions WHERE expires_at<=? OR last_seen<=?", err);
	if (st) {
		sqlite3_bind_int64(st, 1, now);
		sqlite3_bind_int64(st, 2, now - cfg.idle_ms);
	}
	return run(st, "removing ended sessions", NULL, err);
}

int auth_session_delete(int64_t session_id, struct dd_err *err)
{
	sqlite3_stmt *st = prep("DELETE FROM sessions WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, session_id);
	return run(st, "ending a session", NULL, err);
}

int auth_session_refresh(struct auth_state *as)
{
	if (!as->session_id && !as->token_id)
		return 0;
	sqlite3_stmt *st = as->session_id
		? prep("SELECT u.id,u.name,u.role FROM sessions s JOIN users u ON u.id=s.user_id"
		       " WHERE s.id=? AND s.expires_at>? AND u.disabled=0",
		       NULL)
		: prep("SELECT u.id,u.name,u.role FROM api_tokens t JOIN users u ON u.id=t.user_id"
		       " WHERE t.id=? AND t.revoked_at IS NULL AND u.disabled=0 AND ?>0",
		       NULL);
	if (!st)
		return 0; /* the store is busy: keep what we had, ask again later */
	sqlite3_bind_int64(st, 1, as->session_id ? as->session_id : as->token_id);
	sqlite3_bind_int64(st, 2, fs_now_ms());
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		fill_user(st, 0, &as->user);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -1 : 0;
}

/* sql (one parameter: a token's digest) stepped to the row of secret, or NULL
 * when there is none; the caller finalizes it. */
static sqlite3_stmt *row_of_token(const char *sql, const char *secret)
{
	char digest[65];
	auth_token_digest(secret, digest);
	sqlite3_stmt *st = prep(sql, NULL);
	if (!st)
		return NULL;
	sqlite3_bind_text(st, 1, digest, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

/* The session whose token is token, into st; 0 when none is live. */
static int session_lookup(const char *token, struct auth_state *as)
{
	int64_t now = fs_now_ms();
	sqlite3_stmt *st = row_of_token("SELECT u.id,u.name,u.role,s.id,s.expires_at,s.last_seen,s.csrf"
					" FROM sessions s JOIN users u ON u.id=s.user_id"
					" WHERE s.token_hash=? AND u.disabled=0",
					token);
	if (!st)
		return 0;
	int64_t sid = sqlite3_column_int64(st, 3), expires = sqlite3_column_int64(st, 4),
		last = sqlite3_column_int64(st, 5);
	if (now >= expires || now - last >= cfg.idle_ms) {
		sqlite3_finalize(st);
		auth_session_delete(sid, NULL);
		return 0;
	}
	fill_user(st, 0, &as->user);
	as->session_id = sid;
	snprintf(as->csrf, sizeof as->csrf, "%s", (const char *)sqlite3_column_text(st, 6));
	sqlite3_finalize(st);
	/* last_seen is written at most every quarter of the idle time (and every
	 * minute at most), not on every request */
	int64_t every = cfg.idle_ms / 4 < 60000 ? cfg.idle_ms / 4 : 60000;
	if (now - last >= every) {
		st = prep("UPDATE sessions SET last_seen=? WHERE id=?", NULL);
		if (st) {
			sqlite3_bind_int64(st, 1, now);
			sqlite3_bind_int64(st, 2, sid);
		}
		run(st, "touching a session", NULL, NULL);
	}
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
	sqlite3_stmt *st = prep("INSERT INTO api_tokens(user_id,name,token_hash,created_at) VALUES(?,?,?,?)", err);
	if (st) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, digest, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 4, fs_now_ms());
	}
	int rc = run(st, "creating an API token", NULL, err);
	if (rc == DD_OK)
		*id = sqlite3_last_insert_rowid(store_conn(NULL));
	return rc;
}

static cJSON *token_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	cJSON_AddStringToObject(o, "name", (const char *)sqlite3_column_text(st, 1));
	cJSON_AddNumberToObject(o, "created_at", (double)sqlite3_column_int64(st, 2));
	if (sqlite3_column_type(st, 3) == SQLITE_NULL)
		cJSON_AddNullToObject(o, "last_used");
	else
		cJSON_AddNumberToObject(o, "last_used", (double)sqlite3_column_int64(st, 3));
	cJSON_AddBoolToObject(o, "revoked", sqlite3_column_int(st, 4));
	return o;
}

int auth_apitoken_list(int64_t user_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT id,name,created_at,last_used,revoked_at IS NOT NULL FROM api_tokens"
				" WHERE user_id=? ORDER BY id",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, user_id);
	return list_rows(st, "tokens", token_row, "listing API tokens", out, err);
}

int auth_apitoken_revoke(int64_t user_id, int64_t id, struct dd_err *err)
{
	int changes = 0;
	sqlite3_stmt *st = prep("UPDATE api_tokens SET revoked_at=coalesce(revoked_at,?) WHERE id=? AND user_id=?", err);
	if (st) {
		sqlite3_bind_int64(st, 1, fs_now_ms());
		sqlite3_bind_int64(st, 2, id);
		sqlite3_bind_int64(st, 3, user_id);
	}
	int rc = run(st, "revoking an API token", &changes, err);
	if (rc == DD_OK && changes == 0)
		return dd_err_set(err, DD_ENOENT, "you have no API token %lld", (long long)id);
	return rc;
}

static int apitoken_lookup(const char *secret, struct auth_state *as)
{
	sqlite3_stmt *st = row_of_token("SELECT u.id,u.name,u.role,t.id,coalesce(t.last_used,0) FROM api_tokens t"
					" JOIN users u ON u.id=t.user_id"
					" WHERE t.token_hash=? AND t.revoked_at IS NULL AND u.disabled=0",
					secret);
	if (!st)
		return 0;
	fill_user(st, 0, &as->user);
	int64_t tid = sqlite3_column_int64(st, 3), last = sqlite3_column_int64(st, 4);
	sqlite3_finalize(st);
	as->token_id = tid;
	int64_t now = fs_now_ms();
	if (now - last >= 60000) { /* last_used to the minute */
		st = prep("UPDATE api_tokens SET last_used=? WHERE id=?", NULL);
		if (st) {
			sqlite3_bind_int64(st, 1, now);
			sqlite3_bind_int64(st, 2, tid);
		}
		run(st, "noting a token's use", NULL, NULL);
	}
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
	sqlite3_stmt *st = prep("INSERT INTO audit(at,user_id,user_name,action,target,address) VALUES(?,?,?,?,?,?)",
				&err);
	if (st) {
		sqlite3_bind_int64(st, 1, fs_now_ms());
		if (u && u->id)
			sqlite3_bind_int64(st, 2, u->id);
		if (u && u->name[0])
			sqlite3_bind_text(st, 3, u->name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, action, -1, SQLITE_TRANSIENT);
		if (target)
			sqlite3_bind_text(st, 5, target, -1, SQLITE_TRANSIENT);
		if (address)
			sqlite3_bind_text(st, 6, address, -1, SQLITE_TRANSIENT);
	}
	if (run(st, "writing the audit log", NULL, &err) != DD_OK)
		log_warn("audit: %s (%s %s)", err.msg, action, target ? target : "");
}

static cJSON *audit_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "at", (double)sqlite3_column_int64(st, 0));
	static const char *const keys[] = { NULL, "user", "action", "target", "address" };
	for (int k = 1; k <= 4; k++) {
		const char *s = (const char *)sqlite3_column_text(st, k);
		if (s)
			cJSON_AddStringToObject(o, keys[k], s);
		else
			cJSON_AddNullToObject(o, keys[k]);
	}
	return o;
}

int auth_audit_list(int limit, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT at,user_name,action,target,address FROM audit ORDER BY id DESC LIMIT ?", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int(st, 1, limit);
	return list_rows(st, "audit", audit_row, "reading the audit log", out, err);
}
