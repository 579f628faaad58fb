/*
 * test_engine_zero.c - the engine's reduce-scatter and allgather (ZeRO-1) against its own
 * allreduce: the owned part of every bucket must hold bitwise the allreduce's values (same split,
 * same rank order), the rest this rank's own values; an allgather must bring every rank's part.
 * fp32, a 16-bit wire for fp32 values, a bucket kept in bf16; inline and with a communication
 * thread (where MPI offers MPI_THREAD_MULTIPLE); bucket sizes that split unevenly at 3 ranks.
 * Then the MPI backend's blocking halves (MPI_Reduce_scatter_block / MPI_Allgather, equal blocks)
 * against the engine's allreduce: bitwise at 1 and 2 ranks, where a sum has one order; within 1e-6
 * beyond, where MPI picks its own order.
 */
#include <math.h>
#include "collectives/coll.h"
#include "collectives/engine.h"
#include "mpi_check.h" /* CHECK, and the failures, rank and world it uses */
#include "kernels/cast.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value that differs per rank and element and is not exactly representable sums in any order. */
static float value_of(int r, size_t i) { return (float)((double)((r + 1) * 7919 + (int)(i % 977)) / 3.7 - 1000.0); }

static void fill(float *v, size_t n, int r)
{
    for (size_t i = 0; i < n; i++) v[i] = value_of(r, i);
}

/* Reduce-scatter of n fp32 values on the given wire against the allreduce of the same values. */
static void check_reduce_scatter(engine *e, size_t n, dt_dtype wire, dt_redop op)
{
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    fill(a, n, rank);
    fill(b, n, rank);
    CHECK(engine_start(e, a, n, op, 1, wire) == DT_OK, "allreduce start");
    CHECK(engine_start_reduce_scatter(e, b, NULL, n, op, 2, wire) == DT_OK, "reduce-scatter start");
    CHECK(engine_wait_all(e) == DT_OK, "wait");
    size_t off, cnt;
    engine_part(n, rank, world, &off, &cnt);
    for (size_t i = 0; i < n; i++) {
        const int own = i >= off && i < off + cnt;
        const float want = own ? a[i] : value_of(rank, i);
        if (memcmp(&b[i], &want, sizeof want) != 0) {
            CHECK(0, "n %zu wire %s element %zu (%s): %.9g, want %.9g", n, dt_dtype_name(wire), i,
                  own ? "owned" : "not owned", (double)b[i], (double)want);
            break;
        }
    }
    free(a);
    free(b);
}

/* A bucket kept in bf16. */
static void check_reduce_scatter16(engine *e, size_t n)
{
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    float *v = malloc(n * sizeof *v);
    fill(v, n, rank);
    cpu_cast_f32_to_16(DT_BF16, v, a, n);
    memcpy(b, a, n * 2);
    CHECK(engine_start16(e, a, n, DT_AVG, 1, DT_BF16) == DT_OK, "allreduce16 start");
    CHECK(engine_start_reduce_scatter(e, NULL, b, n, DT_AVG, 2, DT_BF16) == DT_OK, "reduce-scatter16 start");
    CHECK(engine_wait_all(e) == DT_OK, "wait");
    size_t off, cnt;
    engine_part(n, rank, world, &off, &cnt);
    for (size_t i = off; i < off + cnt; i++)
        if (a[i] != b[i]) {
            CHECK(0, "bf16 n %zu element %zu: %#x, want %#x", n, i, b[i], a[i]);
            break;
        }
    free(a);
    free(b);
    free(v);
}

static void check_allgather(engine *e, size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = -1.0f; /* what no rank's part holds */
    size_t off, cnt;
    engine_part(n, rank, world, &off, &cnt);
    for (size_t i = off; i < off + cnt; i++) p[i] = value_of(rank, i);
    CHECK(engine_start_allgather(e, p, n, 3) == DT_OK, "allgather start");
    CHECK(engine_wait_all(e) == DT_OK, "wait");
    for (int r = 0; r < world; r++) {
        engine_part(n, r, world, &off, &cnt);
        for (size_t i = off; i < off + cnt; i++)
            if (p[i] != value_of(r, i)) {
                CHECK(0, "allgather n %zu element %zu (rank %d's part): %g, want %g", n, i, r, (double)p[i],
                      (double)value_of(r, i));
                break;
            }
    }
    free(p);
}

/* The MPI backend's reduce-scatter and allgather of n = blocks x world elements. */
static void check_coll_halves(engine *e, coll *c, size_t block, dt_redop op)
{
    const size_t n = block * (size_t)world;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    fill(a, n, rank);
    fill(b, n, rank);
    CHECK(engine_start(e, a, n, op, 1, DT_F32) == DT_OK && engine_wait_all(e) == DT_OK, "engine allreduce");
    CHECK(c->ops->reduce_scatter(c, b, n, DT_F32, op) == DT_OK, "coll reduce_scatter");
    const size_t off = (size_t)rank * block;
    for (size_t i = off; i < off + block; i++) {
        const double d = fabs((double)b[i] - (double)a[i]), tol = world <= 2 ? 0.0 : 1e-6 * (fabs((double)a[i]) + 1.0);
        if (d > tol) {
            CHECK(0, "coll reduce_scatter block %zu element %zu: %.9g, engine %.9g", block, i, (double)b[i],
                  (double)a[i]);
            break;
        }
    }
    /* The allgather of the reduced blocks gives every rank the whole of them. */
    for (size_t i = 0; i < n; i++) b[i] = i >= off && i < off + block ? (float)i : -1.0f;
    CHECK(c->ops->allgather(c, b, n, DT_F32) == DT_OK, "coll allgather");
    for (size_t i = 0; i < n; i++)
        if (b[i] != (float)i) {
            CHECK(0, "coll allgather block %zu element %zu: %g", block, i, (double)b[i]);
            break;
        }
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    /* Sizes: fewer elements than ranks, uneven splits, several blocks of the reduction. */
    const size_t sizes[] = {1, 2, 5, 1000, 4099, 100003};
    for (int threaded = 0; threaded < 2; threaded++) {
        engine *e = NULL;
        if (engine_create(MPI_COMM_WORLD, 60, threaded, DT_ALLREDUCE_AUTO, &e) != DT_OK) {
            fprintf(stderr, "engine_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        CHECK(engine_rank(e) == rank && engine_size(e) == world, "engine rank/size");
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            check_reduce_scatter(e, sizes[k], DT_F32, DT_AVG);
            check_reduce_scatter(e, sizes[k], DT_F32, DT_SUM);
            check_reduce_scatter(e, sizes[k], DT_F16, DT_AVG);
            check_reduce_scatter16(e, sizes[k]);
            check_allgather(e, sizes[k]);
        }
        engine_destroy(e);
    }
    {
        engine *e = NULL;
        coll *c = NULL;
        if (engine_create(MPI_COMM_WORLD, 60, 0, DT_ALLREDUCE_AUTO, &e) != DT_OK ||
            coll_mpi_create(MPI_COMM_WORLD, 0, 60, &c) != DT_OK) {
            fprintf(stderr, "engine_create or coll_mpi_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        const size_t blocks[] = {1, 7, 1000, 33333};
        for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
            check_coll_halves(e, c, blocks[k], DT_SUM);
            check_coll_halves(e, c, blocks[k], DT_AVG);
        }
        /* A count that is not a multiple of the world, and a 16-bit type, are refused by name. */
        float x[5] = {0};
        if (world > 1)
            CHECK(c->ops->reduce_scatter(c, x, (size_t)world + 1, DT_F32, DT_SUM) == DT_ERR_INVALID_ARG,
                  "uneven count accepted");
        CHECK(c->ops->allgather(c, x, (size_t)world, DT_BF16) == DT_ERR_UNSUPPORTED, "bf16 accepted");
        c->ops->destroy(c);
        engine_destroy(e);
    }
    /* The parts tile the bucket in rank order. */
    for (size_t n = 0; n < 40; n++) {
        size_t at = 0;
        for (int r = 0; r < world; r++) {
            size_t off, cnt;
            engine_part(n, r, world, &off, &cnt);
            CHECK(off == at, "part %d of %zu starts at %zu, want %zu", r, n, off, at);
            at = off + cnt;
        }
        CHECK(at == n, "parts of %zu end at %zu", n, at);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_engine_zero: %d ranks, %s\n", world, total ? "FAILED" : "ok");
    MPI_Finalize();
    return total ? 1 : 0;
}
