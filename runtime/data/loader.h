/*
 * loader.h - the loader's eval mode (loader.c), for dt_evaluate: the batches of one pass over
 * rank's shard of a dataset (samples rank, rank + world, ...; the last batch may be short),
 * read ahead by the same threads as training batches, without augmentation.
 *
 * Test hook: with DTRAIN_TEST_SAMPLE_LOG=PATH in the environment, each training loader appends
 * "step i1 i2 ..." (the dataset's sample indices of each batch it hands out) to PATH.<rank>, so
 * tests can check the sampler's promises through a real `dtrain train` run and its resumption.
 */
#ifndef DT_RUNTIME_DATA_LOADER_H
#define DT_RUNTIME_DATA_LOADER_H

#include "dtrain.h"

/* *batches: the batches of the pass (0 for a shard without samples). */
dt_status loader_create_eval(const dt_ctx *ctx, dt_dataset *d, int rank, int world, int batch, int threads, int depth,
                             long *batches, dt_loader **out);
/* dt_loader_next with the batch's sample count. */
dt_status loader_next_n(dt_loader *l, long *item, const float **x, const int32_t **labels, int *n);

#endif
