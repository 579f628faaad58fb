/*
 * cpu/amp.c - finite checks, the fused unscale + check and 16-bit ReLU (see kernels/amp.h).
 *
 * The checks work on bit patterns: a float is inf or NaN exactly when its exponent bits are all
 * ones, so `(bits & 0x7fffffff) >= 0x7f800000` (0x7c00 for fp16 halves, 0x7f80 for bf16) is one
 * integer compare that gcc vectorizes, and -ffinite-math-only could not optimize it away the way
 * it may drop isfinite(). Loops run in fixed blocks (see ops_cpu.h) with AVX2 clones.
 */
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "kernels/cpu/ops_cpu.h"

#include <string.h>

DT_CPU_CLONES size_t cpu_count_nonfinite(const float *restrict x, size_t n)
{
    size_t bad = 0, i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK) {
        uint32_t c = 0;
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) {
            uint32_t u;
            memcpy(&u, &x[i + t], sizeof u);
            c += (u & 0x7fffffffu) >= 0x7f800000u;
        }
        bad += c;
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad += (u & 0x7fffffffu) >= 0x7f800000u;
    }
    return bad;
}

DT_CPU_CLONES size_t cpu_count_nonfinite16(dt_dtype t, const uint16_t *restrict x, size_t n)
{
    const uint16_t inf = inf16_bits(t == DT_BF16);
    size_t bad = 0, i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK) {
        uint32_t c = 0;
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) c += (uint16_t)(x[i + k] & 0x7fffu) >= inf;
        bad += c;
    }
    for (; i < n; i++) bad += (uint16_t)(x[i] & 0x7fffu) >= inf;
    return bad;
}

DT_CPU_CLONES size_t cpu_unscale_count_nonfinite(float *restrict g, size_t n, float inv_scale)
{
    size_t bad = 0, i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK) {
        uint32_t c = 0;
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) {
            float v = g[i + t] * inv_scale;
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            c += (u & 0x7fffffffu) >= 0x7f800000u;
            g[i + t] = v;
        }
        bad += c;
    }
    for (; i < n; i++) {
        float v = g[i] * inv_scale;
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        bad += (u & 0x7fffffffu) >= 0x7f800000u;
        g[i] = v;
    }
    return bad;
}

/* relu16 and relu16_positive (kernels/amp.h) in blocked loops, as everywhere here, so gcc
 * vectorizes. The loops over two or three arrays live in helpers whose pointer parameters are
 * restrict, one for the in-place call and one for distinct arrays: gcc 12 at -O2 does not honour
 * restrict on block-scope pointers, and without it needs a run-time overlap check that its "very
 * cheap" cost model refuses, so the loops stayed scalar. */
static inline uint16_t relu16_grad(uint16_t y, uint16_t dy, uint16_t inf)
{
    return relu16_positive(y, inf) ? dy : (uint16_t)0;
}

static inline void relu16_fwd_inplace(uint16_t *restrict y, size_t n, uint16_t inf)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) y[i + k] = relu16(y[i + k], inf);
    for (; i < n; i++) y[i] = relu16(y[i], inf);
}

static inline void relu16_fwd_out(const uint16_t *restrict x, uint16_t *restrict y, size_t n, uint16_t inf)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) y[i + k] = relu16(x[i + k], inf);
    for (; i < n; i++) y[i] = relu16(x[i], inf);
}

DT_CPU_CLONES void cpu_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n)
{
    const uint16_t inf = inf16_bits(t == DT_BF16);
    if (x == y)
        relu16_fwd_inplace(y, n, inf);
    else
        relu16_fwd_out(x, y, n, inf);
}

static inline void relu16_bwd_inplace(const uint16_t *restrict y, uint16_t *restrict d, size_t n, uint16_t inf)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) d[i + k] = relu16_grad(y[i + k], d[i + k], inf);
    for (; i < n; i++) d[i] = relu16_grad(y[i], d[i], inf);
}

static inline void relu16_bwd_out(const uint16_t *restrict y, const uint16_t *restrict dy, uint16_t *restrict dx,
                                  size_t n, uint16_t inf)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) dx[i + k] = relu16_grad(y[i + k], dy[i + k], inf);
    for (; i < n; i++) dx[i] = relu16_grad(y[i], dy[i], inf);
}

DT_CPU_CLONES void cpu_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n)
{
    const uint16_t inf = inf16_bits(t == DT_BF16);
    if (dx == dy)
        relu16_bwd_inplace(y, dx, n, inf);
    else
        relu16_bwd_out(y, dy, dx, n, inf);
}

/* bf16: the rounded value as a float is the fp32 pattern rounded to nearest even at bit 16 with
 * the low half cleared, in one integer pass; a NaN keeps its top bits and comes out quiet (the
 * same values as half_f32_to_bf16 then half_bf16_to_f32). */
static inline uint32_t round_bf16_bits(uint32_t x)
{
    const uint32_t rne = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
    const uint32_t nan = (x & 0xffff0000u) | 0x400000u;
    return (x & 0x7fffffffu) > 0x7f800000u ? nan : rne;
}

static inline float round_bf16_one(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = round_bf16_bits(u);
    memcpy(&v, &u, sizeof v);
    return v;
}

/* In place or into another array, restrict for the reason of the relu16 helpers above. */
static inline void round_bf16_inplace(float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) x[i + k] = round_bf16_one(x[i + k]);
    for (; i < n; i++) x[i] = round_bf16_one(x[i]);
}

static inline void round_bf16_out(const float *restrict in, float *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t k = 0; k < DT_CPU_BLOCK; k++) out[i + k] = round_bf16_one(in[i + k]);
    for (; i < n; i++) out[i] = round_bf16_one(in[i]);
}

DT_CPU_CLONES static void round_bf16(const float *in, float *out, size_t n)
{
    if (in == out)
        round_bf16_inplace(out, n);
    else
        round_bf16_out(in, out, n);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/* fp16 with F16C: both conversions in registers, 8 values at a time (the same IEEE rounding as
 * the scalar converters; test_cast checks the instructions against them). */
__attribute__((target("avx,f16c"))) static void round_f16_f16c(const float *in, float *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) out[i] = half_f16_to_f32(half_f32_to_f16(in[i]));
}
#endif

void cpu_round16(dt_dtype t, const float *in, float *out, size_t n)
{
    if (t == DT_BF16) {
        round_bf16(in, out, n);
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    static int f16c = -1;
    if (f16c < 0) f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    if (f16c) {
        round_f16_f16c(in, out, n);
        return;
    }
#endif
    uint16_t tmp[1024];
    for (size_t off = 0; off < n; off += 1024) {
        const size_t c = n - off < 1024 ? n - off : 1024;
        cpu_cast_f32_to_16(t, in + off, tmp, c);
        cpu_cast_16_to_f32(t, tmp, out + off, c);
    }
}

void cpu_sumsq_lanes(const float *g, size_t n, double lane[CPU_SUMSQ_LANES])
{
    size_t i = 0;
    for (; i + CPU_SUMSQ_LANES <= n; i += CPU_SUMSQ_LANES)
        for (int j = 0; j < CPU_SUMSQ_LANES; j++) {
            const double v = g[i + j];
            lane[j] += v * v;
        }
    for (int j = 0; i < n; i++, j++) {
        const double v = g[i];
        lane[j] += v * v;
    }
}

double cpu_sumsq_total(const double lane[CPU_SUMSQ_LANES])
{
    double t = 0.0;
    for (int j = 0; j < CPU_SUMSQ_LANES; j++) t += lane[j];
    return t;
}
