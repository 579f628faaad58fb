/*
 * median.h - the median of a set of doubles, sorting them in place: the benchmarks' median step
 * and the straggler report's median rank use the same definition (the mean of the middle two for
 * an even count).
 */
#ifndef DT_BASE_MEDIAN_H
#define DT_BASE_MEDIAN_H

#include <stddef.h>

/* Sorts v[0..n) ascending and returns its median; 0 for n == 0. NaNs sort as equal to everything,
 * so give finite values. */
double median_sort(double *v, size_t n);

#endif
