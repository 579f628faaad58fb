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
    double data_s;      /* of forward_s, the wait for the batch (a profile's data phase; 0 for the others) */
    int data_from_row;  /* data_s is the row's data ms: the profile predates its data phase */
    double measured_ms; /* the profile's measured step (0: none) */
    int measured_ranks; /* at this many ranks */
} mp_model;

typedef enum { MP_PROFILE, MP_SYNTHETIC, MP_SPEC } mp_source;

/* What a model from the grammar (MP_SPEC) computes at: input shape (also the shape of a --profile
 * model that is not a preset), batch per rank, sustained TFLOP/s; name: the label (NULL: the spec).
 * late_input: an --input given only after the model on the line (which applies to the models after
 * it), for the message that asks for one. */
typedef struct mp_flops {
    const char *input, *name, *late_input;
    int batch;
    double tflops;
} mp_flops;

/* A model from `--profile PATH[:COMPUTE_MS]`, `--synthetic NAME:PARAMS_M:LAYERS:COMPUTE_MS`, or
 * `--spec SPEC` (the model grammar; per-layer compute = its fc/conv FLOPs x batch / TFLOP/s,
 * backward twice forward). Errors name the file or the value and the fix. */
dt_status mp_model_load(const char *arg, mp_source kind, const mp_flops *fl, mp_model *m);
/* A model of the grammar (spec_text with input) with measured times in seconds a step: bwd_s[i]
 * for layers 0..nt-1, scaled together to backward_s; forward_s before backward, after_s after. */
dt_status mp_model_from_times(const char *spec_text, const char *input, const double *bwd_s, int nt, double backward_s,
                              double forward_s, double after_s, mp_model *m);
/* m as the step model's input (elem_bytes an element of the gradient buffer, wire_bytes of what
 * travels); points into m. */
pm_model mp_model_view(const mp_model *m, size_t elem_bytes, size_t wire_bytes);
/* A ring fitted to a `bench allreduce` output at path, and the ranks it ran at. */
dt_status mp_read_allreduce(const char *path, pm_link *link, int *ranks);

#endif
