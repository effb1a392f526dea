/* api_jobs.c — /api/v1/jobs: list, create, read, rename, delete, abort, clone, and
 * page through a job's event log.  The body's shape is checked here; everything a
 * job of its kind must obey (with the caller: the jobs it names, server paths,
 * uploads, who may submit it) is sched_validate's, the same for every route. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../jobs/events.h"
#include "../../jobs/job.h"
#include "../../jobs/kind_check.h"
#include "../../jobs/sched.h"
#include "api.h"
#include "../http/perm.h"
#include "../http/server.h"
#include "../../store/store.h"

#define NAME_MAX_LEN 200
#define NOTES_MAX_LEN 20000
#define MAX_PARENTS 64

/* {"job": detail} with the last log lines, as every single-job route answers. */
static int reply_job(struct req *r, int status, int64_t id)
{
	struct dd_err err = { 0 };
	cJSON *job = NULL;
	if (store_job_json(id, 1, &job, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	char dir[PATH_MAX];
	sched_job_dir(id, dir, sizeof dir);
	events_last_logs(dir, 20, cJSON_AddArrayToObject(job, "log_tail"));
	/* where a queued job stands and why it waits: on GET, the answer that is read again */
	const char *state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(job, "state"));
	cJSON *queue = strcmp(r->ri->request_method, "GET") == 0 && state && strcmp(state, "queued") == 0
			       ? sched_queue_json(id) : NULL;
	if (queue)
		cJSON_AddItemToObject(job, "queue", queue);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "job", job);
	return http_json(r->c, status, body);
}

int api_jobs_list(struct req *r)
{
	char kind[64], state[32];
	int has_kind = http_query(r->ri, "kind", kind, sizeof kind);
	int has_state = http_query(r->ri, "state", state, sizeof state);
	enum job_state s;
	if (has_state && job_state_parse(state, &s) != 0)
		return http_error(r->c, 400, "invalid",
				  "state: must be one of queued, running, done, error, aborted, interrupted");
	long long limit, offset;
	int rc;
	if ((rc = http_query_int(r->c, "limit", 50, 1, 1000, &limit)) ||
	    (rc = http_query_int(r->c, "offset", 0, 0, INT_MAX, &offset)))
		return rc;
	struct dd_err err = { 0 };
	cJSON *jobs = NULL;
	int total = 0;
	if (store_job_list_for(perm_list_owner(r), has_kind ? kind : NULL, has_state ? state : NULL, (int)limit,
			       (int)offset, &jobs, &total, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "jobs", jobs);
	cJSON_AddNumberToObject(body, "total", total);
	return http_json(r->c, 200, body);
}

/* A string field that may be absent; 0 ok (value in *out, NULL if absent) or the
 * status of the 400 sent. */
static int opt_string(struct req *r, cJSON *obj, const char *key, size_t max, const char **out)
{
	*out = NULL;
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return http_error(r->c, 400, "invalid", "%s: must be a string", key);
	if (strlen(v->valuestring) > max)
		return http_error(r->c, 400, "invalid", "%s: longer than %zu characters", key, max);
	*out = v->valuestring;
	return 0;
}

static int is_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 9007199254740991.0 &&
	       v->valuedouble == (double)(int64_t)v->valuedouble;
}

int api_jobs_create(struct req *r)
{
	static const char *const fields[] = { "kind", "name", "params", "parents", "resources", NULL };
	static const char *const res_fields[] = { "cpu_slots", NULL };
	cJSON *body = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	int64_t parents[MAX_PARENTS];
	int np = 0, slots = 0;
	const char *name = NULL;
	cJSON *kind = cJSON_GetObjectItemCaseSensitive(body, "kind");
	cJSON *params = cJSON_GetObjectItemCaseSensitive(body, "params");
	cJSON *par = cJSON_GetObjectItemCaseSensitive(body, "parents");
	cJSON *res = cJSON_GetObjectItemCaseSensitive(body, "resources");
	if ((rc = http_only_fields(r->c, body, fields, "")))
		goto out;
	if (!cJSON_IsString(kind)) {
		rc = http_error(r->c, 400, "invalid", "kind: required, a string");
		goto out;
	}
	if ((rc = opt_string(r, body, "name", NAME_MAX_LEN, &name)))
		goto out;
	if (params && !cJSON_IsObject(params)) {
		rc = http_error(r->c, 400, "invalid", "params: must be an object");
		goto out;
	}
	if (par) {
		if (!cJSON_IsArray(par) || cJSON_GetArraySize(par) > MAX_PARENTS) {
			rc = http_error(r->c, 400, "invalid", "parents: must be an array of at most %d job ids",
					MAX_PARENTS);
			goto out;
		}
		cJSON *p;
		cJSON_ArrayForEach(p, par)
		{
			if (!is_id(p)) {
				rc = http_error(r->c, 400, "invalid", "parents[%d]: must be a job id", np);
				goto out;
			}
			for (int i = 0; i < np; i++)
				if (parents[i] == (int64_t)p->valuedouble) {
					rc = http_error(r->c, 400, "invalid", "parents: job %lld is listed twice",
							(long long)parents[i]);
					goto out;
				}
			parents[np++] = (int64_t)p->valuedouble;
		}
	}
	if (res) {
		if (!cJSON_IsObject(res)) {
			rc = http_error(r->c, 400, "invalid", "resources: must be an object");
			goto out;
		}
		if ((rc = http_only_fields(r->c, res, res_fields, "resources.")))
			goto out;
		cJSON *s = cJSON_GetObjectItemCaseSensitive(res, "cpu_slots");
		if (s && (!is_id(s) || s->valuedouble > 1024)) {
			rc = http_error(r->c, 400, "invalid", "resources.cpu_slots: must be an integer from 1 to 1024");
			goto out;
		}
		slots = s ? s->valueint : 0;
	}
	cJSON *p = params ? params : cJSON_AddObjectToObject(body, "params");
	struct dd_err err = { 0 };
	int64_t id;
	/* every rule of the kind, with the caller, as the dedicated routes pass them
	 * (sched_validate): this route is no way around any of them */
	struct perm_caller pc;
	perm_caller(r, &pc);
	if (sched_submit(kind->valuestring, name, &pc.c, p, slots, parents, np, &id, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	rc = reply_job(r, 202, id);
out:
	cJSON_Delete(body);
	return rc;
}

int api_job_get(struct req *r) { return reply_job(r, 200, r->id); }

int api_job_patch(struct req *r)
{
	static const char *const fields[] = { "name", "notes", NULL };
	cJSON *body = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	const char *name, *notes;
	if ((rc = http_only_fields(r->c, body, fields, "")) ||
	    (rc = opt_string(r, body, "name", NAME_MAX_LEN, &name)) ||
	    (rc = opt_string(r, body, "notes", NOTES_MAX_LEN, &notes)))
		goto out;
	if (name && !*name) {
		rc = http_error(r->c, 400, "invalid", "name: must not be empty");
		goto out;
	}
	struct dd_err err = { 0 };
	if (store_job_patch(r->id, name, notes, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	sched_job_changed(r->id);
	rc = reply_job(r, 200, r->id);
out:
	cJSON_Delete(body);
	return rc;
}

int api_job_delete(struct req *r)
{
	struct dd_err err = { 0 };
	if (sched_delete(r->id, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	perm_audit_job(r, "job_delete", r->id);
	return http_no_content(r->c);
}

int api_job_abort(struct req *r)
{
	struct dd_err err = { 0 };
	if (sched_abort(r->id, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	return reply_job(r, 202, r->id);
}

int api_job_clone(struct req *r)
{
	struct dd_err err = { 0 };
	int64_t id;
	struct perm_caller owner; /* the clone is the owner's: checked as the owner, now */
	if (perm_caller_owner(r, r->id, &owner, &err) != DD_OK || sched_clone(r->id, &owner.c, &id, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	return reply_job(r, 202, id);
}

int api_job_events(struct req *r)
{
	long long after, limit;
	int rc;
	if ((rc = http_query_int(r->c, "after", 0, 0, LLONG_MAX, &after)) ||
	    (rc = http_query_int(r->c, "limit", 500, 1, 5000, &limit)))
		return rc;
	struct dd_err err = { 0 };
	struct job_row row;
	if (store_job_row(r->id, &row, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	char dir[PATH_MAX];
	sched_job_dir(r->id, dir, sizeof dir);
	cJSON *body = cJSON_CreateObject();
	cJSON *events = cJSON_AddArrayToObject(body, "events");
	int64_t last;
	int more;
	if (events_read_page(dir, after, (int)limit, events, &last, &more, &err) != DD_OK) {
		cJSON_Delete(body);
		return http_error_dd(r->c, &err);
	}
	cJSON_AddNumberToObject(body, "last", (double)last);
	cJSON_AddBoolToObject(body, "more", more);
	return http_json(r->c, 200, body);
}

/* GET /api/v1/ws without an Upgrade: the WebSocket handler takes upgrades, this
 * route answers everything else. */
int api_ws_plain(struct req *r)
{
	return http_error(r->c, 400, "invalid",
			  "/api/v1/ws is a WebSocket: connect with an \"Upgrade: websocket\" request");
}

int api_jobs_page(struct req *r, const char *kind, const char *key, void (*add)(struct req *r, cJSON *job))
{
	struct dd_err err = { 0 };
	long long limit, offset;
	int rc;
	if ((rc = http_query_int(r->c, "limit", 100, 1, 1000, &limit)) ||
	    (rc = http_query_int(r->c, "offset", 0, 0, INT_MAX, &offset)))
		return rc;
	cJSON *jobs = NULL;
	int total = 0;
	if (store_job_list_for(perm_list_owner(r), kind, NULL, (int)limit, (int)offset, &jobs, &total, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *j;
	cJSON_ArrayForEach(j, jobs)
		add(r, j);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, key, jobs);
	cJSON_AddNumberToObject(body, "total", total);
	return http_json(r->c, 200, body);
}

int api_job_json(struct req *r, cJSON **job)
{
	struct dd_err err = { 0 };
	*job = NULL;
	return store_job_json(r->id, 1, job, &err) != DD_OK ? http_error_dd(r->c, &err) : 0;
}

int api_job_row(struct req *r, const char *kind, struct job_row *row)
{
	struct dd_err err = { 0 };
	if (store_job_row(r->id, row, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	if (strcmp(row->kind, kind) != 0)
		return http_error(r->c, 404, "not_found", "job %lld is not %s %s", (long long)r->id,
				  strchr("aeiou", kind[0]) ? "an" : "a", kind);
	return 0;
}

int api_job_of_kind(struct req *r, int64_t id, const char *kind, const char *field, struct job_row *row)
{
	struct dd_err err = { 0 };
	struct perm_caller pc;
	perm_caller(r, &pc);
	int rc = kind_use_job(&pc.c, NULL, id, kind, field, NULL, NULL, 0, &err);
	if (rc == DD_OK)
		rc = store_job_row(id, row, &err);
	return rc ? http_error_dd(r->c, &err) : 0;
}
