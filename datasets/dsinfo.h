/* dsinfo.h — a dataset folder's names and the one reader of its dataset.json.
 *
 * datasets/create.c writes a dataset folder: train_db/, val_db/, test_db/ (LMDB),
 * labels.txt, train.txt, val.txt, test.txt, mean.binaryproto, mean.png and, last,
 * dataset.json ({"options": {"width", "height", "channels", "resize_mode", …},
 * "labels": [...], "splits": {...}, "skipped": [...]}).  datasets/segment.c writes
 * a segmentation dataset: train_db/, val_db/, train_labels_db/, val_labels_db/,
 * labels.txt and dataset.json with "task": "segmentation", "classes", "palette"
 * ([[R,G,B]] per class) and "ignore_label".  dataset.json is the mark
 * that the dataset is done: it is written after everything else, and a dataset
 * that failed has none.  Everyone else reads the folder through here. */
#ifndef DD_DSINFO_H
#define DD_DSINFO_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

/* the fixed names in a dataset folder */
#define DSINFO_FILE "dataset.json"
#define DSINFO_LABELS "labels.txt"
#define DSINFO_MEAN "mean.binaryproto"
#define DSINFO_MEAN_PNG "mean.png"
#define DSINFO_CAP (64u << 20) /* the most bytes of dataset.json read */
#define DSINFO_DB(split) split "_db" /* a split's LMDB: DSINFO_DB("train") */
/* a split's labels LMDB (segmentation: a class-index Datum per record of
 * <split>_db, under the same key) */
#define DSINFO_LABELS_DB(split) split "_labels_db"

/* DIR/NAME into buf (name: one of the DSINFO_* names). */
void dsinfo_path(const char *dir, const char *name, char *buf, size_t len);

/* DIR/<split>_db, the LMDB of a split ("train", "val", "test"), into buf. */
void dsinfo_db_path(const char *dir, const char *split, char *buf, size_t len);

/* DIR/<split>_labels_db into buf. */
void dsinfo_labels_db_path(const char *dir, const char *split, char *buf, size_t len);

/* What a dataset is for: dataset.json's "task" ("classification" when absent, as
 * every dataset made before segmentation is). */
enum dsinfo_task { DSINFO_CLASSIFICATION, DSINFO_SEGMENTATION };
/* The task of info (dataset.json as read); an unknown task string is -1. */
int dsinfo_task(const cJSON *info);
const char *dsinfo_task_name(enum dsinfo_task t);

/* Is the dataset in dir ready to train on: dataset.json and train_db both there
 * and readable?  1 or 0. */
int dsinfo_ready(const char *dir);

/* Read and parse DIR/dataset.json (at most DSINFO_CAP bytes) into *out (caller
 * frees with cJSON_Delete()).  DD_OK; else fs_read_file's or json_parse's error
 * naming the path (DD_ENOENT: the dataset is not done). */
int dsinfo_read(const char *dir, cJSON **out, struct dd_err *err);

/* What training needs of a dataset.json. */
struct dsinfo_shape {
	int width, height, channels; /* options.width, .height, .channels */
	int classes;                 /* the size of labels */
};

/* Fill *out from info (dataset.json as read).  1, or 0 when options.width, height,
 * channels or labels are missing. */
int dsinfo_shape(const cJSON *info, struct dsinfo_shape *out);

/* The dataset's options object (borrowed from info; NULL when absent). */
const cJSON *dsinfo_options(const cJSON *info);

#endif
