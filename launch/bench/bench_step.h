/*
 * bench_step.h - `dtrain bench step` (cmd_bench_step.c): its options, and one row's run
 * (bench_step_run.c): a fresh model, optimizer and loader in one precision and setting, timed over
 * the warm-up and timed steps, profiled with --profile.
 */
#ifndef DT_LAUNCH_BENCH_STEP_H
#define DT_LAUNCH_BENCH_STEP_H

#include "dtrain.h"

#include <stddef.h>

typedef struct step_opts {
    const char *model, *input;
    int batch, steps, warmup;
    dt_dtype prec[3];
    int nprec;
    int loader_threads; /* -1 auto */
    int profile;        /* --profile: steps profiled after the timed ones */
    int zero[2], nzero; /* --zero: the ZeRO stages to run, in order */
    dt_optim_kind optim;
    double clip;                /* --clip-grad-norm: 0 off, inf the norm only */
    dt_step_overlap overlap[3]; /* --step-overlap: the settings to run, in order */
    int noverlap;
    dt_graphs graphs[3]; /* --graphs: the same */
    int ngraphs;
    dt_synthetic_on synth[3]; /* --synthetic-on: the same */
    int nsynth;
    int defer_verdict; /* --defer-verdict: as dtrain train (1), or each step waits for its verdict */
    int fused_relu;    /* --fused-relu: as dtrain train (1), or every relu layer kernels of its own */
} step_opts;

/* What --clip-grad-norm did over the timed steps: steps whose norm was over the limit, and the
 * range of the norms before clipping. */
typedef struct clip_seen {
    long clipped, steps;
    double lo, hi;
} clip_seen;

/* One row's settings, and what they came to in its timed steps. */
typedef struct row_setting {
    int zero;
    dt_step_overlap overlap, overlapped;
    dt_graphs graphs, graphed;
    dt_synthetic_on synth;
    int synth_on_device; /* what synth came to */
    size_t nparams;      /* the model's parameters, and the bytes a gradient travels in */
    int grad_bytes;
    double min_ms, max_ms; /* the fastest and slowest window's step time */
} row_setting;

/* What a row measured. */
typedef struct row_figures {
    double sps, ms, wait_ms; /* global samples/s, ms a step, ms a step waited for its batch */
    long skipped;            /* the timed steps' skips */
    dt_memory_summary mem;
    clip_seen cs;
    char prof[4096]; /* --profile's text, "" without it */
} row_figures;

/* One row: precision p with rs's settings (rs gets what they came to), its figures into f, every
 * object freed after. Collective (the barriers around the timed steps, the gradients' allreduce). */
dt_status bench_step_run(dt_ctx *ctx, const step_opts *o, dt_dtype p, row_setting *rs, row_figures *f);

#endif
