/*
 * train_data.c - which data `dtrain train` reads (train_data.h).
 *
 * Without --data: the synthetic teacher data of --dataset-size samples, not normalized (its
 * values are already centred in [-1, 1)) unless --normalize says so. With --data PATH: the
 * file's training split; the held-out set is --eval-data, else --holdout's share, else the
 * file's test split (MNIST t10k-*, CIFAR test_batch.bin / test.bin, test.dts, an image folder's
 * val/ or valid/, validation/, test/); the two flags exclude each other. A test split whose files
 * are there but do not open fails the run, as --eval-data's would; without one the run trains
 * with no held-out set and says so. The held-out set uses the training set's
 * normalization figures, never its own.
 */
#include "launch/train/train_data.h"

#include "base/log.h"
#include "base/status.h"
#include "launch/cli.h"
#include "runtime/data/dataset.h"
#include "runtime/data/reader.h"
#include "runtime/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void data_config(const train_opts *t, int threads, dt_data_config *c)
{
    dt_data_defaults(c);
    c->format = t->data_format;
    c->cifar100_coarse = t->cifar100_coarse;
    c->normalize = t->normalize >= 0 ? (dt_normalize)t->normalize : t->data ? DT_NORMALIZE_STANDARD : DT_NORMALIZE_NONE;
    /* Figures given: none at the open (no pass over the data for figures not used), set after it
     * once the channels are known (cli_normalize_apply). */
    if (t->norm.n) c->normalize = DT_NORMALIZE_NONE;
    c->seed = (uint64_t)t->seed;
    c->shuffle = t->shuffle;
    c->drop_last = t->drop_last;
    c->crop_pad = t->crop_pad;
    c->flip = t->flip;
    c->skip_bad = t->skip_bad;
    c->threads = threads;
    /* --input CxHxW is the shape an image folder decodes to. */
    if (t->input && model_spec_input(t->input, &c->c, &c->h, &c->w) != 3) {
        c->c = c->h = c->w = 0; /* N (features) sizes no image; a bad shape is the model's to refuse */
        status_clear_error();
    }
}

int train_data_open(const train_opts *t, int threads, const train_figures *ckpt, train_data *d)
{
    memset(d, 0, sizeof *d);
    d->figures_of = -1;
    if (!t->data) {
        /* Each of these only changes how files are read or evaluated: without --data it would do nothing. */
        if (t->eval_data || t->holdout > 0 || t->data_format || t->eval_every_set || t->cifar100_set) {
            cli_error("%s needs --data PATH (without it dtrain trains on its synthetic data)",
                      t->eval_data        ? "--eval-data"
                      : t->holdout > 0    ? "--holdout"
                      : t->data_format    ? "--data-format"
                      : t->eval_every_set ? "--eval-every"
                                          : "--cifar100-labels");
            return EXIT_USAGE;
        }
        if (t->input) snprintf(d->input, sizeof d->input, "%s", t->input);
        return EXIT_OK; /* the synthetic set is made once the model gives its shape */
    }
    if (t->eval_data && t->holdout > 0) {
        /* Both name the held-out set: one would be dropped without a word. */
        cli_error("--holdout %g keeps part of the training set aside and --eval-data %s names another held-out set: "
                  "drop one of them",
                  t->holdout, t->eval_data);
        return EXIT_USAGE;
    }
    dt_data_config c;
    data_config(t, threads, &c);
    c.holdout = t->holdout;
    /* Figures to compute are not computed by every rank alone at the open, but once for the job
     * (train_data_normalize), or not at all where a resume's checkpoint brings them (the load
     * would replace computed ones): those are taken when the channels agree (else the pass runs,
     * and the load refuses the checkpoint of other data). */
    dt_status s = dataset_open_deferred(t->data, &c, &d->train);
    int C;
    dt_dataset_shape(d->train, &C, NULL, NULL);
    if (!s && dataset_normalization_deferred(d->train) && ckpt && ckpt->figures && C == ckpt->channels) {
        s = dt_dataset_set_normalization(d->train, DT_NORMALIZE_STANDARD, ckpt->figures, ckpt->figures + C);
        if (!s) d->figures_of = ckpt->step;
    }
    if (s) {
        cli_error("--data %s: %s", t->data, dt_last_error());
        return cli_input_exit(s, t->data);
    }
    int H, W;
    dt_dataset_shape(d->train, NULL, &H, &W);
    if (t->input)
        snprintf(d->input, sizeof d->input, "%s", t->input);
    else if (H == 1 && W == 1)
        snprintf(d->input, sizeof d->input, "%d", C);
    else
        snprintf(d->input, sizeof d->input, "%dx%dx%d", C, H, W);
    return EXIT_OK;
}

int train_data_normalize(dt_ctx *ctx, const train_opts *t, train_data *d, int *shared)
{
    *shared = 0;
    if (!d->train) return EXIT_OK;
    const dt_status s = dataset_compute_normalization(ctx, d->train);
    if (s) {
        *shared = status_shared(s);
        if (!cli_peer_failure(s)) cli_error("--data %s: %s", t->data, dt_last_error());
        return cli_input_exit(s, t->data);
    }
    return EXIT_OK;
}

/* The --model (and --input) that end the user's own layers in fc:K, into buf: the last layer
 * widened or narrowed (it is always an fc, the model parse made sure), as an mlp suggested to a
 * cnn user would change the model. */
static void model_for_classes(const train_opts *t, int K, char *buf, size_t len)
{
    const char *spec = model_preset(t->model) ? model_preset(t->model) : t->model;
    const char *last = strrchr(spec, ',');
    const int keep = last ? (int)(last - spec) + 1 : 0;
    snprintf(buf, len, "--model '%.*sfc:%d'%s%s", keep, spec, K, t->input ? " --input " : "", t->input ? t->input : "");
}

/* Without --data: the synthetic set of the model's shape and classes, made now that the model
 * gives them. */
static int open_synthetic(const train_opts *t, const dt_model *m, int threads, train_data *d)
{
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    dt_data_config cfg;
    data_config(t, threads, &cfg);
    dt_status s = dt_synthetic_open(c, h, w, dt_model_num_classes(m), (size_t)t->dataset_size, (uint64_t)t->seed, &cfg,
                                    &d->train);
    if (!s) s = dt_dataset_set_synthetic_on(d->train, t->synthetic_on);
    if (s) {
        cli_error("%s", dt_last_error());
        return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    }
    return cli_normalize_apply(&t->norm, d->train);
}

/* The --data training set against the model: samples of its input's size, no more classes than
 * its outputs (fewer: a warning). *K: the data's classes. */
static int check_train_set(const train_opts *t, const dt_model *m, const train_data *d, int *K)
{
    if (t->synthetic_on == DT_SYNTHETIC_DEVICE) {
        cli_error("--synthetic-on device: --data %s is read from files; only dtrain's synthetic data (no --data) is "
                  "made on the GPU",
                  t->data);
        return EXIT_USAGE;
    }
    int C, H, W;
    dt_dataset_shape(d->train, &C, &H, &W);
    const size_t values = (size_t)C * H * W;
    if (values != dt_model_input_size(m)) {
        int mc, mh, mw;
        dt_model_input_shape(m, &mc, &mh, &mw);
        cli_error("--data %s holds samples of %dx%dx%d (%zu values) but the model takes %dx%dx%d (%zu): drop --input "
                  "to take the data's shape, or give a model for it",
                  t->data, C, H, W, values, mc, mh, mw, dt_model_input_size(m));
        return EXIT_USAGE;
    }
    *K = dt_dataset_num_classes(d->train);
    const int outputs = dt_model_num_classes(m);
    char model_k[4200];
    model_for_classes(t, *K, model_k, sizeof model_k);
    if (*K > outputs) {
        cli_error("--data %s has %d classes but the model's last layer has %d outputs: end the model with fc:%d "
                  "(%s); more classes than the data should have are a label out of range: dtrain data info %s "
                  "counts the samples of each",
                  t->data, *K, outputs, *K, model_k, t->data);
        return EXIT_USAGE;
    }
    /* Fewer classes than outputs trains, the extra outputs never a label: a warning, not a refusal,
     * as classes may be added to the data later. */
    if (*K < outputs)
        log_msg0(LOG_LEVEL_WARN,
                 "--data %s has %d classes but the model's last layer has %d outputs: the %d without a class are "
                 "trained never to be predicted; to match the data end the model with fc:%d (%s), or keep it for "
                 "classes still to come",
                 t->data, *K, outputs, outputs - *K, *K, model_k);
    return EXIT_OK;
}

/* The held-out set's configuration into c: training's reading without its shuffle and
 * augmentation, with its normalization figures and class numbering; which set (--eval-data,
 * --holdout's part, or the test split) named in d->eval_what. Returns the path to open. */
static const char *eval_config(const train_opts *t, int threads, train_data *d, dt_data_config *c)
{
    int C, H, W;
    dt_dataset_shape(d->train, &C, &H, &W);
    data_config(t, threads, c);
    c->shuffle = 0, c->crop_pad = 0, c->flip = 0;
    const float *mean, *std;
    c->normalize = dt_dataset_normalization(d->train, &mean, &std);
    c->mean = mean, c->std = std;
    c->classes_like = d->train; /* an image folder's classes keep training's numbering */
    if (t->eval_data) {
        snprintf(d->eval_what, sizeof d->eval_what, "--eval-data %s", t->eval_data);
        /* An image folder decodes to the training samples' shape when --input gives none (a .dts,
         * IDX or CIFAR training set has one), rather than asking for a shape the model must take anyway. */
        if (!c->c && (C == 1 || C == 3)) c->c = C, c->h = H, c->w = W;
    } else if (t->holdout > 0) {
        c->holdout = t->holdout, c->holdout_part = 1;
        snprintf(d->eval_what, sizeof d->eval_what, "--holdout %g of %s", t->holdout, t->data);
    } else {
        c->split = "test";
    }
    return t->eval_data ? t->eval_data : t->data;
}

/* The held-out set into d->eval: --eval-data, --holdout's part, or --data's test split, which may
 * be none (d->eval NULL, d->eval_what says why, EXIT_OK). */
static int open_eval(const train_opts *t, int threads, train_data *d)
{
    dt_data_config c;
    const char *path = eval_config(t, threads, d, &c);
    dt_status s = dt_dataset_open(path, &c, &d->eval);
    if (s && !t->eval_data && t->holdout <= 0) {
        /* A test split whose files are there but do not open is refused: training would run to its
         * end without the held-out figures the files were meant to give, said in one line. */
        const ds_open_opts o = {.format = t->data_format};
        if (ds_has_test_split(t->data, &o)) {
            cli_error("--data %s has a test split (the held-out set), and it does not open: %s (for another held-out "
                      "set give --holdout F or --eval-data PATH; to train without one, remove its files)",
                      t->data, dt_last_error());
            return EXIT_FAIL;
        }
        /* No test split: training goes on without held-out figures, and says so. */
        snprintf(d->eval_what, sizeof d->eval_what, "none (%s)", dt_last_error());
        d->eval = NULL;
        return EXIT_OK;
    }
    if (s) {
        cli_error("%s: %s", d->eval_what, dt_last_error());
        return cli_input_exit(s, path);
    }
    if (!t->eval_data && t->holdout <= 0) {
        /* One file is its own samples whatever the split: that is no held-out set. */
        struct stat sb;
        if (stat(t->data, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            dt_dataset_free(d->eval);
            d->eval = NULL;
            snprintf(d->eval_what, sizeof d->eval_what, "none (%s is one file: give --eval-data or --holdout F)",
                     t->data);
            return EXIT_OK;
        }
        snprintf(d->eval_what, sizeof d->eval_what, "the test split of %s", t->data);
    }
    return EXIT_OK;
}

/* The held-out set against the training set's samples and the model's outputs (K: the training
 * data's classes, for the message). */
static int check_eval_set(const dt_model *m, const train_data *d, int K)
{
    int C, H, W, ec, eh, ew;
    dt_dataset_shape(d->train, &C, &H, &W);
    dt_dataset_shape(d->eval, &ec, &eh, &ew);
    if (ec != C || eh != H || ew != W) {
        cli_error(
            "the held-out data (%s) holds %dx%dx%d samples, the training data %dx%dx%d: give held-out data of the "
            "same kind",
            d->eval_what, ec, eh, ew, C, H, W);
        return EXIT_USAGE;
    }
    /* Labels the model has no output for could never be predicted: the model's outputs are the
     * limit (they may be more than the training data's classes), not the training classes. */
    const int EK = dt_dataset_num_classes(d->eval), MK = dt_model_num_classes(m);
    if (EK > MK) {
        cli_error("the held-out data (%s) has labels up to %d (%d classes), the model only %d outputs (labels 0 to %d; "
                  "the training data has %d classes): give held-out data of the training data's classes",
                  d->eval_what, EK - 1, EK, MK, MK - 1, K);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int train_data_check_and_eval(const train_opts *t, const dt_model *m, int threads, train_data *d)
{
    if (!d->train) return open_synthetic(t, m, threads, d);
    int K = 0, rc;
    if ((rc = cli_normalize_apply(&t->norm, d->train)) || (rc = check_train_set(t, m, d, &K)) ||
        (rc = open_eval(t, threads, d)))
        return rc;
    return d->eval ? check_eval_set(m, d, K) : EXIT_OK;
}

void train_data_describe(const train_opts *t, const train_data *d, int world, FILE *out)
{
    int C, H, W;
    dt_dataset_shape(d->train, &C, &H, &W);
    const long batches = dt_dataset_steps_per_epoch(d->train, world, t->batch), per = batches / t->accum_steps;
    char shape[64], fmt[32] = "", steps[96];
    if (batches < 1 || (per > 0 && batches % t->accum_steps == 0))
        snprintf(steps, sizeof steps, "%ld step%s per epoch", per, cli_s(per));
    else if (per > 0) /* steps run on across an epoch's end: the epoch is a fraction of them */
        snprintf(steps, sizeof steps, "%.2f steps per epoch (%ld batches, %d a step)", (double)batches / t->accum_steps,
                 batches, t->accum_steps);
    else /* "0 steps per epoch" would read as an empty epoch */
        snprintf(steps, sizeof steps, "a step of %d batches is longer than an epoch (%ld batch%s)", t->accum_steps,
                 batches, batches == 1 ? "" : "es");
    if (H == 1 && W == 1)
        snprintf(shape, sizeof shape, "%d feature%s", C, cli_s(C));
    else
        snprintf(shape, sizeof shape, "%dx%dx%d", C, H, W);
    if (t->data) snprintf(fmt, sizeof fmt, " (%s)", dt_dataset_format(d->train));
    fprintf(out, "data: %s%s, %zu samples of %s, %d classes; %s (%s, %s)\n", dt_dataset_source(d->train), fmt,
            dt_dataset_size(d->train), shape, dt_dataset_num_classes(d->train), steps,
            t->shuffle ? "shuffled each epoch" : "file order",
            t->drop_last ? "the last partial step dropped" : "the last step padded by wrapping");
    const float *mean, *std;
    const dt_normalize nz = dt_dataset_normalization(d->train, &mean, &std);
    if (nz == DT_NORMALIZE_STANDARD) {
        /* Bytes are shown in the 0..1 units torchvision users know (the same normalization). */
        const double u = dt_dataset_uint8(d->train) ? 1.0 / 255.0 : 1.0;
        fprintf(out, "normalize: standard, per channel mean / std%s:", u != 1.0 ? " (of values / 255)" : "");
        for (int c = 0; c < C && c < 8; c++) fprintf(out, " %.4f / %.4f", mean[c] * u, std[c] * u);
        fprintf(out, "%s", C > 8 ? " ..." : "");
        if (d->figures_of >= 0) fprintf(out, " (from the checkpoint of step %ld)", d->figures_of);
        fprintf(out, "\n");
    } else {
        const int bytes = dt_dataset_uint8(d->train), dts = !strcmp(dt_dataset_format(d->train), "dts");
        fprintf(out, "normalize: %s%s\n",
                nz != DT_NORMALIZE_UNIT ? "none"
                : bytes                 ? "unit (bytes / 255)"
                                        : "unit: values as read (they are not bytes, so nothing is divided)",
                nz == DT_NORMALIZE_UNIT && !bytes && dts
                    ? "; an fp16/fp32 .dts of images written before its byte flag reads so: convert it again"
                    : "");
    }
    if (t->crop_pad || t->flip)
        fprintf(out, "augment:%s%.0d%s%s\n", t->crop_pad ? " random crop after padding " : "", t->crop_pad,
                t->crop_pad && t->flip ? "," : "", t->flip ? " horizontal flip" : "");
    if (t->data) {
        if (d->eval)
            fprintf(out, "held-out: %zu samples from %s; evaluated %s\n", dt_dataset_size(d->eval), d->eval_what,
                    t->eval_every ? "every --eval-every steps and at the end" : "at the end");
        else
            fprintf(out, "held-out: %s\n", d->eval_what);
    }
}

void train_data_free(train_data *d)
{
    dt_dataset_free(d->train);
    dt_dataset_free(d->eval);
    d->train = d->eval = NULL;
}
