/*
 * ctx.c - dt_init / dt_finalize: the order in which a process becomes a rank of the job.
 *
 *   1. the launcher's variables (strictly parsed)   -> who we think we are
 *   2. device selection from the early local rank   -> before MPI_Init and any other CUDA call
 *   3. MPI_Init_thread, then MPI's view              -> who we are; cross-checked against step 1
 *   4. one GPU per local rank (checked over MPI), CPU placement, communicators
 *
 * Every failure unwinds what was built (ctx_release) and returns the status; the library
 * never exits the process. Also the context's lifetime rules: what is made on it holds it
 * (ctx_hold), one thread at a time runs its collectives (ctx_enter), dt_finalize and dt_abort_job.
 * What a made context does is ctx_ops.c's.
 */
#include "runtime/placement/affinity.h"
#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "collectives/engine.h"
#include "collectives/rank_verdict.h"
#include "collectives/roll_peers.h"
#include "runtime/placement/config.h"
#include "runtime/placement/device.h"
#include "kernels/backend.h"
#include "base/abort_guard.h"
#include "base/log.h"
#include "base/status.h"
#include "base/trace.h"
#include "runtime/placement/topo.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/placement/ctx_impl.h"

/* How deep the calling thread is in ctx_enter: a call that runs collectives calls others that do
 * (dt_model_step -> dt_allreduce -> the backend), and only the outermost takes the mark. A process
 * has one context, so one counter per thread is enough. */
static _Thread_local int ctx_depth;

/* 1 from a dt_init that succeeds (or is under way) to the release of its context: the process's
 * one context, as MPI has one world. A second would share MPI with the first without owning it, and
 * the first's dt_finalize would end MPI under it. */
static atomic_int ctx_live;

/* Whether a failure of this rank before MPI_Init can wait for the other ranks there (or in their
 * first collective, when the caller started MPI) to fail with them: without it a rank refused alone
 * under srun (which does not end a step when one task exits) leaves the others in MPI_Init until
 * PMIx gives up (300 s). Not without a launcher, or under one with no PMI server (torchrun-style,
 * srun --mpi=none): there MPI_Init finds no peers (a singleton) or aborts, so the failure is
 * returned at once, as before. */
static int ctx_can_join(const dt_config *cfg)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return 0;
    return inited || (cfg->init_mpi && topo_mpi_reachable(NULL, NULL));
}

/* Everything the context holds, MPI left as it is: dt_finalize's work, dt_abort_job's in a
 * world of 1, where nothing else could free it (MPI is finalized right after), and what a failing
 * dt_init unwinds (every field is NULL or MPI_COMM_NULL until it is made). */
static void ctx_release(dt_ctx *c)
{
    if (c->coll) c->coll->ops->destroy(c->coll);
    if (c->coll_host) c->coll_host->ops->destroy(c->coll_host);
    trace_rec_free(ctx_trace(c));
    topo_free_names(c->node_names, c->num_node_names);
    free(c->rank_node);
    roll_board_destroy(c->board);
    /* dt_finalize after the program's MPI_Finalize frees the memory alone (the collectives'
     * destroys skip their MPI calls the same way). */
    const int mpi_gone = engine_mpi_finalized();
    if (c->local != MPI_COMM_NULL && !mpi_gone) MPI_Comm_free(&c->local);
    if (c->world != MPI_COMM_NULL && !mpi_gone) MPI_Comm_free(&c->world);
    free(c);
    atomic_store(&ctx_live, 0);
}

/* The communicators: on a GPU NCCL's (or MPI's through host memory, --gpu-comm mpi or a build
 * without NCCL) plus a host one for host buffers; on the CPU MPI's. */
static dt_status ctx_make_collectives(dt_ctx *c)
{
    dt_status s;
    if (c->pl.device == DT_DEVICE_CUDA) {
        if (!coll_nccl_built()) {
            log_msg0(LOG_LEVEL_WARN, "built without NCCL: GPU buffers are reduced by MPI through host memory");
            s = coll_mpi_create(c->world, 1, c->cfg.timeout_s, &c->coll);
        } else if (c->cfg.gpu_comm == DT_GPU_COMM_MPI) {
            log_msg0(LOG_LEVEL_INFO, "--gpu-comm mpi: GPU buffers are reduced by MPI through host memory");
            s = coll_mpi_create(c->world, 1, c->cfg.timeout_s, &c->coll);
        } else {
            s = coll_nccl_create(c->world, c->cfg.timeout_s, &c->coll);
        }
        if (!s) s = coll_mpi_create(c->world, 0, c->cfg.timeout_s, &c->coll_host);
    } else {
        s = coll_mpi_create(c->world, 0, c->cfg.timeout_s, &c->coll);
    }
    return s;
}

/* OpenBLAS on older kernels than the CPU can run (GEMM up to 4x slower): said once, by rank 0. */
static void ctx_warn_blas_coretype(void)
{
    const char *better = dt_blas_coretype_advice();
    const char *exported = getenv("OPENBLAS_CORETYPE");
    /* An exported OPENBLAS_CORETYPE is the usual cause where dtrain's own restart did not run
     * (a machine image or module file sets it, and a user's own always wins): name it. */
    if (better && exported && *exported)
        log_msg0(LOG_LEVEL_WARN,
                 "OPENBLAS_CORETYPE=%s in the environment keeps OpenBLAS on its %s kernels on a CPU that can "
                 "run %s ones (GEMM up to 4x slower): unset it, or export OPENBLAS_CORETYPE=%s",
                 exported, dt_blas_corename(), better, better);
    else if (better)
        log_msg0(LOG_LEVEL_WARN,
                 "OpenBLAS runs its %s kernels on a CPU that can run %s ones: start the program "
                 "with OPENBLAS_CORETYPE=%s for much faster GEMM (4x measured on an AVX-512 VM)",
                 dt_blas_corename(), better, better);
}

/* What dt_init learns before MPI_Init and takes on after it. */
typedef struct init_state {
    topo_env env;
    int env_read;         /* env holds the launcher's variables (free it) */
    dt_status held;       /* this rank's failure before MPI_Init, told to every rank after it */
    status_kept held_why; /* and its message */
    char bus_id[64], cpu_why[CTX_WHY_LEN];
    int device_chosen; /* the device was chosen before MPI_Init */
} init_state;

/* The context, its configuration (cfg_in, or the defaults and DTRAIN_*) and the log level. On a
 * failure the context is released and *out untouched. */
static dt_status ctx_new(const dt_config *cfg_in, dt_ctx **out)
{
    dt_status s;
    dt_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        atomic_store(&ctx_live, 0);
        return status_set_error(DT_ERR_NOMEM, "out of memory for the context");
    }
    c->world = c->local = MPI_COMM_NULL;
    if (cfg_in) {
        c->cfg = *cfg_in;
        s = config_check(&c->cfg);
    } else {
        dt_config_defaults(&c->cfg);
        s = dt_config_from_env(&c->cfg);
    }
    if (!s) s = log_init_from_env();
    if (s) {
        ctx_release(c);
        return s;
    }
    *out = c;
    return DT_OK;
}

/* Steps 1 and 2: the launcher's word, then the device while no CUDA context exists. A failure of
 * this rank's own (a malformed per-rank variable, a GPU that will not start) is held in st where
 * the other ranks can be joined in MPI_Init (joinable), to be told to all of them right after it;
 * otherwise it is returned. */
static dt_status ctx_before_mpi(dt_ctx *c, int joinable, init_state *st)
{
    dt_status s;
    if ((s = topo_read_env(NULL, NULL, &st->env))) {
        if (!joinable) return s;
        st->held = s;
        status_keep(&st->held_why);
    } else {
        st->env_read = 1;
        c->pl.launcher = st->env.launcher;
        if (log_enabled(LOG_LEVEL_DEBUG))
            log_msg(LOG_LEVEL_DEBUG, "placement: launcher %s (rank %d of %d, local rank %d of %d by its variables)",
                    dt_launcher_name(st->env.launcher), st->env.rank, st->env.size, st->env.local_rank,
                    st->env.local_size);
    }
    /* PMIx-only launchers give no local rank before MPI; their device is chosen right after
     * MPI_Init, which touches no GPU in this MPI. */
    const int early_local = !st->env_read ? -1 : st->env.launcher == DT_LAUNCHER_NONE ? 0 : st->env.local_rank;
    if (early_local >= 0 && (s = ctx_select_device(c, early_local, st->env.local_size, 1, st->bus_id, sizeof st->bus_id,
                                                   st->cpu_why, sizeof st->cpu_why, &st->device_chosen))) {
        if (!joinable) return s;
        st->held = s;
        status_keep(&st->held_why);
    }
    return DT_OK;
}

/* Step 3: MPI, the world's duplicate, and every rank's outcome before MPI to every rank: one
 * refused alone stops all of them now, each naming it, rather than leaving them to wait for it. A
 * held failure wins over what follows from it. *all_failed: every rank fails here together and
 * knows it, in an MPI that dt_init started. */
static dt_status ctx_join_mpi(dt_ctx *c, init_state *st, int *all_failed)
{
    dt_status s;
    *all_failed = 0;
    if ((st->env_read && (s = topo_check_before_mpi(&st->env))) || (s = ctx_mpi_init(&c->cfg, &c->we_initialized_mpi)))
        return st->held ? status_restore(st->held, &st->held_why) : s;
    if (ctx_world_dup(c->cfg.timeout_s, &c->world) != DT_OK)
        return st->held ? status_restore(st->held, &st->held_why) : DT_ERR_MPI;
    if (st->held) status_restore(st->held, &st->held_why);
    int shared = 0;
    s = rank_verdict_comm_status(c->world, st->held, "dt_init", " before MPI_Init, so no rank goes on", &shared);
    *all_failed = s && shared && c->we_initialized_mpi;
    return s;
}

/* Who this rank is by MPI, checked against the launcher's word, into c->pl; SLURM's node names
 * (the step's list, in SLURM's node order) when SLURM placed us. */
static dt_status ctx_record_placement(dt_ctx *c, init_state *st, topo_mpi *m)
{
    dt_status s;
    if ((s = topo_query_mpi(c->world, m, &c->local, &c->node_names))) return s;
    c->num_node_names = m->num_nodes;
    log_set_rank(m->rank);
    if ((s = topo_check(&st->env, m))) return s;
    c->pl.rank = m->rank;
    c->pl.world_size = m->size;
    c->pl.local_rank = m->local_rank;
    c->pl.local_size = m->local_size;
    c->pl.node = m->node;
    c->pl.num_nodes = m->num_nodes;
    if (st->env.hosts && st->env.node >= 0 && st->env.num_hosts == m->num_nodes) {
        topo_free_names(c->node_names, c->num_node_names);
        c->node_names = st->env.hosts;
        c->num_node_names = st->env.num_hosts;
        st->env.hosts = NULL;
        st->env.num_hosts = 0;
        c->pl.node = st->env.node;
    }
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(host, &len);
    snprintf(c->pl.hostname, sizeof c->pl.hostname, "%s", host);
    return DT_OK;
}

/* Every rank's node, while the network is sound: a watchdog verdict names the nodes of the ranks
 * it misses, and by then no collective may be trusted to ask. Then the watchdogs' board. */
static dt_status ctx_share_rank_nodes(dt_ctx *c, int size)
{
    c->rank_node = calloc((size_t)size, sizeof *c->rank_node);
    if (!c->rank_node) return status_set_error(DT_ERR_NOMEM, "out of memory for the node of each of %d ranks", size);
    if (MPI_Allgather(&c->pl.node, 1, MPI_INT, c->rank_node, 1, MPI_INT, c->world) != MPI_SUCCESS)
        return status_set_error(DT_ERR_MPI, "MPI_Allgather of every rank's node index failed");
    return roll_board_create(c->world, c->cfg.timeout_s, &c->board);
}

/* The cores (near the GPU of bus_id, if any) and the BLAS threads, into c->pl. */
static dt_status ctx_pin(dt_ctx *c, const char *bus_id)
{
    affinity_result aff;
    dt_status s;
    if ((s = affinity_apply(c->cfg.pin, c->local, bus_id, c->cfg.blas_threads, &aff))) return s;
    snprintf(c->pl.cores, sizeof c->pl.cores, "%s", aff.list);
    c->pl.num_cores = aff.num_cores;
    c->pl.pinned_by = aff.pinned_by;
    c->pl.cores_shared = aff.shared;
    c->pl.blas_threads = aff.blas_threads;
    return DT_OK;
}

dt_status dt_init(const dt_config *cfg_in, dt_ctx **out)
{
    dt_status s;
    init_state st = {.env_read = 0, .held = DT_OK, .bus_id = "", .cpu_why = "", .device_chosen = 0};
    if (!out) return status_set_error(DT_ERR_INVALID_ARG, "dt_init: out is NULL: pass the address of a dt_ctx *");
    /* *out untouched: a caller that passes its live context's own variable keeps its handle. */
    if (atomic_exchange(&ctx_live, 1))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_init: this process has a context already (one dt_ctx per process): use it, or "
                                "dt_finalize it before making another");
    *out = NULL;
    status_clear_error();

    dt_ctx *c = NULL;
    if ((s = ctx_new(cfg_in, &c))) return s;
    /* 1 and 2. The launcher's word and the device. */
    if ((s = ctx_before_mpi(c, ctx_can_join(&c->cfg), &st))) goto fail;
    /* 3. MPI, and its view of who we are. */
    int all_failed;
    if ((s = ctx_join_mpi(c, &st, &all_failed))) {
        /* MPI ends as it began, so that each process exits with its own message instead of the
         * first one's MPI_Abort cutting the others off. */
        if (all_failed) {
            if (st.env_read) topo_env_free(&st.env);
            ctx_release(c);
            ctx_mpi_finalize();
            return s;
        }
        goto fail;
    }
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    topo_mpi m;
    if ((s = ctx_record_placement(c, &st, &m)) || (s = ctx_share_rank_nodes(c, m.size))) goto fail;

    /* 4. One GPU per local rank, then the cores, then the communicators. */
    if ((s = ctx_place_gpu(c, &m, st.device_chosen, st.bus_id, sizeof st.bus_id, st.cpu_why)) ||
        (s = ctx_pin(c, st.bus_id)) || (s = ctx_make_collectives(c)))
        goto fail;
    /* The watchdogs name a missing rank's node. */
    c->coll->ctx = c;
    if (c->coll_host) c->coll_host->ctx = c;

    log_msg0(LOG_LEVEL_INFO,
             "dtrain %s: %d ranks on %d nodes, launcher %s, device %s, backend %s, pin %s, "
             "timeout %.0f s, comm thread %s, comm world1 %s",
             dt_version_string(), m.size, m.num_nodes, dt_launcher_name(st.env.launcher),
             dt_device_kind_name(c->pl.device), c->coll->ops->name, c->cfg.pin == DT_PIN_NONE ? "none" : "auto",
             c->cfg.timeout_s, c->cfg.comm_thread ? "on" : "off", c->cfg.comm_world1 ? "on" : "off");
    ctx_warn_blas_coretype();
    topo_env_free(&st.env);
    *out = c;
    return DT_OK;
fail:
    if (st.env_read) topo_env_free(&st.env);
    ctx_release(c);
    return s;
}

void ctx_hold(const dt_ctx *c, ctx_held kind)
{
    /* The count is bookkeeping beside the context, not the state a const context promises to keep. */
    if (c) atomic_fetch_add(&((dt_ctx *)c)->held[kind], 1);
}

void ctx_unhold(const dt_ctx *c, ctx_held kind)
{
    if (c) atomic_fetch_sub(&((dt_ctx *)c)->held[kind], 1);
}

dt_status ctx_enter(const dt_ctx *c, const char *what)
{
    if (!c) return DT_OK;
    if (ctx_depth > 0) {
        ctx_depth++;
        return DT_OK;
    }
    /* One atomic exchange per outermost call: the only cost on the path of every collective. */
    if (atomic_exchange_explicit(&((dt_ctx *)c)->busy, 1, memory_order_acquire))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: another thread is running a collective on this context: a dt_ctx, and every "
                                "model, reducer and checkpoint made on it, is used by one thread at a time (the "
                                "ranks would pair their threads' collectives wrongly); run these calls on one "
                                "thread, or hold a mutex around them",
                                what);
    ctx_depth = 1;
    return DT_OK;
}

void ctx_leave(const dt_ctx *c)
{
    if (c && --ctx_depth == 0) atomic_store_explicit(&((dt_ctx *)c)->busy, 0, memory_order_release);
}

/* DT_OK when nothing made on c is alive; else DT_ERR_INVALID_ARG naming what is, by kind. */
static dt_status ctx_check_unheld(dt_ctx *c)
{
    static const char *const names[CTX_HELD_KINDS][2] = {{"model", "models"},
                                                         {"reducer", "reducers"},
                                                         {"checkpoint writer", "checkpoint writers"},
                                                         {"checkpoint reader", "checkpoint readers"},
                                                         {"loader", "loaders"}};
    char list[256] = "";
    size_t used = 0;
    int total = 0;
    for (int k = 0; k < CTX_HELD_KINDS; k++) {
        const int n = atomic_load(&c->held[k]);
        if (n <= 0) continue;
        total += n;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d %s", used ? ", " : "", n, names[k][n > 1]);
        if (used >= sizeof list) used = sizeof list - 1;
    }
    if (!total) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "dt_finalize: %d object%s made on this context %s still alive (%s; a model's own reducer "
                            "counts among the reducers): free them first (dt_model_free, which frees its reducer "
                            "too; dt_reducer_free; dt_ckpt_commit or dt_ckpt_discard; dt_ckpt_close; "
                            "dt_loader_free), then call dt_finalize again; nothing was released",
                            total, total > 1 ? "s" : "", total > 1 ? "are" : "is", list);
}

dt_status dt_finalize(dt_ctx *c)
{
    if (!c) return DT_OK;
    /* Refused before anything is released: the objects still use the communicators (freeing one
     * after MPI_Finalize ends the job), and a thread in a collective would lose them under it. */
    dt_status s = ctx_enter(c, "dt_finalize");
    if (s) return s;
    if ((s = ctx_check_unheld(c))) {
        ctx_leave(c);
        return s;
    }
    /* The caller finalized MPI first: freeing the communicators now would make MPI end the job, so
     * the release frees the memory alone and the caller hears of the wrong order. */
    if (engine_mpi_finalized()) {
        ctx_depth = 0;
        ctx_release(c);
        return status_set_error(DT_ERR_MPI,
                                "dt_finalize: MPI_Finalize ran before dt_finalize, so the context's communicators "
                                "could no longer be freed (MPI would end the job): its memory was released, the "
                                "communicators left to MPI; call dt_finalize before MPI_Finalize");
    }
    ctx_depth = 0; /* the mark goes with the context */
    int we = c->we_initialized_mpi;
    const double timeout_s = c->cfg.timeout_s;
    const int world = c->pl.world_size;
    ctx_release(c);
    /* MPI_Finalize waits for the other ranks: a peer cut off after the last collective (a link
     * that died) would hold this rank there with no watchdog left. Past the deadline it exits 1. */
    const int guarded = we && world > 1 && timeout_s > 0;
    if (guarded && abort_guard_arm(timeout_s + ABORT_GUARD_S, 1, "MPI_Finalize"))
        abort_guard_wait(); /* another thread is ending the process */
    const int rc = we ? ctx_mpi_finalize() : MPI_SUCCESS;
    /* Finalized: the process is the caller's again, for as long as it likes. */
    if (guarded) abort_guard_disarm();
    if (rc != MPI_SUCCESS) return status_set_error(DT_ERR_MPI, "MPI_Finalize failed");
    return DT_OK;
}

void dt_abort_job(dt_ctx *c, int code)
{
    if (c && c->coll) c->coll->ops->abort(c->coll);
    int inited = 0, finalized = 0, size = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized) return;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* A world of 1 has no peer to stop: release the context (the caller cannot once MPI is
     * finalized; it leaked on every refused 1-rank run) and finalize quietly, and let the caller
     * exit with its code. */
    if (size == 1) {
        if (c) ctx_release(c);
        ctx_mpi_finalize();
        return;
    }
    if (abort_guard_arm(ABORT_GUARD_S, code, "MPI_Abort")) abort_guard_wait(); /* another thread ends it */
    MPI_Abort(MPI_COMM_WORLD, code);
}
