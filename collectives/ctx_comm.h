/*
 * ctx_comm.h - the communication view of a dt_ctx: its world communicator, its collective timeout,
 * its configuration and its device backend.
 *
 * dt_ctx is defined above this layer (runtime/placement/ctx.c implements these accessors); they are
 * declared here so that the reducer and the other users of a context's communicators need nothing
 * else from runtime/ than the context: these and its public functions (dt_rank, dt_allreduce...,
 * runtime/placement/ctx*.c). The dependency on the implementation is resolved at link time, as a
 * backend's registry is in ggml; build.layers fails a call from collectives/ to anything else above.
 */
#ifndef DT_COLLECTIVES_CTX_COMM_H
#define DT_COLLECTIVES_CTX_COMM_H

#include "dtrain.h"

#include <mpi.h>

MPI_Comm ctx_world_comm(const dt_ctx *c);
double ctx_timeout(const dt_ctx *c);
/* The configuration dt_init was given (owned by c), for the settings a layer below runtime/ acts
 * on: dt_config::comm_thread, dt_config::comm_world1. */
const dt_config *ctx_config(const dt_ctx *c);
/* The backend of device buffers on a GPU context (NCCL, or MPI staging through the host in a
 * build without NCCL); NULL on the CPU. */
struct coll;
struct coll *ctx_device_coll(const dt_ctx *c);
/* The backend of host buffers (MPI: on a GPU context its second communicator, on the CPU the one
 * backend); NULL without a context. */
struct coll *ctx_host_coll(const dt_ctx *c);
/* The context's span recorder (base/trace.h) while dt_trace_start's trace runs, else NULL: the one
 * NULL check every traced spot makes when tracing is off; after dt_trace_write, the same recorder,
 * closed (it records nothing). ctx_set_trace hands it over (owned by c, freed by dt_finalize). c may
 * be NULL (a model without a context). */
struct trace_rec;
struct trace_rec *ctx_trace(const dt_ctx *c);
void ctx_set_trace(dt_ctx *c, struct trace_rec *r);
/* The name of the node world rank `rank` runs on (dt_node_name of its node index, learnt in
 * dt_init), for the watchdog's verdicts; NULL when c is NULL or rank is out of range. */
const char *ctx_rank_node(const dt_ctx *c, int rank);
/* The board the watchdogs tell each other their verdicts on (collectives/roll_peers.h); NULL when c
 * is NULL, in a world of 1 or without a timeout. */
struct roll_board;
struct roll_board *ctx_board(const dt_ctx *c);
/* Tells the other ranks that this one is alive and busy with work of its own (roll_board_busy),
 * at most once a second or a quarter of the timeout; arg is the dt_ctx (a ckpt_beat's fn). */
void ctx_busy_beat(void *arg);

/* The objects made on a context that keep a pointer to it (and some its communicators): while one
 * lives, dt_finalize refuses, naming how many of each kind. */
typedef enum ctx_held {
    CTX_HELD_MODEL,
    CTX_HELD_REDUCER,
    CTX_HELD_CKPT_WRITER,
    CTX_HELD_CKPT_READER,
    CTX_HELD_LOADER,
    CTX_HELD_KINDS
} ctx_held;
/* Counts one more (ctx_hold) or one fewer (ctx_unhold) object of that kind alive on c; the maker
 * calls ctx_hold once it stores c, its free ctx_unhold. Nothing for a NULL c. Atomic: a loader may
 * be made or freed on another thread. */
void ctx_hold(const dt_ctx *c, ctx_held kind);
void ctx_unhold(const dt_ctx *c, ctx_held kind);

/* One thread at a time runs collectives on a context: MPI and NCCL pair a rank's collectives with
 * its peers' in the order each rank issues them, so two threads of one rank issuing them at once
 * pair them wrongly, with no error. ctx_enter marks c busy for the calling thread; another thread
 * entering while the mark stands gets DT_ERR_INVALID_ARG naming `what` and the rule, before it has
 * sent anything. Nested entries of one thread (dt_model_step -> dt_allreduce -> the backend) take
 * the mark once. Each DT_OK of ctx_enter is paired with one ctx_leave. A NULL c: DT_OK, nothing.
 * The engine's communication thread runs on communicators of its own and never enters. */
dt_status ctx_enter(const dt_ctx *c, const char *what);
void ctx_leave(const dt_ctx *c);

#endif
