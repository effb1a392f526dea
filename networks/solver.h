/* solver.h — Caffe's solvers over a graph's parameter arena.
 *
 * SGD with momentum and Adam, each with Caffe's L2 weight decay, and Caffe's
 * learning-rate policies.  A solver owns one history arena (Adam: two) laid out as
 * the graph's parameter arena; it updates only the parameter blobs the graph marks
 * learned (lr_mult > 0, not BatchNorm statistics).
 *
 * One iteration, as Caffe's Solver::Step with iter_size 1:
 *     graph_zero_grads(gr); graph_forward(gr, 1); graph_backward(gr);
 *     solver_step(s, iter);
 *
 * Ownership: a solver BORROWS its graph; free the solver first (solver_free). */
#ifndef DD_SOLVER_H
#define DD_SOLVER_H

#include <stdint.h>

#include "../common/err.h"

struct graph;
struct solver;

enum lr_policy { LR_FIXED, LR_STEP, LR_MULTISTEP, LR_EXP, LR_INV, LR_POLY, LR_SIGMOID };
enum solver_type { SOLVER_SGD, SOLVER_ADAM };

/* Caffe's names: "fixed", "step", ... and back; DD_EINVAL with a sentence. */
const char *lr_policy_name(enum lr_policy p);
int lr_policy_parse(const char *s, enum lr_policy *out, struct dd_err *err);

#define SOLVER_MAX_STEPS 32

/* Caffe's SolverParameter, the part deepdesk uses. */
struct solver_config {
	enum solver_type type;
	double base_lr;
	enum lr_policy policy;
	double gamma;        /* step, multistep, exp, inv, sigmoid */
	double power;        /* inv, poly */
	int stepsize;        /* step; sigmoid's centre */
	int stepvalue[SOLVER_MAX_STEPS]; /* multistep, increasing */
	int nstepvalue;
	int max_iter;        /* poly */
	double momentum;     /* SGD momentum; Adam's beta1 (0.9) */
	double momentum2;    /* Adam's beta2 (0.999) */
	double delta;        /* Adam's epsilon (1e-8) */
	double weight_decay; /* L2 */
	double clip_gradients; /* > 0: scale all gradients so their L2 norm is at most this */
};

/* The learning rate at iteration iter, Caffe's SGDSolver::GetLearningRate:
 *   fixed      base_lr
 *   step       base_lr * gamma^floor(iter / stepsize)
 *   multistep  base_lr * gamma^(number of stepvalues <= iter)
 *   exp        base_lr * gamma^iter
 *   inv        base_lr * (1 + gamma * iter)^-power
 *   poly       base_lr * (1 - iter / max_iter)^power
 *   sigmoid    base_lr / (1 + exp(-gamma * (iter - stepsize))) */
double lr_at(const struct solver_config *c, int iter);

/* DD_OK and *out (caller frees with solver_free), DD_EINVAL for a bad config
 * (a sentence naming the field), DD_ENOMEM. */
int solver_create(const struct solver_config *c, struct graph *gr, struct solver **out, struct dd_err *err);
/* Accepts NULL. */
void solver_free(struct solver *s);

/* Apply one update from the gradients in the graph's gradient arena (which it
 * changes: decay and clipping are added in, as Caffe does).  Returns the rate used. */
double solver_step(struct solver *s, int iter);

/* The history arena(s), for a solverstate snapshot: (graph_param_count) floats each;
 * which 1 is Adam's second moment (NULL for SGD).  Borrowed. */
float *solver_history(struct solver *s, int which);

#endif
