/* job.c — job states, the registry of job kinds, and what job.json holds. */
#include "job.h"

#include <string.h>

static const char *state_names[JOB_STATE_COUNT] = { "queued",  "running", "done",
						    "error",   "aborted", "interrupted" };

const char *job_state_name(enum job_state s)
{
	return (unsigned)s < JOB_STATE_COUNT ? state_names[s] : "unknown";
}

int job_state_parse(const char *s, enum job_state *out)
{
	for (int i = 0; i < JOB_STATE_COUNT; i++)
		if (s && strcmp(s, state_names[i]) == 0) {
			*out = (enum job_state)i;
			return 0;
		}
	return -1;
}

int job_state_final(enum job_state s)
{
	return s == JOB_DONE || s == JOB_ERROR || s == JOB_ABORTED || s == JOB_INTERRUPTED;
}

int job_state_can_move(enum job_state from, enum job_state to)
{
	switch (from) {
	case JOB_QUEUED: return to == JOB_RUNNING || to == JOB_ABORTED || to == JOB_ERROR;
	case JOB_RUNNING:
		return to == JOB_DONE || to == JOB_ERROR || to == JOB_ABORTED || to == JOB_INTERRUPTED;
	case JOB_DONE:
	case JOB_ERROR:
	case JOB_ABORTED:
	case JOB_INTERRUPTED: return to == JOB_QUEUED; /* resumed or extended (sched_requeue) */
	default: return 0;
	}
}

/* Each kind lives in its own file (kind_*.c); this list only names them. */
extern const struct job_kind dataset_job_kind;
extern const struct job_kind model_job_kind;
extern const struct job_kind eval_job_kind;
#ifdef DD_TESTING
extern const struct job_kind test_job_kind;
#endif

static const struct job_kind *const kinds[] = {
	&dataset_job_kind,
	&model_job_kind,
	&eval_job_kind,
#ifdef DD_TESTING
	&test_job_kind,
#endif
	NULL
};

const struct job_kind *const *job_kinds(void) { return kinds; }

const struct job_kind *job_kind_find(const char *name)
{
	for (int i = 0; name && kinds[i]; i++)
		if (strcmp(kinds[i]->name, name) == 0)
			return kinds[i];
	return NULL;
}

/* What a worker (worker.c, kind_*.c) and an executor (exec_slurm.c) read from
 * job.json, besides the guard: the allow-list, in job.json's order. */
static const char *const spec_keys[] = { "id", "kind", "name", "owner", "parents", "params", "resources", NULL };

cJSON *job_spec(const cJSON *job)
{
	cJSON *spec = cJSON_CreateObject();
	for (int i = 0; spec && spec_keys[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(job, spec_keys[i]);
		if (!v)
			continue;
		cJSON *copy = cJSON_Duplicate(v, 1);
		if (!copy) {
			cJSON_Delete(spec);
			return NULL;
		}
		cJSON_AddItemToObject(spec, spec_keys[i], copy);
	}
	return spec;
}

int job_uses_add(struct job_uses *uses, int64_t id, struct dd_err *err)
{
	for (int i = 0; i < uses->n; i++)
		if (uses->id[i] == id)
			return DD_OK;
	if (uses->n == JOB_MAX_USES)
		return dd_err_set(err, DD_EINVAL, "params: name at most %d other jobs", JOB_MAX_USES);
	uses->id[uses->n++] = id;
	return DD_OK;
}
