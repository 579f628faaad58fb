/*
 * model_step.c - the whole training step (dt_model_train_step) and gradient accumulation: groups
 * of k forward/backward passes whose gradients are summed and reduced once.
 *
 * Accumulation keeps the running sum of a group's earlier micro-batches in its own fp32 buffer
 * (gacc) rather than asking every backward kernel to add into the gradients: the kernels (CPU,
 * CUDA, 16-bit) keep overwriting, and the sum is folded in per layer the moment backward finishes
 * that layer (model_accum_layer, from model_grads_done), so on a group's last micro-batch each
 * bucket still starts its allreduce as soon as its layers are done, with the whole group's sum in
 * it. The price is one more buffer and one pass over each layer's gradients per micro-batch.
 */
#include "runtime/model/model_internal.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_verdict.h"
#include "collectives/reducer_internal.h"

#include <math.h>
#include <string.h>

#define ACCUM_MAX 65536

dt_status dt_model_set_accum_steps(dt_model *m, int k)
{
    static const char fn[] = "dt_model_set_accum_steps";
    if (!m) return status_null_arg(fn, "m", "pass the model dt_model_create made");
    dt_status s = DT_OK;
    if (k < 1 || k > ACCUM_MAX)
        s = status_set_error(DT_ERR_INVALID_ARG,
                             "--accum-steps %d must be from 1 to %d micro-batches per optimizer step", k, ACCUM_MAX);
    /* Only a pending verdict is taken: a reduction under way reads the gradients, never the
     * accumulation buffer, and stays open for dt_model_sync_grads. */
    if (!s) s = dt_model_settle_step(m, NULL);
    void *p = NULL; /* the sum buffer, had before the ranks compare k, so that a rank without the
                       memory fails every rank instead of leaving them to reduce without it */
    if (!s && k > 1 && !m->gacc) {
        const size_t n = m->spec.num_params ? m->spec.num_params : 1;
        s = m->be->ops->alloc(m->be, n * sizeof(float), "the gradient accumulation buffer", &p);
    }
    /* A rank that reduced every micro-batch while its peers reduce every k-th would wait in an
     * allreduce they never start: the ranks compare k before any of them changes it. */
    s = rank_agree_status(m->ctx, s, s ? 0 : k, fn, "accum_steps", rank_value_int,
                          "; no rank changed its accumulation");
    if (s) {
        if (p) m->be->ops->free(m->be, p);
        return s;
    }
    if (p) {
        m->gacc = p;
    } else if (k == 1 && m->gacc) {
        m->be->ops->free(m->be, m->gacc);
        m->gacc = NULL;
    }
    m->accum_steps = k;
    m->accum_pos = 0;
    return DT_OK;
}

int dt_model_accum_steps(const dt_model *m) { return m ? m->accum_steps : 0; }
int dt_model_accum_pos(const dt_model *m) { return m ? m->accum_pos : 0; }

dt_status model_group_complete(const dt_model *m, const char *fn)
{
    if (m->accum_pos == 0) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "%s: the accumulation group is at micro-batch %d of %d; the gradients "
                            "are reduced, unscaled and stepped on once per group, after its last "
                            "dt_model_forward_backward (dt_model_set_accum_steps)",
                            fn, m->accum_pos, m->accum_steps);
}

dt_status model_accum_layer(dt_model *m, int i, int *ends)
{
    *ends = 1;
    if (m->accum_steps == 1) return DT_OK;
    const layer *l = &m->spec.layers[i];
    const size_t off = l->w_off, cnt = l->w_n + l->b_n;
    /* The first micro-batch of a group has nothing to add; the last has nothing to keep. */
    const int add = m->accum_pos > 0, store = !m->accum_last;
    *ends = m->accum_last;
    return m->be->ops->accum_grads(m->be, model_grad_type(m), (char *)model_grad_buf(m) + off * model_grad_esize(m),
                                   m->gacc + off, cnt, add, store);
}

/* dt_model_forward_backward with what the caller knows of the group's risk: at_risk 1 when an
 * overflow in it would end the run (or nobody knows), which an AT_RISK finite check runs on. */
static dt_status forward_backward_group(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                                        double *loss_sum, int *correct, int at_risk)
{
    m->accum_last = m->accum_pos == m->accum_steps - 1;
    /* The local finite check names the first layer that went non-finite anywhere in the group:
     * flags of earlier groups no longer count. */
    if (m->accum_pos == 0) {
        m->group_pass = m->fb_count + 1;
        m->check_group =
            m->check_local == DT_NONFINITE_CHECK_ON || (m->check_local == DT_NONFINITE_CHECK_AT_RISK && at_risk);
    }
    dt_status s = model_forward_backward(m, x, labels, batch, grad_scale, loss_sum, correct);
    if (s) return s;
    m->accum_pos = m->accum_last ? 0 : m->accum_pos + 1;
    return DT_OK;
}

/* grad_scale multiplies every gradient: NaN or inf would make them all NaN or inf, 0 all zero, a
 * negative one would step uphill, each with DT_OK. Refused before the pass, as a bad argument. */
static dt_status grad_scale_check(const char *fn, float grad_scale)
{
    if (grad_scale > 0 && isfinite(grad_scale)) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "%s: grad_scale %g must be a positive finite number (1 / batch for this rank's mean "
                            "loss)",
                            fn, (double)grad_scale);
}

dt_status dt_model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                                    double *loss_sum, int *correct)
{
    static const char fn[] = "dt_model_forward_backward";
    dt_status as = model_batch_args(fn, m, x, labels, 1, loss_sum, correct);
    if (!as) as = grad_scale_check(fn, grad_scale);
    if (as) return as;
    const dt_status s = forward_backward_group(m, x, labels, batch, grad_scale, loss_sum, correct, 1);
    return s ? model_input_abandon(m, s) : s; /* as dt_model_train_step */
}

void model_test_verdict_sync(dt_model *m, int on) { m->verdict_sync = on != 0; }

/* Whether a step scaled by ls may queue its finite check with the optimizer step behind it, the
 * step reading the verdict on the device (optim_grads.skip), so that the host waits for the
 * verdict beside the step instead of the device waiting, idle, for the host to queue the step
 * after reading it. Only where nothing else wants the verdict first: no clipping (its norm is
 * read on the host and skipped on an overflow), no profile (its boundaries wait for each phase),
 * the whole optimizer state on this rank (ZeRO-1 sums its counts across the ranks on the host),
 * and an unscale the optimizer step can apply as it reads (16-bit gradients, or a scale of at
 * least 1: model_unscale_deferred's rule). */
static int verdict_queued(const dt_model *m, const dt_optimizer *o, float ls)
{
    return !m->verdict_sync && m->be->ops->found_inf_queue && m->clip_norm == 0 && !m->prof && !model_zero(m) &&
           !optimizer_sharded(o) && model_unscale_can_defer(m, 1.0f / ls);
}

/* dt_model_optimizer_step with its span on the training thread's track when a trace records. */
static dt_status traced_optimizer_step(dt_model *m, dt_optimizer *o)
{
    trace_rec *tr = trace_active(ctx_trace(m->ctx));
    const uint64_t t_opt = tr ? trace_now_ns() : 0;
    const dt_status s = dt_model_optimizer_step(m, o);
    if (tr) trace_rec_add(tr, "optimizer", TRACE_CAT_OPTIM, TRACE_TRACK_TRAIN, t_opt, trace_now_ns(), 0, -1);
    return s;
}

/* The tail a step graph may hold for this step (model_tail): the optimizer step (behind the
 * queued verdict with a scaler) where nothing needs the host between the pass and the step: one
 * rank's gradients (no reducer that sends), no accumulation, no layer-by-layer step, and what
 * verdict_queued asks of the scaled step. Whether the pass runs as a graph at all is
 * model_graph.c's to say. */
static model_tail step_tail(dt_model *m, dt_optimizer *o, const dt_scaler *sc, float ls, int by_layer)
{
    model_tail t = {0}; /* none, as dt_model_create leaves it */
    if (!m->be->ops->graph_begin || m->graphs == DT_GRAPHS_OFF || by_layer || m->accum_steps != 1 ||
        (m->red && reducer_communicates(m->red)) || m->clip_norm != 0 || m->prof || model_zero(m) ||
        optimizer_sharded(o) || (sc && !verdict_queued(m, o, ls)) || !optimizer_graph_ready(m, o))
        return t;
    t.o = o;
    optimizer_baked(m, o, &t.baked); /* after optimizer_graph_ready: the state is where it steps */
    t.verdict = sc != NULL;
    t.inv_scale = sc ? 1.0f / ls : 1.0f;
    return t;
}

dt_status model_tail_queue(dt_model *m)
{
    backend *be = m->be;
    const model_tail *t = &m->tail;
    int *flag = t->verdict ? m->dflags + m->spec.n : NULL;
    if (flag) {
        const dt_status s =
            be->ops->found_inf_queue(be, model_grad_type(m), model_grad_buf(m), m->spec.num_params, flag);
        if (s) return s;
    }
    /* The gradients as the step outside a graph reads them (step_behind_verdict, or the plain
     * step: inv_scale 1). */
    m->inv_scale = t->inv_scale;
    m->pending32 = !m->g16;
    optim_grads g = model_optim_grads(m);
    g.skip = flag;
    g.live = m->live_dev;
    return optimizer_queue_whole(m, t->o, &g);
}

void dt_model_set_deferred_verdict(dt_model *m, int on)
{
    if (m) m->defer_verdict = on != 0;
}
int model_verdict_pending(const dt_model *m) { return m->verdict.pending; }

dt_status dt_model_settle_step(dt_model *m, int *skipped)
{
    if (skipped) *skipped = 0;
    if (!m) return status_null_arg("dt_model_settle_step", "m", "pass the model dt_model_create made");
    if (!m->verdict.pending) return DT_OK;
    const struct model_verdict v = m->verdict;
    m->verdict.pending = 0; /* taken once, also when the wait fails */
    int found = 0;
    dt_status s = m->be->ops->found_inf_wait(m->be, m->dflags + m->spec.n, &found);
    if (s) return s;
    if (found) {
        /* The step queued behind the verdict changed nothing: not counted, and the 16-bit copy
         * is current only if it was before the step and nothing wrote the parameters since. */
        optimizer_set_t(v.o, v.t_was);
        m->p16_current = m->p16_current && v.p16_was;
    } else {
        m->overlapped = 0;
    }
    if (skipped) *skipped = found;
    return dt_scaler_update(v.sc, found);
}

/* The step behind a queued verdict: the bits of the order check, verdict, step (a step that
 * overflowed changes nothing and is not counted, its 16-bit copy still current if it was), with
 * the scaler updated on the same verdict. in_graph: the step graph just launched held the check
 * and the step (model_tail_queue); else they are queued here. The verdict is taken here, or with
 * deferred verdicts on, left pending for dt_model_settle_step (r->pending). */
static dt_status step_behind_verdict(dt_model *m, dt_optimizer *o, dt_scaler *sc, float ls, int in_graph,
                                     dt_step_result *r)
{
    backend *be = m->be;
    int *flag = m->dflags + m->spec.n;
    dt_status s = DT_OK;
    if (!in_graph &&
        (s = be->ops->found_inf_queue(be, model_grad_type(m), model_grad_buf(m), m->spec.num_params, flag)))
        return s;
    m->inv_scale = 1.0f / ls; /* pending, as model_unscale_deferred leaves it */
    m->pending32 = !m->g16;
    const int p16_was = m->p16_current, t_was = optimizer_state(o).t;
    if (in_graph) {
        optimizer_graph_stepped(m, o);
    } else {
        m->opt_skip = flag;
        s = traced_optimizer_step(m, o);
        m->opt_skip = NULL;
        if (s) return s;
    }
    m->verdict = (struct model_verdict){.pending = 1, .o = o, .sc = sc, .t_was = t_was, .p16_was = p16_was};
    if (m->defer_verdict) {
        r->pending = 1;
        return DT_OK;
    }
    s = dt_model_settle_step(m, &r->skipped);
    if (!s && !r->skipped) r->stepped = 1;
    return s;
}

/* The end of a step whose parameter layers each stepped as backward finished them
 * (model_overlap_layers). early: they stepped into the spare 16-bit copy. */
static dt_status finish_by_layer(dt_model *m, int early, dt_step_result *r)
{
    /* One rank: closes the reducer's step (nothing was sent). Every parameter layer stepped
     * as backward finished it, the 16-bit copy with it. */
    dt_status s = dt_model_sync_grads(m);
    if (s) {
        if (early) model_params_changed(m); /* the copy the forward reads is the old one */
        return s;
    }
    /* Stepped early: the spare holds the new copy whole (every layer wrote its part). */
    if (early) model_spare16_swap(m);
    if (m->p16) m->p16_current = 1;
    m->prof_step.optimizer_s += model_prof_mark(m);
    r->stepped = 1;
    m->overlapped = 1;
    return DT_OK;
}

/* The end of a step after its whole backward: the wait for the gradients' reduction, the loss
 * scaler's verdict (ls: the step's loss scale), clipping and the optimizer step. in_graph: the
 * step graph held the optimizer step. */
static dt_status finish_whole(dt_model *m, dt_optimizer *o, dt_scaler *sc, float ls, int in_graph, dt_step_result *r)
{
    dt_status s;
    const double t0 = clock_now_s();
    trace_rec *tw = trace_active(ctx_trace(m->ctx));
    const uint64_t t_wait = tw ? trace_now_ns() : 0;
    if ((s = dt_model_sync_grads(m))) return s;
    r->comm_wait_s = clock_now_s() - t0;
    /* The training thread's wait for the buckets still in flight after backward. */
    if (tw) trace_rec_add(tw, "grad wait", TRACE_CAT_COMM, TRACE_TRACK_TRAIN, t_wait, trace_now_ns(), 0, -1);
    m->prof_step.allreduce_s += model_prof_mark(m);
    if (sc && (in_graph || verdict_queued(m, o, ls))) return step_behind_verdict(m, o, sc, ls, in_graph, r);
    if (in_graph) {
        /* The graph held the step (no scaler: nothing to decide). */
        m->pending32 = !m->g16;
        optimizer_graph_stepped(m, o);
        r->stepped = 1;
        m->overlapped = 0;
        return DT_OK;
    }
    if (sc) {
        /* The reduced gradients are the same on every rank, and so is the verdict. */
        /* Checked only: the unscale (and clipping's coefficient) are applied as the norm and the
         * optimizer step read the gradients, saving a write of every gradient. */
        if ((s = model_unscale_deferred(m, 1.0f / ls, &r->skipped))) return s;
        if ((s = dt_scaler_update(sc, r->skipped))) return s;
        m->prof_step.check_s += model_prof_mark(m);
    }
    if (r->skipped) {
        if (m->clip_norm > 0) r->grad_norm = INFINITY; /* overflowed: not computed, no clipping */
        return DT_OK;
    }
    /* Clipping sees the unscaled gradients, as torch's scaler.unscale_ then clip_grad_norm_ does;
     * its coefficient too is left to the optimizer step (no pass over fp32 gradients of its own). */
    m->pending32 = !m->g16;
    if (m->clip_norm > 0 && (s = dt_model_clip_grad_norm(m, m->clip_norm, &r->grad_norm))) return s;
    s = traced_optimizer_step(m, o);
    m->prof_step.optimizer_s += model_prof_mark(m);
    if (!s) {
        r->stepped = 1;
        m->overlapped = 0;
    }
    return s;
}

static dt_status train_step(dt_model *m, dt_optimizer *o, dt_scaler *sc, const float *x, const int32_t *labels,
                            int batch, float grad_scale, dt_step_result *r)
{
    memset(r, 0, sizeof *r);
    r->grad_norm = NAN;
    /* The last step's verdict first: this step's scale and step count follow from it. */
    dt_status s = dt_model_settle_step(m, NULL);
    if (s) return s;
    /* The scale changes only at dt_scaler_update, once per group, so every micro-batch of a group
     * is scaled alike and the sum unscales with one factor. */
    const float ls = sc ? dt_scaler_scale(sc) : 1.0f;
    if (!isfinite(grad_scale * ls))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_model_train_step: grad_scale %g times the loss scale %g is not finite: pass a "
                                "smaller grad_scale (1 / batch) or lower the scaler's max_scale",
                                (double)grad_scale, (double)ls);
    /* An AT_RISK finite check reads every layer's gradients only in groups whose overflow would
     * stop the run: the give-up message names the layer, and healthy steps skip the reads. */
    const int at_risk = !sc || scaler_overflow_ends_run(sc);
    const int by_layer = model_overlap_layers(m, o, sc);
    const int t_was = optimizer_state(o).t;
    if (by_layer && (s = optimizer_layers_begin(m, o))) return s;
    m->layer_opt = by_layer ? o : NULL;
    m->layers_stepped = 0;
    /* In 16 bits each layer may step before its data gradient, into the spare copy. */
    m->step_early = by_layer && model_spare16_ready(m);
    m->tail = step_tail(m, o, sc, ls, by_layer);
    m->tail_ran = 0;
    s = forward_backward_group(m, x, labels, batch, grad_scale * ls, &r->loss_sum, &r->correct, at_risk);
    const int in_graph = m->tail_ran;
    const int early = m->step_early;
    m->step_early = 0;
    m->layer_opt = NULL;
    m->tail = (model_tail){0};
    m->tail_ran = 0;
    if (s && by_layer) {
        /* A pass that failed before any layer stepped counts no step; a layer's step that failed
         * may have left its part of the 16-bit copy half written. */
        if (!m->layers_stepped) optimizer_set_t(o, t_was);
        model_params_changed(m);
    }
    if (s) return s;
    if (by_layer) return finish_by_layer(m, early, r);
    if (m->accum_pos != 0) return DT_OK; /* the group goes on: nothing to send or step yet */
    if (model_overlap_buckets(m, o, sc)) {
        s = model_step_by_bucket(m, o, &r->comm_wait_s);
        if (!s) r->stepped = m->overlapped = 1;
        return s;
    }
    return finish_whole(m, o, sc, ls, in_graph, r);
}

dt_status dt_model_train_step(dt_model *m, dt_optimizer *o, dt_scaler *sc, const float *x, const int32_t *labels,
                              int batch, float grad_scale, dt_step_result *r)
{
    static const char fn[] = "dt_model_train_step";
    const dt_status as = model_batch_args(fn, m, x, labels, 0, NULL, NULL);
    if (as) return as;
    if (!o) return status_null_arg(fn, "o", "pass the optimizer that steps the model (dt_optimizer_create)");
    if (!r) return status_null_arg(fn, "r", "pass a dt_step_result to fill");
    const dt_status gs = grad_scale_check(fn, grad_scale);
    if (gs) return gs;
    const dt_status s = train_step(m, o, sc, x, labels, batch, grad_scale, r);
    /* A batch staged for this step and not read (a failure before the pass placed it): its copy is
     * waited for, so the caller may reuse the buffer, and it is not taken for a later step's. */
    return s ? model_input_abandon(m, s) : s;
}
