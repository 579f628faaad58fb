/*
 * cpu/ops.c - the fp32 kernels of the CPU backend: GEMM and fully connected layers through CBLAS
 * (OpenBLAS), ReLU, max pooling and softmax cross-entropy, plus conv_shape_init. Convolutions live
 * in cpu/conv.c, the optimizers in cpu/optim.c, the table that gathers them in cpu/backend_cpu.c.
 *
 * Every op is a plain loop over caller-owned memory: no allocation and no function pointer per
 * element. Loops that gcc must vectorize at -O2 run in fixed blocks of DT_CPU_BLOCK (see
 * ops_cpu.h) over restrict pointers; ops that allow in-place use pick an aliasing-free loop for
 * that case rather than dropping restrict for everyone. OpenBLAS's own thread count (one per rank
 * in dtrain) is set by the runtime, not here.
 *
 * GEMM speed depends on OpenBLAS picking kernels for the CPU, and OpenBLAS 0.3.21 (Debian 12) does
 * not know recent Xeons (family 6 model 207 here): it falls back to its Prescott (SSE3) kernels,
 * 20-30 GFLOP/s on one core instead of 100-130 with OPENBLAS_CORETYPE=SkylakeX or Cooperlake
 * (openblas_get_corename() says which it took). The variable is read when the library loads, so it
 * has to be in the environment of the process, not set by it.
 */
#include "kernels/cpu/ops_cpu.h"

#include "base/status.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---------------------------------------------------------------- convolution geometry */

dt_status conv_shape_init(conv_shape *s)
{
    const struct {
        const char *name;
        int v, min;
    } f[] = {{"batch", s->batch, 1},           {"input channels", s->c_in, 1},
             {"input height", s->h, 1},        {"input width", s->w, 1},
             {"output channels", s->c_out, 1}, {"kernel", s->k, 1},
             {"stride", s->stride, 1},         {"padding", s->pad, 0}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].v < f[i].min)
            return status_set_error(DT_ERR_INVALID_ARG, "conv %s %d is invalid: it must be >= %d", f[i].name, f[i].v,
                                    f[i].min);
    const long long hp = (long long)s->h + 2LL * s->pad, wp = (long long)s->w + 2LL * s->pad;
    if (s->k > hp || s->k > wp)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "conv kernel %d does not fit input %dx%d with padding %d; use a kernel of at most "
                                "%lld or more padding",
                                s->k, s->h, s->w, s->pad, hp < wp ? hp : wp);
    const long long ho = (hp - s->k) / s->stride + 1, wo = (wp - s->k) / s->stride + 1;
    /* GEMM dimensions are BLAS ints: C*k*k + 1 rows (the bias row of cpu/conv.c) and Ho*Wo columns
     * per image, plus fewer than 128 more where small images share a GEMM. Offsets are size_t. */
    const long long kk = (long long)s->c_in * s->k * s->k, pix = ho * wo;
    if (kk + 1 > INT_MAX || pix + 128 > INT_MAX)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "conv of %d channels %dx%d (kernel %d, stride %d) is too large for 32-bit BLAS "
                                "dimensions (%lld x %lld per image); split the layer",
                                s->c_in, s->h, s->w, s->k, s->stride, kk, pix);
    s->h_out = (int)ho;
    s->w_out = (int)wo;
    return DT_OK;
}

/* ---------------------------------------------------------------- elementwise helpers */

DT_CPU_CLONES void cpu_add_into(float *restrict dst, const float *restrict src, size_t n)
{
    size_t j = 0;
    for (; j + DT_CPU_BLOCK <= n; j += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) dst[j + t] += src[j + t];
    for (; j < n; j++) dst[j] += src[j];
}

DT_CPU_CLONES void cpu_scale(float *restrict x, size_t n, float m)
{
    size_t j = 0;
    for (; j + DT_CPU_BLOCK <= n; j += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) x[j + t] *= m;
    for (; j < n; j++) x[j] *= m;
}

DT_CPU_CLONES void cpu_div_by(float *restrict x, size_t n, float d)
{
    size_t j = 0;
    for (; j + DT_CPU_BLOCK <= n; j += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) x[j + t] /= d;
    for (; j < n; j++) x[j] /= d;
}

/* ---------------------------------------------------------------- GEMM and fully connected */

void cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                a, lda, b, ldb, beta, c, ldc);
}

/* y(B,OUT) = x(B,IN) * W(OUT,IN)^T + b(OUT). The bias is copied into every row first and the GEMM
 * adds to it (beta 1): that replaces OpenBLAS's zeroing pass for beta 0 and a separate bias pass. */
void cpu_linear_fwd(const float *x, const float *w, const float *b, float *y, int batch, int in, int out)
{
    if (b)
        for (int i = 0; i < batch; i++) memcpy(y + (size_t)i * out, b, (size_t)out * sizeof *y);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

/* dW(OUT,IN) = dy^T x;  db(OUT) = column sums of dy;  dx(B,IN) = dy W (when dx is not NULL). */
void cpu_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db, int batch, int in,
                    int out)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 0.0f, dw, in);
    if (db) {
        memset(db, 0, (size_t)out * sizeof *db);
        for (int i = 0; i < batch; i++) cpu_add_into(db, dy + (size_t)i * out, (size_t)out);
    }
    if (dx) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* ---------------------------------------------------------------- ReLU */

/* `v < 0 ? 0 : v` rather than `v > 0 ? v : 0`: a NaN passes through (as in PyTorch) instead of
 * turning into 0, so a diverging run still shows up in the loss and the overflow check. */
DT_CPU_CLONES static void relu_fwd_out(const float *restrict x, float *restrict y, size_t n)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) y[i + t] = x[i + t] < 0.0f ? 0.0f : x[i + t];
    for (; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

DT_CPU_CLONES static void relu_fwd_inplace(float *restrict y, size_t n)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) y[i + t] = y[i + t] < 0.0f ? 0.0f : y[i + t];
    for (; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

void cpu_relu_fwd(const float *x, float *y, size_t n)
{
    if (x == y)
        relu_fwd_inplace(y, n);
    else
        relu_fwd_out(x, y, n);
}

DT_CPU_CLONES static void relu_bwd_out(const float *restrict y, const float *restrict dy, float *restrict dx, size_t n)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) {
            /* Loaded unconditionally: gcc does not vectorize a load inside the ?: arm. */
            const float g = dy[i + t];
            dx[i + t] = y[i + t] > 0.0f ? g : 0.0f;
        }
    for (; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

DT_CPU_CLONES static void relu_bwd_inplace(const float *restrict y, float *restrict d, size_t n)
{
    size_t i = 0;
    for (; i + DT_CPU_BLOCK <= n; i += DT_CPU_BLOCK)
        for (size_t t = 0; t < DT_CPU_BLOCK; t++) d[i + t] = y[i + t] > 0.0f ? d[i + t] : 0.0f;
    for (; i < n; i++) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
}

void cpu_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    if (dx == dy)
        relu_bwd_inplace(y, dx, n);
    else
        relu_bwd_out(y, dy, dx, n);
}

/* ---------------------------------------------------------------- max pooling */

/* Window k, stride k, no padding; Ho = H / k, Wo = W / k (floor: trailing rows/columns that do not
 * fill a window are dropped). Ties go to the first maximum in row-major order within the window,
 * and a NaN wins (PyTorch's CPU rule), so a NaN is not hidden by the pooling.
 *
 * The comparisons are written as selects, not branches: on random data a branch per element is
 * mispredicted half the time, and the branchy loop took 12.4 ms for 128x32x28x28 (k = 2) where
 * the selects take 1.6-1.9 ms (one thread, batch 128). On x86 they are SSE2 intrinsics, four
 * outputs at a time; elsewhere plain loops that gcc vectorizes at -O2. */
#define POOL_TAKE(v, at)                                                                                               \
    do {                                                                                                               \
        const float v_ = (v);                                                                                          \
        const int c_ = (v_ > best) | (v_ != v_);                                                                       \
        best = c_ ? v_ : best;                                                                                         \
        bi = c_ ? (at) : bi;                                                                                           \
    } while (0)

#ifdef __SSE2__
/* POOL_TAKE on four outputs at once: the same ordered compare, NaN test and selects, so the same
 * values and indices, but branch-free whatever the optimizer does. Left to gcc, the selects came
 * out as branches at -O3 (the loops unrolled completely before the vectorizer saw them): 1.8-10x
 * slower pooling than at -O2 in the default Release build. */
static inline void pool_take4(__m128 *best, __m128i *bi, __m128 v, __m128i at)
{
    const __m128 c = _mm_or_ps(_mm_cmpgt_ps(v, *best), _mm_cmpunord_ps(v, v));
    const __m128i ci = _mm_castps_si128(c);
    *best = _mm_or_ps(_mm_and_ps(c, v), _mm_andnot_ps(c, *best));
    *bi = _mm_or_si128(_mm_and_si128(ci, at), _mm_andnot_si128(ci, *bi));
}

/* Four outputs of a k = 2 pooling: the even and odd columns of 8 inputs of rows a and b. */
static inline void pool2_block4(const float *a, const float *b, float *y, int32_t *ix, int c0, int w)
{
    const __m128 a0 = _mm_loadu_ps(a), a1 = _mm_loadu_ps(a + 4);
    const __m128 b0 = _mm_loadu_ps(b), b1 = _mm_loadu_ps(b + 4);
    const __m128i at = _mm_add_epi32(_mm_set1_epi32(c0), _mm_setr_epi32(0, 2, 4, 6));
    const __m128i one = _mm_set1_epi32(1), down = _mm_add_epi32(at, _mm_set1_epi32(w));
    __m128 best = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
    __m128i bi = at;
    pool_take4(&best, &bi, _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)), _mm_add_epi32(at, one));
    pool_take4(&best, &bi, _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)), down);
    pool_take4(&best, &bi, _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1)), _mm_add_epi32(down, one));
    _mm_storeu_ps(y, best);
    _mm_storeu_si128((__m128i *)(void *)ix, bi);
}

/* Eight outputs of a k = 2 pooling from input rows a and b (b lies W below a in the plane); c0 is
 * the plane offset of a[0]. */
static inline void pool2_block8(const float *restrict a, const float *restrict b, float *restrict y,
                                int32_t *restrict ix, int c0, int w)
{
    pool2_block4(a, b, y, ix, c0, w);
    pool2_block4(a + 8, b + 8, y + 4, ix + 4, c0 + 8, w);
}
#else
/* Eight outputs of a k = 2 pooling from input rows a and b (b lies W below a in the plane); c0 is
 * the plane offset of a[0]. A fixed count of 8, so that gcc vectorizes it at -O2. */
static inline void pool2_block8(const float *restrict a, const float *restrict b, float *restrict y,
                                int32_t *restrict ix, int c0, int w)
{
    for (int t = 0; t < 8; t++) {
        const int at = c0 + 2 * t;
        float best = a[2 * t];
        int bi = at;
        POOL_TAKE(a[2 * t + 1], at + 1);
        POOL_TAKE(b[2 * t], at + w);
        POOL_TAKE(b[2 * t + 1], at + w + 1);
        y[t] = best;
        ix[t] = bi;
    }
}
#endif

/* One output row of a k = 2 pooling; r0 = plane offset of the first input row. The last partial
 * block goes through a zero-padded copy rather than a scalar loop, which gcc compiles with branches
 * again (and 6 of the 14 outputs of a 28-wide row would then be mispredicted half the time). */
static void pool2_row(const float *restrict a, const float *restrict b, float *restrict y, int32_t *restrict ix, int r0,
                      int w, int wo)
{
    int ow = 0;
    for (; ow + 8 <= wo; ow += 8) pool2_block8(a + 2 * ow, b + 2 * ow, y + ow, ix + ow, r0 + 2 * ow, w);
    if (ow < wo) {
        const int n = wo - ow;
        float ta[16] = {0}, tb[16] = {0}, ty[8];
        int32_t ti[8];
        memcpy(ta, a + 2 * ow, (size_t)(2 * n) * sizeof *ta);
        memcpy(tb, b + 2 * ow, (size_t)(2 * n) * sizeof *tb);
        pool2_block8(ta, tb, ty, ti, r0 + 2 * ow, w);
        memcpy(y + ow, ty, (size_t)n * sizeof *ty);
        memcpy(ix + ow, ti, (size_t)n * sizeof *ti);
    }
}

#ifdef __SSE2__
/* Four outputs of a pooling with any k (see poolk_block8): lane t reads x[t * k + ...]. */
static inline void poolk_block4(const float *x, float *y, int32_t *ix, int c0, int w, int k)
{
    const __m128i lane = _mm_setr_epi32(0, k, 2 * k, 3 * k);
    __m128 best = _mm_setr_ps(x[0], x[k], x[2 * k], x[3 * k]);
    __m128i bi = _mm_add_epi32(_mm_set1_epi32(c0), lane);
    for (int i = 0; i < k; i++)
        for (int j = i ? 0 : 1; j < k; j++) {
            const float *p = x + i * w + j;
            pool_take4(&best, &bi, _mm_setr_ps(p[0], p[k], p[2 * k], p[3 * k]),
                       _mm_add_epi32(_mm_set1_epi32(c0 + i * w + j), lane));
        }
    _mm_storeu_ps(y, best);
    _mm_storeu_si128((__m128i *)(void *)ix, bi);
}

/* Eight outputs of a pooling with any k, from x = the top-left input of the first window; c0 is
 * its plane offset. The window is walked in the outer loops and the outputs in the lanes, which
 * keeps the selects branch-free (3.5x faster than a branchy window loop for k = 3). */
static inline void poolk_block8(const float *restrict x, float *restrict y, int32_t *restrict ix, int c0, int w, int k)
{
    poolk_block4(x, y, ix, c0, w, k);
    poolk_block4(x + 4 * k, y + 4, ix + 4, c0 + 4 * k, w, k);
}
#else
/* Eight outputs of a pooling with any k, from x = the top-left input of the first window; c0 is
 * its plane offset. The window is walked in the outer loops and the eight outputs in the inner one,
 * which keeps the selects branch-free (3.5x faster than a branchy window loop for k = 3). */
static inline void poolk_block8(const float *restrict x, float *restrict y, int32_t *restrict ix, int c0, int w, int k)
{
    float best[8];
    int32_t bi[8];
    for (int t = 0; t < 8; t++) best[t] = x[t * k], bi[t] = c0 + t * k;
    for (int i = 0; i < k; i++)
        for (int j = i ? 0 : 1; j < k; j++)
            for (int t = 0; t < 8; t++) {
                const float v = x[i * w + j + t * k];
                const int c = (v > best[t]) | (v != v);
                best[t] = c ? v : best[t];
                bi[t] = c ? c0 + i * w + j + t * k : bi[t];
            }
    memcpy(y, best, sizeof best);
    memcpy(ix, bi, sizeof bi);
}
#endif

void cpu_maxpool_fwd(const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k)
{
    // x (B, C, H, W) -> y, idx (B, C, H/k, W/k)
    const int ho = h / k, wo = w / k;
    const size_t planes = (size_t)batch * c;
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * h * w;
        float *yp = y + pl * ho * wo;
        int32_t *ip = idx + pl * ho * wo;
        for (int oh = 0; oh < ho; oh++) {
            const int r0 = oh * k * w;
            if (k == 2) {
                pool2_row(xp + r0, xp + r0 + w, yp + oh * wo, ip + oh * wo, r0, w, wo);
                continue;
            }
            int ow = 0;
            for (; ow + 8 <= wo; ow += 8)
                poolk_block8(xp + r0 + ow * k, yp + oh * wo + ow, ip + oh * wo + ow, r0 + ow * k, w, k);
            for (; ow < wo; ow++) { /* at most 7 windows: scalar */
                const int base = r0 + ow * k;
                float best = xp[base];
                int bi = base;
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) POOL_TAKE(xp[base + i * w + j], base + i * w + j);
                yp[oh * wo + ow] = best;
                ip[oh * wo + ow] = bi;
            }
        }
    }
}

/* The windows do not overlap, so each input gets at most one dy: a store, not a sum. Plane by
 * plane, so that the stores land in the plane just zeroed, still in L1. */
void cpu_maxpool_bwd(const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w, int k)
{
    const size_t planes = (size_t)batch * c, out = (size_t)(h / k) * (w / k);
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * h * w;
        const float *dyp = dy + pl * out;
        const int32_t *ip = idx + pl * out;
        memset(dxp, 0, (size_t)h * w * sizeof *dxp);
        for (size_t o = 0; o < out; o++) dxp[ip[o]] = dyp[o];
    }
}

/* ---------------------------------------------------------------- softmax cross-entropy */

/* Per row: m = max, s = sum exp(x - m) (each term <= 1, so nothing overflows, and the term of the
 * max is exactly 1, so s >= 1 and log(s) is finite), loss = log(s) - (x[label] - m), accumulated in
 * double. dlogits, when not NULL, first holds the exp terms and is then scaled in place. */
double cpu_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                        float grad_scale, int *correct)
{
    double total = 0.0;
    int right = 0;
    for (int i = 0; i < batch; i++) {
        const float *row = logits + (size_t)i * classes;
        float m = row[0];
        int am = 0;
        for (int j = 1; j < classes; j++)
            if (row[j] > m) m = row[j], am = j;
        double sum = 0.0;
        if (dlogits) {
            float *d = dlogits + (size_t)i * classes;
            for (int j = 0; j < classes; j++) {
                d[j] = expf(row[j] - m);
                sum += d[j];
            }
            const float scale = (float)(grad_scale / sum);
            for (int j = 0; j < classes; j++) d[j] *= scale;
            d[labels[i]] -= grad_scale;
        } else {
            for (int j = 0; j < classes; j++) sum += expf(row[j] - m);
        }
        total += log(sum) - ((double)row[labels[i]] - m);
        right += am == labels[i];
    }
    if (correct) *correct = right;
    return total;
}
