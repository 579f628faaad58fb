/*
 * ops.h - the geometry the ops of every backend share: the shape of a 2-D convolution and its
 * check. The op table itself, with its conventions, is kernels/backend.h.
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
    int batch, c_in, h, w; /* input  (batch, c_in, h, w) */
    int c_out, k, stride, pad;
    int h_out, w_out; /* (h + 2p - k) / s + 1, filled by conv_shape_init */
} conv_shape;

/* Fills h_out/w_out; DT_ERR_INVALID_ARG (naming the numbers) when the kernel does not fit. */
dt_status conv_shape_init(conv_shape *s);

/* A pointwise convolution (1x1, stride 1, no padding): its input is its own column matrix, so the
 * backends skip im2col and col2im for it, and the memory plan sizes its scratch apart. */
static inline int conv_shape_pointwise(const conv_shape *s) { return s->k == 1 && s->stride == 1 && s->pad == 0; }

#ifdef __cplusplus
}
#endif
#endif
