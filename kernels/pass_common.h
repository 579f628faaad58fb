/*
 * pass_common.h - layer entries of the op table that every backend shares because they are made
 * of the table's own entries alone (kernels/pass_common.c): the loss of a pass in any precision
 * and its logits in fp32. A backend's table points at them.
 */
#ifndef DT_KERNELS_PASS_COMMON_H
#define DT_KERNELS_PASS_COMMON_H

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* backend_ops.layer_loss: fp32 softmax_xent, or the 16-bit logits widened into a->sy, the loss
 * gradient computed into a->sdy and rounded into dlogits. */
dt_status pass_layer_loss(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                          int batch, int classes, float grad_scale, double *loss, int *correct);
/* backend_ops.layer_logits32. */
dt_status pass_layer_logits32(backend *be, const pass_args *a, const void *logits, size_t n, const float **out);

#ifdef __cplusplus
}
#endif
#endif
