/*
 * test_straggler.c - launch/train/straggler.c: the slowest rank by busy time (step minus communication
 * wait), the median for odd and even worlds, the threshold, the phase with the largest excess, the
 * streak that makes a persistent straggler and its reset, bad figures, and the line's text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/train/straggler.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Row k of rows: step, data wait, communication wait, in milliseconds. */
static void set_row(float *rows, int k, double step_ms, double data_ms, double comm_ms)
{
    rows[k * STRAGGLER_NCOLS + STRAGGLER_STEP] = (float)(step_ms / 1e3);
    rows[k * STRAGGLER_NCOLS + STRAGGLER_DATA] = (float)(data_ms / 1e3);
    rows[k * STRAGGLER_NCOLS + STRAGGLER_COMM] = (float)(comm_ms / 1e3);
}

#define ASSERT_MS(x, ms) assert_true(fabs((x)*1e3 - (ms)) < 1e-3)

/* Synchronous ranks: the same wall step; rank 2 computes for 30 ms, the others for 10 ms and wait 20 ms for it. */
static void test_compute_straggler(void **unused)
{
    (void)unused;
    float rows[3 * STRAGGLER_NCOLS];
    set_row(rows, 0, 31, 1, 20);
    set_row(rows, 1, 31, 1, 20);
    set_row(rows, 2, 31, 1, 0);
    straggler_state st = {-1, 0};
    straggler_verdict v;
    straggler_assess(rows, 3, STRAGGLER_THRESHOLD, &st, &v);
    assert_int_equal(v.slowest, 2);
    assert_true(v.found);
    ASSERT_MS(v.busy_s, 31);
    ASSERT_MS(v.median_busy_s, 11);
    assert_true(fabs(v.ratio - 31.0 / 11.0) < 1e-4);
    assert_int_equal(v.phase, PHASE_COMPUTE);
    ASSERT_MS(v.phase_s, 30);
    ASSERT_MS(v.phase_median_s, 10);
    assert_int_equal(v.run, 1);
    assert_false(v.persistent);
    char line[256];
    straggler_line(&v, "node7", line, sizeof line);
    assert_string_equal(line, "straggler: rank 2 (node7) busy 31.00 ms a step vs median 11.00 ms (2.82x): compute "
                              "30.00 ms vs 10.00 ms");
    straggler_line(&v, NULL, line, sizeof line);
    assert_non_null(strstr(line, "straggler: rank 2 busy 31.00 ms"));
}

/* An even world: the median is the mean of the middle two; the gap is in the data wait. */
static void test_data_straggler_even(void **unused)
{
    (void)unused;
    float rows[4 * STRAGGLER_NCOLS];
    set_row(rows, 0, 40, 1, 19);
    set_row(rows, 1, 40, 18, 2);
    set_row(rows, 2, 40, 3, 17);
    set_row(rows, 3, 40, 1, 19);
    straggler_state st = {-1, 0};
    straggler_verdict v;
    straggler_assess(rows, 4, 1.2, &st, &v);
    assert_int_equal(v.slowest, 1);
    assert_true(v.found);
    ASSERT_MS(v.busy_s, 38);
    ASSERT_MS(v.median_busy_s, 22); /* busy 21, 38, 23, 21: (21 + 23) / 2 */
    assert_int_equal(v.phase, PHASE_DATA);
    ASSERT_MS(v.phase_s, 18);
    ASSERT_MS(v.phase_median_s, 2);
    char line[256];
    straggler_line(&v, "", line, sizeof line);
    assert_non_null(strstr(line, ": data wait 18.00 ms vs 2.00 ms"));
}

/* At or under the threshold nothing is reported and a streak ends; one rank is never a straggler. */
static void test_threshold_and_one_rank(void **unused)
{
    (void)unused;
    float rows[2 * STRAGGLER_NCOLS];
    set_row(rows, 0, 22, 0, 10);
    set_row(rows, 1, 22, 0, 0); /* busy 12 vs 22: median 17, ratio 1.29 */
    straggler_state st = {1, 2};
    straggler_verdict v;
    straggler_assess(rows, 2, 1.3, &st, &v);
    assert_int_equal(v.slowest, 1);
    assert_false(v.found);
    assert_int_equal(st.rank, -1);
    assert_int_equal(st.run, 0);
    straggler_assess(rows, 2, 1.25, &st, &v);
    assert_true(v.found);
    assert_int_equal(v.run, 1);
    straggler_assess(rows, 1, 1.2, &st, &v);
    assert_false(v.found);
    /* Equal ranks: the lowest rank is the busiest, ratio 1. */
    set_row(rows, 1, 22, 0, 10);
    straggler_assess(rows, 2, 1.2, &st, &v);
    assert_int_equal(v.slowest, 0);
    assert_false(v.found);
    assert_true(fabs(v.ratio - 1) < 1e-9);
}

/* The same rank three intervals in a row: persistent once, on the third; another rank restarts the count. */
static void test_persistence(void **unused)
{
    (void)unused;
    float rows[3 * STRAGGLER_NCOLS];
    straggler_state st = {-1, 0};
    straggler_verdict v;
    const int who[] = {1, 1, 1, 1, 2, 2, 2};
    const int run[] = {1, 2, 3, 4, 1, 2, 3};
    const int persistent[] = {0, 0, 1, 0, 0, 0, 1};
    for (int i = 0; i < 7; i++) {
        for (int k = 0; k < 3; k++) set_row(rows, k, 30, 0, k == who[i] ? 0 : 20);
        straggler_assess(rows, 3, 1.2, &st, &v);
        assert_true(v.found);
        assert_int_equal(v.slowest, who[i]);
        assert_int_equal(v.run, run[i]);
        assert_int_equal(v.persistent, persistent[i]);
    }
    /* A quiet interval ends the streak: the next report starts at 1. */
    for (int k = 0; k < 3; k++) set_row(rows, k, 30, 0, 5);
    straggler_assess(rows, 3, 1.2, &st, &v);
    assert_false(v.found);
    assert_int_equal(v.run, 0);
    for (int k = 0; k < 3; k++) set_row(rows, k, 30, 0, k == 2 ? 0 : 20);
    straggler_assess(rows, 3, 1.2, &st, &v);
    assert_int_equal(v.run, 1);
}

/* NaN, inf and negative figures count as 0; a compute time below 0 (waits over the step) is 0; all-zero rows
 * report nothing. */
static void test_bad_figures(void **unused)
{
    (void)unused;
    float rows[3 * STRAGGLER_NCOLS];
    set_row(rows, 0, 10, 0, 0);
    set_row(rows, 1, 10, 0, 0);
    set_row(rows, 2, 10, 0, 0);
    rows[0 * STRAGGLER_NCOLS + STRAGGLER_STEP] = NAN;
    rows[1 * STRAGGLER_NCOLS + STRAGGLER_COMM] = INFINITY;
    rows[2 * STRAGGLER_NCOLS + STRAGGLER_DATA] = -5.0f;
    straggler_state st = {-1, 0};
    straggler_verdict v;
    straggler_assess(rows, 3, 1.2, &st, &v);
    assert_true(isfinite(v.ratio));
    assert_int_equal(v.slowest, 1); /* rank 0 busy 0, rank 1 busy 10 (inf comm is 0), rank 2 busy 10 */
    ASSERT_MS(v.median_busy_s, 10);
    assert_false(v.found);
    set_row(rows, 0, 5, 4, 4);
    set_row(rows, 1, 0, 0, 0);
    set_row(rows, 2, 0, 0, 0);
    straggler_assess(rows, 3, 1.2, &st, &v);
    assert_false(v.found); /* median 0: no ratio */
    assert_true(v.ratio == 0);
    ASSERT_MS(v.busy_s, 4); /* compute clamped to 0, data 4 */
}

/* A world over the stack scratch size. */
static void test_large_world(void **unused)
{
    (void)unused;
    enum { W = 200 };
    static float rows[W * STRAGGLER_NCOLS];
    for (int k = 0; k < W; k++) set_row(rows, k, 50, 0, k == 137 ? 1 : 40);
    straggler_state st = {-1, 0};
    straggler_verdict v;
    straggler_assess(rows, W, 1.2, &st, &v);
    assert_int_equal(v.slowest, 137);
    ASSERT_MS(v.median_busy_s, 10);
    ASSERT_MS(v.busy_s, 49);
    assert_int_equal(v.phase, PHASE_COMPUTE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_straggler),
        cmocka_unit_test(test_data_straggler_even),
        cmocka_unit_test(test_threshold_and_one_rank),
        cmocka_unit_test(test_persistence),
        cmocka_unit_test(test_bad_figures),
        cmocka_unit_test(test_large_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
