/*
 * reducer_impl.h - the inside of a dt_reducer, shared by reducer.c (creation, freeing),
 * reducer_plan_check.c (the plan compared across ranks) and reducer_step.c (ready, wait, the
 * step's bookkeeping).
 */
#ifndef DT_COLLECTIVES_REDUCER_IMPL_H
#define DT_COLLECTIVES_REDUCER_IMPL_H

#include "collectives/bucket.h"
#include "collectives/coll.h"
#include "collectives/engine.h"
#include "kernels/backend.h"

#include <stddef.h>
#include <stdint.h>

/* A bucket of the step: started, or (device buffer on a 16-bit wire) also waited for alone and its
 * sums widened back already (reducer_wait_bucket). */
enum { BUCKET_STARTED = 1, BUCKET_WIDENED = 2 };

/* One slice marked ready in a step of a plan by size (sorted, disjoint, merged when adjacent). */
typedef struct ready_span {
    size_t lo, hi;
} ready_span;

struct dt_reducer {
    dt_ctx *ctx;
    void *buf;
    size_t count, esz;
    dt_reducer_config cfg;
    dt_dtype plan_dtype; /* the buffer's type when the plan was made (its caps were in those bytes) */
    bucket_plan plan;
    /* Who carries the buckets: the engine (host memory, more than one rank), the context's device
     * backend when it can start them asynchronously (NCCL), or, for device memory without one,
     * dt_allreduce of the whole buffer in wait(). None of them in a world of one. */
    engine *eng;
    coll *dcoll;
    int whole_at_wait;
    /* An fp32 device buffer on a 16-bit wire: its 16-bit copy (count elements, device memory), the
     * bucket rounded into it on the caller's stream before the allreduce and widened back after. */
    uint16_t *wire16;
    backend *dev_be; /* the backend of device memory (wire16 is its memory); NULL for host memory */
    int comm;        /* 1 when anything is communicated at all */
    int sync;        /* dt_reducer_set_sync */
    int shard;       /* reducer_set_shard: buckets are reduce-scattered, not allreduced (ZeRO-1) */
    /* The step: per bucket the elements ready and whether it started; per range whether it is
     * ready (plans by ranges), or the spans ready (plans by size). */
    size_t *covered;
    unsigned char *started, *range_ready; /* started[b]: 0, BUCKET_STARTED or BUCKET_WIDENED */
    uint64_t *seq; /* per bucket started, the number of its request: the engine's (engine_started),
                      or the device backend's start since its last wait_all (wait_one) */
    int dstarts;   /* the device backend's starts in this step */
    ready_span *spans;
    int nspans, spans_cap;
    int nready;     /* ready() calls accepted in this step */
    int next_start; /* buckets start in index order, so every rank starts them alike */
    int in_flight;  /* 1: something was started and not waited for */
    int in_wait;    /* wait() is starting the rest (not counted as overlapped) */
    dt_reducer_stats stats;
};

/* Collective over the reducer's world: every rank's plan and settings (buffer size, ranges,
 * dtype, wire, op, caps, overlap, memory kind, and the buckets they made) against rank 0's. DT_OK
 * when every rank has rank 0's; else DT_ERR_INVALID_ARG on every rank, "<fn>: rank R gave
 * <setting> <R's value> where rank 0 gave <rank 0's>..." for the first setting in that order
 * that differs on the lowest such rank, ending with consequence. The collectives' DT_ERR_MPI,
 * DT_ERR_TIMEOUT. (reducer_plan_check.c) */
dt_status reducer_check_plan_across_ranks(dt_reducer *r, const char *fn, const char *consequence);

#endif
