/* solver.c — Caffe's SGD and Adam updates and learning-rate policies.
 *
 * Caffe's order for one update (SGDSolver::ApplyUpdate): clip the gradients,
 * then per learned parameter blob add the L2 decay (diff += weight_decay *
 * decay_mult * w), then compute the update into the history and subtract it:
 *   SGD   v = momentum * v + lr * lr_mult * diff;       w -= v
 *   Adam  m = b1*m + (1-b1)*diff;  v = b2*v + (1-b2)*diff²;
 *         w -= lr * lr_mult * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps), t = iter+1
 * Invariant: hist[0] (and hist[1] for Adam) have the parameter arena's layout. */
#include "solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

struct solver {
	struct solver_config c;
	struct graph *gr;
	float *hist[2]; /* (graph_param_count) each; [1] only for Adam */
};

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
	if (c->momentum < 0 || c->momentum >= 1 || (c->type == SOLVER_ADAM && (c->momentum2 < 0 || c->momentum2 >= 1)))
		return dd_err_set(err, DD_EINVAL, "momentum must be in [0, 1)");

	struct solver *s = calloc(1, sizeof *s);
	if (!s)
		return dd_err_set(err, DD_ENOMEM, "out of memory for the solver");
	s->c = *c;
	if (s->c.type == SOLVER_ADAM && s->c.delta <= 0)
		s->c.delta = 1e-8;
	s->gr = gr;
	size_t n = (size_t)graph_param_count(gr) + 1;
	s->hist[0] = calloc(n, sizeof(float));
	if (!s->hist[0])
		goto fail;
	if (c->type == SOLVER_ADAM && !(s->hist[1] = calloc(n, sizeof(float))))
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
	free(s->hist[1]);
	free(s->hist[0]);
	free(s);
}

float *solver_history(struct solver *s, int which)
{
	return which == 0 || which == 1 ? s->hist[which] : NULL;
}

double solver_step(struct solver *s, int iter)
{
	const struct solver_config *c = &s->c;
	double rate = lr_at(c, iter);
	struct graph *gr = s->gr;
	float *base = graph_params(gr);
	int np = graph_nparam(gr);

	if (c->clip_gradients > 0) { /* Caffe's ClipGradients: over the learned blobs */
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
	for (int i = 0; i < np; i++) {
		const struct graph_param *p = graph_param(gr, i);
		if (!p->learned)
			continue;
		float *w = p->w, *g = p->dw;
		int64_t off = w - base;
		float decay = (float)(c->weight_decay * p->decay_mult);
		float lr = (float)(rate * p->lr_mult);
		if (decay != 0)
			for (int64_t j = 0; j < p->count; j++)
				g[j] += decay * w[j];
		if (c->type == SOLVER_SGD) {
			float *v = s->hist[0] + off;
			float mom = (float)c->momentum;
			for (int64_t j = 0; j < p->count; j++) {
				v[j] = mom * v[j] + lr * g[j];
				w[j] -= v[j];
			}
		} else {
			float *m = s->hist[0] + off, *v = s->hist[1] + off;
			float b1 = (float)c->momentum, b2 = (float)c->momentum2, eps = (float)c->delta;
			float step = (float)(lr * correction);
			for (int64_t j = 0; j < p->count; j++) {
				m[j] = b1 * m[j] + (1 - b1) * g[j];
				v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j];
				w[j] -= step * m[j] / (sqrtf(v[j]) + eps);
			}
		}
	}
	return rate;
}
