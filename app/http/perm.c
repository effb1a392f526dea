/* perm.c — see perm.h. */
#define _GNU_SOURCE
#include "perm.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "../../common/log.h"
#include "../../jobs/sched.h"
#include "../../store/store.h"
#include "server.h"

/* by enum perm_action: a new last action without a name does not build, one
 * elsewhere prints "?", which tests/api/openapi.test.mjs refuses */
static const char *const action_names[] = {
	[PERM_ADMIN] = "admin",
	[PERM_PUBLIC] = "public",
	[PERM_USER] = "user",
	[PERM_JOB_READ] = "job_read",
	[PERM_JOB_WRITE] = "job_write",
	[PERM_INSTRUCTOR] = "instructor",
	[PERM_CLASS_READ] = "class_read",
	[PERM_CLASS_WRITE] = "class_write",
};
static_assert(sizeof action_names / sizeof action_names[0] == PERM_COUNT, "a perm_action without its name");

const char *perm_action_name(enum perm_action a)
{
	return (unsigned)a < PERM_COUNT && action_names[a] ? action_names[a] : "?";
}

enum perm_action perm_route_action(const char *method, const char *pattern)
{
	for (const struct route_info *r = server_routes(); r->pattern; r++)
		if (strcmp(r->method, method) == 0 && strcmp(r->pattern, pattern) == 0)
			return r->perm;
	return PERM_ADMIN;
}

int perm_sees_owner(const struct auth_state *a, int64_t owner_id)
{
	if (!a || !a->accounts)
		return 1;
	if (!a->authenticated)
		return 0;
	if (a->user.role == ROLE_ADMIN)
		return 1;
	if (owner_id != 0 && owner_id == a->user.id)
		return 1;
	/* an instructor's classes give rights over their learners' work only: an
	 * admin or an instructor enrolled (store_class_instructs asks the role) gives
	 * none, however they came to be enrolled */
	return a->user.role == ROLE_INSTRUCTOR && owner_id != 0 && store_class_instructs(a->user.id, owner_id);
}

int64_t perm_list_owner(const struct req *r)
{
	const struct auth_state *a = r->auth;
	if (!a || !a->accounts || a->user.role == ROLE_ADMIN)
		return -1;
	/* the store adds the classes' members and shared datasets (STORE_SEEN_BY) */
	return a->authenticated ? a->user.id : 0; /* nobody owns job 0: an empty list */
}

/* ---- classes: shared datasets and who may read or change a class ---- */

/* Is job id a dataset shared with a class a's user is in? */
static int shared_with(const struct auth_state *a, int64_t id)
{
	return a && a->authenticated && id > 0 && store_class_dataset_shared(id, a->user.id);
}

/* May r read class id (write 0: its instructor, its members, admins) or change
 * it (write 1: its instructor if still an instructor, admins)?  0 as well when
 * the class does not exist. */
static int class_allowed(const struct auth_state *a, int64_t id, int write)
{
	if (!a || !a->accounts)
		return 1;
	int64_t instructor;
	if (!a->authenticated || id <= 0 || store_class_instructor(id, &instructor, NULL) != DD_OK)
		return 0;
	int instructs = instructor != 0 && instructor == a->user.id;
	if (a->user.role == ROLE_ADMIN)
		return 1;
	if (write)
		return a->user.role == ROLE_INSTRUCTOR && instructs;
	return instructs || store_class_is_member(id, a->user.id);
}

int perm_class_readable(const struct req *r, int64_t id) { return class_allowed(r->auth, id, 0); }

int perm_class_writable(const struct req *r, int64_t id) { return class_allowed(r->auth, id, 1); }

int perm_instructs(const struct auth_state *a, int64_t id) { return class_allowed(a, id, 1); }

/* The class actions of perm_check: 0, or the error sent.  A class one may not
 * read is answered as one that does not exist. */
static int check_class(struct req *r, enum perm_action action, int64_t id)
{
	const struct auth_state *as = r->auth;
	if (action == PERM_INSTRUCTOR) {
		if (as->user.role == ROLE_ADMIN || as->user.role == ROLE_INSTRUCTOR)
			return 0;
		return http_error(r->c, 403, "forbidden", "%s %s is for instructors only", r->ri->request_method,
				  r->ri->local_uri);
	}
	if (!perm_class_readable(r, id))
		return http_error(r->c, 404, "not_found", "class %lld does not exist", (long long)(id > 0 ? id : 0));
	if (action == PERM_CLASS_WRITE && !perm_class_writable(r, id))
		return http_error(r->c, 403, "forbidden", "only the instructor of class %lld may do this",
				  (long long)id);
	return 0;
}

/* May the user of a use job id (it exists, and they see it or it is a dataset
 * shared with a class of theirs)? */
static int visible(const struct auth_state *a, int64_t id)
{
	if (!a || !a->accounts)
		return 1;
	int64_t owner;
	if (id <= 0 || store_job_owner(id, &owner, NULL) != DD_OK)
		return 0;
	return perm_sees_owner(a, owner) || shared_with(a, id);
}

int perm_job_visible(const struct req *r, int64_t id) { return visible(r->auth, id); }

static int caller_may_use(const struct job_caller *who, int64_t id)
{
	const struct perm_caller *pc = who->ctx;
	return visible(&pc->a, id);
}

static void caller_of(struct perm_caller *pc)
{
	const struct auth_state *a = &pc->a;
	int local = !a->accounts || !a->authenticated || a->user.id == 0;
	pc->c = (struct job_caller){
		.user_id = local ? 0 : a->user.id,
		.user = local ? "local" : a->user.name,
		.admin = !a->accounts || (a->authenticated && a->user.role == ROLE_ADMIN),
		.may_use = caller_may_use,
		.ctx = pc,
		.server = sched_server(),
	};
}

void perm_caller(const struct req *r, struct perm_caller *pc)
{
	memset(pc, 0, sizeof *pc);
	if (r->auth)
		pc->a = *r->auth;
	caller_of(pc);
}

int perm_caller_owner(const struct req *r, int64_t id, struct perm_caller *pc, struct dd_err *err)
{
	int64_t owner = 0;
	int rc = store_job_owner(id, &owner, err);
	if (rc)
		return rc;
	perm_caller(r, pc);
	if (!pc->a.accounts || owner == 0 || owner == pc->a.user.id)
		return DD_OK;
	struct auth_user u;
	if ((rc = auth_user_get(owner, &u, NULL, err)))
		return rc;
	pc->a.user = u;
	pc->a.authenticated = 1;
	pc->a.session_id = pc->a.token_id = 0;
	caller_of(pc);
	return DD_OK;
}

static int safe_method(const char *m)
{
	return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0;
}

int perm_check(struct req *r, enum perm_action a, int64_t job_id)
{
	const struct auth_state *as = r->auth;
	if (a == PERM_PUBLIC || !as || !as->accounts)
		return 0;
	if (!as->authenticated)
		return http_error(r->c, 401, "unauthenticated",
				  "log in first (POST /api/v1/login), or send an API token as \"Authorization: Bearer …\"");
	/* CSRF: a cookie is sent by the browser whoever wrote the page; the header
	 * can only come from a page of ours, which read the token from /me or login. */
	if (as->session_id && !safe_method(r->ri->request_method)) {
		const char *h = mg_get_header(r->c, "X-CSRF-Token");
		size_t n = strlen(as->csrf);
		if (!h || strlen(h) != n || sodium_memcmp(h, as->csrf, n) != 0)
			return http_error(r->c, 403, "forbidden",
					  "missing or wrong X-CSRF-Token header: reload the page and try again");
	}
	switch (a) {
	case PERM_USER: return 0;
	case PERM_JOB_READ:
	case PERM_JOB_WRITE: {
		if (as->user.role == ROLE_ADMIN)
			return 0; /* a job that does not exist is the handler's 404 */
		int64_t owner = 0;
		if (job_id > 0 && store_job_owner(job_id, &owner, NULL) == DD_OK && perm_sees_owner(as, owner))
			return 0;
		if (shared_with(as, job_id)) {
			if (a == PERM_JOB_READ)
				return 0;
			return http_error(r->c, 403, "forbidden",
					  "dataset %lld is shared with your class read-only: you may train on it, not change it",
					  (long long)job_id);
		}
		return http_error(r->c, 404, "not_found", "job %lld does not exist", (long long)(job_id > 0 ? job_id : 0));
	}
	case PERM_INSTRUCTOR:
	case PERM_CLASS_READ:
	case PERM_CLASS_WRITE:
		return check_class(r, a, job_id);
	case PERM_ADMIN:
	default:
		if (as->user.role == ROLE_ADMIN)
			return 0;
		return http_error(r->c, 403, "forbidden", "%s %s is for admins only", r->ri->request_method,
				  r->ri->local_uri);
	}
}

int perm_sees_server_paths(const struct req *r)
{
	return !r->auth || !r->auth->accounts || r->auth->user.role == ROLE_ADMIN;
}

void perm_audit_job(const struct req *r, const char *action, int64_t id)
{
	char target[32];
	snprintf(target, sizeof target, "job %lld", (long long)id);
	auth_audit(r->auth ? &r->auth->user : NULL, action, target, r->auth ? r->auth->address : NULL);
}
