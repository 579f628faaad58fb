/*
 * ctx_impl.h - what a context holds, shared by the files that make and use it: ctx.c (dt_init,
 * dt_finalize and the context's lifetime rules), ctx_mpi.c (MPI's start and end, the world's
 * duplicate) and ctx_ops.c (its collectives and accessors).
 * Nothing outside runtime/placement/ includes it: other layers use collectives/ctx_comm.h.
 */
#ifndef DT_RUNTIME_PLACEMENT_CTX_IMPL_H
#define DT_RUNTIME_PLACEMENT_CTX_IMPL_H

#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "base/trace.h"
#include "runtime/placement/topo.h"
#include "dtrain.h"

#include <mpi.h>
#include <stdatomic.h>

struct dt_ctx {
    dt_config cfg;
    dt_placement pl;
    MPI_Comm world, local;
    int we_initialized_mpi;
    coll *coll;
    coll *coll_host; /* on a GPU: MPI for host buffers (a training loop's counters and flags) */
    char **node_names;
    int num_node_names;
    int *rank_node;           /* the node index of every world rank: the watchdog names a missing rank's node */
    struct roll_board *board; /* what the watchdogs tell each other (collectives/roll_peers.h), or NULL */
    /* dt_trace_start's recorder, or NULL; atomic, as the communication and loader threads read it. */
    trace_rec *_Atomic trace;
    atomic_int held[CTX_HELD_KINDS]; /* objects made on the context, alive (ctx_hold) */
    atomic_int busy;                 /* 1 while a thread runs collectives on it (ctx_enter) */
};

/* MPI_Init_thread (MPI_THREAD_MULTIPLE) unless MPI runs already; *we_did 1 when it started it here.
 * DT_ERR_MPI naming the fix when MPI was finalized (by dtrain: it cannot start twice) or is not
 * running and cfg->init_mpi is 0. */
dt_status ctx_mpi_init(const dt_config *cfg, int *we_did);
/* MPI_Finalize of the MPI that ctx_mpi_init started, remembered for its message. */
int ctx_mpi_finalize(void);
/* *world = a duplicate of MPI_COMM_WORLD, made within timeout_s (0: no limit; past it the job is
 * aborted naming the likely causes, collectives/comm_dup.h). */
dt_status ctx_world_dup(double timeout_s, MPI_Comm *world);

/* The room for why a rank runs on the CPU (CUDA's reason), for the warning of GPUs assigned but unusable. */
enum { CTX_WHY_LEN = 256 };

/* ctx_gpu.c. Selects and activates the GPU, the rank being the index-th of the size ranks of its
 * node that see the same GPUs; on the CPU just records it (why, wn bytes: the reason --device auto
 * found no GPU, or ""). *chosen says whether it was decided: early (before MPI_Init, by the
 * launcher's node-wide local rank), more ranks than visible GPUs is left to after MPI_Init. */
dt_status ctx_select_device(dt_ctx *c, int index, int size, int early, char *bus_id, size_t n, char *why, size_t wn,
                            int *chosen);
/* ctx_gpu.c. Step 4 of dt_init, after MPI: this rank's GPU, one per local rank (or shared under
 * --gpu-comm mpi), and c->pl.gpu; bus_id (bus_len bytes) its PCI bus id, cpu_why (CTX_WHY_LEN)
 * why the CPU. Collective over c->local. */
dt_status ctx_place_gpu(dt_ctx *c, const topo_mpi *m, int device_chosen, char *bus_id, size_t bus_len, char *cpu_why);

#endif
