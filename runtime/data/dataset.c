/*
 * dataset.c - dt_dataset (dtrain.h): a split of any format opened through the reader interface,
 * the holdout's view of it, the normalization's figures, and the sampler's position.
 */
#include "runtime/data/dataset.h"
#include "runtime/data/synthetic.h"
#include "base/log.h"
#include "base/rng.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The holdout is drawn from a fixed stream, not from --seed: the same fraction of the same file
 * is the same held-out set in every run, so `dtrain eval --holdout F` sees what training kept
 * aside. */
#define STREAM_HOLDOUT 0x686f6c64ull

void dt_data_defaults(dt_data_config *c)
{
    if (!c) return;
    *c = (dt_data_config){.normalize = DT_NORMALIZE_STANDARD, .seed = 1, .shuffle = 1};
}

void dt_dataset_free(dt_dataset *d)
{
    if (!d) return;
    /* A loader's threads read the dataset ahead of use, at any moment until dt_loader_free joins
     * them: freeing it under them was a use after free that crashed the process on a loader
     * thread, at a random later point. Kept instead (a leak the message names), as dt_finalize
     * keeps the context while objects made on it live. */
    const int loaders = atomic_load_explicit(&d->loaders, memory_order_relaxed);
    if (loaders > 0) {
        status_set_error(DT_ERR_INVALID_ARG,
                         "dt_dataset_free: %d loader(s) still read this dataset, so it is not freed (their "
                         "threads would read freed memory): call dt_loader_free on them first, then "
                         "dt_dataset_free again",
                         loaders);
        log_msg(LOG_LEVEL_ERROR, "%s", dt_last_error());
        return;
    }
    ds_close(d->split);
    free(d->view);
    sampler_free(&d->smp);
    free(d->mean);
    free(d->std);
    free(d->mul);
    free(d->add);
    free(d);
}

/* The view of the holdout: the split's samples in a fixed random order, the last
 * round(fraction x count) of them kept aside; each part sorted so it keeps file order. */
static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static dt_status make_holdout(dt_dataset *d, double fraction, int part)
{
    const size_t n = d->split->count;
    const size_t aside = (size_t)llround(fraction * (double)n);
    if (aside < 1 || aside >= n)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--holdout %g of %zu samples keeps %zu aside: it must leave at least "
                                "one sample on each side",
                                fraction, n, aside);
    uint32_t *order = malloc(n * sizeof *order);
    if (!order) return status_set_error(DT_ERR_NOMEM, "out of memory for the holdout of %zu samples", n);
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rng_at(0, STREAM_HOLDOUT, i) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    const size_t first = part ? n - aside : 0, count = part ? aside : n - aside;
    memmove(order, order + first, count * sizeof *order);
    qsort(order, count, sizeof *order, cmp_u32);
    d->view = order;
    d->n = count;
    return DT_OK;
}

/* Decoded formats (image folders) estimate their statistics from this many samples at most,
 * evenly spaced: a pass over ImageNet's 1.28 M JPEGs would take as long as an epoch, and 20000
 * samples pin a channel's mean and std to about 1% of its std. */
#define STATS_DECODED_MAX 20000
/* So does a split of more values than this (a .dts of tens of GB under --holdout, which keeps its
 * header's figures from being the training part's): read whole, every rank would read every byte
 * of it before the first step. MNIST's and CIFAR's passes (47 and 154 M values) stay exact. */
#define STATS_EXACT_VALUES (1ull << 30)

size_t dataset_stats_stride(const char *format, size_t n, size_t values)
{
    const int sampled = strcmp(format, "imagefolder") == 0 || (values && n > STATS_EXACT_VALUES / values);
    return sampled && n > STATS_DECODED_MAX ? (n + STATS_DECODED_MAX - 1) / STATS_DECODED_MAX : 1;
}

/* The per-channel multiply-add of the normalization; standard needs the mean and std. defer: the
 * figures that would be computed here are left to dataset_compute_normalization. */
static dt_status set_normalization(dt_dataset *d, const dt_data_config *cfg, int threads, int defer)
{
    const int C = d->c;
    d->norm = cfg->normalize;
    if (d->norm == DT_NORMALIZE_NONE) return DT_OK;
    if (d->norm != DT_NORMALIZE_UNIT && d->norm != DT_NORMALIZE_STANDARD)
        return status_set_error(DT_ERR_INVALID_ARG, "normalization %d is not none, unit or standard", (int)d->norm);
    if (!(d->mul = malloc((size_t)C * sizeof *d->mul)) || !(d->add = malloc((size_t)C * sizeof *d->add)) ||
        !(d->mean = malloc((size_t)C * sizeof *d->mean)) || !(d->std = malloc((size_t)C * sizeof *d->std)))
        return status_set_error(DT_ERR_NOMEM, "out of memory for the normalization of %d channels", C);
    if (d->norm == DT_NORMALIZE_UNIT) {
        for (int c = 0; c < C; c++) d->mul[c] = d->split->uint8_values ? 1.0f / 255.0f : 1.0f, d->add[c] = 0;
        free(d->mean), free(d->std);
        d->mean = d->std = NULL;
        return DT_OK;
    }
    if (cfg->mean && cfg->std) {
        memcpy(d->mean, cfg->mean, (size_t)C * sizeof *d->mean);
        memcpy(d->std, cfg->std, (size_t)C * sizeof *d->std);
    } else if (d->split->mean && d->split->std && !d->view) {
        memcpy(d->mean, d->split->mean, (size_t)C * sizeof *d->mean);
        memcpy(d->std, d->split->std, (size_t)C * sizeof *d->std);
    } else {
        /* Deferred: the figures are computed once for the job by dataset_compute_normalization,
         * its ranks sharing the pass; nothing is normalized (and no batch made) until then. */
        if (defer) {
            d->norm = DT_NORMALIZE_NONE;
            d->norm_deferred = 1;
            return DT_OK;
        }
        double *fig = malloc(2 * (size_t)C * sizeof *fig);
        dt_status s = fig ? dataset_figures(d, NULL, threads, fig, fig + C)
                          : status_set_error(DT_ERR_NOMEM, "out of memory for the statistics of %d channels", C);
        for (int c = 0; !s && c < C; c++) d->mean[c] = (float)fig[c], d->std[c] = (float)fig[C + c];
        free(fig);
        if (s) return s;
    }
    for (int c = 0; c < C; c++) {
        if (!isfinite(d->mean[c]) || !isfinite(d->std[c]) || d->std[c] < 0)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "channel %d's mean %g / std %g cannot normalize: they must be "
                                    "finite and the std >= 0",
                                    c, (double)d->mean[c], (double)d->std[c]);
        /* A constant channel (std 0) is only centred: dividing would make infinities. */
        const float sd = d->std[c] > 0 ? d->std[c] : 1.0f;
        d->mul[c] = 1.0f / sd;
        d->add[c] = -d->mean[c] / sd;
    }
    return DT_OK;
}

/* The common part of both opens: takes split (owned from here on). */
static dt_status dataset_finish(ds_split *split, const dt_data_config *cfg, int use_holdout, int defer,
                                dt_dataset **out)
{
    *out = NULL;
    dt_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        ds_close(split);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the dataset");
    }
    d->split = split;
    d->n = split->count;
    d->c = split->c, d->h = split->h, d->w = split->w, d->classes = split->classes;
    d->input_size = (size_t)d->c * d->h * d->w;
    d->seed = cfg->seed;
    d->crop_pad = cfg->crop_pad, d->flip = cfg->flip, d->skip_bad = cfg->skip_bad;
    d->stats_threads = cfg->threads;
    dt_status s = DT_OK;
    if (cfg->crop_pad < 0 || cfg->crop_pad > 4096 || (cfg->crop_pad && (d->h < 2 || d->w < 2)))
        s = status_set_error(DT_ERR_INVALID_ARG,
                             "augmentation crop padding %d: it needs images (H and W > 1, now %dx%d) "
                             "and a padding of 0 to 4096 pixels",
                             cfg->crop_pad, d->h, d->w);
    else if (cfg->flip && d->w < 2)
        s = status_set_error(DT_ERR_INVALID_ARG, "augmentation flip needs images (W > 1, now %d)", d->w);
    else if (use_holdout && cfg->holdout != 0 && !(cfg->holdout > 0 && cfg->holdout < 1))
        s = status_set_error(DT_ERR_INVALID_ARG, "--holdout %g is not a fraction in (0, 1)", cfg->holdout);
    if (!s && use_holdout && cfg->holdout > 0) s = make_holdout(d, cfg->holdout, cfg->holdout_part);
    if (!s) s = sampler_init(&d->smp, d->n, cfg->seed, cfg->shuffle, cfg->drop_last);
    if (!s) s = set_normalization(d, cfg, cfg->threads, defer);
    if (s) {
        dt_dataset_free(d);
        return s;
    }
    *out = d;
    return DT_OK;
}

/* The flags of cfg are 0 or 1, as every flag of the API (dtrain.h, "Flags"): a 5 is a mistake,
 * not a true value. file: the fields only a file's open reads (CIFAR-100's labels, the holdout's
 * part) are checked too. */
static dt_status data_flags_check(const char *fn, const dt_data_config *cfg, int file)
{
    const struct {
        const char *name, *meaning;
        int v, file_only;
    } f[] = {
        {"shuffle", "0 file order, 1 a new order each epoch", cfg->shuffle, 0},
        {"drop_last", "0 pad the last step, 1 drop it", cfg->drop_last, 0},
        {"flip", "0 none, 1 a horizontal flip with probability 1/2", cfg->flip, 0},
        {"skip_bad", "0 an undecodable sample fails, 1 it is replaced", cfg->skip_bad, 0},
        {"cifar100_coarse", "0 the 100 fine labels, 1 the 20 coarse ones", cfg->cifar100_coarse, 1},
        {"holdout_part", "0 the samples trained on, 1 those kept aside", cfg->holdout_part, 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if ((file || !f[i].file_only) && f[i].v != 0 && f[i].v != 1)
            return status_set_error(DT_ERR_INVALID_ARG, "%s: dt_data_config.%s %d must be 0 or 1 (%s)", fn, f[i].name,
                                    f[i].v, f[i].meaning);
    return DT_OK;
}

static dt_status open_as(const char *fn, const char *path, const dt_data_config *c, int defer, dt_dataset **out)
{
    if (!out) return status_null_arg(fn, "out", "pass the address of a dt_dataset pointer");
    *out = NULL;
    if (!path) return status_null_arg(fn, "path", "pass a dataset directory or file");
    dt_data_config cfg;
    if (c)
        cfg = *c;
    else
        dt_data_defaults(&cfg);
    const dt_status fs = data_flags_check(fn, &cfg, 1);
    if (fs) return fs;
    const ds_open_opts o = {.format = cfg.format,
                            .split = cfg.split,
                            .cifar100_coarse = cfg.cifar100_coarse,
                            .c = cfg.c,
                            .h = cfg.h,
                            .w = cfg.w};
    ds_split *split;
    dt_status s = ds_open(path, &o, &split);
    if (!s && cfg.classes_like) s = imagefolder_number_like(split, cfg.classes_like->split);
    if (s) {
        if (split) ds_close(split);
        return s;
    }
    return dataset_finish(split, &cfg, 1, defer, out);
}

dt_status dt_dataset_open(const char *path, const dt_data_config *c, dt_dataset **out)
{
    return open_as("dt_dataset_open", path, c, 0, out);
}

dt_status dataset_open_deferred(const char *path, const dt_data_config *c, dt_dataset **out)
{
    return open_as("dt_dataset_open", path, c, 1, out);
}

dt_status dt_synthetic_open(int c, int h, int w, int classes, size_t size, uint64_t data_seed,
                            const dt_data_config *cfg, dt_dataset **out)
{
    if (!out) return status_null_arg("dt_synthetic_open", "out", "pass the address of a dt_dataset pointer");
    *out = NULL;
    dt_data_config defaults;
    if (!cfg) {
        dt_data_defaults(&defaults);
        cfg = &defaults;
    }
    const dt_status fs = data_flags_check("dt_synthetic_open", cfg, 0);
    if (fs) return fs;
    ds_split *split;
    dt_status s = synthetic_open(c, h, w, classes, size, data_seed, &split);
    if (s) return s;
    return dataset_finish(split, cfg, 0, 0, out);
}

dt_status dt_synthetic_create(int c, int h, int w, int classes, size_t size, uint64_t seed, dt_dataset **out)
{
    if (!out) return status_null_arg("dt_synthetic_create", "out", "pass the address of a dt_dataset pointer");
    dt_data_config cfg;
    dt_data_defaults(&cfg);
    cfg.normalize = DT_NORMALIZE_NONE;
    cfg.seed = seed;
    cfg.drop_last = 1;
    return dt_synthetic_open(c, h, w, classes, size, seed, &cfg, out);
}

dt_status dt_dataset_set_normalization(dt_dataset *d, dt_normalize kind, const float *mean, const float *std)
{
    static const char fn[] = "dt_dataset_set_normalization";
    if (!d) return status_null_arg(fn, "d", "pass the dataset opened by dt_dataset_open or dt_synthetic_*");
    /* The loaders' threads read the figures while they make batches: changing them under a
     * loader would give batches of two normalizations, or read freed memory. */
    const int loaders = atomic_load_explicit(&d->loaders, memory_order_relaxed);
    if (loaders > 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: %d loader(s) read this dataset: free them (dt_loader_free) first, or set the "
                                "normalization before dt_loader_create",
                                fn, loaders);
    if (kind == DT_NORMALIZE_STANDARD && !mean)
        return status_null_arg(fn, "mean", "pass the per-channel means (c floats) with DT_NORMALIZE_STANDARD");
    if (kind == DT_NORMALIZE_STANDARD && !std)
        return status_null_arg(fn, "std",
                               "pass the per-channel standard deviations (c floats) with DT_NORMALIZE_STANDARD");
    dt_data_config cfg;
    dt_data_defaults(&cfg);
    cfg.normalize = kind, cfg.mean = mean, cfg.std = std;
    float *old[4] = {d->mean, d->std, d->mul, d->add};
    const dt_normalize old_kind = d->norm;
    d->mean = d->std = d->mul = d->add = NULL;
    dt_status s = set_normalization(d, &cfg, 1, 0);
    if (s) {
        free(d->mean), free(d->std), free(d->mul), free(d->add);
        d->mean = old[0], d->std = old[1], d->mul = old[2], d->add = old[3];
        d->norm = old_kind;
        return s;
    }
    for (int i = 0; i < 4; i++) free(old[i]);
    d->norm_deferred = 0;
    return DT_OK;
}

dt_status dt_dataset_set_synthetic_on(dt_dataset *d, dt_synthetic_on where)
{
    if (!d)
        return status_null_arg("dt_dataset_set_synthetic_on", "d", "pass the dataset of dt_synthetic_create or _open");
    if (where != DT_SYNTHETIC_AUTO && where != DT_SYNTHETIC_HOST && where != DT_SYNTHETIC_DEVICE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_dataset_set_synthetic_on: where %d is not auto (0), host (1) or device (2)",
                                (int)where);
    synth_spec sp;
    if (where == DT_SYNTHETIC_DEVICE && !synthetic_spec(d->split, &sp))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s is %s data: only the synthetic data is made on the device (leave it on the host)",
                                d->split->source, d->split->format);
    d->synth_on = where;
    return DT_OK;
}

int dataset_synth_spec(const dt_dataset *d, synth_spec *out, char *why, size_t n)
{
    if (!synthetic_spec(d->split, out)) {
        snprintf(why, n, "%s is %s data, not synthetic", d->split->source, d->split->format);
        return 0;
    }
    if (d->crop_pad || d->flip) {
        snprintf(why, n, "its augmentation (random crop, flip) runs on the host");
        return 0;
    }
    if (d->norm_deferred) { /* the host's batches refuse it, saying why */
        snprintf(why, n, "its normalization's figures are deferred");
        return 0;
    }
    if (d->norm != DT_NORMALIZE_NONE) out->mul = d->mul, out->add = d->add;
    return 1;
}

/* The getters answer a NULL dataset with a neutral value (0, "?", no normalization), as
 * dt_reducer_num_buckets does, so that printing the figures of a dataset that failed to open
 * cannot crash. */
size_t dt_dataset_size(const dt_dataset *d) { return d ? d->n : 0; }
size_t dataset_split_size(const dt_dataset *d) { return d ? d->split->count : 0; }
int dt_dataset_num_classes(const dt_dataset *d) { return d ? d->classes : 0; }
const char *dt_dataset_format(const dt_dataset *d) { return d ? d->split->format : "?"; }
const char *dt_dataset_source(const dt_dataset *d) { return d ? d->split->source : "?"; }
int dt_dataset_uint8(const dt_dataset *d) { return d ? d->split->uint8_values : 0; }
long dt_dataset_bad_samples(const dt_dataset *d) { return d ? atomic_load_explicit(&d->bad, memory_order_relaxed) : 0; }

void dt_dataset_shape(const dt_dataset *d, int *c, int *h, int *w)
{
    if (c) *c = d ? d->c : 0;
    if (h) *h = d ? d->h : 0;
    if (w) *w = d ? d->w : 0;
}

dt_normalize dt_dataset_normalization(const dt_dataset *d, const float **mean, const float **std)
{
    const dt_normalize kind = d ? d->norm : DT_NORMALIZE_NONE;
    if (mean) *mean = kind == DT_NORMALIZE_STANDARD ? d->mean : NULL;
    if (std) *std = kind == DT_NORMALIZE_STANDARD ? d->std : NULL;
    return kind;
}

long dt_dataset_steps_per_epoch(const dt_dataset *d, int world, int batch)
{
    if (!d || world < 1 || batch < 1) return 0;
    return (long)sampler_steps_per_epoch(&d->smp, (size_t)world * (size_t)batch);
}

dt_status dt_dataset_position(const dt_dataset *d, long step, int world, int batch, long *epoch, long *offset)
{
    static const char fn[] = "dt_dataset_position";
    if (!d) return status_null_arg(fn, "d", "pass the dataset whose position is asked");
    if (!epoch) return status_null_arg(fn, "epoch", "pass the address of a long for the epoch");
    if (!offset) return status_null_arg(fn, "offset", "pass the address of a long for the offset");
    if (world < 1 || batch < 1)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_dataset_position: %d ranks of batch %d", world, batch);
    size_t off;
    dt_status s = sampler_locate(&d->smp, step, (size_t)world * (size_t)batch, epoch, &off);
    if (!s) *offset = (long)off;
    return s;
}

dt_status dt_dataset_set_position(dt_dataset *d, long step, long epoch, long offset)
{
    if (!d) return status_null_arg("dt_dataset_set_position", "d", "pass the dataset to anchor");
    if (offset < 0) return status_set_error(DT_ERR_INVALID_ARG, "data position offset %ld is negative", offset);
    return sampler_set_anchor(&d->smp, step, epoch, (size_t)offset);
}

dt_status dataset_plan(dt_dataset *d, long step, int rank, int world, int batch, uint32_t *idx, long *epoch)
{
    return sampler_batch(&d->smp, step, rank, world, batch, idx, epoch);
}

dt_status dt_dataset_batch(dt_dataset *d, long step, int rank, int world, int batch, float *x, int32_t *labels)
{
    static const char fn[] = "dt_dataset_batch";
    if (!d) return status_null_arg(fn, "d", "pass the dataset to read");
    if (!x) return status_null_arg(fn, "x", "pass host memory for batch x input-size floats");
    if (!labels) return status_null_arg(fn, "labels", "pass host memory for batch int32 labels");
    uint32_t *idx = malloc((size_t)(batch > 0 ? batch : 1) * sizeof *idx);
    float *scratch = malloc((dataset_scratch_floats(d) + 1) * sizeof *scratch);
    long epoch;
    dt_status s = !idx || !scratch ? status_set_error(DT_ERR_NOMEM, "out of memory for a batch of %d", batch)
                                   : dataset_plan(d, step, rank, world, batch, idx, &epoch);
    if (!s) s = dataset_fill(d, idx, epoch, batch, 1, x, labels, scratch);
    free(idx);
    free(scratch);
    return s;
}
