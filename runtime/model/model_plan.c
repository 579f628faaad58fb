/*
 * model_plan.c - a model's memory plan: the activation pool's carve (act_plan), which model.c
 * allocates and dt_model_memory reports, and the same plan without a model (dt_model_plan_memory):
 * every buffer dt_model_create, dt_model_set_accum_steps, dt_model_set_precision and the
 * optimizer's first step would ask the backend for, with the biggest named, and the largest batch
 * whose plan fits in a byte budget (dt_model_max_batch). Nothing here allocates on a device or
 * talks to other ranks: the sizes come from the backend's table alone.
 */
#include "runtime/model/model_plan.h"
#include "runtime/model/model_internal.h"
#include "runtime/test_hooks.h"
#include "collectives/bucket.h"
#include "collectives/coll.h"
#include "collectives/engine.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest batch dt_model_max_batch tries: the CLI's own limit on --batch. */
#define PLAN_MAX_BATCH (1 << 20)

/* Whether layer i needs its own output buffer (flatten aliases its input; a ReLU works in place
 * except on the model input x, which is const). */
static int layer_owns_output(const model_spec *s, int i)
{
    const layer *l = &s->layers[i];
    if (l->kind == LAYER_FLATTEN) return 0;
    if (l->kind != LAYER_RELU) return 1;
    for (int j = 0; j < i; j++)
        if (s->layers[j].kind != LAYER_FLATTEN) return 0;
    return 1;
}

dt_status plan_conv_shapes(model_spec *s, int batch)
{
    for (int i = 0; i < s->n; i++) {
        layer *l = &s->layers[i];
        if (l->kind != LAYER_CONV) continue;
        l->cs = (conv_shape){.batch = batch,
                             .c_in = l->in_c,
                             .h = l->in_h,
                             .w = l->in_w,
                             .c_out = l->out,
                             .k = l->k,
                             .stride = l->stride,
                             .pad = l->pad};
        dt_status st = conv_shape_init(&l->cs);
        if (st) return st;
    }
    return DT_OK;
}

/* What the backend's 16-bit layer entries need as scratch, layer by layer at `batch` (and the loss
 * over the logits). */
static scratch_sizes plan_scratch16(const model_spec *s, backend *be, int batch)
{
    scratch_sizes z = {0};
    int first = 1;
    for (int i = 0; i < s->n; i++) {
        const layer *l = &s->layers[i];
        static const be_layer_kind kinds[] = {[LAYER_FC] = BE_LAYER_FC,
                                              [LAYER_CONV] = BE_LAYER_CONV,
                                              [LAYER_RELU] = BE_LAYER_RELU,
                                              [LAYER_POOL] = BE_LAYER_POOL};
        if (l->kind == LAYER_FLATTEN) continue;
        const layer_need need = {.kind = kinds[l->kind],
                                 .in_n = layer_in_n(l),
                                 .out_n = layer_out_n(l),
                                 .fc_in = l->in_c,
                                 .fc_out = l->out,
                                 .np = l->w_n + l->b_n,
                                 .first = first,
                                 .pointwise = l->kind == LAYER_CONV && conv_shape_pointwise(&l->cs)};
        be->ops->scratch16(be, &need, batch, &z);
        first = 0;
    }
    const layer_need loss = {.kind = BE_LAYER_LOSS, .out_n = (size_t)s->classes};
    be->ops->scratch16(be, &loss, batch, &z);
    return z;
}

int act_plan(const model_spec *s, const backend_ops *ops, dt_dtype prec, int batch, carve *c)
{
    /* The sizing entries need no device state (kernels/backend.h), so a table alone serves. */
    backend be = {.ops = ops, .state = NULL};
    const size_t B = (size_t)batch, na = B * s->max_act, e = prec == DT_F32 ? 4 : 2;
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        const layer *l = &s->layers[i];
        if (layer_owns_output(s, i)) c[k++] = (carve){SLOT_OUTPUT, i, B * layer_out_n(l) * e, CARVE_ACT};
        if (l->kind == LAYER_POOL) c[k++] = (carve){SLOT_POOL_IDX, i, B * layer_out_n(l) * sizeof(int32_t), CARVE_ACT};
        /* An fc layer's ReLU mask where the backend keeps one: for the relu after it, whether or
         * not the model fuses it now (dt_model_set_fused_relu may change without a new pool). */
        if (l->kind == LAYER_FC && prec != DT_F32 && ops->fc_relu_mask_bytes && i + 1 < s->n &&
            s->layers[i + 1].kind == LAYER_RELU)
            c[k++] = (carve){SLOT_RELU_MASK, i, ops->fc_relu_mask_bytes(batch, l->out), CARVE_ACT};
    }
    for (int j = 0; j < 2; j++) c[k++] = (carve){SLOT_DBUF, j, na * e, CARVE_ACT};
    size_t ws = 0;
    for (int i = 0; i < s->n; i++)
        if (s->layers[i].kind == LAYER_CONV) {
            const size_t need = ops->conv_ws_floats(&be, &s->layers[i].cs);
            if (need > ws) ws = need;
        }
    if (ws) c[k++] = (carve){SLOT_WS, 0, ws * sizeof(float), CARVE_WORK};
    if (prec == DT_F32) return k;
    const scratch_sizes z = plan_scratch16(s, &be, batch);
    c[k++] = (carve){SLOT_SX, 0, z.sx * sizeof(float), CARVE_WORK};
    c[k++] = (carve){SLOT_SY, 0, z.sy * sizeof(float), CARVE_WORK};
    c[k++] = (carve){SLOT_SDY, 0, z.sdy * sizeof(float), CARVE_WORK};
    c[k++] = (carve){SLOT_SW, 0, z.sw * sizeof(float), CARVE_WORK};
    c[k++] = (carve){SLOT_SG, 0, z.sw * sizeof(float), CARVE_WORK};
    c[k++] = (carve){SLOT_ST, 0, z.st * sizeof(float), CARVE_WORK};
    if (z.x16) c[k++] = (carve){SLOT_X16, 0, z.x16 * sizeof(uint16_t), CARVE_WORK};
    if (ops->keeps_params16) c[k++] = (carve){SLOT_P16, 0, s->num_params * sizeof(uint16_t), CARVE_P16};
    return k;
}

/* a + b, or SIZE_MAX when that passes it: a plan's sums never wrap into a small number. */
static size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

size_t carve_pool_bytes(const carve *c, int k)
{
    /* Each carve is below 2^62 (batch 2^20 x 2^28 values x 4 bytes at most), but thousands of
     * them may add past 2^64: the sum saturates, and no allocation of it can succeed. */
    size_t total = 0;
    for (int j = 0; j < k; j++) {
        const size_t a = carve_aligned(c[j].bytes);
        if (a > SIZE_MAX - total) return SIZE_MAX;
        total += a;
    }
    return total;
}

void model_spec_layer_name(const model_spec *s, int i, char *buf, size_t n)
{
    if (i < 0 || i >= s->n) {
        snprintf(buf, n, "-");
        return;
    }
    const layer *l = &s->layers[i];
    switch (l->kind) {
        case LAYER_FC: snprintf(buf, n, "layer %d (fc:%d)", i, l->out); break;
        case LAYER_CONV: snprintf(buf, n, "layer %d (conv:%d:%d:%d:%d)", i, l->out, l->k, l->stride, l->pad); break;
        case LAYER_POOL: snprintf(buf, n, "layer %d (pool:%d)", i, l->k); break;
        case LAYER_RELU: snprintf(buf, n, "layer %d (relu)", i); break;
        case LAYER_FLATTEN: snprintf(buf, n, "layer %d (flatten)", i); break;
    }
}

/* ---------------------------------------------------------------- the plan without a model */

void dt_memory_plan_defaults(dt_memory_plan_config *c)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->batch = 1;
    c->compute = c->grads = DT_F32;
    c->accum_steps = 1;
    c->bucket_mb = 25;
    c->first_bucket_mb = 1;
}

/* The elements of each optimizer moment this rank holds: all of them, or under ZeRO-1 the part
 * zero_rank owns of every bucket (model_zero.c: the carrier's split of each bucket of the reducer's
 * plan, whose ranges are the layers' parameters in backward order, as model_sync.c gives them:
 * engine_part on host memory, coll_part on a device). */
static dt_status plan_optimizer_elems(const model_spec *s, const backend_ops *ops, const dt_memory_plan_config *c,
                                      size_t *elems)
{
    *elems = s->num_params;
    if (c->zero_world <= 1 || !c->optim) return DT_OK; /* zero_rank was checked by plan_begin */
    dt_range *r = malloc((size_t)(s->n ? s->n : 1) * sizeof *r);
    if (!r) return status_set_error(DT_ERR_NOMEM, "out of host memory planning the optimizer's shard");
    int nr = 0;
    for (int i = s->n - 1; i >= 0; i--) {
        const layer *l = &s->layers[i];
        if (l->w_n + l->b_n) r[nr++] = (dt_range){l->w_off, l->w_n + l->b_n};
    }
    bucket_plan bp;
    const size_t esz = c->grads == DT_F32 ? 4 : 2;
    dt_status st = bucket_plan_ranges(s->num_params, r, nr, esz, bucket_cap_bytes(c->first_bucket_mb),
                                      bucket_cap_bytes(c->bucket_mb), &bp);
    free(r);
    if (st) return st;
    size_t own = 0;
    for (int b = 0; b < bp.nb; b++) {
        size_t off, cnt;
        if (ops->host_memory)
            engine_part(bp.b[b].n, c->zero_rank, c->zero_world, &off, &cnt);
        else
            coll_part(bp.b[b].n, c->zero_rank, c->zero_world, &off, &cnt);
        own += cnt;
    }
    bucket_plan_free(&bp);
    *elems = own;
    return DT_OK;
}

/* Keeps the DT_MEMORY_TOP biggest items of p, largest first (ties: the earlier stays first). */
static void plan_item(dt_memory_plan *p, size_t bytes, const char *fmt, const char *arg)
{
    if (!bytes) return;
    int at = p->n_top;
    while (at > 0 && p->top[at - 1].bytes < bytes) at--;
    if (at >= DT_MEMORY_TOP) return;
    const int last = p->n_top < DT_MEMORY_TOP ? p->n_top : DT_MEMORY_TOP - 1;
    memmove(&p->top[at + 1], &p->top[at], (size_t)(last - at) * sizeof p->top[0]);
    p->top[at].bytes = bytes;
    snprintf(p->top[at].what, sizeof p->top[at].what, fmt, arg);
    if (p->n_top < DT_MEMORY_TOP) p->n_top++;
}

/* The carved buffers of one pool as plan items. */
static void plan_carve_items(dt_memory_plan *p, const model_spec *s, const carve *c, int k)
{
    size_t scratch = 0;
    char name[48];
    for (int j = 0; j < k; j++) {
        switch (c[j].slot) {
            case SLOT_OUTPUT:
                model_spec_layer_name(s, c[j].index, name, sizeof name);
                plan_item(p, c[j].bytes, "%s output", name);
                break;
            case SLOT_POOL_IDX:
                model_spec_layer_name(s, c[j].index, name, sizeof name);
                plan_item(p, c[j].bytes, "%s argmax", name);
                break;
            case SLOT_RELU_MASK:
                model_spec_layer_name(s, c[j].index, name, sizeof name);
                plan_item(p, c[j].bytes, "%s ReLU mask", name);
                break;
            case SLOT_DBUF: plan_item(p, c[j].bytes, "%sbackward gradient buffer", c[j].index ? "second " : ""); break;
            case SLOT_WS: plan_item(p, c[j].bytes, "%sconvolution workspace", ""); break;
            case SLOT_P16: plan_item(p, c[j].bytes, "%s16-bit parameter copy", ""); break;
            default: scratch += c[j].bytes; /* the fp32 and 16-bit conversion scratch */
        }
    }
    plan_item(p, scratch, "%s16-bit conversion scratch", "");
}

/* The plan of spec s (parsed, conv shapes at c->batch) on table ops, into *p; one_rank: the model
 * trains alone (no ctx, or a world of one). */
static void plan_fill(const model_spec *s, const backend_ops *ops, const dt_memory_plan_config *c, size_t opt_elems,
                      int one_rank, carve *cv, dt_memory_plan *p)
{
    memset(p, 0, sizeof *p);
    const size_t np = s->num_params, B = (size_t)c->batch, n = (size_t)s->n;
    dt_memory_summary *k = &p->kinds;
    /* dt_model_create: parameters, fp32 gradients, the finite-check flags (one a layer, the loss
     * scaler's queued verdict and a step graph's optimizer values: flags_bytes), the input batch
     * and labels (a backend without host memory), and the fp32 pool at the largest batch. */
    const int k32 = act_plan(s, ops, DT_F32, c->batch, cv);
    const size_t pool32 = carve_pool_bytes(cv, k32);
    /* Two slots of them where the backend stages batches on a copy stream (copy_in). */
    const size_t slots = ops->copy_in ? 2 : 1;
    const size_t input = ops->host_memory ? 0 : slots * B * (size_t)s->in_c * s->in_h * s->in_w * sizeof(float);
    const size_t fixed = np * 4 + flags_bytes(n) + (input ? input + slots * B * 4 : 0);
    p->other = fixed - np * 4;
    if (input) plan_item(p, input, "%s", slots > 1 ? "input batches (2 slots)" : "input batch");
    plan_item(p, np * 4, "%sparameters (fp32)", "");
    /* The optimizer: momentum, or AdamW's m and v (fp32 each). */
    size_t moments = 0;
    if (c->optim) moments = c->optim->kind == DT_OPTIM_ADAMW ? 2 : c->optim->momentum > 0 ? 1 : 0;
    k->optimizer = moments * opt_elems * 4; /* opt_elems: np, or this rank's ZeRO-1 share */
    plan_item(p, k->optimizer, "%s", moments == 2 ? "AdamW moments (m, v)" : "SGD momentum");
    const size_t gacc = c->accum_steps > 1 ? np * 4 : 0;
    plan_item(p, gacc, "%sgradient accumulation buffer", "");
    /* dt_model_set_precision: the pool again in 16 bits, and 16-bit gradients. */
    const int kf = c->compute == DT_F32 ? k32 : act_plan(s, ops, c->compute, c->batch, cv);
    const size_t pool = carve_pool_bytes(cv, kf);
    const int g16 = c->grads != DT_F32;
    const size_t grads = np * (g16 ? 2 : 4);
    plan_item(p, grads, "%s", g16 ? "gradients (16-bit)" : "gradients (fp32)");
    for (int j = 0; j < kf; j++) {
        if (cv[j].kind == CARVE_ACT) k->activations = sat_add(k->activations, cv[j].bytes);
        if (cv[j].kind == CARVE_WORK) k->workspace = sat_add(k->workspace, cv[j].bytes);
        if (cv[j].kind == CARVE_P16) k->params += cv[j].bytes;
    }
    plan_carve_items(p, s, cv, kf);
    /* The spare 16-bit copy a bf16 step layer by layer writes (model_overlap.c), as dtrain train
     * steps by default on one rank (--step-overlap auto: 8M+ parameters; fp16's loss scaler,
     * ZeRO-1 and more ranks step after backward or by bucket). Planned from the start; the model
     * allocates it at the first such step. */
    const size_t spare = ops->keeps_params16 && c->compute == DT_BF16 && c->optim && one_rank && c->zero_world <= 1 &&
                                 np >= DT_STEP_OVERLAP_AUTO_PARAMS
                             ? np * 2
                             : 0;
    plan_item(p, spare, "%s", "spare 16-bit parameter copy (optimizer step layer by layer)");
    k->params += np * 4 + spare;
    k->grads = grads + gacc;
    k->pool = pool;
    backend be = {.ops = ops, .state = NULL};
    ops->mem_info(&be, &k->device_free, &k->device_total);
    /* Held while training, and the most held at once on the way there: the fp32 pool of
     * dt_model_create before a 16-bit one replaces it, both gradient buffers while
     * dt_model_set_precision swaps them (counting the optimizer and accumulation buffer from the
     * start, whatever order a program makes them in). */
    const size_t held = fixed + grads + gacc + k->optimizer + spare; /* bounded by the parameter limit */
    p->total = sat_add(held, pool);
    const size_t at_create = sat_add(fixed + np * 4 + gacc + k->optimizer, pool32);
    const size_t at_swap = g16 ? sat_add(fixed + np * 4 + grads + gacc + k->optimizer, pool) : 0;
    p->peak = p->total;
    if (at_create > p->peak) p->peak = at_create;
    if (at_swap > p->peak) p->peak = at_swap;
}

/* The backend table a model of ctx would use: the CUDA one for a CUDA placement. */
static dt_status plan_ops(dt_ctx *ctx, const backend_ops **out)
{
    *out = backend_cpu()->ops;
    dt_placement pl;
    if (!ctx || dt_get_placement(ctx, &pl) != DT_OK || pl.device != DT_DEVICE_CUDA) return DT_OK;
    if (!(*out = backend_cuda_ops()))
        return status_set_error(DT_ERR_UNSUPPORTED, "this dtrain was built without CUDA: plan with --device cpu");
    return DT_OK;
}

/* Checks c and parses its spec into *s (freed by the caller with model_spec_free). */
static dt_status plan_begin(const char *fn, const dt_memory_plan_config *c, const backend_ops *ops, int any_batch,
                            model_spec *s)
{
    if (!c) return status_null_arg(fn, "c", "pass a dt_memory_plan_config filled by dt_memory_plan_defaults");
    if (!c->spec) return status_null_arg(fn, "c->spec", "set the model spec, as dt_model_create takes it");
    if (c->batch < 1 && !any_batch)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: batch %d must be at least 1", fn, c->batch);
    if (c->compute != DT_F32 && c->compute != DT_F16 && c->compute != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "precision %d must be DT_F32, DT_F16 or DT_BF16", (int)c->compute);
    if (c->grads != DT_F32 && c->grads != c->compute) return model_grads_type_error(c->compute, c->grads);
    if (c->grads != DT_F32 && !ops->grads16)
        return status_set_error(DT_ERR_UNSUPPORTED, "on the %s backend, gradients are kept in fp32: plan with DT_F32",
                                ops->name);
    if (c->accum_steps < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "accum_steps %d must be at least 1", c->accum_steps);
    if (c->zero_world < 0)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: zero_world %d must be 0 or more (0 or 1: no ZeRO-1)", fn,
                                c->zero_world);
    /* Whether or not an optimizer is planned (zero_rank picks its share), as the caps below: a
     * world of 0 or 1 has rank 0 alone. */
    const int zw = c->zero_world > 1 ? c->zero_world : 1;
    if (c->zero_rank < 0 || c->zero_rank >= zw)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: zero_rank %d is outside 0..%d (zero_world %d)", fn,
                                c->zero_rank, zw - 1, c->zero_world);
    /* Checked whatever zero_world says, as dt_model_set_sync checks its caps. */
    dt_status st = bucket_caps_check(fn, c->bucket_mb, c->first_bucket_mb);
    if (st) return st;
    st = c->optim ? optimizer_check_config(c->optim) : DT_OK;
    if (st) return status_set_error(st, "%s: the optimizer config: %s", fn, dt_last_error());
    return model_spec_parse(c->spec, c->input, s);
}

/* Whether ctx's model trains alone: no ctx, or a world of one. */
static int plan_one_rank(dt_ctx *ctx) { return !ctx || dt_world_size(ctx) == 1; }

/* dt_model_plan_memory on table ops, for a model alone (one_rank) or among others. */
static dt_status plan_memory_on(const backend_ops *ops, int one_rank, const dt_memory_plan_config *c,
                                dt_memory_plan *out)
{
    memset(out, 0, sizeof *out);
    model_spec s;
    dt_status st = plan_begin("dt_model_plan_memory", c, ops, 0, &s);
    if (st) return st;
    carve *cv = malloc(carve_max(&s) * sizeof *cv);
    if (!cv) st = status_set_error(DT_ERR_NOMEM, "out of host memory planning the model's memory");
    size_t opt_elems = 0;
    if (!st) st = plan_optimizer_elems(&s, ops, c, &opt_elems);
    if (!st) st = plan_conv_shapes(&s, c->batch);
    if (!st) plan_fill(&s, ops, c, opt_elems, one_rank, cv, out);
    free(cv);
    model_spec_free(&s);
    return st;
}

dt_status dt_model_plan_memory(dt_ctx *ctx, const dt_memory_plan_config *c, dt_memory_plan *out)
{
    if (!out) return status_null_arg("dt_model_plan_memory", "out", "pass a dt_memory_plan to fill");
    memset(out, 0, sizeof *out);
    const backend_ops *ops;
    const dt_status st = plan_ops(ctx, &ops);
    return st ? st : plan_memory_on(ops, plan_one_rank(ctx), c, out);
}

dt_status model_test_plan_memory(const backend_ops *ops, int one_rank, const dt_memory_plan_config *c,
                                 dt_memory_plan *out)
{
    return plan_memory_on(ops, one_rank, c, out);
}

dt_status dt_model_max_batch(dt_ctx *ctx, const dt_memory_plan_config *c, size_t budget, int *batch,
                             dt_memory_plan *plan)
{
    if (!batch) return status_null_arg("dt_model_max_batch", "batch", "pass an int to receive the largest batch");
    if (!plan) return status_null_arg("dt_model_max_batch", "plan", "pass a dt_memory_plan to fill");
    *batch = 0;
    memset(plan, 0, sizeof *plan);
    const backend_ops *ops;
    dt_status st = plan_ops(ctx, &ops);
    if (st) return st;
    model_spec s;
    if ((st = plan_begin("dt_model_max_batch", c, ops, 1, &s))) return st; /* c's batch is ignored */
    carve *cv = malloc(carve_max(&s) * sizeof *cv);
    if (!cv) {
        model_spec_free(&s);
        return status_set_error(DT_ERR_NOMEM, "out of host memory planning the model's memory");
    }
    dt_memory_plan_config at = *c;
    dt_memory_plan p;
    const int one_rank = plan_one_rank(ctx);
    size_t opt_elems = 0;
    st = plan_optimizer_elems(&s, ops, c, &opt_elems);
    /* fits(b): the plan's peak at batch b is within the budget. Every part of the plan grows with
     * the batch or stays, so the largest fitting batch is found by doubling, then bisection. */
    int lo = 0, hi = 0; /* fits(lo) (or lo 0), !fits(hi) (or hi 0: not found yet) */
    for (int b = 1; !st; b = b > PLAN_MAX_BATCH / 2 ? PLAN_MAX_BATCH : 2 * b) {
        at.batch = b;
        if ((st = plan_conv_shapes(&s, b))) break;
        plan_fill(&s, ops, &at, opt_elems, one_rank, cv, &p);
        if (p.peak > budget) {
            hi = b;
            if (b == 1) *plan = p; /* nothing fits: what batch 1 needs */
            break;
        }
        lo = b;
        *plan = p;
        if (b == PLAN_MAX_BATCH) break;
    }
    while (!st && hi && hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        at.batch = mid;
        if ((st = plan_conv_shapes(&s, mid))) break;
        plan_fill(&s, ops, &at, opt_elems, one_rank, cv, &p);
        if (p.peak > budget) {
            hi = mid;
        } else {
            lo = mid;
            *plan = p;
        }
    }
    free(cv);
    model_spec_free(&s);
    if (!st) *batch = lo;
    return st;
}
