/*
 * device_info.c (CUDA) - device discovery through the CUDA runtime, see kernels/device_info.h.
 * Plain C with cuda_runtime.h: nothing here launches a kernel. Built only when CUDA is (the
 * CPU-only build takes kernels/cpu/device_info_none.c instead).
 */
#include "kernels/device_info.h"
#include "base/status.h"

#include <cuda_runtime.h>
#include <stdio.h>

int device_info_cuda_built(void) { return 1; }

int device_info_count(char *why, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    /* Without a driver this is cudaErrorInsufficientDriver (35), not cudaErrorNoDevice (100):
     * both mean there is no GPU to use. */
    if (e != cudaSuccess) {
        snprintf(why, n, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (count == 0) snprintf(why, n, "CUDA reports 0 devices (CUDA_VISIBLE_DEVICES hides them?)");
    return count;
}

dt_status device_info_select(int ordinal, char *bus_id, size_t n)
{
    if (n) bus_id[0] = '\0';
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess)
        return status_set_error(DT_ERR_DEVICE,
                                "cudaSetDevice(%d) failed: %s. Fix: check nvidia-smi for a "
                                "GPU in a bad state or in exclusive mode held by another process",
                                ordinal, cudaGetErrorString(e));
    e = cudaDeviceGetPCIBusId(bus_id, (int)n, ordinal);
    if (e != cudaSuccess)
        return status_set_error(DT_ERR_DEVICE, "cudaDeviceGetPCIBusId(%d) failed: %s", ordinal, cudaGetErrorString(e));
    return DT_OK;
}

void device_info_cuda_version(char *out, size_t n)
{
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    cudaGetLastError();
    if (drv)
        snprintf(out, n, "CUDA %d.%d (driver %d.%d)", rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10);
    else
        snprintf(out, n, "CUDA %d.%d (no driver)", rt / 1000, (rt % 1000) / 10);
}
