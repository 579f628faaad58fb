/*
 * test_api_reducer_args.c - the reducer and buffer calls of include/dtrain/reducer.h given a bad
 * argument: dt_reducer_defaults(NULL) is a no-op as every other *_defaults. One process: a world
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
        cmocka_unit_test(test_reducer_defaults_null),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
