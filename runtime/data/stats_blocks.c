/*
 * stats_blocks.c - the normalization's figures in fixed blocks of the picked samples (stats.h):
 * a block's partial sums depend on its samples alone, and the blocks are merged in block order, so
 * the figures are the same bits however the blocks are split over threads (here) and ranks
 * (dataset_compute_normalization), where ranges of samples merged in thread order would change
 * the last bits with the thread count.
 */
#include "runtime/data/stats.h"
#include "base/log.h"
#include "base/status.h"
#include "base/thread_stack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct block_job {
    const ds_split *s;
    const ds_stats_pick *pick;
    size_t first, end, count; /* the job's blocks; the picked samples in all */
    double *part;             /* block `first`'s partials */
    dt_status status;
    size_t bad;
    status_kept msg; /* the last error is per thread: carried back to the caller's */
} block_job;

size_t ds_stats_nblocks(const ds_stats_pick *pick)
{
    const size_t count = (pick->n + pick->stride - 1) / pick->stride;
    return (count + DS_STATS_BLOCK - 1) / DS_STATS_BLOCK;
}

static void *block_run(void *arg)
{
    block_job *j = arg;
    if (thread_altstack_install() != DT_OK)
        log_msg(LOG_LEVEL_WARN, "statistics thread: %s; a crash on it may go unreported", dt_last_error());
    const ds_split *s = j->s;
    const ds_stats_pick *pk = j->pick;
    const int C = s->c;
    const size_t hw = (size_t)s->h * s->w, width = DS_STATS_BLOCK_WIDTH(C);
    float *x = malloc((size_t)C * hw * sizeof *x);
    if (!x) {
        j->status =
            status_set_error(DT_ERR_NOMEM, "out of memory reading %s (%zu values a sample)", s->source, (size_t)C * hw);
        status_keep(&j->msg);
        return NULL;
    }
    for (size_t b = j->first; b < j->end && !j->status; b++) {
        double *sum = j->part + (b - j->first) * width, *sq = sum + C, *samples = sq + C;
        memset(sum, 0, width * sizeof *sum);
        const size_t stop = (b + 1) * DS_STATS_BLOCK < j->count ? (b + 1) * DS_STATS_BLOCK : j->count;
        for (size_t p = b * DS_STATS_BLOCK; p < stop; p++) {
            const size_t at = p * pk->stride, i = pk->idx ? pk->idx[at] : at;
            int32_t y;
            const dt_status st = ds_read_checked(s, i, x, &y);
            if (st == DT_ERR_CORRUPT && pk->skip_corrupt) continue; /* not in the figures */
            if (st) {
                j->status = st;
                j->bad = i;
                status_keep(&j->msg);
                break;
            }
            /* A sample's own sums first, as ds_stats_acc_add makes them. */
            for (int c = 0; c < C; c++) {
                const float *v = x + (size_t)c * hw;
                double a = 0, q = 0;
                for (size_t k = 0; k < hw; k++) {
                    a += v[k];
                    q += (double)v[k] * v[k];
                }
                sum[c] += a;
                sq[c] += q;
            }
            *samples += 1;
        }
    }
    free(x);
    return NULL;
}

dt_status ds_stats_blocks(const ds_split *s, const ds_stats_pick *pick, size_t first, size_t end, int threads,
                          double *part, size_t *bad_sample)
{
    if (pick->stride < 1 || pick->n < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "statistics of %zu samples, every %zu-th: both must be at least 1",
                                pick->n, pick->stride);
    const size_t nb = end > first ? end - first : 0, width = DS_STATS_BLOCK_WIDTH(s->c);
    if (!nb) return DT_OK;
    int t = threads < 1 ? 1 : threads;
    if ((size_t)t > nb) t = (int)nb;
    block_job *jobs = calloc((size_t)t, sizeof *jobs);
    pthread_t *tid = calloc((size_t)t, sizeof *tid);
    if (!jobs || !tid) {
        free(jobs), free(tid);
        return status_set_error(DT_ERR_NOMEM, "out of memory for %d statistics threads", t);
    }
    const size_t count = (pick->n + pick->stride - 1) / pick->stride;
    for (int k = 0; k < t; k++) {
        /* Contiguous runs of blocks, the longer ones first: thread order is block order. */
        const size_t q = nb / (size_t)t, r = nb % (size_t)t, kk = (size_t)k;
        const size_t b0 = first + kk * q + (kk < r ? kk : r);
        jobs[k] = (block_job){.s = s, .pick = pick, .first = b0, .end = b0 + q + (kk < r), .count = count};
        jobs[k].part = part + (b0 - first) * width;
    }
    dt_status st = DT_OK;
    int started = 1; /* thread 0 is the caller */
    for (; started < t; started++)
        if (pthread_create(&tid[started], NULL, block_run, &jobs[started]) != 0) {
            st = status_set_error(DT_ERR_NOMEM, "cannot start statistics thread %d of %d: lower --threads", started + 1,
                                  t);
            break;
        }
    if (!st) block_run(&jobs[0]);
    for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
    /* The lowest run that failed holds the lowest failing sample. */
    for (int k = 0; !st && k < t; k++)
        if (jobs[k].status) {
            st = status_restore(jobs[k].status, &jobs[k].msg);
            if (bad_sample) *bad_sample = jobs[k].bad;
        }
    free(jobs);
    free(tid);
    return st;
}

void ds_stats_blocks_merge(const double *part, size_t nblocks, int c, size_t hw, double *mean, double *std)
{
    const size_t width = DS_STATS_BLOCK_WIDTH(c);
    double samples = 0;
    for (size_t b = 0; b < nblocks; b++) samples += part[b * width + 2 * (size_t)c];
    const double n = samples * (double)hw;
    for (int k = 0; k < c; k++) {
        double sum = 0, sq = 0;
        for (size_t b = 0; b < nblocks; b++) sum += part[b * width + k], sq += part[b * width + c + k];
        const double m = n > 0 ? sum / n : 0, var = n > 0 ? sq / n - m * m : 0;
        mean[k] = m;
        std[k] = sqrt(var > 0 ? var : 0); /* rounding can make a constant channel's var -1e-17 */
    }
}
