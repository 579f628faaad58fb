/*
 * optimizer.c - SGD (momentum, weight decay) and AdamW over one flat fp32 parameter buffer: the
 * state (host arrays, and copies on the model's backend when its memory is not host memory), the
 * step through the backend's table, from fp32 or 16-bit gradients, and the access checkpoints need.
 */
#include "runtime/model/model_internal.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct dt_optimizer {
    dt_optim_config cfg;
    size_t n;
    float *s1, *s2; /* SGD: momentum; AdamW: m and v */
    int t;          /* steps taken */
    /* For a model on a backend without host memory the state lives there (made from s1/s2 at the
     * first step, on backend be); s1/s2 are then not kept up to date. */
    backend *be;
    float *d1, *d2;
    int on_device;
    int upload; /* s1/s2 were changed on the host (a checkpoint was loaded): copy them up again */
};

void dt_optim_defaults(dt_optim_config *c)
{
    memset(c, 0, sizeof *c);
    c->kind = DT_OPTIM_SGD;
    c->lr = 0.01f;
    c->momentum = 0.9f;
    c->weight_decay = 0.0f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
}

dt_status dt_optimizer_create(const dt_optim_config *c, size_t n, dt_optimizer **out)
{
    *out = NULL;
    if (c->kind != DT_OPTIM_SGD && c->kind != DT_OPTIM_ADAMW)
        return status_set_error(DT_ERR_INVALID_ARG, "unknown optimizer %d (use sgd or adamw)", (int)c->kind);
    if (!(c->lr > 0) || !isfinite(c->lr))
        return status_set_error(DT_ERR_INVALID_ARG, "learning rate %g must be a positive number", (double)c->lr);
    if (!(c->momentum >= 0 && c->momentum < 1))
        return status_set_error(DT_ERR_INVALID_ARG, "momentum %g must be in [0, 1)", (double)c->momentum);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return status_set_error(DT_ERR_INVALID_ARG, "weight decay %g must be >= 0", (double)c->weight_decay);
    if (c->kind == DT_OPTIM_ADAMW &&
        (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) || !(c->eps > 0)))
        return status_set_error(DT_ERR_INVALID_ARG, "AdamW needs betas in [0, 1) and eps > 0 (got %g, %g, %g)",
                                (double)c->beta1, (double)c->beta2, (double)c->eps);
    dt_optimizer *o = calloc(1, sizeof *o);
    if (!o) return status_set_error(DT_ERR_NOMEM, "out of memory for the optimizer");
    o->cfg = *c;
    o->n = n;
    int need1 = c->kind == DT_OPTIM_ADAMW || c->momentum > 0, need2 = c->kind == DT_OPTIM_ADAMW;
    if (need1) o->s1 = calloc(n ? n : 1, sizeof(float));
    if (need2) o->s2 = calloc(n ? n : 1, sizeof(float));
    if ((need1 && !o->s1) || (need2 && !o->s2)) {
        dt_optimizer_free(o);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the optimizer state (%zu MiB)",
                                (n * 4 * (size_t)(need1 + need2)) >> 20);
    }
    *out = o;
    return DT_OK;
}

void dt_optimizer_free(dt_optimizer *o)
{
    if (!o) return;
    free(o->s1);
    free(o->s2);
    if (o->be) {
        o->be->ops->free(o->be, o->d1);
        o->be->ops->free(o->be, o->d2);
    }
    free(o);
}

/* One step of o's rule over n parameters on backend be, state s1/s2 (of be) at offset off; the
 * step count t is the caller's. */
static dt_status step_on(backend *be, const dt_optimizer *o, float *s1, float *s2, size_t off, float *p, const float *g,
                         size_t n)
{
    const dt_optim_config *c = &o->cfg;
    if (c->kind == DT_OPTIM_SGD)
        return be->ops->sgd(be, p, g, s1 ? s1 + off : NULL, n, c->lr, c->momentum, c->weight_decay, o->t == 1);
    return be->ops->adamw(be, p, g, s1 + off, s2 + off, n, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, o->t);
}

dt_status dt_optimizer_step(dt_optimizer *o, float *params, const float *grads)
{
    o->t++;
    return step_on(backend_cpu(), o, o->s1, o->s2, 0, params, grads, o->n);
}

float dt_optimizer_lr(const dt_optimizer *o) { return o->cfg.lr; }

dt_status dt_optimizer_set_lr(dt_optimizer *o, float lr)
{
    if (!(lr > 0) || !isfinite(lr))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "learning rate %g must be a positive finite number (the optimizer "
                                "keeps %g): check the schedule's --lr, --min-lr and factor",
                                (double)lr, (double)o->cfg.lr);
    o->cfg.lr = lr;
    return DT_OK;
}

dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o)
{
    if (!m || !o)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_model_optimizer_step: the model or optimizer is NULL");
    dt_status gs = model_group_complete(m, "dt_model_optimizer_step");
    if (gs) return gs;
    /* Each rank stepping on its own gradients makes the replicas drift apart while every printed
     * loss can still look right; say so at the first such step rather than never. */
    if (m->unreduced && !m->sync.allow_unreduced)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_model_optimizer_step: the gradients of the last backward were "
                                "not reduced across the %d ranks, so their parameters would drift apart: call "
                                "dt_model_sync_grads after dt_model_forward_backward (dt_model_train_step does both), "
                                "or set dt_sync_config.allow_unreduced = 1 if the loop skips the reduction on purpose",
                                dt_world_size(m->ctx));
    if (o->n != m->spec.num_params)
        return status_set_error(DT_ERR_INVALID_ARG, "the optimizer was made for %zu parameters, the model has %zu",
                                o->n, m->spec.num_params);
    backend *be = m->be;
    float *s1 = o->s1, *s2 = o->s2;
    if (!be->ops->host_memory) {
        if (o->be && o->be != be)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "dt_model_optimizer_step: the optimizer's state is on the %s "
                                    "backend, the model on %s: use one optimizer per model",
                                    o->be->ops->name, be->ops->name);
        if (!o->on_device || o->upload) {
            const size_t bytes = o->n * sizeof(float);
            dt_status s;
            o->be = be;
            if ((o->s1 && !o->d1 && (s = be->ops->alloc(be, bytes, "the optimizer state", (void **)&o->d1))) ||
                (o->s2 && !o->d2 && (s = be->ops->alloc(be, bytes, "the optimizer state", (void **)&o->d2))) ||
                (o->s1 && (s = be->ops->to_device(be, o->d1, o->s1, bytes))) ||
                (o->s2 && (s = be->ops->to_device(be, o->d2, o->s2, bytes))))
                return s;
            o->on_device = 1;
            o->upload = 0;
        }
        s1 = o->d1;
        s2 = o->d2;
    }
    o->t++;
    if (!m->g16) return step_on(be, o, s1, s2, 0, m->params, m->grads, o->n);
    /* 16-bit gradients: widened and unscaled a block at a time into a buffer that stays in cache,
     * the optimizer run on the block (its update is elementwise, so blocks change nothing).
     * Clipping's coefficient comes after the unscale, as PyTorch multiplies the unscaled .grad. */
    for (size_t off = 0; off < o->n; off += MODEL_GBLK) {
        const size_t cnt = o->n - off < MODEL_GBLK ? o->n - off : MODEL_GBLK;
        dt_status s = be->ops->widen_scaled(be, m->grad_t, m->g16 + off, m->gblk, cnt, m->inv_scale, m->grad_mul);
        if (!s) s = step_on(be, o, s1, s2, off, m->params + off, m->gblk, cnt);
        if (s) return s;
    }
    return DT_OK;
}

optimizer_view optimizer_state(const dt_optimizer *o)
{
    return (optimizer_view){
        .cfg = o->cfg, .t = o->t, .s1 = o->s1, .s2 = o->s2, .n1 = o->s1 ? o->n : 0, .n2 = o->s2 ? o->n : 0};
}

void optimizer_set_t(dt_optimizer *o, int t) { o->t = t; }

dt_status optimizer_to_host(dt_optimizer *o)
{
    if (!o->on_device || o->upload) return DT_OK; /* the host copy is the current one */
    dt_status s;
    if ((o->s1 && (s = o->be->ops->to_host(o->be, o->s1, o->d1, o->n * sizeof(float)))) ||
        (o->s2 && (s = o->be->ops->to_host(o->be, o->s2, o->d2, o->n * sizeof(float)))))
        return s;
    return DT_OK;
}

void optimizer_host_changed(dt_optimizer *o) { o->upload = o->on_device; }
