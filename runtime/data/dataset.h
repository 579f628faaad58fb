/*
 * dataset.h - the dataset behind dt_dataset (dtrain.h), in pieces for the loader threads and
 * evaluation: a split of some format (reader.h), an optional view of it (the holdout), the
 * sampler, and the per-sample transforms.
 *
 * Threading: dataset_plan fixes a batch's sample indices in step order (it may make a new
 * epoch's order: one thread at a time, the loader's lock); dataset_fill makes any samples from
 * any thread at once, each thread with its own scratch.
 */
#ifndef DT_RUNTIME_DATA_DATASET_H
#define DT_RUNTIME_DATA_DATASET_H

#include "dtrain.h"
#include "runtime/data/reader.h"
#include "runtime/data/sampler.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct synth_spec; /* kernels/synth.h */

struct dt_dataset {
    ds_split *split; /* owned */
    uint32_t *view;  /* the holdout's view: sample k is split sample view[k]; NULL: all */
    size_t n;        /* samples (of the view) */
    int c, h, w, classes;
    size_t input_size;
    ds_sampler smp;
    uint64_t seed;
    dt_normalize norm;
    float *mean, *std; /* per channel, for DT_NORMALIZE_STANDARD */
    float *mul, *add;  /* per channel: normalized = value * mul + add */
    int crop_pad, flip, skip_bad;
    atomic_long bad;          /* samples replaced, by the loaders' threads */
    dt_synthetic_on synth_on; /* where loaders make synthetic batches */
    atomic_int loaders;       /* loaders reading it now (loader.c): while any does, its
                                 normalization must not change under their threads */
};

/* The split's samples before the holdout's view (dt_dataset_size counts those of the view): what
 * `dtrain eval --holdout` compares with the size of the set training kept. 0 for a NULL d. */
size_t dataset_split_size(const dt_dataset *d);

/* 1 when d's training batches can be made by a backend's synth_batch (synthetic data without
 * augmentation): *out = the generator with d's normalization (host memory, owned by d). 0 with
 * why (n bytes) saying what keeps them on the host. */
int dataset_synth_spec(const dt_dataset *d, struct synth_spec *out, char *why, size_t n);

/* --normalize standard's pass over n samples of `values` values each, of a split of format: 1 reads
 * every one; k > 1 every k-th, at most 20000 of them, for an image folder (each sample a decode)
 * and for a split of more than 2^30 values (each rank would read all of it before its first
 * step). */
size_t dataset_stats_stride(const char *format, size_t n, size_t values);

/* Floats of scratch dataset_fill needs per thread. */
size_t dataset_scratch_floats(const dt_dataset *d);

/* The batch of `rank` at `step` (dt_dataset_batch's): its view indices and epoch. */
dt_status dataset_plan(dt_dataset *d, long step, int rank, int world, int batch, uint32_t *idx, long *epoch);

/* The label dataset_fill gives an evaluation's sample that cannot be decoded (skip_bad). */
#define DS_LABEL_BAD (-1)

/* Samples idx[0..n) of `epoch` (view indices) into x (n x input size) and labels: read, then
 * normalized. A training batch (`train`) is augmented (from (seed, epoch, index)) and an
 * undecodable sample replaced (skip_bad); an evaluation's is as read, and an undecodable sample
 * gets DS_LABEL_BAD, to be left out: replaced, its neighbour would count twice. scratch:
 * dataset_scratch_floats floats. Thread-safe. */
dt_status dataset_fill(dt_dataset *d, const uint32_t *idx, long epoch, int n, int train, float *x, int32_t *labels,
                       float *scratch);

#endif
