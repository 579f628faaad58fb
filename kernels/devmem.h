/*
 * devmem.h - copies of caller-owned buffers that may be host or CUDA memory, and pinned host
 * memory for the loader. Without CUDA in the build only host memory exists (cuda must be 0).
 * Models allocate and copy through their backend (kernels/backend.h) instead.
 */
#ifndef DT_KERNELS_DEVMEM_H
#define DT_KERNELS_DEVMEM_H

#include "dtrain.h"

#include <stddef.h>

/* Synchronous copies between host and the CUDA device (plain memcpy when cuda is 0), for callers
 * that hold a pointer rather than a model (checkpoints, replica checks); a model's memory goes
 * through its backend (kernels/backend.h). */
dt_status devmem_to_device(int cuda, void *dst, const void *src, size_t bytes);
dt_status devmem_to_host(int cuda, void *dst, const void *src, size_t bytes);

/* 1 when p points into memory of the CUDA device (cudaMalloc'd or managed), so that a caller's
 * buffer of either kind is copied the right way without a flag to get wrong; 0 for host memory
 * (pageable or pinned), NULL, when the CUDA runtime finds no device, and in a build without CUDA
 * (backend_is_device_ptr). */
int devmem_is_device(const void *p);

/* Host memory, page-locked (cudaHostAlloc) when pinned is 1 so that copies to the GPU run
 * asynchronously at full speed; plain malloc when 0 or in a build without CUDA. Not zeroed.
 * Free with devmem_host_free(pinned, p) with the same pinned. */
dt_status devmem_host_alloc(int pinned, size_t bytes, const char *what, void **out);
void devmem_host_free(int pinned, void *p);

#endif
