/*
 * blas.h - internal part of the OpenBLAS kernel check (see blas.c).
 */
#ifndef DT_RUNTIME_PLACEMENT_BLAS_H
#define DT_RUNTIME_PLACEMENT_BLAS_H

/* The OPENBLAS_CORETYPE to advise for OpenBLAS core name `core` on a CPU with the given features,
 * or NULL when `core` already uses them. Pure, for tests. */
const char *blas_advice_for(const char *core, int cpu_avx512, int cpu_avx2_fma);

#endif
