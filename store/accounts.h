/* accounts.h — the accounts tables of the store: users, sessions, API tokens
 * and the audit log (store/accounts.c).  store.h includes it.
 *
 * The store keeps what app/accounts/auth.c gives it: Argon2id strings, never a
 * password, and the hex SHA-256 of a session or API token, never the token.
 * Every rule (what a name may be, when a session ends, what a password change
 * revokes) is auth.c's; these functions only read and write rows.  They use
 * this thread's connection and are safe on any thread. */
#ifndef DD_STORE_ACCOUNTS_H
#define DD_STORE_ACCOUNTS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

#define STORE_NAME_LEN 64  /* room for an account name and its NUL */
#define STORE_HASH_LEN 128 /* room for an Argon2id string (crypto_pwhash_STRBYTES) */
#define STORE_CSRF_LEN 64  /* room for a CSRF token */

/* A users row. */
struct store_user {
	int64_t id;
	char name[STORE_NAME_LEN];
	char role[16];      /* "learner", "instructor" or "admin" (the table's CHECK) */
	int disabled;
	int64_t created_at; /* epoch ms */
};

/* ---- users ---- */
/* A new account made at created_at (epoch ms); *id (when not NULL) gets its
 * id.  DD_EEXIST when the name is taken (names are compared without case). */
int store_user_add(const char *name, const char *role, const char *pwhash, int64_t created_at, int64_t *id,
		   struct dd_err *err);
/* The account called name, or of id, into *u and its Argon2id string into
 * pwhash (STORE_HASH_LEN bytes; NULL: not wanted).  DD_ENOENT "there is no
 * user …" when there is none. */
int store_user_find(const char *name, struct store_user *u, char *pwhash, struct dd_err *err);
int store_user_get(int64_t id, struct store_user *u, char *pwhash, struct dd_err *err);
/* Every account by name into *rows (caller frees with free()), *n of them. */
int store_user_list(struct store_user **rows, int *n, struct dd_err *err);
/* How many accounts are not disabled. */
int store_user_count(int64_t *n, struct dd_err *err);
/* Change an account's Argon2id string, or its role, or remove it (its jobs
 * stay, owned by nobody; its sessions, tokens, quota and memberships go).
 * DD_ENOENT "there is no user ID" when there is none. */
int store_user_set_pwhash(int64_t id, const char *pwhash, struct dd_err *err);
int store_user_set_role(int64_t id, const char *role, struct dd_err *err);
int store_user_remove(int64_t id, struct dd_err *err);
/* Disable (ending its sessions) or enable an account. */
int store_user_set_disabled(int64_t user_id, int disabled, struct dd_err *err);
/* The id of the account called name, 0 when none (the local user). */
int64_t store_user_id(const char *name);

/* ---- sessions ---- */
/* A sessions row with its user. */
struct store_session {
	int64_t id;
	int64_t expires_at, last_seen; /* epoch ms */
	char csrf[STORE_CSRF_LEN];
	struct store_user user;
};
/* A new session of user_id whose token has the hex SHA-256 digest, started (and
 * last seen) at now; *id gets its id. */
int store_session_add(int64_t user_id, const char *digest, const char *csrf, int64_t now, int64_t expires_at,
		      int64_t *id, struct dd_err *err);
/* The session whose token has digest, of an account not disabled, into *s:
 * 1 when there is one, 0 when none (or the store could not say). */
int store_session_find(const char *digest, struct store_session *s);
/* The account of session id when the session has not expired at now and the
 * account is not disabled, into *u: 1, 0 when it has ended, -1 when the store
 * could not say. */
int store_session_user(int64_t id, int64_t now, struct store_user *u);
/* Note that session id was seen at now (failures are ignored). */
void store_session_touch(int64_t id, int64_t now);
int store_session_delete(int64_t id, struct dd_err *err);
/* Delete the sessions of user_id but keep_id (0: all of them). */
int store_sessions_end(int64_t user_id, int64_t keep_id, struct dd_err *err);
/* Delete every session expired at now or last seen at or before idle_before. */
int store_sessions_sweep(int64_t now, int64_t idle_before, struct dd_err *err);

/* ---- API tokens ---- */
/* An api_tokens row with its user. */
struct store_token {
	int64_t id;
	int64_t last_used; /* epoch ms, 0: never */
	struct store_user user;
};
/* A new token of user_id named name whose secret has the hex SHA-256 digest;
 * *id gets its id. */
int store_token_add(int64_t user_id, const char *name, const char *digest, int64_t *id, struct dd_err *err);
/* The token whose secret has digest, not revoked, of an account not disabled,
 * into *t: 1 when there is one, 0 otherwise. */
int store_token_find(const char *digest, struct store_token *t);
/* The account of token id when the token is not revoked and the account not
 * disabled, into *u: 1, 0 when it has ended, -1 when the store could not say. */
int store_token_user(int64_t id, struct store_user *u);
/* Note that token id was used at now (failures are ignored). */
void store_token_touch(int64_t id, int64_t now);
/* [{id,name,created_at,last_used,revoked}] of user_id's tokens, oldest first;
 * caller frees *out. */
int store_token_list(int64_t user_id, cJSON **out, struct dd_err *err);
/* Revoke token id of user_id at now (a revoked one keeps its first time);
 * DD_ENOENT when user_id has no such token. */
int store_token_revoke(int64_t user_id, int64_t id, int64_t now, struct dd_err *err);
/* Revoke every live token of user_id at now. */
int store_tokens_revoke_all(int64_t user_id, int64_t now, struct dd_err *err);

/* ---- the audit log ---- */
/* One row at `at`: user_id 0 and user_name NULL when nobody is known; target
 * and address may be NULL. */
int store_audit_add(int64_t at, int64_t user_id, const char *user_name, const char *action, const char *target,
		    const char *address, struct dd_err *err);
/* The newest limit rows, newest first: [{at,user,action,target,address}];
 * caller frees *out. */
int store_audit_list(int limit, cJSON **out, struct dd_err *err);

#endif
