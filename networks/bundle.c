/* bundle.c — see bundle.h.  SHA-256 is FIPS 180-4's, written out here: the build
 * links no crypto library, and a checksum of our own files needs nothing more. */
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

/* ---- SHA-256 ---- */

struct sha256 {
	uint32_t h[8];
	uint8_t buf[64];
	size_t nbuf;
	uint64_t bytes;
};

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(struct sha256 *s, const uint8_t *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6],
		 h = s->h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	s->h[0] += a;
	s->h[1] += b;
	s->h[2] += c;
	s->h[3] += d;
	s->h[4] += e;
	s->h[5] += f;
	s->h[6] += g;
	s->h[7] += h;
}

static void sha_init(struct sha256 *s)
{
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	memcpy(s->h, h0, sizeof h0);
	s->nbuf = 0;
	s->bytes = 0;
}

static void sha_update(struct sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	s->bytes += len;
	if (s->nbuf) {
		size_t take = 64 - s->nbuf < len ? 64 - s->nbuf : len;
		memcpy(s->buf + s->nbuf, p, take);
		s->nbuf += take;
		p += take;
		len -= take;
		if (s->nbuf < 64)
			return;
		sha_block(s, s->buf);
		s->nbuf = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		sha_block(s, p);
	memcpy(s->buf, p, len);
	s->nbuf = len;
}

static void sha_final(struct sha256 *s, char hex[65])
{
	uint64_t bits = s->bytes * 8;
	uint8_t pad[72] = { 0x80 };
	size_t npad = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
	for (int i = 0; i < 8; i++)
		pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha_update(s, pad, npad + 8);
	for (int i = 0; i < 8; i++)
		sprintf(hex + 8 * i, "%08x", s->h[i]);
	hex[64] = 0;
}

void bundle_sha256(const void *data, size_t len, char hex[65])
{
	struct sha256 s;
	sha_init(&s);
	sha_update(&s, data, len);
	sha_final(&s, hex);
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
	struct sha256 s;
	sha_init(&s);
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
		sha_update(&s, buf, (size_t)n);
	}
	free(buf);
	close(fd);
	if (rc)
		return rc;
	if (size)
		*size = (int64_t)s.bytes; /* before sha_final counts its padding in */
	sha_final(&s, hex);
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
