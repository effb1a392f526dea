/* testhooks.c — reads the test build's hooks (testhooks.h).  The Makefile compiles
 * this file twice: into build/obj without DD_TESTING, for build/deepdesk, where
 * every hook is 0; and into build/obj-test with it, for build/deepdesk-test and the
 * unit tests.  Nothing else is compiled twice for these hooks, and no other file
 * reads them, so the shipped program cannot be steered by them. */
#include <assert.h>
#include <stdlib.h>

#include "testhooks.h"

#ifdef DD_TESTING
static const char *const testhook_env[] = {
	[TESTHOOK_INFER_DELAY_MS] = "DEEPDESK_INFER_DELAY_MS",
	[TESTHOOK_EVAL_DELAY_MS] = "DEEPDESK_EVAL_DELAY_MS",
	[TESTHOOK_FAKE_GPUS] = "DEEPDESK_FAKE_GPUS",
	[TESTHOOK_DRAW_TIMEOUT_MS] = "DEEPDESK_DRAW_TIMEOUT_MS",
	[TESTHOOK_DRAW_FAULT] = "DEEPDESK_DRAW_FAULT",
	[TESTHOOK_TEST_KIND] = "DEEPDESK_TEST_KIND",
	[TESTHOOK_OOM_KILLS] = "DEEPDESK_OOM_KILLS",
};
static_assert(sizeof testhook_env / sizeof testhook_env[0] == TESTHOOK_COUNT, "a testhook without its variable");

const char *testhook_str(enum testhook h)
{
	return (unsigned)h < TESTHOOK_COUNT ? getenv(testhook_env[h]) : NULL;
}

int testhook_int(enum testhook h)
{
	const char *v = testhook_str(h);
	return v ? atoi(v) : 0;
}

#else
int testhook_int(enum testhook h)
{
	(void)h;
	return 0;
}

const char *testhook_str(enum testhook h)
{
	(void)h;
	return NULL;
}

#endif
