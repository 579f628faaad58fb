/*
 * perfmodel_step.c - the step half of the step-time model (perfmodel.h): backward runs the layers
 * last first; the reducer's own planner cuts the gradient buffer into buckets; a bucket's allreduce
 * starts once backward has finished all of its layers and the previous allreduce has left the link
 * (the engine runs one collective at a time, in bucket order), or after backward without overlap.
 */
#include "launch/perfmodel/perfmodel.h"
#include "collectives/bucket.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>

/* The layers with parameters as ranges in backward order, and each range's layer. */
static dt_status backward_ranges(const pm_model *m, dt_range **r, int **layer_of, int *nr)
{
    *r = calloc((size_t)m->nlayers + 1, sizeof **r);
    *layer_of = calloc((size_t)m->nlayers + 1, sizeof **layer_of);
    if (!*r || !*layer_of) {
        free(*r), free(*layer_of);
        return status_set_error(DT_ERR_NOMEM, "model-perf: out of memory for %d layers", m->nlayers);
    }
    *nr = 0;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        if (!(m->layers[i].bwd_s >= 0)) {
            free(*r), free(*layer_of);
            return status_set_error(DT_ERR_INVALID_ARG, "layer %d's backward time %g s is not a time >= 0", i,
                                    m->layers[i].bwd_s);
        }
        if (!m->layers[i].n) continue;
        (*r)[*nr] = (dt_range){m->layers[i].off, m->layers[i].n};
        (*layer_of)[(*nr)++] = i;
    }
    return DT_OK;
}

dt_status pm_step_time(const pm_model *m, const pm_net *net, const pm_sync *sync, pm_step *out)
{
    if (!(m->forward_s >= 0) || !(m->after_s >= 0))
        return status_set_error(DT_ERR_INVALID_ARG, "forward %g s / after-backward %g s must be times >= 0",
                                m->forward_s, m->after_s);
    dt_status s = bucket_caps_check("model-perf", sync->bucket_mb, sync->first_bucket_mb);
    if (s) return s;
    dt_range *r;
    int *layer_of, nr = 0;
    s = backward_ranges(m, &r, &layer_of, &nr);
    if (s) return s;
    /* When backward finishes each layer, from its start. */
    double *done = calloc((size_t)m->nlayers + 1, sizeof *done);
    bucket_plan plan = {0};
    if (!done) s = status_set_error(DT_ERR_NOMEM, "model-perf: out of memory for %d layers", m->nlayers);
    if (!s && nr)
        s = bucket_plan_ranges(m->count, r, nr, m->elem_bytes, bucket_cap_bytes(sync->first_bucket_mb),
                               bucket_cap_bytes(sync->bucket_mb), &plan);
    if (s) {
        free(r), free(layer_of), free(done);
        return s;
    }
    double t = 0;
    for (int i = m->nlayers - 1; i >= 0; i--) done[i] = t += m->layers[i].bwd_s;
    const double backward_s = t;
    double link_free = 0, comm = 0;
    for (int b = 0; b < plan.nb; b++) {
        double ready = 0;
        for (int k = 0; k < plan.b[b].nranges; k++) ready = fmax(ready, done[layer_of[plan.b[b].first_range + k]]);
        const double start = fmax(sync->overlap ? ready : backward_s, link_free);
        const double dur = pm_allreduce_time(net, sync->algo, (double)plan.b[b].n * (double)m->wire_bytes);
        link_free = start + dur;
        comm += dur;
    }
    out->compute_s = m->forward_s + backward_s + m->after_s;
    out->step_s = m->forward_s + fmax(backward_s, link_free) + m->after_s;
    out->comm_s = comm;
    out->exposed_s = out->step_s - out->compute_s;
    out->efficiency = out->step_s > 0 ? out->compute_s / out->step_s : 1;
    out->nbuckets = plan.nb;
    bucket_plan_free(&plan);
    free(r), free(layer_of), free(done);
    return DT_OK;
}

dt_status pm_best_bucket(const pm_model *m, const pm_net *net, const pm_sync *sync, const double *caps, int ncaps,
                         double *best_mb, pm_step *best)
{
    if (ncaps < 1) return status_set_error(DT_ERR_INVALID_ARG, "no bucket sizes to choose from");
    for (int i = 0; i < ncaps; i++) {
        pm_sync s = *sync;
        s.bucket_mb = caps[i];
        pm_step st;
        dt_status rc = pm_step_time(m, net, &s, &st);
        if (rc) return rc;
        /* A real improvement only: equal steps (a cap larger than the model) keep the smaller cap. */
        if (i == 0 || st.step_s < best->step_s * (1 - 1e-9)) {
            *best = st;
            *best_mb = caps[i];
        }
    }
    return DT_OK;
}
