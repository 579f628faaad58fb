/*
 * engine.c - the communication engine (see engine.h): the communication thread that drives the
 * requests (engine_req.c: a request's phases over MPI, the rank-ordered allreduce), starting and
 * waiting for them, and the watchdog.
 *
 * The watchdog knows exactly who is missing: a receive that has not completed names the peer
 * that has not sent. A request older than the deadline is reported (sequence number, bucket,
 * bytes, phase, age, the ranks not heard from: engine_expire.c) and the job is aborted with
 * MPI_Abort, so mpirun or srun ends every process instead of leaving them hanging.
 */
#include "collectives/engine_impl.h"
#include "collectives/rank_names.h"
#include "collectives/roll_peers.h"
#include "collectives/ctx_comm.h"
#include "collectives/comm_dup.h"
#include "base/abort_guard.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "base/thread_stack.h"
#include "base/trace.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int engine_threaded(const engine *e) { return e->threaded; }

void engine_set_chain(engine *e, size_t seg_elems, size_t min_bytes)
{
    if (seg_elems) e->chain_seg = seg_elems;
    if (min_bytes) e->chain_min_bytes = min_bytes;
}

const char *engine_algo_name(const engine *e, size_t count)
{
    const int a = engine_pick_algo(e, REQ_ALLREDUCE, count, DT_F32);
    return a == ALGO_NONE ? "none" : a == ALGO_MPI ? "mpi" : a == ALGO_CHAIN ? "chain" : "direct";
}

/* The nodes (ranks sharing memory, MPI_COMM_TYPE_SHARED) and whether each node's ranks are
 * contiguous in the world (block placement: what srun and mpirun do by default), where the chain
 * crosses each node boundary once. Collective. On any failure: one node, which keeps the direct
 * algorithm. */
static void engine_topology(engine *e)
{
    e->nodes = 1;
    e->block = 1;
    e->node_ranks = e->size;
    MPI_Comm local;
    if (MPI_Comm_split_type(e->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS) return;
    /* A node's ranks are contiguous when its highest world rank - its lowest + 1 is its size. */
    int lsize = 0, lo = e->rank, hi = e->rank;
    MPI_Comm_size(local, &lsize);
    int rc = MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, local);
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, local);
    MPI_Comm_free(&local);
    /* Every rank takes part below, also one whose step above failed (it counts as a failure for
     * all, and all keep one node). */
    int v[3] = {rc == MPI_SUCCESS && lo == e->rank, rc == MPI_SUCCESS && hi - lo + 1 == lsize, rc == MPI_SUCCESS};
    int sum = 0, mins[2] = {v[1], v[2]}, out[2] = {0, 0}, most = 0;
    if (MPI_Allreduce(&v[0], &sum, 1, MPI_INT, MPI_SUM, e->comm) != MPI_SUCCESS ||
        MPI_Allreduce(mins, out, 2, MPI_INT, MPI_MIN, e->comm) != MPI_SUCCESS ||
        MPI_Allreduce(&lsize, &most, 1, MPI_INT, MPI_MAX, e->comm) != MPI_SUCCESS || !out[1])
        return;
    e->nodes = sum;
    e->block = out[0];
    e->node_ranks = most;
}
int engine_rank(const engine *e) { return e->rank; }
int engine_size(const engine *e) { return e->size; }
void engine_set_ctx(engine *e, const dt_ctx *ctx) { e->ctx = ctx; }

/* The oldest of requests [e->done, seq) not finished, or NULL: the one the watchdog watches. It may
 * lie past e->done: the communication thread posts every request queued when it woke before it
 * counts the finished ones, so when it is blocked in the MPI_Allreduce of the third of a batch, the
 * first two are finished yet e->done has not moved past them. A threaded engine's caller holds mu. */
static req *oldest_unfinished(engine *e, uint64_t seq)
{
    for (uint64_t i = e->done; i < seq; i++) {
        req *q = &e->reqs[i % ENGINE_MAX_REQS];
        if (q->phase != PHASE_DONE) return q;
    }
    return NULL;
}

/* While this rank waits: answers a probe, and when another rank has timed out first (told on the
 * board, collectives/roll_peers.h), logs its verdict as this rank's own and ends the job, so every
 * rank's output names the missing ranks, whichever collective it waits in. */
static void engine_listen(engine *e)
{
    int from = -1;
    const char *told = roll_board_listen(ctx_board(e->ctx), &from);
    if (!told) return;
    if (!roll_board_claim()) roll_board_wait_end(); /* this rank's other thread says why */
    char teller[160];
    rank_names_ctx(e->ctx, &from, 1, teller, sizeof teller);
    const req *open = oldest_unfinished(e, e->next_seq), *q = open ? open : &e->reqs[e->done % ENGINE_MAX_REQS];
    log_msg(LOG_LEVEL_ERROR,
            "watchdog: collective #%llu (%s of bucket %d) has waited %.1f s; rank %s timed out first: %s. "
            "Aborting the job so no rank hangs",
            (unsigned long long)q->seq, engine_req_kind_name(q), q->bucket, clock_now_s() - q->t_start, teller, told);
    if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}

/* A request failed: the first failure is kept with this thread's message (under mu: the
 * communication thread records it while the main thread may be reading it in engine_wait_upto). */
static void engine_fail(engine *e, dt_status st)
{
    status_kept k;
    status_keep(&k);
    pthread_mutex_lock(&e->mu);
    if (!e->failure) {
        e->failure = st;
        e->failure_msg = k;
    }
    pthread_mutex_unlock(&e->mu);
}

/* One pass over the in-flight requests; returns how many finished. Caller holds no lock. */
static int engine_drive(engine *e, uint64_t from, uint64_t to)
{
    int finished = 0;
    double t = clock_now_s();
    for (uint64_t s = from; s < to; s++) {
        req *q = &e->reqs[s % ENGINE_MAX_REQS];
        dt_status st = DT_OK;
        if (engine_req_progress(e, q, &st)) {
            finished++;
            if (st) engine_fail(e, st);
        } else if (q->phase != PHASE_DONE && e->timeout_s > 0 && t - q->t_start > e->timeout_s) {
            engine_expire(e, q, t - q->t_start);
        }
    }
    return finished;
}

/* A number that changes whenever an in-flight request moves on: a phase completed, or a chain's
 * segment passed on (ch_moves). */
static uint64_t progress_mark(const engine *e)
{
    uint64_t m = 0;
    for (uint64_t s = e->done; s < e->posted; s++)
        m += (uint64_t)e->reqs[s % ENGINE_MAX_REQS].phase + e->reqs[s % ENGINE_MAX_REQS].ch_moves;
    return m;
}

static void *engine_thread(void *arg)
{
    engine *e = arg;
    /* A crash on this thread (a stack overflow included) is reported like one on the main thread. */
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "communication thread: %s; a crash on it may go unreported", dt_last_error());
    /* The kernel's default 50 us timer slack turns each 20 us poll into ~75 us: a small allreduce,
     * which needs a few polls, then took ~275 us instead of ~90 us (measured). */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    double last_progress = clock_now_s();
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && e->done == e->next_seq) pthread_cond_wait(&e->cv_work, &e->mu);
        if (e->stop && e->done == e->next_seq) break;
        uint64_t to_post = e->next_seq, posted_before = e->posted;
        pthread_mutex_unlock(&e->mu);
        /* Post what the main thread queued, in order. */
        while (e->posted < to_post) {
            req *q = &e->reqs[e->posted % ENGINE_MAX_REQS];
            dt_status st = engine_req_post(e, q);
            if (st) {
                engine_fail(e, st);
                q->phase = PHASE_DONE;
            }
            e->posted++;
        }
        /* Requests finish in any order; count the leading finished ones as done. */
        const uint64_t phases = progress_mark(e);
        engine_drive(e, e->done, e->posted);
        const uint64_t phases_after = progress_mark(e);
        double t = clock_now_s();
        /* Spin while things move (new requests, a phase completed); sleep once they stall. */
        if (phases_after != phases || e->posted != posted_before) last_progress = t;
        pthread_mutex_lock(&e->mu);
        uint64_t before = e->done;
        while (e->done < e->posted && e->reqs[e->done % ENGINE_MAX_REQS].phase == PHASE_DONE) e->done++;
        if (e->done != before) pthread_cond_broadcast(&e->cv_done);
        if ((e->done < e->posted || e->posted < e->next_seq) && t - last_progress > ENGINE_SPIN_S) {
            /* Nothing moved for a while: sleep briefly, leaving the core to compute. */
            pthread_mutex_unlock(&e->mu);
            struct timespec ts = {0, ENGINE_POLL_NS};
            nanosleep(&ts, NULL);
            pthread_mutex_lock(&e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

dt_status engine_prepare(MPI_Comm world, double timeout_s, int use_thread, dt_allreduce_algo algo, engine **out)
{
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return status_set_error(DT_ERR_NOMEM, "out of memory for the communication engine");
    e->comm = MPI_COMM_NULL;
    /* First, so that engine_destroy may run from every failure below. */
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv_work, NULL);
    /* The main thread's watchdog wakes on the monotonic clock: a stepped wall clock (NTP) must
     * neither delay nor hasten it. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv_done, &ca);
    pthread_condattr_destroy(&ca);
    /* The duplicate engine_connect makes has world's ranks and size. */
    MPI_Comm_rank(world, &e->rank);
    MPI_Comm_size(world, &e->size);
    e->timeout_s = timeout_s;
    e->use_thread = use_thread;
    e->algo = algo;
    e->chain_seg = ENGINE_CHAIN_SEG;
    e->chain_min_bytes = ENGINE_CHAIN_MIN_BYTES;
    e->nscratch = ENGINE_MAX_REQS;
    e->scratch = calloc((size_t)e->nscratch, sizeof *e->scratch);
    e->scratch_n = calloc((size_t)e->nscratch, sizeof *e->scratch_n);
    e->scratch16 = calloc((size_t)e->nscratch, sizeof *e->scratch16);
    e->scratch16_n = calloc((size_t)e->nscratch, sizeof *e->scratch16_n);
    int nmr = e->size > 1 ? 2 * (e->size - 1) : 1;
    e->chain = calloc((size_t)e->nscratch, sizeof *e->chain);
    int ok = e->scratch && e->scratch_n && e->scratch16 && e->scratch16_n && e->chain;
    for (int i = 0; ok && i < ENGINE_MAX_REQS; i++) {
        e->reqs[i].mr = malloc((size_t)nmr * sizeof(MPI_Request));
        e->reqs[i].phase = PHASE_DONE;
        ok = e->reqs[i].mr != NULL;
    }
    if (!ok) {
        engine_destroy(e);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the communication engine");
    }
    *out = e;
    return DT_OK;
}

dt_status engine_connect(engine *e, MPI_Comm world)
{
    /* Under the deadline: the dup comes before any request the watchdog can see. */
    dt_status s = comm_dup_bounded(world, e->timeout_s, "MPI_Comm_dup making the communication engine",
                                   "a rank has not reached it (it stopped or died, or creates its reducers in another "
                                   "order than the others)",
                                   &e->comm);
    if (s) return s;
    MPI_Comm_set_errhandler(e->comm, MPI_ERRORS_RETURN);
    engine_topology(e);
    int provided = 0;
    MPI_Query_thread(&provided);
    e->threaded = provided == MPI_THREAD_MULTIPLE && e->use_thread;
    if (e->threaded && pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
        log_msg(LOG_LEVEL_WARN, "could not start the communication thread; communication progresses inline");
        e->threaded = 0;
    }
    char topo[160];
    if (e->algo == DT_ALLREDUCE_AUTO)
        snprintf(topo, sizeof topo, "%d node%s%s: %s", e->nodes, e->nodes == 1 ? "" : "s",
                 e->nodes > 1 ? (e->block ? ", ranks in blocks" : ", ranks interleaved") : "",
                 engine_chain_pays(e) ? "large fp32 buckets by the pipelined chain, small ones direct"
                                      : "fp32 buckets direct");
    else
        snprintf(topo, sizeof topo, "%d node%s: every fp32 bucket %s (DTRAIN_ALLREDUCE=%s)", e->nodes,
                 e->nodes == 1 ? "" : "s", e->algo == DT_ALLREDUCE_CHAIN ? "by the pipelined chain" : "direct",
                 dt_allreduce_algo_name(e->algo));
    log_msg0(LOG_LEVEL_INFO, "communication engine: %s, timeout %.0f s, %s",
             e->threaded ? "communication thread" : "inline (no MPI_THREAD_MULTIPLE, or DTRAIN_COMM_THREAD=0)",
             e->timeout_s, topo);
    return DT_OK;
}

dt_status engine_create(MPI_Comm world, double timeout_s, int use_thread, dt_allreduce_algo algo, engine **out)
{
    *out = NULL;
    engine *e = NULL;
    dt_status s = engine_prepare(world, timeout_s, use_thread, algo, &e);
    if (!s) s = engine_connect(e, world);
    if (s) {
        engine_destroy(e);
        return s;
    }
    *out = e;
    return DT_OK;
}

int engine_mpi_finalized(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    return finalized;
}

void engine_destroy(engine *e)
{
    if (!e) return;
    if (e->threaded) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_broadcast(&e->cv_work);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv_work);
    pthread_cond_destroy(&e->cv_done);
    for (int i = 0; i < ENGINE_MAX_REQS; i++) free(e->reqs[i].mr);
    for (int i = 0; e->scratch && i < e->nscratch; i++) free(e->scratch[i]);
    for (int i = 0; e->scratch16 && i < e->nscratch; i++) free(e->scratch16[i]);
    for (int i = 0; e->chain && i < e->nscratch; i++) {
        free(e->chain[i].mr);
        free(e->chain[i].arrive);
    }
    free(e->chain);
    free(e->scratch);
    free(e->scratch_n);
    free(e->scratch16);
    free(e->scratch16_n);
    if (e->comm != MPI_COMM_NULL && !engine_mpi_finalized()) MPI_Comm_free(&e->comm);
    free(e);
}

static dt_status engine_start_any(engine *e, req_kind kind, float *buf, uint16_t *buf16, size_t count, dt_redop op,
                                  int bucket, dt_dtype wire)
{
    if (wire != DT_F32 && wire != DT_F16 && wire != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "unknown wire type %d (use DT_F32, DT_F16 or DT_BF16)", (int)wire);
    if (bucket < 0 || bucket >= e->nscratch)
        return status_set_error(DT_ERR_INVALID_ARG, "bucket id %d is outside 0..%d", bucket, e->nscratch - 1);
    if (count / (size_t)e->size + 1 > (size_t)2147483647)
        return status_set_error(DT_ERR_INVALID_ARG, "bucket %d of %zu elements is too large: use a smaller --bucket-mb",
                                bucket, count);
    if (e->threaded) pthread_mutex_lock(&e->mu);
    if (e->next_seq - e->done >= ENGINE_MAX_REQS) {
        if (e->threaded) pthread_mutex_unlock(&e->mu);
        return status_set_error(DT_ERR_INVALID_ARG, "more than %d collectives in flight", ENGINE_MAX_REQS);
    }
    req *q = &e->reqs[e->next_seq % ENGINE_MAX_REQS];
    q->kind = kind;
    q->algo = engine_pick_algo(e, kind, count, wire);
    q->buf = buf;
    q->buf16 = buf16;
    q->count = count;
    q->op = op;
    q->bucket = bucket;
    q->wire = wire;
    q->seq = e->next_seq;
    q->phase = PHASE_QUEUED;
    q->t_start = clock_now_s();
    q->t_post_ns = trace_now_ns();
    e->next_seq++;
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "engine: start #%llu %s of bucket %d, %zu elements, %zu bytes %s",
                (unsigned long long)q->seq, engine_req_kind_name(q), bucket, count, engine_req_wire_bytes(q),
                dt_dtype_name(wire));
    if (e->threaded) {
        pthread_cond_signal(&e->cv_work);
        pthread_mutex_unlock(&e->mu);
        return DT_OK;
    }
    dt_status st = engine_req_post(e, q);
    e->posted++;
    if (st) {
        q->phase = PHASE_DONE;
        return st;
    }
    return DT_OK;
}

dt_status engine_start(engine *e, float *buf, size_t count, dt_redop op, int bucket, dt_dtype wire)
{
    return engine_start_any(e, REQ_ALLREDUCE, buf, NULL, count, op, bucket, wire);
}

dt_status engine_start16(engine *e, uint16_t *buf, size_t count, dt_redop op, int bucket, dt_dtype t)
{
    if (t != DT_F16 && t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "16-bit bucket of type %d: use DT_F16 or DT_BF16", (int)t);
    return engine_start_any(e, REQ_ALLREDUCE, NULL, buf, count, op, bucket, t);
}

dt_status engine_start_reduce_scatter(engine *e, float *buf, uint16_t *buf16, size_t count, dt_redop op, int bucket,
                                      dt_dtype wire)
{
    if (buf16 && wire != DT_F16 && wire != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "16-bit bucket of type %d: use DT_F16 or DT_BF16", (int)wire);
    return engine_start_any(e, REQ_REDUCE_SCATTER, buf16 ? NULL : buf, buf16, count, op, bucket, wire);
}

dt_status engine_start_allgather(engine *e, float *buf, size_t count, int bucket)
{
    return engine_start_any(e, REQ_ALLGATHER, buf, NULL, count, DT_SUM, bucket, DT_F32);
}

void engine_poke(engine *e)
{
    if (e->threaded || e->done == e->posted) return;
    engine_drive(e, e->done, e->posted);
    while (e->done < e->posted && e->reqs[e->done % ENGINE_MAX_REQS].phase == PHASE_DONE) e->done++;
}

uint64_t engine_started(const engine *e) { return e->next_seq; }

dt_status engine_wait_all(engine *e) { return engine_wait_upto(e, e->next_seq); }

dt_status engine_wait_upto(engine *e, uint64_t seq)
{
    if (seq > e->next_seq) seq = e->next_seq;
    if (e->threaded) {
        pthread_mutex_lock(&e->mu);
        while (e->done < seq) {
            /* The communication thread cannot watch a request it is blocked in (PHASE_MPI): this
             * thread does, waking every 100 ms. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&e->cv_done, &e->mu, &ts);
            req *q = oldest_unfinished(e, seq);
            const double age = q ? clock_now_s() - q->t_start : 0;
            if (q && q->phase == PHASE_MPI && e->timeout_s > 0 && age > e->timeout_s) engine_expire(e, q, age);
            if (e->done < seq) engine_listen(e);
        }
        const dt_status failed = e->failure;
        status_kept why = {.msg = ""};
        if (failed) why = e->failure_msg;
        pthread_mutex_unlock(&e->mu);
        return failed ? status_restore(failed, &why) : DT_OK;
    } else {
        /* Nothing else to do on this thread: poll without sleeping, listening every 100 ms. */
        for (double next = clock_now_s() + 0.1; e->done < seq;) {
            engine_poke(e);
            if (clock_now_s() > next) {
                engine_listen(e);
                next = clock_now_s() + 0.1;
            }
        }
    }
    return e->failure ? status_restore(e->failure, &e->failure_msg) : DT_OK;
}
