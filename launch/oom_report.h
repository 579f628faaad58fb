/*
 * oom_report.h - the out-of-memory summary of `dtrain train` and `dtrain bench step` (as torch's
 * memory_summary on an OOM): on a rank whose model ran out of device memory, what the plan of the
 * run needs by kind (peak and total), its biggest buffers, the device's free and total memory, and
 * the fix: the largest --batch that fits, or what to change when even batch 1 does not.
 */
#ifndef DT_LAUNCH_OOM_REPORT_H
#define DT_LAUNCH_OOM_REPORT_H

#include "dtrain.h"

#include <stddef.h>

/* What ran out of memory, as the command set it up. */
typedef struct oom_case {
    const char *command;                /* "train" or "bench step": the command the advice is for */
    const char *stage;                  /* what failed ("while making the model", "at step 1"), or NULL */
    const dt_memory_plan_config *plans; /* the configurations the command runs at its --batch: train
                                           one, bench step one per --precision (each plan's batch is
                                           the --batch asked for) */
    int n_plans;
    int failed;  /* the index in plans of the one that ran out */
    int samples; /* the samples per rank per optimizer step asked for (--batch x --accum-steps); 0:
                    no --accum-steps advice (bench step) */
} oom_case;

/* Formats the summary of c into buf (n bytes, always terminated; a summary longer than n is cut)
 * and returns its length. Call it after the run freed what it held on the device, so that the
 * device's free memory, the budget of the advice, includes it. Plans only (no allocation on the
 * device) and is not collective. */
size_t oom_report_format(dt_ctx *ctx, const oom_case *c, char *buf, size_t n);

/* oom_report_format() written to stderr in one block. */
void oom_report(dt_ctx *ctx, const oom_case *c);

#endif
