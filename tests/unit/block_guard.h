/*
 * block_guard.h - for unit tests of readers that must never block (a FIFO named like a data or
 * checkpoint file): if the guarded code has not returned within the given seconds, the test
 * process says so and exits 1, instead of hanging until ctest's timeout.
 */
#ifndef DT_TEST_BLOCK_GUARD_H
#define DT_TEST_BLOCK_GUARD_H

#include <signal.h>
#include <unistd.h>

static void block_guard_fire(int sig)
{
    (void)sig;
    static const char msg[] = "a reader blocked (on a FIFO?) past the test's guard\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static inline void block_guard_start(unsigned seconds)
{
    signal(SIGALRM, block_guard_fire);
    alarm(seconds);
}

static inline void block_guard_stop(void) { alarm(0); }

#endif
