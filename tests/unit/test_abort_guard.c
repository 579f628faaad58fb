/*
 * test_abort_guard.c - the guard that ends a process its MPI_Abort or MPI_Finalize did not
 * (base/abort_guard.h), each case in a child process whose exit code tells what happened: an armed
 * guard ends the process with its code at its deadline; a disarmed one does not; and a guard armed
 * again after a disarm is the only one left (the first, whose thread had not yet seen the disarm,
 * once ended the process at its old deadline with its old code).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/abort_guard.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Runs body in a child; its exit code (or -1 when a signal ended it). */
static int in_child(void (*body)(void))
{
    const pid_t pid = fork();
    if (pid == 0) {
        body();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void fires(void)
{
    abort_guard_arm(0.2, 7, "the test's call");
    nap(2);
}

static void disarmed(void)
{
    abort_guard_arm(0.2, 7, "the test's call");
    abort_guard_disarm();
    nap(0.6);
}

static void armed_again(void)
{
    abort_guard_arm(0.3, 7, "the first call");
    nap(0.05);
    abort_guard_disarm();
    abort_guard_arm(100, 9, "the second call"); /* at once: before the first's thread wakes */
    nap(0.8);
    abort_guard_disarm();
}

static void test_guard(void **st)
{
    (void)st;
    assert_int_equal(in_child(fires), 7);
    assert_int_equal(in_child(disarmed), 0);
    assert_int_equal(in_child(armed_again), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_guard)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
