/*
 * abort_guard.c - ends a process that MPI_Abort did not end (see abort_guard.h).
 */
#include "base/abort_guard.h"
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct guard_args {
    double seconds;
    int code;
    const char *what;
    unsigned long gen; /* which arming this guard is: a later one (after a disarm) is not it */
} guard_args;

/* Process-wide by nature: one process ends once, whichever thread asks first. The lock and the
 * condition (on the monotonic clock: a stepped wall clock neither fires nor delays the guard) let
 * abort_guard_disarm stop a guard whose call returned. */
static atomic_int armed;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t guard_cond;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static int guard_cancelled;
static int guard_by_alarm;
static unsigned long guard_gen; /* the armings so far: each guard ends only its own */

static void guard_cond_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&guard_cond, &a);
    pthread_condattr_destroy(&a);
}

static void *guard_thread(void *arg)
{
    const guard_args g = *(const guard_args *)arg;
    free(arg);
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += (time_t)g.seconds;
    end.tv_nsec += (long)((g.seconds - (double)(time_t)g.seconds) * 1e9);
    if (end.tv_nsec >= 1000000000L) end.tv_sec++, end.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&guard_lock);
    int rc = 0;
    while (!guard_cancelled && g.gen == guard_gen && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&guard_cond, &guard_lock, &end);
    if (guard_cancelled || g.gen != guard_gen) { /* disarmed, maybe armed again since: not ours */
        pthread_mutex_unlock(&guard_lock);
        return NULL;
    }
    /* Still holding the lock: a disarm now waits, and the process ends as decided. */
    log_msg(LOG_LEVEL_ERROR,
            "%s has not ended this process within %.0f s (its launcher or a peer cannot be reached: "
            "is this node's network down?); exiting with code %d so that it does not hang",
            g.what, g.seconds, g.code);
    _exit(g.code);
}

_Noreturn void abort_guard_wait(void)
{
    /* Until the process ends (the other caller's MPI_Abort, or its guard). Only a disarm wakes
     * this: the guarded call (MPI_Finalize) returned while this thread wanted the process to end,
     * and it does so now. */
    pthread_once(&guard_once, guard_cond_init);
    pthread_mutex_lock(&guard_lock);
    const unsigned long gen = guard_gen;
    while (!guard_cancelled && gen == guard_gen) pthread_cond_wait(&guard_cond, &guard_lock);
    pthread_mutex_unlock(&guard_lock);
    log_msg(LOG_LEVEL_ERROR, "a job abort was asked while MPI_Finalize ran; exiting with code 1");
    _exit(1);
}

int abort_guard_arm(double seconds, int code, const char *what)
{
    pthread_once(&guard_once, guard_cond_init);
    /* Armed and numbered under the lock: a losing caller's abort_guard_wait sees this arming. */
    pthread_mutex_lock(&guard_lock);
    if (atomic_exchange(&armed, 1)) {
        pthread_mutex_unlock(&guard_lock);
        return 1;
    }
    guard_cancelled = 0;
    guard_by_alarm = 0;
    const unsigned long gen = ++guard_gen;
    pthread_mutex_unlock(&guard_lock);
    guard_args *g = malloc(sizeof *g);
    pthread_t t;
    pthread_attr_t attr;
    if (g) {
        g->seconds = seconds;
        g->code = code;
        g->what = what;
        g->gen = gen;
    }
    if (!g || pthread_attr_init(&attr) != 0) {
        free(g);
        guard_by_alarm = 1;
        alarm((unsigned)seconds + 1); /* no thread: SIGALRM's default action ends the process */
        return 0;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, guard_thread, g) != 0) {
        free(g);
        guard_by_alarm = 1;
        alarm((unsigned)seconds + 1);
    }
    pthread_attr_destroy(&attr);
    return 0;
}

void abort_guard_disarm(void)
{
    pthread_once(&guard_once, guard_cond_init);
    pthread_mutex_lock(&guard_lock);
    guard_cancelled = 1;
    if (guard_by_alarm) alarm(0);
    pthread_cond_broadcast(&guard_cond);
    atomic_store(&armed, 0);
    pthread_mutex_unlock(&guard_lock);
}
