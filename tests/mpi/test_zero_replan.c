/*
 * test_zero_replan.c - ZeRO-1's optimizer slices across a change of bucket plan, at any rank count
 * (ctest runs 1 to 3): a model at zero 1 steps with one bucket per layer, its optimizer is made
 * whole again (model_zero_unshard, as `dtrain train --bucket-mb auto` does before it replans), the
 * plan becomes one bucket, the optimizer is cut for it, and the steps go on. Against a twin at
 * zero 0 with the final plan throughout: the same parameters bit for bit (a bucket plan changes no
 * bit, and zero 1's owned values are zero 0's), for AdamW (two state vectors) and SGD with
 * momentum. Without the unshard, the first step after the replan is refused (the optimizer is
 * sharded for another plan): the failure `--bucket-mb auto --zero 1` ran into. A replan between a
 * backward and its step completes the reduce-scatter, whose owned slices are not the new plan's:
 * among ranks the step after it is refused as unreduced. Also: an inf in the last bucket is found on
 * every rank, and an optimizer cut for zero 1 is refused at zero 0.
 */
#include "dtrain.h"
#include "mpi_check.h"
#include "runtime/model/model.h"

#include <string.h>

enum { IN = 12, B = 4, STEPS = 3 };
#define SPEC "fc:24,relu,fc:16,relu,fc:5"

static dt_model *model(dt_ctx *ctx, int zero, double cap)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, SPEC, "12", 11, B, &m) == DT_OK, "model");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.zero = zero;
    sc.bucket_mb = sc.first_bucket_mb = cap;
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "sync");
    return m;
}

static void steps(dt_model *m, dt_optimizer *o, long from)
{
    float x[B * IN];
    int32_t y[B];
    for (long s = from; s < from + STEPS; s++) {
        mpi_rank_batch(s, B, IN, 5, x, y);
        dt_step_result r;
        CHECK(dt_model_train_step(m, o, NULL, x, y, B, 1.0f / (float)(B * world), &r) == DT_OK, "step %ld", s);
    }
}

static void run(dt_ctx *ctx, dt_optim_kind kind, int unshard)
{
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = kind;
    oc.lr = kind == DT_OPTIM_SGD ? 0.05f : 3e-3f;
    dt_model *twin = model(ctx, 0, 0), *m = model(ctx, 1, 1e-6); /* 0: one bucket; 1e-6: one a layer */
    CHECK(dt_model_num_buckets(m) == 3 && dt_model_num_buckets(twin) == 1, "%d and %d buckets", dt_model_num_buckets(m),
          dt_model_num_buckets(twin));
    dt_optimizer *ot = NULL, *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(twin), &ot) == DT_OK &&
              dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK,
          "optimizers");
    CHECK(dt_model_shard_optimizer(m, o) == DT_OK, "shard for one bucket a layer");
    steps(twin, ot, 0);
    steps(m, o, 0);

    if (unshard) CHECK(model_zero_unshard(m, o) == DT_OK, "unshard");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.zero = 1;
    sc.bucket_mb = sc.first_bucket_mb = 0;
    CHECK(dt_model_set_sync(m, &sc) == DT_OK && dt_model_num_buckets(m) == 1, "replanned to one bucket");
    const dt_status s = dt_model_shard_optimizer(m, o);
    if (!unshard) {
        CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "already sharded for another bucket plan"),
              "without the unshard the optimizer is refused: %d", (int)s);
    } else {
        CHECK(s == DT_OK, "shard for one bucket");
        steps(twin, ot, STEPS);
        steps(m, o, STEPS);
        const size_t n = dt_model_num_params(m);
        CHECK(memcmp(dt_model_params(m), dt_model_params(twin), n * sizeof(float)) == 0,
              "%s: zero 1 across a replan == zero 0 with the final plan, bit for bit",
              kind == DT_OPTIM_SGD ? "SGD" : "AdamW");
    }
    dt_optimizer_free(ot);
    dt_optimizer_free(o);
    dt_model_free(twin);
    dt_model_free(m);
}

static void check_replan_mid_step(dt_ctx *ctx)
{
    dt_model *m = model(ctx, 1, 1e-6);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    float x[B * IN];
    int32_t y[B];
    mpi_rank_batch(0, B, IN, 5, x, y);
    double loss;
    int correct;
    CHECK(dt_model_forward_backward(m, x, y, B, 1.0f / B, &loss, &correct) == DT_OK, "backward");
    dt_sync_config sc;
    dt_sync_defaults(&sc); /* zero 0: the whole buffer, of which only the old slices were reduced */
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "replan with the reduce-scatter open");
    const dt_status s = dt_model_optimizer_step(m, o);
    CHECK(world > 1 ? s == DT_ERR_INVALID_ARG : s == DT_OK, "the step after it at %d rank(s): %d", world, (int)s);
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* Under ZeRO-1 an inf in the last bucket (the first layer's first weight: rank 0's part) is found
 * on every rank; and an optimizer cut for zero 1 is refused once the model is at zero 0, by
 * dt_model_shard_optimizer and by the step, rather than stepping slices of allreduced gradients. */
static void check_last_bucket_and_zero0(dt_ctx *ctx)
{
    dt_model *m = model(ctx, 1, 1e-6);
    float x[B * IN];
    int32_t y[B];
    double loss;
    int correct, inf = -1;
    mpi_rank_batch(0, B, IN, 5, x, y);
    CHECK(dt_model_forward_backward(m, x, y, B, 1.0f / B, &loss, &correct) == DT_OK && dt_model_sync_grads(m) == DT_OK,
          "backward");
    dt_model_grads(m)[0] = 1.0f / 0.0f;
    CHECK(dt_model_unscale_grads(m, 0.5f, &inf) == DT_OK && inf == 1, "rank %d: the inf in the last bucket: %d", rank,
          inf);
    dt_model_free(m);

    m = model(ctx, 1, 1e-6);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    CHECK(dt_model_shard_optimizer(m, o) == DT_OK, "shard for zero 1");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.bucket_mb = sc.first_bucket_mb = 1e-6;
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "zero 0, the same buckets");
    const char *want = "the optimizer's state is sharded (--zero 1) but the model's gradients are allreduced";
    CHECK(dt_model_shard_optimizer(m, o) == DT_ERR_INVALID_ARG && strstr(dt_last_error(), want),
          "shard at zero 0 refused");
    CHECK(dt_model_forward_backward(m, x, y, B, 1.0f / B, &loss, &correct) == DT_OK && dt_model_sync_grads(m) == DT_OK,
          "backward at zero 0");
    CHECK(dt_model_optimizer_step(m, o) == DT_ERR_INVALID_ARG && strstr(dt_last_error(), want),
          "step at zero 0 refused");
    dt_optimizer_free(o);
    dt_model_free(m);
}

int main(void)
{
    dt_ctx *ctx = mpi_check_init("test_zero_replan");
    run(ctx, DT_OPTIM_ADAMW, 1);
    run(ctx, DT_OPTIM_SGD, 1);
    run(ctx, DT_OPTIM_ADAMW, 0);
    check_replan_mid_step(ctx);
    check_last_bucket_and_zero0(ctx);
    const int rc = mpi_check_finish(ctx, "test_zero_replan");
    dt_finalize(ctx);
    return rc;
}
