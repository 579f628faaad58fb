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
 */
#include "runtime/data/synthetic.h"
#include "base/rng.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEACHER_HIDDEN 32
#define IMAGE_CELL 4
#define STREAM_TEACHER 0x7465616368ull
#define STREAM_SAMPLE 0x73616d70ull
/* Grid scratch on the stack up to this many floats (a 256x256 image's grid is 66x66). */
#define GRID_STACK 8192

typedef struct synth {
    int gh, gw; /* the coarse grid of images */
    size_t input_size;
    uint64_t seed;
    float *w1; /* (TEACHER_HIDDEN, input_size) */
    float *w2; /* (classes, TEACHER_HIDDEN) */
} synth;

/* synth_read has an AVX2 clone where the CPU has it, and the helpers below inline into it, so
 * their loops (the hash per value, the teacher's 16 lanes, the interpolation) run 8 floats wide
 * instead of 4: the same operations in the same order (AVX2 alone brings no FMA to contract
 * into), so the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SYNTH_CLONES __attribute__((target_clones("avx2", "default")))
#define SYNTH_INLINE __attribute__((always_inline)) inline
#else
#define SYNTH_CLONES
#define SYNTH_INLINE inline
#endif

/* n values uniform in [-1, 1) of stream (seed, stream) from position j0: the per-stream key is
 * hashed once, each value is one more mix (a loop the compiler vectorizes). */
SYNTH_INLINE static void synth_uniform(uint64_t seed, uint64_t stream, uint64_t j0, float *out, size_t n)
{
    const uint64_t key = rng_mix(seed ^ rng_mix(stream));
    for (size_t j = 0; j < n; j++) out[j] = rng_uniform_pm1(rng_mix(key + j0 + j));
}

/* Dot product in a fixed order with 16 independent lanes: vectorizes without reassociating, and
 * gives the same bits whatever batch the sample is in, so labels never depend on sharding. */
SYNTH_INLINE static float synth_dot(const float *a, const float *b, size_t n)
{
    float lane[16] = {0};
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int k = 0; k < 16; k++) lane[k] += a[j + k] * b[j + k];
    float sum = 0;
    for (; j < n; j++) sum += a[j] * b[j];
    for (int k = 0; k < 16; k++) sum += lane[k];
    return sum;
}

/* A smooth image: per channel a (gh, gw) grid of random values, bilinearly interpolated. */
SYNTH_INLINE static void synth_image(const ds_split *s, const synth *d, uint64_t index, float *x, float *grid)
{
    const size_t cells = (size_t)d->gh * d->gw;
    for (int c = 0; c < s->c; c++) {
        synth_uniform(d->seed, STREAM_SAMPLE + index, (uint64_t)c * cells, grid, cells);
        float *plane = x + (size_t)c * s->h * s->w;
        for (int y = 0; y < s->h; y++) {
            float fy = (float)y / IMAGE_CELL;
            int y0 = (int)fy;
            float ty = fy - (float)y0;
            for (int xx = 0; xx < s->w; xx++) {
                float fx = (float)xx / IMAGE_CELL;
                int x0 = (int)fx;
                float tx = fx - (float)x0;
                const float *g0 = grid + y0 * d->gw + x0, *g1 = g0 + d->gw;
                plane[y * s->w + xx] =
                    (1 - ty) * ((1 - tx) * g0[0] + tx * g0[1]) + ty * ((1 - tx) * g1[0] + tx * g1[1]);
            }
        }
    }
}

SYNTH_CLONES static dt_status synth_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const synth *d = s->impl;
    if (i >= s->count)
        return status_set_error(DT_ERR_INVALID_ARG, "synthetic sample %zu is past the %zu samples", i, s->count);
    if (s->h > 1 || s->w > 1) {
        const size_t cells = (size_t)d->gh * d->gw;
        float stack[GRID_STACK], *grid = cells <= GRID_STACK ? stack : malloc(cells * sizeof *grid);
        if (!grid) return status_set_error(DT_ERR_NOMEM, "out of memory making a synthetic image");
        synth_image(s, d, i, x, grid);
        if (grid != stack) free(grid);
    } else {
        synth_uniform(d->seed, STREAM_SAMPLE + i, 0, x, d->input_size);
    }
    float h[TEACHER_HIDDEN];
    for (int u = 0; u < TEACHER_HIDDEN; u++) {
        float a = synth_dot(d->w1 + (size_t)u * d->input_size, x, d->input_size);
        h[u] = a > 0 ? a : 0;
    }
    int best = 0;
    float best_v = -INFINITY;
    for (int c = 0; c < s->classes; c++) {
        float a = synth_dot(d->w2 + (size_t)c * TEACHER_HIDDEN, h, TEACHER_HIDDEN);
        if (a > best_v) {
            best_v = a;
            best = c;
        }
    }
    *label = best;
    return DT_OK;
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
    d->input_size = input_size;
    d->gh = (h + IMAGE_CELL - 1) / IMAGE_CELL + 1;
    d->gw = (w + IMAGE_CELL - 1) / IMAGE_CELL + 1;
    d->seed = seed;
    d->w1 = malloc(TEACHER_HIDDEN * input_size * sizeof(float));
    d->w2 = malloc((size_t)classes * TEACHER_HIDDEN * sizeof(float));
    if (!d->w1 || !d->w2) {
        ds_close(s);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the synthetic teacher of %zu inputs", input_size);
    }
    /* Scaled so each teacher unit has unit variance whatever the input size. */
    float s1 = sqrtf(3.0f / (float)input_size), s2 = sqrtf(3.0f / TEACHER_HIDDEN);
    for (size_t j = 0; j < TEACHER_HIDDEN * input_size; j++)
        d->w1[j] = s1 * rng_uniform_pm1(rng_at(seed, STREAM_TEACHER, j));
    for (size_t j = 0; j < (size_t)classes * TEACHER_HIDDEN; j++)
        d->w2[j] = s2 * rng_uniform_pm1(rng_at(seed, STREAM_TEACHER + 1, j));
    *out = s;
    return DT_OK;
}
