/* test_store.c — the SQLite store: migrations, jobs and their state machine,
 * parents and dependants, listing. */
#define _GNU_SOURCE
#include "../../store/store.h"
#include "../../common/fsutil.h"
#include "fixture.h"
#include "rawsql.h"

static char dir[64];

static int64_t new_job(const char *kind, const char *name, const int64_t *parents, int n)
{
	int64_t id = 0;
	struct dd_err err = { 0 };
	int rc = store_job_insert(kind, name, "local", "{\"a\":1}", "{\"cpu_slots\":2}", parents, n, &id, &err);
	if (rc)
		fprintf(stderr, "  insert: %s\n", err.msg);
	return rc ? -1 : id;
}

static void test_migrates_fresh_and_reopens(void)
{
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_init(dir, &err), DD_OK);
	CHECK_EQ_INT(rawsql_value(dir, "PRAGMA user_version", NULL, 0), store_schema_version());
	char mode[16];
	rawsql_value(dir, "PRAGMA journal_mode", mode, sizeof mode);
	CHECK_STR(mode, "wal");
	int64_t id = new_job("test", "one", NULL, 0);
	CHECK(id > 0);
	/* opening again migrates nothing and keeps the data */
	store_thread_end();
	CHECK_EQ_INT(store_init(dir, &err), DD_OK);
	int64_t n = 0;
	store_job_count(&n, NULL);
	CHECK_EQ_INT(n, 1);
}

static void test_refuses_newer_schema(void)
{
	char other[64];
	check_tmpdir(other, sizeof other);
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_init(other, &err), DD_OK);
	CHECK_EQ_INT(rawsql_exec(other, "PRAGMA user_version=999"), SQLITE_OK);
	store_thread_end();
	CHECK_EQ_INT(store_init(other, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "newer than this deepdesk");
	store_thread_end();
	fs_rm_rf(other, NULL);
	CHECK_EQ_INT(store_init(dir, &err), DD_OK); /* back to the main test store */
}

static void test_state_machine_and_history(void)
{
	struct dd_err err = { 0 };
	int64_t id = new_job("test", "sm", NULL, 0);
	struct job_row row;
	CHECK_EQ_INT(store_job_row(id, &row, NULL), DD_OK);
	CHECK_EQ_INT(row.state, JOB_QUEUED);
	CHECK_EQ_INT(row.cpu_slots, 2);
	/* queued cannot jump to done */
	CHECK_EQ_INT(store_job_move(id, JOB_DONE, NULL, 0, -1, &err), DD_ECONFLICT);
	CHECK_CONTAINS(err.msg, "cannot become done");
	CHECK_EQ_INT(store_job_started(id, 4242, 77, NULL), DD_OK);
	CHECK_EQ_INT(store_job_started(id, 4242, 77, NULL), DD_ECONFLICT);
	CHECK_EQ_INT(store_job_progress(id, 0.5, 10, NULL), DD_OK);
	CHECK_EQ_INT(store_job_move(id, JOB_DONE, NULL, 0, -1, NULL), DD_OK);
	/* a finished job is never moved again: no "done" job can become aborted */
	CHECK_EQ_INT(store_job_move(id, JOB_ABORTED, "late abort", -1, -1, NULL), DD_ECONFLICT);
	cJSON *j = NULL;
	CHECK_EQ_INT(store_job_json(id, 1, &j, NULL), DD_OK);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "state")), "done");
	CHECK(cJSON_GetObjectItem(j, "progress")->valuedouble == 1.0);
	cJSON *hist = cJSON_GetObjectItem(j, "history");
	CHECK_EQ_INT(cJSON_GetArraySize(hist), 3);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(hist, 2), "state")), "done");
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "exit"), "code")->valueint, 0);
	CHECK_EQ_INT(cJSON_GetObjectItem(j, "pid")->valueint, 4242);
	cJSON_Delete(j);
}

static void test_error_keeps_message_and_signal(void)
{
	int64_t id = new_job("test", "err", NULL, 0);
	store_job_started(id, 1, 1, NULL);
	CHECK_EQ_INT(store_job_move(id, JOB_ERROR, "killed by signal 9", -1, 9, NULL), DD_OK);
	cJSON *j = NULL;
	store_job_json(id, 1, &j, NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")), "killed by signal 9");
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "exit"), "signal")->valueint, 9);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "exit"), "code")));
	cJSON_Delete(j);
}

static void test_interrupted_can_be_requeued(void)
{
	int64_t id = new_job("test", "int", NULL, 0);
	store_job_started(id, 1, 1, NULL);
	CHECK_EQ_INT(store_job_move(id, JOB_INTERRUPTED, "server died", -1, -1, NULL), DD_OK);
	CHECK_EQ_INT(store_job_move(id, JOB_QUEUED, NULL, -1, -1, NULL), DD_OK);
	struct job_row row;
	store_job_row(id, &row, NULL);
	CHECK_EQ_INT(row.state, JOB_QUEUED);
	CHECK_EQ_INT(row.pid, 0);
}

static void test_parents_and_delete(void)
{
	struct dd_err err = { 0 };
	int64_t a = new_job("test", "parent", NULL, 0);
	int64_t pa[] = { a };
	int64_t b = new_job("test", "child", pa, 1);
	CHECK(b > 0);
	int64_t bad[] = { 999999 };
	int64_t id;
	CHECK_EQ_INT(store_job_insert("test", "x", "local", "{}", "{}", bad, 1, &id, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "999999 does not exist");
	int64_t twice[] = { a, a };
	CHECK_EQ_INT(store_job_insert("test", "x", "local", "{}", "{}", twice, 2, &id, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "twice");
	int64_t before = 0, after = 0;
	store_job_count(&before, NULL);
	CHECK_EQ_INT(store_job_delete(a, &err), DD_ECONFLICT);
	CHECK_CONTAINS(err.msg, "child");
	store_job_count(&after, NULL);
	CHECK_EQ_INT(before, after);
	cJSON *j = NULL;
	store_job_json(a, 1, &j, NULL);
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "children")), 1);
	cJSON_Delete(j);
	CHECK_EQ_INT(store_job_delete(b, NULL), DD_OK);
	CHECK_EQ_INT(store_job_delete(a, NULL), DD_OK);
	CHECK_EQ_INT(store_job_delete(a, &err), DD_ENOENT);
}

static void test_list_filters_and_order(void)
{
	int64_t x = new_job("other", "x", NULL, 0);
	int64_t y = new_job("other", "y", NULL, 0);
	cJSON *list = NULL;
	int total = 0;
	CHECK_EQ_INT(store_job_list("other", NULL, 10, 0, &list, &total, NULL), DD_OK);
	CHECK_EQ_INT(total, 2);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "id")->valueint, y);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 1), "id")->valueint, x);
	cJSON_Delete(list);
	CHECK_EQ_INT(store_job_list("other", NULL, 1, 1, &list, &total, NULL), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(list), 1);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "id")->valueint, x);
	cJSON_Delete(list);
	CHECK_EQ_INT(store_job_list(NULL, "done", 100, 0, &list, &total, NULL), DD_OK);
	cJSON *it;
	cJSON_ArrayForEach(it, list) CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(it, "state")), "done");
	cJSON_Delete(list);
	CHECK_EQ_INT(store_job_patch(x, "renamed", "some notes", NULL), DD_OK);
	CHECK_EQ_INT(store_job_patch(x, NULL, NULL, NULL), DD_OK);
	cJSON *j = NULL;
	store_job_json(x, 1, &j, NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "name")), "renamed");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "notes")), "some notes");
	cJSON_Delete(j);
	CHECK_EQ_INT(store_job_patch(123456, "n", NULL, NULL), DD_ENOENT);
}

static void test_jobs_in_state_oldest_first(void)
{
	struct job_row *rows = NULL;
	int n = 0;
	CHECK_EQ_INT(store_jobs_in_state(JOB_QUEUED, &rows, &n, NULL), DD_OK);
	CHECK(n >= 2);
	for (int i = 1; i < n; i++)
		CHECK(rows[i].id > rows[i - 1].id);
	free(rows);
}

static void tests(void)
{
	RUN(test_migrates_fresh_and_reopens);
	RUN(test_refuses_newer_schema);
	RUN(test_state_machine_and_history);
	RUN(test_error_keeps_message_and_signal);
	RUN(test_interrupted_can_be_requeued);
	RUN(test_parents_and_delete);
	RUN(test_list_filters_and_order);
	RUN(test_jobs_in_state_oldest_first);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests);
}
