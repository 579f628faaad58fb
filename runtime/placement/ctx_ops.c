/*
 * ctx_ops.c - what a made context does: its collectives (dt_allreduce, dt_broadcast, dt_barrier,
 * dt_gather_placement, each under the one-thread mark of ctx_enter), the placement it answers with,
 * and the accessors the other layers reach it through (collectives/ctx_comm.h). Making and
 * releasing it is ctx.c's.
 */
#include "runtime/placement/ctx_impl.h"
#include "collectives/rank_verdict.h"
#include "collectives/roll_peers.h"
#include "kernels/backend.h"
#include "base/status.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>

dt_status dt_get_placement(const dt_ctx *c, dt_placement *out)
{
    if (!c || !out) return status_set_error(DT_ERR_INVALID_ARG, "dt_get_placement needs a context and an output");
    *out = c->pl;
    return DT_OK;
}

int dt_rank(const dt_ctx *c) { return c ? c->pl.rank : -1; }
int dt_world_size(const dt_ctx *c) { return c ? c->pl.world_size : -1; }
int dt_local_rank(const dt_ctx *c) { return c ? c->pl.local_rank : -1; }

struct roll_board *ctx_board(const dt_ctx *c) { return c ? c->board : NULL; }

void ctx_busy_beat(void *arg)
{
    const dt_ctx *c = arg;
    if (!c || !c->board) return;
    const double quarter = c->cfg.timeout_s / 4;
    roll_board_busy(c->board, quarter < 1.0 ? quarter : 1.0);
}

const char *ctx_rank_node(const dt_ctx *c, int rank)
{
    if (!c || !c->rank_node || rank < 0 || rank >= c->pl.world_size) return NULL;
    return dt_node_name(c, c->rank_node[rank]);
}

const char *dt_node_name(const dt_ctx *c, int i)
{
    if (!c || i < 0 || i >= c->num_node_names) return NULL;
    return c->node_names[i];
}

/* The start of each public collective fn: a NULL context is refused by name (ctx_enter would let
 * it through as nothing to mark), then ctx_enter's one-thread mark, which ctx_leave clears when
 * this returned DT_OK. */
static dt_status enter_call(const dt_ctx *c, const char *fn)
{
    if (!c) return status_set_error(DT_ERR_INVALID_ARG, "%s needs a context", fn);
    return ctx_enter(c, fn);
}

static dt_status gather_placement(const dt_ctx *c, dt_placement *all);

dt_status dt_gather_placement(const dt_ctx *c, dt_placement *all)
{
    dt_status s = enter_call(c, "dt_gather_placement");
    if (s) return s;
    s = gather_placement(c, all);
    ctx_leave(c);
    return s;
}

static dt_status gather_placement(const dt_ctx *c, dt_placement *all)
{
    /* Rank 0 without an array has nowhere to put the placements: the ranks' watched verdict comes
     * first, so every rank learns it and none enters MPI_Gather (no scratch array on rank 0 that
     * could fail to allocate and leave the others waiting there). The verdict is also the gather's
     * watched start: a rank that never comes is named, as in every collective, rather than waited
     * for in MPI_Gather. */
    const dt_status own = c->pl.rank == 0 && !all
                              ? status_set_error(DT_ERR_INVALID_ARG, "dt_gather_placement: all is NULL on rank 0: "
                                                                     "pass an array of dt_world_size() placements "
                                                                     "there")
                              : DT_OK;
    const dt_status s = rank_verdict_status(c, own, "dt_gather_placement", ", so nothing was gathered");
    if (s) return s;
    if (MPI_Gather(&c->pl, sizeof c->pl, MPI_BYTE, all, sizeof c->pl, MPI_BYTE, 0, c->world) != MPI_SUCCESS)
        return status_set_error(DT_ERR_MPI, "MPI_Gather of placements failed");
    return DT_OK;
}

const char *dt_backend_name(const dt_ctx *c) { return c && c->coll ? c->coll->ops->name : "none"; }

/* The backend for buf: on a GPU context, host memory goes through MPI and device memory through
 * the device backend (NCCL); on the CPU there is one backend. */
static coll *coll_for(const dt_ctx *c, const void *buf)
{
    return c->coll_host && !backend_is_device_ptr(buf) ? c->coll_host : c->coll;
}

dt_status dt_allreduce(dt_ctx *c, void *buf, size_t count, dt_dtype t, dt_redop op)
{
    dt_status s = enter_call(c, "dt_allreduce");
    if (s) return s;
    coll *k = coll_for(c, buf);
    s = k->ops->allreduce(k, buf, count, t, op);
    ctx_leave(c);
    return s;
}

dt_status dt_broadcast(dt_ctx *c, void *buf, size_t count, dt_dtype t, int root)
{
    dt_status s = enter_call(c, "dt_broadcast");
    if (s) return s;
    coll *k = coll_for(c, buf);
    s = k->ops->broadcast(k, buf, count, t, root);
    ctx_leave(c);
    return s;
}

dt_status dt_barrier(dt_ctx *c)
{
    dt_status s = enter_call(c, "dt_barrier");
    if (s) return s;
    /* The MPI backend's barrier, also on a GPU context: it has the watchdog's deadline, where
     * NCCL's backend would wait in a plain MPI_Barrier. */
    coll *k = ctx_host_coll(c);
    s = k->ops->barrier(k);
    ctx_leave(c);
    return s;
}

MPI_Comm ctx_world_comm(const dt_ctx *c) { return c->world; }
coll *ctx_device_coll(const dt_ctx *c) { return c && c->coll && c->coll->device_buffers ? c->coll : NULL; }
coll *ctx_host_coll(const dt_ctx *c) { return !c ? NULL : c->coll_host ? c->coll_host : c->coll; }
double ctx_timeout(const dt_ctx *c) { return c->cfg.timeout_s; }
const dt_config *ctx_config(const dt_ctx *c) { return &c->cfg; }
trace_rec *ctx_trace(const dt_ctx *c)
{
    return c ? atomic_load_explicit(&((dt_ctx *)c)->trace, memory_order_acquire) : NULL;
}
void ctx_set_trace(dt_ctx *c, trace_rec *r) { atomic_store_explicit(&c->trace, r, memory_order_release); }
