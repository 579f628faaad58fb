/*
 * cuda/backend_cuda.cu - the CUDA backend (kernels/backend.h): its state (the stream, the one
 * cuBLAS handle of the process bound to it, the reduction scratch), device memory, and the table
 * that gathers the ops of the other files, each kernel beside the host function that launches it:
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
 *     swapped (as launch/bench_gemm_cuda.c does).
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

#include <dlfcn.h>

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

/* ---------------------------------------------------------------- memory and streams */

/* A failed allocation is out of memory only when CUDA says so (cudaErrorMemoryAllocation): an
 * earlier kernel's fault (sticky, and the message a smaller --batch would not cure) or a call made
 * while a step graph records (cudaMalloc may not run under capture) is the device's error, said
 * with the call that failed. Non-sticky errors are cleared, so no later check takes them for its
 * own. */
static dt_status alloc_failed(cudaError_t e, const char *call, const char *what, size_t n, int pinned)
{
    cudaGetLastError();
    if (e != cudaErrorMemoryAllocation)
        return status_set_error(DT_ERR_DEVICE,
                                "cuda alloc of %.1f MiB of %s memory for %s: %s failed: %s (%s) (not a lack of "
                                "memory: the error may come from an earlier kernel, or a step graph was being "
                                "recorded)",
                                (double)n / 1048576.0, pinned ? "pinned host" : "GPU", what, call, cudaGetErrorName(e),
                                cudaGetErrorString(e));
    if (pinned)
        return status_set_error(DT_ERR_NOMEM,
                                "cannot pin %.1f MiB of host memory for %s (%s): raise the locked-memory "
                                "limit (ulimit -l) or use a smaller --batch",
                                (double)n / 1048576.0, what, cudaGetErrorString(e));
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        fr = tot = 0;
    }
    return status_set_error(DT_ERR_NOMEM,
                            "out of GPU memory for %s: asked %.1f MiB, %.1f MiB free of %.1f MiB (%s): "
                            "use a smaller --batch, or --precision bf16 (16-bit activations take half the memory)",
                            what, (double)n / 1048576.0, (double)fr / 1048576.0, (double)tot / 1048576.0,
                            cudaGetErrorString(e));
}

static dt_status g_alloc(backend *be, size_t bytes, const char *what, void **out)
{
    (void)be;
    *out = NULL;
    const size_t n = bytes ? bytes : 1;
    /* Zeroed, like the CPU's calloc, so a fresh model holds the same values on either backend.
     * cudaMemset of device memory returns before it runs, on the legacy stream, which the copy
     * and side streams (non-blocking) do not wait for: the wait makes the zeros land before any
     * stream can use the memory (allocations are rare: set-up, a new batch size, the spare copy). */
    const char *call = "cudaMalloc";
    cudaError_t e = cudaMalloc(out, n);
    if (e == cudaSuccess) {
        call = "cudaMemset";
        e = cudaMemset(*out, 0, n);
    }
    if (e == cudaSuccess) {
        call = "cudaStreamSynchronize";
        e = cudaStreamSynchronize(cudaStreamLegacy);
    }
    if (e == cudaSuccess) return DT_OK;
    if (*out) cudaFree(*out);
    *out = NULL;
    return alloc_failed(e, call, what, n, 0);
}

static void g_free(backend *be, void *p)
{
    (void)be;
    if (p) cudaFree(p);
}

static dt_status g_host_alloc(backend *be, size_t bytes, const char *what, void **out)
{
    (void)be;
    *out = NULL;
    const size_t n = bytes ? bytes : 1;
    const cudaError_t e = cudaHostAlloc(out, n, cudaHostAllocPortable);
    if (e == cudaSuccess) return DT_OK;
    *out = NULL;
    return alloc_failed(e, "cudaHostAlloc", what, n, 1);
}

static void g_host_free(backend *be, void *p)
{
    (void)be;
    if (p) cudaFreeHost(p);
}

static dt_status g_copy(void *dst, const void *src, size_t bytes, int to_device)
{
    if (!bytes) return DT_OK;
    /* On the legacy stream, which does not wait for the non-blocking recording stream: a copy
     * made while recording would run now, outside the graph, instead of failing the recording. */
    if (cuda_recording())
        return status_set_error(DT_ERR_INVALID_ARG,
                                "cuda: a synchronous copy of %zu bytes while a step graph is being recorded", bytes);
    cudaError_t e = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    /* From pageable memory cudaMemcpy returns once the bytes are staged, before the DMA into dst
     * may have landed; a non-blocking stream (NCCL's broadcast of the parameters just copied in)
     * would not wait for it. The contract says synchronous: wait for the legacy stream it ran on. */
    if (e == cudaSuccess && to_device) e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e == cudaSuccess) return DT_OK;
    return status_set_error(DT_ERR_DEVICE, "copying %zu bytes %s the GPU failed: %s (%s)", bytes,
                            to_device ? "to" : "from", cudaGetErrorName(e), cudaGetErrorString(e));
}

static dt_status g_to_device(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    return g_copy(dst, src, bytes, 1);
}

static dt_status g_to_host(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    return g_copy(dst, src, bytes, 0);
}

static dt_status g_to_device_async(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (!bytes) return DT_OK;
    /* Default: src may be host memory or the device's own (a batch made there), which unified
     * addressing tells apart. */
    return cuda_err(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g_stream), "to_device_async",
                    "copying to the GPU");
}

/* The copy stream of input batches (non-blocking, made at the first copy_in) and per slot the
 * events that order it with the stream: ready recorded behind the slot's copies, free recorded on
 * the stream after its last use of the slot. Waiting for an event never recorded waits for
 * nothing, so the first copy of each slot goes at once. */
static cudaStream_t g_copy_stream;
static cudaEvent_t g_slot_ready[2], g_slot_free[2];

static dt_status slot_check(const char *op, int slot)
{
    if (slot == 0 || slot == 1) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG, "cuda %s: slot %d is not 0 or 1", op, slot);
}

static dt_status g_copy_in(backend *be, int slot, void *dst, const void *src, size_t bytes)
{
    (void)be;
    TRY(slot_check("copy_in", slot));
    cudaError_t e = cudaSuccess;
    if (!g_copy_stream) e = cudaStreamCreateWithFlags(&g_copy_stream, cudaStreamNonBlocking);
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        if (!g_slot_ready[i]) e = cudaEventCreateWithFlags(&g_slot_ready[i], cudaEventDisableTiming);
        if (e == cudaSuccess && !g_slot_free[i]) e = cudaEventCreateWithFlags(&g_slot_free[i], cudaEventDisableTiming);
    }
    if (e == cudaSuccess) e = cudaStreamWaitEvent(g_copy_stream, g_slot_free[slot], 0);
    if (e == cudaSuccess && bytes) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_copy_stream);
    if (e == cudaSuccess) e = cudaEventRecord(g_slot_ready[slot], g_copy_stream);
    return cuda_err(e, "copy_in", "copying a batch to the GPU on the copy stream");
}

static dt_status g_copy_in_join(backend *be, int slot)
{
    (void)be;
    TRY(slot_check("copy_in_join", slot));
    if (!g_slot_ready[slot]) return DT_OK; /* nothing was ever copied */
    return cuda_err(cudaStreamWaitEvent(g_stream, g_slot_ready[slot], 0), "copy_in_join", "waiting for the batch");
}

static dt_status g_copy_in_release(backend *be, int slot)
{
    (void)be;
    TRY(slot_check("copy_in_release", slot));
    if (!g_slot_free[slot]) return DT_OK;
    return cuda_err(cudaEventRecord(g_slot_free[slot], g_stream), "copy_in_release", "marking the batch's last use");
}

static dt_status g_sync(backend *be)
{
    (void)be;
    return cuda_err(cudaStreamSynchronize(g_stream), "sync", "waiting for the stream");
}

static dt_status g_settle(backend *be)
{
    (void)be;
    return cuda_err(cudaDeviceSynchronize(), "settle", "waiting for the device");
}

static dt_status g_last_status(backend *be)
{
    (void)be;
    return cuda_err(cudaPeekAtLastError(), "last_status", "earlier work");
}

static void *g_stream_of(backend *be)
{
    (void)be;
    return (void *)g_stream;
}

/* The ops launch on `stream` from now on; cuBLAS follows at the next GEMM (blas). */
static dt_status g_set_stream(backend *be, void *stream)
{
    (void)be;
    g_stream = (cudaStream_t)stream;
    return DT_OK;
}

/* The side stream (made at the first side_begin, non-blocking so that it runs beside the legacy
 * default stream too), the stream it forked from, and the events that order the two: g_fork
 * recorded on the stream at side_begin, g_side_done on the side stream at side_end. An event
 * waited for is the state of its last record when the wait was queued, so one of each serves
 * every fork and join. */
static cudaStream_t g_side, g_side_from;
static cudaEvent_t g_fork, g_side_done;
static int g_on_side;

static dt_status g_side_begin(backend *be)
{
    (void)be;
    if (g_on_side) return status_set_error(DT_ERR_INVALID_ARG, "cuda side_begin: already on the side stream");
    cudaError_t e = cudaSuccess;
    if (!g_side) e = cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking);
    if (e == cudaSuccess && !g_fork) e = cudaEventCreateWithFlags(&g_fork, cudaEventDisableTiming);
    if (e == cudaSuccess && !g_side_done) e = cudaEventCreateWithFlags(&g_side_done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(g_fork, g_stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(g_side, g_fork, 0);
    TRY(cuda_err(e, "side_begin", "forking the side stream"));
    g_side_from = g_stream;
    g_stream = g_side;
    g_on_side = 1;
    return DT_OK;
}

static dt_status g_side_end(backend *be)
{
    (void)be;
    if (!g_on_side) return status_set_error(DT_ERR_INVALID_ARG, "cuda side_end: not on the side stream");
    g_on_side = 0;
    g_stream = g_side_from;
    return cuda_err(cudaEventRecord(g_side_done, g_side), "side_end", "marking the side stream's work");
}

static dt_status g_side_join(backend *be)
{
    (void)be;
    if (!g_side_done) return DT_OK; /* nothing ever ran on the side */
    return cuda_err(cudaStreamWaitEvent(g_stream, g_side_done, 0), "side_join", "joining the side stream");
}

static void g_mem_info(backend *be, size_t *free_bytes, size_t *total_bytes)
{
    (void)be;
    if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
        cudaGetLastError();
        *free_bytes = *total_bytes = 0;
    }
}

/* Whether the CUDA driver is in this process: the runtime loads libcuda.so.1 when it initializes,
 * so device memory exists only where it is loaded. Asked without loading it (RTLD_NOLOAD); once
 * seen, it stays (the runtime never unloads it). */
static int cuda_driver_loaded(void)
{
    static int seen;
    if (__atomic_load_n(&seen, __ATOMIC_RELAXED)) return 1;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return 0;
    dlclose(h); /* the reference NOLOAD took */
    __atomic_store_n(&seen, 1, __ATOMIC_RELAXED);
    return 1;
}

extern "C" int backend_is_device_ptr(const void *p)
{
    if (!p) return 0;
    /* A process that never touched CUDA (a rank placed on the CPU) has no device memory; asking the
     * runtime would initialize it and make a context, GPU memory, on device 0. */
    if (!cuda_driver_loaded()) return 0;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* an unregistered host pointer on old runtimes, or no device at all */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int g_owns(backend *be, const void *p)
{
    (void)be;
    return backend_is_device_ptr(p);
}

/* ---------------------------------------------------------------- the table */

static const backend_ops cuda_ops = {
    /* .name = */ "cuda",
    /* .host_memory = */ 0,
    /* .keeps_params16 = */ 1,
    /* .grads16 = */ 0,
    /* .alloc = */ g_alloc,
    /* .free = */ g_free,
    /* .host_alloc = */ g_host_alloc,
    /* .host_free = */ g_host_free,
    /* .to_device = */ g_to_device,
    /* .to_host = */ g_to_host,
    /* .to_device_async = */ g_to_device_async,
    /* .copy_in = */ g_copy_in,
    /* .copy_in_join = */ g_copy_in_join,
    /* .copy_in_release = */ g_copy_in_release,
    /* .sync = */ g_sync,
    /* .settle = */ g_settle,
    /* .last_status = */ g_last_status,
    /* .stream = */ g_stream_of,
    /* .set_stream = */ g_set_stream,
    /* .side_begin = */ g_side_begin,
    /* .side_end = */ g_side_end,
    /* .side_join = */ g_side_join,
    /* .mem_info = */ g_mem_info,
    /* .owns = */ g_owns,
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
    TRY(g_set_stream(&cuda_backend, NULL));
    cublasHandle_t h;
    TRY(blas("backend_cuda", &h));
    g_ready = 1;
    *out = &cuda_backend;
    return DT_OK;
}

extern "C" backend *backend_cuda_if_ready(void) { return g_ready ? &cuda_backend : NULL; }

extern "C" const backend_ops *backend_cuda_ops(void) { return &cuda_ops; }
