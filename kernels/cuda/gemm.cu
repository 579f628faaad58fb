/*
 * gemm.cu - the CUDA table's GEMMs (cuBLAS, row-major on column-major), the bias broadcast and sums, the fully connected layer, and the 16-bit GEMM of mixed precision (cublasGemmEx on the tensor cores).
 */
#include "kernels/cuda/ops_internal.cuh"

/* ---------------------------------------------------------------- GEMM */

/* Row-major C(m,n) = alpha op(A) op(B) + beta C through column-major cuBLAS: C^T = op(B)^T op(A)^T. */
void rm_gemm(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
             const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    cublasHandle_t h = blas(op);
    if (!h) return;
    const cublasStatus_t st = cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                                          k, &alpha, b, ldb, a, lda, &beta, c, ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
        ops_fail(DT_ERR_DEVICE,
                 "cuda %s: cublasSgemm (row-major m %d n %d k %d, trans_a %d trans_b %d, ld %d/%d/%d) "
                 "failed: %s (%s)",
                 op, m, n, k, ta, tb, lda, ldb, ldc, cublas_name(st), cublas_text(st));
}

/* The same for `count` products, matrix i at a + i*sa, b + i*sb, c + i*sc (sa 0: one A for all). */
void rm_gemm_batched(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     int lda, long long sa, const float *b, int ldb, long long sb, float beta, float *c,
                     int ldc, long long sc, int count)
{
    if (m <= 0 || n <= 0 || count <= 0) return;
    cublasHandle_t h = blas(op);
    if (!h) return;
    const cublasStatus_t st =
        cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                  b, ldb, sb, a, lda, sa, &beta, c, ldc, sc, count);
    if (st != CUBLAS_STATUS_SUCCESS)
        ops_fail(DT_ERR_DEVICE,
                 "cuda %s: cublasSgemmStridedBatched (row-major m %d n %d k %d x %d, trans_a %d "
                 "trans_b %d) failed: %s (%s)",
                 op, m, n, k, count, ta, tb, cublas_name(st), cublas_text(st));
}

void cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc)
{
    rm_gemm("gemm", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
void bias_broadcast(const char *op, float *y, const float *b, size_t rows, size_t per, size_t outer, int chan)
{
    if (rows == 0 || per == 0) return;
    if (chan)
        LAUNCH_ROWS(bias_broadcast_kernel<true>, rows, per, y, b, rows, (uint32_t)per, (uint32_t)outer);
    else
        LAUNCH_ROWS(bias_broadcast_kernel<false>, rows, per, y, b, rows, (uint32_t)per, (uint32_t)outer);
    check_launch(op, "the bias broadcast", rows * per);
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
void cuda_linear_fwd(const float *x, const float *w, const float *b, float *y, int batch, int in, int out)
{
    if (batch <= 0 || out <= 0) return;
    const size_t n = (size_t)batch * out;
    if (b) bias_broadcast("linear_fwd", y, b, (size_t)batch, (size_t)out, (size_t)out, 0);
    if (in <= 0) { /* an empty product: cuBLAS would reject lda 0 */
        if (!b) {
            const cudaError_t e = cudaMemsetAsync(y, 0, n * sizeof *y, g_stream);
            if (e != cudaSuccess)
                ops_fail(DT_ERR_DEVICE, "cuda linear_fwd: cudaMemsetAsync failed: %s (%s)", cudaGetErrorName(e),
                         cudaGetErrorString(e));
        }
        return;
    }
    rm_gemm("linear_fwd", 0, 1, batch, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

/* dW(OUT,IN) = dy^T x;  db = column sums of dy;  dx(B,IN) = dy W. */
void cuda_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                     int batch, int in, int out)
{
    if (out <= 0) return;
    rm_gemm("linear_bwd", 1, 0, out, in, batch, 1.0f, dy, out, x, in, 0.0f, dw, in);
    if (db) {
        col_sum_kernel<<<grid_for((size_t)out, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(dy, db, batch, out);
        check_launch("linear_bwd", "the bias-gradient column sums", (size_t)out);
    }
    if (dx) rm_gemm("linear_bwd", 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}


extern "C" void cuda_gemm16(dt_dtype t, int ta, int tb, int m, int n, int k, const uint16_t *a, int lda,
                            const uint16_t *b, int ldb, float beta, void *c, dt_dtype ct, int ldc)
{
    if (m <= 0 || n <= 0) return;
    cublasHandle_t h = blas("gemm16");
    if (!h) return;
    const cudaDataType_t ab = t == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t cc = ct == DT_F32 ? CUDA_R_32F : ab;
    const float alpha = 1.0f;
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
    const cublasStatus_t st =
        cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ab, ldb, a,
                     ab, lda, &beta, c, cc, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        ops_fail(DT_ERR_DEVICE,
                 "cuda gemm16: cublasGemmEx (%s, row-major m %d n %d k %d, trans_a %d trans_b %d, ld %d/%d/%d) "
                 "failed: %s (%s)",
                 t == DT_BF16 ? "bf16" : "fp16", m, n, k, ta, tb, lda, ldb, ldc, cublas_name(st), cublas_text(st));
}

