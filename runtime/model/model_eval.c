/*
 * model_eval.c - dt_model_evaluate: the forward pass alone on a batch, for held-out accuracy,
 * `dtrain eval`'s per-class figures and the confusion matrix.
 *
 * It runs the same forward pass as training (model_forward, in the model's precision), then the
 * loss and argmax of each sample on the host in double: eval batches are small next to the
 * forward's work, and per-sample predictions are what the confusion matrix needs.
 * Gradients, the optimizer and the gradient engine are untouched (buckets still in flight from
 * a training step finish first, since they share nothing but the stream).
 */
#include "runtime/model/model.h"
#include "runtime/model/model_internal.h"
#include "base/status.h"

#include <math.h>
#include <stdlib.h>

/* An evaluation that fails after queueing part of its forward returns once that part is done on
 * the device: it reads the first input slot, which the next training batch's copy (another
 * stream, waiting only for the last training pass) may write. The first error is the one kept. */
static dt_status forward_failed(dt_model *m, dt_status s)
{
    status_kept why;
    status_keep(&why);
    model_device_work_done(m);
    return status_restore(s, &why);
}

dt_status dt_model_evaluate(dt_model *m, const float *x, const int32_t *labels, int batch, double *loss_sum,
                            int *correct, int32_t *pred)
{
    static const char fn[] = "dt_model_evaluate";
    const dt_status as = model_batch_args(fn, m, x, labels, 1, loss_sum, correct);
    if (as) return as;
    if (batch < 1 || batch > m->max_batch)
        return status_set_error(DT_ERR_INVALID_ARG, "evaluation batch %d is outside 1..%d (the model's max batch)",
                                batch, m->max_batch);
    const int classes = m->spec.classes;
    for (int i = 0; i < batch; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return status_set_error(DT_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", (int)labels[i], i,
                                    classes - 1);
    /* Only a pending verdict is taken (it decides the 16-bit copy the forward reads). A backward
     * whose gradients are being reduced keeps its step open for dt_model_sync_grads: the forward
     * writes activations, never the gradients the allreduces read, and closing the step here would
     * leave them unreduced (or this rank out of its peers' collectives). */
    dt_status s = dt_model_settle_step(m, NULL);
    if (s) return s;
    backend *be = m->be;
    if (!be->ops->host_memory) {
        /* Slot 0 is written here: a training batch staged into it ahead must not land later. */
        if ((s = model_input_drop(m))) return s;
        if ((s = be->ops->to_device(be, m->xdev, x, (size_t)batch * dt_model_input_size(m) * sizeof *x))) return s;
        x = m->xdev;
    }
    const void *out;
    const float *logits;
    const size_t nlog = (size_t)batch * (size_t)classes;
    const pass_args a = {.prec = m->prec, .sy = m->sy};
    if ((s = model_forward(m, x, batch, &out)) || (s = be->ops->layer_logits32(be, &a, out, nlog, &logits)))
        return forward_failed(m, s);
    float *host = malloc(nlog * sizeof *host);
    if (!host) return forward_failed(m, status_set_error(DT_ERR_NOMEM, "out of memory for %zu logits", nlog));
    /* The copy to the host waits for the forward pass: a failure of its kernels shows here. */
    if ((s = be->ops->to_host(be, host, logits, nlog * sizeof *host))) {
        free(host);
        return s;
    }
    double loss = 0;
    int corr = 0;
    for (int i = 0; i < batch; i++) {
        const float *z = host + (size_t)i * classes;
        /* Stable log-softmax: the first maximum is the prediction, as in training's argmax. */
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (z[c] > z[best]) best = c;
        double sum = 0;
        for (int c = 0; c < classes; c++) sum += exp((double)z[c] - (double)z[best]);
        /* cppcheck-suppress invalidFunctionArg ; sum >= 1: the maximum's own term is exp(0) */
        loss += log(sum) - ((double)z[labels[i]] - (double)z[best]);
        corr += best == labels[i];
        if (pred) pred[i] = best;
    }
    free(host);
    *loss_sum = loss;
    *correct = corr;
    return DT_OK;
}
