/* modeldir.h — the names inside a model folder, and its snapshots.
 *
 * The only code that spells a model folder's file names: networks/train.c writes
 * snapshots under them, jobs/ and app/ list, find and read them through here.
 * A model folder holds network.prototxt (the text it trained), settings.json (its
 * params with everything resolved), labels.txt, mean.binaryproto and mean.png
 * (copied from the dataset), preprocess.json (the dataset's resize_mode, width,
 * height and channels) and, per snapshot, snapshot_epoch_<E>.safetensors with
 * snapshot_epoch_<E>.solverstate beside it (what a resume needs).
 *
 * E is the snapshot's label: "3" for a whole epoch, "1.4167" (at most 4 decimals,
 * no trailing zeros) inside one.  modeldir_snapshot_path builds a snapshot's name
 * and modeldir_snapshot_parse is its twin. */
#ifndef DD_MODELDIR_H
#define DD_MODELDIR_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

/* the fixed names in a model folder */
#define MODELDIR_NETWORK "network.prototxt"
#define MODELDIR_SETTINGS "settings.json"
#define MODELDIR_LABELS "labels.txt"
#define MODELDIR_MEAN "mean.binaryproto"
#define MODELDIR_MEAN_PNG "mean.png"
#define MODELDIR_PREPROCESS "preprocess.json"

/* a snapshot's two files: MODELDIR_SNAP_WEIGHTS makes it exist */
#define MODELDIR_SNAP_WEIGHTS "safetensors"
#define MODELDIR_SNAP_STATE "solverstate"

#define MODELDIR_LABEL_MAX 24

/* DIR/NAME into buf (name: one of the MODELDIR_* names). */
void modeldir_path(const char *dir, const char *name, char *buf, size_t len);

struct modeldir_snapshot {
	char label[MODELDIR_LABEL_MAX]; /* as in the file name: "3", "1.4167" */
	double epoch;                   /* the label's value */
};

/* Is s a snapshot label, a plain decimal ("3", "0", "1.4167": digits, no leading
 * zero, an optional '.' and digits; no sign, exponent or anything else)?  1 and
 * *epoch (may be NULL) its value; 0 if not. */
int modeldir_label_ok(const char *s, double *epoch);

/* The label networks/train.c writes for iteration it at ipe iterations an epoch:
 * the epoch when whole, else "%.4f" without trailing zeros. */
void modeldir_label_at(int64_t it, int64_t ipe, char *buf, size_t len);

/* The label an epoch given as a number is looked up under: "%.4f" without
 * trailing zeros nor a trailing '.' (3 → "3", 1.41666 → "1.4167"). */
void modeldir_label_of(double epoch, char *buf, size_t len);

/* DIR/snapshot_epoch_<LABEL>.<ext> into buf (ext MODELDIR_SNAP_WEIGHTS or
 * MODELDIR_SNAP_STATE). */
void modeldir_snapshot_path(const char *dir, const char *label, const char *ext, char *buf, size_t len);

/* The .solverstate beside the weights at path (a .safetensors, or any path, to
 * which the suffix is added) into buf.  0, or -1 when it does not fit. */
int modeldir_state_of(const char *weights, char *buf, size_t len);

/* Is name (a path or a file name) "[…/]snapshot_epoch_<LABEL>.safetensors" with a
 * valid label?  1 and *out filled; 0 if not. */
int modeldir_snapshot_parse(const char *name, struct modeldir_snapshot *out);

/* The snapshots in dir (a .safetensors whose name has a valid label), by epoch
 * ascending, into *snaps (caller frees with free(); NULL when there are none) and
 * their count into *n.  A missing folder has none. */
int modeldir_snapshots(const char *dir, struct modeldir_snapshot **snaps, int *n, struct dd_err *err);

/* The index of the snapshot whose epoch is within 1e-6 of epoch, or with epoch < 0
 * the latest; -1 when there is none. */
int modeldir_snapshot_find(const struct modeldir_snapshot *snaps, int n, double epoch);

/* The "iteration" in a .safetensors file's metadata, read from its header alone
 * (not the tensors); -1 when the file or the key cannot be read. */
int64_t modeldir_snapshot_iteration(const char *path);

#endif
