/*
 * amp.h - the CPU loops of mixed precision: finite checks, the fused unscale + check, and ReLU on
 * 16-bit activations, whose bit-pattern helpers the CUDA kernels share. (The conversions
 * themselves are in cast.h.)
 *
 * A gradient that is inf or NaN anywhere must be found, whatever the other values are, so the
 * checks look at every element (no early exit: the loops stay branch-free and vectorized, and the
 * time does not depend on the data).
 */
#ifndef DT_KERNELS_AMP_H
#define DT_KERNELS_AMP_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

/* Number of elements of x[0..n) that are inf or NaN. */
size_t cpu_count_nonfinite(const float *x, size_t n);
/* The same for 16-bit values of type t (DT_F16 or DT_BF16). */
size_t cpu_count_nonfinite16(dt_dtype t, const uint16_t *x, size_t n);
/* One pass: g[i] *= inv_scale, and the count of results that are inf or NaN. */
size_t cpu_unscale_count_nonfinite(float *g, size_t n, float inv_scale);

/* Sum of g[i]^2 in double, for gradient norms: element i goes to lane i % CPU_SUMSQ_LANES of
 * lane[] (which the caller zeroes once and may feed block after block, each block a multiple of
 * the lane count but the last), and cpu_sumsq_total adds the lanes in order. Independent lanes keep
 * the adds from waiting on each other, and the order depends on n alone, so the same values give
 * the same bits everywhere. */
enum { CPU_SUMSQ_LANES = 8 };
void cpu_sumsq_lanes(const float *g, size_t n, double lane[CPU_SUMSQ_LANES]);
double cpu_sumsq_total(const double lane[CPU_SUMSQ_LANES]);

/* out = in rounded to type t (DT_F16 or DT_BF16) and widened back: the 16-bit value as a float.
 * in == out is allowed. */
void cpu_round16(dt_dtype t, const float *in, float *out, size_t n);

/* ReLU on 16-bit values of type t: y = x < 0 ? 0 : x (NaN passes, as in ops.h); in place allowed. */
void cpu_relu16_fwd(dt_dtype t, const uint16_t *x, uint16_t *y, size_t n);
/* dx = y > 0 ? dy : 0 (y is the forward output); dx may alias dy. */
void cpu_relu16_bwd(dt_dtype t, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n);

/* 16-bit ReLU on bit patterns: one definition for the CPU loops and the CUDA kernels, which include
 * this header too (there the helpers are host and device functions). */
#ifdef __CUDACC__
#define DT_AMP_INLINE static __host__ __device__ __forceinline__
#else
#define DT_AMP_INLINE static inline
#endif
/* The +inf pattern of bf16 (bf) or fp16: 0x7f80, 0x7c00. */
DT_AMP_INLINE uint16_t inf16_bits(int bf) { return bf ? (uint16_t)0x7f80u : (uint16_t)0x7c00u; }
/* ReLU of v (inf: inf16_bits of its type): negatives down to -inf, and -0, become +0 (ReLU allows
 * either zero); NaNs pass. */
DT_AMP_INLINE uint16_t relu16(uint16_t v, uint16_t inf)
{
    return ((v & 0x8000u) && (uint16_t)(v & 0x7fffu) <= inf) ? (uint16_t)0 : v;
}
/* ReLU's gradient test on a 16-bit output y: positive, not zero, not NaN (+inf passes). */
DT_AMP_INLINE int relu16_positive(uint16_t y, uint16_t inf) { return !(y & 0x8000u) && y != 0 && y <= inf; }

#endif
