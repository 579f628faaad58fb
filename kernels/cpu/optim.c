/*
 * cpu/optim.c - the optimizer steps of the CPU op table: SGD with momentum and AdamW.
 *
 * Each is one pass over the flat parameter buffer (and its gradient and state), so they are
 * memory-bound loops that must vectorize. SGD is a blocked loop that gcc vectorizes at -O2 (see
 * DT_CPU_BLOCK). AdamW needs a square root, and with the default -fmath-errno gcc keeps sqrtf
 * scalar (it calls sqrtf for negative inputs to set errno), so the x86 path is written with AVX2
 * intrinsics and picked at run time where the CPU has AVX2 and FMA; elsewhere a scalar loop.
 * The formulas follow PyTorch's torch.optim.SGD (dampening 0, no Nesterov) and torch.optim.AdamW
 * (single-tensor path) term by term; AdamW's fused multiply-adds (the same in every path here
 * and in the CUDA kernel) may change the last bit against PyTorch.
 */
#include "kernels/cpu/ops_cpu.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DT_OPTIM_HAVE_AVX2_PATH 1
#endif

/* g = grad + wd * p;  buf = first ? g : momentum * buf + g;  p -= lr * buf (momentum 0: p -= lr * g). */
DT_CPU_CLONES void cpu_sgd(float *restrict p, const float *restrict grad, float *restrict buf, size_t n, float lr,
                           float momentum, float wd, int first)
{
    size_t i = 0;
    if (momentum == 0.0f) {
        for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
            for (size_t t = 0; t < DT_CPU_BLOCK; t++) p[i + t] -= lr * (grad[i + t] + wd * p[i + t]);
        for (; i < n; i++) p[i] -= lr * (grad[i] + wd * p[i]);
    } else if (first) {
        /* PyTorch's first step copies the gradient into the fresh buffer (no momentum term), so a
         * buffer of garbage or of a previous run is never read. */
        for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
            for (size_t t = 0; t < DT_CPU_BLOCK; t++) {
                size_t j = i + t;
                float g = grad[j] + wd * p[j];
                buf[j] = g;
                p[j] -= lr * g;
            }
        for (; i < n; i++) {
            float g = grad[i] + wd * p[i];
            buf[i] = g;
            p[i] -= lr * g;
        }
    } else {
        for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
            for (size_t t = 0; t < DT_CPU_BLOCK; t++) {
                size_t j = i + t;
                float b = momentum * buf[j] + (grad[j] + wd * p[j]);
                buf[j] = b;
                p[j] -= lr * b;
            }
        for (; i < n; i++) {
            float b = momentum * buf[i] + (grad[i] + wd * p[i]);
            buf[i] = b;
            p[i] -= lr * b;
        }
    }
}

/* The constants of one AdamW step, computed once in double precision. */
typedef struct adamw_consts {
    float decay;   /* 1 - lr * wd */
    float b1, c1;  /* beta1, 1 - beta1 */
    float b2, c2;  /* beta2, 1 - beta2 */
    float step;    /* lr / (1 - beta1^t) */
    float inv_bc2; /* 1 / sqrt(1 - beta2^t) */
    float eps;
} adamw_consts;

/* One element with the fused multiply-adds of the AVX2 path (and of the CUDA kernel), each an
 * explicit fmaf (correctly rounded, whatever -ffp-contract says): the scalar loop, the AVX2 loop's
 * tail and a CPU without FMA all give the same bits, so a parameter's update does not depend on
 * its index modulo 8 (a ZeRO shard's boundaries, a machine without AVX2). */
static inline void adamw_one(const adamw_consts *k, float *restrict p, const float *restrict grad, float *restrict m,
                             float *restrict v, size_t i)
{
    const float g = grad[i];
    const float pi = p[i] * k->decay;
    const float mi = fmaf(k->b1, m[i], k->c1 * g);
    const float vi = fmaf(k->b2, v[i], (k->c2 * g) * g);
    const float denom = fmaf(sqrtf(vi), k->inv_bc2, k->eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = fmaf(-k->step, mi / denom, pi);
}

#ifdef DT_OPTIM_HAVE_AVX2_PATH
__attribute__((target("avx2,fma"))) static void adamw_avx2(const adamw_consts *k, float *restrict p,
                                                           const float *restrict grad, float *restrict m,
                                                           float *restrict v, size_t n)
{
    const __m256 decay = _mm256_set1_ps(k->decay), b1 = _mm256_set1_ps(k->b1), c1 = _mm256_set1_ps(k->c1);
    const __m256 b2 = _mm256_set1_ps(k->b2), c2 = _mm256_set1_ps(k->c2), step = _mm256_set1_ps(k->step);
    const __m256 inv_bc2 = _mm256_set1_ps(k->inv_bc2), eps = _mm256_set1_ps(k->eps);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(grad + i);
        __m256 pi = _mm256_mul_ps(_mm256_loadu_ps(p + i), decay);
        __m256 mi = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i), _mm256_mul_ps(c1, g));
        __m256 vi = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i), _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
        __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(vi), inv_bc2, eps);
        pi = _mm256_fnmadd_ps(step, _mm256_div_ps(mi, denom), pi);
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(p + i, pi);
    }
    for (; i < n; i++) adamw_one(k, p, grad, m, v, i);
}

static int optim_have_avx2(void)
{
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return have;
}
#endif

/* p -= lr*wd*p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 * p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)   (t >= 1), with the step's constants
 * (1 - lr*wd, lr/(1-b1^t), 1/sqrt(1-b2^t)) from optim_consts_adamw. */
void cpu_adamw(float *p, const float *grad, float *m, float *v, size_t n, const optim_consts *step, float b1, float b2,
               float eps)
{
    adamw_consts k;
    k.decay = step->decay;
    k.b1 = b1;
    k.c1 = (float)(1.0 - (double)b1);
    k.b2 = b2;
    k.c2 = (float)(1.0 - (double)b2);
    k.step = step->step;
    k.inv_bc2 = step->inv_bc2;
    k.eps = eps;
#ifdef DT_OPTIM_HAVE_AVX2_PATH
    if (optim_have_avx2()) {
        adamw_avx2(&k, p, grad, m, v, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) adamw_one(&k, p, grad, m, v, i);
}
