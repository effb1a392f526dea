/* perm.h — who may do what: the one permission function.
 *
 * Every route names its action in the route table (API_ROUTES, app/api/api.h):
 * a row cannot be written without one, so who may use a route is decided when
 * it is added.  This file says what each action means.  api_dispatch calls
 * perm_check with the route's action before any handler; for the job actions it
 * looks up the job's owner once.
 * List handlers filter with perm_list_owner, the WebSocket with perm_sees_owner.
 *
 * Roles: a learner sees and changes only their own jobs, and may read (and
 * train on) the datasets shared with a class they are in, never change them;
 * an instructor sees and changes their own jobs and those of the members of
 * the classes they instruct; admins see and change everyone's.  A job one may
 * not see is answered 404, as a job that does not exist, so that ids do not
 * tell what exists.  Classes ({id} a class id) have actions of their own: its
 * members and instructor read it, its instructor (and admins) change it.  With
 * accounts off every check passes: everything belongs to the local user.
 * Class membership reaches learners only: an admin or an instructor who is a
 * member of a class gives its instructor no rights over their work.
 *
 * What a job may use (other jobs named in its params, server folders, uploads)
 * is not a route's question: perm_caller hands the scheduler the caller, and
 * each kind's validate answers it (jobs/job.h, sched_validate), the same for
 * every route that makes a job. */
#ifndef DD_PERM_H
#define DD_PERM_H

#include <stdint.h>

#include "../../jobs/job.h"
#include "../accounts/auth.h"
#include "http.h"

enum perm_action {
	PERM_ADMIN = 0, /* admins only */
	PERM_PUBLIC,    /* anyone, without logging in */
	PERM_USER,      /* anyone logged in; a list handler filters with perm_list_owner */
	PERM_JOB_READ,  /* {id} is a job the user may see */
	PERM_JOB_WRITE, /* {id} is a job the user may change */
	PERM_INSTRUCTOR,  /* instructors and admins */
	PERM_CLASS_READ,  /* {id} is a class the user instructs or is a member of */
	PERM_CLASS_WRITE, /* {id} is a class the user instructs (admins: any) */
	PERM_COUNT
};

/* The action's name, as `deepdesk routes --permissions` prints it ("job_read"). */
const char *perm_action_name(enum perm_action a);

/* The action of the route with this method and pattern in the route table
 * (server_routes); PERM_ADMIN, the most closed, for one the table does not have. */
enum perm_action perm_route_action(const char *method, const char *pattern);

/* May r do action a (on job job_id, for the job actions)?  0 when it may;
 * otherwise the error has been sent and its status is returned: 401 when nobody
 * is logged in, 403 for a missing or wrong X-CSRF-Token on a state-changing
 * request made with the session cookie, or for a role too low, 404 for a job
 * the user may not see. */
int perm_check(struct req *r, enum perm_action a, int64_t job_id);

/* Whose jobs a list handler shows: -1 (everyone's) for an admin or with
 * accounts off, otherwise the user's id, which store_job_list_for widens to
 * what that user may see (their classes' members' jobs for an instructor, the
 * datasets shared with their classes).  Pass it to store_job_list_for. */
int64_t perm_list_owner(const struct req *r);

/* May the user of a see a job owned by owner_id (0: the local user or a removed
 * account: admins only)?  An instructor sees their own and their classes'
 * members'. */
int perm_sees_owner(const struct auth_state *a, int64_t owner_id);

/* May r use job id, named in a request body (a dataset to train on, a parent)?
 * 1 yes (also for a dataset shared with a class of r's user); 0 when it does
 * not exist or is not r's to see: the caller answers as it does for a job that
 * does not exist. */
int perm_job_visible(const struct req *r, int64_t id);

/* Who asks the scheduler for a job (jobs/job.h): r's account, admin when it is
 * an admin or accounts are off, and may_use answering as perm_job_visible does.
 * pc holds it all; pass &pc->c to sched_submit, sched_validate. */
struct perm_caller {
	struct job_caller c;
	struct auth_state a;
};
void perm_caller(const struct req *r, struct perm_caller *pc);
/* The same for the owner of job id, which a clone or a resume of it is checked
 * as (the new work is the owner's, so it may use only what the owner may now);
 * r's own when the job has no owner any more (admins only reach it) or accounts
 * are off.  DD_ENOENT when the job does not exist. */
int perm_caller_owner(const struct req *r, int64_t id, struct perm_caller *pc, struct dd_err *err);

/* May r read class id (0 when the class does not exist or is not r's)?  And
 * change it (its instructor, or an admin)? */
int perm_class_readable(const struct req *r, int64_t id);
int perm_class_writable(const struct req *r, int64_t id);
/* perm_class_writable for a viewer without a request (a WebSocket's): is a the
 * instructor of class id, or an admin (everyone with accounts off)? */
int perm_instructs(const struct auth_state *a, int64_t id);

/* May r see the server's own paths (the data folder, a job's folder)?  Admins,
 * and the one local user when accounts are off; a learner's answers name no
 * server path. */
int perm_sees_server_paths(const struct req *r);

/* An audit row for action on job id by r's user ("job_delete"). */
void perm_audit_job(const struct req *r, const char *action, int64_t id);

#endif
