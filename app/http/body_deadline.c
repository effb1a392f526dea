/* body_deadline.c — see body_deadline.h.
 *
 * Invariant: a used entry is a request whose body is watched, from its
 * begin_request until its body is read (body_deadline_done), the next request of
 * its connection begins, or its socket is gone (body_deadline_sweep).  A request can
 * end before its body has come (a handler that answers without reading it: CivetWeb
 * then reads and drops the rest, also while it closes the connection, a second at a
 * time); such an entry is `ended` (end_request, connection_close: c is then NULL),
 * and is cut only if bytes still trickle in, so that an idle kept-alive connection
 * never is.  base is the
 * connection's tcpi_bytes_received when the guard first saw the request (based 1),
 * so `got` undercounts by what came with the headers: a body is taken as whole
 * when got reaches its length, or when its reader says so (body_deadline_done). */
#define _GNU_SOURCE
#include "body_deadline.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <linux/tcp.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"

struct bd_entry {
	int used;
	const struct mg_connection *c; /* NULL once its connection is closing */
	char addr[48];
	int port;
	int64_t start_ms, seen_ms;
	long long length; /* the Content-Length, -1 for a chunked body */
	uint64_t base, got, got_at_end;
	int based, cut, ended;
	int64_t cut_ms; /* how long it had run when cut */
};

static struct {
	pthread_mutex_t lock;
	struct bd_entry *e;
	int n;
} B = { .lock = PTHREAD_MUTEX_INITIALIZER };

int body_deadline_init(int n)
{
	B.e = calloc((size_t)n, sizeof *B.e);
	B.n = B.e ? n : 0;
	return B.e ? 0 : -1;
}

void body_deadline_fini(void)
{
	pthread_mutex_lock(&B.lock);
	free(B.e);
	B.e = NULL;
	B.n = 0;
	pthread_mutex_unlock(&B.lock);
}

/* The entry of c, or NULL (lock held). */
static struct bd_entry *find(const struct mg_connection *c)
{
	for (int i = 0; c && i < B.n; i++)
		if (B.e[i].used && B.e[i].c == c)
			return &B.e[i];
	return NULL;
}

void body_deadline_begin(const struct mg_connection *c)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	const char *te = mg_get_header(c, "Transfer-Encoding");
	const char *up = mg_get_header(c, "Upgrade");
	int chunked = te && strcasecmp(te, "identity") != 0;
	int watch = !(up && strcasecmp(up, "websocket") == 0) && (ri->content_length > 0 || chunked);
	pthread_mutex_lock(&B.lock);
	struct bd_entry *f = find(c); /* a kept-alive connection's earlier request: gone */
	if (f)
		f->used = 0;
	for (int i = 0; i < B.n && watch && !f; i++)
		if (!B.e[i].used)
			f = &B.e[i];
	if (watch && f) {
		*f = (struct bd_entry){ .used = 1, .c = c, .port = ri->remote_port, .start_ms = fs_mono_ms(),
					.length = chunked ? -1 : ri->content_length };
		snprintf(f->addr, sizeof f->addr, "%s", ri->remote_addr);
	}
	pthread_mutex_unlock(&B.lock);
}

void body_deadline_done(const struct mg_connection *c)
{
	pthread_mutex_lock(&B.lock);
	struct bd_entry *f = find(c);
	if (f && !f->cut) /* a cut one stays, for http_error to tell */
		f->used = 0;
	pthread_mutex_unlock(&B.lock);
}

void body_deadline_ended(const struct mg_connection *c)
{
	pthread_mutex_lock(&B.lock);
	struct bd_entry *f = find(c);
	if (f && f->cut)
		f->used = 0;
	else if (f) {
		f->ended = 1;
		f->got_at_end = f->got;
	}
	pthread_mutex_unlock(&B.lock);
}

void body_deadline_end(const struct mg_connection *c)
{
	pthread_mutex_lock(&B.lock);
	struct bd_entry *f = find(c);
	if (f && f->cut)
		f->used = 0;
	else if (f) {
		/* CivetWeb reads what still comes before it closes, a second at a time:
		 * still watched, by address and port, until its socket is gone */
		f->c = NULL;
		f->ended = 1;
		f->got_at_end = f->got;
	}
	pthread_mutex_unlock(&B.lock);
}

void body_deadline_sweep(int64_t now_ms)
{
	pthread_mutex_lock(&B.lock);
	for (int i = 0; i < B.n; i++)
		if (B.e[i].used && !B.e[i].c && B.e[i].seen_ms < now_ms)
			B.e[i].used = 0;
	pthread_mutex_unlock(&B.lock);
}

void body_deadline_watch(int fd, const char *addr, int port, int64_t now_ms)
{
	pthread_mutex_lock(&B.lock);
	struct bd_entry *f = NULL;
	for (int i = 0; i < B.n && !f; i++)
		if (B.e[i].used && !B.e[i].cut && B.e[i].port == port && strcmp(B.e[i].addr, addr) == 0)
			f = &B.e[i];
	struct tcp_info ti;
	socklen_t tl = sizeof ti;
	int unread = 0;
	if (!f || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0 ||
	    tl < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
		goto out; /* not ours, or a kernel that does not count (then only the reads' timeout holds) */
	f->seen_ms = now_ms;
	if (!f->based) {
		f->base = ti.tcpi_bytes_received;
		f->based = 1;
	}
	f->got = ti.tcpi_bytes_received - f->base;
	int64_t ms = now_ms - f->start_ms;
	if (f->length >= 0 && f->got >= (uint64_t)f->length) {
		f->used = 0; /* all of it came */
		goto out;
	}
	if (ms < BODY_GRACE_S * 1000LL || (double)f->got * 1000.0 >= (double)BODY_MIN_RATE * (double)ms ||
	    (f->ended && f->got == f->got_at_end) || ioctl(fd, SIOCINQ, &unread) != 0 || unread > 0)
		goto out;
	f->cut = 1;
	f->cut_ms = ms;
	shutdown(fd, SHUT_RD);
	log_warn("cut the request body from %s: %llu bytes in %lld s, under the %d bytes a second it must average "
		 "after its first %d s",
		 addr, (unsigned long long)f->got, (long long)(ms / 1000), BODY_MIN_RATE, BODY_GRACE_S);
out:
	pthread_mutex_unlock(&B.lock);
}

int body_deadline_cut(const struct mg_connection *c, char *why, size_t len)
{
	pthread_mutex_lock(&B.lock);
	struct bd_entry *f = find(c);
	int cut = f && f->cut;
	if (cut) {
		char of[48] = "";
		if (f->length >= 0)
			snprintf(of, sizeof of, " of its %lld", f->length);
		snprintf(why, len,
			 "the request body came too slowly (%llu bytes%s in %lld s): a body must average %d bytes a second "
			 "after its first %d s; it was cut off and nothing was kept, send it again",
			 (unsigned long long)f->got, of, (long long)(f->cut_ms / 1000), BODY_MIN_RATE, BODY_GRACE_S);
	}
	pthread_mutex_unlock(&B.lock);
	return cut;
}
