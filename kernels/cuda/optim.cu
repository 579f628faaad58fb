/*
 * optim.cu - the optimizer steps of the CUDA backend: SGD with momentum and weight decay, AdamW (PyTorch semantics).
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- optimizers */

/* The CPU formulas with each operation rounded on its own (no contraction into FMAs):
 *   g = grad + wd*p;  buf = first ? g : momentum*buf + g;  p -= lr*buf   (momentum 0: p -= lr*g) */
static __global__ void sgd_kernel(float *__restrict__ p, const float *__restrict__ grad, float *__restrict__ buf,
                                  size_t n, float lr, float momentum, float wd,
                                  int mode /* 0 plain, 1 first, 2 momentum */)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float pi = p[i];
        float g = __fadd_rn(grad[i], __fmul_rn(wd, pi));
        if (mode == 2) g = __fadd_rn(__fmul_rn(momentum, buf[i]), g);
        if (mode != 0) buf[i] = g;
        p[i] = __fsub_rn(pi, __fmul_rn(lr, g));
    }
}

dt_status cuda_sgd(backend *be, float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd,
                   int first)
{
    (void)be;
    if (n == 0) return DT_OK;
    const int mode = momentum == 0.0f ? 0 : first ? 1 : 2;
    sgd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(p, grad, buf, n, lr, momentum, wd, mode);
    return check_launch("sgd", "sgd", n);
}

/* AdamW as the CPU's AVX2 path (cpu/optim.c), constants computed on the host in double as there:
 *   p' = p*decay;  m = fma(b1, m, c1*g);  v = fma(b2, v, (c2*g)*g);
 *   p = p' - step * (m / fma(sqrt(v), inv_bc2, eps))   (one rounding: fma(-step, q, p')) */
static __global__ void adamw_kernel(float *__restrict__ p, const float *__restrict__ grad, float *__restrict__ m,
                                    float *__restrict__ v, size_t n, float decay, float b1, float c1, float b2,
                                    float c2, float step, float inv_bc2, float eps)
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
        p[i] = __fmaf_rn(-step, __fdiv_rn(mi, denom), pi);
    }
}

dt_status cuda_adamw(backend *be, float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, int t)
{
    (void)be;
    if (n == 0) return DT_OK;
    const float decay = (float)(1.0 - (double)lr * wd);
    const float c1 = (float)(1.0 - (double)b1), c2 = (float)(1.0 - (double)b2);
    const float step = (float)((double)lr / (1.0 - pow(b1, t)));
    const float inv_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    adamw_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(p, grad, m, v, n, decay, b1, c1, b2, c2, step,
                                                                          inv_bc2, eps);
    return check_launch("adamw", "adamw", n);
}
