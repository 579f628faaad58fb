/*
 * devmem.c - see devmem.h. Device allocations are zeroed (cudaMemset) like calloc, so a fresh
 * model holds the same values on either device.
 */
#include "kernels/devmem.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#include <cuda_runtime.h>
#endif

dt_status devmem_alloc(int cuda, size_t bytes, const char *what, void **out)
{
    *out = NULL;
    const size_t n = bytes ? bytes : 1;
    if (!cuda) {
        *out = calloc(1, n);
        if (!*out)
            return status_set_error(DT_ERR_NOMEM, "out of host memory for %s (%.1f MiB): use a smaller --batch or model",
                                what, (double)n / 1048576.0);
        return DT_OK;
    }
#ifdef DTRAIN_HAVE_CUDA
    cudaError_t e = cudaMalloc(out, n);
    if (e == cudaSuccess) e = cudaMemset(*out, 0, n);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        if (*out) cudaFree(*out);
        *out = NULL;
        cudaGetLastError(); /* clear the sticky-free error state of an OOM */
        cudaMemGetInfo(&fr, &tot);
        return status_set_error(DT_ERR_NOMEM, "out of GPU memory for %s: asked %.1f MiB, %.1f MiB free of %.1f MiB "
                            "(%s): use a smaller --batch, or --precision bf16 (16-bit activations take half "
                            "the memory)", what,
                            (double)n / 1048576.0, (double)fr / 1048576.0, (double)tot / 1048576.0,
                            cudaGetErrorString(e));
    }
    return DT_OK;
#else
    return status_set_error(DT_ERR_UNSUPPORTED, "GPU memory asked for %s, but this dtrain was built without CUDA", what);
#endif
}

void devmem_free(int cuda, void *p)
{
    if (!p) return;
    if (!cuda) {
        free(p);
        return;
    }
#ifdef DTRAIN_HAVE_CUDA
    cudaFree(p);
#endif
}

void devmem_info(int cuda, size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
#ifdef DTRAIN_HAVE_CUDA
    if (cuda && cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
        cudaGetLastError();
        *free_bytes = *total_bytes = 0;
    }
#else
    (void)cuda;
#endif
}

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
        return status_set_error(DT_ERR_DEVICE, "copying %zu bytes %s the GPU failed: %s", bytes, to_device ? "to" : "from",
                            cudaGetErrorString(e));
    return DT_OK;
#else
    (void)to_device;
    return status_set_error(DT_ERR_UNSUPPORTED, "a GPU copy in a build without CUDA");
#endif
}

int devmem_is_device(const void *p)
{
#ifdef DTRAIN_HAVE_CUDA
    if (!p) return 0;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* an unregistered host pointer on old runtimes, or no device at all */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#else
    (void)p;
    return 0;
#endif
}

dt_status devmem_to_device(int cuda, void *dst, const void *src, size_t bytes) { return copy(cuda, dst, src, bytes, 1); }
dt_status devmem_to_host(int cuda, void *dst, const void *src, size_t bytes) { return copy(cuda, dst, src, bytes, 0); }

dt_status devmem_to_device_async(int cuda, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return DT_OK;
    if (!cuda) return copy(0, dst, src, bytes, 1);
#ifdef DTRAIN_HAVE_CUDA
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)cuda_ops_stream());
    if (e != cudaSuccess)
        return status_set_error(DT_ERR_DEVICE, "copying %zu bytes to the GPU failed: %s", bytes, cudaGetErrorString(e));
    return DT_OK;
#else
    return status_set_error(DT_ERR_UNSUPPORTED, "a GPU copy in a build without CUDA");
#endif
}

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
        return status_set_error(DT_ERR_NOMEM, "cannot pin %.1f MiB of host memory for %s (%s): raise the locked-memory "
                            "limit (ulimit -l) or use a smaller --batch", (double)n / 1048576.0, what,
                            cudaGetErrorString(e));
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
