/* train.c — see train.h. */
#define _GNU_SOURCE
#include "train.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "backend.h"
#include "graph.h"
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

static void logf_(const struct train_hooks *h, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void logf_(const struct train_hooks *h, const char *level, const char *fmt, ...)
{
	if (!h || !h->log)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	h->log(h->ctx, level, buf);
}

/* Image shape and class count from DIR/dataset.json. */
static int read_dataset_json(const char *dir, struct net_input *in, struct dd_err *err)
{
	char path[PATH_MAX], *buf = NULL;
	size_t len;
	snprintf(path, sizeof path, "%s/dataset.json", dir);
	int rc = fs_read_file(path, 64u << 20, &buf, &len, err);
	if (rc)
		return rc == DD_ENOENT ? dd_err_set(err, DD_ENOENT, "%s: no such dataset (no dataset.json)", dir) : rc;
	cJSON *j = cJSON_Parse(buf);
	free(buf);
	if (!j)
		return dd_err_set(err, DD_EINVAL, "%s is not valid JSON", path);
	const cJSON *opt = cJSON_GetObjectItemCaseSensitive(j, "options");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(opt, "width");
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(opt, "height");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(opt, "channels");
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(j, "labels");
	if (!cJSON_IsNumber(w) || !cJSON_IsNumber(h) || !cJSON_IsNumber(c) || !cJSON_IsArray(labels))
		rc = dd_err_set(err, DD_EINVAL, "%s lacks options.width/height/channels or labels", path);
	else {
		in->w = w->valueint;
		in->h = h->valueint;
		in->c = c->valueint;
		in->classes = cJSON_GetArraySize(labels);
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

int train_write_safetensors(struct graph *gr, const char *path, const char *const *metadata,
			    struct dd_err *err)
{
	return snapshot_save_weights(gr, path, metadata, err);
}

static const struct net_node *data_node(const struct net_graph *g)
{
	for (int i = 0; i < g->nnode; i++)
		if (g->node[i].l.type == NET_DATA)
			return &g->node[i];
	return NULL;
}

int train_run(const struct train_opts *o, const struct train_hooks *h, struct dd_err *err)
{
	struct net *def = NULL;
	struct net_graph *tg = NULL, *vg = NULL;
	struct graph *tr = NULL, *va = NULL;
	struct solver *sol = NULL;
	struct backend *be = NULL;
	struct feed *ftr = NULL, *fva = NULL;
	float *vlab = NULL;
	struct train_result dummy, *res = o->result ? o->result : &dummy;
	memset(res, 0, sizeof *res);
	res->val_loss = res->val_accuracy = res->val_accuracy_top5 = NAN;
	res->train_loss = res->first_train_loss = NAN;
	const char *netname = o->network_name ? o->network_name : "network";
	int rc;

	if (!o->dataset_dir || !o->network_text || !o->out_dir)
		return dd_err_set(err, DD_EINVAL, "a dataset, a network and an output folder are required");
	struct net_input in = { 0 };
	if ((rc = read_dataset_json(o->dataset_dir, &in, err)))
		return rc;
	if ((rc = net_parse(o->network_text, strlen(o->network_text), &def, err))) {
		dd_err_prefix(err, "%s", netname);
		return rc;
	}
	in.n = o->batch;
	in.crop = o->crop;
	if ((rc = net_instantiate(def, NET_STAGE_TRAIN, &in, &tg, err)) ||
	    (rc = net_instantiate(def, NET_STAGE_VAL, &in, &vg, err))) {
		dd_err_prefix(err, "%s", netname);
		goto out;
	}
	if ((rc = backend_create(o->backend, &be, err)))
		goto out;
	if ((rc = graph_create(tg, be, o->seed, &tr, err)) || (rc = graph_create(vg, be, o->seed, &va, err)))
		goto out;

	/* the feeds, with the data layers' transform_param */
	const struct net_node *tdn = data_node(tg), *vdn = data_node(vg);
	if (!tdn || !vdn) {
		rc = dd_err_set(err, DD_EINVAL, "%s has no Data layer for the train or val stage", netname);
		goto out;
	}
	struct feed_opts fo = { .train = 1, .crop = tg->in.crop, .mirror = tdn->l.data.mirror,
				.scale = tdn->l.data.scale, .mean = o->mean,
				.mean_value = tdn->l.data.mean_value, .nmean_value = tdn->l.data.nmean_value,
				.seed = o->seed };
	if ((rc = feed_open(o->dataset_dir, "train", &fo, &ftr, err)))
		goto out;
	fo.train = 0;
	fo.crop = vg->in.crop;
	fo.mirror = 0;
	fo.scale = vdn->l.data.scale;
	fo.mean_value = vdn->l.data.mean_value;
	fo.nmean_value = vdn->l.data.nmean_value;
	if ((rc = feed_open(o->dataset_dir, "val", &fo, &fva, err)))
		goto out;

	struct net_shape ds, ls;
	float *tdata = graph_blob(tr, "data", &ds), *tlabel = graph_blob(tr, "label", &ls);
	float *vdata = graph_blob(va, "data", NULL), *vlabel = graph_blob(va, "label", NULL);
	if (!tdata || !vdata) {
		rc = dd_err_set(err, DD_EINVAL, "%s has no \"data\" blob", netname);
		goto out;
	}
	int fc, fh, fw;
	feed_shape(ftr, &fc, &fh, &fw);
	if (ds.ndim != 4 || ds.dim[1] != fc || ds.dim[2] != fh || ds.dim[3] != fw) {
		rc = dd_err_set(err, DD_EINTERNAL, "the data blob's shape does not match the fed images");
		goto out;
	}
	int tb = tg->in.n, vb = vg->in.n;

	/* accuracy tops of the val graph */
	const char *acc1 = NULL, *acc5 = NULL;
	for (int i = 0; i < vg->nnode; i++) {
		const struct net_node *nd = &vg->node[i];
		if (nd->l.type != NET_ACCURACY || nd->l.ntop < 1)
			continue;
		const char *top = vg->blob[nd->top[0]].name;
		if (nd->l.accuracy.top_k == 1 && !acc1)
			acc1 = top;
		else if (nd->l.accuracy.top_k == 5 && !acc5)
			acc5 = top;
	}

	int epochs = o->epochs > 0 ? o->epochs : 30;
	int64_t ntrain = feed_epoch_size(ftr), nval = feed_epoch_size(fva);
	int64_t ipe = (ntrain + tb - 1) / tb, total = ipe * epochs;
	int64_t vit = (nval + vb - 1) / vb;
	struct solver_config sc = { 0 };
	sc.type = o->solver;
	sc.base_lr = o->base_lr > 0 ? o->base_lr : 0.01;
	sc.policy = o->policy;
	sc.gamma = o->gamma > 0 ? o->gamma : 0.1;
	double sp = o->step_pct > 0 ? o->step_pct : 33;
	sc.stepsize = (int)fmax(1, llround((double)total * sp / 100.0));
	sc.power = 1;
	sc.max_iter = (int)total;
	sc.momentum = o->momentum >= 0 ? o->momentum : 0.9;
	sc.momentum2 = 0.999;
	sc.delta = 1e-8;
	sc.weight_decay = o->weight_decay;
	if ((rc = solver_create(&sc, tr, &sol, err)))
		goto out;
	int rpe = o->reports_per_epoch > 0 ? o->reports_per_epoch : 8;
	int64_t every = ipe / rpe > 0 ? ipe / rpe : 1;
	vlab = malloc((size_t)vb * sizeof(float));
	if (!vlab) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	logf_(h, "info", "training %s: %lld train and %lld val images, batch %d, %lld iterations per epoch, %d epochs",
	      netname, (long long)ntrain, (long long)nval, tb, (long long)ipe, epochs);

	double lsum = 0;
	int lcount = 0;
	int64_t t0 = fs_mono_ms(), img_since = 0;
	int64_t it = 0;
	for (; it < total; it++) {
		if ((rc = feed_next(ftr, tdata, tlabel ? tlabel : vlab, tb, err)))
			goto out;
		graph_zero_grads(tr);
		float loss;
		if ((rc = graph_forward(tr, 1, &loss, err)))
			goto out;
		if (!isfinite(loss)) {
			rc = dd_err_set(err, DD_EINVAL, "the loss became NaN at epoch %.2f; try a lower learning rate",
					(double)(it + 1) / (double)ipe);
			goto out;
		}
		if ((rc = graph_backward(tr, err)))
			goto out;
		double lr = solver_step(sol, (int)it);
		lsum += loss;
		lcount++;
		img_since += tb;
		int64_t done = it + 1;
		int stop = h && h->should_stop && h->should_stop(h->ctx);
		if (done % every == 0 || done % ipe == 0 || done == total || stop) {
			/* Caffe's softmax loss clamps probabilities, so diverged (inf/NaN)
			 * weights can hide behind a finite loss: check the weights too. */
			const float *pw = graph_params(tr);
			int64_t np = graph_param_count(tr);
			for (int64_t k = 0; k < np; k++)
				if (!isfinite(pw[k])) {
					rc = dd_err_set(err, DD_EINVAL,
							"the loss became NaN at epoch %.2f; try a lower learning rate",
							(double)done / (double)ipe);
					goto out;
				}
			int64_t t1 = fs_mono_ms();
			struct train_metric m = { .kind = "train", .iteration = done,
						  .epoch = (double)done / (double)ipe, .lr = lr,
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
		if (done % ipe == 0 || done == total) {
			/* validation */
			if ((rc = copy_params(va, tr, err)))
				goto out;
			feed_rewind(fva);
			double vl = 0, a1 = 0, a5 = 0;
			for (int64_t k = 0; k < vit; k++) {
				if ((rc = feed_next(fva, vdata, vlabel ? vlabel : vlab, vb, err)))
					goto out;
				float l;
				if ((rc = graph_forward(va, 0, &l, err)))
					goto out;
				vl += l;
				if (acc1)
					a1 += graph_value(va, acc1);
				if (acc5)
					a5 += graph_value(va, acc5);
			}
			struct train_metric m = { .kind = "val", .iteration = done,
						  .epoch = (double)done / (double)ipe, .lr = lr,
						  .loss = vl / vit, .accuracy = acc1 ? a1 / vit : NAN,
						  .accuracy_top5 = acc5 ? a5 / vit : NAN };
			res->val_loss = m.loss;
			res->val_accuracy = m.accuracy;
			res->val_accuracy_top5 = m.accuracy_top5;
			if (h && h->metric)
				h->metric(h->ctx, &m);
			t0 = fs_mono_ms();
		}
		if (stop) {
			res->stopped = 1;
			it++;
			break;
		}
	}
	res->iterations = it;
	res->epochs = (double)it / (double)ipe;

	/* snapshot */
	if ((rc = fs_mkdir_p(o->out_dir, err)))
		goto out;
	int ep = (int)((it + ipe - 1) / ipe);
	snprintf(res->snapshot, sizeof res->snapshot, "%s/snapshot_epoch_%d.safetensors", o->out_dir, ep);
	char s_ep[32], s_it[32], s_cls[32], s_shape[64];
	snprintf(s_ep, sizeof s_ep, "%d", ep);
	snprintf(s_it, sizeof s_it, "%lld", (long long)it);
	snprintf(s_cls, sizeof s_cls, "%d", in.classes);
	snprintf(s_shape, sizeof s_shape, "%dx%dx%d", fc, fh, fw);
	const char *meta[] = { "format", "deepdesk", "network", netname, "epoch", s_ep,
			       "iteration", s_it, "classes", s_cls, "input", s_shape, NULL };
	if ((rc = train_write_safetensors(tr, res->snapshot, meta, err))) {
		res->snapshot[0] = 0;
		goto out;
	}
	logf_(h, "info", "snapshot %s", res->snapshot);
out:
	free(vlab);
	solver_free(sol);
	feed_close(ftr);
	feed_close(fva);
	graph_free(tr);
	graph_free(va);
	net_graph_free(tg);
	net_graph_free(vg);
	net_free(def);
	backend_free(be);
	return rc;
}
