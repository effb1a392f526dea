/* solver.h — Caffe's solvers over a graph's parameter arena.
 *
 * SGD with momentum, Nesterov, AdaGrad, RMSProp, AdaDelta and Adam, each with
 * Caffe's L2 weight decay, gradient clipping, iter_size normalisation and
 * learning-rate policies.  A solver owns solver_nhistory() history arenas laid out
 * as the graph's parameter arena; it updates only the parameter blobs the graph
 * marks learned (lr_mult > 0, not BatchNorm statistics).
 *
 * One iteration, as Caffe's Solver::Step:
 *     graph_zero_grads(gr);
 *     for (k = 0; k < iter_size; k++) { graph_forward(gr, 1); graph_backward(gr); }
 *     solver_step(s, iter);
 * (graph_backward ADDS into the gradients, so iter_size passes accumulate their
 * sum; solver_step divides it by iter_size.)
 *
 * The update, Caffe's SGDSolver::ApplyUpdate, in this order.  g is a blob's
 * gradient, w its weights, lr = lr_at(iter) * lr_mult, λ = weight_decay * decay_mult,
 * δ = delta, μ = momentum, all element-wise:
 *
 *   1. clip      if clip_gradients > 0 and ‖g‖₂ over all learned blobs > clip:
 *                g ← g · clip / ‖g‖₂          (on the accumulated sum, as Caffe)
 *   2. normalise g ← g / iter_size
 *   3. decay     g ← g + λ w
 *   4. update    (h, h₂: the blob's history; t = iter + 1)
 *      sgd       h ← μ h + lr g;                             w ← w − h
 *      nesterov  h' ← h;  h ← μ h + lr g;                    w ← w − ((1+μ) h − μ h')
 *      adagrad   h ← h + g²;                                 w ← w − lr g / (√h + δ)
 *      rmsprop   h ← ρ h + (1−ρ) g²   (ρ = rms_decay);       w ← w − lr g / (√h + δ)
 *      adadelta  h ← μ h + (1−μ) g²;
 *                u = g · √((h₂ + δ) / (h + δ));
 *                h₂ ← μ h₂ + (1−μ) u²;                       w ← w − lr u
 *      adam      h ← β₁ h + (1−β₁) g;  h₂ ← β₂ h₂ + (1−β₂) g²  (β₁ = momentum, β₂ = momentum2)
 *                w ← w − lr · √(1−β₂ᵗ)/(1−β₁ᵗ) · h / (√h₂ + δ)
 *
 * Caffe refuses momentum with AdaGrad and RMSProp; here momentum is ignored by
 * them.  AdaDelta's rate is usually base_lr 1.0 with momentum 0.95, delta 1e-6.
 * Step 1 to 3 change the gradient arena in place, as Caffe does.
 *
 * Ownership: a solver BORROWS its graph; free the solver first (solver_free). */
#ifndef DD_SOLVER_H
#define DD_SOLVER_H

#include <stdint.h>

#include "../common/err.h"

struct graph;
struct solver;

enum lr_policy { LR_FIXED, LR_STEP, LR_MULTISTEP, LR_EXP, LR_INV, LR_POLY, LR_SIGMOID };
enum solver_type { SOLVER_SGD, SOLVER_ADAM, SOLVER_NESTEROV, SOLVER_ADAGRAD, SOLVER_RMSPROP, SOLVER_ADADELTA };

/* Caffe's names: "fixed", "step", ... and back; DD_EINVAL with a sentence. */
const char *lr_policy_name(enum lr_policy p);
int lr_policy_parse(const char *s, enum lr_policy *out, struct dd_err *err);

/* "sgd", "nesterov", "adagrad", "rmsprop", "adadelta", "adam" (lower case, as the
 * API spells them; "?" for anything else) and back; DD_EINVAL with a sentence. */
const char *solver_type_name(enum solver_type t);
int solver_type_parse(const char *s, enum solver_type *out, struct dd_err *err);

#define SOLVER_MAX_STEPS 32

/* Caffe's SolverParameter, the part deepdesk uses.  A zeroed struct plus a type and
 * base_lr is a valid config: the fields marked "0:" take Caffe's default then. */
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
	double momentum;     /* SGD and Nesterov momentum; AdaDelta's decay; Adam's beta1 (0.9) */
	double momentum2;    /* Adam's beta2 (0.999) */
	double delta;        /* AdaGrad, RMSProp, AdaDelta, Adam's epsilon; 0: 1e-8 */
	double rms_decay;    /* RMSProp's ρ, in (0, 1); 0: 0.99 */
	double weight_decay; /* L2 */
	double clip_gradients; /* > 0: scale all gradients so their L2 norm is at most this */
	int iter_size;       /* forward/backward passes summed per step; 0: 1 */
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
 * (a sentence naming the field), DD_ENOMEM.  The histories start at zero. */
int solver_create(const struct solver_config *c, struct graph *gr, struct solver **out, struct dd_err *err);
/* Accepts NULL. */
void solver_free(struct solver *s);

/* Apply one update from the gradients in the graph's gradient arena (which it
 * changes: clipping, 1/iter_size and decay are applied in place, as Caffe does).
 * iter counts from 0.  Returns the rate used (lr_at(iter)). */
double solver_step(struct solver *s, int iter);

/* How many history arenas the solver keeps: 2 for AdaDelta and Adam, else 1. */
int solver_nhistory(const struct solver *s);
/* History arena which (0 <= which < solver_nhistory(), else NULL), for a solverstate
 * snapshot: (graph_param_count) floats in the parameter arena's layout.  Borrowed,
 * valid until solver_free; writable (a snapshot load fills it).
 *   SGD, Nesterov: 0 the velocity.  AdaGrad: 0 Σg².  RMSProp: 0 the mean of g².
 *   AdaDelta: 0 the mean of g², 1 the mean of squared updates.
 *   Adam: 0 the first moment, 1 the second. */
float *solver_history(struct solver *s, int which);

/* The config in force (defaults filled in) and the graph; borrowed. */
const struct solver_config *solver_config_of(const struct solver *s);
struct graph *solver_graph(const struct solver *s);

#endif
