/* accounts.c — the accounts tables: users, sessions, API tokens and the audit
 * log; see accounts.h.  Only digests of secrets and Argon2id strings arrive here:
 * hashing, token generation and every rule of who may log in are
 * app/accounts/auth.c's. */
#define _GNU_SOURCE
#include "accounts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "../common/fsutil.h"

/* ---- users ---- */

#define USER_COLS "u.id,u.name,u.role,u.disabled,u.created_at" /* of users u */

/* u from the USER_COLS at columns col.. of st. */
static void fill_user_at(sqlite3_stmt *st, int col, struct store_user *u)
{
	memset(u, 0, sizeof *u);
	u->id = sqlite3_column_int64(st, col);
	snprintf(u->name, sizeof u->name, "%s", (const char *)sqlite3_column_text(st, col + 1));
	snprintf(u->role, sizeof u->role, "%s", (const char *)sqlite3_column_text(st, col + 2));
	u->disabled = sqlite3_column_int(st, col + 3);
	u->created_at = sqlite3_column_int64(st, col + 4);
}

static void fill_user(sqlite3_stmt *st, void *item)
{
	fill_user_at(st, 0, item);
}

int store_user_add(const char *name, const char *role, const char *pwhash, int64_t created_at, int64_t *id,
		   struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO users(name,role,pwhash,created_at) VALUES(?,?,?,?)", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, role, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, pwhash, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, created_at);
	int rc = sqlite3_step(st);
	db_release(st);
	if (rc == SQLITE_CONSTRAINT)
		return dd_err_set(err, DD_EEXIST, "a user called \"%s\" already exists", name);
	if (rc != SQLITE_DONE)
		return db_fail(err, "adding a user");
	if (id)
		*id = db_last_id();
	return DD_OK;
}

struct user_and_hash {
	struct store_user *u;
	char *pwhash; /* NULL: not wanted */
};

static void fill_user_and_hash(sqlite3_stmt *st, void *item)
{
	struct user_and_hash *o = item;
	fill_user_at(st, 0, o->u);
	if (o->pwhash)
		snprintf(o->pwhash, STORE_HASH_LEN, "%s", (const char *)sqlite3_column_text(st, 5));
}

/* Step st (USER_COLS then pwhash, one row at most) into *u and pwhash, then
 * release it; DD_ENOENT "there is no user <who>" when it has no row. */
static int user_lookup(sqlite3_stmt *st, const char *who, struct store_user *u, char *pwhash,
		       struct dd_err *err)
{
	struct user_and_hash o = { u, pwhash };
	int rc = db_step_row(st, fill_user_and_hash, &o, "user", 0, "reading a user", err);
	if (rc == DD_ENOENT)
		dd_err_set(err, DD_ENOENT, "there is no user %s", who);
	return rc;
}

int store_user_find(const char *name, struct store_user *u, char *pwhash, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS ",u.pwhash FROM users u WHERE u.name=?", err);
	if (st)
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	char who[STORE_NAME_LEN + 8];
	snprintf(who, sizeof who, "\"%.32s\"", name);
	return user_lookup(st, who, u, pwhash, err);
}

int store_user_get(int64_t id, struct store_user *u, char *pwhash, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS ",u.pwhash FROM users u WHERE u.id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	char who[32];
	snprintf(who, sizeof who, "%lld", (long long)id);
	return user_lookup(st, who, u, pwhash, err);
}

int store_user_list(struct store_user **rows, int *n, struct dd_err *err)
{
	*rows = NULL;
	*n = 0;
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS " FROM users u ORDER BY u.name", err);
	if (!st)
		return db_err_code(err);
	void *items = NULL;
	int rc = db_collect(st, &items, n, sizeof **rows, fill_user, "listing users", err);
	*rows = items;
	return rc;
}

int store_user_count(int64_t *n, struct dd_err *err)
{
	return db_count("SELECT count(*) FROM users WHERE disabled=0", n, err);
}

/* db_step_one for a statement on user id; DD_ENOENT "there is no user ID". */
static int one_user(sqlite3_stmt *st, const char *what, int64_t id, struct dd_err *err)
{
	int rc = db_step_one(st, what, "user", id, err);
	if (rc == DD_ENOENT)
		dd_err_set(err, DD_ENOENT, "there is no user %lld", (long long)id);
	return rc;
}

int store_user_set_pwhash(int64_t id, const char *pwhash, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE users SET pwhash=? WHERE id=?", err);
	if (st) {
		sqlite3_bind_text(st, 1, pwhash, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, id);
	}
	return one_user(st, "changing a password", id, err);
}

int store_user_set_role(int64_t id, const char *role, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE users SET role=? WHERE id=?", err);
	if (st) {
		sqlite3_bind_text(st, 1, role, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, id);
	}
	return one_user(st, "changing a role", id, err);
}

int store_user_remove(int64_t id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("DELETE FROM users WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return one_user(st, "removing a user", id, err);
}

/* ---- sessions ---- */

int store_session_add(int64_t user_id, const char *digest, const char *csrf, int64_t now, int64_t expires_at,
		      int64_t *id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO sessions(token_hash,user_id,created_at,expires_at,last_seen,csrf)"
				   " VALUES(?,?,?,?,?,?)",
				   err);
	if (st) {
		sqlite3_bind_text(st, 1, digest, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, user_id);
		sqlite3_bind_int64(st, 3, now);
		sqlite3_bind_int64(st, 4, expires_at);
		sqlite3_bind_int64(st, 5, now);
		sqlite3_bind_text(st, 6, csrf, -1, SQLITE_TRANSIENT);
	}
	return db_step_insert(st, "starting a session", id, err);
}

/* st (one parameter: a digest) stepped to its row: 1 and the row kept for the
 * caller to read and release, or 0 (st released). */
static int row_of_digest(sqlite3_stmt *st, const char *digest)
{
	if (!st)
		return 0;
	sqlite3_bind_text(st, 1, digest, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW)
		return 1;
	db_release(st);
	return 0;
}

int store_session_find(const char *digest, struct store_session *s)
{
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS ",s.id,s.expires_at,s.last_seen,s.csrf"
				   " FROM sessions s JOIN users u ON u.id=s.user_id"
				   " WHERE s.token_hash=? AND u.disabled=0",
				   NULL);
	if (!row_of_digest(st, digest))
		return 0;
	memset(s, 0, sizeof *s);
	fill_user_at(st, 0, &s->user);
	s->id = sqlite3_column_int64(st, 5);
	s->expires_at = sqlite3_column_int64(st, 6);
	s->last_seen = sqlite3_column_int64(st, 7);
	snprintf(s->csrf, sizeof s->csrf, "%s", (const char *)sqlite3_column_text(st, 8));
	db_release(st);
	return 1;
}

/* The user of the one row st (prepared, bound) selects, into *u: 1, 0 when
 * there is none, -1 when the store could not say. */
static int user_of_row(sqlite3_stmt *st, struct store_user *u)
{
	if (!st)
		return -1;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		fill_user_at(st, 0, u);
	db_release(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int store_session_user(int64_t id, int64_t now, struct store_user *u)
{
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS " FROM sessions s JOIN users u ON u.id=s.user_id"
				   " WHERE s.id=? AND s.expires_at>? AND u.disabled=0",
				   NULL);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, now);
	}
	return user_of_row(st, u);
}

/* Run sql with two bound integers (a, b), ignoring failures. */
static void touch(const char *sql, int64_t a, int64_t b)
{
	sqlite3_stmt *st = db_prep(sql, NULL);
	if (st) {
		sqlite3_bind_int64(st, 1, a);
		sqlite3_bind_int64(st, 2, b);
	}
	db_step_done(st, "touching a row", NULL);
}

void store_session_touch(int64_t id, int64_t now)
{
	touch("UPDATE sessions SET last_seen=? WHERE id=?", now, id);
}

int store_session_delete(int64_t id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("DELETE FROM sessions WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return db_step_done(st, "ending a session", err);
}

int store_sessions_end(int64_t user_id, int64_t keep_id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("DELETE FROM sessions WHERE user_id=? AND id<>?", err);
	if (st) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_int64(st, 2, keep_id);
	}
	return db_step_done(st, "ending the other sessions", err);
}

int store_sessions_sweep(int64_t now, int64_t idle_before, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("DELETE FROM sessions WHERE expires_at<=? OR last_seen<=?", err);
	if (st) {
		sqlite3_bind_int64(st, 1, now);
		sqlite3_bind_int64(st, 2, idle_before);
	}
	return db_step_done(st, "removing ended sessions", err);
}

/* ---- API tokens ---- */

int store_token_add(int64_t user_id, const char *name, const char *digest, int64_t *id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO api_tokens(user_id,name,token_hash,created_at) VALUES(?,?,?,?)", err);
	if (st) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, digest, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 4, fs_now_ms());
	}
	return db_step_insert(st, "creating an API token", id, err);
}

int store_token_find(const char *digest, struct store_token *t)
{
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS ",t.id,coalesce(t.last_used,0) FROM api_tokens t"
				   " JOIN users u ON u.id=t.user_id"
				   " WHERE t.token_hash=? AND t.revoked_at IS NULL AND u.disabled=0",
				   NULL);
	if (!row_of_digest(st, digest))
		return 0;
	memset(t, 0, sizeof *t);
	fill_user_at(st, 0, &t->user);
	t->id = sqlite3_column_int64(st, 5);
	t->last_used = sqlite3_column_int64(st, 6);
	db_release(st);
	return 1;
}

int store_token_user(int64_t id, struct store_user *u)
{
	sqlite3_stmt *st = db_prep("SELECT " USER_COLS " FROM api_tokens t JOIN users u ON u.id=t.user_id"
				   " WHERE t.id=? AND t.revoked_at IS NULL AND u.disabled=0",
				   NULL);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return user_of_row(st, u);
}

void store_token_touch(int64_t id, int64_t now)
{
	touch("UPDATE api_tokens SET last_used=? WHERE id=?", now, id);
}

static cJSON *token_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	cJSON_AddStringToObject(o, "name", (const char *)sqlite3_column_text(st, 1));
	cJSON_AddNumberToObject(o, "created_at", (double)sqlite3_column_int64(st, 2));
	db_add_int_or_null(o, "last_used", st, 3);
	cJSON_AddBoolToObject(o, "revoked", sqlite3_column_int(st, 4));
	return o;
}

int store_token_list(int64_t user_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT id,name,created_at,last_used,revoked_at IS NOT NULL FROM api_tokens"
				   " WHERE user_id=? ORDER BY id",
				   err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, user_id);
	return db_json_rows(st, token_row, "listing API tokens", out, err);
}

int store_token_revoke(int64_t user_id, int64_t id, int64_t now, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE api_tokens SET revoked_at=coalesce(revoked_at,?) WHERE id=? AND user_id=?",
				   err);
	if (st) {
		sqlite3_bind_int64(st, 1, now);
		sqlite3_bind_int64(st, 2, id);
		sqlite3_bind_int64(st, 3, user_id);
	}
	return db_step_one(st, "revoking an API token", "API token", id, err);
}

int store_tokens_revoke_all(int64_t user_id, int64_t now, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE api_tokens SET revoked_at=? WHERE user_id=? AND revoked_at IS NULL", err);
	if (st) {
		sqlite3_bind_int64(st, 1, now);
		sqlite3_bind_int64(st, 2, user_id);
	}
	return db_step_done(st, "revoking the API tokens", err);
}

/* ---- the audit log ---- */

int store_audit_add(int64_t at, int64_t user_id, const char *user_name, const char *action, const char *target,
		    const char *address, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO audit(at,user_id,user_name,action,target,address) VALUES(?,?,?,?,?,?)",
				   err);
	if (st) {
		sqlite3_bind_int64(st, 1, at);
		if (user_id)
			sqlite3_bind_int64(st, 2, user_id);
		if (user_name)
			sqlite3_bind_text(st, 3, user_name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, action, -1, SQLITE_TRANSIENT);
		if (target)
			sqlite3_bind_text(st, 5, target, -1, SQLITE_TRANSIENT);
		if (address)
			sqlite3_bind_text(st, 6, address, -1, SQLITE_TRANSIENT);
	}
	return db_step_done(st, "writing the audit log", err);
}

static cJSON *audit_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "at", (double)sqlite3_column_int64(st, 0));
	static const char *const keys[] = { NULL, "user", "action", "target", "address" };
	for (int k = 1; k <= 4; k++)
		db_add_text_or_null(o, keys[k], st, k);
	return o;
}

int store_audit_list(int limit, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT at,user_name,action,target,address FROM audit ORDER BY id DESC LIMIT ?",
				   err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int(st, 1, limit);
	return db_json_rows(st, audit_row, "reading the audit log", out, err);
}

int store_user_set_disabled(int64_t user_id, int disabled, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE users SET disabled=?2 WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_int(st, 2, disabled != 0);
	}
	int rc = db_step_one(st, "disabling a user", "user", user_id, err);
	if (rc == DD_OK && disabled) {
		/* a disabled account is logged out everywhere */
		st = db_prep("DELETE FROM sessions WHERE user_id=?", err);
		if (!st)
			return db_err_code(err);
		sqlite3_bind_int64(st, 1, user_id);
		rc = db_step_done(st, "ending a user's sessions", err);
	}
	return rc;
}

int64_t store_user_id(const char *name)
{
	if (!name)
		return 0;
	sqlite3_stmt *st = db_prep("SELECT id FROM users WHERE name=?", NULL);
	if (!st)
		return 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	int64_t id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	db_release(st);
	return id;
}

