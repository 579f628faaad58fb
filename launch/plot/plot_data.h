/*
 * plot_data.h - the records of a `dtrain train --metrics` file read back for `dtrain plot`
 * (plot_data.c): one row per step, with the series that step has.
 *
 * Each line must be one flat JSON object (metrics.h's record) with a "step" (an integer >= 0);
 * the series below are numbers when present (nan and inf too: a diverged loss is written so),
 * "precision" a string; other keys are skipped. A line whose step is the line before's adds to
 * that row (an eval record written on a line of its own), but may not repeat a series it has;
 * steps never go back.
 */
#ifndef DT_LAUNCH_PLOT_DATA_H
#define DT_LAUNCH_PLOT_DATA_H

#include <stddef.h>

enum {
    PLOT_LOSS,
    PLOT_ACCURACY,
    PLOT_EVAL_LOSS,
    PLOT_EVAL_ACCURACY,
    PLOT_LR,
    PLOT_SAMPLES_PER_S,
    PLOT_LOSS_SCALE,
    PLOT_NCOL
};

/* The JSON key of series i ("loss", ..., "loss_scale"). */
const char *plot_key(int i);

typedef struct plot_row {
    long step;
    unsigned have; /* bit i: series i is in v[i] */
    double v[PLOT_NCOL];
} plot_row;

typedef struct plot_data {
    plot_row *rows; /* owned; plot_data_free */
    size_t n, cap;
    unsigned have; /* the series some row has */
    int mixed;     /* a record's precision was fp16 or bf16 */
} plot_data;

/* Adds the record in line (len bytes, no newline; need not be NUL-terminated) to d. Returns 0, or
 * -1 with what is wrong in why (n bytes, NUL-terminated; "expected ':' after \"loss\" at column 12")
 * and d as it was; -2 when memory ran out. */
int plot_parse_line(plot_data *d, const char *line, size_t len, char *why, size_t n);

/* Reads the metrics file at path into *d (zeroed first). Returns 0, or -1 after printing the
 * error (the file, the line number and what is wrong; a file with no records says so). A last
 * line that does not parse and has no newline (cut short by a killed run or a full disk, or still
 * being written) is left out with a warning, after at least one line before it. */
int plot_read(const char *path, plot_data *d);

void plot_data_free(plot_data *d);

#endif
