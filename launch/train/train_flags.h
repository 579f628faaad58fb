/*
 * train_flags.h - the flags of `dtrain train` (train_flags.c): their table, their values read
 * strictly, and the defaults they start from; and the flags against each other (train_flags_check.c).
 */
#ifndef DT_LAUNCH_TRAIN_FLAGS_H
#define DT_LAUNCH_TRAIN_FLAGS_H

#include "launch/normalize_flag.h"
#include "launch/train/progress.h"

#include "dtrain.h"

enum { OPTIM_GIVEN_MOMENTUM = 1, OPTIM_GIVEN_BETA1 = 2, OPTIM_GIVEN_BETA2 = 4, OPTIM_GIVEN_EPS = 8 };

typedef struct train_opts {
    const char *model, *input, *metrics, *dump, *ckpt_dir;
    long ckpt_every;
    int keep_ckpts; /* --keep-checkpoints N: the newest N kept (0: every one) */
    int resume;     /* 1: --resume auto */
    int batch;
    long steps, log_every, dataset_size;
    dt_optim_config optim;
    long seed;
    dt_sync_config sync;
    int bucket_auto;   /* --bucket-mb auto: the step-time model picks the cap (train_bucket_auto.c) */
    int grad_comm_set; /* --grad-comm given */
    dt_dtype precision;
    int loss_scale; /* -1 default for the precision, 0 none, 1 dynamic, 2 static (--loss-scale N) */
    dt_scaler_config scaler;
    int loader_threads; /* -1 auto */
    /* Data: --data PATH (NULL: the synthetic data) and how to read it. */
    const char *data, *data_format, *eval_data;
    int cifar100_coarse;
    int normalize;         /* -1: the default (standard for files, none for synthetic data), else dt_normalize */
    cli_norm_figures norm; /* --normalize standard:M,..:S,..: the figures given (norm.n 0: none) */
    double holdout;        /* --holdout F, 0 = none */
    long eval_every;       /* --eval-every N steps, 0 = only at the end (when there is held-out data) */
    long epochs;           /* --epochs N, 0 = --steps decides */
    int steps_set;         /* --steps given */
    /* Flags given on the command line whose defaults do nothing: each is refused where it would
     * be ignored (train_flags_parse, train_data_open), whatever the order of the flags. */
    int cifar100_set, eval_every_set;
    unsigned optim_given;       /* OPTIM_GIVEN_* bits: the optimizer flags given */
    const char *loss_scale_arg; /* --loss-scale's text, for messages */
    const char *scaler_flag;    /* the first dynamic-scaler flag given (--loss-scale-init, ...), or NULL */
    int drop_last, shuffle, crop_pad, flip, skip_bad;
    /* The training loop around the optimizer. */
    const char *init_params; /* --init-params FILE */
    const char *lr_schedule; /* --lr-schedule SPEC (parsed once the steps per epoch are known) */
    long warmup_steps;
    float min_lr;
    int accum_steps;              /* micro-batches per optimizer step */
    double clip_grad_norm;        /* 0: off */
    dt_step_overlap step_overlap; /* --step-overlap */
    dt_graphs graphs;             /* --graphs */
    int fused_relu;               /* --fused-relu */
    dt_synthetic_on synthetic_on; /* --synthetic-on */
    /* What rank 0 prints while training. */
    progress_mode progress;     /* --progress */
    int quiet;                  /* --quiet: no lines before the steps, no step, eval or progress lines */
    double straggler_threshold; /* busy time over the median that names a straggler (straggler.h) */
    /* --trace FILE.json and --trace-steps A:B (0:0: every step, as long as the buffer lasts). */
    const char *trace;
    long trace_first, trace_last;
} train_opts;

/* Parses dtrain train's command line into *cfg (the flags of every command, over DTRAIN_* and
 * the defaults) and *t (its own, over the defaults that dtrain help train shows). Returns
 * EXIT_OK, or EXIT_USAGE after printing why (help exits 0 itself). */
int train_flags_parse(int argc, char **argv, dt_config *cfg, train_opts *t);
/* The flags read into *t against each other (train_flags_check.c; train_flags_parse runs it):
 * EXIT_OK, or EXIT_USAGE after printing the flags that cannot go together and the fix. */
int train_flags_check(const train_opts *t);

#endif
