/* cli_dataset.c — `deepdesk dataset create` and `deepdesk example`: the dataset
 * builder from a terminal or a script, with the same options as the web form. */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/archive.h"
#include "../../datasets/create.h"
#include "../../datasets/dsinfo.h"
#include "../../datasets/example.h"
#include "../../datasets/segment.h"
#include "../../jobs/jobdir.h"
#include "cli.h"

const char cli_dataset_usage[] =
	"usage: deepdesk dataset create SOURCE OUT_DIR [OPTIONS]\n"
	"\n"
	"Build an image-classification dataset (Caffe LMDB) in OUT_DIR.  SOURCE is\n"
	"  - a folder with one sub-folder per class (or train/ val/ test/ folders of those),\n"
	"  - a .zip, .tar or .tar.gz archive of such a folder, or\n"
	"  - a list file of \"path label\" lines (with --labels; paths relative to its folder).\n"
	"\n"
	"options (DIGITS' defaults):\n"
	"  --size WxH            image size (256x256)\n"
	"  --channels 1|3        grayscale or colour (3)\n"
	"  --resize-mode MODE    squash, crop, fill or half_crop (squash)\n"
	"  --encoding ENC        png, jpg (quality 90) or none (png)\n"
	"  --val-pct N           percent of each class for validation (25)\n"
	"  --test-pct N          percent of each class for testing (0)\n"
	"  --min-per-class N     drop classes with fewer images (2)\n"
	"  --max-per-class N     use at most N images of a class (no limit)\n"
	"  --seed N              seed of the split, the shuffle and the fill noise (0)\n"
	"  --labels FILE         labels file for a list-file SOURCE (line i names label i-1)\n"
	"  --val-list FILE       validation list (list-file SOURCE)\n"
	"  --test-list FILE      test list (list-file SOURCE)\n"
	"  --threads N           decoding threads (one per core)\n"
	"  --task TASK           classification (the default) or segmentation\n"
	"\n"
	"segmentation (--task segmentation): SOURCE (a folder or an archive) holds images/\n"
	"and labels/ with matching file names, and optionally labels.txt (class names).\n"
	"Labels are palette PNGs (the index is the class), grayscale PNGs (the value is\n"
	"the class; 255 is ignored) or RGB PNGs with a colour map.  Labels are resized\n"
	"nearest-neighbour on the images' geometry.  Options used: --size, --channels,\n"
	"--resize-mode, --encoding, --val-pct, --seed, --threads, and\n"
	"  --colormap FILE       one \"R G B\" line per class (spaces or commas)\n"
	"  --val-folder DIR      validation pairs from DIR/images and DIR/labels\n"
	"  --json                print a JSON summary on stdout\n"
	"  -h, --help            this text\n";

const char cli_example_usage[] =
	"usage: deepdesk example fashion-mnist [DIR]\n"
	"       deepdesk example segmentation [DIR] [--count N] [--size WxH] [--seed S]\n"
	"\n"
	"segmentation: a synthetic set (circles, squares and triangles on textured,\n"
	"noisy backgrounds): DIR/images/N.png, DIR/labels/N.png (palette PNGs) and\n"
	"DIR/labels.txt (default DIR ./segmentation, 200 pairs of 128x128, seed 0).\n"
	"Then: deepdesk dataset create DIR OUT --task segmentation --size 128x128\n"
	"\n"
	"Write Debian's Fashion-MNIST (package dataset-fashion-mnist) as an image folder:\n"
	"DIR/train/<class>/N.png and DIR/test/<class>/N.png, ten classes (default DIR:\n"
	"./fashion-mnist).  Then: deepdesk dataset create DIR OUT --size 28x28 --channels 1\n";

struct tty {
	int on;
	int64_t t0;
};

static void bar(void *vctx, const char *phase, int64_t done, int64_t total)
{
	struct tty *t = vctx;
	if (!t->on || total <= 0)
		return;
	double el = (double)(fs_mono_ms() - t->t0) / 1000.0;
	int width = 30, fill = (int)(width * done / total);
	char b[64];
	for (int i = 0; i < width; i++)
		b[i] = i < fill ? '#' : '.';
	b[width] = 0;
	double rate = el > 0 ? (double)done / el : 0;
	fprintf(stderr, "\r%-6s [%s] %3d%% %lld/%lld  %.0f img/s  ETA %.0fs   ", phase, b,
		(int)(100 * done / total), (long long)done, (long long)total, rate,
		rate > 0 ? (double)(total - done) / rate : 0.0);
	fflush(stderr);
}

static void say(void *vctx, const char *level, const char *msg)
{
	struct tty *t = vctx;
	if (t->on)
		fprintf(stderr, "\r%-78s\r", "");
	if (strcmp(level, "info") != 0 || t->on)
		fprintf(stderr, "%s%s\n", strcmp(level, "info") ? "warning: " : "", msg);
}

static int parse_size(const char *s, int *w, int *h)
{
	char *x;
	long a = strtol(s, &x, 10);
	if (x == s || (*x != 'x' && *x != 'X'))
		return -1;
	char *end;
	long b = strtol(x + 1, &end, 10);
	if (end == x + 1 || *end || a < 1 || b < 1 || a > 4096 || b > 4096)
		return -1;
	*w = (int)a;
	*h = (int)b;
	return 0;
}

/* Each skipped file of a summary on stderr, with its reason; the list. */
static cJSON *print_skipped(cJSON *summary)
{
	cJSON *skipped = cJSON_GetObjectItem(summary, "skipped"), *it;
	cJSON_ArrayForEach(it, skipped)
		fprintf(stderr, "skipped %s: %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(it, "path")),
			cJSON_GetStringValue(cJSON_GetObjectItem(it, "reason")));
	return skipped;
}

/* Print the summary's skipped list and totals (and with json the summary). */
static void seg_report(const char *out, cJSON *summary, int json)
{
	cJSON *skipped = print_skipped(summary);
	cJSON *sp = cJSON_GetObjectItem(summary, "splits");
	fprintf(stderr, "%s: segmentation, %d classes, %d train, %d val pairs, %d skipped, %.1f s\n", out,
		cJSON_GetObjectItem(summary, "classes")->valueint,
		cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "train"), "images")->valueint,
		cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "val"), "images")->valueint, cJSON_GetArraySize(skipped),
		cJSON_GetObjectItem(summary, "seconds")->valuedouble);
	if (json) {
		char *text = cJSON_Print(summary);
		puts(text);
		free(text);
	}
}

/* `dataset create --task segmentation`: a folder or an archive of images/ and
 * labels/, and maybe a validation folder of the same shape. */
static int segment_create(const char *source, const char *out, struct ds_options *o, const char *cmap,
			  const char *vfolder, int val_given, int json)
{
	struct dd_err err = { 0 };
	char root[PATH_MAX], vroot[PATH_MAX], unpacked[PATH_MAX + 16];
	struct stat st;
	if (stat(source, &st) != 0) {
		fprintf(stderr, "deepdesk dataset create: %s: no such file or folder\n", source);
		return 1;
	}
	if (vfolder && val_given) {
		fprintf(stderr, "deepdesk dataset create: give --val-folder or --val-pct, not both\n");
		return 2;
	}
	if (!val_given)
		o->val_pct = 10; /* DIGITS' segmentation default */
	if (fs_mkdir_p(out, &err) != DD_OK) {
		fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
		return 1;
	}
	const char *top = source;
	if (!S_ISDIR(st.st_mode)) {
		if (!archive_is_archive_name(source)) {
			fprintf(stderr, "deepdesk dataset create: %s: give a folder or a .zip, .tar or .tar.gz archive\n", source);
			return 2;
		}
		jobdir_file(out, JOBDIR_SOURCE, unpacked, sizeof unpacked);
		int64_t files;
		fs_rm_rf(unpacked, NULL);
		if (archive_unpack(source, NULL, unpacked, NULL, &files, &err) != DD_OK) {
			fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
			return 1;
		}
		top = unpacked;
	}
	if (!seg_layout_resolve(top, root)) {
		fprintf(stderr, "deepdesk dataset create: %s: expected images/ and labels/ folders with matching file names\n",
			source);
		return 1;
	}
	if (vfolder && !seg_layout_resolve(vfolder, vroot)) {
		fprintf(stderr, "deepdesk dataset create: %s: expected images/ and labels/ folders\n", vfolder);
		return 1;
	}
	struct seg_source s = { .root = root, .val_root = vfolder ? vroot : NULL, .colormap = cmap };
	struct tty t = { isatty(STDERR_FILENO), fs_mono_ms() };
	struct ds_progress prog = { &t, bar, say, NULL };
	cJSON *summary = NULL;
	int rc = seg_create(&s, o, out, &prog, &summary, &err);
	if (t.on)
		fputc('\n', stderr);
	if (rc != DD_OK) {
		fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
		return 1;
	}
	seg_report(out, summary, json);
	cJSON_Delete(summary);
	return 0;
}

int cli_dataset(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "create") != 0) {
		fputs(cli_dataset_usage, argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr);
		return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 2;
	}
	argc--;
	argv++;
	enum { O_SIZE = 1, O_CH, O_RM, O_ENC, O_VAL, O_TEST, O_MIN, O_MAX, O_SEED, O_LABELS, O_VLIST,
	       O_TLIST, O_THREADS, O_JSON, O_TASK, O_CMAP, O_VFOLDER };
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, O_SIZE },      { "channels", required_argument, NULL, O_CH },
		{ "resize-mode", required_argument, NULL, O_RM }, { "encoding", required_argument, NULL, O_ENC },
		{ "val-pct", required_argument, NULL, O_VAL },    { "test-pct", required_argument, NULL, O_TEST },
		{ "min-per-class", required_argument, NULL, O_MIN },
		{ "max-per-class", required_argument, NULL, O_MAX },
		{ "seed", required_argument, NULL, O_SEED },      { "labels", required_argument, NULL, O_LABELS },
		{ "val-list", required_argument, NULL, O_VLIST }, { "test-list", required_argument, NULL, O_TLIST },
		{ "threads", required_argument, NULL, O_THREADS }, { "json", no_argument, NULL, O_JSON },
		{ "task", required_argument, NULL, O_TASK },      { "colormap", required_argument, NULL, O_CMAP },
		{ "val-folder", required_argument, NULL, O_VFOLDER },
		{ "help", no_argument, NULL, 'h' },               { NULL, 0, NULL, 0 },
	};
	struct ds_options o;
	ds_options_default(&o);
	const char *labels = NULL, *vlist = NULL, *tlist = NULL, *cmap = NULL, *vfolder = NULL;
	int json = 0, c, seg = 0, val_given = 0;
	long long v;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_SIZE:
			if (parse_size(optarg, &o.width, &o.height)) {
				fprintf(stderr, "deepdesk dataset create: --size: expected WxH like 256x256\n");
				return 2;
			}
			break;
		case O_CH:
			if (cli_number("--channels", optarg, 1, 3, &v) || v == 2)
				return fprintf(stderr, "deepdesk dataset create: --channels is 1 or 3\n"), 2;
			o.channels = (int)v;
			break;
		case O_RM:
			if (resize_mode_parse(optarg, &o.resize))
				return fprintf(stderr, "deepdesk dataset create: --resize-mode: squash, crop, fill or half_crop\n"), 2;
			break;
		case O_ENC:
			if (ds_encoding_parse(optarg, &o.encoding))
				return fprintf(stderr, "deepdesk dataset create: --encoding: png, jpg or none\n"), 2;
			break;
		case O_VAL: if (cli_number("--val-pct", optarg, 0, 100, &v)) return 2; o.val_pct = (int)v; val_given = 1; break;
		case O_TASK:
			if (strcmp(optarg, "segmentation") && strcmp(optarg, "classification"))
				return fprintf(stderr, "deepdesk dataset create: --task: classification or segmentation\n"), 2;
			seg = strcmp(optarg, "segmentation") == 0;
			break;
		case O_CMAP: cmap = optarg; break;
		case O_VFOLDER: vfolder = optarg; break;
		case O_TEST: if (cli_number("--test-pct", optarg, 0, 100, &v)) return 2; o.test_pct = (int)v; break;
		case O_MIN: if (cli_number("--min-per-class", optarg, 1, INT_MAX, &v)) return 2; o.min_per_class = (int)v; break;
		case O_MAX: if (cli_number("--max-per-class", optarg, 0, INT_MAX, &v)) return 2; o.max_per_class = (int)v; break;
		case O_SEED: if (cli_number("--seed", optarg, 0, LONG_MAX, &v)) return 2; o.seed = (uint64_t)v; break;
		case O_THREADS: if (cli_number("--threads", optarg, 0, 256, &v)) return 2; o.threads = (int)v; break;
		case O_LABELS: labels = optarg; break;
		case O_VLIST: vlist = optarg; break;
		case O_TLIST: tlist = optarg; break;
		case O_JSON: json = 1; break;
		case 'h': fputs(cli_dataset_usage, stdout); return 0;
		default: fputs(cli_dataset_usage, stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		fputs(cli_dataset_usage, stderr);
		return 2;
	}
	if (o.val_pct + o.test_pct > 100) {
		fprintf(stderr, "deepdesk dataset create: --val-pct + --test-pct must not exceed 100\n");
		return 2;
	}
	const char *source = argv[optind], *out = argv[optind + 1];
	if (seg)
		return segment_create(source, out, &o, cmap, vfolder, val_given, json);
	if (cmap || vfolder) {
		fprintf(stderr, "deepdesk dataset create: --colormap and --val-folder are for --task segmentation\n");
		return 2;
	}
	struct dd_err err = { 0 };
	struct ds_source s = { 0 };
	char train[PATH_MAX], val[PATH_MAX], test[PATH_MAX], base[PATH_MAX], unpacked[PATH_MAX + 16];
	struct stat st;
	int rc;
	if (stat(source, &st) != 0) {
		fprintf(stderr, "deepdesk dataset create: %s: no such file or folder\n", source);
		return 1;
	}
	if (fs_mkdir_p(out, &err) != DD_OK) {
		fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
		return 1;
	}
	if (S_ISDIR(st.st_mode) || archive_is_archive_name(source)) {
		const char *root = source;
		if (!S_ISDIR(st.st_mode)) {
			jobdir_file(out, JOBDIR_SOURCE, unpacked, sizeof unpacked);
			int64_t files;
			fs_rm_rf(unpacked, NULL);
			if ((rc = archive_unpack(source, NULL, unpacked, NULL, &files, &err)) != DD_OK) {
				fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
				return 1;
			}
			root = unpacked;
		}
		if (ds_layout_resolve(root, train, val, test, &err) != DD_OK) {
			fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
			return 1;
		}
		s.folder[DS_TRAIN] = train;
		s.folder[DS_VAL] = val[0] ? val : NULL;
		s.folder[DS_TEST] = test[0] ? test : NULL;
	} else {
		if (!labels) {
			fprintf(stderr, "deepdesk dataset create: %s is a list file: give --labels FILE too\n", source);
			return 2;
		}
		snprintf(base, sizeof base, "%s", source);
		char *slash = strrchr(base, '/');
		if (slash)
			*slash = 0;
		else
			snprintf(base, sizeof base, ".");
		s.list[DS_TRAIN] = source;
		s.list[DS_VAL] = vlist;
		s.list[DS_TEST] = tlist;
		s.labels_file = labels;
		s.list_base = base;
	}
	struct tty t = { isatty(STDERR_FILENO), fs_mono_ms() };
	struct ds_progress prog = { &t, bar, say, NULL };
	cJSON *summary = NULL;
	rc = ds_create(&s, &o, out, &prog, &summary, &err);
	if (t.on)
		fputc('\n', stderr);
	if (rc != DD_OK) {
		fprintf(stderr, "deepdesk dataset create: %s\n", err.msg);
		return 1;
	}
	cJSON *skipped = print_skipped(summary);
	cJSON *sp = cJSON_GetObjectItem(summary, "splits");
	fprintf(stderr, "%s: %d classes, %d train, %d val, %d test images, %d skipped, %.1f s\n", out,
		cJSON_GetArraySize(cJSON_GetObjectItem(summary, "labels")),
		cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "train"), "images")->valueint,
		cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "val"), "images")->valueint,
		cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "test"), "images")->valueint,
		cJSON_GetArraySize(skipped), cJSON_GetObjectItem(summary, "seconds")->valuedouble);
	if (json) {
		cJSON *paths = cJSON_AddObjectToObject(summary, "paths");
		char p[PATH_MAX + 32];
		static const char *const names[] = { DSINFO_DB("train"), DSINFO_DB("val"), DSINFO_DB("test"),
						     DSINFO_LABELS,      DSINFO_MEAN,      DSINFO_MEAN_PNG };
		for (int i = 0; i < 6; i++) {
			dsinfo_path(out, names[i], p, sizeof p);
			if (access(p, F_OK) == 0)
				cJSON_AddStringToObject(paths, names[i], p);
		}
		char *text = cJSON_Print(summary);
		puts(text);
		free(text);
	}
	cJSON_Delete(summary);
	return 0;
}

static int example_progress(void *ctx, int64_t done, int64_t total)
{
	struct tty *t = ctx;
	bar(t, "write", done, total);
	return 0;
}

static int example_seg(int argc, char **argv)
{
	enum { O_COUNT = 1, O_SIZE, O_SEED };
	static const struct option longopts[] = {
		{ "count", required_argument, NULL, O_COUNT }, { "size", required_argument, NULL, O_SIZE },
		{ "seed", required_argument, NULL, O_SEED },   { NULL, 0, NULL, 0 },
	};
	int count = 200, w = 128, h = 128, c;
	long long v;
	uint64_t seed = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_COUNT: if (cli_number("--count", optarg, 1, 100000, &v)) return 2; count = (int)v; break;
		case O_SIZE:
			if (parse_size(optarg, &w, &h) || w < 8 || h < 8)
				return fprintf(stderr, "deepdesk example: --size: expected WxH like 128x128 (8 to 4096)\n"), 2;
			break;
		case O_SEED: if (cli_number("--seed", optarg, 0, LONG_MAX, &v)) return 2; seed = (uint64_t)v; break;
		default: fputs(cli_example_usage, stderr); return 2;
		}
	}
	if (argc - optind > 1) {
		fputs(cli_example_usage, stderr);
		return 2;
	}
	const char *dir = optind < argc ? argv[optind] : "segmentation";
	struct dd_err err = { 0 };
	struct tty t = { isatty(STDERR_FILENO), fs_mono_ms() };
	int rc = example_segmentation(dir, count, w, h, seed, example_progress, &t, &err);
	if (t.on)
		fputc('\n', stderr);
	if (rc != DD_OK) {
		fprintf(stderr, "deepdesk example: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "wrote %d image and label pairs (%dx%d, 4 classes) to %s\n", count, w, h, dir);
	return 0;
}

int cli_example(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(cli_example_usage, stdout);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "segmentation") == 0)
		return example_seg(argc - 1, argv + 1);
	if (argc < 2 || argc > 3 || strcmp(argv[1], "fashion-mnist") != 0) {
		fputs(cli_example_usage, stderr);
		return 2;
	}
	const char *dir = argc == 3 ? argv[2] : "fashion-mnist";
	struct dd_err err = { 0 };
	struct tty t = { isatty(STDERR_FILENO), fs_mono_ms() };
	if (example_fashion_mnist(dir, example_progress, &t, &err) != DD_OK) {
		if (t.on)
			fputc('\n', stderr);
		fprintf(stderr, "deepdesk example: %s\n", err.msg);
		return 1;
	}
	if (t.on)
		fputc('\n', stderr);
	fprintf(stderr, "wrote 70000 images to %s/train and %s/test (10 classes)\n", dir, dir);
	return 0;
}
