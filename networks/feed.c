/* feed.c — see feed.h. */
#define _GNU_SOURCE
#include "feed.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../common/rng.h"
#include "backend.h"
#include "../datasets/datum.h"
#include "../datasets/dsinfo.h"
#include "../datasets/image.h"
#include "../datasets/lmdbio.h"

/* One prefetched batch. */
struct pbuf {
	float *data, *labels;       /* (batch*C*H*W), (batch) */
	/* raw (a device transforms): the stored 8-bit planes and each sample's window */
	uint8_t *px;                /* (batch*C*h*w) */
	int32_t *y0, *x0;           /* (batch) */
	uint8_t *flip;              /* (batch) */
	int64_t epoch, pos;         /* the position after it */
	int rc;                     /* its load's status */
	struct dd_err err;
};

/* Invariants: only the producer (the prefetch thread, or the caller when there is
 * none) touches order, order_epoch, img and the producer position (pepoch, ppos);
 * the consumer position (cepoch, cpos) is where the caller stands, which is what a
 * snapshot records.  Under prefetch, mu guards the ring, gen and the positions. */
struct feed {
	struct lmdbr *db;
	struct feed_opts o;
	int64_t n;          /* records */
	int64_t *order;     /* epoch order_epoch's record order */
	int64_t order_epoch;
	int64_t pepoch, ppos; /* the producer's next record: (epoch, position in it) */
	int64_t cepoch, cpos; /* the consumer's */
	int c, h, w;        /* stored image shape */
	int oh, ow;         /* fed shape (after crop) */
	float *mean;        /* c*h*w (image mean, or pixel mean expanded), or NULL */
	float *img;         /* scratch: c*h*w floats of the current record */
	int raw;            /* 1: batches leave as 8-bit planes for o.device to transform */
	struct pbuf direct; /* raw without prefetch: the batch's planes and windows */
	int direct_n;       /* the batch size direct holds */
	uint64_t seed;      /* opts.seed mixed with the split */
	/* prefetch (o.prefetch > 0) */
	pthread_t th;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pbuf buf[2];
	int head, ready;    /* ring: next to consume, how many are full */
	uint64_t gen;       /* bumped by a seek: a batch begun before it is dropped */
	int quit;
};

/* A value that depends only on (a, b, c): the feed's randomness is counter-based,
 * so a position alone fixes what comes next (a resumed training sees the same
 * batches, and prefetching changes nothing). */
static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t s = a ^ (b * 0xD1B54A32D192ED03ull) ^ (c * 0x8CB92BA72F3D8DD7ull);
	rng_next(&s);
	return rng_next(&s);
}

/* Epoch ep's order: the identity in validation, a Fisher-Yates permutation drawn
 * from (seed, ep) in training. */
static void order_for(struct feed *f, int64_t ep)
{
	for (int64_t i = 0; i < f->n; i++)
		f->order[i] = i;
	if (f->o.train) {
		uint64_t r = mix3(f->seed, (uint64_t)ep, 0x0DE5);
		for (int64_t i = f->n - 1; i > 0; i--) {
			int64_t j = rng_below(&r, i + 1), t = f->order[i];
			f->order[i] = f->order[j];
			f->order[j] = t;
		}
	}
	f->order_epoch = ep;
}

/* Record i into out (floats) or, when out8, its 8-bit planes into out8 (an error
 * for a record of float values); *is8: whether it holds 8-bit pixels. */
static int load_record(struct feed *f, int64_t i, float *out, uint8_t *out8, int *is8, int *label, int *c, int *h,
		       int *w, struct dd_err *err)
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
	*is8 = d.encoded || d.n_float == 0;
	if (out8 && !*is8)
		rc = dd_err_set(err, DD_EINVAL, "record %lld holds float values, not the 8-bit pixels the device takes",
				(long long)i);
	else if (d.encoded) {
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
		if (!rc && (out8 || out))
			image_to_planes(&im, out8, out);
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
			if (out8)
				memcpy(out8, d.data, cnt);
			else if (out)
				for (size_t k = 0; k < cnt; k++)
					out[k] = d.data[k];
		} else
			rc = dd_err_set(err, DD_EINVAL, "record %lld holds %zu values, expected %zu",
					(long long)i, d.data_len ? d.data_len : d.n_float, cnt);
	}
	datum_free(&d);
	return rc;
}

static void *producer(void *arg);

int feed_mean_load(const char *mean_path, enum feed_mean mode, const float *mean_value, int nmean_value, int c,
		   int h, int w, float **out, struct dd_err *err)
{
	*out = NULL;
	if (!mean_value && mode == FEED_MEAN_NONE)
		return DD_OK;
	size_t plane = (size_t)h * w, cnt = (size_t)c * plane;
	float *mean = malloc(cnt * sizeof(float));
	if (!mean)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	if (mean_value) {
		for (int ch = 0; ch < c; ch++) {
			float v = mean_value[nmean_value == 1 ? 0 : ch];
			for (size_t k = 0; k < plane; k++)
				mean[ch * plane + k] = v;
		}
		*out = mean;
		return DD_OK;
	}
	char *buf = NULL;
	size_t len;
	int rc = fs_read_file(mean_path, 1u << 30, &buf, &len, err);
	if (rc) {
		free(mean);
		return rc;
	}
	struct blob b;
	rc = blob_decode((const uint8_t *)buf, len, &b, err);
	free(buf);
	if (rc) {
		dd_err_prefix(err, "%s", mean_path);
		free(mean);
		return rc;
	}
	if (b.count != cnt || b.channels != c) {
		rc = dd_err_set(err, DD_EINVAL, "%s is %dx%dx%d, the images are %dx%dx%d", mean_path, b.channels,
				b.height, b.width, c, h, w);
	} else if (mode == FEED_MEAN_PIXEL) {
		for (int ch = 0; ch < c; ch++) {
			double s = 0;
			for (size_t k = 0; k < plane; k++)
				s += b.data[ch * plane + k];
			for (size_t k = 0; k < plane; k++)
				mean[ch * plane + k] = (float)(s / (double)plane);
		}
	} else
		memcpy(mean, b.data, cnt * sizeof(float));
	blob_free(&b);
	if (rc)
		free(mean);
	else
		*out = mean;
	return rc;
}

void feed_transform(const float *img, int c, int h, int w, const float *mean, float scale, int y0, int x0, int oh,
		    int ow, int flip, float *out)
{
	size_t plane = (size_t)h * w, oplane = (size_t)oh * ow;
	for (int ch = 0; ch < c; ch++)
		for (int y = 0; y < oh; y++) {
			const float *src = img + ch * plane + (size_t)(y + y0) * w + x0;
			const float *m = mean ? mean + ch * plane + (size_t)(y + y0) * w + x0 : NULL;
			float *d = out + ch * oplane + (size_t)y * ow;
			for (int x = 0; x < ow; x++) {
				float v = m ? (src[x] - m[x]) * scale : src[x] * scale;
				d[flip ? ow - 1 - x : x] = v;
			}
		}
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
	f->seed = o->seed ^ (strcmp(split, "train") == 0 ? 0x5EEDull : 0x7A1ull);
	f->order_epoch = -1;
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
	int lab, is8 = 0;
	if ((rc = load_record(f, 0, NULL, NULL, &is8, &lab, &f->c, &f->h, &f->w, err)))
		goto fail;
	f->raw = is8 && backend_has_upload(o->device);
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
	if (o->mean_value || o->mean != FEED_MEAN_NONE) {
		dsinfo_path(dataset_dir, DSINFO_MEAN, path, sizeof path);
		if ((rc = feed_mean_load(path, o->mean, o->mean_value, o->nmean_value, f->c, f->h, f->w, &f->mean,
					 err)))
			goto fail;
	}
	f->img = malloc((size_t)f->c * f->h * f->w * sizeof(float));
	f->order = malloc((size_t)f->n * sizeof(int64_t));
	if (!f->img || !f->order) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	if (o->prefetch > 0) {
		for (int i = 0; i < 2; i++) {
			f->buf[i].labels = malloc((size_t)o->prefetch * sizeof(float));
			if (f->raw) {
				f->buf[i].px = malloc((size_t)o->prefetch * f->c * f->h * f->w);
				f->buf[i].y0 = malloc((size_t)o->prefetch * sizeof(int32_t));
				f->buf[i].x0 = malloc((size_t)o->prefetch * sizeof(int32_t));
				f->buf[i].flip = malloc((size_t)o->prefetch);
			} else {
				f->buf[i].data = malloc((size_t)o->prefetch * f->c * f->oh * f->ow * sizeof(float));
			}
			if ((f->raw ? !f->buf[i].px || !f->buf[i].y0 || !f->buf[i].x0 || !f->buf[i].flip : !f->buf[i].data) ||
			    !f->buf[i].labels) {
				rc = dd_err_set(err, DD_ENOMEM, "out of memory for the prefetch buffers");
				goto fail;
			}
		}
		pthread_mutex_init(&f->mu, NULL);
		pthread_cond_init(&f->cv, NULL);
		if (pthread_create(&f->th, NULL, producer, f)) {
			pthread_cond_destroy(&f->cv);
			pthread_mutex_destroy(&f->mu);
			rc = dd_err_set(err, DD_EINTERNAL, "cannot start the prefetch thread");
			goto fail;
		}
		f->started = 1;
	}
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
	if (f->started) {
		pthread_mutex_lock(&f->mu);
		f->quit = 1;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->th, NULL);
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
	}
	for (int i = 0; i < 3; i++) {
		struct pbuf *b = i < 2 ? &f->buf[i] : &f->direct;
		free(b->data);
		free(b->labels);
		free(b->px);
		free(b->y0);
		free(b->x0);
		free(b->flip);
	}
	lmdbr_close(f->db);
	free(f->order);
	free(f->mean);
	free(f->img);
	free(f);
}

int64_t feed_epoch_size(const struct feed *f) { return f->n; }

void feed_shape(const struct feed *f, int *c, int *h, int *w)
{
	*c = f->c;
	*h = f->oh;
	*w = f->ow;
}

void feed_position(struct feed *f, int64_t *epoch, int64_t *pos)
{
	if (f->started)
		pthread_mutex_lock(&f->mu);
	*epoch = f->cepoch;
	*pos = f->cpos;
	if (f->started)
		pthread_mutex_unlock(&f->mu);
}

void feed_seek(struct feed *f, int64_t epoch, int64_t pos)
{
	if (pos < 0 || pos > f->n)
		pos = 0;
	if (f->started)
		pthread_mutex_lock(&f->mu);
	f->cepoch = f->pepoch = epoch < 0 ? 0 : epoch;
	f->cpos = f->ppos = pos;
	if (f->started) {
		f->gen++;
		f->ready = 0;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
	}
}

void feed_rewind(struct feed *f)
{
	int64_t ep, pos;
	feed_position(f, &ep, &pos);
	feed_seek(f, f->o.train && pos > 0 ? ep + 1 : ep, 0);
}

/* Load n samples from (*epoch, *pos) on, advancing them: the producer's work. */
static int fill(struct feed *f, int64_t *epoch, int64_t *pos, float *data, float *labels, struct pbuf *raw, int n,
		struct dd_err *err)
{
	size_t oplane = (size_t)f->oh * f->ow;
	for (int s = 0; s < n; s++) {
		if (*pos >= f->n) {
			++*epoch;
			*pos = 0;
		}
		if (f->order_epoch != *epoch)
			order_for(f, *epoch);
		uint64_t r = mix3(f->seed, (uint64_t)*epoch, (uint64_t)*pos + 1);
		int64_t rec = f->order[(*pos)++];
		int label, c = f->c, h = f->h, w = f->w, is8;
		int rc = load_record(f, rec, raw ? NULL : f->img, raw ? raw->px + (size_t)s * c * h * w : NULL, &is8,
				     &label, &c, &h, &w, err);
		if (rc)
			return rc;
		int y0 = 0, x0 = 0, flip = 0;
		if (f->oh < f->h || f->ow < f->w) {
			if (f->o.train) {
				y0 = (int)rng_below(&r, f->h - f->oh + 1);
				x0 = (int)rng_below(&r, f->w - f->ow + 1);
			} else {
				y0 = (f->h - f->oh) / 2;
				x0 = (f->w - f->ow) / 2;
			}
		}
		if (f->o.train && f->o.mirror)
			flip = (int)(rng_next(&r) & 1);
		if (raw) {
			raw->y0[s] = y0;
			raw->x0[s] = x0;
			raw->flip[s] = (uint8_t)flip;
		} else {
			feed_transform(f->img, f->c, f->h, f->w, f->mean, f->o.scale, y0, x0, f->oh, f->ow, flip,
				       data + (size_t)s * f->c * oplane);
		}
		if (labels)
			labels[s] = (float)label;
	}
	return DD_OK;
}

/* The prefetch thread: keeps the two buffers full, from the producer position. */
static void *producer(void *arg)
{
	struct feed *f = arg;
	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->quit && f->ready == 2)
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->quit)
			break;
		uint64_t gen = f->gen;
		int64_t ep = f->pepoch, pos = f->ppos;
		struct pbuf *b = &f->buf[(f->head + f->ready) % 2];
		pthread_mutex_unlock(&f->mu);
		struct dd_err e = { 0 };
		int rc = fill(f, &ep, &pos, b->data, b->labels, f->raw ? b : NULL, f->o.prefetch, &e);
		pthread_mutex_lock(&f->mu);
		if (gen != f->gen) /* a seek came meanwhile: this batch is from before it */
			continue;
		b->rc = rc;
		b->err = e;
		b->epoch = ep;
		b->pos = pos;
		f->pepoch = ep;
		f->ppos = pos;
		f->ready++;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* Samples [first, first+n) of batch b into data and labels: transformed on the
 * device when raw (by device, else the feed's), else copied. */
static int put(const struct feed *f, const struct pbuf *b, int first, int n, float *data, float *labels,
	       struct backend *device, struct dd_err *err)
{
	size_t cs = (size_t)f->c * f->h * f->w, os = (size_t)f->c * f->oh * f->ow;
	int rc = DD_OK;
	if (f->raw) {
		struct backend_upload u = { .px = b->px + (size_t)first * cs, .y0 = b->y0 + first, .x0 = b->x0 + first,
					    .flip = b->flip + first, .n = n, .c = f->c, .h = f->h, .w = f->w,
					    .oh = f->oh, .ow = f->ow, .mean = f->mean, .scale = f->o.scale, .out = data };
		rc = backend_upload_batch(device ? device : f->o.device, &u, err);
	} else {
		memcpy(data, b->data + (size_t)first * os, (size_t)n * os * sizeof(float));
	}
	if (!rc && labels)
		memcpy(labels, b->labels + first, (size_t)n * sizeof(float));
	return rc;
}

int feed_take(struct feed *f, const struct feed_batch **out, struct dd_err *err)
{
	*out = NULL;
	if (!f->started)
		return dd_err_set(err, DD_EINVAL, "feed_take needs a feed that prefetches");
	pthread_mutex_lock(&f->mu);
	while (!f->ready)
		pthread_cond_wait(&f->cv, &f->mu);
	struct pbuf *b = &f->buf[f->head];
	int rc = b->rc;
	if (rc) {
		if (err)
			*err = b->err;
	} else {
		f->cepoch = b->epoch;
		f->cpos = b->pos;
		*out = (const struct feed_batch *)b;
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

int feed_put(const struct feed *f, const struct feed_batch *b, int first, int n, float *data, float *labels,
	     struct backend *device, struct dd_err *err)
{
	if (first < 0 || n < 0 || first + n > f->o.prefetch)
		return dd_err_set(err, DD_EINVAL, "samples %d to %d are not in a batch of %d", first, first + n,
				  f->o.prefetch);
	return put(f, (const struct pbuf *)b, first, n, data, labels, device, err);
}

void feed_done(struct feed *f)
{
	pthread_mutex_lock(&f->mu);
	f->head = (f->head + 1) % 2;
	f->ready--;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

int feed_next(struct feed *f, float *data, float *labels, int n, struct dd_err *err)
{
	if (!f->started) {
		struct pbuf *raw = NULL;
		if (f->raw) {
			raw = &f->direct;
			if (f->direct_n < n) {
				free(raw->px), free(raw->y0), free(raw->x0), free(raw->flip);
				raw->px = malloc((size_t)n * f->c * f->h * f->w);
				raw->y0 = malloc((size_t)n * sizeof(int32_t));
				raw->x0 = malloc((size_t)n * sizeof(int32_t));
				raw->flip = malloc((size_t)n);
				f->direct_n = raw->px && raw->y0 && raw->x0 && raw->flip ? n : 0;
				if (!f->direct_n)
					return dd_err_set(err, DD_ENOMEM, "out of memory for a batch of %d", n);
			}
		}
		int rc = fill(f, &f->pepoch, &f->ppos, data, labels, raw, n, err);
		if (!rc && raw)
			rc = put(f, raw, 0, n, data, NULL, NULL, err);
		f->cepoch = f->pepoch;
		f->cpos = f->ppos;
		return rc;
	}
	if (n != f->o.prefetch)
		return dd_err_set(err, DD_EINVAL, "this feed prefetches batches of %d, not %d", f->o.prefetch, n);
	const struct feed_batch *b;
	int rc = feed_take(f, &b, err);
	if (rc) /* a failed batch stays failed: the caller stops (a seek clears it) */
		return rc;
	rc = feed_put(f, b, 0, n, data, labels, NULL, err);
	feed_done(f);
	return rc;
}
