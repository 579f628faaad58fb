/*
 * optimizer.c - SGD (momentum, weight decay) and AdamW over one flat fp32 parameter buffer: the
 * state (host arrays, and copies on the model's backend when its memory is not host memory), the
 * step through the backend's table, from fp32 or 16-bit gradients, ZeRO-1's sharded state (host or
 * device), and the access checkpoints need.
 */
#include "runtime/model/model_internal.h"
#include "collectives/reducer_internal.h"
#include "base/mem_limit.h"
#include "base/status.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dt_optimizer {
    dt_optim_config cfg;
    size_t n;
    float *s1, *s2; /* SGD: momentum; AdamW: m and v */
    int t;          /* steps taken, up to INT_MAX (optimizer_count_step) */
    /* For a model on a backend without host memory the state lives there (made from s1/s2 at the
     * first step, on backend be); s1/s2 are then not kept up to date. */
    backend *be;
    float *d1, *d2;
    int on_device;
    int upload; /* s1/s2 were changed on the host (a checkpoint was loaded): copy them up again */
    /* ZeRO-1 (optimizer_shard): s1/s2 hold only the slices [seg_off[i], seg_off[i] + seg_cnt[i]) of
     * the flat buffer that this rank owns, back to back (nstate floats); nseg 0 when not sharded
     * (nstate is n). While a checkpoint reads or writes the state, f1/f2 hold it at full size. */
    size_t nstate;
    size_t *seg_off, *seg_cnt;
    int nseg;
    float *f1, *f2;
};

static dt_status optimizer_step_shard(dt_model *m, dt_optimizer *o);

/* The step counter stops at INT_MAX (a checkpoint keeps it as an int32) instead of wrapping
 * negative, which made AdamW's bias correction NaN and the next checkpoint a file every resume
 * refuses (optim_t < 0). Stopping there is exact: SGD reads only t == 1, and a float beta is at
 * most 1 - 2^-24, whose power at 2^31 - 1 is below e^-128, so 1 - beta^t is 1 in double for any
 * t from there on. */
static int next_t(int t) { return t < INT_MAX ? t + 1 : INT_MAX; }
static void optimizer_count_step(dt_optimizer *o) { o->t = next_t(o->t); }
static dt_status step_slice(backend *be, const dt_optimizer *o, size_t at, float *p, const optim_grads *g, size_t cnt,
                            dt_dtype copy_t, uint16_t *copy);

void dt_optim_defaults(dt_optim_config *c)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->kind = DT_OPTIM_SGD;
    c->lr = 0.01f;
    c->momentum = 0.9f;
    c->weight_decay = 0.0f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
}

/* The ranges are written so that NaN fails every one of them; inf fails the explicit isfinite. */
dt_status optimizer_check_config(const dt_optim_config *c)
{
    if (c->kind != DT_OPTIM_SGD && c->kind != DT_OPTIM_ADAMW)
        return status_set_error(DT_ERR_INVALID_ARG, "unknown optimizer %d (use sgd or adamw)", (int)c->kind);
    if (!(c->lr > 0) || !isfinite(c->lr))
        return status_set_error(DT_ERR_INVALID_ARG, "learning rate %g must be a positive finite number", (double)c->lr);
    if (!(c->momentum >= 0 && c->momentum < 1))
        return status_set_error(DT_ERR_INVALID_ARG, "momentum %g must be in [0, 1)", (double)c->momentum);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return status_set_error(DT_ERR_INVALID_ARG, "weight decay %g must be a finite number >= 0",
                                (double)c->weight_decay);
    if (c->kind != DT_OPTIM_ADAMW) return DT_OK;
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        return status_set_error(DT_ERR_INVALID_ARG, "AdamW's betas %g and %g must be in [0, 1)", (double)c->beta1,
                                (double)c->beta2);
    /* inf would make every update 0 (m / inf) and NaN every parameter NaN, silently. */
    if (!(c->eps > 0) || !isfinite(c->eps))
        return status_set_error(DT_ERR_INVALID_ARG, "AdamW's eps %g must be a positive finite number (default 1e-8)",
                                (double)c->eps);
    return DT_OK;
}

/* The bytes of `arrays` fp32 arrays of n elements, for a message: exact, or said to pass what a
 * size_t counts (n * 4 * arrays would wrap to a small number, "0 MiB" at 2^62 elements). */
static void state_size_text(size_t n, int arrays, char *buf, size_t len)
{
    const size_t per = sizeof(float) * (size_t)arrays;
    if (n > SIZE_MAX / per)
        snprintf(buf, len, "%d x %zu floats: more than 16 EiB", arrays, n);
    else
        snprintf(buf, len, "%zu bytes, %.1f MiB", n * per, (double)(n * per) / 1048576.0);
}

dt_status dt_optimizer_create(const dt_optim_config *c, size_t n, dt_optimizer **out)
{
    if (!out) return status_null_arg("dt_optimizer_create", "out", "pass a dt_optimizer * to receive the optimizer");
    *out = NULL;
    if (!c) return status_null_arg("dt_optimizer_create", "c", "pass a dt_optim_config filled by dt_optim_defaults");
    const dt_status cs = optimizer_check_config(c);
    if (cs) return cs;
    /* Every model has parameters (its last layer is fc): an optimizer over none is a mistake, such
     * as the count of a model that failed to be made (dt_model_num_params(NULL) is 0). */
    if (n == 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_optimizer_create: n is 0: pass the number of parameters it updates "
                                "(dt_model_num_params), at least 1");
    const int need1 = c->kind == DT_OPTIM_ADAMW || c->momentum > 0, need2 = c->kind == DT_OPTIM_ADAMW;
    /* An array past PTRDIFF_MAX bytes is refused before any allocation: no allocator can give it
     * (and a sanitizer's aborts the process instead of returning NULL). */
    if ((need1 || need2) && n > (size_t)PTRDIFF_MAX / sizeof(float)) {
        char size[96];
        state_size_text(n, need1 + need2, size, sizeof size);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the optimizer state (%s)", size);
    }
    dt_optimizer *o = calloc(1, sizeof *o);
    if (!o) return status_set_error(DT_ERR_NOMEM, "out of memory for the optimizer");
    o->cfg = *c;
    o->n = n;
    o->nstate = n;
    if (need1) o->s1 = calloc(n ? n : 1, sizeof(float));
    if (need2) o->s2 = calloc(n ? n : 1, sizeof(float));
    if ((need1 && !o->s1) || (need2 && !o->s2)) {
        dt_optimizer_free(o);
        char size[96], lim[160];
        state_size_text(n, need1 + need2, size, sizeof size);
        mem_limit_text(lim, sizeof lim);
        return status_set_error(DT_ERR_NOMEM,
                                "out of host memory for the optimizer state (%s)%s: %suse a smaller model, or an "
                                "optimizer with less state (sgd without momentum keeps none)",
                                size, lim, lim[0] ? "raise the limit, or " : "");
    }
    *out = o;
    return DT_OK;
}

void dt_optimizer_free(dt_optimizer *o)
{
    if (!o) return;
    free(o->s1);
    free(o->s2);
    free(o->f1);
    free(o->f2);
    free(o->seg_off);
    free(o->seg_cnt);
    if (o->be) {
        o->be->ops->free(o->be, o->d1);
        o->be->ops->free(o->be, o->d2);
    }
    free(o);
}

/* One step of o's rule over n parameters on backend be, state s1/s2 (of be) at offset off; the
 * step count t is the caller's. copy (NULL: none) receives the updated p rounded to copy_t in the
 * same pass (backend.h). */
static dt_status step_copy(backend *be, const dt_optimizer *o, float *s1, float *s2, size_t off, float *p,
                           const optim_grads *g, size_t n, dt_dtype copy_t, uint16_t *copy)
{
    const dt_optim_config *c = &o->cfg;
    if (c->kind == DT_OPTIM_SGD)
        return be->ops->sgd(be, p, g, s1 ? s1 + off : NULL, n, c->lr, c->momentum, c->weight_decay, o->t == 1, copy_t,
                            copy);
    return be->ops->adamw(be, p, g, s1 + off, s2 + off, n, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, o->t,
                          copy_t, copy);
}

static dt_status step_on(backend *be, const dt_optimizer *o, float *s1, float *s2, size_t off, float *p,
                         const optim_grads *g, size_t n)
{
    return step_copy(be, o, s1, s2, off, p, g, n, DT_F32, NULL);
}

/* g from element off on. */
static optim_grads grads_from(const optim_grads *g, size_t off)
{
    optim_grads r = *g;
    r.g = (const char *)g->g + off * (g->t == DT_F32 ? sizeof(float) : sizeof(uint16_t));
    return r;
}

dt_status dt_optimizer_step(dt_optimizer *o, float *params, const float *grads)
{
    static const char fn[] = "dt_optimizer_step";
    if (!o) return status_null_arg(fn, "o", "pass the optimizer dt_optimizer_create made");
    if (!params || !grads) {
        /* An optimizer over 0 parameters reads and writes nothing. */
        if (o->n && !params) return status_null_arg(fn, "params", "pass the optimizer's n floats of parameters");
        if (o->n && !grads) return status_null_arg(fn, "grads", "pass the optimizer's n floats of gradients");
    }
    if (o->nseg)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_optimizer_step: this optimizer's state is sharded across ranks (--zero 1) and "
                                "holds only this rank's slices: step it through dt_model_optimizer_step");
    optimizer_count_step(o);
    const optim_grads g = {grads, DT_F32, 1.0f, 1.0f, NULL, NULL};
    return step_on(backend_cpu(), o, o->s1, o->s2, 0, params, &g, o->n);
}

float dt_optimizer_lr(const dt_optimizer *o) { return o ? o->cfg.lr : 0.0f; }

dt_status dt_optimizer_set_lr(dt_optimizer *o, float lr)
{
    if (!o) return status_null_arg("dt_optimizer_set_lr", "o", "pass the optimizer dt_optimizer_create made");
    if (!(lr > 0) || !isfinite(lr))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "learning rate %g must be a positive finite number (the optimizer "
                                "keeps %g): check the schedule's --lr, --min-lr and factor",
                                (double)lr, (double)o->cfg.lr);
    o->cfg.lr = lr;
    return DT_OK;
}

/* For a model whose backend's memory is not host memory: the state there (nstate floats each), made
 * or refreshed from s1/s2 at the first step and after a checkpoint load. */
static dt_status state_to_device(dt_optimizer *o, backend *be)
{
    if (o->be && o->be != be)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_model_optimizer_step: the optimizer's state is on the %s "
                                "backend, the model on %s: use one optimizer per model",
                                o->be->ops->name, be->ops->name);
    if (o->on_device && !o->upload) return DT_OK;
    const size_t bytes = (o->nstate ? o->nstate : 1) * sizeof(float);
    dt_status s;
    o->be = be;
    if ((o->s1 && !o->d1 && (s = be->ops->alloc(be, bytes, "the optimizer state", (void **)&o->d1))) ||
        (o->s2 && !o->d2 && (s = be->ops->alloc(be, bytes, "the optimizer state", (void **)&o->d2))) ||
        (o->s1 && (s = be->ops->to_device(be, o->d1, o->s1, o->nstate * sizeof(float)))) ||
        (o->s2 && (s = be->ops->to_device(be, o->d2, o->s2, o->nstate * sizeof(float)))))
        return s;
    o->on_device = 1;
    o->upload = 0;
    return DT_OK;
}

/* What a step of o over m's parameters needs, whole or layer by layer. */
static dt_status step_checks(const dt_model *m, const dt_optimizer *o)
{
    if (!m) return status_null_arg("dt_model_optimizer_step", "m", "pass the model dt_model_create made");
    if (!o) return status_null_arg("dt_model_optimizer_step", "o", "pass the model's optimizer (dt_optimizer_create)");
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
    return DT_OK;
}

dt_status optimizer_layers_begin(dt_model *m, dt_optimizer *o)
{
    dt_status s = step_checks(m, o);
    if (s) return s;
    if (o->nseg || model_zero(m))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "a step layer by layer needs the whole optimizer state on this rank (not --zero 1)");
    if (!m->be->ops->host_memory && (s = state_to_device(o, m->be))) return s;
    /* The 16-bit copy stays current: each layer's step writes its part with its parameters (a
     * failed step marks it stale, dt_model_train_step). Marking it stale here made the forward
     * before the steps cast every parameter again, each step. */
    optimizer_count_step(o);
    return DT_OK;
}

dt_status optimizer_step_layer(dt_model *m, dt_optimizer *o, size_t off, size_t cnt)
{
    const optim_grads g = model_optim_grads(m), gs = grads_from(&g, off);
    uint16_t *copy = model_step16_target(m); /* the spare while layers step before their data gradients */
    return step_slice(m->be, o, off, m->params + off, &gs, cnt, m->prec, copy ? copy + off : NULL);
}

dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o)
{
    if (!m || !o) return step_checks(m, o); /* refused before anything is settled */
    /* A pending verdict puts back the step count of the step it decides: before this one counts. */
    dt_status gs = dt_model_settle_step(m, NULL);
    if (!gs) gs = step_checks(m, o);
    if (gs) return gs;
    if ((gs = model_group_complete(m, "dt_model_optimizer_step"))) return gs;
    /* A step on gradients not synchronized (allow_unreduced): the buckets backward started are
     * being reduced in place; the step reads them once they have landed, never halfway. */
    if (m->red && reducer_step_open(m->red) && (gs = reducer_wait_started(m->red))) return gs;
    backend *be = m->be;
    /* The parameters change from here on: the 16-bit copy is current again only where the step
     * below writes it whole (a sharded step writes owned slices; one that fails, part of it). */
    model_params_changed(m);
    if (model_zero(m) || o->nseg) {
        dt_status zs = model_zero_shard_optimizer(m, o);
        if (!zs && !be->ops->host_memory) zs = state_to_device(o, be);
        if (zs) return zs;
        free(o->f1); /* a checkpoint's full-size view is stale from now on */
        free(o->f2);
        o->f1 = o->f2 = NULL;
        optimizer_count_step(o);
        return optimizer_step_shard(m, o);
    }
    if (!be->ops->host_memory && (gs = state_to_device(o, be))) return gs;
    optimizer_count_step(o);
    /* One pass: the gradients as they are kept with their pending factors, the 16-bit copy
     * written as the parameters are. */
    const optim_grads g = model_optim_grads(m);
    const dt_status s = optimizer_queue_whole(m, o, &g);
    if (!s && m->p16) m->p16_current = 1;
    return s;
}

int optimizer_graph_ready(dt_model *m, dt_optimizer *o)
{
    if (o->nseg || step_checks(m, o) || model_group_complete(m, "dt_model_optimizer_step")) {
        status_clear_error(); /* the step outside the graph says it again */
        return 0;
    }
    if (!m->be->ops->host_memory && state_to_device(o, m->be)) {
        status_clear_error();
        return 0;
    }
    return 1;
}

void optimizer_baked(const dt_model *m, const dt_optimizer *o, optim_baked *out)
{
    const dt_optim_config *c = &o->cfg;
    const int host = m->be->ops->host_memory; /* the state optimizer_queue_whole steps */
    memset(out, 0, sizeof *out);
    out->kind = (int)c->kind;
    out->s1 = host ? o->s1 : o->d1;
    out->s2 = host ? o->s2 : o->d2;
    out->n = o->n;
    out->momentum = c->momentum, out->weight_decay = c->weight_decay;
    out->beta1 = c->beta1, out->beta2 = c->beta2, out->eps = c->eps;
}

optim_consts optimizer_live_next(const dt_optimizer *o)
{
    const dt_optim_config *c = &o->cfg;
    const int t = next_t(o->t);
    return c->kind == DT_OPTIM_SGD ? optim_consts_sgd(c->lr, t == 1)
                                   : optim_consts_adamw(c->lr, c->beta1, c->beta2, c->weight_decay, t);
}

dt_status optimizer_queue_whole(dt_model *m, dt_optimizer *o, const optim_grads *g)
{
    const int host = m->be->ops->host_memory;
    return step_copy(m->be, o, host ? o->s1 : o->d1, host ? o->s2 : o->d2, 0, m->params, g, o->n, m->prec, m->p16);
}

void optimizer_graph_stepped(dt_model *m, dt_optimizer *o)
{
    model_params_changed(m);
    optimizer_count_step(o);
    if (m->p16) m->p16_current = 1; /* the graph's step wrote the copy whole */
}

/* One step of cnt elements of the flat buffer, p and g pointing at the first, state at `at`; copy
 * (NULL: none; else pointing at the first) receives the updated p rounded to copy_t. Every
 * optimizer kernel, CPU (kernels/cpu/optim.c: AdamW's vector loop and its scalar tail take the same
 * fused multiply-adds) and CUDA, computes each element alike wherever it lies, so a slice (a
 * layer, a bucket, a ZeRO shard) gets the bits one step over the whole buffer gives it. */
static dt_status step_slice(backend *be, const dt_optimizer *o, size_t at, float *p, const optim_grads *g, size_t cnt,
                            dt_dtype copy_t, uint16_t *copy)
{
    const int host = be->ops->host_memory;
    return step_copy(be, o, host ? o->s1 : o->d1, host ? o->s2 : o->d2, at, p, g, cnt, copy_t, copy);
}

/* One step over the owned slices only, each slice's state at its place in s1/s2 and its
 * gradients read as the whole-buffer step reads them, so every element sees the same arithmetic
 * as at --zero 0. Then the updated parameters go to every rank. */
static dt_status optimizer_step_shard(dt_model *m, dt_optimizer *o)
{
    backend *be = m->be;
    const optim_grads g = model_optim_grads(m);
    size_t at = 0;
    for (int i = 0; i < o->nseg; i++) {
        const size_t off = o->seg_off[i], cnt = o->seg_cnt[i];
        const optim_grads gs = grads_from(&g, off);
        const dt_status s = step_slice(be, o, at, m->params + off, &gs, cnt, DT_F32, NULL);
        if (s) return s;
        at += cnt;
    }
    return model_zero_allgather_params(m);
}

int optimizer_sharded(const dt_optimizer *o) { return o->nseg > 0; }

dt_status optimizer_shard(dt_optimizer *o, const size_t *off, const size_t *cnt, int nseg)
{
    if (o->nseg == nseg && nseg > 0 && !memcmp(o->seg_off, off, (size_t)nseg * sizeof *off) &&
        !memcmp(o->seg_cnt, cnt, (size_t)nseg * sizeof *cnt))
        return DT_OK; /* already this shard */
    if (o->nseg)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "the optimizer is already sharded for another bucket plan or world: create a new "
                                "optimizer after changing --bucket-mb or the ranks");
    /* State already on a device (steps taken at --zero 0) comes back first; the sharded state goes
     * up at the next step. */
    dt_status ds = optimizer_to_host(o);
    if (ds) return ds;
    if (o->on_device) {
        o->be->ops->free(o->be, o->d1);
        o->be->ops->free(o->be, o->d2);
        o->d1 = o->d2 = NULL;
        o->on_device = o->upload = 0;
    }
    size_t total = 0;
    for (int i = 0; i < nseg; i++) total += cnt[i];
    float *n1 = o->s1 ? malloc((total ? total : 1) * sizeof(float)) : NULL;
    float *n2 = o->s2 ? malloc((total ? total : 1) * sizeof(float)) : NULL;
    size_t *so = malloc((size_t)(nseg ? nseg : 1) * sizeof *so), *sc = malloc((size_t)(nseg ? nseg : 1) * sizeof *sc);
    if ((o->s1 && !n1) || (o->s2 && !n2) || !so || !sc) {
        free(n1), free(n2), free(so), free(sc);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the sharded optimizer state (%zu floats)", total);
    }
    /* The state so far (zeros, or a checkpoint's) keeps its values in the owned slices. */
    size_t at = 0;
    for (int i = 0; i < nseg; i++) {
        if (n1) memcpy(n1 + at, o->s1 + off[i], cnt[i] * sizeof(float));
        if (n2) memcpy(n2 + at, o->s2 + off[i], cnt[i] * sizeof(float));
        at += cnt[i];
    }
    memcpy(so, off, (size_t)nseg * sizeof *so);
    memcpy(sc, cnt, (size_t)nseg * sizeof *sc);
    free(o->s1);
    free(o->s2);
    o->s1 = n1;
    o->s2 = n2;
    o->seg_off = so;
    o->seg_cnt = sc;
    o->nseg = nseg;
    o->nstate = total;
    return DT_OK;
}

void optimizer_unshard(dt_optimizer *o)
{
    if (!o->nseg) return;
    /* The device copy holds the old slices: the state goes up again from s1/s2 at the next step. */
    if (o->on_device) {
        o->be->ops->free(o->be, o->d1);
        o->be->ops->free(o->be, o->d2);
        o->d1 = o->d2 = NULL;
        o->on_device = o->upload = 0;
    }
    free(o->s1);
    free(o->s2);
    o->s1 = o->f1;
    o->s2 = o->f2;
    o->f1 = o->f2 = NULL;
    free(o->seg_off);
    free(o->seg_cnt);
    o->seg_off = o->seg_cnt = NULL;
    o->nseg = 0;
    o->nstate = o->n;
}

size_t optimizer_state_bytes(const dt_optimizer *o)
{
    return o->nstate * sizeof(float) * (size_t)((o->s1 != NULL) + (o->s2 != NULL));
}

dt_status optimizer_full_begin(dt_optimizer *o, float **f1, float **f2)
{
    *f1 = *f2 = NULL;
    if (!o->nseg) return DT_OK;
    dt_status s = optimizer_to_host(o); /* the owned slices, current on the host */
    if (s) return s;
    const size_t n = o->n ? o->n : 1;
    if ((o->s1 && !o->f1 && !(o->f1 = malloc(n * sizeof(float)))) ||
        (o->s2 && !o->f2 && !(o->f2 = malloc(n * sizeof(float)))))
        return status_set_error(DT_ERR_NOMEM,
                                "out of memory for the full-size optimizer state a checkpoint gathers (%.1f MiB)",
                                (double)o->n * 4.0 / 1048576.0);
    /* Zeros outside the owned slices: the allgather that follows fills them from their owners. */
    if (o->f1) memset(o->f1, 0, o->n * sizeof(float));
    if (o->f2) memset(o->f2, 0, o->n * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < o->nseg; i++) {
        if (o->f1) memcpy(o->f1 + o->seg_off[i], o->s1 + at, o->seg_cnt[i] * sizeof(float));
        if (o->f2) memcpy(o->f2 + o->seg_off[i], o->s2 + at, o->seg_cnt[i] * sizeof(float));
        at += o->seg_cnt[i];
    }
    *f1 = o->f1;
    *f2 = o->f2;
    return DT_OK;
}

void optimizer_full_end(dt_optimizer *o)
{
    free(o->f1);
    free(o->f2);
    o->f1 = o->f2 = NULL;
}

optimizer_view optimizer_state(const dt_optimizer *o)
{
    /* Sharded: the full-size view while a checkpoint has one (optimizer_full_begin), else nothing
     * a checkpoint could take for the whole state. */
    float *s1 = o->nseg ? o->f1 : o->s1, *s2 = o->nseg ? o->f2 : o->s2;
    return (optimizer_view){.cfg = o->cfg, .t = o->t, .s1 = s1, .s2 = s2, .n1 = s1 ? o->n : 0, .n2 = s2 ? o->n : 0};
}

void optimizer_set_t(dt_optimizer *o, int t) { o->t = t; }

dt_status optimizer_to_host(dt_optimizer *o)
{
    if (!o->on_device || o->upload) return DT_OK; /* the host copy is the current one */
    dt_status s;
    if ((o->s1 && (s = o->be->ops->to_host(o->be, o->s1, o->d1, o->nstate * sizeof(float)))) ||
        (o->s2 && (s = o->be->ops->to_host(o->be, o->s2, o->d2, o->nstate * sizeof(float)))))
        return s;
    return DT_OK;
}

void optimizer_host_changed(dt_optimizer *o)
{
    o->upload = o->on_device;
    /* Sharded: a checkpoint wrote the full-size view; the owned slices are this rank's state. */
    size_t at = 0;
    for (int i = 0; o->nseg && i < o->nseg; i++) {
        if (o->f1) memcpy(o->s1 + at, o->f1 + o->seg_off[i], o->seg_cnt[i] * sizeof(float));
        if (o->f2) memcpy(o->s2 + at, o->f2 + o->seg_off[i], o->seg_cnt[i] * sizeof(float));
        at += o->seg_cnt[i];
    }
}
