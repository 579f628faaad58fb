/*
 * test_verdict_queue.c - the loss scaler's verdict queued with the optimizer step behind it.
 *
 * dt_model_train_step with a scaler queues the finite check (found_inf_queue) and the optimizer
 * step behind it, which reads the verdict on the device (optim_grads.skip) and does nothing on an
 * overflow; the host collects the verdict afterwards (found_inf_wait), so a GPU never idles while
 * the host reads the verdict and only then queues the step. Checked here on the CPU, with a
 * stand-in for a device that writes the verdict to the host only at found_inf_wait:
 *  - the same bits as the host-first order (model_test_verdict_sync): parameters, skipped and
 *    stepped, the scale through growth and back-off, the optimizer's step count (SGD's first step
 *    and AdamW's bias correction after a skipped first step), the 16-bit copy not cast again
 *    after a skipped step, and the give-up at the scale's floor;
 *  - the order: one check, then the step with the check's flag, then the wait, per step;
 *  - where the verdict is not queued: clipping, and fp32 gradients under a scale below 1;
 *  - deferred verdicts (dt_model_set_deferred_verdict): the step returns before the wait, which
 *    dt_model_settle_step, the next step or another model call takes, with the same bits, skips,
 *    scale and step count; the give-up at that settle; checkpoints refused while one is pending.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/backend.h"
#include "runtime/model/model.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp_fixture.h"

/* The stand-in's record of what the model asked, in order. */
static struct {
    const backend_ops *cpu;
    const int *flag;   /* the flag of the last found_inf_queue */
    int verdict;       /* its value, which reaches the host at found_inf_wait */
    int queues, waits; /* calls */
    int steps;         /* optimizer entries called */
    int steps_behind;  /* of them, those given the last queued flag as their skip */
    int steps_at_wait; /* steps taken when the last wait came */
    size_t np;         /* the models' parameters */
    int casts;         /* cast_to16 calls over np values: the 16-bit copy made again */
} g_dev;

static dt_status dev_found_queue(backend *be, dt_dtype t, const void *buf, size_t n, int *flag)
{
    dt_status s = g_dev.cpu->found_inf_queue(be, t, buf, n, flag);
    g_dev.verdict = *flag;
    g_dev.flag = flag;
    g_dev.queues++;
    return s;
}

static dt_status dev_found_wait(backend *be, const int *flag, int *found)
{
    (void)be;
    assert_ptr_equal(flag, g_dev.flag);
    g_dev.waits++;
    g_dev.steps_at_wait = g_dev.steps;
    *found = g_dev.verdict;
    return DT_OK;
}

static void saw_step(const optim_grads *g)
{
    g_dev.steps++;
    if (g->skip && g->skip == g_dev.flag) g_dev.steps_behind++;
}

static dt_status dev_sgd(backend *be, float *p, const optim_grads *g, float *buf, size_t n, float lr, float momentum,
                         float wd, int first, dt_dtype copy_t, uint16_t *copy)
{
    saw_step(g);
    return g_dev.cpu->sgd(be, p, g, buf, n, lr, momentum, wd, first, copy_t, copy);
}

static dt_status dev_adamw(backend *be, float *p, const optim_grads *g, float *m, float *v, size_t n, float lr,
                           float b1, float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    saw_step(g);
    return g_dev.cpu->adamw(be, p, g, m, v, n, lr, b1, b2, eps, wd, t, copy_t, copy);
}

static dt_status dev_cast(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    if (n == g_dev.np) g_dev.casts++;
    return g_dev.cpu->cast_to16(be, t, in, out, n);
}

static backend_ops g_ops;
static backend g_be = {&g_ops, NULL};

static void dev_init(void)
{
    memset(&g_dev, 0, sizeof g_dev);
    g_dev.cpu = backend_cpu()->ops;
    g_ops = *g_dev.cpu;
    g_ops.found_inf_queue = dev_found_queue;
    g_ops.found_inf_wait = dev_found_wait;
    g_ops.sgd = dev_sgd;
    g_ops.adamw = dev_adamw;
    g_ops.cast_to16 = dev_cast;
}

typedef struct side {
    dt_model *m;
    dt_optimizer *o;
    dt_scaler *sc;
} side;

static side side_make(dt_dtype prec, dt_dtype grads, dt_optim_kind kind, const dt_scaler_config *cfg, int sync)
{
    side s;
    s.m = make_model("fc:24,relu,fc:16,relu,fc:5", "12", 8, prec, grads);
    model_test_set_backend(s.m, &g_be);
    model_test_verdict_sync(s.m, sync);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = kind;
    oc.lr = kind == DT_OPTIM_ADAMW ? 0.01f : 0.05f;
    oc.weight_decay = 1e-3f;
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(s.m), &s.o), DT_OK);
    assert_int_equal(dt_scaler_create(cfg, &s.sc), DT_OK);
    return s;
}

static void side_free(side *s)
{
    dt_scaler_free(s->sc);
    dt_optimizer_free(s->o);
    dt_model_free(s->m);
}

/* One step of s on (x, y), an overflow injected when asked. */
static dt_status side_step(side *s, const float *x, const int32_t *y, int inject, dt_step_result *r)
{
    if (inject) model_test_inject_inf(s->m);
    return dt_model_train_step(s->m, s->o, s->sc, x, y, 8, 1.0f / 8, r);
}

/* Overflows at the first step, a pair in a row (hysteresis 2 backs off at the second) and a late
 * one, with growth every 3 good steps in between. */
#define SWING_STEPS 12
static const int swing_inject[SWING_STEPS] = {1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0};

static dt_scaler_config swing_config(void)
{
    dt_scaler_config cfg;
    dt_scaler_defaults(&cfg);
    cfg.init_scale = 1024;
    cfg.growth_interval = 3;
    cfg.hysteresis = 2;
    return cfg;
}

/* The queued order (a) against the host-first one (b), step by step through swing_inject. */
static void same_bits(dt_dtype prec, dt_dtype grads, dt_optim_kind kind, int keep16)
{
    backend_cpu_set_keep_params16(keep16);
    dev_init();
    const dt_scaler_config cfg = swing_config();
    side a = side_make(prec, grads, kind, &cfg, 0), b = side_make(prec, grads, kind, &cfg, 1);
    const size_t np = g_dev.np = dt_model_num_params(a.m);
    const int *inject = swing_inject, steps = SWING_STEPS;
    int skipped = 0;
    float *pa = xmalloc(np * sizeof *pa), *pb = xmalloc(np * sizeof *pb);
    for (int i = 0; i < steps; i++) {
        float *x;
        int32_t *y;
        make_batch(a.m, 8, 2.0f, &x, &y);
        dt_step_result ra, rb;
        const int q = g_dev.queues, w = g_dev.waits, st = g_dev.steps, sb = g_dev.steps_behind, c = g_dev.casts;
        assert_int_equal(side_step(&a, x, y, inject[i], &ra), DT_OK);
        /* One check, the step behind it given its flag, then the wait: the step was queued before
         * the host knew the verdict. */
        assert_int_equal(g_dev.queues, q + 1);
        assert_int_equal(g_dev.waits, w + 1);
        assert_int_equal(g_dev.steps, st + 1);
        assert_int_equal(g_dev.steps_behind, sb + 1);
        assert_int_equal(g_dev.steps_at_wait, st + 1);
        const int casts_a = g_dev.casts - c;
        const int q2 = g_dev.queues, c2 = g_dev.casts;
        assert_int_equal(side_step(&b, x, y, inject[i], &rb), DT_OK);
        assert_int_equal(g_dev.queues, q2); /* the host-first order queues none */
        assert_int_equal(casts_a, g_dev.casts - c2);
        if (keep16) assert_int_equal(casts_a, i == 0); /* the first forward's; then the steps' copies */
        assert_int_equal(ra.skipped, inject[i]);
        assert_int_equal(rb.skipped, inject[i]);
        assert_int_equal(ra.stepped, rb.stepped);
        assert_memory_equal(&ra.loss_sum, &rb.loss_sum, sizeof ra.loss_sum);
        assert_true(dt_scaler_scale(a.sc) == dt_scaler_scale(b.sc));
        assert_int_equal(dt_scaler_skipped(a.sc), dt_scaler_skipped(b.sc));
        assert_int_equal(optimizer_state(a.o).t, optimizer_state(b.o).t);
        /* Read without dt_model_params, which would make the next forward cast the copy again. */
        assert_int_equal(dt_model_get_params(a.m, pa), DT_OK);
        assert_int_equal(dt_model_get_params(b.m, pb), DT_OK);
        assert_memory_equal(pa, pb, np * sizeof(float));
        skipped += ra.skipped;
        free(x);
        free(y);
    }
    free(pa);
    free(pb);
    assert_int_equal(optimizer_state(a.o).t, steps - skipped);
    /* The scale moved both ways: it grew past 1024 and backed off below its peak. */
    assert_true(dt_scaler_scale(a.sc) != 1024.0f);
    side_free(&a);
    side_free(&b);
    backend_cpu_set_keep_params16(0);
}

static void test_same_bits(void **st)
{
    (void)st;
    rng_seed("verdict queue", 0);
    same_bits(DT_F16, DT_F16, DT_OPTIM_SGD, 0);
    same_bits(DT_F16, DT_F16, DT_OPTIM_ADAMW, 1);
    same_bits(DT_F16, DT_F32, DT_OPTIM_SGD, 1);
    same_bits(DT_F16, DT_F32, DT_OPTIM_ADAMW, 0);
    same_bits(DT_BF16, DT_BF16, DT_OPTIM_ADAMW, 1);
    same_bits(DT_F32, DT_F32, DT_OPTIM_SGD, 0);
}

/* An overflow at the scale's floor ends the run in the same step with the same parameters, the
 * step queued behind the verdict having done nothing. */
static void test_give_up(void **st)
{
    (void)st;
    rng_seed("verdict give up", 0);
    dev_init();
    dt_scaler_config cfg;
    dt_scaler_defaults(&cfg);
    cfg.init_scale = cfg.min_scale = 8;
    side a = side_make(DT_F16, DT_F16, DT_OPTIM_ADAMW, &cfg, 0), b = side_make(DT_F16, DT_F16, DT_OPTIM_ADAMW, &cfg, 1);
    for (int i = 0; i < 2; i++) {
        float *x;
        int32_t *y;
        make_batch(a.m, 8, 2.0f, &x, &y);
        dt_step_result ra, rb;
        const dt_status want = i == 1 ? DT_ERR_NUMERIC : DT_OK;
        assert_int_equal(side_step(&a, x, y, i == 1, &ra), want);
        assert_int_equal(side_step(&b, x, y, i == 1, &rb), want);
        assert_int_equal(optimizer_state(a.o).t, 1);
        assert_memory_equal(dt_model_params(a.m), dt_model_params(b.m), dt_model_num_params(a.m) * sizeof(float));
        free(x);
        free(y);
    }
    assert_non_null(strstr(dt_last_error(), "already at min_scale"));
    side_free(&a);
    side_free(&b);
}

/* Where the host needs the verdict before the step, nothing is queued: clipping (its norm), and
 * fp32 gradients under a scale below 1 (the unscale then multiplies them in the check's pass). */
static void test_not_queued(void **st)
{
    (void)st;
    rng_seed("verdict not queued", 0);
    dev_init();
    dt_scaler_config cfg;
    dt_scaler_defaults(&cfg);
    side a = side_make(DT_F16, DT_F16, DT_OPTIM_SGD, &cfg, 0);
    assert_int_equal(dt_model_set_clip_grad_norm(a.m, 1.0), DT_OK);
    cfg.dynamic = 0;
    cfg.init_scale = cfg.min_scale = 0.5;
    side b = side_make(DT_F32, DT_F32, DT_OPTIM_SGD, &cfg, 0);
    float *x;
    int32_t *y;
    make_batch(a.m, 8, 2.0f, &x, &y);
    dt_step_result r;
    assert_int_equal(side_step(&a, x, y, 0, &r), DT_OK);
    assert_int_equal(r.stepped, 1);
    assert_int_equal(side_step(&b, x, y, 0, &r), DT_OK);
    assert_int_equal(r.stepped, 1);
    assert_int_equal(g_dev.queues, 0);
    assert_int_equal(g_dev.steps, 2);
    free(x);
    free(y);
    side_free(&a);
    side_free(&b);
}

/* Deferred verdicts (a) against the host-first order (b), through the overflows of same_bits:
 * each step of a returns before its wait, r.pending 1; the wait comes at dt_model_settle_step
 * (even steps, which also say the skip) or at the start of the next step (odd ones), and after
 * either a holds b's bits, scale, skips and step count. */
static void deferred_same_bits(dt_dtype prec, dt_dtype grads, dt_optim_kind kind)
{
    dev_init();
    dt_scaler_config cfg = swing_config();
    /* Not a power of two: a step given the scale from before the last verdict rounds its scaled
     * gradients differently from one given the scale after it. */
    cfg.growth_factor = 3;
    side a = side_make(prec, grads, kind, &cfg, 0), b = side_make(prec, grads, kind, &cfg, 1);
    dt_model_set_deferred_verdict(a.m, 1);
    const size_t np = g_dev.np = dt_model_num_params(a.m);
    const int *inject = swing_inject, steps = SWING_STEPS;
    float *pa = xmalloc(np * sizeof *pa), *pb = xmalloc(np * sizeof *pb);
    int skipped = 0;
    for (int i = 0; i < steps; i++) {
        float *x;
        int32_t *y;
        make_batch(a.m, 8, 2.0f, &x, &y);
        dt_step_result ra, rb;
        const int w = g_dev.waits, st = g_dev.steps;
        assert_int_equal(side_step(&a, x, y, inject[i], &ra), DT_OK);
        /* The last step's wait (odd i left it to this call) came before this step was queued. */
        assert_int_equal(g_dev.waits, w + (i > 0 && i % 2 == 0));
        if (i > 0 && i % 2 == 0) assert_int_equal(g_dev.steps_at_wait, st);
        assert_int_equal(g_dev.steps, st + 1);
        assert_int_equal(ra.pending, 1);
        assert_int_equal(ra.skipped, 0);
        assert_int_equal(ra.stepped, 0);
        assert_int_equal(side_step(&b, x, y, inject[i], &rb), DT_OK);
        assert_int_equal(rb.pending, 0);
        assert_memory_equal(&ra.loss_sum, &rb.loss_sum, sizeof ra.loss_sum);
        free(x);
        free(y);
        if (i % 2) continue;
        int sk = -1;
        assert_int_equal(dt_model_settle_step(a.m, &sk), DT_OK);
        assert_int_equal(sk, inject[i]);
        assert_int_equal(g_dev.waits, w + 1 + (i > 0));
        skipped += sk;
        assert_true(dt_scaler_scale(a.sc) == dt_scaler_scale(b.sc));
        assert_int_equal(dt_scaler_skipped(a.sc), dt_scaler_skipped(b.sc));
        assert_int_equal(dt_scaler_updates(a.sc), dt_scaler_updates(b.sc));
        assert_int_equal(optimizer_state(a.o).t, optimizer_state(b.o).t);
        assert_int_equal(dt_model_get_params(a.m, pa), DT_OK);
        assert_int_equal(dt_model_get_params(b.m, pb), DT_OK);
        assert_memory_equal(pa, pb, np * sizeof(float));
        /* Nothing pending: settled at once. */
        assert_int_equal(dt_model_settle_step(a.m, &sk), DT_OK);
        assert_int_equal(sk, 0);
    }
    /* The last step (odd) is still pending: an evaluation settles it first. */
    const int w = g_dev.waits;
    float *x;
    int32_t *y;
    make_batch(a.m, 8, 2.0f, &x, &y);
    double loss;
    int correct;
    assert_int_equal(dt_model_evaluate(a.m, x, y, 8, &loss, &correct, NULL), DT_OK);
    assert_int_equal(g_dev.waits, w + 1);
    assert_int_equal(dt_scaler_updates(a.sc), steps);
    assert_int_equal(dt_scaler_skipped(a.sc), dt_scaler_skipped(b.sc));
    assert_int_equal(optimizer_state(a.o).t, optimizer_state(b.o).t);
    assert_true(dt_scaler_scale(a.sc) == dt_scaler_scale(b.sc));
    assert_int_equal(dt_model_get_params(a.m, pa), DT_OK);
    assert_int_equal(dt_model_get_params(b.m, pb), DT_OK);
    assert_memory_equal(pa, pb, np * sizeof(float));
    assert_true(skipped > 0);
    free(x);
    free(y);
    free(pa);
    free(pb);
    side_free(&a);
    side_free(&b);
}

/* Parameters written while an overflowed step's verdict is pending: the settle leaves the 16-bit
 * copy stale (the step skipped, the write stands), so the next forward casts it again. */
static void test_deferred_params_written(void **st)
{
    (void)st;
    rng_seed("verdict deferred write", 0);
    backend_cpu_set_keep_params16(1);
    dev_init();
    dt_scaler_config cfg;
    dt_scaler_defaults(&cfg);
    side a = side_make(DT_F16, DT_F16, DT_OPTIM_SGD, &cfg, 0);
    dt_model_set_deferred_verdict(a.m, 1);
    g_dev.np = dt_model_num_params(a.m);
    float *x;
    int32_t *y;
    make_batch(a.m, 8, 2.0f, &x, &y);
    dt_step_result r;
    assert_int_equal(side_step(&a, x, y, 0, &r), DT_OK);
    assert_int_equal(side_step(&a, x, y, 1, &r), DT_OK); /* overflows: pending */
    dt_model_params(a.m)[0] += 1.0f;                     /* handed out for writing */
    int sk = 0;
    assert_int_equal(dt_model_settle_step(a.m, &sk), DT_OK);
    assert_int_equal(sk, 1);
    const int c = g_dev.casts;
    assert_int_equal(side_step(&a, x, y, 0, &r), DT_OK);
    assert_int_equal(g_dev.casts, c + 1);
    free(x);
    free(y);
    side_free(&a);
    backend_cpu_set_keep_params16(0);
}

static void test_deferred_same_bits(void **st)
{
    (void)st;
    rng_seed("verdict deferred", 0);
    deferred_same_bits(DT_F16, DT_F16, DT_OPTIM_SGD);
    deferred_same_bits(DT_F16, DT_F32, DT_OPTIM_ADAMW);
    deferred_same_bits(DT_BF16, DT_BF16, DT_OPTIM_ADAMW);
}

/* A deferred verdict at the scale's floor: the step returns, the settle gives up (the step behind
 * the verdict did nothing); a checkpoint is refused while a verdict is pending. */
static void test_deferred_give_up(void **st)
{
    (void)st;
    rng_seed("verdict deferred give up", 0);
    dev_init();
    dt_scaler_config cfg;
    dt_scaler_defaults(&cfg);
    cfg.init_scale = cfg.min_scale = 8;
    side a = side_make(DT_F16, DT_F16, DT_OPTIM_ADAMW, &cfg, 0);
    dt_model_set_deferred_verdict(a.m, 1);
    const size_t np = dt_model_num_params(a.m);
    float *keep = xmalloc(np * sizeof *keep);
    for (int i = 0; i < 2; i++) {
        float *x;
        int32_t *y;
        make_batch(a.m, 8, 2.0f, &x, &y);
        dt_step_result r;
        assert_int_equal(side_step(&a, x, y, i == 1, &r), DT_OK);
        assert_int_equal(r.pending, 1);
        char dir[] = "/tmp/dt_verdict_XXXXXX";
        assert_non_null(mkdtemp(dir));
        assert_int_equal(dt_checkpoint_save(NULL, dir, a.m, a.o, a.sc, NULL, i + 1), DT_ERR_INVALID_ARG);
        assert_non_null(strstr(dt_last_error(), "dt_model_settle_step"));
        assert_int_equal(rmdir(dir), 0); /* nothing written */
        int sk = -1;
        assert_int_equal(dt_model_settle_step(a.m, &sk), i == 1 ? DT_ERR_NUMERIC : DT_OK);
        assert_int_equal(sk, i == 1);
        if (i == 0) assert_int_equal(dt_model_get_params(a.m, keep), DT_OK);
        free(x);
        free(y);
    }
    assert_non_null(strstr(dt_last_error(), "already at min_scale"));
    assert_int_equal(optimizer_state(a.o).t, 1);
    float *now = xmalloc(np * sizeof *now);
    assert_int_equal(dt_model_get_params(a.m, now), DT_OK);
    assert_memory_equal(now, keep, np * sizeof *now);
    /* Taken once: nothing is pending after the failed settle. */
    assert_int_equal(dt_model_settle_step(a.m, NULL), DT_OK);
    free(now);
    free(keep);
    side_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits),        cmocka_unit_test(test_give_up),
        cmocka_unit_test(test_not_queued),       cmocka_unit_test(test_deferred_same_bits),
        cmocka_unit_test(test_deferred_give_up), cmocka_unit_test(test_deferred_params_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
