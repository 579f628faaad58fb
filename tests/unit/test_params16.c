/*
 * test_params16.c - the 16-bit parameter copy's validity rules, on the CPU. A 16-bit GPU model
 * forwards from a 16-bit copy of its parameters that the optimizer step writes in its own pass
 * (backend.h, sgd/adamw's copy) and that a forward casts again only after something else wrote the
 * parameters. Here the CPU backend keeps such a copy too (backend_cpu_set_keep_params16), and its
 * layers read it, so a copy that is not current changes the results. Every case runs two models
 * from the same seed, side by side: `ref` made without the copy (its layers round the fp32 master
 * weights as they use them, always right) and `kept` with it; after each way of changing the
 * parameters their losses and parameters must agree bit for bit:
 *  - training steps: SGD and AdamW, bf16 and fp16 (with a loss scaler and a skipped step), fp32
 *    and 16-bit gradients (whose step runs in blocks, each writing its part of the copy), and
 *    gradient accumulation;
 *  - dt_model_params written at once, dt_model_set_params, a checkpoint loaded, a precision change;
 *  - the rule for a pointer kept across a step: its writes are not seen (the forward reads the
 *    copy the step wrote, which proves that the fused copy is what the forward uses) until
 *    dt_model_params_changed says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/backend.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp_fixture.h"
#include "tmp_dir.h"

#define SPEC "conv:4:3:1:1,relu,pool:2,fc:16,relu,fc:10"
#define INPUT "2x8x8"
#define B 4

typedef struct pair {
    dt_model *ref, *kept;
    dt_optimizer *oref, *okept;
    dt_scaler *sref, *skept;
} pair;

static dt_model *model_in(dt_dtype prec, dt_dtype grads, int keep16)
{
    backend_cpu_set_keep_params16(keep16);
    dt_model *m = make_model(SPEC, INPUT, B, prec, grads);
    backend_cpu_set_keep_params16(0);
    return m;
}

static pair pair_make(dt_dtype prec, dt_dtype grads, dt_optim_kind kind)
{
    pair p = {model_in(prec, grads, 0), model_in(prec, grads, 1), NULL, NULL, NULL, NULL};
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.kind = kind;
    c.lr = kind == DT_OPTIM_SGD ? 0.05f : 1e-3f;
    c.weight_decay = 1e-3f;
    const size_t np = dt_model_num_params(p.ref);
    assert_int_equal(dt_optimizer_create(&c, np, &p.oref), DT_OK);
    assert_int_equal(dt_optimizer_create(&c, np, &p.okept), DT_OK);
    if (prec == DT_F16) {
        dt_scaler_config sc;
        dt_scaler_defaults(&sc);
        assert_int_equal(dt_scaler_create(&sc, &p.sref), DT_OK);
        assert_int_equal(dt_scaler_create(&sc, &p.skept), DT_OK);
    }
    return p;
}

static void pair_free(pair *p)
{
    dt_model_free(p->ref), dt_model_free(p->kept);
    dt_optimizer_free(p->oref), dt_optimizer_free(p->okept);
    dt_scaler_free(p->sref), dt_scaler_free(p->skept);
}

/* Both models' parameters, read without touching the copy (dt_model_get_params), bit for bit. */
static void same_params(const pair *p, const char *what)
{
    const size_t np = dt_model_num_params(p->ref);
    float *a = xmalloc(np * sizeof *a), *b = xmalloc(np * sizeof *b);
    assert_int_equal(dt_model_get_params(p->ref, a), DT_OK);
    assert_int_equal(dt_model_get_params(p->kept, b), DT_OK);
    for (size_t i = 0; i < np; i++)
        if (memcmp(&a[i], &b[i], sizeof *a))
            fail_msg("%s: parameter %zu: %.9g without the copy, %.9g with it", what, i, (double)a[i], (double)b[i]);
    free(a), free(b);
}

/* One training step of both on the same batch: the same loss, verdict and parameters. */
static void step_both(pair *p, const char *what, int inject_inf)
{
    float *x;
    int32_t *y;
    make_batch(p->ref, B, 1.0f, &x, &y);
    if (inject_inf) {
        model_test_inject_inf(p->ref);
        model_test_inject_inf(p->kept);
    }
    dt_step_result ra, rb;
    assert_int_equal(dt_model_train_step(p->ref, p->oref, p->sref, x, y, B, 1.0f / B, &ra), DT_OK);
    assert_int_equal(dt_model_train_step(p->kept, p->okept, p->skept, x, y, B, 1.0f / B, &rb), DT_OK);
    if (memcmp(&ra.loss_sum, &rb.loss_sum, sizeof ra.loss_sum))
        fail_msg("%s: loss %.17g without the copy, %.17g with it", what, ra.loss_sum, rb.loss_sum);
    assert_int_equal(ra.skipped, rb.skipped);
    assert_int_equal(ra.skipped, inject_inf);
    same_params(p, what);
    free(x), free(y);
}

/* The loss of one forward (and backward) of m on a fixed batch. */
static double loss_of(dt_model *m)
{
    float *x;
    int32_t *y;
    rng_seed("params16 probe", 0);
    make_batch(m, B, 1.0f, &x, &y);
    double l = 0;
    int c = 0;
    assert_int_equal(dt_model_forward_backward(m, x, y, B, 1.0f / B, &l, &c), DT_OK);
    free(x), free(y);
    return l;
}

static void same_loss(pair *p, const char *what)
{
    const double a = loss_of(p->ref), b = loss_of(p->kept);
    if (memcmp(&a, &b, sizeof a)) fail_msg("%s: loss %.17g without the copy, %.17g with it", what, a, b);
}

static void test_training(void **st)
{
    (void)st;
    const dt_dtype precs[] = {DT_BF16, DT_F16};
    const dt_optim_kind kinds[] = {DT_OPTIM_SGD, DT_OPTIM_ADAMW};
    for (int pi = 0; pi < 2; pi++)
        for (int g16 = 0; g16 < 2; g16++)
            for (int ki = 0; ki < 2; ki++) {
                pair p = pair_make(precs[pi], g16 ? precs[pi] : DT_F32, kinds[ki]);
                char what[96];
                rng_seed("params16 training", pi * 4 + g16 * 2 + ki);
                for (int s = 0; s < 4; s++) {
                    /* fp16: the third step overflows and is skipped, leaving the copy as it was. */
                    const int inf = precs[pi] == DT_F16 && s == 2;
                    snprintf(what, sizeof what, "%s, %s gradients, %s, step %d%s", tname(precs[pi]),
                             g16 ? tname(precs[pi]) : "fp32", kinds[ki] == DT_OPTIM_SGD ? "sgd" : "adamw", s + 1,
                             inf ? " (skipped)" : "");
                    step_both(&p, what, inf);
                }
                pair_free(&p);
            }
}

static void test_accumulation(void **st)
{
    (void)st;
    pair p = pair_make(DT_BF16, DT_F32, DT_OPTIM_SGD);
    assert_int_equal(dt_model_set_accum_steps(p.ref, 3), DT_OK);
    assert_int_equal(dt_model_set_accum_steps(p.kept, 3), DT_OK);
    rng_seed("params16 accumulation", 0);
    for (int s = 0; s < 7; s++) step_both(&p, "accumulation of 3 micro-batches", 0);
    pair_free(&p);
}

/* Each public way of writing the parameters, after a step has made the copy current. */
static void test_writers(void **st)
{
    (void)st;
    pair p = pair_make(DT_BF16, DT_F32, DT_OPTIM_ADAMW);
    const size_t np = dt_model_num_params(p.ref);
    rng_seed("params16 writers", 0);
    step_both(&p, "first step", 0);

    /* dt_model_params, written at once. */
    float *a = dt_model_params(p.ref), *b = dt_model_params(p.kept);
    for (size_t i = 0; i < np; i++) a[i] = b[i] = a[i] * 0.5f + 0.01f;
    same_loss(&p, "dt_model_params written");
    step_both(&p, "the step after dt_model_params", 0);

    /* dt_model_set_params. */
    float *h = xmalloc(np * sizeof *h);
    for (size_t i = 0; i < np; i++) h[i] = 0.1f * urand();
    assert_int_equal(dt_model_set_params(p.ref, h), DT_OK);
    assert_int_equal(dt_model_set_params(p.kept, h), DT_OK);
    same_loss(&p, "dt_model_set_params");
    step_both(&p, "the step after dt_model_set_params", 0);

    /* A checkpoint loaded after the copy moved on. */
    char dir[64];
    assert_int_equal(tmp_dir_make(dir, sizeof dir, "dt_params16"), 0);
    assert_int_equal(dt_checkpoint_save(NULL, dir, p.kept, p.okept, NULL, NULL, 3), DT_OK);
    step_both(&p, "a step after the save", 0);
    long at = -1;
    assert_int_equal(dt_checkpoint_load_latest(NULL, dir, p.ref, p.oref, NULL, NULL, &at), DT_OK);
    assert_int_equal(dt_checkpoint_load_latest(NULL, dir, p.kept, p.okept, NULL, NULL, &at), DT_OK);
    assert_int_equal(at, 3);
    same_loss(&p, "a checkpoint loaded");
    step_both(&p, "the step after the load", 0);
    assert_int_equal(tmp_dir_remove(dir), 0);

    /* A change of precision: the copy of the other 16-bit type is no copy of these. */
    assert_int_equal(dt_model_set_precision(p.ref, DT_F16, DT_F32), DT_OK);
    assert_int_equal(dt_model_set_precision(p.kept, DT_F16, DT_F32), DT_OK);
    same_loss(&p, "bf16 -> fp16");
    step_both(&p, "the first fp16 step", 0);
    free(h);
    pair_free(&p);
}

/* A pointer kept across a step: the step wrote the copy, so the forward does not see writes
 * through the pointer until dt_model_params_changed (include/dtrain/model.h). */
static void test_kept_pointer(void **st)
{
    (void)st;
    pair p = pair_make(DT_BF16, DT_F32, DT_OPTIM_SGD);
    const size_t np = dt_model_num_params(p.ref);
    float *a = dt_model_params(p.ref), *b = dt_model_params(p.kept);
    rng_seed("params16 kept", 0);
    step_both(&p, "the step", 0);
    /* No forward of kept between its step and the write: what it reads then is the copy the step
     * wrote (the parameters before the write, which ref computes from its master weights). */
    const double before = loss_of(p.ref);
    for (size_t i = 0; i < np; i++) a[i] = b[i] = -a[i];
    const double stale = loss_of(p.kept), changed = loss_of(p.ref);
    assert_true(changed != before); /* the write matters to a model without the copy */
    assert_memory_equal(&stale, &before, sizeof stale);
    dt_model_params_changed(p.kept);
    same_loss(&p, "dt_model_params_changed");
    pair_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_training),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_writers),
        cmocka_unit_test(test_kept_pointer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
