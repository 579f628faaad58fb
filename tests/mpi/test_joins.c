/*
 * test_joins.c - one rank's bad argument in a call whose peers enter a collective: every rank
 * returns at once (well before the collective deadline, which this test sets to 30 s; a rank that
 * did not join would leave the others waiting until the watchdog ends the job), with the failing
 * rank's code, that rank with its own message and the others with one naming it; and the next
 * call, given alike on every rank, works (no rank was left behind in a collective).
 *
 * The calls: dt_model_create with a NULL out; dt_model_set_sync with an invalid field, a NULL
 * config, and each field valid but different on one rank (named in the message: a rank with other
 * caps kept its reducer where the others made a new one, with a communicator of its own; another
 * ZeRO stage would reduce-scatter where the others allreduce); under ZeRO-1 (where they sum over
 * the ranks) dt_model_grad_norm with a NULL norm, dt_model_unscale_grads with a NULL found_inf or
 * a bad factor, dt_model_clip_grad_norm with a bad maximum, and all three on a rank that can get no
 * memory (their exchange needs none: they succeed alike); dt_buffer_norm across ranks with a NULL
 * norm or a bad element type; dt_reducer_create with a NULL out, a bad overlap or an allocation
 * that fails (each in turn), and its retune with a bad reduction; dt_check_replicas with a NULL
 * buffer; under ZeRO-1 the full-size optimizer state a rank cannot get (the others fail with it,
 * none left in the allgather); and the verdicts every rank reaches from one exchange (these ZeRO-1
 * sums among them) marked shared; and rank_verdict_share given a code out of its range on one
 * rank (it still takes part). With one rank there is nobody to wait: the failing calls fail
 * alone. Run as `test_joins late-dup`, it checks that the reducer's engine duplicates its
 * communicator under the deadline.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "dtrain.h"
#include "collectives/engine.h"
#include "collectives/rank_verdict.h"
#include "collectives/reducer_internal.h"
#include "runtime/model/model.h"
#include "base/status.h"
#include "mpi_check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { IN = 8, CLS = 4, B = 4 };
#define SPEC "fc:16,relu,fc:4"
#define TIMEOUT_S 30.0
#define PROMPT_S 10.0 /* "at once": a third of the deadline, on a busy machine */

/* Memory a rank cannot get, on purpose: this test is linked with dtrain's objects and
 * -Wl,--wrap=malloc,--wrap=calloc (tests/CMakeLists.txt), so every malloc and calloc in dtrain's
 * code (not in MPI or libc, which are shared libraries) comes here. While no_memory is set on this
 * rank they fail; while alloc_budget is above -1 that many more succeed, then they fail. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
static int no_memory;
static long alloc_budget = -1;
static int alloc_fails(void)
{
    if (alloc_budget > 0)
        alloc_budget--;
    else if (alloc_budget == 0)
        return errno = ENOMEM, 1;
    if (no_memory) errno = ENOMEM;
    return no_memory;
}
void *__wrap_malloc(size_t n) { return alloc_fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return alloc_fails() ? NULL : __real_calloc(k, n); }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The verdict of a call that rank `bad` alone got wrong: status want on every rank, returned
 * within PROMPT_S; on rank bad a message holding own, elsewhere one holding "<fn> failed on rank
 * <bad>" and, when not NULL, also_peer (what the differing field was, say). */
static void expect_join(const char *what, dt_status s, double t0, dt_status want, int bad, const char *own,
                        const char *fn, const char *also_peer)
{
    const double dt = now() - t0;
    CHECK(s == want, "%s: rank %d returned %d, not %d", what, rank, (int)s, (int)want);
    CHECK(dt < PROMPT_S, "%s: rank %d returned after %.1f s", what, rank, dt);
    if (world == 1 || rank == bad) {
        CHECK(strstr(dt_last_error(), own) != NULL, "%s: rank %d's own message holds \"%s\"", what, rank, own);
        return;
    }
    char want_msg[96];
    snprintf(want_msg, sizeof want_msg, "%s failed on rank %d", fn, bad);
    const char *e = dt_last_error();
    CHECK(strstr(e, want_msg) != NULL, "%s: rank %d's message names rank %d (\"%s\")", what, rank, bad, want_msg);
    if (also_peer) CHECK(strstr(e, also_peer) != NULL, "%s: rank %d's message holds \"%s\"", what, rank, also_peer);
}

/* A verdict every rank reached from one complete exchange (read right after the call returned s):
 * marked shared on every rank, so a launcher lets each end on its own rather than abort the job,
 * and reported as the peer's on all but rank bad, which alone says why. */
static void expect_shared(const char *what, dt_status s, int bad)
{
    if (world == 1) return;
    CHECK(status_shared(s), "%s: rank %d's failure %d is not marked shared", what, rank, (int)s);
    CHECK(status_from_peer() == (rank != bad), "%s: rank %d's failure is %s, not %s", what, rank,
          status_from_peer() ? "a peer's" : "its own", rank != bad ? "a peer's" : "its own");
}

static dt_model *model(dt_ctx *ctx, int zero)
{
    dt_model *m = NULL;
    CHECK(dt_model_create(ctx, SPEC, "8", 11, B, &m) == DT_OK, "model");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.zero = zero;
    CHECK(m && dt_model_set_sync(m, &sc) == DT_OK, "set_sync zero %d", zero);
    return m;
}

/* One backward on this rank's batch and its reduction, as every rank does before a norm. */
static void backward(dt_model *m, long step)
{
    float x[B * IN];
    int32_t y[B];
    double loss;
    int correct;
    mpi_rank_batch(step, B, IN, CLS, x, y);
    CHECK(dt_model_forward_backward(m, x, y, B, 1.0f / B, &loss, &correct) == DT_OK, "forward_backward");
    CHECK(dt_model_sync_grads(m) == DT_OK, "sync_grads");
}

/* 1. dt_model_create given no out on the last rank. */
static void check_create(dt_ctx *ctx)
{
    const int bad = world - 1;
    dt_model *m = NULL;
    const double t0 = now();
    const dt_status s = dt_model_create(ctx, SPEC, "8", 11, B, rank == bad ? NULL : &m);
    expect_join("create with a NULL out", s, t0, DT_ERR_INVALID_ARG, bad, "out is NULL", "dt_model_create", NULL);
    CHECK(m == NULL, "no model on a failure");
    dt_model_free(m);
    m = model(ctx, 0); /* and the next one works */
    dt_model_free(m);
}

/* The field f of c made different (and still valid) on the rank that calls it. */
static const char *const field[] = {"overlap",   "bucket_mb", "first_bucket_mb", "op",
                                    "grad_comm", "zero",      "allow_unreduced"};
enum { NFIELD = sizeof field / sizeof *field };

static void change(dt_sync_config *c, int f)
{
    switch (f) {
        case 0: c->overlap = !c->overlap; break;
        case 1: c->bucket_mb = 30.0; break; /* the same one bucket as 25 for this model */
        case 2: c->first_bucket_mb = 1e-6; break;
        case 3: c->op = DT_SUM; break;
        case 4: c->grad_comm = DT_BF16; break;
        case 5: c->zero = 1; break;
        default: c->allow_unreduced = 1; break;
    }
}

/* 2. dt_model_set_sync: a bad config on one rank, then each field valid but different on one
 * rank; afterwards the model reduces as before on every rank. */
static void check_set_sync(dt_ctx *ctx)
{
    dt_model *m = model(ctx, 0);
    const int bad = world - 1, nb = dt_model_num_buckets(m);
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    sc.overlap = rank == bad ? 2 : 1;
    double t0 = now();
    dt_status s = dt_model_set_sync(m, &sc);
    expect_join("set_sync with overlap 2", s, t0, DT_ERR_INVALID_ARG, bad, "overlap 2", "dt_model_set_sync", NULL);
    dt_sync_defaults(&sc);
    t0 = now();
    s = dt_model_set_sync(m, rank == bad ? NULL : &sc);
    expect_join("set_sync with a NULL config", s, t0, DT_ERR_INVALID_ARG, bad, "c is NULL", "dt_model_set_sync", NULL);
    /* Every rank returned it from the one exchange (a launcher then ends each rank on its own),
     * and one rank failed: no "other ranks" are said to. */
    CHECK(world == 1 || status_shared(s), "set_sync with a NULL config: rank %d's verdict is not marked shared", rank);
    CHECK(!strstr(dt_last_error(), "and on other ranks"), "one rank failed: rank %d says more (%s)", rank,
          dt_last_error());
    /* Rank 0 and the last rank fail: the lowest is named, its code returned, the others said. */
    t0 = now();
    s = dt_model_set_sync(m, rank == 0 || rank == bad ? NULL : &sc);
    CHECK(s == DT_ERR_INVALID_ARG && (world == 1 || status_shared(s)), "set_sync NULL on ranks 0 and %d: rank %d: %d",
          bad, rank, (int)s);
    CHECK(now() - t0 < PROMPT_S, "set_sync NULL on ranks 0 and %d: rank %d was not prompt", bad, rank);
    if (rank == 0 || rank == bad)
        CHECK(strstr(dt_last_error(), "c is NULL") != NULL, "rank %d's own message: %s", rank, dt_last_error());
    else
        CHECK(strstr(dt_last_error(), "dt_model_set_sync failed on rank 0 (invalid argument) and on other ranks"),
              "rank %d names rank 0 and the others: %s", rank, dt_last_error());
    for (int f = 0; f < NFIELD && world > 1; f++) {
        dt_sync_defaults(&sc);
        if (rank == bad) change(&sc, f);
        t0 = now();
        s = dt_model_set_sync(m, &sc);
        const double dt = now() - t0;
        char want[96];
        snprintf(want, sizeof want, "rank %d gave %s", bad, field[f]);
        CHECK(s == DT_ERR_INVALID_ARG, "%s differs on rank %d: rank %d returned %d", field[f], bad, rank, (int)s);
        CHECK(dt < PROMPT_S, "%s differs: rank %d returned after %.1f s", field[f], rank, dt);
        CHECK(strstr(dt_last_error(), want) != NULL, "%s differs: rank %d's message holds \"%s\"", field[f], rank,
              want);
        CHECK(dt_model_num_buckets(m) == nb, "%s differs: the plan stayed (%d buckets)", field[f],
              dt_model_num_buckets(m));
    }
    dt_sync_defaults(&sc);
    CHECK(dt_model_set_sync(m, &sc) == DT_OK, "set_sync alike on every rank");
    backward(m, 0);
    int differ = -1;
    float *g = dt_model_grads(m);
    CHECK(dt_check_replicas(ctx, g, dt_model_num_params(m) * sizeof *g, &differ, NULL) == DT_OK && differ == 0,
          "the gradients are reduced alike after the refusals");
    dt_model_free(m);
}

/* 3. Under ZeRO-1 the norm and the unscale sum over the ranks: one rank's bad argument joins. */
static void check_zero(dt_ctx *ctx)
{
    dt_model *m = model(ctx, 1);
    backward(m, 1);
    const int bad = world - 1;
    double norm = 0;
    int inf = 0;
    double t0 = now();
    dt_status s = dt_model_grad_norm(m, rank == bad ? NULL : &norm);
    expect_join("grad_norm with a NULL norm", s, t0, DT_ERR_INVALID_ARG, bad, "norm is NULL", "dt_model_grad_norm",
                NULL);
    expect_shared("grad_norm with a NULL norm", s, bad);
    t0 = now();
    s = dt_model_unscale_grads(m, 1.0f, rank == bad ? NULL : &inf);
    expect_join("unscale with a NULL found_inf", s, t0, DT_ERR_INVALID_ARG, bad, "found_inf is NULL",
                "dt_model_unscale_grads", NULL);
    expect_shared("unscale with a NULL found_inf", s, bad);
    t0 = now();
    s = dt_model_unscale_grads(m, rank == 0 ? NAN : 1.0f, &inf);
    expect_join("unscale by NaN", s, t0, DT_ERR_INVALID_ARG, 0, "unscale factor nan", "dt_model_unscale_grads", NULL);
    t0 = now();
    s = dt_model_clip_grad_norm(m, rank == bad ? -1.0 : 1.0, &norm);
    expect_join("clip to -1", s, t0, DT_ERR_INVALID_ARG, bad, "maximum gradient norm -1", "dt_model_clip_grad_norm",
                NULL);
    expect_shared("clip to -1", s, bad);
    /* Nothing was left in flight: the same calls, whole, agree on every rank. */
    double n2 = -1;
    CHECK(dt_model_unscale_grads(m, 1.0f, &inf) == DT_OK && inf == 0, "unscale after the refusals");
    CHECK(dt_model_grad_norm(m, &n2) == DT_OK && n2 > 0, "norm after the refusals: %g", n2);
    CHECK(dt_check_replicas(ctx, &n2, sizeof n2, NULL, NULL) == DT_OK, "the same norm on every rank");
    dt_model_free(m);
}

/* 4. Under ZeRO-1 a rank that can get no memory while the norm and the non-finite count are
 * summed over the ranks: the exchange needs none, so every rank gets the same answers at once. */
static void check_zero_no_memory(dt_ctx *ctx)
{
    dt_model *m = model(ctx, 1);
    backward(m, 2);
    const int bad = world - 1;
    double norm = -1, n2 = -1;
    int inf = -1;
    double t0 = now();
    no_memory = rank == bad;
    dt_status s = dt_model_grad_norm(m, &norm);
    const dt_status u = dt_model_unscale_grads(m, 1.0f, &inf);
    const dt_status c = dt_model_clip_grad_norm(m, 1e9, &n2);
    no_memory = 0;
    const double dt = now() - t0;
    CHECK(s == DT_OK && u == DT_OK && c == DT_OK, "no memory on rank %d: rank %d returned %d, %d, %d", bad, rank,
          (int)s, (int)u, (int)c);
    CHECK(dt < PROMPT_S, "no memory on rank %d: rank %d returned after %.1f s", bad, rank, dt);
    CHECK(norm > 0 && norm == n2 && inf == 0, "rank %d: norm %g, clip's %g, found_inf %d", rank, norm, n2, inf);
    CHECK(dt_check_replicas(ctx, &norm, sizeof norm, NULL, NULL) == DT_OK, "the same norm on every rank");
    dt_model_free(m);
}

/* 5. dt_buffer_norm across ranks with one rank's bad argument, then alike on every rank. */
static void check_buffer_norm(dt_ctx *ctx)
{
    float buf[4];
    for (int i = 0; i < 4; i++) buf[i] = (float)(rank + 1);
    const int bad = world - 1;
    double norm = -1;
    double t0 = now();
    dt_status s = dt_buffer_norm(ctx, buf, 4, DT_F32, DT_MEMORY_HOST, 1, rank == bad ? NULL : &norm);
    expect_join("buffer_norm with a NULL norm", s, t0, DT_ERR_INVALID_ARG, bad, "norm is NULL", "dt_buffer_norm",
                "no norm was computed");
    CHECK(norm == -1, "rank %d: no norm written on a failure (%g)", rank, norm);
    t0 = now();
    s = dt_buffer_norm(ctx, buf, 4, rank == 0 ? DT_U8 : DT_F32, DT_MEMORY_HOST, 1, &norm);
    expect_join("buffer_norm of DT_U8", s, t0, DT_ERR_INVALID_ARG, 0, "DT_U8", "dt_buffer_norm", NULL);
    /* Alike: 4 values of r + 1 on each rank r. */
    double want = 0;
    for (int r = 0; r < world; r++) want += 4.0 * (r + 1) * (r + 1);
    CHECK(dt_buffer_norm(ctx, buf, 4, DT_F32, DT_MEMORY_HOST, 1, &norm) == DT_OK && norm == sqrt(want),
          "buffer_norm alike: %g, want %g", norm, sqrt(want));
}

/* 6. dt_reducer_create with a NULL out, a bad overlap or no memory (at its first allocation, then
 * at later ones: the plan, the step's bookkeeping, the engine's) on the last rank; made alike,
 * its retune with a bad reduction on the last rank; then a step reduces on every rank. */
static void check_reducer(dt_ctx *ctx)
{
    enum { N = 64 };
    float g[N] = {0};
    const int bad = world - 1;
    dt_reducer *red = NULL;
    dt_reducer_config c;
    double t0 = now();
    dt_status s = dt_reducer_create(ctx, g, N, NULL, 0, NULL, rank == bad ? NULL : &red);
    expect_join("reducer_create with a NULL out", s, t0, DT_ERR_INVALID_ARG, bad, "out is NULL", "dt_reducer_create",
                "so no reducer was made");
    CHECK(red == NULL, "no reducer on a failure");
    dt_reducer_defaults(&c);
    if (rank == bad) c.overlap = 2;
    t0 = now();
    s = dt_reducer_create(ctx, g, N, NULL, 0, &c, &red);
    expect_join("reducer_create with overlap 2", s, t0, DT_ERR_INVALID_ARG, bad, "overlap 2", "dt_reducer_create",
                NULL);
    /* Allocation k of the last rank fails, for k = 0, 1, 2, 4, ... until it has memory enough. */
    for (long k = 0;; k = k ? 2 * k : 1) {
        t0 = now();
        alloc_budget = rank == bad ? k : -1;
        s = dt_reducer_create(ctx, g, N, NULL, 0, NULL, &red);
        const int out_of_memory = alloc_budget == 0;
        alloc_budget = -1;
        float any = (float)out_of_memory; /* whether the last rank ran out: then every rank failed */
        CHECK(dt_allreduce(ctx, &any, 1, DT_F32, DT_SUM) == DT_OK, "allreduce");
        if (any == 0) {
            CHECK(s == DT_OK && red, "reducer_create with memory enough: %d", (int)s);
            break;
        }
        char what[64];
        snprintf(what, sizeof what, "reducer_create without allocation %ld", k);
        expect_join(what, s, t0, DT_ERR_NOMEM, bad, "out of memory", "dt_reducer_create", NULL);
        CHECK(red == NULL, "%s: no reducer", what);
    }
    t0 = now();
    s = reducer_retune(red, rank == bad ? (dt_redop)7 : DT_AVG, 1);
    expect_join("retune to reduction 7", s, t0, DT_ERR_INVALID_ARG, bad, "reduction 7",
                "changing the reducer's reduction", "so nothing changed");
    CHECK(reducer_retune(red, DT_SUM, 1) == DT_OK, "retune alike");
    for (int i = 0; i < N; i++) g[i] = (float)(rank + 1);
    CHECK(dt_reducer_ready(red, 0, N) == DT_OK && dt_reducer_wait(red) == DT_OK, "a step after the refusals");
    CHECK(g[0] == (float)(world * (world + 1) / 2) && g[N - 1] == g[0], "summed: %g", (double)g[0]);
    dt_reducer_free(red);
}

/* 7. (alone, as mpi.joins_late_dup) the engine's MPI_Comm_dup, which comes before any request the
 * watchdog sees: the last rank arrives 4 s late against a 1 s deadline, and the others must end
 * the job saying so (the ctest entry passes on the watchdog's words) instead of waiting for it. */
static int late_dup(void)
{
    if (world < 2) return 77;
    if (rank == world - 1) sleep(4);
    engine *e = NULL;
    const dt_status s = engine_create(MPI_COMM_WORLD, 1.0, 0, DT_ALLREDUCE_AUTO, &e);
    engine_destroy(e);
    fprintf(stderr, "late_dup: rank %d made its engine (%d) although the last rank came 4 s late\n", rank, (int)s);
    return 1;
}

/* 8. dt_check_replicas without a buffer on one rank. */
static void check_replicas_null(dt_ctx *ctx)
{
    float buf[16] = {0};
    const int bad = world - 1;
    int differ = -1;
    const double t0 = now();
    const dt_status s = dt_check_replicas(ctx, rank == bad ? NULL : buf, sizeof buf, &differ, NULL);
    expect_join("check_replicas of NULL", s, t0, DT_ERR_INVALID_ARG, bad, "buf is NULL", "dt_check_replicas",
                "nothing was compared");
    CHECK(differ == 0, "nothing compared, nothing counted");
}

/* 9. Under ZeRO-1 a rank that cannot get the full-size optimizer state (a checkpoint's, the unshard
 * before a replan): the ranks agree on it before the allgather, so every rank fails at once, and
 * with memory the unshard then works. */
static void check_zero_full_no_memory(dt_ctx *ctx)
{
    dt_model *m = model(ctx, 1);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    dt_optimizer *o = NULL;
    CHECK(dt_optimizer_create(&oc, dt_model_num_params(m), &o) == DT_OK, "optimizer");
    CHECK(dt_model_shard_optimizer(m, o) == DT_OK, "shard the optimizer");
    const int bad = world - 1;
    const double t0 = now();
    no_memory = rank == bad;
    const dt_status s = model_zero_unshard(m, o);
    no_memory = 0;
    expect_join("unshard without memory", s, t0, DT_ERR_NOMEM, bad, "out of memory for the full-size optimizer state",
                "making the full-size optimizer state for the checkpoint", NULL);
    expect_shared("unshard without memory", s, bad);
    CHECK(model_zero_unshard(m, o) == DT_OK, "the unshard with memory");
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* 10. Verdicts every rank reaches from one exchange are marked shared (status_shared), so that a
 * launcher ends each rank on its own instead of aborting the job: the replicas' values or lengths
 * differing, dt_model_create of another model on one rank, and a setting out of range on one. */
static void check_shared_verdicts(dt_ctx *ctx)
{
    if (world < 2) return;
    const int bad = world - 1;
    float buf[16] = {0};
    if (rank == bad) buf[3] = 1.0f;
    dt_status s = dt_check_replicas(ctx, buf, sizeof buf, NULL, NULL);
    CHECK(s == DT_ERR_NUMERIC && status_shared(s), "replicas differ: rank %d got %d, shared %d", rank, (int)s,
          status_shared(s));
    s = dt_check_replicas(ctx, buf, rank == bad ? 60 : 64, NULL, NULL);
    CHECK(s == DT_ERR_INVALID_ARG && status_shared(s), "replica lengths differ: rank %d got %d, shared %d", rank,
          (int)s, status_shared(s));
    dt_model *m = NULL;
    s = dt_model_create(ctx, SPEC, rank == bad ? "9" : "8", 11, B, &m);
    CHECK(s == DT_ERR_INVALID_ARG && status_shared(s) && strstr(dt_last_error(), "built another model"),
          "another model on rank %d: rank %d got %d, shared %d (%s)", bad, rank, (int)s, status_shared(s),
          dt_last_error());
    dt_model_free(m);
    /* A setting compared across the ranks (rank_agree_status) that one rank gave out of range. */
    m = model(ctx, 0);
    s = dt_model_set_accum_steps(m, rank == bad ? 0 : 1);
    CHECK(s == DT_ERR_INVALID_ARG && status_shared(s), "accum_steps 0 on rank %d: rank %d got %d, shared %d", bad, rank,
          (int)s, status_shared(s));
    dt_model_free(m);
}

/* 11. rank_verdict_share given a code fp32 cannot carry exactly on one rank: that rank still takes
 * part (as the largest code in range) and alone returns DT_ERR_INVALID_ARG; every rank returns at
 * once and names it. */
static void check_verdict_code_range(dt_ctx *ctx)
{
    const int bad = world - 1;
    rank_verdict v = {0, 0, 0};
    const double t0 = now();
    const dt_status s = rank_verdict_share(ctx, rank == bad ? 1 << 25 : 0, &v);
    CHECK(s == (rank == bad ? DT_ERR_INVALID_ARG : DT_OK), "verdict code 2^25 on rank %d: rank %d got %d", bad, rank,
          (int)s);
    CHECK(now() - t0 < PROMPT_S, "verdict code 2^25: rank %d returned after %.1f s", rank, now() - t0);
    CHECK(v.first_rank == bad && v.first_code == (1 << 24) - 1 && v.failed == 1,
          "verdict code 2^25: rank %d sees rank %d code %d (%d failed)", rank, v.first_rank, v.first_code, v.failed);
}

int main(int argc, char **argv)
{
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    cfg.timeout_s = TIMEOUT_S;
    dt_ctx *ctx = mpi_check_init_config("test_joins", &cfg);
    if (argc > 1 && strcmp(argv[1], "late-dup") == 0) {
        const int rc = late_dup();
        dt_finalize(ctx);
        return rc;
    }
    check_create(ctx);
    check_set_sync(ctx);
    check_zero(ctx);
    check_zero_no_memory(ctx);
    check_buffer_norm(ctx);
    check_reducer(ctx);
    check_replicas_null(ctx);
    check_zero_full_no_memory(ctx);
    check_shared_verdicts(ctx);
    check_verdict_code_range(ctx);
    const int rc = mpi_check_finish(ctx, "test_joins");
    dt_finalize(ctx);
    return rc;
}
