/* archive.c — see archive.h. */
#define _GNU_SOURCE
#include "archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"

void archive_limits_default(struct archive_limits *l)
{
	*l = (struct archive_limits){ .max_entries = 1000000,
				      .max_bytes = 32ll << 30,
				      .max_entry_bytes = 1ll << 30,
				      .max_ratio = 200 };
}

int archive_is_archive_name(const char *name)
{
	size_t n = strlen(name);
	static const char *const exts[] = { ".zip", ".tar", ".tar.gz", ".tgz", NULL };
	for (int i = 0; exts[i]; i++) {
		size_t e = strlen(exts[i]);
		if (n > e && strcasecmp(name + n - e, exts[i]) == 0)
			return 1;
	}
	return 0;
}

/* Check an entry's path and make it relative and clean; 0 ok, -1 hostile
 * (reason in why), 1 skip silently. */
static int clean_path(const char *in, char *out, size_t len, const char **why)
{
	if (!in || !*in) {
		*why = "an entry with an empty name";
		return -1;
	}
	if (in[0] == '/' || in[0] == '\\' || (in[0] && in[1] == ':')) {
		*why = "an absolute path";
		return -1;
	}
	size_t o = 0;
	const char *p = in;
	while (*p) {
		const char *seg = p;
		while (*p && *p != '/' && *p != '\\')
			p++;
		size_t sl = (size_t)(p - seg);
		if (*p)
			p++;
		if (sl == 0 || (sl == 1 && seg[0] == '.'))
			continue;
		if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
			*why = "a path that climbs out with \"..\"";
			return -1;
		}
		if ((sl == 8 && strncmp(seg, "__MACOSX", 8) == 0) || seg[0] == '.')
			return 1; /* metadata and hidden files */
		if (o + sl + 2 >= len) {
			*why = "a path that is too long";
			return -1;
		}
		if (o)
			out[o++] = '/';
		memcpy(out + o, seg, sl);
		o += sl;
	}
	out[o] = 0;
	return o ? 0 : 1;
}

/* err for entry rel of archive name that could not be written to out: a full
 * disk in fs_err_nospace's sentence (measured now, before the partial unpacking
 * is removed), anything else with its errno. */
static int unpack_failed(struct dd_err *err, int e, const char *name, const char *rel, const char *out)
{
	if (e == ENOSPC || e == EDQUOT)
		return fs_err_nospace(err, out, "%s: cannot unpack %s", name, rel);
	return dd_err_sys(err, DD_EIO, e, "cannot write %s", out);
}

/* Make the folders of rel below dest (never following a link). */
static int make_parents(const char *dest, const char *rel, struct dd_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dest, rel);
	size_t base = strlen(dest) + 1;
	for (char *p = path + base; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		struct stat st;
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return dd_err_sys(err, DD_EIO, errno, "cannot create %s", path);
		if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			return dd_err_set(err, DD_EINVAL, "archive entry %s: a file and a folder share a name", rel);
		*p = '/';
	}
	return DD_OK;
}

int archive_unpack(const char *path, const char *shown, const char *dest,
		   const struct archive_limits *lim_in, int64_t *files, struct dd_err *err)
{
	struct archive_limits lim;
	if (lim_in)
		lim = *lim_in;
	else
		archive_limits_default(&lim);
	const char *name = shown ? shown : strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	*files = 0;
	int rc;
	struct archive *a = archive_read_new();
	if (!a)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_format_zip(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rc = dd_err_set(err, DD_EINVAL, "%s: not a readable .zip or .tar(.gz) archive (%s)", name,
				archive_error_string(a) ? archive_error_string(a) : "unknown format");
		archive_read_free(a);
		return rc;
	}
	if ((rc = fs_mkdir_p(dest, err))) {
		archive_read_free(a);
		return rc;
	}
	struct archive_entry *e;
	int64_t entries = 0, total = 0;
	char *buf = malloc(1 << 16);
	if (!buf) {
		archive_read_free(a);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	int r;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *ename = archive_entry_pathname(e);
		char rel[PATH_MAX];
		const char *why = NULL;
		if (++entries > lim.max_entries) {
			rc = dd_err_set(err, DD_ETOOBIG, "%s: more than %lld entries (the limit)", name,
					(long long)lim.max_entries);
			break;
		}
		int c = clean_path(ename, rel, sizeof rel, &why);
		mode_t type = archive_entry_filetype(e);
		if (c == 0 && archive_entry_hardlink(e))
			why = "a hard link", c = -1;
		else if (c == 0 && type == AE_IFLNK)
			why = "a symbolic link", c = -1;
		else if (c == 0 && type != AE_IFREG && type != AE_IFDIR)
			why = "a device, FIFO or socket", c = -1;
		if (c < 0) {
			rc = dd_err_set(err, DD_EINVAL, "%s: refused: entry \"%.200s\" is %s; an image archive holds only folders and files",
					name, ename ? ename : "", why);
			break;
		}
		if (c > 0 || type == AE_IFDIR)
			continue;
		if (archive_entry_size_is_set(e) && archive_entry_size(e) > lim.max_entry_bytes) {
			rc = dd_err_set(err, DD_ETOOBIG, "%s: entry %s is %lld bytes, over the %lld-byte limit for one file",
					name, rel, (long long)archive_entry_size(e), (long long)lim.max_entry_bytes);
			break;
		}
		if ((rc = make_parents(dest, rel, err)))
			break;
		char out[PATH_MAX];
		snprintf(out, sizeof out, "%s/%s", dest, rel);
		int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			if (errno == EEXIST)
				rc = dd_err_set(err, DD_EINVAL, "%s: entry %s appears twice", name, rel);
			else
				rc = unpack_failed(err, errno, name, rel, out);
			break;
		}
		int64_t entry_bytes = 0;
		for (;;) {
			la_ssize_t n = archive_read_data(a, buf, 1 << 16);
			if (n == 0)
				break;
			if (n < 0) {
				rc = dd_err_set(err, DD_EINVAL, "%s: entry %s is corrupt (%s)", name, rel,
						archive_error_string(a) ? archive_error_string(a) : "read error");
				break;
			}
			entry_bytes += n;
			total += n;
			int64_t packed = archive_filter_bytes(a, -1);
			if (entry_bytes > lim.max_entry_bytes || total > lim.max_bytes) {
				rc = dd_err_set(err, DD_ETOOBIG, "%s: unpacks to more than the %lld-byte limit", name,
						(long long)(entry_bytes > lim.max_entry_bytes ? lim.max_entry_bytes : lim.max_bytes));
				break;
			}
			/* a zip bomb: far more out than in (1 MiB of slack for small archives) */
			if (total > (1 << 20) && packed > 0 && total / packed > lim.max_ratio) {
				rc = dd_err_set(err, DD_EINVAL, "%s: refused: unpacks to over %lld times its packed size (a zip bomb?)",
						name, (long long)lim.max_ratio);
				break;
			}
			if (fs_write_all(fd, buf, (size_t)n) != 0) {
				rc = unpack_failed(err, errno, name, rel, out);
				break;
			}
		}
		if (close(fd) != 0 && rc == DD_OK)
			rc = unpack_failed(err, errno, name, rel, out);
		if (rc)
			break;
		(*files)++;
	}
	if (rc == DD_OK && r != ARCHIVE_EOF)
		rc = dd_err_set(err, DD_EINVAL, "%s: corrupt or truncated archive (%s)", name,
				archive_error_string(a) ? archive_error_string(a) : "read error");
	free(buf);
	archive_read_free(a);
	if (rc) {
		fs_rm_rf(dest, NULL);
		*files = 0;
	}
	return rc;
}

void archive_kept_path(const char *dir, const char *file, char *out, size_t len)
{
	const char *ext = strstr(file, ".tar.gz") ? ".tar.gz" : strrchr(file, '.') ? strrchr(file, '.') : "";
	snprintf(out, len, "%s/archive%s", dir, ext);
}

int archive_kept_find(const char *dir, char *out, size_t len)
{
	static const char *const exts[] = { ".zip", ".tar", ".tar.gz", NULL };
	for (int i = 0; exts[i]; i++) {
		snprintf(out, len, "%s/archive%s", dir, exts[i]);
		if (access(out, R_OK) == 0)
			return 1;
	}
	return 0;
}
