/*
 * coll_mpi_roll.c - the MPI backend's watchdog: every operation is nonblocking underneath and
 * polled against the deadline (mpi_op_wait). A collective does not say which ranks have not
 * joined it, so each one comes with a roll call through rank 0 (roll_post): past the deadline the
 * watchdog names the ranks that never arrived instead of guessing, and ends the job.
 */
#include "collectives/coll_mpi_internal.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_names.h"
#include "collectives/roll_peers.h"
#include "base/abort_guard.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The roll call's tag: point-to-point messages on the backend's own communicator, apart from
 * every collective's traffic (MPI keeps collective and point-to-point matching apart). */
#define ROLL_TAG 7411
/* How long a rank that heard from rank 0 waits past its own deadline for rank 0, which knows who
 * is missing, to report and end the job. */
#define ROLL_GRACE_S 2.0

static const char *const op_names[OP_KINDS] = {"MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Reduce_scatter_block",
                                               "MPI_Allgather"};

const char *mpi_op_name(unsigned long long kind) { return kind < OP_KINDS ? op_names[kind] : "?"; }

/* 1 while this thread polls one of the backend's nonblocking collectives (mpi_op_wait): Open MPI 4.1
 * raises such a collective's failure through MPI_COMM_WORLD's handler, which then lets it return. */
static _Thread_local int own_poll;

static void world_errors(MPI_Comm *comm, int *code, ...)
{
    if (own_poll) return; /* the failing MPI call returns *code to the backend, which reports it */
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(*code, msg, &len);
    log_msg(LOG_LEVEL_ERROR,
            "an MPI call on MPI_COMM_WORLD failed: %s; aborting the job, as MPI_ERRORS_ARE_FATAL would", msg);
    if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(*comm, *code);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}

void coll_mpi_world_errhandler(void)
{
    MPI_Errhandler h;
    if (MPI_Comm_create_errhandler(world_errors, &h) != MPI_SUCCESS) return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, h);
    MPI_Errhandler_free(&h); /* MPI_COMM_WORLD keeps it */
}

dt_status mpi_fail(int rc, const char *what, size_t count)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0, cls = 0;
    MPI_Error_string(rc, msg, &len);
    MPI_Error_class(rc, &cls);
    return status_set_error(DT_ERR_MPI, "%s of %zu elements failed: %s. %s", what, count, msg,
                            cls == MPI_ERR_TRUNCATE
                                ? "Another rank sent more: every rank must call the same collectives in the same "
                                  "order with the same count (a bug in the program)"
                                : "A peer may have died or run out of memory: read the other ranks' messages");
}

static void roll_drop(coll *c);

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
    /* Every slot null first: a post that fails part-way leaves the rest null, not stale or never
     * set, for roll_drop and roll_arrived to read. */
    const int slots = c->rank == 0 ? 2 * (c->size - 1) : 2;
    for (int i = 0; i < slots; i++) st->roll[i] = MPI_REQUEST_NULL;
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
    /* A roll call that could not be posted whole is none: what was posted is dropped, and the
     * operation's failure is its own error (roll_disagrees then compares nothing stale). */
    if (rc != MPI_SUCCESS) roll_drop(c);
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
    if (!roll_board_claim()) roll_board_wait_end(); /* this rank's other thread says why */
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

/* More ranks than fit a verdict's 512 bytes of names are not named anyway. */
#define ROLL_NAMED 256

/* Rank 0's reading of the roll call of collective `count` elements: the ranks whose roll call
 * never arrived into ranks (up to ROLL_NAMED, *more past them), and those that arrived from another
 * collective said into elsewhere (n bytes). Returns the number named in ranks. */
static int roll_scan(coll *c, size_t count, int *ranks, int *more, char *elsewhere, size_t n)
{
    mpi_state *st = c->impl;
    const unsigned long long seq = st->roll_out.seq;
    size_t ne = 0;
    int nm = 0;
    for (int j = 1; j < c->size; j++) {
        if (!roll_arrived(st, j - 1)) {
            if (nm < ROLL_NAMED)
                ranks[nm++] = j;
            else
                (*more)++;
        } else if (st->roll_in[j - 1].seq != seq || st->roll_in[j - 1].kind != st->roll_out.kind ||
                   st->roll_in[j - 1].count != count) {
            const roll_msg *m = &st->roll_in[j - 1];
            if (ne < n - 80)
                ne += (size_t)snprintf(elsewhere + ne, n - ne,
                                       "%srank %d is at #%llu (%s of %llu "
                                       "elements)",
                                       ne ? ", " : "", j, m->seq, mpi_op_name(m->kind), m->count);
        }
    }
    return nm;
}

/* Rank 0's verdict into verdict (n bytes): the ranks that never arrived, those at another
 * collective, or, when every rank arrived, those that do not answer a probe. */
static void hub_verdict(coll *c, size_t count, char *verdict, size_t n)
{
    char missing[512] = "", elsewhere[512] = "";
    int ranks[ROLL_NAMED] = {0}, more = 0;
    int nm = roll_scan(c, count, ranks, &more, elsewhere, sizeof elsewhere);
    rank_names_ctx(c->ctx, ranks, nm, missing, sizeof missing);
    if (nm)
        snprintf(verdict, n,
                 "rank(s) %s%s have not reached it (no word from them): they are dead, stuck "
                 "or far behind%s%s",
                 missing, more ? " and more" : "", elsewhere[0] ? "; " : "", elsewhere);
    else if (elsewhere[0])
        snprintf(verdict, n, "the ranks called different collectives: %s (a bug in the program)", elsewhere);
    else if ((nm = roll_board_probe(ctx_board(c->ctx), ranks, ROLL_NAMED)) > 0)
        snprintf(verdict, n,
                 "every rank reached it, yet it has not completed, and rank(s) %s do not answer a probe "
                 "within %.1f s: they stopped or died inside it, or the network to them failed",
                 rank_names_ctx(c->ctx, ranks, nm, missing, sizeof missing), ROLL_PROBE_S);
    else
        snprintf(verdict, n,
                 "every rank reached it, yet it has not completed, though every rank answers a probe: "
                 "a rank stopped or died inside it, or the network between the ranks failed (MPI does "
                 "not say which rank)");
}

/* The verdict of a rank other than 0 into verdict (n bytes): it hears only from rank 0 (hub, its
 * name), so it can say whether rank 0 reached the collective and when. */
static void peer_verdict(const coll *c, const char *hub, char *verdict, size_t n)
{
    const mpi_state *st = c->impl;
    if (!st->t_hub)
        snprintf(verdict, n,
                 "rank %s has not reached it (no word from it): it is dead, stuck or far "
                 "behind (rank 0 knows about the other ranks; this rank hears only from rank 0)",
                 hub);
    else
        snprintf(verdict, n,
                 "rank %s reached it %.1f s ago, yet neither the collective nor rank 0's verdict has come: "
                 "rank 0 is dead or stuck, or the network between it and this rank failed (this rank hears "
                 "only from rank 0; rank 0's own output names the ranks it missed)",
                 hub, clock_now_s() - st->t_hub);
}

/* A rank other than 0 knows only about rank 0; the probe tells it who else is out of reach (on a
 * node cut off: every rank beyond the dead link), added to verdict (n bytes). A verdict told on
 * the board meanwhile still wins. */
static void add_probed(coll *c, char *verdict, size_t n, const char *what, size_t count, double age)
{
    char missing[512] = "";
    int ranks[ROLL_NAMED] = {0};
    const int nm = roll_board_probe(ctx_board(c->ctx), ranks, ROLL_NAMED);
    if (nm <= 0) return;
    const size_t used = strlen(verdict);
    snprintf(verdict + used, n - used, "; rank(s) %s do not answer a probe within %.1f s",
             rank_names_ctx(c->ctx, ranks, nm, missing, sizeof missing), ROLL_PROBE_S);
    board_wait(c, what, count, age, 0);
}

/* The watchdog's verdict, from the roll call; logs it and ends the job. Never returns. */
static void roll_expire(coll *c, const char *what, size_t count, double age)
{
    mpi_state *st = c->impl;
    const unsigned long long seq = st->roll_out.seq;
    char hub[160], verdict[1400];
    const int root = 0;
    rank_names_ctx(c->ctx, &root, 1, hub, sizeof hub); /* "0 on node1" */
    /* Rank 0 knows who is missing and its deadline may pass a moment after this rank's: its
     * verdict, when it comes in time, says more than this rank could. */
    if (c->rank != 0) board_wait(c, what, count, age, ROLL_VERDICT_S);
    if (st->nroll == 0) /* No roll call: nothing is known about the others. */
        snprintf(verdict, sizeof verdict, "a peer rank is dead, stuck or far behind");
    else if (c->rank == 0)
        hub_verdict(c, count, verdict, sizeof verdict);
    else
        peer_verdict(c, hub, verdict, sizeof verdict);
    if (c->rank != 0) add_probed(c, verdict, sizeof verdict, what, count, age);
    if (!roll_board_claim()) roll_board_wait_end(); /* this rank's other thread says why */
    roll_board_tell(ctx_board(c->ctx), verdict);
    log_msg(LOG_LEVEL_ERROR,
            "watchdog: collective #%llu (%s of %zu elements) has waited %.1f s, past the %.1f s timeout; "
            "%s. Aborting the job so no rank hangs (raise --timeout only if steps are legitimately this slow)",
            seq, what, count, age, c->timeout_s, verdict);
    if (abort_guard_arm(ABORT_GUARD_S, 1, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; if it did, nothing may go on */
}

/* Waits for a nonblocking collective, and the roll call when one is pending, against the
 * deadline: the watchdog of the MPI backend. A rank other than 0 that has heard from rank 0 gives
 * rank 0, which knows who is missing, the time to say so before it ends the job itself. Spins
 * briefly (small collectives finish in microseconds), then polls with short sleeps. */
int mpi_op_wait(coll *c, MPI_Request *r, int kind, size_t count, double start)
{
    mpi_state *st = c->impl;
    int flag = 0, spins = 0;
    for (;;) {
        own_poll = 1;
        int rc = flag ? MPI_SUCCESS : MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        own_poll = 0;
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
        int from = -1;
        const char *told = roll_board_listen(ctx_board(c->ctx), &from);
        /* The clock after the board: a process stopped between the two (a loaded machine, a
         * debugger, SIGSTOP) would otherwise weigh a verdict told while it was stopped against a
         * time from before, and rank 0 far past its deadline would forward a peer's verdict
         * instead of saying its own. */
        const double now = clock_now_s(), age = now - start;
        /* A peer that said it is busy with work of its own (rank 0 writing a checkpoint) is alive:
         * the deadline counts from its last word. */
        const double busy = c->timeout_s > 0 && age > c->timeout_s ? roll_board_busy_seen(ctx_board(c->ctx)) : 0;
        const int expired = c->timeout_s > 0 && now - (busy > start ? busy : start) > c->timeout_s &&
                            !(c->rank != 0 && st->t_hub && now < st->t_hub + c->timeout_s + ROLL_GRACE_S);
        /* Rank 0 past its own deadline with a roll call knows who never arrived; a verdict told
         * meanwhile comes from a rank that hears only from rank 0, and one told while rank 0 was
         * slow to poll (a loaded machine) blames rank 0 itself: rank 0 says its own instead. */
        if (told && !(expired && c->rank == 0 && st->nroll))
            verdict_forwarded(c, told, from, mpi_op_name(kind), count, age);
        if (expired) roll_expire(c, mpi_op_name(kind), count, age);
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
int mpi_op_begin(coll *c, int kind, size_t count, size_t bytes, double *start)
{
    mpi_state *st = c->impl;
    *start = clock_now_s();
    /* The context's communicators serve one thread at a time; the mark stands until mpi_op_end. */
    if (coll_enter(c, mpi_op_name(kind))) return MPI_OP_REFUSED;
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "coll %s: start #%llu %s of %zu elements (%zu bytes)", c->ops->name, st->seq,
                mpi_op_name(kind), count, bytes);
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

/* Whether the roll call shows a rank at another collective than this one (another operation, count
 * or sequence number): rank 0 hears from every rank, another rank from rank 0 alone, and only the
 * messages that have arrived count. Names the first such rank in out. */
static int roll_disagrees(coll *c, char *out, size_t n)
{
    mpi_state *st = c->impl;
    const int nrecv = !st->nroll ? 0 : c->rank == 0 ? c->size - 1 : 1;
    for (int i = 0; i < nrecv; i++) {
        if (!st->roll_done && !roll_arrived(st, i)) continue;
        const roll_msg *m = &st->roll_in[i];
        if (m->seq == st->roll_out.seq && m->kind == st->roll_out.kind && m->count == st->roll_out.count) continue;
        snprintf(out, n, "rank %d called %s of %llu elements as its collective #%llu", c->rank == 0 ? i + 1 : 0,
                 mpi_op_name(m->kind), m->count, m->seq);
        return 1;
    }
    return 0;
}

/* The end of one operation: its status, a debug line with its time; a failure drops the roll call. */
dt_status mpi_op_end(coll *c, int kind, size_t count, size_t bytes, double start, int rc)
{
    mpi_state *st = c->impl;
    if (rc == MPI_OP_REFUSED) return DT_ERR_INVALID_ARG; /* nothing was started; ctx_enter said why */
    coll_leave(c);
    /* The ranks disagreeing is the cause of MPI's failure when there is one; without one it is still
     * an error: the rank whose buffer was the larger gets a short result and MPI_SUCCESS. */
    char other[160];
    const int ok = rc == MPI_SUCCESS;
    dt_status s = DT_OK;
    if (roll_disagrees(c, other, sizeof other))
        s = status_set_error(DT_ERR_MPI,
                             "%s of %zu elements, this rank's collective #%llu, does not match the other ranks': %s. "
                             "Every rank must call the same collectives in the same order with the same count (a "
                             "bug in the program); the buffer holds no usable result",
                             mpi_op_name(kind), count, st->roll_out.seq, other);
    else if (!ok)
        s = mpi_fail(rc, mpi_op_name(kind), count);
    if (!ok) roll_drop(c);
    if (log_enabled(LOG_LEVEL_DEBUG))
        log_msg(LOG_LEVEL_DEBUG, "coll %s: end #%llu %s of %zu elements (%zu bytes) %s in %.0f us", c->ops->name,
                st->seq, mpi_op_name(kind), count, bytes, s ? "failed" : "done", (clock_now_s() - start) * 1e6);
    st->seq++;
    return s;
}
