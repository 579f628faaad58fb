/*
 * coll_nccl_none.c - the NCCL backend's entry points in a build without NCCL: coll_nccl_create
 * refuses with the fix, and the build reports that it has no NCCL. cmake/sources.cmake picks this
 * file or coll_nccl.c, so no code needs #ifdef DTRAIN_HAVE_NCCL.
 */
#include "collectives/coll.h"
#include "base/status.h"

#include <stdio.h>

dt_status coll_nccl_create(MPI_Comm comm, double timeout_s, coll **out)
{
    (void)comm;
    (void)timeout_s;
    *out = NULL;
    return status_set_error(DT_ERR_UNSUPPORTED, "this dtrain was built without NCCL; rebuild with the CUDA "
                                                "toolkit and NCCL installed (cmake -DDTRAIN_CUDA=ON)");
}

int coll_nccl_built(void) { return 0; }

void coll_nccl_version(char *out, size_t n) { snprintf(out, n, "-"); }
