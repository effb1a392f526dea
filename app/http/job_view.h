/* job_view.h — what of a job a viewer may see.
 *
 * A model made from a lab preset carries the preset's mark in its params
 * (jobs/kind_preset.h: {"id","class_id","hidden"}).  Its hidden values (say
 * solver.base_lr) are for the preset's class's instructor and admins only: for
 * anyone else (its owner, the learner, included) they are taken out of everything
 * the job leaves by — its detail and params, the model's settings and its DIGITS
 * .json, its events and log (a hidden solver field takes every "lr" away, and the
 * "lr N" of log lines), clones (which keep the values server-side) — by one
 * function, job_view_strip, applied to every JSON answer of the API (http_json
 * calls job_view_answer, with the viewer and the path's job that api_dispatch set
 * for the request) and to every WebSocket push (ws.c). */
#ifndef DD_JOB_VIEW_H
#define DD_JOB_VIEW_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "../accounts/auth.h"

/* The mark of job id's preset (a copy, caller deletes; NULL when it has none). */
cJSON *job_view_mark(int64_t job_id);
/* May a see every value of a job with this mark (NULL: no preset)?  With accounts
 * off everyone may; else admins and the instructor of the mark's class. */
int job_view_sees(const struct auth_state *a, const cJSON *mark);
/* Take out of t (a job, an events array, a whole answer) the values mark's
 * hidden fields name. */
void job_view_strip(cJSON *t, const cJSON *mark);

/* The request under way on this thread: its viewer (borrowed, valid until
 * job_view_end), and the job its path names when its route's pattern (in the
 * route table) is a job's (/api/v1/jobs/{id}…, /models/{id}…, …) with id. */
void job_view_begin(const struct auth_state *a, const char *pattern, int64_t id);
void job_view_end(void);
/* Strip answer (about to be sent) for the request under way: the whole of it when
 * its path's job hides from the viewer, and each job in it that hides. */
void job_view_answer(cJSON *answer);

#endif
