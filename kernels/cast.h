/*
 * cast.h - array conversions between fp32 and fp16/bf16, shared by the CPU and CUDA backends.
 *
 * The MPI backend has no 16-bit reduction, so an allreduce of fp16/bf16 data widens the buffer to
 * fp32, reduces, and narrows the result once; these are the conversions it uses. Two parts:
 *   - CPU array loops (kernels/cpu/cast.c), which call the scalar converters of base/half.h and
 *     share their semantics;
 *   - CUDA launchers (kernels/cuda/elementwise.cu), declared only when DTRAIN_HAVE_CUDA is defined.
 */
#ifndef DT_KERNELS_CAST_H
#define DT_KERNELS_CAST_H

#include <stddef.h>
#include <stdint.h>
#include "base/half.h"
#include "dtrain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- CPU arrays (cpu/cast.c) */

/* Convert n elements; n may be 0 (then the pointers are not touched). in and out must not
 * overlap. */
void cpu_cast_f32_to_f16(const float *in, uint16_t *out, size_t n);
void cpu_cast_f16_to_f32(const uint16_t *in, float *out, size_t n);
void cpu_cast_f32_to_bf16(const float *in, uint16_t *out, size_t n);
void cpu_cast_bf16_to_f32(const uint16_t *in, float *out, size_t n);
/* Bytes to floats, each value exactly (the samples of uint8 data sets: .dts, CIFAR, IDX). */
void cpu_cast_u8_to_f32(const uint8_t *in, float *out, size_t n);

/* Dispatch on t, which must be DT_F16 or DT_BF16 (callers validate the dtype; anything else
 * converts nothing). */
void cpu_cast_f32_to_16(dt_dtype t, const float *in, uint16_t *out, size_t n);
void cpu_cast_16_to_f32(dt_dtype t, const uint16_t *in, float *out, size_t n);

/* The fp16 array functions use x86 F16C instructions when the CPU has them. on = 0 forces the
 * portable loops (so tests check both paths on any machine); returns whether F16C is now used. */
int cpu_cast_use_f16c(int on);

#ifdef __cplusplus
}
#endif

/* ---------------------------------------------------------------- CUDA (cuda/elementwise.cu) */

#ifdef DTRAIN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif

/* Convert n elements of device memory on `stream` (a cudaStream_t passed as void * so that C
 * callers need no CUDA headers; NULL is the default stream). Asynchronous: the launch is checked,
 * the conversion is not waited for. d_in and d_out must not overlap. n may be 0, and n past one
 * grid is fine (grid-stride loops). t must be DT_F16 or DT_BF16, otherwise
 * DT_ERR_INVALID_ARG; a NULL pointer with n > 0 is DT_ERR_INVALID_ARG; a failed launch is
 * DT_ERR_DEVICE with the CUDA error in dt_last_error(). The results equal the CPU versions bit for
 * bit, except that a NaN may come out with another payload (the GPU conversion instructions may
 * return a canonical NaN); it is still a NaN. */
dt_status cuda_cast_f32_to_16(dt_dtype t, const float *d_in, uint16_t *d_out, size_t n, void *stream);
dt_status cuda_cast_16_to_f32(dt_dtype t, const uint16_t *d_in, float *d_out, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_HAVE_CUDA */

#endif /* DT_KERNELS_CAST_H */
