/* events.c — see events.h.
 *
 * The writer opens with O_APPEND, so each line lands at the end however many
 * processes write (only the worker does).  Readers never trust the file to end in a
 * newline: a line counts only once its '\n' is on disk. */
#define _GNU_SOURCE
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"

#define RESERVE_SUFFIX ".reserve"

int events_writer_open(struct events_writer *w, const char *dir, struct dd_err *err)
{
	w->reserved = 0;
	if (snprintf(w->path, sizeof w->path, "%s/" EVENTS_FILE, dir) >= (int)sizeof w->path - (int)sizeof RESERVE_SUFFIX) {
		w->fd = -1;
		return dd_err_set(err, DD_EINVAL, "path too long: %s", dir);
	}
	w->fd = open(w->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (w->fd < 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot open %s", w->path);
	return DD_OK;
}

static void reserve_path(const struct events_writer *w, char *buf, size_t len)
{
	snprintf(buf, len, "%s" RESERVE_SUFFIX, w->path);
}

int events_writer_reserve(struct events_writer *w, size_t bytes, struct dd_err *err)
{
	char path[sizeof w->path];
	reserve_path(w, path, sizeof path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot create %s", path);
	/* written, not fallocated: every file system takes it, and the blocks are real */
	char zero[4096] = { 0 };
	int rc = DD_OK;
	for (size_t done = 0; done < bytes && rc == DD_OK;) {
		size_t n = bytes - done < sizeof zero ? bytes - done : sizeof zero;
		ssize_t wr = write(fd, zero, n);
		if (wr < 0 && errno == EINTR)
			continue;
		if (wr <= 0)
			rc = dd_err_sys(err, DD_EIO, wr < 0 ? errno : ENOSPC, "cannot write %s", path);
		else
			done += (size_t)wr;
	}
	close(fd);
	if (rc)
		unlink(path);
	else
		w->reserved = 1;
	return rc;
}

void events_writer_release(struct events_writer *w)
{
	if (!w || !w->reserved)
		return;
	char path[sizeof w->path];
	reserve_path(w, path, sizeof path);
	unlink(path);
	w->reserved = 0;
}

void events_writer_close(struct events_writer *w)
{
	if (!w)
		return;
	events_writer_release(w);
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
}

int events_append(struct events_writer *w, cJSON *ev, struct dd_err *err)
{
	if (!cJSON_GetObjectItemCaseSensitive(ev, "t")) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double t = (double)ts.tv_sec + (double)(ts.tv_nsec / 1000000) / 1000.0;
		/* "t" first reads better in the file; cJSON has no insert-at, so rebuild. */
		cJSON *tt = cJSON_CreateNumber(t);
		if (!tt)
			return dd_err_set(err, DD_ENOMEM, "out of memory");
		tt->string = strdup("t");
		if (!tt->string) {
			cJSON_Delete(tt);
			return dd_err_set(err, DD_ENOMEM, "out of memory");
		}
		tt->next = ev->child;
		if (ev->child) {
			tt->prev = ev->child->prev;
			ev->child->prev = tt;
		} else {
			tt->prev = tt;
		}
		ev->child = tt;
	}
	char *line = cJSON_PrintUnformatted(ev);
	if (!line)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	size_t n = strlen(line);
	if (n + 1 > EVENTS_MAX_LINE) {
		free(line);
		return dd_err_set(err, DD_ETOOBIG, "event of %zu bytes is over the %d-byte line limit",
				  n, EVENTS_MAX_LINE);
	}
	line[n] = '\n'; /* replaces the NUL; we write n+1 bytes */
	/* where the line begins: only this process appends, so it is the end now */
	off_t at = lseek(w->fd, 0, SEEK_END);
	ssize_t wr;
	do
		wr = write(w->fd, line, n + 1);
	while (wr < 0 && errno == EINTR);
	int e = wr < 0 ? errno : ENOSPC; /* a short write is a full disk (or quota) */
	free(line);
	if (wr >= 0 && (size_t)wr == n + 1)
		return DD_OK;
	if (wr > 0 && at >= 0 && ftruncate(w->fd, at) != 0) {
		/* cannot undo it: readers take the torn line for one unreadable event */
	}
	const char *shown = w->path[0] ? w->path : "the event log";
	if (e == ENOSPC || e == EDQUOT)
		return fs_err_nospace(err, w->path[0] ? w->path : ".", "cannot append to %s", shown);
	return dd_err_sys(err, DD_EIO, e, "cannot append to %s", shown);
}

/* Call fn for each complete line of buf[0..len); returns bytes consumed. */
static size_t split_lines(const char *buf, size_t len, int64_t *seq, events_fn fn, void *ctx,
			  int *count)
{
	size_t start = 0;
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		(*seq)++;
		(*count)++;
		if (fn) {
			cJSON *ev = NULL;
			json_parse(buf + start, i - start, EVENTS_FILE, &ev, NULL);
			if (ev && !cJSON_IsObject(ev)) {
				cJSON_Delete(ev);
				ev = NULL;
			}
			fn(ctx, *seq, ev);
			cJSON_Delete(ev);
		}
		start = i + 1;
	}
	return start;
}

int events_tail_poll(struct events_tail *t, events_fn fn, void *ctx, struct dd_err *err)
{
	int fd = open(t->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* the worker has not written yet */
		return dd_err_sys(err, DD_EIO, errno, "cannot open %s", t->path);
	}
	enum { CHUNK = 256 * 1024 };
	char *buf = malloc(CHUNK);
	int count = 0;
	if (!buf) {
		close(fd);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	for (;;) {
		ssize_t r = pread(fd, buf, CHUNK, t->offset);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return dd_err_sys(err, DD_EIO, e, "cannot read %s", t->path);
		}
		if (r == 0)
			break;
		size_t used = split_lines(buf, (size_t)r, &t->seq, fn, ctx, &count);
		if (used == 0) {
			if (r == CHUNK) {
				/* A line longer than a chunk is not ours: skip it as one bad event. */
				t->offset += r;
				continue;
			}
			break; /* partial last line */
		}
		t->offset += (off_t)used;
		if ((size_t)r < CHUNK)
			break;
	}
	free(buf);
	close(fd);
	return count;
}

struct page_ctx {
	int64_t after;
	int limit, taken, more;
	int64_t last;
	cJSON *out;
};

static void page_line(void *vctx, int64_t seq, cJSON *ev)
{
	struct page_ctx *c = vctx;
	if (seq <= c->after)
		return;
	if (c->taken >= c->limit) {
		c->more = 1;
		return;
	}
	cJSON *item = ev ? cJSON_Duplicate(ev, 1) : cJSON_CreateObject();
	if (!item)
		return;
	if (!ev)
		cJSON_AddStringToObject(item, "type", "unreadable");
	cJSON_DeleteItemFromObjectCaseSensitive(item, "seq");
	cJSON_AddNumberToObject(item, "seq", (double)seq);
	cJSON_AddItemToArray(c->out, item);
	c->taken++;
	c->last = seq;
}

/* Where line k*CHECKPOINT of a log starts, for the logs paged recently: a page
 * after line N seeks near N instead of reading the file from its start, so paging
 * through a long log is linear, not quadratic.  Logs only grow, so a checkpoint
 * never goes stale; a job's folder is never reused for another job. */
#define CHECKPOINT 1024
#define INDEXED_LOGS 32

static struct sparse {
	char path[PATH_MAX];
	off_t *at; /* at[k] = byte offset of line k*CHECKPOINT + 1 */
	int64_t n, cap;
	int64_t used;
} sparse[INDEXED_LOGS];
static pthread_mutex_t sparse_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t sparse_clock;

/* The best known start for reading after line `after`: *seq lines precede *off. */
static void sparse_seek(const char *path, int64_t after, off_t *off, int64_t *seq)
{
	*off = 0;
	*seq = 0;
	pthread_mutex_lock(&sparse_lock);
	for (int i = 0; i < INDEXED_LOGS; i++) {
		struct sparse *sp = &sparse[i];
		if (!sp->at || strcmp(sp->path, path) != 0)
			continue;
		int64_t k = after / CHECKPOINT;
		if (k >= sp->n)
			k = sp->n - 1;
		if (k >= 0) {
			*off = sp->at[k];
			*seq = k * CHECKPOINT;
		}
		sp->used = ++sparse_clock;
		break;
	}
	pthread_mutex_unlock(&sparse_lock);
}

/* Remember that line seq+1 starts at byte off, when seq is a checkpoint. */
static void sparse_note(const char *path, int64_t seq, off_t off)
{
	if (seq % CHECKPOINT != 0)
		return;
	int64_t k = seq / CHECKPOINT;
	pthread_mutex_lock(&sparse_lock);
	struct sparse *sp = NULL, *victim = &sparse[0];
	for (int i = 0; i < INDEXED_LOGS && !sp; i++) {
		if (sparse[i].at && strcmp(sparse[i].path, path) == 0)
			sp = &sparse[i];
		else if (sparse[i].used < victim->used)
			victim = &sparse[i];
	}
	if (!sp) {
		sp = victim;
		free(sp->at);
		*sp = (struct sparse){ .used = ++sparse_clock };
		snprintf(sp->path, sizeof sp->path, "%s", path);
	}
	if (k == sp->n) {
		if (sp->n == sp->cap) {
			int64_t cap = sp->cap ? sp->cap * 2 : 64;
			off_t *g = realloc(sp->at, (size_t)cap * sizeof *g);
			if (!g)
				goto out;
			sp->at = g;
			sp->cap = cap;
		}
		sp->at[sp->n++] = off;
	}
out:
	pthread_mutex_unlock(&sparse_lock);
}

int events_read_page(const char *dir, int64_t after, int limit, cJSON *out, int64_t *last,
		     int *more, struct dd_err *err)
{
	char path[PATH_MAX];
	jobdir_file(dir, JOBDIR_EVENTS, path, sizeof path);
	struct page_ctx c = { .after = after, .limit = limit, .out = out, .last = after };
	*more = 0;
	*last = after;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? DD_OK : dd_err_sys(err, DD_EIO, errno, "cannot open %s", path);
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	off_t off;
	int64_t seq;
	sparse_seek(path, after, &off, &seq);
	if (off > 0 && fseeko(f, off, SEEK_SET) != 0) {
		off = 0;
		seq = 0;
		rewind(f);
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n')
			break; /* partial last line */
		sparse_note(path, seq, off);
		seq++;
		off += n;
		if (seq <= after)
			continue; /* skipped without parsing */
		if (c.taken >= c.limit) {
			c.more = 1;
			break;
		}
		cJSON *ev = NULL;
		json_parse(line, (size_t)n - 1, EVENTS_FILE, &ev, NULL);
		if (ev && !cJSON_IsObject(ev)) {
			cJSON_Delete(ev);
			ev = NULL;
		}
		page_line(&c, seq, ev);
		cJSON_Delete(ev);
	}
	free(line);
	fclose(f);
	*more = c.more;
	*last = c.last;
	return DD_OK;
}

cJSON *events_new(const char *type)
{
	cJSON *ev = cJSON_CreateObject();
	if (ev && !cJSON_AddStringToObject(ev, "type", type)) {
		cJSON_Delete(ev);
		return NULL;
	}
	return ev;
}

const char *events_str(const cJSON *ev, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, key));
}

int events_is(const cJSON *ev, const char *type)
{
	const char *t = events_str(ev, "type");
	return t && strcmp(t, type) == 0;
}

/* Every complete line of DIR/events.jsonl, from the first, to fn. */
static int read_all(const char *dir, events_fn fn, void *ctx)
{
	struct events_tail t = { .offset = 0, .seq = 0 };
	jobdir_file(dir, JOBDIR_EVENTS, t.path, sizeof t.path);
	return events_tail_poll(&t, fn, ctx, NULL);
}

struct logs_ctx {
	int n, count;
	char **ring;
};

static void log_line(void *vctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct logs_ctx *c = vctx;
	const char *msg = NULL;
	if (events_is(ev, "log"))
		msg = events_str(ev, "msg");
	else if (events_is(ev, "status"))
		msg = events_str(ev, "message");
	if (!msg)
		return;
	int slot = c->count % c->n;
	free(c->ring[slot]);
	c->ring[slot] = strdup(msg);
	c->count++;
}

int events_last_logs(const char *dir, int n, cJSON *out)
{
	if (n <= 0)
		return DD_OK;
	struct logs_ctx c = { .n = n, .count = 0, .ring = calloc((size_t)n, sizeof(char *)) };
	if (!c.ring)
		return DD_ENOMEM;
	int rc = read_all(dir, log_line, &c);
	int first = c.count > n ? c.count - n : 0;
	for (int i = first; i < c.count; i++)
		if (c.ring[i % n])
			cJSON_AddItemToArray(out, cJSON_CreateString(c.ring[i % n]));
	for (int i = 0; i < n; i++)
		free(c.ring[i]);
	free(c.ring);
	return rc < 0 ? rc : DD_OK;
}

struct final_ctx {
	char *state, *message;
	size_t state_len, message_len;
	int found;
};

static void final_line(void *vctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct final_ctx *c = vctx;
	const char *state = events_str(ev, "state");
	if (!events_is(ev, "status") || !state)
		return;
	if (strcmp(state, "done") && strcmp(state, "error") && strcmp(state, "aborted")) {
		c->found = 0; /* a later "running" (a resume) cancels an earlier end */
		return;
	}
	const char *msg = events_str(ev, "message");
	snprintf(c->state, c->state_len, "%s", state);
	snprintf(c->message, c->message_len, "%s", msg ? msg : "");
	c->found = 1;
}

int events_final_status(const char *dir, char *state, size_t state_len, char *message,
			size_t message_len)
{
	struct final_ctx c = { state, message, state_len, message_len, 0 };
	read_all(dir, final_line, &c);
	return c.found;
}

struct state_ctx {
	char *state;
	size_t len;
};

static void state_line(void *vctx, int64_t seq, cJSON *ev)
{
	(void)seq;
	struct state_ctx *c = vctx;
	const char *state = events_str(ev, "state");
	if (events_is(ev, "status") && state)
		snprintf(c->state, c->len, "%s", state);
}

void events_last_state(const char *dir, char *state, size_t len)
{
	struct state_ctx c = { state, len };
	state[0] = 0;
	read_all(dir, state_line, &c);
}
