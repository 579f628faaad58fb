/**
 * @file
 * dtrain/model.h - part of the public API: models (the layer grammar, parameters, forward and
 * backward, gradient synchronization) and optimizers. Include `<dtrain.h>`, which includes every
 * part in order after the types they share; this file is not meant to be included on its own.
 */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#ifndef DTRAIN_H
#error "include <dtrain.h>, which includes dtrain/model.h"
#endif

/** @defgroup models Models
 *
 * A model is a stack of layers given as text, e.g. the preset "mlp" (= "fc:1024,relu,fc:1024,relu,
 * fc:10") on input "784", or "cnn" (= "conv:32:3:1:1,relu,pool:2,conv:64:3:1:1,relu,pool:2,fc:128,
 * relu,fc:10") on input "1x28x28". Tokens: fc:OUT, conv:OUT:K:STRIDE:PAD, pool:K (max, stride K),
 * relu, flatten (implied before the first fc). The last layer must be fc (its width is the number of
 * classes). Every parameter lives in one flat fp32 buffer, layer after layer, weights then bias;
 * gradients mirror that layout. Computation runs on the context's device: the CPU kernels, or
 * the CUDA ones (kernels/cuda) when the placement chose a GPU.
 * @{ */

/** A model: its layers, flat parameters and gradients, activations and gradient engine. Opaque; made
 * by dt_model_create(), freed by dt_model_free(). */
typedef struct dt_model dt_model;

/** Builds a model for batches of up to max_batch samples on ctx's device, parameters initialized
 * from seed (PyTorch's default: uniform in +-1/sqrt(fan_in)) and broadcast from rank 0 so every
 * rank starts identical. A bad spec or input fails with DT_ERR_INVALID_ARG naming the token.
 * Collective (the broadcast). */
DT_API dt_status dt_model_create(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed,
                                 int max_batch, dt_model **out);
/** Lets gradient allreduces still in flight finish, then frees everything. Collective when the model
 * has a communication engine (world > 1). NULL is a no-op. */
DT_API void dt_model_free(dt_model *m);

/** The number of parameters: the length in floats of the dt_model_params() and dt_model_grads()
 * buffers.
 *
 * Layout of both: PyTorch's state_dict order, so weights move between the two with numpy reshapes. Layer
 * by layer in model order, each fc layer holds its weight as [out][in] row-major then its bias
 * [out] (nn.Linear's weight and bias), each conv layer its weight as [out][in][k][k] then its bias
 * [out] (nn.Conv2d's); relu, pool and flatten hold nothing. Activations are NCHW and flatten keeps
 * (c, h, w) order, as torch.flatten does, so an fc after a conv reads the same features as
 * PyTorch's. The gradients use the same offsets. (tests/unit/test_layout.c checks it.) */
DT_API size_t dt_model_num_params(const dt_model *m);
/** The flat parameter buffer (dt_model_num_params() floats, the layout above), owned by m: host
 * memory, or device memory on a GPU model (dt_model_on_gpu()). */
DT_API float *dt_model_params(dt_model *m);
/** The flat gradient buffer (dt_model_num_params() floats, the parameters' layout), owned by m, in
 * the same memory as the parameters; NULL when the gradients are kept in 16 bits
 * (dt_model_set_precision()). */
DT_API float *dt_model_grads(dt_model *m);
/** Whether the model lives on the GPU. On a GPU model (the context's device is CUDA) the parameter
 * and gradient buffers are device memory: read them with dt_model_get_params. Its gradients are
 * allreduced through NCCL in buckets on a communication stream as backward completes them
 * (dt_model_set_sync); in fp16/bf16 they are kept in fp32 (and travel as dt_sync_config::grad_comm
 * says). Checkpoints copy through host memory. */
DT_API int dt_model_on_gpu(const dt_model *m);
/** Copies the parameters into host memory (dt_model_num_params floats), from either device. */
DT_API dt_status dt_model_get_params(const dt_model *m, float *host);
/** Replaces the parameters with host's (dt_model_num_params floats, copied; the optimizer's state
 * is untouched), on either device. Not collective: give every rank the same values (broadcast
 * them) or the replicas drift. */
DT_API dt_status dt_model_set_params(dt_model *m, const float *host);
/** Floats per input sample (C x H x W of the input shape). */
DT_API size_t dt_model_input_size(const dt_model *m);
/** Classes: the width of the last fc layer; labels lie in [0, classes). */
DT_API int dt_model_num_classes(const dt_model *m);
/** One line per layer with its output shape and parameter count, into buf (n bytes). */
DT_API void dt_model_describe(const dt_model *m, char *buf, size_t n);

/** Forward and backward on this rank's batch: x (batch, input_size), labels (batch) in
 * [0, classes). Overwrites the gradients with d(loss)/d(params) where loss is the summed
 * cross-entropy times grad_scale (pass 1/batch for this rank's mean; averaging over ranks with
 * dt_model_sync_grads then gives the mean over the global batch). With overlap on and more than
 * one rank, it also starts the gradient allreduces: call dt_model_sync_grads before reading the
 * gradients (it is collective: every rank calls both). Returns the summed loss and the number of
 * correct argmax predictions. A label out of range fails with DT_ERR_INVALID_ARG. */
DT_API dt_status dt_model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch,
                                           float grad_scale, double *loss_sum, int *correct);
/** The forward pass alone, in the model's precision, on `batch` samples (1..max_batch): x (batch,
 * input_size) and labels (batch) in host memory. Sets *loss_sum (summed cross-entropy, in double),
 * *correct (argmax == label) and, when pred is not NULL, pred[i] = sample i's argmax class (the
 * first maximum). Gradients and the optimizer are untouched; gradient allreduces still in flight
 * finish first. Not collective: for a figure over a dataset, each rank evaluates its shard and the
 * caller sums (dtrain train --eval-every, dtrain eval). DT_ERR_INVALID_ARG: a bad batch or label. */
DT_API dt_status dt_model_evaluate(dt_model *m, const float *x, const int32_t *labels, int batch,
                                   double *loss_sum, int *correct, int32_t *pred);

/** How gradients are synchronized. With overlap, backward starts the allreduce of each bucket (a
 * contiguous slice of the gradients, filled last layer first) the moment its layers are done, on
 * the communication engine, while it goes on computing; dt_model_sync_grads then waits only for
 * what is still in flight. Either way the result is bitwise the same: the engine adds every
 * element in rank order whatever the buckets. */
typedef struct dt_sync_config {
    int overlap;            /**< 1: allreduce buckets during backward (default); 0: all after backward */
    double bucket_mb;       /**< cap of a bucket in MiB (default 25; 0 = one bucket for everything) */
    double first_bucket_mb; /**< cap of the first bucket, the last layers (default 1) */
    dt_redop op;            /**< DT_AVG (default), or DT_SUM when grad_scale already divides by ranks */
    dt_dtype grad_comm;     /**< what travels between ranks: DT_F32 (default), or DT_F16 / DT_BF16 to
                               halve the bytes: each rank's gradient is rounded to 16 bits, the sum
                               is taken in fp32 in rank order and rounded once more, so every rank
                               gets the same values. fp16 overflows past 65504: the gradients of the
                               mean loss over the global batch (see grad_scale) stay far below. */
    int allow_unreduced;    /**< 0 (default): with more than one rank, dt_model_optimizer_step on
                               gradients that dt_model_sync_grads has not reduced is an error (the
                               ranks would drift apart unseen); 1: allowed, for loops that skip the
                               reduction on purpose (local SGD, periodic averaging) */
} dt_sync_config;

/** Fills c with the defaults: overlap 1, 25 MiB buckets, 1 MiB first bucket, DT_AVG, DT_F32 on the
 * wire, allow_unreduced 0. */
DT_API void dt_sync_defaults(dt_sync_config *c);

/** Plans the buckets and checks that every rank has the same plan (a mismatch fails naming the
 * ranks and their bucket counts instead of hanging later). dt_model_create applies the defaults.
 * Collective. */
DT_API dt_status dt_model_set_sync(dt_model *m, const dt_sync_config *c);

/** Number of buckets in the plan. */
DT_API int dt_model_num_buckets(const dt_model *m);
/** The size in elements of bucket i (0 = last layers), 0 when i is out of range. */
DT_API size_t dt_model_bucket_size(const dt_model *m, int i);

/** Completes the gradient synchronization of the last dt_model_forward_backward: waits for the
 * buckets in flight, or (without overlap) allreduces them all now. Afterwards the gradients are
 * the sum or average over ranks (dt_sync_config.op). Collective. */
DT_API dt_status dt_model_sync_grads(dt_model *m);

/** Whether every rank holds the same bytes in buf (`bytes` long; host memory, or device memory
 * under CUDA, told apart by the pointer and copied to the host for the hash): each rank hashes
 * its copy (64-bit, not cryptographic) and the hashes are shared by allreduces of 5 floats
 * per rank (256 ranks at a time; nothing is allocated, so no rank can drop out of them). DT_OK when
 * all agree; DT_ERR_NUMERIC when some differ, with *differ = how many ranks
 * differ from rank 0 and *first_rank = the lowest of them (both may be NULL; 0 and -1 when all
 * agree), and a message naming them and the usual cause. A world of one agrees with itself.
 * Collective: every rank calls it with the same bytes. */
DT_API dt_status dt_check_replicas(dt_ctx *ctx, const void *buf, size_t bytes, int *differ, int *first_rank);
/** The same for a model's parameters, on either device (a GPU model's are copied to host memory
 * for the hash): the check `dtrain train` runs at the end of a run. Collective. */
DT_API dt_status dt_model_check_replicas(dt_ctx *ctx, const dt_model *m, int *differ, int *first_rank);

/** @} */

/** @defgroup optim Optimizers
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

/** Fills c with the defaults: SGD, lr 0.01, momentum 0.9, weight decay 0, betas 0.9/0.999, eps 1e-8. */
DT_API void dt_optim_defaults(dt_optim_config *c);

/** An optimizer and its state (momentum, or Adam's moments). Opaque. */
typedef struct dt_optimizer dt_optimizer;
/** An optimizer over n parameters (allocates its state: momentum, or Adam's m and v). */
DT_API dt_status dt_optimizer_create(const dt_optim_config *c, size_t n, dt_optimizer **out);
/** Frees the optimizer and its state. NULL is a no-op. */
DT_API void dt_optimizer_free(dt_optimizer *o);
/** One update of params (n floats, host memory) from grads, PyTorch semantics. A model's
 * parameters, on either device, are updated by dt_model_optimizer_step() instead. */
DT_API dt_status dt_optimizer_step(dt_optimizer *o, float *params, const float *grads);
/** The learning rate the next step uses. */
DT_API float dt_optimizer_lr(const dt_optimizer *o);
/** Changes the learning rate between steps (a schedule: the CLI's --lr-schedule). Nothing else
 * changes: momentum and Adam's moments carry on, as when a PyTorch scheduler writes
 * param_group['lr']. DT_ERR_INVALID_ARG for a rate that is not a positive finite number (the
 * optimizer keeps its rate). */
DT_API dt_status dt_optimizer_set_lr(dt_optimizer *o, float lr);

/** @} */

#endif /* DTRAIN_MODEL_H */
