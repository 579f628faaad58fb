/*
 * cuda_ops.h - the CUDA op table (kernels/cuda/ops.cu) and the few CUDA-only entry points around
 * it: the stream it launches on, its error state, and the finite checks of mixed precision on
 * device memory (the GPU versions of cpu_count_nonfinite / cpu_unscale_count_nonfinite, amp.h).
 *
 * Everything here is declared only when DTRAIN_HAVE_CUDA is defined (as the CUDA part of cast.h),
 * and takes device pointers. The table has the contract of kernels/ops.h; the CPU table is its
 * oracle (tests/gpu/test_cuda_ops.c).
 *
 * State: the table keeps process-wide state (the stream, one cuBLAS handle bound to it, a small
 * device scratch buffer for reductions, the first failure), created on the device that is current
 * when it is first needed. Use it from one thread at a time, on one device per process (one rank
 * per GPU, as dtrain runs).
 *
 * Asynchrony: the table's ops only launch work on the stream and return, except softmax_xent,
 * which copies the loss and the correct count back and SYNCHRONIZES the stream (its result is a
 * host value). cuda_count_nonfinite and cuda_unscale_count_nonfinite synchronize too.
 *
 * Errors: the table's functions return void (or a value), so a failed launch, a cuBLAS error or a
 * failed copy is recorded: the first failure since the last cuda_ops_clear_error() is what
 * cuda_ops_last_error() returns. Errors of a kernel's execution show up only at a later
 * synchronizing call (softmax_xent, the counters, or the caller's own), as with any CUDA launch.
 */
#ifndef DT_KERNELS_CUDA_OPS_H
#define DT_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"

#include "kernels/ops.h"

#ifdef DTRAIN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA table ("cuda"): every entry of kernel_ops, on device memory, on the stream set with
 * cuda_ops_set_stream (the default stream until then). GEMMs are cuBLAS fp32 with its default math
 * mode (no TF32 unless NVIDIA_TF32_OVERRIDE says so); convolutions are im2col/col2im kernels
 * around cuBLAS; reductions that feed results (bias gradients, the loss) run in a fixed order, so
 * results are the same from run to run on the same GPU model. Never NULL; needs no GPU to call
 * (the entries need one). */
const kernel_ops *kernels_cuda(void);

/* Makes every op launch on `stream` (a cudaStream_t passed as void *, so that C callers need no
 * CUDA headers; NULL = the default stream) and binds the cuBLAS handle to it, creating the handle
 * on first use. DT_ERR_DEVICE with the cuBLAS or CUDA error in dt_last_error() on failure (no GPU,
 * no cuBLAS, out of memory); the stream is then still the one set before. */
dt_status cuda_ops_set_stream(void *stream);
/* The stream set last (NULL = the default stream). */
void *cuda_ops_stream(void);
/* Waits for everything launched on that stream; a failure is recorded as below and returned. */
dt_status cuda_ops_sync(void);

/* Number of elements of d[0..n) that are inf or NaN (d on the device): a device reduction on the
 * ops' stream, copied back; synchronizes that stream. On a CUDA failure it returns SIZE_MAX (so a
 * failed check never passes as "all finite") and records the error (cuda_ops_last_error). */
size_t cuda_count_nonfinite(const float *d, size_t n);
/* One pass: d[i] *= inv_scale, and the count of results that are inf or NaN; otherwise as
 * cuda_count_nonfinite. */
size_t cuda_unscale_count_nonfinite(float *d, size_t n, float inv_scale);
/* *flag (device memory) = stamp when d[0..n) holds an inf or NaN, else left alone: the per-layer
 * check of backward, queued on the ops' stream without waiting for it. */
void cuda_flag_nonfinite(const float *d, size_t n, int *flag, int stamp);

/* *out = the sum of d[i]^2 over d[0..n) in double (d on the device; the norm for gradient
 * clipping): a fixed-order device reduction on the ops' stream, copied back; synchronizes that
 * stream. The same n and values give the same bits on the same GPU model. DT_ERR_DEVICE (or
 * DT_ERR_NOMEM for the scratch) on failure, recorded as below, *out then 0. */
dt_status cuda_sum_squares(const float *d, size_t n, double *out);
/* Gradient accumulation on the ops' stream: g[i] += acc[i] when add, then acc[i] = g[i] when store
 * (both device buffers of n floats); queued without waiting. */
void cuda_accum_grads(float *g, float *acc, size_t n, int add, int store);

/* The first failure of an op since the last cuda_ops_clear_error() (DT_OK when none); when not
 * DT_OK, dt_last_error() of the calling thread then holds its message (what failed, the CUDA or
 * cuBLAS error, what to check). Does not clear it. */
dt_status cuda_ops_last_error(void);
/* Forgets the recorded failure. (A sticky CUDA error, e.g. after an illegal address, stays with
 * the CUDA context: the next op records it again.) */
void cuda_ops_clear_error(void);

/* Mixed precision (runtime/model/model_amp.c on a CUDA model). 16-bit arrays are uint16_t bit patterns
 * of type t (DT_F16 or DT_BF16); all on the ops' stream, launches checked as above. */
/* Row-major C(m,n) = op(A) op(B) + beta C, A and B 16-bit of type t, accumulated in fp32 on the
 * tensor cores (cublasGemmEx, CUBLAS_COMPUTE_32F); C of type ct: DT_F32, or t (rounded once). */
void cuda_gemm16(dt_dtype t, int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda,
                 const uint16_t *b, int ldb, float beta, void *c, dt_dtype ct, int ldc);
/* out = in rounded to t and widened back (in == out allowed). */
void cuda_round16(dt_dtype t, const float *in, float *out, size_t n);
/* The 16-bit ReLU of amp.h: y = x < 0 ? 0 : x (NaN passes); dx = y > 0 ? dy : 0 (dx may alias dy). */
void cuda_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n);
void cuda_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n);
/* y16(rows, cols) = round(y32 + b16 widened, per column). */
void cuda_bias_to16(dt_dtype t, const float *y32, const uint16_t *b16, uint16_t *y16, int rows, int cols);
/* db[j] = sum over the rows of dy16[i][j], in fp32, rows in order. */
void cuda_col_sums16(dt_dtype t, const uint16_t *dy, int rows, int cols, float *db);
/* Convolutions of a 16-bit model with 16-bit columns and GEMMs on the tensor cores (fp32
 * accumulation), same layouts and workspace (ws, conv_ws_floats of the table) as the fp32 ops.
 * fwd: y = round(conv(x, w) + b) via fp32 scratch y32 (batch x O x Ho x Wo floats); b may be NULL.
 * bwd_data: dx = round(conv^T(dy, w)) via fp32 scratch dx32 (batch x C x H x W floats).
 * bwd_filter: dw (fp32, overwritten) and db (fp32, NULL to skip), reading dy in 16 bits. */
void cuda_conv_fwd16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                     float *y32, uint16_t *y, float *ws);
void cuda_conv_bwd_data16(dt_dtype t, const conv_shape *s, const uint16_t *dy, const uint16_t *w, float *dx32,
                          uint16_t *dx, float *ws);
void cuda_conv_bwd_filter16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *dy, float *dw,
                            float *db, float *ws);

/* Max pooling of 16-bit values: the fp32 op on the widened values rounded back, exactly (the
 * maximum is one of the inputs, the gradient copies dy or writes +0), with the same idx; a NaN
 * maximum keeps its own 16-bit pattern. */
void cuda_maxpool16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, int32_t *idx, int batch, int c, int h, int w,
                        int k);
void cuda_maxpool16_bwd(const uint16_t *dy, const int32_t *idx, uint16_t *dx, int batch, int c, int h, int w, int k);

/* Frees the cuBLAS handle and the scratch buffer (the next op creates them again) and resets the
 * stream to the default one. Call before cudaDeviceReset or at exit if you care. */
void cuda_ops_release(void);

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_HAVE_CUDA */

#endif /* DT_KERNELS_CUDA_OPS_H */
