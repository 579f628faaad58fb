/*
 * half.h - scalar conversions between fp32 and the 16-bit floating-point formats fp16 (IEEE
 * binary16) and bf16 (bfloat16). Every layer uses them: the CPU kernels' array loops
 * (kernels/cast.h), the MPI backend's widening of 16-bit buffers, checkpoints and the data readers.
 * static inline, C11 and nvcc host code alike.
 *
 * Semantics:
 *   - fp32 -> 16 bit rounds to nearest, ties to even, with correct subnormal results; values whose
 *     magnitude rounds past the largest finite value become inf of the same sign; inf stays inf.
 *   - NaN stays NaN with its sign and the top bits of its payload, and always comes out quiet, so
 *     rounding can never turn a NaN into inf (an fp32 NaN whose payload lies only in the dropped
 *     bits would otherwise truncate to the inf pattern, or round into a carry).
 *   - 16 bit -> fp32 is exact; NaNs are quieted the same way, so 16 -> 32 -> 16 gives back every
 *     non-NaN pattern (and every quiet NaN) bit for bit.
 *
 * The bit manipulation goes through memcpy rather than unions or pointer casts: it is well defined
 * in both C11 and C++, and compilers turn it into a register move. The header uses no _Float16 or
 * __bf16 so that it compiles everywhere the runtime does. The converters have no data-dependent
 * branches, so that gcc vectorizes the array loops of kernels/cpu/cast.c (with plain SSE2 on
 * x86-64) and their speed does not depend on how normal and subnormal values are mixed.
 */
#ifndef DT_BASE_HALF_H
#define DT_BASE_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t half_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float half_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> fp16, round to nearest even. */
static inline uint16_t half_f32_to_f16(float f)
{
    const uint32_t x = half_f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    /* |f| as a signed int (it is below 2^31): signed compares are single SSE2 instructions. */
    const int32_t ax = (int32_t)(x & 0x7fffffffu);

    /* Normal results (|f| in [2^-14, 65520)): rebias the exponent from 127 to 15 and drop 13
     * mantissa bits, adding 0xfff plus the lowest kept bit so that the truncation rounds to nearest
     * even. A mantissa carry rolls into the exponent, which is exactly the right result. */
    const uint32_t nrm = ((uint32_t)ax - 0x38000000u + 0xfffu + (((uint32_t)ax >> 13) & 1u)) >> 13;

    /* Subnormal results (|f| < 2^-14): in |f| + 0.5f the unit in the last place is 2^-24, the
     * spacing of fp16 subnormals, so the float addition itself rounds |f| to the nearest multiple
     * of 2^-24, ties to even, and the low mantissa bits of the sum are the fp16 pattern (a carry
     * to 0x400 is the smallest normal, also correct). This relies on the default rounding mode
     * (nobody in dtrain changes it) and on float arithmetic not being evaluated in a wider type
     * (FLT_EVAL_METHOD 0, true of every 64-bit target). Flush-to-zero and denormals-are-zero do
     * not matter: the sum is normal, and an fp32 subnormal rounds to zero either way. It needs
     * one instruction where exact integer rounding needs a variable shift per element. */
    const uint32_t sub = half_f32_bits(half_bits_f32((uint32_t)ax) + 0.5f) - 0x3f000000u;

    /* NaN: keep the top 10 payload bits and force the quiet bit, which also keeps the mantissa
     * nonzero so the NaN cannot become inf. */
    const uint32_t nan = 0x7e00u | (((uint32_t)ax >> 13) & 0x3ffu);

    /* Select with all-ones masks rather than ?: chains: gcc turns a chain of four outcomes into
     * one multi-way branch that it can neither if-convert nor vectorize, and with its default
     * -ftrapping-math it would not hoist the float addition out of a branch either. */
    const uint32_t is_sub = 0u - (uint32_t)(ax < 0x38800000);  /* |f| < 2^-14 */
    const uint32_t is_inf = 0u - (uint32_t)(ax >= 0x477ff000); /* rounds past 65504, or inf */
    const uint32_t is_nan = 0u - (uint32_t)(ax > 0x7f800000);
    uint32_t h = (sub & is_sub) | (nrm & ~is_sub);
    h = (0x7c00u & is_inf) | (h & ~is_inf);
    h = (nan & is_nan) | (h & ~is_nan);
    return (uint16_t)(sign | h);
}

/* fp16 -> fp32, exact. */
static inline float half_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const int32_t eh = (h >> 10) & 0x1f;
    const int32_t mh = h & 0x3ff;

    /* Normal: rebias the exponent (+112) and widen the mantissa. */
    const uint32_t nrm = ((uint32_t)(h & 0x7fffu) << 13) + 0x38000000u;

    /* Subnormal and zero: the value is mh * 2^-24. The int -> float conversion (mh < 2^10) and
     * the scaling by a power of two are both exact and give a normal float, so neither the
     * rounding mode nor flush-to-zero can change the result. */
    const uint32_t sub = half_f32_bits((float)mh * 5.9604644775390625e-8f);

    /* Inf and NaN: all-ones exponent, payload kept, NaNs quieted. */
    const uint32_t special = 0x7f800000u | ((uint32_t)mh << 13) | (mh != 0 ? 0x400000u : 0u);

    /* Mask selects, as in half_f32_to_f16, keep the array loop branch-free and vectorizable. */
    const uint32_t is_sub = 0u - (uint32_t)(eh == 0);
    const uint32_t is_special = 0u - (uint32_t)(eh == 0x1f);
    uint32_t u = (sub & is_sub) | (nrm & ~is_sub);
    u = (special & is_special) | (u & ~is_special);
    return half_bits_f32(sign | u);
}

/* fp32 -> bf16, round to nearest even. */
static inline uint16_t half_f32_to_bf16(float f)
{
    const uint32_t x = half_f32_bits(f);
    /* bf16 is the top half of an fp32, so RNE is: add 0x7fff plus the lowest kept bit, truncate.
     * Subnormals need nothing special (same exponent range), and overflow carries into the inf
     * pattern by itself. Only NaN must bypass the addition: a NaN whose payload lies in the low
     * 16 bits would round to the inf pattern, and 0x7fffffff would carry into the sign bit. */
    const uint32_t rne = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t nan = (x >> 16) | 0x40u;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

/* bf16 -> fp32, exact. */
static inline float half_bf16_to_f32(uint16_t b)
{
    const uint32_t u = (uint32_t)b << 16;
    /* Quiet a signalling NaN, as for fp16, so both formats behave alike. */
    const uint32_t q = (u & 0x7fffffffu) > 0x7f800000u ? 0x400000u : 0u;
    return half_bits_f32(u | q);
}

#ifdef __cplusplus
}
#endif
#endif /* DT_BASE_HALF_H */
