/*
 * dataset_norm.c - the standard normalization's figures computed for a whole job
 * (dataset_compute_normalization, dataset.h) and at a plain open (dataset_figures): the picked
 * samples in fixed blocks (stats.h), each rank reading its share of the blocks on its threads,
 * then every rank's partials sent to all and merged in block order. A job of W ranks reads each
 * sample once, not W times, and every rank count and thread count gives the same bits.
 */
#include "runtime/data/dataset.h"
#include "runtime/data/stats.h"
#include "collectives/rank_verdict.h"
#include "base/clock.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Test hook: with DTRAIN_TEST_STATS_LOG=PATH in the environment, each process's part of a
 * statistics pass appends "stats pass: N samples in S s" (the samples it read, the seconds it
 * took) and then "stats figures: M1 .. S1 .." (the float figures in C's %a, exact) to PATH, so
 * tests can count the passes a run makes, how they were shared, and compare the figures' bits. */
static void stats_log(size_t samples, double seconds, int c, const double *mean, const double *std)
{
    const char *path = getenv("DTRAIN_TEST_STATS_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "stats pass: %zu samples in %.3f s\nstats figures:", samples, seconds);
    for (int k = 0; k < 2 * c; k++) fprintf(f, " %a", (double)(float)(k < c ? mean[k] : std[k - c]));
    fprintf(f, "\n");
    fclose(f);
}

/* Block range of rank r of w: contiguous, in rank order, so the partials travel as one slice each. */
static size_t block_at(size_t nblocks, int r, int w)
{
    return nblocks * (size_t)r / (size_t)w; /* below 2^27 blocks x 2^24 ranks: no overflow */
}

dt_status dataset_figures(const dt_dataset *d, dt_ctx *ctx, int threads, double *mean, double *std)
{
    static const char fn[] = "the statistics pass of the normalization";
    const int C = d->c, rank = ctx ? dt_rank(ctx) : 0, world = ctx ? dt_world_size(ctx) : 1;
    const size_t stride = dataset_stats_stride(d->split->format, d->n, d->input_size);
    /* The samples a holdout trains on (not those it keeps aside), every stride-th: on the
     * readers' threads, as a whole split's pass is (20000 images are minutes on one core). */
    const ds_stats_pick pick = {.idx = d->view, .n = d->n, .stride = stride, .skip_corrupt = d->skip_bad};
    const size_t nb = ds_stats_nblocks(&pick), width = DS_STATS_BLOCK_WIDTH(C);
    const size_t b0 = block_at(nb, rank, world), b1 = block_at(nb, rank + 1, world);
    double *part = calloc(nb * width, sizeof *part);
    dt_status s =
        part ? DT_OK
             : status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %zu blocks of %d channels", nb, C);
    const double t0 = clock_now_s();
    if (!s) s = ds_stats_blocks(d->split, &pick, b0, b1, threads, part + b0 * width, NULL);
    const double took = clock_now_s() - t0;
    if (ctx && world > 1) {
        /* Every rank joins the exchange, a failed one too, so none waits for it. */
        s = rank_verdict_status(ctx, s, fn, ", so no rank has the normalization's figures");
        for (int q = 0; !s && q < world; q++) {
            const size_t q0 = block_at(nb, q, world), q1 = block_at(nb, q + 1, world);
            if (q1 > q0) s = dt_broadcast(ctx, part + q0 * width, (q1 - q0) * width * sizeof *part, DT_U8, q);
        }
    }
    if (!s) {
        ds_stats_blocks_merge(part, nb, C, (size_t)d->h * d->w, mean, std);
        const size_t count = (pick.n + stride - 1) / stride, p0 = b0 * DS_STATS_BLOCK, p1 = b1 * DS_STATS_BLOCK;
        stats_log((p1 < count ? p1 : count) - (p0 < count ? p0 : count), took, C, mean, std);
    }
    free(part);
    return s;
}

dt_status dataset_compute_normalization(dt_ctx *ctx, dt_dataset *d)
{
    static const char fn[] = "the statistics pass of the normalization";
    /* Refused before any collective: a NULL dataset is the same mistake on every rank. */
    if (!d) return status_null_arg(fn, "d", "pass the dataset of dataset_open_deferred");
    if (!d->norm_deferred) return DT_OK; /* figures given, the file's own, or another normalization */
    const int C = d->c, world = ctx ? dt_world_size(ctx) : 1;
    double *fig = malloc(2 * (size_t)C * sizeof *fig);
    float *m = malloc(2 * (size_t)C * sizeof *m);
    dt_status s =
        fig && m ? DT_OK : status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %d channels", C);
    /* Both ways join the same exchange (rank_verdict_status), so a rank without memory fails them all. */
    if (!s)
        s = dataset_figures(d, ctx, d->stats_threads, fig, fig + C);
    else if (world > 1)
        s = rank_verdict_status(ctx, s, fn, ", so no rank has the normalization's figures");
    for (int c = 0; !s && c < C; c++) m[c] = (float)fig[c], m[C + c] = (float)fig[C + c];
    /* The same figures on every rank: the same verdict on their range. */
    if (!s) s = dt_dataset_set_normalization(d, DT_NORMALIZE_STANDARD, m, m + C);
    free(m);
    free(fig);
    return s;
}

int dataset_normalization_deferred(const dt_dataset *d) { return d ? d->norm_deferred : 0; }
