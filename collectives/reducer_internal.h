/*
 * reducer_internal.h - what dt_model (runtime/model) needs of a dt_reducer beyond the public API.
 */
#ifndef DT_COLLECTIVES_REDUCER_INTERNAL_H
#define DT_COLLECTIVES_REDUCER_INTERNAL_H

#include "dtrain.h"

/* Points the reducer at another buffer of the same element count (a model that changed its
 * gradient precision): dtype and wire as in dt_reducer_config. Between steps only. Not collective:
 * every rank must make the same change, as dt_model_set_precision requires. */
dt_status reducer_set_buffer(dt_reducer *r, void *buf, dt_dtype dtype, dt_dtype wire);
/* (The bucket plan stays the one made at creation, in elements.) */

/* 1 when a reducer made from c over buf (with the same ranges) would be r: the same buffer, types,
 * memory, stream and caps, the plan made for this element type. */
int reducer_same_plan(const dt_reducer *r, const void *buf, const dt_reducer_config *c);
/* Another reduction (DT_SUM / DT_AVG) and overlap for the same plan and buffer, between steps,
 * compared across the ranks as at creation (so collective when anything is communicated): what
 * dt_model_set_sync changes without making a new reducer, and with it a new engine. A rank whose
 * own part fails (mid-step, op or overlap out of range) still joins the ranks' verdict first:
 * every rank then fails with its code (the others with "changing the reducer's reduction failed
 * on rank R"), and nothing changes on any rank. DT_ERR_INVALID_ARG, DT_ERR_MPI. */
dt_status reducer_retune(dt_reducer *r, dt_redop op, int overlap);

/* The settings a reducer and a model's dt_sync_config share, checked alike whether or not a
 * reducer is made from them (a model without a context keeps them unused): the caps
 * (bucket_caps_check), op DT_SUM or DT_AVG, overlap 0 or 1. DT_ERR_INVALID_ARG naming fn. */
dt_status reducer_check_settings(const char *fn, double bucket_mb, double first_bucket_mb, dt_redop op, int overlap);

/* Ends an open step without completing it (a loop that skipped the reduction on purpose, or a
 * world of one): waits for the allreduces already started, starts nothing, forgets which ranges
 * were ready. DT_OK when no step is open. */
dt_status reducer_discard_step(dt_reducer *r);

/* Waits for the allreduces already started and puts their sums in the buffer (a 16-bit wire's
 * widened), keeping the step open (a later wait() starts the rest and completes it): for an
 * optimizer step that reads the buffer before wait(), which would otherwise race with the
 * allreduces writing it in place. DT_OK when none is in flight. */
dt_status reducer_wait_started(dt_reducer *r);

/* 1 while a step is open: some range ready, wait() not called yet. */
int reducer_step_open(const dt_reducer *r);

/* 1 when the reducer communicates (more than one rank, or the single-GPU test hook). */
int reducer_communicates(const dt_reducer *r);

/* 1 when reducer_wait_bucket can wait for one bucket while later ones go on: buckets allreduced
 * (not sharded) across ranks by the engine (host memory; the host waits) or by a device backend
 * that can wait for one collective (NCCL: the caller's stream waits, not the host), started as
 * backward readies them (overlap on: with it off, a bucket started at its own wait would queue
 * behind the steps of the buckets before it, and nothing would overlap). */
int reducer_waits_by_bucket(const dt_reducer *r);
/* Waits until bucket b (index order) of this step is reduced, starting it and the buckets before
 * it first if they have not started (every rank starts the same ones in the same order); the
 * buckets after it go on. Its elements then hold the reduced values, as after dt_reducer_wait,
 * which still ends the step (device memory: for the work queued on the caller's stream from now
 * on; the host does not wait). DT_ERR_INVALID_ARG where reducer_waits_by_bucket is 0 or b is out of
 * range; a failed collective's error otherwise. */
dt_status reducer_wait_bucket(dt_reducer *r, int b);

/* ZeRO-1 (reducer_zero.c). on 1: each bucket is reduce-scattered instead of allreduced, so after
 * dt_reducer_wait only this rank's part of each bucket (reducer_owned) is sure to hold the reduced
 * values; the rest of the buffer keeps this rank's own gradients (the engine, NCCL) or the reduced
 * ones (MPI through host memory, which keeps its one whole-buffer allreduce). Through the engine
 * the owned values are bitwise those of the allreduce; through NCCL they are NCCL's reduction.
 * DT_ERR_UNSUPPORTED for a device backend without asynchronous halves. Between steps; every rank
 * must make the same call. */
dt_status reducer_set_shard(dt_reducer *r, int on);
int reducer_sharded(const dt_reducer *r);
/* The slice [*off, *off + *cnt) of bucket b that this rank owns under ZeRO-1: its part of the
 * carrier's split (engine_part for the engine, coll_part for device memory); the whole bucket when
 * nothing is communicated. Offsets are elements of the whole buffer. */
void reducer_owned(const dt_reducer *r, int b, size_t *off, size_t *cnt);
/* Every rank's owned part of every bucket of an fp32 buffer in the reducer's memory (host or
 * device) laid out like the reducer's (the parameters) sent to every rank, in place. Collective; a
 * no-op when nothing is communicated. Host memory: returns when done; NCCL: returns when done too
 * (polled under the watchdog's deadline), the caller's stream (dt_reducer_config.stream) ordered
 * after it; MPI through host memory: the device is synchronized first, and it returns when done. */
dt_status reducer_allgather(dt_reducer *r, float *buf);
/* The same for an fp32 host buffer whatever the reducer's memory (an optimizer state spread to
 * full size for a checkpoint); returns when done. */
dt_status reducer_allgather_host(dt_reducer *r, float *buf);
#endif
