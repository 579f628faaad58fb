/*
 * ckpt_read.c - reads one dt_model checkpoint file and checks all of it before anything is loaded:
 * the fixed layout of format versions 1 to 3 here, version 4 (named sections) in ckpt_read4.c,
 * told apart by the version in the first 16 bytes.
 *
 * A checkpoint is input from outside: a file can be truncated, damaged, from another run, or
 * crafted with valid CRCs. So every field of the header and of the scaler block is checked against
 * the model, the optimizer, the file's name and size, and sane ranges before a byte of payload is
 * allocated or read; then every section is read into its own buffer, CRC-checked and checked for
 * non-finite values; only a file that passed everything is copied into the model, the optimizer and
 * the scaler (ckpt_apply). Errors name the field, the value found and the value expected.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 when all n bytes were read, 0 at end of file or on an error (errno set). */
static int read_exact(int fd, void *p, size_t n)
{
    char *b = p;
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        b += r;
        n -= (size_t)r;
    }
    return 1;
}

/* The header's own consistency and its fit to this model and optimizer; see ckpt_read_file. */
static dt_status check_header(const char *path, const ckpt_header *h, long name_step, const dt_model *m,
                              const dt_optimizer *o)
{
    size_t np = dt_model_num_params(m);
    if (h->fingerprint != model_fingerprint(m))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s was written for another model (fingerprint %016llx, "
                                "%llu parameters; this model: %016llx, %zu parameters): give the --model and "
                                "--input it was trained with (dtrain train's start line names them), or use another "
                                "--checkpoint-dir",
                                path, (unsigned long long)h->fingerprint, (unsigned long long)h->nparams,
                                (unsigned long long)model_fingerprint(m), np);
    if (h->nparams != np)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: header field nparams is %llu but its model fingerprint "
                                "is this model's, which has %zu parameters",
                                path, (unsigned long long)h->nparams, np);
    if (h->section_n[0] != np)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: section 0 (parameters) claims %llu floats; the model "
                                "has %zu",
                                path, (unsigned long long)h->section_n[0], np);
    if (h->step != name_step)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: header field step is %lld but the file name says "
                                "step %ld",
                                path, (long long)h->step, name_step);
    if (h->world < 1 || h->world > CKPT_MAX_WORLD)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field world is %u; it must be 1 to %u", path,
                                h->world, CKPT_MAX_WORLD);
    if (h->reserved != 0 || h->pad != 0)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: reserved header fields are %d and %u; they must be 0",
                                path, h->reserved, h->pad);
    return ckpt_check_optim(path, "header field", "section 1", "section 2", h->optim_kind, h->optim_t, h->section_n[1],
                            h->section_n[2], np, o);
}

/* Reads and checks the version 3 data block at fd's position into st (the figures: 2 x channels). */
static dt_status read_data_block(int fd, const char *path, ckpt_state *st)
{
    ckpt_data cd;
    if (!read_exact(fd, &cd, sizeof cd))
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (no data block)", path);
    if (cd.channels > CKPT_MAX_CHANNELS)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: data block claims %u channels; at most %u", path,
                                cd.channels, CKPT_MAX_CHANNELS);
    const size_t n = 2 * (size_t)cd.channels;
    if (n && !(st->figures = malloc(n * sizeof(float))))
        return status_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s's data block", path);
    if (n && !read_exact(fd, st->figures, n * sizeof(float)))
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: the data block is truncated", path);
    const uint32_t want = cd.crc;
    cd.crc = 0;
    uint32_t c = ckpt_crc(&cd, sizeof cd);
    if (n) c = ckpt_crc_more(c, st->figures, n * sizeof(float));
    if (c != want)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: the data block is damaged (CRC mismatch)", path);
    if (cd.present > 1 || (!cd.present && cd.channels))
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: data block fields present %u and channels %u are out of "
                                "range",
                                path, cd.present, cd.channels);
    dt_status s = ckpt_check_data(path, cd.epoch, cd.offset, cd.normalize, cd.channels, st->figures);
    if (s) return s;
    st->has_data = (int)cd.present;
    st->epoch = (long)cd.epoch;
    st->offset = (long)cd.offset;
    st->normalize = (int)cd.normalize;
    st->channels = (int)cd.channels;
    return DT_OK;
}

/* The header, read whole and sealed by its CRC, of a version this reader takes. */
static dt_status read_header(int fd, uint64_t size, const char *path, ckpt_header *h)
{
    if (!read_exact(fd, h, sizeof *h))
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (%llu bytes, a header needs %zu)", path,
                                (unsigned long long)size, sizeof *h);
    uint32_t want = h->header_crc;
    h->header_crc = 0;
    if (memcmp(h->magic, CKPT_MAGIC, 8) != 0 || ckpt_crc(h, sizeof *h) != want)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is not a dtrain checkpoint or its header is damaged",
                                path);
    if (h->version < 1 || h->version > CKPT_VERSION_FIXED)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s has version %u; this dtrain reads versions 1 to %u",
                                path, h->version, CKPT_VERSION);
    return DT_OK;
}

/* The loss-scaler block of version 2 on, sealed by its CRC; version 1 has none (cs stays zero). */
static dt_status read_scaler_block(int fd, const char *path, uint32_t version, ckpt_scaler *cs)
{
    if (version < 2) return DT_OK;
    if (!read_exact(fd, cs, sizeof *cs))
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (no loss-scaler block)", path);
    uint32_t cwant = cs->crc;
    cs->crc = 0;
    if (ckpt_crc(cs, sizeof *cs) != cwant)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: the loss-scaler block is damaged (CRC mismatch)", path);
    return DT_OK;
}

/* The scaler block's fields, which its CRC does not make sane. */
static dt_status check_scaler_block(const char *path, const ckpt_scaler *cs)
{
    if (cs->present > 1)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: scaler field present is %u; it must be 0 or 1", path,
                                cs->present);
    if (cs->present)
        return ckpt_check_scaler(path, cs->scale, cs->good_steps, cs->hysteresis_left, cs->updates, cs->skipped);
    return DT_OK;
}

static dt_status check_data_channels(const char *path, const dt_ckpt_data *data, const ckpt_state *st)
{
    if (data && st->has_data && st->channels && st->channels != data->channels)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s was trained on data of %d channels; this data has %d: "
                                "use the same --data, or a new --checkpoint-dir",
                                path, st->channels, data->channels);
    return DT_OK;
}

/* The file's size against the one its header and blocks describe. The sizes are bounded by the
 * model's by now (check_header), so this sum cannot overflow. */
static dt_status check_file_size(const char *path, uint64_t size, const ckpt_header *h, const ckpt_state *st)
{
    uint64_t payload = (h->section_n[0] + h->section_n[1] + h->section_n[2]) * sizeof(float);
    uint64_t expect = sizeof *h + (h->version >= 2 ? sizeof(ckpt_scaler) : 0) +
                      (h->version >= 3 ? sizeof(ckpt_data) + 2 * (uint64_t)st->channels * sizeof(float) : 0) + payload;
    if (size != expect)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is %llu bytes; its header describes %llu (%s)", path,
                                (unsigned long long)size, (unsigned long long)expect,
                                size < expect ? "truncated" : "data after its last section");
    return DT_OK;
}

/* The first nsec sections into st->sec[], each checked against its CRC and for finite values. */
static dt_status read_sections(int fd, const char *path, const ckpt_header *h, int nsec, ckpt_state *st)
{
    for (int i = 0; i < nsec; i++) {
        size_t n = (size_t)h->section_n[i];
        if (n == 0) continue;
        char label[16] = "section 0";
        label[8] = (char)('0' + i);
        if (!(st->sec[i] = malloc(n * sizeof(float))))
            return status_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s (section %d, %zu MiB)", path, i,
                                    (n * sizeof(float)) >> 20);
        st->n[i] = n;
        errno = 0;
        if (!read_exact(fd, st->sec[i], n * sizeof(float)))
            return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d is truncated (%s)", path, i,
                                    errno ? strerror(errno) : "end of file");
        if (ckpt_crc(st->sec[i], n * sizeof(float)) != h->section_crc[i])
            return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d is damaged (CRC mismatch)", path, i);
        dt_status s = ckpt_check_values(path, label, st->sec[i], n, i == 2);
        if (s) return s;
    }
    return DT_OK;
}

/* What the header and the scaler block say beyond the sections, once all of it has been checked. */
static void keep_header_facts(const ckpt_header *h, const ckpt_scaler *cs, ckpt_state *st)
{
    st->optim_t = h->optim_t;
    st->has_scaler = (int)cs->present;
    st->scaler = (dt_scaler_state){.scale = cs->scale,
                                   .good_steps = cs->good_steps,
                                   .hysteresis_left = cs->hysteresis_left,
                                   .updates = (long)cs->updates,
                                   .skipped = (long)cs->skipped};
    st->step = (long)h->step;
    st->world = (int)h->world;
}

/* Versions 1 to 3 from fd (at its start) into st. */
static dt_status read_fixed(int fd, uint64_t size, const char *path, long name_step, const dt_model *m,
                            const dt_optimizer *o, const dt_ckpt_data *data, ckpt_state *st)
{
    ckpt_header h;
    ckpt_scaler cs;
    memset(&cs, 0, sizeof cs);
    dt_status s;
    if ((s = read_header(fd, size, path, &h)) || (s = read_scaler_block(fd, path, h.version, &cs)) ||
        (s = check_header(path, &h, name_step, m, o)) || (s = check_scaler_block(path, &cs)))
        return s;
    if (h.version >= 3 && (s = read_data_block(fd, path, st))) return s;
    if ((s = check_data_channels(path, data, st)) || (s = check_file_size(path, size, &h, st))) return s;
    /* weights only: the optimizer sections are not read */
    if ((s = read_sections(fd, path, &h, o ? 3 : 1, st))) return s;
    keep_header_facts(&h, &cs, st);
    return DT_OK;
}

dt_status ckpt_read_file(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc, long *step,
                         int *world)
{
    return ckpt_read_file_data(path, name_step, m, o, sc, NULL, step, world, NULL);
}

dt_status ckpt_read_file_data(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                              dt_ckpt_data *data, long *step, int *world, const ckpt_beat *beat)
{
    if (!path || !m || !step || !world) return status_set_error(DT_ERR_INVALID_ARG, "ckpt_read_file: NULL argument");
    int fd;
    uint64_t size;
    uint32_t version;
    dt_status s = ckpt_open_regular(path, &fd, &size, &version);
    if (s) return s;
    ckpt_state st;
    memset(&st, 0, sizeof st);
    if (version == 4) {
        s = ckpt_read4_state(fd, size, path, name_step, m, o, data, &st, beat); /* takes fd */
    } else {
        /* A newer version may have another header: its number is all that can be trusted. */
        if (version > CKPT_VERSION && version <= CKPT_VERSION_NEWER_MAX)
            s = ckpt_refuse_newer(path, version);
        else if (version > CKPT_VERSION)
            s = status_set_error(DT_ERR_CORRUPT, "checkpoint %s has version %u, no version of dtrain's: damaged", path,
                                 version);
        else
            s = read_fixed(fd, size, path, name_step, m, o, data, &st);
        close(fd);
    }
    if (!s) s = ckpt_apply(path, &st, m, o, sc, data);
    if (!s) {
        *step = st.step;
        *world = st.world;
    }
    ckpt_state_free(&st);
    return s;
}
