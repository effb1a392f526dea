/* create.h — build an image-classification dataset: labelled images in, LMDB out.
 *
 *   gather   the (path, label) lists per split, from class folders or list files
 *   split    per class, shuffled with the recorded seed, DIGITS' three-way split
 *   process  decode → channels → resize → encode on a pool of threads, results put
 *            back into list order so the same inputs and seed give the same bytes
 *   write    one LMDB writer per split, keys "%08d_%d", batched transactions
 *   mean     of the train split's resized images: mean.binaryproto and mean.png
 *   report   labels.txt, train.txt/val.txt/test.txt, dataset.json (options,
 *            counts per split and class, every skipped file with its reason)
 *
 * Nothing is marked finished until dataset.json is written last: a dataset that was
 * aborted, failed or killed has no dataset.json and its partial databases are
 * removed (or left for the job's error state to explain). */
#ifndef DD_CREATE_H
#define DD_CREATE_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "image.h"

enum ds_encoding { DS_ENC_PNG, DS_ENC_JPG, DS_ENC_NONE };

const char *ds_encoding_name(enum ds_encoding e);
int ds_encoding_parse(const char *s, enum ds_encoding *out);

enum ds_split { DS_TRAIN, DS_VAL, DS_TEST };
#define DS_SPLITS 3
const char *ds_split_name(enum ds_split s); /* "train", "val", "test" */

struct ds_options {
	int width, height;     /* 256×256 */
	int channels;          /* 1 or 3 (3) */
	enum resize_mode resize;
	enum ds_encoding encoding;
	int val_pct, test_pct; /* 25, 0 */
	int min_per_class;     /* 2 */
	int max_per_class;     /* 0: no limit */
	uint64_t seed;         /* recorded in dataset.json */
	int threads;           /* 0: one per core */
	int64_t max_pixels;    /* per image; 0: IMAGE_DEFAULT_MAX_PIXELS */
};

/* The defaults above. */
void ds_options_default(struct ds_options *o);
/* Fill o from a JSON object of the same names ("width", "height", "channels",
 * "resize_mode", "encoding", "val_pct", "test_pct", "min_per_class",
 * "max_per_class", "seed", "threads"); unknown keys and bad values are refused
 * naming the field ("options.width: must be an integer from 1 to 4096"). */
int ds_options_from_json(const cJSON *j, struct ds_options *o, struct dd_err *err);
cJSON *ds_options_to_json(const struct ds_options *o);

/* Where the images come from. */
struct ds_source {
	/* class folders: train required; val/test optional separate folders */
	const char *folder[DS_SPLITS];
	/* list files ("path label" lines) per split and the labels file; relative
	 * paths are taken below list_base */
	const char *list[DS_SPLITS];
	const char *labels_file;
	const char *list_base;
};

/* Progress and cancellation, called from the writing thread. */
struct ds_progress {
	void *ctx;
	/* done images of total, in the current phase ("gather", "train", …) */
	void (*progress)(void *ctx, const char *phase, int64_t done, int64_t total);
	/* a line for the creation log */
	void (*log)(void *ctx, const char *level, const char *msg);
	/* nonzero: stop as soon as possible (the result is DD_ECONFLICT, "aborted") */
	int (*should_stop)(void *ctx);
};

/* Build the dataset into out_dir (created if needed).  On success *summary (if
 * non-NULL) is what dataset.json holds; caller frees it with cJSON_Delete. */
int ds_create(const struct ds_source *src, const struct ds_options *opt, const char *out_dir,
	      const struct ds_progress *prog, cJSON **summary, struct dd_err *err);

/* DIGITS' three_way_split_indices: how many of n go to train, val and test. */
void ds_split_counts(int n, int val_pct, int test_pct, int *train, int *val, int *test);


/* Find the class folders below root: descend through folders that hold nothing but
 * one folder (an archive's top folder), then, when the folder has "train" (and
 * optionally "val"/"validation" and "test") sub-folders, use those as the splits;
 * otherwise root itself is the train folder.  Each out buffer is PATH_MAX bytes;
 * an absent split is set to "". */
int ds_layout_resolve(const char *root, char *train, char *val, char *test, struct dd_err *err);

/* Shared with segment.c.  A line for the creation log through prog->log (prog
 * or its log may be NULL). */
void ds_say(const struct ds_progress *prog, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* mean (C×H×W doubles of options' size, interleaved as the images are) as
 * DSINFO_MEAN (BGR planes, rounded as DIGITS does) and DSINFO_MEAN_PNG in out_dir. */
int ds_write_mean(const char *out_dir, const struct ds_options *o, const double *mean, struct dd_err *err);
/* Room for element n of v (elements of size bytes, *cap of them allocated):
 * v itself, or v reallocated to twice the room (and *cap updated) when full;
 * NULL when out of memory (v is still valid then). */
void *ds_grow(void *v, int64_t n, int64_t *cap, size_t size);
/* The last step of a build: sum gets "disk_bytes" (the sizes of the NULL-ended
 * outputs, names in out_dir, that exist) and is written as dataset.json, the mark
 * that the dataset is done. */
int ds_write_summary(const char *out_dir, const char *const *outputs, cJSON *sum, struct dd_err *err);
/* Fisher-Yates with splitmix64 over n elements of size bytes (at most 64): the
 * same seed gives the same order everywhere. */
void ds_shuffle(void *v, int64_t n, size_t size, uint64_t seed);
/* Append {"path", "reason"} to a summary's skipped array. */
void ds_skipped_add(cJSON *skipped, const char *path, const char *reason);
/* The sorted names in dir (no "." "..", no hidden files);
 * caller frees with ds_free_names.  Each name carries readdir's d_type in the byte
 * after its NUL. */
int ds_list_dir(const char *dir, char ***names, int *n, struct dd_err *err);
void ds_free_names(char **names, int n);
/* Whether a name holds a control character (one a line of a .txt list could not
 * hold). */
int ds_name_has_control(const char *name);

#endif
