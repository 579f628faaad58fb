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
#include "runtime/model/model_plan.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_verdict.h"
#include "base/hash.h"
#include "base/rng.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    model_params_changed(m);
    if (host) return DT_OK;
    dt_status s = m->be->ops->to_device(m->be, m->params, p, m->spec.num_params * sizeof *p);
    free(p);
    return s;
}

/* Frees the activation pool and forgets every buffer carved from it. */
void model_free_acts(dt_model *m)
{
    model_graph_drop(m); /* they hold the buffers freed here */
    m->be->ops->free(m->be, m->pool);
    m->pool = NULL;
    m->pool_bytes = 0;
    for (int i = 0; i < m->spec.n; i++) {
        if (m->act) m->act[i] = NULL;
        if (m->pool_idx) m->pool_idx[i] = NULL;
        if (m->relu_mask) m->relu_mask[i] = NULL;
    }
    for (int j = 0; j < 2; j++) m->dbuf[j] = NULL;
    m->sx = m->sy = m->sdy = m->sw = m->sg = m->st = NULL;
    m->p16 = m->x16 = NULL;
    m->p16_current = 0;
    /* The spare is an allocation of its own (and may be where p16 pointed, after a swap). */
    m->be->ops->free(m->be, m->p16_spare_own);
    m->p16_spare = m->p16_spare_own = NULL;
    m->p16_spare_failed = 0; /* tried again with the next pool */
    m->ws = NULL;
}

/* A buffer on the model's backend, or NULL (dt_last_error says why). */
static void *mbuf(const dt_model *m, size_t bytes, const char *what)
{
    void *p = NULL;
    return m->be->ops->alloc(m->be, bytes, what, &p) ? NULL : p;
}

/* The model field a carved buffer of the pool becomes. */
static void **carve_field(dt_model *m, const carve *c)
{
    switch (c->slot) {
        case SLOT_OUTPUT: return &m->act[c->index];
        case SLOT_POOL_IDX: return (void **)&m->pool_idx[c->index];
        case SLOT_RELU_MASK: return &m->relu_mask[c->index];
        case SLOT_DBUF: return &m->dbuf[c->index];
        case SLOT_WS: return (void **)&m->ws;
        case SLOT_SX: return (void **)&m->sx;
        case SLOT_SY: return (void **)&m->sy;
        case SLOT_SDY: return (void **)&m->sdy;
        case SLOT_SW: return (void **)&m->sw;
        case SLOT_SG: return (void **)&m->sg;
        case SLOT_ST: return (void **)&m->st;
        case SLOT_X16: return (void **)&m->x16;
        case SLOT_P16: return (void **)&m->p16;
    }
    return NULL;
}

/* Allocates the activation pool of m->prec (after model_free_acts) as one allocation, sized for
 * the largest batch and reused by every step, and carves the per-step buffers from it: layer
 * outputs, the backward buffers, pooling indices, the convolution workspace and (16-bit) the
 * conversion scratch. 0 when out of memory (dt_last_error says how much was asked). */
int model_alloc_acts(dt_model *m)
{
    carve *c = malloc(carve_max(&m->spec) * sizeof *c);
    if (!c) {
        status_set_error(DT_ERR_NOMEM, "out of memory planning the activation pool");
        return 0;
    }
    const int k = act_plan(&m->spec, m->be->ops, m->prec, m->max_batch, c);
    const size_t total = carve_pool_bytes(c, k);
    if (total == SIZE_MAX) {
        free(c);
        status_set_error(DT_ERR_NOMEM,
                         "the activations of this model at batch %d need more than 2^64 bytes: use fewer or smaller "
                         "layers, or a smaller batch",
                         m->max_batch);
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "the %s activation pool", m->prec == DT_F32 ? "fp32" : "16-bit");
    if (!(m->pool = mbuf(m, total, what))) {
        free(c);
        return 0;
    }
    m->pool_bytes = total;
    char *p = m->pool;
    for (int j = 0; j < k; j++) {
        *carve_field(m, &c[j]) = p;
        p += carve_aligned(c[j].bytes);
    }
    free(c);
    return 1;
}

void dt_model_free(dt_model *m)
{
    if (!m) return;
    /* Buckets still being reduced (an error path left them) finish before the buffers go, so no
     * reduction writes into freed memory; then the reducer and its communicator. A batch staged
     * ahead is waited for: its copy reads the caller's buffer and writes a slot freed below. */
    dt_reducer_free(m->red);
    (void)model_input_drop(m);
    model_free_acts(m);
    free(m->act);
    free(m->in);
    free(m->pool_idx);
    free(m->relu_mask);
    backend *be = m->be;
    /* The scaler's verdict flag is the one after the layers' in dflags. */
    if (m->dflags && be->ops->found_inf_release) be->ops->found_inf_release(be, m->dflags + m->spec.n);
    void *dev[] = {m->params, m->grads, m->g16, m->xdev, m->ldev, m->xdev2, m->ldev2, m->dflags, m->gacc};
    for (size_t j = 0; j < sizeof dev / sizeof *dev; j++) be->ops->free(be, dev[j]);
    be->ops->host_free(be, m->lossh);
    be->ops->host_free(be, m->live_host);
    free(m->prof_fwd);
    free(m->prof_bwd);
    model_spec_free(&m->spec);
    ctx_unhold(m->ctx, CTX_HELD_MODEL);
    free(m);
}

/* The part of dt_model_create each rank does alone: the backend, the spec, every buffer and the
 * parameters from seed. *out NULL on failure (everything freed, the error set). */
/* The context's placement picks the backend; across ranks the gradients go through NCCL, or (a
 * build without NCCL) through host memory by MPI: both take the backend's buffers. */
static dt_status model_pick_backend(dt_ctx *ctx, backend **out)
{
    backend *be = backend_cpu();
    dt_placement pl;
    dt_status s;
    if (ctx && dt_get_placement(ctx, &pl) == DT_OK && pl.device == DT_DEVICE_CUDA && (s = backend_cuda(&be))) return s;
    /* OpenBLAS's buffer before the model's memory: a limit too tight for both fails here with a
     * message, not in the first step's GEMM, where OpenBLAS would spin for ever (cpu/blas_reserve.c). */
    if (be->ops->host_memory && (s = backend_cpu_blas_reserve())) return s;
    *out = be;
    return DT_OK;
}

/* The buffers sized by the model and max_batch alone. A failed one stays NULL with the error set
 * (model_buffers_made checks them all at once). */
static void model_alloc_buffers(dt_model *m)
{
    backend *be = m->be;
    const size_t B = (size_t)m->max_batch, n = (size_t)m->spec.n;
    m->params = mbuf(m, m->spec.num_params * sizeof(float), "parameters");
    m->grads = mbuf(m, m->spec.num_params * sizeof(float), "gradients");
    /* One more than the layers: the last is the loss scaler's queued verdict (model_step.c); then
     * a step graph's optimizer values (model_graph.c). */
    m->dflags = mbuf(m, flags_bytes(n), "the finite-check flags");
    if (m->dflags) m->live_dev = (optim_consts *)(void *)((char *)m->dflags + flags_live_offset(n));
    if (!be->ops->host_memory) {
        m->xdev = mbuf(m, B * dt_model_input_size(m) * sizeof(float), "the input batch");
        m->ldev = mbuf(m, B * sizeof(int32_t), "the labels");
        if (be->ops->copy_in) {
            m->xdev2 = mbuf(m, B * dt_model_input_size(m) * sizeof(float), "the input batch");
            m->ldev2 = mbuf(m, B * sizeof(int32_t), "the labels");
        }
    }
    void *lossh = NULL;
    if (be->ops->host_alloc(be, sizeof *m->lossh, "the loss read back", &lossh) == DT_OK) m->lossh = lossh;
    m->act = calloc(n, sizeof *m->act);
    m->in = calloc(n, sizeof *m->in);
    m->pool_idx = calloc(n, sizeof *m->pool_idx);
    m->relu_mask = calloc(n, sizeof *m->relu_mask);
}

/* A new model trains in fp32, one step a batch, with the runtime's choices left to it. */
static void model_set_defaults(dt_model *m)
{
    m->prec = m->grad_t = DT_F32;
    m->inv_scale = m->grad_mul = 1.0f;
    m->accum_steps = 1;
    m->step_overlap = DT_STEP_OVERLAP_AUTO;
    m->graphs = DT_GRAPHS_AUTO;
    m->fused_relu = 1;
}

/* 1 when model_alloc_buffers made every buffer this backend needs; else 0 with the error set
 * (by the failed allocation itself, or here for the layer tables). */
static int model_buffers_made(const dt_model *m)
{
    const backend *be = m->be;
    const int host = be->ops->host_memory;
    if (!(m->params && m->grads && m->dflags && m->lossh && (host || (m->xdev && m->ldev)) &&
          (!be->ops->copy_in || host || (m->xdev2 && m->ldev2))))
        return 0;
    if (!(m->act && m->in && m->pool_idx && m->relu_mask)) {
        status_set_error(DT_ERR_NOMEM, "out of host memory for the model's layer tables");
        return 0;
    }
    return 1;
}

static dt_status model_build(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed, int max_batch,
                             dt_model **out)
{
    *out = NULL;
    if (max_batch < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_model_create: max_batch %d must be at least 1", max_batch);
    backend *be = NULL;
    dt_status s;
    if ((s = model_pick_backend(ctx, &be))) return s;
    dt_model *m = calloc(1, sizeof *m);
    if (!m) return status_set_error(DT_ERR_NOMEM, "out of memory for the model");
    if ((s = model_spec_parse(spec, input, &m->spec))) {
        free(m);
        return s;
    }
    m->ctx = ctx;
    ctx_hold(ctx, CTX_HELD_MODEL); /* dt_finalize refuses while the model lives */
    m->be = be;
    m->max_batch = max_batch;
    model_alloc_buffers(m);
    model_set_defaults(m);
    if ((s = plan_conv_shapes(&m->spec, max_batch))) {
        dt_model_free(m);
        return s;
    }
    if (!model_buffers_made(m) || !model_alloc_acts(m)) {
        /* dt_last_error names the allocation, the bytes asked for and (GPU) free, and the fix. */
        status_kept why;
        status_keep(&why);
        dt_model_free(m);
        return status_restore(DT_ERR_NOMEM, &why);
    }
    if ((s = model_init_params(m, seed))) {
        dt_model_free(m);
        return s;
    }
    *out = m;
    return DT_OK;
}

/* Every rank must build the same model: the broadcast of the parameters pairs each rank's buffer
 * with rank 0's, and a rank given another spec or input would reach it with another count (which
 * MPI leaves undefined). Every rank joins, also one whose own build failed or that was given no
 * `out` (own != DT_OK, m NULL), so that none waits for it: first the ranks' verdict, after which
 * every rank returns the code of the first rank that failed, naming it (that rank its own error);
 * then the architectures are compared by the fingerprint checkpoints check (model_fingerprint),
 * through dt_broadcast and dt_check_replicas, all under the collective deadline. */
static dt_status model_check_ranks(dt_ctx *ctx, const dt_model *m, dt_status own, const char *spec, const char *input)
{
    if (!ctx || dt_world_size(ctx) <= 1) return own;
    dt_status s = rank_verdict_status(ctx, own, "dt_model_create", ", so no rank has a model");
    if (s) return s;
    uint64_t mine = model_fingerprint(m), zero = mine;
    int differ = 0, first = -1;
    s = dt_broadcast(ctx, &zero, sizeof zero, DT_U8, 0); /* rank 0's, for the message */
    if (!s) s = dt_check_replicas(ctx, &mine, sizeof mine, &differ, &first);
    if (s != DT_ERR_NUMERIC) return s;
    char this_rank[320] = ""; /* a rank that differs from rank 0 says what it was given */
    if (mine != zero)
        snprintf(this_rank, sizeof this_rank, "; this rank (%d) was given spec \"%.120s\" and input \"%.40s\"",
                 dt_rank(ctx), spec ? spec : "", input ? input : "(the preset's)");
    /* Every rank knows this verdict (dt_check_replicas gave each the same count). */
    return status_mark_shared(
        status_set_error(DT_ERR_INVALID_ARG,
                         "dt_model_create: %d of the %d ranks built another model than rank 0 (the first is rank "
                         "%d)%s: every rank must pass the same spec and input, since the ranks train one model "
                         "together",
                         differ, dt_world_size(ctx), first, this_rank));
}

dt_status dt_model_create(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed, int max_batch,
                          dt_model **out)
{
    /* A NULL out is this rank's failure like a bad spec: nothing is built, and the rank still
     * joins the check of the ranks below, the first collective its peers enter, so that they fail
     * at once, naming it, instead of waiting there until the watchdog. */
    dt_model *m = NULL;
    dt_status s = out ? model_build(ctx, spec, input, seed, max_batch, &m)
                      : status_null_arg("dt_model_create", "out", "pass a dt_model * to receive the model");
    if (out) *out = NULL;
    s = model_check_ranks(ctx, m, s, spec, input); /* collective: every rank joins, also a failed one */
    /* Identical start on every rank, whatever each rank computed. */
    if (!s && ctx && dt_world_size(ctx) > 1) s = dt_broadcast(ctx, m->params, m->spec.num_params, DT_F32, 0);
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    if (!s) s = dt_model_set_sync(m, &sc);
    if (s) {
        status_kept why;
        status_keep(&why);
        dt_model_free(m);
        return status_restore(s, &why);
    }
    *out = m;
    return DT_OK;
}

size_t dt_model_num_params(const dt_model *m) { return m ? m->spec.num_params : 0; }
int model_max_batch(const dt_model *m) { return m ? m->max_batch : 0; }
/* A GPU model's step returns before its optimizer (and a reducer's averaging) has finished on the
 * device: before the caller's own kernels, on whatever stream, use its buffers, that work must be
 * done. These calls return a pointer, not a status: a wait that failed (a device fault, which
 * CUDA keeps) fails the next call that computes with m instead. */
void model_device_work_done(dt_model *m)
{
    if (!m->be->ops->host_memory) (void)m->be->ops->sync(m->be);
}

/* The caller may write through the pointer from now on: the 16-bit copy is cast again before the
 * next forward (writes made later, through a pointer kept, are announced by
 * dt_model_params_changed). */
float *dt_model_params(dt_model *m)
{
    if (!m) return NULL;
    model_device_work_done(m);
    model_params_changed(m);
    return m->params;
}

void dt_model_params_changed(dt_model *m)
{
    if (m) model_params_changed(m);
}

dt_status dt_model_synchronize(dt_model *m)
{
    if (!m)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_model_synchronize: m is NULL: pass the model dt_model_create made");
    if (m->be->ops->host_memory) return DT_OK;
    const dt_status s = m->be->ops->sync(m->be);
    return s ? status_prefix(s, "dt_model_synchronize") : DT_OK;
}

float *dt_model_grads(dt_model *m)
{
    if (!m || m->g16) return NULL;
    model_device_work_done(m);
    return m->grads;
}
size_t dt_model_input_size(const dt_model *m) { return m ? (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w : 0; }
int dt_model_num_classes(const dt_model *m) { return m ? m->spec.classes : 0; }

void dt_model_input_shape(const dt_model *m, int *c, int *h, int *w)
{
    if (c) *c = m ? m->spec.in_c : 0;
    if (h) *h = m ? m->spec.in_h : 0;
    if (w) *w = m ? m->spec.in_w : 0;
}

void dt_model_describe(const dt_model *m, char *buf, size_t n)
{
    static const char *names[] = {"fc", "conv", "relu", "pool", "flatten"};
    if (!buf || !n) return;
    *buf = '\0';
    if (!m) return;
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
    if (!buf || !n) return;
    if (m)
        model_spec_layer_name(&m->spec, i, buf, n);
    else
        snprintf(buf, n, "-");
}

void dt_model_memory(const dt_model *m, const dt_optimizer *o, dt_memory_summary *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!m) return;
    const size_t np = m->spec.num_params;
    out->params = np * 4;
    out->grads = np * (m->g16 ? 2 : 4) + (m->gacc ? np * 4 : 0);
    if (o) {
        out->optimizer = optimizer_state_bytes(o); /* this rank's: 1/W of it under --zero 1 */
    }
    /* The pool's buffers as act_plan lists them, the plan dt_model_plan_memory makes too. */
    carve *c = malloc(carve_max(&m->spec) * sizeof *c);
    const int k = c ? act_plan(&m->spec, m->be->ops, m->prec, m->max_batch, c) : 0;
    for (int j = 0; j < k; j++) {
        if (c[j].kind == CARVE_ACT) out->activations += c[j].bytes;
        if (c[j].kind == CARVE_WORK) out->workspace += c[j].bytes;
        if (c[j].kind == CARVE_P16) out->params += c[j].bytes; /* the 16-bit copy of a GPU model */
    }
    if (m->p16_spare_own) out->params += np * sizeof(uint16_t); /* and its spare (model_overlap.c) */
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

dt_status dt_model_check_replicas(dt_ctx *ctx, const dt_model *m, int *differ, int *first_rank)
{
    if (!ctx || !m) return status_set_error(DT_ERR_INVALID_ARG, "dt_model_check_replicas: ctx or model is NULL");
    /* Only read: model_params_const leaves the 16-bit copy current, as dt_model_params would not. */
    return dt_check_replicas(ctx, model_params_const(m), m->spec.num_params * sizeof(float), differ, first_rank);
}

dt_status dt_model_get_params(const dt_model *m, float *host)
{
    if (!m) return status_null_arg("dt_model_get_params", "m", "pass the model dt_model_create made");
    if (!host)
        return status_null_arg("dt_model_get_params", "host",
                               "pass host memory of dt_model_num_params floats to copy the parameters into");
    return m->be->ops->to_host(m->be, host, m->params, m->spec.num_params * sizeof *host);
}

/* A backend whose memory is not host memory is the GPU one. */
int dt_model_on_gpu(const dt_model *m) { return m && !m->be->ops->host_memory; }

dt_status dt_model_set_params(dt_model *m, const float *host)
{
    if (!m) return status_null_arg("dt_model_set_params", "m", "pass the model dt_model_create made");
    if (!host) return status_null_arg("dt_model_set_params", "host", "pass dt_model_num_params floats of host memory");
    /* As dt_model_evaluate: a pending verdict taken, a gradient reduction under way left open. */
    dt_status s = dt_model_settle_step(m, NULL);
    return s ? s : model_params_from_host(m, host);
}

dt_status model_params_from_host(dt_model *m, const float *host)
{
    model_params_changed(m);
    return m->be->ops->to_device(m->be, m->params, host, m->spec.num_params * sizeof *host);
}
