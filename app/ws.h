/* ws.h — the WebSocket at /api/v1/ws: who is subscribed to what, and pushing.
 *
 * Handlers run on CivetWeb's threads; pushes come from the scheduler thread.  The
 * registry is one list under one lock: a push marks the matching clients busy
 * under the lock and writes outside it, and a closing client waits until it is
 * no longer busy before it is freed. */
#ifndef DD_WS_H
#define DD_WS_H

#include <stdint.h>

#include <civetweb.h>
#include <cjson/cJSON.h>

/* Register the handlers on ctx at /api/v1/ws. */
void ws_register(struct mg_context *ctx);
/* Push to subscribers (matches sched_listener). */
void ws_publish(void *unused, int64_t job_id, const char *what, cJSON *payload);
/* Number of connected clients. */
int ws_client_count(void);

#endif
