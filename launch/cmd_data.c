/*
 * cmd_data.c - `dtrain data info PATH`: what a dataset holds, per split, read through the one
 * reader interface (runtime/data/reader.h): format, samples, shape, classes and how many samples
 * each has, the value range and the per-channel mean and standard deviation (the figures
 * `--normalize standard` will use). One process, no MPI: it only reads files.
 */
#include "cli.h"
#include "data/reader.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_FORMAT = 256, OPT_CIFAR100_LABELS };

/* Classes listed one by one up to this many; beyond, the smallest and largest counts. */
#define DATA_INFO_MAX_LISTED 20

/* One pass over the split: value range, per-channel mean and std (in double), samples per class. */
static int split_info(const ds_split *s)
{
    const size_t per = (size_t)s->c * s->h * s->w, hw = (size_t)s->h * s->w;
    float *x = malloc(per * sizeof *x);
    double *sum = calloc((size_t)s->c, sizeof *sum), *sq = calloc((size_t)s->c, sizeof *sq);
    size_t *counts = calloc((size_t)s->classes, sizeof *counts);
    if (!x || !sum || !sq || !counts) {
        free(x), free(sum), free(sq), free(counts);
        cli_error("out of memory summarizing %s", s->source);
        return EXIT_FAIL;
    }
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < s->count; i++) {
        int32_t y;
        if (ds_read(s, i, x, &y)) {
            cli_error("%s", dt_last_error());
            free(x), free(sum), free(sq), free(counts);
            return EXIT_FAIL;
        }
        counts[y]++;
        for (int c = 0; c < s->c; c++)
            for (size_t j = 0; j < hw; j++) {
                const float v = x[(size_t)c * hw + j];
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
                sum[c] += v;
                sq[c] += (double)v * v;
            }
    }
    printf("  %s: %zu sample%s of %dx%dx%d (%zu values), %d classes\n", s->split, s->count, cli_s((long)s->count),
           s->c, s->h, s->w, per, s->classes);
    printf("    values: min %g, max %g; per channel mean / std:", (double)lo, (double)hi);
    const double n = (double)s->count * (double)hw;
    for (int c = 0; c < s->c && c < 16; c++) {
        const double mean = sum[c] / n, var = sq[c] / n - mean * mean;
        printf(" %.4g / %.4g", mean, sqrt(var > 0 ? var : 0));
    }
    printf("%s\n", s->c > 16 ? " ..." : "");
    printf("    samples per class:");
    if (s->classes <= DATA_INFO_MAX_LISTED) {
        for (int k = 0; k < s->classes; k++) printf("%s %d: %zu", k ? "," : "", k, counts[k]);
    } else {
        int kmin = 0, kmax = 0;
        for (int k = 1; k < s->classes; k++) {
            if (counts[k] < counts[kmin]) kmin = k;
            if (counts[k] > counts[kmax]) kmax = k;
        }
        printf(" fewest %zu (class %d), most %zu (class %d)", counts[kmin], kmin, counts[kmax], kmax);
    }
    int empty = 0;
    for (int k = 0; k < s->classes; k++) empty += counts[k] == 0;
    if (empty) printf("; %d class%s without a sample", empty, empty == 1 ? "" : "es");
    printf("\n");
    free(x), free(sum), free(sq), free(counts);
    return EXIT_OK;
}

static int data_info(int argc, char **argv)
{
    static const struct option opts[] = {{"data-format", required_argument, NULL, OPT_FORMAT},
                                         {"cifar100-labels", required_argument, NULL, OPT_CIFAR100_LABELS},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    ds_open_opts o = {0};
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case OPT_FORMAT: o.format = optarg; break;
        case OPT_CIFAR100_LABELS:
            if (strcmp(optarg, "fine") != 0 && strcmp(optarg, "coarse") != 0) {
                cli_error("--cifar100-labels '%s' is not fine or coarse", optarg);
                return EXIT_USAGE;
            }
            o.cifar100_coarse = strcmp(optarg, "coarse") == 0;
            break;
        case 'h': cli_help("data info", stdout); return EXIT_OK;
        default:
            cli_error("unknown option '%s' (see dtrain help data info)", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        cli_error("dtrain data info takes one PATH (a dataset directory or file), got %d", argc - optind);
        return EXIT_USAGE;
    }
    const char *path = argv[optind];
    ds_split *train = NULL, *test = NULL;
    o.split = "train";
    dt_status s = ds_open(path, &o, &train);
    if (s) {
        cli_error("%s", dt_last_error());
        return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    }
    printf("dataset %s: %s\n", path, train->format);
    int rc = split_info(train);
    o.split = "test";
    if (!rc && ds_open(path, &o, &test) == DT_OK) {
        /* One file is its own samples whatever the split: a second listing would repeat them. */
        if (strcmp(test->source, train->source) != 0 || test->count != train->count) rc = split_info(test);
    } else if (!rc) {
        printf("  test: none (%s)\n", dt_last_error());
    }
    ds_close(train);
    ds_close(test);
    return rc;
}

int cmd_data(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        cli_help("data", argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "info")) return data_info(argc - 1, argv + 1);
    cli_error("unknown data command '%s'; it is info (dtrain help data)", argv[1]);
    return EXIT_USAGE;
}
