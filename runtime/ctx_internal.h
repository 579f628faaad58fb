/*
 * ctx_internal.h - what other runtime modules may see of a dt_ctx.
 */
#ifndef DT_RUNTIME_CTX_INTERNAL_H
#define DT_RUNTIME_CTX_INTERNAL_H

#include "dtrain.h"

#include <mpi.h>

MPI_Comm ctx_world_comm(const dt_ctx *c);
double ctx_timeout(const dt_ctx *c);
/* The backend of device buffers on a GPU context (NCCL, or MPI staging through the host in a
 * build without NCCL); NULL on the CPU. */
struct coll;
struct coll *ctx_device_coll(const dt_ctx *c);

#endif
