/*
 * cuda/cast.cu - fp32 <-> fp16/bf16 conversion of device arrays: the kernels and, beside each pair,
 * the extern "C" host launchers declared in cast.h (cuda_cast_f32_to_16, cuda_cast_16_to_f32).
 *
 * The conversions are the CUDA intrinsics (__float2half_rn, __half2float, __float2bfloat16_rn,
 * __bfloat162float): round to nearest even, subnormals kept, overflow to inf, the same results as
 * the CPU converters of cast.h bit for bit except for NaN payloads (a NaN stays a NaN). Each kernel
 * is a grid-stride loop, so any n works with a grid capped well below the hardware limit, and the
 * loop index is a size_t, so buffers past 2^32 elements work too.
 *
 * A launcher validates its arguments (DT_ERR_INVALID_ARG), launches on the caller's stream and
 * checks the launch (DT_ERR_DEVICE with the CUDA error). It does not synchronize: errors of the
 * kernel's execution surface at the caller's next synchronizing call, as with any CUDA launch.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/cast.h"

/* 256 threads per block; at most 65535 blocks (about 16.8 million threads, which saturates any
 * current GPU), each thread striding over the rest. 65535 is also the oldest gridDim.x limit. */
#define CAST_BLOCK 256
#define CAST_MAX_BLOCKS 65535

static unsigned int cast_grid(size_t n)
{
    const size_t blocks = (n + CAST_BLOCK - 1) / CAST_BLOCK;
    return (unsigned int)(blocks < CAST_MAX_BLOCKS ? blocks : CAST_MAX_BLOCKS);
}

/* A failed launch (bad configuration, no device, a kernel image missing for this GPU) shows up
 * here; so may an earlier asynchronous error of the same context, which is then reported too. */
static dt_status cast_check_launch(const char *fn, const char *what, size_t n)
{
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return status_set_error(DT_ERR_DEVICE,
                            "%s: launching the %s kernel for %zu elements failed: %s (%s); check "
                            "that the GPU is healthy and that dtrain was built for its compute "
                            "capability (CMAKE_CUDA_ARCHITECTURES)",
                            fn, what, n, cudaGetErrorName(e), cudaGetErrorString(e));
    return DT_OK;
}

static dt_status cast_check_args(const char *fn, dt_dtype t, const void *d_in, const void *d_out,
                                 size_t n)
{
    if (t != DT_F16 && t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG,
                            "%s: dtype %d is not a 16-bit type; pass DT_F16 (%d) or DT_BF16 (%d)",
                            fn, (int)t, (int)DT_F16, (int)DT_BF16);
    if (n > 0 && (d_in == NULL || d_out == NULL))
        return status_set_error(DT_ERR_INVALID_ARG,
                            "%s: %s buffer is NULL for %zu elements; pass device buffers of n "
                            "elements, or n = 0",
                            fn, d_in == NULL ? "the input" : "the output", n);
    return DT_OK;
}

/* ---------------------------------------------------------------- fp32 -> 16 bit */

__global__ void cast_f32_to_f16_kernel(const float *__restrict__ in, uint16_t *__restrict__ out,
                                       size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __half_as_ushort(__float2half_rn(in[i]));
}

__global__ void cast_f32_to_bf16_kernel(const float *__restrict__ in, uint16_t *__restrict__ out,
                                        size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
}

extern "C" dt_status cuda_cast_f32_to_16(dt_dtype t, const float *d_in, uint16_t *d_out, size_t n,
                                         void *stream)
{
    static const char fn[] = "cuda_cast_f32_to_16";
    const dt_status st = cast_check_args(fn, t, d_in, d_out, n);
    if (st != DT_OK)
        return st;
    if (n == 0)
        return DT_OK; /* a launch with an empty grid would be an error */
    const cudaStream_t s = (cudaStream_t)stream;
    if (t == DT_F16)
        cast_f32_to_f16_kernel<<<cast_grid(n), CAST_BLOCK, 0, s>>>(d_in, d_out, n);
    else
        cast_f32_to_bf16_kernel<<<cast_grid(n), CAST_BLOCK, 0, s>>>(d_in, d_out, n);
    return cast_check_launch(fn, t == DT_F16 ? "fp32->fp16" : "fp32->bf16", n);
}

/* ---------------------------------------------------------------- 16 bit -> fp32 */

__global__ void cast_f16_to_f32_kernel(const uint16_t *__restrict__ in, float *__restrict__ out,
                                       size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __half2float(__ushort_as_half(in[i]));
}

__global__ void cast_bf16_to_f32_kernel(const uint16_t *__restrict__ in, float *__restrict__ out,
                                        size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
}

extern "C" dt_status cuda_cast_16_to_f32(dt_dtype t, const uint16_t *d_in, float *d_out, size_t n,
                                         void *stream)
{
    static const char fn[] = "cuda_cast_16_to_f32";
    const dt_status st = cast_check_args(fn, t, d_in, d_out, n);
    if (st != DT_OK)
        return st;
    if (n == 0)
        return DT_OK;
    const cudaStream_t s = (cudaStream_t)stream;
    if (t == DT_F16)
        cast_f16_to_f32_kernel<<<cast_grid(n), CAST_BLOCK, 0, s>>>(d_in, d_out, n);
    else
        cast_bf16_to_f32_kernel<<<cast_grid(n), CAST_BLOCK, 0, s>>>(d_in, d_out, n);
    return cast_check_launch(fn, t == DT_F16 ? "fp16->fp32" : "bf16->fp32", n);
}
