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
 */
#include "coll.h"
#include "clock.h"
#include "cast.h"
#include "status.h"

#include "log.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

typedef struct mpi_state {
    float *scratch; /* MPI16_CHUNK floats, allocated on first 16-bit use */
    unsigned long long seq; /* collectives started on this communicator */
} mpi_state;

/* Waits for a nonblocking collective against the deadline: the watchdog of the MPI backend. An
 * MPI collective does not say which peers are missing; the engine's allreduce does (engine.c).
 * Spins briefly (small collectives finish in microseconds), then polls with short sleeps. */
static int mpi_wait(coll *c, MPI_Request *r, const char *what, size_t count)
{
    mpi_state *st = c->impl;
    unsigned long long seq = st->seq++;
    double start = clock_now_s();
    int flag = 0, spins = 0;
    for (;;) {
        int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
        if (flag) return MPI_SUCCESS;
        if (++spins < 2000) continue;
        double age = clock_now_s() - start;
        if (c->timeout_s > 0 && age > c->timeout_s) {
            dt_log(DT_LOG_ERROR, "watchdog: collective #%llu (%s of %zu elements) has waited %.1f s, past the %.1f s "
                   "timeout: a peer rank is dead, stuck or far behind (MPI does not say which; read the other "
                   "ranks' messages). Aborting the job so no rank hangs", seq, what, count, age, c->timeout_s);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static dt_status mpi_fail(int rc, const char *what, size_t count)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return dt_set_error(DT_ERR_MPI, "%s of %zu elements failed: %s. A peer may have died or run out "
                        "of memory: read the other ranks' messages", what, count, msg);
}

static void scale_f32(float *p, size_t n, int size)
{
    const float w = (float)size;
    for (size_t i = 0; i < n; i++) p[i] /= w;
}

static dt_status mpi_allreduce_host(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    mpi_state *st = c->impl;
    if (t == DT_F32) {
        float *p = buf;
        for (size_t off = 0; off < count; off += MPI32_CHUNK) {
            size_t n = count - off < MPI32_CHUNK ? count - off : MPI32_CHUNK;
            MPI_Request r;
            int rc = MPI_Iallreduce(MPI_IN_PLACE, p + off, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &r);
            if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, "MPI_Allreduce", count);
            if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allreduce", count);
            if (op == DT_AVG) scale_f32(p + off, n, c->size);
        }
        return DT_OK;
    }
    if (!st->scratch) {
        st->scratch = malloc(MPI16_CHUNK * sizeof(float));
        if (!st->scratch)
            return dt_set_error(DT_ERR_NOMEM, "out of memory for the %zu MiB fp32 scratch of 16-bit "
                                "allreduce", MPI16_CHUNK * sizeof(float) >> 20);
    }
    uint16_t *p = buf;
    for (size_t off = 0; off < count; off += MPI16_CHUNK) {
        size_t n = count - off < MPI16_CHUNK ? count - off : MPI16_CHUNK;
        cpu_cast_16_to_f32(t, p + off, st->scratch, n);
        MPI_Request r;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, st->scratch, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &r);
        if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, "MPI_Allreduce", count);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allreduce", count);
        if (op == DT_AVG) scale_f32(st->scratch, n, c->size);
        cpu_cast_f32_to_16(t, st->scratch, p + off, n);
    }
    return DT_OK;
}

static dt_status mpi_bcast_host(coll *c, void *buf, size_t bytes, int root)
{
    char *p = buf;
    for (size_t off = 0; off < bytes; off += MPI32_CHUNK) {
        size_t n = bytes - off < MPI32_CHUNK ? bytes - off : MPI32_CHUNK;
        MPI_Request r;
        int rc = MPI_Ibcast(p + off, (int)n, MPI_BYTE, root, c->comm, &r);
        if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, "MPI_Bcast", bytes);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Bcast", bytes);
    }
    return DT_OK;
}

#ifdef DTRAIN_HAVE_CUDA
/* Copies a device buffer to a fresh host buffer (to_host) or back (and frees it). */
static dt_status mpi_stage(void *dev, void **host, size_t bytes, int to_host)
{
    cudaError_t e;
    if (to_host) {
        *host = malloc(bytes ? bytes : 1);
        if (!*host) return dt_set_error(DT_ERR_NOMEM, "out of host memory staging %zu bytes", bytes);
        e = cudaMemcpy(*host, dev, bytes, cudaMemcpyDeviceToHost);
    } else {
        e = cudaMemcpy(dev, *host, bytes, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        free(*host);
        *host = NULL;
        return dt_set_error(DT_ERR_DEVICE, "cudaMemcpy of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
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
    dt_status s = coll_check_args(c, buf, count, t, DT_SUM, root);
    if (s || count == 0) return s;
    size_t bytes = count * dt_dtype_size(t);
#ifdef DTRAIN_HAVE_CUDA
    if (c->device_buffers) {
        void *host = NULL;
        if ((s = mpi_stage(buf, &host, bytes, 1))) return s;
        s = mpi_bcast_host(c, host, bytes, root);
        if (s) {
            free(host);
            return s;
        }
        return mpi_stage(buf, &host, bytes, 0);
    }
#endif
    return mpi_bcast_host(c, buf, bytes, root);
}

static dt_status mpi_barrier(coll *c)
{
    MPI_Request r;
    int rc = MPI_Ibarrier(c->comm, &r);
    if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, "MPI_Barrier", 0);
    return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, "MPI_Barrier", 0);
}

/* MPI has no way to tear down one communicator under a peer that hangs; the caller's
 * dt_abort_job (MPI_Abort) ends the job. */
static void mpi_abort(coll *c) { (void)c; }

static void mpi_destroy(coll *c)
{
    if (!c) return;
    mpi_state *st = c->impl;
    if (st) free(st->scratch);
    free(st);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c);
}

static const coll_ops mpi_ops = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

dt_status coll_mpi_create(MPI_Comm comm, int device_buffers, double timeout_s, coll **out)
{
    *out = NULL;
#ifndef DTRAIN_HAVE_CUDA
    if (device_buffers)
        return dt_set_error(DT_ERR_UNSUPPORTED, "device buffers need a CUDA build of dtrain");
#endif
    coll *c = calloc(1, sizeof *c);
    mpi_state *st = calloc(1, sizeof *st);
    if (!c || !st) {
        free(c);
        free(st);
        return dt_set_error(DT_ERR_NOMEM, "out of memory creating the MPI backend");
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
    *out = c;
    return DT_OK;
}
