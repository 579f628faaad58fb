/*
 * engine_expire.c - the communication engine's watchdog verdict (engine.c watches the deadlines):
 * a request past its deadline names the peers that have not delivered, or, when every rank
 * arrived, those that do not answer a probe, then the job is aborted with MPI_Abort, so mpirun or
 * srun ends every process instead of leaving them hanging.
 */
#include "collectives/engine_impl.h"
#include "collectives/rank_names.h"
#include "collectives/roll_peers.h"
#include "collectives/ctx_comm.h"
#include "base/abort_guard.h"
#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* More ranks than fit the message's 512 bytes are not named anyway. */
#define EXPIRE_NAMED 256

/* A chain whose every rank arrived: the data of one segment comes only from a neighbour, who may
 * itself wait for a rank further along, so the neighbour alone names no culprit. A rank that is
 * stopped or cut off does not answer a probe (collectives/roll_peers.h); a waiting one does. On
 * the communication thread the main thread also answers probes (engine_wait_all) on the same
 * board: mu keeps the two apart. Returns how many ranks did not answer (written to ranks). */
static int chain_probe(engine *e, int *ranks, int cap)
{
    if (e->threaded) pthread_mutex_lock(&e->mu);
    const int n = roll_board_probe(ctx_board(e->ctx), ranks, cap);
    if (e->threaded) pthread_mutex_unlock(&e->mu);
    return n;
}

/* The peers request q has not heard from: by MPI_Allreduce (PHASE_MPI), the peer whose arrival
 * message has not come; otherwise each peer whose receive is not done into ranks (up to
 * EXPIRE_NAMED, *more past them), and each whose send is not done into unsent. */
static void scan_peers(const engine *e, req *q, int *ranks, int *nmissing, int *more, int *unsent, int *nunsent)
{
    if (q->phase == PHASE_MPI) {
        int flag = 0;
        MPI_Request_get_status(q->arrive[0], &flag, MPI_STATUS_IGNORE);
        if (!flag) ranks[(*nmissing)++] = 1 - e->rank;
    }
    for (int j = 0, slot = 0; j < e->size && q->phase != PHASE_MPI; j++) {
        if (j == e->rank) continue;
        int flag = 1;
        /* Receives sit at even slots (posted first for each peer). */
        MPI_Request_get_status(q->mr[2 * slot], &flag, MPI_STATUS_IGNORE);
        if (!flag && *nmissing < EXPIRE_NAMED)
            ranks[(*nmissing)++] = j;
        else if (!flag)
            (*more)++;
        /* ...and sends at odd slots: one not done names a peer that stopped taking data. */
        flag = 1;
        MPI_Request_get_status(q->mr[2 * slot + 1], &flag, MPI_STATUS_IGNORE);
        if (!flag && *nunsent < EXPIRE_NAMED) unsent[(*nunsent)++] = j;
        slot++;
    }
}

/* The peer arrived, and MPI does not say why the allreduce stalls: the probe tells a peer that
 * waits (it answers) from one stopped or cut off. This thread holds mu (engine_wait_upto) and the
 * communication thread is blocked in MPI_Allreduce: the board is this thread's. ranks: room for
 * the probe's answer; missing (mn bytes): for the peer's name. */
static void mpi_verdict(engine *e, int *ranks, char *missing, size_t mn, char *verdict, size_t n)
{
    const int peer = 1 - e->rank;
    rank_names_ctx(e->ctx, &peer, 1, missing, mn);
    if (roll_board_probe(ctx_board(e->ctx), ranks, EXPIRE_NAMED) > 0)
        snprintf(verdict, n,
                 "rank %s reached it, yet MPI_Allreduce has not completed, and it does not answer a probe "
                 "within %.1f s: it stopped or died inside it, or the network to it failed",
                 missing, ROLL_PROBE_S);
    else
        snprintf(verdict, n,
                 "rank %s reached it, yet MPI_Allreduce has not completed, though it answers a probe: a rank "
                 "stopped inside it, or the network between the ranks failed",
                 missing);
}

/* Why request q has not completed, into verdict (n bytes): the peers not heard from, with their
 * nodes (after a link fails, the node is what to look at); when every rank arrived, the probe's
 * answer, the chain's silent neighbour, or the sends not done. */
static void expire_verdict(engine *e, req *q, char *verdict, size_t n)
{
    char missing[512] = "";
    int ranks[EXPIRE_NAMED] = {0}, nmissing = 0, more = 0, unsent[EXPIRE_NAMED] = {0}, nunsent = 0;
    scan_peers(e, q, ranks, &nmissing, &more, unsent, &nunsent);
    rank_names_ctx(e->ctx, ranks, nmissing, missing, sizeof missing);
    if (nmissing)
        snprintf(verdict, n, "no data yet from rank(s) %s%s: they are dead, stuck or far behind", missing,
                 more ? " and more" : "");
    else if (q->phase == PHASE_CHAIN && (nmissing = chain_probe(e, ranks, EXPIRE_NAMED)) > 0) {
        snprintf(verdict, n,
                 "every rank reached it, yet the chain has not completed, and rank(s) %s do not answer a probe "
                 "within %.1f s: they stopped or died inside it, or the network to them failed",
                 rank_names_ctx(e->ctx, ranks, nmissing, missing, sizeof missing), ROLL_PROBE_S);
    } else if (q->phase == PHASE_CHAIN && engine_chain_waiting_on(e, q) >= 0) {
        const int peer = engine_chain_waiting_on(e, q);
        rank_names_ctx(e->ctx, &peer, 1, missing, sizeof missing);
        snprintf(verdict, n,
                 "every rank reached it and answers a probe, but the chain's data from rank %s has stopped coming: "
                 "a rank stopped inside it, or the network between the ranks failed",
                 missing);
    } else if (q->phase == PHASE_MPI)
        mpi_verdict(e, ranks, missing, sizeof missing, verdict, n);
    else if (nunsent)
        snprintf(verdict, n,
                 "every rank's data for this phase has come, but this rank's sends to rank(s) %s are not done: "
                 "they stopped receiving, or the network to them failed",
                 rank_names_ctx(e->ctx, unsent, nunsent, missing, sizeof missing));
    else
        snprintf(verdict, n,
                 "every rank's data for this phase has come, but this rank's own sends are "
                 "not done: a peer stopped receiving, or the network between the ranks failed");
}

void engine_expire(engine *e, req *q, double age)
{
    char verdict[768];
    expire_verdict(e, q, verdict, sizeof verdict);
    if (!roll_board_claim()) roll_board_wait_end(); /* this rank's other thread says why */
    log_msg(LOG_LEVEL_ERROR,
            "watchdog: collective #%llu (%s of bucket %d, %zu bytes, %s) has waited %.1f s, past the "
            "%.1f s timeout; %s. Aborting the job so no rank hangs (raise --timeout only if steps are legitimately "
            "this slow)",
            (unsigned long long)q->seq, engine_req_kind_name(q), q->bucket, engine_req_wire_bytes(q),
            q->phase == PHASE_SCATTER  ? "reduce-scatter phase"
            : q->phase == PHASE_GATHER ? "allgather phase"
            : q->phase == PHASE_CHAIN  ? "pipelined chain"
                                       : "by MPI_Allreduce",
            age, e->timeout_s, verdict);
    roll_board_tell(ctx_board(e->ctx), verdict);
    if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}
