/* kind_train.h — what the API needs of the "model" job kind (kind_train.c): where a
 * model job keeps its snapshots.
 *
 * A model job's folder holds network.prototxt (the text it trained), settings.json
 * (its params with everything resolved), labels.txt (copied from the dataset) and
 * snapshot_epoch_<E>.safetensors, one per snapshot, E the epochs completed. */
#ifndef DD_KIND_TRAIN_H
#define DD_KIND_TRAIN_H

#include <stddef.h>

#include "../common/err.h"

/* The epochs that have a snapshot in dir, ascending, into *epochs (caller frees
 * with free(); NULL when there are none) and their count into *n. */
int model_snapshots(const char *dir, int **epochs, int *n, struct dd_err *err);

struct net_input;

/* Check a network against the dataset in ds_dir: parse text and instantiate its
 * train and val stages for the dataset's image shape and classes, with batch and
 * crop (0: the network's data layers').  DD_OK and, when non-NULL, *train and *val
 * as resolved (batch, crop, image shape, classes); else err says what is wrong,
 * naming the layer and its LINE:COL. */
int model_check_network(const char *text, const char *ds_dir, int batch, int crop,
			struct net_input *train, struct net_input *val, struct dd_err *err);

/* DIR/snapshot_epoch_<E>.safetensors into buf. */
void model_snapshot_path(const char *dir, int epoch, char *buf, size_t len);

#endif
