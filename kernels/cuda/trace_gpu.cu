/*
 * cuda/trace_gpu.cu - GPU spans (kernels/cuda/trace_gpu.h, and the backend's trace_mark /
 * trace_flush): each span is a pair of timing CUDA events recorded on a stream, read back once
 * the device has passed them, and put into the host recorder on the host's clock.
 *
 * The clock: cudaEventElapsedTime gives milliseconds between two events, not a time of day. So
 * the first mark of the process records a reference event on an idle compute stream between two
 * host clock reads (the stream synchronized before, the event synchronized after): its host time
 * is their midpoint, good to half the gap (microseconds). An event's host time is then
 * ref_host + elapsed(ref, event). elapsed is a float of milliseconds: its resolution is about
 * 4 us a minute after the reference and 60 us after 15 minutes, so a span's begin is placed to
 * that; its length is elapsed(begin, end), exact to the events' 0.5 us.
 *
 * Nothing here waits in a step: trace_mark records an event; trace_flush (at every step mark)
 * takes only the spans whose end event cudaEventQuery reports done. Events are created lazily,
 * a pair per slot the first time the slot is used, so a run without --trace creates none.
 * State is process-wide like the rest of the backend (one device per process, one thread at a
 * time).
 */
#include "base/gpu_span.h"
#include "kernels/cuda/cuda_internal.cuh"
#include "kernels/cuda/trace_gpu.h"

static gpu_span_pool g_pool;
static cudaEvent_t g_ev[GPU_SPAN_POOL][2]; /* begin, end of each slot; NULL until first used */
static cudaEvent_t g_ref;                  /* the clock reference, NULL until made */
static uint64_t g_ref_host_ns;             /* its host time */
static uint64_t g_dropped_told;            /* g_pool.dropped already added to a recorder */
static int g_pool_ready;

/* The pool and the clock reference, made at the first mark. */
static dt_status ready(void)
{
    if (!g_pool_ready) {
        gpu_span_pool_init(&g_pool);
        g_pool_ready = 1;
    }
    if (g_ref) return DT_OK;
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDefault);
    if (e != cudaSuccess) return cuda_err(e, "trace", "creating the clock reference event");
    /* Idle first, so the event is reached as soon as it is queued. */
    e = cudaStreamSynchronize(g_stream);
    const uint64_t t_before = gpu_span_now_ns();
    if (e == cudaSuccess) e = cudaEventRecord(ev, g_stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(ev);
    const uint64_t t_after = gpu_span_now_ns();
    if (e != cudaSuccess) {
        cudaEventDestroy(ev);
        return cuda_err(e, "trace", "recording the clock reference event");
    }
    g_ref = ev;
    g_ref_host_ns = t_before + (t_after - t_before) / 2;
    return DT_OK;
}

/* Records the begin (which 0) or end (1) event of slot i on stream, creating the pair first. A
 * failure gives the slot back: a span with a missing event is no span. */
static dt_status record(int i, int which, cudaStream_t stream)
{
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < 2 && e == cudaSuccess; k++)
        if (!g_ev[i][k]) e = cudaEventCreateWithFlags(&g_ev[i][k], cudaEventDefault);
    if (e == cudaSuccess) e = cudaEventRecord(g_ev[i][which], stream);
    if (e == cudaSuccess) return DT_OK;
    gpu_span_release(&g_pool, i);
    return cuda_err(e, "trace", which ? "recording a span's end event" : "recording a span's begin event");
}

extern "C" dt_status gpu_trace_begin(void *stream, int track, int cat, const char *name, int64_t arg, int64_t arg2)
{
    TRY(ready());
    const int i = gpu_span_begin(&g_pool, track, cat, name, arg, arg2);
    return i < 0 ? DT_OK : record(i, 0, (cudaStream_t)stream);
}

extern "C" dt_status gpu_trace_end(void *stream, int track)
{
    if (!g_pool_ready) return DT_OK;
    const int i = gpu_span_end(&g_pool, track);
    return i < 0 ? DT_OK : record(i, 1, (cudaStream_t)stream);
}

/* Slot i's span into tr when its end is done: 1 taken, 0 not yet, -1 failed (dropped). */
static int take(void *tr, int i, int wait, cudaError_t *err)
{
    cudaError_t e = wait ? cudaEventSynchronize(g_ev[i][1]) : cudaEventQuery(g_ev[i][1]);
    if (e == cudaErrorNotReady) return 0;
    float at_ms = 0.0f, dur_ms = 0.0f;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&at_ms, g_ref, g_ev[i][0]);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&dur_ms, g_ev[i][0], g_ev[i][1]);
    const gpu_span_slot *s = &g_pool.slot[i];
    if (e == cudaSuccess) {
        const uint64_t t0 = gpu_span_host_ns(g_ref_host_ns, at_ms);
        const uint64_t t1 = gpu_span_host_ns(t0, dur_ms);
        gpu_span_push(tr, s, t0, t1);
    }
    gpu_span_release(&g_pool, i);
    if (e == cudaSuccess) return 1;
    *err = e;
    return -1;
}

extern "C" dt_status gpu_trace_flush(void *tr, int wait)
{
    if (!g_pool_ready || !g_ref) return DT_OK;
    cudaError_t err = cudaSuccess;
    uint64_t failed = 0;
    for (int i = 0; i < GPU_SPAN_POOL; i++)
        if (g_pool.slot[i].state == GPU_SLOT_PENDING && take(tr, i, wait, &err) < 0) failed++;
    /* Drops since the last flush: a full pool, and spans whose events failed. */
    const uint64_t dropped = g_pool.dropped - g_dropped_told + failed;
    g_dropped_told = g_pool.dropped;
    gpu_span_drops(tr, dropped);
    if (err != cudaSuccess) cudaGetLastError(); /* the error is returned, not left for the next op */
    return cuda_err(err, "trace", "reading a GPU span's events");
}

dt_status cuda_trace_mark(backend *be, int end, const char *name, int cat, int64_t arg)
{
    (void)be;
    return end ? gpu_trace_end((void *)g_stream, GPU_SPAN_COMPUTE)
               : gpu_trace_begin((void *)g_stream, GPU_SPAN_COMPUTE, cat, name, arg, -1);
}

dt_status cuda_trace_flush(backend *be, void *tr, int wait)
{
    (void)be;
    return gpu_trace_flush(tr, wait);
}
