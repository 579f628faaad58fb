/*
 * test_cuda_ops.c - checks every op of the CUDA backend (kernels/cuda/) against the CPU backend
 * (backend_cpu(), the oracle that the unit tests check), plus the CUDA non-finite counters against
 * cpu_count_nonfinite / cpu_unscale_count_nonfinite, on random inputs and edge cases: batches of 1
 * and 3, odd sizes, padded leading dimensions, strided and padded convolutions, a convolution big
 * enough to be split into image groups on the GPU (and rerun with a smaller batch in the same
 * workspace), pooling with ties and NaNs, one-class and tied softmax rows, SGD with and without
 * momentum (first step and later), AdamW at steps 1 and 7, infs and NaNs at the tail of the
 * counted buffers, reproducibility of the reductions, and the statuses the entries return.
 *
 * Tolerances (each check prints its worst error):
 *   - GEMM-based results (gemm, linear y/dx/dW, conv y/dx/dW): max |gpu - cpu| <= 1e-4 * max |cpu|
 *     over the output; both sides are fp32 (cuBLAS in its default, non-TF32 math) but sum in
 *     different orders.
 *   - linear db: exact (both add the rows in order in fp32). conv db: 1e-5 relative to max |db|
 *     (both sum in double, in different orders, then round once).
 *   - ReLU, max pooling (values, argmax, backward): exact, bit for bit (NaN payloads included).
 *   - softmax_xent: loss within 1e-5 relative, correct count exact, dlogits within 2e-6 *
 *     grad_scale absolute (every entry lies in [-grad_scale, grad_scale]; CUDA's expf may differ
 *     from glibc's by 2 ulp).
 *   - SGD: p and buf within 1 ulp (expected exact: both round each operation separately).
 *   - AdamW: m, v within 1 ulp, p within 2 ulp (the GPU follows the CPU's AVX2 path, FMAs
 *     included, and should be exact against it; the CPU's scalar path associates the update
 *     differently).
 *   - non-finite counts: exact; the unscaled buffer bit for bit, except NaN payloads (a GPU multiply
 *     returns the canonical NaN; it is still a NaN).
 *   - the 16-bit ops of mixed precision (check_amp16), on values already in bf16 or fp16, against
 *     the fp32 CPU ops on the widened values: GEMMs and convolutions with an fp32 result within
 *     1e-4 of max |cpu| (the products are exact in fp32; only the summation order differs); with a
 *     16-bit result within one rounding: 8e-3 (bf16) or 1e-3 (fp16) of max |cpu|; ReLU, rounding,
 *     bias-and-round and column sums bit for bit (the same operations in the same order). 16-bit
 *     pooling: bit for bit against the CPU's fp32 op on the widened values (a NaN maximum as a
 *     NaN); the 16-bit convolution filter gradient against the fp32 GPU op: db bit for bit (the
 *     same fixed-order sums), dW within 1e-4.
 *
 * Exit status: 0 passed, 1 failed (each failure printed with its worst error), 77 skipped with a
 * line "SKIP: no CUDA device (...)" when cudaGetDeviceCount fails or finds none. The checks that
 * need no GPU (the table is complete, the workspace sizes, the no-op cases) run first.
 */
#include <cuda_runtime.h>

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This program only makes sense with CUDA: see the CUDA declarations even if the build did not
 * pass the define. */
#ifndef DTRAIN_HAVE_CUDA
#define DTRAIN_HAVE_CUDA 1
#endif
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "kernels/backend.h"
#include "kernels/cuda/amp16.h"
#include "dtrain.h"

static int failures;
static cudaStream_t stream;
static backend *gpu_be, *cpu_be;
static uint64_t seed = 0x0d7a1cafe5eedull;

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_next(void)
{
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float urand(void) { return (float)((double)(rng_next() >> 40) * (1.0 / 8388608.0) - 1.0); }

static void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = urand() * scale;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static float *fmalloc(size_t n) { return xmalloc(n * sizeof(float)); }

/* Exits on a CUDA error outside the code under test: nothing after it would mean anything. */
static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "FAIL: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
        exit(1);
    }
}

static void *dmalloc(size_t bytes)
{
    void *p = NULL;
    cuda_ok(cudaMalloc(&p, bytes ? bytes : 4), "cudaMalloc");
    return p;
}

static float *dfloats(size_t n) { return dmalloc(n * sizeof(float)); }

static void up(void *d, const void *h, size_t bytes)
{
    cuda_ok(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream), "copy to the device");
}

/* Copies back and synchronizes. */
static void down(void *h, const void *d, size_t bytes)
{
    cuda_ok(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, stream), "copy to the host");
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

/* A device copy of h[0..n). */
static float *dcopy(const float *h, size_t n)
{
    float *d = dfloats(n);
    up(d, h, n * sizeof *h);
    return d;
}

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures += !ok;
}

/* After the ops of one check: waits, and fails the check if the stream reports an error. */
static void ops_ok(const char *what)
{
    cuda_ok(cudaStreamSynchronize(stream), what);
    const dt_status st = gpu_be->ops->sync(gpu_be);
    if (st != DT_OK) check(0, "%s: the CUDA backend's stream failed: %s", what, dt_last_error());
}

/* Every entry returns its status: a failure fails the check at once, with the message. */
static void st_ok(const char *what, dt_status st)
{
    if (st != DT_OK) check(0, "%s returned %d: %s", what, (int)st, dt_last_error());
}
#define GPU(op, ...) st_ok(#op, gpu_be->ops->op(gpu_be, __VA_ARGS__))
#define CPU(op, ...) st_ok(#op " (cpu)", cpu_be->ops->op(cpu_be, __VA_ARGS__))
#define G16(call) st_ok(#call, call)

/* The table's softmax cross-entropy as a value, as the checks compare it. */
static double xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                   float grad_scale, int *correct)
{
    double loss = NAN;
    st_ok("softmax_xent", be->ops->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &loss,
                                                correct));
    return loss;
}

/* The non-finite count of d[0..n) on the GPU, times mul first when mul is not 1 (in place). */
static size_t gcount(float *d, size_t n, float mul)
{
    size_t bad = SIZE_MAX;
    st_ok("scale_count", gpu_be->ops->scale_count(gpu_be, DT_F32, d, n, mul, &bad));
    return bad;
}

static int is_nan(float v) { return v != v; }

/* max |g - c| / max |c| (a NaN on one side only, or a NaN error, is infinite). */
static double rel_err(const float *g, const float *c, size_t n, size_t *worst)
{
    double maxabs = 0.0, maxd = 0.0;
    *worst = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_nan(c[i]) && fabs(c[i]) > maxabs) maxabs = fabs(c[i]);
    for (size_t i = 0; i < n; i++) {
        double d;
        if (is_nan(g[i]) || is_nan(c[i]))
            d = is_nan(g[i]) && is_nan(c[i]) ? 0.0 : INFINITY;
        else
            d = fabs((double)g[i] - (double)c[i]);
        if (d > maxd || (d != d)) maxd = d, *worst = i;
    }
    return maxabs > 0.0 ? maxd / maxabs : maxd;
}

static void cmp_rel(const char *what, const float *g, const float *c, size_t n, double tol)
{
    size_t w;
    const double e = rel_err(g, c, n, &w);
    check(e <= tol, "%-44s %8zu values: max rel err %.3g (tol %.0e) at %zu: gpu %.9g cpu %.9g", what, n, e, tol, w,
          n ? g[w] : 0.0f, n ? c[w] : 0.0f);
}

/* Distance in units in the last place; +0 and -0 are 0 apart, two NaNs 0, one NaN "infinite". */
static int64_t ulp_dist(float a, float b)
{
    if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b) ? 0 : INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    const int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

static void cmp_ulp(const char *what, const float *g, const float *c, size_t n, int64_t max_ulp)
{
    int64_t worst = 0;
    size_t w = 0, over = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t d = ulp_dist(g[i], c[i]);
        over += d > max_ulp;
        if (d > worst) worst = d, w = i;
    }
    check(over == 0, "%-44s %8zu values: max %lld ulp (tol %lld), %zu over; worst at %zu: gpu %.9g cpu %.9g", what,
          n, (long long)worst, (long long)max_ulp, over, w, n ? g[w] : 0.0f, n ? c[w] : 0.0f);
}

/* Bit for bit. */
static void cmp_bits(const char *what, const void *g, const void *c, size_t n, size_t elem)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)g + i * elem, (const char *)c + i * elem, elem)) {
            if (!bad) first = i;
            bad++;
        }
    if (bad && elem == 4) {
        uint32_t a, b;
        memcpy(&a, (const char *)g + first * 4, 4);
        memcpy(&b, (const char *)c + first * 4, 4);
        check(0, "%-44s %8zu values: %zu differ, first at %zu: gpu 0x%08x cpu 0x%08x", what, n, bad, first, a, b);
    } else {
        check(!bad, "%-44s %8zu values: %zu differ (exact)", what, n, bad);
    }
}

/* Bit for bit, except that a NaN only has to stay a NaN: a GPU multiply returns the canonical NaN
 * (0x7fffffff) where x86 keeps the payload of its NaN operand. */
static void cmp_bits_nan(const char *what, const float *g, const float *c, size_t n)
{
    size_t bad = 0, first = 0, payload = 0;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp(&g[i], &c[i], 4)) continue;
        if (is_nan(g[i]) && is_nan(c[i])) {
            payload++;
            continue;
        }
        if (!bad) first = i;
        bad++;
    }
    uint32_t a = 0, b = 0;
    if (bad) memcpy(&a, &g[first], 4), memcpy(&b, &c[first], 4);
    check(!bad, "%-44s %8zu values: %zu differ (exact; %zu NaNs with another payload)", what, n, bad, payload);
    if (bad) printf("  first at %zu: gpu 0x%08x cpu 0x%08x\n", first, a, b);
}

/* ---------------------------------------------------------------- checks without a GPU */

static void check_no_gpu(void)
{
    const backend_ops *k = backend_cuda_ops();
    check(k != NULL && k->name != NULL && strcmp(k->name, "cuda") == 0,
          "backend_cuda_ops() returns the \"cuda\" table");
    if (!k) return;
    check(!k->host_memory && k->keeps_params16 && !k->grads16,
          "the CUDA table's capabilities: device memory, a 16-bit parameter copy, fp32 gradients");
#define ENTRY(f) {#f, k->f != NULL}
    const struct {
        const char *name;
        int set;
    } e[] = {
        ENTRY(alloc), ENTRY(free), ENTRY(to_device), ENTRY(to_host), ENTRY(to_device_async), ENTRY(sync),
        ENTRY(settle), ENTRY(last_status), ENTRY(stream), ENTRY(set_stream), ENTRY(mem_info), ENTRY(owns),
        ENTRY(gemm), ENTRY(linear_fwd), ENTRY(linear_bwd), ENTRY(conv_ws_floats), ENTRY(conv_fwd),
        ENTRY(conv_bwd_data), ENTRY(conv_bwd_filter), ENTRY(relu_fwd), ENTRY(relu_bwd), ENTRY(maxpool_fwd),
        ENTRY(maxpool_bwd), ENTRY(softmax_xent), ENTRY(sgd), ENTRY(adamw), ENTRY(cast_to16), ENTRY(cast_to32),
        ENTRY(round16), ENTRY(widen_scaled), ENTRY(scale_count), ENTRY(flag_nonfinite), ENTRY(sum_squares),
        ENTRY(accum_grads), ENTRY(scratch16), ENTRY(layer_fc_fwd), ENTRY(layer_fc_bwd), ENTRY(layer_conv_fwd),
        ENTRY(layer_conv_bwd), ENTRY(layer_pool_fwd), ENTRY(layer_pool_bwd), ENTRY(layer_relu_fwd),
        ENTRY(layer_relu_bwd), ENTRY(layer_loss), ENTRY(layer_logits32),
    };
#undef ENTRY
    const int want = 45;
    int missing = 0;
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        if (!e[i].set) printf("  entry %s is NULL\n", e[i].name), missing++;
    check(missing == 0 && sizeof e / sizeof *e == (size_t)want, "all %d entries of the CUDA table are set (%d NULL)",
          want, missing);
    check(k->stream(NULL) == NULL, "the ops start on the default stream");

    /* Workspace sizes are host arithmetic: they must cover the group of images the ops use and
     * never shrink as the batch grows (a workspace for a batch serves every smaller one). */
    conv_shape s = {.batch = 8, .c_in = 64, .h = 64, .w = 64, .c_out = 64, .k = 3, .stride = 1, .pad = 1};
    size_t prev = 0;
    int monotone = 1, covers = 1;
    for (int b = 1; b <= 16; b++) {
        s.batch = b;
        if (conv_shape_init(&s) != DT_OK) {
            check(0, "conv_shape_init: %s", dt_last_error());
            return;
        }
        const size_t ws = k->conv_ws_floats(NULL, &s);
        const size_t one = (size_t)s.h_out * s.w_out * ((size_t)s.c_in * s.k * s.k + s.c_out);
        monotone &= ws >= prev;
        covers &= ws >= one && ws % one == 0;
        prev = ws;
    }
    check(monotone && covers, "conv_ws_floats grows with the batch and holds whole images (%zu floats at 16)", prev);

    /* No-op cases return before touching the device. */
    int correct = -1;
    double loss = -1;
    size_t bad1 = 1, bad2 = 1;
    const dt_status s1 = k->softmax_xent(NULL, NULL, NULL, NULL, 0, 10, 1.0f, &loss, &correct);
    check(s1 == DT_OK && loss == 0.0 && correct == 0, "softmax_xent with batch 0 returns 0 and correct 0");
    const dt_status s2 = k->scale_count(NULL, DT_F32, NULL, 0, 1.0f, &bad1);
    const dt_status s3 = k->scale_count(NULL, DT_F32, NULL, 0, 2.0f, &bad2);
    check(s2 == DT_OK && s3 == DT_OK && bad1 == 0 && bad2 == 0, "the non-finite counters return 0 for n = 0");
}

/* ---------------------------------------------------------------- GEMM and fully connected */

static void check_gemm(void)
{
    const int sizes[][3] = {{3, 5, 7}, {1, 17, 33}, {64, 48, 80}, {130, 1, 257}};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int m = sizes[z][0], n = sizes[z][1], k = sizes[z][2];
                /* row-major storage with padded leading dimensions */
                const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
                const int lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
                const size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
                float *a = fmalloc(na), *b = fmalloc(nb), *c = fmalloc(nc), *g = fmalloc(nc);
                fill(a, na, 1.0f);
                fill(b, nb, 1.0f);
                fill(c, nc, 1.0f);
                float *da = dcopy(a, na), *db = dcopy(b, nb), *dc = dcopy(c, nc);
                CPU(gemm, ta, tb, m, n, k, 0.75f, a, lda, b, ldb, 0.5f, c, ldc);
                GPU(gemm, ta, tb, m, n, k, 0.75f, da, lda, db, ldb, 0.5f, dc, ldc);
                ops_ok("gemm");
                down(g, dc, nc * sizeof *g);
                char what[64];
                snprintf(what, sizeof what, "gemm %dx%dx%d trans %d%d (padded ld)", m, n, k, ta, tb);
                cmp_rel(what, g, c, nc, 1e-4);
                cudaFree(da), cudaFree(db), cudaFree(dc);
                free(a), free(b), free(c), free(g);
            }
}

static void check_linear(void)
{
    const struct {
        int batch, in, out, bias, want_dx, want_db;
    } cfg[] = {{1, 33, 10, 1, 1, 1}, {3, 17, 5, 0, 1, 1}, {64, 200, 100, 1, 0, 1}, {7, 9, 130, 1, 1, 0}};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int B = cfg[z].batch, I = cfg[z].in, O = cfg[z].out;
        const size_t nx = (size_t)B * I, nw = (size_t)O * I, ny = (size_t)B * O;
        float *x = fmalloc(nx), *w = fmalloc(nw), *b = fmalloc(O), *dy = fmalloc(ny);
        float *y = fmalloc(ny), *dx = fmalloc(nx), *dw = fmalloc(nw), *dbias = fmalloc(O);
        float *gy = fmalloc(ny), *gdx = fmalloc(nx), *gdw = fmalloc(nw), *gdb = fmalloc(O);
        fill(x, nx, 1.0f), fill(w, nw, 0.5f), fill(b, O, 1.0f), fill(dy, ny, 1.0f);
        float *d_x = dcopy(x, nx), *d_w = dcopy(w, nw), *d_b = dcopy(b, O), *d_dy = dcopy(dy, ny);
        float *d_y = dfloats(ny), *d_dx = dfloats(nx), *d_dw = dfloats(nw), *d_db = dfloats(O);
        const float *bb = cfg[z].bias ? b : NULL, *d_bb = cfg[z].bias ? d_b : NULL;
        CPU(linear_fwd, x, w, bb, y, B, I, O);
        GPU(linear_fwd, d_x, d_w, d_bb, d_y, B, I, O);
        CPU(linear_bwd, x, w, dy, cfg[z].want_dx ? dx : NULL, dw, cfg[z].want_db ? dbias : NULL, B, I, O);
        GPU(linear_bwd, d_x, d_w, d_dy, cfg[z].want_dx ? d_dx : NULL, d_dw, cfg[z].want_db ? d_db : NULL, B, I,
                            O);
        ops_ok("linear");
        down(gy, d_y, ny * sizeof *gy);
        down(gdw, d_dw, nw * sizeof *gdw);
        char what[80];
        snprintf(what, sizeof what, "linear %dx%d->%d%s y", B, I, O, cfg[z].bias ? "" : " (no bias)");
        cmp_rel(what, gy, y, ny, 1e-4);
        snprintf(what, sizeof what, "linear %dx%d->%d dW", B, I, O);
        cmp_rel(what, gdw, dw, nw, 1e-4);
        if (cfg[z].want_dx) {
            down(gdx, d_dx, nx * sizeof *gdx);
            snprintf(what, sizeof what, "linear %dx%d->%d dx", B, I, O);
            cmp_rel(what, gdx, dx, nx, 1e-4);
        }
        if (cfg[z].want_db) {
            down(gdb, d_db, O * sizeof *gdb);
            snprintf(what, sizeof what, "linear %dx%d->%d db", B, I, O);
            cmp_ulp(what, gdb, dbias, O, 0);
        }
        cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_dy);
        cudaFree(d_y), cudaFree(d_dx), cudaFree(d_dw), cudaFree(d_db);
        free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(dbias);
        free(gy), free(gdx), free(gdw), free(gdb);
    }
}

/* ---------------------------------------------------------------- convolution */

/* One shape: forward, backward-data and backward-filter on both tables, with workspaces sized for
 * `ws_batch` (>= s.batch). Returns nothing; counts failures. With `twice`, the GPU backward-filter
 * runs again and must give the same bits. */
static void check_conv_shape(conv_shape s, int ws_batch, int bias, int twice)
{
    if (conv_shape_init(&s) != DT_OK) {
        check(0, "conv_shape_init: %s", dt_last_error());
        return;
    }
    conv_shape big = s;
    big.batch = ws_batch;
    const size_t cws = cpu_be->ops->conv_ws_floats(cpu_be, &big), gws = gpu_be->ops->conv_ws_floats(gpu_be, &big);
    const size_t nx = (size_t)s.batch * s.c_in * s.h * s.w, nw = (size_t)s.c_out * s.c_in * s.k * s.k;
    const size_t ny = (size_t)s.batch * s.c_out * s.h_out * s.w_out, O = (size_t)s.c_out;
    float *x = fmalloc(nx), *w = fmalloc(nw), *b = fmalloc(O), *dy = fmalloc(ny), *ws = fmalloc(cws);
    float *y = fmalloc(ny), *dx = fmalloc(nx), *dw = fmalloc(nw), *db = fmalloc(O);
    float *gy = fmalloc(ny), *gdx = fmalloc(nx), *gdw = fmalloc(nw), *gdb = fmalloc(O);
    fill(x, nx, 1.0f), fill(w, nw, 0.5f), fill(b, O, 1.0f), fill(dy, ny, 1.0f);
    float *d_x = dcopy(x, nx), *d_w = dcopy(w, nw), *d_b = dcopy(b, O), *d_dy = dcopy(dy, ny);
    float *d_y = dfloats(ny), *d_dx = dfloats(nx), *d_dw = dfloats(nw), *d_db = dfloats(O), *d_ws = dfloats(gws);
    /* poison the GPU outputs so that anything left unwritten shows */
    cuda_ok(cudaMemsetAsync(d_y, 0xff, ny * sizeof(float), stream), "memset");
    cuda_ok(cudaMemsetAsync(d_dx, 0xff, nx * sizeof(float), stream), "memset");
    cuda_ok(cudaMemsetAsync(d_dw, 0xff, nw * sizeof(float), stream), "memset");
    cuda_ok(cudaMemsetAsync(d_db, 0xff, O * sizeof(float), stream), "memset");

    CPU(conv_fwd, &s, x, w, bias ? b : NULL, y, ws);
    CPU(conv_bwd_data, &s, dy, w, dx, ws);
    CPU(conv_bwd_filter, &s, x, dy, dw, bias ? db : NULL, ws);
    GPU(conv_fwd, &s, d_x, d_w, bias ? d_b : NULL, d_y, d_ws);
    GPU(conv_bwd_data, &s, d_dy, d_w, d_dx, d_ws);
    GPU(conv_bwd_filter, &s, d_x, d_dy, d_dw, bias ? d_db : NULL, d_ws);
    ops_ok("conv");
    down(gy, d_y, ny * sizeof *gy);
    down(gdx, d_dx, nx * sizeof *gdx);
    down(gdw, d_dw, nw * sizeof *gdw);
    char tag[96], what[128];
    snprintf(tag, sizeof tag, "conv %dx%dx%dx%d->%d k%d s%d p%d%s", s.batch, s.c_in, s.h, s.w, s.c_out, s.k, s.stride,
             s.pad, ws_batch > s.batch ? " (big ws)" : "");
    snprintf(what, sizeof what, "%s y", tag);
    cmp_rel(what, gy, y, ny, 1e-4);
    snprintf(what, sizeof what, "%s dx", tag);
    cmp_rel(what, gdx, dx, nx, 1e-4);
    snprintf(what, sizeof what, "%s dW", tag);
    cmp_rel(what, gdw, dw, nw, 1e-4);
    if (bias) {
        down(gdb, d_db, O * sizeof *gdb);
        snprintf(what, sizeof what, "%s db", tag);
        cmp_rel(what, gdb, db, O, 1e-5);
    }
    if (twice) {
        float *gdw2 = fmalloc(nw), *gdb2 = fmalloc(O);
        GPU(conv_bwd_filter, &s, d_x, d_dy, d_dw, bias ? d_db : NULL, d_ws);
        ops_ok("conv again");
        down(gdw2, d_dw, nw * sizeof *gdw2);
        down(gdb2, d_db, O * sizeof *gdb2);
        snprintf(what, sizeof what, "%s dW, db rerun", tag);
        cmp_bits(what, gdw2, gdw, nw, 4);
        if (bias) cmp_bits(what, gdb2, gdb, O, 4);
        free(gdw2), free(gdb2);
    }
    cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_dy);
    cudaFree(d_y), cudaFree(d_dx), cudaFree(d_dw), cudaFree(d_db), cudaFree(d_ws);
    free(x), free(w), free(b), free(dy), free(ws), free(y), free(dx), free(dw), free(db);
    free(gy), free(gdx), free(gdw), free(gdb);
}

/* The 16-bit convolution's filter gradient: db equals, bit for bit, the fp32 op's db on the
 * widened dy (the same fixed-order double sums, reading 16-bit dy in place); dW within 1e-4 of
 * the fp32 op's on the widened values (the products are exact either way, only the summation
 * order differs). */
static void check_conv16_filter(conv_shape s)
{
    if (conv_shape_init(&s) != DT_OK) {
        check(0, "conv_shape_init: %s", dt_last_error());
        return;
    }
    const size_t nx = (size_t)s.batch * s.c_in * s.h * s.w, ny = (size_t)s.batch * s.c_out * s.h_out * s.w_out;
    const size_t nw = (size_t)s.c_out * s.c_in * s.k * s.k, no = (size_t)s.c_out;
    float *x = fmalloc(nx), *dy = fmalloc(ny), *xr = fmalloc(nx), *dyr = fmalloc(ny);
    float *dw = fmalloc(nw), *db = fmalloc(no), *dw16 = fmalloc(nw), *db16 = fmalloc(no);
    uint16_t *x16 = xmalloc(nx * 2), *dy16 = xmalloc(ny * 2);
    fill(x, nx, 1.0f);
    fill(dy, ny, 1.0f);
    float *d_ws = dfloats(gpu_be->ops->conv_ws_floats(gpu_be, &s)), *d_dw = dfloats(nw), *d_db = dfloats(no),
          *d_dw16 = dfloats(nw), *d_db16 = dfloats(no);
    for (int bf = 0; bf <= 1; bf++) {
        const dt_dtype t = bf ? DT_BF16 : DT_F16;
        cpu_cast_f32_to_16(t, x, x16, nx);
        cpu_cast_16_to_f32(t, x16, xr, nx);
        cpu_cast_f32_to_16(t, dy, dy16, ny);
        cpu_cast_16_to_f32(t, dy16, dyr, ny);
        float *d_x = dcopy(xr, nx), *d_dy = dcopy(dyr, ny);
        uint16_t *d_x16 = dmalloc(nx * 2), *d_dy16 = dmalloc(ny * 2);
        up(d_x16, x16, nx * 2);
        up(d_dy16, dy16, ny * 2);
        GPU(conv_bwd_filter, &s, d_x, d_dy, d_dw, d_db, d_ws);
        G16(cuda_conv_bwd_filter16(t, &s, d_x16, d_dy16, d_dw16, d_db16, d_ws));
        ops_ok("conv16 filter gradient");
        down(dw, d_dw, nw * 4), down(db, d_db, no * 4), down(dw16, d_dw16, nw * 4), down(db16, d_db16, no * 4);
        char what[128];
        snprintf(what, sizeof what, "conv16 %s %dx%dx%dx%d->%d k%d db", bf ? "bf16" : "fp16", s.batch, s.c_in, s.h,
                 s.w, s.c_out, s.k);
        cmp_bits(what, db16, db, no, 4);
        snprintf(what, sizeof what, "conv16 %s %dx%dx%dx%d->%d k%d dW", bf ? "bf16" : "fp16", s.batch, s.c_in, s.h,
                 s.w, s.c_out, s.k);
        cmp_rel(what, dw16, dw, nw, 1e-4);
        cudaFree(d_x), cudaFree(d_dy), cudaFree(d_x16), cudaFree(d_dy16);
    }
    cudaFree(d_ws), cudaFree(d_dw), cudaFree(d_db), cudaFree(d_dw16), cudaFree(d_db16);
    free(x), free(dy), free(xr), free(dyr), free(dw), free(db), free(dw16), free(db16), free(x16), free(dy16);
}

static void check_conv(void)
{
    /* batch, c_in, h, w, c_out, k, stride, pad */
    const conv_shape shapes[] = {
        {3, 2, 9, 9, 4, 3, 2, 1, 0, 0},   /* stride 2, padding 1, batch 3 */
        {1, 3, 8, 8, 5, 3, 1, 1, 0, 0},   /* "same", batch 1 */
        {2, 4, 7, 7, 3, 1, 1, 0, 0, 0},   /* pointwise */
        {5, 3, 10, 11, 6, 4, 3, 2, 0, 0}, /* non-square, k 4, stride 3, padding 2 */
        {4, 1, 28, 28, 8, 5, 1, 0, 0, 0}, /* MNIST-like first layer */
        {2, 3, 6, 6, 2, 3, 2, 0, 0, 0},   /* stride 2, a trailing row/column no window reads */
        {67, 8, 14, 14, 32, 3, 1, 1, 0, 0}, /* the bias gradient in 33 uneven slices of the batch */
        {4, 16, 3, 3, 2048, 1, 1, 0, 0, 0}, /* 2048 channels: the bias gradient in one pass */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_conv_shape(shapes[i], shapes[i].batch, 1, 0);
    check_conv_shape(shapes[0], shapes[0].batch, 0, 0); /* no bias */
    /* 64x64x64 -> 64, k 3: 2.6M floats of columns per image, so the GPU runs groups of 6 images
     * (6 + 2 for batch 8); then batch 3 in the workspace of batch 8. */
    const conv_shape big = {8, 64, 64, 64, 64, 3, 1, 1, 0, 0};
    check_conv_shape(big, 8, 1, 1);
    conv_shape small = big;
    small.batch = 3;
    check_conv_shape(small, 8, 1, 0);
    const conv_shape f16[] = {{67, 8, 14, 14, 32, 3, 1, 1, 0, 0}, {4, 16, 3, 3, 2048, 1, 1, 0, 0, 0},
                              {5, 3, 10, 11, 6, 4, 3, 2, 0, 0}};
    for (size_t i = 0; i < sizeof f16 / sizeof *f16; i++) check_conv16_filter(f16[i]);
}

/* ---------------------------------------------------------------- ReLU and pooling */

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void check_relu(void)
{
    const size_t n = 100003;
    float *x = fmalloc(n), *y = fmalloc(n), *dy = fmalloc(n), *dx = fmalloc(n), *g = fmalloc(n);
    fill(x, n, 2.0f);
    fill(dy, n, 1.0f);
    const float special[] = {bits_f(0x7fc00000u), bits_f(0xffc00001u), INFINITY, -INFINITY, -0.0f, 0.0f,
                             bits_f(0x00000001u), bits_f(0x80000001u), FLT_MAX, -FLT_MAX};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) x[i * 997 % n] = special[i], x[n - 1 - i] = special[i];
    float *d_x = dcopy(x, n), *d_y = dfloats(n), *d_dy = dcopy(dy, n), *d_dx = dfloats(n);

    CPU(relu_fwd, x, y, n);
    GPU(relu_fwd, d_x, d_y, n);
    ops_ok("relu_fwd");
    down(g, d_y, n * sizeof *g);
    cmp_bits("relu_fwd (NaN, inf, -0, subnormals)", g, y, n, 4);
    GPU(relu_fwd, d_x, d_x, n); /* in place */
    ops_ok("relu_fwd in place");
    down(g, d_x, n * sizeof *g);
    cmp_bits("relu_fwd in place", g, y, n, 4);

    CPU(relu_bwd, y, dy, dx, n);
    GPU(relu_bwd, d_y, d_dy, d_dx, n);
    ops_ok("relu_bwd");
    down(g, d_dx, n * sizeof *g);
    cmp_bits("relu_bwd", g, dx, n, 4);
    GPU(relu_bwd, d_y, d_dy, d_dy, n); /* dx aliases dy */
    ops_ok("relu_bwd in place");
    down(g, d_dy, n * sizeof *g);
    cmp_bits("relu_bwd in place", g, dx, n, 4);
    cudaFree(d_x), cudaFree(d_y), cudaFree(d_dy), cudaFree(d_dx);
    free(x), free(y), free(dy), free(dx), free(g);
}

static void check_maxpool(void)
{
    const struct {
        int b, c, h, w, k, mode; /* mode 0: random; 1: few levels (ties) and NaNs; 2: all equal */
    } cfg[] = {{2, 3, 9, 10, 2, 1}, {1, 2, 11, 11, 3, 1}, {3, 1, 8, 8, 4, 2}, {3, 5, 28, 28, 2, 0},
               {2, 2, 7, 13, 3, 0}, {1, 1, 2, 3, 5, 0} /* no whole window: empty output */};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int B = cfg[z].b, C = cfg[z].c, H = cfg[z].h, W = cfg[z].w, k = cfg[z].k;
        const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * (H / k) * (W / k);
        float *x = fmalloc(nx), *y = fmalloc(ny), *gy = fmalloc(ny), *dy = fmalloc(ny), *dx = fmalloc(nx),
              *gdx = fmalloc(nx);
        int32_t *idx = xmalloc(ny * sizeof *idx + 4), *gidx = xmalloc(ny * sizeof *gidx + 4);
        fill(x, nx, 1.0f);
        fill(dy, ny, 1.0f);
        size_t nans = 0;
        if (cfg[z].mode == 1)
            for (size_t i = 0; i < nx; i++) {
                x[i] = floorf(x[i] * 2.0f); /* -2..1: many ties */
                if (rng_next() % 23 == 0) x[i] = bits_f(0x7fc00000u | (uint32_t)(i & 0xffff)), nans++;
            }
        if (cfg[z].mode == 1 && nx > 2 * (size_t)W) /* two NaNs in the first window: the last one wins */
            x[1] = bits_f(0x7fc00001u), x[W] = bits_f(0xffc00002u), nans += 2;
        if (cfg[z].mode == 2)
            for (size_t i = 0; i < nx; i++) x[i] = 0.5f;
        float *d_x = dcopy(x, nx), *d_y = dfloats(ny), *d_dy = dcopy(dy, ny), *d_dx = dfloats(nx);
        int32_t *d_idx = dmalloc(ny * sizeof *d_idx);
        CPU(maxpool_fwd, x, y, idx, B, C, H, W, k);
        GPU(maxpool_fwd, d_x, d_y, d_idx, B, C, H, W, k);
        CPU(maxpool_bwd, dy, idx, dx, B, C, H, W, k);
        GPU(maxpool_bwd, d_dy, d_idx, d_dx, B, C, H, W, k);
        ops_ok("maxpool");
        down(gy, d_y, ny * sizeof *gy);
        down(gidx, d_idx, ny * sizeof *gidx);
        down(gdx, d_dx, nx * sizeof *gdx);
        char what[96];
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d%s y", B, C, H, W, k,
                 cfg[z].mode == 1 ? " ties+NaN" : cfg[z].mode == 2 ? " all ties" : "");
        cmp_bits(what, gy, y, ny, 4);
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d argmax", B, C, H, W, k);
        cmp_bits(what, gidx, idx, ny, 4);
        snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d dx", B, C, H, W, k);
        cmp_bits(what, gdx, dx, nx, 4);
        /* The 16-bit pooling of mixed precision: the fp32 op on the widened values, rounded back
         * (exact: the maximum is an input, the gradient a copy of dy or +0); NaNs as NaNs. */
        float *x0 = fmalloc(nx), *dy0 = fmalloc(ny + 1), *xr = fmalloc(nx), *dyr = fmalloc(ny + 1);
        memcpy(x0, x, nx * sizeof *x);
        memcpy(dy0, dy, ny * sizeof *dy);
        for (int bf = 0; bf <= 1; bf++) {
            const dt_dtype t = bf ? DT_BF16 : DT_F16;
            /* ny may be 0 (no whole window): dx is then all +0. */
            uint16_t *x16 = xmalloc(nx * 2), *y16 = xmalloc(ny * 2 + 2), *gy16 = xmalloc(ny * 2 + 2),
                     *dy16 = xmalloc(ny * 2 + 2), *dx16 = xmalloc(nx * 2), *gdx16 = xmalloc(nx * 2);
            cpu_cast_f32_to_16(t, x0, x16, nx); /* from the same fp32 values for each type */
            cpu_cast_16_to_f32(t, x16, xr, nx);
            cpu_cast_f32_to_16(t, dy0, dy16, ny);
            cpu_cast_16_to_f32(t, dy16, dyr, ny);
            CPU(maxpool_fwd, xr, y, idx, B, C, H, W, k);
            cpu_cast_f32_to_16(t, y, y16, ny);
            CPU(maxpool_bwd, dyr, idx, dx, B, C, H, W, k);
            cpu_cast_f32_to_16(t, dx, dx16, nx);
            memset(gdx16, 0xff, nx * 2); /* poisoned: every element must be written */
            uint16_t *d_x16 = dmalloc(nx * 2), *d_y16 = dmalloc(ny * 2 + 2), *d_dy16 = dmalloc(ny * 2 + 2),
                     *d_dx16 = dmalloc(nx * 2);
            up(d_dx16, gdx16, nx * 2);
            up(d_x16, x16, nx * 2);
            up(d_dy16, dy16, ny * 2);
            G16(cuda_maxpool16_fwd(t, d_x16, d_y16, d_idx, B, C, H, W, k));
            G16(cuda_maxpool16_bwd(d_dy16, d_idx, d_dx16, B, C, H, W, k));
            ops_ok("maxpool16");
            down(gy16, d_y16, ny * 2);
            down(gidx, d_idx, ny * sizeof *gidx);
            down(gdx16, d_dx16, nx * 2);
            const uint16_t inf = bf ? 0x7f80u : 0x7c00u;
            size_t bad = 0;
            for (size_t i = 0; i < ny; i++) {
                const int n1 = (gy16[i] & 0x7fffu) > inf, n2 = (y16[i] & 0x7fffu) > inf;
                bad += n1 != n2 || (!n1 && gy16[i] != y16[i]) || gidx[i] != idx[i];
            }
            for (size_t i = 0; i < nx; i++) bad += gdx16[i] != dx16[i];
            check(bad == 0, "maxpool16 %s %dx%dx%dx%d k%d: y, argmax and dx as the fp32 op on widened values "
                  "(%zu differ)", bf ? "bf16" : "fp16", B, C, H, W, k, bad);
            cudaFree(d_x16), cudaFree(d_y16), cudaFree(d_dy16), cudaFree(d_dx16);
            free(x16), free(y16), free(gy16), free(dy16), free(dx16), free(gdx16);
        }
        free(x0), free(dy0), free(xr), free(dyr);
        cudaFree(d_x), cudaFree(d_y), cudaFree(d_dy), cudaFree(d_dx), cudaFree(d_idx);
        free(x), free(y), free(gy), free(dy), free(dx), free(gdx), free(idx), free(gidx);
    }
}

/* ---------------------------------------------------------------- 16-bit ops of mixed precision */

/* n random values of type t: x (fp32, exactly representable in t) and their 16-bit patterns. */
static void fill16(dt_dtype t, float *x, uint16_t *x16, size_t n, float scale)
{
    fill(x, n, scale);
    cpu_cast_f32_to_16(t, x, x16, n);
    cpu_cast_16_to_f32(t, x16, x, n);
}

static uint16_t *dcopy16(const uint16_t *h, size_t n)
{
    uint16_t *d = dmalloc(n * 2 + 2);
    up(d, h, n * 2);
    return d;
}

static void check_amp16(void)
{
    for (int bf = 0; bf <= 1; bf++) {
        const dt_dtype t = bf ? DT_BF16 : DT_F16;
        const char *tn = bf ? "bf16" : "fp16";
        const double tol16 = bf ? 8e-3 : 1e-3;
        char what[128];

        /* GEMM: every transpose, fp32 result (beta 0 and 1) and 16-bit result. */
        const int M = 37, N = 29, K = 45;
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++)
                for (int out = 0; out < 3; out++) { /* 0: fp32 beta 0; 1: fp32 beta 1; 2: 16-bit */
                    const int lda = ta ? M : K, ldb = tb ? K : N;
                    float *a = fmalloc((size_t)M * K), *b = fmalloc((size_t)K * N), *c = fmalloc((size_t)M * N),
                          *g = fmalloc((size_t)M * N);
                    uint16_t *a16 = xmalloc((size_t)M * K * 2), *b16 = xmalloc((size_t)K * N * 2),
                             *g16 = xmalloc((size_t)M * N * 2);
                    fill16(t, a, a16, (size_t)M * K, 1.0f);
                    fill16(t, b, b16, (size_t)K * N, 1.0f);
                    fill(c, (size_t)M * N, 1.0f);
                    uint16_t *d_a = dcopy16(a16, (size_t)M * K), *d_b = dcopy16(b16, (size_t)K * N);
                    float *d_c = dcopy(c, (size_t)M * N);
                    const float beta = out == 1 ? 1.0f : 0.0f;
                    G16(cuda_gemm16(t, ta, tb, M, N, K, d_a, lda, d_b, ldb, beta, d_c, out == 2 ? t : DT_F32, N));
                    CPU(gemm, ta, tb, M, N, K, 1.0f, a, lda, b, ldb, beta, c, N);
                    ops_ok("gemm16");
                    if (out == 2) {
                        down(g16, d_c, (size_t)M * N * 2);
                        cpu_cast_16_to_f32(t, g16, g, (size_t)M * N);
                    } else {
                        down(g, d_c, (size_t)M * N * 4);
                    }
                    snprintf(what, sizeof what, "gemm16 %s %s%s -> %s%s", tn, ta ? "T" : "N", tb ? "T" : "N",
                             out == 2 ? tn : "fp32", out == 1 ? " beta 1" : "");
                    cmp_rel(what, g, c, (size_t)M * N, out == 2 ? tol16 : 1e-4);
                    cudaFree(d_a), cudaFree(d_b), cudaFree(d_c);
                    free(a), free(b), free(c), free(g), free(a16), free(b16), free(g16);
                }

        /* Elementwise: rounding, ReLU forward and backward, bias-and-round, column sums. */
        const int R = 19, C = 53;
        const size_t n = (size_t)R * C;
        float *x = fmalloc(n), *r = fmalloc(n), *gr = fmalloc(n), *y32 = fmalloc(n), *bb = fmalloc(C),
              *db = fmalloc(C), *gdb = fmalloc(C);
        uint16_t *x16 = xmalloc(n * 2), *dy16 = xmalloc(n * 2), *y16 = xmalloc(n * 2), *g16 = xmalloc(n * 2),
                 *b16 = xmalloc(C * 2), *dx16 = xmalloc(n * 2);
        fill(r, n, 3.0f); /* arbitrary fp32 values to round */
        fill16(t, x, x16, n, 2.0f);
        x16[0] = 0x8000u; /* -0 */
        x16[1] = bf ? 0x7fc0u : 0x7e00u; /* NaN passes ReLU */
        fill16(t, y32, dy16, n, 1.0f);
        fill16(t, bb, b16, (size_t)C, 1.0f);
        fill(y32, n, 4.0f);
        float *d_r = dcopy(r, n), *d_y32 = dcopy(y32, n), *d_db = dfloats(C);
        uint16_t *d_x16 = dcopy16(x16, n), *d_dy16 = dcopy16(dy16, n), *d_y16 = dmalloc(n * 2), *d_b16 = dcopy16(b16, C),
                 *d_dx16 = dmalloc(n * 2);
        GPU(round16, t, d_r, d_r, n);
        cpu_round16(t, r, r, n);
        ops_ok("round16");
        down(gr, d_r, n * 4);
        snprintf(what, sizeof what, "round16 %s", tn);
        cmp_bits(what, gr, r, n, 4);

        /* Offset 0: 16-byte aligned, eight values a thread and the last n % 8 one by one;
         * offset 1: off alignment, all one by one. */
        for (int off = 0; off < 2; off++) {
            const char *how = off ? " unaligned" : "";
            G16(cuda_relu16_fwd(t, d_x16 + off, d_y16 + off, n - off));
            cpu_relu16_fwd(t, x16 + off, y16 + off, n - off);
            G16(cuda_relu16_bwd(t, d_y16 + off, d_dy16 + off, d_dx16 + off, n - off));
            cpu_relu16_bwd(t, y16 + off, dy16 + off, dx16 + off, n - off);
            ops_ok(off ? "relu16 unaligned" : "relu16");
            down(g16, d_y16, n * 2);
            snprintf(what, sizeof what, "relu16 %s y%s", tn, how);
            cmp_bits(what, g16, y16, n, 2);
            down(g16, d_dx16, n * 2);
            snprintf(what, sizeof what, "relu16 %s dx%s", tn, how);
            cmp_bits(what, g16, dx16, n, 2);
        }

        G16(cuda_bias_to16(t, d_y32, d_b16, d_y16, R, C));
        for (size_t i = 0; i < n; i++) r[i] = y32[i] + bb[i % C];
        cpu_cast_f32_to_16(t, r, y16, n);
        ops_ok("bias_to16");
        down(g16, d_y16, n * 2);
        snprintf(what, sizeof what, "bias_to16 %s", tn);
        cmp_bits(what, g16, y16, n, 2);

        G16(cuda_col_sums16(t, d_dy16, R, C, d_db));
        cpu_cast_16_to_f32(t, dy16, r, n);
        for (int j = 0; j < C; j++) {
            float acc = 0.0f;
            for (int i = 0; i < R; i++) acc += r[(size_t)i * C + j];
            db[j] = acc;
        }
        ops_ok("col_sums16");
        down(gdb, d_db, C * 4);
        snprintf(what, sizeof what, "col_sums16 %s", tn);
        cmp_bits(what, gdb, db, C, 4);
        cudaFree(d_r), cudaFree(d_y32), cudaFree(d_db), cudaFree(d_x16), cudaFree(d_dy16), cudaFree(d_y16),
            cudaFree(d_b16), cudaFree(d_dx16);
        free(x), free(r), free(gr), free(y32), free(bb), free(db), free(gdb), free(x16), free(dy16), free(y16),
            free(g16), free(b16), free(dx16);

        /* Convolutions: y and dx rounded to t once, against the fp32 CPU ops on the widened values. */
        /* The last one runs in image groups of 6 + 2 (see check_conv). */
        const conv_shape shapes[] = {{3, 2, 9, 9, 4, 3, 2, 1, 0, 0},   {5, 3, 10, 11, 6, 4, 3, 2, 0, 0},
                                     {2, 4, 7, 7, 3, 1, 1, 0, 0, 0},    {4, 8, 14, 14, 16, 3, 1, 1, 0, 0},
                                     {8, 64, 64, 64, 64, 3, 1, 1, 0, 0}};
        for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++) {
            conv_shape cs = shapes[z];
            if (conv_shape_init(&cs) != DT_OK) {
                check(0, "conv_shape_init: %s", dt_last_error());
                continue;
            }
            const size_t nx = (size_t)cs.batch * cs.c_in * cs.h * cs.w,
                         ny = (size_t)cs.batch * cs.c_out * cs.h_out * cs.w_out,
                         nw = (size_t)cs.c_out * cs.c_in * cs.k * cs.k, no = (size_t)cs.c_out;
            float *cx = fmalloc(nx), *cw = fmalloc(nw + no), *cdy = fmalloc(ny), *cy = fmalloc(ny), *cdx = fmalloc(nx),
                  *gy = fmalloc(ny), *gdx = fmalloc(nx);
            uint16_t *cx16 = xmalloc(nx * 2), *cw16 = xmalloc((nw + no) * 2), *cdy16 = xmalloc(ny * 2),
                     *gy16 = xmalloc(ny * 2), *gdx16 = xmalloc(nx * 2);
            fill16(t, cx, cx16, nx, 1.0f);
            fill16(t, cw, cw16, nw + no, 0.5f); /* weights, then the bias */
            fill16(t, cdy, cdy16, ny, 1.0f);
            float *cws = fmalloc(cpu_be->ops->conv_ws_floats(cpu_be, &cs));
            CPU(conv_fwd, &cs, cx, cw, cw + nw, cy, cws);
            CPU(conv_bwd_data, &cs, cdy, cw, cdx, cws);
            uint16_t *d_cx = dcopy16(cx16, nx), *d_cw = dcopy16(cw16, nw + no), *d_cdy = dcopy16(cdy16, ny),
                     *d_gy = dmalloc(ny * 2), *d_gdx = dmalloc(nx * 2);
            float *d_y32 = dfloats(ny), *d_dx32 = dfloats(nx);
            float *d_ws = dfloats(gpu_be->ops->conv_ws_floats(gpu_be, &cs));
            G16(cuda_conv_fwd16(t, &cs, d_cx, d_cw, d_cw + nw, d_y32, d_gy, d_ws));
            G16(cuda_conv_bwd_data16(t, &cs, d_cdy, d_cw, d_dx32, d_gdx, d_ws));
            ops_ok("conv16");
            down(gy16, d_gy, ny * 2);
            down(gdx16, d_gdx, nx * 2);
            cpu_cast_16_to_f32(t, gy16, gy, ny);
            cpu_cast_16_to_f32(t, gdx16, gdx, nx);
            snprintf(what, sizeof what, "conv16 %s %dx%dx%dx%d->%d k%d s%d y", tn, cs.batch, cs.c_in, cs.h, cs.w,
                     cs.c_out, cs.k, cs.stride);
            cmp_rel(what, gy, cy, ny, tol16);
            snprintf(what, sizeof what, "conv16 %s %dx%dx%dx%d->%d k%d s%d dx", tn, cs.batch, cs.c_in, cs.h, cs.w,
                     cs.c_out, cs.k, cs.stride);
            cmp_rel(what, gdx, cdx, nx, tol16);
            cudaFree(d_cx), cudaFree(d_cw), cudaFree(d_cdy), cudaFree(d_gy), cudaFree(d_gdx), cudaFree(d_y32),
                cudaFree(d_dx32), cudaFree(d_ws);
            free(cx), free(cw), free(cdy), free(cy), free(cdx), free(gy), free(gdx), free(cx16), free(cw16),
                free(cdy16), free(gy16), free(gdx16), free(cws);
        }
    }
}

/* ---------------------------------------------------------------- softmax cross-entropy */

static void check_xent(void)
{
    const struct {
        int batch, classes;
    } cfg[] = {{1, 10}, {3, 37}, {128, 10}, {64, 1000}, {5, 1}, {1000, 33}};
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        const int B = cfg[z].batch, C = cfg[z].classes;
        const size_t n = (size_t)B * C;
        const float gs = 1.0f / (float)B;
        float *x = fmalloc(n), *d = fmalloc(n), *gd = fmalloc(n);
        int32_t *lab = xmalloc((size_t)B * sizeof *lab);
        fill(x, n, 8.0f);
        for (int i = 0; i < B; i++) lab[i] = (int32_t)(rng_next() % (uint64_t)C);
        /* row 0: all equal (argmax 0); row 1: the maximum twice (argmax the first); a third of
         * the labels on the argmax so that the count is not trivially 0 */
        for (int j = 0; j < C; j++) x[j] = 0.25f;
        if (B > 1 && C > 3) x[C + 1] = x[C + 3] = 20.0f, lab[1] = 1;
        for (int i = 2; i < B; i += 3) {
            int am = 0;
            for (int j = 1; j < C; j++)
                if (x[(size_t)i * C + j] > x[(size_t)i * C + am]) am = j;
            lab[i] = am;
        }
        float *d_x = dcopy(x, n), *d_d = dfloats(n);
        int32_t *d_lab = dmalloc((size_t)B * sizeof *d_lab);
        up(d_lab, lab, (size_t)B * sizeof *lab);
        int cc = -1, gc = -1, gc2 = -1, gc3 = -1;
        const double cl = xent(cpu_be, x, lab, d, B, C, gs, &cc);
        const double gl = xent(gpu_be, d_x, d_lab, d_d, B, C, gs, &gc);
        ops_ok("softmax_xent");
        down(gd, d_d, n * sizeof *gd);
        const double gl2 = xent(gpu_be, d_x, d_lab, NULL, B, C, gs, &gc2); /* no dlogits */
        const double gl3 = xent(gpu_be, d_x, d_lab, d_d, B, C, gs, &gc3); /* again */
        ops_ok("softmax_xent again");
        const double rel = fabs(gl - cl) / (fabs(cl) > 1e-30 ? fabs(cl) : 1.0);
        check(rel <= 1e-5 && gc == cc, "softmax_xent %dx%d: loss gpu %.10g cpu %.10g (rel err %.3g, tol 1e-05), "
              "correct gpu %d cpu %d", B, C, gl, cl, rel, gc, cc);
        check(memcmp(&gl, &gl2, sizeof gl) == 0 && memcmp(&gl, &gl3, sizeof gl) == 0 && gc2 == gc && gc3 == gc,
              "softmax_xent %dx%d: the same loss and count without dlogits and when rerun", B, C);
        /* dlogits in [-gs, gs]: absolute error against gs */
        double worst = 0.0;
        size_t wi = 0;
        for (size_t i = 0; i < n; i++) {
            const double e = fabs((double)gd[i] - (double)d[i]);
            if (!(e <= worst)) worst = e, wi = i;
        }
        check(worst <= 2e-6 * gs, "softmax_xent %dx%d dlogits: max abs err %.3g = %.3g x grad_scale (tol 2e-06) at "
              "%zu: gpu %.9g cpu %.9g", B, C, worst, worst / gs, wi, gd[wi], d[wi]);
        cudaFree(d_x), cudaFree(d_d), cudaFree(d_lab);
        free(x), free(d), free(gd), free(lab);
    }
}

/* ---------------------------------------------------------------- optimizers */

static void check_sgd(void)
{
    const size_t n = 100003;
    const struct {
        float momentum, wd;
        int first;
    } cfg[] = {{0.0f, 5e-4f, 0}, {0.9f, 5e-4f, 1}, {0.9f, 5e-4f, 0}, {0.9f, 0.0f, 0}, {0.5f, 1e-2f, 1}};
    float *p = fmalloc(n), *gr = fmalloc(n), *buf = fmalloc(n), *gp = fmalloc(n), *gb = fmalloc(n);
    for (size_t z = 0; z < sizeof cfg / sizeof *cfg; z++) {
        fill(p, n, 1.0f), fill(gr, n, 0.1f), fill(buf, n, 0.3f); /* buf: garbage for a first step */
        float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_b = dcopy(buf, n);
        const int plain = cfg[z].momentum == 0.0f;
        CPU(sgd, p, gr, plain ? NULL : buf, n, 0.1f, cfg[z].momentum, cfg[z].wd, cfg[z].first);
        GPU(sgd, d_p, d_g, plain ? NULL : d_b, n, 0.1f, cfg[z].momentum, cfg[z].wd, cfg[z].first);
        ops_ok("sgd");
        down(gp, d_p, n * sizeof *gp);
        down(gb, d_b, n * sizeof *gb);
        char what[96];
        snprintf(what, sizeof what, "sgd momentum %g wd %g%s p", cfg[z].momentum, cfg[z].wd,
                 cfg[z].first ? " first" : "");
        cmp_ulp(what, gp, p, n, 1);
        snprintf(what, sizeof what, "sgd momentum %g wd %g%s buf%s", cfg[z].momentum, cfg[z].wd,
                 cfg[z].first ? " first" : "", plain ? " (untouched)" : "");
        cmp_ulp(what, gb, buf, n, plain ? 0 : 1);
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_b);
    }
    free(p), free(gr), free(buf), free(gp), free(gb);
}

static void check_adamw(void)
{
    const size_t n = 100003;
    const int steps[] = {1, 7};
    float *p = fmalloc(n), *gr = fmalloc(n), *m = fmalloc(n), *v = fmalloc(n);
    float *gp = fmalloc(n), *gm = fmalloc(n), *gv = fmalloc(n);
    for (size_t z = 0; z < 2; z++) {
        const int t = steps[z];
        fill(p, n, 1.0f), fill(gr, n, 0.1f);
        for (size_t i = 0; i < n; i++) {
            m[i] = t == 1 ? 0.0f : urand() * 0.01f;
            const float u = urand();
            v[i] = t == 1 ? 0.0f : u * u * 1e-3f;
        }
        gr[0] = 0.0f, p[1] = 0.0f; /* a zero gradient (m, v of 0 on step 1) and a zero weight */
        float *d_p = dcopy(p, n), *d_g = dcopy(gr, n), *d_m = dcopy(m, n), *d_v = dcopy(v, n);
        CPU(adamw, p, gr, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
        GPU(adamw, d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
        ops_ok("adamw");
        down(gp, d_p, n * sizeof *gp);
        down(gm, d_m, n * sizeof *gm);
        down(gv, d_v, n * sizeof *gv);
        char what[64];
        snprintf(what, sizeof what, "adamw step %d p", t);
        cmp_ulp(what, gp, p, n, 2);
        snprintf(what, sizeof what, "adamw step %d m", t);
        cmp_ulp(what, gm, m, n, 1);
        snprintf(what, sizeof what, "adamw step %d v", t);
        cmp_ulp(what, gv, v, n, 1);
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_m), cudaFree(d_v);
    }
    free(p), free(gr), free(m), free(v), free(gp), free(gm), free(gv);
}

/* ---------------------------------------------------------------- non-finite counters */

static void check_nonfinite(void)
{
    const size_t sizes[] = {1, 5, 1000, ((size_t)1 << 20) + 7}; /* the last > 1024 blocks x 256 threads */
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        const size_t n = sizes[z];
        float *x = fmalloc(n), *c = fmalloc(n), *g = fmalloc(n);
        fill(x, n, 1.0f);
        /* the tail: inf, -inf, NaN, -NaN; values that overflow when scaled by 4; one NaN inside */
        const float tail[] = {INFINITY, -INFINITY, bits_f(0x7fc00000u), bits_f(0xffc00123u), 1e38f, -2e38f};
        for (size_t i = 0; i < sizeof tail / sizeof *tail && i < n; i++) x[n - 1 - i] = tail[i];
        if (n > 100) x[n / 2] = bits_f(0x7f800001u);
        float *d = dcopy(x, n);
        const size_t want = cpu_count_nonfinite(x, n), got = gcount(d, n, 1.0f);
        ops_ok("cuda_count_nonfinite");
        check(got == want, "cuda_count_nonfinite n %zu: %zu (cpu %zu)", n, got, want);
        memcpy(c, x, n * sizeof *c);
        const size_t want2 = cpu_unscale_count_nonfinite(c, n, 4.0f), got2 = gcount(d, n, 4.0f);
        ops_ok("cuda_unscale_count_nonfinite");
        down(g, d, n * sizeof *g);
        check(got2 == want2, "cuda_unscale_count_nonfinite n %zu x4: %zu (cpu %zu)", n, got2, want2);
        char what[64];
        snprintf(what, sizeof what, "cuda_unscale_count_nonfinite n %zu data", n);
        cmp_bits_nan(what, g, c, n);
        cudaFree(d);
        free(x), free(c), free(g);
    }
}

/* ---------------------------------------------------------------- error recording */

/* cuBLAS prints "** On entry to SGEMM parameter number 10 had an illegal value" to stderr here:
 * that is the expected rejection. */
static void check_errors(void)
{
    float *d = dfloats(64);
    /* lda 0 for a 4x4x4 product: cuBLAS rejects it before touching memory, and the entry says so */
    const dt_status st = gpu_be->ops->gemm(gpu_be, 0, 0, 4, 4, 4, 1.0f, d, 0, d + 16, 4, 0.0f, d + 32, 4);
    check(st == DT_ERR_DEVICE && strstr(dt_last_error(), "cublasSgemm") != NULL,
          "a rejected GEMM returns its status: %d, \"%s\"", (int)st, dt_last_error());
    cuda_ok(cudaStreamSynchronize(stream), "sync");
    check(gpu_be->ops->last_status(gpu_be) == DT_OK, "a rejected call leaves no error behind for later calls");
    cudaFree(d);
}

int main(void)
{
    cpu_be = backend_cpu();
    check_no_gpu();
    if (failures) { /* an incomplete table: the GPU checks would crash on a NULL entry */
        printf("FAILED\n");
        return 1;
    }

    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        if (e != cudaSuccess)
            printf("SKIP: no CUDA device (cudaGetDeviceCount: %s (%d): %s)\n", cudaGetErrorName(e), (int)e,
                   cudaGetErrorString(e));
        else
            printf("SKIP: no CUDA device (cudaGetDeviceCount found 0 devices)\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    dt_status st = backend_cuda(&gpu_be);
    if (st == DT_OK) st = gpu_be->ops->set_stream(gpu_be, stream);
    check(st == DT_OK && gpu_be->ops->stream(gpu_be) == (void *)stream, "backend_cuda and set_stream: %s",
          st == DT_OK ? "ok" : dt_last_error());
    if (st != DT_OK) {
        printf("FAILED\n");
        return 1;
    }

    check_gemm();
    check_linear();
    check_conv();
    check_relu();
    check_maxpool();
    check_amp16();
    check_xent();
    check_sgd();
    check_adamw();
    check_nonfinite();
    check_errors();

    ops_ok("the end");
    st_ok("set_stream back to the default", gpu_be->ops->set_stream(gpu_be, NULL));
    cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
