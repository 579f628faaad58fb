/*
 * ops_internal.cuh - what the CUDA op files share (ops.cu: the op table, its state and its
 * kernels; reduce.cu: the reductions over gradient buffers): the 16-bit conversions, launch
 * geometry, the device scratch of reductions that return a host value, and the state and error
 * helpers that ops.cu defines.
 */
#ifndef DT_KERNELS_CUDA_OPS_INTERNAL_CUH
#define DT_KERNELS_CUDA_OPS_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "kernels/cuda_ops.h"
#include "kernels/cast.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* 16-bit values are uint16_t bit patterns; bf selects bf16 over fp16 (see the mixed-precision
 * section below). */
static __device__ __forceinline__ float wide16(int bf, uint16_t v)
{
    return bf ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}

static __device__ __forceinline__ uint16_t narrow16(int bf, float f)
{
    return bf ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : __half_as_ushort(__float2half_rn(f));
}

/* An element as fp32, for kernels templated on fp32 or 16-bit storage. */
static __device__ __forceinline__ float as32(float v, int) { return v; }
static __device__ __forceinline__ float as32(uint16_t v, int bf) { return wide16(bf, v); }

/* Indices below 2^31 (the bias-gradient slices) take 32-bit arithmetic. */
#define IDX32_LIMIT ((size_t)1 << 31)

/* Row kernels: work split into `rows` rows of at most 2^31 elements each (an image plane, a row
 * of a column matrix); a block takes a row at a time and works out the row's coordinates once,
 * its threads walk the row's elements (32-bit, one division at most per element). Small rows get
 * smaller blocks (a multiple of a warp) so fewer threads idle; at most OPS_ROW_MAX_BLOCKS blocks
 * (a few waves of an H100/H200), each looping over rows, so short rows cost no block launch each. */
#define OPS_ROW_MAX_BLOCKS 4096u
static inline unsigned int row_threads(size_t per_row)
{
    const size_t t = (per_row + 31) / 32 * 32;
    return (unsigned int)(t < 32 ? 32 : t > 256 ? 256 : t);
}
#define LAUNCH_ROWS(kernel, rows, per_row, ...)                                                             \
    kernel<<<(unsigned int)((rows) < OPS_ROW_MAX_BLOCKS ? (rows) : OPS_ROW_MAX_BLOCKS), row_threads(per_row), 0, \
             g_stream>>>(__VA_ARGS__)

#define OPS_BLOCK 256       /* threads per block of every elementwise / gather kernel */
#define OPS_MAX_BLOCKS 65535
#define OPS_WARPS (OPS_BLOCK / 32)
#define OPS_MAX_PARTS 1024  /* blocks of the reductions that end in per-block partials */
#define OPS_DB_PARTS 16384  /* partial sums of the convolution bias gradient */
#define OPS_DB_BLOCKS 1056  /* blocks it aims for (8 per multiprocessor of an H100/H200) */

/* Convolution groups: as many images per GEMM as keep im2col's columns plus the (O, g*P) copy of
 * dy under this many floats (64 MiB), at least one image, at most 4096. */
#define CONV_WS_CAP ((size_t)1 << 24)
#define CONV_MAX_GROUP 4096

/* ---------------------------------------------------------------- state and errors */

typedef struct ops_result {
    double loss;
    double sumsq; /* cuda_sum_squares */
    unsigned long long count;
    int correct;
} ops_result;

/* Device scratch of the reductions that return a host value. */
typedef struct ops_scratch {
    double part_loss[OPS_MAX_PARTS];
    unsigned long long part_count[OPS_MAX_PARTS];
    double part_sumsq[OPS_MAX_PARTS];
    int part_correct[OPS_MAX_PARTS];
    double part_db[OPS_DB_PARTS]; /* convolution bias gradients: per (channel, slice of the batch) */
    ops_result res;
} ops_scratch;

/* ops.cu: the stream every op launches on, the first failure since cuda_ops_clear_error(), and
 * the checks and fetches every op uses. check_launch and fetch_result return 0 after recording a
 * failure (ops_fail); scratch returns NULL likewise. */
extern cudaStream_t g_stream;
extern dt_status g_err;
int check_launch(const char *op, const char *kernel, size_t n);
unsigned int grid_for(size_t n, size_t max_blocks);
ops_scratch *scratch(const char *op);
int fetch_result(const char *op, ops_result *r);

/* Shared by the files of the CUDA table (each defined in the file named): ops.cu records failures
 * and owns the one cuBLAS handle; gemm.cu the row-major GEMMs and the bias broadcast; the rest are
 * the table's entries, gathered into kernels_cuda() by ops.cu. */
/* ops.cu */
void ops_fail(dt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *cublas_name(cublasStatus_t st);
const char *cublas_text(cublasStatus_t st);
cublasHandle_t blas(const char *op);
/* gemm.cu */
void rm_gemm(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
             const float *b, int ldb, float beta, float *c, int ldc);
void rm_gemm_batched(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     int lda, long long sa, const float *b, int ldb, long long sb, float beta, float *c,
                     int ldc, long long sc, int count);
void bias_broadcast(const char *op, float *y, const float *b, size_t rows, size_t per, size_t outer, int chan);
void cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc);
void cuda_linear_fwd(const float *x, const float *w, const float *b, float *y, int batch, int in, int out);
void cuda_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                     int batch, int in, int out);
/* conv.cu */
size_t cuda_conv_ws_floats(const conv_shape *s);
void cuda_conv_fwd(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws);
void cuda_conv_bwd_data(const conv_shape *s, const float *dy, const float *w, float *dx, float *ws);
void cuda_conv_bwd_filter(const conv_shape *s, const float *x, const float *dy, float *dw, float *db,
                          float *ws);
/* elementwise.cu */
void cuda_relu_fwd(const float *x, float *y, size_t n);
void cuda_relu_bwd(const float *y, const float *dy, float *dx, size_t n);
/* pool.cu */
void cuda_maxpool_fwd(const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k);
void cuda_maxpool_bwd(const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w, int k);
/* loss.cu */
double cuda_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                         float grad_scale, int *correct);
/* optim.cu */
void cuda_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd, int first);
void cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1, float b2,
                float eps, float wd, int t);

#endif
