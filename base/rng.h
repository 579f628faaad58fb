/*
 * rng.h - counter-based random numbers: value j of stream (seed, i) is a pure function of the
 * three, so any rank can make any sample or parameter without sharing generator state, and the
 * result does not depend on the order or the thread that asks.
 */
#ifndef DT_BASE_RNG_H
#define DT_BASE_RNG_H

#include <stdint.h>

/* Callable from CUDA kernels too (kernels/cuda/synth.cu makes the synthetic data with them), so a
 * GPU draws the very values the host does. */
#if defined(__CUDACC__)
#define RNG_FN static inline __host__ __device__
#else
#define RNG_FN static inline
#endif

/* SplitMix64's finalizer: a bijective, well-mixed hash of a 64-bit counter. */
RNG_FN uint64_t rng_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The 64-bit value at (seed, stream, j). */
RNG_FN uint64_t rng_at(uint64_t seed, uint64_t stream, uint64_t j)
{
    return rng_mix(rng_mix(seed ^ rng_mix(stream)) + j);
}

/* Uniform in [-1, 1) with 24 random bits (exact in fp32). */
RNG_FN float rng_uniform_pm1(uint64_t r)
{
    return (float)(int32_t)((r >> 40) - (1u << 23)) * (1.0f / (float)(1u << 23));
}

#endif
