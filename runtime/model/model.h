/*
 * model.h - layer-list models: the spec grammar, shapes, the flat parameter layout, and the
 * forward/backward pass over the kernel op table.
 */
#ifndef DT_RUNTIME_MODEL_MODEL_H
#define DT_RUNTIME_MODEL_MODEL_H

#include "dtrain.h"
#include "kernels/ops.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { LAYER_FC, LAYER_CONV, LAYER_RELU, LAYER_POOL, LAYER_FLATTEN } layer_kind;

typedef struct layer {
    layer_kind kind;
    int out;              /* fc: features out; conv: channels out */
    int k, stride, pad;   /* conv: kernel, stride, padding; pool: window (= stride) */
    int in_c, in_h, in_w; /* input shape per sample (fc/flatten inputs are c x 1 x 1) */
    int out_c, out_h, out_w;
    size_t w_off, w_n, b_off, b_n; /* views into the flat parameter buffer */
    conv_shape cs;                 /* conv: geometry at the model's max batch */
} layer;

typedef struct model_spec {
    layer *layers;
    int n;
    int in_c, in_h, in_w;
    int classes;
    size_t num_params;
    size_t max_act; /* largest per-sample activation (floats) */
} model_spec;

/* Expands presets ("mlp", "cnn"), parses the layer list and the input ("784" or "CxHxW"),
 * infers every shape and lays out the parameters. Errors name the token and what is wrong. */
dt_status model_spec_parse(const char *spec, const char *input, model_spec *out);
void model_spec_free(model_spec *s);
/* An --input shape alone, by model_spec_parse's rules ("784" or "CxHxW", every size from 1, at
 * most 2^28 values a sample): the number of sizes it gives, 1 (N: *c = N, *h = *w = 1) or 3;
 * 0 for any other text (trailing characters, signs, blanks, a size past the bound), with the
 * error set naming it and *c, *h, *w untouched. The one reading of --input wherever it sizes
 * the data an image folder decodes to (`dtrain bench data` has no model to refuse a bad one). */
int model_spec_input(const char *input, int *c, int *h, int *w);
/* The text a preset stands for, or NULL. */
const char *model_preset(const char *name);
/* The input shape a preset expects ("784", "1x28x28"), or NULL. */
const char *model_preset_input(const char *name);
/* DT_ERR_INVALID_ARG, with the error set, for a one-word spec that is no preset and no layer (a
 * wrong name: "resnet18", "CNN"); DT_OK for anything else, which model_spec_parse then checks. */
dt_status model_spec_check_name(const char *spec);

/* The largest batch m was made for (dt_model_create's max_batch), which bounds every pass; 0 for
 * a NULL m. Internal, for the library's own callers that take a model made elsewhere (dt_evaluate
 * checks its batch against it): a user passed the value to dt_model_create, and the public name
 * dt_model_max_batch is the memory planner's largest batch that fits a budget, another question. */
int model_max_batch(const dt_model *m);

/* DT_ERR_INVALID_ARG for gradients of type grads on a model computing in compute (neither fp32
 * nor compute itself), worded for the pair. */
dt_status model_grads_type_error(dt_dtype compute, dt_dtype grads);

/* Checks an optimizer's settings as dt_optimizer_create does (the one copy of its rules, which
 * dt_model_plan_memory applies too): DT_ERR_INVALID_ARG naming the field, its value and range. */
dt_status optimizer_check_config(const dt_optim_config *c);

/* For checkpoints: a fingerprint of the architecture (layers and input shape), the parameters,
 * and the optimizer's configuration, step count and state arrays (s1/s2 NULL with n 0 when the
 * optimizer keeps none). */
uint64_t model_fingerprint(const dt_model *m);
const float *model_params_const(const dt_model *m);
/* Whether a step's loss-scale verdict is left pending (dt_model_set_deferred_verdict): the
 * optimizer's step count and the scaler do not count that step yet. */
int model_verdict_pending(const dt_model *m);
/* What a checkpoint reads and writes of an optimizer: its configuration, step count and state
 * arrays (host memory; s1 SGD momentum or AdamW's m, s2 AdamW's v; NULL with n 0 when not kept). */
typedef struct optimizer_view {
    dt_optim_config cfg;
    int t;
    float *s1, *s2;
    size_t n1, n2;
} optimizer_view;
optimizer_view optimizer_state(const dt_optimizer *o);
void optimizer_set_t(dt_optimizer *o, int t);
/* For checkpoints of GPU models: the optimizer state copied down into its host arrays (a no-op
 * when they are current), and told that the host arrays changed (the next GPU step copies them
 * up); the parameters copied up from host memory. */
dt_status optimizer_to_host(dt_optimizer *o);
void optimizer_host_changed(dt_optimizer *o);
dt_status model_params_from_host(dt_model *m, const float *host);
/* For checkpoints without usable scaler state: the scaler as dt_scaler_create left it (its
 * initial scale, no updates, an empty window), as for a run that had none (scaler.c). */
void scaler_restart(dt_scaler *s);
/* The window of recent overflow verdicts (1 = the update overflowed), for checkpoints, so that a
 * resumed run gives up when the uninterrupted one would: scaler_window_len says how many it holds
 * (at most its config's window); scaler_window_get copies the newest min(that, cap) into out,
 * oldest first, and returns the count; scaler_window_set (after dt_scaler_set_state, which empties
 * it) refills it from n flags, oldest first, keeping the newest `window` of them. */
int scaler_window_len(const dt_scaler *s);
int scaler_window_get(const dt_scaler *s, unsigned char *out, int cap);
void scaler_window_set(dt_scaler *s, const unsigned char *flags, int n);

/* ZeRO-1 (model_zero.c). The optimizer's state cut down to the slices [off[i], off[i] + cnt[i]) this
 * rank owns (its values there kept); a no-op when already cut so. */
dt_status optimizer_shard(dt_optimizer *o, const size_t *off, const size_t *cnt, int nseg);
int optimizer_sharded(const dt_optimizer *o);
/* Bytes of state this rank holds (1/W of the whole under ZeRO-1, up to a bucket's rounding). */
size_t optimizer_state_bytes(const dt_optimizer *o);
/* A sharded optimizer's full-size view for a checkpoint: f1 and f2 (NULL when not kept, or when not
 * sharded) get the owned slices and zeros elsewhere, for the caller to allgather; optimizer_state
 * then shows them; optimizer_host_changed takes the owned slices back from them. full_end frees
 * them (so does the next step). */
dt_status optimizer_full_begin(dt_optimizer *o, float **f1, float **f2);
void optimizer_full_end(dt_optimizer *o);
/* Collective over the model's ranks: the full-size state of a sharded optimizer gathered from the
 * slices' owners onto every rank (optimizer_state shows it until model_zero_full_end), before a
 * checkpoint writes it or reads into it. DT_OK and nothing done when o is not sharded. */
dt_status model_zero_full_begin(dt_model *m, dt_optimizer *o);
void model_zero_full_end(dt_optimizer *o);
/* A sharded optimizer made whole again: its full-size state gathered from the ranks by the
 * model's current plan (model_zero_full_begin: collective) becomes its state, and the next
 * sharded step (or dt_model_shard_optimizer) cuts it for the plan then in force. For a change of
 * bucket caps under ZeRO-1: call it before dt_model_set_sync. A no-op for an unsharded one. */
dt_status model_zero_unshard(dt_model *m, dt_optimizer *o);
/* optimizer_full_begin's full-size arrays, filled, become o's whole state (optimizer.c). */
void optimizer_unshard(dt_optimizer *o);

#endif
