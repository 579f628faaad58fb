/**
 * @file
 * @brief Part of the public API: the gradient reducer over the caller's own buffers, and the
 * buffer utilities that go with it (finite check and unscale, scaling, norms, checksums).
 * Include `<dtrain.h>`, which includes every part in order after the types they share; this file
 * is not meant to be included on its own.
 */
#ifndef DTRAIN_REDUCER_H
#define DTRAIN_REDUCER_H

#if !defined(DTRAIN_H) && !defined(DTRAIN_DOXYGEN) /* DTRAIN_DOXYGEN: docs/Doxyfile.in */
#error "include <dtrain.h>, which includes dtrain/reducer.h"
#else /* the rest only under <dtrain.h>: one error, not a cascade after it */

/** @defgroup reducer Gradient reducer
 * @ingroup collectives
 * Bucketed, overlapped gradient allreduce over the caller's own flat buffer (docs/library.md, "The
 * gradient reducer": overlap, results, the rules of a step, threading).
 * @{ */

/** Where a buffer lives. */
typedef enum dt_memory {
    DT_MEMORY_HOST = 0,  /**< host memory (malloc, or cudaHostAlloc'd pinned memory) */
    DT_MEMORY_DEVICE = 1 /**< CUDA device memory of the context's GPU (cudaMalloc) */
} dt_memory;

/** A slice of a flat buffer, in elements: [offset, offset + count). */
typedef struct dt_range {
    size_t offset; /**< first element */
    size_t count;  /**< number of elements (> 0) */
} dt_range;

/** How a reducer groups and reduces. Fill with dt_reducer_defaults(), then edit. */
typedef struct dt_reducer_config {
    dt_memory memory; /**< where the gradient buffer lives (default DT_MEMORY_HOST); checked against the
                                 pointer under CUDA (a device pointer given as host memory is an error) */
    dt_dtype dtype;   /**< the buffer's element type: DT_F32 (default), DT_F16 or DT_BF16 */
    dt_dtype wire;    /**< what travels between ranks: DT_F32 (default), or DT_F16 / DT_BF16. A 16-bit
                                 buffer travels in its own type (wire must equal dtype). An fp32 host buffer may
                                 travel in 16 bits: each rank's values are rounded, summed in fp32 in rank order
                                 and the sum rounded once, so every rank gets the same values (half the bytes;
                                 fp16 overflows past 65504; in a world of one nothing travels and nothing is
                                 rounded). An fp32 device buffer on a 16-bit wire is rounded into a 16-bit copy
                                 (2 bytes an element of device memory) on the caller's stream and NCCL sums in
                                 the 16-bit type, so the sums carry more rounding than on the host. */
    dt_redop op;      /**< DT_AVG (default): the mean over ranks; DT_SUM: the sum. On NCCL with a 16-bit
                                 wire, DT_AVG is NCCL's average, which multiplies each rank's values by 1/W
                                 rounded to the 16-bit type before summing: where W is not a power of two the
                                 mean carries that rounding as a factor (bf16: 1.002 at 3, 6, 12 or 24 ranks,
                                 1.001 at 5, 0.998 at 7; fp16: within 3e-4 of 1). The host engine and fp32
                                 wires divide the fp32 sum. */
    double
        bucket_mb; /**< cap of a bucket in MiB (default 25; rounded up to whole bytes); 0: no cap, so with first_bucket_mb 0 too
                                 everything is one bucket (with the default first cap, the first bucket
                                 still closes at 1 MiB and the rest is a second one) */
    double first_bucket_mb; /**< cap of the first bucket, the first ranges backward produces (default 1): small,
                                 so that communication starts early; 0: capped as the others (bucket_mb) */
    int overlap;            /**< 1 (default): a bucket's allreduce starts when its last range is ready; 0: every
                                 bucket starts in dt_reducer_wait() (no overlap; for comparison) */
    void *stream;           /**< DT_MEMORY_DEVICE: the cudaStream_t (as void *) the caller's backward runs on;
                                 ready() records an event on it and the allreduce follows that event (ready()
                                 does not block the host), and wait() makes this stream wait for the
                                 allreduces, after the host has waited for them under the deadline. NULL: the
                                 default stream. Ignored for host memory. */
} dt_reducer_config;

/** Host memory, fp32 buffer and wire, DT_AVG, buckets of 25 MiB with a first bucket of 1 MiB,
 *  overlap on, default stream. NULL c: nothing. */
DT_API void dt_reducer_defaults(dt_reducer_config *c);

/** A reducer: opaque. */
typedef struct dt_reducer dt_reducer;

/**
 * Creates a reducer over the caller's gradient buffer.
 *
 * @param ctx     the context (its world is the group that reduces); must outlive the reducer.
 * @param grads   the flat gradient buffer, `count` elements of c->dtype in c->memory. Owned by the
 *                caller, who keeps it allocated until dt_reducer_free(). The reducer reads and
 *                overwrites it in place between ready() and wait().
 * @param count   elements in grads (> 0).
 * @param ranges  the parameter ranges in the order backward produces them (typically the last layer
 *                first), or NULL for automatic buckets. Given ranges must tile [0, count) exactly: no
 *                overlap, no gap, none past the buffer. Buckets then take consecutive ranges of this
 *                list that are adjacent in memory, while they stay within the caps (a range above
 *                the cap gets a bucket of its own). With NULL, buckets are slices of the buffer cut
 *                by the caps from its end backward (the first bucket holds the last elements), and
 *                dt_reducer_ready() takes any slice of the buffer. Copied: the caller may free it.
 * @param nranges entries in ranges (0 with NULL).
 * @param c       the configuration; NULL means dt_reducer_defaults().
 * @param out     receives the reducer; NULL on failure.
 *
 * Collective over the world: every rank must create its reducers in the same order with the same
 * count, ranges, dtype, wire, op, caps, overlap and memory kind. The plan is checked across ranks, by MPI collectives
 * under the context's deadline (a rank that never arrives: the job is aborted once
 * dt_config::timeout_s has passed): a rank with another plan fails on every rank with
 * DT_ERR_INVALID_ARG naming the first differing rank, the first setting that differs (in the
 * order buffer size, ranges, dtype, wire, op, bucket_mb, first_bucket_mb, overlap, memory kind,
 * then the buckets they made) and both that rank's and rank 0's value, instead of hanging later.
 * A rank whose own part fails (any error below: an argument, memory) still joins the other
 * ranks before that check, so that none waits for it: every rank fails with that rank's code, that
 * rank with its own message, the others with "dt_reducer_create failed on rank R (...), so no
 * reducer was made" naming the first failing rank. Only a rank given a NULL ctx cannot reach its
 * peers: it fails alone, and they wait for it until the deadline. The reducer's own communicator
 * (a duplicate of the world's, for its engine) is made under the deadline too.
 *
 * @return DT_OK; DT_ERR_INVALID_ARG for a NULL ctx/grads/out, count 0 or past PTRDIFF_MAX bytes (a
 *         negative count converted to size_t), a bad dtype/wire/op/cap,
 *         an overlap other than 0 or 1, a plan of more buckets than the reducer holds (raise
 *         bucket_mb),
 *         ranges that overlap, leave a gap or run past the buffer (naming the two ranges or the
 *         gap), a device pointer given as host memory or the reverse, device memory in a build or
 *         placement without CUDA; DT_ERR_NOMEM (also for the 16-bit wire copy on the device); DT_ERR_MPI;
 *         also the code of another rank whose own part failed (above).
 */
DT_API dt_status dt_reducer_create(dt_ctx *ctx, void *grads, size_t count, const dt_range *ranges, int nranges,
                                   const dt_reducer_config *c, dt_reducer **out);

/** Waits for the allreduces still in flight (their errors are dropped: free after a failed wait
 *  if you must) and frees the reducer and its communicator. Not the caller's buffer. Collective.
 *  NULL is a no-op. After the program's own MPI_Finalize (free before it) it frees the memory
 *  only and makes no MPI call, which would end the job; a step must not be in flight then. */
DT_API void dt_reducer_free(dt_reducer *r);

/**
 * Marks grads[offset, offset + count) as final for this step. With ranges given at creation it
 * must be exactly one of them; with automatic buckets any slice of the buffer not marked yet in
 * this step. When the last range of a bucket is ready (and sync and overlap are on) its allreduce
 * starts: on the host at once (the communication thread drives it); on the device behind an event
 * recorded now on the configured stream, so the caller may call ready() right after queueing the
 * kernels that produce the range, without synchronizing.
 *
 * Not collective by itself, but every rank must mark the same ranges in the same step.
 *
 * @return DT_OK; DT_ERR_INVALID_ARG when the slice runs past the buffer, is not one of the given
 *         ranges (naming the nearest one), or overlaps a range already ready in this step
 *         ("ready twice", naming it): nothing is started then; an error of starting the allreduce
 *         (DT_ERR_MPI; on device memory DT_ERR_COMM or DT_ERR_DEVICE).
 */
DT_API dt_status dt_reducer_ready(dt_reducer *r, size_t offset, size_t count);

/**
 * Completes the step: starts what is not started yet (every bucket, with overlap off) and waits for
 * every allreduce of this step, under the context's deadline (the watchdog names the rank that did
 * not take part and aborts the job rather than hang). Afterwards the buffer holds the sum or mean
 * over ranks. Device memory: the host waits for the NCCL allreduces under the deadline (the
 * watchdog polls them), and the configured stream is made to wait for them too, so the optimizer's
 * kernels queued next on that stream read the reduced gradients. With sync off (dt_reducer_set_sync) only
 * the bookkeeping runs: the buffer keeps this rank's values.
 *
 * Collective: every rank calls it once per backward, sync or not. Without a communication thread
 * (dt_config::comm_thread 0, or an MPI without MPI_THREAD_MULTIPLE) a wait moves only this
 * reducer's allreduces: every rank must wait for its reducers in the same order.
 *
 * @return DT_OK; DT_ERR_INVALID_ARG naming the first range (and how many) never marked ready in
 *         this step: the other buckets are still reduced, so every rank stays in step and none
 *         hangs, but this step's gradients are not usable. That verdict is per rank: a rank that
 *         marked every range gets DT_OK with sums that include the forgetful rank's unready values,
 *         so the rank that gets the error must end the job (dt_abort_job) or discard the step on
 *         every rank by its own agreement; DT_ERR_TIMEOUT, DT_ERR_MPI, DT_ERR_COMM
 *         (NCCL) or DT_ERR_DEVICE from the communication.
 */
DT_API dt_status dt_reducer_wait(dt_reducer *r);

/**
 * Gradient accumulation: with sync 0, ready() and wait() only check the step's bookkeeping and
 * nothing is sent, so the caller's buffer keeps summing its micro-batches locally (PyTorch DDP's
 * no_sync()); with sync 1 (the default) the next step reduces again. Change it between steps only
 * (after wait()).
 *
 * Collective when the reducer communicates (more than one rank): every rank must pass the same
 * sync. Before any rank changes it the ranks compare it (one allreduce of one float per rank): a
 * rank that gave another value fails every rank with DT_ERR_INVALID_ARG naming that rank, its
 * value and rank 0's; a rank whose own call fails (below) fails every rank with its code, the
 * others naming it. No rank then changes its setting, and a call given alike afterwards works.
 *
 * @return DT_OK; DT_ERR_INVALID_ARG for a NULL r (that rank alone: it cannot reach its peers),
 *         a sync other than 0 or 1, the middle of a step (some range ready, wait() not called),
 *         or ranks that disagree (above); DT_ERR_MPI, DT_ERR_TIMEOUT from the comparison.
 */
DT_API dt_status dt_reducer_set_sync(dt_reducer *r, int sync);

/** The number of buckets in the plan (0 for a NULL r). */
DT_API int dt_reducer_num_buckets(const dt_reducer *r);
/** Bucket i's slice of the buffer into *out (i = 0 is the first to fill in backward).
 *  DT_ERR_INVALID_ARG for a NULL r or out, or i out of range. */
DT_API dt_status dt_reducer_bucket(const dt_reducer *r, int i, dt_range *out);

/** What a reducer did so far: for benchmarks and logs. */
typedef struct dt_reducer_stats {
    long steps;        /**< dt_reducer_wait() calls that completed */
    long starts;       /**< bucket allreduces started (with sync on) */
    long overlapped;   /**< ...of those, started by ready() before wait() was called */
    double wait_s;     /**< seconds spent inside dt_reducer_wait(): the communication left exposed */
    double bytes_sent; /**< bytes this rank's buckets put on the wire, counted as the bucket's size in the
                            wire type (the engine sends 2 (W-1)/W of it per rank) */
} dt_reducer_stats;
/** Copies the counters into *out (zeros for a NULL r; nothing for a NULL out). */
DT_API void dt_reducer_get_stats(const dt_reducer *r, dt_reducer_stats *out);

/** After dt_reducer_wait(): dt_buffer_unscale_check() of the reducer's buffer (its dtype, memory
 *  and, on the device, after its stream). */
DT_API dt_status dt_reducer_unscale_check(dt_reducer *r, float inv_scale, int *found_inf);
/** After dt_reducer_wait(): the L2 norm of the reduced gradients (dt_buffer_norm, local: every rank
 *  holds the same reduced values, so every rank gets the same bits). */
DT_API dt_status dt_reducer_grad_norm(dt_reducer *r, double *norm);
/** PyTorch's clip_grad_norm_(max_norm) on the reduced gradients: *norm (may be NULL) receives the
 *  norm before clipping; when it is finite and coef = max_norm / (norm + 1e-6) is below 1 every
 *  gradient is multiplied by coef. A non-finite norm clips nothing (skip the step). max_norm > 0.
 *  DT_ERR_INVALID_ARG for max_norm <= 0 or NaN. */
DT_API dt_status dt_reducer_clip_grad_norm(dt_reducer *r, double max_norm, double *norm);

/** @} */

/** @defgroup buffers Buffer utilities
 * @ingroup collectives
 * For loops that keep their own buffers (with or without a reducer). Host memory is processed on
 * the calling thread; device memory on dtrain's CUDA stream after a device synchronization (so
 * whatever the caller queued on any stream is finished first), and the call returns when the
 * result is ready. A buffer's memory kind is checked against the pointer before any device work
 * (also in a build without CUDA, or with no GPU): a host pointer given as DT_MEMORY_DEVICE, or a
 * device pointer given as DT_MEMORY_HOST, is DT_ERR_INVALID_ARG naming the pointer's kind.
 * @{ */

/**
 * The loss scaler's check (dt_scaler): multiplies buf[0..count) by inv_scale in place (skipped when
 * inv_scale is 1) and sets *found_inf to 1 when any result is inf or NaN, else 0, in one pass.
 * 16-bit buffers are checked only, and inv_scale must then be 1: dividing fp16 values in place
 * flushes the small ones to zero, which is what scaling prevents; keep fp32 master gradients, or
 * multiply by inv_scale where you widen them. Not collective: after a reduction every rank sees
 * the same values and gets the same answer.
 * @return DT_OK; DT_ERR_INVALID_ARG for a NULL buf with count > 0, a count past PTRDIFF_MAX bytes,
 *         a bad dtype or memory, an inv_scale that is not positive and finite, inv_scale != 1 on a 16-bit buffer;
 *         DT_ERR_DEVICE.
 */
DT_API dt_status dt_buffer_unscale_check(void *buf, size_t count, dt_dtype t, dt_memory mem, float inv_scale,
                                         int *found_inf);
/** buf[i] *= mul in place (16-bit values are widened, multiplied in fp32 and rounded once).
 *  DT_ERR_INVALID_ARG for a NULL buf with count > 0, a count past PTRDIFF_MAX bytes, a bad dtype
 *  or memory, a mul that is not finite; DT_ERR_DEVICE. */
DT_API dt_status dt_buffer_scale(void *buf, size_t count, dt_dtype t, dt_memory mem, float mul);
/**
 * The L2 norm of buf[0..count), summed in double in a fixed order (the same values give the same
 * bits). across_ranks 0: this rank's buffer alone, not collective. across_ranks 1: the norm of the
 * concatenation of every rank's buffer (each rank holds a shard): the sums of squares are added by
 * one MPI_Allreduce, whose result every rank receives alike, under the deadline of every
 * collective (dt_config::timeout_s); collective over ctx's world (ctx may be NULL only with
 * across_ranks 0). A rank whose own part fails (its arguments, its device) still takes part, so
 * no peer waits for it, and every rank fails with that rank's code: that rank with its own message,
 * the others with "dt_buffer_norm failed on rank R (...)" naming the first failing rank; *norm is
 * then left unchanged on every rank. (A rank given across_ranks 1 and a NULL ctx has no way to
 * reach its peers: it fails alone, and they wait for it until the deadline.) inf or NaN when an
 * element is.
 * @return DT_OK; DT_ERR_INVALID_ARG for a NULL norm, a NULL buf with count > 0, a count past
 *         PTRDIFF_MAX bytes, a bad dtype or memory, an across_ranks other than 0 or 1 (a rank given another non-zero value still
 *         joins the sum, as a rank with a bad argument does); DT_ERR_DEVICE; DT_ERR_MPI; across
 *         ranks also the code of another rank whose own part failed (above).
 */
DT_API dt_status dt_buffer_norm(dt_ctx *ctx, const void *buf, size_t count, dt_dtype t, dt_memory mem, int across_ranks,
                                double *norm);
/** A 64-bit checksum of `bytes` bytes of buf (the hash dt_check_replicas compares; not
 *  cryptographic): equal bytes give equal sums on every rank and machine. Device memory is copied
 *  to the host for it after a device synchronization, as for the other buffer utilities.
 *  DT_ERR_INVALID_ARG for a NULL buf with bytes > 0, bytes past PTRDIFF_MAX or a bad memory;
 *  DT_ERR_NOMEM; DT_ERR_DEVICE. */
DT_API dt_status dt_buffer_checksum(const void *buf, size_t bytes, dt_memory mem, uint64_t *sum);

/** @} */

#endif /* DTRAIN_H */
#endif /* DTRAIN_REDUCER_H */
