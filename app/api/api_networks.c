/* api_networks.c — what the new-model page asks while a learner edits: the standard
 * networks, a network checked as training will see it (every layer's output shape
 * and parameter count, or the first error with its LINE:COL and layer), the network
 * drawn by Graphviz, the learning-rate curve a solver will follow, and the CPU and
 * memory of a running job's worker.
 *
 *   GET  /api/v1/networks            the standard networks with their prototxt
 *   POST /api/v1/networks/check      {"prototxt"|"standard"|"model", "dataset"?, ...}
 *   POST /api/v1/networks/visualize  the same body -> image/svg+xml
 *   POST /api/v1/lr-preview          {"solver", "epochs", "iterations_per_epoch"?}
 *   GET  /api/v1/jobs/{id}/resources CPU %, RSS and threads of a running worker
 *
 * A check is the verdict a model job would get, and more: against a dataset it is
 * model_check_network() (jobs/kind_train.c: the train, val and deploy stages for
 * the dataset's image shape and classes, what POST /api/v1/models checks; deploy
 * because DIGITS needs a Softmax to classify with after training).
 * A network that does not fit is an answer (200, "valid": false), not a bad request:
 * 400 is only for a request that is malformed or names jobs that do not exist.
 *
 * Graphviz (libgvc, libcgraph) never runs in the server: it is not thread-safe,
 * and its dot layout recurses deep enough on a long chain of layers to overflow a
 * CivetWeb thread's 100 KiB stack (500 ReLUs did, and took the server with it).
 * Each drawing is a `deepdesk draw-network` child, given the graph on its stdin,
 * a big stack, a time and an output limit ("drawing in a child process" below).
 * Labels are plain (lines joined by \n), not HTML-like: in 2.42 the HTML label parser
 * and the Pango markup a <B> needs leak on every layout (valgrind: ~4 KiB a drawing);
 * with plain labels what remains is fontconfig's one-time set-up. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <graphviz/gvc.h>

#include "../../common/json.h"
#include "../../common/log.h"
#include "../../common/fsutil.h"
#include "../../common/sanitizer.h"
#include "../../common/testhooks.h"
#include "../../jobs/executor.h"
#include "../../jobs/job.h"
#include "../../jobs/kind_train.h"
#include "../../jobs/kind_train_memory.h"
#include "../../jobs/sched.h"
#include "../../networks/memory.h"
#include "../../networks/modeldir.h"
#include "../../networks/net.h"
#include "../../networks/solver.h"
#include "../../networks/train.h"
#include "api.h"
#include "../../store/store.h"

#define MAX_PROTOTXT (4u << 20)
#define MAX_ID 9007199254740991.0
#define MAX_DRAWN 1000 /* layers: dot's layout grows faster than linearly */
#define DEFAULT_CLASSES 10


static int is_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= MAX_ID &&
	       v->valuedouble == floor(v->valuedouble);
}

/* obj.key: absent leaves *out; else an integer in [lo, hi].  0 or the status of the
 * 400 sent. */
static int int_field(struct req *r, const cJSON *obj, const char *key, long long lo, long long hi, int *out)
{
	const cJSON *v = json_get(obj, key);
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
	    v->valuedouble > (double)hi)
		return http_error(r->c, 400, "invalid", "%s: must be an integer from %lld to %lld", key, lo, hi);
	*out = (int)v->valuedouble;
	return 0;
}

/* ---- GET /api/v1/networks ---- */

int api_networks_list(struct req *r)
{
	cJSON *body = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(body, "standard");
	for (const struct net_standard *s = net_standards; s->name; s++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddStringToObject(o, "title", s->title);
		cJSON_AddStringToObject(o, "description", s->about);
		cJSON_AddStringToObject(o, "text", s->text);
		cJSON *in = cJSON_AddObjectToObject(o, "input");
		cJSON_AddNumberToObject(in, "c", s->c);
		cJSON_AddNumberToObject(in, "h", s->h);
		cJSON_AddNumberToObject(in, "w", s->w);
		cJSON_AddNumberToObject(o, "classes", s->classes);
		cJSON_AddItemToArray(arr, o);
	}
	return http_json(r->c, 200, body);
}

/* ---- the body of check and visualize ---- */

struct net_req {
	const char *text;       /* the prototxt: borrowed from the body, a standard, or owned */
	char *owned;            /* a model's network.prototxt, read here */
	const struct net_standard *std;
	int64_t model;          /* 0: none */
	int has_dataset;
	char ds_dir[PATH_MAX];
	enum net_stage stage;
	struct net_input in;    /* n and crop as asked; c, h, w, classes as given (0: default) */
	int model_c, model_h, model_w, model_classes; /* a model's settings.json, when it has them */
	const char *solver, *backend; /* for the memory estimate: borrowed from the body; NULL: sgd, cpu */
	int replicas;
};

/* What a model job settled about its input (settings.json: "input": [c, h, w],
 * "classes"), as the default shape for checking its network without a dataset. */
static void model_input(const char *dir, struct net_req *q)
{
	char path[PATH_MAX + 32];
	modeldir_path(dir, MODELDIR_SETTINGS, path, sizeof path);
	cJSON *j = NULL;
	if (json_read_file(path, 8u << 20, &j, NULL) != DD_OK)
		return;
	const cJSON *in = json_get(j, "input"), *cl = json_get(j, "classes");
	if (cJSON_IsArray(in) && cJSON_GetArraySize(in) == 3) {
		const cJSON *c = cJSON_GetArrayItem(in, 0), *h = cJSON_GetArrayItem(in, 1), *w = cJSON_GetArrayItem(in, 2);
		if (cJSON_IsNumber(c) && cJSON_IsNumber(h) && cJSON_IsNumber(w)) {
			q->model_c = c->valueint;
			q->model_h = h->valueint;
			q->model_w = w->valueint;
		}
	}
	if (cJSON_IsNumber(cl))
		q->model_classes = cl->valueint;
	cJSON_Delete(j);
}

/* Read and check the body into q (free q->owned after).  0 or the status of the
 * error sent: 400 for a malformed body or an unknown job, 409 for a dataset not yet
 * built or a model that has not written its network yet. */
static int read_net_req(struct req *r, const cJSON *body, struct net_req *q)
{
	static const char *const fields[] = { "prototxt",  "standard",  "model",  "dataset", "input",	"classes",
					      "stage",	   "batch_size", "crop_size", "solver", "backend", "gpus", NULL };
	int rc;
	memset(q, 0, sizeof *q);
	if ((rc = http_only_fields(r->c, body, fields, "")))
		return rc;
	const cJSON *pt = json_get(body, "prototxt"), *sd = json_get(body, "standard"), *md = json_get(body, "model");
	if (!!pt + !!sd + !!md != 1)
		return http_error(r->c, 400, "invalid",
				  "give exactly one of \"prototxt\" (a network's text), \"standard\" (a standard "
				  "network's name) or \"model\" (a model job's id)");
	if (pt) {
		if (!cJSON_IsString(pt) || !*pt->valuestring || strlen(pt->valuestring) > MAX_PROTOTXT)
			return http_error(r->c, 400, "invalid", "prototxt: must be the text of a network");
		q->text = pt->valuestring;
	} else if (sd) {
		q->std = cJSON_IsString(sd) ? net_standard_find(sd->valuestring) : NULL;
		if (!q->std) {
			char list[256] = "";
			for (const struct net_standard *s = net_standards; s->name; s++)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
					 s == net_standards ? "" : ", ", s->name);
			return http_error(r->c, 400, "invalid", "standard: must be one of %s", list);
		}
		q->text = q->std->text;
	} else {
		struct job_row row;
		if (!is_id(md))
			return http_error(r->c, 400, "invalid", "model: must be a model job's id");
		q->model = (int64_t)md->valuedouble;
		if ((rc = api_job_of_kind(r, q->model, "model", "model", &row)))
			return rc;
		char dir[PATH_MAX], path[PATH_MAX + 32];
		sched_job_dir(q->model, dir, sizeof dir);
		modeldir_path(dir, MODELDIR_NETWORK, path, sizeof path);
		if (fs_read_file(path, MAX_PROTOTXT, &q->owned, NULL, NULL) != DD_OK)
			return http_error(r->c, 409, "conflict", "model: model %lld has not written its network yet",
					  (long long)q->model);
		q->text = q->owned;
		model_input(dir, q);
	}

	const cJSON *ds = json_get(body, "dataset");
	if (ds) {
		if (!is_id(ds))
			return http_error(r->c, 400, "invalid", "dataset: must be a dataset job's id");
		int64_t id = (int64_t)ds->valuedouble;
		if ((rc = api_finished_dataset(r, id, "dataset", "a network is checked against a finished dataset",
						q->ds_dir, sizeof q->ds_dir)))
			return rc;
		q->has_dataset = 1;
		if (json_get(body, "input") || json_get(body, "classes"))
			return http_error(r->c, 400, "invalid",
					  "%s: not with \"dataset\", whose images and labels give the input shape and "
					  "the class count",
					  json_get(body, "input") ? "input" : "classes");
	}
	const cJSON *in = json_get(body, "input");
	if (in) {
		int c, h, w, used = 0;
		if (!cJSON_IsString(in) || sscanf(in->valuestring, "%dx%dx%d%n", &c, &h, &w, &used) != 3 ||
		    in->valuestring[used] || c < 1 || c > 4096 || h < 1 || h > 65536 || w < 1 || w > 65536)
			return http_error(r->c, 400, "invalid",
					  "input: must be the image shape as \"CxHxW\", e.g. \"3x224x224\" (at most 4096 "
					  "channels, 65536x65536)");
		q->in.c = c;
		q->in.h = h;
		q->in.w = w;
	}
	if ((rc = int_field(r, body, "classes", 1, 1 << 24, &q->in.classes)) ||
	    (rc = int_field(r, body, "batch_size", 1, 4096, &q->in.n)) ||
	    (rc = int_field(r, body, "crop_size", 1, 4096, &q->in.crop)))
		return rc;
	/* what the memory estimate needs besides the network: the model form's solver
	 * (its type), backend and gpus, as POST /api/v1/models takes them */
	const cJSON *so = json_get(body, "solver"), *be = json_get(body, "backend"), *gp = json_get(body, "gpus");
	const cJSON *sot = cJSON_IsObject(so) ? json_get(so, "type") : so;
	enum solver_type stype;
	if (sot && (!cJSON_IsString(sot) || solver_type_parse(sot->valuestring, &stype, NULL) != DD_OK))
		return http_error(r->c, 400, "invalid",
				  "solver: a solver type (sgd, nesterov, adagrad, rmsprop, adadelta, adam) or {\"type\": TYPE, ...}");
	if (be && (!cJSON_IsString(be) || strlen(be->valuestring) > 16))
		return http_error(r->c, 400, "invalid", "backend: must be cpu, ref or cuda");
	if (gp && !cJSON_IsNumber(gp) && !cJSON_IsArray(gp) && !cJSON_IsString(gp))
		return http_error(r->c, 400, "invalid", "gpus: a count, a list of GPU ids, or \"any\"");
	q->solver = sot ? sot->valuestring : NULL;
	q->backend = be ? be->valuestring : NULL;
	q->replicas = cJSON_IsNumber(gp) && gp->valuedouble >= 1 && gp->valuedouble <= 16 ? (int)gp->valuedouble
		      : cJSON_IsArray(gp) ? cJSON_GetArraySize(gp) : 1;
	q->stage = NET_STAGE_TRAIN;
	const cJSON *st = json_get(body, "stage");
	if (st) {
		struct dd_err err = { 0 };
		if (!cJSON_IsString(st) || net_stage_parse(st->valuestring, &q->stage, &err) != DD_OK)
			return http_error(r->c, 400, "invalid", "stage: must be train, val or deploy");
	}
	return 0;
}

/* The input without a dataset: as given, else the standard network's, a model's,
 * the description's own Input shape, else 3x224x224; classes as given, else the
 * standard network's or the model's, else 10. */
static struct net_input default_input(const struct net_req *q, const struct net *def)
{
	struct net_input in = q->in;
	if (!in.c) {
		struct net_input decl = in;
		if (q->std) {
			in.c = q->std->c, in.h = q->std->h, in.w = q->std->w;
		} else if (q->model_c > 0 && q->model_h > 0 && q->model_w > 0) {
			in.c = q->model_c, in.h = q->model_h, in.w = q->model_w;
		} else if (net_declared_input(def, &decl) == DD_OK && decl.c > 0 && decl.h > 0 && decl.w > 0) {
			in.c = decl.c, in.h = decl.h, in.w = decl.w;
		} else {
			in.c = 3, in.h = 224, in.w = 224;
		}
	}
	if (!in.classes)
		in.classes = q->std ? q->std->classes : q->model_classes > 0 ? q->model_classes : DEFAULT_CLASSES;
	return in;
}

/* The verdict on q's network.  all_stages: every stage must instantiate (a check);
 * else only q->stage (a drawing; with a dataset, train and val too, as a model job
 * needs them).  DD_OK with *out the graph of q->stage (free it, then *def);
 * DD_EINVAL with err saying what is wrong and *bad_stage the stage it is in (NULL
 * when the error is not of one stage); anything else is the server's trouble. */
static int verdict(const struct net_req *q, int all_stages, struct net **def, struct net_graph **out,
		   const char **bad_stage, struct dd_err *err)
{
	*def = NULL;
	*out = NULL;
	*bad_stage = NULL;
	int rc = net_parse(q->text, strlen(q->text), def, err);
	if (rc)
		return rc;
	struct net_input in;
	if (q->has_dataset) {
		/* what POST /api/v1/models will check: train and val for the dataset */
		struct net_input tin;
		rc = model_check_network(q->text, q->ds_dir, q->in.n, q->in.crop, &tin, NULL, bad_stage, err);
		if (rc == DD_ENOENT)
			rc = DD_EINTERNAL; /* the dataset's files went away under us */
		if (rc)
			return rc;
		in = q->in;
		in.c = tin.c, in.h = tin.h, in.w = tin.w, in.classes = tin.classes;
	} else {
		in = default_input(q, *def);
	}
	for (int s = NET_STAGE_TRAIN; s <= NET_STAGE_DEPLOY; s++) {
		if (s != (int)q->stage && !all_stages)
			continue;
		struct net_graph *g = NULL;
		if ((rc = net_instantiate(*def, (enum net_stage)s, &in, &g, err))) {
			*bad_stage = net_stage_name((enum net_stage)s);
			net_graph_free(*out);
			*out = NULL;
			return rc;
		}
		if (s == (int)q->stage)
			*out = g;
		else
			net_graph_free(g);
	}
	return DD_OK;
}

/* The name of the layer err is about into buf ("" if none): the layer at err's
 * LINE:COL when def has it, else the name after "layer '" in the message. */
static void err_layer(const struct net *def, const struct dd_err *err, char *buf, size_t n)
{
	int line, col, pos = net_err_pos(err, &line, &col);
	buf[0] = 0;
	for (int i = 0; pos && def && i < def->nlayer; i++)
		if (def->layer[i].line == line && def->layer[i].col == col && def->layer[i].name[0]) {
			snprintf(buf, n, "%s", def->layer[i].name);
			return;
		}
	const char *p = err->msg;
	if (pos) {
		p = strstr(p, ": ");
		p = p ? p + 2 : err->msg;
	}
	if (strncmp(p, "layer '", 7) != 0)
		return;
	p += 7;
	const char *end = strstr(p, "': ");
	const char *alt = strstr(p, "' (");
	if (!end || (alt && alt < end))
		end = alt;
	if (end && end > p)
		snprintf(buf, n, "%.*s", (int)(end - p), p);
}

/* {"valid": false, "error": {...}} */
static cJSON *invalid_json(const struct net *def, const struct dd_err *err, const char *stage)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "valid", 0);
	cJSON *e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(e, "message", err->msg);
	int line, col;
	if (net_err_pos(err, &line, &col)) {
		cJSON_AddNumberToObject(e, "line", line);
		cJSON_AddNumberToObject(e, "col", col);
	}
	char layer[256];
	err_layer(def, err, layer, sizeof layer);
	if (layer[0])
		cJSON_AddStringToObject(e, "layer", layer);
	if (stage)
		cJSON_AddStringToObject(e, "stage", stage);
	return o;
}

/* The name a node is shown by: its own, or "#N" for one without. */
static void node_name(const struct net_node *nd, char *buf, size_t n)
{
	if (nd->l.name && nd->l.name[0])
		snprintf(buf, n, "%s", nd->l.name);
	else
		net_layer_label(&nd->l, nd->index, buf, n);
}

static cJSON *shape_json(const struct net_shape *s)
{
	cJSON *a = cJSON_CreateArray();
	for (int d = 0; d < s->ndim; d++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s->dim[d]));
	return a;
}

static cJSON *valid_json(const struct net_graph *g)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "valid", 1);
	cJSON_AddStringToObject(o, "stage", net_stage_name(g->stage));
	cJSON *in = cJSON_AddObjectToObject(o, "input");
	cJSON_AddNumberToObject(in, "n", g->in.n);
	cJSON_AddNumberToObject(in, "c", g->in.c);
	cJSON_AddNumberToObject(in, "h", g->in.h);
	cJSON_AddNumberToObject(in, "w", g->in.w);
	cJSON_AddNumberToObject(in, "classes", g->in.classes);
	if (g->in.crop > 0)
		cJSON_AddNumberToObject(in, "crop", g->in.crop);
	else
		cJSON_AddNullToObject(in, "crop");
	cJSON *layers = cJSON_AddArrayToObject(o, "layers");
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		char name[256];
		node_name(nd, name, sizeof name);
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l, "name", name);
		cJSON_AddStringToObject(l, "type", net_layer_type_name(nd->l.type));
		if (nd->l.line > 0)
			cJSON_AddNumberToObject(l, "line", nd->l.line);
		cJSON *bots = cJSON_AddArrayToObject(l, "bottoms");
		for (int b = 0; b < nd->l.nbottom; b++)
			cJSON_AddItemToArray(bots, cJSON_CreateString(g->blob[nd->bottom[b]].name));
		cJSON *tops = cJSON_AddArrayToObject(l, "tops");
		for (int t = 0; t < nd->l.ntop; t++) {
			const struct net_blob *b = &g->blob[nd->top[t]];
			cJSON *to = cJSON_CreateObject();
			cJSON_AddStringToObject(to, "name", b->name);
			cJSON_AddItemToObject(to, "shape", shape_json(&b->shape));
			cJSON_AddItemToArray(tops, to);
		}
		cJSON_AddNumberToObject(l, "params", (double)nd->nparams);
		cJSON_AddItemToArray(layers, l);
	}
	cJSON_AddNumberToObject(o, "params", (double)g->params);
	cJSON_AddNumberToObject(o, "learned", (double)g->learned);
	return o;
}

/* The memory estimate of training def on g's input (networks/memory.h) with q's
 * batch, crop, solver, backend and copies: *out {"total","host","batch","replicas",
 * "device","breakdown":{...},"limit"} (limit 0: none); over gets train_memory_over's
 * verdict (code 0 when it fits).  DD_OK, or DD_ENOMEM. */
static int memory_json(const struct net_req *q, const struct net *def, const struct net_graph *g, cJSON **out,
		       struct dd_err *over)
{
	struct net_input in = { .n = q->in.n, .c = g->in.c, .h = g->in.h, .w = g->in.w, .crop = q->in.crop,
				.classes = g->in.classes };
	struct net_graph *tg = NULL, *vg = NULL;
	struct dd_err err = { 0 };
	struct net_memory m;
	enum solver_type st = SOLVER_SGD;
	int rc = DD_OK;
	*out = NULL;
	if (q->solver)
		solver_type_parse(q->solver, &st, NULL); /* read_net_req checked it */
	/* every stage instantiated already (verdict): these cannot fail on the input */
	if (net_instantiate(def, NET_STAGE_TRAIN, &in, &tg, &err) || net_instantiate(def, NET_STAGE_VAL, &in, &vg, &err) ||
	    net_memory_estimate(tg, vg, st, q->backend, q->replicas, &m) || !(*out = net_memory_json(&m))) {
		rc = DD_ENOMEM;
		goto done;
	}
	cJSON_AddNumberToObject(*out, "limit", (double)job_memory_max());
	int k = net_memory_largest_layer(tg);
	train_memory_over(&m, k >= 0 ? tg->node[k].l.name : NULL, k >= 0 ? tg->node[k].nparams : 0, over);
done:
	net_graph_free(tg);
	net_graph_free(vg);
	return rc;
}

/* A check or visualize request: its body, what it asks, and the verdict on it
 * (the parsed net and the graph of the stage asked for, or the error and the
 * stage that failed).  net_call_open fills it, net_call_close frees it. */
struct net_call {
	cJSON *body;
	struct net_req q;
	struct net *def;
	struct net_graph *g;
	const char *bad_stage;
	struct dd_err err;
	int verdict; /* DD_OK, DD_EINVAL for a network that does not fit, or another DD_E* */
};

/* Read r's body into c and judge the network (every stage when all_stages).  0,
 * or the status of the error sent for a bad request; close c either way. */
static int net_call_open(struct req *r, struct net_call *c, int all_stages)
{
	memset(c, 0, sizeof *c);
	int rc = http_read_json(r->c, &c->body);
	if (rc == 0 && (rc = read_net_req(r, c->body, &c->q)) == 0)
		c->verdict = verdict(&c->q, all_stages, &c->def, &c->g, &c->bad_stage, &c->err);
	return rc;
}

static void net_call_close(struct net_call *c)
{
	net_graph_free(c->g);
	net_free(c->def);
	free(c->q.owned);
	cJSON_Delete(c->body);
}

int api_networks_check(struct req *r)
{
	struct net_call c;
	int rc = net_call_open(r, &c, 1);
	if (rc)
		goto out;
	struct net_graph *g = c.g;
	if (c.verdict == DD_EINVAL)
		rc = http_json(r->c, 200, invalid_json(c.def, &c.err, c.bad_stage));
	else if (c.verdict)
		rc = http_error_dd(r->c, &c.err);
	else {
		/* what it will take to train, against the per-job limit: a network over it
		 * is refused by POST /api/v1/models, so the verdict says so here */
		cJSON *mem = NULL;
		struct dd_err over = { 0 };
		if ((rc = memory_json(&c.q, c.def, g, &mem, &over)))
			rc = http_error(r->c, 500, "internal", "out of memory");
		else if (over.code) {
			cJSON *o = invalid_json(c.def, &over, NULL);
			cJSON_AddItemToObject(o, "memory", mem);
			rc = http_json(r->c, 200, o);
		} else {
			cJSON *o = valid_json(g);
			cJSON_AddItemToObject(o, "memory", mem);
			rc = http_json(r->c, 200, o);
		}
	}
out:
	net_call_close(&c);
	return rc;
}

/* ---- the drawing ---- */

/* Append s to buf (at *k, size n) escaped for a Graphviz label: a backslash doubled
 * (Graphviz reads \N, \n, \l, ... in labels), control characters and bytes that are
 * not UTF-8 as '?', at most max characters (then "...").  The SVG renderer escapes
 * what XML needs.  (Plain labels, not HTML-like ones: Graphviz 2.42's HTML label
 * parser and its Pango markup for <B> leak on every layout.) */
static void label_escape(char *buf, size_t n, size_t *k, const char *s, size_t max)
{
	size_t chars = 0;
	const unsigned char *p = (const unsigned char *)s;
	while (*p && *k + 8 < n) {
		if (chars == max) {
			memcpy(buf + *k, "...", 3);
			*k += 3;
			break;
		}
		if (*p == '\\') {
			buf[(*k)++] = '\\';
			buf[(*k)++] = '\\';
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			buf[(*k)++] = '?';
			p++;
		} else if (*p < 0x80) {
			buf[(*k)++] = (char)*p++;
		} else {
			/* one UTF-8 sequence, copied whole, or '?' */
			int len = (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0;
			int ok = len > 0 && !(*p == 0xc0 || *p == 0xc1 || *p > 0xf4);
			for (int i = 1; ok && i < len; i++)
				ok = (p[i] & 0xc0) == 0x80;
			if (ok) {
				memcpy(buf + *k, p, (size_t)len);
				*k += (size_t)len;
				p += len;
			} else {
				buf[(*k)++] = '?';
				p++;
			}
		}
		chars++;
	}
	buf[*k] = 0;
}

static void appendf(char *buf, size_t n, size_t *k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t n, size_t *k, const char *fmt, ...)
{
	if (*k >= n)
		return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + *k, n - *k, fmt, ap);
	va_end(ap);
	if (w > 0)
		*k += (size_t)w < n - *k ? (size_t)w : n - *k - 1;
}

static const char *type_colour(enum net_layer_type t)
{
	switch (t) {
	case NET_DATA:
	case NET_INPUT: return "#b9e4bb";
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION: return "#f6b3b3";
	case NET_POOLING: return "#f9d29b";
	case NET_INNER_PRODUCT: return "#dcb8f2";
	case NET_SOFTMAX:
	case NET_SOFTMAX_LOSS:
	case NET_EUCLIDEAN_LOSS:
	case NET_ACCURACY: return "#f3e59a";
	default: return "#c5d6f2";
	}
}

static void shape_text(const struct net_shape *s, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	if (s->ndim == 0)
		appendf(buf, n, &k, "scalar");
	for (int d = 0; d < s->ndim; d++)
		appendf(buf, n, &k, "%s%lld", d ? "x" : "", (long long)s->dim[d]);
}

/* The label of node nd, one line each: name, type, the shape of each top, the
 * parameters. */
static void node_label(const struct net_graph *g, const struct net_node *nd, char *buf, size_t n)
{
	char name[256], sh[96];
	size_t k = 0;
	node_name(nd, name, sizeof name);
	label_escape(buf, n, &k, name, 48);
	appendf(buf, n, &k, "\\n%s", net_layer_type_name(nd->l.type));
	for (int t = 0; t < nd->l.ntop && t < 8; t++) {
		const struct net_blob *b = &g->blob[nd->top[t]];
		shape_text(&b->shape, sh, sizeof sh);
		appendf(buf, n, &k, "\\n");
		if (nd->l.ntop > 1) {
			label_escape(buf, n, &k, b->name, 32);
			appendf(buf, n, &k, ": ");
		}
		appendf(buf, n, &k, "%s", sh);
	}
	if (nd->nparams > 0) {
		char digits[32], grouped[48];
		int len = snprintf(digits, sizeof digits, "%lld", (long long)nd->nparams), j = 0;
		for (int i = 0; i < len; i++) { /* 400500 -> 400,500 */
			if (i && (len - i) % 3 == 0)
				grouped[j++] = ',';
			grouped[j++] = digits[i];
		}
		grouped[j] = 0;
		appendf(buf, n, &k, "\\n%s params", grouped);
	}
}

/* ---- drawing in a child process ----
 *
 * Graphviz runs where it cannot take the server down: `deepdesk draw-network`
 * (api_networks_draw_main), a process of its own started for each drawing.  The
 * server sends it the graph as JSON on its stdin ({"nodes":[{"name","label",
 * "fill"}], "edges":[[from, to, label|null]]}, labels already escaped) and reads
 * the SVG from its stdout.  The child lays out on a thread with a DRAW_STACK
 * stack (dot recurses along a long chain: 500 ReLUs overflowed the 100 KiB of a
 * CivetWeb thread), under RLIMIT_AS and RLIMIT_CPU; the server gives it
 * DRAW_TIMEOUT_MS and DRAW_MAX_SVG bytes of output, then kills it.  A crash, a
 * timeout or too much output is that request's error; the server goes on.  At
 * most DRAW_PARALLEL drawings run at once.
 *
 * For the tests, as DEEPDESK_INFER_DELAY_MS is for the inference service:
 * DEEPDESK_DRAW_FAULT=segv|hang|flood makes the child crash, hang or write 40 MiB,
 * and DEEPDESK_DRAW_TIMEOUT_MS shortens the deadline (never lengthens it). */

#define DRAW_TIMEOUT_MS 20000
#define DRAW_MAX_SVG (32u << 20)
#define DRAW_MAX_SPEC (64u << 20)
#define DRAW_STACK ((size_t)256 << 20)
#define DRAW_MAX_AS ((rlim_t)8 << 30) /* address space: the program's libraries, the stack, the layout */
#define DRAW_PARALLEL 2

extern char **environ;

/* The graph as the child wants it; NULL when out of memory. */
static char *draw_spec(const struct net_graph *g)
{
	char *label = malloc(4096), *text = NULL;
	int *writer = malloc((size_t)(g->nblob ? g->nblob : 1) * sizeof *writer);
	cJSON *spec = cJSON_CreateObject();
	cJSON *nodes = cJSON_AddArrayToObject(spec, "nodes"), *edges = cJSON_AddArrayToObject(spec, "edges");
	if (!label || !writer || !nodes || !edges)
		goto out;
	for (int b = 0; b < g->nblob; b++)
		writer[b] = g->blob[b].producer;
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		char name[256];
		node_name(nd, name, sizeof name);
		/* a name cut at 255 bytes may end inside a character: the child's JSON must be UTF-8 */
		char *fixed = json_utf8_fix(name, strlen(name), NULL);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(nodes, o);
		cJSON_AddStringToObject(o, "name", fixed ? fixed : "?");
		free(fixed);
		node_label(g, nd, label, 4096);
		cJSON_AddStringToObject(o, "label", label);
		cJSON_AddStringToObject(o, "fill", type_colour(nd->l.type));
		for (int i = 0; i < nd->l.nbottom; i++) {
			int b = nd->bottom[i];
			cJSON *e = cJSON_CreateArray();
			cJSON_AddItemToArray(edges, e);
			cJSON_AddItemToArray(e, cJSON_CreateNumber(writer[b]));
			cJSON_AddItemToArray(e, cJSON_CreateNumber(k));
			const struct net_node *maker = &g->node[g->blob[b].producer];
			if (!maker->l.name || strcmp(maker->l.name, g->blob[b].name) != 0) {
				size_t at = 0;
				label_escape(label, 4096, &at, g->blob[b].name, 32);
				cJSON_AddItemToArray(e, cJSON_CreateString(label));
			} else {
				cJSON_AddItemToArray(e, cJSON_CreateNull());
			}
		}
		for (int t = 0; t < nd->l.ntop; t++)
			writer[nd->top[t]] = k;
	}
	text = cJSON_PrintUnformatted(spec);
out:
	cJSON_Delete(spec);
	free(label);
	free(writer);
	return text;
}

static pthread_mutex_t draw_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t draw_cond = PTHREAD_COND_INITIALIZER;
static int drawing; /* children running, under draw_lock */

/* Run `exe draw-network` on spec; its stdout into *svg (malloc'd, caller frees).
 * The child's exit: 0 is the SVG, 1 an error sentence (DD_EINTERNAL), a signal a
 * crash (DD_EINTERNAL); too slow or too much output is DD_EINVAL. */
static int draw_in_child(const char *spec, size_t spec_len, int nlayers, const char *stage, char **svg,
			 size_t *svg_len, struct dd_err *err)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return dd_err_sys(err, DD_EINTERNAL, errno, "drawing: cannot find this program's own path");
	exe[n] = 0;

	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += DRAW_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&draw_lock);
	while (drawing >= DRAW_PARALLEL)
		if (pthread_cond_timedwait(&draw_cond, &draw_lock, &until) == ETIMEDOUT) {
			pthread_mutex_unlock(&draw_lock);
			return dd_err_set(err, DD_EBUSY, "the server is drawing %d networks already; try again", DRAW_PARALLEL);
		}
	drawing++;
	pthread_mutex_unlock(&draw_lock);

	int rc = DD_OK, in[2] = { -1, -1 }, out[2] = { -1, -1 };
	pid_t pid = 0;
	char *buf = NULL;
	size_t len = 0, cap = 0, sent = 0;
	*svg = NULL;
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
		rc = dd_err_sys(err, DD_EINTERNAL, errno, "drawing: cannot make a pipe");
		goto done;
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none); /* the server's threads block SIGTERM */
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char *argv[] = { exe, "draw-network", NULL };
	int src = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	if (src != 0) {
		pid = 0;
		rc = dd_err_sys(err, DD_EINTERNAL, src, "drawing: cannot start %s draw-network", exe);
		goto done;
	}
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	int timeout_ms = DRAW_TIMEOUT_MS;
	int t_hook = testhook_int(TESTHOOK_DRAW_TIMEOUT_MS);
	if (t_hook >= 100 && t_hook < DRAW_TIMEOUT_MS)
		timeout_ms = t_hook;
	int64_t deadline = fs_mono_ms() + timeout_ms;
	int too_big = 0, timed_out = 0;
	for (;;) {
		struct pollfd pf[2] = { { out[0], POLLIN, 0 }, { in[1], POLLOUT, 0 } };
		int64_t left = deadline - fs_mono_ms();
		if (left <= 0) {
			timed_out = 1;
			break;
		}
		int pr = poll(pf, in[1] >= 0 ? 2 : 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			rc = dd_err_sys(err, DD_EINTERNAL, errno, "drawing: poll");
			break;
		}
		if (in[1] >= 0 && pf[1].revents) {
			ssize_t w = write(in[1], spec + sent, spec_len - sent);
			if (w > 0)
				sent += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == spec_len) {
				close(in[1]); /* done, or the child went away (EPIPE): its exit says why */
				in[1] = -1;
			}
		}
		if (pf[0].revents) {
			if (len == cap) {
				size_t ncap = cap ? cap * 2 : 65536;
				char *g = realloc(buf, ncap + 1);
				if (!g) {
					rc = dd_err_set(err, DD_ENOMEM, "out of memory");
					break;
				}
				buf = g;
				cap = ncap;
			}
			ssize_t r = read(out[0], buf + len, cap - len);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0)
				break; /* the child closed its stdout: it is done */
			len += (size_t)r;
			if (len > DRAW_MAX_SVG) {
				too_big = 1;
				break;
			}
		}
	}
	if (timed_out || too_big || rc)
		kill(pid, SIGKILL);
	/* its stdout is closed; it has until the deadline to exit as well */
	int st = 0;
	pid_t w;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && fs_mono_ms() < deadline)
		usleep(2000);
	if (w == 0) {
		timed_out = 1;
		kill(pid, SIGKILL);
	}
	if (w <= 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	pid = 0;
	if (rc)
		goto done;
	if (timed_out) {
		rc = dd_err_set(err, DD_EINVAL,
				"the network is too large to draw (%d layers in the %s stage; Graphviz did not finish in %.1f s)",
				nlayers, stage, timeout_ms / 1000.0);
	} else if (too_big) {
		rc = dd_err_set(err, DD_EINVAL,
				"the network is too large to draw (%d layers in the %s stage; the drawing passed %u MiB)",
				nlayers, stage, DRAW_MAX_SVG >> 20);
	} else if (WIFSIGNALED(st)) {
		rc = dd_err_set(err, DD_EINTERNAL, "Graphviz crashed drawing the %s stage (%d layers): %s", stage, nlayers,
				strsignal(WTERMSIG(st)));
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
			len--;
		rc = dd_err_set(err, DD_EINTERNAL, "drawing the %s stage (%d layers) failed: %.*s", stage, nlayers,
				(int)(len < 300 ? len : 300), len && buf ? buf : "the helper exited without a word");
	} else if (len == 0) {
		rc = dd_err_set(err, DD_EINTERNAL, "drawing the %s stage: Graphviz gave no SVG", stage);
	} else {
		*svg = buf;
		*svg_len = len;
		buf = NULL;
	}
done:
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	free(buf);
	pthread_mutex_lock(&draw_lock);
	drawing--;
	pthread_cond_signal(&draw_cond);
	pthread_mutex_unlock(&draw_lock);
	return rc;
}

/* Draw g as SVG with dot (in a child: draw_in_child).  *svg is malloc'd (caller
 * frees). */
static int draw_svg(const struct net_graph *g, char **svg, size_t *svg_len, struct dd_err *err)
{
	char *spec = draw_spec(g);
	if (!spec)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	int rc = draw_in_child(spec, strlen(spec), g->nnode, net_stage_name(g->stage), svg, svg_len, err);
	free(spec);
	return rc;
}

/* ---- the child: deepdesk draw-network ---- */

struct draw_job {
	const cJSON *spec;
	char *data;       /* the SVG (gvRenderData's; gvFreeRenderData) */
	unsigned int len;
	GVC_t *gvc;       /* the context it was drawn in (gvFreeContext) */
	char why[256];
};

/* Lay out and render job->spec: layers as boxes, blobs as edges from the layer
 * that last wrote them (so in-place layers stack in a chain). */
static void *draw_main(void *arg)
{
	struct draw_job *job = arg;
	const cJSON *nodes = json_get(job->spec, "nodes"), *edges = json_get(job->spec, "edges");
	int nn = cJSON_GetArraySize(nodes);
	Agnode_t **an = calloc((size_t)(nn ? nn : 1), sizeof *an);
	agseterr(AGERR); /* warnings would go to stderr */
	GVC_t *gvc = gvContext();
	Agraph_t *G = NULL;
	int laid_out = 0;
	if (!an || !gvc || !(G = agopen("network", Agdirected, NULL))) {
		snprintf(job->why, sizeof job->why, "Graphviz: cannot make a context (is libgvc's config6 installed?)");
		goto out;
	}
	agattr(G, AGRAPH, "rankdir", "TB");
	agattr(G, AGRAPH, "nodesep", "0.3");
	agattr(G, AGRAPH, "ranksep", "0.35");
	agattr(G, AGRAPH, "bgcolor", "transparent");
	agattr(G, AGNODE, "shape", "box");
	agattr(G, AGNODE, "style", "rounded,filled");
	agattr(G, AGNODE, "fontname", "Helvetica");
	agattr(G, AGNODE, "fontsize", "11");
	agattr(G, AGNODE, "color", "#555555");
	agattr(G, AGNODE, "fillcolor", "#c5d6f2");
	agattr(G, AGNODE, "margin", "0.12,0.05");
	agattr(G, AGNODE, "label", "\\N");
	agattr(G, AGEDGE, "fontname", "Helvetica");
	agattr(G, AGEDGE, "fontsize", "9");
	agattr(G, AGEDGE, "color", "#666666");
	agattr(G, AGEDGE, "arrowsize", "0.7");
	agattr(G, AGEDGE, "label", "");
	int k = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, nodes)
	{
		const char *name = cJSON_GetStringValue(json_get(it, "name")), *label = cJSON_GetStringValue(json_get(it, "label"));
		const char *fill = cJSON_GetStringValue(json_get(it, "fill"));
		if (!name || !label || !fill || !(an[k] = agnode(G, (char *)name, 1))) {
			snprintf(job->why, sizeof job->why, "Graphviz: cannot add node %d", k);
			goto out;
		}
		agsafeset(an[k], "label", (char *)label, "\\N");
		agsafeset(an[k], "fillcolor", (char *)fill, "#c5d6f2");
		k++;
	}
	cJSON_ArrayForEach(it, edges)
	{
		const cJSON *a = cJSON_GetArrayItem(it, 0), *b = cJSON_GetArrayItem(it, 1);
		const char *label = cJSON_GetStringValue(cJSON_GetArrayItem(it, 2));
		int from = cJSON_IsNumber(a) ? a->valueint : -1, to = cJSON_IsNumber(b) ? b->valueint : -1;
		Agedge_t *e = from >= 0 && from < nn && to >= 0 && to < nn ? agedge(G, an[from], an[to], NULL, 1) : NULL;
		if (!e) {
			snprintf(job->why, sizeof job->why, "Graphviz: cannot add an edge from %d to %d", from, to);
			goto out;
		}
		if (label)
			agsafeset(e, "label", (char *)label, "");
	}
	if (gvLayout(gvc, G, "dot") != 0) {
		snprintf(job->why, sizeof job->why, "Graphviz: the dot layout failed");
		goto out;
	}
	laid_out = 1;
	if (gvRenderData(gvc, G, "svg", &job->data, &job->len) != 0 || !job->data) {
		snprintf(job->why, sizeof job->why, "Graphviz: rendering SVG failed");
		job->data = NULL;
	}
out:
	if (laid_out)
		gvFreeLayout(gvc, G);
	if (G)
		agclose(G);
	free(an);
	job->gvc = gvc; /* freed by the child's main, after the SVG is written */
	return NULL;
}

int api_networks_draw_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* the server's thread that started it went away */
	close_range(3, ~0u, 0);           /* whatever the server had open without O_CLOEXEC */
	struct rlimit as = { DRAW_MAX_AS, DRAW_MAX_AS }, cpu = { DRAW_TIMEOUT_MS / 1000 + 1, DRAW_TIMEOUT_MS / 1000 + 2 };
	if (!DD_UNDER_ASAN)
		setrlimit(RLIMIT_AS, &as);
	setrlimit(RLIMIT_CPU, &cpu);
	setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			char *g = cap <= DRAW_MAX_SPEC ? realloc(buf, cap) : NULL;
			if (!g) {
				const char *m = "the drawing's spec is too large\n";
				fs_write_all(1, m, strlen(m));
				return 1;
			}
			buf = g;
		}
		ssize_t r = read(0, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	const char *fault = testhook_str(TESTHOOK_DRAW_FAULT);
	if (fault && strcmp(fault, "segv") == 0) {
		signal(SIGSEGV, SIG_DFL); /* a real crash, also under ASan (make asan), which would report it and exit 1 */
		raise(SIGSEGV);
	}
	if (fault && strcmp(fault, "hang") == 0)
		for (;;)
			pause();
	if (fault && strcmp(fault, "flood") == 0) {
		static char junk[1 << 16];
		memset(junk, '<', sizeof junk);
		for (int i = 0; i < 640; i++)
			if (fs_write_all(1, junk, sizeof junk))
				return 1;
		return 0;
	}
	struct draw_job job = { 0 };
	struct dd_err err = { 0 };
	cJSON *spec = NULL;
	if (json_parse(buf, len, "the drawing's spec", &spec, &err) != DD_OK) {
		fs_write_all(1, err.msg, strlen(err.msg));
		return 1;
	}
	free(buf);
	job.spec = spec;
	pthread_attr_t at;
	pthread_t th;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, DRAW_STACK);
	if (pthread_create(&th, &at, draw_main, &job) != 0) {
		const char *m = "cannot start the drawing thread\n";
		fs_write_all(1, m, strlen(m));
		return 1;
	}
	pthread_join(th, NULL);
	pthread_attr_destroy(&at);
	int rc = job.data ? (fs_write_all(1, job.data, job.len) == 0 ? 0 : 1) : (fs_write_all(1, job.why, strlen(job.why)), 1);
	/* all freed, though the process ends, so that the leak checker of `make asan`
	 * sees only what is really lost */
	if (job.data)
		gvFreeRenderData(job.data);
	if (job.gvc)
		gvFreeContext(job.gvc);
	cJSON_Delete(spec);
	return rc;
}

int api_networks_visualize(struct req *r)
{
	struct net_call c;
	char *svg = NULL;
	size_t len = 0;
	int rc = net_call_open(r, &c, 0);
	if (rc)
		goto out;
	struct net_graph *g = c.g;
	struct dd_err err = { 0 };
	if (c.verdict == DD_EINVAL) {
		rc = c.bad_stage ? http_error(r->c, 400, "invalid", "%s (%s stage)", c.err.msg, c.bad_stage) :
				   http_error(r->c, 400, "invalid", "%s", c.err.msg);
		goto out;
	}
	if (c.verdict) {
		rc = http_error_dd(r->c, &c.err);
		goto out;
	}
	if (g->nnode > MAX_DRAWN) {
		rc = http_error(r->c, 400, "invalid", "the %s stage has %d layers: too many to draw (at most %d)",
				net_stage_name(g->stage), g->nnode, MAX_DRAWN);
		goto out;
	}
	if (draw_svg(g, &svg, &len, &err) != DD_OK) {
		/* a crashed or failed helper is said as it is: nothing secret in it */
		if (err.code == DD_EINTERNAL) {
			log_error("visualize: %s", err.msg);
			rc = http_error(r->c, 500, "internal", "%s", err.msg);
		} else
			rc = http_error_dd(r->c, &err);
		goto out;
	}
	/* the user's names are in it (escaped); no script runs in it even opened on its own */
	http_send_head(r->c, &(struct http_head){ .status = 200, .type = "image/svg+xml", .len = (long long)len,
						  .csp = "default-src 'none'; style-src 'unsafe-inline'" });
	mg_write(r->c, svg, len);
	rc = 200;
out:
	free(svg);
	net_call_close(&c);
	return rc;
}

/* ---- POST /api/v1/lr-preview ---- */

#define LR_EVEN_POINTS 200
#define LR_MAX_STEPS 100 /* step positions drawn exactly; more are a blur anyway */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double num_or(const cJSON *o, const char *k, double dflt)
{
	const cJSON *v = json_get(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

int api_lr_preview(struct req *r)
{
	static const char *const fields[] = { "solver", "epochs", "iterations_per_epoch", NULL };
	cJSON *body = NULL, *params = NULL;
	int64_t *its = NULL;
	int rc = http_read_json(r->c, &body);
	if (rc)
		return rc;
	int epochs = 30, ipe = 100;
	if ((rc = http_only_fields(r->c, body, fields, "")) ||
	    (rc = int_field(r, body, "epochs", 1, 10000, &epochs)) ||
	    (rc = int_field(r, body, "iterations_per_epoch", 1, 1000000, &ipe)))
		goto out;
	int64_t total = (int64_t)epochs * ipe;
	if (total > INT_MAX) {
		rc = http_error(r->c, 400, "invalid", "epochs x iterations_per_epoch: %lld iterations are too many (at most %d)",
				(long long)total, INT_MAX);
		goto out;
	}
	const cJSON *solver = json_get(body, "solver");
	if (solver && !cJSON_IsObject(solver)) {
		rc = http_error(r->c, 400, "invalid", "solver: must be an object, as POST /api/v1/models takes");
		goto out;
	}
	/* the model kind's own checks and defaults, on a stand-in for the rest of a model */
	params = cJSON_CreateObject();
	/* no such job: nothing for the model kind's memory rule to estimate */
	cJSON_AddNumberToObject(params, "dataset", 9007199254740991.0);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(params, "network"), "standard", net_standards[0].name);
	cJSON_AddItemToObject(params, "solver", solver ? cJSON_Duplicate(solver, 1) : cJSON_CreateObject());
	struct dd_err err = { 0 };
	const struct job_kind *kind = job_kind_find("model");
	if (!kind || (kind->validate && kind->validate(params, NULL, NULL, &err) != DD_OK)) {
		rc = kind ? http_error_dd(r->c, &err) : http_error(r->c, 500, "internal", "no model job kind");
		goto out;
	}
	const cJSON *s = json_get(params, "solver"), *lp = json_get(s, "lr_policy");
	const char *pol = cJSON_GetStringValue(json_get(lp, "policy"));

	/* the options kind_train.c's worker gives train_run, and the config it makes */
	struct train_opts o;
	train_opts_default(&o);
	o.base_lr = num_or(s, "base_lr", 0.01);
	if (lr_policy_parse(pol ? pol : "step", &o.policy, &err) != DD_OK) {
		rc = http_error(r->c, 400, "invalid", "solver.lr_policy.policy: %s", err.msg);
		goto out;
	}
	o.step_pct = num_or(lp, "step_pct", 0);
	o.gamma = num_or(lp, "gamma", 0);
	o.power = num_or(lp, "power", 0);
	const cJSON *m;
	cJSON_ArrayForEach(m, json_get(lp, "multistep_pct"))
	{
		if (o.nmultistep < SOLVER_MAX_STEPS)
			o.multistep_pct[o.nmultistep++] = m->valuedouble;
	}
	struct solver_config sc = { 0 };
	train_lr_config(&o, total, &sc);

	/* the iterations drawn: evenly spaced, and either side of every step */
	size_t cap = LR_EVEN_POINTS + 2 * (LR_MAX_STEPS + SOLVER_MAX_STEPS) + 2, n = 0;
	its = malloc(cap * sizeof *its);
	if (!its) {
		rc = http_error(r->c, 500, "internal", "out of memory");
		goto out;
	}
	for (int k = 0; k < LR_EVEN_POINTS; k++)
		its[n++] = total > 1 ? llround((double)k * (double)(total - 1) / (LR_EVEN_POINTS - 1)) : 0;
	if (sc.policy == LR_STEP) {
		for (int64_t at = sc.stepsize, k = 0; at < total && k < LR_MAX_STEPS; at += sc.stepsize, k++) {
			its[n++] = at - 1;
			its[n++] = at;
		}
	} else if (sc.policy == LR_MULTISTEP) {
		for (int i = 0; i < sc.nstepvalue; i++)
			if (sc.stepvalue[i] > 0 && sc.stepvalue[i] < total) {
				its[n++] = sc.stepvalue[i] - 1;
				its[n++] = sc.stepvalue[i];
			}
	}
	qsort(its, n, sizeof *its, cmp_i64);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "policy", lr_policy_name(sc.policy));
	cJSON_AddNumberToObject(out, "iterations", (double)total);
	cJSON_AddNumberToObject(out, "iterations_per_epoch", ipe);
	cJSON *pts = cJSON_AddArrayToObject(out, "points");
	for (size_t i = 0; i < n; i++) {
		if (i && its[i] == its[i - 1])
			continue;
		cJSON *p = cJSON_CreateObject();
		cJSON_AddNumberToObject(p, "iteration", (double)its[i]);
		cJSON_AddNumberToObject(p, "epoch", (double)its[i] / ipe);
		cJSON_AddNumberToObject(p, "lr", lr_at(&sc, (int)its[i]));
		cJSON_AddItemToArray(pts, p);
	}
	rc = http_json(r->c, 200, out);
out:
	free(its);
	cJSON_Delete(params);
	cJSON_Delete(body);
	return rc;
}

/* ---- GET /api/v1/jobs/{id}/resources ---- */

#define RES_SAMPLE_MS 200 /* when there is no earlier reading to measure from */
#define RES_SLOTS 64

/* The last reading per job, so that polling measures CPU over the poll interval. */
static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static struct res_sample {
	int64_t id;
	int pid;
	int64_t pid_start;
	long long ticks; /* utime + stime */
	int64_t at_ms;   /* fs_mono_ms() of the reading */
} res_samples[RES_SLOTS];

/* utime + stime of pid in clock ticks, or -1. */
static long long proc_ticks(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parens */
	if (!p)
		return -1;
	unsigned long long ut, st;
	/* after the name: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* VmRSS (bytes) and Threads of pid from /proc/PID/status; 0 when it is gone. */
static int proc_status(int pid, long long *rss, int *threads)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	long long kib = 0;
	*rss = 0;
	*threads = 0;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "VmRSS: %lld kB", &kib) == 1)
			*rss = kib * 1024;
		else
			sscanf(line, "Threads: %d", threads);
	}
	fclose(f);
	return 1;
}

int api_job_resources(struct req *r)
{
	struct job_row row;
	struct dd_err err = { 0 };
	if (store_job_row(r->id, &row, &err) != DD_OK)
		return http_error_dd(r->c, &err);
	if (row.state != JOB_RUNNING || row.pid <= 0)
		return http_error(r->c, 409, "conflict", "job %lld is %s; resources are measured only while it runs",
				  (long long)r->id, job_state_name(row.state));
	long long rss = 0;
	int threads = 0;
	long long t1 = -1, t0 = -1;
	int64_t ms1 = 0, ms0 = 0;
	int alive = exec_local_pid_start(row.pid) == row.pid_start;
	if (alive) {
		t1 = proc_ticks(row.pid);
		ms1 = fs_mono_ms();
	}
	if (t1 >= 0) {
		pthread_mutex_lock(&res_lock);
		for (int i = 0; i < RES_SLOTS; i++) {
			struct res_sample *s = &res_samples[i];
			if (s->id == r->id && s->pid == row.pid && s->pid_start == row.pid_start &&
			    ms1 - s->at_ms >= 100 && ms1 - s->at_ms <= 600000 && s->ticks <= t1) {
				t0 = s->ticks;
				ms0 = s->at_ms;
			}
		}
		pthread_mutex_unlock(&res_lock);
		if (t0 < 0) { /* nothing recent to measure from: sample now */
			t0 = t1;
			ms0 = ms1;
			struct timespec ts = { 0, RES_SAMPLE_MS * 1000000L };
			nanosleep(&ts, NULL);
			t1 = proc_ticks(row.pid);
			ms1 = fs_mono_ms();
		}
	}
	if (t1 < 0 || !proc_status(row.pid, &rss, &threads) || exec_local_pid_start(row.pid) != row.pid_start)
		return http_error(r->c, 409, "conflict", "job %lld's worker has just ended", (long long)r->id);
	/* keep this reading for the next call: the same job's slot, else the oldest */
	pthread_mutex_lock(&res_lock);
	int slot = 0;
	for (int i = 0; i < RES_SLOTS; i++) {
		if (res_samples[i].id == r->id) {
			slot = i;
			break;
		}
		if (res_samples[i].at_ms < res_samples[slot].at_ms)
			slot = i;
	}
	res_samples[slot] = (struct res_sample){ r->id, row.pid, row.pid_start, t1, ms1 };
	pthread_mutex_unlock(&res_lock);

	long hz = sysconf(_SC_CLK_TCK);
	double secs = (double)(ms1 - ms0) / 1000.0;
	double pct = secs > 0 && hz > 0 ? 100.0 * (double)(t1 - t0) / (double)hz / secs : 0;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "state", job_state_name(row.state));
	cJSON_AddNumberToObject(o, "cpu_pct", round(pct * 10) / 10);
	cJSON_AddNumberToObject(o, "interval_ms", (double)(ms1 - ms0));
	cJSON_AddNumberToObject(o, "rss_bytes", (double)rss);
	cJSON_AddNumberToObject(o, "threads", threads);
	/* the GPUs it holds, as /api/v1/info shows them (NVML's use where present) */
	cJSON *all = sched_gpus_json(), *held = cJSON_AddArrayToObject(o, "gpus"), *g;
	for (cJSON *next = all ? all->child : NULL; (g = next) != NULL;) {
		next = g->next;
		const cJSON *holder = cJSON_GetObjectItemCaseSensitive(g, "job");
		if (cJSON_IsNumber(holder) && (int64_t)holder->valuedouble == r->id)
			cJSON_AddItemToArray(held, cJSON_DetachItemViaPointer(all, g));
	}
	cJSON_Delete(all);
	return http_json(r->c, 200, o);
}
