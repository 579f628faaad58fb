/*
 * ckpt_coll.c - the two collectives the checkpoint writer and reader build on: every rank's
 * verdict to every rank (so one rank's failure fails the call everywhere, with its message, and no
 * rank goes on to a collective the others skip), and a byte broadcast from rank 0.
 *
 * Both go through dt_allreduce / dt_broadcast on host memory, so the collective timeout
 * (DTRAIN_TIMEOUT) also covers a rank that never arrives.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "base/status.h"

#include <stdio.h>

/* What the failing rank tells the others: its status and message, 2 KiB. */
typedef struct verdict {
    int32_t status;
    char msg[2044];
} verdict;

dt_status ckpt_agree(dt_ctx *ctx, dt_status mine)
{
    const int world = ctx ? dt_world_size(ctx) : 1;
    if (world <= 1) return mine;
    const int rank = dt_rank(ctx);
    verdict own = {.status = (int32_t)mine};
    if (mine) snprintf(own.msg, sizeof own.msg, "%s", dt_last_error());
    dt_status c;
    float failed = mine ? 1.0f : 0.0f; /* exact: at most 2^24 ranks */
    if ((c = dt_allreduce(ctx, &failed, 1, DT_F32, DT_SUM))) return c;
    if (failed == 0) return DT_OK;
    /* The lowest failing rank speaks for all: each rank marks its slot of a 1024-rank window,
     * window after window, until one holds a failure (every rank sees the same sums, so all stop
     * at the same window). No allocation: this also runs when one rank is out of memory. */
    int root = -1;
    for (int base = 0; base < world && root < 0; base += 1024) {
        float slot[1024] = {0};
        const int n = world - base < 1024 ? world - base : 1024;
        if (mine && rank >= base && rank < base + n) slot[rank - base] = 1.0f;
        if ((c = dt_allreduce(ctx, slot, (size_t)n, DT_F32, DT_SUM))) return c;
        for (int i = 0; i < n && root < 0; i++)
            if (slot[i] != 0) root = base + i;
    }
    if (root < 0) return status_set_error(DT_ERR_INTERNAL, "ckpt_agree: %g ranks failed but none said which", failed);
    verdict v = own;
    if ((c = dt_broadcast(ctx, &v, sizeof v, DT_U8, root))) return c;
    /* The exchange is complete: every rank returns this failure (status_shared). */
    if (mine) return status_mark_shared(status_set_error(mine, "%s", own.msg));
    const int others = (int)failed - 1;
    if (others > 0)
        status_set_error((dt_status)v.status, "rank %d (and %d other rank%s): %s", root, others, others == 1 ? "" : "s",
                         v.msg);
    else
        status_set_error((dt_status)v.status, "rank %d: %s", root, v.msg);
    return status_mark_shared((dt_status)v.status);
}

dt_status ckpt_bcast_bytes(dt_ctx *ctx, void *buf, size_t n)
{
    if (!ctx || dt_world_size(ctx) <= 1 || n == 0) return DT_OK;
    return dt_broadcast(ctx, buf, n, DT_U8, 0);
}
