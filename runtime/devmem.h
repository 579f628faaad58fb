/*
 * devmem.h - memory of the model's device: host memory for CPU models, device memory for CUDA
 * models, behind one small interface so model.c keeps one code path. Without CUDA in the build
 * only host memory exists (cuda must be 0).
 */
#ifndef DT_RUNTIME_DEVMEM_H
#define DT_RUNTIME_DEVMEM_H

#include "dtrain.h"

#include <stddef.h>

/* bytes of zeroed memory (host when cuda is 0) into *out. Out of memory is DT_ERR_NOMEM naming
 * `what`, the bytes asked for and, on a GPU, the bytes free and in total, and the fix. */
dt_status devmem_alloc(int cuda, size_t bytes, const char *what, void **out);
void devmem_free(int cuda, void *p);
/* Copies between host and the device (plain memcpy when cuda is 0); synchronous. */
dt_status devmem_to_device(int cuda, void *dst, const void *src, size_t bytes);
dt_status devmem_to_host(int cuda, void *dst, const void *src, size_t bytes);

#endif
