/*
 * device_info.h - device discovery: how many CUDA devices this process sees (and why none), making
 * one of them current, and the CUDA runtime and driver versions. In the manner of ggml's device
 * registry (ggml_backend_reg / ggml_backend_dev_i), one interface with one implementation per build,
 * chosen by the build rather than by #ifdef in the callers: kernels/cuda/device_info.c in a CUDA
 * build, kernels/cpu/device_info_none.c in a CPU-only one (cmake/sources.cmake). So runtime/ asks
 * the same questions in both builds and reads the answer.
 */
#ifndef DT_KERNELS_DEVICE_INFO_H
#define DT_KERNELS_DEVICE_INFO_H

#include "dtrain.h"

#include <stddef.h>

/* 1 when this build has CUDA (the CUDA implementation is linked), 0 in a CPU-only build. A build
 * question, not a hardware one: a CUDA build on a machine without a GPU answers 1. */
int device_info_cuda_built(void);

/* How many CUDA devices this process can see; 0 when none, and then why (n bytes; the CUDA error,
 * a hint at CUDA_VISIBLE_DEVICES, or that the build has no CUDA). Never fails hard: a missing
 * driver is 0 devices, and the CUDA error it leaves is cleared. */
int device_info_count(char *why, size_t n);

/* Makes visible device `ordinal` current for this thread (cudaSetDevice) and writes its PCI bus id
 * as CUDA prints it ("0000:3B:00.0") into bus_id (n bytes). DT_ERR_DEVICE naming the CUDA error and
 * the fix when CUDA refuses; DT_ERR_UNSUPPORTED, with bus_id "", in a build without CUDA. */
dt_status device_info_select(int ordinal, char *bus_id, size_t n);

/* The CUDA runtime and driver versions as text, "CUDA 13.0 (driver 12.8)" or "CUDA 13.0 (no
 * driver)", into out (n bytes); "-" in a build without CUDA. */
void device_info_cuda_version(char *out, size_t n);

#endif
