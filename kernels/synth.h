/*
 * synth.h - the synthetic dataset's generator as the op tables make it (synth_batch in
 * backend.h): the CPU's (kernels/cpu/synth.c), which the synthetic reader format uses too
 * (runtime/data/synthetic.c), and the CUDA one (kernels/cuda/synth.cu), which makes the same bits
 * on the device so that a GPU's batches need no host core and no copy.
 *
 * Sample i is a pure function of (seed, i): for flat inputs (h = w = 1), value j is
 * uniform_pm1(mix(key + j)) with key = mix(seed ^ mix(SYNTH_STREAM_SAMPLE + i)); for images, per
 * channel a coarse (gh, gw) grid of such values (cell g of channel c at counter c*gh*gw + g), one
 * per SYNTH_IMAGE_CELL x SYNTH_IMAGE_CELL pixels, interpolated bilinearly as
 * (1-ty)*((1-tx)*g00 + tx*g01) + ty*((1-tx)*g10 + tx*g11), each product and sum rounded on its own
 * (no fused multiply-add). Label: the argmax (the first of equal maxima) of the teacher
 * w2 . relu(w1 . x), where every dot product adds in 16 lanes (lane k takes terms k, k+16, ... of
 * the whole 16-blocks, in order), then the leftover terms into a sum starting at 0, then the
 * lanes 0..15 into that sum: a fixed order that vectorizes on the CPU and spreads over threads
 * on a GPU, and gives the same bits whatever batch a sample is in. Last, when a normalization is
 * given, each value becomes value * mul[c] + add[c] (unfused too; the label is the raw sample's).
 */
#ifndef DT_KERNELS_SYNTH_H
#define DT_KERNELS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#define SYNTH_TEACHER_HIDDEN 32
#define SYNTH_DOT_LANES 16
#define SYNTH_IMAGE_CELL 4
#define SYNTH_STREAM_TEACHER 0x7465616368ull
#define SYNTH_STREAM_SAMPLE 0x73616d70ull

/* One synthetic dataset as a backend makes it. The pointers are memory of the backend that
 * makes the samples (device memory for CUDA); the caller owns them. */
typedef struct synth_spec {
    int c, h, w;      /* sample shape; h = w = 1: flat values, else images */
    int classes;      /* 2..DS_MAX_CLASSES */
    int gh, gw;       /* images: the coarse grid, (h + 3) / 4 + 1 by (w + 3) / 4 + 1 */
    uint64_t seed;    /* the dataset's seed */
    const float *w1;  /* the teacher's first layer: (SYNTH_TEACHER_HIDDEN, c*h*w) */
    const float *w2;  /* its second: (classes, SYNTH_TEACHER_HIDDEN) */
    const float *mul; /* per channel (c), or NULL: no normalization */
    const float *add; /* per channel (c), with mul */
} synth_spec;

static inline size_t synth_input_size(const synth_spec *sp) { return (size_t)sp->c * sp->h * sp->w; }

#endif
