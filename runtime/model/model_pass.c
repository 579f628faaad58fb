/*
 * model_pass.c - the forward and backward pass of a dt_model, in any precision, over its
 * backend's op table: the one loop, which knows the table and m->prec and nothing of the device.
 * Forward keeps every layer's input for backward, and backward hands each layer's parameter
 * gradients to the reducer the moment they are final (model_grads_done, model_sync.c), so their
 * allreduce overlaps the layers still to come.
 *
 * In fp16/bf16 the table's layer entries take the 16-bit activations (and the fp32 input x of the
 * first layers, which they round as they read it) and write 16-bit outputs; how they compute
 * (widening into fp32 scratch on the CPU, tensor cores on a GPU) is the backend's business.
 */
#include "runtime/model/model_internal.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "runtime/test_hooks.h"

#include <stdio.h>

/* A span per layer on the training thread when a trace records (on a GPU: the time to enqueue
 * the layer's kernels, not their run time; the backend's trace_mark adds the run time on its
 * "gpu compute" track). tr is NULL when tracing is off: one branch a layer. */
static void layer_span_name(char *name, size_t n, int bwd, int i, layer_kind kind)
{
    static const char *const kinds[] = {"fc", "conv", "relu", "pool", "flatten"};
    snprintf(name, n, "%s %d %s", bwd ? "bwd" : "fwd", i, kinds[kind]);
}

/* Whether the device marks a layer of this kind: not a flatten, which runs nothing there (a span of two
 * back-to-back events would only say 0). */
static int device_marks(const backend *be, layer_kind kind) { return be->ops->trace_mark && kind != LAYER_FLATTEN; }

/* Begins a layer's span (returns its host begin time) or ends it, with the device's mark too. */
static dt_status trace_layer_begin(backend *be, int bwd, int i, layer_kind kind, const char *name, uint64_t *t0)
{
    *t0 = trace_now_ns();
    return device_marks(be, kind) ? be->ops->trace_mark(be, 0, name, bwd ? TRACE_CAT_BWD : TRACE_CAT_FWD, i) : DT_OK;
}

static dt_status trace_layer_end(trace_rec *tr, backend *be, int bwd, int i, layer_kind kind, const char *name,
                                 uint64_t t0)
{
    const dt_status s = device_marks(be, kind) ? be->ops->trace_mark(be, 1, name, 0, i) : DT_OK;
    trace_rec_add(tr, name, bwd ? TRACE_CAT_BWD : TRACE_CAT_FWD, TRACE_TRACK_TRAIN, t0, trace_now_ns(), i, -1);
    return s;
}

/* The buffers the table's layer entries use besides their tensors. */
static pass_args pass_of(const dt_model *m)
{
    return (pass_args){.prec = m->prec,
                       .grad_t = model_grad_type(m),
                       .ws = m->ws,
                       .sx = m->sx,
                       .sy = m->sy,
                       .sdy = m->sdy,
                       .sw = m->sw,
                       .sg = m->sg,
                       .st = m->st,
                       .x16 = m->x16};
}

/* Layer l's weights, bias, their 16-bit copy (when the backend keeps one) and its gradients. */
static layer_params params_of(const dt_model *m, const layer *l)
{
    char *g = model_grad_buf(m);
    const size_t e = model_grad_esize(m);
    layer_params lp = {
        .w = m->params + l->w_off, .b = m->params + l->b_off, .dw = g + l->w_off * e, .db = g + l->b_off * e};
    if (m->p16) {
        lp.w16 = m->p16 + l->w_off;
        lp.b16 = m->p16 + l->b_off;
    }
    lp.relu_mask = m->relu_mask[l - m->spec.layers];
    return lp;
}

dt_status model_params16_ready(dt_model *m)
{
    /* What 16-bit tensor-core GEMMs read: the parameters rounded, by the optimizer step's fused
     * copy, or here when something else changed them since. */
    if (!m->p16 || m->p16_current) return DT_OK;
    const dt_status s = m->be->ops->cast_to16(m->be, m->prec, m->params, m->p16, m->spec.num_params);
    if (!s) m->p16_current = 1;
    return s;
}

/* Where layer i writes its output when its input is `in`: its own buffer, or (ReLU without one)
 * in place; a flatten passes its input on. */
static const void *layer_output(const dt_model *m, int i, const void *in)
{
    const layer *l = &m->spec.layers[i];
    if (l->kind == LAYER_FLATTEN) return in;
    return m->act[i] ? m->act[i] : in;
}

void dt_model_set_fused_relu(dt_model *m, int on)
{
    if (!m || m->fused_relu == !!on) return;
    m->fused_relu = !!on;
    model_graph_drop(m); /* recorded with the other kernels */
}

/* Whether layer i, an fc or conv layer, runs the relu layer after it in its own forward: the
 * relu works in place on i's output (its own buffer only when it reads the model input), so its
 * output is the one buffer either way and backward (which reads that output) is unchanged. */
static int relu_fused_after(const dt_model *m, int i)
{
    const layer *l = m->spec.layers;
    return m->fused_relu && i + 1 < m->spec.n && (l[i].kind == LAYER_FC || l[i].kind == LAYER_CONV) &&
           l[i + 1].kind == LAYER_RELU && !m->act[i + 1];
}

/* Whether layer i, a max pool reading a relu layer's output, runs that layer's backward in its own
 * (layer_pool_bwd's relu_y): the relu's mask at each window's argmax is the sign of the pool's
 * output there, so the pass needs no relu kernel and no read of the full-size output. */
static int relu_fused_into_pool(const dt_model *m, int i)
{
    const layer *l = m->spec.layers;
    return m->fused_relu && i > 0 && l[i].kind == LAYER_POOL && l[i - 1].kind == LAYER_RELU;
}

/* Whether fc layer i reads a relu layer's output that the fc layer below it ran forward, and runs
 * that relu's backward in its own (layer_fc_bwd's below). */
static int relu_fused_into_fc_bwd(const dt_model *m, int i)
{
    const layer *l = m->spec.layers;
    return i >= 2 && l[i].kind == LAYER_FC && l[i - 2].kind == LAYER_FC && relu_fused_after(m, i - 2);
}

void model_pass_inputs(dt_model *m, const float *x)
{
    m->x_in = x;
    const void *in = x;
    for (int i = 0; i < m->spec.n; i++) {
        m->in[i] = in;
        in = layer_output(m, i, in);
    }
}

dt_status model_forward(dt_model *m, const float *x, int batch, const void **logits)
{
    backend *be = m->be;
    const backend_ops *k = be->ops;
    const pass_args a = pass_of(m);
    const int n = m->spec.n;
    *logits = NULL;
    dt_status s = model_params16_ready(m);
    if (s) return s;
    m->x_in = x;
    const void *in = x;
    trace_rec *tr = trace_active(ctx_trace(m->ctx));
    for (int i = 0; i < n && !s; i++) {
        const layer *l = &m->spec.layers[i];
        if (i > 0 && relu_fused_after(m, i - 1)) {
            m->in[i] = in; /* done by layer i - 1: nothing to run, time or trace */
            continue;
        }
        char span[32];
        uint64_t t0 = 0;
        if (tr) {
            layer_span_name(span, sizeof span, 0, i, l->kind);
            if ((s = trace_layer_begin(be, 0, i, l->kind, span, &t0))) break;
        }
        const int x_f32 = in == (const void *)x;
        m->in[i] = in;
        /* ReLU overwrites its input unless that is x; flatten passes its input on. */
        void *y = (void *)layer_output(m, i, in);
        const layer_params lp = params_of(m, l);
        const int relu = relu_fused_after(m, i);
        switch (l->kind) {
            case LAYER_FC: s = k->layer_fc_fwd(be, &a, &lp, in, x_f32, y, relu, batch, l->in_c, l->out); break;
            case LAYER_CONV: {
                conv_shape cs = l->cs;
                cs.batch = batch;
                s = k->layer_conv_fwd(be, &a, &lp, &cs, in, x_f32, y, relu);
                break;
            }
            case LAYER_RELU: s = k->layer_relu_fwd(be, &a, in, x_f32, y, (size_t)batch * layer_out_n(l)); break;
            case LAYER_POOL:
                s = k->layer_pool_fwd(be, &a, in, x_f32, y, m->pool_idx[i], batch, l->in_c, l->in_h, l->in_w, l->k);
                break;
            case LAYER_FLATTEN: break;
        }
        in = y;
        if (m->prof) m->prof_fwd[i] += model_prof_mark(m);
        if (tr && !s) s = trace_layer_end(tr, be, 0, i, l->kind, span, t0);
    }
    if (s) return s;
    /* The loss reads logits of m->prec: x itself serves only when that is fp32. */
    if (in == (const void *)x && m->prec != DT_F32)
        return status_set_error(DT_ERR_INVALID_ARG, "the model has no layer that computes anything");
    *logits = in;
    return DT_OK;
}

/* A parameter layer's backward hands its gradients on (model_grads_done) from inside the entry,
 * before the data gradient, when the pass steps layers early (m->step_early, model_overlap.c);
 * else, or where the backend did not call it, after the entry. */
typedef struct grads_hook {
    dt_model *m;
    int layer, called;
} grads_hook;

static dt_status grads_hook_call(void *ctx)
{
    grads_hook *h = ctx;
    h->called = 1;
    return model_grads_done(h->m, h->layer);
}

/* Backward, last layer first, from the loss gradient in dbuf[0]; each layer's parameter gradients
 * are final when it is done. */
static dt_status model_backward(dt_model *m, const void *logits, int batch)
{
    backend *be = m->be;
    const backend_ops *k = be->ops;
    const pass_args a = pass_of(m);
    const int n = m->spec.n;
    void *dcur = m->dbuf[0];
    trace_rec *tr = trace_active(ctx_trace(m->ctx));
    for (int i = n - 1; i >= 0; i--) {
        const layer *l = &m->spec.layers[i];
        /* A relu whose backward the layer after it runs: no span, no time of its own. */
        if (i + 1 < n && (relu_fused_into_pool(m, i + 1) || relu_fused_into_fc_bwd(m, i + 1))) continue;
        char span[32];
        uint64_t t0 = 0;
        dt_status s = DT_OK;
        if (tr) {
            layer_span_name(span, sizeof span, 1, i, l->kind);
            if ((s = trace_layer_begin(be, 1, i, l->kind, span, &t0))) return s;
        }
        const void *lin = m->in[i];
        const int x_f32 = lin == (const void *)m->x_in;
        void *dprev = i ? (dcur == m->dbuf[0] ? m->dbuf[1] : m->dbuf[0]) : NULL;
        layer_params lp = params_of(m, l);
        grads_hook hook = {m, i, 0};
        if (m->step_early && !m->recording) {
            lp.grads_ready = grads_hook_call;
            lp.grads_ready_ctx = &hook;
        }
        switch (l->kind) {
            case LAYER_FC: {
                /* The relu below this layer run here. */
                const int relu_below = relu_fused_into_fc_bwd(m, i);
                const layer_params below = relu_below ? params_of(m, l - 2) : (layer_params){0};
                s = k->layer_fc_bwd(be, &a, &lp, lin, x_f32, dcur, dprev, batch, l->in_c, l->out,
                                    relu_below ? &below : NULL);
                break;
            }
            case LAYER_CONV: {
                conv_shape cs = l->cs;
                cs.batch = batch;
                s = k->layer_conv_bwd(be, &a, &lp, &cs, lin, x_f32, dcur, dprev);
                break;
            }
            case LAYER_RELU:
                /* The output of layer i is the input of layer i + 1 (or the logits). */
                s = k->layer_relu_bwd(be, &a, i + 1 < n ? m->in[i + 1] : logits, dcur, dcur,
                                      (size_t)batch * layer_out_n(l));
                dprev = dcur;
                break;
            case LAYER_POOL:
                if (dprev) {
                    /* The pool's output (what layer i + 1 reads, or the logits). */
                    const void *relu_y = relu_fused_into_pool(m, i) ? (i + 1 < n ? m->in[i + 1] : logits) : NULL;
                    s = k->layer_pool_bwd(be, &a, dcur, m->pool_idx[i], dprev, batch, l->in_c, l->in_h, l->in_w, l->k,
                                          relu_y);
                }
                break;
            case LAYER_FLATTEN: dprev = dcur; break;
        }
        /* The device's span ends before the layer's gradients go to the reducer (a bucket's
         * allreduce has its own span on the "gpu nccl" track). */
        if (!s && tr && device_marks(be, l->kind)) s = be->ops->trace_mark(be, 1, span, 0, i);
        /* While recording, the gradients go to the reducer after the graph's launch instead. */
        if (!s && (l->kind == LAYER_FC || l->kind == LAYER_CONV) && !m->recording && !hook.called)
            s = model_grads_done(m, i);
        if (s) return s;
        if (m->prof) m->prof_bwd[i] += model_prof_mark(m);
        if (tr) trace_rec_add(tr, span, TRACE_CAT_BWD, TRACE_TRACK_TRAIN, t0, trace_now_ns(), i, -1);
        if (dprev) dcur = dprev;
    }
    return DT_OK;
}

dt_status model_pass_body(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale)
{
    backend *be = m->be;
    const void *logits;
    dt_status s = model_forward(m, x, batch, &logits);
    if (s) return s;
    const pass_args a = pass_of(m);
    /* Queued: its values are read once backward is queued behind it (loss_wait). */
    if ((s = be->ops->layer_loss(be, &a, logits, labels, m->dbuf[0], batch, m->spec.classes, grad_scale,
                                 &m->lossh->loss, &m->lossh->correct)))
        return s;
    m->prof_step.loss_s += model_prof_mark(m);
    s = model_backward(m, logits, batch);
    /* Later work on the stream (the next forward reads the stepped parameters) waits for the
     * layers stepped beside backward; the host does not. */
    if (m->side_used) {
        m->side_used = 0;
        const dt_status js = be->ops->side_join(be);
        if (!s) s = js;
    }
    return s;
}

dt_status model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                                 double *loss_sum, int *correct)
{
    if (batch < 1 || batch > m->max_batch)
        return status_set_error(DT_ERR_INVALID_ARG, "batch %d is outside 1..%d (the model's max batch)", batch,
                                m->max_batch);
    backend *be = m->be;
    /* A batch in device memory (a loader's made on the device) is not read by the host: its
     * labels are checked by the loss kernel, which makes the loss NaN for one out of range. */
    const int dev_in = !be->ops->host_memory && be->ops->owns(be, x);
    if (dev_in != (!be->ops->host_memory && be->ops->owns(be, labels)))
        return status_set_error(DT_ERR_INVALID_ARG, "the inputs are %s memory and the labels %s: pass both in one",
                                dev_in ? "device" : "host", dev_in ? "host" : "device");
    for (int i = 0; !dev_in && i < batch; i++)
        if (labels[i] < 0 || labels[i] >= m->spec.classes)
            return status_set_error(DT_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", (int)labels[i], i,
                                    m->spec.classes - 1);
    /* Gradients still being reduced from a previous call must land before they are overwritten. */
    dt_status s = model_wait_inflight(m);
    if (s) return s;
    m->unreduced = m->ctx && dt_world_size(m->ctx) > 1;
    model_prof_mark(m);
    if (m->prof) m->prof_step.steps++;
    m->fb_count++;
    m->inv_scale = 1.0f;
    m->grad_mul = 1.0f;
    m->pending32 = 0;
    /* A batch already in device memory (the loader's, made on the device by work queued on the
     * stream) is read where it is, by the pass's kernels queued behind that work: no copy, and
     * one graph key for the loader's one slot. Work queued on the stream after this call, such as
     * the loader's next batch into the same buffers, runs after the pass has read them. A host
     * batch goes to the device asynchronously from pinned memory (the loader's) into a slot
     * (model_input.c: copied now, or staged ahead); the wait for the loss, queued after the copy,
     * waits for it too, so x and labels are free again when this returns. */
    const int staged = !be->ops->host_memory && !dev_in;
    int slot = 0;
    if (staged && (s = model_input_place(m, &x, &labels, batch, &slot))) return s;
    m->prof_step.input_s += model_prof_mark(m);

    int graphed = 0;
    s = model_graph_pass(m, x, labels, batch, grad_scale, &graphed);
    if (!s && !graphed) s = model_pass_body(m, x, labels, batch, grad_scale);
    if (staged) s = model_input_done(m, slot, s);
    /* On a failure too, so no copy is still landing in lossh when the caller frees the model. */
    const dt_status ws = be->ops->loss_wait(be);
    if (s || (s = ws)) return s;
    *loss_sum = m->lossh->loss;
    *correct = m->lossh->correct;
    return DT_OK;
}

void model_test_set_backend(dt_model *m, struct backend *be) { m->be = be; }
