/*
 * test_api_args.c - the public calls of dtrain/model.h and dtrain/training.h given a NULL or bad
 * argument: each dt_status call returns DT_ERR_INVALID_ARG with a message naming the call and
 * the argument, before doing any work (a NULL loss_sum fails before the pass runs, so the
 * model's pass count stays put); the getters return their documented neutral value for a NULL
 * handle and the void calls do nothing. Bad settings are refused the same way: AdamW's eps and the
 * other optimizer settings when NaN or inf, dt_sync_config's flags outside 0/1 (also on a model
 * made without a context), dt_model_plan_memory's zero_world, zero_rank (with or without an
 * optimizer), caps and optimizer, dt_sgemm's dimensions. One process, models made with ctx NULL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtrain.h"
#include "base/status.h"
#include "runtime/model/model_internal.h"

#define SPEC "fc:4,relu,fc:3"
#define INPUT "2"
enum { B = 2 };

/* Fails the test, showing the message, unless the last error contains needle. */
static void expect_error_contains(const char *needle)
{
    const char *msg = dt_last_error();
    if (strstr(msg, needle) == NULL) fail_msg("last error \"%s\" does not contain \"%s\"", msg, needle);
}

/* s must be DT_ERR_INVALID_ARG with "fn: arg is NULL" in the message. */
static void expect_null(dt_status s, const char *fn, const char *arg)
{
    char needle[160];
    snprintf(needle, sizeof needle, "%s: %s is NULL", fn, arg);
    if (s != DT_ERR_INVALID_ARG)
        fail_msg("%s: status %d, not DT_ERR_INVALID_ARG (%s)", needle, (int)s, dt_last_error());
    expect_error_contains(needle);
}

/* s must be DT_ERR_INVALID_ARG with needle in the message. */
static void expect_invalid(dt_status s, const char *needle)
{
    if (s != DT_ERR_INVALID_ARG) fail_msg("status %d, not DT_ERR_INVALID_ARG (%s)", (int)s, dt_last_error());
    expect_error_contains(needle);
}

static dt_model *new_model(void)
{
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, SPEC, INPUT, 1, B, &m), DT_OK);
    return m;
}

static void test_model_nulls(void **st)
{
    (void)st;
    expect_null(dt_model_create(NULL, SPEC, INPUT, 1, B, NULL), "dt_model_create", "out");
    dt_model *m = new_model();
    float x[B * 2] = {1, 2, 3, 4}, params[64];
    int32_t y[B] = {0, 2};
    double loss = 0;
    int correct = 0, found = 0;
    const char *fb = "dt_model_forward_backward";
    expect_null(dt_model_forward_backward(NULL, x, y, B, 0.5f, &loss, &correct), fb, "m");
    expect_null(dt_model_forward_backward(m, NULL, y, B, 0.5f, &loss, &correct), fb, "x");
    expect_null(dt_model_forward_backward(m, x, NULL, B, 0.5f, &loss, &correct), fb, "labels");
    expect_null(dt_model_forward_backward(m, x, y, B, 0.5f, NULL, &correct), fb, "loss_sum");
    expect_null(dt_model_forward_backward(m, x, y, B, 0.5f, &loss, NULL), fb, "correct");
    assert_int_equal(m->fb_count, 0); /* refused before the pass */
    const char *ev = "dt_model_evaluate";
    expect_null(dt_model_evaluate(NULL, x, y, B, &loss, &correct, NULL), ev, "m");
    expect_null(dt_model_evaluate(m, NULL, y, B, &loss, &correct, NULL), ev, "x");
    expect_null(dt_model_evaluate(m, x, NULL, B, &loss, &correct, NULL), ev, "labels");
    expect_null(dt_model_evaluate(m, x, y, B, NULL, &correct, NULL), ev, "loss_sum");
    expect_null(dt_model_evaluate(m, x, y, B, &loss, NULL, NULL), ev, "correct");
    expect_null(dt_model_stage_batch(NULL, x, y, B), "dt_model_stage_batch", "m");
    expect_null(dt_model_stage_batch(m, NULL, y, B), "dt_model_stage_batch", "x");
    expect_null(dt_model_stage_batch(m, x, NULL, B), "dt_model_stage_batch", "labels");
    expect_null(dt_model_get_params(NULL, params), "dt_model_get_params", "m");
    expect_null(dt_model_get_params(m, NULL), "dt_model_get_params", "host");
    expect_null(dt_model_set_params(NULL, params), "dt_model_set_params", "m");
    expect_null(dt_model_set_params(m, NULL), "dt_model_set_params", "host");
    expect_null(dt_model_synchronize(NULL), "dt_model_synchronize", "m");
    dt_sync_config sc;
    dt_sync_defaults(&sc);
    expect_null(dt_model_set_sync(NULL, &sc), "dt_model_set_sync", "m");
    expect_null(dt_model_set_sync(m, NULL), "dt_model_set_sync", "c");
    expect_null(dt_model_sync_grads(NULL), "dt_model_sync_grads", "m");
    expect_null(dt_model_set_precision(NULL, DT_F32, DT_F32), "dt_model_set_precision", "m");
    expect_null(dt_model_unscale_grads(NULL, 1.0f, &found), "dt_model_unscale_grads", "m");
    expect_null(dt_model_unscale_grads(m, 1.0f, NULL), "dt_model_unscale_grads", "found_inf");
    expect_null(dt_model_grad_norm(NULL, &loss), "dt_model_grad_norm", "m");
    expect_null(dt_model_grad_norm(m, NULL), "dt_model_grad_norm", "norm");
    expect_null(dt_model_clip_grad_norm(NULL, 1.0, NULL), "dt_model_clip_grad_norm", "m");
    expect_null(dt_model_set_clip_grad_norm(NULL, 1.0), "dt_model_set_clip_grad_norm", "m");
    expect_null(dt_model_set_accum_steps(NULL, 2), "dt_model_set_accum_steps", "m");
    expect_null(dt_model_settle_step(NULL, NULL), "dt_model_settle_step", "m");
    expect_null(dt_model_set_profile(NULL, 1), "dt_model_set_profile", "m");
    dt_model_free(m);
}

static void test_training_nulls(void **st)
{
    (void)st;
    dt_model *m = new_model();
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *o = NULL;
    expect_null(dt_optimizer_create(&oc, 4, NULL), "dt_optimizer_create", "out");
    expect_null(dt_optimizer_create(NULL, 4, &o), "dt_optimizer_create", "c");
    assert_null(o);
    expect_invalid(dt_optimizer_create(&oc, 0, &o), "dt_optimizer_create: n is 0");
    assert_null(o);
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(m), &o), DT_OK);
    /* A flag outside 0 and 1 is refused, not taken as on (dtrain.h, "Flags"). */
    expect_invalid(dt_model_set_profile(m, 5), "dt_model_set_profile: on 5 must be 0 (off) or 1 (on)");
    float p[64] = {0}, g[64] = {0};
    expect_null(dt_optimizer_step(NULL, p, g), "dt_optimizer_step", "o");
    expect_null(dt_optimizer_step(o, NULL, g), "dt_optimizer_step", "params");
    expect_null(dt_optimizer_step(o, p, NULL), "dt_optimizer_step", "grads");
    expect_null(dt_optimizer_set_lr(NULL, 0.1f), "dt_optimizer_set_lr", "o");
    expect_null(dt_model_optimizer_step(NULL, o), "dt_model_optimizer_step", "m");
    expect_null(dt_model_optimizer_step(m, NULL), "dt_model_optimizer_step", "o");
    expect_null(dt_model_shard_optimizer(NULL, o), "dt_model_shard_optimizer", "m");
    expect_null(dt_model_shard_optimizer(m, NULL), "dt_model_shard_optimizer", "o");

    float x[B * 2] = {1, 2, 3, 4};
    int32_t y[B] = {0, 2};
    dt_step_result r;
    const char *ts = "dt_model_train_step";
    expect_null(dt_model_train_step(NULL, o, NULL, x, y, B, 0.5f, &r), ts, "m");
    expect_null(dt_model_train_step(m, NULL, NULL, x, y, B, 0.5f, &r), ts, "o");
    expect_null(dt_model_train_step(m, o, NULL, NULL, y, B, 0.5f, &r), ts, "x");
    expect_null(dt_model_train_step(m, o, NULL, x, NULL, B, 0.5f, &r), ts, "labels");
    expect_null(dt_model_train_step(m, o, NULL, x, y, B, 0.5f, NULL), ts, "r");
    /* A grad_scale that is not a positive finite number: refused before the pass (a NaN made
     * every gradient NaN with DT_OK). */
    const float bad_scale[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.5f};
    double loss = 0;
    int correct = 0;
    for (size_t i = 0; i < sizeof bad_scale / sizeof *bad_scale; i++) {
        expect_invalid(dt_model_train_step(m, o, NULL, x, y, B, bad_scale[i], &r), "dt_model_train_step: grad_scale");
        expect_invalid(dt_model_forward_backward(m, x, y, B, bad_scale[i], &loss, &correct),
                       "dt_model_forward_backward: grad_scale");
        expect_error_contains("must be a positive finite number");
    }
    assert_int_equal(m->fb_count, 0);
    assert_int_equal(dt_model_train_step(m, o, NULL, x, y, B, 0.5f, &r), DT_OK); /* the same call, whole */

    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    dt_scaler *s = NULL;
    expect_null(dt_scaler_create(&scc, NULL), "dt_scaler_create", "out");
    expect_null(dt_scaler_create(NULL, &s), "dt_scaler_create", "c");
    assert_int_equal(dt_scaler_create(&scc, &s), DT_OK);
    dt_scaler_state ss;
    dt_scaler_get_state(s, &ss);
    expect_null(dt_scaler_update(NULL, 0), "dt_scaler_update", "s");
    expect_null(dt_scaler_set_state(NULL, &ss), "dt_scaler_set_state", "s");
    expect_null(dt_scaler_set_state(s, NULL), "dt_scaler_set_state", "st");

    dt_memory_plan_config pc;
    dt_memory_plan_defaults(&pc);
    pc.spec = SPEC;
    pc.input = INPUT;
    dt_memory_plan plan;
    int batch = 0;
    expect_null(dt_model_plan_memory(NULL, &pc, NULL), "dt_model_plan_memory", "out");
    expect_null(dt_model_plan_memory(NULL, NULL, &plan), "dt_model_plan_memory", "c");
    pc.spec = NULL;
    expect_null(dt_model_plan_memory(NULL, &pc, &plan), "dt_model_plan_memory", "c->spec");
    pc.spec = SPEC;
    expect_null(dt_model_max_batch(NULL, &pc, 1 << 20, NULL, &plan), "dt_model_max_batch", "batch");
    expect_null(dt_model_max_batch(NULL, &pc, 1 << 20, &batch, NULL), "dt_model_max_batch", "plan");
    expect_null(dt_model_max_batch(NULL, NULL, 1 << 20, &batch, &plan), "dt_model_max_batch", "c");
    dt_scaler_free(s);
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* The getters' neutral values and the void calls' no-ops (none of them may crash). */
static void test_null_getters(void **st)
{
    (void)st;
    assert_int_equal(dt_model_num_params(NULL), 0);
    assert_null(dt_model_params(NULL));
    assert_null(dt_model_grads(NULL));
    dt_model_params_changed(NULL);
    assert_int_equal(dt_model_on_gpu(NULL), 0);
    assert_int_equal(dt_model_input_size(NULL), 0);
    assert_int_equal(dt_model_num_classes(NULL), 0);
    int c = 9, h = 9, w = 9;
    dt_model_input_shape(NULL, &c, &h, &w);
    assert_true(c == 0 && h == 0 && w == 0);
    char buf[32] = "x";
    dt_model_describe(NULL, buf, sizeof buf);
    assert_string_equal(buf, "");
    dt_model_layer_name(NULL, 0, buf, sizeof buf);
    assert_string_equal(buf, "-");
    assert_int_equal(dt_model_num_buckets(NULL), 0);
    assert_int_equal(dt_model_bucket_size(NULL, 0), 0);
    assert_int_equal(dt_model_precision(NULL), DT_F32);
    assert_int_equal(dt_model_grad_dtype(NULL), DT_F32);
    assert_int_equal(dt_model_accum_steps(NULL), 0);
    assert_int_equal(dt_model_accum_pos(NULL), 0);
    dt_model_set_nonfinite_check(NULL, 1);
    assert_int_equal(dt_model_nonfinite_layer(NULL), -1);
    dt_model_set_deferred_verdict(NULL, 1);
    dt_model_set_step_overlap(NULL, DT_STEP_OVERLAP_ON);
    assert_int_equal(dt_model_step_overlapped(NULL), DT_STEP_OVERLAP_OFF);
    dt_model_set_graphs(NULL, DT_GRAPHS_ON);
    assert_int_equal(dt_model_graphed(NULL), DT_GRAPHS_OFF);
    dt_model_set_fused_relu(NULL, 0);
    dt_step_profile prof;
    memset(&prof, 0xff, sizeof prof);
    dt_model_profile(NULL, &prof);
    assert_int_equal(prof.steps, 0);
    double f = 1, b = 1;
    dt_model_layer_profile(NULL, 0, &f, &b);
    assert_true(f == 0 && b == 0);
    dt_memory_summary ms;
    memset(&ms, 0xff, sizeof ms);
    dt_model_memory(NULL, NULL, &ms);
    assert_int_equal(ms.params, 0);
    assert_int_equal(ms.pool, 0);
    assert_true(dt_optimizer_lr(NULL) == 0.0f);
    assert_true(dt_scaler_scale(NULL) == 0.0f);
    assert_int_equal(dt_scaler_updates(NULL), 0);
    assert_int_equal(dt_scaler_skipped(NULL), 0);
    dt_scaler_state ss;
    memset(&ss, 0xff, sizeof ss);
    dt_scaler_get_state(NULL, &ss);
    assert_true(ss.scale == 0 && ss.updates == 0);
    /* NULL outputs: nothing written. */
    dt_model *m = new_model();
    dt_model_memory(m, NULL, NULL);
    dt_model_profile(m, NULL);
    dt_model_layer_profile(m, 0, NULL, NULL);
    dt_model_input_shape(m, NULL, NULL, NULL);
    dt_model_describe(m, NULL, 0);
    dt_scaler_get_state(NULL, NULL);
    dt_sync_defaults(NULL);
    dt_optim_defaults(NULL);
    dt_scaler_defaults(NULL);
    dt_memory_plan_defaults(NULL);
    dt_model_free(m);
}

/* Optimizer settings: NaN and inf refused like values out of range, each naming the field. */
static void test_optimizer_settings(void **st)
{
    (void)st;
    const float bad[] = {INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dt_optim_config c;
        dt_optimizer *o = NULL;
        dt_optim_defaults(&c);
        c.kind = DT_OPTIM_ADAMW;
        c.eps = bad[i];
        expect_invalid(dt_optimizer_create(&c, 4, &o), "eps");
        dt_optim_defaults(&c);
        c.lr = bad[i];
        expect_invalid(dt_optimizer_create(&c, 4, &o), "learning rate");
        dt_optim_defaults(&c);
        c.momentum = bad[i];
        expect_invalid(dt_optimizer_create(&c, 4, &o), "momentum");
        dt_optim_defaults(&c);
        c.weight_decay = bad[i];
        expect_invalid(dt_optimizer_create(&c, 4, &o), "weight decay");
        dt_optim_defaults(&c);
        c.kind = DT_OPTIM_ADAMW;
        c.beta1 = bad[i];
        expect_invalid(dt_optimizer_create(&c, 4, &o), "betas");
        dt_optim_defaults(&c);
        c.kind = DT_OPTIM_ADAMW;
        c.beta2 = bad[i];
        expect_invalid(dt_optimizer_create(&c, 4, &o), "betas");
        assert_null(o);
    }
    /* State too large to allocate: the size in the message does not wrap (it said 0 MiB). */
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.kind = DT_OPTIM_ADAMW;
    dt_optimizer *o = NULL;
    const size_t huge = (size_t)1 << 62;
    assert_int_equal(dt_optimizer_create(&c, huge, &o), DT_ERR_NOMEM);
    assert_null(o);
    expect_error_contains("optimizer state (2 x 4611686018427387904 floats: more than 16 EiB)");
    c.kind = DT_OPTIM_SGD; /* one array of 2^61 floats: 2^63 bytes, past PTRDIFF_MAX, said exactly */
    assert_int_equal(dt_optimizer_create(&c, huge >> 1, &o), DT_ERR_NOMEM);
    expect_error_contains("optimizer state (9223372036854775808 bytes, 8796093022208.0 MiB)");
}

/* dt_sync_config: its flags are 0 or 1 and its caps numbers from 0 to 1e6, on a model made
 * without a context too (which has no reducer to check them); a refused config changes nothing. */
static void test_sync_settings(void **st)
{
    (void)st;
    dt_model *m = new_model();
    dt_sync_config c;
    dt_sync_defaults(&c);
    c.overlap = 2;
    expect_invalid(dt_model_set_sync(m, &c), "overlap 2");
    dt_sync_defaults(&c);
    c.allow_unreduced = -1;
    expect_invalid(dt_model_set_sync(m, &c), "allow_unreduced -1");
    dt_sync_defaults(&c);
    c.bucket_mb = NAN;
    expect_invalid(dt_model_set_sync(m, &c), "bucket_mb");
    dt_sync_defaults(&c);
    c.first_bucket_mb = -1;
    expect_invalid(dt_model_set_sync(m, &c), "first_bucket_mb");
    dt_sync_defaults(&c);
    c.op = (dt_redop)7;
    expect_invalid(dt_model_set_sync(m, &c), "op 7");
    dt_sync_defaults(&c);
    c.zero = 1;
    c.allow_unreduced = 1;
    expect_invalid(dt_model_set_sync(m, &c), "allow_unreduced");
    dt_sync_defaults(&c);
    c.overlap = 0;
    assert_int_equal(dt_model_set_sync(m, &c), DT_OK);
    dt_model_free(m);
}

/* dt_model_plan_memory refuses what dt_model_create, dt_model_set_sync and dt_optimizer_create
 * would refuse. */
static void test_plan_settings(void **st)
{
    (void)st;
    dt_memory_plan_config c;
    dt_memory_plan p;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_defaults(&c);
    c.spec = SPEC;
    c.input = INPUT;
    assert_int_equal(dt_model_plan_memory(NULL, &c, &p), DT_OK);
    c.zero_world = -2;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "zero_world -2");
    /* zero_rank outside 0..zero_world - 1 whether or not an optimizer is planned (its share is the
     * only thing it picks); a world of 0 or 1 has rank 0 alone. */
    c.zero_world = 2;
    c.zero_rank = 2;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "zero_rank 2 is outside 0..1 (zero_world 2)");
    c.zero_rank = -1;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "zero_rank -1 is outside 0..1");
    c.zero_world = 0;
    c.zero_rank = 1;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "zero_rank 1 is outside 0..0 (zero_world 0)");
    c.zero_rank = 0;
    c.bucket_mb = NAN;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "bucket_mb");
    c.bucket_mb = -1;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "bucket_mb");
    c.bucket_mb = 25;
    c.first_bucket_mb = INFINITY;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "first_bucket_mb");
    c.first_bucket_mb = 1;
    c.optim = &oc;
    oc.lr = -1;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "learning rate -1");
    oc.lr = 0.1f;
    oc.kind = (dt_optim_kind)9;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "unknown optimizer 9");
    int batch = -1;
    expect_invalid(dt_model_max_batch(NULL, &c, 1 << 20, &batch, &p), "unknown optimizer 9");
    oc.kind = DT_OPTIM_SGD;
    c.compute = DT_F32;
    c.grads = DT_F16;
    expect_invalid(dt_model_plan_memory(NULL, &c, &p), "gradients of an fp32 model are kept in fp32, not fp16");
    c.grads = DT_F32;
    assert_int_equal(dt_model_plan_memory(NULL, &c, &p), DT_OK);
}

/* dt_sgemm returns nothing: outside its preconditions it leaves C as it was and says why in
 * dt_last_error (OpenBLAS would only print "parameter N had an illegal value"). */
static void test_sgemm_preconditions(void **st)
{
    (void)st;
    const float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1};
    float c[4] = {9, 9, 9, 9};
    status_clear_error();
    dt_sgemm(0, 0, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2); /* lda 1 < k 2 */
    expect_error_contains("dt_sgemm: lda 1 must be at least 2");
    dt_sgemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 1);
    expect_error_contains("dt_sgemm: ldc 1 must be at least 2");
    dt_sgemm(0, 1, 2, 2, 2, 1.0f, a, 2, b, 1, 0.0f, c, 2); /* B^T: ldb >= k */
    expect_error_contains("dt_sgemm: ldb 1 must be at least 2");
    dt_sgemm(0, 0, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    expect_error_contains("dt_sgemm: m -1");
    dt_sgemm(0, 0, 2, 2, 2, 1.0f, NULL, 2, b, 2, 0.0f, c, 2);
    expect_error_contains("dt_sgemm: a is NULL");
    for (int i = 0; i < 4; i++) assert_true(c[i] == 9.0f);
    dt_sgemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2); /* A times the identity */
    for (int i = 0; i < 4; i++) assert_true(c[i] == a[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_nulls),         cmocka_unit_test(test_training_nulls),
        cmocka_unit_test(test_null_getters),        cmocka_unit_test(test_optimizer_settings),
        cmocka_unit_test(test_sync_settings),       cmocka_unit_test(test_plan_settings),
        cmocka_unit_test(test_sgemm_preconditions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
