/*
 * cpu/cast.c - fp32 <-> fp16/bf16 conversion of host arrays.
 *
 * Used on whole gradient buffers (the MPI backend widens 16-bit data to fp32, reduces, and narrows
 * once), so each function is a flat loop over the inlined, branch-free scalar converter of cast.h:
 * no call or function pointer per element, and the dtype is dispatched once per array.
 *
 * The loops run in fixed blocks of DT_CAST_BLOCK elements plus a scalar tail. At -O2, gcc 12 uses
 * its "very cheap" vectorizer cost model, which only vectorizes a loop whose trip count is a known
 * multiple of the vector length; a plain `for (i = 0; i < n; i++)` stays scalar, the blocked inner
 * loop does not (several times faster for fp16). restrict spares gcc an overlap check.
 */
#include "kernels/cast.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DT_CAST_HAVE_F16C_PATH 1
#endif

#define DT_CAST_BLOCK 64

/* The bf16 loops are integer bit arithmetic that gcc vectorizes; an AVX2 clone, picked at load
 * time where the CPU has it, doubles the vector width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DT_CAST_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DT_CAST_CLONES
#endif

#ifdef DT_CAST_HAVE_F16C_PATH
/* x86 F16C converts 8 values per instruction with the same IEEE round-to-nearest-even, subnormal
 * and NaN handling as the scalar code (test_cast checks them against each other on every fp16
 * pattern and millions of floats): about 5x faster than the portable loop for fp32 -> fp16. The
 * function is compiled for F16C alone and called only where the CPU has it. */
__attribute__((target("avx,f16c"))) static void f16c_f32_to_f16(const float *restrict in, uint16_t *restrict out,
                                                                size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(out + i), h);
    }
    for (; i < n; i++) out[i] = half_f32_to_f16(in[i]);
}

__attribute__((target("avx,f16c"))) static void f16c_f16_to_f32(const uint16_t *restrict in, float *restrict out,
                                                                size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(in + i))));
    for (; i < n; i++) out[i] = half_f16_to_f32(in[i]);
}

static int cast_f16c_allowed = 1;

static int cast_have_f16c(void)
{
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    }
    return have && cast_f16c_allowed;
}

int cpu_cast_use_f16c(int on)
{
    cast_f16c_allowed = on;
    return cast_have_f16c();
}
#else
int cpu_cast_use_f16c(int on)
{
    (void)on;
    return 0;
}
#endif

void cpu_cast_f32_to_f16(const float *restrict in, uint16_t *restrict out, size_t n)
{
#ifdef DT_CAST_HAVE_F16C_PATH
    if (cast_have_f16c()) {
        f16c_f32_to_f16(in, out, n);
        return;
    }
#endif
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++) out[i + j] = half_f32_to_f16(in[i + j]);
    for (; i < n; i++) out[i] = half_f32_to_f16(in[i]);
}

void cpu_cast_f16_to_f32(const uint16_t *restrict in, float *restrict out, size_t n)
{
#ifdef DT_CAST_HAVE_F16C_PATH
    if (cast_have_f16c()) {
        f16c_f16_to_f32(in, out, n);
        return;
    }
#endif
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++) out[i + j] = half_f16_to_f32(in[i + j]);
    for (; i < n; i++) out[i] = half_f16_to_f32(in[i]);
}

DT_CAST_CLONES void cpu_cast_f32_to_bf16(const float *restrict in, uint16_t *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++) out[i + j] = half_f32_to_bf16(in[i + j]);
    for (; i < n; i++) out[i] = half_f32_to_bf16(in[i]);
}

DT_CAST_CLONES void cpu_cast_bf16_to_f32(const uint16_t *restrict in, float *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++) out[i + j] = half_bf16_to_f32(in[i + j]);
    for (; i < n; i++) out[i] = half_bf16_to_f32(in[i]);
}

DT_CAST_CLONES void cpu_cast_u8_to_f32(const uint8_t *restrict in, float *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++) out[i + j] = (float)in[i + j];
    for (; i < n; i++) out[i] = (float)in[i];
}

void cpu_cast_f32_to_16(dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    switch (t) {
        case DT_F16: cpu_cast_f32_to_f16(in, out, n); break;
        case DT_BF16: cpu_cast_f32_to_bf16(in, out, n); break;
        case DT_F32:
        case DT_U8: break; /* not a 16-bit type: callers validate the dtype first */
    }
}

void cpu_cast_16_to_f32(dt_dtype t, const uint16_t *in, float *out, size_t n)
{
    switch (t) {
        case DT_F16: cpu_cast_f16_to_f32(in, out, n); break;
        case DT_BF16: cpu_cast_bf16_to_f32(in, out, n); break;
        case DT_F32:
        case DT_U8: break; /* not a 16-bit type: callers validate the dtype first */
    }
}
