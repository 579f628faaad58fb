/*
 * ops.h - the kernel op table: the math of training, one implementation per backend.
 *
 * The CPU table (kernels/cpu/) is always built and is the oracle the CUDA one is tested against.
 * Layouts are row-major and NCHW. All pointers refer to memory of the backend's device. Gradient
 * outputs are overwritten, not accumulated: in the networks dtrain builds every parameter is used
 * once per step. `ws` arguments are scratch memory of at least the size the matching *_ws_floats
 * function returns; callers own it (so a step allocates nothing). A workspace sized for a shape
 * also serves the same shape with any smaller batch (the last batch of an epoch).
 */
#ifndef DT_KERNELS_OPS_H
#define DT_KERNELS_OPS_H

#include "dtrain.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Geometry of a 2-D convolution: square kernel k, stride s, zero padding p on every side. */
typedef struct conv_shape {
    int batch, c_in, h, w;  /* input  (batch, c_in, h, w) */
    int c_out, k, stride, pad;
    int h_out, w_out;       /* (h + 2p - k) / s + 1, filled by conv_shape_init */
} conv_shape;

/* Fills h_out/w_out; DT_ERR_INVALID_ARG (naming the numbers) when the kernel does not fit. */
dt_status conv_shape_init(conv_shape *s);

typedef struct kernel_ops {
    const char *name;

    /* C(M,N) = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X or X^T when trans_x. */
    void (*gemm)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);

    /* Fully connected: y(B,OUT) = x(B,IN) * W(OUT,IN)^T + b(OUT). */
    void (*linear_fwd)(const float *x, const float *w, const float *b, float *y, int batch, int in, int out);
    /* dW(OUT,IN) = dy^T x, db(OUT) = column sums of dy, dx(B,IN) = dy W (skipped when dx is NULL). */
    void (*linear_bwd)(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                       int batch, int in, int out);

    /* Convolution, im2col + GEMM (or better where measured). x (B,C,H,W), w (O,C,k,k), b (O),
     * y (B,O,Ho,Wo). */
    size_t (*conv_ws_floats)(const conv_shape *s);
    void (*conv_fwd)(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws);
    /* dx (B,C,H,W) from dy and w. */
    void (*conv_bwd_data)(const conv_shape *s, const float *dy, const float *w, float *dx, float *ws);
    /* dw (O,C,k,k) and db (O) from x and dy. */
    void (*conv_bwd_filter)(const conv_shape *s, const float *x, const float *dy, float *dw, float *db, float *ws);

    /* y = max(x, 0), n elements (in place allowed). */
    void (*relu_fwd)(const float *x, float *y, size_t n);
    /* dx = dy where y > 0 else 0 (y is the forward output; dx may alias dy). */
    void (*relu_bwd)(const float *y, const float *dy, float *dx, size_t n);

    /* Max pooling with window k and stride k, no padding: x (B,C,H,W) -> y (B,C,H/k,W/k);
     * idx records the argmax (offset within the input plane) for the backward pass. */
    void (*maxpool_fwd)(const float *x, float *y, int32_t *idx, int batch, int c, int h, int w, int k);
    /* dx = 0 except dx[argmax] = dy. */
    void (*maxpool_bwd)(const float *dy, const int32_t *idx, float *dx, int batch, int c, int h, int w, int k);

    /* Softmax cross-entropy over logits (B,C) with labels in [0,C), numerically stable. Returns the
     * summed loss (not the mean) and the count of argmax == label through *correct; writes
     * dlogits = (softmax - onehot) * grad_scale (pass 1/global_batch for the mean loss). */
    double (*softmax_xent)(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                           float grad_scale, int *correct);

    /* SGD with momentum and (coupled) weight decay, PyTorch semantics:
     *   g = grad + wd * p;  buf = first ? g : momentum * buf + g;  p -= lr * buf
     * (momentum 0: p -= lr * g, buf untouched and may be NULL). */
    void (*sgd)(float *p, const float *grad, float *buf, size_t n, float lr, float momentum, float wd, int first);
    /* AdamW (decoupled weight decay), PyTorch semantics, step t >= 1:
     *   p -= lr * wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
     *   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) */
    void (*adamw)(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, int t);
} kernel_ops;

/* The CPU table (CBLAS from OpenBLAS for every GEMM). */
const kernel_ops *kernels_cpu(void);

#ifdef __cplusplus
}
#endif
#endif
