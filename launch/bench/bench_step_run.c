/*
 * bench_step_run.c - one row of `dtrain bench step` (bench_step.h): the model, optimizer, scaler and
 * synthetic loader of one precision and setting, made as dtrain train makes them; the warm-up and
 * timed steps, cut into windows for the spread; then the --profile steps. cmd_bench_step.c's top
 * comment says what is timed and why.
 */
#include "launch/bench/bench_step.h"

#include "launch/cli.h"
#include "base/clock.h"

#include <stdio.h>
#include <string.h>

/* The profile of the steps just taken, per step, into buf: the phases, then every layer that
 * took time. data_s: the seconds those steps waited for their batches (dt_loader_next, outside the
 * model's profile), its first phase: the measured step includes it, so a prediction built from the
 * phases (dtrain model-perf) must too. */
static void profile_text(const dt_model *m, double data_s, char *buf, size_t n)
{
    dt_step_profile pr;
    dt_model_profile(m, &pr);
    const double k = 1e3 / (double)(pr.steps ? pr.steps : 1);
    const double total =
        data_s + pr.input_s + pr.forward_s + pr.loss_s + pr.backward_s + pr.allreduce_s + pr.check_s + pr.optimizer_s;
    int w = snprintf(buf, n,
                     "    profile, ms per step over %ld steps (waiting for the device at each boundary): "
                     "data %.3f, input %.3f, forward %.3f, loss %.3f, backward %.3f, allreduce %.3f, check %.3f, "
                     "optimizer %.3f; total %.3f\n",
                     pr.steps, k * data_s, k * pr.input_s, k * pr.forward_s, k * pr.loss_s, k * pr.backward_s,
                     k * pr.allreduce_s, k * pr.check_s, k * pr.optimizer_s, k * total);
    size_t u = w > 0 && (size_t)w < n ? (size_t)w : n;
    for (int i = 0; u < n; i++) {
        char name[96];
        dt_model_layer_name(m, i, name, sizeof name);
        if (!strcmp(name, "-")) break; /* past the last layer */
        double f, b;
        dt_model_layer_profile(m, i, &f, &b);
        if (f + b <= 0) continue;
        w = snprintf(buf + u, n - u, "      %-26s forward %8.3f  backward %8.3f\n", name, k * f, k * b);
        u = w > 0 && (size_t)w < n - u ? u + (size_t)w : n;
    }
}

/* One training step on the loader's next batch; cs (NULL: not counted) notes its norm. */
static dt_status one_step(dt_loader *ld, dt_model *m, dt_optimizer *opt, dt_scaler *sc, int batch, float scale,
                          double clip, clip_seen *cs)
{
    dt_step_result r;
    const float *x;
    const int32_t *labels;
    long data_step;
    dt_status s = dt_loader_next(ld, &data_step, &x, &labels);
    /* The batch's copy queued before the step takes the last one's verdict (as dtrain train). */
    if (!s) s = dt_model_stage_batch(m, x, labels, batch);
    if (!s) s = dt_model_train_step(m, opt, sc, x, labels, batch, scale, &r);
    if (!s && cs && clip > 0 && r.stepped) {
        cs->lo = cs->steps ? (r.grad_norm < cs->lo ? r.grad_norm : cs->lo) : r.grad_norm;
        cs->hi = cs->steps ? (r.grad_norm > cs->hi ? r.grad_norm : cs->hi) : r.grad_norm;
        cs->steps++;
        cs->clipped += r.grad_norm > clip;
    }
    return s;
}

/* The windows the timed steps are cut into for the spread columns (fewer with fewer steps). */
#define SPREAD_WINDOWS 5

/* What one row runs on: the model, its optimizer and loss scaler (fp16), the synthetic data and
 * its loader. */
typedef struct step_objs {
    dt_model *m;
    dt_optimizer *opt;
    dt_dataset *data;
    dt_loader *ld;
    dt_scaler *sc;
} step_objs;

static void step_objs_free(step_objs *so)
{
    dt_loader_free(so->ld);
    dt_scaler_free(so->sc);
    dt_dataset_free(so->data);
    dt_optimizer_free(so->opt);
    dt_model_free(so->m);
}

/* A fresh model in precision p with the row's settings, SGD momentum 0.9 (or --optim), a scaler
 * for fp16, and the synthetic data's loader, as dtrain train makes them. On a failure what was made
 * is in so, for step_objs_free. */
static dt_status step_objs_make(dt_ctx *ctx, const step_opts *o, dt_dtype p, row_setting *rs, step_objs *so)
{
    const int world = dt_world_size(ctx), rank = dt_rank(ctx);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = o->optim;
    dt_sync_config sy;
    dt_sync_defaults(&sy);
    sy.op = DT_SUM; /* the gradient of the global mean, as dtrain train */
    sy.zero = rs->zero;
    int c, h, w;
    dt_status s;
    if ((s = dt_model_create(ctx, o->model, o->input, 1, o->batch, &so->m))) return s;
    dt_model *m = so->m;
    dt_model_set_step_overlap(m, rs->overlap);
    dt_model_set_graphs(m, rs->graphs);
    dt_model_set_deferred_verdict(m, o->defer_verdict);
    dt_model_set_fused_relu(m, o->fused_relu);
    const dt_dtype gt = p != DT_F32 && !dt_model_on_gpu(m) ? p : DT_F32;
    rs->nparams = dt_model_num_params(m);
    rs->grad_bytes = (int)dt_dtype_size(gt); /* the wire is the gradients' type (sync's defaults) */
    if ((s = dt_model_set_precision(m, p, gt)) || (s = dt_model_set_sync(m, &sy)) ||
        (o->clip > 0 && (s = dt_model_set_clip_grad_norm(m, o->clip))) ||
        (s = dt_optimizer_create(&oc, dt_model_num_params(m), &so->opt)) || (s = dt_model_shard_optimizer(m, so->opt)))
        return s;
    dt_model_input_shape(m, &c, &h, &w);
    if ((s = dt_synthetic_create(c, h, w, dt_model_num_classes(m), 60000, 1, &so->data)) ||
        (s = dt_dataset_set_synthetic_on(so->data, rs->synth)))
        return s;
    if (p == DT_F16) {
        dt_scaler_config scc;
        dt_scaler_defaults(&scc);
        if ((s = dt_scaler_create(&scc, &so->sc))) return s;
        dt_model_set_nonfinite_check(m, DT_NONFINITE_CHECK_AT_RISK);
    }
    if ((s = dt_loader_create(ctx, so->data, rank, world, o->batch, 0, o->loader_threads, CLI_LOADER_DEPTH, &so->ld)))
        return s;
    rs->synth_on_device = dt_loader_on_device(so->ld);
    return DT_OK;
}

/* The --warmup steps, then the --steps timed ones, cut into windows for the spread columns. The
 * clock starts and stops with the device idle and every verdict taken. Collective (barriers). */
static dt_status timed_steps(dt_ctx *ctx, const step_opts *o, step_objs *so, float scale, row_setting *rs,
                             row_figures *f)
{
    const int world = dt_world_size(ctx);
    dt_status s;
    double t0 = 0, w0 = 0, edge[SPREAD_WINDOWS + 1];
    const int windows = o->steps < SPREAD_WINDOWS ? o->steps : SPREAD_WINDOWS;
    int window = 0; /* the window the next timed step belongs to */
    long skipped0 = 0;
    for (int step = 0; step < o->warmup + o->steps; step++) {
        if (window > 0 && step - o->warmup == (long)window * o->steps / windows) edge[window++] = clock_now_s();
        if (step == o->warmup) {
            /* The clock starts with the warm-up steps' verdicts taken and their work done on the
             * device (as it stops, below), so none of it lands in the timed steps. */
            if ((s = dt_model_settle_step(so->m, NULL)) || (s = dt_model_synchronize(so->m)) || (s = dt_barrier(ctx)))
                return s;
            edge[0] = t0 = clock_now_s();
            window = 1;
            w0 = dt_loader_wait_s(so->ld);
            skipped0 = so->sc ? dt_scaler_skipped(so->sc) : 0;
        }
        if ((s = one_step(so->ld, so->m, so->opt, so->sc, o->batch, scale, o->clip, step >= o->warmup ? &f->cs : NULL)))
            return s;
    }
    /* The timed steps end with the last one's verdict and its work done on the device. */
    if ((s = dt_model_settle_step(so->m, NULL)) || (s = dt_model_synchronize(so->m)) || (s = dt_barrier(ctx))) return s;
    edge[windows] = clock_now_s();
    const double t = edge[windows] - t0;
    for (int k = 0; k < windows; k++) {
        const long n = (long)(k + 1) * o->steps / windows - (long)k * o->steps / windows;
        const double wms = 1e3 * (edge[k + 1] - edge[k]) / (double)n;
        rs->min_ms = k == 0 || wms < rs->min_ms ? wms : rs->min_ms;
        rs->max_ms = k == 0 || wms > rs->max_ms ? wms : rs->max_ms;
    }
    f->sps = (double)o->steps * o->batch * world / t;
    f->ms = 1e3 * t / o->steps;
    f->wait_ms = 1e3 * (dt_loader_wait_s(so->ld) - w0) / o->steps;
    /* The timed steps' skips: every verdict of theirs is in (settled above), none of the warm-up
     * or profiled steps'. */
    f->skipped = so->sc ? dt_scaler_skipped(so->sc) - skipped0 : 0;
    return DT_OK;
}

/* --profile N: one profiled step that takes the kernel-by-kernel path's first-use costs, then N
 * more, their split into f->prof. */
static dt_status profiled_steps(const step_opts *o, step_objs *so, float scale, row_figures *f)
{
    dt_status s;
    /* Profiling runs the step kernel by kernel, without graphs or overlap: one profiled step
     * first takes that path's first-use costs, then dt_model_set_profile(m, 1) zeroes the
     * counters for the N reported. */
    if ((s = dt_model_set_profile(so->m, 1)) ||
        (s = one_step(so->ld, so->m, so->opt, so->sc, o->batch, scale, o->clip, NULL)) ||
        (s = dt_model_set_profile(so->m, 1)))
        return s;
    const double wait0 = dt_loader_wait_s(so->ld);
    for (int step = 0; step < o->profile; step++)
        if ((s = one_step(so->ld, so->m, so->opt, so->sc, o->batch, scale, o->clip, NULL))) return s;
    profile_text(so->m, dt_loader_wait_s(so->ld) - wait0, f->prof, sizeof f->prof);
    return DT_OK;
}

dt_status bench_step_run(dt_ctx *ctx, const step_opts *o, dt_dtype p, row_setting *rs, row_figures *f)
{
    step_objs so = {0};
    const float scale = 1.0f / ((float)o->batch * (float)dt_world_size(ctx));
    dt_status s = step_objs_make(ctx, o, p, rs, &so);
    if (!s) s = timed_steps(ctx, o, &so, scale, rs, f);
    if (!s) {
        /* What the settings came to in the timed steps (the profiled ones run kernel by kernel). */
        rs->overlapped = dt_model_step_overlapped(so.m);
        rs->graphed = dt_model_graphed(so.m);
        f->prof[0] = '\0';
        if (o->profile) s = profiled_steps(o, &so, scale, f);
    }
    if (!s) dt_model_memory(so.m, so.opt, &f->mem);
    step_objs_free(&so);
    return s;
}
