/*
 * model_profile.c - where a model's step time goes (dt_model_set_profile): per-layer forward and
 * backward seconds and the step's phases, measured between marks that wait for the device.
 */
#include "runtime/model/model_internal.h"
#include "base/clock.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

double model_prof_mark(dt_model *m)
{
    if (!m->prof) return 0;
    (void)m->be->ops->sync(m->be); /* a failure shows again at the step's next synchronizing op */
    const double t = clock_now_s(), d = t - m->prof_t;
    m->prof_t = t;
    return d;
}

dt_status dt_model_set_profile(dt_model *m, int on)
{
    if (!m) return status_null_arg("dt_model_set_profile", "m", "pass the model dt_model_create made");
    if (on != 0 && on != 1)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_model_set_profile: on %d must be 0 (off) or 1 (on)", on);
    if (on && !m->prof_fwd) {
        m->prof_fwd = calloc((size_t)m->spec.n, sizeof *m->prof_fwd);
        m->prof_bwd = calloc((size_t)m->spec.n, sizeof *m->prof_bwd);
        if (!m->prof_fwd || !m->prof_bwd) {
            free(m->prof_fwd), free(m->prof_bwd);
            m->prof_fwd = m->prof_bwd = NULL;
            return status_set_error(DT_ERR_NOMEM, "out of memory for the profile");
        }
    }
    if (on) {
        memset(m->prof_fwd, 0, (size_t)m->spec.n * sizeof *m->prof_fwd);
        memset(m->prof_bwd, 0, (size_t)m->spec.n * sizeof *m->prof_bwd);
        memset(&m->prof_step, 0, sizeof m->prof_step);
    }
    m->prof = on;
    return DT_OK;
}

void dt_model_profile(const dt_model *m, dt_step_profile *out)
{
    if (!out) return;
    if (!m) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = m->prof_step;
    out->forward_s = out->backward_s = 0;
    for (int i = 0; m->prof_fwd && i < m->spec.n; i++) {
        out->forward_s += m->prof_fwd[i];
        out->backward_s += m->prof_bwd[i];
    }
}

void dt_model_layer_profile(const dt_model *m, int i, double *forward_s, double *backward_s)
{
    const int ok = m && m->prof_fwd && i >= 0 && i < m->spec.n;
    if (forward_s) *forward_s = ok ? m->prof_fwd[i] : 0;
    if (backward_s) *backward_s = ok ? m->prof_bwd[i] : 0;
}
