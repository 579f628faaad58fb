/*
 * bench_gemm_check.c - the seeded matrices both sides of `dtrain bench gemm` multiply, and the check
 * of a product's sampled entries against fp64 sums of the inputs as the GEMM read them
 * (bench_gemm.h).
 */
#include "launch/bench/bench_gemm.h"
#include "kernels/cast.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Fills a (n x n, row-major) with the seeded values both sides use: uniform in [-1, 1). */
void gemm_fill(float *a, size_t n, unsigned seed)
{
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (size_t i = 0; i < n * n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
        a[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

/* x as the GEMM of type t reads it. tf32 keeps 10 mantissa bits; cuBLAS rounds to nearest. */
static double as_input(float x, gemm_type t)
{
    switch (t) {
        case GEMM_BF16: return half_bf16_to_f32(half_f32_to_bf16(x));
        case GEMM_FP16: return half_f16_to_f32(half_f32_to_f16(x));
        case GEMM_TF32: {
            uint32_t u;
            memcpy(&u, &x, sizeof u);
            u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
            float f;
            memcpy(&f, &u, sizeof f);
            return f;
        }
        default: return x;
    }
}

double gemm_check(const float *a, const float *b, size_t n, gemm_type t, const size_t *rows, const size_t *cols,
                  const float *c_vals, int samples)
{
    double worst = 0;
    for (int s = 0; s < samples; s++) {
        double sum = 0, mag = 0;
        for (size_t k = 0; k < n; k++) {
            double p = as_input(a[rows[s] * n + k], t) * as_input(b[k * n + cols[s]], t);
            sum += p;
            mag += fabs(p);
        }
        double err = fabs((double)c_vals[s] - sum) / (mag > 0 ? mag : 1);
        if (!(err <= worst)) worst = err; /* a NaN result stays the worst */
    }
    return worst;
}

void gemm_sample_points(size_t n, size_t *rows, size_t *cols)
{
    for (int s = 0; s < GEMM_SAMPLES; s++) {
        rows[s] = (size_t)((s * 7919u + 13u) % n);
        cols[s] = (size_t)((s * 104729u + 7u) % n);
    }
    rows[0] = cols[0] = 0;
    rows[1] = cols[1] = n - 1;
}
