/*
 * doctor_paths.h - doctor's checks of the paths a job will use (path_checks.c): --checkpoint-dir
 * (writable, free space for the checkpoints, a file system lost at reboot), --data (opens as
 * training opens it, its size) and --metrics (writable), spelled as `dtrain train` spells them.
 * Rank 0 alone checks them, as rank 0 alone writes checkpoints and metrics in training: one view
 * of the file systems, and the rows are about the job.
 */
#ifndef DT_LAUNCH_DOCTOR_PATHS_H
#define DT_LAUNCH_DOCTOR_PATHS_H

#include "launch/doctor/doctor_memory.h"

struct doc_list;

/* The paths asked for (NULL: not given) and --keep-checkpoints (0: every checkpoint kept). */
typedef struct doctor_path_query {
    const char *ckpt_dir, *data, *metrics;
    int keep;
} doctor_path_query;

/* The path.* rows, into job (rows about the job): path.checkpoint, path.checkpoint_space,
 * path.data, path.metrics; nothing for a path not given. m (may be NULL) is the --model query,
 * which sizes one checkpoint (parameters and optimizer state) and gives an image folder its
 * --input. Changes nothing on disk: a missing --checkpoint-dir is not made. Not collective. */
void doctor_paths_check(const doctor_path_query *p, const doctor_model_query *m, struct doc_list *job);

#endif
