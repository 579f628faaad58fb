/**
 * @file
 * @brief Part of the public API: what trains a model: optimizers, the loss scaler, and
 * the training step with its memory summary and profile.
 * Include `<dtrain.h>`, which includes every part in order after the types they share; this file
 * is not meant to be included on its own.
 */
#ifndef DTRAIN_TRAINING_H
#define DTRAIN_TRAINING_H

#if !defined(DTRAIN_H) && !defined(DTRAIN_DOXYGEN) /* DTRAIN_DOXYGEN: docs/Doxyfile.in */
#error "include <dtrain.h>, which includes dtrain/training.h"
#else /* the rest only under <dtrain.h>: one error, not a cascade after it */

/** @defgroup optimizer Optimizer
 * SGD with momentum and AdamW over flat fp32 buffers, with PyTorch's semantics.
 * @{ */

/** Which update rule. */
typedef enum dt_optim_kind {
    DT_OPTIM_SGD = 0,  /**< SGD with momentum (torch.optim.SGD) */
    DT_OPTIM_ADAMW = 1 /**< AdamW, decoupled weight decay (torch.optim.AdamW) */
} dt_optim_kind;

/** An optimizer's settings: fill with dt_optim_defaults(), then edit. */
typedef struct dt_optim_config {
    dt_optim_kind kind; /**< the update rule */
    float lr;           /**< learning rate (> 0); dt_optimizer_set_lr() changes it between steps */
    float momentum;     /**< SGD; 0 = plain SGD */
    float weight_decay; /**< SGD: added to the gradient; AdamW: decoupled */
    float beta1;        /**< AdamW: decay of the first moment */
    float beta2;        /**< AdamW: decay of the second moment */
    float eps;          /**< AdamW: added to the root of the second moment */
} dt_optim_config;

/** Fills c with the defaults: SGD, lr 0.01, momentum 0.9, weight decay 0, betas 0.9/0.999, eps 1e-8.
 * NULL c: nothing. */
DT_API void dt_optim_defaults(dt_optim_config *c);

/** An optimizer and its state (momentum, or Adam's moments). Opaque. */
typedef struct dt_optimizer dt_optimizer;
/** An optimizer over n >= 1 parameters (allocates its state: momentum, or Adam's m and v); *out
 * (must not be NULL) is NULL on failure. Errors: DT_ERR_INVALID_ARG (c or out NULL; n 0; an
 * unknown kind; a setting out of range, named: lr > 0, momentum in [0, 1), weight_decay >= 0, and
 * for AdamW betas in [0, 1) and eps > 0, each finite), DT_ERR_NOMEM. */
DT_API dt_status dt_optimizer_create(const dt_optim_config *c, size_t n, dt_optimizer **out);
/** Frees the optimizer and its state. NULL is a no-op. */
DT_API void dt_optimizer_free(dt_optimizer *o);
/** One update of params (n floats, host memory) from grads, PyTorch semantics. A model's
 * parameters, on either device, are updated by dt_model_optimizer_step() instead. Errors:
 * DT_ERR_INVALID_ARG (o NULL, params or grads NULL with n > 0, an optimizer sharded by
 * dt_model_optimizer_step under ZeRO-1). */
DT_API dt_status dt_optimizer_step(dt_optimizer *o, float *params, const float *grads);
/** The learning rate the next step uses (0 for a NULL o). */
DT_API float dt_optimizer_lr(const dt_optimizer *o);
/** Changes the learning rate between steps (a schedule: the CLI's --lr-schedule). Nothing else
 * changes: momentum and Adam's moments carry on, as when a PyTorch scheduler writes
 * param_group['lr']. DT_ERR_INVALID_ARG for a NULL o, or a rate that is not a positive finite
 * number (the optimizer keeps its rate). */
DT_API dt_status dt_optimizer_set_lr(dt_optimizer *o, float lr);

/** @} */

/** @defgroup scaler Loss scaler
 * Dynamic loss scaling of fp16 training, with hysteresis (docs/library.md, "Loss scaling": the
 * state machine).
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

/** Fills c with the defaults listed above. NULL c: nothing. */
DT_API void dt_scaler_defaults(dt_scaler_config *c);

/** A loss scaler: the scale and its state machine. Opaque. */
typedef struct dt_scaler dt_scaler;
/** Makes a scaler from c; *out (must not be NULL) is NULL on failure. Checks every field (a bad one
 * fails with DT_ERR_INVALID_ARG naming it, its value and the range; init_scale must lie in
 * [min_scale, max_scale]). Errors: DT_ERR_INVALID_ARG (that, or c or out NULL), DT_ERR_NOMEM. */
DT_API dt_status dt_scaler_create(const dt_scaler_config *c, dt_scaler **out);
/** Frees the scaler. NULL is a no-op. */
DT_API void dt_scaler_free(dt_scaler *s);
/** The current scale: multiply the loss by it. 0 for a NULL s. */
DT_API float dt_scaler_scale(const dt_scaler *s);
/** Records one step's verdict (found_inf nonzero: some reduced gradient was inf or nan) and moves the
 * state machine. DT_OK: go on (skip the optimizer step when found_inf). DT_ERR_NUMERIC: stop
 * training; dt_last_error() names the step, the scale and the recent history of the scale.
 * DT_ERR_INVALID_ARG for a NULL s. */
DT_API dt_status dt_scaler_update(dt_scaler *s, int found_inf);
/** Updates so far (0 for a NULL s). */
DT_API long dt_scaler_updates(const dt_scaler *s);
/** Updates that overflowed so far (skipped steps; 0 for a NULL s). */
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
/** Copies the scaler's state into *st (zeros for a NULL s; nothing for a NULL st): all but its
 * window of recent overflows, which dt_checkpoint_save and dt_checkpoint_load_latest carry too. */
DT_API void dt_scaler_get_state(const dt_scaler *s, dt_scaler_state *st);
/** Replaces the scaler's state with *st (a checkpoint's), after checking it against the scaler's
 * settings, and empties its window of recent overflows: DT_ERR_CORRUPT when a value is out of
 * range (the scaler is then unchanged); DT_ERR_INVALID_ARG for a NULL s or st. */
DT_API dt_status dt_scaler_set_state(dt_scaler *s, const dt_scaler_state *st);

/** @} */

/** @defgroup step The training step
 * @ingroup model
 * The optimizer step of a model, what a model holds in memory, and dt_model_train_step(): the
 * whole step of `dtrain train` and where its time goes. The step runs the collectives of the
 * model's context: one thread at a time per context (@ref context).
 * @{ */

/** One optimizer step of the fp32 parameters from the gradients in whatever type they are kept
 * (after dt_model_unscale_grads). Skip it for a step whose gradients overflowed. Under
 * dt_sync_config.zero = 1 it updates only this rank's slices and allgathers the parameters: collective.
 * Errors: DT_ERR_INVALID_ARG (m or o NULL; gradients not reduced across ranks without
 * allow_unreduced; o made for another parameter count, or stepping a model on another backend;
 * mid accumulation group; o sharded while the model is not), DT_ERR_NOMEM and DT_ERR_DEVICE (the
 * state on the model's device), the allgather's DT_ERR_MPI and DT_ERR_COMM, and those of settling
 * a verdict left pending (dt_model_settle_step). */
DT_API dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o);

/** Under dt_sync_config.zero = 1 (dt_model_set_sync first): cuts o's state down to this rank's
 * slices now, so that dt_model_memory shows 1/W of it from the start (dt_model_optimizer_step does
 * the same at its first step otherwise). Not collective. A no-op at zero 0 without a sharded o;
 * DT_ERR_INVALID_ARG for a NULL m or o, or when o was sharded for another plan; DT_ERR_NOMEM. */
DT_API dt_status dt_model_shard_optimizer(dt_model *m, dt_optimizer *o);

/** Bytes this rank holds for the model, by kind, in the model's memory (the GPU's for a GPU model;
 * the engine's send/receive scratch is not counted). Parameters, gradients and each optimizer
 * moment are one allocation each; activations and workspace share one, the activation pool,
 * sized for the largest batch and reused by every step. */
typedef struct dt_memory_summary {
    size_t params;       /**< fp32 master parameters (the CPU path keeps no 16-bit copy: weights are
                              rounded as each op reads them; a 16-bit GPU model keeps one, and a
                              second from the first optimizer step it overlaps layer by layer:
                              dt_model_set_step_overlap) */
    size_t grads;        /**< the gradient buffer (4 or 2 bytes an element), and with accumulation
                              (dt_model_set_accum_steps > 1) its fp32 sum buffer */
    size_t optimizer;    /**< momentum, or Adam's two moments (fp32) */
    size_t activations;  /**< layer outputs, the two backward buffers, pooling indices, at max batch */
    size_t workspace;    /**< convolution scratch, and the fp32 conversion scratch of 16-bit runs */
    size_t pool;         /**< the activation pool's allocation: activations + workspace, aligned */
    size_t device_free;  /**< a GPU model: the device's free memory now; else 0 */
    size_t device_total; /**< a GPU model: the device's total memory; else 0 */
} dt_memory_summary;
/** Fills *out with what m (and the optimizer o, which may be NULL: no optimizer state counted)
 * holds in this rank's memory (zeros for a NULL m; nothing for a NULL out). */
DT_API void dt_model_memory(const dt_model *m, const dt_optimizer *o, dt_memory_summary *out);

/** What dt_model_plan_memory() plans for: a model and how a program sets it up, as dtrain train
 * does (dt_model_create at the largest batch, dt_model_set_accum_steps, dt_model_set_precision,
 * an optimizer). Fill with dt_memory_plan_defaults(), then set spec, input and batch. The strings
 * and optim stay the caller's. */
typedef struct dt_memory_plan_config {
    const char *spec;             /**< the model spec, as dt_model_create() takes it (required) */
    const char *input;            /**< the input shape ("784", "3x32x32") or NULL, as dt_model_create() */
    int batch;                    /**< the largest batch (dt_model_create()'s max_batch), >= 1; default 1 */
    dt_dtype compute;             /**< compute precision: DT_F32 (default), DT_F16 or DT_BF16 */
    dt_dtype grads;               /**< gradient type: DT_F32 (default) or compute (backends that keep 16-bit ones) */
    const dt_optim_config *optim; /**< the optimizer whose state is counted; NULL (default): none */
    int accum_steps;              /**< dt_model_set_accum_steps(): > 1 adds the fp32 sum buffer; default 1 */
    int zero_world;               /**< ZeRO-1 (dt_sync_config.zero = 1) over this many ranks: the optimizer state
                                       is then rank zero_rank's share, part zero_rank of every gradient bucket
                                       (planned with the caps below, as the reducer plans them); 0 or 1
                                       (default): the whole state */
    int zero_rank;                /**< the rank whose share is planned, 0 .. zero_world - 1 (on the CPU rank 0
                                       holds the most, on a GPU the last rank); default 0 */
    double bucket_mb;             /**< the bucket caps of the sync (dt_sync_config), used with zero_world > 1;
                                       default 25 */
    double first_bucket_mb;       /**< default 1 */
} dt_memory_plan_config;

/** Fills c with the defaults above (spec and input NULL). NULL c: nothing. */
DT_API void dt_memory_plan_defaults(dt_memory_plan_config *c);

/** How many of the biggest buffers a dt_memory_plan names. */
#define DT_MEMORY_TOP 10

/** One buffer of a plan: what it holds and its bytes. */
typedef struct dt_memory_item {
    char what[64]; /**< "layer 0 (conv:32:3:1:1) output", "parameters (fp32)", "AdamW moments (m, v)" */
    size_t bytes;  /**< its size */
} dt_memory_item;

/** A model's memory plan: plain data, no pointers. */
typedef struct dt_memory_plan {
    dt_memory_summary kinds; /**< what dt_model_memory() reports for the model and optimizer made so once
                                  they have trained a step: in params also the spare 16-bit copy a
                                  step overlapped layer by layer allocates, planned for a bf16 GPU
                                  model of DT_STEP_OVERLAP_AUTO_PARAMS or more parameters with an
                                  optimizer on one rank (ctx NULL or a world of one) without ZeRO,
                                  as dtrain train runs it (a run that clips, or sets the overlap
                                  off, never allocates it); device_free/device_total: the device's
                                  now (a CPU plan: 0) */
    size_t other;            /**< the small buffers dt_model_memory() leaves out: the finite-check flags, a GPU
                                  model's input batch and labels, 16-bit gradients' optimizer block */
    size_t total;            /**< every byte the model's backend holds once training runs (parameters,
                                  gradients, optimizer state, the activation pool, other) */
    size_t peak;             /**< the most held at once while the model is made (>= total): dt_model_create()
                                  makes an fp32 pool before dt_model_set_precision() replaces it with a
                                  16-bit one, and holds both gradient buffers while it swaps them. What
                                  must fit. */
    int n_top;               /**< entries of top */
    dt_memory_item top[DT_MEMORY_TOP]; /**< the biggest buffers, largest first */
} dt_memory_plan;

/** The memory plan of the model c describes on ctx's device (the CUDA backend's sizes for a CUDA
 * placement, the CPU's otherwise or with ctx NULL), without making the model: *out holds what
 * dt_model_create(), dt_model_set_accum_steps(), dt_model_set_precision() and the optimizer's
 * first step would allocate. Allocates no device memory and is not collective (on a GPU it asks
 * the device only for its free memory). Errors: DT_ERR_INVALID_ARG (c, c->spec or out NULL; a bad
 * spec, input, batch, precision, accum_steps, zero_world (< 0) or zero_rank (outside
 * 0..zero_world - 1, so 0 when zero_world is 0 or 1; with or without optim), a bucket cap outside
 * 0..1e6 MiB or NaN, or an optim dt_optimizer_create would refuse: each named),
 * DT_ERR_UNSUPPORTED for a CUDA placement in a build without CUDA or 16-bit gradients on a backend
 * that keeps fp32 ones, DT_ERR_NOMEM (host memory for the plan). */
DT_API dt_status dt_model_plan_memory(dt_ctx *ctx, const dt_memory_plan_config *c, dt_memory_plan *out);

/** The largest batch (c's batch is ignored) whose plan's peak fits in budget bytes, into *batch,
 * and that plan into *plan; up to 1048576 (the CLI's limit on --batch). *batch 0 when even batch 1
 * does not fit: *plan is then batch 1's, whose peak says what the model needs at the least. The
 * plan grows with the batch, so the answer is found by doubling and bisection. Errors as
 * dt_model_plan_memory() (batch or plan NULL: DT_ERR_INVALID_ARG). */
DT_API dt_status dt_model_max_batch(dt_ctx *ctx, const dt_memory_plan_config *c, size_t budget, int *batch,
                                    dt_memory_plan *plan);

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
    int pending;        /**< 1: the step is queued behind its loss scaler's verdict, which was left
                             for later (dt_model_set_deferred_verdict): skipped and stepped are 0
                             until dt_model_settle_step says which */
} dt_step_result;

/** The whole step of `dtrain train` on this rank's batch: forward and backward with the loss
 * multiplied by grad_scale and by the scaler's scale (sc may be NULL: no loss scaling), the
 * gradient allreduce, the finite check and unscale after it (with a scaler), the scaler's update,
 * clipping (dt_model_set_clip_grad_norm) and the optimizer step unless the gradients overflowed.
 * With dt_model_set_accum_steps(k), calls 1..k-1 of a group only run forward and backward (r's
 * stepped 0, no communication) and the k-th does the rest, once for the group: grad_scale is
 * then 1 / (k * batch), and the scaler's scale stays the same within a group. A scaler that gives up returns
 * DT_ERR_NUMERIC (the model's dt_model_nonfinite_layer then says where the inf started, when the
 * check is on). The scaler's unscale and clipping's coefficient are applied as the optimizer step
 * reads the gradients, not to the gradient buffer: afterwards dt_model_grads() holds them as the
 * reduction left them (times the loss scale, unclipped); dt_model_grad_norm() still gives the norm
 * of what the step used. On a GPU the finite check's verdict stays on the device, where the
 * optimizer step queued behind it reads it (doing nothing on an overflow), and the call waits for
 * the verdict alone before it returns (or not: dt_model_set_deferred_verdict): r, the scaler and
 * the optimizer's step count are the same as when the host decides first, which it still does with
 * clipping or ZeRO-1. A verdict an earlier call left pending is settled first. x and labels: host
 * or device memory, as dt_model_forward_backward takes them. Collective. Errors:
 * DT_ERR_INVALID_ARG (a NULL m, o, x, labels or r, or a grad_scale that is not a positive finite
 * number, refused before anything runs; grad_scale times the scaler's scale not finite; and those
 * of dt_model_forward_backward and dt_model_optimizer_step), DT_ERR_NUMERIC (the scaler gave up), and
 * the pass's, the reduction's and the optimizer step's DT_ERR_DEVICE, DT_ERR_NOMEM, DT_ERR_MPI and
 * DT_ERR_COMM. */
DT_API dt_status dt_model_train_step(dt_model *m, dt_optimizer *o, dt_scaler *sc, const float *x, const int32_t *labels,
                                     int batch, float grad_scale, dt_step_result *r);

/** Whether dt_model_train_step may return before a loss-scaled step's overflow verdict (on != 0;
 * default off: it waits). Where the verdict is queued on the device with the step behind it (see
 * dt_model_train_step), waiting for it holds the host until backward is done, so the host cannot
 * queue the next batch and step while the device runs the optimizer; with this on, the step
 * returns once queued, r->pending 1. The verdict is taken by dt_model_settle_step, which the
 * next dt_model_train_step and every dt_model_* call that reads or writes the gradients or
 * parameters (forward/backward, evaluate, set_sync, set_params, precision, accumulation) call first.
 * Until then the scaler (dt_scaler_scale, _updates, _skipped, _get_state) and the optimizer's
 * step count do not yet count the step, and dt_checkpoint_save refuses the model: settle before
 * reading them, and before freeing o or sc, which the model keeps until then. Bits, scaler and
 * step count come out the same as with it off. NULL m: nothing. */
DT_API void dt_model_set_deferred_verdict(dt_model *m, int on);

/** Takes the verdict dt_model_train_step left pending (dt_model_set_deferred_verdict): waits for
 * it, puts back the optimizer's step count when the step overflowed (the device skipped it), and
 * updates the scaler. *skipped (may be NULL): 1 when that step was skipped, else 0 (also when
 * nothing was pending: DT_OK at once). Errors: DT_ERR_INVALID_ARG for a NULL m; a device error
 * from the wait; DT_ERR_NUMERIC when the scaler gives up on this verdict (as dt_model_train_step
 * would have returned it). The verdict is taken once, also when this fails. */
DT_API dt_status dt_model_settle_step(dt_model *m, int *skipped);

/** When dt_model_train_step steps the optimizer layer by layer (dt_model_set_step_overlap). */
typedef enum dt_step_overlap {
    DT_STEP_OVERLAP_OFF = 0,  /**< one optimizer step over every parameter after backward */
    DT_STEP_OVERLAP_ON = 1,   /**< layer by layer wherever the step allows it (below) */
    DT_STEP_OVERLAP_AUTO = 2, /**< (default) ON for models of at least DT_STEP_OVERLAP_AUTO_PARAMS
                                   parameters, whose optimizer pass is long enough to hide; OFF for
                                   smaller ones, where a launch per layer would cost more than it hides */
} dt_step_overlap;
/** AUTO's threshold: 8M parameters, a pass of 176 MB of fp32 state for SGD with momentum and a
 * 16-bit copy (about 40 us on an H200), against a few microseconds of host work per layer. */
#define DT_STEP_OVERLAP_AUTO_PARAMS (8u << 20)

/** The optimizer step of dt_model_train_step overlapped with the work still under way when part
 * of the gradients is final. One rank: each parameter layer is stepped the moment backward is done
 * with its gradients, beside the backward of the layers before it (on a GPU on a second stream, so
 * the memory-bound step runs alongside the compute-bound GEMMs; on the CPU while its gradients are
 * still in cache). More ranks: each bucket is stepped the moment its allreduce lands, while the later buckets are still being reduced (on GPUs the step of a bucket
 * is queued behind its NCCL collective alone). Only where the step needs nothing of the whole gradient: no scaler (sc
 * NULL), no clipping, the optimizer state not sharded (zero 0), and profiling off; elsewhere the
 * optimizer steps once after backward and the allreduce. Either way every parameter gets the same
 * bits. A 16-bit GPU model stepping layer by layer keeps a second 16-bit parameter copy (2 bytes a
 * parameter, allocated at the first such step; without the memory it steps as before, with a
 * warning): each layer's step writes the new copy there as soon as the layer's parameter gradients
 * are final, beside its own data gradient, which still reads the current one. On a GPU dt_model_train_step then returns with the step still running there (the next
 * forward, and any read of the parameters, waits for it). A mode outside the enum is
 * DT_STEP_OVERLAP_AUTO. NULL m: nothing. */
DT_API void dt_model_set_step_overlap(dt_model *m, dt_step_overlap mode);
/** How the last dt_model_train_step that stepped ran the optimizer: DT_STEP_OVERLAP_ON when it was
 * overlapped (layer by layer or bucket by bucket), DT_STEP_OVERLAP_OFF when it stepped once after
 * backward and the allreduce (the setting, a scaler, clipping, ZeRO-1 or profiling kept it there),
 * or before any such step, or for a NULL m. */
DT_API dt_step_overlap dt_model_step_overlapped(const dt_model *m);

/** Whether a forward/backward pass runs as a recorded graph (dt_model_set_graphs). */
typedef enum dt_graphs {
    DT_GRAPHS_OFF = 0,  /**< every pass launches its kernels one by one */
    DT_GRAPHS_ON = 1,   /**< every pass that allows it (below) runs as a graph */
    DT_GRAPHS_AUTO = 2, /**< (default) ON for models of fewer than DT_GRAPHS_AUTO_PARAMS
                             parameters, whose steps are short enough for the host to bound them;
                             OFF for larger ones, whose kernels keep the device busy anyway and
                             whose buckets (at several ranks) should start during backward */
} dt_graphs;
/** AUTO's threshold: the one of DT_STEP_OVERLAP_AUTO (8M parameters), the same line between steps
 * the host's launches bound and steps the device's work does. */
#define DT_GRAPHS_AUTO_PARAMS DT_STEP_OVERLAP_AUTO_PARAMS

/** Step graphs: a model on a backend that records (CUDA Graphs) runs the forward pass, the loss
 * and backward of dt_model_forward_backward and dt_model_train_step as one recorded graph,
 * launched by the host once a pass instead of a kernel at a time, for models whose steps are
 * short enough that the host's launches and per-layer decisions bound them. A graph holds the
 * pass's buffers and scalars: one is recorded for each (input buffer, labels buffer, batch,
 * grad_scale) the pass is called with a second time (the first call runs as usual and warms up
 * the libraries), and every later pass with the same four replays it; the model keeps the four
 * graphs it used last (a GPU model's two input slots take turns for batches from host memory, a
 * loader's batches made on the device are read in its one buffer, and an epoch's short last
 * batch is a key of its own). The optimizer step (its learning rate and step
 * count change every step), a loss scaler's check, clipping and the buckets' allreduce stay
 * outside: at several ranks every bucket starts after the graph's backward, in order, rather
 * than as backward finishes it (what a small model loses there is a few microseconds). A pass
 * records no graph, and runs as usual, where it needs the host between layers: gradient
 * accumulation (dt_model_set_accum_steps above 1), the per-layer finite check, the optimizer
 * stepped layer by layer (dt_model_set_step_overlap), profiling, or a trace recording. Graphs are
 * dropped when the model's buffers change (dt_model_set_precision). A recording that fails (an
 * op that cannot be recorded) turns graphs off for the model with a warning and runs the pass as
 * usual: no result depends on graphs, whose passes give the bits of passes launched one by one.
 * On the CPU (its ops run at once) there is nothing to record and the setting changes nothing. A
 * mode outside the enum is DT_GRAPHS_AUTO. NULL m: nothing. */
DT_API void dt_model_set_graphs(dt_model *m, dt_graphs mode);
/** DT_GRAPHS_ON when the model's last forward/backward pass ran as a graph (recorded then, or
 * replayed), DT_GRAPHS_OFF when it launched its kernels one by one, or before any pass, or for a
 * NULL m. */
DT_API dt_graphs dt_model_graphed(const dt_model *m);

/** Whether relu layers run inside their neighbours (on != 0, the default) instead of as kernels of
 * their own: an fc or conv layer followed by a relu runs the ReLU in its forward (on a GPU the
 * 16-bit fc layer's GEMM in its epilogue, cuBLASLt's bias + ReLU, and the convolutions as they
 * write their output; on the CPU while the output is in cache); a max pool after a relu runs the
 * relu's backward in its own (the relu's mask at each window's argmax is the sign of the pool's
 * output there); and an fc layer after a relu that an fc layer ran forward runs the relu's
 * backward in its own (on a GPU in 16 bits in the data gradient's cuBLASLt epilogue, DRELU, from
 * a bit mask the forward kept: B x OUT bits a layer): a pass over the activations and a kernel
 * less each. The values are the same either way on the CPU; on a GPU cuBLASLt's ReLU may make a
 * NaN 0 where the relu layer passes it on, so a NaN born in such a layer's output stops there (a
 * diverging run still shows a non-finite loss at the step its weights went non-finite from), and
 * its mask is taken before the output is rounded to 16 bits (a value that rounds to 0 still
 * passes its gradient). Turn it off to follow a
 * NaN through every layer to the loss. Changing it drops the model's step graphs
 * (dt_model_set_graphs). m NULL: nothing. */
DT_API void dt_model_set_fused_relu(dt_model *m, int on);

/** Where a training step's time goes. Profiling waits for the device at every boundary below (a
 * GPU's work is otherwise asynchronous), so profiled steps run somewhat slower than plain ones;
 * the split is what to look at. Seconds summed over `steps` profiled steps. */
typedef struct dt_step_profile {
    long steps;         /**< profiled steps the sums cover */
    double input_s;     /**< the batch to the device */
    double forward_s;   /**< every layer's forward pass, and (16-bit on a GPU) the weights cast to 16 bits
                             when something other than the optimizer step changed them */
    double loss_s;      /**< softmax cross-entropy and the loss read back */
    double backward_s;  /**< every layer's backward pass, with the per-layer finite check of fp16 */
    double allreduce_s; /**< waiting for the gradient allreduce after backward */
    double check_s;     /**< the unscale and finite check of the loss scaler */
    double optimizer_s; /**< the optimizer step */
} dt_step_profile;
/** Turns profiling on (on 1; the counts are zeroed) or off (on 0). dt_model_train_step fills
 * every field; dt_model_forward_backward the first four and backward_s. DT_ERR_INVALID_ARG for a
 * NULL m or an on other than 0 or 1; DT_ERR_NOMEM when the per-layer counters cannot be
 * allocated. */
DT_API dt_status dt_model_set_profile(dt_model *m, int on);
/** Copies the sums so far into *out (forward_s and backward_s: the layers' sums; zeros for a NULL
 * m, nothing for a NULL out). */
DT_API void dt_model_profile(const dt_model *m, dt_step_profile *out);
/** Seconds summed over the profiled steps of layer i's forward and backward (0 for a layer that
 * does nothing, such as flatten, an i out of range or a NULL m); an output pointer may be NULL. */
DT_API void dt_model_layer_profile(const dt_model *m, int i, double *forward_s, double *backward_s);

/** @} */

#endif /* DTRAIN_H */
#endif /* DTRAIN_TRAINING_H */
