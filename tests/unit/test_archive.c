/* test_archive.c — unpacking uploads: a good archive, and every hostile case
 * refused with nothing written outside the destination. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../datasets/archive.h"
#include "fixture.h"

static char dir[64];

enum { F_FILE, F_DIR, F_SYMLINK, F_HARDLINK, F_DEVICE };

struct entry {
	const char *name;
	int type;
	const char *target; /* link target */
	size_t size;        /* zero bytes of this size for files (or the text) */
	const char *text;
};

/* Write an archive (zip when zip, else tar.gz) holding entries. */
static void make_archive(const char *path, int zip, const struct entry *e, int n)
{
	struct archive *a = archive_write_new();
	if (zip)
		archive_write_set_format_zip(a);
	else {
		archive_write_set_format_pax_restricted(a);
		archive_write_add_filter_gzip(a);
	}
	archive_write_open_filename(a, path);
	static char zeros[1 << 16];
	for (int i = 0; i < n; i++) {
		struct archive_entry *en = archive_entry_new();
		archive_entry_set_pathname(en, e[i].name);
		archive_entry_set_perm(en, 0644);
		size_t size = e[i].text ? strlen(e[i].text) : e[i].size;
		switch (e[i].type) {
		case F_DIR: archive_entry_set_filetype(en, AE_IFDIR); break;
		case F_SYMLINK:
			archive_entry_set_filetype(en, AE_IFLNK);
			archive_entry_set_symlink(en, e[i].target);
			break;
		case F_HARDLINK:
			archive_entry_set_filetype(en, AE_IFREG);
			archive_entry_set_hardlink(en, e[i].target);
			break;
		case F_DEVICE:
			archive_entry_set_filetype(en, AE_IFCHR);
			archive_entry_set_rdev(en, 0x0101);
			break;
		default:
			archive_entry_set_filetype(en, AE_IFREG);
			archive_entry_set_size(en, (la_int64_t)size);
		}
		archive_write_header(a, en);
		if (e[i].type == F_FILE) {
			if (e[i].text)
				archive_write_data(a, e[i].text, size);
			else
				for (size_t left = size; left > 0;) {
					size_t k = left < sizeof zeros ? left : sizeof zeros;
					archive_write_data(a, zeros, k);
					left -= k;
				}
		}
		archive_entry_free(en);
	}
	archive_write_close(a);
	archive_write_free(a);
}

static int exists(const char *rel)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	return access(p, F_OK) == 0;
}

/* Unpack `entries` (as zip and as tar.gz) into dir/out; returns the code of the
 * tar.gz run after checking that both gave the same code.  msg gets the message. */
static int unpack(const struct entry *e, int n, const struct archive_limits *lim, char *msg, size_t len)
{
	int codes[2];
	for (int zip = 0; zip < 2; zip++) {
		char arch[PATH_MAX], out[PATH_MAX];
		snprintf(arch, sizeof arch, "%s/in%s", dir, zip ? ".zip" : ".tar.gz");
		snprintf(out, sizeof out, "%s/out", dir);
		fs_rm_rf(out, NULL);
		make_archive(arch, zip, e, n);
		int64_t files = 0;
		struct dd_err err = { 0 };
		codes[zip] = archive_unpack(arch, NULL, out, lim, &files, &err);
		if (!zip)
			snprintf(msg, len, "%s", err.msg);
		unlink(arch);
	}
	return codes[0] == codes[1] ? codes[0] : 99;
}

static void test_good_archive_unpacks(void)
{
	struct entry e[] = {
		{ "top/cats/1.png", F_FILE, NULL, 0, "cat one" },
		{ "top/cats/deeper/2.png", F_FILE, NULL, 0, "cat two" },
		{ "top/dogs/", F_DIR, NULL, 0, NULL },
		{ "top/dogs/1.png", F_FILE, NULL, 0, "dog" },
		{ "__MACOSX/top/._1.png", F_FILE, NULL, 0, "junk" },
		{ "top/.DS_Store", F_FILE, NULL, 0, "junk" },
	};
	char msg[512];
	CHECK_EQ_INT(unpack(e, 6, NULL, msg, sizeof msg), DD_OK);
	CHECK(exists("out/top/cats/deeper/2.png"));
	CHECK(exists("out/top/dogs/1.png"));
	CHECK(!exists("out/__MACOSX"));
	CHECK(!exists("out/top/.DS_Store"));
}

static void test_hostile_entries_refused(void)
{
	struct {
		struct entry e;
		const char *why;
	} cases[] = {
		{ { "../escape.png", F_FILE, NULL, 0, "x" }, "climbs out" },
		{ { "a/../../escape.png", F_FILE, NULL, 0, "x" }, "climbs out" },
		{ { "/tmp/deepdesk-abs.png", F_FILE, NULL, 0, "x" }, "absolute path" },
		{ { "cats/link.png", F_SYMLINK, "/etc/passwd", 0, NULL }, "symbolic link" },
		{ { "cats/hard.png", F_HARDLINK, "/etc/passwd", 0, NULL }, "hard link" },
		{ { "cats/dev", F_DEVICE, NULL, 0, NULL }, "device" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct entry e[2] = { { "cats/ok.png", F_FILE, NULL, 0, "fine" }, cases[i].e };
		char msg[512];
		int rc = unpack(e, 2, NULL, msg, sizeof msg);
		if (i >= 4 && rc == 99)
			continue; /* zip holds no hard links or devices: only the tar case counts */
		CHECK_EQ_INT(rc, DD_EINVAL);
		CHECK_CONTAINS(msg, cases[i].why);
		CHECK(!exists("out")); /* nothing stays behind */
		CHECK(!exists("escape.png"));
		CHECK(access("/tmp/deepdesk-abs.png", F_OK) != 0);
	}
}

static void test_limits(void)
{
	struct archive_limits lim;
	archive_limits_default(&lim);
	char msg[512];
	/* a zip bomb: 64 MiB of zeros packs to a few hundred KiB */
	struct entry bomb[] = { { "cats/bomb.png", F_FILE, NULL, 64u << 20, NULL } };
	CHECK_EQ_INT(unpack(bomb, 1, &lim, msg, sizeof msg), DD_EINVAL);
	CHECK_CONTAINS(msg, "zip bomb");
	CHECK(!exists("out"));
	/* too many entries */
	struct entry many[5];
	char names[5][32];
	for (int i = 0; i < 5; i++) {
		snprintf(names[i], sizeof names[i], "c/%d.png", i);
		many[i] = (struct entry){ names[i], F_FILE, NULL, 0, "x" };
	}
	lim.max_entries = 3;
	CHECK_EQ_INT(unpack(many, 5, &lim, msg, sizeof msg), DD_ETOOBIG);
	CHECK_CONTAINS(msg, "more than 3 entries");
	/* too many bytes for one file */
	archive_limits_default(&lim);
	lim.max_entry_bytes = 1000;
	struct entry big[] = { { "c/big.png", F_FILE, NULL, 5000, NULL } };
	CHECK_EQ_INT(unpack(big, 1, &lim, msg, sizeof msg), DD_ETOOBIG);
	/* too many bytes in all */
	archive_limits_default(&lim);
	lim.max_bytes = 3000;
	struct entry two[] = { { "c/a.png", F_FILE, NULL, 2000, NULL }, { "c/b.png", F_FILE, NULL, 2000, NULL } };
	CHECK_EQ_INT(unpack(two, 2, &lim, msg, sizeof msg), DD_ETOOBIG);
}

static void test_not_an_archive(void)
{
	char p[PATH_MAX], out[PATH_MAX];
	snprintf(p, sizeof p, "%s/fake.zip", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	fs_write_file_atomic(p, "this is not a zip file at all", 29, NULL);
	int64_t files;
	struct dd_err err = { 0 };
	CHECK_EQ_INT(archive_unpack(p, NULL, out, NULL, &files, &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "fake.zip");
	/* a truncated tar.gz */
	static char noise[100001];
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 100000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		noise[i] = (char)('a' + x % 26);
	}
	struct entry e[] = { { "c/a.png", F_FILE, NULL, 0, noise } };
	snprintf(p, sizeof p, "%s/cut.tar.gz", dir);
	make_archive(p, 0, e, 1);
	truncate(p, 20000);
	CHECK_EQ_INT(archive_unpack(p, NULL, out, NULL, &files, &err), DD_EINVAL);
	CHECK(!exists("out"));
	CHECK(archive_is_archive_name("A.TGZ") && archive_is_archive_name("x.tar.gz") && !archive_is_archive_name("x.gz"));
}

static void tests(void)
{
	RUN(test_good_archive_unpacks);
	RUN(test_hostile_entries_refused);
	RUN(test_limits);
	RUN(test_not_an_archive);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests);
}
