/*
 * elementwise.cu - elementwise ops of the CUDA table: ReLU in fp32, and the 16-bit ones of mixed precision (rounding, ReLU on bit patterns, column sums of 16-bit gradients).
 */
#include "kernels/cuda/ops_internal.cuh"

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

void cuda_relu_fwd(const float *x, float *y, size_t n)
{
    if (n == 0) return;
    relu_fwd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(x, y, n);
    check_launch("relu_fwd", "relu_fwd", n);
}

void cuda_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    if (n == 0) return;
    relu_bwd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(y, dy, dx, n);
    check_launch("relu_bwd", "relu_bwd", n);
}


/* ---------------------------------------------------------------- mixed precision (model_amp.c)
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

/* 16-bit ReLU on bit patterns (inf: the +inf pattern): forward zeroes negatives down to -inf and
 * keeps NaNs; backward passes dy where y > 0 (positive, not NaN). Eight values a thread at a time
 * (16-byte loads) when every pointer is 16-byte aligned (vec), the rest one by one. */
static __device__ __forceinline__ uint16_t relu16_y(uint16_t inf, uint16_t v)
{
    return ((v & 0x8000u) && (uint16_t)(v & 0x7fffu) <= inf) ? (uint16_t)0 : v;
}

static __device__ __forceinline__ uint16_t relu16_dx(uint16_t inf, uint16_t y, uint16_t g)
{
    return (!(y & 0x8000u) && y != 0 && y <= inf) ? g : (uint16_t)0;
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
        for (int e = 0; e < 8; e++) a.h[e] = relu16_y(inf, a.h[e]);
        ((uint4 *)y)[v] = a.v;
    }
    for (i += nv * 8; i < n; i += stride) y[i] = relu16_y(inf, x[i]);
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

static uint16_t inf16(dt_dtype t) { return t == DT_BF16 ? (uint16_t)0x7f80u : (uint16_t)0x7c00u; }

extern "C" void cuda_round16(dt_dtype t, const float *in, float *out, size_t n)
{
    if (!n) return;
    round16_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(t == DT_BF16, in, out, n);
    check_launch("round16", "round16_kernel", n);
}

extern "C" void cuda_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n)
{
    if (!n) return;
    const int vec = aligned16(x, y, y);
    relu16_fwd_kernel<<<grid_for(vec ? (n + 7) / 8 : n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(inf16(t), x, y, n,
                                                                                                  vec);
    check_launch("relu16_fwd", "relu16_fwd_kernel", n);
}

extern "C" void cuda_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n)
{
    if (!n) return;
    const int vec = aligned16(y, dy, dx);
    relu16_bwd_kernel<<<grid_for(vec ? (n + 7) / 8 : n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(inf16(t), y, dy,
                                                                                                  dx, n, vec);
    check_launch("relu16_bwd", "relu16_bwd_kernel", n);
}

extern "C" void cuda_col_sums16(dt_dtype t, const uint16_t *dy, int rows, int cols, float *db)
{
    if (cols <= 0) return;
    col_sums16_kernel<<<grid_for((size_t)cols, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(t == DT_BF16, dy, rows,
                                                                                           cols, db);
    check_launch("col_sums16", "col_sums16_kernel", (size_t)cols);
}

