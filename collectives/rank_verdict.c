/*
 * rank_verdict.c - every rank's outcome to every rank (rank_verdict.h): the one copy of the
 * per-rank slots that dt_evaluate, dt_check_replicas, dt_model_create, dt_model_set_sync and
 * dt_gather_placement use to fail together instead of leaving peers in a collective, and that
 * dt_reducer_set_sync, dt_model_set_precision and dt_model_set_accum_steps use to compare their
 * setting across the ranks in the same exchange; and dt_init's over plain MPI, for a rank that
 * failed before MPI_Init and joined its peers there to tell them.
 */
#include "collectives/rank_verdict.h"
#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "base/status.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* fp32 holds every integer of magnitude up to 2^24 exactly, so a sum of zeros and one code is it. */
#define CODE_LIMIT (1 << 24)

dt_status rank_share_slots(const dt_ctx *ctx, const float *mine, int k, rank_slot_visit visit, void *state)
{
    if (!ctx || !mine || !visit || k < 1 || k > RANK_SLOT_MAX)
        return status_set_error(DT_ERR_INTERNAL,
                                "rank_share_slots: no context, values or visitor, or %d values per "
                                "rank (1 to %d)",
                                k, RANK_SLOT_MAX);
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    coll *c = ctx_host_coll(ctx);
    float slot[RANK_VERDICT_CHUNK * RANK_SLOT_MAX];
    for (int base = 0; base < world; base += RANK_VERDICT_CHUNK) {
        const int n = world - base < RANK_VERDICT_CHUNK ? world - base : RANK_VERDICT_CHUNK;
        memset(slot, 0, (size_t)n * (size_t)k * sizeof *slot);
        if (rank >= base && rank < base + n)
            memcpy(slot + (size_t)(rank - base) * (size_t)k, mine, (size_t)k * sizeof *mine);
        const dt_status s = c->ops->allreduce(c, slot, (size_t)n * (size_t)k, DT_F32, DT_SUM);
        if (s) return s;
        for (int j = 0; j < n; j++) visit(base + j, slot + (size_t)j * (size_t)k, state);
    }
    return DT_OK;
}

static void verdict_visit(int rank, const float *slot, void *state)
{
    const float value = *slot;
    rank_verdict *v = state;
    if (value == 0) return;
    if (v->first_rank < 0) v->first_rank = rank, v->first_code = (int)value;
    v->failed++;
}

dt_status rank_verdict_share(const dt_ctx *ctx, int code, rank_verdict *out)
{
    if (!ctx || !out) return status_set_error(DT_ERR_INVALID_ARG, "rank_verdict_share: ctx or out is NULL");
    /* A code fp32 cannot carry exactly still takes part, saturated, so that no rank is left
     * waiting in the exchange for this one; this rank then reports the caller's mistake. */
    const int given = code, too_large = code <= -CODE_LIMIT || code >= CODE_LIMIT;
    if (too_large) code = code < 0 ? -(CODE_LIMIT - 1) : CODE_LIMIT - 1;
    /* This rank alone until the exchange says otherwise (also what a failed exchange leaves). */
    *out = (rank_verdict){code ? dt_rank(ctx) : -1, code, code != 0};
    if (dt_world_size(ctx) > 1) {
        rank_verdict v = {-1, 0, 0};
        const float mine = (float)code;
        const dt_status s = rank_share_slots(ctx, &mine, 1, verdict_visit, &v);
        if (s) return s;
        *out = v;
    }
    if (too_large)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "rank_verdict_share: code %d is not exact in fp32 (its magnitude must be below 2^24); "
                                "the ranks were told %d",
                                given, code);
    return DT_OK;
}

/* Another rank's failure, as this rank reports it. */
static dt_status peer_failure(const rank_verdict *v, const char *fn, const char *consequence)
{
    const dt_status code = (dt_status)v->first_code;
    return status_set_peer_error(code, "%s failed on rank %d (%s)%s%s: read rank %d's message for the cause", fn,
                                 v->first_rank, dt_strerror(code), v->failed > 1 ? " and on other ranks" : "",
                                 consequence ? consequence : "", v->first_rank);
}

dt_status rank_verdict_status(const dt_ctx *ctx, dt_status own, const char *fn, const char *consequence)
{
    if (!ctx || dt_world_size(ctx) <= 1) return own;
    status_kept why;
    if (own) status_keep(&why);
    rank_verdict v;
    const dt_status cs = rank_verdict_share(ctx, (int)own, &v);
    /* Past a complete exchange every rank knows of every failure: each returns one. */
    if (own) return cs ? status_restore(own, &why) : status_mark_shared(status_restore(own, &why));
    if (cs) return cs;
    return v.first_rank < 0 ? DT_OK : status_mark_shared(peer_failure(&v, fn, consequence));
}

/* The part of a failing rank's message that travels to the others. */
#define PEER_MSG 1024

dt_status rank_verdict_comm_status(MPI_Comm comm, dt_status own, const char *fn, const char *consequence, int *shared)
{
    int rank = 0, size = 1, ignored;
    if (!shared) shared = &ignored;
    *shared = 0;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS) return own;
    if (size <= 1) {
        *shared = 1;
        return own;
    }
    status_kept why;
    if (own) status_keep(&why);
    /* The lowest failing rank and its code in one MINLOC (ranks are distinct, so its index is the
     * code), and how many failed. No allocation: no rank can fail to take part. */
    int in[2] = {own ? rank : INT_MAX, (int)own}, first[2] = {INT_MAX, 0};
    int failed = own != 0, nfailed = 0;
    char msg[PEER_MSG] = "";
    int ok = MPI_Allreduce(in, first, 1, MPI_2INT, MPI_MINLOC, comm) == MPI_SUCCESS &&
             MPI_Allreduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS;
    if (ok && first[0] != INT_MAX) {
        if (rank == first[0]) snprintf(msg, sizeof msg, "%.*s", (int)sizeof msg - 1, why.msg);
        ok = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first[0], comm) == MPI_SUCCESS;
    }
    *shared = ok;
    if (own) return status_restore(own, &why);
    if (!ok) return status_set_error(DT_ERR_MPI, "%s: telling every rank each rank's outcome over MPI failed", fn);
    if (first[0] == INT_MAX) return DT_OK;
    const dt_status code = (dt_status)first[1];
    msg[sizeof msg - 1] = '\0';
    return status_set_peer_error(code, "%s failed on rank %d (%s)%s%s; rank %d says: %s", fn, first[0],
                                 dt_strerror(code), nfailed > 1 ? " and on other ranks" : "",
                                 consequence ? consequence : "", first[0], msg);
}

/* What rank_agree_status learns from the slots: a failure is -code, a value is itself. */
typedef struct agreement {
    rank_verdict failed;
    int value0;       /* rank 0's value (when it did not fail) */
    int differ_rank;  /* the lowest rank whose value is not rank 0's, -1 when none */
    int differ_value; /* its value */
    int differ;       /* how many ranks differ from rank 0 */
} agreement;

static void agree_visit(int rank, const float *slot, void *state)
{
    const float value = *slot;
    agreement *a = state;
    if (value < 0) {
        const float code = -value;
        verdict_visit(rank, &code, &a->failed);
        return;
    }
    const int v = (int)value;
    if (rank == 0) {
        a->value0 = v;
    } else if (v != a->value0) {
        if (a->differ_rank < 0) a->differ_rank = rank, a->differ_value = v;
        a->differ++;
    }
}

dt_status rank_agree_status(const dt_ctx *ctx, dt_status own, int value, const char *fn, const char *setting,
                            rank_value_text text, const char *consequence)
{
    if (!ctx || dt_world_size(ctx) <= 1) return own;
    if (!own && (value < 0 || value >= CODE_LIMIT))
        own = status_set_error(DT_ERR_INTERNAL, "%s: %s %d cannot be compared across ranks (0 to 2^24 - 1)", fn,
                               setting, value);
    status_kept why;
    if (own) status_keep(&why);
    agreement a = {{-1, 0, 0}, 0, -1, 0, 0};
    const float mine = own ? -(float)own : (float)value;
    const dt_status cs = rank_share_slots(ctx, &mine, 1, agree_visit, &a);
    /* Past a complete exchange every rank knows of every failure and difference: each fails. */
    if (own) return cs ? status_restore(own, &why) : status_mark_shared(status_restore(own, &why));
    if (cs) return cs;
    if (a.failed.first_rank >= 0) return status_mark_shared(peer_failure(&a.failed, fn, consequence));
    if (a.differ_rank < 0) return DT_OK;
    char v0[64], vr[64];
    text(a.value0, v0, sizeof v0);
    text(a.differ_value, vr, sizeof vr);
    status_set_error(DT_ERR_INVALID_ARG,
                     "%s: rank %d gave %s %s where rank 0 gave %s%s: every rank must pass the same %s (the "
                     "call is collective)%s",
                     fn, a.differ_rank, setting, vr, v0, a.differ > 1 ? ", and other ranks differ too" : "", setting,
                     consequence ? consequence : "");
    return status_mark_shared(DT_ERR_INVALID_ARG);
}

void rank_value_int(int value, char *buf, size_t n) { snprintf(buf, n, "%d", value); }

dt_status rank_compare_struct(dt_ctx *ctx, const void *mine, size_t bytes, rank_first_difference differ, void *zero,
                              void *other, rank_verdict *v)
{
    if (!ctx || !mine || !differ || !zero || !other || !v)
        return status_set_error(DT_ERR_INTERNAL, "rank_compare_struct: a NULL argument");
    memcpy(zero, mine, bytes);
    memcpy(other, mine, bytes);
    *v = (rank_verdict){-1, 0, 0};
    if (dt_world_size(ctx) <= 1) return DT_OK;
    /* Both collectives run under the watchdog's deadline: a rank that never arrives is named
     * instead of hanging every other rank here. */
    dt_status s = dt_broadcast(ctx, zero, bytes, DT_U8, 0);
    if (!s) s = rank_verdict_share(ctx, differ(mine, zero), v);
    if (s || v->first_rank < 0) return s;
    return dt_broadcast(ctx, other, bytes, DT_U8, v->first_rank);
}
