/*
 * test_api_data_args.c - the data API (include/dtrain/data.h) against bad arguments: every call
 * that returns a status answers each NULL pointer it needs with DT_ERR_INVALID_ARG and a message
 * naming the call and the argument, before any work (it crashed before); dt_synthetic_open takes
 * a NULL config as the defaults, like dt_dataset_open; the getters answer a NULL dataset or loader
 * with a neutral value and skip NULL outputs; dt_evaluate refuses a batch outside 1..the model's
 * max batch and bad thread counts by name before it allocates anything (batch -1 was
 * DT_ERR_NOMEM); the flags of dt_data_config outside 0 and 1 are refused by name, and so is
 * dt_dataset_set_normalization while a loader reads the dataset, and dt_dataset_free then leaves
 * the dataset to the loader, saying so. The cross-rank verdict of dt_evaluate is tested under
 * mpirun (mpi.replicas.np2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

enum { IN = 16, CLASSES = 4, SIZE = 50, BATCH = 8 };

static dt_ctx *g_ctx;

/* s is DT_ERR_INVALID_ARG and the last error contains what, e.g. "dt_loader_next: x is NULL". */
static void expect_invalid(dt_status s, const char *what)
{
    if (s != DT_ERR_INVALID_ARG) fail_msg("%s: status %d (%s), not DT_ERR_INVALID_ARG", what, (int)s, dt_strerror(s));
    const char *msg = dt_last_error();
    if (strstr(msg, what) == NULL) fail_msg("last error \"%s\" does not contain \"%s\"", msg, what);
}

static dt_dataset *synthetic(void)
{
    dt_dataset *d = NULL;
    assert_int_equal(dt_synthetic_create(IN, 1, 1, CLASSES, SIZE, 5, &d), DT_OK);
    return d;
}

static void test_open_null_arguments(void **state)
{
    (void)state;
    dt_dataset *d = (dt_dataset *)&d; /* not NULL: a failed open must set it to NULL */
    expect_invalid(dt_dataset_open(NULL, NULL, &d), "dt_dataset_open: path is NULL");
    assert_null(d);
    expect_invalid(dt_dataset_open("/nonexistent", NULL, NULL), "dt_dataset_open: out is NULL");
    expect_invalid(dt_synthetic_create(IN, 1, 1, CLASSES, SIZE, 5, NULL), "dt_synthetic_create: out is NULL");
    dt_data_config cfg;
    dt_data_defaults(&cfg);
    expect_invalid(dt_synthetic_open(IN, 1, 1, CLASSES, SIZE, 5, &cfg, NULL), "dt_synthetic_open: out is NULL");
    dt_data_defaults(NULL); /* a no-op */
}

/* A NULL config is dt_data_defaults()'s, as dt_dataset_open documents for itself: the same
 * normalization (standard, from the data) and the same batches as the explicit defaults. */
static void test_synthetic_open_null_config_is_defaults(void **state)
{
    (void)state;
    dt_data_config cfg;
    dt_data_defaults(&cfg);
    dt_dataset *a = NULL, *b = NULL;
    assert_int_equal(dt_synthetic_open(IN, 1, 1, CLASSES, SIZE, 5, NULL, &a), DT_OK);
    assert_int_equal(dt_synthetic_open(IN, 1, 1, CLASSES, SIZE, 5, &cfg, &b), DT_OK);
    assert_int_equal(dt_dataset_normalization(a, NULL, NULL), DT_NORMALIZE_STANDARD);
    float xa[BATCH * IN], xb[BATCH * IN];
    int32_t ya[BATCH], yb[BATCH];
    for (long step = 0; step < 3; step++) {
        assert_int_equal(dt_dataset_batch(a, step, 0, 1, BATCH, xa, ya), DT_OK);
        assert_int_equal(dt_dataset_batch(b, step, 0, 1, BATCH, xb, yb), DT_OK);
        assert_memory_equal(xa, xb, sizeof xa);
        assert_memory_equal(ya, yb, sizeof ya);
    }
    dt_dataset_free(a);
    dt_dataset_free(b);
}

static void test_getters_accept_null(void **state)
{
    (void)state;
    assert_int_equal(dt_dataset_size(NULL), 0);
    assert_int_equal(dt_dataset_num_classes(NULL), 0);
    assert_string_equal(dt_dataset_format(NULL), "?");
    assert_string_equal(dt_dataset_source(NULL), "?");
    assert_int_equal(dt_dataset_uint8(NULL), 0);
    assert_int_equal(dt_dataset_bad_samples(NULL), 0);
    assert_int_equal(dt_dataset_steps_per_epoch(NULL, 1, BATCH), 0);
    const float *mean = (const float *)&mean, *std = (const float *)&std;
    assert_int_equal(dt_dataset_normalization(NULL, &mean, &std), DT_NORMALIZE_NONE);
    assert_null(mean);
    assert_null(std);
    int c = -1, h = -1, w = -1;
    dt_dataset_shape(NULL, &c, &h, &w);
    assert_true(c == 0 && h == 0 && w == 0);
    dt_dataset_shape(NULL, NULL, NULL, NULL);
    /* Each NULL output is skipped, the others filled. */
    dt_dataset *d = synthetic();
    h = -1;
    dt_dataset_shape(d, NULL, &h, NULL);
    assert_int_equal(h, 1);
    dt_dataset_free(d);
    assert_int_equal(dt_loader_on_device(NULL), 0);
    assert_true(dt_loader_wait_s(NULL) == 0);
    dt_loader_free(NULL);
    dt_dataset_free(NULL);
}

static void test_dataset_calls_null_arguments(void **state)
{
    (void)state;
    dt_dataset *d = synthetic();
    float x[BATCH * IN], mean[1] = {0}, std[1] = {1};
    int32_t y[BATCH];
    long epoch, offset;
    expect_invalid(dt_dataset_set_synthetic_on(NULL, DT_SYNTHETIC_HOST), "dt_dataset_set_synthetic_on: d is NULL");
    expect_invalid(dt_dataset_set_synthetic_on(d, (dt_synthetic_on)7), "dt_dataset_set_synthetic_on: where 7");
    expect_invalid(dt_dataset_set_normalization(NULL, DT_NORMALIZE_NONE, NULL, NULL),
                   "dt_dataset_set_normalization: d is NULL");
    expect_invalid(dt_dataset_set_normalization(d, DT_NORMALIZE_STANDARD, NULL, std),
                   "dt_dataset_set_normalization: mean is NULL");
    expect_invalid(dt_dataset_set_normalization(d, DT_NORMALIZE_STANDARD, mean, NULL),
                   "dt_dataset_set_normalization: std is NULL");
    expect_invalid(dt_dataset_position(NULL, 0, 1, BATCH, &epoch, &offset), "dt_dataset_position: d is NULL");
    expect_invalid(dt_dataset_position(d, 0, 1, BATCH, NULL, &offset), "dt_dataset_position: epoch is NULL");
    expect_invalid(dt_dataset_position(d, 0, 1, BATCH, &epoch, NULL), "dt_dataset_position: offset is NULL");
    expect_invalid(dt_dataset_set_position(NULL, 0, 0, 0), "dt_dataset_set_position: d is NULL");
    expect_invalid(dt_dataset_batch(NULL, 0, 0, 1, BATCH, x, y), "dt_dataset_batch: d is NULL");
    expect_invalid(dt_dataset_batch(d, 0, 0, 1, BATCH, NULL, y), "dt_dataset_batch: x is NULL");
    expect_invalid(dt_dataset_batch(d, 0, 0, 1, BATCH, x, NULL), "dt_dataset_batch: labels is NULL");
    /* Nothing above changed d. */
    assert_int_equal(dt_dataset_normalization(d, NULL, NULL), DT_NORMALIZE_NONE);
    assert_int_equal(dt_dataset_batch(d, 0, 0, 1, BATCH, x, y), DT_OK);
    dt_dataset_free(d);
}

/* The flags of dt_data_config are 0 or 1 (dtrain.h, "Flags"): another value is refused, naming the
 * field, before any file is read. */
static void test_config_flags(void **state)
{
    (void)state;
    dt_dataset *d = (dt_dataset *)&d;
    dt_data_config cfg;
    dt_data_defaults(&cfg);
    cfg.shuffle = 5;
    expect_invalid(dt_synthetic_open(IN, 1, 1, CLASSES, SIZE, 5, &cfg, &d),
                   "dt_synthetic_open: dt_data_config.shuffle 5 must be 0 or 1");
    assert_null(d);
    dt_data_defaults(&cfg);
    cfg.drop_last = -1;
    expect_invalid(dt_synthetic_open(IN, 1, 1, CLASSES, SIZE, 5, &cfg, &d), "dt_data_config.drop_last -1");
    dt_data_defaults(&cfg);
    cfg.skip_bad = 2;
    expect_invalid(dt_dataset_open("/nonexistent", &cfg, &d), "dt_dataset_open: dt_data_config.skip_bad 2");
    dt_data_defaults(&cfg);
    cfg.holdout_part = 3;
    expect_invalid(dt_dataset_open("/nonexistent", &cfg, &d), "dt_data_config.holdout_part 3");
    dt_data_defaults(&cfg);
    cfg.cifar100_coarse = 7;
    expect_invalid(dt_dataset_open("/nonexistent", &cfg, &d), "dt_data_config.cifar100_coarse 7");
    dt_data_defaults(&cfg);
    cfg.flip = 9;
    expect_invalid(dt_dataset_open("/nonexistent", &cfg, &d), "dt_data_config.flip 9");
    assert_null(d);
}

/* dt_dataset_set_normalization while a loader reads the dataset: refused, d unchanged; allowed
 * again once the loader is freed. */
static void test_normalization_under_loader(void **state)
{
    (void)state;
    dt_dataset *d = synthetic(); /* IN channels of one value each */
    float mean[IN], std[IN];
    for (int c = 0; c < IN; c++) mean[c] = 0.5f, std[c] = 2.0f;
    dt_loader *l = NULL;
    assert_int_equal(dt_loader_create(g_ctx, d, 0, 1, BATCH, 0, 0, 2, &l), DT_OK);
    expect_invalid(dt_dataset_set_normalization(d, DT_NORMALIZE_STANDARD, mean, std),
                   "dt_dataset_set_normalization: 1 loader(s) read this dataset");
    assert_int_equal(dt_dataset_normalization(d, NULL, NULL), DT_NORMALIZE_NONE);
    dt_loader *l2 = NULL; /* two loaders, then one: still refused */
    assert_int_equal(dt_loader_create(g_ctx, d, 0, 1, BATCH, 0, 1, 2, &l2), DT_OK);
    expect_invalid(dt_dataset_set_normalization(d, DT_NORMALIZE_UNIT, NULL, NULL), "2 loader(s)");
    dt_loader_free(l2);
    expect_invalid(dt_dataset_set_normalization(d, DT_NORMALIZE_UNIT, NULL, NULL), "1 loader(s)");
    dt_loader_free(l);
    assert_int_equal(dt_dataset_set_normalization(d, DT_NORMALIZE_STANDARD, mean, std), DT_OK);
    assert_int_equal(dt_dataset_normalization(d, NULL, NULL), DT_NORMALIZE_STANDARD);
    dt_dataset_free(d);
}

/* dt_dataset_free while a loader's threads read the dataset ahead: not freed (it was, and the
 * threads then read freed memory: a crash on a loader thread at some later point), said by name;
 * the loader goes on making sound batches, and the free after dt_loader_free releases it. */
static void test_free_under_loader(void **state)
{
    (void)state;
    dt_dataset *d = synthetic();
    dt_loader *l = NULL;
    assert_int_equal(dt_loader_create(g_ctx, d, 0, 1, BATCH, 0, 2, 4, &l), DT_OK);
    long step;
    const float *x;
    const int32_t *y;
    assert_int_equal(dt_loader_next(l, &step, &x, &y), DT_OK);
    dt_dataset_free(d);
    const char *msg = dt_last_error();
    if (!strstr(msg, "dt_dataset_free: 1 loader(s) still read this dataset") || !strstr(msg, "dt_loader_free"))
        fail_msg("dt_dataset_free under a loader said \"%s\"", msg);
    assert_int_equal(dt_dataset_size(d), SIZE);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(dt_loader_next(l, &step, &x, &y), DT_OK);
        assert_int_equal(step, i + 1);
        for (int k = 0; k < BATCH; k++) assert_true(y[k] >= 0 && y[k] < CLASSES);
    }
    dt_loader_free(l);
    dt_dataset_free(d);
}

static void test_loader_null_arguments(void **state)
{
    (void)state;
    dt_dataset *d = synthetic();
    dt_loader *l = NULL;
    expect_invalid(dt_loader_create(NULL, d, 0, 1, BATCH, 0, 1, 2, NULL), "dt_loader_create: out is NULL");
    l = (dt_loader *)&l;
    expect_invalid(dt_loader_create(NULL, NULL, 0, 1, BATCH, 0, 1, 2, &l), "dt_loader_create: d is NULL");
    assert_null(l);
    /* A bad rank is named as such (the message said "bad dataset" too). */
    expect_invalid(dt_loader_create(NULL, d, 2, 2, BATCH, 0, 1, 2, &l), "dt_loader_create: batch 8, rank 2 of 2");
    long step;
    const float *x;
    const int32_t *y;
    expect_invalid(dt_loader_next(NULL, &step, &x, &y), "dt_loader_next: l is NULL");
    for (int threads = 0; threads <= 1; threads++) {
        assert_int_equal(dt_loader_create(NULL, d, 0, 1, BATCH, 0, threads, 2, &l), DT_OK);
        expect_invalid(dt_loader_next(l, NULL, &x, &y), "dt_loader_next: step is NULL");
        expect_invalid(dt_loader_next(l, &step, NULL, &y), "dt_loader_next: x is NULL");
        expect_invalid(dt_loader_next(l, &step, &x, NULL), "dt_loader_next: labels is NULL");
        /* The refusals took no batch: the first one handed out is still step 0. */
        assert_int_equal(dt_loader_next(l, &step, &x, &y), DT_OK);
        assert_int_equal(step, 0);
        dt_loader_free(l);
    }
    dt_dataset_free(d);
}

static void test_evaluate_bad_arguments(void **state)
{
    (void)state;
    dt_dataset *d = synthetic();
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(g_ctx, "fc:8,relu,fc:4", "16", 3, BATCH, &m), DT_OK);
    dt_eval_result r = {0};
    expect_invalid(dt_evaluate(NULL, m, d, BATCH, 0, &r), "dt_evaluate: ctx is NULL");
    expect_invalid(dt_evaluate(g_ctx, NULL, d, BATCH, 0, &r), "dt_evaluate: m is NULL");
    expect_invalid(dt_evaluate(g_ctx, m, NULL, BATCH, 0, &r), "dt_evaluate: d is NULL");
    expect_invalid(dt_evaluate(g_ctx, m, d, BATCH, 0, NULL), "dt_evaluate: r is NULL");
    /* A batch outside 1..max batch is named before anything is allocated (-1 was DT_ERR_NOMEM). */
    const int bad_batch[] = {0, -1, BATCH + 1, INT_MAX};
    for (size_t i = 0; i < sizeof bad_batch / sizeof *bad_batch; i++) {
        char what[64];
        snprintf(what, sizeof what, "dt_evaluate: batch %d", bad_batch[i]);
        expect_invalid(dt_evaluate(g_ctx, m, d, bad_batch[i], 0, &r), what);
    }
    expect_invalid(dt_evaluate(g_ctx, m, d, BATCH, -1, &r), "dt_evaluate: threads -1");
    expect_invalid(dt_evaluate(g_ctx, m, d, BATCH, 257, &r), "dt_evaluate: threads 257");
    assert_int_equal(r.count, 0); /* r untouched by the refusals */
    /* And the good call still counts every sample. */
    assert_int_equal(dt_evaluate(g_ctx, m, d, BATCH, 1, &r), DT_OK);
    assert_int_equal(r.count, SIZE);
    dt_model_free(m);
    dt_dataset_free(d);
}

static int setup(void **state)
{
    (void)state;
    dt_config cfg;
    dt_config_defaults(&cfg);
    cfg.device = DT_DEVICE_CPU;
    return dt_init(&cfg, &g_ctx) == DT_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return dt_finalize(g_ctx) == DT_OK ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_null_arguments),   cmocka_unit_test(test_synthetic_open_null_config_is_defaults),
        cmocka_unit_test(test_getters_accept_null),   cmocka_unit_test(test_dataset_calls_null_arguments),
        cmocka_unit_test(test_loader_null_arguments), cmocka_unit_test(test_evaluate_bad_arguments),
        cmocka_unit_test(test_config_flags),          cmocka_unit_test(test_normalization_under_loader),
        cmocka_unit_test(test_free_under_loader),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
