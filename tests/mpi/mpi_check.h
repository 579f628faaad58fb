/*
 * mpi_check.h - the check macro of the multi-rank C tests: a failed check prints the rank, the
 * line and dtrain's last error and is counted; mpi_check_init starts dtrain on the CPU (or
 * mpi_check_init_config as told); mpi_check_finish sums the failures over the ranks so every rank
 * exits with the same verdict.
 */
#ifndef DT_TESTS_MPI_CHECK_H
#define DT_TESTS_MPI_CHECK_H

#include "dtrain.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int failures, checks, rank, world;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL rank %d line %d: ", rank, __LINE__);                                                 \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, " (last error: %s)\n", dt_last_error());                                                   \
        }                                                                                                              \
    } while (0)

/* This rank's batch of step `step`: n samples of `in` values in [-1, 1) and labels below classes,
 * different on every rank and step (a hash of rank, step, sample and position). */
static inline void mpi_rank_batch(long step, int n, int in, int classes, float *x, int32_t *y)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < in; j++) {
            uint64_t h = (uint64_t)(rank * 1000003 + step * 7919 + i * 131 + j) * 0x9E3779B97F4A7C15ull;
            h ^= h >> 29;
            x[i * in + j] = (float)((double)(h % 20001) / 10000.0 - 1.0);
        }
        y[i] = (int32_t)((i * 7 + step + rank) % classes);
    }
}

/* dt_init with cfg, and rank and world set; a failure ends the job naming the test. */
static inline dt_ctx *mpi_check_init_config(const char *name, const dt_config *cfg)
{
    dt_ctx *ctx = NULL;
    if (dt_init(cfg, &ctx) != DT_OK) {
        fprintf(stderr, "%s: dt_init failed: %s\n", name, dt_last_error());
        dt_abort_job(NULL, 1);
        exit(1);
    }
    rank = dt_rank(ctx);
    world = dt_world_size(ctx);
    return ctx;
}

/* dt_init on the CPU with the defaults (no DTRAIN_* variable), as mpi_check_init_config. */
static inline dt_ctx *mpi_check_init(const char *name)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    return mpi_check_init_config(name, &cfg);
}

/* Every rank's failures summed; prints the verdict on rank 0 as "NAME: W ranks, N checks, ...".
 * Returns the exit code (0 or 1). Collective. */
static inline int mpi_check_finish(dt_ctx *ctx, const char *name)
{
    float bad = (float)failures;
    if (dt_allreduce(ctx, &bad, 1, DT_F32, DT_SUM) != DT_OK) bad = 1;
    if (rank == 0) printf("%s: %d ranks, %d checks, %s\n", name, world, checks, bad > 0 ? "FAILED" : "all passed");
    return bad > 0 ? 1 : 0;
}

#endif
