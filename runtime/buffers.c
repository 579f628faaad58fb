/*
 * buffers.c - the buffer utilities of include/dtrain/reducer.h on any flat buffer, host or device,
 * fp32 or 16-bit: the loss scaler's unscale and finite check, scaling (clipping), and the L2 norm,
 * local or across ranks. The CPU loops are kernels/cpu/amp.c's, the GPU ones kernels/cuda/reduce.cu's;
 * 16-bit device buffers go through an fp32 scratch a chunk at a time.
 */
#include "dtrain.h"
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "collectives/ctx_comm.h"
#include "kernels/devmem.h"
#include "base/status.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#include <cuda_runtime_api.h>
#endif

#include <math.h>
#include <mpi.h>

enum { BLK = 2048 };                /* host: 16-bit values widened this many at a time (in cache) */
#define DEV_CHUNK ((size_t)1 << 22) /* device: 16-bit values widened this many at a time (16 MiB) */

static const char *mem_name(dt_memory m) { return m == DT_MEMORY_DEVICE ? "DT_MEMORY_DEVICE" : "DT_MEMORY_HOST"; }

/* The arguments every utility shares, and the memory kind against the pointer. */
static dt_status check_buffer(const char *fn, const void *buf, size_t count, dt_dtype t, dt_memory mem)
{
    if (!buf && count) return status_set_error(DT_ERR_INVALID_ARG, "%s: the buffer is NULL with %zu elements", fn, count);
    if (t == DT_U8)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: element type DT_U8 (raw bytes) has no values to scale or measure: "
                            "give DT_F32, DT_F16 or DT_BF16", fn);
    if (t != DT_F32 && t != DT_F16 && t != DT_BF16)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: element type %d must be DT_F32, DT_F16 or DT_BF16", fn, (int)t);
    if (mem != DT_MEMORY_HOST && mem != DT_MEMORY_DEVICE)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: memory kind %d must be DT_MEMORY_HOST or DT_MEMORY_DEVICE", fn,
                            (int)mem);
#ifndef DTRAIN_HAVE_CUDA
    if (mem == DT_MEMORY_DEVICE)
        return status_set_error(DT_ERR_INVALID_ARG, "%s: DT_MEMORY_DEVICE in a build without CUDA: give host memory", fn);
#endif
    if (count && devmem_is_device(buf) != (mem == DT_MEMORY_DEVICE))
        return status_set_error(DT_ERR_INVALID_ARG, "%s: the buffer %p is %s memory but was given as %s", fn, buf,
                            mem == DT_MEMORY_DEVICE ? "host" : "CUDA device", mem_name(mem));
    return DT_OK;
}

#ifdef DTRAIN_HAVE_CUDA
/* Whatever the caller queued on any stream finishes first; then dtrain's stream does the work. */
static dt_status device_settle(const char *fn)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return status_set_error(DT_ERR_DEVICE, "%s: the device reported %s (%s) from earlier work", fn, cudaGetErrorName(e),
                            cudaGetErrorString(e));
    return DT_OK;
}

static dt_status device_failed(const char *fn)
{
    dt_status s = cuda_ops_last_error();
    cuda_ops_clear_error();
    return s ? s : status_set_error(DT_ERR_DEVICE, "%s: a CUDA reduction failed", fn);
}

/* mode 0: count non-finite (mul ignored); 1: x *= mul, count; 2: sum of squares into *ss. 16-bit
 * chunks are widened into scratch (and narrowed back after a multiply). */
static dt_status device_pass(const char *fn, void *buf, size_t count, dt_dtype t, int mode, float mul, size_t *bad,
                             double *ss)
{
    dt_status s = device_settle(fn);
    if (s) return s;
    *bad = 0;
    if (ss) *ss = 0;
    if (t == DT_F32) {
        if (mode == 2) return cuda_sum_squares(buf, count, ss) ? device_failed(fn) : DT_OK;
        *bad = mode == 1 && mul != 1.0f ? cuda_unscale_count_nonfinite(buf, count, mul) : cuda_count_nonfinite(buf, count);
        return *bad == SIZE_MAX ? device_failed(fn) : DT_OK;
    }
    float *tmp = NULL;
    const size_t chunk = count < DEV_CHUNK ? count : DEV_CHUNK;
    if ((s = devmem_alloc(1, chunk * sizeof *tmp, "the fp32 scratch of a 16-bit buffer", (void **)&tmp))) return s;
    void *st = cuda_ops_stream();
    for (size_t off = 0; off < count && !s; off += chunk) {
        const size_t n = count - off < chunk ? count - off : chunk;
        uint16_t *p = (uint16_t *)buf + off;
        if ((s = cuda_cast_16_to_f32(t, p, tmp, n, st))) break;
        if (mode == 2) {
            double part = 0;
            if (cuda_sum_squares(tmp, n, &part)) s = device_failed(fn);
            *ss += part;
            continue;
        }
        size_t b = mode == 1 ? cuda_unscale_count_nonfinite(tmp, n, mul) : cuda_count_nonfinite(tmp, n);
        if (b == SIZE_MAX) s = device_failed(fn);
        else *bad += b;
        if (!s && mode == 1) s = cuda_cast_f32_to_16(t, tmp, p, n, st);
    }
    if (!s && mode == 1) s = cuda_ops_sync();
    devmem_free(1, tmp);
    return s;
}
#endif

/* The same three passes on host memory. */
static void host_pass(void *buf, size_t count, dt_dtype t, int mode, float mul, size_t *bad, double *ss)
{
    double lane[CPU_SUMSQ_LANES] = {0};
    *bad = 0;
    if (t == DT_F32) {
        if (mode == 2) cpu_sumsq_lanes(buf, count, lane);
        else *bad = mode == 1 && mul != 1.0f ? cpu_unscale_count_nonfinite(buf, count, mul) : cpu_count_nonfinite(buf, count);
    } else if (mode == 0) {
        *bad = cpu_count_nonfinite16(t, buf, count);
    } else {
        float g[BLK];
        for (size_t off = 0; off < count; off += BLK) {
            const size_t n = count - off < BLK ? count - off : BLK;
            uint16_t *p = (uint16_t *)buf + off;
            cpu_cast_16_to_f32(t, p, g, n);
            if (mode == 2) {
                cpu_sumsq_lanes(g, n, lane); /* BLK is a multiple of the lanes: they line up with fp32's */
                continue;
            }
            *bad += cpu_unscale_count_nonfinite(g, n, mul);
            cpu_cast_f32_to_16(t, g, p, n);
        }
    }
    if (ss) *ss = cpu_sumsq_total(lane);
}

static dt_status buffer_pass(const char *fn, void *buf, size_t count, dt_dtype t, dt_memory mem, int mode, float mul,
                             size_t *bad, double *ss)
{
    dt_status s = check_buffer(fn, buf, count, t, mem);
    if (s) return s;
    if (count == 0) {
        *bad = 0;
        if (ss) *ss = 0;
        return DT_OK;
    }
#ifdef DTRAIN_HAVE_CUDA
    if (mem == DT_MEMORY_DEVICE) return device_pass(fn, buf, count, t, mode, mul, bad, ss);
#endif
    host_pass(buf, count, t, mode, mul, bad, ss);
    return DT_OK;
}

dt_status dt_buffer_unscale_check(void *buf, size_t count, dt_dtype t, dt_memory mem, float inv_scale, int *found_inf)
{
    if (!found_inf) return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_unscale_check: found_inf is NULL");
    if (!(inv_scale > 0) || !isfinite(inv_scale))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_unscale_check: unscale factor %g must be a positive finite "
                            "number (1 / the loss scale)", (double)inv_scale);
    if (t != DT_F32 && inv_scale != 1.0f)
        return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_unscale_check: a 16-bit buffer is checked only (inv_scale "
                            "%g given, 1 required): dividing fp16 gradients in place flushes the small ones to zero; "
                            "keep fp32 master gradients, or apply inv_scale where you widen them", (double)inv_scale);
    size_t bad = 0;
    dt_status s = buffer_pass("dt_buffer_unscale_check", buf, count, t, mem, 1, inv_scale, &bad, NULL);
    if (!s) *found_inf = bad != 0;
    return s;
}

dt_status dt_buffer_scale(void *buf, size_t count, dt_dtype t, dt_memory mem, float mul)
{
    if (!isfinite(mul))
        return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_scale: factor %g must be finite", (double)mul);
    size_t bad;
    if (mul == 1.0f) return check_buffer("dt_buffer_scale", buf, count, t, mem);
    return buffer_pass("dt_buffer_scale", buf, count, t, mem, 1, mul, &bad, NULL);
}

dt_status dt_buffer_norm(dt_ctx *ctx, const void *buf, size_t count, dt_dtype t, dt_memory mem, int across_ranks,
                         double *norm)
{
    if (!norm) return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_norm: norm is NULL");
    if (across_ranks && !ctx) return status_set_error(DT_ERR_INVALID_ARG, "dt_buffer_norm: across_ranks needs a context");
    size_t bad;
    double ss = 0;
    /* mode 2 only reads the buffer. */
    dt_status s = buffer_pass("dt_buffer_norm", (void *)buf, count, t, mem, 2, 1.0f, &bad, &ss);
    if (!across_ranks || dt_world_size(ctx) == 1) {
        if (!s) *norm = sqrt(ss);
        return s;
    }
    /* One allreduce of the sums of squares: MPI gives every rank the same result. A rank that
     * failed still joins with NaN, so none waits for it and all see that the norm is unusable. */
    double mine = s ? NAN : ss, total = 0;
    int rc = MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, ctx_world_comm(ctx));
    if (s) return s;
    if (rc != MPI_SUCCESS) return status_set_error(DT_ERR_MPI, "dt_buffer_norm: MPI_Allreduce of the sums of squares failed");
    *norm = sqrt(total);
    return DT_OK;
}
