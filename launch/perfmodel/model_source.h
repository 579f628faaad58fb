/*
 * model_source.h - the models and links `dtrain model-perf` reads from files and flags.
 */
#ifndef DT_LAUNCH_MODEL_SOURCE_H
#define DT_LAUNCH_MODEL_SOURCE_H

#include "launch/perfmodel/perfmodel.h"
#include "launch/perfmodel/perfmodel_input.h"

typedef struct mp_model {
    char name[256];
    pm_layer layers[PM_MAX_LAYERS];
    int nlayers;
    size_t count; /* parameters (fp32 gradient elements) */
    double forward_s, after_s;
    double measured_ms; /* the profile's measured step (0: none) */
    int measured_ranks; /* at this many ranks */
} mp_model;

/* A model from `--profile PATH[:COMPUTE_MS]` (synthetic 0; input: the shape of a model that is
 * not a preset, else NULL) or `--synthetic NAME:PARAMS_M:LAYERS:COMPUTE_MS` (synthetic 1).
 * Errors name the file or the value and the fix. */
dt_status mp_model_load(const char *arg, int synthetic, const char *input, mp_model *m);
/* m as the step model's input (fp32 buffer, wire_bytes an element on the wire); points into m. */
pm_model mp_model_view(const mp_model *m, size_t wire_bytes);
/* A ring fitted to a `bench allreduce` output at path, and the ranks it ran at. */
dt_status mp_read_allreduce(const char *path, pm_link *link, int *ranks);

#endif
