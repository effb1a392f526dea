/* db.h — private to store/: the SQLite connection and the helpers every table's
 * file (jobs.c, accounts.c, classes.c) uses.  Nothing outside store/ includes
 * it; the public face of the store is store.h, which knows no SQLite.
 *
 * Each thread has its own connection (opened on first use, closed by
 * store_thread_end) and its own cache of prepared statements, keyed by the
 * address of their SQL text: pass db_prep a string literal, and give the
 * statement back with db_release (which resets a cached one, finalizes any
 * other).  db_fail is the one place where SQLite's errors become DD_E* codes. */
#ifndef DD_STORE_DB_H
#define DD_STORE_DB_H

#include <stdint.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "../common/err.h"

/* sql (a string literal) prepared on this thread's connection, from the cache
 * when it was prepared before; NULL with err filled on failure.  Give it back
 * with db_release. */
sqlite3_stmt *db_prep(const char *sql, struct dd_err *err);
/* Reset a cached statement for its next use, finalize any other (NULL is fine). */
void db_release(sqlite3_stmt *st);
/* Run sql (no rows) on this thread's connection. */
int db_exec(const char *sql, struct dd_err *err);
/* err from the connection's last error, "store: <what>: <SQLite's words>":
 * DD_ENOSPC for a full disk (in the sentence every writer uses), DD_EBUSY when
 * the database is locked, DD_EIO otherwise.  Returns the code. */
int db_fail(struct dd_err *err, const char *what);
/* The code a failed db_prep left in err (DD_EIO without one). */
int db_err_code(const struct dd_err *err);
/* Step a statement that returns no rows, then release it (st NULL: a failed
 * db_prep, whose code is returned). */
int db_step_done(sqlite3_stmt *st, const char *what, struct dd_err *err);
/* db_step_done for an UPDATE or DELETE of one row of id; DD_ENOENT "<thing> ID
 * does not exist" when it changed none. */
int db_step_one(sqlite3_stmt *st, const char *what, const char *thing, int64_t id, struct dd_err *err);
/* db_step_done for an INSERT; *id gets the new row's id. */
int db_step_insert(sqlite3_stmt *st, const char *what, int64_t *id, struct dd_err *err);
/* Rows changed by this thread's last statement, and the rowid it inserted. */
int db_changes(void);
int64_t db_last_id(void);

/* The one integer sql (one parameter: id) selects into *out; DD_ENOENT "<thing> ID
 * does not exist" when it selects no row, else the store's error saying what. */
int db_int64_of(const char *sql, int64_t id, int64_t *out, const char *thing, const char *what,
		struct dd_err *err);
/* The integer sql (no parameters) selects in its first row into *out, 0 when
 * it selects none; DD_OK unless the query does not prepare. */
int db_count(const char *sql, int64_t *out, struct dd_err *err);
/* Step st (prepared, bound; st NULL: a failed db_prep) to its one row and
 * fill(st, item) from it, then release st.  DD_ENOENT "<thing> ID does not
 * exist" when it has no row, else the store's error saying what. */
int db_step_row(sqlite3_stmt *st, void (*fill)(sqlite3_stmt *st, void *item), void *item, const char *thing,
		int64_t id, const char *what, struct dd_err *err);
/* fill for db_step_row and db_collect: the first column as an int64_t. */
void db_fill_int64(sqlite3_stmt *st, void *item);
/* Every row of st (prepared, bound) as row(st) in a new array *out (caller
 * frees); st is released.  On failure *out is NULL and err says what. */
int db_json_rows(sqlite3_stmt *st, cJSON *(*row)(sqlite3_stmt *st), const char *what, cJSON **out,
		 struct dd_err *err);
/* Every row of st (prepared, bound) as fill(st, item) into a new array *items
 * of *n items of size bytes (caller frees with free()); st is released.  Out
 * of memory: DD_ENOMEM, *items NULL and *n 0; a failed step: the store's error
 * saying what, with the rows read until then. */
int db_collect(sqlite3_stmt *st, void **items, int *n, size_t size, void (*fill)(sqlite3_stmt *st, void *item),
	       const char *what, struct dd_err *err);

/* o[k] = column col as a number or a string, or null when it is NULL. */
void db_add_int_or_null(cJSON *o, const char *k, sqlite3_stmt *st, int col);
void db_add_text_or_null(cJSON *o, const char *k, sqlite3_stmt *st, int col);

#endif
