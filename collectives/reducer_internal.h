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

/* Ends an open step without completing it (a loop that skipped the reduction on purpose, or a
 * world of one): waits for the allreduces already started, starts nothing, forgets which ranges
 * were ready. DT_OK when no step is open. */
dt_status reducer_discard_step(dt_reducer *r);

/* 1 while a step is open: some range ready, wait() not called yet. */
int reducer_step_open(const dt_reducer *r);

/* 1 when the reducer communicates (more than one rank, or the single-GPU test hook). */
int reducer_communicates(const dt_reducer *r);

/* ZeRO-1. on 1: each bucket is reduce-scattered instead of allreduced, so after dt_reducer_wait only
 * this rank's part of each bucket (reducer_owned) holds the reduced values, bitwise those the
 * allreduce gives there; the rest of the buffer keeps this rank's own gradients. Host memory
 * through the engine only (DT_ERR_UNSUPPORTED otherwise, naming why). Between steps; every rank
 * must make the same call. */
dt_status reducer_set_shard(dt_reducer *r, int on);
int reducer_sharded(const dt_reducer *r);
/* The slice [*off, *off + *cnt) of bucket b that this rank owns under ZeRO-1 (its part of the
 * engine's split: engine_part); the whole bucket in a world of one (or when nothing is
 * communicated). Offsets are elements of the whole buffer. */
void reducer_owned(const dt_reducer *r, int b, size_t *off, size_t *cnt);
/* Every rank's owned part of every bucket of an fp32 host buffer laid out like the reducer's (the
 * parameters, or an optimizer state spread to full size) sent to every rank, in place; returns when
 * done. Collective; a no-op when nothing is communicated. */
dt_status reducer_allgather(dt_reducer *r, float *buf);
/* Each rank's v to every rank, through the engine (so the watchdog covers it): all[k] is rank k's,
 * *nranks the world (1, with all[0] = v, when nothing is communicated). all holds the world's size. */
dt_status reducer_share(dt_reducer *r, double v, double *all, int *nranks);
#endif
