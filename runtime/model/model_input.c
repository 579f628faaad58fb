/*
 * model_input.c - a host batch's way to a device model's input buffers: copied on the backend's
 * copy stream into one of two slots that take turns (copy_in), so that the copy of one batch runs
 * beside the work of the pass before it, or staged ahead by dt_model_stage_batch, so that it also
 * runs while the host waits for something else (the last step's overflow verdict) before it
 * queues the step that reads it.
 *
 * The pass that reads a slot releases it (copy_in_release), and a copy into that slot waits on
 * the stream for the release, so no copy overwrites a batch still being read. The caller's batch
 * is read by the copy until the pass's loss_wait, which comes after it on the stream.
 *
 * Also the one check of the batch arguments that the calls taking a batch share (model_batch_args).
 */
#include "runtime/model/model_internal.h"
#include "base/status.h"

#include <stdio.h>

/* After a failure s, with a batch's copy queued: the copy may still read the caller's batch, which
 * the caller may refill once the call returns, so the device is waited for; s and its message are
 * kept. */
static dt_status wait_keeping(backend *be, dt_status s)
{
    status_kept why;
    status_keep(&why);
    (void)be->ops->settle(be);
    return status_restore(s, &why);
}

/* Queues the copy of the host batch into the next slot (*slot). */
static dt_status copy_to_slot(dt_model *m, const float *x, const int32_t *labels, int batch, int *slot)
{
    backend *be = m->be;
    const int k = m->in_slot;
    *slot = k;
    const size_t xb = (size_t)batch * dt_model_input_size(m) * sizeof *x, lb = (size_t)batch * sizeof *labels;
    float *xd = k ? m->xdev2 : m->xdev;
    int32_t *ld = k ? m->ldev2 : m->ldev;
    if (!be->ops->copy_in) {
        /* One slot, copied on the ops' stream in order with the passes. */
        const dt_status s = be->ops->to_device_async(be, xd, x, xb);
        return s ? s : be->ops->to_device_async(be, ld, labels, lb);
    }
    m->in_slot ^= 1;
    dt_status s;
    if ((s = be->ops->copy_in(be, k, xd, x, xb)) || (s = be->ops->copy_in(be, k, ld, labels, lb)) ||
        (s = be->ops->copy_in_join(be, k)))
        return wait_keeping(be, s);
    return DT_OK;
}

dt_status model_input_drop(dt_model *m)
{
    if (!m->ahead.on) return DT_OK;
    m->ahead.on = 0;
    backend *be = m->be;
    /* Its copy done, so the caller's buffer is free, and nothing of it lands in a slot reused. */
    dt_status s = be->ops->settle(be);
    if (be->ops->copy_in) {
        const dt_status rs = be->ops->copy_in_release(be, m->ahead.slot);
        if (!s) s = rs;
    }
    return s;
}

dt_status model_input_abandon(dt_model *m, dt_status s)
{
    if (!m->ahead.on) return s;
    status_kept why;
    status_keep(&why);
    (void)model_input_drop(m);
    return status_restore(s, &why);
}

dt_status model_input_done(dt_model *m, int slot, dt_status s)
{
    backend *be = m->be;
    /* Backward was the last to read this slot's batch: the copy two passes on may write it. */
    if (be->ops->copy_in) {
        const dt_status rs = be->ops->copy_in_release(be, slot);
        if (!s) s = rs;
    }
    /* A pass that failed before its loss was queued leaves the model's loss_wait nothing of its
     * own to wait for, while its batch's copy may still be reading. */
    return s ? wait_keeping(be, s) : s;
}

dt_status model_input_place(dt_model *m, const float **x, const int32_t **labels, int batch, int *slot)
{
    const model_ahead *a = &m->ahead;
    if (a->on && a->x == *x && a->labels == *labels && a->batch == batch) {
        *slot = a->slot;
        m->ahead.on = 0;
    } else {
        dt_status s = model_input_drop(m);
        if (!s) s = copy_to_slot(m, *x, *labels, batch, slot);
        if (s) return s;
    }
    *x = *slot ? m->xdev2 : m->xdev;
    *labels = *slot ? m->ldev2 : m->ldev;
    return DT_OK;
}

dt_status model_batch_args(const char *fn, const dt_model *m, const float *x, const int32_t *labels, int sums,
                           const double *loss_sum, const int *correct)
{
    if (!m) return status_null_arg(fn, "m", "pass the model dt_model_create made");
    if (!x) return status_null_arg(fn, "x", "pass the batch's inputs (batch x dt_model_input_size floats)");
    if (!labels) return status_null_arg(fn, "labels", "pass the batch's labels (batch int32 values)");
    if (sums && !loss_sum) return status_null_arg(fn, "loss_sum", "pass a double to receive the summed loss");
    if (sums && !correct) return status_null_arg(fn, "correct", "pass an int to receive the correct predictions");
    return DT_OK;
}

dt_status dt_model_stage_batch(dt_model *m, const float *x, const int32_t *labels, int batch)
{
    static const char fn[] = "dt_model_stage_batch";
    const dt_status as = model_batch_args(fn, m, x, labels, 0, NULL, NULL);
    if (as) return as;
    if (batch < 1 || batch > m->max_batch)
        return status_set_error(DT_ERR_INVALID_ARG, "batch %d is outside 1..%d (the model's max batch)", batch,
                                m->max_batch);
    backend *be = m->be;
    if (be->ops->host_memory) return DT_OK; /* read where it is */
    const int dev_in = be->ops->owns(be, x);
    if (dev_in != be->ops->owns(be, labels))
        return status_set_error(DT_ERR_INVALID_ARG, "the inputs are %s memory and the labels %s: pass both in one",
                                dev_in ? "device" : "host", dev_in ? "host" : "device");
    if (dev_in) return DT_OK; /* read where it is, by the pass */
    const model_ahead *a = &m->ahead;
    if (a->on && a->x == x && a->labels == labels && a->batch == batch) return DT_OK;
    dt_status s = model_input_drop(m);
    int slot = 0;
    if (!s) s = copy_to_slot(m, x, labels, batch, &slot);
    if (s) return s;
    m->ahead = (model_ahead){.x = x, .labels = labels, .batch = batch, .slot = slot, .on = 1};
    return DT_OK;
}
