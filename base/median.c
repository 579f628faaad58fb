/*
 * median.c - see median.h.
 */
#include "base/median.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_sort(double *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
