/*
 * cuda/memory.cu - the CUDA backend's memory and streams (kernels/backend.h's alloc, copy, stream
 * and side-stream entries): device and pinned host memory, copies (the batch copies on their own
 * stream in two slots), the ops' stream and the side stream that overlaps the optimizer, and
 * whether a pointer is device memory. backend_cuda.cu puts these entries in the backend's table.
 */
#include "kernels/cuda/cuda_internal.cuh"

#include <dlfcn.h>

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

dt_status cuda_alloc(backend *be, size_t bytes, const char *what, void **out)
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

void cuda_free(backend *be, void *p)
{
    (void)be;
    if (p) cudaFree(p);
}

dt_status cuda_host_alloc(backend *be, size_t bytes, const char *what, void **out)
{
    (void)be;
    *out = NULL;
    const size_t n = bytes ? bytes : 1;
    const cudaError_t e = cudaHostAlloc(out, n, cudaHostAllocPortable);
    if (e == cudaSuccess) return DT_OK;
    *out = NULL;
    return alloc_failed(e, "cudaHostAlloc", what, n, 1);
}

void cuda_host_free(backend *be, void *p)
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

dt_status cuda_to_device(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    return g_copy(dst, src, bytes, 1);
}

dt_status cuda_to_host(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    return g_copy(dst, src, bytes, 0);
}

dt_status cuda_to_device_async(backend *be, void *dst, const void *src, size_t bytes)
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

dt_status cuda_copy_in(backend *be, int slot, void *dst, const void *src, size_t bytes)
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

dt_status cuda_copy_in_join(backend *be, int slot)
{
    (void)be;
    TRY(slot_check("copy_in_join", slot));
    if (!g_slot_ready[slot]) return DT_OK; /* nothing was ever copied */
    return cuda_err(cudaStreamWaitEvent(g_stream, g_slot_ready[slot], 0), "copy_in_join", "waiting for the batch");
}

dt_status cuda_copy_in_release(backend *be, int slot)
{
    (void)be;
    TRY(slot_check("copy_in_release", slot));
    if (!g_slot_free[slot]) return DT_OK;
    return cuda_err(cudaEventRecord(g_slot_free[slot], g_stream), "copy_in_release", "marking the batch's last use");
}

dt_status cuda_sync(backend *be)
{
    (void)be;
    return cuda_err(cudaStreamSynchronize(g_stream), "sync", "waiting for the stream");
}

dt_status cuda_settle(backend *be)
{
    (void)be;
    return cuda_err(cudaDeviceSynchronize(), "settle", "waiting for the device");
}

dt_status cuda_last_status(backend *be)
{
    (void)be;
    return cuda_err(cudaPeekAtLastError(), "last_status", "earlier work");
}

void *cuda_stream_of(backend *be)
{
    (void)be;
    return (void *)g_stream;
}

/* The ops launch on `stream` from now on; cuBLAS follows at the next GEMM (blas). */
dt_status cuda_set_stream(backend *be, void *stream)
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

dt_status cuda_side_begin(backend *be)
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

dt_status cuda_side_end(backend *be)
{
    (void)be;
    if (!g_on_side) return status_set_error(DT_ERR_INVALID_ARG, "cuda side_end: not on the side stream");
    g_on_side = 0;
    g_stream = g_side_from;
    return cuda_err(cudaEventRecord(g_side_done, g_side), "side_end", "marking the side stream's work");
}

dt_status cuda_side_join(backend *be)
{
    (void)be;
    if (!g_side_done) return DT_OK; /* nothing ever ran on the side */
    return cuda_err(cudaStreamWaitEvent(g_stream, g_side_done, 0), "side_join", "joining the side stream");
}

void cuda_mem_info(backend *be, size_t *free_bytes, size_t *total_bytes)
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

int cuda_owns(backend *be, const void *p)
{
    (void)be;
    return backend_is_device_ptr(p);
}
