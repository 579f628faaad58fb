/*
 * test_api_reducer_args.c - the reducer and buffer calls of include/dtrain/reducer.h given a bad
 * argument: dt_reducer_defaults(NULL) is a no-op as every other *_defaults; a host buffer given as
 * DT_MEMORY_DEVICE is named as host memory by every dt_buffer_* call before any device work (it
 * was the CUDA backend's failure, or the build's, that spoke), whether or not this build has CUDA;
 * flags outside 0 and 1 (dt_reducer_set_sync's sync, dt_buffer_norm's across_ranks) are refused
 * with the value and what is allowed; a count past PTRDIFF_MAX bytes (a negative one converted to
 * size_t) is refused by each, where the buffer utilities ran off the buffer. One process: a world
 * of one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"

#include <string.h>

enum { N = 64 };

static dt_ctx *g_ctx;

/* s is DT_ERR_INVALID_ARG and the last error contains what. */
static void expect_invalid(dt_status s, const char *what)
{
    if (s != DT_ERR_INVALID_ARG) fail_msg("%s: status %d (%s), not DT_ERR_INVALID_ARG", what, (int)s, dt_strerror(s));
    const char *msg = dt_last_error();
    if (strstr(msg, what) == NULL) fail_msg("last error \"%s\" does not contain \"%s\"", msg, what);
}

static void test_reducer_defaults_null(void **state)
{
    (void)state;
    dt_reducer_defaults(NULL); /* a no-op, as dt_config_defaults(NULL) and the others */
    dt_reducer_config c;
    dt_reducer_defaults(&c);
    assert_int_equal(c.overlap, 1);
}

/* Every utility that takes a memory kind names a host pointer given as device memory. */
static void test_host_given_as_device(void **state)
{
    (void)state;
    float buf[N] = {0};
    int inf = -1;
    double norm = -1;
    uint64_t sum = 0;
    const char *host = "is host memory but was given as DT_MEMORY_DEVICE";
    expect_invalid(dt_buffer_unscale_check(buf, N, DT_F32, DT_MEMORY_DEVICE, 1.0f, &inf), host);
    expect_invalid(dt_buffer_unscale_check(buf, N, DT_F32, DT_MEMORY_DEVICE, 0.5f, &inf), host);
    assert_int_equal(inf, -1);
    expect_invalid(dt_buffer_scale(buf, N, DT_F32, DT_MEMORY_DEVICE, 0.5f), host);
    expect_invalid(dt_buffer_scale(buf, N, DT_F32, DT_MEMORY_DEVICE, 1.0f), host);
    expect_invalid(dt_buffer_norm(NULL, buf, N, DT_F32, DT_MEMORY_DEVICE, 0, &norm), host);
    assert_true(norm == -1);
    expect_invalid(dt_buffer_checksum(buf, sizeof buf, DT_MEMORY_DEVICE, &sum), host);
    /* And the fix is said. */
    expect_invalid(dt_buffer_scale(buf, N, DT_F32, DT_MEMORY_DEVICE, 0.5f), "give DT_MEMORY_HOST");
}

static void test_flags_outside_0_1(void **state)
{
    (void)state;
    float buf[N];
    for (int i = 0; i < N; i++) buf[i] = 1.0f;
    double norm = -1;
    expect_invalid(dt_buffer_norm(g_ctx, buf, N, DT_F32, DT_MEMORY_HOST, 2, &norm),
                   "dt_buffer_norm: across_ranks 2 must be 0");
    assert_true(norm == -1);
    expect_invalid(dt_buffer_norm(NULL, buf, N, DT_F32, DT_MEMORY_HOST, 2, &norm), "across_ranks 2 needs a context");
    assert_int_equal(dt_buffer_norm(g_ctx, buf, N, DT_F32, DT_MEMORY_HOST, 1, &norm), DT_OK);
    assert_true(norm == 8.0);
    dt_reducer *r = NULL;
    assert_int_equal(dt_reducer_create(g_ctx, buf, N, NULL, 0, NULL, &r), DT_OK);
    expect_invalid(dt_reducer_set_sync(r, 2), "dt_reducer_set_sync: sync 2 must be 0");
    expect_invalid(dt_reducer_set_sync(r, -1), "sync -1 must be 0");
    assert_int_equal(dt_reducer_set_sync(r, 0), DT_OK);
    assert_int_equal(dt_reducer_set_sync(r, 1), DT_OK);
    dt_reducer_free(r);
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

/* A count no buffer can hold: a negative count converted to size_t. The buffer utilities ran
 * over memory past the buffer until they crashed; the reducer blamed its bucket caps. */
static void test_count_past_ptrdiff_max(void **state)
{
    (void)state;
    float buf[N] = {0};
    int inf = -1;
    double norm = -1;
    uint64_t sum = 0;
    const size_t neg = (size_t)-3, f16 = (size_t)PTRDIFF_MAX / 2 + 1;
    const char *what = "than any buffer can hold (at most";
    expect_invalid(dt_buffer_unscale_check(buf, neg, DT_F32, DT_MEMORY_HOST, 1.0f, &inf), what);
    expect_invalid(dt_buffer_unscale_check(buf, f16, DT_F16, DT_MEMORY_HOST, 1.0f, &inf), what);
    expect_invalid(dt_buffer_scale(buf, neg, DT_F32, DT_MEMORY_HOST, 0.5f), what);
    expect_invalid(dt_buffer_scale(buf, neg, DT_F32, DT_MEMORY_HOST, 1.0f), what);
    expect_invalid(dt_buffer_norm(NULL, buf, neg, DT_F32, DT_MEMORY_HOST, 0, &norm), what);
    expect_invalid(dt_buffer_checksum(buf, neg, DT_MEMORY_HOST, &sum), "is more than the buffer at");
    assert_int_equal(inf, -1);
    assert_true(norm == -1 && sum == 0);
    dt_reducer *r = NULL;
    expect_invalid(dt_reducer_create(g_ctx, buf, neg, NULL, 0, NULL, &r), "dt_reducer_create: count");
    assert_null(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reducer_defaults_null),
        cmocka_unit_test(test_host_given_as_device),
        cmocka_unit_test(test_flags_outside_0_1),
        cmocka_unit_test(test_count_past_ptrdiff_max),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
