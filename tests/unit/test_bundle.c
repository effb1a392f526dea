/* test_bundle.c — networks/bundle.c: SHA-256 against FIPS 180-4's test vectors and
 * at every length around a block's end, a file hashed in pieces as in one go, and
 * bundle_verify refusing each kind of mismatch with the file named. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../networks/bundle.h"
#include "check.h"

static char tmp[PATH_MAX];

static void test_vectors(void)
{
	char hex[65];
	bundle_sha256("", 0, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	bundle_sha256("abc", 3, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes: padding spills */
	bundle_sha256(two, strlen(two), hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	char *million = malloc(1000000);
	memset(million, 'a', 1000000);
	bundle_sha256(million, 1000000, hex);
	CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
}

/* A file read in 64 KiB pieces hashes as the same bytes in memory, at sizes that
 * end just before, on and after a piece's and a block's end; its size is the
 * file's. */
static void test_file_pieces(void)
{
	struct dd_err err = { 0 };
	size_t sizes[] = { 0, 1, 55, 56, 63, 64, 65, 65535, 65536, 65537, 200003 };
	char *buf = malloc(200003), path[PATH_MAX + 16];
	for (size_t i = 0; i < 200003; i++)
		buf[i] = (char)(i * 131 + (i >> 9));
	snprintf(path, sizeof path, "%s/f", tmp);
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		char a[65], b[65];
		int64_t size = -1;
		CHECK_EQ_INT(fs_write_file_atomic(path, buf, sizes[k], &err), DD_OK);
		bundle_sha256(buf, sizes[k], a);
		CHECK_EQ_INT(bundle_sha256_file(path, b, &size, &err), DD_OK);
		CHECK_STR(a, b);
		CHECK(size == (int64_t)sizes[k]);
	}
	free(buf);
	char hex[65];
	snprintf(path, sizeof path, "%s/none", tmp);
	CHECK_EQ_INT(bundle_sha256_file(path, hex, NULL, &err), DD_ENOENT);
	CHECK_EQ_INT(bundle_sha256_file(tmp, hex, NULL, &err), DD_EINVAL); /* a folder */
	snprintf(path, sizeof path, "%s/link", tmp);
	CHECK(symlink("/etc/passwd", path) == 0);
	CHECK_EQ_INT(bundle_sha256_file(path, hex, NULL, &err), DD_EINVAL); /* a link is not followed */
	CHECK_CONTAINS(err.msg, "link");
	unlink(path);
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX + 64];
	struct dd_err err = { 0 };
	snprintf(path, sizeof path, "%s/%s", dir, name);
	CHECK_EQ_INT(fs_write_file_atomic(path, text, strlen(text), &err), DD_OK);
}

/* A manifest with network.prototxt, weights.safetensors and labels.txt listed. */
static cJSON *manifest(const char *dir)
{
	static const char *const names[] = { "network.prototxt", "weights.safetensors", "labels.txt" };
	struct dd_err err = { 0 };
	cJSON *m = cJSON_CreateObject();
	for (int i = 0; i < 3; i++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		CHECK_EQ_INT(bundle_manifest_add_file(m, names[i], path, &err), DD_OK);
	}
	return m;
}

static void test_verify(void)
{
	char dir[PATH_MAX + 8];
	struct dd_err err = { 0 };
	snprintf(dir, sizeof dir, "%s/b", tmp);
	CHECK_EQ_INT(fs_mkdir_p(dir, &err), DD_OK);
	put(dir, "network.prototxt", "name: \"n\"\n");
	put(dir, "weights.safetensors", "0123456789");
	put(dir, "labels.txt", "a\nb\n");
	cJSON *m = manifest(dir);
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_OK);
	/* the entry's shape */
	const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "files"), "weights.safetensors");
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(w, "size")) == 10);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(w, "sha256")),
		  "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882");

	/* same size, other bytes */
	put(dir, "weights.safetensors", "0123456780");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "weights.safetensors: sha256");
	/* another size */
	put(dir, "weights.safetensors", "012345678");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "weights.safetensors: 9 bytes, info.json says 10");
	put(dir, "weights.safetensors", "0123456789");
	/* a file added that the manifest does not list */
	put(dir, "mean.png", "png");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "mean.png is in the bundle but not in info.json's files");
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/mean.png", dir);
	unlink(path);
	/* a listed file missing */
	snprintf(path, sizeof path, "%s/labels.txt", dir);
	unlink(path);
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "labels.txt: named in info.json but missing");
	/* a listed file that is a link */
	CHECK(symlink("network.prototxt", path) == 0);
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "labels.txt");
	unlink(path);
	put(dir, "labels.txt", "a\nb\n");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_OK);
	/* a name that is not a bundle file, one climbing out, no weights listed, no files */
	cJSON *files = cJSON_GetObjectItem(m, "files");
	cJSON_AddItemToObject(files, "../etc/passwd", cJSON_Duplicate(w, 1));
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "\"../etc/passwd\", which is not a bundle file");
	cJSON_DeleteItemFromObject(files, "../etc/passwd");
	cJSON_DeleteItemFromObject(files, "weights.safetensors");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "files lacks weights.safetensors");
	cJSON_DeleteItemFromObject(m, "files");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "info.json has no \"files\"");
	/* a malformed entry */
	cJSON_Delete(m);
	m = cJSON_Parse("{\"files\":{\"network.prototxt\":{\"size\":\"10\",\"sha256\":\"x\"}}}");
	CHECK_EQ_INT(bundle_verify(dir, m, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "files.network.prototxt needs a size and a 64-digit sha256");
	cJSON_Delete(m);
	CHECK(bundle_name_ok("info.json") && bundle_name_ok("mean.png") && !bundle_name_ok("x/mean.png") &&
	      !bundle_name_ok(""));
}

int main(void)
{
	struct dd_err err = { 0 };
	snprintf(tmp, sizeof tmp, "/tmp/dd_test_bundle_%d", (int)getpid());
	if (fs_mkdir_p(tmp, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	RUN(test_vectors);
	RUN(test_file_pieces);
	RUN(test_verify);
	fs_rm_rf(tmp, &err);
	return check_summary();
}
