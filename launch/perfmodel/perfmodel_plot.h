/*
 * perfmodel_plot.h - `dtrain model-perf --plot FILE.png`: efficiency and the best bucket cap
 * against ranks, one curve per model, drawn by gnuplot (launch/plot/gnuplot.h).
 */
#ifndef DT_LAUNCH_PERFMODEL_PLOT_H
#define DT_LAUNCH_PERFMODEL_PLOT_H

#include "launch/perfmodel/perfmodel.h"

#include <stdio.h>

#define MP_MAX_POINTS 32

typedef struct mp_series {
    char name[256];
    int n;
    double grad_mb; /* the gradients' size: where "one bucket" (a best cap of 0) is drawn */
    int ranks[MP_MAX_POINTS];
    double eff[MP_MAX_POINTS], best_eff[MP_MAX_POINTS], best_mb[MP_MAX_POINTS];
} mp_series;

/* Draws the series into the PNG at path (written beside it, then renamed). 0, or -1 after
 * printing why. */
int mp_plot(const char *path, const mp_series *s, int ns, const pm_sync *sync, const pm_net *net);

/* Writes "set Xrange" for a log-scale axis ('x' or 'y') whose points span [lo, hi]: gnuplot's own
 * range, or, when every point sits at one value (one scale, or the same best cap at every scale),
 * half and twice it. gnuplot would otherwise print "Warning: empty y range [0.25:0.25]" on stderr
 * and widen the range by 1%. */
void mp_log_axis_range(FILE *f, char axis, double lo, double hi);

/* What every model-perf plot shares: script_of(f, tmp, ud) writes a gnuplot script that draws
 * into tmp; gnuplot runs it, and a PNG there replaces path. 0, or -1 after printing why. */
int mp_png(const char *path, void (*script_of)(FILE *f, const char *tmp, const void *ud), const void *ud);

#endif
