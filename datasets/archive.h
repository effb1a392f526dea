/* archive.h — unpack an uploaded .zip, .tar, .tar.gz/.tgz safely (libarchive).
 *
 * Nothing is written outside dest: entries with absolute paths or ".." are
 * refused, as are symbolic and hard links, devices, FIFOs and sockets; files are
 * created with O_EXCL|O_NOFOLLOW below folders this function made itself.  An
 * archive that would unpack to more entries or bytes than the limits, or whose
 * unpacked size grows past max_ratio times the bytes read so far (a zip bomb), is
 * refused as a whole, with what was unpacked removed.  macOS metadata
 * (__MACOSX/, ._*) and hidden files are skipped silently. */
#ifndef DD_ARCHIVE_H
#define DD_ARCHIVE_H

#include <stdint.h>

#include "../common/err.h"

struct archive_limits {
	int64_t max_entries;     /* 1,000,000 */
	int64_t max_bytes;       /* unpacked, in all: 32 GiB */
	int64_t max_entry_bytes; /* one file: 1 GiB */
	int64_t max_ratio;       /* unpacked / packed: 200 */
};

void archive_limits_default(struct archive_limits *l);

/* Unpack path into dest (created).  *files gets the number of files written.
 * Messages name the archive as `shown` (the name it was uploaded under), or by its
 * file name when shown is NULL. */
int archive_unpack(const char *path, const char *shown, const char *dest,
		   const struct archive_limits *lim, int64_t *files, struct dd_err *err);

/* Is this file name one of the archive types we unpack (.zip .tar .tar.gz .tgz)? */
int archive_is_archive_name(const char *name);

/* A job keeps the upload it unpacked as DIR/archive.EXT (an upload is used once),
 * so that a clone can unpack it again.  archive_kept_path: that path for the
 * uploaded file (its extension, .tar.gz whole).  archive_kept_find: the one DIR
 * holds into out, 1; 0 when there is none. */
void archive_kept_path(const char *dir, const char *file, char *out, size_t len);
int archive_kept_find(const char *dir, char *out, size_t len);

#endif
