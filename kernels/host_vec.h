/*
 * host_vec.h - elementwise float loops over host memory (kernels/cpu/ops.c), shared by the CPU
 * backend's kernels and the host reductions of collectives/ (the engine's fold and average, the
 * MPI backend's average).
 *
 * Each runs in fixed blocks of DT_CPU_BLOCK floats over restrict pointers plus a scalar tail: at
 * -O2 (a distribution's build), gcc 12's "very cheap" vectorizer cost model only vectorizes a loop
 * whose trip count is a known multiple of the vector length and whose pointers cannot alias, so a
 * plain loop over n stays scalar there. The results are those of the plain loops, bit for bit.
 */
#ifndef DT_KERNELS_HOST_VEC_H
#define DT_KERNELS_HOST_VEC_H

#include <stddef.h>

/* dst[0..n) += src[0..n); the two must not overlap. */
void cpu_add_into(float *dst, const float *src, size_t n);
/* x[0..n) *= m. */
void cpu_scale(float *x, size_t n, float m);
/* x[0..n) /= d: a division, not a product with 1/d, so that an average is the bits of the sum
 * divided by the rank count, as MPI's sum then a division gives them. */
void cpu_div_by(float *x, size_t n, float d);

#endif
