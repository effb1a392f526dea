/* auth.h — accounts: users and their passwords, sessions, API tokens, the login
 * rate limiter and the audit log.
 *
 * Secrets never reach the database: a password is kept as an Argon2id string
 * (libsodium's crypto_pwhash_str), a session or API token as the hex SHA-256 of
 * its 256 random bits.  A session token travels only in the dd_session cookie
 * (HttpOnly, SameSite=Strict); its CSRF token is kept in clear, since it is
 * useless without the cookie.  Who may do what is perm.c's business; this file
 * only says who is asking.
 *
 * The rows live in the store (store/accounts.h), which this file calls for
 * every read and write; the hashing, the tokens, the rate limiter and the rules
 * are here.  Everything is safe on any thread; the rate limiter is a fixed
 * table under its own lock. */
#ifndef DD_AUTH_H
#define DD_AUTH_H

#include <stdint.h>

#include <civetweb.h>
#include <cjson/cJSON.h>

#include "../../common/err.h"

#define AUTH_NAME_MAX 32
#define AUTH_PASSWORD_MIN 8
#define AUTH_PASSWORD_MAX 1024
#define AUTH_HASH_LEN 128   /* crypto_pwhash_STRBYTES */
#define AUTH_TOKEN_LEN 43   /* 32 random bytes, base64url without padding */
#define AUTH_API_PREFIX "ddt_"
#define AUTH_COOKIE "dd_session"

enum auth_role { ROLE_LEARNER, ROLE_INSTRUCTOR, ROLE_ADMIN };

/* "learner", "instructor", "admin". */
const char *auth_role_name(enum auth_role role);
/* 0 and *out on a known name, -1 otherwise. */
int auth_role_parse(const char *s, enum auth_role *out);

struct auth_user {
	int64_t id; /* 0: nobody */
	char name[AUTH_NAME_MAX + 1];
	enum auth_role role;
};

/* Who a request is from, filled by auth_identify.  With accounts off, user is the
 * local user (id 0, role admin) and every check passes. */
struct auth_state {
	int accounts;       /* accounts on for this server */
	int authenticated;  /* a valid session or token came with the request */
	struct auth_user user;
	int64_t session_id; /* 0 unless authenticated by the session cookie */
	int64_t token_id;   /* 0 unless authenticated by an API token */
	char csrf[AUTH_TOKEN_LEN + 1];
	char address[48];   /* the client's address */
};

/* ---- settings, set once at start-up ---- */
struct auth_config {
	int accounts;     /* 1: accounts on */
	int tls;          /* cookies get Secure */
	int64_t idle_ms;  /* a session unused this long ends (default 8 h) */
	int64_t max_ms;   /* a session ends this long after login whatever happens (7 days) */
};
void auth_configure(const struct auth_config *cfg);
const struct auth_config *auth_config(void);

/* ---- pure parts (tests/unit/test_auth.c) ---- */

/* Argon2id of pw into out (AUTH_HASH_LEN bytes), with libsodium's interactive
 * limits (2 passes, 64 MiB).  DD_ENOMEM when the memory is not there. */
int auth_password_hash(const char *pw, char out[AUTH_HASH_LEN], struct dd_err *err);
/* 1 when pw matches hash, 0 otherwise (also for a malformed hash). */
int auth_password_verify(const char *hash, const char *pw);
/* DD_OK, or DD_EINVAL saying why pw is not acceptable as a new password. */
int auth_password_check(const char *pw, struct dd_err *err);
/* DD_OK, or DD_EINVAL saying why name is not a valid account name: 1 to 32 of
 * letters, digits, '.', '_' and '-', starting with a letter or digit; never
 * "local" (the user of a server without accounts). */
int auth_name_check(const char *name, struct dd_err *err);
/* A new random token: AUTH_TOKEN_LEN base64url characters and a NUL. */
void auth_token_new(char out[AUTH_TOKEN_LEN + 1]);
/* The hex SHA-256 of token into hex (65 bytes). */
void auth_token_digest(const char *token, char hex[65]);

/* ---- the login rate limiter ----
 * Failures are counted per key (an account name, an address).  The first
 * `threshold` are free; after that each attempt waits base_ms doubled for every
 * further failure, up to max_ms.  A key with no failure for forget_ms is
 * forgotten. */
struct ratelimit;
/* NULL when out of memory; destroy with ratelimit_destroy (NULL is fine). */
struct ratelimit *ratelimit_create(int threshold, int64_t base_ms, int64_t max_ms, int64_t forget_ms);
void ratelimit_destroy(struct ratelimit *rl);
/* Milliseconds key must wait before its next attempt (0: now). */
int64_t ratelimit_wait(struct ratelimit *rl, const char *key, int64_t now_ms);
void ratelimit_fail(struct ratelimit *rl, const char *key, int64_t now_ms);
void ratelimit_reset(struct ratelimit *rl, const char *key);

/* ---- users ---- */
int auth_user_add(const char *name, enum auth_role role, const char *pw, int64_t *id, struct dd_err *err);
/* The user called name, with its password hash (hash may be NULL) and whether it
 * is disabled; DD_ENOENT when there is none. */
int auth_user_find(const char *name, struct auth_user *u, char hash[AUTH_HASH_LEN], int *disabled,
		   struct dd_err *err);
int auth_user_get(int64_t id, struct auth_user *u, char hash[AUTH_HASH_LEN], struct dd_err *err);
/* {"users":[{id,name,role,created_at,disabled}]}; caller frees *out. */
int auth_user_list(cJSON **out, struct dd_err *err);
int auth_user_count(int64_t *n, struct dd_err *err);
/* New password for user id, ending all of its sessions except keep_session
 * (0: all), and revoking all of its API tokens when revoke_tokens (a reset by an
 * admin or from the CLI always does: whoever had the old password may have made
 * one). */
int auth_user_set_password(int64_t id, const char *pw, int64_t keep_session, int revoke_tokens,
			   struct dd_err *err);
int auth_user_set_role(int64_t id, enum auth_role role, struct dd_err *err);
/* Remove the account; its jobs stay (owned by nobody: admins and instructors
 * see them), its sessions and tokens go. */
int auth_user_remove(int64_t id, struct dd_err *err);
/* {id,name,role} of u; caller frees. */
cJSON *auth_user_json(const struct auth_user *u);

/* ---- sessions ---- */
/* A new session for user id: its token into token, its CSRF token into csrf;
 * *expires_ms the absolute end. */
int auth_session_create(int64_t user_id, char token[AUTH_TOKEN_LEN + 1], char csrf[AUTH_TOKEN_LEN + 1],
			int64_t *session_id, int64_t *expires_ms, struct dd_err *err);
int auth_session_delete(int64_t session_id, struct dd_err *err);
/* Is as's session (from the cookie) or API token still live: the session not
 * ended by logout, a password change or its expiry, the token not revoked, its
 * user not disabled?  0 and as->user refreshed (a role changed since); -1 when
 * it has ended.  A state with neither is left alone (0).  For the WebSocket,
 * whose connection outlives the request that opened it. */
int auth_session_refresh(struct auth_state *as);
/* Delete every session past its idle or absolute end (at start-up; others are
 * deleted when they are next presented). */
int auth_sessions_sweep(struct dd_err *err);

/* ---- API tokens ---- */
/* A new named token for user id: the secret (shown once) into secret
 * ("ddt_" + AUTH_TOKEN_LEN characters). */
int auth_apitoken_create(int64_t user_id, const char *name, char secret[AUTH_TOKEN_LEN + 8],
			 int64_t *id, struct dd_err *err);
/* {"tokens":[{id,name,created_at,last_used,revoked}]} of user id; caller frees. */
int auth_apitoken_list(int64_t user_id, cJSON **out, struct dd_err *err);
/* Revoke token id of user user_id; DD_ENOENT when user has no such token. */
int auth_apitoken_revoke(int64_t user_id, int64_t id, struct dd_err *err);

/* ---- who is asking ---- */
/* Fill st from the request on c: the dd_session cookie or an
 * "Authorization: Bearer" token, checked against the store (a session past its
 * idle or absolute end is deleted).  Never sends anything. */
void auth_identify(const struct mg_connection *c, struct auth_state *st);

/* ---- audit ---- */
/* One audit row: who (NULL or id 0: nobody known), what, on what, from where.
 * Failures are logged, never returned: an audit row never blocks an action. */
void auth_audit(const struct auth_user *u, const char *action, const char *target, const char *address);
/* The newest `limit` rows, newest first: {"audit":[{at,user,action,target,address}]}. */
int auth_audit_list(int limit, cJSON **out, struct dd_err *err);

#endif
