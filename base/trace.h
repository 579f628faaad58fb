/*
 * trace.h - the span recorder behind dt_trace_* (include/dtrain/trace.h): a fixed array of events
 * that any thread fills without a lock, for a Chrome / Perfetto trace of a run.
 *
 * The hot path takes one branch when tracing is off (the recorder pointer is NULL, or recording is
 * paused outside --trace-steps) and, when it is on, one atomic increment and a copy into a slot
 * that was allocated up front: it never blocks and never allocates. A full recorder counts what it
 * drops; the count goes into the file's metadata and a warning.
 */
#ifndef DT_BASE_TRACE_H
#define DT_BASE_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Tracks (the "tid" of a Chrome event): the training thread, the communication engine (its thread,
 * or the training thread progressing it inline), then one per loader thread; far above those, the
 * GPU's streams as CUDA events timed them (base/gpu_span.h): TRACE_TRACK_GPU + GPU_SPAN_COMPUTE
 * ("gpu compute") and + GPU_SPAN_NCCL ("gpu nccl"). Loader tracks stay below TRACE_TRACK_GPU. */
enum { TRACE_TRACK_TRAIN = 0, TRACE_TRACK_COMM = 1, TRACE_TRACK_LOADER = 2, TRACE_TRACK_GPU = 1000 };
/* The comm track's extra lanes, "comm 2" to "comm 64" (trace_comm_lanes): buckets in flight at
 * once overlap, and the trace format wants the spans of one track nested. Loader tracks stay below. */
enum { TRACE_TRACK_COMM_LANE = 900, TRACE_COMM_LANES_MAX = 64 };

/* Categories ("cat"); trace_cat_name gives their names. */
typedef enum trace_cat {
    TRACE_CAT_STEP = 0,
    TRACE_CAT_FWD,
    TRACE_CAT_BWD,
    TRACE_CAT_COMM,
    TRACE_CAT_OPTIM,
    TRACE_CAT_DATA,
    TRACE_CAT_CKPT,
    TRACE_CAT_EVAL,
    TRACE_CAT_USER,
    TRACE_CAT_COUNT
} trace_cat;

#define TRACE_NAME_LEN 28 /* a name's bytes, terminator included; longer names are cut (64-byte events) */

typedef struct trace_event {
    uint64_t t0, t1; /* begin and end, ns on this process's monotonic clock */
    int64_t arg;     /* a layer, bucket or step number; bytes for a bucket (see trace_json.c) */
    int64_t arg2;    /* a second figure (a bucket's bytes), -1 when none */
    uint16_t track;
    uint8_t cat;
    _Atomic uint8_t ready; /* 1 once the slot is written: a writer still copying is skipped */
    char name[TRACE_NAME_LEN];
} trace_event;
/* 64 bytes, the size the public header documents (capacity x 64 bytes per rank). */
_Static_assert(sizeof(trace_event) == 64, "trace_event is 64 bytes");

typedef struct trace_rec {
    trace_event *ev;
    size_t cap;
    _Atomic size_t next;      /* slots claimed; past cap every claim is a drop */
    _Atomic uint64_t dropped; /* events that found the recorder full */
    _Atomic int on;           /* 0 outside the recorded steps, and once the trace is being written */
    _Atomic int closed;       /* 1 once written (trace_rec_close): recording never turns on again */
    long step_lo, step_hi;    /* the steps recorded (1-based, inclusive) */
    long cur_step;            /* the step dt_trace_step marked last (0: none), and when */
    uint64_t cur_t0;
} trace_rec;

/* src (NULL: "") into dst, cut to TRACE_NAME_LEN - 1 bytes at a UTF-8 character's boundary. */
void trace_name_copy(char dst[TRACE_NAME_LEN], const char *src);

/* The monotonic clock in ns (the clock of every event). */
static inline uint64_t trace_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* r when it records now, else NULL: the one check of the hot path. */
static inline trace_rec *trace_active(trace_rec *r)
{
    return r && atomic_load_explicit(&r->on, memory_order_relaxed) ? r : NULL;
}

/* A recorder of cap events (cap >= 1), recording every step; NULL when out of memory. */
trace_rec *trace_rec_create(size_t cap);
void trace_rec_free(trace_rec *r);
/* Records only steps lo..hi (1-based, inclusive) from now on. */
void trace_rec_set_steps(trace_rec *r, long lo, long hi);
/* Step `step` begins: recording turns on inside the range, off outside it (never once closed). */
void trace_rec_step(trace_rec *r, long step);
/* Stops recording for good. The recorder stays valid: a thread that checked it a moment ago may
 * still add to it (it then only counts a drop or fills a slot nobody reads). */
void trace_rec_close(trace_rec *r);
/* Adds one span; thread-safe, lock-free. A NULL or inactive r records nothing. */
void trace_rec_add(trace_rec *r, const char *name, trace_cat cat, int track, uint64_t t0, uint64_t t1, int64_t arg,
                   int64_t arg2);
/* Events written so far (those complete), and the drops. */
size_t trace_rec_count(const trace_rec *r);
uint64_t trace_rec_dropped(const trace_rec *r);
/* Copies at most room complete events into out, sorted by track then begin time; returns how
 * many. Call with recording off (trace_rec_close), with room from trace_rec_count: a writer that
 * slipped past the close may complete one more slot meanwhile, and it is left out. */
size_t trace_rec_snapshot(const trace_rec *r, trace_event *out, size_t room);
const char *trace_cat_name(int cat);

/* The GPU tracks a rank's gpu_tracks mask can name (bits of an int). */
#define TRACE_GPU_TRACKS_MAX 30
/* What the head's metadata names for n events, from dtrain's own spans (not TRACE_CAT_USER):
 * *loader_tracks, one past the highest loader track used (0: none), and *gpu_tracks, bit t set when
 * track TRACE_TRACK_GPU + t has events (t below TRACE_GPU_TRACKS_MAX). A program's own tracks are
 * named by trace_json_events instead. */
void trace_tracks_used(const trace_event *ev, size_t n, int *loader_tracks, int *gpu_tracks);
/* Moves each of the comm track's spans (ev as trace_rec_snapshot sorts it) that begins before an
 * earlier one has ended onto the first lane whose spans have all ended: lane k on track
 * TRACE_TRACK_COMM_LANE + k (lane 0 stays TRACE_TRACK_COMM). Returns the extra lanes used. */
int trace_comm_lanes(trace_event *ev, size_t n);

/* The JSON of the merged trace (trace_json.c), written piece by piece so rank 0 never holds every
 * rank's events at once: the head with the metadata, each rank's events, the tail. */
typedef struct trace_rank_info {
    int rank;
    char host[64];
    int64_t offset_ns; /* its clock minus rank 0's */
    int64_t rtt_ns;    /* the round trip of the ping that measured it (0 on rank 0) */
    uint64_t dropped;
    uint64_t count;
    int loader_tracks; /* loader tracks named in the metadata */
    int gpu_tracks;    /* bit t set: track TRACE_TRACK_GPU + t has events (named in the metadata) */
    int comm_lanes;    /* the comm track's extra lanes (trace_comm_lanes), named "comm 2" ... */
} trace_rank_info;
/* base_ns: rank 0's clock at the file's time 0. Returns 0, or -1 when f reports an error. */
int trace_json_head(FILE *f, const trace_rank_info *ranks, int nranks, uint64_t base_ns);
/* n events of rank ri; each starts with a comma (the head ends with an event of its own). A track
 * the head does not name (a program's own, dt_trace_span's) is named "user N" before its first
 * event; *named carries the last track so named from one call to the next of the same rank (-1
 * before its first call), as its events come in chunks sorted by track. */
void trace_json_events(FILE *f, const trace_rank_info *ri, const trace_event *ev, size_t n, uint64_t base_ns,
                       int *named);
int trace_json_tail(FILE *f);

#endif
