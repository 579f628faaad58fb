/*
 * stats.c - the pieces of a split's statistics (stats.h) that are not the pass itself
 * (stats_pass.c): the accumulator of the .dts writer, which reads every sample anyway; the checks
 * of a sample read; freeing the results.
 */
#include "runtime/data/stats.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_status ds_stats_acc_init(ds_stats_acc *a, int c, size_t hw, int classes)
{
    memset(a, 0, sizeof *a);
    a->c = c;
    a->hw = hw;
    a->classes = classes;
    a->lo = INFINITY;
    a->hi = -INFINITY;
    a->sum = calloc((size_t)c, sizeof *a->sum);
    a->sq = calloc((size_t)c, sizeof *a->sq);
    a->counts = calloc((size_t)classes, sizeof *a->counts);
    if (!a->sum || !a->sq || !a->counts) {
        ds_stats_acc_free(a);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %d channels, %d classes", c,
                                classes);
    }
    return DT_OK;
}

void ds_stats_sample_sums(const float *x, int c, size_t hw, double *sum, double *sq, float *lo, float *hi)
{
    /* The range, when wanted, rides in the sums' loop (one pass over the values: 0.65-0.75x of a
     * sums loop and a range loop apart); the loop without it is its own, as the compares cost the
     * sums-only pass (--normalize standard) 1.3x (10,000 CIFAR-sized samples, -O2). */
    if (!lo || !hi) {
        for (int k = 0; k < c; k++) {
            /* A per-sample partial sum first: fewer dependent double additions, same exactness
             * for bytes (a sum of up to 2^28 values below 2^8 stays exact below 2^53 in double). */
            double s = 0, q = 0;
            const float *p = x + (size_t)k * hw;
            for (size_t j = 0; j < hw; j++) {
                s += p[j];
                q += (double)p[j] * p[j];
            }
            sum[k] += s;
            sq[k] += q;
        }
        return;
    }
    float l = *lo, h = *hi;
    for (int k = 0; k < c; k++) {
        double s = 0, q = 0; /* the same sums, in the same order, as above */
        const float *p = x + (size_t)k * hw;
        for (size_t j = 0; j < hw; j++) {
            const float v = p[j];
            l = v < l ? v : l;
            h = v > h ? v : h;
            s += v;
            q += (double)v * v;
        }
        sum[k] += s;
        sq[k] += q;
    }
    *lo = l;
    *hi = h;
}

void ds_stats_moments(const double *sum, const double *sq, int c, double n, double *mean, double *std)
{
    for (int k = 0; k < c; k++) {
        const double m = n > 0 ? sum[k] / n : 0, var = n > 0 ? sq[k] / n - m * m : 0;
        mean[k] = m;
        std[k] = sqrt(var > 0 ? var : 0); /* rounding can make a constant channel's var -1e-17 */
    }
}

void ds_stats_acc_add(ds_stats_acc *a, const float *x, int32_t label)
{
    ds_stats_sample_sums(x, a->c, a->hw, a->sum, a->sq, &a->lo, &a->hi);
    a->counts[label]++;
    a->samples++;
}

void ds_stats_acc_merge(ds_stats_acc *into, const ds_stats_acc *from)
{
    for (int c = 0; c < into->c; c++) {
        into->sum[c] += from->sum[c];
        into->sq[c] += from->sq[c];
    }
    for (int k = 0; k < into->classes; k++) into->counts[k] += from->counts[k];
    into->lo = from->lo < into->lo ? from->lo : into->lo;
    into->hi = from->hi > into->hi ? from->hi : into->hi;
    into->samples += from->samples;
}

void ds_stats_acc_free(ds_stats_acc *a)
{
    free(a->sum);
    free(a->sq);
    free(a->counts);
    a->sum = a->sq = NULL;
    a->counts = NULL;
}

dt_status ds_stats_acc_finish(ds_stats_acc *a, ds_stats *out)
{
    memset(out, 0, sizeof *out);
    out->mean = calloc((size_t)a->c, sizeof *out->mean);
    out->std = calloc((size_t)a->c, sizeof *out->std);
    if (!out->mean || !out->std) {
        ds_stats_free(out);
        ds_stats_acc_free(a);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %d channels", a->c);
    }
    ds_stats_moments(a->sum, a->sq, a->c, (double)a->samples * (double)a->hw, out->mean, out->std);
    out->lo = a->samples ? a->lo : 0;
    out->hi = a->samples ? a->hi : 0;
    out->class_counts = a->counts;
    a->counts = NULL;
    ds_stats_acc_free(a);
    return DT_OK;
}

void ds_stats_free(ds_stats *st)
{
    if (!st) return;
    free(st->mean);
    free(st->std);
    free(st->class_counts);
    memset(st, 0, sizeof *st);
}

dt_status ds_read_checked(const ds_split *s, size_t i, float *x, int32_t *y)
{
    dt_status st = ds_read(s, i, x, y);
    if (!st && (*y < 0 || *y >= s->classes))
        st = status_set_error(DT_ERR_CORRUPT, "%s: label %d of sample %zu is outside 0 to %d", s->source, (int)*y, i,
                              s->classes - 1);
    const size_t per = (size_t)s->c * s->h * s->w;
    for (size_t k = 0; !st && k < per; k++)
        if (!isfinite(x[k]))
            st =
                status_set_error(DT_ERR_CORRUPT, "%s: value %zu of sample %zu is %g: a dataset must hold finite values",
                                 s->source, k, i, (double)x[k]);
    return st;
}

void ds_bad_samples_free(ds_bad_samples *b)
{
    if (!b) return;
    for (size_t i = 0; i < b->listed; i++) free(b->items[i].why);
    free(b->items);
    memset(b, 0, sizeof *b);
}
