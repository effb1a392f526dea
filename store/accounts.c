/* accounts.c — the accounts tables: users, sessions, API tokens and the audit
 * log; see accounts.h.  Only digests of secrets and Argon2id strings arrive here:
 * hashing, token generation and every rule of who may log in are
 * app/accounts/auth.c's. */
#define _GNU_SOURCE
#include "accounts.h"

#include <stdio.h>
#include <string.h>

#include "db.h"
#include "../common/fsutil.h"

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

