/*
 * engine_impl.h - what the two halves of the communication engine share: a request and the
 * engine's state. engine_req.c moves one request through its phases over MPI; engine.c owns the
 * engine (the communication thread, the watchdog, starting and waiting), engine_expire.c says the
 * watchdog's verdict. Nothing else includes it.
 */
#ifndef DT_COLLECTIVES_ENGINE_IMPL_H
#define DT_COLLECTIVES_ENGINE_IMPL_H

#include "collectives/engine.h"
#include "collectives/engine_policy.h"
#include "base/status.h"

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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
    PHASE_MPI = 4,     /* inside a blocking MPI_Allreduce on the communication thread */
    PHASE_CHAIN = 5    /* the pipelined chain's messages in flight (engine_chain.c) */
} req_phase;

/* How a request travels (engine_pick_algo): nothing (one rank), the rank-ordered direct
 * reduce-scatter + allgather, the pipelined chain, or MPI_Allreduce (2 ranks). */
typedef enum req_algo { ALGO_NONE = 0, ALGO_DIRECT = 1, ALGO_CHAIN = 2, ALGO_MPI = 3 } req_algo;

/* ENGINE_CHAIN_SEG and ENGINE_CHAIN_MIN_BYTES: collectives/engine_policy.h. */

/* A bucket's chain memory, kept across steps: 4 requests a segment, one arrival word a peer. */
typedef struct chain_mem {
    MPI_Request *mr;
    size_t nreq;
    uint64_t *arrive;
} chain_mem;

/* What a request does: the whole allreduce, or one of its halves (engine.h). */
typedef enum req_kind { REQ_ALLREDUCE = 0, REQ_REDUCE_SCATTER = 1, REQ_ALLGATHER = 2 } req_kind;

typedef struct req {
    int kind; /* a req_kind */
    int algo; /* a req_algo, fixed when it is started */
    float *buf;
    size_t count;
    dt_redop op;
    int bucket;
    uint64_t seq;
    uint64_t t_post_ns; /* when it was started, for its trace span */
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
    /* The chain (PHASE_CHAIN): segments of seg elements, their requests (chain_mem), the arrival
     * words from the peers, and how far each direction has got (engine_chain.c). */
    size_t seg;
    int nseg;
    MPI_Request *chain_mr;
    uint64_t *chain_arrive;
    int ch_fold, ch_bwd_post, ch_bwd_fwd;
    _Atomic unsigned ch_moves; /* steps taken, so the driver sees progress within the phase */
} req;

struct engine {
    MPI_Comm comm;
    int rank, size;
    /* The topology (engine_connect): nodes, whether each node's ranks are contiguous, and the
     * algorithm policy with the chain's segment (engine_set_chain). */
    int nodes, block, node_ranks; /* node_ranks: the most ranks on one node */
    dt_allreduce_algo algo;
    size_t chain_seg, chain_min_bytes;
    chain_mem *chain; /* per bucket id */
    double timeout_s;
    int threaded;
    int use_thread; /* engine_prepare's wish, acted on by engine_connect (threaded: what came of it) */
    /* The request ring; in threaded mode guarded by mu. */
    req reqs[ENGINE_MAX_REQS];
    uint64_t next_seq; /* requests started */
    uint64_t posted;   /* requests the driver has posted to MPI */
    uint64_t done;     /* requests finished (in order of completion count) */
    /* The first request that failed, and its message: kept (every later wait returns it, since
     * later requests may have failed too and MPI's state after a failure is not to be trusted);
     * in threaded mode written and read under mu. */
    dt_status failure;
    status_kept failure_msg;
    /* Scratch per bucket id, kept across steps (a step must not allocate). */
    void **scratch; /* fp32 receive buffers */
    size_t *scratch_n;
    void **scratch16; /* 16-bit wire copies */
    size_t *scratch16_n;
    int nscratch;
    const dt_ctx *ctx; /* whose trace records the allreduces (engine_set_ctx), or NULL */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int stop;
};

/* The MPI tag of a request's messages in a phase: the reduce-scatter's (or the chain's way up) for
 * PHASE_SCATTER, the allgather's (or the chain's way down) for PHASE_GATHER. */
int engine_tag(uint64_t seq, req_phase phase);

/* engine_req.c: posts the messages of a request's current phase (DT_ERR_MPI when MPI refuses
 * them); moves a request on when its phase's messages are done, returning 1 when it finished now
 * (*st its outcome); the bytes a request puts on the wire. */
dt_status engine_req_post(engine *e, req *q);
int engine_req_progress(engine *e, req *q, dt_status *st);
size_t engine_req_wire_bytes(const req *q);
/* "allreduce", "reduce-scatter" or "allgather", for messages. */
const char *engine_req_kind_name(const req *q);
/* The algorithm of a request of this kind, count and wire type (a req_algo). */
int engine_pick_algo(const engine *e, int kind, size_t count, dt_dtype wire);
/* Whether the chain sends fewer bytes over the busiest node's link than the direct algorithm
 * (engine_policy_chain_pays on this engine's topology). */
int engine_chain_pays(const engine *e);

/* engine_chain.c: posts a chain request (scratch: count floats for the partial sums); moves it on,
 * returning 1 when it finished or failed (*mpi_rc not MPI_SUCCESS); the neighbour whose data this
 * rank waits for (-1: none). */
dt_status engine_chain_post(engine *e, req *q, float *scratch);
int engine_chain_progress(engine *e, req *q, int *mpi_rc);
int engine_chain_waiting_on(const engine *e, const req *q);

/* engine_expire.c: the watchdog's verdict on request q, past the deadline after age seconds: logs
 * which peers have not delivered and aborts the job. Never returns. In threaded mode a request in
 * PHASE_MPI is watched by the main thread, holding mu; a chain by the communication thread, not
 * holding it. */
void engine_expire(engine *e, req *q, double age);

#endif
