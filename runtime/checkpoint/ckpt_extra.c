/*
 * ckpt_extra.c - reading back a caller's own section of a dt_model checkpoint (ckpt_extra.h) from
 * the file of a given step: rank 0 opens it (the header and table checked, the section's CRC
 * checked as it is read) and every rank gets its size and bytes by broadcast. Writing it is
 * ckpt_save_model_with (ckpt_write.c), in the model's own commit. And the normalization figures
 * of the checkpoint a resume will load, read before the model exists (ckpt_peek_figures).
 */
#include "runtime/checkpoint/ckpt_extra.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "collectives/ctx_comm.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rank 0: the section's size into *found (0: none) and, when it is `bytes`, its bytes into dst. */
static dt_status read_on_root(const char *dir, long step, const char *name, void *dst, size_t bytes, uint64_t *found)
{
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, step) >= sizeof path)
        return status_set_error(DT_ERR_INVALID_ARG, "checkpoint directory name is too long (%zu characters)",
                                strlen(dir));
    int fd;
    uint64_t size;
    uint32_t version;
    dt_status s = ckpt_open_regular(path, &fd, &size, &version);
    if (s) return s;
    if (version != CKPT_VERSION) {
        /* Older formats hold dt_model's fixed layout only: no section of anyone else's. */
        close(fd);
        return DT_OK;
    }
    ckpt_file *f;
    /* verify 0: the table is checked here and the one section's CRC as it is read, not every
     * section's again (the load that chose this file read the model's). */
    if ((s = ckpt_file_open_fd(fd, size, path, step, 0, &f))) return s;
    const int i = ckpt_file_find(f, name);
    if (i >= 0 && f->e[i].ranks == 0) {
        *found = f->e[i].bytes;
        if (*found == bytes) s = ckpt_file_read(f, (uint32_t)i, dst);
    }
    ckpt_file_close(f);
    return s;
}

dt_status ckpt_read_extra(dt_ctx *ctx, const char *dir, long step, const char *name, void *dst, size_t bytes,
                          size_t *found_bytes)
{
    if (!dir || !name || !dst || !found_bytes)
        return status_set_error(DT_ERR_INVALID_ARG, "ckpt_read_extra: dir, name, dst or found_bytes is NULL");
    *found_bytes = 0;
    const int rank = ctx ? dt_rank(ctx) : 0;
    uint64_t found = 0;
    dt_status s = rank == 0 ? read_on_root(dir, step, name, dst, bytes, &found) : DT_OK;
    if ((s = ckpt_agree(ctx, s))) return s;
    if ((s = ckpt_bcast_bytes(ctx, &found, sizeof found))) return s;
    if (found == bytes && (s = ckpt_bcast_bytes(ctx, dst, bytes))) return s;
    *found_bytes = (size_t)found;
    return DT_OK;
}

/* Rank 0: the figures of the first checkpoint, newest first, whose header, table and "data"
 * section pass their checks. A file of an older format (no sections) or one without figures
 * ends the search with nothing: the load will read that file, and the caller's own figures stand. */
static dt_status peek_on_root(const char *dir, long *step, uint32_t *channels, float **figures)
{
    ckpt_entry *e;
    size_t n;
    if (ckpt_list(dir, &e, &n)) return DT_OK; /* the load names the problem */
    for (size_t i = 0; i < n; i++) {
        char path[4200];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e[i].name) >= sizeof path) break;
        int fd;
        uint64_t size;
        uint32_t version;
        dt_status s = ckpt_open_regular(path, &fd, &size, &version);
        if (s == DT_ERR_INVALID_ARG) break; /* unreadable: the load stops there too */
        if (s) continue;
        if (version != CKPT_VERSION) {
            close(fd);
            if (version >= 1 && version <= CKPT_VERSION_NEWER_MAX) break; /* a file the load reads or refuses */
            continue;                                                     /* damage: the load skips it */
        }
        ckpt_file *f;
        if (ckpt_file_open_fd(fd, size, path, e[i].step, 0, &f)) continue;
        const int k = ckpt_file_find(f, CKPT4_DATA);
        const uint64_t bytes = k >= 0 ? f->e[k].bytes : 0;
        unsigned char *buf = NULL;
        int damaged = 0;
        if (k >= 0 && f->e[k].ranks == 0 && bytes >= sizeof(ckpt4_data) &&
            bytes <= sizeof(ckpt4_data) + 2 * (uint64_t)CKPT_MAX_CHANNELS * sizeof(float) &&
            (buf = malloc((size_t)bytes))) {
            ckpt4_data cd;
            damaged = ckpt_file_read(f, (uint32_t)k, buf) != DT_OK;
            memcpy(&cd, buf, sizeof cd);
            /* The figures copied out of the bytes, not read through a cast pointer: the section's
             * bytes are no float array (type and alignment). */
            float *fig = NULL;
            if (!damaged && cd.normalize == DT_NORMALIZE_STANDARD && cd.channels > 0 &&
                cd.channels <= CKPT_MAX_CHANNELS && bytes == sizeof cd + 2 * (uint64_t)cd.channels * sizeof(float) &&
                (fig = malloc(2 * (size_t)cd.channels * sizeof *fig))) {
                memcpy(fig, buf + sizeof cd, 2 * (size_t)cd.channels * sizeof *fig);
                if (!ckpt_check_data(path, cd.epoch, cd.offset, cd.normalize, cd.channels, fig)) {
                    *figures = fig, fig = NULL;
                    *channels = cd.channels;
                    *step = f->step;
                }
            }
            free(fig);
        }
        free(buf);
        ckpt_file_close(f);
        if (!damaged) break;
    }
    status_clear_error();
    ckpt_list_free(e, n);
    return DT_OK;
}

dt_status ckpt_peek_figures(dt_ctx *ctx, const char *dir, long *step, int *channels, float **figures)
{
    *step = -1, *channels = 0, *figures = NULL;
    if (!dir) return DT_OK;
    const int rank = ctx ? dt_rank(ctx) : 0;
    long at = -1;
    uint32_t c = 0;
    float *fig = NULL;
    if (rank == 0) peek_on_root(dir, &at, &c, &fig);
    int64_t hdr[2] = {at, c};
    dt_status s = ckpt_bcast_bytes(ctx, hdr, sizeof hdr);
    if (!s && hdr[1] > 0) {
        if (rank != 0 && !(fig = malloc(2 * (size_t)hdr[1] * sizeof *fig)))
            s = status_set_error(DT_ERR_NOMEM, "out of memory for %lld channels' normalization", (long long)hdr[1]);
        /* Every rank joins the figures' broadcast or none. */
        if (!(s = ckpt_agree(ctx, s))) s = ckpt_bcast_bytes(ctx, fig, 2 * (size_t)hdr[1] * sizeof *fig);
    }
    if (s || hdr[1] <= 0) {
        free(fig);
        return s;
    }
    *step = (long)hdr[0], *channels = (int)hdr[1], *figures = fig;
    return DT_OK;
}
