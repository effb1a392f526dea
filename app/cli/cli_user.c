/* cli_user.c — `deepdesk user add|list|passwd|remove|role`: accounts on the
 * command line, where the first admin is made.  A password is read from the
 * terminal with echo off (asked twice), or from the first line of a file
 * (--password-file F, "-" for standard input); never from the command line,
 * where other users of the machine could read it in the process list. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "../../common/fsutil.h"
#include "../accounts/auth.h"
#include "cli.h"
#include "../../store/store.h"

const char cli_user_usage[] =
	"usage: deepdesk user add NAME [--role ROLE] [--password-file F] [--data DIR]\n"
	"       deepdesk user list [--data DIR]\n"
	"       deepdesk user passwd NAME [--password-file F] [--data DIR]\n"
	"       deepdesk user role NAME ROLE [--data DIR]\n"
	"       deepdesk user remove NAME [--data DIR]\n"
	"       deepdesk user quota NAME [--jobs N] [--cpu-minutes N] [--gpu-minutes N] [--disk SIZE]\n"
	"                               [--memory SIZE] [--data DIR]\n"
	"\n"
	"Accounts of the server whose data folder is DIR (default ./data).  Roles: learner\n"
	"(their own datasets and models, and datasets shared with their classes),\n"
	"instructor (their own and their classes' members'), admin (everything, and users).\n"
	"The first account is an admin unless --role says otherwise.  Accounts are used\n"
	"when the server listens beyond loopback, or with `serve --accounts on`.\n"
	"\n"
	"options:\n"
	"  --role ROLE          learner (default), instructor or admin\n"
	"  --password-file F    read the password from the first line of F (\"-\": standard\n"
	"                       input) instead of asking on the terminal\n"
	"  --data DIR           the data folder (default ./data)\n"
	"  --jobs N             quota: jobs running at once\n"
	"  --cpu-minutes N      quota: CPU-slot minutes per day (UTC)\n"
	"  --gpu-minutes N      quota: GPU minutes per day (UTC)\n"
	"  --disk SIZE          quota: bytes of the user's job folders (K, M, G, T suffixes)\n"
	"  --memory SIZE        quota: the memory one of the user's jobs may use (its\n"
	"                       estimate; the server's --job-memory-max still holds)\n"
	"                       A quota value of 0 is no limit; \"default\" is the role's\n"
	"                       default.  Without any, `quota` shows the quota in force.\n"
	"  -h, --help           this text\n";

/* Read one line of at most AUTH_PASSWORD_MAX characters from f into buf without
 * its line ending; 0, or -1 when there is none. */
static int read_line(FILE *f, char *buf, size_t len)
{
	if (!fgets(buf, (int)len, f))
		return -1;
	buf[strcspn(buf, "\r\n")] = 0;
	return 0;
}

/* Ask for a password on the terminal without echo. */
static int ask(const char *prompt, char *buf, size_t len)
{
	FILE *tty = fopen("/dev/tty", "r+");
	if (!tty)
		return -1;
	struct termios old, quiet;
	int fd = fileno(tty), have = tcgetattr(fd, &old) == 0;
	if (have) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(fd, TCSAFLUSH, &quiet);
	}
	fputs(prompt, tty);
	fflush(tty);
	int rc = read_line(tty, buf, len);
	if (have)
		tcsetattr(fd, TCSAFLUSH, &old);
	fputs("\n", tty);
	fclose(tty);
	return rc;
}

/* The new password into pw (AUTH_PASSWORD_MAX + 2 bytes): from file, or asked
 * twice.  0, or 1 after saying why on stderr. */
static int get_password(const char *file, const char *name, char *pw, size_t len)
{
	if (file) {
		FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
		if (!f) {
			fprintf(stderr, "deepdesk user: --password-file %s: %s\n", file, strerror(errno));
			return 1;
		}
		int rc = read_line(f, pw, len);
		if (f != stdin)
			fclose(f);
		if (rc) {
			fprintf(stderr, "deepdesk user: --password-file %s: empty, a password was expected\n", file);
			return 1;
		}
	} else {
		char again[AUTH_PASSWORD_MAX + 2], prompt[96];
		snprintf(prompt, sizeof prompt, "Password for %s: ", name);
		if (ask(prompt, pw, len) || ask("The same password again: ", again, sizeof again)) {
			fprintf(stderr, "deepdesk user: no terminal to ask for a password: use --password-file F\n");
			return 1;
		}
		int same = strcmp(pw, again) == 0;
		sodium_memzero(again, sizeof again);
		if (!same) {
			fprintf(stderr, "deepdesk user: the two passwords differ; nothing was changed\n");
			return 1;
		}
	}
	struct dd_err err = { 0 };
	if (auth_password_check(pw, &err) != DD_OK) {
		fprintf(stderr, "deepdesk user: %s\n", err.msg);
		return 1;
	}
	return 0;
}

static int find(const char *name, struct auth_user *u)
{
	struct dd_err err = { 0 };
	if (auth_user_find(name, u, NULL, NULL, &err) != DD_OK) {
		fprintf(stderr, "deepdesk user: %s\n", err.msg);
		return 1;
	}
	return 0;
}

/* A quota value: "default" (-1), or a whole number from 0 with an optional K,
 * M, G or T suffix (binary) when size; 0, or 2 after saying what is wrong. */
static int quota_value(const char *opt, const char *s, int size, int64_t *out)
{
	if (strcmp(s, "default") == 0) {
		*out = -1;
		return 0;
	}
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	int shift = 0;
	if (size && *end) {
		const char *units = "KMGT";
		const char *u = strchr(units, *end >= 'a' ? *end - 32 : *end);
		if (u && *end) {
			shift = 10 * (int)(u - units + 1);
			end++;
			if (*end == 'i' || *end == 'B')
				end += (*end == 'i') + (end[(*end == 'i')] == 'B');
		}
	}
	if (end == s || *end || errno || v < 0 || (shift && v > (INT64_MAX >> shift))) {
		fprintf(stderr, "deepdesk user quota: %s %s: expected a whole number from 0%s, or \"default\"\n", opt, s,
			size ? " (with K, M, G or T)" : "");
		return 2;
	}
	*out = (int64_t)v << shift;
	return 0;
}

int cli_user(int argc, char **argv)
{
	enum { O_ROLE = 1, O_PWFILE, O_DATA, O_QJOBS, O_QCPU, O_QGPU, O_QDISK, O_QMEM };
	struct store_quota q = { -2, -2, -2, -2, -2 };
	static const struct option longopts[] = {
		{ "jobs", required_argument, NULL, O_QJOBS },
		{ "cpu-minutes", required_argument, NULL, O_QCPU },
		{ "gpu-minutes", required_argument, NULL, O_QGPU },
		{ "disk", required_argument, NULL, O_QDISK },
		{ "memory", required_argument, NULL, O_QMEM },
		{ "role", required_argument, NULL, O_ROLE },
		{ "password-file", required_argument, NULL, O_PWFILE },
		{ "data", required_argument, NULL, O_DATA },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data = "./data", *pwfile = NULL, *role_s = NULL;
	int c;
	/* the sub-verb is argv[1]: options are read after it */
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(cli_user_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *sub = argv[1];
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_ROLE: role_s = optarg; break;
		case O_PWFILE: pwfile = optarg; break;
		case O_DATA: data = optarg; break;
		case O_QJOBS:
			if (quota_value("--jobs", optarg, 0, &q.jobs))
				return 2;
			break;
		case O_QCPU:
			if (quota_value("--cpu-minutes", optarg, 0, &q.cpu_minutes))
				return 2;
			break;
		case O_QGPU:
			if (quota_value("--gpu-minutes", optarg, 0, &q.gpu_minutes))
				return 2;
			break;
		case O_QDISK:
			if (quota_value("--disk", optarg, 1, &q.disk_bytes))
				return 2;
			break;
		case O_QMEM:
			if (quota_value("--memory", optarg, 1, &q.memory_bytes))
				return 2;
			break;
		case 'h': fputs(cli_user_usage, stdout); return 0;
		default: fputs(cli_user_usage, stderr); return 2;
		}
	}
	int nargs = argc - optind;
	char **args = argv + optind;
	int want = strcmp(sub, "list") == 0 ? 0 : strcmp(sub, "role") == 0 ? 2 : 1;
	if (strcmp(sub, "add") && strcmp(sub, "list") && strcmp(sub, "passwd") && strcmp(sub, "remove") &&
	    strcmp(sub, "role") && strcmp(sub, "quota")) {
		fprintf(stderr, "deepdesk user: unknown command \"%s\"\n%s", sub, cli_user_usage);
		return 2;
	}
	if (nargs != want) {
		fprintf(stderr, "deepdesk user %s: expected %d argument%s, got %d\n%s", sub, want, want == 1 ? "" : "s",
			nargs, cli_user_usage);
		return 2;
	}
	enum auth_role role = ROLE_LEARNER;
	const char *rs = strcmp(sub, "role") == 0 ? args[1] : role_s;
	if (rs && auth_role_parse(rs, &role) != 0) {
		fprintf(stderr, "deepdesk user: role \"%s\": expected learner, instructor or admin\n", rs);
		return 2;
	}

	struct dd_err err = { 0 };
	if (fs_mkdir_p(data, &err) != DD_OK || store_init(data, &err) != DD_OK) {
		fprintf(stderr, "deepdesk user: %s\n", err.msg);
		return 1;
	}
	int rc = 1;
	char pw[AUTH_PASSWORD_MAX + 2] = "";
	struct auth_user u;
	if (strcmp(sub, "list") == 0) {
		cJSON *o = NULL;
		if (auth_user_list(&o, &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			return 1;
		}
		const cJSON *it;
		cJSON_ArrayForEach(it, cJSON_GetObjectItem(o, "users"))
		{
			printf("%-32s %-10s%s\n", cJSON_GetObjectItem(it, "name")->valuestring,
			       cJSON_GetObjectItem(it, "role")->valuestring,
			       cJSON_IsTrue(cJSON_GetObjectItem(it, "disabled")) ? " disabled" : "");
		}
		cJSON_Delete(o);
		rc = 0;
	} else if (strcmp(sub, "add") == 0) {
		int64_t n = 0, id;
		if (auth_name_check(args[0], &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			return 2;
		}
		if (!role_s && auth_user_count(&n, NULL) == DD_OK && n == 0)
			role = ROLE_ADMIN; /* the first account */
		if (get_password(pwfile, args[0], pw, sizeof pw))
			goto out;
		if (auth_user_add(args[0], role, pw, &id, &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			goto out;
		}
		auth_audit(NULL, "user_add", args[0], "cli");
		printf("added %s (%s)\n", args[0], auth_role_name(role));
		rc = 0;
	} else if (strcmp(sub, "passwd") == 0) {
		if (find(args[0], &u) || get_password(pwfile, args[0], pw, sizeof pw))
			goto out;
		if (auth_user_set_password(u.id, pw, 0, 1, &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			goto out;
		}
		auth_audit(NULL, "password_change", u.name, "cli");
		printf("changed the password of %s; their sessions have ended and their API tokens are revoked\n", u.name);
		rc = 0;
	} else if (strcmp(sub, "role") == 0) {
		if (find(args[0], &u))
			goto out;
		if (auth_user_set_role(u.id, role, &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			goto out;
		}
		char target[96];
		snprintf(target, sizeof target, "%s: %s -> %s", u.name, auth_role_name(u.role), auth_role_name(role));
		auth_audit(NULL, "role_change", target, "cli");
		printf("%s is now %s\n", u.name, auth_role_name(role));
		rc = 0;
	} else if (strcmp(sub, "quota") == 0) {
		if (find(args[0], &u))
			goto out;
		if (q.jobs != -2 || q.cpu_minutes != -2 || q.gpu_minutes != -2 || q.disk_bytes != -2 ||
		    q.memory_bytes != -2) {
			if (store_quota_set(u.id, &q, &err) != DD_OK) {
				fprintf(stderr, "deepdesk user: %s\n", err.msg);
				goto out;
			}
			char target[256];
			snprintf(target, sizeof target,
				 "%s: jobs %lld, cpu_minutes %lld, gpu_minutes %lld, disk_bytes %lld, memory_bytes %lld "
				 "(-2 kept, -1 default)",
				 u.name, (long long)q.jobs, (long long)q.cpu_minutes, (long long)q.gpu_minutes,
				 (long long)q.disk_bytes, (long long)q.memory_bytes);
			auth_audit(NULL, "user_quota", target, "cli");
		}
		struct store_quota now;
		if (store_quota_get(u.id, &now, &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			goto out;
		}
		printf("%s (%s): jobs %lld, cpu-minutes %lld, gpu-minutes %lld, disk %lld bytes, memory %lld bytes a job "
		       "(0: no limit)\n",
		       u.name, auth_role_name(u.role), (long long)now.jobs, (long long)now.cpu_minutes,
		       (long long)now.gpu_minutes, (long long)now.disk_bytes, (long long)now.memory_bytes);
		rc = 0;
	} else { /* remove */
		if (find(args[0], &u))
			goto out;
		if (auth_user_remove(u.id, &err) != DD_OK) {
			fprintf(stderr, "deepdesk user: %s\n", err.msg);
			goto out;
		}
		auth_audit(NULL, "user_remove", u.name, "cli");
		printf("removed %s; their jobs stay, seen by instructors and admins\n", u.name);
		rc = 0;
	}
out:
	sodium_memzero(pw, sizeof pw);
	store_thread_end();
	return rc;
}
