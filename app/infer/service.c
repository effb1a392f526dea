/* service.c — the inference service process (infer_service.h): the process that
 * classifies.  Its protocol is wire.c; the server's side of it is supervisor.c.
 *
 * Inside the service, the work of loading and running a model goes to a few
 * long-lived lanes, as it did when this ran inside the server: CivetWeb's request
 * threads were too small for oneDNN's set-up and a oneDNN primitive must run on the
 * thread that made it (its scratchpad is that thread's), so a lane is a thread of
 * our own with a 16 MiB stack, its share of the cores for OpenMP, a queue, and a
 * cache of the models it has open (networks/infer.h).  A model always goes to the
 * same lane (a hash of its weights file), so it is loaded once and runs on the
 * thread that loaded it.  A connection gets a thread of its own, which reads the
 * request, queues it on the lane and writes the answer.
 *
 * The service trusts nothing in a request: every length is capped before it is
 * read, and the model folder must be below the data folder it was started with. */
#define _GNU_SOURCE
#include "infer_service.h"
#include "wire.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "../../common/testhooks.h"
#include "../../datasets/image.h"
#include "../../jobs/jobdir.h"
#include "../../networks/infer.h"

#define MAX_CONNS 256               /* connections the service serves at once */
#define INSIDE_SIDE 1024            /* the most pixels a side of an insides image */

#define LANES 2
#define LANE_STACK (16u << 20)

struct task {
	void (*fn)(struct infer_cache *cache, void *arg);
	void *arg;
	int done;
	pthread_cond_t cv;      /* signalled when done: only its own waiter wakes */
	struct task *next;
};

struct lane {
	pthread_mutex_t mu;
	pthread_cond_t more;
	struct task *head, *tail;
	struct infer_cache *cache; /* 4 models and 1 GiB over all lanes */
	int ok;
};

static struct {
	struct lane lane[LANES];
	char data[PATH_MAX];      /* the data folder, resolved: models are below it */
	atomic_int conns;
	int delay_ms;             /* TESTHOOK_INFER_DELAY_MS: tests hold a request in flight */
} SV;

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	omp_set_num_threads(cores / LANES > 1 ? (int)(cores / LANES) : 1);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->head)
			pthread_cond_wait(&l->more, &l->mu);
		struct task *t = l->head;
		l->head = t->next;
		if (!l->head)
			l->tail = NULL;
		pthread_mutex_unlock(&l->mu);
		t->fn(l->cache, t->arg);
		pthread_mutex_lock(&l->mu);
		t->done = 1;
		pthread_cond_signal(&t->cv);
	}
	return NULL;
}

static void lanes_init(void)
{
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, LANE_STACK);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < LANES; i++) {
		struct lane *l = &SV.lane[i];
		pthread_mutex_init(&l->mu, NULL);
		pthread_cond_init(&l->more, NULL);
		l->cache = infer_cache_new(4 / LANES, ((size_t)1 << 30) / LANES);
		pthread_t th;
		l->ok = l->cache && pthread_create(&th, &at, lane_main, l) == 0;
		if (!l->ok)
			log_error("cannot start inference lane %d: its models answer 500", i);
	}
	pthread_attr_destroy(&at);
}

/* Run fn(cache, arg) on the lane of the model whose weights are at key, and wait
 * for it.  0, or -1 when that lane did not start. */
static int lane_run(const char *key, void (*fn)(struct infer_cache *, void *), void *arg)
{
	uint32_t hsh = 2166136261u; /* FNV-1a */
	for (const char *c = key; *c; c++)
		hsh = (hsh ^ (uint8_t)*c) * 16777619u;
	struct lane *l = &SV.lane[hsh % LANES];
	if (!l->ok)
		return -1;
	struct task t = { .fn = fn, .arg = arg };
	pthread_cond_init(&t.cv, NULL);
	pthread_mutex_lock(&l->mu);
	if (l->tail)
		l->tail->next = &t;
	else
		l->head = &t;
	l->tail = &t;
	pthread_cond_signal(&l->more);
	while (!t.done)
		pthread_cond_wait(&t.cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	pthread_cond_destroy(&t.cv);
	return 0;
}

/* ---- the insides of a forward pass, as JSON ---- */

static char *base64_png(const struct image *im, struct dd_err *err)
{
	uint8_t *png = NULL;
	size_t len = 0;
	if (image_encode_png(im, 3, &png, &len, err) != DD_OK)
		return NULL;
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char pre[] = "data:image/png;base64,";
	char *out = malloc(sizeof pre + (len + 2) / 3 * 4);
	if (!out) {
		free(png);
		dd_err_set(err, DD_ENOMEM, "out of memory");
		return NULL;
	}
	char *o = out + sizeof pre - 1;
	memcpy(out, pre, sizeof pre - 1);
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)png[i] << 16 | (i + 1 < len ? (uint32_t)png[i + 1] << 8 : 0) |
			     (i + 2 < len ? png[i + 2] : 0);
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? tab[v & 63] : '=';
	}
	*o = 0;
	free(png);
	return out;
}

static cJSON *stats_json(const float *v, int64_t n)
{
	struct infer_stats s;
	infer_stats(v, n, &s);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "mean", s.mean);
	cJSON_AddNumberToObject(o, "std", s.std);
	cJSON_AddNumberToObject(o, "min", s.min);
	cJSON_AddNumberToObject(o, "max", s.max);
	cJSON *h = cJSON_AddArrayToObject(o, "histogram");
	for (int i = 0; i < INFER_HIST_BINS; i++)
		cJSON_AddItemToArray(h, cJSON_CreateNumber((double)s.hist[i]));
	return o;
}

/* Tiles of n planes of h×w into o: "png" (a data: URL), "tiles" {shown, of}. */
static int add_tiles(cJSON *o, const float *v, int n, int h, int w, enum infer_tile_mode mode, struct dd_err *err)
{
	struct image im;
	int shown = 0;
	int rc = infer_tile(v, n, h, w, mode, INSIDE_SIDE, &im, &shown, err);
	if (rc)
		return rc;
	char *url = base64_png(&im, err);
	image_free(&im);
	if (!url)
		return err->code ? err->code : DD_ENOMEM;
	cJSON_AddItemToObject(o, "png", cJSON_CreateString(url));
	free(url);
	cJSON *t = cJSON_AddObjectToObject(o, "tiles");
	cJSON_AddNumberToObject(t, "shown", shown);
	cJSON_AddNumberToObject(t, "of", n);
	return DD_OK;
}

static cJSON *shape_json(const int64_t *dim, int ndim)
{
	cJSON *a = cJSON_CreateArray();
	for (int d = 0; d < ndim; d++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)dim[d]));
	return a;
}

struct insides {
	cJSON *layers;
	struct dd_err *err;
};

/* One blob as {name, layer, type, shape, stats, png, tiles[, weights]}: a 4-D blob
 * as its channels' tiles (a colour map when it has one), a vector laid out as a
 * near-square plane. */
static int inside_blob(const struct infer_blob *b, void *ud)
{
	struct insides *in = ud;
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddItemToArray(in->layers, o)) {
		cJSON_Delete(o);
		return dd_err_set(in->err, DD_ENOMEM, "out of memory");
	}
	cJSON_AddStringToObject(o, "name", b->name);
	cJSON_AddStringToObject(o, "layer", b->layer);
	cJSON_AddStringToObject(o, "type", b->type);
	cJSON_AddItemToObject(o, "shape", shape_json(b->dim, b->ndim));
	cJSON_AddItemToObject(o, "stats", stats_json(b->data, b->count));
	int rc = DD_OK;
	if (b->ndim == 4 && b->dim[2] * b->dim[3] > 1)
		rc = add_tiles(o, b->data, (int)b->dim[1], (int)b->dim[2], (int)b->dim[3],
			       b->dim[1] == 1 ? INFER_TILE_COLOURMAP : INFER_TILE_GRAY, in->err);
	else if (b->count > 1) {
		int side = 1;
		while ((int64_t)side * side < b->count)
			side++;
		int rows = (int)((b->count + side - 1) / side);
		float *pad = malloc((size_t)side * rows * sizeof *pad);
		if (!pad)
			return dd_err_set(in->err, DD_ENOMEM, "out of memory");
		struct infer_stats s;
		infer_stats(b->data, b->count, &s);
		for (int64_t i = 0; i < (int64_t)side * rows; i++)
			pad[i] = i < b->count ? b->data[i] : s.min;
		rc = add_tiles(o, pad, 1, rows, side, INFER_TILE_COLOURMAP, in->err);
		free(pad);
	}
	if (!rc && b->weights) {
		cJSON *w = cJSON_AddObjectToObject(o, "weights");
		cJSON_AddItemToObject(w, "shape", shape_json(b->wdim, 4));
		cJSON_AddItemToObject(w, "stats", stats_json(b->weights, b->wcount));
		int colour = b->wdim[1] == 3;
		rc = add_tiles(w, b->weights, (int)(colour ? b->wdim[0] : b->wdim[0] * b->wdim[1]), (int)b->wdim[2],
			       (int)b->wdim[3], colour ? INFER_TILE_BGR : INFER_TILE_GRAY, in->err);
	}
	return rc;
}

/* ---- the operations ---- */

struct classify_job {
	const char *dir, *weights, *name;
	const char *data;
	size_t len;
	int top, insides, input;
	cJSON *reply;           /* built on the lane */
	int rc;
	struct dd_err err;
};

static void classify_work(struct infer_cache *cache, void *arg)
{
	struct classify_job *t = arg;
	struct infer *m = NULL;
	struct infer_pred pred[INFER_MAX_TOP];
	int np = 0, w = 0, h = 0;
	if ((t->rc = infer_cache_get(cache, t->dir, t->weights, &m, NULL, &t->err)))
		return;
	t->rc = infer_classify(m, t->data, t->len, t->name, t->top, pred, &np, &w, &h, &t->err);
	if (!t->rc) {
		/* labels are the handle's: the JSON copies them before it is lent again */
		t->reply = cJSON_CreateObject();
		cJSON_AddItemToObject(t->reply, "predictions", infer_predictions_json(pred, np));
		cJSON_AddNumberToObject(t->reply, "width", w);
		cJSON_AddNumberToObject(t->reply, "height", h);
	}
	if (!t->rc && (t->input || t->insides)) {
		const struct infer_prep *p = infer_prep(m);
		size_t count = 0;
		const float *x = infer_input(m, &count);
		int side = (int)(count / (size_t)p->c);
		int ih = p->crop ? p->crop : p->h, iw = side / ih;
		cJSON *in = cJSON_AddObjectToObject(t->reply, "input");
		int64_t dim[3] = { p->c, ih, iw };
		cJSON_AddItemToObject(in, "shape", shape_json(dim, 3));
		t->rc = add_tiles(in, x, 1, ih, iw, p->c == 3 ? INFER_TILE_BGR : INFER_TILE_GRAY, &t->err);
		cJSON_DeleteItemFromObject(in, "tiles");
	}
	if (!t->rc && t->insides) {
		struct insides ins = { cJSON_AddArrayToObject(t->reply, "layers"), &t->err };
		t->rc = infer_visit(m, inside_blob, &ins);
	}
	infer_cache_release(cache, m);
}

struct bundle_job {
	const char *dir, *weights, *label;
	cJSON *reply;
	int rc;
	struct dd_err err;
};

static void bundle_work(struct infer_cache *cache, void *arg)
{
	struct bundle_job *t = arg;
	struct infer *m = NULL;
	if ((t->rc = infer_cache_get(cache, t->dir, t->weights, &m, NULL, &t->err)))
		return;
	cJSON *man = infer_manifest(m, t->label);
	char *info = man ? cJSON_Print(man) : NULL, *deploy = infer_deploy_text(m);
	cJSON_Delete(man);
	t->reply = cJSON_CreateObject();
	if (info && deploy && t->reply) {
		cJSON_AddStringToObject(t->reply, "info", info);
		cJSON_AddStringToObject(t->reply, "text", infer_network_text(m));
		cJSON_AddStringToObject(t->reply, "deploy", deploy);
		cJSON_AddStringToObject(t->reply, "mean", infer_mean_path(m) ? infer_mean_path(m) : "");
	} else
		t->rc = dd_err_set(&t->err, DD_ENOMEM, "out of memory");
	free(info);
	free(deploy);
	infer_cache_release(cache, m);
}

/* The model folder and weights of a request: the folder a job's (DATA/jobs/N once
 * resolved), the weights a .safetensors file directly in it. */
static int model_paths(const cJSON *req, const char **dir, const char **weights, struct dd_err *err)
{
	*dir = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "dir"));
	*weights = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "weights"));
	if (!*dir || !*weights)
		return dd_err_set(err, DD_EINVAL, "the request names no model folder and weights");
	size_t dl = strlen(*dir), wl = strlen(*weights);
	char real[PATH_MAX];
	if (!fs_path_under(*dir, SV.data, real) || !jobdir_is_job(SV.data, real))
		return dd_err_set(err, DD_EPERM, "%s is not a model folder below the data folder", *dir);
	if (wl <= dl + 1 || strncmp(*weights, *dir, dl) != 0 || (*weights)[dl] != '/' ||
	    strchr(*weights + dl + 1, '/') || wl < 12 || strcmp(*weights + wl - 12, ".safetensors") != 0)
		return dd_err_set(err, DD_EPERM, "%s is not a weights file of %s", *weights, *dir);
	return DD_OK;
}

static cJSON *error_reply(const struct dd_err *err)
{
	cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddNumberToObject(e, "code", err->code ? err->code : DD_EINTERNAL);
	cJSON_AddStringToObject(e, "message", err->msg[0] ? err->msg : "the inference service failed");
	return o;
}

/* Answer one request: the reply's JSON (never NULL but out of memory). */
static cJSON *serve_request(const cJSON *req, const char *data, size_t len)
{
	struct dd_err err = { 0 };
	const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "op"));
	if (op && !strcmp(op, "stats")) {
		int models = 0;
		size_t bytes = 0;
		for (int i = 0; i < LANES; i++) {
			int m = 0;
			size_t b = 0;
			if (SV.lane[i].cache)
				infer_cache_stats(SV.lane[i].cache, &m, &b);
			models += m;
			bytes += b;
		}
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "pid", getpid());
		cJSON_AddNumberToObject(o, "models", models);
		cJSON_AddNumberToObject(o, "bytes", (double)bytes);
		return o;
	}
	const char *dir, *weights;
	if (!op || (strcmp(op, "classify") && strcmp(op, "bundle"))) {
		dd_err_set(&err, DD_EINVAL, "unknown operation \"%.32s\"", op ? op : "");
		return error_reply(&err);
	}
	if (model_paths(req, &dir, &weights, &err))
		return error_reply(&err);
	if (!strcmp(op, "bundle")) {
		struct bundle_job t = { .dir = dir, .weights = weights,
					.label = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "label")) };
		if (lane_run(weights, bundle_work, &t))
			t.rc = dd_err_set(&t.err, DD_EINTERNAL, "the inference lanes did not start");
		if (t.rc) {
			cJSON_Delete(t.reply);
			return error_reply(&t.err);
		}
		return t.reply;
	}
	const cJSON *top = cJSON_GetObjectItemCaseSensitive(req, "top");
	struct classify_job t = {
		.dir = dir, .weights = weights, .data = data, .len = len,
		.name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "name")),
		.top = cJSON_IsNumber(top) && top->valueint >= 1 && top->valueint <= INFER_MAX_TOP ? top->valueint : 5,
		.insides = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "insides")),
		.input = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "input")),
	};
	if (!len) {
		dd_err_set(&err, DD_EINVAL, "%s: no image", t.name ? t.name : "the image");
		return error_reply(&err);
	}
	if (SV.delay_ms > 0)
		usleep((useconds_t)SV.delay_ms * 1000);
	if (lane_run(weights, classify_work, &t))
		t.rc = dd_err_set(&t.err, DD_EINTERNAL, "the inference lanes did not start");
	if (t.rc) {
		cJSON_Delete(t.reply);
		return error_reply(&t.err);
	}
	return t.reply;
}

/* One connection: requests answered in turn until the server hangs up (it keeps
 * idle connections for the next request) or sends what is not a frame. */
static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	for (;;) {
		cJSON *req = NULL, *reply = NULL;
		char *data = NULL;
		size_t len = 0;
		if (infer_wire_recv(fd, HEAD_MAX, INFER_SERVICE_BODY_MAX, &req, &data, &len) != WIRE_OK)
			break;
		static const uint8_t ack[8];
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "ack")) &&
		    send(fd, ack, sizeof ack, MSG_NOSIGNAL) != (ssize_t)sizeof ack) {
			cJSON_Delete(req);
			free(data);
			break;
		}
		if (atomic_load(&SV.conns) > MAX_CONNS) {
			struct dd_err err;
			dd_err_set(&err, DD_EBUSY, "the inference service is busy (%d connections); try again",
				   MAX_CONNS);
			reply = error_reply(&err);
		} else
			reply = serve_request(req, data, len);
		char *text = reply ? cJSON_PrintUnformatted(reply) : NULL;
		int sent = text && strlen(text) <= REPLY_MAX && infer_wire_send(fd, text, NULL, 0) == WIRE_OK;
		free(text);
		cJSON_Delete(reply);
		cJSON_Delete(req);
		free(data);
		if (!sent)
			break;
	}
	close(fd);
	atomic_fetch_sub(&SV.conns, 1);
	return NULL;
}

const char infer_service_usage[] =
	"usage: deepdesk infer-service --data DIR (--fd N | --socket PATH) [--parent PID]\n"
	"\n"
	"The inference service the server starts and supervises: it classifies uploaded\n"
	"images with the models below DIR, keeping recently used ones loaded, and answers\n"
	"on a Unix socket (an inherited listening fd N, or one it makes at PATH).  With\n"
	"--parent it exits when that process does.  Not meant to be run by hand.\n";

int infer_service_main(int argc, char **argv)
{
	enum { O_DATA = 1, O_FD, O_SOCKET, O_PARENT };
	static const struct option longopts[] = {
		{ "data", required_argument, NULL, O_DATA },
		{ "fd", required_argument, NULL, O_FD },
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "parent", required_argument, NULL, O_PARENT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data = NULL, *sock = NULL;
	int lfd = -1, c;
	long parent = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_DATA: data = optarg; break;
		case O_FD: lfd = atoi(optarg); break;
		case O_SOCKET: sock = optarg; break;
		case O_PARENT: parent = atol(optarg); break;
		case 'h': fputs(infer_service_usage, stdout); return 0;
		default: fputs(infer_service_usage, stderr); return 2;
		}
	}
	if (!data || (lfd < 0) == !sock) {
		fputs(infer_service_usage, stderr);
		return 2;
	}
	if (parent > 0) {
		/* die with the server, even one killed outright */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != (pid_t)parent)
			return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!realpath(data, SV.data)) {
		fprintf(stderr, "deepdesk infer-service: --data %s: %s\n", data, strerror(errno));
		return 2;
	}
	if (sock) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		if (strlen(sock) >= sizeof a.sun_path) {
			fprintf(stderr, "deepdesk infer-service: --socket %s: the path is too long\n", sock);
			return 2;
		}
		memcpy(a.sun_path, sock, strlen(sock) + 1);
		struct stat st;
		if (lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(sock); /* a stale socket; anything else at PATH stays, and bind says so */
		lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || chmod(sock, 0600) != 0 ||
		    listen(lfd, 128) != 0) {
			fprintf(stderr, "deepdesk infer-service: --socket %s: %s\n", sock, strerror(errno));
			return 1;
		}
	}
	SV.delay_ms = testhook_int(TESTHOOK_INFER_DELAY_MS);
	lanes_init();
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 1u << 20);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EBADF || errno == ENOTSOCK || errno == EINVAL) {
				fprintf(stderr, "deepdesk infer-service: fd %d is not a listening socket\n", lfd);
				return 1;
			}
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(10000); /* out of descriptors: let some requests finish */
			continue;
		}
		atomic_fetch_add(&SV.conns, 1);
		pthread_t th;
		if (pthread_create(&th, &at, conn_main, (void *)(intptr_t)fd) != 0) {
			close(fd);
			atomic_fetch_sub(&SV.conns, 1);
		}
	}
}
