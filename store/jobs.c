/* jobs.c — the jobs table and what hangs off it (parents, state history, where
 * a cluster runs a job), the fair queue and the quotas; see store.h.
 *
 * Invariants kept here:
 *  - jobs.state only changes in store_job_move/store_job_started, each of which
 *    checks job_state_can_move inside the same transaction that writes the row
 *    and its job_history line;
 *  - a job with dependants (job_parents.parent_id) cannot be deleted: the foreign
 *    key is ON DELETE RESTRICT and store_job_delete names the dependant first. */
#define _GNU_SOURCE
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "../common/fsutil.h"
#include "../common/json.h"

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

/* ---- jobs ---- */

static int history_add(int64_t id, const char *state, int64_t at, const char *message,
		       struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("INSERT INTO job_history(job_id,state,at,message) VALUES(?,?,?,?)", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, at);
	if (message)
		sqlite3_bind_text(st, 4, message, -1, SQLITE_TRANSIENT);
	return db_step_done(st, "recording state history", err);
}

int store_job_insert(const char *kind, const char *name, const char *owner,
		     const char *params_json, const char *resources_json, const int64_t *parents,
		     int nparents, int64_t *id, struct dd_err *err)
{
	int rc = db_exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	/* owner_id: the account named owner, NULL for the local user */
	sqlite3_stmt *st = db_prep("INSERT INTO jobs(kind,name,owner,owner_id,state,created_at,params,resources)"
				" VALUES(?1,?2,?3,(SELECT id FROM users WHERE name=?3),'queued',?4,?5,?6)",
				err);
	if (!st) {
		rc = db_err_code(err);
		goto fail;
	}
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, owner, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, now);
	sqlite3_bind_text(st, 5, params_json ? params_json : "{}", -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, resources_json ? resources_json : "{}", -1, SQLITE_TRANSIENT);
	if ((rc = db_step_done(st, "creating a job", err)))
		goto fail;
	*id = db_last_id();
	for (int i = 0; i < nparents; i++) {
		st = db_prep("INSERT INTO job_parents(job_id,parent_id) SELECT ?, id FROM jobs WHERE id=?", err);
		if (!st) {
			rc = db_err_code(err);
			goto fail;
		}
		sqlite3_bind_int64(st, 1, *id);
		sqlite3_bind_int64(st, 2, parents[i]);
		int step = sqlite3_step(st);
		db_release(st);
		if (step == SQLITE_CONSTRAINT) {
			rc = dd_err_set(err, DD_EINVAL, "parent job %lld is listed twice", (long long)parents[i]);
			goto fail;
		}
		if (step != SQLITE_DONE) {
			rc = db_fail(err, "linking a parent job");
			goto fail;
		}
		if (db_changes() == 0) {
			rc = dd_err_set(err, DD_EINVAL, "parent job %lld does not exist", (long long)parents[i]);
			goto fail;
		}
	}
	if ((rc = history_add(*id, "queued", now, NULL, err)))
		goto fail;
	return db_exec("COMMIT", err);
fail:
	db_exec("ROLLBACK", NULL);
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
	db_add_int_or_null(o, "created_at", st, 7);
	db_add_int_or_null(o, "started_at", st, 8);
	db_add_int_or_null(o, "finished_at", st, 9);
	db_add_text_or_null(o, "error", st, 10);
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
	db_add_int_or_null(o, "pid", st, 15);
	if (sqlite3_column_type(st, 16) == SQLITE_NULL && sqlite3_column_type(st, 17) == SQLITE_NULL) {
		cJSON_AddNullToObject(o, "exit");
	} else {
		cJSON *ex = cJSON_AddObjectToObject(o, "exit");
		db_add_int_or_null(ex, "code", st, 16);
		db_add_int_or_null(ex, "signal", st, 17);
	}
	cJSON_AddBoolToObject(o, "abort_requested", sqlite3_column_int(st, 19));
	return o;
}

/* A job as a list shows it. */
static cJSON *list_row(sqlite3_stmt *st)
{
	return row_json(st, 0);
}

int store_job_json(int64_t id, int detail, cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT " JOB_COLS " FROM jobs j WHERE j.id=?", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		db_release(st);
		if (rc == SQLITE_DONE)
			return dd_err_set(err, DD_ENOENT, "job %lld does not exist", (long long)id);
		return db_fail(err, "reading a job");
	}
	cJSON *o = row_json(st, detail);
	db_release(st);
	if (!o)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	store_job_exec_json(id, o);
	if (detail) {
		cJSON *hist = cJSON_AddArrayToObject(o, "history");
		st = db_prep("SELECT state,at,message FROM job_history WHERE job_id=? ORDER BY rowid", err);
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
			db_release(st);
		}
		cJSON *children = cJSON_AddArrayToObject(o, "children");
		st = db_prep("SELECT job_id FROM job_parents WHERE parent_id=? ORDER BY job_id", err);
		if (st) {
			sqlite3_bind_int64(st, 1, id);
			while (sqlite3_step(st) == SQLITE_ROW)
				cJSON_AddItemToArray(children,
						     cJSON_CreateNumber((double)sqlite3_column_int64(st, 0)));
			db_release(st);
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
	sqlite3_stmt *st = db_prep("SELECT count(*) FROM jobs j WHERE (?1 IS NULL OR kind=?1) AND (?2 IS NULL OR state=?2)"
				" AND (?3 < 0 OR " STORE_SEEN_BY("?3") ")", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, owner_id);
	if (sqlite3_step(st) == SQLITE_ROW)
		*total = sqlite3_column_int(st, 0);
	db_release(st);
	st = db_prep("SELECT " JOB_COLS " FROM jobs j WHERE (?1 IS NULL OR kind=?1) AND (?2 IS NULL OR state=?2)"
		  " AND (?5 < 0 OR " STORE_SEEN_BY("?5") ") ORDER BY j.id DESC LIMIT ?3 OFFSET ?4",
		  err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, limit);
	sqlite3_bind_int(st, 4, offset);
	sqlite3_bind_int64(st, 5, owner_id);
	return db_json_rows(st, list_row, "listing jobs", out, err);
}

static void fill_row(sqlite3_stmt *st, void *item)
{
	struct job_row *r = item;
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
	sqlite3_stmt *st = db_prep("SELECT " ROW_COLS " FROM jobs WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return db_step_row(st, fill_row, row, "job", id, "reading a job", err);
}

/* Every row st (prepared, bound) yields, as job rows into *rows and *n (caller frees);
 * st is released.  what names the query in an error. */
static int collect_rows(sqlite3_stmt *st, struct job_row **rows, int *n, const char *what, struct dd_err *err)
{
	void *items = NULL;
	int rc = db_collect(st, &items, n, sizeof **rows, fill_row, what, err);
	*rows = items;
	return rc;
}

int store_jobs_in_state(enum job_state state, struct job_row **rows, int *n, struct dd_err *err)
{
	*rows = NULL;
	*n = 0;
	sqlite3_stmt *st = db_prep("SELECT " ROW_COLS " FROM jobs WHERE state=? ORDER BY id", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_text(st, 1, job_state_name(state), -1, SQLITE_STATIC);
	return collect_rows(st, rows, n, "listing jobs by state", err);
}

/* Read the state of a job inside the current transaction. */
static int current_state(int64_t id, enum job_state *s, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("SELECT state FROM jobs WHERE id=?", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	int out = DD_OK;
	if (rc == SQLITE_ROW) {
		if (job_state_parse((const char *)sqlite3_column_text(st, 0), s) != 0)
			out = dd_err_set(err, DD_EINTERNAL, "job %lld has an unknown state", (long long)id);
	} else if (rc == SQLITE_DONE) {
		out = dd_err_set(err, DD_ENOENT, "job %lld does not exist", (long long)id);
	} else {
		out = db_fail(err, "reading a job state");
	}
	db_release(st);
	return out;
}

/* Open the transaction that moves job id to `to`: BEGIN IMMEDIATE, then the
 * job's state must allow the move (DD_ECONFLICT "job N is S and cannot
 * <doing>").  On failure the transaction is rolled back. */
static int move_begin(int64_t id, enum job_state to, const char *doing, struct dd_err *err)
{
	int rc = db_exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	enum job_state from;
	if ((rc = current_state(id, &from, err)) == DD_OK && !job_state_can_move(from, to))
		rc = dd_err_set(err, DD_ECONFLICT, "job %lld is %s and cannot %s", (long long)id, job_state_name(from),
				doing);
	if (rc)
		db_exec("ROLLBACK", NULL);
	return rc;
}

int store_job_move(int64_t id, enum job_state to, const char *error, int exit_code,
		   int exit_signal, struct dd_err *err)
{
	char doing[48];
	snprintf(doing, sizeof doing, "become %s", job_state_name(to));
	int rc = move_begin(id, to, doing, err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	sqlite3_stmt *st;
	if (job_state_final(to)) {
		st = db_prep("UPDATE jobs SET state=?2, finished_at=?3, error=?4,"
			  " exit_code=CASE WHEN ?5>=0 THEN ?5 END, exit_signal=CASE WHEN ?6>0 THEN ?6 END,"
			  " progress=CASE WHEN ?2='done' THEN 1 ELSE progress END, eta_s=NULL WHERE id=?1",
			  err);
	} else {
		/* back to the queue (a resume): clear what the last run left; the extra
		 * parameters bound below are unused here */
		st = db_prep("UPDATE jobs SET state=?2, finished_at=NULL, error=NULL, exit_code=NULL,"
			  " exit_signal=NULL, abort_requested=0, pid=NULL, eta_s=NULL WHERE id=?1",
			  err);
	}
	if (!st) {
		rc = db_err_code(err);
		goto fail;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, job_state_name(to), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now);
	if (error)
		sqlite3_bind_text(st, 4, error, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 5, exit_code);
	sqlite3_bind_int(st, 6, exit_signal);
	if ((rc = db_step_done(st, "changing a job state", err)))
		goto fail;
	if ((rc = history_add(id, job_state_name(to), now, error, err)))
		goto fail;
	return db_exec("COMMIT", err);
fail:
	db_exec("ROLLBACK", NULL);
	return rc;
}

int store_job_started(int64_t id, int pid, int64_t pid_start, struct dd_err *err)
{
	int rc = move_begin(id, JOB_RUNNING, "start", err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	sqlite3_stmt *st = db_prep("UPDATE jobs SET state='running', started_at=?2, pid=?3, pid_start=?4 WHERE id=?1", err);
	if (!st) {
		rc = db_err_code(err);
		goto fail;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, now);
	sqlite3_bind_int(st, 3, pid);
	sqlite3_bind_int64(st, 4, pid_start);
	if ((rc = db_step_done(st, "starting a job", err)) || (rc = history_add(id, "running", now, NULL, err)))
		goto fail;
	return db_exec("COMMIT", err);
fail:
	db_exec("ROLLBACK", NULL);
	return rc;
}

int store_job_progress(int64_t id, double progress, double eta_s, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE jobs SET progress=?2, eta_s=CASE WHEN ?3>=0 THEN ?3 END WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_double(st, 2, progress < 0 ? 0 : progress > 1 ? 1 : progress);
		sqlite3_bind_double(st, 3, eta_s);
	}
	return db_step_one(st, "saving progress", "job", id, err);
}

int store_job_tail_save(int64_t id, int64_t offset, int64_t seq, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE jobs SET ev_offset=?2, ev_seq=?3 WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, offset);
		sqlite3_bind_int64(st, 3, seq);
	}
	return db_step_one(st, "saving the event-log position", "job", id, err);
}

int store_job_patch(int64_t id, const char *name, const char *notes, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE jobs SET name=coalesce(?2,name), notes=coalesce(?3,notes) WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, notes, -1, SQLITE_TRANSIENT);
	}
	return db_step_one(st, "changing a job", "job", id, err);
}

int store_job_set_params(int64_t id, const char *params_json, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE jobs SET params=?2 WHERE id=?1 AND state NOT IN ('queued','running')", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, params_json, -1, SQLITE_TRANSIENT);
	}
	int rc = db_step_one(st, "changing a job's parameters", "job", id, err);
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
	sqlite3_stmt *st = db_prep("UPDATE jobs SET abort_requested=1 WHERE id=?1", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	return db_step_one(st, "requesting an abort", "job", id, err);
}

int store_job_delete(int64_t id, struct dd_err *err)
{
	int rc = db_exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	sqlite3_stmt *st = db_prep("SELECT p.job_id, j.name FROM job_parents p JOIN jobs j ON j.id=p.job_id"
				" WHERE p.parent_id=? ORDER BY p.job_id LIMIT 1",
				err);
	if (!st) {
		rc = db_err_code(err);
		goto fail;
	}
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		rc = dd_err_set(err, DD_ECONFLICT, "job %lld is used by job %lld (%s): delete that first",
				(long long)id, (long long)sqlite3_column_int64(st, 0),
				(const char *)sqlite3_column_text(st, 1));
		db_release(st);
		goto fail;
	}
	db_release(st);
	st = db_prep("DELETE FROM jobs WHERE id=?", err);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	if ((rc = db_step_one(st, "deleting a job", "job", id, err)))
		goto fail;
	return db_exec("COMMIT", err);
fail:
	db_exec("ROLLBACK", NULL);
	return rc;
}

int store_job_count(int64_t *n, struct dd_err *err)
{
	return db_count("SELECT count(*) FROM jobs", n, err);
}

int store_job_owner(int64_t id, int64_t *owner_id, struct dd_err *err)
{
	return db_int64_of("SELECT coalesce(owner_id,0) FROM jobs WHERE id=?", id, owner_id, "job",
			"reading a job's owner", err);
}

/* ---- where a job runs (cluster executors) ---- */

int store_job_exec_set(int64_t id, const char *name, const char *ext_id, struct dd_err *err)
{
	sqlite3_stmt *st;
	if (!name || !ext_id || !*ext_id) {
		st = db_prep("DELETE FROM job_executor WHERE job_id=?1", err);
		if (!st)
			return db_err_code(err);
		sqlite3_bind_int64(st, 1, id);
		return db_step_done(st, "forgetting a job's executor", err);
	}
	st = db_prep("INSERT OR REPLACE INTO job_executor(job_id,name,ext_id) VALUES(?1,?2,?3)", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, ext_id, -1, SQLITE_TRANSIENT);
	return db_step_done(st, "saving a job's executor", err);
}

int store_job_exec_state(int64_t id, const char *state, const char *reason, int position, int restarts,
			 struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE job_executor SET state=?2, reason=?3, position=?4, restarts=?5 WHERE job_id=?1",
				err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, state ? state : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, reason ? reason : "", -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 4, position);
	sqlite3_bind_int(st, 5, restarts);
	return db_step_done(st, "saving a job's executor state", err);
}

int store_job_exec_get(int64_t id, char *name, size_t name_len, char *ext_id, size_t ext_len)
{
	sqlite3_stmt *st = db_prep("SELECT name,ext_id FROM job_executor WHERE job_id=?1", NULL);
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, id);
	int found = sqlite3_step(st) == SQLITE_ROW;
	if (found) {
		snprintf(name, name_len, "%s", (const char *)sqlite3_column_text(st, 0));
		snprintf(ext_id, ext_len, "%s", (const char *)sqlite3_column_text(st, 1));
	}
	db_release(st);
	return found ? 0 : -1;
}

void store_job_exec_json(int64_t id, cJSON *job)
{
	sqlite3_stmt *st = db_prep("SELECT name,ext_id,state,reason,position,restarts FROM job_executor WHERE job_id=?1",
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
	db_release(st);
}

/* ---- the fair queue and quotas ---- */

int store_jobs_queue(struct job_row **rows, int *n, struct dd_err *err)
{
	*rows = NULL;
	*n = 0;
	sqlite3_stmt *st = db_prep("SELECT " ROW_COLS " FROM jobs WHERE state='queued' ORDER BY priority DESC, id", err);
	if (!st)
		return db_err_code(err);
	return collect_rows(st, rows, n, "listing the queue", err);
}

int store_job_set_priority(int64_t id, int priority, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE jobs SET priority=?2 WHERE id=?1 AND state='queued'", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int(st, 2, priority);
	}
	int rc = db_step_one(st, "changing a job's priority", "job", id, err);
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
	int64_t v;
	int rc = db_count("SELECT coalesce(max(priority),0) FROM jobs WHERE state='queued'", &v, err);
	*max = (int)v;
	return rc;
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
	sqlite3_stmt *st = db_prep("SELECT u.role,q.jobs,q.cpu_minutes,q.gpu_minutes,q.disk_bytes,q.memory_bytes FROM users u"
				" LEFT JOIN quotas q ON q.user_id=u.id WHERE u.id=?", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, user_id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		store_quota_default((const char *)sqlite3_column_text(st, 0), q);
		int64_t *f[] = { &q->jobs, &q->cpu_minutes, &q->gpu_minutes, &q->disk_bytes, &q->memory_bytes };
		for (int i = 0; i < 5; i++)
			if (sqlite3_column_type(st, 1 + i) != SQLITE_NULL)
				*f[i] = sqlite3_column_int64(st, 1 + i);
	}
	db_release(st);
	if (rc == SQLITE_DONE)
		return DD_OK; /* a removed account: its jobs have no limit */
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, "reading a quota");
}

int store_quota_set(int64_t user_id, const struct store_quota *q, struct dd_err *err)
{
	int rc = db_exec("BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	sqlite3_stmt *st = db_prep("INSERT OR IGNORE INTO quotas(user_id) SELECT id FROM users WHERE id=?", err);
	if (!st) {
		rc = db_err_code(err);
		goto fail;
	}
	sqlite3_bind_int64(st, 1, user_id);
	if ((rc = db_step_done(st, "making a quota", err)))
		goto fail;
	st = db_prep("UPDATE quotas SET jobs=CASE ?2 WHEN -2 THEN jobs WHEN -1 THEN NULL ELSE ?2 END,"
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
	if ((rc = db_step_one(st, "changing a quota", "user", user_id, err)))
		goto fail;
	return db_exec("COMMIT", err);
fail:
	db_exec("ROLLBACK", NULL);
	return rc;
}

int store_usage(int64_t user_id, int64_t since_ms, struct store_usage *u, struct dd_err *err)
{
	memset(u, 0, sizeof *u);
	int64_t now = fs_now_ms();
	/* slot-milliseconds and GPU-milliseconds of the runs that overlap [since, now] */
	sqlite3_stmt *st = db_prep(
		"SELECT coalesce(sum((coalesce(finished_at,?3) - max(started_at,?2))"
		"   * coalesce(json_extract(resources,'$.cpu_slots'),1)),0),"
		" coalesce(sum((coalesce(finished_at,?3) - max(started_at,?2)) * gpus_held),0),"
		" (SELECT count(*) FROM jobs WHERE owner_id=?1 AND state='running'),"
		" (SELECT count(*) FROM jobs WHERE owner_id=?1 AND state='queued')"
		" FROM jobs WHERE owner_id=?1 AND started_at IS NOT NULL AND coalesce(finished_at,?3) > ?2",
		err);
	if (!st)
		return db_err_code(err);
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
	db_release(st);
	return rc == SQLITE_ROW ? DD_OK : db_fail(err, "reading a user's usage");
}

int store_job_ids_of(int64_t user_id, int64_t **ids, int *n, struct dd_err *err)
{
	*ids = NULL;
	*n = 0;
	sqlite3_stmt *st = db_prep("SELECT id FROM jobs WHERE owner_id=? ORDER BY id", err);
	if (!st)
		return db_err_code(err);
	sqlite3_bind_int64(st, 1, user_id);
	void *items = NULL;
	int rc = db_collect(st, &items, n, sizeof **ids, db_fill_int64, "listing a user's jobs", err);
	*ids = items;
	return rc;
}

int store_jobs_by_state(cJSON **out, struct dd_err *err)
{
	*out = NULL;
	sqlite3_stmt *st = db_prep("SELECT state,count(*) FROM jobs GROUP BY state", err);
	if (!st)
		return db_err_code(err);
	cJSON *o = cJSON_CreateObject();
	while (o && sqlite3_step(st) == SQLITE_ROW)
		cJSON_AddNumberToObject(o, (const char *)sqlite3_column_text(st, 0), sqlite3_column_double(st, 1));
	db_release(st);
	if (!o)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	*out = o;
	return DD_OK;
}

int64_t store_owner_last_start(int64_t owner_id)
{
	sqlite3_stmt *st = db_prep("SELECT coalesce(max(started_at),0) FROM jobs WHERE coalesce(owner_id,0)=?", NULL);
	if (!st)
		return 0;
	sqlite3_bind_int64(st, 1, owner_id);
	int64_t at = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	db_release(st);
	return at;
}

void store_queue_waits(double *oldest_s, double *sum_s, double *count)
{
	*oldest_s = *sum_s = *count = 0;
	sqlite3_stmt *st = db_prep("SELECT (SELECT coalesce(?1 - min(created_at),0) FROM jobs WHERE state='queued'),"
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
	db_release(st);
}

int store_job_set_gpus_held(int64_t id, int n, struct dd_err *err)
{
	sqlite3_stmt *st = db_prep("UPDATE jobs SET gpus_held=?2 WHERE id=?1", err);
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int(st, 2, n);
	}
	return db_step_one(st, "recording a job's GPUs", "job", id, err);
}

