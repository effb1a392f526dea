/* db.c — see db.h: the connection per thread, its statement cache, the
 * migrations of the schema and the mapping of SQLite's errors to DD_E* codes.
 *
 * The schema is versioned in PRAGMA user_version and moved forward by
 * store_init's migrations, each in one transaction; a database newer than this
 * build is refused, never written. */
#define _GNU_SOURCE
#include "db.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "../common/fsutil.h"

static char db_path[PATH_MAX];
static _Thread_local sqlite3 *thread_db;

/* Each thread keeps its prepared statements, keyed by the address of their SQL
 * text (always a string literal here): a request reuses them instead of
 * compiling its queries again.  db_release() resets one for its next use.
 * Room for every statement of the store (about 80, the accounts' among them);
 * a thread keeps only those it has used, and any beyond the room are prepared
 * afresh and finalized each time. */
#define STMT_CACHE 96
static _Thread_local struct {
	const char *sql;
	sqlite3_stmt *st;
} thread_stmts[STMT_CACHE];

void db_release(sqlite3_stmt *st)
{
	if (!st)
		return;
	for (int i = 0; i < STMT_CACHE; i++)
		if (thread_stmts[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return;
		}
	sqlite3_finalize(st);
}

/* Migrations: entry i moves the schema from version i to i+1. */
static const char *const migrations[] = {
	/* 0 -> 1: jobs, their parents and state history */
	"CREATE TABLE jobs ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  kind TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  notes TEXT NOT NULL DEFAULT '',"
	"  owner TEXT NOT NULL DEFAULT 'local',"
	"  state TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  started_at INTEGER,"
	"  finished_at INTEGER,"
	"  progress REAL NOT NULL DEFAULT 0,"
	"  eta_s REAL,"
	"  params TEXT NOT NULL DEFAULT '{}',"
	"  resources TEXT NOT NULL DEFAULT '{}',"
	"  pid INTEGER,"
	"  pid_start INTEGER,"
	"  exit_code INTEGER,"
	"  exit_signal INTEGER,"
	"  error TEXT,"
	"  abort_requested INTEGER NOT NULL DEFAULT 0,"
	"  ev_offset INTEGER NOT NULL DEFAULT 0,"
	"  ev_seq INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX jobs_state ON jobs(state);"
	"CREATE INDEX jobs_kind ON jobs(kind, id);"
	"CREATE TABLE job_parents ("
	"  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	"  parent_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE RESTRICT,"
	"  PRIMARY KEY (job_id, parent_id));"
	"CREATE INDEX job_parents_parent ON job_parents(parent_id);"
	"CREATE TABLE job_history ("
	"  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	"  state TEXT NOT NULL,"
	"  at INTEGER NOT NULL,"
	"  message TEXT);"
	"CREATE INDEX job_history_job ON job_history(job_id);",
	/* 1 -> 2: accounts (app/accounts/auth.c).  Sessions and API tokens keep only the
	 * SHA-256 of their secret; jobs.owner_id NULL is the local user of a server
	 * without accounts.  The name "local" is never a user's (cli_user.c). */
	"CREATE TABLE users ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  name TEXT NOT NULL UNIQUE COLLATE NOCASE,"
	"  role TEXT NOT NULL CHECK (role IN ('learner','instructor','admin')),"
	"  pwhash TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  disabled INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE sessions ("
	"  id INTEGER PRIMARY KEY,"
	"  token_hash TEXT NOT NULL UNIQUE,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  created_at INTEGER NOT NULL,"
	"  expires_at INTEGER NOT NULL,"
	"  last_seen INTEGER NOT NULL,"
	"  csrf TEXT NOT NULL);"
	"CREATE INDEX sessions_user ON sessions(user_id);"
	"CREATE TABLE api_tokens ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  token_hash TEXT NOT NULL UNIQUE,"
	"  created_at INTEGER NOT NULL,"
	"  last_used INTEGER,"
	"  revoked_at INTEGER);"
	"CREATE INDEX api_tokens_user ON api_tokens(user_id);"
	"CREATE TABLE audit ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  at INTEGER NOT NULL,"
	"  user_id INTEGER,"
	"  user_name TEXT,"
	"  action TEXT NOT NULL,"
	"  target TEXT,"
	"  address TEXT);"
	"ALTER TABLE jobs ADD COLUMN owner_id INTEGER REFERENCES users(id) ON DELETE SET NULL;"
	"CREATE INDEX jobs_owner ON jobs(owner_id, id);",
	/* 2 -> 3: where a job runs when a cluster runs it (the Slurm executor): its
	 * id there, which a restarted server adopts again, and what the cluster last
	 * said of it (state, pending reason, place in the queue, requeues) */
	"CREATE TABLE job_executor ("
	"  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  ext_id TEXT NOT NULL,"
	"  state TEXT NOT NULL DEFAULT '',"
	"  reason TEXT NOT NULL DEFAULT '',"
	"  position INTEGER NOT NULL DEFAULT 0,"
	"  restarts INTEGER NOT NULL DEFAULT 0);",
	/* 3 -> 4: the fair queue and quotas (jobs/sched.c's fair section).  A
	 * queued job with a higher priority goes first (an instructor's "move to
	 * front"); a user's quota row overrides the defaults of their role, a NULL
	 * field keeps its role's default, 0 is no limit. */
	"ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN gpus_held INTEGER NOT NULL DEFAULT 0;" /* GPUs of its last run, for GPU minutes */
	"CREATE TABLE quotas ("
	"  user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,"
	"  jobs INTEGER,"
	"  cpu_minutes INTEGER,"
	"  gpu_minutes INTEGER,"
	"  disk_bytes INTEGER);",
	/* classes (app/api/api_classes.c): an instructor's class, its members, the
	 * datasets shared with it (read-only for members) and its lab presets
	 * (model settings with some fields locked or hidden, as JSON text). */
	"CREATE TABLE classes ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  name TEXT NOT NULL,"
	"  instructor_id INTEGER REFERENCES users(id) ON DELETE SET NULL,"
	"  created INTEGER NOT NULL);"
	"CREATE INDEX classes_instructor ON classes(instructor_id);"
	"CREATE TABLE class_members ("
	"  class_id INTEGER NOT NULL REFERENCES classes(id) ON DELETE CASCADE,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  PRIMARY KEY (class_id, user_id));"
	"CREATE INDEX class_members_user ON class_members(user_id);"
	"CREATE TABLE class_datasets ("
	"  class_id INTEGER NOT NULL REFERENCES classes(id) ON DELETE CASCADE,"
	"  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	"  PRIMARY KEY (class_id, job_id));"
	"CREATE INDEX class_datasets_job ON class_datasets(job_id);"
	"CREATE TABLE class_presets ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  class_id INTEGER NOT NULL REFERENCES classes(id) ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  settings TEXT NOT NULL,"
	"  locked TEXT NOT NULL DEFAULT '[]',"
	"  hidden TEXT NOT NULL DEFAULT '[]',"
	"  created INTEGER NOT NULL);"
	"CREATE INDEX class_presets_class ON class_presets(class_id);",
	/* 5 -> 6: the most memory one job of a user may use (kind_train_memory.c);
	 * NULL: the role's default */
	"ALTER TABLE quotas ADD COLUMN memory_bytes INTEGER;",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

int store_schema_version(void) { return SCHEMA_VERSION; }
/* err from the connection's last error.  A full disk (SQLITE_FULL, or a failed
 * write where the file system has run out) is DD_ENOSPC in the sentence every
 * writer uses, so an API answer says 507 and how much room there is instead of
 * SQLite's "database or disk is full". */
int db_fail(struct dd_err *err, const char *what)
{
	sqlite3 *db = thread_db;
	if (!db)
		return dd_err_set(err, DD_EIO, "store: %s: no connection", what);
	int ext = sqlite3_extended_errcode(db);
	if (ext == SQLITE_FULL || ext == SQLITE_IOERR_WRITE) {
		int64_t room = fs_free_bytes(db_path);
		if (ext == SQLITE_FULL || (room >= 0 && room < ((int64_t)1 << 20)))
			return fs_err_nospace(err, db_path, "store: %s", what);
		return dd_err_set(err, DD_ENOSPC, "store: %s: %s", what, sqlite3_errmsg(db));
	}
	int code = sqlite3_errcode(db) == SQLITE_BUSY ? DD_EBUSY : DD_EIO;
	return dd_err_set(err, code, "store: %s: %s", what, sqlite3_errmsg(db));
}

static sqlite3 *open_conn(struct dd_err *err)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		dd_err_set(err, DD_EIO, "cannot open %s: %s", db_path, db ? sqlite3_errmsg(db) : "?");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 10000);
	char *msg = NULL;
	if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;",
			 NULL, NULL, &msg) != SQLITE_OK) {
		dd_err_set(err, DD_EIO, "cannot set up %s: %s", db_path, msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/* This thread's connection, opened on first use; NULL with err filled on failure. */
static sqlite3 *db_conn(struct dd_err *err)
{
	if (!thread_db)
		thread_db = open_conn(err);
	return thread_db;
}

void store_thread_end(void)
{
	for (int i = 0; i < STMT_CACHE; i++) {
		sqlite3_finalize(thread_stmts[i].st);
		thread_stmts[i].st = NULL;
		thread_stmts[i].sql = NULL;
	}
	if (thread_db) {
		sqlite3_close(thread_db);
		thread_db = NULL;
	}
}

int store_init(const char *data_dir, struct dd_err *err)
{
	if (snprintf(db_path, sizeof db_path, "%s/" STORE_FILE, data_dir) >= (int)sizeof db_path)
		return dd_err_set(err, DD_EINVAL, "data folder path too long");
	store_thread_end(); /* a connection of this thread may point at another store */
	sqlite3 *db = db_conn(err);
	if (!db)
		return db_err_code(err);
	sqlite3_stmt *st = NULL;
	int version = 0;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return db_fail(err, "reading schema version");
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version > SCHEMA_VERSION)
		return dd_err_set(err, DD_EINVAL,
				  "%s has schema version %d, newer than this deepdesk (%d): upgrade deepdesk",
				  db_path, version, SCHEMA_VERSION);
	for (; version < SCHEMA_VERSION; version++) {
		char sql[64];
		char *msg = NULL;
		if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK)
			goto fail;
		if (sqlite3_exec(db, migrations[version], NULL, NULL, &msg) != SQLITE_OK) {
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			goto fail;
		}
		snprintf(sql, sizeof sql, "PRAGMA user_version=%d", version + 1);
		if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK ||
		    sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			goto fail;
		}
		continue;
	fail:
		dd_err_set(err, DD_EIO, "migrating %s to version %d: %s", db_path, version + 1,
			   msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return db_err_code(err);
	}
	return DD_OK;
}

/* ---- small helpers ---- */

/* Prepare sql on this thread's connection; NULL with err filled on failure. */
sqlite3_stmt *db_prep(const char *sql, struct dd_err *err)
{
	sqlite3 *db = db_conn(err);
	if (!db)
		return NULL;
	int free_slot = -1;
	for (int i = 0; i < STMT_CACHE; i++) {
		if (thread_stmts[i].sql == sql) {
			/* db_release() reset it; again in case an early return skipped that */
			sqlite3_reset(thread_stmts[i].st);
			sqlite3_clear_bindings(thread_stmts[i].st);
			return thread_stmts[i].st;
		}
		if (!thread_stmts[i].sql && free_slot < 0)
			free_slot = i;
	}
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(db, sql, -1, free_slot >= 0 ? SQLITE_PREPARE_PERSISTENT : 0, &st, NULL) != SQLITE_OK) {
		db_fail(err, "preparing a query");
		return NULL;
	}
	if (free_slot >= 0) {
		thread_stmts[free_slot].sql = sql;
		thread_stmts[free_slot].st = st;
	}
	return st;
}

int db_exec(const char *sql, struct dd_err *err)
{
	sqlite3 *db = db_conn(err);
	if (!db)
		return db_err_code(err);
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(err, sql);
	return DD_OK;
}

/* Step a statement that returns no rows, then release it. */
int db_step_done(sqlite3_stmt *st, const char *what, struct dd_err *err)
{
	if (!st)
		return db_err_code(err);
	int rc = sqlite3_step(st);
	int out = DD_OK;
	if (rc != SQLITE_DONE)
		out = db_fail(err, what);
	db_release(st);
	return out;
}

int db_step_one(sqlite3_stmt *st, const char *what, const char *thing, int64_t id, struct dd_err *err)
{
	int rc = db_step_done(st, what, err);
	if (rc == DD_OK && db_changes() == 0)
		rc = dd_err_set(err, DD_ENOENT, "%s %lld does not exist", thing, (long long)id);
	return rc;
}

int db_step_insert(sqlite3_stmt *st, const char *what, int64_t *id, struct dd_err *err)
{
	int rc = db_step_done(st, what, err);
	if (rc == DD_OK)
		*id = db_last_id();
	return rc;
}

void db_add_int_or_null(cJSON *o, const char *k, sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		cJSON_AddNullToObject(o, k);
	else
		cJSON_AddNumberToObject(o, k, (double)sqlite3_column_int64(st, col));
}

void db_add_text_or_null(cJSON *o, const char *k, sqlite3_stmt *st, int col)
{
	const char *s = (const char *)sqlite3_column_text(st, col);
	if (s)
		cJSON_AddStringToObject(o, k, s);
	else
		cJSON_AddNullToObject(o, k);
}


int db_err_code(const struct dd_err *err)
{
	return err && err->code ? err->code : DD_EIO;
}

int db_changes(void)
{
	return thread_db ? sqlite3_changes(thread_db) : 0;
}

int64_t db_last_id(void)
{
	return thread_db ? sqlite3_last_insert_rowid(thread_db) : 0;
}

int db_count(const char *sql, int64_t *out, struct dd_err *err)
{
	*out = 0;
	sqlite3_stmt *st = db_prep(sql, err);
	if (!st)
		return db_err_code(err);
	if (sqlite3_step(st) == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	db_release(st);
	return DD_OK;
}

int db_step_row(sqlite3_stmt *st, void (*fill)(sqlite3_stmt *st, void *item), void *item, const char *thing,
		int64_t id, const char *what, struct dd_err *err)
{
	if (!st)
		return db_err_code(err);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		fill(st, item);
	db_release(st);
	if (rc == SQLITE_DONE)
		return dd_err_set(err, DD_ENOENT, "%s %lld does not exist", thing, (long long)id);
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, what);
}

void db_fill_int64(sqlite3_stmt *st, void *item)
{
	*(int64_t *)item = sqlite3_column_int64(st, 0);
}

int db_int64_of(const char *sql, int64_t id, int64_t *out, const char *thing, const char *what,
		struct dd_err *err)
{
	*out = 0;
	sqlite3_stmt *st = db_prep(sql, err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return db_step_row(st, db_fill_int64, out, thing, id, what, err);
}

int db_json_rows(sqlite3_stmt *st, cJSON *(*row)(sqlite3_stmt *st), const char *what, cJSON **out,
		 struct dd_err *err)
{
	cJSON *arr = cJSON_CreateArray();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(arr, row(st));
	db_release(st);
	if (rc != SQLITE_DONE) {
		cJSON_Delete(arr);
		*out = NULL;
		return db_fail(err, what);
	}
	*out = arr;
	return DD_OK;
}

int db_collect(sqlite3_stmt *st, void **items, int *n, size_t size, void (*fill)(sqlite3_stmt *st, void *item),
	       const char *what, struct dd_err *err)
{
	*items = NULL;
	*n = 0;
	int cap = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			void *grown = realloc(*items, (size_t)cap * size);
			if (!grown) {
				db_release(st);
				free(*items);
				*items = NULL;
				*n = 0;
				return dd_err_set(err, DD_ENOMEM, "out of memory");
			}
			*items = grown;
		}
		fill(st, (char *)*items + (size_t)(*n)++ * size);
	}
	db_release(st);
	return rc == SQLITE_DONE ? DD_OK : db_fail(err, what);
}

