/*
 * rank_verdict.c - every rank's outcome to every rank (rank_verdict.h): the one copy of the
 * per-rank slots that dt_evaluate, dt_check_replicas, dt_model_create, dt_model_set_sync and
 * dt_gather_placement use to fail together instead of leaving peers in a collective; and dt_init's
 * over plain MPI, for a rank that failed before MPI_Init and joined its peers there to tell them.
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

dt_status rank_verdict_share(const dt_ctx *ctx, int code, rank_verdict *out)
{
    if (!ctx || !out) return status_set_error(DT_ERR_INVALID_ARG, "rank_verdict_share: ctx or out is NULL");
    if (code <= -CODE_LIMIT || code >= CODE_LIMIT)
        return status_set_error(DT_ERR_INTERNAL, "rank_verdict_share: code %d is not exact in fp32", code);
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    /* This rank alone until the exchange says otherwise (also what a failed exchange leaves). */
    *out = (rank_verdict){code ? rank : -1, code, code != 0};
    if (world <= 1) return DT_OK;
    coll *c = ctx_host_coll(ctx);
    float slot[RANK_VERDICT_CHUNK];
    rank_verdict v = {-1, 0, 0};
    for (int base = 0; base < world; base += RANK_VERDICT_CHUNK) {
        const int n = world - base < RANK_VERDICT_CHUNK ? world - base : RANK_VERDICT_CHUNK;
        memset(slot, 0, sizeof slot);
        if (rank >= base && rank < base + n) slot[rank - base] = (float)code;
        const dt_status s = c->ops->allreduce(c, slot, (size_t)n, DT_F32, DT_SUM);
        if (s) return s;
        for (int j = 0; j < n; j++) {
            if (slot[j] == 0) continue;
            if (v.first_rank < 0) v.first_rank = base + j, v.first_code = (int)slot[j];
            v.failed++;
        }
    }
    *out = v;
    return DT_OK;
}

dt_status rank_verdict_status(const dt_ctx *ctx, dt_status own, const char *fn, const char *consequence)
{
    if (!ctx || dt_world_size(ctx) <= 1) return own;
    status_kept why;
    if (own) status_keep(&why);
    rank_verdict v;
    const dt_status cs = rank_verdict_share(ctx, (int)own, &v);
    if (own) return status_restore(own, &why);
    if (cs) return cs;
    if (v.first_rank < 0) return DT_OK;
    const dt_status code = (dt_status)v.first_code;
    return status_set_peer_error(code, "%s failed on rank %d (%s)%s%s: read rank %d's message for the cause", fn,
                                 v.first_rank, dt_strerror(code), v.failed > 1 ? " and on other ranks" : "",
                                 consequence ? consequence : "", v.first_rank);
}

/* The part of a failing rank's message that travels to the others. */
#define PEER_MSG 1024

dt_status rank_verdict_comm_status(MPI_Comm comm, dt_status own, const char *fn, const char *consequence)
{
    int rank = 0, size = 1;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS || size <= 1) return own;
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
    if (own) return status_restore(own, &why);
    if (!ok) return status_set_error(DT_ERR_MPI, "%s: telling every rank each rank's outcome over MPI failed", fn);
    if (first[0] == INT_MAX) return DT_OK;
    const dt_status code = (dt_status)first[1];
    msg[sizeof msg - 1] = '\0';
    return status_set_peer_error(code, "%s failed on rank %d (%s)%s%s; rank %d says: %s", fn, first[0],
                                 dt_strerror(code), nfailed > 1 ? " and on other ranks" : "",
                                 consequence ? consequence : "", first[0], msg);
}
