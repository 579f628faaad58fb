/*
 * test_loss_wait.c - a training pass collects its loss once backward is queued behind it: on a
 * device the loss is copied back asynchronously, so the host must not read it before loss_wait,
 * and should not wait for it between forward and backward (the device would run dry while the
 * host queues backward).
 *
 * On the CPU the loss is there at once, so a model that read it early would pass unseen. A backend
 * like a device's stands in: the CPU table whose softmax_xent leaves NaN and -1 where the values
 * go and writes them only at loss_wait, which also records how many fc backward passes were
 * queued by then. The model on it must report the same losses, counts and parameters as one on
 * the CPU table, bit for bit, with one wait per pass, after the whole backward.
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
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"

/* The deferring backend's state: the values of the loss queued last and where they go. */
static struct {
    const backend_ops *cpu;
    double *loss_at, loss;
    int *correct_at, correct;
    int pending, waits, fc_bwd, fc_bwd_at_wait;
} g_defer;

static dt_status defer_xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch,
                            int classes, float grad_scale, double *loss, int *correct)
{
    int c = 0;
    dt_status s = g_defer.cpu->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &g_defer.loss, &c);
    if (s) return s;
    g_defer.correct = c;
    g_defer.loss_at = loss;
    g_defer.correct_at = correct;
    g_defer.pending = 1;
    *loss = NAN; /* what host memory holds before a device's copy lands */
    if (correct) *correct = -1;
    return DT_OK;
}

static dt_status defer_wait(backend *be)
{
    (void)be;
    g_defer.waits++;
    g_defer.fc_bwd_at_wait = g_defer.fc_bwd;
    if (g_defer.pending) {
        *g_defer.loss_at = g_defer.loss;
        if (g_defer.correct_at) *g_defer.correct_at = g_defer.correct;
        g_defer.pending = 0;
    }
    return DT_OK;
}

static dt_status count_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                              const void *dy, void *dx, int batch, int in, int out, const layer_params *below)
{
    g_defer.fc_bwd++;
    return g_defer.cpu->layer_fc_bwd(be, a, lp, x, x_f32, dy, dx, batch, in, out, below);
}

/* Two models alike, one on the CPU table and one on the deferring one, trained side by side. */
static void train_pair(dt_dtype prec, int with_scaler, int accum)
{
    memset(&g_defer, 0, sizeof g_defer);
    g_defer.cpu = backend_cpu()->ops;
    backend_ops ops = *g_defer.cpu;
    ops.softmax_xent = defer_xent;
    ops.loss_wait = defer_wait;
    ops.layer_fc_bwd = count_fc_bwd;
    backend deferring = {&ops, NULL};

    dt_model *a = make_model("fc:24,relu,fc:16,relu,fc:5", "12", 8, prec, prec);
    dt_model *b = make_model("fc:24,relu,fc:16,relu,fc:5", "12", 8, prec, prec);
    model_test_set_backend(b, &deferring);
    assert_int_equal(dt_model_set_accum_steps(a, accum), DT_OK);
    assert_int_equal(dt_model_set_accum_steps(b, accum), DT_OK);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.lr = 0.01f;
    dt_optimizer *oa, *ob;
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(a), &oa), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(b), &ob), DT_OK);
    dt_scaler *sa = NULL, *sb = NULL;
    if (with_scaler) {
        dt_scaler_config cfg;
        dt_scaler_defaults(&cfg);
        assert_int_equal(dt_scaler_create(&cfg, &sa), DT_OK);
        assert_int_equal(dt_scaler_create(&cfg, &sb), DT_OK);
    }
    const int passes = 6;
    for (int p = 0; p < passes; p++) {
        float *x;
        int32_t *y;
        make_batch(a, 8, 2.0f, &x, &y);
        dt_step_result ra, rb;
        assert_int_equal(dt_model_train_step(a, oa, sa, x, y, 8, 1.0f / 8, &ra), DT_OK);
        const int waits = g_defer.waits;
        assert_int_equal(dt_model_train_step(b, ob, sb, x, y, 8, 1.0f / 8, &rb), DT_OK);
        /* One wait per pass, with the three fc layers' backward already queued. */
        assert_int_equal(g_defer.waits, waits + 1);
        assert_int_equal(g_defer.fc_bwd_at_wait, 3 * (p + 1));
        assert_true(isfinite(rb.loss_sum));
        assert_memory_equal(&ra.loss_sum, &rb.loss_sum, sizeof ra.loss_sum);
        assert_int_equal(ra.correct, rb.correct);
        assert_int_equal(ra.stepped, rb.stepped);
        free(x);
        free(y);
    }
    /* The public forward/backward too (a custom loop's own step). */
    float *x;
    int32_t *y;
    make_batch(a, 8, 2.0f, &x, &y);
    assert_int_equal(dt_model_set_accum_steps(a, 1), DT_OK);
    assert_int_equal(dt_model_set_accum_steps(b, 1), DT_OK);
    double la = 0, lb = 0;
    int ca = 0, cb = 0;
    assert_int_equal(dt_model_forward_backward(a, x, y, 8, 1.0f / 8, &la, &ca), DT_OK);
    assert_int_equal(dt_model_forward_backward(b, x, y, 8, 1.0f / 8, &lb, &cb), DT_OK);
    assert_memory_equal(&la, &lb, sizeof la);
    assert_int_equal(ca, cb);
    free(x);
    free(y);
    const size_t np = dt_model_num_params(a);
    assert_memory_equal(dt_model_params(a), dt_model_params(b), np * sizeof(float));
    dt_scaler_free(sa);
    dt_scaler_free(sb);
    dt_optimizer_free(oa);
    dt_optimizer_free(ob);
    dt_model_free(a);
    dt_model_free(b);
}

static void test_fp32(void **st)
{
    (void)st;
    rng_seed("loss wait fp32", 0);
    train_pair(DT_F32, 0, 1);
}

static void test_fp16_scaled_accum(void **st)
{
    (void)st;
    rng_seed("loss wait fp16", 0);
    train_pair(DT_F16, 1, 2);
}

static void test_bf16(void **st)
{
    (void)st;
    rng_seed("loss wait bf16", 0);
    train_pair(DT_BF16, 0, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_fp16_scaled_accum),
        cmocka_unit_test(test_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
