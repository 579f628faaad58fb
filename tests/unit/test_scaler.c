/*
 * test_scaler.c - the dynamic loss scaler: defaults, growth after exactly growth_interval good
 * steps, clamping at max_scale and min_scale, backoff with and without hysteresis, giving up at the
 * floor and on too many overflows in the window, a static scale, the counters, config validation
 * and the checkpoint state round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"

#include <math.h>
#include <string.h>

/* NAN and INFINITY are floats; the fields are doubles. */
#define D_NAN ((double)NAN)
#define D_INF ((double)INFINITY)

/* A dynamic scaler with small numbers that make the steps easy to count. */
static dt_scaler *make(double init, int interval, int hysteresis, double min_scale, double max_scale)
{
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    c.init_scale = init;
    c.growth_interval = interval;
    c.hysteresis = hysteresis;
    c.min_scale = min_scale;
    c.max_scale = max_scale;
    dt_scaler *s = NULL;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    assert_non_null(s);
    return s;
}

static void good(dt_scaler *s, int n)
{
    for (int i = 0; i < n; i++) assert_int_equal(dt_scaler_update(s, 0), DT_OK);
}

static void test_defaults(void **st)
{
    (void)st;
    dt_scaler_config c;
    memset(&c, 0xff, sizeof c);
    dt_scaler_defaults(&c);
    assert_int_equal(c.dynamic, 1);
    assert_true(c.init_scale == 65536.0);
    assert_true(c.growth_factor == 2.0);
    assert_true(c.backoff_factor == 0.5);
    assert_int_equal(c.growth_interval, 2000);
    assert_int_equal(c.hysteresis, 1);
    assert_true(c.min_scale == 1.0);
    assert_true(c.max_scale == 16777216.0);
    assert_int_equal(c.window, 100);
    assert_true(c.max_overflow_fraction == 0.5);
    dt_scaler *s = NULL;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    assert_true(dt_scaler_scale(s) == 65536.0f);
    assert_int_equal(dt_scaler_updates(s), 0);
    assert_int_equal(dt_scaler_skipped(s), 0);
    dt_scaler_state ss;
    dt_scaler_get_state(s, &ss);
    assert_true(ss.scale == 65536.0);
    assert_int_equal(ss.good_steps, 0);
    assert_int_equal(ss.hysteresis_left, 1);
    /* 1999 good steps keep the scale, the 2000th doubles it. */
    good(s, 1999);
    assert_true(dt_scaler_scale(s) == 65536.0f);
    good(s, 1);
    assert_true(dt_scaler_scale(s) == 131072.0f);
    dt_scaler_free(s);
    dt_scaler_free(NULL); /* a no-op */
}

static void test_growth_interval(void **st)
{
    (void)st;
    dt_scaler *s = make(8, 3, 1, 1, 1024);
    good(s, 2);
    assert_true(dt_scaler_scale(s) == 8.0f); /* not before the interval */
    good(s, 1);
    assert_true(dt_scaler_scale(s) == 16.0f); /* exactly at it */
    good(s, 2);
    assert_true(dt_scaler_scale(s) == 16.0f); /* the run restarted at the growth */
    good(s, 1);
    assert_true(dt_scaler_scale(s) == 32.0f);
    /* An overflow restarts the run: 2 good, overflow (back off to 16), 2 good: still 16. */
    good(s, 2);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 16.0f);
    good(s, 2);
    assert_true(dt_scaler_scale(s) == 16.0f);
    good(s, 1);
    assert_true(dt_scaler_scale(s) == 32.0f);
    dt_scaler_free(s);
}

static void test_growth_clamped(void **st)
{
    (void)st;
    dt_scaler *s = make(64, 1, 1, 1, 200);
    good(s, 1);
    assert_true(dt_scaler_scale(s) == 128.0f);
    good(s, 1);
    assert_true(dt_scaler_scale(s) == 200.0f); /* 256 clamped */
    good(s, 5);
    assert_true(dt_scaler_scale(s) == 200.0f);
    dt_scaler_state ss;
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.good_steps, 0);
    dt_scaler_free(s);
}

static void test_backoff(void **st)
{
    (void)st;
    dt_scaler *s = make(1024, 10, 1, 1, 65536);
    good(s, 4);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 512.0f);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 256.0f); /* hysteresis 1: every overflow backs off */
    dt_scaler_state ss;
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.good_steps, 0);
    assert_int_equal(ss.hysteresis_left, 0);
    assert_int_equal(ss.updates, 6);
    assert_int_equal(ss.skipped, 2);
    dt_scaler_free(s);

    /* Another backoff factor. */
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    c.init_scale = 1000;
    c.backoff_factor = 0.25;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 250.0f);
    dt_scaler_free(s);
}

static void test_hysteresis(void **st)
{
    (void)st;
    dt_scaler *s = make(1024, 3, 2, 1, 65536);
    dt_scaler_state ss;
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 1024.0f); /* the first overflow is tolerated */
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.hysteresis_left, 1);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 512.0f); /* the second backs off */
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.hysteresis_left, 0);
    /* Good steps short of growth do not refill the budget: the next overflow backs off at once. */
    good(s, 2);
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.hysteresis_left, 0);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 256.0f);
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.hysteresis_left, 0); /* clamped, not negative */
    /* Growth refills it: one overflow is tolerated again. */
    good(s, 3);
    assert_true(dt_scaler_scale(s) == 512.0f);
    dt_scaler_get_state(s, &ss);
    assert_int_equal(ss.hysteresis_left, 2);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 512.0f);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 256.0f);
    dt_scaler_free(s);
}

static void test_floor_gives_up(void **st)
{
    (void)st;
    dt_scaler *s = make(8, 1000, 1, 3, 65536);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 4.0f);
    good(s, 1); /* keep the overflow fraction low */
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 3.0f); /* 2 clamped at min_scale */
    good(s, 1);
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC); /* at the floor already */
    const char *e = dt_last_error();
    assert_non_null(strstr(e, "history"));
    assert_non_null(strstr(e, "8 (start), 4 (step 1), 3 (step 3)"));
    assert_non_null(strstr(e, "step 5"));
    assert_non_null(strstr(e, "3 of the last 5 updates"));
    assert_non_null(strstr(e, "--loss-scale-min"));
    assert_true(strlen(e) < 400);
    assert_true(dt_scaler_scale(s) == 3.0f);
    assert_int_equal(dt_scaler_updates(s), 5);
    assert_int_equal(dt_scaler_skipped(s), 3);
    dt_scaler_free(s);

    /* Hysteresis does not help at the floor: init_scale == min_scale fails at the first overflow. */
    s = make(2, 10, 3, 2, 65536);
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    assert_non_null(strstr(dt_last_error(), "step 1"));
    dt_scaler_free(s);
}

static void test_history_ring(void **st)
{
    (void)st;
    /* 12 growths: only the last 8 changes are quoted, after the start and "...". */
    dt_scaler *s = make(1, 1, 1, 1, 1e9);
    good(s, 12);
    assert_true(dt_scaler_scale(s) == 4096.0f);
    dt_scaler_state ss;
    dt_scaler_get_state(s, &ss);
    ss.scale = 1; /* jump to the floor, keeping the counters */
    assert_int_equal(dt_scaler_set_state(s, &ss), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    assert_non_null(strstr(dt_last_error(), "1 (restored at step 12); "));
    assert_non_null(strstr(dt_last_error(), "step 13"));
    dt_scaler_free(s);

    s = make(1, 1, 1, 1, 1e9);
    good(s, 12);
    for (int i = 0; i < 11; i++) {
        assert_int_equal(dt_scaler_update(s, 1), DT_OK);
        good(s, 1); /* grows right back (interval 1) */
        assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    }
    /* 4096 -> 2048 -> 4096 -> 2048 per loop: one net halving per loop, 11 loops: 2. */
    assert_true(dt_scaler_scale(s) == 2.0f);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK); /* 1 */
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    const char *e = dt_last_error();
    assert_non_null(strstr(e, "1 (start), ..., "));
    assert_null(strstr(e, "(step 12)")); /* fell out of the ring */
    assert_non_null(strstr(e, "1 (step 46)"));
    assert_true(strlen(e) < 400);
    dt_scaler_free(s);
}

static void test_overflow_fraction(void **st)
{
    (void)st;
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    c.window = 10;
    c.max_overflow_fraction = 0.3;
    c.init_scale = 1 << 20;
    c.growth_interval = 1000;
    dt_scaler *s = NULL;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    /* 3 overflows among good steps: allowed. */
    for (int i = 0; i < 3; i++) {
        good(s, 1);
        assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    }
    assert_true(dt_scaler_scale(s) == 131072.0f);
    good(s, 3);                                               /* 9 updates; the window holds 3 overflows */
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC); /* the 4th within 10 updates */
    const char *e = dt_last_error();
    assert_non_null(strstr(e, "step 10"));
    assert_non_null(strstr(e, "4 of the last 10 updates"));
    assert_non_null(strstr(e, "history: 1048576 (start), 524288 (step 2), 262144 (step 4), 131072 (step 6), "
                              "65536 (step 10)"));
    assert_true(strlen(e) < 400);
    dt_scaler_free(s);

    /* Overflows that slid out of the window no longer count. */
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(dt_scaler_update(s, 1), DT_OK); /* updates 1-3 */
    good(s, 7);                                                                  /* 4-10 */
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);          /* 11: update 1 left, still 3 in the window */
    good(s, 1);                                               /* 12 */
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);          /* 13: updates 2, 3 left: 2 in the window */
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);          /* 14: 3 */
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC); /* 15: 4 in 6..15 */
    assert_non_null(strstr(dt_last_error(), "4 of the last 10"));
    assert_int_equal(dt_scaler_updates(s), 15);
    assert_int_equal(dt_scaler_skipped(s), 7);
    dt_scaler_free(s);

    /* The rule counts the updates seen so far against the full window: 4 overflows right away fail
     * at the 4th; fraction 1 never gives up on the fraction. */
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    assert_non_null(strstr(dt_last_error(), "4 of the last 4 updates"));
    dt_scaler_free(s);
    c.max_overflow_fraction = 1;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    for (int i = 0; i < 15; i++) assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_true(dt_scaler_scale(s) == 32.0f);
    dt_scaler_free(s);

    /* 0.7 of 90 is 62.99999999999999 in double: 63 overflows are allowed, the 64th gives up (a
     * static scale, so that the backoffs never reach the floor). */
    c.window = 90;
    c.max_overflow_fraction = 0.7;
    c.dynamic = 0;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    for (int i = 0; i < 63; i++) assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    assert_non_null(strstr(dt_last_error(), "64 of the last 64 updates"));
    dt_scaler_free(s);
}

static void test_static(void **st)
{
    (void)st;
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    c.dynamic = 0;
    c.init_scale = 128;
    c.min_scale = 128; /* at the floor: a static scale still does not give up there */
    c.growth_interval = 1;
    c.window = 10;
    dt_scaler *s = NULL;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    good(s, 5);
    assert_true(dt_scaler_scale(s) == 128.0f);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dt_scaler_update(s, 1), DT_OK);
        assert_true(dt_scaler_scale(s) == 128.0f);
    }
    assert_int_equal(dt_scaler_updates(s), 10);
    assert_int_equal(dt_scaler_skipped(s), 5);
    /* Overflows still count toward the window: 6 of the last 10 > 0.5. */
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    assert_non_null(strstr(dt_last_error(), "6 of the last 10"));
    assert_non_null(strstr(dt_last_error(), "history: 128 (start);"));
    assert_true(dt_scaler_scale(s) == 128.0f);
    dt_scaler_free(s);
}

static void test_counters(void **st)
{
    (void)st;
    dt_scaler *s = make(1024, 5, 1, 1, 65536);
    int pattern[] = {0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0};
    long skipped = 0;
    for (int i = 0; i < 12; i++) {
        assert_int_equal(dt_scaler_update(s, pattern[i] ? 7 : 0), DT_OK); /* any nonzero is an overflow */
        skipped += pattern[i];
        assert_int_equal(dt_scaler_updates(s), i + 1);
        assert_int_equal(dt_scaler_skipped(s), skipped);
    }
    /* 1024 -> 512 (u2) -> 256 (u5) -> 512 (u10) -> 256 (u11). */
    assert_true(dt_scaler_scale(s) == 256.0f);
    dt_scaler_free(s);
}

static void expect_bad(const dt_scaler_config *c, const char *needle)
{
    dt_scaler *s = (dt_scaler *)(uintptr_t)1;
    assert_int_equal(dt_scaler_create(c, &s), DT_ERR_INVALID_ARG);
    assert_null(s);
    if (!strstr(dt_last_error(), needle)) fail_msg("'%s' not in '%s'", needle, dt_last_error());
}

static void test_bad_config(void **st)
{
    (void)st;
    dt_scaler_config c;
#define BAD(field, value, needle)                                                                                      \
    do {                                                                                                               \
        dt_scaler_defaults(&c);                                                                                        \
        c.field = value;                                                                                               \
        expect_bad(&c, needle);                                                                                        \
    } while (0)
    BAD(dynamic, 2, "dynamic 2");
    BAD(dynamic, -1, "dynamic -1");
    BAD(init_scale, 0.5, "init_scale 0.5 must be in [min_scale 1, max_scale 1.67772e+07]");
    BAD(init_scale, 3e7, "init_scale 3e+07");
    BAD(init_scale, D_NAN, "init_scale nan");
    BAD(init_scale, D_INF, "init_scale inf");
    BAD(growth_factor, 1, "loss scale growth_factor 1 must be > 1");
    BAD(growth_factor, 0.5, "growth_factor 0.5");
    BAD(growth_factor, D_NAN, "growth_factor nan");
    BAD(growth_factor, D_INF, "growth_factor inf");
    BAD(backoff_factor, 1, "backoff_factor 1 must be in (0, 1)");
    BAD(backoff_factor, 0, "backoff_factor 0 must be in (0, 1)");
    BAD(backoff_factor, -0.5, "backoff_factor -0.5");
    BAD(backoff_factor, D_NAN, "backoff_factor nan");
    BAD(growth_interval, 0, "growth_interval 0 must be >= 1");
    BAD(growth_interval, -5, "growth_interval -5");
    BAD(hysteresis, 0, "hysteresis 0 must be >= 1");
    BAD(min_scale, 0, "min_scale 0 must be > 0");
    BAD(min_scale, -1, "min_scale -1");
    BAD(min_scale, D_NAN, "min_scale nan");
    BAD(min_scale, 1e-300, "min_scale 1e-300"); /* not a normal float */
    BAD(max_scale, 0.5, "max_scale 0.5 must be in [min_scale 1,");
    BAD(max_scale, D_NAN, "max_scale nan");
    BAD(max_scale, D_INF, "max_scale inf");
    BAD(max_scale, 1e39, "max_scale 1e+39"); /* beyond a float */
    BAD(window, 0, "window 0 must be >= 1");
    BAD(window, -3, "window -3");
    BAD(max_overflow_fraction, 0, "max_overflow_fraction 0 must be in (0, 1]");
    BAD(max_overflow_fraction, 1.5, "max_overflow_fraction 1.5");
    BAD(max_overflow_fraction, D_NAN, "max_overflow_fraction nan");
#undef BAD
    /* The bounds themselves are fine. */
    dt_scaler_defaults(&c);
    c.init_scale = c.min_scale = c.max_scale = 4;
    c.growth_interval = c.hysteresis = c.window = 1;
    c.max_overflow_fraction = 1;
    c.dynamic = 0;
    dt_scaler *s = NULL;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    dt_scaler_free(s);
}

static void test_state(void **st)
{
    (void)st;
    dt_scaler *a = make(1024, 4, 3, 1, 65536);
    good(a, 3);
    assert_int_equal(dt_scaler_update(a, 1), DT_OK);
    good(a, 2);
    dt_scaler_state sa;
    dt_scaler_get_state(a, &sa);
    assert_true(sa.scale == 1024.0);
    assert_int_equal(sa.good_steps, 2);
    assert_int_equal(sa.hysteresis_left, 2);
    assert_int_equal(sa.updates, 6);
    assert_int_equal(sa.skipped, 1);

    /* A fresh scaler restored from it behaves the same from there on. */
    dt_scaler *b = make(1024, 4, 3, 1, 65536);
    assert_int_equal(dt_scaler_set_state(b, &sa), DT_OK);
    dt_scaler_state sb;
    dt_scaler_get_state(b, &sb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    for (int i = 0; i < 20; i++) {
        int inf = i % 5 == 4;
        assert_int_equal(dt_scaler_update(a, inf), dt_scaler_update(b, inf));
        assert_true(dt_scaler_scale(a) == dt_scaler_scale(b));
    }
    dt_scaler_get_state(a, &sa);
    dt_scaler_get_state(b, &sb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    assert_int_equal(sb.updates, 26);
    assert_int_equal(sb.skipped, 5);

    /* Bad states are refused and leave the scaler alone. */
    dt_scaler_state good_state = sb, bad;
#define BAD_STATE(field, value, needle)                                                                                \
    do {                                                                                                               \
        bad = good_state;                                                                                              \
        bad.field = value;                                                                                             \
        assert_int_equal(dt_scaler_set_state(b, &bad), DT_ERR_CORRUPT);                                                \
        if (!strstr(dt_last_error(), needle)) fail_msg("'%s' not in '%s'", needle, dt_last_error());                   \
        dt_scaler_get_state(b, &sb);                                                                                   \
        assert_memory_equal(&good_state, &sb, sizeof sb);                                                              \
    } while (0)
    BAD_STATE(scale, D_NAN, "scale nan");
    BAD_STATE(scale, D_INF, "scale inf");
    BAD_STATE(scale, 0.5, "scale 0.5 must be in [min_scale 1, max_scale 65536]");
    BAD_STATE(scale, 131072, "scale 131072");
    BAD_STATE(good_steps, -1, "good_steps -1");
    BAD_STATE(good_steps, 4, "good_steps 4 must be in [0, growth_interval 4)");
    BAD_STATE(hysteresis_left, -1, "hysteresis_left -1");
    BAD_STATE(hysteresis_left, 4, "hysteresis_left 4 must be in [0, hysteresis 3]");
    BAD_STATE(skipped, -1, "skipped -1");
    BAD_STATE(updates, 4, "updates 4 must be >= skipped 5");
#undef BAD_STATE
    /* The edges are accepted. */
    bad = good_state;
    bad.scale = 65536;
    bad.good_steps = 3;
    bad.hysteresis_left = 0;
    bad.updates = bad.skipped = 0;
    assert_int_equal(dt_scaler_set_state(b, &bad), DT_OK);
    good(b, 1);
    assert_true(dt_scaler_scale(b) == 65536.0f); /* growth clamped at max_scale */
    dt_scaler_get_state(b, &sb);
    assert_int_equal(sb.hysteresis_left, 3);
    dt_scaler_free(a);
    dt_scaler_free(b);
}

static void test_set_state_clears_window(void **st)
{
    (void)st;
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    c.window = 4;
    c.max_overflow_fraction = 0.5; /* at most 2 of 4 */
    c.init_scale = 1 << 20;
    dt_scaler *s = NULL;
    assert_int_equal(dt_scaler_create(&c, &s), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    dt_scaler_state ss;
    dt_scaler_get_state(s, &ss);
    assert_int_equal(dt_scaler_set_state(s, &ss), DT_OK);
    /* Without the clear the next overflow would be the 3rd of 4. */
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_OK);
    assert_int_equal(dt_scaler_update(s, 1), DT_ERR_NUMERIC);
    assert_non_null(strstr(dt_last_error(), "step 5"));
    assert_non_null(strstr(dt_last_error(), "3 of the last 3 updates"));
    dt_scaler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_growth_interval),
        cmocka_unit_test(test_growth_clamped),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_floor_gives_up),
        cmocka_unit_test(test_history_ring),
        cmocka_unit_test(test_overflow_fraction),
        cmocka_unit_test(test_static),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_set_state_clears_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
