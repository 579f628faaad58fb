/*
 * optimizer.c - SGD (momentum, weight decay) and AdamW over one flat fp32 parameter buffer: the
 * state (host arrays, and device copies for a GPU model), the step on the CPU or the GPU and from
 * 16-bit gradients, and the access checkpoints need.
 */
#include "runtime/model/model_internal.h"
#include "kernels/cast.h"
#include "kernels/devmem.h"
#include "base/status.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct dt_optimizer {
    dt_optim_config cfg;
    size_t n;
    float *s1, *s2; /* SGD: momentum; AdamW: m and v */
    int t;          /* steps taken */
    /* For a GPU model the state lives on the device (made from s1/s2 at the first step there);
     * s1/s2 are then not kept up to date. */
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
    if (c->kind == DT_OPTIM_ADAMW && (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) ||
                                      !(c->eps > 0)))
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
    devmem_free(1, o->d1);
    devmem_free(1, o->d2);
    free(o);
}

dt_status dt_optimizer_step(dt_optimizer *o, float *params, const float *grads)
{
    const kernel_ops *k = kernels_cpu();
    const dt_optim_config *c = &o->cfg;
    o->t++;
    if (c->kind == DT_OPTIM_SGD)
        k->sgd(params, grads, o->s1, o->n, c->lr, c->momentum, c->weight_decay, o->t == 1);
    else
        k->adamw(params, grads, o->s1, o->s2, o->n, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, o->t);
    return DT_OK;
}

float dt_optimizer_lr(const dt_optimizer *o) { return o->cfg.lr; }

dt_status dt_optimizer_set_lr(dt_optimizer *o, float lr)
{
    if (!(lr > 0) || !isfinite(lr))
        return status_set_error(DT_ERR_INVALID_ARG, "learning rate %g must be a positive finite number (the optimizer "
                            "keeps %g): check the schedule's --lr, --min-lr and factor", (double)lr, (double)o->cfg.lr);
    o->cfg.lr = lr;
    return DT_OK;
}

dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o)
{
    if (!m || !o) return status_set_error(DT_ERR_INVALID_ARG, "dt_model_optimizer_step: the model or optimizer is NULL");
    dt_status gs = model_group_complete(m, "dt_model_optimizer_step");
    if (gs) return gs;
    /* Each rank stepping on its own gradients makes the replicas drift apart while every printed
     * loss can still look right; say so at the first such step rather than never. */
    if (m->unreduced && !m->sync.allow_unreduced)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_model_optimizer_step: the gradients of the last backward were "
                            "not reduced across the %d ranks, so their parameters would drift apart: call "
                            "dt_model_sync_grads after dt_model_forward_backward (dt_model_train_step does both), "
                            "or set dt_sync_config.allow_unreduced = 1 if the loop skips the reduction on purpose",
                            dt_world_size(m->ctx));
    if (o->n != m->spec.num_params)
        return status_set_error(DT_ERR_INVALID_ARG, "the optimizer was made for %zu parameters, the model has %zu", o->n,
                            m->spec.num_params);
    if (m->cuda) {
        if (!o->on_device || o->upload) {
            dt_status s;
            if ((o->s1 && !o->d1 && (s = devmem_alloc(1, o->n * sizeof(float), "the optimizer state", (void **)&o->d1))) ||
                (o->s2 && !o->d2 && (s = devmem_alloc(1, o->n * sizeof(float), "the optimizer state", (void **)&o->d2))) ||
                (o->s1 && (s = devmem_to_device(1, o->d1, o->s1, o->n * sizeof(float)))) ||
                (o->s2 && (s = devmem_to_device(1, o->d2, o->s2, o->n * sizeof(float)))))
                return s;
            o->on_device = 1;
            o->upload = 0;
        }
        const dt_optim_config *c = &o->cfg;
        o->t++;
        if (c->kind == DT_OPTIM_SGD)
            m->ops->sgd(m->params, m->grads, o->d1, o->n, c->lr, c->momentum, c->weight_decay, o->t == 1);
        else
            m->ops->adamw(m->params, m->grads, o->d1, o->d2, o->n, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay,
                          o->t);
#ifdef DTRAIN_HAVE_CUDA
        if (cuda_ops_last_error()) {
            dt_status s = cuda_ops_last_error();
            cuda_ops_clear_error();
            return s;
        }
#endif
        return DT_OK;
    }
    if (!m->g16) return dt_optimizer_step(o, m->params, m->grads);
    /* 16-bit gradients: widen and unscale a block at a time into a buffer that stays in cache and
     * run the optimizer on the block (its update is elementwise, so blocks change nothing). */
    const kernel_ops *k = kernels_cpu();
    const dt_optim_config *c = &o->cfg;
    o->t++;
    enum { BLK = 2048 };
    float g[BLK];
    const float inv = m->inv_scale, clip = m->grad_mul;
    for (size_t off = 0; off < o->n; off += BLK) {
        const size_t cnt = o->n - off < BLK ? o->n - off : BLK;
        cpu_cast_16_to_f32(m->grad_t, m->g16 + off, g, cnt);
        if (inv != 1.0f)
            for (size_t i = 0; i < cnt; i++) g[i] *= inv;
        /* Clipping's coefficient after the unscale, as PyTorch multiplies the unscaled .grad. */
        if (clip != 1.0f)
            for (size_t i = 0; i < cnt; i++) g[i] *= clip;
        if (c->kind == DT_OPTIM_SGD)
            k->sgd(m->params + off, g, o->s1 ? o->s1 + off : NULL, cnt, c->lr, c->momentum, c->weight_decay, o->t == 1);
        else
            k->adamw(m->params + off, g, o->s1 + off, o->s2 + off, cnt, c->lr, c->beta1, c->beta2, c->eps,
                     c->weight_decay, o->t);
    }
    return DT_OK;
}

optimizer_view optimizer_state(const dt_optimizer *o)
{
    return (optimizer_view){.cfg = o->cfg, .t = o->t, .s1 = o->s1, .s2 = o->s2, .n1 = o->s1 ? o->n : 0,
                            .n2 = o->s2 ? o->n : 0};
}

void optimizer_set_t(dt_optimizer *o, int t) { o->t = t; }

dt_status optimizer_to_host(dt_optimizer *o)
{
    if (!o->on_device || o->upload) return DT_OK; /* the host copy is the current one */
    dt_status s;
    if ((o->s1 && (s = devmem_to_host(1, o->s1, o->d1, o->n * sizeof(float)))) ||
        (o->s2 && (s = devmem_to_host(1, o->s2, o->d2, o->n * sizeof(float)))))
        return s;
    return DT_OK;
}

void optimizer_host_changed(dt_optimizer *o) { o->upload = o->on_device; }
