/* test_sched.c — job states, and the scheduler's policy with real workers (the
 * test build's "test" kind): slots, first come first served, the listener's
 * events in order, abort of a queued job, the final state decided from the
 * worker's own report. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "../../store/store.h"
#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../common/log.h"
#include "../../jobs/job.h"
#include "../../jobs/jobdir.h"
#include "../../jobs/sched.h"
#include "fixture.h"

static char dir[64];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_seq[64];
static int seq_gaps, events_seen;

static void listener(void *ctx, int64_t id, const char *what, cJSON *payload)
{
	(void)ctx;
	if (strcmp(what, "events") != 0 || id >= 64)
		return;
	pthread_mutex_lock(&lock);
	cJSON *ev;
	cJSON_ArrayForEach(ev, payload)
	{
		int64_t seq = (int64_t)cJSON_GetObjectItem(ev, "seq")->valuedouble;
		if (seq != last_seq[id] + 1)
			seq_gaps++;
		last_seq[id] = seq;
		events_seen++;
	}
	pthread_mutex_unlock(&lock);
}

static enum job_state state_of(int64_t id)
{
	struct job_row row = { 0 };
	store_job_row(id, &row, NULL);
	return row.state;
}

static int wait_final(int64_t id, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		if (job_state_final(state_of(id)))
			return 1;
		usleep(10000);
	}
	return 0;
}

/* The local user: accounts off, every job its own. */
static const struct job_caller LOCAL = { .user_id = 0, .user = "local", .admin = 1 };

static int64_t submit(const char *params_json, int slots)
{
	cJSON *params = cJSON_Parse(params_json);
	int64_t id = 0;
	struct dd_err err = { 0 };
	if (sched_submit("test", "t", &LOCAL, params, slots, NULL, 0, &id, &err) != DD_OK)
		fprintf(stderr, "  submit: %s\n", err.msg);
	cJSON_Delete(params);
	return id;
}

static void test_state_names_and_moves(void)
{
	enum job_state s;
	for (int i = 0; i < JOB_STATE_COUNT; i++) {
		CHECK_EQ_INT(job_state_parse(job_state_name((enum job_state)i), &s), 0);
		CHECK_EQ_INT(s, i);
	}
	CHECK(job_state_parse("finished", &s) != 0);
	CHECK(job_state_can_move(JOB_QUEUED, JOB_RUNNING));
	CHECK(job_state_can_move(JOB_RUNNING, JOB_INTERRUPTED));
	CHECK(!job_state_can_move(JOB_DONE, JOB_ABORTED));
	CHECK(!job_state_can_move(JOB_ERROR, JOB_RUNNING));
	CHECK(!job_state_can_move(JOB_QUEUED, JOB_DONE));
	/* a job that ended can be queued again (a resume), and only queued */
	for (int i = JOB_DONE; i <= JOB_INTERRUPTED; i++) {
		CHECK(job_state_can_move((enum job_state)i, JOB_QUEUED));
		CHECK(!job_state_can_move((enum job_state)i, JOB_RUNNING));
	}
	CHECK(!job_state_can_move(JOB_RUNNING, JOB_QUEUED));
	CHECK(job_state_final(JOB_INTERRUPTED) && !job_state_final(JOB_RUNNING));
}

static void test_unknown_kind_and_bad_params_refused(void)
{
	cJSON *params = cJSON_Parse("{\"steps\":\"many\"}");
	int64_t id;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(sched_submit("nope", "t", &LOCAL, params, 0, NULL, 0, &id, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "unknown job kind");
	CHECK_EQ_INT(sched_submit("test", "t", &LOCAL, params, 0, NULL, 0, &id, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "params.steps");
	CHECK_EQ_INT(sched_submit("test", "t", &LOCAL, params, 5, NULL, 0, &id, &err), DD_EINVAL);
	cJSON_Delete(params);
}

static int nobody_may_use(const struct job_caller *who, int64_t id)
{
	(void)who;
	(void)id;
	return 0;
}

/* Every rule is the scheduler's, with the caller: a learner (not admin, who may
 * use no other job here) may not submit a test job, name a parent it may not
 * use, read a server folder outside --data-root, or name an upload by path. */
static void test_caller_checks(void)
{
	struct job_caller learner = { .user_id = 7, .user = "ann", .admin = 0, .may_use = nobody_may_use };
	struct dd_err err = { 0 };
	cJSON *params = cJSON_Parse("{\"steps\":1}");
	CHECK_EQ_INT(sched_validate("test", params, &learner, NULL, 0, NULL, &err), DD_EPERM);
	CHECK_CONTAINS(err.msg, "admins only");
	int64_t parent = 1;
	CHECK_EQ_INT(sched_validate("test", params, &LOCAL, &parent, 1, NULL, &err), DD_EINVAL); /* no job 1 */
	CHECK_CONTAINS(err.msg, "parent job 1 does not exist");
	cJSON_Delete(params);
	params = cJSON_Parse("{\"source\":{\"type\":\"folder\",\"train\":\"/etc\"}}");
	CHECK_EQ_INT(sched_validate("dataset", params, &learner, NULL, 0, NULL, &err), DD_EPERM);
	CHECK_CONTAINS(err.msg, "source.train");
	CHECK_EQ_INT(sched_validate("dataset", params, &LOCAL, NULL, 0, NULL, &err), DD_EPERM); /* no --data-root */
	cJSON_Delete(params);
	params = cJSON_Parse("{\"source\":{\"type\":\"upload\",\"file\":\"/x/uploads/../../etc/passwd\"}}");
	CHECK_EQ_INT(sched_validate("dataset", params, &LOCAL, NULL, 0, NULL, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "source.file");
	cJSON_Delete(params);
	params = cJSON_Parse("{\"dataset\":1,\"network\":{\"standard\":\"lenet\"}}");
	CHECK_EQ_INT(sched_validate("model", params, &learner, NULL, 0, NULL, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "dataset: there is no job 1");
	cJSON_Delete(params);
}

static void test_one_slot_runs_one_job_at_a_time(void)
{
	int64_t a = submit("{\"steps\":6,\"step_ms\":50}", 1);
	int64_t b = submit("{\"steps\":2,\"step_ms\":10}", 1);
	int saw_a_running_b_queued = 0;
	for (int i = 0; i < 300 && !saw_a_running_b_queued; i++) {
		saw_a_running_b_queued = state_of(a) == JOB_RUNNING && state_of(b) == JOB_QUEUED;
		usleep(5000);
	}
	CHECK(saw_a_running_b_queued);
	int used, total;
	sched_slots(&used, &total);
	CHECK_EQ_INT(total, 1);
	CHECK(wait_final(a, 10000));
	CHECK(wait_final(b, 10000));
	CHECK_EQ_INT(state_of(a), JOB_DONE);
	CHECK_EQ_INT(state_of(b), JOB_DONE);
	/* b started only after a ended */
	cJSON *ja = NULL, *jb = NULL;
	store_job_json(a, 0, &ja, NULL);
	store_job_json(b, 0, &jb, NULL);
	CHECK(cJSON_GetObjectItem(jb, "started_at")->valuedouble >=
	      cJSON_GetObjectItem(ja, "finished_at")->valuedouble);
	cJSON_Delete(ja);
	cJSON_Delete(jb);
	pthread_mutex_lock(&lock);
	CHECK_EQ_INT(seq_gaps, 0);
	CHECK(last_seq[a] >= 6 * 3 + 2); /* log+metric+progress per step, running and done */
	pthread_mutex_unlock(&lock);
}

static void test_abort_queued_and_running(void)
{
	int64_t a = submit("{\"steps\":200,\"step_ms\":20}", 1);
	int64_t b = submit("{\"steps\":1}", 1);
	for (int i = 0; i < 200 && state_of(a) != JOB_RUNNING; i++)
		usleep(10000);
	struct dd_err err = { 0 };
	CHECK_EQ_INT(sched_abort(b, &err), DD_OK);
	CHECK_EQ_INT(state_of(b), JOB_ABORTED);
	CHECK_EQ_INT(sched_abort(b, &err), DD_ECONFLICT);
	CHECK_EQ_INT(sched_abort(a, &err), DD_OK);
	CHECK(wait_final(a, 5000));
	CHECK_EQ_INT(state_of(a), JOB_ABORTED);
	CHECK_EQ_INT(sched_delete(a, NULL), DD_OK);
	char jd[PATH_MAX];
	sched_job_dir(a, jd, sizeof jd);
	CHECK(access(jd, F_OK) != 0);
}

static void test_final_state_from_the_worker(void)
{
	int64_t f = submit("{\"steps\":3,\"step_ms\":1,\"fail_at\":1}", 1);
	int64_t c = submit("{\"steps\":3,\"step_ms\":1,\"crash_at\":1}", 1);
	int64_t x = submit("{\"steps\":3,\"step_ms\":1,\"exit_at\":1,\"exit_code\":7}", 1);
	CHECK(wait_final(f, 5000) && wait_final(c, 5000) && wait_final(x, 5000));
	cJSON *j = NULL;
	store_job_json(f, 1, &j, NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "state")), "error");
	CHECK_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")), "failed at step 1");
	cJSON_Delete(j);
	store_job_json(c, 1, &j, NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "state")), "error");
	CHECK_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")), "signal 11");
	cJSON_Delete(j);
	store_job_json(x, 1, &j, NULL);
	CHECK_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")), "status 7");
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "exit"), "code")->valueint, 7);
	cJSON_Delete(j);
}

/* The keys of job.json, a worker's whole input, and nothing else: a field the
 * job's record (the API's detail) has or gains never reaches a worker. */
static const char *const SPEC_KEYS[] = { "id", "kind", "name", "owner", "parents", "params", "resources", "guard", NULL };

static int spec_key(const char *k)
{
	for (int i = 0; SPEC_KEYS[i]; i++)
		if (k && strcmp(k, SPEC_KEYS[i]) == 0)
			return 1;
	return 0;
}

/* Every key of o is in SPEC_KEYS, and (all) every one of SPEC_KEYS is in o. */
static void check_spec_keys(const cJSON *o, int all)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		if (!spec_key(it->string))
			fprintf(stderr, "  job.json has \"%s\"\n", it->string);
		CHECK(spec_key(it->string));
	}
	for (int i = 0; all && SPEC_KEYS[i]; i++)
		CHECK(cJSON_HasObjectItem(o, SPEC_KEYS[i]));
}

static void test_job_json_holds_only_the_allowed_keys(void)
{
	int64_t id = submit("{\"steps\":1,\"step_ms\":1}", 1);
	CHECK(wait_final(id, 5000));
	/* notes, and a resume: job.json written again from a record that has more */
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_job_patch(id, NULL, "notes are the API's, not the worker's", &err), DD_OK);
	cJSON *params = cJSON_Parse("{\"steps\":1,\"step_ms\":1}");
	CHECK_EQ_INT(sched_requeue(id, params, &LOCAL, &err), DD_OK);
	cJSON_Delete(params);
	CHECK(wait_final(id, 5000));
	char jd[PATH_MAX], path[PATH_MAX + 16];
	sched_job_dir(id, jd, sizeof jd);
	jobdir_file(jd, JOBDIR_JOB, path, sizeof path);
	cJSON *spec = NULL;
	CHECK_EQ_INT(json_read_file(path, 1 << 20, &spec, &err), DD_OK);
	check_spec_keys(spec, 1);
	CHECK_EQ_INT((int)cJSON_GetObjectItem(spec, "id")->valuedouble, (int)id);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(spec, "kind")), "test");
	cJSON_Delete(spec);
	/* a field the record gains tomorrow stays out */
	cJSON *record = NULL;
	CHECK_EQ_INT(store_job_json(id, 1, &record, &err), DD_OK);
	cJSON_AddStringToObject(record, "a_new_api_field", "secret");
	spec = job_spec(record);
	CHECK(spec != NULL);
	CHECK(!cJSON_HasObjectItem(spec, "a_new_api_field"));
	CHECK(!cJSON_HasObjectItem(spec, "notes") && !cJSON_HasObjectItem(spec, "state"));
	check_spec_keys(spec, 0);
	cJSON_Delete(spec);
	cJSON_Delete(record);
}

/* The scheduler over the store fixture_main opened, with the test build's workers. */
static void tests(void)
{
	log_set_level(LOG_WARN);
	char exe[PATH_MAX]; /* the workers: DEEPDESK_BIN (make asan's build), else the test build */
	const char *bin = getenv("DEEPDESK_BIN") ? getenv("DEEPDESK_BIN") : "build/deepdesk-test";
	if (!realpath(bin, exe)) {
		fprintf(stderr, "%s: not found; run from the repository root after `make`\n", bin);
		check_failed++;
		return;
	}
	struct dd_err err = { 0 };
	struct sched_config cfg = { .data_dir = dir, .exe = exe, .cpu_slots = 1, .abort_grace_ms = 2000,
				    .poll_ms = 10, .executor = &exec_local };
	if (sched_start(&cfg, listener, NULL, &err) != DD_OK) {
		fprintf(stderr, "%s\n", err.msg);
		check_failed++;
		return;
	}
	RUN(test_state_names_and_moves);
	RUN(test_unknown_kind_and_bad_params_refused);
	RUN(test_caller_checks);
	RUN(test_one_slot_runs_one_job_at_a_time);
	RUN(test_abort_queued_and_running);
	RUN(test_job_json_holds_only_the_allowed_keys);
	RUN(test_final_state_from_the_worker);
	sched_stop();
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_STORE, tests);
}
