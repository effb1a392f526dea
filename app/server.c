/* server.c — the web server: CivetWeb, the route table, the UI, and shutdown.
 *
 * Design note.  CivetWeb runs each request on one of its threads.  Everything
 * under /api/v1/ goes through one handler, api_dispatch, which matches the path
 * against `routes` (one table: method, pattern, handler; DIGITS' own paths kept
 * for old scripts have a second table, digits_routes) and answers 404 for an
 * unknown path and 405 (with Allow) for a known path with the wrong method.  A
 * handler sees a `struct req` with the {id} segment parsed, and returns the
 * status it sent.  Shared state lives in the store (one SQLite connection per
 * thread, closed by the exit_thread callback) and in the WebSocket registry
 * (ws.c); nothing else here is written after start-up except `stopping`, which
 * turns new API requests into 503 while the server shuts down.
 *
 * The UI is compiled in (build/ui_assets.c, made from ui/ by tools/embed) so the
 * binary serves it from any folder; --ui-dir serves ui/ from disk instead while
 * developing.  Browser libraries come from Debian's libjs-* packages under
 * /usr/share/javascript, served at /vendor/. */
#define _GNU_SOURCE
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/version.h"
#include "../datasets/example.h"
#include "../jobs/sched.h"
#include "api.h"
#include "store.h"
#include "ws.h"

#define VENDOR_DIR "/usr/share/javascript"

static struct {
	struct server_opts opts;
	char data_dir[PATH_MAX];
	char ui_dir[PATH_MAX];
	atomic_int stopping;
} S;

const char *server_user(const struct req *r)
{
	(void)r;
	return "local";
}

const char *server_data_dir(void) { return S.data_dir; }

int server_path_allowed(const char *path, char *resolved)
{
	for (int i = 0; i < S.opts.nroots; i++)
		if (fs_path_under(path, S.opts.data_roots[i], resolved))
			return 1;
	return 0;
}

long long server_max_upload(void) { return S.opts.max_upload > 0 ? S.opts.max_upload : 16ll << 30; }

void server_archive_limits(long long *max_files, long long *max_bytes)
{
	*max_files = S.opts.archive_max_files;
	*max_bytes = S.opts.archive_max_bytes;
}

/* ---- routes ---- */

typedef int (*handler_fn)(struct req *r);

struct route {
	const char *method;
	const char *pattern;
	handler_fn fn;
};

static const struct route routes[] = {
	{ "GET", "/api/v1/info", api_info },
	{ "GET", "/api/v1/openapi.json", api_openapi },
	{ "GET", "/api/v1/jobs", api_jobs_list },
	{ "POST", "/api/v1/jobs", api_jobs_create },
	{ "GET", "/api/v1/jobs/{id}", api_job_get },
	{ "PATCH", "/api/v1/jobs/{id}", api_job_patch },
	{ "DELETE", "/api/v1/jobs/{id}", api_job_delete },
	{ "POST", "/api/v1/jobs/{id}/abort", api_job_abort },
	{ "POST", "/api/v1/jobs/{id}/clone", api_job_clone },
	{ "GET", "/api/v1/jobs/{id}/events", api_job_events },
	{ "GET", "/api/v1/jobs/{id}/resources", api_job_resources },
	{ "GET", "/api/v1/ws", api_ws_plain },
	{ "POST", "/api/v1/uploads", api_uploads_create },
	{ "GET", "/api/v1/datasets", api_datasets_list },
	{ "POST", "/api/v1/datasets", api_datasets_create },
	{ "GET", "/api/v1/datasets/preview", api_datasets_preview },
	{ "GET", "/api/v1/datasets/{id}", api_dataset_get },
	{ "GET", "/api/v1/datasets/{id}/images", api_dataset_images },
	{ "GET", "/api/v1/datasets/{id}/images/{name}/{n}", api_dataset_image },
	{ "GET", "/api/v1/datasets/{id}/files/{name}", api_dataset_file },
	{ "GET", "/api/v1/models", api_models_list },
	{ "POST", "/api/v1/models", api_models_create },
	{ "GET", "/api/v1/models/{id}", api_model_get },
	{ "POST", "/api/v1/models/{id}/resume", api_model_resume },
	{ "GET", "/api/v1/models/{id}/snapshots/{name}", api_model_snapshot },
	{ "DELETE", "/api/v1/models/{id}/snapshots/{name}", api_model_snapshot_delete },
	{ "POST", "/api/v1/models/{id}/snapshots/prune", api_model_snapshots_prune },
	{ "GET", "/api/v1/networks", api_networks_list },
	{ "POST", "/api/v1/networks/check", api_networks_check },
	{ "POST", "/api/v1/networks/visualize", api_networks_visualize },
	{ "POST", "/api/v1/lr-preview", api_lr_preview },
	{ "POST", "/api/v1/models/{id}/classify", api_model_classify },
	{ "GET", "/api/v1/models/{id}/bundle", api_model_bundle },
	{ NULL, NULL, NULL },
};

/* DIGITS' JSON routes that client scripts use, at DIGITS' own paths: the same
 * dispatch, a table of their own (app/openapi.json describes /api/v1 only; these
 * are in docs/api.md). */
static const struct route digits_routes[] = {
	{ "POST", "/models/images/classification/classify_one.json", api_digits_classify_one },
	{ NULL, NULL, NULL },
};

const struct route_info *server_routes(void)
{
	static struct route_info info[sizeof routes / sizeof routes[0] + 1];
	int i = 0;
	for (; routes[i].pattern; i++)
		info[i] = (struct route_info){ routes[i].method, routes[i].pattern };
	info[i] = (struct route_info){ NULL, NULL };
	return info;
}

/* Match uri against pattern, filling r's segments: {id} and {n} match a positive
 * decimal integer, {name} a word of letters, digits, '_', '-' and '.'.  1 on a
 * match.  A malformed {id} (not a number) still matches, with r->id = -1, so that
 * the answer is a clean 404 for that id rather than "no such route". */
static int match(const char *pattern, const char *uri, struct req *r)
{
	const char *p = pattern, *u = uri;
	while (*p && *u) {
		if (*p == '{') {
			const char *close = strchr(p, '}');
			size_t plen = close ? (size_t)(close - p) + 1 : 1;
			const char *start = u;
			while (*u && *u != '/')
				u++;
			size_t len = (size_t)(u - start);
			if (len == 0)
				return 0;
			if (strncmp(p, "{name}", plen) == 0) {
				if (len >= sizeof r->name)
					return 0;
				for (size_t i = 0; i < len; i++) {
					char ch = start[i];
					if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
					      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.'))
						return 0;
				}
				memcpy(r->name, start, len);
				r->name[len] = 0;
			} else {
				int64_t v = 0;
				int ok = 1;
				for (const char *q = start; q < u; q++) {
					if (*q < '0' || *q > '9' || v > (INT64_MAX - 9) / 10)
						ok = 0;
					else
						v = v * 10 + (*q - '0');
				}
				if (strncmp(p, "{n}", plen) == 0 && (!ok || v < 0))
					return 0;
				if (strncmp(p, "{n}", plen) == 0)
					r->n = v;
				else
					r->id = ok && v > 0 ? v : -1;
			}
			p += plen;
			continue;
		}
		if (*p != *u)
			return 0;
		p++;
		u++;
	}
	/* tolerate one trailing slash */
	if (!*p && *u == '/' && !u[1])
		return 1;
	return !*p && !*u;
}

/* CivetWeb's handler for a route table (data): match, check the method, call. */
static int api_dispatch(struct mg_connection *c, void *data)
{
	const struct route *table = data;
	const struct mg_request_info *ri = mg_get_request_info(c);
	struct req r = { .c = c, .ri = ri, .id = 0 };
	if (atomic_load(&S.stopping))
		return http_error(c, 503, "unavailable", "the server is shutting down");
	char allow[128] = "";
	for (const struct route *rt = table; rt->pattern; rt++) {
		struct req m = r;
		if (!match(rt->pattern, ri->local_uri, &m))
			continue;
		if (strcmp(rt->method, ri->request_method) != 0) {
			size_t n = strlen(allow);
			char one[16];
			snprintf(one, sizeof one, "%s", rt->method);
			if (!strstr(allow, one)) /* methods are distinct words: GET, POST, … */
				snprintf(allow + n, sizeof allow - n, "%s%s", n ? ", " : "", rt->method);
			continue;
		}
		if (m.id < 0)
			return http_error(c, 404, "not_found", "%s: not a valid id", ri->local_uri);
		return rt->fn(&m);
	}
	if (allow[0]) {
		char body[256];
		int n = snprintf(body, sizeof body,
				 "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"%s is not allowed here; use %s\"}}",
				 ri->request_method, allow);
		mg_printf(c,
			  "HTTP/1.1 405 Method Not Allowed\r\nAllow: %s\r\nContent-Type: application/json\r\n"
			  "Content-Length: %d\r\n\r\n%s",
			  allow, n, body);
		return 405;
	}
	return http_error(c, 404, "not_found", "no such API route: %s %s", ri->request_method,
			  ri->local_uri);
}

/* ---- static files: the UI and the vendor libraries ---- */

struct ui_asset {
	const char *path; /* "index.html" */
	const unsigned char *data;
	unsigned int len;
};
extern const struct ui_asset ui_assets[]; /* build/ui_assets.c */

static const char *mime_for(const char *path)
{
	const char *dot = strrchr(path, '.');
	if (!dot)
		return "application/octet-stream";
	static const char *const map[][2] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".js", "text/javascript; charset=utf-8" },
		{ ".mjs", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },
		{ ".json", "application/json" },
		{ ".svg", "image/svg+xml" },
		{ ".png", "image/png" },
		{ ".ico", "image/x-icon" },
		{ ".map", "application/json" },
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strcmp(dot, map[i][0]) == 0)
			return map[i][1];
	return "application/octet-stream";
}

static void send_bytes(struct mg_connection *c, const char *path, const void *data, size_t len,
		       int cache)
{
	mg_printf(c,
		  "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: %s\r\n"
		  "X-Content-Type-Options: nosniff\r\n\r\n",
		  mime_for(path), len, cache ? "public, max-age=3600" : "no-cache");
	if (strcmp(mg_get_request_info(c)->request_method, "HEAD") != 0)
		mg_write(c, data, len);
}

/* Serve root/rel if it resolves inside root; 1 when sent. */
static int send_from_dir(struct mg_connection *c, const char *root, const char *rel, int cache)
{
	char path[PATH_MAX], real[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/%s", root, rel) >= (int)sizeof path)
		return 0;
	if (!fs_path_under(path, root, real))
		return 0;
	char *data = NULL;
	size_t len = 0;
	if (fs_read_file(real, 64u << 20, &data, &len, NULL) != DD_OK)
		return 0;
	send_bytes(c, real, data, len, cache);
	free(data);
	return 1;
}

static int static_handler(struct mg_connection *c, void *data)
{
	(void)data;
	const struct mg_request_info *ri = mg_get_request_info(c);
	if (strcmp(ri->request_method, "GET") != 0 && strcmp(ri->request_method, "HEAD") != 0)
		return http_error(c, 405, "method_not_allowed", "only GET here");
	const char *uri = ri->local_uri;
	if (strstr(uri, "..") || strchr(uri, '\\'))
		return http_error(c, 404, "not_found", "no such file");
	if (strncmp(uri, "/vendor/", 8) == 0) {
		if (send_from_dir(c, VENDOR_DIR, uri + 8, 1))
			return 200;
		return http_error(c, 404, "not_found", "%s is not installed (a Debian libjs-* package)", uri);
	}
	const char *rel = uri[0] == '/' ? uri + 1 : uri;
	/* the pages are one app: any path without a dot is index.html */
	if (!*rel || !strchr(strrchr(uri, '/') ? strrchr(uri, '/') : uri, '.'))
		rel = "index.html";
	if (S.ui_dir[0]) {
		if (send_from_dir(c, S.ui_dir, rel, 0))
			return 200;
	} else {
		for (const struct ui_asset *a = ui_assets; a->path; a++)
			if (strcmp(a->path, rel) == 0) {
				send_bytes(c, a->path, a->data, a->len, 0);
				return 200;
			}
	}
	return http_error(c, 404, "not_found", "no such file: %s", uri);
}

/* ---- openapi and info ---- */

extern const char openapi_json[]; /* build/openapi.c, from app/openapi.json */

int api_openapi(struct req *r)
{
	size_t len = strlen(openapi_json);
	mg_printf(r->c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", len);
	mg_write(r->c, openapi_json, len);
	return 200;
}

static void cpu_model(char *buf, size_t len)
{
	snprintf(buf, len, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "model name", 10) != 0)
			continue;
		char *v = strchr(line, ':');
		if (v) {
			v++;
			while (*v == ' ')
				v++;
			v[strcspn(v, "\n")] = 0;
			snprintf(buf, len, "%s", v);
		}
		break;
	}
	fclose(f);
}

static void info_executor(cJSON *o);

int api_info(struct req *r)
{
	/* Walking the data folder costs; do it at most every 30 s. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static int64_t used_at;
	static uint64_t used;
	pthread_mutex_lock(&lock);
	if (fs_mono_ms() - used_at > 30000 || !used_at) {
		used = fs_tree_bytes(S.data_dir);
		used_at = fs_mono_ms();
	}
	uint64_t used_now = used;
	pthread_mutex_unlock(&lock);

	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "version", DD_VERSION);
	cJSON *b = cJSON_AddObjectToObject(o, "build");
	cJSON_AddStringToObject(b, "commit", dd_commit);
	cJSON_AddStringToObject(b, "date", dd_build_date);
	cJSON_AddStringToObject(b, "compiler", __VERSION__);
	cJSON_AddBoolToObject(b, "cuda", dd_cuda_built);
	char model[256];
	cpu_model(model, sizeof model);
	cJSON *cpu = cJSON_AddObjectToObject(o, "cpu");
	cJSON_AddStringToObject(cpu, "model", model);
	cJSON_AddNumberToObject(cpu, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
	cJSON_AddArrayToObject(o, "gpus"); /* the CUDA backend fills this in */
	cJSON *d = cJSON_AddObjectToObject(o, "data");
	cJSON_AddStringToObject(d, "path", S.data_dir);
	cJSON_AddNumberToObject(d, "used_bytes", (double)used_now);
	struct statvfs vfs;
	if (statvfs(S.data_dir, &vfs) == 0) {
		cJSON_AddNumberToObject(d, "free_bytes", (double)vfs.f_bavail * (double)vfs.f_frsize);
		cJSON_AddNumberToObject(d, "total_bytes", (double)vfs.f_blocks * (double)vfs.f_frsize);
	}
	cJSON *j = cJSON_AddObjectToObject(o, "jobs");
	int64_t total = 0;
	store_job_count(&total, NULL);
	int slots_used, slots;
	sched_slots(&slots_used, &slots);
	cJSON_AddNumberToObject(j, "total", (double)total);
	cJSON_AddNumberToObject(j, "cpu_slots", slots);
	cJSON_AddNumberToObject(j, "cpu_slots_used", slots_used);
	cJSON *kinds = cJSON_AddArrayToObject(o, "kinds");
	for (const struct job_kind *const *k = job_kinds(); *k; k++) {
		cJSON *kj = cJSON_CreateObject();
		cJSON_AddStringToObject(kj, "name", (*k)->name);
		cJSON_AddStringToObject(kj, "title", (*k)->title);
		cJSON_AddItemToArray(kinds, kj);
	}
	cJSON *ex = cJSON_AddArrayToObject(o, "examples");
	if (example_fashion_mnist_available())
		cJSON_AddItemToArray(ex, cJSON_CreateString("fashion-mnist"));
	cJSON_AddNumberToObject(o, "max_upload_bytes", (double)server_max_upload());
	cJSON *roots = cJSON_AddArrayToObject(o, "data_roots");
	for (int i = 0; i < S.opts.nroots; i++)
		cJSON_AddItemToArray(roots, cJSON_CreateString(S.opts.data_roots[i]));
	info_executor(o);
	return http_json(r->c, 200, o);
}

/* ---- life cycle ---- */

/* Uploads not used by a dataset within a day are abandoned: remove them. */
static void sweep_uploads(void)
{
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/uploads", S.data_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	time_t now = time(NULL);
	while ((e = readdir(d))) {
		char path[PATH_MAX * 2];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (e->d_name[0] != '.' && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
		    now - st.st_mtime > 24 * 3600 && unlink(path) == 0)
			log_info("removed an upload unused for a day: %s", e->d_name);
	}
	closedir(d);
}

static void on_thread_exit(const struct mg_context *ctx, int type, void *thread_data)
{
	(void)ctx;
	(void)type;
	(void)thread_data;
	store_thread_end();
}

static int log_message(const struct mg_connection *c, const char *message)
{
	(void)c;
	log_warn("http: %s", message);
	return 1;
}

/* ---- executors (--executor) ---- */

#define MAX_EXEC_KINDS 16
static struct {
	const struct executor *dflt;
	char kind[MAX_EXEC_KINDS][32];
	const struct executor *ex[MAX_EXEC_KINDS];
	int n;
} X;

static const struct executor *executor_named(const char *name, size_t len)
{
	if (len == 5 && strncmp(name, "local", 5) == 0)
		return &exec_local;
	if (len == 5 && strncmp(name, "slurm", 5) == 0)
		return &exec_slurm;
	return NULL;
}

/* "local", "slurm", or a comma list of KIND=NAME with at most one bare NAME (the
 * default for kinds not named), into X. */
int server_executor_parse(const char *spec, struct dd_err *err)
{
	memset(&X, 0, sizeof X);
	X.dflt = &exec_local;
	for (const char *p = spec ? spec : ""; *p;) {
		size_t len = strcspn(p, ",");
		const char *eq = memchr(p, '=', len);
		const char *name = eq ? eq + 1 : p;
		size_t nlen = eq ? len - (size_t)(eq + 1 - p) : len;
		const struct executor *ex = executor_named(name, nlen);
		if (!ex)
			return dd_err_set(err, DD_EINVAL, "--executor: \"%.*s\" is not an executor (local or slurm)",
					  (int)nlen, name), -1;
		if (eq) {
			size_t klen = (size_t)(eq - p);
			char kind[32];
			if (klen == 0 || klen >= sizeof kind)
				return dd_err_set(err, DD_EINVAL, "--executor: \"%.*s\": expected KIND=EXECUTOR", (int)len,
						  p), -1;
			snprintf(kind, sizeof kind, "%.*s", (int)klen, p);
			if (!job_kind_find(kind))
				return dd_err_set(err, DD_EINVAL, "--executor: \"%s\" is not a job kind", kind), -1;
			if (X.n == MAX_EXEC_KINDS)
				return dd_err_set(err, DD_EINVAL, "--executor: too many kinds"), -1;
			snprintf(X.kind[X.n], sizeof X.kind[X.n], "%s", kind);
			X.ex[X.n++] = ex;
		} else {
			X.dflt = ex;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

static const struct executor *executor_for(const char *kind)
{
	for (int i = 0; i < X.n; i++)
		if (strcmp(X.kind[i], kind) == 0)
			return X.ex[i];
	return X.dflt;
}

static int uses_slurm(void)
{
	int any = X.dflt == &exec_slurm;
	for (int i = 0; i < X.n; i++)
		any |= X.ex[i] == &exec_slurm;
	return any;
}

/* "executor" in /api/v1/info: the default, each kind's, and the Slurm defaults. */
static void info_executor(cJSON *o)
{
	cJSON *e = cJSON_AddObjectToObject(o, "executor");
	cJSON_AddStringToObject(e, "default", X.dflt ? X.dflt->name : "local");
	cJSON *kinds = cJSON_AddObjectToObject(e, "kinds");
	for (const struct job_kind *const *k = job_kinds(); *k; k++)
		cJSON_AddStringToObject(kinds, (*k)->name, executor_for((*k)->name)->name);
	if (!uses_slurm())
		return;
	const struct slurm_opts *so = &S.opts.slurm;
	cJSON *sl = cJSON_AddObjectToObject(e, "slurm");
	if (so->partition) cJSON_AddStringToObject(sl, "partition", so->partition); else cJSON_AddNullToObject(sl, "partition");
	if (so->account) cJSON_AddStringToObject(sl, "account", so->account); else cJSON_AddNullToObject(sl, "account");
	if (so->cpus > 0) cJSON_AddNumberToObject(sl, "cpus", so->cpus); else cJSON_AddNullToObject(sl, "cpus");
	if (so->mem) cJSON_AddStringToObject(sl, "mem", so->mem); else cJSON_AddNullToObject(sl, "mem");
	if (so->time) cJSON_AddStringToObject(sl, "time", so->time); else cJSON_AddNullToObject(sl, "time");
}

int server_run(const struct server_opts *opts)
{
	struct dd_err err = { 0 };
	S.opts = *opts;
	if (fs_mkdir_p(opts->data_dir, &err) != DD_OK) {
		log_error("%s", err.msg);
		return 1;
	}
	if (!realpath(opts->data_dir, S.data_dir)) {
		log_error("cannot resolve the data folder %s: %s", opts->data_dir, strerror(errno));
		return 1;
	}
	if (opts->ui_dir && !realpath(opts->ui_dir, S.ui_dir)) {
		log_error("cannot resolve --ui-dir %s: %s", opts->ui_dir, strerror(errno));
		return 1;
	}
	if (server_executor_parse(opts->executor, &err) != 0) {
		log_error("%s", err.msg);
		return 2;
	}
	if (uses_slurm()) {
		if (exec_slurm_available(&err) != DD_OK) {
			log_error("%s", err.msg);
			return 1;
		}
		exec_slurm_configure(&opts->slurm);
	}
	if (store_init(S.data_dir, &err) != DD_OK) {
		log_error("%s", err.msg);
		return 1;
	}
	sweep_uploads();

	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0) {
		log_error("cannot find this program's own path to start workers");
		return 1;
	}
	exe[n] = 0;

	/* SIGTERM and SIGINT are blocked in every thread (they inherit this mask) and
	 * taken by sigwait at the end of this function. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t stop_signals;
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

	struct sched_config sc = {
		.data_dir = S.data_dir,
		.exe = exe,
		.cpu_slots = opts->cpu_slots > 0 ? opts->cpu_slots : (int)sysconf(_SC_NPROCESSORS_ONLN),
		.abort_grace_ms = opts->abort_grace_ms > 0 ? opts->abort_grace_ms : 10000,
		.poll_ms = 20,
		.executor = &exec_local,
		.executor_for = executor_for,
	};

	char threads[16];
	/* Each WebSocket holds a CivetWeb thread for its life: leave an eighth of the
	 * threads (at least 16) for plain requests. */
	int nthreads = opts->threads > 0 ? opts->threads : 128;
	int ws_limit = nthreads - (nthreads / 8 > 16 ? nthreads / 8 : 16);
	if (ws_limit < 1)
		ws_limit = 1;
	snprintf(threads, sizeof threads, "%d", nthreads);
	const char *options[] = {
		"listening_ports", opts->listen,
		"num_threads", threads,
		"request_timeout_ms", "60000",
		"websocket_timeout_ms", "3600000",
		"enable_keep_alive", "yes",
		"keep_alive_timeout_ms", "5000",
		"tcp_nodelay", "1",
		NULL,
	};
	struct mg_callbacks cb = { 0 };
	cb.exit_thread = on_thread_exit;
	cb.log_message = log_message;
	mg_init_library(MG_FEATURES_WEBSOCKET);

	if (sched_start(&sc, ws_publish, NULL, &err) != DD_OK) {
		log_error("%s", err.msg);
		return 1;
	}
	struct mg_context *ctx = mg_start(&cb, NULL, options);
	if (!ctx) {
		log_error("cannot listen on %s (in use, or not an address of this machine?)", opts->listen);
		sched_stop();
		return 1;
	}
	mg_set_request_handler(ctx, "/api/v1/", api_dispatch, (void *)routes);
	mg_set_request_handler(ctx, "/api/v1$", api_dispatch, (void *)routes);
	for (const struct route *rt = digits_routes; rt->pattern; rt++) {
		char exact[256];
		snprintf(exact, sizeof exact, "%s$", rt->pattern);
		mg_set_request_handler(ctx, exact, api_dispatch, (void *)digits_routes);
	}
	mg_set_request_handler(ctx, "/", static_handler, NULL);
	ws_register(ctx, ws_limit);

	struct mg_server_port ports[4];
	int np = mg_get_server_ports(ctx, 4, ports);
	if (np > 0) {
		/* the host part of --listen, with "any address" shown as localhost */
		char host[256] = "localhost";
		const char *colon = strrchr(opts->listen, ':');
		if (colon && colon > opts->listen && (size_t)(colon - opts->listen) < sizeof host)
			snprintf(host, sizeof host, "%.*s", (int)(colon - opts->listen), opts->listen);
		if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0)
			snprintf(host, sizeof host, "localhost");
		log_info("deepdesk %s: open http://%s:%d/ in a browser (data folder %s)", DD_VERSION, host,
			 ports[0].port, S.data_dir);
		/* The bound port, for tests and scripts that asked for port 0. */
		char pf[PATH_MAX + 16], txt[32];
		snprintf(pf, sizeof pf, "%s/server.port", S.data_dir);
		int len = snprintf(txt, sizeof txt, "%d\n", ports[0].port);
		fs_write_file_atomic(pf, txt, (size_t)len, NULL);
	}

	int sig = 0;
	sigwait(&stop_signals, &sig);
	log_info("%s: stopping (running workers go on and are adopted on the next start)",
		 strsignal(sig));
	atomic_store(&S.stopping, 1);
	mg_stop(ctx);
	sched_stop();
	store_thread_end();
	return 0;
}
