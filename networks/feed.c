/* feed.c — see feed.h. */
#define _GNU_SOURCE
#include "feed.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../datasets/datum.h"
#include "../datasets/image.h"
#include "../datasets/lmdbio.h"

struct feed {
	struct lmdbr *db;
	struct feed_opts o;
	int64_t n;          /* records */
	int64_t *order;     /* this epoch's record order */
	int64_t pos;        /* next position in order */
	int64_t epochs;
	int c, h, w;        /* stored image shape */
	int oh, ow;         /* fed shape (after crop) */
	float *mean;        /* c*h*w (image mean, or pixel mean expanded), or NULL */
	float *img;         /* scratch: c*h*w floats of the current record */
	uint64_t rng;
};

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int64_t rng_below(uint64_t *s, int64_t n)
{
	return n <= 1 ? 0 : (int64_t)(rng_next(s) % (uint64_t)n);
}

static void new_epoch(struct feed *f)
{
	for (int64_t i = 0; i < f->n; i++)
		f->order[i] = i;
	if (f->o.train)
		for (int64_t i = f->n - 1; i > 0; i--) {
			int64_t j = rng_below(&f->rng, i + 1), t = f->order[i];
			f->order[i] = f->order[j];
			f->order[j] = t;
		}
	f->pos = 0;
}

/* Record i as C×H×W BGR floats into out (c*h*w).  With c/h/w zero (the first
 * call) they are taken from the record. */
static int load_record(struct feed *f, int64_t i, float *out, int *label, int *c, int *h, int *w,
		       struct dd_err *err)
{
	const uint8_t *val;
	size_t len;
	int lab = 0;
	int rc = lmdbr_get(f->db, i, &val, &len, &lab, err);
	if (rc)
		return rc;
	struct datum d;
	if ((rc = datum_decode(val, len, &d, err))) {
		dd_err_prefix(err, "record %lld", (long long)i);
		return rc;
	}
	*label = d.label;
	if (d.encoded) {
		struct image im = { 0 };
		char name[32];
		snprintf(name, sizeof name, "record %lld", (long long)i);
		rc = image_decode(d.data, d.data_len, NULL, 0, &im, err);
		if (!rc && *c && im.c != *c)
			rc = image_set_channels(&im, *c, err);
		if (!rc && !*c) {
			*c = im.c;
			*h = im.h;
			*w = im.w;
		}
		if (!rc && (im.h != *h || im.w != *w))
			rc = dd_err_set(err, DD_EINVAL, "%s is %dx%d, the dataset's images are %dx%d", name,
					im.w, im.h, *w, *h);
		if (!rc && out) {
			int C = im.c, HW = im.h * im.w;
			for (int ch = 0; ch < C; ch++) {
				int src = C == 3 ? 2 - ch : 0; /* BGR planes from RGB */
				float *p = out + (size_t)ch * HW;
				for (int k = 0; k < HW; k++)
					p[k] = im.px[(size_t)k * C + src];
			}
		}
		image_free(&im);
		if (rc)
			dd_err_prefix(err, "%s", name);
	} else {
		if (!*c) {
			*c = d.channels;
			*h = d.height;
			*w = d.width;
		}
		size_t cnt = (size_t)*c * *h * *w;
		if (d.channels != *c || d.height != *h || d.width != *w)
			rc = dd_err_set(err, DD_EINVAL, "record %lld is %dx%dx%d, expected %dx%dx%d",
					(long long)i, d.channels, d.height, d.width, *c, *h, *w);
		else if (d.n_float == cnt) {
			if (out)
				memcpy(out, d.float_data, cnt * sizeof(float));
		} else if (d.data_len == cnt) {
			if (out)
				for (size_t k = 0; k < cnt; k++)
					out[k] = d.data[k];
		} else
			rc = dd_err_set(err, DD_EINVAL, "record %lld holds %zu values, expected %zu",
					(long long)i, d.data_len ? d.data_len : d.n_float, cnt);
	}
	datum_free(&d);
	return rc;
}

static int load_mean(struct feed *f, const char *dir, struct dd_err *err)
{
	size_t plane = (size_t)f->h * f->w, cnt = (size_t)f->c * plane;
	f->mean = malloc(cnt * sizeof(float));
	if (!f->mean)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	if (f->o.mean_value) {
		for (int ch = 0; ch < f->c; ch++) {
			float v = f->o.mean_value[f->o.nmean_value == 1 ? 0 : ch];
			for (size_t k = 0; k < plane; k++)
				f->mean[ch * plane + k] = v;
		}
		return DD_OK;
	}
	char path[PATH_MAX], *buf = NULL;
	size_t len;
	snprintf(path, sizeof path, "%s/mean.binaryproto", dir);
	int rc = fs_read_file(path, 1u << 30, &buf, &len, err);
	if (rc)
		return rc;
	struct blob b;
	rc = blob_decode((const uint8_t *)buf, len, &b, err);
	free(buf);
	if (rc) {
		dd_err_prefix(err, "%s", path);
		return rc;
	}
	if (b.count != cnt || b.channels != f->c) {
		rc = dd_err_set(err, DD_EINVAL, "%s is %dx%dx%d, the images are %dx%dx%d", path, b.channels,
				b.height, b.width, f->c, f->h, f->w);
	} else if (f->o.mean == FEED_MEAN_PIXEL) {
		for (int ch = 0; ch < f->c; ch++) {
			double s = 0;
			for (size_t k = 0; k < plane; k++)
				s += b.data[ch * plane + k];
			for (size_t k = 0; k < plane; k++)
				f->mean[ch * plane + k] = (float)(s / (double)plane);
		}
	} else
		memcpy(f->mean, b.data, cnt * sizeof(float));
	blob_free(&b);
	return rc;
}

int feed_open(const char *dataset_dir, const char *split, const struct feed_opts *o,
	      struct feed **out, struct dd_err *err)
{
	*out = NULL;
	if (strcmp(split, "train") != 0 && strcmp(split, "val") != 0 && strcmp(split, "test") != 0)
		return dd_err_set(err, DD_EINVAL, "unknown split '%s'", split);
	struct feed *f = calloc(1, sizeof *f);
	if (!f)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	f->o = *o;
	if (!(f->o.scale > 0 || f->o.scale < 0))
		f->o.scale = 1;
	f->rng = o->seed ^ (strcmp(split, "train") == 0 ? 0x5EEDull : 0x7A1ull);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s_db", dataset_dir, split);
	int rc = lmdbr_open(path, &f->db, err);
	if (rc)
		goto fail;
	f->n = lmdbr_count(f->db);
	if (f->n <= 0) {
		rc = dd_err_set(err, DD_EINVAL, "%s holds no records", path);
		goto fail;
	}
	int lab;
	if ((rc = load_record(f, 0, NULL, &lab, &f->c, &f->h, &f->w, err)))
		goto fail;
	if (f->c <= 0 || f->h <= 0 || f->w <= 0) {
		rc = dd_err_set(err, DD_EINVAL, "%s: record 0 has no image shape", path);
		goto fail;
	}
	f->oh = f->h;
	f->ow = f->w;
	if (o->crop > 0) {
		if (o->crop > f->h || o->crop > f->w) {
			rc = dd_err_set(err, DD_EINVAL, "crop size %d is larger than the images (%dx%d)",
					o->crop, f->w, f->h);
			goto fail;
		}
		f->oh = f->ow = o->crop;
	}
	if (o->mean_value || o->mean != FEED_MEAN_NONE)
		if ((rc = load_mean(f, dataset_dir, err)))
			goto fail;
	f->img = malloc((size_t)f->c * f->h * f->w * sizeof(float));
	f->order = malloc((size_t)f->n * sizeof(int64_t));
	if (!f->img || !f->order) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	new_epoch(f);
	*out = f;
	return DD_OK;
fail:
	feed_close(f);
	return rc;
}

void feed_close(struct feed *f)
{
	if (!f)
		return;
	lmdbr_close(f->db);
	free(f->order);
	free(f->mean);
	free(f->img);
	free(f);
}

int64_t feed_epoch_size(const struct feed *f) { return f->n; }
int64_t feed_epoch(const struct feed *f) { return f->epochs; }

void feed_shape(const struct feed *f, int *c, int *h, int *w)
{
	*c = f->c;
	*h = f->oh;
	*w = f->ow;
}

void feed_rewind(struct feed *f) { new_epoch(f); }

int feed_next(struct feed *f, float *data, float *labels, int n, struct dd_err *err)
{
	size_t plane = (size_t)f->h * f->w, oplane = (size_t)f->oh * f->ow;
	for (int s = 0; s < n; s++) {
		if (f->pos >= f->n) {
			f->epochs++;
			new_epoch(f);
		}
		int64_t rec = f->order[f->pos++];
		int label, c = f->c, h = f->h, w = f->w;
		int rc = load_record(f, rec, f->img, &label, &c, &h, &w, err);
		if (rc)
			return rc;
		int y0 = 0, x0 = 0, flip = 0;
		if (f->oh < f->h || f->ow < f->w) {
			if (f->o.train) {
				y0 = (int)rng_below(&f->rng, f->h - f->oh + 1);
				x0 = (int)rng_below(&f->rng, f->w - f->ow + 1);
			} else {
				y0 = (f->h - f->oh) / 2;
				x0 = (f->w - f->ow) / 2;
			}
		}
		if (f->o.train && f->o.mirror)
			flip = (int)(rng_next(&f->rng) & 1);
		float *dst = data + (size_t)s * f->c * oplane, sc = f->o.scale;
		for (int ch = 0; ch < f->c; ch++)
			for (int y = 0; y < f->oh; y++) {
				const float *src = f->img + ch * plane + (size_t)(y + y0) * f->w + x0;
				const float *m = f->mean ? f->mean + ch * plane + (size_t)(y + y0) * f->w + x0 : NULL;
				float *d = dst + ch * oplane + (size_t)y * f->ow;
				for (int x = 0; x < f->ow; x++) {
					float v = m ? (src[x] - m[x]) * sc : src[x] * sc;
					d[flip ? f->ow - 1 - x : x] = v;
				}
			}
		if (labels)
			labels[s] = (float)label;
	}
	return DD_OK;
}
