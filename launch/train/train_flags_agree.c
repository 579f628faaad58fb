/*
 * train_flags_agree.c - the training flags every rank must share, compared across the ranks before
 * the run starts (train_run.h).
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
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for every line below with long values to spare; the whole buffer is compared. */
enum { AGREE_TEXT = 4096 };

typedef struct agree_text {
    char s[AGREE_TEXT];
    size_t len;
} agree_text;

static void line(agree_text *a, const char *fmt, ...)
{
    if (a->len >= sizeof a->s) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(a->s + a->len, sizeof a->s - a->len, fmt, ap);
    va_end(ap);
    if (n > 0) a->len += (size_t)n;
    if (a->len < sizeof a->s - 1) a->s[a->len++] = '\n';
}

/* A path flag: whether it is given, not the path. */
static void path_line(agree_text *a, const char *flag, const char *path)
{
    if (path)
        line(a, "%s PATH", flag);
    else
        line(a, "no %s", flag);
}

/* The shortest text that reads back as v ("0.01", not 0.00999999978): equal texts, equal values. */
static const char *num(char buf[32], double v, int is_float)
{
    for (int digits = 6; digits < 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, v);
        const double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) break;
    }
    return buf;
}
#define F(v) num((char[32]){0}, (double)(v), 1)
#define D(v) num((char[32]){0}, (v), 0)

/* One line per flag, "--flag value", from the parsed values (so "--lr 0.10" and "--lr 0.1" agree). */
static void settings_text(const train_opts *t, agree_text *a)
{
    memset(a, 0, sizeof *a);
    line(a, "--batch %d", t->batch);
    line(a, "--steps %ld", t->steps);
    line(a, "--epochs %ld", t->epochs);
    line(a, "--dataset-size %ld", t->dataset_size);
    line(a, "--seed %ld", t->seed);
    line(a, "--optim %s", t->optim.kind == DT_OPTIM_ADAMW ? "adamw" : "sgd");
    line(a, "--lr %s", F(t->optim.lr));
    line(a, "--momentum %s", F(t->optim.momentum));
    line(a, "--weight-decay %s", F(t->optim.weight_decay));
    line(a, "--betas %s,%s", F(t->optim.beta1), F(t->optim.beta2));
    line(a, "--eps %s", F(t->optim.eps));
    line(a, "--warmup-steps %ld", t->warmup_steps);
    line(a, "--min-lr %s", F(t->min_lr));
    line(a, "--accum-steps %d", t->accum_steps);
    line(a, "--clip-grad-norm %s", D(t->clip_grad_norm));
    line(a, "--precision %s", dt_dtype_name(t->precision));
    const dt_scaler_config *c = &t->scaler;
    line(a, "--loss-scale %d (scaler %d %.17g %.17g %.17g %d %d %.17g %.17g %d %.17g)", t->loss_scale, c->dynamic,
         c->init_scale, c->growth_factor, c->backoff_factor, c->growth_interval, c->hysteresis, c->min_scale,
         c->max_scale, c->window, c->max_overflow_fraction);
    if (t->bucket_auto)
        line(a, "--bucket-mb auto");
    else
        line(a, "--bucket-mb %s", D(t->sync.bucket_mb));
    line(a, "--first-bucket-mb %s", D(t->sync.first_bucket_mb));
    line(a, "--no-overlap %s", t->sync.overlap ? "off" : "on");
    line(a, "--grad-comm %s", dt_dtype_name(t->sync.grad_comm));
    line(a, "--zero %d", t->sync.zero);
    line(a, "--step-overlap %d", (int)t->step_overlap);
    line(a, "--graphs %d", (int)t->graphs);
    line(a, "--fused-relu %d", t->fused_relu);
    line(a, "--synthetic-on %d", (int)t->synthetic_on);
    line(a, "--log-every %ld", t->log_every);
    path_line(a, "--checkpoint-dir", t->ckpt_dir);
    line(a, "--checkpoint-every %ld", t->ckpt_every);
    line(a, "--resume %s", t->resume ? "auto" : "(none)");
    path_line(a, "--init-params", t->init_params);
    /* Rank 0 writes these, but every rank joins the check of their paths and a trace's gathering. */
    path_line(a, "--metrics", t->metrics);
    path_line(a, "--dump-params", t->dump);
    path_line(a, "--trace", t->trace);
    line(a, "--trace-steps %ld:%ld", t->trace_first, t->trace_last);
    path_line(a, "--data", t->data);
    path_line(a, "--eval-data", t->eval_data);
    line(a, "--holdout %s", D(t->holdout));
    line(a, "--eval-every %ld", t->eval_every);
    line(a, "--cifar100-labels %d", t->cifar100_coarse);
    line(a, "--drop-last %s", t->drop_last ? "on" : "off");
    line(a, "--shuffle %d", t->shuffle);
    line(a, "--augment crop %d flip %d", t->crop_pad, t->flip);
    line(a, "--bad-samples %s", t->skip_bad ? "skip" : "fail");
    line(a, "--normalize %d", t->normalize);
    for (int i = 0; i < t->norm.n; i++)
        line(a, "--normalize channel %d %s/%s", i, F(t->norm.mean[i]), F(t->norm.std[i]));
    /* Texts of any length last: one cut at the buffer's end cuts no number (the model's spec is
     * compared in full by dt_model_create as well). */
    line(a, "--data-format %s", t->data_format ? t->data_format : "(auto)");
    line(a, "--lr-schedule %s", t->lr_schedule ? t->lr_schedule : "(none)");
    line(a, "--input %s", t->input ? t->input : "(the data's or the preset's)");
    line(a, "--model %s", t->model ? t->model : "(the default)");
}

/* The first line where a and b differ (its start in each), or -1. */
static int first_different_line(const agree_text *a, const agree_text *b, const char **la, const char **lb)
{
    const char *p = a->s, *q = b->s;
    for (int k = 0; *p || *q; k++) {
        const char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
        const size_t pn = pe ? (size_t)(pe - p) : strlen(p), qn = qe ? (size_t)(qe - q) : strlen(q);
        if (pn != qn || memcmp(p, q, pn) != 0) {
            *la = p, *lb = q;
            return k;
        }
        p += pn + (pe != NULL), q += qn + (qe != NULL);
    }
    return -1;
}

static int line_len(const char *l)
{
    const char *e = strchr(l, '\n');
    return (int)(e ? (size_t)(e - l) : strlen(l));
}

int train_flags_agree(train_run *r)
{
    if (r->world <= 1) return EXIT_OK;
    agree_text mine;
    settings_text(&r->t, &mine);
    int differ = 0, first = -1;
    dt_status s = dt_check_replicas(r->ctx, mine.s, sizeof mine.s, &differ, &first);
    if (s != DT_ERR_NUMERIC) return s ? train_status_error(s) : EXIT_OK;
    /* Some rank differs (every rank knows which is first): rank 0's text and that rank's reach
     * every rank, so that each words the same verdict, said once for all. Failure path only. */
    agree_text zero = mine, other = mine;
    if ((s = dt_broadcast(r->ctx, zero.s, sizeof zero.s, DT_U8, 0)) ||
        (s = dt_broadcast(r->ctx, other.s, sizeof other.s, DT_U8, first)))
        return train_status_error(s);
    zero.s[sizeof zero.s - 1] = other.s[sizeof other.s - 1] = '\0';
    const char *l0 = "", *lf = "";
    first_different_line(&zero, &other, &l0, &lf);
    char more[48] = "";
    if (differ > 1) snprintf(more, sizeof more, " (%d ranks differ from rank 0)", differ);
    s = status_mark_shared(status_set_error(
        DT_ERR_INVALID_ARG,
        "rank %d was given '%.*s' where rank 0 was given '%.*s'%s: every rank of a job must get the same training "
        "flags (paths aside), since the ranks train one model together; start them all with one command line",
        first, line_len(lf), lf, line_len(l0), l0, more));
    int shared = 0;
    const int rc = cli_say_shared_failure(r->ctx, s, NULL, &shared);
    if (shared) train_failure_shared();
    return rc;
}
