/* testhooks.h — the environment variables only the test build (build/deepdesk-test)
 * reads.  They let a test see what is otherwise too quick or absent on the machine
 * (a request in flight, an evaluation stopped midway, GPUs).  The shipped build
 * (build/deepdesk) compiles testhooks.c without DD_TESTING, where testhook_int()
 * answers 0 for every hook and never looks at the environment: setting one of
 * these for a real server changes nothing.
 *
 * This is the one place that names them; every reader asks testhook_int(). */
#ifndef DD_TESTHOOKS_H
#define DD_TESTHOOKS_H

enum testhook {
	TESTHOOK_INFER_DELAY_MS, /* DEEPDESK_INFER_DELAY_MS: the inference service holds each request */
	TESTHOOK_EVAL_DELAY_MS,  /* DEEPDESK_EVAL_DELAY_MS: an evaluation pauses after each batch */
	TESTHOOK_FAKE_GPUS,      /* DEEPDESK_FAKE_GPUS: the scheduler lists N simulated GPUs */
	TESTHOOK_DRAW_TIMEOUT_MS, /* DEEPDESK_DRAW_TIMEOUT_MS: a shorter deadline for a network drawing */
	TESTHOOK_DRAW_FAULT,     /* DEEPDESK_DRAW_FAULT: segv, hang or flood: how the drawing child misbehaves */
	TESTHOOK_TEST_KIND,      /* DEEPDESK_TEST_KIND: "anyone" opens the test job kind to every account */
	TESTHOOK_OOM_KILLS,      /* DEEPDESK_OOM_KILLS: a file whose number adds to the kernel's count of OOM kills */
	TESTHOOK_COUNT
};

/* The hook's value as an integer (atoi of the variable), 0 where it is unset; always
 * 0 in the shipped build. */
int testhook_int(enum testhook h);
/* The hook's value as text, NULL where it is unset; always NULL in the shipped build. */
const char *testhook_str(enum testhook h);

#endif
