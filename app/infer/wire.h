/* wire.h — the inference service's protocol, one frame each way (infer_service.h
 * describes it): 8 bytes (the JSON header's length and the payload's, uint32
 * little-endian), the header, the raw payload.  Used by the service (service.c)
 * and by the server's client (supervisor.c); private to app/infer/. */
#ifndef DD_INFER_WIRE_H
#define DD_INFER_WIRE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define HEAD_MAX (1u << 20)         /* a request's JSON header */
#define REPLY_MAX (256u << 20)      /* a reply's JSON (insides hold PNGs) */

/* What a send or a receive ends with. */
enum { WIRE_OK = 0, WIRE_EOF = 1, WIRE_TIMEOUT = 2, WIRE_BAD = 3 };

/* Send a frame: head (a NUL-terminated JSON text) and len bytes of data. */
int infer_wire_send(int fd, const char *head, const void *data, size_t len);
/* Read exactly n bytes into buf: WIRE_OK, WIRE_EOF, or WIRE_TIMEOUT (the socket's
 * SO_RCVTIMEO ran out). */
int infer_wire_read(int fd, void *buf, size_t n);
/* Read a frame: its header parsed into *head (caller frees), its payload into *data
 * (caller frees; NULL when empty).  Lengths over head_max or data_max are WIRE_BAD,
 * found before anything is allocated. */
int infer_wire_recv(int fd, size_t head_max, size_t data_max, cJSON **head, char **data, size_t *len);

#endif
