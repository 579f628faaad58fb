/*
 * ckpt_extra.c - reading back a caller's own section of a dt_model checkpoint (ckpt_extra.h) from
 * the file of a given step: rank 0 opens it (the header and table checked, the section's CRC
 * checked as it is read) and every rank gets its size and bytes by broadcast. Writing it is
 * ckpt_save_model_with (ckpt_write.c), in the model's own commit.
 */
#include "runtime/checkpoint/ckpt_extra.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "collectives/ctx_comm.h"
#include "base/status.h"

#include <stdio.h>
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
