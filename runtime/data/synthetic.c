/*
 * synthetic.c - the built-in synthetic dataset as a reader format (reader.h), so it goes through
 * the same sampler, loader and transforms as files do (see dt_synthetic_create in dtrain.h).
 *
 * Sample i comes from the counter-based generator at (seed, i), so it costs no storage and any
 * rank makes any sample: for flat inputs, values uniform in [-1, 1); for images, per channel a
 * coarse grid of such values (one per 4x4 pixels) interpolated bilinearly, smooth like natural
 * images so that convolution and pooling keep what matters. Label: the argmax of a fixed random
 * teacher, a two-layer ReLU network (input -> 32 -> classes) drawn from the seed. The teacher is
 * nonlinear, so a linear model cannot fit it exactly, yet an MLP or a CNN learns it quickly.
 * The generator itself is the op tables' synth_batch (kernels/synth.h): read here through the
 * CPU's, and made on a GPU by the loader (loader.c) from the teacher synthetic_spec gives.
 */
#include "runtime/data/synthetic.h"
#include "kernels/backend.h"
#include "kernels/synth.h"
#include "base/rng.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The split's state: the generator's spec, its teacher in host memory, and the CPU table that
 * makes the samples (had at open, on the opening thread, not first by a loader thread). */
typedef struct synth {
    synth_spec sp;
    float *w1, *w2; /* owned; sp.w1, sp.w2 point here */
    backend *cpu;
} synth;

static dt_status synth_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const synth *d = s->impl;
    const uint32_t idx = (uint32_t)i;
    return d->cpu->ops->synth_batch(d->cpu, &d->sp, &idx, 1, x, label);
}

static void synth_close(ds_split *s)
{
    synth *d = s->impl;
    if (!d) return;
    free(d->w1);
    free(d->w2);
    free(d);
    s->impl = NULL;
}

static const ds_ops synth_ops = {synth_read, synth_close};

int synthetic_spec(const ds_split *s, synth_spec *out)
{
    if (!s || s->ops != &synth_ops) return 0;
    *out = ((const synth *)s->impl)->sp;
    return 1;
}

dt_status synthetic_open(int c, int h, int w, int classes, size_t size, uint64_t seed, ds_split **out)
{
    *out = NULL;
    if (c < 1 || h < 1 || w < 1 || classes < 2 || classes > DS_MAX_CLASSES)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "synthetic data needs a shape of at least 1x1x1 and 2 to %d classes "
                                "(got %dx%dx%d and %d)",
                                DS_MAX_CLASSES, c, h, w, classes);
    const size_t input_size = (size_t)c * h * w;
    if (input_size > DS_MAX_SAMPLE_VALUES)
        return status_set_error(DT_ERR_INVALID_ARG, "synthetic samples of %dx%dx%d = %zu values: at most %u", c, h, w,
                                input_size, DS_MAX_SAMPLE_VALUES);
    if (size < 1 || size > UINT32_MAX)
        return status_set_error(DT_ERR_INVALID_ARG, "dataset size %zu must be from 1 to %u samples", size, UINT32_MAX);
    ds_split *s = calloc(1, sizeof *s);
    synth *d = calloc(1, sizeof *d);
    if (!s || !d) {
        free(s), free(d);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the dataset");
    }
    s->ops = &synth_ops;
    s->impl = d;
    s->count = size;
    s->c = c, s->h = h, s->w = w;
    s->classes = classes;
    snprintf(s->format, sizeof s->format, "synthetic");
    snprintf(s->split, sizeof s->split, "train");
    snprintf(s->source, sizeof s->source, "synthetic teacher data (seed %llu)", (unsigned long long)seed);
    d->cpu = backend_cpu();
    d->w1 = malloc(SYNTH_TEACHER_HIDDEN * input_size * sizeof(float));
    d->w2 = malloc((size_t)classes * SYNTH_TEACHER_HIDDEN * sizeof(float));
    d->sp = (synth_spec){.c = c,
                         .h = h,
                         .w = w,
                         .classes = classes,
                         .gh = (h + SYNTH_IMAGE_CELL - 1) / SYNTH_IMAGE_CELL + 1,
                         .gw = (w + SYNTH_IMAGE_CELL - 1) / SYNTH_IMAGE_CELL + 1,
                         .seed = seed,
                         .w1 = d->w1,
                         .w2 = d->w2};
    if (!d->w1 || !d->w2) {
        ds_close(s);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the synthetic teacher of %zu inputs", input_size);
    }
    /* Scaled so each teacher unit has unit variance whatever the input size. */
    float s1 = sqrtf(3.0f / (float)input_size), s2 = sqrtf(3.0f / SYNTH_TEACHER_HIDDEN);
    for (size_t j = 0; j < SYNTH_TEACHER_HIDDEN * input_size; j++)
        d->w1[j] = s1 * rng_uniform_pm1(rng_at(seed, SYNTH_STREAM_TEACHER, j));
    for (size_t j = 0; j < (size_t)classes * SYNTH_TEACHER_HIDDEN; j++)
        d->w2[j] = s2 * rng_uniform_pm1(rng_at(seed, SYNTH_STREAM_TEACHER + 1, j));
    *out = s;
    return DT_OK;
}
