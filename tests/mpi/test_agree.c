/*
 * test_agree.c - settings every rank must give alike, given differently on one rank: every rank
 * fails at once (well before the collective deadline, 30 s here; a rank left behind would wait
 * for the watchdog) with DT_ERR_INVALID_ARG naming the rank, the setting and both values, nothing
 * changes on any rank, and the call given alike afterwards works.
 *
 * The calls: dt_reducer_set_sync (the last rank keeps its gradients while the others reduce),
 * dt_model_set_precision, dt_model_set_accum_steps, dt_model_set_sync; a value outside the allowed ones on one rank
 * (sync 2, accumulation 0; also on rank 0) fails every rank with that rank's code, and values that
 * differ on several ranks name the lowest of them. dt_reducer_create's plan check
 * names the setting that differs and both ranks' values (the caps, the overlap, the buffer size),
 * and dt_check_replicas given another length on one rank says so instead of blaming the values
 * (and, given other values on several ranks, names the lowest).
 * With one rank there is nobody to disagree with: the calls succeed alone.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "mpi_check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

enum { N = 1000, IN = 8, CLS = 4, B = 4 };
#define SPEC "fc:16,relu,fc:4"
#define PROMPT_S 10.0 /* "at once": a third of the deadline, on a busy machine */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* s is DT_ERR_INVALID_ARG, returned within PROMPT_S of t0, with every needle in the message. */
static void expect_refused(const char *what, dt_status s, double t0, const char *n1, const char *n2, const char *n3)
{
    const double dt = now() - t0;
    const char *e = dt_last_error();
    CHECK(s == DT_ERR_INVALID_ARG, "%s: rank %d returned %d", what, rank, (int)s);
    CHECK(dt < PROMPT_S, "%s: rank %d returned after %.1f s", what, rank, dt);
    const char *needles[] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        if (needles[i])
            CHECK(strstr(e, needles[i]) != NULL, "%s: rank %d's message holds \"%s\"", what, rank, needles[i]);
}

/* 1. dt_reducer_set_sync: 0 on the last rank, 1 elsewhere; then 2 on the last rank; then alike. */
static void check_reducer_sync(dt_ctx *ctx)
{
    float g[N];
    dt_reducer *red = NULL;
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, NULL, &red) == DT_OK, "reducer");
    const int bad = world - 1;
    char want[64];
    double t0 = now();
    dt_status s = dt_reducer_set_sync(red, rank == bad ? 0 : 1);
    if (world > 1) {
        snprintf(want, sizeof want, "rank %d gave sync 0 where rank 0 gave 1", bad);
        expect_refused("sync differs", s, t0, "dt_reducer_set_sync", want, "no rank changed it");
    } else {
        CHECK(s == DT_OK, "one rank: sync 0 alone");
        CHECK(dt_reducer_set_sync(red, 1) == DT_OK, "one rank: sync 1 again");
    }
    t0 = now();
    s = dt_reducer_set_sync(red, rank == bad ? 2 : 1);
    expect_refused("sync 2", s, t0, rank == bad ? "sync 2 must be 0" : "dt_reducer_set_sync failed on rank", NULL,
                   NULL);
    /* Nothing changed: a step reduces on every rank. */
    for (int i = 0; i < N; i++) g[i] = (float)(rank + 1);
    CHECK(dt_reducer_ready(red, 0, N) == DT_OK && dt_reducer_wait(red) == DT_OK, "a step after the refusals");
    CHECK(g[0] == (float)(world + 1) / 2, "reduced after the refusals: %g", (double)g[0]);
    /* Alike: 0 keeps this rank's values. */
    CHECK(dt_reducer_set_sync(red, 0) == DT_OK, "sync 0 alike");
    for (int i = 0; i < N; i++) g[i] = (float)(rank + 1);
    CHECK(dt_reducer_ready(red, 0, N) == DT_OK && dt_reducer_wait(red) == DT_OK, "a no-sync step");
    CHECK(g[N - 1] == (float)(rank + 1), "not reduced with sync 0: %g", (double)g[N - 1]);
    dt_reducer_free(red);
}

static dt_model *model(dt_ctx *ctx)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, SPEC, "8", 11, B, &m) == DT_OK, "model");
    return m;
}

/* One backward and its reduction, then whether every rank holds the same gradients. */
static void reduces_alike(dt_ctx *ctx, dt_model *m, const char *what)
{
    float x[B * IN];
    int32_t y[B];
    double loss;
    int correct, differ = -1;
    mpi_rank_batch(0, B, IN, CLS, x, y);
    for (int i = 0; i < dt_model_accum_steps(m); i++)
        CHECK(dt_model_forward_backward(m, x, y, B, 1.0f / B, &loss, &correct) == DT_OK, "%s: forward_backward", what);
    CHECK(dt_model_sync_grads(m) == DT_OK, "%s: sync_grads", what);
    const float *g = dt_model_grads(m);
    CHECK(g && dt_check_replicas(ctx, g, dt_model_num_params(m) * sizeof *g, &differ, NULL) == DT_OK && differ == 0,
          "%s: the gradients are reduced alike", what);
}

/* 2. dt_model_set_precision: bf16 on the last rank, fp32 elsewhere; then alike. */
static void check_precision(dt_ctx *ctx)
{
    dt_model *m = model(ctx);
    const int bad = world - 1;
    const dt_dtype p = rank == bad ? DT_BF16 : DT_F32;
    const double t0 = now();
    const dt_status s = dt_model_set_precision(m, p, p);
    if (world > 1) {
        char want[96];
        snprintf(want, sizeof want, "rank %d gave precision bf16 compute with bf16 gradients", bad);
        expect_refused("precision differs", s, t0, want, "where rank 0 gave fp32 compute with fp32 gradients",
                       "no rank changed its precision");
        CHECK(dt_model_precision(m) == DT_F32 && dt_model_grad_dtype(m) == DT_F32, "rank %d kept fp32", rank);
    } else {
        CHECK(s == DT_OK, "one rank: bf16 alone");
    }
    CHECK(dt_model_set_precision(m, DT_F32, DT_F32) == DT_OK, "precision alike");
    reduces_alike(ctx, m, "after the precision refusal");
    dt_model_free(m);
}

/* 3. dt_model_set_accum_steps: 2 on the last rank, 1 elsewhere; 0 on the last rank; then alike. */
static void check_accum(dt_ctx *ctx)
{
    dt_model *m = model(ctx);
    const int bad = world - 1;
    double t0 = now();
    dt_status s = dt_model_set_accum_steps(m, rank == bad ? 2 : 1);
    if (world > 1) {
        char want[64];
        snprintf(want, sizeof want, "rank %d gave accum_steps 2 where rank 0 gave 1", bad);
        expect_refused("accum_steps differs", s, t0, want, "no rank changed its accumulation", NULL);
        CHECK(!strstr(dt_last_error(), "other ranks differ"), "one rank differs: rank %d says more", rank);
        CHECK(dt_model_accum_steps(m) == 1, "rank %d kept 1 micro-batch a step", rank);
    } else {
        CHECK(s == DT_OK && dt_model_accum_steps(m) == 2, "one rank: 2 alone");
    }
    t0 = now();
    s = dt_model_set_accum_steps(m, rank == bad ? 0 : 2);
    expect_refused("accum_steps 0", s, t0,
                   rank == bad || world == 1 ? "--accum-steps 0" : "dt_model_set_accum_steps failed on rank", NULL,
                   NULL);
    /* Rank 0's own failure (not a value to compare): every rank names rank 0. */
    t0 = now();
    s = dt_model_set_accum_steps(m, rank == 0 ? 0 : 2);
    expect_refused("accum_steps 0 on rank 0", s, t0,
                   rank == 0 ? "--accum-steps 0" : "dt_model_set_accum_steps failed on rank 0", NULL, NULL);
    if (world > 2) { /* ranks 1 and up each give another value: the lowest is named, and the others said */
        t0 = now();
        s = dt_model_set_accum_steps(m, rank == 0 ? 1 : 2 + rank);
        expect_refused("accum_steps differs on ranks 1 and up", s, t0, "rank 1 gave accum_steps 3 where rank 0 gave 1",
                       ", and other ranks differ too", NULL);
    }
    CHECK(dt_model_set_accum_steps(m, 2) == DT_OK && dt_model_accum_steps(m) == 2, "accum_steps alike");
    reduces_alike(ctx, m, "after the accumulation refusals");
    dt_model_free(m);
}

/* 4. dt_reducer_create with another setting on the last rank: the message names it, with both
 * ranks' values. */
static void check_plan_message(dt_ctx *ctx)
{
    if (world < 2) return;
    float g[N];
    const int bad = world - 1;
    dt_reducer *red = NULL;
    dt_reducer_config c;
    char want[96];
    dt_reducer_defaults(&c);
    c.bucket_mb = rank == bad ? 0.002 : 0.001;
    double t0 = now();
    dt_status s = dt_reducer_create(ctx, g, N, NULL, 0, &c, &red);
    snprintf(want, sizeof want, "rank %d gave bucket_mb 0.002 where rank 0 gave 0.001", bad);
    expect_refused("caps differ", s, t0, want, "no reducer was made", NULL);
    CHECK(red == NULL, "no reducer");
    dt_reducer_defaults(&c);
    c.overlap = rank != bad;
    t0 = now();
    s = dt_reducer_create(ctx, g, N, NULL, 0, &c, &red);
    snprintf(want, sizeof want, "rank %d gave overlap 0 where rank 0 gave 1", bad);
    expect_refused("overlap differs", s, t0, want, NULL, NULL);
    t0 = now();
    s = dt_reducer_create(ctx, g, rank == bad ? N - 1 : N, NULL, 0, NULL, &red);
    snprintf(want, sizeof want, "rank %d gave buffer size %d elements where rank 0 gave %d elements", bad, N - 1, N);
    expect_refused("buffer size differs", s, t0, want, NULL, NULL);
    CHECK(dt_reducer_create(ctx, g, N, NULL, 0, NULL, &red) == DT_OK, "alike");
    dt_reducer_free(red);
}

/* 4b. dt_model_set_sync with another cap on the last rank: every rank names both values, in one
 * message alike on every rank (the first differing rank's value reaches them all). */
static void check_model_sync(dt_ctx *ctx)
{
    if (world < 2) return;
    dt_model *m = model(ctx);
    const int bad = world - 1;
    dt_sync_config c;
    dt_sync_defaults(&c);
    c.bucket_mb = rank == bad ? 4 : 25;
    const double t0 = now();
    const dt_status s = dt_model_set_sync(m, &c);
    char want[96];
    snprintf(want, sizeof want, "rank %d gave bucket_mb another value than rank 0 (rank 0 25, rank %d 4)", bad, bad);
    expect_refused("model sync differs", s, t0, want, "no rank changed its settings", NULL);
    dt_sync_defaults(&c);
    CHECK(dt_model_set_sync(m, &c) == DT_OK, "model sync alike");
    reduces_alike(ctx, m, "after the model sync refusal");
    dt_model_free(m);
}

/* 5. dt_check_replicas of another length on the last rank: the lengths are named, not the values;
 * then values that differ on ranks 1 and up: rank 1 is named first. */
static void check_replicas_length(dt_ctx *ctx)
{
    if (world < 2) return;
    float buf[16] = {0};
    const int bad = world - 1;
    int differ = -1, first = -2;
    const double t0 = now();
    const dt_status s = dt_check_replicas(ctx, buf, rank == bad ? 60 : 64, &differ, &first);
    char want[96];
    snprintf(want, sizeof want, "rank %d gave 60 bytes where rank 0 gave 64", bad);
    expect_refused("lengths differ", s, t0, want, "nothing was compared", NULL);
    CHECK(differ == 0 && first == -1, "nothing compared: differ %d, first %d", differ, first);
    CHECK(dt_check_replicas(ctx, buf, sizeof buf, &differ, &first) == DT_OK, "alike");
    /* Values that differ on every rank but rank 0: the count, and the lowest of them named. */
    buf[3] = (float)rank;
    CHECK(dt_check_replicas(ctx, buf, sizeof buf, &differ, &first) == DT_ERR_NUMERIC, "values differ");
    CHECK(differ == world - 1 && first == 1, "differ %d (want %d), first %d (want 1)", differ, world - 1, first);
    CHECK(strstr(dt_last_error(), "the first is rank 1") != NULL, "names rank 1: %s", dt_last_error());
}

int main(void)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    cfg.timeout_s = 30.0;
    dt_ctx *ctx = mpi_check_init_config("test_agree", &cfg);
    check_reducer_sync(ctx);
    check_precision(ctx);
    check_accum(ctx);
    check_plan_message(ctx);
    check_model_sync(ctx);
    check_replicas_length(ctx);
    const int rc = mpi_check_finish(ctx, "test_agree");
    dt_finalize(ctx);
    return rc;
}
