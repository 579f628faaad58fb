/*
 * test_engine_chain.c - the engine's pipelined chain allreduce (DT_ALLREDUCE_CHAIN) against its
 * direct rank-ordered one: bitwise the same values for sums and averages, for buckets smaller than
 * the world, with a last short segment, of one segment and of many (segments set small with
 * engine_set_chain), several buckets in flight at once (started together, waited for once), inline
 * and on a communication thread. The values are not exactly representable, so a different
 * summation order would show in the bits. Also: the algorithm each size takes under
 * DT_ALLREDUCE_AUTO on one node (direct; MPI_Allreduce for 2 ranks on a thread) and under the
 * forced choices, and a repeat of the same buckets (kept memory) giving the same bits.
 */
#include "collectives/engine.h"
#include "mpi_check.h" /* CHECK, and the failures, rank and world it uses */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float value_of(int r, size_t i, int salt)
{
    return (float)((double)((r + 1) * 7919 + (int)((i * 31 + (size_t)salt) % 977)) / 3.7 - 1000.0);
}

static engine *make(dt_allreduce_algo algo, int threaded, size_t seg)
{
    engine *e = NULL;
    if (engine_create(MPI_COMM_WORLD, 60, threaded, algo, &e) != DT_OK) {
        fprintf(stderr, "engine_create failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    engine_set_chain(e, seg, 0);
    return e;
}

/* nb buckets of sizes n[0..nb) through each engine, started together and waited for once: bitwise
 * equal. */
static void compare(engine *chain, engine *direct, const size_t *n, int nb, dt_redop op, const char *what)
{
    float *a[8], *b[8];
    for (int k = 0; k < nb; k++) {
        a[k] = malloc((n[k] ? n[k] : 1) * sizeof(float));
        b[k] = malloc((n[k] ? n[k] : 1) * sizeof(float));
        for (size_t i = 0; i < n[k]; i++) a[k][i] = b[k][i] = value_of(rank, i, k);
    }
    /* One engine at a time: two communication threads driving MPI at once is not what training
     * does, and ThreadSanitizer cannot see Open MPI's own synchronization between them. */
    for (int k = 0; k < nb; k++) CHECK(engine_start(chain, a[k], n[k], op, k, DT_F32) == DT_OK, "chain start");
    CHECK(engine_wait_all(chain) == DT_OK, "chain wait: %s", what);
    for (int k = 0; k < nb; k++) CHECK(engine_start(direct, b[k], n[k], op, k, DT_F32) == DT_OK, "direct start");
    CHECK(engine_wait_all(direct) == DT_OK, "direct wait: %s", what);
    for (int k = 0; k < nb; k++) {
        for (size_t i = 0; i < n[k]; i++)
            if (memcmp(&a[k][i], &b[k][i], sizeof(float)) != 0) {
                CHECK(0, "%s %s bucket %d of %zu: element %zu chain %.9g, direct %.9g", what,
                      op == DT_AVG ? "avg" : "sum", k, n[k], i, (double)a[k][i], (double)b[k][i]);
                break;
            }
        free(a[k]);
        free(b[k]);
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const size_t one[][1] = {{0}, {1}, {2}, {5}, {1000}, {4099}, {100003}};
    const size_t many[] = {7, 100003, 1, 65536, 3001};
    const size_t segs[] = {1000, 65536};
    for (int threaded = 0; threaded < 2; threaded++)
        for (int s = 0; s < 2; s++) {
            engine *c = make(DT_ALLREDUCE_CHAIN, threaded, segs[s]), *d = make(DT_ALLREDUCE_DIRECT, threaded, 0);
            char what[64];
            snprintf(what, sizeof what, "%s, segment %zu", threaded ? "thread" : "inline", segs[s]);
            for (size_t k = 0; k < sizeof one / sizeof *one; k++) {
                compare(c, d, one[k], 1, DT_SUM, what);
                compare(c, d, one[k], 1, DT_AVG, what);
            }
            compare(c, d, many, 5, DT_AVG, what);
            compare(c, d, many, 5, DT_AVG, what); /* again: the buckets' kept memory */
            CHECK(strcmp(engine_algo_name(c, 10), world == 1 ? "none" : "chain") == 0, "forced chain: %s",
                  engine_algo_name(c, 10));
            CHECK(strcmp(engine_algo_name(d, 1 << 24), world == 1 ? "none" : "direct") == 0, "forced direct: %s",
                  engine_algo_name(d, 1 << 24));
            engine_destroy(c);
            engine_destroy(d);
        }
    /* One node (ctest runs every rank here): auto never takes the chain. */
    engine *a = make(DT_ALLREDUCE_AUTO, 1, 0);
    const char *want = world == 1 ? "none" : world == 2 && engine_threaded(a) ? "mpi" : "direct";
    CHECK(strcmp(engine_algo_name(a, 1 << 24), want) == 0, "auto on one node: %s, want %s",
          engine_algo_name(a, 1 << 24), want);
    engine_destroy(a);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_engine_chain: %d ranks, %s\n", world, total ? "FAILED" : "ok");
    MPI_Finalize();
    return total ? 1 : 0;
}
