/*
 * test_amp_kernels.c - the CPU loops of mixed precision (kernels/amp.h) against cast.h's scalar
 * converters: cpu_round16, the 16-bit ReLU forward and backward, and the non-finite counters with
 * the fused unscale, over every class of float (zeros, subnormals, ties, overflow thresholds,
 * infinities, NaNs with payloads) and random values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/amp.h"
#include "kernels/cast.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

#include "test_rng.h"

static const char *tname(dt_dtype t) { return t == DT_F16 ? "fp16" : t == DT_BF16 ? "bf16" : "fp32"; }

/* ---------------------------------------------------------------- 7. the CPU loops */

/* A few hundred floats covering every class: zeros of both signs, fp16 subnormals and the values
 * around them, round-to-nearest-even ties of both formats, the overflow thresholds, fp32
 * subnormals, infinities, quiet and signalling NaNs with payloads in the kept and the dropped bits,
 * and random values over 2^-30 .. 2^20 of both signs. */
static size_t special_floats(float *v, size_t cap)
{
    const uint32_t bits[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, /* zeros, infinities */
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, /* quiet NaN, sNaN with payload only in the low bits */
        0x7fbfffffu, 0x7fe00000u, 0x7f802000u, 0x7f810000u, /* payload in the kept bits */
        0x00000001u, 0x807fffffu, 0x00400000u,              /* fp32 subnormals */
        0x7f7fffffu, 0xff7fffffu,                           /* FLT_MAX: bf16 rounds it to inf */
        0x7f7f7fffu, 0x7f7f8000u,                           /* just below / at bf16's rounding to inf */
        0x3f808000u, 0x3f818000u, 0x3f808001u,              /* bf16 ties (to even: down, up) and past */
    };
    const float vals[] = {
        65504.0f,
        -65504.0f,
        65519.0f,
        65520.0f,
        -65520.0f,
        65536.0f,                /* fp16 max, ties to inf */
        6.103515625e-05f,        /* 2^-14, smallest fp16 normal */
        6.0975551605224609e-05f, /* largest fp16 subnormal */
        5.9604644775390625e-08f,
        -5.9604644775390625e-08f, /* 2^-24, smallest fp16 subnormal */
        2.98023223876953125e-08f, /* 2^-25: a tie, to 0 */
        3.0e-08f,                 /* above 2^-25: to 2^-24 */
        8.9406967163085938e-08f,  /* 1.5 * 2^-24: tie, to 2 * 2^-24 */
        1.00048828125f,
        1.00146484375f,
        -1.00048828125f, /* fp16 ties: 1 + 2^-11, 1 + 3 * 2^-11 */
        1.0f,
        -1.0f,
        0.1f,
        -3.14159265f,
        1e-10f,
        -1e-30f,
        3e38f,
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof bits / sizeof *bits; i++) v[n++] = half_bits_f32(bits[i]);
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) v[n++] = vals[i];
    while (n < cap) {
        const double e = -30.0 + 50.0 * (0.5 + 0.5 * (double)urand());
        v[n] = (float)((urand() < 0 ? -1.0 : 1.0) * exp2(e));
        n++;
    }
    return n;
}

static void round16_check(dt_dtype t)
{
    enum { N = 1300 }; /* past cpu_round16's 1024-element chunks */
    static float in[N], out[N], inplace[N];
    rng_seed("round16", (int)t);
    special_floats(in, N);
    cpu_round16(t, in, out, N);
    memcpy(inplace, in, sizeof in);
    cpu_round16(t, inplace, inplace, N);
    for (size_t i = 0; i < N; i++) {
        const float want =
            t == DT_F16 ? half_f16_to_f32(half_f32_to_f16(in[i])) : half_bf16_to_f32(half_f32_to_bf16(in[i]));
        const uint32_t w = half_f32_bits(want), o = half_f32_bits(out[i]), ip = half_f32_bits(inplace[i]);
        if (o != w || ip != w)
            fail_msg("cpu_round16(%s) of %.9g (0x%08x): 0x%08x (in place 0x%08x), scalar 0x%08x", tname(t),
                     (double)in[i], half_f32_bits(in[i]), o, ip, w);
    }
    /* Spot checks of the scalar reference itself, so that the comparison means something. */
    assert_true(isnan(out[6]) && isnan(out[7]) && signbit(out[7])); /* sNaN stays NaN, never inf */
    assert_true(half_f32_bits(out[1]) == 0x80000000u);              /* -0 stays -0 */
    if (t == DT_F16) {
        assert_true(out[22] == 65504.0f && out[24] == 65504.0f && isinf(out[25]) && out[26] == -INFINITY);
        assert_true(out[28] == 6.103515625e-05f && out[29] == 6.0975551605224609e-05f); /* exact */
        assert_true(out[30] == 5.9604644775390625e-08f && out[31] == -5.9604644775390625e-08f);
        assert_true(out[32] == 0.0f && out[33] == 5.9604644775390625e-08f && out[34] == 1.1920928955078125e-07f);
        assert_true(out[35] == 1.0f && out[36] == 1.001953125f && out[37] == -1.0f);
        assert_true(out[12] == 0.0f); /* an fp32 subnormal */
    } else {
        assert_true(out[15] == INFINITY && out[17] == half_bits_f32(0x7f7f0000u) && out[18] == INFINITY);
        assert_true(out[19] == 1.0f && out[20] == half_bits_f32(0x3f820000u) && out[21] == half_bits_f32(0x3f810000u));
        /* bf16 keeps fp32 subnormals' top bits */
        assert_true(out[12] == 0.0f && out[14] == half_bits_f32(0x00400000u));
    }
}

static void test_round16(void **st)
{
    (void)st;
    /* With the array casts' F16C path on and off (cpu_round16 may convert through them; if it has
     * a loop of its own, this runs it twice). */
    for (int f16c = 1; f16c >= 0; f16c--) {
        cpu_cast_use_f16c(f16c);
        round16_check(DT_F16);
        round16_check(DT_BF16);
    }
    cpu_cast_use_f16c(1);
}

static float widen16(dt_dtype t, uint16_t h) { return t == DT_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h); }

/* The 16-bit ReLU over all 65536 patterns of each format, against the float rule y = x < 0 ? 0 : x
 * on the widened value (NaN passes unchanged, -0 comes out +0) and dx = y > 0 ? dy : 0. */
static void test_relu16(void **st)
{
    (void)st;
    enum { N = 65536 };
    static uint16_t x[N], y[N], dy[N], dx[N], tmp[N];
    for (uint32_t i = 0; i < N; i++) {
        x[i] = (uint16_t)i;
        dy[i] = (uint16_t)((i * 2654435761u) >> 16);
    }
    const dt_dtype ts[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        const dt_dtype t = ts[k];
        cpu_relu16_fwd(t, x, y, N);
        memcpy(tmp, x, sizeof x);
        cpu_relu16_fwd(t, tmp, tmp, N); /* in place */
        assert_memory_equal(tmp, y, sizeof y);
        size_t zeroed = 0;
        for (uint32_t i = 0; i < N; i++) {
            const float f = widen16(t, x[i]);
            const uint16_t want = isnan(f) ? x[i] : (f < 0 || x[i] == 0x8000u) ? 0 : x[i];
            if (y[i] != want)
                fail_msg("relu16_fwd(%s) of 0x%04x (%g): 0x%04x, want 0x%04x", tname(t), i, (double)f, y[i], want);
            zeroed += y[i] == 0 && x[i] != 0;
        }
        /* the negatives (-inf included, NaNs excluded) and -0 */
        assert_int_equal(zeroed, t == DT_F16 ? 0x7c00 + 1 : 0x7f80 + 1);

        cpu_relu16_bwd(t, x, dy, dx, N);
        memcpy(tmp, dy, sizeof dy);
        cpu_relu16_bwd(t, x, tmp, tmp, N); /* dx aliasing dy */
        assert_memory_equal(tmp, dx, sizeof dx);
        for (uint32_t i = 0; i < N; i++) {
            const float f = widen16(t, x[i]);
            const uint16_t want = f > 0 ? dy[i] : 0;
            if (dx[i] != want)
                fail_msg("relu16_bwd(%s): y 0x%04x (%g), dy 0x%04x: 0x%04x, want 0x%04x", tname(t), i, (double)f, dy[i],
                         dx[i], want);
        }
    }
}

static void test_count_nonfinite(void **st)
{
    (void)st;
    /* 37 = two blocks of 16 and a tail of 5; 16 = one block, no tail; 5 = only a tail. */
    const size_t sizes[] = {37, 16, 5, 1};
    const uint32_t bad32[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffffffffu};
    const uint32_t good32[] = {0x7f7fffffu, 0xff7fffffu, 0x00000000u, 0x80000000u, 0x00000001u, 0x3f800000u};
    const uint16_t bad16[2][5] = {{0x7c00u, 0xfc00u, 0x7e00u, 0x7c01u, 0xffffu},
                                  {0x7f80u, 0xff80u, 0x7fc0u, 0x7f81u, 0xffffu}};
    /* 0x7c00 is fp16's inf but a finite bf16 (2^121): the type must be honoured. */
    const uint16_t good16[2][5] = {{0x7bffu, 0xfbffu, 0x0000u, 0x8000u, 0x0001u},
                                   {0x7f7fu, 0xff7fu, 0x7c00u, 0xfc00u, 0x0001u}};
    const dt_dtype ts[2] = {DT_F16, DT_BF16};
    float f[37], g[37];
    uint16_t h[37];
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const size_t n = sizes[si];
        for (size_t pos = 0; pos < n; pos++) {
            for (size_t i = 0; i < n; i++) f[i] = half_bits_f32(good32[(i + pos) % 6]);
            assert_int_equal(cpu_count_nonfinite(f, n), 0);
            for (size_t b = 0; b < 6; b++) {
                f[pos] = half_bits_f32(bad32[b]);
                if (cpu_count_nonfinite(f, n) != 1) fail_msg("n %zu: 0x%08x at %zu not counted once", n, bad32[b], pos);
                memcpy(g, f, n * sizeof *f);
                if (cpu_unscale_count_nonfinite(g, n, 0.5f) != 1)
                    fail_msg("unscale, n %zu: 0x%08x at %zu not counted once", n, bad32[b], pos);
            }
            for (int k = 0; k < 2; k++) {
                for (size_t i = 0; i < n; i++) h[i] = good16[k][(i + pos) % 5];
                assert_int_equal(cpu_count_nonfinite16(ts[k], h, n), 0);
                for (size_t b = 0; b < 5; b++) {
                    h[pos] = bad16[k][b];
                    if (cpu_count_nonfinite16(ts[k], h, n) != 1)
                        fail_msg("%s, n %zu: 0x%04x at %zu not counted once", tname(ts[k]), n, bad16[k][b], pos);
                }
            }
        }
        /* Several at once: every third element, the last one included. */
        size_t want = 0;
        for (size_t i = 0; i < n; i++) {
            const int b = (n - 1 - i) % 3 == 0;
            f[i] = b ? half_bits_f32(bad32[i % 6]) : (float)i - 10.0f;
            h[i] = b ? bad16[0][i % 5] : good16[0][i % 5];
            want += (size_t)b;
        }
        assert_int_equal(cpu_count_nonfinite(f, n), want);
        assert_int_equal(cpu_count_nonfinite16(DT_F16, h, n), want);
        assert_int_equal(cpu_count_nonfinite(f, 0), 0);
    }

    /* Every 16-bit pattern: 2 x 1024 fp16 and 2 x 128 bf16 ones have the all-ones exponent; the last
     * pattern (0xffff, a NaN in both) is in the tail when n is odd. */
    enum { N = 65536 };
    static uint16_t all[N];
    for (uint32_t i = 0; i < N; i++) all[i] = (uint16_t)i;
    assert_int_equal(cpu_count_nonfinite16(DT_F16, all, N), 2048);
    assert_int_equal(cpu_count_nonfinite16(DT_BF16, all, N), 256);
    assert_int_equal(cpu_count_nonfinite16(DT_F16, all, N - 1), 2047);
    assert_int_equal(cpu_count_nonfinite16(DT_BF16, all, N - 1), 255);

    /* The fused unscale: every element multiplied (exactly, by a power of two), the tail included,
     * and results that overflow only after the multiplication are counted. */
    float u[37], v[37];
    for (size_t i = 0; i < 37; i++) u[i] = urand() * 100.0f;
    memcpy(v, u, sizeof u);
    assert_int_equal(cpu_unscale_count_nonfinite(v, 37, 0.25f), 0);
    for (size_t i = 0; i < 37; i++) assert_true(v[i] == u[i] * 0.25f);
    u[36] = FLT_MAX / 2;
    u[3] = NAN;
    u[20] = -FLT_MAX;
    memcpy(v, u, sizeof u);
    assert_int_equal(cpu_unscale_count_nonfinite(v, 37, 4.0f), 3);
    assert_true(v[36] == INFINITY && isnan(v[3]) && v[20] == -INFINITY && v[35] == u[35] * 4.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round16),
        cmocka_unit_test(test_relu16),
        cmocka_unit_test(test_count_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
