/*
 * test_accum_clip.c - gradient accumulation and clipping, at any rank count (ctest runs 1 and 2).
 *
 * Accumulation: K = 4 micro-batches of B per optimizer step equal one step on 4B per rank
 * (parameters within 1e-5 over several steps, momentum on); micro-batches 1..K-1 start no
 * gradient collective (the model's count of started collectives stays put, and with 2 ranks the
 * gradients still differ between ranks right before the K-th); reducing, unscaling or stepping
 * in the middle of a group is refused.
 * Clipping: the reported norm is the norm of the reduced gradients computed here directly, the
 * same bits on every rank; the clipped step moves the parameters by lr * coef * g by hand; a large
 * maximum clips nothing, +inf only reports; with a static loss scale of 1024 the norm is that of
 * the unscaled gradients; an overflowing step reports +inf and does not step.
 */
#include "dtrain.h"
#include "mpi_check.h"
#include "runtime/model/model_internal.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 8, CLS = 4, B = 4, K = 4, STEPS = 3 };
#define SPEC "fc:16,relu,fc:4"

/* This rank's 4B samples of step `step`: different on every rank and step. */
static void batch(long step, float *x, int32_t *y) { mpi_rank_batch(step, K * B, IN, CLS, x, y); }

static dt_model *model(dt_ctx *ctx, int max_batch)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, SPEC, "8", 11, max_batch, &m) == DT_OK, "model");
    return m;
}

static dt_optimizer *sgd(dt_model *m, float lr, float momentum)
{
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.lr = lr;
    oc.momentum = momentum;
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    return o;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

/* K micro-batches of B accumulated == one batch of K*B; no collective before the K-th. */
static void test_accumulation(dt_ctx *ctx)
{
    dt_model *ref = model(ctx, K * B), *acc = model(ctx, B);
    dt_optimizer *oref = sgd(ref, 0.1f, 0.9f), *oacc = sgd(acc, 0.1f, 0.9f);
    CHECK(dt_model_set_accum_steps(acc, 0) == DT_ERR_INVALID_ARG, "k 0 refused");
    CHECK(dt_model_set_accum_steps(acc, K) == DT_OK, "set_accum_steps");
    CHECK(dt_model_accum_steps(acc) == K, "accum_steps");
    CHECK(dt_model_set_clip_grad_norm(ref, INFINITY) == DT_OK && dt_model_set_clip_grad_norm(acc, INFINITY) == DT_OK,
          "report norms");
    const size_t n = dt_model_num_params(ref);
    float x[K * B * IN];
    int32_t y[K * B];
    for (long step = 0; step < STEPS; step++) {
        batch(step, x, y);
        dt_step_result r;
        CHECK(dt_model_train_step(ref, oref, NULL, x, y, K * B, 1.0f / (K * B), &r) == DT_OK, "reference step");
        CHECK(r.stepped == 1, "reference stepped");
        const double ref_norm = r.grad_norm;
        const long c0 = model_comm_starts(acc);
        for (int k = 0; k < K; k++) {
            CHECK(dt_model_accum_pos(acc) == k, "position %d", dt_model_accum_pos(acc));
            if (k == K - 1) {
                /* Before the last micro-batch nothing was sent: with 2 ranks the local sums differ. */
                CHECK(model_comm_starts(acc) == c0, "%ld collectives started on micro-batches 1..%d",
                      model_comm_starts(acc) - c0, K - 1);
                if (world > 1) {
                    int differ = 0, first = -1;
                    CHECK(dt_check_replicas(ctx, dt_model_grads(acc), n * sizeof(float), &differ, &first) ==
                              DT_ERR_NUMERIC,
                          "unreduced gradients should differ between ranks");
                }
            }
            if (k == 1) {
                /* The middle of a group: nothing may reduce, unscale or step on a partial sum. */
                int inf = 0;
                CHECK(dt_model_sync_grads(acc) == DT_ERR_INVALID_ARG, "sync mid-group refused");
                CHECK(strstr(dt_last_error(), "micro-batch 1 of 4") != NULL, "message names the position");
                CHECK(dt_model_unscale_grads(acc, 1.0f, &inf) == DT_ERR_INVALID_ARG, "unscale mid-group refused");
                CHECK(dt_model_optimizer_step(acc, oacc) == DT_ERR_INVALID_ARG, "step mid-group refused");
                CHECK(dt_model_clip_grad_norm(acc, 1.0, NULL) == DT_ERR_INVALID_ARG, "clip mid-group refused");
            }
            CHECK(dt_model_train_step(acc, oacc, NULL, x + (size_t)k * B * IN, y + k * B, B, 1.0f / (K * B), &r) ==
                      DT_OK,
                  "micro-batch %d", k);
            CHECK(r.stepped == (k == K - 1), "micro-batch %d stepped %d", k, r.stepped);
            if (k < K - 1) CHECK(isnan(r.grad_norm), "no norm mid-group");
        }
        if (world > 1)
            CHECK(model_comm_starts(acc) > c0, "the last micro-batch reduced");
        else
            CHECK(model_comm_starts(acc) == 0, "a world of one sends nothing");
        CHECK(fabs(r.grad_norm - ref_norm) <= 1e-5 * ref_norm, "norm %.9g vs one batch of 4B %.9g", r.grad_norm,
              ref_norm);
        const double d = max_diff(dt_model_params(acc), dt_model_params(ref), n);
        CHECK(d <= 1e-5, "step %ld: accumulated parameters differ from one batch of %d by %g", step, K * B, d);
    }
    int differ = 0, first = -1;
    CHECK(dt_model_check_replicas(ctx, acc, &differ, &first) == DT_OK, "replicas identical");
    CHECK(dt_model_set_accum_steps(acc, 1) == DT_OK, "back to 1");
    dt_optimizer_free(oref), dt_optimizer_free(oacc);
    dt_model_free(ref), dt_model_free(acc);
}

/* 16-bit gradients are added in fp32 and rounded once per micro-batch: close to one big batch. */
static void test_accumulation16(dt_ctx *ctx)
{
    dt_model *ref = model(ctx, K * B), *acc = model(ctx, B);
    CHECK(dt_model_set_precision(ref, DT_BF16, DT_BF16) == DT_OK &&
              dt_model_set_precision(acc, DT_BF16, DT_BF16) == DT_OK,
          "bf16");
    CHECK(dt_model_set_accum_steps(acc, K) == DT_OK, "set_accum_steps");
    dt_optimizer *oref = sgd(ref, 0.1f, 0.0f), *oacc = sgd(acc, 0.1f, 0.0f);
    float x[K * B * IN], p0[1024];
    int32_t y[K * B];
    const size_t n = dt_model_num_params(ref);
    CHECK(n <= 1024, "params");
    memcpy(p0, dt_model_params(ref), n * sizeof *p0);
    batch(0, x, y);
    dt_step_result r;
    CHECK(dt_model_train_step(ref, oref, NULL, x, y, K * B, 1.0f / (K * B), &r) == DT_OK, "reference");
    for (int k = 0; k < K; k++)
        CHECK(dt_model_train_step(acc, oacc, NULL, x + (size_t)k * B * IN, y + k * B, B, 1.0f / (K * B), &r) == DT_OK,
              "micro %d", k);
    /* The update itself is lr * g ~ 1e-2; bf16 keeps 8 bits of it. */
    double moved = max_diff(dt_model_params(ref), p0, n), d = max_diff(dt_model_params(acc), dt_model_params(ref), n);
    CHECK(moved > 1e-4 && d <= 0.02 * moved, "bf16 accumulation differs by %g of an update of %g", d, moved);
    dt_optimizer_free(oref), dt_optimizer_free(oacc);
    dt_model_free(ref), dt_model_free(acc);
}

/* The reduced gradients of one batch, and their norm computed here. */
static double reduced_grads(dt_ctx *ctx, const float *x, const int32_t *y, float *g)
{
    dt_model *m = model(ctx, B);
    double loss;
    int correct;
    CHECK(dt_model_forward_backward(m, x, y, B, 1.0f / B, &loss, &correct) == DT_OK, "forward_backward");
    CHECK(dt_model_sync_grads(m) == DT_OK, "sync");
    const size_t n = dt_model_num_params(m);
    memcpy(g, dt_model_grads(m), n * sizeof *g);
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
    dt_model_free(m);
    return sqrt(ss);
}

/* One train step of a fresh model with clipping at max_norm (sc may be NULL); returns the result. */
static dt_step_result clipped_step(dt_ctx *ctx, double max_norm, dt_scaler *sc, const float *x, const int32_t *y,
                                   float *params_after, double *norm_after)
{
    dt_model *m = model(ctx, B);
    dt_optimizer *o = sgd(m, 0.5f, 0.0f);
    CHECK(dt_model_set_clip_grad_norm(m, max_norm) == DT_OK, "set_clip");
    dt_step_result r;
    CHECK(dt_model_train_step(m, o, sc, x, y, B, 1.0f / B, &r) == DT_OK, "train_step");
    memcpy(params_after, dt_model_params(m), dt_model_num_params(m) * sizeof *params_after);
    if (norm_after) CHECK(dt_model_grad_norm(m, norm_after) == DT_OK, "grad_norm");
    dt_optimizer_free(o);
    dt_model_free(m);
    return r;
}

static void test_clipping(dt_ctx *ctx)
{
    float x[K * B * IN], g[1024], p0[1024], p[1024], want[1024];
    int32_t y[K * B];
    batch(5, x, y);
    dt_model *m0 = model(ctx, B);
    const size_t n = dt_model_num_params(m0);
    CHECK(n <= 1024, "params");
    memcpy(p0, dt_model_params(m0), n * sizeof *p0);
    CHECK(dt_model_set_clip_grad_norm(m0, -1) == DT_ERR_INVALID_ARG, "negative refused");
    CHECK(dt_model_set_clip_grad_norm(m0, NAN) == DT_ERR_INVALID_ARG, "NaN refused");
    CHECK(dt_model_clip_grad_norm(m0, 0, NULL) == DT_ERR_INVALID_ARG, "max 0 refused");
    dt_model_free(m0);
    const double norm = reduced_grads(ctx, x, y, g);
    CHECK(norm > 0 && isfinite(norm), "reference norm %g", norm);

    /* Clipped to a quarter: p = p0 - lr * (g * coef), coef in fp32 as PyTorch computes it. */
    const double F = norm / 4;
    double after = 0;
    dt_step_result r = clipped_step(ctx, F, NULL, x, y, p, &after);
    CHECK(fabs(r.grad_norm - norm) <= 1e-12 * norm, "reported %.17g, direct %.17g", r.grad_norm, norm);
    CHECK(r.stepped == 1 && r.skipped == 0, "stepped");
    int differ = 0, first = -1;
    CHECK(dt_check_replicas(ctx, &r.grad_norm, sizeof r.grad_norm, &differ, &first) == DT_OK,
          "every rank reports the same bits");
    const float coef = (float)(F / (norm + 1e-6));
    for (size_t i = 0; i < n; i++) want[i] = p0[i] - 0.5f * (g[i] * coef);
    CHECK(max_diff(p, want, n) <= 1e-6, "clipped step differs from the hand update by %g", max_diff(p, want, n));
    CHECK(fabs(after - F) <= 1e-5 * F, "norm after clipping %g, max %g", after, F);

    /* Not clipped (max above the norm, or +inf): the plain step. */
    for (size_t i = 0; i < n; i++) want[i] = p0[i] - 0.5f * g[i];
    r = clipped_step(ctx, 2 * norm, NULL, x, y, p, NULL);
    CHECK(fabs(r.grad_norm - norm) <= 1e-12 * norm, "norm when not clipping");
    CHECK(max_diff(p, want, n) <= 1e-6, "unclipped step differs by %g", max_diff(p, want, n));
    r = clipped_step(ctx, INFINITY, NULL, x, y, p, NULL);
    CHECK(fabs(r.grad_norm - norm) <= 1e-12 * norm, "norm when only reporting");
    CHECK(max_diff(p, want, n) <= 1e-6, "report-only step differs by %g", max_diff(p, want, n));
    r = clipped_step(ctx, 0, NULL, x, y, p, NULL);
    CHECK(isnan(r.grad_norm), "clipping off reports NaN, got %g", r.grad_norm);

    /* A static loss scale of 1024: clipping sees the unscaled gradients. */
    dt_scaler_config scfg;
    dt_scaler_defaults(&scfg);
    scfg.dynamic = 0;
    scfg.init_scale = 1024;
    dt_scaler *sc = NULL;
    CHECK(dt_scaler_create(&scfg, &sc) == DT_OK, "scaler");
    r = clipped_step(ctx, F, sc, x, y, p, NULL);
    CHECK(fabs(r.grad_norm - norm) <= 1e-9 * norm, "scaled run's norm %.12g, unscaled %.12g", r.grad_norm, norm);
    for (size_t i = 0; i < n; i++) want[i] = p0[i] - 0.5f * (g[i] * coef);
    CHECK(max_diff(p, want, n) <= 1e-6, "scaled clipped step differs by %g", max_diff(p, want, n));

    /* An overflow: skipped, reported as +inf, parameters untouched. */
    dt_model *m = model(ctx, B);
    dt_optimizer *o = sgd(m, 0.5f, 0.0f);
    CHECK(dt_model_set_clip_grad_norm(m, F) == DT_OK, "set_clip");
    model_test_inject_inf(m);
    CHECK(dt_model_train_step(m, o, sc, x, y, B, 1.0f / B, &r) == DT_OK, "overflowing step");
    CHECK(r.skipped == 1 && r.stepped == 0 && isinf(r.grad_norm), "skipped %d stepped %d norm %g", r.skipped, r.stepped,
          r.grad_norm);
    CHECK(max_diff(dt_model_params(m), p0, n) == 0, "parameters moved on a skipped step");
    dt_optimizer_free(o);
    dt_model_free(m);
    dt_scaler_free(sc);
}

static void test_lr(void)
{
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, 4, &o) == DT_OK, "optimizer");
    CHECK(dt_optimizer_lr(o) == oc.lr, "lr");
    CHECK(dt_optimizer_set_lr(o, 0.25f) == DT_OK && dt_optimizer_lr(o) == 0.25f, "set_lr");
    CHECK(dt_optimizer_set_lr(o, 0) == DT_ERR_INVALID_ARG && dt_optimizer_lr(o) == 0.25f, "lr 0 refused");
    CHECK(dt_optimizer_set_lr(o, NAN) == DT_ERR_INVALID_ARG, "NaN refused");
    /* plain SGD: p -= lr * g with the new rate */
    float p[4] = {1, 1, 1, 1}, g[4] = {1, 2, 3, 4};
    dt_optimizer_free(o);
    oc.momentum = 0;
    CHECK(dt_optimizer_create(&oc, 4, &o) == DT_OK, "optimizer");
    CHECK(dt_optimizer_set_lr(o, 0.5f) == DT_OK, "set_lr");
    CHECK(dt_optimizer_step(o, p, g) == DT_OK && p[3] == 1 - 0.5f * 4, "step used the new rate: %g", (double)p[3]);
    dt_optimizer_free(o);
}

int main(void)
{
    dt_ctx *ctx = mpi_check_init("test_accum_clip");
    test_accumulation(ctx);
    test_accumulation16(ctx);
    test_clipping(ctx);
    test_lr();
    int rc = mpi_check_finish(ctx, "test_accum_clip");
    dt_finalize(ctx);
    return rc;
}
