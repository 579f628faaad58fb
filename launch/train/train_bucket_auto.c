/*
 * train_bucket_auto.c - `dtrain train --bucket-mb auto`: the bucket cap chosen by the step-time
 * model (launch/perfmodel/) for this job, from this job's own measurements.
 *
 * The first TRAIN_AUTO_STEPS steps run profiled (dt_model_set_profile): their per-layer backward
 * times and phases, with their wait for the batches, averaged over the ranks, are the compute. The
 * link is measured in the job right after them: dt_allreduce of 64 KiB, 1 MiB and 4 MiB buffers in
 * the gradients' memory (one warm-up and three timed each, the times averaged over the ranks) with
 * a ring fitted to them (pm_fit_ring): on a GPU device buffers, so the link timed is the path the
 * buckets take (NCCL, or MPI through host memory under --gpu-comm mpi), not the host path of
 * dt_allreduce's host buffers. Both inputs are the same on every rank, so every rank makes the same
 * choice; pm_best_bucket then picks the cap among 0.25-256 MiB and one bucket, and the reducer is
 * rebuilt with it (any cap gives bitwise the same parameters: docs/performance.md). Until then the
 * steps use the default cap. The profiled steps are training steps like any other (counted,
 * scheduled, checkpointed, logged, on the same data); the choice after them is not a step, and
 * train_loop leaves its time out of the log interval, as a checkpoint's.
 */
#include "launch/train/train_run.h"
#include "launch/perfmodel/model_source.h"
#include "runtime/model/model.h"
#include "base/clock.h"
#include "base/status.h"
#include "kernels/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bucket caps to choose among, in MiB (0: one bucket for everything). */
static const double auto_caps[] = {0, 0.25, 0.5, 1, 2, 4, 8, 16, 25, 32, 64, 128, 256};
enum { AUTO_NCAPS = sizeof auto_caps / sizeof *auto_caps };

/* Whether this run takes more steps than the profiled ones: a shorter one keeps its cap (and is
 * not slowed by profiling for nothing). */
static int auto_has_room(const train_run *r) { return r->t.steps - r->first_step > TRAIN_AUTO_STEPS; }

dt_status train_bucket_auto_begin(train_run *r)
{
    if (!r->t.bucket_auto || r->world < 2) return DT_OK;
    if (!auto_has_room(r)) {
        if (r->rank == 0 && !r->t.quiet)
            printf("buckets: --bucket-mb auto keeps %g MiB: it needs more than %d steps to choose\n",
                   r->t.sync.bucket_mb, TRAIN_AUTO_STEPS);
        return DT_OK;
    }
    r->auto_wait0 = dt_loader_wait_s(r->ld);
    return dt_model_set_profile(r->m, 1);
}

/* The model's input shape as the grammar writes it ("784", "3x32x32"). */
static void input_text(const dt_model *m, char *buf, size_t n)
{
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    if (h == 1 && w == 1)
        snprintf(buf, n, "%d", c);
    else
        snprintf(buf, n, "%dx%dx%d", c, h, w);
}

/* Seconds of one allreduce of each size, averaged over the ranks (collective), on a buffer in the
 * memory the model's gradients are in: device memory goes through the device's collectives, as the
 * reducer's buckets do, where a host buffer would time MPI's host path instead. */
static dt_status measure_link(train_run *r, pm_link *link)
{
    enum { NSIZES = 3, ITERS = 3 };
    const size_t counts[NSIZES] = {16384, 262144, 1048576}; /* floats: 64 KiB, 1 MiB, 4 MiB */
    backend *be;
    dt_status s = backend_for_memory(dt_model_on_gpu(r->m) ? DT_MEMORY_DEVICE : DT_MEMORY_HOST, &be);
    void *buf = NULL; /* zeroed: the sums stay finite */
    if (!s) s = be->ops->alloc(be, counts[NSIZES - 1] * sizeof(float), "--bucket-mb auto's allreduce timing", &buf);
    if (s) return status_prefix(s, "--bucket-mb auto");
    float secs[NSIZES];
    for (int k = 0; !s && k < NSIZES; k++) {
        s = dt_allreduce(r->ctx, buf, counts[k], DT_F32, DT_SUM);
        const double t0 = clock_now_s();
        for (int i = 0; !s && i < ITERS; i++) s = dt_allreduce(r->ctx, buf, counts[k], DT_F32, DT_SUM);
        secs[k] = (float)((clock_now_s() - t0) / ITERS);
    }
    be->ops->free(be, buf);
    if (!s) s = dt_allreduce(r->ctx, secs, NSIZES, DT_F32, DT_AVG);
    if (s) return s;
    double bytes[NSIZES], t[NSIZES];
    for (int k = 0; k < NSIZES; k++) bytes[k] = (double)counts[k] * 4, t[k] = secs[k];
    return pm_fit_ring(r->world, bytes, t, NSIZES, link);
}

/* This job's compute per step, from the profiled steps, averaged over the ranks (collective). */
static dt_status measure_compute(train_run *r, mp_model *mm)
{
    dt_step_profile pr;
    dt_model_profile(r->m, &pr);
    int nl = 0;
    for (char name[96]; nl < PM_MAX_LAYERS; nl++) {
        dt_model_layer_name(r->m, nl, name, sizeof name);
        if (!strcmp(name, "-")) break;
    }
    /* forward, backward, after, then the layers' backward; seconds per step */
    float *v = calloc((size_t)nl + 3, sizeof *v);
    if (!v) return status_set_error(DT_ERR_NOMEM, "--bucket-mb auto: out of memory");
    const double k = 1.0 / (double)(pr.steps ? pr.steps : 1);
    /* The wait for the batches is outside the model's profile; a step includes it, before forward. */
    const double data_s = dt_loader_wait_s(r->ld) - r->auto_wait0;
    v[0] = (float)(k * (data_s + pr.input_s + pr.forward_s + pr.loss_s));
    v[1] = (float)(k * pr.backward_s);
    v[2] = (float)(k * (pr.check_s + pr.optimizer_s));
    for (int i = 0; i < nl; i++) {
        double f, b;
        dt_model_layer_profile(r->m, i, &f, &b);
        v[3 + i] = (float)(k * b);
    }
    dt_status s = dt_allreduce(r->ctx, v, (size_t)nl + 3, DT_F32, DT_AVG);
    if (!s) {
        double bwd[PM_MAX_LAYERS];
        for (int i = 0; i < nl; i++) bwd[i] = v[3 + i];
        char in[64];
        input_text(r->m, in, sizeof in);
        s = mp_model_from_times(r->t.model, in, bwd, nl, v[1], v[0], v[2], mm); /* presets expand there */
    }
    free(v);
    return s;
}

dt_status train_bucket_auto_after_step(train_run *r, long steps_run)
{
    if (!r->t.bucket_auto || steps_run != TRAIN_AUTO_STEPS || (r->world > 1 && !auto_has_room(r))) return DT_OK;
    if (r->world < 2) {
        if (r->rank == 0 && !r->t.quiet)
            printf("buckets: --bucket-mb auto keeps %g MiB: one rank has nothing to send\n", r->t.sync.bucket_mb);
        return DT_OK;
    }
    const double t0 = clock_now_s();
    mp_model *mm = calloc(1, sizeof *mm);
    if (!mm) return status_set_error(DT_ERR_NOMEM, "--bucket-mb auto: out of memory");
    pm_link link;
    dt_status s = measure_compute(r, mm);
    if (!s) s = dt_model_set_profile(r->m, 0);
    if (!s) s = measure_link(r, &link);
    if (s == DT_ERR_INVALID_ARG) {
        /* Noise (a loaded machine) can make larger allreduces no slower: keep the cap rather than
         * stop training. Every rank has the same averaged times, so every rank keeps it. */
        if (r->rank == 0 && !r->t.quiet)
            printf("buckets: --bucket-mb auto keeps %g MiB: the link measured here fits no ring (%s); choosing took "
                   "%.1f ms, no step's time\n",
                   r->t.sync.bucket_mb, dt_last_error(), (clock_now_s() - t0) * 1e3);
        free(mm);
        return DT_OK;
    }
    if (s) {
        free(mm);
        return status_prefix(s, "--bucket-mb auto");
    }
    /* 16-bit gradients are kept and sent as they are; fp32 ones sent in --grad-comm's type. */
    const dt_dtype wire = r->grad_t != DT_F32 ? r->grad_t : r->t.sync.grad_comm;
    const pm_model pm = mp_model_view(mm, dt_dtype_size(r->grad_t), dt_dtype_size(wire));
    const pm_net net = {r->world, r->world, link, link, 0};
    pm_sync sync = {r->t.sync.bucket_mb, r->t.sync.first_bucket_mb, r->t.sync.overlap, PM_RING};
    /* The cap in use first: a tie keeps it (a cap larger than the model changes nothing). */
    double caps[AUTO_NCAPS + 1] = {r->t.sync.bucket_mb};
    memcpy(caps + 1, auto_caps, sizeof auto_caps);
    pm_step before, best;
    double best_mb;
    s = pm_step_time(&pm, &net, &sync, &before);
    if (!s) s = pm_best_bucket(&pm, &net, &sync, caps, AUTO_NCAPS + 1, &best_mb, &best);
    free(mm);
    if (s) return status_prefix(s, "--bucket-mb auto");
    if (r->rank == 0 && !r->t.quiet)
        printf("buckets: --bucket-mb auto chose %g MiB (%d bucket%s) after %d profiled steps: predicted step %.3f ms, "
               "%.3f ms with %g MiB; the link measured here: alpha %.1f us, busbw %.3g GB/s; choosing took %.1f ms, "
               "no step's time\n",
               best_mb, best.nbuckets, best.nbuckets == 1 ? "" : "s", TRAIN_AUTO_STEPS, best.step_s * 1e3,
               before.step_s * 1e3, r->t.sync.bucket_mb, link.alpha_s * 1e6, link.busbw / 1e9,
               (clock_now_s() - t0) * 1e3);
    r->t.sync.bucket_mb = best_mb;
    /* Under --zero 1 the optimizer's slices follow the plan: gathered whole by the old one, cut
     * again for the new one. */
    if ((s = model_zero_unshard(r->m, r->opt))) return status_prefix(s, "--bucket-mb auto");
    if ((s = dt_model_set_sync(r->m, &r->t.sync))) return s;
    return dt_model_shard_optimizer(r->m, r->opt);
}
