/* classes.c — classes (an instructor's class, its members, the datasets shared
 * with it), their rosters and lab presets; see store.h. */
#define _GNU_SOURCE
#include "store.h"

#include <stdio.h>
#include <string.h>

#include "db.h"
#include "../common/fsutil.h"
#include "../common/json.h"

/* ---- classes (app/api/api_classes.c) ---- */

int store_class_create(const char *name, int64_t instructor_id, int64_t *id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO classes(name,instructor_id,created) VALUES(?,?,?)", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	if (instructor_id > 0)
		sqlite3_bind_int64(st, 2, instructor_id);
	sqlite3_bind_int64(st, 3, fs_now_ms());
	return db_step_insert(st, "creating a class", id, err);
}

int store_class_instructor(int64_t id, int64_t *instructor_id, struct dd_err *err)
{
	return db_int64_of("SELECT coalesce(instructor_id,0) FROM classes WHERE id=?", id, instructor_id, "class",
			"reading a class", err);
}

/* Run a statement binding (a, b) that changes at most one row; DD_ENOENT with
 * missing as the message when it changed none. */
static int change_pair(const char *sql, int64_t a, int64_t b, const char *what, const char *missing,
		       struct dd_err *err)
{
	sqlite3_stmt *st = db_prep(sql, err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	int rc = db_step_done(st, what, err);
	if (rc == DD_OK && missing && db_changes() == 0)
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
	sqlite3_stmt *st = db_prep(sql, NULL);
	if (!st)
		return 0;
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	int yes = sqlite3_step(st) == SQLITE_ROW;
	db_release(st);
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

/* The two tables that link a class to others: its members and the datasets
 * shared with it.  A link is added once however often it is asked for; taking
 * away one that is not there is DD_ENOENT, in a sentence naming both. */
static const struct class_link {
	const char *add_sql, *remove_sql;
	const char *adding, *removing; /* for the store's errors */
	const char *other, *not_linked; /* "user" 7 "is not a member of" class 3 */
} class_links[] = {
	{ "INSERT OR IGNORE INTO class_members(class_id,user_id) VALUES(?,?)",
	  "DELETE FROM class_members WHERE class_id=? AND user_id=?", "adding a class member", "removing a class member",
	  "user", "is not a member of" },
	{ "INSERT OR IGNORE INTO class_datasets(class_id,job_id) VALUES(?,?)",
	  "DELETE FROM class_datasets WHERE class_id=? AND job_id=?", "sharing a dataset", "unsharing a dataset",
	  "dataset", "is not shared with" },
};
enum { LINK_MEMBER, LINK_DATASET };

static int class_link_change(int which, int add, int64_t class_id, int64_t other, struct dd_err *err)
{
	const struct class_link *l = &class_links[which];
	if (add)
		return change_pair(l->add_sql, class_id, other, l->adding, NULL, err);
	char missing[96];
	snprintf(missing, sizeof missing, "%s %lld %s class %lld", l->other, (long long)other, l->not_linked,
		 (long long)class_id);
	return change_pair(l->remove_sql, class_id, other, l->removing, missing, err);
}

int store_class_member_add(int64_t class_id, int64_t user_id, struct dd_err *err)
{
	return class_link_change(LINK_MEMBER, 1, class_id, user_id, err);
}

int store_class_member_remove(int64_t class_id, int64_t user_id, struct dd_err *err)
{
	return class_link_change(LINK_MEMBER, 0, class_id, user_id, err);
}

int store_class_dataset_add(int64_t class_id, int64_t job_id, struct dd_err *err)
{
	return class_link_change(LINK_DATASET, 1, class_id, job_id, err);
}

int store_class_dataset_remove(int64_t class_id, int64_t job_id, struct dd_err *err)
{
	return class_link_change(LINK_DATASET, 0, class_id, job_id, err);
}

/* {id,name} of a user in columns col, col+1, or null when the id is NULL. */
static cJSON *user_ref(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return cJSON_CreateNull();
	cJSON *u = cJSON_CreateObject();
	cJSON_AddNumberToObject(u, "id", (double)sqlite3_column_int64(st, col));
	db_add_text_or_null(u, "name", st, col + 1);
	return u;
}

#define CLASS_COLS                                                                                         \
	"c.id,c.name,c.instructor_id,(SELECT name FROM users WHERE id=c.instructor_id),c.created,"         \
	"(SELECT count(*) FROM class_members WHERE class_id=c.id)"

static cJSON *class_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	db_add_text_or_null(o, "name", st, 1);
	cJSON_AddItemToObject(o, "instructor", user_ref(st, 2));
	cJSON_AddNumberToObject(o, "created", (double)sqlite3_column_int64(st, 4));
	cJSON_AddNumberToObject(o, "member_count", (double)sqlite3_column_int64(st, 5));
	return o;
}

int store_class_list(int64_t user_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT " CLASS_COLS " FROM classes c WHERE ?1 < 0 OR c.instructor_id=?1"
				" OR c.id IN (SELECT class_id FROM class_members WHERE user_id=?1) ORDER BY c.id",
				err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, user_id);
	return db_json_rows(st, class_row, "listing classes", out, err);
}

/* o[key] = [{id, name, third}] from sql (id, name, third columns; one parameter,
 * id).  0, or -1 (err set where the statement did not prepare). */
static int id_name_rows(cJSON *o, const char *key, const char *third, const char *sql, int64_t id,
			struct dd_err *err)
{
	cJSON *arr = cJSON_AddArrayToObject(o, key);
	sqlite3_stmt *st = db_prep(sql, err);
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, id);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *m = cJSON_CreateObject();
		cJSON_AddNumberToObject(m, "id", (double)sqlite3_column_int64(st, 0));
		db_add_text_or_null(m, "name", st, 1);
		db_add_text_or_null(m, third, st, 2);
		cJSON_AddItemToArray(arr, m);
	}
	db_release(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

int store_class_json(int64_t id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT " CLASS_COLS " FROM classes c WHERE c.id=?", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	cJSON *o = rc == SQLITE_ROW ? class_row(st) : NULL;
	db_release(st);
	if (rc == SQLITE_DONE)
		return dd_err_set(err, DD_ENOENT, "class %lld does not exist", (long long)id);
	if (!o)
		return db_fail(err, "reading a class");
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
	return db_fail(err, "reading a class");
}

int store_class_roster(int64_t class_id, struct store_roster_entry *e, int n, struct dd_err *err)
{
	int rc = db_exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	for (int i = 0; i < n && rc == DD_OK; i++) {
		if (e[i].pwhash) {
			rc = store_user_add(e[i].name, e[i].role, e[i].pwhash, now, &e[i].user_id, err);
			if (rc == DD_EEXIST)
				rc = dd_err_set(err, DD_ECONFLICT, "line %d: %s: an account of that name was made meanwhile",
						e[i].line, e[i].name);
			if (rc)
				break;
		}
		rc = store_class_member_add(class_id, e[i].user_id, err);
	}
	if (rc == DD_OK)
		rc = db_exec("COMMIT", err);
	if (rc != DD_OK)
		db_exec("ROLLBACK", NULL);
	return rc;
}

/* ---- lab presets ---- */

int store_preset_add(int64_t class_id, const char *name, const char *settings, const char *locked,
		     const char *hidden, int64_t *id, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO class_presets(class_id,name,settings,locked,hidden,created)"
				" VALUES(?,?,?,?,?,?)",
				err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, class_id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, settings, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, locked, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, hidden, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, fs_now_ms());
	return db_step_insert(st, "adding a preset", id, err);
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
	db_add_text_or_null(o, "class_name", st, 2);
	db_add_text_or_null(o, "name", st, 3);
	add_json_text(o, "settings", st, 4);
	add_json_text(o, "locked", st, 5);
	add_json_text(o, "hidden", st, 6);
	cJSON_AddNumberToObject(o, "created", (double)sqlite3_column_int64(st, 7));
	return o;
}

static void fill_preset(sqlite3_stmt *st, void *item)
{
	*(cJSON **)item = preset_row(st);
}

#define PRESET_COLS "p.id,p.class_id,c.name,p.name,p.settings,p.locked,p.hidden,p.created"

int store_preset_json(int64_t id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT " PRESET_COLS " FROM class_presets p JOIN classes c ON c.id=p.class_id"
				" WHERE p.id=?",
				err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return db_step_row(st, fill_preset, out, "preset", id, "reading a preset", err);
}

int store_preset_list(int64_t user_id, int64_t class_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT " PRESET_COLS " FROM class_presets p JOIN classes c ON c.id=p.class_id"
				" WHERE (?2 <= 0 OR p.class_id=?2) AND (?1 < 0 OR c.instructor_id=?1"
				" OR c.id IN (SELECT class_id FROM class_members WHERE user_id=?1)) ORDER BY p.id",
				err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, user_id);
	sqlite3_bind_int64(st, 2, class_id);
	return db_json_rows(st, preset_row, "listing presets", out, err);
}

/* A model job of a member, with the member: the user (columns 0, 1) then the job. */
static cJSON *run_row(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "user", user_ref(st, 0));
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 2));
	db_add_text_or_null(o, "name", st, 3);
	db_add_text_or_null(o, "state", st, 4);
	cJSON_AddNumberToObject(o, "progress", sqlite3_column_double(st, 5));
	db_add_int_or_null(o, "created_at", st, 6);
	db_add_int_or_null(o, "started_at", st, 7);
	db_add_int_or_null(o, "finished_at", st, 8);
	return o;
}

int store_class_runs(int64_t class_id, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT u.id,u.name,j.id,j.name,j.state,j.progress,j.created_at,j.started_at,"
				"j.finished_at FROM class_members m JOIN users u ON u.id=m.user_id"
				" JOIN jobs j ON j.owner_id=u.id AND j.kind='model' WHERE m.class_id=? AND u.role='learner'"
				" ORDER BY u.name, j.id",
				err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, class_id);
	return db_json_rows(st, run_row, "listing a class's runs", out, err);
}

