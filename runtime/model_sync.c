/*
 * model_sync.c - a model's gradient synchronization: the bucket plan over its parameter layers
 * (checked across ranks), starting a bucket's allreduce the moment backward completes its last
 * layer (on the engine, or on the NCCL stream of a GPU model), and waiting for them all. Also the
 * per-layer hook of backward (the testing inf and the local finite check) that feeds it.
 */
#include "model_internal.h"
#include "amp.h"
#include "bucket.h"
#include "coll.h"
#include "ctx_internal.h"
#include "devmem.h"
#include "engine.h"
#include "status.h"
#ifdef DTRAIN_HAVE_CUDA
#include "cuda_ops.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dt_status model_layer_done(dt_model *m, int p);

/* The stream the ops run on, which the NCCL buckets follow (NULL: the default stream). */
static void *compute_stream(void)
{
#ifdef DTRAIN_HAVE_CUDA
    return cuda_ops_stream();
#else
    return NULL;
#endif
}

dt_status model_wait_inflight(dt_model *m)
{
    if (!m->in_flight) return DT_OK;
    m->in_flight = 0;
    return m->dcoll ? m->dcoll->ops->wait_all(m->dcoll, compute_stream()) : engine_wait_all(m->eng);
}

/* Starts the allreduce of bucket b: on the NCCL stream for a GPU model, else by the engine. */
static dt_status bucket_start(dt_model *m, int b)
{
    const bucket *bk = &m->plan.b[b];
    m->comm_starts++;
    if (m->dcoll)
        return m->dcoll->ops->start(m->dcoll, m->grads + bk->off, bk->n, DT_F32, m->sync.op, compute_stream());
    return m->g16 ? engine_start16(m->eng, m->g16 + bk->off, bk->n, m->sync.op, b, m->grad_t)
                  : engine_start(m->eng, m->grads + bk->off, bk->n, m->sync.op, b, m->sync.grad_comm);
}

/* Backward finished layer i's parameter gradients: the accumulation group's earlier sum added
 * in, the testing inf, the local finite check (of the sum), then the bucket bookkeeping, which
 * only the pass that ends a group reaches: the other micro-batches start no collective. */
dt_status model_grads_done(dt_model *m, int i)
{
    const layer *l = &m->spec.layers[i];
    const size_t off = l->w_off, cnt = l->w_n + l->b_n;
    const int ends_group = model_accum_layer(m, i);
    if (m->inject_inf && cnt) {
        m->inject_inf = 0;
        const float inf = INFINITY;
        if (m->g16)
            m->g16[off] = m->grad_t == DT_F16 ? 0x7c00u : 0x7f80u;
        else if (m->cuda) {
            dt_status s = devmem_to_device(1, m->grads + off, &inf, sizeof inf);
            if (s) return s;
        } else
            m->grads[off] = inf;
    }
#ifdef DTRAIN_HAVE_CUDA
    if (m->check_local && m->cuda) {
        cuda_flag_nonfinite(m->grads + off, cnt, m->dflags + i, m->fb_count);
        return ends_group ? model_layer_done(m, m->player[i]) : DT_OK;
    }
#endif
    if (m->check_local && m->bad_layer < 0) {
        size_t bad;
        if (m->g16)
            bad = cpu_count_nonfinite16(m->grad_t, m->g16 + off, cnt);
        else
            bad = cpu_count_nonfinite(m->grads + off, cnt);
        if (bad) m->bad_layer = i;
    }
    return ends_group ? model_layer_done(m, m->player[i]) : DT_OK;
}

void dt_sync_defaults(dt_sync_config *c)
{
    memset(c, 0, sizeof *c);
    c->overlap = 1;
    c->bucket_mb = 25.0;
    c->first_bucket_mb = 1.0;
    c->op = DT_AVG;
    c->grad_comm = DT_F32;
}

int dt_model_num_buckets(const dt_model *m) { return m->plan.nb; }
size_t dt_model_bucket_size(const dt_model *m, int i) { return i >= 0 && i < m->plan.nb ? m->plan.b[i].n : 0; }

/* Backward finished parameter layer p: start its bucket's allreduce when the bucket is complete. */
static dt_status model_layer_done(dt_model *m, int p)
{
    if ((!m->eng && !m->dcoll) || !m->sync.overlap || p < 0) return DT_OK;
    int b = m->plan.of_layer[p];
    if (--m->pending[b] == 0) {
        dt_status s = bucket_start(m, b);
        if (s) return s;
        m->in_flight++;
    }
    if (m->eng) engine_poke(m->eng);
    return DT_OK;
}

dt_status dt_model_set_sync(dt_model *m, const dt_sync_config *c)
{
    if (!(c->bucket_mb >= 0) || !(c->first_bucket_mb >= 0) || c->bucket_mb > 1e6 || c->first_bucket_mb > 1e6)
        return dt_set_error(DT_ERR_INVALID_ARG, "bucket sizes %g / %g MiB must be from 0 to 1e6", c->bucket_mb,
                            c->first_bucket_mb);
    if (c->grad_comm != DT_F32 && c->grad_comm != DT_F16 && c->grad_comm != DT_BF16)
        return dt_set_error(DT_ERR_INVALID_ARG, "gradient communication type %d must be DT_F32, DT_F16 or DT_BF16",
                            (int)c->grad_comm);
    if (c->op != DT_SUM && c->op != DT_AVG)
        return dt_set_error(DT_ERR_INVALID_ARG, "gradient reduction %d must be DT_SUM or DT_AVG", (int)c->op);
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
    /* The parameter layers, in forward order. */
    int np = 0;
    for (int i = 0; i < m->spec.n; i++) np += m->spec.layers[i].w_n + m->spec.layers[i].b_n > 0;
    size_t *off = calloc((size_t)np + 1, sizeof *off), *cnt = calloc((size_t)np + 1, sizeof *cnt);
    int *player = calloc((size_t)m->spec.n, sizeof *player);
    if (!off || !cnt || !player) {
        free(off), free(cnt), free(player);
        return dt_set_error(DT_ERR_NOMEM, "out of memory planning buckets");
    }
    int p = 0;
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        player[i] = -1;
        if (l->w_n + l->b_n == 0) continue;
        off[p] = l->w_off;
        cnt[p] = l->w_n + l->b_n;
        player[i] = p++;
    }
    bucket_plan plan;
    dt_status s = bucket_plan_build(off, cnt, np, sizeof(float), (size_t)(c->first_bucket_mb * 1048576.0),
                                    (size_t)(c->bucket_mb * 1048576.0), &plan);
    free(off);
    free(cnt);
    if (s) {
        free(player);
        return s;
    }
    int *pending = calloc((size_t)plan.nb, sizeof *pending);
    if (!pending) {
        free(player);
        bucket_plan_free(&plan);
        return dt_set_error(DT_ERR_NOMEM, "out of memory planning buckets");
    }
    /* Every rank must have the same plan, or the collectives would pair wrong buffers and hang.
     * DTRAIN_COMM_WORLD1=1 makes a GPU model reduce its buckets even in a world of one (a test of
     * the NCCL path on one GPU: a sum over one rank changes no bit). */
    const char *w1 = getenv("DTRAIN_COMM_WORLD1");
    const int comm1 = m->cuda && w1 && !strcmp(w1, "1");
    if (m->ctx && (dt_world_size(m->ctx) > 1 || comm1)) {
        /* Through dt_broadcast and dt_check_replicas, which run under the watchdog's deadline: a
         * rank that never arrives is named instead of hanging every other rank here. */
        unsigned long long mine[2] = {bucket_plan_hash(&plan), (unsigned long long)plan.nb};
        int64_t nb0 = plan.nb; /* rank 0's bucket count, for the message (broadcast moves bytes) */
        int differ = 0, first = -1;
        s = dt_broadcast(m->ctx, &nb0, 2, DT_F32, 0);
        if (!s) {
            s = dt_check_replicas(m->ctx, mine, sizeof mine, &differ, &first);
            if (s == DT_ERR_NUMERIC) {
                char own[64] = ""; /* the differing rank adds its own count */
                if ((long long)mine[1] != (long long)nb0 || dt_rank(m->ctx) == first)
                    snprintf(own, sizeof own, ", rank %d has %llu", dt_rank(m->ctx), mine[1]);
                s = dt_set_error(DT_ERR_INVALID_ARG, "%d rank(s) planned other gradient buckets than rank 0 (the "
                                 "first is rank %d; rank 0 has %lld buckets%s): every rank must use the same model "
                                 "and --bucket-mb / --first-bucket-mb", differ, first, (long long)nb0, own);
            }
        }
        /* A GPU model's gradients go to the context's device backend: bucket by bucket where it
         * can start them asynchronously (NCCL), else whole after backward (dt_model_sync_grads). */
        if (!s && !m->eng && !m->cuda) s = engine_create(ctx_world_comm(m->ctx), ctx_timeout(m->ctx), &m->eng);
        if (m->cuda) {
            coll *dc = ctx_device_coll(m->ctx);
            m->dcoll = dc && dc->ops->start ? dc : NULL;
        }
        if (s) {
            free(player), free(pending);
            bucket_plan_free(&plan);
            return s;
        }
    }
    bucket_plan_free(&m->plan);
    free(m->player);
    free(m->pending);
    m->plan = plan;
    m->player = player;
    m->pending = pending;
    m->sync = *c;
    return DT_OK;
}

static dt_status model_sync_grads(dt_model *m)
{
    /* A GPU backend without asynchronous starts (MPI through host memory): the whole buffer. */
    if (m->cuda && !m->dcoll && m->ctx && dt_world_size(m->ctx) > 1) {
        m->comm_starts++;
        return dt_allreduce(m->ctx, m->grads, m->spec.num_params, DT_F32, m->sync.op);
    }
    if (!m->eng && !m->dcoll) return DT_OK; /* a world of one */
    m->in_flight = 1; /* whatever is started (none, some or all, even if a start fails): wait for it */
    if (!m->sync.overlap) {
        for (int b = 0; b < m->plan.nb; b++) {
            dt_status s = bucket_start(m, b);
            if (s) return s;
        }
    }
    return model_wait_inflight(m);
}

long model_comm_starts(const dt_model *m) { return m->comm_starts; }

dt_status dt_model_sync_grads(dt_model *m)
{
    dt_status s = model_group_complete(m, "dt_model_sync_grads");
    if (s) return s;
    s = model_sync_grads(m);
    if (!s) m->unreduced = 0;
    return s;
}
