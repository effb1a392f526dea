/* solver.c — Caffe's six solvers and its learning-rate policies (rules: solver.h).
 *
 * Each update loop follows the matching Caffe file (sgd_solver.cpp,
 * nesterov_solver.cpp, adagrad_solver.cpp, rmsprop_solver.cpp, adadelta_solver.cpp,
 * adam_solver.cpp) operation by operation in float, so that a Caffe run and ours
 * round the same way where they can.
 * A backend with a device update (backend_impl.h's update: cuda) runs steps 2 to 4
 * there, one call per blob, the same maths written out in its kernels; the
 * histories then come from the backend's alloc so that its kernels can reach them.
 * Clipping reads the gradients on the host in either case.
 *
 * Invariant: hist[0 .. solver_nhistory()) each hold graph_param_count + 1 floats in
 * the parameter arena's layout (the + 1 keeps an empty graph's calloc non-NULL);
 * be is the backend that allocated them, or NULL for calloc. */
#include "solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "graph.h"

struct solver {
	struct solver_config c;
	struct graph *gr;
	float *hist[2]; /* (graph_param_count) each; [1] only for AdaDelta and Adam */
	struct backend *be; /* the graph's, when it updates on its device; else NULL */
};

static const char *const type_names[] = { "sgd", "adam", "nesterov", "adagrad", "rmsprop", "adadelta" };

const char *solver_type_name(enum solver_type t)
{
	return (unsigned)t < sizeof type_names / sizeof *type_names ? type_names[t] : "?";
}

int solver_type_parse(const char *s, enum solver_type *out, struct dd_err *err)
{
	for (unsigned i = 0; i < sizeof type_names / sizeof *type_names; i++)
		if (s && !strcmp(s, type_names[i])) {
			*out = (enum solver_type)i;
			return DD_OK;
		}
	return dd_err_set(err, DD_EINVAL,
			  "unknown solver '%s': use sgd, nesterov, adagrad, rmsprop, adadelta or adam", s ? s : "");
}

static int nhistory(enum solver_type t)
{
	return t == SOLVER_ADAM || t == SOLVER_ADADELTA ? 2 : 1;
}

static const char *const policy_names[] = { "fixed", "step", "multistep", "exp", "inv", "poly", "sigmoid" };

const char *lr_policy_name(enum lr_policy p)
{
	return (unsigned)p < sizeof policy_names / sizeof *policy_names ? policy_names[p] : "?";
}

int lr_policy_parse(const char *s, enum lr_policy *out, struct dd_err *err)
{
	for (unsigned i = 0; i < sizeof policy_names / sizeof *policy_names; i++)
		if (s && !strcmp(s, policy_names[i])) {
			*out = (enum lr_policy)i;
			return DD_OK;
		}
	return dd_err_set(err, DD_EINVAL,
			  "unknown learning rate policy '%s': use fixed, step, multistep, exp, inv, poly or sigmoid",
			  s ? s : "");
}

double lr_at(const struct solver_config *c, int iter)
{
	double lr = c->base_lr;
	switch (c->policy) {
	case LR_FIXED:
		return lr;
	case LR_STEP:
		return lr * pow(c->gamma, floor((double)iter / (c->stepsize > 0 ? c->stepsize : 1)));
	case LR_MULTISTEP: {
		int k = 0;
		while (k < c->nstepvalue && iter >= c->stepvalue[k])
			k++;
		return lr * pow(c->gamma, k);
	}
	case LR_EXP:
		return lr * pow(c->gamma, iter);
	case LR_INV:
		return lr * pow(1.0 + c->gamma * iter, -c->power);
	case LR_POLY:
		if (c->max_iter <= 0)
			return lr;
		return lr * pow(1.0 - (double)iter / c->max_iter, c->power);
	case LR_SIGMOID:
		return lr * (1.0 / (1.0 + exp(-c->gamma * (iter - c->stepsize))));
	}
	return lr;
}

int solver_create(const struct solver_config *c, struct graph *gr, struct solver **out, struct dd_err *err)
{
	*out = NULL;
	if (!(c->base_lr >= 0))
		return dd_err_set(err, DD_EINVAL, "base_lr %g must be 0 or more", c->base_lr);
	if (c->policy == LR_STEP && c->stepsize <= 0)
		return dd_err_set(err, DD_EINVAL, "the step policy needs a stepsize of 1 or more");
	if (c->policy == LR_POLY && c->max_iter <= 0)
		return dd_err_set(err, DD_EINVAL, "the poly policy needs max_iter of 1 or more");
	if (c->nstepvalue < 0 || c->nstepvalue > SOLVER_MAX_STEPS)
		return dd_err_set(err, DD_EINVAL, "%d stepvalues: at most %d", c->nstepvalue, SOLVER_MAX_STEPS);
	for (int i = 1; i < c->nstepvalue; i++)
		if (c->stepvalue[i] <= c->stepvalue[i - 1])
			return dd_err_set(err, DD_EINVAL, "stepvalue %d (%d) must exceed the one before (%d)", i + 1,
					  c->stepvalue[i], c->stepvalue[i - 1]);
	if ((unsigned)c->type >= sizeof type_names / sizeof *type_names)
		return dd_err_set(err, DD_EINVAL, "unknown solver type %d", (int)c->type);
	if (!(c->momentum >= 0 && c->momentum < 1))
		return dd_err_set(err, DD_EINVAL, "momentum %g must be in [0, 1)", c->momentum);
	if (c->type == SOLVER_ADAM && !(c->momentum2 >= 0 && c->momentum2 < 1))
		return dd_err_set(err, DD_EINVAL, "momentum2 %g must be in [0, 1)", c->momentum2);
	if (!(c->delta >= 0))
		return dd_err_set(err, DD_EINVAL, "delta %g must be 0 (the default 1e-8) or more", c->delta);
	if (!(c->rms_decay >= 0 && c->rms_decay < 1))
		return dd_err_set(err, DD_EINVAL, "rms_decay %g must be in (0, 1) (0: the default 0.99)", c->rms_decay);
	if (c->iter_size < 0)
		return dd_err_set(err, DD_EINVAL, "iter_size %d must be 1 or more (0: 1)", c->iter_size);
	if (!(c->weight_decay >= 0))
		return dd_err_set(err, DD_EINVAL, "weight_decay %g must be 0 or more", c->weight_decay);

	struct solver *s = calloc(1, sizeof *s);
	if (!s)
		return dd_err_set(err, DD_ENOMEM, "out of memory for the solver");
	s->c = *c;
	if (s->c.delta == 0)
		s->c.delta = 1e-8;
	if (s->c.rms_decay == 0)
		s->c.rms_decay = 0.99;
	if (s->c.iter_size == 0)
		s->c.iter_size = 1;
	s->gr = gr;
	size_t n = (size_t)graph_param_count(gr) + 1;
	struct backend *be = graph_backend(gr);
	if (be && backend_has_update(be))
		s->be = be;
	for (int i = 0; i < nhistory(c->type); i++)
		if (!(s->hist[i] = s->be ? backend_alloc(s->be, n * sizeof(float)) : calloc(n, sizeof(float))))
			goto fail;
	*out = s;
	return DD_OK;
fail:
	solver_free(s);
	return dd_err_set(err, DD_ENOMEM, "out of memory for the solver's history (%zu values)", n);
}

void solver_free(struct solver *s)
{
	if (!s)
		return;
	for (int i = 1; i >= 0; i--)
		if (s->hist[i]) {
			if (s->be)
				backend_release(s->be, s->hist[i]);
			else
				free(s->hist[i]);
		}
	free(s);
}

int solver_nhistory(const struct solver *s)
{
	return nhistory(s->c.type);
}

float *solver_history(struct solver *s, int which)
{
	return which >= 0 && which < nhistory(s->c.type) ? s->hist[which] : NULL;
}

const struct solver_config *solver_config_of(const struct solver *s)
{
	return &s->c;
}

struct graph *solver_graph(const struct solver *s)
{
	return s->gr;
}

/* One blob's update (step 4 of solver.h) from its decayed gradient g, which it may
 * overwrite.  h, h2: the blob's slices of the histories (h2 NULL unless two). */
static void update_blob(const struct solver_config *c, float *w, float *g, float *h, float *h2, int64_t n,
			float lr, double adam_correction)
{
	float mom = (float)c->momentum, delta = (float)c->delta;
	switch (c->type) {
	case SOLVER_SGD:
		for (int64_t j = 0; j < n; j++) {
			h[j] = mom * h[j] + lr * g[j];
			w[j] -= h[j];
		}
		break;
	case SOLVER_NESTEROV: /* step back from the old velocity, over-step with the new */
		for (int64_t j = 0; j < n; j++) {
			float prev = h[j];
			h[j] = mom * h[j] + lr * g[j];
			w[j] -= (1 + mom) * h[j] - mom * prev;
		}
		break;
	case SOLVER_ADAGRAD:
		for (int64_t j = 0; j < n; j++) {
			h[j] += g[j] * g[j];
			w[j] -= lr * (g[j] / (sqrtf(h[j]) + delta));
		}
		break;
	case SOLVER_RMSPROP: {
		float rho = (float)c->rms_decay;
		for (int64_t j = 0; j < n; j++) {
			h[j] = (1 - rho) * (g[j] * g[j]) + rho * h[j];
			w[j] -= lr * (g[j] / (sqrtf(h[j]) + delta));
		}
		break;
	}
	case SOLVER_ADADELTA:
		for (int64_t j = 0; j < n; j++) {
			h[j] = (1 - mom) * (g[j] * g[j]) + mom * h[j];
			float u = g[j] * sqrtf((h2[j] + delta) / (h[j] + delta));
			h2[j] = (1 - mom) * (u * u) + mom * h2[j];
			w[j] -= lr * u;
		}
		break;
	case SOLVER_ADAM: {
		float b1 = (float)c->momentum, b2 = (float)c->momentum2;
		float step = (float)(lr * adam_correction);
		for (int64_t j = 0; j < n; j++) {
			h[j] = b1 * h[j] + (1 - b1) * g[j];
			h2[j] = b2 * h2[j] + (1 - b2) * (g[j] * g[j]);
			w[j] -= step * (h[j] / (sqrtf(h2[j]) + delta));
		}
		break;
	}
	}
}

double solver_step(struct solver *s, int iter)
{
	const struct solver_config *c = &s->c;
	double rate = lr_at(c, iter);
	struct graph *gr = s->gr;
	float *base = graph_params(gr);
	int np = graph_nparam(gr);

	if (c->clip_gradients > 0) { /* Caffe's ClipGradients: over the learned blobs, before Normalize */
		if (s->be)
			backend_sync(s->be);
		double sq = 0;
		for (int i = 0; i < np; i++) {
			const struct graph_param *p = graph_param(gr, i);
			if (p->learned)
				for (int64_t j = 0; j < p->count; j++)
					sq += (double)p->dw[j] * p->dw[j];
		}
		double norm = sqrt(sq);
		if (norm > c->clip_gradients) {
			float f = (float)(c->clip_gradients / norm);
			for (int i = 0; i < np; i++) {
				const struct graph_param *p = graph_param(gr, i);
				if (p->learned)
					for (int64_t j = 0; j < p->count; j++)
						p->dw[j] *= f;
			}
		}
	}

	double correction = 1;
	if (c->type == SOLVER_ADAM) {
		double t = iter + 1.0;
		correction = sqrt(1.0 - pow(c->momentum2, t)) / (1.0 - pow(c->momentum, t));
	}
	float norm = c->iter_size > 1 ? 1.0f / (float)c->iter_size : 1.0f;
	for (int i = 0; i < np; i++) {
		const struct graph_param *p = graph_param(gr, i);
		if (!p->learned)
			continue;
		float *w = p->w, *g = p->dw;
		int64_t off = w - base;
		if (s->be) {
			struct backend_update u = {
				.type = (int)c->type, .w = w, .g = g, .h = s->hist[0] + off,
				.h2 = s->hist[1] ? s->hist[1] + off : NULL, .n = p->count,
				.lr = (float)(rate * p->lr_mult), .momentum = (float)c->momentum,
				.momentum2 = (float)c->momentum2, .delta = (float)c->delta,
				.rms_decay = (float)c->rms_decay, .decay = (float)(c->weight_decay * p->decay_mult),
				.norm = norm, .adam_step = (float)((double)(float)(rate * p->lr_mult) * correction)
			};
			if (backend_update(s->be, &u, NULL) == DD_OK)
				continue;
			backend_sync(s->be); /* the device refused: the host does this blob */
		}
		if (norm != 1.0f) /* Caffe's Normalize */
			for (int64_t j = 0; j < p->count; j++)
				g[j] *= norm;
		float decay = (float)(c->weight_decay * p->decay_mult);
		if (decay != 0) /* Caffe's Regularize, L2 */
			for (int64_t j = 0; j < p->count; j++)
				g[j] += decay * w[j];
		update_blob(c, w, g, s->hist[0] + off, s->hist[1] ? s->hist[1] + off : NULL, p->count,
			    (float)(rate * p->lr_mult), correction);
	}
	if (s->be)
		backend_sync(s->be);
	return rate;
}
