/* segment.h — build a semantic-segmentation dataset: image and label pairs in,
 * two LMDBs per split out (DIGITS' segmentation layout).
 *
 *   SOURCE/images/<stem>.<any image type>   the features
 *   SOURCE/labels/<stem>.png                one class per pixel, as
 *       a palette PNG (the index is the class), a grayscale PNG (the value is the
 *       class) or an RGB PNG with a colour map (one "R G B" line per class)
 *   SOURCE/labels.txt                       class names, line i names class i-1
 *
 * Out (dsinfo.h names them): train_db/ and val_db/ (the images as Datum, as a
 * classification dataset has them), train_labels_db/ and val_labels_db/ (a
 * 1-channel raw Datum of class indices per image, under the same keys), resized
 * to one size: the images with the chosen resize mode, the labels with the same
 * geometry and nearest-neighbour sampling, so that no value is ever interpolated;
 * labels.txt; the train images' mean (mean.binaryproto, mean.png, as a
 * classification dataset has it); and last dataset.json with "task": "segmentation", the classes,
 * their palette, the counts and every skipped file with its reason.
 *
 * Value 255 is the ignore label (VOC's border, Caffe's ignore_label): kept as it
 * is and never a class.  A pair that cannot be used (a missing partner, sizes that
 * differ, a label of the wrong mode, an RGB colour not in the map, a class past the
 * last one) is skipped and named, and the dataset goes on. */
#ifndef DD_SEGMENT_H
#define DD_SEGMENT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"
#include "create.h"

#define SEG_IGNORE 255 /* the label value that is never a class */
#define SEG_MAX_CLASSES 255

struct seg_source {
	const char *root;     /* holds images/ and labels/ (and maybe labels.txt) */
	const char *val_root; /* a separate validation folder of the same shape, or NULL */
	const char *colormap; /* a colour map file for RGB labels, or NULL */
	const char *colormap_text; /* the same given as text (wins over the file) */
};

/* A colour map: line i is class i's colour.  Lines are "R G B" with spaces,
 * tabs or commas between the three integers 0..255; blank lines and lines
 * starting with '#' are skipped.  A bad line is DD_EINVAL naming `name` and the
 * line ("colours.txt line 3: expected three numbers 0 to 255 (R G B)").  A colour
 * given twice is refused too (a pixel could not say its class).  rgb holds
 * 3*SEG_MAX_CLASSES bytes. */
int seg_colormap_parse(const char *text, const char *name, uint8_t *rgb, int *n, struct dd_err *err);

/* Build the dataset into out_dir (created if needed).  The options used are
 * width, height, channels, resize_mode, encoding, val_pct (when there is no
 * val_root), seed, threads and max_pixels.  On success *summary (if non-NULL) is
 * what dataset.json holds; caller frees it with cJSON_Delete. */
int seg_create(const struct seg_source *src, const struct ds_options *opt, const char *out_dir,
	       const struct ds_progress *prog, cJSON **summary, struct dd_err *err);

/* Does root look like a segmentation source (images/ and labels/ folders, found
 * below folders that hold one folder only, as an archive's top folder)?  The
 * folder that holds them into found (PATH_MAX bytes); 1 or 0. */
int seg_layout_resolve(const char *root, char *found);

#endif
