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

#endif
