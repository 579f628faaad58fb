/*
 * clock.h - seconds on the monotonic clock, for deadlines and timings inside dtrain.
 */
#ifndef DT_BASE_CLOCK_H
#define DT_BASE_CLOCK_H

#include <time.h>

static inline double clock_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
