/* memory.h — how much memory a training of a network takes, before it starts.
 *
 * net_memory_estimate adds up what networks/train.c allocates for a training
 * (train_run's setup) from the instantiated train and val graphs alone, so that a
 * server can show it when a network is checked and refuse a job that would not fit
 * (jobs/kind_train_memory.c) instead of letting it take the machine's memory.
 * Every term is an exact count of an arena (graph_bytes_plan), except the two
 * marked "approximation", which are documented at net_memory_estimate. */
#ifndef DD_MEMORY_H
#define DD_MEMORY_H

#include <stdint.h>

#include "../common/err.h"
#include "net.h"
#include "solver.h"

struct cJSON;

/* Bytes, by what holds them.  On the cuda backend everything but feed and runtime
 * lives on the GPU (device = 1) and host is feed + runtime. */
struct net_memory {
	int batch;           /* images per pass (per copy) */
	int replicas;        /* copies of the train graph (data parallel) */
	int device;          /* 1: the graphs' arenas are GPU memory */
	int64_t params;      /* weights: each train copy's and the val graph's own */
	int64_t grads;       /* their gradients (the val graph has an arena for them too) */
	int64_t history;     /* the solver's state: 1 or 2 arenas the size of the weights */
	int64_t activations; /* every blob of the train and val graphs, x batch */
	int64_t act_grads;   /* their gradients */
	int64_t saved;       /* copies of values an in-place layer overwrites, and its tmp */
	int64_t layer_state; /* pooling argmax, dropout masks, LRN scale, softmax
			      * probabilities, batch-norm statistics */
	int64_t workspace;   /* the backend's temporaries (approximation) */
	int64_t feed;        /* the prefetched batches of both feeds */
	int64_t snapshot;    /* a resume or fine-tune reads a snapshot file whole, one at a
			      * time: the larger of the weights and the solver state */
	int64_t runtime;     /* the program, its libraries and threads (approximation) */
	int64_t total;       /* all of the above */
	int64_t host;        /* of total, in the machine's memory (total unless device) */
};

/* Estimate a training of train (the train stage's graph) with val (its val stage;
 * may be NULL) on backend ("cpu", "ref", "cuda[:N]"; NULL: cpu) with solver and
 * replicas copies (0: 1).  DD_OK and *m, or DD_ENOMEM. */
int net_memory_estimate(const struct net_graph *train, const struct net_graph *val, enum solver_type solver,
			const char *backend, int replicas, struct net_memory *m);

/* {"total","host","batch","replicas","device","breakdown":{params,grads,history,
 * activations,activation_grads,saved,layer_state,workspace,feed,snapshot,runtime}}, bytes.
 * Caller frees with cJSON_Delete(); NULL when out of memory. */
struct cJSON *net_memory_json(const struct net_memory *m);

/* "1.2 GiB", "312 MiB", "48 KiB": bytes for people, into buf. */
void net_memory_human(int64_t bytes, char *buf, size_t len);

/* The layer of g with the most parameters (its index), -1 when none has any: what
 * to shrink when a network is too big. */
int net_memory_largest_layer(const struct net_graph *g);

#endif
