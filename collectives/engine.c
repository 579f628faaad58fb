/*
 * engine.c - the communication engine (see engine.h): rank-ordered allreduce over point-to-point
 * messages, a communication thread that drives it, and the watchdog.
 *
 * A request goes through two phases. Reduce-scatter: rank r sends part j of its bucket to rank j
 * and receives part r from every other rank, then adds the W copies of part r in rank order.
 * Allgather: rank r sends its summed part to everyone and receives theirs in place. Tags carry
 * the sequence number, so several buckets can be in flight at once.
 *
 * The watchdog knows exactly who is missing: a receive that has not completed names the peer
 * that has not sent. A request older than the deadline is reported (sequence number, bucket,
 * bytes, phase, age, the ranks not heard from) and the job is aborted with MPI_Abort, so mpirun or
 * srun ends every process instead of leaving them hanging.
 */
#include "collectives/engine.h"
#include "collectives/coll.h"
#include "base/clock.h"
#include "kernels/cast.h"
#include "base/log.h"
#include "base/status.h"
#include "base/thread_stack.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ENGINE_MAX_REQS 4096                    /* requests in flight at once (buckets of one step) */
#define ENGINE_TAG_SPAN 8192                    /* sequence numbers map to tags 2*(seq % span) + phase */
#define ENGINE_POLL_NS 20000                    /* the communication thread's sleep between polls */
#define ENGINE_SPIN_S 30e-6                     /* ...after polling without sleeping for this long */
#define ENGINE_BLOCK 1024                       /* elements summed at a time in the reduction */
#define ENGINE_ARRIVE_TAG (2 * ENGINE_TAG_SPAN) /* the arrival messages, beside every data tag */

/* Where a request stands. Written by whoever drives it (the communication thread, or the main
 * thread inline) and read by the main thread's watchdog in engine_wait_all while the driver runs,
 * so the phase and the start time are atomics. */
typedef enum req_phase {
    PHASE_QUEUED = 0,  /* started, not posted to MPI yet */
    PHASE_SCATTER = 1, /* reduce-scatter messages in flight */
    PHASE_GATHER = 2,  /* allgather messages in flight */
    PHASE_DONE = 3,    /* finished (or failed): the slot may be reused */
    PHASE_MPI = 4      /* inside a blocking MPI_Allreduce on the communication thread */
} req_phase;

typedef struct req {
    float *buf;
    size_t count;
    dt_redop op;
    int bucket;
    uint64_t seq;
    _Atomic double t_start;
    _Atomic int phase; /* a req_phase */
    MPI_Request *mr;   /* 2 (W-1) requests of the current phase */
    int nmr;
    float *scratch;   /* (W-1) x my part: the other ranks' copies of my part */
    dt_dtype wire;    /* what travels: fp32, or 16-bit values */
    uint16_t *buf16;  /* the bucket itself when it is kept in 16 bits (then wire is its type) */
    uint16_t *wire16; /* 16-bit wire: the bucket's 16-bit values (buf16, or a rounded copy of buf) */
    uint16_t *recv16; /* 16-bit wire: (W-1) x my part received */
    /* MPI_Allreduce (PHASE_MPI): the arrival messages exchanged with the peer before it, so the
     * watchdog can tell a peer that never came from one that stopped inside the allreduce.
     * [0] the receive, [1] the send; guarded by mu while the watchdog may look at them. */
    MPI_Request arrive[2];
    uint64_t arrive_in;
} req;

struct engine {
    MPI_Comm comm;
    int rank, size;
    double timeout_s;
    int threaded;
    /* The request ring; in threaded mode guarded by mu. */
    req reqs[ENGINE_MAX_REQS];
    uint64_t next_seq; /* requests started */
    uint64_t posted;   /* requests the driver has posted to MPI */
    uint64_t done;     /* requests finished (in order of completion count) */
    dt_status failure;
    char failure_msg[1024];
    /* Scratch per bucket id, kept across steps (a step must not allocate). */
    void **scratch; /* fp32 receive buffers */
    size_t *scratch_n;
    void **scratch16; /* 16-bit wire copies */
    size_t *scratch16_n;
    int nscratch;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int stop;
};

int engine_threaded(const engine *e) { return e->threaded; }

/* Part j of a bucket of n elements split among size ranks. */
static void part_of(size_t n, int j, int size, size_t *off, size_t *cnt)
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

/* MPI counts are ints: parts beyond INT_MAX elements would need splitting; refuse them clearly. */
static int tag_of(uint64_t seq, req_phase phase) { return (int)(2 * (seq % ENGINE_TAG_SPAN) + (uint64_t)phase - 1); }

static dt_status req_post_phase(engine *e, req *q, req_phase phase)
{
    const int W = e->size, me = e->rank;
    size_t moff, mcnt;
    part_of(q->count, me, W, &moff, &mcnt);
    q->nmr = 0;
    q->phase = phase;
    int tag = tag_of(q->seq, phase);
    for (int j = 0; j < W; j++) {
        if (j == me) continue;
        size_t joff, jcnt;
        part_of(q->count, j, W, &joff, &jcnt);
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

/* Two ranks, fp32, a communication thread: the request goes by MPI_Allreduce (see req_post). */
static int req_by_mpi(const engine *e, const req *q) { return e->size == 2 && e->threaded && q->wire == DT_F32; }

/* The bytes of a request's bucket as it travels. */
static size_t req_wire_bytes(const req *q) { return q->count * (q->wire == DT_F32 ? sizeof(float) : sizeof(uint16_t)); }

/* A debug line when a request has finished (ok) or failed, with its time since it was posted. */
static void req_log_end(const engine *e, const req *q, int ok)
{
    if (!log_enabled(LOG_LEVEL_DEBUG)) return;
    log_msg(LOG_LEVEL_DEBUG, "engine: end #%llu allreduce of bucket %d, %zu elements, %zu bytes %s, %s %s in %.0f us",
            (unsigned long long)q->seq, q->bucket, q->count, req_wire_bytes(q), dt_dtype_name(q->wire),
            e->size == 1       ? "no communication (1 rank)"
            : req_by_mpi(e, q) ? "by MPI_Allreduce"
                               : "rank-ordered",
            ok ? "done" : "failed", (clock_now_s() - q->t_start) * 1e6);
}

static dt_status req_post(engine *e, req *q)
{
    q->t_start = clock_now_s();
    if (e->size == 1) {
        q->phase = PHASE_DONE;
        req_log_end(e, q, 1);
        return DT_OK;
    }
    if (req_by_mpi(e, q)) {
        /* Two ranks: every element is one addition, a + b = b + a, so MPI's own allreduce is as
         * deterministic as the rank-ordered one; its blocking form is the fastest transport here
         * (7 MiB: 1.4 ms, against 1.7 ms rank-ordered and 3 ms for MPI_Iallreduce), and this
         * thread exists to block. The main thread watches the deadline meanwhile (engine_wait_all). */
        const int peer = 1 - e->rank;
        pthread_mutex_lock(&e->mu);
        q->phase = PHASE_MPI;
        int rc = MPI_Irecv(&q->arrive_in, 1, MPI_UINT64_T, peer, ENGINE_ARRIVE_TAG, e->comm, &q->arrive[0]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(&q->seq, 1, MPI_UINT64_T, peer, ENGINE_ARRIVE_TAG, e->comm, &q->arrive[1]);
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
        if (q->op == DT_AVG)
            for (size_t i = 0; i < q->count; i++) q->buf[i] /= 2.0f;
        q->phase = PHASE_DONE;
        req_log_end(e, q, 1);
        return DT_OK;
    }
    size_t moff, mcnt;
    part_of(q->count, e->rank, e->size, &moff, &mcnt);
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
    part_of(q->count, me, W, &moff, &mcnt);
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
                if (k > 0)
                    for (size_t i = 0; i < n; i++) acc[i] += tmp[i];
            }
            if (q->op == DT_AVG)
                for (size_t i = 0; i < n; i++) acc[i] /= (float)W;
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
                for (size_t i = 0; i < n; i++) acc[i] += src[i];
        }
        if (q->op == DT_AVG)
            for (size_t i = 0; i < n; i++) acc[i] /= (float)W;
        memcpy(own + b, acc, n * sizeof(float));
    }
}

/* Moves a request on when its phase's messages are done. Returns 1 when it finished now. */
static int req_progress(engine *e, req *q, dt_status *st)
{
    if (q->phase == PHASE_DONE) return 0;
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

/* The watchdog: which peers have not delivered, then abort the job. Never returns. In threaded
 * mode a request in PHASE_MPI is watched by the main thread, holding mu. */
static void engine_expire(engine *e, req *q, double age)
{
    char missing[512] = "", verdict[768];
    size_t used = 0;
    if (q->phase == PHASE_MPI) {
        int flag = 0;
        MPI_Request_get_status(q->arrive[0], &flag, MPI_STATUS_IGNORE);
        if (!flag) used = (size_t)snprintf(missing, sizeof missing, "%d", 1 - e->rank);
    }
    for (int j = 0, slot = 0; j < e->size && q->phase != PHASE_MPI; j++) {
        if (j == e->rank) continue;
        int flag = 1;
        /* Receives sit at even slots (posted first for each peer). */
        MPI_Request_get_status(q->mr[2 * slot], &flag, MPI_STATUS_IGNORE);
        if (!flag && used < sizeof missing - 16)
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? "," : "", j);
        slot++;
    }
    if (used)
        snprintf(verdict, sizeof verdict, "no data yet from rank(s) %s: they are dead, stuck or far behind", missing);
    else if (q->phase == PHASE_MPI)
        snprintf(verdict, sizeof verdict,
                 "rank %d reached it, yet MPI_Allreduce has not completed: a rank stopped "
                 "or died inside it, or the network between the ranks failed",
                 1 - e->rank);
    else
        snprintf(verdict, sizeof verdict,
                 "every rank's data for this phase has come, but this rank's own sends are "
                 "not done: a peer stopped receiving, or the network between the ranks failed");
    log_msg(LOG_LEVEL_ERROR,
            "watchdog: collective #%llu (allreduce of bucket %d, %zu bytes, %s) has waited %.1f s, past the "
            "%.1f s timeout; %s. Aborting the job so no rank hangs (raise --timeout only if steps are legitimately "
            "this slow)",
            (unsigned long long)q->seq, q->bucket, req_wire_bytes(q),
            q->phase == PHASE_SCATTER  ? "reduce-scatter phase"
            : q->phase == PHASE_GATHER ? "allgather phase"
                                       : "by MPI_Allreduce",
            age, e->timeout_s, verdict);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}

/* One pass over the in-flight requests; returns how many finished. Caller holds no lock. */
static int engine_drive(engine *e, uint64_t from, uint64_t to)
{
    int finished = 0;
    double t = clock_now_s();
    for (uint64_t s = from; s < to; s++) {
        req *q = &e->reqs[s % ENGINE_MAX_REQS];
        dt_status st = DT_OK;
        if (req_progress(e, q, &st)) {
            finished++;
            if (st && !e->failure) {
                e->failure = st;
                snprintf(e->failure_msg, sizeof e->failure_msg, "%s", dt_last_error());
            }
        } else if (q->phase != PHASE_DONE && e->timeout_s > 0 && t - q->t_start > e->timeout_s) {
            engine_expire(e, q, t - q->t_start);
        }
    }
    return finished;
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
            dt_status st = req_post(e, q);
            if (st && !e->failure) {
                e->failure = st;
                snprintf(e->failure_msg, sizeof e->failure_msg, "%s", dt_last_error());
                q->phase = PHASE_DONE;
            }
            e->posted++;
        }
        /* Requests finish in any order; count the leading finished ones as done. */
        uint64_t phases = 0;
        for (uint64_t s = e->done; s < e->posted; s++) phases += (uint64_t)e->reqs[s % ENGINE_MAX_REQS].phase;
        engine_drive(e, e->done, e->posted);
        uint64_t phases_after = 0;
        for (uint64_t s = e->done; s < e->posted; s++) phases_after += (uint64_t)e->reqs[s % ENGINE_MAX_REQS].phase;
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

dt_status engine_create(MPI_Comm world, double timeout_s, int use_thread, engine **out)
{
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return status_set_error(DT_ERR_NOMEM, "out of memory for the communication engine");
    e->comm = MPI_COMM_NULL;
    /* First, so that engine_destroy may run from every failure below. */
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv_work, NULL);
    pthread_cond_init(&e->cv_done, NULL);
    if (MPI_Comm_dup(world, &e->comm) != MPI_SUCCESS) {
        engine_destroy(e);
        return status_set_error(DT_ERR_MPI, "MPI_Comm_dup failed creating the communication engine");
    }
    MPI_Comm_set_errhandler(e->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(e->comm, &e->rank);
    MPI_Comm_size(e->comm, &e->size);
    e->timeout_s = timeout_s;
    e->nscratch = ENGINE_MAX_REQS;
    e->scratch = calloc((size_t)e->nscratch, sizeof *e->scratch);
    e->scratch_n = calloc((size_t)e->nscratch, sizeof *e->scratch_n);
    e->scratch16 = calloc((size_t)e->nscratch, sizeof *e->scratch16);
    e->scratch16_n = calloc((size_t)e->nscratch, sizeof *e->scratch16_n);
    int nmr = e->size > 1 ? 2 * (e->size - 1) : 1;
    int ok = e->scratch && e->scratch_n && e->scratch16 && e->scratch16_n;
    for (int i = 0; ok && i < ENGINE_MAX_REQS; i++) {
        e->reqs[i].mr = malloc((size_t)nmr * sizeof(MPI_Request));
        e->reqs[i].phase = PHASE_DONE;
        ok = e->reqs[i].mr != NULL;
    }
    if (!ok) {
        engine_destroy(e);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the communication engine");
    }
    int provided = 0;
    MPI_Query_thread(&provided);
    e->threaded = provided == MPI_THREAD_MULTIPLE && use_thread;
    if (e->threaded && pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
        log_msg(LOG_LEVEL_WARN, "could not start the communication thread; communication progresses inline");
        e->threaded = 0;
    }
    log_msg0(LOG_LEVEL_INFO, "communication engine: %s, timeout %.0f s",
             e->threaded ? "communication thread" : "inline (no MPI_THREAD_MULTIPLE, or DTRAIN_COMM_THREAD=0)",
             timeout_s);
    *out = e;
    return DT_OK;
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
    free(e->scratch);
    free(e->scratch_n);
    free(e->scratch16);
    free(e->scratch16_n);
    if (e->comm != MPI_COMM_NULL) MPI_Comm_free(&e->comm);
    free(e);
}

static dt_status engine_start_any(engine *e, float *buf, uint16_t *buf16, size_t count, dt_redop op, int bucket,
                                  dt_dtype wire)
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
    q->buf = buf;
    q->buf16 = buf16;
    q->count = count;
    q->op = op;
    q->bucket = bucket;
    q->wire = wire;
    q->seq = e->next_seq;
    q->phase = PHASE_QUEUED;
    q->t_start = clock_now_s();
    e->next_seq++;
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "engine: start #%llu allreduce of bucket %d, %zu elements, %zu bytes %s",
                (unsigned long long)q->seq, bucket, count, req_wire_bytes(q), dt_dtype_name(wire));
    if (e->threaded) {
        pthread_cond_signal(&e->cv_work);
        pthread_mutex_unlock(&e->mu);
        return DT_OK;
    }
    dt_status st = req_post(e, q);
    e->posted++;
    if (st) {
        q->phase = PHASE_DONE;
        return st;
    }
    return DT_OK;
}

dt_status engine_start(engine *e, float *buf, size_t count, dt_redop op, int bucket, dt_dtype wire)
{
    return engine_start_any(e, buf, NULL, count, op, bucket, wire);
}

dt_status engine_start16(engine *e, uint16_t *buf, size_t count, dt_redop op, int bucket, dt_dtype t)
{
    if (t != DT_F16 && t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "16-bit bucket of type %d: use DT_F16 or DT_BF16", (int)t);
    return engine_start_any(e, NULL, buf, count, op, bucket, t);
}

void engine_poke(engine *e)
{
    if (e->threaded || e->done == e->posted) return;
    engine_drive(e, e->done, e->posted);
    while (e->done < e->posted && e->reqs[e->done % ENGINE_MAX_REQS].phase == PHASE_DONE) e->done++;
}

dt_status engine_wait_all(engine *e)
{
    if (e->threaded) {
        pthread_mutex_lock(&e->mu);
        while (e->done < e->next_seq) {
            /* The communication thread cannot watch a request it is blocked in (PHASE_MPI): this
             * thread does, waking every 100 ms. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&e->cv_done, &e->mu, &ts);
            req *q = &e->reqs[e->done % ENGINE_MAX_REQS];
            double age = clock_now_s() - q->t_start;
            if (e->done < e->next_seq && q->phase == PHASE_MPI && e->timeout_s > 0 && age > e->timeout_s)
                engine_expire(e, q, age);
        }
        pthread_mutex_unlock(&e->mu);
    } else {
        /* Nothing else to do on this thread: poll without sleeping. */
        while (e->done < e->posted) engine_poke(e);
    }
    if (e->failure) {
        dt_status s = e->failure;
        e->failure = DT_OK;
        return status_set_error(s, "%s", e->failure_msg);
    }
    return DT_OK;
}
