/*
 * stats.c - per-channel statistics of a split (stats.h): one pass over every sample, split into
 * contiguous index ranges, one per thread, each with its own double accumulators, merged in
 * thread order so that the figures never depend on which thread finished first.
 */
#include "runtime/data/stats.h"
#include "base/status.h"
#include "base/log.h"
#include "base/thread_stack.h"

#include <math.h>
#include <pthread.h>
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

void ds_stats_acc_add(ds_stats_acc *a, const float *x, int32_t label)
{
    float lo = a->lo, hi = a->hi;
    for (int c = 0; c < a->c; c++) {
        /* A per-sample partial sum first: fewer dependent double additions, same exactness for
         * bytes (a sum of up to 2^28 values below 2^8 stays exact below 2^53 in double). */
        double s = 0, q = 0;
        const float *p = x + (size_t)c * a->hw;
        for (size_t j = 0; j < a->hw; j++) {
            const float v = p[j];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            s += v;
            q += (double)v * v;
        }
        a->sum[c] += s;
        a->sq[c] += q;
    }
    a->lo = lo;
    a->hi = hi;
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
    const double n = (double)a->samples * (double)a->hw;
    for (int c = 0; c < a->c; c++) {
        const double mean = n > 0 ? a->sum[c] / n : 0, var = n > 0 ? a->sq[c] / n - mean * mean : 0;
        out->mean[c] = mean;
        out->std[c] = sqrt(var > 0 ? var : 0); /* rounding can make a constant channel's var -1e-17 */
    }
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

typedef struct stats_job {
    const ds_split *s;
    size_t begin, end;
    ds_stats_acc acc;
    dt_status status;
    size_t bad;
    status_kept msg; /* the last error is per thread: carried back to the caller's */
} stats_job;

static void *stats_run(void *arg)
{
    stats_job *j = arg;
    /* As every dtrain thread: an alternate signal stack, for the crash report of a stack overflow. */
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "statistics thread: %s; a crash on it may go unreported", dt_last_error());
    const ds_split *s = j->s;
    const size_t per = (size_t)s->c * s->h * s->w;
    float *x = malloc(per * sizeof *x);
    if (!x) {
        j->status = status_set_error(DT_ERR_NOMEM, "out of memory reading %s (%zu values a sample)", s->source, per);
        status_keep(&j->msg);
        j->bad = j->begin;
        return NULL;
    }
    for (size_t i = j->begin; i < j->end; i++) {
        int32_t y;
        dt_status st = ds_read(s, i, x, &y);
        if (!st && (y < 0 || y >= s->classes))
            st = status_set_error(DT_ERR_CORRUPT, "%s: label %d of sample %zu is outside 0 to %d", s->source, (int)y, i,
                                  s->classes - 1);
        for (size_t k = 0; !st && k < per; k++)
            if (!isfinite(x[k]))
                st = status_set_error(DT_ERR_CORRUPT,
                                      "%s: value %zu of sample %zu is %g: a dataset must hold finite "
                                      "values",
                                      s->source, k, i, (double)x[k]);
        if (st) {
            j->status = st;
            j->bad = i;
            status_keep(&j->msg);
            break;
        }
        ds_stats_acc_add(&j->acc, x, y);
    }
    free(x);
    return NULL;
}

dt_status ds_compute_stats_at(const ds_split *s, int threads, ds_stats *out, size_t *bad_sample)
{
    memset(out, 0, sizeof *out);
    int t = threads < 1 ? 1 : threads;
    if ((size_t)t > s->count) t = s->count ? (int)s->count : 1;
    stats_job *jobs = calloc((size_t)t, sizeof *jobs);
    pthread_t *tid = calloc((size_t)t, sizeof *tid);
    int *started = calloc((size_t)t, sizeof *started);
    dt_status st = DT_OK;
    if (!jobs || !tid || !started) st = status_set_error(DT_ERR_NOMEM, "out of memory for %d statistics threads", t);
    int made = 0;
    for (; !st && made < t; made++) {
        stats_job *j = &jobs[made];
        j->s = s;
        /* Ranges of q or q + 1 samples, the longer ones first. */
        const size_t q = s->count / (size_t)t, r = s->count % (size_t)t, k = (size_t)made;
        j->begin = k * q + (k < r ? k : r);
        j->end = j->begin + q + (k < r);
        st = ds_stats_acc_init(&j->acc, s->c, (size_t)s->h * s->w, s->classes);
    }
    /* Thread 0 is the caller: threads 0/1 start nothing. */
    for (int k = 1; !st && k < t; k++) {
        if (pthread_create(&tid[k], NULL, stats_run, &jobs[k]) != 0) {
            st = status_set_error(DT_ERR_NOMEM, "cannot start statistics thread %d of %d: lower --threads", k + 1, t);
            break;
        }
        started[k] = 1;
    }
    if (!st) stats_run(&jobs[0]);
    for (int k = 1; k < t; k++)
        if (started[k]) pthread_join(tid[k], NULL);
    if (!st) {
        /* The lowest range that failed holds the lowest failing sample. */
        for (int k = 0; k < t; k++)
            if (jobs[k].status) {
                st = status_restore(jobs[k].status, &jobs[k].msg);
                if (bad_sample) *bad_sample = jobs[k].bad;
                break;
            }
    }
    if (!st) {
        for (int k = 1; k < t; k++) ds_stats_acc_merge(&jobs[0].acc, &jobs[k].acc);
        st = ds_stats_acc_finish(&jobs[0].acc, out);
    }
    for (int k = 0; jobs && k < made; k++) ds_stats_acc_free(&jobs[k].acc);
    free(jobs);
    free(tid);
    free(started);
    return st;
}

dt_status ds_compute_stats(const ds_split *s, int threads, ds_stats *out)
{
    return ds_compute_stats_at(s, threads, out, NULL);
}
