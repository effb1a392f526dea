/* testkind.c — the "test" job kind, compiled only into the test build (DD_TESTING).
 *
 * It lets the tests drive every path of the scheduler without real work:
 *   params.steps (10), params.step_ms (50): how long it runs;
 *   params.fail_at: report an error at that step;
 *   params.crash_at: die by SIGSEGV at that step (no final status);
 *   params.exit_at + params.exit_code: _exit with that code at that step;
 *   params.ignore_term: keep running after SIGTERM (to test the SIGKILL grace);
 *   params.log_lines: log lines per step (for event-volume tests). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "job.h"
#include "worker.h"

static double num(cJSON *params, const char *key, double dflt)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* Test jobs crash, hang and flood on request: admins only, unless the test
 * harness opens them to every account (DEEPDESK_TEST_KIND=anyone, which
 * tests/lib/server.mjs sets so that learners own jobs in the permission tests). */
static int validate(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err)
{
	(void)uses;
	const char *open = getenv("DEEPDESK_TEST_KIND");
	if (who && !who->admin && !(open && strcmp(open, "anyone") == 0))
		return dd_err_set(err, DD_EPERM, "kind: \"test\" jobs are for admins only");
	static const char *const keys[] = { "steps", "step_ms", "fail_at", "crash_at", "exit_at",
					    "exit_code", "ignore_term", "log_lines", NULL };
	cJSON *it;
	cJSON_ArrayForEach(it, params)
	{
		int known = 0;
		for (int i = 0; keys[i]; i++)
			known |= it->string && strcmp(it->string, keys[i]) == 0;
		if (!known)
			return dd_err_set(err, DD_EINVAL, "params.%s: unknown field", it->string);
		if (!cJSON_IsNumber(it) && !cJSON_IsBool(it))
			return dd_err_set(err, DD_EINVAL, "params.%s: must be a number", it->string);
	}
	double steps = num(params, "steps", 10);
	if (steps < 0 || steps > 1e7)
		return dd_err_set(err, DD_EINVAL, "params.steps: must be between 0 and 10000000");
	return DD_OK;
}

static int run(struct worker *w, struct dd_err *err)
{
	int steps = (int)num(w->params, "steps", 10);
	int step_ms = (int)num(w->params, "step_ms", 50);
	int fail_at = (int)num(w->params, "fail_at", -1);
	int crash_at = (int)num(w->params, "crash_at", -1);
	int exit_at = (int)num(w->params, "exit_at", -1);
	int log_lines = (int)num(w->params, "log_lines", 1);
	cJSON *ign = cJSON_GetObjectItemCaseSensitive(w->params, "ignore_term");
	int ignore_term = cJSON_IsTrue(ign) || (cJSON_IsNumber(ign) && ign->valueint);
	if (ignore_term)
		signal(SIGTERM, SIG_IGN);
	for (int i = 0; i < steps; i++) {
		if (!ignore_term && worker_should_stop(w)) {
			worker_log(w, "info", "stopping at step %d of %d", i, steps);
			return DD_OK;
		}
		if (i == fail_at)
			return dd_err_set(err, DD_EINVAL, "test job failed at step %d as asked", i);
		if (i == crash_at)
			raise(SIGSEGV);
		if (i == exit_at)
			_exit((int)num(w->params, "exit_code", 3));
		for (int l = 0; l < log_lines; l++)
			worker_log(w, "info", "step %d of %d", i + 1, steps);
		worker_metric(w, "loss", 1.0 / (i + 1), "step", i + 1);
		if (step_ms > 0) {
			struct timespec ts = { step_ms / 1000, (long)(step_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
		worker_progress(w, (double)(i + 1) / steps, (double)(steps - i - 1) * step_ms / 1000.0);
	}
	return DD_OK;
}

const struct job_kind test_job_kind = {
	.name = "test",
	.title = "Test job (test build only)",
	.validate = validate,
	.run = run,
	.default_cpu_slots = 1,
};
