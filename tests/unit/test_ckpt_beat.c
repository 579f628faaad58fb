/*
 * test_ckpt_beat.c - a checkpoint's blocking call (an fsync, a directory sync) runs on a thread of
 * its own while the caller says the watchdog's beat (runtime/checkpoint/ckpt_write_file.h,
 * ckpt_call_beating): a quick call returns at once (a fixed 50 ms sleep once made every save at
 * least 100 ms, 39 s of this suite's checkpoint tests), a slow one is beaten for every 50 ms of it,
 * the beat stops at the call's limit, and the call's result and errno come back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/checkpoint/ckpt_write_file.h"

#include <errno.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

typedef struct beats {
    int n;
    double last; /* when the last beat was said */
} beats;

static void count_beat(void *arg)
{
    beats *b = arg;
    b->n++;
    b->last = now_s();
}

/* The calls: each sleeps *(double *)arg seconds; the failing one then returns -1 with EIO. */
static int sleeper(void *arg)
{
    nap(*(const double *)arg);
    return 7;
}

static int failing_sleeper(void *arg)
{
    nap(*(const double *)arg);
    errno = EIO;
    return -1;
}

static void test_quick_call_returns_at_once(void **state)
{
    (void)state;
    beats b = {0, 0};
    const ckpt_beat beat = {count_beat, &b};
    double pause = 0.001;
    /* Ten in a row: the old poll slept 50 ms at least once per call (0.5 s for ten). */
    const double t0 = now_s();
    for (int i = 0; i < 10; i++) assert_int_equal(ckpt_call_beating(sleeper, &pause, &beat, 60), 7);
    const double took = now_s() - t0;
    assert_true(took < 0.25);
    assert_true(b.n >= 10); /* one beat at the start of each */
}

static void test_slow_call_is_beaten_throughout(void **state)
{
    (void)state;
    beats b = {0, 0};
    const ckpt_beat beat = {count_beat, &b};
    double pause = 0.4;
    const double t0 = now_s();
    assert_int_equal(ckpt_call_beating(sleeper, &pause, &beat, 60), 7);
    const double end = now_s();
    /* A beat at once and one every 50 ms: 8 or 9 in 0.4 s, fewer only on a starved machine (the
     * waits are at least 50 ms, so never more than 9). */
    assert_true(b.n >= 4 && b.n <= 9);
    /* ...up to the end: the last within ~50 ms of the call's end (with room for a busy host). */
    assert_true(end - b.last < 0.2);
    assert_true(end - t0 >= 0.4);
}

static void test_beat_stops_at_the_limit(void **state)
{
    (void)state;
    beats b = {0, 0};
    const ckpt_beat beat = {count_beat, &b};
    double pause = 0.4;
    const double t0 = now_s();
    assert_int_equal(ckpt_call_beating(sleeper, &pause, &beat, 0.1), 7);
    /* Beats in the first 0.1 s only: the rest of the call is silent, as a stuck sync must be. */
    assert_true(b.n >= 1 && b.n <= 4);
    assert_true(b.last - t0 < 0.2);
}

static void test_result_and_errno_come_back(void **state)
{
    (void)state;
    beats b = {0, 0};
    const ckpt_beat beat = {count_beat, &b};
    double pause = 0.06;
    errno = 0;
    assert_int_equal(ckpt_call_beating(failing_sleeper, &pause, &beat, 60), -1);
    assert_int_equal(errno, EIO);
    /* Without a beat the call runs on this thread, with the same result. */
    errno = 0;
    assert_int_equal(ckpt_call_beating(failing_sleeper, &pause, NULL, 60), -1);
    assert_int_equal(errno, EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quick_call_returns_at_once),
        cmocka_unit_test(test_slow_call_is_beaten_throughout),
        cmocka_unit_test(test_beat_stops_at_the_limit),
        cmocka_unit_test(test_result_and_errno_come_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
