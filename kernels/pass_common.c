/*
 * pass_common.c - see pass_common.h.
 */
#include "kernels/pass_common.h"

dt_status pass_layer_loss(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                          int batch, int classes, float grad_scale, double *loss, int *correct)
{
    const backend_ops *k = be->ops;
    if (a->prec == DT_F32)
        return k->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, loss, correct);
    /* The loss in fp32 from the 16-bit logits; its gradient (times the loss scale) rounded to 16 bits. */
    const size_t n = (size_t)batch * (size_t)classes;
    dt_status s;
    if ((s = k->cast_to32(be, a->prec, logits, a->sy, n)) ||
        (s = k->softmax_xent(be, a->sy, labels, a->sdy, batch, classes, grad_scale, loss, correct)))
        return s;
    return k->cast_to16(be, a->prec, a->sdy, dlogits, n);
}

dt_status pass_layer_logits32(backend *be, const pass_args *a, const void *logits, size_t n, const float **out)
{
    if (a->prec == DT_F32) {
        *out = logits;
        return DT_OK;
    }
    *out = a->sy;
    return be->ops->cast_to32(be, a->prec, logits, a->sy, n);
}
