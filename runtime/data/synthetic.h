/*
 * synthetic.h - the built-in synthetic dataset as a reader format (synthetic.c).
 */
#ifndef DT_RUNTIME_DATA_SYNTHETIC_H
#define DT_RUNTIME_DATA_SYNTHETIC_H

#include "runtime/data/reader.h"
#include "kernels/synth.h"

/* size samples of shape c x h x w with `classes` labels from a teacher drawn from seed; the
 * caller owns *out (ds_close). DT_ERR_INVALID_ARG, DT_ERR_NOMEM. */
dt_status synthetic_open(int c, int h, int w, int classes, size_t size, uint64_t seed, ds_split **out);

/* 1 when s is a synthetic split: *out = its generator (the teacher in host memory, owned by s,
 * no normalization); 0 for any other format. */
int synthetic_spec(const ds_split *s, synth_spec *out);

#endif
