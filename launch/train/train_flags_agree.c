/*
 * train_flags_agree.c - the training flags every rank must share, compared across the ranks before
 * the run starts (train_run.h), by cli_flags_agree (launch/flags_agree.c).
 *
 * Every rank parses its own command line. A launcher gives them one, but a wrapper script that
 * computes a flag per rank, an MPMD line or a node with another job script can give ranks
 * different ones, and dtrain then went wrong in ways that did not point at the cause: another
 * --batch or --seed trained silently on a wrongly weighted or wrongly sampled global batch,
 * another --lr or --optim ended in "the ranks ended with different parameters: a bug in dtrain",
 * another --steps or --checkpoint-every left ranks waiting in collectives the others never join
 * until the watchdog's deadline. Paths are not compared (a node-local copy of the data under
 * another name is fine): only whether each is given.
 */
#include "launch/train/train_run.h"
#include "launch/cli.h"

#include <string.h>

/* One line per flag, "--flag value", from the parsed values (so "--lr 0.10" and "--lr 0.1" agree). */
static void settings_text(const train_opts *t, cli_flags_text *a)
{
    memset(a, 0, sizeof *a);
    cli_flags_line(a, "--batch %d", t->batch);
    cli_flags_line(a, "--steps %ld", t->steps);
    cli_flags_line(a, "--epochs %ld", t->epochs);
    cli_flags_line(a, "--dataset-size %ld", t->dataset_size);
    cli_flags_line(a, "--seed %ld", t->seed);
    cli_flags_line(a, "--optim %s", t->optim.kind == DT_OPTIM_ADAMW ? "adamw" : "sgd");
    cli_flags_line(a, "--lr %s", CLI_F32_TEXT(t->optim.lr));
    cli_flags_line(a, "--momentum %s", CLI_F32_TEXT(t->optim.momentum));
    cli_flags_line(a, "--weight-decay %s", CLI_F32_TEXT(t->optim.weight_decay));
    cli_flags_line(a, "--betas %s,%s", CLI_F32_TEXT(t->optim.beta1), CLI_F32_TEXT(t->optim.beta2));
    cli_flags_line(a, "--eps %s", CLI_F32_TEXT(t->optim.eps));
    cli_flags_line(a, "--warmup-steps %ld", t->warmup_steps);
    cli_flags_line(a, "--min-lr %s", CLI_F32_TEXT(t->min_lr));
    cli_flags_line(a, "--accum-steps %d", t->accum_steps);
    cli_flags_line(a, "--clip-grad-norm %s", CLI_F64_TEXT(t->clip_grad_norm));
    cli_flags_line(a, "--precision %s", dt_dtype_name(t->precision));
    const dt_scaler_config *c = &t->scaler;
    cli_flags_line(a, "--loss-scale %d (scaler %d %.17g %.17g %.17g %d %d %.17g %.17g %d %.17g)", t->loss_scale,
                   c->dynamic, c->init_scale, c->growth_factor, c->backoff_factor, c->growth_interval, c->hysteresis,
                   c->min_scale, c->max_scale, c->window, c->max_overflow_fraction);
    if (t->bucket_auto)
        cli_flags_line(a, "--bucket-mb auto");
    else
        cli_flags_line(a, "--bucket-mb %s", CLI_F64_TEXT(t->sync.bucket_mb));
    cli_flags_line(a, "--first-bucket-mb %s", CLI_F64_TEXT(t->sync.first_bucket_mb));
    cli_flags_line(a, "--no-overlap %s", t->sync.overlap ? "off" : "on");
    cli_flags_line(a, "--grad-comm %s", dt_dtype_name(t->sync.grad_comm));
    cli_flags_line(a, "--zero %d", t->sync.zero);
    cli_flags_line(a, "--step-overlap %d", (int)t->step_overlap);
    cli_flags_line(a, "--graphs %d", (int)t->graphs);
    cli_flags_line(a, "--fused-relu %d", t->fused_relu);
    cli_flags_line(a, "--synthetic-on %d", (int)t->synthetic_on);
    cli_flags_line(a, "--log-every %ld", t->log_every);
    cli_flags_path(a, "--checkpoint-dir", t->ckpt_dir);
    cli_flags_line(a, "--checkpoint-every %ld", t->ckpt_every);
    cli_flags_line(a, "--resume %s", t->resume ? "auto" : "(none)");
    cli_flags_path(a, "--init-params", t->init_params);
    /* Rank 0 writes these, but every rank joins the check of their paths and a trace's gathering. */
    cli_flags_path(a, "--metrics", t->metrics);
    cli_flags_path(a, "--dump-params", t->dump);
    cli_flags_path(a, "--trace", t->trace);
    cli_flags_line(a, "--trace-steps %ld:%ld", t->trace_first, t->trace_last);
    cli_flags_path(a, "--data", t->data);
    cli_flags_path(a, "--eval-data", t->eval_data);
    cli_flags_line(a, "--holdout %s", CLI_F64_TEXT(t->holdout));
    cli_flags_line(a, "--eval-every %ld", t->eval_every);
    cli_flags_line(a, "--cifar100-labels %d", t->cifar100_coarse);
    cli_flags_line(a, "--drop-last %s", t->drop_last ? "on" : "off");
    cli_flags_line(a, "--shuffle %d", t->shuffle);
    cli_flags_line(a, "--augment crop %d flip %d", t->crop_pad, t->flip);
    cli_flags_line(a, "--bad-samples %s", t->skip_bad ? "skip" : "fail");
    cli_flags_line(a, "--normalize %d", t->normalize);
    for (int i = 0; i < t->norm.n; i++)
        cli_flags_line(a, "--normalize channel %d %s/%s", i, CLI_F32_TEXT(t->norm.mean[i]),
                       CLI_F32_TEXT(t->norm.std[i]));
    /* Texts of any length last: one cut at the buffer's end cuts no number (the model's spec is
     * compared in full by dt_model_create as well). */
    cli_flags_line(a, "--data-format %s", t->data_format ? t->data_format : "(auto)");
    cli_flags_line(a, "--lr-schedule %s", t->lr_schedule ? t->lr_schedule : "(none)");
    cli_flags_line(a, "--input %s", t->input ? t->input : "(the data's or the preset's)");
    cli_flags_line(a, "--model %s", t->model ? t->model : "(the default)");
}

int train_flags_agree(train_run *r)
{
    cli_flags_text mine;
    settings_text(&r->t, &mine);
    int shared = 0;
    const int rc = cli_flags_agree(r->ctx, "training flags (paths aside), since the ranks train one model together",
                                   &mine, &shared);
    if (shared) train_failure_shared();
    return rc;
}
