/*
 * model_precision.c - a model's compute and gradient precision (dt_model_set_precision: the
 * activation pool made again for 16-bit storage, gradients kept in fp32 or 16 bits), unscaling
 * with the finite check after the allreduce, and the layer where non-finite gradients began. The
 * passes themselves are model_pass.c.
 */
#include "runtime/model/model_internal.h"
#include "base/status.h"
#include "collectives/rank_verdict.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* This rank's verdict on the pair, before the ranks compare it. */
static dt_status precision_check(const backend *be, dt_dtype compute, dt_dtype grads)
{
    if (compute != DT_F32 && compute != DT_F16 && compute != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "precision %d must be DT_F32, DT_F16 or DT_BF16", (int)compute);
    if (grads != DT_F32 && grads != DT_F16 && grads != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "gradient type %d must be DT_F32, DT_F16 or DT_BF16", (int)grads);
    if (!be->ops->grads16 && grads != DT_F32)
        return status_set_error(DT_ERR_UNSUPPORTED,
                                "on the %s backend, gradients of a %s model are kept in fp32 in "
                                "this version (pass DT_F32; dtrain train does)",
                                be->ops->name, dt_dtype_name(compute));
    if (grads != DT_F32 && grads != compute) return model_grads_type_error(compute, grads);
    return DT_OK;
}

/* The pair as one integer for the ranks' comparison (each type is below 4), and back as text. */
static int precision_code(dt_dtype compute, dt_dtype grads) { return (int)compute * 4 + (int)grads; }
static void precision_text(int code, char *buf, size_t n)
{
    snprintf(buf, n, "%s compute with %s gradients", dt_dtype_name((dt_dtype)(code / 4)),
             dt_dtype_name((dt_dtype)(code % 4)));
}

dt_status dt_model_set_precision(dt_model *m, dt_dtype compute, dt_dtype grads)
{
    static const char fn[] = "dt_model_set_precision";
    if (!m) return status_null_arg(fn, "m", "pass the model dt_model_create made");
    backend *be = m->be;
    /* A rank in another precision would reduce buffers of another type or size than its peers
     * (the allreduce then pairs wrong bytes or hangs): the ranks compare the pair before any of
     * them changes, and a rank whose own arguments fail still joins, so none waits for it. */
    dt_status own = precision_check(be, compute, grads);
    own = rank_agree_status(m->ctx, own, own ? 0 : precision_code(compute, grads), fn, "precision", precision_text,
                            "; no rank changed its precision");
    if (own) return own;
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
    model_graph_drop(m); /* they hold the activation and gradient buffers, which may change here */
    m->accum_pos = 0;    /* the gradients are lost: an accumulation group starts again */
    const size_t np = m->spec.num_params ? m->spec.num_params : 1;
    /* The new gradient buffer first, then the activations: a failure of either leaves the model in
     * the precision pair it had (never a mix the checks above refuse, such as fp16 compute with
     * bf16 gradients), with its activations made again when they were given up for the new ones. */
    const dt_dtype have = model_grad_type(m);
    void *g = NULL;
    if (grads != have) {
        dt_status s = be->ops->alloc(be, np * (grads == DT_F32 ? 4 : 2),
                                     grads == DT_F32 ? "fp32 gradients" : "16-bit gradients", &g);
        if (s) return s;
    }
    if (compute != m->prec) {
        const dt_dtype was = m->prec;
        model_free_acts(m);
        m->prec = compute;
        if (!model_alloc_acts(m)) {
            status_kept why; /* the bytes asked for, and free on a GPU */
            status_keep(&why);
            model_free_acts(m);
            if (g) be->ops->free(be, g);
            m->prec = was;
            const int ok = model_alloc_acts(m);
            return status_set_error(DT_ERR_NOMEM, "%s (%s at batch %d)%s%s", why.msg, dt_dtype_name(compute),
                                    m->max_batch,
                                    ok ? "; the model stays in "
                                       : "; the model has no activation memory "
                                         "left (free it)",
                                    ok ? dt_dtype_name(was) : "");
        }
    }
    if (g) {
        /* The old gradient buffer goes back to the backend it came from. */
        be->ops->free(be, m->grads); /* from fp32, */
        be->ops->free(be, m->g16);   /* or from the other 16-bit type */
        m->grads = NULL;
        m->g16 = NULL;
        if (grads == DT_F32)
            m->grads = g;
        else
            m->g16 = g;
    }
    m->grad_t = grads;
    return model_sync_rebind(m);
}

dt_dtype dt_model_precision(const dt_model *m) { return m ? m->prec : DT_F32; }
dt_dtype dt_model_grad_dtype(const dt_model *m) { return m && m->g16 ? m->grad_t : DT_F32; }

dt_status model_grads_type_error(dt_dtype compute, dt_dtype grads)
{
    if (compute == DT_F32)
        return status_set_error(DT_ERR_INVALID_ARG, "gradients of an fp32 model are kept in fp32, not %s",
                                dt_dtype_name(grads));
    return status_set_error(DT_ERR_INVALID_ARG, "gradients of a %s model are kept in %s or fp32, not %s",
                            dt_dtype_name(compute), dt_dtype_name(compute), dt_dtype_name(grads));
}

/* The finite check and unscale. 16-bit gradients are only checked: the unscale is applied by
 * dt_model_optimizer_step as it reads them (dividing in 16 bits would flush the small ones to
 * zero). fp32 ones are multiplied in the check's pass, or with `defer` (dt_model_train_step) only
 * checked too, their unscale left to the optimizer step and clipping's norm like 16-bit ones: a
 * read of every gradient instead of a read and a write. Deferring needs inv_scale <= 1, where a
 * finite gradient times it stays finite, so the count is the same either way. */
static dt_status unscale(dt_model *m, float inv_scale, int *found_inf, int defer, dt_status own)
{
    static const char fn[] = "dt_model_unscale_grads";
    /* own: this rank's failure so far; with its own checks below it still joins the count's sum
     * over the ranks under ZeRO-1, so no rank waits for it. Elsewhere a failure returns at once. */
    if (!own && (!(inv_scale > 0) || !isfinite(inv_scale)))
        own = status_set_error(DT_ERR_INVALID_ARG, "gradient unscale factor %g must be a positive number",
                               (double)inv_scale);
    if (!own) own = model_group_complete(m, fn);
    size_t bad = 0;
    const int pending = !own && (m->g16 || (defer && model_unscale_can_defer(m, inv_scale)));
    const float mul = pending ? 1.0f : inv_scale;
    /* ZeRO-1: only the owned slices are reduced; their counts are summed over the ranks. */
    dt_status s = own;
    if (model_zero(m))
        s = model_zero_scale_count(m, mul, own, fn, &bad);
    else if (!own)
        s = m->be->ops->scale_count(m->be, model_grad_type(m), model_grad_buf(m), m->spec.num_params, mul, &bad);
    if (s) return s;
    if (pending) m->inv_scale = inv_scale;
    *found_inf = bad != 0;
    return DT_OK;
}

dt_status dt_model_unscale_grads(dt_model *m, float inv_scale, int *found_inf)
{
    /* Without a model no other rank can be told: this rank fails alone. */
    if (!m) return status_null_arg("dt_model_unscale_grads", "m", "pass the model dt_model_create made");
    const dt_status own = found_inf ? DT_OK
                                    : status_null_arg("dt_model_unscale_grads", "found_inf",
                                                      "pass an int to receive the finite check's verdict");
    return unscale(m, inv_scale, found_inf, 0, own);
}

dt_status model_unscale_deferred(dt_model *m, float inv_scale, int *found_inf)
{
    return unscale(m, inv_scale, found_inf, 1, DT_OK);
}

void dt_model_set_nonfinite_check(dt_model *m, int mode)
{
    if (!m) return;
    m->check_local = mode == DT_NONFINITE_CHECK_AT_RISK ? mode : mode ? DT_NONFINITE_CHECK_ON : DT_NONFINITE_CHECK_OFF;
}
int dt_model_nonfinite_layer(const dt_model *m)
{
    if (!m || !m->check_local || m->fb_count == 0) return -1;
    /* Each layer's flag holds the pass of the current group that first found it non-finite. The
     * layer found first: the earliest pass, and in it the first layer backward reached (the
     * highest index). */
    const int n = m->spec.n;
    int *f = malloc((size_t)(n ? n : 1) * sizeof *f), bad = -1;
    if (f && m->be->ops->to_host(m->be, f, m->dflags, (size_t)n * sizeof *f) == DT_OK)
        for (int i = n - 1; i >= 0; i--)
            if (f[i] >= m->group_pass && (bad < 0 || f[i] < f[bad])) bad = i;
    free(f);
    return bad;
}
void model_test_inject_inf(dt_model *m) { m->inject_inf = 1; }
