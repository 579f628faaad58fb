/*
 * doctor_paths.h - doctor's checks of the paths a job will use (path_checks.c): --checkpoint-dir
 * (writable, free space for the checkpoints, a file system lost at reboot), --data (opens as
 * training opens it, its size) and --metrics (writable), spelled as `dtrain train` spells them.
 * Rank 0 alone checks the checkpoint directory and the metrics file, as rank 0 alone writes them in
 * training: one view of the file systems, and the rows are about the job. --data is read by every
 * rank in training, each on its own node's file systems, so every rank opens it
 * (doctor_paths_collect) and a rank that cannot fails the row for its ranks, naming its host.
 */
#ifndef DT_LAUNCH_DOCTOR_PATHS_H
#define DT_LAUNCH_DOCTOR_PATHS_H

#include "launch/doctor/doctor_memory.h"

struct doc_list;
struct doctor_facts;

/* The paths asked for (NULL: not given) and --keep-checkpoints (0: every checkpoint kept). */
typedef struct doctor_path_query {
    const char *ckpt_dir, *data, *metrics;
    int keep;
} doctor_path_query;

/* What one rank saw of --data: gathered to rank 0 with its other facts (plain bytes). */
typedef struct doctor_path_facts {
    int data_failed;      /* --data given and this rank could not open it */
    char data_error[480]; /* why, as training would say it */
} doctor_path_facts;

/* This rank's open of --data (p->data NULL: nothing), as training opens it. m as below. */
void doctor_paths_collect(const doctor_path_query *p, const doctor_model_query *m, doctor_path_facts *f);

/* The path.* rows, into job (rows about the job): path.checkpoint, path.checkpoint_space,
 * path.data, path.metrics; nothing for a path not given. m (may be NULL) is the --model query,
 * which sizes one checkpoint (parameters and optimizer state) and gives an image folder its
 * --input. all[r].paths is rank r's doctor_paths_collect (world ranks): path.data fails for the
 * ranks that could not open the dataset, one row per host and error. Changes nothing on disk: a
 * missing --checkpoint-dir is not made. Not collective. */
void doctor_paths_check(const doctor_path_query *p, const doctor_model_query *m, const struct doctor_facts *all,
                        int world, struct doc_list *job);

#endif
