/* infer.h — classify images with a trained model: one forward pass of the deploy
 * stage, prepared exactly as training prepared its images.
 *
 * A model is a folder, one of two kinds:
 *
 *   a model job's folder (jobs/kind_train.h): network.prototxt, settings.json
 *     (input [C,H,W], classes, crop_size, mean), labels.txt, mean.binaryproto and
 *     preprocess.json (the dataset's resize mode) copied from the dataset, and the
 *     snapshots snapshot_epoch_<E>.safetensors.  A folder written before the mean
 *     was copied reads them from its dataset's folder beside it (settings.dataset).
 *
 *   a bundle (what GET /api/v1/models/{id}/bundle sends, unpacked): info.json (the
 *     manifest infer_manifest() writes), network.prototxt, weights.safetensors,
 *     labels.txt, and mean.binaryproto when the mean is used (and deploy.prototxt,
 *     for other tools: this code reads network.prototxt's deploy stage).
 *
 * An uploaded image goes the way a dataset image went, then the way the feed
 * (feed.h) took it to the network: decode (datasets/image.h, its pixel cap),
 * convert to the dataset's channels, resize to the dataset's size with its resize
 * mode, BGR planes, (x - mean) * scale with the data layer's transform_param, the
 * centre crop.  Then the deploy graph's forward pass on the cpu backend and its
 * Softmax's probabilities.
 *
 * A struct infer is used by one thread at a time, and on the cpu backend always by
 * the thread that opened it: a oneDNN primitive keeps its scratchpad in the thread
 * that made it, and running it from another crashes.  A struct infer_cache holds
 * open handles, bounded by count and bytes, least recently used first out, each
 * lent to one thread at a time; the inference service gives each of its lanes a
 * cache of its own (app/infer/service.c) for that reason. */
#ifndef DD_INFER_H
#define DD_INFER_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

struct infer;
struct image;

#define INFER_MAX_TOP 100

/* How the model prepares an image; filled by infer_open. */
struct infer_prep {
	int c, h, w;           /* the dataset's image shape (what an upload is resized to) */
	int crop;              /* 0: none; else the side of the centre crop */
	int classes;
	const char *resize;    /* "squash", "crop", "fill", "half_crop" */
	const char *mean;      /* "none", "image", "pixel" ("values" for mean_value) */
	float scale;           /* transform_param's, 1 when absent */
};

struct infer_pred {
	int index;             /* the class */
	const char *label;     /* borrowed from the handle: labels.txt's line, or "class N" */
	float probability;
};

/* Open the model in dir (a job folder or an unpacked bundle) with the weights in
 * weights (NULL: a bundle's weights.safetensors; a job folder needs one).  DD_OK and
 * *out (caller frees with infer_close); DD_ENOENT for a missing file, DD_EINVAL
 * naming what does not fit (a network that does not build, weights of other
 * shapes, a manifest that does not parse). */
int infer_open(const char *dir, const char *weights, struct infer **out, struct dd_err *err);
/* Accepts NULL. */
void infer_close(struct infer *h);

/* The preprocessing (borrowed, valid until infer_close). */
const struct infer_prep *infer_prep(const struct infer *h);
/* Bytes the handle holds (weights, activations, mean): what the cache counts. */
size_t infer_bytes(const struct infer *h);
/* The label of class i (borrowed). */
const char *infer_label(const struct infer *h, int i);

/* Classify the encoded image data (PNG, JPEG, BMP, PPM; len bytes; name for
 * messages, may be NULL).  The top min(top, classes) predictions, most probable
 * first (ties: lower index first), into pred (room for top); their count into
 * *npred.  *w and *h (may be NULL) get the image's size as uploaded.  DD_EINVAL
 * for what is not an image; DD_ETOOBIG for one over the pixel cap. */
/* n predictions as a JSON array of {"label", "index", "probability"}, what the API
 * and `deepdesk classify --json` print.  Caller frees with cJSON_Delete(); NULL when
 * out of memory. */
cJSON *infer_predictions_json(const struct infer_pred *pred, int n);

int infer_classify(struct infer *h, const void *data, size_t len, const char *name, int top,
		   struct infer_pred *pred, int *npred, int *w, int *hgt, struct dd_err *err);
/* The same for a decoded image (as image.h holds them). */
int infer_classify_image(struct infer *h, const struct image *im, int top, struct infer_pred *pred, int *npred,
			 struct dd_err *err);
/* The probabilities of the last classification (classes values; borrowed). */
const float *infer_probabilities(const struct infer *h);
/* The network's input for the last classification: the image as the network saw
 * it, C×H'×W' floats after mean, scale and crop (borrowed); *count gets C*H'*W'. */
const float *infer_input(const struct infer *h, size_t *count);

/* The bundle's info.json for this model: input size, channels, BGR order, resize
 * mode, mean, crop, scale, labels, the job's settings (when a job folder) and the
 * version that wrote it.  snapshot (may be NULL) is recorded as the weights'
 * label.  Caller frees with cJSON_Delete(); NULL when out of memory. */
cJSON *infer_manifest(const struct infer *h, const char *snapshot);
/* The network text (borrowed). */
const char *infer_network_text(const struct infer *h);
/* The deploy stage as instantiated, as a Caffe deploy.prototxt (net.h:
 * net_graph_prototxt).  Caller frees with free(); NULL when out of memory. */
char *infer_deploy_text(const struct infer *h);
/* The mean file used (a path, borrowed), or NULL when the model uses no mean file. */
const char *infer_mean_path(const struct infer *h);

/* ---- inside the network ----
 *
 * What DIGITS showed under "Show visualizations and statistics", from the one
 * forward pass infer_classify just ran: every blob with its shape and values, the
 * weights of convolution layers, summary statistics, and the values laid out as an
 * image of tiles. */

/* One blob of the last forward pass.  Everything is borrowed from the handle and
 * valid until its next classification. */
struct infer_blob {
	const char *name;      /* the blob */
	const char *layer;     /* the layer that made it ("" when unnamed) */
	const char *type;      /* that layer's Caffe type: "Convolution", "ReLU", ... */
	int ndim;
	int64_t dim[4];        /* (N, C, H, W); fewer dims for InnerProduct and Softmax tops */
	const float *data;     /* (count) */
	int64_t count;
	const float *weights;  /* a Convolution's weights (C_out, C_in/group, kh, kw), or NULL */
	int64_t wdim[4];
	int64_t wcount;
};

/* Call fn(blob, ud) for each blob of the last forward pass in execution order: the
 * input first, then each layer's tops.  A blob an in-place layer (ReLU) rewrites is
 * shown once, under the layer that made it, with its final values.  Returns 0, or
 * fn's first non-zero return, which stops the walk. */
int infer_visit(struct infer *h, int (*fn)(const struct infer_blob *b, void *ud), void *ud);

#define INFER_HIST_BINS 20

/* Mean, standard deviation (of the population), min, max and a histogram of
 * INFER_HIST_BINS equal bins from min to max (the last bin holds max). */
struct infer_stats {
	double mean, std;
	float min, max;
	int64_t hist[INFER_HIST_BINS];
};
void infer_stats(const float *v, int64_t n, struct infer_stats *s);

enum infer_tile_mode {
	INFER_TILE_GRAY,       /* each plane a gray tile */
	INFER_TILE_COLOURMAP,  /* each plane through a colour map (one-channel maps) */
	INFER_TILE_BGR,        /* planes in threes, B G R, each three one colour tile */
};

/* Lay n planes of h×w values (v: n*h*w, or n*3*h*w for INFER_TILE_BGR) out as
 * tiles on a grid with 1-pixel gaps, in an image at most max_side pixels a side:
 * values scaled from the whole tensor's min..max to 0..255, small planes enlarged
 * (at most 8x), large ones sampled down, and only as many planes as fit (*shown,
 * may be NULL).  DD_OK and *out (caller frees with image_free()); DD_ENOMEM. */
int infer_tile(const float *v, int n, int h, int w, enum infer_tile_mode mode, int max_side, struct image *out,
	       int *shown, struct dd_err *err);
/* ---- batches: classify many (the evaluation job, jobs/kind_eval.c) ----
 *
 * A handle from infer_batch_open runs `batch` images per forward pass: fill slots
 * 0..n-1 with infer_batch_set_*, run infer_batch_run(n), read each slot's
 * probabilities.  A slot is prepared exactly as infer_classify_image prepares its
 * image, so slot i's probabilities equal classifying image i alone.  The
 * single-image functions work on such a handle too (slot 0). */

struct datum;

/* infer_open with a deploy graph of batch images (1 to 4096).  Caller frees with
 * infer_close. */
int infer_batch_open(const char *dir, const char *weights, int batch, struct infer **out, struct dd_err *err);
int infer_batch_size(const struct infer *h);
/* Prepare a decoded image, encoded image data (name for messages, may be NULL) or a
 * dataset record (datum.h; raw C×H×W BGR or encoded) into slot.  DD_EINVAL naming
 * name for what is not an image; the slot is then unchanged. */
int infer_batch_set_image(struct infer *h, int slot, const struct image *im, struct dd_err *err);
int infer_batch_set_encoded(struct infer *h, int slot, const void *data, size_t len, const char *name,
			    struct dd_err *err);
int infer_batch_set_datum(struct infer *h, int slot, const struct datum *d, const char *name, struct dd_err *err);
/* One forward pass over slots 0..n-1 (n <= the batch size). */
int infer_batch_run(struct infer *h, int n, struct dd_err *err);
/* Slot's probabilities after infer_batch_run (classes values; borrowed, valid until
 * the next run). */
const float *infer_batch_probabilities(const struct infer *h, int slot);
/* The top min(top, classes) of probs (classes values), most probable first (ties:
 * lower index first), into pred (room for top); returns their count. */
int infer_top(const struct infer *h, const float *probs, int top, struct infer_pred *pred);

/* ---- a cache of open handles ---- */

struct infer_cache;

/* max_models handles and max_bytes bytes at most (0: 4 and 1 GiB).  Caller frees
 * with infer_cache_free, once no handle is lent. */
struct infer_cache *infer_cache_new(int max_models, size_t max_bytes);
void infer_cache_free(struct infer_cache *c);

/* Lend the handle for (dir, weights), opening it when no handle in the cache is for
 * that weights file as it is now on disk (its inode, size and time: a rewritten
 * file is a new model).  The handle is the caller's alone until
 * infer_cache_release; a second caller for the same model waits.  *hit (may be
 * NULL) says whether it was open already.  Errors of infer_open pass through. */
int infer_cache_get(struct infer_cache *c, const char *dir, const char *weights, struct infer **out, int *hit,
		    struct dd_err *err);
void infer_cache_release(struct infer_cache *c, struct infer *h);
/* Handles open and the bytes they hold. */
void infer_cache_stats(struct infer_cache *c, int *models, size_t *bytes);

#endif
