/* test_quota.c — the store's side of the fair queue and quotas: the queue's
 * order (priority, then age), priorities only for queued jobs, quotas by role
 * and per user (kept, reset, no limit), a day's usage counted from the runs
 * that overlap it, and the owner served last; the per-job memory limit of a
 * user (the lower of the server's and the quota's), as the worker gets it. */
#define _GNU_SOURCE
#include "../../store/store.h"
#include "../../common/fsutil.h"
#include "../../jobs/kind_train_memory.h"
#include "fixture.h"
#include "rawsql.h"

static char dir[64];

static int64_t add_user(const char *name, const char *role)
{
	int64_t id = 0;
	CHECK_EQ_INT(store_user_add(name, role, "x", 0, &id, NULL), DD_OK);
	return id;
}

static int64_t new_job(const char *owner, const char *resources)
{
	int64_t id = 0;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_job_insert("test", "j", owner, "{}", resources, NULL, 0, &id, &err), DD_OK);
	return id;
}

#define SQL(...)                                                                       \
	do {                                                                           \
		char text_[512];                                                       \
		snprintf(text_, sizeof text_, __VA_ARGS__);                            \
		CHECK_EQ_INT(rawsql_exec(dir, text_), SQLITE_OK);                     \
	} while (0)

static void test_queue_order_and_priority(void)
{
	int64_t ann = add_user("ann", "learner");
	int64_t a = new_job("ann", NULL), b = new_job("local", NULL), c = new_job("ann", NULL);
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_job_set_priority(c, 5, &err), DD_OK);
	struct job_row *rows = NULL;
	int n = 0;
	CHECK_EQ_INT(store_jobs_queue(&rows, &n, &err), DD_OK);
	CHECK_EQ_INT(n, 3);
	if (n == 3) {
		CHECK_EQ_INT(rows[0].id, c); /* priority first */
		CHECK_EQ_INT(rows[0].priority, 5);
		CHECK_EQ_INT(rows[0].owner_id, ann);
		CHECK_EQ_INT(rows[1].id, a); /* then age */
		CHECK_EQ_INT(rows[2].id, b);
		CHECK_EQ_INT(rows[2].owner_id, 0); /* the local user */
	}
	free(rows);
	int max = 0;
	CHECK_EQ_INT(store_queue_max_priority(&max, NULL), DD_OK);
	CHECK_EQ_INT(max, 5);
	CHECK_EQ_INT(store_job_started(a, 1, 1, NULL), DD_OK);
	CHECK_EQ_INT(store_job_set_priority(a, 1, &err), DD_ECONFLICT);
	CHECK_CONTAINS(err.msg, "is running");
	CHECK_EQ_INT(store_job_set_priority(99999, 1, &err), DD_ENOENT);
	CHECK(store_owner_last_start(ann) > 0);
	CHECK_EQ_INT(store_owner_last_start(0), 0);
	CHECK_EQ_INT(store_user_id("ann"), ann);
	CHECK_EQ_INT(store_user_id("nobody"), 0);
}

static void test_quota_defaults_and_overrides(void)
{
	int64_t ben = add_user("ben", "learner"), tea = add_user("tea", "instructor"), root = add_user("root", "admin");
	struct store_quota q;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_quota_get(ben, &q, &err), DD_OK);
	CHECK_EQ_INT(q.jobs, 2);
	CHECK_EQ_INT(q.cpu_minutes, 600);
	CHECK_EQ_INT(q.gpu_minutes, 120);
	CHECK_EQ_INT(q.disk_bytes, 10ll << 30);
	CHECK_EQ_INT(q.memory_bytes, 4ll << 30);
	CHECK_EQ_INT(store_quota_get(tea, &q, &err), DD_OK);
	CHECK_EQ_INT(q.memory_bytes, 0);
	CHECK_EQ_INT(q.jobs, 4);
	CHECK_EQ_INT(q.cpu_minutes, 0);
	CHECK_EQ_INT(store_quota_get(root, &q, &err), DD_OK);
	CHECK_EQ_INT(q.jobs + q.cpu_minutes + q.gpu_minutes + q.disk_bytes + q.memory_bytes, 0);
	CHECK_EQ_INT(store_quota_get(0, &q, &err), DD_OK); /* no accounts: no limit */
	CHECK_EQ_INT(q.jobs, 0);

	/* -2 keeps, -1 goes back to the role's default, 0 is no limit */
	CHECK_EQ_INT(store_quota_set(ben, &(struct store_quota){ 5, 0, -2, -2, 1ll << 30 }, &err), DD_OK);
	CHECK_EQ_INT(store_quota_get(ben, &q, &err), DD_OK);
	CHECK_EQ_INT(q.jobs, 5);
	CHECK_EQ_INT(q.cpu_minutes, 0);
	CHECK_EQ_INT(q.gpu_minutes, 120);
	CHECK_EQ_INT(q.memory_bytes, 1ll << 30);
	CHECK_EQ_INT(store_quota_set(ben, &(struct store_quota){ -1, -2, 7, -2, -2 }, &err), DD_OK);
	CHECK_EQ_INT(store_quota_get(ben, &q, &err), DD_OK);
	CHECK_EQ_INT(q.jobs, 2);
	CHECK_EQ_INT(q.cpu_minutes, 0);
	CHECK_EQ_INT(q.gpu_minutes, 7);
	CHECK_EQ_INT(q.memory_bytes, 1ll << 30); /* kept */
	CHECK_EQ_INT(store_quota_set(ben, &(struct store_quota){ -2, -2, -2, -2, -1 }, &err), DD_OK);
	CHECK_EQ_INT(store_quota_get(ben, &q, &err), DD_OK);
	CHECK_EQ_INT(q.memory_bytes, 4ll << 30); /* the learner's default again */
	/* a role change moves the defaults, not what was set */
	CHECK_EQ_INT(store_user_set_role(ben, "instructor", &err), DD_OK);
	CHECK_EQ_INT(store_quota_get(ben, &q, &err), DD_OK);
	CHECK_EQ_INT(q.jobs, 4);
	CHECK_EQ_INT(q.gpu_minutes, 7);
	CHECK_EQ_INT(store_quota_set(99999, &(struct store_quota){ 1, -2, -2, -2, -2 }, &err), DD_ENOENT);
	CHECK_CONTAINS(err.msg, "user 99999");
}

/* A job's memory limit is the lower of the server's and its owner's quota (0 in
 * either: no limit from it); the scheduler writes it into job.json's guard, and
 * the local executor's RLIMIT_DATA comes from there. */
static void test_memory_quota(void)
{
	int64_t kim = add_user("kim", "learner"), boss = add_user("boss", "admin");
	struct dd_err err = { 0 };
	int from = -1;
	job_memory_set_max(8ll << 30);
	CHECK_EQ_INT(job_memory_max_for(kim, &from), 4ll << 30); /* the learner's default */
	CHECK_EQ_INT(from, 1);
	CHECK_EQ_INT(job_memory_max_for(boss, &from), 8ll << 30); /* no quota: the server's */
	CHECK_EQ_INT(from, 0);
	CHECK_EQ_INT(job_memory_max_for(0, NULL), 8ll << 30);
	job_memory_set_max(1ll << 30); /* the server's is lower */
	CHECK_EQ_INT(job_memory_max_for(kim, &from), 1ll << 30);
	CHECK_EQ_INT(from, 0);
	job_memory_set_max(0); /* --job-memory-max off: the quota alone */
	CHECK_EQ_INT(job_memory_max_for(kim, NULL), 4ll << 30);
	CHECK_EQ_INT(store_quota_set(kim, &(struct store_quota){ -2, -2, -2, -2, 0 }, &err), DD_OK);
	CHECK_EQ_INT(job_memory_max_for(kim, NULL), 0); /* neither */
	CHECK_EQ_INT(store_quota_set(kim, &(struct store_quota){ -2, -2, -2, -2, 300ll << 20 }, &err), DD_OK);
	job_memory_set_max(8ll << 30);

	/* the guard, and the worker's cap from it */
	char jd[128], path[160];
	snprintf(jd, sizeof jd, "%s/job7", dir);
	CHECK_EQ_INT(fs_mkdir_p(jd, &err), DD_OK);
	CHECK_EQ_INT(job_memory_cap_dir(jd), job_memory_cap()); /* no job.json: the server's */
	cJSON *job = cJSON_Parse("{\"kind\":\"model\",\"guard\":{\"roots\":[]}}");
	train_memory_guard(job, kim);
	train_memory_guard(job, kim); /* again at the next start: one field */
	cJSON *g = cJSON_GetObjectItemCaseSensitive(job, "guard");
	CHECK_EQ_INT(cJSON_GetArraySize(g), 2);
	CHECK_EQ_INT((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(g, "memory_max")), 300ll << 20);
	char *text = cJSON_Print(job);
	snprintf(path, sizeof path, "%s/job.json", jd);
	CHECK_EQ_INT(fs_write_file_atomic(path, text, strlen(text), &err), DD_OK);
	free(text);
	cJSON_Delete(job);
	int64_t cap = job_memory_cap_dir(jd);
	CHECK(cap > (300ll << 20) + (75ll << 20) && cap < job_memory_cap()); /* the limit + a quarter + stacks */
	job_memory_set_max(-1);
}

static void test_usage_of_a_day(void)
{
	int64_t cat = add_user("cat", "learner");
	int64_t day = 1000ll * 86400 * 20000; /* a UTC midnight */
	/* 10 min before midnight to 20 min after, on 2 slots: 40 slot-minutes today */
	int64_t a = new_job("cat", "{\"cpu_slots\":2,\"gpus\":[]}");
	SQL("UPDATE jobs SET state='done', started_at=%lld, finished_at=%lld WHERE id=%lld", (long long)(day - 600000),
	    (long long)(day + 1200000), (long long)a);
	/* 30 min on 1 slot and 2 GPUs */
	int64_t b = new_job("cat", "{\"cpu_slots\":1,\"gpus\":[]}");
	CHECK_EQ_INT(store_job_set_gpus_held(b, 2, NULL), DD_OK);
	SQL("UPDATE jobs SET state='done', started_at=%lld, finished_at=%lld WHERE id=%lld", (long long)(day + 3600000),
	    (long long)(day + 5400000), (long long)b);
	/* yesterday only: not counted */
	int64_t c = new_job("cat", "{\"cpu_slots\":4}");
	SQL("UPDATE jobs SET state='done', started_at=%lld, finished_at=%lld WHERE id=%lld", (long long)(day - 7200000),
	    (long long)(day - 3600000), (long long)c);
	new_job("cat", NULL); /* queued */
	struct store_usage u;
	CHECK_EQ_INT(store_usage(cat, day, &u, NULL), DD_OK);
	CHECK(u.cpu_minutes > 69.99 && u.cpu_minutes < 70.01);
	CHECK(u.gpu_minutes > 59.99 && u.gpu_minutes < 60.01);
	CHECK_EQ_INT(u.running, 0);
	CHECK_EQ_INT(u.queued, 1);
	int64_t *ids = NULL;
	int n = 0;
	CHECK_EQ_INT(store_job_ids_of(cat, &ids, &n, NULL), DD_OK);
	CHECK_EQ_INT(n, 4);
	free(ids);
	CHECK_EQ_INT(store_job_set_gpus_held(99999, 1, NULL), DD_ENOENT);
	cJSON *states = NULL;
	CHECK_EQ_INT(store_jobs_by_state(&states, NULL), DD_OK);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(states, "done")) >= 3);
	cJSON_Delete(states);
}

static void test_disable(void)
{
	int64_t dan = add_user("dan", "learner");
	int64_t sid = 0;
	CHECK_EQ_INT(store_session_add(dan, "h", "c", 0, 1ll << 50, &sid, NULL), DD_OK);
	CHECK_EQ_INT(store_user_set_disabled(dan, 1, NULL), DD_OK);
	struct store_user u;
	CHECK_EQ_INT(store_user_get(dan, &u, NULL, NULL), DD_OK);
	CHECK_EQ_INT(u.disabled, 1);
	char sql[96];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM sessions WHERE user_id=%lld", (long long)dan);
	CHECK_EQ_INT(rawsql_value(dir, sql, NULL, 0), 0); /* logged out everywhere */
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_user_set_disabled(99999, 1, &err), DD_ENOENT);
}

static void tests(void)
{
	RUN(test_queue_order_and_priority);
	RUN(test_quota_defaults_and_overrides);
	RUN(test_memory_quota);
	RUN(test_usage_of_a_day);
	RUN(test_disable);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_STORE, tests);
}
