/*
 * coll.h - the collective backends behind one table: MPI (host memory; device buffers are staged
 * through the host because this Open MPI is not CUDA-aware) and NCCL (device memory).
 *
 * Every operation is in place. allreduce/broadcast/barrier block; NCCL also has an asynchronous
 * pair (start / wait_all) for the buckets of device gradients. Every backend honours the deadline
 * given at creation where it can (NCCL polls and aborts the communicator; MPI relies on the
 * launcher and the engine's watchdog).
 */
#ifndef DT_COLLECTIVES_COLL_H
#define DT_COLLECTIVES_COLL_H

#include "dtrain.h"

#include <mpi.h>

typedef struct coll coll;

typedef struct coll_ops {
    const char *name;
    dt_status (*allreduce)(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op);
    dt_status (*broadcast)(coll *c, void *buf, size_t count, dt_dtype t, int root);
    dt_status (*barrier)(coll *c);
    void (*abort)(coll *c); /* tears the communicator down so no rank waits on it */
    /* Optional (NULL where the backend has none): asynchronous device allreduce. start queues an
     * in-place allreduce of buf on the backend's own stream, behind the work queued so far on
     * `after` (a cudaStream_t; NULL is the default stream) through an event: the host does not
     * wait. wait_all waits for everything started, under the deadline (aborting the communicator
     * when it passes or the backend reports an error), then makes `after` wait for it through an
     * event, never a device-wide synchronization. */
    dt_status (*start)(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, void *after);
    dt_status (*wait_all)(coll *c, void *after);
    /* Optional (NULL where the backend has none): makes `after` wait, through an event, for start
     * number k (0 the first) since the last wait_all, without waiting on the host and without
     * the later starts: the optimizer step of one bucket queued while the next ones are reduced.
     * wait_all still ends the step, under the deadline. DT_ERR_INVALID_ARG when k is not a start
     * since the last wait_all. */
    dt_status (*wait_one)(coll *c, int k, void *after);
    /* Optional (NULL where the backend has none): the two halves of the allreduce, for ZeRO-1, in
     * place and blocking. count must be a multiple of the world size W (the caller pads): rank r's
     * block is elements [r count/W, (r+1) count/W). reduce_scatter: afterwards rank r's block holds
     * the sum (or mean) of every rank's block r; the other blocks are unspecified. allgather: every
     * rank's block to every rank. MPI: MPI_Reduce_scatter_block / MPI_Allgather (fp32; their
     * summation order is MPI's: bitwise the engine's only at W <= 2); NCCL: ncclReduceScatter /
     * ncclAllGather (any type). */
    dt_status (*reduce_scatter)(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op);
    dt_status (*allgather)(coll *c, void *buf, size_t count, dt_dtype t);
    /* Optional (NULL where the backend has none): ZeRO-1's halves of a gradient bucket of device
     * memory, asynchronous like start (queued behind `after`, waited for by wait_all), in place, any
     * count: the split is coll_part's. gather 0: reduce-scatter (afterwards this rank's part holds
     * the reduction of every rank's same part; the rest of buf is not written); gather 1: allgather
     * (every rank's part to every rank; op unused). NCCL: one ncclReduceScatter / ncclAllGather of
     * the equal blocks and one ncclReduce / ncclBroadcast of the tail to / from the last rank, in
     * one group. */
    dt_status (*start_half)(coll *c, void *buf, size_t count, dt_dtype t, dt_redop op, int gather, void *after);
    void (*destroy)(coll *c); /* frees everything, c included */
} coll_ops;

struct coll {
    const coll_ops *ops;
    MPI_Comm comm; /* owned: a duplicate of the communicator given at creation */
    int rank, size;
    double timeout_s;
    int device_buffers; /* 1: buffers live in CUDA device memory */
    /* Set by the caller of start just before it (the reducer): the span recorder of its context
     * while that records (a struct trace_rec * of base/trace.h), else NULL, and the bucket's
     * index, so that a backend with a device timeline (NCCL) gives the bucket a span there. */
    void *trace;
    int trace_bucket;
    /* The context that made it (set by dt_init after creation), or NULL: the watchdog names the
     * node of a missing rank from it (ctx_rank_node). */
    const dt_ctx *ctx;
    void *impl; /* the backend's own state */
};

/* MPI backend over a duplicate of comm. device_buffers 1: CUDA buffers, staged through the host
 * (see coll_mpi.c for why even a CUDA-aware MPI gets host buffers). */
dt_status coll_mpi_create(MPI_Comm comm, int device_buffers, double timeout_s, coll **out);
/* Sets on MPI_COMM_WORLD a handler that is fatal as MPI's default (MPI_ERRORS_ARE_FATAL: the
 * error is logged and the job aborted) except inside the backend's own polls of its nonblocking
 * collectives, whose errors Open MPI 4.1 raises there rather than on their communicator: those come
 * back as codes (DT_ERR_MPI). For dt_init when it initialised MPI itself; a caller that initialised
 * MPI keeps its own handler. */
void coll_mpi_world_errhandler(void);
/* Sums count doubles of host memory over c's ranks in place, under c's deadline like its other
 * collectives (a norm's sums of squares, which fp32 would round). c is an MPI backend (the
 * context's host backend, ctx_host_coll). DT_ERR_MPI. */
dt_status coll_mpi_sum_f64(coll *c, double *buf, int count);

/* NCCL backend: ncclUniqueId from rank 0 broadcast over comm, ncclCommInitRank on the current CUDA
 * device. DT_ERR_UNSUPPORTED when built without NCCL. */
dt_status coll_nccl_create(MPI_Comm comm, double timeout_s, coll **out);

/* The device carriers' ZeRO-1 split of n elements over `size` ranks: rank j owns [j q, (j + 1) q)
 * with q = n / size, and the last rank also the n % size elements after size q. Equal blocks, so
 * one ncclReduceScatter / ncclAllGather (or MPI's block collectives) moves them, and a tail of
 * fewer than `size` elements, so nothing is padded; the last rank's extra work is under `size`
 * elements a bucket. (The engine's split, engine_part, spreads the remainder over the first ranks
 * instead: its messages are its own, not a library's equal blocks.) */
void coll_part(size_t n, int j, int size, size_t *off, size_t *cnt);

/* The op a broadcast gives coll_check_args: it reduces nothing, so it alone may move DT_U8. */
#define COLL_NO_REDUCTION (-1)

/* Checks arguments common to every backend (NULL buffer with count > 0, bad dtype/op/root). op is
 * the allreduce's dt_redop, which refuses DT_U8, or COLL_NO_REDUCTION for a broadcast. */
dt_status coll_check_args(const coll *c, const void *buf, size_t count, dt_dtype t, int op, int root);

/* The context's one-thread mark (ctx_enter in ctx_comm.h) around an operation of c that issues
 * collectives, when c is one of a context's backends (c->ctx set); DT_OK and nothing otherwise.
 * Each DT_OK of coll_enter is paired with one coll_leave. */
dt_status coll_enter(const coll *c, const char *what);
void coll_leave(const coll *c);

/* A test hook, for the watchdog's tests only: DTRAIN_TEST_HANG=LAYER:RANK:SEQ makes rank RANK,
 * at collective #SEQ of LAYER (mpi: this backend's operations; engine: a two-rank allreduce by
 * MPI_Allreduce, or a chain allreduce), announce its arrival and then never take part in the
 * exchange: the case of a rank that stops inside a collective, which no fault of dtrain train
 * reaches. 1 when the caller is that rank at that collective (it then waits forever, keeping its
 * arrival message going; in a chain it stops the whole process with SIGSTOP, as a frozen one). */
int coll_test_hang(const char *layer, int rank, unsigned long long seq);

/* Whether the MPI library takes CUDA device buffers (Open MPI's MPIX_Query_cuda_support): 1, 0,
 * or -1 when a CUDA-built Open MPI cannot say yet (before MPI_Init). */
int coll_mpi_cuda_aware(void);

/* 1 when this build has the NCCL backend (collectives/coll_nccl.c), 0 when coll_nccl_create can only
 * refuse. Lets a caller choose the backend without #ifdef DTRAIN_HAVE_NCCL. */
int coll_nccl_built(void);

/* "NCCL 2.28.9" or "-" when built without NCCL. */
void coll_nccl_version(char *out, size_t n);

#endif
