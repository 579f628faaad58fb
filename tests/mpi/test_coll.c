/*
 * test_coll.c - collectives at any rank count, checked element by element against exact values.
 *
 * Allreduce (sum and average) in place on fp32, fp16 and bf16 at counts 0, 1, 7, 1,000,003 and
 * 64 MiB; broadcast from the last rank; a DT_U8 broadcast of raw bytes (every byte value, odd lengths,
 * from each rank in turn, an int64 and a double among them) and DT_U8 refused by allreduce; barrier;
 * bad arguments. Inputs are small integers so every
 * expected sum and average is exactly representable in all three types and any wrong element is
 * a real error. `--device cuda` runs the same on GPU buffers (exit 77 = SKIP without a GPU).
 */
#include "base/half.h"
#include "dtrain.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int failures, checks;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL rank %d: ", rank);                                                                   \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n");                                                                                     \
        }                                                                                                              \
    } while (0)

static int rank, world, on_gpu;

/* The expected 16-bit result: the exact sum or mean rounded once to fp32 (as the backends reduce)
 * and then to nearest even in 16 bits. A mean over a world that is not a power of two (1/3) is not
 * exact in any format, so truncating conversions would expect the wrong neighbour. */
static uint16_t to16(dt_dtype t, float v) { return t == DT_BF16 ? half_f32_to_bf16(v) : half_f32_to_f16(v); }

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
        if (t == DT_F32)
            memcpy(host + i * 4, &v, 4);
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
    double first_got = 0;
    for (size_t i = 0; i < count; i++) {
        float want = (float)expected(i, op);
        int ok;
        double got_value;
        if (t == DT_F32) {
            float got;
            memcpy(&got, host + i * 4, 4);
            ok = got == want;
            got_value = got;
        } else {
            uint16_t got;
            memcpy(&got, host + i * 2, 2);
            ok = got == to16(t, want);
            got_value = t == DT_F16 ? half_f16_to_f32(got) : half_bf16_to_f32(got);
        }
        if (!ok && bad++ == 0) {
            first_bad = i;
            first_got = got_value;
        }
    }
    CHECK(bad == 0, "allreduce dtype %d op %s count %zu: %zu wrong elements, first at %zu (want %.9g, got %.9g)", t,
          op == DT_SUM ? "sum" : "avg", count, bad, first_bad, expected(first_bad, op), first_got);
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

/* Byte i of rank r's buffer: every value 0..255 occurs within 256 bytes, and each rank's differ. */
static unsigned char byte_of(int r, size_t i) { return (unsigned char)(i * 37 + (size_t)r * 101 + 11); }

/* A DT_U8 broadcast of count bytes from root: every byte arrives unchanged (no float conversion
 * could keep NaN payloads and signalling patterns of every byte value), and the neighbours of the
 * buffer are untouched (count is bytes, not floats). */
static void test_broadcast_bytes(dt_ctx *ctx, size_t count, int root)
{
    const size_t pad = 8; /* guard bytes each side, checked on the host copy */
    unsigned char *host = malloc(count + 2 * pad);
    unsigned char *buf = dev_alloc(count + 2 * pad);
    if (!host || !buf) {
        CHECK(0, "out of memory for %zu bytes", count + 2 * pad);
        free(host);
        if (buf) dev_free(buf);
        return;
    }
    for (size_t i = 0; i < count + 2 * pad; i++) host[i] = byte_of(rank, i);
    copy(buf, host, count + 2 * pad, 1);
    dt_status s = dt_broadcast(ctx, buf + pad, count, DT_U8, root);
    CHECK(s == DT_OK, "DT_U8 broadcast of %zu bytes from rank %d: %s", count, root, dt_last_error());
    copy(host, buf, count + 2 * pad, 0);
    size_t bad = 0, first_bad = 0, guard = 0;
    for (size_t i = 0; i < count; i++)
        if (host[pad + i] != byte_of(root, pad + i) && bad++ == 0) first_bad = i;
    for (size_t i = 0; i < pad; i++)
        guard += (host[i] != byte_of(rank, i)) + (host[pad + count + i] != byte_of(rank, pad + count + i));
    CHECK(bad == 0, "DT_U8 broadcast of %zu bytes from rank %d: %zu wrong bytes, first at %zu (0x%02x, want 0x%02x)",
          count, root, bad, first_bad, host[pad + first_bad], byte_of(root, pad + first_bad));
    CHECK(guard == 0, "DT_U8 broadcast of %zu bytes from rank %d wrote %zu bytes outside the buffer", count, root,
          guard);
    dev_free(buf);
    free(host);
}

/* What checkpoints broadcast: an int64 above 2^53 and a double whose bits no float holds. */
static void test_broadcast_scalars(dt_ctx *ctx)
{
    struct {
        int64_t step;
        double scale;
        char tag[3];
    } v = {rank == 0 ? INT64_C(0x7edcba9876543211) : -1, rank == 0 ? 1.0 / 3.0 : 0.0, {rank == 0 ? 'o' : 'x', 'k', 0}};
    dt_status s = dt_broadcast(ctx, &v, sizeof v, DT_U8, 0);
    CHECK(s == DT_OK, "DT_U8 broadcast of a struct: %s", dt_last_error());
    CHECK(v.step == INT64_C(0x7edcba9876543211) && v.scale == 1.0 / 3.0 && strcmp(v.tag, "ok") == 0,
          "DT_U8 broadcast of a struct: step %lld, scale %.17g, tag %s", (long long)v.step, v.scale, v.tag);
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
    /* Bytes: empty, odd lengths around a float's size and every byte value, and 3 MiB + 5. */
    const size_t nbytes[] = {0, 1, 2, 3, 5, 7, 255, 257, 1001, ((size_t)3 << 20) + 5};
    for (int r = 0; r < world; r++)
        for (size_t k = 0; k < sizeof nbytes / sizeof *nbytes; k++) test_broadcast_bytes(ctx, nbytes[k], r);
    if (!on_gpu) test_broadcast_scalars(ctx); /* host memory: the struct lives on the stack */
    CHECK(dt_dtype_size(DT_U8) == 1, "dt_dtype_size(DT_U8) = %zu", dt_dtype_size(DT_U8));
    CHECK(dt_barrier(ctx) == DT_OK, "barrier: %s", dt_last_error());
    /* Every placement on rank 0; rank 0 without an array is refused on every rank (it joins the
     * verdict first, so none is left waiting and none goes on as if something was gathered): rank 0
     * with its own message, the others naming it. */
    dt_placement *all = calloc((size_t)world, sizeof *all);
    CHECK(all && dt_gather_placement(ctx, rank == 0 ? all : NULL) == DT_OK, "gather: %s", dt_last_error());
    for (int r = 0; rank == 0 && all && r < world; r++)
        CHECK(all[r].rank == r, "placement %d is rank %d's", r, all[r].rank);
    free(all);
    s = dt_gather_placement(ctx, NULL);
    CHECK(s == DT_ERR_INVALID_ARG &&
              strstr(dt_last_error(), rank == 0 ? "all is NULL on rank 0" : "dt_gather_placement failed on rank 0"),
          "gather without an array on rank 0: %d %s", (int)s, dt_last_error());

    /* Bad arguments are refused with a message, on every rank alike (nothing is sent). */
    s = dt_allreduce(ctx, NULL, 5, DT_F32, DT_SUM);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "NULL"), "NULL buffer: %d %s", s, dt_last_error());
    float one = 1;
    s = dt_allreduce(ctx, &one, 1, (dt_dtype)9, DT_SUM);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "dtype"), "bad dtype: %d %s", s, dt_last_error());
    s = dt_broadcast(ctx, &one, 1, DT_F32, world);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "root"), "bad root: %d %s", s, dt_last_error());
    s = dt_broadcast(ctx, &one, 1, (dt_dtype)9, 0);
    CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "dtype 9"), "broadcast of dtype 9: %d %s", s,
          dt_last_error());
    /* Bytes have no sum: refused by name, for both reductions, on host and device buffers. */
    unsigned char *u8 = dev_alloc(4);
    for (int op = DT_SUM; op <= DT_AVG; op++) {
        s = dt_allreduce(ctx, u8, 4, DT_U8, (dt_redop)op);
        CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "DT_U8") && strstr(dt_last_error(), "dt_broadcast"),
              "allreduce of DT_U8 (op %d): %d %s", op, s, dt_last_error());
    }
    s = dt_allreduce(ctx, u8, 0, DT_U8, DT_SUM);
    CHECK(s == DT_ERR_INVALID_ARG, "allreduce of 0 DT_U8 elements: %d %s", s, dt_last_error());
    dev_free(u8);

    /* Every rank must pass: agree on the failure count. */
    float f = (float)failures;
    void *d = dev_alloc(sizeof f);
    copy(d, &f, sizeof f, 1);
    if (dt_allreduce(ctx, d, 1, DT_F32, DT_SUM) != DT_OK)
        f = 1;
    else
        copy(&f, d, sizeof f, 0);
    dev_free(d);
    if (rank == 0)
        printf("test_coll: %d ranks, %s backend, %d checks per rank: %d passed, %d failed\n", world,
               dt_backend_name(ctx), checks, f == 0 ? checks : checks - failures, (int)f);
    dt_finalize(ctx);
    return f == 0 ? 0 : 1;
}
