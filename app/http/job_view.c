/* job_view.c — see job_view.h. */
#define _GNU_SOURCE
#include "job_view.h"

#include <stdlib.h>
#include <string.h>

#include "../../common/json.h"
#include "../../store/store.h"
#include "perm.h"


static _Thread_local const struct auth_state *view_who;
static _Thread_local int64_t view_job;
static _Thread_local int view_on;

cJSON *job_view_mark(int64_t job_id)
{
	cJSON *job = NULL;
	if (job_id <= 0 || store_job_json(job_id, 1, &job, NULL) != DD_OK)
		return NULL;
	cJSON *mark = cJSON_DetachItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "params"), "preset");
	cJSON_Delete(job);
	return mark;
}

int job_view_sees(const struct auth_state *a, const cJSON *mark)
{
	if (!cJSON_GetArraySize(json_get(mark, "hidden")) || !a || !a->accounts)
		return 1;
	if (a->authenticated && a->user.role == ROLE_ADMIN)
		return 1; /* even when the class is gone */
	return perm_instructs(a, (int64_t)cJSON_GetNumberValue(json_get(mark, "class_id"))); /* perm.c's one rule */
}

/* " lr 0.01" in a log line becomes " lr (hidden)": a new string (caller frees),
 * or NULL when there is no such word. */
static char *redact_lr(const char *s)
{
	const char *at = strstr(s, "lr ");
	if (!at)
		return NULL;
	size_t n = strlen(s);
	char *out = malloc(n + 16 * (n / 3 + 1));
	if (!out)
		return NULL;
	char *o = out;
	for (const char *p = s; *p;) {
		int word = (p == s || p[-1] == ' ' || p[-1] == '(' || p[-1] == ',') && !strncmp(p, "lr ", 3);
		const char *q = p + 3;
		if (word && (*q == '-' || *q == '.' || (*q >= '0' && *q <= '9'))) {
			memcpy(o, "lr (hidden)", 11);
			o += 11;
			while (*q && (strchr("+-.eE", *q) || (*q >= '0' && *q <= '9')))
				q++;
			p = q;
		} else {
			*o++ = *p++;
		}
	}
	*o = 0;
	return out;
}

/* One object of the walk, whose key in its parent is key (NULL: an array's item
 * or the root). */
static void strip_walk(cJSON *o, const char *key, const cJSON *hidden, int lr)
{
	if (cJSON_IsObject(o)) {
		int jobish = json_get(o, "params") || json_get(o, "settings");
		int holder = key && (!strcmp(key, "params") || !strcmp(key, "settings"));
		const cJSON *h;
		cJSON_ArrayForEach(h, hidden)
		{
			const char *f = cJSON_GetStringValue(h), *dot = f ? strchr(f, '.') : NULL;
			if (!f || (f[0] == 'p' && !strcmp(f, "preset")))
				continue;
			if (!dot && (jobish || holder))
				cJSON_DeleteItemFromObjectCaseSensitive(o, f);
			else if (dot) {
				char head[96];
				snprintf(head, sizeof head, "%.*s", (int)(dot - f), f);
				cJSON *in = cJSON_GetObjectItemCaseSensitive(o, head);
				if (cJSON_IsObject(in))
					cJSON_DeleteItemFromObjectCaseSensitive(in, dot + 1);
			}
		}
		if (lr)
			cJSON_DeleteItemFromObjectCaseSensitive(o, "lr");
	}
	cJSON *c;
	cJSON_ArrayForEach(c, o)
	{
		if (lr && cJSON_IsString(c)) { /* a log line, in an event or a log_tail */
			char *r = redact_lr(c->valuestring);
			if (r) {
				cJSON_SetValuestring(c, r);
				free(r);
			}
		} else if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
			strip_walk(c, cJSON_IsObject(o) ? c->string : NULL, hidden, lr);
		}
	}
}

void job_view_strip(cJSON *t, const cJSON *mark)
{
	const cJSON *hidden = json_get(mark, "hidden"), *h;
	int lr = 0; /* a hidden solver field: the lr the events show would tell it */
	cJSON_ArrayForEach(h, hidden)
	{
		lr |= cJSON_IsString(h) && (!strcmp(h->valuestring, "solver") || !strncmp(h->valuestring, "solver.", 7));
	}
	if (cJSON_GetArraySize(hidden))
		strip_walk(t, NULL, hidden, lr);
}

void job_view_begin(const struct auth_state *a, const char *pattern, int64_t id)
{
	/* the routes whose {id} is a job's */
	static const char *const jobs[] = { "/api/v1/jobs/{id}", "/api/v1/models/{id}", "/api/v1/evaluations/{id}",
					    "/api/v1/datasets/{id}", "/models/{id}", "/datasets/{id}", NULL };
	int of_job = 0;
	for (int i = 0; jobs[i] && !of_job; i++)
		of_job = !strncmp(pattern, jobs[i], strlen(jobs[i]));
	view_who = a;
	view_job = of_job ? id : 0;
	view_on = 1;
}

void job_view_end(void)
{
	view_who = NULL;
	view_job = 0;
	view_on = 0;
}

/* Each job object in t (an object with an id, a kind and a state) that hides. */
static void strip_jobs(cJSON *t)
{
	if (cJSON_IsObject(t) && cJSON_IsNumber(json_get(t, "id")) && cJSON_IsString(json_get(t, "kind")) &&
	    cJSON_IsString(json_get(t, "state"))) {
		const cJSON *params = json_get(t, "params");
		cJSON *own = NULL;
		const cJSON *mark = params ? json_get(params, "preset") : NULL;
		if (!params && !strcmp(cJSON_GetStringValue(json_get(t, "kind")), "model"))
			mark = own = job_view_mark((int64_t)cJSON_GetNumberValue(json_get(t, "id")));
		if (!job_view_sees(view_who, mark))
			job_view_strip(t, mark);
		cJSON_Delete(own);
	}
	cJSON *c;
	cJSON_ArrayForEach(c, t)
	{
		if (cJSON_IsObject(c) || cJSON_IsArray(c))
			strip_jobs(c);
	}
}

void job_view_answer(cJSON *answer)
{
	const struct auth_state *a = view_who;
	if (!view_on || !answer || !a || !a->accounts || (a->authenticated && a->user.role == ROLE_ADMIN))
		return;
	if (view_job > 0) {
		cJSON *mark = job_view_mark(view_job);
		if (!job_view_sees(a, mark))
			job_view_strip(answer, mark);
		cJSON_Delete(mark);
	}
	strip_jobs(answer);
}
