/*
 * test_replicas.c - a custom loop that forgets to reduce its gradients is caught, and the replica
 * check names the ranks that drifted. With more than one rank: an optimizer step on unreduced
 * gradients is an error naming the fix, unless dt_sync_config.allow_unreduced says it is on
 * purpose; then dt_model_check_replicas reports the drift; a loop that reduces keeps the ranks
 * identical; an evaluation, dt_model_set_params and dt_model_set_accum_steps between backward and
 * dt_model_sync_grads leave the reduction to it, and dt_model_set_sync completes it (the same
 * reduced gradients as without them, with and without overlap, and the step is legal); a reduction
 * dropped by dt_model_set_precision makes dt_model_sync_grads fail rather than say DT_OK; dt_check_replicas on a plain buffer names the first differing rank; dt_model_create with another spec on one rank fails on every rank, naming it. With one
 * rank nothing is unreduced and every check passes. dt_evaluate, when one rank passes a bad
 * batch, fails on every rank: that rank with its own message, the others with its status and a
 * message naming it (they got DT_ERR_IO, "see their messages"), and the next evaluation works.
 */
#include "dtrain.h"
#include "mpi_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 8 };

/* One forward/backward on this rank's batch of step `step` (ranks see different samples). */
static void backward(dt_model *m, dt_dataset *d, long step)
{
    float x[BATCH * 16];
    int32_t y[BATCH];
    double loss;
    int correct;
    CHECK(dt_dataset_batch(d, step, rank, world, BATCH, x, y) == DT_OK, "batch");
    CHECK(dt_model_forward_backward(m, x, y, BATCH, 1.0f / BATCH, &loss, &correct) == DT_OK, "forward_backward");
}

static dt_model *new_model(dt_ctx *ctx, int allow_unreduced, int overlap)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, "fc:8,relu,fc:4", "16", 3, BATCH, &m) == DT_OK, "model");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.allow_unreduced = allow_unreduced;
    sc.overlap = overlap;
    sc.bucket_mb = sc.first_bucket_mb = 1e-6; /* a bucket per layer: some start during backward */
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "set_sync");
    return m;
}

/* Backward, then an evaluation, dt_model_set_params (with the parameters it has),
 * dt_model_set_accum_steps(1) and dt_model_set_sync (its settings again), then the reduction: its
 * gradients are those of a twin model that went straight to dt_model_sync_grads, and the optimizer
 * step after it is legal. Before, each call closed the open reduction: the sync found nothing to
 * do and the step was refused as unreduced (without overlap the gradients were never reduced). */
static void check_reduction_survives(dt_ctx *ctx, dt_dataset *d, int overlap)
{
    dt_model *m = new_model(ctx, 0, overlap), *twin = new_model(ctx, 0, overlap);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    const size_t n = dt_model_num_params(m);
    float *p = malloc(n * sizeof *p), x[BATCH * 16];
    int32_t y[BATCH];
    CHECK(p && dt_dataset_batch(d, 7, rank, world, BATCH, x, y) == DT_OK, "batch");
    backward(m, d, 1);
    backward(twin, d, 1);
    double loss;
    int correct;
    CHECK(dt_model_evaluate(m, x, y, BATCH, &loss, &correct, NULL) == DT_OK, "evaluate between backward and sync");
    CHECK(p && dt_model_get_params(m, p) == DT_OK && dt_model_set_params(m, p) == DT_OK, "set_params");
    CHECK(dt_model_set_accum_steps(m, 1) == DT_OK, "set_accum_steps");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.overlap = overlap;
    sc.bucket_mb = sc.first_bucket_mb = 1e-6;
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "set_sync with an open reduction");
    CHECK(dt_model_sync_grads(m) == DT_OK && dt_model_sync_grads(twin) == DT_OK, "sync");
    CHECK(memcmp(dt_model_grads(m), dt_model_grads(twin), n * sizeof(float)) == 0,
          "overlap %d: the gradients reduced after evaluate, set_params, set_accum_steps and set_sync are the twin's",
          overlap);
    const dt_status s = dt_model_optimizer_step(m, o);
    CHECK(s == DT_OK, "overlap %d: the step after them is legal: %s", overlap, s ? dt_last_error() : "");
    free(p);
    dt_optimizer_free(o);
    dt_model_free(m);
    dt_model_free(twin);
}

/* dt_model_set_precision reallocates the gradients: a backward's reduction cannot survive it, and
 * dt_model_sync_grads says so (at one rank there is nothing to reduce). */
static void check_dropped_reduction(dt_ctx *ctx, dt_dataset *d)
{
    dt_model *m = new_model(ctx, 0, 1);
    backward(m, d, 2);
    CHECK(dt_model_set_precision(m, DT_F32, DT_F32) == DT_OK, "set_precision");
    const dt_status s = dt_model_sync_grads(m);
    if (world > 1)
        CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "run dt_model_forward_backward again"),
              "a dropped reduction: sync returned %d", (int)s);
    else
        CHECK(s == DT_OK, "one rank: nothing to reduce");
    backward(m, d, 3);
    CHECK(dt_model_sync_grads(m) == DT_OK, "the next backward reduces again");
    dt_model_free(m);
}

/* 5. dt_evaluate's verdict when rank `bad` alone passes batch -1. */
static void check_evaluate_verdict(dt_ctx *ctx, dt_model *m, dt_dataset *d, int bad)
{
    dt_eval_result r = {0};
    const dt_status s = dt_evaluate(ctx, m, d, rank == bad ? -1 : BATCH, 1, &r);
    CHECK(s == DT_ERR_INVALID_ARG, "rank %d's bad batch: dt_evaluate returned %d on rank %d", bad, (int)s, rank);
    char want[64];
    if (rank == bad)
        snprintf(want, sizeof want, "dt_evaluate: batch -1");
    else
        snprintf(want, sizeof want, "dt_evaluate failed on rank %d", bad);
    CHECK(strstr(dt_last_error(), want) != NULL, "rank %d's bad batch: the message names \"%s\"", bad, want);
    CHECK(r.count == 0, "nothing written on failure");
}

int main(void)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    dt_ctx *ctx = NULL;
    if (dt_init(&cfg, &ctx)) {
        fprintf(stderr, "test_replicas: %s\n", dt_last_error());
        return 1;
    }
    rank = dt_rank(ctx);
    world = dt_world_size(ctx);
    dt_dataset *d = NULL;
    CHECK(dt_synthetic_create(16, 1, 1, 4, 1000, 5, &d) == DT_OK, "dataset");
    dt_optim_config oc;
    dt_optim_defaults(&oc);

    /* 1. The forgotten reduction. */
    dt_model *m = new_model(ctx, 0, 1);
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    backward(m, d, 0);
    dt_status s = dt_model_optimizer_step(m, o);
    if (world > 1) {
        CHECK(s == DT_ERR_INVALID_ARG, "step on unreduced gradients returned %d", (int)s);
        CHECK(strstr(dt_last_error(), "not reduced across the 2 ranks") != NULL, "message");
        CHECK(strstr(dt_last_error(), "call dt_model_sync_grads") != NULL, "message names the fix");
        CHECK(strstr(dt_last_error(), "allow_unreduced") != NULL, "message names the opt-out");
    } else {
        CHECK(s == DT_OK, "a world of one has nothing to reduce");
    }
    /* Reducing makes the step legal again. */
    CHECK(dt_model_sync_grads(m) == DT_OK, "sync");
    CHECK(dt_model_optimizer_step(m, o) == DT_OK, "step after sync");
    int differ = -1, first = -2;
    CHECK(dt_model_check_replicas(ctx, m, &differ, &first) == DT_OK && differ == 0 && first == -1,
          "after reduced steps the replicas agree (differ %d first %d)", differ, first);
    dt_model_free(m);
    dt_optimizer_free(o);

    /* 2. Unreduced steps on purpose: allowed, and the drift is what the replica check sees. Without
     * overlap nothing is reduced before dt_model_sync_grads, so each rank steps on its own
     * gradients; with overlap (2b) the buckets backward started are reduced in place, and the step
     * reads them once they have landed, never halfway (it raced with them: the drift, and the
     * bits, depended on timing). */
    m = new_model(ctx, 1, 0);
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    for (long step = 0; step < 3; step++) {
        backward(m, d, step);
        CHECK(dt_model_optimizer_step(m, o) == DT_OK, "allowed unreduced step");
    }
    s = dt_model_check_replicas(ctx, m, &differ, &first);
    if (world > 1) {
        CHECK(s == DT_ERR_NUMERIC && differ == world - 1 && first == 1, "drift: status %d differ %d first %d", (int)s,
              differ, first);
        CHECK(strstr(dt_last_error(), "the first is rank 1") != NULL, "message names the rank");
    } else {
        CHECK(s == DT_OK && differ == 0, "one rank agrees with itself");
    }
    /* The pending reductions of the last backward still complete (every rank calls this). */
    CHECK(dt_model_sync_grads(m) == DT_OK, "sync");
    dt_model_free(m);
    dt_optimizer_free(o);
    /* 2b. With overlap every bucket starts during backward: the steps read reduced gradients, and
     * the replicas agree, whatever the timing; on a bf16 wire too (its sums widened into the fp32
     * gradients before the step). */
    for (int wire16 = 0; wire16 <= 1; wire16++) {
        m = new_model(ctx, 1, 1);
        if (wire16) {
            dt_sync_config sc;
            dt_sync_defaults(&sc);
            sc.allow_unreduced = 1;
            sc.grad_comm = DT_BF16;
            sc.bucket_mb = sc.first_bucket_mb = 1e-6;
            CHECK(dt_model_set_sync(m, &sc) == DT_OK, "set_sync bf16 wire");
        }
        CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
        for (long step = 0; step < 3; step++) {
            backward(m, d, step);
            CHECK(dt_model_optimizer_step(m, o) == DT_OK, "allowed step before the sync");
        }
        s = dt_model_check_replicas(ctx, m, &differ, &first);
        CHECK(s == DT_OK && differ == 0, "overlap%s: the started buckets landed before each step: status %d differ %d",
              wire16 ? ", bf16 wire" : "", (int)s, differ);
        CHECK(dt_model_sync_grads(m) == DT_OK, "sync");
        dt_model_free(m);
        dt_optimizer_free(o);
    }

    /* 3. An evaluation and new parameters between backward and the reduction. */
    check_reduction_survives(ctx, d, 1);
    check_reduction_survives(ctx, d, 0);
    check_dropped_reduction(ctx, d);

    /* 4. A plain buffer that only the last rank changes. */
    float buf[100];
    for (int i = 0; i < 100; i++) buf[i] = (float)i;
    CHECK(dt_check_replicas(ctx, buf, sizeof buf, &differ, &first) == DT_OK && differ == 0, "equal buffers");
    if (rank == world - 1 && world > 1) buf[99] = -1.0f;
    s = dt_check_replicas(ctx, buf, sizeof buf, &differ, &first);
    if (world > 1)
        CHECK(s == DT_ERR_NUMERIC && differ == 1 && first == world - 1, "last rank differs: %d %d %d", (int)s, differ,
              first);
    CHECK(dt_check_replicas(NULL, buf, sizeof buf, NULL, NULL) == DT_ERR_INVALID_ARG, "NULL ctx");

    /* 5. A model spec that differs across ranks: refused on every rank before the parameters'
     * broadcast (which would pair buffers of different sizes), naming the first differing rank. */
    if (world > 1) {
        m = NULL;
        s = dt_model_create(ctx, rank == world - 1 ? "fc:8,relu,fc:5" : "fc:8,relu,fc:4", "16", 3, BATCH, &m);
        CHECK(s == DT_ERR_INVALID_ARG && m == NULL, "different specs: status %d", (int)s);
        char want[64];
        snprintf(want, sizeof want, "the first is rank %d", world - 1);
        CHECK(strstr(dt_last_error(), want) != NULL, "names the rank: %s", dt_last_error());
        CHECK(strstr(dt_last_error(), "same spec and input") != NULL, "names the fix: %s", dt_last_error());
        /* A rank whose spec does not parse keeps its own error; the others name it. */
        s = dt_model_create(ctx, rank == 1 ? "fc:8,bogus" : "fc:8,relu,fc:4", "16", 3, BATCH, &m);
        CHECK(s == DT_ERR_INVALID_ARG && m == NULL, "a bad spec on one rank: status %d", (int)s);
        if (rank != 1)
            CHECK(strstr(dt_last_error(), "dt_model_create failed on rank 1") != NULL, "names rank 1: %s",
                  dt_last_error());
        CHECK(dt_barrier(ctx) == DT_OK, "every rank still here");
    }

    /* 6. An evaluation that fails on one rank (the first, then the last), then one that works. */
    m = new_model(ctx, 0, 1);
    check_evaluate_verdict(ctx, m, d, 0);
    check_evaluate_verdict(ctx, m, d, world - 1);
    dt_eval_result r = {0};
    CHECK(dt_evaluate(ctx, m, d, BATCH, 1, &r) == DT_OK && r.count == 1000, "evaluation after the failures: %ld",
          r.count);
    dt_model_free(m);

    dt_dataset_free(d);
    int rc = mpi_check_finish(ctx, "test_replicas");
    dt_finalize(ctx);
    return rc;
}
