/*
 * optim_args.c - what every backend's optimizer entries share (kernels/backend.h): the argument
 * checks (optim_args_check), so the CPU and CUDA tables refuse the same values with the same
 * words, and the per-step constants (optim_consts_*), so that a step given them in backend memory
 * (optim_grads.live) computes the bits of one given lr and t.
 */
#include "kernels/backend.h"
#include "base/status.h"

#include <math.h>

optim_consts optim_consts_sgd(float lr, int first)
{
    optim_consts k = {0};
    k.lr = lr;
    k.first = first != 0;
    return k;
}

optim_consts optim_consts_adamw(float lr, float b1, float b2, float wd, int t)
{
    optim_consts k = {0};
    k.lr = lr;
    k.first = t == 1;
    k.decay = (float)(1.0 - (double)lr * wd);
    k.step = (float)((double)lr / (1.0 - pow(b1, t)));
    k.inv_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    return k;
}

dt_status optim_args_check(const char *op, const optim_grads *g, dt_dtype copy_t, const uint16_t *copy)
{
    if (g->t != DT_F32 && g->t != DT_F16 && g->t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: the gradients' type %d is not DT_F32, DT_F16 or DT_BF16", op,
                                (int)g->t);
    if (!copy || copy_t == DT_F16 || copy_t == DT_BF16) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG, "%s: the parameter copy's type %d is not DT_F16 or DT_BF16", op,
                            (int)copy_t);
}
