/*
 * optim.cu - the optimizer steps of the CUDA backend: SGD with momentum and weight decay, AdamW (PyTorch semantics).
 *
 * Each kernel is one pass over the flat buffers that also writes the 16-bit parameter copy of a
 * 16-bit model (copy, of bf16 when bf, else fp16) from the value it just computed, when asked: the
 * copy then needs no cast kernel of its own before the next forward (which read every fp32
 * parameter again, 4 bytes each, and wrote 2: on a 142M-parameter model about 0.4 ms of an H200's
 * 2.7 ms step, bench/GPU-NOTES.md). The copy rounds as cast_to16 does (narrow16), so a forward reads
 * the same bits either way. The gradients are read as they are kept, fp32 or 16-bit, with the
 * pending unscale and clip factors applied on the way in (optim_grads), so 16-bit gradients need
 * no widening pass (or block loop of launches) before the step. A step behind the loss scaler's
 * queued finite check reads its verdict (optim_grads.skip) and does nothing on an overflow.
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- optimizers */

/* Gradient i as the step uses it (backend.h, optim_grads): widened from T (bf: bf16 over fp16),
 * times m1, then times m2, each rounded and skipped when 1 (optim_grads' rule, backend.h). */
template <typename T>
static __device__ __forceinline__ float grad_at(const T *__restrict__ grad, int bf, float m1, float m2, size_t i)
{
    float g = as32(grad[i], bf);
    if (m1 != 1.0f) g = __fmul_rn(g, m1);
    if (m2 != 1.0f) g = __fmul_rn(g, m2);
    return g;
}

/* The CPU formulas with each operation rounded on its own (no contraction into FMAs):
 *   g = grad + wd*p;  buf = first ? g : momentum*buf + g;  p -= lr*buf   (momentum 0: p -= lr*g) */
template <typename T>
static __global__ void sgd_kernel(float *__restrict__ p, const T *__restrict__ grad, int gbf, float m1, float m2,
                                  float *__restrict__ buf, size_t n, float lr, float momentum, float wd,
                                  int mode /* 0 plain, 1 first, 2 momentum */, uint16_t *__restrict__ copy, int bf,
                                  const int *skip, const optim_consts *live)
{
    if (skip && *skip) return; /* the finite check queued before found an overflow */
    if (live) {                /* a step graph's step: this step's values, written by the host before the launch */
        lr = live->lr;
        if (mode != 0) mode = live->first ? 1 : 2;
    }
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float pi = p[i];
        float g = __fadd_rn(grad_at(grad, gbf, m1, m2, i), __fmul_rn(wd, pi));
        if (mode == 2) g = __fadd_rn(__fmul_rn(momentum, buf[i]), g);
        if (mode != 0) buf[i] = g;
        const float np = __fsub_rn(pi, __fmul_rn(lr, g));
        p[i] = np;
        if (copy) copy[i] = narrow16(bf, np);
    }
}

dt_status cuda_sgd(backend *be, float *p, const optim_grads *g, float *buf, size_t n, float lr, float momentum,
                   float wd, int first, dt_dtype copy_t, uint16_t *copy)
{
    (void)be;
    TRY(optim_args_check("sgd", g, copy_t, copy));
    if (n == 0) return DT_OK;
    const int mode = momentum == 0.0f ? 0 : first ? 1 : 2, bf = copy_t == DT_BF16;
    const unsigned int grid = grid_for(n, OPS_MAX_BLOCKS);
    if (g->t == DT_F32)
        sgd_kernel<<<grid, OPS_BLOCK, 0, g_stream>>>(p, (const float *)g->g, 0, g->m1, g->m2, buf, n, lr, momentum, wd,
                                                     mode, copy, bf, g->skip, g->live);
    else
        sgd_kernel<<<grid, OPS_BLOCK, 0, g_stream>>>(p, (const uint16_t *)g->g, g->t == DT_BF16, g->m1, g->m2, buf, n,
                                                     lr, momentum, wd, mode, copy, bf, g->skip, g->live);
    return check_launch("sgd", "sgd", n);
}

/* AdamW as the CPU's AVX2 path (cpu/optim.c), constants computed on the host in double as there:
 *   p' = p*decay;  m = fma(b1, m, c1*g);  v = fma(b2, v, (c2*g)*g);
 *   p = p' - step * (m / fma(sqrt(v), inv_bc2, eps))   (one rounding: fma(-step, q, p')) */
template <typename T>
static __global__ void adamw_kernel(float *__restrict__ p, const T *__restrict__ grad, int gbf, float m1, float m2,
                                    float *__restrict__ m, float *__restrict__ v, size_t n, float decay, float b1,
                                    float c1, float b2, float c2, float step, float inv_bc2, float eps,
                                    uint16_t *__restrict__ copy, int bf, const int *skip, const optim_consts *live)
{
    if (skip && *skip) return; /* the finite check queued before found an overflow */
    if (live) {                /* a step graph's step: this step's values, written by the host before the launch */
        decay = live->decay;
        step = live->step;
        inv_bc2 = live->inv_bc2;
    }
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = grad_at(grad, gbf, m1, m2, i);
        const float pi = __fmul_rn(p[i], decay);
        const float mi = __fmaf_rn(b1, m[i], __fmul_rn(c1, g));
        const float vi = __fmaf_rn(b2, v[i], __fmul_rn(__fmul_rn(c2, g), g));
        const float denom = __fmaf_rn(__fsqrt_rn(vi), inv_bc2, eps);
        m[i] = mi;
        v[i] = vi;
        const float np = __fmaf_rn(-step, __fdiv_rn(mi, denom), pi);
        p[i] = np;
        if (copy) copy[i] = narrow16(bf, np);
    }
}

dt_status cuda_adamw(backend *be, float *p, const optim_grads *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    (void)be;
    TRY(optim_args_check("adamw", g, copy_t, copy));
    if (n == 0) return DT_OK;
    const optim_consts k = optim_consts_adamw(lr, b1, b2, wd, t);
    const float c1 = (float)(1.0 - (double)b1), c2 = (float)(1.0 - (double)b2);
    const unsigned int grid = grid_for(n, OPS_MAX_BLOCKS);
    const int bf = copy_t == DT_BF16;
    if (g->t == DT_F32)
        adamw_kernel<<<grid, OPS_BLOCK, 0, g_stream>>>(p, (const float *)g->g, 0, g->m1, g->m2, m, v, n, k.decay, b1,
                                                       c1, b2, c2, k.step, k.inv_bc2, eps, copy, bf, g->skip, g->live);
    else
        adamw_kernel<<<grid, OPS_BLOCK, 0, g_stream>>>(p, (const uint16_t *)g->g, g->t == DT_BF16, g->m1, g->m2, m, v,
                                                       n, k.decay, b1, c1, b2, c2, k.step, k.inv_bc2, eps, copy, bf,
                                                       g->skip, g->live);
    return check_launch("adamw", "adamw", n);
}
