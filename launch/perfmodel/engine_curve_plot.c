/*
 * engine_curve_plot.c - the PNG of `dtrain model-perf --engine-curve SIZES --plot FILE`: one panel
 * per size, busbw against ranks (both log scales), a line for each of MPI's ring, direct and the
 * chain, and the engine's choice as open circles on whichever line it takes, so where the engine
 * leaves the best line is visible at a glance. The data is written into the script (mp_png).
 */
#include "launch/perfmodel/engine_curve.h"
#include "launch/perfmodel/perfmodel_plot.h"
#include "launch/plot/gnuplot.h"

#include <math.h>
#include <stdio.h>

typedef struct curve_args {
    const mp_curve *c;
    int nc;
    const hm_net *net;
} curve_args;

static void curve_script(FILE *f, const char *tmp, const void *ud)
{
    const curve_args *a = ud;
    const int cols = a->nc > 1 ? 2 : 1, rows = (a->nc + cols - 1) / cols;
    double xlo = INFINITY, xhi = -INFINITY;
    for (int i = 0; i < a->nc; i++) {
        fprintf(f, "$C%d << EOD\n", i);
        for (int k = 0; k < a->c[i].n; k++) {
            if (a->c[i].ranks[k] < 2) continue; /* one rank moves nothing: no busbw to draw */
            xlo = fmin(xlo, a->c[i].ranks[k]), xhi = fmax(xhi, a->c[i].ranks[k]);
            fprintf(f, "%d %.9g %.9g %.9g %.9g\n", a->c[i].ranks[k], a->c[i].busbw[HM_RING][k] / 1e9,
                    a->c[i].busbw[HM_DIRECT][k] / 1e9, a->c[i].busbw[HM_CHAIN][k] / 1e9,
                    a->c[i].busbw[HM_ENGINE][k] / 1e9);
        }
        fprintf(f, "EOD\n");
    }
    /* Small on purpose: the PNG is committed to the docs. */
    fprintf(f,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size %d,%d font ',9' }"
            " else { set terminal png size %d,%d }\n",
            cols * 480, 40 + rows * 300, cols * 480, 40 + rows * 300);
    fprintf(f, "set termoption noenhanced\nset output ");
    gnuplot_quoted(f, tmp);
    fprintf(f, "\nset grid\nset logscale x 2\nset logscale y 10\nset format y '%%g'\nset key top right font ',8'\n"
               "set xlabel 'ranks'\nset ylabel 'busbw GB/s (modelled)'\n");
    mp_log_axis_range(f, 'x', xlo, xhi); /* every panel: one --world is a single scale */
    fprintf(f,
            "set multiplot layout %d,%d title 'the engine allreduce, modelled: %d ranks a node, %.4g GB/s a node "
            "between nodes, %.4g GB/s a rank within; circles: the engine''s choice'\n",
            rows, cols, a->net->per_node, a->net->inter.bw / 1e9, a->net->intra.bw / 1e9);
    for (int i = 0; i < a->nc; i++) {
        char sz[32];
        /* The panel's busbw as drawn (a log axis shows only values above 0): one value at every
         * point, a single scale where the lines meet, is given its range too. */
        double ylo = INFINITY, yhi = -INFINITY;
        for (int k = 0; k < a->c[i].n; k++) {
            for (int m = 0; a->c[i].ranks[k] >= 2 && m <= HM_ENGINE; m++) {
                const double v = a->c[i].busbw[m][k] / 1e9;
                if (v > 0 && isfinite(v)) ylo = fmin(ylo, v), yhi = fmax(yhi, v);
            }
        }
        mp_log_axis_range(f, 'y', ylo, yhi);
        fprintf(f, "set title ");
        gnuplot_quoted(f, mp_size_text(a->c[i].bytes, sz, sizeof sz));
        fprintf(f,
                "\nplot $C%d using 1:2 with lines lw 2 lc rgb '#7f7f7f' title 'MPI ring',"
                " $C%d using 1:3 with lines lw 2 lc rgb '#1f77b4' title 'direct',"
                " $C%d using 1:4 with lines lw 2 lc rgb '#d62728' title 'chain',"
                " $C%d using 1:5 with points pt 6 ps 1.3 lc rgb '#000000' title 'engine'\n",
                i, i, i, i);
    }
    fprintf(f, "unset multiplot\nset output\n");
}

int mp_curve_plot(const char *path, const mp_curve *curves, int ncurves, const hm_net *net)
{
    const curve_args a = {curves, ncurves, net};
    return mp_png(path, curve_script, &a);
}
