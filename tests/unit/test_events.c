/* test_events.c — the event log: append, tail with a partial last line, paging,
 * final status, a full disk (a write cut short is undone; the reserve). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../jobs/events.h"
#include "fixture.h"

static char dir[64];

static void collect(void *ctx, int64_t seq, cJSON *ev)
{
	cJSON *arr = ctx;
	cJSON *item = ev ? cJSON_Duplicate(ev, 1) : cJSON_CreateString("bad");
	cJSON_AddNumberToObject(item, "seq_seen", (double)seq);
	cJSON_AddItemToArray(arr, item);
}

static void raw_append(const char *text)
{
	char path[128];
	snprintf(path, sizeof path, "%s/" EVENTS_FILE, dir);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	ssize_t w = write(fd, text, strlen(text));
	(void)w;
	close(fd);
}

static void test_append_adds_time_and_one_line_each(void)
{
	struct events_writer w;
	CHECK_EQ_INT(events_writer_open(&w, dir, NULL), DD_OK);
	for (int i = 0; i < 3; i++) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "type", "log");
		cJSON_AddNumberToObject(ev, "i", i);
		CHECK_EQ_INT(events_append(&w, ev, NULL), DD_OK);
		cJSON_Delete(ev);
	}
	events_writer_close(&w);
	char path[128], *text = NULL;
	snprintf(path, sizeof path, "%s/" EVENTS_FILE, dir);
	CHECK_EQ_INT(fs_read_file(path, 1 << 20, &text, NULL, NULL), DD_OK);
	int lines = 0;
	for (char *p = text; p && *p; p++)
		lines += *p == '\n';
	CHECK_EQ_INT(lines, 3);
	CHECK(strncmp(text, "{\"t\":", 5) == 0);
	free(text);
}

static void test_tail_waits_for_partial_line(void)
{
	struct events_tail t = { .offset = 0, .seq = 0 };
	snprintf(t.path, sizeof t.path, "%s/" EVENTS_FILE, dir);
	cJSON *got = cJSON_CreateArray();
	CHECK_EQ_INT(events_tail_poll(&t, collect, got, NULL), 3);
	raw_append("{\"type\":\"log\",\"msg\":\"half");
	CHECK_EQ_INT(events_tail_poll(&t, collect, got, NULL), 0);
	CHECK_EQ_INT(cJSON_GetArraySize(got), 3);
	raw_append(" done\"}\nnot json\n");
	CHECK_EQ_INT(events_tail_poll(&t, collect, got, NULL), 2);
	CHECK_EQ_INT(cJSON_GetArraySize(got), 5);
	cJSON *fourth = cJSON_GetArrayItem(got, 3);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(fourth, "msg")), "half done");
	CHECK_EQ_INT(cJSON_GetObjectItem(fourth, "seq_seen")->valueint, 4);
	CHECK(cJSON_IsString(cJSON_GetArrayItem(got, 4))); /* the torn line is delivered as unreadable */
	CHECK_EQ_INT(t.seq, 5);
	/* a tail resumed from a saved position neither repeats nor skips */
	struct events_tail t2 = t;
	raw_append("{\"type\":\"log\",\"msg\":\"six\"}\n");
	cJSON *more = cJSON_CreateArray();
	CHECK_EQ_INT(events_tail_poll(&t2, collect, more, NULL), 1);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(more, 0), "seq_seen")->valueint, 6);
	cJSON_Delete(more);
	cJSON_Delete(got);
}

static void test_page(void)
{
	cJSON *out = cJSON_CreateArray();
	int64_t last;
	int more;
	CHECK_EQ_INT(events_read_page(dir, 1, 2, out, &last, &more, NULL), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(out), 2);
	CHECK_EQ_INT(last, 3);
	CHECK(more);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "seq")->valueint, 2);
	cJSON_Delete(out);
	out = cJSON_CreateArray();
	CHECK_EQ_INT(events_read_page(dir, 5, 100, out, &last, &more, NULL), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(out), 1);
	CHECK_EQ_INT(last, 6);
	CHECK(!more);
	cJSON_Delete(out);
	/* a folder with no log yet is an empty page, not an error */
	out = cJSON_CreateArray();
	CHECK_EQ_INT(events_read_page("/nonexistent-dir", 0, 10, out, &last, &more, NULL), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(out), 0);
	cJSON_Delete(out);
}

static void test_final_status_and_logs(void)
{
	char state[16], msg[128];
	CHECK_EQ_INT(events_final_status(dir, state, sizeof state, msg, sizeof msg), 0);
	raw_append("{\"type\":\"status\",\"state\":\"error\",\"message\":\"boom\"}\n");
	CHECK_EQ_INT(events_final_status(dir, state, sizeof state, msg, sizeof msg), 1);
	CHECK_STR(state, "error");
	CHECK_STR(msg, "boom");
	/* a resume ("running" after the end) cancels the earlier end */
	raw_append("{\"type\":\"status\",\"state\":\"running\"}\n");
	CHECK_EQ_INT(events_final_status(dir, state, sizeof state, msg, sizeof msg), 0);
	cJSON *logs = cJSON_CreateArray();
	events_last_logs(dir, 2, logs);
	CHECK_EQ_INT(cJSON_GetArraySize(logs), 2);
	CHECK_STR(cJSON_GetArrayItem(logs, 0)->valuestring, "six");
	CHECK_STR(cJSON_GetArrayItem(logs, 1)->valuestring, "boom");
	cJSON_Delete(logs);
}

static void test_full_disk_is_an_error(void)
{
	/* /dev/full answers every write with ENOSPC */
	struct events_writer w = { .fd = open("/dev/full", O_WRONLY) };
	struct dd_err err = { 0 };
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "log");
	int rc = events_append(&w, ev, &err);
	CHECK_EQ_INT(rc, DD_ENOSPC);
	CHECK_CONTAINS(err.msg, "no space left on the data folder's file system");
	cJSON_Delete(ev);
	events_writer_close(&w);
}

/* A write cut short (here by RLIMIT_FSIZE, as a filling disk cuts one) leaves no
 * torn line: the log still ends in '\n' and every line parses, so the next event
 * does not run into half of this one. */
static void test_short_write_is_undone(void)
{
	char d2[64];
	check_tmpdir(d2, sizeof d2);
	struct events_writer w;
	CHECK_EQ_INT(events_writer_open(&w, d2, NULL), DD_OK);
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "log");
	cJSON_AddStringToObject(ev, "msg", "first");
	CHECK_EQ_INT(events_append(&w, ev, NULL), DD_OK);
	cJSON_Delete(ev);
	struct stat st;
	char path[128];
	snprintf(path, sizeof path, "%s/" EVENTS_FILE, d2);
	CHECK(stat(path, &st) == 0);
	struct rlimit old, lim;
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = (rlim_t)st.st_size + 10; /* room for 10 bytes of the next line */
	signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "log");
	cJSON_AddStringToObject(ev, "msg", "this line does not fit in the ten bytes left");
	struct dd_err err = { 0 };
	CHECK_EQ_INT(events_append(&w, ev, &err), DD_ENOSPC);
	CHECK_CONTAINS(err.msg, EVENTS_FILE);
	cJSON_Delete(ev);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	struct stat after;
	CHECK(stat(path, &after) == 0);
	CHECK_EQ_INT((int)after.st_size, (int)st.st_size);
	ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "log");
	cJSON_AddStringToObject(ev, "msg", "third");
	CHECK_EQ_INT(events_append(&w, ev, NULL), DD_OK);
	cJSON_Delete(ev);
	events_writer_close(&w);
	cJSON *out = cJSON_CreateArray();
	int64_t last;
	int more;
	CHECK_EQ_INT(events_read_page(d2, 0, 10, out, &last, &more, NULL), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(out), 2);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "msg")), "third");
	cJSON_Delete(out);
	fs_rm_rf(d2, NULL);
}

/* The reserve is a real file beside the log until released, and close releases it. */
static void test_reserve(void)
{
	char d2[64], path[128];
	check_tmpdir(d2, sizeof d2);
	snprintf(path, sizeof path, "%s/" EVENTS_FILE ".reserve", d2);
	struct events_writer w;
	CHECK_EQ_INT(events_writer_open(&w, d2, NULL), DD_OK);
	CHECK_EQ_INT(events_writer_reserve(&w, 10000, NULL), DD_OK);
	struct stat st;
	CHECK(stat(path, &st) == 0 && st.st_size == 10000);
	events_writer_release(&w);
	CHECK(access(path, F_OK) != 0);
	CHECK_EQ_INT(events_writer_reserve(&w, 100, NULL), DD_OK);
	events_writer_close(&w);
	CHECK(access(path, F_OK) != 0);
	fs_rm_rf(d2, NULL);
}

static void test_long_log_pages_in_order(void)
{
	char d2[64];
	check_tmpdir(d2, sizeof d2);
	struct events_writer w;
	events_writer_open(&w, d2, NULL);
	for (int i = 1; i <= 5000; i++) {
		cJSON *ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "i", i);
		events_append(&w, ev, NULL);
		cJSON_Delete(ev);
	}
	events_writer_close(&w);
	/* page through twice: the second pass seeks by the checkpoints of the first */
	for (int pass = 0; pass < 2; pass++) {
		int64_t after = 0, last;
		int more = 1, ok = 1, pages = 0;
		while (more) {
			cJSON *out = cJSON_CreateArray();
			events_read_page(d2, after, 700, out, &last, &more, NULL);
			cJSON *it;
			int64_t expect = after + 1;
			cJSON_ArrayForEach(it, out)
			{
				ok &= cJSON_GetObjectItem(it, "seq")->valueint == expect &&
				      cJSON_GetObjectItem(it, "i")->valueint == expect;
				expect++;
			}
			cJSON_Delete(out);
			after = last;
			pages++;
		}
		CHECK(ok);
		CHECK_EQ_INT(after, 5000);
		CHECK_EQ_INT(pages, 8);
	}
	/* a jump straight into the middle */
	cJSON *out = cJSON_CreateArray();
	int64_t last;
	int more;
	events_read_page(d2, 3071, 2, out, &last, &more, NULL);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "i")->valueint, 3072);
	CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "i")->valueint, 3073);
	cJSON_Delete(out);
	fs_rm_rf(d2, NULL);
}

static void tests(void)
{
	RUN(test_append_adds_time_and_one_line_each);
	RUN(test_tail_waits_for_partial_line);
	RUN(test_page);
	RUN(test_final_status_and_logs);
	RUN(test_full_disk_is_an_error);
	RUN(test_short_write_is_undone);
	RUN(test_reserve);
	RUN(test_long_log_pages_in_order);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests);
}
