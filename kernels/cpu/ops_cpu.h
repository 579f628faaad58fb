/*
 * cpu/ops_cpu.h - private declarations shared by the files of the CPU op table (kernels/cpu/):
 * ops.c builds the table from the functions of conv.c and optim.c declared here.
 *
 * Every function has the contract of the table entry of the same name in kernels/ops.h.
 */
#ifndef DT_KERNELS_CPU_OPS_CPU_H
#define DT_KERNELS_CPU_OPS_CPU_H

#include "kernels/ops.h"

/* Elementwise loops run in fixed blocks of this many floats plus a scalar tail: at -O2, gcc 12's
 * "very cheap" vectorizer cost model only vectorizes a loop whose trip count is a known multiple
 * of the vector length (see cpu/cast.c), so a plain loop over n would stay scalar. */
#define DT_CPU_BLOCK 16

/* AVX2 clones of the elementwise loops, picked at load time where the CPU has AVX2. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DT_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DT_CPU_CLONES
#endif

/* conv.c */
size_t cpu_conv_ws_floats(const conv_shape *s);
void cpu_conv_fwd(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws);
void cpu_conv_bwd_data(const conv_shape *s, const float *dy, const float *w, float *dx, float *ws);
void cpu_conv_bwd_filter(const conv_shape *s, const float *x, const float *dy, float *dw, float *db, float *ws);

/* optim.c */
void cpu_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd, int first);
void cpu_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
               float wd, int t);

#endif
