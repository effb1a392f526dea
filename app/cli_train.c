/* cli_train.c — `deepdesk train`: train a network on a dataset folder from the
 * command line (networks/train.c, the same code a training job runs). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../networks/net.h"
#include "../networks/train.h"
#include "cli.h"


const char cli_train_usage[] =
	"usage: deepdesk train --dataset DIR --network NAME|FILE --out DIR [OPTIONS]\n"
	"\n"
	"Train an image classifier on a dataset made by `deepdesk dataset create`.\n"
	"NAME is a standard network (lenet, alexnet, googlenet, resnet_small), FILE a\n"
	"Caffe prototxt with DIGITS' stages.  Progress goes to stderr; the weights are\n"
	"written to OUT/snapshot_epoch_<N>.safetensors at the end.\n"
	"\n"
	"  --epochs N          training epochs (1)\n"
	"  --batch N           batch size (64; 0: the network's data layer batch_size)\n"
	"  --solver sgd|adam   (sgd)\n"
	"  --lr RATE           base learning rate (0.01)\n"
	"  --momentum M        SGD momentum / Adam beta1 (0.9)\n"
	"  --weight-decay D    L2 weight decay (0.0005)\n"
	"  --lr-policy fixed|step  step: x0.1 every 33%% of the iterations (step)\n"
	"  --mean image|pixel|none  mean subtraction (image)\n"
	"  --seed N            weights, shuffling and crops (0)\n"
	"  --json              print a JSON summary on stdout at the end\n"
	"  -h, --help          this text\n";

static void on_metric(void *ctx, const struct train_metric *m)
{
	if (strcmp(m->kind, "train") == 0)
		fprintf(stderr, "epoch %6.2f  iter %6lld  loss %.4f  lr %.3g  %.0f img/s\n", m->epoch,
			(long long)m->iteration, m->loss, m->lr, m->images_per_s);
	else {
		fprintf(stderr, "epoch %6.2f  val loss %.4f", m->epoch, m->loss);
		if (!isnan(m->accuracy))
			fprintf(stderr, "  accuracy %.4f", m->accuracy);
		if (!isnan(m->accuracy_top5))
			fprintf(stderr, "  top-5 %.4f", m->accuracy_top5);
		fputc('\n', stderr);
	}
}

static void on_log(void *ctx, const char *level, const char *msg)
{
	fprintf(stderr, "%s\n", msg);
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (!*s || *end || !(v >= lo && v <= hi)) {
		fprintf(stderr, "deepdesk train: %s: '%s' is not a number from %g to %g\n", opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static void json_num(cJSON *o, const char *k, double v)
{
	if (isnan(v))
		cJSON_AddNullToObject(o, k);
	else
		cJSON_AddNumberToObject(o, k, v);
}

int cli_train(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dataset", required_argument, 0, 'd' },  { "network", required_argument, 0, 'n' },
		{ "out", required_argument, 0, 'o' },      { "epochs", required_argument, 0, 'e' },
		{ "batch", required_argument, 0, 'b' },    { "solver", required_argument, 0, 's' },
		{ "lr", required_argument, 0, 'l' },       { "momentum", required_argument, 0, 'm' },
		{ "weight-decay", required_argument, 0, 'w' }, { "lr-policy", required_argument, 0, 'p' },
		{ "mean", required_argument, 0, 'M' },     { "seed", required_argument, 0, 'S' },
		{ "json", no_argument, 0, 'j' },           { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	struct train_opts o;
	struct train_result res;
	train_opts_default(&o);
	o.epochs = 1;
	o.batch = 64;
	o.result = &res;
	const char *network = NULL;
	int json = 0, c;
	double v;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'd': o.dataset_dir = optarg; break;
		case 'n': network = optarg; break;
		case 'o': o.out_dir = optarg; break;
		case 'e':
			if (parse_num("--epochs", optarg, 1, 100000, &v))
				return 2;
			o.epochs = (int)v;
			break;
		case 'b':
			if (parse_num("--batch", optarg, 0, 65536, &v))
				return 2;
			o.batch = (int)v;
			break;
		case 's':
			if (strcmp(optarg, "sgd") == 0)
				o.solver = SOLVER_SGD;
			else if (strcmp(optarg, "adam") == 0)
				o.solver = SOLVER_ADAM;
			else {
				fprintf(stderr, "deepdesk train: --solver: sgd or adam, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'l':
			if (parse_num("--lr", optarg, 1e-12, 1e6, &o.base_lr))
				return 2;
			break;
		case 'm':
			if (parse_num("--momentum", optarg, 0, 0.999999, &o.momentum))
				return 2;
			break;
		case 'w':
			if (parse_num("--weight-decay", optarg, 0, 1, &o.weight_decay))
				return 2;
			break;
		case 'p':
			if (strcmp(optarg, "fixed") == 0)
				o.policy = LR_FIXED;
			else if (strcmp(optarg, "step") == 0)
				o.policy = LR_STEP;
			else {
				fprintf(stderr, "deepdesk train: --lr-policy: fixed or step, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'M':
			if (strcmp(optarg, "image") == 0)
				o.mean = FEED_MEAN_IMAGE;
			else if (strcmp(optarg, "pixel") == 0)
				o.mean = FEED_MEAN_PIXEL;
			else if (strcmp(optarg, "none") == 0)
				o.mean = FEED_MEAN_NONE;
			else {
				fprintf(stderr, "deepdesk train: --mean: image, pixel or none, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'S':
			if (parse_num("--seed", optarg, 0, 9007199254740992.0, &v))
				return 2;
			o.seed = (uint64_t)v;
			break;
		case 'j': json = 1; break;
		case 'h': fputs(cli_train_usage, stdout); return 0;
		default: fputs(cli_train_usage, stderr); return 2;
		}
	}
	if (!o.dataset_dir || !network || !o.out_dir || optind < argc) {
		fputs(cli_train_usage, stderr);
		return 2;
	}
	char *file_text = NULL;
	const char *text = net_standard_text(network);
	struct dd_err err = { 0 };
	if (!text) {
		size_t len;
		if (fs_read_file(network, 16u << 20, &file_text, &len, &err)) {
			fprintf(stderr, "deepdesk train: %s is neither a standard network nor a readable file: %s\n",
				network, err.msg);
			return 1;
		}
		text = file_text;
	}
	o.network_text = text;
	o.network_name = network;
	struct train_hooks h = { .metric = on_metric, .log = on_log };
	int64_t t0 = fs_mono_ms();
	int rc = train_run(&o, &h, &err);
	free(file_text);
	double secs = (double)(fs_mono_ms() - t0) / 1000.0;
	if (json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "ok", rc == DD_OK);
		if (rc) {
			cJSON_AddStringToObject(j, "error", dd_err_name(rc));
			cJSON_AddStringToObject(j, "message", err.msg);
		} else {
			cJSON_AddNumberToObject(j, "iterations", (double)res.iterations);
			json_num(j, "epochs", res.epochs);
			json_num(j, "train_loss", res.train_loss);
			json_num(j, "val_loss", res.val_loss);
			json_num(j, "val_accuracy", res.val_accuracy);
			json_num(j, "val_accuracy_top5", res.val_accuracy_top5);
			cJSON_AddStringToObject(j, "snapshot", res.snapshot);
		}
		json_num(j, "seconds", secs);
		char *s = cJSON_Print(j);
		if (s)
			puts(s);
		free(s);
		cJSON_Delete(j);
	}
	if (rc) {
		fprintf(stderr, "deepdesk train: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "done in %.1f s: %s\n", secs, res.snapshot);
	return 0;
}
