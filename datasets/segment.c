/* segment.c — see segment.h.
 *
 * The build: pair the files of images/ and labels/ by stem (sorted, so the pairs
 * and their order depend only on the names), split them (a separate validation
 * folder, or a shuffle seeded with options.seed and DIGITS' split counts), then
 * per split process the pairs a batch at a time on `threads` threads and write
 * the batch in pair order, so the keys ("%08d_0", the same in the features and
 * the labels database) and the bytes depend only on the inputs and the seed.
 * Each pair is read, decoded, checked (sizes, mode, colours, class values),
 * resized (the image bilinear, the label nearest-neighbour on the same
 * geometry) and encoded as two Datums. */
#define _GNU_SOURCE
#include "segment.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/rng.h"
#include "datum.h"
#include "dsinfo.h"
#include "image.h"
#include "lmdbio.h"

#define FILE_CAP (256u << 20) /* no image or label file is read past 256 MiB */
#define BATCH 64              /* pairs processed between two writes */

/* ---- the colour map ---- */

static int parse_byte(const char **p, int *out)
{
	const char *s = *p;
	while (*s == ' ' || *s == '\t' || *s == ',')
		s++;
	if (*s < '0' || *s > '9')
		return -1;
	long v = 0;
	while (*s >= '0' && *s <= '9' && v <= 255)
		v = v * 10 + (*s++ - '0');
	if (v > 255 || (*s >= '0' && *s <= '9'))
		return -1;
	*out = (int)v;
	*p = s;
	return 0;
}

int seg_colormap_parse(const char *text, const char *name, uint8_t *rgb, int *n, struct dd_err *err)
{
	*n = 0;
	int line = 0;
	for (const char *p = text; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char buf[256];
		line++;
		if (len >= sizeof buf)
			return dd_err_set(err, DD_EINVAL, "%s line %d: too long for \"R G B\"", name, line);
		memcpy(buf, p, len);
		buf[len] = 0;
		p = end ? end + 1 : NULL;
		while (len && (buf[len - 1] == '\r' || buf[len - 1] == ' ' || buf[len - 1] == '\t'))
			buf[--len] = 0;
		const char *s = buf;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		int c[3];
		if (parse_byte(&s, &c[0]) || parse_byte(&s, &c[1]) || parse_byte(&s, &c[2]) || *s)
			return dd_err_set(err, DD_EINVAL, "%s line %d: expected three numbers 0 to 255 (R G B), got \"%.60s\"",
					  name, line, buf);
		if (*n >= SEG_MAX_CLASSES)
			return dd_err_set(err, DD_EINVAL, "%s line %d: more than %d classes", name, line, SEG_MAX_CLASSES);
		for (int k = 0; k < *n; k++)
			if (rgb[3 * k] == c[0] && rgb[3 * k + 1] == c[1] && rgb[3 * k + 2] == c[2])
				return dd_err_set(err, DD_EINVAL, "%s line %d: colour %d %d %d is class %d already", name,
						  line, c[0], c[1], c[2], k);
		rgb[3 * *n] = (uint8_t)c[0];
		rgb[3 * *n + 1] = (uint8_t)c[1];
		rgb[3 * *n + 2] = (uint8_t)c[2];
		(*n)++;
	}
	if (*n == 0)
		return dd_err_set(err, DD_EINVAL, "%s: no \"R G B\" line (one per class)", name);
	return DD_OK;
}

/* colour (24 bits) -> class, open addressing; -1 when absent */
struct cmap {
	int n;
	uint8_t rgb[3 * SEG_MAX_CLASSES];
	uint32_t key[1024];
	int16_t cls[1024];
};

static void cmap_build(struct cmap *m)
{
	for (int i = 0; i < 1024; i++)
		m->cls[i] = -1;
	for (int k = 0; k < m->n; k++) {
		uint32_t key = (uint32_t)m->rgb[3 * k] << 16 | (uint32_t)m->rgb[3 * k + 1] << 8 | m->rgb[3 * k + 2];
		uint32_t h = (key * 2654435761u) >> 22;
		while (m->cls[h] >= 0)
			h = (h + 1) & 1023;
		m->key[h] = key;
		m->cls[h] = (int16_t)k;
	}
}

static int cmap_find(const struct cmap *m, uint32_t key)
{
	for (uint32_t h = (key * 2654435761u) >> 22;; h = (h + 1) & 1023) {
		if (m->cls[h] < 0)
			return -1;
		if (m->key[h] == key)
			return m->cls[h];
	}
}

/* ---- pairs ---- */

struct pair {
	char *image, *label; /* full paths */
	char *shown;         /* the image as people read it: relative to its folder */
};

struct pairs {
	struct pair *v;
	int64_t n, cap;
};

static int pairs_push(struct pairs *a, struct pair p)
{
	void *g = ds_grow(a->v, a->n, &a->cap, sizeof *a->v);
	if (!g)
		return DD_ENOMEM;
	a->v = g;
	a->v[a->n++] = p;
	return DD_OK;
}

static void pairs_free(struct pairs *a)
{
	for (int64_t i = 0; i < a->n; i++) {
		free(a->v[i].image);
		free(a->v[i].label);
		free(a->v[i].shown);
	}
	free(a->v);
	*a = (struct pairs){ 0 };
}

struct build {
	const struct seg_source *src;
	const struct ds_options *opt;
	const struct ds_progress *prog;
	const char *out;
	cJSON *skipped;
	struct cmap cmap;       /* n = 0: no colour map */
	int fixed_classes;      /* from the colour map or labels.txt; 0: from the data */
	char **names;           /* labels.txt's lines, or NULL */
	int nnames;
	struct pairs split[2];  /* train, val */
	int64_t pixels[2][256]; /* per split, per label value */
	int max_class;          /* the highest class value written */
	uint8_t palette[768];   /* the first palette label's palette */
	int npalette, palettes_differ;
	int kinds;              /* bit per enum image_label_kind seen */
	int64_t total, done, last_ms;
};

#define say(b, ...) ds_say((b)->prog, __VA_ARGS__)

static void skip(struct build *b, const char *path, const char *reason) { ds_skipped_add(b->skipped, path, reason); }

/* name without its extension, into buf */
static void stem(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s", name);
	char *dot = strrchr(buf, '.');
	if (dot && dot != buf)
		*dot = 0;
}

static int cmp_stem(const void *a, const void *b)
{
	char sa[NAME_MAX + 1], sb[NAME_MAX + 1];
	stem(*(char *const *)a, sa, sizeof sa);
	stem(*(char *const *)b, sb, sizeof sb);
	int c = strcmp(sa, sb);
	return c ? c : strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular image files of dir, sorted by stem; the others skipped.  prefix is
 * how dir is shown ("images", "val/labels"). */
static int list_files(struct build *b, const char *dir, const char *prefix, char ***names, int *n,
		      struct dd_err *err)
{
	char **all;
	int na, rc = ds_list_dir(dir, &all, &na, err);
	if (rc)
		return rc;
	*names = calloc((size_t)na + 1, sizeof **names);
	*n = 0;
	if (!*names) {
		ds_free_names(all, na);
		return dd_err_set(err, DD_ENOMEM, "out of memory listing %s", dir);
	}
	for (int i = 0; i < na; i++) {
		char path[PATH_MAX], where[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", dir, all[i]);
		snprintf(where, sizeof where, "%s/%s", prefix, all[i]);
		struct stat st;
		if (ds_name_has_control(all[i]))
			skip(b, where, "its name holds a control character (a newline, a tab…): rename it");
		else if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			skip(b, where, S_ISLNK(st.st_mode) ? "a symbolic link: not followed" : "not a regular file");
		else if (!image_has_image_ext(all[i]))
			skip(b, where, "not an image file name (.png .jpg .jpeg .bmp .ppm .pgm)");
		else {
			(*names)[(*n)++] = all[i];
			all[i] = NULL;
		}
	}
	ds_free_names(all, na);
	if (*n > 1)
		qsort(*names, (size_t)*n, sizeof **names, cmp_stem);
	return DD_OK;
}

/* Pair root/images with root/labels by stem into out. */
static int gather(struct build *b, const char *root, const char *shown_root, struct pairs *out, struct dd_err *err)
{
	char idir[PATH_MAX], ldir[PATH_MAX], ip[PATH_MAX], lp[PATH_MAX];
	snprintf(idir, sizeof idir, "%s/images", root);
	snprintf(ldir, sizeof ldir, "%s/labels", root);
	snprintf(ip, sizeof ip, "%s%simages", shown_root, *shown_root ? "/" : "");
	snprintf(lp, sizeof lp, "%s%slabels", shown_root, *shown_root ? "/" : "");
	struct stat st;
	if (stat(idir, &st) != 0 || !S_ISDIR(st.st_mode) || stat(ldir, &st) != 0 || !S_ISDIR(st.st_mode))
		return dd_err_set(err, DD_EINVAL,
				  "%s: a segmentation source holds an images/ and a labels/ folder, with one label per image of the same name",
				  *shown_root ? shown_root : "the source");
	char **im = NULL, **lb = NULL;
	int ni = 0, nl = 0, rc;
	if ((rc = list_files(b, idir, ip, &im, &ni, err)) || (rc = list_files(b, ldir, lp, &lb, &nl, err)))
		goto out;
	/* a merge of two sorted lists */
	int i = 0, l = 0;
	char prev[NAME_MAX + 1] = "", where[PATH_MAX];
	while (rc == DD_OK && (i < ni || l < nl)) {
		char si[NAME_MAX + 1] = "", sl[NAME_MAX + 1] = "";
		if (i < ni)
			stem(im[i], si, sizeof si);
		if (l < nl)
			stem(lb[l], sl, sizeof sl);
		int c = i >= ni ? 1 : l >= nl ? -1 : strcmp(si, sl);
		if (c < 0) {
			snprintf(where, sizeof where, "%s/%s", ip, im[i]);
			skip(b, where, strcmp(si, prev) == 0 ? "another image has the same name: one label cannot be both's"
							    : "an image with no label (no labels/<same name>.png)");
			i++;
		} else if (c > 0) {
			snprintf(where, sizeof where, "%s/%s", lp, lb[l]);
			skip(b, where, strcmp(sl, prev) == 0 ? "another label has the same name"
							    : "a label with no image (no images/<same name>.*)");
			l++;
		} else {
			char a[PATH_MAX], z[PATH_MAX];
			snprintf(a, sizeof a, "%s/%s", idir, im[i]);
			snprintf(z, sizeof z, "%s/%s", ldir, lb[l]);
			snprintf(where, sizeof where, "%s/%s", ip, im[i]);
			struct pair p = { strdup(a), strdup(z), strdup(where) };
			if (!p.image || !p.label || !p.shown || pairs_push(out, p)) {
				free(p.image), free(p.label), free(p.shown);
				rc = dd_err_set(err, DD_ENOMEM, "out of memory");
			}
			snprintf(prev, sizeof prev, "%s", si);
			i++, l++;
		}
	}
out:
	for (int k = 0; k < ni; k++)
		free(im[k]);
	for (int k = 0; k < nl; k++)
		free(lb[k]);
	free(im);
	free(lb);
	return rc;
}

/* ---- one pair ---- */

struct result {
	int ok;
	uint8_t *feat, *lab; /* encoded Datums */
	size_t flen, llen;
	char reason[400];
	enum image_label_kind kind;
	uint8_t palette[768];
	int npalette;
	int64_t hist[256];
};

/* Map a decoded label to class values in place (c becomes 1); a reason on failure. */
static int to_classes(const struct build *b, struct image *lab, enum image_label_kind kind, const uint8_t *pal,
		      int npal, char *reason, size_t rlen)
{
	const struct cmap *m = &b->cmap;
	size_t n = (size_t)lab->w * lab->h;
	if (kind == IMAGE_LABEL_RGB) {
		if (!m->n) {
			snprintf(reason, rlen, "an RGB label needs a colour map (--colormap FILE, one \"R G B\" line a class); "
					       "or save labels as palette or grayscale PNGs");
			return -1;
		}
		uint32_t last = 0xffffffffu;
		int cls = -1;
		for (size_t i = 0; i < n; i++) {
			const uint8_t *s = lab->px + 3 * i;
			uint32_t key = (uint32_t)s[0] << 16 | (uint32_t)s[1] << 8 | s[2];
			if (key != last) {
				cls = cmap_find(m, key);
				last = key;
			}
			if (cls < 0) {
				snprintf(reason, rlen, "colour %u %u %u at (%zu, %zu) is not in the colour map", s[0], s[1],
					 s[2], i % (size_t)lab->w, i / (size_t)lab->w);
				return -1;
			}
			lab->px[i] = (uint8_t)cls;
		}
		lab->c = 1;
		return 0;
	}
	if (kind == IMAGE_LABEL_PALETTE && m->n) {
		/* with a colour map, a palette label's colours say the class */
		int16_t map[256];
		for (int k = 0; k < 256; k++) {
			uint32_t key = k < npal ? (uint32_t)pal[3 * k] << 16 | (uint32_t)pal[3 * k + 1] << 8 | pal[3 * k + 2] : 0;
			map[k] = (int16_t)(k < npal ? cmap_find(m, key) : -1);
		}
		for (size_t i = 0; i < n; i++) {
			int cls = map[lab->px[i]];
			if (cls < 0) {
				const uint8_t *c = pal + 3 * lab->px[i];
				snprintf(reason, rlen, "colour %u %u %u (palette entry %u) at (%zu, %zu) is not in the colour map",
					 c[0], c[1], c[2], lab->px[i], i % (size_t)lab->w, i / (size_t)lab->w);
				return -1;
			}
			lab->px[i] = (uint8_t)cls;
		}
	}
	int classes = b->fixed_classes;
	if (classes)
		for (size_t i = 0; i < n; i++)
			if (lab->px[i] >= classes && lab->px[i] != SEG_IGNORE) {
				snprintf(reason, rlen, "class value %u at (%zu, %zu) is past the last class (%d classes; %d is "
						       "the ignore value)",
					 lab->px[i], i % (size_t)lab->w, i / (size_t)lab->w, classes, SEG_IGNORE);
				return -1;
			}
	return 0;
}

/* strip a message's leading "<name>: " (the decoders name the file; the skipped
 * list names it already) */
static void reason_of(const struct dd_err *e, const char *name, char *reason, size_t len)
{
	size_t k = strlen(name);
	const char *m = e->msg;
	if (strncmp(m, name, k) == 0 && m[k] == ':')
		m += k + 2 <= strlen(m) ? k + 2 : k;
	snprintf(reason, len, "%s", m);
}

/* The pair at pos of split into r; its resized image added to sum (the mean) when
 * it is usable and sum is not NULL. */
static void process_pair(const struct build *b, int split, int64_t pos, const struct pair *p, struct result *r,
			 uint64_t *sum)
{
	const struct ds_options *o = b->opt;
	struct dd_err err = { 0 };
	char *data = NULL, *ldata = NULL;
	size_t len = 0, llen = 0;
	struct image img = { 0 }, lab = { 0 }, out = { 0 }, lout = { 0 };
	uint8_t *payload = NULL;
	size_t plen = 0;
	const char *lname = strrchr(p->label, '/') + 1, *iname = strrchr(p->image, '/') + 1;
	memset(r, 0, sizeof *r);
	int rc = fs_read_file(p->image, FILE_CAP, &data, &len, &err);
	if (rc == DD_OK)
		rc = image_decode(data, len, iname, o->max_pixels, &img, &err);
	if (rc == DD_OK)
		rc = image_set_channels(&img, o->channels, &err);
	if (rc) {
		reason_of(&err, iname, r->reason, sizeof r->reason);
		goto out;
	}
	rc = fs_read_file(p->label, FILE_CAP, &ldata, &llen, &err);
	if (rc == DD_OK)
		rc = image_decode_label(ldata, llen, lname, o->max_pixels, &lab, &r->kind, r->palette, &r->npalette, &err);
	if (rc) {
		char why[300];
		reason_of(&err, lname, why, sizeof why);
		snprintf(r->reason, sizeof r->reason, "its label %s: %s", lname, why);
		goto out;
	}
	if (lab.w != img.w || lab.h != img.h) {
		snprintf(r->reason, sizeof r->reason, "its label %s is %dx%d but the image is %dx%d", lname, lab.w, lab.h,
			 img.w, img.h);
		rc = DD_EINVAL;
		goto out;
	}
	char why[300];
	if (to_classes(b, &lab, r->kind, r->palette, r->npalette, why, sizeof why)) {
		snprintf(r->reason, sizeof r->reason, "its label %s: %s", lname, why);
		rc = DD_EINVAL;
		goto out;
	}
	uint64_t seed = o->seed ^ ((uint64_t)(split + 1) << 56) ^ ((uint64_t)pos * RNG_GAMMA);
	rc = image_resize(&img, o->width, o->height, o->resize, seed, &out, &err);
	if (rc == DD_OK)
		rc = image_resize_nearest(&lab, o->width, o->height, o->resize, 0, &lout, &err);
	if (rc == DD_OK) {
		if (o->encoding == DS_ENC_NONE) {
			plen = (size_t)out.w * out.h * out.c;
			if ((payload = malloc(plen)))
				image_to_planes(&out, payload, NULL);
			else
				rc = dd_err_set(&err, DD_ENOMEM, "out of memory");
		} else if (o->encoding == DS_ENC_PNG) {
			rc = image_encode_png(&out, 6, &payload, &plen, &err);
		} else {
			rc = image_encode_jpeg(&out, 90, &payload, &plen, &err);
		}
	}
	if (rc == DD_OK) {
		struct datum d = { .channels = o->channels, .height = o->height, .width = o->width,
				   .encoded = o->encoding != DS_ENC_NONE, .data = payload, .data_len = plen };
		rc = datum_encode(&d, &r->feat, &r->flen, &err);
	}
	if (rc == DD_OK) {
		struct datum d = { .channels = 1, .height = o->height, .width = o->width, .data = lout.px,
				   .data_len = (size_t)lout.w * lout.h };
		rc = datum_encode(&d, &r->lab, &r->llen, &err);
	}
	if (rc) {
		snprintf(r->reason, sizeof r->reason, "%s", err.msg);
		goto out;
	}
	for (size_t i = 0; i < (size_t)lout.w * lout.h; i++)
		r->hist[lout.px[i]]++;
	if (sum) /* every usable pair is written: the mean counts exactly those */
		for (size_t i = 0; i < (size_t)out.w * out.h * out.c; i++)
			sum[i] += out.px[i];
	r->ok = 1;
out:
	if (!r->ok) {
		free(r->feat);
		free(r->lab);
		r->feat = r->lab = NULL;
	}
	free(data);
	free(ldata);
	free(payload);
	image_free(&img);
	image_free(&lab);
	image_free(&out);
	image_free(&lout);
}

/* ---- a split: batches on threads, written in order ---- */

struct batch {
	const struct build *b;
	int split;
	int64_t base, n;
	struct result *res;
	int nthreads, id;
	uint64_t *sum; /* this thread's sums of the train images written (H*W*C), or NULL */
};

static void *batch_thread(void *v)
{
	struct batch *t = v;
	for (int64_t k = t->id; k < t->n; k += t->nthreads)
		process_pair(t->b, t->split, t->base + k, &t->b->split[t->split].v[t->base + k], &t->res[k], t->sum);
	return NULL;
}

/* Write split's two databases; for the train split (mean not NULL) the mean of
 * its written images into mean (H*W*C). */
static int write_split(struct build *b, int split, double *mean, struct dd_err *err)
{
	const struct pairs *ps = &b->split[split];
	const char *name = split ? "val" : "train";
	char fdir[PATH_MAX], ldir[PATH_MAX];
	dsinfo_db_path(b->out, name, fdir, sizeof fdir);
	dsinfo_labels_db_path(b->out, name, ldir, sizeof ldir);
	fs_rm_rf(fdir, NULL);
	fs_rm_rf(ldir, NULL);
	if (!ps->n)
		return DD_OK;
	int nthreads = b->opt->threads > 0 ? b->opt->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > BATCH)
		nthreads = BATCH;
	struct lmdbw *fw = NULL, *lw = NULL;
	struct result *res = calloc(BATCH, sizeof *res);
	pthread_t th[BATCH];
	struct batch args[BATCH];
	uint64_t *sums[BATCH] = { 0 };
	size_t npx = (size_t)b->opt->width * b->opt->height * b->opt->channels;
	int rc = DD_OK;
	for (int t = 0; mean && t < nthreads; t++)
		if (!(sums[t] = calloc(npx, sizeof **sums)))
			rc = DD_ENOMEM;
	if (!res || rc) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = lmdbw_open(fdir, 1000, &fw, err)) || (rc = lmdbw_open(ldir, 1000, &lw, err)))
		goto out;
	for (int64_t base = 0; base < ps->n && rc == DD_OK; base += BATCH) {
		int64_t n = ps->n - base < BATCH ? ps->n - base : BATCH;
		int created[BATCH] = { 0 };
		for (int t = 0; t < nthreads; t++) {
			args[t] = (struct batch){ b, split, base, n, res, nthreads, t, sums[t] };
			created[t] = t > 0 && pthread_create(&th[t], NULL, batch_thread, &args[t]) == 0;
		}
		/* this thread does share 0, and the share of any thread that did not start */
		for (int t = 0; t < nthreads; t++)
			if (!created[t])
				batch_thread(&args[t]);
		for (int t = 1; t < nthreads; t++)
			if (created[t])
				pthread_join(th[t], NULL);
		for (int64_t k = 0; k < n; k++) {
			struct result *r = &res[k];
			if (rc == DD_OK && r->ok) {
				if ((rc = lmdbw_put(fw, 0, r->feat, r->flen, err)) == DD_OK)
					rc = lmdbw_put(lw, 0, r->lab, r->llen, err);
				for (int v = 0; v < 256; v++) {
					b->pixels[split][v] += r->hist[v];
					if (r->hist[v] && v != SEG_IGNORE && v > b->max_class)
						b->max_class = v;
				}
				b->kinds |= 1 << r->kind;
				if (r->kind == IMAGE_LABEL_PALETTE) {
					if (!b->npalette) {
						memcpy(b->palette, r->palette, sizeof b->palette);
						b->npalette = r->npalette ? r->npalette : 1;
					} else if (!b->palettes_differ && memcmp(b->palette, r->palette, 768) != 0) {
						b->palettes_differ = 1;
						say(b, "warn", "%s: its label's palette differs from the first label's: the "
							       "indices are taken as the classes all the same", ps->v[base + k].shown);
					}
				}
			} else if (!r->ok) {
				skip(b, ps->v[base + k].shown, r->reason);
			}
			free(r->feat);
			free(r->lab);
			r->feat = r->lab = NULL;
		}
		b->done += n;
		if (b->prog && b->prog->progress)
			b->prog->progress(b->prog->ctx, name, b->done, b->total);
		if (rc == DD_OK && b->prog && b->prog->should_stop && b->prog->should_stop(b->prog->ctx))
			rc = dd_err_set(err, DD_ECONFLICT, "aborted");
	}
out:
	free(res);
	if (rc == DD_OK && mean) {
		int64_t n = lmdbw_count(fw);
		for (size_t i = 0; i < npx && n > 0; i++) {
			uint64_t s = 0;
			for (int t = 0; t < nthreads; t++)
				s += sums[t][i];
			mean[i] = (double)s / (double)n;
		}
	}
	for (int t = 0; t < nthreads; t++)
		free(sums[t]);
	if (rc == DD_OK) {
		rc = lmdbw_close(fw, err);
		int r2 = lmdbw_close(lw, rc ? NULL : err);
		if (rc == DD_OK)
			rc = r2;
	} else {
		lmdbw_abort(fw);
		lmdbw_abort(lw);
	}
	return rc;
}

/* ---- outputs ---- */

/* A colour per class when no label gave one: PASCAL VOC's bit pattern (class 0
 * black, 1 dark red, 2 dark green, …), which stays distinct for 255 classes. */
static void voc_colour(int k, uint8_t *rgb)
{
	int r = 0, g = 0, bl = 0;
	for (int j = 0, c = k; j < 8; j++, c >>= 3) {
		r |= ((c >> 0) & 1) << (7 - j);
		g |= ((c >> 1) & 1) << (7 - j);
		bl |= ((c >> 2) & 1) << (7 - j);
	}
	rgb[0] = (uint8_t)r, rgb[1] = (uint8_t)g, rgb[2] = (uint8_t)bl;
}

static int read_names(struct build *b, const char *root, struct dd_err *err)
{
	char path[PATH_MAX], *text;
	size_t len;
	snprintf(path, sizeof path, "%s/%s", root, DSINFO_LABELS);
	if (access(path, F_OK) != 0)
		return DD_OK;
	int rc = fs_read_file(path, 1u << 20, &text, &len, err);
	if (rc)
		return rc;
	b->names = calloc(SEG_MAX_CLASSES + 1, sizeof *b->names);
	if (!b->names) {
		free(text);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	int line = 0;
	char *at = text;
	for (char *p; (p = fs_line_next(&at));) {
		line++;
		if (b->nnames >= SEG_MAX_CLASSES) {
			free(text);
			return dd_err_set(err, DD_EINVAL, "labels.txt line %d: more than %d classes", line, SEG_MAX_CLASSES);
		}
		if (!(b->names[b->nnames++] = strdup(*p ? p : "")))
			break;
	}
	free(text);
	while (b->nnames > 0 && !b->names[b->nnames - 1][0])
		free(b->names[--b->nnames]);
	for (int k = 0; k < b->nnames; k++)
		if (!b->names[k][0])
			return dd_err_set(err, DD_EINVAL, "labels.txt line %d: empty (line i names class i-1)", k + 1);
	if (b->nnames < 2)
		return dd_err_set(err, DD_EINVAL, "labels.txt: at least 2 classes (line i names class i-1), found %d",
				  b->nnames);
	return DD_OK;
}

static void drop_partial(const char *out)
{
	static const char *const names[] = { "train", "val" };
	static const char *const means[] = { DSINFO_MEAN, DSINFO_MEAN_PNG };
	for (int i = 0; i < 2; i++) {
		char p[PATH_MAX];
		dsinfo_path(out, means[i], p, sizeof p);
		unlink(p);
	}
	for (int s = 0; s < 2; s++) {
		char p[PATH_MAX];
		dsinfo_db_path(out, names[s], p, sizeof p);
		fs_rm_rf(p, NULL);
		dsinfo_labels_db_path(out, names[s], p, sizeof p);
		fs_rm_rf(p, NULL);
	}
}

int seg_create(const struct seg_source *src, const struct ds_options *opt, const char *out_dir,
	       const struct ds_progress *prog, cJSON **summary, struct dd_err *err)
{
	struct build *b = calloc(1, sizeof *b);
	cJSON *sum = NULL;
	char *cmtext = NULL;
	double *mean = NULL;
	int rc;
	int64_t t0 = fs_mono_ms();
	if (summary)
		*summary = NULL;
	if (!b)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	*b = (struct build){ .src = src, .opt = opt, .prog = prog, .out = out_dir, .skipped = cJSON_CreateArray() };
	if ((rc = fs_mkdir_p(out_dir, err)))
		goto out;
	char marker[PATH_MAX];
	dsinfo_path(out_dir, DSINFO_FILE, marker, sizeof marker);
	unlink(marker);

	/* the classes: a colour map, labels.txt, or the data */
	if (src->colormap_text || src->colormap) {
		const char *cname = src->colormap ? strrchr(src->colormap, '/') ? strrchr(src->colormap, '/') + 1 : src->colormap
						  : "colormap";
		const char *text = src->colormap_text;
		size_t len;
		if (!text) {
			if ((rc = fs_read_file(src->colormap, 1u << 20, &cmtext, &len, err)))
				goto out;
			text = cmtext;
		}
		if ((rc = seg_colormap_parse(text, cname, b->cmap.rgb, &b->cmap.n, err)))
			goto out;
		cmap_build(&b->cmap);
		b->fixed_classes = b->cmap.n;
	}
	if ((rc = read_names(b, src->root, err)))
		goto out;
	if (b->nnames && b->fixed_classes && b->nnames != b->fixed_classes) {
		rc = dd_err_set(err, DD_EINVAL, "labels.txt names %d classes but the colour map has %d lines", b->nnames,
				b->fixed_classes);
		goto out;
	}
	if (b->nnames)
		b->fixed_classes = b->nnames;

	say(b, "info", "pairing images and labels");
	if ((rc = gather(b, src->root, "", &b->split[0], err)))
		goto out;
	if (src->val_root) {
		if ((rc = gather(b, src->val_root, "val", &b->split[1], err)))
			goto out;
	} else if (opt->val_pct > 0) {
		struct pairs *t = &b->split[0];
		ds_shuffle(t->v, t->n, sizeof *t->v, opt->seed ^ 0x5e9d47a3c1b2ull);
		int ntrain, nval, ntest;
		ds_split_counts((int)t->n, opt->val_pct, 0, &ntrain, &nval, &ntest);
		for (int64_t i = ntrain; i < t->n; i++)
			pairs_push(&b->split[1], t->v[i]);
		t->n = ntrain;
	}
	if (!b->split[0].n) {
		rc = dd_err_set(err, DD_EINVAL, "no image has a label to pair with (%d skipped); see the skipped list",
				cJSON_GetArraySize(b->skipped));
		goto out;
	}
	b->total = b->split[0].n + b->split[1].n;
	say(b, "info", "%lld train and %lld val pairs", (long long)b->split[0].n, (long long)b->split[1].n);
	int64_t counts[2];
	if (!(mean = calloc((size_t)opt->width * opt->height * opt->channels, sizeof *mean))) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	for (int s = 0; s < 2; s++) {
		int64_t before = cJSON_GetArraySize(b->skipped);
		if ((rc = write_split(b, s, s == 0 ? mean : NULL, err)))
			goto out;
		counts[s] = b->split[s].n - (cJSON_GetArraySize(b->skipped) - before);
	}
	if (counts[0] == 0) {
		rc = dd_err_set(err, DD_EINVAL, "no pair of the train split could be used (%d skipped); see the skipped list",
				cJSON_GetArraySize(b->skipped));
		goto out;
	}
	if ((rc = ds_write_mean(out_dir, opt, mean, err)))
		goto out;
	int classes = b->fixed_classes ? b->fixed_classes : b->max_class + 1 < 2 ? 2 : b->max_class + 1;

	/* labels.txt, then dataset.json last */
	size_t cap = (size_t)classes * 64 + 64, tl = 0;
	char *txt = malloc(cap);
	if (!txt) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	sum = cJSON_CreateObject();
	cJSON_AddStringToObject(sum, "task", "segmentation");
	cJSON *o = ds_options_to_json(opt);
	cJSON_DeleteItemFromObject(o, "test_pct");
	cJSON_DeleteItemFromObject(o, "min_per_class");
	cJSON_DeleteItemFromObject(o, "max_per_class");
	if (src->val_root)
		cJSON_DeleteItemFromObject(o, "val_pct");
	cJSON_AddBoolToObject(o, "val_folder", src->val_root != NULL);
	cJSON_AddBoolToObject(o, "colormap", b->cmap.n > 0);
	cJSON_AddItemToObject(sum, "options", o);
	cJSON *labels = cJSON_AddArrayToObject(sum, "labels");
	cJSON *pal = cJSON_AddArrayToObject(sum, "palette");
	for (int k = 0; k < classes; k++) {
		char nm[32];
		snprintf(nm, sizeof nm, "class_%d", k);
		const char *n = k < b->nnames ? b->names[k] : nm;
		cJSON_AddItemToArray(labels, cJSON_CreateString(n));
		if (tl + strlen(n) + 2 < cap)
			tl += (size_t)snprintf(txt + tl, cap - tl, "%s\n", n);
		uint8_t c[3];
		if (b->cmap.n)
			memcpy(c, b->cmap.rgb + 3 * k, 3);
		else if (b->npalette && k < b->npalette)
			memcpy(c, b->palette + 3 * k, 3);
		else
			voc_colour(k, c);
		cJSON *e = cJSON_CreateArray();
		for (int j = 0; j < 3; j++)
			cJSON_AddItemToArray(e, cJSON_CreateNumber(c[j]));
		cJSON_AddItemToArray(pal, e);
	}
	char lpath[PATH_MAX];
	dsinfo_path(out_dir, DSINFO_LABELS, lpath, sizeof lpath);
	rc = fs_write_file_atomic(lpath, txt, tl, err);
	free(txt);
	if (rc)
		goto out;
	cJSON_AddNumberToObject(sum, "classes", classes);
	cJSON_AddNumberToObject(sum, "ignore_label", SEG_IGNORE);
	cJSON *modes = cJSON_AddArrayToObject(sum, "label_modes");
	static const char *const kind_names[] = { "palette", "grayscale", "rgb" };
	for (int k = 0; k < 3; k++)
		if (b->kinds & (1 << k))
			cJSON_AddItemToArray(modes, cJSON_CreateString(kind_names[k]));
	cJSON_AddBoolToObject(sum, "palettes_differ", b->palettes_differ);
	cJSON *splits = cJSON_AddObjectToObject(sum, "splits");
	for (int s = 0; s < 2; s++) {
		cJSON *sp = cJSON_AddObjectToObject(splits, s ? "val" : "train");
		cJSON_AddNumberToObject(sp, "images", (double)counts[s]);
		cJSON_AddNumberToObject(sp, "listed", (double)b->split[s].n);
		cJSON *px = cJSON_AddArrayToObject(sp, "pixels_per_class");
		for (int k = 0; k < classes; k++)
			cJSON_AddItemToArray(px, cJSON_CreateNumber((double)b->pixels[s][k]));
		cJSON_AddNumberToObject(sp, "ignored_pixels", (double)b->pixels[s][SEG_IGNORE]);
	}
	cJSON_AddItemToObject(sum, "skipped", b->skipped);
	b->skipped = NULL;
	cJSON_AddNumberToObject(sum, "seconds", (double)(fs_mono_ms() - t0) / 1000.0);
	static const char *const outputs[] = { DSINFO_DB("train"), DSINFO_DB("val"), DSINFO_LABELS_DB("train"),
					       DSINFO_LABELS_DB("val"), DSINFO_LABELS, DSINFO_MEAN, DSINFO_MEAN_PNG, NULL };
	rc = ds_write_summary(out_dir, outputs, sum, err);
	if (rc == DD_OK && summary) {
		*summary = sum;
		sum = NULL;
	}
	say(b, "info", "done in %.1f s", (double)(fs_mono_ms() - t0) / 1000.0);
out:
	if (rc != DD_OK)
		drop_partial(out_dir);
	cJSON_Delete(sum);
	cJSON_Delete(b->skipped);
	free(cmtext);
	free(mean);
	/* the val split may hold pairs moved from train: free each pair once */
	if (!src->val_root) {
		b->split[0].n += b->split[1].n;
		free(b->split[1].v);
		b->split[1] = (struct pairs){ 0 };
	}
	pairs_free(&b->split[0]);
	pairs_free(&b->split[1]);
	for (int k = 0; k < b->nnames; k++)
		free(b->names[k]);
	free(b->names);
	free(b);
	return rc;
}

static int has_dir(const char *root, const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", root, name);
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int seg_layout_resolve(const char *root, char *found)
{
	char cur[PATH_MAX];
	snprintf(cur, sizeof cur, "%s", root);
	for (int depth = 0; depth < 8; depth++) {
		if (has_dir(cur, "images") && has_dir(cur, "labels")) {
			snprintf(found, PATH_MAX, "%s", cur);
			return 1;
		}
		char **names;
		int n;
		if (ds_list_dir(cur, &names, &n, NULL) != DD_OK)
			return 0;
		int one = n == 1 && has_dir(cur, names[0]);
		if (one) {
			char next[PATH_MAX];
			snprintf(next, sizeof next, "%s/%s", cur, names[0]);
			memcpy(cur, next, sizeof cur);
		}
		ds_free_names(names, n);
		if (!one)
			return 0;
	}
	return 0;
}
