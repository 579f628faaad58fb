/*
 * synth.c - the CPU table's synth_batch (backend.h): the synthetic samples of kernels/synth.h,
 * made on the host. The synthetic reader format (runtime/data/synthetic.c) reads through it too,
 * so the loader's host batches and the CPU table's are one implementation.
 */
#include "kernels/cpu/ops_cpu.h"
#include "kernels/synth.h"
#include "base/rng.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>

/* Grid scratch on the stack up to this many floats (a 256x256 image's grid is 66x66). */
#define GRID_STACK 8192

/* synth_one has an AVX2 clone where the CPU has it, and the helpers below inline into it, so
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

/* The dot product in synth.h's order: 16 independent lanes (vectorizes without reassociating). */
SYNTH_INLINE static float synth_dot(const float *a, const float *b, size_t n)
{
    float lane[SYNTH_DOT_LANES] = {0};
    size_t j = 0;
    for (; j + SYNTH_DOT_LANES <= n; j += SYNTH_DOT_LANES)
        for (int k = 0; k < SYNTH_DOT_LANES; k++) lane[k] += a[j + k] * b[j + k];
    float sum = 0;
    for (; j < n; j++) sum += a[j] * b[j];
    for (int k = 0; k < SYNTH_DOT_LANES; k++) sum += lane[k];
    return sum;
}

/* A smooth image: per channel a (gh, gw) grid of random values, bilinearly interpolated. */
SYNTH_INLINE static void synth_image(const synth_spec *sp, uint64_t index, float *x, float *grid)
{
    const size_t cells = (size_t)sp->gh * sp->gw;
    for (int c = 0; c < sp->c; c++) {
        synth_uniform(sp->seed, SYNTH_STREAM_SAMPLE + index, (uint64_t)c * cells, grid, cells);
        float *plane = x + (size_t)c * sp->h * sp->w;
        for (int y = 0; y < sp->h; y++) {
            float fy = (float)y / SYNTH_IMAGE_CELL;
            int y0 = (int)fy;
            float ty = fy - (float)y0;
            for (int xx = 0; xx < sp->w; xx++) {
                float fx = (float)xx / SYNTH_IMAGE_CELL;
                int x0 = (int)fx;
                float tx = fx - (float)x0;
                const float *g0 = grid + y0 * sp->gw + x0, *g1 = g0 + sp->gw;
                plane[y * sp->w + xx] =
                    (1 - ty) * ((1 - tx) * g0[0] + tx * g0[1]) + ty * ((1 - tx) * g1[0] + tx * g1[1]);
            }
        }
    }
}

/* Sample `index` into x and *label; grid: gh * gw floats of scratch (images). */
SYNTH_CLONES static void synth_one(const synth_spec *sp, uint64_t index, float *x, int32_t *label, float *grid)
{
    const size_t n = synth_input_size(sp);
    if (sp->h > 1 || sp->w > 1)
        synth_image(sp, index, x, grid);
    else
        synth_uniform(sp->seed, SYNTH_STREAM_SAMPLE + index, 0, x, n);
    float h[SYNTH_TEACHER_HIDDEN];
    for (int u = 0; u < SYNTH_TEACHER_HIDDEN; u++) {
        float a = synth_dot(sp->w1 + (size_t)u * n, x, n);
        h[u] = a > 0 ? a : 0;
    }
    int best = 0;
    float best_v = -INFINITY;
    for (int c = 0; c < sp->classes; c++) {
        float a = synth_dot(sp->w2 + (size_t)c * SYNTH_TEACHER_HIDDEN, h, SYNTH_TEACHER_HIDDEN);
        if (a > best_v) {
            best_v = a;
            best = c;
        }
    }
    *label = best;
    if (!sp->mul) return;
    const size_t hw = (size_t)sp->h * sp->w;
    for (int c = 0; c < sp->c; c++) {
        float *p = x + (size_t)c * hw;
        for (size_t i = 0; i < hw; i++) p[i] = p[i] * sp->mul[c] + sp->add[c];
    }
}

dt_status cpu_synth_batch(backend *be, const synth_spec *sp, const uint32_t *idx, int n, float *x, int32_t *labels)
{
    (void)be;
    const size_t cells = (size_t)sp->gh * sp->gw, in = synth_input_size(sp);
    const int image = sp->h > 1 || sp->w > 1;
    float stack[GRID_STACK], *grid = !image || cells <= GRID_STACK ? stack : malloc(cells * sizeof *grid);
    if (!grid) return status_set_error(DT_ERR_NOMEM, "out of memory making a synthetic image of %zu grid cells", cells);
    for (int j = 0; j < n; j++) synth_one(sp, idx[j], x + (size_t)j * in, labels + j, grid);
    if (grid != stack) free(grid);
    return DT_OK;
}
