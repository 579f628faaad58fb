/*
 * cmd_eval.c - `dtrain eval`: a trained model's figures on a dataset, under any launcher: top-1
 * accuracy, mean loss, per-class accuracy and the confusion matrix, evaluated with dt_evaluate
 * (sharded over the ranks and summed, so the figures do not depend on the rank count).
 *
 * The model is the one the checkpoint was trained as (--model and --input as for training; the
 * checkpoint's fingerprint refuses another), its weights the newest sound checkpoint's, and the
 * normalization the one training used, from the checkpoint's data block. On the train split, the
 * checkpoint's run record (train_record.h) says which samples training kept aside: --holdout must
 * name exactly those (check_record). --eval-data PATH evaluates PATH whole, as training's
 * --eval-data does, an image folder's classes numbered by --data's training classes: a held-out
 * folder that lacks a class would otherwise be numbered by its own folders, every later class one
 * lower than the model learned it.
 */
#include "launch/cli.h"
#include "launch/train/eval_figures.h"
#include "launch/train/train_record.h"
#include "runtime/checkpoint/ckpt_extra.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "runtime/data/dataset.h"
#include "base/path.h"
#include "base/status.h"
#include "runtime/model/model.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    OPT_MODEL = 256,
    OPT_INPUT,
    OPT_DATA,
    OPT_FORMAT,
    OPT_CIFAR100,
    OPT_CKPT,
    OPT_SPLIT,
    OPT_HOLDOUT,
    OPT_BATCH,
    OPT_LOADER,
    OPT_CONFUSION,
    OPT_EVAL_DATA,
    OPT_BAD_SAMPLES
};

typedef struct eval_opts {
    const char *model, *input, *data, *format, *ckpt_dir, *split, *confusion_csv;
    const char *eval_data;   /* --eval-data: evaluated whole, numbered by --data's classes */
    const char *holdout_arg; /* --holdout as given, for messages */
    int cifar100_coarse, batch, loader_threads;
    int skip_bad;    /* --bad-samples skip: an undecodable sample is left out of the figures */
    int split_given; /* --split was on the command line, not the default */
    double holdout;
} eval_opts;

static const struct option eval_options[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"data", required_argument, NULL, OPT_DATA},
    {"data-format", required_argument, NULL, OPT_FORMAT},
    {"cifar100-labels", required_argument, NULL, OPT_CIFAR100},
    {"checkpoint-dir", required_argument, NULL, OPT_CKPT},
    {"split", required_argument, NULL, OPT_SPLIT},
    {"holdout", required_argument, NULL, OPT_HOLDOUT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"loader-threads", required_argument, NULL, OPT_LOADER},
    {"confusion-csv", required_argument, NULL, OPT_CONFUSION},
    {"eval-data", required_argument, NULL, OPT_EVAL_DATA},
    {"bad-samples", required_argument, NULL, OPT_BAD_SAMPLES},
    {NULL, 0, NULL, 0},
};

static int eval_handle(int val, const char *arg, void *ud)
{
    eval_opts *e = ud;
    switch (val) {
        case OPT_MODEL: e->model = arg; return EXIT_OK;
        case OPT_INPUT: e->input = arg; return EXIT_OK;
        case OPT_DATA: e->data = arg; return EXIT_OK;
        case OPT_FORMAT: e->format = arg; return EXIT_OK;
        case OPT_CKPT: e->ckpt_dir = arg; return EXIT_OK;
        case OPT_CONFUSION: e->confusion_csv = arg; return EXIT_OK;
        case OPT_EVAL_DATA: e->eval_data = arg; return EXIT_OK;
        case OPT_CIFAR100: return cli_cifar100_labels(arg, &e->cifar100_coarse);
        case OPT_SPLIT:
            if (strcmp(arg, "test") && strcmp(arg, "train")) {
                cli_error("--split '%s' is not test or train", arg);
                return EXIT_USAGE;
            }
            e->split = arg;
            e->split_given = 1;
            return EXIT_OK;
        case OPT_HOLDOUT: {
            float v;
            if (cli_float("--holdout (the fraction training kept aside)", arg, 1e-6, 0.999999, &v)) return EXIT_USAGE;
            e->holdout = v;
            e->holdout_arg = arg;
            return EXIT_OK;
        }
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 20, &e->batch);
        case OPT_LOADER: return cli_loader_threads(arg, &e->loader_threads);
        case OPT_BAD_SAMPLES: return cli_bad_samples(arg, "leave it out of the figures", &e->skip_bad);
    }
    return EXIT_USAGE;
}

/* Before dt_init: what eval cannot go without. */
static int eval_check(dt_config *cfg, void *ud)
{
    (void)cfg;
    const eval_opts *e = ud;
    if (!e->ckpt_dir || !e->data) {
        cli_error("dtrain eval needs --checkpoint-dir DIR (the trained model) and --data PATH (what to evaluate on)");
        return EXIT_USAGE;
    }
    struct stat sb;
    const int found = stat(e->ckpt_dir, &sb) == 0;
    /* A checkpoint file given for the directory (a path from ls, pasted): say which to give, rather
     * than that the file cannot be read as a directory. */
    if (found && !S_ISDIR(sb.st_mode)) {
        const char *slash = strrchr(e->ckpt_dir, '/');
        cli_error("--checkpoint-dir %s is a file, not a directory: give the directory that holds the checkpoints "
                  "(%.*s); eval loads the newest sound one there",
                  e->ckpt_dir, slash ? (int)(slash - e->ckpt_dir) : 1, slash ? e->ckpt_dir : ".");
        return EXIT_USAGE;
    }
    /* A directory that is not there holds nothing to evaluate: bad usage (a mistyped path, or a run
     * that never saved), refused before the data is opened, as a missing --data is. */
    if (!found && (errno == ENOENT || errno == ENOTDIR)) {
        cli_error("--checkpoint-dir %s does not exist: give the directory a `dtrain train --checkpoint-dir` "
                  "saved into; eval loads the newest sound checkpoint there",
                  e->ckpt_dir);
        return EXIT_USAGE;
    }
    /* --holdout evaluates a part of the train split: with --split test it would silently evaluate
     * another split than the one asked for. */
    if (e->holdout > 0 && e->split_given && strcmp(e->split, "train")) {
        cli_error("--split %s and --holdout %s cannot go together: --holdout F evaluates the held-out part (F) of "
                  "the train split, --split picks a whole split; give one of them",
                  e->split, e->holdout_arg);
        return EXIT_USAGE;
    }
    /* --eval-data names the samples itself: a split or a holdout of --data would be ignored. */
    if (e->eval_data && (e->split_given || e->holdout > 0)) {
        cli_error("--eval-data %s and %s %s cannot go together: --eval-data evaluates all of PATH (--data %s only "
                  "numbers its classes), %s picks a part of --data; give one of them",
                  e->eval_data, e->split_given ? "--split" : "--holdout", e->split_given ? e->split : e->holdout_arg,
                  e->data, e->split_given ? "--split" : "--holdout");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The figures, as rank 0 prints them: what was evaluated, the totals, then per class (eval_figures.h);
 * `all` samples in the set, of which those not in r->count were left out as undecodable. */
static void print_result(const eval_opts *e, long step, const dt_eval_result *r, int K, size_t all)
{
    struct stat sb;
    if (e->eval_data)
        printf("dtrain eval: --eval-data %s (classes numbered as in %s), checkpoint of step %ld in %s\n", e->eval_data,
               e->data, step, e->ckpt_dir);
    else if (e->holdout > 0)
        printf("dtrain eval: %s (the --holdout part of the train split), checkpoint of step %ld in %s\n", e->data, step,
               e->ckpt_dir);
    else if (stat(e->data, &sb) == 0 && !S_ISDIR(sb.st_mode))
        /* One file is its own samples whatever the split, as for dtrain train: no test split of it. */
        printf("dtrain eval: %s (one file: all its samples), checkpoint of step %ld in %s\n", e->data, step,
               e->ckpt_dir);
    else
        printf("dtrain eval: %s (%s split), checkpoint of step %ld in %s\n", e->data, e->split, step, e->ckpt_dir);
    const double loss = r->count ? r->loss_sum / (double)r->count : 0;
    /* fabs: glibc prints a NaN with its sign bit as "-nan", which reads as a value. */
    printf("accuracy %.4f (%ld of %ld correct), mean loss %.4f\n", r->count ? (double)r->correct / r->count : 0,
           r->correct, r->count, isnan(loss) ? fabs(loss) : loss);
    if ((long)all > r->count)
        printf("--bad-samples skip: %ld of the %zu samples could not be decoded: left out of these figures "
               "(dtrain data verify PATH names them)\n",
               (long)all - r->count, all);
    eval_figures_print(r, K, e->confusion_csv != NULL);
}

/* path is an input or would sit among them: the --data or --eval-data file itself, or a file in
 * the --data, --eval-data or --checkpoint-dir directory (a dataset's part, a checkpoint), whether
 * or not it exists yet, so that a second run of the same command is judged as the first was. */
static int csv_replaces_input(const eval_opts *e, const char *path)
{
    /* Where the CSV will go: the file a link leads to, which the writer replaces. */
    char real[4096];
    int in_place;
    path = ckpt_write_target(path, real, sizeof real, &in_place);
    if (in_place) return 0; /* a device or stream: written in place, replacing no file */
    struct stat p, in;
    const int exists = stat(path, &p) == 0;
    if (exists && S_ISDIR(p.st_mode)) return 0;
    const char *const ins[3] = {e->data, e->ckpt_dir, e->eval_data};
    const int nins = e->eval_data ? 3 : 2;
    for (int i = 0; i < nins; i++)
        if (exists && stat(ins[i], &in) == 0 && p.st_dev == in.st_dev && p.st_ino == in.st_ino) return 1;
    char dir[4096];
    path_parent_dir(path, dir, sizeof dir);
    struct stat d;
    if (stat(dir, &d) != 0) return 0;
    for (int i = 0; i < nins; i++)
        if (stat(ins[i], &in) == 0 && S_ISDIR(in.st_mode) && d.st_dev == in.st_dev && d.st_ino == in.st_ino) return 1;
    return 0;
}

/* --confusion-csv: rank 0 (which writes it) tries the path before the evaluation, so a bad one
 * stops the command before it works rather than after; its verdict (why, empty when the path is
 * good) goes to every rank, so all stop together. Collective. */
static dt_status csv_try(dt_ctx *ctx, const eval_opts *e, char *why, size_t len)
{
    const char *path = e->confusion_csv;
    why[0] = 0;
    if (!path) return DT_OK;
    if (dt_rank(ctx) == 0 && csv_replaces_input(e, path))
        snprintf(why, len,
                 "--confusion-csv %s is an input or among them (the --data or --eval-data file, or a file in "
                 "the --data, --eval-data or --checkpoint-dir directory): give a path elsewhere",
                 path);
    else if (dt_rank(ctx) == 0 && ckpt_write_file_try(path, "--confusion-csv"))
        snprintf(why, len, "%s", dt_last_error());
    int refused;
    const dt_status s = cli_rank0_verdict(ctx, why, len, &refused);
    if (!s && !refused) why[0] = 0;
    return s;
}

/* --holdout against the checkpoint's run record (train_record_check_holdout). The record is rank
 * 0's, given to every rank, and the split each rank's own open of the same --data: a refusal is
 * every rank's alike, said once ("(the same on all N ranks)") and ended by every rank, not once per
 * rank and an abort; a rank whose data differs says its own. *said: the refusal was printed, on a
 * rank that met it or learned of it. Collective: one exchange, only with --holdout and a record. */
static dt_status holdout_agreed(dt_ctx *ctx, const eval_opts *e, const train_record *saved, const dt_dataset *d,
                                int *said, int *shared)
{
    const dt_status s = train_record_check_holdout(saved, e->holdout_arg, dataset_split_size(d), dt_dataset_size(d));
    char why[1024] = "";
    if (s) cli_status_text(why, sizeof why, NULL, s);
    const int rc = cli_agree_failure(ctx, s ? EXIT_USAGE : EXIT_OK, why, shared);
    *said = rc != EXIT_OK;
    return rc == EXIT_OK ? DT_OK : rc == EXIT_USAGE ? DT_ERR_INVALID_ARG : DT_ERR_MPI;
}

/* What the checkpoint's run record says of the samples eval reads from the train split: --holdout
 * must set aside exactly what training kept aside (holdout_agreed), else trained samples would
 * count as held out; without --holdout, --split train on a run that kept some aside evaluates
 * samples it never saw beside those it trained on, said in a note. A checkpoint without a record
 * (older, or the library's dt_checkpoint_save) cannot tell: said in one line. The test split is not
 * the record's business. *said and *shared: holdout_agreed's. Collective (rank 0 reads the record,
 * every rank gets it). */
static dt_status check_record(dt_ctx *ctx, const eval_opts *e, const dt_dataset *d, long step, int *said, int *shared)
{
    if (e->holdout <= 0 && strcmp(e->split, "train")) return DT_OK;
    train_record saved;
    size_t found = 0;
    const dt_status s = ckpt_read_extra(ctx, e->ckpt_dir, step, TRAIN_RECORD_SECTION, &saved, sizeof saved, &found);
    if (s == DT_ERR_MPI || s == DT_ERR_TIMEOUT) return s;
    char why[512] = "";
    if (s)
        snprintf(why, sizeof why, "has a run record that cannot be read (%s)", dt_last_error());
    else if (!found)
        snprintf(why, sizeof why,
                 "keeps no run record (written before dtrain kept one, or by the library's dt_checkpoint_save)");
    else if (found != sizeof saved || saved.version != TRAIN_RECORD_VERSION)
        snprintf(why, sizeof why, "has a run record this dtrain does not read (%zu bytes, version %u)", found,
                 found == sizeof saved ? saved.version : 0u);
    if (why[0]) {
        if (e->holdout > 0 && dt_rank(ctx) == 0)
            fprintf(stderr,
                    "dtrain: warning: the checkpoint of step %ld in %s %s: whether --holdout %s sets aside the "
                    "samples training kept aside cannot be checked\n",
                    step, e->ckpt_dir, why, e->holdout_arg);
        return DT_OK;
    }
    if (saved.synthetic) return DT_OK; /* trained on dtrain's synthetic data: none of these samples */
    const size_t n = dataset_split_size(d);
    if (e->holdout > 0) return holdout_agreed(ctx, e, &saved, d, said, shared);
    if (saved.samples > 0 && saved.samples < n && dt_rank(ctx) == 0) {
        char f[32];
        train_record_holdout_for(n - (size_t)saved.samples, n, f, sizeof f);
        printf("note: the checkpoint's run kept %zu of the train split's %zu samples aside (--holdout %s) and never "
               "trained on them: these figures mix them with the trained ones; --holdout %s evaluates them alone\n",
               n - (size_t)saved.samples, n, f, f);
    }
    return DT_OK;
}

/* How the data is read: the checkpoint's normalization (set once it is loaded, so no statistics
 * pass), not shuffled, the split or --holdout's part of the train split. */
static void eval_data_config(const eval_opts *e, dt_data_config *dc)
{
    dt_data_defaults(dc);
    dc->format = e->format;
    dc->cifar100_coarse = e->cifar100_coarse;
    dc->split = e->holdout > 0 ? "train" : e->split;
    dc->holdout = e->holdout, dc->holdout_part = 1;
    dc->shuffle = 0;
    dc->skip_bad = e->skip_bad;
    dc->normalize = DT_NORMALIZE_NONE; /* the checkpoint's comes below: no statistics pass */
    if (e->input && model_spec_input(e->input, &dc->c, &dc->h, &dc->w) != 3) {
        dc->c = dc->h = dc->w = 0; /* N (features) sizes no image; a bad shape is the model's to refuse */
        status_clear_error();
    }
}

/* What one evaluation holds, freed by eval_free; on a failure, what the exit code is made of. */
typedef struct eval_run {
    dt_dataset *d;
    dt_model *m;
    dt_eval_result r;
    float *stats;        /* the checkpoint's normalization figures: mean then std, C each */
    dt_status s;         /* the failure; for one said already (EVAL_FAILED_SAID) DT_OK (exit 1) or its status */
    int shared;          /* the failure is one every rank knows of (cli_end_failed) */
    const char *opening; /* the path an open failure is about */
} eval_run;

enum { EVAL_FAILED = 1, EVAL_FAILED_SAID };

static void eval_free(eval_run *er)
{
    free(er->r.class_correct), free(er->r.class_count), free(er->r.confusion), free(er->stats);
    dt_model_free(er->m);
    dt_dataset_free(er->d);
}

/* The data into er->d: --data's split, or --eval-data whole with --data's class numbering. Every
 * rank opens the data on its own: a wrong path fails on all of them alike, said once (with how
 * many ranks met it) and ended by every rank, as dtrain train does, not once per rank and an
 * abort. Collective. EXIT_OK, or the exit code every rank has. */
static int eval_open_data(dt_ctx *ctx, const eval_opts *e, dt_data_config *dc, eval_run *er)
{
    dt_status s;
    char open_why[2048] = "";
    cli_error_capture(open_why, sizeof open_why);
    if (e->eval_data) {
        /* --data's train split gives the class numbering alone (an image folder's names; other
         * formats' labels are numbers already), then goes: eval reads --eval-data only. */
        dt_dataset *ref = NULL;
        dc->split = NULL;
        if (!(s = dt_dataset_open(e->data, dc, &ref))) {
            dc->classes_like = ref;
            int C, H, W; /* without --input an image folder decodes to the training samples' shape */
            dt_dataset_shape(ref, &C, &H, &W);
            if (!dc->c && (C == 1 || C == 3)) dc->c = C, dc->h = H, dc->w = W;
            er->opening = e->eval_data;
            s = dt_dataset_open(e->eval_data, dc, &er->d);
            dt_dataset_free(ref);
        }
    } else {
        s = dt_dataset_open(e->data, dc, &er->d);
    }
    if (s) cli_error("%s %s: %s", er->opening == e->data ? "--data" : "--eval-data", er->opening, dt_last_error());
    cli_error_capture(NULL, 0);
    er->s = s;
    return cli_agree_failure(ctx, s ? cli_input_exit(s, er->opening) : EXIT_OK, open_why, &er->shared);
}

/* The model (--model, and --input or the data's shape) with the newest sound checkpoint's weights,
 * its run record checked, and its normalization set on the data. *step: the checkpoint's. 0, or
 * EVAL_FAILED(_SAID). Collective. */
static int eval_load(dt_ctx *ctx, const eval_opts *e, eval_run *er, long *step)
{
    int C, H, W;
    dt_dataset_shape(er->d, &C, &H, &W);
    char input[64];
    if (e->input)
        snprintf(input, sizeof input, "%s", e->input);
    else if (H == 1 && W == 1)
        snprintf(input, sizeof input, "%d", C);
    else
        snprintf(input, sizeof input, "%dx%dx%d", C, H, W);
    if ((er->s = dt_model_create(ctx, e->model, input, 1, e->batch, &er->m))) return EVAL_FAILED;
    if (!(er->stats = malloc(2 * (size_t)C * sizeof *er->stats))) {
        cli_error("out of memory");
        return EVAL_FAILED_SAID;
    }
    dt_ckpt_data cd = {.channels = C, .mean = er->stats, .std = er->stats + C};
    *step = 0;
    if ((er->s = dt_checkpoint_load_latest(ctx, e->ckpt_dir, er->m, NULL, NULL, &cd, step))) return EVAL_FAILED;
    if (*step == 0 && !cd.present) {
        /* Rank 0 read the directory and every rank has its outcome: said once, by rank 0. */
        if (dt_rank(ctx) == 0)
            cli_error("no loadable checkpoint in %s: train with --checkpoint-dir %s first", e->ckpt_dir, e->ckpt_dir);
        er->shared = 1;
        return EVAL_FAILED_SAID;
    }
    int said = 0;
    if ((er->s = check_record(ctx, e, er->d, *step, &said, &er->shared))) return said ? EVAL_FAILED_SAID : EVAL_FAILED;
    if (cd.present && cd.normalize >= 0) {
        if ((er->s = dt_dataset_set_normalization(er->d, (dt_normalize)cd.normalize, cd.mean, cd.std)))
            return EVAL_FAILED;
    } else if (dt_rank(ctx) == 0) {
        fprintf(stderr,
                "dtrain: warning: the checkpoint in %s keeps no normalization (an older one): evaluating on "
                "the values as read\n",
                e->ckpt_dir);
    }
    return 0;
}

/* The evaluation, and rank 0's figures (and --confusion-csv). 0, or EVAL_FAILED(_SAID). Collective. */
static int eval_figures(dt_ctx *ctx, const eval_opts *e, int threads, eval_run *er, long step)
{
    const int K = dt_model_num_classes(er->m);
    er->r.class_correct = calloc((size_t)K, sizeof(long));
    er->r.class_count = calloc((size_t)K, sizeof(long));
    er->r.confusion = calloc((size_t)K * K, sizeof(long));
    if (!er->r.class_correct || !er->r.class_count || !er->r.confusion) {
        cli_error("out of memory for the figures of %d classes", K);
        return EVAL_FAILED_SAID;
    }
    if ((er->s = dt_evaluate(ctx, er->m, er->d, e->batch, threads, &er->r))) return EVAL_FAILED;
    if (dt_rank(ctx) == 0) {
        print_result(e, step, &er->r, K, dt_dataset_size(er->d));
        if (e->confusion_csv && eval_figures_write_csv(e->confusion_csv, &er->r, K)) return EVAL_FAILED_SAID;
        fflush(stdout);
    }
    return 0;
}

/* A failure after the data opened (how: EVAL_FAILED, said here, or EVAL_FAILED_SAID): everything
 * freed, the job ended. */
static int eval_failed(dt_ctx *ctx, eval_run *er, int how)
{
    if (how == EVAL_FAILED && status_shared(er->s) && dt_world_size(ctx) > 1) {
        /* Every rank returned it (a model the grammar refuses): said once where met alike. */
        cli_say_shared_failure(ctx, er->s, NULL, &er->shared);
    } else if (how == EVAL_FAILED) {
        er->shared = status_shared(er->s);
        if (!cli_peer_failure(er->s)) cli_status_error(NULL, er->s);
    }
    const int opened = er->d != NULL;
    eval_free(er);
    /* Before d opened, the failure was its open: a --data that cannot be reached is bad usage. */
    const int rc = opened ? (er->s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL) : cli_input_exit(er->s, er->opening);
    return cli_end_failed(ctx, rc, er->shared);
}

/* The flags every rank must share: what is evaluated and how. Another --eval-data or --split on one
 * rank evaluated its shard of other samples, summed into rank 0's figures under rank 0's header;
 * another --confusion-csv or --holdout ran other collectives. Paths only as given or not (a node
 * may read its own copy); --batch and --loader-threads are the rank's own (the figures do not
 * depend on them). */
static void eval_flags_text(const eval_opts *e, cli_flags_text *a)
{
    memset(a, 0, sizeof *a);
    cli_flags_path(a, "--data", e->data);
    cli_flags_path(a, "--eval-data", e->eval_data);
    cli_flags_path(a, "--checkpoint-dir", e->ckpt_dir);
    cli_flags_path(a, "--confusion-csv", e->confusion_csv);
    cli_flags_line(a, "--split %s", e->split);
    cli_flags_line(a, "--holdout %s", CLI_F64_TEXT(e->holdout));
    cli_flags_line(a, "--cifar100-labels %s", e->cifar100_coarse ? "coarse" : "fine");
    cli_flags_line(a, "--bad-samples %s", e->skip_bad ? "skip" : "fail");
    cli_flags_line(a, "--data-format %s", e->format ? e->format : "(auto)");
    cli_flags_line(a, "--input %s", e->input ? e->input : "(the data's)");
    cli_flags_line(a, "--model %s", e->model);
}

int cmd_eval(int argc, char **argv)
{
    eval_opts e = {.model = "mlp", .split = "test", .batch = 256, .loader_threads = -1};
    dt_config cfg;
    const cli_extra extra = {eval_options, eval_handle, &e, eval_check};
    cli_job job;
    int rc = cli_start(argc, argv, "eval", &cfg, &extra, &job);
    if (rc) return rc;
    dt_ctx *ctx = job.ctx;
    cli_flags_text flags;
    eval_flags_text(&e, &flags);
    int shared = 0;
    if ((rc = cli_flags_agree(ctx, "evaluation flags (paths aside), since the ranks evaluate one model together",
                              &flags, &shared)))
        return cli_end_failed(ctx, rc, shared);
    char why[1024];
    dt_status s = csv_try(ctx, &e, why, sizeof why);
    if (s) return cli_fail(ctx, s, "--confusion-csv");
    if (why[0]) return cli_finish(ctx, EXIT_USAGE); /* rank 0 said why */
    const int auto_threads = cli_loader_auto(ctx, e.loader_threads), threads = auto_threads > 0 ? auto_threads : 1;
    dt_data_config dc;
    eval_data_config(&e, &dc);
    eval_run er = {.opening = e.data};
    if ((rc = eval_open_data(ctx, &e, &dc, &er))) {
        dt_dataset_free(er.d);
        return cli_end_failed(ctx, rc, er.shared);
    }
    long step = 0;
    int how = eval_load(ctx, &e, &er, &step);
    if (!how) how = eval_figures(ctx, &e, threads, &er, step);
    if (how) return eval_failed(ctx, &er, how);
    eval_free(&er);
    return cli_finish(ctx, EXIT_OK);
}
