/*
 * cuda_ops_fixture.h - what the checks of the CUDA backend (kernels/cuda/) against the CPU backend
 * (backend_cpu(), the oracle that the unit tests check) share: tests/gpu/test_cuda_ops_*.c, one
 * executable per op family. Here: fixed-seed random inputs, host and device buffers, the comparisons
 * (relative error, ulps, bit for bit, bit for bit up to NaN payloads), each of which prints one
 * line "ok" or "FAIL" with its worst error, and cuda_ops_main, which every file's main calls.
 *
 * Exit status of each executable: 0 passed, 1 failed (each failure printed with its worst error),
 * 77 skipped with a line "SKIP: no CUDA device (...)" when cudaGetDeviceCount fails or finds none.
 * The checks that need no GPU (test_cuda_ops_table.c: the table is complete, the workspace sizes,
 * the no-op cases) run before the device is looked for, so they can fail on a machine without one;
 * every other executable first makes sure that the table has no NULL entry. Each file states its
 * tolerances at its top.
 */
#ifndef DT_TESTS_GPU_CUDA_OPS_FIXTURE_H
#define DT_TESTS_GPU_CUDA_OPS_FIXTURE_H

#include <cuda_runtime.h>

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
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

/* One executable's state: its failure count, the non-blocking stream the GPU table runs on, both
 * tables, and the generator's state (fixed seed: every run sees the same data). */
static int failures;
static cudaStream_t stream;
static backend *gpu_be, *cpu_be;
static uint64_t seed = 0x0d7a1cafe5eedull;

/* ---------------------------------------------------------------- helpers */

static inline uint64_t rng_next(void)
{
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static inline float urand(void) { return (float)((double)(rng_next() >> 40) * (1.0 / 8388608.0) - 1.0); }

static inline void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = urand() * scale;
}

static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static inline float *fmalloc(size_t n) { return xmalloc(n * sizeof(float)); }

/* Exits on a CUDA error outside the code under test: nothing after it would mean anything. */
static inline void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "FAIL: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
        exit(1);
    }
}

static inline void *dmalloc(size_t bytes)
{
    void *p = NULL;
    cuda_ok(cudaMalloc(&p, bytes ? bytes : 4), "cudaMalloc");
    return p;
}

static inline float *dfloats(size_t n) { return dmalloc(n * sizeof(float)); }

static inline void up(void *d, const void *h, size_t bytes)
{
    cuda_ok(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream), "copy to the device");
}

/* Copies back and synchronizes. */
static inline void down(void *h, const void *d, size_t bytes)
{
    cuda_ok(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, stream), "copy to the host");
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

/* A device copy of h[0..n). */
static inline float *dcopy(const float *h, size_t n)
{
    float *d = dfloats(n);
    up(d, h, n * sizeof *h);
    return d;
}

static inline void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void check(int ok, const char *fmt, ...)
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
static inline void ops_ok(const char *what)
{
    cuda_ok(cudaStreamSynchronize(stream), what);
    const dt_status st = gpu_be->ops->sync(gpu_be);
    if (st != DT_OK) check(0, "%s: the CUDA backend's stream failed: %s", what, dt_last_error());
}

/* Every entry returns its status: a failure fails the check at once, with the message. */
static inline void st_ok(const char *what, dt_status st)
{
    if (st != DT_OK) check(0, "%s returned %d: %s", what, (int)st, dt_last_error());
}
#define GPU(op, ...) st_ok(#op, gpu_be->ops->op(gpu_be, __VA_ARGS__))
#define CPU(op, ...) st_ok(#op " (cpu)", cpu_be->ops->op(cpu_be, __VA_ARGS__))
#define G16(call) st_ok(#call, call)

static inline int is_nan(float v) { return v != v; }

/* max |g - c| / max |c| (a NaN on one side only, or a NaN error, is infinite). */
static inline double rel_err(const float *g, const float *c, size_t n, size_t *worst)
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

static inline void cmp_rel(const char *what, const float *g, const float *c, size_t n, double tol)
{
    size_t w;
    const double e = rel_err(g, c, n, &w);
    check(e <= tol, "%-44s %8zu values: max rel err %.3g (tol %.0e) at %zu: gpu %.9g cpu %.9g", what, n, e, tol, w,
          n ? g[w] : 0.0f, n ? c[w] : 0.0f);
}

/* Distance in units in the last place; +0 and -0 are 0 apart, two NaNs 0, one NaN "infinite". */
static inline int64_t ulp_dist(float a, float b)
{
    if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b) ? 0 : INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    const int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

static inline void cmp_ulp(const char *what, const float *g, const float *c, size_t n, int64_t max_ulp)
{
    int64_t worst = 0;
    size_t w = 0, over = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t d = ulp_dist(g[i], c[i]);
        over += d > max_ulp;
        if (d > worst) worst = d, w = i;
    }
    check(over == 0, "%-44s %8zu values: max %lld ulp (tol %lld), %zu over; worst at %zu: gpu %.9g cpu %.9g", what, n,
          (long long)worst, (long long)max_ulp, over, w, n ? g[w] : 0.0f, n ? c[w] : 0.0f);
}

/* Bit for bit. */
static inline void cmp_bits(const char *what, const void *g, const void *c, size_t n, size_t elem)
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
static inline void cmp_bits_nan(const char *what, const float *g, const float *c, size_t n)
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

static inline float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- the table and the runner */

/* Prints each NULL entry of the CUDA table k; returns how many are NULL, and through *listed how
 * many entries this list names (test_cuda_ops_table checks that against the table's size,
 * cuda_table_size, so an entry added to backend_ops and not here fails it). */
static inline int cuda_table_missing(const backend_ops *k, int *listed)
{
#define ENTRY(f)                                                                                                       \
    {                                                                                                                  \
#f, k->f != NULL                                                                                               \
    }
    const struct {
        const char *name;
        int set;
    } e[] = {
        ENTRY(alloc),
        ENTRY(free),
        ENTRY(host_alloc),
        ENTRY(host_free),
        ENTRY(to_device),
        ENTRY(to_host),
        ENTRY(to_device_async),
        ENTRY(copy_in),
        ENTRY(copy_in_join),
        ENTRY(copy_in_release),
        ENTRY(sync),
        ENTRY(settle),
        ENTRY(last_status),
        ENTRY(stream),
        ENTRY(set_stream),
        ENTRY(side_begin),
        ENTRY(side_end),
        ENTRY(side_join),
        ENTRY(mem_info),
        ENTRY(owns),
        ENTRY(gemm),
        ENTRY(linear_fwd),
        ENTRY(linear_bwd),
        ENTRY(conv_ws_floats),
        ENTRY(conv_fwd),
        ENTRY(conv_bwd_data),
        ENTRY(conv_bwd_filter),
        ENTRY(relu_fwd),
        ENTRY(relu_bwd),
        ENTRY(maxpool_fwd),
        ENTRY(maxpool_bwd),
        ENTRY(softmax_xent),
        ENTRY(loss_wait),
        ENTRY(sgd),
        ENTRY(adamw),
        ENTRY(cast_to16),
        ENTRY(cast_to32),
        ENTRY(round16),
        ENTRY(scale_count),
        ENTRY(found_inf_queue),
        ENTRY(found_inf_wait),
        ENTRY(found_inf_release),
        ENTRY(flag_nonfinite),
        ENTRY(sum_squares),
        ENTRY(accum_grads),
        ENTRY(scratch16),
        ENTRY(fc_relu_mask_bytes),
        ENTRY(layer_fc_fwd),
        ENTRY(layer_fc_bwd),
        ENTRY(layer_conv_fwd),
        ENTRY(layer_conv_bwd),
        ENTRY(layer_pool_fwd),
        ENTRY(layer_pool_bwd),
        ENTRY(layer_relu_fwd),
        ENTRY(layer_relu_bwd),
        ENTRY(layer_loss),
        ENTRY(layer_logits32),
        ENTRY(trace_mark),
        ENTRY(trace_flush),
        ENTRY(graph_begin),
        ENTRY(graph_end),
        ENTRY(graph_launch),
        ENTRY(graph_free),
        ENTRY(synth_batch),
    };
#undef ENTRY
    int missing = 0;
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        if (!e[i].set) printf("  entry %s is NULL\n", e[i].name), missing++;
    *listed = (int)(sizeof e / sizeof *e);
    return missing;
}

/* The number of entries of backend_ops: the function pointers from alloc, the first, to the end. */
static inline int cuda_table_size(void)
{
    return (int)((sizeof(backend_ops) - offsetof(backend_ops, alloc)) / sizeof(void (*)(void)));
}

typedef void (*cuda_check_fn)(void);

/* The whole program of one test executable: host_checks (may be NULL) without a GPU, then, where a
 * device exists, the CUDA backend on a non-blocking stream and checks[0..n) in order. Returns the
 * exit status: 0 passed, 1 failed, 77 no CUDA device. */
static inline int cuda_ops_main(cuda_check_fn host_checks, const cuda_check_fn *checks, size_t n)
{
    cpu_be = backend_cpu();
    if (host_checks) {
        host_checks();
    } else {
        const backend_ops *k = backend_cuda_ops();
        int listed = 0;
        if (k == NULL || cuda_table_missing(k, &listed) != 0)
            check(0, "the CUDA table is incomplete (test_cuda_ops_table says which entries)");
    }
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
    if (st != DT_OK) {
        check(0, "backend_cuda and set_stream: %s", dt_last_error());
        printf("FAILED\n");
        return 1;
    }

    for (size_t i = 0; i < n; i++) checks[i]();

    ops_ok("the end");
    st_ok("set_stream back to the default", gpu_be->ops->set_stream(gpu_be, NULL));
    cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}

#endif
