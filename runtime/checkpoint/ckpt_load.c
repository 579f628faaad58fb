/*
 * ckpt_load.c - resuming a dt_model: rank 0 finds the newest checkpoint in a directory that passes
 * every check (ckpt_read.c; any format version), skipping damaged ones with a warning that names
 * them, and every rank gets its state by broadcast.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_verdict.h"
#include "base/log.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0: the newest loadable checkpoint. *found = -1 when none; DT_ERR_INVALID_ARG for a sound
 * checkpoint of another model or optimizer (a user error, not damage: nothing older is tried). */
static dt_status load_newest(const char *dir, dt_model *m, dt_optimizer *o, dt_scaler *sc, dt_ckpt_data *data,
                             long *found, int *saved_world, const ckpt_beat *beat)
{
    ckpt_entry *e;
    size_t n;
    *found = -1;
    dt_status s = ckpt_list(dir, &e, &n);
    if (s) return s;
    size_t skipped = 0;
    for (size_t i = 0; i < n && *found < 0; i++) {
        char path[4200];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e[i].name) >= sizeof path) {
            s = status_set_error(DT_ERR_INVALID_ARG, "checkpoint directory name is too long (%zu characters)",
                                 strlen(dir));
            break;
        }
        long st = -1;
        int w = 1;
        dt_status r = ckpt_read_file_data(path, e[i].step, m, o, sc, data, &st, &w, beat);
        if (r == DT_OK) {
            *found = st;
            *saved_world = w;
        } else if (r == DT_ERR_INVALID_ARG) {
            s = r;
            break;
        } else {
            skipped++;
            log_msg(LOG_LEVEL_WARN, "skipping checkpoint: %s", dt_last_error());
        }
    }
    if (!s && *found < 0 && skipped > 0)
        log_msg(LOG_LEVEL_WARN,
                "none of the %zu checkpoint file(s) in %s could be loaded (see above): starting from "
                "step 0; the damaged files are left in place",
                skipped, dir);
    ckpt_list_free(e, n);
    return s;
}

/* Every rank other than 0 takes rank 0's state. */
static dt_status broadcast_state(dt_ctx *ctx, int rank, dt_model *m, dt_optimizer *o, dt_scaler *sc)
{
    dt_status c;
    if ((c = dt_broadcast(ctx, dt_model_params(m), dt_model_num_params(m), DT_F32, 0))) return c;
    if (o) {
        const optimizer_view v = optimizer_state(o);
        if (v.n1 && (c = dt_broadcast(ctx, v.s1, v.n1, DT_F32, 0))) return c;
        if (v.n2 && (c = dt_broadcast(ctx, v.s2, v.n2, DT_F32, 0))) return c;
        optimizer_host_changed(o);
        int64_t tt = v.t;
        if ((c = dt_broadcast(ctx, &tt, sizeof tt, DT_U8, 0))) return c;
        optimizer_set_t(o, (int)tt);
    }
    if (sc) {
        /* Rank 0's scaler, restored or not, is every rank's: they must all scale alike. */
        dt_scaler_state st;
        dt_scaler_get_state(sc, &st);
        int64_t v[6] = {0, st.good_steps, st.hysteresis_left, st.updates, st.skipped, 0};
        memcpy(&v[0], &st.scale, sizeof st.scale);
        if ((c = dt_broadcast(ctx, v, sizeof v, DT_U8, 0))) return c;
        memcpy(&st.scale, &v[0], sizeof st.scale);
        st.good_steps = (int)v[1];
        st.hysteresis_left = (int)v[2];
        st.updates = (long)v[3];
        st.skipped = (long)v[4];
        if (rank != 0 && (c = dt_scaler_set_state(sc, &st))) return c;
        /* ...with its window of recent overflows. */
        int32_t n = scaler_window_len(sc);
        if ((c = dt_broadcast(ctx, &n, sizeof n, DT_U8, 0))) return c;
        if (n > 0) {
            unsigned char *win = malloc((size_t)n);
            /* Every rank joins the broadcast or none: one without the memory must not leave the
             * others waiting in it. */
            c = win ? DT_OK
                    : status_set_error(DT_ERR_NOMEM, "out of memory for the loss scaler's window (%d bytes)", n);
            if ((c = rank_verdict_status(ctx, c, "dt_checkpoint_load_latest",
                                         ", so the loss scaler's window was not shared"))) {
                free(win);
                return c;
            }
            if (rank == 0) scaler_window_get(sc, win, n);
            if ((c = dt_broadcast(ctx, win, (size_t)n, DT_U8, 0))) {
                free(win);
                return c;
            }
            if (rank != 0) scaler_window_set(sc, win, n);
            free(win);
        }
    }
    return DT_OK;
}

/* Rank 0's data block to every rank. */
static dt_status broadcast_data(dt_ctx *ctx, dt_ckpt_data *data)
{
    int64_t v[6] = {data->present, data->epoch, data->offset, data->normalize, 0, 0};
    dt_status c;
    if ((c = dt_broadcast(ctx, v, sizeof v, DT_U8, 0))) return c;
    data->present = (int)v[0], data->epoch = (long)v[1], data->offset = (long)v[2], data->normalize = (int)v[3];
    if (data->present && data->normalize == 2 && data->channels > 0 && data->mean && data->std &&
        ((c = dt_broadcast(ctx, data->mean, (size_t)data->channels, DT_F32, 0)) ||
         (c = dt_broadcast(ctx, data->std, (size_t)data->channels, DT_F32, 0))))
        return c;
    return DT_OK;
}

static dt_status load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                             dt_ckpt_data *data, long *step);

dt_status dt_checkpoint_load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                                    dt_ckpt_data *data, long *step)
{
    /* --zero 1: the file holds the whole state; it is read into a full-size view and each rank
     * keeps its own slices of it (optimizer_host_changed). */
    /* A pending verdict would put back the step count of the state it replaces. */
    dt_status s = m ? dt_model_settle_step(m, NULL) : DT_OK;
    if (!s && m) s = model_zero_full_begin(m, o);
    if (s) return s;
    s = load_latest(ctx, dir, m, o, sc, data, step);
    model_zero_full_end(o);
    return s;
}

static dt_status load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                             dt_ckpt_data *data, long *step)
{
    if (data) data->present = 0;
    if (!dir || !*dir) return status_set_error(DT_ERR_INVALID_ARG, "no checkpoint directory given");
    if (!m || !step) return status_set_error(DT_ERR_INVALID_ARG, "dt_checkpoint_load_latest: model or step is NULL");
    int rank = ctx ? dt_rank(ctx) : 0, world = ctx ? dt_world_size(ctx) : 1;
    long found = -1;
    int saved_world = world;
    dt_status s = DT_OK;
    status_kept why;
    if (rank == 0) {
        /* The other ranks wait for this read's verdict: they hear that rank 0 is alive. */
        const ckpt_beat beat = {ctx_busy_beat, ctx};
        s = load_newest(dir, m, o, sc, data, &found, &saved_world, &beat);
        if (s) status_keep(&why);
    }
    if (ctx && world > 1) {
        /* Rank 0's verdict goes to every rank. */
        int64_t hdr[4] = {(int64_t)s, found, saved_world, 0};
        dt_status c;
        if ((c = dt_broadcast(ctx, hdr, sizeof hdr, DT_U8, 0))) return c;
        /* Rank 0's refusal is every rank's now (status_shared). */
        if (hdr[0] != DT_OK)
            return status_mark_shared(
                rank == 0
                    ? status_restore((dt_status)hdr[0], &why)
                    : status_set_peer_error((dt_status)hdr[0], "rank 0 refused the checkpoints: read its message"));
        found = (long)hdr[1];
        saved_world = (int)hdr[2];
        if (found >= 0 && (c = broadcast_state(ctx, rank, m, o, sc))) return c;
        if (found >= 0 && data && (c = broadcast_data(ctx, data))) return c;
    } else if (s) {
        return status_restore(s, &why);
    }
    /* Weights alone (evaluation) do not care how many ranks trained them. */
    if (found >= 0 && saved_world != world && o)
        log_msg0(LOG_LEVEL_WARN,
                 "checkpoint of step %ld was written by %d rank%s, resuming on %d: each rank reads another "
                 "share of the data from here%s",
                 found, saved_world, saved_world == 1 ? "" : "s", world,
                 data && data->present ? " (the epoch goes on from the saved data position: no sample repeated or "
                                         "skipped)"
                                       : "");
    if (found < 0 && data) data->present = 0;
    *step = found >= 0 ? found : 0;
    return DT_OK;
}
