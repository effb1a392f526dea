/* ws.h — the WebSocket at /api/v1/ws: who is subscribed to what, and pushing.
 *
 * Handlers run on CivetWeb's threads; pushes come from the scheduler thread and
 * API threads.  A push never writes to a socket: it queues the message for each
 * matching client, whose own sender thread writes it (see ws.c). */
#ifndef DD_WS_H
#define DD_WS_H

#include <stdint.h>

#include <civetweb.h>
#include <cjson/cJSON.h>

/* How many WebSockets may be open at once.  Each holds one of CivetWeb's threads
 * for its life, so `total` is kept below the thread count; the others stop one
 * user or one address from taking them all. */
struct ws_limits {
	int total;    /* in all (serve: half the threads) */
	int per_user; /* per logged-in user, with accounts on (8); 0: no limit */
	int per_addr; /* per client address, always (16); 0: no limit */
};

/* Register the handlers on ctx at /api/v1/ws with these limits (copied); an
 * upgrade past one is answered 429 rate_limited (per user, per address) or 503
 * unavailable (in all) with a message that names the limit, and not opened. */
void ws_register(struct mg_context *ctx, const struct ws_limits *limits);
/* Push to subscribers (matches sched_listener). */
void ws_publish(void *unused, int64_t job_id, const char *what, cJSON *payload);

#endif
