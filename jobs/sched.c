/* sched.c — see sched.h.
 *
 * Invariants:
 *  - `running[]` holds exactly the jobs this scheduler watches; each is `running`
 *    in the store.  Only the scheduler thread adds to it (start) or removes from
 *    it (settle); API threads read it under `lock` to signal a worker.
 *  - A job's final state is decided once, in settle(): its own final status
 *    event wins (so a job that finished is never shown as aborted); without one,
 *    an abort request makes it `aborted`; otherwise the exit status or signal
 *    makes it `error`, with the last lines of its log in the message.
 *  - The event-log position is saved in the store after every poll that read
 *    something, so a restarted server neither repeats nor skips events.
 *  - GPUs are held like CPU slots: gpu_holder[g] is the id of the running job that
 *    holds GPU g (0: free), set when the job starts and cleared when it settles.
 *    A job asks for GPUs through its kind's resources hook (a model's params:
 *    "backend": "cuda", "gpus": N, [ids] or "any"); at its start the scheduler
 *    writes the ids it got into job.json (resources.gpus, and params.backend
 *    "cuda:ID" so that the worker runs on the first).  One job per GPU.  A job
 *    whose executor is not EXEC_LOCAL (a cluster) holds none of this server's CPU
 *    slots or GPUs: it asks for a count (or "any": 1), and job.json gets
 *    resources.gpu_count, which becomes Slurm's --gres=gpu:N and, in the worker,
 *    one copy of the network per GPU Slurm gave it. */
#define _GNU_SOURCE
#include "sched.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../store/store.h"
#include "../common/fsutil.h"
#include "../common/json.h"
#include "../common/log.h"
#include "../common/testhooks.h"
#include "../networks/backend.h"
#include "events.h"
#include "job.h"
#include "jobdir.h"
#include "kind_check.h"
#include "kind_train_memory.h"

#define SCHED_STACK (2u << 20) /* the scheduler thread: sched_start says why */

#define SCHED_MAX_GPUS JOB_MAX_GPUS
#define SCHED_MAX_ROOTS 32

struct running {
	int64_t id;
	const struct executor *ex; /* who runs it: local, or a cluster (Slurm) */
	struct exec_handle h;
	int slots;
	int gpus[SCHED_MAX_GPUS]; /* the GPU ids it holds */
	int ngpus;
	const struct job_kind *kind; /* its row, for the ended hook; NULL if this build lacks it */
	long long oom_kills;         /* the kernel's OOM-kill count when it started (or was adopted); -1 unknown */
	struct events_tail tail;
	int64_t kill_at; /* monotonic ms for SIGKILL, 0 when no abort pending */
	int abort;
	double progress, eta_s;
	int progress_dirty;
	int settle_pending, settle_status; /* ended, but the store has not taken it yet */
};

static struct {
	struct sched_config cfg;
	char data_dir[PATH_MAX];
	char exe[PATH_MAX];
	sched_listener listener;
	void *listener_ctx;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stopping, woken;
	struct running *running;
	int nrunning, cap;
	int slots_used;
	struct backend_gpu gpu[SCHED_MAX_GPUS]; /* what sched_start found */
	int ngpu;
	int64_t gpu_holder[SCHED_MAX_GPUS];     /* job id holding each, 0: free */
	int any_cluster; /* some kind runs on a cluster executor (holds no local slots) */
	char roots[SCHED_MAX_ROOTS][PATH_MAX]; /* --data-root, resolved at start */
	const char *root_ptr[SCHED_MAX_ROOTS];
	struct job_server server;              /* what every validation and worker is given */
} S = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

void sched_job_dir(int64_t id, char *buf, size_t len)
{
	jobdir_job(S.data_dir, id, buf, len);
}

void sched_slots(int *used, int *total)
{
	pthread_mutex_lock(&S.lock);
	*used = S.slots_used;
	*total = S.cfg.cpu_slots;
	pthread_mutex_unlock(&S.lock);
}

int sched_gpus(struct backend_gpu *out, int64_t *holder, int max)
{
	pthread_mutex_lock(&S.lock);
	int n = S.ngpu < max ? S.ngpu : max;
	for (int i = 0; i < n; i++) {
		out[i] = S.gpu[i];
		if (holder)
			holder[i] = S.gpu_holder[i];
	}
	pthread_mutex_unlock(&S.lock);
	return n;
}

cJSON *sched_gpus_json(void)
{
	struct backend_gpu g[SCHED_MAX_GPUS], live[SCHED_MAX_GPUS];
	int64_t holder[SCHED_MAX_GPUS];
	int n = sched_gpus(g, holder, SCHED_MAX_GPUS);
	/* NVML's use now, asked at most every 2 s (it starts and stops NVML each time) */
	static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
	static struct backend_gpu live_cache[SCHED_MAX_GPUS];
	static int live_n;
	static int64_t live_at;
	pthread_mutex_lock(&live_lock);
	if (n && (!live_at || fs_mono_ms() - live_at > 2000)) {
		live_n = backend_gpus(live_cache, SCHED_MAX_GPUS);
		live_at = fs_mono_ms();
	}
	int nlive = n ? live_n : 0;
	memcpy(live, live_cache, sizeof live);
	pthread_mutex_unlock(&live_lock);
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; arr && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddNumberToObject(o, "id", g[i].id);
		cJSON_AddStringToObject(o, "name", g[i].name);
		cJSON_AddNumberToObject(o, "memory_total", (double)g[i].memory_total);
		for (int k = 0; k < nlive; k++)
			if (live[k].id == g[i].id) {
				if (live[k].memory_used >= 0)
					cJSON_AddNumberToObject(o, "memory_used", (double)live[k].memory_used);
				if (live[k].utilization >= 0)
					cJSON_AddNumberToObject(o, "utilization", live[k].utilization);
			}
		if (holder[i])
			cJSON_AddNumberToObject(o, "job", (double)holder[i]);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

/* What a job of kind k with these params needs besides CPU slots (job.h,
 * job_kind.resources): GPUs.  need->gpus 0 for a kind that uses none, or one
 * this build lacks. */
static int kind_needs(const struct job_kind *k, const cJSON *params, int cluster, struct job_need *need,
		      struct dd_err *err)
{
	memset(need, 0, sizeof *need);
	return k && k->resources ? k->resources(params, S.ngpu, cluster, need, err) : DD_OK;
}

static void wake(void)
{
	pthread_mutex_lock(&S.lock);
	S.woken = 1;
	pthread_cond_signal(&S.wake);
	pthread_mutex_unlock(&S.lock);
}

static void notify(int64_t id, const char *what, cJSON *payload)
{
	if (S.listener)
		S.listener(S.listener_ctx, id, what, payload);
}

void sched_job_changed(int64_t id)
{
	cJSON *job = NULL;
	if (store_job_json(id, 0, &job, NULL) == DD_OK)
		notify(id, "job", job);
	cJSON_Delete(job);
}

/* The queue changed at job id (a new job, a resume, a new place): tell the
 * listeners and wake the scheduler to start what may start now. */
static void queue_changed(int64_t id)
{
	sched_job_changed(id);
	wake();
}

/* ---- tailing ---- */

/* Events go out in batches of at most this many, so a burst of ten thousand
 * log lines becomes twenty messages of a bounded size, not one huge one. */
#define BATCH_MAX 500

struct tail_ctx {
	struct running *r;
	cJSON *batch;
	int n;
};

static void on_event(void *vctx, int64_t seq, cJSON *ev)
{
	struct tail_ctx *c = vctx;
	cJSON *item = ev ? cJSON_Duplicate(ev, 1) : cJSON_CreateObject();
	if (!item)
		return;
	if (!ev)
		cJSON_AddStringToObject(item, "type", "unreadable");
	cJSON_AddNumberToObject(item, "seq", (double)seq);
	if (c->n == BATCH_MAX) {
		notify(c->r->id, "events", c->batch);
		cJSON_Delete(c->batch);
		c->batch = cJSON_CreateArray();
		c->n = 0;
	}
	cJSON_AddItemToArray(c->batch, item);
	c->n++;
	if (events_is(ev, "progress")) {
		cJSON *p = cJSON_GetObjectItemCaseSensitive(ev, "progress");
		cJSON *e = cJSON_GetObjectItemCaseSensitive(ev, "eta_s");
		if (cJSON_IsNumber(p)) {
			c->r->progress = p->valuedouble;
			c->r->eta_s = cJSON_IsNumber(e) ? e->valuedouble : -1;
			c->r->progress_dirty = 1;
		}
	}
}

/* Read what the worker added since the last poll; push it and save the position. */
static void tail_job(struct running *r)
{
	struct dd_err err = { 0 };
	struct tail_ctx c = { r, cJSON_CreateArray(), 0 };
	int n = events_tail_poll(&r->tail, on_event, &c, &err);
	if (n < 0)
		log_warn("job %lld: %s", (long long)r->id, err.msg);
	if (n > 0) {
		if (store_job_tail_save(r->id, r->tail.offset, r->tail.seq, &err) != DD_OK)
			log_warn("job %lld: %s", (long long)r->id, err.msg);
		if (r->progress_dirty) {
			r->progress_dirty = 0;
			if (store_job_progress(r->id, r->progress, r->eta_s, &err) != DD_OK)
				log_warn("job %lld: %s", (long long)r->id, err.msg);
			sched_job_changed(r->id);
		}
		if (c.n)
			notify(r->id, "events", c.batch);
	}
	cJSON_Delete(c.batch);
}

/* ---- ending ---- */

/* The last lines of dir/worker.log (what the worker printed to stderr), folded
 * into one line, into buf. */
static void worker_log_tail(const char *dir, char *buf, size_t len)
{
	char path[PATH_MAX];
	char *text = NULL;
	size_t n = 0;
	buf[0] = 0;
	jobdir_file(dir, JOBDIR_WORKER_LOG, path, sizeof path);
	if (fs_read_file(path, 1 << 20, &text, &n, NULL) != DD_OK)
		return;
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
		text[--n] = 0;
	size_t start = n > 300 ? n - 300 : 0;
	snprintf(buf, len, "%s", text + start);
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = ' ';
	free(text);
}

/* Decide and store the final state of a job whose worker has ended.  wait_status
 * is from waitpid, or -1 when unknown (an adopted worker).  Returns 0 when
 * recorded, -1 when the store refused (the caller keeps the job and retries). */
static int settle(struct running *r, int wait_status, int recovering)
{
	char dir[PATH_MAX], state[16], message[400], why[768];
	struct dd_err err = { 0 };
	sched_job_dir(r->id, dir, sizeof dir);
	tail_job(r); /* whatever it wrote last */
	enum job_state to = JOB_ERROR;
	int code = -1, sig = -1;
	if (wait_status >= 0 && WIFEXITED(wait_status))
		code = WEXITSTATUS(wait_status);
	if (wait_status >= 0 && WIFSIGNALED(wait_status))
		sig = WTERMSIG(wait_status);
	if (events_final_status(dir, state, sizeof state, message, sizeof message)) {
		job_state_parse(state, &to);
		snprintf(why, sizeof why, "%s", message);
		/* stopped by the cluster (time limit, memory), not by a person */
		if (to == JOB_ABORTED && !r->abort && r->h.end_failed && r->h.end_why[0]) {
			to = JOB_ERROR;
			snprintf(why, sizeof why, "%s; its last snapshot is kept", r->h.end_why);
		}
	} else if (r->abort) {
		to = JOB_ABORTED;
		snprintf(why, sizeof why, "aborted on request");
	} else if (r->h.ext_id[0] && r->h.end_why[0] && !(recovering && wait_status < 0)) {
		/* a cluster ended it before it wrote its end: say what the cluster said */
		char tail[320];
		worker_log_tail(dir, tail, sizeof tail);
		snprintf(why, sizeof why, "%s (Slurm job %s)%s%s", r->h.end_why, r->h.ext_id,
			 tail[0] ? "; last output: " : "", tail);
	} else if (recovering) {
		to = JOB_INTERRUPTED;
		if (r->h.ext_id[0])
			snprintf(why, sizeof why, "%s", r->h.end_why[0] ? r->h.end_why : "Slurm no longer knows the job");
		else
			snprintf(why, sizeof why, "the worker was gone when the server restarted");
	} else {
		char tail[320];
		worker_log_tail(dir, tail, sizeof tail);
		long long kills = train_memory_oom_kills();
		int oom = kills >= 0 && r->oom_kills >= 0 && kills > r->oom_kills;
		if (train_memory_death(dir, sig, code, oom, tail, why, sizeof why))
			; /* "out of memory (N MiB at batch B): ..." */
		else if (sig > 0)
			snprintf(why, sizeof why, "the worker was killed by signal %d (%s)%s%s", sig,
				 strsignal(sig), tail[0] ? "; last output: " : "", tail);
		else if (code >= 0)
			snprintf(why, sizeof why, "the worker exited with status %d without a final status%s%s",
				 code, tail[0] ? "; last output: " : "", tail);
		else
			snprintf(why, sizeof why, "the worker ended without a final status (exit status unknown)");
	}
	if (to == JOB_DONE)
		why[0] = 0;
	int rc = store_job_move(r->id, to, why[0] ? why : NULL, code, sig, &err);
	if (rc != DD_OK && rc != DD_ECONFLICT && rc != DD_ENOENT) {
		/* the store could not take it (a full disk, say): keep the job and try
		 * again next tick rather than leave it "running" for ever */
		if (!r->settle_pending) /* once, not every tick until there is room */
			log_error("job %lld: cannot record its end yet (retrying): %s", (long long)r->id, err.msg);
		r->settle_status = wait_status;
		r->settle_pending = 1;
		return -1;
	}
	log_info("job %lld: %s%s%s", (long long)r->id, job_state_name(to), why[0] ? ": " : "", why);
	if (r->kind && r->kind->ended)
		r->kind->ended(dir);
	sched_job_changed(r->id);
	return 0;
}

/* ---- starting ---- */

/* job.json's "guard": what the worker may touch besides its own folder, from the
 * server's configuration at the time (never from the params): {"roots": [the
 * --data-root folders, resolved], "max_files", "max_bytes"} (the caps on
 * unpacking; 0: the defaults).  Written at submit and again at every start, so a
 * job queued by an older server runs under this one's rules
 * (worker_path_allowed, worker_archive_limits). */
static void add_guard(cJSON *job)
{
	cJSON_DeleteItemFromObjectCaseSensitive(job, "guard");
	cJSON *g = cJSON_AddObjectToObject(job, "guard");
	cJSON *roots = cJSON_AddArrayToObject(g, "roots");
	for (int i = 0; i < S.server.nroots; i++)
		cJSON_AddItemToArray(roots, cJSON_CreateString(S.server.roots[i]));
	cJSON_AddNumberToObject(g, "max_files", (double)S.server.max_files);
	cJSON_AddNumberToObject(g, "max_bytes", (double)S.server.max_bytes);
}

/* Write DATA/jobs/<id>/job.json (making the folder): what the job is, not what
 * happened to it — the allow-list of job_spec and this server's guard. */
static int write_job_json(int64_t id, struct dd_err *err)
{
	cJSON *record = NULL;
	char dir[PATH_MAX], path[PATH_MAX + 16];
	int rc = store_job_json(id, 1, &record, err);
	if (rc)
		return rc;
	cJSON *job = job_spec(record);
	cJSON_Delete(record);
	if (job)
		add_guard(job);
	sched_job_dir(id, dir, sizeof dir);
	jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
	char *text = job ? cJSON_Print(job) : NULL;
	cJSON_Delete(job);
	if (!text)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	rc = fs_mkdir_p(dir, err);
	if (rc == DD_OK)
		rc = fs_write_file_atomic(path, text, strlen(text), err);
	free(text);
	return rc;
}

static struct running *table_add(void)
{
	if (S.nrunning == S.cap) {
		int cap = S.cap ? S.cap * 2 : 8;
		struct running *grown = realloc(S.running, (size_t)cap * sizeof *grown);
		if (!grown)
			return NULL;
		S.running = grown;
		S.cap = cap;
	}
	struct running *r = &S.running[S.nrunning++];
	memset(r, 0, sizeof *r);
	r->eta_s = -1;
	return r;
}

/* Which executor runs jobs of this kind. */
static const struct executor *executor_of(const char *kind)
{
	const struct executor *ex = S.cfg.executor_for ? S.cfg.executor_for(kind) : NULL;
	return ex ? ex : S.cfg.executor;
}

/* Do jobs of this kind run elsewhere (a cluster), holding none of this server's
 * CPU slots or GPUs? */
static int on_cluster(const char *kind)
{
	return !(executor_of(kind)->flags & EXEC_LOCAL);
}

static void start_job(const struct job_row *row, const int *gpus, int ngpus)
{
	struct dd_err err = { 0 };
	char dir[PATH_MAX];
	sched_job_dir(row->id, dir, sizeof dir);
	static struct exec_handle h; /* only the scheduler thread starts jobs; too big for the stack's taste */
	memset(&h, 0, sizeof h);
	const struct executor *ex = executor_of(row->kind);
	if (ex->start(S.exe, dir, &h, &err) != DD_OK) {
		store_job_move(row->id, JOB_ERROR, err.msg, -1, -1, NULL);
		log_error("job %lld: %s", (long long)row->id, err.msg);
		sched_job_changed(row->id);
		return;
	}
	/* the cluster's id first: a server that dies right after still finds the job */
	if (store_job_exec_set(row->id, h.ext_id[0] ? ex->name : NULL, h.ext_id, &err) != DD_OK)
		log_warn("job %lld: %s", (long long)row->id, err.msg);
	if (store_job_started(row->id, h.pid, h.pid_start, &err) != DD_OK) {
		/* the job was aborted or deleted between the query and now */
		ex->signal(&h, SIGKILL);
		int st;
		if (h.is_child)
			waitpid(h.pid, &st, 0);
		log_warn("job %lld: not started: %s", (long long)row->id, err.msg);
		return;
	}
	pthread_mutex_lock(&S.lock);
	struct running *r = table_add();
	if (r) {
		r->id = row->id;
		r->kind = job_kind_find(row->kind);
		r->oom_kills = train_memory_oom_kills();
		r->ex = ex;
		r->h = h;
		r->slots = ex->flags & EXEC_LOCAL ? row->cpu_slots : 0;
		jobdir_file(dir, JOBDIR_EVENTS, r->tail.path, sizeof r->tail.path);
		/* a resumed job's log goes on from where its last run left it */
		r->tail.offset = (off_t)row->ev_offset;
		r->tail.seq = row->ev_seq;
		S.slots_used += r->slots;
		for (int g = 0; g < ngpus; g++) {
			r->gpus[r->ngpus++] = gpus[g];
			S.gpu_holder[gpus[g]] = row->id;
		}
	}
	pthread_mutex_unlock(&S.lock);
	if (!r) {
		ex->signal(&h, SIGKILL);
		store_job_move(row->id, JOB_ERROR, "out of memory in the scheduler", -1, -1, NULL);
	}
	if (h.ext_id[0]) {
		log_info("job %lld (%s): submitted to %s as job %s", (long long)row->id, row->kind, ex->name, h.ext_id);
		store_job_exec_state(row->id, h.ext_state, h.ext_reason, h.ext_position, h.ext_restarts, NULL);
		if (r)
			r->h.ext_changed = 0;
	} else {
		log_info("job %lld (%s): started, pid %d", (long long)row->id, row->kind, h.pid);
	}
	sched_job_changed(row->id);
}

/* Give queued job row the GPUs its params ask for, if free: 1 with gpus/ngpus
 * filled (ngpus 0 for a CPU job) and job.json telling the worker which, with
 * this server's guard (add_guard) whatever wrote job.json before; 0 when
 * they are busy (it waits); -1 when it can never run here (it ends in error).
 * A cluster job (cluster 1) holds none of this server's: job.json gets
 * resources.gpu_count (Slurm's --gres, and the worker's count of copies), and
 * *counted says how many it will use (for its owner's GPU minutes). */
static int take_gpus(const struct job_row *row, const char *job_json, int cluster, int *gpus, int *ngpus,
		     int *counted)
{
	char *text = NULL;
	size_t len = 0;
	struct dd_err err = { 0 };
	cJSON *job = NULL;
	int rc = -1;
	struct job_need need;
	*ngpus = *counted = 0;
	if (fs_read_file(job_json, 64 << 20, &text, &len, &err) != DD_OK)
		goto fail;
	if (json_parse(text, len, job_json, &job, &err) != DD_OK)
		goto fail;
	cJSON *params = cJSON_GetObjectItemCaseSensitive(job, "params");
	if (kind_needs(job_kind_find(row->kind), params, cluster, &need, &err) != DD_OK)
		goto fail;
	add_guard(job); /* this server's rules, whoever wrote the job */
	train_memory_guard(job, row->owner_id); /* the memory limit of its owner (kind_train_memory.h) */
	if (need.gpus == 0)
		goto write;
	cJSON *res = cJSON_GetObjectItemCaseSensitive(job, "resources");
	if (!cJSON_IsObject(res)) {
		cJSON_DeleteItemFromObjectCaseSensitive(job, "resources");
		res = cJSON_AddObjectToObject(job, "resources");
	}
	if (cluster) {
		cJSON_DeleteItemFromObjectCaseSensitive(res, "gpu_count");
		cJSON_AddNumberToObject(res, "gpu_count", need.gpus);
		*counted = need.gpus;
		goto write;
	}
	if (need.nids) {
		for (int i = 0; i < need.nids; i++)
			if (S.gpu_holder[need.ids[i]])
				goto busy;
		memcpy(gpus, need.ids, (size_t)need.nids * sizeof *need.ids);
		*ngpus = need.nids;
	} else {
		for (int g = 0; g < S.ngpu && *ngpus < need.gpus; g++)
			if (!S.gpu_holder[g])
				gpus[(*ngpus)++] = g;
		if (*ngpus < need.gpus)
			goto busy;
	}
	/* tell the worker: the ids in resources, the first as its device */
	cJSON_DeleteItemFromObjectCaseSensitive(res, "gpus");
	cJSON_AddItemToObject(res, "gpus", cJSON_CreateIntArray(gpus, *ngpus));
	char device[32];
	snprintf(device, sizeof device, "cuda:%d", gpus[0]);
	cJSON_ReplaceItemInObjectCaseSensitive(params, "backend", cJSON_CreateString(device));
	*counted = *ngpus;
write:;
	char *out = cJSON_Print(job);
	if (!out) {
		dd_err_set(&err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	int wrc = fs_write_file_atomic(job_json, out, strlen(out), &err);
	free(out);
	if (wrc != DD_OK)
		goto fail;
	rc = 1;
	goto done;
busy:
	*ngpus = 0;
	rc = 0;
	goto done;
fail:
	*ngpus = 0;
	store_job_move(row->id, JOB_ERROR, err.msg, -1, -1, NULL);
	log_error("job %lld: %s", (long long)row->id, err.msg);
	sched_job_changed(row->id);
done:
	cJSON_Delete(job);
	free(text);
	return rc;
}

/* An owner of queued jobs, as the fair queue (below) weighs them. */
struct fair_owner {
	int64_t id;
	int running;
	int64_t limit;      /* running jobs at once, 0: none */
	int64_t last_start; /* when a job of theirs last started (ms), 0: never */
};
static int fair_owners(const struct job_row *rows, int n, struct fair_owner **out, int *nout, struct dd_err *err);
static int fair_next(const struct job_row *rows, int n, const char *taken, struct fair_owner *o, int no);
static struct fair_owner *fair_owner_of(struct fair_owner *o, int n, int64_t id);

/* Start what the fair queue says may start (see "the fair queue" below): the
 * next job by fair_next, while it fits; a job that does not fit blocks those
 * behind it, so a big job is not starved by a stream of small ones.  A job
 * whose job.json is not written yet (sched_submit is between its two steps) is
 * not ready: it and those behind it wait for the next tick. */
static void start_queued(void)
{
	struct job_row *rows = NULL;
	struct fair_owner *owners = NULL;
	char *taken = NULL;
	int n = 0, nowners = 0;
	struct dd_err err = { 0 };
	/* full, and no kind goes to a cluster: nothing can start */
	if (S.slots_used >= S.cfg.cpu_slots && !S.any_cluster)
		return;
	if (store_jobs_queue(&rows, &n, &err) != DD_OK) {
		log_warn("scheduler: %s", err.msg);
		return;
	}
	if (n == 0 || fair_owners(rows, n, &owners, &nowners, &err) != DD_OK || !(taken = calloc((size_t)n, 1))) {
		if (n)
			log_warn("scheduler: %s", err.msg[0] ? err.msg : "out of memory");
		goto out;
	}
	while (!S.stopping) {
		int i = fair_next(rows, n, taken, owners, nowners);
		if (i < 0)
			break;
		char dir[PATH_MAX], path[PATH_MAX + 16];
		sched_job_dir(rows[i].id, dir, sizeof dir);
		jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
		int cluster = on_cluster(rows[i].kind);
		if ((!cluster && S.slots_used + rows[i].cpu_slots > S.cfg.cpu_slots) || access(path, F_OK) != 0)
			break;
		int gpus[SCHED_MAX_GPUS], ngpus = 0, counted = 0;
		/* a cluster job gets its GPUs from the cluster (--gres), not this machine's */
		int fit = take_gpus(&rows[i], path, cluster, gpus, &ngpus, &counted);
		if (fit == 0) /* its GPUs are busy: it and those behind it wait */
			break;
		taken[i] = 1;
		if (fit > 0) {
			store_job_set_gpus_held(rows[i].id, counted, NULL); /* its owner's GPU minutes */
			start_job(&rows[i], gpus, ngpus);
			struct fair_owner *w = fair_owner_of(owners, nowners, rows[i].owner_id);
			w->running++;
			w->last_start = fs_now_ms();
		}
	}
out:
	free(taken);
	free(owners);
	free(rows);
}

/* ---- the thread ---- */

static void tick(int recovering)
{
	int64_t now = fs_mono_ms();
	for (int i = 0; i < S.nrunning;) {
		struct running *r = &S.running[i];
		tail_job(r);
		int wait_status = r->settle_status;
		enum exec_status es = r->settle_pending ? EXEC_EXITED : r->ex->check(&r->h, &wait_status);
		if (r->h.ext_changed) {
			/* what the cluster says of it (pending reason, queue place) */
			r->h.ext_changed = 0;
			store_job_exec_state(r->id, r->h.ext_state, r->h.ext_reason, r->h.ext_position,
					     r->h.ext_restarts, NULL);
			sched_job_changed(r->id);
		}
		if (es != EXEC_RUNNING) {
			if (settle(r, es == EXEC_EXITED ? wait_status : -1, recovering) != 0) {
				i++;
				continue;
			}
			pthread_mutex_lock(&S.lock);
			S.slots_used -= r->slots;
			for (int g = 0; g < r->ngpus; g++)
				if (S.gpu_holder[r->gpus[g]] == r->id)
					S.gpu_holder[r->gpus[g]] = 0;
			S.running[i] = S.running[--S.nrunning];
			pthread_mutex_unlock(&S.lock);
			continue;
		}
		if (r->kill_at && now >= r->kill_at) {
			log_warn("job %lld: still running %d ms after SIGTERM, sending SIGKILL",
				 (long long)r->id, S.cfg.abort_grace_ms);
			r->ex->signal(&r->h, SIGKILL);
			r->kill_at = 0;
		}
		i++;
	}
	if (!recovering)
		start_queued();
}

static void *thread_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.lock);
	while (!S.stopping) {
		pthread_mutex_unlock(&S.lock);
		tick(0);
		pthread_mutex_lock(&S.lock);
		if (S.stopping)
			break;
		if (!S.woken) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)S.cfg.poll_ms * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&S.wake, &S.lock, &ts);
		}
		S.woken = 0;
	}
	pthread_mutex_unlock(&S.lock);
	store_thread_end();
	return NULL;
}

/* An adopted job holds the GPUs its job.json says it was given. */
static void hold_recorded_gpus(struct running *r, const char *dir)
{
	char path[PATH_MAX + 16], *text = NULL;
	size_t len = 0;
	jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
	if (fs_read_file(path, 64 << 20, &text, &len, NULL) != DD_OK)
		return;
	cJSON *job = NULL;
	json_parse(text, len, path, &job, NULL);
	const cJSON *g, *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "resources"), "gpus");
	cJSON_ArrayForEach(g, ids)
	{
		if (cJSON_IsNumber(g) && g->valueint >= 0 && g->valueint < S.ngpu && r->ngpus < SCHED_MAX_GPUS) {
			r->gpus[r->ngpus++] = g->valueint;
			S.gpu_holder[g->valueint] = r->id;
		}
	}
	cJSON_Delete(job);
	free(text);
}

/* The executors a restarted server may find its jobs with. */
static const struct executor *const executors[] = { &exec_local, &exec_slurm, NULL };

/* The executor the store names (store_job_exec_set), or NULL when this build
 * has none of that name. */
static const struct executor *executor_named(const char *name)
{
	for (int i = 0; executors[i]; i++)
		if (strcmp(executors[i]->name, name) == 0)
			return executors[i];
	return NULL;
}

/* The executor that adopts a worker of this machine by its pid. */
static const struct executor *executor_by_pid(void)
{
	for (int i = 0; executors[i]; i++)
		if (executors[i]->flags & EXEC_ADOPT_PID)
			return executors[i];
	return &exec_local;
}

/* Take back the jobs the last server left running. */
static int recover(struct dd_err *err)
{
	struct job_row *rows = NULL;
	int n = 0;
	int rc = store_jobs_in_state(JOB_RUNNING, &rows, &n, err);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		struct running *r = table_add();
		if (!r) {
			free(rows);
			return dd_err_set(err, DD_ENOMEM, "out of memory");
		}
		char dir[PATH_MAX];
		sched_job_dir(rows[i].id, dir, sizeof dir);
		r->id = rows[i].id;
		r->kind = job_kind_find(rows[i].kind);
		r->oom_kills = train_memory_oom_kills();
		memset(&r->h, 0, sizeof r->h);
		r->h.pid = rows[i].pid;
		r->h.pid_start = rows[i].pid_start;
		/* the executor the store names adopts it by the id it gave; a job with
		 * none ran on this machine and is adopted by its pid */
		char exname[32];
		const struct executor *named = NULL;
		if (store_job_exec_get(r->id, exname, sizeof exname, r->h.ext_id, sizeof r->h.ext_id) == 0)
			named = executor_named(exname);
		if (named && (named->flags & EXEC_ADOPT_ID)) {
			r->ex = named;
			snprintf(r->h.dir, sizeof r->h.dir, "%s", dir);
		} else {
			r->ex = executor_by_pid();
			r->h.ext_id[0] = 0;
		}
		r->slots = r->ex->flags & EXEC_LOCAL ? rows[i].cpu_slots : 0;
		r->abort = rows[i].abort_requested;
		jobdir_file(dir, JOBDIR_EVENTS, r->tail.path, sizeof r->tail.path);
		r->tail.offset = (off_t)rows[i].ev_offset;
		r->tail.seq = rows[i].ev_seq;
		S.slots_used += r->slots;
		hold_recorded_gpus(r, dir);
		int alive;
		if (r->ex->flags & EXEC_ADOPT_ID) {
			alive = 1; /* the first tick asks the cluster */
			log_info("job %lld: was submitted to %s as job %s: adopted", (long long)r->id, r->ex->name,
				 r->h.ext_id);
		} else {
			alive = rows[i].pid > 0 && exec_local_pid_start(rows[i].pid) == rows[i].pid_start;
			log_info("job %lld: was running as pid %d: %s", (long long)r->id, rows[i].pid,
				 alive ? "still alive, adopted" : "gone");
		}
		if (alive && r->abort) {
			r->ex->signal(&r->h, SIGTERM);
			r->kill_at = fs_mono_ms() + S.cfg.abort_grace_ms;
		}
	}
	free(rows);
	tick(1); /* settles the dead ones as interrupted (or as their log says) */
	return DD_OK;
}

int sched_start(const struct sched_config *cfg, sched_listener fn, void *ctx, struct dd_err *err)
{
	S.cfg = *cfg;
	snprintf(S.data_dir, sizeof S.data_dir, "%s", cfg->data_dir);
	snprintf(S.exe, sizeof S.exe, "%s", cfg->exe);
	S.cfg.data_dir = S.data_dir;
	S.cfg.exe = S.exe;
	int nroots = 0;
	for (int i = 0; i < cfg->nroots && nroots < SCHED_MAX_ROOTS; i++) {
		if (!realpath(cfg->data_roots[i], S.roots[nroots]))
			snprintf(S.roots[nroots], PATH_MAX, "%s", cfg->data_roots[i]);
		S.root_ptr[nroots] = S.roots[nroots];
		nroots++;
	}
	S.server = (struct job_server){ S.data_dir, S.root_ptr, nroots, cfg->archive_max_files, cfg->archive_max_bytes };
	S.cfg.data_roots = S.root_ptr;
	S.cfg.nroots = nroots;
	if (!S.cfg.executor)
		S.cfg.executor = &exec_local;
	if (S.cfg.poll_ms <= 0)
		S.cfg.poll_ms = 25;
	if (S.cfg.cpu_slots <= 0)
		S.cfg.cpu_slots = 1;
	S.any_cluster = 0;
	for (const struct job_kind *const *k = job_kinds(); *k; k++)
		S.any_cluster |= on_cluster((*k)->name);
	S.listener = fn;
	S.listener_ctx = ctx;
	S.stopping = 0;
	/* the GPUs: as the driver lists them; the test build's TESTHOOK_FAKE_GPUS=N
	 * pretends N (the scheduler's tests on machines without one: jobs get ids,
	 * workers fail) */
	memset(S.gpu_holder, 0, sizeof S.gpu_holder);
	int fake = testhook_int(TESTHOOK_FAKE_GPUS);
	if (fake > 0) {
		S.ngpu = fake < SCHED_MAX_GPUS ? fake : SCHED_MAX_GPUS;
		for (int g = 0; g < S.ngpu; g++) {
			memset(&S.gpu[g], 0, sizeof S.gpu[g]);
			S.gpu[g].id = g;
			snprintf(S.gpu[g].name, sizeof S.gpu[g].name, "simulated GPU %d", g);
			S.gpu[g].memory_used = S.gpu[g].utilization = -1;
		}
	} else {
		S.ngpu = backend_gpus(S.gpu, SCHED_MAX_GPUS);
	}
	if (S.ngpu)
		log_info("scheduler: %d GPU%s: %s%s", S.ngpu, S.ngpu > 1 ? "s" : "", S.gpu[0].name, S.ngpu > 1 ? ", ..." : "");
	char jobs[PATH_MAX];
	jobdir_jobs(S.data_dir, jobs, sizeof jobs);
	int rc = fs_mkdir_p(jobs, err);
	if (rc)
		return rc;
	if ((rc = recover(err)))
		return rc;
	/* The scheduler thread runs SQLite, posix_spawn, JSON files through
	 * json_parse (64 levels at most) and ws_publish: 2 MiB, stated rather than
	 * whatever `ulimit -s` gave glibc's default. */
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, SCHED_STACK);
	int prc = pthread_create(&S.thread, &at, thread_main, NULL);
	pthread_attr_destroy(&at);
	if (prc != 0)
		return dd_err_set(err, DD_EIO, "cannot start the scheduler thread");
	S.thread_started = 1;
	return DD_OK;
}

void sched_stop(void)
{
	if (!S.thread_started)
		return;
	pthread_mutex_lock(&S.lock);
	S.stopping = 1;
	pthread_cond_signal(&S.wake);
	pthread_mutex_unlock(&S.lock);
	pthread_join(S.thread, NULL);
	S.thread_started = 0;
	free(S.running);
	S.running = NULL;
	S.nrunning = S.cap = S.slots_used = 0;
}

/* ---- the fair queue ----
 *
 * Queued jobs start round-robin across their owners: the next job is the
 * oldest waiting job of the owner with the fewest running jobs (of those, the
 * owner served longest ago), so one user's twenty-job sweep does not starve
 * the others.  Priority (an instructor's
 * "move to front") goes before fairness; an owner at their limit of running
 * jobs (store_quota.jobs) waits.  With accounts off every job is owner 0's and
 * the order is first come, first served.  The same order answers "where is my
 * job and why does it wait" (sched_queue_json), and sched_quota_check refuses
 * at creation a job whose owner is over a daily or disk quota.  A running job
 * that uses up its owner's minutes is left to finish: the quota refuses the
 * next job, it does not kill work already paid for. */

static struct fair_owner *fair_owner_of(struct fair_owner *o, int n, int64_t id)
{
	for (int i = 0; i < n; i++)
		if (o[i].id == id)
			return &o[i];
	return &o[0]; /* fair_owners made one for every queued job's owner */
}

/* The owners of the queued rows with their running jobs and limits; caller
 * frees *out. */
static int fair_owners(const struct job_row *rows, int n, struct fair_owner **out, int *nout, struct dd_err *err)
{
	struct job_row *run = NULL;
	int nrun = 0, k = 0;
	*out = NULL;
	*nout = 0;
	int rc = store_jobs_in_state(JOB_RUNNING, &run, &nrun, err);
	if (rc)
		return rc;
	struct fair_owner *o = calloc((size_t)n, sizeof *o);
	if (!o) {
		free(run);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		int j = 0;
		while (j < k && o[j].id != rows[i].owner_id)
			j++;
		if (j < k)
			continue;
		o[k].id = rows[i].owner_id;
		struct store_quota q;
		if (store_quota_get(o[k].id, &q, NULL) == DD_OK)
			o[k].limit = q.jobs;
		o[k].last_start = store_owner_last_start(o[k].id);
		for (int r = 0; r < nrun; r++)
			o[k].running += run[r].owner_id == o[k].id;
		k++;
	}
	free(run);
	*out = o;
	*nout = k;
	return DD_OK;
}

/* The index of the next job to start among rows (in queue order: priority,
 * then age) not yet taken, or -1: highest priority, then the owner with the
 * fewest running jobs, then the owner served longest ago (round-robin, which
 * matters when one slot makes everyone's running count 0), then the oldest
 * job; owners at their limit are skipped. */
static int fair_next(const struct job_row *rows, int n, const char *taken, struct fair_owner *o, int no)
{
	int best = -1;
	const struct fair_owner *bw = NULL;
	for (int i = 0; i < n; i++) {
		if (taken[i])
			continue;
		const struct fair_owner *w = fair_owner_of(o, no, rows[i].owner_id);
		if (w->limit > 0 && w->running >= w->limit)
			continue;
		if (best < 0 || rows[i].priority > rows[best].priority ||
		    (rows[i].priority == rows[best].priority &&
		     (w->running < bw->running || (w->running == bw->running && w->last_start < bw->last_start)))) {
			best = i;
			bw = w;
		}
	}
	return best;
}

cJSON *sched_queue_json(int64_t id)
{
	struct job_row *rows = NULL;
	struct fair_owner *o = NULL;
	char *taken = NULL;
	int n = 0, no = 0, at = -1;
	cJSON *q = NULL;
	if (store_jobs_queue(&rows, &n, NULL) != DD_OK || n == 0)
		goto out;
	for (int i = 0; i < n; i++)
		if (rows[i].id == id)
			at = i;
	if (at < 0 || fair_owners(rows, n, &o, &no, NULL) != DD_OK || !(taken = calloc((size_t)n, 1)))
		goto out;
	struct fair_owner *mine = fair_owner_of(o, no, rows[at].owner_id);
	int limited = mine->limit > 0 && mine->running >= mine->limit;
	/* the order the scheduler would start them in, were every job one slot */
	int ahead = 0;
	for (;;) {
		int i = fair_next(rows, n, taken, o, no);
		if (i < 0 || i == at)
			break;
		taken[i] = 1;
		struct fair_owner *w = fair_owner_of(o, no, rows[i].owner_id);
		w->running++;
		w->last_start = INT64_MAX - n + ahead; /* served now, after every real start */
		ahead++;
	}
	if (limited || fair_next(rows, n, taken, o, no) != at) {
		/* behind every job that can start: those ahead, and the rest of the queue */
		ahead = 0;
		for (int i = 0; i < n; i++)
			ahead += i != at;
	}
	int used, total;
	sched_slots(&used, &total);
	int want = rows[at].cpu_slots, free_slots = total - used;
	char why[160];
	if (limited)
		snprintf(why, sizeof why, "your limit of %lld running job%s is reached", (long long)mine->limit,
			 mine->limit == 1 ? "" : "s");
	else if (ahead == 0 && want <= free_slots)
		snprintf(why, sizeof why, "starting");
	else if (ahead == 0)
		snprintf(why, sizeof why, "waiting for %d CPU slot%s (%d of %d free)", want, want == 1 ? "" : "s",
			 free_slots, total);
	else
		snprintf(why, sizeof why, "waiting for %d CPU slot%s; %d job%s ahead", want, want == 1 ? "" : "s", ahead,
			 ahead == 1 ? "" : "s");
	q = cJSON_CreateObject();
	if (!q)
		goto out;
	cJSON_AddNumberToObject(q, "position", ahead + 1);
	cJSON_AddNumberToObject(q, "ahead", ahead);
	cJSON_AddNumberToObject(q, "queued", n);
	cJSON_AddNumberToObject(q, "priority", rows[at].priority);
	cJSON_AddNumberToObject(q, "cpu_slots", want);
	cJSON_AddNumberToObject(q, "cpu_slots_free", free_slots);
	cJSON_AddNumberToObject(q, "running_jobs", mine->running);
	if (mine->limit > 0)
		cJSON_AddNumberToObject(q, "running_limit", (double)mine->limit);
	else
		cJSON_AddNullToObject(q, "running_limit");
	cJSON_AddStringToObject(q, "reason", why);
out:
	free(taken);
	free(o);
	free(rows);
	return q;
}

int sched_move_to_front(int64_t id, struct dd_err *err)
{
	int max = 0;
	int rc = store_queue_max_priority(&max, err);
	if (rc == DD_OK)
		rc = store_job_set_priority(id, max + 1, err);
	if (rc == DD_OK)
		queue_changed(id);
	return rc;
}

int sched_set_priority(int64_t id, int priority, struct dd_err *err)
{
	int rc = store_job_set_priority(id, priority, err);
	if (rc == DD_OK)
		queue_changed(id);
	return rc;
}

/* The bytes of owner_id's uploads not yet used (DATA/uploads/<file> with its
 * <file>.owner naming them; one still arriving too). */
static uint64_t owner_uploads(int64_t owner_id)
{
	char dir[PATH_MAX + 16];
	jobdir_uploads(S.data_dir, dir, sizeof dir);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = jobdir_upload_owner_of(e->d_name);
		if (!n)
			continue;
		char file[PATH_MAX * 2];
		snprintf(file, sizeof file, "%s/%.*s", dir, (int)n, e->d_name);
		struct stat st;
		if (kind_upload_owner(file) == owner_id && lstat(file, &st) == 0 && S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_size;
	}
	closedir(d);
	return sum;
}

void sched_owner_disk(int64_t owner_id, uint64_t *bytes)
{
	int64_t *ids = NULL;
	int n = 0;
	*bytes = owner_uploads(owner_id);
	if (store_job_ids_of(owner_id, &ids, &n, NULL) != DD_OK)
		return;
	for (int i = 0; i < n; i++) {
		char dir[PATH_MAX];
		sched_job_dir(ids[i], dir, sizeof dir);
		*bytes += fs_tree_bytes(dir);
	}
	free(ids);
}

int sched_quota_disk_room(int64_t owner_id, int64_t more, struct dd_err *err)
{
	struct store_quota q;
	if (owner_id <= 0)
		return DD_OK;
	int rc = store_quota_get(owner_id, &q, err);
	if (rc || !q.disk_bytes)
		return rc;
	uint64_t used;
	sched_owner_disk(owner_id, &used);
	if (used + (uint64_t)(more > 0 ? more : 0) > (uint64_t)q.disk_bytes)
		return dd_err_set(err, DD_EPERM,
				  "quota: your jobs and uploads use %llu bytes of disk and this upload is %lld more; "
				  "your limit is %lld: delete some first",
				  (unsigned long long)used, (long long)(more > 0 ? more : 0), (long long)q.disk_bytes);
	return DD_OK;
}

int sched_quota_check(int64_t owner_id, int gpu, struct dd_err *err)
{
	struct store_quota q;
	struct store_usage u;
	if (owner_id <= 0)
		return DD_OK;
	int rc = store_quota_get(owner_id, &q, err);
	if (rc)
		return rc;
	int64_t now = fs_now_ms();
	if ((q.cpu_minutes || q.gpu_minutes) && (rc = store_usage(owner_id, now - now % 86400000, &u, err)))
		return rc;
	if (q.cpu_minutes && u.cpu_minutes >= (double)q.cpu_minutes)
		return dd_err_set(err, DD_EPERM,
				  "quota: %.0f of your %lld CPU minutes for today are used; more after 00:00 UTC",
				  u.cpu_minutes, (long long)q.cpu_minutes);
	if (gpu && q.gpu_minutes && u.gpu_minutes >= (double)q.gpu_minutes)
		return dd_err_set(err, DD_EPERM,
				  "quota: %.0f of your %lld GPU minutes for today are used; more after 00:00 UTC",
				  u.gpu_minutes, (long long)q.gpu_minutes);
	if (q.disk_bytes) {
		uint64_t used;
		sched_owner_disk(owner_id, &used);
		if (used >= (uint64_t)q.disk_bytes)
			return dd_err_set(err, DD_EPERM,
					  "quota: your jobs and uploads use %llu bytes of disk, your limit is %lld: delete some first",
					  (unsigned long long)used, (long long)q.disk_bytes);
	}
	return DD_OK;
}

/* ---- requests from API threads ---- */

const struct job_server *sched_server(void) { return &S.server; }

/* sched_validate, and (need non-NULL) into *need what the job needs besides CPU
 * slots (its GPUs), of its params as the checks left them. */
static int validate_job(const char *kind_name, cJSON *params, const struct job_caller *who, const int64_t *parents,
			int np, struct job_uses *all, struct job_need *need, struct dd_err *err)
{
	const struct job_kind *kind = job_kind_find(kind_name);
	if (!kind)
		return dd_err_set(err, DD_EINVAL, "kind: unknown job kind \"%.64s\"", kind_name ? kind_name : "");
	if (!who)
		return dd_err_set(err, DD_EINTERNAL, "a job was submitted without a caller");
	if (!cJSON_IsObject(params))
		return dd_err_set(err, DD_EINVAL, "params: must be an object");
	struct job_caller c = *who;
	c.server = &S.server; /* the server's rules, never the request's */
	struct job_uses uses = { .n = 0 };
	struct job_need shape;
	int rc;
	if (!kind->validate && !c.admin)
		return dd_err_set(err, DD_EPERM, "kind: %s jobs are for admins only", kind->name);
	/* the shape first, then whether this server can run it at all (GPUs), then
	 * everything that needs the caller: a request that can never run here says
	 * so before anything is looked up */
	if (kind->validate && (rc = kind->validate(params, NULL, NULL, err)))
		return rc;
	if ((rc = kind_needs(kind, params, on_cluster(kind->name), &shape, err)))
		return rc;
	if (kind->validate && (rc = kind->validate(params, &c, &uses, err)))
		return rc;
	for (int i = 0; i < np; i++) {
		struct job_row row;
		if ((!c.admin && !(c.may_use && c.may_use(&c, parents[i]))) || store_job_row(parents[i], &row, NULL) != DD_OK)
			return dd_err_set(err, DD_EINVAL, "parent job %lld does not exist", (long long)parents[i]);
		if ((rc = job_uses_add(&uses, parents[i], err)))
			return rc;
	}
	if (need && (rc = kind_needs(kind, params, on_cluster(kind->name), need, err)))
		return rc;
	if (all)
		*all = uses;
	return DD_OK;
}

int sched_validate(const char *kind_name, cJSON *params, const struct job_caller *who, const int64_t *parents,
		   int np, struct job_uses *all, struct dd_err *err)
{
	return validate_job(kind_name, params, who, parents, np, all, NULL, err);
}

int sched_submit(const char *kind_name, const char *name, const struct job_caller *who, cJSON *params,
		 int cpu_slots, const int64_t *parents, int nparents, int64_t *id,
		 struct dd_err *err)
{
	struct job_uses uses;
	struct job_need need;
	int rc = validate_job(kind_name, params, who, parents, nparents, &uses, &need, err);
	if (rc)
		return rc;
	const struct job_kind *kind = job_kind_find(kind_name);
	const char *owner = who->user;
	/* a cluster has more cores and GPUs than this server: Slurm says whether it fits */
	int cluster = on_cluster(kind->name);
	if (cpu_slots <= 0 && need.gpus > 0 && S.ngpu > 0) /* a GPU job: its share of the cores, so every GPU can be busy */
		cpu_slots = S.cfg.cpu_slots / S.ngpu > 1 ? S.cfg.cpu_slots / S.ngpu : 1;
	if (cpu_slots <= 0)
		cpu_slots = kind->default_cpu_slots > 0 ? kind->default_cpu_slots
			    : kind->default_cpu_slots < 0 ? S.cfg.cpu_slots : 1;
	if (cpu_slots > S.cfg.cpu_slots && !cluster)
		return dd_err_set(err, DD_EINVAL,
				  "resources.cpu_slots: asks for %d CPU slots, this server has %d", cpu_slots,
				  S.cfg.cpu_slots);
	if ((rc = sched_quota_check(store_user_id(owner), need.gpus > 0, err)))
		return rc;
	char *params_json = cJSON_PrintUnformatted(params);
	char resources[96];
	snprintf(resources, sizeof resources, "{\"cpu_slots\":%d,\"gpus\":[]}", cpu_slots);
	char dflt[64];
	if (!name || !*name) {
		snprintf(dflt, sizeof dflt, "%s job", kind->name);
		name = dflt;
	}
	if (!params_json)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	rc = store_job_insert(kind->name, name, owner, params_json, resources, uses.id, uses.n, id, err);
	free(params_json);
	if (rc)
		return rc;
	if ((rc = write_job_json(*id, err))) {
		/* no folder, no job: take the record back so nothing half-made remains */
		char dir[PATH_MAX];
		sched_job_dir(*id, dir, sizeof dir);
		fs_rm_rf(dir, NULL);
		store_job_delete(*id, NULL);
		return rc;
	}
	queue_changed(*id);
	return DD_OK;
}

int sched_abort(int64_t id, struct dd_err *err)
{
	struct job_row row;
	int rc = store_job_row(id, &row, err);
	if (rc)
		return rc;
	if (row.state == JOB_QUEUED) {
		rc = store_job_move(id, JOB_ABORTED, "aborted before it started", -1, -1, err);
		if (rc == DD_OK) {
			sched_job_changed(id);
			return DD_OK;
		}
		if (rc != DD_ECONFLICT)
			return rc;
		/* it started meanwhile: abort it as a running job */
		if ((rc = store_job_row(id, &row, err)))
			return rc;
	}
	if (row.state != JOB_RUNNING)
		return dd_err_set(err, DD_ECONFLICT, "job %lld is already %s", (long long)id,
				  job_state_name(row.state));
	if ((rc = store_job_request_abort(id, err)))
		return rc;
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < S.nrunning; i++) {
		struct running *r = &S.running[i];
		if (r->id != id)
			continue;
		if (!r->abort) {
			r->abort = 1;
			r->ex->signal(&r->h, SIGTERM);
			r->kill_at = fs_mono_ms() + S.cfg.abort_grace_ms;
		}
		break;
	}
	S.woken = 1;
	pthread_cond_signal(&S.wake);
	pthread_mutex_unlock(&S.lock);
	sched_job_changed(id);
	return DD_OK;
}

int sched_requeue(int64_t id, cJSON *params, const struct job_caller *who, struct dd_err *err)
{
	struct job_row row;
	int rc = store_job_row(id, &row, err);
	if (rc)
		return rc;
	if (row.state == JOB_QUEUED || row.state == JOB_RUNNING)
		return dd_err_set(err, DD_ECONFLICT, "job %lld is %s; it can be resumed once it has ended",
				  (long long)id, job_state_name(row.state));
	const struct job_kind *kind = job_kind_find(row.kind);
	if (!kind)
		return dd_err_set(err, DD_EINVAL, "this deepdesk cannot run jobs of kind \"%s\"", row.kind);
	/* the same checks as a new job, as its owner now: a resume uses nothing the
	 * owner may no longer use (a dataset whose share was revoked) */
	struct job_need need;
	if ((rc = validate_job(row.kind, params, who, NULL, 0, NULL, &need, err)))
		return rc;
	if ((rc = sched_quota_check(row.owner_id, need.gpus > 0, err)))
		return rc;
	char *params_json = cJSON_PrintUnformatted(params);
	if (!params_json)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	/* params, then job.json, then the queue: the scheduler starts only a queued
	 * job, so no worker can read the job.json of the last run */
	rc = store_job_set_params(id, params_json, err);
	free(params_json);
	if (rc == DD_OK)
		rc = write_job_json(id, err);
	if (rc == DD_OK)
		rc = store_job_move(id, JOB_QUEUED, NULL, -1, -1, err);
	if (rc)
		return rc;
	log_info("job %lld: queued again", (long long)id);
	queue_changed(id);
	return DD_OK;
}

int sched_delete(int64_t id, struct dd_err *err)
{
	struct job_row row;
	int rc = store_job_row(id, &row, err);
	if (rc)
		return rc;
	if (row.state == JOB_RUNNING)
		return dd_err_set(err, DD_ECONFLICT, "job %lld is running: abort it first", (long long)id);
	if ((rc = store_job_delete(id, err)))
		return rc;
	/* only the job's own folder, DATA/jobs/<id>: fs_rm_rf never follows a
	 * symbolic link (it removes the link), and a worker moves nothing into the
	 * folder from outside but its upload (worker_archive), so nothing else goes */
	char dir[PATH_MAX];
	sched_job_dir(id, dir, sizeof dir);
	struct dd_err rm = { 0 };
	if (fs_rm_rf(dir, &rm) != DD_OK)
		log_warn("job %lld deleted, but its folder stays: %s", (long long)id, rm.msg);
	notify(id, "deleted", NULL);
	return DD_OK;
}

int sched_clone(int64_t id, const struct job_caller *who, int64_t *new_id, struct dd_err *err)
{
	cJSON *job = NULL;
	int rc = store_job_json(id, 1, &job, err);
	if (rc)
		return rc;
	const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(job, "kind"));
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(job, "name"));
	cJSON *params = cJSON_GetObjectItemCaseSensitive(job, "params");
	cJSON *res = cJSON_GetObjectItemCaseSensitive(job, "resources");
	cJSON *slots = cJSON_GetObjectItemCaseSensitive(res, "cpu_slots");
	cJSON *parents = cJSON_GetObjectItemCaseSensitive(job, "parents");
	int np = cJSON_GetArraySize(parents);
	int64_t *pids = calloc((size_t)(np ? np : 1), sizeof *pids);
	if (!pids) {
		cJSON_Delete(job);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	for (int i = 0; i < np; i++)
		pids[i] = (int64_t)cJSON_GetArrayItem(parents, i)->valuedouble;
	char clone_name[600], orig_dir[PATH_MAX];
	snprintf(clone_name, sizeof clone_name, "%s (clone)", name ? name : "job");
	const struct job_kind *k = job_kind_find(kind);
	sched_job_dir(id, orig_dir, sizeof orig_dir);
	if (!cJSON_IsObject(params)) {
		cJSON_DeleteItemFromObjectCaseSensitive(job, "params");
		params = cJSON_AddObjectToObject(job, "params");
	}
	if (k && k->clone_params && (rc = k->clone_params(params, id, orig_dir, err))) {
		free(pids);
		cJSON_Delete(job);
		return rc;
	}
	/* checked again like any new job, as who (its owner): the clone's parents are
	 * those its params name now, plus the original's others, each visible to who */
	rc = sched_submit(kind, clone_name, who, params, cJSON_IsNumber(slots) ? slots->valueint : 0,
			  pids, np, new_id, err);
	free(pids);
	cJSON_Delete(job);
	return rc;
}
