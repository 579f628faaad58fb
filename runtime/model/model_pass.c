/*
 * model_pass.c - the fp32 forward and backward passes of a dt_model over its kernel op table (the
 * 16-bit ones are model_amp.c): forward keeps every layer's input for backward, and backward
 * hands each layer's parameter gradients to the reducer the moment they are final
 * (model_grads_done, model_sync.c), so their allreduce overlaps the layers still to come.
 */
#include "runtime/model/model_internal.h"
#include "kernels/devmem.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif
#include "base/status.h"

/* The fp32 forward pass over a batch already on the model's device: every layer's input and
 * output kept for backward. Returns the logits (batch, classes), in device memory on a GPU. */
const float *model_forward32(dt_model *m, const float *x, int batch)
{
    const kernel_ops *k = m->ops;
    const int n = m->spec.n;
    float *P = m->params;
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
    return in;
}

dt_status model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                                 double *loss_sum, int *correct)
{
    if (batch < 1 || batch > m->max_batch)
        return status_set_error(DT_ERR_INVALID_ARG, "batch %d is outside 1..%d (the model's max batch)", batch,
                            m->max_batch);
    for (int i = 0; i < batch; i++)
        if (labels[i] < 0 || labels[i] >= m->spec.classes)
            return status_set_error(DT_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", (int)labels[i], i,
                                m->spec.classes - 1);
    const kernel_ops *k = m->ops;
    const int n = m->spec.n;
    float *P = m->params, *G = m->grads;
    /* Gradients still being reduced from a previous call must land before they are overwritten. */
    dt_status ws = model_wait_inflight(m);
    if (ws) return ws;
    m->unreduced = m->ctx && dt_world_size(m->ctx) > 1;
    model_prof_mark(m);
    if (m->prof) m->prof_step.steps++;
    m->fb_count++;
    m->inv_scale = 1.0f;
    m->grad_mul = 1.0f;
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
    const float *logits = model_forward32(m, x, batch);
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
