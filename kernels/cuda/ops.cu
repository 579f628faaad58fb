/*
 * cuda/ops.cu - the CUDA op table (kernels_cuda(), contract in ops.h) and what every part of it
 * shares: the stream, the one cuBLAS handle, the reduction scratch, the first recorded failure. The
 * ops live by concern beside it, each kernel beside the host function that launches it: gemm.cu
 * (GEMMs, bias, fully connected, the 16-bit GEMM), conv.cu (fp32 and 16-bit convolutions),
 * elementwise.cu (ReLU, 16-bit rounding and ReLU, 16-bit column sums), pool.cu, loss.cu, optim.cu;
 * cast.cu and reduce.cu (casts; finite checks, norms, accumulation) as before.
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
#include "kernels/cuda/ops_internal.cuh"

cudaStream_t g_stream;    /* NULL: the default stream */
static cublasHandle_t g_blas;    /* created on first use, bound to g_stream */
static ops_scratch *g_scratch;   /* cudaMalloc'ed on first use */
dt_status g_err = DT_OK;  /* the first failure since cuda_ops_clear_error() */
static char g_msg[768];

void ops_fail(dt_status s, const char *fmt, ...)
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
    status_set_error(s, "%s", buf);
}

const char *cublas_name(cublasStatus_t st) { return cublasGetStatusName(st); }
const char *cublas_text(cublasStatus_t st) { return cublasGetStatusString(st); }

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

cublasHandle_t blas(const char *op)
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
            return status_set_error(DT_ERR_DEVICE,
                                "cuda_ops_set_stream: cublasCreate failed: %s (%s); check that a GPU "
                                "is visible and has free memory",
                                cublas_name(st), cublas_text(st));
        g_blas = h;
    }
    const cublasStatus_t st = cublasSetStream(g_blas, s);
    if (st != CUBLAS_STATUS_SUCCESS)
        return status_set_error(DT_ERR_DEVICE, "cuda_ops_set_stream: cublasSetStream(%p) failed: %s (%s)",
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
    if (g_err != DT_OK) status_set_error(g_err, "%s", g_msg);
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

