/* exec_local.c — the local executor: posix_spawn in a new session.
 *
 * The worker gets its own session (POSIX_SPAWN_SETSID) so that a Ctrl-C or a
 * SIGTERM to the server does not reach it: a server that stops leaves its workers
 * running, and the next server adopts them (exec_handle.is_child = 0), watching
 * them by pid and start time instead of waitpid.  Each worker starts under the
 * per-job memory limit (job_memory_cap, as RLIMIT_DATA). */
#define _GNU_SOURCE
#include "executor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../common/fsutil.h"
#include "../common/sanitizer.h"
#include "jobdir.h"
#include "kind_train_memory.h"

extern char **environ;

int64_t exec_local_pid_start(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parens */
	if (!p)
		return -1;
	p++;
	/* fields after the name: state(3) ppid(4) ... starttime(22) */
	char state = 0;
	for (int field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -1;
		if (field == 3)
			state = *p;
		if (field == 22)
			return state == 'Z' || state == 'X' ? -1 : strtoll(p, NULL, 10);
		while (*p && *p != ' ')
			p++;
	}
	return -1;
}

/* Does the job in dir run on a GPU (job.json resources.gpus, the ids the
 * scheduler gave it at its start, whatever its kind calls the device in its
 * params)?  The CUDA driver maps host memory of its own as it sees fit, so such a
 * worker is not put under RLIMIT_DATA; its host share (feeds, runtime) is checked
 * when it is created. */
static int on_gpu(const char *dir)
{
	char path[PATH_MAX], *text = NULL;
	jobdir_file(dir, JOBDIR_JOB, path, sizeof path);
	if (fs_read_file(path, 8u << 20, &text, NULL, NULL) != DD_OK)
		return 0;
	cJSON *job = cJSON_Parse(text);
	free(text);
	int gpu = cJSON_GetArraySize(
			  cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "resources"), "gpus")) > 0;
	cJSON_Delete(job);
	return gpu;
}

static int local_start(const char *exe, const char *dir, struct exec_handle *h, struct dd_err *err)
{
	char log[PATH_MAX];
	jobdir_file(dir, JOBDIR_WORKER_LOG, log, sizeof log);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	/* reset every handler we installed; SIGPIPE ignored in the server is reset too */
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	char *argv[] = { (char *)exe, "worker", (char *)dir, NULL };
	pid_t pid;
	int rc = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0)
		return dd_err_sys(err, DD_EIO, rc, "cannot start the worker %s", exe);
	/* the per-job memory limit, as RLIMIT_DATA's soft limit (kind_train_memory.h says
	 * why that one).  The child is still starting (posix_spawn returns once it
	 * has exec'd); a training lowers it further once it knows its estimate. */
	struct rlimit rl;
	int64_t cap = on_gpu(dir) || DD_UNDER_ASAN ? 0 : job_memory_cap_dir(dir); /* its owner's, in the guard */
	if (cap > 0 && prlimit(pid, RLIMIT_DATA, NULL, &rl) == 0 && (rl.rlim_max == RLIM_INFINITY || (int64_t)rl.rlim_max > cap)) {
		rl.rlim_cur = (rlim_t)cap;
		prlimit(pid, RLIMIT_DATA, &rl, NULL);
	}
	h->pid = pid;
	h->is_child = 1;
	h->pid_start = exec_local_pid_start(pid);
	return DD_OK;
}

static enum exec_status local_check(struct exec_handle *h, int *wait_status)
{
	if (h->is_child) {
		int st;
		pid_t r = waitpid(h->pid, &st, WNOHANG);
		if (r == h->pid) {
			*wait_status = st;
			return EXEC_EXITED;
		}
		if (r == 0)
			return EXEC_RUNNING;
		if (errno != ECHILD)
			return EXEC_RUNNING;
		/* not our child after all: fall through to the adopted check */
		h->is_child = 0;
	}
	int64_t start = exec_local_pid_start(h->pid);
	if (start < 0 || (h->pid_start > 0 && start != h->pid_start))
		return EXEC_GONE;
	return EXEC_RUNNING;
}

static void local_signal(const struct exec_handle *h, int sig)
{
	if (h->pid <= 0)
		return;
	/* The worker leads its own process group; signal the group, then the pid in
	 * case it changed groups.  Never signal a pid that was reused by another
	 * process. */
	if (!h->is_child && h->pid_start > 0 && exec_local_pid_start(h->pid) != h->pid_start)
		return;
	kill(-h->pid, sig);
	kill(h->pid, sig);
}

const struct executor exec_local = {
	.name = "local",
	.flags = EXEC_LOCAL | EXEC_ADOPT_PID,
	.start = local_start,
	.check = local_check,
	.signal = local_signal,
};
