/* fsutil.h — files, folders and paths: the small set of file-system operations every
 * module needs, each reporting failures through struct dd_err with the path named. */
#ifndef DD_FSUTIL_H
#define DD_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

/* Create dir and its missing parents (mode 0755).  Existing folders are fine. */
int fs_mkdir_p(const char *dir, struct dd_err *err);

/* Read a whole file of at most `cap` bytes.  On success *out is NUL-terminated
 * (the NUL is not counted in *len); caller frees with free(). */
int fs_read_file(const char *path, size_t cap, char **out, size_t *len, struct dd_err *err);

/* Write data to path atomically: a temporary file beside it, fsync, rename.
 * A crash leaves either the old or the new content, never a torn file. */
int fs_write_file_atomic(const char *path, const void *data, size_t len, struct dd_err *err);
/* Write all len bytes of data to fd (retrying short writes and EINTR): 0, or -1 with
 * errno set by the write that failed. */
int fs_write_all(int fd, const void *data, size_t len);

/* Remove a file or a folder tree.  A missing path is not an error. */
int fs_rm_rf(const char *path, struct dd_err *err);

/* Total bytes of the regular files below dir (0 if it does not exist). */
uint64_t fs_tree_bytes(const char *dir);

/* Is `path` (which must exist) inside folder `root` once both are resolved
 * (symlinks and ".." followed)?  1 yes, 0 no or unresolvable.  When yes and
 * resolved is non-NULL, the resolved path (PATH_MAX bytes) is written there. */
int fs_path_under(const char *path, const char *root, char *resolved);

/* Bytes an unprivileged writer may still use on the file system holding path (a
 * file or a folder; a path that does not exist yet is measured at its folder), or
 * -1 when statvfs cannot tell. */
int64_t fs_free_bytes(const char *path);

/* The one sentence every full disk is reported with, so the UI, the API and the logs
 * say the same: err gets DD_ENOSPC and "<what>: no space left on the data folder's
 * file system (N MiB free)", `what` printf-formatted, N measured now on the file
 * system holding path.  Returns DD_ENOSPC.  Call it where the failed write is known
 * (before any cleanup frees space, so N is what the writer found). */
int fs_err_nospace(struct dd_err *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Milliseconds since the Unix epoch, and a monotonic clock in milliseconds. */
/* Write s to f as one CSV field (RFC 4180): as it is, or quoted with its quotes
 * doubled when it holds a comma, a quote or a line break.  A field a spreadsheet
 * would take for a formula (=, +, -, @, tab or CR first, and not a number) is
 * written '-prefixed and quoted, so a class name from an archive cannot run. */
void fs_csv_field(FILE *f, const char *s);

int64_t fs_now_ms(void);
int64_t fs_mono_ms(void);

/* The next line of a text being read in place: the line at *at, cut at its '\n'
 * and without its trailing '\r', spaces and tabs, with *at moved past it; NULL
 * once nothing is left (a final '\n' ends the text, a blank line before it is
 * ""). */
char *fs_line_next(char **at);

#endif
