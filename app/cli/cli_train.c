/* cli_train.c — `deepdesk train`: train a network on a dataset folder from the
 * command line (networks/train.c, the same code a training job runs), writing the
 * folder a model job writes: network.prototxt, settings.json, labels.txt,
 * events.jsonl and the snapshots (jobs/kind_train.h makes the files and events for
 * both, jobs/worker.h appends them).  On a terminal, progress is one line on stderr
 * redrawn in place; otherwise one plain line per metric, a format scripts parse:
 *   epoch   1.25  iter     40  loss 0.6931  lr 0.01  1234 img/s
 *   epoch   2.00  val loss 0.5000  accuracy 0.8000  top-5 1.0000 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../jobs/kind_train.h"
#include "../../networks/modeldir.h"
#include "../../jobs/worker.h"
#include "../../networks/net.h"
#include "../../networks/train.h"
#include "cli.h"


const char cli_train_usage[] =
	"usage: deepdesk train --dataset DIR --network NAME|FILE --out DIR [OPTIONS]\n"
	"\n"
	"Train an image classifier on a dataset made by `deepdesk dataset create`.\n"
	"NAME is a standard network (lenet, alexnet, googlenet, resnet_small), FILE a\n"
	"Caffe prototxt with DIGITS' stages.  Progress goes to stderr (a progress bar on\n"
	"a terminal).  OUT becomes the folder a server's model job writes: events.jsonl\n"
	"(metrics, logs, the result), network.prototxt, settings.json, labels.txt, and\n"
	"snapshots OUT/snapshot_epoch_<E>.safetensors (weights) with a .solverstate\n"
	"beside each (what --resume needs); an interrupt (Ctrl-C) writes one before it\n"
	"stops.\n"
	"\n"
	"  --epochs N            training epochs (30; with --resume the new total)\n"
	"  --batch N             batch size (0: the network's data layer batch_size)\n"
	"  --iter-size N         batch accumulation: passes per update (1)\n"
	"  --solver NAME         sgd, nesterov, adagrad, rmsprop, adadelta or adam (sgd)\n"
	"  --lr RATE             base learning rate (0.01)\n"
	"  --momentum M          momentum; Adam's beta1; AdaDelta's decay (0.9)\n"
	"  --momentum2 M         Adam's beta2 (0.999)\n"
	"  --delta D             AdaGrad/RMSProp/AdaDelta/Adam epsilon (1e-8)\n"
	"  --rms-decay R         RMSProp's decay (0.99)\n"
	"  --weight-decay D      L2 weight decay (0.0005)\n"
	"  --lr-policy P         fixed, step, multistep, exp, inv, poly, sigmoid (step)\n"
	"  --step PCT[,PCT...]   step: every PCT%% of the iterations (33); multistep:\n"
	"                        at each PCT%%; sigmoid: the centre\n"
	"  --gamma G             step/multistep/exp/inv/sigmoid factor (0.1)\n"
	"  --power P             inv/poly power (inv 0.75, poly 1)\n"
	"  --mean image|pixel|none  mean subtraction (image)\n"
	"  --val-interval E      validate every E epochs (1; fractions allowed)\n"
	"  --snapshot-interval E snapshot every E epochs (1)\n"
	"  --resume SNAPSHOT     continue exactly from a snapshot and its .solverstate\n"
	"  --finetune WEIGHTS    start from another model's weights; layers whose shape\n"
	"                        changed are initialised afresh\n"
	"  --backend NAME        cpu (oneDNN), ref (the plain-C reference kernels) or\n"
	"                        cuda[:N] (the CUDA plugin, GPU N; 0 by default) (cpu)\n"
	"  --gpus ID,ID[,...]    cuda only: train data parallel on these GPUs (up to 16,\n"
	"                        distinct), one copy of the network each, joined by NCCL;\n"
	"                        --batch is then images per GPU, a step trains\n"
	"                        GPUs x batch.  Overrides the N of cuda:N\n"
	"  --precision P         fp32, fp16 or bf16: convolutions and inner products in\n"
	"                        half precision on tensor cores, FP32 master weights, fp16\n"
	"                        with dynamic loss scaling; cuda only (fp32)\n"
	"  --threads N           CPU threads (all cores); with a fixed seed and thread\n"
	"                        count a run is repeatable to the bit\n"
	"  --seed N              weights, shuffling and crops (0)\n"
	"  --json                print a JSON summary on stdout at the end\n"
	"  -h, --help            this text\n";

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig; interrupted = 1; }
static int should_stop(void *ctx) { (void)ctx; return interrupted; }

/* The hooks' context: the job folder's event log, and the terminal. */
struct cli_ctx {
	struct worker w;       /* only .dir and .ev: worker_event() and friends append to it */
	int64_t t0;
	double epoch0, epochs; /* where this run started (a resume's snapshot), the total */
	int tty;               /* stderr is a terminal: draw the bar */
	int bar_shown;         /* the bar is on the current line */
	double epoch, loss, ips, eta; /* the last train metric's, for the bar */
};

static void clear_bar(struct cli_ctx *c)
{
	if (c->bar_shown)
		fputs("\r\033[K", stderr);
	c->bar_shown = 0;
}

/* "epoch 1.42/30 [####......]  4.7%  loss 0.6931  1234 img/s  ETA 3m12s" */
static void draw_bar(struct cli_ctx *c, double epoch)
{
	enum { WIDTH = 24 };
	double f = c->epochs > 0 ? fmin(1, fmax(0, epoch / c->epochs)) : 0;
	char bar[WIDTH + 1], eta[32] = "";
	int fill = (int)(f * WIDTH + 0.5);
	for (int i = 0; i < WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[WIDTH] = 0;
	if (c->eta >= 0) {
		long s = lround(c->eta);
		if (s >= 3600)
			snprintf(eta, sizeof eta, "  ETA %ldh%02ldm", s / 3600, s / 60 % 60);
		else
			snprintf(eta, sizeof eta, "  ETA %ldm%02lds", s / 60, s % 60);
	}
	fprintf(stderr, "\r\033[Kepoch %.2f/%g [%s] %5.1f%%  loss %.4f  %.0f img/s%s", epoch, c->epochs, bar,
		100 * f, c->loss, c->ips, eta);
	fflush(stderr);
	c->bar_shown = 1;
}

static void on_metric(void *vctx, const struct train_metric *m)
{
	struct cli_ctx *c = vctx;
	double eta = model_report_metric(&c->w, c->t0, c->epoch0, c->epochs, m);
	int train = strcmp(m->kind, "train") == 0;
	if (train) {
		c->epoch = m->epoch;
		c->loss = m->loss;
		if (m->images_per_s > 0) /* the end of an epoch reports none */
			c->ips = m->images_per_s;
		c->eta = eta;
	}
	if (c->tty && train) {
		draw_bar(c, m->epoch);
		return;
	}
	clear_bar(c);
	if (train)
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
	if (c->tty)
		draw_bar(c, m->epoch);
}

static void on_log(void *vctx, const char *level, const char *msg)
{
	struct cli_ctx *c = vctx;
	worker_log(&c->w, level, "%s", msg);
	int redraw = c->bar_shown;
	clear_bar(c);
	fprintf(stderr, "%s\n", msg);
	if (redraw)
		draw_bar(c, c->epoch);
}

/* settings.json's content: the options in a model job's params' shape, with the
 * dataset's folder, the network and where training started from. */
static cJSON *cli_settings(const struct train_opts *o, const char *network, int standard)
{
	cJSON *st = model_settings_from_opts(o);
	if (!st)
		return NULL;
	cJSON_AddStringToObject(st, "dataset", o->dataset_dir);
	cJSON *net = cJSON_AddObjectToObject(st, "network");
	if (standard)
		cJSON_AddStringToObject(net, "standard", network);
	else
		cJSON_AddStringToObject(net, "prototxt", o->network_text);
	if (o->resume)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(st, "resume"), "file", o->resume);
	if (o->finetune)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(st, "finetune"), "file", o->finetune);
	return st;
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

/* --step 33 or --step 50,75 */
static int parse_steps(const char *arg, struct train_opts *o)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", arg);
	o->nmultistep = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		double v;
		if (o->nmultistep == SOLVER_MAX_STEPS || parse_num("--step", t, 0.001, 100, &v))
			return -1;
		o->multistep_pct[o->nmultistep++] = v;
	}
	if (o->nmultistep == 0)
		return -1;
	o->step_pct = o->multistep_pct[0];
	return 0;
}

/* --gpus 0,1,3: distinct device ids, at most TRAIN_MAX_REPLICAS, into o->gpus and
 * o->replicas; 0, or -1 after saying what is wrong. */
static int parse_gpus(const char *arg, struct train_opts *o)
{
	const char *s = arg;
	o->replicas = 0;
	for (;;) {
		char *end;
		long id = strtol(s, &end, 10);
		if (*s < '0' || *s > '9' || (*end && *end != ',')) { /* digits only: no sign, no space */
			fprintf(stderr, "deepdesk train: --gpus: '%s' is not a comma list of GPU ids (like 0,1)\n", arg);
			return -1;
		}
		if (id > 63) {
			fprintf(stderr, "deepdesk train: --gpus: GPU %ld: a device id is from 0 to 63\n", id);
			return -1;
		}
		if (o->replicas == TRAIN_MAX_REPLICAS) {
			fprintf(stderr, "deepdesk train: --gpus: at most %d GPUs\n", TRAIN_MAX_REPLICAS);
			return -1;
		}
		for (int j = 0; j < o->replicas; j++)
			if (o->gpus[j] == id) {
				fprintf(stderr, "deepdesk train: --gpus: GPU %ld is listed twice\n", id);
				return -1;
			}
		o->gpus[o->replicas++] = (int)id;
		if (!*end)
			return 0;
		s = end + 1;
	}
}

/* The numeric options: flag, range, where it goes. */
struct num_opt {
	int id;
	const char *name;
	double lo, hi;
	size_t off;     /* into struct train_opts */
	int is_int;
};
#define OPT_D(id, name, lo, hi, field) { id, name, lo, hi, offsetof(struct train_opts, field), 0 }
#define OPT_I(id, name, lo, hi, field) { id, name, lo, hi, offsetof(struct train_opts, field), 1 }
static const struct num_opt num_opts[] = {
	OPT_I('e', "--epochs", 1, 100000, epochs),
	OPT_I('b', "--batch", 0, 65536, batch),
	OPT_I('I', "--iter-size", 1, 1024, iter_size),
	OPT_D('l', "--lr", 1e-12, 1e6, base_lr),
	OPT_D('m', "--momentum", 0, 0.999999, momentum),
	OPT_D('2', "--momentum2", 0, 0.999999, momentum2),
	OPT_D('D', "--delta", 1e-20, 1, delta),
	OPT_D('R', "--rms-decay", 1e-6, 0.999999, rms_decay),
	OPT_D('w', "--weight-decay", 0, 1, weight_decay),
	OPT_D('g', "--gamma", 1e-9, 1e6, gamma),
	OPT_D('P', "--power", 1e-9, 1e3, power),
	OPT_D('v', "--val-interval", 0.001, 100000, val_interval),
	OPT_D('V', "--snapshot-interval", 0.001, 100000, snapshot_interval),
	OPT_I('t', "--threads", 1, 1024, threads),
};

int cli_train(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dataset", required_argument, 0, 'd' },  { "network", required_argument, 0, 'n' },
		{ "out", required_argument, 0, 'o' },      { "epochs", required_argument, 0, 'e' },
		{ "batch", required_argument, 0, 'b' },    { "iter-size", required_argument, 0, 'I' },
		{ "solver", required_argument, 0, 's' },   { "lr", required_argument, 0, 'l' },
		{ "momentum", required_argument, 0, 'm' }, { "momentum2", required_argument, 0, '2' },
		{ "delta", required_argument, 0, 'D' },    { "rms-decay", required_argument, 0, 'R' },
		{ "weight-decay", required_argument, 0, 'w' }, { "lr-policy", required_argument, 0, 'p' },
		{ "step", required_argument, 0, 'x' },     { "gamma", required_argument, 0, 'g' },
		{ "power", required_argument, 0, 'P' },    { "mean", required_argument, 0, 'M' },
		{ "val-interval", required_argument, 0, 'v' }, { "snapshot-interval", required_argument, 0, 'V' },
		{ "resume", required_argument, 0, 'r' },   { "finetune", required_argument, 0, 'f' },
		{ "backend", required_argument, 0, 'B' },  { "threads", required_argument, 0, 't' },
		{ "precision", required_argument, 0, 'Q' }, { "gpus", required_argument, 0, 'G' },
		{ "seed", required_argument, 0, 'S' },     { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },           { 0, 0, 0, 0 }
	};
	struct train_opts o;
	struct train_result res;
	train_opts_default(&o);
	o.result = &res;
	const char *network = NULL;
	int json = 0, c;
	double v;
	struct dd_err err = { 0 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		const struct num_opt *no = NULL;
		for (size_t i = 0; i < sizeof num_opts / sizeof num_opts[0]; i++)
			if (num_opts[i].id == c)
				no = &num_opts[i];
		if (no) {
			if (parse_num(no->name, optarg, no->lo, no->hi, &v))
				return 2;
			if (no->is_int)
				*(int *)((char *)&o + no->off) = (int)v;
			else
				*(double *)((char *)&o + no->off) = v;
			continue;
		}
		switch (c) {
		case 'd': o.dataset_dir = optarg; break;
		case 'n': network = optarg; break;
		case 'o': o.out_dir = optarg; break;
		case 'r': o.resume = optarg; break;
		case 'f': o.finetune = optarg; break;
		case 'B': o.backend = optarg; break;
		case 'Q': o.precision = optarg; break;
		case 'G':
			if (parse_gpus(optarg, &o))
				return 2;
			break;
		case 's':
			if (solver_type_parse(optarg, &o.solver, &err)) {
				fprintf(stderr, "deepdesk train: --solver: %s\n", err.msg);
				return 2;
			}
			break;
		case 'p':
			if (lr_policy_parse(optarg, &o.policy, &err)) {
				fprintf(stderr, "deepdesk train: --lr-policy: %s\n", err.msg);
				return 2;
			}
			break;
		case 'x':
			if (parse_steps(optarg, &o)) {
				fprintf(stderr, "deepdesk train: --step: up to %d percentages, comma-separated\n",
					SOLVER_MAX_STEPS);
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
	if (o.policy != LR_MULTISTEP)
		o.nmultistep = 0;
	if (o.replicas > 0) {
		/* --gpus names the devices: the backend is cuda on the first of them */
		static char device[32];
		if (!o.backend || strncmp(o.backend, "cuda", 4) != 0 || (o.backend[4] && o.backend[4] != ':')) {
			fprintf(stderr, "deepdesk train: --gpus: only with --backend cuda\n");
			return 2;
		}
		snprintf(device, sizeof device, "cuda:%d", o.gpus[0]);
		o.backend = device;
		if (o.replicas == 1)
			o.replicas = 0; /* one GPU: an ordinary run on it */
	}
	if (o.resume && o.finetune) {
		fprintf(stderr, "deepdesk train: --resume and --finetune exclude each other\n");
		return 2;
	}
	if (!o.dataset_dir || !network || !o.out_dir || optind < argc) {
		fputs(cli_train_usage, stderr);
		return 2;
	}
	char *file_text = NULL;
	const char *text = net_standard_text(network);
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
	int standard = file_text == NULL;

	/* the job folder: its event log first, so that what goes wrong is in it */
	struct cli_ctx cx = { .w = { .dir = o.out_dir, .ev = { -1 } }, .t0 = fs_mono_ms(),
			      .epoch0 = 0, .epochs = o.epochs,
			      .tty = isatty(STDERR_FILENO), .eta = -1 };
	struct modeldir_snapshot from;
	if (o.resume && modeldir_snapshot_parse(o.resume, &from))
		cx.epoch0 = from.epoch; /* for the ETA: this run trains from there */
	int rc;
	if ((rc = fs_mkdir_p(o.out_dir, &err)) || (rc = events_writer_open(&cx.w.ev, o.out_dir, &err))) {
		fprintf(stderr, "deepdesk train: %s\n", err.msg);
		free(file_text);
		return 1;
	}
	worker_status(&cx.w, "running", NULL);
	rc = model_write_folder(o.out_dir, text, standard ? network : "custom", o.dataset_dir, o.batch, o.crop,
				cli_settings(&o, network, standard), &err);

	struct train_hooks h = { .ctx = &cx, .metric = on_metric, .log = on_log, .should_stop = should_stop };
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	int64_t t0 = fs_mono_ms();
	if (rc == DD_OK)
		rc = train_run(&o, &h, &err);
	clear_bar(&cx);
	free(file_text);
	if (rc == DD_OK)
		worker_event(&cx.w, model_result_event(&res));
	if (rc == DD_OK && cx.w.event_failed) {
		err = cx.w.event_err;
		rc = err.code ? err.code : DD_EIO;
	}
	worker_status(&cx.w, rc ? "error" : res.stopped ? "aborted" : "done",
		      rc ? err.msg : res.stopped ? "stopped on request" : NULL);
	events_writer_close(&cx.w.ev);
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
			cJSON_AddBoolToObject(j, "stopped", res.stopped);
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
