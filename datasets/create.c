/* create.c — see create.h.
 *
 * Threads.  ds_create runs on the calling thread, which is also the one LMDB
 * writer.  `threads` workers take list positions from an atomic counter, do the
 * expensive part (read, decode, resize, encode) and leave the result in a ring
 * slot for that position; the writer takes slots strictly in order.  A worker
 * never runs more than `ring` positions ahead of the writer, so memory stays
 * bounded whatever the dataset size, and the output order (hence the LMDB keys)
 * depends only on the inputs and the seed, never on thread timing. */
#define _GNU_SOURCE
#include "create.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/rng.h"
#include "datum.h"
#include "dsinfo.h"
#include "lmdbio.h"

#define FILE_CAP (256u << 20) /* no image file is read past 256 MiB */

/* ---- names, options ---- */

static const char *const enc_names[] = { "png", "jpg", "none" };
static const char *const split_names[] = { "train", "val", "test" };

const char *ds_encoding_name(enum ds_encoding e) { return (unsigned)e < 3 ? enc_names[e] : "?"; }
const char *ds_split_name(enum ds_split s) { return (unsigned)s < 3 ? split_names[s] : "?"; }

int ds_encoding_parse(const char *s, enum ds_encoding *out)
{
	for (int i = 0; i < 3; i++)
		if (s && strcmp(s, enc_names[i]) == 0) {
			*out = (enum ds_encoding)i;
			return 0;
		}
	if (s && strcmp(s, "jpeg") == 0) {
		*out = DS_ENC_JPG;
		return 0;
	}
	return -1;
}

void ds_options_default(struct ds_options *o)
{
	*o = (struct ds_options){ .width = 256, .height = 256, .channels = 3, .resize = RESIZE_SQUASH,
				  .encoding = DS_ENC_PNG, .val_pct = 25, .test_pct = 0,
				  .min_per_class = 2, .max_per_class = 0, .seed = 0, .threads = 0,
				  .max_pixels = IMAGE_DEFAULT_MAX_PIXELS };
}

static int int_field(const cJSON *j, const char *key, int min, int max, int *out, struct dd_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	if (!v)
		return DD_OK;
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long long)v->valuedouble ||
	    v->valuedouble < min || v->valuedouble > max)
		return dd_err_set(err, DD_EINVAL, "options.%s: must be an integer from %d to %d", key, min, max);
	*out = (int)v->valuedouble;
	return DD_OK;
}

int ds_options_from_json(const cJSON *j, struct ds_options *o, struct dd_err *err)
{
	static const char *const keys[] = { "width", "height", "channels", "resize_mode", "encoding",
					    "val_pct", "test_pct", "min_per_class", "max_per_class",
					    "seed", "threads", "max_pixels", NULL };
	if (!j)
		return DD_OK;
	if (!cJSON_IsObject(j))
		return dd_err_set(err, DD_EINVAL, "options: must be an object");
	const cJSON *it;
	cJSON_ArrayForEach(it, j)
	{
		int known = 0;
		for (int i = 0; keys[i]; i++)
			known |= strcmp(it->string, keys[i]) == 0;
		if (!known)
			return dd_err_set(err, DD_EINVAL, "options.%s: unknown field", it->string);
	}
	int rc, mp = (int)(o->max_pixels / 1000000);
	if ((rc = int_field(j, "width", 1, 4096, &o->width, err)) ||
	    (rc = int_field(j, "height", 1, 4096, &o->height, err)) ||
	    (rc = int_field(j, "val_pct", 0, 100, &o->val_pct, err)) ||
	    (rc = int_field(j, "test_pct", 0, 100, &o->test_pct, err)) ||
	    (rc = int_field(j, "min_per_class", 1, INT_MAX, &o->min_per_class, err)) ||
	    (rc = int_field(j, "max_per_class", 0, INT_MAX, &o->max_per_class, err)) ||
	    (rc = int_field(j, "threads", 0, 256, &o->threads, err)) ||
	    (rc = int_field(j, "max_pixels", 1, 1000, &mp, err)))
		return rc;
	o->max_pixels = (int64_t)mp * 1000000;
	const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "channels");
	if (ch && (!cJSON_IsNumber(ch) || (ch->valuedouble != 1 && ch->valuedouble != 3)))
		return dd_err_set(err, DD_EINVAL, "options.channels: must be 1 (grayscale) or 3 (colour)");
	if (ch)
		o->channels = (int)ch->valuedouble;
	if (o->val_pct + o->test_pct > 100)
		return dd_err_set(err, DD_EINVAL, "options.val_pct + options.test_pct: must not exceed 100");
	if (o->max_per_class && o->max_per_class < o->min_per_class)
		return dd_err_set(err, DD_EINVAL, "options.max_per_class: must be at least min_per_class (%d)",
				  o->min_per_class);
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(j, "resize_mode");
	if (rm && (!cJSON_IsString(rm) || resize_mode_parse(rm->valuestring, &o->resize) != 0))
		return dd_err_set(err, DD_EINVAL, "options.resize_mode: must be squash, crop, fill or half_crop");
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(j, "encoding");
	if (en && (!cJSON_IsString(en) || ds_encoding_parse(en->valuestring, &o->encoding) != 0))
		return dd_err_set(err, DD_EINVAL, "options.encoding: must be png, jpg or none");
	const cJSON *sd = cJSON_GetObjectItemCaseSensitive(j, "seed");
	if (sd && (!cJSON_IsNumber(sd) || sd->valuedouble < 0 || sd->valuedouble > 9007199254740991.0 ||
		   sd->valuedouble != (double)(uint64_t)sd->valuedouble))
		return dd_err_set(err, DD_EINVAL, "options.seed: must be a non-negative integer");
	if (sd)
		o->seed = (uint64_t)sd->valuedouble;
	return DD_OK;
}

cJSON *ds_options_to_json(const struct ds_options *o)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "width", o->width);
	cJSON_AddNumberToObject(j, "height", o->height);
	cJSON_AddNumberToObject(j, "channels", o->channels);
	cJSON_AddStringToObject(j, "resize_mode", resize_mode_name(o->resize));
	cJSON_AddStringToObject(j, "encoding", ds_encoding_name(o->encoding));
	cJSON_AddNumberToObject(j, "val_pct", o->val_pct);
	cJSON_AddNumberToObject(j, "test_pct", o->test_pct);
	cJSON_AddNumberToObject(j, "min_per_class", o->min_per_class);
	cJSON_AddNumberToObject(j, "max_per_class", o->max_per_class);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	return j;
}

/* ---- small helpers ---- */

/* Python 2's round(): halves away from zero, as DIGITS computed its splits. */
static int round_half_away(double x) { return (int)(x < 0 ? ceil(x - 0.5) : floor(x + 0.5)); }

void ds_split_counts(int n, int val_pct, int test_pct, int *train, int *val, int *test)
{
	int train_pct = 100 - val_pct - test_pct;
	int a, b, c;
	if (train_pct >= 100) {
		a = n, b = 0;
	} else if (val_pct >= 100) {
		a = 0, b = n;
	} else if (test_pct >= 100) {
		a = 0, b = 0;
	} else {
		a = round_half_away((double)n * train_pct / 100);
		if (train_pct && !a)
			a = 1;
		b = round_half_away((double)n * val_pct / 100);
		if (a + b > n)
			b = n - a;
		if (val_pct && !b) {
			if (a > 1)
				a--, b = 1;
			else if (a != n)
				b = 1;
		}
		c = n - a - b;
		if (test_pct && !c) {
			if (b > 1)
				b--;
			else if (a > 1)
				a--;
		}
	}
	c = n - a - b;
	*train = a;
	*val = b;
	*test = c;
}

struct item {
	char *path; /* absolute, or relative to the list base */
	int label;
};

struct vec {
	struct item *v;
	int64_t n, cap;
};

void *ds_grow(void *v, int64_t n, int64_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	int64_t c = *cap ? *cap * 2 : 256;
	void *g = realloc(v, (size_t)c * size);
	if (g)
		*cap = c;
	return g;
}

static int vec_push(struct vec *a, char *path, int label)
{
	void *g = ds_grow(a->v, a->n, &a->cap, sizeof *a->v);
	if (!g)
		return DD_ENOMEM;
	a->v = g;
	a->v[a->n++] = (struct item){ path, label };
	return DD_OK;
}

static void vec_free(struct vec *a)
{
	for (int64_t i = 0; i < a->n; i++)
		free(a->v[i].path);
	free(a->v);
	*a = (struct vec){ 0 };
}

void ds_shuffle(void *v, int64_t n, size_t size, uint64_t seed)
{
	uint64_t s = seed;
	unsigned char t[64], *a = v;
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = rng_below(&s, i + 1);
		memcpy(t, a + (size_t)i * size, size);
		memcpy(a + (size_t)i * size, a + (size_t)j * size, size);
		memcpy(a + (size_t)j * size, t, size);
	}
}

static void shuffle(struct item *v, int64_t n, uint64_t seed) { ds_shuffle(v, n, sizeof *v, seed); }

/* ---- the build's shared state ---- */

struct build {
	const struct ds_source *src;
	const struct ds_options *opt;
	const struct ds_progress *prog;
	const char *out;
	cJSON *skipped;          /* [{"path","reason"}] */
	cJSON *dropped;          /* [{"class","images","reason"}] */
	char **labels;           /* label names */
	int nlabels;
	struct vec split[DS_SPLITS];
	int64_t total, done;     /* images over all splits, for progress */
	int64_t last_report_ms;
};

void ds_say(const struct ds_progress *prog, const char *level, const char *fmt, ...)
{
	if (!prog || !prog->log)
		return;
	char msg[1024];
	DD_FORMAT(msg, fmt);
	prog->log(prog->ctx, level, msg);
}

#define say(b, ...) ds_say((b)->prog, __VA_ARGS__)

static int stopping(struct build *b) { return b->prog && b->prog->should_stop && b->prog->should_stop(b->prog->ctx); }

void ds_skipped_add(cJSON *skipped, const char *path, const char *reason)
{
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "path", path);
	cJSON_AddStringToObject(s, "reason", reason);
	cJSON_AddItemToArray(skipped, s);
}

static void skip(struct build *b, const char *path, const char *reason) { ds_skipped_add(b->skipped, path, reason); }

/* The path as people should read it: relative to the folder it came from. */
static const char *shown(const struct build *b, const char *path)
{
	for (int s = 0; s < DS_SPLITS; s++) {
		const char *root = b->src->folder[s] ? b->src->folder[s] : s == 0 ? b->src->list_base : NULL;
		size_t n = root ? strlen(root) : 0;
		if (n && strncmp(path, root, n) == 0 && path[n] == '/')
			return path + n + 1;
	}
	return path;
}

/* ---- gather: class folders ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in dir (no "." "..", no hidden files); caller frees each and the
 * array.  Each name carries readdir's d_type in the byte after its NUL (read it
 * with name_type), so the walk needs no lstat per file on file systems that fill
 * d_type in. */
int ds_list_dir(const char *dir, char ***names, int *n, struct dd_err *err)
{
	*names = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return dd_err_sys(err, DD_EINVAL, errno, "cannot open folder %s", dir);
	int cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			char **g = realloc(*names, (size_t)cap * sizeof *g);
			if (!g) {
				closedir(d);
				return dd_err_set(err, DD_ENOMEM, "out of memory listing %s", dir);
			}
			*names = g;
		}
		size_t len = strlen(e->d_name);
		char *name = malloc(len + 2);
		if (!name) {
			closedir(d);
			return dd_err_set(err, DD_ENOMEM, "out of memory listing %s", dir);
		}
		memcpy(name, e->d_name, len + 1);
		name[len + 1] = (char)e->d_type;
		(*names)[(*n)++] = name;
	}
	closedir(d);
	if (*n > 1) /* an empty folder leaves *names NULL, which qsort may not be given */
		qsort(*names, (size_t)*n, sizeof **names, cmp_str);
	return DD_OK;
}

static unsigned char name_type(const char *name) { return (unsigned char)name[strlen(name) + 1]; }

void ds_free_names(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Whether a file or folder name holds a control character (a newline, a tab, an
 * escape): one a line of labels.txt or train.txt could not hold, which would
 * shift every later label. */
int ds_name_has_control(const char *name)
{
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 1;
	return 0;
}

/* Collect the images below dir (depth first, sorted) into out, up to max (0: all). */
static int walk_class(struct build *b, const char *dir, int label, struct vec *out, int64_t max,
		      int depth, struct dd_err *err)
{
	char **names;
	int n, rc = ds_list_dir(dir, &names, &n, err);
	if (rc)
		return rc;
	for (int i = 0; i < n && (!max || out->n < max); i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		struct stat st = { 0 };
		switch (name_type(names[i])) {
		case DT_REG: st.st_mode = S_IFREG; break;
		case DT_DIR: st.st_mode = S_IFDIR; break;
		case DT_LNK: st.st_mode = S_IFLNK; break;
		default:
			if (lstat(path, &st) != 0)
				continue;
		}
		if (ds_name_has_control(names[i])) {
			skip(b, shown(b, path), "its name holds a control character (a newline, a tab…): rename it");
		} else if (S_ISLNK(st.st_mode)) {
			skip(b, shown(b, path), "a symbolic link: not followed");
		} else if (S_ISDIR(st.st_mode)) {
			if (depth >= 32)
				skip(b, shown(b, path), "folders nested deeper than 32 levels");
			else if ((rc = walk_class(b, path, label, out, max, depth + 1, err)))
				break;
		} else if (!S_ISREG(st.st_mode)) {
			skip(b, shown(b, path), "not a regular file");
		} else if (!image_has_image_ext(names[i])) {
			skip(b, shown(b, path), "not an image file name (.png .jpg .jpeg .bmp .ppm .pgm)");
		} else {
			char *p = strdup(path);
			if (!p || vec_push(out, p, label)) {
				free(p);
				rc = dd_err_set(err, DD_ENOMEM, "out of memory");
				break;
			}
		}
	}
	ds_free_names(names, n);
	return rc;
}

static const char layout_help[] =
	"expected one folder per class, e.g. cats/1.jpg cats/2.jpg dogs/1.jpg dogs/2.jpg";

/* Class folders of the train folder decide the labels; val/test folders must use
 * the same class names. */
static int gather_folders(struct build *b, struct dd_err *err)
{
	const struct ds_options *o = b->opt;
	char **classes;
	int nclasses, rc = ds_list_dir(b->src->folder[DS_TRAIN], &classes, &nclasses, err);
	if (rc)
		return rc;
	int has_val = b->src->folder[DS_VAL] != NULL, has_test = b->src->folder[DS_TEST] != NULL;
	int val_pct = has_val ? 0 : o->val_pct, test_pct = has_test ? 0 : o->test_pct;
	int nonempty = 1 + (val_pct > 0) + (test_pct > 0);
	b->labels = calloc((size_t)nclasses + 1, sizeof *b->labels);
	for (int c = 0; c < nclasses && rc == DD_OK; c++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/%s", b->src->folder[DS_TRAIN], classes[c]);
		struct stat st;
		if (ds_name_has_control(classes[c])) {
			skip(b, classes[c], "a class folder whose name holds a control character (a newline, a tab…) "
				 "cannot be a label: rename it");
			continue;
		}
		if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			skip(b, classes[c], S_ISLNK(st.st_mode) ? "a symbolic link: not followed" :
				 "a file beside the class folders (images belong inside a class folder)");
			continue;
		}
		struct vec imgs = { 0 };
		if ((rc = walk_class(b, dir, b->nlabels, &imgs, o->max_per_class, 0, err))) {
			vec_free(&imgs);
			break;
		}
		if (imgs.n < o->min_per_class || imgs.n < nonempty) {
			cJSON *d = cJSON_CreateObject();
			cJSON_AddStringToObject(d, "class", classes[c]);
			cJSON_AddNumberToObject(d, "images", (double)imgs.n);
			char why[128];
			snprintf(why, sizeof why, "not enough images: %lld, at least %d needed",
				 (long long)imgs.n, o->min_per_class > nonempty ? o->min_per_class : nonempty);
			cJSON_AddStringToObject(d, "reason", why);
			cJSON_AddItemToArray(b->dropped, d);
			say(b, "warn", "class %s dropped: %s", classes[c], why);
			vec_free(&imgs);
			continue;
		}
		/* a class's label is its place among the classes kept */
		char *name = strdup(classes[c]);
		for (char *p = name; p && *p; p++)
			if (*p == '_')
				*p = ' ';
		b->labels[b->nlabels] = name;
		uint64_t s = o->seed ^ (0x5eedull * (uint64_t)(c + 1));
		shuffle(imgs.v, imgs.n, rng_next(&s));
		int a, v, t;
		ds_split_counts((int)imgs.n, val_pct, test_pct, &a, &v, &t);
		for (int64_t i = 0; i < imgs.n; i++) {
			enum ds_split sp = i < a ? DS_TRAIN : i < a + v ? DS_VAL : DS_TEST;
			vec_push(&b->split[sp], imgs.v[i].path, b->nlabels);
		}
		free(imgs.v); /* the paths moved into the splits */
		b->nlabels++;
	}
	for (int s = DS_VAL; s < DS_SPLITS && rc == DD_OK; s++) {
		if (!b->src->folder[s])
			continue;
		for (int l = 0; l < b->nlabels; l++) {
			char dir[PATH_MAX], folder_name[256];
			/* folder names are the label with spaces back to underscores */
			snprintf(folder_name, sizeof folder_name, "%s", b->labels[l]);
			for (char *p = folder_name; *p; p++)
				if (*p == ' ')
					*p = '_';
			snprintf(dir, sizeof dir, "%s/%s", b->src->folder[s], folder_name);
			struct stat st;
			if (stat(dir, &st) != 0) {
				say(b, "warn", "%s folder has no class %s", split_names[s], folder_name);
				continue;
			}
			if ((rc = walk_class(b, dir, l, &b->split[s], 0, 0, err)))
				break;
		}
	}
	ds_free_names(classes, nclasses);
	if (rc)
		return rc;
	if (b->nlabels < 2)
		return dd_err_set(err, DD_EINVAL, "found %d usable class folder%s in %s; %s (at least 2 classes with %d or more images each)",
				  b->nlabels, b->nlabels == 1 ? "" : "s", b->src->folder[DS_TRAIN], layout_help,
				  o->min_per_class);
	return DD_OK;
}

/* ---- gather: list files ---- */

static int read_lines(const char *path, char ***lines, int *n, struct dd_err *err)
{
	char *text;
	size_t len;
	int rc = fs_read_file(path, 512u << 20, &text, &len, err);
	if (rc)
		return rc;
	int cap = 0;
	*lines = NULL;
	*n = 0;
	char *at = text;
	for (char *p; (p = fs_line_next(&at));) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 256;
			*lines = realloc(*lines, (size_t)cap * sizeof **lines);
		}
		(*lines)[(*n)++] = strdup(p);
	}
	free(text);
	return DD_OK;
}

static int gather_lists(struct build *b, struct dd_err *err)
{
	char **names;
	int n, rc = read_lines(b->src->labels_file, &names, &n, err);
	if (rc)
		return rc;
	while (n > 0 && !names[n - 1][0])
		free(names[--n]);
	b->labels = names;
	b->nlabels = n;
	if (n < 2)
		return dd_err_set(err, DD_EINVAL, "%s: a labels file needs at least 2 lines (line i names label i-1)",
				  b->src->labels_file);
	for (int s = 0; s < DS_SPLITS; s++) {
		if (!b->src->list[s])
			continue;
		char **lines;
		int nl;
		if ((rc = read_lines(b->src->list[s], &lines, &nl, err)))
			return rc;
		const char *base = strrchr(b->src->list[s], '/');
		base = base ? base + 1 : b->src->list[s];
		for (int i = 0; i < nl; i++) {
			char *line = lines[i], *sp = NULL, where[300];
			snprintf(where, sizeof where, "%s line %d", base, i + 1);
			if (!*line) {
				free(line);
				continue;
			}
			for (char *p = line; *p; p++)
				if (*p == ' ' || *p == '\t')
					sp = p;
			char *end = NULL;
			long label = sp ? strtol(sp + 1, &end, 10) : -1;
			if (!sp || end == sp + 1 || *end || label < 0) {
				skip(b, where, "expected \"path label\" with a whole-number label");
			} else if (label >= n) {
				skip(b, where, "label is past the end of the labels file");
			} else {
				while (sp > line && (sp[-1] == ' ' || sp[-1] == '\t'))
					sp--;
				*sp = 0;
				char full[PATH_MAX], real[PATH_MAX];
				if (line[0] == '/')
					snprintf(full, sizeof full, "%s", line);
				else
					snprintf(full, sizeof full, "%s/%s", b->src->list_base, line);
				/* a list names files below its folder, never anywhere else; a missing
				 * file and one outside get the same answer, so that a list cannot
				 * probe which files the server has */
				if (!fs_path_under(full, b->src->list_base, real))
					skip(b, where, "no such file inside the list's folder");
				else
					vec_push(&b->split[s], strdup(full), (int)label);
			}
			free(line);
		}
		free(lines);
	}
	if (b->split[DS_TRAIN].n == 0)
		return dd_err_set(err, DD_EINVAL, "%s: no usable \"path label\" lines", b->src->list[DS_TRAIN]);
	return DD_OK;
}

/* ---- process: the thread pool ---- */

/* The ring holds at most RING_MAX results, and fewer for big images: about
 * RING_BYTES of records in flight whatever the image size. */
#define RING_MAX 256
#define RING_BYTES (24u << 20)

struct slot {
	int ready;
	int ok;
	uint8_t *value;
	size_t len;
	char reason[400];
};

struct pool {
	struct build *b;
	enum ds_split split;
	const struct vec *items;
	struct lmdbw *w;
	struct slot ring[RING_MAX];
	int64_t nring; /* slots in use: RING_MAX or fewer for big records */
	atomic_llong next;
	int64_t written_pos; /* positions the writer has consumed */
	pthread_mutex_t lock;
	pthread_cond_t ready, freed;
	atomic_int stop;
	int writer_waiting, workers_waiting; /* under lock: who sleeps on which cond */
	int64_t writer_wants;                /* the position the writer sleeps on */
	uint64_t **sums; /* per worker, H*W*C (train only) */
	int nthreads;
};

struct worker_arg {
	struct pool *p;
	int id;
};

/* Raw Datum data is C×H×W with colour planes in BGR order, as Caffe expects. */
static int to_chw_bgr(const struct image *img, uint8_t **out, size_t *len)
{
	size_t plane = (size_t)img->w * img->h, n = plane * img->c;
	uint8_t *d = malloc(n);
	if (!d)
		return DD_ENOMEM;
	image_to_planes(img, d, NULL);
	*out = d;
	*len = n;
	return DD_OK;
}

/* A PNG that already is what its record would be (8-bit gray or RGB without
 * palette or alpha, at the target size) is stored as it came: decoding it proves
 * it sound and gives the pixels for the mean, while compressing the same pixels
 * again would cost more than everything else together. */
static int png_as_is(const char *data, size_t len, const struct ds_options *o)
{
	const uint8_t *b = (const uint8_t *)data;
	if (o->encoding != DS_ENC_PNG || len < 33 || image_sniff(data, len) != IMAGE_PNG ||
	    memcmp(b + 12, "IHDR", 4) != 0)
		return 0;
	uint32_t w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
	uint32_t h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
	int depth = b[24], ctype = b[25];
	return w == (uint32_t)o->width && h == (uint32_t)o->height && depth == 8 &&
	       ((o->channels == 1 && ctype == 0) || (o->channels == 3 && ctype == 2));
}

/* Read, decode, resize and encode item `pos`; fills slot (value or reason). */
static void process_one(struct pool *p, int worker, int64_t pos, struct slot *sl)
{
	const struct ds_options *o = p->b->opt;
	const struct item *it = &p->items->v[pos];
	const char *name = shown(p->b, it->path);
	struct dd_err err = { 0 };
	char *data = NULL;
	size_t len = 0;
	struct image img = { 0 }, out = { 0 };
	uint8_t *payload = NULL;
	size_t plen = 0;
	sl->ok = 0;
	int rc = fs_read_file(it->path, FILE_CAP, &data, &len, &err);
	if (rc == DD_OK && len == 0)
		rc = dd_err_set(&err, DD_EINVAL, "%s: empty file", name);
	if (rc == DD_OK)
		rc = image_decode(data, len, name, o->max_pixels, &img, &err);
	if (rc == DD_OK)
		rc = image_set_channels(&img, o->channels, &err);
	if (rc == DD_OK && img.w == o->width && img.h == o->height) {
		out = img; /* already the right size: no copy */
		img = (struct image){ 0 };
	} else if (rc == DD_OK) {
		uint64_t seed = o->seed ^ ((uint64_t)(p->split + 1) << 56) ^ ((uint64_t)pos * RNG_GAMMA);
		rc = image_resize(&img, o->width, o->height, o->resize, seed, &out, &err);
	}
	if (rc == DD_OK) {
		if (png_as_is(data, len, o)) {
			payload = (uint8_t *)data;
			plen = len;
			data = NULL;
		} else if (o->encoding == DS_ENC_NONE) {
			rc = to_chw_bgr(&out, &payload, &plen) ? dd_err_set(&err, DD_ENOMEM, "out of memory") : DD_OK;
		} else if (o->encoding == DS_ENC_PNG) {
			rc = image_encode_png(&out, 6, &payload, &plen, &err);
		} else {
			rc = image_encode_jpeg(&out, 90, &payload, &plen, &err);
		}
	}
	free(data);
	if (rc == DD_OK) {
		struct datum d = { .channels = o->channels, .height = o->height, .width = o->width,
				   .label = it->label, .encoded = o->encoding != DS_ENC_NONE,
				   .data = payload, .data_len = plen };
		rc = datum_encode(&d, &sl->value, &sl->len, &err);
	}
	free(payload);
	if (rc == DD_OK && p->sums) {
		/* the mean counts exactly the images that are written */
		uint64_t *sum = p->sums[worker];
		size_t n = (size_t)out.w * out.h * out.c;
		for (size_t i = 0; i < n; i++)
			sum[i] += out.px[i];
	}
	image_free(&img);
	image_free(&out);
	if (rc == DD_OK) {
		sl->ok = 1;
	} else {
		/* messages name the file already when they come from the decoder */
		if (strncmp(err.msg, name, strlen(name)) == 0)
			snprintf(sl->reason, sizeof sl->reason, "%s", err.msg + strlen(name) + (err.msg[strlen(name)] == ':' ? 2 : 0));
		else
			snprintf(sl->reason, sizeof sl->reason, "%.399s", err.msg);
	}
}

/* Positions are claimed CLAIM at a time and handed over a claim at a time: the
 * worker marks its CLAIM results ready together and wakes the writer only if it
 * sleeps on one of them.  With tens of thousands of tiny images a second, a
 * futex call per image would cost more than the images. */
#define CLAIM 16

static void *worker_main_fn(void *varg)
{
	struct worker_arg *a = varg;
	struct pool *p = a->p;
	for (;;) {
		int64_t base = atomic_fetch_add(&p->next, CLAIM);
		if (base >= p->items->n || atomic_load(&p->stop))
			break;
		int64_t end = base + CLAIM < p->items->n ? base + CLAIM : p->items->n;
		pthread_mutex_lock(&p->lock);
		while (end > p->written_pos + p->nring && !atomic_load(&p->stop)) {
			p->workers_waiting++;
			pthread_cond_wait(&p->freed, &p->lock);
			p->workers_waiting--;
		}
		pthread_mutex_unlock(&p->lock);
		if (atomic_load(&p->stop))
			break;
		for (int64_t pos = base; pos < end; pos++)
			process_one(p, a->id, pos, &p->ring[pos % p->nring]);
		pthread_mutex_lock(&p->lock);
		for (int64_t pos = base; pos < end; pos++)
			p->ring[pos % p->nring].ready = 1;
		if (p->writer_waiting && p->writer_wants >= base && p->writer_wants < end)
			pthread_cond_signal(&p->ready);
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

static void report(struct build *b, const char *phase, int force)
{
	if (!b->prog || !b->prog->progress)
		return;
	int64_t now = fs_mono_ms();
	if (!force && now - b->last_report_ms < 250)
		return;
	b->last_report_ms = now;
	b->prog->progress(b->prog->ctx, phase, b->done, b->total);
}

/* Write one split's LMDB; counts[label] gets the images written per class. */
static int write_split(struct build *b, enum ds_split split, int64_t *counts, double *mean_out,
		       struct dd_err *err)
{
	const struct ds_options *o = b->opt;
	struct pool *p = calloc(1, sizeof *p);
	if (!p)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	p->b = b;
	p->split = split;
	p->items = &b->split[split];
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->ready, NULL);
	pthread_cond_init(&p->freed, NULL);
	int nthreads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nthreads < 1)
		nthreads = 1;
	p->nthreads = nthreads;
	int64_t per_record = (int64_t)o->width * o->height * o->channels + 1024;
	p->nring = RING_BYTES / per_record;
	if (p->nring > RING_MAX)
		p->nring = RING_MAX;
	if (p->nring < 2 * CLAIM * nthreads)
		p->nring = 2 * CLAIM * nthreads <= RING_MAX ? 2 * CLAIM * nthreads : RING_MAX;
	p->nring -= p->nring % CLAIM; /* whole claims, so room frees at claim boundaries */
	size_t npx = (size_t)o->width * o->height * o->channels;
	int rc = DD_OK;
	pthread_t *th = calloc((size_t)nthreads, sizeof *th);
	struct worker_arg *args = calloc((size_t)nthreads, sizeof *args);
	if (mean_out) {
		p->sums = calloc((size_t)nthreads, sizeof *p->sums);
		for (int i = 0; p->sums && i < nthreads; i++)
			if (!(p->sums[i] = calloc(npx, sizeof **p->sums)))
				rc = DD_ENOMEM;
		if (!p->sums)
			rc = DD_ENOMEM;
	}
	if (!th || !args || rc) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out_free;
	}
	char dir[PATH_MAX];
	dsinfo_db_path(b->out, split_names[split], dir, sizeof dir);
	fs_rm_rf(dir, NULL);
	if ((rc = lmdbw_open(dir, 1000, &p->w, err)))
		goto out_free;
	int started = 0;
	for (int i = 0; i < nthreads; i++) {
		args[i] = (struct worker_arg){ p, i };
		if (pthread_create(&th[i], NULL, worker_main_fn, &args[i]) != 0)
			break;
		started++;
	}
	if (!started) {
		rc = dd_err_set(err, DD_EIO, "cannot start worker threads");
		lmdbw_abort(p->w);
		p->w = NULL;
		goto out_free;
	}
	for (int64_t pos = 0; pos < p->items->n; pos++) {
		struct slot *sl = &p->ring[pos % p->nring];
		pthread_mutex_lock(&p->lock);
		while (!sl->ready) {
			p->writer_waiting = 1;
			p->writer_wants = pos;
			pthread_cond_wait(&p->ready, &p->lock);
			p->writer_waiting = 0;
		}
		pthread_mutex_unlock(&p->lock);
		const struct item *it = &p->items->v[pos];
		if (sl->ok) {
			rc = lmdbw_put(p->w, it->label, sl->value, sl->len, err);
			counts[it->label]++;
		} else {
			skip(b, shown(b, it->path), sl->reason);
		}
		free(sl->value);
		sl->value = NULL;
		pthread_mutex_lock(&p->lock);
		sl->ready = 0;
		p->written_pos = pos + 1;
		if (p->workers_waiting && (pos + 1) % CLAIM == 0)
			pthread_cond_broadcast(&p->freed);
		pthread_mutex_unlock(&p->lock);
		b->done++;
		report(b, split_names[split], 0);
		if (rc == DD_OK && stopping(b))
			rc = dd_err_set(err, DD_ECONFLICT, "aborted");
		if (rc)
			break;
	}
	atomic_store(&p->stop, 1);
	pthread_mutex_lock(&p->lock);
	pthread_cond_broadcast(&p->freed);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < RING_MAX; i++) {
		free(p->ring[i].value);
		p->ring[i].value = NULL;
	}
	if (rc == DD_OK) {
		int64_t n = lmdbw_count(p->w);
		rc = lmdbw_close(p->w, err);
		p->w = NULL;
		if (rc == DD_OK && mean_out && n > 0)
			for (size_t i = 0; i < npx; i++) {
				uint64_t s = 0;
				for (int t = 0; t < nthreads; t++)
					s += p->sums[t][i];
				mean_out[i] = (double)s / (double)n;
			}
	} else {
		lmdbw_abort(p->w);
		p->w = NULL;
	}
out_free:
	if (p->sums)
		for (int i = 0; i < nthreads; i++)
			free(p->sums[i]);
	free(p->sums);
	free(th);
	free(args);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->ready);
	pthread_cond_destroy(&p->freed);
	free(p);
	return rc;
}

/* ---- outputs ---- */

static int write_text(const char *out, const char *name, const char *text, struct dd_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", out, name);
	return fs_write_file_atomic(path, text, strlen(text), err);
}

static int write_labels_and_lists(struct build *b, struct dd_err *err)
{
	size_t cap = 1024, len = 0;
	char *t = malloc(cap);
	int rc = DD_OK;
	for (int l = 0; l < b->nlabels; l++) {
		size_t need = strlen(b->labels[l]) + 2;
		if (len + need >= cap)
			t = realloc(t, cap = (len + need) * 2);
		len += (size_t)sprintf(t + len, "%s\n", b->labels[l]);
	}
	t[len] = 0;
	rc = write_text(b->out, DSINFO_LABELS, t, err);
	for (int s = 0; s < DS_SPLITS && rc == DD_OK; s++) {
		len = 0;
		t[0] = 0;
		for (int64_t i = 0; i < b->split[s].n; i++) {
			const struct item *it = &b->split[s].v[i];
			size_t need = strlen(it->path) + 16;
			if (len + need >= cap)
				t = realloc(t, cap = (len + need) * 2);
			len += (size_t)sprintf(t + len, "%s %d\n", it->path, it->label);
		}
		char name[32];
		snprintf(name, sizeof name, "%s.txt", split_names[s]);
		if (b->split[s].n)
			rc = write_text(b->out, name, t, err);
	}
	free(t);
	return rc;
}

/* mean.binaryproto (CHW, BGR planes, rounded as DIGITS does) and mean.png. */
int ds_write_mean(const char *out_dir, const struct ds_options *o, const double *mean, struct dd_err *err)
{
	size_t plane = (size_t)o->width * o->height, npx = plane * o->channels;
	struct image img = { o->width, o->height, o->channels, malloc(npx) };
	struct blob bl = { 1, o->channels, o->height, o->width, malloc(npx * sizeof(float)), npx };
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = DD_OK;
	if (!img.px || !bl.data) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < npx; i++) {
		double v = rint(mean[i]); /* numpy's around: halves to even */
		img.px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
	image_to_planes(&img, NULL, bl.data);
	char path[PATH_MAX];
	if ((rc = blob_encode(&bl, &buf, &len, err)))
		goto out;
	dsinfo_path(out_dir, DSINFO_MEAN, path, sizeof path);
	if ((rc = fs_write_file_atomic(path, buf, len, err)))
		goto out;
	free(buf);
	buf = NULL;
	if ((rc = image_encode_png(&img, 6, &buf, &len, err)))
		goto out;
	dsinfo_path(out_dir, DSINFO_MEAN_PNG, path, sizeof path);
	rc = fs_write_file_atomic(path, buf, len, err);
out:
	free(buf);
	free(img.px);
	free(bl.data);
	return rc;
}

int ds_write_summary(const char *out_dir, const char *const *outputs, cJSON *sum, struct dd_err *err)
{
	uint64_t disk = 0;
	for (int i = 0; outputs[i]; i++) {
		char p[PATH_MAX];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", out_dir, outputs[i]);
		if (lstat(p, &st) == 0)
			disk += S_ISDIR(st.st_mode) ? fs_tree_bytes(p) : (uint64_t)st.st_blocks * 512;
	}
	cJSON_AddNumberToObject(sum, "disk_bytes", (double)disk);
	char marker[PATH_MAX];
	dsinfo_path(out_dir, DSINFO_FILE, marker, sizeof marker);
	char *text = cJSON_Print(sum);
	int rc = text ? fs_write_file_atomic(marker, text, strlen(text), err) : dd_err_set(err, DD_ENOMEM, "out of memory");
	free(text);
	return rc;
}

/* A build that failed (or was stopped) leaves no dataset that looks done: no
 * dataset.json (written last, so never there), and none of the databases or mean
 * files it had begun, which on a full disk also gives the space back for the job's
 * last words.  The lists and labels.txt stay: small, and they say what was seen. */
static void drop_partial(const char *out_dir, int rc, struct dd_err *err)
{
	static const char *const outputs[] = { DSINFO_DB("train"), DSINFO_DB("val"), DSINFO_DB("test"), DSINFO_MEAN,
					       DSINFO_MEAN_PNG, NULL };
	int dropped = 0;
	for (int i = 0; outputs[i]; i++) {
		char p[PATH_MAX];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", out_dir, outputs[i]);
		if (lstat(p, &st) == 0 && fs_rm_rf(p, NULL) == DD_OK)
			dropped++;
	}
	if (rc == DD_ENOSPC && dropped && err) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof err->msg - n, "; the partly written databases were removed");
	}
}

int ds_create(const struct ds_source *src, const struct ds_options *opt, const char *out_dir,
	      const struct ds_progress *prog, cJSON **summary, struct dd_err *err)
{
	struct build b = { .src = src, .opt = opt, .prog = prog, .out = out_dir };
	/* Every image allocates and frees buffers of the same few sizes: keep them in
	 * the heap instead of mapping and faulting fresh pages each time. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	int64_t *counts[DS_SPLITS] = { 0 };
	double *mean = NULL;
	cJSON *sum = NULL;
	int rc;
	int64_t t0 = fs_mono_ms();
	if (summary)
		*summary = NULL;
	b.skipped = cJSON_CreateArray();
	b.dropped = cJSON_CreateArray();
	if ((rc = fs_mkdir_p(out_dir, err)))
		goto out;
	char marker[PATH_MAX];
	dsinfo_path(out_dir, DSINFO_FILE, marker, sizeof marker);
	unlink(marker); /* whatever was there, it is not this dataset */

	say(&b, "info", "listing images");
	rc = src->list[DS_TRAIN] ? gather_lists(&b, err) : src->folder[DS_TRAIN] ? gather_folders(&b, err) :
				  dd_err_set(err, DD_EINVAL, "no source: give a folder, an archive or list files");
	if (rc)
		goto out;
	/* records go into each database in a shuffled order, as DIGITS' --shuffle did */
	uint64_t seed = opt->seed ^ 0xd1b54a32d192ed03ull;
	for (int s = 0; s < DS_SPLITS; s++) {
		shuffle(b.split[s].v, b.split[s].n, rng_next(&seed));
		b.total += b.split[s].n;
	}
	say(&b, "info", "%d classes; %lld train, %lld val, %lld test images", b.nlabels,
	    (long long)b.split[DS_TRAIN].n, (long long)b.split[DS_VAL].n, (long long)b.split[DS_TEST].n);
	if ((rc = write_labels_and_lists(&b, err)))
		goto out;
	size_t npx = (size_t)opt->width * opt->height * opt->channels;
	mean = calloc(npx, sizeof *mean);
	for (int s = 0; s < DS_SPLITS; s++)
		counts[s] = calloc((size_t)b.nlabels + 1, sizeof **counts);
	if (!mean || !counts[0] || !counts[1] || !counts[2]) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	for (int s = 0; s < DS_SPLITS; s++) {
		char dir[PATH_MAX];
		dsinfo_db_path(out_dir, split_names[s], dir, sizeof dir);
		fs_rm_rf(dir, NULL);
		if (!b.split[s].n)
			continue;
		say(&b, "info", "writing %s_db (%lld images)", split_names[s], (long long)b.split[s].n);
		if ((rc = write_split(&b, (enum ds_split)s, counts[s], s == DS_TRAIN ? mean : NULL, err)))
			goto out;
		report(&b, split_names[s], 1);
	}
	int64_t written = 0;
	for (int l = 0; l < b.nlabels; l++)
		written += counts[DS_TRAIN][l];
	if (written == 0) {
		rc = dd_err_set(err, DD_EINVAL, "no image of the train split could be read (%d skipped); see the skipped list",
				cJSON_GetArraySize(b.skipped));
		goto out;
	}
	if ((rc = ds_write_mean(out_dir, opt, mean, err)))
		goto out;

	sum = cJSON_CreateObject();
	cJSON_AddItemToObject(sum, "options", ds_options_to_json(opt));
	cJSON *labels = cJSON_AddArrayToObject(sum, "labels");
	for (int l = 0; l < b.nlabels; l++)
		cJSON_AddItemToArray(labels, cJSON_CreateString(b.labels[l]));
	cJSON *splits = cJSON_AddObjectToObject(sum, "splits");
	for (int s = 0; s < DS_SPLITS; s++) {
		cJSON *sp = cJSON_AddObjectToObject(splits, split_names[s]);
		int64_t tot = 0;
		cJSON *per = cJSON_AddArrayToObject(sp, "per_class");
		for (int l = 0; l < b.nlabels; l++) {
			tot += counts[s][l];
			cJSON_AddItemToArray(per, cJSON_CreateNumber((double)counts[s][l]));
		}
		cJSON_AddNumberToObject(sp, "images", (double)tot);
		cJSON_AddNumberToObject(sp, "listed", (double)b.split[s].n);
	}
	cJSON_AddItemToObject(sum, "skipped", b.skipped);
	b.skipped = NULL;
	cJSON_AddItemToObject(sum, "dropped_classes", b.dropped);
	b.dropped = NULL;
	cJSON_AddNumberToObject(sum, "seconds", (double)(fs_mono_ms() - t0) / 1000.0);
	/* what the dataset itself takes: its databases and files, not whatever else
	 * the folder holds (an unpacked upload, say) */
	static const char *const outputs[] = { DSINFO_DB("train"), DSINFO_DB("val"), DSINFO_DB("test"), DSINFO_LABELS,
					       DSINFO_MEAN, DSINFO_MEAN_PNG, "train.txt", "val.txt", "test.txt", NULL };
	rc = ds_write_summary(out_dir, outputs, sum, err);
	if (rc == DD_OK && summary) {
		*summary = sum;
		sum = NULL;
	}
	say(&b, "info", "done in %.1f s", (double)(fs_mono_ms() - t0) / 1000.0);
out:
	if (rc != DD_OK)
		drop_partial(out_dir, rc, err);
	cJSON_Delete(sum);
	cJSON_Delete(b.skipped);
	cJSON_Delete(b.dropped);
	free(mean);
	for (int s = 0; s < DS_SPLITS; s++) {
		free(counts[s]);
		vec_free(&b.split[s]);
	}
	for (int l = 0; l < b.nlabels; l++)
		free(b.labels[l]);
	free(b.labels);
	return rc;
}

/* Is there exactly one entry in dir and is it a folder?  Its name into one. */
static int single_folder(const char *dir, char *one, size_t len)
{
	char **names;
	int n;
	if (ds_list_dir(dir, &names, &n, NULL) != DD_OK)
		return 0;
	int yes = 0;
	if (n == 1) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", dir, names[0]);
		struct stat st;
		yes = lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
		if (yes)
			snprintf(one, len, "%s", p);
	}
	ds_free_names(names, n);
	return yes;
}

static int is_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ds_layout_resolve(const char *root, char *train, char *val, char *test, struct dd_err *err)
{
	char cur[PATH_MAX], next[PATH_MAX];
	snprintf(cur, sizeof cur, "%s", root);
	if (!is_dir(cur))
		return dd_err_set(err, DD_EINVAL, "%s is not a folder", root);
	for (int depth = 0; depth < 8 && single_folder(cur, next, sizeof next); depth++)
		memcpy(cur, next, sizeof cur);
	char p[PATH_MAX];
	val[0] = test[0] = 0;
	snprintf(p, sizeof p, "%s/train", cur);
	if (!is_dir(p)) {
		snprintf(train, PATH_MAX, "%s", cur);
		return DD_OK;
	}
	snprintf(train, PATH_MAX, "%s", p);
	snprintf(p, sizeof p, "%s/val", cur);
	if (!is_dir(p))
		snprintf(p, sizeof p, "%s/validation", cur);
	if (is_dir(p))
		snprintf(val, PATH_MAX, "%s", p);
	snprintf(p, sizeof p, "%s/test", cur);
	if (is_dir(p))
		snprintf(test, PATH_MAX, "%s", p);
	return DD_OK;
}
