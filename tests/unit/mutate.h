/* mutate.h — what the unit tests' small deterministic fuzz runs share: xorshift
 * generators (seeded by the caller, so every run mutates alike) and one random edit
 * of a byte buffer.  Used by test_datum.c, test_fuzz_image.c, test_prototxt.c and
 * test_roster.c. */
#ifndef DD_TEST_MUTATE_H
#define DD_TEST_MUTATE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Marsaglia's xorshift64 (13, 7, 17): the next state of *s, which it returns. */
static inline uint64_t mutate_xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* xorshift32 (13, 17, 5). */
static inline uint32_t mutate_xorshift32(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* One edit of m (*n bytes, room for cap) chosen by the random number r: a bit
 * flipped, a byte set, a byte inserted (while *n < cap) or a byte deleted; with
 * kinds 5, also everything from a byte on cut off. */
static inline void mutate_bytes(uint8_t *m, size_t *n, size_t cap, uint32_t r, int kinds)
{
	size_t at = *n ? r % *n : 0;
	switch ((r >> 24) % (uint32_t)kinds) {
	case 0:
		if (*n)
			m[at] ^= (uint8_t)(1u << ((r >> 8) % 8));
		break;
	case 1:
		if (*n)
			m[at] = (uint8_t)(r >> 8);
		break;
	case 2:
		if (*n < cap) {
			memmove(m + at + 1, m + at, *n - at);
			m[at] = (uint8_t)(r >> 12);
			(*n)++;
		}
		break;
	case 3:
		if (*n) {
			memmove(m + at, m + at + 1, *n - at - 1);
			(*n)--;
		}
		break;
	default:
		*n = at; /* truncated */
		break;
	}
}

#endif
