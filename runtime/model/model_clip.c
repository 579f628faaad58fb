/*
 * model_clip.c - the global L2 norm of a model's gradients and clipping them to a maximum norm
 * (PyTorch's torch.nn.utils.clip_grad_norm_), for dt_model_train_step and custom loops.
 *
 * The norm is taken after the allreduce, so every rank holds the same reduced gradients and needs
 * no communication to agree on it; the sum of squares runs in double in a fixed order (eight
 * interleaved lanes on the CPU, a fixed grid and tree on the GPU) so the bits agree as well, and
 * every rank takes the same clipping decision. It reads the gradients the way the optimizer step
 * will: fp32 ones as they are (dt_model_unscale_grads unscaled them in place), 16-bit ones widened
 * and multiplied by the pending unscale and clip factors, in the optimizer's order.
 */
#include "runtime/model/model_internal.h"
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "base/status.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif

#include <math.h>

enum { BLK = 2048 };

dt_status dt_model_grad_norm(const dt_model *m, double *norm)
{
    if (!m || !norm) return status_set_error(DT_ERR_INVALID_ARG, "dt_model_grad_norm: the model or norm is NULL");
    const size_t n = m->spec.num_params;
    double lane[CPU_SUMSQ_LANES] = {0};
    if (m->g16) {
        /* Widened a block at a time into a buffer that stays in cache, scaled in float exactly as
         * dt_model_optimizer_step will scale them before using them. */
        float g[BLK];
        for (size_t off = 0; off < n; off += BLK) {
            const size_t cnt = n - off < BLK ? n - off : BLK;
            cpu_cast_16_to_f32(m->grad_t, m->g16 + off, g, cnt);
            if (m->inv_scale != 1.0f)
                for (size_t i = 0; i < cnt; i++) g[i] *= m->inv_scale;
            if (m->grad_mul != 1.0f)
                for (size_t i = 0; i < cnt; i++) g[i] *= m->grad_mul;
            /* Blocks are multiples of LANES, so lanes line up with the fp32 path's. */
            cpu_sumsq_lanes(g, cnt, lane);
        }
        *norm = sqrt(cpu_sumsq_total(lane));
        return DT_OK;
    }
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        double ss = 0.0;
        dt_status s = cuda_sum_squares(m->grads, n, &ss);
        if (s) {
            cuda_ops_clear_error();
            return s;
        }
        *norm = sqrt(ss);
        return DT_OK;
    }
#endif
    cpu_sumsq_lanes(m->grads, n, lane);
    *norm = sqrt(cpu_sumsq_total(lane));
    return DT_OK;
}

dt_status dt_model_clip_grad_norm(dt_model *m, double max_norm, double *norm)
{
    if (!m) return status_set_error(DT_ERR_INVALID_ARG, "dt_model_clip_grad_norm: the model is NULL");
    if (!(max_norm > 0))
        return status_set_error(DT_ERR_INVALID_ARG, "maximum gradient norm %g must be > 0 (+inf: report the norm only)",
                            max_norm);
    dt_status s = model_group_complete(m, "dt_model_clip_grad_norm");
    if (s) return s;
    double total;
    if ((s = dt_model_grad_norm(m, &total))) return s;
    if (norm) *norm = total;
    /* PyTorch: clip_coef = max_norm / (total_norm + 1e-6), in the gradients' fp32, applied when
     * below 1. A non-finite norm means the step is to be skipped; multiplying would only turn the
     * infs into NaNs. */
    if (!isfinite(total)) return DT_OK;
    const float coef = (float)(max_norm / (total + 1e-6));
    if (!(coef < 1.0f)) return DT_OK;
    if (m->g16) {
        m->grad_mul *= coef; /* applied as dt_model_optimizer_step widens them */
        return DT_OK;
    }
    const size_t n = m->spec.num_params;
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        /* The unscale kernel is the multiply (its non-finite count is not needed: the norm was finite). */
        (void)cuda_unscale_count_nonfinite(m->grads, n, coef);
        if ((s = cuda_ops_last_error())) cuda_ops_clear_error();
        return s;
    }
#endif
    (void)cpu_unscale_count_nonfinite(m->grads, n, coef);
    return DT_OK;
}

dt_status dt_model_set_clip_grad_norm(dt_model *m, double max_norm)
{
    if (!(max_norm >= 0))
        return status_set_error(DT_ERR_INVALID_ARG, "--clip-grad-norm %g must be >= 0 (0: off; inf: report the norm "
                            "without clipping)", max_norm);
    m->clip_norm = max_norm;
    return DT_OK;
}
