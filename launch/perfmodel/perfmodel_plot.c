/*
 * perfmodel_plot.c - the PNG of `dtrain model-perf --plot`: two panels against ranks (log 2),
 * efficiency at the chosen bucket cap (solid) and at the best one (dashed), and the best cap in MiB
 * (log 2; a best cap of 0, one bucket for everything, drawn at the gradients' size). The data is written into the script, so gnuplot reads no file.
 * mp_png, the running of gnuplot and the replacing of the file, is every model-perf plot's.
 */
#include "launch/perfmodel/perfmodel_plot.h"
#include "launch/cli.h"
#include "launch/plot/gnuplot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The best cap as drawn: a cap of 0 (one bucket) at the gradients' size. */
static double drawn_cap(const mp_series *s, int k) { return s->best_mb[k] > 0 ? s->best_mb[k] : s->grad_mb; }

void mp_log_axis_range(FILE *f, char axis, double lo, double hi)
{
    if (lo > 0 && lo == hi)
        fprintf(f, "set %crange [%.9g:%.9g]\n", axis, lo / 2, hi * 2);
    else
        fprintf(f, "set %crange [*:*]\n", axis);
}

static void mp_script(FILE *f, const char *tmp, const mp_series *s, int ns, const pm_sync *sync, const pm_net *net)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < ns; i++) {
        fprintf(f, "$D%d << EOD\n", i);
        for (int k = 0; k < s[i].n; k++) {
            const double cap = drawn_cap(&s[i], k);
            fprintf(f, "%d %.9g %.9g %.9g\n", s[i].ranks[k], s[i].eff[k], s[i].best_eff[k], cap);
            xlo = fmin(xlo, s[i].ranks[k]), xhi = fmax(xhi, s[i].ranks[k]);
            ylo = fmin(ylo, cap), yhi = fmax(yhi, cap);
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 860,640 font ',10' }"
               " else { set terminal png size 860,640 }\n");
    fprintf(f, "set termoption noenhanced\nset output ");
    gnuplot_quoted(f, tmp);
    fprintf(f, "\nset grid\nset lmargin 12\nset logscale x 2\nset key bottom left\n");
    mp_log_axis_range(f, 'x', xlo, xhi); /* both panels */
    fprintf(f,
            "set multiplot layout 2,1 title 'model-perf: %d GPUs a node, %.0f GB/s within, %.0f GB/s between nodes; "
            "solid: %g MiB buckets, dashed: the best'\n",
            net->per_node, net->intra.busbw / 1e9, net->inter.busbw / 1e9, sync->bucket_mb);
    fprintf(f, "set ylabel 'scaling efficiency'\nset yrange [0:1.05]\nunset xlabel\nplot");
    for (int i = 0; i < ns; i++) {
        fprintf(f, "%s $D%d using 1:2 with linespoints lc %d pt 7 ps 0.6 title ", i ? "," : "", i, i + 1);
        gnuplot_quoted(f, s[i].name);
        fprintf(f, ", $D%d using 1:3 with lines lc %d dt 2 notitle", i, i + 1);
    }
    fprintf(f, "\nset ylabel 'best bucket cap (MiB; one bucket: the gradients)'\nset logscale y 2\n");
    mp_log_axis_range(f, 'y', ylo, yhi);
    fprintf(f, "set xlabel 'GPUs'\nplot");
    for (int i = 0; i < ns; i++) {
        fprintf(f, "%s $D%d using 1:4 with linespoints lc %d pt 7 ps 0.6 title ", i ? "," : "", i, i + 1);
        gnuplot_quoted(f, s[i].name);
    }
    fprintf(f, "\nunset multiplot\nset output\n");
}

/* The series and settings mp_script draws, through mp_png's callback. */
typedef struct mp_plot_args {
    const mp_series *s;
    int ns;
    const pm_sync *sync;
    const pm_net *net;
} mp_plot_args;

static void mp_script_cb(FILE *f, const char *tmp, const void *ud)
{
    const mp_plot_args *a = ud;
    mp_script(f, tmp, a->s, a->ns, a->sync, a->net);
}

int mp_plot(const char *path, const mp_series *s, int ns, const pm_sync *sync, const pm_net *net)
{
    const mp_plot_args a = {s, ns, sync, net};
    return mp_png(path, mp_script_cb, &a);
}

int mp_png(const char *path, void (*script_of)(FILE *f, const char *tmp, const void *ud), const void *ud)
{
    char exe[4200], tmp[4300];
    if (gnuplot_find(exe, sizeof exe) != 0) {
        cli_error("model-perf: gnuplot is not on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox)");
        return -1;
    }
    if (gnuplot_temp_path(tmp, sizeof tmp, path) != 0) {
        if (errno == ENAMETOOLONG)
            cli_error("model-perf: --plot '%.200s...' is too long a name", path);
        else
            cli_error("model-perf: cannot make the temporary file %s for %s: %s", tmp, path, strerror(errno));
        return -1;
    }
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    if (!f) {
        cli_error("model-perf: out of memory");
        unlink(tmp);
        return -1;
    }
    script_of(f, tmp, ud);
    int rc = fclose(f) == 0 ? 0 : -1;
    if (rc) cli_error("model-perf: out of memory");
    if (!rc) rc = gnuplot_run("model-perf", exe, script, len);
    if (!rc && !gnuplot_is_png(tmp)) {
        cli_error("model-perf: gnuplot exited 0 but %s is not a PNG; not replacing %s", tmp, path);
        rc = -1;
    }
    if (!rc && rename(tmp, path) != 0) {
        cli_error("model-perf: cannot move %s to %s: %s", tmp, path, strerror(errno));
        rc = -1;
    }
    if (rc)
        unlink(tmp);
    else
        printf("model-perf: wrote %s\n", path);
    free(script);
    return rc;
}
