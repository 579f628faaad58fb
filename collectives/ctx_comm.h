/*
 * ctx_comm.h - the communication view of a dt_ctx: its world communicator, its collective timeout
 * and its device backend.
 *
 * dt_ctx is defined above this layer (runtime/placement/ctx.c implements these accessors); they are
 * declared here so that the reducer and the other users of a context's communicators need nothing
 * from runtime/. The dependency on the implementation is resolved at link time, as a backend's
 * registry is in ggml.
 */
#ifndef DT_COLLECTIVES_CTX_COMM_H
#define DT_COLLECTIVES_CTX_COMM_H

#include "dtrain.h"

#include <mpi.h>

MPI_Comm ctx_world_comm(const dt_ctx *c);
double ctx_timeout(const dt_ctx *c);
/* The backend of device buffers on a GPU context (NCCL, or MPI staging through the host in a
 * build without NCCL); NULL on the CPU. */
struct coll;
struct coll *ctx_device_coll(const dt_ctx *c);

#endif
