/*
 * train_flags.c - the flags of `dtrain train`: the getopt table, each value read strictly into
 * train_opts, and the defaults (those dtrain help train shows, launch/help.c).
 */
#include "launch/train/train_flags.h"

#include "launch/cli.h"
#include "launch/train/straggler.h"
#include "launch/train/train_run.h"
#include "base/parse.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_MODEL = 256,
    OPT_INPUT,
    OPT_BATCH,
    OPT_STEPS,
    OPT_LR,
    OPT_OPTIM,
    OPT_MOMENTUM,
    OPT_WD,
    OPT_SEED,
    OPT_LOG_EVERY,
    OPT_STRAGGLER,
    OPT_METRICS,
    OPT_DUMP,
    OPT_DATASET,
    OPT_BETA1,
    OPT_BETA2,
    OPT_EPS,
    OPT_BUCKET,
    OPT_FIRST_BUCKET,
    OPT_NO_OVERLAP,
    OPT_GRAD_COMM,
    OPT_CKPT_DIR,
    OPT_CKPT_EVERY,
    OPT_KEEP_CKPTS,
    OPT_RESUME,
    OPT_PRECISION,
    OPT_LS,
    OPT_LS_INIT,
    OPT_LS_GROWTH,
    OPT_LS_BACKOFF,
    OPT_LS_INTERVAL,
    OPT_LS_HYST,
    OPT_LS_MIN,
    OPT_LS_MAX,
    OPT_LS_WINDOW,
    OPT_LS_FRACTION,
    OPT_LOADER,
    OPT_DATA,
    OPT_DATA_FORMAT,
    OPT_CIFAR100_LABELS,
    OPT_NORMALIZE,
    OPT_EVAL_DATA,
    OPT_HOLDOUT,
    OPT_EVAL_EVERY,
    OPT_EPOCHS,
    OPT_DROP_LAST,
    OPT_SHUFFLE,
    OPT_AUGMENT,
    OPT_BAD_SAMPLES,
    OPT_INIT_PARAMS,
    OPT_LR_SCHEDULE,
    OPT_WARMUP,
    OPT_MIN_LR,
    OPT_ACCUM,
    OPT_ZERO,
    OPT_CLIP,
    OPT_STEP_OVERLAP,
    OPT_GRAPHS,
    OPT_FUSED_RELU,
    OPT_SYNTHETIC_ON,
    OPT_PROGRESS,
    OPT_QUIET,
    OPT_TRACE,
    OPT_TRACE_STEPS
};

static const struct option train_options[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"lr", required_argument, NULL, OPT_LR},
    {"optim", required_argument, NULL, OPT_OPTIM},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WD},
    {"beta1", required_argument, NULL, OPT_BETA1},
    {"beta2", required_argument, NULL, OPT_BETA2},
    {"eps", required_argument, NULL, OPT_EPS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"log-every", required_argument, NULL, OPT_LOG_EVERY},
    {"straggler-threshold", required_argument, NULL, OPT_STRAGGLER},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"dump-params", required_argument, NULL, OPT_DUMP},
    {"dataset-size", required_argument, NULL, OPT_DATASET},
    {"bucket-mb", required_argument, NULL, OPT_BUCKET},
    {"first-bucket-mb", required_argument, NULL, OPT_FIRST_BUCKET},
    {"no-overlap", no_argument, NULL, OPT_NO_OVERLAP},
    {"grad-comm", required_argument, NULL, OPT_GRAD_COMM},
    {"checkpoint-dir", required_argument, NULL, OPT_CKPT_DIR},
    {"checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY},
    {"keep-checkpoints", required_argument, NULL, OPT_KEEP_CKPTS},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"loss-scale", required_argument, NULL, OPT_LS},
    {"loss-scale-init", required_argument, NULL, OPT_LS_INIT},
    {"loss-scale-growth", required_argument, NULL, OPT_LS_GROWTH},
    {"loss-scale-backoff", required_argument, NULL, OPT_LS_BACKOFF},
    {"loss-scale-interval", required_argument, NULL, OPT_LS_INTERVAL},
    {"loss-scale-hysteresis", required_argument, NULL, OPT_LS_HYST},
    {"loss-scale-min", required_argument, NULL, OPT_LS_MIN},
    {"loss-scale-max", required_argument, NULL, OPT_LS_MAX},
    {"loss-scale-window", required_argument, NULL, OPT_LS_WINDOW},
    {"max-overflow-fraction", required_argument, NULL, OPT_LS_FRACTION},
    {"loader-threads", required_argument, NULL, OPT_LOADER},
    {"data", required_argument, NULL, OPT_DATA},
    {"data-format", required_argument, NULL, OPT_DATA_FORMAT},
    {"cifar100-labels", required_argument, NULL, OPT_CIFAR100_LABELS},
    {"normalize", required_argument, NULL, OPT_NORMALIZE},
    {"eval-data", required_argument, NULL, OPT_EVAL_DATA},
    {"holdout", required_argument, NULL, OPT_HOLDOUT},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"drop-last", no_argument, NULL, OPT_DROP_LAST},
    {"shuffle", required_argument, NULL, OPT_SHUFFLE},
    {"augment", required_argument, NULL, OPT_AUGMENT},
    {"bad-samples", required_argument, NULL, OPT_BAD_SAMPLES},
    {"init-params", required_argument, NULL, OPT_INIT_PARAMS},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP},
    {"min-lr", required_argument, NULL, OPT_MIN_LR},
    {"accum-steps", required_argument, NULL, OPT_ACCUM},
    {"zero", required_argument, NULL, OPT_ZERO},
    {"clip-grad-norm", required_argument, NULL, OPT_CLIP},
    {"step-overlap", required_argument, NULL, OPT_STEP_OVERLAP},
    {"graphs", required_argument, NULL, OPT_GRAPHS},
    {"fused-relu", required_argument, NULL, OPT_FUSED_RELU},
    {"synthetic-on", required_argument, NULL, OPT_SYNTHETIC_ON},
    {"progress", required_argument, NULL, OPT_PROGRESS},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"trace-steps", required_argument, NULL, OPT_TRACE_STEPS},
    {NULL, 0, NULL, 0},
};

/* A float flag stored in a double field of the scaler configuration. */
static int cli_dbl(const char *flag, const char *arg, double lo, double hi, double *out)
{
    float v;
    int rc = cli_float(flag, arg, lo, hi, &v);
    if (!rc) *out = v;
    return rc;
}

/* The flag's name as the user wrote it ("--loss-scale-init"), from the table. */
static const char *flag_name(int val)
{
    static char name[64];
    for (const struct option *o = train_options; o->name; o++)
        if (o->val == val) {
            snprintf(name, sizeof name, "--%s", o->name);
            return name;
        }
    return "?";
}

/* A flag group's handler returns this for a flag of another group. */
enum { FLAG_NOT_MINE = -1 };

static int parse_optim(const char *arg, train_opts *t)
{
    if (!strcmp(arg, "sgd"))
        t->optim.kind = DT_OPTIM_SGD;
    else if (!strcmp(arg, "adamw"))
        t->optim.kind = DT_OPTIM_ADAMW;
    else {
        cli_error("--optim '%s' is not one of sgd, adamw", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The model, the optimizer and its learning rate over the steps. */
static int handle_model_flag(int val, const char *arg, train_opts *t)
{
    switch (val) {
        case OPT_MODEL: t->model = arg; return EXIT_OK;
        case OPT_INPUT: t->input = arg; return EXIT_OK;
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 20, &t->batch);
        case OPT_STEPS: t->steps_set = 1; return cli_long("--steps", arg, 1, 1L << 40, &t->steps);
        case OPT_SEED: return cli_long("--seed", arg, 0, 1L << 62, &t->seed);
        case OPT_INIT_PARAMS: t->init_params = arg; return EXIT_OK;
        case OPT_OPTIM: return parse_optim(arg, t);
        case OPT_LR: return cli_float("--lr", arg, 1e-12, 1e3, &t->optim.lr);
        case OPT_MOMENTUM:
            t->optim_given |= OPTIM_GIVEN_MOMENTUM;
            return cli_float("--momentum", arg, 0, 0.999999, &t->optim.momentum);
        case OPT_WD: return cli_float("--weight-decay", arg, 0, 10, &t->optim.weight_decay);
        case OPT_BETA1:
            t->optim_given |= OPTIM_GIVEN_BETA1;
            return cli_float("--beta1", arg, 0, 0.999999, &t->optim.beta1);
        case OPT_BETA2:
            t->optim_given |= OPTIM_GIVEN_BETA2;
            return cli_float("--beta2", arg, 0, 0.999999, &t->optim.beta2);
        case OPT_EPS: t->optim_given |= OPTIM_GIVEN_EPS; return cli_float("--eps", arg, 1e-30, 1, &t->optim.eps);
        case OPT_LR_SCHEDULE: t->lr_schedule = arg; return EXIT_OK;
        case OPT_WARMUP: return cli_long("--warmup-steps", arg, 0, 1L << 40, &t->warmup_steps);
        case OPT_MIN_LR: return cli_float("--min-lr", arg, 0, 1e3, &t->min_lr);
        case OPT_ACCUM: return cli_int("--accum-steps", arg, 1, 1 << 16, &t->accum_steps);
        case OPT_CLIP: return cli_clip_grad_norm(arg, &t->clip_grad_norm);
    }
    return FLAG_NOT_MINE;
}

static int parse_data_format(const char *arg, train_opts *t)
{
    if (strcmp(arg, "auto") && strcmp(arg, "idx") && strcmp(arg, "cifar10") && strcmp(arg, "cifar100") &&
        strcmp(arg, "imagefolder") && strcmp(arg, "dts")) {
        cli_error("--data-format '%s' is not one of auto, idx, cifar10, cifar100, imagefolder, dts", arg);
        return EXIT_USAGE;
    }
    t->data_format = arg;
    return EXIT_OK;
}

static int parse_shuffle(const char *arg, train_opts *t)
{
    if (!strcmp(arg, "none"))
        t->shuffle = 0;
    else if (!strcmp(arg, "epoch"))
        t->shuffle = 1;
    else {
        cli_error("--shuffle '%s' is not epoch (a new order each epoch, the default) or none (file order)", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The training and held-out data, and how they are read. */
static int handle_data_flag(int val, const char *arg, train_opts *t)
{
    switch (val) {
        case OPT_DATA: t->data = arg; return EXIT_OK;
        case OPT_DATA_FORMAT: return parse_data_format(arg, t);
        case OPT_CIFAR100_LABELS: t->cifar100_set = 1; return cli_cifar100_labels(arg, &t->cifar100_coarse);
        case OPT_NORMALIZE: return cli_normalize_spec(arg, &t->normalize, &t->norm);
        case OPT_EVAL_DATA: t->eval_data = arg; return EXIT_OK;
        case OPT_HOLDOUT: {
            float v;
            if (cli_float("--holdout (the fraction kept aside)", arg, 1e-6, 0.999999, &v)) return EXIT_USAGE;
            t->holdout = v;
            return EXIT_OK;
        }
        case OPT_EVAL_EVERY: t->eval_every_set = 1; return cli_long("--eval-every", arg, 0, 1L << 40, &t->eval_every);
        case OPT_EPOCHS: return cli_long("--epochs", arg, 1, 1L << 30, &t->epochs);
        case OPT_DROP_LAST: t->drop_last = 1; return EXIT_OK;
        case OPT_SHUFFLE: return parse_shuffle(arg, t);
        case OPT_AUGMENT: return cli_augment(arg, &t->crop_pad, &t->flip);
        case OPT_BAD_SAMPLES: return cli_bad_samples(arg, "replace it and count it", &t->skip_bad);
        case OPT_DATASET: return cli_long("--dataset-size", arg, 1, 4294967295L, &t->dataset_size);
        case OPT_LOADER: return cli_loader_threads(arg, &t->loader_threads);
        case OPT_SYNTHETIC_ON: return cli_synthetic_on(arg, &t->synthetic_on);
    }
    return FLAG_NOT_MINE;
}

static int parse_loss_scale(const char *arg, train_opts *t)
{
    t->loss_scale_arg = arg;
    if (!strcmp(arg, "dynamic"))
        t->loss_scale = 1;
    else if (!strcmp(arg, "none"))
        t->loss_scale = 0;
    else {
        float v;
        if (cli_float("--loss-scale (dynamic, none or a number)", arg, 1.0 / 16777216.0, 16777216.0 * 256, &v))
            return EXIT_USAGE;
        t->loss_scale = 2;
        t->scaler.init_scale = v;
    }
    return EXIT_OK;
}

/* --precision and the loss scaler's flags. */
static int handle_precision_flag(int val, const char *arg, train_opts *t)
{
    /* The dynamic scaler's flags do nothing under --loss-scale none or a fixed scale: remember the
     * first one given, to refuse the pair once every flag is read (any order). */
    if (val >= OPT_LS_INIT && val <= OPT_LS_FRACTION && !t->scaler_flag) t->scaler_flag = flag_name(val);
    switch (val) {
        case OPT_PRECISION: return cli_float_dtype("--precision", arg, &t->precision);
        case OPT_LS: return parse_loss_scale(arg, t);
        case OPT_LS_INIT:
            return cli_dbl("--loss-scale-init", arg, 1.0 / 16777216.0, 4294967296.0, &t->scaler.init_scale);
        case OPT_LS_GROWTH: return cli_dbl("--loss-scale-growth", arg, 1.0000001, 1e6, &t->scaler.growth_factor);
        case OPT_LS_BACKOFF: return cli_dbl("--loss-scale-backoff", arg, 1e-6, 0.9999999, &t->scaler.backoff_factor);
        case OPT_LS_INTERVAL: return cli_int("--loss-scale-interval", arg, 1, 1 << 30, &t->scaler.growth_interval);
        case OPT_LS_HYST: return cli_int("--loss-scale-hysteresis", arg, 1, 1 << 20, &t->scaler.hysteresis);
        case OPT_LS_MIN: return cli_dbl("--loss-scale-min", arg, 1.0 / 16777216.0, 4294967296.0, &t->scaler.min_scale);
        case OPT_LS_MAX:
            return cli_dbl("--loss-scale-max", arg, 1.0 / 16777216.0, 4294967296.0 * 65536.0, &t->scaler.max_scale);
        case OPT_LS_WINDOW: return cli_int("--loss-scale-window", arg, 1, 1 << 20, &t->scaler.window);
        case OPT_LS_FRACTION: return cli_dbl("--max-overflow-fraction", arg, 1e-6, 1, &t->scaler.max_overflow_fraction);
    }
    return FLAG_NOT_MINE;
}

static int parse_zero(const char *arg, train_opts *t)
{
    /* Spelled out rather than cli_int's range message: the stages are a choice, not a range. */
    if (strcmp(arg, "0") && strcmp(arg, "1")) {
        cli_error("--zero '%s' is not supported: use 0 (every rank keeps the whole optimizer state) or 1 "
                  "(ZeRO-1: optimizer state sharded across the ranks)",
                  arg);
        return EXIT_USAGE;
    }
    t->sync.zero = arg[0] == '1';
    return EXIT_OK;
}

/* The gradients' reduction and how a step runs. */
static int handle_sync_flag(int val, const char *arg, train_opts *t)
{
    switch (val) {
        case OPT_ZERO: return parse_zero(arg, t);
        case OPT_BUCKET: {
            t->bucket_auto = !strcmp(arg, "auto");
            if (t->bucket_auto) return EXIT_OK;
            float v;
            int rc = cli_float("--bucket-mb", arg, 0, 1e6, &v);
            t->sync.bucket_mb = v;
            return rc;
        }
        case OPT_FIRST_BUCKET: {
            float v;
            int rc = cli_float("--first-bucket-mb", arg, 0, 1e6, &v);
            t->sync.first_bucket_mb = v;
            return rc;
        }
        case OPT_NO_OVERLAP: t->sync.overlap = 0; return EXIT_OK;
        case OPT_GRAD_COMM: t->grad_comm_set = 1; return cli_float_dtype("--grad-comm", arg, &t->sync.grad_comm);
        case OPT_STEP_OVERLAP: return cli_step_overlap(arg, &t->step_overlap);
        case OPT_GRAPHS: return cli_graphs(arg, &t->graphs);
        case OPT_FUSED_RELU: return cli_fused_relu(arg, &t->fused_relu);
    }
    return FLAG_NOT_MINE;
}

static int parse_resume(const char *arg, train_opts *t)
{
    if (!strcmp(arg, "auto"))
        t->resume = 1;
    else if (!strcmp(arg, "never"))
        t->resume = 0;
    else {
        cli_error("--resume '%s' is not one of auto, never", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static int parse_progress(const char *arg, train_opts *t)
{
    if (!strcmp(arg, "auto"))
        t->progress = PROGRESS_AUTO;
    else if (!strcmp(arg, "always"))
        t->progress = PROGRESS_ALWAYS;
    else if (!strcmp(arg, "never"))
        t->progress = PROGRESS_NEVER;
    else {
        cli_error("--progress '%s' is not one of auto (on a terminal), always, never", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The checkpoints, and what the run writes and prints. */
static int handle_output_flag(int val, const char *arg, train_opts *t)
{
    switch (val) {
        case OPT_CKPT_DIR: t->ckpt_dir = arg; return EXIT_OK;
        case OPT_CKPT_EVERY: return cli_long("--checkpoint-every", arg, 0, 1L << 40, &t->ckpt_every);
        case OPT_KEEP_CKPTS: return cli_int("--keep-checkpoints", arg, 0, 1000000, &t->keep_ckpts);
        case OPT_RESUME: return parse_resume(arg, t);
        case OPT_METRICS: t->metrics = arg; return EXIT_OK;
        case OPT_DUMP: t->dump = arg; return EXIT_OK;
        case OPT_TRACE:
            if (!*arg) {
                cli_error("--trace needs a file name (such as trace.json)");
                return EXIT_USAGE;
            }
            t->trace = arg;
            return EXIT_OK;
        case OPT_TRACE_STEPS:
            if (parse_step_range("--trace-steps", arg, 1L << 40, &t->trace_first, &t->trace_last)) {
                cli_error("%s", dt_last_error());
                return EXIT_USAGE;
            }
            return EXIT_OK;
        case OPT_LOG_EVERY: return cli_long("--log-every", arg, 1, 1L << 40, &t->log_every);
        case OPT_STRAGGLER: {
            float v;
            if (cli_float("--straggler-threshold (a rank this many times busier than the median is named; above 1)",
                          arg, 1.001, 1e6, &v))
                return EXIT_USAGE;
            t->straggler_threshold = v;
            return EXIT_OK;
        }
        case OPT_PROGRESS: return parse_progress(arg, t);
        case OPT_QUIET: t->quiet = 1; return EXIT_OK;
    }
    return FLAG_NOT_MINE;
}

/* Each flag belongs to one group; a flag of none is the table's mistake (EXIT_USAGE, as before). */
static int (*const flag_groups[])(int val, const char *arg, train_opts *t) = {
    handle_model_flag, handle_data_flag, handle_precision_flag, handle_sync_flag, handle_output_flag,
};

static int train_handle(int val, const char *arg, void *ud)
{
    for (size_t i = 0; i < sizeof flag_groups / sizeof flag_groups[0]; i++) {
        const int rc = flag_groups[i](val, arg, ud);
        if (rc != FLAG_NOT_MINE) return rc;
    }
    return EXIT_USAGE;
}

int train_flags_parse(int argc, char **argv, dt_config *cfg, train_opts *t)
{
    *t = (train_opts){.model = "mlp",
                      .batch = 64,
                      .steps = 100,
                      .log_every = 10,
                      .seed = 1,
                      .dataset_size = 60000,
                      .loader_threads = -1,
                      .step_overlap = DT_STEP_OVERLAP_AUTO,
                      .graphs = DT_GRAPHS_AUTO,
                      .fused_relu = 1,
                      .synthetic_on = DT_SYNTHETIC_AUTO,
                      .precision = DT_F32,
                      .loss_scale = -1,
                      .normalize = -1,
                      .shuffle = 1,
                      .accum_steps = 1,
                      .straggler_threshold = STRAGGLER_THRESHOLD};
    dt_optim_defaults(&t->optim);
    dt_sync_defaults(&t->sync);
    dt_scaler_defaults(&t->scaler);
    const cli_extra extra = {train_options, train_handle, t, NULL};
    const int rc = cli_parse(argc, argv, "train", cfg, &extra);
    return rc ? rc : train_flags_check(t);
}
