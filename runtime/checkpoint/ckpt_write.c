/*
 * ckpt_write.c - writes a checkpoint so that a crash, a full disk or a file-size limit leaves the
 * previous checkpoint or the new one, never half of one (format in ckpt_format.h).
 *
 * Rank 0 writes DIR/ckpt-<step>.dtc.tmp.<pid>, fsyncs it, renames it into place and fsyncs the
 * directory; on any failure the temporary file is removed and the error says what to do. Every
 * rank learns the outcome, so all go on or all report the failure.
 */
#include "ckpt_format.h"
#include "log.h"
#include "model/model.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* The cause of a failed write, worded as what to do about it. */
static const char *write_advice(int err)
{
    switch (err) {
    case ENOSPC: return "the file system is full: free space or use another --checkpoint-dir";
    case EDQUOT: return "the disk quota is exhausted: free space or use another --checkpoint-dir";
    case EFBIG: return "the file-size limit (ulimit -f, RLIMIT_FSIZE) is below the checkpoint's size: raise it "
                       "(ulimit -f unlimited)";
    default: return "check the directory and the file system";
    }
}

static dt_status write_all(int fd, const void *p, size_t n, const char *path, size_t total)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = w < 0 ? errno : ENOSPC; /* a write of 0 bytes to a regular file: no room */
            struct rlimit rl;
            if (err == EFBIG && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                return dt_set_error(DT_ERR_IO, "writing checkpoint %s failed: %s (limit %llu bytes, the checkpoint "
                                    "is %zu bytes): %s", path, strerror(err), (unsigned long long)rl.rlim_cur, total,
                                    write_advice(err));
            return dt_set_error(DT_ERR_IO, "writing checkpoint %s failed: %s: %s", path, strerror(err),
                                write_advice(err));
        }
        b += w;
        n -= (size_t)w;
    }
    return DT_OK;
}

/* Writes the image (header, scaler block, sections) to fd. A file-size limit would kill the
 * process with SIGXFSZ before write() could return EFBIG; the signal is held back in this thread
 * for the writes, and one that the writes raised is taken off again, so the limit becomes an error
 * message and the temporary file can be removed. The process's signal dispositions stay as the
 * application set them. */
static dt_status write_image(int fd, const char *tmp, const ckpt_header *h, const ckpt_scaler *cs,
                             const ckpt_data *cd, const float *mean, const float *std, const float *const sec[3],
                             const size_t n[3])
{
    const size_t nch = cd->channels;
    size_t total = sizeof *h + sizeof *cs + sizeof *cd + (2 * nch + n[0] + n[1] + n[2]) * sizeof(float);
    sigset_t xfsz, old, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    int masked = pthread_sigmask(SIG_BLOCK, &xfsz, &old) == 0;
    dt_status s = write_all(fd, h, sizeof *h, tmp, total);
    if (!s) s = write_all(fd, cs, sizeof *cs, tmp, total);
    if (!s) s = write_all(fd, cd, sizeof *cd, tmp, total);
    if (!s && nch) s = write_all(fd, mean, nch * sizeof(float), tmp, total);
    if (!s && nch) s = write_all(fd, std, nch * sizeof(float), tmp, total);
    for (int i = 0; !s && i < 3; i++) s = write_all(fd, sec[i], n[i] * sizeof(float), tmp, total);
    if (masked) {
        if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return s;
}

static dt_status ckpt_write(const char *dir, long step, int world, const dt_model *m, const dt_optimizer *o,
                            const dt_scaler *sc, const dt_ckpt_data *data)
{
    char path[4096], tmp[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, step) >= sizeof path)
        return dt_set_error(DT_ERR_INVALID_ARG, "checkpoint directory name is too long (%zu characters)",
                            strlen(dir));
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    const float *sec[3] = {NULL, NULL, NULL};
    size_t n[3] = {dt_model_num_params(m), 0, 0};
    dt_optim_config oc = {0};
    int t = 0;
    float *host = NULL; /* a GPU model's parameters, copied down */
    if (dt_model_on_gpu(m)) {
        dt_status c;
        if (!(host = malloc(n[0] ? n[0] * sizeof *host : 1)))
            return dt_set_error(DT_ERR_NOMEM, "out of host memory for the checkpoint of step %ld", step);
        if ((c = dt_model_get_params(m, host)) || (o && (c = optimizer_to_host((dt_optimizer *)o)))) {
            free(host);
            return c;
        }
    }
    sec[0] = host ? host : model_params_const(m);
    if (o) optimizer_state(o, &oc, &t, &sec[1], &n[1], &sec[2], &n[2]);
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.fingerprint = model_fingerprint(m);
    h.nparams = n[0];
    h.step = step;
    h.world = (uint32_t)world;
    h.optim_kind = o ? (uint32_t)oc.kind : CKPT_OPTIM_NONE;
    h.optim_t = t;
    for (int i = 0; i < 3; i++) {
        h.section_n[i] = n[i];
        h.section_crc[i] = ckpt_crc(sec[i], n[i] * sizeof(float));
    }
    h.header_crc = ckpt_crc(&h, sizeof h);
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
    cs.crc = ckpt_crc(&cs, sizeof cs);
    ckpt_data cd;
    memset(&cd, 0, sizeof cd);
    if (data) {
        cd.present = 1;
        cd.epoch = data->epoch;
        cd.offset = data->offset;
        cd.normalize = (uint32_t)data->normalize;
        cd.channels = data->mean && data->std && data->channels > 0 ? (uint32_t)data->channels : 0;
    }
    {
        uLong c = crc32(0L, (const Bytef *)&cd, sizeof cd);
        if (cd.channels) {
            c = crc32(c, (const Bytef *)data->mean, (uInt)(cd.channels * sizeof(float)));
            c = crc32(c, (const Bytef *)data->std, (uInt)(cd.channels * sizeof(float)));
        }
        cd.crc = (uint32_t)c;
    }

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        free(host);
        return dt_set_error(DT_ERR_IO, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(host);
        return dt_set_error(DT_ERR_IO, "cannot write checkpoint %s: %s", tmp, strerror(errno));
    }
    dt_status s = write_image(fd, tmp, &h, &cs, &cd, cd.channels ? data->mean : NULL, cd.channels ? data->std : NULL,
                              sec, n);
    free(host);
    if (!s && fsync(fd) != 0)
        s = dt_set_error(DT_ERR_IO, "fsync of checkpoint %s failed: %s: %s", tmp, strerror(errno),
                         write_advice(errno));
    if (close(fd) != 0 && !s) s = dt_set_error(DT_ERR_IO, "closing checkpoint %s failed: %s", tmp, strerror(errno));
    if (!s && rename(tmp, path) != 0)
        s = dt_set_error(DT_ERR_IO, "renaming checkpoint %s to %s failed: %s", tmp, path, strerror(errno));
    if (s) {
        unlink(tmp);
        return s;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself reaches the disk */
        close(dfd);
    }
    dt_log(DT_LOG_INFO, "checkpoint %s written (step %ld%s)", path, step, o ? "" : ", weights only");
    return DT_OK;
}

dt_status dt_checkpoint_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o, long step)
{
    return dt_checkpoint_save_scaled(ctx, dir, m, o, NULL, step);
}

dt_status dt_checkpoint_save_scaled(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                    const dt_scaler *sc, long step)
{
    return dt_checkpoint_save_data(ctx, dir, m, o, sc, NULL, step);
}

dt_status dt_checkpoint_save_data(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                  const dt_scaler *sc, const dt_ckpt_data *data, long step)
{
    if (!dir || !*dir) return dt_set_error(DT_ERR_INVALID_ARG, "no checkpoint directory given");
    if (!m) return dt_set_error(DT_ERR_INVALID_ARG, "dt_checkpoint_save: the model is NULL");
    if (step < 0 || step > 999999999999999999L)
        return dt_set_error(DT_ERR_INVALID_ARG, "dt_checkpoint_save: step %ld must be 0 to 10^18-1", step);
    if (data && (data->epoch < 0 || data->offset < 0 || data->normalize < 0 || data->normalize > 2 ||
                 data->channels < 0 || (unsigned)data->channels > CKPT_MAX_CHANNELS))
        return dt_set_error(DT_ERR_INVALID_ARG, "dt_checkpoint_save: data block epoch %ld offset %ld normalize %d "
                            "channels %d out of range", data->epoch, data->offset, data->normalize, data->channels);
    int rank = ctx ? dt_rank(ctx) : 0, world = ctx ? dt_world_size(ctx) : 1;
    /* Every rank holds the same parameters and optimizer state: rank 0 writes, all learn whether
     * it worked, so either every rank goes on or every rank reports the failure. */
    dt_status s = rank == 0 ? ckpt_write(dir, step, world, m, o, sc, data) : DT_OK;
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
