/*
 * straggler.h - the straggler report of `dtrain train` (straggler.c): every log interval each rank
 * says where its time per step went; rank 0 names the slowest rank when it is well behind the median
 * and the phase that makes it slow, and warns when the same rank stays behind.
 *
 * In synchronous data-parallel training every rank's wall-clock step is the same: the others wait
 * for the slowest in the gradient allreduce. So a rank is compared by its busy time, its step time
 * minus its wait for communication (the part it alone makes longer): compute (forward, backward,
 * optimizer, everything but the two waits) plus its wait for the data loader. The slowest rank's
 * own communication wait is the smallest, since the others are already there.
 */
#ifndef DT_LAUNCH_STRAGGLER_H
#define DT_LAUNCH_STRAGGLER_H

#include <stddef.h>

/* The default --straggler-threshold: a rank 20% busier than the median is reported. */
#define STRAGGLER_THRESHOLD 1.2
/* The same rank reported this many intervals in a row is named in a WARN line. */
enum { STRAGGLER_PERSIST = 3 };

/* One rank's row of the gathered W x STRAGGLER_NCOLS array: its mean seconds per step over the
 * interval. */
enum { STRAGGLER_STEP, STRAGGLER_DATA, STRAGGLER_COMM, STRAGGLER_NCOLS };

/* The phases a straggler is blamed on, in the order the line prints them. */
typedef enum straggler_phase { PHASE_COMPUTE, PHASE_DATA, PHASE_COMM, PHASE_N } straggler_phase;

/* The name of a phase: "compute", "data wait", "communication". */
const char *straggler_phase_name(straggler_phase p);

/* What rank 0 keeps from one interval to the next. */
typedef struct straggler_state {
    int rank; /* the last interval's straggler, -1 when none */
    int run;  /* the intervals in a row it has been the straggler */
} straggler_state;

/* Rank 0's verdict on one interval. */
typedef struct straggler_verdict {
    int slowest;                  /* the busiest rank (the lowest rank among equals) */
    double busy_s, median_busy_s; /* its busy seconds per step, and the median over the ranks */
    double ratio;                 /* busy_s / median_busy_s (0 when the median is 0) */
    int found;                    /* 1 when ratio > threshold: slowest is a straggler */
    straggler_phase phase;        /* the phase with the largest excess over the median */
    double phase_s, phase_median_s;
    int run;        /* the intervals in a row that rank has been the straggler (0 when none) */
    int persistent; /* 1 on the interval run reaches STRAGGLER_PERSIST: warn once per streak */
} straggler_verdict;

/* Judges one interval: rows holds world rows of STRAGGLER_NCOLS seconds per step (step, data wait,
 * communication wait), world >= 1; threshold > 1. Updates *st (start it as {-1, 0}) and fills *v.
 * Pure: no I/O. Negative or non-finite figures count as 0. */
void straggler_assess(const float *rows, int world, double threshold, straggler_state *st, straggler_verdict *v);

/* The report line (no newline) of a verdict that found a straggler on host (may be NULL), e.g.
 * "straggler: rank 1 (node3) busy 41.20 ms a step vs median 20.10 ms (2.05x): compute 40.00 ms vs
 * 19.00 ms". Writes at most n bytes. */
void straggler_line(const straggler_verdict *v, const char *host, char *buf, size_t n);

#endif
