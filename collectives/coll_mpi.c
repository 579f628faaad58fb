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
 * Every operation is nonblocking underneath and polled against the deadline. A collective does not
 * say which ranks have not joined it, so each one comes with a roll call (roll_post) through rank
 * 0: the watchdog then names the ranks that never arrived instead of guessing.
 */
#include "collectives/coll.h"
#include "collectives/rank_names.h"
#include "collectives/roll_peers.h"
#include "collectives/ctx_comm.h"
#include "base/abort_guard.h"
#include "base/clock.h"
#include "kernels/cast.h"
#include "base/status.h"

#include "base/log.h"

#include <limits.h>
#include <stdio.h>
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

/* The roll call's tag: point-to-point messages on the backend's own communicator, apart from
 * every collective's traffic (MPI keeps collective and point-to-point matching apart). */
#define ROLL_TAG 7411
/* How long a rank that heard from rank 0 waits past its own deadline for rank 0, which knows who
 * is missing, to report and end the job. */
#define ROLL_GRACE_S 2.0

/* One rank's arrival at a collective: its sequence number, which operation, how many elements. */
typedef struct roll_msg {
    unsigned long long seq, kind, count;
} roll_msg;

typedef struct mpi_state {
    float *scratch;         /* MPI16_CHUNK floats, allocated on first 16-bit use */
    unsigned long long seq; /* collectives started on this communicator */
    /* The roll call of the collective in progress (see roll_post). Rank 0: receives from ranks
     * 1..W-1 at roll[0..W-2], sends to them at roll[W-1..2W-3]; another rank: the receive from
     * rank 0 at roll[0], its send at roll[1]. */
    MPI_Request *roll;
    roll_msg *roll_in; /* what each receive brought */
    roll_msg roll_out;
    int nroll;     /* requests of the current roll call; 0 when there is none */
    int roll_done; /* 1 once they have all completed */
    double t_hub;  /* another rank: when rank 0's arrival was first seen (0: not yet) */
} mpi_state;

static const char *const op_names[] = {"MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Reduce_scatter_block",
                                       "MPI_Allgather"};
enum { OP_ALLREDUCE, OP_BCAST, OP_BARRIER, OP_REDUCE_SCATTER, OP_ALLGATHER };

/* The roll call: a collective does not say which ranks have reached it, so every rank also tells
 * rank 0 that it arrived (a small message posted before the collective), and rank 0 tells every
 * rank. Rank 0 then knows exactly who has not arrived; another rank knows whether rank 0 has.
 * W-1 messages each way at rank 0, one each way elsewhere; none without a deadline. The
 * operation completes when both the collective and the roll call have. */
static int roll_post(coll *c, int kind, size_t count)
{
    mpi_state *st = c->impl;
    st->nroll = 0;
    st->roll_done = 0;
    st->t_hub = 0;
    if (c->size == 1 || c->timeout_s <= 0) return MPI_SUCCESS;
    st->roll_out = (roll_msg){st->seq, (unsigned long long)kind, count};
    int rc = MPI_SUCCESS;
    if (c->rank == 0) {
        for (int j = 1; j < c->size && rc == MPI_SUCCESS; j++)
            rc = MPI_Irecv(&st->roll_in[j - 1], 3, MPI_UNSIGNED_LONG_LONG, j, ROLL_TAG, c->comm, &st->roll[j - 1]);
        for (int j = 1; j < c->size && rc == MPI_SUCCESS; j++)
            rc = MPI_Isend(&st->roll_out, 3, MPI_UNSIGNED_LONG_LONG, j, ROLL_TAG, c->comm, &st->roll[c->size - 2 + j]);
        st->nroll = 2 * (c->size - 1);
    } else {
        rc = MPI_Irecv(&st->roll_in[0], 3, MPI_UNSIGNED_LONG_LONG, 0, ROLL_TAG, c->comm, &st->roll[0]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(&st->roll_out, 3, MPI_UNSIGNED_LONG_LONG, 0, ROLL_TAG, c->comm, &st->roll[1]);
        st->nroll = 2;
    }
    return rc;
}

/* Whether receive i of the roll call has completed (without completing it; a completed roll call
 * has null requests, which count as complete). */
static int roll_arrived(mpi_state *st, int i)
{
    int flag = 0;
    MPI_Request_get_status(st->roll[i], &flag, MPI_STATUS_IGNORE);
    return flag;
}

/* Another rank timed out first and told its verdict on the board (collectives/roll_peers.h): this
 * rank logs it as its own and ends the job. Never returns. */
static void verdict_forwarded(coll *c, const char *verdict, int from, const char *what, size_t count, double age)
{
    mpi_state *st = c->impl;
    char teller[160];
    rank_names_ctx(c->ctx, &from, 1, teller, sizeof teller);
    log_msg(LOG_LEVEL_ERROR,
            "watchdog: collective #%llu (%s of %zu elements) has waited %.1f s; rank %s timed out first: %s. "
            "Aborting the job so no rank hangs",
            st->roll_out.seq, what, count, age, teller, verdict);
    if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}

/* Listens on the board for up to wait_s (once when 0) and forwards a verdict told there. */
static void board_wait(coll *c, const char *what, size_t count, double age, double wait_s)
{
    const double until = clock_now_s() + wait_s;
    do {
        int from = -1;
        const char *told = roll_board_listen(ctx_board(c->ctx), &from);
        if (told) verdict_forwarded(c, told, from, what, count, age);
        struct timespec ts = {0, 1000000};
        if (wait_s > 0) nanosleep(&ts, NULL);
    } while (clock_now_s() < until);
}

/* The watchdog's verdict, from the roll call; logs it and ends the job. Never returns. */
static void roll_expire(coll *c, const char *what, size_t count, double age)
{
    mpi_state *st = c->impl;
    const unsigned long long seq = st->roll_out.seq;
    char missing[512] = "", elsewhere[512] = "", hub[160];
    size_t ne = 0;
    /* More ranks than fit the message's 512 bytes are not named anyway. */
    int ranks[256] = {0}, nm = 0, more = 0;
    const int root = 0;
    rank_names_ctx(c->ctx, &root, 1, hub, sizeof hub); /* "0 on node1" */
    const char *cause;
    char verdict[1400];
    /* Rank 0 knows who is missing and its deadline may pass a moment after this rank's: its
     * verdict, when it comes in time, says more than this rank could. */
    if (c->rank != 0) board_wait(c, what, count, age, ROLL_VERDICT_S);
    if (st->nroll == 0) {
        /* No roll call: nothing is known about the others. */
        snprintf(verdict, sizeof verdict, "a peer rank is dead, stuck or far behind");
    } else if (c->rank == 0) {
        for (int j = 1; j < c->size; j++) {
            if (!roll_arrived(st, j - 1)) {
                if (nm < (int)(sizeof ranks / sizeof ranks[0]))
                    ranks[nm++] = j;
                else
                    more++;
            } else if (st->roll_in[j - 1].seq != seq || st->roll_in[j - 1].kind != st->roll_out.kind ||
                       st->roll_in[j - 1].count != count) {
                const roll_msg *m = &st->roll_in[j - 1];
                if (ne < sizeof elsewhere - 80)
                    ne += (size_t)snprintf(elsewhere + ne, sizeof elsewhere - ne,
                                           "%srank %d is at #%llu (%s of %llu "
                                           "elements)",
                                           ne ? ", " : "", j, m->seq, m->kind < 3 ? op_names[m->kind] : "?", m->count);
            }
        }
        rank_names_ctx(c->ctx, ranks, nm, missing, sizeof missing);
        if (nm)
            snprintf(verdict, sizeof verdict,
                     "rank(s) %s%s have not reached it (no word from them): they are dead, stuck "
                     "or far behind%s%s",
                     missing, more ? " and more" : "", ne ? "; " : "", elsewhere);
        else if (ne)
            snprintf(verdict, sizeof verdict, "the ranks called different collectives: %s (a bug in the program)",
                     elsewhere);
        else if ((nm = roll_board_probe(ctx_board(c->ctx), ranks, (int)(sizeof ranks / sizeof ranks[0]))) > 0)
            snprintf(verdict, sizeof verdict,
                     "every rank reached it, yet it has not completed, and rank(s) %s do not answer a probe "
                     "within %.1f s: they stopped or died inside it, or the network to them failed",
                     rank_names_ctx(c->ctx, ranks, nm, missing, sizeof missing), ROLL_PROBE_S);
        else
            snprintf(verdict, sizeof verdict,
                     "every rank reached it, yet it has not completed, though every rank answers a probe: "
                     "a rank stopped or died inside it, or the network between the ranks failed (MPI does "
                     "not say which rank)");
    } else if (!st->t_hub) {
        snprintf(verdict, sizeof verdict,
                 "rank %s has not reached it (no word from it): it is dead, stuck or far "
                 "behind (rank 0 knows about the other ranks; this rank hears only from rank 0)",
                 hub);
    } else {
        snprintf(verdict, sizeof verdict,
                 "rank %s reached it %.1f s ago, yet neither the collective nor rank 0's verdict has come: "
                 "rank 0 is dead or stuck, or the network between it and this rank failed (this rank hears "
                 "only from rank 0; rank 0's own output names the ranks it missed)",
                 hub, clock_now_s() - st->t_hub);
    }
    /* A rank other than 0 knows only about rank 0; the probe tells it who else is out of reach
     * (on a node cut off: every rank beyond the dead link). */
    if (c->rank != 0 && (nm = roll_board_probe(ctx_board(c->ctx), ranks, (int)(sizeof ranks / sizeof ranks[0]))) > 0) {
        const size_t used = strlen(verdict);
        snprintf(verdict + used, sizeof verdict - used, "; rank(s) %s do not answer a probe within %.1f s",
                 rank_names_ctx(c->ctx, ranks, nm, missing, sizeof missing), ROLL_PROBE_S);
        board_wait(c, what, count, age, 0); /* one that came meanwhile still wins */
    }
    cause = verdict;
    roll_board_tell(ctx_board(c->ctx), verdict);
    log_msg(LOG_LEVEL_ERROR,
            "watchdog: collective #%llu (%s of %zu elements) has waited %.1f s, past the %.1f s timeout; "
            "%s. Aborting the job so no rank hangs (raise --timeout only if steps are legitimately this slow)",
            seq, what, count, age, c->timeout_s, cause);
    if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}

/* Waits for a nonblocking collective, and the roll call when one is pending, against the
 * deadline: the watchdog of the MPI backend. A rank other than 0 that has heard from rank 0 gives
 * rank 0, which knows who is missing, the time to say so before it ends the job itself. Spins
 * briefly (small collectives finish in microseconds), then polls with short sleeps. */
static int mpi_wait(coll *c, MPI_Request *r, int kind, size_t count, double start)
{
    mpi_state *st = c->impl;
    int flag = 0, spins = 0;
    for (;;) {
        int rc = flag ? MPI_SUCCESS : MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
        if (st->nroll && !st->roll_done) {
            int all = 0;
            if (c->rank != 0 && !st->t_hub && roll_arrived(st, 0)) st->t_hub = clock_now_s();
            rc = MPI_Testall(st->nroll, st->roll, &all, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS) return rc;
            if (all) {
                st->roll_done = 1;
                if (c->rank != 0 && !st->t_hub) st->t_hub = clock_now_s();
            }
        }
        if (flag && (!st->nroll || st->roll_done)) return MPI_SUCCESS;
        if (++spins < 2000) continue;
        const double now = clock_now_s(), age = now - start;
        int from = -1;
        const char *told = roll_board_listen(ctx_board(c->ctx), &from);
        if (told) verdict_forwarded(c, told, from, op_names[kind], count, age);
        if (c->timeout_s > 0 && age > c->timeout_s &&
            !(c->rank != 0 && st->t_hub && now < st->t_hub + c->timeout_s + ROLL_GRACE_S))
            roll_expire(c, op_names[kind], count, age);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Drops a roll call left pending by a failed collective, so the next one starts clean. */
static void roll_drop(coll *c)
{
    mpi_state *st = c->impl;
    for (int i = 0; !st->roll_done && i < st->nroll; i++) {
        if (st->roll[i] == MPI_REQUEST_NULL) continue;
        const int is_recv = c->rank == 0 ? i < c->size - 1 : i == 0;
        if (is_recv) {
            MPI_Cancel(&st->roll[i]);
            MPI_Wait(&st->roll[i], MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&st->roll[i]);
        }
    }
    st->nroll = 0;
}

/* The start of one operation: its sequence number and roll call, and a debug line. */
static int op_begin(coll *c, int kind, size_t count, size_t bytes, double *start)
{
    mpi_state *st = c->impl;
    *start = clock_now_s();
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "coll %s: start #%llu %s of %zu elements (%zu bytes)", c->ops->name, st->seq,
                op_names[kind], count, bytes);
    const int rc = roll_post(c, kind, count);
    if (rc == MPI_SUCCESS && st->nroll && coll_test_hang("mpi", c->rank, st->seq))
        for (;;) { /* the test hook: arrived, and never joins the collective */
            int all;
            MPI_Testall(st->nroll, st->roll, &all, MPI_STATUSES_IGNORE);
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    return rc;
}

/* The end of one operation: a debug line with its time; a failure drops the roll call. */
static void op_end(coll *c, int kind, size_t count, size_t bytes, double start, int ok)
{
    mpi_state *st = c->impl;
    if (!ok) roll_drop(c);
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "coll %s: end #%llu %s of %zu elements (%zu bytes) %s in %.0f us", c->ops->name,
                st->seq, op_names[kind], count, bytes, ok ? "done" : "failed", (clock_now_s() - start) * 1e6);
    st->seq++;
}

static dt_status mpi_fail(int rc, const char *what, size_t count)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return status_set_error(DT_ERR_MPI,
                            "%s of %zu elements failed: %s. A peer may have died or run out "
                            "of memory: read the other ranks' messages",
                            what, count, msg);
}

static void scale_f32(float *p, size_t n, int size)
{
    const float w = (float)size;
    for (size_t i = 0; i < n; i++) p[i] /= w;
}

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
    int rc = op_begin(c, OP_ALLREDUCE, count, count * dt_dtype_size(t), &start);
    const size_t chunk = t == DT_F32 ? MPI32_CHUNK : MPI16_CHUNK;
    for (size_t off = 0; rc == MPI_SUCCESS && off < count; off += chunk) {
        const size_t n = count - off < chunk ? count - off : chunk;
        /* fp32 in place; 16 bits widened into the scratch, summed there and rounded back once. */
        float *p = t == DT_F32 ? (float *)buf + off : st->scratch;
        if (t != DT_F32) cpu_cast_16_to_f32(t, (uint16_t *)buf + off, p, n);
        MPI_Request r;
        rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &r);
        if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, OP_ALLREDUCE, count, start);
        if (rc != MPI_SUCCESS) break;
        if (op == DT_AVG) scale_f32(p, n, c->size);
        if (t != DT_F32) cpu_cast_f32_to_16(t, p, (uint16_t *)buf + off, n);
    }
    op_end(c, OP_ALLREDUCE, count, count * dt_dtype_size(t), start, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, "MPI_Allreduce", count);
}

static dt_status mpi_bcast_host(coll *c, void *buf, size_t count, size_t bytes, int root)
{
    char *p = buf;
    double start;
    int rc = op_begin(c, OP_BCAST, count, bytes, &start);
    for (size_t off = 0; rc == MPI_SUCCESS && off < bytes; off += MPI32_CHUNK) {
        size_t n = bytes - off < MPI32_CHUNK ? bytes - off : MPI32_CHUNK;
        MPI_Request r;
        rc = MPI_Ibcast(p + off, (int)n, MPI_BYTE, root, c->comm, &r);
        if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, OP_BCAST, count, start);
    }
    op_end(c, OP_BCAST, count, bytes, start, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, "MPI_Bcast", count);
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
    int rc = op_begin(c, OP_BARRIER, 0, 0, &start);
    if (rc == MPI_SUCCESS) rc = MPI_Ibarrier(c->comm, &r);
    if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, OP_BARRIER, 0, start);
    op_end(c, OP_BARRIER, 0, 0, start, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, "MPI_Barrier", 0);
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
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
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
    int rc = op_begin(c, kind, count, count * sizeof(float), &start);
    MPI_Request r;
    if (rc == MPI_SUCCESS && kind == OP_REDUCE_SCATTER) {
        /* In place, MPI puts this rank's block at the start of buf; it goes to its own place after. */
        rc = MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)b, MPI_FLOAT, MPI_SUM, c->comm, &r);
    } else if (rc == MPI_SUCCESS) {
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)b, MPI_FLOAT, c->comm, &r);
    }
    if (rc == MPI_SUCCESS) rc = mpi_wait(c, &r, kind, count, start);
    if (rc == MPI_SUCCESS && kind == OP_REDUCE_SCATTER) {
        if (mine) memmove(buf + mine, buf, b * sizeof(float));
        if (op == DT_AVG) scale_f32(buf + mine, b, c->size);
    }
    op_end(c, kind, count, count * sizeof(float), start, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, op_names[kind], count);
}

static dt_status mpi_halves(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, int kind)
{
    dt_status s = halves_check(c, buf, count, t, kind == OP_ALLGATHER ? COLL_NO_REDUCTION : (int)op, op_names[kind]);
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
