/*
 * gpu_span.h - the bookkeeping behind the GPU spans of a trace (kernels/cuda/trace_gpu.cu), kept
 * free of CUDA so that a CPU test checks it: a fixed pool of span slots, each standing for one
 * pair of CUDA events (begin, end) that the CUDA side owns at the same index, and the conversion
 * of an event's time to the host clock of every other span.
 *
 * A slot goes FREE -> OPEN (begin recorded, gpu_span_begin) -> PENDING (end recorded,
 * gpu_span_end) -> FREE (its times read and pushed into the host recorder, gpu_span_release).
 * One span is open per track at a time (the layers of a pass follow each other; so do the
 * buckets of the NCCL stream). A full pool never waits: the span is not taken and counted as a
 * drop. One thread at a time, like the CUDA backend it serves.
 *
 * The CUDA side is C++, where base/trace.h (C11 atomics) does not compile: what it needs of the
 * recorder goes through gpu_span_push, gpu_span_drops and gpu_span_now_ns, with the recorder as a
 * void *.
 */
#ifndef DT_BASE_GPU_SPAN_H
#define DT_BASE_GPU_SPAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_SPAN_NAME_LEN 28 /* TRACE_NAME_LEN (asserted in gpu_span.c) */

/* Pairs of events; a step resolves what it recorded, so this bounds the spans of one step that
 * can be pending at once (a layer pass takes 2 per layer, a bucket 1). */
#define GPU_SPAN_POOL 1024

/* The GPU tracks, 0-based here; TRACE_TRACK_GPU + this in the trace. */
enum { GPU_SPAN_COMPUTE = 0, GPU_SPAN_NCCL = 1, GPU_SPAN_TRACKS = 2 };

enum { GPU_SLOT_FREE = 0, GPU_SLOT_OPEN, GPU_SLOT_PENDING };

typedef struct gpu_span_slot {
    char name[GPU_SPAN_NAME_LEN];
    int64_t arg, arg2;
    uint8_t track, cat, state;
} gpu_span_slot;

typedef struct gpu_span_pool {
    gpu_span_slot slot[GPU_SPAN_POOL];
    int open[GPU_SPAN_TRACKS]; /* the open slot of each track, -1 when none */
    int free_list[GPU_SPAN_POOL];
    int nfree;
    uint64_t dropped; /* spans not taken because the pool was full */
} gpu_span_pool;

/* Every slot free, no span open. */
void gpu_span_pool_init(gpu_span_pool *p);
/* Takes a slot for a span on track (GPU_SPAN_*) named name (cut as trace_name_copy cuts) and
 * makes it the track's open span: its index, whose begin event the caller then records. -1 when
 * the pool is full (counted in dropped) or track is out of range. A span still open on the track
 * (an end that never came) is released first, uncounted. */
int gpu_span_begin(gpu_span_pool *p, int track, int cat, const char *name, int64_t arg, int64_t arg2);
/* Closes the track's open span: its index, whose end event the caller then records and later
 * reads; -1 when none is open (its begin was dropped). */
int gpu_span_end(gpu_span_pool *p, int track);
/* Gives slot i back to the pool (after its times were read, or its events failed). */
void gpu_span_release(gpu_span_pool *p, int i);

/* The host time of an event elapsed_ms (cudaEventElapsedTime) after the reference event, whose
 * host time is ref_host_ns; an event before the reference (it cannot be, but a float rounds), a
 * NaN and a time past 2^64 ns land on the reference. */
uint64_t gpu_span_host_ns(uint64_t ref_host_ns, float elapsed_ms);

/* Slot s's span [t0, t1] into the recorder tr (a struct trace_rec *, NULL or paused: nothing) on
 * track TRACE_TRACK_GPU + s->track; n spans added to tr's drop count; the recorder's clock. */
void gpu_span_push(void *tr, const gpu_span_slot *s, uint64_t t0, uint64_t t1);
void gpu_span_drops(void *tr, uint64_t n);
uint64_t gpu_span_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif
