/*
 * trace.c - the lock-free span recorder (trace.h). A writer claims a slot with one atomic
 * increment, copies its event in and marks the slot ready; a claim past the capacity only counts
 * a drop. Nothing here blocks or allocates after trace_rec_create, so the training thread, the
 * communication thread and the loader threads record side by side without slowing each other.
 */
#include "base/trace.h"

#include <stdlib.h>
#include <string.h>

static const char *const cat_names[TRACE_CAT_COUNT] = {"step", "forward",    "backward", "comm", "optimizer",
                                                       "data", "checkpoint", "eval",     "user"};

const char *trace_cat_name(int cat) { return cat >= 0 && cat < TRACE_CAT_COUNT ? cat_names[cat] : "?"; }

void trace_name_copy(char dst[TRACE_NAME_LEN], const char *src)
{
    size_t n = 0;
    for (; src && src[n] && n < TRACE_NAME_LEN - 1; n++) dst[n] = src[n];
    /* Cut inside a UTF-8 character (src[n] a continuation byte): drop its first bytes too, or the
     * file would not be the UTF-8 that JSON is, and Perfetto or a JSON reader refuses it. */
    if (src && src[n])
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80) n--;
    dst[n] = '\0';
}

trace_rec *trace_rec_create(size_t cap)
{
    if (cap < 1) return NULL;
    trace_rec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    /* calloc: every slot starts not ready, and the pages are touched only when used. */
    r->ev = calloc(cap, sizeof *r->ev);
    if (!r->ev) {
        free(r);
        return NULL;
    }
    r->cap = cap;
    r->step_lo = 1;
    r->step_hi = -1; /* no upper end */
    atomic_store(&r->on, 1);
    return r;
}

void trace_rec_free(trace_rec *r)
{
    if (!r) return;
    free(r->ev);
    free(r);
}

void trace_rec_set_steps(trace_rec *r, long lo, long hi)
{
    r->step_lo = lo;
    r->step_hi = hi;
    /* The range applies from now on: to the step marked last, or before the first mark as if at
     * step 1 (a range from the beginning records from the start). */
    const long now = r->cur_step > 0 ? r->cur_step : 1;
    if (!atomic_load(&r->closed)) atomic_store(&r->on, now >= lo && (hi < 0 || now <= hi));
}

void trace_rec_step(trace_rec *r, long step)
{
    if (!r || atomic_load(&r->closed)) return;
    atomic_store_explicit(&r->on, step >= r->step_lo && (r->step_hi < 0 || step <= r->step_hi), memory_order_relaxed);
}

void trace_rec_close(trace_rec *r)
{
    atomic_store(&r->closed, 1);
    atomic_store(&r->on, 0);
}

void trace_rec_add(trace_rec *r, const char *name, trace_cat cat, int track, uint64_t t0, uint64_t t1, int64_t arg,
                   int64_t arg2)
{
    if (!trace_active(r)) return;
    const size_t i = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
    if (i >= r->cap) {
        atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
        return;
    }
    trace_event *e = &r->ev[i];
    e->t0 = t0;
    e->t1 = t1 < t0 ? t0 : t1;
    e->arg = arg;
    e->arg2 = arg2;
    e->track = (uint16_t)(track < 0 ? 0 : track > 65535 ? 65535 : track);
    e->cat = (uint8_t)cat;
    trace_name_copy(e->name, name);
    /* Release: a reader that sees ready sees the fields above. */
    atomic_store_explicit(&e->ready, 1, memory_order_release);
}

size_t trace_rec_count(const trace_rec *r)
{
    size_t n = atomic_load(&((trace_rec *)r)->next);
    if (n > r->cap) n = r->cap;
    size_t done = 0;
    for (size_t i = 0; i < n; i++) done += atomic_load_explicit(&((trace_rec *)r)->ev[i].ready, memory_order_acquire);
    return done;
}

uint64_t trace_rec_dropped(const trace_rec *r) { return atomic_load(&((trace_rec *)r)->dropped); }

static int by_track_then_begin(const void *a, const void *b)
{
    const trace_event *x = a, *y = b;
    if (x->track != y->track) return x->track < y->track ? -1 : 1;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    /* An enclosing span (the longer one) before the spans inside it. */
    return x->t1 > y->t1 ? -1 : x->t1 < y->t1;
}

size_t trace_rec_snapshot(const trace_rec *r, trace_event *out, size_t room)
{
    size_t n = atomic_load(&((trace_rec *)r)->next);
    if (n > r->cap) n = r->cap;
    size_t k = 0;
    /* room, not a fresh count: a writer that passed trace_active before the close may complete its
     * slot after the caller counted, and out has no space for it. */
    for (size_t i = 0; i < n && k < room; i++)
        if (atomic_load_explicit(&((trace_rec *)r)->ev[i].ready, memory_order_acquire))
            memcpy(&out[k++], &r->ev[i], sizeof *out);
    qsort(out, k, sizeof *out, by_track_then_begin);
    return k;
}

void trace_tracks_used(const trace_event *ev, size_t n, int *loader_tracks, int *gpu_tracks)
{
    *loader_tracks = *gpu_tracks = 0;
    for (size_t i = 0; i < n; i++) {
        const int t = ev[i].track;
        /* A program's own spans (dt_trace_span) name no dtrain track: its track 40 is not loader
         * 38, nor are tracks 2 to 39 loaders when it has none (trace_json_events names it). */
        if (ev[i].cat == TRACE_CAT_USER) continue;
        /* dt_trace_span takes any track up to 65535: one far above the GPU's must not shift the
         * mask past its width (undefined, and on x86 it named "gpu compute" for a user track). */
        if (t >= TRACE_TRACK_GPU) {
            if (t - TRACE_TRACK_GPU < TRACE_GPU_TRACKS_MAX) *gpu_tracks |= 1 << (t - TRACE_TRACK_GPU);
        } else if (t >= TRACE_TRACK_LOADER && t < TRACE_TRACK_COMM_LANE &&
                   t - TRACE_TRACK_LOADER + 1 > *loader_tracks) {
            *loader_tracks = t - TRACE_TRACK_LOADER + 1;
        }
    }
}

int trace_comm_lanes(trace_event *ev, size_t n)
{
    uint64_t end[TRACE_COMM_LANES_MAX];
    int lanes = 0;
    /* The comm track's spans come in order of their begin (trace_rec_snapshot's sort). */
    for (size_t i = 0; i < n; i++) {
        if (ev[i].track != TRACE_TRACK_COMM) continue;
        int lane = 0;
        while (lane < lanes && end[lane] > ev[i].t0) lane++;
        if (lane == lanes) {
            if (lanes < TRACE_COMM_LANES_MAX)
                end[lanes++] = 0; /* a new lane */
            else
                lane = 0; /* more in flight than lanes: the overlap stays on the first */
        }
        if (ev[i].t1 > end[lane]) end[lane] = ev[i].t1;
        if (lane) ev[i].track = (uint16_t)(TRACE_TRACK_COMM_LANE + lane);
    }
    return lanes > 1 ? lanes - 1 : 0;
}
