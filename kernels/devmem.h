/*
 * devmem.h - memory of the model's device: host memory for CPU models, device memory for CUDA
 * models, behind one small interface so model.c keeps one code path. Without CUDA in the build
 * only host memory exists (cuda must be 0).
 */
#ifndef DT_KERNELS_DEVMEM_H
#define DT_KERNELS_DEVMEM_H

#include "dtrain.h"

#include <stddef.h>

/* bytes of zeroed memory (host when cuda is 0) into *out. Out of memory is DT_ERR_NOMEM naming
 * `what`, the bytes asked for and, on a GPU, the bytes free and in total, and the fix. */
dt_status devmem_alloc(int cuda, size_t bytes, const char *what, void **out);
void devmem_free(int cuda, void *p);
/* The device's free and total bytes now (cudaMemGetInfo); 0 and 0 when cuda is 0 or it fails. */
void devmem_info(int cuda, size_t *free_bytes, size_t *total_bytes);
/* Copies between host and the device (plain memcpy when cuda is 0); synchronous. */
dt_status devmem_to_device(int cuda, void *dst, const void *src, size_t bytes);
dt_status devmem_to_host(int cuda, void *dst, const void *src, size_t bytes);
/* Host to device on the CUDA ops' stream, asynchronous to the host when src is pinned (a plain
 * copy when cuda is 0). src must stay unchanged until that stream has passed the copy. */
dt_status devmem_to_device_async(int cuda, void *dst, const void *src, size_t bytes);

/* 1 when p points into memory of the CUDA device (cudaMalloc'd or managed), so that a caller's
 * buffer of either kind is copied the right way without a flag to get wrong; 0 for host memory
 * (pageable or pinned), NULL, when the CUDA runtime finds no device, and in a build without CUDA. */
int devmem_is_device(const void *p);

/* Host memory, page-locked (cudaHostAlloc) when pinned is 1 so that copies to the GPU run
 * asynchronously at full speed; plain malloc when 0 or in a build without CUDA. Not zeroed.
 * Free with devmem_host_free(pinned, p) with the same pinned. */
dt_status devmem_host_alloc(int pinned, size_t bytes, const char *what, void **out);
void devmem_host_free(int pinned, void *p);

#endif
