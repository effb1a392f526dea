/* server.c — the web server: CivetWeb, the route table, the UI, and shutdown.
 *
 * Design note.  CivetWeb runs each request on one of its threads.  Everything
 * under /api/v1/, and DIGITS' own paths kept for old scripts, go through one
 * handler, api_dispatch, which matches the path against `routes` (the one route
 * table, made from API_ROUTES in app/api/api.h: method, pattern, handler, body
 * type, permission) and answers 404 for an unknown path and 405 (with Allow) for
 * a known path with the wrong method.  A handler sees a `struct req` with the
 * {id} segment parsed, and returns the status it sent.  Shared state lives in
 * the store (one SQLite connection per thread, closed by the exit_thread
 * callback) and in the WebSocket registry
 * (ws.c); nothing else here is written after start-up except `stopping`, which
 * turns new API requests into 503 while the server shuts down, and the
 * connection guard's table of requests under way (G, under its own lock; see
 * "the connection guard" below: what keeps one client from holding every
 * CivetWeb thread).
 *
 * Accounts: api_dispatch asks auth.c who is calling (session cookie or bearer
 * token) and perm.c whether they may use the matched route (the action its row
 * names), before any handler runs.  With accounts off (the default on
 * loopback) everyone is the local user.  accounts_setup refuses a server beyond
 * loopback without accounts, and one with accounts but none made.
 *
 * The UI is compiled in (build/ui_assets.c, made from ui/ by tools/embed) so the
 * binary serves it from any folder; --ui-dir serves ui/ from disk instead while
 * developing.  Browser libraries come from Debian's libjs-* packages under
 * /usr/share/javascript, served at /vendor/. */
#define _GNU_SOURCE
#include "server.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "../../common/version.h"
#include "../../datasets/example.h"
#include "../../jobs/kind_check.h"
#include "../../jobs/sched.h"
#include "../api/api.h"
#include "../infer/infer_service.h"
#include "body_deadline.h"
#include "job_view.h"
#include "metrics.h"
#include "../accounts/auth.h"
#include "perm.h"
#include "../../store/store.h"
#include "ws.h"

#define VENDOR_DIR "/usr/share/javascript"

static struct {
	struct server_opts opts;
	char data_dir[PATH_MAX];
	char ui_dir[PATH_MAX];
	atomic_int stopping;
	int accounts; /* accounts on: every request is someone's, by session or token */
} S;

const char *server_user(const struct req *r)
{
	if (r && r->auth && r->auth->accounts && r->auth->authenticated && r->auth->user.id)
		return r->auth->user.name;
	return "local";
}

const char *server_data_dir(void) { return S.data_dir; }

int server_path_allowed(const char *path, char *resolved)
{
	return kind_path_allowed(sched_server(), path, resolved); /* the jobs' rule, one place */
}

long long server_max_upload(void) { return S.opts.max_upload > 0 ? S.opts.max_upload : 16ll << 30; }

void server_archive_limits(long long *max_files, long long *max_bytes)
{
	*max_files = S.opts.archive_max_files;
	*max_bytes = S.opts.archive_max_bytes;
}

/* ---- routes ---- */

typedef int (*handler_fn)(struct req *r);

/* What a state-changing route's body may be (a body-less request is fine for all):
 * JSON only, or also files (multipart forms and raw bytes).  Never the form types
 * a cross-site page can send without asking (text/plain, urlencoded) on a JSON
 * route — api_dispatch checks it for every route. */
enum route_body { BODY_JSON, BODY_FILES };

struct route {
	const char *method;
	const char *pattern;
	handler_fn fn;
	enum route_body body;
	enum perm_action perm;
};

/* The one route table, made from API_ROUTES (app/api/api.h): /api/v1's routes
 * and DIGITS' own paths alike (no DIGITS' path matches an /api/v1 pattern, nor
 * the other way round).  The first row whose method and pattern match wins. */
#define ROUTE_ROW(method, pattern, fn, body, perm) { method, pattern, fn, body, perm },
static const struct route routes[] = { API_ROUTES(ROUTE_ROW) { NULL, NULL, NULL, BODY_JSON, PERM_ADMIN } };
#undef ROUTE_ROW
#define NROUTES (sizeof routes / sizeof routes[0] - 1)

/* DIGITS' JSON routes that client scripts use sit at DIGITS' own paths, outside
 * /api/v1 (app/api/openapi.json describes /api/v1 only; these are in docs/api.md). */
static int route_is_digits(const struct route *rt) { return strncmp(rt->pattern, "/api/v1/", 8) != 0; }

static struct route_info route_infos[NROUTES + 1]; /* the last row stays zero: pattern NULL */

static void route_infos_make(void)
{
	for (size_t i = 0; i < NROUTES; i++)
		route_infos[i] = (struct route_info){ routes[i].method, routes[i].pattern, routes[i].perm,
						      route_is_digits(&routes[i]) };
}

const struct route_info *server_routes(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, route_infos_make);
	return route_infos;
}

/* The table's own rules, checked at start: every row's permission is an action
 * perm.h knows, and no method and pattern are there twice (the second would never
 * be reached).  0, or -1 with the row logged. */
static int routes_check(void)
{
	for (size_t i = 0; i < NROUTES; i++) {
		if ((unsigned)routes[i].perm >= PERM_COUNT) {
			log_error("route %s %s: no permission (perm.h)", routes[i].method, routes[i].pattern);
			return -1;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(routes[i].method, routes[j].method) && !strcmp(routes[i].pattern, routes[j].pattern)) {
				log_error("route %s %s: twice in the route table", routes[i].method, routes[i].pattern);
				return -1;
			}
	}
	return 0;
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
			/* a segment ends at '/', or where the pattern goes on with a
			 * literal after it ("{id}.json") */
			char stop = close && close[1] != '/' ? close[1] : 0;
			while (*u && *u != '/' && !(stop && *u == stop))
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

/* Whether ct (a Content-Type header, parameters allowed) is the media type t. */
static int media_is(const char *ct, const char *t)
{
	size_t n = strlen(t);
	return ct && strncasecmp(ct, t, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

/* A state-changing request with a body must say it is JSON (or, on a route that
 * takes files, anything but the types any web page may send cross-site without a
 * preflight: text/plain and urlencoded forms).  0, or the status of the 415 sent. */
static int body_type_ok(struct mg_connection *c, const struct mg_request_info *ri, enum route_body body)
{
	if (!strcmp(ri->request_method, "GET") || !strcmp(ri->request_method, "HEAD"))
		return 0;
	const char *te = mg_get_header(c, "Transfer-Encoding");
	if (ri->content_length <= 0 && !te)
		return 0;
	const char *ct = mg_get_header(c, "Content-Type");
	if (media_is(ct, "application/json"))
		return 0;
	if (body == BODY_FILES && !media_is(ct, "text/plain") && !media_is(ct, "application/x-www-form-urlencoded"))
		return 0;
	return http_error(c, 415, "unsupported_media_type", "%s %s: send the body as Content-Type: application/json%s",
			  ri->request_method, ri->local_uri,
			  body == BODY_FILES ? " (or a multipart form, or the file's bytes)" : "");
}

/* CivetWeb's handler for every route: say who asks, match, check the
 * method, check the permission (perm.c: every route, before its handler), call.
 * With accounts on, nobody logged in learns nothing of the routes: 401 for any
 * path but the public ones. */
static int api_dispatch(struct mg_connection *c)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	struct auth_state who;
	struct req r = { .c = c, .ri = ri, .id = 0, .auth = &who };
	if (atomic_load(&S.stopping))
		return http_error(c, 503, "unavailable", "the server is shutting down");
	auth_identify(c, &who);
	char allow[128] = "";
	for (const struct route *rt = routes; rt->pattern; rt++) {
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
		int rc = perm_check(&m, rt->perm, m.id);
		if (rc || (rc = body_type_ok(c, ri, rt->body)))
			return rc;
		if (m.id < 0)
			return http_error(c, 404, "not_found", "%s: not a valid id", ri->local_uri);
		job_view_begin(&who, rt->pattern, m.id); /* what of a job the caller sees (job_view.h) */
		rc = rt->fn(&m);
		job_view_end();
		return rc;
	}
	if (who.accounts && !who.authenticated)
		return perm_check(&r, PERM_USER, 0);
	if (allow[0]) {
		char body[256];
		int n = snprintf(body, sizeof body,
				 "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"%s is not allowed here; use %s\"}}",
				 ri->request_method, allow);
		char extra[96];
		snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
		http_send_head(c, &(struct http_head){ .status = 405, .type = "application/json", .len = n, .extra = extra });
		mg_write(c, body, (size_t)n);
		return 405;
	}
	return http_error(c, 404, "not_found", "no such API route: %s %s", ri->request_method,
			  ri->local_uri);
}

/* CivetWeb's request threads have the stack it was built with: Debian's 1.15 is
 * built with USE_STACK_SIZE=102400, 100 KiB, and there is no option to change
 * it at run time.  What a handler runs must fit in that: JSON is nested at most
 * 64 levels (common/json.h; cJSON takes about 150 bytes a level, so 64 levels are
 * under 20 KiB, where 800 overflowed), Graphviz draws in a child process
 * (api_networks.c), a model is opened on a thread of 16 MiB (api_import.c) and
 * classified in the inference service.  Measured (the lowest byte written on
 * the thread's stack, after each request of the networks, datasets, infer,
 * evals, models, bundle, digits and hostile_json API tests): at most 62 KiB, by
 * POST /api/v1/networks/check; GET /api/v1/info alone reaches 36 KiB, most of it
 * CivetWeb's own frames.  The first request measures the stack it runs on and
 * says so; a CivetWeb built with less than HTTP_MIN_STACK is warned about. */
#define HTTP_MIN_STACK (96u << 10)

static void note_stack(void)
{
	pthread_attr_t a;
	size_t size = 0;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	pthread_attr_getstacksize(&a, &size);
	pthread_attr_destroy(&a);
	if (size < HTTP_MIN_STACK)
		log_warn("CivetWeb's request threads have %zu KiB stacks, under the %u KiB the handlers are sized for; "
			 "deep requests may crash the server (rebuild CivetWeb with a larger USE_STACK_SIZE)",
			 size >> 10, HTTP_MIN_STACK >> 10);
	else
		log_info("CivetWeb's request threads have %zu KiB stacks", size >> 10);
}

/* api_dispatch, timed for /metrics. */
static int api_dispatch_timed(struct mg_connection *c, void *data)
{
	static pthread_once_t stack_once = PTHREAD_ONCE_INIT;
	(void)data; /* every route is in the one table */
	pthread_once(&stack_once, note_stack);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int status = api_dispatch(c);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	metrics_observe((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, status);
	return status;
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
	http_send_head(c, &(struct http_head){ .status = 200, .type = mime_for(path), .len = (long long)len,
					       .cache = cache ? "public, max-age=3600" : "no-cache" });
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

extern const char openapi_json[]; /* build/openapi.c, from app/api/openapi.json */

int api_openapi(struct req *r)
{
	size_t len = strlen(openapi_json);
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = "application/json", .len = (long long)len,
						  .cache = "no-cache" });
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
	cJSON_AddItemToObject(o, "gpus", sched_gpus_json()); /* those the scheduler hands out */
	cJSON *d = cJSON_AddObjectToObject(o, "data");
	if (perm_sees_server_paths(r))
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
	cJSON_AddItemToObject(o, "inference", infer_service_info());
	info_executor(o);
	return http_json(r->c, 200, o);
}

/* ---- life cycle ---- */

int server_listen_is_loopback(const char *listen)
{
	const char *p = listen;
	if (!p || !*p)
		return 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		char one[256];
		if (len == 0 || len >= sizeof one)
			return 0;
		memcpy(one, p, len);
		one[len] = 0;
		p += len + (p[len] == ',');
		char *host = one, *end;
		if (one[0] == '[') {
			end = strchr(one, ']');
			if (!end || end[1] != ':')
				return 0;
			host = one + 1;
			*end = 0;
			if (strcmp(host, "::1") != 0)
				return 0;
			continue;
		}
		end = strrchr(one, ':');
		if (!end)
			return 0; /* a port alone: every address */
		*end = 0;
		if (strcmp(host, "localhost") != 0 && strncmp(host, "127.", 4) != 0)
			return 0;
	}
	return 1;
}

/* Whether host (a Host header's name, its port cut off) is this machine's
 * loopback: localhost, 127.x.y.z or ::1. */
static int host_is_loopback(const char *host, size_t len)
{
	char h[64];
	if (len == 0 || len >= sizeof h)
		return 0;
	memcpy(h, host, len);
	h[len] = 0;
	if (!strcasecmp(h, "localhost") || !strcmp(h, "[::1]"))
		return 1;
	struct in_addr a;
	return inet_pton(AF_INET, h, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* The name part of a Host header value ("127.0.0.1:5010", "[::1]:5010",
 * "localhost"): its length. */
static size_t host_name_len(const char *v)
{
	if (v[0] == '[') {
		const char *e = strchr(v, ']');
		return e ? (size_t)(e - v + 1) : strlen(v);
	}
	return strcspn(v, ":");
}

/* CivetWeb's begin_request, for every request (the UI, the API, WebSocket
 * upgrades).  With accounts off everything is the local user's, which holds only
 * for requests that come from the local user: a Host that is not a loopback name
 * (a DNS-rebound attacker's name) or an Origin that is not this server's own (a
 * page elsewhere, even on another local port) is refused.  With accounts on, the
 * session cookie (SameSite=Strict, with its CSRF token) or an API token decides. */
static int on_begin_request(struct mg_connection *c)
{
	if (S.accounts)
		return 0;
	const struct mg_request_info *ri = mg_get_request_info(c);
	const char *host = mg_get_header(c, "Host"), *origin = mg_get_header(c, "Origin");
	if (host && !host_is_loopback(host, host_name_len(host))) {
		http_error(c, 403, "forbidden", "Host %.64s: this server answers to its loopback names only "
			   "(localhost, 127.0.0.1, [::1]); accounts are off", host);
		return 1;
	}
	if (origin) {
		const char *scheme = ri->is_ssl ? "https://" : "http://";
		size_t sl = strlen(scheme);
		if (!host || strncasecmp(origin, scheme, sl) != 0 || strcasecmp(origin + sl, host) != 0) {
			http_error(c, 403, "forbidden", "Origin %.64s: requests from another site are refused; accounts are off",
				   origin);
			return 1;
		}
	}
	return 0;
}

/* ---- the connection guard: no one client holds all the threads ----
 *
 * CivetWeb 1.15 gives a connection one of its threads from the moment a worker
 * takes it until it closes: while its request's headers arrive, while its body
 * does, between requests on a kept-alive connection, and for a WebSocket's whole
 * life.  request_timeout_ms bounds the first two (the headers must all be in
 * within it; a body read gives up after that long without a byte), but a client
 * that opens more connections than there are threads and sends half a request
 * on each would still hold every thread, again each time they time out.  So:
 *  - requests in flight (begin_request to end_request) are kept in G.flight;
 *    an address with conns_per_addr plain ones under way gets 429 for the next
 *    (WebSocket upgrades are ws.c's to count);
 *  - connections waiting for their headers have no callback (CivetWeb says
 *    nothing before the headers are in), so guard_main looks at this process's
 *    sockets every GUARD_PERIOD_MS: a connected one on a port we listen on that
 *    is not in G.flight is waiting (for a thread, for its headers, or for the
 *    next request of a kept-alive connection).  An address may have
 *    conns_per_addr connections waiting or in plain requests; beyond, its
 *    connections that waited longest are shut down (shutdown(2), never close:
 *    the descriptor stays CivetWeb's, whose read then ends and which closes
 *    it).  Then, if fewer than G.reserve threads would be left free, anyone's
 *    that waited longest go, so that a new request always finds a thread.
 *    A connection whose whole request head has come and waits only for a
 *    thread (guard_head_waiting peeks) is never cut; an idle kept-alive
 *    connection may be, and the browser opens another.  One pass costs three
 *    system calls per open descriptor.
 * Invariant: an entry of G.flight is a request of a live connection; the
 * connection_close callback removes any that end_request did not. */

#define GUARD_PERIOD_MS 100
#define GUARD_GRACE_MS 100 /* younger than this, a waiting connection's headers may be on the way */
#define GUARD_RESERVE_GRACE_MS 300
#define GUARD_MAX_SOCKS 16384

struct guard_flight {
	const struct mg_connection *c; /* NULL: a free place */
	char addr[48];
	int port;
	int ws; /* a WebSocket upgrade: ws.c counts those */
};

struct guard_sock {
	int fd, port;
	char addr[48];
	int64_t since; /* first seen waiting */
	int cut;
	int plain; /* requests its address has under way (WebSockets aside) */
};

static struct {
	pthread_mutex_t lock; /* flight */
	struct guard_flight *flight;
	int nflight, per_addr;
	int nthreads, reserve; /* the guard keeps `reserve` threads free */
	int ports[8], nports;
	pthread_t thread;
	int started;
	atomic_int stop;
	/* guard_main's own: the waiting sockets of the last pass, sorted by fd */
	struct guard_sock *was, *now;
	int nwas;
	int64_t logged_ms;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Is fd a connection accepted on one of our ports?  1, with the client's
 * address (as CivetWeb writes remote_addr) and port. */
static int guard_is_ours(int fd, char *addr, size_t len, int *port)
{
	struct sockaddr_storage a;
	socklen_t alen = sizeof a;
	if (getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
		return 0; /* not a socket */
	int local;
	if (a.ss_family == AF_INET)
		local = ntohs(((struct sockaddr_in *)&a)->sin_port);
	else if (a.ss_family == AF_INET6)
		local = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
	else
		return 0;
	int mine = 0;
	for (int i = 0; i < G.nports; i++)
		mine |= G.ports[i] == local;
	alen = sizeof a;
	if (!mine || getpeername(fd, (struct sockaddr *)&a, &alen) != 0)
		return 0; /* a listening socket has no peer */
	if (a.ss_family == AF_INET) {
		*port = ntohs(((struct sockaddr_in *)&a)->sin_port);
		return inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, addr, (socklen_t)len) != NULL;
	}
	*port = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
	return inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&a)->sin6_addr, addr, (socklen_t)len) != NULL;
}

static int guard_by_fd(const void *a, const void *b)
{
	const struct guard_sock *x = a, *y = b;
	return (x->fd > y->fd) - (x->fd < y->fd);
}

/* The longest waiting first. */
static int guard_by_age(const void *a, const void *b)
{
	const struct guard_sock *x = a, *y = b;
	return (x->since > y->since) - (x->since < y->since);
}

/* Address first, then the longest waiting first. */
static int guard_by_addr_age(const void *a, const void *b)
{
	const struct guard_sock *x = a, *y = b;
	int c = strcmp(x->addr, y->addr);
	return c ? c : (x->since > y->since) - (x->since < y->since);
}

/* Has a request's whole head (up to its empty line) arrived on fd, unread yet?
 * Then the connection only waits for a thread to take it: a real request, not a
 * half-open one (which a thread holds, and has read what came).  Peeking does
 * not take the bytes from CivetWeb.  Encrypted bytes (HTTPS) never match. */
static int guard_head_waiting(int fd)
{
	char buf[8192];
	ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
	return n > 0 && memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL;
}

/* Cut s (shut it down), if it is still the connection seen (not a new one on a
 * reused descriptor) and not a whole request waiting for a thread; 1 if cut. */
static int guard_cut(struct guard_sock *s)
{
	char addr[48];
	int port;
	if (guard_head_waiting(s->fd))
		return 0;
	if (guard_is_ours(s->fd, addr, sizeof addr, &port) && port == s->port && strcmp(addr, s->addr) == 0)
		shutdown(s->fd, SHUT_RDWR);
	s->cut = 1;
	return 1;
}

/* One look at our sockets: cut what waits beyond each address's share, then,
 * if the threads left free are fewer than the reserve, what waited longest. */
static void guard_pass(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		static int told;
		if (!told++)
			log_warn("the connection guard cannot list this process's sockets (/proc/self/fd: %s): connections "
				 "waiting for their headers are cut only by --request-timeout", strerror(errno));
		return;
	}
	int64_t now = fs_mono_ms();
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < GUARD_MAX_SOCKS) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		struct guard_sock *s = &G.now[n];
		if (*end || end == e->d_name || fd == dirfd(d) || !guard_is_ours((int)fd, s->addr, sizeof s->addr, &s->port))
			continue;
		s->fd = (int)fd;
		s->since = now;
		s->cut = 0;
		s->plain = 0;
		n++;
	}
	closedir(d);
	int w = 0; /* keep those not in a request; count the plain requests of each */
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < n; i++) {
		int busy = 0;
		for (int j = 0; j < G.nflight && !busy; j++)
			busy = G.flight[j].c && G.flight[j].port == G.now[i].port && strcmp(G.flight[j].addr, G.now[i].addr) == 0;
		body_deadline_watch(G.now[i].fd, G.now[i].addr, G.now[i].port, now); /* body_deadline.h */
		if (!busy)
			G.now[w++] = G.now[i];
	}
	for (int i = 0; i < w; i++)
		for (int j = 0; j < G.nflight; j++)
			G.now[i].plain += G.flight[j].c && !G.flight[j].ws && strcmp(G.flight[j].addr, G.now[i].addr) == 0;
	pthread_mutex_unlock(&G.lock);
	body_deadline_sweep(now);
	for (int i = 0; i < w; i++) {
		struct guard_sock *s = &G.now[i];
		const struct guard_sock *p = bsearch(s, G.was, (size_t)G.nwas, sizeof *s, guard_by_fd);
		if (p && p->port == s->port && strcmp(p->addr, s->addr) == 0) {
			s->since = p->since;
			s->cut = p->cut;
		}
	}
	qsort(G.now, (size_t)w, sizeof *G.now, guard_by_addr_age);
	int cut = 0, addrs = 0, held = n;
	const char *cut_addr = NULL;
	for (int i = 0, j; i < w; i = j) {
		/* an address's share: per_addr connections, waiting or in a request */
		int waiting = G.now[i].plain;
		for (j = i; j < w && strcmp(G.now[j].addr, G.now[i].addr) == 0; j++)
			waiting += !G.now[j].cut;
		for (int k = i; k < j && waiting > G.per_addr; k++) {
			struct guard_sock *s = &G.now[k];
			if (s->cut)
				continue;
			if (now - s->since < GUARD_GRACE_MS)
				break; /* the rest are younger still */
			waiting--; /* cut, or a whole request that is not waiting for its head */
			if (!guard_cut(s))
				continue;
			cut++;
			addrs += !cut_addr || strcmp(cut_addr, s->addr) != 0;
			cut_addr = s->addr;
		}
	}
	for (int i = 0; i < w; i++)
		held -= G.now[i].cut;
	if (held > G.nthreads - G.reserve) {
		/* too few threads left: whoever has waited longest goes */
		qsort(G.now, (size_t)w, sizeof *G.now, guard_by_age);
		for (int i = 0; i < w && held > G.nthreads - G.reserve; i++) {
			struct guard_sock *s = &G.now[i];
			if (s->cut)
				continue;
			if (now - s->since < GUARD_RESERVE_GRACE_MS)
				break;
			if (!guard_cut(s))
				continue;
			held--;
			cut++;
			addrs += !cut_addr || strcmp(cut_addr, s->addr) != 0;
			cut_addr = s->addr;
		}
	}
	if (cut && now - G.logged_ms > 10000) {
		G.logged_ms = now;
		log_warn("cut %d connection%s from %s%s that waited longest for their request's headers: an address may "
			 "hold %d connections (serve --conns-per-addr), and %d of the %d threads are kept free", cut,
			 cut == 1 ? "" : "s", cut_addr, addrs > 1 ? " and others" : "", G.per_addr, G.reserve, G.nthreads);
	}
	qsort(G.now, (size_t)w, sizeof *G.now, guard_by_fd);
	struct guard_sock *t = G.was;
	G.was = G.now;
	G.now = t;
	G.nwas = w;
}

static void *guard_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&G.stop)) {
		guard_pass();
		struct timespec ts = { 0, GUARD_PERIOD_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Set the guard up for nthreads threads and conns_per_addr; 0, or -1 out of memory. */
static int guard_init(int nthreads, int conns_per_addr)
{
	G.nflight = nthreads + 16;
	G.per_addr = conns_per_addr;
	G.nthreads = nthreads;
	G.reserve = nthreads / 8 > 4 ? nthreads / 8 : 4;
	G.flight = calloc((size_t)G.nflight, sizeof *G.flight);
	G.was = calloc(GUARD_MAX_SOCKS, sizeof *G.was);
	G.now = calloc(GUARD_MAX_SOCKS, sizeof *G.now);
	if (!G.flight || !G.was || !G.now || body_deadline_init(G.nflight) != 0)
		return -1;
	return 0;
}

/* Watch the ports ctx listens on; guard_stop undoes it. */
static void guard_start(struct mg_context *ctx)
{
	struct mg_server_port ports[8];
	int np = mg_get_server_ports(ctx, 8, ports);
	for (int i = 0; i < np; i++)
		G.ports[G.nports++] = ports[i].port;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10);
	G.started = np > 0 && pthread_create(&G.thread, &attr, guard_main, NULL) == 0;
	pthread_attr_destroy(&attr);
	if (!G.started)
		log_warn("the connection guard did not start: connections waiting for their headers are cut only by "
			 "--request-timeout");
}

static void guard_stop(void)
{
	atomic_store(&G.stop, 1);
	if (G.started)
		pthread_join(G.thread, NULL);
	free(G.flight);
	free(G.was);
	free(G.now);
	G.flight = NULL;
	G.was = G.now = NULL;
	body_deadline_fini();
}

/* CivetWeb's begin_request: on_begin_request's checks, then the request is in
 * flight (until guard_end_request), refused 429 if its address has
 * conns_per_addr plain ones under way already. */
static int guard_begin_request(struct mg_connection *c)
{
	int rc = on_begin_request(c);
	if (rc)
		return rc;
	const struct mg_request_info *ri = mg_get_request_info(c);
	const char *up = mg_get_header(c, "Upgrade");
	int ws = up && strcasecmp(up, "websocket") == 0;
	int plain = 0, at = -1;
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < G.nflight; i++) {
		if (!G.flight[i].c)
			at = at < 0 ? i : at;
		else
			plain += !G.flight[i].ws && strcmp(G.flight[i].addr, ri->remote_addr) == 0;
	}
	int over = !ws && plain >= G.per_addr;
	if (at >= 0 && !over) {
		struct guard_flight *f = &G.flight[at];
		f->c = c;
		snprintf(f->addr, sizeof f->addr, "%s", ri->remote_addr);
		f->port = ri->remote_port;
		f->ws = ws;
	}
	pthread_mutex_unlock(&G.lock);
	if (!over) {
		body_deadline_begin(c);
		return 0;
	}
	static const char fmt[] =
		"{\"error\":{\"code\":\"rate_limited\",\"message\":\"%s has %d requests under way already, the most one "
		"address may have at once (serve --conns-per-addr); send this one when one of them is done\"}}";
	char body[400];
	int n = snprintf(body, sizeof body, fmt, ri->remote_addr, plain);
	http_send_head(c, &(struct http_head){ .status = 429, .type = "application/json", .len = n,
					       .extra = "Retry-After: 1\r\nConnection: close\r\n" });
	mg_write(c, body, (size_t)n);
	return 429;
}

/* The request of c is over (end_request), or c itself (connection_close). */
static void guard_forget(const struct mg_connection *c)
{
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < G.nflight; i++)
		if (G.flight[i].c == c)
			G.flight[i].c = NULL;
	pthread_mutex_unlock(&G.lock);
}

static void guard_end_request(const struct mg_connection *c, int status)
{
	(void)status;
	guard_forget(c);
	body_deadline_ended(c);
}

/* Decide whether accounts are on, and refuse what would leave the server open
 * to anyone who can reach it.  0, or 1 after logging why. */
static int accounts_setup(const struct server_opts *opts)
{
	int loopback = server_listen_is_loopback(opts->listen);
	int on = opts->accounts == ACCOUNTS_AUTO ? !loopback : opts->accounts == ACCOUNTS_ON;
	if (!on && !loopback) {
		log_error("refusing to listen on %s with accounts off: anyone who reaches this machine could use "
			  "and delete everything.  Add the first admin with\n"
			  "    deepdesk user add NAME --role admin --data %s\n"
			  "and start again (accounts are on by themselves off loopback), or listen on 127.0.0.1.",
			  opts->listen, S.data_dir);
		return 1;
	}
	if (on) {
		int64_t n = 0;
		struct dd_err err = { 0 };
		if (auth_user_count(&n, &err) != DD_OK) {
			log_error("%s", err.msg);
			return 1;
		}
		if (n == 0) {
			log_error("accounts are on but %s/" STORE_FILE " has no account yet, so nobody could log in.  "
				  "Add the first admin with\n"
				  "    deepdesk user add NAME --role admin --data %s\n"
				  "and start again.",
				  S.data_dir, S.data_dir);
			return 1;
		}
	}
	struct auth_config ac = {
		.accounts = on,
		.tls = opts->tls_cert != NULL,
		.idle_ms = (int64_t)opts->session_idle_s * 1000,
		.max_ms = (int64_t)opts->session_max_s * 1000,
	};
	auth_configure(&ac);
	S.accounts = on;
	if (on)
		auth_sessions_sweep(NULL);
	log_info("accounts are %s%s", on ? "on" : "off", on ? "" : " (loopback only: everything is the local user's)");
	return 0;
}

/* The helpers that let CivetWeb use OpenSSL 3 (app/http/tls_shim.c): build/tls/ beside
 * this program.  Loaded once, by tls_usable(), and never unloaded: CivetWeb's own
 * dlopen("libssl.so") then gets this object (glibc reuses a loaded object whose
 * soname is the name asked for).  NULL where they are missing. */
static void *tls_shim;

static void tls_load_shim(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
	if (n <= 0)
		return;
	dir[n] = 0;
	char *slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = 0;
	/* libcrypto first, so that the libssl shim's dependency is already there */
	snprintf(path, sizeof path, "%s/tls/libcrypto.so", dir);
	if (access(path, R_OK) == 0 && !dlopen(path, RTLD_NOW | RTLD_LOCAL))
		log_warn("TLS: %s: %s", path, dlerror());
	snprintf(path, sizeof path, "%s/tls/libssl.so", dir);
	if (access(path, R_OK) != 0)
		return;
	tls_shim = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!tls_shim)
		log_warn("TLS: %s: %s", path, dlerror());
}

/* Can this CivetWeb serve HTTPS here?  1 yes; 0 after logging why not.  Asks
 * what CivetWeb will ask: "libssl.so" and "libcrypto.so" by those names, and
 * SSL_get_peer_certificate in the first. */
static int tls_usable(void)
{
	if (!mg_check_feature(MG_FEATURES_TLS)) {
		log_error("--tls-cert: this system's CivetWeb was built without TLS; serve HTTP on loopback behind "
			  "a TLS proxy (nginx, caddy) instead");
		return 0;
	}
	/* Debian 12's CivetWeb 1.15 is built for OpenSSL 1.1 and looks its functions
	 * up in libssl.so at run time; OpenSSL 3 renamed SSL_get_peer_certificate,
	 * and CivetWeb then calls a NULL pointer on the first HTTPS request.  The
	 * shim gives it the old name; without the shim, refuse rather than crash (a
	 * libssl.so that has it, 1.1, works as it is). */
	if (!tls_shim)
		tls_load_shim();
	void *ssl = dlopen("libssl.so", RTLD_LAZY | RTLD_LOCAL);
	void *crypto = dlopen("libcrypto.so", RTLD_LAZY | RTLD_LOCAL);
	int usable = ssl && crypto && dlsym(ssl, "SSL_get_peer_certificate");
	if (ssl)
		dlclose(ssl);
	if (crypto)
		dlclose(crypto);
	if (!usable) {
		log_error("--tls-cert: this system's CivetWeb (1.15, built for OpenSSL 1.1) cannot serve HTTPS with "
			  "its OpenSSL (%s): every HTTPS request would crash the server, as it needs "
			  "SSL_get_peer_certificate, which OpenSSL 3 no longer has, and the helper that gives it "
			  "(tls/libssl.so beside this program, built by make) is missing.  Serve HTTP on loopback "
			  "behind a TLS proxy (nginx, caddy) instead",
			  !ssl || !crypto ? "no libssl.so or libcrypto.so to load" : "libssl.so is OpenSSL 3");
		return 0;
	}
	return 1;
}

/* Does OpenSSL accept --tls-cert and --tls-key, and do they belong together?
 * 1 yes (or no shim to ask); 0 after logging which file is wrong and why. */
static int tls_pair_ok(const struct server_opts *opts)
{
	int (*check)(const char *, const char *, char *, size_t) = NULL;
	if (tls_shim)
		*(void **)&check = dlsym(tls_shim, "dd_tls_check_pair");
	if (!check)
		return 1; /* CivetWeb's own check at start-up still stands */
	char why[256];
	switch (check(opts->tls_cert, opts->tls_key, why, sizeof why)) {
	case 0:
		return 1;
	case 1:
		log_error("--tls-cert %s: OpenSSL cannot use this certificate: %s", opts->tls_cert, why);
		return 0;
	case 2:
		log_error("--tls-key %s: OpenSSL cannot use this private key: %s", opts->tls_key, why);
		return 0;
	default:
		log_error("--tls-key %s: not the private key of the certificate in --tls-cert %s (%s)", opts->tls_key,
			  opts->tls_cert, why);
		return 0;
	}
}

/* --tls-cert and --tls-key into the one PEM file CivetWeb reads (key and
 * certificate together), DATA/tls.pem, readable by us alone; and the ports of
 * listen with CivetWeb's "s" (HTTPS) appended into ports.  0, or 1 after logging
 * why. */
static int tls_setup(const struct server_opts *opts, char *pem, size_t pemlen, char *ports, size_t portslen)
{
	char *cert = NULL, *key = NULL;
	size_t clen = 0, klen = 0;
	struct dd_err err = { 0 };
	int rc = 1;
	if (fs_read_file(opts->tls_cert, 1 << 20, &cert, &clen, &err) != DD_OK ||
	    fs_read_file(opts->tls_key, 1 << 20, &key, &klen, &err) != DD_OK) {
		log_error("TLS: %s", err.msg);
		goto out;
	}
	if (!strstr(cert, "-----BEGIN CERTIFICATE-----")) {
		log_error("--tls-cert %s: not a PEM certificate (no BEGIN CERTIFICATE line)", opts->tls_cert);
		goto out;
	}
	if (!strstr(key, "PRIVATE KEY-----")) {
		log_error("--tls-key %s: not a PEM private key (no PRIVATE KEY line)", opts->tls_key);
		goto out;
	}
	if (strstr(key, "ENCRYPTED")) {
		log_error("--tls-key %s: the key is encrypted with a passphrase, which the server cannot ask for; "
			  "give it the key decrypted (openssl pkey -in %s -out KEY.pem, kept readable by this user alone)",
			  opts->tls_key, opts->tls_key);
		goto out;
	}
	if (!tls_usable() || !tls_pair_ok(opts))
		goto out;
	snprintf(pem, pemlen, "%s/tls.pem", S.data_dir);
	size_t total = klen + clen + 2;
	char *both = malloc(total);
	if (!both) {
		log_error("out of memory");
		goto out;
	}
	int n = snprintf(both, total, "%s\n%s", key, cert);
	int wrc = fs_write_file_atomic(pem, both, (size_t)n, &err); /* 0600: server_run's umask */
	sodium_memzero(both, total);
	free(both);
	if (wrc != DD_OK) {
		log_error("TLS: %s", err.msg);
		goto out;
	}
	size_t at = 0;
	for (const char *p = opts->listen; *p;) {
		size_t len = strcspn(p, ",");
		int w = snprintf(ports + at, portslen - at, "%s%.*ss", at ? "," : "", (int)len, p);
		if (w < 0 || (size_t)w >= portslen - at) {
			log_error("--listen: too long");
			goto out;
		}
		at += (size_t)w;
		p += len + (p[len] == ',');
	}
	rc = 0;
out:
	free(cert);
	if (key)
		sodium_memzero(key, klen);
	free(key);
	return rc;
}

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

static void on_connection_close(const struct mg_connection *c)
{
	guard_forget(c);
	body_deadline_end(c);
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
	if (routes_check() != 0)
		return 1;
	/* The data folder holds password and token hashes and every learner's data: what
	 * the server and its workers create is theirs alone (workers inherit the mask;
	 * Slurm runs them as the server's user), and the folder itself is closed to
	 * others, which also closes what an older version left 0644 inside it. */
	umask(077);
	if (fs_mkdir_p(opts->data_dir, &err) != DD_OK) {
		log_error("%s", err.msg);
		return 1;
	}
	if (!realpath(opts->data_dir, S.data_dir)) {
		log_error("cannot resolve the data folder %s: %s", opts->data_dir, strerror(errno));
		return 1;
	}
	struct stat dst;
	if (stat(S.data_dir, &dst) == 0 && (dst.st_mode & 077) && chmod(S.data_dir, 0700) != 0)
		log_warn("cannot make the data folder %s private (chmod 0700): %s", S.data_dir, strerror(errno));
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
	if (accounts_setup(opts))
		return 1;
	char pem[PATH_MAX + 16] = "", listen[1024];
	snprintf(listen, sizeof listen, "%s", opts->listen);
	if ((opts->tls_cert != NULL) != (opts->tls_key != NULL)) {
		log_error("--tls-cert and --tls-key go together: give both, or neither");
		return 1;
	}
	if (opts->tls_cert && tls_setup(opts, pem, sizeof pem, listen, sizeof listen))
		return 1;
	http_set_https(pem[0] != 0);
	sweep_uploads();
	if (metrics_configure(opts->metrics_token, &err) != DD_OK) {
		log_error("%s", err.msg);
		return 1;
	}

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
		.data_roots = opts->data_roots,
		.nroots = opts->nroots,
		.archive_max_files = opts->archive_max_files,
		.archive_max_bytes = opts->archive_max_bytes,
	};

	/* Each connection holds a CivetWeb thread while it is read from (headers,
	 * body), between requests it keeps alive, and for a WebSocket's whole life:
	 * WebSockets may hold half the threads, and the guard (above) keeps one
	 * address from holding many more than conns_per_addr of the rest. */
	char threads[16], timeout[16], queue[16];
	int nthreads = opts->threads > 0 ? opts->threads : 256;
	int per_addr = opts->conns_per_addr > 0 ? opts->conns_per_addr : 32;
	struct ws_limits wsl = {
		.total = nthreads / 2,
		.per_user = opts->ws_per_user > 0 ? opts->ws_per_user : 8,
		.per_addr = opts->ws_per_addr > 0 ? opts->ws_per_addr : 16,
	};
	snprintf(threads, sizeof threads, "%d", nthreads);
	/* accepted connections no thread has taken yet: the guard sees (and cuts)
	 * only what was accepted, so let CivetWeb accept well beyond its threads */
	snprintf(queue, sizeof queue, "%d", nthreads * 4);
	snprintf(timeout, sizeof timeout, "%d", (opts->request_timeout_s > 0 ? opts->request_timeout_s : 10) * 1000);
	if (guard_init(nthreads, per_addr) != 0) {
		log_error("out of memory");
		return 1;
	}
	const char *options[] = {
		"listening_ports", listen,
		"num_threads", threads,
		"connection_queue", queue,
		/* every header within this from the first byte; a body's read gives up
		 * after this long without a byte (and the handler answers 408) */
		"request_timeout_ms", timeout,
		"websocket_timeout_ms", "3600000",
		"enable_keep_alive", "yes",
		"keep_alive_timeout_ms", "5000",
		"tcp_nodelay", "1",
		/* the only files CivetWeb sends itself are snapshots: a user's data */
		"static_file_cache_control", HTTP_CACHE_USER_DATA,
		pem[0] ? "ssl_certificate" : NULL, pem,
		/* TLS 1.2 and 1.3 only; 1.2 with forward-secret key exchange and AEAD ciphers
		 * alone (no RSA key exchange, no CBC-SHA1); 1.3's suites are all AEAD */
		"strict_transport_security_max_age", "31536000",
		"ssl_protocol_version", "4",
		"ssl_cipher_list", "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL",
		NULL,
	};
	struct mg_callbacks cb = { 0 };
	cb.exit_thread = on_thread_exit;
	cb.begin_request = guard_begin_request;
	cb.end_request = guard_end_request;
	cb.connection_close = on_connection_close;
	cb.log_message = log_message;
	mg_init_library(MG_FEATURES_WEBSOCKET | (pem[0] ? MG_FEATURES_TLS : 0));

	if (sched_start(&sc, ws_publish, NULL, &err) != DD_OK) {
		log_error("%s", err.msg);
		return 1;
	}
	if (infer_service_start(exe, S.data_dir, &err) != DD_OK) {
		log_error("%s", err.msg);
		sched_stop();
		return 1;
	}
	struct mg_context *ctx = mg_start(&cb, NULL, options);
	if (!ctx) {
		log_error("cannot listen on %s (in use, or not an address of this machine?)", opts->listen);
		infer_service_stop();
		sched_stop();
		return 1;
	}
	mg_set_request_handler(ctx, "/api/v1/", api_dispatch_timed, NULL);
	mg_set_request_handler(ctx, "/api/v1$", api_dispatch_timed, NULL);
	for (const struct route *rt = routes; rt->pattern; rt++) {
		if (!route_is_digits(rt))
			continue;
		/* CivetWeb's pattern: a {segment} is "*" (anything but '/'), then match() parses it */
		char exact[256];
		size_t o = 0;
		for (const char *q = rt->pattern; *q && o + 2 < sizeof exact; q++) {
			if (*q == '{' && strchr(q, '}')) {
				exact[o++] = '*';
				q = strchr(q, '}');
			} else
				exact[o++] = *q;
		}
		exact[o++] = '$';
		exact[o] = 0;
		mg_set_request_handler(ctx, exact, api_dispatch_timed, NULL);
	}
	mg_set_request_handler(ctx, "/metrics$", metrics_handler, NULL);
	mg_set_request_handler(ctx, "/", static_handler, NULL);
	ws_register(ctx, &wsl);
	guard_start(ctx);

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
		log_info("deepdesk %s: open http%s://%s:%d/ in a browser (data folder %s)", DD_VERSION,
			 pem[0] ? "s" : "", host, ports[0].port, S.data_dir);
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
	guard_stop();
	infer_service_stop();
	sched_stop();
	store_thread_end();
	return 0;
}
