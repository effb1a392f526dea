/* server.h — `deepdesk serve`: options, start, stop, and what handlers may ask of
 * the running server. */
#ifndef DD_SERVER_H
#define DD_SERVER_H

#include "../../common/err.h"
#include "../../jobs/executor.h"
#include "http.h"
#include "perm.h"

#define SERVER_MAX_ROOTS 32

struct server_opts {
	const char *listen;    /* "127.0.0.1:5010" */
	const char *data_dir;  /* "./data" */
	const char *ui_dir;    /* NULL: the UI embedded at build time */
	const char *data_roots[SERVER_MAX_ROOTS];
	int nroots;
	int cpu_slots;      /* 0: one per core */
	int abort_grace_ms; /* 10000 */
	int threads;        /* CivetWeb worker threads; 0: 256 */
	int request_timeout_s; /* headers all in, and no pause in a body, longer than this; 0: 10 */
	int conns_per_addr; /* plain requests at once, and connections waiting for headers, per address; 0: 32 */
	int ws_per_user, ws_per_addr; /* WebSockets per user (accounts on) and per address; 0: 8 and 16 */
	long long max_upload; /* bytes; 0: 16 GiB */
	long long archive_max_files, archive_max_bytes; /* 0: archive.h's defaults */
	enum { ACCOUNTS_AUTO, ACCOUNTS_OFF, ACCOUNTS_ON } accounts; /* auto: off on loopback only */
	const char *tls_cert, *tls_key; /* PEM files; both or neither */
	const char *metrics_token; /* a file whose first line is /metrics' bearer token; NULL: no /metrics */
	int session_idle_s, session_max_s; /* 0: 8 hours idle, 7 days in all */
	const char *executor;     /* --executor: "local", "slurm", "model=slurm,dataset=local" */
	struct slurm_opts slurm;  /* --slurm-partition, -account, -cpus, -mem, -time */
};

/* Does every address of a --listen value ("127.0.0.1:5010", "[::1]:0",
 * "localhost:80,127.0.0.1:81") belong to this machine's loopback?  A bare port
 * listens on every address: 0. */
int server_listen_is_loopback(const char *listen);

/* Check an --executor value: 0, or -1 with the reason in err. */
int server_executor_parse(const char *spec, struct dd_err *err);

/* Run the server until SIGTERM/SIGINT; returns the process exit code. */
int server_run(const struct server_opts *opts);

/* The user a request acts for ("local" until accounts exist). */
const char *server_user(const struct req *r);
/* The data folder, resolved to an absolute path. */
const char *server_data_dir(void);
/* Is path (which must exist) below one of the --data-root folders?  1 yes, and
 * the resolved path (PATH_MAX bytes) is written to resolved. */
int server_path_allowed(const char *path, char *resolved);
/* Largest upload accepted, in bytes. */
long long server_max_upload(void);
/* The caps on unpacking an upload (--archive-max-files, --archive-max-mib). */
void server_archive_limits(long long *max_files, long long *max_bytes);

/* One route of the route table (API_ROUTES, app/api/api.h), for `deepdesk
 * routes`, perm_route_action and the tests. */
struct route_info {
	const char *method;
	const char *pattern; /* "/api/v1/jobs/{id}" */
	enum perm_action perm;
	int digits; /* one of DIGITS' own paths, outside /api/v1 and openapi.json */
};
/* Every route, in the table's order, ending with a row whose pattern is NULL. */
const struct route_info *server_routes(void);

#endif
