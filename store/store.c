/* store.c — see store.h.
 *
 * Invariants kept here:
 *  - jobs.state only changes in store_job_move/store_job_started, each of which
 *    checks job_state_can_move inside the same transaction that writes the row
 *    and its job_history line;
 *  - a job with dependants (job_parents.parent_id) cannot be deleted: the foreign
 *    key is ON DELETE RESTRICT and store_job_delete names the dependant first. */
#define _GNU_SOURCE
#include "store.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../common/json.h"

static char db_path[PATH_MAX];
static _Thread_local sqlite3 *thread_db;

/* Each thread keeps its prepared statements, keyed by the address of their SQL
 * text (always a string literal here): a request reuses them instead of
 * compiling its queries again.  release() resets one for its next use. */
#define STMT_CACHE 48
static _Thread_local struct {
	const char *sql;
	sqlite3_stmt *st;
} thread_stmts[STMT_CACHE];

static void release(sqlite3_stmt *st)
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

/* The SQL condition "job j is one account V may see" for a job list, with V a
 * bound parameter ("?3"): V's own jobs, the jobs of the learners among the
 * members of the classes V instructs (unless V is now a learner; a member who is
 * an admin or an instructor gives no one rights over their work), and the datasets shared with the
 * classes V is a member of.  perm.c says the same for one job. */
#define STORE_SEEN_BY(V)                                                                                  \
	"(j.owner_id=" V " OR j.owner_id IN (SELECT m.user_id FROM class_members m JOIN classes c"          \
	" ON c.id=m.class_id JOIN users u ON u.id=c.instructor_id JOIN users mu ON mu.id=m.user_id"        \
	" WHERE c.instructor_id=" V " AND u.role<>'learner' AND mu.role='learner') OR j.id IN (SELECT d.job_id FROM class_datasets d JOIN class_members m" \
	" ON m.class_id=d.class_id WHERE m.user_id=" V "))"

/* err from the connection's last error.  A full disk (SQLITE_FULL, or a failed
 * write where the file system has run out) is DD_ENOSPC in the sentence every
 * writer uses, so an API answer says 507 and how much room there is instead of
 * SQLite's "database or disk is full". */
static int db_fail(struct dd_err *err, sqlite3 *db, const char *what)
{
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

sqlite3 *store_conn(struct dd_err *err)
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
	sqlite3 *db = store_conn(err);
	if (!db)
		return err ? err->code : DD_EIO;
	sqlite3_stmt *st = NULL;
	int version = 0;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return db_fail(err, db, "reading schema version");
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
		return err ? err->code : DD_EIO;
	}
	return DD_OK;
}

/* ---- small helpers ---- */

/* Prepare sql on this thread's connection; NULL with err filled on failure. */
static sqlite3_stmt *prep(const char *sql, struct dd_err *err)
{
	sqlite3 *db = store_conn(err);
	if (!db)
		return NULL;
	int free_slot = -1;
	for (int i = 0; i < STMT_CACHE; i++) {
		if (thread_stmts[i].sql == sql) {
			/* release() reset it; again in case an early return skipped that */
			sqlite3_reset(thread_stmts[i].st);
			sqlite3_clear_bindings(thread_stmts[i].st);
			return thread_stmts[i].st;
		}
		if (!thread_stmts[i].sql && free_slot < 0)
			free_slot = i;
	}
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(db, sql, -1, free_slot >= 0 ? SQLITE_PREPARE_PERSISTENT : 0, &st, NULL) != SQLITE_OK) {
		db_fail(err, db, "preparing a query");
		return NULL;
	}
	if (free_slot >= 0) {
		thread_stmts[free_slot].sql = sql;
		thread_stmts[free_slot].st = st;
	}
	return st;
}

static int exec(const char *sql, struct dd_err *err)
{
	sqlite3 *db = store_conn(err);
	if (!db)
		return err ? err->code : DD_EIO;
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(err, db, sql);
	return DD_OK;
}

/* Step a statement that returns no rows, then finalise it. */
static int step_done(sqlite3_stmt *st, const char *what, struct dd_err *err)
{
	int rc = sqlite3_step(st);
	int out = DD_OK;
	if (rc != SQLITE_DONE)
		out = db_fail(err, sqlite3_db_handle(st), what);
	release(st);
	return out;
}

static void add_int_or_null(cJSON *o, const char *k, sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		cJSON_AddNullToObject(o, k);
	else
		cJSON_AddNumberToObject(o, k, (double)sqlite3_column_int64(st, col));
}

static void add_text_or_null(cJSON *o, const char *k, sqlite3_stmt *st, int col)
{
	const char *s = (const char *)sqlite3_column_text(st, col);
	if (s)
		cJSON_AddStringToObject(o, k, s);
	else
		cJSON_AddNullToObject(o, k);
}

/* ---- jobs ---- */

static int history_add(int64_t id, const char *state, int64_t at, const char *message,
		       struct dd_err *err)
{
	sqlite3_stmt *st = prep("INSERT INTO job_history(job_id,state,at,message) VALUES(?,?,?,?)", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, at);
	if (message)
		sqlite3_bind_text(st, 4, message, -1, SQLITE_TRANSIENT);
	return step_done(st, "recording state history", err);
}

int store_job_insert(const char *kind, const char *name, const char *owner,
		     const char *params_json, const char *resources_json, const int64_t *parents,
		     int nparents, int64_t *id, struct dd_err *err)
{
	int rc = exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	/* owner_id: the account named owner, NULL for the local user */
	sqlite3_stmt *st = prep("INSERT INTO jobs(kind,name,owner,owner_id,state,created_at,params,resources)"
				" VALUES(?1,?2,?3,(SELECT id FROM users WHERE name=?3),'queued',?4,?5,?6)",
				err);
	if (!st) {
		rc = err ? err->code : DD_EIO;
		goto fail;
	}
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, owner, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, now);
	sqlite3_bind_text(st, 5, params_json ? params_json : "{}", -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, resources_json ? resources_json : "{}", -1, SQLITE_TRANSIENT);
	if ((rc = step_done(st, "creating a job", err)))
		goto fail;
	*id = sqlite3_last_insert_rowid(store_conn(NULL));
	for (int i = 0; i < nparents; i++) {
		st = prep("INSERT INTO job_parents(job_id,parent_id) SELECT ?, id FROM jobs WHERE id=?", err);
		if (!st) {
			rc = err ? err->code : DD_EIO;
			goto fail;
		}
		sqlite3_bind_int64(st, 1, *id);
		sqlite3_bind_int64(st, 2, parents[i]);
		int step = sqlite3_step(st);
		release(st);
		if (step == SQLITE_CONSTRAINT) {
			rc = dd_err_set(err, DD_EINVAL, "parent job %lld is listed twice", (long long)parents[i]);
			goto fail;
		}
		if (step != SQLITE_DONE) {
			rc = db_fail(err, store_conn(NULL), "linking a parent job");
			goto fail;
		}
		if (sqlite3_changes(store_conn(NULL)) == 0) {
			rc = dd_err_set(err, DD_EINVAL, "parent job %lld does not exist", (long long)parents[i]);
			goto fail;
		}
	}
	if ((rc = history_add(*id, "queued", now, NULL, err)))
		goto fail;
	return exec("COMMIT", err);
fail:
	exec("ROLLBACK", NULL);
	return rc;
}

#define JOB_COLS                                                                               \
	"j.id,j.kind,j.name,j.owner,j.state,j.progress,j.eta_s,j.created_at,j.started_at,"     \
	"j.finished_at,j.error,(SELECT group_concat(parent_id) FROM job_parents WHERE job_id=j.id)," \
	"j.notes,j.params,j.resources,j.pid,j.exit_code,j.exit_signal,j.ev_seq,j.abort_requested"

/* Append the ids in a comma list ("3,7") to a JSON array. */
static void add_id_list(cJSON *arr, const char *list)
{
	for (const char *p = list; p && *p;) {
		char *end;
		long long v = strtoll(p, &end, 10);
		if (end == p)
			break;
		cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v));
		p = (*end == ',') ? end + 1 : end;
	}
}

static cJSON *row_json(sqlite3_stmt *st, int detail)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	cJSON_AddStringToObject(o, "kind", (const char *)sqlite3_column_text(st, 1));
	cJSON_AddStringToObject(o, "name", (const char *)sqlite3_column_text(st, 2));
	cJSON_AddStringToObject(o, "owner", (const char *)sqlite3_column_text(st, 3));
	cJSON_AddStringToObject(o, "state", (const char *)sqlite3_column_text(st, 4));
	cJSON_AddNumberToObject(o, "progress", sqlite3_column_double(st, 5));
	if (sqlite3_column_type(st, 6) == SQLITE_NULL)
		cJSON_AddNullToObject(o, "eta_s");
	else
		cJSON_AddNumberToObject(o, "eta_s", sqlite3_column_double(st, 6));
	add_int_or_null(o, "created_at", st, 7);
	add_int_or_null(o, "started_at", st, 8);
	add_int_or_null(o, "finished_at", st, 9);
	add_text_or_null(o, "error", st, 10);
	cJSON *parents = cJSON_AddArrayToObject(o, "parents");
	add_id_list(parents, (const char *)sqlite3_column_text(st, 11));
	cJSON_AddNumberToObject(o, "events", (double)sqlite3_column_int64(st, 18));
	if (!detail)
		return o;
	cJSON_AddStringToObject(o, "notes", (const char *)sqlite3_column_text(st, 12));
	cJSON *params = NULL, *res = NULL;
	json_parse_str((const char *)sqlite3_column_text(st, 13), "params", &params, NULL);
	cJSON_AddItemToObject(o, "params", params ? params : cJSON_CreateObject());
	json_parse_str((const char *)sqlite3_column_text(st, 14), "resources", &res, NULL);
	cJSON_AddItemToObject(o, "resources", res ? res : cJSON_CreateObject());
	add_int_or_null(o, "pid", st, 15);
	if (sqlite3_column_type(st, 16) == SQLITE_NULL && sqlite3_column_type(st, 17) == SQLITE_NULL) {
		cJSON_AddNullToObject(o, "exit");
	} else {
		cJSON *ex = cJSON_AddObjectToObject(o, "exit");
		add_int_or_null(ex, "code", st, 16);
		add_int_or_null(ex, "signal", st, 17);
	}
	cJSON_AddBoolToObject(o, "abort_requested", sqlite3_column_int(st, 19));
	return o;
}

int store_job_json(int64_t id, int detail, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT " JOB_COLS " FROM jobs j WHERE j.id=?", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		release(st);
		if (rc == SQLITE_DONE)
			return dd_err_set(err, DD_ENOENT, "job %lld does not exist", (long long)id);
		return db_fail(err, store_conn(NULL), "reading a job");
	}
	cJSON *o = row_json(st, detail);
	release(st);
	if (!o)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	store_job_exec_json(id, o);
	if (detail) {
		cJSON *hist = cJSON_AddArrayToObject(o, "history");
		st = prep("SELECT state,at,message FROM job_history WHERE job_id=? ORDER BY rowid", err);
		if (st) {
			sqlite3_bind_int64(st, 1, id);
			while (sqlite3_step(st) == SQLITE_ROW) {
				cJSON *h = cJSON_CreateObject();
				cJSON_AddStringToObject(h, "state", (const char *)sqlite3_column_text(st, 0));
				cJSON_AddNumberToObject(h, "at", (double)sqlite3_column_int64(st, 1));
				if (sqlite3_column_type(st, 2) != SQLITE_NULL)
					cJSON_AddStringToObject(h, "message",
								(const char *)sqlite3_column_text(st, 2));
				cJSON_AddItemToArray(hist, h);
			}
			release(st);
		}
		cJSON *children = cJSON_AddArrayToObject(o, "children");
		st = prep("SELECT job_id FROM job_parents WHERE parent_id=? ORDER BY job_id", err);
		if (st) {
			sqlite3_bind_int64(st, 1, id);
			while (sqlite3_step(st) == SQLITE_ROW)
				cJSON_AddItemToArray(children,
						     cJSON_CreateNumber((double)sqlite3_column_int64(st, 0)));
			release(st);
		}
	}
	*out = o;
	return DD_OK;
}

int store_job_list(const char *kind, const char *state, int limit, int offset, cJSON **out,
		   int *total, struct dd_err *err)
{
	return store_job_list_for(-1, kind, state, limit, offset, out, total, err);
}

int store_job_list_for(int64_t owner_id, const char *kind, const char *state, int limit, int offset,
		       cJSON **out, int *total, struct dd_err *err)
{
	*out = NULL;
	*total = 0;
	sqlite3_stmt *st = prep("SELECT count(*) FROM jobs j WHERE (?1 IS NULL OR kind=?1) AND (?2 IS NULL OR state=?2)"
				" AND (?3 < 0 OR " STORE_SEEN_BY("?3") ")", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, owner_id);
	if (sqlite3_step(st) == SQLITE_ROW)
		*total = sqlite3_column_int(st, 0);
	release(st);
	st = prep("SELECT " JOB_COLS " FROM jobs j WHERE (?1 IS NULL OR kind=?1) AND (?2 IS NULL OR state=?2)"
		  " AND (?5 < 0 OR " STORE_SEEN_BY("?5") ") ORDER BY j.id DESC LIMIT ?3 OFFSET ?4",
		  err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, limit);
	sqlite3_bind_int(st, 4, offset);
	sqlite3_bind_int64(st, 5, owner_id);
	cJSON *arr = cJSON_CreateArray();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(arr, row_json(st, 0));
	release(st);
	if (rc != SQLITE_DONE) {
		cJSON_Delete(arr);
		return db_fail(err, store_conn(NULL), "listing jobs");
	}
	*out = arr;
	return DD_OK;
}

static void fill_row(sqlite3_stmt *st, struct job_row *r)
{
	memset(r, 0, sizeof *r);
	r->id = sqlite3_column_int64(st, 0);
	snprintf(r->kind, sizeof r->kind, "%s", (const char *)sqlite3_column_text(st, 1));
	if (job_state_parse((const char *)sqlite3_column_text(st, 2), &r->state) != 0)
		r->state = JOB_ERROR;
	r->pid = sqlite3_column_int(st, 3);
	r->pid_start = sqlite3_column_int64(st, 4);
	r->ev_offset = sqlite3_column_int64(st, 5);
	r->ev_seq = sqlite3_column_int64(st, 6);
	r->abort_requested = sqlite3_column_int(st, 7);
	r->cpu_slots = sqlite3_column_int(st, 8);
	if (r->cpu_slots < 1)
		r->cpu_slots = 1;
	r->owner_id = sqlite3_column_int64(st, 9);
	r->priority = sqlite3_column_int(st, 10);
}

#define ROW_COLS                                                                               \
	"id,kind,state,coalesce(pid,0),coalesce(pid_start,0),ev_offset,ev_seq,abort_requested,"  \
	"coalesce(json_extract(resources,'$.cpu_slots'),1),coalesce(owner_id,0),priority"

int store_job_row(int64_t id, struct job_row *row, struct dd_err *err)
{
	sqlite3_stmt *st = prep("SELECT " ROW_COLS " FROM jobs WHERE id=?", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		fill_row(st, row);
	release(st);
	if (rc == SQLITE_DONE)
		return dd_err_set(err, DD_ENOENT, "job %lld does not exist", (long long)id);
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, store_conn(NULL), "reading a job");
}

/* Every row st (prepared, bound) yields, as job rows into *rows and *n (caller frees);
 * st is released.  what names the query in an error. */
static int collect_rows(sqlite3_stmt *st, struct job_row **rows, int *n, const char *what, struct dd_err *err)
{
	int cap = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			struct job_row *grown = realloc(*rows, (size_t)cap * sizeof **rows);
			if (!grown) {
				release(st);
				free(*rows);
				*rows = NULL;
				*n = 0;
				return dd_err_set(err, DD_ENOMEM, "out of memory");
			}
			*rows = grown;
		}
		fill_row(st, &(*rows)[(*n)++]);
	}
	release(st);
	return rc == SQLITE_DONE ? DD_OK : db_fail(err, store_conn(NULL), what);
}

int store_jobs_in_state(enum job_state state, struct job_row **rows, int *n, struct dd_err *err)
{
	*rows = NULL;
	*n = 0;
	sqlite3_stmt *st = prep("SELECT " ROW_COLS " FROM jobs WHERE state=? ORDER BY id", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_text(st, 1, job_state_name(state), -1, SQLITE_STATIC);
	return collect_rows(st, rows, n, "listing jobs by state", err);
}

/* Read the state of a job inside the current transaction. */
static int current_state(int64_t id, enum job_state *s, struct dd_err *err)
{
	sqlite3_stmt *st = prep("SELECT state FROM jobs WHERE id=?", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	int out = DD_OK;
	if (rc == SQLITE_ROW) {
		if (job_state_parse((const char *)sqlite3_column_text(st, 0), s) != 0)
			out = dd_err_set(err, DD_EINTERNAL, "job %lld has an unknown state", (long long)id);
	} else if (rc == SQLITE_DONE) {
		out = dd_err_set(err, DD_ENOENT, "job %lld does not exist", (long long)id);
	} else {
		out = db_fail(err, store_conn(NULL), "reading a job state");
	}
	release(st);
	return out;
}

int store_job_move(int64_t id, enum job_state to, const char *error, int exit_code,
		   int exit_signal, struct dd_err *err)
{
	int rc = exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	enum job_state from;
	if ((rc = current_state(id, &from, err)))
		goto fail;
	if (!job_state_can_move(from, to)) {
		rc = dd_err_set(err, DD_ECONFLICT, "job %lld is %s and cannot become %s", (long long)id,
				job_state_name(from), job_state_name(to));
		goto fail;
	}
	int64_t now = fs_now_ms();
	sqlite3_stmt *st;
	if (job_state_final(to)) {
		st = prep("UPDATE jobs SET state=?2, finished_at=?3, error=?4,"
			  " exit_code=CASE WHEN ?5>=0 THEN ?5 END, exit_signal=CASE WHEN ?6>0 THEN ?6 END,"
			  " progress=CASE WHEN ?2='done' THEN 1 ELSE progress END, eta_s=NULL WHERE id=?1",
			  err);
	} else {
		/* back to the queue (a resume): clear what the last run left */
		/* back to the queue (a resume): clear what the last run left; the extra
		 * parameters bound below are unused here */
		st = prep("UPDATE jobs SET state=?2, finished_at=NULL, error=NULL, exit_code=NULL,"
			  " exit_signal=NULL, abort_requested=0, pid=NULL, eta_s=NULL WHERE id=?1",
			  err);
	}
	if (!st) {
		rc = err ? err->code : DD_EIO;
		goto fail;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, job_state_name(to), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now);
	if (error)
		sqlite3_bind_text(st, 4, error, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 5, exit_code);
	sqlite3_bind_int(st, 6, exit_signal);
	if ((rc = step_done(st, "changing a job state", err)))
		goto fail;
	if ((rc = history_add(id, job_state_name(to), now, error, err)))
		goto fail;
	return exec("COMMIT", err);
fail:
	exec("ROLLBACK", NULL);
	return rc;
}

int store_job_started(int64_t id, int pid, int64_t pid_start, struct dd_err *err)
{
	int rc = exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	enum job_state from;
	if ((rc = current_state(id, &from, err)))
		goto fail;
	if (!job_state_can_move(from, JOB_RUNNING)) {
		rc = dd_err_set(err, DD_ECONFLICT, "job %lld is %s and cannot start", (long long)id,
				job_state_name(from));
		goto fail;
	}
	int64_t now = fs_now_ms();
	sqlite3_stmt *st = prep("UPDATE jobs SET state='running', started_at=?2, pid=?3, pid_start=?4 WHERE id=?1", err);
	if (!st) {
		rc = err ? err->code : DD_EIO;
		goto fail;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, now);
	sqlite3_bind_int(st, 3, pid);
	sqlite3_bind_int64(st, 4, pid_start);
	if ((rc = step_done(st, "starting a job", err)) || (rc = history_add(id, "running", now, NULL, err)))
		goto fail;
	return exec("COMMIT", err);
fail:
	exec("ROLLBACK", NULL);
	return rc;
}

/* Run an UPDATE on one job by id; DD_ENOENT when no row changed. */
static int update_one(sqlite3_stmt *st, int64_t id, const char *what, struct dd_err *err)
{
	if (!st)
		return err ? err->code : DD_EIO;
	int rc = step_done(st, what, err);
	if (rc == DD_OK && sqlite3_changes(store_conn(NULL)) == 0)
		rc = dd_err_set(err, DD_ENOENT, "job %lld does not exist", (long long)id);
	return rc;
}

int store_job_progress(int64_t id, double progress, double eta_s, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET progress=?2, eta_s=CASE WHEN ?3>=0 THEN ?3 END WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_double(st, 2, progress < 0 ? 0 : progress > 1 ? 1 : progress);
		sqlite3_bind_double(st, 3, eta_s);
	}
	return update_one(st, id, "saving progress", err);
}

int store_job_tail_save(int64_t id, int64_t offset, int64_t seq, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET ev_offset=?2, ev_seq=?3 WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, offset);
		sqlite3_bind_int64(st, 3, seq);
	}
	return update_one(st, id, "saving the event-log position", err);
}

int store_job_patch(int64_t id, const char *name, const char *notes, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET name=coalesce(?2,name), notes=coalesce(?3,notes) WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, notes, -1, SQLITE_TRANSIENT);
	}
	return update_one(st, id, "changing a job", err);
}

int store_job_set_params(int64_t id, const char *params_json, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET params=?2 WHERE id=?1 AND state NOT IN ('queued','running')", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, params_json, -1, SQLITE_TRANSIENT);
	}
	int rc = update_one(st, id, "changing a job's parameters", err);
	if (rc == DD_ENOENT) {
		/* the row exists but is queued or running, or it does not exist */
		struct job_row row;
		if (store_job_row(id, &row, NULL) == DD_OK)
			rc = dd_err_set(err, DD_ECONFLICT, "job %lld is %s", (long long)id, job_state_name(row.state));
	}
	return rc;
}

int store_job_request_abort(int64_t id, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET abort_requested=1 WHERE id=?1", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return update_one(st, id, "requesting an abort", err);
}

int store_job_delete(int64_t id, struct dd_err *err)
{
	int rc = exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	sqlite3_stmt *st = prep("SELECT p.job_id, j.name FROM job_parents p JOIN jobs j ON j.id=p.job_id"
				" WHERE p.parent_id=? ORDER BY p.job_id LIMIT 1",
				err);
	if (!st) {
		rc = err ? err->code : DD_EIO;
		goto fail;
	}
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		rc = dd_err_set(err, DD_ECONFLICT, "job %lld is used by job %lld (%s): delete that first",
				(long long)id, (long long)sqlite3_column_int64(st, 0),
				(const char *)sqlite3_column_text(st, 1));
		release(st);
		goto fail;
	}
	release(st);
	st = prep("DELETE FROM jobs WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	if ((rc = update_one(st, id, "deleting a job", err)))
		goto fail;
	return exec("COMMIT", err);
fail:
	exec("ROLLBACK", NULL);
	return rc;
}

int store_job_count(int64_t *n, struct dd_err *err)
{
	sqlite3_stmt *st = prep("SELECT count(*) FROM jobs", err);
	if (!st)
		return err ? err->code : DD_EIO;
	*n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	release(st);
	return DD_OK;
}

/* The one integer sql (one parameter: id) selects into *out; DD_ENOENT "<thing> ID
 * does not exist" when it selects no row, else the store's error saying what. */
static int int64_of(const char *sql, int64_t id, int64_t *out, const char *thing, const char *what,
		    struct dd_err *err)
{
	*out = 0;
	sqlite3_stmt *st = prep(sql, err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	release(st);
	if (rc == SQLITE_DONE)
		return dd_err_set(err, DD_ENOENT, "%s %lld does not exist", thing, (long long)id);
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, store_conn(NULL), what);
}

int store_job_owner(int64_t id, int64_t *owner_id, struct dd_err *err)
{
	return int64_of("SELECT coalesce(owner_id,0) FROM jobs WHERE id=?", id, owner_id, "job",
			"reading a job's owner", err);
}

/* ---- where a job runs (cluster executors) ---- */

int store_job_exec_set(int64_t id, const char *name, const char *ext_id, struct dd_err *err)
{
	sqlite3_stmt *st;
	if (!name || !ext_id || !*ext_id) {
		st = prep("DELETE FROM job_executor WHERE job_id=?1", err);
		if (!st)
			return err ? err->code : DD_EIO;
		sqlite3_bind_int64(st, 1, id);
		return step_done(st, "forgetting a job's executor", err);
	}
	st = prep("INSERT OR REPLACE INTO job_executor(job_id,name,ext_id) VALUES(?1,?2,?3)", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, ext_id, -1, SQLITE_TRANSIENT);
	return step_done(st, "saving a job's executor", err);
}

int store_job_exec_state(int64_t id, const char *state, const char *reason, int position, int restarts,
			 struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE job_executor SET state=?2, reason=?3, position=?4, restarts=?5 WHERE job_id=?1",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, state ? state : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, reason ? reason : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 4, position);
	sqlite3_bind_int(st, 5, restarts);
	return step_done(st, "saving a job's executor state", err);
}

int store_job_exec_get(int64_t id, char *name, size_t name_len, char *ext_id, size_t ext_len)
{
	sqlite3_stmt *st = prep("SELECT name,ext_id FROM job_executor WHERE job_id=?1", NULL);
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, id);
	int found = sqlite3_step(st) == SQLITE_ROW;
	if (found) {
		snprintf(name, name_len, "%s", (const char *)sqlite3_column_text(st, 0));
		snprintf(ext_id, ext_len, "%s", (const char *)sqlite3_column_text(st, 1));
	}
	release(st);
	return found ? 0 : -1;
}

void store_job_exec_json(int64_t id, cJSON *job)
{
	sqlite3_stmt *st = prep("SELECT name,ext_id,state,reason,position,restarts FROM job_executor WHERE job_id=?1",
				NULL);
	if (!st)
		return;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		cJSON *e = cJSON_AddObjectToObject(job, "executor");
		cJSON_AddStringToObject(e, "name", (const char *)sqlite3_column_text(st, 0));
		cJSON_AddStringToObject(e, "job_id", (const char *)sqlite3_column_text(st, 1));
		cJSON_AddStringToObject(e, "state", (const char *)sqlite3_column_text(st, 2));
		const char *reason = (const char *)sqlite3_column_text(st, 3);
		if (reason && *reason)
			cJSON_AddStringToObject(e, "reason", reason);
		else
			cJSON_AddNullToObject(e, "reason");
		int pos = sqlite3_column_int(st, 4);
		if (pos > 0)
			cJSON_AddNumberToObject(e, "position", pos);
		else
			cJSON_AddNullToObject(e, "position");
		cJSON_AddNumberToObject(e, "restarts", sqlite3_column_int(st, 5));
	}
	release(st);
}

/* ---- the fair queue and quotas ---- */

int store_jobs_queue(struct job_row **rows, int *n, struct dd_err *err)
{
	*rows = NULL;
	*n = 0;
	sqlite3_stmt *st = prep("SELECT " ROW_COLS " FROM jobs WHERE state='queued' ORDER BY priority DESC, id", err);
	if (!st)
		return err ? err->code : DD_EIO;
	return collect_rows(st, rows, n, "listing the queue", err);
}

int store_job_set_priority(int64_t id, int priority, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET priority=?2 WHERE id=?1 AND state='queued'", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int(st, 2, priority);
	}
	int rc = update_one(st, id, "changing a job's priority", err);
	if (rc == DD_ENOENT) {
		struct job_row row;
		if (store_job_row(id, &row, NULL) == DD_OK)
			rc = dd_err_set(err, DD_ECONFLICT, "job %lld is %s: only a queued job has a place in the queue",
					(long long)id, job_state_name(row.state));
	}
	return rc;
}

int store_queue_max_priority(int *max, struct dd_err *err)
{
	sqlite3_stmt *st = prep("SELECT coalesce(max(priority),0) FROM jobs WHERE state='queued'", err);
	if (!st)
		return err ? err->code : DD_EIO;
	*max = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
	release(st);
	return DD_OK;
}

/* The defaults of each role: a learner runs 2 jobs at once, 10 CPU-slot hours
 * and 2 GPU hours a day, in 10 GiB, each job in at most 4 GiB of memory;
 * instructors 4 jobs, admins no limit. */
void store_quota_default(const char *role, struct store_quota *q)
{
	if (role && strcmp(role, "learner") == 0)
		*q = (struct store_quota){ 2, 600, 120, 10ll << 30, 4ll << 30 };
	else if (role && strcmp(role, "instructor") == 0)
		*q = (struct store_quota){ 4, 0, 0, 0, 0 };
	else
		*q = (struct store_quota){ 0, 0, 0, 0, 0 };
}

int store_quota_get(int64_t user_id, struct store_quota *q, struct dd_err *err)
{
	memset(q, 0, sizeof *q);
	if (user_id <= 0)
		return DD_OK; /* the local user of a server without accounts: no limit */
	sqlite3_stmt *st = prep("SELECT u.role,q.jobs,q.cpu_minutes,q.gpu_minutes,q.disk_bytes,q.memory_bytes FROM users u"
				" LEFT JOIN quotas q ON q.user_id=u.id WHERE u.id=?", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, user_id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		store_quota_default((const char *)sqlite3_column_text(st, 0), q);
		int64_t *f[] = { &q->jobs, &q->cpu_minutes, &q->gpu_minutes, &q->disk_bytes, &q->memory_bytes };
		for (int i = 0; i < 5; i++)
			if (sqlite3_column_type(st, 1 + i) != SQLITE_NULL)
				*f[i] = sqlite3_column_int64(st, 1 + i);
	}
	release(st);
	if (rc == SQLITE_DONE)
		return DD_OK; /* a removed account: its jobs have no limit */
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, store_conn(NULL), "reading a quota");
}

int store_quota_set(int64_t user_id, const struct store_quota *q, struct dd_err *err)
{
	int rc = exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	sqlite3_stmt *st = prep("INSERT OR IGNORE INTO quotas(user_id) SELECT id FROM users WHERE id=?", err);
	if (!st) {
		rc = err ? err->code : DD_EIO;
		goto fail;
	}
	sqlite3_bind_int64(st, 1, user_id);
	if ((rc = step_done(st, "making a quota", err)))
		goto fail;
	st = prep("UPDATE quotas SET jobs=CASE ?2 WHEN -2 THEN jobs WHEN -1 THEN NULL ELSE ?2 END,"
		  " cpu_minutes=CASE ?3 WHEN -2 THEN cpu_minutes WHEN -1 THEN NULL ELSE ?3 END,"
		  " gpu_minutes=CASE ?4 WHEN -2 THEN gpu_minutes WHEN -1 THEN NULL ELSE ?4 END,"
		  " disk_bytes=CASE ?5 WHEN -2 THEN disk_bytes WHEN -1 THEN NULL ELSE ?5 END,"
		  " memory_bytes=CASE ?6 WHEN -2 THEN memory_bytes WHEN -1 THEN NULL ELSE ?6 END WHERE user_id=?1",
		  err);
	if (st) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_int64(st, 2, q->jobs);
		sqlite3_bind_int64(st, 3, q->cpu_minutes);
		sqlite3_bind_int64(st, 4, q->gpu_minutes);
		sqlite3_bind_int64(st, 5, q->disk_bytes);
		sqlite3_bind_int64(st, 6, q->memory_bytes);
	}
	if ((rc = update_one(st, user_id, "changing a quota", err))) {
		if (rc == DD_ENOENT)
			rc = dd_err_set(err, DD_ENOENT, "user %lld does not exist", (long long)user_id);
		goto fail;
	}
	return exec("COMMIT", err);
fail:
	exec("ROLLBACK", NULL);
	return rc;
}

int store_usage(int64_t user_id, int64_t since_ms, struct store_usage *u, struct dd_err *err)
{
	memset(u, 0, sizeof *u);
	int64_t now = fs_now_ms();
	/* slot-milliseconds and GPU-milliseconds of the runs that overlap [since, now] */
	sqlite3_stmt *st = prep(
		"SELECT coalesce(sum((coalesce(finished_at,?3) - max(started_at,?2))"
		"   * coalesce(json_extract(resources,'$.cpu_slots'),1)),0),"
		" coalesce(sum((coalesce(finished_at,?3) - max(started_at,?2)) * gpus_held),0),"
		" (SELECT count(*) FROM jobs WHERE owner_id=?1 AND state='running'),"
		" (SELECT count(*) FROM jobs WHERE owner_id=?1 AND state='queued')"
		" FROM jobs WHERE owner_id=?1 AND started_at IS NOT NULL AND coalesce(finished_at,?3) > ?2",
		err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, user_id);
	sqlite3_bind_int64(st, 2, since_ms);
	sqlite3_bind_int64(st, 3, now);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		u->cpu_minutes = sqlite3_column_double(st, 0) / 60000.0;
		u->gpu_minutes = sqlite3_column_double(st, 1) / 60000.0;
		u->running = sqlite3_column_int(st, 2);
		u->queued = sqlite3_column_int(st, 3);
	}
	release(st);
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, store_conn(NULL), "reading a user's usage");
}

int store_job_ids_of(int64_t user_id, int64_t **ids, int *n, struct dd_err *err)
{
	*ids = NULL;
	*n = 0;
	sqlite3_stmt *st = prep("SELECT id FROM jobs WHERE owner_id=? ORDER BY id", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, user_id);
	int cap = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			int64_t *grown = realloc(*ids, (size_t)cap * sizeof **ids);
			if (!grown) {
				release(st);
				free(*ids);
				*ids = NULL;
				*n = 0;
				return dd_err_set(err, DD_ENOMEM, "out of memory");
			}
			*ids = grown;
		}
		(*ids)[(*n)++] = sqlite3_column_int64(st, 0);
	}
	release(st);
	return rc == SQLITE_DONE ? DD_OK : db_fail(err, store_conn(NULL), "listing a user's jobs");
}

int store_user_set_disabled(int64_t user_id, int disabled, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE users SET disabled=?2 WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_int(st, 2, disabled != 0);
	}
	int rc = update_one(st, user_id, "disabling a user", err);
	if (rc == DD_ENOENT)
		return dd_err_set(err, DD_ENOENT, "user %lld does not exist", (long long)user_id);
	if (rc == DD_OK && disabled) {
		/* a disabled account is logged out everywhere */
		st = prep("DELETE FROM sessions WHERE user_id=?", err);
		if (!st)
			return err ? err->code : DD_EIO;
		sqlite3_bind_int64(st, 1, user_id);
		rc = step_done(st, "ending a user's sessions", err);
	}
	return rc;
}

int store_jobs_by_state(cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT state,count(*) FROM jobs GROUP BY state", err);
	if (!st)
		return err ? err->code : DD_EIO;
	cJSON *o = cJSON_CreateObject();
	while (o && sqlite3_step(st) == SQLITE_ROW)
		cJSON_AddNumberToObject(o, (const char *)sqlite3_column_text(st, 0), sqlite3_column_double(st, 1));
	release(st);
	if (!o)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	*out = o;
	return DD_OK;
}

int64_t store_user_id(const char *name)
{
	if (!name)
		return 0;
	sqlite3_stmt *st = prep("SELECT id FROM users WHERE name=?", NULL);
	if (!st)
		return 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	int64_t id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	release(st);
	return id;
}

int64_t store_owner_last_start(int64_t owner_id)
{
	sqlite3_stmt *st = prep("SELECT coalesce(max(started_at),0) FROM jobs WHERE coalesce(owner_id,0)=?", NULL);
	if (!st)
		return 0;
	sqlite3_bind_int64(st, 1, owner_id);
	int64_t at = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	release(st);
	return at;
}

void store_queue_waits(double *oldest_s, double *sum_s, double *count)
{
	*oldest_s = *sum_s = *count = 0;
	sqlite3_stmt *st = prep("SELECT (SELECT coalesce(?1 - min(created_at),0) FROM jobs WHERE state='queued'),"
				" coalesce(sum(started_at - created_at),0), count(*) FROM jobs WHERE started_at IS NOT NULL",
				NULL);
	if (!st)
		return;
	sqlite3_bind_int64(st, 1, fs_now_ms());
	if (sqlite3_step(st) == SQLITE_ROW) {
		*oldest_s = sqlite3_column_double(st, 0) / 1000.0;
		*sum_s = sqlite3_column_double(st, 1) / 1000.0;
		*count = sqlite3_column_double(st, 2);
	}
	release(st);
}

int store_job_set_gpus_held(int64_t id, int n, struct dd_err *err)
{
	sqlite3_stmt *st = prep("UPDATE jobs SET gpus_held=?2 WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int(st, 2, n);
	}
	return update_one(st, id, "recording a job's GPUs", err);
}

/* ---- classes (app/api/api_classes.c) ---- */

int store_class_create(const char *name, int64_t instructor_id, int64_t *id, struct dd_err *err)
{
	sqlite3_stmt *st = prep("INSERT INTO classes(name,instructor_id,created) VALUES(?,?,?)", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	if (instructor_id > 0)
		sqlite3_bind_int64(st, 2, instructor_id);
	sqlite3_bind_int64(st, 3, fs_now_ms());
	int rc = step_done(st, "creating a class", err);
	if (rc == DD_OK)
		*id = sqlite3_last_insert_rowid(store_conn(NULL));
	return rc;
}

int store_class_instructor(int64_t id, int64_t *instructor_id, struct dd_err *err)
{
	return int64_of("SELECT coalesce(instructor_id,0) FROM classes WHERE id=?", id, instructor_id, "class",
			"reading a class", err);
}

/* Run a statement binding (a, b) that changes at most one row; DD_ENOENT with
 * missing as the message when it changed none. */
static int change_pair(const char *sql, int64_t a, int64_t b, const char *what, const char *missing,
		       struct dd_err *err)
{
	sqlite3_stmt *st = prep(sql, err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	int rc = step_done(st, what, err);
	if (rc == DD_OK && missing && sqlite3_changes(store_conn(NULL)) == 0)
		return dd_err_set(err, DD_ENOENT, "%s", missing);
	return rc;
}

int store_class_delete(int64_t id, struct dd_err *err)
{
	char missing[64];
	snprintf(missing, sizeof missing, "class %lld does not exist", (long long)id);
	return change_pair("DELETE FROM classes WHERE id=?1 AND ?2=?2", id, 0, "deleting a class", missing, err);
}

/* A 1/0 question with two bound ids; 0 on any failure. */
static int ask_pair(const char *sql, int64_t a, int64_t b)
{
	sqlite3_stmt *st = prep(sql, NULL);
	if (!st)
		return 0;
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	int yes = sqlite3_step(st) == SQLITE_ROW;
	release(st);
	return yes;
}

int store_class_is_member(int64_t class_id, int64_t user_id)
{
	return ask_pair("SELECT 1 FROM class_members WHERE class_id=? AND user_id=?", class_id, user_id);
}

int store_class_instructs(int64_t instructor_id, int64_t user_id)
{
	/* learners only: an admin or an instructor enrolled in a class gives its
	 * instructor no rights over their work */
	return ask_pair("SELECT 1 FROM class_members m JOIN classes c ON c.id=m.class_id"
			" JOIN users u ON u.id=m.user_id"
			" WHERE c.instructor_id=?1 AND m.user_id=?2 AND u.role='learner' LIMIT 1",
			instructor_id, user_id);
}

int store_class_dataset_shared(int64_t job_id, int64_t user_id)
{
	return ask_pair("SELECT 1 FROM class_datasets d JOIN class_members m ON m.class_id=d.class_id"
			" WHERE d.job_id=?1 AND m.user_id=?2 LIMIT 1",
			job_id, user_id);
}

int store_class_member_add(int64_t class_id, int64_t user_id, struct dd_err *err)
{
	return change_pair("INSERT OR IGNORE INTO class_members(class_id,user_id) VALUES(?,?)", class_id, user_id,
			   "adding a class member", NULL, err);
}

int store_class_member_remove(int64_t class_id, int64_t user_id, struct dd_err *err)
{
	char missing[96];
	snprintf(missing, sizeof missing, "user %lld is not a member of class %lld", (long long)user_id,
		 (long long)class_id);
	return change_pair("DELETE FROM class_members WHERE class_id=? AND user_id=?", class_id, user_id,
			   "removing a class member", missing, err);
}

int store_class_dataset_add(int64_t class_id, int64_t job_id, struct dd_err *err)
{
	return change_pair("INSERT OR IGNORE INTO class_datasets(class_id,job_id) VALUES(?,?)", class_id, job_id,
			   "sharing a dataset", NULL, err);
}

int store_class_dataset_remove(int64_t class_id, int64_t job_id, struct dd_err *err)
{
	char missing[96];
	snprintf(missing, sizeof missing, "dataset %lld is not shared with class %lld", (long long)job_id,
		 (long long)class_id);
	return change_pair("DELETE FROM class_datasets WHERE class_id=? AND job_id=?", class_id, job_id,
			   "unsharing a dataset", missing, err);
}

/* {id,name} of a user in columns col, col+1, or null when the id is NULL. */
static cJSON *user_ref(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return cJSON_CreateNull();
	cJSON *u = cJSON_CreateObject();
	cJSON_AddNumberToObject(u, "id", (double)sqlite3_column_int64(st, col));
	add_text_or_null(u, "name", st, col + 1);
	return u;
}

#define CLASS_COLS                                                                                         \
	"c.id,c.name,c.instructor_id,(SELECT name FROM users WHERE id=c.instructor_id),c.created,"         \
	"(SELECT count(*) FROM class_members WHERE class_id=c.id)"

static cJSON *class_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	add_text_or_null(o, "name", st, 1);
	cJSON_AddItemToObject(o, "instructor", user_ref(st, 2));
	cJSON_AddNumberToObject(o, "created", (double)sqlite3_column_int64(st, 4));
	cJSON_AddNumberToObject(o, "member_count", (double)sqlite3_column_int64(st, 5));
	return o;
}

int store_class_list(int64_t user_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT " CLASS_COLS " FROM classes c WHERE ?1 < 0 OR c.instructor_id=?1"
				" OR c.id IN (SELECT class_id FROM class_members WHERE user_id=?1) ORDER BY c.id",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, user_id);
	cJSON *arr = cJSON_CreateArray();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(arr, class_row(st));
	release(st);
	if (rc != SQLITE_DONE) {
		cJSON_Delete(arr);
		return db_fail(err, store_conn(NULL), "listing classes");
	}
	*out = arr;
	return DD_OK;
}

/* o[key] = [{id, name, third}] from sql (id, name, third columns; one parameter,
 * id).  0, or -1 (err set where the statement did not prepare). */
static int id_name_rows(cJSON *o, const char *key, const char *third, const char *sql, int64_t id,
			struct dd_err *err)
{
	cJSON *arr = cJSON_AddArrayToObject(o, key);
	sqlite3_stmt *st = prep(sql, err);
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, id);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *m = cJSON_CreateObject();
		cJSON_AddNumberToObject(m, "id", (double)sqlite3_column_int64(st, 0));
		add_text_or_null(m, "name", st, 1);
		add_text_or_null(m, third, st, 2);
		cJSON_AddItemToArray(arr, m);
	}
	release(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

int store_class_json(int64_t id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT " CLASS_COLS " FROM classes c WHERE c.id=?", err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	cJSON *o = rc == SQLITE_ROW ? class_row(st) : NULL;
	release(st);
	if (rc == SQLITE_DONE)
		return dd_err_set(err, DD_ENOENT, "class %lld does not exist", (long long)id);
	if (!o)
		return db_fail(err, store_conn(NULL), "reading a class");
	if (id_name_rows(o, "members", "role",
			 "SELECT u.id,u.name,u.role FROM class_members m JOIN users u ON u.id=m.user_id"
			 " WHERE m.class_id=? ORDER BY u.name",
			 id, err) ||
	    id_name_rows(o, "datasets", "state",
			 "SELECT j.id,j.name,j.state FROM class_datasets d JOIN jobs j ON j.id=d.job_id"
			 " WHERE d.class_id=? ORDER BY j.id",
			 id, err))
		goto fail;
	*out = o;
	return DD_OK;
fail:
	cJSON_Delete(o);
	if (err && err->code)
		return err->code;
	return db_fail(err, store_conn(NULL), "reading a class");
}

int store_class_roster(int64_t class_id, struct store_roster_entry *e, int n, struct dd_err *err)
{
	int rc = exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	for (int i = 0; i < n && rc == DD_OK; i++) {
		if (e[i].pwhash) {
			sqlite3_stmt *st = prep("INSERT INTO users(name,role,pwhash,created_at) VALUES(?,?,?,?)", err);
			if (!st) {
				rc = err ? err->code : DD_EIO;
				break;
			}
			sqlite3_bind_text(st, 1, e[i].name, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 2, e[i].role, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 3, e[i].pwhash, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 4, now);
			int s = sqlite3_step(st);
			release(st);
			if (s == SQLITE_CONSTRAINT) {
				rc = dd_err_set(err, DD_ECONFLICT, "line %d: %s: an account of that name was made meanwhile",
						e[i].line, e[i].name);
				break;
			}
			if (s != SQLITE_DONE) {
				rc = db_fail(err, store_conn(NULL), "adding an account");
				break;
			}
			e[i].user_id = sqlite3_last_insert_rowid(store_conn(NULL));
		}
		rc = store_class_member_add(class_id, e[i].user_id, err);
	}
	if (rc == DD_OK)
		rc = exec("COMMIT", err);
	if (rc != DD_OK)
		exec("ROLLBACK", NULL);
	return rc;
}

/* ---- lab presets ---- */

int store_preset_add(int64_t class_id, const char *name, const char *settings, const char *locked,
		     const char *hidden, int64_t *id, struct dd_err *err)
{
	sqlite3_stmt *st = prep("INSERT INTO class_presets(class_id,name,settings,locked,hidden,created)"
				" VALUES(?,?,?,?,?,?)",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, class_id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, settings, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, locked, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, hidden, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, fs_now_ms());
	int rc = step_done(st, "adding a preset", err);
	if (rc == DD_OK)
		*id = sqlite3_last_insert_rowid(store_conn(NULL));
	return rc;
}

int store_preset_delete(int64_t class_id, int64_t id, struct dd_err *err)
{
	char missing[96];
	snprintf(missing, sizeof missing, "class %lld has no preset %lld", (long long)class_id, (long long)id);
	return change_pair("DELETE FROM class_presets WHERE class_id=? AND id=?", class_id, id, "deleting a preset",
			   missing, err);
}

static void add_json_text(cJSON *o, const char *k, sqlite3_stmt *st, int col)
{
	cJSON *v = NULL;
	json_parse_str((const char *)sqlite3_column_text(st, col), k, &v, NULL);
	cJSON_AddItemToObject(o, k, v ? v : cJSON_CreateNull());
}

static cJSON *preset_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	cJSON_AddNumberToObject(o, "class_id", (double)sqlite3_column_int64(st, 1));
	add_text_or_null(o, "class_name", st, 2);
	add_text_or_null(o, "name", st, 3);
	add_json_text(o, "settings", st, 4);
	add_json_text(o, "locked", st, 5);
	add_json_text(o, "hidden", st, 6);
	cJSON_AddNumberToObject(o, "created", (double)sqlite3_column_int64(st, 7));
	return o;
}

#define PRESET_COLS "p.id,p.class_id,c.name,p.name,p.settings,p.locked,p.hidden,p.created"

int store_preset_json(int64_t id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT " PRESET_COLS " FROM class_presets p JOIN classes c ON c.id=p.class_id"
				" WHERE p.id=?",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = preset_row(st);
	release(st);
	if (rc == SQLITE_DONE)
		return dd_err_set(err, DD_ENOENT, "preset %lld does not exist", (long long)id);
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, store_conn(NULL), "reading a preset");
}

int store_preset_list(int64_t user_id, int64_t class_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT " PRESET_COLS " FROM class_presets p JOIN classes c ON c.id=p.class_id"
				" WHERE (?2 <= 0 OR p.class_id=?2) AND (?1 < 0 OR c.instructor_id=?1"
				" OR c.id IN (SELECT class_id FROM class_members WHERE user_id=?1)) ORDER BY p.id",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, user_id);
	sqlite3_bind_int64(st, 2, class_id);
	cJSON *arr = cJSON_CreateArray();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(arr, preset_row(st));
	release(st);
	if (rc != SQLITE_DONE) {
		cJSON_Delete(arr);
		return db_fail(err, store_conn(NULL), "listing presets");
	}
	*out = arr;
	return DD_OK;
}

int store_class_runs(int64_t class_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = prep("SELECT u.id,u.name,j.id,j.name,j.state,j.progress,j.created_at,j.started_at,"
				"j.finished_at FROM class_members m JOIN users u ON u.id=m.user_id"
				" JOIN jobs j ON j.owner_id=u.id AND j.kind='model' WHERE m.class_id=? AND u.role='learner'"
				" ORDER BY u.name, j.id",
				err);
	if (!st)
		return err ? err->code : DD_EIO;
	sqlite3_bind_int64(st, 1, class_id);
	cJSON *arr = cJSON_CreateArray();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "user", user_ref(st, 0));
		cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 2));
		add_text_or_null(o, "name", st, 3);
		add_text_or_null(o, "state", st, 4);
		cJSON_AddNumberToObject(o, "progress", sqlite3_column_double(st, 5));
		add_int_or_null(o, "created_at", st, 6);
		add_int_or_null(o, "started_at", st, 7);
		add_int_or_null(o, "finished_at", st, 8);
		cJSON_AddItemToArray(arr, o);
	}
	release(st);
	if (rc != SQLITE_DONE) {
		cJSON_Delete(arr);
		return db_fail(err, store_conn(NULL), "listing a class's runs");
	}
	*out = arr;
	return DD_OK;
}
