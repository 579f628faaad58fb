/*
 * model_sync.c - a model's gradient synchronization, on the reducer (collectives/reducer*.c), the
 * same engine a custom loop uses: the model hands it its parameter layers as ranges in backward
 * order, marks each ready as backward finishes it (after the per-layer hook: the accumulation sum,
 * the testing inf and the local finite check), and waits in dt_model_sync_grads.
 */
#include "runtime/model/model_internal.h"
#include "collectives/reducer_internal.h"
#include "collectives/rank_verdict.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_status model_wait_inflight(dt_model *m)
{
    /* A verdict left pending (dt_model_set_deferred_verdict) is taken before anything reads or
     * writes what it decides: the step count, the 16-bit copy's state, the scaler. */
    const dt_status s = dt_model_settle_step(m, NULL);
    if (s) return s;
    return m->red ? reducer_discard_step(m->red) : DT_OK;
}

/* The buffer, element type and wire type the reducer reduces for the model's precision: 16-bit
 * gradients travel as they are, fp32 ones as dt_sync_config.grad_comm says (on a GPU through the
 * reducer's 16-bit device copy). */
static void sync_buffer(const dt_model *m, void **buf, dt_dtype *dtype, dt_dtype *wire)
{
    *buf = m->g16 ? (void *)m->g16 : (void *)m->grads;
    *dtype = m->g16 ? m->grad_t : DT_F32;
    *wire = m->g16 ? m->grad_t : m->sync.grad_comm;
}

dt_status model_sync_rebind(dt_model *m)
{
    if (!m->red) return DT_OK;
    void *buf;
    dt_dtype dtype, wire;
    sync_buffer(m, &buf, &dtype, &wire);
    return reducer_set_buffer(m->red, buf, dtype, wire);
}

/* Backward finished layer i's parameter gradients: the accumulation group's earlier sum added
 * in, the testing inf, the local finite check (of the sum), then the reducer, which only the pass
 * that ends a group reaches (the other micro-batches start no collective), and in a pass that
 * steps layer by layer, the layer's optimizer step. */
dt_status model_grads_done(dt_model *m, int i)
{
    const layer *l = &m->spec.layers[i];
    backend *be = m->be;
    const size_t off = l->w_off, cnt = l->w_n + l->b_n, e = model_grad_esize(m);
    char *g = (char *)model_grad_buf(m) + off * e;
    int ends_group = 0;
    dt_status s = model_accum_layer(m, i, &ends_group);
    if (s) return s;
    if (m->inject_inf && cnt) {
        m->inject_inf = 0;
        const float inf = INFINITY;
        const uint16_t inf16 = m->grad_t == DT_F16 ? 0x7c00u : 0x7f80u;
        if ((s = be->ops->to_device(be, g, m->g16 ? (const void *)&inf16 : (const void *)&inf, e))) return s;
    }
    if (m->check_group &&
        (s = be->ops->flag_nonfinite(be, model_grad_type(m), g, cnt, m->dflags + i, m->fb_count, m->group_pass)))
        return s;
    if (ends_group && m->red && cnt && (s = dt_reducer_ready(m->red, off, cnt))) return s;
    if (!ends_group || !m->layer_opt || !cnt) return DT_OK;
    /* Stepped beside the backward still to come (it reads neither these parameters nor their
     * gradients); the end of backward joins the side stream. */
    const backend_ops *k = be->ops;
    if (k->side_begin && (s = k->side_begin(be))) return s;
    m->side_used |= k->side_begin != NULL;
    s = optimizer_step_layer(m, m->layer_opt, off, cnt);
    if (!s) m->layers_stepped++;
    const dt_status es = k->side_end ? k->side_end(be) : DT_OK;
    return s ? s : es;
}

void dt_sync_defaults(dt_sync_config *c)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->overlap = 1;
    c->bucket_mb = 25.0;
    c->first_bucket_mb = 1.0;
    c->op = DT_AVG;
    c->grad_comm = DT_F32;
}

int dt_model_num_buckets(const dt_model *m) { return m ? dt_reducer_num_buckets(m->red) : 0; }
size_t dt_model_bucket_size(const dt_model *m, int i)
{
    dt_range b;
    return m && m->red && i >= 0 && i < dt_reducer_num_buckets(m->red) && dt_reducer_bucket(m->red, i, &b) == DT_OK
               ? b.count
               : 0;
}

/* Every field of c, whether or not the model has a reducer to apply them (a model made without a
 * context keeps the settings unused): the flags are 0 or 1 as dt_config's are, the caps the
 * reducer's range (dt_reducer_config), NaN and inf refused. */
static dt_status sync_check_config(const dt_sync_config *c)
{
    static const char fn[] = "dt_model_set_sync";
    const dt_status rs = reducer_check_settings(fn, c->bucket_mb, c->first_bucket_mb, c->op, c->overlap);
    if (rs) return rs;
    if (c->allow_unreduced != 0 && c->allow_unreduced != 1)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: allow_unreduced %d must be 0 (a step on unreduced gradients is an error) or 1", fn,
                                c->allow_unreduced);
    if (c->grad_comm != DT_F32 && c->grad_comm != DT_F16 && c->grad_comm != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "gradient communication type %d must be DT_F32, DT_F16 or DT_BF16",
                                (int)c->grad_comm);
    if (c->zero != 0 && c->zero != 1)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "ZeRO stage %d is not supported: use 0 (replicated optimizer state) or 1 (optimizer "
                                "state sharded across ranks)",
                                c->zero);
    if (c->zero && c->allow_unreduced)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--zero 1 does not go with allow_unreduced: a rank steps only its own part of the "
                                "parameters, so every step's gradients must be reduce-scattered");
    return DT_OK;
}

/* The fields every rank must give alike, in the order they are compared. Another cap keeps one
 * rank's reducer where the others make a new one (its engine's MPI_Comm_dup then waits for them,
 * unwatched) or plans other buckets; another stage reduce-scatters where the others allreduce;
 * another op, overlap or wire type pairs other collectives; another allow_unreduced steps alone
 * where the others reduce. */
static const char *const sync_field_name[] = {"overlap",   "bucket_mb", "first_bucket_mb", "op",
                                              "grad_comm", "zero",      "allow_unreduced"};
enum { SYNC_FIELDS = sizeof sync_field_name / sizeof *sync_field_name };

/* Field f of c as text, for the message. */
static void sync_field_value(const dt_sync_config *c, int f, char *buf, size_t n)
{
    switch (f) {
        case 0: snprintf(buf, n, "%d", c->overlap); break;
        case 1: snprintf(buf, n, "%g", c->bucket_mb); break;
        case 2: snprintf(buf, n, "%g", c->first_bucket_mb); break;
        case 3: snprintf(buf, n, "%s", c->op == DT_SUM ? "DT_SUM" : "DT_AVG"); break;
        case 4: snprintf(buf, n, "%s", dt_dtype_name(c->grad_comm)); break;
        case 5: snprintf(buf, n, "%d", c->zero); break;
        default: snprintf(buf, n, "%d", c->allow_unreduced); break;
    }
}

/* 1 + the index of the first field where a and b (dt_sync_config) differ, 0 when none does. */
static int sync_first_difference(const void *pa, const void *pb)
{
    const dt_sync_config *a = pa, *b = pb;
    const int differ[SYNC_FIELDS] = {a->overlap != b->overlap,
                                     a->bucket_mb != b->bucket_mb,
                                     a->first_bucket_mb != b->first_bucket_mb,
                                     a->op != b->op,
                                     a->grad_comm != b->grad_comm,
                                     a->zero != b->zero,
                                     a->allow_unreduced != b->allow_unreduced};
    for (int f = 0; f < SYNC_FIELDS; f++)
        if (differ[f]) return f + 1;
    return 0;
}

/* Collective, before anything changes: own is this rank's verdict on its own arguments. Every
 * rank joins, also one whose c was NULL or invalid, so that none waits for it (it used to return
 * here while the others went on to the plan check, pairing their collectives with its next
 * call's). Then rank 0's settings reach every rank, and the first rank whose settings differ is
 * named on every rank with the field and both values, so that no two ranks apply different
 * settings. */
static dt_status sync_check_ranks(const dt_model *m, const dt_sync_config *c, dt_status own)
{
    static const char fn[] = "dt_model_set_sync";
    dt_ctx *ctx = m->ctx;
    if (!ctx || dt_world_size(ctx) <= 1) return own;
    dt_status s = rank_verdict_status(ctx, own, fn, ", so no rank changed its settings");
    if (s) return s;
    /* Rank 0's settings and the first differing rank's reach every rank, so that every rank words
     * the same verdict, which is then shared (said once, each rank ending on its own, where the
     * job was aborted). */
    dt_sync_config zero, other;
    rank_verdict v;
    s = rank_compare_struct(ctx, c, sizeof *c, sync_first_difference, &zero, &other, &v);
    if (s || v.first_rank < 0) return s;
    const int f = v.first_code - 1;
    char r0[32], rf[32];
    sync_field_value(&zero, f, r0, sizeof r0);
    sync_field_value(&other, f, rf, sizeof rf);
    return status_mark_shared(status_set_error(
        DT_ERR_INVALID_ARG,
        "%s: rank %d gave %s another value than rank 0 (rank 0 %s, rank %d %s)%s: every rank must give the same "
        "dt_sync_config, since the ranks reduce their gradients together; no rank changed its settings",
        fn, v.first_rank, sync_field_name[f], r0, v.first_rank, rf,
        v.failed > 1 ? ", and other ranks differ too" : ""));
}

/* A backward whose gradients are being reduced is reduced to the end first (the call is
 * collective, as the reduction is), so the plan changes between steps and no gradients are left
 * unreduced behind a dt_model_sync_grads that would find nothing to do. A reduce-scatter reduced
 * only the slices its plan owned: under another plan or stage (c) they are not the slices the next
 * step reads, so those gradients count as unreduced again (the optimizer step refuses them, and
 * sync_grads says to run backward again). */
static dt_status sync_settle_open_step(dt_model *m, const dt_sync_config *c)
{
    dt_status ws = dt_model_settle_step(m, NULL);
    const int open = m->red && reducer_step_open(m->red);
    const int scattered = open && model_zero(m);
    if (!ws && open) ws = dt_model_sync_grads(m);
    if (ws) return ws;
    if (scattered &&
        (c->zero != m->sync.zero || c->bucket_mb != m->sync.bucket_mb || c->first_bucket_mb != m->sync.first_bucket_mb))
        m->unreduced = dt_world_size(m->ctx) > 1;
    return DT_OK;
}

/* The reducer settings of c for m's gradient buffer (*buf), on m's backend and stream. */
static void sync_reducer_config(dt_model *m, const dt_sync_config *c, void **buf, dt_reducer_config *rc)
{
    dt_reducer_defaults(rc);
    sync_buffer(m, buf, &rc->dtype, &rc->wire);
    rc->memory = m->be->ops->host_memory ? DT_MEMORY_HOST : DT_MEMORY_DEVICE;
    rc->op = c->op;
    rc->bucket_mb = c->bucket_mb;
    rc->first_bucket_mb = c->first_bucket_mb;
    rc->overlap = c->overlap;
    rc->stream = m->be->ops->stream(m->be);
}

/* A new reducer over buf for the settings rc (sharded when zero), its ranges the parameter layers
 * last first (the order backward finishes them), in place of m's. m is unchanged on failure. */
static dt_status sync_new_reducer(dt_model *m, void *buf, const dt_reducer_config *rc, int zero)
{
    dt_range *r = calloc((size_t)m->spec.n, sizeof *r);
    if (!r) return status_set_error(DT_ERR_NOMEM, "out of memory planning buckets");
    int nr = 0;
    for (int i = m->spec.n - 1; i >= 0; i--) {
        const layer *l = &m->spec.layers[i];
        if (l->w_n + l->b_n) r[nr++] = (dt_range){l->w_off, l->w_n + l->b_n};
    }
    dt_reducer *red = NULL;
    dt_status s = dt_reducer_create(m->ctx, buf, m->spec.num_params, r, nr, rc, &red);
    free(r);
    if (!s && zero) s = reducer_set_shard(red, 1);
    if (s) {
        dt_reducer_free(red);
        return s;
    }
    dt_reducer_free(m->red);
    m->red = red;
    return DT_OK;
}

dt_status dt_model_set_sync(dt_model *m, const dt_sync_config *c)
{
    if (!m) return status_null_arg("dt_model_set_sync", "m", "pass the model dt_model_create made");
    const dt_status own =
        !c ? status_null_arg("dt_model_set_sync", "c", "pass a dt_sync_config filled by dt_sync_defaults")
           : sync_check_config(c);
    dt_status s = sync_check_ranks(m, c, own);
    if (!s) s = sync_settle_open_step(m, c);
    if (s) return s;
    if (!m->ctx) { /* a model without a context (unit tests) reduces nothing */
        m->sync = *c;
        return DT_OK;
    }
    const dt_sync_config old = m->sync;
    m->sync = *c;
    dt_reducer_config rc;
    void *buf;
    sync_reducer_config(m, c, &buf, &rc);
    /* The same buckets on the same buffer (dt_model_create's defaults, then the caller's settings):
     * the reducer, and its engine with its thread and communicators, stay; only the reduction,
     * the overlap and the sharding change. */
    if (m->red && reducer_same_plan(m->red, buf, &rc)) {
        s = reducer_set_shard(m->red, c->zero);
        if (!s) s = reducer_retune(m->red, c->op, c->overlap);
        if (s) (void)reducer_set_shard(m->red, old.zero);
    } else {
        s = sync_new_reducer(m, buf, &rc, c->zero);
    }
    if (s) m->sync = old;
    return s;
}

long model_comm_starts(const dt_model *m)
{
    dt_reducer_stats st;
    dt_reducer_get_stats(m->red, &st);
    return m->red && reducer_communicates(m->red) ? st.starts : 0;
}

dt_status dt_model_sync_grads(dt_model *m)
{
    if (!m) return status_null_arg("dt_model_sync_grads", "m", "pass the model dt_model_create made");
    dt_status s = model_group_complete(m, "dt_model_sync_grads");
    if (s) return s;
    /* Nothing to complete when no backward ran since the last call (or there is no context). */
    if (!m->red || !reducer_step_open(m->red)) {
        if (!m->unreduced) return DT_OK;
        /* A backward ran, and its reduction is gone: saying DT_OK here would send the caller to an
         * optimizer step that refuses the unreduced gradients, naming this very call as the fix. */
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_model_sync_grads: the gradients of the last dt_model_forward_backward can no "
                                "longer be reduced (dt_model_set_precision reallocated them, or their reduction "
                                "failed); run dt_model_forward_backward again");
    }
    s = dt_reducer_wait(m->red);
    if (!s) m->unreduced = 0;
    return s;
}
