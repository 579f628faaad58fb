/*
 * mpi_check.h - the check macro of the multi-rank C tests: a failed check prints the rank, the
 * line and dtrain's last error and is counted; mpi_check_finish sums the failures over the ranks
 * so every rank exits with the same verdict.
 */
#ifndef DT_TESTS_MPI_CHECK_H
#define DT_TESTS_MPI_CHECK_H

#include "dtrain.h"

#include <stdio.h>

static int failures, checks, rank, world;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL rank %d line %d: ", rank, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", dt_last_error());                               \
        }                                                                                          \
    } while (0)

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
