/*
 * test_cuda_cast.c - checks the CUDA fp32 <-> fp16/bf16 kernels (kernels/cuda/cast.cu) against the
 * CPU versions (kernels/cpu/cast.c), which the unit tests check against independent oracles.
 *
 * Converts about 4 million values each way for both 16-bit types on the GPU, on a stream of its
 * own, and compares them bit for bit with the CPU; NaN only has to stay NaN, because the GPU
 * instructions may return a canonical NaN where the CPU keeps the payload. One more conversion of
 * 20 million values makes each kernel's grid-stride loop go round more than once. The launchers'
 * argument checks need no GPU and run first.
 *
 * Exit status: 0 passed, 1 failed, 77 skipped (the automake/CTest convention) with a line
 * "SKIP: no CUDA device (...)" when cudaGetDeviceCount fails or finds none: without a driver it
 * fails with cudaErrorInsufficientDriver (35), which on a build machine just means "no GPU".
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This program only makes sense with CUDA: see cast.h's CUDA declarations even if the build did
 * not pass the define. */
#ifndef DTRAIN_HAVE_CUDA
#define DTRAIN_HAVE_CUDA 1
#endif
#include "kernels/cast.h"
#include "dtrain.h"

#define N_MAIN ((size_t)4 * 1024 * 1024 + 5) /* odd: the last block is partial */
#define N_STRIDE ((size_t)20000003)          /* > 65535 blocks * 256 threads */

static int failures;

static int f32_is_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

static int is_nan16(dt_dtype t, uint16_t v) { return t == DT_F16 ? (v & 0x7fffu) > 0x7c00u : (v & 0x7fffu) > 0x7f80u; }

static const char *type_name(dt_dtype t) { return t == DT_F16 ? "fp16" : "bf16"; }

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (p == NULL) {
        fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* Exits on a CUDA error outside the code under test: nothing after it would mean anything. */
static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "FAIL: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
        exit(1);
    }
}

static void expect_status(dt_status got, dt_status want, const char *what)
{
    if (got != want) {
        printf("FAIL: %s returned %d (%s), want %d; last error: %s\n", what, (int)got, dt_strerror(got), (int)want,
               dt_last_error());
        failures++;
    }
}

/* The launchers validate before touching CUDA, so this runs without a GPU too. */
static void check_arguments(void)
{
    float f = 0.0f;
    uint16_t h = 0;
    expect_status(cuda_cast_f32_to_16(DT_F32, &f, &h, 1, NULL), DT_ERR_INVALID_ARG, "cuda_cast_f32_to_16(DT_F32)");
    expect_status(cuda_cast_16_to_f32((dt_dtype)7, &h, &f, 1, NULL), DT_ERR_INVALID_ARG,
                  "cuda_cast_16_to_f32(dtype 7)");
    expect_status(cuda_cast_f32_to_16(DT_F16, NULL, &h, 1, NULL), DT_ERR_INVALID_ARG,
                  "cuda_cast_f32_to_16(in NULL, n 1)");
    expect_status(cuda_cast_16_to_f32(DT_BF16, &h, NULL, 1, NULL), DT_ERR_INVALID_ARG,
                  "cuda_cast_16_to_f32(out NULL, n 1)");
    expect_status(cuda_cast_f32_to_16(DT_BF16, NULL, NULL, 0, NULL), DT_OK, "cuda_cast_f32_to_16(NULL, NULL, n 0)");
    expect_status(cuda_cast_16_to_f32(DT_F16, NULL, NULL, 0, NULL), DT_OK, "cuda_cast_16_to_f32(NULL, NULL, n 0)");
    printf("%s argument checks: bad dtype and NULL with n > 0 rejected, n = 0 accepted\n", failures ? "FAIL" : "ok  ");
}

/* fp32 -> 16 bit of h_in[0..n) on the GPU vs the CPU. */
static void check_narrow(dt_dtype t, const float *h_in, size_t n, float *d_f, uint16_t *d_h, uint16_t *gpu,
                         uint16_t *cpu, cudaStream_t s)
{
    cuda_ok(cudaMemcpyAsync(d_f, h_in, n * sizeof *h_in, cudaMemcpyHostToDevice, s), "copy in");
    /* Poison the output so that elements the kernel skips cannot match by accident. */
    cuda_ok(cudaMemsetAsync(d_h, 0xa5, n * sizeof *d_h, s), "memset");
    expect_status(cuda_cast_f32_to_16(t, d_f, d_h, n, s), DT_OK, "cuda_cast_f32_to_16");
    cuda_ok(cudaMemcpyAsync(gpu, d_h, n * sizeof *gpu, cudaMemcpyDeviceToHost, s), "copy out");
    cuda_ok(cudaStreamSynchronize(s), "fp32->16 kernel");
    cpu_cast_f32_to_16(t, h_in, cpu, n);

    size_t bad = 0, nans = 0, payload = 0;
    for (size_t i = 0; i < n; i++) {
        if (gpu[i] == cpu[i]) continue;
        if (is_nan16(t, gpu[i]) && is_nan16(t, cpu[i])) {
            payload++;
            continue;
        }
        if (bad++ < 5)
            printf("  fp32 0x%08x -> %s: GPU 0x%04x, CPU 0x%04x\n", half_f32_bits(h_in[i]), type_name(t), gpu[i],
                   cpu[i]);
    }
    for (size_t i = 0; i < n; i++) nans += f32_is_nan(half_f32_bits(h_in[i]));
    printf("%s fp32->%s %zu values: %zu differ (%zu NaN inputs; %zu NaN outputs with another "
           "payload)\n",
           bad ? "FAIL" : "ok  ", type_name(t), n, bad, nans, payload);
    failures += bad != 0;
}

/* 16 bit -> fp32 of h_in[0..n) on the GPU vs the CPU. */
static void check_widen(dt_dtype t, const uint16_t *h_in, size_t n, uint16_t *d_h, float *d_f, float *gpu, float *cpu,
                        cudaStream_t s)
{
    cuda_ok(cudaMemcpyAsync(d_h, h_in, n * sizeof *h_in, cudaMemcpyHostToDevice, s), "copy in");
    cuda_ok(cudaMemsetAsync(d_f, 0xa5, n * sizeof *d_f, s), "memset");
    expect_status(cuda_cast_16_to_f32(t, d_h, d_f, n, s), DT_OK, "cuda_cast_16_to_f32");
    cuda_ok(cudaMemcpyAsync(gpu, d_f, n * sizeof *gpu, cudaMemcpyDeviceToHost, s), "copy out");
    cuda_ok(cudaStreamSynchronize(s), "16->fp32 kernel");
    cpu_cast_16_to_f32(t, h_in, cpu, n);

    size_t bad = 0, payload = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t g = half_f32_bits(gpu[i]), c = half_f32_bits(cpu[i]);
        if (g == c) continue;
        if (f32_is_nan(g) && f32_is_nan(c)) {
            payload++;
            continue;
        }
        if (bad++ < 5) printf("  %s 0x%04x -> fp32: GPU 0x%08x, CPU 0x%08x\n", type_name(t), h_in[i], g, c);
    }
    printf("%s %s->fp32 %zu values (every pattern %zu+ times): %zu differ (%zu NaN outputs with "
           "another payload)\n",
           bad ? "FAIL" : "ok  ", type_name(t), n, n / 65536, bad, payload);
    failures += bad != 0;
}

int main(void)
{
    check_arguments();

    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        if (e != cudaSuccess)
            printf("SKIP: no CUDA device (cudaGetDeviceCount: %s (%d): %s)\n", cudaGetErrorName(e), (int)e,
                   cudaGetErrorString(e));
        else
            printf("SKIP: no CUDA device (cudaGetDeviceCount found 0 devices)\n");
        return failures ? 1 : 77;
    }
    struct cudaDeviceProp prop;
    cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    /* Inputs: fp32 patterns, half of any bits (NaNs, infs, huge and tiny values included) and
     * half with the exponents where fp16 rounding happens (2^-31 .. 2^18); 16-bit inputs cycle
     * through every pattern. */
    float *f_in = xmalloc(N_STRIDE * sizeof *f_in);
    uint16_t *h_in = xmalloc(N_STRIDE * sizeof *h_in);
    uint64_t seed = 0x5eed0cafe15f00dull;
    for (size_t i = 0; i < N_STRIDE; i++) {
        const uint64_t r = rng_next(&seed);
        uint32_t bits = (uint32_t)r;
        if (i & 1) bits = (bits & 0x807fffffu) | ((96u + (uint32_t)((r >> 32) % 50u)) << 23);
        memcpy(&f_in[i], &bits, sizeof bits);
        h_in[i] = (uint16_t)i;
    }

    uint16_t *gpu16 = xmalloc(N_STRIDE * sizeof *gpu16), *cpu16 = xmalloc(N_STRIDE * sizeof *cpu16);
    float *gpu32 = xmalloc(N_STRIDE * sizeof *gpu32), *cpu32 = xmalloc(N_STRIDE * sizeof *cpu32);
    float *d_f = NULL;
    uint16_t *d_h = NULL;
    cuda_ok(cudaMalloc((void **)&d_f, N_STRIDE * sizeof *d_f), "cudaMalloc");
    cuda_ok(cudaMalloc((void **)&d_h, N_STRIDE * sizeof *d_h), "cudaMalloc");
    cudaStream_t s;
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");

    const dt_dtype types[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        check_narrow(types[k], f_in, N_MAIN, d_f, d_h, gpu16, cpu16, s);
        check_widen(types[k], h_in, N_MAIN, d_h, d_f, gpu32, cpu32, s);
    }
    printf("grid-stride loops, n = %zu:\n", N_STRIDE);
    check_narrow(DT_F16, f_in, N_STRIDE, d_f, d_h, gpu16, cpu16, s);
    check_widen(DT_BF16, h_in, N_STRIDE, d_h, d_f, gpu32, cpu32, s);

    cuda_ok(cudaStreamDestroy(s), "cudaStreamDestroy");
    cuda_ok(cudaFree(d_f), "cudaFree");
    cuda_ok(cudaFree(d_h), "cudaFree");
    free(f_in);
    free(h_in);
    free(gpu16);
    free(cpu16);
    free(gpu32);
    free(cpu32);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
