/*
 * coll_mpi.c - the MPI collective backend.
 *
 * fp32 goes straight to MPI_Allreduce. fp16/bf16 are widened to fp32 chunk by chunk, summed by MPI
 * in fp32 and rounded once on the way back, so the result does not depend on the reduction order
 * and loses no more precision than one rounding. Counts above INT_MAX are split into chunks.
 * Buffers in CUDA device memory (the backend of GPU runs in a build without NCCL) are staged
 * through host memory, also when Open MPI reports that it is CUDA-aware: its CUDA support does
 * not cover the nonblocking collectives that the deadline polls (MPI_Iallreduce, MPI_Ibcast),
 * and averaging and 16-bit widening run on the host. Whether it is CUDA-aware is reported
 * (dtrain version) all the same.
 *
 * Every operation is nonblocking underneath and polled against the deadline, with a roll call that
 * names the ranks that never arrived (the watchdog: coll_mpi_roll.c).
 */
#include "collectives/coll_mpi_internal.h"
#include "collectives/engine.h"
#include "kernels/cast.h"
#include "kernels/host_vec.h"
#include "base/status.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support */
#endif

int coll_mpi_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return -1; /* the run-time answer needs MPI started */
    return MPIX_Query_cuda_support() == 1;
#else
    return 0; /* not built with CUDA support (or not Open MPI): nothing to ask */
#endif
}

/* Elements per fp32 chunk of a 16-bit allreduce: 16 MiB of scratch, large enough that MPI runs at
 * its bandwidth, small enough not to matter next to the model. */
#define MPI16_CHUNK ((size_t)4 << 20)
/* Elements per MPI call for fp32 (the count argument is an int). */
#define MPI32_CHUNK ((size_t)1 << 30)

static dt_status mpi_allreduce_host(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    mpi_state *st = c->impl;
    if (t != DT_F32 && !st->scratch) {
        st->scratch = malloc(MPI16_CHUNK * sizeof(float));
        if (!st->scratch)
            return status_set_error(DT_ERR_NOMEM,
                                    "out of memory for the %zu MiB fp32 scratch of 16-bit "
                                    "allreduce",
                                    MPI16_CHUNK * sizeof(float) >> 20);
    }
    double start;
    int rc = mpi_op_begin(c, OP_ALLREDUCE, count, count * dt_dtype_size(t), &start);
    const size_t chunk = t == DT_F32 ? MPI32_CHUNK : MPI16_CHUNK;
    for (size_t off = 0; rc == MPI_SUCCESS && off < count; off += chunk) {
        const size_t n = count - off < chunk ? count - off : chunk;
        /* fp32 in place; 16 bits widened into the scratch, summed there and rounded back once. */
        float *p = t == DT_F32 ? (float *)buf + off : st->scratch;
        if (t != DT_F32) cpu_cast_16_to_f32(t, (uint16_t *)buf + off, p, n);
        MPI_Request r;
        rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &r);
        if (rc == MPI_SUCCESS) rc = mpi_op_wait(c, &r, OP_ALLREDUCE, count, start);
        if (rc != MPI_SUCCESS) break;
        if (op == DT_AVG) cpu_div_by(p, n, (float)c->size);
        if (t != DT_F32) cpu_cast_f32_to_16(t, p, (uint16_t *)buf + off, n);
    }
    return mpi_op_end(c, OP_ALLREDUCE, count, count * dt_dtype_size(t), start, rc);
}

dt_status coll_mpi_sum_f64(coll *c, double *buf, int count)
{
    double start;
    MPI_Request r;
    int rc = mpi_op_begin(c, OP_ALLREDUCE, (size_t)count, (size_t)count * sizeof *buf, &start);
    if (rc == MPI_SUCCESS) rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, c->comm, &r);
    if (rc == MPI_SUCCESS) rc = mpi_op_wait(c, &r, OP_ALLREDUCE, (size_t)count, start);
    return mpi_op_end(c, OP_ALLREDUCE, (size_t)count, (size_t)count * sizeof *buf, start, rc);
}

static dt_status mpi_bcast_host(coll *c, void *buf, size_t count, size_t bytes, int root)
{
    char *p = buf;
    double start;
    int rc = mpi_op_begin(c, OP_BCAST, count, bytes, &start);
    for (size_t off = 0; rc == MPI_SUCCESS && off < bytes; off += MPI32_CHUNK) {
        size_t n = bytes - off < MPI32_CHUNK ? bytes - off : MPI32_CHUNK;
        MPI_Request r;
        rc = MPI_Ibcast(p + off, (int)n, MPI_BYTE, root, c->comm, &r);
        if (rc == MPI_SUCCESS) rc = mpi_op_wait(c, &r, OP_BCAST, count, start);
    }
    return mpi_op_end(c, OP_BCAST, count, bytes, start, rc);
}

#ifdef DTRAIN_HAVE_CUDA
/* Copies a device buffer to a fresh host buffer (to_host) or back (and frees it). */
static dt_status mpi_stage(void *dev, void **host, size_t bytes, int to_host)
{
    cudaError_t e;
    if (to_host) {
        *host = malloc(bytes ? bytes : 1);
        if (!*host) return status_set_error(DT_ERR_NOMEM, "out of host memory staging %zu bytes", bytes);
        e = cudaMemcpy(*host, dev, bytes, cudaMemcpyDeviceToHost);
    } else {
        e = cudaMemcpy(dev, *host, bytes, cudaMemcpyHostToDevice);
        /* From pageable memory cudaMemcpy returns once the bytes are staged, before the DMA into
         * dev may have landed, on the legacy stream: a caller's non-blocking stream (a custom
         * loop's optimizer, the reducer's widening there) would not wait for it. */
        if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
    }
    if (e != cudaSuccess) {
        free(*host);
        *host = NULL;
        return status_set_error(DT_ERR_DEVICE, "cudaMemcpy of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
    }
    if (!to_host) {
        free(*host);
        *host = NULL;
    }
    return DT_OK;
}
#endif

static dt_status mpi_allreduce(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    dt_status s = coll_check_args(c, buf, count, t, op, 0);
    if (s || count == 0) return s;
#ifdef DTRAIN_HAVE_CUDA
    if (c->device_buffers) {
        void *host = NULL;
        size_t bytes = count * dt_dtype_size(t);
        if ((s = mpi_stage(buf, &host, bytes, 1))) return s;
        s = mpi_allreduce_host(c, host, count, t, op);
        if (s) {
            free(host);
            return s;
        }
        return mpi_stage(buf, &host, bytes, 0);
    }
#endif
    return mpi_allreduce_host(c, buf, count, t, op);
}

static dt_status mpi_broadcast(coll *c, void *buf, size_t count, dt_dtype t, int root)
{
    dt_status s = coll_check_args(c, buf, count, t, COLL_NO_REDUCTION, root);
    if (s || count == 0) return s;
    size_t bytes = count * dt_dtype_size(t);
#ifdef DTRAIN_HAVE_CUDA
    if (c->device_buffers) {
        void *host = NULL;
        if ((s = mpi_stage(buf, &host, bytes, 1))) return s;
        s = mpi_bcast_host(c, host, count, bytes, root);
        if (s) {
            free(host);
            return s;
        }
        return mpi_stage(buf, &host, bytes, 0);
    }
#endif
    return mpi_bcast_host(c, buf, count, bytes, root);
}

static dt_status mpi_barrier(coll *c)
{
    MPI_Request r;
    double start;
    int rc = mpi_op_begin(c, OP_BARRIER, 0, 0, &start);
    if (rc == MPI_SUCCESS) rc = MPI_Ibarrier(c->comm, &r);
    if (rc == MPI_SUCCESS) rc = mpi_op_wait(c, &r, OP_BARRIER, 0, start);
    return mpi_op_end(c, OP_BARRIER, 0, 0, start, rc);
}

/* MPI has no way to tear down one communicator under a peer that hangs; the caller's
 * dt_abort_job (MPI_Abort) ends the job. */
static void mpi_abort(coll *c) { (void)c; }

static void mpi_destroy(coll *c)
{
    if (!c) return;
    mpi_state *st = c->impl;
    if (st) {
        free(st->scratch);
        free(st->roll);
        free(st->roll_in);
    }
    free(st);
    if (c->comm != MPI_COMM_NULL && !engine_mpi_finalized()) MPI_Comm_free(&c->comm);
    free(c);
}

/* The checks of reduce_scatter and allgather: fp32 (16-bit halves would need MPI to sum 16-bit
 * values, which it cannot), blocks of equal size that fit an int. */
static dt_status halves_check(const coll *c, const void *buf, size_t count, dt_dtype t, int op, const char *what)
{
    dt_status s = coll_check_args(c, buf, count, t, op, 0);
    if (s) return s;
    if (t != DT_F32)
        return status_set_error(DT_ERR_UNSUPPORTED, "%s on the MPI backend takes fp32 only, not %s: use the engine",
                                what, dt_dtype_name(t));
    if (count % (size_t)c->size)
        return status_set_error(DT_ERR_INVALID_ARG, "%s of %zu elements: pad the count to a multiple of the %d ranks",
                                what, count, c->size);
    if (count / (size_t)c->size > 2147483647u)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: blocks of %zu elements exceed MPI's int count", what,
                                count / (size_t)c->size);
    return DT_OK;
}

/* Host memory: the blocking call is the nonblocking one waited under the roll call's deadline. */
static dt_status mpi_halves_host(coll *c, float *buf, size_t count, dt_redop op, int kind)
{
    const size_t b = count / (size_t)c->size, mine = (size_t)c->rank * b;
    double start;
    int rc = mpi_op_begin(c, kind, count, count * sizeof(float), &start);
    MPI_Request r;
    if (rc == MPI_SUCCESS && kind == OP_REDUCE_SCATTER) {
        /* In place, MPI puts this rank's block at the start of buf; it goes to its own place after. */
        rc = MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)b, MPI_FLOAT, MPI_SUM, c->comm, &r);
    } else if (rc == MPI_SUCCESS) {
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)b, MPI_FLOAT, c->comm, &r);
    }
    if (rc == MPI_SUCCESS) rc = mpi_op_wait(c, &r, kind, count, start);
    if (rc == MPI_SUCCESS && kind == OP_REDUCE_SCATTER) {
        if (mine) memmove(buf + mine, buf, b * sizeof(float));
        if (op == DT_AVG) cpu_div_by(buf + mine, b, (float)c->size);
    }
    return mpi_op_end(c, kind, count, count * sizeof(float), start, rc);
}

static dt_status mpi_halves(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, int kind)
{
    dt_status s = halves_check(c, buf, count, t, kind == OP_ALLGATHER ? COLL_NO_REDUCTION : (int)op, mpi_op_name(kind));
    if (s || count == 0) return s;
#ifdef DTRAIN_HAVE_CUDA
    if (c->device_buffers) {
        void *host = NULL;
        size_t bytes = count * sizeof(float);
        if ((s = mpi_stage(buf, &host, bytes, 1))) return s;
        s = mpi_halves_host(c, host, count, op, kind);
        if (s) {
            free(host);
            return s;
        }
        return mpi_stage(buf, &host, bytes, 0);
    }
#endif
    return mpi_halves_host(c, buf, count, op, kind);
}

static dt_status mpi_reduce_scatter(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    return mpi_halves(c, buf, count, t, op, OP_REDUCE_SCATTER);
}

static dt_status mpi_allgather(coll *c, void *buf, size_t count, dt_dtype t)
{
    return mpi_halves(c, buf, count, t, DT_SUM, OP_ALLGATHER);
}

static const coll_ops mpi_ops = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
    .reduce_scatter = mpi_reduce_scatter,
    .allgather = mpi_allgather,
};

dt_status coll_mpi_create(MPI_Comm comm, int device_buffers, double timeout_s, coll **out)
{
    *out = NULL;
#ifndef DTRAIN_HAVE_CUDA
    if (device_buffers) return status_set_error(DT_ERR_UNSUPPORTED, "device buffers need a CUDA build of dtrain");
#endif
    coll *c = calloc(1, sizeof *c);
    mpi_state *st = calloc(1, sizeof *st);
    if (!c || !st) {
        free(c);
        free(st);
        return status_set_error(DT_ERR_NOMEM, "out of memory creating the MPI backend");
    }
    c->ops = &mpi_ops;
    c->impl = st;
    c->timeout_s = timeout_s;
    c->device_buffers = device_buffers;
    c->comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(comm, &c->comm);
    if (rc != MPI_SUCCESS) {
        mpi_destroy(c);
        return mpi_fail(rc, "MPI_Comm_dup", 0);
    }
    /* Errors come back as codes so dtrain can say what failed instead of MPI aborting silently. */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    const size_t nroll = c->size > 1 ? 2 * (size_t)(c->size - 1) : 1;
    st->roll = malloc(nroll * sizeof *st->roll);
    st->roll_in = malloc((nroll / 2 + 1) * sizeof *st->roll_in);
    if (!st->roll || !st->roll_in) {
        mpi_destroy(c);
        return status_set_error(DT_ERR_NOMEM, "out of memory creating the MPI backend");
    }
    *out = c;
    return DT_OK;
}
