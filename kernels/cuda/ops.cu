/*
 * cuda/ops.cu - the CUDA op table (kernels_cuda(), contract in ops.h) and the CUDA entry points of
 * cuda_ops.h: each kernel beside the extern "C"-reachable host function that launches it.
 *
 * Semantics follow the CPU table (kernels/cpu/), the oracle of tests/gpu/test_cuda_ops.c:
 *   - GEMMs are cublasSgemm / cublasSgemmStridedBatched in cuBLAS's default math mode (fp32
 *     arithmetic; no TF32 unless NVIDIA_TF32_OVERRIDE turns it on). ops.h is row-major and cuBLAS
 *     column-major: the memory of a row-major matrix is its transpose in column-major, so
 *     C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, i.e. cuBLAS gets B first and n, m
 *     swapped (as launch/bench_gemm_cuda.c does).
 *   - Convolutions: im2col into the workspace, one strided-batched GEMM for a group of images
 *     (forward, backward-data) or one GEMM whose inner dimension runs over the group's pixels
 *     (backward-filter, which needs dy gathered into (O, g*P) like the CPU's grouped path). col2im
 *     is a gather: each input pixel sums the column entries that read it, in the CPU's (kh, kw)
 *     order, so no atomics are needed.
 *   - Elementwise ops use the __fmul_rn/__fadd_rn intrinsics where the CPU rounds each operation
 *     (nvcc would otherwise contract a*b+c into one FMA), so SGD and ReLU match bit for bit; AdamW
 *     follows the CPU's AVX2 path, FMAs included (the one every x86-64 host with AVX2 takes).
 *   - Reductions (bias gradients, the loss, the correct count; the non-finite counts and norms of
 *     reduce.cu) run in a
 *     fixed order with no float atomics: per-thread sums, fixed shared-memory trees, per-block
 *     partials summed by one thread. Results repeat bit for bit run to run on the same GPU model
 *     and grid (the grids depend only on the sizes).
 *
 * Launches go to the stream of cuda_ops_set_stream and are checked with cudaGetLastError; the first
 * failure is recorded for cuda_ops_last_error(). Only softmax_xent and the non-finite counters
 * synchronize (they return host values). Loops are grid-stride loops; kernels that need coordinates
 * are row kernels (LAUNCH_ROWS): a block works out a row's coordinates once and its threads walk
 * the row with 32-bit indices, at most one division each.
 */
#include "ops_internal.cuh"

cudaStream_t g_stream;    /* NULL: the default stream */
static cublasHandle_t g_blas;    /* created on first use, bound to g_stream */
static ops_scratch *g_scratch;   /* cudaMalloc'ed on first use */
dt_status g_err = DT_OK;  /* the first failure since cuda_ops_clear_error() */
static char g_msg[768];

static void ops_fail(dt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ops_fail(dt_status s, const char *fmt, ...)
{
    char buf[sizeof g_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (g_err == DT_OK) {
        g_err = s;
        memcpy(g_msg, buf, sizeof g_msg);
    }
    dt_set_error(s, "%s", buf);
}

static const char *cublas_name(cublasStatus_t st) { return cublasGetStatusName(st); }
static const char *cublas_text(cublasStatus_t st) { return cublasGetStatusString(st); }

/* A failed launch (bad configuration, no device, no kernel image for this GPU) shows up here; so
 * may an earlier asynchronous error of the same context, which is then reported too. */
int check_launch(const char *op, const char *kernel, size_t n)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 1;
    ops_fail(DT_ERR_DEVICE,
             "cuda %s: launching %s for %zu elements failed: %s (%s); check that the GPU is healthy "
             "and that dtrain was built for its compute capability (CMAKE_CUDA_ARCHITECTURES)",
             op, kernel, n, cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}

unsigned int grid_for(size_t n, size_t max_blocks)
{
    const size_t blocks = (n + OPS_BLOCK - 1) / OPS_BLOCK;
    return (unsigned int)(blocks < max_blocks ? (blocks ? blocks : 1) : max_blocks);
}

static cublasHandle_t blas(const char *op)
{
    if (g_blas) return g_blas;
    cublasHandle_t h;
    cublasStatus_t st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        ops_fail(DT_ERR_DEVICE,
                 "cuda %s: cublasCreate failed: %s (%s); check that a GPU is visible and has free "
                 "memory",
                 op, cublas_name(st), cublas_text(st));
        return NULL;
    }
    st = cublasSetStream(h, g_stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        ops_fail(DT_ERR_DEVICE, "cuda %s: cublasSetStream failed: %s (%s)", op, cublas_name(st),
                 cublas_text(st));
        cublasDestroy(h);
        return NULL;
    }
    g_blas = h;
    return h;
}

ops_scratch *scratch(const char *op)
{
    if (g_scratch) return g_scratch;
    void *p = NULL;
    const cudaError_t e = cudaMalloc(&p, sizeof(ops_scratch));
    if (e != cudaSuccess) {
        ops_fail(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_DEVICE,
                 "cuda %s: cudaMalloc of %zu bytes of reduction scratch failed: %s (%s)", op,
                 sizeof(ops_scratch), cudaGetErrorName(e), cudaGetErrorString(e));
        return NULL;
    }
    g_scratch = (ops_scratch *)p;
    return g_scratch;
}

/* Copies the reduction result back and waits for the stream. */
int fetch_result(const char *op, ops_result *r)
{
    cudaError_t e = cudaMemcpyAsync(r, &g_scratch->res, sizeof *r, cudaMemcpyDeviceToHost, g_stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g_stream);
    if (e == cudaSuccess) return 1;
    ops_fail(DT_ERR_DEVICE,
             "cuda %s: copying the result back failed: %s (%s) (the error may come from any "
             "earlier kernel on the stream)",
             op, cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}

extern "C" dt_status cuda_ops_set_stream(void *stream)
{
    const cudaStream_t s = (cudaStream_t)stream;
    if (!g_blas) {
        cublasHandle_t h;
        const cublasStatus_t st = cublasCreate(&h);
        if (st != CUBLAS_STATUS_SUCCESS)
            return dt_set_error(DT_ERR_DEVICE,
                                "cuda_ops_set_stream: cublasCreate failed: %s (%s); check that a GPU "
                                "is visible and has free memory",
                                cublas_name(st), cublas_text(st));
        g_blas = h;
    }
    const cublasStatus_t st = cublasSetStream(g_blas, s);
    if (st != CUBLAS_STATUS_SUCCESS)
        return dt_set_error(DT_ERR_DEVICE, "cuda_ops_set_stream: cublasSetStream(%p) failed: %s (%s)",
                            stream, cublas_name(st), cublas_text(st));
    g_stream = s;
    return DT_OK;
}

extern "C" void *cuda_ops_stream(void) { return (void *)g_stream; }

extern "C" dt_status cuda_ops_sync(void)
{
    const cudaError_t e = cudaStreamSynchronize(g_stream);
    if (e == cudaSuccess) return DT_OK;
    ops_fail(DT_ERR_DEVICE, "cuda: waiting for the stream failed: %s (%s) (the error may come from any earlier "
             "kernel on it)", cudaGetErrorName(e), cudaGetErrorString(e));
    return cuda_ops_last_error();
}

extern "C" dt_status cuda_ops_last_error(void)
{
    if (g_err != DT_OK) dt_set_error(g_err, "%s", g_msg);
    return g_err;
}

extern "C" void cuda_ops_clear_error(void)
{
    g_err = DT_OK;
    g_msg[0] = '\0';
}

extern "C" void cuda_ops_release(void)
{
    if (g_blas) cublasDestroy(g_blas);
    if (g_scratch) cudaFree(g_scratch);
    g_blas = NULL;
    g_scratch = NULL;
    g_stream = NULL;
}

/* ---------------------------------------------------------------- GEMM */

/* Row-major C(m,n) = alpha op(A) op(B) + beta C through column-major cuBLAS: C^T = op(B)^T op(A)^T. */
static void rm_gemm(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
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
static void rm_gemm_batched(const char *op, int ta, int tb, int m, int n, int k, float alpha, const float *a,
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

static void cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
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
static void bias_broadcast(const char *op, float *y, const float *b, size_t rows, size_t per, size_t outer, int chan)
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

/* The convolution bias gradient db[o] = sum over images n and pixels p of dy[(n*O + o)*P + p], in
 * double (as the CPU) and rounded to float once, in a fixed order whatever the timing: pass one
 * gives each (channel o, slice c of nb slices of the batch) a block that sums its slice's
 * elements thread by thread and then in a fixed shared-memory tree, into part[o*nb + c] (or, when
 * nb is 1, straight into db); pass two adds a channel's nb partials in order. dy is fp32 or
 * 16-bit (T), read where it lies. */
template <typename T>
static __global__ void conv_bias_part_kernel(const T *__restrict__ dy, int bf, int batch, int O, uint32_t P, int nb,
                                             double *__restrict__ part, float *__restrict__ db)
{
    __shared__ double sh[OPS_BLOCK];
    const int c = blockIdx.x;
    const int n0 = (int)((long long)batch * c / nb), n1 = (int)((long long)batch * (c + 1) / nb);
    const uint32_t cnt = (uint32_t)(n1 - n0) * P; /* < 2^31: the launcher sizes the slices so */
    for (int o = blockIdx.y; o < O; o += gridDim.y) { /* the same o for every thread of the block */
        double acc = 0.0;
        for (uint32_t j = threadIdx.x; j < cnt; j += blockDim.x) {
            const uint32_t n = j / P, p = j - n * P;
            acc += as32(dy[((size_t)(n0 + n) * O + o) * P + p], bf);
        }
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int w = OPS_BLOCK / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (nb == 1)
                db[o] = (float)sh[0];
            else
                part[(size_t)o * nb + c] = sh[0];
        }
        __syncthreads(); /* sh is reused by the next channel */
    }
}

static __global__ void conv_bias_final_kernel(const double *__restrict__ part, int O, int nb, float *__restrict__ db)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= O) return;
    double acc = 0.0;
    for (int c = 0; c < nb; c++) acc += part[(size_t)o * nb + c];
    db[o] = (float)acc;
}

template <typename T>
static void conv_bias_grad(const char *op, const T *dy, int bf, int batch, int O, size_t P, float *db)
{
    if (O <= 0 || batch <= 0) return;
    /* Enough blocks to fill the GPU, at most one slice per image; and slices small enough for
     * 32-bit indices (more of them when batch x P is large). */
    int nb = (OPS_DB_BLOCKS + O - 1) / O;
    const size_t need = ((size_t)batch * P + (IDX32_LIMIT / 2) - 1) / (IDX32_LIMIT / 2);
    if ((size_t)nb < need) nb = (int)(need < (size_t)batch ? need : (size_t)batch);
    if (nb > batch) nb = batch;
    const size_t slice = ((size_t)batch + nb - 1) / nb * P;
    if (slice >= IDX32_LIMIT || (nb > 1 && (size_t)O * nb > OPS_DB_PARTS)) {
        ops_fail(DT_ERR_UNSUPPORTED, "cuda %s: the bias gradient of %d channels of %zu values over a batch of %d is "
                 "beyond this kernel (at most %d partial sums, 2^31 values a slice): use a smaller --batch", op, O, P,
                 batch, OPS_DB_PARTS);
        return;
    }
    ops_scratch *s = NULL;
    if (nb > 1 && !(s = scratch(op))) return;
    const unsigned int gy = (unsigned int)(O < 65535 ? O : 65535);
    conv_bias_part_kernel<<<dim3((unsigned int)nb, gy), OPS_BLOCK, 0, g_stream>>>(dy, bf, batch, O, (uint32_t)P, nb,
                                                                                s ? s->part_db : NULL, db);
    if (!check_launch(op, "the bias-gradient partial sums", (size_t)O * nb) || nb == 1) return;
    conv_bias_final_kernel<<<(unsigned int)((O + OPS_BLOCK - 1) / OPS_BLOCK), OPS_BLOCK, 0, g_stream>>>(s->part_db, O,
                                                                                                      nb, db);
    check_launch(op, "the bias-gradient sums", (size_t)O);
}

/* ---------------------------------------------------------------- fully connected */

/* y(B,OUT) = x(B,IN) W(OUT,IN)^T + b: the bias broadcast into y, then the GEMM adds to it (beta 1),
 * as the CPU does. */
static void cuda_linear_fwd(const float *x, const float *w, const float *b, float *y, int batch, int in, int out)
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
static void cuda_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
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

/* ---------------------------------------------------------------- convolution */

/* Shape numbers as the kernels want them. */
typedef struct conv_geo {
    int C, H, W, k, S, pad, Ho, Wo;
} conv_geo;

static conv_geo geo_of(const conv_shape *s)
{
    conv_geo g = {s->c_in, s->h, s->w, s->k, s->stride, s->pad, s->h_out, s->w_out};
    return g;
}

/* im2col of g images starting at x (NCHW, C*H*W apart): element (i, row, pix) with row =
 * (c*k + kh)*k + kw and pix = oh*Wo + ow goes to col[i*img_stride + row*ld + pix] and holds
 * x_i[c][oh*S - pad + kh][ow*S - pad + kw], or 0 in the padding (the CPU's definition, conv.c).
 * Layout (g, K, P): img_stride K*P, ld P; layout (K, g*P): img_stride P, ld g*P.
 * A row kernel: one (image, row) per block turn, its threads along the row's P pixels. */
template <typename T>
static __global__ void im2col_kernel(const T *__restrict__ x, T *__restrict__ col, conv_geo q, int g,
                                     size_t img_stride, size_t ld)
{
    const uint32_t K = (uint32_t)q.C * q.k * q.k, P = (uint32_t)q.Ho * q.Wo, Wo = (uint32_t)q.Wo;
    const size_t plane = (size_t)q.H * q.W, rows = (size_t)g * K;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint32_t row = (uint32_t)(r % K);
        const size_t i = r / K;
        const int kw = (int)(row % (uint32_t)q.k), kh = (int)((row / (uint32_t)q.k) % (uint32_t)q.k);
        const int c = (int)(row / ((uint32_t)q.k * q.k));
        const T *xp = x + ((size_t)i * q.C + c) * plane;
        T *cp = col + i * img_stride + (size_t)row * ld;
        for (uint32_t pix = threadIdx.x; pix < P; pix += blockDim.x) {
            const uint32_t oh = pix / Wo, ow = pix - oh * Wo;
            const int ih = (int)oh * q.S - q.pad + kh, iw = (int)ow * q.S - q.pad + kw;
            T v = (T)0; /* +0 in fp32, and the +0 pattern of fp16/bf16 */
            if (ih >= 0 && ih < q.H && iw >= 0 && iw < q.W) v = xp[(size_t)ih * q.W + iw];
            cp[pix] = v;
        }
    }
}

/* col2im as a gather into g images of dx (NCHW, overwritten): each input pixel (ih, iw) of channel
 * c sums col[(c*k + kh)*k + kw][oh*Wo + ow] over the (kh, kw) with ih = oh*S - pad + kh and
 * iw = ow*S - pad + kw for an output (oh, ow) inside the image, in increasing kh then kw, the order
 * in which the CPU's col2im adds them; pixels that no window reads get 0. A row kernel: one
 * (image, channel) plane per block turn; S1 (stride 1, the common case) needs no divisions. */
template <bool S1>
static __global__ void col2im_kernel(const float *__restrict__ col, float *__restrict__ dx, conv_geo q, int g,
                                     size_t img_stride, size_t ld)
{
    const uint32_t W = (uint32_t)q.W, HW = (uint32_t)q.H * q.W;
    const size_t rows = (size_t)g * q.C;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int c = (int)(r % (uint32_t)q.C);
        const size_t i = r / (uint32_t)q.C;
        const float *ci = col + i * img_stride + (size_t)c * q.k * q.k * ld;
        float *dp = dx + r * HW;
        for (uint32_t p = threadIdx.x; p < HW; p += blockDim.x) {
            const int ih = (int)(p / W), iw = (int)(p - (uint32_t)ih * W);
            float sum = 0.0f;
            for (int kh = 0; kh < q.k; kh++) {
                const int y = ih + q.pad - kh; /* = oh*S; decreases with kh */
                if (y < 0) break;
                if (!S1 && y % q.S) continue;
                const int oh = S1 ? y : y / q.S;
                if (oh >= q.Ho) continue;
                for (int kw = 0; kw < q.k; kw++) {
                    const int xw = iw + q.pad - kw;
                    if (xw < 0) break;
                    if (!S1 && xw % q.S) continue;
                    const int ow = S1 ? xw : xw / q.S;
                    if (ow >= q.Wo) continue;
                    sum += ci[(size_t)(kh * q.k + kw) * ld + (size_t)oh * q.Wo + ow];
                }
            }
            dp[p] = sum;
        }
    }
}

static int col2im(const char *op, const conv_shape *s, const float *col, float *dx, int g, size_t img_stride,
                  size_t ld)
{
    const size_t rows = (size_t)g * s->c_in, hw = (size_t)s->h * s->w;
    if (rows == 0 || hw == 0) return 1;
    if (s->stride == 1)
        LAUNCH_ROWS(col2im_kernel<true>, rows, hw, col, dx, geo_of(s), g, img_stride, ld);
    else
        LAUNCH_ROWS(col2im_kernel<false>, rows, hw, col, dx, geo_of(s), g, img_stride, ld);
    return check_launch(op, "col2im", rows * hw);
}

/* dy of g images (NCHW (g, O, P)) -> the GEMM layout (O, g*P): out[o*g*P + i*P + p]. A row
 * kernel: one (image, channel) plane of P values per block turn. */
template <typename T>
static __global__ void gather_dy_kernel(const T *__restrict__ dy, T *__restrict__ out, int g, int O, uint32_t P)
{
    const size_t rows = (size_t)g * O, ld = (size_t)g * P;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const size_t o = r % (uint32_t)O, i = r / (uint32_t)O;
        const T *src = dy + r * P;
        T *dst = out + o * ld + i * P;
        for (uint32_t p = threadIdx.x; p < P; p += blockDim.x) dst[p] = src[p];
    }
}

template <typename T>
static int gather_dy(const char *op, const T *dy, T *out, int g, int O, size_t P)
{
    const size_t rows = (size_t)g * O;
    if (rows == 0 || P == 0) return 1;
    LAUNCH_ROWS(gather_dy_kernel, rows, P, dy, out, g, O, (uint32_t)P);
    return check_launch(op, "the dy gather", rows * P);
}

static int conv_is_pointwise(const conv_shape *s) { return s->k == 1 && s->stride == 1 && s->pad == 0; }

/* Images per group: depends on the shape and is capped by the batch, so a workspace sized for a
 * batch also serves every smaller one. */
static int conv_group(const conv_shape *s)
{
    const size_t K = (size_t)s->c_in * s->k * s->k, P = (size_t)s->h_out * s->w_out, O = (size_t)s->c_out;
    size_t g = CONV_WS_CAP / (P * (K + O));
    if (g < 1) g = 1;
    if (g > CONV_MAX_GROUP) g = CONV_MAX_GROUP;
    if (g > (size_t)s->batch) g = (size_t)s->batch;
    return (int)g;
}

/* G images' columns (K, G*P) plus the (O, G*P) copy of dy that backward-filter gathers; forward
 * and backward-data use only the first part (and a pointwise forward/backward-data none). */
static size_t cuda_conv_ws_floats(const conv_shape *s)
{
    const size_t K = (size_t)s->c_in * s->k * s->k, P = (size_t)s->h_out * s->w_out, O = (size_t)s->c_out;
    return (size_t)conv_group(s) * P * (K + O);
}

template <typename T>
static int im2col(const char *op, const conv_shape *s, const T *x, T *col, int g, size_t img_stride, size_t ld)
{
    const size_t rows = (size_t)g * s->c_in * s->k * s->k, P = (size_t)s->h_out * s->w_out;
    if (rows == 0 || P == 0) return 1;
    LAUNCH_ROWS(im2col_kernel, rows, P, x, col, geo_of(s), g, img_stride, ld);
    return check_launch(op, "im2col", rows * P);
}

static void cuda_conv_fwd(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws)
{
    // x (B, C, H, W), w (O, C, k, k), b (O) or NULL, y (B, O, Ho, Wo)
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G;
        float *yb = y + (size_t)b0 * out_sz;
        if (b) bias_broadcast("conv_fwd", yb, b, (size_t)g * O, (size_t)P, (size_t)O, 1);
        const float *col = x + (size_t)b0 * in_sz; /* pointwise: x_i (C, H*W) is its own column matrix */
        if (!conv_is_pointwise(s)) {
            im2col("conv_fwd", s, col, ws, g, (size_t)K * P, (size_t)P);
            col = ws;
        }
        /* y_i (O, P) = W (O, K) col_i (K, P) [+ y_i holding the bias] */
        rm_gemm_batched("conv_fwd", 0, 0, O, P, K, 1.0f, w, K, 0, col, P, (long long)K * P, b ? 1.0f : 0.0f, yb, P,
                        (long long)out_sz, g);
    }
}

static void cuda_conv_bwd_data(const conv_shape *s, const float *dy, const float *w, float *dx, float *ws)
{
    // dy (B, O, Ho, Wo), w (O, C, k, k), dx (B, C, H, W)
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    const int pointwise = conv_is_pointwise(s);
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G;
        float *dxb = dx + (size_t)b0 * in_sz;
        /* dcol_i (K, P) = W^T (K, O) dy_i (O, P); pointwise: dcol_i is dx_i itself */
        float *dcol = pointwise ? dxb : ws;
        rm_gemm_batched("conv_bwd_data", 1, 0, K, P, O, 1.0f, w, K, 0, dy + (size_t)b0 * out_sz, P,
                        (long long)out_sz, 0.0f, dcol, P, (long long)K * P, g);
        if (!pointwise) col2im("conv_bwd_data", s, ws, dxb, g, (size_t)K * P, (size_t)P);
    }
}

static void cuda_conv_bwd_filter(const conv_shape *s, const float *x, const float *dy, float *dw, float *db,
                                 float *ws)
{
    // x (B, C, H, W), dy (B, O, Ho, Wo), dw (O, C, k, k), db (O) or NULL
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    if (db) conv_bias_grad("conv_bwd_filter", dy, 0, s->batch, O, (size_t)P, db);
    float *col = ws, *dyg = ws + (size_t)K * G * P;
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G, ld = g * P;
        /* col (K, g*P): image i in columns [i*P, (i+1)*P) */
        im2col("conv_bwd_filter", s, x + (size_t)b0 * in_sz, col, g, (size_t)P, (size_t)ld);
        gather_dy("conv_bwd_filter", dy + (size_t)b0 * out_sz, dyg, g, O, (size_t)P);
        /* dW (O, K) (+)= dy_g (O, g*P) col^T (g*P, K); the first group overwrites */
        rm_gemm("conv_bwd_filter", 0, 1, O, K, ld, 1.0f, dyg, ld, col, ld, b0 ? 1.0f : 0.0f, dw, K);
    }
}

/* ---------------------------------------------------------------- ReLU */

/* No __restrict__: both allow in-place use. `v < 0 ? 0 : v` lets a NaN through, as on the CPU. */
static __global__ void relu_fwd_kernel(const float *x, float *y, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

static __global__ void relu_bwd_kernel(const float *y, const float *dy, float *dx, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
}

static void cuda_relu_fwd(const float *x, float *y, size_t n)
{
    if (n == 0) return;
    relu_fwd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(x, y, n);
    check_launch("relu_fwd", "relu_fwd", n);
}

static void cuda_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    if (n == 0) return;
    relu_bwd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(y, dy, dx, n);
    check_launch("relu_bwd", "relu_bwd", n);
}

/* ---------------------------------------------------------------- max pooling */

/* Row kernels, one plane per block turn. Forward: a thread per output, the window walked in
 * row-major order from its top-left value, taking a value that is greater or NaN (the CPU's
 * POOL_TAKE): ties keep the first maximum, a NaN wins, and of several NaNs the last one does.
 * idx = offset within the input plane. T is fp32 or a 16-bit type (compared widened; the output
 * is the winning element itself, so exact). */
template <typename T>
static __global__ void maxpool_fwd_kernel(const T *__restrict__ x, T *__restrict__ y, int32_t *__restrict__ idx,
                                          int bf, size_t planes, int H, int W, int k)
{
    const uint32_t Wo = (uint32_t)(W / k), HWo = (uint32_t)(H / k) * Wo;
    for (size_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const T *xp = x + pl * H * W;
        for (uint32_t o = threadIdx.x; o < HWo; o += blockDim.x) {
            const uint32_t oh = o / Wo, ow = o - oh * Wo;
            const int base = (int)oh * k * W + (int)ow * k;
            float best = as32(xp[base], bf);
            int bi = base;
            for (int i = 0; i < k; i++)
                for (int j = i ? 0 : 1; j < k; j++) {
                    const int at = base + i * W + j;
                    const float v = as32(xp[at], bf);
                    if (v > best || v != v) {
                        best = v;
                        bi = at;
                    }
                }
            y[pl * HWo + o] = xp[bi];
            idx[pl * HWo + o] = bi;
        }
    }
}

/* Backward as a gather: each input gets dy of its window's output when it is that window's
 * argmax, else 0 (rows/columns past the last whole window too). The windows do not overlap, so
 * this equals the CPU's zero-then-scatter for any idx that maxpool_fwd produced. (T)0 is +0 in
 * every type. */
template <typename T>
static __global__ void maxpool_bwd_kernel(const T *__restrict__ dy, const int32_t *__restrict__ idx,
                                          T *__restrict__ dx, size_t planes, int H, int W, int k)
{
    const uint32_t Ho = (uint32_t)(H / k), Wo = (uint32_t)(W / k), HW = (uint32_t)H * W, HWo = Ho * Wo;
    for (size_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const T *dyp = dy + pl * HWo;
        const int32_t *ip = idx + pl * HWo;
        for (uint32_t i = threadIdx.x; i < HW; i += blockDim.x) {
            const uint32_t ih = i / (uint32_t)W, iw = i - ih * (uint32_t)W;
            const uint32_t oh = ih / (uint32_t)k, ow = iw / (uint32_t)k;
            T v = (T)0;
            if (oh < Ho && ow < Wo) {
                const uint32_t o = oh * Wo + ow;
                if (ip[o] == (int32_t)i) v = dyp[o];
            }
            dx[pl * HW + i] = v;
        }
    }
}

template <typename T>
static void maxpool_fwd(const char *op, const T *x, T *y, int32_t *idx, int bf, int batch, int c, int h, int w, int k)
{
    if (batch <= 0 || c <= 0 || k <= 0) return;
    const size_t planes = (size_t)batch * c, per = (size_t)(h / k) * (w / k);
    if (per == 0) return;
    LAUNCH_ROWS(maxpool_fwd_kernel, planes, per, x, y, idx, bf, planes, h, w, k);
    check_launch(op, "maxpool_fwd", planes * per);
}

template <typename T>
static void maxpool_bwd(const char *op, const T *dy, const int32_t *idx, T *dx, int batch, int c, int h, int w, int k)
{
    if (batch <= 0 || c <= 0 || k <= 0) return;
    const size_t planes = (size_t)batch * c, per = (size_t)h * w;
    if (per == 0) return;
    LAUNCH_ROWS(maxpool_bwd_kernel, planes, per, dy, idx, dx, planes, h, w, k);
    check_launch(op, "maxpool_bwd", planes * per);
}

static void cuda_maxpool_fwd(const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k)
{
    maxpool_fwd("maxpool_fwd", x, y, idx, 0, batch, c, h, w, k);
}

static void cuda_maxpool_bwd(const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w, int k)
{
    maxpool_bwd("maxpool_bwd", dy, idx, dx, batch, c, h, w, k);
}

extern "C" void cuda_maxpool16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, int32_t *idx, int batch, int c, int h,
                                   int w, int k)
{
    maxpool_fwd("maxpool16_fwd", x, y, idx, t == DT_BF16, batch, c, h, w, k);
}

extern "C" void cuda_maxpool16_bwd(const uint16_t *dy, const int32_t *idx, uint16_t *dx, int batch, int c, int h,
                                   int w, int k)
{
    maxpool_bwd("maxpool16_bwd", dy, idx, dx, batch, c, h, w, k);
}

/* ---------------------------------------------------------------- softmax cross-entropy */

/* Does (v, j) beat the current (m, am) (am < 0: none yet) as the CPU's argmax? The CPU starts from
 * element 0 and takes strictly greater values in order: a NaN at 0 is kept (nothing is greater),
 * a NaN elsewhere is never taken, ties keep the first index. */
__device__ static bool xent_beats(float v, int j, float m, int am)
{
    if (v != v) return j == 0;
    if (am < 0) return true;
    if (m != m) return false; /* the NaN at index 0 */
    return v > m || (v == m && j < am);
}

/* One warp per row (rows strided over all warps of the grid). Per row: m, argmax; s = sum of
 * e_j = expf(x_j - m) in double; loss = log(s) - (x[label] - m); dlogits = e_j * (float)(gs / s),
 * minus gs at the label (each step rounded as on the CPU). Lane 0 of each warp adds its rows' loss
 * and correct flags in row order; thread 0 adds the warps in order into this block's partial. A
 * label outside [0, classes) gives a NaN loss and no label term. */
static __global__ void xent_rows_kernel(const float *__restrict__ logits, const int32_t *__restrict__ labels,
                                 float *__restrict__ dlogits, int batch, int classes, float gs,
                                 double *__restrict__ part_loss, int *__restrict__ part_correct)
{
    __shared__ double sh_loss[OPS_WARPS];
    __shared__ int sh_correct[OPS_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = gridDim.x * OPS_WARPS;
    double wloss = 0.0;
    int wcorrect = 0;
    for (int r = blockIdx.x * OPS_WARPS + warp; r < batch; r += nwarps) {
        const float *row = logits + (size_t)r * classes;
        float m = 0.0f;
        int am = -1;
        for (int j = lane; j < classes; j += 32) {
            const float v = row[j];
            if (xent_beats(v, j, m, am)) m = v, am = j;
        }
        for (int off = 16; off > 0; off >>= 1) {
            const float v = __shfl_xor_sync(0xffffffffu, m, off);
            const int j = __shfl_xor_sync(0xffffffffu, am, off);
            if (j >= 0 && xent_beats(v, j, m, am)) m = v, am = j;
        }
        float *d = dlogits ? dlogits + (size_t)r * classes : NULL;
        double sum = 0.0;
        for (int j = lane; j < classes; j += 32) {
            const float e = expf(__fsub_rn(row[j], m));
            if (d) d[j] = e;
            sum += (double)e;
        }
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const int label = labels[r];
        const bool valid = label >= 0 && label < classes;
        if (d) {
            const float scale = (float)((double)gs / sum);
            for (int j = lane; j < classes; j += 32) {
                float v = __fmul_rn(d[j], scale);
                if (j == label) v = __fsub_rn(v, gs);
                d[j] = v;
            }
        }
        if (lane == 0) {
            wloss += valid ? log(sum) - ((double)row[label] - (double)m) : nan("");
            wcorrect += valid && am == label;
        }
    }
    if (lane == 0) {
        sh_loss[warp] = wloss;
        sh_correct[warp] = wcorrect;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double l = 0.0;
        int c = 0;
        for (int i = 0; i < OPS_WARPS; i++) l += sh_loss[i], c += sh_correct[i];
        part_loss[blockIdx.x] = l;
        part_correct[blockIdx.x] = c;
    }
}

/* One thread adds the block partials in order. */
static __global__ void xent_final_kernel(ops_scratch *s, int parts)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double l = 0.0;
    int c = 0;
    for (int i = 0; i < parts; i++) l += s->part_loss[i], c += s->part_correct[i];
    s->res.loss = l;
    s->res.correct = c;
}

/* Synchronizes the stream: the loss and the count are host values. On a failure: NaN, *correct 0,
 * and the error recorded. */
static double cuda_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                                float grad_scale, int *correct)
{
    static const char op[] = "softmax_xent";
    if (correct) *correct = 0;
    if (batch <= 0) return 0.0;
    if (classes <= 0) {
        ops_fail(DT_ERR_INVALID_ARG, "cuda softmax_xent: %d classes; there must be at least one", classes);
        return NAN;
    }
    ops_scratch *s = scratch(op);
    if (!s) return NAN;
    const int want = (batch + OPS_WARPS - 1) / OPS_WARPS, parts = want < OPS_MAX_PARTS ? want : OPS_MAX_PARTS;
    xent_rows_kernel<<<parts, OPS_BLOCK, 0, g_stream>>>(logits, labels, dlogits, batch, classes, grad_scale,
                                                        s->part_loss, s->part_correct);
    if (!check_launch(op, "the per-row losses", (size_t)batch * classes)) return NAN;
    xent_final_kernel<<<1, 32, 0, g_stream>>>(s, parts);
    if (!check_launch(op, "the loss sum", (size_t)parts)) return NAN;
    ops_result r;
    if (!fetch_result(op, &r)) return NAN;
    if (correct) *correct = r.correct;
    return r.loss;
}

/* ---------------------------------------------------------------- optimizers */

/* The CPU formulas with each operation rounded on its own (no contraction into FMAs):
 *   g = grad + wd*p;  buf = first ? g : momentum*buf + g;  p -= lr*buf   (momentum 0: p -= lr*g) */
static __global__ void sgd_kernel(float *__restrict__ p, const float *__restrict__ grad, float *__restrict__ buf, size_t n,
                           float lr, float momentum, float wd, int mode /* 0 plain, 1 first, 2 momentum */)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float pi = p[i];
        float g = __fadd_rn(grad[i], __fmul_rn(wd, pi));
        if (mode == 2) g = __fadd_rn(__fmul_rn(momentum, buf[i]), g);
        if (mode != 0) buf[i] = g;
        p[i] = __fsub_rn(pi, __fmul_rn(lr, g));
    }
}

static void cuda_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd, int first)
{
    if (n == 0) return;
    const int mode = momentum == 0.0f ? 0 : first ? 1 : 2;
    sgd_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(p, grad, buf, n, lr, momentum, wd, mode);
    check_launch("sgd", "sgd", n);
}

/* AdamW as the CPU's AVX2 path (cpu/optim.c), constants computed on the host in double as there:
 *   p' = p*decay;  m = fma(b1, m, c1*g);  v = fma(b2, v, (c2*g)*g);
 *   p = p' - step * (m / fma(sqrt(v), inv_bc2, eps))   (one rounding: fma(-step, q, p')) */
static __global__ void adamw_kernel(float *__restrict__ p, const float *__restrict__ grad, float *__restrict__ m,
                             float *__restrict__ v, size_t n, float decay, float b1, float c1, float b2, float c2,
                             float step, float inv_bc2, float eps)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = grad[i];
        const float pi = __fmul_rn(p[i], decay);
        const float mi = __fmaf_rn(b1, m[i], __fmul_rn(c1, g));
        const float vi = __fmaf_rn(b2, v[i], __fmul_rn(__fmul_rn(c2, g), g));
        const float denom = __fmaf_rn(__fsqrt_rn(vi), inv_bc2, eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = __fmaf_rn(-step, __fdiv_rn(mi, denom), pi);
    }
}

static void cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1, float b2,
                       float eps, float wd, int t)
{
    if (n == 0) return;
    const float decay = (float)(1.0 - (double)lr * wd);
    const float c1 = (float)(1.0 - (double)b1), c2 = (float)(1.0 - (double)b2);
    const float step = (float)((double)lr / (1.0 - pow(b1, t)));
    const float inv_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    adamw_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(p, grad, m, v, n, decay, b1, c1, b2, c2,
                                                                         step, inv_bc2, eps);
    check_launch("adamw", "adamw", n);
}

/* ---------------------------------------------------------------- the table */

static const kernel_ops cuda_ops = {
    /* .name = */ "cuda",
    /* .gemm = */ cuda_gemm,
    /* .linear_fwd = */ cuda_linear_fwd,
    /* .linear_bwd = */ cuda_linear_bwd,
    /* .conv_ws_floats = */ cuda_conv_ws_floats,
    /* .conv_fwd = */ cuda_conv_fwd,
    /* .conv_bwd_data = */ cuda_conv_bwd_data,
    /* .conv_bwd_filter = */ cuda_conv_bwd_filter,
    /* .relu_fwd = */ cuda_relu_fwd,
    /* .relu_bwd = */ cuda_relu_bwd,
    /* .maxpool_fwd = */ cuda_maxpool_fwd,
    /* .maxpool_bwd = */ cuda_maxpool_bwd,
    /* .softmax_xent = */ cuda_softmax_xent,
    /* .sgd = */ cuda_sgd,
    /* .adamw = */ cuda_adamw,
};

extern "C" const kernel_ops *kernels_cuda(void) { return &cuda_ops; }

/* ---------------------------------------------------------------- mixed precision (model_amp.c)
 *
 * 16-bit values travel as uint16_t bit patterns (the host's type for them); the kernels convert
 * with the CUDA intrinsics, which round to nearest even like cast.h (a NaN may come out with
 * another payload). bf selects bf16 over fp16. */


static __global__ void round16_kernel(int bf, const float *in, float *out, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = wide16(bf, narrow16(bf, in[i]));
}

/* 16-bit ReLU on bit patterns (inf: the +inf pattern): forward zeroes negatives down to -inf and
 * keeps NaNs; backward passes dy where y > 0 (positive, not NaN). Eight values a thread at a time
 * (16-byte loads) when every pointer is 16-byte aligned (vec), the rest one by one. */
static __device__ __forceinline__ uint16_t relu16_y(uint16_t inf, uint16_t v)
{
    return ((v & 0x8000u) && (uint16_t)(v & 0x7fffu) <= inf) ? (uint16_t)0 : v;
}

static __device__ __forceinline__ uint16_t relu16_dx(uint16_t inf, uint16_t y, uint16_t g)
{
    return (!(y & 0x8000u) && y != 0 && y <= inf) ? g : (uint16_t)0;
}

typedef union {
    uint4 v;
    uint16_t h[8];
} pack8;

static __global__ void relu16_fwd_kernel(uint16_t inf, const uint16_t *x, uint16_t *y, size_t n, int vec)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x, nv = vec ? n / 8 : 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t v = i; v < nv; v += stride) {
        pack8 a;
        a.v = ((const uint4 *)x)[v];
        for (int e = 0; e < 8; e++) a.h[e] = relu16_y(inf, a.h[e]);
        ((uint4 *)y)[v] = a.v;
    }
    for (i += nv * 8; i < n; i += stride) y[i] = relu16_y(inf, x[i]);
}

static __global__ void relu16_bwd_kernel(uint16_t inf, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n,
                                         int vec)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x, nv = vec ? n / 8 : 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t v = i; v < nv; v += stride) {
        pack8 a, g;
        a.v = ((const uint4 *)y)[v];
        g.v = ((const uint4 *)dy)[v];
        for (int e = 0; e < 8; e++) g.h[e] = relu16_dx(inf, a.h[e], g.h[e]);
        ((uint4 *)dx)[v] = g.v;
    }
    for (i += nv * 8; i < n; i += stride) dx[i] = relu16_dx(inf, y[i], dy[i]);
}

static int aligned16(const void *a, const void *b, const void *c)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0;
}

/* db[j] = sum over rows of dy[i][j] in fp32, rows in order (deterministic). */
static __global__ void col_sums16_kernel(int bf, const uint16_t *__restrict__ dy, int rows, int cols,
                                         float *__restrict__ db)
{
    const int stride = (int)(gridDim.x * blockDim.x);
    for (int j = (int)(blockIdx.x * blockDim.x + threadIdx.x); j < cols; j += stride) {
        float s = 0.0f;
        for (int i = 0; i < rows; i++) s += wide16(bf, dy[(size_t)i * (size_t)cols + (size_t)j]);
        db[j] = s;
    }
}

static uint16_t inf16(dt_dtype t) { return t == DT_BF16 ? (uint16_t)0x7f80u : (uint16_t)0x7c00u; }

extern "C" void cuda_round16(dt_dtype t, const float *in, float *out, size_t n)
{
    if (!n) return;
    round16_kernel<<<grid_for(n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(t == DT_BF16, in, out, n);
    check_launch("round16", "round16_kernel", n);
}

extern "C" void cuda_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n)
{
    if (!n) return;
    const int vec = aligned16(x, y, y);
    relu16_fwd_kernel<<<grid_for(vec ? (n + 7) / 8 : n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(inf16(t), x, y, n,
                                                                                                  vec);
    check_launch("relu16_fwd", "relu16_fwd_kernel", n);
}

extern "C" void cuda_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n)
{
    if (!n) return;
    const int vec = aligned16(y, dy, dx);
    relu16_bwd_kernel<<<grid_for(vec ? (n + 7) / 8 : n, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(inf16(t), y, dy,
                                                                                                  dx, n, vec);
    check_launch("relu16_bwd", "relu16_bwd_kernel", n);
}

extern "C" void cuda_col_sums16(dt_dtype t, const uint16_t *dy, int rows, int cols, float *db)
{
    if (cols <= 0) return;
    col_sums16_kernel<<<grid_for((size_t)cols, OPS_MAX_BLOCKS), OPS_BLOCK, 0, g_stream>>>(t == DT_BF16, dy, rows,
                                                                                           cols, db);
    check_launch("col_sums16", "col_sums16_kernel", (size_t)cols);
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

/* ---------------------------------------------------------------- 16-bit convolutions (AMP)
 *
 * The fp32 convolution's structure (im2col in groups of images, strided-batched GEMMs, the gather
 * of dy for the filter gradient) with 16-bit columns and GEMMs on the tensor cores
 * (cublasGemmEx, fp32 accumulation). Outputs that are rounded once go through fp32 scratch: the
 * forward result before the bias, and the column gradient before col2im. */

static void rm_gemm16_batched(const char *op, dt_dtype t, int ta, int tb, int m, int n, int k, const void *a, int lda,
                              long long sa, const void *b, int ldb, long long sb, float beta, void *c,
                              cudaDataType_t ct, int ldc, long long sc, int count)
{
    if (m <= 0 || n <= 0 || count <= 0) return;
    cublasHandle_t h = blas(op);
    if (!h) return;
    const cudaDataType_t ab = t == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f;
    const cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ab, ldb, sb, a, ab, lda,
        sa, &beta, c, ct, ldc, sc, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        ops_fail(DT_ERR_DEVICE,
                 "cuda %s: cublasGemmStridedBatchedEx (row-major m %d n %d k %d x %d, trans_a %d trans_b %d) failed: "
                 "%s (%s)",
                 op, m, n, k, count, ta, tb, cublas_name(st), cublas_text(st));
}

/* y16 = round(y32 + bias) as `rows` rows of `per` values, the bias as in bias_broadcast_kernel
 * (b16 NULL: + 0.0f, which is what rounding alone gives but for -0, made +0 as before). */
template <bool CHAN>
static __global__ void bias_round16_kernel(int bf, const float *__restrict__ y32, const uint16_t *__restrict__ b16,
                                           uint16_t *__restrict__ y16, size_t rows, uint32_t per, uint32_t outer)
{
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *src = y32 + r * per;
        uint16_t *dst = y16 + r * per;
        const float br = CHAN && b16 ? wide16(bf, b16[r % outer]) : 0.0f;
        for (uint32_t p = threadIdx.x; p < per; p += blockDim.x)
            dst[p] = narrow16(bf, src[p] + (CHAN || !b16 ? br : wide16(bf, b16[p])));
    }
}

static int bias_round16(const char *op, dt_dtype t, const float *y32, const uint16_t *b16, uint16_t *y16,
                        size_t rows, size_t per, size_t outer, int chan)
{
    if (rows == 0 || per == 0) return 1;
    if (chan)
        LAUNCH_ROWS(bias_round16_kernel<true>, rows, per, t == DT_BF16, y32, b16, y16, rows, (uint32_t)per,
                    (uint32_t)outer);
    else
        LAUNCH_ROWS(bias_round16_kernel<false>, rows, per, t == DT_BF16, y32, b16, y16, rows, (uint32_t)per,
                    (uint32_t)outer);
    return check_launch(op, "bias and rounding", rows * per);
}

extern "C" void cuda_bias_to16(dt_dtype t, const float *y32, const uint16_t *b16, uint16_t *y16, int rows, int cols)
{
    if (rows <= 0 || cols <= 0) return;
    bias_round16("bias_to16", t, y32, b16, y16, (size_t)rows, (size_t)cols, (size_t)cols, 0);
}

extern "C" void cuda_conv_fwd16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *w,
                                const uint16_t *b, float *y32, uint16_t *y, float *ws)
{
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    uint16_t *col16 = (uint16_t *)ws; /* K * G * P halves: within the fp32 workspace */
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G;
        const uint16_t *col = x + (size_t)b0 * in_sz;
        if (!conv_is_pointwise(s)) {
            if (!im2col("conv_fwd16", s, x + (size_t)b0 * in_sz, col16, g, (size_t)K * P, (size_t)P)) return;
            col = col16;
        }
        /* y32_i (O, P) = W (O, K) col_i (K, P) */
        rm_gemm16_batched("conv_fwd16", t, 0, 0, O, P, K, w, K, 0, col, P, (long long)K * P, 0.0f,
                          y32 + (size_t)b0 * out_sz, CUDA_R_32F, P, (long long)out_sz, g);
    }
    if (s->batch > 0) bias_round16("conv_fwd16", t, y32, b, y, (size_t)s->batch * O, (size_t)P, (size_t)O, 1);
}

extern "C" void cuda_conv_bwd_data16(dt_dtype t, const conv_shape *s, const uint16_t *dy, const uint16_t *w,
                                     float *dx32, uint16_t *dx, float *ws)
{
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    const int pointwise = conv_is_pointwise(s);
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G;
        float *dxb = dx32 + (size_t)b0 * in_sz;
        /* dcol_i (K, P) = W^T (K, O) dy_i (O, P), in fp32; pointwise: dcol_i is dx_i itself */
        float *dcol = pointwise ? dxb : ws;
        rm_gemm16_batched("conv_bwd_data16", t, 1, 0, K, P, O, w, K, 0, dy + (size_t)b0 * out_sz, P,
                          (long long)out_sz, 0.0f, dcol, CUDA_R_32F, P, (long long)K * P, g);
        if (!pointwise && !col2im("conv_bwd_data16", s, ws, dxb, g, (size_t)K * P, (size_t)P)) return;
    }
    if (s->batch > 0) bias_round16("conv_bwd_data16", t, dx32, NULL, dx, (size_t)s->batch * s->c_in,
                                   (size_t)s->h * s->w, 1, 1);
}

extern "C" void cuda_conv_bwd_filter16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *dy,
                                       float *dw, float *db, float *ws)
{
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    /* The bias gradient from dy where it lies: the fp32 kernel's fixed-order double sums. */
    if (db) conv_bias_grad("conv_bwd_filter16", dy, t == DT_BF16, s->batch, O, (size_t)P, db);
    uint16_t *col = (uint16_t *)ws, *dyg = col + (size_t)K * G * P; /* (K + O) * G * P halves */
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G, ld = g * P;
        if (!im2col("conv_bwd_filter16", s, x + (size_t)b0 * in_sz, col, g, (size_t)P, (size_t)ld) ||
            !gather_dy("conv_bwd_filter16", dy + (size_t)b0 * out_sz, dyg, g, O, (size_t)P))
            return;
        /* dW (O, K) (+)= dy_g (O, g*P) col^T (g*P, K) */
        rm_gemm16_batched("conv_bwd_filter16", t, 0, 1, O, K, ld, dyg, ld, 0, col, ld, 0, b0 ? 1.0f : 0.0f, dw,
                          CUDA_R_32F, K, 0, 1);
    }
}
