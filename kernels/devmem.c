/*
 * devmem.c - see devmem.h.
 */
#include "kernels/devmem.h"
#include "kernels/backend.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static dt_status copy(int cuda, void *dst, const void *src, size_t bytes, int to_device)
{
    if (!bytes) return DT_OK;
    if (!cuda) {
        memcpy(dst, src, bytes);
        return DT_OK;
    }
#ifdef DTRAIN_HAVE_CUDA
    cudaError_t e = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return status_set_error(DT_ERR_DEVICE, "copying %zu bytes %s the GPU failed: %s", bytes,
                                to_device ? "to" : "from", cudaGetErrorString(e));
    return DT_OK;
#else
    (void)to_device;
    return status_set_error(DT_ERR_UNSUPPORTED, "a GPU copy in a build without CUDA");
#endif
}

int devmem_is_device(const void *p) { return backend_is_device_ptr(p); }

dt_status devmem_to_device(int cuda, void *dst, const void *src, size_t bytes)
{
    return copy(cuda, dst, src, bytes, 1);
}
dt_status devmem_to_host(int cuda, void *dst, const void *src, size_t bytes) { return copy(cuda, dst, src, bytes, 0); }

dt_status devmem_host_alloc(int pinned, size_t bytes, const char *what, void **out)
{
    *out = NULL;
    const size_t n = bytes ? bytes : 1;
#ifdef DTRAIN_HAVE_CUDA
    if (pinned) {
        cudaError_t e = cudaHostAlloc(out, n, cudaHostAllocPortable);
        if (e == cudaSuccess) return DT_OK;
        *out = NULL;
        cudaGetLastError();
        return status_set_error(DT_ERR_NOMEM,
                                "cannot pin %.1f MiB of host memory for %s (%s): raise the locked-memory "
                                "limit (ulimit -l) or use a smaller --batch",
                                (double)n / 1048576.0, what, cudaGetErrorString(e));
    }
#else
    (void)pinned;
#endif
    if (!(*out = malloc(n)))
        return status_set_error(DT_ERR_NOMEM, "out of host memory for %s (%.1f MiB): use a smaller --batch", what,
                                (double)n / 1048576.0);
    return DT_OK;
}

void devmem_host_free(int pinned, void *p)
{
    if (!p) return;
#ifdef DTRAIN_HAVE_CUDA
    if (pinned) {
        cudaFreeHost(p);
        return;
    }
#else
    (void)pinned;
#endif
    free(p);
}
