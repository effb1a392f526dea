/* train.h — train a network on a dataset, as a DIGITS classification job does.
 *
 * train_run parses the network text, instantiates its train and val stages for the
 * dataset (image shape from DIR/dataset.json, class count from its labels), builds
 * both on one backend (backend.h), feeds them from DIR/train_db and DIR/val_db
 * (feed.h, prefetched, with the data layers' transform_param: crop, mirror, scale,
 * mean) and runs the solver (solver.h):
 *
 *   one iteration = iter_size forward/backward passes of `batch` images, then one
 *   solver step; iterations per epoch = ceil(train records / (batch * iter_size));
 *   about every 1/8 epoch a "train" metric (mean loss since the last one, the rate,
 *   the epoch as a fraction, images/s);
 *   every val_interval epochs and at the end a "val" metric: loss and top-1 accuracy
 *   (and top-5 when the net has an Accuracy layer with top_k 5) over
 *   ceil(val records / batch) batches, the last wrapping around to the first records
 *   as Caffe's test_iter does; the val graph gets the train graph's parameters first;
 *   every snapshot_interval epochs, at the end, and when hooks->should_stop asks to
 *   stop (checked after every iteration) a snapshot (snapshot.h):
 *     OUT/snapshot_epoch_<E>.safetensors   the weights, "<layer>.<i>"
 *     OUT/snapshot_epoch_<E>.solverstate   the solver's history and where training
 *                                          stood: iteration, data position, dropout's
 *                                          PRNG
 *   E is the epoch, "3", or "1.4167" for a snapshot inside one.
 *
 * Resume (opts.resume = a .safetensors with its .solverstate beside it) restores all
 * of that and continues to opts.epochs: the same run, stopped and resumed, gives the
 * same weights bit for bit on the reference backend and with a fixed thread count on
 * oneDNN (tests/unit/test_train.c).  Fine-tuning (opts.finetune) loads the blobs
 * that match by name and shape and keeps the rest freshly initialised, then trains
 * from iteration 0.
 *
 * Data parallelism (opts.replicas = N > 1): N copies of the train graph, copy 0
 * on this thread and each other on a thread of its own (bound to its GPU), take
 * their N parts of one feed batch of N × batch images; after the passes their
 * gradients are averaged (NCCL's all-reduce on a cuda group, else on the host) and
 * every copy takes the same solver step, so they stay equal and the run is the one
 * of a single copy with N × batch.  Validation, snapshots and metrics are copy 0's;
 * the solverstate also keeps each copy's dropout stream ("dropout_rng_<i>").
 *
 * A loss that becomes NaN or infinite stops training with DD_EINVAL: "the loss
 * became NaN at epoch E; try a lower learning rate". */
#ifndef DD_TRAIN_H
#define DD_TRAIN_H

#include <stdint.h>

#include "../common/err.h"
#include "feed.h"
#include "solver.h"

#define TRAIN_MAX_REPLICAS 16

struct train_result {
	int64_t iterations;        /* done */
	double epochs;             /* done, as a fraction */
	int stopped;               /* should_stop ended it early */
	double train_loss;         /* the last train metric's */
	double first_train_loss;   /* the first train metric's */
	double val_loss, val_accuracy, val_accuracy_top5; /* the last validation's; NAN if none */
	char snapshot[4096];       /* the path written, "" if none */
};

struct train_opts {
	const char *dataset_dir;   /* a datasets/create.h folder */
	const char *network_text;  /* prototxt */
	const char *network_name;  /* for messages and the snapshot's metadata (may be NULL) */
	const char *out_dir;       /* created if needed; snapshots go here */
	const char *backend;       /* "cpu" (oneDNN) or "ref"; NULL: "cpu" */
	const char *precision;     /* "fp32" (NULL), "fp16" or "bf16": convolutions and inner
				    * products in half precision (FP32 master weights; fp16
				    * with dynamic loss scaling); the cuda backend only */
	int epochs;                /* 0: 30 (DIGITS' default) */
	int batch;                 /* 0: the data layers' batch_size, else 16 */
	int iter_size;             /* batch accumulation: passes per update; 0: 1 */
	int crop;                  /* 0: the data layer's crop_size */
	int mirror;                /* training images flipped at random: 0 as the data
				    * layer's transform_param says, 1 yes, -1 no */
	enum solver_type solver;   /* SGD (solver_type_parse reads the names) */
	double base_lr;            /* 0: 0.01 */
	double momentum;           /* < 0: 0.9 (SGD momentum, Adam's beta1, AdaDelta's decay) */
	double momentum2;          /* 0: 0.999 (Adam's beta2) */
	double delta;              /* 0: the solver's default (1e-8) */
	double rms_decay;          /* 0: 0.99 (RMSProp) */
	double weight_decay;       /* as given (DIGITS: 0.0005 for its networks) */
	enum lr_policy policy;     /* LR_STEP or LR_FIXED (others use gamma/stepsize as given) */
	double step_pct;           /* step: stepsize = this percent of all iterations; 0: 33;
				    * sigmoid: the centre */
	double multistep_pct[SOLVER_MAX_STEPS]; /* multistep: positions in percent */
	int nmultistep;
	double gamma;              /* 0: 0.1 */
	double power;              /* inv, poly; 0: 1 (poly) / 0.75 (inv) */
	enum feed_mean mean;       /* FEED_MEAN_IMAGE is DIGITS' default */
	uint64_t seed;             /* weights, shuffling and crops */
	int reports_per_epoch;     /* 0: 8 */
	double val_interval;       /* epochs between validations; 0: 1 */
	double snapshot_interval;  /* epochs between snapshots; 0: 1 */
	const char *resume;        /* continue exactly from this snapshot (its .solverstate
				    * beside it); epochs is then the new total */
	const char *finetune;      /* start from another model's weights; changed layers
				    * are re-initialised */
	int deterministic;         /* same seed + build + threads: the same curves */
	int threads;               /* 0: all cores */
	int replicas;              /* data parallelism: > 1 trains this many copies of the
				    * network at once, each on its own `batch` images of a
				    * step's replicas × batch, their gradients averaged before
				    * every update: the training of one copy with a batch of
				    * replicas × batch (BatchNorm statistics and dropout masks
				    * aside, which stay per copy).  Backend "cuda": one copy per
				    * GPU in gpus[], joined by NCCL; "cpu" and "ref": copies on
				    * the host, averaged there.  0 or 1: one copy. */
	int gpus[TRAIN_MAX_REPLICAS]; /* cuda with replicas > 1: the devices, one per copy */
	struct train_result *result; /* filled when non-NULL */
};

/* What a caller sees while training (every member may be NULL). */
struct train_metric {
	const char *kind;          /* "train" or "val" */
	int64_t iteration;         /* done so far */
	double epoch;              /* fractional */
	double lr;
	double loss;
	double accuracy;           /* val: top-1, NAN if the net has no Accuracy */
	double accuracy_top5;      /* val: NAN if none */
	double images_per_s;       /* train */
};

struct train_hooks {
	void *ctx;
	void (*metric)(void *ctx, const struct train_metric *m);
	void (*log)(void *ctx, const char *level, const char *msg);
	int (*should_stop)(void *ctx);
};

void train_opts_default(struct train_opts *o);

/* The image shape (c, h, w) and class count of the dataset in DIR, from its
 * dataset.json, into *in (its other fields untouched).  DD_ENOENT when there is
 * none, DD_EINVAL naming the file when it lacks them. */
struct net_input;
int train_dataset_input(const char *dir, struct net_input *in, struct dd_err *err);

/* The learning-rate part of the solver config train_run uses for a run of total
 * iterations (base_lr, policy, gamma, power, stepsize, stepvalue[], max_iter), settled
 * from o as DIGITS does: step, sigmoid and multistep positions are percentages of
 * all iterations.  lr_at() on it gives the rate of each iteration (the LR preview). */
void train_lr_config(const struct train_opts *o, int64_t total, struct solver_config *sc);

/* Train.  DD_OK (also when stopped by should_stop; result->stopped says so), or an
 * error with a sentence (bad network, dataset, NaN loss, disk). */
int train_run(const struct train_opts *o, const struct train_hooks *h, struct dd_err *err);

#endif
