/*
 * trace_json.c - the Chrome trace event format (chrome://tracing, ui.perfetto.dev) of a merged
 * trace: complete events ("ph":"X", microseconds) with pid = rank and tid = track, metadata events
 * that name each rank's process ("rank N (host)") and track ("train", "comm", "loader N", and "gpu
 * compute" / "gpu nccl" where CUDA events timed the streams), and
 * "otherData" with each rank's clock offset, the round trip that measured it and its dropped
 * events. Each rank's times are moved onto rank 0's clock (t - offset) before printing.
 */
#include "base/json.h"
#include "base/trace.h"

#include <inttypes.h>

/* The GPU tracks' names, in base/gpu_span.h's order. */
static const char *const gpu_names[] = {"gpu compute", "gpu nccl"};
#define GPU_NAMES ((int)(sizeof gpu_names / sizeof *gpu_names))

static double us_of(uint64_t t, int64_t offset_ns, uint64_t base_ns)
{
    return (double)((int64_t)(t - base_ns) - offset_ns) / 1000.0;
}

static void meta(FILE *f, const char *what, int pid, int tid, const char *name)
{
    fprintf(f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", what, pid, tid);
    json_write_string(f, name);
    fputs("}},\n", f);
}

int trace_json_head(FILE *f, const trace_rank_info *ranks, int nranks, uint64_t base_ns)
{
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"dtrain train --trace\",", f);
    fputs("\"clock\":\"each rank's CLOCK_MONOTONIC moved onto rank 0's by min-RTT MPI ping-pongs\",\"ranks\":[", f);
    uint64_t dropped = 0;
    for (int i = 0; i < nranks; i++) {
        const trace_rank_info *r = &ranks[i];
        fprintf(f, "%s{\"rank\":%d,\"host\":", i ? "," : "", r->rank);
        json_write_string(f, r->host);
        fprintf(f, ",\"clock_offset_us\":%.3f,\"rtt_us\":%.3f,\"events\":%" PRIu64 ",\"dropped_events\":%" PRIu64 "}",
                (double)r->offset_ns / 1000.0, (double)r->rtt_ns / 1000.0, r->count, r->dropped);
        dropped += r->dropped;
    }
    fprintf(f, "],\"dropped_events\":%" PRIu64 ",\"base_ns\":%" PRIu64 "},\n\"traceEvents\":[\n", dropped, base_ns);
    char name[128];
    for (int i = 0; i < nranks; i++) {
        const trace_rank_info *r = &ranks[i];
        snprintf(name, sizeof name, "rank %d (%s)", r->rank, r->host);
        meta(f, "process_name", r->rank, 0, name);
        fprintf(f,
                "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
                r->rank, r->rank);
        meta(f, "thread_name", r->rank, TRACE_TRACK_TRAIN, "train");
        meta(f, "thread_name", r->rank, TRACE_TRACK_COMM, "comm");
        for (int k = 1; k <= r->comm_lanes; k++) {
            snprintf(name, sizeof name, "comm %d", k + 1);
            meta(f, "thread_name", r->rank, TRACE_TRACK_COMM_LANE + k, name);
            /* Shown next to the comm track rather than after the loaders (tracks sort by tid). */
            fprintf(
                f,
                "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}},\n",
                r->rank, TRACE_TRACK_COMM_LANE + k, TRACE_TRACK_COMM);
        }
        for (int t = 0; t < r->loader_tracks; t++) {
            snprintf(name, sizeof name, "loader %d", t);
            meta(f, "thread_name", r->rank, TRACE_TRACK_LOADER + t, name);
        }
        /* The GPU tracks, only where the rank has their events. */
        for (int t = 0; t < GPU_NAMES; t++)
            if (r->gpu_tracks & (1 << t)) meta(f, "thread_name", r->rank, TRACE_TRACK_GPU + t, gpu_names[t]);
    }
    /* The last metadata event closes the list of the head, so every event after it starts with a
     * comma. */
    fprintf(f, "{\"name\":\"trace_begin\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":0}");
    return ferror(f) ? -1 : 0;
}

/* Whether the head names track t of rank r (trace_json_head's thread_name events). */
static int head_names(const trace_rank_info *r, int t)
{
    if (t == TRACE_TRACK_TRAIN || t == TRACE_TRACK_COMM) return 1;
    if (t >= TRACE_TRACK_LOADER && t < TRACE_TRACK_LOADER + r->loader_tracks) return 1;
    if (t > TRACE_TRACK_COMM_LANE && t <= TRACE_TRACK_COMM_LANE + r->comm_lanes) return 1;
    return t >= TRACE_TRACK_GPU && t < TRACE_TRACK_GPU + GPU_NAMES && (r->gpu_tracks & (1 << (t - TRACE_TRACK_GPU)));
}

void trace_json_events(FILE *f, const trace_rank_info *ri, const trace_event *ev, size_t n, uint64_t base_ns,
                       int *named)
{
    for (size_t i = 0; i < n; i++) {
        const trace_event *e = &ev[i];
        /* A program's own track gets a name too: without one the viewers show a bare thread id, and
         * a strict reader finds a tid that no thread_name event names. */
        if (e->track != *named && !head_names(ri, e->track)) {
            fprintf(f,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"user %u\"}}",
                    ri->rank, (unsigned)e->track, (unsigned)e->track);
            *named = e->track;
        }
        const double ts = us_of(e->t0, ri->offset_ns, base_ns);
        fputs(",\n{\"name\":", f);
        json_write_string(f, e->name);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u",
                trace_cat_name(e->cat), ts, (double)(e->t1 - e->t0) / 1000.0, ri->rank, (unsigned)e->track);
        if (e->arg2 >= 0)
            fprintf(f, ",\"args\":{\"n\":%" PRId64 ",\"bytes\":%" PRId64 "}}", e->arg, e->arg2);
        else
            fprintf(f, ",\"args\":{\"n\":%" PRId64 "}}", e->arg);
    }
}

int trace_json_tail(FILE *f)
{
    fputs("\n]}\n", f);
    return ferror(f) ? -1 : 0;
}
