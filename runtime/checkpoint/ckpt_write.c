/*
 * ckpt_write.c - dt_model's checkpoints (dt_checkpoint_save): the model, its
 * optimizer, the loss scaler and the data block as named sections of the one checkpoint writer
 * (ckpt_writer.c), format version 4 (ckpt_format.h).
 *
 * Every rank holds the same parameters and optimizer state, so only rank 0's bytes are read: the
 * sections refer to the model's own host arrays (nothing is copied; they do not change before the
 * commit returns), and a GPU model's parameters and optimizer state are copied down on rank 0
 * first. The commit is collective: every rank learns whether the write worked.
 */
#include "runtime/checkpoint/ckpt_extra.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0's copy of what goes into the file; the sections point into it (and into the model). */
typedef struct model_blocks {
    ckpt4_model meta;
    ckpt4_scaler scaler;
} model_blocks;

/* The readers refuse a file holding a value that is not finite (or a negative second moment or
 * std): at resume such a file is skipped for an older one, or for none, and the run silently starts
 * again from there. So the writer refuses to write it, naming the value, while the older
 * checkpoints are still on disk. what names the array as the file does ("params", "optim.v"). */
static dt_status check_values(const char *what, const float *v, size_t n, int nonneg)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (nonneg && v[i] < 0))
            return status_set_error(DT_ERR_NUMERIC,
                                    "dt_checkpoint_save: %s[%zu] is %g; a checkpoint holds %s values only (the "
                                    "readers refuse others): the training diverged before this step, so resume from "
                                    "an earlier checkpoint with a lower learning rate or with loss scaling",
                                    what, i, (double)v[i], nonneg ? "finite, non-negative" : "finite");
    return DT_OK;
}

/* The data block's figures, as the readers check them: finite means, finite stds >= 0. */
static dt_status check_figures(const dt_ckpt_data *data, uint32_t ch)
{
    for (uint32_t i = 0; i < 2 * ch; i++) {
        const float x = i < ch ? data->mean[i] : data->std[i - ch];
        if (!isfinite(x) || (i >= ch && x < 0))
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "dt_checkpoint_save: data block %s[%u] is %g; pass the normalization's "
                                    "per-channel %s (the readers refuse others)",
                                    i < ch ? "mean" : "std", i % ch, (double)x,
                                    i < ch ? "means, finite" : "standard deviations, finite and >= 0");
    }
    return DT_OK;
}

/* A GPU model's parameters (and its optimizer's state) copied down on rank 0: *host the copy, the
 * caller's to free or hand over, and *params pointed at it; NULL and unchanged elsewhere. A
 * failure marks the writer failed. */
static dt_status copy_down(dt_ckpt_writer *w, const dt_model *m, const dt_optimizer *o, size_t np, const float **params,
                           float **host)
{
    *host = NULL;
    if (ckpt_writer_rank(w) != 0 || !dt_model_on_gpu(m)) return DT_OK;
    dt_status s;
    if (!(*host = malloc(np ? np * sizeof **host : 1))) {
        status_set_error(DT_ERR_NOMEM, "out of host memory for the checkpoint's parameters (%.1f MiB)",
                         (double)np * sizeof(float) / 1048576.0);
        return ckpt_writer_fail(w, DT_ERR_NOMEM);
    }
    if ((s = dt_model_get_params(m, *host)) || (o && (s = optimizer_to_host((dt_optimizer *)o)))) {
        free(*host);
        *host = NULL;
        return ckpt_writer_fail(w, s);
    }
    *params = *host;
    return DT_OK;
}

/* The meta section, then the parameters (host: rank 0's copy of a GPU model's, handed over; else
 * params, rank 0's own) and the optimizer's moments of v. The same sections on every rank; only
 * rank 0's bytes are read. */
static dt_status add_state(dt_ckpt_writer *w, model_blocks *b, float *host, const float *params, size_t np,
                           const optimizer_view *v)
{
    const int root = ckpt_writer_rank(w) == 0;
    dt_status s;
    /* The meta section first: a reader finds what the file is before anything else. The same order
     * on every rank, a GPU model's rank 0 included: the commit compares the ranks' lists, and one
     * that differs fails the save everywhere. */
    if ((s = ckpt_writer_add_ref(w, CKPT4_MODEL, &b->meta, sizeof b->meta))) {
        free(host);
        return s;
    }
    /* add_owned takes host over (it frees it on a failure too). */
    s = host ? ckpt_writer_add_owned(w, CKPT4_PARAMS, host, np * sizeof(float))
             : ckpt_writer_add_ref(w, CKPT4_PARAMS, root ? params : NULL, np * sizeof(float));
    if (s) return s;
    if (v->n1 && (s = ckpt_writer_add_ref(w, CKPT4_MOMENT1, root ? v->s1 : NULL, v->n1 * sizeof(float)))) return s;
    if (v->n2 && (s = ckpt_writer_add_ref(w, CKPT4_MOMENT2, root ? v->s2 : NULL, v->n2 * sizeof(float)))) return s;
    return DT_OK;
}

/* The loss scaler's state (into *out, which the section refers to) and its window of recent
 * overflows, so that a resumed run gives up where this one would. */
static dt_status add_scaler(dt_ckpt_writer *w, const dt_scaler *sc, ckpt4_scaler *out)
{
    dt_scaler_state st;
    dt_scaler_get_state(sc, &st);
    *out = (ckpt4_scaler){.scale = st.scale,
                          .good_steps = st.good_steps,
                          .hysteresis_left = st.hysteresis_left,
                          .updates = st.updates,
                          .skipped = st.skipped};
    dt_status s;
    if ((s = ckpt_writer_add_ref(w, CKPT4_SCALER, out, sizeof *out))) return s;
    const int n = scaler_window_len(sc);
    unsigned char *win = malloc(sizeof(uint32_t) + (size_t)n);
    if (!win) {
        status_set_error(DT_ERR_NOMEM, "out of host memory for the checkpoint's loss-scaler window");
        return ckpt_writer_fail(w, DT_ERR_NOMEM);
    }
    const uint32_t count = (uint32_t)scaler_window_get(sc, win + sizeof count, n);
    memcpy(win, &count, sizeof count);
    return ckpt_writer_add_owned(w, CKPT4_SCALER_WINDOW, win, sizeof count + count);
}

/* The data block: where the data stands (epoch, offset) and its normalization's figures. */
static dt_status add_data(dt_ckpt_writer *w, const dt_ckpt_data *data)
{
    const uint32_t ch = data->mean && data->std && data->channels > 0 ? (uint32_t)data->channels : 0;
    const size_t bytes = sizeof(ckpt4_data) + 2 * (size_t)ch * sizeof(float);
    unsigned char *buf = calloc(1, bytes);
    if (!buf) {
        status_set_error(DT_ERR_NOMEM, "out of host memory for the checkpoint's data block");
        return ckpt_writer_fail(w, DT_ERR_NOMEM);
    }
    const ckpt4_data cd = {
        .epoch = data->epoch, .offset = data->offset, .normalize = (uint32_t)data->normalize, .channels = ch};
    memcpy(buf, &cd, sizeof cd);
    if (ch) {
        memcpy(buf + sizeof cd, data->mean, ch * sizeof(float));
        memcpy(buf + sizeof cd + ch * sizeof(float), data->std, ch * sizeof(float));
    }
    return ckpt_writer_add_owned(w, CKPT4_DATA, buf, bytes);
}

static dt_status add_model(dt_ckpt_writer *w, const dt_model *m, const dt_optimizer *o, const dt_scaler *sc,
                           const dt_ckpt_data *data, model_blocks *b)
{
    const int root = ckpt_writer_rank(w) == 0;
    const size_t np = dt_model_num_params(m);
    optimizer_view v = {.t = 0};
    dt_status s;
    const float *params = model_params_const(m);
    float *host; /* rank 0's host copy of a GPU model's parameters, what the file gets */
    if ((s = copy_down(w, m, o, np, &params, &host))) return s;
    if (o) v = optimizer_state(o);
    /* Only rank 0's bytes reach the file, so only its values are checked. A bad one marks the
     * writer failed and the sections are still added: every rank's list stays the same, so the
     * commit gives every rank rank 0's reason rather than a list that differs. */
    if (root && ((s = check_values(CKPT4_PARAMS, params, np, 0)) || (s = check_values(CKPT4_MOMENT1, v.s1, v.n1, 0)) ||
                 (s = check_values(CKPT4_MOMENT2, v.s2, v.n2, 1))))
        ckpt_writer_fail(w, s);
    memset(b, 0, sizeof *b);
    b->meta.fingerprint = model_fingerprint(m);
    b->meta.nparams = np;
    b->meta.optim_kind = o ? (uint32_t)v.cfg.kind : CKPT_OPTIM_NONE;
    b->meta.optim_t = v.t;
    if ((s = add_state(w, b, host, params, np, &v))) return s;
    if (sc && (s = add_scaler(w, sc, &b->scaler))) return s;
    if (data && (s = add_data(w, data))) return s;
    return DT_OK;
}

dt_status dt_checkpoint_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                             const dt_scaler *sc, const dt_ckpt_data *data, long step)
{
    return ckpt_save_model_with(ctx, dir, m, o, sc, data, step, NULL);
}

dt_status ckpt_save_model_with(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                               const dt_scaler *sc, const dt_ckpt_data *data, long step, const ckpt_extra *extra)
{
    if (!dir || !*dir) return status_set_error(DT_ERR_INVALID_ARG, "no checkpoint directory given");
    if (!m) return status_set_error(DT_ERR_INVALID_ARG, "dt_checkpoint_save: the model is NULL");
    if (step < 0 || step > CKPT_MAX_STEP)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_checkpoint_save: step %ld must be 0 to 10^18-1", step);
    /* A step still waiting for its verdict may yet be uncounted: the state is not the step's. */
    if (model_verdict_pending(m))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_checkpoint_save: the last step's loss-scale verdict is still pending "
                                "(dt_model_set_deferred_verdict); call dt_model_settle_step first");
    if (data && (data->epoch < 0 || data->offset < 0 || data->normalize < 0 || data->normalize > 2 ||
                 data->channels < 0 || (unsigned)data->channels > CKPT_MAX_CHANNELS))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_checkpoint_save: data block epoch %ld offset %ld normalize %d "
                                "channels %d out of range",
                                data->epoch, data->offset, data->normalize, data->channels);
    dt_status s;
    /* Every rank holds the same data block, so this verdict is the same on all of them. */
    if (data && data->mean && data->std && data->channels > 0 && (s = check_figures(data, (uint32_t)data->channels)))
        return s;
    trace_rec *tr = trace_active(ctx_trace(ctx));
    const uint64_t t0 = tr ? trace_now_ns() : 0;
    /* --zero 1: the state sharded over the ranks is gathered at full size first, so the file is the
     * one --zero 0 writes and any world size reads it. The gather only fills the optimizer's
     * checkpoint view (neither the model nor the state changes), hence the casts. */
    s = model_zero_full_begin((dt_model *)m, (dt_optimizer *)o);
    if (s) return s;
    dt_ckpt_writer *w;
    if ((s = dt_ckpt_begin(ctx, dir, step, &w))) {
        model_zero_full_end((dt_optimizer *)o);
        return s;
    }
    model_blocks b;
    if ((s = add_model(w, m, o, sc, data, &b)) ||
        (extra && (s = ckpt_writer_add_ref(w, extra->name, extra->data, extra->bytes))))
        ckpt_writer_fail(w, s); /* the commit reports it on every rank */
    s = dt_ckpt_commit(w);
    model_zero_full_end((dt_optimizer *)o);
    /* The whole save, collective parts included, on the training track. */
    if (tr) trace_rec_add(tr, "checkpoint", TRACE_CAT_CKPT, TRACE_TRACK_TRAIN, t0, trace_now_ns(), step, -1);
    return s;
}
