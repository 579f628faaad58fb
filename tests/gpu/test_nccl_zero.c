/*
 * test_nccl_zero.c - the NCCL backend's halves of the allreduce for ZeRO-1 (ncclReduceScatter and
 * ncclAllGather, in place on equal blocks) on device memory: rank r's block after the
 * reduce-scatter is the sum (or mean) of every rank's block r, to 1e-6 relative (NCCL picks its
 * own order beyond two ranks; exact at one); after the allgather every rank holds every block
 * exactly; fp32 and bf16; a count that is not a multiple of the world is refused. Then the
 * reducer's asynchronous halves (start_half, coll_part's split, any count: equal blocks and a tail
 * on the last rank) queued behind a stream and waited for by wait_all, the same checks, with
 * nothing outside this rank's part written by the reduce-scatter. One rank per GPU: ctest runs it at
 * one rank (gpu.nccl_zero.np1), where both halves are the identity, so there it checks that the
 * calls are accepted, queued and waited for (and the refusal), not their arithmetic, which needs
 * two GPUs or more (mpirun -np N on such a machine).
 *
 * Exit status: 0 passed, 1 failed, 77 skipped ("SKIP: ...") without a GPU or without NCCL.
 */
#include <cuda_runtime.h>

#include "collectives/coll.h"
#include "kernels/cast.h"
#include "mpi_check.h" /* CHECK, and the failures, rank and world it uses */
#include "gpu_skip.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float value_of(int r, size_t i) { return (float)((double)((r + 1) * 31 + (int)(i % 101)) / 7.0); }

/* Host values of n elements of type t (fp32 or bf16) as fp32, and their device copy. */
static void *upload(dt_dtype t, const float *h, size_t n)
{
    const size_t esz = dt_dtype_size(t);
    void *d = NULL, *src = (void *)h;
    uint16_t *h16 = NULL;
    if (t != DT_F32) {
        h16 = malloc(n * 2);
        cpu_cast_f32_to_16(t, h, h16, n);
        src = h16;
    }
    CHECK(cudaMalloc(&d, n * esz) == cudaSuccess, "cudaMalloc");
    /* From pageable memory cudaMemcpy may return before its DMA lands, and NCCL's stream does
     * not wait for the legacy stream: the device is waited for. */
    CHECK(cudaMemcpy(d, src, n * esz, cudaMemcpyHostToDevice) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
          "upload");
    free(h16);
    return d;
}

static void download(dt_dtype t, const void *d, float *h, size_t n)
{
    if (t == DT_F32) {
        CHECK(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "download");
        return;
    }
    uint16_t *h16 = malloc(n * 2);
    CHECK(cudaMemcpy(h16, d, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "download");
    cpu_cast_16_to_f32(t, h16, h, n);
    free(h16);
}

/* Rank r's value i, as it is after a trip through type t (so the expected sums need no rounding of
 * the inputs). */
static float wire_value(dt_dtype t, int r, size_t i)
{
    float v = value_of(r, i);
    if (t != DT_F32) {
        uint16_t b;
        cpu_cast_f32_to_16(t, &v, &b, 1);
        cpu_cast_16_to_f32(t, &b, &v, 1);
    }
    return v;
}

/* How a case runs a half (gather 0: reduce-scatter, 1: allgather): the blocking table entries, or
 * start_half queued behind a stream of ours and waited for by wait_all, as the reducer does. */
typedef dt_status (*half_fn)(coll *c, void *d, size_t n, dt_dtype t, dt_redop op, int gather);
static dt_status blocking_half(coll *c, void *d, size_t n, dt_dtype t, dt_redop op, int gather)
{
    return gather ? c->ops->allgather(c, d, n, t) : c->ops->reduce_scatter(c, d, n, t, op);
}
static dt_status queued_half(coll *c, void *d, size_t n, dt_dtype t, dt_redop op, int gather)
{
    cudaStream_t st;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return DT_ERR_DEVICE;
    dt_status s = c->ops->start_half(c, d, n, t, op, gather, st);
    const dt_status w = c->ops->wait_all(c, st);
    if (cudaStreamSynchronize(st) != cudaSuccess && !s) s = DT_ERR_DEVICE;
    cudaStreamDestroy(st);
    return s ? s : w;
}

/* n elements, this rank owning [off, off + cnt): after the reduce-scatter the owned ones are the
 * sum (or mean) of every rank's, and with others_kept the rest still this rank's own; after the
 * allgather every rank's part is everywhere. */
static void halves_case(coll *c, half_fn run, const char *how, dt_dtype t, dt_redop op, size_t n, size_t off,
                        size_t cnt, int others_kept)
{
    float *h = malloc((n ? n : 1) * sizeof *h), *back = malloc((n ? n : 1) * sizeof *back);
    for (size_t i = 0; i < n; i++) h[i] = wire_value(t, rank, i);
    void *d = upload(t, h, n);
    CHECK(run(c, d, n, t, op, 0) == DT_OK, "%s reduce-scatter of %zu", how, n);
    download(t, d, back, n);
    const double tol = t == DT_F32 ? 1e-6 : 1e-2; /* bf16: the sum is rounded to 8 bits of mantissa */
    for (size_t i = 0; i < n; i++) {
        const int mine = i >= off && i < off + cnt;
        if (!mine && !others_kept) continue;
        double want = h[i];
        if (mine) {
            want = 0.0;
            for (int r = 0; r < world; r++) want += wire_value(t, r, i);
            if (op == DT_AVG) want /= world;
        }
        if (fabs((double)back[i] - want) > (world == 1 || !mine ? 0.0 : tol * (fabs(want) + 1.0))) {
            CHECK(0, "%s %s reduce-scatter of %zu: element %zu (%s part) %.9g, want %.9g", how, dt_dtype_name(t), n, i,
                  mine ? "this rank's" : "another rank's", (double)back[i], want);
            break;
        }
    }
    /* Allgather: this rank's part holds index values, the rest -1; every rank must get them all. */
    for (size_t i = 0; i < n; i++) h[i] = i >= off && i < off + cnt ? (float)(i % 200) : -1.0f;
    cudaFree(d);
    d = upload(t, h, n);
    CHECK(run(c, d, n, t, op, 1) == DT_OK, "%s allgather of %zu", how, n);
    download(t, d, back, n);
    for (size_t i = 0; i < n; i++)
        if (back[i] != (float)(i % 200)) {
            CHECK(0, "%s %s allgather of %zu: element %zu is %g", how, dt_dtype_name(t), n, i, (double)back[i]);
            break;
        }
    cudaFree(d);
    free(h);
    free(back);
}

/* The blocking halves: equal blocks of `block`. */
static void blocks_case(coll *c, dt_dtype t, dt_redop op, size_t block)
{
    halves_case(c, blocking_half, "blocking", t, op, block * (size_t)world, (size_t)rank * block, block, 0);
}

/* start_half on any n: coll_part's split, nothing outside this rank's part written. */
static void start_half_case(coll *c, dt_dtype t, size_t n)
{
    size_t off, cnt;
    coll_part(n, rank, world, &off, &cnt);
    halves_case(c, queued_half, "start_half", t, DT_SUM, n, off, cnt, 1);
}

int main(int argc, char **argv)
{
    const int ndev = gpu_devices_or_skip();
    if (!ndev) return 77;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    cudaSetDevice(rank % ndev);
    coll *c = NULL;
    dt_status s = coll_nccl_create(MPI_COMM_WORLD, 60, &c);
    if (s == DT_ERR_UNSUPPORTED) {
        if (rank == 0) printf("SKIP: %s\n", dt_last_error());
        MPI_Finalize();
        return 77;
    }
    if (s) {
        fprintf(stderr, "coll_nccl_create: %s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(c->ops->reduce_scatter && c->ops->allgather, "the NCCL table has no reduce_scatter/allgather");
    const size_t blocks[] = {1, 1000, 100003};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
        blocks_case(c, DT_F32, DT_SUM, blocks[k]);
        blocks_case(c, DT_F32, DT_AVG, blocks[k]);
        blocks_case(c, DT_BF16, DT_SUM, blocks[k]);
    }
    CHECK(c->ops->start_half != NULL, "the NCCL table has no start_half");
    if (c->ops->start_half) {
        /* Fewer elements than ranks (all in the tail), a tail of W - 1, no tail, and a large odd count. */
        const size_t counts[] = {1, (size_t)world - 1, (size_t)world + 1, (size_t)world * 1000, 100003};
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            if (counts[k] == 0) continue;
            start_half_case(c, DT_F32, counts[k]);
            start_half_case(c, DT_BF16, counts[k]);
        }
    }
    if (world > 1) {
        void *d = NULL;
        CHECK(cudaMalloc(&d, 64) == cudaSuccess, "cudaMalloc");
        CHECK(c->ops->reduce_scatter(c, d, (size_t)world + 1, DT_F32, DT_SUM) == DT_ERR_INVALID_ARG,
              "uneven count accepted");
        cudaFree(d);
    }
    c->ops->destroy(c);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_nccl_zero: %d rank(s), %s\n", world, total ? "FAILED" : "ok");
    MPI_Finalize();
    return total ? 1 : 0;
}
