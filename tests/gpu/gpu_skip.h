/*
 * gpu_skip.h - the first check of the GPU tests that run whole programs: how many CUDA devices
 * there are, or 0 after printing "SKIP: no CUDA device (why)"; the test then exits 77, which
 * ctest reports as skipped.
 */
#ifndef DT_TESTS_GPU_SKIP_H
#define DT_TESTS_GPU_SKIP_H

#include <cuda_runtime.h>
#include <stdio.h>

static inline int gpu_devices_or_skip(void)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) return n;
    printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
    return 0;
}

#endif
