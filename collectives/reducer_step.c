/*
 * reducer_step.c - one step of a dt_reducer: dt_reducer_ready() checks the slice against the plan
 * and the step so far, counts it into its bucket and starts the buckets that are complete;
 * dt_reducer_wait() starts the rest and waits for all. Buckets start strictly in index order (a
 * complete bucket waits for the earlier ones), so every rank starts the same collectives in the
 * same order even when ranges become ready in another order on different ranks.
 */
#include "collectives/reducer_impl.h"
#include "collectives/reducer_internal.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/trace.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_verdict.h"
#include "kernels/backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device backend with its stream set to the caller's (cfg.stream) for one call, and back to
 * its own after: the reducer's casts and waits run behind the kernels that made the gradients,
 * on the caller's stream, whatever stream the backend's ops use. The backend is used from one
 * thread at a time, so the switch is seen by no other call. */
typedef enum { ON_CALLER_TO16, ON_CALLER_TO32, ON_CALLER_SYNC } on_caller_op;
static dt_status on_caller_stream(dt_reducer *r, on_caller_op op, const void *in, void *out, size_t n)
{
    backend *be = r->dev_be;
    void *own = be->ops->stream(be);
    const int swap = own != r->cfg.stream;
    dt_status s = swap ? be->ops->set_stream(be, r->cfg.stream) : DT_OK;
    if (!s) {
        if (op == ON_CALLER_TO16)
            s = be->ops->cast_to16(be, r->cfg.wire, in, out, n);
        else if (op == ON_CALLER_TO32)
            s = be->ops->cast_to32(be, r->cfg.wire, in, out, n);
        else if ((s = be->ops->sync(be)))
            s = status_set_error(s, "reducer: the stream of the backward pass failed before the allreduce: %s",
                                 dt_last_error());
    }
    if (swap) {
        const dt_status b = be->ops->set_stream(be, own);
        if (!s) s = b;
    }
    return s;
}

/* Starts bucket b on whoever carries it: the engine, or the device backend. */
static dt_status reducer_start_bucket(dt_reducer *r, int b)
{
    const bucket *bk = &r->plan.b[b];
    r->started[b] = BUCKET_STARTED;
    r->in_flight = 1;
    r->stats.starts++;
    if (!r->in_wait) r->stats.overlapped++;
    r->stats.bytes_sent += (double)bk->n * (double)dt_dtype_size(r->cfg.wire);
    char *base = r->buf;
    if (r->dcoll) {
        r->dcoll->trace = trace_active(ctx_trace(r->ctx));
        r->dcoll->trace_bucket = b;
        void *at = base + bk->off * r->esz;
        dt_dtype t = r->cfg.dtype;
        if (r->wire16) {
            /* Rounded on the caller's stream (behind the kernels that made the bucket); the
             * collective follows that stream; wait() widens the sums back. */
            dt_status s = on_caller_stream(r, ON_CALLER_TO16, at, r->wire16 + bk->off, bk->n);
            if (s) return s;
            at = r->wire16 + bk->off;
            t = r->cfg.wire;
        }
        const dt_status s = r->shard ? r->dcoll->ops->start_half(r->dcoll, at, bk->n, t, r->cfg.op, 0, r->cfg.stream)
                                     : r->dcoll->ops->start(r->dcoll, at, bk->n, t, r->cfg.op, r->cfg.stream);
        /* The backend numbers its starts since wait_all (wait_one); an empty bucket starts nothing. */
        if (!s && bk->n) r->seq[b] = (uint64_t)r->dstarts++;
        return s;
    }
    if (r->shard)
        return engine_start_reduce_scatter(
            r->eng, r->cfg.dtype == DT_F32 ? (float *)(void *)(base + bk->off * r->esz) : NULL,
            r->cfg.dtype != DT_F32 ? (uint16_t *)(void *)(base + bk->off * r->esz) : NULL, bk->n, r->cfg.op, b,
            r->cfg.wire);
    r->seq[b] = engine_started(r->eng);
    if (r->cfg.dtype != DT_F32)
        return engine_start16(r->eng, (uint16_t *)(void *)(base + bk->off * r->esz), bk->n, r->cfg.op, b, r->cfg.dtype);
    return engine_start(r->eng, (float *)(void *)(base + bk->off * r->esz), bk->n, r->cfg.op, b, r->cfg.wire);
}

/* Starts every complete bucket that is next in index order. */
static dt_status start_ready_buckets(dt_reducer *r)
{
    if (!r->comm || !r->sync || r->whole_at_wait || !r->cfg.overlap) return DT_OK;
    while (r->next_start < r->plan.nb && r->covered[r->next_start] == r->plan.b[r->next_start].n) {
        dt_status s = reducer_start_bucket(r, r->next_start++);
        if (s) return s;
    }
    if (r->eng) engine_poke(r->eng);
    return DT_OK;
}

/* Plans by size: [lo, hi) must not overlap a span already ready; it joins the sorted set. */
static dt_status spans_add(dt_reducer *r, size_t lo, size_t hi)
{
    int i = 0;
    while (i < r->nspans && r->spans[i].hi <= lo) i++; /* the first span ending after lo */
    if (i < r->nspans && r->spans[i].lo < hi)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_reducer_ready: elements [%zu, %zu) overlap elements [%zu, %zu) "
                                "already ready in this step (ready twice): mark each slice once between two "
                                "dt_reducer_wait calls",
                                lo, hi, r->spans[i].lo, r->spans[i].hi);
    const int join_prev = i > 0 && r->spans[i - 1].hi == lo, join_next = i < r->nspans && r->spans[i].lo == hi;
    if (join_prev && join_next) {
        r->spans[i - 1].hi = r->spans[i].hi;
        memmove(r->spans + i, r->spans + i + 1, (size_t)(r->nspans - i - 1) * sizeof *r->spans);
        r->nspans--;
    } else if (join_prev) {
        r->spans[i - 1].hi = hi;
    } else if (join_next) {
        r->spans[i].lo = lo;
    } else {
        if (r->nspans == r->spans_cap) {
            int cap = r->spans_cap ? 2 * r->spans_cap : 16;
            ready_span *ns = realloc(r->spans, (size_t)cap * sizeof *ns);
            if (!ns) return status_set_error(DT_ERR_NOMEM, "dt_reducer_ready: out of memory for %d ready slices", cap);
            r->spans = ns;
            r->spans_cap = cap;
        }
        memmove(r->spans + i + 1, r->spans + i, (size_t)(r->nspans - i) * sizeof *r->spans);
        r->spans[i] = (ready_span){lo, hi};
        r->nspans++;
    }
    return DT_OK;
}

/* The plan's bookkeeping for a slice of a plan by ranges: exactly one range, not ready yet. */
static dt_status mark_range(dt_reducer *r, size_t offset, size_t count)
{
    const bucket_plan *p = &r->plan;
    int near;
    const int i = bucket_plan_find_range(p, offset, &near);
    if (i < 0 || p->r[i].count != count) {
        const dt_range *n = &p->r[i < 0 ? near : i];
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_reducer_ready: [%zu, %zu) is not one of the %d ranges given to "
                                "dt_reducer_create (the nearest is range %d [%zu, %zu)): mark whole ranges",
                                offset, offset + count, p->nr, i < 0 ? near : i, n->offset, n->offset + n->count);
    }
    if (r->range_ready[i])
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_reducer_ready: range %d [%zu, %zu) was already ready in this step "
                                "(ready twice): mark each range once between two dt_reducer_wait calls",
                                i, offset, offset + count);
    r->range_ready[i] = 1;
    r->covered[p->of_range[i]] += count;
    return DT_OK;
}

dt_status dt_reducer_ready(dt_reducer *r, size_t offset, size_t count)
{
    if (!r) return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_ready: the reducer is NULL");
    if (count == 0 || offset >= r->count || count > r->count - offset)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_ready: [%zu, +%zu) is %s the buffer of %zu elements",
                                offset, count, count == 0 ? "an empty slice of" : "past the end of", r->count);
    dt_status s;
    if (r->plan.r) {
        s = mark_range(r, offset, count);
    } else {
        s = spans_add(r, offset, offset + count);
        /* The slice may span buckets: each gets its share. */
        for (size_t at = offset; !s && at < offset + count;) {
            const int b = bucket_plan_bucket_at(&r->plan, at);
            const size_t end = r->plan.b[b].off + r->plan.b[b].n, upto = end < offset + count ? end : offset + count;
            r->covered[b] += upto - at;
            at = upto;
        }
    }
    if (s) return s;
    r->nready++;
    return start_ready_buckets(r);
}

int reducer_step_open(const dt_reducer *r) { return r->nready > 0 || r->in_flight; }

/* Forgets the step's bookkeeping. */
static void step_reset(dt_reducer *r)
{
    memset(r->covered, 0, (size_t)r->plan.nb * sizeof *r->covered);
    memset(r->started, 0, (size_t)r->plan.nb);
    if (r->plan.nr) memset(r->range_ready, 0, (size_t)r->plan.nr);
    r->nspans = 0;
    r->nready = 0;
    r->next_start = 0;
    r->dstarts = 0;
}

static dt_status wait_in_flight(dt_reducer *r)
{
    if (!r->in_flight) return DT_OK;
    r->in_flight = 0;
    if (r->dcoll) return r->dcoll->ops->wait_all(r->dcoll, r->cfg.stream);
    return engine_wait_all(r->eng);
}

dt_status reducer_discard_step(dt_reducer *r)
{
    dt_status s = wait_in_flight(r);
    step_reset(r);
    return s;
}

/* The first bucket not complete, and the message naming what was never ready (DT_OK when all). */
static dt_status check_complete(const dt_reducer *r)
{
    const bucket_plan *p = &r->plan;
    if (p->r) {
        int missing = 0, first = -1;
        for (int i = 0; i < p->nr; i++)
            if (!r->range_ready[i] && missing++ == 0) first = i;
        if (!missing) return DT_OK;
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "dt_reducer_wait: %d of the %d ranges were never marked ready in this "
            "step, the first (in backward order) range %d [%zu, %zu): call dt_reducer_ready for every "
            "range before dt_reducer_wait; this step's gradients are not usable",
            missing, p->nr, first, p->r[first].offset, p->r[first].offset + p->r[first].count);
    }
    size_t at = 0;
    for (int i = 0; i < r->nspans && r->spans[i].lo == at; i++) at = r->spans[i].hi;
    if (at == r->count) return DT_OK;
    size_t end = r->count;
    for (int i = 0; i < r->nspans; i++)
        if (r->spans[i].lo > at) {
            end = r->spans[i].lo;
            break;
        }
    return status_set_error(
        DT_ERR_INVALID_ARG,
        "dt_reducer_wait: elements [%zu, %zu) of the buffer were never marked ready "
        "in this step: call dt_reducer_ready for the whole buffer before dt_reducer_wait; this step's "
        "gradients are not usable",
        at, end);
}

/* The whole buffer in one dt_allreduce (device memory without asynchronous starts), through the
 * 16-bit copy when the wire is 16-bit. dt_allreduce does not follow the caller's stream: it is
 * synchronized first. */
static dt_status whole_allreduce(dt_reducer *r)
{
    if (r->wire16) {
        dt_status s = on_caller_stream(r, ON_CALLER_TO16, r->buf, r->wire16, r->count);
        if (!s) s = on_caller_stream(r, ON_CALLER_SYNC, NULL, NULL, 0);
        if (!s) s = dt_allreduce(r->ctx, r->wire16, r->count, r->cfg.wire, r->cfg.op);
        return s ? s : on_caller_stream(r, ON_CALLER_TO32, r->wire16, r->buf, r->count);
    }
    if (r->cfg.memory == DT_MEMORY_DEVICE) {
        dt_status s = on_caller_stream(r, ON_CALLER_SYNC, NULL, NULL, 0);
        if (s) return s;
    }
    return dt_allreduce(r->ctx, r->buf, r->count, r->cfg.dtype, r->cfg.op);
}

/* After the allreduces of a 16-bit wire: the sums widened back into the fp32 buffer, on the
 * caller's stream (which wait_all made wait for them); after reduce-scatters only the owned part,
 * so the rest keeps this rank's own gradients as on an fp32 wire. */
static dt_status widen_started(dt_reducer *r)
{
    for (int b = 0; b < r->plan.nb; b++) {
        if (r->started[b] != BUCKET_STARTED) continue; /* not started, or widened by reducer_wait_bucket */
        size_t off = r->plan.b[b].off, cnt = r->plan.b[b].n;
        if (r->shard) reducer_owned(r, b, &off, &cnt);
        dt_status s = cnt ? on_caller_stream(r, ON_CALLER_TO32, r->wire16 + off, (float *)r->buf + off, cnt) : DT_OK;
        if (s) return s;
        r->started[b] = BUCKET_WIDENED; /* once: dt_reducer_wait after reducer_wait_started skips it */
    }
    return DT_OK;
}

dt_status reducer_wait_started(dt_reducer *r)
{
    dt_status s = wait_in_flight(r);
    /* A 16-bit wire's sums are widened into the buffer, so that what started is reduced there. */
    if (!s && r->wire16 && !r->whole_at_wait) s = widen_started(r);
    return s;
}

dt_status dt_reducer_wait(dt_reducer *r)
{
    if (!r) return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_wait: the reducer is NULL");
    const double t0 = clock_now_s();
    status_kept why;
    dt_status incomplete = check_complete(r);
    if (incomplete) status_keep(&why);
    dt_status s = DT_OK;
    if (r->comm && r->sync) {
        r->in_wait = 1;
        if (r->whole_at_wait) {
            /* Device memory without asynchronous starts (MPI staging through the host). */
            r->stats.starts++;
            r->stats.bytes_sent += (double)r->count * (double)dt_dtype_size(r->cfg.wire);
            s = whole_allreduce(r);
        } else {
            /* Whatever is not started yet, incomplete buckets included, so every rank takes part in
             * the same collectives even when this one forgot a range. */
            while (!s && r->next_start < r->plan.nb) s = reducer_start_bucket(r, r->next_start++);
        }
        r->in_wait = 0;
        dt_status w = wait_in_flight(r);
        if (!s) s = w;
        if (!s && r->wire16 && !r->whole_at_wait) s = widen_started(r);
    }
    step_reset(r);
    r->stats.wait_s += clock_now_s() - t0;
    if (!s && !incomplete) r->stats.steps++;
    if (s) return s;
    return incomplete ? status_restore(incomplete, &why) : DT_OK;
}

int reducer_waits_by_bucket(const dt_reducer *r)
{
    return r && r->comm && r->sync && r->cfg.overlap && !r->whole_at_wait && !r->shard &&
           (r->eng || (r->dcoll && r->dcoll->ops->wait_one));
}

dt_status reducer_wait_bucket(dt_reducer *r, int b)
{
    if (!reducer_waits_by_bucket(r) || b < 0 || b >= r->plan.nb)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: cannot wait for bucket %d alone (of %d; only host buckets allreduced by the "
                                "engine can be): call dt_reducer_wait",
                                b, r ? r->plan.nb : 0);
    const double t0 = clock_now_s();
    dt_status s = DT_OK;
    r->in_wait = 1;
    while (!s && r->next_start <= b) s = reducer_start_bucket(r, r->next_start++);
    r->in_wait = 0;
    if (!s && r->eng) s = engine_wait_upto(r->eng, r->seq[b] + 1);
    if (!s && r->dcoll) {
        /* The caller's stream waits for this bucket's collective alone (the backend's start
         * seq[b] since its last wait_all); a 16-bit wire's sums are widened back right behind it,
         * and not again at dt_reducer_wait. */
        s = r->plan.b[b].n ? r->dcoll->ops->wait_one(r->dcoll, (int)r->seq[b], r->cfg.stream) : DT_OK;
        if (!s && r->wire16) {
            const bucket *bk = &r->plan.b[b];
            s = on_caller_stream(r, ON_CALLER_TO32, r->wire16 + bk->off, (float *)r->buf + bk->off, bk->n);
            if (!s) r->started[b] = BUCKET_WIDENED;
        }
    }
    r->stats.wait_s += clock_now_s() - t0;
    return s;
}

dt_status dt_reducer_set_sync(dt_reducer *r, int sync)
{
    static const char fn[] = "dt_reducer_set_sync";
    if (!r) return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_set_sync: the reducer is NULL");
    dt_status own = DT_OK;
    if (sync != 0 && sync != 1)
        own =
            status_set_error(DT_ERR_INVALID_ARG,
                             "%s: sync %d must be 0 (keep this rank's gradients: accumulate) or 1 (reduce)", fn, sync);
    else if (reducer_step_open(r))
        own = status_set_error(DT_ERR_INVALID_ARG,
                               "%s: %d range(s) are ready in this step: change sync between steps (after "
                               "dt_reducer_wait)",
                               fn, r->nready);
    /* A rank that reduced while its peers kept their gradients would wait in an allreduce none of
     * them starts: the ranks compare the setting first, and none changes it unless all agree. */
    if (r->comm) own = rank_agree_status(r->ctx, own, sync, fn, "sync", rank_value_int, "; no rank changed it");
    if (own) return own;
    r->sync = sync;
    return DT_OK;
}
