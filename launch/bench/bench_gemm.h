/*
 * bench_gemm.h - `dtrain bench gemm`: square matrix products on the CPU (OpenBLAS) and the GPU
 * (cuBLAS), the classic first CPU-vs-GPU comparison.
 */
#ifndef DT_LAUNCH_BENCH_GEMM_H
#define DT_LAUNCH_BENCH_GEMM_H

#include <stddef.h>

/* The GEMM types: fp32; tf32 (fp32 data, tensor cores with 10-bit mantissas); bf16 and fp16
 * (16-bit data, fp32 accumulation, 16-bit output). */
typedef enum { GEMM_FP32 = 0, GEMM_TF32, GEMM_BF16, GEMM_FP16, GEMM_NTYPES } gemm_type;

/* One timed GEMM configuration's result. */
typedef struct gemm_result {
    int ran;               /* 0: not run (no such kernel here, or no GPU) */
    double ms;             /* mean time of one product over the timed repetitions */
    int reps;              /* the timed repetitions: --iters, or fewer when --max-seconds ran out */
    double min_ms, max_ms; /* the fastest and slowest product (CPU: each timed alone; GPU: 0, unknown:
                              its repetitions run back to back between two events) */
    double tflops;         /* 2 n^3 / time */
    double max_err;        /* sampled entries against an fp64 product of the same (rounded) inputs,
                           relative to sum |a_ik b_kj| */
    char note[160];        /* why it did not run ("" when it ran) */
} gemm_result;

/* The entries of C every product is checked at: GEMM_SAMPLES of them, the corners (0, 0) and
 * (n - 1, n - 1) among them, the same on both sides (bench_gemm_check.c). */
#define GEMM_SAMPLES 16
void gemm_sample_points(size_t n, size_t *rows, size_t *cols);
/* Fills a (n x n, row-major) with the seeded values both sides use: uniform in [-1, 1). */
void gemm_fill(float *a, size_t n, unsigned seed);
/* Checks `samples` entries of C = A B (C given at those entries by c_at) against fp64 sums of the
 * products of A and B as the GEMM saw them (rounded to its input type). */
double gemm_check(const float *a, const float *b, size_t n, gemm_type t, const size_t *rows, const size_t *cols,
                  const float *c_vals, int samples);

/* The GPU side (bench_gemm_cuda.c, built with CUDA). Fills `r` for type t at size n, at most
 * `iters` timed products after `warmup` (or until about max_s seconds have passed). Returns 0
 * (r->ran, or not run for want of device or host memory: r->note says so), 1 when a CUDA or cuBLAS
 * call failed (r->note names it), or -1 when no GPU can be used at all (r->note says why). */
int gemm_gpu_run(size_t n, gemm_type t, int warmup, int iters, double max_s, const float *a, const float *b,
                 gemm_result *r);
/* "NVIDIA H200, cuBLAS 130000", or why there is no GPU. */
void gemm_gpu_describe(char *buf, size_t len);

#endif
