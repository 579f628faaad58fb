/*
 * normalize_flag.h - --normalize of the commands that read data (normalize_flag.c): the plain
 * names, or standard:M1,M2,..:S1,S2,.. with the per-channel figures given, as torchvision's
 * Normalize(mean, std) takes them (dtrain train and bench data), so that a run uses known figures
 * instead of a pass over the data to compute them.
 */
#ifndef DT_LAUNCH_NORMALIZE_FLAG_H
#define DT_LAUNCH_NORMALIZE_FLAG_H

#include "dtrain.h"

/* Channels --normalize standard:M,..:S,.. may give figures for. */
enum { CLI_NORM_MAX_C = 64 };

/* The figures given (n channels; 0: none, computed from the data when standard), in the /255
 * units torchvision uses for bytes. */
typedef struct cli_norm_figures {
    int n;
    float mean[CLI_NORM_MAX_C], std[CLI_NORM_MAX_C];
} cli_norm_figures;

/* --normalize none|unit|standard, or standard:M1,M2,..:S1,S2,.. (1 to CLI_NORM_MAX_C of each,
 * finite, every std above 0): *normalize the dt_normalize, fig the figures (n 0 for the plain
 * names). EXIT_OK, or EXIT_USAGE after printing why (fig->n then 0). */
int cli_normalize_spec(const char *arg, int *normalize, cli_norm_figures *fig);
/* The given figures (none: nothing to do) set on d, one per channel of d (else refused, naming
 * both counts), times 255 for byte data. Open d with DT_NORMALIZE_NONE when figures are given, so
 * no pass over the data computes figures not used. EXIT_OK, or EXIT_USAGE after printing why. */
int cli_normalize_apply(const cli_norm_figures *fig, dt_dataset *d);

#endif
