/*
 * engine_curve.h - `dtrain model-perf --engine-curve SIZES`: the engine's host model
 * (host_model.h) over the scales, one table per bucket size of the modelled busbw of MPI's ring,
 * direct, the chain and the engine's own choice; --plot draws them against ranks.
 */
#ifndef DT_LAUNCH_ENGINE_CURVE_H
#define DT_LAUNCH_ENGINE_CURVE_H

#include "launch/perfmodel/host_model.h"

#define MP_CURVE_MAX_SIZES 8
#define MP_CURVE_MAX_POINTS 32

/* The modelled curves of one bucket size: busbw (bytes/s) per algorithm (HM_DIRECT, HM_CHAIN,
 * HM_RING, HM_ENGINE) at each scale, and the engine's pick there. */
typedef struct mp_curve {
    double bytes;
    int n;
    int ranks[MP_CURVE_MAX_POINTS];
    double busbw[HM_ENGINE + 1][MP_CURVE_MAX_POINTS];
    hm_algo pick[MP_CURVE_MAX_POINTS];
} mp_curve;

/* A size as people write it: "16 MiB", "64 KiB", "1000 bytes" (into buf). */
const char *mp_size_text(double bytes, char *buf, int n);

/* Models sizes[0..nsizes) at scales[0..nscales) (net's world is set to each), prints a table per
 * size and, with plot, writes the PNG. Returns an exit code (EXIT_OK, or EXIT_FAIL after saying
 * why). */
int mp_engine_curve(const double *sizes, int nsizes, const int *scales, int nscales, hm_net net, const char *plot);

/* Draws curves[0..ncurves) into the PNG at path (engine_curve_plot.c). 0, or -1 after printing why. */
int mp_curve_plot(const char *path, const mp_curve *curves, int ncurves, const hm_net *net);

#endif
