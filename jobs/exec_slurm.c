/* exec_slurm.c — the Slurm executor: each job is one batch job that runs
 * `deepdesk worker JOB_DIR` on a node that mounts the same data folder.
 *
 * start writes JOB_DIR/slurm.sh (#SBATCH lines from the job's resources and the
 * server's --slurm-* defaults, a body that execs the worker) and submits it with
 * `sbatch --parsable`; Slurm's job id becomes the handle's ext_id, which the store
 * keeps so that a restarted server adopts the job again.
 *
 * check never asks Slurm once per job: one `squeue` lists every job of the cluster
 * (finished ones too, for MinJobAge) at most every poll_ms, and each check reads
 * that snapshot.  A job squeue no longer lists is asked of `sacct` once; when
 * accounting is off too, the job is gone and its event log alone says how it ended.
 *
 * Invariants: the cache is touched only under `lock` (check runs on the scheduler
 * thread, signal on API threads too).  A job submitted after the last squeue is
 * "running" (not listed yet) until an squeue younger than its submission misses
 * it. */
#define _GNU_SOURCE
#include "executor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../common/log.h"
#include "jobdir.h"

extern char **environ;

static struct slurm_opts O = { .poll_ms = 3000 };
static char opt_buf[4][256];

void exec_slurm_configure(const struct slurm_opts *o)
{
	O = *o;
	/* keep our own copies: the strings may be argv or stack */
	const char **f[4] = { &O.partition, &O.account, &O.mem, &O.time };
	for (int i = 0; i < 4; i++) {
		if (*f[i] && **f[i]) {
			snprintf(opt_buf[i], sizeof opt_buf[i], "%s", *f[i]);
			*f[i] = opt_buf[i];
		} else {
			*f[i] = NULL;
		}
	}
	if (O.poll_ms <= 0)
		O.poll_ms = 3000;
}

/* Run argv (argv[0] looked up on PATH) with stdin from /dev/null, its stdout and
 * stderr together into out (truncated to len).  Returns the wait status, or -1
 * when it could not start (err filled). */
static int run_capture(char *const argv[], char *out, size_t len, struct dd_err *err)
{
	int fds[2];
	out[0] = 0;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot run %s", argv[0]), -1;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		dd_err_sys(err, DD_EIO, rc, "cannot run %s (is the Slurm client installed?)", argv[0]);
		return -1;
	}
	size_t n = 0;
	char sink[4096];
	for (;;) {
		ssize_t r = n + 1 < len ? read(fds[0], out + n, len - 1 - n) : read(fds[0], sink, sizeof sink);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (n + 1 < len)
			n += (size_t)r;
	}
	out[n] = 0;
	close(fds[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

/* out folded to one trimmed line, for messages. */
static void one_line(char *s)
{
	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	size_t n = strlen(s);
	while (n && s[n - 1] == ' ')
		s[--n] = 0;
}

int exec_slurm_available(struct dd_err *err)
{
	char out[512];
	char *argv[] = { "sbatch", "--version", NULL };
	int st = run_capture(argv, out, sizeof out, err);
	if (st < 0)
		return err ? err->code : DD_EIO;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		one_line(out);
		return dd_err_set(err, DD_EIO, "--executor slurm: `sbatch --version` failed: %s", out);
	}
	return DD_OK;
}

/* ---- the squeue snapshot ---- */

struct entry {
	char id[32], state[24], reason[128], partition[64];
	double priority;
	int exit_code, restarts;
};

static struct {
	pthread_mutex_t lock;
	struct entry *e;
	int n, cap;
	int64_t at; /* monotonic ms of the last good squeue, 0 never */
	int64_t tried_at;
} C = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* One squeue for the whole cluster; keeps the old snapshot when it fails. */
static void refresh(void)
{
	size_t cap = 1 << 20;
	char *out = malloc(cap);
	if (!out)
		return;
	struct dd_err err = { 0 };
	char *argv[] = { "squeue", "-h", "-a", "-t", "all", "-O",
			 "JobID:|,State:|,Reason:|,Partition:|,PriorityLong:|,exit_code:|,RestartCnt:|", NULL };
	int st = run_capture(argv, out, cap, &err);
	C.tried_at = fs_mono_ms();
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		one_line(out);
		log_warn("slurm: squeue failed: %s", st < 0 ? err.msg : out);
		free(out);
		return;
	}
	C.n = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char *f[8] = { 0 };
		int nf = 0;
		for (char *p = line; nf < 8;) {
			f[nf++] = p;
			char *bar = strchr(p, '|');
			if (!bar)
				break;
			*bar = 0;
			p = bar + 1;
		}
		if (nf < 7)
			continue;
		if (C.n == C.cap) {
			int ncap = C.cap ? C.cap * 2 : 64;
			struct entry *g = realloc(C.e, (size_t)ncap * sizeof *g);
			if (!g)
				break;
			C.e = g;
			C.cap = ncap;
		}
		struct entry *e = &C.e[C.n++];
		for (int i = 0; i < 7; i++) { /* squeue pads with spaces */
			size_t l = strlen(f[i]);
			while (l && f[i][l - 1] == ' ')
				f[i][--l] = 0;
		}
		snprintf(e->id, sizeof e->id, "%s", f[0]);
		snprintf(e->state, sizeof e->state, "%s", f[1]);
		snprintf(e->reason, sizeof e->reason, "%s", f[2]);
		snprintf(e->partition, sizeof e->partition, "%s", f[3]);
		e->priority = strtod(f[4], NULL);
		e->exit_code = atoi(f[5]);
		e->restarts = atoi(f[6]);
	}
	C.at = C.tried_at;
	free(out);
}

static const struct entry *find(const char *id)
{
	for (int i = 0; i < C.n; i++)
		if (strcmp(C.e[i].id, id) == 0)
			return &C.e[i];
	return NULL;
}

/* 1 + how many pending jobs of its partition Slurm would start before e. */
static int position(const struct entry *e)
{
	int ahead = 0;
	long long mine = atoll(e->id);
	for (int i = 0; i < C.n; i++) {
		const struct entry *o = &C.e[i];
		if (o == e || strcmp(o->state, "PENDING") || strcmp(o->partition, e->partition))
			continue;
		if (o->priority > e->priority || (o->priority == e->priority && atoll(o->id) < mine))
			ahead++;
	}
	return ahead + 1;
}

/* States in which the job may still run (again). */
static int state_alive(const char *s)
{
	static const char *const alive[] = { "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED",
					     "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
					     "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT", NULL };
	for (int i = 0; alive[i]; i++)
		if (strcmp(s, alive[i]) == 0)
			return 1;
	return 0;
}

/* The end states in which Slurm stopped a job for a reason of its own, in words. */
static const struct {
	const char *state, *words;
} slurm_ends[] = {
	{ "CANCELLED", "Slurm cancelled the job (scancel by a person or an administrator)" },
	{ "TIMEOUT", "Slurm stopped the job at its time limit (--slurm-time or the partition's limit)" },
	{ "OUT_OF_MEMORY", "Slurm killed the job: it ran out of memory (ask for more with --slurm-mem)" },
	{ "NODE_FAIL", "the node running the job failed" },
	{ "PREEMPTED", "a job of higher priority preempted it and Slurm did not requeue it" },
	{ "BOOT_FAIL", "the node for the job failed to boot" },
	{ "DEADLINE", "Slurm ended the job at its deadline" },
};

/* Why a job in end state `s` ended, in words, into buf; returns 1 when Slurm
 * ended it for a reason of its own (not the worker finishing by itself). */
static int state_words(const char *s, int exit_code, char *buf, size_t len)
{
	int sig = exit_code & 0x7f, code = (exit_code >> 8) & 0xff;
	if (strcmp(s, "COMPLETED") == 0) {
		snprintf(buf, len, "Slurm reports the batch job completed");
		return 0;
	}
	if (strcmp(s, "FAILED") == 0) {
		if (sig)
			snprintf(buf, len, "Slurm reports the job failed: killed by signal %d (%s)", sig, strsignal(sig));
		else
			snprintf(buf, len, "Slurm reports the job failed with exit code %d", code);
		return 0;
	}
	for (size_t i = 0; i < sizeof slurm_ends / sizeof slurm_ends[0]; i++)
		if (strcmp(s, slurm_ends[i].state) == 0) {
			snprintf(buf, len, "%s", slurm_ends[i].words);
			return 1;
		}
	snprintf(buf, len, "Slurm ended the job in state %s", s);
	return 1;
}

/* ---- start ---- */

/* A time limit as sbatch --time takes it ("MM", "MM:SS", "HH:MM:SS", "D-HH",
 * "D-HH:MM", "D-HH:MM:SS") in seconds, or -1 when it is none of those. */
static long time_seconds(const char *t)
{
	long d = 0, f[3] = { 0 };
	int n = 0;
	const char *p = t, *dash = strchr(t, '-');
	char *end;
	if (dash) {
		d = strtol(t, &end, 10);
		if (end != dash)
			return -1;
		p = dash + 1;
	}
	while (n < 3) {
		f[n++] = strtol(p, &end, 10);
		if (end == p)
			return -1;
		if (*end != ':')
			break;
		p = end + 1;
	}
	if (*end)
		return -1;
	if (dash) /* D-HH[:MM[:SS]] */
		return d * 86400 + f[0] * 3600 + (n > 1 ? f[1] * 60 : 0) + (n > 2 ? f[2] : 0);
	if (n == 1) /* minutes */
		return f[0] * 60;
	if (n == 2) /* MM:SS */
		return f[0] * 60 + f[1];
	return f[0] * 3600 + f[1] * 60 + f[2];
}

static int put_quoted(FILE *f, const char *s)
{
	/* single-quoted for sh: ' becomes '\'' */
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	return fputc('\'', f) == EOF ? -1 : 0;
}

/* A value for an #SBATCH line: no newline, no quote, no space (sbatch splits them). */
static int plain(const char *s)
{
	return s && !strpbrk(s, "\n\r\"' \t\\");
}

static int slurm_start(const char *exe, const char *dir, struct exec_handle *h, struct dd_err *err)
{
	char path[PATH_MAX + 32], log_path[PATH_MAX + 32], out[4096];
	cJSON *job = NULL;
	FILE *f = NULL;
	int rc = DD_OK;
	if (!plain(dir) || !plain(exe))
		return dd_err_set(err, DD_EINVAL,
				  "--executor slurm: the data folder and program paths may not hold spaces or quotes (%s)",
				  dir);
	jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
	if ((rc = json_read_file(path, 1 << 20, &job, err)))
		return rc;
	if (!cJSON_IsObject(job))
		return dd_err_set(err, DD_EINVAL, "%s is not a JSON object", path);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(job, "id");
	const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(job, "kind"));
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(job, "resources");
	const cJSON *slots = cJSON_GetObjectItemCaseSensitive(res, "cpu_slots");
	int ngpus = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "gpus"));
	const cJSON *ng = cJSON_GetObjectItemCaseSensitive(res, "gpu_count");
	if (cJSON_IsNumber(ng) && ng->valueint > ngpus)
		ngpus = ng->valueint;
	int cpus = O.cpus > 0 ? O.cpus : cJSON_IsNumber(slots) && slots->valueint > 0 ? slots->valueint : 1;

	/* a new run: a marker left by an earlier abort must not stop it */
	jobdir_file(dir, JOBDIR_ABORT, path, sizeof path);
	unlink(path);
	jobdir_file(dir, JOBDIR_WORKER_LOG, log_path, sizeof log_path);
	jobdir_file(dir, JOBDIR_SLURM, path, sizeof path);
	f = fopen(path, "w");
	if (!f) {
		rc = dd_err_sys(err, DD_EIO, errno, "cannot write %s", path);
		goto out;
	}
	fprintf(f, "#!/bin/sh\n# written by deepdesk: job %lld (%s); submitted with sbatch\n",
		cJSON_IsNumber(id) ? (long long)id->valuedouble : 0LL, plain(kind) ? kind : "job");
	fprintf(f, "#SBATCH --job-name=deepdesk-%lld-%s\n", cJSON_IsNumber(id) ? (long long)id->valuedouble : 0LL,
		plain(kind) ? kind : "job");
	fprintf(f, "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%d\n", cpus);
	if (O.mem)
		fprintf(f, "#SBATCH --mem=%s\n", O.mem);
	if (O.time)
		fprintf(f, "#SBATCH --time=%s\n", O.time);
	if (O.partition)
		fprintf(f, "#SBATCH --partition=%s\n", O.partition);
	if (O.account)
		fprintf(f, "#SBATCH --account=%s\n", O.account);
	if (ngpus > 0)
		fprintf(f, "#SBATCH --gres=gpu:%d\n", ngpus);
	/* sbatch expands %j and friends in --output: a literal % is %% */
	fputs("#SBATCH --output=", f);
	for (const char *p = log_path; *p; p++)
		fputs(*p == '%' ? "%%" : (char[]){ *p, 0 }, f);
	fputs("\n#SBATCH --open-mode=append\n", f);
	fprintf(f, "#SBATCH --chdir=%s\n", dir);
	/* requeued after a node failure or a preemption, the worker resumes from its
	 * last snapshot; TERM a minute before the time limit lets it write one */
	long limit = O.time ? time_seconds(O.time) : -1;
	long warn = limit > 0 && limit < 600 ? (limit / 10 > 5 ? limit / 10 : 5) : 60;
	fprintf(f, "#SBATCH --requeue\n#SBATCH --signal=B:TERM@%ld\n", warn);
	fputs("exec ", f);
	put_quoted(f, exe);
	fputs(" worker ", f);
	put_quoted(f, dir);
	fputc('\n', f);
	if (fclose(f) != 0) {
		f = NULL;
		rc = dd_err_sys(err, DD_EIO, errno, "cannot write %s", path);
		goto out;
	}
	f = NULL;

	char *argv[] = { "sbatch", "--parsable", path, NULL };
	int st = run_capture(argv, out, sizeof out, err);
	if (st < 0) {
		rc = err ? err->code : DD_EIO;
		goto out;
	}
	one_line(out);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		rc = dd_err_set(err, DD_EIO, "sbatch refused the job: %s", out[0] ? out : "(no message)");
		goto out;
	}
	/* --parsable prints "ID" or "ID;CLUSTER" (possibly after warnings) */
	char *last = strrchr(out, ' ');
	last = last ? last + 1 : out;
	last[strcspn(last, ";")] = 0;
	if (!*last || strspn(last, "0123456789") != strlen(last) || strlen(last) >= sizeof h->ext_id) {
		rc = dd_err_set(err, DD_EIO, "sbatch answered \"%s\", not a job id", out);
		goto out;
	}
	memset(h, 0, sizeof *h);
	snprintf(h->ext_id, sizeof h->ext_id, "%s", last);
	snprintf(h->dir, sizeof h->dir, "%s", dir);
	snprintf(h->ext_state, sizeof h->ext_state, "PENDING");
	snprintf(h->ext_reason, sizeof h->ext_reason, "submitted");
	h->ext_changed = 1;
	h->submitted_ms = fs_mono_ms();
out:
	if (f)
		fclose(f);
	cJSON_Delete(job);
	return rc;
}

/* ---- check ---- */

/* A job squeue does not list (long finished, or a restarted controller): ask
 * sacct once.  Fills state and exit code; 0 when it knew the job. */
static int ask_sacct(const char *id, char *state, size_t len, int *exit_code)
{
	char out[1024];
	char *argv[] = { "sacct", "-n", "-P", "-X", "-j", (char *)id, "-o", "State,ExitCode", NULL };
	int st = run_capture(argv, out, sizeof out, NULL);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	char *bar = strchr(out, '|');
	if (!bar || bar == out)
		return -1;
	*bar = 0;
	char *sp = strchr(out, ' '); /* "CANCELLED by 0" */
	if (sp)
		*sp = 0;
	snprintf(state, len, "%s", out);
	int code = 0, sig = 0;
	sscanf(bar + 1, "%d:%d", &code, &sig);
	*exit_code = (code << 8) | (sig & 0x7f);
	return 0;
}

static void set_field(struct exec_handle *h, char *dst, size_t len, const char *v)
{
	if (strcmp(dst, v) != 0) {
		snprintf(dst, len, "%s", v);
		h->ext_changed = 1;
	}
}

static enum exec_status slurm_check(struct exec_handle *h, int *wait_status)
{
	int64_t now = fs_mono_ms();
	pthread_mutex_lock(&C.lock);
	if (now - C.tried_at >= O.poll_ms || (h->submitted_ms && C.at && C.at < h->submitted_ms &&
					       now - C.tried_at >= 1000))
		refresh();
	const struct entry *e = find(h->ext_id);
	char state[24] = "", reason[128] = "";
	int exit_code = 0, pos = 0, restarts = h->ext_restarts;
	int listed = e != NULL;
	if (e) {
		snprintf(state, sizeof state, "%s", e->state);
		snprintf(reason, sizeof reason, "%s", strcmp(e->reason, "None") ? e->reason : "");
		exit_code = e->exit_code;
		restarts = e->restarts;
		if (strcmp(e->state, "PENDING") == 0)
			pos = position(e);
	}
	int64_t at = C.at;
	pthread_mutex_unlock(&C.lock);

	if (!listed) {
		/* not in a snapshot older than the submission: it is simply not listed yet */
		if (!at || (h->submitted_ms && at <= h->submitted_ms))
			return EXEC_RUNNING;
		if (ask_sacct(h->ext_id, state, sizeof state, &exit_code) != 0) {
			snprintf(h->end_why, sizeof h->end_why,
				 "Slurm no longer knows job %s (its record expired, and accounting is off)", h->ext_id);
			set_field(h, h->ext_state, sizeof h->ext_state, "UNKNOWN");
			return EXEC_GONE;
		}
	}
	set_field(h, h->ext_state, sizeof h->ext_state, state);
	set_field(h, h->ext_reason, sizeof h->ext_reason, reason);
	if (pos != h->ext_position || restarts != h->ext_restarts) {
		h->ext_position = pos;
		h->ext_restarts = restarts;
		h->ext_changed = 1;
	}
	if (state_alive(state))
		return EXEC_RUNNING;
	h->end_failed = state_words(state, exit_code, h->end_why, sizeof h->end_why);
	*wait_status = exit_code & 0xffff;
	return EXEC_EXITED;
}

/* ---- signal ---- */

static void scancel(const char *const *args, const char *id)
{
	char *argv[8];
	int n = 0;
	argv[n++] = "scancel";
	for (; *args && n < 6; args++)
		argv[n++] = (char *)*args;
	argv[n++] = (char *)id;
	argv[n] = NULL;
	char out[1024];
	struct dd_err err = { 0 };
	int st = run_capture(argv, out, sizeof out, &err);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		one_line(out);
		log_warn("slurm: scancel %s: %s", id, st < 0 ? err.msg : out);
	}
}

static void slurm_signal(const struct exec_handle *h, int sig)
{
	if (!h->ext_id[0])
		return;
	if (sig == SIGTERM) {
		/* tell the worker this TERM is an abort, then ask it to stop; a job still
		 * waiting in the queue has nothing to stop: cancel it */
		char path[PATH_MAX + 32];
		jobdir_file(h->dir, JOBDIR_ABORT, path, sizeof path);
		if (h->dir[0])
			fs_write_file_atomic(path, "abort\n", 6, NULL);
		pthread_mutex_lock(&C.lock);
		const struct entry *e = find(h->ext_id);
		int pending = e ? strcmp(e->state, "PENDING") == 0 : strcmp(h->ext_state, "PENDING") == 0;
		pthread_mutex_unlock(&C.lock);
		if (pending) {
			static const char *const none[] = { NULL };
			scancel(none, h->ext_id);
		} else {
			static const char *const term[] = { "--batch", "--signal=TERM", NULL };
			scancel(term, h->ext_id);
		}
		return;
	}
	/* anything harder is a hard cancel: the whole job, now */
	static const char *const kill9[] = { "--full", "--signal=KILL", NULL };
	static const char *const none[] = { NULL };
	scancel(kill9, h->ext_id);
	scancel(none, h->ext_id);
}

const struct executor exec_slurm = {
	.name = "slurm",
	.flags = EXEC_ADOPT_ID, /* on nodes that mount the same data folder */
	.start = slurm_start,
	.check = slurm_check,
	.signal = slurm_signal,
};
