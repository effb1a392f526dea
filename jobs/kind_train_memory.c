/* kind_train_memory.c — see kind_train_memory.h. */
#define _GNU_SOURCE
#include "kind_train_memory.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../common/sanitizer.h"
#include "../common/testhooks.h"
#include "../datasets/dsinfo.h"
#include "../networks/memory.h"
#include "../networks/modeldir.h"
#include "../networks/net.h"
#include "../networks/solver.h"
#include "../networks/train.h"
#include "../store/store.h"
#include "job.h"
#include "kind_train.h"
#include "sched.h"

#define MIB (1024 * 1024LL)
#define MEMORY_FILE "memory.json"

static int64_t limit_bytes = -1; /* -1: not set, auto */

/* ---- the limit ---- */

/* A cgroup's memory limit for this process (v2 memory.max, v1
 * memory.limit_in_bytes), 0 when none or unreadable. */
static int64_t cgroup_limit(void)
{
	char *text = NULL;
	int64_t best = 0;
	if (fs_read_file("/proc/self/cgroup", 1 << 16, &text, NULL, NULL) != DD_OK)
		return 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		/* "0::/path" (v2) or "4:memory:/path" (v1) */
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = 0;
		int v2 = !strcmp(a + 1, ""), v1 = !strcmp(a + 1, "memory");
		if (!v1 && !v2)
			continue;
		char path[PATH_MAX], *val = NULL;
		snprintf(path, sizeof path, v2 ? "/sys/fs/cgroup%s/memory.max" : "/sys/fs/cgroup/memory%s/memory.limit_in_bytes",
			 b + 1);
		if (fs_read_file(path, 64, &val, NULL, NULL) == DD_OK) {
			long long n = strtoll(val, NULL, 10); /* "max" reads 0 */
			if (n > 0 && n < (1LL << 60) && (!best || n < best))
				best = n;
			free(val);
		}
	}
	free(text);
	return best;
}

int64_t job_memory_auto(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	int64_t phys = pages > 0 && page > 0 ? (int64_t)pages * page : 8192 * MIB;
	int64_t cg = cgroup_limit();
	if (cg > 0 && cg < phys)
		phys = cg;
	return phys / 2;
}

int64_t job_memory_max(void)
{
	if (limit_bytes < 0)
		limit_bytes = job_memory_auto();
	return limit_bytes;
}

void job_memory_set_max(int64_t bytes) { limit_bytes = bytes; }

int job_memory_parse(const char *s, int64_t *bytes, struct dd_err *err)
{
	if (s && !strcmp(s, "auto")) {
		*bytes = job_memory_auto();
		return DD_OK;
	}
	if (s && !strcmp(s, "off")) {
		*bytes = 0;
		return DD_OK;
	}
	char *end = NULL;
	errno = 0;
	double v = s ? strtod(s, &end) : -1;
	int64_t unit = 1;
	if (end && *end) {
		static const char *const units = "KMGT";
		const char *u = strchr(units, end[0] & ~0x20);
		if (!u || !*u) /* not a unit (strchr finds the terminator for a NUL) */
			goto bad;
		for (const char *p = units; p <= u; p++)
			unit *= 1024;
		const char *rest = end + 1;
		if (strcasecmp(rest, "") && strcasecmp(rest, "B") && strcasecmp(rest, "iB"))
			goto bad;
	}
	if (!(v >= 1) || errno || v * (double)unit > 9e18)
		goto bad;
	*bytes = (int64_t)(v * (double)unit);
	return DD_OK;
bad:
	return dd_err_set(err, DD_EINVAL,
			  "--job-memory-max: \"%s\" is not a size: use bytes, a size like 4G or 512M, auto or off",
			  s ? s : "");
}

/* What a worker needs beyond its estimate: the stacks its threads reserve (one per
 * core for OpenMP, and the feeds' and the writer's), and 64 MiB. */
static int64_t thread_margin(void)
{
	struct rlimit st;
	int64_t stack = getrlimit(RLIMIT_STACK, &st) == 0 && st.rlim_cur != RLIM_INFINITY ? (int64_t)st.rlim_cur : 8 * MIB;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	return 64 * MIB + (ncpu > 0 ? ncpu + 4 : 8) * stack;
}

static int64_t cap_of(int64_t l) { return l > 0 ? l + l / 4 + thread_margin() : 0; }

int64_t job_memory_cap(void) { return cap_of(job_memory_max()); }

int64_t job_memory_max_for(int64_t user_id, int *from_quota)
{
	int64_t l = job_memory_max();
	struct store_quota q;
	int quota = user_id > 0 && store_quota_get(user_id, &q, NULL) == DD_OK && q.memory_bytes > 0 &&
		    (l <= 0 || q.memory_bytes < l);
	if (from_quota)
		*from_quota = quota;
	return quota ? q.memory_bytes : l;
}

void train_memory_guard(cJSON *job, int64_t owner_id)
{
	cJSON *g = cJSON_GetObjectItemCaseSensitive(job, "guard");
	if (!cJSON_IsObject(g))
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(g, "memory_max");
	cJSON_AddNumberToObject(g, "memory_max", (double)job_memory_max_for(owner_id, NULL));
}

int64_t job_memory_cap_dir(const char *dir)
{
	char path[PATH_MAX], *text = NULL;
	size_t len = 0;
	cJSON *job = NULL;
	snprintf(path, sizeof path, "%s/job.json", dir);
	int64_t cap = job_memory_cap();
	if (fs_read_file(path, 64u << 20, &text, &len, NULL) == DD_OK && json_parse(text, len, path, &job, NULL) == DD_OK) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "guard"),
								  "memory_max");
		if (cJSON_IsNumber(m) && m->valuedouble >= 0)
			cap = cap_of((int64_t)m->valuedouble);
	}
	cJSON_Delete(job);
	free(text);
	return cap;
}

/* ---- the estimate of a job ---- */

int train_memory_estimate(const char *text, const char *ds_dir, int batch, int crop, const char *solver,
			  const char *backend, int replicas, struct net_memory *m, char *largest, size_t largest_len,
			  int64_t *largest_params, struct dd_err *err)
{
	struct net_input in = { .n = batch, .crop = crop };
	struct net *def = NULL;
	struct net_graph *tg = NULL, *vg = NULL;
	enum solver_type st = SOLVER_SGD;
	int rc;
	if ((rc = train_dataset_input(ds_dir, &in, err)) || (solver && (rc = solver_type_parse(solver, &st, err))) ||
	    (rc = net_parse(text, strlen(text), &def, err)) ||
	    (rc = net_instantiate(def, NET_STAGE_TRAIN, &in, &tg, err)) ||
	    (rc = net_instantiate(def, NET_STAGE_VAL, &in, &vg, err)))
		goto out;
	if ((rc = net_memory_estimate(tg, vg, st, backend, replicas, m))) {
		dd_err_set(err, rc, "out of memory");
		goto out;
	}
	int k = net_memory_largest_layer(tg);
	if (largest)
		snprintf(largest, largest_len, "%s", k >= 0 ? tg->node[k].l.name : "");
	if (largest_params)
		*largest_params = k >= 0 ? tg->node[k].nparams : 0;
out:
	net_graph_free(tg);
	net_graph_free(vg);
	net_free(def);
	return rc;
}


static int int_of(const cJSON *o, const char *k)
{
	const cJSON *v = json_get(o, k);
	return cJSON_IsNumber(v) ? (int)v->valuedouble : 0;
}

static int over_limit(const struct net_memory *m, const char *largest, int64_t lp, int64_t limit, int quota,
		      struct dd_err *err);

int train_memory_check(const cJSON *params, const struct job_caller *who, struct dd_err *err)
{
	int quota = 0;
	int64_t limit = who ? job_memory_max_for(who->user_id, &quota) : job_memory_max();
	if (limit <= 0)
		return DD_OK;
	char ds[PATH_MAX], path[PATH_MAX + 32];
	sched_job_dir((int64_t)cJSON_GetNumberValue(json_get(params, "dataset")), ds, sizeof ds);
	if (!dsinfo_ready(ds))
		return DD_OK; /* not a finished dataset (yet): the API and the worker say so */
	const cJSON *net = json_get(params, "network");
	const char *text = NULL;
	char *prev = NULL;
	if (cJSON_IsString(json_get(net, "standard")))
		text = net_standard_text(json_get(net, "standard")->valuestring);
	else if (cJSON_IsString(json_get(net, "prototxt")))
		text = json_get(net, "prototxt")->valuestring;
	else if (cJSON_IsNumber(json_get(net, "previous"))) {
		sched_job_dir((int64_t)json_get(net, "previous")->valuedouble, path, sizeof path);
		strncat(path, "/" MODELDIR_NETWORK, sizeof path - strlen(path) - 1);
		if (fs_read_file(path, 4u << 20, &prev, NULL, NULL) == DD_OK)
			text = prev;
	}
	if (!text)
		return DD_OK;
	const cJSON *g = json_get(params, "gpus");
	int replicas = cJSON_IsNumber(g) ? (int)g->valuedouble : cJSON_IsArray(g) ? cJSON_GetArraySize(g) : 1;
	struct net_memory m;
	struct dd_err e = { 0 };
	char largest[128] = "";
	int64_t lp = 0;
	int rc = train_memory_estimate(text, ds, int_of(params, "batch_size"), int_of(params, "crop_size"),
				       cJSON_GetStringValue(json_get(json_get(params, "solver"), "type")),
				       cJSON_GetStringValue(json_get(params, "backend")), replicas, &m, largest, sizeof largest,
				       &lp, &e);
	free(prev);
	if (rc)
		return DD_OK; /* a network that does not build is the network check's to report */
	return over_limit(&m, largest, lp, limit, quota, err);
}

int train_memory_over(const struct net_memory *m, const char *largest, int64_t lp, struct dd_err *err)
{
	return over_limit(m, largest, lp, job_memory_max(), 0, err);
}

/* train_memory_over's sentence, for limit: the server's (quota 0) or the user's
 * memory quota (quota 1). */
static int over_limit(const struct net_memory *m, const char *largest, int64_t lp, int64_t limit, int quota,
		      struct dd_err *err)
{
	if (limit <= 0 || m->host <= limit)
		return DD_OK;
	char need[32], lim[32], weights[32], acts[32];
	net_memory_human(m->host, need, sizeof need);
	net_memory_human(limit, lim, sizeof lim);
	int64_t w = m->params + m->grads + m->history, a = m->activations + m->act_grads + m->saved + m->layer_state;
	net_memory_human(w, weights, sizeof weights);
	net_memory_human(a, acts, sizeof acts);
	char fix[256];
	if (w >= a && largest && largest[0])
		snprintf(fix, sizeof fix, "lower num_output of layer '%s' (%lld parameters) or of the layers before it",
			 largest, (long long)lp);
	else
		snprintf(fix, sizeof fix, "lower batch_size (now %d)%s%s%s", m->batch,
			 largest && largest[0] ? " or num_output of layer '" : "", largest ? largest : "",
			 largest && largest[0] ? "'" : "");
	return dd_err_set(err, DD_EINVAL,
			  "memory: training this network at batch %d needs about %s (%lld bytes: weights, gradients "
			  "and solver state %s, activations %s), over %s of %s (%lld bytes, %s): %s",
			  m->batch, need, (long long)m->host, weights, acts,
			  quota ? "your per-job memory quota" : "the per-job memory limit", lim, (long long)limit,
			  quota ? "quota.memory_bytes, which an admin sets" : "deepdesk serve --job-memory-max", fix);
}

/* ---- in the worker ---- */

static void on_fatal(int sig)
{
	/* a NULL from malloc, dereferenced: errno still says why */
	if (errno == ENOMEM) {
		static const char msg[] = "deepdesk worker: out of memory (an allocation failed)\n";
		ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
		(void)n;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void train_memory_enter(const char *dir, const struct net_memory *m, char *msg, size_t len)
{
	struct rlimit rl;
	int64_t limit = 0;
	if (!DD_UNDER_ASAN && getrlimit(RLIMIT_DATA, &rl) == 0) {
		if (m->device) {
			rl.rlim_cur = rl.rlim_max; /* the CUDA driver's own mappings are not ours to bound */
		} else {
			/* only under a limit the executor set (not `--job-memory-max off`,
			 * not Slurm, whose --mem is its own) */
			int64_t want = m->host + m->host / 4 + thread_margin();
			if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur > want)
				rl.rlim_cur = (rlim_t)want;
		}
		setrlimit(RLIMIT_DATA, &rl);
		limit = rl.rlim_cur == RLIM_INFINITY ? 0 : (int64_t)rl.rlim_cur;
	}
	char text[256], path[PATH_MAX + 32];
	snprintf(text, sizeof text, "{\"estimate\":%lld,\"batch\":%d,\"limit\":%lld}\n", (long long)m->host, m->batch,
		 (long long)limit);
	snprintf(path, sizeof path, "%s/" MEMORY_FILE, dir);
	fs_write_file_atomic(path, text, strlen(text), NULL);
	signal(SIGSEGV, on_fatal);
	signal(SIGBUS, on_fatal);
	signal(SIGABRT, on_fatal);
	char need[32], lim[32];
	net_memory_human(m->host, need, sizeof need);
	net_memory_human(limit, lim, sizeof lim);
	snprintf(msg, len, "memory: about %s at batch %d%s%s%s", need, m->batch, limit ? " (the worker's limit: " : "",
		 limit ? lim : "", limit ? ")" : "");
}

/* "N MiB at batch B" (or "N MiB"), from dir's memory.json; "" when there is none. */
static void figure(const char *dir, char *buf, size_t len)
{
	char path[PATH_MAX + 32], *text = NULL;
	buf[0] = 0;
	snprintf(path, sizeof path, "%s/" MEMORY_FILE, dir);
	if (fs_read_file(path, 4096, &text, NULL, NULL) != DD_OK)
		return;
	cJSON *j = cJSON_Parse(text);
	free(text);
	double est = cJSON_GetNumberValue(json_get(j, "estimate")), lim = cJSON_GetNumberValue(json_get(j, "limit"));
	int batch = int_of(j, "batch");
	if (est > 0) {
		int n = snprintf(buf, len, "%.0f MiB", est / MIB);
		if (batch > 0)
			n += snprintf(buf + n, len - (size_t)n, " at batch %d", batch);
		if (lim > 0)
			snprintf(buf + n, len - (size_t)n, ", limit %.0f MiB", lim / MIB);
	}
	cJSON_Delete(j);
}

static const char *const lower = "lower batch_size, or num_output of the largest layers";

long long train_memory_oom_kills(void)
{
	long long n = -1;
	FILE *f = fopen("/proc/vmstat", "r");
	if (f) {
		char line[128];
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "oom_kill %lld", &n) == 1)
				break;
		fclose(f);
	}
	/* the test build: a file whose number counts as OOM kills too */
	const char *hook = testhook_str(TESTHOOK_OOM_KILLS);
	FILE *h = hook ? fopen(hook, "r") : NULL;
	long long extra = 0;
	if (h) {
		if (fscanf(h, "%lld", &extra) != 1)
			extra = 0;
		fclose(h);
	}
	return n >= 0 ? n + extra : n;
}

int train_memory_death(const char *dir, int sig, int code, int oom_killed, const char *tail, char *why, size_t len)
{
	int says = tail && (strcasestr(tail, "out of memory") || strcasestr(tail, "cannot allocate memory") ||
			    strcasestr(tail, "bad_alloc"));
	int mem = (sig == SIGKILL && oom_killed) || (sig > 0 && says) || (code > 0 && says);
	if (!mem)
		return 0;
	char fig[96];
	figure(dir, fig, sizeof fig);
	char how[160];
	if (sig == SIGKILL)
		snprintf(how, sizeof how, "the worker was killed by signal 9 (SIGKILL), as the kernel's out-of-memory "
					  "killer ends a process");
	else if (sig > 0)
		snprintf(how, sizeof how, "the worker crashed (signal %d, %s) after an allocation failed", sig,
			 strsignal(sig));
	else
		snprintf(how, sizeof how, "the worker exited with status %d after an allocation failed", code);
	/* the advice is a training's; another kind's figure, if any, has no batch */
	int training = strstr(fig, " at batch ") != NULL;
	snprintf(why, len, "out of memory%s%s%s: %s%s%s%s%s", fig[0] ? " (" : "", fig, fig[0] ? ")" : "", how,
		 training ? "; " : "", training ? lower : "", tail && tail[0] ? "; last output: " : "", tail ? tail : "");
	return 1;
}

void train_memory_oom_message(const char *dir, struct dd_err *err)
{
	char fig[96], msg[sizeof err->msg];
	figure(dir, fig, sizeof fig);
	snprintf(msg, sizeof msg, "%s", err->msg);
	dd_err_set(err, DD_ENOMEM, "out of memory%s%s%s: %s; %s", fig[0] ? " (" : "", fig, fig[0] ? ")" : "", msg,
		   lower);
}
