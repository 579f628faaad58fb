/*
 * model.h - layer-list models: the spec grammar, shapes, the flat parameter layout, and the
 * forward/backward pass over the kernel op table.
 */
#ifndef DT_RUNTIME_MODEL_H
#define DT_RUNTIME_MODEL_H

#include "dtrain.h"
#include "ops.h"

#include <stddef.h>

typedef enum { LAYER_FC, LAYER_CONV, LAYER_RELU, LAYER_POOL, LAYER_FLATTEN } layer_kind;

typedef struct layer {
    layer_kind kind;
    int out;                /* fc: features out; conv: channels out */
    int k, stride, pad;     /* conv: kernel, stride, padding; pool: window (= stride) */
    int in_c, in_h, in_w;   /* input shape per sample (fc/flatten inputs are c x 1 x 1) */
    int out_c, out_h, out_w;
    size_t w_off, w_n, b_off, b_n; /* views into the flat parameter buffer */
    conv_shape cs;          /* conv: geometry at the model's max batch */
} layer;

typedef struct model_spec {
    layer *layers;
    int n;
    int in_c, in_h, in_w;
    int classes;
    size_t num_params;
    size_t max_act;         /* largest per-sample activation (floats) */
} model_spec;

/* Expands presets ("mlp", "cnn"), parses the layer list and the input ("784" or "CxHxW"),
 * infers every shape and lays out the parameters. Errors name the token and what is wrong. */
dt_status model_spec_parse(const char *spec, const char *input, model_spec *out);
void model_spec_free(model_spec *s);
/* The text a preset stands for, or NULL. */
const char *model_preset(const char *name);
/* The input shape a preset expects ("784", "1x28x28"), or NULL. */
const char *model_preset_input(const char *name);

/* Registers fn(arg, offset, count) to be called during backward as soon as a layer's parameter
 * gradients (the flat slice [offset, offset + count)) are final. */
void model_set_grad_hook(dt_model *m, void (*fn)(void *arg, size_t off, size_t n), void *arg);

#endif
