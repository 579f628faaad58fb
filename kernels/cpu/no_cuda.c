/*
 * cpu/no_cuda.c - the CUDA entry points of kernels/backend.h in a build without CUDA: there is no
 * GPU backend, so asking for it says how to get one. The build's source list puts this file in
 * place of kernels/cuda/ (cmake/sources.cmake), so no caller needs to know which build it is in.
 */
#include "kernels/backend.h"
#include "base/status.h"

dt_status backend_cuda(backend **out)
{
    *out = NULL;
    return status_set_error(DT_ERR_UNSUPPORTED, "this dtrain was built without CUDA: use --device cpu and host "
                                                "memory, or rebuild with the CUDA toolkit");
}

backend *backend_cuda_if_ready(void) { return NULL; }

const backend_ops *backend_cuda_ops(void) { return NULL; }

int backend_is_device_ptr(const void *p)
{
    (void)p;
    return 0;
}
