/*
 * engine_req.c - one request of the communication engine over MPI: its scratch, its tags, posting
 * the messages of each phase, the rank-ordered reduction and the progress test (engine.c drives
 * the requests and watches their deadlines).
 *
 * A request goes through two phases. Reduce-scatter: rank r sends part j of its bucket to rank j
 * and receives part r from every other rank, then adds the W copies of part r in rank order.
 * Allgather: rank r sends its summed part to everyone and receives theirs in place. Tags carry
 * the sequence number, so several buckets can be in flight at once.
 */
#include "collectives/engine_impl.h"
#include "collectives/coll.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "kernels/cast.h"
#include "kernels/host_vec.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void engine_part(size_t n, int j, int size, size_t *off, size_t *cnt)
{
    size_t base = n / (size_t)size, rem = n % (size_t)size, uj = (size_t)j;
    *off = uj * base + (uj < rem ? uj : rem);
    *cnt = base + (uj < rem ? 1 : 0);
}

/* Scratch memory of bucket `bucket`, at least n elements of `elem` bytes, kept across steps.
 * pool/have are the engine's per-bucket arrays for one element type. */
static void *scratch_pool(void **pool, size_t *have, int nbuckets, int bucket, size_t n, size_t elem)
{
    if (bucket < 0 || bucket >= nbuckets) return NULL;
    if (have[bucket] < n) {
        free(pool[bucket]);
        pool[bucket] = malloc(n * elem);
        have[bucket] = pool[bucket] ? n : 0;
    }
    return pool[bucket];
}

static float *scratch_for(engine *e, int bucket, size_t n)
{
    return scratch_pool(e->scratch, e->scratch_n, e->nscratch, bucket, n, sizeof(float));
}

static uint16_t *scratch16_for(engine *e, int bucket, size_t n)
{
    return scratch_pool(e->scratch16, e->scratch16_n, e->nscratch, bucket, n, sizeof(uint16_t));
}

int engine_tag(uint64_t seq, req_phase phase) { return (int)(2 * (seq % ENGINE_TAG_SPAN) + (uint64_t)phase - 1); }

static dt_status req_post_phase(engine *e, req *q, req_phase phase)
{
    const int W = e->size, me = e->rank;
    size_t moff, mcnt;
    engine_part(q->count, me, W, &moff, &mcnt);
    q->nmr = 0;
    q->phase = phase;
    int tag = engine_tag(q->seq, phase);
    for (int j = 0; j < W; j++) {
        if (j == me) continue;
        size_t joff, jcnt;
        engine_part(q->count, j, W, &joff, &jcnt);
        int slot = j < me ? j : j - 1;
        int rc1, rc2;
        if (q->wire != DT_F32) {
            uint16_t *recv = q->recv16;
            if (phase == PHASE_SCATTER) {
                rc1 = MPI_Irecv(recv + (size_t)slot * mcnt, (int)mcnt, MPI_UINT16_T, j, tag, e->comm, &q->mr[q->nmr++]);
                rc2 = MPI_Isend(q->wire16 + joff, (int)jcnt, MPI_UINT16_T, j, tag, e->comm, &q->mr[q->nmr++]);
            } else {
                rc1 = MPI_Irecv(q->wire16 + joff, (int)jcnt, MPI_UINT16_T, j, tag, e->comm, &q->mr[q->nmr++]);
                rc2 = MPI_Isend(q->wire16 + moff, (int)mcnt, MPI_UINT16_T, j, tag, e->comm, &q->mr[q->nmr++]);
            }
        } else if (phase == PHASE_SCATTER) {
            rc1 = MPI_Irecv(q->scratch + (size_t)slot * mcnt, (int)mcnt, MPI_FLOAT, j, tag, e->comm, &q->mr[q->nmr++]);
            rc2 = MPI_Isend(q->buf + joff, (int)jcnt, MPI_FLOAT, j, tag, e->comm, &q->mr[q->nmr++]);
        } else {
            rc1 = MPI_Irecv(q->buf + joff, (int)jcnt, MPI_FLOAT, j, tag, e->comm, &q->mr[q->nmr++]);
            rc2 = MPI_Isend(q->buf + moff, (int)mcnt, MPI_FLOAT, j, tag, e->comm, &q->mr[q->nmr++]);
        }
        if (rc1 != MPI_SUCCESS || rc2 != MPI_SUCCESS)
            return status_set_error(DT_ERR_MPI,
                                    "posting messages of collective #%llu (bucket %d) failed: a peer "
                                    "may have died",
                                    (unsigned long long)q->seq, q->bucket);
    }
    return DT_OK;
}

int engine_pick_algo(const engine *e, int kind, size_t count, dt_dtype wire)
{
    if (e->size == 1) return ALGO_NONE;
    /* The chain carries fp32 partial sums: a 16-bit wire and ZeRO-1's halves stay direct. */
    if (kind != REQ_ALLREDUCE || wire != DT_F32 || e->algo == DT_ALLREDUCE_DIRECT) return ALGO_DIRECT;
    if (e->algo == DT_ALLREDUCE_CHAIN) return ALGO_CHAIN;
    /* Two ranks, a communication thread: MPI_Allreduce (see engine_req_post), whose count is an int;
     * a larger bucket (the engine takes up to 2^31 - 1 elements a part) goes the engine's way. */
    if (e->size == 2 && e->threaded && count <= (size_t)INT_MAX) return ALGO_MPI;
    if (engine_chain_pays(e) &&
        (double)(count * sizeof(float)) >=
            engine_policy_chain_from(e->size, (double)(e->chain_seg * sizeof(float)), (double)e->chain_min_bytes))
        return ALGO_CHAIN;
    return ALGO_DIRECT;
}

int engine_chain_pays(const engine *e) { return engine_policy_chain_pays(e->size, e->nodes, e->block, e->node_ranks); }

static const char *algo_text(int a)
{
    return a == ALGO_NONE    ? "no communication (1 rank)"
           : a == ALGO_MPI   ? "by MPI_Allreduce"
           : a == ALGO_CHAIN ? "by the pipelined chain"
                             : "rank-ordered";
}

const char *engine_req_kind_name(const req *q)
{
    return q->kind == REQ_REDUCE_SCATTER ? "reduce-scatter" : q->kind == REQ_ALLGATHER ? "allgather" : "allreduce";
}

/* The bytes of a request's bucket as it travels. */
size_t engine_req_wire_bytes(const req *q) { return q->count * (q->wire == DT_F32 ? sizeof(float) : sizeof(uint16_t)); }

/* The trace span of a finished request, on the communication track: from its start (its bucket
 * was ready) to now, with the bucket's bytes. */
static void req_trace_end(const engine *e, const req *q)
{
    trace_rec *tr = trace_active(ctx_trace(e->ctx));
    if (!tr) return;
    char name[40];
    snprintf(name, sizeof name, "%s b%d", engine_req_kind_name(q), q->bucket);
    trace_rec_add(tr, name, TRACE_CAT_COMM, TRACE_TRACK_COMM, q->t_post_ns, trace_now_ns(), q->bucket,
                  (int64_t)(q->count * (q->buf16 ? sizeof(uint16_t) : sizeof(float))));
}

/* A debug line when a request has finished (ok) or failed, with its time since it was posted;
 * and its trace span. */
static void req_log_end(const engine *e, const req *q, int ok)
{
    req_trace_end(e, q);
    if (!log_enabled(LOG_LEVEL_DEBUG)) return;
    log_msg(LOG_LEVEL_DEBUG, "engine: end #%llu %s of bucket %d, %zu elements, %zu bytes %s, %s %s in %.0f us",
            (unsigned long long)q->seq, engine_req_kind_name(q), q->bucket, q->count, engine_req_wire_bytes(q),
            dt_dtype_name(q->wire), algo_text(q->algo), ok ? "done" : "failed", (clock_now_s() - q->t_start) * 1e6);
}

/* Two ranks: the whole request by one blocking MPI_Allreduce, after the arrival messages that let
 * the watchdog tell a peer that never came from one that stopped inside it. Every element is one
 * addition, a + b = b + a, so MPI's own allreduce is as deterministic as the rank-ordered one; its
 * blocking form is the fastest transport here (7 MiB: 1.4 ms, against 1.7 ms rank-ordered and 3 ms
 * for MPI_Iallreduce), and this thread exists to block. The main thread watches the deadline
 * meanwhile (engine_wait_upto). */
static dt_status post_mpi_allreduce(engine *e, req *q)
{
    const int peer = 1 - e->rank;
    pthread_mutex_lock(&e->mu);
    q->phase = PHASE_MPI;
    int rc = MPI_Irecv(&q->arrive_in, 1, MPI_UINT64_T, peer, ENGINE_ARRIVE_TAG, e->comm, &q->arrive[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(&q->seq, 1, MPI_UINT64_T, peer, ENGINE_ARRIVE_TAG, e->comm, &q->arrive[1]);
    pthread_mutex_unlock(&e->mu);
    if (rc == MPI_SUCCESS && coll_test_hang("engine", e->rank, q->seq))
        for (;;) { /* the test hook: arrived, and never joins the allreduce */
            int f;
            MPI_Test(&q->arrive[1], &f, MPI_STATUS_IGNORE);
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, q->buf, (int)q->count, MPI_FLOAT, MPI_SUM, e->comm);
    /* The peer sent its arrival before joining the allreduce that just finished: it is here or
     * on its way. */
    for (int done = 0; rc == MPI_SUCCESS && !done;) {
        pthread_mutex_lock(&e->mu);
        rc = MPI_Testall(2, q->arrive, &done, MPI_STATUSES_IGNORE);
        pthread_mutex_unlock(&e->mu);
    }
    if (rc != MPI_SUCCESS) {
        req_log_end(e, q, 0);
        return status_set_error(DT_ERR_MPI, "collective #%llu (bucket %d) failed: a peer may have died",
                                (unsigned long long)q->seq, q->bucket);
    }
    if (q->op == DT_AVG) cpu_div_by(q->buf, q->count, 2.0f);
    q->phase = PHASE_DONE;
    req_log_end(e, q, 1);
    return DT_OK;
}

dt_status engine_req_post(engine *e, req *q)
{
    q->t_start = clock_now_s();
    if (e->size == 1) {
        q->phase = PHASE_DONE;
        req_log_end(e, q, 1);
        return DT_OK;
    }
    if (q->algo == ALGO_MPI) return post_mpi_allreduce(e, q);
    if (q->algo == ALGO_CHAIN) {
        float *sc = scratch_for(e, q->bucket, q->count ? q->count : 1);
        if (!sc)
            return status_set_error(DT_ERR_NOMEM, "out of memory for the %zu-element chain buffer of bucket %d",
                                    q->count, q->bucket);
        q->seg = e->chain_seg;
        return engine_chain_post(e, q, sc);
    }
    if (q->kind == REQ_ALLGATHER) return req_post_phase(e, q, PHASE_GATHER); /* fp32, in place */
    size_t moff, mcnt;
    engine_part(q->count, e->rank, e->size, &moff, &mcnt);
    if (q->wire != DT_F32) {
        /* A bucket kept in 16 bits travels as it is; an fp32 one as a rounded copy, received parts
         * after it in the same scratch. */
        const size_t own = q->buf16 ? 0 : q->count, need = own + (size_t)(e->size - 1) * mcnt;
        uint16_t *sc = scratch16_for(e, q->bucket, need ? need : 1);
        if (!sc) return status_set_error(DT_ERR_NOMEM, "out of memory for the 16-bit copy of bucket %d", q->bucket);
        q->wire16 = q->buf16 ? q->buf16 : sc;
        q->recv16 = sc + own;
        if (!q->buf16) cpu_cast_f32_to_16(q->wire, q->buf, q->wire16, q->count);
        return req_post_phase(e, q, PHASE_SCATTER);
    }
    q->scratch = scratch_for(e, q->bucket, (size_t)(e->size - 1) * mcnt);
    if (!q->scratch && mcnt > 0)
        return status_set_error(DT_ERR_NOMEM, "out of memory for the %zu-element receive buffer of bucket %d",
                                (size_t)(e->size - 1) * mcnt, q->bucket);
    return req_post_phase(e, q, PHASE_SCATTER);
}

/* Adds the W copies of my part in rank order 0, 1, ..., W-1 (my own copy is in buf), a block at
 * a time in a small buffer that stays in cache, so the sum goes to buf in one pass. */
static void req_reduce(engine *e, req *q)
{
    const int W = e->size, me = e->rank;
    size_t moff, mcnt;
    engine_part(q->count, me, W, &moff, &mcnt);
    float acc[ENGINE_BLOCK];
    if (q->wire != DT_F32) {
        /* Widen each rank's 16-bit copy, add in rank order in fp32, round the sum once. */
        const uint16_t *recv = q->recv16;
        float tmp[ENGINE_BLOCK];
        for (size_t b = 0; b < mcnt; b += ENGINE_BLOCK) {
            size_t n = mcnt - b < ENGINE_BLOCK ? mcnt - b : ENGINE_BLOCK;
            for (int k = 0; k < W; k++) {
                const uint16_t *src = (k == me ? q->wire16 + moff : recv + (size_t)(k < me ? k : k - 1) * mcnt) + b;
                cpu_cast_16_to_f32(q->wire, src, k == 0 ? acc : tmp, n);
                if (k > 0) cpu_add_into(acc, tmp, n);
            }
            if (q->op == DT_AVG) cpu_div_by(acc, n, (float)W);
            cpu_cast_f32_to_16(q->wire, acc, q->wire16 + moff + b, n);
        }
        return;
    }
    float *own = q->buf + moff;
    for (size_t b = 0; b < mcnt; b += ENGINE_BLOCK) {
        size_t n = mcnt - b < ENGINE_BLOCK ? mcnt - b : ENGINE_BLOCK;
        for (int k = 0; k < W; k++) {
            const float *src = (k == me ? own : q->scratch + (size_t)(k < me ? k : k - 1) * mcnt) + b;
            if (k == 0)
                memcpy(acc, src, n * sizeof(float));
            else
                cpu_add_into(acc, src, n);
        }
        if (q->op == DT_AVG) cpu_div_by(acc, n, (float)W);
        memcpy(own + b, acc, n * sizeof(float));
    }
}

/* Moves a request on when its phase's messages are done. Returns 1 when it finished now. */
int engine_req_progress(engine *e, req *q, dt_status *st)
{
    if (q->phase == PHASE_DONE) return 0;
    if (q->phase == PHASE_CHAIN) {
        int rc = MPI_SUCCESS;
        if (!engine_chain_progress(e, q, &rc)) return 0;
        if (rc != MPI_SUCCESS)
            *st = status_set_error(DT_ERR_MPI,
                                   "collective #%llu (bucket %d): a message of the chain failed; a peer rank may "
                                   "have died: read the other ranks' messages",
                                   (unsigned long long)q->seq, q->bucket);
        q->phase = PHASE_DONE;
        req_log_end(e, q, rc == MPI_SUCCESS);
        return 1;
    }
    int flag = 0;
    if (MPI_Testall(q->nmr, q->mr, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
        *st = status_set_error(DT_ERR_MPI,
                               "collective #%llu (bucket %d): a message failed; a peer rank may have "
                               "died: read the other ranks' messages",
                               (unsigned long long)q->seq, q->bucket);
        q->phase = PHASE_DONE;
        req_log_end(e, q, 0);
        return 1;
    }
    if (!flag) return 0;
    if (q->phase == PHASE_SCATTER) {
        req_reduce(e, q);
        if (q->kind == REQ_REDUCE_SCATTER) {
            /* Only the owned part is wanted: an fp32 bucket on a 16-bit wire gets its sum widened
             * back there, as the allgather would have brought it. */
            size_t moff, mcnt;
            engine_part(q->count, e->rank, e->size, &moff, &mcnt);
            if (q->wire != DT_F32 && !q->buf16) cpu_cast_16_to_f32(q->wire, q->wire16 + moff, q->buf + moff, mcnt);
            q->phase = PHASE_DONE;
            req_log_end(e, q, 1);
            return 1;
        }
        if ((*st = req_post_phase(e, q, PHASE_GATHER))) {
            q->phase = PHASE_DONE;
            req_log_end(e, q, 0);
            return 1;
        }
        return 0;
    }
    if (q->wire != DT_F32 && !q->buf16) cpu_cast_16_to_f32(q->wire, q->wire16, q->buf, q->count);
    q->phase = PHASE_DONE;
    req_log_end(e, q, 1);
    return 1;
}
