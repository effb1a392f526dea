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

/* Register the handlers on ctx at /api/v1/ws; at most `limit` clients at once
 * (each holds one of CivetWeb's threads), further ones are refused. */
void ws_register(struct mg_context *ctx, int limit);
/* Push to subscribers (matches sched_listener). */
void ws_publish(void *unused, int64_t job_id, const char *what, cJSON *payload);
/* Number of connected clients. */
int ws_client_count(void);

#endif
