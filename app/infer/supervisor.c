/* supervisor.c — the server's side of the inference service (infer_service.h):
 * the listening socket, the supervisor thread that spawns the service and
 * restarts it with a back-off when it dies, the pool of idle connections, and
 * the client call the request handlers use. */
#define _GNU_SOURCE
#include "infer_service.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"

extern char **environ;

#define CALL_TIMEOUT_MS 120000      /* a model load and a forward pass, at most */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* stop wakes the supervisor's back-off */
	int started, stopping;
	int lfd;                 /* the listening socket, held for the service's lifetimes */
	pid_t pid;               /* the service now, or 0 */
	int restarts;
	pthread_t sup;
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char exe[PATH_MAX], data[PATH_MAX], log[PATH_MAX + 32];
} V = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .lfd = -1 };

/* Idle connections to the service, kept for the next request: a request then costs
 * no connect and no new thread in the service. */
#define POOL_MAX 16
static struct {
	pthread_mutex_t mu;
	int fd[POOL_MAX];
	int n;
} P = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* An idle connection whose service is still there, or -1.  A service that died
 * while the connection was idle has closed its end, which poll sees at once. */
static int pool_take(void)
{
	for (;;) {
		pthread_mutex_lock(&P.mu);
		int fd = P.n ? P.fd[--P.n] : -1;
		pthread_mutex_unlock(&P.mu);
		if (fd < 0)
			return -1;
		struct pollfd pf = { .fd = fd, .events = POLLIN | POLLRDHUP };
		if (poll(&pf, 1, 0) == 0)
			return fd;
		close(fd);
	}
}

static void pool_give(int fd)
{
	pthread_mutex_lock(&P.mu);
	if (P.n < POOL_MAX && V.started) {
		P.fd[P.n++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&P.mu);
	if (fd >= 0)
		close(fd);
}

static void pool_drain(void)
{
	pthread_mutex_lock(&P.mu);
	while (P.n)
		close(P.fd[--P.n]);
	pthread_mutex_unlock(&P.mu);
}

static pid_t spawn_service(void)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, V.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
	posix_spawn_file_actions_adddup2(&fa, V.lfd, 3);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char parent[24];
	snprintf(parent, sizeof parent, "%ld", (long)getpid());
	char *argv[] = { V.exe, "infer-service", "--fd", "3", "--data", V.data, "--parent", parent, NULL };
	pid_t pid = 0;
	int rc = posix_spawn(&pid, V.exe, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0) {
		log_error("cannot start the inference service %s: %s", V.exe, strerror(rc));
		return 0;
	}
	return pid;
}

/* The supervisor: start the service, wait for it, and start another when it dies,
 * after a back-off that doubles (to 5 s) while it keeps dying young.  The service
 * dies with this thread (PR_SET_PDEATHSIG), so it lives as long as the server. */
static void *supervise(void *arg)
{
	(void)arg;
	int64_t backoff = 50;
	pthread_mutex_lock(&V.mu);
	while (!V.stopping) {
		pthread_mutex_unlock(&V.mu);
		int64_t t0 = fs_mono_ms();
		pid_t pid = spawn_service();
		int st = 0;
		pthread_mutex_lock(&V.mu);
		V.pid = pid;
		pthread_mutex_unlock(&V.mu);
		if (pid > 0)
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
		pthread_mutex_lock(&V.mu);
		V.pid = 0;
		if (V.stopping)
			break;
		V.restarts++;
		if (pid > 0 && WIFSIGNALED(st))
			log_warn("the inference service (pid %d) was killed by signal %d; starting another", (int)pid,
				 WTERMSIG(st));
		else if (pid > 0)
			log_warn("the inference service (pid %d) exited with status %d; starting another", (int)pid,
				 WEXITSTATUS(st));
		backoff = fs_mono_ms() - t0 > 10000 ? 50 : backoff * 2 > 5000 ? 5000 : backoff * 2;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += backoff / 1000;
		until.tv_nsec += (backoff % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		while (!V.stopping && pthread_cond_timedwait(&V.cv, &V.mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&V.mu);
	return NULL;
}

int infer_service_start(const char *exe, const char *data_dir, struct dd_err *err)
{
	snprintf(V.exe, sizeof V.exe, "%s", exe);
	snprintf(V.data, sizeof V.data, "%s", data_dir);
	snprintf(V.log, sizeof V.log, "%s/infer-service.log", data_dir);
	/* the socket in the data folder when its path fits sun_path, else in /tmp */
	if ((size_t)snprintf(V.sock, sizeof V.sock, "%s/infer.sock", data_dir) >= sizeof V.sock)
		snprintf(V.sock, sizeof V.sock, "/tmp/deepdesk-infer-%ld.sock", (long)getpid());
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, V.sock, strlen(V.sock) + 1);
	struct stat st;
	if (lstat(V.sock, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(V.sock); /* left by a server that was killed */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || chmod(V.sock, 0600) != 0 ||
	    listen(fd, 128) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return dd_err_sys(err, DD_EIO, e, "cannot make the inference socket %s", V.sock);
	}
	/* above the standard descriptors, so that the dup2 to 3 in the child is a copy */
	V.lfd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	if (V.lfd < 0) {
		unlink(V.sock);
		return dd_err_sys(err, DD_EIO, errno, "cannot make the inference socket %s", V.sock);
	}
	V.stopping = 0;
	/* the supervisor only spawns, waits and logs */
	pthread_attr_t sat;
	pthread_attr_init(&sat);
	pthread_attr_setstacksize(&sat, 256u << 10);
	int prc = pthread_create(&V.sup, &sat, supervise, NULL);
	pthread_attr_destroy(&sat);
	if (prc != 0) {
		close(V.lfd);
		V.lfd = -1;
		unlink(V.sock);
		return dd_err_set(err, DD_EIO, "cannot start the inference supervisor");
	}
	V.started = 1;
	return DD_OK;
}

void infer_service_stop(void)
{
	if (!V.started)
		return;
	pthread_mutex_lock(&V.mu);
	V.stopping = 1;
	pid_t pid = V.pid;
	pthread_cond_broadcast(&V.cv);
	pthread_mutex_unlock(&V.mu);
	if (pid > 0)
		kill(pid, SIGTERM);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	if (pthread_timedjoin_np(V.sup, NULL, &until) != 0) {
		pthread_mutex_lock(&V.mu);
		pid = V.pid;
		pthread_mutex_unlock(&V.mu);
		if (pid > 0)
			kill(pid, SIGKILL);
		pthread_join(V.sup, NULL);
	}
	pthread_mutex_lock(&P.mu);
	V.started = 0;
	pthread_mutex_unlock(&P.mu);
	pool_drain();
	close(V.lfd);
	V.lfd = -1;
	unlink(V.sock);
}

/* Send req and read the answer.  On a kept connection the request asks for an
 * acknowledgement (8 zero bytes) before the work starts: a service that died while
 * the connection was idle, too recently for pool_take to see, never acknowledges,
 * and the request goes again on a new connection, where it is answered by the next
 * service.  Once acknowledged, a service that dies died with this request, and a
 * hostile image is never sent twice. */
static int call(const cJSON *req_in, const void *data, size_t len, int timeout_ms, cJSON **reply, struct dd_err *err)
{
	*reply = NULL;
	if (!V.started)
		return dd_err_set(err, DD_EBUSY, "the inference service is not running");
	int fd = pool_take(), kept = fd >= 0;
	cJSON *req = cJSON_Duplicate(req_in, 1);
	if (!req) {
		if (fd >= 0)
			close(fd);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
again:
	cJSON_DeleteItemFromObjectCaseSensitive(req, "ack");
	if (kept)
		cJSON_AddTrueToObject(req, "ack");
	if (fd < 0) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		memcpy(a.sun_path, V.sock, strlen(V.sock) + 1);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			cJSON_Delete(req);
			return dd_err_sys(err, DD_EBUSY, e, "cannot reach the inference service");
		}
	}
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	char *head = cJSON_PrintUnformatted(req);
	int rc = head ? infer_wire_send(fd, head, data, len) : WIRE_BAD;
	free(head);
	if (kept) {
		uint8_t ack[8] = { 1 };
		if (rc == WIRE_OK)
			rc = infer_wire_read(fd, ack, sizeof ack);
		if (rc == WIRE_EOF) { /* not taken up: a new connection, to the next service */
			close(fd);
			fd = -1;
			kept = 0;
			goto again;
		}
		if (rc == WIRE_OK && memcmp(ack, (uint8_t[8]){ 0 }, 8) != 0)
			rc = WIRE_BAD;
	}
	cJSON_Delete(req);
	char *none = NULL;
	size_t nlen = 0;
	if (rc == WIRE_OK)
		rc = infer_wire_recv(fd, REPLY_MAX, 0, reply, &none, &nlen);
	free(none);
	if (rc == WIRE_OK)
		pool_give(fd); /* a whole exchange: the connection is ready for the next */
	else
		close(fd);     /* a late answer must not reach the next request */
	if (rc == WIRE_EOF)
		return INFER_SERVICE_DIED;
	if (rc == WIRE_TIMEOUT)
		return dd_err_set(err, DD_EBUSY, "the inference service did not answer within %d s", timeout_ms / 1000);
	if (rc != WIRE_OK)
		return dd_err_set(err, DD_EINTERNAL, "the inference service sent a malformed answer");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(*reply, "error");
	if (e) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
		const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message"));
		int c = cJSON_IsNumber(code) && code->valueint < 0 && code->valueint >= DD_EINTERNAL ? code->valueint :
											       DD_EINTERNAL;
		dd_err_set(err, c, "%s", msg ? msg : "the inference service failed");
		cJSON_Delete(*reply);
		*reply = NULL;
		return c;
	}
	return DD_OK;
}

int infer_service_call(const cJSON *req, const void *data, size_t len, cJSON **reply, struct dd_err *err)
{
	return call(req, data, len, CALL_TIMEOUT_MS, reply, err);
}

cJSON *infer_service_info(void)
{
	cJSON *o = cJSON_CreateObject();
	pthread_mutex_lock(&V.mu);
	pid_t pid = V.pid;
	int restarts = V.restarts;
	pthread_mutex_unlock(&V.mu);
	if (pid > 0)
		cJSON_AddNumberToObject(o, "pid", pid);
	else
		cJSON_AddNullToObject(o, "pid");
	cJSON_AddNumberToObject(o, "restarts", restarts);
	cJSON *req = cJSON_CreateObject(), *reply = NULL;
	cJSON_AddStringToObject(req, "op", "stats");
	struct dd_err err = { 0 };
	const cJSON *m = NULL, *b = NULL;
	/* a lane busy loading a big model does not hold this up: stats skip the lanes */
	if (pid > 0 && call(req, NULL, 0, 2000, &reply, &err) == DD_OK) {
		m = cJSON_GetObjectItemCaseSensitive(reply, "models");
		b = cJSON_GetObjectItemCaseSensitive(reply, "bytes");
	}
	if (cJSON_IsNumber(m) && cJSON_IsNumber(b)) {
		cJSON_AddNumberToObject(o, "models", m->valuedouble);
		cJSON_AddNumberToObject(o, "bytes", b->valuedouble);
	} else {
		cJSON_AddNullToObject(o, "models");
		cJSON_AddNullToObject(o, "bytes");
	}
	cJSON_Delete(reply);
	cJSON_Delete(req);
	return o;
}
