/* test_interop.c — deepdesk's LMDB and protobuf code against an independent
 * implementation: Python's py-lmdb and google.protobuf (Debian's /usr/bin/python3;
 * the message classes are built in tests/interop/caffe_pb2_min.py from caffe.proto's
 * field list, not from our code).
 *
 *  (i)  C writes an LMDB and a mean.binaryproto; tests/interop/read_lmdb.py reads
 *       them and prints JSON, which must match what C wrote — keys, labels, shapes,
 *       encoded flags, a SHA-256 of all data bytes — and protobuf's own
 *       re-serialisation of every record must give back our exact bytes.
 *  (ii) tests/interop/write_lmdb.py writes an LMDB as DIGITS' create_db.py does
 *       (raw CHW BGR, grayscale, PNG-encoded; its own map growth; no index.bin)
 *       and a mean.binaryproto as _save_means does; C reads them back and checks
 *       every label, shape and pixel (PNGs decoded with libpng) against the
 *       formula the script draws with.
 * Where /usr/bin/python3 lacks lmdb, protobuf, PIL or numpy (python3-lmdb,
 * python3-protobuf, python3-pil, python3-numpy, which `make test` installs), a test is
 * a counted skip with the reason, or a failure where CI is set (check_need). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <unistd.h>

#include <sodium.h>

#include "../../common/fsutil.h"
#include "../../datasets/lmdbio.h"
#include "check.h"

/* Debian's interpreter: the first python3 on PATH may be another without lmdb */
#ifndef PYTHON
#define PYTHON "/usr/bin/python3"
#endif

static char root[64];
static char scripts[PATH_MAX]; /* the tests/interop folder */

/* --- SHA-256 (libsodium's), to compare with Python's hashlib -------------------- */

static void sha_hex(crypto_hash_sha256_state *s, char out[65])
{
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(s, digest);
	sodium_bin2hex(out, 65, digest, sizeof digest);
}

/* --- helpers ------------------------------------------------------------------ */

/* Whether PYTHON imports modules; if not, why says so, naming Debian's packages. */
static int python_has(const char *modules, const char *packages, char *why, size_t cap)
{
	char cmd[256];
	if (access(PYTHON, X_OK) != 0) {
		snprintf(why, cap, "%s is not installed", PYTHON);
		return 0;
	}
	snprintf(cmd, sizeof cmd, PYTHON " -c 'import %s' >/dev/null 2>&1", modules);
	if (system(cmd) != 0) {
		snprintf(why, cap, "%s cannot import %s (Debian's %s)", PYTHON, modules, packages);
		return 0;
	}
	return 1;
}

/* Run a command and return its whole stdout (caller frees), NULL if it failed. */
static char *run_capture(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += got;
		if (cap - len < 2) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int status = pclose(f);
	if (!buf)
		return NULL;
	buf[len] = '\0';
	if (status != 0) {
		fprintf(stderr, "  `%s` exited with status %d; it printed: %.500s\n", cmd, status, buf);
		free(buf);
		return NULL;
	}
	return buf;
}

static int find_scripts(void)
{
	char exe[PATH_MAX];
	if (access("tests/interop/read_lmdb.py", R_OK) == 0 && realpath("tests/interop", scripts))
		return 1;
	/* not run from the repository root: build/tests/test_interop is two levels down */
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	strcpy(slash, "/../../tests/interop");
	return realpath(exe, scripts) != NULL;
}

/* --- (i) C writes, Python reads ------------------------------------------------ */

#define N_C 250

/* Record i as C writes it: label i % 4; most raw 3x8x6 CHW bytes, every third an
 * "encoded" blob of odd length, every tenth with float_data as well. */
static void c_record(int i, uint8_t *px, struct datum *d, float *fl)
{
	int encoded = i % 3 == 1;
	size_t n = encoded ? 50 + (size_t)(i % 17) : 3 * 8 * 6;
	for (size_t k = 0; k < n; k++)
		px[k] = (uint8_t)(i * 11 + (int)k * 7);
	*d = (struct datum){ .channels = 3, .height = 8, .width = 6, .label = i % 4, .encoded = encoded,
			     .data = px, .data_len = n };
	if (i % 10 == 0) {
		fl[0] = (float)i;
		fl[1] = -0.5f;
		d->float_data = fl;
		d->n_float = 2;
	}
}

static void test_c_writes_python_reads(void)
{
	char why[256], dir[128], mean_path[160], cmd[PATH_MAX + 400];
	if (!python_has("lmdb, google.protobuf", "python3-lmdb, python3-protobuf", why, sizeof why)) {
		check_need("C writes, Python reads (LMDB and protobuf against py-lmdb and google.protobuf)", why);
		return;
	}
	struct lmdbw *w;
	struct dd_err err;
	crypto_hash_sha256_state sha;
	char want_sha[65];
	snprintf(dir, sizeof dir, "%s/c_db", root);
	/* a tiny map and batch so that map growth happens here too */
	CHECK_EQ_INT(lmdbw_open_sized(dir, 50, 64 << 10, &w, &err), DD_OK);
	crypto_hash_sha256_init(&sha);
	for (int i = 0; i < N_C; i++) {
		uint8_t px[256];
		float fl[2];
		struct datum d;
		uint8_t *v;
		size_t len;
		c_record(i, px, &d, fl);
		crypto_hash_sha256_update(&sha, d.data, d.data_len);
		CHECK_EQ_INT(datum_encode(&d, &v, &len, &err), DD_OK);
		CHECK_EQ_INT(lmdbw_put(w, d.label, v, len, &err), DD_OK);
		free(v);
	}
	sha_hex(&sha, want_sha);
	CHECK_EQ_INT(lmdbw_close(w, &err), DD_OK);

	/* the mean, as DIGITS writes it: 1x3x8x6, CHW */
	float mean[3 * 8 * 6];
	for (int k = 0; k < 3 * 8 * 6; k++)
		mean[k] = (float)((k * 37) % 256);
	struct blob b = { .num = 1, .channels = 3, .height = 8, .width = 6, .data = mean, .count = 3 * 8 * 6 };
	uint8_t *mbuf;
	size_t mlen;
	CHECK_EQ_INT(blob_encode(&b, &mbuf, &mlen, &err), DD_OK);
	snprintf(mean_path, sizeof mean_path, "%s/mean.binaryproto", root);
	CHECK_EQ_INT(fs_write_file_atomic(mean_path, mbuf, mlen, &err), DD_OK);
	free(mbuf);
	crypto_hash_sha256_state msha;
	char want_msha[65];
	crypto_hash_sha256_init(&msha);
	for (int k = 0; k < 3 * 8 * 6; k++) {
		uint32_t u;
		uint8_t le[4];
		memcpy(&u, &mean[k], 4);
		for (int j = 0; j < 4; j++)
			le[j] = (uint8_t)(u >> (8 * j));
		crypto_hash_sha256_update(&msha, le, 4);
	}
	sha_hex(&msha, want_msha);

	snprintf(cmd, sizeof cmd, PYTHON " '%s/read_lmdb.py' '%s' '%s'", scripts, dir, mean_path);
	char *out = run_capture(cmd);
	CHECK(out != NULL);
	cJSON *j = out ? cJSON_Parse(out) : NULL;
	CHECK(j != NULL);
	if (!j) {
		free(out);
		return;
	}
	CHECK_EQ_INT(cJSON_GetObjectItem(j, "count")->valuedouble, N_C);
	cJSON *keys = cJSON_GetObjectItem(j, "keys_sorted"), *labels = cJSON_GetObjectItem(j, "labels");
	cJSON *shapes = cJSON_GetObjectItem(j, "shapes"), *enc = cJSON_GetObjectItem(j, "encoded");
	cJSON *nf = cJSON_GetObjectItem(j, "n_float");
	CHECK_EQ_INT(cJSON_GetArraySize(keys), N_C);
	int bad = 0;
	for (int i = 0; i < N_C && cJSON_GetArraySize(keys) == N_C; i++) {
		uint8_t px[256];
		float fl[2];
		struct datum d;
		char key[32];
		c_record(i, px, &d, fl);
		snprintf(key, sizeof key, "%08d_%d", i, d.label);
		cJSON *shape = cJSON_GetArrayItem(shapes, i);
		if (strcmp(cJSON_GetArrayItem(keys, i)->valuestring, key) != 0 ||
		    cJSON_GetArrayItem(labels, i)->valueint != d.label ||
		    cJSON_GetArrayItem(shape, 0)->valueint != 3 || cJSON_GetArrayItem(shape, 1)->valueint != 8 ||
		    cJSON_GetArrayItem(shape, 2)->valueint != 6 ||
		    cJSON_IsTrue(cJSON_GetArrayItem(enc, i)) != d.encoded ||
		    cJSON_GetArrayItem(nf, i)->valueint != (int)d.n_float) {
			if (!bad++)
				fprintf(stderr, "  record %d: Python saw something else than C wrote\n", i);
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_STR(cJSON_GetObjectItem(j, "data_sha256")->valuestring, want_sha);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "reserialized_identical")));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "key_label_agrees")));

	cJSON *m = cJSON_GetObjectItem(j, "mean");
	CHECK(m != NULL);
	if (m) {
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "num")->valueint, 1);
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "channels")->valueint, 3);
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "height")->valueint, 8);
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "width")->valueint, 6);
		CHECK(cJSON_IsFalse(cJSON_GetObjectItem(m, "has_shape")));
		CHECK_EQ_INT(cJSON_GetObjectItem(m, "count")->valueint, 3 * 8 * 6);
		CHECK_STR(cJSON_GetObjectItem(m, "sha256")->valuestring, want_msha);
		CHECK(cJSON_IsTrue(cJSON_GetObjectItem(m, "reserialized_identical")));
	}
	cJSON_Delete(j);
	free(out);
}

/* --- (ii) Python writes as DIGITS does, C reads ------------------------------- */

#define N_PY 300
#define PY_H 12
#define PY_W 10

/* The script's pixel formula: RGB, HWC. */
static uint8_t py_pixel(int i, int y, int x, int c)
{
	return (uint8_t)((i * 7 + y * 13 + x * 3 + c * 50) % 256);
}

static int check_py_record(int i, const struct datum *d, char *why, size_t cap)
{
	int gray = i % 4 == 3, encoded = !gray && i % 2 == 1;
	if (d->channels != (gray ? 1 : 3) || d->height != PY_H || d->width != PY_W || d->label != i % 5 ||
	    d->encoded != encoded) {
		snprintf(why, cap, "fields %dx%dx%d label %d encoded %d", d->channels, d->height, d->width, d->label,
			 d->encoded);
		return 0;
	}
	if (!encoded) {
		/* raw: CHW, planes B, G, R for colour (create_db.py swaps RGB -> BGR) */
		if (d->data_len != (size_t)(d->channels * PY_H * PY_W)) {
			snprintf(why, cap, "raw data of %zu bytes", d->data_len);
			return 0;
		}
		for (int c = 0; c < d->channels; c++)
			for (int y = 0; y < PY_H; y++)
				for (int x = 0; x < PY_W; x++) {
					int src_c = gray ? 0 : 2 - c;
					if (d->data[(c * PY_H + y) * PY_W + x] != py_pixel(i, y, x, src_c)) {
						snprintf(why, cap, "raw pixel c%d y%d x%d", c, y, x);
						return 0;
					}
				}
		return 1;
	}
	/* encoded: a PNG file of the RGB image, HWC */
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&img, d->data, d->data_len)) {
		snprintf(why, cap, "not a PNG: %s", img.message);
		return 0;
	}
	img.format = PNG_FORMAT_RGB;
	uint8_t *px = malloc(PNG_IMAGE_SIZE(img));
	int ok = px && png_image_finish_read(&img, NULL, px, 0, NULL) && img.width == PY_W && img.height == PY_H;
	for (int y = 0; ok && y < PY_H; y++)
		for (int x = 0; ok && x < PY_W; x++)
			for (int c = 0; ok && c < 3; c++)
				ok = px[(y * PY_W + x) * 3 + c] == py_pixel(i, y, x, c);
	if (!ok)
		snprintf(why, cap, "PNG pixels differ (%s)", img.message);
	png_image_free(&img);
	free(px);
	return ok;
}

static void test_python_writes_c_reads(void)
{
	char why[256], dir[128], cmd[PATH_MAX + 400], mean_path[200];
	if (!python_has("lmdb, google.protobuf, numpy, PIL",
			"python3-lmdb, python3-protobuf, python3-numpy, python3-pil", why, sizeof why)) {
		check_need("Python writes, C reads (LMDB and protobuf against py-lmdb and google.protobuf)", why);
		return;
	}
	snprintf(dir, sizeof dir, "%s/py_db", root);
	snprintf(cmd, sizeof cmd, PYTHON " '%s/write_lmdb.py' '%s' %d", scripts, dir, N_PY);
	char *out = run_capture(cmd);
	CHECK(out != NULL);
	free(out);

	struct lmdbr *r;
	struct dd_err err;
	char index_path[160];
	snprintf(index_path, sizeof index_path, "%s/index.bin", dir);
	CHECK(access(index_path, F_OK) != 0); /* a foreign LMDB: the reader indexes it itself */
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	if (!r) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	CHECK_EQ_INT(lmdbr_count(r), N_PY);
	CHECK_EQ_INT(lmdbr_n_labels(r), 5);
	for (int l = 0; l < 5; l++)
		CHECK_EQ_INT(lmdbr_label_count(r, l), N_PY / 5);
	int bad = 0;
	int64_t cursor = 0;
	const uint8_t *v;
	size_t len;
	int label;
	while (lmdbr_next(r, &cursor, &v, &len, &label, &err) == DD_OK) {
		int i = (int)cursor - 1;
		struct datum d;
		if (label != i % 5 || datum_decode(v, len, &d, &err) != DD_OK) {
			if (!bad++)
				fprintf(stderr, "  record %d: label %d (%s)\n", i, label, err.msg);
			continue;
		}
		if (!check_py_record(i, &d, why, sizeof why) && !bad++)
			fprintf(stderr, "  record %d: %s\n", i, why);
		datum_free(&d);
	}
	CHECK_EQ_INT(cursor, N_PY);
	CHECK_EQ_INT(bad, 0);
	/* and per label, at random */
	int64_t index;
	CHECK_EQ_INT(lmdbr_get_in_label(r, 3, 7, &index, &v, &len, &err), DD_OK);
	CHECK_EQ_INT(index, 7 * 5 + 3);
	lmdbr_close(r);

	/* mean.binaryproto: np.around(sum / n) as uint8, CHW with BGR planes */
	char *text = NULL;
	size_t tlen = 0;
	struct blob b;
	snprintf(mean_path, sizeof mean_path, "%s.mean.binaryproto", dir);
	CHECK_EQ_INT(fs_read_file(mean_path, 1 << 20, &text, &tlen, &err), DD_OK);
	CHECK_EQ_INT(blob_decode((const uint8_t *)text, tlen, &b, &err), DD_OK);
	CHECK(b.num == 1 && b.channels == 3 && b.height == PY_H && b.width == PY_W);
	int mean_bad = 0;
	for (int c = 0; c < 3 && b.data; c++)
		for (int y = 0; y < PY_H; y++)
			for (int x = 0; x < PY_W; x++) {
				double sum = 0;
				for (int i = 0; i < N_PY; i++)
					sum += py_pixel(i, y, x, i % 4 == 3 ? 0 : 2 - c);
				double want = nearbyint(sum / N_PY); /* numpy rounds halves to even, as does FE_TONEAREST */
				mean_bad += b.data[(c * PY_H + y) * PY_W + x] != (float)want;
			}
	CHECK_EQ_INT(mean_bad, 0);
	blob_free(&b);
	free(text);
}

int main(void)
{
	if (!check_tmpdir(root, sizeof root)) {
		perror("mkdtemp");
		return 1;
	}
	if (!find_scripts()) {
		fs_rm_rf(root, NULL);
		return check_cannot_start("cannot find tests/interop/read_lmdb.py: run from the repository root");
	}
	RUN(test_c_writes_python_reads);
	RUN(test_python_writes_c_reads);
	fs_rm_rf(root, NULL);
	return check_summary();
}
