/*
 * data_internal.h - the synthetic dataset in pieces, for the background loader (loader.c): the
 * sample indices of a batch are fixed first, in step order (that may make a new epoch's
 * permutation: not thread-safe), then any thread makes any range of those samples (thread-safe,
 * each thread with its own grid scratch).
 */
#ifndef DT_RUNTIME_DATA_INTERNAL_H
#define DT_RUNTIME_DATA_INTERNAL_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

/* Floats of grid scratch data_make needs per thread, and the floats of one sample. */
size_t data_grid_floats(const dt_dataset *d);
size_t data_input_size(const dt_dataset *d);
/* The batch-sized sample indices of `rank` at `step` into idx (batch entries); the argument
 * checks and errors of dt_dataset_batch. */
dt_status data_batch_indices(dt_dataset *d, long step, int rank, int world, int batch, uint32_t *idx);
/* Samples idx[0..n) into x (n x input size) and labels; grid: data_grid_floats scratch. */
void data_make(const dt_dataset *d, const uint32_t *idx, int n, float *x, int32_t *labels, float *grid);

#endif
