/*
 * data.c - the built-in synthetic dataset (see dt_synthetic_create in dtrain.h).
 *
 * Sample i comes from the counter-based generator at (seed, i), so it costs no storage and any
 * rank makes any sample: for flat inputs, values uniform in [-1, 1); for images, per channel a
 * coarse grid of such values (one per 4x4 pixels) interpolated bilinearly, smooth like natural
 * images so that convolution and pooling keep what matters. Label: the argmax of a fixed random
 * teacher, a two-layer ReLU network (input -> 32 -> classes) drawn from the seed. The teacher is
 * nonlinear, so a linear model cannot fit it exactly, yet an MLP or a CNN learns it quickly.
 */
#include "dtrain.h"
#include "rng.h"
#include "status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TEACHER_HIDDEN 32
#define IMAGE_CELL 4
#define STREAM_TEACHER 0x7465616368ull
#define STREAM_PERM 0x7065726dull
#define STREAM_SAMPLE 0x73616d70ull

struct dt_dataset {
    int c, h, w, gh, gw; /* shape, and the coarse grid of images */
    size_t input_size, size;
    int classes;
    uint64_t seed;
    float *w1; /* (TEACHER_HIDDEN, input_size) */
    float *w2; /* (classes, TEACHER_HIDDEN) */
    uint32_t *perm;
    float *grid; /* (gh, gw) scratch of one image channel, for dt_dataset_batch */
    long perm_epoch;
};

dt_status dt_synthetic_create(int c, int h, int w, int classes, size_t size, uint64_t seed, dt_dataset **out)
{
    *out = NULL;
    if (c < 1 || h < 1 || w < 1 || classes < 2)
        return dt_set_error(DT_ERR_INVALID_ARG, "synthetic data needs a shape of at least 1x1x1 and at least "
                            "2 classes (got %dx%dx%d and %d)", c, h, w, classes);
    size_t input_size = (size_t)c * h * w;
    if (size < 1 || size > UINT32_MAX)
        return dt_set_error(DT_ERR_INVALID_ARG, "dataset size %zu must be from 1 to %u samples", size, UINT32_MAX);
    dt_dataset *d = calloc(1, sizeof *d);
    if (!d) return dt_set_error(DT_ERR_NOMEM, "out of memory for the dataset");
    d->input_size = input_size;
    d->c = c, d->h = h, d->w = w;
    d->gh = (h + IMAGE_CELL - 1) / IMAGE_CELL + 1;
    d->gw = (w + IMAGE_CELL - 1) / IMAGE_CELL + 1;
    d->classes = classes;
    d->size = size;
    d->seed = seed;
    d->perm_epoch = -1;
    d->w1 = malloc(TEACHER_HIDDEN * input_size * sizeof(float));
    d->w2 = malloc((size_t)classes * TEACHER_HIDDEN * sizeof(float));
    d->perm = malloc(size * sizeof(uint32_t));
    d->grid = malloc((size_t)d->gh * d->gw * sizeof(float));
    if (!d->w1 || !d->w2 || !d->perm || !d->grid) {
        dt_dataset_free(d);
        return dt_set_error(DT_ERR_NOMEM, "out of memory for a dataset of %zu samples", size);
    }
    /* Scaled so each teacher unit has unit variance whatever the input size. */
    float s1 = sqrtf(3.0f / (float)input_size), s2 = sqrtf(3.0f / TEACHER_HIDDEN);
    for (size_t j = 0; j < TEACHER_HIDDEN * input_size; j++)
        d->w1[j] = s1 * rng_uniform_pm1(rng_at(seed, STREAM_TEACHER, j));
    for (size_t j = 0; j < (size_t)classes * TEACHER_HIDDEN; j++)
        d->w2[j] = s2 * rng_uniform_pm1(rng_at(seed, STREAM_TEACHER + 1, j));
    *out = d;
    return DT_OK;
}

void dt_dataset_free(dt_dataset *d)
{
    if (!d) return;
    free(d->w1);
    free(d->w2);
    free(d->perm);
    free(d->grid);
    free(d);
}

/* The order of epoch e: a Fisher-Yates shuffle from (seed, e), the same on every rank. */
static void data_permute(dt_dataset *d, long epoch)
{
    for (size_t i = 0; i < d->size; i++) d->perm[i] = (uint32_t)i;
    for (size_t i = d->size - 1; i > 0; i--) {
        size_t j = (size_t)(rng_at(d->seed, STREAM_PERM + (uint64_t)epoch, i) % (i + 1));
        uint32_t t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    d->perm_epoch = epoch;
}

/* n values uniform in [-1, 1) of stream (seed, stream) from position j0: the per-stream key is
 * hashed once, each value is one more mix (a loop the compiler vectorizes). */
static void data_uniform(uint64_t seed, uint64_t stream, uint64_t j0, float *out, size_t n)
{
    const uint64_t key = rng_mix(seed ^ rng_mix(stream));
    for (size_t j = 0; j < n; j++) out[j] = rng_uniform_pm1(rng_mix(key + j0 + j));
}

/* Dot product in a fixed order with 16 independent lanes: vectorizes without reassociating, and
 * gives the same bits whatever batch the sample is in, so labels never depend on sharding. */
static float data_dot(const float *a, const float *b, size_t n)
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
static void data_image(const dt_dataset *d, uint64_t index, float *x, float *grid)
{
    const size_t cells = (size_t)d->gh * d->gw;
    for (int c = 0; c < d->c; c++) {
        data_uniform(d->seed, STREAM_SAMPLE + index, (uint64_t)c * cells, grid, cells);
        float *plane = x + (size_t)c * d->h * d->w;
        for (int y = 0; y < d->h; y++) {
            float fy = (float)y / IMAGE_CELL;
            int y0 = (int)fy;
            float ty = fy - (float)y0;
            for (int xx = 0; xx < d->w; xx++) {
                float fx = (float)xx / IMAGE_CELL;
                int x0 = (int)fx;
                float tx = fx - (float)x0;
                const float *g0 = grid + y0 * d->gw + x0, *g1 = g0 + d->gw;
                plane[y * d->w + xx] = (1 - ty) * ((1 - tx) * g0[0] + tx * g0[1]) + ty * ((1 - tx) * g1[0] + tx * g1[1]);
            }
        }
    }
}

static int32_t data_sample(const dt_dataset *d, uint64_t index, float *x, float *grid)
{
    if (d->h > 1 || d->w > 1)
        data_image(d, index, x, grid);
    else
        data_uniform(d->seed, STREAM_SAMPLE + index, 0, x, d->input_size);
    float h[TEACHER_HIDDEN];
    for (int u = 0; u < TEACHER_HIDDEN; u++) {
        float a = data_dot(d->w1 + (size_t)u * d->input_size, x, d->input_size);
        h[u] = a > 0 ? a : 0;
    }
    int best = 0;
    float best_v = -INFINITY;
    for (int c = 0; c < d->classes; c++) {
        float a = data_dot(d->w2 + (size_t)c * TEACHER_HIDDEN, h, TEACHER_HIDDEN);
        if (a > best_v) {
            best_v = a;
            best = c;
        }
    }
    return best;
}

size_t data_grid_floats(const dt_dataset *d) { return (size_t)d->gh * d->gw; }
size_t data_input_size(const dt_dataset *d) { return d->input_size; }

/* Checks the arguments, makes the permutation of the step's epoch, and returns where the batch
 * starts in it. */
static dt_status data_batch_pos(dt_dataset *d, long step, int rank, int world, int batch, size_t *pos)
{
    if (step < 0 || world < 1 || rank < 0 || rank >= world || batch < 1)
        return dt_set_error(DT_ERR_INVALID_ARG, "dt_dataset_batch: bad step %ld, rank %d of %d or batch %d", step,
                            rank, world, batch);
    size_t global = (size_t)world * (size_t)batch;
    size_t per_epoch = d->size / global;
    if (per_epoch == 0)
        return dt_set_error(DT_ERR_INVALID_ARG, "the dataset of %zu samples is smaller than one global batch of "
                            "%zu (%d ranks x %d): use a larger --dataset-size or a smaller --batch",
                            d->size, global, world, batch);
    long epoch = (long)((size_t)step / per_epoch);
    if (epoch != d->perm_epoch) data_permute(d, epoch);
    *pos = ((size_t)step % per_epoch) * global + (size_t)rank * (size_t)batch;
    return DT_OK;
}

dt_status data_batch_indices(dt_dataset *d, long step, int rank, int world, int batch, uint32_t *idx)
{
    size_t pos;
    dt_status s = data_batch_pos(d, step, rank, world, batch, &pos);
    if (s) return s;
    memcpy(idx, d->perm + pos, (size_t)batch * sizeof *idx);
    return DT_OK;
}

void data_make(const dt_dataset *d, const uint32_t *idx, int n, float *x, int32_t *labels, float *grid)
{
    for (int i = 0; i < n; i++) labels[i] = data_sample(d, idx[i], x + (size_t)i * d->input_size, grid);
}

dt_status dt_dataset_batch(dt_dataset *d, long step, int rank, int world, int batch, float *x, int32_t *labels)
{
    size_t pos;
    dt_status s = data_batch_pos(d, step, rank, world, batch, &pos);
    if (s) return s;
    data_make(d, d->perm + pos, batch, x, labels, d->grid);
    return DT_OK;
}
