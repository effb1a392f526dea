/* feed.h — batches of images and labels from a dataset split, for training.
 *
 * A feed reads DIR/train_db or DIR/val_db (datasets/lmdbio.h) and turns each Datum
 * into the float C×H×W input Caffe's DataTransformer gives a Data layer:
 *
 *   raw records are already C×H×W uint8 with colour planes in BGR order;
 *   encoded records (PNG/JPEG) are decoded (image.h, interleaved RGB/gray) and put
 *   into C×H×W with BGR planes, so both kinds give the same floats;
 *   then (x - mean) * scale, with the mean none, the image of DIR/mean.binaryproto,
 *   or its per-channel average ("pixel", DIGITS' other choice), or explicit values;
 *   then a crop when crop < the image side: random offsets and a random horizontal
 *   mirror in training (mirror only if asked), the centre in validation.
 *
 * Order: training uses a fresh permutation of the records per epoch, and random
 * crops and mirrors, all drawn from counters: epoch e's permutation from (seed, e),
 * the crop of position p in it from (seed, e, p).  So a position (epoch, index in
 * it) fixes every batch that follows: feed_position/feed_seek are all a resumed
 * training needs, and prefetching cannot change what is fed.  Validation reads the
 * records in order.  feed_next wraps around at the end of an epoch.
 *
 * Prefetch (opts.prefetch = the batch size): a thread of the feed's own decodes the
 * next two batches while the current one trains; feed_next then serves batches of
 * exactly that size.
 *
 * Device (opts.device, a backend with an upload op: cuda): batches of 8-bit images
 * leave the feed as their stored planes plus each sample's crop window and mirror
 * flag, and the backend does the mean, scale, crop and mirror on its device into
 * data (which must then be that backend's memory, a graph's data blob), the same
 * floats bit for bit.  Datasets of float values, and backends without the op, take
 * the host path.
 *
 * A feed is used by one thread at a time (its prefetch thread is its own). */
#ifndef DD_FEED_H
#define DD_FEED_H

#include <stdint.h>

#include "../common/err.h"

struct backend;

enum feed_mean { FEED_MEAN_NONE, FEED_MEAN_IMAGE, FEED_MEAN_PIXEL };

struct feed_opts {
	int train;               /* 1: shuffle, random crop and mirror; 0: in order, centre crop */
	int crop;                /* 0: no crop; else the side of the square crop */
	int mirror;              /* training only: flip horizontally with probability 1/2 */
	float scale;             /* 0 is taken as 1 */
	enum feed_mean mean;     /* IMAGE and PIXEL read DIR/mean.binaryproto */
	const float *mean_value; /* when non-NULL: per channel (BGR), or one for all; wins over mean */
	int nmean_value;
	uint64_t seed;
	int prefetch;            /* > 0: decode batches of this size ahead, in a thread */
	struct backend *device;  /* NULL, or the backend that transforms on its device (borrowed) */
};

struct feed;

/* Open dataset_dir's split ("train" or "val").  DD_OK and *out (caller frees with
 * feed_close); DD_ENOENT when the split's database is missing, DD_EINVAL for an
 * empty database, a crop larger than the images, or a mean of the wrong shape. */
int feed_open(const char *dataset_dir, const char *split, const struct feed_opts *o,
	      struct feed **out, struct dd_err *err);
void feed_close(struct feed *f);

/* Records in the split (one epoch). */
int64_t feed_epoch_size(const struct feed *f);
/* The shape of one sample as fed (after the crop). */
void feed_shape(const struct feed *f, int *c, int *h, int *w);
/* Where the next feed_next starts: epoch (from 0) and position in it (0..size; size
 * means the epoch is used up and the next batch wraps). */
void feed_position(struct feed *f, int64_t *epoch, int64_t *pos);
/* Continue from that position (a position out of range is taken as 0). */
void feed_seek(struct feed *f, int64_t epoch, int64_t pos);
/* Validation: back to the first record.  Training: to the start of the next epoch
 * (unless at the start of one already). */
void feed_rewind(struct feed *f);

/* Fill n samples: data (n*C*H*W floats) and labels (n floats, may be NULL).  With
 * prefetch, n must be opts.prefetch (else DD_EINVAL); a record that fails to load
 * fails this and every later call until a seek. */
int feed_next(struct feed *f, float *data, float *labels, int n, struct dd_err *err);

/* Data parallelism: one batch, parts of it to several graphs, each from its own
 * thread.  feed_take waits for the next prefetched batch (a prefetching feed only,
 * else DD_EINVAL) and returns it, or its load's error (the batch stays failed, as
 * feed_next's); feed_put fills data and labels (may be NULL) with its samples
 * [first, first+n), transformed on device when the feed is opened with one (NULL:
 * the feed's own) — any number of threads may put parts of the same batch at once;
 * feed_done gives the batch back once every part is put.  feed_next is take, put
 * of the whole batch, done. */
struct feed_batch;
int feed_take(struct feed *f, const struct feed_batch **out, struct dd_err *err);
int feed_put(const struct feed *f, const struct feed_batch *b, int first, int n, float *data, float *labels,
	     struct backend *device, struct dd_err *err);
void feed_done(struct feed *f);

/* ---- the transform, shared with inference (networks/infer.c) ----
 *
 * What a feed does to one image, in three steps, so that a model classifying an
 * uploaded image prepares it exactly as training and validation did. */

/* First, the image's pixels into C×H×W float planes, colour planes in BGR order
 * (Caffe's): image_to_planes (datasets/image.h), as a raw record holds them. */

/* The mean to subtract from C×H×W images of this shape, as c*h*w floats: explicit
 * mean_value (per channel, or one for all) when non-NULL, else the image of the
 * BlobProto file mean_path (mode FEED_MEAN_IMAGE) or its per-channel average
 * (FEED_MEAN_PIXEL).  DD_OK and *out (caller frees with free()); with mode
 * FEED_MEAN_NONE and no mean_value, *out is NULL.  DD_EINVAL names a mean file of
 * another shape; errors of reading the file pass through. */
int feed_mean_load(const char *mean_path, enum feed_mean mode, const float *mean_value, int nmean_value, int c,
		   int h, int w, float **out, struct dd_err *err);

/* out (c*oh*ow) = (img - mean) * scale over the oh×ow window of img (c*h*w) at
 * (y0, x0), mirrored horizontally when flip.  mean (c*h*w, the whole image's) may be
 * NULL. */
void feed_transform(const float *img, int c, int h, int w, const float *mean, float scale, int y0, int x0, int oh,
		    int ow, int flip, float *out);

#endif
