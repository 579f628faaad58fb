/*
 * gemm.cu - the CUDA backend's GEMMs (cuBLAS, row-major on column-major; fp32, and 16-bit inputs
 * on the tensor cores with fp32 accumulation), the bias broadcast and column sums, and the fully
 * connected layer.
 */
#include "kernels/cuda/cuda_internal.cuh"

/* ---------------------------------------------------------------- GEMM */

static cublasOperation_t op_of(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* Row-major C(m,n) = alpha op(A) op(B) + beta C, `count` times (matrix i at a + i*sa, b + i*sb,
 * c + i*sc; sa 0: one A for all), through column-major cuBLAS: C^T = op(B)^T op(A)^T. count < 0:
 * one product by cublasSgemm rather than a batch (the drivers keep the call they were measured
 * and checked with). */
dt_status rm_gemm_batched(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                          long long sa, const float *b, int ldb, long long sb, float beta, float *c, int ldc,
                          long long sc, int count)
{
    const int single = count < 0;
    if (single) count = 1;
    if (m <= 0 || n <= 0 || count == 0) return DT_OK;
    cublasHandle_t h;
    TRY(blas(op, &h));
    const cublasStatus_t st = single
                                  ? cublasSgemm(h, op_of(tb), op_of(ta), n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc)
                                  : cublasSgemmStridedBatched(h, op_of(tb), op_of(ta), n, m, k, &alpha, b, ldb, sb, a,
                                                              lda, sa, &beta, c, ldc, sc, count);
    if (st == CUBLAS_STATUS_SUCCESS) return DT_OK;
    return status_set_error(DT_ERR_DEVICE,
                            "cuda %s: cublasSgemm%s (row-major m %d n %d k %d x %d, trans_a %d trans_b "
                            "%d, ld %d/%d/%d) failed: %s (%s)",
                            op, single ? "" : "StridedBatched", m, n, k, count, ta, tb, lda, ldb, ldc, cublas_name(st),
                            cublas_text(st));
}

/* The same with 16-bit A and B of type t on the tensor cores, accumulated in fp32
 * (CUBLAS_COMPUTE_32F); C of type ct: DT_F32, or t (rounded once). count < 0: one cublasGemmEx. */
dt_status rm_gemm16_batched(const char *op, dt_dtype t, int ta, int tb, int m, int n, int k, const void *a, int lda,
                            long long sa, const void *b, int ldb, long long sb, float beta, void *c, dt_dtype ct,
                            int ldc, long long sc, int count)
{
    const int single = count < 0;
    if (single) count = 1;
    if (m <= 0 || n <= 0 || count == 0) return DT_OK;
    cublasHandle_t h;
    TRY(blas(op, &h));
    const cudaDataType_t ab = t == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F, cc = ct == DT_F32 ? CUDA_R_32F : ab;
    const float alpha = 1.0f;
    const cublasStatus_t st =
        single ? cublasGemmEx(h, op_of(tb), op_of(ta), n, m, k, &alpha, b, ab, ldb, a, ab, lda, &beta, c, cc, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
               : cublasGemmStridedBatchedEx(h, op_of(tb), op_of(ta), n, m, k, &alpha, b, ab, ldb, sb, a, ab, lda, sa,
                                            &beta, c, cc, ldc, sc, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st == CUBLAS_STATUS_SUCCESS) return DT_OK;
    return status_set_error(DT_ERR_DEVICE,
                            "cuda %s: cublasGemm%sEx (%s, row-major m %d n %d k %d x %d, trans_a %d "
                            "trans_b %d, ld %d/%d/%d) failed: %s (%s)",
                            op, single ? "" : "StridedBatched", t == DT_BF16 ? "bf16" : "fp16", m, n, k, count, ta, tb,
                            lda, ldb, ldc, cublas_name(st), cublas_text(st));
}

dt_status cuda_gemm(backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)be;
    return rm_gemm_batched("gemm", trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, -1);
}

/* ---------------------------------------------------------------- bias broadcast and sums */

/* The bias into y as `rows` rows of `per` values: row r of NCHW planes takes b[r % outer] (CHAN:
 * a convolution, outer = channels), a row of a (rows, out) matrix takes b[column]. */
template <bool CHAN>
static __global__ void bias_broadcast_kernel(float *__restrict__ y, const float *__restrict__ b, size_t rows,
                                             uint32_t per, uint32_t outer)
{
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float *yr = y + r * per;
        const float br = CHAN ? b[r % outer] : 0.0f;
        for (uint32_t p = threadIdx.x; p < per; p += blockDim.x) yr[p] = CHAN ? br : b[p];
    }
}

/* y (rows, per) from the bias: chan, per channel plane (outer channels); else per column. */
dt_status bias_broadcast(const char *op, float *y, const float *b, size_t rows, size_t per, size_t outer, int chan)
{
    if (rows == 0 || per == 0) return DT_OK;
    if (chan)
        LAUNCH_ROWS(bias_broadcast_kernel<true>, rows, per, y, b, rows, (uint32_t)per, (uint32_t)outer);
    else
        LAUNCH_ROWS(bias_broadcast_kernel<false>, rows, per, y, b, rows, (uint32_t)per, (uint32_t)outer);
    return check_launch(op, "the bias broadcast", rows * per);
}

/* db[j] = sum over rows i of dy[i*cols + j], one thread per column adding rows in order in fp32:
 * exactly the CPU's loop (add_row in cpu/ops.c), so the result is the same bit for bit. Adjacent
 * threads read adjacent columns (coalesced). */
static __global__ void col_sum_kernel(const float *__restrict__ dy, float *__restrict__ db, int rows, int cols)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < (size_t)cols; j += stride) {
        float acc = 0.0f;
        for (int i = 0; i < rows; i++) acc += dy[(size_t)i * cols + j];
        db[j] = acc;
    }
}

/* ---------------------------------------------------------------- fully connected */

/* y(B,OUT) = x(B,IN) W(OUT,IN)^T + b: the bias broadcast into y, then the GEMM adds to it (beta 1),
 * as the CPU does. */
dt_status cuda_linear_fwd(backend *be, const float *x, const float *w, const float *b, float *y, int batch, int in,
                          int out)
{
    (void)be;
    if (batch <= 0 || out <= 0) return DT_OK;
    const size_t n = (size_t)batch * out;
    if (b) TRY(bias_broadcast("linear_fwd", y, b, (size_t)batch, (size_t)out, (size_t)out, 0));
    if (in <= 0) /* an empty product: cuBLAS would reject lda 0 */
        return b ? DT_OK : cuda_err(cudaMemsetAsync(y, 0, n * sizeof *y, g_stream), "linear_fwd", "cudaMemsetAsync");
    return rm_gemm_batched("linear_fwd", 0, 1, batch, out, in, 1.0f, x, in, 0, w, in, 0, b ? 1.0f : 0.0f, y, out, 0,
                           -1);
}

/* dW(OUT,IN) = dy^T x;  db = column sums of dy;  dx(B,IN) = dy W. */
dt_status cuda_linear_bwd(backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                          int batch, int in, int out)
{
    (void)be;
    if (out <= 0) return DT_OK;
    TRY(rm_gemm_batched("linear_bwd", 1, 0, out, in, batch, 1.0f, dy, out, 0, x, in, 0, 0.0f, dw, in, 0, -1));
    if (db) {
        col_sum_kernel<<<grid_for((size_t)out, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(dy, db, batch, out);
        TRY(check_launch("linear_bwd", "the bias-gradient column sums", (size_t)out));
    }
    if (!dx) return DT_OK;
    return rm_gemm_batched("linear_bwd", 0, 0, batch, in, out, 1.0f, dy, out, 0, w, in, 0, 0.0f, dx, in, 0, -1);
}

extern "C" dt_status cuda_gemm16(dt_dtype t, int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda,
                                 const uint16_t *b, int ldb, float beta, void *c, dt_dtype ct, int ldc)
{
    return rm_gemm16_batched("gemm16", t, trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, beta, c, ct, ldc, 0, -1);
}
