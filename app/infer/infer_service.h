/* infer_service.h — the inference service: a long-lived process of its own that
 * opens trained models, keeps the recently used ones loaded, decodes uploaded
 * images and runs their forward passes, so that the server never does (DESIGN.md:
 * a hostile upload that crashes it costs one request and a restart).
 *
 * The server owns a listening Unix socket (DATA/infer.sock, mode 0600) and hands
 * it to the service it spawns (`deepdesk infer-service`, fd 3, its own session),
 * requests one at a time on a connection, which the server keeps open for the next
 * (a few idle ones at most).  A supervisor thread restarts a service that dies,
 * with a back-off; connections made meanwhile wait in the socket's backlog for the
 * next one.  Stopping the server stops the service; a server killed outright takes
 * the service with it (PR_SET_PDEATHSIG).
 *
 * The wire, both ways: a frame of 8 bytes (the header's length and the payload's,
 * uint32 little-endian), a JSON header, then the raw payload.  A request's header
 * is {"op": "classify"|"bundle"|"stats", ...}; its payload is the uploaded image's
 * bytes, passed through untouched.  A reply's header is the answer, or
 * {"error": {"code": DD_E*, "message": "..."}}; replies have no payload.  Every
 * length is checked against a cap before anything is allocated. */
#ifndef DD_INFER_SERVICE_H
#define DD_INFER_SERVICE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "../../common/err.h"

/* A request's image: at most this many bytes (the upload cap, plus a form's slack). */
#define INFER_SERVICE_BODY_MAX ((64u << 20) + (1u << 16))

/* `deepdesk infer-service`: the service's main (argv[0] is the verb).  Returns the
 * exit status. */
int infer_service_main(int argc, char **argv);
extern const char infer_service_usage[];

/* ---- the server's side ---- */

/* Make the socket under data_dir and start the supervisor, which spawns `exe
 * infer-service`.  DD_OK, or DD_EIO naming what failed.  Undone by
 * infer_service_stop(). */
int infer_service_start(const char *exe, const char *data_dir, struct dd_err *err);
/* Stop the service and the supervisor, and remove the socket: nothing is left
 * running.  Safe to call when not started. */
void infer_service_stop(void);

/* What infer_service_call returns, beside DD_OK and DD_E*, when the service died
 * before it answered (the supervisor restarts it). */
#define INFER_SERVICE_DIED 1

/* Send req (not consumed) with len bytes of data (may be 0) and wait for the
 * answer.  DD_OK and *reply (caller frees with cJSON_Delete); the service's error
 * (its code and message, in err); INFER_SERVICE_DIED; DD_EBUSY when the service
 * is not started or did not answer in time. */
int infer_service_call(const cJSON *req, const void *data, size_t len, cJSON **reply, struct dd_err *err);

/* {"pid", "restarts", "models", "bytes"} for GET /api/v1/info (pid null while none
 * runs; models and bytes null when the service does not answer at once).  Caller
 * frees with cJSON_Delete(). */
cJSON *infer_service_info(void);

#endif
