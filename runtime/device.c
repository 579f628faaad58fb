/*
 * device.c - device selection: CPU or a CUDA GPU from the local rank, see device.h.
 */
#include "device.h"
#include "status.h"

#include <stdio.h>
#include <string.h>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

static int device_count_cuda(char *why, size_t n)
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
#else
static int device_count_cuda(char *why, size_t n)
{
    snprintf(why, n, "this dtrain was built without CUDA");
    return 0;
}
#endif

static device_count_fn count_fn = device_count_cuda;

void device_set_count_fn(device_count_fn fn) { count_fn = fn ? fn : device_count_cuda; }

int device_count(char *why, size_t n)
{
    if (n) why[0] = '\0';
    return count_fn(why, n);
}

dt_status device_map(int visible, int local_rank, int local_size, int share, int *ordinal)
{
    if (visible <= 0)
        return dt_set_error(DT_ERR_DEVICE, "no GPU is visible to this process");
    if (local_rank < 0)
        return dt_set_error(DT_ERR_INTERNAL, "device_map called with an unknown local rank");
    if (visible == 1) {
        /* srun --gpus-per-task / --gpu-bind give each task exactly its own GPU. That no two local
         * ranks see the same one is checked after MPI_Init (device_check_unique). */
        *ordinal = 0;
        return DT_OK;
    }
    if (share) {
        *ordinal = local_rank % visible;
        return DT_OK;
    }
    int ranks = local_size > 0 ? local_size : local_rank + 1;
    if (ranks > visible || local_rank >= visible)
        return dt_set_error(DT_ERR_DEVICE,
                            "%d ranks on this node but only %d GPUs are visible (local rank %d): two "
                            "ranks would share one GPU, which NCCL does not support and can hang. Fix: "
                            "start at most %d ranks per node (srun --ntasks-per-node=%d, mpirun "
                            "--map-by ppr:%d:node), make more GPUs visible (CUDA_VISIBLE_DEVICES, "
                            "srun --gres=gpu:N), share GPUs with --gpu-comm mpi (slower), or train on "
                            "the CPU with --device cpu",
                            ranks, visible, local_rank, visible, visible, visible);
    *ordinal = local_rank;
    return DT_OK;
}

dt_status device_resolve(dt_device_kind req, int local_rank, int local_size, int share, dt_device_kind *kind,
                         int *ordinal)
{
    if (req == DT_DEVICE_CPU) {
        *kind = DT_DEVICE_CPU;
        *ordinal = -1;
        return DT_OK;
    }
#ifndef DTRAIN_HAVE_CUDA
    if (req == DT_DEVICE_CUDA)
        return dt_set_error(DT_ERR_UNSUPPORTED,
                            "--device cuda, but this dtrain was built without CUDA. Fix: rebuild with "
                            "the CUDA toolkit installed (cmake -DDTRAIN_CUDA=ON), or use --device cpu");
#endif
    char why[256];
    int visible = device_count(why, sizeof why);
    if (visible <= 0) {
        if (req == DT_DEVICE_CUDA)
            return dt_set_error(DT_ERR_DEVICE,
                                "--device cuda, but no GPU is visible (%s). Fix: check nvidia-smi and "
                                "CUDA_VISIBLE_DEVICES, request GPUs from SLURM (srun --gres=gpu:N), or "
                                "use --device cpu",
                                why);
        *kind = DT_DEVICE_CPU;
        *ordinal = -1;
        return DT_OK;
    }
    dt_status s = device_map(visible, local_rank, local_size, share, ordinal);
    if (s) return s;
    *kind = DT_DEVICE_CUDA;
    return DT_OK;
}

dt_status device_activate(int ordinal, char *bus_id, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess)
        return dt_set_error(DT_ERR_DEVICE, "cudaSetDevice(%d) failed: %s. Fix: check nvidia-smi for a "
                            "GPU in a bad state or in exclusive mode held by another process",
                            ordinal, cudaGetErrorString(e));
    e = cudaDeviceGetPCIBusId(bus_id, (int)n, ordinal);
    if (e != cudaSuccess)
        return dt_set_error(DT_ERR_DEVICE, "cudaDeviceGetPCIBusId(%d) failed: %s", ordinal,
                            cudaGetErrorString(e));
    /* CUDA prints hex digits upper case; sysfs names them lower case. */
    for (char *p = bus_id; *p; p++)
        if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
    return DT_OK;
#else
    (void)ordinal;
    if (n) bus_id[0] = '\0';
    return dt_set_error(DT_ERR_UNSUPPORTED, "this dtrain was built without CUDA");
#endif
}

dt_status device_check_unique(const char *ids, int n, size_t stride)
{
    for (int i = 0; i < n; i++) {
        const char *a = ids + (size_t)i * stride;
        if (!a[0]) continue;
        for (int j = i + 1; j < n; j++)
            if (strncmp(a, ids + (size_t)j * stride, stride) == 0)
                return dt_set_error(DT_ERR_DEVICE,
                                    "local ranks %d and %d both selected GPU %s: two ranks on one GPU "
                                    "is not supported by NCCL (it can hang). Fix: give each task its own "
                                    "GPU (srun --gpus-per-task=1, or distinct CUDA_VISIBLE_DEVICES), start "
                                    "fewer ranks per node, share the GPU with --gpu-comm mpi (slower), or "
                                    "use --device cpu",
                                    i, j, a);
    }
    return DT_OK;
}

void device_plan(const char *list, int local_rank, int local_size, int share, char *out, size_t n)
{
    out[0] = '\0';
    if (!list || !*list) return;
    int count = 1;
    for (const char *p = list; *p; p++) count += *p == ',';
    int ordinal;
    if (device_map(count, local_rank, local_size, share, &ordinal) != DT_OK) {
        snprintf(out, n, "- (%d ranks, %d GPUs)", local_size, count);
        return;
    }
    const char *p = list;
    for (int i = 0; i < ordinal; i++) p = strchr(p, ',') + 1;
    size_t len = strcspn(p, ",");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

void device_cuda_version(char *out, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    cudaGetLastError();
    if (drv)
        snprintf(out, n, "CUDA %d.%d (driver %d.%d)", rt / 1000, (rt % 1000) / 10, drv / 1000,
                 (drv % 1000) / 10);
    else
        snprintf(out, n, "CUDA %d.%d (no driver)", rt / 1000, (rt % 1000) / 10);
#else
    snprintf(out, n, "-");
#endif
}
