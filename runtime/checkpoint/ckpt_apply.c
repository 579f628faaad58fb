/*
 * ckpt_apply.c - what both dt_model readers share (the fixed layout of versions 1-3 in
 * ckpt_read.c, the named sections of version 4 in ckpt_read4.c): the checks of the optimizer
 * state, the scaler state, the values and the data block, each message naming the file, the
 * field and both values; and the last step, which copies a file's checked state into the model,
 * the optimizer, the scaler and the caller's data block.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "base/log.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *ckpt_optim_name(uint32_t kind)
{
    if (kind == DT_OPTIM_SGD) return "sgd";
    if (kind == DT_OPTIM_ADAMW) return "adamw";
    if (kind == CKPT_OPTIM_NONE) return "none (weights only)";
    return "unknown";
}

dt_status ckpt_check_optim(const char *path, const char *fields, const char *label1, const char *label2, uint32_t kind,
                           int32_t t, uint64_t n1, uint64_t n2, size_t np, const dt_optimizer *o)
{
    if (kind != DT_OPTIM_SGD && kind != DT_OPTIM_ADAMW && kind != CKPT_OPTIM_NONE)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: %s optim_kind is %u; known kinds are %d (sgd), %d (adamw) "
                                "and %u (none)",
                                path, fields, kind, DT_OPTIM_SGD, DT_OPTIM_ADAMW, CKPT_OPTIM_NONE);
    if (t < 0)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: %s optim_t (the optimizer's step counter) is %d; it must "
                                "be >= 0",
                                path, fields, t);
    /* What each optimizer kind keeps: SGD's momentum may be absent (momentum 0); AdamW keeps both
     * moments; a weights-only file keeps nothing. Any other count is damage. */
    const uint64_t n[3] = {0, n1, n2};
    const char *label[3] = {NULL, label1, label2};
    for (int i = 1; i < 3; i++) {
        int may = kind == DT_OPTIM_ADAMW || (kind == DT_OPTIM_SGD && i == 1);
        int must = kind == DT_OPTIM_ADAMW;
        if (!(n[i] == 0 && !must) && !(n[i] == np && may))
            return status_set_error(DT_ERR_CORRUPT,
                                    "checkpoint %s: %s (optimizer state) claims %llu floats; for optimizer "
                                    "%s it must be %s",
                                    path, label[i], (unsigned long long)n[i], ckpt_optim_name(kind),
                                    must  ? "the parameter count"
                                    : may ? "0 or the parameter count"
                                          : "0");
    }
    if (kind == CKPT_OPTIM_NONE && t != 0)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: a weights-only checkpoint has optimizer step counter %d; "
                                "it must be 0",
                                path, t);
    if (!o) return DT_OK; /* loading weights only: any optimizer state in the file is left unread */
    const optimizer_view v = optimizer_state(o);
    const size_t m1 = v.n1, m2 = v.n2;
    if (kind == CKPT_OPTIM_NONE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s holds weights only (it was saved without an "
                                "optimizer): load it without an optimizer (NULL), or resume from a full checkpoint",
                                path);
    if (kind != (uint32_t)v.cfg.kind)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s holds the state of optimizer %s, this run uses %s: "
                                "resume with the same --optim",
                                path, ckpt_optim_name(kind), ckpt_optim_name((uint32_t)v.cfg.kind));
    if (n1 != m1 || n2 != m2)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s holds %llu + %llu floats of optimizer state, this "
                                "optimizer keeps %zu + %zu (momentum 0 keeps none): resume with the same --momentum",
                                path, (unsigned long long)n1, (unsigned long long)n2, m1, m2);
    return DT_OK;
}

dt_status ckpt_check_scaler(const char *path, double scale, int32_t good_steps, int32_t hysteresis_left,
                            int64_t updates, int64_t skipped)
{
    if (!(isfinite(scale) && scale > 0))
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: scaler field scale is %g; it must be a positive finite "
                                "number",
                                path, scale);
    if (good_steps < 0 || hysteresis_left < 0)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: scaler fields good_steps %d and hysteresis_left %d must "
                                "be >= 0",
                                path, good_steps, hysteresis_left);
    if (updates < 0 || skipped < 0 || skipped > updates)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: scaler fields updates %lld and skipped %lld must satisfy "
                                "0 <= skipped <= updates",
                                path, (long long)updates, (long long)skipped);
    return DT_OK;
}

/* A file that says otherwise would only resurface as a NaN loss blamed on the learning rate. */
dt_status ckpt_check_values(const char *path, const char *label, const float *v, size_t n, int nonneg)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (nonneg && v[i] < 0))
            return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: %s holds %g at index %zu; it must be %s", path,
                                    label, (double)v[i], i, nonneg ? "finite and >= 0" : "finite");
    return DT_OK;
}

dt_status ckpt_check_data(const char *path, int64_t epoch, int64_t offset, uint32_t normalize, uint32_t channels,
                          const float *figures)
{
    if (normalize > 2 || epoch < 0 || offset < 0)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: data block fields normalize %u, epoch %lld, offset %lld "
                                "are out of range",
                                path, normalize, (long long)epoch, (long long)offset);
    for (size_t i = 0; i < 2 * (size_t)channels; i++)
        if (!isfinite(figures[i]) || (i >= channels && figures[i] < 0))
            return status_set_error(
                DT_ERR_CORRUPT, "checkpoint %s: normalization %s %g of channel %zu must be finite%s", path,
                i < channels ? "mean" : "std", (double)figures[i], i % channels, i < channels ? "" : " and >= 0");
    return DT_OK;
}

dt_status ckpt_apply(const char *path, const ckpt_state *st, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                     dt_ckpt_data *data)
{
    /* A GPU model's parameters go up from the host buffer. */
    if (dt_model_on_gpu(m)) {
        dt_status s = model_params_from_host(m, st->sec[0]);
        if (s) return s;
    } else {
        memcpy(dt_model_params(m), st->sec[0], st->n[0] * sizeof(float));
    }
    if (o) {
        const optimizer_view v = optimizer_state(o);
        if (v.n1) memcpy(v.s1, st->sec[1], v.n1 * sizeof(float));
        if (v.n2) memcpy(v.s2, st->sec[2], v.n2 * sizeof(float));
        optimizer_host_changed(o);
        optimizer_set_t(o, st->optim_t);
    }
    if (sc && st->has_scaler) {
        /* Sound values that this run's settings exclude (another --loss-scale-growth-interval, a
         * lower max scale): the parameters are in, and the scaler starts afresh, as for a run
         * that had none. */
        if (!dt_scaler_set_state(sc, &st->scaler)) {
            scaler_window_set(sc, st->window, st->window_n);
        } else {
            log_msg(LOG_LEVEL_WARN,
                    "checkpoint %s: loss-scaler state not usable with this run's settings (%s); the "
                    "loss scale starts again from its initial value",
                    path, dt_last_error());
            scaler_restart(sc);
        }
    } else if (sc) {
        /* As said, whatever the scaler did before the load (a loop that rolls back mid-run): the
         * ranks take this state from rank 0, each with an empty window. */
        log_msg(LOG_LEVEL_WARN,
                "checkpoint %s holds no loss-scaler state (it was saved without one: a run in bf16 or fp32 has "
                "none): the loss scale starts from its initial value",
                path);
        scaler_restart(sc);
    }
    if (data) {
        data->present = st->has_data;
        data->epoch = st->epoch;
        data->offset = st->offset;
        data->normalize = st->normalize;
        if (st->channels && data->mean && data->std) {
            memcpy(data->mean, st->figures, (size_t)st->channels * sizeof(float));
            memcpy(data->std, st->figures + st->channels, (size_t)st->channels * sizeof(float));
        } else if (st->has_data && st->normalize == 2) {
            data->normalize = -1; /* standard, saved without its figures: the caller's own stand */
        }
    }
    return DT_OK;
}

void ckpt_state_free(ckpt_state *st)
{
    for (int i = 0; i < 3; i++) free(st->sec[i]);
    free(st->figures);
    free(st->window);
    memset(st, 0, sizeof *st);
}
