/*
 * backend.c - picking a backend by memory kind (kernels/backend.h), for the buffer utilities and
 * the reducer, which are handed a pointer and a dt_memory rather than a model.
 */
#include "kernels/backend.h"
#include "base/status.h"

dt_status backend_for_memory(dt_memory mem, backend **out)
{
    *out = NULL;
    if (mem == DT_MEMORY_HOST) {
        *out = backend_cpu();
        return DT_OK;
    }
    if (mem == DT_MEMORY_DEVICE) return backend_cuda(out);
    return status_set_error(DT_ERR_INVALID_ARG, "memory kind %d must be DT_MEMORY_HOST or DT_MEMORY_DEVICE", (int)mem);
}
