/*
 * test_rng.h - the unit tests' random numbers: xorshift64*, and a seed per case (from its name and
 * a number), so each case's data does not depend on which cases ran before it.
 */
#ifndef DT_TESTS_UNIT_TEST_RNG_H
#define DT_TESTS_UNIT_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static inline uint64_t rnext(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* Every case starts from its own fixed seed, so that its data does not depend on which cases ran
 * before it (the measured errors quoted in the comments stay those of the same data). */
static inline void rng_seed(const char *name, int k)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)k;
    for (const char *c = name; *c; c++) h = (h ^ (uint64_t)(unsigned char)*c) * 1099511628211ull;
    rng_state = h ? h : 1;
}

/* Uniform in [-1, 1). */
static inline float urand(void) { return (float)((double)(rnext() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

#endif
