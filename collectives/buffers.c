/*
 * buffers.c - the buffer utilities of include/dtrain/reducer.h on any flat buffer, host or device,
 * fp32 or 16-bit: the loss scaler's unscale and finite check, scaling (clipping), and the L2 norm,
 * local or across ranks. The memory kind picks the backend (kernels/backend.h) and its table does
 * the work: the CPU loops of kernels/cpu/, or the GPU reductions of kernels/cuda/, which take
 * 16-bit device buffers through an fp32 scratch a chunk at a time.
 */
#include "dtrain.h"
#include "kernels/backend.h"
#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "collectives/rank_verdict.h"
#include "base/status.h"

#include <math.h>
#include <mpi.h>

static const char *mem_name(dt_memory m) { return m == DT_MEMORY_DEVICE ? "DT_MEMORY_DEVICE" : "DT_MEMORY_HOST"; }

/* An element type the utilities can scale or measure. */
static dt_status check_dtype(const char *fn, dt_dtype t)
{
    if (t == DT_U8)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s: element type DT_U8 (raw bytes) has no values to scale or "
                                "measure: give DT_F32, DT_F16 or DT_BF16",
                                fn);
    if (t != DT_F32 && t != DT_F16 && t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: element type %d must be DT_F32, DT_F16 or DT_BF16", fn,
                                (int)t);
    return DT_OK;
}

/* The arguments every utility shares, the memory kind against the pointer, and the backend of
 * that memory into *be. */
static dt_status check_buffer(const char *fn, const void *buf, size_t count, dt_dtype t, dt_memory mem, backend **be)
{
    if (!buf && count)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: the buffer is NULL with %zu elements", fn, count);
    dt_status s = check_dtype(fn, t);
    if (s) return s;
    /* No buffer holds more than PTRDIFF_MAX bytes (C's limit on an object), as dt_allreduce says
     * too: a larger count (a negative one converted to size_t) had the pass run off the buffer. */
    if ((s = status_count_fits(fn, count, t, "elements"))) return s;
    if (mem != DT_MEMORY_HOST && mem != DT_MEMORY_DEVICE)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: memory kind %d must be DT_MEMORY_HOST or DT_MEMORY_DEVICE", fn,
                                (int)mem);
    /* The pointer before the backend: telling host memory from device memory needs no driver,
     * while making the CUDA backend for a host pointer would fail with cuBLAS's or the build's
     * error instead of naming the mistake (as dt_buffer_checksum does). */
    if (count && backend_is_device_ptr(buf) != (mem == DT_MEMORY_DEVICE))
        return status_set_error(DT_ERR_INVALID_ARG, "%s: the buffer %p is %s memory but was given as %s: %s", fn, buf,
                                mem == DT_MEMORY_DEVICE ? "host" : "CUDA device", mem_name(mem),
                                mem == DT_MEMORY_DEVICE ? "give DT_MEMORY_HOST, or cudaMalloc the buffer"
                                                        : "give DT_MEMORY_DEVICE");
    if (backend_for_memory(mem, be))
        return status_set_error(DT_ERR_INVALID_ARG, "%s: %s: %s", fn, mem_name(mem), dt_last_error());
    return DT_OK;
}

/* mode 0: count non-finite (mul ignored); 1: x *= mul, count; 2: sum of squares into *ss. */
static dt_status buffer_pass(const char *fn, void *buf, size_t count, dt_dtype t, dt_memory mem, int mode, float mul,
                             size_t *bad, double *ss)
{
    backend *be = NULL;
    dt_status s = check_buffer(fn, buf, count, t, mem, &be);
    if (s) return s;
    *bad = 0;
    if (ss) *ss = 0;
    if (count == 0) return DT_OK;
    /* Whatever the caller queued on any stream finishes first; then the backend's stream does the work. */
    if ((s = be->ops->settle(be)))
        return status_set_error(s, "%s: the device reported an error from earlier work: %s", fn, dt_last_error());
    if (mode == 2) return be->ops->sum_squares(be, t, buf, count, 1.0f, 1.0f, ss);
    return be->ops->scale_count(be, t, buf, count, mode == 1 ? mul : 1.0f, bad);
}

dt_status dt_buffer_unscale_check(void *buf, size_t count, dt_dtype t, dt_memory mem, float inv_scale, int *found_inf)
{
    if (!found_inf) return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_unscale_check: found_inf is NULL");
    if (!(inv_scale > 0) || !isfinite(inv_scale))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dt_buffer_unscale_check: unscale factor %g must be a positive finite "
                                "number (1 / the loss scale)",
                                (double)inv_scale);
    dt_status s = check_dtype("dt_buffer_unscale_check", t);
    if (s) return s;
    if (t != DT_F32 && inv_scale != 1.0f)
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "dt_buffer_unscale_check: a 16-bit buffer is checked only (inv_scale "
            "%g given, 1 required): dividing fp16 gradients in place flushes the small ones to zero; "
            "keep fp32 master gradients, or apply inv_scale where you widen them",
            (double)inv_scale);
    size_t bad = 0;
    s = buffer_pass("dt_buffer_unscale_check", buf, count, t, mem, 1, inv_scale, &bad, NULL);
    if (!s) *found_inf = bad != 0;
    return s;
}

dt_status dt_buffer_scale(void *buf, size_t count, dt_dtype t, dt_memory mem, float mul)
{
    if (!isfinite(mul))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_scale: factor %g must be finite", (double)mul);
    size_t bad;
    backend *be;
    if (mul == 1.0f) return check_buffer("dt_buffer_scale", buf, count, t, mem, &be);
    return buffer_pass("dt_buffer_scale", buf, count, t, mem, 1, mul, &bad, NULL);
}

dt_status dt_buffer_norm(dt_ctx *ctx, const void *buf, size_t count, dt_dtype t, dt_memory mem, int across_ranks,
                         double *norm)
{
    if (across_ranks && !ctx)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_norm: across_ranks %d needs a context", across_ranks);
    size_t bad;
    double ss = 0;
    /* mode 2 only reads the buffer. A NULL norm, or a flag that is neither 0 nor 1, is this rank's
     * failure like a bad buffer: across ranks (any flag but 0: the likeliest meaning of a stray
     * true value) it still joins the sum below, so no peer waits for it. */
    dt_status s = across_ranks != 0 && across_ranks != 1
                      ? status_set_error(DT_ERR_INVALID_ARG,
                                         "dt_buffer_norm: across_ranks %d must be 0 (this rank's buffer) or 1 (the "
                                         "norm over every rank's buffer)",
                                         across_ranks)
                  : !norm ? status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_norm: norm is NULL")
                          : buffer_pass("dt_buffer_norm", (void *)buf, count, t, mem, 2, 1.0f, &bad, &ss);
    if (!across_ranks || dt_world_size(ctx) == 1) {
        if (!s) *norm = sqrt(ss);
        return s;
    }
    /* One allreduce of two doubles, watched like every collective (MPI gives every rank the same
     * result): the sums of squares and how many ranks failed. A rank that failed still joins, so
     * none waits for it. The count makes the failure known to every rank at no extra collective
     * when none failed; when one did, all of them (and only then) take the ranks' verdict, which
     * names the first failing rank and gives every rank its code. */
    double sum[2] = {s ? 0.0 : ss, s ? 1.0 : 0.0};
    status_kept mine;
    if (s) status_keep(&mine);
    const dt_status rs = coll_mpi_sum_f64(ctx_host_coll(ctx), sum, 2);
    if (rs) return s ? status_restore(s, &mine) : rs;
    if (sum[1] > 0) {
        if (s) status_restore(s, &mine);
        const dt_status v = rank_verdict_status(ctx, s, "dt_buffer_norm", ", so no norm was computed");
        /* Every rank saw the count, so every rank's verdict found the failure; DT_OK cannot come. */
        return v ? v : status_set_error(DT_ERR_INTERNAL, "dt_buffer_norm: a rank failed but none said which");
    }
    *norm = sqrt(sum[0]);
    return DT_OK;
}
