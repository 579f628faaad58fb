/*
 * transform.c - one sample from its file to the batch (dataset.h): read through the format,
 * replace an undecodable one when asked, augment, normalize.
 *
 * Augmentation is torchvision's RandomCrop(size, padding=P) then RandomHorizontalFlip on the
 * values as read (so padding is 0 before normalization, as there), with the crop offset and the
 * flip drawn from (seed, epoch, sample index): the result is the same whatever thread, loader
 * thread count or rank makes the sample.
 */
#include "runtime/data/dataset.h"
#include "base/rng.h"
#include "base/status.h"

#include <string.h>

#define STREAM_AUGMENT 0x6175676dull

size_t dataset_scratch_floats(const dt_dataset *d) { return d->crop_pad || d->flip ? d->input_size : 0; }

/* Reads view sample k; with skip_bad an undecodable sample is replaced by the next one that
 * decodes (in view order), so a batch stays full and the choice is the same on every run; or, when
 * not `replace` (an evaluation, which must count every sample once), marked DS_LABEL_BAD. */
static dt_status read_sample(dt_dataset *d, uint32_t k, int replace, float *x, int32_t *label)
{
    for (size_t tries = 0; tries < d->n; tries++) {
        const size_t kk = ((size_t)k + tries) % d->n;
        const size_t i = d->view ? d->view[kk] : kk;
        dt_status s = ds_read(d->split, i, x, label);
        if (s != DT_ERR_CORRUPT || !d->skip_bad) {
            if (!s && (*label < 0 || *label >= d->classes))
                return status_set_error(DT_ERR_CORRUPT, "%s: sample %zu has label %d, outside 0..%d", d->split->source,
                                        i, (int)*label, d->classes - 1);
            return s;
        }
        atomic_fetch_add_explicit(&d->bad, 1, memory_order_relaxed);
        if (!replace) {
            *label = DS_LABEL_BAD;
            return DT_OK;
        }
    }
    return status_set_error(DT_ERR_CORRUPT, "%s: no sample could be decoded", d->split->source);
}

/* Crop after zero padding and flip, from src into dst (one C x H x W sample). Each output row is
 * zeros, a run of one source row (reversed when flipped) and zeros: the run's columns are worked
 * out once, not a bounds test per pixel (which made this half of an augmented CIFAR pipeline). */
static void augment(const dt_dataset *d, uint64_t r, const float *src, float *dst)
{
    const int P = d->crop_pad, H = d->h, W = d->w;
    const int dy = P ? (int)(r % (uint64_t)(2 * P + 1)) - P : 0;
    const int dx = P ? (int)((r >> 16) % (uint64_t)(2 * P + 1)) - P : 0;
    const int flip = d->flip && (r >> 63);
    /* Output column x reads source column x + dx, or W - 1 - x + dx flipped: [x0, x1) lie inside. */
    int x0 = flip ? (dx > 0 ? dx : 0) : (dx < 0 ? -dx : 0);
    int x1 = flip ? (dx < 0 ? W + dx : W) : (dx > 0 ? W - dx : W);
    /* A pad wider than the image can shift it out whole: then the row is zeros. */
    if (x0 > W) x0 = W;
    if (x1 < x0) x1 = x0;
    for (int c = 0; c < d->c; c++) {
        const float *sp = src + (size_t)c * H * W;
        float *dp = dst + (size_t)c * H * W;
        for (int y = 0; y < H; y++) {
            const int sy = y + dy;
            float *row = dp + (size_t)y * W;
            if (sy < 0 || sy >= H) {
                memset(row, 0, (size_t)W * sizeof *row);
                continue;
            }
            const float *srow = sp + (size_t)sy * W;
            memset(row, 0, (size_t)x0 * sizeof *row);
            if (flip) {
                const float *from = srow + (W - 1 + dx); /* column x reads from[-x] */
                for (int x = x0; x < x1; x++) row[x] = from[-x];
            } else {
                memcpy(row + x0, srow + x0 + dx, (size_t)(x1 - x0) * sizeof *row);
            }
            memset(row + x1, 0, (size_t)(W - x1) * sizeof *row);
        }
    }
}

/* p[0..n) = p * mul + add (two roundings: -ffp-contract=off), in fixed blocks so that gcc
 * vectorizes it at -O2, where its "very cheap" cost model keeps a plain loop over n scalar. */
static void scale_shift(float *restrict p, size_t n, float mul, float add)
{
    enum { BLOCK = 16 };
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (size_t t = 0; t < BLOCK; t++) p[i + t] = p[i + t] * mul + add;
    for (; i < n; i++) p[i] = p[i] * mul + add;
}

dt_status dataset_fill(dt_dataset *d, const uint32_t *idx, long epoch, int n, int train, float *x, int32_t *labels,
                       float *scratch)
{
    const size_t hw = (size_t)d->h * d->w;
    const int aug = train && (d->crop_pad || d->flip);
    /* Unnormalized batches would train without a word of it. */
    if (d->norm_deferred)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: its standard normalization's figures were deferred (dataset_open_deferred): "
                                "call dataset_compute_normalization (collective) or dt_dataset_set_normalization "
                                "before reading batches",
                                d->split->source);
    for (int j = 0; j < n; j++) {
        float *row = x + (size_t)j * d->input_size;
        dt_status s = read_sample(d, idx[j], train, aug ? scratch : row, &labels[j]);
        if (s) return s;
        if (labels[j] == DS_LABEL_BAD) continue; /* left out by the evaluation, its row unused */
        if (aug) augment(d, rng_at(d->seed, STREAM_AUGMENT + (uint64_t)epoch, idx[j]), scratch, row);
        if (d->norm == DT_NORMALIZE_NONE) continue;
        for (int c = 0; c < d->c; c++) scale_shift(row + (size_t)c * hw, hw, d->mul[c], d->add[c]);
    }
    return DT_OK;
}
