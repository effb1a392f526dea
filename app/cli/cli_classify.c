/* cli_classify.c — `deepdesk classify`: run a trained model on image files, with no
 * server: a model job's folder and one of its snapshots, a bundle folder, or a
 * bundle .tar.gz as GET /api/v1/models/{id}/bundle sends it (unpacked into a
 * temporary folder by datasets/archive.c, which refuses traversal, links and
 * bombs, and removed afterwards).  networks/infer.c does the work, the same code
 * the server's classify route runs, so both give the same probabilities.
 *
 * Many images: folders (walked in name order, image files only) and list files
 * (--list, one path a line, DIGITS' "path label" lines taken too) are read one
 * image at a time, and with --out each result is written as it comes (CSV or JSON
 * lines), so memory stays flat however many images there are. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../datasets/archive.h"
#include "../../networks/bundle.h"
#include "../../networks/infer.h"
#include "../../networks/modeldir.h"
#include "cli.h"

const char cli_classify_usage[] =
	"usage: deepdesk classify --model MODEL [OPTIONS] IMAGE|FOLDER...\n"
	"\n"
	"Classify image files with a trained model and print the most likely classes.\n"
	"MODEL is a model bundle (.tar.gz, as the web app's \"Download bundle\" gives it,\n"
	"or that bundle unpacked into a folder) or a model job's folder (data/jobs/<id>,\n"
	"or the --out folder of `deepdesk train`).  Each image is prepared as the dataset's\n"
	"images were: converted to its channels, resized with its resize mode, the mean\n"
	"subtracted, scaled and centre-cropped as the network's data layer says.\n"
	"\n"
	"  --model PATH      the bundle or folder (required)\n"
	"  --snapshot EPOCH  a job folder's snapshot, by its epoch (3, 1.4167; default the\n"
	"                    latest); a bundle holds one\n"
	"  --top K           how many classes to show per image (5)\n"
	"  --list FILE       classify the images FILE lists, one path a line (relative\n"
	"                    to FILE's folder; a trailing \" LABEL\" number is ignored;\n"
	"                    \"-\" reads standard input)\n"
	"  --out FILE        write each result to FILE as it comes: CSV (image,width,\n"
	"                    height,label_1,index_1,probability_1,...,error) or, for a\n"
	"                    name ending in .jsonl, one JSON object a line; a count and\n"
	"                    the images/s go to stderr\n"
	"  --json            print JSON: {\"model\",\"snapshot\",\"results\":[{\"image\",\n"
	"                    \"width\",\"height\",\"predictions\":[{\"label\",\"index\",\n"
	"                    \"probability\"}]} or {\"image\",\"error\"}]}\n"
	"  -h, --help        this text\n"
	"\n"
	"A FOLDER is walked (its sub-folders too, in name order) for .png, .jpg, .jpeg,\n"
	".bmp, .ppm and .pgm files.\n"
	"\n"
	"Exits 0 when every image was classified, 1 when one or more could not be (each\n"
	"named on stderr, or in the JSON), 2 for a bad command line or model.\n";

static int is_archive(const char *path)
{
	size_t n = strlen(path);
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       ((n > 7 && !strcmp(path + n - 7, ".tar.gz")) || (n > 4 && !strcmp(path + n - 4, ".tgz")) ||
		(n > 4 && !strcmp(path + n - 4, ".tar")));
}

/* ---- classifying many images, one at a time ---- */

struct run {
	struct infer *h;
	int top;
	cJSON *results;        /* --json: the document's array; NULL otherwise */
	FILE *out;             /* --out: results as they come; NULL otherwise */
	int csv;
	int status;            /* 0, or 1 once an image failed */
	long images, errors;
	struct infer_pred pred[INFER_MAX_TOP];
};

static void emit(struct run *x, const char *path, int rc, const char *why, int np, int iw, int ih)
{
	x->images++;
	if (rc) {
		x->status = 1;
		x->errors++;
	}
	if (x->out && x->csv) {
		fs_csv_field(x->out, path);
		if (rc)
			fprintf(x->out, ",,");
		else
			fprintf(x->out, ",%d,%d", iw, ih);
		for (int i = 0; i < x->top; i++) {
			fputc(',', x->out);
			if (i < np) {
				fs_csv_field(x->out, x->pred[i].label);
				fprintf(x->out, ",%d,%.9g", x->pred[i].index, (double)x->pred[i].probability);
			} else
				fputs(",,", x->out);
		}
		fputc(',', x->out);
		if (rc)
			fs_csv_field(x->out, why);
		fputc('\n', x->out);
		return;
	}
	cJSON *r = x->out || x->results ? cJSON_CreateObject() : NULL;
	if (r) {
		cJSON_AddStringToObject(r, "image", path);
		if (rc)
			cJSON_AddStringToObject(r, "error", why);
		else {
			cJSON_AddNumberToObject(r, "width", iw);
			cJSON_AddNumberToObject(r, "height", ih);
			cJSON_AddItemToObject(r, "predictions", infer_predictions_json(x->pred, np));
		}
		if (x->results) {
			cJSON_AddItemToArray(x->results, r);
			return;
		}
		char *line = cJSON_PrintUnformatted(r);
		if (line)
			fprintf(x->out, "%s\n", line);
		free(line);
		cJSON_Delete(r);
		return;
	}
	if (rc) {
		fprintf(stderr, "deepdesk classify: %s\n", why);
		return;
	}
	printf("%s\n", path);
	for (int i = 0; i < np; i++)
		printf("  %7.3f%%  %s (%d)\n", 100.0 * x->pred[i].probability, x->pred[i].label, x->pred[i].index);
}

static void classify_file(struct run *x, const char *path)
{
	struct dd_err err = { 0 };
	char *bytes = NULL;
	size_t len = 0;
	int np = 0, iw = 0, ih = 0;
	int rc = fs_read_file(path, 256u << 20, &bytes, &len, &err);
	if (!rc)
		rc = infer_classify(x->h, bytes, len, path, x->top, x->pred, &np, &iw, &ih, &err);
	free(bytes);
	emit(x, path, rc, err.msg, np, iw, ih);
}

static int is_image_name(const char *name)
{
	static const char *const exts[] = { ".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", NULL };
	const char *dot = strrchr(name, '.');
	for (int i = 0; dot && exts[i]; i++)
		if (!strcasecmp(dot, exts[i]))
			return 1;
	return 0;
}

/* Every image below dir, in name order, hidden entries skipped; links are not
 * followed into folders (a loop would never end). */
static void walk(struct run *x, const char *dir, int depth)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		char why[PATH_MAX + 64];
		snprintf(why, sizeof why, "%s: cannot read the folder", dir);
		emit(x, dir, 1, why, 0, 0, 0);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char path[PATH_MAX];
		struct stat st;
		if (name[0] != '.' && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
		    lstat(path, &st) == 0) {
			if (S_ISDIR(st.st_mode) && depth < 64)
				walk(x, path, depth + 1);
			else if ((S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) && is_image_name(name))
				classify_file(x, path);
		}
		free(names[i]);
	}
	free(names);
}

/* The images a list file names: one a line, relative to the list's folder; a
 * trailing whitespace-and-number (DIGITS' "path label") is dropped; blank lines
 * and lines starting with '#' are skipped.  DD_OK, or DD_ENOENT when the list
 * cannot be opened. */
static int read_list(struct run *x, const char *list)
{
	FILE *f = strcmp(list, "-") ? fopen(list, "r") : stdin;
	if (!f)
		return DD_ENOENT;
	char base[PATH_MAX] = ""; /* "": the list is in the working folder (or stdin) */
	const char *slash = strrchr(list, '/');
	if (slash && strcmp(list, "-"))
		snprintf(base, sizeof base, "%.*s/", (int)(slash - list), list);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
				   line[len - 1] == '\t'))
			line[--len] = 0;
		char *end = line + len;
		while (end > line && end[-1] >= '0' && end[-1] <= '9')
			end--;
		if (end < line + len && end > line && (end[-1] == ' ' || end[-1] == '\t')) {
			while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			*end = 0;
		}
		if (!line[0] || line[0] == '#')
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s%s", line[0] == '/' ? "" : base, line);
		classify_file(x, path);
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return DD_OK;
}

int cli_classify(int argc, char **argv)
{
	enum { O_MODEL = 1, O_SNAP, O_TOP, O_JSON, O_LIST, O_OUT };
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, O_MODEL }, { "snapshot", required_argument, NULL, O_SNAP },
		{ "top", required_argument, NULL, O_TOP },     { "json", no_argument, NULL, O_JSON },
		{ "list", required_argument, NULL, O_LIST },   { "out", required_argument, NULL, O_OUT },
		{ "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
	};
	const char *model = NULL, *snapshot = NULL, *list = NULL, *outpath = NULL;
	int top = 5, json = 0, opt;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case O_MODEL: model = optarg; break;
		case O_SNAP: snapshot = optarg; break;
		case O_TOP:
			if (cli_int("--top", optarg, 1, INFER_MAX_TOP, &top))
				return 2;
			break;
		case O_JSON: json = 1; break;
		case O_LIST: list = optarg; break;
		case O_OUT: outpath = optarg; break;
		case 'h': fputs(cli_classify_usage, stdout); return 0;
		default: fputs(cli_classify_usage, stderr); return 2;
		}
	}
	if (!model || (optind >= argc && !list)) {
		fprintf(stderr, "deepdesk classify: %s\n%s", !model ? "--model is required" : "no image given",
			cli_classify_usage);
		return 2;
	}
	if (json && outpath) {
		fprintf(stderr, "deepdesk classify: --json prints one document; with --out, name the file .jsonl\n");
		return 2;
	}
	struct dd_err err = { 0 };
	char tmp[PATH_MAX] = "", dir[PATH_MAX], weights[PATH_MAX + 64], label[MODELDIR_LABEL_MAX] = "";
	struct infer *h = NULL;
	FILE *out = NULL;
	int status = 2;
	if (is_archive(model)) {
		const char *base = getenv("TMPDIR");
		snprintf(tmp, sizeof tmp, "%s/deepdesk-bundle-XXXXXX", base && *base ? base : "/tmp");
		if (!mkdtemp(tmp)) {
			fprintf(stderr, "deepdesk classify: cannot make a temporary folder in %s\n", base ? base : "/tmp");
			tmp[0] = 0;
			goto out;
		}
		struct archive_limits lim;
		archive_limits_default(&lim);
		lim.max_entries = 64;
		lim.max_bytes = lim.max_entry_bytes = 8ll << 30;
		int64_t files = 0;
		snprintf(dir, sizeof dir, "%s/m", tmp);
		if (archive_unpack(model, NULL, dir, &lim, &files, &err)) {
			fprintf(stderr, "deepdesk classify: %s\n", err.msg);
			goto out;
		}
	} else
		snprintf(dir, sizeof dir, "%s", model);

	char info[PATH_MAX + 16];
	snprintf(info, sizeof info, "%s/" BUNDLE_MANIFEST, dir);
	const char *w = NULL;
	if (access(info, R_OK) == 0) {
		if (snapshot)
			fprintf(stderr, "deepdesk classify: a bundle holds one snapshot; --snapshot is ignored\n");
	} else {
		struct modeldir_snapshot *snaps = NULL;
		int n = 0;
		double epoch = -1;
		if (snapshot && !modeldir_label_ok(snapshot, &epoch)) {
			fprintf(stderr, "deepdesk classify: --snapshot %s: not an epoch (3, 1.4167)\n", snapshot);
			goto out;
		}
		if (modeldir_snapshots(dir, &snaps, &n, &err)) {
			fprintf(stderr, "deepdesk classify: %s\n", err.msg);
			goto out;
		}
		int i = modeldir_snapshot_find(snaps, n, epoch);
		if (i < 0) {
			free(snaps);
			fprintf(stderr, "deepdesk classify: %s: %s\n", model,
				n == 0 ? "not a bundle (no info.json) nor a model folder with snapshots" :
					 "no snapshot at that epoch");
			goto out;
		}
		snprintf(label, sizeof label, "%s", snaps[i].label);
		free(snaps);
		modeldir_snapshot_path(dir, label, MODELDIR_SNAP_WEIGHTS, weights, sizeof weights);
		w = weights;
	}
	if (infer_open(dir, w, &h, &err)) {
		fprintf(stderr, "deepdesk classify: %s: %s\n", model, err.msg);
		goto out;
	}
	if (!label[0]) {
		/* the bundle's own record of its snapshot */
		char *text = NULL;
		if (fs_read_file(info, 16u << 20, &text, NULL, NULL) == DD_OK) {
			cJSON *j = NULL;
			json_parse_str(text, info, &j, NULL);
			const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "snapshot"));
			snprintf(label, sizeof label, "%s", s ? s : "");
			cJSON_Delete(j);
		}
		free(text);
	}

	if (outpath && !(out = fopen(outpath, "w"))) {
		fprintf(stderr, "deepdesk classify: --out %s: cannot create the file\n", outpath);
		goto out;
	}
	struct run *x = calloc(1, sizeof *x);
	if (!x) {
		fprintf(stderr, "deepdesk classify: out of memory\n");
		goto out;
	}
	int classes = infer_prep(h)->classes;
	*x = (struct run){ .h = h, .top = top < classes ? top : classes, .out = out };
	if (out) {
		size_t n = strlen(outpath);
		x->csv = !(n > 6 && !strcasecmp(outpath + n - 6, ".jsonl")) && !(n > 7 && !strcasecmp(outpath + n - 7, ".ndjson"));
		if (x->csv) {
			fputs("image,width,height", out);
			for (int i = 1; i <= x->top; i++)
				fprintf(out, ",label_%d,index_%d,probability_%d", i, i, i);
			fputs(",error\n", out);
		}
	}
	cJSON *doc = json ? cJSON_CreateObject() : NULL;
	if (doc) {
		cJSON_AddStringToObject(doc, "model", model);
		cJSON_AddStringToObject(doc, "snapshot", label);
		x->results = cJSON_AddArrayToObject(doc, "results");
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (list && read_list(x, list) != DD_OK) {
		fprintf(stderr, "deepdesk classify: --list %s: cannot open the file\n", list);
		x->status = 1;
	}
	for (int a = optind; a < argc; a++) {
		struct stat st;
		if (stat(argv[a], &st) == 0 && S_ISDIR(st.st_mode))
			walk(x, argv[a], 0);
		else
			classify_file(x, argv[a]);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	status = x->status;
	if (doc) {
		char *text = cJSON_Print(doc);
		if (text)
			printf("%s\n", text);
		free(text);
		cJSON_Delete(doc);
	}
	if (out) {
		double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		fprintf(stderr, "deepdesk classify: %ld images (%ld failed) in %.3f s, %.1f images/s, into %s\n",
			x->images, x->errors, s, s > 0 ? (double)x->images / s : 0.0, outpath);
	}
	free(x);
out:
	if (out && fclose(out) != 0 && status == 0) {
		fprintf(stderr, "deepdesk classify: --out %s: cannot write the file\n", outpath);
		status = 2;
	}
	infer_close(h);
	if (tmp[0])
		fs_rm_rf(tmp, NULL);
	return status;
}
