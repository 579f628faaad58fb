/**
 * @file
 * @brief Part of the public API: a timeline of the run for chrome://tracing and ui.perfetto.dev.
 * Include `<dtrain.h>`; this file is not meant to be included on its own. What the tracks and
 * spans mean: docs/trace.md.
 */
#ifndef DTRAIN_TRACE_H
#define DTRAIN_TRACE_H

#if !defined(DTRAIN_H) && !defined(DTRAIN_DOXYGEN) /* DTRAIN_DOXYGEN: docs/Doxyfile.in */
#error "include <dtrain.h>, which includes dtrain/trace.h"
#else /* the rest only under <dtrain.h>: one error, not a cascade after it */

/** @defgroup trace Trace
 * Spans of every rank (forward and backward per layer, each bucket's allreduce, the optimizer,
 * waits for data, checkpoints) recorded in memory and merged by dt_trace_write() into one Chrome
 * trace event JSON file.
 * @{ */

/** The tracks of a rank (the "tid" of its events), for dt_trace_span(). dtrain's own spans also
 * use tracks 901 to 963 (the comm track's lanes, "comm 2" ...) and 1000 to 1029 (the GPU's
 * streams): a program's own tracks are best kept apart from them (2 to 899 beyond its loaders, or
 * above 1029). */
typedef enum dt_trace_track {
    DT_TRACE_TRAIN = 0, /**< the training thread */
    DT_TRACE_COMM = 1,  /**< the communication engine (bucket allreduces) */
    DT_TRACE_LOADER = 2 /**< loader thread 0; thread i is DT_TRACE_LOADER + i */
} dt_trace_track;

/** The default capacity of dt_trace_start(): 262144 events, 16 MiB per rank. */
#define DT_TRACE_DEFAULT_EVENTS 262144

/** Starts recording on this rank into a buffer of `capacity` events (64 bytes each) allocated now;
 * 0 means DT_TRACE_DEFAULT_EVENTS. Spans are recorded from then on by the model, the reducer and the
 * loaders of ctx, and by dt_trace_span(). A full buffer drops further events and counts them (the
 * count is in the file and in a warning of dt_trace_write). Call it before making the models and
 * loaders whose spans you want. Not collective. Errors: DT_ERR_INVALID_ARG (no ctx, a capacity above
 * 2^28, or this context traced already), DT_ERR_NOMEM. */
DT_API dt_status dt_trace_start(dt_ctx *ctx, size_t capacity);

/** Records only steps first..last (1-based, inclusive; last -1: no end) from now on, as marked by
 * dt_trace_step(). DT_ERR_INVALID_ARG when tracing is not started or first < 1 or last < first
 * (other than -1). */
DT_API dt_status dt_trace_set_steps(dt_ctx *ctx, long first, long last);

/** Marks the start of step `step` (1-based): a span named "step N" runs from this mark to the next
 * one (or to dt_trace_write), and recording pauses outside the dt_trace_set_steps() range. A no-op
 * when tracing is not started. */
DT_API void dt_trace_step(dt_ctx *ctx, long step);

/** Nanoseconds on the clock every span uses (CLOCK_MONOTONIC of this process). */
DT_API uint64_t dt_trace_clock(void);

/** Records one span [t0_ns, t1_ns] from dt_trace_clock() named `name` (copied; cut to 27 bytes at
 * most, never inside a UTF-8 character) on track `track`, with a number `arg` shown in its args.
 * A track dtrain's own spans do not use is named "user N" (N: `track`) in the file.
 * Lock-free and thread-safe; a no-op when tracing is not started or paused. */
DT_API void dt_trace_span(dt_ctx *ctx, const char *name, int track, uint64_t t0_ns, uint64_t t1_ns, long arg);

/** Stops recording for good and merges every rank's spans into one JSON file at `path` on rank 0,
 * written to `path`.tmp and renamed (a reader never sees half a file). Clocks are aligned on rank
 * 0's by 8 MPI ping-pongs per rank (the fastest one wins); the offsets and round trips are in the
 * file's "otherData". Events travel in chunks of at most 16 MiB. Call it between steps (no
 * dt_reducer step in flight). The buffer stays allocated, idle, until dt_finalize (threads of the
 * context may still hold it): one trace per context. COLLECTIVE: every rank calls it, with tracing
 * started on all or none (`path` is read on rank 0 only). Rank 0 tries `path` before recording
 * stops: a NULL or empty path (DT_ERR_INVALID_ARG) or one it cannot write (DT_ERR_IO) fails every
 * rank with the spans kept, so a second call with another path writes them. Errors, the same on
 * every rank: DT_ERR_INVALID_ARG (not started, or no path), DT_ERR_IO (rank 0 could not write the
 * file, named), DT_ERR_MPI. */
DT_API dt_status dt_trace_write(dt_ctx *ctx, const char *path);

/** @} */

#endif /* DTRAIN_H */
#endif /* DTRAIN_TRACE_H */
