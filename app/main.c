/* main.c — `deepdesk VERB [OPTIONS]`: the verbs, their options and their help.
 * Every verb is a thin layer over a module; nothing here does the work itself. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/version.h"
#include "../jobs/kind_train_memory.h"
#include "../jobs/worker.h"
#include "api/api.h"
#include "cli/cli.h"
#include "infer/infer_service.h"
#include "http/server.h"

static const char usage[] =
	"deepdesk " DD_VERSION " — deep learning on your desktop, in the browser\n"
	"\n"
	"usage: deepdesk VERB [OPTIONS]\n"
	"\n"
	"verbs:\n"
	"  serve          the web app: UI, REST API and job scheduler (default port 5010)\n"
	"  dataset create build an image dataset (LMDB) from a folder, archive or list file\n"
	"  example fashion-mnist  write Debian's Fashion-MNIST as an image folder\n"
	"  example segmentation   write a synthetic segmentation set (shapes and their labels)\n"
	"  net check FILE check a network (Caffe prototxt): layers, shapes, parameters\n"
	"  net time NET   time a network's training iteration (or forward), per layer\n"
	"  net list|show  the standard networks, and one's prototxt\n"
	"  train          train a network on a dataset (oneDNN on the CPU, or the CUDA plugin)\n"
	"  classify       classify images with a trained model (a bundle or a job folder)\n"
	"  user           add, list and change accounts (add|list|passwd|role|remove|quota)\n"
	"  worker DIR     run the job described in DIR/job.json (the scheduler starts these)\n"
	"  routes         list the REST API's routes (method and path)\n"
	"  version        print the version and build\n"
	"  help [VERB]    this text, or a verb's own\n"
	"\n"
	"`deepdesk VERB --help` documents each verb's options.\n";

static const char serve_usage[] =
	"usage: deepdesk serve [OPTIONS]\n"
	"\n"
	"Start the web app.  Jobs run as separate `deepdesk worker` processes; stopping the\n"
	"server (SIGTERM, Ctrl-C) leaves them running and the next start adopts them.\n"
	"\n"
	"options:\n"
	"  --listen ADDR:PORT   where to listen (default 127.0.0.1:5010; port 0 picks a free\n"
	"                       one and writes it to DATA/server.port)\n"
	"  --data DIR           the data folder: database, jobs, uploads (default ./data)\n"
	"  --data-root DIR      a server folder users may read images from; repeat for more.\n"
	"                       No other server path is ever read on a user's behalf.\n"
	"  --cpu-slots N        CPU slots jobs may hold at once (default: one per core)\n"
	"  --abort-grace SEC    after an abort's SIGTERM, SIGKILL this much later (default 10)\n"
	"  --job-memory-max BYTES|auto|off  the memory one training may take, by its estimate\n"
	"                       (a size like 4G or 512M; default auto: half the machine's\n"
	"                       memory, or of the server's cgroup limit); over it a job is\n"
	"                       refused, and each worker runs under RLIMIT_DATA near it\n"
	"  --threads N          HTTP threads (default 256, 16 to 1024): each connection holds\n"
	"                       one while it is read and each WebSocket for its life, so\n"
	"                       WebSockets may hold half of them\n"
	"  --request-timeout SEC  a request's headers must all be in within this, and its\n"
	"                       body may pause this long at most (default 10)\n"
	"  --conns-per-addr N   requests one client address may have under way at once\n"
	"                       (more: 429), and connections it may keep waiting for their\n"
	"                       headers (the longest waiting beyond are cut) (default 32)\n"
	"  --ws-per-user N      WebSockets one user may hold, with accounts on (default 8)\n"
	"  --ws-per-addr N      WebSockets one client address may hold (default 16); raise\n"
	"                       both for a class behind one NAT address\n"
	"  --max-upload MIB     largest archive upload accepted, in MiB (default 16384)\n"
	"  --archive-max-files N  most files an uploaded archive may unpack to (1000000)\n"
	"  --archive-max-mib N  most MiB an uploaded archive may unpack to (32768); archives\n"
	"                       unpacking to over 200 times their size are refused as bombs\n"
	"  --accounts on|off    logins and per-user jobs (default: off when listening on\n"
	"                       loopback only, on otherwise; off beyond loopback is refused).\n"
	"                       `deepdesk user add` makes the accounts.\n"
	"  --tls-cert FILE      serve HTTPS with this PEM certificate (and --tls-key)\n"
	"  --tls-key FILE       the certificate's PEM private key\n"
	"  --session-idle SEC   a login unused this long ends (default 28800: 8 hours)\n"
	"  --metrics-token FILE serve Prometheus /metrics to \"Authorization: Bearer TOKEN\",\n"
	"                       TOKEN the first line of FILE (16 characters or more)\n"
	"  --session-max SEC    a login ends this long after it began (default 604800: 7 days)\n"
	"  --ui-dir DIR         serve the UI from DIR instead of the copy built in (development)\n"
	"  --log-level LEVEL    error, warn, info (default) or debug\n"
	"  --executor SPEC      who runs jobs: local (default), slurm, or per job kind, e.g.\n"
	"                       model=slurm,dataset=local (docs/slurm.md)\n"
	"  --slurm-partition P  --slurm-account A  the partition and account jobs go to\n"
	"  --slurm-cpus N       CPUs a Slurm job asks for (default: the job's CPU slots)\n"
	"  --slurm-mem SIZE     memory it asks for, as sbatch --mem (e.g. 8G)\n"
	"  --slurm-time LIMIT   its time limit, as sbatch --time (e.g. 4:00:00)\n"
	"  -h, --help           this text\n";

static const char worker_usage[] =
	"usage: deepdesk worker JOB_DIR\n"
	"\n"
	"Run the job described in JOB_DIR/job.json, appending progress, metrics and logs to\n"
	"JOB_DIR/events.jsonl.  Exits 0 when done, 1 on error, 2 when stopped by SIGTERM.\n"
	"The server's scheduler starts workers; running one by hand is for debugging.\n";

static const char routes_usage[] =
	"usage: deepdesk routes [--permissions]\n"
	"\n"
	"Print every REST API route the server registers, one `METHOD PATH` a line;\n"
	"--permissions adds who may call it (public, user, admin, job_read, …).\n";

static int cmd_serve(int argc, char **argv)
{
	enum { O_LISTEN = 1, O_DATA, O_ROOT, O_SLOTS, O_GRACE, O_THREADS, O_UI, O_LOG, O_UPLOAD,
	       O_AFILES, O_AMIB, O_ACCOUNTS, O_CERT, O_KEY, O_IDLE, O_SMAX,
	       O_EXEC, O_SPART, O_SACCT, O_SCPUS, O_SMEM, O_STIME, O_METRICS, O_JOBMEM, O_RTIMEOUT, O_CONNS,
	       O_WSUSER, O_WSADDR };
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "data", required_argument, NULL, O_DATA },
		{ "data-root", required_argument, NULL, O_ROOT },
		{ "cpu-slots", required_argument, NULL, O_SLOTS },
		{ "abort-grace", required_argument, NULL, O_GRACE },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "request-timeout", required_argument, NULL, O_RTIMEOUT },
		{ "conns-per-addr", required_argument, NULL, O_CONNS },
		{ "ws-per-user", required_argument, NULL, O_WSUSER },
		{ "ws-per-addr", required_argument, NULL, O_WSADDR },
		{ "ui-dir", required_argument, NULL, O_UI },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "max-upload", required_argument, NULL, O_UPLOAD },
		{ "archive-max-files", required_argument, NULL, O_AFILES },
		{ "archive-max-mib", required_argument, NULL, O_AMIB },
		{ "accounts", required_argument, NULL, O_ACCOUNTS },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "metrics-token", required_argument, NULL, O_METRICS },
		{ "session-idle", required_argument, NULL, O_IDLE },
		{ "session-max", required_argument, NULL, O_SMAX },
		{ "executor", required_argument, NULL, O_EXEC },
		{ "slurm-partition", required_argument, NULL, O_SPART },
		{ "slurm-account", required_argument, NULL, O_SACCT },
		{ "slurm-cpus", required_argument, NULL, O_SCPUS },
		{ "slurm-mem", required_argument, NULL, O_SMEM },
		{ "slurm-time", required_argument, NULL, O_STIME },
		{ "job-memory-max", required_argument, NULL, O_JOBMEM },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct server_opts o = { .listen = "127.0.0.1:5010", .data_dir = "./data" };
	int grace = 10, c;
	enum log_level level;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_LISTEN: o.listen = optarg; break;
		case O_DATA: o.data_dir = optarg; break;
		case O_ROOT:
			if (o.nroots == SERVER_MAX_ROOTS) {
				fprintf(stderr, "deepdesk: at most %d --data-root folders\n", SERVER_MAX_ROOTS);
				return 2;
			}
			char *real = realpath(optarg, NULL);
			if (!real) {
				fprintf(stderr, "deepdesk: --data-root %s: no such folder\n", optarg);
				return 2;
			}
			o.data_roots[o.nroots++] = real;
			break;
		case O_SLOTS:
			if (cli_int("--cpu-slots", optarg, 1, 1024, &o.cpu_slots))
				return 2;
			break;
		case O_GRACE:
			if (cli_int("--abort-grace", optarg, 0, 3600, &grace))
				return 2;
			break;
		case O_THREADS:
			if (cli_int("--threads", optarg, 16, 1024, &o.threads))
				return 2;
			break;
		case O_RTIMEOUT:
			if (cli_int("--request-timeout", optarg, 1, 3600, &o.request_timeout_s))
				return 2;
			break;
		case O_CONNS:
			if (cli_int("--conns-per-addr", optarg, 1, 1024, &o.conns_per_addr))
				return 2;
			break;
		case O_WSUSER:
			if (cli_int("--ws-per-user", optarg, 1, 1024, &o.ws_per_user))
				return 2;
			break;
		case O_WSADDR:
			if (cli_int("--ws-per-addr", optarg, 1, 1024, &o.ws_per_addr))
				return 2;
			break;
		case O_UI: o.ui_dir = optarg; break;
		case O_ACCOUNTS:
			if (strcmp(optarg, "on") == 0)
				o.accounts = ACCOUNTS_ON;
			else if (strcmp(optarg, "off") == 0)
				o.accounts = ACCOUNTS_OFF;
			else {
				fprintf(stderr, "deepdesk: --accounts: expected on or off, got \"%s\"\n", optarg);
				return 2;
			}
			break;
		case O_CERT: o.tls_cert = optarg; break;
		case O_KEY: o.tls_key = optarg; break;
		case O_METRICS: o.metrics_token = optarg; break;
		case O_IDLE:
			if (cli_int("--session-idle", optarg, 1, 365 * 24 * 3600, &o.session_idle_s))
				return 2;
			break;
		case O_SMAX:
			if (cli_int("--session-max", optarg, 1, 365 * 24 * 3600, &o.session_max_s))
				return 2;
			break;
		case O_AFILES:
			if (cli_number("--archive-max-files", optarg, 1, 1 << 30, &o.archive_max_files))
				return 2;
			break;
		case O_AMIB: /* MiB on the command line, bytes inside */
			if (cli_number("--archive-max-mib", optarg, 1, 1 << 30, &o.archive_max_bytes))
				return 2;
			o.archive_max_bytes <<= 20;
			break;
		case O_UPLOAD:
			if (cli_number("--max-upload", optarg, 1, 1 << 30, &o.max_upload))
				return 2;
			o.max_upload <<= 20;
			break;
		case O_LOG:
			if (log_level_parse(optarg, &level) != 0) {
				fprintf(stderr, "deepdesk: --log-level: expected error, warn, info or debug\n");
				return 2;
			}
			log_set_level(level);
			break;
		case O_EXEC: {
			struct dd_err xerr = { 0 };
			if (server_executor_parse(optarg, &xerr) != 0) {
				fprintf(stderr, "deepdesk: %s\n", xerr.msg);
				return 2;
			}
			o.executor = optarg;
			break;
		}
		case O_SPART: o.slurm.partition = optarg; break;
		case O_SACCT: o.slurm.account = optarg; break;
		case O_SCPUS:
			if (cli_int("--slurm-cpus", optarg, 1, 4096, &o.slurm.cpus))
				return 2;
			break;
		case O_SMEM: o.slurm.mem = optarg; break;
		case O_STIME: o.slurm.time = optarg; break;
		case O_JOBMEM: {
			struct dd_err merr = { 0 };
			int64_t bytes;
			if (job_memory_parse(optarg, &bytes, &merr) != DD_OK) {
				fprintf(stderr, "deepdesk: %s\n", merr.msg);
				return 2;
			}
			job_memory_set_max(bytes);
			break;
		}
		case 'h': fputs(serve_usage, stdout); return 0;
		default: fputs(serve_usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "deepdesk serve: unexpected argument \"%s\"\n%s", argv[optind], serve_usage);
		return 2;
	}
	o.abort_grace_ms = grace > 0 ? grace * 1000 : 1;
	return server_run(&o);
}

static int wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

static int cmd_worker(int argc, char **argv)
{
	if (wants_help(argc, argv)) {
		fputs(worker_usage, stdout);
		return 0;
	}
	if (argc != 2) {
		fputs(worker_usage, stderr);
		return 2;
	}
	return worker_main(argv[1]);
}

static int cmd_routes(int argc, char **argv)
{
	if (wants_help(argc, argv)) {
		fputs(routes_usage, stdout);
		return 0;
	}
	int perms = argc >= 2 && strcmp(argv[1], "--permissions") == 0;
	for (const struct route_info *r = server_routes(); r->pattern; r++)
		if (!r->digits)
			printf("%s %s%s%s\n", r->method, r->pattern, perms ? " " : "", perms ? perm_action_name(r->perm) : "");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *verb = argv[1];
	argc--;
	argv++;
	if (strcmp(verb, "serve") == 0)
		return cmd_serve(argc, argv);
	if (strcmp(verb, "worker") == 0)
		return cmd_worker(argc, argv);
	if (strcmp(verb, "routes") == 0)
		return cmd_routes(argc, argv);
	if (strcmp(verb, "infer-service") == 0) /* hidden: the server starts it */
		return infer_service_main(argc, argv);
	if (strcmp(verb, "draw-network") == 0) /* hidden: visualize starts it */
		return api_networks_draw_main(argc, argv);
	if (strcmp(verb, "dataset") == 0)
		return cli_dataset(argc, argv);
	if (strcmp(verb, "example") == 0)
		return cli_example(argc, argv);
	if (strcmp(verb, "net") == 0)
		return cli_net(argc, argv);
	if (strcmp(verb, "train") == 0)
		return cli_train(argc, argv);
	if (strcmp(verb, "classify") == 0)
		return cli_classify(argc, argv);
	if (strcmp(verb, "user") == 0)
		return cli_user(argc, argv);
	if (strcmp(verb, "version") == 0 || strcmp(verb, "--version") == 0) {
		printf("deepdesk %s (commit %s, built %s, CUDA backend %s)\n", DD_VERSION, dd_commit,
		       dd_build_date, dd_cuda_built ? "built" : "not built");
		return 0;
	}
	if (strcmp(verb, "help") == 0) {
		if (argc >= 2 && strcmp(argv[1], "serve") == 0)
			fputs(serve_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "worker") == 0)
			fputs(worker_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "routes") == 0)
			fputs(routes_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "dataset") == 0)
			fputs(cli_dataset_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "example") == 0)
			fputs(cli_example_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "net") == 0)
			fputs(cli_net_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "train") == 0)
			fputs(cli_train_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "classify") == 0)
			fputs(cli_classify_usage, stdout);
		else if (argc >= 2 && strcmp(argv[1], "user") == 0)
			fputs(cli_user_usage, stdout);
		else
			fputs(usage, stdout);
		return 0;
	}
	fprintf(stderr, "deepdesk: unknown verb \"%s\"\n\n%s", verb, usage);
	return 2;
}
