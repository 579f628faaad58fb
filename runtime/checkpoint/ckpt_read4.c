/*
 * ckpt_read4.c - dt_model's state from a version-4 checkpoint (named sections): the reader behind
 * ckpt_read_file_data for files this dtrain writes.
 *
 * ckpt_file.c has checked the header and the table against the file's name and size; here each
 * of dtrain's sections is checked against the model and the optimizer - its size before anything
 * is allocated, then its CRC and its values - and the result goes to ckpt_apply only when all of
 * it passed. Sections dtrain does not know are left unread (a later version may add some).
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

/* Section name's index; -1 when absent. A per-rank one is damage: dtrain's sections never are. */
static dt_status find(const ckpt_file *f, const char *name, int *i)
{
    *i = ckpt_file_find(f, name);
    if (*i >= 0 && f->e[*i].ranks)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: section \"%s\" is per-rank; dtrain's own sections never "
                                "are",
                                f->path, name);
    return DT_OK;
}

/* Floats in section i (0 when absent), which must be a whole number of them. */
static dt_status floats_of(const ckpt_file *f, int i, uint64_t *n)
{
    *n = 0;
    if (i < 0) return DT_OK;
    if (f->e[i].bytes % sizeof(float))
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: section \"%s\" is %llu bytes, not a whole number of "
                                "floats",
                                f->path, f->e[i].name, (unsigned long long)f->e[i].bytes);
    *n = f->e[i].bytes / sizeof(float);
    return DT_OK;
}

/* A small fixed-size section into p. */
static dt_status read_struct(const ckpt_file *f, int i, void *p, size_t size)
{
    if (f->e[i].bytes != size)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section \"%s\" is %llu bytes; it must be %zu", f->path,
                                f->e[i].name, (unsigned long long)f->e[i].bytes, size);
    return ckpt_file_read(f, (uint32_t)i, p);
}

/* "scaler.window": a u32 count, then count flags of 0 or 1, no more of them than the scaler's
 * updates and no more ones than its skipped steps (st->scaler, read before). */
static dt_status read_window(const ckpt_file *f, int i, ckpt_state *st)
{
    const char *path = f->path;
    const uint64_t bytes = f->e[i].bytes;
    if (bytes < sizeof(uint32_t) || bytes > sizeof(uint32_t) + (uint64_t)CKPT_MAX_SCALER_WINDOW)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: section \"" CKPT4_SCALER_WINDOW "\" is %llu bytes; it must be 4 plus "
                                "one per flag, at most %d flags",
                                path, (unsigned long long)bytes, CKPT_MAX_SCALER_WINDOW);
    unsigned char *buf = malloc((size_t)bytes);
    if (!buf)
        return status_set_error(DT_ERR_NOMEM,
                                "out of memory reading checkpoint %s (section \"" CKPT4_SCALER_WINDOW "\", %llu bytes)",
                                path, (unsigned long long)bytes);
    dt_status s = ckpt_file_read(f, (uint32_t)i, buf);
    uint32_t count = 0;
    memcpy(&count, buf, sizeof count);
    long ones = 0;
    for (uint64_t k = sizeof count; k < bytes && !s; k++) {
        if (buf[k] > 1)
            s = status_set_error(
                DT_ERR_CORRUPT, "checkpoint %s: section \"" CKPT4_SCALER_WINDOW "\" flag %llu is %u; it must be 0 or 1",
                path, (unsigned long long)(k - sizeof count), buf[k]);
        ones += buf[k];
    }
    if (!s && count != bytes - sizeof count)
        s = status_set_error(DT_ERR_CORRUPT,
                             "checkpoint %s: section \"" CKPT4_SCALER_WINDOW
                             "\" field count is %u but it holds %llu flags",
                             path, count, (unsigned long long)(bytes - sizeof count));
    if (!s && ((long)count > st->scaler.updates || ones > st->scaler.skipped))
        s = status_set_error(DT_ERR_CORRUPT,
                             "checkpoint %s: section \"" CKPT4_SCALER_WINDOW "\" holds %u flags (%ld overflows); the "
                             "scaler had only %ld updates (%ld skipped)",
                             path, count, ones, st->scaler.updates, st->scaler.skipped);
    if (s) {
        free(buf);
        return s;
    }
    memmove(buf, buf + sizeof count, count);
    st->window = buf;
    st->window_n = (int)count;
    return DT_OK;
}

static dt_status read_data(const ckpt_file *f, int i, const dt_ckpt_data *data, ckpt_state *st)
{
    const char *path = f->path;
    const uint64_t bytes = f->e[i].bytes;
    if (bytes < sizeof(ckpt4_data) || bytes > sizeof(ckpt4_data) + 2 * (uint64_t)CKPT_MAX_CHANNELS * sizeof(float))
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: section \"data\" is %llu bytes; it must be %zu plus 8 per "
                                "channel, for at most %u channels",
                                path, (unsigned long long)bytes, sizeof(ckpt4_data), CKPT_MAX_CHANNELS);
    unsigned char *buf = malloc((size_t)bytes);
    if (!buf) return status_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s's data section", path);
    dt_status s = ckpt_file_read(f, (uint32_t)i, buf);
    ckpt4_data cd;
    memcpy(&cd, buf, sizeof cd);
    if (!s && cd.channels > CKPT_MAX_CHANNELS)
        s = status_set_error(DT_ERR_CORRUPT, "checkpoint %s: data block claims %u channels; at most %u", path,
                             cd.channels, CKPT_MAX_CHANNELS);
    if (!s && bytes != sizeof cd + 2 * (uint64_t)cd.channels * sizeof(float))
        s = status_set_error(DT_ERR_CORRUPT,
                             "checkpoint %s: section \"data\" is %llu bytes but claims %u channels (%llu "
                             "bytes)",
                             path, (unsigned long long)bytes, cd.channels,
                             (unsigned long long)(sizeof cd + 2 * (uint64_t)cd.channels * sizeof(float)));
    if (!s && cd.channels) {
        if (!(st->figures = malloc(2 * (size_t)cd.channels * sizeof(float))))
            s = status_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s's data section", path);
        else
            memcpy(st->figures, buf + sizeof cd, 2 * (size_t)cd.channels * sizeof(float));
    }
    free(buf);
    if (!s) s = ckpt_check_data(path, cd.epoch, cd.offset, cd.normalize, cd.channels, st->figures);
    if (!s && data && cd.channels && cd.channels != (uint32_t)data->channels)
        s = status_set_error(DT_ERR_INVALID_ARG,
                             "checkpoint %s was trained on data of %u channels; this data has %d: "
                             "use the same --data, or a new --checkpoint-dir",
                             path, cd.channels, data->channels);
    if (s) return s;
    st->has_data = 1;
    st->epoch = (long)cd.epoch;
    st->offset = (long)cd.offset;
    st->normalize = (int)cd.normalize;
    st->channels = (int)cd.channels;
    return DT_OK;
}

/* The model and optimizer sections: sizes against the model, then CRCs and values. */
static dt_status read_model(const ckpt_file *f, const dt_model *m, const dt_optimizer *o, ckpt_state *st)
{
    const char *path = f->path;
    const size_t np = dt_model_num_params(m);
    int im, ip, i1, i2;
    dt_status s;
    if ((s = find(f, CKPT4_MODEL, &im))) return s;
    if (im < 0) {
        char names[1200];
        ckpt_names_list(f->e, f->n, names, sizeof names);
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "checkpoint %s holds no dt_model state (no section \"%s\"; its "
            "sections: %s): it was written with dt_ckpt_commit, so open it with dt_ckpt_open_latest, "
            "or use another --checkpoint-dir",
            path, CKPT4_MODEL, names);
    }
    ckpt4_model mm;
    if ((s = read_struct(f, im, &mm, sizeof mm))) return s;
    if (mm.fingerprint != model_fingerprint(m))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s was written for another model (fingerprint %016llx, "
                                "%llu parameters; this model: %016llx, %zu parameters): give the --model and "
                                "--input it was trained with (dtrain train's start line names them), or use another "
                                "--checkpoint-dir",
                                path, (unsigned long long)mm.fingerprint, (unsigned long long)mm.nparams,
                                (unsigned long long)model_fingerprint(m), np);
    if (mm.nparams != np)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: section \"%s\" field nparams is %llu but its model "
                                "fingerprint is this model's, which has %zu parameters",
                                path, CKPT4_MODEL, (unsigned long long)mm.nparams, np);
    if (mm.reserved != 0)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section \"%s\" field reserved is %llu; it must be 0",
                                path, CKPT4_MODEL, (unsigned long long)mm.reserved);
    uint64_t n0, n1, n2;
    if ((s = find(f, CKPT4_PARAMS, &ip)) || (s = find(f, CKPT4_MOMENT1, &i1)) || (s = find(f, CKPT4_MOMENT2, &i2)))
        return s;
    if (ip < 0) return status_set_error(DT_ERR_CORRUPT, "checkpoint %s has no section \"%s\"", path, CKPT4_PARAMS);
    if ((s = floats_of(f, ip, &n0)) || (s = floats_of(f, i1, &n1)) || (s = floats_of(f, i2, &n2))) return s;
    if (n0 != np)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section \"%s\" holds %llu floats; the model has %zu",
                                path, CKPT4_PARAMS, (unsigned long long)n0, np);
    if ((s = ckpt_check_optim(path, "section \"" CKPT4_MODEL "\" field", "section \"" CKPT4_MOMENT1 "\"",
                              "section \"" CKPT4_MOMENT2 "\"", mm.optim_kind, mm.optim_t, n1, n2, np, o)))
        return s;
    /* Everything is bounded by the model's size now. Weights only: the moments stay unread. */
    const int idx[3] = {ip, o ? i1 : -1, o ? i2 : -1};
    const char *label[3] = {"section \"" CKPT4_PARAMS "\"", "section \"" CKPT4_MOMENT1 "\"",
                            "section \"" CKPT4_MOMENT2 "\""};
    for (int k = 0; k < 3; k++) {
        if (idx[k] < 0 || f->e[idx[k]].bytes == 0) continue;
        st->n[k] = (size_t)(f->e[idx[k]].bytes / sizeof(float));
        if (!(st->sec[k] = malloc((size_t)f->e[idx[k]].bytes)))
            return status_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s (%s, %llu MiB)", path, label[k],
                                    (unsigned long long)(f->e[idx[k]].bytes >> 20));
        if ((s = ckpt_file_read(f, (uint32_t)idx[k], st->sec[k])) ||
            (s = ckpt_check_values(path, label[k], st->sec[k], st->n[k], k == 2)))
            return s;
    }
    st->optim_t = mm.optim_t;
    return DT_OK;
}

dt_status ckpt_read4_state(int fd, uint64_t size, const char *path, long name_step, const dt_model *m,
                           const dt_optimizer *o, const dt_ckpt_data *data, ckpt_state *st, const ckpt_beat *beat)
{
    ckpt_file *f;
    dt_status s = ckpt_file_open_fd(fd, size, path, name_step, 0, &f);
    if (s) return s;
    f->beat = beat;
    ckpt_test_slow(beat);
    int is, iw, id;
    if (!(s = find(f, CKPT4_SCALER, &is)) && !(s = find(f, CKPT4_SCALER_WINDOW, &iw)) &&
        !(s = find(f, CKPT4_DATA, &id)) && !(s = read_model(f, m, o, st))) {
        if (is >= 0) {
            ckpt4_scaler cs;
            if (!(s = read_struct(f, is, &cs, sizeof cs)) &&
                !(s = ckpt_check_scaler(path, cs.scale, cs.good_steps, cs.hysteresis_left, cs.updates, cs.skipped))) {
                st->has_scaler = 1;
                st->scaler = (dt_scaler_state){.scale = cs.scale,
                                               .good_steps = cs.good_steps,
                                               .hysteresis_left = cs.hysteresis_left,
                                               .updates = (long)cs.updates,
                                               .skipped = (long)cs.skipped};
            }
        }
        /* Files written before the window was saved have none: it starts empty, as it did. */
        if (!s && st->has_scaler && iw >= 0) s = read_window(f, iw, st);
        if (!s && id >= 0) s = read_data(f, id, data, st);
    }
    if (!s) {
        st->step = f->step;
        st->world = f->world;
    }
    ckpt_file_close(f);
    return s;
}
