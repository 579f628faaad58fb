/**
 * @file
 * @brief Part of the public API: models (the layer grammar, parameters, forward and
 * backward, gradient synchronization, precision, clipping and accumulation) and the kernels for
 * models of your own.
 * Include `<dtrain.h>`, which includes every part in order after the types they share; this file
 * is not meant to be included on its own.
 */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#if !defined(DTRAIN_H) && !defined(DTRAIN_DOXYGEN) /* DTRAIN_DOXYGEN: docs/Doxyfile.in */
#error "include <dtrain.h>, which includes dtrain/model.h"
#else /* the rest only under <dtrain.h>: one error, not a cascade after it */

/** @defgroup model Model
 * A stack of layers over one flat parameter buffer: making it, forward and backward, gradient
 * synchronization (docs/library.md, "Models": the layer grammar and the parameter layout).
 * A model made on a context runs the context's collectives (its creation, gradient sync, checks
 * across ranks): one thread at a time per context, its models included (@ref context); another
 * thread entering a collective meanwhile gets DT_ERR_INVALID_ARG. Free it before dt_finalize().
 * @{ */

/** A model: its layers, flat parameters and gradients, activations and gradient engine. Opaque; made
 * by dt_model_create(), freed by dt_model_free(). */
typedef struct dt_model dt_model;

/** Builds a model for batches of up to max_batch samples on ctx's device, parameters initialized
 * from seed (PyTorch's default: uniform in +-1/sqrt(fan_in)) and broadcast from rank 0 so every
 * rank starts identical. Collective: every rank passes the same spec and input, which is checked
 * (a fingerprint of each rank's architecture) before the broadcast. ctx NULL: a model alone, on
 * the CPU, with no gradient synchronization (dt_model_sync_grads has nothing to reduce, its
 * dt_sync_config is kept but not applied, dt_model_num_buckets is 0), for unit tests and tools.
 * *out (must not be NULL) is NULL on failure. A rank whose own arguments or build fail still
 * joins the ranks' check, so every rank fails at once with the first failing rank's code, that
 * rank with its own message and the others naming it. Errors: DT_ERR_INVALID_ARG (a NULL out, a
 * bad spec or input naming the token, max_batch < 1, ranks given different models: every rank
 * fails, naming the first rank that differs from rank 0), DT_ERR_NOMEM (host or device memory, naming the
 * buffer), DT_ERR_UNSUPPORTED (a CUDA placement in a build without CUDA), DT_ERR_DEVICE, and the
 * collectives' DT_ERR_MPI, DT_ERR_COMM and DT_ERR_TIMEOUT. */
DT_API dt_status dt_model_create(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed, int max_batch,
                                 dt_model **out);
/** Lets gradient allreduces still in flight finish, then frees everything. Collective when the model
 * has a communication engine (world > 1). NULL is a no-op. After the program's own MPI_Finalize
 * (free before it) it frees the memory only, as dt_reducer_free does.
 *
 * The calls below that return a value rather than a dt_status take a NULL model and return 0, NULL,
 * -1 or the default their comment names; the void ones do nothing with it (leaving zeros in their
 * outputs, which may be NULL: nothing written). The dt_status calls refuse a NULL required
 * argument with DT_ERR_INVALID_ARG naming it, before doing anything. */
DT_API void dt_model_free(dt_model *m);

/** The number of parameters: the length in floats of the dt_model_params() and dt_model_grads()
 * buffers, laid out in PyTorch's state_dict order (docs/library.md, "Models": weights then bias,
 * layer by layer). */
DT_API size_t dt_model_num_params(const dt_model *m); /* 0 for a NULL m */
/** The flat parameter buffer (dt_model_num_params() floats, the layout above), owned by m: host
 * memory, or device memory on a GPU model (dt_model_on_gpu()). The caller may write through it
 * until the next call that computes with m. On a GPU model the call first waits for the work m has
 * queued on the device (a step returns before its optimizer has finished there), so the caller's
 * own kernels, on any stream, see the values of the last step. A 16-bit GPU model keeps a 16-bit
 * copy of the parameters for its forward, which its optimizer step writes as it updates them; this
 * call marks that copy stale, so it is made again from the buffer before the next forward (one
 * cast; to read the parameters without it, use dt_model_get_params). A program that keeps the
 * pointer and writes through it later calls dt_model_params_changed after such writes. */
DT_API float *dt_model_params(dt_model *m); /* NULL for a NULL m */
/** Waits until the work m has queued on its device is done: a GPU step returns once its loss is
 * known, with its optimizer (and, with overlap, later layers' work) still queued. For timing GPU
 * steps, or before other code reads m's buffers on its own stream. Returns at once on the CPU.
 * DT_ERR_INVALID_ARG for a NULL m; DT_ERR_DEVICE when the device reports an error of that work. */
DT_API dt_status dt_model_synchronize(dt_model *m);
/** Says that the parameters were written through a pointer from dt_model_params() kept from
 * earlier: the 16-bit copy of a 16-bit model is made again before its next forward. Never fails;
 * for other models it costs nothing (NULL m: nothing). dt_model_set_params, checkpoint loads and
 * the optimizer keep the copy right themselves. */
DT_API void dt_model_params_changed(dt_model *m);
/** The flat gradient buffer (dt_model_num_params() floats, the parameters' layout), owned by m, in
 * the same memory as the parameters; NULL when the gradients are kept in 16 bits
 * (dt_model_set_precision()). On a GPU model the call first waits for the work m has queued on
 * the device, as dt_model_params does. NULL for a NULL m. */
DT_API float *dt_model_grads(dt_model *m);
/** Whether the model lives on the GPU. On a GPU model (the context's device is CUDA) the parameter
 * and gradient buffers are device memory: read them with dt_model_get_params. Its gradients are
 * allreduced through NCCL in buckets on a communication stream as backward completes them
 * (dt_model_set_sync); in fp16/bf16 they are kept in fp32 (and travel as dt_sync_config::grad_comm
 * says). Checkpoints copy through host memory. 0 for a NULL m. */
DT_API int dt_model_on_gpu(const dt_model *m);
/** Copies the parameters into host memory (dt_model_num_params floats), from either device.
 * Errors: DT_ERR_INVALID_ARG (m or host NULL), DT_ERR_DEVICE (the copy failed). */
DT_API dt_status dt_model_get_params(const dt_model *m, float *host);
/** Replaces the parameters with host's (dt_model_num_params floats, copied; the optimizer's state,
 * the gradients and a gradient synchronization under way are untouched), on either device. Not
 * collective: give every rank the same values (broadcast them) or the replicas drift. Errors:
 * DT_ERR_INVALID_ARG (m or host NULL), DT_ERR_DEVICE (the copy, or the wait for a step's verdict
 * left pending), DT_ERR_NUMERIC (that verdict made the scaler give up, as dt_model_settle_step). */
DT_API dt_status dt_model_set_params(dt_model *m, const float *host);
/** Floats per input sample (C x H x W of the input shape); 0 for a NULL m. */
DT_API size_t dt_model_input_size(const dt_model *m);
/** The input shape the model expects (channels, height, width), for dt_synthetic_create; an output
 * pointer may be NULL. */
DT_API void dt_model_input_shape(const dt_model *m, int *c, int *h, int *w);
/** Classes: the width of the last fc layer; labels lie in [0, classes). 0 for a NULL m. */
DT_API int dt_model_num_classes(const dt_model *m);
/** One line per layer with its output shape and parameter count, into buf (n bytes; "" for a
 * NULL m). */
DT_API void dt_model_describe(const dt_model *m, char *buf, size_t n);

/** Forward and backward on this rank's batch: x (batch, input_size), labels (batch) in
 * [0, classes). Overwrites the gradients with d(loss)/d(params) where loss is the summed
 * cross-entropy times grad_scale (pass 1/batch for this rank's mean; averaging over ranks with
 * dt_model_sync_grads then gives the mean over the global batch). With overlap on and more than
 * one rank, it also starts the gradient allreduces: call dt_model_sync_grads before reading the
 * gradients (it is collective: every rank calls both). Returns the summed loss and the number of
 * correct argmax predictions. A label out of range fails with DT_ERR_INVALID_ARG. On a GPU it
 * waits only for the loss, once backward is queued behind it: it returns with backward still
 * running there (what reads the gradients waits for it), and x and labels may be reused. x and
 * labels are host memory (pinned memory copies asynchronously), or both memory of the model's GPU
 * (a loader's batches made on the device, dt_loader_on_device): read where they are by the pass's
 * kernels, queued on the device's default stream behind the work that made them (work queued
 * there after this call, such as the loader's next batch, may overwrite them), and not read by
 * the host, so a label out of range is not refused but makes the loss NaN. Errors:
 * DT_ERR_INVALID_ARG (a NULL m, x, labels, loss_sum or correct, or a grad_scale that is not a
 * positive finite number, refused before the pass; a batch outside 1..max_batch, a label out of
 * range, host and device memory mixed), DT_ERR_DEVICE, the
 * errors of the gradient allreduces it starts (DT_ERR_MPI, DT_ERR_COMM, DT_ERR_NOMEM), and those of
 * settling a verdict left pending (dt_model_settle_step). */
DT_API dt_status dt_model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch,
                                           float grad_scale, double *loss_sum, int *correct);
/** Queues the copy of a host batch to a GPU model's input buffers ahead of the call that trains
 * on it, so that the copy runs while the host waits for something else first: the next
 * dt_model_forward_backward or dt_model_train_step with the same x, labels and batch reads the
 * copy instead of making its own. `dtrain train` stages each batch before it takes the last step's
 * overflow verdict (dt_model_settle_step), which would otherwise hold the copy until backward is
 * done. x and labels: host memory (pinned: the loader's), unchanged until that call returns; the
 * copy reads them until then. A call with other pointers or batch drops what was staged (waiting
 * for its copy), as do a step that fails before reading it, dt_model_evaluate and dt_model_free.
 * Nothing to do (DT_OK) on the CPU or for a batch in device memory. Errors: DT_ERR_INVALID_ARG
 * (NULL arguments, a batch outside 1..max_batch, host and device memory mixed), DT_ERR_DEVICE (a
 * copy failed: nothing is staged). */
DT_API dt_status dt_model_stage_batch(dt_model *m, const float *x, const int32_t *labels, int batch);
/** The forward pass alone, in the model's precision, on `batch` samples (1..max_batch): x (batch,
 * input_size) and labels (batch) in host memory. Sets *loss_sum (summed cross-entropy, in double),
 * *correct (argmax == label) and, when pred is not NULL, pred[i] = sample i's argmax class (the
 * first maximum). Gradients and the optimizer are untouched, and so is their synchronization: after
 * a dt_model_forward_backward whose gradients are not reduced yet, its allreduces go on and
 * dt_model_sync_grads completes them as without the evaluation. Not collective: for a figure over a dataset, each rank evaluates its shard and the
 * caller sums (dtrain train --eval-every, dtrain eval). Errors: DT_ERR_INVALID_ARG (a NULL m, x,
 * labels, loss_sum or correct; a bad batch or label), DT_ERR_DEVICE, and those of settling a
 * verdict left pending. */
DT_API dt_status dt_model_evaluate(dt_model *m, const float *x, const int32_t *labels, int batch, double *loss_sum,
                                   int *correct, int32_t *pred);

/** How gradients are synchronized. With overlap, backward starts the allreduce of each bucket (a
 * contiguous slice of the gradients, filled last layer first) the moment its layers are done, on
 * the communication engine, while it goes on computing; dt_model_sync_grads then waits only for
 * what is still in flight. Either way the result is bitwise the same: the engine adds every
 * element in rank order whatever the buckets. */
typedef struct dt_sync_config {
    int overlap;            /**< 1: allreduce buckets during backward (default); 0: all after backward */
    double bucket_mb;       /**< cap of a bucket in MiB (default 25); 0: no cap, so with first_bucket_mb 0
                                 too everything is one bucket (with the default first cap, the first
                                 bucket still holds the last layers up to 1 MiB, at least one layer,
                                 and the rest is a second one) */
    double first_bucket_mb; /**< cap of the first bucket, the last layers (default 1); 0: capped as the
                                 others (bucket_mb) */
    dt_redop op;            /**< DT_AVG (default), or DT_SUM when grad_scale already divides by ranks */
    dt_dtype grad_comm;     /**< what travels between ranks: DT_F32 (default), or DT_F16 / DT_BF16 to
                                 halve the bytes: each rank's gradient is rounded to 16 bits, the sum
                                 is taken in fp32 in rank order and rounded once more, so every rank
                                 gets the same values (on a GPU, NCCL sums in the 16-bit type, and
                                 DT_AVG multiplies by 1/W rounded to it: see dt_reducer_config::op).
                                 fp16 overflows past 65504: the gradients of the mean loss over the
                                 global batch (see grad_scale) stay far below. */
    int allow_unreduced;    /**< 0 (default): with more than one rank, dt_model_optimizer_step on
                                 gradients that dt_model_sync_grads has not reduced is an error (the
                                 ranks would drift apart unseen); 1: allowed, for loops that skip the
                                 reduction on purpose (local SGD, periodic averaging). Such a step
                                 first waits for the buckets backward already started (with overlap
                                 on, every bucket: their gradients are then reduced, in place); with
                                 overlap 0, or GPU gradients through MPI (--gpu-comm mpi, a build
                                 without NCCL), nothing starts before dt_model_sync_grads, so the
                                 step reads this rank's own gradients */
    int zero;               /**< ZeRO stage: 0 (default) every rank keeps the whole optimizer state and
                                 the gradients are allreduced; 1: the state is sharded, rank r keeping
                                 only part r of every bucket (1/W of it): gradients are reduce-scattered,
                                 dt_model_optimizer_step updates the owned part and allgathers the
                                 parameters. After dt_model_sync_grads only the owned parts of
                                 dt_model_grads() are reduced (on a GPU through --gpu-comm mpi,
                                 which keeps its whole-buffer allreduce, all of them). CPU and
                                 GPU; not with allow_unreduced. Results: see docs/training.md */
} dt_sync_config;

/** Fills c with the defaults: overlap 1, 25 MiB buckets, 1 MiB first bucket, DT_AVG, DT_F32 on the
 * wire, allow_unreduced 0, zero 0. NULL c: nothing. */
DT_API void dt_sync_defaults(dt_sync_config *c);

/** Plans the buckets and checks that every rank has the same plan (a mismatch fails naming the
 * first differing rank, the setting and both values instead of hanging later). dt_model_create
 * applies the defaults.
 * A backward whose gradients are still being reduced is reduced to the end first (as by
 * dt_model_sync_grads). Collective: every rank passes the same settings. Before anything changes
 * the ranks compare them: a rank whose c is NULL or invalid fails every rank with its code (its
 * own message there, one naming it elsewhere), and a field given differently on some rank
 * (overlap, bucket_mb, first_bucket_mb, op, grad_comm, zero, allow_unreduced) fails every rank
 * naming the first such rank, the field and rank 0's value; no rank then changes its settings.
 * Every field is checked, also on a model made with ctx NULL, which keeps the settings without a
 * reducer to apply them (not collective there). Errors: DT_ERR_INVALID_ARG (m or c NULL; overlap
 * or allow_unreduced not 0 or 1; a cap outside 0..1e6 MiB or NaN; op, grad_comm or zero out of
 * range; zero 1 with allow_unreduced; settings or plans that differ across ranks), DT_ERR_NOMEM,
 * and the reducer's and the reduction's errors (DT_ERR_MPI, DT_ERR_COMM, DT_ERR_DEVICE,
 * DT_ERR_TIMEOUT). */
DT_API dt_status dt_model_set_sync(dt_model *m, const dt_sync_config *c);

/** Number of buckets in the plan (0 for a NULL m, or a model made with ctx NULL). */
DT_API int dt_model_num_buckets(const dt_model *m);
/** The size in elements of bucket i (0 = last layers), 0 when i is out of range or m NULL. */
DT_API size_t dt_model_bucket_size(const dt_model *m, int i);

/** Completes the gradient synchronization of the last dt_model_forward_backward: waits for the
 * buckets in flight, or (without overlap) allreduces them all now. Afterwards the gradients are
 * the sum or average over ranks (dt_sync_config.op). DT_OK with nothing to do when no backward ran
 * since the last synchronization; DT_ERR_INVALID_ARG for a NULL m, mid accumulation group, or when the last
 * backward's gradients can no longer be reduced (dt_model_set_precision reallocated them, or their
 * reduction failed: run dt_model_forward_backward again); the reduction's own errors. Collective. */
DT_API dt_status dt_model_sync_grads(dt_model *m);

/** dt_check_replicas() for a model's parameters, on either device (a GPU model's are copied to host memory
 * for the hash): the check `dtrain train` runs at the end of a run. Collective. */
DT_API dt_status dt_model_check_replicas(dt_ctx *ctx, const dt_model *m, int *differ, int *first_rank);

/** @} */

/** @defgroup precision Mixed precision
 * @ingroup model
 * fp16 or bf16 compute on fp32 master parameters (docs/library.md, "Mixed precision").
 * @{ */

/** Sets the model's precision. compute: DT_F32, DT_F16 or DT_BF16; grads: DT_F32 or the same type as
 * compute. Reallocates the activation and gradient buffers (gradient values are lost; call it before
 * training). Collective on a model whose context has more than one rank: every rank must pass the
 * same compute and grads (the gradient allreduce pairs buffers). Before any rank changes, the
 * ranks compare the pair (one allreduce of one float per rank): a rank that gave another pair
 * fails every rank with DT_ERR_INVALID_ARG naming that rank, its pair and rank 0's; a rank whose
 * own arguments fail fails every rank with its code, the others naming it. No rank then changes
 * its precision, and a call given alike afterwards works. A rank that runs out of memory after
 * the comparison fails alone (its peers' next collective call waits for it until the deadline).
 * Errors: DT_ERR_INVALID_ARG (a NULL m, a type outside these, 16-bit gradients of another type
 * than compute, ranks that disagree), DT_ERR_UNSUPPORTED (16-bit gradients on a backend that
 * keeps fp32 ones: the CUDA backend's in this version; the CPU's keeps either), DT_ERR_NOMEM (the
 * model keeps the precision it had), the comparison's DT_ERR_MPI and DT_ERR_TIMEOUT, and the
 * errors of the reduction still in flight, which completes first. */
DT_API dt_status dt_model_set_precision(dt_model *m, dt_dtype compute, dt_dtype grads);
/** The type the model computes in (dt_model_set_precision()'s compute; DT_F32 by default and for a
 * NULL m). */
DT_API dt_dtype dt_model_precision(const dt_model *m);
/** The type the gradients are kept in (DT_F32 for a NULL m). dt_model_grads returns NULL when it is
 * 16-bit. */
DT_API dt_dtype dt_model_grad_dtype(const dt_model *m);

/** After dt_model_sync_grads: divides the gradients by the loss scale (pass 1/scale; 1 when not
 * scaling) and sets *found_inf when any is inf or NaN. fp32 gradients are unscaled in place in the
 * same pass as the check; 16-bit ones are only checked (read once, 2 bytes an element) and unscaled
 * as dt_model_optimizer_step widens them, since dividing fp16 values in place would flush the small
 * ones to zero, which is what scaling is there to prevent. Every rank holds the same reduced
 * gradients, so every rank gets the same answer. Under dt_sync_config.zero = 1 each rank checks and
 * unscales its owned parts and the counts are summed over the ranks: collective, same answer.
 * Errors: DT_ERR_INVALID_ARG (m or found_inf NULL, an inv_scale that is not a positive finite
 * number, mid accumulation group), DT_ERR_DEVICE, and under zero = 1 the sum's DT_ERR_MPI. Under
 * zero = 1 a rank whose own arguments fail (m aside) still joins the sum, so every rank fails at
 * once with its code, that rank with its own message and the others naming it. */
DT_API dt_status dt_model_unscale_grads(dt_model *m, float inv_scale, int *found_inf);

/** @} */

/** @defgroup clipping Clipping, accumulation and the finite check
 * @ingroup model
 * What happens to the gradients between backward and the optimizer step.
 * @{ */

/** The global L2 norm of the gradients as the optimizer step would read them: after
 * dt_model_sync_grads and dt_model_unscale_grads (16-bit gradients times the pending unscale),
 * so the norm of the reduced, unscaled gradients, the same on every rank with no communication
 * (every rank holds the same reduced gradients and the sum runs in double in a fixed order, so
 * the bits agree too). inf or NaN when a gradient is. Costs one read of the gradients (a device
 * reduction on a GPU, which waits for it). Not collective, except under dt_sync_config.zero = 1:
 * there each rank sums its owned parts and the sums are added over the ranks in rank order
 * (collective; the same bits on every rank, not necessarily those of zero 0), and a rank whose
 * norm is NULL still joins the sum: every rank fails with its code, the others naming it. Errors:
 * DT_ERR_INVALID_ARG (m or norm NULL), DT_ERR_DEVICE, and under zero = 1 DT_ERR_MPI. */
DT_API dt_status dt_model_grad_norm(const dt_model *m, double *norm);
/** PyTorch's clip_grad_norm_(max_norm) on the gradients: *norm (may be NULL) = dt_model_grad_norm;
 * when it is finite and coef = max_norm / (norm + 1e-6) (rounded to fp32) is below 1, every
 * gradient is multiplied by coef (16-bit ones as dt_model_optimizer_step widens them). A
 * non-finite norm clips nothing (the step should be skipped; a loss scaler does). max_norm must
 * be > 0 (+inf: only the norm). Not collective (collective under dt_sync_config.zero = 1, as
 * dt_model_grad_norm, where a rank's bad max_norm fails every rank, naming it). Errors: DT_ERR_INVALID_ARG (a NULL m, max_norm not > 0, mid accumulation
 * group), and dt_model_grad_norm's. */
DT_API dt_status dt_model_clip_grad_norm(dt_model *m, double max_norm, double *norm);
/** Clipping inside dt_model_train_step, between the unscale and the optimizer step: 0 (default)
 * off, > 0 clip to max_norm, +inf compute and report the norm without clipping. The norm is
 * computed only then (dt_step_result.grad_norm is NaN otherwise). DT_ERR_INVALID_ARG for a NULL
 * m, a negative or NaN max_norm. */
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
 * dt_model_set_precision. Collective on a model whose context has more than one rank: every rank
 * must pass the same k (a rank that reduced every micro-batch would wait for peers that reduce
 * every k-th). Before any rank changes, the ranks compare k (one allreduce of one float per
 * rank): a rank that gave another k fails every rank with DT_ERR_INVALID_ARG naming that rank,
 * its k and rank 0's; a rank whose own part fails (k out of range, the sum buffer's memory, the
 * pending verdict) fails every rank with its code, the others naming it. No rank then changes
 * its k, and a call given alike afterwards works. DT_ERR_INVALID_ARG for a NULL m, k < 1 or >
 * 65536, ranks that disagree; DT_ERR_NOMEM; the comparison's DT_ERR_MPI and DT_ERR_TIMEOUT; and
 * those of settling a verdict left pending. */
DT_API dt_status dt_model_set_accum_steps(dt_model *m, int k);
/** k: the micro-batches per optimizer step (dt_model_set_accum_steps()); 0 for a NULL m. */
DT_API int dt_model_accum_steps(const dt_model *m);
/** The micro-batches of the current group already taken (0 .. k-1; 0 at a step boundary, and for
 * a NULL m). */
DT_API int dt_model_accum_pos(const dt_model *m);

/** Modes of the per-layer finite check (dt_model_set_nonfinite_check()). */
typedef enum dt_nonfinite_check {
    DT_NONFINITE_CHECK_OFF = 0, /**< no check (the default) */
    DT_NONFINITE_CHECK_ON = 1,  /**< every forward/backward */
    /** Only where it can be needed: in dt_model_train_step(), the accumulation groups in which one
     * more overflow makes its scaler give up (the scale at its floor, or the scaler's window
     * holding as many overflows as it tolerates), the steps whose DT_ERR_NUMERIC a program reports
     * with the layer; other steps skip the read of every gradient. Every pass of
     * dt_model_forward_backward() called directly, or of dt_model_train_step() without a scaler. */
    DT_NONFINITE_CHECK_AT_RISK = 2
} dt_nonfinite_check;

/** Sets the per-layer finite check: mode DT_NONFINITE_CHECK_OFF, _ON or _AT_RISK (any other
 * nonzero value means _ON). With the check on, backward looks at each layer's own gradients as
 * they are made, before the allreduce (a read of the layer's gradients), and remembers the first
 * layer (in backward order) holding an inf or NaN: dt_model_nonfinite_layer returns its index, -1
 * when none was found in the last backward. Say who caused an overflow, since after the allreduce
 * every rank has it. NULL m: nothing. */
DT_API void dt_model_set_nonfinite_check(dt_model *m, int mode);
/** The index of the first layer (in backward order) whose own gradients held an inf or NaN in the
 * last accumulation group, -1 when none did (or the check did not run on it, or m is NULL): see
 * dt_model_set_nonfinite_check(). */
DT_API int dt_model_nonfinite_layer(const dt_model *m);
/** "layer 3 (fc:1024)" for layer index i, into buf (n bytes); "-" when i is out of range or m NULL. */
DT_API void dt_model_layer_name(const dt_model *m, int i, char *buf, size_t n);

/** @} */

/** @defgroup kernels Kernels for models of your own
 * @ingroup model
 * The building blocks of a model a program computes itself (examples/custom_loop.c).
 * @{ */

/** C(M,N) = alpha * op(A) * op(B) + beta * C, row-major fp32 (OpenBLAS). op(X) is X, or X
 * transposed when trans_x is nonzero; lda, ldb and ldc are the row strides of A, B and C as stored.
 * It returns nothing, so the caller keeps its preconditions: m, n, k >= 0; lda >= max(1, trans_a ?
 * m : k), ldb >= max(1, trans_b ? k : n), ldc >= max(1, n); a, b (with k > 0) and c not NULL when
 * m and n are > 0. A call outside them computes nothing and leaves C unchanged (DT_ERR_INVALID_ARG's
 * message, naming the argument, in dt_last_error()), as does one whose OpenBLAS working buffer
 * (128 MiB per thread, mapped at the first call) cannot be mapped, under a tight `ulimit -v` say
 * (DT_ERR_NOMEM's message: OpenBLAS itself would retry for ever). */
DT_API void dt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
/** Softmax cross-entropy of logits (batch, classes): returns the summed loss, counts correct
 * predictions (into *correct when not NULL), writes dlogits = (softmax - onehot) * grad_scale
 * (dlogits NULL: the loss alone). A NULL logits or labels, a negative batch, classes < 1 or a label
 * outside 0..classes-1 returns NaN with DT_ERR_INVALID_ARG in dt_last_error() (naming the sample
 * and label), and writes nothing. */
DT_API double dt_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                              float grad_scale, int *correct);

/** @} */

#endif /* DTRAIN_H */
#endif /* DTRAIN_MODEL_H */
