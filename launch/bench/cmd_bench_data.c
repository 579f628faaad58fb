/*
 * cmd_bench_data.c - `dtrain bench data`: samples/s of the input pipeline alone (read + decode +
 * augment + normalize into the loader's batch buffers) on a dataset, per loader thread count,
 * side by side in one run; --data synthetic measures the built-in synthetic data (made, not read).
 *
 * The dataset is opened once (its statistics pass is not timed). For each thread count a loader
 * is started at step 0 and --warmup batches are taken untimed, then --batches timed: the
 * consumer takes each batch the moment it is ready, so the figure is what the loader can feed,
 * the ceiling of training on this data. The first thread count runs once untimed before the rows
 * (the process's first use of the batch memory would otherwise land in the first row, the ratio
 * column's base). The last two columns are the slowest and fastest of up to SPREAD_WINDOWS
 * windows of consecutive timed batches. One process, no MPI: started by a launcher of several
 * ranks it refuses.
 */
#include "launch/cli.h"
#include "launch/normalize_flag.h"
#include "runtime/model/model.h"
#include "base/clock.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Samples of --data synthetic: dtrain train's default --dataset-size. */
#define SYNTHETIC_SAMPLES ((size_t)60000)

typedef struct bdata_opts {
    const char *data, *format, *input;
    int batch, batches, warmup, crop_pad, flip, normalize, normalize_set;
    cli_norm_figures norm; /* --normalize standard:M,..:S,..: the figures given (norm.n 0: none) */
    int threads[16], nthreads;
} bdata_opts;

enum {
    OPT_DATA = 256,
    OPT_FORMAT,
    OPT_INPUT,
    OPT_BATCH,
    OPT_BATCHES,
    OPT_WARMUP,
    OPT_THREADS,
    OPT_AUGMENT,
    OPT_NORMALIZE
};

static const struct option bdata_options[] = {
    {"data", required_argument, NULL, OPT_DATA},           {"data-format", required_argument, NULL, OPT_FORMAT},
    {"input", required_argument, NULL, OPT_INPUT},         {"batch", required_argument, NULL, OPT_BATCH},
    {"batches", required_argument, NULL, OPT_BATCHES},     {"warmup", required_argument, NULL, OPT_WARMUP},
    {"threads", required_argument, NULL, OPT_THREADS},     {"augment", required_argument, NULL, OPT_AUGMENT},
    {"normalize", required_argument, NULL, OPT_NORMALIZE}, {NULL, 0, NULL, 0},
};

static int add_threads(const char *item, void *ud)
{
    bdata_opts *o = ud;
    return cli_int("--threads (a list of loader thread counts)", item, 0, 256, &o->threads[o->nthreads++]);
}

static int bdata_handle(int val, const char *arg, void *ud)
{
    bdata_opts *o = ud;
    switch (val) {
        case OPT_DATA: o->data = arg; return EXIT_OK;
        case OPT_FORMAT: o->format = arg; return EXIT_OK;
        case OPT_INPUT: o->input = arg; return EXIT_OK;
        case OPT_BATCH: return cli_int("--batch", arg, 1, 1 << 16, &o->batch);
        case OPT_BATCHES: return cli_int("--batches", arg, 1, 1 << 20, &o->batches);
        case OPT_WARMUP: return cli_int("--warmup", arg, 0, 1 << 20, &o->warmup);
        case OPT_THREADS: o->nthreads = 0; return cli_list("--threads", arg, 16, add_threads, o);
        case OPT_AUGMENT: return cli_augment(arg, &o->crop_pad, &o->flip);
        case OPT_NORMALIZE: o->normalize_set = 1; return cli_normalize_spec(arg, &o->normalize, &o->norm);
    }
    return EXIT_USAGE;
}

/* The windows the timed batches are cut into for the spread columns (fewer with fewer batches,
 * at least 2 T batches each):
 * one mean over one window hid a run that swung (a cold page cache, other jobs). */
#define SPREAD_WINDOWS 5

/* One setting's timing: the seconds of all timed batches, and the slowest and fastest window's
 * samples/s. */
typedef struct setting_time {
    double el, min_sps, max_sps;
} setting_time;

/* One setting: a loader of T threads from step 0, --warmup batches untimed, then --batches timed
 * into *t. */
static dt_status time_setting(dt_dataset *d, const bdata_opts *o, int T, setting_time *t)
{
    dt_loader *l;
    dt_status s = dt_loader_create(NULL, d, 0, 1, o->batch, 0, T, 4, &l);
    if (s) return s;
    const float *x;
    const int32_t *y;
    long step;
    for (int i = 0; i < o->warmup && !s; i++) s = dt_loader_next(l, &step, &x, &y);
    /* T threads make T batches at once, so they arrive in bursts: a window of fewer than 2 T
     * batches would time a burst, not the pipeline's rate. */
    const int per = 2 * (T > 1 ? T : 1), fit = o->batches / per;
    const int windows = fit < 1 ? 1 : fit < SPREAD_WINDOWS ? fit : SPREAD_WINDOWS;
    const double t0 = clock_now_s();
    double edge = t0;
    for (int k = 0; k < windows && !s; k++) {
        const int n = (k + 1) * o->batches / windows - k * o->batches / windows;
        for (int i = 0; i < n && !s; i++) s = dt_loader_next(l, &step, &x, &y);
        const double now = clock_now_s(), sps = (double)n * o->batch / (now - edge);
        t->min_sps = k == 0 || sps < t->min_sps ? sps : t->min_sps;
        t->max_sps = k == 0 || sps > t->max_sps ? sps : t->max_sps;
        edge = now;
    }
    t->el = edge - t0;
    dt_loader_free(l);
    return s;
}

/* The dataset o names (--data PATH or synthetic) opened as o's flags ask into *d, its figures
 * applied when --normalize gave them: EXIT_OK, or the exit code after saying what failed. */
static int open_dataset(bdata_opts *o, dt_dataset **d)
{
    /* The synthetic data as dtrain train makes it: 60,000 samples, not normalized unless asked. */
    const int synthetic = !strcmp(o->data, "synthetic");
    if (synthetic && !o->normalize_set) o->normalize = DT_NORMALIZE_NONE;
    dt_data_config dc;
    dt_data_defaults(&dc);
    dc.format = o->format;
    /* Figures given: no pass over the data for figures (minutes on a large image folder), set
     * after the open, as dtrain train does. */
    dc.normalize = o->norm.n ? DT_NORMALIZE_NONE : (dt_normalize)o->normalize;
    dc.crop_pad = o->crop_pad, dc.flip = o->flip;
    dc.threads = 2;
    /* The model's reading of --input (model_spec_input), of which only CxHxW sizes the data. */
    const int dims = o->input ? model_spec_input(o->input, &dc.c, &dc.h, &dc.w) : 3;
    if (dims != 3) {
        if (dims == 0)
            cli_error("--input: %s", dt_last_error());
        else
            cli_error("--input '%s' is one size (features); bench data needs CxHxW, e.g. 3x32x32", o->input);
        return EXIT_USAGE;
    }
    /* The built-in data dtrain train and bench step use by default: what its samples cost to make
     * (no file to read) sizes the loader threads a GPU step needs. */
    if (synthetic && !o->input) dc.c = 3, dc.h = dc.w = 32;
    dt_status s = synthetic ? dt_synthetic_open(dc.c, dc.h, dc.w, 10, SYNTHETIC_SAMPLES, 1, &dc, d)
                            : dt_dataset_open(o->data, &dc, d);
    if (s) {
        cli_error("--data %s: %s", o->data, dt_last_error());
        return cli_input_exit(s, o->data);
    }
    /* --input sizes what an image folder's samples are decoded to; the other formats have their
     * own shape, which the table would measure instead of the one asked for without a word. */
    int C, H, W;
    dt_dataset_shape(*d, &C, &H, &W);
    if (o->input && (C != dc.c || H != dc.h || W != dc.w)) {
        cli_error("--input %s: %s (%s) holds samples of %dx%dx%d, which --input does not change (it sizes an image "
                  "folder's decoded samples): drop --input, or give %dx%dx%d",
                  o->input, o->data, dt_dataset_format(*d), C, H, W, C, H, W);
        dt_dataset_free(*d);
        return EXIT_USAGE;
    }
    const int rc = cli_normalize_apply(&o->norm, *d);
    if (rc) dt_dataset_free(*d);
    return rc;
}

/* The table's header: what is measured (the data, its shape, the batches, the augmentation and
 * normalization), then the column names. */
static void print_header(const bdata_opts *o, dt_dataset *d, int C, int H, int W)
{
    printf("dtrain bench data: %s (%s), %zu samples of %dx%dx%d; batch %d, %d timed batches after %d warmup (and "
           "the first thread count once untimed before the rows);%s%s normalize %s\n",
           o->data, dt_dataset_format(d), dt_dataset_size(d), C, H, W, o->batch, o->batches, o->warmup,
           o->crop_pad ? " random crop," : "", o->flip ? " flip," : "",
           o->norm.n                               ? "standard (figures given)"
           : o->normalize == DT_NORMALIZE_STANDARD ? "standard"
           : o->normalize == DT_NORMALIZE_UNIT     ? "unit"
                                                   : "none");
    printf("%8s %14s %16s %12s %10s %14s %14s\n", "threads", "samples/s", "per thread", "MB/s out", "ratio",
           "min samples/s", "max samples/s");
}

/* One row per --threads count, each timed on d (samples of C x H x W), ratios to the first row's. */
static dt_status print_rows(dt_dataset *d, const bdata_opts *o, int C, int H, int W)
{
    /* The first setting once untimed: the first loader's buffers are the process's first touch of
     * that memory (the allocator's and the kernel's first-use costs, which --warmup batches of a
     * loader do not take off its own timed ones), and made the first row some 5% slower than the
     * same setting later, inflating every ratio to it. */
    setting_time st;
    double first = 0;
    dt_status s = DT_OK;
    if (o->nthreads) s = time_setting(d, o, o->threads[0], &st);
    for (int k = 0; k < o->nthreads && !s; k++) {
        const int T = o->threads[k];
        if ((s = time_setting(d, o, T, &st))) break;
        const double sps = (double)o->batches * o->batch / st.el;
        if (k == 0) first = sps;
        printf("%8d %14.1f %16.1f %12.1f %9.2fx %14.1f %14.1f\n", T, sps, sps / (T ? T : 1),
               sps * (double)C * H * W * sizeof(float) / 1e6, sps / first, st.min_sps, st.max_sps);
        fflush(stdout);
    }
    return s;
}

int cmd_bench_data(int argc, char **argv)
{
    bdata_opts o = {
        .batch = 256, .batches = 20, .warmup = 2, .normalize = DT_NORMALIZE_STANDARD, .threads = {1, 2}, .nthreads = 2};
    dt_config cfg;
    const cli_extra extra = {bdata_options, bdata_handle, &o, NULL};
    int rc = cli_parse(argc, argv, "bench data", &cfg, &extra);
    if (rc) return rc;
    if (!o.data) {
        cli_error("dtrain bench data needs --data PATH (the dataset to read, or synthetic)");
        return EXIT_USAGE;
    }
    /* One process measures the pipeline: under a launcher of several, every rank would time its
     * own loaders on the same cores as the others. */
    if ((rc = cli_one_process("bench data", "time its loaders on cores the others use and print its own table (its "
                                            "--threads list compares thread counts)")))
        return rc;
    dt_dataset *d;
    if ((rc = open_dataset(&o, &d))) return rc;
    int C, H, W;
    dt_dataset_shape(d, &C, &H, &W);
    print_header(&o, d, C, H, W);
    const dt_status s = print_rows(d, &o, C, H, W);
    if (dt_dataset_bad_samples(d)) printf("samples replaced (undecodable): %ld\n", dt_dataset_bad_samples(d));
    dt_dataset_free(d);
    if (s) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    return EXIT_OK;
}
