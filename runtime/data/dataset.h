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
    int norm_deferred;        /* standard figures left to dataset_compute_normalization: no batch is
                                 made until they are set (mean, std, mul, add allocated) */
    int stats_threads;        /* dt_data_config.threads: the statistics pass's */
};

/* dt_dataset_open, except that the standard figures the open would compute (DT_NORMALIZE_STANDARD
 * with no mean and std given and none in the file) are not: dataset_normalization_deferred(*out)
 * says so, dt_dataset_normalization gives DT_NORMALIZE_NONE, and a batch is refused
 * (DT_ERR_INVALID_ARG) until dataset_compute_normalization or dt_dataset_set_normalization sets
 * them. Errors as dt_dataset_open's. */
dt_status dataset_open_deferred(const char *path, const dt_data_config *c, dt_dataset **out);
/* 1 while d's figures are deferred (dataset_open_deferred); 0 otherwise and for a NULL d. */
int dataset_normalization_deferred(const dt_dataset *d);
/* Computes the deferred figures of d once for the job (dataset_norm.c): the samples a plain open
 * would read (every one, or an image folder's 20000 evenly spaced) in fixed blocks (stats.h), the
 * blocks split over ctx's ranks and d's dt_data_config.threads threads, every rank getting every
 * block's partial sums (double) and merging them in block order: the same bits on every rank, for
 * any rank or thread count, and a plain open's bits. Collective (ctx NULL: this process reads
 * every block): every rank calls it with its own open of the same data and config. No deferred
 * figures: DT_OK at once, on every rank alike. DT_ERR_INVALID_ARG: a NULL d (at once), figures
 * that cannot normalize, a loader using d; a sample's DT_ERR_IO or DT_ERR_CORRUPT (skip_bad
 * leaves an undecodable one out); DT_ERR_NOMEM; dt_broadcast's errors. A failure on one rank fails
 * every rank: its own status there, the lowest failing rank's status and a message naming it on
 * the others; d stays deferred. */
dt_status dataset_compute_normalization(dt_ctx *ctx, dt_dataset *d);

/* The standard normalization's figures of d (mean[c], std[c], in double), as
 * dataset_compute_normalization computes them (ctx NULL: this process reads every block), on
 * `threads` threads. With a ctx, collective: a rank's failure fails every rank
 * (rank_verdict_status). */
dt_status dataset_figures(const dt_dataset *d, dt_ctx *ctx, int threads, double *mean, double *std);

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
