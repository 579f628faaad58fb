/*
 * perfmodel_input.h - the step-time model's inputs read from the text dtrain's own benchmarks
 * print: `bench step --profile` (the compute of one step, per phase and per layer) and `bench
 * allreduce` (sizes and times, for pm_fit_ring). Pure parsers over a string; errors name the line.
 */
#ifndef DT_LAUNCH_PERFMODEL_INPUT_H
#define DT_LAUNCH_PERFMODEL_INPUT_H

#include "dtrain.h"

#define PM_MAX_LAYERS 512
#define PM_MAX_ROWS 64

typedef struct pm_profile {
    char model[256]; /* the header's "model M" */
    char input[64];  /* the header's "input S" (the model's input shape); "" in a header without one */
    int ranks, batch;
    char precision[16]; /* the row the profile follows: fp32, bf16 or fp16 */
    double step_ms;     /* that row's measured step */
    double row_data_ms; /* that row's data ms (its timed steps' wait for their batches; 0 if none) */
    /* ms per step of the profiled steps; data_ms the wait for their batches, when has_data (a
     * profile printed before bench step recorded it has none: 0) */
    double data_ms, input_ms, forward_ms, loss_ms, backward_ms, allreduce_ms, check_ms, optimizer_ms;
    int has_data;
    int nlayers;                                         /* 1 + the largest layer index listed */
    double fwd_ms[PM_MAX_LAYERS], bwd_ms[PM_MAX_LAYERS]; /* 0 for layers the profile left out (no time) */
} pm_profile;

/* Reads `bench step --profile N` output: the profile and the measured step of the row it follows
 * (a profile line with or without its data phase, which older bench steps did not print).
 * DT_ERR_INVALID_ARG naming what is missing (no profile line: run with --profile N), the line
 * that does not parse, or, for output with several profiled rows (--precision fp32,bf16), the
 * precisions found and how to give one. */
dt_status pm_read_step_profile(const char *text, pm_profile *out);

typedef struct pm_allreduce_rows {
    int ranks, n;
    double bytes[PM_MAX_ROWS], secs[PM_MAX_ROWS]; /* dtrain's (the engine's) time per size */
} pm_allreduce_rows;

/* Reads `bench allreduce` output: the ranks from its header, the engine's time of every row. A
 * 16-bit wire's rows (--dtype fp16|bf16) are refused: their times are not the link's alone. */
dt_status pm_read_allreduce(const char *text, pm_allreduce_rows *out);

#endif
