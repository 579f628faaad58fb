/*
 * eval_figures.h - the per-class figures of `dtrain eval` (eval_figures.c): every class and the
 * confusion matrix on the terminal, or a summary where there are too many classes to read, and the
 * matrix as a CSV file.
 */
#ifndef DT_LAUNCH_EVAL_FIGURES_H
#define DT_LAUNCH_EVAL_FIGURES_H

#include "dtrain.h"

/* r's per-class figures over K classes on stdout: up to 20 classes each one's accuracy and the
 * matrix; more, the mean accuracy, the lowest classes and the largest confusions, and where
 * csv_given is 0 a line that --confusion-csv FILE writes the matrix. */
void eval_figures_print(const dt_eval_result *r, int K, int csv_given);

/* r's K x K matrix as CSV at path, written atomically. EXIT_OK, or EXIT_FAIL after saying why. */
int eval_figures_write_csv(const char *path, const dt_eval_result *r, int K);

#endif
