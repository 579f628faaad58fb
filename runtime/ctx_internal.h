/*
 * ctx_internal.h - what other runtime modules may see of a dt_ctx.
 */
#ifndef DT_RUNTIME_CTX_INTERNAL_H
#define DT_RUNTIME_CTX_INTERNAL_H

#include "dtrain.h"

#include <mpi.h>

MPI_Comm ctx_world_comm(const dt_ctx *c);
double ctx_timeout(const dt_ctx *c);

#endif
