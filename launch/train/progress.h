/*
 * progress.h - the progress line of `dtrain train` on a terminal (progress.c): one line on rank
 * 0's stdout, redrawn in place ("\r", ESC[K) at most about 10 times a second, with the step out
 * of the total, the epoch, the samples per second (smoothed), the time left and the loss. The
 * step lines stay permanent lines: the line is erased before each one and redrawn after.
 */
#ifndef DT_LAUNCH_PROGRESS_H
#define DT_LAUNCH_PROGRESS_H

#include <stdio.h>

/* --progress: auto draws the line when stdout is a terminal and TERM is not "dumb". */
typedef enum progress_mode { PROGRESS_AUTO, PROGRESS_ALWAYS, PROGRESS_NEVER } progress_mode;

typedef struct progress {
    FILE *out;                      /* NULL: no line (another rank, not a terminal, --progress never, --quiet) */
    long total;                     /* the run's last step */
    double samples_per_step;        /* over all ranks */
    int drawn;                      /* the line is on the screen now */
    double last_draw, last_t, rate; /* the last draw's time, the rate's last sample, samples/s (0: none yet) */
    long last_step;
    double loss; /* rank 0's loss per sample, smoothed (< 0: none yet) */
} progress;

/* Whether mode draws the line on out: ALWAYS yes, NEVER no, AUTO when out is a terminal, TERM
 * is set and not "dumb", and the process is not under Open MPI's mpirun (whose ranks' stdout is
 * a pseudo-terminal wherever mpirun's own output goes). */
int progress_wanted(progress_mode mode, FILE *out);
/* Starts the line on out (NULL: every call after this does nothing) for steps first_step ..
 * total, now in seconds (clock_now_s). */
void progress_start(progress *p, FILE *out, long first_step, long total, double samples_per_step, double now);
/* After `step` steps (epoch: the epochs done), rank 0's loss per sample in the last one: the
 * figures updated, and the line redrawn when 0.1 s passed since the last draw. */
void progress_step(progress *p, long step, double epoch, double loss, double now);
/* Erases the line, so that a permanent line can be printed in its place (the next
 * progress_step redraws it). */
void progress_clear(progress *p);

#endif
