/*
 * bucket.h - the reducer's plan: the caller's parameter ranges (in the order backward makes them)
 * checked to tile the buffer, grouped into buckets (contiguous slices, each allreduced as soon as
 * all its ranges are ready), or buckets cut by size alone when the caller gives no ranges.
 */
#ifndef DT_COLLECTIVES_BUCKET_H
#define DT_COLLECTIVES_BUCKET_H

#include "dtrain.h"

#include <stddef.h>

typedef struct bucket {
    size_t off, n;            /* the slice [off, off + n) of the flat buffer, in elements */
    int first_range, nranges; /* ranges first_range .. first_range + nranges - 1 (in ready order) */
} bucket;

typedef struct bucket_plan {
    bucket *b; /* b[0] is filled first in backward */
    int nb;
    dt_range *r; /* the caller's ranges in ready order; NULL for a plan by size alone */
    int nr;
    int *of_range; /* of_range[i]: the bucket of range i */
    int *by_off;   /* range indices sorted by offset, for lookups */
    int *b_by_off; /* bucket indices sorted by offset */
    size_t count;  /* elements in the buffer */
} bucket_plan;

/* Plans buckets over ranges r[0..nr) given in ready order: they must tile [0, count) exactly
 * (DT_ERR_INVALID_ARG naming the two ranges that overlap, the gap, or the range past the end).
 * A bucket takes consecutive ranges that are adjacent in memory while it stays within its cap
 * (first_cap_bytes for bucket 0, cap_bytes after; a cap of 0 never closes a bucket); a range
 * larger than the cap gets a bucket of its own. elem_bytes: the size of one element. */
dt_status bucket_plan_ranges(size_t count, const dt_range *r, int nr, size_t elem_bytes, size_t first_cap_bytes,
                             size_t cap_bytes, bucket_plan *out);
/* Buckets by size alone: slices cut from the end of the buffer backward, bucket 0 the last
 * first_cap_bytes, then cap_bytes each (caps of 0: one bucket). */
dt_status bucket_plan_auto(size_t count, size_t elem_bytes, size_t first_cap_bytes, size_t cap_bytes, bucket_plan *out);
void bucket_plan_free(bucket_plan *p);

/* The caps' one rule, for every caller that takes them (the reducer, dt_model_set_sync, the
 * memory plan, the step-time model): bucket_mb and first_bucket_mb from 0 (no cap) to 1e6 MiB,
 * NaN refused. DT_ERR_INVALID_ARG naming fn and both caps. */
dt_status bucket_caps_check(const char *fn, double bucket_mb, double first_bucket_mb);
/* A cap in MiB as the planners' bytes, rounded up: a cap under one byte is the smallest cap, not
 * none, and every planner cuts the buckets the reducer cuts. */
size_t bucket_cap_bytes(double mb);

/* The range whose offset is off (-1 when none); *nearest gets the range nearest to off (for
 * messages; -1 with no ranges). */
int bucket_plan_find_range(const bucket_plan *p, size_t off, int *nearest);
/* The bucket holding element off (off < count). */
int bucket_plan_bucket_at(const bucket_plan *p, size_t off);

/* A fingerprint of the plan (bucket boundaries and ranges), equal on ranks with equal plans. */
unsigned long long bucket_plan_hash(const bucket_plan *p);

#endif
