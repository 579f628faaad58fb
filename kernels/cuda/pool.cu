/*
 * pool.cu - max pooling of the CUDA backend, forward (argmax indices kept) and backward, for fp32 and 16-bit values.
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- max pooling */

/* Row kernels, one plane per block turn. Forward: a thread per output, the window walked in
 * row-major order from its top-left value, taking a value that is greater or NaN (the CPU's
 * POOL_TAKE): ties keep the first maximum, a NaN wins, and of several NaNs the last one does.
 * idx = offset within the input plane. T is fp32 or a 16-bit type (compared widened; the output
 * is the winning element itself, so exact). */
template <typename T>
static __global__ void maxpool_fwd_kernel(const T *__restrict__ x, T *__restrict__ y, int32_t *__restrict__ idx, int bf,
                                          size_t planes, int H, int W, int k)
{
    const uint32_t Wo = (uint32_t)(W / k), HWo = (uint32_t)(H / k) * Wo;
    for (size_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const T *xp = x + pl * H * W;
        for (uint32_t o = threadIdx.x; o < HWo; o += blockDim.x) {
            const uint32_t oh = o / Wo, ow = o - oh * Wo;
            const int base = (int)oh * k * W + (int)ow * k;
            float best = as32(xp[base], bf);
            int bi = base;
            for (int i = 0; i < k; i++)
                for (int j = i ? 0 : 1; j < k; j++) {
                    const int at = base + i * W + j;
                    const float v = as32(xp[at], bf);
                    if (v > best || v != v) {
                        best = v;
                        bi = at;
                    }
                }
            y[pl * HWo + o] = xp[bi];
            idx[pl * HWo + o] = bi;
        }
    }
}

/* Backward as a gather: each input gets dy of its window's output when it is that window's
 * argmax, else 0 (rows/columns past the last whole window too). The windows do not overlap, so
 * this equals the CPU's zero-then-scatter for any idx that maxpool_fwd produced. (T)0 is +0 in
 * every type. ry not NULL: the input is a relu layer's output whose backward runs here too: dy
 * passes only where the window's output ry (the pool's forward output, the value at the argmax)
 * is positive, exactly the relu layer's test on that input (inf: the +inf pattern of 16 bits). */
static __device__ __forceinline__ bool positive(float v, uint16_t) { return v > 0.0f; }
static __device__ __forceinline__ bool positive(uint16_t v, uint16_t inf) { return relu16_positive(v, inf); }

template <typename T>
static __global__ void maxpool_bwd_kernel(const T *__restrict__ dy, const int32_t *__restrict__ idx,
                                          const T *__restrict__ ry, uint16_t inf, T *__restrict__ dx, size_t planes,
                                          int H, int W, int k)
{
    const uint32_t Ho = (uint32_t)(H / k), Wo = (uint32_t)(W / k), HW = (uint32_t)H * W, HWo = Ho * Wo;
    for (size_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const T *dyp = dy + pl * HWo;
        const int32_t *ip = idx + pl * HWo;
        for (uint32_t i = threadIdx.x; i < HW; i += blockDim.x) {
            const uint32_t ih = i / (uint32_t)W, iw = i - ih * (uint32_t)W;
            const uint32_t oh = ih / (uint32_t)k, ow = iw / (uint32_t)k;
            T v = (T)0;
            if (oh < Ho && ow < Wo) {
                const uint32_t o = oh * Wo + ow;
                if (ip[o] == (int32_t)i && (!ry || positive(ry[pl * HWo + o], inf))) v = dyp[o];
            }
            dx[pl * HW + i] = v;
        }
    }
}

template <typename T>
static dt_status maxpool_fwd(const char *op, const T *x, T *y, int32_t *idx, int bf, int batch, int c, int h, int w,
                             int k)
{
    if (batch <= 0 || c <= 0 || k <= 0) return DT_OK;
    const size_t planes = (size_t)batch * c, per = (size_t)(h / k) * (w / k);
    if (per == 0) return DT_OK;
    LAUNCH_ROWS(maxpool_fwd_kernel, planes, per, x, y, idx, bf, planes, h, w, k);
    return check_launch(op, "maxpool_fwd", planes * per);
}

template <typename T>
static dt_status maxpool_bwd(const char *op, const T *dy, const int32_t *idx, const T *ry, int bf, T *dx, int batch,
                             int c, int h, int w, int k)
{
    if (batch <= 0 || c <= 0 || k <= 0) return DT_OK;
    const size_t planes = (size_t)batch * c, per = (size_t)h * w;
    if (per == 0) return DT_OK;
    LAUNCH_ROWS(maxpool_bwd_kernel, planes, per, dy, idx, ry, inf16_bits(bf), dx, planes, h, w, k);
    return check_launch(op, "maxpool_bwd", planes * per);
}

dt_status cuda_maxpool_fwd(backend *be, const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k)
{
    (void)be;
    return maxpool_fwd("maxpool_fwd", x, y, idx, 0, batch, c, h, w, k);
}

dt_status cuda_maxpool_bwd(backend *be, const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w,
                           int k)
{
    (void)be;
    return maxpool_bwd("maxpool_bwd", dy, idx, (const float *)NULL, 0, dx, batch, c, h, w, k);
}

dt_status cuda_maxpool_relu_bwd(const float *dy, const int32_t *idx, const float *ry, float *dx, int batch, int c,
                                int h, int w, int k)
{
    return maxpool_bwd("maxpool_bwd", dy, idx, ry, 0, dx, batch, c, h, w, k);
}

dt_status cuda_maxpool16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, int32_t *idx, int batch, int c, int h, int w,
                             int k)
{
    return maxpool_fwd("maxpool16_fwd", x, y, idx, t == DT_BF16, batch, c, h, w, k);
}

dt_status cuda_maxpool16_bwd(dt_dtype t, const uint16_t *dy, const int32_t *idx, const uint16_t *ry, uint16_t *dx,
                             int batch, int c, int h, int w, int k)
{
    return maxpool_bwd("maxpool16_bwd", dy, idx, ry, t == DT_BF16, dx, batch, c, h, w, k);
}
