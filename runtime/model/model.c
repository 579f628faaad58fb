/*
 * model.c - dt_model: a layer-list network on one flat parameter buffer (the graph from
 * model_spec.c), its parameters and buffers on its backend (kernels/backend.h), and what it says
 * about itself. The passes, in any precision, are model_pass.c, gradient synchronization
 * model_sync.c (on the reducer), the optimizers optimizer.c, precision model_precision.c,
 * profiling model_profile.c, the whole training step with accumulation model_step.c, gradient
 * norms and clipping model_clip.c, the kernel entry points for custom models kernels_api.c.
 *
 * Memory is sized once for the largest batch: one output buffer per layer (ReLU works in place on
 * its input's buffer and flatten aliases it, since no backward pass needs the pre-ReLU values),
 * two ping-pong buffers for the gradients flowing backward, argmax indices per pooling layer, and
 * one convolution workspace shared by all layers. A step allocates nothing.
 */
#include "runtime/model/model.h"
#include "runtime/model/model_internal.h"
#include "base/hash.h"
#include "base/rng.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layer l's convolution geometry at `batch` into l->cs; its check's error (naming the numbers)
 * when the kernel does not fit. */
static dt_status layer_conv_shape(layer *l, int batch)
{
    l->cs = (conv_shape){.batch = batch,
                         .c_in = l->in_c,
                         .h = l->in_h,
                         .w = l->in_w,
                         .c_out = l->out,
                         .k = l->k,
                         .stride = l->stride,
                         .pad = l->pad};
    return conv_shape_init(&l->cs);
}

/* PyTorch's default for Linear and Conv2d: weights and biases uniform in +-1/sqrt(fan_in). Made on
 * the host, then copied to the backend when its memory is not host memory. */
static dt_status model_init_params(dt_model *m, uint64_t seed)
{
    const int host = m->be->ops->host_memory;
    float *p = m->params;
    if (!host && !(p = malloc((m->spec.num_params ? m->spec.num_params : 1) * sizeof *p)))
        return status_set_error(DT_ERR_NOMEM, "out of host memory initializing the parameters");
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        if (l->kind != LAYER_FC && l->kind != LAYER_CONV) continue;
        size_t fan_in = l->kind == LAYER_FC ? (size_t)l->in_c : (size_t)l->in_c * l->k * l->k;
        float bound = 1.0f / sqrtf((float)fan_in);
        for (size_t j = 0; j < l->w_n + l->b_n; j++)
            p[l->w_off + j] = bound * rng_uniform_pm1(rng_at(seed, 0x5041524dull + (uint64_t)i, j));
    }
    if (host) return DT_OK;
    dt_status s = m->be->ops->to_device(m->be, m->params, p, m->spec.num_params * sizeof *p);
    free(p);
    return s;
}

/* Frees the activation pool and forgets every buffer carved from it. */
void model_free_acts(dt_model *m)
{
    m->be->ops->free(m->be, m->pool);
    m->pool = NULL;
    m->pool_bytes = 0;
    for (int i = 0; i < m->spec.n; i++) {
        if (m->act) m->act[i] = NULL;
        if (m->pool_idx) m->pool_idx[i] = NULL;
    }
    for (int j = 0; j < 2; j++) m->dbuf[j] = NULL;
    m->sx = m->sy = m->sdy = m->sw = m->sg = m->st = NULL;
    m->p16 = m->x16 = NULL;
    m->ws = NULL;
}

/* Whether layer i needs its own output buffer: not flatten (it aliases its input), and not a ReLU
 * that can work in place (every ReLU except one applied to x itself, which is const). */
static int layer_owns_output(const dt_model *m, int i)
{
    const layer *l = &m->spec.layers[i];
    if (l->kind == LAYER_FLATTEN) return 0;
    if (l->kind != LAYER_RELU) return 1;
    for (int j = 0; j < i; j++)
        if (m->spec.layers[j].kind != LAYER_FLATTEN) return 0;
    return 1;
}

/* A buffer on the model's backend, or NULL (dt_last_error says why). */
static void *mbuf(const dt_model *m, size_t bytes, const char *what)
{
    void *p = NULL;
    return m->be->ops->alloc(m->be, bytes, what, &p) ? NULL : p;
}

/* The per-step buffers (for m->prec, at the largest batch) as (slot, bytes, kind): what the
 * activation pool holds, and what dt_model_memory reports. */
enum { CARVE_ACT, CARVE_WORK, CARVE_P16 }; /* activations, workspace, the 16-bit parameter copy */
typedef struct carve {
    void **slot;
    size_t bytes;
    int kind;
} carve;

/* Entries act_plan may write: per layer an output and pooling indices, then at most 11 more. */
static size_t carve_max(const dt_model *m) { return 2 * (size_t)m->spec.n + 16; }

/* What the backend's 16-bit layer entries need as scratch, layer by layer at the largest batch
 * (and the loss over the logits). */
static scratch_sizes model_scratch16(const dt_model *m)
{
    scratch_sizes z = {0};
    int first = 1;
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
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
                                 .first = first};
        m->be->ops->scratch16(m->be, &need, m->max_batch, &z);
        first = 0;
    }
    const layer_need loss = {.kind = BE_LAYER_LOSS, .out_n = (size_t)m->spec.classes};
    m->be->ops->scratch16(m->be, &loss, m->max_batch, &z);
    return z;
}

static int act_plan(dt_model *m, carve *c)
{
    const size_t B = (size_t)m->max_batch, na = B * m->spec.max_act, e = m->prec == DT_F32 ? 4 : 2;
    int k = 0;
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        if (layer_owns_output(m, i)) c[k++] = (carve){&m->act[i], B * layer_out_n(l) * e, CARVE_ACT};
        if (l->kind == LAYER_POOL)
            c[k++] = (carve){(void **)&m->pool_idx[i], B * layer_out_n(l) * sizeof(int32_t), CARVE_ACT};
    }
    for (int j = 0; j < 2; j++) c[k++] = (carve){&m->dbuf[j], na * e, CARVE_ACT};
    size_t ws = 0;
    for (int i = 0; i < m->spec.n; i++)
        if (m->spec.layers[i].kind == LAYER_CONV) {
            const size_t need = m->be->ops->conv_ws_floats(m->be, &m->spec.layers[i].cs);
            if (need > ws) ws = need;
        }
    if (ws) c[k++] = (carve){(void **)&m->ws, ws * sizeof(float), CARVE_WORK};
    if (m->prec == DT_F32) return k;
    const scratch_sizes z = model_scratch16(m);
    c[k++] = (carve){(void **)&m->sx, z.sx * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sy, z.sy * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sdy, z.sdy * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sw, z.sw * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sg, z.sw * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->st, z.st * sizeof(float), CARVE_WORK};
    if (z.x16) c[k++] = (carve){(void **)&m->x16, z.x16 * sizeof(uint16_t), CARVE_WORK};
    if (m->be->ops->keeps_params16)
        c[k++] = (carve){(void **)&m->p16, m->spec.num_params * sizeof(uint16_t), CARVE_P16};
    return k;
}

#define POOL_ALIGN 256 /* every buffer of the pool starts on a 256-byte boundary */

/* Allocates the activation pool of m->prec (after model_free_acts) as one allocation, sized for
 * the largest batch and reused by every step, and carves the per-step buffers from it: layer
 * outputs, the backward buffers, pooling indices, the convolution workspace and (16-bit) the
 * conversion scratch. 0 when out of memory (dt_last_error says how much was asked). */
int model_alloc_acts(dt_model *m)
{
    carve *c = malloc(carve_max(m) * sizeof *c);
    if (!c) {
        status_set_error(DT_ERR_NOMEM, "out of memory planning the activation pool");
        return 0;
    }
    const int k = act_plan(m, c);
    size_t total = 0;
    for (int j = 0; j < k; j++) total += (c[j].bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    char what[64];
    snprintf(what, sizeof what, "the %s activation pool", m->prec == DT_F32 ? "fp32" : "16-bit");
    if (!(m->pool = mbuf(m, total, what))) {
        free(c);
        return 0;
    }
    m->pool_bytes = total;
    char *p = m->pool;
    for (int j = 0; j < k; j++) {
        *c[j].slot = p;
        p += (c[j].bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    }
    free(c);
    return 1;
}

void dt_model_free(dt_model *m)
{
    if (!m) return;
    /* Buckets still being reduced (an error path left them) finish before the buffers go, so no
     * reduction writes into freed memory; then the reducer and its communicator. */
    dt_reducer_free(m->red);
    model_free_acts(m);
    free(m->act);
    free(m->in);
    free(m->pool_idx);
    backend *be = m->be;
    void *dev[] = {m->params, m->grads, m->g16, m->gblk, m->xdev, m->ldev, m->dflags, m->gacc};
    for (size_t j = 0; j < sizeof dev / sizeof *dev; j++) be->ops->free(be, dev[j]);
    free(m->prof_fwd);
    free(m->prof_bwd);
    model_spec_free(&m->spec);
    free(m);
}

dt_status dt_model_create(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed, int max_batch,
                          dt_model **out)
{
    *out = NULL;
    if (max_batch < 1) return status_set_error(DT_ERR_INVALID_ARG, "batch size %d must be at least 1", max_batch);
    /* The context's placement picks the backend; across ranks the gradients go through NCCL, or
     * (a build without NCCL) through host memory by MPI: both take the backend's buffers. */
    backend *be = backend_cpu();
    dt_placement pl;
    dt_status s;
    if (ctx && dt_get_placement(ctx, &pl) == DT_OK && pl.device == DT_DEVICE_CUDA && (s = backend_cuda(&be))) return s;
    dt_model *m = calloc(1, sizeof *m);
    if (!m) return status_set_error(DT_ERR_NOMEM, "out of memory for the model");
    s = model_spec_parse(spec, input, &m->spec);
    if (s) {
        free(m);
        return s;
    }
    m->ctx = ctx;
    m->be = be;
    m->max_batch = max_batch;
    const size_t B = (size_t)max_batch, n = (size_t)m->spec.n;
    m->params = mbuf(m, m->spec.num_params * sizeof(float), "parameters");
    m->grads = mbuf(m, m->spec.num_params * sizeof(float), "gradients");
    m->dflags = mbuf(m, (n ? n : 1) * sizeof(int), "the finite-check flags");
    const int host = be->ops->host_memory;
    if (!host) {
        m->xdev = mbuf(m, B * dt_model_input_size(m) * sizeof(float), "the input batch");
        m->ldev = mbuf(m, B * sizeof(int32_t), "the labels");
    }
    m->act = calloc(n, sizeof *m->act);
    m->in = calloc(n, sizeof *m->in);
    m->pool_idx = calloc(n, sizeof *m->pool_idx);
    m->prec = m->grad_t = DT_F32;
    m->inv_scale = m->grad_mul = 1.0f;
    m->accum_steps = 1;
    for (size_t i = 0; i < n; i++) {
        layer *l = &m->spec.layers[i];
        if (l->kind == LAYER_CONV && (s = layer_conv_shape(l, max_batch))) {
            dt_model_free(m);
            return s;
        }
    }
    /* else the error is set */
    int ok = m->params && m->grads && m->dflags && (host || (m->xdev && m->ldev));
    if (ok && !(m->act && m->in && m->pool_idx)) {
        status_set_error(DT_ERR_NOMEM, "out of host memory for the model's layer tables");
        ok = 0;
    }
    if (!ok || !model_alloc_acts(m)) {
        /* dt_last_error names the allocation, the bytes asked for and (GPU) free, and the fix. */
        char why[1024];
        snprintf(why, sizeof why, "%s", dt_last_error());
        dt_model_free(m);
        return status_set_error(DT_ERR_NOMEM, "%s", why);
    }
    if ((s = model_init_params(m, seed))) {
        dt_model_free(m);
        return s;
    }
    /* Identical start on every rank, whatever each rank computed. */
    if (ctx && dt_world_size(ctx) > 1 && (s = dt_broadcast(ctx, m->params, m->spec.num_params, DT_F32, 0))) {
        dt_model_free(m);
        return s;
    }
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    if ((s = dt_model_set_sync(m, &sc))) {
        dt_model_free(m);
        return s;
    }
    *out = m;
    return DT_OK;
}

size_t dt_model_num_params(const dt_model *m) { return m->spec.num_params; }
float *dt_model_params(dt_model *m) { return m->params; }
float *dt_model_grads(dt_model *m) { return m->g16 ? NULL : m->grads; }
size_t dt_model_input_size(const dt_model *m) { return (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w; }
int dt_model_num_classes(const dt_model *m) { return m->spec.classes; }

void dt_model_input_shape(const dt_model *m, int *c, int *h, int *w)
{
    *c = m->spec.in_c;
    *h = m->spec.in_h;
    *w = m->spec.in_w;
}

void dt_model_describe(const dt_model *m, char *buf, size_t n)
{
    static const char *names[] = {"fc", "conv", "relu", "pool", "flatten"};
    size_t used = 0;
    int w = snprintf(buf, n, "input %dx%dx%d, %zu parameters (%.2f MiB)\n", m->spec.in_c, m->spec.in_h, m->spec.in_w,
                     m->spec.num_params, (double)m->spec.num_params * 4 / (1 << 20));
    if (w > 0) used = (size_t)w < n ? (size_t)w : n;
    for (int i = 0; i < m->spec.n && used < n; i++) {
        const layer *l = &m->spec.layers[i];
        w = snprintf(buf + used, n - used, "  %2d %-7s -> %dx%dx%d  %zu params\n", i, names[l->kind], l->out_c,
                     l->out_h, l->out_w, l->w_n + l->b_n);
        if (w < 0) break;
        used += (size_t)w < n - used ? (size_t)w : n - used;
    }
}

void dt_model_layer_name(const dt_model *m, int i, char *buf, size_t n)
{
    if (i < 0 || i >= m->spec.n) {
        snprintf(buf, n, "-");
        return;
    }
    const layer *l = &m->spec.layers[i];
    switch (l->kind) {
        case LAYER_FC: snprintf(buf, n, "layer %d (fc:%d)", i, l->out); break;
        case LAYER_CONV: snprintf(buf, n, "layer %d (conv:%d:%d:%d:%d)", i, l->out, l->k, l->stride, l->pad); break;
        case LAYER_POOL: snprintf(buf, n, "layer %d (pool:%d)", i, l->k); break;
        case LAYER_RELU: snprintf(buf, n, "layer %d (relu)", i); break;
        case LAYER_FLATTEN: snprintf(buf, n, "layer %d (flatten)", i); break;
    }
}

void dt_model_memory(const dt_model *m, const dt_optimizer *o, dt_memory_summary *out)
{
    const size_t np = m->spec.num_params;
    memset(out, 0, sizeof *out);
    out->params = np * 4;
    out->grads = np * (m->g16 ? 2 : 4) + (m->gacc ? np * 4 : 0);
    if (o) {
        const optimizer_view v = optimizer_state(o);
        out->optimizer = 4 * (v.n1 + v.n2);
    }
    /* The pool's buffers as act_plan lists them (it only takes their addresses here). */
    carve *c = malloc(carve_max(m) * sizeof *c);
    const int k = c ? act_plan((dt_model *)m, c) : 0;
    for (int j = 0; j < k; j++) {
        if (c[j].kind == CARVE_ACT) out->activations += c[j].bytes;
        if (c[j].kind == CARVE_WORK) out->workspace += c[j].bytes;
        if (c[j].kind == CARVE_P16) out->params += c[j].bytes; /* the 16-bit copy of a GPU model */
    }
    free(c);
    out->pool = m->pool_bytes;
    m->be->ops->mem_info(m->be, &out->device_free, &out->device_total);
}

/* ---------------------------------------------------------------- checkpoint access */

uint64_t model_fingerprint(const dt_model *m)
{
    uint64_t h = FNV1A_OFFSET;
    int v[4 + 8];
    for (int i = -1; i < m->spec.n; i++) {
        int k = 0;
        if (i < 0) {
            v[k++] = m->spec.in_c, v[k++] = m->spec.in_h, v[k++] = m->spec.in_w;
        } else {
            const layer *l = &m->spec.layers[i];
            v[k++] = (int)l->kind, v[k++] = l->out, v[k++] = l->k, v[k++] = l->stride, v[k++] = l->pad;
            v[k++] = l->out_c, v[k++] = l->out_h, v[k++] = l->out_w;
        }
        for (int j = 0; j < k; j++) h = fnv1a_int(h, (uint32_t)v[j], 4);
    }
    return h;
}

const float *model_params_const(const dt_model *m) { return m->params; }

dt_status dt_model_get_params(const dt_model *m, float *host)
{
    return m->be->ops->to_host(m->be, host, m->params, m->spec.num_params * sizeof *host);
}

/* A backend whose memory is not host memory is the GPU one. */
int dt_model_on_gpu(const dt_model *m) { return !m->be->ops->host_memory; }

dt_status dt_model_set_params(dt_model *m, const float *host)
{
    if (!m || !host) return status_set_error(DT_ERR_INVALID_ARG, "dt_model_set_params: model or parameters are NULL");
    dt_status s = model_wait_inflight(m);
    return s ? s : model_params_from_host(m, host);
}

dt_status model_params_from_host(dt_model *m, const float *host)
{
    return m->be->ops->to_device(m->be, m->params, host, m->spec.num_params * sizeof *host);
}
