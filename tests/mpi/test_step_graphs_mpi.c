/*
 * test_step_graphs_mpi.c - step graphs at any rank count (ctest runs 1 to 3): a pass replayed as
 * a graph hands each parameter layer's gradients to the reducer after the launch, in backward
 * order, so the buckets are allreduced as if backward had handed them over one by one. On the
 * recording CPU table (tests/unit/graph_recorder.h), a model with graphs on trains beside one with
 * graphs off on the same batches (different on every rank): losses and parameters equal bit for
 * bit on every rank, the replicas equal across ranks, one recording (at the second pass) and
 * replays after it, nothing that waits or copies called while recording. With the optimizer step
 * overlapped, one rank steps layer by layer inside backward (no graph), more ranks step bucket by
 * bucket after the graph's launch.
 */
#include "dtrain.h"
#include "graph_recorder.h"
#include "kernels/backend.h"
#include "mpi_check.h"
#include "runtime/test_hooks.h"

#include <stdint.h>
#include <string.h>

enum { IN = 12, B = 4, STEPS = 5 };
#define SPEC "fc:24,relu,fc:16,relu,fc:5"

static dt_model *model(dt_ctx *ctx, dt_dtype prec, dt_step_overlap overlap, dt_graphs graphs)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, SPEC, "12", 11, B, &m) == DT_OK, "model");
    CHECK(dt_model_set_precision(m, prec, prec) == DT_OK, "precision");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.op = DT_SUM;
    sc.bucket_mb = sc.first_bucket_mb = 1e-6; /* one bucket per layer */
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "sync");
    dt_model_set_step_overlap(m, overlap);
    dt_model_set_graphs(m, graphs);
    return m;
}

static void run(dt_ctx *ctx, dt_optim_kind kind, dt_dtype prec, dt_step_overlap overlap)
{
    dt_model *plain = model(ctx, prec, overlap, DT_GRAPHS_OFF), *graphed = model(ctx, prec, overlap, DT_GRAPHS_ON);
    model_test_set_backend(graphed, graph_recorder_init());
    const graph_recorder *g = graph_recorder_state();
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = kind;
    oc.lr = kind == DT_OPTIM_SGD ? 0.05f : 2e-3f;
    oc.weight_decay = 1e-2f;
    dt_optimizer *op = NULL, *og = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(plain), &op) == DT_OK, "optimizer");
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(graphed), &og) == DT_OK, "optimizer");
    /* One rank with the step overlapped steps each layer inside backward: never a graph. */
    const int graphs = !(overlap == DT_STEP_OVERLAP_ON && world == 1);
    float x[B * IN];
    int32_t y[B];
    for (long p = 0; p < STEPS; p++) {
        mpi_rank_batch(p, B, IN, 5, x, y);
        dt_step_result rp, rg;
        const float gs = 1.0f / (float)(B * world);
        const long live0 = g->live_layer_calls;
        CHECK(dt_model_train_step(plain, op, NULL, x, y, B, gs, &rp) == DT_OK, "step without graphs");
        CHECK(dt_model_train_step(graphed, og, NULL, x, y, B, gs, &rg) == DT_OK, "step with graphs");
        CHECK(memcmp(&rp.loss_sum, &rg.loss_sum, sizeof rp.loss_sum) == 0 && rp.stepped == rg.stepped,
              "pass %ld: loss %.17g vs %.17g", p, rp.loss_sum, rg.loss_sum);
        const int as_graph = graphs && p >= 1;
        CHECK(dt_model_graphed(graphed) == (as_graph ? DT_GRAPHS_ON : DT_GRAPHS_OFF), "pass %ld: graphed %d", p,
              (int)dt_model_graphed(graphed));
        if (as_graph && p >= 2)
            CHECK(g->live_layer_calls == live0, "pass %ld replayed, yet %ld layer calls from the host", p,
                  g->live_layer_calls - live0);
    }
    const size_t n = dt_model_num_params(plain);
    CHECK(memcmp(dt_model_params(plain), dt_model_params(graphed), n * sizeof(float)) == 0,
          "%s %s overlap %d: parameters differ with graphs", kind == DT_OPTIM_SGD ? "SGD" : "AdamW",
          dt_dtype_name(prec), (int)overlap);
    int differ = 0, first = -1;
    CHECK(dt_check_replicas(ctx, dt_model_params(graphed), n * sizeof(float), &differ, &first) == DT_OK && !differ,
          "replicas differ (rank %d first)", first);
    CHECK(model_test_graph_records(graphed) == graphs, "%ld recordings", model_test_graph_records(graphed));
    CHECK(g->launches == (graphs ? STEPS - 1 : 0) && g->misuses == 0, "%ld launches, %ld misuses", g->launches,
          g->misuses);
    CHECK(dt_model_step_overlapped(graphed) == dt_model_step_overlapped(plain), "the overlap differs");
    dt_optimizer_free(op);
    dt_optimizer_free(og);
    dt_model_free(plain);
    dt_model_free(graphed);
}

int main(void)
{
    dt_ctx *ctx = mpi_check_init("test_step_graphs_mpi");
    run(ctx, DT_OPTIM_SGD, DT_F32, DT_STEP_OVERLAP_OFF);
    run(ctx, DT_OPTIM_ADAMW, DT_BF16, DT_STEP_OVERLAP_OFF);
    run(ctx, DT_OPTIM_SGD, DT_F32, DT_STEP_OVERLAP_ON);
    const int rc = mpi_check_finish(ctx, "test_step_graphs_mpi");
    dt_finalize(ctx);
    return rc;
}
