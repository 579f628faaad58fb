/*
 * optim_args.c - the argument checks every backend's optimizer entries make (kernels/backend.h,
 * optim_args_check), in one place so the CPU and CUDA tables refuse the same values with the same
 * words.
 */
#include "kernels/backend.h"
#include "base/status.h"

dt_status optim_args_check(const char *op, const optim_grads *g, dt_dtype copy_t, const uint16_t *copy)
{
    if (g->t != DT_F32 && g->t != DT_F16 && g->t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: the gradients' type %d is not DT_F32, DT_F16 or DT_BF16", op,
                                (int)g->t);
    if (!copy || copy_t == DT_F16 || copy_t == DT_BF16) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG, "%s: the parameter copy's type %d is not DT_F16 or DT_BF16", op,
                            (int)copy_t);
}
