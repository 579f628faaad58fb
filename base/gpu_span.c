/*
 * gpu_span.c - the slot pool and clock conversion of the GPU spans (gpu_span.h). A free list
 * makes begin O(1); the CUDA side walks the PENDING slots when it resolves.
 */
#include "base/gpu_span.h"
#include "base/trace.h"

#include <string.h>

_Static_assert(GPU_SPAN_NAME_LEN == TRACE_NAME_LEN, "a GPU span's name is a trace event's");

void gpu_span_pool_init(gpu_span_pool *p)
{
    memset(p, 0, sizeof *p);
    for (int t = 0; t < GPU_SPAN_TRACKS; t++) p->open[t] = -1;
    /* Lowest index on top, so slots are used in order (easier to read in a debugger). */
    for (int i = 0; i < GPU_SPAN_POOL; i++) p->free_list[i] = GPU_SPAN_POOL - 1 - i;
    p->nfree = GPU_SPAN_POOL;
}

void gpu_span_release(gpu_span_pool *p, int i)
{
    if (i < 0 || i >= GPU_SPAN_POOL || p->slot[i].state == GPU_SLOT_FREE) return;
    for (int t = 0; t < GPU_SPAN_TRACKS; t++)
        if (p->open[t] == i) p->open[t] = -1;
    p->slot[i].state = GPU_SLOT_FREE;
    p->free_list[p->nfree++] = i;
}

int gpu_span_begin(gpu_span_pool *p, int track, int cat, const char *name, int64_t arg, int64_t arg2)
{
    if (track < 0 || track >= GPU_SPAN_TRACKS) return -1;
    if (p->open[track] >= 0) gpu_span_release(p, p->open[track]);
    if (!p->nfree) {
        p->dropped++;
        return -1;
    }
    const int i = p->free_list[--p->nfree];
    gpu_span_slot *s = &p->slot[i];
    trace_name_copy(s->name, name);
    s->arg = arg;
    s->arg2 = arg2;
    s->track = (uint8_t)track;
    s->cat = (uint8_t)cat;
    s->state = GPU_SLOT_OPEN;
    p->open[track] = i;
    return i;
}

int gpu_span_end(gpu_span_pool *p, int track)
{
    if (track < 0 || track >= GPU_SPAN_TRACKS || p->open[track] < 0) return -1;
    const int i = p->open[track];
    p->open[track] = -1;
    p->slot[i].state = GPU_SLOT_PENDING;
    return i;
}

uint64_t gpu_span_host_ns(uint64_t ref_host_ns, float elapsed_ms)
{
    const double ns = (double)elapsed_ms * 1e6 + 0.5;
    /* NaN, a negative time, or one a uint64_t cannot hold (infinity): converting those is
     * undefined behaviour, and none is a real event's time. */
    if (!(elapsed_ms > 0.0f) || !(ns < 18446744073709551616.0)) return ref_host_ns;
    return ref_host_ns + (uint64_t)ns;
}

void gpu_span_push(void *tr, const gpu_span_slot *s, uint64_t t0, uint64_t t1)
{
    trace_rec_add(trace_active(tr), s->name, (trace_cat)s->cat, TRACE_TRACK_GPU + s->track, t0, t1, s->arg, s->arg2);
}

void gpu_span_drops(void *tr, uint64_t n)
{
    trace_rec *r = tr;
    if (r && n) atomic_fetch_add(&r->dropped, n);
}

uint64_t gpu_span_now_ns(void) { return trace_now_ns(); }
