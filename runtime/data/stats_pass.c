/*
 * stats_pass.c - the one pass over a split's samples that every statistic reads through (stats.h):
 * the picked samples in fixed blocks of DS_STATS_BLOCK, contiguous runs of blocks on the threads,
 * each block's partial sums in double. A block's sums depend on its samples alone and the blocks
 * are merged in block order, so the figures are the same bits however the blocks are split over
 * threads (here) and ranks (dataset_compute_normalization). The same pass finds bad samples for
 * `dtrain data verify`: there a bad sample is listed by its run, the run goes on, and the runs'
 * lists joined in order are the split's, in index order.
 */
#include "runtime/data/stats.h"
#include "runtime/data/dts.h"
#include "base/log.h"
#include "base/status.h"
#include "base/thread_stack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What a pass makes besides the blocks' sums. */
typedef struct pass_want {
    int range_and_classes; /* lo/hi and the samples per class (ds_compute_stats) */
    int keep_going;        /* list bad samples and go on (ds_find_bad_samples) */
    size_t keep;           /* with keep_going: list the first keep of each run (0: all) */
} pass_want;

typedef struct pass_job {
    const ds_split *s;
    const ds_stats_pick *pick;
    const pass_want *want;
    size_t first, end, count; /* the job's blocks; the picked samples in all */
    double *part;             /* block `first`'s partials, or NULL: no sums */
    float lo, hi;             /* want->range_and_classes */
    size_t *counts;
    dt_status status;
    size_t bad;
    status_kept msg; /* the last error is per thread: carried back to the caller's */
    ds_bad_samples found;
    size_t cap; /* found.items' room */
} pass_job;

size_t ds_stats_nblocks(const ds_stats_pick *pick)
{
    const size_t count = (pick->n + pick->stride - 1) / pick->stride;
    return (count + DS_STATS_BLOCK - 1) / DS_STATS_BLOCK;
}

/* Sample i failed with st (its message the last error): counted, and listed while the run has
 * listed fewer than keep. DT_ERR_NOMEM when the list cannot grow. */
static dt_status bad_list_add(pass_job *j, size_t i, dt_status st)
{
    ds_bad_samples *b = &j->found;
    b->count++;
    if (j->want->keep && b->listed >= j->want->keep) return DT_OK;
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

/* Sample x (label y) into the block's partials and, when wanted, the job's class counts (the
 * range is the job's either way: it costs nothing beside the sums). */
static void add_sample(pass_job *j, const float *x, int32_t y, double *sum)
{
    const int C = j->s->c;
    const int range = j->want->range_and_classes;
    ds_stats_sample_sums(x, C, (size_t)j->s->h * j->s->w, sum, sum + C, range ? &j->lo : NULL, range ? &j->hi : NULL);
    sum[2 * C] += 1;
    if (j->counts) j->counts[y]++;
}

static void *pass_run(void *arg)
{
    pass_job *j = arg;
    /* As every dtrain thread: an alternate signal stack, for the crash report of a stack overflow. */
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "statistics thread: %s; a crash on it may go unreported", dt_last_error());
    const ds_split *s = j->s;
    const ds_stats_pick *pk = j->pick;
    const size_t per = (size_t)s->c * s->h * s->w, width = DS_STATS_BLOCK_WIDTH(s->c);
    float *x = malloc(per * sizeof *x);
    if (!x) {
        j->status = status_set_error(DT_ERR_NOMEM, "out of memory reading %s (%zu values a sample)", s->source, per);
        status_keep(&j->msg);
        j->bad = j->first * DS_STATS_BLOCK;
        return NULL;
    }
    for (size_t b = j->first; b < j->end && !j->status; b++) {
        double *sum = j->part ? j->part + (b - j->first) * width : NULL;
        if (sum) memset(sum, 0, width * sizeof *sum);
        const size_t stop = (b + 1) * DS_STATS_BLOCK < j->count ? (b + 1) * DS_STATS_BLOCK : j->count;
        for (size_t p = b * DS_STATS_BLOCK; p < stop; p++) {
            const size_t at = p * pk->stride, i = pk->idx ? pk->idx[at] : at;
            int32_t y;
            dt_status st = ds_read_checked(s, i, x, &y);
            if (st == DT_ERR_CORRUPT && pk->skip_corrupt) continue; /* not in the figures */
            /* Out of memory is no fault of the sample, and the next read would meet it too: it
             * ends the pass whatever the mode. */
            if (st && j->want->keep_going && st != DT_ERR_NOMEM)
                st = bad_list_add(j, i, st);
            else if (!st && sum) /* the bad-sample listing keeps no sums */
                add_sample(j, x, y, sum);
            if (st) {
                j->status = st;
                j->bad = i;
                status_keep(&j->msg);
                break;
            }
        }
    }
    free(x);
    return NULL;
}

static void jobs_free(pass_job *jobs, int t)
{
    for (int k = 0; jobs && k < t; k++) {
        free(jobs[k].counts);
        ds_bad_samples_free(&jobs[k].found);
    }
    free(jobs);
}

/* Runs blocks first .. end - 1 of pick over threads (clamped to 1 .. the blocks), block b's
 * partials into part + (b - first) * width when part is not NULL. *jobs_out (*njobs of them) is
 * the caller's to free with jobs_free whatever the result; DT_OK once every job ran, the jobs'
 * own status saying how each ended. */
static dt_status pass(const ds_split *s, const ds_stats_pick *pick, size_t first, size_t end, int threads,
                      const pass_want *want, double *part, pass_job **jobs_out, int *njobs)
{
    const size_t nb = end > first ? end - first : 0, width = DS_STATS_BLOCK_WIDTH(s->c);
    int t = threads < 1 ? 1 : threads;
    if ((size_t)t > nb) t = nb ? (int)nb : 1;
    pass_job *jobs = calloc((size_t)t, sizeof *jobs);
    pthread_t *tid = calloc((size_t)t, sizeof *tid);
    *jobs_out = jobs;
    *njobs = jobs ? t : 0;
    if (!jobs || !tid) {
        free(tid);
        return status_set_error(DT_ERR_NOMEM, "out of memory for %d statistics threads", t);
    }
    const size_t count = (pick->n + pick->stride - 1) / pick->stride;
    dt_status st = DT_OK;
    for (int k = 0; k < t; k++) {
        /* Contiguous runs of blocks, the longer ones first: thread order is block order. */
        const size_t q = nb / (size_t)t, r = nb % (size_t)t, kk = (size_t)k;
        const size_t b0 = first + kk * q + (kk < r ? kk : r);
        jobs[k] = (pass_job){.s = s, .pick = pick, .want = want, .first = b0, .end = b0 + q + (kk < r), .count = count};
        jobs[k].part = part ? part + (b0 - first) * width : NULL;
        jobs[k].lo = INFINITY, jobs[k].hi = -INFINITY;
        if (want->range_and_classes && !(jobs[k].counts = calloc((size_t)s->classes, sizeof *jobs[k].counts)))
            st = status_set_error(DT_ERR_NOMEM, "out of memory for the samples per class of %d classes", s->classes);
    }
    /* Every sample in file order (each thread a run of them): a .dts read ahead, as it is not for
     * training's shuffled reads. */
    const int in_order = !pick->idx && pick->stride == 1;
    if (!st && in_order) dts_advise_in_order(s, 1);
    int started = 1; /* thread 0 is the caller */
    for (; !st && started < t; started++)
        if (pthread_create(&tid[started], NULL, pass_run, &jobs[started]) != 0) {
            st = status_set_error(DT_ERR_NOMEM, "cannot start statistics thread %d of %d: lower --threads", started + 1,
                                  t);
            break;
        }
    if (!st) pass_run(&jobs[0]);
    for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
    if (in_order) dts_advise_in_order(s, 0);
    free(tid);
    return st;
}

/* The first job that failed, in block order, holds the lowest failing sample: its status and
 * message, its index into *bad_sample when not NULL. */
static dt_status first_failure(pass_job *jobs, int t, size_t *bad_sample)
{
    for (int k = 0; k < t; k++)
        if (jobs[k].status) {
            if (bad_sample) *bad_sample = jobs[k].bad;
            return status_restore(jobs[k].status, &jobs[k].msg);
        }
    return DT_OK;
}

static dt_status check_pick(const ds_stats_pick *pick)
{
    if (pick->stride < 1 || pick->n < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "statistics of %zu samples, every %zu-th: both must be at least 1",
                                pick->n, pick->stride);
    return DT_OK;
}

dt_status ds_stats_blocks(const ds_split *s, const ds_stats_pick *pick, size_t first, size_t end, int threads,
                          double *part, size_t *bad_sample)
{
    dt_status st = check_pick(pick);
    if (st || end <= first) return st;
    static const pass_want sums = {0};
    pass_job *jobs;
    int t;
    st = pass(s, pick, first, end, threads, &sums, part, &jobs, &t);
    if (!st) st = first_failure(jobs, t, bad_sample);
    jobs_free(jobs, t);
    return st;
}

void ds_stats_blocks_merge(const double *part, size_t nblocks, int c, size_t hw, double *mean, double *std)
{
    const size_t width = DS_STATS_BLOCK_WIDTH(c);
    /* Each channel's sum and sum of squares over the blocks, in block order, gathered in mean and
     * std, which ds_stats_moments then turns into the figures in place. */
    double samples = 0;
    for (int k = 0; k < c; k++) mean[k] = std[k] = 0;
    for (size_t b = 0; b < nblocks; b++) {
        const double *p = part + b * width;
        for (int k = 0; k < c; k++) mean[k] += p[k], std[k] += p[c + k];
        samples += p[2 * (size_t)c];
    }
    ds_stats_moments(mean, std, c, samples * (double)hw, mean, std);
}

dt_status ds_compute_stats_at(const ds_split *s, int threads, ds_stats *out, size_t *bad_sample)
{
    memset(out, 0, sizeof *out);
    const int C = s->c;
    out->mean = calloc((size_t)C, sizeof *out->mean);
    out->std = calloc((size_t)C, sizeof *out->std);
    out->class_counts = calloc((size_t)s->classes, sizeof *out->class_counts);
    if (!out->mean || !out->std || !out->class_counts) {
        ds_stats_free(out);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %d channels, %d classes", C,
                                s->classes);
    }
    if (s->count == 0) return DT_OK; /* no samples: zero figures */
    const ds_stats_pick every = {.n = s->count, .stride = 1};
    const size_t nb = ds_stats_nblocks(&every);
    /* 2C + 1 doubles a block of 16: 3.5 bytes a sample of 3 channels (4.5 MB for ImageNet). */
    double *part = calloc(nb, DS_STATS_BLOCK_WIDTH(C) * sizeof *part);
    static const pass_want range_and_classes = {.range_and_classes = 1};
    pass_job *jobs = NULL;
    int t = 0;
    dt_status st = part ? pass(s, &every, 0, nb, threads, &range_and_classes, part, &jobs, &t)
                        : status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %zu samples of %s",
                                           s->count, s->source);
    if (!st) st = first_failure(jobs, t, bad_sample);
    if (!st) {
        ds_stats_blocks_merge(part, nb, C, (size_t)s->h * s->w, out->mean, out->std);
        out->lo = INFINITY, out->hi = -INFINITY;
        for (int k = 0; k < t; k++) {
            out->lo = jobs[k].lo < out->lo ? jobs[k].lo : out->lo;
            out->hi = jobs[k].hi > out->hi ? jobs[k].hi : out->hi;
            for (int y = 0; y < s->classes; y++) out->class_counts[y] += jobs[k].counts[y];
        }
    }
    jobs_free(jobs, t);
    free(part);
    if (st) ds_stats_free(out);
    return st;
}

dt_status ds_compute_stats(const ds_split *s, int threads, ds_stats *out)
{
    return ds_compute_stats_at(s, threads, out, NULL);
}

dt_status ds_find_bad_samples(const ds_split *s, int threads, size_t keep, ds_bad_samples *out)
{
    memset(out, 0, sizeof *out);
    if (s->count == 0) return DT_OK;
    const ds_stats_pick every = {.n = s->count, .stride = 1};
    const pass_want listing = {.keep_going = 1, .keep = keep};
    pass_job *jobs;
    int t;
    dt_status st = pass(s, &every, 0, ds_stats_nblocks(&every), threads, &listing, NULL, &jobs, &t);
    /* A job that stopped did so for memory: the pass did not read every sample. */
    if (!st) st = first_failure(jobs, t, NULL);
    /* The runs are in index order and each listed its own first ones: their concatenation, cut at
     * keep, is the first keep of the split whatever the thread count. */
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
