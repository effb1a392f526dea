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
 * Order: training draws a fresh permutation of the records per epoch from a PRNG
 * seeded with opts.seed (the same seed gives the same batches); validation reads
 * the records in order.  feed_next wraps around at the end of an epoch.
 *
 * TODO: a prefetch thread decoding the next batch while the current one trains.
 *
 * A feed is used by one thread at a time. */
#ifndef DD_FEED_H
#define DD_FEED_H

#include <stdint.h>

#include "../common/err.h"

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
/* Epochs completed (wrap-arounds) so far. */
int64_t feed_epoch(const struct feed *f);
/* Go back to the start of an epoch (validation runs use it); training draws a new
 * permutation. */
void feed_rewind(struct feed *f);

/* Fill n samples: data (n*C*H*W floats) and labels (n floats, may be NULL). */
int feed_next(struct feed *f, float *data, float *labels, int n, struct dd_err *err);

#endif
