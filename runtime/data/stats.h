/*
 * stats.h - per-channel statistics of a dataset split: value range, mean and population standard
 * deviation per channel, samples per class. `--normalize standard` uses the mean and std when a
 * split stores none (a .dts stores its own), `dtrain data info` prints them, `dtrain data verify`
 * uses the same pass to read every sample, and the .dts writer stores them in the header.
 *
 * Sums are in double, one accumulator per thread over a fixed range of samples, merged in thread
 * order: the result depends on the thread count (in the last bits) but never on timing.
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
 * *out (free with ds_stats_free). A label outside [0, classes) or a value that is not finite is
 * DT_ERR_CORRUPT naming the sample; a read error passes through with the reader's message;
 * DT_ERR_NOMEM. On failure *out holds nothing to free. */
dt_status ds_compute_stats(const ds_split *s, int threads, ds_stats *out);
/* As ds_compute_stats, and on a failure *bad_sample is the lowest sample index that failed (the
 * one the message names), when bad_sample is not NULL. */
dt_status ds_compute_stats_at(const ds_split *s, int threads, ds_stats *out, size_t *bad_sample);
void ds_stats_free(ds_stats *st);

/* The accumulator under them, for a pass that reads samples anyway (the .dts writer): init for a
 * shape and class count, add samples, merge others in a fixed order, finish into a ds_stats. */
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
