/*
 * bench_values.c - the values `dtrain bench allreduce` reduces and what they must come to
 * (bench_values.h). The benchmark's allreduces are in place, as training's are, so each reduces
 * the last one's result; the expected values are computed here, for the 16 residues of the fill,
 * by the same arithmetic the engine does.
 */
#include "launch/bench/bench_values.h"
#include "base/half.h"

#include <math.h>
#include <string.h>

/* Small integers in [-8, 7], different on every rank: sums over up to 2^20 ranks stay exact. They
 * depend on i through 7 i mod 16 alone, so element i holds the value of its residue i mod 16. */
static inline float fill_value(size_t i, int rank) { return (float)((int)((i * 7 + (size_t)rank * 3) % 16) - 8); }

void bench_fill(float *buf, size_t count, int rank)
{
    for (size_t i = 0; i < count; i++) buf[i] = fill_value(i, rank);
}

/* x as the wire carries it: the engine rounds what it sends and the sum it returns to 16 bits. */
static float wire_round(dt_dtype wire, float x)
{
    if (wire == DT_F16) return half_f16_to_f32(half_f32_to_f16(x));
    if (wire == DT_BF16) return half_bf16_to_f32(half_f32_to_bf16(x));
    return x;
}

/* One in-place allreduce as the engine computes it, of a fresh fill (prev NULL) or of prev (what
 * every rank holds for each residue after the last one): the ranks' values added in rank order in
 * fp32, divided by W for DT_AVG, rounded to the wire. For MPI (fp32, DT_SUM) the order does not
 * matter while the values are integers the type holds exactly, as bench_block keeps them. */
static void reduce_once(int world, dt_redop op, dt_dtype wire, const float *prev, float out[BENCH_FILL_PERIOD])
{
    for (int k = 0; k < BENCH_FILL_PERIOD; k++) {
        float acc = 0;
        for (int r = 0; r < world; r++) {
            const float v = wire_round(wire, prev ? prev[k] : fill_value((size_t)k, r));
            acc = r ? acc + v : v;
        }
        if (op == DT_AVG) acc /= (float)world;
        out[k] = wire_round(wire, acc);
    }
}

/* The most in-place iterations a fill may take before it is refilled; a run of them is a block. */

/* What each residue holds after n in-place allreduces of a fresh fill; stops early at a fixed
 * point (one rank, or an average of equal values), which every later iteration keeps. */
void bench_expected_after(int world, dt_redop op, dt_dtype wire, long n, float out[BENCH_FILL_PERIOD])
{
    reduce_once(world, op, wire, NULL, out);
    for (long j = 1; j < n; j++) {
        float next[BENCH_FILL_PERIOD];
        reduce_once(world, op, wire, out, next);
        const int same = !memcmp(next, out, sizeof next);
        memcpy(out, next, sizeof next);
        if (same) break;
    }
}

/* The iterations of a block: an in-place sum over W ranks multiplies the values by W each time
 * (at 2 ranks fp16's overflow to inf after about 13, bf16's and fp32's later), and timing inf or
 * NaN would time whatever path they take instead. So a block is the most iterations (up to
 * BENCH_MAX_BLOCK) after which every value is still an integer of magnitude at most 2^p, which the
 * type (p = 24 for fp32, 11 for fp16, 8 for bf16) holds exactly whatever the order of the sums: the
 * result stays finite and checkable. An average keeps its values, so its block is the longest.
 * At least 1. */
long bench_block(int world, dt_redop op, dt_dtype wire)
{
    const float bound = wire == DT_F16 ? 2048.0f : wire == DT_BF16 ? 256.0f : 16777216.0f;
    float v[BENCH_FILL_PERIOD];
    reduce_once(world, op, wire, NULL, v);
    long n = 1;
    while (n < BENCH_MAX_BLOCK) {
        float next[BENCH_FILL_PERIOD];
        reduce_once(world, op, wire, v, next);
        int ok = 1;
        for (int k = 0; k < BENCH_FILL_PERIOD; k++) ok &= isfinite(next[k]) && fabsf(next[k]) <= bound;
        if (!ok) break;
        if (!memcmp(next, v, sizeof next)) return BENCH_MAX_BLOCK; /* a fixed point */
        memcpy(v, next, sizeof next);
        n++;
    }
    return n;
}

/* Elements of buf that are not the expected value of their residue (want, from bench_expected_after),
 * and of those the ones not finite. */
void bench_count_wrong(const float *buf, size_t count, const float want[BENCH_FILL_PERIOD], long long *wrong,
                       long long *nonfinite)
{
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(buf[i]))
            ++*wrong, ++*nonfinite;
        else if (buf[i] != want[i % BENCH_FILL_PERIOD])
            ++*wrong;
    }
}
