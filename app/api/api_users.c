/* api_users.c — the admin's user routes (/api/v1/users…) and the queue's
 * reordering (/api/v1/jobs/{id}/priority).
 *
 * Users: list with each one's quota and usage, add, change (role, disabled,
 * quota), remove; admins only (perm.c), and every change that matters (a new
 * account, a role, disabling, a quota, a removal) leaves an audit row.  Quota
 * fields: "jobs" (running at once), "cpu_minutes" and "gpu_minutes" (per UTC
 * day), "disk_bytes" (the user's job folders), "memory_bytes" (one job's memory,
 * within the server's --job-memory-max); 0 is no limit, null goes back to the
 * role's default. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "../../common/fsutil.h"
#include "../../jobs/sched.h"
#include "api.h"
#include "../accounts/auth.h"
#include "../../store/store.h"

static const char *const quota_fields[] = { "jobs", "cpu_minutes", "gpu_minutes", "disk_bytes", "memory_bytes",
					     NULL };

/* {"jobs",…} of a quota; caller frees. */
static cJSON *quota_json(const struct store_quota *q)
{
	cJSON *o = cJSON_CreateObject();
	const int64_t v[] = { q->jobs, q->cpu_minutes, q->gpu_minutes, q->disk_bytes, q->memory_bytes };
	for (int i = 0; o && quota_fields[i]; i++)
		cJSON_AddNumberToObject(o, quota_fields[i], (double)v[i]);
	return o;
}

/* Add "quota" and "usage" to a user object with "id". */
void api_users_add_quota_usage(cJSON *u)
{
	int64_t id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "id"));
	struct store_quota q;
	struct store_usage us;
	if (store_quota_get(id, &q, NULL) == DD_OK)
		cJSON_AddItemToObject(u, "quota", quota_json(&q));
	int64_t now = fs_now_ms();
	if (store_usage(id, now - now % 86400000, &us, NULL) == DD_OK) {
		cJSON *o = cJSON_AddObjectToObject(u, "usage");
		uint64_t disk = 0;
		sched_owner_disk(id, &disk);
		cJSON_AddNumberToObject(o, "running", us.running);
		cJSON_AddNumberToObject(o, "queued", us.queued);
		cJSON_AddNumberToObject(o, "cpu_minutes", us.cpu_minutes);
		cJSON_AddNumberToObject(o, "gpu_minutes", us.gpu_minutes);
		cJSON_AddNumberToObject(o, "disk_bytes", (double)disk);
	}
}

/* {"user": …} of user id with its quota and usage. */
static int reply_user(struct req *r, int status, int64_t id)
{
	struct auth_user u;
	struct dd_err err = { 0 };
	if (auth_user_get(id, &u, NULL, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *all = NULL;
	cJSON *one = NULL;
	if (auth_user_list(&all, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(all, "users"))
	{
		if ((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(it, "id")) == id) {
			one = cJSON_Duplicate(it, 1);
			break;
		}
	}
	cJSON_Delete(all);
	if (!one)
		return http_error(r->c, 404, "not_found", "user %lld does not exist", (long long)id);
	api_users_add_quota_usage(one);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "user", one);
	return http_json(r->c, status, body);
}

int api_users_list(struct req *r)
{
	struct dd_err err = { 0 };
	cJSON *o = NULL;
	if (auth_user_list(&o, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "users"))
		api_users_add_quota_usage(it);
	return http_json(r->c, 200, o);
}

/* The quota object of a body into q (-2: not given, -1: null, back to the
 * role's default); 0, or the status of the 400 sent. */
static int read_quota(struct req *r, const cJSON *o, struct store_quota *q)
{
	*q = (struct store_quota){ -2, -2, -2, -2, -2 };
	if (!o)
		return 0;
	if (!cJSON_IsObject(o))
		return http_error(r->c, 400, "invalid", "quota: must be an object of %s, %s, %s, %s and %s",
				  quota_fields[0], quota_fields[1], quota_fields[2], quota_fields[3], quota_fields[4]);
	int rc = http_only_fields(r->c, o, quota_fields, "quota.");
	if (rc)
		return rc;
	int64_t *f[] = { &q->jobs, &q->cpu_minutes, &q->gpu_minutes, &q->disk_bytes, &q->memory_bytes };
	for (int i = 0; quota_fields[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, quota_fields[i]);
		if (!v)
			continue;
		if (cJSON_IsNull(v)) {
			*f[i] = -1;
			continue;
		}
		if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9e15 ||
		    v->valuedouble != (double)(int64_t)v->valuedouble)
			return http_error(r->c, 400, "invalid",
					  "quota.%s: must be a whole number from 0 (0: no limit), or null for the role's default",
					  quota_fields[i]);
		*f[i] = (int64_t)v->valuedouble;
	}
	return 0;
}

/* "quota {…}" for the audit log. */
static void quota_target(const char *name, const struct store_quota *q, char *buf, size_t len)
{
	snprintf(buf, len,
		 "%s: jobs %lld, cpu_minutes %lld, gpu_minutes %lld, disk_bytes %lld, memory_bytes %lld (-2 kept, -1 "
		 "default)",
		 name, (long long)q->jobs, (long long)q->cpu_minutes, (long long)q->gpu_minutes,
		 (long long)q->disk_bytes, (long long)q->memory_bytes);
}

int api_users_create(struct req *r)
{
	static const char *const fields[] = { "name", "role", "password", "quota", NULL };
	cJSON *body = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "name"));
	const char *pw = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "password"));
	const cJSON *role_j = cJSON_GetObjectItemCaseSensitive(body, "role");
	enum auth_role role = ROLE_LEARNER;
	struct store_quota q;
	struct dd_err err = { 0 };
	if (!name) {
		rc = http_error(r->c, 400, "invalid", "name: required, a string");
		goto out;
	}
	if (!pw) {
		rc = http_error(r->c, 400, "invalid", "password: required, a string of %d characters or more",
				AUTH_PASSWORD_MIN);
		goto out;
	}
	if (role_j && (!cJSON_IsString(role_j) || auth_role_parse(role_j->valuestring, &role) != 0)) {
		rc = http_error(r->c, 400, "invalid", "role: must be \"learner\", \"instructor\" or \"admin\"");
		goto out;
	}
	if ((rc = read_quota(r, cJSON_GetObjectItemCaseSensitive(body, "quota"), &q)))
		goto out;
	int64_t id = 0;
	if (auth_name_check(name, &err) != DD_OK || auth_password_check(pw, &err) != DD_OK ||
	    auth_user_add(name, role, pw, &id, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	char target[128];
	snprintf(target, sizeof target, "%s as %s", name, auth_role_name(role));
	auth_audit(&r->auth->user, "user_add", target, r->auth->address);
	if (q.jobs != -2 || q.cpu_minutes != -2 || q.gpu_minutes != -2 || q.disk_bytes != -2 ||
	    q.memory_bytes != -2) {
		if (store_quota_set(id, &q, &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		char t[256];
		quota_target(name, &q, t, sizeof t);
		auth_audit(&r->auth->user, "user_quota", t, r->auth->address);
	}
	rc = reply_user(r, 201, id);
out:
	cJSON_Delete(body);
	return rc;
}

int api_user_patch(struct req *r)
{
	static const char *const fields[] = { "role", "disabled", "quota", "password", NULL };
	cJSON *body = NULL;
	struct auth_user u;
	struct dd_err err = { 0 };
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	if (auth_user_get(r->id, &u, NULL, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	const cJSON *role_j = cJSON_GetObjectItemCaseSensitive(body, "role");
	const cJSON *dis = cJSON_GetObjectItemCaseSensitive(body, "disabled");
	const cJSON *pw = cJSON_GetObjectItemCaseSensitive(body, "password");
	enum auth_role role = u.role;
	struct store_quota q;
	if (role_j && (!cJSON_IsString(role_j) || auth_role_parse(role_j->valuestring, &role) != 0)) {
		rc = http_error(r->c, 400, "invalid", "role: must be \"learner\", \"instructor\" or \"admin\"");
		goto out;
	}
	if (dis && !cJSON_IsBool(dis)) {
		rc = http_error(r->c, 400, "invalid", "disabled: must be true or false");
		goto out;
	}
	if ((rc = read_quota(r, cJSON_GetObjectItemCaseSensitive(body, "quota"), &q)))
		goto out;
	if (pw && (!cJSON_IsString(pw) || strlen(pw->valuestring) > AUTH_PASSWORD_MAX)) {
		rc = http_error(r->c, 400, "invalid", "password: must be a string of %d to %d characters",
				AUTH_PASSWORD_MIN, AUTH_PASSWORD_MAX);
		goto out;
	}
	if (pw && auth_password_check(pw->valuestring, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	/* one's own password changes at /me/password, which asks for the current one */
	if (pw && r->auth->accounts && r->auth->user.id == u.id) {
		rc = http_error(r->c, 409, "conflict", "password: change your own password at /api/v1/me/password");
		goto out;
	}
	/* an admin cannot lock themselves out: the last way back would be the CLI */
	if (r->auth->accounts && r->auth->user.id == u.id &&
	    ((role_j && role != ROLE_ADMIN) || cJSON_IsTrue(dis))) {
		rc = http_error(r->c, 409, "conflict", "you cannot demote or disable your own account (%s)", u.name);
		goto out;
	}
	char target[160];
	if (role_j && role != u.role) {
		if (auth_user_set_role(u.id, role, &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		snprintf(target, sizeof target, "%s: %s -> %s", u.name, auth_role_name(u.role), auth_role_name(role));
		auth_audit(&r->auth->user, "role_change", target, r->auth->address);
	}
	if (dis) {
		if (store_user_set_disabled(u.id, cJSON_IsTrue(dis), &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		auth_audit(&r->auth->user, cJSON_IsTrue(dis) ? "user_disable" : "user_enable", u.name,
			   r->auth->address);
	}
	if (q.jobs != -2 || q.cpu_minutes != -2 || q.gpu_minutes != -2 || q.disk_bytes != -2 ||
	    q.memory_bytes != -2) {
		if (store_quota_set(u.id, &q, &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		char t[256];
		quota_target(u.name, &q, t, sizeof t);
		auth_audit(&r->auth->user, "user_quota", t, r->auth->address);
	}
	if (pw) { /* a reset: every session of the user ends; their API tokens stay */
		if (auth_user_set_password(u.id, pw->valuestring, 0, 1, &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		auth_audit(&r->auth->user, "password_reset", u.name, r->auth->address);
	}
	rc = reply_user(r, 200, u.id);
out:
	cJSON_Delete(body);
	return rc;
}

int api_user_delete(struct req *r)
{
	struct auth_user u;
	struct dd_err err = { 0 };
	if (auth_user_get(r->id, &u, NULL, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	if (r->auth->accounts && r->auth->user.id == u.id)
		return http_error(r->c, 409, "conflict", "you cannot remove your own account (%s)", u.name);
	if (auth_user_remove(u.id, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	auth_audit(&r->auth->user, "user_remove", u.name, r->auth->address);
	return http_no_content(r->c);
}

int api_job_priority(struct req *r)
{
	static const char *const fields[] = { "priority", "front", NULL };
	if (r->auth->accounts && r->auth->user.role == ROLE_LEARNER)
		return http_error(r->c, 403, "forbidden", "reordering the queue is for instructors and admins");
	cJSON *body = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	struct dd_err err = { 0 };
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "priority");
	const cJSON *front = cJSON_GetObjectItemCaseSensitive(body, "front");
	if (!!p == !!cJSON_IsTrue(front)) {
		rc = http_error(r->c, 400, "invalid", "give either \"priority\" (a whole number) or \"front\": true");
		goto out;
	}
	if (p && (!cJSON_IsNumber(p) || p->valuedouble != (int)p->valuedouble || p->valueint < -1000000 ||
		  p->valueint > 1000000)) {
		rc = http_error(r->c, 400, "invalid", "priority: a whole number from -1000000 to 1000000 (higher first)");
		goto out;
	}
	if ((p ? sched_set_priority(r->id, p->valueint, &err) : sched_move_to_front(r->id, &err)) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	char target[64];
	snprintf(target, sizeof target, "job %lld", (long long)r->id);
	auth_audit(&r->auth->user, "job_priority", target, r->auth->address);
	cJSON *o = cJSON_CreateObject();
	cJSON *q = sched_queue_json(r->id);
	cJSON_AddItemToObject(o, "queue", q ? q : cJSON_CreateNull());
	rc = http_json(r->c, 200, o);
out:
	cJSON_Delete(body);
	return rc;
}
