/**
 * @file
 * dtrain/training.h - part of the public API: mixed precision, clipping and accumulation, memory,
 * the loss scaler, the whole training step and its profile. Include `<dtrain.h>`, which includes
 * every part in order after the types they share; this file is not meant to be included on its own.
 */
#ifndef DTRAIN_TRAINING_H
#define DTRAIN_TRAINING_H

#ifndef DTRAIN_H
#error "include <dtrain.h>, which includes dtrain/training.h"
#endif

/** @defgroup precision Mixed precision: the model
 *
 * A model computes in fp32 unless told otherwise. In fp16 or bf16 (the way torch.autocast does on
 * a GPU): the fp32 parameters stay the master copy the optimizer updates; every op uses them
 * rounded to 16 bits; every layer's output (activations, and the gradients flowing backward) is
 * stored in 16 bits; GEMMs and convolutions take the 16-bit values widened to fp32 and accumulate
 * in fp32 (the CPU path: OpenBLAS sgemm between conversions), and the result is rounded once;
 * softmax, the loss and every reduction are fp32. Parameter gradients are kept and allreduced in
 * the 16-bit type (half the memory and bytes), or in fp32 when asked (as torch.cuda.amp does).
 * @{ */

/** Sets the model's precision. compute: DT_F32, DT_F16 or DT_BF16; grads: DT_F32 or the same type as
 * compute. Reallocates the activation and gradient buffers (gradient values are lost; call it before
 * training). Not collective, but every rank must choose the same (the gradient allreduce pairs
 * buffers). */
DT_API dt_status dt_model_set_precision(dt_model *m, dt_dtype compute, dt_dtype grads);
/** The type the model computes in (dt_model_set_precision()'s compute; DT_F32 by default). */
DT_API dt_dtype dt_model_precision(const dt_model *m);
/** The type the gradients are kept in. dt_model_grads returns NULL when it is 16-bit. */
DT_API dt_dtype dt_model_grad_dtype(const dt_model *m);

/** After dt_model_sync_grads: divides the gradients by the loss scale (pass 1/scale; 1 when not
 * scaling) and sets *found_inf when any is inf or NaN. fp32 gradients are unscaled in place in the
 * same pass as the check; 16-bit ones are only checked (read once, 2 bytes an element) and unscaled
 * as dt_model_optimizer_step widens them, since dividing fp16 values in place would flush the small
 * ones to zero, which is what scaling is there to prevent. Every rank holds the same reduced
 * gradients, so every rank gets the same answer. */
DT_API dt_status dt_model_unscale_grads(dt_model *m, float inv_scale, int *found_inf);
/** One optimizer step of the fp32 parameters from the gradients in whatever type they are kept
 * (after dt_model_unscale_grads). Skip it for a step whose gradients overflowed. */
DT_API dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o);

/** @} */

/** @defgroup clipping Clipping, accumulation, the finite check and memory
 * What happens to the gradients between backward and the optimizer step, and what a model holds.
 * @{ */

/** The global L2 norm of the gradients as the optimizer step would read them: after
 * dt_model_sync_grads and dt_model_unscale_grads (16-bit gradients times the pending unscale),
 * so the norm of the reduced, unscaled gradients, the same on every rank with no communication
 * (every rank holds the same reduced gradients and the sum runs in double in a fixed order, so
 * the bits agree too). inf or NaN when a gradient is. Costs one read of the gradients (a device
 * reduction on a GPU, which waits for it). Not collective. */
DT_API dt_status dt_model_grad_norm(const dt_model *m, double *norm);
/** PyTorch's clip_grad_norm_(max_norm) on the gradients: *norm (may be NULL) = dt_model_grad_norm;
 * when it is finite and coef = max_norm / (norm + 1e-6) (rounded to fp32) is below 1, every
 * gradient is multiplied by coef (16-bit ones as dt_model_optimizer_step widens them). A
 * non-finite norm clips nothing (the step should be skipped; a loss scaler does). max_norm must
 * be > 0 (+inf: only the norm). Not collective. */
DT_API dt_status dt_model_clip_grad_norm(dt_model *m, double max_norm, double *norm);
/** Clipping inside dt_model_train_step, between the unscale and the optimizer step: 0 (default)
 * off, > 0 clip to max_norm, +inf compute and report the norm without clipping. The norm is
 * computed only then (dt_step_result.grad_norm is NaN otherwise). DT_ERR_INVALID_ARG for a
 * negative or NaN max_norm. */
DT_API dt_status dt_model_set_clip_grad_norm(dt_model *m, double max_norm);

/** Gradient accumulation: k >= 1 micro-batches per optimizer step (default 1). Calls to
 * dt_model_forward_backward then come in groups of k: the first of a group overwrites the
 * gradients, the next ones add theirs (after each call the gradient buffer holds the group's
 * running sum, this rank's own), and only the k-th starts the gradient allreduce, so the other
 * k - 1 send nothing. dt_model_sync_grads, dt_model_unscale_grads and dt_model_optimizer_step
 * before a group is complete are DT_ERR_INVALID_ARG. With grad_scale = 1 / (k * batch) on every
 * micro-batch (and DT_AVG, the default), a group equals one step on a batch of k * batch per
 * rank: the mean over the k * batch * world samples of the global batch (DT_SUM:
 * 1 / (k * batch * world)). The sum of earlier micro-batches lives in one more fp32 buffer of
 * dt_model_num_params floats on the model's device (16-bit gradients are added in fp32 and
 * rounded once per micro-batch). Setting it (even to the same k) starts a new group; so does
 * dt_model_set_precision. DT_ERR_INVALID_ARG for k < 1 or > 65536; DT_ERR_NOMEM. */
DT_API dt_status dt_model_set_accum_steps(dt_model *m, int k);
/** k: the micro-batches per optimizer step (dt_model_set_accum_steps()). */
DT_API int dt_model_accum_steps(const dt_model *m);
/** The micro-batches of the current group already taken (0 .. k-1; 0 at a step boundary). */
DT_API int dt_model_accum_pos(const dt_model *m);

/** Turns the per-layer finite check on (on nonzero) or off. With the check on, backward looks at
 * each layer's own gradients as they are made, before the allreduce (a read of the layer's
 * gradients), and remembers the first layer (in backward order) holding an inf or NaN:
 * dt_model_nonfinite_layer returns its index, -1 when none was found in the last backward. Say who
 * caused an overflow, since after the allreduce every rank has it. */
DT_API void dt_model_set_nonfinite_check(dt_model *m, int on);
/** The index of the first layer (in backward order) whose own gradients held an inf or NaN in the
 * last backward, -1 when none did (or the check is off): see dt_model_set_nonfinite_check(). */
DT_API int dt_model_nonfinite_layer(const dt_model *m);
/** "layer 3 (fc:1024)" for layer index i, into buf (n bytes); "-" when i is out of range. */
DT_API void dt_model_layer_name(const dt_model *m, int i, char *buf, size_t n);

/** Bytes this rank holds for the model, by kind, in the model's memory (the GPU's for a GPU model;
 * the engine's send/receive scratch is not counted). Parameters, gradients and each optimizer
 * moment are one allocation each; activations and workspace share one, the activation pool,
 * sized for the largest batch and reused by every step. */
typedef struct dt_memory_summary {
    size_t params;      /**< fp32 master parameters (the CPU path keeps no 16-bit copy: weights are
                           rounded as each op reads them; a 16-bit GPU model keeps one) */
    size_t grads;       /**< the gradient buffer (4 or 2 bytes an element), and with accumulation
                           (dt_model_set_accum_steps > 1) its fp32 sum buffer */
    size_t optimizer;   /**< momentum, or Adam's two moments (fp32) */
    size_t activations; /**< layer outputs, the two backward buffers, pooling indices, at max batch */
    size_t workspace;   /**< convolution scratch, and the fp32 conversion scratch of 16-bit runs */
    size_t pool;        /**< the activation pool's allocation: activations + workspace, aligned */
    size_t device_free;  /**< a GPU model: the device's free memory now; else 0 */
    size_t device_total; /**< a GPU model: the device's total memory; else 0 */
} dt_memory_summary;
/** Fills *out with what m (and the optimizer o, which may be NULL: no optimizer state counted)
 * holds in this rank's memory. */
DT_API void dt_model_memory(const dt_model *m, const dt_optimizer *o, dt_memory_summary *out);

/** @} */

/** @defgroup scaler Mixed precision: loss scaling
 *
 * Dynamic loss scaling as torch.cuda.amp.GradScaler does it, with Megatron-style hysteresis. The
 * loss (in dtrain: grad_scale of dt_model_forward_backward) is multiplied by dt_scaler_scale()
 * before backward, so small fp16 gradients do not flush to zero; after the allreduce the gradients
 * are divided by it again and checked for inf/nan, and dt_scaler_update() gets the verdict. Every
 * rank sees the same reduced gradients, so every rank takes the same decision without talking.
 *
 * update(found_inf):
 *   - no overflow: the step is taken; after growth_interval consecutive good steps the scale grows
 *     by growth_factor (at most max_scale) and the hysteresis budget is refilled;
 *   - overflow: the step is skipped (the caller leaves the parameters alone), the run of good steps
 *     restarts, the hysteresis budget drops by one, and when it is spent the scale backs off by
 *     backoff_factor (at least min_scale; the budget stays spent, so every further overflow backs
 *     off again until the scale grows once more). hysteresis 1 = back off at every overflow (torch);
 *   - the run gives up (DT_ERR_NUMERIC, with the step and the history of the scale in
 *     dt_last_error()) when an overflow comes while the scale already sits at min_scale, or when
 *     more than max_overflow_fraction of the last `window` updates overflowed.
 * A static scale (dynamic 0) never changes; overflowing steps are still skipped and still count
 * toward the window.
 * @{ */

/** A loss scaler's settings (the defaults of dt_scaler_defaults() first, then the valid range). */
typedef struct dt_scaler_config {
    int dynamic;                  /**< 1 (default): grow and back off; 0: keep init_scale */
    double init_scale;            /**< 65536 */
    double growth_factor;         /**< 2 (> 1) */
    double backoff_factor;        /**< 0.5 (in (0, 1)) */
    int growth_interval;          /**< 2000 consecutive good steps before growing (>= 1) */
    int hysteresis;               /**< 1: overflows tolerated before backing off (>= 1) */
    double min_scale;             /**< 1 (> 0): the floor */
    double max_scale;             /**< 2^24 = 16777216 (>= min_scale) */
    int window;                   /**< 100: recent updates that the overflow fraction looks at (>= 1) */
    double max_overflow_fraction; /**< 0.5: give up when more than this of the window overflowed, (0, 1] */
} dt_scaler_config;

/** Fills c with the defaults listed above. */
DT_API void dt_scaler_defaults(dt_scaler_config *c);

/** A loss scaler: the scale and its state machine. Opaque. */
typedef struct dt_scaler dt_scaler;
/** Makes a scaler from c. Checks every field (a bad one fails with DT_ERR_INVALID_ARG naming it, its
 * value and the range; init_scale must lie in [min_scale, max_scale]). */
DT_API dt_status dt_scaler_create(const dt_scaler_config *c, dt_scaler **out);
/** Frees the scaler. NULL is a no-op. */
DT_API void dt_scaler_free(dt_scaler *s);
/** The current scale: multiply the loss by it. */
DT_API float dt_scaler_scale(const dt_scaler *s);
/** Records one step's verdict (found_inf nonzero: some reduced gradient was inf or nan) and moves the
 * state machine. DT_OK: go on (skip the optimizer step when found_inf). DT_ERR_NUMERIC: stop
 * training; dt_last_error() names the step, the scale and the recent history of the scale. */
DT_API dt_status dt_scaler_update(dt_scaler *s, int found_inf);
/** Updates so far. */
DT_API long dt_scaler_updates(const dt_scaler *s);
/** Updates that overflowed so far (skipped steps). */
DT_API long dt_scaler_skipped(const dt_scaler *s);

/** The whole state, for checkpoints: the scale, the run of good steps, the hysteresis budget, the
 * update and skip counts. set_state checks the values (DT_ERR_CORRUPT when out of range). */
typedef struct dt_scaler_state {
    double scale;        /**< the current scale */
    int good_steps;      /**< consecutive good steps since the last growth or overflow */
    int hysteresis_left; /**< overflows still tolerated before the next backoff */
    long updates;        /**< dt_scaler_updates() */
    long skipped;        /**< dt_scaler_skipped() */
} dt_scaler_state;
/** Copies the scaler's whole state into *st. */
DT_API void dt_scaler_get_state(const dt_scaler *s, dt_scaler_state *st);
/** Replaces the scaler's state with *st (a checkpoint's), after checking it against the scaler's
 * settings: DT_ERR_CORRUPT when a value is out of range (the scaler is then unchanged). */
DT_API dt_status dt_scaler_set_state(dt_scaler *s, const dt_scaler_state *st);

/** @} */

/** @defgroup step One training step
 * dt_model_train_step(): the whole step of `dtrain train`, and where its time goes.
 * @{ */

/** What one dt_model_train_step() did. */
typedef struct dt_step_result {
    double loss_sum;    /**< summed loss of this rank's batch (unscaled) */
    int correct;        /**< argmax == label on this rank's batch */
    int skipped;        /**< 1: the reduced gradients overflowed and the optimizer step was skipped */
    double comm_wait_s; /**< time spent waiting in dt_model_sync_grads (the exposed communication) */
    int stepped;        /**< 1: this call ended its accumulation group and the optimizer stepped (0 on
                           micro-batches 1..k-1 of dt_model_set_accum_steps, and on skipped steps) */
    double grad_norm;   /**< with dt_model_set_clip_grad_norm on: the norm before clipping of the
                           reduced, unscaled gradients; +inf on a skipped step (not computed: the
                           gradients overflowed); NaN when clipping is off or the group goes on */
} dt_step_result;

/** The whole step of `dtrain train` on this rank's batch: forward and backward with the loss
 * multiplied by grad_scale and by the scaler's scale (sc may be NULL: no loss scaling), the
 * gradient allreduce, the finite check and unscale after it (with a scaler), the scaler's update,
 * clipping (dt_model_set_clip_grad_norm) and the optimizer step unless the gradients overflowed.
 * With dt_model_set_accum_steps(k), calls 1..k-1 of a group only run forward and backward (r's
 * stepped 0, no communication) and the k-th does the rest, once for the group: grad_scale is
 * then 1 / (k * batch), and the scaler's scale stays the same within a group. A scaler that gives up returns
 * DT_ERR_NUMERIC (the model's dt_model_nonfinite_layer then says where the inf started, when the
 * check is on). Collective. */
DT_API dt_status dt_model_train_step(dt_model *m, dt_optimizer *o, dt_scaler *sc, const float *x,
                                     const int32_t *labels, int batch, float grad_scale, dt_step_result *r);

/** Where a training step's time goes. Profiling waits for the device at every boundary below (a
 * GPU's work is otherwise asynchronous), so profiled steps run somewhat slower than plain ones;
 * the split is what to look at. Seconds summed over `steps` profiled steps. */
typedef struct dt_step_profile {
    long steps;         /**< profiled steps the sums cover */
    double input_s;     /**< the batch to the device, and (16-bit on a GPU) the weights to 16 bits */
    double forward_s;   /**< every layer's forward pass */
    double loss_s;      /**< softmax cross-entropy and the loss read back */
    double backward_s;  /**< every layer's backward pass, with the per-layer finite check of fp16 */
    double allreduce_s; /**< waiting for the gradient allreduce after backward */
    double check_s;     /**< the unscale and finite check of the loss scaler */
    double optimizer_s; /**< the optimizer step */
} dt_step_profile;
/** Turns profiling on (and zeroes the counts) or off. dt_model_train_step fills every field;
 * dt_model_forward_backward the first four and backward_s. DT_ERR_NOMEM when the per-layer
 * counters cannot be allocated. */
DT_API dt_status dt_model_set_profile(dt_model *m, int on);
/** Copies the sums so far into *out (forward_s and backward_s: the layers' sums). */
DT_API void dt_model_profile(const dt_model *m, dt_step_profile *out);
/** Seconds summed over the profiled steps of layer i's forward and backward (0 for a layer that
 * does nothing, such as flatten). */
DT_API void dt_model_layer_profile(const dt_model *m, int i, double *forward_s, double *backward_s);

/** @} */

#endif /* DTRAIN_TRAINING_H */
