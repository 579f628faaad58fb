/*
 * stats.h - per-channel statistics of a dataset split: value range, mean and population standard
 * deviation per channel, samples per class. `--normalize standard` uses the mean and std when a
 * split stores none (a .dts stores its own), `dtrain data info` prints them, and the .dts writer
 * stores them in the header. `dtrain data verify` reads every sample through the same pass in a mode
 * that goes on past a bad sample (ds_find_bad_samples), so one run names them all.
 *
 * One pass serves them all (stats_pass.c): the samples in fixed blocks of DS_STATS_BLOCK, each
 * block's sums in double, the blocks merged in block order, so the figures are the same bits
 * whatever the thread count, and for the normalization's figures whatever the rank count.
 */
#ifndef DT_RUNTIME_DATA_STATS_H
#define DT_RUNTIME_DATA_STATS_H

#include "runtime/data/reader.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ds_stats {
    double *mean, *std;   /* c each */
    float lo, hi;         /* the smallest and largest value */
    size_t *class_counts; /* classes entries */
} ds_stats;

/* One pass over every sample of s, split over threads pthreads (0 or 1: the caller alone). Fills
 * *out (free with ds_stats_free); an empty split has figures of 0. A label outside [0, classes) or
 * a value that is not finite is DT_ERR_CORRUPT naming the sample; a read error passes through with
 * the reader's message; DT_ERR_NOMEM (the pass keeps 2c + 1 doubles a block of DS_STATS_BLOCK
 * samples: 3.5 bytes a sample of 3 channels). On failure *out holds nothing to free. */
dt_status ds_compute_stats(const ds_split *s, int threads, ds_stats *out);
/* As ds_compute_stats, and on a failure *bad_sample is the lowest sample index that failed (the
 * one the message names), when bad_sample is not NULL. */
dt_status ds_compute_stats_at(const ds_split *s, int threads, ds_stats *out, size_t *bad_sample);
void ds_stats_free(ds_stats *st);

/* Which samples a pass reads: positions 0, stride, 2 x stride, ... below n, position k being sample
 * idx[k] (idx NULL: sample k); with skip_corrupt a sample whose read is DT_ERR_CORRUPT (an
 * undecodable image, --bad-samples skip) is left out of the figures, not a failure. */
typedef struct ds_stats_pick {
    const uint32_t *idx;
    size_t n, stride;
    int skip_corrupt;
} ds_stats_pick;

/* ds_read of sample i, then its checks: a label outside [0, classes) or a value that is not finite
 * is DT_ERR_CORRUPT naming the sample. */
dt_status ds_read_checked(const ds_split *s, size_t i, float *x, int32_t *y);

/* The normalization's figures in the pass's fixed blocks, so that they are the same bits whatever
 * the thread and rank counts: the picked samples (positions 0 .. ceil(n / stride) - 1)
 * fall in blocks of DS_STATS_BLOCK consecutive positions; each block's sums are in double, each
 * sample's own partial sums first as ds_stats_acc_add makes them, and the blocks are merged in
 * block order. Any split of the blocks over threads or ranks gives the same partials. */
#define DS_STATS_BLOCK 16
/* Doubles per block in a partials array: sum[c], then sum of squares[c], then the samples read. */
#define DS_STATS_BLOCK_WIDTH(c) (2 * (size_t)(c) + 1)
/* The blocks of pick's samples. */
size_t ds_stats_nblocks(const ds_stats_pick *pick);
/* Reads blocks first .. end - 1 over threads pthreads (0 or 1: the caller alone), block b's
 * partials into part + (b - first) * DS_STATS_BLOCK_WIDTH(s->c) (overwritten). A sample that fails
 * (ds_read_checked; with pick->skip_corrupt a DT_ERR_CORRUPT one is left out instead) fails the
 * pass: the lowest such sample's status and message, its index in *bad_sample when not NULL;
 * DT_ERR_NOMEM. */
dt_status ds_stats_blocks(const ds_split *s, const ds_stats_pick *pick, size_t first, size_t end, int threads,
                          double *part, size_t *bad_sample);
/* The mean and population std of each of c channels (hw values each a sample) from nblocks
 * partials, merged in block order. */
void ds_stats_blocks_merge(const double *part, size_t nblocks, int c, size_t hw, double *mean, double *std);

/* The one accumulation under every statistic: adds each of sample x's c channels (hw values each)
 * into sum[k] and sq[k] (the sum of squares), summed over the sample first in double, and widens
 * [*lo, *hi] to its values (lo or hi NULL: no range, the same sums). */
void ds_stats_sample_sums(const float *x, int c, size_t hw, double *sum, double *sq, float *lo, float *hi);
/* The mean and population std of each of c channels from sum[k] and sq[k] over n values (zero
 * when n is 0); mean and std may be sum and sq themselves. */
void ds_stats_moments(const double *sum, const double *sq, int c, double n, double *mean, double *std);

/* A bad sample: its index, what reading or checking it returned, and the message naming it. */
typedef struct ds_bad_sample {
    size_t index;
    dt_status status; /* DT_ERR_CORRUPT (a label, a value, an undecodable image), DT_ERR_IO, ... */
    char *why;        /* owned by the list */
} ds_bad_sample;

typedef struct ds_bad_samples {
    size_t count;         /* every bad sample of the split */
    size_t listed;        /* the first listed of them, in index order, are in items */
    ds_bad_sample *items; /* listed entries */
} ds_bad_samples;

/* The pass of ds_compute_stats over every sample of s, going on past a bad one (a read error, a
 * label outside [0, classes), a value that is not finite): each is counted in out->count, and the
 * first keep of them (0: every one) are listed in index order, the same list whatever the thread
 * count. DT_OK once every sample was read, bad ones or not; DT_ERR_NOMEM stops the pass (a read
 * that ran out of memory included: the next one would too), and then *out holds nothing. The
 * caller owns *out: ds_bad_samples_free. */
dt_status ds_find_bad_samples(const ds_split *s, int threads, size_t keep, ds_bad_samples *out);
void ds_bad_samples_free(ds_bad_samples *b);

/* An accumulator for a pass that reads the samples anyway (the .dts writer): init for a shape and
 * class count, add samples, merge others in a fixed order, finish into a ds_stats. Its sums are
 * each sample's own first, as the pass's blocks make them: byte values (CIFAR, image folders,
 * IDX and .dts of bytes) sum exactly in double, so the writer's figures are the pass's bits there. */
typedef struct ds_stats_acc {
    int c, classes;
    size_t hw, samples;
    double *sum, *sq;
    float lo, hi;
    size_t *counts;
} ds_stats_acc;

dt_status ds_stats_acc_init(ds_stats_acc *a, int c, size_t hw, int classes);
/* x: (c, hw) values; label must lie in [0, classes) (the caller checked it). */
void ds_stats_acc_add(ds_stats_acc *a, const float *x, int32_t label);
void ds_stats_acc_merge(ds_stats_acc *into, const ds_stats_acc *from);
/* Moves the result into *out (the accumulator is freed either way). */
dt_status ds_stats_acc_finish(ds_stats_acc *a, ds_stats *out);
void ds_stats_acc_free(ds_stats_acc *a);

#endif
