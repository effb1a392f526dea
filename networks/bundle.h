/* bundle.h — the integrity of a model bundle: what info.json says of every other
 * file, and the check that the files are those.
 *
 * A bundle (networks/infer.h, docs/bundles.md) is a flat folder: info.json and the
 * files it names.  Its manifest carries, under "files", the size and SHA-256 of
 * every other file:
 *
 *   "files": {"weights.safetensors": {"size": 1234, "sha256": "9f…"}, …}
 *
 * so that a copy damaged on the way, or edited by hand, is refused with the file
 * and what differs, instead of giving other answers than the server gave.  Only
 * the names in bundle_file_names() may appear in a bundle, none of them in a
 * sub-folder. */
#ifndef DD_BUNDLE_H
#define DD_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

#define BUNDLE_MANIFEST "info.json"
#define BUNDLE_FORMAT_VERSION 2 /* 2: "files" with sizes and sha256 */

/* The names a bundle may hold besides info.json, NULL-terminated. */
const char *const *bundle_file_names(void);
/* Is name one of them (or info.json)?  1 or 0. */
int bundle_name_ok(const char *name);

/* SHA-256 of len bytes as 64 lowercase hex digits and a NUL into hex. */
void bundle_sha256(const void *data, size_t len, char hex[65]);
/* SHA-256 and size of the regular file at path (read in pieces).  DD_OK;
 * DD_ENOENT when missing; DD_EINVAL for what is not a regular file; DD_EIO. */
int bundle_sha256_file(const char *path, char hex[65], int64_t *size, struct dd_err *err);

/* Add to man's "files" (made when missing) the entry of name for len bytes of data,
 * or for the file at path.  DD_OK; DD_ENOMEM; bundle_sha256_file's errors. */
int bundle_manifest_add_bytes(cJSON *man, const char *name, const void *data, size_t len);
int bundle_manifest_add_file(cJSON *man, const char *name, const char *path, struct dd_err *err);

/* Check the bundle in dir against its manifest man (dir/info.json as parsed):
 * "files" is there and names only bundle files, network.prototxt and
 * weights.safetensors among them; each named file is a regular file (not a link)
 * of that size and SHA-256; no bundle file is in dir that "files" leaves out.
 * DD_OK, or DD_EINVAL with a sentence naming the file and what does not match. */
int bundle_verify(const char *dir, const cJSON *man, struct dd_err *err);

#endif
