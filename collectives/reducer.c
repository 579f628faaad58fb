/*
 * reducer.c - making and freeing a dt_reducer (include/dtrain/reducer.h): the configuration and
 * memory checks, the bucket plan (bucket.c), the plan compared across ranks (reducer_plan_check.c)
 * so that a rank with another plan is named instead of hanging a collective later, and the engine
 * or device backend that will carry the buckets. The step itself (ready, wait) is reducer_step.c.
 */
#include "collectives/reducer_impl.h"
#include "collectives/reducer_internal.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_verdict.h"
#include "kernels/backend.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The engine keys its scratch memory by bucket id, one per request in flight. */
#define REDUCER_MAX_BUCKETS 4096

void dt_reducer_defaults(dt_reducer_config *c)
{
    if (!c) return; /* as every *_defaults */
    memset(c, 0, sizeof *c);
    c->memory = DT_MEMORY_HOST;
    c->dtype = DT_F32;
    c->wire = DT_F32;
    c->op = DT_AVG;
    c->bucket_mb = 25.0;
    c->first_bucket_mb = 1.0;
    c->overlap = 1;
}

static dt_status check_types(dt_memory mem, dt_dtype dtype, dt_dtype wire)
{
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "reducer: buffer type %d must be DT_F32, DT_F16 or DT_BF16",
                                (int)dtype);
    if (wire != DT_F32 && wire != DT_F16 && wire != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "reducer: wire type %d must be DT_F32, DT_F16 or DT_BF16",
                                (int)wire);
    if (dtype != DT_F32 && wire != dtype)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: a %s buffer travels as %s (wire %s asked): set wire to the "
                                "buffer's type",
                                dt_dtype_name(dtype), dt_dtype_name(dtype), dt_dtype_name(wire));
    return DT_OK;
}

/* The buffer's memory kind against what the pointer is. */
static dt_status check_memory(const dt_ctx *ctx, const void *buf, dt_memory mem, backend **dev_be)
{
    *dev_be = NULL;
    if (mem != DT_MEMORY_HOST && mem != DT_MEMORY_DEVICE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: memory kind %d must be DT_MEMORY_HOST or DT_MEMORY_DEVICE", (int)mem);
    const int dev = backend_is_device_ptr(buf);
    if (mem == DT_MEMORY_HOST && dev)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: the gradient buffer %p is CUDA device memory but was given as "
                                "DT_MEMORY_HOST: set memory to DT_MEMORY_DEVICE",
                                buf);
    if (mem == DT_MEMORY_DEVICE) {
        /* The placement first: the device backend would make a CUDA context in a process placed
         * on the CPU. */
        dt_placement pl;
        if (dt_get_placement(ctx, &pl) == DT_OK && pl.device != DT_DEVICE_CUDA)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "reducer: DT_MEMORY_DEVICE on a context placed on the CPU: run with "
                                    "--device cuda (DTRAIN_DEVICE=cuda) or give host memory");
        if (backend_for_memory(mem, dev_be))
            return status_set_error(DT_ERR_INVALID_ARG, "reducer: DT_MEMORY_DEVICE: %s", dt_last_error());
        if (!dev)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "reducer: the gradient buffer %p is host memory but was given as "
                                    "DT_MEMORY_DEVICE: set memory to DT_MEMORY_HOST, or cudaMalloc the buffer",
                                    buf);
    }
    return DT_OK;
}

dt_status reducer_check_settings(const char *fn, double bucket_mb, double first_bucket_mb, dt_redop op, int overlap)
{
    dt_status s = bucket_caps_check(fn, bucket_mb, first_bucket_mb);
    if (s) return s;
    if (op != DT_SUM && op != DT_AVG)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: op %d must be DT_SUM or DT_AVG", fn, (int)op);
    if (overlap != 0 && overlap != 1)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: overlap %d must be 0 or 1 (1: buckets start during backward, 0: at the wait)", fn,
                                overlap);
    return DT_OK;
}

static dt_status check_config(const dt_reducer_config *c)
{
    dt_status s = reducer_check_settings("reducer", c->bucket_mb, c->first_bucket_mb, c->op, c->overlap);
    return s ? s : check_types(c->memory, c->dtype, c->wire);
}

static dt_status alloc_step(dt_reducer *r)
{
    const bucket_plan *p = &r->plan;
    r->covered = calloc((size_t)p->nb, sizeof *r->covered);
    r->started = calloc((size_t)p->nb, 1);
    r->range_ready = calloc(p->nr ? (size_t)p->nr : 1, 1);
    r->seq = calloc((size_t)p->nb, sizeof *r->seq);
    if (!r->covered || !r->started || !r->range_ready || !r->seq)
        return status_set_error(DT_ERR_NOMEM, "reducer: out of memory for the bookkeeping of %d buckets", p->nb);
    return DT_OK;
}

/* Everything of dt_reducer_create that this rank does alone: the arguments, the bucket plan and
 * the memory (the step's bookkeeping, the device's 16-bit wire copy, the engine's); nothing is
 * sent. *out gets what was made, also on a failure (for dt_reducer_free), or NULL. */
static dt_status reducer_make(dt_ctx *ctx, void *grads, size_t count, const dt_range *ranges, int nranges,
                              const dt_reducer_config *c, dt_reducer **out)
{
    *out = NULL;
    if (!ctx || !grads)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_create: ctx or the gradient buffer is NULL");
    if (count == 0)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_create: the gradient buffer has 0 elements");
    if (nranges < 0 || (nranges > 0 && !ranges) || (ranges && nranges == 0))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_reducer_create: %d range(s) at %p: give ranges and their count, "
                                "or NULL and 0 for buckets by size",
                                nranges, (const void *)ranges);
    dt_reducer_config cfg;
    if (c)
        cfg = *c;
    else
        dt_reducer_defaults(&cfg);
    dt_status s = check_config(&cfg);
    /* No buffer holds more than PTRDIFF_MAX bytes: a larger count (a negative one converted to
     * size_t) was refused only by the bucket plan, whose message asks for larger caps. */
    if (!s) s = status_count_fits("dt_reducer_create", count, cfg.dtype, "gradient elements");
    backend *dev_be = NULL;
    if (!s) s = check_memory(ctx, grads, cfg.memory, &dev_be);
    if (s) return s;
    dt_reducer *r = calloc(1, sizeof *r);
    if (!r) return status_set_error(DT_ERR_NOMEM, "dt_reducer_create: out of memory");
    *out = r;
    r->dev_be = dev_be;
    r->ctx = ctx;
    ctx_hold(ctx, CTX_HELD_REDUCER); /* dt_finalize refuses while the reducer lives */
    r->buf = grads;
    r->count = count;
    r->cfg = cfg;
    r->esz = dt_dtype_size(cfg.dtype);
    r->plan_dtype = cfg.dtype;
    r->sync = 1;
    const size_t first = bucket_cap_bytes(cfg.first_bucket_mb), cap = bucket_cap_bytes(cfg.bucket_mb);
    s = ranges ? bucket_plan_ranges(count, ranges, nranges, r->esz, first, cap, &r->plan)
               : bucket_plan_auto(count, r->esz, first, cap, &r->plan);
    if (!s && r->plan.nb > REDUCER_MAX_BUCKETS)
        s = status_set_error(DT_ERR_INVALID_ARG,
                             "reducer: the plan has %d buckets, at most %d: raise bucket_mb (now %g MiB)", r->plan.nb,
                             REDUCER_MAX_BUCKETS, cfg.bucket_mb);
    if (!s) s = alloc_step(r);
    /* dt_config::comm_world1 makes device memory reduce even in a world of one (a test of the NCCL
     * path on one GPU: a sum over one rank changes no bit). */
    const int comm1 = cfg.memory == DT_MEMORY_DEVICE && ctx_config(ctx)->comm_world1;
    r->comm = dt_world_size(ctx) > 1 || comm1;
    if (s || !r->comm) return s;
    if (cfg.memory == DT_MEMORY_HOST) {
        s = engine_prepare(ctx_world_comm(ctx), ctx_timeout(ctx), ctx_config(ctx)->comm_thread,
                           ctx_config(ctx)->allreduce, &r->eng);
        if (!s) engine_set_ctx(r->eng, ctx);
        return s;
    }
    coll *dc = ctx_device_coll(ctx);
    r->dcoll = dc && dc->ops->start ? dc : NULL;
    r->whole_at_wait = !r->dcoll;
    if (cfg.dtype == DT_F32 && cfg.wire != DT_F32)
        s = r->dev_be->ops->alloc(r->dev_be, count * sizeof(uint16_t), "the 16-bit wire copy of the gradients",
                                  (void **)&r->wire16);
    return s;
}

dt_status dt_reducer_create(dt_ctx *ctx, void *grads, size_t count, const dt_range *ranges, int nranges,
                            const dt_reducer_config *c, dt_reducer **out)
{
    dt_reducer *r = NULL;
    dt_status s = out ? reducer_make(ctx, grads, count, ranges, nranges, c, &r)
                      : status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_create: out is NULL");
    if (out) *out = NULL;
    /* The ranks' verdict is the first collective: a rank whose own part failed (an argument,
     * memory) still joins it, so that none of its peers waits for it in the plan check, and every
     * rank fails with the first failing rank's code. Only a rank without a context cannot reach
     * its peers. After the verdict nothing fails on one rank alone but a collective. */
    if (ctx) s = rank_verdict_status(ctx, s, "dt_reducer_create", ", so no reducer was made");
    if (!s && r->comm) s = reducer_check_plan_across_ranks(r, "dt_reducer_create", "; no reducer was made");
    if (!s && r->eng) s = engine_connect(r->eng, ctx_world_comm(ctx));
    if (s) {
        dt_reducer_free(r);
        return s;
    }
    *out = r;
    return DT_OK;
}

void dt_reducer_free(dt_reducer *r)
{
    if (!r) return;
    /* After the program's MPI_Finalize the engine's requests can no longer be waited for (MPI
     * would end the job): the memory is released and MPI is left alone. */
    if (r->in_flight && !(r->eng && engine_mpi_finalized())) (void)reducer_discard_step(r);
    if (r->eng) engine_destroy(r->eng);
    if (r->dev_be) r->dev_be->ops->free(r->dev_be, r->wire16);
    bucket_plan_free(&r->plan);
    free(r->covered);
    free(r->seq);
    free(r->started);
    free(r->range_ready);
    free(r->spans);
    ctx_unhold(r->ctx, CTX_HELD_REDUCER);
    free(r);
}

dt_status reducer_set_buffer(dt_reducer *r, void *buf, dt_dtype dtype, dt_dtype wire)
{
    if (reducer_step_open(r))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: the buffer cannot change in the middle of a step (%d range(s) "
                                "ready): call dt_reducer_wait first",
                                r->nready);
    dt_status s = check_types(r->cfg.memory, dtype, wire);
    if (s) return s;
    if (r->comm && r->cfg.memory == DT_MEMORY_DEVICE && (dtype == DT_F32 && wire != DT_F32) != (r->wire16 != NULL))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "reducer: a device buffer cannot change between an fp32 and a 16-bit "
                                "wire after creation: create a new reducer");
    /* The plan is in elements, so it holds for any element size (the caps were applied to the
     * size at creation). */
    r->esz = dt_dtype_size(dtype);
    r->buf = buf;
    r->cfg.dtype = dtype;
    r->cfg.wire = wire;
    return DT_OK;
}

int reducer_same_plan(const dt_reducer *r, const void *buf, const dt_reducer_config *c)
{
    return r->buf == buf && r->plan_dtype == c->dtype && r->cfg.dtype == c->dtype && r->cfg.wire == c->wire &&
           r->cfg.memory == c->memory && r->cfg.bucket_mb == c->bucket_mb &&
           r->cfg.first_bucket_mb == c->first_bucket_mb && r->cfg.stream == c->stream;
}

dt_status reducer_retune(dt_reducer *r, dt_redop op, int overlap)
{
    dt_status own = DT_OK;
    if (reducer_step_open(r))
        own = status_set_error(DT_ERR_INVALID_ARG,
                               "reducer: the reduction cannot change in the middle of a step (%d range(s) ready): "
                               "call dt_reducer_wait first",
                               r->nready);
    else if (op != DT_SUM && op != DT_AVG)
        own = status_set_error(DT_ERR_INVALID_ARG, "reducer: reduction %d must be DT_SUM or DT_AVG", (int)op);
    else if (overlap != 0 && overlap != 1)
        own = status_set_error(DT_ERR_INVALID_ARG, "reducer: overlap %d must be 0 or 1", overlap);
    if (!r->comm) return own;
    /* As at creation: a rank whose own part failed joins the ranks' verdict, so that its peers do
     * not wait for it in the comparison below, and all fail with its code. */
    own = rank_verdict_status(r->ctx, own, "changing the reducer's reduction", ", so nothing changed");
    if (own) return own;
    const dt_reducer_config old = r->cfg;
    r->cfg.op = op;
    r->cfg.overlap = overlap;
    /* The ranks compare their settings again, as at creation. */
    dt_status s = reducer_check_plan_across_ranks(r, "changing the reducer's reduction", "; nothing changed");
    if (s) r->cfg = old;
    return s;
}

int reducer_communicates(const dt_reducer *r) { return r->comm; }
int dt_reducer_num_buckets(const dt_reducer *r) { return r ? r->plan.nb : 0; }

dt_status dt_reducer_bucket(const dt_reducer *r, int i, dt_range *out)
{
    if (!r || !out) return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_bucket: the reducer or out is NULL");
    if (i < 0 || i >= r->plan.nb)
        return status_set_error(DT_ERR_INVALID_ARG, "bucket %d does not exist: the plan has buckets 0..%d", i,
                                r->plan.nb - 1);
    out->offset = r->plan.b[i].off;
    out->count = r->plan.b[i].n;
    return DT_OK;
}

void dt_reducer_get_stats(const dt_reducer *r, dt_reducer_stats *out)
{
    if (!out) return;
    if (!r)
        memset(out, 0, sizeof *out);
    else
        *out = r->stats;
}

/* The gradient utilities on the reducer's own buffer, between steps. */
static dt_status between_steps(const dt_reducer *r, const char *fn)
{
    if (!r) return status_set_error(DT_ERR_INVALID_ARG, "%s: the reducer is NULL", fn);
    if (reducer_step_open(r))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: %d range(s) are ready and not reduced yet: call dt_reducer_wait "
                                "first",
                                fn, r->nready);
    return DT_OK;
}

dt_status dt_reducer_unscale_check(dt_reducer *r, float inv_scale, int *found_inf)
{
    dt_status s = between_steps(r, "dt_reducer_unscale_check");
    return s ? s : dt_buffer_unscale_check(r->buf, r->count, r->cfg.dtype, r->cfg.memory, inv_scale, found_inf);
}

dt_status dt_reducer_grad_norm(dt_reducer *r, double *norm)
{
    dt_status s = between_steps(r, "dt_reducer_grad_norm");
    return s ? s : dt_buffer_norm(r->ctx, r->buf, r->count, r->cfg.dtype, r->cfg.memory, 0, norm);
}

dt_status dt_reducer_clip_grad_norm(dt_reducer *r, double max_norm, double *norm)
{
    if (!(max_norm > 0))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_reducer_clip_grad_norm: maximum norm %g must be > 0", max_norm);
    double total;
    dt_status s = dt_reducer_grad_norm(r, &total);
    if (s) return s;
    if (norm) *norm = total;
    /* PyTorch: clip_coef = max_norm / (total_norm + 1e-6), applied when below 1. A non-finite norm
     * means the step is to be skipped; multiplying would only turn the infs into NaNs. */
    if (!isfinite(total)) return DT_OK;
    const float coef = (float)(max_norm / (total + 1e-6));
    return coef < 1.0f ? dt_buffer_scale(r->buf, r->count, r->cfg.dtype, r->cfg.memory, coef) : DT_OK;
}
