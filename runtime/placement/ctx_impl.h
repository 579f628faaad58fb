/*
 * ctx_impl.h - what a context holds, shared by the files that make and use it: ctx.c (dt_init,
 * dt_finalize and the context's lifetime rules) and ctx_ops.c (its collectives and accessors).
 * Nothing outside runtime/placement/ includes it: other layers use collectives/ctx_comm.h.
 */
#ifndef DT_RUNTIME_PLACEMENT_CTX_IMPL_H
#define DT_RUNTIME_PLACEMENT_CTX_IMPL_H

#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "base/trace.h"
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

#endif
