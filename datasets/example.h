/* example.h — quick-start data from Debian's packages.
 *
 * Fashion-MNIST (package dataset-fashion-mnist: gzipped IDX files under
 * /usr/share/datasets/fashion-mnist) written out as an image folder:
 *   DIR/train/<class>/NNNNN.png (60,000) and DIR/test/<class>/NNNNN.png (10,000)
 * with the ten class names as folder names ("T-shirt_top", …, "Ankle_boot"). */
#ifndef DD_EXAMPLE_H
#define DD_EXAMPLE_H

#include <stdint.h>

#include "../common/err.h"

#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Whether the package's files are there. */
int example_fashion_mnist_available(void);

/* Write the folder; progress(ctx, done, total) is called every hundred images (may
 * be NULL) and stops the work when it returns nonzero (DD_ECONFLICT, "aborted"). */
int example_fashion_mnist(const char *dir, int (*progress)(void *ctx, int64_t done, int64_t total),
			  void *ctx, struct dd_err *err);

#endif

/* The synthetic segmentation example: DIR/images/NNNNN.png (RGB, w x h),
 * DIR/labels/NNNNN.png (palette PNGs: 0 background, 1 circle, 2 square,
 * 3 triangle) and DIR/labels.txt, count pairs of seeded shapes on textured,
 * noisy backgrounds.  The same seed gives the same bytes.  progress as above
 * (every 20 pairs).  Then: deepdesk dataset create DIR OUT --task segmentation. */
#define EXAMPLE_SEG_CLASSES 4
int example_segmentation(const char *dir, int count, int w, int h, uint64_t seed,
			 int (*progress)(void *ctx, int64_t done, int64_t total), void *ctx, struct dd_err *err);

/* A colour picture drawn here (a landscape: sky, sun, hills, a house; 400×300,
 * wider than tall so every resize mode shows its effect), for the new-dataset
 * form's preview.  Caller frees with image_free(). */
struct image;
int example_preview_image(struct image *out, struct dd_err *err);
