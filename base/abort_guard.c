/*
 * abort_guard.c - ends a process that MPI_Abort did not end (see abort_guard.h).
 */
#include "base/abort_guard.h"
#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct guard_args {
    double seconds;
    int code;
    const char *what;
} guard_args;

static void *guard_thread(void *arg)
{
    const guard_args g = *(const guard_args *)arg;
    free(arg);
    struct timespec left = {(time_t)g.seconds, (long)((g.seconds - (double)(time_t)g.seconds) * 1e9)};
    while (nanosleep(&left, &left) != 0) {}
    log_msg(LOG_LEVEL_ERROR,
            "%s has not ended this process within %.0f s (its launcher or a peer cannot be reached: "
            "is this node's network down?); exiting with code %d so that it does not hang",
            g.what, g.seconds, g.code);
    _exit(g.code);
}

_Noreturn void abort_guard_wait(void)
{
    for (;;) pause();
}

int abort_guard_arm(double seconds, int code, const char *what)
{
    /* Process-wide by nature: one process ends once, whichever thread asks first. */
    static atomic_int armed;
    if (atomic_exchange(&armed, 1)) return 1;
    guard_args *g = malloc(sizeof *g);
    pthread_t t;
    pthread_attr_t attr;
    if (g) {
        g->seconds = seconds;
        g->code = code;
        g->what = what;
    }
    if (!g || pthread_attr_init(&attr) != 0) {
        free(g);
        alarm((unsigned)seconds + 1); /* no thread: SIGALRM's default action ends the process */
        return 0;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, guard_thread, g) != 0) {
        free(g);
        alarm((unsigned)seconds + 1);
    }
    pthread_attr_destroy(&attr);
    return 0;
}
