/*
 * model_clip.c - the global L2 norm of a model's gradients and clipping them to a maximum norm
 * (PyTorch's torch.nn.utils.clip_grad_norm_), for dt_model_train_step and custom loops.
 *
 * The norm is taken after the allreduce, so every rank holds the same reduced gradients and needs
 * no communication to agree on it; the sum of squares runs in double in a fixed order (eight
 * interleaved lanes on the CPU, a fixed grid and tree on the GPU) so the bits agree as well, and
 * every rank takes the same clipping decision. It reads the gradients the way the optimizer step
 * will: widened (16-bit ones) and multiplied by the pending unscale and clip factors (16-bit
 * ones, and fp32 ones in dt_model_train_step), in the optimizer's order; fp32 ones that
 * dt_model_unscale_grads unscaled in place as they are.
 * Under --zero 1 only the owned slices are reduced: the ranks' sums of squares are added in rank
 * order instead (model_zero.c), which agrees on every rank but not bit for bit with zero 0.
 */
#include "runtime/model/model_internal.h"
#include "base/status.h"

#include <math.h>

/* The norm into *norm. own: this rank's failure so far (a bad argument), with which it still
 * joins the sum over the ranks under ZeRO-1, so no rank waits for it (fn names the call in the
 * others' messages); elsewhere nothing is collective and a failure returns at once. */
static dt_status grad_norm(const dt_model *m, dt_status own, const char *fn, double *norm)
{
    /* The gradients are scaled exactly as dt_model_optimizer_step will scale them before using
     * them: 16-bit ones and pending fp32 ones by their factors; fp32 ones unscaled in place have
     * none (both are 1). */
    double ss = 0.0;
    /* ZeRO-1: the owned slices' sums, added over the ranks in rank order (collective). */
    dt_status s = own;
    if (model_zero(m))
        s = model_zero_sum_squares(m, own, fn, &ss);
    else if (!own)
        s = m->be->ops->sum_squares(m->be, model_grad_type(m), model_grad_buf(m), m->spec.num_params, m->inv_scale,
                                    m->grad_mul, &ss);
    if (s) return s;
    *norm = sqrt(ss);
    return DT_OK;
}

dt_status dt_model_grad_norm(const dt_model *m, double *norm)
{
    static const char fn[] = "dt_model_grad_norm";
    /* Without a model no other rank can be told: this rank fails alone. */
    if (!m) return status_null_arg(fn, "m", "pass the model dt_model_create made");
    const dt_status own = norm ? DT_OK : status_null_arg(fn, "norm", "pass a double to receive the norm");
    double total;
    const dt_status s = grad_norm(m, own, fn, &total);
    if (!s) *norm = total;
    return s;
}

dt_status dt_model_clip_grad_norm(dt_model *m, double max_norm, double *norm)
{
    static const char fn[] = "dt_model_clip_grad_norm";
    if (!m) return status_null_arg(fn, "m", "pass the model dt_model_create made");
    dt_status s = !(max_norm > 0)
                      ? status_set_error(DT_ERR_INVALID_ARG,
                                         "maximum gradient norm %g must be > 0 (+inf: report the norm only)", max_norm)
                      : model_group_complete(m, fn);
    double total;
    if ((s = grad_norm(m, s, fn, &total))) return s; /* joins under ZeRO-1 even when s failed */
    if (norm) *norm = total;
    /* PyTorch: clip_coef = max_norm / (total_norm + 1e-6), in the gradients' fp32, applied when
     * below 1. A non-finite norm means the step is to be skipped; multiplying would only turn the
     * infs into NaNs. */
    if (!isfinite(total)) return DT_OK;
    const float coef = (float)(max_norm / (total + 1e-6));
    if (!(coef < 1.0f)) return DT_OK;
    if (m->g16 || m->pending32) {
        m->grad_mul *= coef; /* applied as dt_model_optimizer_step reads them */
        return DT_OK;
    }
    /* The unscale pass is the multiply (its non-finite count is not needed: the norm was finite). */
    size_t bad;
    return m->be->ops->scale_count(m->be, DT_F32, m->grads, m->spec.num_params, coef, &bad);
}

dt_status dt_model_set_clip_grad_norm(dt_model *m, double max_norm)
{
    if (!m) return status_null_arg("dt_model_set_clip_grad_norm", "m", "pass the model dt_model_create made");
    if (!(max_norm >= 0))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--clip-grad-norm %g must be >= 0 (0: off; inf: report the norm "
                                "without clipping)",
                                max_norm);
    m->clip_norm = max_norm;
    return DT_OK;
}
