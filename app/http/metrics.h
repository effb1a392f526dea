/* metrics.h — Prometheus /metrics (text format 0.0.4), behind a bearer token.
 *
 * api_dispatch times every API request into a latency histogram
 * (metrics_observe); /metrics adds what the store knows when it is asked: jobs
 * by state, the queue's length and wait, and each user's usage today.  Without
 * --metrics-token FILE, /metrics answers 404: nothing is exposed by default. */
#ifndef DD_METRICS_H
#define DD_METRICS_H

#include <civetweb.h>

#include "../../common/err.h"

/* Read the token from the first line of path (at least 16 characters); NULL
 * turns /metrics off.  Call once before the server starts. */
int metrics_configure(const char *token_path, struct dd_err *err);
/* One API request that took seconds and answered status. */
void metrics_observe(double seconds, int status);
/* CivetWeb's handler for /metrics. */
int metrics_handler(struct mg_connection *c, void *data);

#endif
