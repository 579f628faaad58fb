/*
 * test_stage_batch_gpu.c - dt_model_stage_batch on a GPU model: host batches whose copies are
 * queued ahead of their step (before the last step's deferred verdict is taken, as dtrain train
 * does) train bit for bit as batches copied by the step itself, in fp32, bf16 and fp16 (loss
 * scaler, deferred verdicts), graphs on and off; and the cases where a staged copy must not be
 * read: a step on another batch than the one staged (and one on another batch size), an
 * evaluation between staging and the step (it writes the first input slot), the host buffer of a
 * staged batch rewritten after its step returned, a step refused for a bad label (its batch mended
 * in place and staged again must be copied again). Two pinned host buffers take turns, as the
 * loader's do.
 *
 * Exit status: 0 passed, 1 failed, 77 skipped ("SKIP: no CUDA device") without a GPU.
 */
#include <cuda_runtime.h>

#include "dtrain.h"
#include "../mpi/mpi_check.h"
#include "gpu_skip.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN = 20, CLASSES = 10, B = 16, STEPS = 12 };

typedef struct side {
    dt_model *m;
    dt_optimizer *o;
    dt_scaler *sc;
} side;

static side side_make(dt_ctx *ctx, dt_dtype prec, dt_graphs graphs)
{
    side s = {0};
    CHECK(dt_model_create(ctx, "fc:48,relu,fc:32,relu,fc:10", "20", 7, B, &s.m) == DT_OK, "model: %s", dt_last_error());
    CHECK(dt_model_set_precision(s.m, prec, DT_F32) == DT_OK, "precision: %s", dt_last_error());
    dt_model_set_graphs(s.m, graphs);
    dt_model_set_deferred_verdict(s.m, 1);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.lr = 0.05f;
    oc.momentum = 0.9f;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(s.m), &s.o) == DT_OK, "optimizer");
    if (prec == DT_F16) {
        dt_scaler_config c;
        dt_scaler_defaults(&c);
        c.growth_interval = 3; /* the scale changes within the run: graphs are recorded again */
        CHECK(dt_scaler_create(&c, &s.sc) == DT_OK, "scaler");
    }
    return s;
}

static void side_free(side *s)
{
    dt_model_settle_step(s->m, NULL);
    dt_scaler_free(s->sc);
    dt_optimizer_free(s->o);
    dt_model_free(s->m);
}

/* Batch k of the run into (x, y). */
static void batch_of(int k, int n, float *x, int32_t *y)
{
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)((k * 7 + i * 3) % CLASSES);
        for (int j = 0; j < IN; j++) x[i * IN + j] = (float)sin(0.1 * (k * 131 + i * 17 + j)) + 0.1f * (float)y[i];
    }
}

static dt_status step(side *s, const float *x, const int32_t *y, int n)
{
    dt_step_result r;
    return dt_model_train_step(s->m, s->o, s->sc, x, y, n, 1.0f / (float)n, &r);
}

/* Parameters of a and b bit for bit. */
static void same_params(const side *a, const side *b, const char *what)
{
    const size_t n = dt_model_num_params(a->m);
    float *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb);
    CHECK(pa && pb && dt_model_get_params(a->m, pa) == DT_OK && dt_model_get_params(b->m, pb) == DT_OK, "params");
    size_t diff = 0;
    for (size_t i = 0; pa && pb && i < n; i++) diff += memcmp(&pa[i], &pb[i], sizeof *pa) != 0;
    CHECK(diff == 0, "%s: %zu of %zu parameters differ from the unstaged model's", what, diff, n);
    free(pa);
    free(pb);
}

static void run_case(dt_ctx *ctx, dt_dtype prec, dt_graphs graphs)
{
    char what[128];
    snprintf(what, sizeof what, "%s, graphs %s", dt_dtype_name(prec), graphs == DT_GRAPHS_ON ? "on" : "off");
    side a = side_make(ctx, prec, graphs), b = side_make(ctx, prec, graphs);
    float *x[2];
    int32_t *y[2];
    for (int k = 0; k < 2; k++) {
        CHECK(cudaMallocHost((void **)&x[k], (size_t)B * IN * sizeof **x) == cudaSuccess, "pinned x");
        CHECK(cudaMallocHost((void **)&y[k], (size_t)B * sizeof **y) == cudaSuccess, "pinned y");
    }
    float ex[B * IN];
    int32_t ey[B];
    batch_of(999, B, ex, ey);
    dt_status sa = DT_OK, sb = DT_OK;
    for (int k = 0; k < STEPS && !sa && !sb; k++) {
        const int t = k & 1, n = k == 7 ? B / 2 : B;
        batch_of(k, n, x[t], y[t]);
        if (k == 10) {
            /* a step refused (a label out of range, checked on the host) drops its staged copy,
             * which holds the bad label: the label mended in place and the same buffers staged
             * again below are copied again. Were the refused batch's copy kept, the step would
             * train on label 99 (a NaN loss) and the parameters would differ from b's. */
            const int32_t good = y[t][1];
            y[t][1] = 99;
            sa = dt_model_stage_batch(a.m, x[t], y[t], n);
            if (!sa) sa = dt_model_settle_step(a.m, NULL);
            const dt_status bad = sa ? sa : step(&a, x[t], y[t], n);
            CHECK(bad == DT_ERR_INVALID_ARG, "%s: a label of 99 was not refused", what);
            y[t][1] = good;
        }
        /* a: staged, then the last verdict, then the step (dtrain train's order) */
        if (!sa) sa = dt_model_stage_batch(a.m, x[t], y[t], n);
        if (k == 3) {
            /* a step on another batch: the staged one is dropped, the other copied */
            batch_of(k, n, x[t ^ 1], y[t ^ 1]);
            if (!sa) sa = dt_model_settle_step(a.m, NULL);
            if (!sa) sa = step(&a, x[t ^ 1], y[t ^ 1], n);
            if (!sb) sb = step(&b, x[t ^ 1], y[t ^ 1], n);
            continue;
        }
        if (k == 5 && !sa) {
            /* an evaluation between staging and the step (it writes the first input slot) */
            double l;
            int c;
            sa = dt_model_settle_step(a.m, NULL);
            if (!sa) sa = dt_model_evaluate(a.m, ex, ey, B, &l, &c, NULL);
            if (!sb) sb = dt_model_settle_step(b.m, NULL);
            if (!sb) sb = dt_model_evaluate(b.m, ex, ey, B, &l, &c, NULL);
        }
        if (k == 9 && !sa) sa = dt_model_stage_batch(a.m, x[t], y[t], n - 1); /* another batch size */
        if (!sa) sa = dt_model_settle_step(a.m, NULL);
        if (!sa) sa = step(&a, x[t], y[t], n);
        /* b: the step copies its own batch */
        if (!sb) sb = step(&b, x[t], y[t], n);
        /* the host buffer rewritten once the steps returned: no copy may still read it */
        memset(x[t], 0x7f, (size_t)n * IN * sizeof **x);
    }
    CHECK(sa == DT_OK && sb == DT_OK, "%s: the runs failed: %s", what, dt_last_error());
    CHECK(dt_model_settle_step(a.m, NULL) == DT_OK && dt_model_settle_step(b.m, NULL) == DT_OK, "settle");
    same_params(&a, &b, what);
    if (!failures) printf("ok: %s: %d steps with staged batches == copied by the step, bit for bit\n", what, STEPS);
    /* A staged batch never trained on is waited for by dt_model_free (the buffer freed after). */
    batch_of(0, B, x[0], y[0]);
    CHECK(dt_model_stage_batch(a.m, x[0], y[0], B) == DT_OK, "stage before free");
    side_free(&a);
    side_free(&b);
    for (int k = 0; k < 2; k++) cudaFreeHost(x[k]), cudaFreeHost(y[k]);
}

int main(void)
{
    if (!gpu_devices_or_skip()) return 77;
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CUDA;
    dt_ctx *ctx = mpi_check_init_config("test_stage_batch_gpu", &cfg);
    static const dt_dtype precs[] = {DT_F32, DT_BF16, DT_F16};
    for (size_t p = 0; p < sizeof precs / sizeof *precs; p++) {
        run_case(ctx, precs[p], DT_GRAPHS_OFF);
        run_case(ctx, precs[p], DT_GRAPHS_ON);
    }
    /* Refused: host and device memory mixed. */
    dt_model *m = NULL;
    float *dx = NULL;
    CHECK(dt_model_create(ctx, "fc:10", "20", 1, B, &m) == DT_OK && cudaMalloc((void **)&dx, B * IN * 4) == cudaSuccess,
          "model");
    int32_t hy[B] = {0};
    CHECK(dt_model_stage_batch(m, dx, hy, B) == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "pass both in one"),
          "device inputs with host labels refused: %s", dt_last_error());
    cudaFree(dx);
    dt_model_free(m);
    const int rc = mpi_check_finish(ctx, "test_stage_batch_gpu");
    dt_finalize(ctx);
    return rc;
}
