/*
 * model_precision.c - a model's compute and gradient precision (dt_model_set_precision: the
 * activation pool made again for 16-bit storage, gradients kept in fp32 or 16 bits), unscaling
 * with the finite check after the allreduce, and the layer where non-finite gradients began. The
 * 16-bit passes themselves are model_amp.c.
 */
#include "runtime/model/model_internal.h"
#include "kernels/amp.h"
#include "kernels/devmem.h"
#include "base/status.h"
#include "runtime/test_hooks.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

dt_status dt_model_set_precision(dt_model *m, dt_dtype compute, dt_dtype grads)
{
    if (compute != DT_F32 && compute != DT_F16 && compute != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "precision %d must be DT_F32, DT_F16 or DT_BF16", (int)compute);
    if (m->cuda && grads != DT_F32)
        return status_set_error(DT_ERR_UNSUPPORTED, "on the GPU, gradients of a %s model are kept in fp32 in this "
                            "version (pass DT_F32; dtrain train does)", dt_dtype_name(compute));
    if (grads != DT_F32 && grads != compute)
        return status_set_error(DT_ERR_INVALID_ARG, "gradients of a %s model are kept in %s or fp32, not %s",
                            dt_dtype_name(compute), dt_dtype_name(compute), dt_dtype_name(grads));
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
    m->accum_pos = 0; /* the gradients are lost: an accumulation group starts again */
    const size_t np = m->spec.num_params ? m->spec.num_params : 1;
    if (compute != m->prec) {
        model_free_acts(m);
        m->prec = compute;
        if (!model_alloc_acts(m)) {
            char why[1024];
            snprintf(why, sizeof why, "%s", dt_last_error()); /* the bytes asked for, and free on a GPU */
            model_free_acts(m);
            m->prec = DT_F32;
            int ok = model_alloc_acts(m);
            return status_set_error(DT_ERR_NOMEM, "%s (%s at batch %d)%s", why, dt_dtype_name(compute), m->max_batch,
                                ok ? "; the model stays in fp32" : "");
        }
    }
    const dt_dtype have = m->g16 ? m->grad_t : DT_F32;
    if (grads != have) {
        if (grads == DT_F32) {
            float *g = calloc(np, sizeof *g);
            if (!g) return status_set_error(DT_ERR_NOMEM, "out of memory for fp32 gradients (%zu MiB)", (np * 4) >> 20);
            free(m->g16);
            m->g16 = NULL;
            m->grads = g;
        } else {
            uint16_t *g = calloc(np, sizeof *g);
            if (!g) return status_set_error(DT_ERR_NOMEM, "out of memory for 16-bit gradients (%zu MiB)", (np * 2) >> 20);
            free(m->grads); /* from fp32, */
            free(m->g16);   /* or from the other 16-bit type */
            m->grads = NULL;
            m->g16 = g;
        }
    }
    m->grad_t = grads;
    return model_sync_rebind(m);
}

dt_dtype dt_model_precision(const dt_model *m) { return m->prec; }
dt_dtype dt_model_grad_dtype(const dt_model *m) { return m->g16 ? m->grad_t : DT_F32; }

dt_status dt_model_unscale_grads(dt_model *m, float inv_scale, int *found_inf)
{
    if (!(inv_scale > 0) || !isfinite(inv_scale))
        return status_set_error(DT_ERR_INVALID_ARG, "gradient unscale factor %g must be a positive number",
                            (double)inv_scale);
    dt_status gs = model_group_complete(m, "dt_model_unscale_grads");
    if (gs) return gs;
    const size_t n = m->spec.num_params;
    size_t bad;
    if (m->g16) {
        bad = cpu_count_nonfinite16(m->grad_t, m->g16, n);
        m->inv_scale = inv_scale; /* applied by dt_model_optimizer_step as it widens */
#ifdef DTRAIN_HAVE_CUDA
    } else if (m->cuda) {
        bad = inv_scale == 1.0f ? cuda_count_nonfinite(m->grads, n) : cuda_unscale_count_nonfinite(m->grads, n, inv_scale);
#endif
    } else {
        bad = inv_scale == 1.0f ? cpu_count_nonfinite(m->grads, n) : cpu_unscale_count_nonfinite(m->grads, n, inv_scale);
    }
    *found_inf = bad != 0;
    return DT_OK;
}

void dt_model_set_nonfinite_check(dt_model *m, int on) { m->check_local = on != 0; }
int dt_model_nonfinite_layer(const dt_model *m)
{
    if (!m->dflags || !m->check_local) return m->bad_layer;
    /* A GPU model flagged layers on the device: the first in backward order of the last pass. */
    const int n = m->spec.n;
    int *f = malloc((size_t)n * sizeof *f), bad = -1;
    if (f && devmem_to_host(1, f, m->dflags, (size_t)n * sizeof *f) == DT_OK)
        for (int i = n - 1; i >= 0 && bad < 0; i--)
            if (f[i] == m->fb_count && m->fb_count > 0) bad = i;
    free(f);
    return bad;
}
void model_test_inject_inf(dt_model *m) { m->inject_inf = 1; }
