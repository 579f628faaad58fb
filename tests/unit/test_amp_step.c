/*
 * test_amp_step.c - what dt_model_train_step saves of a mixed-precision step, on the CPU:
 *  - DT_NONFINITE_CHECK_AT_RISK: the per-layer finite check runs only in steps where one more
 *    overflow stops the run (at the scale's floor, at the window's limit), and there names the
 *    layer;
 *  - fp32 gradients keep their unscale and clip factors pending until the optimizer step reads
 *    them: the buffer untouched, the norm and the parameters those of the in-place route.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"

/* DT_NONFINITE_CHECK_AT_RISK (what dtrain train uses): dt_model_train_step looks layer by layer
 * only in steps where one more overflow makes the scaler give up, so a healthy run's overflow
 * (skipped, the scale backs off) names no layer, while the overflow that stops a run does: at the
 * floor of the scale, and at the window's limit (window 4, at most 2 overflows), but not where the
 * overflow that would pass the limit leaves the window as the next one enters. */
static int at_risk_step(dt_model *m, dt_optimizer *o, dt_scaler *sc, int inject)
{
    float *x;
    int32_t *y;
    make_batch(m, 8, 1.0f, &x, &y);
    if (inject) model_test_inject_inf(m);
    dt_step_result r;
    const dt_status s = dt_model_train_step(m, o, sc, x, y, 8, 1.0f / 8, &r);
    free(x);
    free(y);
    assert_true(s == DT_OK || s == DT_ERR_NUMERIC);
    if (s == DT_OK) assert_int_equal(r.skipped, inject);
    return s;
}

static void test_check_at_risk(void **st)
{
    (void)st;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    rng_seed("at risk", 0);
    for (int c = 0; c < 4; c++) {
        dt_model *m = make_model("fc:32,relu,fc:10", "20", 8, DT_F16, DT_F16);
        dt_optimizer *o;
        dt_scaler *sc;
        assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(m), &o), DT_OK);
        dt_scaler_config cfg;
        dt_scaler_defaults(&cfg);
        if (c == 1) cfg.init_scale = cfg.min_scale = 4.0; /* at the floor from the start */
        if (c >= 2) cfg.window = 4;                       /* gives up at the third overflow of 4 */
        assert_int_equal(dt_scaler_create(&cfg, &sc), DT_OK);
        dt_model_set_nonfinite_check(m, DT_NONFINITE_CHECK_AT_RISK);
        if (c == 0) {
            /* Far from giving up: the overflow is skipped and not looked for; with the check ON it is. */
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(dt_model_nonfinite_layer(m), -1);
            dt_model_set_nonfinite_check(m, DT_NONFINITE_CHECK_ON);
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(dt_model_nonfinite_layer(m), 2);
        } else if (c == 1) {
            assert_int_equal(at_risk_step(m, o, sc, 0), DT_OK);
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_ERR_NUMERIC);
            assert_non_null(strstr(dt_last_error(), "already at min_scale"));
            assert_int_equal(dt_model_nonfinite_layer(m), 2);
        } else if (c == 3) {
            /* The window full, its oldest verdict an overflow: the next overflow takes that one's
             * place, 2 of 4 stay, the run goes on, and no layer is looked for. */
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(at_risk_step(m, o, sc, 0), DT_OK);
            assert_int_equal(at_risk_step(m, o, sc, 0), DT_OK);
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(dt_model_nonfinite_layer(m), -1);
        } else {
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_OK);
            assert_int_equal(dt_model_nonfinite_layer(m), -1); /* a third could still be tolerated here */
            assert_int_equal(at_risk_step(m, o, sc, 1), DT_ERR_NUMERIC);
            assert_non_null(strstr(dt_last_error(), "3 of the last 3 updates overflowed"));
            assert_int_equal(dt_model_nonfinite_layer(m), 2);
        }
        dt_scaler_free(sc);
        dt_optimizer_free(o);
        dt_model_free(m);
    }
}

/* dt_model_train_step leaves the unscale and the clip coefficient of fp32 gradients to the optimizer
 * step (one read of the gradients for the check, no write): dt_model_grads() afterwards holds
 * the gradients as backward made them, times the loss scale, and the parameters equal those of
 * the in-place route (dt_model_unscale_grads, dt_model_clip_grad_norm, dt_model_optimizer_step)
 * bit for bit. */
static void test_deferred_fp32(void **st)
{
    (void)st;
    const float S = 1024.0f;
    dt_model *a = make_model("fc:32,relu,fc:10", "20", 8, DT_F32, DT_F32);
    dt_model *b = make_model("fc:32,relu,fc:10", "20", 8, DT_F32, DT_F32);
    const size_t np = dt_model_num_params(a);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *oa, *ob;
    assert_int_equal(dt_optimizer_create(&oc, np, &oa), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, np, &ob), DT_OK);
    dt_scaler_config sc;
    dt_scaler_defaults(&sc);
    sc.dynamic = 0;
    sc.init_scale = S;
    dt_scaler *s;
    assert_int_equal(dt_scaler_create(&sc, &s), DT_OK);
    assert_int_equal(dt_model_set_clip_grad_norm(a, 0.05), DT_OK);
    float *x;
    int32_t *y;
    rng_seed("deferred", 0);
    make_batch(a, 8, 1.0f, &x, &y);
    double l;
    int c, inf = -1;
    /* The in-place route on b, keeping the scaled gradients before their unscale. */
    float *scaled = xmalloc(np * sizeof *scaled);
    assert_int_equal(dt_model_forward_backward(b, x, y, 8, S / 8, &l, &c), DT_OK);
    memcpy(scaled, dt_model_grads(b), np * sizeof *scaled);
    assert_int_equal(dt_model_unscale_grads(b, 1.0f / S, &inf), DT_OK);
    assert_int_equal(inf, 0);
    double nb = 0;
    assert_int_equal(dt_model_clip_grad_norm(b, 0.05, &nb), DT_OK);
    assert_int_equal(dt_model_optimizer_step(b, ob), DT_OK);
    dt_step_result r;
    assert_int_equal(dt_model_train_step(a, oa, s, x, y, 8, 1.0f / 8, &r), DT_OK);
    assert_int_equal(r.stepped, 1);
    assert_true(r.grad_norm > 0.05);                                     /* it clipped */
    assert_memory_equal(&r.grad_norm, &nb, sizeof nb);                   /* the same norm */
    assert_memory_equal(dt_model_grads(a), scaled, np * sizeof *scaled); /* untouched */
    assert_memory_equal(dt_model_params(a), dt_model_params(b), np * sizeof(float));
    free(scaled);
    free(x);
    free(y);
    dt_scaler_free(s);
    dt_optimizer_free(oa);
    dt_optimizer_free(ob);
    dt_model_free(a);
    dt_model_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_at_risk),
        cmocka_unit_test(test_deferred_fp32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
