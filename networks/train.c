/* train.c — see train.h. */
#define _GNU_SOURCE
#include "train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../common/rng.h"
#include "../datasets/dsinfo.h"
#include "backend.h"
#include "graph.h"
#include "modeldir.h"
#include "net.h"
#include "snapshot.h"

void train_opts_default(struct train_opts *o)
{
	memset(o, 0, sizeof *o);
	o->epochs = 30;
	o->solver = SOLVER_SGD;
	o->base_lr = 0.01;
	o->momentum = 0.9;
	o->weight_decay = 0.0005;
	o->policy = LR_STEP;
	o->step_pct = 33;
	o->gamma = 0.1;
	o->mean = FEED_MEAN_IMAGE;
	o->reports_per_epoch = 8;
}

void train_lr_config(const struct train_opts *o, int64_t total, struct solver_config *sc)
{
	sc->base_lr = o->base_lr > 0 ? o->base_lr : 0.01;
	sc->policy = o->policy;
	sc->gamma = o->gamma > 0 ? o->gamma : 0.1;
	double sp = o->step_pct > 0 ? o->step_pct : 33;
	sc->stepsize = (int)fmax(1, llround((double)total * sp / 100.0));
	sc->power = o->power > 0 ? o->power : o->policy == LR_INV ? 0.75 : 1;
	sc->max_iter = (int)total;
	sc->nstepvalue = 0;
	for (int i = 0; i < o->nmultistep && i < SOLVER_MAX_STEPS; i++)
		sc->stepvalue[sc->nstepvalue++] = (int)llround((double)total * o->multistep_pct[i] / 100.0);
}

static void logf_(const struct train_hooks *h, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void logf_(const struct train_hooks *h, const char *level, const char *fmt, ...)
{
	if (!h || !h->log)
		return;
	char buf[512];
	DD_FORMAT(buf, fmt);
	h->log(h->ctx, level, buf);
}

int train_dataset_input(const char *dir, struct net_input *in, struct dd_err *err)
{
	cJSON *j = NULL;
	int rc = dsinfo_read(dir, &j, err);
	if (rc)
		return rc == DD_ENOENT ? dd_err_set(err, DD_ENOENT, "%s: no such dataset (no " DSINFO_FILE ")", dir) : rc;
	struct dsinfo_shape sh;
	if (!dsinfo_shape(j, &sh)) {
		char path[PATH_MAX + 16];
		dsinfo_path(dir, DSINFO_FILE, path, sizeof path);
		rc = dd_err_set(err, DD_EINVAL, "%s lacks options.width/height/channels or labels", path);
	} else {
		in->w = sh.width;
		in->h = sh.height;
		in->c = sh.channels;
		in->classes = sh.classes;
	}
	cJSON_Delete(j);
	return rc;
}

static int copy_params(struct graph *dst, const struct graph *src, struct dd_err *err)
{
	int n = graph_nparam(src);
	if (graph_nparam(dst) != n)
		return dd_err_set(err, DD_EINVAL, "the val network has %d parameter blobs, the train network %d",
				  graph_nparam(dst), n);
	for (int i = 0; i < n; i++) {
		const struct graph_param *a = graph_param(src, i), *b = graph_param(dst, i);
		if (a->count != b->count || strcmp(a->layer, b->layer) != 0)
			return dd_err_set(err, DD_EINVAL,
					  "layer '%s' differs between the train and val networks", b->layer);
		memcpy(b->w, a->w, (size_t)a->count * sizeof(float));
	}
	return DD_OK;
}

static const struct net_node *data_node(const struct net_graph *g)
{
	for (int i = 0; i < g->nnode; i++)
		if (g->node[i].l.type == NET_DATA)
			return &g->node[i];
	return NULL;
}

/* A copy of the train network for data parallelism (train_opts.replicas): copy 0
 * is the run's own (its be, tr and sol, borrowed); the others own theirs
 * and are driven each by a thread of its own (struct crew). */
struct replica {
	struct run *run;
	int i;
	struct backend *be;
	struct graph *tr;
	struct solver *sol;
	float *data, *label;
	pthread_t th;
	int started;
	/* the outcome of its last pass or step */
	float loss;
	int skipped;
	float scale;
	double lr;
	int rc;
	struct dd_err err;
};

/* What the copies are told to do next, and how many are still at it. */
enum crew_cmd { CREW_PASS, CREW_STEP, CREW_QUIT };
struct crew {
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	uint64_t gen;            /* bumped per command */
	enum crew_cmd cmd;
	int pending;             /* copies 1.. still working on it */
	const struct feed_batch *batch; /* CREW_PASS */
	int first;               /* CREW_PASS: the first pass of an iteration */
	int64_t it;              /* CREW_STEP */
};

/* One training's state, shared by the steps of train_run. */
struct run {
	const struct train_opts *o;
	const struct train_hooks *h;
	struct train_result *res;
	const char *netname;
	struct net_input in;
	struct net *def;
	struct net_graph *tg, *vg;
	struct backend *be;
	struct graph *tr, *va;
	struct solver *sol;
	struct feed *ftr, *fva;
	float *vdata, *vlabel, *scratch_labels;
	const char *acc1, *acc5;
	int tb, vb, iter_size;
	int fc, fh, fw;
	int64_t ipe, total, vit;  /* iterations per epoch, in all; val batches */
	/* the copies of the train graph: rep[0] is (be, tr, sol) and the data blobs; more
	 * than one with train_opts.replicas (data parallelism) */
	int nrep;
	struct replica rep[TRAIN_MAX_REPLICAS];
	struct crew crew;
	int crew_up;
};

/* "3" for a whole epoch, "2.5" or "1.4167" for a part of one. */
/* What stands when a newer snapshot could not be written, as a phrase for the
 * user: the last snapshot this run wrote, else the one it resumed from. */
static int last_good_snapshot(const struct run *r, char *buf, size_t len)
{
	const char *p = r->res->snapshot[0] ? r->res->snapshot : r->o->resume;
	if (!p) {
		snprintf(buf, len, "there is no snapshot yet");
		return 0;
	}
	struct modeldir_snapshot one;
	if (modeldir_snapshot_parse(p, &one))
		snprintf(buf, len, "the latest snapshot is still the one at epoch %s", one.label);
	else
		snprintf(buf, len, "the latest snapshot is still %s", strrchr(p, '/') ? strrchr(p, '/') + 1 : p);
	return 1;
}

/* The snapshot of iteration it: OUT/snapshot_epoch_<E>.solverstate with the
 * solver's history and where training stood (iteration, data position, dropout's
 * PRNG), then OUT/snapshot_epoch_<E>.safetensors with the weights, each written
 * whole or not at all (st_write).  The weights come last because they are what
 * makes a snapshot exist (the listing, the latest, classify and resume all go by
 * the .safetensors): a crash between the two leaves a stray .solverstate nobody
 * reads, never weights without the state a resume needs.  When either cannot be
 * written (a full disk) the other is removed, so no snapshot is ever half new, and
 * the error says which epoch was lost and which snapshot still stands. */
static int write_snapshot(struct run *r, int64_t it, struct dd_err *err)
{
	const struct train_opts *o = r->o;
	int rc = fs_mkdir_p(o->out_dir, err);
	if (rc)
		return rc;
	char ep[32], s_it[32], s_cls[32], s_shape[64], s_fe[32], s_fp[32], s_rng[32], s_total[32], s_seed[32];
	modeldir_label_at(it, r->ipe, ep, sizeof ep);
	char path[PATH_MAX], spath[PATH_MAX + 16];
	modeldir_snapshot_path(o->out_dir, ep, MODELDIR_SNAP_WEIGHTS, path, sizeof path);
	modeldir_snapshot_path(o->out_dir, ep, MODELDIR_SNAP_STATE, spath, sizeof spath);
	snprintf(s_it, sizeof s_it, "%lld", (long long)it);
	snprintf(s_cls, sizeof s_cls, "%d", r->in.classes);
	snprintf(s_shape, sizeof s_shape, "%dx%dx%d", r->fc, r->fh, r->fw);
	snprintf(s_total, sizeof s_total, "%lld", (long long)r->total);
	snprintf(s_seed, sizeof s_seed, "%llu", (unsigned long long)o->seed);
	int64_t fe, fp;
	feed_position(r->ftr, &fe, &fp);
	snprintf(s_fe, sizeof s_fe, "%lld", (long long)fe);
	snprintf(s_fp, sizeof s_fp, "%lld", (long long)fp);
	snprintf(s_rng, sizeof s_rng, "%llu", (unsigned long long)*graph_rng(r->tr));
	const char *meta[] = { "format", "deepdesk", "network", r->netname, "epoch", ep, "iteration", s_it,
			       "classes", s_cls, "input", s_shape, NULL };
	/* the other copies' dropout streams, "dropout_rng_<i>" */
	char keys[TRAIN_MAX_REPLICAS][24], vals[TRAIN_MAX_REPLICAS][24];
	const char *smeta[20 + 2 * TRAIN_MAX_REPLICAS] = { "format", "deepdesk", "iteration", s_it, "iterations",
							    s_total, "feed_epoch", s_fe, "feed_position", s_fp,
							    "dropout_rng", s_rng, "seed", s_seed, "backend",
							    backend_name(r->be) };
	int nm = 16;
	for (int i = 1; i < r->nrep; i++) {
		snprintf(keys[i], sizeof keys[i], "dropout_rng_%d", i);
		snprintf(vals[i], sizeof vals[i], "%llu", (unsigned long long)*graph_rng(r->rep[i].tr));
		smeta[nm++] = keys[i];
		smeta[nm++] = vals[i];
	}
	smeta[nm] = NULL;
	if ((rc = snapshot_save_solver(r->sol, spath, smeta, err)) == DD_OK &&
	    (rc = snapshot_save_weights(r->tr, path, meta, err)) != DD_OK)
		unlink(spath);
	if (rc && err) {
		char kept[128];
		int have = last_good_snapshot(r, kept, sizeof kept);
		dd_err_prefix(err, "the snapshot at epoch %s was not written", ep);
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof err->msg - n, "; %s%s", kept,
			 rc != DD_ENOSPC ? "" : have ? ": free some space and resume" : ": free some space and train again");
	}
	if (rc)
		return rc;
	snprintf(r->res->snapshot, sizeof r->res->snapshot, "%s", path);
	logf_(r->h, "info", "snapshot %s (iteration %lld)", path, (long long)it);
	return DD_OK;
}

static int meta_i64(const struct st_file *f, const char *key, int64_t *out, const char *path, struct dd_err *err)
{
	const char *v = st_meta(f, key);
	char *end;
	errno = 0;
	long long x = v ? strtoll(v, &end, 10) : 0;
	if (!v || errno || *end || x < 0)
		return dd_err_set(err, DD_EINVAL, "%s: its \"%s\" is missing or not a count", path, key);
	*out = x;
	return DD_OK;
}

/* Continue from a snapshot: its weights, the solver history beside it, and where
 * training stood.  *start gets the iteration to go on from. */
static int restore(struct run *r, const char *weights, int64_t *start, uint64_t *rng, struct dd_err *err)
{
	char spath[PATH_MAX];
	if (modeldir_state_of(weights, spath, sizeof spath))
		return dd_err_set(err, DD_EINVAL, "%s: the path is too long", weights);
	int rc = snapshot_load_weights(r->tr, weights, 0, NULL, 0, err);
	if (rc)
		return rc;
	if ((rc = snapshot_load_solver(r->sol, spath, err)))
		return rc == DD_ENOENT ? dd_err_set(err, DD_ENOENT, "%s: no solver state beside it (%s), so it "
								    "can seed a fine-tuning but not a resume",
						    weights, spath)
				       : rc;
	struct st_file *f = NULL;
	if ((rc = st_open(spath, &f, err)))
		return rc;
	int64_t it, fe, fp;
	if ((rc = meta_i64(f, "iteration", &it, spath, err)) || (rc = meta_i64(f, "feed_epoch", &fe, spath, err)) ||
	    (rc = meta_i64(f, "feed_position", &fp, spath, err))) {
		st_close(f);
		return rc;
	}
	const char *rs = st_meta(f, "dropout_rng");
	*graph_rng(r->tr) = rs ? strtoull(rs, NULL, 10) : *graph_rng(r->tr);
	for (int i = 1; i < r->nrep; i++) { /* absent (a run on fewer copies): split from copy 0's */
		char key[32];
		snprintf(key, sizeof key, "dropout_rng_%d", i);
		rs = st_meta(f, key);
		rng[i] = rs ? strtoull(rs, NULL, 10) : 0;
	}
	st_close(f);
	feed_seek(r->ftr, fe, fp);
	*start = it;
	return DD_OK;
}

/* Validation: the val graph gets the train graph's parameters and runs over the
 * whole val set (the last batch wraps around, as Caffe's test_iter does). */
static int validate(struct run *r, int64_t done, double lr, struct dd_err *err)
{
	int rc = copy_params(r->va, r->tr, err);
	if (rc)
		return rc;
	feed_rewind(r->fva);
	double vl = 0, a1 = 0, a5 = 0;
	for (int64_t k = 0; k < r->vit; k++) {
		float l;
		if ((rc = feed_next(r->fva, r->vdata, r->vlabel ? r->vlabel : r->scratch_labels, r->vb, err)) ||
		    (rc = graph_forward(r->va, 0, &l, err)))
			return rc;
		vl += l;
		if (r->acc1)
			a1 += graph_value(r->va, r->acc1);
		if (r->acc5)
			a5 += graph_value(r->va, r->acc5);
	}
	struct train_metric m = { .kind = "val", .iteration = done, .epoch = (double)done / (double)r->ipe,
				  .lr = lr, .loss = vl / r->vit, .accuracy = r->acc1 ? a1 / r->vit : NAN,
				  .accuracy_top5 = r->acc5 ? a5 / r->vit : NAN };
	r->res->val_loss = m.loss;
	r->res->val_accuracy = m.accuracy;
	r->res->val_accuracy_top5 = m.accuracy_top5;
	if (r->h && r->h->metric)
		r->h->metric(r->h->ctx, &m);
	return DD_OK;
}

/* Caffe's softmax loss clamps probabilities, so diverged (inf/NaN) weights can
 * hide behind a finite loss: the weights are checked too. */
static int check_finite(struct run *r, double loss, int64_t done, struct dd_err *err)
{
	int ok = isfinite(loss);
	const float *pw = graph_params(r->tr);
	for (int64_t k = 0, np = graph_param_count(r->tr); ok && k < np; k++)
		ok = isfinite(pw[k]);
	if (!ok)
		return dd_err_set(err, DD_EINVAL, "the loss became NaN at epoch %.2f; try a lower learning rate",
				  (double)done / (double)r->ipe);
	return DD_OK;
}

/* ---- data parallelism: the copies of the train network ---- */

/* The run's backend, or with replicas a group of them (cuda: one per GPU, joined
 * by NCCL); copy 0's is r->be. */
static int create_backends(struct run *r, struct dd_err *err)
{
	const struct train_opts *o = r->o;
	int nrep = o->replicas > 1 ? o->replicas : 1;
	/* refused before r->nrep is set: teardown walks rep[nrep - 1 .. 1] */
	if (nrep > TRAIN_MAX_REPLICAS)
		return dd_err_set(err, DD_EINVAL, "%d copies are too many (at most %d GPUs)", nrep,
				  TRAIN_MAX_REPLICAS);
	r->nrep = nrep;
	if (r->nrep == 1)
		return backend_create(o->backend, &r->be, err);
	struct backend *be[TRAIN_MAX_REPLICAS];
	int rc = backend_create_group(o->backend, r->nrep, o->gpus, be, err);
	if (rc)
		return rc;
	r->be = be[0];
	for (int i = 1; i < r->nrep; i++)
		r->rep[i] = (struct replica){ .run = r, .i = i, .be = be[i] };
	return DD_OK;
}

/* Copy 0's parameters (BatchNorm statistics too) and solver history to the other
 * copies — after the fillers, a fine-tuning's load or a resume — and give each copy
 * its own dropout stream: rng[i] where a resume read one, else one split from copy
 * 0's. */
static void broadcast(struct run *r, const uint64_t *rng)
{
	if (r->nrep == 1)
		return;
	backend_wait(r->be);
	size_t bytes = (size_t)graph_param_count(r->tr) * sizeof(float);
	for (int i = 1; i < r->nrep; i++) {
		struct replica *p = &r->rep[i];
		backend_wait(p->be);
		memcpy(graph_params(p->tr), graph_params(r->tr), bytes);
		for (int k = 0; k < solver_nhistory(r->sol); k++)
			memcpy(solver_history(p->sol, k), solver_history(r->sol, k), bytes);
		*graph_rng(p->tr) = rng && rng[i] ? rng[i] : rng_at(*graph_rng(r->tr), (uint64_t)i);
	}
}

/* One forward/backward pass of copy p on its part of batch b (samples
 * [i·batch, (i+1)·batch)).  A loss that is not finite is left in p->loss for the
 * caller to report, without a backward. */
static int rep_pass(struct run *r, struct replica *p, const struct feed_batch *b, int first, struct dd_err *err)
{
	if (first)
		graph_zero_grads(p->tr);
	int rc = feed_put(r->ftr, b, p->i * r->tb, r->tb, p->data, p->label, p->be, err);
	if (!rc)
		rc = graph_forward(p->tr, 1, &p->loss, err);
	if (!rc && isfinite(p->loss))
		rc = graph_backward(p->tr, err);
	return rc;
}

/* The update of copy p after its passes: the mean of the copies' gradients (NCCL's,
 * where the group has it; else the caller has averaged them on the host), FP16's
 * loss scale undone, the solver's step. */
static int rep_step(struct run *r, struct replica *p, int64_t it, struct dd_err *err)
{
	int rc = DD_OK;
	if (r->nrep > 1 && backend_has_allreduce(p->be))
		rc = backend_allreduce(p->be, graph_grads(p->tr), graph_param_count(p->tr), err);
	if (!rc)
		rc = backend_unscale(p->be, graph_grads(p->tr), graph_param_count(p->tr), &p->skipped, &p->scale, err);
	if (!rc)
		p->lr = p->skipped ? NAN : solver_step(p->sol, (int)it);
	return rc;
}

static int rep_do(struct run *r, struct replica *p, enum crew_cmd cmd, const struct feed_batch *b, int first,
		  int64_t it)
{
	p->err = (struct dd_err){ 0 };
	return cmd == CREW_PASS ? rep_pass(r, p, b, first, &p->err) : rep_step(r, p, it, &p->err);
}

/* A copy's thread: bound to its device, it does what the crew is told, until quit. */
static void *crew_main(void *arg)
{
	struct replica *p = arg;
	struct run *r = p->run;
	struct crew *c = &r->crew;
	backend_bind(p->be);
	uint64_t seen = 0;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		while (c->gen == seen)
			pthread_cond_wait(&c->go, &c->mu);
		seen = c->gen;
		enum crew_cmd cmd = c->cmd;
		const struct feed_batch *b = c->batch;
		int first = c->first;
		int64_t it = c->it;
		pthread_mutex_unlock(&c->mu);
		if (cmd == CREW_QUIT)
			break;
		p->rc = rep_do(r, p, cmd, b, first, it);
		pthread_mutex_lock(&c->mu);
		if (--c->pending == 0)
			pthread_cond_signal(&c->done);
		pthread_mutex_unlock(&c->mu);
	}
	return NULL;
}

static int crew_start(struct run *r, struct dd_err *err)
{
	if (r->nrep == 1)
		return DD_OK;
	struct crew *c = &r->crew;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->go, NULL);
	pthread_cond_init(&c->done, NULL);
	r->crew_up = 1;
	for (int i = 1; i < r->nrep; i++) {
		if (pthread_create(&r->rep[i].th, NULL, crew_main, &r->rep[i]))
			return dd_err_set(err, DD_EINTERNAL, "cannot start the thread of copy %d", i);
		r->rep[i].started = 1;
	}
	return DD_OK;
}

static void crew_stop(struct run *r)
{
	if (!r->crew_up)
		return;
	struct crew *c = &r->crew;
	pthread_mutex_lock(&c->mu);
	c->cmd = CREW_QUIT;
	c->gen++;
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->mu);
	for (int i = 1; i < r->nrep; i++)
		if (r->rep[i].started)
			pthread_join(r->rep[i].th, NULL);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->go);
	pthread_mutex_destroy(&c->mu);
	r->crew_up = 0;
}

/* Every copy does cmd — copy 0 on this thread, the others on theirs — and this
 * returns when all have: DD_OK, or the first copy's error (naming its GPU).  A
 * step is told only after every pass succeeded, so no copy waits in an all-reduce
 * for one that failed. */
static int crew_run(struct run *r, enum crew_cmd cmd, const struct feed_batch *b, int first, int64_t it,
		    struct dd_err *err)
{
	struct crew *c = &r->crew;
	if (r->nrep > 1) {
		pthread_mutex_lock(&c->mu);
		c->cmd = cmd;
		c->batch = b;
		c->first = first;
		c->it = it;
		c->pending = r->nrep - 1;
		c->gen++;
		pthread_cond_broadcast(&c->go);
		pthread_mutex_unlock(&c->mu);
	}
	r->rep[0].rc = rep_do(r, &r->rep[0], cmd, b, first, it);
	if (r->nrep > 1) {
		pthread_mutex_lock(&c->mu);
		while (c->pending)
			pthread_cond_wait(&c->done, &c->mu);
		pthread_mutex_unlock(&c->mu);
	}
	for (int i = 0; i < r->nrep; i++)
		if (r->rep[i].rc) {
			*err = r->rep[i].err;
			if (r->nrep > 1) {
				int gpu = !strcmp(backend_name(r->be), "cuda");
				dd_err_prefix(err, gpu ? "GPU %d" : "copy %d", gpu ? r->o->gpus[i] : i);
			}
			return r->rep[i].rc;
		}
	return DD_OK;
}

/* The mean of the copies' gradients, into each, for backends without an
 * all-reduce of their own (the host's: cpu, ref).  Summed in copy order. */
static void average_host(struct run *r)
{
	if (r->nrep == 1 || backend_has_allreduce(r->be))
		return;
	float *g[TRAIN_MAX_REPLICAS];
	for (int i = 0; i < r->nrep; i++) {
		backend_wait(r->rep[i].be);
		g[i] = graph_grads(r->rep[i].tr);
	}
	int64_t n = graph_param_count(r->tr);
	int nrep = r->nrep;
	float inv = 1.0f / (float)nrep;
	for (int64_t k = 0; k < n; k++) {
		float sum = g[0][k];
		for (int i = 1; i < nrep; i++)
			sum += g[i][k];
		sum *= inv;
		for (int i = 0; i < nrep; i++)
			g[i][k] = sum;
	}
}

/* One iteration on every copy: iter_size passes, each over batch × copies images
 * of the feed, then the update.  *loss: the mean loss; *skipped, *scale: FP16's. */
static int iterate(struct run *r, int64_t it, double *loss, int *skipped, float *scale, double *lr,
		   struct dd_err *err)
{
	*loss = 0;
	for (int k = 0; k < r->iter_size; k++) {
		const struct feed_batch *b;
		int rc = feed_take(r->ftr, &b, err);
		if (rc)
			return rc;
		rc = crew_run(r, CREW_PASS, b, k == 0, it, err);
		feed_done(r->ftr);
		if (rc)
			return rc;
		double l = 0;
		for (int i = 0; i < r->nrep; i++)
			l += r->rep[i].loss;
		l /= r->nrep;
		if (!isfinite(l))
			return check_finite(r, l, it + 1, err);
		*loss += l / r->iter_size;
	}
	average_host(r);
	int rc = crew_run(r, CREW_STEP, NULL, 0, it, err);
	if (rc)
		return rc;
	*skipped = r->rep[0].skipped;
	*scale = r->rep[0].scale;
	*lr = r->rep[0].lr;
	return DD_OK;
}

/* Parse, instantiate, build the graphs, feeds and solver. */
static int setup(struct run *r, struct dd_err *err)
{
	const struct train_opts *o = r->o;
	int rc;
	if ((rc = train_dataset_input(o->dataset_dir, &r->in, err)))
		return rc;
	if ((rc = net_parse(o->network_text, strlen(o->network_text), &r->def, err))) {
		dd_err_prefix(err, "%s", r->netname);
		return rc;
	}
	r->in.n = o->batch;
	r->in.crop = o->crop;
	if ((rc = net_instantiate(r->def, NET_STAGE_TRAIN, &r->in, &r->tg, err)) ||
	    (rc = net_instantiate(r->def, NET_STAGE_VAL, &r->in, &r->vg, err))) {
		dd_err_prefix(err, "%s", r->netname);
		return rc;
	}
	if (o->threads > 0)
		omp_set_num_threads(o->threads);
	int prec;
	if ((rc = backend_precision_parse(o->precision, &prec, err)) || (rc = create_backends(r, err)))
		return rc;
	backend_bind(r->be); /* a group's creation may leave this thread on another GPU */
	if ((rc = backend_set_precision(r->be, prec, err)) ||
	    (rc = graph_create(r->tg, r->be, o->seed, &r->tr, err)) ||
	    (rc = graph_create(r->vg, r->be, o->seed, &r->va, err)))
		return rc;
	for (int i = 1; i < r->nrep; i++) { /* the other copies, each on its own device */
		struct replica *p = &r->rep[i];
		backend_bind(p->be);
		if ((rc = backend_set_precision(p->be, prec, err)) ||
		    (rc = graph_create(r->tg, p->be, o->seed, &p->tr, err)))
			return rc;
		p->data = graph_blob(p->tr, "data", NULL);
		p->label = graph_blob(p->tr, "label", NULL);
	}
	backend_bind(r->be);
	r->tb = r->tg->in.n;
	r->vb = r->vg->in.n;

	/* the feeds, with the data layers' transform_param */
	const struct net_node *tdn = data_node(r->tg), *vdn = data_node(r->vg);
	if (!tdn || !vdn)
		return dd_err_set(err, DD_EINVAL, "%s has no Data layer for the train or val stage", r->netname);
	struct feed_opts fo = { .train = 1, .crop = r->tg->in.crop, .mirror = o->mirror ? o->mirror > 0 : tdn->l.data.mirror,
				.scale = tdn->l.data.scale, .mean = o->mean, .mean_value = tdn->l.data.mean_value,
				.nmean_value = tdn->l.data.nmean_value, .seed = o->seed, .prefetch = r->tb * r->nrep,
				.device = r->be /* cuda: 8-bit batches transformed on the GPU */ };
	if ((rc = feed_open(o->dataset_dir, "train", &fo, &r->ftr, err)))
		return rc;
	fo = (struct feed_opts){ .train = 0, .crop = r->vg->in.crop, .scale = vdn->l.data.scale, .mean = o->mean,
				 .mean_value = vdn->l.data.mean_value, .nmean_value = vdn->l.data.nmean_value,
				 .seed = o->seed, .prefetch = r->vb, .device = r->be };
	if ((rc = feed_open(o->dataset_dir, "val", &fo, &r->fva, err)))
		return rc;

	struct net_shape ds;
	r->rep[0] = (struct replica){ .run = r, .i = 0, .be = r->be, .tr = r->tr,
				      .data = graph_blob(r->tr, "data", &ds), .label = graph_blob(r->tr, "label", NULL) };
	r->vdata = graph_blob(r->va, "data", NULL);
	r->vlabel = graph_blob(r->va, "label", NULL);
	if (!r->rep[0].data || !r->vdata)
		return dd_err_set(err, DD_EINVAL, "%s has no \"data\" blob", r->netname);
	feed_shape(r->ftr, &r->fc, &r->fh, &r->fw);
	if (ds.ndim != 4 || ds.dim[1] != r->fc || ds.dim[2] != r->fh || ds.dim[3] != r->fw)
		return dd_err_set(err, DD_EINTERNAL, "the data blob's shape does not match the fed images");
	int nb = r->tb > r->vb ? r->tb : r->vb;
	if (!(r->scratch_labels = malloc((size_t)nb * sizeof(float))))
		return dd_err_set(err, DD_ENOMEM, "out of memory");

	/* accuracy tops of the val graph */
	for (int i = 0; i < r->vg->nnode; i++) {
		const struct net_node *nd = &r->vg->node[i];
		if (nd->l.type != NET_ACCURACY || nd->l.ntop < 1)
			continue;
		const char *top = r->vg->blob[nd->top[0]].name;
		if (nd->l.accuracy.top_k == 1 && !r->acc1)
			r->acc1 = top;
		else if (nd->l.accuracy.top_k == 5 && !r->acc5)
			r->acc5 = top;
	}

	/* iterations: one consumes batch * iter_size images */
	int epochs = o->epochs > 0 ? o->epochs : 30;
	r->iter_size = o->iter_size > 0 ? o->iter_size : 1;
	int64_t ntrain = feed_epoch_size(r->ftr), nval = feed_epoch_size(r->fva);
	int64_t per = (int64_t)r->tb * r->iter_size * r->nrep;
	r->ipe = (ntrain + per - 1) / per;
	r->total = r->ipe * epochs;
	r->vit = (nval + r->vb - 1) / r->vb;
	if (r->total > INT_MAX)
		return dd_err_set(err, DD_EINVAL, "%lld iterations are too many", (long long)r->total);

	/* the solver, DIGITS' way: step positions in percent of all iterations */
	struct solver_config sc = { 0 };
	sc.type = o->solver;
	train_lr_config(o, r->total, &sc);
	sc.momentum = o->momentum >= 0 ? o->momentum : 0.9;
	sc.momentum2 = o->momentum2 > 0 ? o->momentum2 : 0.999;
	sc.delta = o->delta;
	sc.rms_decay = o->rms_decay;
	sc.weight_decay = o->weight_decay;
	sc.iter_size = r->iter_size;
	if ((rc = solver_create(&sc, r->tr, &r->sol, err)))
		return rc;
	r->rep[0].sol = r->sol;
	for (int i = 1; i < r->nrep; i++) {
		backend_bind(r->rep[i].be);
		if ((rc = solver_create(&sc, r->rep[i].tr, &r->rep[i].sol, err)))
			return rc;
	}
	backend_bind(r->be);
	char copies[160] = "";
	if (r->nrep > 1) {
		int cuda = !strcmp(backend_name(r->be), "cuda");
		int n = snprintf(copies, sizeof copies, " on %d %s (", r->nrep, cuda ? "GPUs" : "copies");
		for (int i = 0; i < r->nrep && n < (int)sizeof copies - 8; i++)
			n += snprintf(copies + n, sizeof copies - n, "%s%d", i ? ", " : "", cuda ? o->gpus[i] : i);
		snprintf(copies + n, sizeof copies - n, ")");
	}
	logf_(r->h, "info",
	      "training %s on the %s backend%s: %lld train and %lld val images, batch %d%s%s, %lld iterations per "
	      "epoch, %d epochs, %s lr %g",
	      r->netname, backend_name(r->be), copies, (long long)ntrain, (long long)nval, r->tb,
	      r->nrep > 1 ? " per copy" : "", r->iter_size > 1 ? " (accumulated)" : "", (long long)r->ipe, epochs,
	      solver_type_name(sc.type), sc.base_lr);
	return DD_OK;
}

static void teardown(struct run *r)
{
	crew_stop(r);
	free(r->scratch_labels);
	for (int i = r->nrep - 1; i >= 1; i--) { /* each freed on its own device */
		backend_bind(r->rep[i].be);
		solver_free(r->rep[i].sol);
		graph_free(r->rep[i].tr);
		backend_free(r->rep[i].be);
	}
	backend_bind(r->be);
	solver_free(r->sol);
	feed_close(r->ftr);
	feed_close(r->fva);
	graph_free(r->tr);
	graph_free(r->va);
	net_graph_free(r->tg);
	net_graph_free(r->vg);
	net_free(r->def);
	backend_free(r->be);
}

int train_run(const struct train_opts *o, const struct train_hooks *h, struct dd_err *err)
{
	struct train_result dummy;
	struct run r = { .o = o, .h = h, .res = o->result ? o->result : &dummy };
	struct train_result *res = r.res;
	memset(res, 0, sizeof *res);
	res->val_loss = res->val_accuracy = res->val_accuracy_top5 = NAN;
	res->train_loss = res->first_train_loss = NAN;
	r.netname = o->network_name ? o->network_name : "network";
	if (!o->dataset_dir || !o->network_text || !o->out_dir)
		return dd_err_set(err, DD_EINVAL, "a dataset, a network and an output folder are required");
	int prec; /* a half precision off cuda is refused before anything is read */
	if (backend_precision_parse(o->precision, &prec, err))
		return DD_EINVAL;
	if (prec != BACKEND_FP32 && (!o->backend || strncmp(o->backend, "cuda", 4) != 0))
		return dd_err_set(err, DD_EINVAL, "precision %s needs the cuda backend (this run asks for %s)",
				  backend_precision_name(prec), o->backend ? o->backend : "cpu");
	int rc = setup(&r, err);
	if (rc)
		goto out;

	int64_t it = 0;
	uint64_t rng[TRAIN_MAX_REPLICAS] = { 0 }; /* the copies' dropout streams, from a resume */
	if (o->resume) {
		if ((rc = restore(&r, o->resume, &it, rng, err)))
			goto out;
		logf_(h, "info", "resumed from %s at iteration %lld (epoch %.2f)", o->resume, (long long)it,
		      (double)it / (double)r.ipe);
	} else if (o->finetune) {
		char report[1024];
		if ((rc = snapshot_load_weights(r.tr, o->finetune, 1, report, sizeof report, err)))
			goto out;
		logf_(h, "info", "fine-tuning from %s%s%s", o->finetune, report[0] ? "; " : "", report);
	}
	int rpe = o->reports_per_epoch > 0 ? o->reports_per_epoch : 8;
	int64_t every = r.ipe / rpe > 0 ? r.ipe / rpe : 1;
	int64_t val_every = (int64_t)fmax(1, llround((o->val_interval > 0 ? o->val_interval : 1) * (double)r.ipe));
	int64_t snap_every = (int64_t)fmax(1, llround((o->snapshot_interval > 0 ? o->snapshot_interval : 1) * (double)r.ipe));

	struct solver_config lrc = { 0 }; /* the rate of a skipped step */
	train_lr_config(o, r.total, &lrc);
	double lsum = 0;
	int lcount = 0;
	int64_t t0 = fs_mono_ms(), img_since = 0;
	broadcast(&r, rng);
	/* every GPU makes room for its all-reduce before any waits in one: a copy that
	 * fails there must not leave the others waiting for ever */
	for (int i = 0; i < r.nrep && r.nrep > 1 && backend_has_allreduce(r.be); i++)
		if ((rc = backend_allreduce(r.rep[i].be, NULL, graph_param_count(r.rep[i].tr), err))) {
			dd_err_prefix(err, "GPU %d", o->gpus[i]);
			goto out;
		}
	backend_bind(r.be);
	if ((rc = crew_start(&r, err)))
		goto out;
	for (; it < r.total; it++) {
		double loss = 0, lr = 0;
		int skipped = 0;
		float scale = 1;
		if ((rc = iterate(&r, it, &loss, &skipped, &scale, &lr, err)))
			goto out;
		if (skipped) { /* FP16's gradients overflowed: no update this step, a smaller loss scale */
			logf_(h, "info", "iteration %lld: fp16 gradients overflowed, step skipped, loss scale now %g",
			      (long long)it + 1, (double)scale);
			lr = lr_at(&lrc, (int)it);
		}
		lsum += loss;
		lcount++;
		img_since += (int64_t)r.tb * r.iter_size * r.nrep;
		int64_t done = it + 1;
		int stop = h && h->should_stop && h->should_stop(h->ctx);
		if (done % every == 0 || done % r.ipe == 0 || done == r.total || stop) {
			if ((rc = check_finite(&r, lsum / lcount, done, err)))
				goto out;
			int64_t t1 = fs_mono_ms();
			struct train_metric m = { .kind = "train", .iteration = done,
						  .epoch = (double)done / (double)r.ipe, .lr = lr,
						  .loss = lsum / lcount, .accuracy = NAN, .accuracy_top5 = NAN,
						  .images_per_s = t1 > t0 ? img_since * 1000.0 / (double)(t1 - t0) : 0 };
			if (isnan(res->first_train_loss))
				res->first_train_loss = m.loss;
			res->train_loss = m.loss;
			if (h && h->metric)
				h->metric(h->ctx, &m);
			lsum = 0;
			lcount = 0;
			img_since = 0;
			t0 = fs_mono_ms();
		}
		if (done % val_every == 0 || done == r.total) {
			if ((rc = validate(&r, done, lr, err)))
				goto out;
			t0 = fs_mono_ms();
		}
		if (done % snap_every == 0 || done == r.total || stop) {
			if ((rc = write_snapshot(&r, done, err)))
				goto out;
			t0 = fs_mono_ms();
		}
		if (stop) {
			res->stopped = 1;
			it++;
			break;
		}
	}
	res->iterations = it;
	res->epochs = (double)it / (double)r.ipe;
out:
	teardown(&r);
	return rc;
}
