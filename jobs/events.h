/* events.h — a job's event log: `events.jsonl` in its folder, one JSON object a line,
 * appended by the worker and only ever read by everyone else.
 *
 * Every event has "t" (seconds since the epoch, with milliseconds) and "type":
 *   progress  {"progress":0..1, "eta_s":seconds|absent}
 *   metric    {"name":"loss", "value":x, "step"/"epoch":…}, or a model's
 *             {"kind":"train"|"val", "iteration", "epoch", "lr", "loss", "accuracy"?, …}
 *   result    a model's, once it ends: {"iterations", "epochs", "snapshot", "stopped", …}
 *   log       {"level":"info"|"warn"|"error", "msg":"…"}
 *   status    {"state":"running"|"done"|"error"|"aborted", "message":"…", "pid":n}
 * An event's sequence number is its 1-based line number; nothing else numbers it,
 * so the file alone is the record. */
#ifndef DD_EVENTS_H
#define DD_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "jobdir.h"

#define EVENTS_FILE JOBDIR_EVENTS /* jobs/jobdir.h names it */
#define EVENTS_MAX_LINE 65536

/* ---- writing (the worker) ---- */

struct events_writer {
	int fd;
	char path[4096];  /* DIR/events.jsonl ("" for a writer made from a bare fd) */
	int reserved;     /* DIR/events.jsonl.reserve is ours (events_writer_reserve) */
};

/* Open (creating) DIR/events.jsonl for appending.  Undo with events_writer_close(). */
int events_writer_open(struct events_writer *w, const char *dir, struct dd_err *err);
/* Closes, and removes the reserve if there is one.  Accepts NULL. */
void events_writer_close(struct events_writer *w);

/* Set aside room for a job's last words: a file of `bytes` beside the log
 * (events.jsonl.reserve) that events_writer_release gives back to the file system
 * just before the final status is written, so a disk that filled during the job
 * still takes the status that says so.  Best effort: DD_OK, or the error when the
 * room could not be had (the disk is full already; nothing is left behind). */
int events_writer_reserve(struct events_writer *w, size_t bytes, struct dd_err *err);
void events_writer_release(struct events_writer *w);

/* Append one event: adds "t" when absent, writes the line with a single write(2).
 * A write the disk cuts short is undone (the file is truncated back to where the
 * line began), so the log never holds half a line that the next one would run
 * into: DD_ENOSPC in fs_err_nospace's sentence.  The object is not freed. */
int events_append(struct events_writer *w, cJSON *ev, struct dd_err *err);

/* ---- tailing (the server) ---- */

/* Follows a growing log.  `offset` is the byte just after the last complete line
 * consumed and `seq` the number of lines consumed; both can be saved and handed
 * back after a restart so that no event is delivered twice or skipped. */
struct events_tail {
	char path[4096];
	off_t offset;
	int64_t seq;
};

/* Called for each complete new line; `ev` is NULL when the line is not a JSON
 * object (a torn write).  The callback must not keep `ev`. */
typedef void (*events_fn)(void *ctx, int64_t seq, cJSON *ev);

/* Read every complete line added since the last call.  A partial last line (the
 * worker is mid-write) is left for the next call.  Returns the number of lines
 * delivered, or a negative DD_E* code. */
int events_tail_poll(struct events_tail *t, events_fn fn, void *ctx, struct dd_err *err);

/* The string ev[key], or NULL (ev NULL, no such key, not a string).  Borrowed
 * from ev. */
/* A new event of this type: {"type": type} to add the rest to (caller owns it;
 * events_append takes it), or NULL when out of memory. */
cJSON *events_new(const char *type);
const char *events_str(const cJSON *ev, const char *key);
/* Is ev (may be NULL) an event of this type ("log", "status", ...)? */
int events_is(const cJSON *ev, const char *type);

/* ---- paging (the API) ---- */

/* Events with seq > after, at most `limit` of them, appended to `out` (a JSON array)
 * each with "seq" added.  *last is the highest seq returned (or `after`), *more
 * whether complete lines remain beyond. */
int events_read_page(const char *dir, int64_t after, int limit, cJSON *out, int64_t *last,
		     int *more, struct dd_err *err);

/* The last `n` log messages ("msg" of "log" events, and "message" of status
 * events), oldest first, into a JSON array of strings. */
int events_last_logs(const char *dir, int n, cJSON *out);

/* The final status event ("done"/"error"/"aborted") of a log if it has one: fills
 * state (8+ bytes) and message, returns 1; 0 when there is none. */
int events_final_status(const char *dir, char *state, size_t state_len, char *message,
			size_t message_len);
/* The state of the last status event, whatever it is ("running", "interrupted",
 * "done", ...), into state; "" when the log has none. */
void events_last_state(const char *dir, char *state, size_t len);

#endif
