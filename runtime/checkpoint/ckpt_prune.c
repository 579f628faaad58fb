/*
 * ckpt_prune.c - the newest checkpoints of a directory kept, the earlier ones removed
 * (ckpt_prune.h).
 */
#include "runtime/checkpoint/ckpt_prune.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "base/log.h"
#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

dt_status ckpt_prune(const char *dir, long step, int keep, size_t *removed)
{
    if (removed) *removed = 0;
    if (!dir || keep < 1) return status_set_error(DT_ERR_INVALID_ARG, "ckpt_prune: dir is NULL or keep %d < 1", keep);
    ckpt_entry *e;
    size_t n;
    dt_status s = ckpt_list(dir, &e, &n);
    if (s) return s;
    int kept = 0;
    for (size_t i = 0; i < n; i++) { /* newest first */
        char path[4200];
        struct stat sb;
        if (e[i].step > step || (size_t)snprintf(path, sizeof path, "%s/%s", dir, e[i].name) >= sizeof path) continue;
        /* Only the writer's regular files count and go: a FIFO or link named like one is no checkpoint. */
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (kept++ < keep) continue;
        if (unlink(path) == 0) {
            if (removed) (*removed)++;
        } else {
            log_msg(LOG_LEVEL_WARN, "could not remove the old checkpoint %s (%s): it stays; free the space by hand",
                    path, strerror(errno));
        }
    }
    ckpt_list_free(e, n);
    return DT_OK;
}
