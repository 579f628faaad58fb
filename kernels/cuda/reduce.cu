/*
 * reduce.cu - reductions and updates over whole gradient buffers on the GPU (cuda_ops.h): the
 * non-finite counts and flags of the loss scaler (amp.h), the fixed-order sum of squares behind
 * the global gradient norm, and the accumulation of micro-batch gradients. They run on the ops'
 * stream (ops.cu) and report failures through its error state.
 */
#include "kernels/cuda/ops_internal.cuh"

/* ---------------------------------------------------------------- non-finite counts (amp.h) */

__device__ static unsigned int nonfinite(float v) { return (__float_as_uint(v) & 0x7fffffffu) >= 0x7f800000u; }

/* Per-block counts (a fixed tree in shared memory) into part_count; with `scale`, d[i] *= inv_scale
 * first and the product is what is counted (and stored). */
static __global__ void count_nonfinite_kernel(float *d, size_t n, int scale, float inv_scale,
                                       unsigned long long *__restrict__ part_count)
{
    __shared__ unsigned long long sh[OPS_BLOCK];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long c = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = d[i];
        if (scale) {
            v = v * inv_scale;
            d[i] = v;
        }
        c += nonfinite(v);
    }
    sh[threadIdx.x] = c;
    __syncthreads();
    for (int w = OPS_BLOCK / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part_count[blockIdx.x] = sh[0];
}

static __global__ void count_final_kernel(ops_scratch *s, int parts)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long c = 0;
    for (int i = 0; i < parts; i++) c += s->part_count[i];
    s->res.count = c;
}

static size_t count_nonfinite(const char *op, float *d, size_t n, int scale, float inv_scale)
{
    if (n == 0) return 0;
    ops_scratch *s = scratch(op);
    if (!s) return SIZE_MAX;
    const unsigned int parts = grid_for(n, OPS_MAX_PARTS);
    count_nonfinite_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>(d, n, scale, inv_scale, s->part_count);
    if (!check_launch(op, "the non-finite count", n)) return SIZE_MAX;
    count_final_kernel<<<1, 32, 0, g_stream>>>(s, (int)parts);
    if (!check_launch(op, "the count sum", parts)) return SIZE_MAX;
    ops_result r;
    if (!fetch_result(op, &r)) return SIZE_MAX;
    return (size_t)r.count;
}

/* flag = stamp when any d[i] is inf or NaN; nothing is written otherwise, so blocks need no
 * agreement and the host reads the flags whenever it likes. */
static __global__ void flag_nonfinite_kernel(const float *__restrict__ d, size_t n, int *flag, int stamp)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned int bad = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) bad |= nonfinite(d[i]);
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = stamp;
}

extern "C" void cuda_flag_nonfinite(const float *d, size_t n, int *flag, int stamp)
{
    if (n == 0) return;
    flag_nonfinite_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(d, n, flag, stamp);
    check_launch("cuda_flag_nonfinite", "the non-finite flag", n);
}

extern "C" size_t cuda_count_nonfinite(const float *d, size_t n)
{
    /* scale 0: the kernel only reads d */
    return count_nonfinite("cuda_count_nonfinite", (float *)d, n, 0, 1.0f);
}

extern "C" size_t cuda_unscale_count_nonfinite(float *d, size_t n, float inv_scale)
{
    return count_nonfinite("cuda_unscale_count_nonfinite", d, n, 1, inv_scale);
}

/* ---------------------------------------------------------------- gradient norms, accumulation */

/* Per-block sums of d[i]^2 in double: each thread's strided share in index order, then a fixed
 * tree in shared memory, so the result depends on n alone (the grid follows from it), never on
 * timing: every rank holding the same gradients gets the same bits, which clipping relies on. */
static __global__ void sum_squares_kernel(const float *__restrict__ d, size_t n, double *__restrict__ part)
{
    __shared__ double sh[OPS_BLOCK];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double v = (double)d[i];
        acc = __fma_rn(v, v, acc);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int w = OPS_BLOCK / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] = __dadd_rn(sh[threadIdx.x], sh[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

static __global__ void sum_squares_final_kernel(ops_scratch *s, int parts)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double t = 0.0;
    for (int i = 0; i < parts; i++) t = __dadd_rn(t, s->part_sumsq[i]);
    s->res.sumsq = t;
}

extern "C" dt_status cuda_sum_squares(const float *d, size_t n, double *out)
{
    const char *op = "cuda_sum_squares";
    *out = 0.0;
    if (n == 0) return DT_OK;
    ops_scratch *s = scratch(op);
    if (!s) return g_err;
    const unsigned int parts = grid_for(n, OPS_MAX_PARTS);
    sum_squares_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>(d, n, s->part_sumsq);
    if (!check_launch(op, "the sum of squares", n)) return g_err;
    sum_squares_final_kernel<<<1, 32, 0, g_stream>>>(s, (int)parts);
    if (!check_launch(op, "the sum of the partial sums", parts)) return g_err;
    ops_result r;
    if (!fetch_result(op, &r)) return g_err;
    *out = r.sumsq;
    return DT_OK;
}

/* g += acc (add) and then acc = g (store): one pass of gradient accumulation. Exact fp32 adds,
 * as the CPU's loop does them. */
static __global__ void accum_kernel(float *__restrict__ g, float *__restrict__ acc, size_t n, int add, int store)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = g[i];
        if (add) {
            v = __fadd_rn(v, acc[i]);
            g[i] = v;
        }
        if (store) acc[i] = v;
    }
}

extern "C" void cuda_accum_grads(float *g, float *acc, size_t n, int add, int store)
{
    if (n == 0 || (!add && !store)) return;
    accum_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(g, acc, n, add, store);
    check_launch("cuda_accum_grads", "gradient accumulation", n);
}
