/*
 * dtrain.h - the one public header of dtrain, a runtime for data-parallel training.
 *
 * A process calls dt_init() once: dtrain works out which launcher started it (srun, mpirun,
 * mpiexec.hydra, torchrun-style variables, or nothing), selects its device before any other CUDA
 * call, initializes MPI, cross-checks the launcher's variables against MPI, pins itself to CPU cores
 * and builds the communicators. Every function returns a dt_status; on failure dt_last_error()
 * says what failed and what to do about it. The library never exits the process.
 *
 * Threading: one dt_ctx is used by one thread at a time. dt_last_error() is per thread.
 */
#ifndef DTRAIN_H
#define DTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_VERSION_MAJOR 0
#define DT_VERSION_MINOR 1
#define DT_VERSION_PATCH 0
#define DT_VERSION_CODE (DT_VERSION_MAJOR * 10000 + DT_VERSION_MINOR * 100 + DT_VERSION_PATCH)

#if defined(__GNUC__)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

/* ---------------------------------------------------------------- status and errors */

typedef enum dt_status {
    DT_OK = 0,
    DT_ERR_INVALID_ARG = 1, /* a bad argument, flag or configuration value */
    DT_ERR_ENV = 2,         /* a malformed or inconsistent environment variable */
    DT_ERR_MPI = 3,         /* MPI failed or disagrees with the launcher */
    DT_ERR_DEVICE = 4,      /* no usable device, or a bad device mapping */
    DT_ERR_NOMEM = 5,       /* out of host or device memory */
    DT_ERR_IO = 6,          /* a file could not be read or written */
    DT_ERR_CORRUPT = 7,     /* a file or message failed its checks */
    DT_ERR_TIMEOUT = 8,     /* a collective passed its deadline */
    DT_ERR_UNSUPPORTED = 9, /* not built in, or not supported by this backend */
    DT_ERR_INTERNAL = 10,   /* a bug in dtrain: please report it with the message */
    DT_ERR_NUMERIC = 11     /* training diverged: gradients stay non-finite (loss scaling gave up) */
} dt_status;

/* A short fixed description of a status code; never NULL. */
DT_API const char *dt_strerror(dt_status s);

/* The message of the last failure on this thread: what failed, the offending value and the fix.
 * Empty string when nothing failed yet. The pointer stays valid until the next dtrain call on this
 * thread. */
DT_API const char *dt_last_error(void);

/* "0.1.0" plus the optional parts this build has, e.g. "0.1.0 (cuda, nccl)". Static storage. */
DT_API const char *dt_version_string(void);

/* ---------------------------------------------------------------- configuration */

typedef enum dt_device_kind {
    DT_DEVICE_AUTO = 0, /* CUDA when a GPU is visible, else the CPU */
    DT_DEVICE_CPU = 1,
    DT_DEVICE_CUDA = 2
} dt_device_kind;

typedef enum dt_pin_mode {
    DT_PIN_AUTO = 0, /* keep a launcher's binding, else split the allowed cores among local ranks */
    DT_PIN_NONE = 1  /* leave the affinity exactly as the launcher set it */
} dt_pin_mode;

/* What carries collectives on GPU buffers: NCCL (the default where dtrain was built with it), or
 * MPI through host memory (slower; needs no NCCL, and lets several ranks share one GPU, which NCCL
 * refuses: for debugging and for testing many ranks on one GPU). */
typedef enum dt_gpu_comm {
    DT_GPU_COMM_NCCL = 0,
    DT_GPU_COMM_MPI = 1
} dt_gpu_comm;

/* Plain configuration: fill with dt_config_defaults(), optionally dt_config_from_env(), then edit. */
typedef struct dt_config {
    dt_device_kind device;
    dt_pin_mode pin;
    double timeout_s;      /* deadline of a collective before the job is aborted: 0 = none, else
                              1 to 1e7 seconds (DTRAIN_TIMEOUT refuses other values) */
    int init_mpi;          /* 1: dt_init calls MPI_Init_thread (and dt_finalize MPI_Finalize) when
                              MPI is not initialized yet; 0: the caller initializes MPI itself */
    int blas_threads;      /* 0 = one per core this process is pinned to */
    dt_gpu_comm gpu_comm;  /* collectives on GPU buffers */
} dt_config;

/* Defaults: device auto, pin auto, timeout 300 s, init_mpi 1, blas_threads 0, gpu_comm nccl. */
DT_API void dt_config_defaults(dt_config *cfg);

/* Overrides fields from DTRAIN_DEVICE, DTRAIN_PIN, DTRAIN_TIMEOUT, DTRAIN_BLAS_THREADS and
 * DTRAIN_GPU_COMM when set, and checks DTRAIN_LOG (setting the log level dt_init would set), so
 * that every malformed DTRAIN_* variable is refused here, before MPI starts.
 * A malformed value fails with DT_ERR_ENV naming the variable; cfg is then left unchanged. */
DT_API dt_status dt_config_from_env(dt_config *cfg);

/* Parsers shared by the command line and the environment: "auto|cpu|cuda", "auto|none". */
DT_API dt_status dt_device_kind_parse(const char *s, dt_device_kind *out);
DT_API dt_status dt_pin_mode_parse(const char *s, dt_pin_mode *out);
/* "nccl|mpi". */
DT_API dt_status dt_gpu_comm_parse(const char *s, dt_gpu_comm *out);
DT_API const char *dt_device_kind_name(dt_device_kind k);

/* ---------------------------------------------------------------- context */

typedef struct dt_ctx dt_ctx; /* opaque */

/* Resolves identity, selects the device, initializes MPI (see cfg->init_mpi), cross-checks the
 * launcher against MPI, pins CPU cores and builds the communicators. On success *out owns a context
 * that dt_finalize() releases. On failure *out is NULL, nothing stays allocated, and MPI may still
 * be initialized (call dt_abort_job or MPI_Finalize as you see fit). cfg NULL means defaults plus
 * the environment. Collective: every rank of the job must call it. */
DT_API dt_status dt_init(const dt_config *cfg, dt_ctx **out);

/* Releases the context (and finalizes MPI when dt_init initialized it). Free every model made with
 * this context first (a model owns a communication thread and communicator). Collective. NULL is
 * a no-op. */
DT_API dt_status dt_finalize(dt_ctx *ctx);

/* Ends every process of the job with exit code `code` (MPI_Abort): for a rank that failed alone,
 * so that its peers do not wait forever on it. Usable before or after dt_init (ctx may be NULL).
 * Returns only when there is no job to abort: MPI not initialized, or a world of 1 (MPI is then
 * finalized); the caller then exits with `code` itself. */
DT_API void dt_abort_job(dt_ctx *ctx, int code);

/* ---------------------------------------------------------------- placement */

typedef enum dt_launcher {
    DT_LAUNCHER_NONE = 0,    /* started directly: a world of 1 */
    DT_LAUNCHER_OPENMPI = 1, /* mpirun / mpiexec of Open MPI (OMPI_COMM_WORLD_*) */
    DT_LAUNCHER_SLURM = 2,   /* srun (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID) */
    DT_LAUNCHER_PMIX = 3,    /* another PMIx launcher (PMIX_RANK only) */
    DT_LAUNCHER_HYDRA = 4,   /* MPICH / Intel MPI mpiexec.hydra (PMI_RANK / PMI_SIZE) */
    DT_LAUNCHER_TORCHRUN = 5 /* RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE */
} dt_launcher;

DT_API const char *dt_launcher_name(dt_launcher l);

/* Where this process stands, as resolved by dt_init and confirmed by MPI. */
typedef struct dt_placement {
    int rank, world_size;      /* MPI_COMM_WORLD */
    int local_rank, local_size; /* among the ranks that share this node's memory */
    int node, num_nodes;       /* node index and count */
    dt_launcher launcher;      /* who started this process */
    dt_device_kind device;     /* DT_DEVICE_CPU or DT_DEVICE_CUDA, never AUTO */
    int cuda_device;           /* CUDA ordinal in this process's view, -1 on the CPU */
    char gpu[64];              /* the GPU this rank uses or, with no usable GPU, would use: its entry
                                  in CUDA_VISIBLE_DEVICES (or SLURM_STEP_GPUS); "" when none is
                                  assigned; "-" plus a reason when the mapping fails */
    char hostname[256];
    char cores[256];           /* the cores this process runs on, as a list "0-3,8" */
    int num_cores;             /* how many */
    int pinned_by;             /* 0: not pinned, 1: dtrain pinned it, 2: the launcher's binding kept */
    int cores_shared;          /* 1 when local ranks outnumber the cores, so cores are shared */
    int blas_threads;          /* threads OpenBLAS was given */
} dt_placement;

/* Copies the placement into *out. */
DT_API dt_status dt_get_placement(const dt_ctx *ctx, dt_placement *out);
DT_API int dt_rank(const dt_ctx *ctx);
DT_API int dt_world_size(const dt_ctx *ctx);
DT_API int dt_local_rank(const dt_ctx *ctx);

/* Gathers every rank's placement on rank 0: all must hold dt_world_size() entries there (indexed by
 * rank) and may be NULL on other ranks. Collective. */
DT_API dt_status dt_gather_placement(const dt_ctx *ctx, dt_placement *all);

/* The name of the host list entry of node i (SLURM's node list when SLURM launched the step, else
 * the hostname MPI reports for that node), or NULL when i is out of range. Owned by ctx. */
DT_API const char *dt_node_name(const dt_ctx *ctx, int i);

/* Versions found at run time, written as text ("Open MPI v4.1.4", "NCCL 2.28.9", "CUDA 13.0"),
 * or "-" where absent. Each writes at most n bytes including the terminator. */
DT_API void dt_versions(char *mpi, char *nccl, char *cuda, size_t n);

/* ---------------------------------------------------------------- collectives */

typedef enum dt_dtype { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 } dt_dtype;
typedef enum dt_redop { DT_SUM = 0, DT_AVG = 1 } dt_redop;

/* Bytes per element of a dtype (4 or 2). */
DT_API size_t dt_dtype_size(dt_dtype t);

/* In-place allreduce over every rank of the job. buf holds count elements of dtype t in host memory
 * or, under CUDA, in device memory (reduced by NCCL; host memory then goes through MPI). 16-bit types are
 * accumulated in fp32 and rounded once (MPI backend). DT_AVG divides the sum by the world size.
 * count may be 0. Collective: every rank calls it with the same count, dtype and op. */
DT_API dt_status dt_allreduce(dt_ctx *ctx, void *buf, size_t count, dt_dtype t, dt_redop op);

/* Broadcasts count elements of dtype t from rank root to every rank, in place. Collective. */
DT_API dt_status dt_broadcast(dt_ctx *ctx, void *buf, size_t count, dt_dtype t, int root);

/* Returns when every rank has entered it. Collective. */
DT_API dt_status dt_barrier(dt_ctx *ctx);

/* Name of the collective backend in use: "mpi" or "nccl". */
DT_API const char *dt_backend_name(const dt_ctx *ctx);

/* ---------------------------------------------------------------- models
 *
 * A model is a stack of layers given as text, e.g. the preset "mlp" (= "fc:1024,relu,fc:1024,relu,
 * fc:10") on input "784", or "cnn" (= "conv:32:3:1:1,relu,pool:2,conv:64:3:1:1,relu,pool:2,fc:128,
 * relu,fc:10") on input "1x28x28". Tokens: fc:OUT, conv:OUT:K:STRIDE:PAD, pool:K (max, stride K),
 * relu, flatten (implied before the first fc). The last layer must be fc (its width is the number of
 * classes). Every parameter lives in one flat fp32 buffer, layer after layer, weights then bias;
 * gradients mirror that layout. Computation runs on the context's device: the CPU kernels, or
 * the CUDA ones (kernels/cuda) when the placement chose a GPU. */

typedef struct dt_model dt_model;

/* Builds a model for batches of up to max_batch samples on ctx's device, parameters initialized
 * from seed (PyTorch's default: uniform in +-1/sqrt(fan_in)) and broadcast from rank 0 so every
 * rank starts identical. A bad spec or input fails with DT_ERR_INVALID_ARG naming the token.
 * Collective (the broadcast). */
DT_API dt_status dt_model_create(dt_ctx *ctx, const char *spec, const char *input, uint64_t seed,
                                 int max_batch, dt_model **out);
/* Lets gradient allreduces still in flight finish, then frees everything. Collective when the model
 * has a communication engine (world > 1). NULL is a no-op. */
DT_API void dt_model_free(dt_model *m);

/* The flat parameter and gradient buffers (dt_model_num_params floats each), owned by m. The
 * gradients are NULL when they are kept in 16 bits (dt_model_set_precision).
 *
 * Layout: PyTorch's state_dict order, so weights move between the two with numpy reshapes. Layer
 * by layer in model order, each fc layer holds its weight as [out][in] row-major then its bias
 * [out] (nn.Linear's weight and bias), each conv layer its weight as [out][in][k][k] then its bias
 * [out] (nn.Conv2d's); relu, pool and flatten hold nothing. Activations are NCHW and flatten keeps
 * (c, h, w) order, as torch.flatten does, so an fc after a conv reads the same features as
 * PyTorch's. The gradients use the same offsets. (tests/unit/test_layout.c checks it.) */
DT_API size_t dt_model_num_params(const dt_model *m);
DT_API float *dt_model_params(dt_model *m);
DT_API float *dt_model_grads(dt_model *m);
/* On a GPU model (the context's device is CUDA) the parameter and gradient buffers are device
 * memory: read them with dt_model_get_params. Its gradients are allreduced through NCCL in
 * buckets on a communication stream as backward completes them (dt_model_set_sync); in fp16/bf16
 * they stay fp32. Checkpoints copy through host memory. */
DT_API int dt_model_on_gpu(const dt_model *m);
/* Copies the parameters into host memory (dt_model_num_params floats), from either device. */
DT_API dt_status dt_model_get_params(const dt_model *m, float *host);
/* Replaces the parameters with host's (dt_model_num_params floats, copied; the optimizer's state
 * is untouched), on either device. Not collective: give every rank the same values (broadcast
 * them) or the replicas drift. */
DT_API dt_status dt_model_set_params(dt_model *m, const float *host);
/* Floats per input sample, and classes (width of the last fc). */
DT_API size_t dt_model_input_size(const dt_model *m);
DT_API int dt_model_num_classes(const dt_model *m);
/* One line per layer with its output shape and parameter count, into buf (n bytes). */
DT_API void dt_model_describe(const dt_model *m, char *buf, size_t n);

/* Forward and backward on this rank's batch: x (batch, input_size), labels (batch) in
 * [0, classes). Overwrites the gradients with d(loss)/d(params) where loss is the summed
 * cross-entropy times grad_scale (pass 1/batch for this rank's mean; averaging over ranks with
 * dt_model_sync_grads then gives the mean over the global batch). With overlap on and more than
 * one rank, it also starts the gradient allreduces: call dt_model_sync_grads before reading the
 * gradients (it is collective: every rank calls both). Returns the summed loss and the number of
 * correct argmax predictions. A label out of range fails with DT_ERR_INVALID_ARG. */
DT_API dt_status dt_model_forward_backward(dt_model *m, const float *x, const int32_t *labels, int batch,
                                           float grad_scale, double *loss_sum, int *correct);
/* The forward pass alone, in the model's precision, on `batch` samples (1..max_batch): x (batch,
 * input_size) and labels (batch) in host memory. Sets *loss_sum (summed cross-entropy, in double),
 * *correct (argmax == label) and, when pred is not NULL, pred[i] = sample i's argmax class (the
 * first maximum). Gradients and the optimizer are untouched; gradient allreduces still in flight
 * finish first. Not collective: for a figure over a dataset, each rank evaluates its shard and the
 * caller sums (dtrain train --eval-every, dtrain eval). DT_ERR_INVALID_ARG: a bad batch or label. */
DT_API dt_status dt_model_evaluate(dt_model *m, const float *x, const int32_t *labels, int batch,
                                   double *loss_sum, int *correct, int32_t *pred);

/* How gradients are synchronized. With overlap, backward starts the allreduce of each bucket (a
 * contiguous slice of the gradients, filled last layer first) the moment its layers are done, on
 * the communication engine, while it goes on computing; dt_model_sync_grads then waits only for
 * what is still in flight. Either way the result is bitwise the same: the engine adds every
 * element in rank order whatever the buckets. */
typedef struct dt_sync_config {
    int overlap;            /* 1: allreduce buckets during backward (default); 0: all after backward */
    double bucket_mb;       /* cap of a bucket in MiB (default 25; 0 = one bucket for everything) */
    double first_bucket_mb; /* cap of the first bucket, the last layers (default 1) */
    dt_redop op;            /* DT_AVG (default), or DT_SUM when grad_scale already divides by ranks */
    dt_dtype grad_comm;     /* what travels between ranks: DT_F32 (default), or DT_F16 / DT_BF16 to
                               halve the bytes: each rank's gradient is rounded to 16 bits, the sum
                               is taken in fp32 in rank order and rounded once more, so every rank
                               gets the same values. fp16 overflows past 65504: the gradients of the
                               mean loss over the global batch (see grad_scale) stay far below. */
    int allow_unreduced;    /* 0 (default): with more than one rank, dt_model_optimizer_step on
                               gradients that dt_model_sync_grads has not reduced is an error (the
                               ranks would drift apart unseen); 1: allowed, for loops that skip the
                               reduction on purpose (local SGD, periodic averaging) */
} dt_sync_config;

/* overlap 1, 25 MiB buckets, 1 MiB first bucket, DT_AVG, DT_F32 on the wire, allow_unreduced 0. */
DT_API void dt_sync_defaults(dt_sync_config *c);

/* Plans the buckets and checks that every rank has the same plan (a mismatch fails naming the
 * ranks and their bucket counts instead of hanging later). dt_model_create applies the defaults.
 * Collective. */
DT_API dt_status dt_model_set_sync(dt_model *m, const dt_sync_config *c);

/* Number of buckets in the plan and the size in elements of bucket i (0 = last layers). */
DT_API int dt_model_num_buckets(const dt_model *m);
DT_API size_t dt_model_bucket_size(const dt_model *m, int i);

/* Completes the gradient synchronization of the last dt_model_forward_backward: waits for the
 * buckets in flight, or (without overlap) allreduces them all now. Afterwards the gradients are
 * the sum or average over ranks (dt_sync_config.op). Collective. */
DT_API dt_status dt_model_sync_grads(dt_model *m);

/* Whether every rank holds the same bytes in buf (host memory, `bytes` long): each rank hashes
 * its copy (64-bit, not cryptographic) and the hashes are shared with one allreduce of 5 floats
 * per rank. DT_OK when all agree; DT_ERR_NUMERIC when some differ, with *differ = how many ranks
 * differ from rank 0 and *first_rank = the lowest of them (both may be NULL; 0 and -1 when all
 * agree), and a message naming them and the usual cause. A world of one agrees with itself.
 * Collective: every rank calls it with the same bytes. */
DT_API dt_status dt_check_replicas(dt_ctx *ctx, const void *buf, size_t bytes, int *differ, int *first_rank);
/* The same for a model's parameters, on either device (a GPU model's are copied to host memory
 * for the hash): the check `dtrain train` runs at the end of a run. Collective. */
DT_API dt_status dt_model_check_replicas(dt_ctx *ctx, const dt_model *m, int *differ, int *first_rank);

/* ---------------------------------------------------------------- optimizers */

typedef enum dt_optim_kind { DT_OPTIM_SGD = 0, DT_OPTIM_ADAMW = 1 } dt_optim_kind;

typedef struct dt_optim_config {
    dt_optim_kind kind;
    float lr;
    float momentum;     /* SGD; 0 = plain SGD */
    float weight_decay; /* SGD: added to the gradient; AdamW: decoupled */
    float beta1, beta2, eps; /* AdamW */
} dt_optim_config;

/* SGD, lr 0.01, momentum 0.9, weight decay 0, betas 0.9/0.999, eps 1e-8. */
DT_API void dt_optim_defaults(dt_optim_config *c);

typedef struct dt_optimizer dt_optimizer;
/* An optimizer over n parameters (allocates its state: momentum, or Adam's m and v). */
DT_API dt_status dt_optimizer_create(const dt_optim_config *c, size_t n, dt_optimizer **out);
DT_API void dt_optimizer_free(dt_optimizer *o);
/* One update of params (n floats) from grads, PyTorch semantics. */
DT_API dt_status dt_optimizer_step(dt_optimizer *o, float *params, const float *grads);
/* The learning rate the next step uses, and changing it between steps (a schedule: the CLI's
 * --lr-schedule). Nothing else changes: momentum and Adam's moments carry on, as when a PyTorch
 * scheduler writes param_group['lr']. DT_ERR_INVALID_ARG for a rate that is not a positive
 * finite number (the optimizer keeps its rate). */
DT_API float dt_optimizer_lr(const dt_optimizer *o);
DT_API dt_status dt_optimizer_set_lr(dt_optimizer *o, float lr);

/* ---------------------------------------------------------------- mixed precision: the model
 *
 * A model computes in fp32 unless told otherwise. In fp16 or bf16 (the way torch.autocast does on
 * a GPU): the fp32 parameters stay the master copy the optimizer updates; every op uses them
 * rounded to 16 bits; every layer's output (activations, and the gradients flowing backward) is
 * stored in 16 bits; GEMMs and convolutions take the 16-bit values widened to fp32 and accumulate
 * in fp32 (the CPU path: OpenBLAS sgemm between conversions), and the result is rounded once;
 * softmax, the loss and every reduction are fp32. Parameter gradients are kept and allreduced in
 * the 16-bit type (half the memory and bytes), or in fp32 when asked (as torch.cuda.amp does). */

/* compute: DT_F32, DT_F16 or DT_BF16; grads: DT_F32 or the same type as compute. Reallocates the
 * activation and gradient buffers (gradient values are lost; call it before training). Not
 * collective, but every rank must choose the same (the gradient allreduce pairs buffers). */
DT_API dt_status dt_model_set_precision(dt_model *m, dt_dtype compute, dt_dtype grads);
DT_API dt_dtype dt_model_precision(const dt_model *m);
/* The type the gradients are kept in. dt_model_grads returns NULL when it is 16-bit. */
DT_API dt_dtype dt_model_grad_dtype(const dt_model *m);

/* After dt_model_sync_grads: divides the gradients by the loss scale (pass 1/scale; 1 when not
 * scaling) and sets *found_inf when any is inf or NaN. fp32 gradients are unscaled in place in the
 * same pass as the check; 16-bit ones are only checked (read once, 2 bytes an element) and unscaled
 * as dt_model_optimizer_step widens them, since dividing fp16 values in place would flush the small
 * ones to zero, which is what scaling is there to prevent. Every rank holds the same reduced
 * gradients, so every rank gets the same answer. */
DT_API dt_status dt_model_unscale_grads(dt_model *m, float inv_scale, int *found_inf);
/* One optimizer step of the fp32 parameters from the gradients in whatever type they are kept
 * (after dt_model_unscale_grads). Skip it for a step whose gradients overflowed. */
DT_API dt_status dt_model_optimizer_step(dt_model *m, dt_optimizer *o);

/* ---------------------------------------------------------------- clipping and accumulation */

/* The global L2 norm of the gradients as the optimizer step would read them: after
 * dt_model_sync_grads and dt_model_unscale_grads (16-bit gradients times the pending unscale),
 * so the norm of the reduced, unscaled gradients, the same on every rank with no communication
 * (every rank holds the same reduced gradients and the sum runs in double in a fixed order, so
 * the bits agree too). inf or NaN when a gradient is. Costs one read of the gradients (a device
 * reduction on a GPU, which waits for it). Not collective. */
DT_API dt_status dt_model_grad_norm(const dt_model *m, double *norm);
/* PyTorch's clip_grad_norm_(max_norm) on the gradients: *norm (may be NULL) = dt_model_grad_norm;
 * when it is finite and coef = max_norm / (norm + 1e-6) (rounded to fp32) is below 1, every
 * gradient is multiplied by coef (16-bit ones as dt_model_optimizer_step widens them). A
 * non-finite norm clips nothing (the step should be skipped; a loss scaler does). max_norm must
 * be > 0 (+inf: only the norm). Not collective. */
DT_API dt_status dt_model_clip_grad_norm(dt_model *m, double max_norm, double *norm);
/* Clipping inside dt_model_train_step, between the unscale and the optimizer step: 0 (default)
 * off, > 0 clip to max_norm, +inf compute and report the norm without clipping. The norm is
 * computed only then (dt_step_result.grad_norm is NaN otherwise). DT_ERR_INVALID_ARG for a
 * negative or NaN max_norm. */
DT_API dt_status dt_model_set_clip_grad_norm(dt_model *m, double max_norm);

/* Gradient accumulation: k >= 1 micro-batches per optimizer step (default 1). Calls to
 * dt_model_forward_backward then come in groups of k: the first of a group overwrites the
 * gradients, the next ones add theirs (after each call the gradient buffer holds the group's
 * running sum, this rank's own), and only the k-th starts the gradient allreduce, so the other
 * k - 1 send nothing. dt_model_sync_grads, dt_model_unscale_grads and dt_model_optimizer_step
 * before a group is complete are DT_ERR_INVALID_ARG. With grad_scale = 1 / (k * batch) on every
 * micro-batch (and DT_AVG, the default), a group equals one step on a batch of k * batch per
 * rank: the mean over the k * batch * world samples of the global batch (DT_SUM: 1 / (k * batch
 * * world)). The sum of earlier micro-batches lives in one more fp32 buffer of
 * dt_model_num_params floats on the model's device (16-bit gradients are added in fp32 and
 * rounded once per micro-batch). Setting it (even to the same k) starts a new group; so does
 * dt_model_set_precision. DT_ERR_INVALID_ARG for k < 1 or > 65536; DT_ERR_NOMEM. */
DT_API dt_status dt_model_set_accum_steps(dt_model *m, int k);
/* k, and the micro-batches of the current group already taken (0 .. k-1; 0 at a step boundary). */
DT_API int dt_model_accum_steps(const dt_model *m);
DT_API int dt_model_accum_pos(const dt_model *m);

/* With the check on, backward looks at each layer's own gradients as they are made, before the
 * allreduce (a read of the layer's gradients), and remembers the first layer (in backward order)
 * holding an inf or NaN: dt_model_nonfinite_layer returns its index, -1 when none was found in the
 * last backward. Say who caused an overflow, since after the allreduce every rank has it. */
DT_API void dt_model_set_nonfinite_check(dt_model *m, int on);
DT_API int dt_model_nonfinite_layer(const dt_model *m);
/* "layer 3 (fc:1024)" for layer index i, into buf. */
DT_API void dt_model_layer_name(const dt_model *m, int i, char *buf, size_t n);
/* Testing: the next backward puts +inf into the first gradient of the first layer it finishes. */
DT_API void dt_model_inject_inf(dt_model *m);

/* Bytes this rank holds for the model, by kind, in the model's memory (the GPU's for a GPU model;
 * the engine's send/receive scratch is not counted). Parameters, gradients and each optimizer
 * moment are one allocation each; activations and workspace share one, the activation pool,
 * sized for the largest batch and reused by every step. */
typedef struct dt_memory_summary {
    size_t params;      /* fp32 master parameters (the CPU path keeps no 16-bit copy: weights are
                           rounded as each op reads them; a 16-bit GPU model keeps one) */
    size_t grads;       /* the gradient buffer (4 or 2 bytes an element), and with accumulation
                           (dt_model_set_accum_steps > 1) its fp32 sum buffer */
    size_t optimizer;   /* momentum, or Adam's two moments (fp32) */
    size_t activations; /* layer outputs, the two backward buffers, pooling indices, at max batch */
    size_t workspace;   /* convolution scratch, and the fp32 conversion scratch of 16-bit runs */
    size_t pool;        /* the activation pool's allocation: activations + workspace, aligned */
    size_t device_free, device_total; /* a GPU model: the device's free and total memory now; else 0 */
} dt_memory_summary;
/* o may be NULL (no optimizer state counted). */
DT_API void dt_model_memory(const dt_model *m, const dt_optimizer *o, dt_memory_summary *out);

/* ---------------------------------------------------------------- mixed precision: loss scaling
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
 * toward the window. */

typedef struct dt_scaler_config {
    int dynamic;                  /* 1 (default): grow and back off; 0: keep init_scale */
    double init_scale;            /* 65536 */
    double growth_factor;         /* 2 (> 1) */
    double backoff_factor;        /* 0.5 (in (0, 1)) */
    int growth_interval;          /* 2000 consecutive good steps before growing (>= 1) */
    int hysteresis;               /* 1: overflows tolerated before backing off (>= 1) */
    double min_scale;             /* 1 (> 0): the floor */
    double max_scale;             /* 2^24 = 16777216 (>= min_scale) */
    int window;                   /* 100: recent updates that the overflow fraction looks at (>= 1) */
    double max_overflow_fraction; /* 0.5: give up when more than this of the window overflowed, (0, 1] */
} dt_scaler_config;

/* The defaults listed above. */
DT_API void dt_scaler_defaults(dt_scaler_config *c);

typedef struct dt_scaler dt_scaler;
/* Checks every field (a bad one fails with DT_ERR_INVALID_ARG naming it, its value and the range;
 * init_scale must lie in [min_scale, max_scale]). */
DT_API dt_status dt_scaler_create(const dt_scaler_config *c, dt_scaler **out);
DT_API void dt_scaler_free(dt_scaler *s);
/* The current scale: multiply the loss by it. */
DT_API float dt_scaler_scale(const dt_scaler *s);
/* Records one step's verdict (found_inf nonzero: some reduced gradient was inf or nan) and moves the
 * state machine. DT_OK: go on (skip the optimizer step when found_inf). DT_ERR_NUMERIC: stop
 * training; dt_last_error() names the step, the scale and the recent history of the scale. */
DT_API dt_status dt_scaler_update(dt_scaler *s, int found_inf);
/* Updates so far, and those that overflowed (skipped steps). */
DT_API long dt_scaler_updates(const dt_scaler *s);
DT_API long dt_scaler_skipped(const dt_scaler *s);

/* The whole state, for checkpoints: the scale, the run of good steps, the hysteresis budget, the
 * update and skip counts. set_state checks the values (DT_ERR_CORRUPT when out of range). */
typedef struct dt_scaler_state {
    double scale;
    int good_steps;
    int hysteresis_left;
    long updates, skipped;
} dt_scaler_state;
DT_API void dt_scaler_get_state(const dt_scaler *s, dt_scaler_state *st);
DT_API dt_status dt_scaler_set_state(dt_scaler *s, const dt_scaler_state *st);

/* ---------------------------------------------------------------- one training step */

typedef struct dt_step_result {
    double loss_sum;    /* summed loss of this rank's batch (unscaled) */
    int correct;        /* argmax == label on this rank's batch */
    int skipped;        /* 1: the reduced gradients overflowed and the optimizer step was skipped */
    double comm_wait_s; /* time spent waiting in dt_model_sync_grads (the exposed communication) */
    int stepped;        /* 1: this call ended its accumulation group and the optimizer stepped (0 on
                           micro-batches 1..k-1 of dt_model_set_accum_steps, and on skipped steps) */
    double grad_norm;   /* with dt_model_set_clip_grad_norm on: the norm before clipping of the
                           reduced, unscaled gradients; +inf on a skipped step (not computed: the
                           gradients overflowed); NaN when clipping is off or the group goes on */
} dt_step_result;

/* The whole step of `dtrain train` on this rank's batch: forward and backward with the loss
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

/* ---------------------------------------------------------------- checkpoints
 *
 * DIR/ckpt-<step>.dtc holds the parameters, the optimizer state, the loss scaler's state (the
 * _scaled calls) and the step, each section with a CRC-32, written atomically (temporary file,
 * fsync, rename, fsync of the directory): a crash, a full disk or a file-size limit leaves the
 * previous checkpoint or the new one, never half of one. The data position needs no saving: a
 * step's batches follow from (seed, step, world).
 *
 * Reading trusts nothing in a file: every header field is checked against the model, the
 * optimizer, the file's name and size and sane ranges before anything is allocated or copied, each
 * section's CRC and values (finite; AdamW's second moment >= 0) are checked before the model is
 * touched, and only regular files are opened (a FIFO or directory named like a checkpoint is
 * skipped with a warning, never waited on). */

/* Writes the checkpoint of `step` (0 to 10^18-1; rank 0 writes, every rank holds the same state).
 * o NULL writes the weights only (enough for inference and evaluation; it cannot resume an
 * optimizer). Every rank learns whether it worked: DT_ERR_IO names the cause (full disk, quota,
 * file-size limit) and the fix, and the temporary file is removed. DT_ERR_INVALID_ARG for a NULL
 * model or dir, or a step out of range. Collective. */
DT_API dt_status dt_checkpoint_save(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                    long step);

/* Loads the newest checkpoint in dir that passes every check into m and o and sets *step to its
 * step; damaged or crafted files are skipped for an older one with a warning naming the file, the
 * field and both values. No loadable checkpoint (or no dir): *step = 0 and DT_OK. A sound
 * checkpoint of another model or optimizer fails with DT_ERR_INVALID_ARG and loads nothing. o NULL
 * loads the weights only (of a full or a weights-only checkpoint); a weights-only checkpoint with o
 * non-NULL is DT_ERR_INVALID_ARG. DT_ERR_IO when dir exists but cannot be read. Collective. */
DT_API dt_status dt_checkpoint_load_latest(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                           long *step);

/* The same, with the loss scaler's state (scale, good-step run, hysteresis, counts) saved and
 * restored too, so a resumed fp16 run scales exactly as the uninterrupted one would. sc may be NULL;
 * a checkpoint without scaler state (or with sound state out of range for this run's settings, e.g.
 * another growth interval) leaves sc at its initial state with a warning; damaged scaler state
 * (a NaN scale, negative counts) makes the file damaged. */
DT_API dt_status dt_checkpoint_save_scaled(dt_ctx *ctx, const char *dir, const dt_model *m,
                                           const dt_optimizer *o, const dt_scaler *sc, long step);
DT_API dt_status dt_checkpoint_load_latest_scaled(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                                  dt_scaler *sc, long *step);
/* What a checkpoint keeps about the data, so a resumed run and `dtrain eval` use what training
 * used: the data position after the checkpoint's step (dt_dataset_position's epoch and offset:
 * a run resumed on another rank count continues mid-epoch from it) and the normalization (a
 * dt_normalize, and for DT_NORMALIZE_STANDARD the per-channel mean and std). */
typedef struct dt_ckpt_data {
    int present;        /* load: 1 when the checkpoint held this block (saved by dtrain 0.1 wave 2 on) */
    long epoch, offset;
    int normalize;      /* a dt_normalize */
    int channels;       /* save: entries in mean and std (0 when not standard); load: their room */
    float *mean, *std;  /* the caller's buffers */
} dt_ckpt_data;
/* dt_checkpoint_save_scaled with the data block (data may be NULL: none saved). */
DT_API dt_status dt_checkpoint_save_data(dt_ctx *ctx, const char *dir, const dt_model *m, const dt_optimizer *o,
                                         const dt_scaler *sc, const dt_ckpt_data *data, long step);
/* dt_checkpoint_load_latest_scaled that also reads the data block into *data (may be NULL), on
 * every rank: present 0 when the checkpoint has none (an older one) or nothing was loaded. A block
 * whose channel count is not data->channels fails with DT_ERR_INVALID_ARG (other data). */
DT_API dt_status dt_checkpoint_load_latest_data(dt_ctx *ctx, const char *dir, dt_model *m, dt_optimizer *o,
                                                dt_scaler *sc, dt_ckpt_data *data, long *step);

/* Where a training step's time goes. Profiling waits for the device at every boundary below (a
 * GPU's work is otherwise asynchronous), so profiled steps run somewhat slower than plain ones;
 * the split is what to look at. Seconds summed over `steps` profiled steps. */
typedef struct dt_step_profile {
    long steps;
    double input_s;     /* the batch to the device, and (16-bit on a GPU) the weights to 16 bits */
    double forward_s;   /* every layer's forward pass */
    double loss_s;      /* softmax cross-entropy and the loss read back */
    double backward_s;  /* every layer's backward pass, with the per-layer finite check of fp16 */
    double allreduce_s; /* waiting for the gradient allreduce after backward */
    double check_s;     /* the unscale and finite check of the loss scaler */
    double optimizer_s; /* the optimizer step */
} dt_step_profile;
/* Turns profiling on (and zeroes the counts) or off. dt_model_train_step fills every field;
 * dt_model_forward_backward the first four and backward_s. */
DT_API dt_status dt_model_set_profile(dt_model *m, int on);
DT_API void dt_model_profile(const dt_model *m, dt_step_profile *out);
/* Seconds summed over the profiled steps of layer i's forward and backward (0 for a layer that
 * does nothing, such as flatten). */
DT_API void dt_model_layer_profile(const dt_model *m, int i, double *forward_s, double *backward_s);

/* ---------------------------------------------------------------- datasets
 *
 * A dataset is one split of samples (C x H x W values and a label each) with the sampler that
 * says which samples each rank trains on at each step, the normalization and the augmentation.
 * Its source is a file format (dt_dataset_open: MNIST IDX, CIFAR-10/100 binary, image folders,
 * dtrain .dts shards) or the built-in synthetic data (dt_synthetic_create); every source goes
 * through the same sampler, loader and transforms.
 *
 * Sampling (DistributedSampler's semantics at batch granularity): epoch e visits the samples in
 * a permutation drawn from (seed, e), the same on every rank (file order with shuffle off). Step
 * s takes the next world * batch positions of that order and rank r the batch at r * batch
 * within them, so with shuffle off batch i of rank r is samples (i * world + r) * batch ... The
 * last step of an epoch is padded by wrapping to the epoch's first samples, so every rank has
 * ceil(n / (world * batch)) full batches per epoch, or with drop_last the samples that do not
 * fill a whole step are left out (floor(...) steps). The data position is a function of (seed,
 * step) and of an anchor (dt_dataset_set_position, from a checkpoint), so a run resumed on
 * another number of ranks continues mid-epoch without repeating or skipping a sample.
 *
 * Per sample, in this order: read (bytes 0..255 stay 0..255), augmentation (a crop after zero
 * padding, a horizontal flip, drawn from (seed, epoch, sample index): the same whatever thread or
 * rank makes it), normalization. */

typedef struct dt_dataset dt_dataset;

typedef enum dt_normalize {
    DT_NORMALIZE_NONE = 0,     /* values as read */
    DT_NORMALIZE_UNIT = 1,     /* bytes / 255 (other values as read) */
    DT_NORMALIZE_STANDARD = 2  /* (value - mean[c]) / std[c] per channel (in the values' own units) */
} dt_normalize;

typedef struct dt_data_config {
    const char *format;     /* NULL or "auto": detected; or idx, cifar10, cifar100, imagefolder, dts */
    const char *split;      /* "train" (NULL) or "test" (MNIST t10k-*, CIFAR test, an image folder's val/) */
    int cifar100_coarse;    /* CIFAR-100: 1 the 20 coarse labels, 0 the 100 fine ones */
    int c, h, w;            /* the shape images are decoded to (image folders); 0 = not given */
    dt_normalize normalize;
    /* DT_NORMALIZE_STANDARD with given per-channel statistics (c floats each, copied): a
     * checkpoint's or the training split's, so evaluation uses the training figures. NULL: the
     * file's own (a .dts header), else computed once over this split. */
    const float *mean, *std;
    double holdout;         /* 0, or in (0, 1): this fraction of the split is kept aside */
    int holdout_part;       /* with holdout: 0 the samples trained on, 1 those kept aside */
    uint64_t seed;          /* the epoch orders and the augmentation */
    int shuffle;            /* 1: a new order each epoch; 0: file order */
    int drop_last;          /* 1: drop the samples that do not fill a last whole step */
    int crop_pad;           /* augmentation: random crop after padding each side by this many zeros */
    int flip;               /* augmentation: horizontal flip with probability 1/2 */
    int skip_bad;           /* a sample that cannot be decoded: 0 fails, 1 is replaced (and counted) */
    int threads;            /* threads for computing the statistics at open (0: one) */
} dt_data_config;

/* train split, auto format, DT_NORMALIZE_STANDARD, no holdout, seed 1, shuffle on, padding, no
 * augmentation, bad samples fail, 1 thread. */
DT_API void dt_data_defaults(dt_data_config *c);
/* Opens the dataset at path (a directory of a known layout, or one file) as c says (NULL: the
 * defaults). The caller owns *out (dt_dataset_free). DT_ERR_IO: unreadable; DT_ERR_CORRUPT: a
 * file fails its checks (the message names the file, the offset or sample, and the fix);
 * DT_ERR_INVALID_ARG: an unknown format or split, nothing recognisable, bad settings. */
DT_API dt_status dt_dataset_open(const char *path, const dt_data_config *c, dt_dataset **out);
/* The built-in synthetic data: size samples of shape (c, h, w) with `classes` labels (a flat
 * input is (n, 1, 1)). Images (h or w > 1) are spatially smooth, like natural ones: each channel
 * is a coarse random grid (one value per 4x4 pixels) interpolated bilinearly, so pooling keeps
 * what the label depends on. Flat inputs are independent uniform values in [-1, 1). Labels come
 * from a fixed random teacher network drawn from seed. dt_synthetic_create: seed drives the
 * order too, no normalization, drop_last on; dt_synthetic_open: cfg's sampler, transforms and
 * seed (cfg->format, split, c/h/w and holdout are ignored). */
DT_API dt_status dt_synthetic_create(int c, int h, int w, int classes, size_t size, uint64_t seed,
                                     dt_dataset **out);
DT_API dt_status dt_synthetic_open(int c, int h, int w, int classes, size_t size, uint64_t data_seed,
                                   const dt_data_config *cfg, dt_dataset **out);
/* The shape a model expects, for dt_synthetic_create. */
DT_API void dt_model_input_shape(const dt_model *m, int *c, int *h, int *w);
DT_API void dt_dataset_free(dt_dataset *d);
/* Samples (after the holdout), shape, classes (labels lie in [0, classes)), the format's name
 * and the path (or a description) it came from. */
DT_API size_t dt_dataset_size(const dt_dataset *d);
DT_API void dt_dataset_shape(const dt_dataset *d, int *c, int *h, int *w);
DT_API int dt_dataset_num_classes(const dt_dataset *d);
DT_API const char *dt_dataset_format(const dt_dataset *d);
DT_API const char *dt_dataset_source(const dt_dataset *d);
/* The normalization in use: its kind, and for DT_NORMALIZE_STANDARD the per-channel mean and std
 * (dt_dataset_shape's c floats each, owned by d), else NULL. */
DT_API dt_normalize dt_dataset_normalization(const dt_dataset *d, const float **mean, const float **std);
/* Replaces the normalization (a checkpoint's, so a resumed run and evaluation use training's
 * figures): mean and std (c floats each, copied) for DT_NORMALIZE_STANDARD, else ignored. Not while
 * a loader uses d. DT_ERR_INVALID_ARG: missing or non-finite figures (d unchanged). */
DT_API dt_status dt_dataset_set_normalization(dt_dataset *d, dt_normalize kind, const float *mean, const float *std);
/* Whether the values are bytes 0..255 (uint8 images), as DT_NORMALIZE_UNIT divides them. */
DT_API int dt_dataset_uint8(const dt_dataset *d);
/* Samples replaced because they could not be decoded (skip_bad), so far. */
DT_API long dt_dataset_bad_samples(const dt_dataset *d);
/* Steps in a whole epoch for `world` ranks of `batch` (0: drop_last and the dataset is smaller
 * than one global batch). */
DT_API long dt_dataset_steps_per_epoch(const dt_dataset *d, int world, int batch);
/* The data position at the start of `step`: the epoch and the samples of its order already taken
 * (a checkpoint saves it). DT_ERR_INVALID_ARG for a step before the anchor or a global batch the
 * dataset cannot fill. */
DT_API dt_status dt_dataset_position(const dt_dataset *d, long step, int world, int batch, long *epoch,
                                     long *offset);
/* Anchors the position: at `step`, (epoch, offset) as dt_dataset_position gave it in the run
 * that saved the checkpoint, whatever its rank count. DT_ERR_INVALID_ARG when it cannot be a
 * position of this dataset (offset >= size). */
DT_API dt_status dt_dataset_set_position(dt_dataset *d, long step, long epoch, long offset);
/* Fills x (batch, input_size) and labels (batch) for `rank` of `world` at global step `step`. */
DT_API dt_status dt_dataset_batch(dt_dataset *d, long step, int rank, int world, int batch, float *x,
                                  int32_t *labels);

/* The figures of a model over a whole dataset (dt_evaluate). The caller provides the arrays it
 * wants (classes entries each, classes x classes for the confusion matrix, row = true label,
 * column = prediction) or NULL. */
typedef struct dt_eval_result {
    double loss_sum;      /* summed cross-entropy over every sample */
    long correct, count;  /* top-1 correct, and samples */
    long *class_correct, *class_count;
    long *confusion;
} dt_eval_result;
/* Evaluates m over every sample of d once (no padding, no augmentation): rank r of W takes
 * samples r, r + W, ... in batches of up to `batch` (<= the model's max batch), read by `threads`
 * loader threads, and the sums are added over the ranks, so every rank gets the same figures and
 * the counts are exact whatever the rank count. Collective. */
DT_API dt_status dt_evaluate(dt_ctx *ctx, dt_model *m, dt_dataset *d, int batch, int threads,
                             dt_eval_result *r);

/* A background loader: `threads` worker threads make the batches of steps first_step,
 * first_step + 1, ... ahead of their use, at most `depth` of them (the one in use included), into
 * host buffers that are page-locked (pinned) when ctx's device is a GPU, so that the model's copy
 * to the device runs asynchronously. A batch is made by all workers together (chunks of its
 * samples) and is the same as dt_dataset_batch's for that step. threads 0: no threads, each batch
 * is made by the caller inside dt_loader_next. The loader uses d alone while it lives (call no
 * dt_dataset_batch on d meanwhile). threads 0..256, depth 2..64 (ignored when threads is 0). */
typedef struct dt_loader dt_loader;
DT_API dt_status dt_loader_create(const dt_ctx *ctx, dt_dataset *d, int rank, int world, int batch,
                                  long first_step, int threads, int depth, dt_loader **out);
/* The next step's batch, in step order: *step, inputs *x (batch x input size) and *labels. The
 * buffers stay valid until the next call, which hands them back for refilling. An error of a
 * worker (a dataset smaller than one global batch, ...) is returned here. */
DT_API dt_status dt_loader_next(dt_loader *l, long *step, const float **x, const int32_t **labels);
/* Seconds dt_loader_next spent waiting for a batch that was not ready yet, since creation. */
DT_API double dt_loader_wait_s(const dt_loader *l);
/* Stops the workers and frees the buffers; NULL is fine. */
DT_API void dt_loader_free(dt_loader *l);

/* ---------------------------------------------------------------- BLAS */

/* The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Haswell", "Prescott", ...). */
DT_API const char *dt_blas_corename(void);
/* A better OPENBLAS_CORETYPE for this CPU when OpenBLAS chose kernels below what the CPU can run
 * (it falls back to "Prescott" on virtual machines that hide the CPU model), else NULL. OpenBLAS
 * reads the variable once, when it loads: set it in the environment of a new process. */
DT_API const char *dt_blas_coretype_advice(void);

/* ---------------------------------------------------------------- kernels for custom models */

/* C(M,N) = alpha * op(A) * op(B) + beta * C, row-major fp32 (OpenBLAS). */
DT_API void dt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
/* Softmax cross-entropy of logits (batch, classes): returns the summed loss, counts correct
 * predictions, writes dlogits = (softmax - onehot) * grad_scale. */
DT_API double dt_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int batch,
                              int classes, float grad_scale, int *correct);

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_H */
