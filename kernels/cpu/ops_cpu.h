/*
 * cpu/ops_cpu.h - private declarations shared by the files of the CPU backend (kernels/cpu/):
 * the fp32 kernels of ops.c, conv.c and optim.c, the 16-bit layer ops of amp_layers.c, and the
 * table in backend_cpu.c that gathers them.
 *
 * The fp32 kernels have the contracts of the table entries of the same name in kernels/backend.h,
 * without the backend argument and the status (on the CPU they cannot fail).
 */
#ifndef DT_KERNELS_CPU_OPS_CPU_H
#define DT_KERNELS_CPU_OPS_CPU_H

#include "kernels/backend.h"
#include "kernels/host_vec.h"

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

/* ops.c; its elementwise loops (cpu_add_into, cpu_scale, cpu_div_by) are in kernels/host_vec.h. */
void cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc);
void cpu_linear_fwd(const float *x, const float *w, const float *b, float *y, int batch, int in, int out);
void cpu_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db, int batch, int in,
                    int out);
void cpu_relu_fwd(const float *x, float *y, size_t n);
void cpu_relu_bwd(const float *y, const float *dy, float *dx, size_t n);
void cpu_maxpool_fwd(const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k);
void cpu_maxpool_bwd(const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w, int k);
/* Returns the summed loss. */
double cpu_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                        float grad_scale, int *correct);

/* conv.c */
size_t cpu_conv_ws_floats(const conv_shape *s);
void cpu_conv_fwd(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws);
void cpu_conv_bwd_data(const conv_shape *s, const float *dy, const float *w, float *dx, float *ws);
void cpu_conv_bwd_filter(const conv_shape *s, const float *x, const float *dy, float *dw, float *db, float *ws);

/* optim.c */
void cpu_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd, int first);
/* step: the step's constants (optim_consts_adamw, kernels/backend.h). */
void cpu_adamw(float *p, const float *grad, float *m, float *v, size_t n, const optim_consts *step, float b1, float b2,
               float eps);

/* amp_layers.c: the table's 16-bit layer entries on the CPU (fp32 passes go to the kernels above). */
void cpu_scratch16(backend *be, const layer_need *l, int batch, scratch_sizes *sz);
dt_status cpu_layer_fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32, void *y,
                           int relu, int batch, int in, int out);
dt_status cpu_layer_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                           const void *dy, void *dx, int batch, int in, int out, const layer_params *below);
dt_status cpu_layer_conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                             const void *x, int x_f32, void *y, int relu);
dt_status cpu_layer_conv_bwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                             const void *x, int x_f32, const void *dy, void *dx);
dt_status cpu_layer_pool_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx,
                             int batch, int c, int h, int w, int k);
dt_status cpu_layer_pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx, int batch,
                             int c, int h, int w, int k, const void *relu_y);
dt_status cpu_layer_relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n);
dt_status cpu_layer_relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n);

/* synth.c: the synthetic samples of kernels/synth.h on the host. */
struct synth_spec;
dt_status cpu_synth_batch(backend *be, const struct synth_spec *sp, const uint32_t *idx, int n, float *x,
                          int32_t *labels);

#endif
