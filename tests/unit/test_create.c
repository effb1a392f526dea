/* test_create.c — the dataset builder end to end on images made here: split
 * arithmetic, class folders with bad files, counts and keys, the mean, list
 * files, determinism, and abort. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/create.h"
#include "../../datasets/datum.h"
#include "../../datasets/image.h"
#include "../../datasets/lmdbio.h"
#include "fixture.h"

static char dir[64];

static void write_png(const char *path, int w, int h, int c, uint8_t value)
{
	struct image img = { w, h, c, malloc((size_t)w * h * c) };
	memset(img.px, value, (size_t)w * h * c);
	uint8_t *png;
	size_t len;
	image_encode_png(&img, 1, &png, &len, NULL);
	fs_write_file_atomic(path, png, len, NULL);
	free(png);
	free(img.px);
}

static void make_folder(const char *root)
{
	static const char *const classes[] = { "apple_pie", "banana", "cherry", "date" };
	char p[PATH_MAX];
	for (int c = 0; c < 4; c++) {
		int n = c == 3 ? 1 : 10 + c * 5; /* 10, 15, 20 images; "date" has 1: dropped */
		snprintf(p, sizeof p, "%s/%s/sub", root, classes[c]);
		fs_mkdir_p(p, NULL);
		for (int i = 0; i < n; i++) {
			snprintf(p, sizeof p, "%s/%s/%s%d.png", root, classes[c], i % 3 ? "" : "sub/", i);
			write_png(p, 8 + i, 6, 3, (uint8_t)(c * 60 + 10));
		}
	}
	snprintf(p, sizeof p, "%s/banana/broken.png", root);
	fs_write_file_atomic(p, "\x89PNG\r\n\x1a\n garbage", 17, NULL);
	snprintf(p, sizeof p, "%s/banana/empty.jpg", root);
	fs_write_file_atomic(p, "", 0, NULL);
	snprintf(p, sizeof p, "%s/banana/notes.txt", root);
	fs_write_file_atomic(p, "hello", 5, NULL);
}

static void test_split_counts_like_digits(void)
{
	int a, b, c;
	ds_split_counts(100, 25, 0, &a, &b, &c);
	CHECK(a == 75 && b == 25 && c == 0);
	ds_split_counts(10, 25, 10, &a, &b, &c);
	CHECK(a == 7 && b == 2 && c == 1); /* round(6.5)=7 (halves away from zero), round(2.5)=3 -> 10-7 */
	ds_split_counts(2, 25, 0, &a, &b, &c);
	CHECK(a == 1 && b == 1 && c == 0); /* every non-empty split gets one */
	ds_split_counts(3, 10, 10, &a, &b, &c);
	CHECK(a == 1 && b == 1 && c == 1);
	ds_split_counts(5, 0, 0, &a, &b, &c);
	CHECK(a == 5 && b == 0 && c == 0);
	ds_split_counts(4, 100, 0, &a, &b, &c);
	CHECK(a == 0 && b == 4 && c == 0);
}

static cJSON *build(const char *src_root, const char *out, struct ds_options *o)
{
	struct ds_source s = { .folder = { src_root } };
	cJSON *summary = NULL;
	struct dd_err err = { 0 };
	if (ds_create(&s, o, out, NULL, &summary, &err) != DD_OK)
		fprintf(stderr, "  ds_create: %s\n", err.msg);
	return summary;
}

static void test_folder_to_lmdb(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX + 32];
	snprintf(src, sizeof src, "%s/src", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	make_folder(src);
	struct ds_options o;
	ds_options_default(&o);
	o.width = 4, o.height = 4, o.seed = 7, o.threads = 2;
	cJSON *sum = build(src, out, &o);
	CHECK(sum != NULL);
	if (!sum)
		return;
	cJSON *labels = cJSON_GetObjectItem(sum, "labels");
	CHECK_EQ_INT(cJSON_GetArraySize(labels), 3);
	CHECK_STR(cJSON_GetArrayItem(labels, 0)->valuestring, "apple pie"); /* '_' shown as a space */
	cJSON *tr = cJSON_GetObjectItem(cJSON_GetObjectItem(sum, "splits"), "train");
	cJSON *va = cJSON_GetObjectItem(cJSON_GetObjectItem(sum, "splits"), "val");
	/* banana: 15 good + broken + empty listed; 17 * 75% -> 13 train (some broken) */
	int train = cJSON_GetObjectItem(tr, "images")->valueint, val = cJSON_GetObjectItem(va, "images")->valueint;
	CHECK_EQ_INT(train + val, 45);
	CHECK_EQ_INT(cJSON_GetArrayItem(cJSON_GetObjectItem(tr, "per_class"), 0)->valueint +
		     cJSON_GetArrayItem(cJSON_GetObjectItem(va, "per_class"), 0)->valueint, 10);
	/* skipped: the two bad images and the text file, each with its reason */
	cJSON *sk = cJSON_GetObjectItem(sum, "skipped"), *it;
	CHECK_EQ_INT(cJSON_GetArraySize(sk), 3);
	int saw_broken = 0, saw_empty = 0, saw_txt = 0;
	cJSON_ArrayForEach(it, sk)
	{
		const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(it, "path"));
		const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(it, "reason"));
		saw_broken |= strcmp(path, "banana/broken.png") == 0 && why && *why;
		saw_empty |= strcmp(path, "banana/empty.jpg") == 0 && strstr(why, "empty") != NULL;
		saw_txt |= strcmp(path, "banana/notes.txt") == 0;
	}
	CHECK(saw_broken && saw_empty && saw_txt);
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(sum, "dropped_classes")), 1);
	/* the LMDB: keys in order, labels from the key, 4x4x3 encoded PNGs */
	snprintf(p, sizeof p, "%s/train_db", out);
	struct lmdbr *r = NULL;
	CHECK_EQ_INT(lmdbr_open(p, &r, NULL), DD_OK);
	CHECK_EQ_INT(lmdbr_count(r), train);
	int64_t per_label = 0;
	for (int l = 0; l < 3; l++)
		per_label += lmdbr_label_count(r, l);
	CHECK_EQ_INT(per_label, train);
	const uint8_t *v;
	size_t len;
	int label;
	CHECK_EQ_INT(lmdbr_get(r, 0, &v, &len, &label, NULL), DD_OK);
	struct datum d;
	CHECK_EQ_INT(datum_decode(v, len, &d, NULL), DD_OK);
	CHECK(d.encoded && d.width == 4 && d.height == 4 && d.channels == 3 && d.label == label);
	struct image img = { 0 };
	CHECK_EQ_INT(image_decode(d.data, d.data_len, "record", 0, &img, NULL), DD_OK);
	CHECK_EQ_INT(img.px[0], label * 60 + 10); /* solid colour survives resize and PNG */
	image_free(&img);
	datum_free(&d);
	lmdbr_close(r);
	/* the mean: a 4x4x3 BlobProto with the weighted class colour, BGR planes */
	char *buf;
	size_t blen;
	snprintf(p, sizeof p, "%s/mean.binaryproto", out);
	CHECK_EQ_INT(fs_read_file(p, 1 << 20, &buf, &blen, NULL), DD_OK);
	struct blob bl;
	CHECK_EQ_INT(blob_decode((uint8_t *)buf, blen, &bl, NULL), DD_OK);
	CHECK(bl.num == 1 && bl.channels == 3 && bl.height == 4 && bl.width == 4);
	int64_t c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(tr, "per_class"), 0)->valueint;
	int64_t c1 = cJSON_GetArrayItem(cJSON_GetObjectItem(tr, "per_class"), 1)->valueint;
	int64_t c2 = cJSON_GetArrayItem(cJSON_GetObjectItem(tr, "per_class"), 2)->valueint;
	double expect = (double)(c0 * 10 + c1 * 70 + c2 * 130) / (double)(c0 + c1 + c2);
	CHECK(fabs(bl.data[0] - rint(expect)) < 0.01);
	blob_free(&bl);
	free(buf);
	snprintf(p, sizeof p, "%s/labels.txt", out);
	CHECK_EQ_INT(fs_read_file(p, 1 << 20, &buf, &blen, NULL), DD_OK);
	CHECK_STR(buf, "apple pie\nbanana\ncherry\n");
	free(buf);
	cJSON_Delete(sum);
}

static char *read_all(const char *path)
{
	char *b = NULL;
	fs_read_file(path, 64u << 20, &b, NULL, NULL);
	return b;
}

static void test_same_seed_same_dataset(void)
{
	char src[PATH_MAX], a[PATH_MAX], b[PATH_MAX], pa[PATH_MAX + 32], pb[PATH_MAX + 32];
	snprintf(src, sizeof src, "%s/src", dir);
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	struct ds_options o;
	ds_options_default(&o);
	o.width = 6, o.height = 6, o.resize = RESIZE_FILL, o.seed = 3, o.threads = 2;
	cJSON *s1 = build(src, a, &o);
	o.threads = 1; /* thread count must not change the result */
	cJSON *s2 = build(src, b, &o);
	CHECK(s1 && s2);
	snprintf(pa, sizeof pa, "%s/train.txt", a);
	snprintf(pb, sizeof pb, "%s/train.txt", b);
	char *ta = read_all(pa), *tb = read_all(pb);
	CHECK(ta && tb && strcmp(ta, tb) == 0);
	free(ta);
	free(tb);
	struct lmdbr *ra = NULL, *rb = NULL;
	snprintf(pa, sizeof pa, "%s/train_db", a);
	snprintf(pb, sizeof pb, "%s/train_db", b);
	CHECK_EQ_INT(lmdbr_open(pa, &ra, NULL), DD_OK);
	CHECK_EQ_INT(lmdbr_open(pb, &rb, NULL), DD_OK);
	CHECK_EQ_INT(lmdbr_count(ra), lmdbr_count(rb));
	int same = 1;
	for (int64_t i = 0; ra && rb && i < lmdbr_count(ra); i++) {
		const uint8_t *va, *vb;
		size_t la, lb;
		int xa, xb;
		lmdbr_get(ra, i, &va, &la, &xa, NULL);
		uint8_t *copy = malloc(la);
		memcpy(copy, va, la);
		lmdbr_get(rb, i, &vb, &lb, &xb, NULL);
		same &= la == lb && xa == xb && memcmp(copy, vb, la) == 0;
		free(copy);
	}
	CHECK(same);
	lmdbr_close(ra);
	lmdbr_close(rb);
	cJSON_Delete(s1);
	cJSON_Delete(s2);
}

static void test_raw_encoding_is_chw_bgr(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX + 32];
	snprintf(src, sizeof src, "%s/rgb", dir);
	snprintf(out, sizeof out, "%s/rgb_out", dir);
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < 2; i++) {
			snprintf(p, sizeof p, "%s/c%d", src, c);
			fs_mkdir_p(p, NULL);
			struct image img = { 2, 2, 3, malloc(12) };
			for (int k = 0; k < 4; k++)
				img.px[k * 3] = 200, img.px[k * 3 + 1] = 100, img.px[k * 3 + 2] = 50;
			uint8_t *png;
			size_t len;
			image_encode_png(&img, 1, &png, &len, NULL);
			snprintf(p, sizeof p, "%s/c%d/%d.png", src, c, i);
			fs_write_file_atomic(p, png, len, NULL);
			free(png);
			free(img.px);
		}
	struct ds_options o;
	ds_options_default(&o);
	o.width = 2, o.height = 2, o.encoding = DS_ENC_NONE, o.val_pct = 0;
	cJSON *sum = build(src, out, &o);
	CHECK(sum != NULL);
	struct lmdbr *r = NULL;
	snprintf(p, sizeof p, "%s/train_db", out);
	CHECK_EQ_INT(lmdbr_open(p, &r, NULL), DD_OK);
	const uint8_t *v;
	size_t len;
	int label;
	struct datum d = { 0 };
	if (r && lmdbr_get(r, 0, &v, &len, &label, NULL) == DD_OK && datum_decode(v, len, &d, NULL) == DD_OK) {
		CHECK(!d.encoded && d.data_len == 12);
		CHECK(d.data[0] == 50 && d.data[4] == 100 && d.data[8] == 200); /* B plane, G, R */
	} else {
		CHECK(0);
	}
	datum_free(&d);
	lmdbr_close(r);
	cJSON_Delete(sum);
}

static int stop_now(void *ctx) { return ++*(int *)ctx > 3; }

static void test_abort_leaves_no_dataset(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX + 32];
	snprintf(src, sizeof src, "%s/src", dir);
	snprintf(out, sizeof out, "%s/aborted", dir);
	int calls = 0;
	struct ds_progress prog = { &calls, NULL, NULL, stop_now };
	struct ds_options o;
	ds_options_default(&o);
	o.width = 4, o.height = 4;
	struct ds_source s = { .folder = { src } };
	struct dd_err err = { 0 };
	CHECK_EQ_INT(ds_create(&s, &o, out, &prog, NULL, &err), DD_ECONFLICT);
	snprintf(p, sizeof p, "%s/dataset.json", out);
	CHECK(access(p, F_OK) != 0);
	snprintf(p, sizeof p, "%s/train_db", out);
	CHECK(access(p, F_OK) != 0);
}

static void test_too_few_classes_explains_layout(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX + 32];
	snprintf(src, sizeof src, "%s/flat", dir);
	snprintf(out, sizeof out, "%s/flat_out", dir);
	fs_mkdir_p(src, NULL);
	snprintf(p, sizeof p, "%s/loose.png", src);
	write_png(p, 4, 4, 1, 9);
	struct ds_options o;
	ds_options_default(&o);
	struct ds_source s = { .folder = { src } };
	struct dd_err err = { 0 };
	CHECK_EQ_INT(ds_create(&s, &o, out, NULL, NULL, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "one folder per class");
}

/* A class folder or an image whose name holds a newline would be two lines of
 * labels.txt or train.txt and shift every later label: skipped, each named. */
static void test_control_characters_in_names(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX + 64];
	snprintf(src, sizeof src, "%s/ctl_src", dir);
	snprintf(out, sizeof out, "%s/ctl_out", dir);
	static const char *const classes[] = { "ant", "bee", "bad\nclass", "esc\x1b[31m" };
	for (int c = 0; c < 4; c++)
		for (int i = 0; i < 4; i++) {
			snprintf(p, sizeof p, "%s/%s", src, classes[c]);
			fs_mkdir_p(p, NULL);
			snprintf(p, sizeof p, "%s/%s/%d.png", src, classes[c], i);
			write_png(p, 4, 4, 1, (uint8_t)(40 * c + i));
		}
	snprintf(p, sizeof p, "%s/bee/two\nlines.png", src);
	write_png(p, 4, 4, 1, 9);
	struct ds_options o;
	ds_options_default(&o);
	o.width = 4, o.height = 4, o.val_pct = 25;
	cJSON *sum = build(src, out, &o);
	CHECK(sum != NULL);
	if (!sum)
		return;
	cJSON *labels = cJSON_GetObjectItem(sum, "labels");
	CHECK_EQ_INT(cJSON_GetArraySize(labels), 2);
	CHECK_STR(cJSON_GetArrayItem(labels, 0)->valuestring, "ant");
	CHECK_STR(cJSON_GetArrayItem(labels, 1)->valuestring, "bee");
	cJSON *sk = cJSON_GetObjectItem(sum, "skipped"), *it;
	CHECK_EQ_INT(cJSON_GetArraySize(sk), 3);
	cJSON_ArrayForEach(it, sk)
		CHECK_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(it, "reason")), "control character");
	snprintf(p, sizeof p, "%s/labels.txt", out);
	char *l = read_all(p);
	CHECK_STR(l, "ant\nbee\n");
	free(l);
	cJSON_Delete(sum);
}

static void test_list_files(void)
{
	char src[PATH_MAX], out[PATH_MAX], p[PATH_MAX + 32];
	snprintf(src, sizeof src, "%s/src", dir);
	snprintf(out, sizeof out, "%s/lists_out", dir);
	char train[PATH_MAX + 32], labels[PATH_MAX + 32];
	snprintf(train, sizeof train, "%s/train.txt", src);
	snprintf(labels, sizeof labels, "%s/labels.txt", src);
	const char *lines = "banana/1.png 0\nbanana/2.png 0\ncherry/1.png 1\n"
			    "cherry/2.png 1\nno label here\ncherry/4.png 7\n/etc/passwd 0\n"
			    "/etc/no-such-file-here 0\n../outside.png 0\nbanana/9.png 0\n";
	fs_write_file_atomic(train, lines, strlen(lines), NULL);
	fs_write_file_atomic(labels, "yellow\nred\n", 11, NULL);
	snprintf(p, sizeof p, "%s/outside.png", dir);
	write_png(p, 4, 4, 1, 9);
	struct ds_options o;
	ds_options_default(&o);
	o.width = 4, o.height = 4;
	struct ds_source s = { .list = { train }, .labels_file = labels, .list_base = src };
	cJSON *sum = NULL;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(ds_create(&s, &o, out, NULL, &sum, &err), DD_OK);
	cJSON *tr = cJSON_GetObjectItem(cJSON_GetObjectItem(sum, "splits"), "train");
	CHECK_EQ_INT(cJSON_GetObjectItem(tr, "images")->valueint, 4);
	/* bad line, label out of range, and paths outside the base or missing are
	 * skipped; outside and missing get one answer, so a list probes nothing */
	cJSON *skipped = cJSON_GetObjectItem(sum, "skipped");
	CHECK_EQ_INT(cJSON_GetArraySize(skipped), 6);
	for (int i = 2; i < 6; i++)
		CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(skipped, i), "reason")),
			  "no such file inside the list's folder");
	snprintf(p, sizeof p, "%s/labels.txt", out);
	char *l = read_all(p);
	CHECK_STR(l, "yellow\nred\n");
	free(l);
	cJSON_Delete(sum);
}

static void tests(void)
{
	RUN(test_split_counts_like_digits);
	RUN(test_folder_to_lmdb);
	RUN(test_same_seed_same_dataset);
	RUN(test_raw_encoding_is_chw_bgr);
	RUN(test_abort_leaves_no_dataset);
	RUN(test_too_few_classes_explains_layout);
	RUN(test_control_characters_in_names);
	RUN(test_list_files);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests);
}
