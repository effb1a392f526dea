/* cli_classify.c — `deepdesk classify`: run a trained model on image files, with no
 * server: a model job's folder and one of its snapshots, a bundle folder, or a
 * bundle .tar.gz as GET /api/v1/models/{id}/bundle sends it (unpacked into a
 * temporary folder by datasets/archive.c, which refuses traversal, links and
 * bombs, and removed afterwards).  networks/infer.c does the work, the same code
 * the server's classify route runs, so both give the same probabilities. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../datasets/archive.h"
#include "../jobs/kind_train.h"
#include "../networks/infer.h"
#include "cli.h"

const char cli_classify_usage[] =
	"usage: deepdesk classify --model MODEL [OPTIONS] IMAGE...\n"
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
	"  --json            print JSON: {\"model\",\"snapshot\",\"results\":[{\"image\",\n"
	"                    \"width\",\"height\",\"predictions\":[{\"label\",\"index\",\n"
	"                    \"probability\"}]} or {\"image\",\"error\"}]}\n"
	"  -h, --help        this text\n"
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

int cli_classify(int argc, char **argv)
{
	enum { O_MODEL = 1, O_SNAP, O_TOP, O_JSON };
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, O_MODEL }, { "snapshot", required_argument, NULL, O_SNAP },
		{ "top", required_argument, NULL, O_TOP },     { "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
	};
	const char *model = NULL, *snapshot = NULL;
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
		case 'h': fputs(cli_classify_usage, stdout); return 0;
		default: fputs(cli_classify_usage, stderr); return 2;
		}
	}
	if (!model || optind >= argc) {
		fprintf(stderr, "deepdesk classify: %s\n%s", !model ? "--model is required" : "no image given",
			cli_classify_usage);
		return 2;
	}

	struct dd_err err = { 0 };
	char tmp[PATH_MAX] = "", dir[PATH_MAX], weights[PATH_MAX + 64], label[MODEL_LABEL_MAX] = "";
	struct infer *h = NULL;
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
	snprintf(info, sizeof info, "%s/info.json", dir);
	const char *w = NULL;
	if (access(info, R_OK) == 0) {
		if (snapshot)
			fprintf(stderr, "deepdesk classify: a bundle holds one snapshot; --snapshot is ignored\n");
	} else {
		struct model_snapshot *snaps = NULL;
		int n = 0;
		double epoch = -1;
		if (snapshot && !model_snapshot_label_ok(snapshot, &epoch)) {
			fprintf(stderr, "deepdesk classify: --snapshot %s: not an epoch (3, 1.4167)\n", snapshot);
			goto out;
		}
		if (model_snapshots(dir, &snaps, &n, &err)) {
			fprintf(stderr, "deepdesk classify: %s\n", err.msg);
			goto out;
		}
		int i = model_snapshot_find(snaps, n, epoch);
		if (i < 0) {
			free(snaps);
			fprintf(stderr, "deepdesk classify: %s: %s\n", model,
				n == 0 ? "not a bundle (no info.json) nor a model folder with snapshots" :
					 "no snapshot at that epoch");
			goto out;
		}
		snprintf(label, sizeof label, "%s", snaps[i].label);
		free(snaps);
		model_snapshot_path(dir, label, "safetensors", weights, sizeof weights);
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
			cJSON *j = cJSON_Parse(text);
			const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "snapshot"));
			snprintf(label, sizeof label, "%s", s ? s : "");
			cJSON_Delete(j);
		}
		free(text);
	}

	status = 0;
	cJSON *doc = json ? cJSON_CreateObject() : NULL, *results = NULL;
	if (doc) {
		cJSON_AddStringToObject(doc, "model", model);
		cJSON_AddStringToObject(doc, "snapshot", label);
		results = cJSON_AddArrayToObject(doc, "results");
	}
	struct infer_pred pred[INFER_MAX_TOP];
	for (int a = optind; a < argc; a++) {
		char *bytes = NULL;
		size_t len = 0;
		int np = 0, iw = 0, ih = 0;
		int rc = fs_read_file(argv[a], 256u << 20, &bytes, &len, &err);
		if (!rc)
			rc = infer_classify(h, bytes, len, argv[a], top, pred, &np, &iw, &ih, &err);
		free(bytes);
		cJSON *r = doc ? cJSON_CreateObject() : NULL;
		if (r) {
			cJSON_AddStringToObject(r, "image", argv[a]);
			cJSON_AddItemToArray(results, r);
		}
		if (rc) {
			status = 1;
			if (r)
				cJSON_AddStringToObject(r, "error", err.msg);
			else
				fprintf(stderr, "deepdesk classify: %s\n", err.msg);
			continue;
		}
		if (r) {
			cJSON_AddNumberToObject(r, "width", iw);
			cJSON_AddNumberToObject(r, "height", ih);
			cJSON_AddItemToObject(r, "predictions", infer_predictions_json(pred, np));
		} else {
			printf("%s\n", argv[a]);
			for (int i = 0; i < np; i++)
				printf("  %7.3f%%  %s (%d)\n", 100.0 * pred[i].probability, pred[i].label, pred[i].index);
		}
	}
	if (doc) {
		char *text = cJSON_Print(doc);
		if (text)
			printf("%s\n", text);
		free(text);
		cJSON_Delete(doc);
	}
out:
	infer_close(h);
	if (tmp[0])
		fs_rm_rf(tmp, NULL);
	return status;
}
