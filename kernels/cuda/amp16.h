/*
 * cuda/amp16.h - the 16-bit launchers of the CUDA backend that its layer entries are built from
 * (kernels/cuda/layers.cu), and the fp32 convolution forward with a fused ReLU, declared for C so that tests/gpu/test_cuda_ops_*.c checks each against
 * the CPU on its own. Only in CUDA builds; device pointers; 16-bit values are uint16_t bit
 * patterns of type t (DT_F16 or DT_BF16); all on the backend's stream, each returning its status
 * (a failed launch or cuBLAS call, DT_ERR_DEVICE).
 */
#ifndef DT_KERNELS_CUDA_AMP16_H
#define DT_KERNELS_CUDA_AMP16_H

#include "kernels/ops.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Row-major C(m,n) = op(A) op(B) + beta C, A and B 16-bit of type t, accumulated in fp32 on the
 * tensor cores (cublasGemmEx, CUBLAS_COMPUTE_32F); C of type ct: DT_F32, or t (rounded once). */
dt_status cuda_gemm16(dt_dtype t, int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda,
                      const uint16_t *b, int ldb, float beta, void *c, dt_dtype ct, int ldc);
/* The 16-bit fc layers' GEMMs so far: how many ran with their cuBLASLt epilogue fused (gemm_lt.cu)
 * and how many took the unfused GEMM and kernel, so a test can tell a fused layer from a fallback
 * that computes the same values. */
void cuda_lt_counts(long *fused, long *unfused);
/* y = x < 0 ? 0 : x (NaN passes); dx = y > 0 ? dy : 0 (dx may alias dy). */
dt_status cuda_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n);
dt_status cuda_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n);
/* y16(rows, cols) = round(y32 + b16 widened, per column); relu: then through ReLU (relu16). */
dt_status cuda_bias_to16(dt_dtype t, const float *y32, const uint16_t *b16, uint16_t *y16, int rows, int cols,
                         int relu);
/* db[j] = sum over the rows of dy16[i][j], in fp32, rows in order. */
dt_status cuda_col_sums16(dt_dtype t, const uint16_t *dy, int rows, int cols, float *db);
/* Convolutions with 16-bit columns and tensor-core GEMMs (fp32 accumulation), the layouts and
 * workspace (conv_ws_floats) of the fp32 ones. fwd: y = round(conv(x, w) + b), b may be NULL, relu:
 * y then through ReLU as it is written; bwd_data: dx = round(conv^T(dy, w)); bwd_filter: dw (fp32,
 * overwritten) and db (fp32, NULL to skip). Only a pointwise convolution (1x1, stride 1, no
 * padding: its GEMMs write whole fp32 results) uses the fp32 scratch y32 (batch x O x Ho x Wo
 * floats) or dx32 (batch x C x H x W); the others round as they scatter or col2im (NULL serves). */
dt_status cuda_conv_fwd16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                          float *y32, uint16_t *y, float *ws, int relu);
dt_status cuda_conv_bwd_data16(dt_dtype t, const conv_shape *s, const uint16_t *dy, const uint16_t *w, float *dx32,
                               uint16_t *dx, float *ws);
dt_status cuda_conv_bwd_filter16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *dy, float *dw,
                                 float *db, float *ws);
/* The fp32 convolution forward (the table's conv_fwd) with relu 1 passing y through ReLU as the
 * relu layer does: in the scatter that writes y, or a pass after where the GEMMs write it. */
dt_status cuda_conv_fwd_relu(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws,
                             int relu);
/* Max pooling of 16-bit values: the fp32 op on the widened values, exactly, with the same idx. */
dt_status cuda_maxpool16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, int32_t *idx, int batch, int c, int h, int w,
                             int k);
/* ry not NULL: the pooled input is a relu layer's output, whose backward runs here too: dy passes
 * only where ry (the pool's forward output) is positive, as the relu layer would have masked it
 * (the same bits). cuda_maxpool_relu_bwd: the same for fp32. */
dt_status cuda_maxpool16_bwd(dt_dtype t, const uint16_t *dy, const int32_t *idx, const uint16_t *ry, uint16_t *dx,
                             int batch, int c, int h, int w, int k);
dt_status cuda_maxpool_relu_bwd(const float *dy, const int32_t *idx, const float *ry, float *dx, int batch, int c,
                                int h, int w, int k);

#ifdef __cplusplus
}
#endif
#endif
