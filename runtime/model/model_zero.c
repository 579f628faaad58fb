/*
 * model_zero.c - ZeRO-1 for dt_model (dt_sync_config.zero = 1): optimizer state sharded across the
 * ranks.
 *
 * The shard is bucket-aligned: rank r owns part r of every gradient bucket, the very split the
 * engine's allreduce uses for its reduce-scatter phase (engine_part). So backward still starts each
 * bucket as it completes, the reduce-scatter sums every element in the same rank order as the
 * allreduce (the owned values are bitwise those of --zero 0), and nothing is padded: parts differ by
 * at most one element, and no rank's part crosses a bucket. (On a GPU the split is NCCL's equal
 * blocks with the remainder on the last rank, coll_part, and the sums are NCCL's: reducer_zero.c.) A global split of the flat buffer would
 * need a bucket's messages to depend on where the global boundaries fall, and padding to make
 * MPI_Reduce_scatter_block's equal blocks; the bucket split needs neither.
 *
 * After the reduce-scatter only the owned slices hold reduced gradients, so everything that reads
 * them works on the slices and agrees across the ranks through a watched exchange
 * (sum_over_ranks): the scaler's non-finite count is summed (every rank skips alike), the clipping
 * norm's sum of squares is each rank's slices' sum added in rank order (the same bits everywhere;
 * not bitwise the --zero 0 norm, whose sum runs over the whole buffer in another order). The
 * optimizer steps on the slices, its state holding only them, and the updated parameters are
 * allgathered bucket by bucket; the 16-bit parameter copy is made from them at the next forward as
 * before.
 */
#include "runtime/model/model_internal.h"
#include "collectives/reducer_internal.h"
#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_zero(const dt_model *m) { return m->red && reducer_sharded(m->red); }

dt_status model_zero_shard_optimizer(dt_model *m, dt_optimizer *o)
{
    if (!model_zero(m))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "the optimizer's state is sharded (--zero 1) but the model's gradients are "
                                "allreduced (--zero 0): use a new optimizer after changing the sync settings");
    const int nb = dt_reducer_num_buckets(m->red);
    size_t *off = malloc((size_t)(nb ? nb : 1) * sizeof *off), *cnt = malloc((size_t)(nb ? nb : 1) * sizeof *cnt);
    if (!off || !cnt) {
        free(off), free(cnt);
        return status_set_error(DT_ERR_NOMEM, "out of memory listing the %d owned slices", nb);
    }
    for (int b = 0; b < nb; b++) reducer_owned(m->red, b, &off[b], &cnt[b]);
    dt_status s = optimizer_shard(o, off, cnt, nb);
    free(off);
    free(cnt);
    return s;
}

dt_status dt_model_shard_optimizer(dt_model *m, dt_optimizer *o)
{
    if (!m) return status_null_arg("dt_model_shard_optimizer", "m", "pass the model dt_model_create made");
    if (!o) return status_null_arg("dt_model_shard_optimizer", "o", "pass the model's optimizer (dt_optimizer_create)");
    if (!model_zero(m) && !optimizer_sharded(o)) return DT_OK;
    return model_zero_shard_optimizer(m, o);
}

/* The fused 16-bit copy covers only the owned slices the optimizer wrote, so the copy is made
 * again at the next forward from the gathered parameters. */
dt_status model_zero_allgather_params(dt_model *m)
{
    model_params_changed(m);
    return reducer_allgather(m->red, m->params);
}

/* Ranks per exchange of sum_over_ranks: their values ride on the stack, 2 KiB, as rank_verdict's
 * slots do, so that no rank can fail to allocate them and skip the collective its peers entered. */
#define SUM_CHUNK 256

/* The sum of the ranks' values in rank order (the same bits on every rank). own: this rank's
 * failure (mine then unused). Such a rank still joins, sharing -own in place of its value (the
 * values, counts and sums of squares, are never negative), so that no rank waits for it: it
 * returns own with its own message, the others the code of the first rank that failed, with a
 * message naming it (fn: what failed there). Past a complete exchange every rank knows of every
 * failure, so the failure is marked shared (status_mark_shared, as rank_verdict_status does): a
 * launcher then lets each rank end on its own instead of aborting the job as for a failure a
 * rank may have alone. Each rank's value is carried exactly: it sits in its own slot of a zeroed
 * array summed over the ranks (v + 0 is v), SUM_CHUNK ranks per allreduce over the context's host
 * backend, under the collective deadline; nothing is allocated. */
static dt_status sum_over_ranks(const dt_model *m, double mine, dt_status own, const char *fn, double *total)
{
    status_kept why;
    if (own) status_keep(&why);
    const double v = own ? -(double)own : mine;
    coll *c = m->ctx && dt_world_size(m->ctx) > 1 ? ctx_host_coll(m->ctx) : NULL;
    const int world = c ? c->size : 1, me = c ? c->rank : 0;
    double slot[SUM_CHUNK], sum = 0.0, bad_v = 0.0;
    int bad = -1;
    dt_status s = DT_OK;
    for (int base = 0; base < world && !s; base += SUM_CHUNK) {
        const int n = world - base < SUM_CHUNK ? world - base : SUM_CHUNK;
        memset(slot, 0, sizeof slot);
        if (me >= base && me < base + n) slot[me - base] = v;
        if (c) s = coll_mpi_sum_f64(c, slot, n);
        for (int k = 0; !s && k < n; k++) {
            if (slot[k] < 0 && bad < 0) bad = base + k, bad_v = slot[k];
            sum += slot[k];
        }
    }
    /* Alone (no exchange) or past a failed one, no peer is known to have the failure. */
    if (own) return c && !s ? status_mark_shared(status_restore(own, &why)) : status_restore(own, &why);
    if (s) return s;
    if (bad >= 0) {
        const dt_status code = (dt_status)(int)-bad_v;
        return status_mark_shared(status_set_peer_error(
            code, "%s failed on rank %d (%s): read rank %d's message for the cause", fn, bad, dt_strerror(code), bad));
    }
    *total = sum;
    return DT_OK;
}

dt_status model_zero_scale_count(dt_model *m, float mul, dt_status own, const char *fn, size_t *bad)
{
    const int nb = dt_reducer_num_buckets(m->red);
    const size_t e = model_grad_esize(m);
    size_t mine = 0;
    for (int b = 0; !own && b < nb; b++) {
        size_t off, cnt, k = 0;
        reducer_owned(m->red, b, &off, &cnt);
        own = m->be->ops->scale_count(m->be, model_grad_type(m), (char *)model_grad_buf(m) + off * e, cnt, mul, &k);
        mine += k;
    }
    double total = 0.0;
    dt_status s = sum_over_ranks(m, (double)mine, own, fn, &total);
    if (!s) *bad = (size_t)total;
    return s;
}

dt_status model_zero_sum_squares(const dt_model *m, dt_status own, const char *fn, double *ss)
{
    const int nb = dt_reducer_num_buckets(m->red);
    const size_t e = model_grad_esize(m);
    double mine = 0.0;
    for (int b = 0; !own && b < nb; b++) {
        size_t off, cnt;
        double part = 0.0;
        reducer_owned(m->red, b, &off, &cnt);
        own = m->be->ops->sum_squares(m->be, model_grad_type(m), (const char *)model_grad_buf(m) + off * e, cnt,
                                      m->inv_scale, m->grad_mul, &part);
        mine += part;
    }
    return sum_over_ranks(m, mine, own, fn, ss);
}

dt_status model_zero_full_begin(dt_model *m, dt_optimizer *o)
{
    if (!o || !optimizer_sharded(o)) return DT_OK;
    float *f1 = NULL, *f2 = NULL;
    dt_status s = optimizer_full_begin(o, &f1, &f2);
    /* The ranks agree on the outcome first, so none goes on to an allgather that another skips. */
    double unused;
    s = sum_over_ranks(m, 0.0, s, "making the full-size optimizer state for the checkpoint", &unused);
    if (!s && f1) s = reducer_allgather_host(m->red, f1);
    if (!s && f2) s = reducer_allgather_host(m->red, f2);
    return s;
}

void model_zero_full_end(dt_optimizer *o)
{
    if (o) optimizer_full_end(o);
}

dt_status model_zero_unshard(dt_model *m, dt_optimizer *o)
{
    if (!o || !optimizer_sharded(o)) return DT_OK;
    /* A pending verdict may still roll the optimizer's step back: taken before its state is read. */
    dt_status s = dt_model_settle_step(m, NULL);
    if (!s) s = model_zero_full_begin(m, o);
    if (s) {
        model_zero_full_end(o);
        return s;
    }
    optimizer_unshard(o);
    return DT_OK;
}
