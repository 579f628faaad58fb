/*
 * train_data.h - the data of `dtrain train` (train_data.c): the training set (a --data file or
 * the synthetic data), the held-out set (--eval-data, the test split, or --holdout), and the
 * lines that say what they are.
 */
#ifndef DT_LAUNCH_TRAIN_DATA_H
#define DT_LAUNCH_TRAIN_DATA_H

#include "launch/train/train_flags.h"
#include "launch/train/train_record.h"

#include <stdio.h>

typedef struct train_data {
    dt_dataset *train, *eval; /* eval NULL: nothing held out */
    char eval_what[1100];     /* where the held-out samples come from */
    char input[64];           /* the model's input shape: --input, else the data's "CxHxW" */
    train_record rec;         /* this run's record, saved with each checkpoint (train_record_make) */
    long figures_of;          /* the step of the checkpoint whose normalization the open took (-1: none) */
} train_data;

/* The normalization figures a resumed run's checkpoint keeps (train_ckpt_peek): mean[channels]
 * then std[channels]. */
typedef struct train_figures {
    float *figures; /* NULL: none */
    int channels;
    long step;
} train_figures;

/* Opens the training set (before the model: its shape and classes size the model, when --input
 * is not given) with the sampler, augmentation and normalization of t; figures to compute are left
 * to train_data_normalize. threads: for the statistics pass. ckpt: the figures of the checkpoint a
 * resume will load (NULL or none: its own), taken instead of that pass when the run normalizes by
 * computed statistics and the channels agree. Local. Returns EXIT_OK, or EXIT_USAGE / EXIT_FAIL
 * after printing why. */
int train_data_open(const train_opts *t, int threads, const train_figures *ckpt, train_data *d);
/* The training set's normalization figures that the open left to compute (dataset_open_deferred),
 * computed once for the job: each rank reads its share of the samples and every rank gets the same
 * figures (dataset_compute_normalization); nothing when none are left. EXIT_OK, or the exit code
 * after the failing rank printed why, *shared 1 when every rank knows of the failure (each ends on
 * its own). Collective. */
int train_data_normalize(dt_ctx *ctx, const train_opts *t, train_data *d, int *shared);
/* Checks the training set against the model, and opens the held-out set with the training set's
 * normalization. */
int train_data_check_and_eval(const train_opts *t, const dt_model *m, int threads, train_data *d);
/* Rank 0's lines about the data: source, samples, shape, classes, normalization, held-out set. */
void train_data_describe(const train_opts *t, const train_data *d, int world, FILE *out);
void train_data_free(train_data *d);

#endif
