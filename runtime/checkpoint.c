/*
 * checkpoint.c - checkpoints of a training run: model parameters, optimizer state and step.
 *
 * File DIR/ckpt-<step>.dtc: a header (magic, version, model fingerprint, parameter count, step,
 * world size, optimizer kind and step count), the loss scaler's state (version 2; with its own
 * CRC, marked absent when the run has no scaler) and three sections (parameters, first and second
 * optimizer state), each with its length and CRC-32 (zlib). Version 1 files (no scaler block) are
 * still read. Written by rank 0 to a temporary name,
 * fsync'ed, renamed, and the directory fsync'ed, so a crash leaves the old checkpoint or the new
 * one, never half of one. Loading takes the newest file that passes every check, warning about the
 * ones it skips. The data position needs no saving: a step's batch is a function of (seed, step).
 */
#include "dtrain.h"
#include "log.h"
#include "model.h"
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CKPT_MAGIC "DTCKPT1\n"
#define CKPT_VERSION 2u

typedef struct ckpt_header {
    char magic[8];
    uint32_t version, header_crc; /* crc of the header with header_crc = 0 */
    uint64_t fingerprint, nparams;
    int64_t step;
    uint32_t world, optim_kind;
    int32_t optim_t, reserved;
    uint64_t section_n[3];        /* floats in each section */
    uint32_t section_crc[3], pad;
} ckpt_header;

/* Version 2: right after the header. */
typedef struct ckpt_scaler {
    uint32_t present, crc; /* crc of the block with crc = 0 */
    double scale;
    int32_t good_steps, hysteresis_left;
    int64_t updates, skipped;
} ckpt_scaler;

static uint32_t crc_of(const void *p, size_t bytes)
{
    uLong c = crc32(0L, Z_NULL, 0);
    const unsigned char *b = p;
    while (bytes > 0) { /* crc32 takes a uInt length */
        uInt chunk = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        c = crc32(c, b, chunk);
        b += chunk;
        bytes -= chunk;
    }
    return (uint32_t)c;
}

static dt_status write_all(int fd, const void *p, size_t n, const char *path)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return dt_set_error(DT_ERR_IO, "writing checkpoint %s failed: %s (disk full?)", path, strerror(errno));
        b += w;
        n -= (size_t)w;
    }
    return DT_OK;
}

static dt_status ckpt_write(const char *dir, long step, int world, const dt_model *m, const dt_optimizer *o,
                            const dt_scaler *sc)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, step);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    const float *sec[3];
    size_t n[3];
    dt_optim_config oc;
    int t;
    n[0] = dt_model_num_params(m);
    float *host = NULL; /* a GPU model's parameters, copied down */
    if (dt_model_on_gpu(m)) {
        dt_status c;
        if (!(host = malloc(n[0] ? n[0] * sizeof *host : 1)))
            return dt_set_error(DT_ERR_NOMEM, "out of host memory for the checkpoint of step %ld", step);
        if ((c = dt_model_get_params(m, host)) || (c = optimizer_to_host((dt_optimizer *)o))) {
            free(host);
            return c;
        }
    }
    sec[0] = host ? host : model_params_const(m);
    optimizer_state(o, &oc, &t, &sec[1], &n[1], &sec[2], &n[2]);
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.fingerprint = model_fingerprint(m);
    h.nparams = n[0];
    h.step = step;
    h.world = (uint32_t)world;
    h.optim_kind = (uint32_t)oc.kind;
    h.optim_t = t;
    for (int i = 0; i < 3; i++) {
        h.section_n[i] = n[i];
        h.section_crc[i] = crc_of(sec[i], n[i] * sizeof(float));
    }
    h.header_crc = crc_of(&h, sizeof h);
    ckpt_scaler cs;
    memset(&cs, 0, sizeof cs);
    if (sc) {
        dt_scaler_state st;
        dt_scaler_get_state(sc, &st);
        cs.present = 1;
        cs.scale = st.scale;
        cs.good_steps = st.good_steps;
        cs.hysteresis_left = st.hysteresis_left;
        cs.updates = st.updates;
        cs.skipped = st.skipped;
    }
    cs.crc = crc_of(&cs, sizeof cs);

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        free(host);
        return dt_set_error(DT_ERR_IO, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        free(host);
        return dt_set_error(DT_ERR_IO, "cannot write checkpoint %s: %s", tmp, strerror(errno));
    }
    dt_status s = write_all(fd, &h, sizeof h, tmp);
    if (!s) s = write_all(fd, &cs, sizeof cs, tmp);
    for (int i = 0; !s && i < 3; i++) s = write_all(fd, sec[i], n[i] * sizeof(float), tmp);
    free(host);
    if (!s && fsync(fd) != 0) s = dt_set_error(DT_ERR_IO, "fsync of checkpoint %s failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !s) s = dt_set_error(DT_ERR_IO, "closing checkpoint %s failed: %s", tmp, strerror(errno));
    if (!s && rename(tmp, path) != 0)
        s = dt_set_error(DT_ERR_IO, "renaming checkpoint %s to %s failed: %s", tmp, path, strerror(errno));
    if (s) {
        unlink(tmp);
        return s;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself reaches the disk */
        close(dfd);
    }
    dt_log(DT_LOG_INFO, "checkpoint %s written (step %ld)", path, step);
    return DT_OK;
}

dt_status dt_checkpoint_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o, long step)
{
    return dt_checkpoint_save_scaled(ctx, dir, m, o, NULL, step);
}

dt_status dt_checkpoint_save_scaled(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                    const dt_scaler *sc, long step)
{
    if (!dir || !*dir) return dt_set_error(DT_ERR_INVALID_ARG, "no checkpoint directory given");
    int rank = ctx ? dt_rank(ctx) : 0, world = ctx ? dt_world_size(ctx) : 1;
    /* Every rank holds the same parameters and optimizer state: rank 0 writes, all learn whether
     * it worked, so either every rank goes on or every rank reports the failure. */
    dt_status s = rank == 0 ? ckpt_write(dir, step, world, m, o, sc) : DT_OK;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", s ? dt_last_error() : "");
    if (ctx && world > 1) {
        float failed = s ? 1.0f : 0.0f;
        dt_status c = dt_allreduce(ctx, &failed, 1, DT_F32, DT_SUM);
        if (c) return c;
        if (failed > 0 && !s)
            return dt_set_error(DT_ERR_IO, "rank 0 could not write the checkpoint of step %ld in %s: read its "
                                "message", step, dir);
    }
    return s ? dt_set_error(s, "%s", msg) : DT_OK;
}

/* Reads and checks one file into m and o (rank 0). DT_ERR_CORRUPT for a damaged file (the caller
 * tries an older one), DT_ERR_INVALID_ARG for a sound file of another model or optimizer. */
static dt_status ckpt_read(const char *path, dt_model *m, dt_optimizer *o, dt_scaler *sc, long *step, int *world)
{
    FILE *f = fopen(path, "rb");
    if (!f) return dt_set_error(DT_ERR_IO, "cannot open checkpoint %s: %s", path, strerror(errno));
    ckpt_header h;
    dt_status s = DT_OK;
    if (fread(&h, sizeof h, 1, f) != 1) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (no complete header)", path);
        goto done;
    }
    uint32_t want = h.header_crc;
    h.header_crc = 0;
    if (memcmp(h.magic, CKPT_MAGIC, 8) != 0 || crc_of(&h, sizeof h) != want) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is not a dtrain checkpoint or its header is damaged", path);
        goto done;
    }
    if (h.version != 1 && h.version != CKPT_VERSION) {
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s has version %u; this dtrain reads versions 1 to %u", path,
                         h.version, CKPT_VERSION);
        goto done;
    }
    ckpt_scaler cs;
    memset(&cs, 0, sizeof cs);
    if (h.version >= 2) {
        uint32_t cwant;
        if (fread(&cs, sizeof cs, 1, f) != 1) {
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (no loss-scaler block)", path);
            goto done;
        }
        cwant = cs.crc;
        cs.crc = 0;
        if (crc_of(&cs, sizeof cs) != cwant || cs.present > 1) {
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: the loss-scaler block is damaged (CRC mismatch)", path);
            goto done;
        }
    }
    if (h.fingerprint != model_fingerprint(m) || h.nparams != dt_model_num_params(m)) {
        s = dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s was written for another model (%llu parameters, this one "
                         "has %zu): resume with the same --model and --input, or use another --checkpoint-dir",
                         path, (unsigned long long)h.nparams, dt_model_num_params(m));
        goto done;
    }
    dt_optim_config oc;
    int t;
    const float *c1, *c2;
    size_t n1, n2;
    optimizer_state(o, &oc, &t, &c1, &n1, &c2, &n2);
    if ((uint32_t)oc.kind != h.optim_kind || h.section_n[1] != n1 || h.section_n[2] != n2) {
        s = dt_set_error(DT_ERR_INVALID_ARG, "checkpoint %s holds state of another optimizer: resume with the same "
                         "--optim and --momentum", path);
        goto done;
    }
    /* Every section is read and checked before anything in m or o is overwritten. */
    float *dst[3] = {dt_model_params(m), (float *)c1, (float *)c2}, *buf[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && !s; i++) {
        size_t n = (size_t)h.section_n[i];
        if (!(buf[i] = malloc(n ? n * sizeof(float) : 1)))
            s = dt_set_error(DT_ERR_NOMEM, "out of memory reading checkpoint %s", path);
        else if (fread(buf[i], sizeof(float), n, f) != n || crc_of(buf[i], n * sizeof(float)) != h.section_crc[i])
            s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s: section %d is truncated or damaged (CRC mismatch)",
                             path, i);
    }
    if (!s && fgetc(f) != EOF)
        s = dt_set_error(DT_ERR_CORRUPT, "checkpoint %s has data after its last section", path);
    /* A GPU model's parameters go up from the host buffer. */
    if (!s && dt_model_on_gpu(m)) s = model_params_from_host(m, buf[0]);
    for (int i = 0; i < 3; i++) {
        if (!s && h.section_n[i] && !(i == 0 && dt_model_on_gpu(m)))
            memcpy(dst[i], buf[i], (size_t)h.section_n[i] * sizeof(float));
        free(buf[i]);
    }
    if (s) goto done;
    optimizer_host_changed(o);
    if (sc && cs.present) {
        dt_scaler_state st = {.scale = cs.scale, .good_steps = cs.good_steps, .hysteresis_left = cs.hysteresis_left,
                              .updates = (long)cs.updates, .skipped = (long)cs.skipped};
        if (dt_scaler_set_state(sc, &st)) {
            /* Parameters are already in: the scaler simply starts afresh, as for a run without one. */
            dt_log(DT_LOG_WARN, "checkpoint %s: loss-scaler state not usable with this run's settings (%s); the "
                   "loss scale starts again from its initial value", path, dt_last_error());
        }
    } else if (sc) {
        dt_log(DT_LOG_INFO, "checkpoint %s holds no loss-scaler state: the loss scale starts from its initial value",
               path);
    }
    optimizer_set_t(o, h.optim_t);
    *step = (long)h.step;
    *world = (int)h.world;
done:
    fclose(f);
    return s;
}

static int ckpt_step_of(const char *name, long *step)
{
    int n = 0;
    return sscanf(name, "ckpt-%ld.dtc%n", step, &n) == 1 && name[n] == '\0' && *step >= 0;
}

dt_status dt_checkpoint_load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o, long *step)
{
    return dt_checkpoint_load_latest_scaled(ctx, dir, m, o, NULL, step);
}

dt_status dt_checkpoint_load_latest_scaled(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                           dt_scaler *sc, long *step)
{

    int rank = ctx ? dt_rank(ctx) : 0, world = ctx ? dt_world_size(ctx) : 1;
    long found = -1;
    int saved_world = world;
    dt_status s = DT_OK;
    char msg[2048] = "";
    if (rank == 0) {
        DIR *d = opendir(dir);
        long best = -1;
        /* Newest first: collect steps, try from the highest down. */
        long *steps = NULL;
        size_t ns = 0, cap = 0;
        if (d) {
            struct dirent *e;
            long st;
            while ((e = readdir(d)))
                if (ckpt_step_of(e->d_name, &st)) {
                    if (ns == cap) {
                        cap = cap ? 2 * cap : 16;
                        long *nsb = realloc(steps, cap * sizeof *steps);
                        if (!nsb) break;
                        steps = nsb;
                    }
                    steps[ns++] = st;
                }
            closedir(d);
        }
        while (ns > 0 && found < 0) {
            size_t bi = 0;
            for (size_t i = 1; i < ns; i++)
                if (steps[i] > steps[bi]) bi = i;
            best = steps[bi];
            steps[bi] = steps[--ns];
            char path[4096];
            snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, best);
            long st = -1;
            int w = world;
            dt_status r = ckpt_read(path, m, o, sc, &st, &w);
            if (r == DT_OK) {
                found = st;
                saved_world = w;
            } else if (r == DT_ERR_INVALID_ARG) {
                s = r; /* another model or optimizer: a user error, not a damaged file */
                snprintf(msg, sizeof msg, "%s", dt_last_error());
                break;
            } else {
                dt_log(DT_LOG_WARN, "skipping checkpoint: %s", dt_last_error());
            }
        }
        free(steps);
    }
    if (ctx && world > 1) {
        /* Rank 0's verdict and state go to every rank (broadcast moves bytes: 4 int64 as 8 floats). */
        int64_t hdr[4] = {(int64_t)s, found, saved_world, 0};
        dt_status c;
        if ((c = dt_broadcast(ctx, hdr, 8, DT_F32, 0))) return c;
        if (hdr[0] != DT_OK)
            return dt_set_error((dt_status)hdr[0], "%s", rank == 0 ? msg : "rank 0 refused the checkpoints: read its message");
        found = (long)hdr[1];
        saved_world = (int)hdr[2];
        if (found >= 0) {
            dt_optim_config oc;
            int t;
            const float *c1, *c2;
            size_t n1, n2;
            if ((c = dt_broadcast(ctx, dt_model_params(m), dt_model_num_params(m), DT_F32, 0))) return c;
            optimizer_state(o, &oc, &t, &c1, &n1, &c2, &n2);
            if (n1 && (c = dt_broadcast(ctx, (float *)c1, n1, DT_F32, 0))) return c;
            if (n2 && (c = dt_broadcast(ctx, (float *)c2, n2, DT_F32, 0))) return c;
            optimizer_host_changed(o);
            int64_t tt = t;
            if ((c = dt_broadcast(ctx, &tt, 2, DT_F32, 0))) return c;
            optimizer_set_t(o, (int)tt);
            if (sc) {
                /* Rank 0's scaler, restored or not, is every rank's: they must all scale alike. */
                dt_scaler_state st;
                dt_scaler_get_state(sc, &st);
                int64_t v[6] = {0, st.good_steps, st.hysteresis_left, st.updates, st.skipped, 0};
                memcpy(&v[0], &st.scale, sizeof st.scale);
                if ((c = dt_broadcast(ctx, v, 12, DT_F32, 0))) return c;
                memcpy(&st.scale, &v[0], sizeof st.scale);
                st.good_steps = (int)v[1];
                st.hysteresis_left = (int)v[2];
                st.updates = (long)v[3];
                st.skipped = (long)v[4];
                if (rank != 0 && (c = dt_scaler_set_state(sc, &st))) return c;
            }
        }
    } else if (s) {
        return dt_set_error(s, "%s", msg);
    }
    if (found >= 0 && saved_world != world)
        dt_log0(DT_LOG_WARN, "checkpoint of step %ld was written by %d ranks, resuming on %d: the global batch and "
                "the data each rank sees change from here", found, saved_world, world);
    *step = found >= 0 ? found : 0;
    return DT_OK;
}
