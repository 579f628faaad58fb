/*
 * test_cast.c - unit tests of the fp32 <-> fp16/bf16 conversions (kernels/cast.h, cpu/cast.c).
 *
 * Every 16-bit pattern of both formats is checked exhaustively (16 -> 32 -> 16 gives it back, NaN
 * stays NaN). fp32 -> 16 bit cannot be exhausted in a unit test, so it is checked on a few million
 * pseudo-random patterns, half of them drawn from the exponents where fp16 rounding, subnormals and
 * overflow happen, plus hand-picked edge cases with their expected results written out. The
 * oracles are independent of the code under test: gcc's native _Float16 conversion for fp16
 * (used only here, the library must not depend on it), and for bf16 a rounding by comparing the
 * distances to the two neighbouring bf16 values in double precision. The array functions, whose
 * loops gcc vectorizes, must agree with the scalar ones element for element, tails included.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "kernels/cast.h"

/* _Float16 exists in gcc >= 12 on x86-64 (SSE2) and on aarch64; elsewhere the fp16 oracle tests
 * are skipped rather than failed. */
#if defined(__FLT16_MAX__)
#define HAVE_FLOAT16_ORACLE 1
#else
#define HAVE_FLOAT16_ORACLE 0
#endif

/* Random fp32 patterns checked against the oracles; about 0.5 s at -O2 in total. */
#define NUM_RANDOM (1u << 22)

static int f32_is_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }
static int f16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
static int bf16_is_nan(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

/* splitmix64: a fixed seed, so that a failure reproduces. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Hand-picked fp32 inputs: the boundaries of both formats, ties, signed zeros, NaNs. */
static const uint32_t edge_values[] = {
    0x00000000u, 0x80000000u,                                        /* +-0 */
    0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,              /* fp32 subnormals, FLT_MIN */
    0x3f800000u, 0xbf800000u,                                        /* +-1 */
    0x3f801000u, 0x3f803000u, 0x3f801001u, 0x3f802fffu,              /* fp16 ties and near-ties at 1 */
    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu,              /* bf16 ties and near-ties at 1 */
    0x477fe000u, 0xc77fe000u,                                        /* +-65504, the largest half */
    0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x477ff001u, 0x47800000u, /* 65520 rounds to inf */
    0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7f8001u, /* FLT_MAX, bf16 overflow */
    0x7f800000u, 0xff800000u,                                        /* +-inf */
    0x33800000u, 0xb3800000u,                                        /* +-2^-24, the smallest fp16 subnormal */
    0x33000000u, 0x33000001u, 0x32ffffffu, 0xb3000000u,              /* 2^-25: tie between 0 and 2^-24 */
    0x33c00000u, 0x34200000u, 0x33bfffffu,                           /* 1.5 and 2.5 * 2^-24: ties to even */
    0x387fc000u, 0x387fe000u, 0x387ff000u, 0x387fefffu,              /* around the largest subnormal */
    0x38800000u, 0x387fffffu, 0x38000000u,                           /* 2^-14 (smallest normal), 2^-15 */
    0x00008000u, 0x00018000u, 0x00017fffu,                           /* bf16 ties among fp32 subnormals */
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, /* NaNs, quiet and not */
    0x7f802000u, 0x7f801fffu, 0x7fffffffu, 0xffffffffu, 0x7f80ffffu, 0x7f810000u,
};
#define NUM_EDGE (sizeof edge_values / sizeof edge_values[0])

/* NUM_EDGE edge values followed by NUM_RANDOM random ones: half with any bits, half with an
 * exponent in [96, 145], i.e. magnitudes from 2^-31 to 2^18, where every fp16 case lives. */
static uint32_t *make_inputs(size_t *n)
{
    *n = NUM_EDGE + NUM_RANDOM;
    uint32_t *v = malloc(*n * sizeof *v);
    assert_non_null(v);
    memcpy(v, edge_values, sizeof edge_values);
    uint64_t s = 0x5eed0cafe15f00dull;
    for (size_t i = NUM_EDGE; i < *n; i++) {
        uint64_t r = rng_next(&s);
        uint32_t bits = (uint32_t)r;
        if (i & 1) {
            uint32_t e = 96u + (uint32_t)((r >> 32) % 50u);
            bits = (bits & 0x807fffffu) | (e << 23);
        }
        v[i] = bits;
    }
    return v;
}

/* ---------------------------------------------------------------- references */

#if HAVE_FLOAT16_ORACLE
/* _Float16 is ISO C23 / TS 18661-3, not C11: __extension__ keeps -Wpedantic quiet about it. */
__extension__ typedef _Float16 native_f16;

static uint16_t ref_f32_to_f16(uint32_t bits)
{
    native_f16 h = (native_f16)half_bits_f32(bits);
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

static uint32_t ref_f16_to_f32(uint16_t h)
{
    native_f16 v;
    memcpy(&v, &h, sizeof v);
    return half_f32_bits((float)v);
}
#endif

/* The exact value of a non-negative finite fp32 as a double. Subnormals are built from their
 * integer mantissa, so that a process running with denormals-are-zero (e.g. linked with
 * -ffast-math) still gets their true value. */
static double f32_value(uint32_t ax) { return (ax >> 23) == 0u ? (double)ax * 0x1p-149 : (double)half_bits_f32(ax); }

/* bf16 by the definition of rounding: of the two bf16 values around |x| (the truncation and the
 * next one up, which is inf past the largest finite value; as a rounding target it stands for
 * 2^128), take the nearer one, on a tie the one with an even pattern. The differences are exact in
 * double. NaN is not rounded: it keeps sign and top payload and is quieted. */
static uint16_t ref_f32_to_bf16(uint32_t bits)
{
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    const uint32_t ax = bits & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u);
    const uint16_t lo = (uint16_t)(ax >> 16);
    if ((ax & 0xffffu) == 0u) return sign | lo; /* exact, including zero and inf */
    const uint16_t hi = (uint16_t)(lo + 1u);
    const double x = f32_value(ax);
    const double vlo = f32_value((uint32_t)lo << 16);
    const double vhi = hi == 0x7f80u ? 0x1p128 : f32_value((uint32_t)hi << 16);
    const double dlo = x - vlo, dhi = vhi - x;
    uint16_t r;
    if (dlo < dhi)
        r = lo;
    else if (dhi < dlo)
        r = hi;
    else
        r = (lo & 1u) ? hi : lo;
    return sign | r;
}

/* The well-known bit formula, as a second opinion for the non-NaN cases. */
static uint16_t ref_f32_to_bf16_formula(uint32_t bits)
{
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* ---------------------------------------------------------------- exhaustive 16-bit patterns */

static void test_f16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536u; i++) {
        const uint16_t h = (uint16_t)i;
        const uint32_t f = half_f32_bits(half_f16_to_f32(h));
        const uint16_t back = half_f32_to_f16(half_bits_f32(f));
#if HAVE_FLOAT16_ORACLE
        if (f != ref_f16_to_f32(h)) fail_msg("f16 0x%04x -> f32 0x%08x, want 0x%08x", h, f, ref_f16_to_f32(h));
#endif
        if (f16_is_nan(h)) {
            /* Stays a NaN of the same sign, comes back quiet with its payload. */
            if (!f32_is_nan(f) || !(f & 0x400000u) || (f >> 31) != (uint32_t)(h >> 15))
                fail_msg("f16 NaN 0x%04x -> f32 0x%08x is not a quiet NaN of its sign", h, f);
            if (back != (h | 0x200u))
                fail_msg("f16 NaN 0x%04x -> 0x%08x -> 0x%04x, want 0x%04x", h, f, back, h | 0x200u);
        } else if (back != h) {
            fail_msg("f16 0x%04x -> f32 0x%08x -> f16 0x%04x", h, f, back);
        }
    }
    /* A few values written out, so that the test does not only rely on the oracle. */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x0001u)), 0x33800000u); /* 2^-24 */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x03ffu)), 0x387fc000u); /* largest subnormal */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x0400u)), 0x38800000u); /* 2^-14 */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x7bffu)), 0x477fe000u); /* 65504 */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x3c00u)), 0x3f800000u); /* 1 */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x8000u)), 0x80000000u); /* -0 */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0xfc00u)), 0xff800000u); /* -inf */
    assert_int_equal(half_f32_bits(half_f16_to_f32(0x7c01u)), 0x7fc02000u); /* sNaN quieted */
}

static void test_bf16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536u; i++) {
        const uint16_t b = (uint16_t)i;
        const uint32_t f = half_f32_bits(half_bf16_to_f32(b));
        const uint16_t back = half_f32_to_bf16(half_bits_f32(f));
        if (bf16_is_nan(b)) {
            if (f != (((uint32_t)b << 16) | 0x400000u))
                fail_msg("bf16 NaN 0x%04x -> f32 0x%08x, want the quieted 0x%08x", b, f,
                         ((uint32_t)b << 16) | 0x400000u);
            if (back != (b | 0x40u))
                fail_msg("bf16 NaN 0x%04x -> 0x%08x -> 0x%04x, want 0x%04x", b, f, back, b | 0x40u);
        } else {
            /* bf16 is the top half of an fp32: widening is a shift. */
            if (f != (uint32_t)b << 16) fail_msg("bf16 0x%04x -> f32 0x%08x, want 0x%08x", b, f, (uint32_t)b << 16);
            if (back != b) fail_msg("bf16 0x%04x -> f32 0x%08x -> bf16 0x%04x", b, f, back);
        }
    }
}

/* ---------------------------------------------------------------- fp32 -> 16 bit */

static void test_f32_to_f16_edges(void **state)
{
    (void)state;
    assert_int_equal(half_f32_to_f16(65504.0f), 0x7bffu);
    assert_int_equal(half_f32_to_f16(65519.99f), 0x7bffu);
    assert_int_equal(half_f32_to_f16(65520.0f), 0x7c00u); /* ties to even: inf */
    assert_int_equal(half_f32_to_f16(-65520.0f), 0xfc00u);
    assert_int_equal(half_f32_to_f16(1e30f), 0x7c00u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x7f800000u)), 0x7c00u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0xff800000u)), 0xfc00u);
    assert_int_equal(half_f32_to_f16(0x1p-24f), 0x0001u); /* smallest subnormal */
    assert_int_equal(half_f32_to_f16(-0x1p-24f), 0x8001u);
    assert_int_equal(half_f32_to_f16(0x1p-25f), 0x0000u);                   /* tie: to even zero */
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x33000001u)), 0x0001u); /* just above the tie */
    assert_int_equal(half_f32_to_f16(0x1.8p-24f), 0x0002u);                 /* 1.5 ulp: tie to even 2 */
    assert_int_equal(half_f32_to_f16(0x1.4p-23f), 0x0002u);                 /* 2.5 ulp: tie to even 2 */
    assert_int_equal(half_f32_to_f16(0x1.ffcp-15f), 0x0400u);               /* 1023.5 ulp: tie, up to 2^-14 */
    assert_int_equal(half_f32_to_f16(0x1.ff8p-15f), 0x03ffu);               /* 1023 ulp: largest subnormal */
    assert_int_equal(half_f32_to_f16(0x1p-14f), 0x0400u);
    assert_int_equal(half_f32_to_f16(1.0f + 0x1p-11f), 0x3c00u); /* tie: even 1.0 */
    assert_int_equal(half_f32_to_f16(1.0f + 0x3p-11f), 0x3c02u); /* tie: even 1 + 2^-9 */
    assert_int_equal(half_f32_to_f16(-0.0f), 0x8000u);
    assert_int_equal(half_f32_to_f16(0.0f), 0x0000u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x00000001u)), 0x0000u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x80000001u)), 0x8000u);
    /* NaNs stay quiet NaNs with their sign and top payload, whatever the dropped bits. */
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x7fc00000u)), 0x7e00u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x7f800001u)), 0x7e00u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0xff800001u)), 0xfe00u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0x7f802000u)), 0x7e01u);
    assert_int_equal(half_f32_to_f16(half_bits_f32(0xffffffffu)), 0xffffu);
}

static void test_f32_to_bf16_edges(void **state)
{
    (void)state;
    assert_int_equal(half_f32_to_bf16(1.0f), 0x3f80u);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x3f808000u)), 0x3f80u); /* tie: even */
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x3f818000u)), 0x3f82u); /* tie: even */
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x3f808001u)), 0x3f81u);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7f7f7fffu)), 0x7f7fu);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7f7f8000u)), 0x7f80u); /* tie past max: inf */
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7f7fffffu)), 0x7f80u); /* FLT_MAX: inf */
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0xff7fffffu)), 0xff80u);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7f800000u)), 0x7f80u);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x00008000u)), 0x0000u); /* subnormal tie: even */
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x00018000u)), 0x0002u);
    assert_int_equal(half_f32_to_bf16(-0.0f), 0x8000u);
    /* The plain formula would give inf (0x7f80) or -0 (0x8000) for these NaNs. */
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7f800001u)), 0x7fc0u);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0xff800001u)), 0xffc0u);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7fffffffu)), 0x7fffu);
    assert_int_equal(half_f32_to_bf16(half_bits_f32(0x7fc00000u)), 0x7fc0u);
}

static void test_f32_to_f16_vs_native(void **state)
{
    (void)state;
#if HAVE_FLOAT16_ORACLE
    size_t n;
    uint32_t *v = make_inputs(&n);
    for (size_t i = 0; i < n; i++) {
        const uint16_t got = half_f32_to_f16(half_bits_f32(v[i]));
        const uint16_t want = ref_f32_to_f16(v[i]);
        if (got != want) fail_msg("f32 0x%08x -> f16 0x%04x, _Float16 gives 0x%04x", v[i], got, want);
    }
    free(v);
#else
    skip();
#endif
}

static void test_f32_to_bf16_vs_reference(void **state)
{
    (void)state;
    size_t n;
    uint32_t *v = make_inputs(&n);
    for (size_t i = 0; i < n; i++) {
        const uint16_t got = half_f32_to_bf16(half_bits_f32(v[i]));
        const uint16_t want = ref_f32_to_bf16(v[i]);
        if (got != want) fail_msg("f32 0x%08x -> bf16 0x%04x, want 0x%04x", v[i], got, want);
        if (!f32_is_nan(v[i]) && got != ref_f32_to_bf16_formula(v[i]))
            fail_msg("f32 0x%08x -> bf16 0x%04x, the formula gives 0x%04x", v[i], got, ref_f32_to_bf16_formula(v[i]));
    }
    free(v);
}

/* ---------------------------------------------------------------- arrays */

static void test_arrays_n0(void **state)
{
    (void)state;
    /* n == 0 touches nothing: NULL pointers are fine, and a buffer keeps its contents. */
    cpu_cast_f32_to_f16(NULL, NULL, 0);
    cpu_cast_f16_to_f32(NULL, NULL, 0);
    cpu_cast_f32_to_bf16(NULL, NULL, 0);
    cpu_cast_bf16_to_f32(NULL, NULL, 0);
    cpu_cast_f32_to_16(DT_F16, NULL, NULL, 0);
    cpu_cast_f32_to_16(DT_BF16, NULL, NULL, 0);
    cpu_cast_16_to_f32(DT_F16, NULL, NULL, 0);
    cpu_cast_16_to_f32(DT_BF16, NULL, NULL, 0);

    float f = 1.0f;
    uint16_t h = 0xabcdu;
    cpu_cast_f32_to_16(DT_F16, &f, &h, 0);
    cpu_cast_f32_to_16(DT_BF16, &f, &h, 0);
    assert_int_equal(h, 0xabcdu);
    cpu_cast_16_to_f32(DT_F16, &h, &f, 0);
    cpu_cast_16_to_f32(DT_BF16, &h, &f, 0);
    assert_int_equal(half_f32_bits(f), half_f32_bits(1.0f));
}

/* Narrowing arrays vs the scalar converter, on the random inputs; starting one element in makes
 * the length odd and the start unaligned, so both the blocks and the tail are exercised. */
static void check_narrow_array(dt_dtype t, const uint32_t *v, size_t n)
{
    uint16_t *out = malloc((n + 1) * sizeof *out);
    uint16_t *out2 = malloc((n + 1) * sizeof *out2);
    assert_non_null(out);
    assert_non_null(out2);
    const float *in = (const float *)(const void *)v; /* v holds float bit patterns */
    for (size_t start = 0; start < 2; start++) {
        const size_t m = n - start;
        out[m] = 0x5a5au; /* guard: nothing is written past n */
        if (t == DT_F16)
            cpu_cast_f32_to_f16(in + start, out, m);
        else
            cpu_cast_f32_to_bf16(in + start, out, m);
        cpu_cast_f32_to_16(t, in + start, out2, m);
        assert_int_equal(out[m], 0x5a5au);
        for (size_t i = 0; i < m; i++) {
            const float x = half_bits_f32(v[start + i]);
            const uint16_t want = t == DT_F16 ? half_f32_to_f16(x) : half_f32_to_bf16(x);
            if (out[i] != want || out2[i] != want)
                fail_msg("%s array[%zu] of f32 0x%08x: 0x%04x / dispatch 0x%04x, scalar 0x%04x",
                         t == DT_F16 ? "f16" : "bf16", i, v[start + i], out[i], out2[i], want);
        }
    }
    free(out);
    free(out2);
}

static void test_narrow_arrays_match_scalar(void **state)
{
    (void)state;
    size_t n;
    uint32_t *v = make_inputs(&n);
    check_narrow_array(DT_F16, v, n);
    check_narrow_array(DT_BF16, v, n);
    free(v);
}

/* Widening arrays vs the scalar converter, on every 16-bit pattern, whole and from offsets. */
static int portable_path(void **state)
{
    (void)state;
    assert_int_equal(cpu_cast_use_f16c(0), 0);
    return 0;
}

static int f16c_path(void **state)
{
    (void)state;
    cpu_cast_use_f16c(1);
    return 0;
}

static void test_widen_arrays_match_scalar(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint16_t *in = malloc(N * sizeof *in);
    float *out = malloc((N + 1) * sizeof *out);
    float *out2 = malloc((N + 1) * sizeof *out2);
    assert_non_null(in);
    assert_non_null(out);
    assert_non_null(out2);
    for (size_t i = 0; i < N; i++) in[i] = (uint16_t)i;
    const dt_dtype types[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        const dt_dtype t = types[k];
        for (size_t start = 0; start < 3; start++) {
            const size_t m = N - start;
            out[m] = 42.0f;
            if (t == DT_F16)
                cpu_cast_f16_to_f32(in + start, out, m);
            else
                cpu_cast_bf16_to_f32(in + start, out, m);
            cpu_cast_16_to_f32(t, in + start, out2, m);
            assert_int_equal(half_f32_bits(out[m]), half_f32_bits(42.0f));
            for (size_t i = 0; i < m; i++) {
                const uint16_t h = in[start + i];
                const uint32_t want = half_f32_bits(t == DT_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h));
                if (half_f32_bits(out[i]) != want || half_f32_bits(out2[i]) != want)
                    fail_msg("%s array of 0x%04x: 0x%08x / dispatch 0x%08x, scalar 0x%08x",
                             t == DT_F16 ? "f16" : "bf16", h, half_f32_bits(out[i]), half_f32_bits(out2[i]), want);
            }
        }
    }
    free(in);
    free(out);
    free(out2);
}

/* Bytes to floats: every byte value exactly, at every length from every start 0..2 (the blocks,
 * the tail, unaligned starts), and nothing written past n. */
static void test_u8_array(void **state)
{
    (void)state;
    enum { N = 256 + 3 };
    uint8_t in[N];
    float out[N + 1];
    for (size_t i = 0; i < N; i++) in[i] = (uint8_t)(i * 7 + 3);
    for (size_t start = 0; start < 3; start++)
        for (size_t m = 0; m <= N - start; m++) {
            out[m] = -1.0f;
            cpu_cast_u8_to_f32(in + start, out, m);
            assert_true(out[m] == -1.0f);
            for (size_t i = 0; i < m; i++)
                if (out[i] != (float)in[start + i])
                    fail_msg("u8 array[%zu] (start %zu, n %zu) of %u: %g", i, start, m, in[start + i], (double)out[i]);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_all_patterns),
        cmocka_unit_test(test_bf16_all_patterns),
        cmocka_unit_test(test_f32_to_f16_edges),
        cmocka_unit_test(test_f32_to_bf16_edges),
        cmocka_unit_test(test_f32_to_f16_vs_native),
        cmocka_unit_test(test_f32_to_bf16_vs_reference),
        cmocka_unit_test(test_arrays_n0),
        cmocka_unit_test(test_u8_array),
        cmocka_unit_test(test_narrow_arrays_match_scalar),
        cmocka_unit_test(test_widen_arrays_match_scalar),
        /* Again on the portable loops, which a CPU with F16C would otherwise never run. */
        cmocka_unit_test_setup_teardown(test_narrow_arrays_match_scalar, portable_path, f16c_path),
        cmocka_unit_test_setup_teardown(test_widen_arrays_match_scalar, portable_path, f16c_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
