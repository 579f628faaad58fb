/*
 * model_overlap.c - the optimizer step of dt_model_train_step overlapped with the work still under
 * way when a part of the gradients is final (dt_model_set_step_overlap):
 *  - one rank: each parameter layer stepped the moment backward is done with it, on the backend's
 *    side stream (model_sync.c's model_grads_done steps it; model_pass.c joins the side stream);
 *  - more ranks: each bucket stepped the moment its allreduce is done, while the buckets after it
 *    are still being reduced (model_step_by_bucket; host buckets: the training thread waits for
 *    each; NCCL buckets: the compute stream waits for each collective alone, the host not at all).
 * Both only where the step needs nothing of the whole gradient: no loss scaler's verdict, no
 * clipping's norm, the optimizer state not sharded; and both give every element the arithmetic of
 * the one step over the whole buffer (optimizer_step_layer), so the bits of the step after
 * backward.
 *
 * In 16 bits a layer's data gradient reads its 16-bit copy, which its step rewrites: stepped
 * after the data gradient, the last large layer's step (the one beside nothing but the first
 * layer's weight gradient) stays exposed. With a spare copy the step writes the new values
 * there instead and may start as soon as the layer's parameter gradients are final, beside its
 * own data gradient (the backend calls layer_params.grads_ready between the two); the copies
 * swap after the pass. 2 bytes a parameter more, allocated at the first such step.
 */
#include "runtime/model/model_internal.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "collectives/reducer_internal.h"

void dt_model_set_step_overlap(dt_model *m, dt_step_overlap mode)
{
    if (m) m->step_overlap = mode == DT_STEP_OVERLAP_OFF || mode == DT_STEP_OVERLAP_ON ? mode : DT_STEP_OVERLAP_AUTO;
}

dt_step_overlap dt_model_step_overlapped(const dt_model *m)
{
    return m && m->overlapped ? DT_STEP_OVERLAP_ON : DT_STEP_OVERLAP_OFF;
}

/* The setting, and what the step needs of the whole gradient first. */
static int overlap_allowed(const dt_model *m, const dt_optimizer *o, const dt_scaler *sc)
{
    const int on = m->step_overlap == DT_STEP_OVERLAP_ON ||
                   (m->step_overlap == DT_STEP_OVERLAP_AUTO && m->spec.num_params >= DT_STEP_OVERLAP_AUTO_PARAMS);
    return on && o && !sc && !(m->clip_norm > 0) && !m->prof && !model_zero(m) && !optimizer_sharded(o);
}

int model_overlap_layers(const dt_model *m, const dt_optimizer *o, const dt_scaler *sc)
{
    return overlap_allowed(m, o, sc) && m->accum_pos == m->accum_steps - 1 && !(m->ctx && dt_world_size(m->ctx) > 1) &&
           !(m->red && reducer_communicates(m->red));
}

int model_overlap_buckets(const dt_model *m, const dt_optimizer *o, const dt_scaler *sc)
{
    return overlap_allowed(m, o, sc) && m->red && reducer_waits_by_bucket(m->red);
}

dt_status model_step_by_bucket(dt_model *m, dt_optimizer *o, double *comm_wait_s)
{
    /* Every bucket is waited for below before its elements step: what the step reads is reduced. */
    m->unreduced = 0;
    dt_status s = optimizer_layers_begin(m, o);
    const int nb = dt_reducer_num_buckets(m->red);
    trace_rec *tr = trace_active(ctx_trace(m->ctx));
    for (int b = 0; b < nb && !s; b++) {
        dt_range br;
        const double t0 = clock_now_s();
        const uint64_t w0 = tr ? trace_now_ns() : 0;
        if (!(s = dt_reducer_bucket(m->red, b, &br))) s = reducer_wait_bucket(m->red, b);
        *comm_wait_s += clock_now_s() - t0;
        /* Per bucket, the training thread's wait for it and its step (queueing it, on a GPU). */
        const uint64_t w1 = tr ? trace_now_ns() : 0;
        if (tr) trace_rec_add(tr, "grad wait", TRACE_CAT_COMM, TRACE_TRACK_TRAIN, w0, w1, b, -1);
        if (!s) s = optimizer_step_layer(m, o, br.offset, br.count);
        if (tr) trace_rec_add(tr, "optimizer", TRACE_CAT_OPTIM, TRACE_TRACK_TRAIN, w1, trace_now_ns(), b, -1);
    }
    /* Ends the reducer's step (every bucket is done by now; after a failure, waits for the rest). */
    const dt_status w = dt_model_sync_grads(m);
    if (!s) s = w;
    if (!s && m->p16) m->p16_current = 1;
    return s;
}

int model_spare16_ready(dt_model *m)
{
    if (!m->p16 || m->p16_spare_failed) return 0;
    if (m->p16_spare) return 1;
    void *p = NULL;
    const size_t bytes = m->spec.num_params * sizeof(uint16_t);
    if (m->be->ops->alloc(m->be, bytes, "the spare 16-bit parameter copy", &p)) {
        log_msg(LOG_LEVEL_WARN,
                "%s; each layer's optimizer step waits for its data gradient instead (the step overlaps less)",
                dt_last_error());
        status_clear_error();
        m->p16_spare_failed = 1;
        return 0;
    }
    m->p16_spare = m->p16_spare_own = p;
    return 1;
}

void model_spare16_swap(dt_model *m)
{
    uint16_t *t = m->p16;
    m->p16 = m->p16_spare;
    m->p16_spare = t;
    for (int i = 0; i < MODEL_GRAPHS; i++)
        if (m->graph[i].exec) {
            model_graph_drop(m);
            break;
        }
}

uint16_t *model_step16_target(const dt_model *m) { return m->step_early ? m->p16_spare : m->p16; }
