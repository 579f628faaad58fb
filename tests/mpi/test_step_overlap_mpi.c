/*
 * test_step_overlap_mpi.c - the optimizer step overlapped with the buckets' allreduces, at any
 * rank count (ctest runs 1 to 3): with dt_model_set_step_overlap ON, dt_model_train_step steps
 * each bucket as soon as its allreduce lands while the later buckets are still being reduced (one
 * rank: each layer beside backward instead). Against the same model with it OFF, stepped once
 * after every bucket is in: the same losses and parameters bit for bit, over SGD with momentum and
 * AdamW, fp32 and bf16 (16-bit gradients and wire), accumulation, on every rank; and the path ran:
 * with one bucket per layer, one optimizer call per bucket (more than one rank) or per layer (one
 * rank) against one call for the whole buffer. A loss scaler keeps the step after backward, and
 * so does a reducer whose buckets start only at the wait (dt_sync_config.overlap 0: a bucket
 * started at its own wait would queue behind the steps before it) on more than one rank.
 */
#include "dtrain.h"
#include "kernels/backend.h"
#include "mpi_check.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { IN = 12, B = 4, STEPS = 4, PARAM_LAYERS = 3 };
#define SPEC "fc:24,relu,fc:16,relu,fc:5"

static const backend_ops *g_cpu;
static int g_optim_calls;

static dt_status count_sgd(backend *be, float *p, const optim_grads *g, float *buf, size_t n, float lr, float mom,
                           float wd, int first, dt_dtype copy_t, uint16_t *copy)
{
    g_optim_calls++;
    return g_cpu->sgd(be, p, g, buf, n, lr, mom, wd, first, copy_t, copy);
}

static dt_model *model(dt_ctx *ctx, dt_dtype prec, int accum, dt_step_overlap overlap)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, SPEC, "12", 11, B, &m) == DT_OK, "model");
    CHECK(dt_model_set_precision(m, prec, prec) == DT_OK, "precision");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.bucket_mb = sc.first_bucket_mb = 1e-6; /* one bucket per layer */
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "sync");
    CHECK(dt_model_set_accum_steps(m, accum) == DT_OK, "accum");
    dt_model_set_step_overlap(m, overlap);
    return m;
}

static void run(dt_ctx *ctx, dt_optim_kind kind, dt_dtype prec, int accum, int with_scaler)
{
    dt_model *off = model(ctx, prec, accum, DT_STEP_OVERLAP_OFF), *on = model(ctx, prec, accum, DT_STEP_OVERLAP_ON);
    CHECK(dt_model_num_buckets(on) == PARAM_LAYERS, "%d buckets", dt_model_num_buckets(on));
    backend_ops ops = *backend_cpu()->ops;
    g_cpu = backend_cpu()->ops;
    ops.sgd = count_sgd;
    backend counting = {&ops, NULL};
    model_test_set_backend(on, &counting);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = kind;
    oc.lr = kind == DT_OPTIM_SGD ? 0.05f : 2e-3f;
    oc.weight_decay = 1e-2f;
    dt_optimizer *ooff = NULL, *oon = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(off), &ooff) == DT_OK, "optimizer");
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(on), &oon) == DT_OK, "optimizer");
    dt_scaler *soff = NULL, *son = NULL;
    if (with_scaler) {
        dt_scaler_config scc;
        dt_scaler_defaults(&scc);
        CHECK(dt_scaler_create(&scc, &soff) == DT_OK && dt_scaler_create(&scc, &son) == DT_OK, "scalers");
    }
    g_optim_calls = 0;
    float x[B * IN];
    int32_t y[B];
    for (long p = 0; p < STEPS * accum; p++) {
        mpi_rank_batch(p, B, IN, 5, x, y);
        dt_step_result ro, rn;
        const float gs = 1.0f / (float)(B * accum * world);
        CHECK(dt_model_train_step(off, ooff, soff, x, y, B, gs, &ro) == DT_OK, "step without overlap");
        CHECK(dt_model_train_step(on, oon, son, x, y, B, gs, &rn) == DT_OK, "step with overlap");
        CHECK(memcmp(&ro.loss_sum, &rn.loss_sum, sizeof ro.loss_sum) == 0 && ro.stepped == rn.stepped,
              "pass %ld: loss %.17g vs %.17g", p, ro.loss_sum, rn.loss_sum);
    }
    CHECK(dt_model_step_overlapped(on) == (with_scaler ? DT_STEP_OVERLAP_OFF : DT_STEP_OVERLAP_ON) &&
              dt_model_step_overlapped(off) == DT_STEP_OVERLAP_OFF,
          "dt_model_step_overlapped says %d and %d", (int)dt_model_step_overlapped(on),
          (int)dt_model_step_overlapped(off));
    const size_t n = dt_model_num_params(off);
    CHECK(memcmp(dt_model_params(off), dt_model_params(on), n * sizeof(float)) == 0,
          "%s %s accum %d: parameters differ with the step overlapped", kind == DT_OPTIM_SGD ? "SGD" : "AdamW",
          dt_dtype_name(prec), accum);
    int differ = 0, first = -1;
    CHECK(dt_check_replicas(ctx, dt_model_params(on), n * sizeof(float), &differ, &first) == DT_OK,
          "replicas differ (rank %d first)", first);
    /* SGD's calls: one per bucket (or layer) and step, or one per step when the scaler needs the
     * whole gradient first (the CPU's SGD steps a whole range in one call). */
    if (kind == DT_OPTIM_SGD) {
        const int want = with_scaler ? STEPS : STEPS * PARAM_LAYERS;
        CHECK(g_optim_calls == want, "%d SGD calls over %d steps, want %d", g_optim_calls, STEPS, want);
    }
    dt_scaler_free(soff);
    dt_scaler_free(son);
    dt_optimizer_free(ooff);
    dt_optimizer_free(oon);
    dt_model_free(off);
    dt_model_free(on);
}

/* Buckets that start at the wait, not during backward: among ranks the step stays after them all
 * (one optimizer call a step); one rank still steps layer by layer (no reducer sends). */
static void check_sync_without_overlap(dt_ctx *ctx)
{
    dt_model *m = model(ctx, DT_F32, 1, DT_STEP_OVERLAP_ON);
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.bucket_mb = sc.first_bucket_mb = 1e-6;
    sc.overlap = 0;
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "sync without overlap");
    dt_optimizer *o = NULL;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    float x[B * IN];
    int32_t y[B];
    for (int i = 0; i < B * IN; i++) x[i] = (float)sin(0.3 * i);
    for (int i = 0; i < B; i++) y[i] = i % 5;
    dt_step_result r;
    CHECK(dt_model_train_step(m, o, NULL, x, y, B, 1.0f / B, &r) == DT_OK, "step: %s", dt_last_error());
    const int ranks = dt_world_size(ctx);
    CHECK(dt_model_step_overlapped(m) == (ranks > 1 ? DT_STEP_OVERLAP_OFF : DT_STEP_OVERLAP_ON),
          "sync overlap 0 at %d rank(s): the step overlapped says %d", ranks, (int)dt_model_step_overlapped(m));
    dt_optimizer_free(o);
    dt_model_free(m);
}

int main(void)
{
    dt_ctx *ctx = mpi_check_init("test_step_overlap_mpi");
    for (int accum = 1; accum <= 2; accum++) {
        run(ctx, DT_OPTIM_SGD, DT_F32, accum, 0);
        run(ctx, DT_OPTIM_ADAMW, DT_F32, accum, 0);
        run(ctx, DT_OPTIM_SGD, DT_BF16, accum, 0);
        run(ctx, DT_OPTIM_ADAMW, DT_BF16, accum, 0);
    }
    run(ctx, DT_OPTIM_SGD, DT_F16, 1, 1);
    check_sync_without_overlap(ctx);
    const int rc = mpi_check_finish(ctx, "test_step_overlap_mpi");
    dt_finalize(ctx);
    return rc;
}
