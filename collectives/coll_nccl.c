/*
 * coll_nccl.c - the NCCL collective backend, bootstrapped over MPI.
 *
 * Rank 0 makes the ncclUniqueId and MPI broadcasts it; every rank then joins with ncclCommInitRank
 * on its already selected CUDA device. Collectives run on a dedicated non-blocking stream. While
 * waiting, the host polls the stream (or an event on it) and ncclCommGetAsyncError against the
 * deadline, and aborts the communicator (ncclCommAbort) when a peer is gone, so that no rank hangs
 * silently.
 *
 * Gradient buckets (start / wait_all): each start records an event on the compute stream and
 * makes the NCCL stream wait for it, then queues ncclAllReduce there, so the reduction of a bucket
 * overlaps the backward pass of the layers before it. wait_all records an event after the last
 * one, polls it under the deadline, and makes the compute stream wait for it (the optimizer's
 * kernels queue behind it; nothing waits for the whole device); an event recorded behind each
 * start lets wait_one make the compute stream wait for one bucket alone (its optimizer step then
 * runs while the later buckets are reduced). ZeRO-1's halves (start_half) queue
 * the same way: a group of ncclReduceScatter (or ncclAllGather) of the equal blocks and ncclReduce
 * (ncclBroadcast) of the tail. While a trace records, each bucket's collective is also a span
 * between two events on our stream (kernels/cuda/trace_gpu.h).
 *
 * The communicator is nonblocking (NCCL >= 2.14): ncclCommInitRank and any later call may return
 * ncclInProgress, and the state is then polled (ncclCommGetAsyncError) under the same deadline
 * before the next call, so a peer that dies or cannot be reached during initialization, or while
 * NCCL connects lazily at the first collective, ends the job with a message instead of a hang.
 */
#include "collectives/coll.h"
#include "collectives/engine.h"
#include "base/clock.h"
#include "base/gpu_span.h"
#include "base/trace.h"
#include "base/log.h"
#include "base/status.h"
#include "kernels/cuda/trace_gpu.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define NCCL_NONBLOCKING 1
#else
#define NCCL_NONBLOCKING 0
#endif

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready; /* recorded on the caller's stream before a start */
    cudaEvent_t done;  /* recorded on ours by wait_all */
    int aborted;
    int started;        /* starts since the last wait_all */
    cudaEvent_t *marks; /* marks[k]: recorded on ours right after start k (wait_one); made as needed */
    int nmarks;
    size_t started_n; /* their elements */
    double t_first;   /* when the first of them was started */
} nccl_state;

/* count 0: an operation on no buffer (initialization, finalization). */
static dt_status nccl_fail(ncclResult_t r, const char *what, size_t count)
{
    const char *last = ncclGetLastError(NULL);
    char of[48] = "";
    if (count) snprintf(of, sizeof of, " of %zu elements", count);
    return status_set_error(DT_ERR_COMM, "%s%s failed: %s%s%s. Run with NCCL_DEBUG=INFO for details", what, of,
                            ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

/* An MPI call of the bootstrap failed: say which, and MPI's words, as an MPI failure (not NCCL's). */
static dt_status mpi_call_fail(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return status_set_error(DT_ERR_MPI,
                            "%s failed while creating the NCCL backend: %s. A peer may have died: read the "
                            "other ranks' messages",
                            what, msg);
}

/* dt_dtype to NCCL's type; coll_check_args has refused any other value (and DT_U8 in a reduction). */
static ncclDataType_t nccl_type(dt_dtype t)
{
    switch (t) {
        case DT_F16: return ncclHalf;
        case DT_BF16: return ncclBfloat16;
        case DT_U8: return ncclUint8;
        case DT_F32: break;
    }
    return ncclFloat;
}

#define HINT_PEER                                                                                                      \
    "a peer rank is dead or stuck. Read the other ranks' messages; raise --timeout only if steps are legitimately "    \
    "this slow"
#define HINT_INIT                                                                                                      \
    "a peer rank is dead or stuck, or the ranks cannot reach each other (run with NCCL_DEBUG=INFO; "                   \
    "NCCL_SOCKET_IFNAME picks the network interface)"

/* The one waiting loop of this backend, against the deadline counted from `start`. cuda_work 1:
 * until the stream (ev NULL) or ev has passed its work; cuda_work 0: until the communicator has
 * settled (no nonblocking call still ncclInProgress). An error NCCL reports aborts the
 * communicator (its queued kernels may wait for a dead peer, and a later cudaFree would wait for
 * them); so does the deadline, with a message ending in `hint`. */
static dt_status nccl_watch(coll *c, int cuda_work, cudaEvent_t ev, double start, const char *what, size_t count,
                            const char *hint)
{
    nccl_state *st = c->impl;
    char of[48] = "";
    if (count) snprintf(of, sizeof of, " of %zu elements", count);
    for (;;) {
        if (cuda_work) {
            const cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(st->stream);
            if (e == cudaSuccess) return DT_OK;
            if (e != cudaErrorNotReady) {
                const dt_status s =
                    status_set_error(DT_ERR_DEVICE, "%s%s: CUDA error %s", what, of, cudaGetErrorString(e));
                /* The device failed under NCCL's kernels: finalizing later would wait out the
                 * deadline on them. */
                c->ops->abort(c);
                return s;
            }
        }
        ncclResult_t state = ncclSuccess;
        const ncclResult_t q = ncclCommGetAsyncError(st->comm, &state);
        if (q != ncclSuccess) state = q;
        if (!cuda_work && state == ncclSuccess) return DT_OK;
        if (state != ncclSuccess && state != ncclInProgress) {
            const dt_status s = nccl_fail(state, what, count);
            c->ops->abort(c);
            return s;
        }
        const double age = clock_now_s() - start;
        if (c->timeout_s > 0 && age > c->timeout_s) {
            log_msg(LOG_LEVEL_ERROR, "%s%s still running after %.1f s (timeout %.1f s); aborting the NCCL communicator",
                    what, of, age, c->timeout_s);
            c->ops->abort(c);
            return status_set_error(DT_ERR_TIMEOUT, "%s%s did not finish within %.1f s: %s", what, of, c->timeout_s,
                                    hint);
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* After a call that returned r: a nonblocking call may still be under way (ncclInProgress); wait
 * for the communicator to settle. An immediate error aborts it too, unless NCCL only refused an
 * argument (the communicator is then still usable). */
static dt_status nccl_settle(coll *c, ncclResult_t r, double start, const char *what, size_t count, const char *hint)
{
    if (r != ncclSuccess && r != ncclInProgress) {
        const dt_status s = nccl_fail(r, what, count);
        if (r != ncclInvalidArgument && r != ncclInvalidUsage) c->ops->abort(c);
        return s;
    }
    return nccl_watch(c, 0, NULL, start, what, count, hint);
}

/* Waits for the stream under the deadline counted from start (the call's, so that settling and
 * running share one --timeout). */
static dt_status nccl_wait(coll *c, double start, const char *what, size_t count)
{
    return nccl_watch(c, 1, NULL, start, what, count, HINT_PEER);
}

static dt_status cuda_fail(cudaError_t e, const char *what)
{
    return status_set_error(DT_ERR_DEVICE, "%s failed: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* What a queued bucket operation does: the allreduce, or one of ZeRO-1's halves. */
typedef enum { Q_ALLREDUCE, Q_REDUCE_SCATTER, Q_ALLGATHER } queue_kind;

/* The NCCL calls of one queued bucket operation on our stream. The halves split by coll_part:
 * equal blocks in one ncclReduceScatter / ncclAllGather (in place: this rank's block at its own
 * place), the tail of fewer than W elements reduced to / broadcast from the last rank, grouped so
 * that NCCL launches them together. */
static ncclResult_t queue_calls(coll *c, char *buf, size_t count, dt_dtype t, dt_redop op, queue_kind kind)
{
    nccl_state *st = c->impl;
    const ncclDataType_t nt = nccl_type(t);
    const ncclRedOp_t nop = op == DT_AVG ? ncclAvg : ncclSum;
    if (kind == Q_ALLREDUCE) return ncclAllReduce(buf, buf, count, nt, nop, st->comm, st->stream);
    const size_t esz = dt_dtype_size(t), q = count / (size_t)c->size, tail = count - q * (size_t)c->size;
    char *mine = buf + (size_t)c->rank * q * esz, *rest = buf + q * (size_t)c->size * esz;
    const int last = c->size - 1;
    /* On a nonblocking communicator a call may answer ncclInProgress (NCCL documents it for
     * ncclGroupEnd, whose answer then stands for the group): that is no reason to leave the tail's
     * call out, which would pair this rank's group with the other ranks' groups of two. */
    ncclResult_t r = ncclGroupStart();
    if ((r == ncclSuccess || r == ncclInProgress) && q)
        r = kind == Q_REDUCE_SCATTER ? ncclReduceScatter(buf, mine, q, nt, nop, st->comm, st->stream)
                                     : ncclAllGather(mine, buf, q, nt, st->comm, st->stream);
    if ((r == ncclSuccess || r == ncclInProgress) && tail)
        r = kind == Q_REDUCE_SCATTER ? ncclReduce(rest, rest, tail, nt, nop, last, st->comm, st->stream)
                                     : ncclBroadcast(rest, rest, tail, nt, last, st->comm, st->stream);
    const ncclResult_t g = ncclGroupEnd();
    return r != ncclSuccess && r != ncclInProgress ? r : g;
}

/* Records marks[k] on our stream, right behind start k (made the first time a step has k + 1). */
static dt_status mark_start(nccl_state *st, int k)
{
    if (k >= st->nmarks) {
        const int n = k + 8;
        cudaEvent_t *m = realloc(st->marks, (size_t)n * sizeof *m);
        if (!m) return status_set_error(DT_ERR_NOMEM, "out of memory for %d NCCL bucket events", n);
        st->marks = m;
        for (; st->nmarks < n; st->nmarks++) {
            const cudaError_t e = cudaEventCreateWithFlags(&st->marks[st->nmarks], cudaEventDisableTiming);
            if (e != cudaSuccess) return cuda_fail(e, "cudaEventCreate for a gradient bucket");
        }
    }
    const cudaError_t e = cudaEventRecord(st->marks[k], st->stream);
    return e == cudaSuccess ? DT_OK : cuda_fail(e, "cudaEventRecord after a gradient bucket's collective");
}

static dt_status nccl_queue(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, queue_kind kind, void *after)
{
    static const char *const names[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather"};
    static const char *const spans[] = {"allreduce", "reduce-scatter", "allgather"};
    dt_status s = coll_check_args(c, buf, count, t, kind == Q_ALLGATHER ? COLL_NO_REDUCTION : (int)op, 0);
    if (s || count == 0) return s;
    nccl_state *st = c->impl;
    if (st->aborted) return status_set_error(DT_ERR_COMM, "the NCCL communicator was aborted earlier");
    cudaError_t e = cudaEventRecord(st->ready, (cudaStream_t)after);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(st->stream, st->ready, 0);
    if (e != cudaSuccess) return cuda_fail(e, "ordering a gradient bucket after the backward pass (cudaEventRecord)");
    /* While a trace records: the bucket's span on the "gpu nccl" track, from when our stream
     * reaches the collective (its inputs are done) to when it is complete. */
    if (c->trace) {
        char name[40];
        snprintf(name, sizeof name, "%s b%d", spans[kind], c->trace_bucket);
        if ((s = gpu_trace_begin(st->stream, GPU_SPAN_NCCL, TRACE_CAT_COMM, name, c->trace_bucket,
                                 (int64_t)(count * dt_dtype_size(t)))))
            return s;
    }
    const double t0 = clock_now_s();
    char what[64];
    snprintf(what, sizeof what, "%s of a gradient bucket", names[kind]);
    if ((s = nccl_settle(c, queue_calls(c, buf, count, t, op, kind), t0, what, count, HINT_PEER))) return s;
    const int k = st->started++;
    if (k == 0) {
        st->t_first = clock_now_s();
        st->started_n = 0;
    }
    st->started_n += count;
    /* After the bookkeeping: wait_all still waits for this collective if an event fails. */
    if ((s = mark_start(st, k))) return s;
    return c->trace ? gpu_trace_end(st->stream, GPU_SPAN_NCCL) : DT_OK;
}

/* Every operation that issues a collective holds the context's mark (coll_enter) while it does:
 * NCCL pairs the ranks' collectives in the order each rank issues them. Waiting issues none. */
static dt_status nccl_start(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, void *after)
{
    dt_status s = coll_enter(c, "ncclAllReduce");
    if (s) return s;
    s = nccl_queue(c, buf, count, t, op, Q_ALLREDUCE, after);
    coll_leave(c);
    return s;
}

static dt_status nccl_start_half(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, int gather, void *after)
{
    dt_status s = coll_enter(c, gather ? "ncclAllGather" : "ncclReduceScatter");
    if (s) return s;
    s = nccl_queue(c, buf, count, t, op, gather ? Q_ALLGATHER : Q_REDUCE_SCATTER, after);
    coll_leave(c);
    return s;
}

static dt_status nccl_wait_all(coll *c, void *after)
{
    nccl_state *st = c->impl;
    if (!st->started) return DT_OK;
    const int n = st->started;
    st->started = 0;
    if (st->aborted) return status_set_error(DT_ERR_COMM, "the NCCL communicator was aborted earlier");
    cudaError_t e = cudaEventRecord(st->done, st->stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaEventRecord after the gradient allreduce");
    char what[96];
    snprintf(what, sizeof what, "the NCCL collectives of %d gradient bucket(s)", n);
    dt_status s = nccl_watch(c, 1, st->done, st->t_first, what, st->started_n, HINT_PEER);
    if (s) return s;
    e = cudaStreamWaitEvent((cudaStream_t)after, st->done, 0);
    return e == cudaSuccess ? DT_OK : cuda_fail(e, "cudaStreamWaitEvent on the gradient allreduce");
}

static dt_status nccl_wait_one(coll *c, int k, void *after)
{
    nccl_state *st = c->impl;
    if (k < 0 || k >= st->started)
        return status_set_error(DT_ERR_INVALID_ARG, "NCCL wait_one: start %d of %d since the last wait_all", k,
                                st->started);
    if (st->aborted) return status_set_error(DT_ERR_COMM, "the NCCL communicator was aborted earlier");
    const cudaError_t e = cudaStreamWaitEvent((cudaStream_t)after, st->marks[k], 0);
    return e == cudaSuccess ? DT_OK : cuda_fail(e, "cudaStreamWaitEvent on a gradient bucket");
}

static dt_status nccl_allreduce_in(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    dt_status s = coll_check_args(c, buf, count, t, op, 0);
    if (s || count == 0) return s;
    nccl_state *st = c->impl;
    if (st->aborted) return status_set_error(DT_ERR_COMM, "the NCCL communicator was aborted earlier");
    const double t0 = clock_now_s();
    ncclResult_t r =
        ncclAllReduce(buf, buf, count, nccl_type(t), op == DT_AVG ? ncclAvg : ncclSum, st->comm, st->stream);
    if ((s = nccl_settle(c, r, t0, "ncclAllReduce", count, HINT_PEER))) return s;
    return nccl_wait(c, t0, "ncclAllReduce", count);
}

/* ZeRO-1's halves (coll.h), in place: NCCL's in-place forms take this rank's block at its own place
 * (recvbuff = sendbuff + rank * block for the reduce-scatter, sendbuff = recvbuff + rank * block for
 * the allgather). */
static dt_status nccl_halves_in(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, int gather)
{
    const char *what = gather ? "ncclAllGather" : "ncclReduceScatter";
    dt_status s = coll_check_args(c, buf, count, t, gather ? COLL_NO_REDUCTION : (int)op, 0);
    if (s || count == 0) return s;
    if (count % (size_t)c->size)
        return status_set_error(DT_ERR_INVALID_ARG, "%s of %zu elements: pad the count to a multiple of the %d ranks",
                                what, count, c->size);
    nccl_state *st = c->impl;
    if (st->aborted) return status_set_error(DT_ERR_COMM, "the NCCL communicator was aborted earlier");
    const size_t b = count / (size_t)c->size;
    char *mine = (char *)buf + (size_t)c->rank * b * dt_dtype_size(t);
    const double t0 = clock_now_s();
    ncclResult_t r =
        gather ? ncclAllGather(mine, buf, b, nccl_type(t), st->comm, st->stream)
               : ncclReduceScatter(buf, mine, b, nccl_type(t), op == DT_AVG ? ncclAvg : ncclSum, st->comm, st->stream);
    if ((s = nccl_settle(c, r, t0, what, count, HINT_PEER))) return s;
    return nccl_wait(c, t0, what, count);
}

static dt_status nccl_halves(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, int gather)
{
    dt_status s = coll_enter(c, gather ? "ncclAllGather" : "ncclReduceScatter");
    if (s) return s;
    s = nccl_halves_in(c, buf, count, t, op, gather);
    coll_leave(c);
    return s;
}

static dt_status nccl_reduce_scatter(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    return nccl_halves(c, buf, count, t, op, 0);
}

static dt_status nccl_allgather(coll *c, void *buf, size_t count, dt_dtype t)
{
    return nccl_halves(c, buf, count, t, DT_SUM, 1);
}

static dt_status nccl_broadcast_in(coll *c, void *buf, size_t count, dt_dtype t, int root)
{
    dt_status s = coll_check_args(c, buf, count, t, COLL_NO_REDUCTION, root);
    if (s || count == 0) return s;
    nccl_state *st = c->impl;
    if (st->aborted) return status_set_error(DT_ERR_COMM, "the NCCL communicator was aborted earlier");
    const double t0 = clock_now_s();
    ncclResult_t r = ncclBroadcast(buf, buf, count, nccl_type(t), root, st->comm, st->stream);
    if ((s = nccl_settle(c, r, t0, "ncclBroadcast", count, HINT_PEER))) return s;
    return nccl_wait(c, t0, "ncclBroadcast", count);
}

static dt_status nccl_barrier_in(coll *c)
{
    int rc = MPI_Barrier(c->comm);
    return rc == MPI_SUCCESS ? DT_OK : status_set_error(DT_ERR_MPI, "MPI_Barrier failed (a peer may have died)");
}

static dt_status nccl_allreduce(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    dt_status s = coll_enter(c, "ncclAllReduce");
    if (s) return s;
    s = nccl_allreduce_in(c, buf, count, t, op);
    coll_leave(c);
    return s;
}

static dt_status nccl_broadcast(coll *c, void *buf, size_t count, dt_dtype t, int root)
{
    dt_status s = coll_enter(c, "ncclBroadcast");
    if (s) return s;
    s = nccl_broadcast_in(c, buf, count, t, root);
    coll_leave(c);
    return s;
}

static dt_status nccl_barrier(coll *c)
{
    dt_status s = coll_enter(c, "MPI_Barrier");
    if (s) return s;
    s = nccl_barrier_in(c);
    coll_leave(c);
    return s;
}

static void nccl_abort(coll *c)
{
    nccl_state *st = c->impl;
    if (st && !st->aborted && st->comm) {
        ncclCommAbort(st->comm);
        st->comm = NULL;
        st->aborted = 1;
    }
}

static void nccl_destroy(coll *c)
{
    if (!c) return;
    nccl_state *st = c->impl;
    if (st) {
#if NCCL_NONBLOCKING
        /* Finalize (flushes, may be in progress) under the deadline, then destroy; a finalize that
         * fails or times out has aborted the communicator instead (comm NULL). */
        if (st->comm && !st->aborted &&
            nccl_settle(c, ncclCommFinalize(st->comm), clock_now_s(), "ncclCommFinalize", 0, HINT_PEER))
            log_msg(LOG_LEVEL_WARN, "closing NCCL: %s", dt_last_error());
#endif
        if (st->comm) ncclCommDestroy(st->comm);
        if (st->ready) cudaEventDestroy(st->ready);
        if (st->done) cudaEventDestroy(st->done);
        for (int i = 0; i < st->nmarks; i++) cudaEventDestroy(st->marks[i]);
        free(st->marks);
        if (st->stream) cudaStreamDestroy(st->stream);
        free(st);
    }
    if (c->comm != MPI_COMM_NULL && !engine_mpi_finalized()) MPI_Comm_free(&c->comm);
    free(c);
}

static const coll_ops nccl_ops = {
    .name = "nccl",
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
    .start = nccl_start,
    .wait_all = nccl_wait_all,
    .wait_one = nccl_wait_one,
    .start_half = nccl_start_half,
    .reduce_scatter = nccl_reduce_scatter,
    .allgather = nccl_allgather,
};

dt_status coll_nccl_create(MPI_Comm comm, double timeout_s, coll **out)
{
    *out = NULL;
    coll *c = calloc(1, sizeof *c);
    nccl_state *st = calloc(1, sizeof *st);
    if (!c || !st) {
        free(c);
        free(st);
        return status_set_error(DT_ERR_NOMEM, "out of memory creating the NCCL backend");
    }
    c->ops = &nccl_ops;
    c->impl = st;
    c->timeout_s = timeout_s;
    c->device_buffers = 1;
    c->comm = MPI_COMM_NULL;
    dt_status s = DT_OK;
    int rc = MPI_Comm_dup(comm, &c->comm);
    if (rc != MPI_SUCCESS) {
        c->comm = MPI_COMM_NULL;
        s = mpi_call_fail(rc, "MPI_Comm_dup");
        goto fail;
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);

    /* Every rank takes part in the broadcast even if rank 0 failed, so nobody waits forever. */
    ncclUniqueId id;
    int ok = 1;
    if (c->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) ok = 0;
    int all_ok = 0;
    rc = MPI_Bcast(&ok, 1, MPI_INT, 0, c->comm);
    if (rc == MPI_SUCCESS && ok) rc = MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, c->comm);
    if (rc != MPI_SUCCESS) {
        s = mpi_call_fail(rc, "MPI_Bcast of the NCCL unique id");
        goto fail;
    }
    if (!ok) {
        s = status_set_error(DT_ERR_COMM, "ncclGetUniqueId failed on rank 0; run with NCCL_DEBUG=INFO");
        goto fail;
    }
    char what[64];
    snprintf(what, sizeof what, "ncclCommInitRank (rank %d of %d)", c->rank, c->size);
    cudaError_t e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&st->ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&st->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        s = status_set_error(DT_ERR_DEVICE, "creating the NCCL stream and its events failed: %s",
                             cudaGetErrorString(e));
        ok = 0;
    }
    /* Every rank agrees it can start before any joins: ncclCommInitRank would otherwise wait the
     * whole deadline for a rank that failed here. */
    int all_ready = 0;
    rc = MPI_Allreduce(&ok, &all_ready, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS) {
        if (s == DT_OK) s = mpi_call_fail(rc, "MPI_Allreduce before ncclCommInitRank");
        goto fail;
    }
    if (!all_ready) {
        if (s == DT_OK)
            s = status_set_error(DT_ERR_DEVICE, "another rank could not create its NCCL stream; read its message");
        goto fail;
    }
    {
#if NCCL_NONBLOCKING
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        const double t0 = clock_now_s();
        ncclResult_t r = ncclCommInitRankConfig(&st->comm, c->size, id, c->rank, &config);
        if (r == ncclSuccess || r == ncclInProgress) {
            if ((s = nccl_settle(c, r, t0, what, 0, HINT_INIT))) ok = 0;
        } else {
            s = nccl_fail(r, what, 0);
            if (st->comm) ncclCommAbort(st->comm);
            st->comm = NULL;
            ok = 0;
        }
#else
        ncclResult_t r = ncclCommInitRank(&st->comm, c->size, id, c->rank);
        if (r != ncclSuccess) {
            s = nccl_fail(r, what, 0);
            st->comm = NULL;
            ok = 0;
        }
#endif
    }
    /* All ranks agree whether the communicator came up, so a failure on one is seen by all. That
     * agreement failing is an MPI failure, said as such (all_ok would stay 0 and blame NCCL on
     * another rank); the peers' communicators are then in an unknown state, so this one is aborted
     * rather than finalized (a finalize could wait the whole deadline for them). A failure of this
     * rank's own NCCL init stays the message: it is the cause. */
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS) {
        if (s == DT_OK)
            s = mpi_call_fail(rc, "MPI_Allreduce after ncclCommInitRank (whether every rank's NCCL "
                                  "communicator came up)");
        nccl_abort(c);
        goto fail;
    }
    if (!all_ok) {
        if (s == DT_OK)
            s = status_set_error(DT_ERR_COMM, "NCCL initialization failed on another rank; read its message");
        /* This rank's communicator may be up while a peer's is not: aborted, not finalized (a
         * finalize could wait the whole deadline for the peer). */
        nccl_abort(c);
        goto fail;
    }
    *out = c;
    return DT_OK;
fail:
    nccl_destroy(c);
    return s;
}

int coll_nccl_built(void) { return 1; }

void coll_nccl_version(char *out, size_t n)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(out, n, "-");
        return;
    }
    /* NCCL >= 2.9 encodes major*10000 + minor*100 + patch. */
    snprintf(out, n, "NCCL %d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
}
