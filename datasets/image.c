/* image.c — decode, convert, resize and encode images (see image.h).
 *
 * Design notes.
 *
 * The invariant of `struct image`: px holds exactly h*w*c bytes, c is 1 or 3, rows
 * top to bottom, samples interleaved; an empty image is all zeros (px == NULL).
 * Every public function leaves its output empty on failure, so a caller can always
 * image_free() both sides without tracking what succeeded.
 *
 * Parity with DIGITS (digits/utils/image.py, which runs on Python 2 and Pillow):
 *  - Alpha is composited on white exactly as PIL's paste(mask=...) does:
 *    out = round((a*v + (255-a)*255) / 255) (PIL's DIV255, exact for this range).
 *  - Palette PNGs with tRNS are composited; a tRNS colour key on a gray or RGB PNG is
 *    ignored, as PIL leaves such images in mode L/RGB and DIGITS never looks at it.
 *  - 16-bit samples (PNG, PNM with maxval > 255) are reduced with rounding,
 *    (v*255 + 32767) / 65535, not by taking the top byte (PIL takes the top byte for
 *    16-bit RGB PNGs and refuses 16-bit gray; the two differ by at most 1).
 *  - CMYK JPEGs are taken to be stored inverted (Adobe polarity), as PIL always
 *    assumes ("CMYK;I"), and converted as PIL does: R = (255-K) - round(C'(255-K)/255).
 *  - RGB -> gray is PIL's convert('L'): (R*19595 + G*38470 + B*7471 + 0x8000) >> 16.
 *  - Resampling is Pillow's BILINEAR resize (libImaging/Resample.c): separable,
 *    horizontal pass first with the intermediate rounded to 8 bits, a triangle filter
 *    whose support is widened by in/out when shrinking, fixed-point coefficients with
 *    22 fractional bits.  It gives the same bytes as Pillow 9 (checked against it on
 *    random sizes); the float code of Pillow 3.3 that DIGITS shipped with rounds
 *    differently and can be 1 off in some pixels.
 *  - The mode arithmetic follows resize_image() to the letter, with Python 2's
 *    round() (half away from zero: round(2.5) == 3), which is what DIGITS ran on.
 *  - Fill noise: DIGITS draws ONE noise block and concatenates it on both ends
 *    (np.concatenate((noise, image, noise))), so the two pads are identical; we do
 *    the same, from a seeded splitmix64 instead of np.random.
 * Deliberate differences from DIGITS: EXIF orientation is applied, a JPEG's and a
 * PNG's eXIf chunk's (PIL's open() does not; browsers and exif_transpose do); a
 * scaled side that would round to 0 pixels becomes 1 (DIGITS crashes there).
 *
 * Speed (the dataset pipeline aims at five times a PIL pipeline):
 *  - Decoders write straight into the output buffer when no conversion is needed.
 *  - The resize precomputes integer coefficients per output column and row,
 *    computes only the part of the scaled image that survives the crop, and runs
 *    both passes as fixed-width blocks of 16 sums that the compiler vectorises (the
 *    horizontal pass transposes 16 rows at a time to get that shape); on x86-64 GCC
 *    also builds AVX2 clones of the two passes, picked at load time.  The result
 *    stays bit-exact with Pillow.
 *  - PNG encoding at levels 1..6 uses zlib's Z_RLE after PNG filtering (see
 *    png_write_guarded) and a zlib memLevel sized to the image, which together make
 *    a 28x28 encode about twice and a 256x256 photo about four times as fast as
 *    zlib's defaults, for files about 1% larger. */
#include "image.h"

#include <math.h>
#include <png.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <turbojpeg.h>
#include <zlib.h>
#ifdef __SSE2__
#include <emmintrin.h>

#include "../common/rng.h"
#endif

/* ------------------------------------------------------------------------------
 * Small helpers */

static const char *nm(const char *name)
{
	return name && *name ? name : "image";
}

static const char *format_label(enum image_format f)
{
	switch (f) {
	case IMAGE_PNG: return "PNG";
	case IMAGE_JPEG: return "JPEG";
	case IMAGE_PNM: return "PNM";
	case IMAGE_BMP: return "BMP";
	default: return "unknown";
	}
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* round(x / 255) for 0 <= x <= 255*255, PIL's DIV255. */
static inline uint8_t div255(uint32_t x)
{
	x += 128;
	return (uint8_t)((x + (x >> 8)) >> 8);
}

/* A 16-bit sample reduced to 8 bits with rounding. */
static inline uint8_t s16to8(uint32_t v)
{
	return (uint8_t)((v * 255 + 32767) / 65535);
}

/* Check a header's dimensions against the cap before anything is allocated. */
static int check_dims(int64_t w, int64_t h, int64_t max_pixels, const char *name,
		      const char *what, struct dd_err *err)
{
	if (w <= 0 || h <= 0)
		return dd_err_set(err, DD_EINVAL, "%s: invalid %s header (%lldx%lld pixels)", nm(name),
				  what, (long long)w, (long long)h);
	if (w > INT32_MAX || h > INT32_MAX || w * h > max_pixels)
		return dd_err_set(err, DD_ETOOBIG,
				  "%s: %lldx%lld pixels is over the cap of %lld pixels per image",
				  nm(name), (long long)w, (long long)h, (long long)max_pixels);
	return DD_OK;
}

static int img_alloc(struct image *img, int w, int h, int c, const char *name, struct dd_err *err)
{
	img->px = malloc((size_t)w * (size_t)h * (size_t)c);
	if (!img->px)
		return dd_err_set(err, DD_ENOMEM, "%s: out of memory for a %dx%d image", nm(name), w, h);
	img->w = w;
	img->h = h;
	img->c = c;
	return DD_OK;
}

void image_free(struct image *img)
{
	if (!img)
		return;
	free(img->px);
	memset(img, 0, sizeof *img);
}

/* ------------------------------------------------------------------------------
 * Names, sniffing, extensions */

const char *resize_mode_name(enum resize_mode m)
{
	switch (m) {
	case RESIZE_SQUASH: return "squash";
	case RESIZE_CROP: return "crop";
	case RESIZE_FILL: return "fill";
	case RESIZE_HALF_CROP: return "half_crop";
	}
	return "unknown";
}

int resize_mode_parse(const char *s, enum resize_mode *out)
{
	static const enum resize_mode all[] = {RESIZE_SQUASH, RESIZE_CROP, RESIZE_FILL,
					       RESIZE_HALF_CROP};
	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		if (strcmp(s, resize_mode_name(all[i])) == 0) {
			if (out)
				*out = all[i];
			return 0;
		}
	}
	return -1;
}

enum image_format image_sniff(const void *data, size_t len)
{
	static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	const uint8_t *p = data;
	if (!p)
		return IMAGE_UNKNOWN;
	if (len >= 8 && memcmp(p, png_sig, 8) == 0)
		return IMAGE_PNG;
	if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
		return IMAGE_JPEG;
	/* "BM" alone is too weak (it starts plenty of text), so the DIB header size at
	 * offset 14 must be one of the known ones as well. */
	if (len >= 18 && p[0] == 'B' && p[1] == 'M') {
		uint32_t hs = le32(p + 14);
		if (hs == 12 || hs == 40 || hs == 52 || hs == 56 || hs == 64 || hs == 108 || hs == 124)
			return IMAGE_BMP;
	}
	/* P1..P7 are all reported as PNM so that the unsupported ones get a message that
	 * says so rather than "unknown format". */
	if (len >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '7' &&
	    (p[2] == ' ' || p[2] == '\t' || p[2] == '\n' || p[2] == '\r' || p[2] == '#'))
		return IMAGE_PNM;
	return IMAGE_UNKNOWN;
}

/* The format that `name`'s extension promises, or IMAGE_UNKNOWN. */
static enum image_format ext_format(const char *name)
{
	static const struct {
		const char *ext;
		enum image_format f;
	} exts[] = {{".png", IMAGE_PNG}, {".jpg", IMAGE_JPEG}, {".jpeg", IMAGE_JPEG},
		    {".bmp", IMAGE_BMP}, {".ppm", IMAGE_PNM},  {".pgm", IMAGE_PNM},
		    {".pnm", IMAGE_PNM}};
	if (!name)
		return IMAGE_UNKNOWN;
	const char *dot = strrchr(name, '.');
	if (!dot || strchr(dot, '/'))
		return IMAGE_UNKNOWN;
	for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
		if (strcasecmp(dot, exts[i].ext) == 0)
			return exts[i].f;
	return IMAGE_UNKNOWN;
}

int image_has_image_ext(const char *name)
{
	return ext_format(name) != IMAGE_UNKNOWN;
}

/* ------------------------------------------------------------------------------
 * EXIF orientation (JPEG APP1 "Exif" segments, PNG eXIf chunks): the TIFF
 * block's IFD0 Orientation tag, and the turn or flip it asks for, applied after
 * decoding as browsers and Pillow's ImageOps.exif_transpose do. */

static unsigned rd16e(const uint8_t *p, int le)
{
	return le ? (unsigned)(p[0] | p[1] << 8) : (unsigned)(p[0] << 8 | p[1]);
}

static uint32_t rd32e(const uint8_t *p, int le)
{
	return le ? le32(p) : be32(p);
}

/* The orientation tag (0x0112) of IFD0 of an Exif TIFF block, or 0. */
static int tiff_orientation(const uint8_t *t, size_t n)
{
	if (n < 8)
		return 0;
	int le;
	if (t[0] == 'I' && t[1] == 'I')
		le = 1;
	else if (t[0] == 'M' && t[1] == 'M')
		le = 0;
	else
		return 0;
	if (rd16e(t + 2, le) != 42)
		return 0;
	uint32_t ifd = rd32e(t + 4, le);
	if (ifd > n - 2)
		return 0;
	unsigned count = rd16e(t + ifd, le);
	for (unsigned k = 0; k < count; k++) {
		size_t e = (size_t)ifd + 2 + 12 * (size_t)k;
		if (e + 12 > n)
			break;
		if (rd16e(t + e, le) != 0x0112)
			continue;
		unsigned type = rd16e(t + e + 2, le), v;
		if (type == 3) /* SHORT: left-justified in the value field, either order */
			v = rd16e(t + e + 8, le);
		else if (type == 4) /* LONG, seen in the wild */
			v = rd32e(t + e + 8, le);
		else
			return 0;
		return v >= 1 && v <= 8 ? (int)v : 0;
	}
	return 0;
}

/* Apply an EXIF orientation: out(dx, dy) = in(base + dx*sdx + dy*sdy), in pixels.
 * Orientations 5..8 swap width and height.  Replaces img->px. */
static int apply_orientation(struct image *img, int o, const char *name, struct dd_err *err)
{
	int W = img->w, H = img->h, c = img->c;
	ptrdiff_t base, sdx, sdy;
	switch (o) {
	case 2: base = W - 1; sdx = -1; sdy = W; break;
	case 3: base = (ptrdiff_t)(H - 1) * W + W - 1; sdx = -1; sdy = -W; break;
	case 4: base = (ptrdiff_t)(H - 1) * W; sdx = 1; sdy = -W; break;
	case 5: base = 0; sdx = W; sdy = 1; break;
	case 6: base = (ptrdiff_t)(H - 1) * W; sdx = -W; sdy = 1; break;
	case 7: base = (ptrdiff_t)(H - 1) * W + W - 1; sdx = -W; sdy = -1; break;
	case 8: base = W - 1; sdx = W; sdy = -1; break;
	default: return DD_OK;
	}
	int ow = o >= 5 ? H : W, oh = o >= 5 ? W : H;
	struct image t = {0};
	int rc = img_alloc(&t, ow, oh, c, name, err);
	if (rc)
		return rc;
	const uint8_t *src = img->px;
	uint8_t *dst = t.px;
	for (int dy = 0; dy < oh; dy++) {
		ptrdiff_t s = base + dy * sdy;
		if (c == 1) {
			for (int dx = 0; dx < ow; dx++, s += sdx)
				*dst++ = src[s];
		} else {
			for (int dx = 0; dx < ow; dx++, s += sdx) {
				const uint8_t *q = src + 3 * s;
				*dst++ = q[0];
				*dst++ = q[1];
				*dst++ = q[2];
			}
		}
	}
	image_free(img);
	*img = t;
	return DD_OK;
}

/* EXIF orientation 1..8 from an eXIf chunk before the first IDAT, where the PNG
 * specification puts it and the only place Chromium looks (Pillow also takes one
 * after the image data; a browser would show that image unturned, so we do too);
 * 1 if none.  Only chunk lengths are trusted, each checked against the file. */
static int png_orientation(const uint8_t *p, size_t len)
{
	size_t i = 8;
	while (len >= 12 && i <= len - 12) {
		uint32_t n = be32(p + i);
		const uint8_t *type = p + i + 4;
		if (memcmp(type, "IDAT", 4) == 0 || memcmp(type, "IEND", 4) == 0 || n > len - i - 12)
			return 1;
		if (memcmp(type, "eXIf", 4) == 0) {
			int o = tiff_orientation(p + i + 8, n);
			return o ? o : 1;
		}
		i += 12 + (size_t)n;
	}
	return 1;
}

/* ------------------------------------------------------------------------------
 * PNG decoding (libpng's classic API: it lets us see IHDR before allocating and
 * keeps gamma out of it, as PIL does). */

struct png_rd {
	const uint8_t *p;
	size_t len, pos;
	int eof;          /* the reader ran out of bytes */
	char msg[200];    /* libpng's error message */
};

static void png_on_error(png_structp png, png_const_charp msg)
{
	struct png_rd *rd = png_get_error_ptr(png);
	snprintf(rd->msg, sizeof rd->msg, "%s", msg);
	png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg; /* warnings (bad ancillary chunks, sRGB profiles) never refuse an image */
}

static void png_read_mem(png_structp png, png_bytep dst, png_size_t n)
{
	struct png_rd *rd = png_get_io_ptr(png);
	if (n > rd->len - rd->pos) {
		rd->eof = 1;
		png_error(png, "unexpected end of file");
	}
	memcpy(dst, rd->p + rd->pos, n);
	rd->pos += n;
}

/* One row as libpng hands it (n channels of `depth` bits, after our transforms) to
 * 8-bit gray or RGB with alpha composited on white.  `row` is scratch. */
static void png_row_convert(uint8_t *row, int w, int n, int depth, uint8_t *dst)
{
	size_t ns = (size_t)w * (size_t)n;
	if (depth == 16) {
		for (size_t i = 0; i < ns; i++)
			row[i] = s16to8((uint32_t)row[2 * i] << 8 | row[2 * i + 1]);
	}
	switch (n) {
	case 1:
	case 3:
		memcpy(dst, row, ns);
		break;
	case 2:
		for (int x = 0; x < w; x++) {
			uint32_t a = row[2 * x + 1];
			dst[x] = div255(row[2 * x] * a + (255 - a) * 255);
		}
		break;
	case 4:
		for (int x = 0; x < w; x++) {
			const uint8_t *s = row + 4 * x;
			uint32_t a = s[3], bg = (255 - a) * 255;
			dst[3 * x + 0] = div255(s[0] * a + bg);
			dst[3 * x + 1] = div255(s[1] * a + bg);
			dst[3 * x + 2] = div255(s[2] * a + bg);
		}
		break;
	}
}

struct png_job {
	png_structp png;
	png_infop info;
	uint8_t *tmp;      /* rows as libpng delivers them, when they need converting */
	png_bytep *rows;   /* row pointers for an interlaced read */
};

/* Read up to the image data and check the size: the start both PNG readers share.
 * Called under the caller's setjmp (libpng may longjmp out of it). */
static int png_read_header(png_structp png, png_infop info, struct png_rd *rd, int64_t max_pixels, const char *name,
			   png_uint_32 *w, png_uint_32 *h, int *depth, int *type, int *interlace, struct dd_err *err)
{
	png_set_read_fn(png, rd, png_read_mem);
	/* Our own cap (checked on the raw IHDR already) replaces libpng's default limit
	 * of 1e6 pixels per side. */
	png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
	png_read_info(png, info);
	png_get_IHDR(png, info, w, h, depth, type, interlace, NULL, NULL);
	return check_dims(*w, *h, max_pixels, name, "PNG", err);
}

/* What a PNG's first 33 bytes must be, checked before libpng allocates anything:
 * IHDR first, at a fixed offset, and a size under the cap. */
static int png_precheck(const uint8_t *data, size_t len, const char *name, int64_t max_pixels, struct dd_err *err)
{
	if (len < 33)
		return dd_err_set(err, DD_EINVAL, "%s: truncated PNG (the file ends at byte %zu, inside the header)",
				  nm(name), len);
	if (memcmp(data + 12, "IHDR", 4) != 0)
		return dd_err_set(err, DD_EINVAL, "%s: corrupt PNG (the first chunk is not IHDR)", nm(name));
	return check_dims(be32(data + 16), be32(data + 20), max_pixels, name, "PNG", err);
}

/* The sentence for a libpng error (after its longjmp). */
static int png_failed(const struct png_rd *rd, const char *name, size_t len, struct dd_err *err)
{
	if (rd->eof)
		return dd_err_set(err, DD_EINVAL,
				  "%s: truncated PNG (the file ends at byte %zu, before the image data is complete)", nm(name),
				  len);
	return dd_err_set(err, DD_EINVAL, "%s: truncated or corrupt PNG (%s)", nm(name), rd->msg);
}

/* The part of decode_png that libpng may longjmp out of.  Everything it acquires
 * is recorded in *job or *out (memory the caller owns), never in locals, so
 * nothing is lost to the longjmp; decode_png releases it.  Returns 0, or 1 after a
 * libpng error (message in rd->msg). */
static int png_read_guarded(struct png_job *job, struct png_rd *rd, int64_t max_pixels,
			    const char *name, struct image *out, struct dd_err *err, int *rc)
{
	png_structp png = job->png;
	png_infop info = job->info;
	if (setjmp(png_jmpbuf(png)))
		return 1;
	png_uint_32 w, h;
	int depth, type, interlace;
	if ((*rc = png_read_header(png, info, rd, max_pixels, name, &w, &h, &depth, &type, &interlace, err)))
		return 0;
	if (type == PNG_COLOR_TYPE_PALETTE) {
		png_set_palette_to_rgb(png);
		if (png_get_valid(png, info, PNG_INFO_tRNS))
			png_set_tRNS_to_alpha(png);
	} else if (depth < 8) {
		png_set_expand_gray_1_2_4_to_8(png);
	}
	if (interlace != PNG_INTERLACE_NONE)
		png_set_interlace_handling(png);
	png_read_update_info(png, info);

	int n = png_get_channels(png, info);
	int odepth = png_get_bit_depth(png, info);
	size_t rowbytes = png_get_rowbytes(png, info);
	int c = n <= 2 ? 1 : 3;
	if ((*rc = img_alloc(out, (int)w, (int)h, c, name, err)))
		return 0;
	/* Gray and RGB at 8 bits are read straight into the output. */
	int direct = odepth == 8 && n == c;
	size_t ostride = (size_t)w * (size_t)c;

	if (interlace == PNG_INTERLACE_NONE) {
		if (!direct && !(job->tmp = malloc(rowbytes)))
			goto oom;
		for (png_uint_32 y = 0; y < h; y++) {
			uint8_t *dst = out->px + y * ostride;
			if (direct) {
				png_read_row(png, dst, NULL);
			} else {
				png_read_row(png, job->tmp, NULL);
				png_row_convert(job->tmp, (int)w, n, odepth, dst);
			}
		}
	} else {
		/* Adam7 needs the whole image at once. */
		if (!(job->rows = malloc(h * sizeof *job->rows)))
			goto oom;
		if (!direct && !(job->tmp = malloc(rowbytes * h)))
			goto oom;
		for (png_uint_32 y = 0; y < h; y++)
			job->rows[y] = direct ? out->px + y * ostride : job->tmp + y * rowbytes;
		png_read_image(png, job->rows);
		if (!direct)
			for (png_uint_32 y = 0; y < h; y++)
				png_row_convert(job->rows[y], (int)w, n, odepth, out->px + y * ostride);
	}
	/* png_read_end is not called: chunks after the image data cannot change the
	 * pixels, and PIL does not read them either. */
	*rc = DD_OK;
	return 0;
oom:
	*rc = dd_err_set(err, DD_ENOMEM, "%s: out of memory decoding a %ux%u PNG", nm(name),
			 (unsigned)w, (unsigned)h);
	return 0;
}

static int decode_png(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
		      struct image *out, struct dd_err *err)
{
	int rc = png_precheck(data, len, name, max_pixels, err);
	if (rc)
		return rc;

	struct png_rd rd = {.p = data, .len = len};
	struct png_job job = {0};
	job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &rd, png_on_error, png_on_warning);
	if (!job.png || !(job.info = png_create_info_struct(job.png))) {
		rc = dd_err_set(err, DD_ENOMEM, "%s: out of memory starting the PNG decoder", nm(name));
		goto fail;
	}
	if (png_read_guarded(&job, &rd, max_pixels, name, out, err, &rc))
		rc = png_failed(&rd, name, len, err);
	if (rc)
		goto fail;
	png_destroy_read_struct(&job.png, &job.info, NULL);
	free(job.rows);
	free(job.tmp);
	int o = png_orientation(data, len);
	if (o != 1 && (rc = apply_orientation(out, o, name, err))) {
		image_free(out);
		return rc;
	}
	return DD_OK;
fail:
	if (job.png)
		png_destroy_read_struct(&job.png, job.info ? &job.info : NULL, NULL);
	free(job.rows);
	free(job.tmp);
	image_free(out);
	return rc;
}

/* ------------------------------------------------------------------------------
 * Label PNGs (segmentation): the samples as stored, never converted.  A palette
 * PNG gives its indices (1, 2 and 4 bits unpacked, never scaled) and its palette;
 * a gray PNG its values (1..8 bits as they are; 16 bits only when every value
 * fits a byte); an RGB PNG its colours (16 bits reduced as image_decode does).
 * Alpha (gray+alpha, RGBA) is refused: a class cannot be half transparent. */

struct png_label_job {
	struct png_job j;
	enum image_label_kind *kind;
	uint8_t *palette;
	int *npalette;
};

static const char *png_type_name(int type)
{
	switch (type) {
	case PNG_COLOR_TYPE_GRAY_ALPHA: return "grayscale with alpha";
	case PNG_COLOR_TYPE_RGB_ALPHA: return "RGBA";
	default: return "of an unknown colour type";
	}
}

static int png_label_guarded(struct png_label_job *lj, struct png_rd *rd, int64_t max_pixels,
			     const char *name, struct image *out, struct dd_err *err, int *rc)
{
	png_structp png = lj->j.png;
	png_infop info = lj->j.info;
	if (setjmp(png_jmpbuf(png)))
		return 1;
	png_uint_32 w, h;
	int depth, type, interlace;
	if ((*rc = png_read_header(png, info, rd, max_pixels, name, &w, &h, &depth, &type, &interlace, err)))
		return 0;
	int c;
	if (type == PNG_COLOR_TYPE_PALETTE || type == PNG_COLOR_TYPE_GRAY) {
		c = 1;
		*lj->kind = type == PNG_COLOR_TYPE_PALETTE ? IMAGE_LABEL_PALETTE : IMAGE_LABEL_GRAY;
		if (depth < 8)
			png_set_packing(png); /* one byte a sample, the value unscaled */
		if (type == PNG_COLOR_TYPE_PALETTE) {
			png_colorp pal = NULL;
			int np = 0;
			png_get_PLTE(png, info, &pal, &np);
			for (int i = 0; i < np && i < 256; i++) {
				lj->palette[3 * i] = pal[i].red;
				lj->palette[3 * i + 1] = pal[i].green;
				lj->palette[3 * i + 2] = pal[i].blue;
			}
			*lj->npalette = np;
		}
	} else if (type == PNG_COLOR_TYPE_RGB) {
		c = 3;
		*lj->kind = IMAGE_LABEL_RGB;
	} else {
		*rc = dd_err_set(err, DD_EINVAL,
				 "%s: a label PNG must be palette, grayscale or RGB, and this one is %s", nm(name),
				 png_type_name(type));
		return 0;
	}
	if (interlace != PNG_INTERLACE_NONE)
		png_set_interlace_handling(png);
	png_read_update_info(png, info);
	size_t rowbytes = png_get_rowbytes(png, info);
	if ((*rc = img_alloc(out, (int)w, (int)h, c, name, err)))
		return 0;
	if (!(lj->j.rows = malloc(h * sizeof *lj->j.rows)) || !(lj->j.tmp = malloc(rowbytes * h))) {
		*rc = dd_err_set(err, DD_ENOMEM, "%s: out of memory decoding a %ux%u PNG", nm(name), (unsigned)w,
				 (unsigned)h);
		return 0;
	}
	for (png_uint_32 y = 0; y < h; y++)
		lj->j.rows[y] = lj->j.tmp + y * rowbytes;
	png_read_image(png, lj->j.rows);
	size_t ns = (size_t)w * (size_t)c;
	for (png_uint_32 y = 0; y < h; y++) {
		const uint8_t *s = lj->j.rows[y];
		uint8_t *d = out->px + y * ns;
		if (depth != 16) {
			memcpy(d, s, ns);
			continue;
		}
		for (size_t i = 0; i < ns; i++) {
			uint32_t v = (uint32_t)s[2 * i] << 8 | s[2 * i + 1];
			if (c == 3) {
				d[i] = s16to8(v);
			} else if (v > 255) {
				*rc = dd_err_set(err, DD_EINVAL,
						 "%s: 16-bit grayscale value %u at (%zu, %u) is not a class index (0 to 255)",
						 nm(name), v, i, (unsigned)y);
				return 0;
			} else {
				d[i] = (uint8_t)v;
			}
		}
	}
	*rc = DD_OK;
	return 0;
}

int image_decode_label(const void *vdata, size_t len, const char *name, int64_t max_pixels,
		       struct image *out, enum image_label_kind *kind, uint8_t palette[768], int *npalette,
		       struct dd_err *err)
{
	const uint8_t *data = vdata;
	memset(out, 0, sizeof *out);
	*npalette = 0;
	memset(palette, 0, 768);
	if (max_pixels <= 0)
		max_pixels = IMAGE_DEFAULT_MAX_PIXELS;
	if (image_sniff(data, len) != IMAGE_PNG)
		return dd_err_set(err, DD_EINVAL, "%s: a label must be a PNG (palette, grayscale or RGB)", nm(name));
	int rc = png_precheck(data, len, name, max_pixels, err);
	if (rc)
		return rc;
	struct png_rd rd = {.p = data, .len = len};
	struct png_label_job lj = {.kind = kind, .palette = palette, .npalette = npalette};
	lj.j.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &rd, png_on_error, png_on_warning);
	if (!lj.j.png || !(lj.j.info = png_create_info_struct(lj.j.png))) {
		rc = dd_err_set(err, DD_ENOMEM, "%s: out of memory starting the PNG decoder", nm(name));
		goto done;
	}
	if (png_label_guarded(&lj, &rd, max_pixels, name, out, err, &rc))
		rc = png_failed(&rd, name, len, err);
	if (rc == DD_OK) {
		int o = png_orientation(data, len);
		if (o != 1)
			rc = apply_orientation(out, o, name, err);
	}
done:
	if (lj.j.png)
		png_destroy_read_struct(&lj.j.png, lj.j.info ? &lj.j.info : NULL, NULL);
	free(lj.j.rows);
	free(lj.j.tmp);
	if (rc)
		image_free(out);
	return rc;
}

/* ------------------------------------------------------------------------------
 * JPEG decoding (TurboJPEG 2.1) */

/* EXIF orientation 1..8 from the APP1 segments before the first scan; 1 if none. */
static int jpeg_orientation(const uint8_t *p, size_t len)
{
	size_t i = 2;
	while (i + 4 <= len) {
		if (p[i] != 0xff)
			return 1;
		uint8_t m = p[i + 1];
		if (m == 0xff) { /* fill byte */
			i++;
			continue;
		}
		if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) { /* no length */
			i += 2;
			continue;
		}
		if (m == 0xda || m == 0xd9)
			return 1;
		size_t seg = (size_t)p[i + 2] << 8 | p[i + 3];
		if (seg < 2 || seg > len - i - 2)
			return 1;
		if (m == 0xe1 && seg >= 8 && memcmp(p + i + 4, "Exif\0\0", 6) == 0) {
			int o = tiff_orientation(p + i + 10, seg - 8);
			if (o)
				return o;
		}
		i += 2 + seg;
	}
	return 1;
}

static int decode_jpeg(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
		       struct image *out, struct dd_err *err)
{
	int rc, w = 0, h = 0, subsamp = -1, cs = -1;
	uint8_t *cmyk = NULL;
	tjhandle tj = tjInitDecompress();
	if (!tj)
		return dd_err_set(err, DD_ENOMEM, "%s: cannot start the JPEG decoder", nm(name));
	if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &cs) < 0) {
		rc = dd_err_set(err, DD_EINVAL, "%s: truncated or corrupt JPEG (%s)", nm(name),
				tjGetErrorStr2(tj));
		goto fail;
	}
	/* A file cut inside its tables reads as a tables-only stream: no size. */
	if (w <= 0 || h <= 0) {
		rc = dd_err_set(err, DD_EINVAL, "%s: truncated or corrupt JPEG (no frame header)", nm(name));
		goto fail;
	}
	if ((rc = check_dims(w, h, max_pixels, name, "JPEG", err)))
		goto fail;

	int pf, c = 3;
	uint8_t *dst;
	if (cs == TJCS_GRAY) {
		pf = TJPF_GRAY;
		c = 1;
	} else if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
		pf = TJPF_CMYK;
	} else {
		pf = TJPF_RGB;
	}
	if ((rc = img_alloc(out, w, h, c, name, err)))
		goto fail;
	dst = out->px;
	if (pf == TJPF_CMYK) {
		if (!(cmyk = malloc((size_t)w * (size_t)h * 4))) {
			rc = dd_err_set(err, DD_ENOMEM, "%s: out of memory decoding a %dx%d JPEG",
					nm(name), w, h);
			goto fail;
		}
		dst = cmyk;
	}
	/* TJFLAG_LIMITSCANS refuses progressive files with absurd scan counts (a
	 * known way to burn minutes of CPU on a small file). */
	if (tjDecompress2(tj, data, (unsigned long)len, dst, w, 0, h, pf, TJFLAG_LIMITSCANS) < 0) {
		const char *m = tjGetErrorStr2(tj);
		/* libjpeg reports a file cut short as a warning and fills the rest with
		 * gray; we refuse it, as PIL does.  Other warnings ("extraneous bytes
		 * before marker") leave a usable image that PIL accepts too. */
		if (strstr(m, "Premature end")) {
			rc = dd_err_set(err, DD_EINVAL, "%s: truncated JPEG (%s)", nm(name), m);
			goto fail;
		}
		if (tjGetErrorCode(tj) != TJERR_WARNING) {
			rc = dd_err_set(err, DD_EINVAL, "%s: truncated or corrupt JPEG (%s)", nm(name), m);
			goto fail;
		}
	}
	if (cmyk) {
		/* Inverted (Adobe) CMYK to RGB, PIL's cmyk2rgb on the un-inverted values. */
		size_t n = (size_t)w * (size_t)h;
		uint8_t *o = out->px;
		for (size_t i = 0; i < n; i++) {
			const uint8_t *s = cmyk + 4 * i;
			uint32_t nk = s[3]; /* stored inverted: 255 - K */
			o[3 * i + 0] = (uint8_t)(nk - div255((255u - s[0]) * nk));
			o[3 * i + 1] = (uint8_t)(nk - div255((255u - s[1]) * nk));
			o[3 * i + 2] = (uint8_t)(nk - div255((255u - s[2]) * nk));
		}
		free(cmyk);
		cmyk = NULL;
	}
	int o = jpeg_orientation(data, len);
	if (o != 1 && (rc = apply_orientation(out, o, name, err)))
		goto fail;
	tjDestroy(tj);
	return DD_OK;
fail:
	free(cmyk);
	image_free(out);
	tjDestroy(tj);
	return rc;
}

/* ------------------------------------------------------------------------------
 * PNM (P2, P3, P5, P6) */

struct pnm_cur {
	const uint8_t *p;
	size_t len, pos;
};

static int pnm_is_space(uint8_t ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Skip whitespace and '#' comments (to the end of the line). */
static void pnm_skip(struct pnm_cur *c)
{
	while (c->pos < c->len) {
		uint8_t ch = c->p[c->pos];
		if (pnm_is_space(ch)) {
			c->pos++;
		} else if (ch == '#') {
			while (c->pos < c->len && c->p[c->pos] != '\n' && c->p[c->pos] != '\r')
				c->pos++;
		} else {
			break;
		}
	}
}

/* A decimal number; -1 if there is none, -2 if it is absurdly large. */
static int64_t pnm_number(struct pnm_cur *c)
{
	pnm_skip(c);
	if (c->pos >= c->len || c->p[c->pos] < '0' || c->p[c->pos] > '9')
		return -1;
	int64_t v = 0;
	while (c->pos < c->len && c->p[c->pos] >= '0' && c->p[c->pos] <= '9') {
		v = v * 10 + (c->p[c->pos++] - '0');
		if (v > INT32_MAX)
			return -2;
	}
	return v;
}

static int decode_pnm(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
		      struct image *out, struct dd_err *err)
{
	char kind = (char)data[1];
	if (kind != '2' && kind != '3' && kind != '5' && kind != '6')
		return dd_err_set(err, DD_EINVAL,
				  "%s: unsupported PNM variant P%c (only P2, P3, P5 and P6 are read)",
				  nm(name), kind);
	int c = kind == '3' || kind == '6' ? 3 : 1;
	int ascii = kind == '2' || kind == '3';
	struct pnm_cur cur = {data, len, 2};
	int64_t w = pnm_number(&cur), h = pnm_number(&cur), maxval = pnm_number(&cur);
	if (w < 0 || h < 0 || maxval < 0)
		return dd_err_set(err, DD_EINVAL, "%s: truncated or corrupt PNM header", nm(name));
	if (maxval < 1 || maxval > 65535)
		return dd_err_set(err, DD_EINVAL, "%s: corrupt PNM header (maxval %lld is not 1..65535)",
				  nm(name), (long long)maxval);
	int rc = check_dims(w, h, max_pixels, name, "PNM", err);
	if (rc)
		return rc;
	size_t ns = (size_t)w * (size_t)h * (size_t)c;
	int wide = maxval > 255;

	if (!ascii) {
		/* Exactly one whitespace byte separates maxval from the raster. */
		if (cur.pos >= len || !pnm_is_space(data[cur.pos]))
			return dd_err_set(err, DD_EINVAL, "%s: corrupt PNM header (no whitespace after maxval)",
					  nm(name));
		cur.pos++;
		size_t need = ns * (wide ? 2 : 1);
		if (len - cur.pos < need)
			return dd_err_set(err, DD_EINVAL,
					  "%s: truncated PNM (%zu bytes of pixel data, %zu needed)", nm(name),
					  len - cur.pos, need);
	}
	if ((rc = img_alloc(out, (int)w, (int)h, c, name, err)))
		return rc;
	const uint8_t *s = data + cur.pos;
	uint8_t *o = out->px;
	uint32_t mv = (uint32_t)maxval;
	if (!ascii && maxval == 255) {
		memcpy(o, s, ns);
	} else if (!ascii && !wide) {
		uint8_t lut[256];
		for (uint32_t v = 0; v < 256; v++)
			lut[v] = v >= mv ? 255 : (uint8_t)((v * 255 + mv / 2) / mv);
		for (size_t i = 0; i < ns; i++)
			o[i] = lut[s[i]];
	} else if (!ascii) {
		for (size_t i = 0; i < ns; i++) {
			uint32_t v = (uint32_t)s[2 * i] << 8 | s[2 * i + 1];
			o[i] = v >= mv ? 255 : (uint8_t)((v * 255 + mv / 2) / mv);
		}
	} else {
		for (size_t i = 0; i < ns; i++) {
			int64_t v = pnm_number(&cur);
			if (v < 0) {
				rc = dd_err_set(err, DD_EINVAL,
						"%s: truncated or corrupt PNM (sample %zu of %zu is missing)",
						nm(name), i + 1, ns);
				image_free(out);
				return rc;
			}
			o[i] = (uint32_t)v >= mv ? 255 : (uint8_t)(((uint32_t)v * 255 + mv / 2) / mv);
		}
	}
	return DD_OK;
}

/* ------------------------------------------------------------------------------
 * BMP (uncompressed 1/4/8-bit palette, 24-bit, 32-bit) */

static int decode_bmp(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
		      struct image *out, struct dd_err *err)
{
	uint32_t hs = le32(data + 14);
	if (len < 14 + (size_t)hs)
		return dd_err_set(err, DD_EINVAL, "%s: truncated BMP (the header is incomplete)", nm(name));
	int64_t w, h;
	unsigned bpp;
	uint32_t comp = 0, nclr = 0;
	size_t pal_at = 14 + hs, pal_entry = 4;
	if (hs == 12) { /* OS/2 BITMAPCOREHEADER */
		w = le16(data + 18);
		h = le16(data + 20);
		bpp = le16(data + 24);
		pal_entry = 3;
	} else {
		w = (int32_t)le32(data + 18);
		h = (int32_t)le32(data + 22);
		bpp = le16(data + 28);
		comp = le32(data + 30);
		nclr = le32(data + 46);
	}
	int topdown = h < 0;
	if (topdown)
		h = -h;

	static const char *const comp_names[] = {"none", "RLE8", "RLE4", "bitfields", "JPEG", "PNG"};
	if (comp == 3 && bpp == 32) {
		/* BI_BITFIELDS with the standard masks is plain BGRX. */
		size_t m = 54; /* after BITMAPINFOHEADER, or inside the larger headers */
		if (len < m + 12 || le32(data + m) != 0x00ff0000 || le32(data + m + 4) != 0x0000ff00 ||
		    le32(data + m + 8) != 0x000000ff)
			return dd_err_set(err, DD_EINVAL,
					  "%s: unsupported BMP (32-bit with non-standard colour masks)", nm(name));
		if (hs == 40)
			pal_at += 12;
	} else if (comp != 0) {
		return dd_err_set(err, DD_EINVAL, "%s: unsupported BMP (%s compression)", nm(name),
				  comp < 6 ? comp_names[comp] : "unknown");
	}
	if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32)
		return dd_err_set(err, DD_EINVAL, "%s: unsupported BMP (%u bits per pixel)", nm(name), bpp);
	int rc = check_dims(w, h, max_pixels, name, "BMP", err);
	if (rc)
		return rc;

	uint8_t pal[256][3];
	int c = 3;
	if (bpp <= 8) {
		size_t n = nclr ? nclr : 1u << bpp;
		if (n > 256)
			n = 256;
		if (pal_at + n * pal_entry > len)
			return dd_err_set(err, DD_EINVAL, "%s: truncated BMP (the palette is incomplete)", nm(name));
		memset(pal, 0, sizeof pal);
		int gray = 1;
		for (size_t i = 0; i < n; i++) {
			const uint8_t *e = data + pal_at + i * pal_entry;
			pal[i][0] = e[2];
			pal[i][1] = e[1];
			pal[i][2] = e[0];
			gray &= e[0] == e[1] && e[1] == e[2];
		}
		/* A gray palette loses nothing as one channel. */
		if (gray)
			c = 1;
	}
	size_t stride = ((size_t)w * bpp + 31) / 32 * 4;
	size_t off = le32(data + 10);
	if (off > len || (len - off) / stride < (size_t)h)
		return dd_err_set(err, DD_EINVAL, "%s: truncated BMP (%zu bytes of pixel data, %zu needed)",
				  nm(name), off > len ? 0 : len - off, stride * (size_t)h);
	if ((rc = img_alloc(out, (int)w, (int)h, c, name, err)))
		return rc;
	for (int64_t y = 0; y < h; y++) {
		const uint8_t *s = data + off + stride * (size_t)(topdown ? y : h - 1 - y);
		uint8_t *o = out->px + (size_t)y * (size_t)w * (size_t)c;
		if (bpp == 24 || bpp == 32) {
			unsigned step = bpp / 8;
			for (int64_t x = 0; x < w; x++, s += step, o += 3) {
				o[0] = s[2];
				o[1] = s[1];
				o[2] = s[0];
			}
			continue;
		}
		unsigned per = 8 / bpp, mask = (1u << bpp) - 1;
		for (int64_t x = 0; x < w; x++) {
			unsigned shift = 8 - bpp * (unsigned)(x % per + 1);
			unsigned idx = (s[x / per] >> shift) & mask;
			if (c == 1) {
				*o++ = pal[idx][0];
			} else {
				*o++ = pal[idx][0];
				*o++ = pal[idx][1];
				*o++ = pal[idx][2];
			}
		}
	}
	return DD_OK;
}

/* ------------------------------------------------------------------------------
 * Decoding entry point */

int image_decode(const void *data, size_t len, const char *name, int64_t max_pixels,
		 struct image *out, struct dd_err *err)
{
	memset(out, 0, sizeof *out);
	if (!data || len == 0)
		return dd_err_set(err, DD_EINVAL, "%s: empty file", nm(name));
	if (max_pixels <= 0)
		max_pixels = IMAGE_DEFAULT_MAX_PIXELS;
	enum image_format f = image_sniff(data, len), want = ext_format(name);
	if (f == IMAGE_UNKNOWN)
		return dd_err_set(err, DD_EINVAL, "%s: not an image (unknown format)", nm(name));
	if (want != IMAGE_UNKNOWN && want != f)
		return dd_err_set(err, DD_EINVAL, "%s: the file is a %s, not a %s as its name says",
				  nm(name), format_label(f), format_label(want));
	switch (f) {
	case IMAGE_PNG: return decode_png(data, len, name, max_pixels, out, err);
	case IMAGE_JPEG: return decode_jpeg(data, len, name, max_pixels, out, err);
	case IMAGE_PNM: return decode_pnm(data, len, name, max_pixels, out, err);
	case IMAGE_BMP: return decode_bmp(data, len, name, max_pixels, out, err);
	default: break;
	}
	return dd_err_set(err, DD_EINTERNAL, "%s: unhandled image format", nm(name));
}

/* ------------------------------------------------------------------------------
 * Channels */

int image_set_channels(struct image *img, int channels, struct dd_err *err)
{
	if (!img || !img->px || (img->c != 1 && img->c != 3))
		return dd_err_set(err, DD_EINVAL, "image_set_channels: no image");
	if (channels != 1 && channels != 3)
		return dd_err_set(err, DD_EINVAL, "%d channels is not 1 (gray) or 3 (colour)", channels);
	if (channels == img->c)
		return DD_OK;
	size_t n = (size_t)img->w * (size_t)img->h;
	uint8_t *p = img->px;
	if (channels == 1) {
		/* Forward in place: pixel i is written at i, read from 3i >= i. */
		for (size_t i = 0; i < n; i++) {
			const uint8_t *s = p + 3 * i;
			p[i] = (uint8_t)((s[0] * 19595u + s[1] * 38470u + s[2] * 7471u + 0x8000u) >> 16);
		}
		uint8_t *q = realloc(p, n ? n : 1);
		if (q)
			img->px = q; /* a failed shrink leaves a larger block, which is harmless */
	} else {
		uint8_t *q = realloc(p, 3 * n);
		if (!q)
			return dd_err_set(err, DD_ENOMEM, "out of memory converting a %dx%d image to colour",
					  img->w, img->h);
		/* Backward in place: pixel i is read at i, written at 3i >= i. */
		for (size_t i = n; i-- > 0;)
			q[3 * i] = q[3 * i + 1] = q[3 * i + 2] = q[i];
		img->px = q;
	}
	img->c = channels;
	return DD_OK;
}

/* ------------------------------------------------------------------------------
 * Caffe's planes: a raw Datum's data (C×H×W, colour planes B, G, R) */

/* The interleaved channel that plane p of a c-channel image holds. */
static int plane_channel(int c, int p)
{
	return c == 3 ? 2 - p : p;
}

void image_to_planes(const struct image *img, uint8_t *out8, float *outf)
{
	size_t plane = (size_t)img->w * (size_t)img->h;
	for (int p = 0; p < img->c; p++) {
		const uint8_t *s = img->px + plane_channel(img->c, p);
		if (out8) {
			uint8_t *d = out8 + plane * p;
			for (size_t i = 0; i < plane; i++)
				d[i] = s[i * img->c];
		} else {
			float *d = outf + plane * p;
			for (size_t i = 0; i < plane; i++)
				d[i] = s[i * img->c];
		}
	}
}

void image_from_planes(struct image *img, const uint8_t *planes)
{
	size_t plane = (size_t)img->w * (size_t)img->h;
	for (int p = 0; p < img->c; p++) {
		uint8_t *d = img->px + plane_channel(img->c, p);
		const uint8_t *s = planes + plane * p;
		for (size_t i = 0; i < plane; i++)
			d[i * img->c] = s[i];
	}
}

/* ------------------------------------------------------------------------------
 * Resampling: Pillow's bilinear resize */

#define RS_BITS 22 /* Pillow's PRECISION_BITS = 32 - 8 - 2 */

struct rs_coeffs {
	int ksize;      /* taps per output sample (the stride of k) */
	int *bounds;    /* per output: first input index, number of taps */
	int32_t *k;     /* per output: ksize fixed-point weights */
};

static double bilinear(double x)
{
	if (x < 0)
		x = -x;
	return x < 1 ? 1 - x : 0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for in -> out samples, in
 * doubles exactly as Pillow computes them so the rounding agrees. */
static int rs_coeffs_make(int in, int out, struct rs_coeffs *c)
{
	double scale = (double)in / out, filterscale = scale < 1 ? 1 : scale;
	double support = 1.0 * filterscale, ss = 1.0 / filterscale;
	int ksize = (int)ceil(support) * 2 + 1;
	double *pre = malloc((size_t)ksize * sizeof *pre);
	c->ksize = ksize;
	c->bounds = malloc((size_t)out * 2 * sizeof *c->bounds);
	c->k = malloc((size_t)out * (size_t)ksize * sizeof *c->k);
	if (!pre || !c->bounds || !c->k) {
		free(pre);
		free(c->bounds);
		free(c->k);
		c->bounds = NULL;
		c->k = NULL;
		return DD_ENOMEM;
	}
	for (int xx = 0; xx < out; xx++) {
		double center = (xx + 0.5) * scale, ww = 0;
		int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
		if (xmin < 0)
			xmin = 0;
		if (xmax > in)
			xmax = in;
		xmax -= xmin;
		for (int x = 0; x < xmax; x++) {
			pre[x] = bilinear((x + xmin - center + 0.5) * ss);
			ww += pre[x];
		}
		int32_t *k = c->k + (size_t)xx * ksize;
		for (int x = 0; x < ksize; x++) {
			double v = x < xmax ? (ww != 0 ? pre[x] / ww : pre[x]) : 0;
			k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << RS_BITS) : 0.5 + v * (1 << RS_BITS));
		}
		c->bounds[2 * xx] = xmin;
		c->bounds[2 * xx + 1] = xmax;
	}
	free(pre);
	return DD_OK;
}

static void rs_coeffs_free(struct rs_coeffs *c)
{
	free(c->bounds);
	free(c->k);
}

static inline uint8_t clip8(int32_t v)
{
	/* Pillow's clip8, written without branches so that loops over it vectorise:
	 * v <= 0 gives 0, v >= 255 << RS_BITS gives 255. */
	v = v < 0 ? 0 : v;
	v >>= RS_BITS;
	return (uint8_t)(v > 255 ? 255 : v);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RS_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define RS_SIMD
#endif

enum { VB = 16 }; /* rows (horizontal pass) or columns (vertical) per block */

/* dst[c*dstride + r] = src[r*sstride + c] for r < 16, c < cols: a 16-row byte
 * matrix transposed, in 16x16 blocks with SSE2 where there is SSE2 (every
 * x86-64), byte by byte otherwise and for the last cols % 16 columns. */
static void transpose16(const uint8_t *src, size_t sstride, size_t cols, uint8_t *dst,
			size_t dstride)
{
	size_t c = 0;
#ifdef __SSE2__
	for (; c + 16 <= cols; c += 16) {
		__m128i r[16], a[16], b[16], e[16];
		for (int i = 0; i < 16; i++)
			r[i] = _mm_loadu_si128((const __m128i *)(src + (size_t)i * sstride + c));
		/* bytes of row pairs, then 2-byte units of row quads, 4-byte units of
		 * row octets, and finally 8-byte halves: each step doubles the run of
		 * consecutive rows a column holds. */
		for (int k = 0; k < 8; k++) {
			a[2 * k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
			a[2 * k + 1] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
		}
		for (int g = 0; g < 4; g++) {
			b[4 * g + 0] = _mm_unpacklo_epi16(a[4 * g], a[4 * g + 2]);
			b[4 * g + 1] = _mm_unpackhi_epi16(a[4 * g], a[4 * g + 2]);
			b[4 * g + 2] = _mm_unpacklo_epi16(a[4 * g + 1], a[4 * g + 3]);
			b[4 * g + 3] = _mm_unpackhi_epi16(a[4 * g + 1], a[4 * g + 3]);
		}
		for (int h = 0; h < 2; h++)
			for (int m = 0; m < 4; m++) {
				e[8 * h + 2 * m] = _mm_unpacklo_epi32(b[8 * h + m], b[8 * h + 4 + m]);
				e[8 * h + 2 * m + 1] = _mm_unpackhi_epi32(b[8 * h + m], b[8 * h + 4 + m]);
			}
		for (int q = 0; q < 8; q++) {
			_mm_storeu_si128((__m128i *)(dst + (c + 2 * q) * dstride),
					 _mm_unpacklo_epi64(e[q], e[8 + q]));
			_mm_storeu_si128((__m128i *)(dst + (c + 2 * q + 1) * dstride),
					 _mm_unpackhi_epi64(e[q], e[8 + q]));
		}
	}
#endif
	for (; c < cols; c++)
		for (int r = 0; r < 16; r++)
			dst[c * dstride + r] = src[(size_t)r * sstride + c];
}

/* Horizontal pass over `rows` rows of src (stride sstride) into dst (stride
 * dstride), output columns x0..x0+n of the coefficient set.
 *
 * Taps run along a row, which does not vectorise; so VB rows at a time are
 * transposed into `t` (column-major: sample s of row j at t[s*VB + j]), where
 * each tap is a contiguous vector of VB rows and the sums have the same shape
 * as in the vertical pass.  The results collect in `ob` the same way and are
 * transposed back.  Leftover rows take the plain loop.  `t` holds VB * sw * ch
 * bytes, `ob` VB * n * ch. */
RS_SIMD static void rs_horizontal(const uint8_t *src, size_t sstride, int rows, int ch,
			  const struct rs_coeffs *kc, int x0, int n, uint8_t *dst, size_t dstride,
			  uint8_t *t, uint8_t *ob)
{
	const int32_t half = 1 << (RS_BITS - 1);
	/* the input samples the window reads */
	size_t lo = (size_t)kc->bounds[2 * x0] * ch;
	size_t hi = (size_t)(kc->bounds[2 * (x0 + n - 1)] + kc->bounds[2 * (x0 + n - 1) + 1]) * ch;
	size_t nout = (size_t)n * ch;
	int y = 0;
	for (; y + VB <= rows; y += VB) {
		transpose16(src + (size_t)y * sstride + lo, sstride, hi - lo, t + lo * VB, VB);
		uint8_t *o = ob;
		for (int xx = x0; xx < x0 + n; xx++) {
			int xmin = kc->bounds[2 * xx], taps = kc->bounds[2 * xx + 1];
			const int32_t *k = kc->k + (size_t)xx * kc->ksize;
			for (int c = 0; c < ch; c++, o += VB) {
				int32_t a[VB];
				for (int j = 0; j < VB; j++)
					a[j] = half;
				const uint8_t *v = t + ((size_t)xmin * ch + c) * VB;
				for (int x = 0; x < taps; x++, v += (size_t)ch * VB) {
					int32_t kx = k[x];
					for (int j = 0; j < VB; j++)
						a[j] += v[j] * kx;
				}
				for (int j = 0; j < VB; j++)
					o[j] = clip8(a[j]);
			}
		}
		/* ob is nout x VB; dst wants VB x nout */
		for (size_t i = 0; i < nout; i += VB) {
			size_t m = nout - i < VB ? nout - i : VB;
			if (m == VB) {
				transpose16(ob + i * VB, VB, VB, dst + (size_t)y * dstride + i, dstride);
			} else {
				for (size_t s2 = 0; s2 < m; s2++)
					for (int j = 0; j < VB; j++)
						dst[(size_t)(y + j) * dstride + i + s2] = ob[(i + s2) * VB + j];
			}
		}
	}
	for (; y < rows; y++) {
		const uint8_t *s = src + (size_t)y * sstride;
		uint8_t *d = dst + (size_t)y * dstride;
		for (int xx = x0; xx < x0 + n; xx++) {
			int xmin = kc->bounds[2 * xx], taps = kc->bounds[2 * xx + 1];
			const int32_t *k = kc->k + (size_t)xx * kc->ksize;
			for (int c = 0; c < ch; c++) {
				int32_t a = half;
				for (int x = 0; x < taps; x++)
					a += s[(size_t)(xmin + x) * ch + c] * k[x];
				*d++ = clip8(a);
			}
		}
	}
}

/* Vertical pass: output rows y0..y0+n of the coefficient set, each a weighted sum
 * of whole rows of src (row 0 of src is input row r0).  Columns go in blocks of
 * VB with the sums in a fixed-size local array, a loop shape the compiler
 * vectorises even at -O2; the tail is plain. */

RS_SIMD static void rs_vertical(const uint8_t *src, size_t sstride, int r0, size_t rowlen,
			const struct rs_coeffs *kc, int y0, int n, uint8_t *dst, size_t dstride)
{
	const int32_t half = 1 << (RS_BITS - 1);
	for (int yy = y0; yy < y0 + n; yy++) {
		int taps = kc->bounds[2 * yy + 1];
		const int32_t *k = kc->k + (size_t)yy * kc->ksize;
		const uint8_t *base = src + (size_t)(kc->bounds[2 * yy] - r0) * sstride;
		uint8_t *d = dst + (size_t)(yy - y0) * dstride;
		size_t i = 0;
		for (; i + VB <= rowlen; i += VB) {
			int32_t a[VB];
			for (int j = 0; j < VB; j++)
				a[j] = half;
			const uint8_t *s = base + i;
			for (int t = 0; t < taps; t++, s += sstride) {
				int32_t kv = k[t];
				for (int j = 0; j < VB; j++)
					a[j] += s[j] * kv;
			}
			for (int j = 0; j < VB; j++)
				d[i + j] = clip8(a[j]);
		}
		for (; i < rowlen; i++) {
			int32_t a = half;
			const uint8_t *s = base + i;
			for (int t = 0; t < taps; t++, s += sstride)
				a += *s * k[t];
			d[i] = clip8(a);
		}
	}
}

/* Resize src (sw x sh x ch) to rw x rh as Pillow does, but produce only the
 * window of columns cx..cx+ow and rows cy..cy+oh, written to dst with stride
 * dstride.  Each output sample depends only on its own coefficients, so the
 * window equals cropping the full result. */
static int resample(const uint8_t *src, int sw, int sh, int ch, int rw, int rh, int cx, int cy,
		    int ow, int oh, uint8_t *dst, size_t dstride)
{
	struct rs_coeffs kh = {0}, kv = {0};
	uint8_t *tmp = NULL, *t = NULL;
	int rc = DD_ENOMEM;
	int need_h = rw != sw, need_v = rh != sh;
	size_t sstride = (size_t)sw * ch, rowlen = (size_t)ow * ch;

	/* t: the horizontal pass's transposed input rows, then its transposed output */
	if (need_h && (rs_coeffs_make(sw, rw, &kh) || !(t = malloc(VB * (sstride + rowlen)))))
		goto done;
	if (need_v && rs_coeffs_make(sh, rh, &kv))
		goto done;
	if (!need_v) {
		/* Rows are taken as they are: the horizontal pass (or a copy) writes the
		 * output directly. */
		const uint8_t *s = src + (size_t)cy * sstride;
		if (need_h)
			rs_horizontal(s, sstride, oh, ch, &kh, cx, ow, dst, dstride, t, t + VB * sstride);
		else
			for (int y = 0; y < oh; y++)
				memcpy(dst + (size_t)y * dstride, s + (size_t)y * sstride + (size_t)cx * ch,
				       rowlen);
		rc = DD_OK;
		goto done;
	}
	/* Input rows the vertical pass will read for output rows cy..cy+oh (the
	 * bounds only grow with the output row, as in Pillow's ybox_first/last). */
	int first = kv.bounds[2 * cy];
	int last = kv.bounds[2 * (cy + oh - 1)] + kv.bounds[2 * (cy + oh - 1) + 1];
	const uint8_t *vsrc;
	size_t vstride;
	if (need_h) {
		if (!(tmp = malloc((size_t)(last - first) * rowlen)))
			goto done;
		rs_horizontal(src + (size_t)first * sstride, sstride, last - first, ch, &kh, cx, ow, tmp,
			      rowlen, t, t + VB * sstride);
		vsrc = tmp;
		vstride = rowlen;
	} else {
		vsrc = src + (size_t)first * sstride + (size_t)cx * ch;
		vstride = sstride;
	}
	rs_vertical(vsrc, vstride, first, rowlen, &kv, cy, oh, dst, dstride);
	rc = DD_OK;
done:
	free(t);
	free(tmp);
	rs_coeffs_free(&kh);
	rs_coeffs_free(&kv);
	return rc;
}

/* Python 2's round(): half away from zero (C's round()), as an int. */
static int py2_round(double x)
{
	return (int)round(x);
}

/* n bytes uniform in 0..254 (np.random.randint(0, 255)), two per 64-bit draw by
 * multiply-shift (bias below 1e-7). */
static void noise_fill(uint8_t *p, size_t n, uint64_t *state)
{
	size_t i = 0;
	for (; i + 2 <= n; i += 2) {
		uint64_t r = rng_next(state);
		p[i] = (uint8_t)(((r & 0xffffffffu) * 255) >> 32);
		p[i + 1] = (uint8_t)(((r >> 32) * 255) >> 32);
	}
	if (i < n)
		p[i] = (uint8_t)(((rng_next(state) & 0xffffffffu) * 255) >> 32);
}

/* Where a w x h result's pixels come from under `mode`: the source is scaled to
 * rw x rh, the window cx,cy (ow x oh) of that is kept, and placed at px,py of the
 * result; the rest of the result is padding.  resize_image()'s arithmetic, in the
 * same double operations.  The one owner of the modes' geometry: the bilinear
 * resize of images and the nearest-neighbour resize of labels both ask it, so a
 * label always lands on its image's pixels. */
struct resize_geom {
	int rw, rh, cx, cy, px, py, ow, oh;
};

static int resize_geometry(int sw, int sh, int w, int h, enum resize_mode mode, struct resize_geom *g)
{
	double wr = (double)sw / w, hr = (double)sh / h;
	int rw = w, rh = h; /* the scaled size */
	if (mode == RESIZE_SQUASH || wr == hr) {
		/* straight to w x h */
	} else if (mode == RESIZE_CROP) {
		if (wr > hr)
			rw = py2_round(sw / hr);
		else
			rh = py2_round(sh / wr);
	} else if (mode == RESIZE_FILL) {
		if (wr > hr) {
			rh = py2_round(sh / wr);
			if (rh < 1)
				rh = 1;
			if ((h - rh) % 2 == 1)
				rh++;
		} else {
			rw = py2_round(sw / hr);
			if (rw < 1)
				rw = 1;
			if ((w - rw) % 2 == 1)
				rw++;
		}
	} else if (mode == RESIZE_HALF_CROP) {
		double ratio = (wr + hr) / 2.0;
		rw = py2_round(sw / ratio);
		rh = py2_round(sh / ratio);
		if (rw < 1)
			rw = 1;
		if (rh < 1)
			rh = 1;
		if (wr > hr && (h - rh) % 2 == 1)
			rh++;
		else if (wr < hr && (w - rw) % 2 == 1)
			rw++;
	} else {
		return -1;
	}
	/* A side longer than the target is centre-cropped (start = round((new -
	 * target) / 2)); a shorter one is padded, half on each end. */
	*g = (struct resize_geom){ .rw = rw, .rh = rh, .ow = w, .oh = h };
	if (rw >= w)
		g->cx = py2_round((rw - w) / 2.0);
	else
		g->px = (w - rw) / 2, g->ow = rw;
	if (rh >= h)
		g->cy = py2_round((rh - h) / 2.0);
	else
		g->py = (h - rh) / 2, g->oh = rh;
	return 0;
}

/* What both resizes refuse: no image, or a target size under 1.  Empties out. */
static int resize_args(const struct image *src, int w, int h, const char *fn, struct image *out, struct dd_err *err)
{
	memset(out, 0, sizeof *out);
	if (!src || !src->px || src->w <= 0 || src->h <= 0 || (src->c != 1 && src->c != 3))
		return dd_err_set(err, DD_EINVAL, "%s: no image to resize", fn);
	if (w <= 0 || h <= 0)
		return dd_err_set(err, DD_EINVAL, "cannot resize to %dx%d", w, h);
	return DD_OK;
}

int image_resize(const struct image *src, int w, int h, enum resize_mode mode, uint64_t seed,
		 struct image *out, struct dd_err *err)
{
	int sw, sh, c, rc;
	if ((rc = resize_args(src, w, h, "image_resize", out, err)))
		return rc;
	sw = src->w, sh = src->h, c = src->c;
	if ((rc = img_alloc(out, w, h, c, NULL, err)))
		return rc;
	if (sw == w && sh == h) {
		memcpy(out->px, src->px, (size_t)w * h * c);
		return DD_OK;
	}
	struct resize_geom g;
	if (resize_geometry(sw, sh, w, h, mode, &g)) {
		image_free(out);
		return dd_err_set(err, DD_EINVAL, "unknown resize mode %d", (int)mode);
	}
	int rw = g.rw, rh = g.rh, cx = g.cx, cy = g.cy, px = g.px, py = g.py, ow = g.ow, oh = g.oh;

	size_t stride = (size_t)w * c;
	if (resample(src->px, sw, sh, c, rw, rh, cx, cy, ow, oh, out->px + (size_t)py * stride + (size_t)px * c,
		     stride)) {
		image_free(out);
		return dd_err_set(err, DD_ENOMEM, "out of memory resizing a %dx%d image to %dx%d", sw, sh, w, h);
	}

	uint64_t state = seed;
	if (oh < h) {
		/* One block of py rows, used above and below (as DIGITS concatenates the
		 * same noise array on both ends); any odd extra row gets its own. */
		size_t blk = (size_t)py * stride;
		uint8_t *top = out->px, *bot = out->px + (size_t)(py + oh) * stride;
		size_t botn = (size_t)(h - py - oh) * stride;
		noise_fill(top, blk, &state);
		memcpy(bot, top, blk < botn ? blk : botn);
		if (botn > blk)
			noise_fill(bot + blk, botn - blk, &state);
	}
	if (ow < w) {
		size_t l = (size_t)px * c, r = (size_t)(w - px - ow) * c;
		for (int y = 0; y < h; y++) {
			uint8_t *row = out->px + (size_t)y * stride;
			noise_fill(row, l, &state);
			memcpy(row + stride - r, row, l < r ? l : r);
			if (r > l)
				noise_fill(row + stride - r + l, r - l, &state);
		}
	}
	return DD_OK;
}

int image_resize_nearest(const struct image *src, int w, int h, enum resize_mode mode, uint8_t pad,
			 struct image *out, struct dd_err *err)
{
	int rc = resize_args(src, w, h, "image_resize_nearest", out, err);
	if (rc)
		return rc;
	struct resize_geom g;
	if (resize_geometry(src->w, src->h, w, h, mode, &g))
		return dd_err_set(err, DD_EINVAL, "unknown resize mode %d", (int)mode);
	int c = src->c;
	if ((rc = img_alloc(out, w, h, c, NULL, err)))
		return rc;
	memset(out->px, pad, (size_t)w * h * c);
	/* output column x of the scaled image reads source column
	 * floor((x + 0.5) * sw / rw), Pillow's NEAREST */
	for (int y = 0; y < g.oh; y++) {
		int64_t sy = ((int64_t)2 * (y + g.cy) + 1) * src->h / (2 * (int64_t)g.rh);
		const uint8_t *srow = src->px + (size_t)sy * src->w * c;
		uint8_t *d = out->px + ((size_t)(y + g.py) * w + g.px) * c;
		for (int x = 0; x < g.ow; x++) {
			int64_t sx = ((int64_t)2 * (x + g.cx) + 1) * src->w / (2 * (int64_t)g.rw);
			memcpy(d + (size_t)x * c, srow + (size_t)sx * c, (size_t)c);
		}
	}
	return DD_OK;
}

/* ------------------------------------------------------------------------------
 * Encoding */

struct membuf {
	uint8_t *p;
	size_t len, cap;
	char msg[200];
};

static void png_write_mem(png_structp png, png_bytep d, png_size_t n)
{
	struct membuf *b = png_get_io_ptr(png);
	if (n > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap - b->len < n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q)
			png_error(png, "out of memory");
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void png_flush_mem(png_structp png)
{
	(void)png;
}

static void png_on_werror(png_structp png, png_const_charp msg)
{
	struct membuf *b = png_get_error_ptr(png);
	snprintf(b->msg, sizeof b->msg, "%s", msg);
	png_longjmp(png, 1);
}

/* The part of image_encode_png that libpng may longjmp out of; 1 after an error.
 * All it acquires lives in *b, which the caller releases. */
static int png_write_guarded(png_structp png, png_infop info, const struct image *img, int level,
			     const uint8_t *palette, int npalette, struct membuf *b)
{
	if (setjmp(png_jmpbuf(png)))
		return 1;
	png_set_write_fn(png, b, png_write_mem, png_flush_mem);
	png_set_compression_level(png, level);
	if (level == 0) {
		/* stored: filtering would only cost time */
		png_set_filter(png, 0, PNG_FILTER_NONE);
	} else if (level <= 6) {
		/* After PNG's filters, photos are mostly small residuals that zlib's
		 * string matcher hardly improves on: run-length matching alone gives
		 * files within about 1% of level 6 (0.6% on a 256x256 photo, 1.4% on
		 * Fashion-MNIST) in a quarter of the time.  Levels 7..9 keep the
		 * full matcher for whoever wants the last percent. */
		png_set_compression_strategy(png, Z_RLE);
		/* libpng's per-row choice among all five filters costs more than the
		 * compression; UP alone halves the encode of a 256x256 photo for files
		 * about 6% larger (measured in bench/dataset). */
		png_set_filter(png, 0, PNG_FILTER_UP);
	}
	/* zlib's default memLevel 8 allocates and clears 128 KB of tables, more
	 * than the whole job at 28x28 (and enough for glibc to hand the heap back
	 * and fault it in again on every call).  A block that holds the whole
	 * image is enough: 1 << (memLevel + 6) symbols. */
	size_t raw = ((size_t)img->w * img->c + 1) * img->h;
	int mem = 2;
	while (mem < 8 && ((size_t)1 << (mem + 6)) < raw)
		mem++;
	png_set_compression_mem_level(png, mem);
	png_set_IHDR(png, info, (png_uint_32)img->w, (png_uint_32)img->h, 8,
		     palette ? PNG_COLOR_TYPE_PALETTE : img->c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
		     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	if (palette) {
		png_color pal[256];
		for (int i = 0; i < npalette; i++)
			pal[i] = (png_color){ palette[3 * i], palette[3 * i + 1], palette[3 * i + 2] };
		png_set_PLTE(png, info, pal, npalette);
	}
	png_write_info(png, info);
	size_t stride = (size_t)img->w * img->c;
	for (int y = 0; y < img->h; y++)
		png_write_row(png, img->px + (size_t)y * stride);
	png_write_end(png, NULL);
	return 0;
}

static int encode_png(const struct image *img, int level, const uint8_t *palette, int npalette,
		      uint8_t **out, size_t *len, struct dd_err *err)
{
	*out = NULL;
	*len = 0;
	if (!img || !img->px || img->w <= 0 || img->h <= 0 || (img->c != 1 && img->c != 3))
		return dd_err_set(err, DD_EINVAL, "image_encode_png: no image to encode");
	if (level < 0 || level > 9)
		return dd_err_set(err, DD_EINVAL, "PNG compression level %d is not 0..9", level);
	struct membuf b = {0};
	int rc = DD_OK;
	png_infop info = NULL;
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &b, png_on_werror, png_on_warning);
	if (!png || !(info = png_create_info_struct(png))) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory starting the PNG encoder");
		goto done;
	}
	/* A first guess at the size saves most of the reallocations. */
	b.cap = (size_t)img->w * img->h * img->c / 2 + 256;
	if (!(b.p = malloc(b.cap))) {
		b.cap = 0;
		rc = dd_err_set(err, DD_ENOMEM, "out of memory encoding a %dx%d PNG", img->w, img->h);
		goto done;
	}
	if (png_write_guarded(png, info, img, level, palette, npalette, &b)) {
		rc = dd_err_set(err, strstr(b.msg, "out of memory") ? DD_ENOMEM : DD_EINTERNAL,
				"cannot encode a %dx%d PNG: %s", img->w, img->h, b.msg);
		goto done;
	}
	*out = b.p;
	*len = b.len;
	b.p = NULL;
done:
	if (png)
		png_destroy_write_struct(&png, info ? &info : NULL);
	free(b.p);
	return rc;
}

int image_encode_png(const struct image *img, int level, uint8_t **out, size_t *len,
		     struct dd_err *err)
{
	return encode_png(img, level, NULL, 0, out, len, err);
}

int image_encode_png_palette(const struct image *idx, const uint8_t *palette, int npalette, uint8_t **out,
			     size_t *len, struct dd_err *err)
{
	if (!idx || idx->c != 1 || !palette || npalette < 1 || npalette > 256) {
		*out = NULL;
		*len = 0;
		return dd_err_set(err, DD_EINVAL, "image_encode_png_palette: needs a 1-channel image and 1 to 256 colours");
	}
	return encode_png(idx, 6, palette, npalette, out, len, err);
}

int image_encode_jpeg(const struct image *img, int quality, uint8_t **out, size_t *len,
		      struct dd_err *err)
{
	*out = NULL;
	*len = 0;
	if (!img || !img->px || img->w <= 0 || img->h <= 0 || (img->c != 1 && img->c != 3))
		return dd_err_set(err, DD_EINVAL, "image_encode_jpeg: no image to encode");
	if (quality < 1 || quality > 100)
		return dd_err_set(err, DD_EINVAL, "JPEG quality %d is not 1..100", quality);
	int rc = DD_OK;
	int samp = img->c == 1 ? TJSAMP_GRAY : TJSAMP_420; /* 4:2:0 is PIL's default */
	unsigned long cap = tjBufSize(img->w, img->h, samp), jlen = cap;
	/* Our own malloc'ed buffer (TJFLAG_NOREALLOC) so that the caller can free()
	 * it; tjBufSize is a bound TurboJPEG guarantees. */
	unsigned char *buf = malloc(cap);
	tjhandle tj = tjInitCompress();
	if (!buf || !tj) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory encoding a %dx%d JPEG", img->w, img->h);
		goto done;
	}
	if (tjCompress2(tj, img->px, img->w, 0, img->h, img->c == 1 ? TJPF_GRAY : TJPF_RGB, &buf,
			&jlen, samp, quality, TJFLAG_NOREALLOC) < 0) {
		rc = dd_err_set(err, DD_EINTERNAL, "cannot encode a %dx%d JPEG: %s", img->w, img->h,
				tjGetErrorStr2(tj));
		goto done;
	}
	unsigned char *shrunk = realloc(buf, jlen ? jlen : 1);
	*out = shrunk ? shrunk : buf;
	*len = jlen;
	buf = NULL;
done:
	free(buf);
	if (tj)
		tjDestroy(tj);
	return rc;
}
