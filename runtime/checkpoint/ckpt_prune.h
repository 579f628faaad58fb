/*
 * ckpt_prune.h - keeping a checkpoint directory to its newest checkpoints (ckpt_prune.c), so a long
 * run with --checkpoint-every does not fill the disk with files no resume will read.
 */
#ifndef DT_RUNTIME_CHECKPOINT_CKPT_PRUNE_H
#define DT_RUNTIME_CHECKPOINT_CKPT_PRUNE_H

#include "dtrain.h"

#include <stddef.h>

/* After the checkpoint of `step` was committed in dir: removes the checkpoint files of earlier
 * steps beyond the keep - 1 newest of them, so that `step`'s and keep - 1 earlier ones remain
 * (keep >= 1). Files of later steps are left alone and not counted: a resume skipped them as
 * damaged (they are the evidence), and keeping the just-written file is what guarantees a sound
 * checkpoint remains. Only regular files named as the writer names them are removed (never a
 * symlink, FIFO or directory). Local: rank 0 calls it. *removed (may be NULL): how many went.
 * DT_OK also when a file could not be removed (a warning names it and why: training goes on);
 * DT_ERR_IO when dir cannot be listed; DT_ERR_NOMEM; DT_ERR_INVALID_ARG for a NULL dir or keep < 1. */
dt_status ckpt_prune(const char *dir, long step, int keep, size_t *removed);

#endif
