/*
 * cmd_data_info.c - `dtrain data info PATH`: per split, the format, samples, shape, classes with
 * their counts, value range, and per-channel mean and std (the figures `--normalize standard` will
 * use), through the statistics pass (runtime/data/stats.h).
 */
#include "launch/data/cmd_data.h"

#include "launch/cli.h"
#include "runtime/data/stats.h"

#include <stdio.h>
#include <stdlib.h>

/* Classes listed one by one up to this many; beyond, the smallest and largest counts. */
#define DATA_INFO_MAX_LISTED 20

static void print_channels(const char *what, int c, const double *mean, const double *std)
{
    printf("%s", what);
    for (int k = 0; k < c && k < 16; k++) printf(" %.4g / %.4g", mean[k], std[k]);
    printf("%s\n", c > 16 ? " ..." : "");
}

static int split_info(const ds_split *s, int threads)
{
    ds_stats st;
    if (ds_compute_stats(s, threads, &st)) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    const size_t per = (size_t)s->c * s->h * s->w;
    printf("  %s: %zu sample%s of %dx%dx%d (%zu values), %d classes\n", s->split, s->count, cli_s((long)s->count), s->c,
           s->h, s->w, per, s->classes);
    printf("    values: min %g, max %g;", (double)st.lo, (double)st.hi);
    print_channels(" per channel mean / std:", s->c, st.mean, st.std);
    if (s->mean && s->std) {
        double *m = malloc((size_t)s->c * sizeof *m), *d = malloc((size_t)s->c * sizeof *d);
        if (m && d) {
            for (int k = 0; k < s->c; k++) m[k] = s->mean[k], d[k] = s->std[k];
            print_channels("    stored in the file, mean / std:", s->c, m, d);
        }
        free(m), free(d);
    }
    printf("    samples per class:");
    const size_t *counts = st.class_counts;
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
    ds_stats_free(&st);
    return EXIT_OK;
}

int cmd_data_info(int argc, char **argv)
{
    data_args a;
    int rc = data_parse_args("data info", argc, argv, 1, &a);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    const char *path = a.pos[0];
    ds_split *train = NULL, *test = NULL;
    if ((rc = data_open_split(path, &a, "train", &train))) return rc;
    printf("dataset %s: %s\n", path, train->format);
    rc = split_info(train, a.threads);
    char why[1200];
    const int broken = !rc && data_open_test(path, &a, &test, why, sizeof why);
    if (!rc && test) {
        rc = split_info(test, a.threads);
    } else if (broken) {
        data_test_error(path, why, "to have no test split instead, remove its files");
        rc = EXIT_FAIL;
    } else if (!rc) {
        printf("  test: none (%s)\n", why);
    }
    ds_close(train);
    ds_close(test);
    return rc;
}
