/*
 * test_coll.c - collectives at any rank count, checked element by element against exact values.
 *
 * Allreduce (sum and average) in place on fp32, fp16 and bf16 at counts 0, 1, 7, 1,000,003 and
 * 64 MiB; broadcast from the last rank; barrier; bad arguments. Inputs are small integers so every
 * expected sum and average is exactly representable in all three types and any wrong element is
 * a real error. `--device cuda` runs the same on GPU buffers (exit 77 = SKIP without a GPU).
 */
#include "dtrain.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int failures, checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL rank %d: ", rank);                                               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

static int rank, world, on_gpu;

/* Exact conversions for the small integers and quarters used here. */
static uint16_t to16(dt_dtype t, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    if (t == DT_BF16) return (uint16_t)(b >> 16); /* exact: these values have <= 8 mantissa bits */
    /* fp16 of a float with few mantissa bits and |v| in [2^-14, 65504]: rebias exponent. */
    if (v == 0.0f) return (uint16_t)((b >> 16) & 0x8000);
    uint32_t sign = (b >> 16) & 0x8000, exp = (b >> 23) & 0xff, man = b & 0x7fffff;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}

static float value(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 3) % 16) - 8); }

static double expected(size_t i, dt_redop op)
{
    double s = 0;
    for (int r = 0; r < world; r++) s += value(r, i);
    return op == DT_AVG ? s / world : s;
}

static void *dev_alloc(size_t bytes)
{
#ifdef DTRAIN_HAVE_CUDA
    if (on_gpu) {
        void *p = NULL;
        return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
    }
#endif
    return malloc(bytes ? bytes : 1);
}

static void dev_free(void *p)
{
#ifdef DTRAIN_HAVE_CUDA
    if (on_gpu) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

static void copy(void *dst, const void *src, size_t bytes, int to_dev)
{
#ifdef DTRAIN_HAVE_CUDA
    if (on_gpu) {
        cudaMemcpy(dst, src, bytes, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
        return;
    }
#endif
    (void)to_dev;
    memcpy(dst, src, bytes);
}

static void test_allreduce(dt_ctx *ctx, dt_dtype t, dt_redop op, size_t count)
{
    size_t es = dt_dtype_size(t), bytes = count * es;
    char *host = malloc(bytes ? bytes : 1);
    void *buf = dev_alloc(bytes);
    if (!host || !buf) {
        CHECK(0, "out of memory for %zu bytes", bytes);
        free(host);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        float v = value(rank, i);
        if (t == DT_F32) memcpy(host + i * 4, &v, 4);
        else {
            uint16_t h = to16(t, v);
            memcpy(host + i * 2, &h, 2);
        }
    }
    copy(buf, host, bytes, 1);
    dt_status s = dt_allreduce(ctx, buf, count, t, op);
    CHECK(s == DT_OK, "allreduce dtype %d op %d count %zu: %s", t, op, count, dt_last_error());
    copy(host, buf, bytes, 0);
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < count; i++) {
        float want = (float)expected(i, op);
        int ok;
        if (t == DT_F32) {
            float got;
            memcpy(&got, host + i * 4, 4);
            ok = got == want;
        } else {
            uint16_t got;
            memcpy(&got, host + i * 2, 2);
            ok = got == to16(t, want);
        }
        if (!ok && bad++ == 0) first_bad = i;
    }
    CHECK(bad == 0, "allreduce dtype %d op %s count %zu: %zu wrong elements, first at %zu (want %g)",
          t, op == DT_SUM ? "sum" : "avg", count, bad, first_bad, expected(first_bad, op));
    dev_free(buf);
    free(host);
}

static void test_broadcast(dt_ctx *ctx, size_t count)
{
    int root = world - 1;
    float *host = malloc((count ? count : 1) * sizeof *host);
    void *buf = dev_alloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) host[i] = rank == root ? (float)i : -1.0f;
    copy(buf, host, count * sizeof(float), 1);
    dt_status s = dt_broadcast(ctx, buf, count, DT_F32, root);
    CHECK(s == DT_OK, "broadcast count %zu: %s", count, dt_last_error());
    copy(host, buf, count * sizeof(float), 0);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) bad += host[i] != (float)i;
    CHECK(bad == 0, "broadcast count %zu from rank %d: %zu wrong elements", count, root, bad);
    dev_free(buf);
    free(host);
}

int main(int argc, char **argv)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    if (argc == 3 && strcmp(argv[1], "--device") == 0 && strcmp(argv[2], "cuda") == 0) {
        cfg.device = DT_DEVICE_CUDA;
        on_gpu = 1;
    }
    dt_ctx *ctx = NULL;
    dt_status s = dt_init(&cfg, &ctx);
    if (s != DT_OK) {
        if (on_gpu && (s == DT_ERR_DEVICE || s == DT_ERR_UNSUPPORTED)) {
            printf("SKIP: no usable CUDA device: %s\n", dt_last_error());
            dt_abort_job(NULL, 77);
            return 77;
        }
        fprintf(stderr, "dt_init failed: %s\n", dt_last_error());
        dt_abort_job(NULL, 1);
        return 1;
    }
    rank = dt_rank(ctx);
    world = dt_world_size(ctx);

    const size_t counts[] = {0, 1, 7, 1000003};
    const dt_dtype types[] = {DT_F32, DT_F16, DT_BF16};
    for (int ti = 0; ti < 3; ti++) {
        for (int ci = 0; ci < 4; ci++) {
            test_allreduce(ctx, types[ti], DT_SUM, counts[ci]);
            test_allreduce(ctx, types[ti], DT_AVG, counts[ci]);
        }
        /* 64 MiB of each type. */
        test_allreduce(ctx, types[ti], DT_SUM, ((size_t)64 << 20) / dt_dtype_size(types[ti]));
    }
    test_allreduce(ctx, DT_F32, DT_AVG, ((size_t)64 << 20) / 4);
    for (int ci = 0; ci < 4; ci++) test_broadcast(ctx, counts[ci]);
    CHECK(dt_barrier(ctx) == DT_OK, "barrier: %s", dt_last_error());

    /* Bad arguments are refused with a message, on every rank alike (nothing is sent). */
    s = dt_allreduce(ctx, NULL, 5, DT_F32, DT_SUM);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "NULL"), "NULL buffer: %d %s", s, dt_last_error());
    float one = 1;
    s = dt_allreduce(ctx, &one, 1, (dt_dtype)9, DT_SUM);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "dtype"), "bad dtype: %d %s", s, dt_last_error());
    s = dt_broadcast(ctx, &one, 1, DT_F32, world);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "root"), "bad root: %d %s", s, dt_last_error());

    /* Every rank must pass: agree on the failure count. */
    float f = (float)failures;
    void *d = dev_alloc(sizeof f);
    copy(d, &f, sizeof f, 1);
    if (dt_allreduce(ctx, d, 1, DT_F32, DT_SUM) != DT_OK) f = 1;
    else copy(&f, d, sizeof f, 0);
    dev_free(d);
    if (rank == 0)
        printf("test_coll: %d ranks, %s backend, %d checks per rank: %d passed, %d failed\n", world,
               dt_backend_name(ctx), checks, f == 0 ? checks : checks - failures, (int)f);
    dt_finalize(ctx);
    return f == 0 ? 0 : 1;
}
