/*
 * reducer_zero.c - ZeRO-1 in the reducer (reducer_internal.h): which part of each bucket this rank
 * owns, and the allgathers that dt_model's sharded step needs.
 *
 * Three carriers, one contract:
 * - the engine (host memory): only its reduce-scatter phase, parts by engine_part, bitwise the
 *   values its allreduce leaves there;
 * - NCCL (device memory): each bucket reduce-scattered as it completes (coll_part's equal blocks
 *   and tail, asynchronous on NCCL's stream like the allreduce), parameters allgathered the same
 *   way;
 * - MPI through host memory (device memory without NCCL: --gpu-comm mpi or a build without NCCL):
 *   the one whole-buffer allreduce at wait() stays, so every part holds its reduced values and the
 *   optimizer's state and work are sharded, not the gradient bytes (that path moves the whole
 *   buffer through the host either way); parts by coll_part.
 * Host buffers of a device reducer (the optimizer state a checkpoint gathers) go through the
 * context's host backend, by coll_part's split too.
 */
#include "collectives/reducer_impl.h"
#include "collectives/reducer_internal.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"

dt_status reducer_set_shard(dt_reducer *r, int on)
{
    if (reducer_step_open(r))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: ZeRO sharding cannot change in the middle of a step (%d range(s) ready): "
                                "call dt_reducer_wait first",
                                r->nready);
    if (on && r->comm && r->dcoll && !r->dcoll->ops->start_half)
        return status_set_error(DT_ERR_UNSUPPORTED,
                                "--zero 1: the %s backend cannot reduce-scatter gradient buckets in device memory: "
                                "use --zero 0, or NCCL (--gpu-comm nccl)",
                                r->dcoll->ops->name);
    r->shard = on != 0;
    return DT_OK;
}

int reducer_sharded(const dt_reducer *r) { return r && r->shard; }

void reducer_owned(const dt_reducer *r, int b, size_t *off, size_t *cnt)
{
    const bucket *bk = &r->plan.b[b];
    size_t po = 0, pc = bk->n;
    if (r->comm && r->eng)
        engine_part(bk->n, engine_rank(r->eng), engine_size(r->eng), &po, &pc);
    else if (r->comm)
        coll_part(bk->n, dt_rank(r->ctx), dt_world_size(r->ctx), &po, &pc);
    *off = bk->off + po;
    *cnt = pc;
}

/* Every rank's coll_part of every bucket of buf to every rank, through a blocking backend: the
 * equal blocks in one allgather, the tail broadcast from the last rank. */
static dt_status parts_allgather(dt_reducer *r, coll *c, float *buf)
{
    const size_t w = (size_t)c->size;
    dt_status s = DT_OK;
    for (int b = 0; b < r->plan.nb && !s; b++) {
        const bucket *bk = &r->plan.b[b];
        const size_t q = bk->n / w, tail = bk->n - q * w;
        if (q) s = c->ops->allgather(c, buf + bk->off, q * w, DT_F32);
        if (!s && tail) s = c->ops->broadcast(c, buf + bk->off + q * w, tail, DT_F32, c->size - 1);
        if (!s) r->stats.bytes_sent += (double)bk->n * sizeof(float);
    }
    return s;
}

dt_status reducer_allgather(dt_reducer *r, float *buf)
{
    if (!r->comm) return DT_OK;
    dt_status s = DT_OK;
    if (r->eng || r->dcoll) {
        for (int b = 0; b < r->plan.nb && !s; b++) {
            const bucket *bk = &r->plan.b[b];
            if (r->dcoll) { /* the span of each bucket's allgather on NCCL's track while a trace records */
                r->dcoll->trace = trace_active(ctx_trace(r->ctx));
                r->dcoll->trace_bucket = b;
            }
            s = r->eng ? engine_start_allgather(r->eng, buf + bk->off, bk->n, b)
                       : r->dcoll->ops->start_half(r->dcoll, buf + bk->off, bk->n, DT_F32, DT_SUM, 1, r->cfg.stream);
            if (!s) r->stats.bytes_sent += (double)bk->n * sizeof(float);
        }
        /* Everything started is waited for, even after a failed start. NCCL's: the host polls
         * for them under the watchdog's deadline (nccl_wait_all), and the caller's stream (the
         * next forward) is ordered after them. */
        const dt_status w = r->eng ? engine_wait_all(r->eng) : r->dcoll->ops->wait_all(r->dcoll, r->cfg.stream);
        return s ? s : w;
    }
    /* MPI through host memory: its copies do not follow the stream the optimizer's kernels ran on. */
    if ((s = r->dev_be->ops->sync(r->dev_be)))
        return status_set_error(s, "reducer: the optimizer's step failed on the device before the allgather: %s",
                                dt_last_error());
    return parts_allgather(r, ctx_device_coll(r->ctx), buf);
}

dt_status reducer_allgather_host(dt_reducer *r, float *buf)
{
    if (!r->comm || r->eng) return reducer_allgather(r, buf);
    return parts_allgather(r, ctx_host_coll(r->ctx), buf);
}
