/* test_store_exec.c — where a job runs when a cluster runs it: the job_executor
 * table (migration 1 -> 2) that keeps a job's Slurm id for a restarted server, what
 * Slurm last said of it, and the "executor" object a job's JSON carries. */
#define _GNU_SOURCE
#include "../../store/store.h"
#include "../../common/fsutil.h"
#include "fixture.h"

static char dir[64];

static int64_t new_job(void)
{
	int64_t id = 0;
	struct dd_err err = { 0 };
	int rc = store_job_insert("test", "one", "local", "{}", "{\"cpu_slots\":1}", NULL, 0, &id, &err);
	if (rc)
		fprintf(stderr, "  insert: %s\n", err.msg);
	return rc ? -1 : id;
}

static const cJSON *field(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static void test_a_local_job_has_no_executor(void)
{
	int64_t id = new_job();
	char name[32] = "x", ext[32] = "x";
	CHECK_EQ_INT(store_job_exec_get(id, name, sizeof name, ext, sizeof ext), -1);
	cJSON *j = NULL;
	CHECK_EQ_INT(store_job_json(id, 1, &j, NULL), DD_OK);
	CHECK(field(j, "executor") == NULL);
	cJSON_Delete(j);
}

static void test_slurm_id_state_and_json(void)
{
	struct dd_err err = { 0 };
	int64_t id = new_job();
	CHECK_EQ_INT(store_job_exec_set(id, "slurm", "4711", &err), DD_OK);
	CHECK_EQ_INT(store_job_exec_state(id, "PENDING", "Resources", 3, 0, &err), DD_OK);
	char name[32], ext[32];
	CHECK_EQ_INT(store_job_exec_get(id, name, sizeof name, ext, sizeof ext), 0);
	CHECK_STR(name, "slurm");
	CHECK_STR(ext, "4711");
	for (int detail = 0; detail <= 1; detail++) {
		cJSON *j = NULL;
		CHECK_EQ_INT(store_job_json(id, detail, &j, NULL), DD_OK);
		const cJSON *e = field(j, "executor");
		CHECK(cJSON_IsObject(e));
		CHECK_STR(cJSON_GetStringValue(field(e, "name")), "slurm");
		CHECK_STR(cJSON_GetStringValue(field(e, "job_id")), "4711");
		CHECK_STR(cJSON_GetStringValue(field(e, "state")), "PENDING");
		CHECK_STR(cJSON_GetStringValue(field(e, "reason")), "Resources");
		CHECK_EQ_INT(field(e, "position")->valueint, 3);
		CHECK_EQ_INT(field(e, "restarts")->valueint, 0);
		cJSON_Delete(j);
	}
	/* running: no reason, no place in the queue (null, not absent) */
	CHECK_EQ_INT(store_job_exec_state(id, "RUNNING", "", 0, 1, &err), DD_OK);
	cJSON *j = NULL;
	CHECK_EQ_INT(store_job_json(id, 1, &j, NULL), DD_OK);
	const cJSON *e = field(j, "executor");
	CHECK(cJSON_IsNull(field(e, "reason")));
	CHECK(cJSON_IsNull(field(e, "position")));
	CHECK_EQ_INT(field(e, "restarts")->valueint, 1);
	cJSON_Delete(j);
	/* a new submission replaces the id; a local run forgets it */
	CHECK_EQ_INT(store_job_exec_set(id, "slurm", "4712", &err), DD_OK);
	CHECK_EQ_INT(store_job_exec_get(id, name, sizeof name, ext, sizeof ext), 0);
	CHECK_STR(ext, "4712");
	CHECK_EQ_INT(store_job_exec_set(id, NULL, "", &err), DD_OK);
	CHECK_EQ_INT(store_job_exec_get(id, name, sizeof name, ext, sizeof ext), -1);
}

static void test_deleting_the_job_deletes_its_row(void)
{
	int64_t id = new_job();
	CHECK_EQ_INT(store_job_exec_set(id, "slurm", "99", NULL), DD_OK);
	CHECK_EQ_INT(store_job_delete(id, NULL), DD_OK);
	char name[32], ext[32];
	CHECK_EQ_INT(store_job_exec_get(id, name, sizeof name, ext, sizeof ext), -1); /* its row went with it */
}

static void tests(void)
{
	RUN(test_a_local_job_has_no_executor);
	RUN(test_slurm_id_state_and_json);
	RUN(test_deleting_the_job_deletes_its_row);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_STORE, tests);
}
