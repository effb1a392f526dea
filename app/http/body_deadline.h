/* body_deadline.h — a deadline on the whole body of a request, not only on each read.
 *
 * CivetWeb's request_timeout_ms bounds each read of a body, so a client that sends
 * a byte every few seconds keeps one of the server's threads for as long as it
 * likes.  Every body passes the socket, whoever reads it (http_read_json, the
 * upload stream, CivetWeb's own multipart reader for the form routes), so the rule
 * is kept on the socket: the connection guard (server.c) hands each socket of a
 * request under way to body_deadline_watch every 100 ms, which reads how many bytes
 * the connection has received (TCP_INFO) since the request began.  After
 * BODY_GRACE_S, a body that has not all come must have come at BODY_MIN_RATE bytes
 * a second on average since the request began; else the socket's read side is shut
 * down (shutdown(2) SHUT_RD: the descriptor stays CivetWeb's), so the read under way
 * ends at once, and the handler's error, whatever it says, goes out as
 * 408 timeout naming the rule, with Connection: close (http_error asks
 * body_deadline_cut).  Bytes that came and wait unread are the server's delay, not
 * the client's: a socket with some is never cut.
 *
 * Thread-safety: every function may be called from any thread (one lock). */
#ifndef DD_BODY_DEADLINE_H
#define DD_BODY_DEADLINE_H

#include <stddef.h>
#include <stdint.h>

#include <civetweb.h>

#define BODY_GRACE_S 10
#define BODY_MIN_RATE 1024 /* bytes a second, on average since the request began */

/* Room for n requests under way; 0, or -1 out of memory.  body_deadline_fini
 * undoes it. */
int body_deadline_init(int n);
void body_deadline_fini(void);

/* c's request has begun (CivetWeb's begin_request, its headers read): watched
 * when it has a body (a Content-Length over 0, or chunked) and is no WebSocket. */
void body_deadline_begin(const struct mg_connection *c);
/* Its body has all been read: no more watching. */
void body_deadline_done(const struct mg_connection *c);
/* Its request is over (end_request); a body not all come is still watched while
 * CivetWeb drops the rest, and cut if that trickles. */
void body_deadline_ended(const struct mg_connection *c);
/* Its connection is closing (connection_close): watched by address and port
 * while CivetWeb drains it, then swept. */
void body_deadline_end(const struct mg_connection *c);
/* After a pass of body_deadline_watch calls at now_ms: forget the closed
 * connections that pass did not see. */
void body_deadline_sweep(int64_t now_ms);

/* The guard's look at fd, a connection from addr:port, at now_ms (fs_mono_ms): cut
 * it when the body of its request is late. */
void body_deadline_watch(int fd, const char *addr, int port, int64_t now_ms);

/* Was c's body cut for coming too slowly?  1 and the sentence in why. */
int body_deadline_cut(const struct mg_connection *c, char *why, size_t len);

#endif
