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
#include "cast.h"

#define DT_CAST_BLOCK 64

void cpu_cast_f32_to_f16(const float *restrict in, uint16_t *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++)
            out[i + j] = dt_f32_to_f16(in[i + j]);
    for (; i < n; i++)
        out[i] = dt_f32_to_f16(in[i]);
}

void cpu_cast_f16_to_f32(const uint16_t *restrict in, float *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++)
            out[i + j] = dt_f16_to_f32(in[i + j]);
    for (; i < n; i++)
        out[i] = dt_f16_to_f32(in[i]);
}

void cpu_cast_f32_to_bf16(const float *restrict in, uint16_t *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++)
            out[i + j] = dt_f32_to_bf16(in[i + j]);
    for (; i < n; i++)
        out[i] = dt_f32_to_bf16(in[i]);
}

void cpu_cast_bf16_to_f32(const uint16_t *restrict in, float *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + DT_CAST_BLOCK <= n; i += DT_CAST_BLOCK)
        for (size_t j = 0; j < DT_CAST_BLOCK; j++)
            out[i + j] = dt_bf16_to_f32(in[i + j]);
    for (; i < n; i++)
        out[i] = dt_bf16_to_f32(in[i]);
}

void cpu_cast_f32_to_16(dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    switch (t) {
    case DT_F16: cpu_cast_f32_to_f16(in, out, n); break;
    case DT_BF16: cpu_cast_f32_to_bf16(in, out, n); break;
    case DT_F32: break; /* not a 16-bit type: callers validate the dtype first */
    }
}

void cpu_cast_16_to_f32(dt_dtype t, const uint16_t *in, float *out, size_t n)
{
    switch (t) {
    case DT_F16: cpu_cast_f16_to_f32(in, out, n); break;
    case DT_BF16: cpu_cast_bf16_to_f32(in, out, n); break;
    case DT_F32: break; /* not a 16-bit type: callers validate the dtype first */
    }
}
