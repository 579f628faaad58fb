/*
 * sampler.h - which samples each rank trains on at each step: DistributedSampler's semantics at
 * batch granularity, with the data position a pure function of (seed, step) and an anchor.
 *
 * Epoch e visits the n samples in the order perm_e: a Fisher-Yates shuffle drawn from (seed, e),
 * the same on every rank (or file order with shuffle off). A step takes the next G = W x B
 * positions of that order: rank r gets positions offset + r*B .. offset + r*B + B - 1, so batch i
 * of rank r in epoch order is positions (i*W + r)*B.. (with shuffle off: those very samples).
 * The last step of an epoch is padded by wrapping to the epoch's first positions, so every rank
 * has the same number of full batches (ceil(n / G) steps), or with drop_last the positions that
 * do not fill a whole step are left out (floor(n / G) steps); either way the next epoch starts
 * at offset 0 with a new order.
 *
 * The anchor is the position (epoch, offset) at one step, (0, 0) at step 0 unless a checkpoint
 * says otherwise; from it the position of any later step follows for the G of the current run.
 * So a run resumed on another number of ranks (another G) continues mid-epoch exactly where the
 * checkpoint was taken: no sample of the epoch repeated or skipped.
 */
#ifndef DT_RUNTIME_DATA_SAMPLER_H
#define DT_RUNTIME_DATA_SAMPLER_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ds_sampler {
    size_t n; /* samples in the dataset */
    uint64_t seed;
    int shuffle, drop_last;
    long s0, e0; /* the anchor: at step s0 the position is (e0, o0) */
    size_t o0;
    uint32_t *perm; /* the order of epoch perm_epoch (n entries), NULL with shuffle off */
    long perm_epoch;
} ds_sampler;

/* n 1..2^32. DT_ERR_NOMEM, DT_ERR_INVALID_ARG. */
dt_status sampler_init(ds_sampler *s, size_t n, uint64_t seed, int shuffle, int drop_last);
void sampler_free(ds_sampler *s);

/* Steps in a whole epoch for a global batch of g samples (0 when drop_last and n < g). */
size_t sampler_steps_per_epoch(const ds_sampler *s, size_t g);

/* The position (epoch, offset) at the start of `step` for a global batch of g: step >= the
 * anchor's step. An offset that reached the epoch's end is (epoch + 1, 0). DT_ERR_INVALID_ARG for
 * a step before the anchor or a g the dataset cannot fill. */
dt_status sampler_locate(const ds_sampler *s, long step, size_t g, long *epoch, size_t *offset);

/* Sets the anchor: the position at `step` is (epoch, offset); offset < n. */
dt_status sampler_set_anchor(ds_sampler *s, long step, long epoch, size_t offset);

/* The sample at position p (any p >= 0, wrapping past n) of epoch e: makes e's order when it is
 * not the one held, so it is not thread-safe; sampler_batch fixes a whole batch at once. */
uint32_t sampler_at(ds_sampler *s, long epoch, size_t p);

/* Rank `rank` of `world`'s `batch` sample indices at `step` into idx, and the epoch they belong
 * to into *epoch (for augmentation). Not thread-safe (it may make a new epoch's order). */
dt_status sampler_batch(ds_sampler *s, long step, int rank, int world, int batch, uint32_t *idx, long *epoch);

#endif
