/*
 * test_reducer_cuda.c - the reducer and the buffer utilities on device memory.
 *
 * At one rank with DTRAIN_COMM_WORLD1=1 (dt_config::comm_world1) the reducer's buckets go through
 * NCCL on its stream even in a world of one (a sum over one rank changes no bit; without it nothing
 * travels): an fp32 buffer on an fp32 wire comes back unchanged, on a bf16 wire rounded to bf16
 * exactly as the CPU rounds, a 16-bit buffer unchanged; the buffer is filled by an asynchronous copy
 * on the caller's stream right before ready(), as a loop's backward fills it (at one rank a
 * reducer that did not follow that stream could not be seen here: an in-place sum over one rank
 * writes back what it read, and the 16-bit wire's casts run on the caller's stream; ranks on
 * separate GPUs would show it). No-sync steps leave the buffer
 * alone. A device pointer given as host memory and the reverse are refused. dt_buffer_unscale_check,
 * dt_buffer_scale, dt_buffer_norm and dt_buffer_checksum on device memory equal their host results
 * (the norm to 1e-12 relative: the device sums in another fixed order), dt_buffer_checksum hashes
 * a write the caller queued on a stream of its own (held there for 50 ms), and dt_check_replicas
 * takes device memory.
 *
 * Exit status: 0 passed, 1 failed, 77 skipped ("SKIP: no CUDA device") without a GPU.
 */
#include <cuda_runtime.h>

#ifndef DTRAIN_HAVE_CUDA
#define DTRAIN_HAVE_CUDA 1
#endif
#include "kernels/cast.h"
#include "dtrain.h"
#include "../mpi/mpi_check.h"
#include "gpu_skip.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 100003 };

static void fill(float *h)
{
    for (size_t i = 0; i < N; i++) h[i] = (float)sin(0.37 * (double)i) * (float)(1 + i % 13) * 1e-3f;
}

/* One step over two ranges, the buffer written on the stream just before each ready(). comm: whether
 * the buckets travel (dt_config::comm_world1 at one rank), so an fp32 buffer on a 16-bit wire comes
 * back rounded; else nothing travels and nothing is rounded. */
static void reduce_case(dt_ctx *ctx, cudaStream_t st, dt_dtype dtype, dt_dtype wire, int comm)
{
    const size_t esz = dt_dtype_size(dtype);
    float *h = malloc(N * sizeof *h), *want = malloc(N * sizeof *want);
    uint16_t *h16 = malloc(N * sizeof *h16), *back16 = malloc(N * sizeof *back16);
    float *back = malloc(N * sizeof *back);
    void *d = NULL;
    CHECK(cudaMalloc(&d, N * esz) == cudaSuccess, "cudaMalloc");
    fill(h);
    if (dtype != DT_F32) cpu_cast_f32_to_16(dtype, h, h16, N);
    const void *src = dtype == DT_F32 ? (const void *)h : (const void *)h16;
    /* What comes back: the values, or (fp32 on a 16-bit wire) their rounding. */
    if (dtype == DT_F32 && wire != DT_F32 && comm) {
        cpu_cast_f32_to_16(wire, h, back16, N);
        cpu_cast_16_to_f32(wire, back16, want, N);
    } else {
        memcpy(want, h, N * sizeof *h);
    }
    const dt_range ranges[2] = {{60000, N - 60000}, {0, 60000}};
    dt_reducer_config c;
    dt_reducer_defaults(&c);
    c.memory = DT_MEMORY_DEVICE;
    c.dtype = dtype;
    c.wire = wire;
    c.stream = st;
    c.first_bucket_mb = c.bucket_mb = 0.1;
    dt_reducer *r = NULL;
    CHECK(dt_reducer_create(ctx, d, N, ranges, 2, &c, &r) == DT_OK, "create (dtype %d wire %d)", dtype, wire);
    if (!r) return;
    CHECK(cudaMemsetAsync(d, 0xff, N * esz, st) == cudaSuccess, "memset"); /* NaNs if the copy were skipped */
    for (int k = 0; k < 2; k++) {
        const size_t off = ranges[k].offset, n = ranges[k].count;
        CHECK(cudaMemcpyAsync((char *)d + off * esz, (const char *)src + off * esz, n * esz, cudaMemcpyHostToDevice,
                              st) == cudaSuccess,
              "copy");
        CHECK(dt_reducer_ready(r, off, n) == DT_OK, "ready");
    }
    CHECK(dt_reducer_wait(r) == DT_OK, "wait");
    CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
    if (dtype == DT_F32) {
        CHECK(cudaMemcpy(back, d, N * sizeof *back, cudaMemcpyDeviceToHost) == cudaSuccess, "down");
        CHECK(memcmp(back, want, N * sizeof *back) == 0, "fp32 buffer, wire %d: as expected bit for bit", wire);
    } else {
        CHECK(cudaMemcpy(back16, d, N * sizeof *back16, cudaMemcpyDeviceToHost) == cudaSuccess, "down");
        CHECK(memcmp(back16, h16, N * sizeof *h16) == 0, "16-bit buffer unchanged bit for bit");
    }
    /* No sync: the buffer keeps what the caller wrote. */
    CHECK(dt_reducer_set_sync(r, 0) == DT_OK, "no sync");
    CHECK(cudaMemcpyAsync(d, src, N * esz, cudaMemcpyHostToDevice, st) == cudaSuccess, "copy");
    CHECK(dt_reducer_ready(r, 0, 60000) == DT_OK && dt_reducer_ready(r, 60000, N - 60000) == DT_OK, "ready");
    CHECK(dt_reducer_wait(r) == DT_OK, "wait");
    dt_reducer_stats sts;
    dt_reducer_get_stats(r, &sts);
    CHECK(sts.steps == 2, "%ld steps", sts.steps);
    dt_reducer_free(r);
    cudaFree(d);
    free(h), free(want), free(h16), free(back16), free(back);
}

/* A host function that holds its stream until *go is set, and a thread that sets it later. */
static void CUDART_CB hold_until(void *go)
{
    while (!atomic_load((atomic_int *)go)) sched_yield();
}

static void *release_later(void *go)
{
    usleep(50000);
    atomic_store((atomic_int *)go, 1);
    return NULL;
}

/* The buffer utilities wait for whatever the caller queued, on any stream: a copy into d queued
 * on the caller's non-blocking stream behind 50 ms of held work is in dt_buffer_checksum's hash
 * (a copy back on the legacy stream alone would hash d before it). */
static void checksum_waits_for_caller_stream(float *d, const float *h)
{
    float *src = NULL;
    cudaStream_t st = NULL;
    CHECK(cudaMalloc((void **)&src, N * sizeof *src) == cudaSuccess &&
              cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess,
          "cudaMalloc and a stream");
    cudaMemcpy(src, h, N * sizeof *h, cudaMemcpyHostToDevice);
    cudaMemset(d, 0, N * sizeof *d);
    cudaDeviceSynchronize();
    uint64_t want = 0, got = 1;
    CHECK(dt_buffer_checksum(h, N * sizeof *h, DT_MEMORY_HOST, &want) == DT_OK, "host checksum");
    atomic_int go;
    atomic_init(&go, 0);
    pthread_t t;
    CHECK(cudaLaunchHostFunc(st, hold_until, &go) == cudaSuccess &&
              cudaMemcpyAsync(d, src, N * sizeof *d, cudaMemcpyDeviceToDevice, st) == cudaSuccess,
          "a held copy on the caller's stream");
    const int started = pthread_create(&t, NULL, release_later, &go) == 0;
    if (!started) atomic_store(&go, 1);
    CHECK(dt_buffer_checksum(d, N * sizeof *d, DT_MEMORY_DEVICE, &got) == DT_OK && got == want,
          "dt_buffer_checksum waits for the caller's stream (%016llx, want %016llx)", (unsigned long long)got,
          (unsigned long long)want);
    if (started) pthread_join(t, NULL);
    cudaStreamSynchronize(st);
    cudaStreamDestroy(st);
    cudaFree(src);
}

static void utilities(dt_ctx *ctx)
{
    float *h = malloc(N * sizeof *h), *hd = malloc(N * sizeof *hd);
    uint16_t *h16 = malloc(N * sizeof *h16), *b16 = malloc(N * sizeof *b16);
    float *d = NULL;
    uint16_t *d16 = NULL;
    CHECK(cudaMalloc((void **)&d, N * sizeof *d) == cudaSuccess && cudaMalloc((void **)&d16, N * 2) == cudaSuccess,
          "cudaMalloc");
    fill(h);
    cpu_cast_f32_to_16(DT_F16, h, h16, N);
    cudaMemcpy(d, h, N * sizeof *h, cudaMemcpyHostToDevice);
    cudaMemcpy(d16, h16, N * 2, cudaMemcpyHostToDevice);
    int inf_d = -1, inf_h = -1;
    CHECK(dt_buffer_unscale_check(d, N, DT_F32, DT_MEMORY_DEVICE, 0.5f, &inf_d) == DT_OK && inf_d == 0, "device");
    CHECK(dt_buffer_unscale_check(h, N, DT_F32, DT_MEMORY_HOST, 0.5f, &inf_h) == DT_OK && inf_h == 0, "host");
    cudaMemcpy(hd, d, N * sizeof *hd, cudaMemcpyDeviceToHost);
    CHECK(memcmp(hd, h, N * sizeof *h) == 0, "device unscale == host unscale");
    CHECK(dt_buffer_unscale_check(d, N, DT_F32, DT_MEMORY_HOST, 1.0f, &inf_d) == DT_ERR_INVALID_ARG,
          "device memory given as host refused");
    CHECK(dt_buffer_unscale_check(h, N, DT_F32, DT_MEMORY_DEVICE, 1.0f, &inf_d) == DT_ERR_INVALID_ARG,
          "host memory given as device refused");
    double nd = 0, nh = 0;
    CHECK(dt_buffer_norm(ctx, d, N, DT_F32, DT_MEMORY_DEVICE, 1, &nd) == DT_OK, "device norm");
    CHECK(dt_buffer_norm(ctx, h, N, DT_F32, DT_MEMORY_HOST, 1, &nh) == DT_OK, "host norm");
    CHECK(fabs(nd - nh) <= 1e-12 * nh, "fp32 norms %.17g %.17g", nd, nh);
    CHECK(dt_buffer_norm(NULL, d16, N, DT_F16, DT_MEMORY_DEVICE, 0, &nd) == DT_OK, "device fp16 norm");
    CHECK(dt_buffer_norm(NULL, h16, N, DT_F16, DT_MEMORY_HOST, 0, &nh) == DT_OK, "host fp16 norm");
    CHECK(fabs(nd - nh) <= 1e-12 * nh, "fp16 norms %.17g %.17g", nd, nh);
    CHECK(dt_buffer_scale(d16, N, DT_F16, DT_MEMORY_DEVICE, 0.3f) == DT_OK, "device fp16 scale");
    CHECK(dt_buffer_scale(h16, N, DT_F16, DT_MEMORY_HOST, 0.3f) == DT_OK, "host fp16 scale");
    cudaMemcpy(b16, d16, N * 2, cudaMemcpyDeviceToHost);
    CHECK(memcmp(b16, h16, N * 2) == 0, "device fp16 scale == host");
    const float inf = INFINITY;
    cudaMemcpy(d + N - 1, &inf, sizeof inf, cudaMemcpyHostToDevice);
    CHECK(dt_buffer_unscale_check(d, N, DT_F32, DT_MEMORY_DEVICE, 1.0f, &inf_d) == DT_OK && inf_d == 1, "inf found");
    uint64_t sd = 0, sh = 1;
    cudaMemcpy(hd, d, N * sizeof *hd, cudaMemcpyDeviceToHost);
    CHECK(dt_buffer_checksum(d, N * sizeof *d, DT_MEMORY_DEVICE, &sd) == DT_OK &&
              dt_buffer_checksum(hd, N * sizeof *hd, DT_MEMORY_HOST, &sh) == DT_OK && sd == sh,
          "checksums");
    CHECK(dt_check_replicas(ctx, d, N * sizeof *d, NULL, NULL) == DT_OK, "replicas on device memory");
    fill(h);
    checksum_waits_for_caller_stream(d, h);
    /* A device pointer given to a host reducer. */
    dt_reducer *r = NULL;
    CHECK(dt_reducer_create(ctx, d, N, NULL, 0, NULL, &r) == DT_ERR_INVALID_ARG && !r, "device as host refused");
    CHECK(strstr(dt_last_error(), "DT_MEMORY_DEVICE") != NULL, "%s", dt_last_error());
    cudaFree(d);
    cudaFree(d16);
    free(h), free(hd), free(h16), free(b16);
}

int main(void)
{
    if (!gpu_devices_or_skip()) return 77;
    dt_config cfg;
    dt_config_defaults(&cfg);
    if (dt_config_from_env(&cfg) != DT_OK) { /* DTRAIN_COMM_WORLD1 */
        fprintf(stderr, "test_reducer_cuda: %s\n", dt_last_error());
        return 1;
    }
    cfg.device = DT_DEVICE_CUDA;
    dt_ctx *ctx = mpi_check_init_config("test_reducer_cuda", &cfg);
    const int comm = cfg.comm_world1; /* the test runs at one rank */
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "stream");
    reduce_case(ctx, st, DT_F32, DT_F32, comm);
    reduce_case(ctx, st, DT_F32, DT_BF16, comm);
    reduce_case(ctx, st, DT_F32, DT_F16, comm);
    reduce_case(ctx, st, DT_F16, DT_F16, comm);
    utilities(ctx);
    cudaStreamDestroy(st);
    const int rc = mpi_check_finish(ctx, "test_reducer_cuda");
    dt_finalize(ctx);
    return rc;
}
