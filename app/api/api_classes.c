/* api_classes.c — classes, rosters, shared datasets, lab presets and the
 * instructor's dashboard (issue 8).
 *
 * A class belongs to the instructor who made it.  Its members are accounts;
 * a roster (CSV, roster.h) makes the missing ones with generated passwords,
 * answered once and never stored in clear, and adds everyone, all or nothing.
 * A dataset shared with a class is read-only for its members and usable for
 * training (perm.c).  A lab preset is a model's settings (the body of POST
 * /api/v1/models without its name) with some fields locked (a learner may not
 * change them) or hidden (locked, and not shown to learners); a learner makes a
 * model from one with {"preset": ID, "name": …} plus unlocked fields
 * (api_preset_apply, called by api_models_create).
 *
 * Who may call what is in the route table (api.h): PERM_CLASS_READ for a
 * class's members and instructor, PERM_CLASS_WRITE for its instructor and
 * admins. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../jobs/events.h"
#include "../../jobs/job.h"
#include "../../jobs/kind_train.h"
#include "../../jobs/sched.h"
#include "api.h"
#include "../accounts/auth.h"
#include "../http/perm.h"
#include "../accounts/roster.h"
#include "../../store/store.h"

#define CLASS_NAME_MAX 100
#define ROSTER_PASSWORD_LEN 16 /* of base64url: 96 random bits */


/* The account r acts as: 0 with accounts off (the local user). */
static int64_t me(const struct req *r)
{
	return r->auth && r->auth->accounts && r->auth->authenticated ? r->auth->user.id : 0;
}

/* May r see the whole of a preset (its hidden values): its class's instructor
 * or an admin. */
static int sees_hidden(const struct req *r, int64_t class_id)
{
	return perm_class_writable(r, class_id);
}

/* Drop the values of a preset's hidden fields from its settings. */
static void strip_hidden(cJSON *preset)
{
	cJSON *settings = json_get(preset, "settings"), *h;
	cJSON_ArrayForEach(h, json_get(preset, "hidden"))
	{
		const char *f = cJSON_GetStringValue(h);
		if (!f)
			continue;
		if (strncmp(f, "solver.", 7) == 0)
			cJSON_DeleteItemFromObjectCaseSensitive(json_get(settings, "solver"), f + 7);
		else
			cJSON_DeleteItemFromObjectCaseSensitive(settings, f);
	}
}

static int reply_class(struct req *r, int status, int64_t id)
{
	struct dd_err err = { 0 };
	cJSON *c = NULL;
	if (store_class_json(id, &c, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "class", c);
	return http_json(r->c, status, out);
}

static void audit_class(const struct req *r, const char *action, int64_t id)
{
	char target[48];
	snprintf(target, sizeof target, "class %lld", (long long)id);
	auth_audit(r->auth ? &r->auth->user : NULL, action, target, r->auth ? r->auth->address : NULL);
}

/* Read a body of {"name"} alone (api_classes_create, api_class_member_add): 0
 * with *name its string (NULL when absent or not a string) and *body for the
 * caller to free, or the status of the error sent. */
static int read_name_body(struct req *r, cJSON **body, const char **name)
{
	static const char *const fields[] = { "name", NULL };
	int rc = http_read_fields(r->c, fields, body);
	*name = rc ? NULL : cJSON_GetStringValue(json_get(*body, "name"));
	return rc;
}

/* Answer a change to class r->id that a store function returned rc for (err
 * its error): the audit row for action, then the class with status, or 204
 * when status is 204. */
static int class_changed(struct req *r, int rc, const struct dd_err *err, const char *action, int status)
{
	if (rc != DD_OK)
		return http_error_dd(r->c, err);
	audit_class(r, action, r->id);
	return status == 204 ? http_no_content(r->c) : reply_class(r, status, r->id);
}

/* GET /api/v1/classes: the classes one instructs or is in (admins: all). */
int api_classes_list(struct req *r)
{
	struct dd_err err = { 0 };
	cJSON *arr = NULL;
	int64_t who = perm_list_owner(r);
	if (store_class_list(who, &arr, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "classes", arr);
	return http_json(r->c, 200, out);
}

/* POST /api/v1/classes {"name"} -> 201 {"class"} */
int api_classes_create(struct req *r)
{
	cJSON *body = NULL;
	const char *name;
	int rc = read_name_body(r, &body, &name);
	if (rc)
		return rc;
	if (!name || !*name || strlen(name) > CLASS_NAME_MAX) {
		rc = http_error(r->c, 400, "invalid", "name: required, a string of 1 to %d characters", CLASS_NAME_MAX);
		goto out;
	}
	struct dd_err err = { 0 };
	int64_t id;
	if (store_class_create(name, me(r), &id, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	audit_class(r, "class_create", id);
	rc = reply_class(r, 201, id);
out:
	cJSON_Delete(body);
	return rc;
}

/* GET /api/v1/classes/{id}: the class with its members, datasets and presets. */
int api_class_get(struct req *r)
{
	struct dd_err err = { 0 };
	cJSON *c = NULL, *presets = NULL;
	if (store_class_json(r->id, &c, &err) != DD_OK || store_preset_list(-1, r->id, &presets, &err) != DD_OK) {
		cJSON_Delete(c);
		return http_error_dd(r->c, &err);
	}
	if (!sees_hidden(r, r->id)) {
		cJSON *p;
		cJSON_ArrayForEach(p, presets) strip_hidden(p);
	}
	cJSON_AddItemToObject(c, "presets", presets);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "class", c);
	return http_json(r->c, 200, out);
}

/* DELETE /api/v1/classes/{id}: the class, its memberships, shares and presets;
 * never an account or a job. */
int api_class_delete(struct req *r)
{
	struct dd_err err = { 0 };
	return class_changed(r, store_class_delete(r->id, &err), &err, "class_delete", 204);
}

/* POST /api/v1/classes/{id}/members {"name"} -> 200 {"class"} */
/* May r enrol accounts other than learners?  Admins (and the local user) only:
 * an instructor enrols learners, so that a class never names an admin's or
 * another instructor's account (perm_sees_owner also ignores such members). */
static int enrols_any(const struct req *r)
{
	return !r->auth || !r->auth->accounts || r->auth->user.role == ROLE_ADMIN;
}

int api_class_member_add(struct req *r)
{
	cJSON *body = NULL;
	const char *name;
	int rc = read_name_body(r, &body, &name);
	if (rc)
		return rc;
	struct auth_user u;
	struct dd_err err = { 0 };
	if (!name || !*name) {
		rc = http_error(r->c, 400, "invalid", "name: required, the name of an account");
		goto out;
	}
	if (auth_user_find(name, &u, NULL, NULL, &err) != DD_OK) {
		if (err.code == DD_ENOENT)
			rc = http_error(r->c, 400, "invalid", "name: there is no account called \"%.40s\"", name);
		else
			rc = http_error_dd(r->c, &err);
		goto out;
	}
	if (!enrols_any(r) && u.role != ROLE_LEARNER) {
		rc = http_error(r->c, 403, "forbidden", "name: %.40s is an %s; an instructor enrols learners only", name,
				auth_role_name(u.role));
		goto out;
	}
	rc = class_changed(r, store_class_member_add(r->id, u.id, &err), &err, "class_member_add", 200);
out:
	cJSON_Delete(body);
	return rc;
}

/* DELETE /api/v1/classes/{id}/members/{n}: n is the user's id. */
int api_class_member_remove(struct req *r)
{
	struct dd_err err = { 0 };
	return class_changed(r, store_class_member_remove(r->id, r->n, &err), &err, "class_member_remove", 204);
}

/* POST /api/v1/classes/{id}/roster {"csv": "name[,role]\n…"}
 * -> 201 {"created":[{id,name,role,password}],"added":[{id,name,role}],"class"}
 * The passwords are in this answer only: the store keeps their Argon2id hash. */
int api_class_roster(struct req *r)
{
	static const char *const fields[] = { "csv", NULL };
	cJSON *body = NULL, *out = NULL;
	struct roster_line *lines = NULL;
	struct store_roster_entry *e = NULL;
	char (*hashes)[AUTH_HASH_LEN] = NULL;
	char (*passwords)[AUTH_TOKEN_LEN + 1] = NULL;
	int n = 0;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	const char *csv = cJSON_GetStringValue(json_get(body, "csv"));
	if (!csv) {
		rc = http_error(r->c, 400, "invalid", "csv: required, the roster as text (one account a line: name[,role])");
		goto out;
	}
	struct dd_err err = { 0 };
	if (roster_parse(csv, strlen(csv), &lines, &n, &err) != DD_OK) {
		dd_err_prefix(&err, "csv");
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	e = calloc((size_t)n, sizeof *e);
	hashes = calloc((size_t)n, sizeof *hashes);
	passwords = calloc((size_t)n, sizeof *passwords);
	if (!e || !hashes || !passwords) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	/* an instructor's roster enrols learners only: every line that names or
	 * makes another role is refused, all of them named, and nothing is done */
	char why[1024] = "";
	for (int i = 0; i < n && !enrols_any(r); i++) {
		struct auth_user u;
		size_t l = strlen(why);
		if (auth_user_find(lines[i].name, &u, NULL, NULL, NULL) == DD_OK) {
			if (u.role != ROLE_LEARNER)
				snprintf(why + l, sizeof why - l, "%sline %d: %s is an %s; an instructor enrols learners only",
					 l ? "; " : "", lines[i].line, lines[i].name, auth_role_name(u.role));
		} else if (lines[i].role != ROLE_LEARNER) {
			snprintf(why + l, sizeof why - l, "%sline %d: role: only an admin's roster makes %ss", l ? "; " : "",
				 lines[i].line, auth_role_name(lines[i].role));
		}
	}
	if (why[0]) {
		rc = http_error(r->c, 403, "forbidden", "csv: %s", why);
		goto out;
	}
	/* the existing accounts are only added; the others get a password, hashed
	 * before the one transaction that makes them all */
	for (int i = 0; i < n; i++) {
		struct auth_user u;
		e[i].line = lines[i].line;
		e[i].name = lines[i].name;
		e[i].role = auth_role_name(lines[i].role);
		if (auth_user_find(lines[i].name, &u, NULL, NULL, &err) == DD_OK) {
			e[i].user_id = u.id;
			continue;
		}
		if (err.code != DD_ENOENT) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		auth_token_new(passwords[i]);
		passwords[i][ROSTER_PASSWORD_LEN] = 0;
		if (auth_password_hash(passwords[i], hashes[i], &err) != DD_OK) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		e[i].pwhash = hashes[i];
	}
	if (store_class_roster(r->id, e, n, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	out = cJSON_CreateObject();
	cJSON *created = cJSON_AddArrayToObject(out, "created"), *added = cJSON_AddArrayToObject(out, "added");
	for (int i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "id", (double)e[i].user_id);
		cJSON_AddStringToObject(o, "name", e[i].name);
		if (e[i].pwhash) {
			cJSON_AddStringToObject(o, "role", e[i].role);
			cJSON_AddStringToObject(o, "password", passwords[i]);
			cJSON_AddItemToArray(created, o);
			char target[64];
			snprintf(target, sizeof target, "user %s", e[i].name);
			auth_audit(r->auth ? &r->auth->user : NULL, "user_add", target, r->auth ? r->auth->address : NULL);
		} else {
			struct auth_user u;
			cJSON_AddStringToObject(o, "role", auth_user_get(e[i].user_id, &u, NULL, NULL) == DD_OK
								   ? auth_role_name(u.role)
								   : e[i].role);
			cJSON_AddItemToArray(added, o);
		}
	}
	cJSON *c = NULL;
	if (store_class_json(r->id, &c, &err) == DD_OK)
		cJSON_AddItemToObject(out, "class", c);
	audit_class(r, "class_roster", r->id);
	rc = http_json(r->c, 201, out);
	out = NULL;
out:
	if (passwords)
		memset(passwords, 0, (size_t)n * sizeof *passwords);
	free(passwords);
	free(hashes);
	free(e);
	free(lines);
	cJSON_Delete(out);
	cJSON_Delete(body);
	return rc;
}

/* Job id as a dataset r may share or publish: a dataset job r sees.  0, or the
 * error sent (400 naming field). */
static int shareable_dataset(struct req *r, const cJSON *v, const char *field, int64_t *id)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble != (double)(int64_t)v->valuedouble)
		return http_error(r->c, 400, "invalid", "%s: required, the id of a dataset job", field);
	*id = (int64_t)v->valuedouble;
	struct job_row row;
	return api_job_of_kind(r, *id, "dataset", field, &row);
}

/* POST /api/v1/classes/{id}/datasets {"dataset": ID} -> 200 {"class"} */
int api_class_dataset_add(struct req *r)
{
	static const char *const fields[] = { "dataset", NULL };
	cJSON *body = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	int64_t id = 0;
	struct dd_err err = { 0 };
	if ((rc = shareable_dataset(r, json_get(body, "dataset"), "dataset", &id)))
		goto out;
	rc = class_changed(r, store_class_dataset_add(r->id, id, &err), &err, "class_dataset_share", 200);
out:
	cJSON_Delete(body);
	return rc;
}

/* DELETE /api/v1/classes/{id}/datasets/{n}: stop sharing dataset n (the
 * models made from it stay). */
int api_class_dataset_remove(struct req *r)
{
	struct dd_err err = { 0 };
	return class_changed(r, store_class_dataset_remove(r->id, r->n, &err), &err, "class_dataset_unshare", 204);
}

/* ---- lab presets ---- */

/* The model fields (jobs/kind_train.h) a preset does not set: the learner's
 * group and the scheduler's gpus (as the job's name, which is not the kind's),
 * resume, which only POST /api/v1/models/{id}/resume asks for, and the preset
 * mark, which only api_preset_apply writes. */
static const char *const not_preset[] = { "group", "gpus", "resume", "preset", NULL };

static int in_list(const char *const *list, const char *s)
{
	for (int i = 0; list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

/* May a preset set, lock or hide field f (a top-level name)? */
static int preset_field(const char *f) { return in_list(train_model_fields, f) && !in_list(not_preset, f); }

/* The same for a name in locked or hidden, where "solver.KEY" names one key. */
static int preset_field_known(const char *f)
{
	return preset_field(strncmp(f, "solver.", 7) == 0 && f[7] ? "solver" : f);
}

/* A preset's settings hold model fields a preset sets only; 0 or the error sent. */
static int settings_fields(struct req *r, const cJSON *settings)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, settings)
	{
		if (!preset_field(it->string))
			return http_error(r->c, 400, "invalid", "settings.%s: unknown field", it->string);
	}
	return 0;
}

/* An array of field names (locked or hidden), checked; 0 or the error sent. */
static int field_list(struct req *r, const cJSON *v, const char *what)
{
	if (!v)
		return 0;
	if (!cJSON_IsArray(v))
		return http_error(r->c, 400, "invalid", "%s: an array of field names", what);
	const cJSON *f;
	int i = 0;
	cJSON_ArrayForEach(f, v)
	{
		const char *s = cJSON_GetStringValue(f);
		if (!s || !preset_field_known(s))
			return http_error(r->c, 400, "invalid",
					  "%s[%d]: not a field a preset sets (dataset, network, solver or solver.KEY, epochs, batch_size, …)",
					  what, i);
		i++;
	}
	return 0;
}

/* POST /api/v1/classes/{id}/presets {"name","settings","locked","hidden"}
 * -> 201 {"preset"}.  The settings are checked as a model's would be; the
 * dataset is shared with the class. */
int api_class_preset_create(struct req *r)
{
	static const char *const fields[] = { "name", "settings", "locked", "hidden", NULL };
	cJSON *body = NULL, *check = NULL, *p = NULL;
	char *settings = NULL, *locked = NULL, *hidden = NULL;
	int rc = http_read_fields(r->c, fields, &body);
	if (rc)
		return rc;
	struct dd_err err = { 0 };
	const char *name = cJSON_GetStringValue(json_get(body, "name"));
	cJSON *s = json_get(body, "settings");
	if (!name || !*name || strlen(name) > 200) {
		rc = http_error(r->c, 400, "invalid", "name: required, a string of 1 to 200 characters");
		goto out;
	}
	if (!cJSON_IsObject(s)) {
		rc = http_error(r->c, 400, "invalid", "settings: required, an object with a model's fields (dataset, network, …)");
		goto out;
	}
	if ((rc = settings_fields(r, s)) ||
	    (rc = field_list(r, json_get(body, "locked"), "locked")) || (rc = field_list(r, json_get(body, "hidden"), "hidden")))
		goto out;
	int64_t ds = 0;
	if ((rc = shareable_dataset(r, json_get(s, "dataset"), "settings.dataset", &ds)))
		goto out;
	check = cJSON_Duplicate(s, 1);
	if (!check) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	/* checked as POST /models will check a learner's model made from it (the network
	 * against the dataset too), so that nothing published is refused at Start */
	struct perm_caller pc;
	perm_caller(r, &pc);
	if (sched_validate("model", check, &pc.c, NULL, 0, NULL, &err) != DD_OK) {
		dd_err_prefix(&err, "settings");
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	settings = cJSON_PrintUnformatted(s);
	locked = json_get(body, "locked") ? cJSON_PrintUnformatted(json_get(body, "locked")) : strdup("[]");
	hidden = json_get(body, "hidden") ? cJSON_PrintUnformatted(json_get(body, "hidden")) : strdup("[]");
	int64_t id;
	if (!settings || !locked || !hidden) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	if (store_class_dataset_add(r->id, ds, &err) != DD_OK ||
	    store_preset_add(r->id, name, settings, locked, hidden, &id, &err) != DD_OK ||
	    store_preset_json(id, &p, &err) != DD_OK) {
		rc = http_error_dd(r->c, &err);
		goto out;
	}
	audit_class(r, "class_preset_add", r->id);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "preset", p);
	p = NULL;
	rc = http_json(r->c, 201, o);
out:
	free(settings);
	free(locked);
	free(hidden);
	cJSON_Delete(p);
	cJSON_Delete(check);
	cJSON_Delete(body);
	return rc;
}

/* DELETE /api/v1/classes/{id}/presets/{n} */
int api_class_preset_delete(struct req *r)
{
	struct dd_err err = { 0 };
	return class_changed(r, store_preset_delete(r->id, r->n, &err), &err, "class_preset_delete", 204);
}

static int reply_presets(struct req *r, int64_t who, int64_t class_id)
{
	struct dd_err err = { 0 };
	cJSON *arr = NULL, *p;
	if (store_preset_list(who, class_id, &arr, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	cJSON_ArrayForEach(p, arr)
	{
		if (!sees_hidden(r, (int64_t)cJSON_GetNumberValue(json_get(p, "class_id"))))
			strip_hidden(p);
	}
	cJSON *out = cJSON_CreateObject();
	cJSON_AddItemToObject(out, "presets", arr);
	return http_json(r->c, 200, out);
}

/* GET /api/v1/classes/{id}/presets */
int api_class_presets_list(struct req *r) { return reply_presets(r, -1, r->id); }

/* GET /api/v1/presets: the presets of every class one is in or instructs
 * (admins: all). */
int api_presets_list(struct req *r) { return reply_presets(r, perm_list_owner(r), 0); }

/* Is field (a top-level name, or "solver.KEY") in the array list? */
static int listed(const cJSON *list, const char *field)
{
	const cJSON *f;
	cJSON_ArrayForEach(f, list)
	{
		const char *s = cJSON_GetStringValue(f);
		if (s && strcmp(s, field) == 0)
			return 1;
	}
	return 0;
}

int api_preset_apply(struct req *r, cJSON **body)
{
	cJSON *b = *body, *preset = NULL, *merged = NULL;
	struct dd_err err = { 0 };
	int rc = 0;
	const cJSON *pv = json_get(b, "preset");
	int64_t id = cJSON_IsNumber(pv) ? (int64_t)pv->valuedouble : 0;
	if (id < 1 || store_preset_json(id, &preset, &err) != DD_OK ||
	    !perm_class_readable(r, (int64_t)cJSON_GetNumberValue(json_get(preset, "class_id")))) {
		if (err.code && err.code != DD_ENOENT) {
			rc = http_error_dd(r->c, &err);
			goto out;
		}
		rc = http_error(r->c, 400, "invalid", "preset: there is no preset %lld", (long long)id);
		goto out;
	}
	const char *pname = cJSON_GetStringValue(json_get(preset, "name"));
	const cJSON *locked = json_get(preset, "locked"), *hidden = json_get(preset, "hidden");
	/* every field the body sets that a preset may fix must be unlocked (the
	 * others, "name", "group", "gpus", are the learner's) */
	cJSON *f;
	cJSON_ArrayForEach(f, b)
	{
		const char *k = f->string;
		if (!preset_field_known(k))
			continue;
		if (listed(locked, k) || listed(hidden, k)) {
			rc = http_error(r->c, 400, "invalid", "%s: locked by the lab preset \"%s\"", k, pname);
			goto out;
		}
		if (strcmp(k, "solver") == 0 && cJSON_IsObject(f)) {
			const cJSON *sf;
			cJSON_ArrayForEach(sf, f)
			{
				char full[96];
				snprintf(full, sizeof full, "solver.%s", sf->string);
				if (listed(locked, full) || listed(hidden, full)) {
					rc = http_error(r->c, 400, "invalid", "%s: locked by the lab preset \"%s\"", full,
							pname);
					goto out;
				}
			}
		}
	}
	/* the preset's settings, with the body's unlocked fields over them */
	merged = cJSON_Duplicate(json_get(preset, "settings"), 1);
	if (!merged) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(f, b)
	{
		if (strcmp(f->string, "preset") == 0)
			continue;
		cJSON *mine = json_get(merged, f->string);
		if (strcmp(f->string, "solver") == 0 && cJSON_IsObject(f) && cJSON_IsObject(mine)) {
			const cJSON *sf;
			cJSON_ArrayForEach(sf, f)
			{
				cJSON_DeleteItemFromObjectCaseSensitive(mine, sf->string);
				cJSON_AddItemToObject(mine, sf->string, cJSON_Duplicate(sf, 1));
			}
			continue;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(merged, f->string);
		cJSON_AddItemToObject(merged, f->string, cJSON_Duplicate(f, 1));
	}
	/* the job keeps which preset it came from and what it hides (jobs/kind_preset.h) */
	cJSON *mark = cJSON_AddObjectToObject(merged, "preset");
	cJSON_AddNumberToObject(mark, "id", (double)id);
	cJSON_AddNumberToObject(mark, "class_id", cJSON_GetNumberValue(json_get(preset, "class_id")));
	cJSON_AddItemToObject(mark, "hidden", cJSON_IsArray(hidden) ? cJSON_Duplicate(hidden, 1) : cJSON_CreateArray());
	cJSON_Delete(*body);
	*body = merged;
	merged = NULL;
out:
	cJSON_Delete(merged);
	cJSON_Delete(preset);
	return rc;
}

/* ---- the instructor's dashboard ---- */

struct best {
	double acc;
	int seen;
};

static void best_val(void *ctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct best *b = ctx;
	const char *type = cJSON_GetStringValue(json_get(ev, "type"));
	const char *kind = cJSON_GetStringValue(json_get(ev, "kind"));
	const cJSON *acc = json_get(ev, "accuracy");
	if (type && kind && strcmp(type, "metric") == 0 && strcmp(kind, "val") == 0 && cJSON_IsNumber(acc) &&
	    (!b->seen || acc->valuedouble > b->acc)) {
		b->acc = acc->valuedouble;
		b->seen = 1;
	}
}

/* GET /api/v1/classes/{id}/dashboard -> {"class":{id,name},"members":[…],
 * "runs":[{user,id,name,state,progress,best_val_accuracy,time_used_s,…}]} */
int api_class_dashboard(struct req *r)
{
	struct dd_err err = { 0 };
	cJSON *c = NULL, *runs = NULL;
	if (store_class_json(r->id, &c, &err) != DD_OK || store_class_runs(r->id, &runs, &err) != DD_OK) {
		cJSON_Delete(c);
		return http_error_dd(r->c, &err);
	}
	int64_t now = fs_now_ms();
	cJSON *run;
	cJSON_ArrayForEach(run, runs)
	{
		int64_t id = (int64_t)cJSON_GetNumberValue(json_get(run, "id"));
		char dir[PATH_MAX];
		struct best b = { 0 };
		struct events_tail t = { .offset = 0, .seq = 0 };
		sched_job_dir(id, dir, sizeof dir);
		snprintf(t.path, sizeof t.path, "%s/" EVENTS_FILE, dir);
		events_tail_poll(&t, best_val, &b, NULL);
		if (b.seen)
			cJSON_AddNumberToObject(run, "best_val_accuracy", b.acc);
		else
			cJSON_AddNullToObject(run, "best_val_accuracy");
		const cJSON *st = json_get(run, "started_at"), *fin = json_get(run, "finished_at");
		double used = 0;
		if (cJSON_IsNumber(st))
			used = ((cJSON_IsNumber(fin) ? fin->valuedouble : (double)now) - st->valuedouble) / 1000.0;
		cJSON_AddNumberToObject(run, "time_used_s", used > 0 ? used : 0);
	}
	cJSON *out = cJSON_CreateObject();
	cJSON *cls = cJSON_AddObjectToObject(out, "class");
	cJSON_AddItemToObject(cls, "id", cJSON_Duplicate(json_get(c, "id"), 0));
	cJSON_AddItemToObject(cls, "name", cJSON_Duplicate(json_get(c, "name"), 0));
	cJSON_AddItemToObject(out, "members", cJSON_DetachItemFromObjectCaseSensitive(c, "members"));
	cJSON_AddItemToObject(out, "runs", runs);
	cJSON_Delete(c);
	return http_json(r->c, 200, out);
}
