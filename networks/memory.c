/* memory.c — see memory.h.  The terms follow networks/train.c's setup():
 *
 *   train_run builds a train graph (per copy) and a val graph on one backend; each
 *   graph_create makes the five arenas of graph.c (weights, their gradients,
 *   activations, their gradients, saved values), the val graph its own weights
 *   (train copies them in before each validation) and a gradient arena it never
 *   uses; the backend keeps per-layer state; solver_create keeps 1 history arena
 *   (SGD, Nesterov, AdaGrad, RMSProp) or 2 (Adam, AdaDelta) per copy; each feed
 *   prefetches two batches of float images. */
#include "memory.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "graph.h"

#define MIB (1024 * 1024LL)

/* The backend's state of one layer between its forward and backward, bytes: the
 * reference kernels' (backend_ref.c's ref_layer_init), which oneDNN's workspaces
 * match in size (a pooling argmax, LRN's scale). */
static int64_t layer_state(const struct net_graph *g, const struct net_node *nd)
{
	const struct net_layer *l = &nd->l;
	int64_t top = l->ntop ? g->blob[nd->top[0]].count : 0;
	int64_t in = l->nbottom ? g->blob[nd->bottom[0]].count : 0;
	const struct net_shape *s = l->nbottom ? &g->blob[nd->bottom[0]].shape : NULL;
	switch (l->type) {
	case NET_POOLING: return l->pool.pool == NET_POOL_MAX ? 4 * top : 0;
	case NET_ELTWISE: return l->eltwise.op == NET_ELTWISE_MAX ? 4 * top : 0;
	case NET_DROPOUT: return top;
	case NET_LRN: return 4 * top;
	case NET_BATCH_NORM: return s && s->ndim > 1 ? 2 * 4 * s->dim[1] : 0;
	case NET_SOFTMAX_LOSS: return 4 * in;
	case NET_EUCLIDEAN_LOSS: return 4 * in; /* a − b */
	default: return 0;
	}
}

/* The cpu backend's two shared temporaries, bytes (approximation; backend_cpu.c):
 * the gradient tmp, sized to the largest layer's input + weights + bias (oneDNN's
 * backward writes there before the sum is added), and the stage arena for the
 * convolutions it runs in blocked layouts (input, weights and output reordered;
 * every deconvolution), sized to the largest. */
static int64_t cpu_workspace(const struct net_graph *g)
{
	int64_t tmp = 0, stage = 0;
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		int64_t in = nd->l.nbottom ? g->blob[nd->bottom[0]].count : 0;
		int64_t out = nd->l.ntop ? g->blob[nd->top[0]].count : 0;
		if (in + nd->nparams > tmp)
			tmp = in + nd->nparams;
		if ((nd->l.type == NET_CONVOLUTION || nd->l.type == NET_DECONVOLUTION) && nd->l.nbottom) {
			const struct net_shape *s = &g->blob[nd->bottom[0]].shape;
			int grp = nd->l.conv.group > 0 ? nd->l.conv.group : 1;
			int64_t cin = s->ndim > 1 ? s->dim[1] / grp : 1, cout = nd->l.conv.num_output / grp;
			int blocked = nd->l.type == NET_DECONVOLUTION || cin < 16 || (cin % 16 == 0 && cout % 16 == 0);
			if (blocked && in + nd->nparams + out > stage)
				stage = in + nd->nparams + out;
		}
	}
	return 4 * (tmp + stage);
}

/* One graph's arenas and layer state into m (times copies). */
static int add_graph(const struct net_graph *g, int64_t copies, struct net_memory *m)
{
	struct graph_bytes b;
	if (graph_bytes_plan(g, &b))
		return DD_ENOMEM;
	int64_t st = 0;
	for (int k = 0; k < g->nnode; k++)
		st += layer_state(g, &g->node[k]);
	m->params += copies * b.params;
	m->grads += copies * b.grads;
	m->activations += copies * b.acts;
	m->act_grads += copies * b.dacts;
	m->saved += copies * b.saved;
	m->layer_state += copies * st;
	return DD_OK;
}

/* Two prefetched batches of (n, C, H, W) floats, and the one image it decodes into. */
static int64_t feed_bytes(const struct net_graph *g, int n)
{
	const struct net_shape *s = g->nblob ? &g->blob[0].shape : NULL;
	for (int b = 0; b < g->nblob; b++)
		if (!strcmp(g->blob[b].name, "data"))
			s = &g->blob[b].shape;
	if (!s || s->ndim != 4)
		return 0;
	int64_t img = s->dim[1] * s->dim[2] * s->dim[3];
	return 4 * (2 * (int64_t)n * img + img);
}

/* The estimate (bytes), term by term:
 *
 *   params      = 4 · P · (R + 1)           P parameter elements, R train copies, + the val graph
 *   grads       = the same
 *   history     = 4 · P · R · h             h = 2 for Adam and AdaDelta, else 1
 *   activations = 4 · (R · A_train + A_val)  A: elements of every blob at its stage's batch
 *   act_grads   = the same
 *   saved       = graph.c's scratch arenas (graph_bytes_plan), per graph
 *   layer_state = Σ layers: MAX pooling 4·top, Dropout 1·top, LRN 4·top,
 *                 SoftmaxWithLoss 4·bottom, BatchNorm 8·C (per graph)
 *   workspace   cpu: 4 · (max over layers of (bottom + params)
 *                      + max over blocked convolutions of (bottom + params + top));
 *               ref: 0 (its kernels loop in place); an approximation of oneDNN's
 *               own scratchpads, which it sizes per primitive and does not report
 *   feed        = 4 · (2 · batch · R · C·H·W + 2 · batch_val · C·H·W)
 *   snapshot    = 4 · P · max(1, h)          a resume reads the weights file whole, then the
 *                                            solver state (snapshot.c's st_open), one at a time
 *   runtime     = 56 MiB on the CPU (the binary, oneDNN, two threads' stacks,
 *                 malloc's arenas: a LeNet training's peak VmData less the rest);
 *                 cuda: 640 MiB of host memory for the CUDA context
 *
 * Measured with `deepdesk train --threads 2` on this project's 2-core machine (peak
 * of /proc/PID/status sampled every 20 ms), estimate vs real:
 *   LeNet, batch 64:        95 MiB vs VmData 93 MiB, peak RSS 62 MiB (the val graph's
 *                           gradient arenas are never touched, so never resident)
 *   AlexNet, batch 32:      2544 MiB vs VmData 2516 MiB, peak RSS 2458 MiB
 *   ResNet-20, batch 128:   1458 MiB vs VmData 1459 MiB, peak RSS 1428 MiB
 * (a worker through the server the same: AlexNet 2521 / 2460), so the total is
 * within 10% of what RLIMIT_DATA counts, and a worker's limit gets a
 * margin over it (jobs/kind_train_memory.c).  Each further thread adds its stack
 * (8 MiB of address space) to VmData. */
int net_memory_estimate(const struct net_graph *train, const struct net_graph *val, enum solver_type solver,
			const char *backend, int replicas, struct net_memory *m)
{
	memset(m, 0, sizeof *m);
	int64_t r = replicas > 1 ? replicas : 1;
	int cuda = backend && !strncmp(backend, "cuda", 4);
	int ref = backend && !strcmp(backend, "ref");
	m->batch = train->in.n;
	m->replicas = (int)r;
	m->device = cuda;
	if (add_graph(train, r, m) || (val && add_graph(val, 1, m)))
		return DD_ENOMEM;
	int nhist = solver == SOLVER_ADAM || solver == SOLVER_ADADELTA ? 2 : 1;
	m->history = (int64_t)nhist * r * 4 * train->params;
	if (!cuda && !ref) {
		int64_t ws = cpu_workspace(train), wv = val ? cpu_workspace(val) : 0;
		m->workspace = ws > wv ? ws : wv;
	}
	m->feed = feed_bytes(train, train->in.n * (int)r) + (val ? feed_bytes(val, val->in.n) : 0);
	m->snapshot = 4 * train->params > m->history / r ? 4 * train->params : m->history / r;
	m->runtime = cuda ? 640 * MIB : 56 * MIB;
	m->total = m->params + m->grads + m->history + m->activations + m->act_grads + m->saved + m->layer_state +
		   m->workspace + m->feed + m->snapshot + m->runtime;
	m->host = cuda ? m->feed + m->snapshot + m->runtime : m->total;
	return DD_OK;
}

cJSON *net_memory_json(const struct net_memory *m)
{
	cJSON *o = cJSON_CreateObject(), *b = cJSON_AddObjectToObject(o, "breakdown");
	if (!b) {
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_AddNumberToObject(o, "total", (double)m->total);
	cJSON_AddNumberToObject(o, "host", (double)m->host);
	cJSON_AddNumberToObject(o, "batch", m->batch);
	cJSON_AddNumberToObject(o, "replicas", m->replicas);
	cJSON_AddBoolToObject(o, "device", m->device);
	cJSON_AddNumberToObject(b, "params", (double)m->params);
	cJSON_AddNumberToObject(b, "grads", (double)m->grads);
	cJSON_AddNumberToObject(b, "history", (double)m->history);
	cJSON_AddNumberToObject(b, "activations", (double)m->activations);
	cJSON_AddNumberToObject(b, "activation_grads", (double)m->act_grads);
	cJSON_AddNumberToObject(b, "saved", (double)m->saved);
	cJSON_AddNumberToObject(b, "layer_state", (double)m->layer_state);
	cJSON_AddNumberToObject(b, "workspace", (double)m->workspace);
	cJSON_AddNumberToObject(b, "feed", (double)m->feed);
	cJSON_AddNumberToObject(b, "snapshot", (double)m->snapshot);
	cJSON_AddNumberToObject(b, "runtime", (double)m->runtime);
	return o;
}

void net_memory_human(int64_t bytes, char *buf, size_t len)
{
	double v = (double)bytes;
	if (v >= 1024.0 * MIB)
		snprintf(buf, len, "%.1f GiB", v / (1024.0 * MIB));
	else if (v >= MIB)
		snprintf(buf, len, "%.0f MiB", v / MIB);
	else
		snprintf(buf, len, "%.0f KiB", v / 1024.0);
}

int net_memory_largest_layer(const struct net_graph *g)
{
	int best = -1;
	for (int k = 0; k < g->nnode; k++)
		if (g->node[k].nparams > 0 && (best < 0 || g->node[k].nparams > g->node[best].nparams))
			best = k;
	return best;
}
