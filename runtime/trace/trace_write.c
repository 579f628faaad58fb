/*
 * trace_write.c - dt_trace_* (include/dtrain/trace.h): the recorder a context owns, and the
 * collective that merges every rank's spans into one Chrome trace on rank 0.
 *
 * Clocks: each rank's CLOCK_MONOTONIC has its own origin (another boot, another host), so rank 0
 * measures each rank's offset with PINGS ping-pongs and keeps the one with the shortest round trip
 * (its midpoint is the least disturbed by scheduling): offset = t_remote - (t_send + t_recv) / 2,
 * good to about half that round trip. Rank 0 then streams each rank's events into the file in
 * chunks of at most CHUNK_BYTES, so neither memory nor a single message grows with the world.
 */
#include "base/io_error.h"
#include "base/log.h"
#include "base/status.h"
#include "base/trace.h"
#include "runtime/checkpoint/ckpt_temps.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "runtime/trace/trace_write.h"
#include "collectives/ctx_comm.h"
#include "kernels/backend.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#define PINGS 8
#define CHUNK_BYTES (16u << 20)
#define TAG_PING 0x7ac0
#define TAG_EVENTS 0x7ac1
#define MAX_EVENTS (1u << 28)

dt_status dt_trace_start(dt_ctx *ctx, size_t capacity)
{
    if (!ctx) return status_set_error(DT_ERR_INVALID_ARG, "dt_trace_start needs a context");
    if (ctx_trace(ctx))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_trace_start: this context has traced already (one trace per "
                                                    "context, from dt_trace_start to dt_trace_write)");
    if (!capacity) capacity = DT_TRACE_DEFAULT_EVENTS;
    if (capacity > MAX_EVENTS)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_trace_start: capacity %zu is above the most, %u events (16 GiB): pass at most "
                                "that (0: the default %d), and trace fewer steps (dt_trace_set_steps) to need fewer",
                                capacity, MAX_EVENTS, DT_TRACE_DEFAULT_EVENTS);
    trace_rec *r = trace_rec_create(capacity);
    if (!r)
        return status_set_error(DT_ERR_NOMEM, "out of memory for a trace of %zu events (%.1f MiB)", capacity,
                                (double)capacity * sizeof(trace_event) / 1048576.0);
    ctx_set_trace(ctx, r);
    return DT_OK;
}

dt_status dt_trace_set_steps(dt_ctx *ctx, long first, long last)
{
    trace_rec *r = ctx_trace(ctx);
    if (!r || atomic_load(&r->closed))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_trace_set_steps: no trace records (call dt_trace_start first)");
    if (first < 1 || (last != -1 && last < first))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "trace steps %ld:%ld: the first step is 1 or more and the last is "
                                "not before it",
                                first, last);
    trace_rec_set_steps(r, first, last);
    return DT_OK;
}

uint64_t dt_trace_clock(void) { return trace_now_ns(); }

/* Closes the span of the step marked last (recorded when that step was in the range). */
static void close_step(trace_rec *r, uint64_t now)
{
    if (r->cur_step <= 0) return;
    char name[32]; /* cut to TRACE_NAME_LEN by the recorder */
    snprintf(name, sizeof name, "step %ld", r->cur_step);
    trace_rec_add(r, name, TRACE_CAT_STEP, TRACE_TRACK_TRAIN, r->cur_t0, now, r->cur_step, -1);
    r->cur_step = 0;
}

/* The GPU spans the device has finished (wait 1: all of them) into r, while r still records them;
 * a no-op on the CPU and before any CUDA backend is ready. A failure costs the spans, never the
 * run: it is logged (and counted as drops by the backend). */
static void flush_gpu(trace_rec *r, int wait)
{
    backend *be = backend_cuda_if_ready();
    if (!be || !be->ops->trace_flush) return;
    if (be->ops->trace_flush(be, r, wait)) log_msg(LOG_LEVEL_WARN, "trace: GPU spans lost: %s", dt_last_error());
}

void dt_trace_step(dt_ctx *ctx, long step)
{
    trace_rec *r = ctx_trace(ctx);
    if (!r || atomic_load(&r->closed)) return;
    /* Before recording pauses for a step outside the range, every GPU span of the last step in
     * it, waiting for them (once, at the end of the range); otherwise those done by now, the
     * rest at a later mark. */
    const int next_in = step >= r->step_lo && (r->step_hi < 0 || step <= r->step_hi);
    flush_gpu(trace_active(r), !next_in);
    const uint64_t now = trace_now_ns();
    close_step(r, now);
    trace_rec_step(r, step);
    r->cur_step = step;
    r->cur_t0 = now;
}

void dt_trace_span(dt_ctx *ctx, const char *name, int track, uint64_t t0_ns, uint64_t t1_ns, long arg)
{
    trace_rec_add(trace_active(ctx_trace(ctx)), name, TRACE_CAT_USER, track, t0_ns, t1_ns, arg, -1);
}

/* Rank 0's side of the clock estimate of rank peer: the offset and round trip of the fastest of
 * PINGS exchanges. The peer answers each ping with its clock. */
static int ping_peer(MPI_Comm w, int peer, int64_t *offset, int64_t *rtt)
{
    *rtt = INT64_MAX;
    for (int i = 0; i < PINGS; i++) {
        uint64_t remote = 0;
        const uint64_t t0 = trace_now_ns();
        if (MPI_Send(&t0, 1, MPI_UINT64_T, peer, TAG_PING, w) != MPI_SUCCESS ||
            MPI_Recv(&remote, 1, MPI_UINT64_T, peer, TAG_PING, w, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        const uint64_t t1 = trace_now_ns();
        if ((int64_t)(t1 - t0) < *rtt) {
            *rtt = (int64_t)(t1 - t0);
            *offset = (int64_t)(remote - t0) - (int64_t)((t1 - t0) / 2);
        }
    }
    return 0;
}

static int pong(MPI_Comm w)
{
    for (int i = 0; i < PINGS; i++) {
        uint64_t t = 0;
        if (MPI_Recv(&t, 1, MPI_UINT64_T, 0, TAG_PING, w, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        t = trace_now_ns();
        if (MPI_Send(&t, 1, MPI_UINT64_T, 0, TAG_PING, w) != MPI_SUCCESS) return -1;
    }
    return 0;
}

/* What each rank tells rank 0 before its events. */
typedef struct rank_head {
    trace_rank_info info;
    uint64_t min_t0; /* its earliest begin, UINT64_MAX when it has no event */
} rank_head;

static const size_t chunk_events = CHUNK_BYTES / sizeof(trace_event);

/* Rank 0: the file, from the heads and each rank's events, with info (world entries) and buf (a
 * chunk) to work in. 0, or -1 after setting *err. */
static int write_file(MPI_Comm w, FILE *f, rank_head *heads, int world, const trace_event *own, trace_rank_info *info,
                      trace_event *buf, const char *alt, char *err, size_t n)
{
    /* Time 0 of the file: the earliest event of any rank, on rank 0's clock. */
    uint64_t base = UINT64_MAX;
    for (int r = 0; r < world; r++) {
        info[r] = heads[r].info;
        if (heads[r].min_t0 != UINT64_MAX && heads[r].min_t0 - (uint64_t)heads[r].info.offset_ns < base)
            base = heads[r].min_t0 - (uint64_t)heads[r].info.offset_ns;
    }
    if (base == UINT64_MAX) base = 0;
    /* The errno of the first failed write, taken at once: the MPI calls after it may set errno
     * to something of their own. */
    int rc = trace_json_head(f, info, world, base), werr = rc ? errno : 0;
    int named = -1; /* the last user track named, per rank (trace_json_events) */
    trace_json_events(f, &info[0], own, info[0].count, base, &named);
    if (!werr && ferror(f)) werr = errno;
    /* Every rank's events are received even when writing failed, or when a receive from another
     * rank failed (the world's errors return), so no rank is left waiting in its send. */
    for (int r = 1; r < world; r++) {
        named = -1;
        for (uint64_t done = 0; done < info[r].count;) {
            const int k = (int)(info[r].count - done < chunk_events ? info[r].count - done : chunk_events);
            if (MPI_Recv(buf, k * (int)sizeof *buf, MPI_BYTE, r, TAG_EVENTS, w, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                if (rc != -2) snprintf(err, n, "receiving the trace events of rank %d failed (MPI)", r);
                rc = -2;
                break;
            }
            trace_json_events(f, &info[r], buf, (size_t)k, base, &named);
            if (!werr && ferror(f)) werr = errno;
            done += (uint64_t)k;
        }
    }
    if (trace_json_tail(f) && !werr) werr = errno;
    if (werr && rc == 0) rc = -1;
    if (rc == -1) {
        char advice[IO_FIX_LEN];
        if (!werr) werr = EIO;
        snprintf(err, n, "writing failed: %s: %s", strerror(werr),
                 io_error_fix(werr, "trace", alt, advice, sizeof advice));
    }
    return rc ? -1 : 0;
}

static int send_events(MPI_Comm w, const trace_event *ev, uint64_t count)
{
    for (uint64_t done = 0; done < count;) {
        const int k = (int)(count - done < chunk_events ? count - done : chunk_events);
        if (MPI_Send(ev + done, k * (int)sizeof *ev, MPI_BYTE, 0, TAG_EVENTS, w) != MPI_SUCCESS) return -1;
        done += (uint64_t)k;
    }
    return 0;
}

/* The temporary file for target, its name into tmp, as a stdio stream. */
static FILE *open_temp(const char *target, char *tmp, size_t n)
{
    const int fd = ckpt_open_temp(target, tmp, n);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (fd >= 0 && !f) {
        close(fd);
        unlink(tmp);
    }
    return f;
}

/* Whether every rank may write the trace: all have a recorder that is still open, and rank 0 can
 * write path (tried first: a path it cannot write fails every rank before the recorder closes, so
 * the spans are kept for a second call with another path). Collective: through the watched
 * allreduce, so a rank that never comes is named, not waited for; the sums are exact in fp32 up to
 * 2^24 ranks. */
static dt_status agree_to_write(dt_ctx *ctx, trace_rec *rec, const char *path, const char *name, const char *flag)
{
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    const int started = rec && !atomic_load(&rec->closed);
    dt_status path_s = DT_OK;
    if (rank == 0 && started)
        path_s = !path || !*path
                     ? status_set_error(DT_ERR_INVALID_ARG, "dt_trace_write: the path is %s: give a file name",
                                        path ? "empty" : "NULL")
                     : ckpt_write_file_try(path, name);
    float votes[2] = {(float)started, (float)path_s};
    dt_status s = dt_allreduce(ctx, votes, 2, DT_F32, DT_SUM);
    if (s) return s;
    const int all = votes[0] == (float)world, any = votes[0] > 0;
    if (!all)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_trace_write: %s",
                                any ? "tracing was started on some ranks only" : "call dt_trace_start first");
    if (votes[1] == 0) return DT_OK;
    if (rank == 0) return path_s; /* its message names the path and the cause */
    if (flag)
        return status_set_error((dt_status)votes[1],
                                "rank 0 cannot write the trace at %s (its message says why): give a %s path in a "
                                "directory it can write",
                                flag, flag);
    return status_set_error((dt_status)votes[1],
                            "dt_trace_write: rank 0 cannot write the trace at the path it was given (its message "
                            "says why); the spans are kept: call again with another path");
}

/* This rank's events: a copy, sorted per track (a loader thread may still be finishing a span in
 * the recorder), and its head for rank 0 (count, first time, lanes, tracks, host). NULL when the
 * copy found no memory: the rank's track stays empty, said. The caller frees it. */
static trace_event *own_events(dt_ctx *ctx, trace_rec *rec, rank_head *me)
{
    const size_t have = trace_rec_count(rec);
    trace_event *own = malloc((have ? have : 1) * sizeof *own);
    *me = (rank_head){.min_t0 = UINT64_MAX};
    me->info.rank = dt_rank(ctx);
    me->info.dropped = trace_rec_dropped(rec);
    if (own)
        me->info.count = trace_rec_snapshot(rec, own, have);
    else
        log_msg(LOG_LEVEL_WARN, "out of memory copying %zu trace events: this rank's track stays empty", have);
    for (uint64_t i = 0; i < me->info.count; i++)
        if (own[i].t0 < me->min_t0) me->min_t0 = own[i].t0;
    me->info.comm_lanes = trace_comm_lanes(own, me->info.count);
    trace_tracks_used(own, me->info.count, &me->info.loader_tracks, &me->info.gpu_tracks);
    dt_placement pl;
    if (dt_get_placement(ctx, &pl) == DT_OK) snprintf(me->info.host, sizeof me->info.host, "%.63s", pl.hostname);
    return own;
}

/* Rank 0 measures each peer's clock in turn and sends it its figures, into me->info (offset, round
 * trip), which come back to rank 0 in the gather. Nonzero when an MPI call failed. Collective. */
static int measure_clocks(MPI_Comm w, int rank, int world, rank_head *me)
{
    int failed = 0;
    for (int r = 1; r < world && !failed; r++) {
        int64_t fig[2] = {0, 0}; /* offset, round trip */
        if (rank == 0)
            failed = ping_peer(w, r, &fig[0], &fig[1]) || MPI_Send(fig, 2, MPI_INT64_T, r, TAG_PING, w) != MPI_SUCCESS;
        else if (rank == r)
            failed = pong(w) || MPI_Recv(fig, 2, MPI_INT64_T, 0, TAG_PING, w, MPI_STATUS_IGNORE) != MPI_SUCCESS;
        if (rank == r) me->info.offset_ns = fig[0], me->info.rtt_ns = fig[1];
    }
    return failed;
}

/* Rank 0's output: the stream it writes (a temporary file beside the target, or a device or FIFO
 * written in place), and the file it becomes. */
typedef struct trace_out {
    FILE *f;
    int in_place;
    const char *target;
    char tmp[4096], real[4096];
} trace_out;

/* Rank 0 opens the output for path into *o; msg (n bytes) says why not, "" when it is open. */
static void open_output(const char *path, const char *alt, trace_out *o, char *msg, size_t n)
{
    /* A link to a file: that file is replaced; a device (/dev/null) or FIFO: written in place. */
    o->in_place = 0;
    o->f = NULL;
    o->target = path && *path ? ckpt_write_target(path, o->real, sizeof o->real, &o->in_place) : path;
    if (!path || !*path)
        snprintf(msg, n, "dt_trace_write needs a path");
    else if (o->in_place && snprintf(o->tmp, sizeof o->tmp, "%s", o->target) >= (int)sizeof o->tmp)
        snprintf(msg, n, "the trace path is longer than %zu bytes", sizeof o->tmp - 16);
    /* The temporary file is the checkpoint writer's kind (ckpt_open_temp): two jobs given one
     * --trace path never write into each other's, and a link planted under its name in a shared
     * directory is never followed. */
    else if (!(o->f = o->in_place ? ckpt_fopen_in_place(o->tmp) : open_temp(o->target, o->tmp, sizeof o->tmp))) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        snprintf(msg, n, "cannot write the trace %.200s: %s: %s", o->tmp, strerror(err),
                 io_error_fix(err, "trace", alt, advice, sizeof advice));
    }
}

/* Rank 0: every rank's events merged into o's stream (write_file), which is closed and renamed
 * into place; msg (n bytes) says what failed, and the temporary file then goes. */
static void write_and_place(MPI_Comm w, trace_out *o, const char *path, const char *alt, rank_head *heads, int world,
                            const trace_event *own, trace_rank_info *info, trace_event *buf, char *msg, size_t n)
{
    if (write_file(w, o->f, heads, world, own, info, buf, alt, msg, n)) {
        char why[400];
        snprintf(why, sizeof why, "%s", msg);
        snprintf(msg, n, "trace %.100s: %s", path, why);
    }
    char advice[IO_FIX_LEN];
    if (fclose(o->f) != 0 && !msg[0]) {
        const int err = errno;
        snprintf(msg, n, "trace %.200s: closing failed: %s: %s", o->tmp, strerror(err),
                 io_error_fix(err, "trace", alt, advice, sizeof advice));
    }
    if (!o->in_place && !msg[0] && rename(o->tmp, o->target) != 0) {
        const int err = errno;
        snprintf(msg, n, "trace: renaming %.150s to %.150s failed: %s: %s", o->tmp, o->target, strerror(err),
                 io_error_fix(err, "trace", alt, advice, sizeof advice));
    }
    if (!o->in_place && msg[0]) remove(o->tmp);
}

dt_status dt_trace_write(dt_ctx *ctx, const char *path) { return trace_write_named(ctx, path, NULL); }

dt_status trace_write_named(dt_ctx *ctx, const char *path, const char *flag)
{
    if (!ctx) return status_set_error(DT_ERR_INVALID_ARG, "dt_trace_write needs a context");
    /* What the messages call the path, and what a user changes to get past a failure. */
    const char *name = flag ? flag : "dt_trace_write", *alt = flag ? flag : "path";
    MPI_Comm w = ctx_world_comm(ctx);
    const int rank = dt_rank(ctx), world = dt_world_size(ctx);
    trace_rec *rec = ctx_trace(ctx);
    dt_status s = agree_to_write(ctx, rec, path, name, flag);
    if (s) return s;
    close_step(rec, trace_now_ns());
    flush_gpu(trace_active(rec), 1);
    trace_rec_close(rec);
    rank_head me;
    trace_event *own = own_events(ctx, rec, &me);
    const int failed = measure_clocks(w, rank, world, &me);
    rank_head *heads = rank == 0 ? calloc((size_t)world, sizeof *heads) : NULL;
    if (failed || (rank == 0 && !heads) ||
        MPI_Gather(&me, sizeof me, MPI_BYTE, heads, sizeof me, MPI_BYTE, 0, w) != MPI_SUCCESS) {
        free(own), free(heads);
        return status_set_error(DT_ERR_MPI,
                                "dt_trace_write: the clock pings or the gather of the ranks' counts failed");
    }
    /* Rank 0 opens the file; every rank learns whether it could before any event travels. Rank
     * 0's memory for the merge is had before any rank sends. */
    char msg[512] = "";
    trace_out o = {0};
    trace_rank_info *info = rank == 0 ? malloc((size_t)world * sizeof *info) : NULL;
    trace_event *buf = rank == 0 ? malloc(chunk_events * sizeof *buf) : NULL;
    if (rank == 0 && (!info || !buf))
        snprintf(msg, sizeof msg, "out of memory for merging the trace (%.0f MiB)", CHUNK_BYTES / 1048576.0);
    else if (rank == 0)
        open_output(path, alt, &o, msg, sizeof msg);
    /* A second Ctrl-C while the trace is written takes its partial file along. */
    const int noted = rank == 0 && o.f && !o.in_place ? ckpt_temp_note(o.tmp) : -1;
    if (MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, w) != MPI_SUCCESS) msg[0] = '?';
    if (msg[0] && o.f) {
        /* The broadcast failed after rank 0 opened the file: nothing is written, and the empty
         * temporary file goes (a device written in place stays). */
        fclose(o.f);
        if (!o.in_place) remove(o.tmp);
        o.f = NULL;
    }
    if (!msg[0]) {
        if (rank == 0)
            write_and_place(w, &o, path, alt, heads, world, own, info, buf, msg, sizeof msg);
        else if (send_events(w, own, me.info.count))
            snprintf(msg, sizeof msg, "rank %d could not send its trace events (MPI)", rank);
        /* The verdict of rank 0 (a peer's failure to send shows there as a failed receive). */
        char verdict[sizeof msg];
        memcpy(verdict, msg, sizeof msg);
        if (MPI_Bcast(verdict, sizeof verdict, MPI_CHAR, 0, w) == MPI_SUCCESS) memcpy(msg, verdict, sizeof msg);
    }
    ckpt_temp_forget(noted);
    uint64_t dropped = 0;
    for (int r = 0; rank == 0 && r < world; r++) dropped += heads[r].info.dropped;
    if (!msg[0] && dropped)
        log_msg0(LOG_LEVEL_WARN,
                 "the trace dropped %llu events: its buffers were full (trace fewer steps with --trace-steps A:B)",
                 (unsigned long long)dropped);
    free(own);
    free(heads);
    free(info);
    free(buf);
    /* The recorder stays (closed) until dt_finalize: a loader thread may be finishing a batch it
     * began recording, and the communication thread may hold it too. */
    if (msg[0]) return status_set_error(msg[0] == '?' ? DT_ERR_MPI : DT_ERR_IO, "%s", msg);
    if (rank == 0) log_msg(LOG_LEVEL_INFO, "trace of %d rank%s written to %s", world, world == 1 ? "" : "s", path);
    return DT_OK;
}
