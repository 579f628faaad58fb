/*
 * train_data.h - the data of `dtrain train` (train_data.c): the training set (a --data file or
 * the synthetic data), the held-out set (--eval-data, the test split, or --holdout), and the
 * lines that say what they are.
 */
#ifndef DT_LAUNCH_TRAIN_DATA_H
#define DT_LAUNCH_TRAIN_DATA_H

#include "launch/train_flags.h"
#include "launch/train_record.h"

#include <stdio.h>

typedef struct train_data {
    dt_dataset *train, *eval; /* eval NULL: nothing held out */
    char eval_what[1100];     /* where the held-out samples come from */
    char input[64];           /* the model's input shape: --input, else the data's "CxHxW" */
    train_record rec;         /* this run's record, saved with each checkpoint (train_record_make) */
} train_data;

/* Opens the training set (before the model: its shape and classes size the model, when --input
 * is not given) with the sampler, augmentation and normalization of t. threads: for the
 * statistics pass. Returns EXIT_OK, or EXIT_USAGE / EXIT_FAIL after printing why. */
int train_data_open(const train_opts *t, int threads, train_data *d);
/* Checks the training set against the model, and opens the held-out set with the training set's
 * normalization. */
int train_data_check_and_eval(const train_opts *t, const dt_model *m, int threads, train_data *d);
/* Rank 0's lines about the data: source, samples, shape, classes, normalization, held-out set. */
void train_data_describe(const train_opts *t, const train_data *d, int world, FILE *out);
/* Steps are optimizer steps, of `accum` batches each (the data position counts batches). */
/* Checkpoints with the data block: the data position after `step` for world x batch, and the
 * normalization in use (dt_checkpoint_save), and the run record d->rec beside them. */
dt_status train_data_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o, const dt_scaler *sc,
                          const train_data *d, int world, int batch, int accum, long step);
/* --resume auto: loads the newest checkpoint; its run record, when it has one, is checked against
 * d->rec (train_record_check: a changed data order mid-epoch is DT_ERR_INVALID_ARG); when it holds
 * a data block, the training and held-out sets take its normalization, and the data position goes
 * on from where it was (so a different rank count continues mid-epoch). Rank 0 says what it did. */
dt_status train_data_resume(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o, dt_scaler *sc, train_data *d,
                            int accum, long *first_step);
void train_data_free(train_data *d);

#endif
