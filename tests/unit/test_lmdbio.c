/* test_lmdbio.c — the LMDB writer and reader: 2500 records through a map that
 * starts at 1 MiB and must grow, reopened and read back byte for byte, in order,
 * at random and per label; a missing or damaged index.bin rebuilt from the keys;
 * LMDBs written by others (Caffe's "%08d_<file>" keys, arbitrary keys); abort;
 * refusals with messages; and the throughput of 70,000 small records. */
#define _GNU_SOURCE
#include <lmdb.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/lmdbio.h"
#include "check.h"

static char root[64];

#define N_BIG 2500
#define N_LABELS 3

static uint64_t rng_state = 12345;
static uint32_t rnd(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

/* Record i of the big set: an uneven split over 3 labels, values of 2-6 KiB (a
 * Datum around pseudo-random pixels), so that 2500 of them need ~10 MiB. */
static int big_label(int i)
{
	return i % 7 == 0 ? 2 : (i % 2);
}

static uint8_t *big_value(int i, size_t *len)
{
	size_t n = 2048 + (size_t)((i * 2654435761u) % 4096);
	uint8_t *px = malloc(n);
	for (size_t k = 0; k < n; k++)
		px[k] = (uint8_t)((k * 131 + (size_t)i * 7) ^ (k >> 3));
	struct datum d = { .channels = 1, .height = 1, .width = (int)n, .label = big_label(i), .data = px,
			   .data_len = n };
	uint8_t *out = NULL;
	datum_encode(&d, &out, len, NULL);
	free(px);
	return out;
}

static void path_in(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", root, name);
}

static void test_write_2500_with_map_growth(void)
{
	char dir[128], file[160];
	struct lmdbw *w;
	struct dd_err err;
	path_in(dir, sizeof dir, "big");
	CHECK_EQ_INT(lmdbw_open_sized(dir, 100, 1 << 20, &w, &err), DD_OK);
	for (int i = 0; i < N_BIG; i++) {
		size_t len;
		uint8_t *v = big_value(i, &len);
		int rc = lmdbw_put(w, big_label(i), v, len, &err);
		free(v);
		if (rc != DD_OK) {
			fprintf(stderr, "  put %d: %s\n", i, err.msg);
			CHECK_EQ_INT(rc, DD_OK);
			break;
		}
	}
	CHECK_EQ_INT(lmdbw_count(w), N_BIG);
	CHECK_EQ_INT(lmdbw_close(w, &err), DD_OK);
	/* the data outgrew the 1 MiB map several times over */
	struct stat st;
	snprintf(file, sizeof file, "%s/data.mdb", dir);
	CHECK(stat(file, &st) == 0 && st.st_size > 8 * (1 << 20));
	snprintf(file, sizeof file, "%s/index.bin", dir);
	CHECK(stat(file, &st) == 0 && st.st_size == 24 + 4 * N_BIG + 8);
	/* opening it again for writing is refused */
	CHECK_EQ_INT(lmdbw_open(dir, 0, &w, &err), DD_EEXIST);
	CHECK_CONTAINS(err.msg, "already holds an LMDB environment");
	CHECK(w == NULL);
}

/* Everything a reader of the big set must see, whichever way it built its index. */
static void check_big_reader(const char *dir)
{
	struct lmdbr *r;
	struct dd_err err;
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	if (!r) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	int64_t per[N_LABELS] = { 0 };
	for (int i = 0; i < N_BIG; i++)
		per[big_label(i)]++;
	CHECK_EQ_INT(lmdbr_count(r), N_BIG);
	CHECK_EQ_INT(lmdbr_n_labels(r), N_LABELS);
	for (int l = 0; l < N_LABELS; l++)
		CHECK_EQ_INT(lmdbr_label_count(r, l), per[l]);
	CHECK_EQ_INT(lmdbr_label_count(r, 3), 0);
	CHECK_EQ_INT(lmdbr_label_count(r, -1), 0);

	/* get(i) in a scrambled order: exact bytes and label */
	int bad = 0;
	for (int n = 0; n < N_BIG; n++) {
		int i = (int)(((uint64_t)n * 1543) % N_BIG); /* 1543 is prime to 2500 */
		const uint8_t *v;
		size_t len, want_len;
		int label = -1;
		uint8_t *want = big_value(i, &want_len);
		if (lmdbr_get(r, i, &v, &len, &label, &err) != DD_OK || len != want_len ||
		    memcmp(v, want, len) != 0 || label != big_label(i)) {
			if (!bad++)
				fprintf(stderr, "  record %d differs (%s)\n", i, err.msg);
		}
		free(want);
	}
	CHECK_EQ_INT(bad, 0);

	/* get_in_label: the k-th record of each label, in index order */
	for (int l = 0; l < N_LABELS; l++) {
		int64_t k = 0;
		for (int i = 0; i < N_BIG; i++) {
			if (big_label(i) != l)
				continue;
			int64_t index = -1;
			const uint8_t *v;
			size_t len;
			struct datum d;
			if (lmdbr_get_in_label(r, l, k, &index, &v, &len, &err) != DD_OK || index != i ||
			    datum_decode(v, len, &d, &err) != DD_OK || d.label != l) {
				if (!bad++)
					fprintf(stderr, "  label %d record %lld: got index %lld (%s)\n", l, (long long)k,
						(long long)index, err.msg);
			}
			k++;
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(lmdbr_get_in_label(r, 0, per[0], NULL, NULL, NULL, &err), DD_ENOENT);
	CHECK_CONTAINS(err.msg, "in label 0");
	CHECK_EQ_INT(lmdbr_get_in_label(r, 7, 0, NULL, NULL, NULL, &err), DD_ENOENT);

	/* next() walks everything in order and stops with DD_ENOENT */
	int64_t cursor = 0, seen = 0;
	const uint8_t *v;
	size_t len;
	int label;
	int rc;
	while ((rc = lmdbr_next(r, &cursor, &v, &len, &label, &err)) == DD_OK) {
		size_t want_len;
		uint8_t *want = big_value((int)seen, &want_len);
		if (len != want_len || memcmp(v, want, len) != 0 || label != big_label((int)seen))
			bad++;
		free(want);
		seen++;
	}
	CHECK_EQ_INT(rc, DD_ENOENT);
	CHECK_EQ_INT(seen, N_BIG);
	CHECK_EQ_INT(cursor, N_BIG);
	CHECK_EQ_INT(bad, 0);

	CHECK_EQ_INT(lmdbr_get(r, -1, &v, &len, &label, &err), DD_ENOENT);
	CHECK_EQ_INT(lmdbr_get(r, N_BIG, &v, &len, &label, &err), DD_ENOENT);
	CHECK_CONTAINS(err.msg, "no record 2500 (it holds 2500)");
	lmdbr_close(r);
}

static void test_reopen_reads_everything(void)
{
	char dir[128];
	path_in(dir, sizeof dir, "big");
	check_big_reader(dir);
}

static void test_missing_or_damaged_index_is_rebuilt(void)
{
	char dir[128], file[160];
	char *text = NULL;
	size_t len = 0;
	path_in(dir, sizeof dir, "big");
	snprintf(file, sizeof file, "%s/index.bin", dir);
	CHECK_EQ_INT(fs_read_file(file, 1 << 20, &text, &len, NULL), DD_OK);
	CHECK(text && memcmp(text, "DDLMDBIX", 8) == 0);

	CHECK(unlink(file) == 0);
	check_big_reader(dir); /* labels from the "_<label>" key suffixes */

	/* a flipped label: the checksum no longer matches, so the keys win */
	text[24 + 4 * 10] ^= 1;
	CHECK_EQ_INT(fs_write_file_atomic(file, text, len, NULL), DD_OK);
	check_big_reader(dir);
	/* a truncated file */
	CHECK_EQ_INT(fs_write_file_atomic(file, text, len / 2, NULL), DD_OK);
	check_big_reader(dir);
	/* a file of the wrong length */
	text[24 + 4 * 10] ^= 1;
	CHECK_EQ_INT(fs_write_file_atomic(file, text, len - 4, NULL), DD_OK);
	check_big_reader(dir);

	/* a valid index is believed: one whose record 1 says label 2 (the key says 1)
	 * shows up in the per-label counts, which proves the reader used it */
	CHECK_EQ_INT((unsigned char)text[24 + 4], 1);
	text[24 + 4] = 2;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len - 8; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3ull;
	}
	for (int i = 0; i < 8; i++)
		text[len - 8 + i] = (char)(h >> (8 * i));
	CHECK_EQ_INT(fs_write_file_atomic(file, text, len, NULL), DD_OK);
	struct lmdbr *r;
	struct dd_err err;
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	int64_t twos = 0;
	for (int i = 0; i < N_BIG; i++)
		twos += big_label(i) == 2;
	CHECK_EQ_INT(lmdbr_label_count(r, 2), twos + 1);
	lmdbr_close(r);

	CHECK(unlink(file) == 0);
	free(text);
}

/* Write an LMDB with the plain LMDB API, as another program would. */
static void write_foreign(const char *dir, int n, int (*make_key)(int i, char *key, size_t cap), int with_datum)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	fs_mkdir_p(dir, NULL);
	CHECK_EQ_INT(mdb_env_create(&env), 0);
	CHECK_EQ_INT(mdb_env_set_mapsize(env, 16 << 20), 0);
	CHECK_EQ_INT(mdb_env_open(env, dir, 0, 0644), 0);
	CHECK_EQ_INT(mdb_txn_begin(env, NULL, 0, &txn), 0);
	CHECK_EQ_INT(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	for (int i = 0; i < n; i++) {
		char key[64];
		uint8_t px[4] = { (uint8_t)i, 1, 2, 3 };
		struct datum d = { .channels = 1, .height = 2, .width = 2, .label = i % 4, .data = px, .data_len = 4 };
		uint8_t *val = NULL;
		size_t vlen = 0;
		if (with_datum)
			datum_encode(&d, &val, &vlen, NULL);
		MDB_val k = { (size_t)make_key(i, key, sizeof key), key };
		MDB_val v = { with_datum ? vlen : 3, with_datum ? (void *)val : (void *)"xyz" };
		CHECK_EQ_INT(mdb_put(txn, dbi, &k, &v, 0), 0);
		free(val);
	}
	CHECK_EQ_INT(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static int caffe_key(int i, char *key, size_t cap)
{
	return snprintf(key, cap, "%08d_class%d/img_%d.JPEG", i, i % 4, i);
}

/* Not numbered: "img-000" .. "img-049", written in a scrambled order. */
static int odd_key(int i, char *key, size_t cap)
{
	return snprintf(key, cap, "img-%03d", (i * 37) % 50);
}

static void test_foreign_keys(void)
{
	char dir[128];
	struct lmdbr *r;
	struct dd_err err;
	const uint8_t *v;
	size_t len;
	int label;
	struct datum d;

	/* convert_imageset's "%08d_<file>": index from the key, label from the Datum */
	path_in(dir, sizeof dir, "caffe");
	write_foreign(dir, 40, caffe_key, 1);
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	CHECK_EQ_INT(lmdbr_count(r), 40);
	CHECK_EQ_INT(lmdbr_n_labels(r), 4);
	CHECK_EQ_INT(lmdbr_label_count(r, 3), 10);
	CHECK_EQ_INT(lmdbr_get(r, 37, &v, &len, &label, &err), DD_OK);
	CHECK_EQ_INT(label, 1);
	CHECK(datum_decode(v, len, &d, &err) == DD_OK && d.data_len == 4 && d.data[0] == 37);
	int64_t index;
	CHECK_EQ_INT(lmdbr_get_in_label(r, 2, 3, &index, &v, &len, &err), DD_OK);
	CHECK_EQ_INT(index, 14);
	lmdbr_close(r);

	/* arbitrary keys: record i is the i-th key in order ("img-000" .. "img-049") */
	path_in(dir, sizeof dir, "odd");
	write_foreign(dir, 50, odd_key, 1);
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	CHECK_EQ_INT(lmdbr_count(r), 50);
	int bad = 0;
	for (int n = 0; n < 50; n++) {
		int i = (n * 13) % 50;
		/* key "img-%03d" with number i was written by the j with (j*37)%50 == i */
		int j = 0;
		while ((j * 37) % 50 != i)
			j++;
		if (lmdbr_get(r, i, &v, &len, &label, &err) != DD_OK || datum_decode(v, len, &d, &err) != DD_OK ||
		    d.data[0] != j || label != j % 4)
			bad++;
	}
	CHECK_EQ_INT(bad, 0);
	int64_t cursor = 0;
	while (lmdbr_next(r, &cursor, &v, &len, &label, &err) == DD_OK)
		;
	CHECK_EQ_INT(cursor, 50);
	lmdbr_close(r);

	/* keys with no label and values that are not Datums: refused, naming the key */
	path_in(dir, sizeof dir, "notdatum");
	write_foreign(dir, 3, odd_key, 0);
	r = NULL;
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_EINVAL);
	CHECK(r == NULL);
	CHECK_CONTAINS(err.msg, "(key img-000) has no label in its key and is not a Datum");
}

static void test_abort_removes_the_folder(void)
{
	char dir[128];
	struct lmdbw *w;
	struct dd_err err;
	struct stat st;
	path_in(dir, sizeof dir, "aborted");
	CHECK_EQ_INT(lmdbw_open(dir, 10, &w, &err), DD_OK);
	for (int i = 0; i < 25; i++)
		CHECK_EQ_INT(lmdbw_put(w, i % 2, (const uint8_t *)"value", 5, &err), DD_OK);
	lmdbw_abort(w);
	CHECK(stat(dir, &st) != 0);
	lmdbw_abort(NULL);
	CHECK_EQ_INT(lmdbw_close(NULL, &err), DD_OK);
}

static void test_refusals(void)
{
	char dir[128], file[160];
	struct lmdbr *r = (struct lmdbr *)1;
	struct lmdbw *w;
	struct dd_err err;

	path_in(dir, sizeof dir, "no-such-folder");
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_ENOENT);
	CHECK(r == NULL);
	CHECK_CONTAINS(err.msg, "no-such-folder");

	path_in(dir, sizeof dir, "plain");
	fs_mkdir_p(dir, NULL);
	snprintf(file, sizeof file, "%s/notes.txt", dir);
	fs_write_file_atomic(file, "hello", 5, NULL);
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "is not an LMDB environment (it has no data.mdb)");
	snprintf(file, sizeof file, "%s/lock.mdb", dir);
	struct stat st;
	CHECK(stat(file, &st) != 0); /* nothing was left behind */

	CHECK_EQ_INT(lmdbr_open(file, &r, &err), DD_ENOENT);
	snprintf(file, sizeof file, "%s/notes.txt", dir);
	CHECK_EQ_INT(lmdbr_open(file, &r, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "is not a folder");

	char junk[8192];
	memset(junk, 'x', sizeof junk);
	snprintf(file, sizeof file, "%s/data.mdb", dir);
	fs_write_file_atomic(file, junk, sizeof junk, NULL);
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "data.mdb is not an LMDB file");

	path_in(dir, sizeof dir, "refuse-w");
	CHECK_EQ_INT(lmdbw_open(dir, -1, &w, &err), DD_EINVAL);
	CHECK_EQ_INT(lmdbw_open(dir, 0, &w, &err), DD_OK);
	CHECK_EQ_INT(lmdbw_put(w, -1, (const uint8_t *)"x", 1, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "label -1");
	CHECK_EQ_INT(lmdbw_count(w), 0);
	CHECK_EQ_INT(lmdbw_close(w, &err), DD_OK);

	/* an empty environment reads as empty */
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	CHECK_EQ_INT(lmdbr_count(r), 0);
	CHECK_EQ_INT(lmdbr_n_labels(r), 0);
	int64_t cursor = 0;
	CHECK_EQ_INT(lmdbr_next(r, &cursor, NULL, NULL, NULL, &err), DD_ENOENT);
	CHECK_EQ_INT(lmdbr_get(r, 0, NULL, NULL, NULL, &err), DD_ENOENT);
	lmdbr_close(r);
	lmdbr_close(NULL);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 70,000 records of ~300 bytes (a 28x28 PNG-encoded Datum, as MNIST in DIGITS):
 * prints write, sequential-read and random-read rates; checks only correctness. */
static void test_throughput_70k(void)
{
	enum { N = 70000 };
	char dir[128];
	struct lmdbw *w;
	struct lmdbr *r;
	struct dd_err err;
	uint8_t png[310];
	for (size_t k = 0; k < sizeof png; k++)
		png[k] = (uint8_t)(k * 17);
	path_in(dir, sizeof dir, "mnist");
	double t0 = now_s();
	CHECK_EQ_INT(lmdbw_open(dir, 0, &w, &err), DD_OK);
	size_t total = 0;
	for (int i = 0; i < N; i++) {
		png[0] = (uint8_t)i;
		struct datum d = { .channels = 1, .height = 28, .width = 28, .label = i % 10, .encoded = 1,
				   .data = png, .data_len = sizeof png - (size_t)(i % 40) };
		uint8_t *v;
		size_t len;
		datum_encode(&d, &v, &len, NULL);
		total += len;
		if (lmdbw_put(w, i % 10, v, len, &err) != DD_OK) {
			CHECK(0);
			free(v);
			break;
		}
		free(v);
	}
	CHECK_EQ_INT(lmdbw_close(w, &err), DD_OK);
	double t1 = now_s();
	CHECK_EQ_INT(lmdbr_open(dir, &r, &err), DD_OK);
	double t2 = now_s();
	int64_t cursor = 0, bad = 0;
	const uint8_t *v;
	size_t len;
	int label;
	while (lmdbr_next(r, &cursor, &v, &len, &label, &err) == DD_OK)
		bad += label != (int)((cursor - 1) % 10) || v[9] != (uint8_t)((cursor - 1) % 256);
	double t3 = now_s();
	for (int n = 0; n < N; n++) {
		int64_t i = (int64_t)(rnd() % N);
		if (lmdbr_get(r, i, &v, &len, &label, &err) != DD_OK || label != (int)(i % 10) ||
		    v[9] != (uint8_t)i) /* the first pixel byte follows 9 bytes of fields */
			bad++;
	}
	double t4 = now_s();
	CHECK_EQ_INT(cursor, N);
	CHECK_EQ_INT(bad, 0);
	lmdbr_close(r);
	printf("     70000 records, %.0f bytes average: write %.0f rec/s, open %.1f ms, "
	       "sequential read %.0f rec/s, random read %.0f rec/s\n",
	       (double)total / N, N / (t1 - t0), (t2 - t1) * 1e3, N / (t3 - t2), N / (t4 - t3));
}

int main(void)
{
	if (!check_tmpdir(root, sizeof root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_write_2500_with_map_growth);
	RUN(test_reopen_reads_everything);
	RUN(test_missing_or_damaged_index_is_rebuilt);
	RUN(test_foreign_keys);
	RUN(test_abort_removes_the_folder);
	RUN(test_refusals);
	RUN(test_throughput_70k);
	fs_rm_rf(root, NULL);
	return check_summary();
}
