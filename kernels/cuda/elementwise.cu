/*
 * elementwise.cu - elementwise ops of the CUDA backend: ReLU in fp32, the fp32 <-> fp16/bf16 casts
 * (the table's entries and the stream-taking launchers of kernels/cast.h), and the 16-bit ops of
 * mixed precision (rounding, ReLU on bit patterns, column sums of 16-bit gradients).
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- ReLU */

/* No __restrict__: both allow in-place use. `v < 0 ? 0 : v` lets a NaN through, as on the CPU. */
static __global__ void relu_fwd_kernel(const float *x, float *y, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

static __global__ void relu_bwd_kernel(const float *y, const float *dy, float *dx, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
}

dt_status cuda_relu_fwd(backend *be, const float *x, float *y, size_t n)
{
    (void)be;
    if (n == 0) return DT_OK;
    relu_fwd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(x, y, n);
    return check_launch("relu_fwd", "relu_fwd", n);
}

dt_status cuda_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n)
{
    (void)be;
    if (n == 0) return DT_OK;
    relu_bwd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(y, dy, dx, n);
    return check_launch("relu_bwd", "relu_bwd", n);
}

/* ---------------------------------------------------------------- mixed precision (layers.cu)
 *
 * 16-bit values travel as uint16_t bit patterns (the host's type for them); the kernels convert
 * with the CUDA intrinsics, which round to nearest even like cast.h (a NaN may come out with
 * another payload). bf selects bf16 over fp16. */

static __global__ void round16_kernel(int bf, const float *in, float *out, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = wide16(bf, narrow16(bf, in[i]));
}

/* 16-bit ReLU on bit patterns (inf: the +inf pattern): forward (relu16, kernels/amp.h) zeroes
 * negatives down to -inf and keeps NaNs; backward passes dy where y > 0 (relu16_positive). Eight
 * values a thread at a time (16-byte loads) when every pointer is 16-byte aligned (vec), the rest
 * one by one. */
static __device__ __forceinline__ uint16_t relu16_dx(uint16_t inf, uint16_t y, uint16_t g)
{
    return relu16_positive(y, inf) ? g : (uint16_t)0;
}

typedef union {
    uint4 v;
    uint16_t h[8];
} pack8;

static __global__ void relu16_fwd_kernel(uint16_t inf, const uint16_t *x, uint16_t *y, size_t n, int vec)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x, nv = vec ? n / 8 : 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t v = i; v < nv; v += stride) {
        pack8 a;
        a.v = ((const uint4 *)x)[v];
        for (int e = 0; e < 8; e++) a.h[e] = relu16(a.h[e], inf);
        ((uint4 *)y)[v] = a.v;
    }
    for (i += nv * 8; i < n; i += stride) y[i] = relu16(x[i], inf);
}

static __global__ void relu16_bwd_kernel(uint16_t inf, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n,
                                         int vec)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x, nv = vec ? n / 8 : 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t v = i; v < nv; v += stride) {
        pack8 a, g;
        a.v = ((const uint4 *)y)[v];
        g.v = ((const uint4 *)dy)[v];
        for (int e = 0; e < 8; e++) g.h[e] = relu16_dx(inf, a.h[e], g.h[e]);
        ((uint4 *)dx)[v] = g.v;
    }
    for (i += nv * 8; i < n; i += stride) dx[i] = relu16_dx(inf, y[i], dy[i]);
}

static int aligned16(const void *a, const void *b, const void *c)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0;
}

/* db[j] = sum over rows of dy[i][j] in fp32, rows in order (deterministic). */
static __global__ void col_sums16_kernel(int bf, const uint16_t *__restrict__ dy, int rows, int cols,
                                         float *__restrict__ db)
{
    const int stride = (int)(gridDim.x * blockDim.x);
    for (int j = (int)(blockIdx.x * blockDim.x + threadIdx.x); j < cols; j += stride) {
        float s = 0.0f;
        for (int i = 0; i < rows; i++) s += wide16(bf, dy[(size_t)i * (size_t)cols + (size_t)j]);
        db[j] = s;
    }
}

dt_status cuda_round16(backend *be, dt_dtype t, const float *in, float *out, size_t n)
{
    (void)be;
    if (!n) return DT_OK;
    round16_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(t == DT_BF16, in, out, n);
    return check_launch("round16", "round16_kernel", n);
}

dt_status cuda_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n)
{
    if (!n) return DT_OK;
    const int vec = aligned16(x, y, y);
    relu16_fwd_kernel<<<grid_for(vec ? (n + 7) / 8 : n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(
        inf16_bits(t == DT_BF16), x, y, n, vec);
    return check_launch("relu16_fwd", "relu16_fwd_kernel", n);
}

dt_status cuda_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n)
{
    if (!n) return DT_OK;
    const int vec = aligned16(y, dy, dx);
    relu16_bwd_kernel<<<grid_for(vec ? (n + 7) / 8 : n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(
        inf16_bits(t == DT_BF16), y, dy, dx, n, vec);
    return check_launch("relu16_bwd", "relu16_bwd_kernel", n);
}

dt_status cuda_col_sums16(dt_dtype t, const uint16_t *dy, int rows, int cols, float *db)
{
    if (cols <= 0) return DT_OK;
    col_sums16_kernel<<<grid_for((size_t)cols, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(t == DT_BF16, dy, rows, cols,
                                                                                          db);
    return check_launch("col_sums16", "col_sums16_kernel", (size_t)cols);
}

/* ---------------------------------------------------------------- casts
 *
 * The conversions are the CUDA intrinsics (__float2half_rn, __half2float, __float2bfloat16_rn,
 * __bfloat162float): round to nearest even, subnormals kept, overflow to inf, the same results as
 * the CPU converters of cast.h bit for bit except for NaN payloads (a NaN stays a NaN). Each kernel
 * is a grid-stride loop with a size_t index, so any n works, past 2^32 elements too. */

static __global__ void cast_to16_kernel(int bf, const float *__restrict__ in, uint16_t *__restrict__ out, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = narrow16(bf, in[i]);
}

static __global__ void cast_to32_kernel(int bf, const uint16_t *__restrict__ in, float *__restrict__ out, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = wide16(bf, in[i]);
}

static dt_status cast_check_args(const char *fn, dt_dtype t, const void *d_in, const void *d_out, size_t n)
{
    if (t != DT_F16 && t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: dtype %d is not a 16-bit type; pass DT_F16 (%d) or DT_BF16 "
                                "(%d)",
                                fn, (int)t, (int)DT_F16, (int)DT_BF16);
    if (n > 0 && (d_in == NULL || d_out == NULL))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: %s buffer is NULL for %zu elements; pass device buffers of n "
                                "elements, or n = 0",
                                fn, d_in == NULL ? "the input" : "the output", n);
    return DT_OK;
}

extern "C" dt_status cuda_cast_f32_to_16(dt_dtype t, const float *d_in, uint16_t *d_out, size_t n, void *stream)
{
    static const char fn[] = "cuda_cast_f32_to_16";
    TRY(cast_check_args(fn, t, d_in, d_out, n));
    if (n == 0) return DT_OK; /* a launch with an empty grid would be an error */
    cast_to16_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, (cudaStream_t)stream>>>(t == DT_BF16, d_in, d_out, n);
    return check_launch(fn, t == DT_F16 ? "the fp32->fp16 cast" : "the fp32->bf16 cast", n);
}

extern "C" dt_status cuda_cast_16_to_f32(dt_dtype t, const uint16_t *d_in, float *d_out, size_t n, void *stream)
{
    static const char fn[] = "cuda_cast_16_to_f32";
    TRY(cast_check_args(fn, t, d_in, d_out, n));
    if (n == 0) return DT_OK;
    cast_to32_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, (cudaStream_t)stream>>>(t == DT_BF16, d_in, d_out, n);
    return check_launch(fn, t == DT_F16 ? "the fp16->fp32 cast" : "the bf16->fp32 cast", n);
}

dt_status cuda_cast_to16(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    (void)be;
    return cuda_cast_f32_to_16(t, in, out, n, (void *)g_stream);
}

dt_status cuda_cast_to32(backend *be, dt_dtype t, const uint16_t *in, float *out, size_t n)
{
    (void)be;
    return cuda_cast_16_to_f32(t, in, out, n, (void *)g_stream);
}
