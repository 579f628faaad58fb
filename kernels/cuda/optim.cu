/*
 * optim.cu - the optimizer steps of the CUDA backend: SGD with momentum and weight decay, AdamW (PyTorch semantics).
 *
 * Each kernel is one pass over the flat buffers that also writes the 16-bit parameter copy of a
 * 16-bit model (copy, of bf16 when bf, else fp16) from the value it just computed, when asked: the
 * copy then needs no cast kernel of its own before the next forward (which read every fp32
 * parameter again, 4 bytes each, and wrote 2: on a 142M-parameter model about 0.4 ms of an H200's
 * 2.7 ms step, bench/GPU-NOTES.md). The copy rounds as cast_to16 does (narrow16), so a forward reads
 * the same bits either way.
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- optimizers */

/* The CPU formulas with each operation rounded on its own (no contraction into FMAs):
 *   g = grad + wd*p;  buf = first ? g : momentum*buf + g;  p -= lr*buf   (momentum 0: p -= lr*g) */
static __global__ void sgd_kernel(float *__restrict__ p, const float *__restrict__ grad, float *__restrict__ buf,
                                  size_t n, float lr, float momentum, float wd,
                                  int mode /* 0 plain, 1 first, 2 momentum */, uint16_t *__restrict__ copy, int bf)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float pi = p[i];
        float g = __fadd_rn(grad[i], __fmul_rn(wd, pi));
        if (mode == 2) g = __fadd_rn(__fmul_rn(momentum, buf[i]), g);
        if (mode != 0) buf[i] = g;
        const float np = __fsub_rn(pi, __fmul_rn(lr, g));
        p[i] = np;
        if (copy) copy[i] = narrow16(bf, np);
    }
}

/* The copy's type, checked as the CPU table checks it. */
static dt_status copy_type_ok(const char *op, dt_dtype copy_t, const uint16_t *copy)
{
    if (!copy || copy_t == DT_F16 || copy_t == DT_BF16) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG, "%s: the parameter copy's type %d is not DT_F16 or DT_BF16", op,
                            (int)copy_t);
}

dt_status cuda_sgd(backend *be, float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd,
                   int first, dt_dtype copy_t, uint16_t *copy)
{
    (void)be;
    TRY(copy_type_ok("sgd", copy_t, copy));
    if (n == 0) return DT_OK;
    const int mode = momentum == 0.0f ? 0 : first ? 1 : 2;
    sgd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(p, grad, buf, n, lr, momentum, wd, mode, copy,
                                                                        copy_t == DT_BF16);
    return check_launch("sgd", "sgd", n);
}

/* AdamW as the CPU's AVX2 path (cpu/optim.c), constants computed on the host in double as there:
 *   p' = p*decay;  m = fma(b1, m, c1*g);  v = fma(b2, v, (c2*g)*g);
 *   p = p' - step * (m / fma(sqrt(v), inv_bc2, eps))   (one rounding: fma(-step, q, p')) */
static __global__ void adamw_kernel(float *__restrict__ p, const float *__restrict__ grad, float *__restrict__ m,
                                    float *__restrict__ v, size_t n, float decay, float b1, float c1, float b2,
                                    float c2, float step, float inv_bc2, float eps, uint16_t *__restrict__ copy, int bf)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = grad[i];
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

dt_status cuda_adamw(backend *be, float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    (void)be;
    TRY(copy_type_ok("adamw", copy_t, copy));
    if (n == 0) return DT_OK;
    const float decay = (float)(1.0 - (double)lr * wd);
    const float c1 = (float)(1.0 - (double)b1), c2 = (float)(1.0 - (double)b2);
    const float step = (float)((double)lr / (1.0 - pow(b1, t)));
    const float inv_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    adamw_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(p, grad, m, v, n, decay, b1, c1, b2, c2, step,
                                                                          inv_bc2, eps, copy, copy_t == DT_BF16);
    return check_launch("adamw", "adamw", n);
}
