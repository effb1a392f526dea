/* fsutil.c — see fsutil.h. */
#define _GNU_SOURCE
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

int fs_mkdir_p(const char *dir, struct dd_err *err)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);
	if (n == 0 || n >= sizeof buf)
		return dd_err_set(err, DD_EINVAL, "folder path is empty or too long");
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return dd_err_sys(err, DD_EIO, errno, "cannot create folder %s", buf);
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return dd_err_sys(err, DD_EIO, errno, "cannot create folder %s", buf);
	struct stat st;
	if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
		return dd_err_set(err, DD_EIO, "%s exists and is not a folder", buf);
	return DD_OK;
}

int fs_read_file(const char *path, size_t cap, char **out, size_t *len, struct dd_err *err)
{
	int rc = DD_OK;
	char *data = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot open %s", path);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		rc = dd_err_sys(err, DD_EIO, errno, "cannot stat %s", path);
		goto fail;
	}
	if ((uint64_t)st.st_size > cap) {
		rc = dd_err_set(err, DD_ETOOBIG, "%s is %lld bytes, over the %zu-byte limit", path,
				(long long)st.st_size, cap);
		goto fail;
	}
	size_t size = (size_t)st.st_size, got = 0;
	data = malloc(size + 1);
	if (!data) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory reading %s", path);
		goto fail;
	}
	while (got < size) {
		ssize_t r = read(fd, data + got, size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = dd_err_sys(err, DD_EIO, errno, "cannot read %s", path);
			goto fail;
		}
		if (r == 0)
			break; /* shrank while reading: take what is there */
		got += (size_t)r;
	}
	data[got] = 0;
	close(fd);
	*out = data;
	if (len)
		*len = got;
	return DD_OK;
fail:
	free(data);
	close(fd);
	return rc;
}

int fs_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* A failed write of path through tmp: err says so (a full disk in the one sentence
 * of fs_err_nospace, measured before tmp goes), tmp is removed. */
static int write_failed(struct dd_err *err, int e, const char *path, const char *tmp)
{
	int rc = (e == ENOSPC || e == EDQUOT) ? fs_err_nospace(err, path, "cannot write %s", path)
					      : dd_err_sys(err, DD_EIO, e, "cannot write %s", path);
	unlink(tmp);
	return rc;
}

int fs_write_file_atomic(const char *path, const void *data, size_t len, struct dd_err *err)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
		return dd_err_set(err, DD_EINVAL, "path too long: %s", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot create %s", tmp);
	if (fs_write_all(fd, data, len) != 0 || fsync(fd) != 0) {
		int e = errno;
		close(fd);
		return write_failed(err, e, path, tmp);
	}
	if (close(fd) != 0 || rename(tmp, path) != 0)
		return write_failed(err, errno, path, tmp);
	return DD_OK;
}

int64_t fs_free_bytes(const char *path)
{
	struct statvfs v;
	if (statvfs(path, &v) != 0) {
		/* not there yet (a file about to be written): its folder */
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s", path);
		char *slash = strrchr(dir, '/');
		if (!slash)
			snprintf(dir, sizeof dir, ".");
		else if (slash == dir)
			dir[1] = 0;
		else
			*slash = 0;
		if (statvfs(dir, &v) != 0)
			return -1;
	}
	return (int64_t)v.f_bavail * (int64_t)v.f_frsize;
}

int fs_err_nospace(struct dd_err *err, const char *path, const char *fmt, ...)
{
	if (!err)
		return DD_ENOSPC;
	char what[256];
	DD_FORMAT(what, fmt);
	int64_t free_b = fs_free_bytes(path);
	char amount[48];
	double mib = (double)free_b / (1024.0 * 1024.0);
	if (free_b < 0)
		snprintf(amount, sizeof amount, "free space unknown");
	else if (mib < 10)
		snprintf(amount, sizeof amount, "%.1f MiB free", mib);
	else
		snprintf(amount, sizeof amount, "%.0f MiB free", mib);
	return dd_err_set(err, DD_ENOSPC, "%s: no space left on the data folder's file system (%s)", what, amount);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	int r = (flag == FTW_DP) ? rmdir(path) : unlink(path);
	return (r != 0 && errno != ENOENT) ? -1 : 0;
}

int fs_rm_rf(const char *path, struct dd_err *err)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? DD_OK : dd_err_sys(err, DD_EIO, errno, "cannot stat %s", path);
	if (!S_ISDIR(st.st_mode))
		return unlink(path) == 0 ? DD_OK : dd_err_sys(err, DD_EIO, errno, "cannot remove %s", path);
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) != 0)
		return dd_err_sys(err, DD_EIO, errno, "cannot remove %s", path);
	return DD_OK;
}

static uint64_t tree_total;
static int add_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (flag == FTW_F)
		tree_total += (uint64_t)st->st_blocks * 512;
	return 0;
}

uint64_t fs_tree_bytes(const char *dir)
{
	/* nftw has no user pointer; serialise callers. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	tree_total = 0;
	nftw(dir, add_one, 32, FTW_PHYS);
	uint64_t total = tree_total;
	pthread_mutex_unlock(&lock);
	return total;
}

int fs_path_under(const char *path, const char *root, char *resolved)
{
	char rp[PATH_MAX], rr[PATH_MAX];
	if (!realpath(path, rp) || !realpath(root, rr))
		return 0;
	size_t n = strlen(rr);
	int inside = strncmp(rp, rr, n) == 0 && (rp[n] == '/' || rp[n] == 0 || (n == 1 && rr[0] == '/'));
	if (inside && resolved)
		memcpy(resolved, rp, strlen(rp) + 1);
	return inside;
}

int64_t fs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t fs_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether s is a whole number in C's syntax ("-3", "+1.5e-3"), which a spreadsheet
 * reads as a number, not a formula. */
static int csv_is_number(const char *s)
{
	char *end;
	errno = 0;
	(void)strtod(s, &end);
	return end != s && *end == 0 && errno == 0;
}

void fs_csv_field(FILE *f, const char *s)
{
	/* A cell a spreadsheet would run as a formula (=, +, -, @, or a tab or CR first)
	 * gets a leading apostrophe, which shows the text as it is (OWASP's advice for
	 * CSV injection); a plain number such as -3 stays a number. */
	int formula = strchr("=+-@\t\r", s[0]) && s[0] && !csv_is_number(s);
	if (!formula && !strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	if (formula)
		fputc('\'', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

char *fs_line_next(char **at)
{
	char *s = *at;
	if (!s || !*s)
		return NULL;
	char *nl = strchr(s, '\n');
	*at = nl ? nl + 1 : s + strlen(s);
	if (nl)
		*nl = 0;
	size_t l = strlen(s);
	while (l && (s[l - 1] == '\r' || s[l - 1] == ' ' || s[l - 1] == '\t'))
		s[--l] = 0;
	return s;
}
