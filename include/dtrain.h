/*
 * dtrain.h - the public header of dtrain, a runtime for data-parallel training: the status,
 * configuration, context, placement and collectives here, then the parts in include/dtrain/ (model,
 * training, checkpoint, data), included below; a program includes this file alone.
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

/* The rest of the API, by concern; each part uses the types declared before it. */
#include "dtrain/reducer.h"
#include "dtrain/model.h"
#include "dtrain/training.h"
#include "dtrain/checkpoint.h"
#include "dtrain/data.h"

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
