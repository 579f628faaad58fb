/*
 * trace_gpu.h - GPU spans on any stream, for the CUDA parts outside the backend table (the NCCL
 * backend, collectives/coll_nccl.c); the backend's own compute-stream spans go through its
 * trace_mark / trace_flush entries (kernels/backend.h). Plain C, no CUDA types: a stream is a
 * cudaStream_t as void * (NULL: the default stream). Defined by kernels/cuda/trace_gpu.cu, so
 * only CUDA builds have it. One thread at a time, like the backend.
 */
#ifndef DT_KERNELS_CUDA_TRACE_GPU_H
#define DT_KERNELS_CUDA_TRACE_GPU_H

#include "dtrain.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Begins a span on track (a GPU_SPAN_* of base/gpu_span.h) by recording an event on stream; ends
 * the track's open span the same way. The first call of the process records the clock reference
 * (one wait for the device). A full pool drops the span (counted when flushed). DT_ERR_DEVICE
 * naming the CUDA error when an event call fails. */
dt_status gpu_trace_begin(void *stream, int track, int cat, const char *name, int64_t arg, int64_t arg2);
dt_status gpu_trace_end(void *stream, int track);
/* The spans of every track whose end the device has passed into the recorder tr (a struct
 * trace_rec *), on tracks TRACE_TRACK_GPU + track; wait 1: every pending one, waiting for it. */
dt_status gpu_trace_flush(void *tr, int wait);

#ifdef __cplusplus
}
#endif

#endif
