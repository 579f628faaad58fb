/*
 * test_lr_schedule.c - launch/train/lr_schedule.c: the rate at given steps against the formulas of
 * lr_schedule.h (constant, cosine, linear, step with milestones in steps and epochs, warmup, the
 * floor), a schedule placed at a resumed run's data position, and every parse and check error with
 * the part it names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/train/lr_schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define PI 3.14159265358979323846

static lr_schedule parse_ok(const char *spec, long spe)
{
    lr_schedule s;
    char err[256] = "";
    if (lr_schedule_parse(spec, spe, &s, err, sizeof err)) fail_msg("'%s' failed: %s", spec, err);
    return s;
}

static void near(double got, double want)
{
    if (!(fabs(got - want) <= 1e-12 * fabs(want) + 1e-15)) fail_msg("lr %.17g, expected %.17g", got, want);
}

static void test_constant(void **st)
{
    (void)st;
    lr_schedule s = parse_ok("constant", 0);
    assert_int_equal(s.kind, LR_CONSTANT);
    assert_string_equal(lr_schedule_name(&s), "constant");
    for (long k = 0; k < 10; k++) near(lr_at(&s, 0.1, 0.001, k, 10, 0), 0.1);
    /* warmup: base * (s + 1) / W, then base */
    near(lr_at(&s, 0.1, 0, 0, 10, 4), 0.1 * 1 / 4);
    near(lr_at(&s, 0.1, 0, 2, 10, 4), 0.1 * 3 / 4);
    near(lr_at(&s, 0.1, 0, 3, 10, 4), 0.1);
    near(lr_at(&s, 0.1, 0, 9, 10, 4), 0.1);
}

static void test_cosine(void **st)
{
    (void)st;
    lr_schedule s = parse_ok("cosine", 0);
    const double base = 0.4, mn = 0.01;
    const long total = 100;
    near(lr_at(&s, base, mn, 0, total, 0), base);
    near(lr_at(&s, base, mn, 50, total, 0), mn + (base - mn) * 0.5);
    near(lr_at(&s, base, mn, 25, total, 0), mn + (base - mn) * (1 + cos(PI * 25 / 100)) / 2);
    near(lr_at(&s, base, mn, 99, total, 0), mn + (base - mn) * (1 + cos(PI * 99 / 100)) / 2);
    /* past the end: the last step's rate */
    near(lr_at(&s, base, mn, 150, total, 0), lr_at(&s, base, mn, 99, total, 0));
    /* with 10 warmup steps: ramp, then cosine over the 90 that remain */
    near(lr_at(&s, base, mn, 4, total, 10), base * 5 / 10);
    near(lr_at(&s, base, mn, 9, total, 10), base);
    near(lr_at(&s, base, mn, 10, total, 10), base);
    near(lr_at(&s, base, mn, 55, total, 10), mn + (base - mn) * (1 + cos(PI * 45 / 90)) / 2);
    /* monotone after warmup, never below the floor */
    double prev = 1e9;
    for (long k = 10; k < total; k++) {
        const double lr = lr_at(&s, base, mn, k, total, 10);
        assert_true(lr <= prev && lr >= mn);
        prev = lr;
    }
}

static void test_linear(void **st)
{
    (void)st;
    lr_schedule s = parse_ok("linear", 0);
    const double base = 1.0, mn = 0.1;
    near(lr_at(&s, base, mn, 0, 10, 0), base);
    near(lr_at(&s, base, mn, 5, 10, 0), base + (mn - base) * 5 / 10);
    /* PyTorch's LinearLR over the run: the floor comes after the last step, never at it */
    near(lr_at(&s, base, mn, 9, 10, 0), base + (mn - base) * 9 / 10);
    assert_true(lr_at(&s, base, 0.0, 9, 10, 0) > 0); /* to --min-lr 0: the last step still moves */
    /* warmup 3 of 13: linear over the last 10 */
    near(lr_at(&s, base, mn, 0, 13, 3), base / 3);
    near(lr_at(&s, base, mn, 3, 13, 3), base);
    near(lr_at(&s, base, mn, 12, 13, 3), base + (mn - base) * 9 / 10);
    /* a schedule of one step after warmup stays at base */
    near(lr_at(&s, base, mn, 3, 4, 3), base);
}

static void test_step(void **st)
{
    (void)st;
    lr_schedule s = parse_ok("step:30,60,90:0.1", 0);
    assert_int_equal(s.kind, LR_STEP);
    assert_int_equal(s.n, 3);
    near(lr_at(&s, 1.0, 0, 0, 100, 0), 1.0);
    near(lr_at(&s, 1.0, 0, 29, 100, 0), 1.0);
    near(lr_at(&s, 1.0, 0, 30, 100, 0), 0.1);
    near(lr_at(&s, 1.0, 0, 59, 100, 0), 0.1);
    near(lr_at(&s, 1.0, 0, 60, 100, 0), pow(0.1, 2));
    near(lr_at(&s, 1.0, 0, 99, 100, 0), pow(0.1, 3));
    /* the floor */
    near(lr_at(&s, 1.0, 0.005, 99, 100, 0), 0.005);
    /* epochs: 30e at 25 steps per epoch = step 750; steps and epochs mix */
    s = parse_ok("step:30e,1000,60e:0.5", 25);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.milestone[0], 750);
    assert_int_equal(s.milestone[1], 1000);
    assert_int_equal(s.milestone[2], 1500);
    /* the epochs they were given in, for placing them from a resumed run's data position */
    assert_true(s.epoch[0] == 30 && s.epoch[1] == 0 && s.epoch[2] == 60);
    near(lr_at(&s, 0.2, 0, 749, 2000, 0), 0.2);
    near(lr_at(&s, 0.2, 0, 750, 2000, 0), 0.1);
    near(lr_at(&s, 0.2, 0, 1000, 2000, 0), 0.05);
    near(lr_at(&s, 0.2, 0, 1999, 2000, 0), 0.025);
    /* warmup multiplies, milestones count from step 0 */
    s = parse_ok("step:2:0.5", 0);
    near(lr_at(&s, 1.0, 0, 0, 10, 4), 1.0 * 1 / 4);
    near(lr_at(&s, 1.0, 0, 2, 10, 4), 0.5 * 3 / 4);
    near(lr_at(&s, 1.0, 0, 5, 10, 4), 0.5);
    /* gamma 1 is allowed (no change) */
    s = parse_ok("step:5:1", 0);
    near(lr_at(&s, 0.3, 0, 9, 10, 0), 0.3);
}

/* Unplaced, the rate is the formula at the integer step, bit for bit (what runs pinned before the
 * placement existed). */
static void test_unplaced_bits(void **st)
{
    (void)st;
    lr_schedule c = parse_ok("cosine", 0), l = parse_ok("linear", 0);
    const double base = 0.1, mn = 0.001;
    const long T = 80, W = 7;
    assert_int_equal(lr_schedule_total(&c, T), T);
    for (long k = 0; k < T; k++) {
        const double warm = k < W ? (double)(k + 1) / (double)W : 1.0;
        const double t = (double)(k - W), n = (double)(T - W);
        const double cw = k < W ? base * warm : mn + (base - mn) * (1.0 + cos(PI * t / n)) / 2.0;
        const double lw = k < W ? base * warm : base + (mn - base) * t / n;
        assert_true(lr_at(&c, base, mn, k, T, W) == cw);
        assert_true(lr_at(&l, base, mn, k, T, W) == lw);
        assert_true(lr_at(&c, base, mn, k, T, 0) == mn + (base - mn) * (1.0 + cos(PI * (double)k / (double)T)) / 2.0);
    }
}

/* An --epochs run of 2 epochs at 40 steps an epoch (80 steps), checkpointed at step 40 and resumed
 * at half the global batch: the position is step 80 of 160 of the new batch, the run ends at its
 * step 120. The rate continues the first run's at equal data positions, to the end of epoch 2. */
static void test_placed(void **st)
{
    (void)st;
    const double base = 0.1, mn = 0.0;
    lr_schedule ref = parse_ok("cosine", 0), s = ref;
    lr_schedule_place(&s, 40, 80.0, 160);
    assert_int_equal(lr_schedule_total(&s, 120), 160);
    /* Before the fix the resumed step 40 took the rate of 40/120 of the cosine: 0.075, not 0.05. */
    near(lr_at(&s, base, mn, 40, 120, 0), 0.05);
    for (long k = 0; k < 40; k++) {
        /* step 40 + 2k here starts where step 40 + k of the first run did */
        near(lr_at(&s, base, mn, 40 + 2 * k, 120, 0), lr_at(&ref, base, mn, 40 + k, 80, 0));
        /* and every step is the one a run at the new batch from step 0 takes there */
        near(lr_at(&s, base, mn, 40 + 2 * k + 1, 120, 0), lr_at(&ref, base, mn, 80 + 2 * k + 1, 160, 0));
    }
    /* the last step is the new batch's last, just above the floor (reached after it) */
    near(lr_at(&s, base, mn, 119, 120, 0), lr_at(&ref, base, mn, 159, 160, 0));
    assert_true(lr_at(&s, base, mn, 119, 120, 0) < lr_at(&ref, base, mn, 79, 80, 0));
    /* Warmup counts the schedule's steps: resumed in warmup at step 4 (step 8 of 160 at the half
     * batch, 152 steps to go), 20 warmup steps there ramp as a run at that batch from step 0 does
     * (each step's factor is where its data ends, so at equal positions a step of the first run's
     * 10 ends half a step of its own later), and after it the linear decay continues the first
     * run's at equal data positions. */
    lr_schedule lin = parse_ok("linear", 0), lp = lin;
    lr_schedule_place(&lp, 4, 8.0, 160);
    for (long k = 0; k < 152; k++) near(lr_at(&lp, base, mn, 4 + k, 156, 20), lr_at(&lin, base, mn, 8 + k, 160, 20));
    for (long k = 6; k < 76; k++) near(lr_at(&lp, base, mn, 4 + 2 * k, 156, 20), lr_at(&lin, base, mn, 4 + k, 80, 10));
    /* A position inside a step (a resume mid-epoch at a batch that does not divide it): the steps
     * are spread over what is left, the warmup factor stops at 1, the last step stays above 0. */
    lr_schedule_place(&lp, 3, 9.5, 100);
    near(lr_at(&lp, base, mn, 3, 50, 10), base);
    double prev = 1e9;
    for (long k = 3; k < 50; k++) {
        const double lr = lr_at(&lp, base, 0.0, k, 50, 10);
        assert_true(lr <= prev && lr > 0);
        prev = lr;
    }
}

static void expect_parse_error(const char *spec, long spe, const char *must)
{
    lr_schedule s;
    char err[256] = "";
    assert_int_equal(lr_schedule_parse(spec, spe, &s, err, sizeof err), -1);
    if (!strstr(err, must)) fail_msg("error for '%s': '%s' lacks '%s'", spec ? spec : "(null)", err, must);
}

static void test_parse_errors(void **st)
{
    (void)st;
    expect_parse_error(NULL, 0, "empty");
    expect_parse_error("", 0, "empty");
    expect_parse_error("cosin", 0, "unknown schedule 'cosin'");
    expect_parse_error("exp", 0, "use constant, cosine, linear or step:M1,M2,...:GAMMA");
    expect_parse_error("cosine:10", 0, "'cosine' takes no arguments (':10' after it)");
    expect_parse_error("linearx", 0, "'linear' takes no arguments");
    expect_parse_error("constant ", 0, "'constant' takes no arguments");
    expect_parse_error("step", 0, "'step' needs milestones and a factor");
    expect_parse_error("step:", 0, "needs milestones and a factor");
    expect_parse_error("step:30", 0, "needs milestones and a factor");
    expect_parse_error("step::0.1", 0, "needs milestones and a factor");
    expect_parse_error("step:30:", 0, "factor '' is not a number");
    expect_parse_error("step:30:abc", 0, "factor 'abc' is not a number");
    expect_parse_error("step:30:0.1x", 0, "factor '0.1x' is not a number");
    /* The grammar of every other number of a flag (parse.h): no hex, no leading blank. */
    expect_parse_error("step:30:0x1p-1", 0, "factor '0x1p-1' is not a number");
    expect_parse_error("step:30: 0.5", 0, "factor ' 0.5' is not a number");
    expect_parse_error("step:30:nan", 0, "factor 'nan' is not a number");
    expect_parse_error("step:30:0", 0, "factor 0 must be in (0, 1]");
    expect_parse_error("step:30:1.5", 0, "factor 1.5 must be in (0, 1]");
    expect_parse_error("step:30:-0.1", 0, "factor -0.1 must be in (0, 1]");
    expect_parse_error("step:3x:0.1", 0, "milestone '3x' is not a whole number of steps or epochs (30 or 30e)");
    expect_parse_error("step:30,-5:0.1", 0, "milestone '-5' is not a whole number");
    expect_parse_error("step:e:0.1", 0, "milestone 'e' is not a whole number");
    expect_parse_error("step:3.5:0.1", 0, "milestone '3.5' is not a whole number");
    expect_parse_error("step:30,,60:0.1", 0, "an empty milestone");
    expect_parse_error("step:30,:0.1", 0, "an empty milestone");
    expect_parse_error("step:,30:0.1", 0, "an empty milestone");
    expect_parse_error("step:0,30:0.1", 0, "milestone '0' is at the start of the run");
    expect_parse_error("step:60,30:0.1", 0, "milestone '30' (step 30) is not after the one before it (step 60)");
    expect_parse_error("step:30,30:0.1", 0, "is not after the one before it");
    expect_parse_error("step:2e,40:0.1", 25, "milestone '40' (step 40) is not after the one before it (step 50)");
    expect_parse_error("step:30e:0.1", 0, "milestone '30e' is in epochs, but the epoch length in steps is not known");
    expect_parse_error("step:99999999999999999999:0.1", 0, "is too large");
    expect_parse_error("step:9223372036854775807e:0.1", 2, "(x 2 steps per epoch) is too large");
    expect_parse_error("step:30:60:0.1", 0, "has more than two parts");
    char many[1024] = "step:";
    for (int i = 1; i <= LR_MAX_MILESTONES + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%d,", i);
    strcpy(many + strlen(many) - 1, ":0.5");
    expect_parse_error(many, 0, "more than 64 milestones");
}

static void expect_check_error(double base, double mn, long warm, long total, const char *must)
{
    lr_schedule s = parse_ok("cosine", 0);
    char err[256] = "";
    assert_int_equal(lr_schedule_check(&s, base, mn, warm, total, err, sizeof err), -1);
    if (!strstr(err, must)) fail_msg("check error '%s' lacks '%s'", err, must);
}

static void test_check(void **st)
{
    (void)st;
    lr_schedule s = parse_ok("cosine", 0);
    char err[256];
    assert_int_equal(lr_schedule_check(&s, 0.1, 0, 0, 10, err, sizeof err), 0);
    assert_int_equal(lr_schedule_check(&s, 0.1, 0.1, 9, 10, err, sizeof err), 0);
    expect_check_error(0, 0, 0, 10, "--lr 0 must be a positive number");
    expect_check_error(NAN, 0, 0, 10, "must be a positive number");
    expect_check_error(0.1, -1, 0, 10, "--min-lr -1 must be from 0 to --lr (0.1)");
    expect_check_error(0.1, 0.2, 0, 10, "--min-lr 0.2 must be from 0 to --lr");
    expect_check_error(0.1, 0, -1, 10, "--warmup-steps -1 must be from 0 to 9");
    expect_check_error(0.1, 0, 10, 10,
                       "--warmup-steps 10 must be from 0 to 9 (fewer than the run's 10 optimizer "
                       "steps, so the cosine schedule");
    expect_check_error(0.1, 0, 0, 0, "the run has 0 optimizer steps");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant),      cmocka_unit_test(test_cosine),       cmocka_unit_test(test_linear),
        cmocka_unit_test(test_step),          cmocka_unit_test(test_parse_errors), cmocka_unit_test(test_check),
        cmocka_unit_test(test_unplaced_bits), cmocka_unit_test(test_placed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
