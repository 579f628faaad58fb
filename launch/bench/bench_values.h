/*
 * bench_values.h - the values `dtrain bench allreduce` reduces and what they must come to: a fill
 * whose sums are exact, how many in-place allreduces it may take before it is filled again, and
 * the exact result after them (bench_values.c).
 */
#ifndef DT_LAUNCH_BENCH_VALUES_H
#define DT_LAUNCH_BENCH_VALUES_H

#include "dtrain.h"

#include <stddef.h>

/* An element's fill depends on its index i through i mod BENCH_FILL_PERIOD alone (its residue). */
#define BENCH_FILL_PERIOD 16
/* The most in-place allreduces a fill takes before it is filled again (bench_block's ceiling). */
#define BENCH_MAX_BLOCK 1000L

/* Fills buf[0..count) with this rank's small integers in [-8, 7], different on every rank, so the
 * sum over up to 2^20 ranks is exact in fp32 whatever its order. */
void bench_fill(float *buf, size_t count, int rank);

/* The iterations of a block: how many in-place allreduces (op over world ranks, sent as wire) a
 * fresh fill may take, from 1 to BENCH_MAX_BLOCK, with every value still an integer of magnitude
 * at most 2^p that the type holds exactly (p = 24 for fp32, 11 for fp16, 8 for bf16), so finite
 * and exact whatever the order of the sums. A sum grows W-fold each time; an average stays. */
long bench_block(int world, dt_redop op, dt_dtype wire);

/* out[k]: what an element of residue k holds after n >= 1 in-place allreduces of a fresh fill,
 * computed as the engine computes them (rank order in fp32, DT_AVG divided once, rounded to the
 * wire each time). */
void bench_expected_after(int world, dt_redop op, dt_dtype wire, long n, float out[BENCH_FILL_PERIOD]);

/* Adds to *wrong the elements of buf[0..count) that are not want[i % BENCH_FILL_PERIOD], and to
 * *nonfinite those of them that are inf or NaN. */
void bench_count_wrong(const float *buf, size_t count, const float want[BENCH_FILL_PERIOD], long long *wrong,
                       long long *nonfinite);

#endif
