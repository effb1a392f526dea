/* image.h — decode, convert, resize and encode images.
 *
 * An image in memory is 8-bit, interleaved H×W×C, rows top to bottom, C = 1 (gray)
 * or 3 (RGB, in that order).  Decoders accept PNG (1..16-bit, gray, gray+alpha, RGB,
 * RGBA, palette with tRNS, interlaced; the EXIF orientation of an eXIf chunk before
 * IDAT applied), JPEG (baseline, progressive, gray, CMYK/YCCK taken as
 * Adobe-inverted like PIL, EXIF orientation applied), PPM/PGM (P5/P6, and
 * P2/P3; maxval other than 255 rescaled), and BMP (uncompressed 1/4/8-bit palette,
 * 24/32-bit; RLE refused), and always produce C = 1 or 3: alpha is composited on white
 * as PIL's paste does, 16-bit reduced to 8 with rounding ((v*255 + 32767) / 65535).
 * Gray stays gray (gray+alpha too; a BMP with a gray palette gives C = 1); a tRNS
 * colour key on a gray or RGB PNG is ignored, as DIGITS (PIL mode L/RGB) ignores it.
 * The format is found from the bytes; a file whose bytes disagree with its extension
 * is refused.  A header that claims more pixels than the cap is refused before any
 * large allocation.  Every failure fills struct dd_err with a sentence naming the
 * file: "cat/12.png: truncated PNG (...)". */
#ifndef DD_IMAGE_H
#define DD_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define IMAGE_DEFAULT_MAX_PIXELS (64ll * 1000 * 1000)

struct image {
	int w, h, c;  /* c is 1 or 3 */
	uint8_t *px;  /* h*w*c bytes; owned, freed by image_free() */
};

enum image_format { IMAGE_UNKNOWN, IMAGE_PNG, IMAGE_JPEG, IMAGE_PNM, IMAGE_BMP };

enum resize_mode { RESIZE_SQUASH, RESIZE_CROP, RESIZE_FILL, RESIZE_HALF_CROP };

/* "squash", "crop", "fill", "half_crop" <-> enum; parse returns 0 or -1. */
const char *resize_mode_name(enum resize_mode m);
int resize_mode_parse(const char *s, enum resize_mode *out);

/* The format the bytes are in (magic numbers), or IMAGE_UNKNOWN. */
enum image_format image_sniff(const void *data, size_t len);
/* Is `name`'s extension one of the image extensions we read (.png .jpg .jpeg .bmp
 * .ppm .pgm .pnm, any case)? */
int image_has_image_ext(const char *name);

/* Decode data (len bytes) into out.  `name` is used in messages and for the
 * extension check (NULL skips it).  max_pixels <= 0 means the default cap.
 * On failure out is left empty.  Caller frees with image_free(). */
int image_decode(const void *data, size_t len, const char *name, int64_t max_pixels,
		 struct image *out, struct dd_err *err);

/* Convert in place to `channels` (1: ITU-R 601 luma exactly as PIL's convert('L'),
 * (R*19595 + G*38470 + B*7471 + 0x8000) >> 16; 3: gray replicated). */
int image_set_channels(struct image *img, int channels, struct dd_err *err);

/* img's interleaved pixels in Caffe's layout, the data of a raw Datum: C×H×W
 * planes, colour planes in B, G, R order.  Into out8 (c*h*w bytes) or, when out8
 * is NULL, outf (c*h*w floats, the same values). */
void image_to_planes(const struct image *img, uint8_t *out8, float *outf);
/* The inverse: planes (c*h*w bytes, as above) into img->px, which the caller has
 * sized for img's w, h and c. */
void image_from_planes(struct image *img, const uint8_t *planes);

/* Resize src to w×h with DIGITS' mode semantics (digits.md §2.5) and bilinear
 * resampling as PIL does it (a triangle filter widened by the scale factor when
 * shrinking; byte-identical to Pillow 9's Image.resize(BILINEAR)).  Sizes and crop
 * offsets use Python 2's round() (half away from zero), as DIGITS ran on Python 2.
 * Fill noise is uniform 0..254 drawn from a generator seeded with `seed`, so the
 * same inputs give the same output; like DIGITS, the same noise block pads both
 * ends.  A scaled side that would round to 0 pixels becomes 1.  If src is already
 * w×h it is copied unchanged.  Caller frees out with image_free(). */
int image_resize(const struct image *src, int w, int h, enum resize_mode mode, uint64_t seed,
		 struct image *out, struct dd_err *err);

/* The same geometry as image_resize (the modes' scale, crop and padding, so each
 * pixel lands where image_resize puts its image's pixel) with nearest-neighbour
 * sampling (Pillow's NEAREST: source = floor((x + 0.5) * in / out)), for label
 * images: every output value is a value of src, or `pad` where the mode pads
 * (fill, half_crop).  Caller frees out with image_free(). */
int image_resize_nearest(const struct image *src, int w, int h, enum resize_mode mode, uint8_t pad,
			 struct image *out, struct dd_err *err);

/* What a label PNG holds (image_decode_label). */
enum image_label_kind { IMAGE_LABEL_PALETTE, IMAGE_LABEL_GRAY, IMAGE_LABEL_RGB };

/* Decode a segmentation label PNG without converting its samples: palette PNGs
 * give their indices (c = 1) and their palette (palette[3*i..] = R, G, B of entry
 * i, *npalette entries; the rest zero), grayscale PNGs their values (c = 1; 1, 2
 * and 4 bits unscaled, 16 bits only if every value is at most 255), RGB PNGs their
 * colours (c = 3).  Not a PNG, or one with alpha: DD_EINVAL naming the file and
 * the mode.  The eXIf orientation is applied as image_decode does.  Caller frees
 * out with image_free(). */
int image_decode_label(const void *data, size_t len, const char *name, int64_t max_pixels,
		       struct image *out, enum image_label_kind *kind, uint8_t palette[768], int *npalette,
		       struct dd_err *err);

/* Encode as PNG or JPEG.  PNG level: 0 stores; 1..6 use PNG's adaptive filters
 * with zlib's run-length strategy (about 4x faster than zlib level 6 on photos,
 * files within ~1%); 7..9 use zlib's full matcher at that level.  JPEG: quality
 * 1..100, 4:2:0 for colour (PIL's default), gray for C = 1.  *out is malloc'ed;
 * caller frees with free(). */
int image_encode_png(const struct image *img, int level, uint8_t **out, size_t *len,
		     struct dd_err *err);
int image_encode_jpeg(const struct image *img, int quality, uint8_t **out, size_t *len,
		      struct dd_err *err);

/* A 1-channel image of palette indices as an 8-bit palette PNG (a label, a mask):
 * palette holds npalette (1..256) R, G, B triples.  *out is malloc'ed; caller
 * frees with free(). */
int image_encode_png_palette(const struct image *idx, const uint8_t *palette, int npalette, uint8_t **out,
			     size_t *len, struct dd_err *err);

void image_free(struct image *img);

#endif
