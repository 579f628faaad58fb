/*
 * bench_gemm_cuda.c - the GPU side of `dtrain bench gemm`: cublasGemmEx on the rank's GPU.
 *
 * Row-major C = A B is column-major C^T = B^T A^T, so cuBLAS gets B first; the memory of C is then
 * the row-major product. fp32 and tf32 use fp32 matrices (tf32: CUBLAS_COMPUTE_32F_FAST_TF32, the
 * tensor-core path); bf16 and fp16 use 16-bit A, B and C with fp32 accumulation
 * (CUBLAS_COMPUTE_32F), as mixed-precision training does. Inputs are the host matrices rounded on
 * the host (cast.h), so the check on the host sees exactly what the GPU multiplied. Times come from
 * CUDA events around a batch of products, sized after one timed product to fit --max-seconds.
 */
#include "launch/bench/bench_gemm.h"
#include "kernels/cast.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gemm_gpu_describe(char *buf, size_t len)
{
    int n = 0, dev = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(buf, len, "none visible (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return;
    }
    struct cudaDeviceProp p;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        snprintf(buf, len, "device %d (properties unreadable)", dev);
        return;
    }
    int cb = 0;
    cublasGetProperty(MAJOR_VERSION, &cb);
    int cbm = 0, cbp = 0;
    cublasGetProperty(MINOR_VERSION, &cbm);
    cublasGetProperty(PATCH_LEVEL, &cbp);
    cudaRuntimeGetVersion(&rt);
    snprintf(buf, len, "%s (device %d, sm_%d%d, %.0f GiB), CUDA runtime %d.%d, cuBLAS %d.%d.%d", p.name, dev, p.major,
             p.minor, (double)p.totalGlobalMem / (1 << 30), rt / 1000, (rt % 1000) / 10, cb, cbm, cbp);
}

/* A failed call: its note, and rc 1 unless the device ran out of memory (a size that does not fit
 * is not run, as when the free memory is short up front). */
#define CU(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            snprintf(r->note, sizeof r->note, "%s: %s", #call, cudaGetErrorString(e_));                                \
            rc = e_ != cudaErrorMemoryAllocation;                                                                      \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)
#define CB(call)                                                                                                       \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            snprintf(r->note, sizeof r->note, "%.80s: cuBLAS status %d%s", #call, (int)s_,                             \
                     s_ == CUBLAS_STATUS_ALLOC_FAILED ? " (allocation failed)" : "");                                  \
            rc = s_ != CUBLAS_STATUS_ALLOC_FAILED;                                                                     \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)

int gemm_gpu_run(size_t n, gemm_type t, int warmup, int iters, double max_s, const float *a, const float *b,
                 gemm_result *r)
{
    memset(r, 0, sizeof *r);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(r->note, sizeof r->note, "no GPU visible (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
        return -1;
    }
    const int half = t == GEMM_BF16 || t == GEMM_FP16;
    const size_t esz = half ? 2 : 4, bytes = n * n * esz;
    const cudaDataType_t dt = t == GEMM_BF16 ? CUDA_R_16BF : t == GEMM_FP16 ? CUDA_R_16F : CUDA_R_32F;
    const cublasComputeType_t ct = t == GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const dt_dtype h16 = t == GEMM_BF16 ? DT_BF16 : DT_F16;
    const float alpha = 1.0f, beta = 0.0f;
    const int N = (int)n;
    void *da = NULL, *db = NULL, *dc = NULL;
    uint16_t *ha = NULL, *hb = NULL;
    cublasHandle_t h = NULL;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    size_t free_b = 0, total_b = 0;
    int rc = 0;

    CU(cudaMemGetInfo(&free_b, &total_b));
    if (3 * bytes > free_b) {
        snprintf(r->note, sizeof r->note, "3 matrices of %zu x %zu %s need %.1f GiB, %.1f GiB free", n, n,
                 half ? "16-bit" : "fp32", 3.0 * (double)bytes / (1 << 30), (double)free_b / (1 << 30));
        return 0;
    }
    CU(cudaMalloc(&da, bytes));
    CU(cudaMalloc(&db, bytes));
    CU(cudaMalloc(&dc, bytes));
    if (half) {
        ha = malloc(bytes);
        hb = malloc(bytes);
        if (!ha || !hb) {
            snprintf(r->note, sizeof r->note, "out of host memory for the 16-bit copies");
            goto out;
        }
        cpu_cast_f32_to_16(h16, a, ha, n * n);
        cpu_cast_f32_to_16(h16, b, hb, n * n);
        CU(cudaMemcpy(da, ha, bytes, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(db, hb, bytes, cudaMemcpyHostToDevice));
    } else {
        CU(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    }
    CB(cublasCreate(&h));
    CU(cudaEventCreate(&ev0));
    CU(cudaEventCreate(&ev1));
#define GEMM_ONCE()                                                                                                    \
    CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, db, dt, N, da, dt, N, &beta, dc, dt, N, ct,          \
                    CUBLAS_GEMM_DEFAULT))
    for (int w = 0; w < warmup; w++) GEMM_ONCE();
    /* One timed product sizes the batch. */
    float ms1 = 0;
    CU(cudaEventRecord(ev0, 0));
    GEMM_ONCE();
    CU(cudaEventRecord(ev1, 0));
    CU(cudaEventSynchronize(ev1));
    CU(cudaEventElapsedTime(&ms1, ev0, ev1));
    int reps = iters;
    if (ms1 > 0 && (double)reps * ms1 * 1e-3 > max_s) reps = (int)(max_s / (ms1 * 1e-3));
    if (reps < 1) reps = 1;
    float ms = 0;
    CU(cudaEventRecord(ev0, 0));
    for (int i = 0; i < reps; i++) GEMM_ONCE();
    CU(cudaEventRecord(ev1, 0));
    CU(cudaEventSynchronize(ev1));
    CU(cudaEventElapsedTime(&ms, ev0, ev1));
    r->ms = (double)ms / reps;
    r->reps = reps;
    r->tflops = 2.0 * (double)n * (double)n * (double)n / (r->ms * 1e-3) * 1e-12;
    {
        /* Check sampled entries (the same points as the CPU side picks). */
        enum { S = GEMM_SAMPLES };
        size_t rows[S], cols[S];
        float vals[S];
        gemm_sample_points(n, rows, cols);
        for (int s = 0; s < S; s++) {
            const size_t off = (rows[s] * n + cols[s]) * esz;
            if (half) {
                uint16_t v;
                CU(cudaMemcpy(&v, (char *)dc + off, 2, cudaMemcpyDeviceToHost));
                vals[s] = t == GEMM_BF16 ? half_bf16_to_f32(v) : half_f16_to_f32(v);
            } else {
                CU(cudaMemcpy(&vals[s], (char *)dc + off, 4, cudaMemcpyDeviceToHost));
            }
        }
        r->max_err = gemm_check(a, b, n, t, rows, cols, vals, S);
    }
    r->ran = 1;
out:
    if (ev0) cudaEventDestroy(ev0);
    if (ev1) cudaEventDestroy(ev1);
    if (h) cublasDestroy(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(ha);
    free(hb);
    if (rc) (void)cudaGetLastError(); /* clears an error that is not sticky, for the next size */
    return rc;
}
