/* metrics.c — see metrics.h.
 *
 * The histogram is a fixed set of counters under one lock: observing is a few
 * additions, and a scrape copies them out before it writes anything. */
#define _GNU_SOURCE
#include "metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "../../common/fsutil.h"
#include "../accounts/auth.h"
#include "http.h"
#include "../../store/store.h"

static const double bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define NB (sizeof bounds / sizeof bounds[0])

static struct {
	char token[256];
	int on;
	pthread_mutex_t lock;
	unsigned long long bucket[NB + 1]; /* the last: above every bound */
	unsigned long long by_class[6];    /* 1xx … 5xx, by status / 100 */
	double sum;
	unsigned long long count;
} M = { .lock = PTHREAD_MUTEX_INITIALIZER };

int metrics_configure(const char *path, struct dd_err *err)
{
	M.on = 0;
	if (!path)
		return DD_OK;
	char *text = NULL;
	size_t len = 0;
	int rc = fs_read_file(path, 4096, &text, &len, err);
	if (rc)
		return rc;
	text[strcspn(text, "\r\n")] = 0;
	size_t n = strlen(text);
	if (n < 16 || n >= sizeof M.token) {
		sodium_memzero(text, len);
		free(text);
		return dd_err_set(err, DD_EINVAL, "--metrics-token %s: the first line must be a token of 16 to 255 characters",
				  path);
	}
	memcpy(M.token, text, n + 1);
	sodium_memzero(text, len);
	free(text);
	M.on = 1;
	return DD_OK;
}

void metrics_observe(double seconds, int status)
{
	size_t b = 0;
	while (b < NB && seconds > bounds[b])
		b++;
	pthread_mutex_lock(&M.lock);
	M.bucket[b]++;
	M.sum += seconds;
	M.count++;
	if (status >= 100 && status < 600)
		M.by_class[status / 100]++;
	pthread_mutex_unlock(&M.lock);
}

/* A label value with \, " and newline escaped, as the text format asks. */
static void label(FILE *o, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(o, "\\%c", *s);
		else if (*s == '\n')
			fprintf(o, "\\n");
		else
			fprintf(o, "%c", *s);
	}
}

static void write_store(FILE *o)
{
	cJSON *states = NULL;
	static const char *const names[] = { "queued", "running", "done", "error", "aborted", "interrupted", NULL };
	fprintf(o, "# HELP deepdesk_jobs Jobs by state.\n# TYPE deepdesk_jobs gauge\n");
	if (store_jobs_by_state(&states, NULL) == DD_OK)
		for (int i = 0; names[i]; i++)
			fprintf(o, "deepdesk_jobs{state=\"%s\"} %.0f\n", names[i],
				   cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(states, names[i])) > 0
					   ? cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(states, names[i]))
					   : 0);
	double queued = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(states, "queued"));
	cJSON_Delete(states);
	fprintf(o, "# HELP deepdesk_queue_length Jobs waiting to start.\n# TYPE deepdesk_queue_length gauge\n"
		      "deepdesk_queue_length %.0f\n", queued > 0 ? queued : 0);
	double oldest = 0, sum = 0, count = 0;
	store_queue_waits(&oldest, &sum, &count);
	fprintf(o, "# HELP deepdesk_queue_oldest_wait_seconds How long the oldest queued job has waited.\n"
		      "# TYPE deepdesk_queue_oldest_wait_seconds gauge\ndeepdesk_queue_oldest_wait_seconds %.3f\n", oldest);
	fprintf(o, "# HELP deepdesk_queue_wait_seconds Time from creation to start of the jobs that started.\n"
		      "# TYPE deepdesk_queue_wait_seconds summary\ndeepdesk_queue_wait_seconds_sum %.3f\n"
		      "deepdesk_queue_wait_seconds_count %.0f\n", sum, count);
	cJSON *users = NULL;
	if (auth_user_list(&users, NULL) != DD_OK)
		return;
	static const char *const what[][2] = {
		{ "running_jobs", "Jobs of the user running now." },
		{ "queued_jobs", "Jobs of the user waiting." },
		{ "cpu_minutes_today", "CPU-slot minutes the user's jobs used since 00:00 UTC." },
		{ "gpu_minutes_today", "GPU minutes the user's jobs used since 00:00 UTC." },
	};
	int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(users, "users"));
	struct store_usage *u = calloc((size_t)(n ? n : 1), sizeof *u);
	if (!u) {
		cJSON_Delete(users);
		return;
	}
	int64_t now = fs_now_ms();
	for (int i = 0; i < n; i++) {
		cJSON *it = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(users, "users"), i);
		store_usage((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(it, "id")), now - now % 86400000,
			    &u[i], NULL);
	}
	for (int k = 0; k < 4; k++) {
		fprintf(o, "# HELP deepdesk_user_%s %s\n# TYPE deepdesk_user_%s gauge\n", what[k][0], what[k][1],
			   what[k][0]);
		for (int i = 0; i < n; i++) {
			cJSON *it = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(users, "users"), i);
			const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
			double v = k == 0 ? u[i].running : k == 1 ? u[i].queued : k == 2 ? u[i].cpu_minutes : u[i].gpu_minutes;
			fprintf(o, "deepdesk_user_%s{user=\"", what[k][0]);
			label(o, name ? name : "");
			fprintf(o, "\"} %.3f\n", v);
		}
	}
	free(u);
	cJSON_Delete(users);
}

int metrics_handler(struct mg_connection *c, void *data)
{
	(void)data;
	if (!M.on)
		return http_error(c, 404, "not_found", "metrics are off: start the server with --metrics-token FILE");
	const char *h = mg_get_header(c, "Authorization");
	size_t n = strlen(M.token);
	if (!h || strncmp(h, "Bearer ", 7) != 0 || strlen(h + 7) != n || sodium_memcmp(h + 7, M.token, n) != 0)
		return http_error(c, 401, "unauthenticated", "/metrics needs \"Authorization: Bearer\" with the metrics token");
	unsigned long long bucket[NB + 1], by_class[6], count;
	double sum;
	pthread_mutex_lock(&M.lock);
	memcpy(bucket, M.bucket, sizeof bucket);
	memcpy(by_class, M.by_class, sizeof by_class);
	count = M.count;
	sum = M.sum;
	pthread_mutex_unlock(&M.lock);
	char *text = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&text, &len);
	if (!o)
		return http_error(c, 500, "internal", "out of memory");
	fprintf(o, "# HELP deepdesk_http_request_duration_seconds API requests by time to answer.\n"
		       "# TYPE deepdesk_http_request_duration_seconds histogram\n");
	unsigned long long cum = 0;
	for (size_t b = 0; b < NB; b++) {
		cum += bucket[b];
		fprintf(o, "deepdesk_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n", bounds[b], cum);
	}
	fprintf(o, "deepdesk_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", count);
	fprintf(o, "deepdesk_http_request_duration_seconds_sum %.6f\ndeepdesk_http_request_duration_seconds_count %llu\n",
		   sum, count);
	fprintf(o, "# HELP deepdesk_http_requests_total API requests by status class.\n"
		       "# TYPE deepdesk_http_requests_total counter\n");
	for (int k = 1; k < 6; k++)
		fprintf(o, "deepdesk_http_requests_total{code=\"%dxx\"} %llu\n", k, by_class[k]);
	write_store(o);
	if (fclose(o) != 0) {
		free(text);
		return http_error(c, 500, "internal", "out of memory");
	}
	http_send_head(c, &(struct http_head){ .status = 200, .type = "text/plain; version=0.0.4; charset=utf-8",
					       .len = (long long)len });
	mg_write(c, text, len);
	free(text);
	return 200;
}
