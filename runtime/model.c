/*
 * model.c - dt_model: a layer-list network on one flat parameter buffer, its forward and backward
 * passes over the kernel op table, and the public optimizer and kernel entry points.
 *
 * Memory is sized once for the largest batch: one output buffer per layer (ReLU works in place on
 * its input's buffer and flatten aliases it, since no backward pass needs the pre-ReLU values),
 * two ping-pong buffers for the gradients flowing backward, argmax indices per pooling layer, and
 * one convolution workspace shared by all layers. A step allocates nothing.
 */
#include "model.h"
#include "model_internal.h"
#include "devmem.h"
#ifdef DTRAIN_HAVE_CUDA
#include "cuda_ops.h"
#endif
#include "amp.h"
#include "bucket.h"
#include "clock.h"
#include "cast.h"
#include "coll.h"
#include "ctx_internal.h"
#include "engine.h"
#include "rng.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>




static dt_status model_wait_inflight(dt_model *m);

static conv_shape layer_conv_shape(const layer *l, int batch)
{
    conv_shape cs = {.batch = batch, .c_in = l->in_c, .h = l->in_h, .w = l->in_w, .c_out = l->out,
                     .k = l->k, .stride = l->stride, .pad = l->pad};
    conv_shape_init(&cs);
    return cs;
}

/* PyTorch's default for Linear and Conv2d: weights and biases uniform in +-1/sqrt(fan_in). Made on
 * the host, then copied to a GPU model's device. */
static dt_status model_init_params(dt_model *m, uint64_t seed)
{
    float *p = m->params;
    if (m->cuda && !(p = malloc((m->spec.num_params ? m->spec.num_params : 1) * sizeof *p)))
        return dt_set_error(DT_ERR_NOMEM, "out of host memory initializing the parameters");
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        if (l->kind != LAYER_FC && l->kind != LAYER_CONV) continue;
        size_t fan_in = l->kind == LAYER_FC ? (size_t)l->in_c : (size_t)l->in_c * l->k * l->k;
        float bound = 1.0f / sqrtf((float)fan_in);
        for (size_t j = 0; j < l->w_n + l->b_n; j++)
            p[l->w_off + j] = bound * rng_uniform_pm1(rng_at(seed, 0x5041524dull + (uint64_t)i, j));
    }
    if (!m->cuda) return DT_OK;
    dt_status s = devmem_to_device(1, m->params, p, m->spec.num_params * sizeof *p);
    free(p);
    return s;
}

/* Frees the activation pool and forgets every buffer carved from it. */
static void model_free_acts(dt_model *m)
{
    devmem_free(m->cuda, m->pool);
    m->pool = NULL;
    m->pool_bytes = 0;
    for (int i = 0; i < m->spec.n; i++) {
        if (m->act) m->act[i] = NULL;
        if (m->a16) m->a16[i] = NULL;
        if (m->pool_idx) m->pool_idx[i] = NULL;
    }
    for (int j = 0; j < 2; j++) m->dbuf[j] = NULL, m->d16[j] = NULL;
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

/* A buffer on the model's device, or NULL (dt_last_error says why). */
static void *mbuf(const dt_model *m, size_t bytes, const char *what)
{
    void *p = NULL;
    return devmem_alloc(m->cuda, bytes, what, &p) ? NULL : p;
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

static int act_plan(dt_model *m, carve *c)
{
    const size_t B = (size_t)m->max_batch, na = B * m->spec.max_act, e = m->prec == DT_F32 ? 4 : 2;
    int k = 0;
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        if (layer_owns_output(m, i))
            c[k++] = (carve){m->prec == DT_F32 ? (void **)&m->act[i] : (void **)&m->a16[i], B * layer_out_n(l) * e,
                             CARVE_ACT};
        if (l->kind == LAYER_POOL)
            c[k++] = (carve){(void **)&m->pool_idx[i], B * layer_out_n(l) * sizeof(int32_t), CARVE_ACT};
    }
    for (int j = 0; j < 2; j++)
        c[k++] = (carve){m->prec == DT_F32 ? (void **)&m->dbuf[j] : (void **)&m->d16[j], na * e, CARVE_ACT};
    size_t ws = 0;
    for (int i = 0; i < m->spec.n; i++)
        if (m->spec.layers[i].kind == LAYER_CONV) {
            const size_t need = m->ops->conv_ws_floats(&m->spec.layers[i].cs);
            if (need > ws) ws = need;
        }
    if (ws) c[k++] = (carve){(void **)&m->ws, ws * sizeof(float), CARVE_WORK};
    if (m->prec == DT_F32) return k;
    size_t sx, sy, sdy, sw, st;
    model_amp_scratch(m, &sx, &sy, &sdy, &sw, &st);
    c[k++] = (carve){(void **)&m->sx, sx * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sy, sy * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sdy, sdy * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sw, sw * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->sg, sw * sizeof(float), CARVE_WORK};
    c[k++] = (carve){(void **)&m->st, st * sizeof(float), CARVE_WORK};
    if (m->cuda) {
        c[k++] = (carve){(void **)&m->p16, m->spec.num_params * sizeof(uint16_t), CARVE_P16};
        c[k++] = (carve){(void **)&m->x16, B * dt_model_input_size(m) * sizeof(uint16_t), CARVE_WORK};
    }
    return k;
}

#define POOL_ALIGN 256 /* every buffer of the pool starts on a 256-byte boundary */

/* Allocates the activation pool of m->prec (after model_free_acts) as one allocation, sized for
 * the largest batch and reused by every step, and carves the per-step buffers from it: layer
 * outputs, the backward buffers, pooling indices, the convolution workspace and (16-bit) the
 * conversion scratch. 0 when out of memory (dt_last_error says how much was asked). */
static int model_alloc_acts(dt_model *m)
{
    carve *c = malloc(carve_max(m) * sizeof *c);
    if (!c) {
        dt_set_error(DT_ERR_NOMEM, "out of memory planning the activation pool");
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
    /* Buckets still being reduced by the context's NCCL backend (an error path left them): wait, so
     * that the backend's next wait starts clean and no reduction writes into freed memory. */
    if (m->dcoll) model_wait_inflight(m);
    model_free_acts(m);
    bucket_plan_free(&m->plan);
    engine_destroy(m->eng);
    free(m->player);
    free(m->pending);
    free(m->act);
    free(m->a16);
    free(m->in);
    free(m->in16);
    free(m->pool_idx);
    devmem_free(m->cuda, m->params);
    devmem_free(m->cuda, m->grads);
    devmem_free(m->cuda, m->xdev);
    devmem_free(m->cuda, m->ldev);
    devmem_free(m->cuda, m->dflags);
    free(m->g16);
    free(m->prof_fwd);
    free(m->prof_bwd);
    model_spec_free(&m->spec);
    free(m);
}

dt_status dt_model_create(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed, int max_batch,
                          dt_model **out)
{
    *out = NULL;
    if (max_batch < 1) return dt_set_error(DT_ERR_INVALID_ARG, "batch size %d must be at least 1", max_batch);
    dt_placement pl;
    int cuda = 0;
    if (ctx) {
        dt_get_placement(ctx, &pl);
        cuda = pl.device == DT_DEVICE_CUDA;
    }
#ifdef DTRAIN_HAVE_CUDA
    /* Across ranks the gradients go through NCCL, or (a build without NCCL) through host memory
     * by MPI: both take device buffers. */
    if (cuda && cuda_ops_set_stream(NULL)) return DT_ERR_DEVICE;
#else
    if (cuda)
        return dt_set_error(DT_ERR_UNSUPPORTED, "this dtrain was built without CUDA: use --device cpu");
#endif
    dt_model *m = calloc(1, sizeof *m);
    if (!m) return dt_set_error(DT_ERR_NOMEM, "out of memory for the model");
    dt_status s = model_spec_parse(spec, input, &m->spec);
    if (s) {
        free(m);
        return s;
    }
    m->ctx = ctx;
    m->cuda = cuda;
#ifdef DTRAIN_HAVE_CUDA
    m->ops = cuda ? kernels_cuda() : kernels_cpu();
#else
    m->ops = kernels_cpu();
#endif
    m->max_batch = max_batch;
    const size_t B = (size_t)max_batch, n = (size_t)m->spec.n;
    m->params = mbuf(m, m->spec.num_params * sizeof(float), "parameters");
    m->grads = mbuf(m, m->spec.num_params * sizeof(float), "gradients");
    if (cuda) {
        m->xdev = mbuf(m, B * dt_model_input_size(m) * sizeof(float), "the input batch");
        m->ldev = mbuf(m, B * sizeof(int32_t), "the labels");
        m->dflags = mbuf(m, n * sizeof(int), "the finite-check flags");
    }
    m->act = calloc(n, sizeof *m->act);
    m->a16 = calloc(n, sizeof *m->a16);
    m->in = calloc(n, sizeof *m->in);
    m->in16 = calloc(n, sizeof *m->in16);
    m->pool_idx = calloc(n, sizeof *m->pool_idx);
    m->prec = m->grad_t = DT_F32;
    m->inv_scale = 1.0f;
    m->bad_layer = -1;
    for (size_t i = 0; i < n; i++) {
        layer *l = &m->spec.layers[i];
        if (l->kind == LAYER_CONV) l->cs = layer_conv_shape(l, max_batch);
    }
    int ok = m->params && m->grads && (!cuda || (m->xdev && m->ldev && m->dflags)); /* else the error is set */
    if (ok && !(m->act && m->a16 && m->in && m->in16 && m->pool_idx)) {
        dt_set_error(DT_ERR_NOMEM, "out of host memory for the model's layer tables");
        ok = 0;
    }
    if (!ok || !model_alloc_acts(m)) {
        /* dt_last_error names the allocation, the bytes asked for and (GPU) free, and the fix. */
        char why[1024];
        snprintf(why, sizeof why, "%s", dt_last_error());
        dt_model_free(m);
        return dt_set_error(DT_ERR_NOMEM, "%s", why);
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
    int w = snprintf(buf, n, "input %dx%dx%d, %zu parameters (%.2f MiB)\n", m->spec.in_c, m->spec.in_h,
                     m->spec.in_w, m->spec.num_params, (double)m->spec.num_params * 4 / (1 << 20));
    if (w > 0) used = (size_t)w < n ? (size_t)w : n;
    for (int i = 0; i < m->spec.n && used < n; i++) {
        const layer *l = &m->spec.layers[i];
        w = snprintf(buf + used, n - used, "  %2d %-7s -> %dx%dx%d  %zu params\n", i, names[l->kind], l->out_c,
                     l->out_h, l->out_w, l->w_n + l->b_n);
        if (w < 0) break;
        used += (size_t)w < n - used ? (size_t)w : n - used;
    }
}

static dt_status model_layer_done(dt_model *m, int p);

/* The stream the ops run on, which the NCCL buckets follow (NULL: the default stream). */
static void *compute_stream(void)
{
#ifdef DTRAIN_HAVE_CUDA
    return cuda_ops_stream();
#else
    return NULL;
#endif
}

/* Waits for the buckets of the last backward still being reduced. */
static dt_status model_wait_inflight(dt_model *m)
{
    if (!m->in_flight) return DT_OK;
    m->in_flight = 0;
    return m->dcoll ? m->dcoll->ops->wait_all(m->dcoll, compute_stream()) : engine_wait_all(m->eng);
}

/* Starts the allreduce of bucket b: on the NCCL stream for a GPU model, else by the engine. */
static dt_status bucket_start(dt_model *m, int b)
{
    const bucket *bk = &m->plan.b[b];
    if (m->dcoll)
        return m->dcoll->ops->start(m->dcoll, m->grads + bk->off, bk->n, DT_F32, m->sync.op, compute_stream());
    return m->g16 ? engine_start16(m->eng, m->g16 + bk->off, bk->n, m->sync.op, b, m->grad_t)
                  : engine_start(m->eng, m->grads + bk->off, bk->n, m->sync.op, b, m->sync.grad_comm);
}

double model_prof_mark(dt_model *m)
{
    if (!m->prof) return 0;
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) cuda_ops_sync();
#endif
    const double t = clock_now_s(), d = t - m->prof_t;
    m->prof_t = t;
    return d;
}

dt_status dt_model_set_profile(dt_model *m, int on)
{
    if (on && !m->prof_fwd) {
        m->prof_fwd = calloc((size_t)m->spec.n, sizeof *m->prof_fwd);
        m->prof_bwd = calloc((size_t)m->spec.n, sizeof *m->prof_bwd);
        if (!m->prof_fwd || !m->prof_bwd) {
            free(m->prof_fwd), free(m->prof_bwd);
            m->prof_fwd = m->prof_bwd = NULL;
            return dt_set_error(DT_ERR_NOMEM, "out of memory for the profile");
        }
    }
    if (on) {
        memset(m->prof_fwd, 0, (size_t)m->spec.n * sizeof *m->prof_fwd);
        memset(m->prof_bwd, 0, (size_t)m->spec.n * sizeof *m->prof_bwd);
        memset(&m->prof_step, 0, sizeof m->prof_step);
    }
    m->prof = on != 0;
    return DT_OK;
}

void dt_model_profile(const dt_model *m, dt_step_profile *out)
{
    *out = m->prof_step;
    out->forward_s = out->backward_s = 0;
    for (int i = 0; m->prof_fwd && i < m->spec.n; i++) {
        out->forward_s += m->prof_fwd[i];
        out->backward_s += m->prof_bwd[i];
    }
}

void dt_model_layer_profile(const dt_model *m, int i, double *forward_s, double *backward_s)
{
    const int ok = m->prof_fwd && i >= 0 && i < m->spec.n;
    *forward_s = ok ? m->prof_fwd[i] : 0;
    *backward_s = ok ? m->prof_bwd[i] : 0;
}

/* Backward finished layer i's parameter gradients: the testing inf, the local finite check, then
 * the bucket bookkeeping. */
dt_status model_grads_done(dt_model *m, int i)
{
    const layer *l = &m->spec.layers[i];
    const size_t off = l->w_off, cnt = l->w_n + l->b_n;
    if (m->inject_inf && cnt) {
        m->inject_inf = 0;
        const float inf = INFINITY;
        if (m->g16)
            m->g16[off] = m->grad_t == DT_F16 ? 0x7c00u : 0x7f80u;
        else if (m->cuda) {
            dt_status s = devmem_to_device(1, m->grads + off, &inf, sizeof inf);
            if (s) return s;
        } else
            m->grads[off] = inf;
    }
#ifdef DTRAIN_HAVE_CUDA
    if (m->check_local && m->cuda) {
        cuda_flag_nonfinite(m->grads + off, cnt, m->dflags + i, m->fb_count);
        return model_layer_done(m, m->player[i]);
    }
#endif
    if (m->check_local && m->bad_layer < 0) {
        size_t bad;
        if (m->g16)
            bad = cpu_count_nonfinite16(m->grad_t, m->g16 + off, cnt);
        else
            bad = cpu_count_nonfinite(m->grads + off, cnt);
        if (bad) m->bad_layer = i;
    }
    return model_layer_done(m, m->player[i]);
}

dt_status dt_model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch,
                                    float grad_scale, double *loss_sum, int *correct)
{
    if (batch < 1 || batch > m->max_batch)
        return dt_set_error(DT_ERR_INVALID_ARG, "batch %d is outside 1..%d (the model's max batch)", batch,
                            m->max_batch);
    for (int i = 0; i < batch; i++)
        if (labels[i] < 0 || labels[i] >= m->spec.classes)
            return dt_set_error(DT_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", (int)labels[i], i,
                                m->spec.classes - 1);
    const kernel_ops *k = m->ops;
    const int n = m->spec.n;
    float *P = m->params, *G = m->grads;
    /* Gradients still being reduced from a previous call must land before they are overwritten. */
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
    for (int b = 0; b < m->plan.nb; b++) m->pending[b] = m->plan.b[b].nlayers;
    m->unreduced = m->ctx && dt_world_size(m->ctx) > 1;
    model_prof_mark(m);
    if (m->prof) m->prof_step.steps++;
    m->bad_layer = -1;
    m->fb_count++;
    m->inv_scale = 1.0f;
    if (m->cuda) {
        /* The batch goes to the device on the ops' stream, asynchronously from pinned memory (the
         * loader's); the loss read back after the forward pass waits for it, so x and labels are
         * free again when this returns. */
        dt_status s;
        if ((s = devmem_to_device_async(1, m->xdev, x, (size_t)batch * dt_model_input_size(m) * sizeof *x)) ||
            (s = devmem_to_device_async(1, m->ldev, labels, (size_t)batch * sizeof *labels)))
            return s;
        x = m->xdev;
        labels = m->ldev;
    }
    if (m->prec != DT_F32) {
        m->prof_step.input_s += model_prof_mark(m);
        dt_status s = model_fb16(m, x, labels, batch, grad_scale, loss_sum, correct);
#ifdef DTRAIN_HAVE_CUDA
        if (!s && m->cuda && cuda_ops_last_error()) {
            s = cuda_ops_last_error();
            cuda_ops_clear_error();
        }
#endif
        return s;
    }

    /* Forward. */
    m->prof_step.input_s += model_prof_mark(m);
    const float *in = x;
    for (int i = 0; i < n; i++) {
        const layer *l = &m->spec.layers[i];
        m->in[i] = in;
        /* ReLU overwrites its input unless that is x; flatten passes its input on. */
        float *y = m->act[i];
        if (l->kind == LAYER_RELU && !y) y = (float *)in;
        switch (l->kind) {
        case LAYER_FC:
            k->linear_fwd(in, P + l->w_off, P + l->b_off, y, batch, l->in_c, l->out);
            break;
        case LAYER_CONV: {
            conv_shape cs = l->cs;
            cs.batch = batch;
            k->conv_fwd(&cs, in, P + l->w_off, P + l->b_off, y, m->ws);
            break;
        }
        case LAYER_RELU:
            k->relu_fwd(in, y, (size_t)batch * layer_out_n(l));
            break;
        case LAYER_POOL:
            k->maxpool_fwd(in, y, m->pool_idx[i], batch, l->in_c, l->in_h, l->in_w, l->k);
            break;
        case LAYER_FLATTEN:
            break;
        }
        in = l->kind == LAYER_FLATTEN ? in : y;
        if (m->prof) m->prof_fwd[i] += model_prof_mark(m);
    }
    const float *logits = in;
    float *dcur = m->dbuf[0];
    int corr = 0;
    double loss = k->softmax_xent(logits, labels, dcur, batch, m->spec.classes, grad_scale, &corr);
    m->prof_step.loss_s += model_prof_mark(m);

    /* Backward, last layer first; each layer's parameter gradients are final when it is done. */
    for (int i = n - 1; i >= 0; i--) {
        const layer *l = &m->spec.layers[i];
        const float *lin = m->in[i];
        float *dprev = i ? (dcur == m->dbuf[0] ? m->dbuf[1] : m->dbuf[0]) : NULL;
        switch (l->kind) {
        case LAYER_FC:
            k->linear_bwd(lin, P + l->w_off, dcur, dprev, G + l->w_off, G + l->b_off, batch, l->in_c, l->out);
            break;
        case LAYER_CONV: {
            conv_shape cs = l->cs;
            cs.batch = batch;
            k->conv_bwd_filter(&cs, lin, dcur, G + l->w_off, G + l->b_off, m->ws);
            if (dprev) k->conv_bwd_data(&cs, dcur, P + l->w_off, dprev, m->ws);
            break;
        }
        case LAYER_RELU:
            /* The output of layer i is the input of layer i + 1 (or the logits). */
            k->relu_bwd(i + 1 < n ? m->in[i + 1] : logits, dcur, dcur, (size_t)batch * layer_out_n(l));
            dprev = dcur;
            break;
        case LAYER_POOL:
            if (dprev) k->maxpool_bwd(dcur, m->pool_idx[i], dprev, batch, l->in_c, l->in_h, l->in_w, l->k);
            break;
        case LAYER_FLATTEN:
            dprev = dcur;
            break;
        }
        if (l->kind == LAYER_FC || l->kind == LAYER_CONV) {
            dt_status s = model_grads_done(m, i);
            if (s) return s;
        }
        if (m->prof) m->prof_bwd[i] += model_prof_mark(m);
        if (dprev) dcur = dprev;
    }
    *loss_sum = loss;
    *correct = corr;
#ifdef DTRAIN_HAVE_CUDA
    /* Launches are checked as they go; a failure is reported here, once per step. */
    if (m->cuda && cuda_ops_last_error()) {
        dt_status s = cuda_ops_last_error();
        cuda_ops_clear_error();
        return s;
    }
#endif
    return DT_OK;
}

void dt_sync_defaults(dt_sync_config *c)
{
    memset(c, 0, sizeof *c);
    c->overlap = 1;
    c->bucket_mb = 25.0;
    c->first_bucket_mb = 1.0;
    c->op = DT_AVG;
    c->grad_comm = DT_F32;
}

int dt_model_num_buckets(const dt_model *m) { return m->plan.nb; }
size_t dt_model_bucket_size(const dt_model *m, int i) { return i >= 0 && i < m->plan.nb ? m->plan.b[i].n : 0; }

/* Backward finished parameter layer p: start its bucket's allreduce when the bucket is complete. */
static dt_status model_layer_done(dt_model *m, int p)
{
    if ((!m->eng && !m->dcoll) || !m->sync.overlap || p < 0) return DT_OK;
    int b = m->plan.of_layer[p];
    if (--m->pending[b] == 0) {
        dt_status s = bucket_start(m, b);
        if (s) return s;
        m->in_flight++;
    }
    if (m->eng) engine_poke(m->eng);
    return DT_OK;
}

dt_status dt_model_set_sync(dt_model *m, const dt_sync_config *c)
{
    if (!(c->bucket_mb >= 0) || !(c->first_bucket_mb >= 0) || c->bucket_mb > 1e6 || c->first_bucket_mb > 1e6)
        return dt_set_error(DT_ERR_INVALID_ARG, "bucket sizes %g / %g MiB must be from 0 to 1e6", c->bucket_mb,
                            c->first_bucket_mb);
    if (c->grad_comm != DT_F32 && c->grad_comm != DT_F16 && c->grad_comm != DT_BF16)
        return dt_set_error(DT_ERR_INVALID_ARG, "gradient communication type %d must be DT_F32, DT_F16 or DT_BF16",
                            (int)c->grad_comm);
    if (c->op != DT_SUM && c->op != DT_AVG)
        return dt_set_error(DT_ERR_INVALID_ARG, "gradient reduction %d must be DT_SUM or DT_AVG", (int)c->op);
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
    /* The parameter layers, in forward order. */
    int np = 0;
    for (int i = 0; i < m->spec.n; i++) np += m->spec.layers[i].w_n + m->spec.layers[i].b_n > 0;
    size_t *off = calloc((size_t)np + 1, sizeof *off), *cnt = calloc((size_t)np + 1, sizeof *cnt);
    int *player = calloc((size_t)m->spec.n, sizeof *player);
    if (!off || !cnt || !player) {
        free(off), free(cnt), free(player);
        return dt_set_error(DT_ERR_NOMEM, "out of memory planning buckets");
    }
    int p = 0;
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        player[i] = -1;
        if (l->w_n + l->b_n == 0) continue;
        off[p] = l->w_off;
        cnt[p] = l->w_n + l->b_n;
        player[i] = p++;
    }
    bucket_plan plan;
    dt_status s = bucket_plan_build(off, cnt, np, sizeof(float), (size_t)(c->first_bucket_mb * 1048576.0),
                                    (size_t)(c->bucket_mb * 1048576.0), &plan);
    free(off);
    free(cnt);
    if (s) {
        free(player);
        return s;
    }
    int *pending = calloc((size_t)plan.nb, sizeof *pending);
    if (!pending) {
        free(player);
        bucket_plan_free(&plan);
        return dt_set_error(DT_ERR_NOMEM, "out of memory planning buckets");
    }
    /* Every rank must have the same plan, or the collectives would pair wrong buffers and hang.
     * DTRAIN_COMM_WORLD1=1 makes a GPU model reduce its buckets even in a world of one (a test of
     * the NCCL path on one GPU: a sum over one rank changes no bit). */
    const char *w1 = getenv("DTRAIN_COMM_WORLD1");
    const int comm1 = m->cuda && w1 && !strcmp(w1, "1");
    if (m->ctx && (dt_world_size(m->ctx) > 1 || comm1)) {
        /* Through dt_broadcast and dt_check_replicas, which run under the watchdog's deadline: a
         * rank that never arrives is named instead of hanging every other rank here. */
        unsigned long long mine[2] = {bucket_plan_hash(&plan), (unsigned long long)plan.nb};
        int64_t nb0 = plan.nb; /* rank 0's bucket count, for the message (broadcast moves bytes) */
        int differ = 0, first = -1;
        s = dt_broadcast(m->ctx, &nb0, 2, DT_F32, 0);
        if (!s) {
            s = dt_check_replicas(m->ctx, mine, sizeof mine, &differ, &first);
            if (s == DT_ERR_NUMERIC) {
                char own[64] = ""; /* the differing rank adds its own count */
                if ((long long)mine[1] != (long long)nb0 || dt_rank(m->ctx) == first)
                    snprintf(own, sizeof own, ", rank %d has %llu", dt_rank(m->ctx), mine[1]);
                s = dt_set_error(DT_ERR_INVALID_ARG, "%d rank(s) planned other gradient buckets than rank 0 (the "
                                 "first is rank %d; rank 0 has %lld buckets%s): every rank must use the same model "
                                 "and --bucket-mb / --first-bucket-mb", differ, first, (long long)nb0, own);
            }
        }
        /* A GPU model's gradients go to the context's device backend: bucket by bucket where it
         * can start them asynchronously (NCCL), else whole after backward (dt_model_sync_grads). */
        if (!s && !m->eng && !m->cuda) s = engine_create(ctx_world_comm(m->ctx), ctx_timeout(m->ctx), &m->eng);
        if (m->cuda) {
            coll *dc = ctx_device_coll(m->ctx);
            m->dcoll = dc && dc->ops->start ? dc : NULL;
        }
        if (s) {
            free(player), free(pending);
            bucket_plan_free(&plan);
            return s;
        }
    }
    bucket_plan_free(&m->plan);
    free(m->player);
    free(m->pending);
    m->plan = plan;
    m->player = player;
    m->pending = pending;
    m->sync = *c;
    return DT_OK;
}

static dt_status model_sync_grads(dt_model *m)
{
    /* A GPU backend without asynchronous starts (MPI through host memory): the whole buffer. */
    if (m->cuda && !m->dcoll && m->ctx && dt_world_size(m->ctx) > 1)
        return dt_allreduce(m->ctx, m->grads, m->spec.num_params, DT_F32, m->sync.op);
    if (!m->eng && !m->dcoll) return DT_OK; /* a world of one */
    m->in_flight = 1; /* whatever is started (none, some or all, even if a start fails): wait for it */
    if (!m->sync.overlap) {
        for (int b = 0; b < m->plan.nb; b++) {
            dt_status s = bucket_start(m, b);
            if (s) return s;
        }
    }
    return model_wait_inflight(m);
}

dt_status dt_model_sync_grads(dt_model *m)
{
    dt_status s = model_sync_grads(m);
    if (!s) m->unreduced = 0;
    return s;
}

/* ---------------------------------------------------------------- optimizers */

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
        return dt_set_error(DT_ERR_INVALID_ARG, "unknown optimizer %d (use sgd or adamw)", (int)c->kind);
    if (!(c->lr > 0) || !isfinite(c->lr))
        return dt_set_error(DT_ERR_INVALID_ARG, "learning rate %g must be a positive number", (double)c->lr);
    if (!(c->momentum >= 0 && c->momentum < 1))
        return dt_set_error(DT_ERR_INVALID_ARG, "momentum %g must be in [0, 1)", (double)c->momentum);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return dt_set_error(DT_ERR_INVALID_ARG, "weight decay %g must be >= 0", (double)c->weight_decay);
    if (c->kind == DT_OPTIM_ADAMW && (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) ||
                                      !(c->eps > 0)))
        return dt_set_error(DT_ERR_INVALID_ARG, "AdamW needs betas in [0, 1) and eps > 0 (got %g, %g, %g)",
                            (double)c->beta1, (double)c->beta2, (double)c->eps);
    dt_optimizer *o = calloc(1, sizeof *o);
    if (!o) return dt_set_error(DT_ERR_NOMEM, "out of memory for the optimizer");
    o->cfg = *c;
    o->n = n;
    int need1 = c->kind == DT_OPTIM_ADAMW || c->momentum > 0, need2 = c->kind == DT_OPTIM_ADAMW;
    if (need1) o->s1 = calloc(n ? n : 1, sizeof(float));
    if (need2) o->s2 = calloc(n ? n : 1, sizeof(float));
    if ((need1 && !o->s1) || (need2 && !o->s2)) {
        dt_optimizer_free(o);
        return dt_set_error(DT_ERR_NOMEM, "out of memory for the optimizer state (%zu MiB)",
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

/* ---------------------------------------------------------------- mixed precision */

static const char *dtype_name(dt_dtype t) { return t == DT_F16 ? "fp16" : t == DT_BF16 ? "bf16" : "fp32"; }

dt_status dt_model_set_precision(dt_model *m, dt_dtype compute, dt_dtype grads)
{
    if (compute != DT_F32 && compute != DT_F16 && compute != DT_BF16)
        return dt_set_error(DT_ERR_INVALID_ARG, "precision %d must be DT_F32, DT_F16 or DT_BF16", (int)compute);
    if (m->cuda && grads != DT_F32)
        return dt_set_error(DT_ERR_UNSUPPORTED, "on the GPU, gradients of a %s model are kept in fp32 in this "
                            "version (pass DT_F32; dtrain train does)", dtype_name(compute));
    if (grads != DT_F32 && grads != compute)
        return dt_set_error(DT_ERR_INVALID_ARG, "gradients of a %s model are kept in %s or fp32, not %s",
                            dtype_name(compute), dtype_name(compute), dtype_name(grads));
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
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
            return dt_set_error(DT_ERR_NOMEM, "%s (%s at batch %d)%s", why, dtype_name(compute), m->max_batch,
                                ok ? "; the model stays in fp32" : "");
        }
    }
    const dt_dtype have = m->g16 ? m->grad_t : DT_F32;
    if (grads != have) {
        if (grads == DT_F32) {
            float *g = calloc(np, sizeof *g);
            if (!g) return dt_set_error(DT_ERR_NOMEM, "out of memory for fp32 gradients (%zu MiB)", (np * 4) >> 20);
            free(m->g16);
            m->g16 = NULL;
            m->grads = g;
        } else {
            uint16_t *g = calloc(np, sizeof *g);
            if (!g) return dt_set_error(DT_ERR_NOMEM, "out of memory for 16-bit gradients (%zu MiB)", (np * 2) >> 20);
            free(m->grads); /* from fp32, */
            free(m->g16);   /* or from the other 16-bit type */
            m->grads = NULL;
            m->g16 = g;
        }
    }
    m->grad_t = grads;
    return DT_OK;
}

dt_dtype dt_model_precision(const dt_model *m) { return m->prec; }
dt_dtype dt_model_grad_dtype(const dt_model *m) { return m->g16 ? m->grad_t : DT_F32; }

dt_status dt_model_unscale_grads(dt_model *m, float inv_scale, int *found_inf)
{
    if (!(inv_scale > 0) || !isfinite(inv_scale))
        return dt_set_error(DT_ERR_INVALID_ARG, "gradient unscale factor %g must be a positive number",
                            (double)inv_scale);
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
void dt_model_inject_inf(dt_model *m) { m->inject_inf = 1; }

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

dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o)
{
    if (!m || !o) return dt_set_error(DT_ERR_INVALID_ARG, "dt_model_optimizer_step: the model or optimizer is NULL");
    /* Each rank stepping on its own gradients makes the replicas drift apart while every printed
     * loss can still look right; say so at the first such step rather than never. */
    if (m->unreduced && !m->sync.allow_unreduced)
        return dt_set_error(DT_ERR_INVALID_ARG, "dt_model_optimizer_step: the gradients of the last backward were "
                            "not reduced across the %d ranks, so their parameters would drift apart: call "
                            "dt_model_sync_grads after dt_model_forward_backward (dt_model_train_step does both), "
                            "or set dt_sync_config.allow_unreduced = 1 if the loop skips the reduction on purpose",
                            dt_world_size(m->ctx));
    if (o->n != m->spec.num_params)
        return dt_set_error(DT_ERR_INVALID_ARG, "the optimizer was made for %zu parameters, the model has %zu", o->n,
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
    const float inv = m->inv_scale;
    for (size_t off = 0; off < o->n; off += BLK) {
        const size_t cnt = o->n - off < BLK ? o->n - off : BLK;
        cpu_cast_16_to_f32(m->grad_t, m->g16 + off, g, cnt);
        if (inv != 1.0f)
            for (size_t i = 0; i < cnt; i++) g[i] *= inv;
        if (c->kind == DT_OPTIM_SGD)
            k->sgd(m->params + off, g, o->s1 ? o->s1 + off : NULL, cnt, c->lr, c->momentum, c->weight_decay, o->t == 1);
        else
            k->adamw(m->params + off, g, o->s1 + off, o->s2 + off, cnt, c->lr, c->beta1, c->beta2, c->eps,
                     c->weight_decay, o->t);
    }
    return DT_OK;
}

void dt_model_memory(const dt_model *m, const dt_optimizer *o, dt_memory_summary *out)
{
    const size_t np = m->spec.num_params;
    memset(out, 0, sizeof *out);
    out->params = np * 4;
    out->grads = np * (m->g16 ? 2 : 4);
    out->optimizer = o ? 4 * ((o->s1 ? o->n : 0) + (o->s2 ? o->n : 0)) : 0;
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
    devmem_info(m->cuda, &out->device_free, &out->device_total);
}

/* ---------------------------------------------------------------- one training step */

dt_status dt_model_train_step(dt_model *m, dt_optimizer *o, dt_scaler *sc, const float *x, const int32_t *labels,
                              int batch, float grad_scale, dt_step_result *r)
{
    memset(r, 0, sizeof *r);
    const float ls = sc ? dt_scaler_scale(sc) : 1.0f;
    dt_status s = dt_model_forward_backward(m, x, labels, batch, grad_scale * ls, &r->loss_sum, &r->correct);
    if (s) return s;
    const double t0 = clock_now_s();
    if ((s = dt_model_sync_grads(m))) return s;
    r->comm_wait_s = clock_now_s() - t0;
    m->prof_step.allreduce_s += model_prof_mark(m);
    if (sc) {
        /* The reduced gradients are the same on every rank, and so is the verdict. */
        if ((s = dt_model_unscale_grads(m, 1.0f / ls, &r->skipped))) return s;
        if ((s = dt_scaler_update(sc, r->skipped))) return s;
        m->prof_step.check_s += model_prof_mark(m);
    }
    if (r->skipped) return DT_OK;
    s = dt_model_optimizer_step(m, o);
    m->prof_step.optimizer_s += model_prof_mark(m);
    return s;
}

/* ---------------------------------------------------------------- checkpoint access */

uint64_t model_fingerprint(const dt_model *m)
{
    uint64_t h = 1469598103934665603ull;
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
        for (int j = 0; j < k; j++)
            for (int b = 0; b < 4; b++) {
                h ^= ((uint32_t)v[j] >> (8 * b)) & 0xff;
                h *= 1099511628211ull;
            }
    }
    return h;
}

const float *model_params_const(const dt_model *m) { return m->params; }

dt_status dt_model_get_params(const dt_model *m, float *host)
{
    return devmem_to_host(m->cuda, host, m->params, m->spec.num_params * sizeof *host);
}

int dt_model_on_gpu(const dt_model *m) { return m->cuda; }

void optimizer_state(const dt_optimizer *o, dt_optim_config *cfg, int *t, const float **s1, size_t *n1,
                     const float **s2, size_t *n2)
{
    *cfg = o->cfg;
    *t = o->t;
    *s1 = o->s1;
    *n1 = o->s1 ? o->n : 0;
    *s2 = o->s2;
    *n2 = o->s2 ? o->n : 0;
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

dt_status model_params_from_host(dt_model *m, const float *host)
{
    return devmem_to_device(m->cuda, m->params, host, m->spec.num_params * sizeof *host);
}

/* ---------------------------------------------------------------- public kernels */

void dt_sgemm(int trans_a, int trans_b, int m, int n, int kk, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc)
{
    kernels_cpu()->gemm(trans_a, trans_b, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}

double dt_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                       float grad_scale, int *correct)
{
    return kernels_cpu()->softmax_xent(logits, labels, dlogits, batch, classes, grad_scale, correct);
}
