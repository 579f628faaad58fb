/*
 * normalize_flag.c - --normalize's figures, read and set on a dataset (normalize_flag.h).
 */
#include "launch/normalize_flag.h"

#include "launch/cli.h"
#include "base/parse.h"

#include <stdio.h>
#include <string.h>

/* One list of --normalize standard:MEANS:STDS into out[], *n entries (the same count for both):
 * comma-separated numbers, none of them empty. */
static int norm_list(const char *what, const char *list, int positive, float *out, int *n)
{
    *n = 0;
    for (const char *p = list;; p++) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[128];
        if (len == 0 || len >= sizeof item) {
            cli_error("--normalize standard: the %s list '%s' has an %s figure: give numbers separated by commas", what,
                      list, len ? "overlong" : "empty");
            return EXIT_USAGE;
        }
        if (*n == CLI_NORM_MAX_C) {
            cli_error("--normalize standard: more than %d %s figures; for more channels give --normalize standard "
                      "(computed from the data)",
                      CLI_NORM_MAX_C, what);
            return EXIT_USAGE;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        double v;
        if (parse_double("--normalize standard", item, -1e30, 1e30, &v)) {
            cli_error("--normalize standard: %s figure '%s': %s", what, item, dt_last_error());
            return EXIT_USAGE;
        }
        /* Checked as the float it is kept in: 1e-50 would be 0 there. */
        if (positive && !((float)v > 0)) {
            cli_error("--normalize standard: std figure %s must be above 0 (as torchvision's Normalize requires)",
                      item);
            return EXIT_USAGE;
        }
        out[(*n)++] = (float)v;
        if (!end) return EXIT_OK;
        p = end;
    }
}

int cli_normalize_spec(const char *arg, int *normalize, cli_norm_figures *fig)
{
    fig->n = 0;
    if (strncmp(arg, "standard:", 9) != 0) return cli_normalize(arg, normalize);
    const char *means = arg + 9, *colon = strchr(means, ':');
    if (!colon || strchr(colon + 1, ':')) {
        cli_error("--normalize '%s' is not standard:MEAN,..:STD,.. (e.g. standard:0.4914,0.4822,0.4465:0.2470,0.2435,"
                  "0.2616 for CIFAR-10, in the units of values / 255 for bytes)",
                  arg);
        return EXIT_USAGE;
    }
    /* Room for the most a list can hold (CLI_NORM_MAX_C figures, each under 128 characters, and
     * their commas): a longer one is refused whole, never cut to fewer figures that may pass. */
    char ms[CLI_NORM_MAX_C * 128];
    if ((size_t)(colon - means) >= sizeof ms) {
        cli_error("--normalize standard: the mean list is %zu characters, more than %d figures of under 128 "
                  "characters can take: give at most %d, or --normalize standard (computed from the data)",
                  (size_t)(colon - means), CLI_NORM_MAX_C, CLI_NORM_MAX_C);
        return EXIT_USAGE;
    }
    snprintf(ms, sizeof ms, "%.*s", (int)(colon - means), means);
    int nm, ns;
    if (norm_list("mean", ms, 0, fig->mean, &nm) || norm_list("std", colon + 1, 1, fig->std, &ns)) return EXIT_USAGE;
    if (nm != ns) {
        cli_error("--normalize '%s' gives %d mean%s and %d std figure%s: one of each per channel", arg, nm,
                  nm == 1 ? "" : "s", ns, ns == 1 ? "" : "s");
        return EXIT_USAGE;
    }
    *normalize = DT_NORMALIZE_STANDARD;
    fig->n = nm;
    return EXIT_OK;
}

int cli_normalize_apply(const cli_norm_figures *fig, dt_dataset *d)
{
    if (!fig->n) return EXIT_OK;
    int C, H, W;
    dt_dataset_shape(d, &C, &H, &W);
    if (fig->n != C) {
        cli_error("--normalize standard: %d figure%s of mean and std for data of %d channel%s (%s): give one per "
                  "channel",
                  fig->n, fig->n == 1 ? "" : "s", C, C == 1 ? "" : "s", dt_dataset_source(d));
        return EXIT_USAGE;
    }
    /* In /255 units for bytes (torchvision's Normalize after ToTensor), so multiplied by 255 here. */
    const float u = dt_dataset_uint8(d) ? 255.0f : 1.0f;
    float mean[CLI_NORM_MAX_C], std[CLI_NORM_MAX_C];
    for (int c = 0; c < C; c++) mean[c] = fig->mean[c] * u, std[c] = fig->std[c] * u;
    if (dt_dataset_set_normalization(d, DT_NORMALIZE_STANDARD, mean, std)) {
        cli_error("--normalize: %s", dt_last_error());
        return EXIT_USAGE;
    }
    return EXIT_OK;
}
