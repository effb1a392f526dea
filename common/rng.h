/* rng.h — splitmix64, the program's one pseudo-random stream.
 *
 * Every random number deepdesk draws comes from here: the dataset's shuffles and
 * noise, the feed's order and crops, the fillers, dropout's masks (on the CPU and,
 * by rng_at, on the GPU), the replicas' split streams and `net time`'s inputs.
 * The state is one uint64_t: adding RNG_GAMMA advances it and rng_mix turns it
 * into the output.  Resumed trainings and GPU parity compare bit for bit, so the
 * numbers these functions give are fixed: tests/unit/test_common.c pins them.
 *
 * Header only, every function static inline; it compiles as C11 and, in
 * networks/cuda/, as CUDA C++, where each function is __host__ __device__. */
#ifndef DD_RNG_H
#define DD_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define RNG_FN static inline __host__ __device__
#else
#define RNG_FN static inline
#endif

#define RNG_GAMMA 0x9E3779B97F4A7C15ull /* the step of the state: 2^64 / golden ratio */

/* splitmix64's output function: a bijection of the 64-bit values. */
RNG_FN uint64_t rng_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* The next value of the stream whose state is *s (advanced by one step). */
RNG_FN uint64_t rng_next(uint64_t *s)
{
	return rng_mix(*s += RNG_GAMMA);
}

/* The value the i-th rng_next would give from state s0, without walking there
 * (i = 1 is the next one): what lets a GPU thread draw element i of a stream. */
RNG_FN uint64_t rng_at(uint64_t s0, uint64_t i)
{
	return rng_mix(s0 + i * RNG_GAMMA);
}

/* A value's top 53 bits as a double uniform in [0, 1). */
RNG_FN double rng_unit(uint64_t z)
{
	return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

/* Uniform in [0, n) by the remainder (bias below n / 2^64); n <= 1 gives 0 and
 * draws nothing. */
RNG_FN int64_t rng_below(uint64_t *s, int64_t n)
{
	return n <= 1 ? 0 : (int64_t)(rng_next(s) % (uint64_t)n);
}

#endif
