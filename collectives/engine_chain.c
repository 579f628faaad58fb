/*
 * engine_chain.c - the engine's pipelined chain allreduce (fp32), for buckets that cross nodes.
 *
 * The bucket is cut into segments. Rank 0 sends each segment of its values to rank 1; rank k adds
 * its own values to the partial sum from rank k-1 (partial + own, the next term of the fold
 * 0, 1, ..., W-1 that the direct algorithm computes in one place) and passes it to rank k+1; rank
 * W-1 completes the sum (and the average) and the finished segment travels back down the chain,
 * W-1 to 0, while later segments still go up. Every element is summed in the same rank order as
 * the direct reduce-scatter, so the result is bitwise the same, whatever the algorithm, the
 * buckets or the segments.
 *
 * Why: with each node's ranks contiguous (block placement) the chain crosses every boundary between
 * two nodes once each way, so a node's link carries the bucket once in each direction (its two
 * directions at once), against 2 (W-1)/W of it in each direction for a ring and (G (W-G)/W) x 2 for
 * the direct algorithm with G ranks a node; and a rank posts a handful of messages a segment
 * instead of 2 (W-1) a phase. The cost is the pipeline's depth: 2 (W-1) hops before the last
 * segment is home, so small buckets stay direct (engine_pick_algo).
 *
 * The watchdog: a chain's data comes only from the neighbours, so a missing rank far up the chain
 * would look like a silent neighbour. Each chain request therefore also exchanges one 8-byte
 * arrival message with every peer (in q->mr, laid out as the direct algorithm's messages: the
 * receive from peer j at even slot 2 slot(j), the send at the odd one), and the verdict names the
 * ranks that never arrived, as for the direct algorithm.
 */
#include "collectives/engine_impl.h"
#include "collectives/coll.h"
#include "base/status.h"
#include "kernels/host_vec.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The segment requests of a chain: four per segment, laid out by kind. */
enum { CH_FWD_RECV, CH_FWD_SEND, CH_BWD_RECV, CH_BWD_SEND, CH_KINDS };

static MPI_Request *ch_req(req *q, int kind, int s) { return &q->chain_mr[(size_t)kind * (size_t)q->nseg + (size_t)s]; }

static void ch_seg(const req *q, int s, size_t *off, size_t *cnt)
{
    *off = (size_t)s * q->seg;
    *cnt = q->count - *off < q->seg ? q->count - *off : q->seg;
}

/* Per-bucket memory of a chain (kept across steps: a step must not allocate): the segment
 * requests and the arrival words. */
static dt_status ch_memory(engine *e, req *q)
{
    const size_t nreq = (size_t)CH_KINDS * (size_t)q->nseg, narr = (size_t)(e->size - 1);
    chain_mem *m = &e->chain[q->bucket];
    if (m->nreq < nreq) {
        free(m->mr);
        m->mr = malloc(nreq * sizeof *m->mr);
        m->nreq = m->mr ? nreq : 0;
    }
    if (!m->arrive) m->arrive = calloc(narr, sizeof *m->arrive);
    if (!m->mr || !m->arrive)
        return status_set_error(DT_ERR_NOMEM, "out of memory for the chain allreduce of bucket %d", q->bucket);
    q->chain_mr = m->mr;
    q->chain_arrive = m->arrive;
    return DT_OK;
}

/* The way up takes the reduce-scatter's tag, the way down the allgather's (engine_tag). */
static int ch_tag(const req *q, int backward) { return engine_tag(q->seq, backward ? PHASE_GATHER : PHASE_SCATTER); }

dt_status engine_chain_post(engine *e, req *q, float *scratch)
{
    const int W = e->size, me = e->rank;
    q->nseg = (int)((q->count + q->seg - 1) / q->seg);
    if (q->nseg == 0) q->nseg = 1; /* an empty bucket: one empty segment, still a handshake */
    dt_status s = ch_memory(e, q);
    if (s) return s;
    q->scratch = scratch;
    for (size_t i = 0; i < (size_t)CH_KINDS * (size_t)q->nseg; i++) q->chain_mr[i] = MPI_REQUEST_NULL;
    q->ch_fold = q->ch_bwd_post = q->ch_bwd_fwd = 0;
    q->phase = PHASE_CHAIN;
    int rc = MPI_SUCCESS;
    /* The roll call: one word to and from every peer (see the top of this file). */
    q->nmr = 0;
    q->arrive_in = q->seq;
    for (int j = 0, slot = 0; j < W && rc == MPI_SUCCESS; j++) {
        if (j == me) continue;
        rc = MPI_Irecv(&q->chain_arrive[slot], 1, MPI_UINT64_T, j, ENGINE_ARRIVE_TAG, e->comm, &q->mr[q->nmr++]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(&q->arrive_in, 1, MPI_UINT64_T, j, ENGINE_ARRIVE_TAG, e->comm, &q->mr[q->nmr++]);
        slot++;
    }
    if (rc == MPI_SUCCESS && coll_test_hang("engine", me, q->seq)) {
        /* The test hook (collectives/coll.h): arrived, then frozen like a stopped process, which
         * answers no probe. Its arrival words go out first. */
        for (int i = 1; i < q->nmr; i += 2) MPI_Wait(&q->mr[i], MPI_STATUS_IGNORE);
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        raise(SIGSTOP);
    }
    /* Rank 0 starts every segment up the chain; the others take every partial sum as it comes
     * (receives matched in order: MPI does not let messages of one sender and tag overtake). */
    for (int k = 0; k < q->nseg && rc == MPI_SUCCESS; k++) {
        size_t off, cnt;
        ch_seg(q, k, &off, &cnt);
        if (me == 0)
            rc = MPI_Isend(q->buf + off, (int)cnt, MPI_FLOAT, 1, ch_tag(q, 0), e->comm, ch_req(q, CH_FWD_SEND, k));
        else
            rc =
                MPI_Irecv(scratch + off, (int)cnt, MPI_FLOAT, me - 1, ch_tag(q, 0), e->comm, ch_req(q, CH_FWD_RECV, k));
    }
    if (rc != MPI_SUCCESS)
        return status_set_error(DT_ERR_MPI,
                                "posting the chain of collective #%llu (bucket %d) failed: a peer may have died",
                                (unsigned long long)q->seq, q->bucket);
    return DT_OK;
}

static int ch_test(MPI_Request *r, int *rc)
{
    int flag = 0;
    if (*r == MPI_REQUEST_NULL) return 1;
    *rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    return *rc == MPI_SUCCESS && flag;
}

/* partial + own into own (the next term of the rank-ordered fold); the last rank also divides for
 * an average, exactly as the direct algorithm does after its fold. */
static void ch_fold(const engine *e, req *q, size_t off, size_t cnt)
{
    float *own = q->buf + off;
    const float *part = q->scratch + off;
    cpu_add_into(own, part, cnt); /* part + own: IEEE addition commutes, bit for bit */
    if (q->op == DT_AVG && e->rank == e->size - 1) cpu_div_by(own, cnt, (float)e->size);
}

int engine_chain_progress(engine *e, req *q, int *mpi_rc)
{
    const int W = e->size, me = e->rank, last = me == W - 1;
    int rc = MPI_SUCCESS;
    /* Up the chain: fold each partial sum in segment order, pass it on (or, at the end, start it
     * back down). */
    while (me > 0 && q->ch_fold < q->nseg && ch_test(ch_req(q, CH_FWD_RECV, q->ch_fold), &rc)) {
        size_t off, cnt;
        ch_seg(q, q->ch_fold, &off, &cnt);
        ch_fold(e, q, off, cnt);
        if (!last)
            rc = MPI_Isend(q->buf + off, (int)cnt, MPI_FLOAT, me + 1, ch_tag(q, 0), e->comm,
                           ch_req(q, CH_FWD_SEND, q->ch_fold));
        else
            rc = MPI_Isend(q->buf + off, (int)cnt, MPI_FLOAT, me - 1, ch_tag(q, 1), e->comm,
                           ch_req(q, CH_BWD_SEND, q->ch_fold));
        if (rc != MPI_SUCCESS) break;
        q->ch_fold++;
        q->ch_moves++;
    }
    /* Down the chain: a segment's finished sum may land in buf only once its partial sum has left
     * (MPI forbids receiving into a buffer a send still reads). */
    while (rc == MPI_SUCCESS && !last && q->ch_bwd_post < (me == 0 ? q->nseg : q->ch_fold) &&
           ch_test(ch_req(q, CH_FWD_SEND, q->ch_bwd_post), &rc)) {
        size_t off, cnt;
        ch_seg(q, q->ch_bwd_post, &off, &cnt);
        rc = MPI_Irecv(q->buf + off, (int)cnt, MPI_FLOAT, me + 1, ch_tag(q, 1), e->comm,
                       ch_req(q, CH_BWD_RECV, q->ch_bwd_post));
        if (rc == MPI_SUCCESS) q->ch_bwd_post++, q->ch_moves++;
    }
    /* ...and is passed on towards rank 0 as it comes. */
    while (rc == MPI_SUCCESS && !last && q->ch_bwd_fwd < q->ch_bwd_post &&
           ch_test(ch_req(q, CH_BWD_RECV, q->ch_bwd_fwd), &rc)) {
        if (me > 0) {
            size_t off, cnt;
            ch_seg(q, q->ch_bwd_fwd, &off, &cnt);
            rc = MPI_Isend(q->buf + off, (int)cnt, MPI_FLOAT, me - 1, ch_tag(q, 1), e->comm,
                           ch_req(q, CH_BWD_SEND, q->ch_bwd_fwd));
        }
        if (rc == MPI_SUCCESS) q->ch_bwd_fwd++, q->ch_moves++;
    }
    *mpi_rc = rc;
    if (rc != MPI_SUCCESS) return 1;
    const int received_all = last ? q->ch_fold == q->nseg : q->ch_bwd_fwd == q->nseg;
    if (!received_all) return 0;
    /* Every segment is home: done once every send and the roll call have completed. */
    int flag = 0;
    if ((rc = MPI_Testall(CH_KINDS * q->nseg, q->chain_mr, &flag, MPI_STATUSES_IGNORE)) != MPI_SUCCESS || !flag) {
        *mpi_rc = rc;
        return rc != MPI_SUCCESS;
    }
    rc = MPI_Testall(q->nmr, q->mr, &flag, MPI_STATUSES_IGNORE);
    *mpi_rc = rc;
    return rc != MPI_SUCCESS || flag;
}

/* The segment whose data this rank waits for, and from whom, for the watchdog: -1 when none. */
int engine_chain_waiting_on(const engine *e, const req *q)
{
    const int me = e->rank;
    if (me > 0 && q->ch_fold < q->nseg) return me - 1;
    if (me < e->size - 1 && q->ch_bwd_fwd < q->nseg) return me + 1;
    return -1;
}
