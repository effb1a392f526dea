/* rawsql.h — for the store's unit tests only: SQL on DIR/deepdesk.db through a
 * connection of the test's own, for what no store function says and a test must
 * see (the schema version and journal mode on disk, a job backdated, rows a
 * function must have removed).  The program never does this: store/ is the only
 * code that speaks SQL, and its header exports no connection.  Each call opens
 * and closes its connection, so the store's own connection sees what it wrote. */
#ifndef DD_TEST_RAWSQL_H
#define DD_TEST_RAWSQL_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "../../store/store.h"

/* The database of data folder dir, opened; NULL when it does not open. */
static inline sqlite3 *rawsql_open(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/" STORE_FILE, dir);
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "  rawsql: %s: %s\n", path, db ? sqlite3_errmsg(db) : "?");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 10000);
	return db;
}

/* Run sql (no rows wanted); SQLite's result code (SQLITE_OK). */
static inline int rawsql_exec(const char *dir, const char *sql)
{
	sqlite3 *db = rawsql_open(dir);
	if (!db)
		return SQLITE_CANTOPEN;
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "  rawsql: %s: %s\n", sql, msg ? msg : "?");
	sqlite3_free(msg);
	sqlite3_close(db);
	return rc;
}

/* The first column of the first row of sql, as text into out (len bytes; ""
 * when there is none), and as the integer it returns (-1 when there is none). */
static inline int64_t rawsql_value(const char *dir, const char *sql, char *out, size_t len)
{
	if (out && len)
		out[0] = 0;
	sqlite3 *db = rawsql_open(dir);
	if (!db)
		return -1;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
		v = sqlite3_column_int64(st, 0);
		if (out && len)
			snprintf(out, len, "%s", sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "");
	} else {
		fprintf(stderr, "  rawsql: %s: %s\n", sql, sqlite3_errmsg(db));
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

#endif
