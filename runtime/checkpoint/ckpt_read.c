/*
 * ckpt_read.c - reads one checkpoint file and checks all of it before anything is loaded.
 *
 * A checkpoint is input from outside: a file can be truncated, damaged, from another run, or
 * crafted with valid CRCs. So every field of the header and of the scaler block is checked against
 * the model, the optimizer, the file's name and size, and sane ranges before a byte of payload is
 * allocated or read; then every section is read into its own buffer, CRC-checked and checked for
 * non-finite values; only a file that passed everything is copied into the model, the optimizer and
 * the scaler. Errors name the field, the value found and the value expected.
 */
#include "ckpt_format.h"
#include "log.h"
#include "model/model.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

static const char *optim_name(uint32_t kind)
{
    if (kind == DT_OPTIM_SGD) return "sgd";
    if (kind == DT_OPTIM_ADAMW) return "adamw";
    if (kind == CKPT_OPTIM_NONE) return "none (weights only)";
    return "unknown";
}

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
        return dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s was written for another model (fingerprint %016llx, "
                            "%llu parameters; this model: %016llx, %zu parameters): resume with the same --model "
                            "and --input, or use another --checkpoint-dir", path,
                            (unsigned long long)h->fingerprint, (unsigned long long)h->nparams,
                            (unsigned long long)model_fingerprint(m), np);
    if (h->nparams != np)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field nparams is %llu but its model fingerprint "
                            "is this model's, which has %zu parameters", path, (unsigned long long)h->nparams, np);
    if (h->section_n[0] != np)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: section 0 (parameters) claims %llu floats; the model "
                            "has %zu", path, (unsigned long long)h->section_n[0], np);
    if (h->step != name_step)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field step is %lld but the file name says "
                            "step %ld", path, (long long)h->step, name_step);
    if (h->world < 1 || h->world > CKPT_MAX_WORLD)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field world is %u; it must be 1 to %u", path,
                            h->world, CKPT_MAX_WORLD);
    if (h->reserved != 0 || h->pad != 0)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: reserved header fields are %d and %u; they must be 0",
                            path, h->reserved, h->pad);
    if (h->optim_kind != DT_OPTIM_SGD && h->optim_kind != DT_OPTIM_ADAMW && h->optim_kind != CKPT_OPTIM_NONE)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field optim_kind is %u; known kinds are %d (sgd), "
                            "%d (adamw) and %u (none)", path, h->optim_kind, DT_OPTIM_SGD, DT_OPTIM_ADAMW,
                            CKPT_OPTIM_NONE);
    if (h->optim_t < 0)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field optim_t (the optimizer's step counter) is "
                            "%d; it must be >= 0", path, h->optim_t);
    /* What each optimizer kind keeps: SGD's momentum may be absent (momentum 0); AdamW keeps both
     * moments; a weights-only file keeps nothing. Any other count is damage. */
    for (int i = 1; i < 3; i++) {
        int may = h->optim_kind == DT_OPTIM_ADAMW || (h->optim_kind == DT_OPTIM_SGD && i == 1);
        int must = h->optim_kind == DT_OPTIM_ADAMW;
        uint64_t n = h->section_n[i];
        if (!(n == 0 && !must) && !(n == np && may))
            return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d (optimizer state) claims %llu floats; "
                                "for optimizer %s it must be %s", path, i, (unsigned long long)n,
                                optim_name(h->optim_kind),
                                must ? "the parameter count" : may ? "0 or the parameter count" : "0");
    }
    if (h->optim_kind == CKPT_OPTIM_NONE && h->optim_t != 0)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: a weights-only checkpoint has optimizer step counter "
                            "%d; it must be 0", path, h->optim_t);
    if (!o) return DT_OK; /* loading weights only: any optimizer state in the file is left unread */
    dt_optim_config oc;
    int t;
    const float *s1, *s2;
    size_t n1, n2;
    optimizer_state(o, &oc, &t, &s1, &n1, &s2, &n2);
    if (h->optim_kind == CKPT_OPTIM_NONE)
        return dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s holds weights only (it was saved without an "
                            "optimizer): load it without an optimizer (NULL), or resume from a full checkpoint",
                            path);
    if (h->optim_kind != (uint32_t)oc.kind)
        return dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s holds the state of optimizer %s, this run uses %s: "
                            "resume with the same --optim", path, optim_name(h->optim_kind),
                            optim_name((uint32_t)oc.kind));
    if (h->section_n[1] != n1 || h->section_n[2] != n2)
        return dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s holds %llu + %llu floats of optimizer state, this "
                            "optimizer keeps %zu + %zu (momentum 0 keeps none): resume with the same --momentum",
                            path, (unsigned long long)h->section_n[1], (unsigned long long)h->section_n[2], n1, n2);
    return DT_OK;
}

/* The scaler block's values on their own (the run's settings are checked when it is applied). */
static dt_status check_scaler(const char *path, const ckpt_scaler *cs)
{
    if (cs->present > 1)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: scaler field present is %u; it must be 0 or 1", path,
                            cs->present);
    if (!cs->present) return DT_OK;
    if (!(isfinite(cs->scale) && cs->scale > 0))
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: scaler field scale is %g; it must be a positive finite "
                            "number", path, cs->scale);
    if (cs->good_steps < 0 || cs->hysteresis_left < 0)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: scaler fields good_steps %d and hysteresis_left %d must "
                            "be >= 0", path, cs->good_steps, cs->hysteresis_left);
    if (cs->updates < 0 || cs->skipped < 0 || cs->skipped > cs->updates)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: scaler fields updates %lld and skipped %lld must satisfy "
                            "0 <= skipped <= updates", path, (long long)cs->updates, (long long)cs->skipped);
    return DT_OK;
}

/* Parameters and optimizer moments are finite, and AdamW's second moment is not negative: a file
 * that says otherwise would only resurface as a NaN loss blamed on the learning rate. */
static dt_status check_values(const char *path, int section, const float *v, size_t n, int nonneg)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (nonneg && v[i] < 0))
            return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d holds %g at index %zu; it must be %s",
                                path, section, (double)v[i], i, nonneg ? "finite and >= 0" : "finite");
    return DT_OK;
}

/* Reads and checks the version 3 data block at fd's position into *cd and *floats (2 x channels,
 * the caller frees). */
static dt_status read_data_block(int fd, const char *path, ckpt_data *cd, float **floats)
{
    *floats = NULL;
    if (!read_exact(fd, cd, sizeof *cd))
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (no data block)", path);
    if (cd->channels > CKPT_MAX_CHANNELS)
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: data block claims %u channels; at most %u", path,
                            cd->channels, CKPT_MAX_CHANNELS);
    const size_t n = 2 * (size_t)cd->channels;
    if (n && !(*floats = malloc(n * sizeof(float))))
        return dt_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s's data block", path);
    if (n && !read_exact(fd, *floats, n * sizeof(float)))
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: the data block is truncated", path);
    const uint32_t want = cd->crc;
    cd->crc = 0;
    uint32_t c = (uint32_t)crc32(0L, (const Bytef *)cd, sizeof *cd);
    if (n) c = (uint32_t)crc32(c, (const Bytef *)*floats, (uInt)(n * sizeof(float)));
    if (c != want) return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: the data block is damaged (CRC mismatch)", path);
    if (cd->present > 1 || cd->normalize > 2 || cd->epoch < 0 || cd->offset < 0 || (!cd->present && cd->channels))
        return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: data block fields present %u, normalize %u, epoch %lld, "
                            "offset %lld are out of range", path, cd->present, cd->normalize, (long long)cd->epoch,
                            (long long)cd->offset);
    for (size_t i = 0; i < n; i++)
        if (!isfinite((*floats)[i]) || (i >= cd->channels && (*floats)[i] < 0))
            return dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: normalization %s %g of channel %zu must be finite%s",
                                path, i < cd->channels ? "mean" : "std", (double)(*floats)[i], i % cd->channels,
                                i < cd->channels ? "" : " and >= 0");
    return DT_OK;
}

dt_status ckpt_read_file(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                         long *step, int *world)
{
    return ckpt_read_file_data(path, name_step, m, o, sc, NULL, step, world);
}

dt_status ckpt_read_file_data(const char *path, long name_step, dt_model *m, dt_optimizer *o, dt_scaler *sc,
                              dt_ckpt_data *data, long *step, int *world)
{
    if (!path || !m || !step || !world) return dt_set_error(DT_ERR_INVALID_ARG, "ckpt_read_file: NULL argument");
    /* Non-blocking, so a FIFO named like a checkpoint cannot hang the open; then regular files only. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return dt_set_error(DT_ERR_IO, "cannot open checkpoint %s: %s", path, strerror(errno));
    float *buf[3] = {NULL, NULL, NULL}, *dfl = NULL;
    ckpt_data cd;
    memset(&cd, 0, sizeof cd);
    dt_status s = DT_OK;
    struct stat sb;
    ckpt_header h;
    ckpt_scaler cs;
    memset(&cs, 0, sizeof cs);
    if (fstat(fd, &sb) != 0) {
        s = dt_set_error(DT_ERR_IO, "cannot stat checkpoint %s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        s = dt_set_error(DT_ERR_CORRUPT, "%s is %s, not a checkpoint file: rename or remove it", path,
                         file_kind(sb.st_mode));
        goto done;
    }
    if (!read_exact(fd, &h, sizeof h)) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (%lld bytes, a header needs %zu)", path,
                         (long long)sb.st_size, sizeof h);
        goto done;
    }
    uint32_t want = h.header_crc;
    h.header_crc = 0;
    if (memcmp(h.magic, CKPT_MAGIC, 8) != 0 || ckpt_crc(&h, sizeof h) != want) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is not a dtrain checkpoint or its header is damaged", path);
        goto done;
    }
    if (h.version < 1 || h.version > CKPT_VERSION) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s has version %u; this dtrain reads versions 1 to %u", path,
                         h.version, CKPT_VERSION);
        goto done;
    }
    if (h.version >= 2) {
        if (!read_exact(fd, &cs, sizeof cs)) {
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (no loss-scaler block)", path);
            goto done;
        }
        uint32_t cwant = cs.crc;
        cs.crc = 0;
        if (ckpt_crc(&cs, sizeof cs) != cwant) {
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: the loss-scaler block is damaged (CRC mismatch)", path);
            goto done;
        }
    }
    if ((s = check_header(path, &h, name_step, m, o)) || (s = check_scaler(path, &cs))) goto done;
    if (h.version >= 3 && (s = read_data_block(fd, path, &cd, &dfl))) goto done;
    if (data && cd.present && cd.channels && cd.channels != (uint32_t)data->channels) {
        s = dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s was trained on data of %u channels; this data has %d: "
                         "use the same --data, or a new --checkpoint-dir", path, cd.channels, data->channels);
        goto done;
    }
    /* The sizes are now bounded by the model's, so this sum cannot overflow; it must be the file's. */
    uint64_t payload = (h.section_n[0] + h.section_n[1] + h.section_n[2]) * sizeof(float);
    uint64_t expect = sizeof h + (h.version >= 2 ? sizeof cs : 0) +
                      (h.version >= 3 ? sizeof cd + 2 * (uint64_t)cd.channels * sizeof(float) : 0) + payload;
    if ((uint64_t)sb.st_size != expect) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is %lld bytes; its header describes %llu (%s)", path,
                         (long long)sb.st_size, (unsigned long long)expect,
                         (uint64_t)sb.st_size < expect ? "truncated" : "data after its last section");
        goto done;
    }
    int nsec = o ? 3 : 1; /* weights only: the optimizer sections are not read */
    for (int i = 0; i < nsec && !s; i++) {
        size_t n = (size_t)h.section_n[i];
        if (n == 0) continue;
        if (!(buf[i] = malloc(n * sizeof(float))))
            s = dt_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s (section %d, %zu MiB)", path, i,
                             (n * sizeof(float)) >> 20);
        else if ((errno = 0, !read_exact(fd, buf[i], n * sizeof(float))))
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d is truncated (%s)", path, i,
                             errno ? strerror(errno) : "end of file");
        else if (ckpt_crc(buf[i], n * sizeof(float)) != h.section_crc[i])
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d is damaged (CRC mismatch)", path, i);
        else
            s = check_values(path, i, buf[i], n, i == 2);
    }
    if (s) goto done;

    /* Everything checked: load. A GPU model's parameters go up from the host buffer. */
    if (dt_model_on_gpu(m)) {
        if ((s = model_params_from_host(m, buf[0]))) goto done;
    } else {
        memcpy(dt_model_params(m), buf[0], (size_t)h.section_n[0] * sizeof(float));
    }
    if (o) {
        dt_optim_config oc;
        int t;
        const float *s1, *s2;
        size_t n1, n2;
        optimizer_state(o, &oc, &t, &s1, &n1, &s2, &n2);
        if (n1) memcpy((float *)s1, buf[1], n1 * sizeof(float));
        if (n2) memcpy((float *)s2, buf[2], n2 * sizeof(float));
        optimizer_host_changed(o);
        optimizer_set_t(o, h.optim_t);
    }
    if (sc && cs.present) {
        dt_scaler_state st = {.scale = cs.scale, .good_steps = cs.good_steps, .hysteresis_left = cs.hysteresis_left,
                              .updates = (long)cs.updates, .skipped = (long)cs.skipped};
        /* Sound values that this run's settings exclude (another --loss-scale-growth-interval, a
         * lower max scale): the parameters are in, and the scaler starts afresh, as for a run
         * that had none. */
        if (dt_scaler_set_state(sc, &st))
            dt_log(DT_LOG_WARN, "checkpoint %s: loss-scaler state not usable with this run's settings (%s); the "
                   "loss scale starts again from its initial value", path, dt_last_error());
    } else if (sc) {
        dt_log(DT_LOG_INFO, "checkpoint %s holds no loss-scaler state: the loss scale starts from its initial value",
               path);
    }
    if (data) {
        data->present = (int)cd.present;
        data->epoch = (long)cd.epoch;
        data->offset = (long)cd.offset;
        data->normalize = (int)cd.normalize;
        if (cd.channels && data->mean && data->std) {
            memcpy(data->mean, dfl, cd.channels * sizeof(float));
            memcpy(data->std, dfl + cd.channels, cd.channels * sizeof(float));
        } else if (cd.present && cd.normalize == 2) {
            data->normalize = -1; /* standard, saved without its figures: the caller's own stand */
        }
    }
    *step = (long)h.step;
    *world = (int)h.world;
done:
    free(dfl);
    for (int i = 0; i < 3; i++) free(buf[i]);
    close(fd);
    return s;
}
