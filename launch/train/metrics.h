/*
 * metrics.h - the --metrics file of `dtrain train` (metrics.c): one JSON object a line per
 * logged step, written by rank 0, kept across a resume.
 *
 * A record: {"time": "2026-01-31T12:00:00.123Z", "step": 10, "epoch": 0.0213, "loss": 2.302585,
 * "accuracy": 0.1, "samples_per_s": 1234.5, "step_time_s": 0.01, "comm_wait_s": 0.001,
 * "data_wait_s": 0.0001, "precision": "fp32", "loss_scale": 1, "skipped_steps": 0,
 * "skipped_total": 0, "lr": 0.01} and, on a step that evaluated, "eval_loss" and "eval_accuracy",
 * with --clip-grad-norm "grad_norm" (the last step's, before clipping), and before "lr", with more
 * than one rank, the straggler report's "slowest_rank", "slowest_busy_s", "median_busy_s",
 * "straggler" (true when the slowest rank is over --straggler-threshold) and then "straggler_phase";
 * time is when
 * rank 0 wrote it, in UTC (ISO 8601, milliseconds), the rest as README.md says.
 */
#ifndef DT_LAUNCH_METRICS_H
#define DT_LAUNCH_METRICS_H

#include <stdio.h>

typedef struct metrics_record {
    long step;
    double epoch; /* epochs done, with the fraction of the current one */
    double data_wait_s;
    int has_eval;
    double eval_loss, eval_accuracy;
    double lr;
    int has_grad_norm; /* --clip-grad-norm: the norm of the interval's last optimizer step */
    double grad_norm;
    double loss, accuracy, samples_per_s, step_time_s, comm_wait_s;
    const char *precision;
    double loss_scale;
    long skipped_steps, skipped_total;
    int has_straggler; /* more than one rank: the straggler verdict of the interval (straggler.h) */
    int slowest_rank, straggler;
    double slowest_busy_s, median_busy_s;
    const char *straggler_phase;
} metrics_record;

/* Opens path for the records of a run. A run that does not resume starts the file afresh. A run
 * resumed after first_step keeps the file's records of steps <= first_step and drops the later
 * ones (those steps run again), by truncating the file after the last record kept, then appends;
 * a last line cut short (a write the stop interrupted) is dropped too, and said so. Kept records
 * that end before first_step leave steps in no record: a warning says which.
 * A file that is not a metrics file (a line that is not a record of our form, steps that do not
 * rise) is never rewritten: it is renamed to path.bad-<UTC time>, with a
 * warning, and a fresh file begins. Prints what it kept and dropped unless quiet (warnings are
 * always said). A device, FIFO or stream (/dev/stdout, /dev/null: ckpt_write_target's in place)
 * is appended to as it is, resumed or not; this process's own stdout through its descriptor, so
 * that the records and the lines share one offset. Returns NULL after printing why it could not. */
FILE *metrics_open(const char *path, int resume, long first_step, int quiet);

/* Before the run, after ckpt_write_file_try has tried path's directory: the file is written in
 * place (truncated, or read and appended to on a resume), not renamed over, so an existing regular
 * file must itself be writable (and readable to resume). 0 when it is, or when there is none; -1
 * with the cause and the fix in why (len bytes) when not. */
int metrics_try(const char *path, int resume, char *why, size_t len);

/* Appends r with the time now, in one write. Returns 0, or -1 when the write failed (errno); a
 * record written in part (a full disk) is cut off again, so the file ends with a whole record. */
int metrics_write(FILE *f, const metrics_record *r);

#endif
