/*
 * test_engine_hang.c - the watchdog of a two-rank engine on its communication thread, where
 * MPI_Allreduce carries the buckets and the main thread watches the deadline, when rank 1 stops
 * inside the allreduce of a request that rank 0's thread posted in one batch with earlier ones.
 *
 * The thread posts every request queued when it woke before it counts the finished ones; rank 1
 * comes 1 s late, so rank 0's thread sits in request #0 while its main thread queues #1..#5, and
 * then posts #1..#5 in one go: #1 and #2 finish, #3 never does (DTRAIN_TEST_HANG=engine:1:3).
 * The watchdog must watch #3 and end the job within its 1 s deadline, naming rank 1, rather than
 * watching #1 (finished) and waiting forever. Only rank 0 has a deadline, so only its watchdog can
 * end the job. The ctest entry passes on the watchdog's words; reaching the end is a failure.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "collectives/engine.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { REQUESTS = 6, COUNT = 1024 };

int main(int argc, char **argv)
{
    int provided = 0, rank = 0, world = 0;
    /* Read by the engine at its first request: set on every rank before any. */
    setenv("DTRAIN_TEST_HANG", "engine:1:3", 1);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 2 || provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("SKIP: needs 2 ranks and MPI_THREAD_MULTIPLE (here %d ranks, level %d)\n", world, provided);
        MPI_Finalize();
        return 77;
    }
    engine *e = NULL;
    if (engine_create(MPI_COMM_WORLD, rank == 0 ? 1.0 : 0.0, 1, DT_ALLREDUCE_AUTO, &e) != DT_OK) {
        fprintf(stderr, "rank %d: engine_create failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static float bufs[REQUESTS][COUNT];
    if (rank == 1) sleep(1);
    for (int k = 0; k < REQUESTS; k++)
        if (engine_start(e, bufs[k], COUNT, DT_SUM, k, DT_F32) != DT_OK) {
            fprintf(stderr, "rank %d: engine_start of #%d failed\n", rank, k);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    const dt_status s = engine_wait_all(e);
    fprintf(stderr, "rank %d: every request finished (%d) although rank 1 never joins #3\n", rank, (int)s);
    MPI_Abort(MPI_COMM_WORLD, 3);
    return 1;
}
