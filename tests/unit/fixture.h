/* fixture.h — the temporary data folder (and the store in it) that many unit tests
 * run in, made and removed in one place.
 *
 *   static char dir[64];
 *   static void tests(void) { RUN(test_a); RUN(test_b); }
 *   int main(void) { return fixture_main(dir, sizeof dir, FIXTURE_STORE, tests); }
 *
 * fixture_main makes a fresh folder in dir (check_tmpdir), opens the store in it
 * when flags hold FIXTURE_STORE, calls tests (its RUNs), then ends this thread's
 * store connection (whoever opened it: the tests themselves, or FIXTURE_STORE),
 * removes the folder and returns check_summary()'s exit status.  A folder or a
 * store that cannot be made is said on stderr and returns 1 before any test ran. */
#ifndef DD_TEST_FIXTURE_H
#define DD_TEST_FIXTURE_H

#include "../../common/fsutil.h"
#include "../../store/store.h"
#include "check.h"

enum { FIXTURE_DIR = 0, FIXTURE_STORE = 1 /* store_init(dir) before the tests */ };

static inline int fixture_main(char *dir, size_t len, int flags, void (*tests)(void))
{
	if (!check_tmpdir(dir, len)) {
		perror("mkdtemp");
		return 1;
	}
	struct dd_err err = { 0 };
	if ((flags & FIXTURE_STORE) && store_init(dir, &err) != DD_OK) {
		fprintf(stderr, "store_init: %s\n", err.msg);
		fs_rm_rf(dir, NULL);
		return 1;
	}
	tests();
	store_thread_end();
	fs_rm_rf(dir, NULL);
	return check_summary();
}

#endif
