/*
 * stats.c - per-channel statistics of a split (stats.h): one pass over every sample, split into
 * contiguous index ranges, one per thread, each with its own double accumulators, merged in
 * thread order so that the figures never depend on which thread finished first. The same pass
 * serves ds_find_bad_samples (dtrain data verify): there a bad sample is listed by its range and
 * the range goes on, and the ranges' lists joined in order are the split's, in index order.
 */
#include "runtime/data/stats.h"
#include "runtime/data/dts.h"
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

typedef struct stats_job {
    const ds_split *s;
    const ds_stats_pick *pick; /* the samples read (NULL: every one) */
    size_t begin, end;         /* positions in them */
    ds_stats_acc acc;
    dt_status status;
    size_t bad;
    status_kept msg; /* the last error is per thread: carried back to the caller's */
    /* ds_find_bad_samples: a bad sample joins found (the first keep of this range, 0: all) and
     * the pass goes on; otherwise the first one ends the range. */
    int keep_going;
    size_t keep;
    ds_bad_samples found;
    size_t cap; /* found.items' room */
} stats_job;

/* Sample i of a keep_going job failed with st (its message the last error): counted, and listed
 * while the range has listed fewer than keep. DT_ERR_NOMEM when the list cannot grow. */
static dt_status bad_list_add(stats_job *j, size_t i, dt_status st)
{
    ds_bad_samples *b = &j->found;
    b->count++;
    if (j->keep && b->listed >= j->keep) return DT_OK;
    if (b->listed == j->cap) {
        const size_t cap = j->cap ? 2 * j->cap : 16;
        ds_bad_sample *grown = realloc(b->items, cap * sizeof *grown);
        if (!grown)
            return status_set_error(DT_ERR_NOMEM, "out of memory listing bad sample %zu of %s", i, j->s->source);
        b->items = grown;
        j->cap = cap;
    }
    char *why = strdup(dt_last_error());
    if (!why) return status_set_error(DT_ERR_NOMEM, "out of memory listing bad sample %zu of %s", i, j->s->source);
    b->items[b->listed++] = (ds_bad_sample){.index = i, .status = st, .why = why};
    return DT_OK;
}

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
    const ds_stats_pick *pk = j->pick;
    for (size_t p = j->begin; p < j->end; p++) {
        int32_t y;
        const size_t at = pk ? p * pk->stride : p, i = pk && pk->idx ? pk->idx[at] : at;
        dt_status st = ds_read_checked(s, i, x, &y);
        if (st == DT_ERR_CORRUPT && pk && pk->skip_corrupt) continue; /* not in the figures */
        /* Out of memory is no fault of the sample, and the next read would meet it too: it ends
         * the pass whatever the mode. */
        if (st && j->keep_going && st != DT_ERR_NOMEM)
            st = bad_list_add(j, i, st);
        else if (!st)
            ds_stats_acc_add(&j->acc, x, y);
        if (st) {
            j->status = st;
            j->bad = i;
            status_keep(&j->msg);
            break;
        }
    }
    free(x);
    return NULL;
}

/* Runs the pass over s in contiguous ranges, one per thread (threads clamped to 1..count), each
 * job set up by the caller's keep_going/keep; *jobs_out (njobs of them, each with an initialised
 * accumulator) is the caller's to free with jobs_free whatever the result. DT_OK once every job
 * ran; the jobs' own status says how each ended. */
static dt_status jobs_run(const ds_split *s, const ds_stats_pick *pick, int threads, int keep_going, size_t keep,
                          stats_job **jobs_out, int *njobs)
{
    const size_t count = pick ? (pick->n + pick->stride - 1) / pick->stride : s->count;
    int t = threads < 1 ? 1 : threads;
    if ((size_t)t > count) t = count ? (int)count : 1;
    stats_job *jobs = calloc((size_t)t, sizeof *jobs);
    pthread_t *tid = calloc((size_t)t, sizeof *tid);
    int *started = calloc((size_t)t, sizeof *started);
    *jobs_out = jobs;
    *njobs = 0;
    dt_status st = DT_OK;
    if (!jobs || !tid || !started) st = status_set_error(DT_ERR_NOMEM, "out of memory for %d statistics threads", t);
    for (int made = 0; !st && made < t; made++) {
        stats_job *j = &jobs[made];
        j->s = s;
        j->pick = pick;
        j->keep_going = keep_going;
        j->keep = keep;
        /* Ranges of q or q + 1 samples, the longer ones first. */
        const size_t q = count / (size_t)t, r = count % (size_t)t, k = (size_t)made;
        j->begin = k * q + (k < r ? k : r);
        j->end = j->begin + q + (k < r);
        st = ds_stats_acc_init(&j->acc, s->c, (size_t)s->h * s->w, s->classes);
        *njobs = made + 1;
    }
    /* Every sample in file order (each thread a range of them): a .dts read ahead, as it is not
     * for training's shuffled reads. */
    const int in_order = !pick || pick->stride == 1;
    if (!st && in_order) dts_advise_in_order(s, 1);
    /* Thread 0 is the caller: threads 0/1 start nothing. */
    for (int k = 1; !st && k < t; k++) {
        if (pthread_create(&tid[k], NULL, stats_run, &jobs[k]) != 0) {
            st = status_set_error(DT_ERR_NOMEM, "cannot start statistics thread %d of %d: lower --threads", k + 1, t);
            break;
        }
        started[k] = 1;
    }
    if (!st) stats_run(&jobs[0]);
    /* started is NULL when its own allocation failed: then no thread was started. */
    for (int k = 1; started && k < t; k++)
        if (started[k]) pthread_join(tid[k], NULL);
    if (in_order) dts_advise_in_order(s, 0);
    free(tid);
    free(started);
    return st;
}

static void jobs_free(stats_job *jobs, int njobs)
{
    for (int k = 0; jobs && k < njobs; k++) {
        ds_stats_acc_free(&jobs[k].acc);
        ds_bad_samples_free(&jobs[k].found);
    }
    free(jobs);
}

/* The pass of ds_compute_stats_at over pick's samples (NULL: every one). */
static dt_status stats_of(const ds_split *s, const ds_stats_pick *pick, int threads, ds_stats *out, size_t *bad_sample)
{
    memset(out, 0, sizeof *out);
    if (pick && (pick->stride < 1 || pick->n < 1))
        return status_set_error(DT_ERR_INVALID_ARG, "statistics of %zu samples, every %zu-th: both must be at least 1",
                                pick->n, pick->stride);
    stats_job *jobs;
    int t;
    dt_status st = jobs_run(s, pick, threads, 0, 0, &jobs, &t);
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
    jobs_free(jobs, t);
    return st;
}

dt_status ds_compute_stats_at(const ds_split *s, int threads, ds_stats *out, size_t *bad_sample)
{
    return stats_of(s, NULL, threads, out, bad_sample);
}

dt_status ds_compute_stats(const ds_split *s, int threads, ds_stats *out)
{
    return stats_of(s, NULL, threads, out, NULL);
}

dt_status ds_compute_stats_pick(const ds_split *s, const ds_stats_pick *pick, int threads, ds_stats *out)
{
    return stats_of(s, pick, threads, out, NULL);
}

dt_status ds_find_bad_samples(const ds_split *s, int threads, size_t keep, ds_bad_samples *out)
{
    memset(out, 0, sizeof *out);
    stats_job *jobs;
    int t;
    dt_status st = jobs_run(s, NULL, threads, 1, keep, &jobs, &t);
    /* A job that stopped did so for memory: the pass did not read every sample. */
    for (int k = 0; !st && k < t; k++)
        if (jobs[k].status) st = status_restore(jobs[k].status, &jobs[k].msg);
    /* The ranges are in index order and each listed its own first ones: their concatenation, cut
     * at keep, is the first keep of the split whatever the thread count. */
    size_t n = 0;
    for (int k = 0; !st && k < t; k++) {
        out->count += jobs[k].found.count;
        n += jobs[k].found.listed;
    }
    if (keep && n > keep) n = keep;
    if (!st && n && !(out->items = calloc(n, sizeof *out->items)))
        st = status_set_error(DT_ERR_NOMEM, "out of memory listing the %zu bad samples of %s", n, s->source);
    for (int k = 0; !st && k < t && out->listed < n; k++) {
        ds_bad_samples *f = &jobs[k].found;
        for (size_t i = 0; i < f->listed && out->listed < n; i++) {
            out->items[out->listed++] = f->items[i];
            f->items[i].why = NULL; /* moved: jobs_free leaves it */
        }
    }
    if (st) ds_bad_samples_free(out);
    jobs_free(jobs, t);
    return st;
}

void ds_bad_samples_free(ds_bad_samples *b)
{
    if (!b) return;
    for (size_t i = 0; i < b->listed; i++) free(b->items[i].why);
    free(b->items);
    memset(b, 0, sizeof *b);
}
