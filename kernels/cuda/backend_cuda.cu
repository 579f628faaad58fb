/*
 * cuda/backend_cuda.cu - the CUDA backend (kernels/backend.h): its state (the stream, the one
 * cuBLAS handle of the process bound to it, the reduction scratch) and the table that gathers the
 * ops of the other files (memory.cu: device and pinned memory, copies and streams), each kernel beside the host function that launches it:
 * gemm.cu (GEMMs, bias, fully connected, the 16-bit GEMMs), conv.cu (convolutions, one templated
 * driver for fp32 and 16-bit columns), elementwise.cu (ReLU, casts and rounding, 16-bit ReLU and
 * column sums), pool.cu, loss.cu, optim.cu, reduce.cu (finite checks, norms, accumulation),
 * layers.cu (the layer entries in any precision) and graph.cu (step graphs).
 *
 * Semantics follow the CPU backend (kernels/cpu/), the oracle of tests/gpu/test_cuda_ops_*.c:
 *   - GEMMs are cublasSgemm / cublasSgemmStridedBatched in cuBLAS's default math mode (fp32
 *     arithmetic; no TF32 unless NVIDIA_TF32_OVERRIDE turns it on). backend.h is row-major and
 *     cuBLAS column-major: the memory of a row-major matrix is its transpose in column-major, so
 *     C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, i.e. cuBLAS gets B first and n, m
 *     swapped (as launch/bench/bench_gemm_cuda.c does).
 *   - Elementwise ops use the __fmul_rn/__fadd_rn intrinsics where the CPU rounds each operation
 *     (nvcc would otherwise contract a*b+c into one FMA), so SGD and ReLU match bit for bit; AdamW
 *     follows the CPU's AVX2 path, FMAs included.
 *   - Reductions (bias gradients, the loss, the non-finite counts and norms) run in a fixed order
 *     with no float atomics, so results repeat bit for bit run to run on the same GPU model. The
 *     16-bit fc layer's bias gradient is summed in cuBLASLt's epilogue where it has a plan and by
 *     col_sums16 where not (gemm_lt.cu): a plan per shape and pointer alignment, the same in two
 *     runs of one model and batch.
 *
 * Errors: every entry returns its status (launches checked with cudaGetLastError, cuBLAS statuses,
 * copies); a kernel's execution error shows at the next entry that waits for the stream. State is
 * process-wide, created on the device current when backend_cuda() is first called; one thread at
 * a time, one device per process (one rank per GPU, as dtrain runs).
 */
#include "kernels/cuda/cuda_internal.cuh"
#include "kernels/pass_common.h"

cudaStream_t g_stream;        /* NULL: the default stream */
static cublasHandle_t g_blas; /* the one cuBLAS handle, bound to g_blas_on */
/* The stream the handle is bound to, with its workspace (g_blas_bound; 0 while a bind is under
 * way or failed half-way): blas() binds it to g_stream when they differ, so switching the ops'
 * stream costs nothing until a GEMM runs there, and a stream that never runs a GEMM (a reducer's
 * casts on its caller's stream, the side stream's optimizer steps) never takes one of the
 * handle's workspaces. */
static cudaStream_t g_blas_on;
static int g_blas_bound;
static ops_scratch *g_scratch; /* cudaMalloc'ed on first use */

const char *cublas_name(cublasStatus_t st) { return cublasGetStatusName(st); }
const char *cublas_text(cublasStatus_t st) { return cublasGetStatusString(st); }

dt_status cuda_err(cudaError_t e, const char *op, const char *what)
{
    if (e == cudaSuccess) return DT_OK;
    return status_set_error(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_DEVICE,
                            "cuda %s: %s failed: %s (%s) (the error may come from any earlier kernel on the "
                            "stream)",
                            op, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* A failed launch (bad configuration, no device, no kernel image for this GPU) shows up here; so
 * may an earlier asynchronous error of the same context, which is then reported too. */
dt_status check_launch(const char *op, const char *kernel, size_t n)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return DT_OK;
    return status_set_error(DT_ERR_DEVICE,
                            "cuda %s: launching %s for %zu elements failed: %s (%s); check that the GPU is healthy "
                            "and that dtrain was built for its compute capability (CMAKE_CUDA_ARCHITECTURES)",
                            op, kernel, n, cudaGetErrorName(e), cudaGetErrorString(e));
}

unsigned int grid_for(size_t n, size_t max_blocks)
{
    const size_t blocks = (n + OPS_BLOCK - 1) / OPS_BLOCK;
    return (unsigned int)(blocks < max_blocks ? (blocks ? blocks : 1) : max_blocks);
}

/* cuBLAS's workspace on each stream the handle runs GEMMs on, as PyTorch keeps one per handle and
 * stream: a fixed size (cuBLAS's recommendation on Hopper), so a GEMM picks the same algorithm
 * whether a step graph records it or it is launched on its own (with cuBLAS's default pool the
 * choice would follow that pool's size), nothing is allocated while a graph records (the
 * recording stream's is made before capture begins), and no two streams share one (their GEMMs
 * may run at once). Made at a stream's first GEMM and kept for the process. */
#define BLAS_WS_BYTES ((size_t)32 << 20)
#define BLAS_WS_STREAMS 8
static struct {
    cudaStream_t stream;
    void *ws;
} g_blas_ws[BLAS_WS_STREAMS];
static int g_blas_nws;

static dt_status stream_workspace(const char *op, cudaStream_t to, void **ws)
{
    *ws = NULL;
    for (int i = 0; i < g_blas_nws; i++)
        if (g_blas_ws[i].stream == to) {
            *ws = g_blas_ws[i].ws;
            return DT_OK;
        }
    if (g_blas_nws == BLAS_WS_STREAMS)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "cuda %s: cuBLAS has run GEMMs on %d streams already, each with a workspace of its "
                                "own; set_stream GEMMs onto fewer streams",
                                op, BLAS_WS_STREAMS);
    TRY(cuda_err(cudaMalloc(ws, BLAS_WS_BYTES), op, "cudaMalloc of a stream's 32 MiB cuBLAS workspace"));
    g_blas_ws[g_blas_nws].stream = to;
    g_blas_ws[g_blas_nws++].ws = *ws;
    return DT_OK;
}

/* Handle h onto stream `to` with that stream's workspace. cublasSetStream puts the handle back on
 * cuBLAS's default workspace pool, so the workspace is set after it; a failure between the two
 * leaves the handle on `to` without its workspace, which blas() marks unbound so that the next
 * GEMM binds again, whichever stream it runs on. */
static dt_status handle_onto(const char *op, cublasHandle_t h, cudaStream_t to)
{
    void *ws;
    TRY(stream_workspace(op, to, &ws));
    cublasStatus_t st = cublasSetStream(h, to);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetWorkspace(h, ws, BLAS_WS_BYTES);
    if (st == CUBLAS_STATUS_SUCCESS) return DT_OK;
    return status_set_error(DT_ERR_DEVICE, "cuda %s: pointing cuBLAS at a stream failed: %s (%s)", op, cublas_name(st),
                            cublas_text(st));
}

/* The handle is made once (by backend_cuda, or the first GEMM of a caller that skipped it) and is
 * bound to the ops' stream before it is handed out, so no GEMM runs unordered with the kernels
 * around it. */
dt_status blas(const char *op, cublasHandle_t *h)
{
    *h = NULL;
    if (!g_blas) {
        cublasHandle_t nh;
        cublasStatus_t st = cublasCreate(&nh);
        if (st != CUBLAS_STATUS_SUCCESS)
            return status_set_error(DT_ERR_DEVICE,
                                    "cuda %s: cublasCreate failed: %s (%s); check that a GPU is visible "
                                    "and has free memory",
                                    op, cublas_name(st), cublas_text(st));
        const dt_status s = handle_onto(op, nh, g_stream);
        if (s) {
            cublasDestroy(nh);
            return s;
        }
        g_blas = nh;
        g_blas_on = g_stream;
        g_blas_bound = 1;
    } else if (!g_blas_bound || g_blas_on != g_stream) {
        g_blas_bound = 0;
        TRY(handle_onto(op, g_blas, g_stream));
        g_blas_on = g_stream;
        g_blas_bound = 1;
    }
    *h = g_blas;
    return DT_OK;
}

dt_status scratch(const char *op, ops_scratch **s)
{
    *s = g_scratch;
    if (g_scratch) return DT_OK;
    void *p = NULL;
    const cudaError_t e = cudaMalloc(&p, sizeof(ops_scratch));
    if (e != cudaSuccess)
        return status_set_error(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_DEVICE,
                                "cuda %s: cudaMalloc of %zu bytes of reduction scratch failed: %s (%s)", op,
                                sizeof(ops_scratch), cudaGetErrorName(e), cudaGetErrorString(e));
    /* Zeroed on the ops' stream, in order before any kernel that counts in it. */
    const cudaError_t z = cudaMemsetAsync(p, 0, sizeof(ops_scratch), g_stream);
    if (z != cudaSuccess) {
        cudaFree(p);
        return status_set_error(DT_ERR_DEVICE, "cuda %s: zeroing the reduction scratch failed: %s (%s)", op,
                                cudaGetErrorName(z), cudaGetErrorString(z));
    }
    *s = g_scratch = (ops_scratch *)p;
    return DT_OK;
}

/* Copies the reduction result back and waits for the stream. */
dt_status fetch_result(const char *op, ops_result *r)
{
    cudaError_t e = cudaMemcpyAsync(r, &g_scratch->res, sizeof *r, cudaMemcpyDeviceToHost, g_stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g_stream);
    return cuda_err(e, op, "copying the result back");
}

/* The loss's values are copied behind its kernels and this event marks their arrival; one for the
 * process, like the scratch, recorded again by each queued loss (loss_wait waits for the last, and
 * so, in stream order, for every one before it). */
static cudaEvent_t g_loss_done;

dt_status loss_event_ready(const char *op)
{
    if (g_loss_done) return DT_OK;
    return cuda_err(cudaEventCreateWithFlags(&g_loss_done, cudaEventDisableTiming), op, "creating the loss's event");
}

dt_status queue_loss_result(const char *op, double *loss, int *correct)
{
    TRY(loss_event_ready(op));
    /* A count kept right after its sum (the model's pair) comes back with it: one copy, one graph
     * node fewer a step. */
    const int adjacent = correct && (char *)correct == (char *)loss + sizeof *loss;
    cudaError_t e =
        cudaMemcpyAsync(loss, &g_scratch->res.loss, adjacent ? sizeof *loss + sizeof *correct : sizeof *loss,
                        cudaMemcpyDeviceToHost, g_stream);
    if (e == cudaSuccess && correct && !adjacent)
        e = cudaMemcpyAsync(correct, &g_scratch->res.correct, sizeof *correct, cudaMemcpyDeviceToHost, g_stream);
    /* Recorded: an external node, which each launch of the graph records. */
    if (e == cudaSuccess)
        e = cudaEventRecordWithFlags(g_loss_done, g_stream,
                                     cuda_recording() ? cudaEventRecordExternal : cudaEventRecordDefault);
    return cuda_err(e, op, "queueing the copy of the loss back");
}

static dt_status g_loss_wait(backend *be)
{
    (void)be;
    if (!g_loss_done) return DT_OK; /* no loss was ever queued */
    return cuda_err(cudaEventSynchronize(g_loss_done), "loss_wait", "waiting for the loss");
}

/* ---------------------------------------------------------------- the table */

static const backend_ops cuda_ops = {
    /* .name = */ "cuda",
    /* .host_memory = */ 0,
    /* .keeps_params16 = */ 1,
    /* .grads16 = */ 0,
    /* .alloc = */ cuda_alloc,
    /* .free = */ cuda_free,
    /* .host_alloc = */ cuda_host_alloc,
    /* .host_free = */ cuda_host_free,
    /* .to_device = */ cuda_to_device,
    /* .to_host = */ cuda_to_host,
    /* .to_device_async = */ cuda_to_device_async,
    /* .copy_in = */ cuda_copy_in,
    /* .copy_in_join = */ cuda_copy_in_join,
    /* .copy_in_release = */ cuda_copy_in_release,
    /* .sync = */ cuda_sync,
    /* .settle = */ cuda_settle,
    /* .last_status = */ cuda_last_status,
    /* .stream = */ cuda_stream_of,
    /* .set_stream = */ cuda_set_stream,
    /* .side_begin = */ cuda_side_begin,
    /* .side_end = */ cuda_side_end,
    /* .side_join = */ cuda_side_join,
    /* .mem_info = */ cuda_mem_info,
    /* .owns = */ cuda_owns,
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
    /* .loss_wait = */ g_loss_wait,
    /* .sgd = */ cuda_sgd,
    /* .adamw = */ cuda_adamw,
    /* .cast_to16 = */ cuda_cast_to16,
    /* .cast_to32 = */ cuda_cast_to32,
    /* .round16 = */ cuda_round16,
    /* .scale_count = */ cuda_scale_count,
    /* .found_inf_queue = */ cuda_found_inf_queue,
    /* .found_inf_wait = */ cuda_found_inf_wait,
    /* .found_inf_release = */ cuda_found_inf_release,
    /* .flag_nonfinite = */ cuda_flag_nonfinite,
    /* .sum_squares = */ cuda_sum_squares,
    /* .accum_grads = */ cuda_accum_grads,
    /* .scratch16 = */ cuda_scratch16,
    /* .fc_relu_mask_bytes = */ cuda_fc_relu_mask_bytes,
    /* .layer_fc_fwd = */ cuda_layer_fc_fwd,
    /* .layer_fc_bwd = */ cuda_layer_fc_bwd,
    /* .layer_conv_fwd = */ cuda_layer_conv_fwd,
    /* .layer_conv_bwd = */ cuda_layer_conv_bwd,
    /* .layer_pool_fwd = */ cuda_layer_pool_fwd,
    /* .layer_pool_bwd = */ cuda_layer_pool_bwd,
    /* .layer_relu_fwd = */ cuda_layer_relu_fwd,
    /* .layer_relu_bwd = */ cuda_layer_relu_bwd,
    /* .layer_loss = */ cuda_layer_loss,
    /* .layer_logits32 = */ pass_layer_logits32,
    /* .trace_mark = */ cuda_trace_mark,
    /* .trace_flush = */ cuda_trace_flush,
    /* .graph_begin = */ cuda_graph_begin,
    /* .graph_end = */ cuda_graph_end,
    /* .graph_launch = */ cuda_graph_launch,
    /* .graph_free = */ cuda_graph_free,
    /* .synth_batch = */ cuda_synth_batch,
};

static backend cuda_backend = {&cuda_ops, NULL};
static int g_ready; /* backend_cuda succeeded once */

extern "C" dt_status backend_cuda(backend **out)
{
    *out = NULL;
    /* Ready already: the same backend, its stream left as its user set it (the reducer, the
     * loader, checkpoints and the replica check all ask for it, and must not reset the model's). */
    if (g_ready) {
        *out = &cuda_backend;
        return DT_OK;
    }
    /* The handle made (and checked) now rather than at the first GEMM, so that a GPU without
     * cuBLAS fails here, where the caller chose the device. */
    TRY(cuda_set_stream(&cuda_backend, NULL));
    cublasHandle_t h;
    TRY(blas("backend_cuda", &h));
    g_ready = 1;
    *out = &cuda_backend;
    return DT_OK;
}

extern "C" backend *backend_cuda_if_ready(void) { return g_ready ? &cuda_backend : NULL; }

extern "C" const backend_ops *backend_cuda_ops(void) { return &cuda_ops; }
