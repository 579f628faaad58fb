/*
 * cmd_plot.c - `dtrain plot METRICS.jsonl [-o OUT.png|-]`: the series of a --metrics file against
 * the step, one panel each, as a PNG drawn by gnuplot (Debian: gnuplot-nox). The records are read
 * and checked here (plot_data.c) and handed to gnuplot inline, so a damaged file is refused with
 * its line number before gnuplot runs, and gnuplot never reads the user's file itself.
 */
#include "launch/cli.h"
#include "launch/plot/gnuplot.h"
#include "launch/plot/plot_data.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "base/log.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The panels, top to bottom: the series each draws (the first one names the panel). */
static const struct panel {
    const char *ylabel;
    int series[2]; /* -1: none */
    int log_y;
    const char *key; /* where the key goes when there are two series: where the curves seldom are */
} panels[] = {
    /* clang-format off */
    {"loss", {PLOT_LOSS, PLOT_EVAL_LOSS}, 0, "top right"},
    {"accuracy", {PLOT_ACCURACY, PLOT_EVAL_ACCURACY}, 0, "bottom right"},
    {"learning rate", {PLOT_LR, -1}, 0, NULL},
    {"samples/s", {PLOT_SAMPLES_PER_S, -1}, 0, NULL},
    {"loss scale", {PLOT_LOSS_SCALE, -1}, 1, NULL},
    /* clang-format on */
};
enum { NPANELS = sizeof panels / sizeof *panels };

/* The series with at least one finite value: bit i for series i (gnuplot refuses a panel with none). */
static unsigned drawable(const plot_data *d)
{
    unsigned m = 0;
    for (size_t r = 0; r < d->n; r++)
        for (int i = 0; i < PLOT_NCOL; i++)
            if ((d->rows[r].have & (1u << i)) && isfinite(d->rows[r].v[i])) m |= 1u << i;
    return m;
}

/* The finite values of panel pn's drawable series span [*lo, *hi]. */
static void panel_range(const plot_data *d, const struct panel *pn, unsigned m, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int k = 0; k < 2; k++) {
        const int s = pn->series[k];
        if (s < 0 || !(m & (1u << s))) continue;
        for (size_t r = 0; r < d->n; r++) {
            const double v = d->rows[r].v[s];
            if (!(d->rows[r].have & (1u << s)) || !isfinite(v)) continue;
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
        }
    }
}

/* A step between two records wider than this many logging intervals (the median step between
 * records) is a stretch the file has no records of: a run resumed from an older checkpoint, records
 * lost to a full disk. The curves break there (an empty line in gnuplot's data ends a line)
 * instead of drawing a straight line across it as if it had been measured. */
#define PLOT_GAP_INTERVALS 3

static int cmp_long(const void *a, const void *b)
{
    const long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Marks in gap[] the rows that come after such a gap. Returns how many, with the first row after
 * one in *first; -1 when memory ran out. */
static long find_gaps(const plot_data *d, unsigned char *gap, size_t *first)
{
    memset(gap, 0, d->n);
    if (d->n < 3) return 0; /* one step between records: it is the interval */
    long *diff = malloc((d->n - 1) * sizeof *diff);
    if (!diff) return -1;
    for (size_t r = 1; r < d->n; r++) diff[r - 1] = d->rows[r].step - d->rows[r - 1].step;
    qsort(diff, d->n - 1, sizeof *diff, cmp_long);
    const long interval = diff[(d->n - 2) / 2];
    free(diff);
    long count = 0;
    for (size_t r = 1; r < d->n; r++)
        if ((double)(d->rows[r].step - d->rows[r - 1].step) > PLOT_GAP_INTERVALS * (double)interval) {
            if (!count++) *first = r;
            gap[r] = 1;
        }
    return count;
}

/* Above this many records a plot draws a subset (pick_rows): more points than pixels only slow
 * gnuplot down, and its cairo terminal badly (200000 records: 28 s, against 1.5 s for 50000). */
#define PLOT_RANGES 2000 /* step ranges: over twice the ~750 pixel columns of a panel */
#define PLOT_ALL_BELOW (4 * PLOT_RANGES)

/* Marks in keep[] the rows to draw, returning how many: every row of a small file; else, for each
 * of PLOT_RANGES equal ranges of steps, its first and last rows, and the rows with each series'
 * lowest and highest finite value there, so each curve keeps its exact envelope and shape at the
 * panel's resolution (what "M4" aggregation keeps). A row with a non-finite value (a gap in its
 * series) is always drawn, so no gap closes up, and so are the two rows either side of a gap in
 * the steps (gap[], find_gaps), where the curves end and start again. */
static size_t pick_rows(const plot_data *d, const unsigned char *gap, unsigned char *keep)
{
    memset(keep, d->n < PLOT_ALL_BELOW, d->n);
    if (d->n < PLOT_ALL_BELOW) return d->n;
    const long s0 = d->rows[0].step;
    const double span = (double)(d->rows[d->n - 1].step - s0) + 1;
    size_t kept = 0;
    for (size_t r = 0, e; r < d->n; r = e) {
        const long range = (long)((double)(d->rows[r].step - s0) * PLOT_RANGES / span);
        for (e = r + 1; e < d->n && (long)((double)(d->rows[e].step - s0) * PLOT_RANGES / span) == range; e++) {}
        keep[r] = keep[e - 1] = 1;
        for (int i = 0; i < PLOT_NCOL; i++) {
            size_t lo = SIZE_MAX, hi = SIZE_MAX;
            for (size_t k = r; k < e; k++) {
                if (!(d->rows[k].have & (1u << i))) continue;
                const double v = d->rows[k].v[i];
                if (!isfinite(v)) {
                    keep[k] = 1;
                    continue;
                }
                if (lo == SIZE_MAX || v < d->rows[lo].v[i]) lo = k;
                if (hi == SIZE_MAX || v > d->rows[hi].v[i]) hi = k;
            }
            if (lo != SIZE_MAX) keep[lo] = keep[hi] = 1;
        }
    }
    for (size_t k = 1; k < d->n; k++)
        if (gap[k]) keep[k - 1] = keep[k] = 1;
    for (size_t k = 0; k < d->n; k++) kept += keep[k];
    return kept;
}

/* Which panels are drawn (those with a drawable series in m; loss scale only for a mixed-precision
 * run), in show[]. Returns how many. */
static int choose_panels(const plot_data *d, unsigned m, int show[NPANELS])
{
    int count = 0;
    for (int p = 0; p < NPANELS; p++) {
        show[p] = 0;
        for (int k = 0; k < 2; k++)
            if (panels[p].series[k] >= 0 && (m & (1u << panels[p].series[k]))) show[p] = 1;
        if (panels[p].series[0] == PLOT_LOSS_SCALE && !d->mixed) show[p] = 0;
        count += show[p];
    }
    return count;
}

/* The rows in keep[] as an inline data block, an empty line before each gap[] row so the curves
 * break there; '?' for a series a row lacks or has no finite value of. */
static void write_data_block(FILE *f, const plot_data *d, const unsigned char *keep, const unsigned char *gap)
{
    fprintf(f, "$D << EOD\n");
    for (size_t r = 0; r < d->n; r++) {
        if (!keep[r]) continue;
        if (gap[r]) fputc('\n', f); /* kept by pick_rows, as is the row before it */
        fprintf(f, "%ld", d->rows[r].step);
        for (int i = 0; i < PLOT_NCOL; i++) {
            const double v = d->rows[r].v[i];
            if ((d->rows[r].have & (1u << i)) && isfinite(v))
                fprintf(f, " %.9g", v);
            else
                fputs(" ?", f);
        }
        fputc('\n', f);
    }
    fprintf(f, "EOD\n");
}

/* The terminal, the output file tmp and the page of count panels titled with the metrics file. */
static void write_page(FILE *f, const plot_data *d, int count, const char *metrics, const char *tmp)
{
    fprintf(f, "set datafile missing '?'\n");
    /* pngcairo draws smoother lines; Debian's gnuplot-nox has it, other builds may have only png. */
    fprintf(f,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 860,%d font ',10' }"
            " else { set terminal png size 860,%d }\n",
            50 + 170 * count, 50 + 170 * count);
    fprintf(f, "set termoption noenhanced\nset output ");
    gnuplot_quoted(f, tmp);
    /* One step only: the x range gnuplot would warn about and widen. */
    if (d->rows[0].step == d->rows[d->n - 1].step)
        fprintf(f, "\nset xrange [%ld:%ld]", d->rows[0].step - 1, d->rows[0].step + 1);
    fprintf(f, "\nset grid\nset lmargin 12\nset multiplot layout %d,1 title ", count);
    gnuplot_quoted(f, metrics);
    fprintf(f, "\n");
}

/* The panel's y axis: its label, log scale where asked and every value is positive, and its range. */
static void write_y_axis(FILE *f, const plot_data *d, const struct panel *pn, unsigned m)
{
    double lo, hi;
    panel_range(d, pn, m, &lo, &hi);
    const int log_y = pn->log_y && lo > 0;
    fprintf(f, "set ylabel '%s'\n%s\n", pn->ylabel, log_y ? "set logscale y" : "unset logscale y");
    /* A constant series (a constant lr): the range gnuplot would warn about and widen, made here. */
    if (lo < hi)
        fprintf(f, "set yrange [*:*]\n");
    else if (log_y)
        fprintf(f, "set yrange [%.9g:%.9g]\n", lo / 2, lo * 2);
    else
        fprintf(f, "set yrange [%.9g:%.9g]\n", lo - (lo ? fabs(lo) / 10 : 1), lo + (lo ? fabs(lo) / 10 : 1));
}

/* The plot command of the panel's drawable series: eval ones as points on a line, the loss scale
 * as steps, a title each only when there are two. */
static void write_plot(FILE *f, const struct panel *pn, unsigned m)
{
    fprintf(f, "plot");
    int first = 1;
    for (int k = 0; k < 2; k++) {
        const int s = pn->series[k];
        if (s < 0 || !(m & (1u << s))) continue;
        const int eval = s == PLOT_EVAL_LOSS || s == PLOT_EVAL_ACCURACY;
        const int two = pn->series[1] >= 0 && (m & (1u << pn->series[1]));
        fprintf(f, "%s $D using 1:%d with %s lw 1.5 %s", first ? "" : ",", s + 2,
                eval                   ? "linespoints pt 7 ps 0.6"
                : s == PLOT_LOSS_SCALE ? "steps"
                                       : "lines",
                !two   ? "notitle"
                : eval ? "title 'eval'"
                       : "title 'train'");
        first = 0;
    }
    fprintf(f, "\n");
}

/* One panel; only the bottom one (last) labels the step axis. */
static void write_panel(FILE *f, const plot_data *d, const struct panel *pn, unsigned m, int last)
{
    write_y_axis(f, d, pn, m);
    if (pn->key) fprintf(f, "set key %s\n", pn->key);
    fprintf(f, "%s\n", last ? "set xlabel 'step'" : "unset xlabel");
    write_plot(f, pn, m);
}

/* The gnuplot script drawing d's panels into tmp, the rows in keep[] with an empty line before
 * each gap[] row. Returns the number of panels. */
static int write_script(FILE *f, const plot_data *d, const unsigned char *keep, const unsigned char *gap,
                        const char *metrics, const char *tmp)
{
    const unsigned m = drawable(d);
    int show[NPANELS];
    const int count = choose_panels(d, m, show);
    if (!count) return 0;
    write_data_block(f, d, keep, gap);
    write_page(f, d, count, metrics, tmp);
    int drawn = 0;
    for (int p = 0; p < NPANELS; p++)
        if (show[p]) write_panel(f, d, &panels[p], m, ++drawn == count);
    fprintf(f, "unset multiplot\nset output\n");
    return count;
}

/* Copies the PNG at path to standard output. 0; -1 after printing why the file could not be read;
 * -2 when standard output refused the bytes (cli_close_stdout reports that, with its cause). */
static int png_to_stdout(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("plot: cannot read back %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, n, stdout) != n) rc = -2;
    if (!rc && ferror(f)) {
        cli_error("plot: reading back %s failed: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) rc = -2;
    return rc;
}

static int plot_usage_error(const char *fmt, const char *arg)
{
    char msg[600];
    snprintf(msg, sizeof msg, fmt, arg);
    cli_error("%s (usage: dtrain plot METRICS.jsonl [-o OUT.png|-])", msg);
    return EXIT_USAGE;
}

/* The flags, read as every command reads its own: getopt_long (unique abbreviations, --output=F)
 * and cli.c's message for a flag it does not take. Returns EXIT_OK with *metrics (NULL when none
 * is given) and *out (NULL when -o is not), EXIT_USAGE after printing why, or -1 after --help. */
static int plot_args(int argc, char **argv, const char **metrics, const char **out)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1;) {
        switch (c) {
            case 'o':
                /* The flag as written: "--output=" holds its (empty) value, "-o ''" is two words. */
                if (!*optarg)
                    return plot_usage_error("%s is empty: name the PNG to write",
                                            argv[optind - 1] == optarg ? argv[optind - 2] : argv[optind - 1]);
                *out = optarg;
                break;
            case 'h': cli_help("plot", stdout); return -1;
            case ':': return plot_usage_error("%s needs a value: the PNG to write", argv[optind - 1]);
            default: cli_unknown_option(argc, argv, "plot", opts); return EXIT_USAGE;
        }
    }
    if (optind < argc) *metrics = argv[optind++];
    if (optind < argc) return plot_usage_error("unexpected argument '%s': plot takes one metrics file", argv[optind]);
    return EXIT_OK;
}

/* The metrics file and the PNG's path checked before any work: METRICS no directory, one process,
 * OUT (by default METRICS' name with .png; "-": standard output, never a terminal) writable and not
 * the input (gnuplot, failing to open it, would draw to its stdout instead). def: room for the
 * default name. 0, or the exit code. */
static int check_paths(const char *metrics, const char **out, char *def, size_t n)
{
    /* Read as a file, a directory fails with only "Is a directory": name what to give instead. */
    struct stat sb;
    if (stat(metrics, &sb) == 0 && S_ISDIR(sb.st_mode))
        return plot_usage_error("%s is a directory: give the file a run wrote with dtrain train --metrics FILE",
                                metrics);
    const int one = cli_one_process("plot", "draw the same PNG and race the others to write it");
    if (one) return one;
    if (!*out) {
        /* run.jsonl -> run.png; another name gets .png added. */
        size_t len = strlen(metrics);
        if (len > 6 && !strcmp(metrics + len - 6, ".jsonl")) len -= 6;
        if (snprintf(def, n, "%.*s.png", (int)len, metrics) >= (int)n)
            return plot_usage_error("the metrics file name '%.200s...' is too long to name the PNG after: use -o",
                                    metrics);
        *out = def;
    }
    /* -o -: the PNG's bytes on standard output, as many tools take '-' (a file named '-' is
     * -o ./-). Never onto a terminal, where they would be binary noise. */
    const int to_stdout = !strcmp(*out, "-");
    const char *inputs[] = {metrics};
    if (to_stdout && isatty(STDOUT_FILENO)) {
        cli_error("plot: -o - writes the PNG's bytes to standard output, which is a terminal: redirect it "
                  "(dtrain plot %s -o - > file.png) or give -o FILE.png",
                  metrics);
        return EXIT_USAGE;
    }
    if (!to_stdout && gnuplot_output_check("plot", *out == def ? "the PNG" : "-o", *out, inputs, 1,
                                           *out == def ? " (or -o OUT.png writes elsewhere)" : ""))
        return EXIT_USAGE;
    return 0;
}

/* The temporary file gnuplot draws into (n bytes at tmp): beside OUT, or for standard output
 * beside the other temporary files (TMPDIR). 0, or -1 said. */
static int make_temp(const char *out, int to_stdout, char *tmp, size_t n)
{
    const char *shown = to_stdout ? "standard output" : out;
    char base[4200];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(base, sizeof base, "%.4000s/dtrain-plot.png", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (gnuplot_temp_path(tmp, n, to_stdout ? base : out) == 0) return 0;
    if (errno == ENAMETOOLONG)
        cli_error("plot: %s '%.200s...' is too long a name", to_stdout ? "TMPDIR" : "-o", to_stdout ? base : out);
    else
        cli_error("plot: cannot make the temporary file %s for %s: %s%s", tmp, shown, strerror(errno),
                  to_stdout ? " (set TMPDIR to a directory this user may write)" : "");
    return -1;
}

/* What a drawing drew: its panels, the rows drawn, the gaps in the steps and the first one. */
typedef struct drawing {
    int panels;
    size_t drawn, first_gap;
    long gaps;
} drawing;

/* d's PNG drawn by gnuplot (exe) into tmp and checked to be one. 0, or -1 said. */
static int draw(const plot_data *d, const char *metrics, const char *exe, const char *tmp, const char *shown,
                int to_stdout, drawing *w)
{
    int rc = -1;
    char *script = NULL;
    size_t len = 0;
    FILE *f = NULL;
    unsigned char *keep = malloc(2 * d->n); /* the rows drawn, then (keep + d->n) those after a gap */
    w->first_gap = 0;
    w->gaps = -1;
    if (!keep || (w->gaps = find_gaps(d, keep + d->n, &w->first_gap)) < 0 || !(f = open_memstream(&script, &len))) {
        cli_error("plot: out of memory");
        goto done;
    }
    const unsigned char *gap = keep + d->n;
    w->drawn = pick_rows(d, gap, keep);
    w->panels = write_script(f, d, keep, gap, metrics, tmp);
    if (fclose(f) != 0) {
        cli_error("plot: out of memory");
        goto done;
    }
    if (!w->panels) {
        cli_error("%s: no series has a finite value in its %zu step%s: nothing to draw", metrics, d->n,
                  cli_s((long)d->n));
        goto done;
    }
    if (gnuplot_run("plot", exe, script, len) != 0) goto done;
    if (!gnuplot_is_png(tmp)) {
        cli_error("plot: gnuplot exited 0 but %s is not a PNG; not %s %s", tmp, to_stdout ? "writing to" : "replacing",
                  shown);
        goto done;
    }
    rc = 0;
done:
    free(script);
    free(keep);
    return rc;
}

/* The summary line, on stderr when stdout holds the PNG. */
static void say_drawn(const plot_data *d, const drawing *w, const char *out, int to_stdout)
{
    FILE *say = to_stdout ? stderr : stdout;
    fprintf(say, "plot: wrote %s: %d panel%s over %zu record%s (steps %ld to %ld)",
            to_stdout ? "the PNG to standard output" : out, w->panels, cli_s(w->panels), d->n, cli_s((long)d->n),
            d->rows[0].step, d->rows[d->n - 1].step);
    if (w->drawn < d->n)
        fprintf(say,
                "; %zu of them drawn: the first, last, lowest and highest of each series in each of %d step ranges",
                w->drawn, PLOT_RANGES);
    if (w->gaps)
        fprintf(say, "; the curves break at %ld gap%s in the steps (%sfrom %ld to %ld)", w->gaps, cli_s(w->gaps),
                w->gaps > 1 ? "the first " : "", d->rows[w->first_gap - 1].step, d->rows[w->first_gap].step);
    fprintf(say, "\n");
}

int cmd_plot(int argc, char **argv)
{
    /* DTRAIN_LOG as every command reads it (cli_parse): a malformed value is bad usage here too. */
    if (log_init_from_env()) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    const char *metrics = NULL, *out = NULL;
    const int args = plot_args(argc, argv, &metrics, &out);
    if (args) return args < 0 ? EXIT_OK : args;
    if (!metrics) return plot_usage_error("%s", "no metrics file given (dtrain train --metrics FILE writes one)");
    char def[4200];
    const int bad = check_paths(metrics, &out, def, sizeof def);
    if (bad) return bad;
    const int to_stdout = !strcmp(out, "-");
    const char *shown = to_stdout ? "standard output" : out;
    plot_data d;
    /* A file that is not there (or may not be read) is the command's to fix, exit 2; one that
     * fails its checks, 1. */
    if (plot_read(metrics, &d) != 0) return cli_input_exit(DT_ERR_IO, metrics);
    int rc = EXIT_FAIL;
    char exe[4200], tmp[4300];
    int made = 0; /* tmp exists and is this run's */
    drawing w;
    if (gnuplot_find(exe, sizeof exe) != 0) {
        cli_error("plot: gnuplot is not on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox)");
        goto done;
    }
    if (make_temp(out, to_stdout, tmp, sizeof tmp) != 0) goto done;
    made = 1;
    if (draw(&d, metrics, exe, tmp, shown, to_stdout, &w) != 0) goto done;
    if (to_stdout) {
        /* Its temporary file is removed below. A refused write is said by cli_close_stdout. */
        if (png_to_stdout(tmp) != 0) goto done;
    } else if (rename(tmp, out) != 0) {
        cli_error("plot: cannot move %s to %s: %s", tmp, out, strerror(errno));
        goto done;
    } else {
        made = 0; /* it is out now */
    }
    say_drawn(&d, &w, out, to_stdout);
    rc = EXIT_OK;
done:
    if (made) unlink(tmp);
    plot_data_free(&d);
    return rc;
}
