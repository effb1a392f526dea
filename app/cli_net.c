/* cli_net.c — `deepdesk net`: check a network description as training would see it
 * (the same networks/net.c code the web editor calls), list and print the standard
 * networks. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../networks/net.h"
#include "../networks/prototxt.h"
#include "cli.h"

const char cli_net_usage[] =
	"usage: deepdesk net check FILE|NAME [OPTIONS]\n"
	"       deepdesk net list\n"
	"       deepdesk net show NAME\n"
	"\n"
	"check  parse a Caffe prototxt and instantiate it as training would for a dataset\n"
	"       (DIGITS' stages and clean-up, shapes, parameter counts); print one line per\n"
	"       layer (name, type, top shapes, parameters) and a total, or the first error as\n"
	"       FILE:LINE:COL: message on stderr and exit 1.  NAME is a standard network.\n"
	"       Without --stage all three stages are checked and the train stage is shown.\n"
	"list   the standard networks, with the image shape each is meant for\n"
	"show   print a standard network's prototxt (to start a custom one from)\n"
	"\n"
	"options of check:\n"
	"  --stage STAGE   train, val or deploy\n"
	"  --input CxHxW   the dataset's image shape, e.g. 3x256x256 (default: the standard\n"
	"                  network's, else the description's own Input shape)\n"
	"  --batch N       batch size (default: the data layer's batch_size, else 16; deploy 1)\n"
	"  --crop N        crop size, as DIGITS' form field (default: the data layer's crop_size)\n"
	"  --classes N     class count for InnerProducts without num_output (default: the\n"
	"                  standard network's)\n"
	"  --json          print JSON on stdout instead, errors too\n"
	"  -h, --help      this text\n";

static int parse_chw(const char *s, struct net_input *in)
{
	int c, h, w, used = 0;
	if (sscanf(s, "%dx%dx%d%n", &c, &h, &w, &used) != 3 || s[used] || c < 1 || c > 4096 || h < 1 ||
	    h > 65536 || w < 1 || w > 65536) {
		fprintf(stderr, "deepdesk: --input: expected CxHxW (e.g. 3x256x256), got \"%s\"\n", s);
		return -1;
	}
	in->c = c;
	in->h = h;
	in->w = w;
	return 0;
}

/* Report err for `what` (the file) in `stage` (NULL: not stage-specific). */
static int report(const char *what, const char *stage, const struct dd_err *err, int json)
{
	int line, col;
	int has_pos = net_err_pos(err, &line, &col);
	if (json) {
		cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
		if (root && e && cJSON_AddItemToObject(root, "error", e)) {
			cJSON_AddStringToObject(e, "code", dd_err_name(err->code));
			cJSON_AddStringToObject(e, "message", err->msg);
			if (has_pos) {
				cJSON_AddNumberToObject(e, "line", line);
				cJSON_AddNumberToObject(e, "col", col);
			}
			if (stage)
				cJSON_AddStringToObject(e, "stage", stage);
			char *s = cJSON_Print(root);
			if (s)
				puts(s);
			free(s);
		} else {
			cJSON_Delete(e);
		}
		cJSON_Delete(root);
	} else {
		/* FILE:LINE:COL: message, as compilers write it, so editors can jump there */
		fprintf(stderr, "%s:%s%s", what, has_pos ? "" : " ", err->msg);
		if (stage)
			fprintf(stderr, " (%s stage)", stage);
		fputc('\n', stderr);
	}
	return 1;
}

static int net_list(void)
{
	for (const struct net_standard *s = net_standards; s->name; s++)
		printf("%-13s %-10s %dx%dx%d  %s\n", s->name, s->title, s->c, s->h, s->w, s->about);
	return 0;
}

static int net_show(int argc, char **argv)
{
	if (argc != 2) {
		fputs(cli_net_usage, stderr);
		return 2;
	}
	const char *text = net_standard_text(argv[1]);
	if (!text) {
		fprintf(stderr, "deepdesk: no standard network \"%s\" (deepdesk net list shows them)\n", argv[1]);
		return 1;
	}
	fputs(text, stdout);
	return 0;
}

static int net_check(int argc, char **argv)
{
	enum { O_STAGE = 1, O_INPUT, O_BATCH, O_CROP, O_CLASSES, O_JSON };
	static const struct option longopts[] = {
		{ "stage", required_argument, NULL, O_STAGE },
		{ "input", required_argument, NULL, O_INPUT },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "crop", required_argument, NULL, O_CROP },
		{ "classes", required_argument, NULL, O_CLASSES },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct net_input in = { 0 };
	int json = 0, stage_given = 0, input_given = 0, classes_given = 0, c;
	enum net_stage stage = NET_STAGE_TRAIN;
	struct dd_err err = { 0, "" };
	optind = 0; /* glibc: a full reset, for callers that run verbs in-process (the tests) */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_STAGE:
			if (net_stage_parse(optarg, &stage, &err)) {
				fprintf(stderr, "deepdesk: --stage: %s\n", err.msg);
				return 2;
			}
			stage_given = 1;
			break;
		case O_INPUT:
			if (parse_chw(optarg, &in))
				return 2;
			input_given = 1;
			break;
		case O_BATCH:
			if (cli_int("--batch", optarg, 1, 1 << 20, &in.n))
				return 2;
			break;
		case O_CROP:
			if (cli_int("--crop", optarg, 1, 65536, &in.crop))
				return 2;
			break;
		case O_CLASSES:
			if (cli_int("--classes", optarg, 1, 1 << 24, &in.classes))
				return 2;
			classes_given = 1;
			break;
		case O_JSON: json = 1; break;
		case 'h': fputs(cli_net_usage, stdout); return 0;
		default: fputs(cli_net_usage, stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fputs(cli_net_usage, stderr);
		return 2;
	}
	const char *what = argv[optind];
	const struct net_standard *std = NULL;
	char *text = NULL;
	size_t len = 0;
	struct net *def = NULL;
	struct net_graph *g = NULL;
	int rc = 1;

	if (access(what, F_OK) == 0) {
		if (fs_read_file(what, PTX_MAX_INPUT, &text, &len, &err)) {
			report(what, NULL, &err, json);
			goto done;
		}
	} else if ((std = net_standard_find(what))) {
		len = strlen(std->text);
	} else {
		dd_err_set(&err, DD_ENOENT, "no such file, nor a standard network (lenet, alexnet, googlenet, resnet_small)");
		report(what, NULL, &err, json);
		goto done;
	}
	if (net_parse(std ? std->text : text, len, &def, &err)) {
		report(what, NULL, &err, json);
		goto done;
	}
	if (!input_given) {
		if (std) {
			in.c = std->c;
			in.h = std->h;
			in.w = std->w;
		} else {
			struct net_input decl = in;
			if (net_declared_input(def, &decl) != DD_OK) {
				dd_err_set(&err, DD_EINVAL,
					   "no input shape: give the dataset's image shape with --input CxHxW");
				report(what, NULL, &err, json);
				goto done;
			}
			in.c = decl.c;
			in.h = decl.h;
			in.w = decl.w;
		}
	}
	if (!classes_given && std)
		in.classes = std->classes;

	/* check every stage unless one was asked for; show the one asked for (or train) */
	for (int s = NET_STAGE_TRAIN; s <= NET_STAGE_DEPLOY; s++) {
		if (stage_given && s != (int)stage)
			continue;
		struct net_graph *one = NULL;
		if (net_instantiate(def, (enum net_stage)s, &in, &one, &err)) {
			report(what, net_stage_name((enum net_stage)s), &err, json);
			goto done;
		}
		if (s == (int)stage)
			g = one;
		else
			net_graph_free(one);
	}
	if (json) {
		cJSON *j = net_graph_json(g);
		char *s = j ? cJSON_Print(j) : NULL;
		cJSON_Delete(j);
		if (!s) {
			fprintf(stderr, "deepdesk: out of memory\n");
			goto done;
		}
		puts(s);
		free(s);
	} else if (net_graph_print(g, stdout)) {
		goto done;
	}
	rc = 0;
done:
	net_graph_free(g);
	net_free(def);
	free(text);
	return rc;
}

int cli_net(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(cli_net_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "check"))
		return net_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return net_list();
	if (!strcmp(argv[1], "show"))
		return net_show(argc - 1, argv + 1);
	fprintf(stderr, "deepdesk: net: unknown command \"%s\" (check, list or show)\n", argv[1]);
	return 2;
}
