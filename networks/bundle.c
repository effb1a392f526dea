/* bundle.c — see bundle.h.  SHA-256 is libsodium's (linked for the accounts already). */
#define _GNU_SOURCE
#include "bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

static const char *const names[] = { "network.prototxt", "deploy.prototxt", "weights.safetensors", "labels.txt",
				     "mean.binaryproto", "mean.png", NULL };

const char *const *bundle_file_names(void) { return names; }

int bundle_name_ok(const char *name)
{
	if (!strcmp(name, BUNDLE_MANIFEST))
		return 1;
	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]))
			return 1;
	return 0;
}

/* ---- SHA-256 (libsodium's) ---- */

static void sha_hex(crypto_hash_sha256_state *s, char hex[65])
{
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(s, digest);
	sodium_bin2hex(hex, 65, digest, sizeof digest);
}

void bundle_sha256(const void *data, size_t len, char hex[65])
{
	crypto_hash_sha256_state s;
	crypto_hash_sha256_init(&s);
	crypto_hash_sha256_update(&s, data, len);
	sha_hex(&s, hex);
}

int bundle_sha256_file(const char *path, char hex[65], int64_t *size, struct dd_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? dd_err_set(err, DD_ENOENT, "%s: no such file", path) :
		       errno == ELOOP ? dd_err_set(err, DD_EINVAL, "%s is a link, not a file", path) :
					dd_err_set(err, DD_EIO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return dd_err_set(err, DD_EINVAL, "%s is not a regular file", path);
	}
	enum { BUF = 1 << 16 };
	uint8_t *buf = malloc(BUF); /* not on the stack: CivetWeb's threads have small ones */
	if (!buf) {
		close(fd);
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	}
	crypto_hash_sha256_state s;
	crypto_hash_sha256_init(&s);
	int64_t bytes = 0;
	int rc = DD_OK;
	for (;;) {
		ssize_t n = read(fd, buf, BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = dd_err_set(err, DD_EIO, "%s: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		crypto_hash_sha256_update(&s, buf, (size_t)n);
		bytes += n;
	}
	free(buf);
	close(fd);
	if (rc)
		return rc;
	if (size)
		*size = bytes;
	sha_hex(&s, hex);
	return DD_OK;
}

/* ---- the manifest's "files" ---- */

static cJSON *files_of(cJSON *man)
{
	cJSON *f = cJSON_GetObjectItemCaseSensitive(man, "files");
	if (!f)
		f = cJSON_AddObjectToObject(man, "files");
	return cJSON_IsObject(f) ? f : NULL;
}

static int add_entry(cJSON *man, const char *name, const char *hex, int64_t size)
{
	cJSON *files = files_of(man), *e = cJSON_CreateObject();
	if (!files || !e || !cJSON_AddNumberToObject(e, "size", (double)size) || !cJSON_AddStringToObject(e, "sha256", hex)) {
		cJSON_Delete(e);
		return DD_ENOMEM;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(files, name);
	cJSON_AddItemToObject(files, name, e);
	return DD_OK;
}

int bundle_manifest_add_bytes(cJSON *man, const char *name, const void *data, size_t len)
{
	char hex[65];
	bundle_sha256(data, len, hex);
	return add_entry(man, name, hex, (int64_t)len);
}

int bundle_manifest_add_file(cJSON *man, const char *name, const char *path, struct dd_err *err)
{
	char hex[65];
	int64_t size = 0;
	int rc = bundle_sha256_file(path, hex, &size, err);
	if (rc)
		return rc;
	if (add_entry(man, name, hex, size))
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	return DD_OK;
}

int bundle_verify(const char *dir, const cJSON *man, struct dd_err *err)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(man, "files");
	if (!cJSON_IsObject(files))
		return dd_err_set(err, DD_EINVAL,
				  "info.json has no \"files\" (the size and sha256 of each file): not a bundle of "
				  "format %d, or its manifest was edited",
				  BUNDLE_FORMAT_VERSION);
	const cJSON *e;
	cJSON_ArrayForEach(e, files)
	{
		const char *name = e->string;
		if (!name || !bundle_name_ok(name) || !strcmp(name, BUNDLE_MANIFEST))
			return dd_err_set(err, DD_EINVAL, "info.json: files names \"%.64s\", which is not a bundle file",
					  name ? name : "");
		const cJSON *sz = cJSON_GetObjectItemCaseSensitive(e, "size");
		const char *want = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "sha256"));
		if (!cJSON_IsNumber(sz) || sz->valuedouble < 0 || !want || strlen(want) != 64)
			return dd_err_set(err, DD_EINVAL, "info.json: files.%s needs a size and a 64-digit sha256", name);
		char path[PATH_MAX + 64], hex[65];
		int64_t size = 0;
		snprintf(path, sizeof path, "%s/%s", dir, name);
		int rc = bundle_sha256_file(path, hex, &size, err);
		if (rc == DD_ENOENT)
			return dd_err_set(err, DD_EINVAL, "%s: named in info.json but missing from the bundle", name);
		if (rc) {
			dd_err_set(err, rc, "%s: %s", name, rc == DD_EINVAL ? "not a regular file" : "cannot be read");
			return rc;
		}
		if ((double)size != sz->valuedouble)
			return dd_err_set(err, DD_EINVAL, "%s: %lld bytes, info.json says %.0f: the file was changed or cut",
					  name, (long long)size, sz->valuedouble);
		if (strcmp(hex, want) != 0)
			return dd_err_set(err, DD_EINVAL, "%s: sha256 %.12s…, info.json says %.12s…: the file was changed",
					  name, hex, want);
	}
	static const char *const required[] = { "network.prototxt", "weights.safetensors", NULL };
	for (int i = 0; required[i]; i++)
		if (!cJSON_GetObjectItemCaseSensitive(files, required[i]))
			return dd_err_set(err, DD_EINVAL, "info.json: files lacks %s, which every bundle has", required[i]);
	for (int i = 0; names[i]; i++) {
		char path[PATH_MAX + 64];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		if (lstat(path, &st) == 0 && !cJSON_GetObjectItemCaseSensitive(files, names[i]))
			return dd_err_set(err, DD_EINVAL, "%s is in the bundle but not in info.json's files: it was added",
					  names[i]);
	}
	return DD_OK;
}
