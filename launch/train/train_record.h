/*
 * train_record.h - what a checkpoint of `dtrain train` says about the run that wrote it, beyond
 * the model (train_record.c): the data order (seed, shuffle, samples), the precision, the batch
 * and the OpenBLAS thread count. A resume compares it with its own flags: a different data order
 * mid-epoch would repeat some samples of the epoch and skip others, so it is refused; a changed
 * precision or global batch goes on, said in one line each, and so does a changed BLAS thread
 * count, whose GEMMs sum in another order (the results leave the uninterrupted run's bits).
 *
 * Kept in the checkpoint's section TRAIN_RECORD_SECTION (docs/checkpoint-format.md), written in the
 * model's own commit (ckpt_save_model_with). Checkpoints without it (written before it existed, or
 * by the library's dt_checkpoint_save) resume as before, unchecked.
 */
#ifndef DT_LAUNCH_TRAIN_RECORD_H
#define DT_LAUNCH_TRAIN_RECORD_H

#include "launch/train/train_flags.h"

#include <stdint.h>

#define TRAIN_RECORD_SECTION "dtrain.run"
enum { TRAIN_RECORD_VERSION = 1 };

/* The section's bytes as they are in the file (little-endian, as every dtrain checkpoint). */
typedef struct train_record {
    uint32_t version;   /* TRAIN_RECORD_VERSION */
    uint32_t shuffle;   /* --shuffle: 1 epoch, 0 none */
    uint64_t seed;      /* --seed: the shuffled order, augmentation, and the synthetic data's values */
    uint64_t samples;   /* training samples (after --holdout) */
    uint32_t synthetic; /* 1: the synthetic data, whose values come from the seed */
    uint32_t precision; /* a dt_dtype */
    uint32_t world, batch, accum, drop_last;
    uint32_t blas_threads; /* rank 0's OpenBLAS threads on the CPU; 0: a GPU run, or not recorded */
    uint32_t reserved32;   /* 0 */
    uint64_t reserved;     /* 0 */
} train_record;

/* The record of this run: its flags, its world, its training set and, on the CPU, its OpenBLAS
 * threads (blas_threads; 0 on a GPU, where no GEMM runs on OpenBLAS). */
void train_record_make(const train_opts *t, int world, const dt_dataset *train, int blas_threads, train_record *out);

/* At a resume whose checkpoint (of `step`, data position epoch/offset) holds `saved`: DT_OK when
 * the run may go on, rank 0 saying in one line each what changed (the batch when the global batch,
 * ranks x --batch x --accum-steps, did; the precision unless scaler_fresh, 1 when the load
 * restarted this run's loss scaler and said why; the BLAS thread count where both records have
 * one and the ranks, batch and accumulation are the same, the run that would keep the bits);
 * DT_ERR_INVALID_ARG
 * naming the flag, both values and the fix when this run's data order is not the one the position
 * counts in (another --seed, --shuffle or number of training samples, mid-epoch; another --seed
 * for the synthetic data, whose samples it makes). A record of a version this dtrain does not know
 * is said and not compared. The same verdict on every rank (every rank holds the same records). */
dt_status train_record_check(const train_record *saved, const train_record *now, long step, long epoch, long offset,
                             int scaler_fresh);

/* At `dtrain eval --holdout F` (arg: F as given) on a train split of n samples, of which the
 * holdout sets `aside` apart: DT_OK when the checkpoint's run (saved, a record of this version from
 * a run on files) trained on exactly the other n - aside, so that the samples evaluated are the
 * ones it kept aside. The held-out part depends on F and n alone (a fixed stream, not --seed or
 * --shuffle: runtime/data/dataset.c), so the run's training-set size decides. DT_ERR_INVALID_ARG
 * naming both counts, what training kept aside, the --holdout that gives it, and the fix. */
dt_status train_record_check_holdout(const train_record *saved, const char *arg, size_t n, size_t aside);

/* The shortest --holdout F that sets `kept` of n samples aside (as the holdout rounds F x n), into
 * buf (len bytes): what the run that kept them must have been given. 0 < kept < n. */
void train_record_holdout_for(size_t kept, size_t n, char *buf, size_t len);

#endif
