/*
 * cli_values.c - the strict values of the commands' flags: numbers within a range, byte sizes,
 * comma-separated lists, dtypes, and the data and step flags several commands share (--augment,
 * --normalize, --loader-threads, --step-overlap, --graphs, ...). Each refusal names the flag, the
 * value and what it may be.
 */
#include "launch/cli.h"
#include "base/parse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The command's numbers go through base/parse.c, the one parser of numbers for flags and
 * variables: "\t5", " 5" and "0x10" are refused alike, with the range in the message. */
int cli_long(const char *flag, const char *arg, long lo, long hi, long *out)
{
    if (parse_long(flag, arg, lo, hi, out)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_int(const char *flag, const char *arg, long lo, long hi, int *out)
{
    long v;
    int rc = cli_long(flag, arg, lo, hi, &v);
    if (rc == EXIT_OK) *out = (int)v;
    return rc;
}

int cli_bytes(const char *flag, const char *arg, unsigned long long max, const char *examples, unsigned long long *out)
{
    unsigned long long v = 0;
    const char *p = arg;
    int ok = *p >= '0' && *p <= '9';
    for (; ok && *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned long long)(*p - '0');
        if (v > max) ok = 0; /* past any limit: stop before overflowing */
    }
    unsigned shift = 0;
    if (ok && *p) {
        const char u = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        shift = u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : 0;
        ok = shift && !p[1];
    }
    if (ok && v > (max >> shift)) ok = 0;
    if (ok) v <<= shift;
    if (!ok || v == 0) {
        cli_error("%s '%s' is not a size from 1 byte to %lluG: a whole number of bytes, optionally followed by K, M "
                  "or G (powers of 1024), e.g. %s",
                  flag, arg, max >> 30, examples);
        return EXIT_USAGE;
    }
    *out = v;
    return EXIT_OK;
}

int cli_float(const char *flag, const char *arg, double lo, double hi, float *out)
{
    double v;
    if (parse_double(flag, arg, lo, hi, &v)) {
        cli_error("%s", dt_last_error());
        return EXIT_USAGE;
    }
    /* A value inside the range can still be too small for a float (--lr 1e-50 would become 0). */
    if (v != 0 && (float)v == 0.0f) {
        cli_error("%s '%s' is too small for single precision (the smallest is about 1e-38)", flag, arg);
        return EXIT_USAGE;
    }
    *out = (float)v;
    return EXIT_OK;
}

int cli_list(const char *flag, const char *arg, int max, int (*each)(const char *item, void *ud), void *ud)
{
    char buf[512];
    if (strlen(arg) >= sizeof buf) {
        cli_error("%s '%.40s...' is too long", flag, arg);
        return EXIT_USAGE;
    }
    strcpy(buf, arg);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            cli_error("%s '%s': at most %d items", flag, arg, max);
            return EXIT_USAGE;
        }
        int rc = each(tok, ud);
        if (rc) return rc;
        n++;
    }
    if (!n) {
        cli_error("%s '%s' names nothing: give a comma-separated list", flag, arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_float_dtype(const char *flag, const char *arg, dt_dtype *out)
{
    dt_dtype t;
    if (dt_dtype_parse(arg, &t) || t == DT_U8) {
        cli_error("%s '%s' is not one of fp32, fp16, bf16", flag, arg);
        return EXIT_USAGE;
    }
    *out = t;
    return EXIT_OK;
}

/* --augment crop:P,flip (either or both, in any order). */
int cli_augment(const char *arg, int *crop_pad, int *flip)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf) {
        cli_error("--augment '%.40s...' is too long: it is crop:P, flip, or crop:P,flip", arg);
        return EXIT_USAGE;
    }
    if (!strcmp(arg, "none")) {
        *crop_pad = 0, *flip = 0;
        return EXIT_OK;
    }
    snprintf(buf, sizeof buf, "%s", arg);
    /* Split by hand, not strtok: an empty part ("," or "flip,") is a typo to name, not nothing. */
    int pad = 0, flipped = 0;
    for (char *tok = buf, *end;; tok = end + 1) {
        end = strchr(tok, ',');
        if (end) *end = '\0';
        if (!*tok) {
            cli_error("--augment '%s' has an empty part: give crop:P, flip or both, e.g. --augment crop:4,flip (none: "
                      "no augmentation)",
                      arg);
            return EXIT_USAGE;
        }
        const int is_flip = !strcmp(tok, "flip"), is_crop = !strncmp(tok, "crop:", 5);
        if (is_flip ? flipped : is_crop && pad) {
            cli_error("--augment '%s' gives %s twice: give each once", arg, is_flip ? "flip" : "crop");
            return EXIT_USAGE;
        }
        if (is_flip) {
            flipped = 1;
        } else if (is_crop) {
            if (cli_int("--augment crop:P (the padding in pixels)", tok + 5, 1, 4096, &pad)) return EXIT_USAGE;
        } else {
            cli_error("--augment part '%s' is not crop:P (random crop after padding P pixels) or flip (random "
                      "horizontal flip); e.g. --augment crop:4,flip",
                      tok);
            return EXIT_USAGE;
        }
        if (!end) break;
    }
    *crop_pad = pad, *flip = flipped;
    return EXIT_OK;
}

int cli_cifar100_labels(const char *arg, int *coarse)
{
    if (strcmp(arg, "fine") && strcmp(arg, "coarse")) {
        cli_error("--cifar100-labels '%s' is not fine or coarse", arg);
        return EXIT_USAGE;
    }
    *coarse = !strcmp(arg, "coarse");
    return EXIT_OK;
}

int cli_bad_samples(const char *arg, const char *skip_means, int *skip)
{
    if (strcmp(arg, "fail") && strcmp(arg, "skip")) {
        cli_error("--bad-samples '%s' is not fail (stop at the first undecodable sample) or skip (%s)", arg,
                  skip_means);
        return EXIT_USAGE;
    }
    *skip = !strcmp(arg, "skip");
    return EXIT_OK;
}

int cli_clip_grad_norm(const char *arg, double *out)
{
    if (!strcmp(arg, "inf")) {
        *out = INFINITY;
        return EXIT_OK;
    }
    float v;
    if (cli_float("--clip-grad-norm (the largest global gradient norm, 0 = off, inf = the norm reported, not clipped)",
                  arg, 0, 1e30, &v))
        return EXIT_USAGE;
    *out = v;
    return EXIT_OK;
}

int cli_normalize(const char *arg, int *out)
{
    if (!strcmp(arg, "none"))
        *out = DT_NORMALIZE_NONE;
    else if (!strcmp(arg, "unit"))
        *out = DT_NORMALIZE_UNIT;
    else if (!strcmp(arg, "standard"))
        *out = DT_NORMALIZE_STANDARD;
    else {
        cli_error("--normalize '%s' is not one of none, unit (bytes / 255), standard (per-channel mean/std)", arg);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_loader_threads(const char *arg, int *out)
{
    if (!strcmp(arg, "auto")) {
        *out = -1;
        return EXIT_OK;
    }
    return cli_int("--loader-threads", arg, 0, 256, out);
}

/* A flag of three named settings: arg as names[i] gives values[i]; anything else is refused with
 * the names and what they mean (help). */
static int cli_choice3(const char *flag, const char *arg, const char *const names[3], const int values[3],
                       const char *help, int *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(arg, names[i])) {
            *out = values[i];
            return EXIT_OK;
        }
    cli_error("%s '%s' is not one of %s, %s, %s (%s)", flag, arg, names[0], names[1], names[2], help);
    return EXIT_USAGE;
}

static const char *const auto_on_off[3] = {"auto", "1", "0"};

int cli_step_overlap(const char *arg, dt_step_overlap *out)
{
    const int values[3] = {DT_STEP_OVERLAP_AUTO, DT_STEP_OVERLAP_ON, DT_STEP_OVERLAP_OFF};
    int v;
    const int rc = cli_choice3("--step-overlap", arg, auto_on_off, values,
                               "auto: the optimizer step overlapped with backward, or with the buckets' allreduces, "
                               "for models of 8M parameters or more; 1: for any model; 0: once after backward and "
                               "the allreduce",
                               &v);
    if (!rc) *out = (dt_step_overlap)v;
    return rc;
}

int cli_graphs(const char *arg, dt_graphs *out)
{
    const int values[3] = {DT_GRAPHS_AUTO, DT_GRAPHS_ON, DT_GRAPHS_OFF};
    int v;
    const int rc = cli_choice3("--graphs", arg, auto_on_off, values,
                               "1: on a GPU each step's forward and backward recorded once and replayed as one "
                               "launch; auto: so for models under 8M parameters; 0: launched kernel by kernel",
                               &v);
    if (!rc) *out = (dt_graphs)v;
    return rc;
}

int cli_fused_relu(const char *arg, int *out)
{
    return cli_int("--fused-relu (1: relu layers run inside their neighbours, 0: on their own)", arg, 0, 1, out);
}

int cli_synthetic_on(const char *arg, dt_synthetic_on *out)
{
    static const char *const names[3] = {"auto", "host", "device"};
    const int values[3] = {DT_SYNTHETIC_AUTO, DT_SYNTHETIC_HOST, DT_SYNTHETIC_DEVICE};
    int v;
    const int rc = cli_choice3("--synthetic-on", arg, names, values,
                               "where synthetic batches are made: device: by a kernel on the GPU, without loader "
                               "threads or a copy; host: by the loader threads; auto: on the GPU unless --augment "
                               "asks for crops or flips",
                               &v);
    if (!rc) *out = (dt_synthetic_on)v;
    return rc;
}

int cli_loader_auto(const dt_ctx *ctx, int requested)
{
    if (requested >= 0) return requested;
    dt_placement pl;
    if (dt_get_placement(ctx, &pl) || pl.device != DT_DEVICE_CUDA) return 0;
    /* A GPU step is faster than one core makes its batch: every core of the rank but the training
     * thread's. One core makes about 80,000 synthetic 3x32x32 samples/s (`dtrain bench data --data
     * synthetic`, docs/performance.md), and an H200 steps the cnn on 270,000 a second (bench/GPU-NOTES.md), which 8
     * threads did not feed. A worker with nothing to make sleeps; the cap keeps a single rank on a
     * host of very many cores from starting threads that would only wait. */
    const int n = pl.num_cores - 1;
    return n < 1 ? 1 : n > CLI_LOADER_MAX_AUTO ? CLI_LOADER_MAX_AUTO : n;
}
