/**
 * @file
 * dtrain.h - the public header of dtrain, a runtime for data-parallel training: version, status,
 * context and configuration, placement and collectives here, then the parts in include/dtrain/
 * (the reducer, the model, optimizer and scaler, checkpoints, data); a program includes this file
 * alone. What the pieces do together, and the rules across calls: docs/library.md.
 */
#ifndef DTRAIN_H
#define DTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @defgroup version Version
 * The version of these headers; dt_version_code() and dt_version_string() give the library's, at
 * run time.
 *
 * The rule, checked by the build.abi test against tests/package/abi-MAJOR.MINOR.txt (the size,
 * alignment and field offsets of every public struct, every enum value, every function's
 * signature):
 * - While DT_VERSION_MAJOR is 0, any change of that interface (a struct's layout, a function's
 *   signature, an enum value, anything added or removed) raises DT_VERSION_MINOR, and the soname
 *   carries the minor: libdtrain.so.0.MINOR. A program built against 0.2 needs libdtrain.so.0.2
 *   and the loader refuses to start it without one; the CMake package and dtrain.pc accept the same
 *   0.MINOR only (0.2.x with x at least the one asked for).
 * - From 1.0 on, a change that breaks programs (a layout or signature changed, something removed)
 *   raises DT_VERSION_MAJOR and the soname is libdtrain.so.MAJOR; additions raise the minor.
 * - DT_VERSION_PATCH is raised by fixes that leave the interface as it is.
 * @{ */

#define DT_VERSION_MAJOR 0 /**< Raised by a change that breaks programs from 1.0 on (the soname follows it). */
#define DT_VERSION_MINOR 2 /**< Raised by any interface change while the major is 0 (then the soname follows it). */
#define DT_VERSION_PATCH 0 /**< Raised by fixes that leave the interface as it is. */
/** One number to compare in `#if`: major * 10000 + minor * 100 + patch. */
#define DT_VERSION_CODE (DT_VERSION_MAJOR * 10000 + DT_VERSION_MINOR * 100 + DT_VERSION_PATCH)

/** @} */

/* The mark of every public declaration: what libdtrain.so exports (everything else is hidden). Not
 * in the reference, which shows the declarations without it. */
/** @cond */
#if defined(__GNUC__)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif
/** @endcond */

/** @defgroup status Status and errors
 * Every function that can fail returns a dt_status; dt_last_error() holds the message.
 *
 * Flags: an int that a call or a configuration field documents as 0 or 1 must be 0 or 1. Any
 * other value is DT_ERR_INVALID_ARG naming it and what 0 and 1 mean, as dt_init does for
 * dt_config's flags: a 5 is taken for a mistake, not for true. The void setters, which cannot
 * refuse, say what they do with another value (dt_model_set_nonfinite_check, dt_model_set_graphs,
 * ...), and an int documented as "nonzero" (dt_scaler_update's found_inf, dt_sgemm's trans_a and
 * trans_b) is a truth value.
 * @{ */

/** What a call returns: DT_OK, or the kind of failure (dt_last_error() has the details). */
typedef enum dt_status {
    DT_OK = 0,              /**< success */
    DT_ERR_INVALID_ARG = 1, /**< a bad argument, flag or configuration value */
    DT_ERR_ENV = 2,         /**< a malformed or inconsistent environment variable */
    DT_ERR_MPI = 3,         /**< MPI failed or disagrees with the launcher */
    DT_ERR_DEVICE = 4,      /**< no usable device, or a bad device mapping */
    DT_ERR_NOMEM = 5,       /**< out of host or device memory */
    DT_ERR_IO = 6,          /**< a file could not be read or written */
    DT_ERR_CORRUPT = 7,     /**< a file or message failed its checks */
    DT_ERR_TIMEOUT = 8,     /**< a collective passed its deadline */
    DT_ERR_UNSUPPORTED = 9, /**< not built in, or not supported by this backend */
    DT_ERR_INTERNAL = 10,   /**< a bug in dtrain: please report it with the message */
    DT_ERR_NUMERIC = 11,    /**< training diverged: gradients stay non-finite (loss scaling gave up) */
    DT_ERR_COMM = 12        /**< the GPU communication library (NCCL) failed or its communicator was aborted */
} dt_status;

/** A short fixed description of a status code; never NULL. */
DT_API const char *dt_strerror(dt_status s);

/** The message of the last failure on this thread: what failed, the offending value and the fix.
 * Empty string when nothing failed yet. The pointer stays valid until the next dtrain call on this
 * thread. */
DT_API const char *dt_last_error(void);

/** "0.2.0" plus the parts this build has: "0.2.0 (cuda, nccl)", "0.2.0 (cuda)" or "0.2.0 (cpu only)".
 * Static storage. */
DT_API const char *dt_version_string(void);

/** The library's version as DT_VERSION_CODE computes it (major * 10000 + minor * 100 + patch), for a
 * program to compare with the DT_VERSION_CODE it was built with: a library older than the headers
 * (`dt_version_code() < DT_VERSION_CODE`) lacks what they added. While the major is 0 the soname
 * already keeps a program from starting on another 0.MINOR. */
DT_API int dt_version_code(void);

/** @} */

/** @defgroup context Context
 * One dt_ctx per process, from dt_init() to dt_finalize(), and the configuration it is made with.
 *
 * One thread at a time: a context, and everything made on it (models, reducers, checkpoint writers
 * and readers), is used by one thread at a time. MPI and NCCL pair each rank's collectives with its
 * peers' in the order the rank issues them, so two threads of one rank issuing them at once would
 * pair them wrongly, with no error. A thread that enters a collective of
 * the context (dt_allreduce(), a model's step, dt_finalize()...) while another thread is inside one
 * gets DT_ERR_INVALID_ARG saying so, before anything is sent; threads that take turns without
 * synchronizing are not seen, and their collectives may still pair wrongly. To hand the context to
 * another thread, synchronize (join it, or hold a mutex around the calls). dtrain's own
 * communication thread (dt_config::comm_thread) runs on communicators of its own and is no second
 * thread in this sense. */

/** @defgroup config Configuration
 * @ingroup context
 * What dt_init() is told: a plain struct filled with defaults, then from the environment, then
 * edited.
 * @{ */

/** Where a process computes. */
typedef enum dt_device_kind {
    DT_DEVICE_AUTO = 0, /**< CUDA when a GPU is visible, else the CPU */
    DT_DEVICE_CPU = 1,  /**< the CPU cores this process is pinned to (OpenBLAS) */
    DT_DEVICE_CUDA = 2  /**< a GPU (CUDA and cuBLAS); dt_init() fails when none is visible */
} dt_device_kind;

/** Whether dtrain pins the process to CPU cores. */
typedef enum dt_pin_mode {
    DT_PIN_AUTO = 0, /**< keep a launcher's binding, else split the allowed cores among local ranks */
    DT_PIN_NONE = 1  /**< leave the affinity exactly as the launcher set it */
} dt_pin_mode;

/** What carries collectives on GPU buffers: NCCL (the default where dtrain was built with it), or
 * MPI through host memory (slower; needs no NCCL, and lets several ranks share one GPU, which NCCL
 * refuses: for debugging and for testing many ranks on one GPU). */
typedef enum dt_gpu_comm {
    DT_GPU_COMM_NCCL = 0, /**< NCCL on the GPU buffers */
    DT_GPU_COMM_MPI = 1   /**< MPI, copying through host memory */
} dt_gpu_comm;

/** How the communication engine carries an fp32 allreduce of host memory between ranks. Every choice
 * sums each element in the same rank order, so the result is bitwise the same whichever carries it
 * (docs/performance.md "Across nodes"). */
typedef enum dt_allreduce_algo {
    DT_ALLREDUCE_AUTO = 0,   /**< the chain where it sends fewer bytes over a node's link than direct (ranks
                                  on several nodes, contiguous per node, 2 or more a node) for buckets of at
                                  least 2 (W-1) x 64000 bytes (its pipeline's fill); else direct (with 2 ranks
                                  and a communication thread, MPI_Allreduce, whose one addition is order-free) */
    DT_ALLREDUCE_DIRECT = 1, /**< rank-ordered reduce-scatter + allgather: 2 (W-1) messages a phase, each
                                  1/W of the bucket; the fewest round trips, for one node and small buckets */
    DT_ALLREDUCE_CHAIN = 2   /**< pipelined chain 0 -> W-1 and back, in segments: each node boundary is
                                  crossed once each way; 16-bit wires and ZeRO-1's halves stay direct */
} dt_allreduce_algo;

/** Plain configuration: fill with dt_config_defaults(), optionally dt_config_from_env(), then edit. */
typedef struct dt_config {
    dt_device_kind device;       /**< where to compute (DTRAIN_DEVICE) */
    dt_pin_mode pin;             /**< whether to pin to CPU cores (DTRAIN_PIN) */
    double timeout_s;            /**< deadline of a collective before the job is aborted: 0 = none, else
                                1 to 1e7 seconds (DTRAIN_TIMEOUT refuses other values) */
    int init_mpi;                /**< 1: dt_init calls MPI_Init_thread (and dt_finalize MPI_Finalize) when
                                MPI is not initialized yet; 0: the caller initializes MPI itself */
    int blas_threads;            /**< 0 = one per core this process is pinned to, shared with the local ranks
                                whose cores overlap its own (a launcher's overlapping binding, --pin none) */
    dt_gpu_comm gpu_comm;        /**< collectives on GPU buffers (DTRAIN_GPU_COMM) */
    int comm_thread;             /**< 1 (default): the allreduces of host-memory reducers progress on a communication
                                thread when MPI provides MPI_THREAD_MULTIPLE; 0: inline, inside the reducer's
                                calls (DTRAIN_COMM_THREAD) */
    int comm_world1;             /**< 0 (default): in a world of one, reducers send nothing; 1: device-memory reducers
                                still reduce through NCCL on their stream, to test that path on one GPU (a sum
                                over one rank changes no bit) (DTRAIN_COMM_WORLD1) */
    dt_allreduce_algo allreduce; /**< how host-memory allreduces travel (DTRAIN_ALLREDUCE=auto|direct|chain) */
} dt_config;

/** Defaults: device auto, pin auto, timeout 300 s, init_mpi 1, blas_threads 0, gpu_comm nccl,
 * comm_thread 1, comm_world1 0, allreduce auto. cfg NULL: nothing. */
DT_API void dt_config_defaults(dt_config *cfg);

/** Overrides fields from DTRAIN_DEVICE, DTRAIN_PIN, DTRAIN_TIMEOUT, DTRAIN_BLAS_THREADS,
 * DTRAIN_GPU_COMM, DTRAIN_COMM_THREAD, DTRAIN_COMM_WORLD1 (0 or 1) and DTRAIN_ALLREDUCE when set, and checks
 * DTRAIN_LOG (setting the log level dt_init would set), so that every malformed DTRAIN_* variable
 * is refused here, before MPI starts.
 * A malformed value fails with DT_ERR_ENV naming the variable; cfg is then left unchanged.
 * DT_ERR_INVALID_ARG for a NULL cfg. */
DT_API dt_status dt_config_from_env(dt_config *cfg);

/** Parses "auto|cpu|cuda" (the command line's --device, DTRAIN_DEVICE) into *out;
 * DT_ERR_INVALID_ARG for anything else, or a NULL out (as the three parsers below). */
DT_API dt_status dt_device_kind_parse(const char *s, dt_device_kind *out);
/** Parses "auto|none" (--pin, DTRAIN_PIN) into *out; DT_ERR_INVALID_ARG for anything else. */
DT_API dt_status dt_pin_mode_parse(const char *s, dt_pin_mode *out);
/** Parses "nccl|mpi" (--gpu-comm, DTRAIN_GPU_COMM) into *out; DT_ERR_INVALID_ARG for anything else. */
DT_API dt_status dt_gpu_comm_parse(const char *s, dt_gpu_comm *out);
/** Parses "auto|direct|chain" (DTRAIN_ALLREDUCE) into *out; DT_ERR_INVALID_ARG for anything else. */
DT_API dt_status dt_allreduce_algo_parse(const char *s, dt_allreduce_algo *out);
/** "auto", "direct" or "chain"; static storage ("?" for a value outside the enum). */
DT_API const char *dt_allreduce_algo_name(dt_allreduce_algo a);
/** "auto", "cpu" or "cuda"; static storage ("?" for a value outside the enum). */
DT_API const char *dt_device_kind_name(dt_device_kind k);

/** @} */

/** @defgroup ctx_life Making and ending a context
 * @ingroup context
 * dt_init(), dt_finalize() and dt_abort_job().
 * @{ */

/** The process's view of the job: placement, device and communicators. Opaque; made by dt_init(). */
typedef struct dt_ctx dt_ctx;

/** Resolves identity, selects the device, initializes MPI (see cfg->init_mpi), cross-checks the
 * launcher against MPI, pins CPU cores and builds the communicators. On success *out owns a context
 * that dt_finalize() releases. On failure *out is NULL, nothing stays allocated, and MPI may still
 * be initialized (call dt_abort_job or MPI_Finalize as you see fit); the one exception is the
 * refusal of a second dt_init while a context lives, which leaves *out as it was, so that a caller
 * that passes its live context's own variable keeps its handle. A failure of one rank before
 * MPI_Init (a malformed launcher variable, its GPU) under a launcher with a PMI server (mpirun, srun
 * --mpi=pmix) still initializes MPI, and every rank then fails together: that rank with its own
 * error, the others with its status and "dt_init failed on rank R (...); rank R says: <its
 * message>", so none waits for it in MPI_Init; MPI is then finalized again when dt_init initialized
 * it, so every process may exit with its own message (dt_abort_job returns at once). cfg NULL means
 * defaults plus
 * the environment. A cfg with a field out of its range (timeout_s not 0 or 1 to 1e7, an enum
 * outside its values, blas_threads outside 0 to 4096, a flag not 0 or 1) fails with
 * DT_ERR_INVALID_ARG naming the field, before MPI starts. One context per process: while one
 * lives (until its dt_finalize), a second dt_init fails with DT_ERR_INVALID_ARG. MPI starts once
 * per process: after the dt_finalize of a context whose dt_init initialized MPI (which finalizes
 * it), dt_init fails with DT_ERR_MPI; a program that makes one context after another initializes
 * MPI itself and sets init_mpi 0. Collective: every rank of the job must call it.
 * When dt_init initializes MPI itself, it gives MPI_COMM_WORLD an error handler that is fatal, as
 * MPI's default (the error logged, the job aborted), for every call but dtrain's own waits on its
 * nonblocking collectives: Open MPI 4.1 reports their failure (a count that differs across ranks)
 * through MPI_COMM_WORLD's handler rather than their communicator's, and dtrain returns it as
 * DT_ERR_MPI. When the caller initialized MPI, its handler of MPI_COMM_WORLD stays as it is: with
 * MPI's default (MPI_ERRORS_ARE_FATAL) such a failure ends the job; set MPI_ERRORS_RETURN there to
 * get DT_ERR_MPI instead.
 * Errors: DT_ERR_INVALID_ARG (a NULL out, a bad cfg field, a context already made);
 * DT_ERR_ENV (a malformed DTRAIN_* or launcher variable, DTRAIN_LOG included even with a cfg
 * given); DT_ERR_MPI (MPI could not start, was finalized already, or disagrees with the
 * launcher); DT_ERR_DEVICE (no usable GPU for --device cuda, two ranks of a node on one GPU);
 * DT_ERR_COMM (the NCCL communicator); DT_ERR_UNSUPPORTED (a part this build lacks);
 * DT_ERR_NOMEM. */
DT_API dt_status dt_init(const dt_config *cfg, dt_ctx **out);

/** Releases the context (and finalizes MPI when dt_init initialized it). Everything made on the
 * context must be freed first: models (dt_model_free(), which frees a model's own reducer too),
 * reducers (dt_reducer_free()), checkpoint writers (dt_ckpt_commit() or dt_ckpt_discard()) and
 * readers (dt_ckpt_close()), loaders made with it (dt_loader_free()): they use its communicators,
 * and freeing one after MPI_Finalize would end the job. While any lives, dt_finalize refuses with
 * DT_ERR_INVALID_ARG naming how many of each, and releases nothing: free them and call it again.
 * It refuses the same way while another thread is inside a collective of the context. Collective
 * (ranks holding the same objects refuse alike). NULL is a no-op. With a timeout
 * (dt_config::timeout_s) in a job of several ranks, a process still in MPI_Finalize the timeout
 * plus 3 s later (a peer cut off) exits with code 1 instead of hanging;
 * once MPI_Finalize returns, that guard is stopped and the process may run on as long as it likes.
 * DT_ERR_MPI when MPI_Finalize fails; the context is released either way. A caller that
 * initialized MPI calls dt_finalize before its own MPI_Finalize: after it, the communicators can
 * no longer be freed, so dt_finalize releases the context's memory alone and returns DT_ERR_MPI
 * saying so (the context is gone either way). */
DT_API dt_status dt_finalize(dt_ctx *ctx);

/** Ends every process of the job with exit code `code` (MPI_Abort): for a rank that failed alone,
 * so that its peers do not wait forever on it. Usable before or after dt_init (ctx may be NULL).
 * Returns only when there is no job to abort: MPI not initialized, or a world of 1 (ctx is then
 * released as by dt_finalize(), so it must not be used or finalized again, and MPI is finalized);
 * the caller then exits with `code` itself. As before dt_finalize(), free what was made on ctx
 * first (dt_abort_job does not check).
 * A process that MPI_Abort has not ended 3 s later (its launcher cannot be reached, as on a node
 * whose link is down) exits with `code` itself. */
DT_API void dt_abort_job(dt_ctx *ctx, int code);

/** @} */

/** @defgroup placement Placement
 * Who started this process, where it runs (node, cores, GPU) and who its peers are.
 * @{ */

/** The launcher that started the process, as dt_init() recognised it. */
typedef enum dt_launcher {
    DT_LAUNCHER_NONE = 0,    /**< started directly: a world of 1 */
    DT_LAUNCHER_OPENMPI = 1, /**< mpirun / mpiexec of Open MPI (OMPI_COMM_WORLD_*) */
    DT_LAUNCHER_SLURM = 2,   /**< srun (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID) */
    DT_LAUNCHER_PMIX = 3,    /**< another PMIx launcher (PMIX_RANK only) */
    DT_LAUNCHER_HYDRA = 4,   /**< MPICH / Intel MPI mpiexec.hydra (PMI_RANK / PMI_SIZE) */
    DT_LAUNCHER_TORCHRUN = 5 /**< RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE */
} dt_launcher;

/** "none", "openmpi", "slurm", "pmix", "hydra" or "torchrun"; static storage ("?" for a value
 * outside the enum). */
DT_API const char *dt_launcher_name(dt_launcher l);

/** Who bound the process to its cores (dt_placement::pinned_by). */
typedef enum dt_pinned_by {
    DT_PINNED_NONE = 0,       /**< not pinned: --pin none, or more local ranks than cores */
    DT_PINNED_BY_DTRAIN = 1,  /**< dtrain split the allowed cores among the local ranks */
    DT_PINNED_BY_LAUNCHER = 2 /**< the launcher's binding was kept */
} dt_pinned_by;

/** Where this process stands, as resolved by dt_init and confirmed by MPI. */
typedef struct dt_placement {
    int rank;               /**< this process's rank in MPI_COMM_WORLD */
    int world_size;         /**< ranks in MPI_COMM_WORLD */
    int local_rank;         /**< this process's index among the ranks that share this node's memory */
    int local_size;         /**< ranks that share this node's memory */
    int node;               /**< this node's index, 0 .. num_nodes - 1 */
    int num_nodes;          /**< nodes in the job */
    dt_launcher launcher;   /**< who started this process */
    dt_device_kind device;  /**< DT_DEVICE_CPU or DT_DEVICE_CUDA, never AUTO */
    int cuda_device;        /**< CUDA ordinal in this process's view, -1 on the CPU */
    char gpu[64];           /**< the GPU this rank uses or, with no usable GPU, would use: its entry
                                 in CUDA_VISIBLE_DEVICES (or SLURM_STEP_GPUS); "" when none is
                                 assigned; "-" plus a reason when the mapping fails */
    char hostname[256];     /**< this node's hostname */
    char cores[256];        /**< the cores this process runs on, as a list "0-3,8" */
    int num_cores;          /**< how many */
    dt_pinned_by pinned_by; /**< who bound the process to its cores */
    int cores_shared;       /**< 1 when local ranks outnumber the cores, so cores are shared */
    int blas_threads;       /**< threads OpenBLAS was given */
} dt_placement;

/** Copies the placement into *out. DT_ERR_INVALID_ARG for a NULL ctx or out. */
DT_API dt_status dt_get_placement(const dt_ctx *ctx, dt_placement *out);
/** This process's rank in the job, 0 .. dt_world_size() - 1 (dt_placement::rank); -1 for a NULL
 * ctx, as the two below. */
DT_API int dt_rank(const dt_ctx *ctx);
/** The number of ranks in the job (dt_placement::world_size). */
DT_API int dt_world_size(const dt_ctx *ctx);
/** This process's index among the ranks of its node (dt_placement::local_rank). */
DT_API int dt_local_rank(const dt_ctx *ctx);

/** Gathers every rank's placement on rank 0: all must hold dt_world_size() entries there (indexed by
 * rank) and may be NULL on other ranks. Collective, under the deadline of every collective
 * (dt_barrier's). Errors: DT_ERR_INVALID_ARG for a NULL ctx, and for a NULL all on rank 0: then
 * nothing is gathered and every rank returns it (rank 0 with its own message, the others with
 * one naming rank 0), so a rank 0 that could not allocate the array passes NULL rather than
 * skipping the call; DT_ERR_INVALID_ARG also for another thread in a collective of ctx; DT_ERR_MPI,
 * DT_ERR_TIMEOUT. */
DT_API dt_status dt_gather_placement(const dt_ctx *ctx, dt_placement *all);

/** The name of the host list entry of node i (SLURM's node list when SLURM launched the step, else
 * the hostname MPI reports for that node), or NULL when i is out of range. Owned by ctx. */
DT_API const char *dt_node_name(const dt_ctx *ctx, int i);

/** Versions found at run time, written as text ("Open MPI v4.1.4", "NCCL 2.28.9", "CUDA 13.0"),
 * or "-" where absent. Each writes at most n bytes including the terminator. */
DT_API void dt_versions(char *mpi, char *nccl, char *cuda, size_t n);

/** @} */

/** @defgroup blas BLAS
 * @ingroup placement
 * Which OpenBLAS kernels the CPU path runs.
 * @{ */

/** The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Haswell", "Prescott", ...). */
DT_API const char *dt_blas_corename(void);
/** A better OPENBLAS_CORETYPE for this CPU when OpenBLAS chose kernels below what the CPU can run
 * (it falls back to "Prescott" on virtual machines that hide the CPU model), else NULL. OpenBLAS
 * reads the variable once, when it loads: set it in the environment of a new process. */
DT_API const char *dt_blas_coretype_advice(void);

/** @} */

/** @defgroup collectives Collectives
 * Allreduce, broadcast, barrier and the replica check over every rank of the job, on host or
 * device buffers.
 *
 * Rules common to them. Every rank calls the same collectives in the same order, with the same
 * count, dtype, op and root: a difference is the caller's error, and as in MPI and NCCL it is not
 * checked for each call (that would cost a message each). A dtype, op or root that differs goes
 * unnoticed: the ranks get DT_OK and different values (or MPI's error where the bytes differ). On
 * the MPI backend with a timeout (dt_config::timeout_s, on by default), the watchdog's roll call
 * carries each rank's operation and count, so a rank that sees a peer in another collective or
 * with another count returns DT_ERR_MPI naming the peer's call, and its buffer holds no usable
 * result: rank 0 hears from every rank, the others from rank 0 alone, so a rank that agrees with
 * rank 0 may return DT_OK while the odd one and rank 0 fail; treat the error as fatal
 * (dt_abort_job()). On NCCL, or without a timeout, a count that differs gives wrong values, an
 * error, or a wait until the deadline. dt_reducer_create() checks its bucket plan across ranks.
 * A count whose bytes exceed PTRDIFF_MAX (no buffer is larger; a negative count converted to
 * size_t is), or run past the end of the address space, is refused with DT_ERR_INVALID_ARG naming
 * it before anything is sent. A second thread entering while one is in a collective of the
 * context is refused (see @ref context).
 * @{ */

/** Element types of buffers and of the gradient wire. */
typedef enum dt_dtype {
    DT_F32 = 0,  /**< IEEE fp32 (float) */
    DT_F16 = 1,  /**< IEEE fp16 (half): 5 exponent bits, 10 mantissa bits */
    DT_BF16 = 2, /**< bfloat16: fp32's 8 exponent bits, 7 mantissa bits */
    DT_U8 = 3    /**< raw bytes, for dt_broadcast only (integers, structs, text): nothing reduces them, so
                  *   dt_allreduce, the reducer, the dt_buffer_* utilities and the precisions refuse it */
} dt_dtype;
/** How an allreduce combines the ranks' values. */
typedef enum dt_redop {
    DT_SUM = 0, /**< the sum over ranks */
    DT_AVG = 1  /**< the sum divided by the world size */
} dt_redop;

/** Bytes per element of a dtype: 4 (DT_F32), 2 (DT_F16, DT_BF16), 1 (DT_U8), 0 for a value that is not a
 * dt_dtype. */
DT_API size_t dt_dtype_size(dt_dtype t);
/** The name of a dtype: "fp32", "fp16", "bf16" or "u8" ("?" for a value that is not a dt_dtype); static
 * storage. The spelling of the command line's --precision, --grad-comm and --wire. */
DT_API const char *dt_dtype_name(dt_dtype t);
/** Parses a name of dt_dtype_name() (exactly, lower case) into *out; DT_ERR_INVALID_ARG naming s for
 * anything else (*out unchanged). */
DT_API dt_status dt_dtype_parse(const char *s, dt_dtype *out);

/** In-place allreduce over every rank of the job. buf holds count elements of dtype t (DT_F32, DT_F16 or
 * DT_BF16; DT_U8 is refused with DT_ERR_INVALID_ARG: bytes have no sum) in host memory
 * or, under CUDA, in device memory (reduced by NCCL; host memory then goes through MPI). 16-bit types are
 * accumulated in fp32 and rounded once (MPI backend). DT_AVG divides the sum by the world size (on
 * NCCL, 16-bit types take NCCL's average, which multiplies by 1/W rounded to the type first: see
 * dt_reducer_config::op).
 * count may be 0. Device memory is reduced on dtrain's own stream, which does not wait for the
 * caller's streams: synchronize the work that writes buf first (cudaStreamSynchronize); the call
 * returns when the result is in buf. (dt_reducer_ready orders itself after the caller's stream.)
 * Collective: every rank calls it with the same count, dtype and op; a difference is not detected
 * but as the group's rules say (dtype and op never; the count by the MPI backend's watchdog,
 * DT_ERR_MPI). Errors: DT_ERR_INVALID_ARG (a bad argument, named; a count past PTRDIFF_MAX bytes;
 * another thread in a collective of ctx), DT_ERR_NOMEM (the host copy of a device buffer on the MPI path, the 16-bit
 * accumulation buffer), DT_ERR_MPI (MPI failed, or a peer called another collective or count),
 * DT_ERR_COMM (NCCL), DT_ERR_DEVICE, DT_ERR_TIMEOUT (NCCL; on the
 * MPI backend a collective past the deadline, dt_config::timeout_s, aborts the job instead). On a
 * context placed on the CPU, buf must be host memory. */
DT_API dt_status dt_allreduce(dt_ctx *ctx, void *buf, size_t count, dt_dtype t, dt_redop op);

/** Broadcasts count elements of dtype t from rank root to every rank, in place, in host memory or, under CUDA,
 * device memory. Any dtype: the bytes arrive unchanged, so data that is not floating point (int64 counters,
 * doubles, structs, text) goes as DT_U8 with count its size in bytes. DT_ERR_INVALID_ARG for a NULL buf
 * with count > 0, an unknown dtype, a root outside the world, a count past PTRDIFF_MAX bytes, or
 * another thread in a collective of ctx. Collective: every rank calls it with the same count, dtype
 * and root; a root or dtype that differs is not detected (the ranks get DT_OK and different bytes),
 * a count that differs is as the group's rules say (DT_ERR_MPI from the MPI backend's watchdog).
 * Other errors: DT_ERR_MPI, DT_ERR_COMM (NCCL), DT_ERR_NOMEM and DT_ERR_DEVICE (staging device
 * memory), DT_ERR_TIMEOUT (NCCL). */
DT_API dt_status dt_broadcast(dt_ctx *ctx, void *buf, size_t count, dt_dtype t, int root);

/** Returns when every rank has entered it. Like every collective, it has the timeout's deadline
 * (dt_config::timeout_s): a rank that never comes is named and the job aborted. Collective.
 * Errors: DT_ERR_INVALID_ARG for a NULL ctx or another thread in a collective of ctx; DT_ERR_MPI
 * (also when a peer called another collective in its place, as the group's rules say). */
DT_API dt_status dt_barrier(dt_ctx *ctx);

/** Name of the collective backend in use: "mpi" or "nccl"; "none" for a NULL ctx. Static storage. */
DT_API const char *dt_backend_name(const dt_ctx *ctx);

/** Whether every rank holds the same bytes in buf (`bytes` long; host memory, or device memory
 * under CUDA, told apart by the pointer and copied to the host for the hash after a device
 * synchronization, so whatever was queued on any stream is in it): each rank hashes
 * its copy (64-bit, not cryptographic) and, after an allreduce of one float per rank that tells
 * every rank whether any failed, the hashes and lengths are shared by allreduces of 8 floats per
 * rank (256 ranks at a time; nothing is allocated, so no rank can drop out of them). DT_OK when
 * all agree; DT_ERR_NUMERIC when some differ, with *differ = how many ranks
 * differ from rank 0 and *first_rank = the lowest of them (both may be NULL; 0 and -1 when all
 * agree), and a message naming them and the usual cause. A world of one agrees with itself.
 * Collective: every rank calls it with the same bytes; a rank given another length fails every
 * rank with DT_ERR_INVALID_ARG naming it and both lengths (nothing is compared). Other errors:
 * DT_ERR_INVALID_ARG for a NULL ctx, a NULL buf with bytes > 0, or bytes past PTRDIFF_MAX (every
 * rank then returns it); when a rank cannot copy its device buffer to the host (DT_ERR_NOMEM,
 * DT_ERR_DEVICE) nothing is compared and every rank returns that rank's code, naming it;
 * DT_ERR_MPI, DT_ERR_TIMEOUT from the collectives. */
DT_API dt_status dt_check_replicas(dt_ctx *ctx, const void *buf, size_t bytes, int *differ, int *first_rank);

/** @} */

/* The rest of the API, by object; each part uses the types declared before it. */
#include "dtrain/reducer.h"
#include "dtrain/model.h"
#include "dtrain/training.h"
#include "dtrain/checkpoint.h"
#include "dtrain/data.h"
#include "dtrain/trace.h"

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_H */
