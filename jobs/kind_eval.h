/* kind_eval.h — what others need of the "evaluation" job kind (kind_eval.c): the
 * running statistics of classifying many images, and the files the job writes.
 *
 * An evaluation job's folder holds, besides job.json and events.jsonl:
 *   results.csv     one row per image, written as the job goes: n, name, true label
 *                   (empty when unknown), the top 5 labels and probabilities, error
 *   results.jsonl   the same rows as JSON objects
 *   metrics.json    at the end (and when stopped, with "complete": false): what
 *                   eval_metrics_json gives, plus the source and the images' URLs
 *   images/         an upload's images, unpacked (the API serves them by n), with
 *   files.txt       their paths below images/, one a line, in the order of n, and
 *   files.idx       each line's byte offset in files.txt, a little-endian uint64 per
 *                   image: image n's path is found with one seek.
 *
 * The statistics hold nothing per image: a confusion matrix (classes²), counters, a
 * bounded heap of the most confident misclassifications and one heap of top_n per
 * class, so memory does not grow with the number of images. */
#ifndef DD_KIND_EVAL_H
#define DD_KIND_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

#define EVAL_MAX_MISCLASSIFIED 1000

struct eval_item {
	int64_t n;        /* the image's ordinal in the source */
	int truth, pred;  /* truth -1: unknown */
	float key;        /* what the heap orders by */
	float prob_pred;  /* the predicted class's probability */
	float prob_true;  /* the true class's (0 when unknown) */
};

/* A min-heap of at most cap items by key: the cap largest keys seen. */
struct eval_heap {
	struct eval_item *a;
	int n, cap;
};

struct eval_stats {
	int classes, top_n;
	int64_t count;      /* images classified */
	int64_t labelled;   /* of which with a known class */
	int64_t correct1, correct5;
	int64_t errors;     /* images that could not be read */
	int64_t *confusion; /* (classes, classes): [truth][pred] */
	int64_t *predicted; /* (classes): every image's top-1, labelled or not */
	struct eval_heap mis;  /* misclassified, by the predicted probability */
	struct eval_heap *top; /* (classes): by that class's probability */
};

/* Room for classes classes, top_n images per class (0..1000) and max_mis
 * misclassifications.  Undo with eval_stats_fini (also after a failure). */
int eval_stats_init(struct eval_stats *s, int classes, int top_n, int max_mis, struct dd_err *err);
void eval_stats_fini(struct eval_stats *s);

/* Count image n with class truth (-1: unknown) and its probabilities (classes
 * values).  Top-1 is the most probable class, the lower index on a tie; the truth
 * is in the top 5 when fewer than 5 classes score above it (a tie counts for the
 * lower index). */
void eval_stats_add(struct eval_stats *s, int64_t n, int truth, const float *probs);

/* The item's name (for the lists), into buf; NULL ctx-less callers pass NULL. */
typedef void (*eval_name_fn)(void *ctx, int64_t n, char *buf, size_t len);

/* The metrics: {"count", "labelled", "errors", "accuracy", "accuracy_top5" (null
 * with nothing labelled), "classes": [{"label", "precision", "recall", "f1",
 * "support", "predicted"}], "macro": {"precision", "recall", "f1"} (over the classes
 * with support or predictions), "labels", "confusion" (rows: truth, columns:
 * predicted), "misclassified": [{"n", "name", "true", "predicted", "probability",
 * "probability_true"}] most confident first, "top": [[{"n", "name", "probability",
 * "true", "predicted"}] per class, highest first]}.  labels has classes strings.
 * name (may be NULL) names the items.  Caller frees with cJSON_Delete(); NULL when
 * out of memory. */
cJSON *eval_metrics_json(const struct eval_stats *s, const char *const *labels, eval_name_fn name, void *ctx);

#endif
