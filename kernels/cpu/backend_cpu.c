/*
 * cpu/backend_cpu.c - the CPU backend's table (kernels/backend.h): host memory, the fp32 kernels
 * of ops.c, conv.c and optim.c behind the table's signatures, the casts and checks of cast.c and
 * amp.c, and the 16-bit layer entries of amp_layers.c.
 *
 * Nothing here can fail but allocation: the wrappers return DT_OK. The table costs one indirect
 * call per op; loops over elements stay inside the kernels (no call per element).
 */
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "kernels/cpu/ops_cpu.h"
#include "kernels/pass_common.h"
#include "base/mem_limit.h"
#include "base/status.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { BLK = 2048 }; /* 16-bit values widened this many at a time into a buffer that stays in cache */

/* ---------------------------------------------------------------- memory */

/* Every allocation of the table carries its size in a header, so that the bytes held are known
 * at every free: what mem_info and the test limit (DTRAIN_TEST_MEM_LIMIT, backend.h) count. 64
 * bytes keep the 64-byte alignment of large (page-aligned) blocks. */
#define MEM_HEADER 64

/* The CPU backend's memory as a device's: held now, and the test limit (0: none; read from the
 * environment at the first allocation, or set by backend_cpu_set_limit). */
static struct {
    _Atomic size_t held;
    _Atomic size_t limit;
    atomic_int limit_read;
} cpu_mem;

static size_t cpu_limit(void)
{
    if (!atomic_exchange(&cpu_mem.limit_read, 1)) {
        const char *v = getenv("DTRAIN_TEST_MEM_LIMIT");
        char *end = NULL;
        const unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
        if (v && *v && end && *end == '\0') atomic_store(&cpu_mem.limit, (size_t)n);
    }
    return atomic_load(&cpu_mem.limit);
}

void backend_cpu_set_limit(size_t bytes)
{
    atomic_store(&cpu_mem.limit_read, 1);
    atomic_store(&cpu_mem.limit, bytes);
}

size_t backend_cpu_held(void) { return atomic_load(&cpu_mem.held); }

static dt_status c_alloc(backend *be, size_t bytes, const char *what, void **out)
{
    (void)be;
    *out = NULL;
    const size_t limit = cpu_limit();
    if (limit && atomic_fetch_add(&cpu_mem.held, bytes) + bytes > limit) {
        const size_t held = atomic_fetch_sub(&cpu_mem.held, bytes) - bytes;
        return status_set_error(DT_ERR_NOMEM,
                                "out of memory for %s (%.1f MiB asked, %.1f MiB free of the %.1f MiB test limit "
                                "DTRAIN_TEST_MEM_LIMIT): use a smaller --batch or model",
                                what, (double)bytes / 1048576.0, (double)(limit - held) / 1048576.0,
                                (double)limit / 1048576.0);
    }
    char *p = bytes <= SIZE_MAX - MEM_HEADER ? calloc(1, MEM_HEADER + bytes) : NULL;
    if (!p) {
        if (limit) atomic_fetch_sub(&cpu_mem.held, bytes);
        char lim[160];
        mem_limit_text(lim, sizeof lim); /* before lim[0] is read: arguments have no order */
        return status_set_error(DT_ERR_NOMEM,
                                "out of host memory for %s (%.1f MiB)%s: %suse a smaller --batch or model", what,
                                (double)bytes / 1048576.0, lim, lim[0] ? "raise the limit, or " : "");
    }
    memcpy(p, &bytes, sizeof bytes);
    if (!limit) atomic_fetch_add(&cpu_mem.held, bytes);
    *out = p + MEM_HEADER;
    return DT_OK;
}

static void c_free(backend *be, void *p)
{
    (void)be;
    if (!p) return;
    char *block = (char *)p - MEM_HEADER;
    size_t bytes;
    memcpy(&bytes, block, sizeof bytes);
    atomic_fetch_sub(&cpu_mem.held, bytes);
    free(block);
}

/* malloc, not calloc: the loader overwrites every byte of a batch before it is read. */
static dt_status c_host_alloc(backend *be, size_t bytes, const char *what, void **out)
{
    (void)be;
    const size_t n = bytes ? bytes : 1;
    if ((*out = malloc(n))) return DT_OK;
    char lim[160];
    mem_limit_text(lim, sizeof lim);
    return status_set_error(DT_ERR_NOMEM, "out of host memory for %s (%.1f MiB)%s: %suse a smaller --batch", what,
                            (double)n / 1048576.0, lim, lim[0] ? "raise the limit, or " : "");
}

static void c_host_free(backend *be, void *p)
{
    (void)be;
    free(p);
}

static dt_status c_copy(backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
    return DT_OK;
}

static dt_status c_ok(backend *be)
{
    (void)be;
    return DT_OK;
}

static void *c_stream(backend *be)
{
    (void)be;
    return NULL;
}

static dt_status c_set_stream(backend *be, void *stream)
{
    (void)be;
    if (stream)
        return status_set_error(DT_ERR_INVALID_ARG, "the CPU backend has no streams (stream %p given): pass NULL",
                                stream);
    return DT_OK;
}

/* A device's numbers only under the test limit; host memory has none of its own to report. */
static void c_mem_info(backend *be, size_t *free_bytes, size_t *total_bytes)
{
    (void)be;
    const size_t limit = cpu_limit(), held = backend_cpu_held();
    *total_bytes = limit;
    *free_bytes = limit > held ? limit - held : 0;
}

static int c_owns(backend *be, const void *p)
{
    (void)be, (void)p;
    return 0;
}

/* ---------------------------------------------------------------- fp32 ops */

static dt_status c_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)be;
    cpu_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return DT_OK;
}

static dt_status c_linear_fwd(backend *be, const float *x, const float *w, const float *b, float *y, int batch, int in,
                              int out)
{
    (void)be;
    cpu_linear_fwd(x, w, b, y, batch, in, out);
    return DT_OK;
}

static dt_status c_linear_bwd(backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw,
                              float *db, int batch, int in, int out)
{
    (void)be;
    cpu_linear_bwd(x, w, dy, dx, dw, db, batch, in, out);
    return DT_OK;
}

static size_t c_conv_ws_floats(backend *be, const conv_shape *s)
{
    (void)be;
    return cpu_conv_ws_floats(s);
}

static dt_status c_conv_fwd(backend *be, const conv_shape *s, const float *x, const float *w, const float *b, float *y,
                            float *ws)
{
    (void)be;
    cpu_conv_fwd(s, x, w, b, y, ws);
    return DT_OK;
}

static dt_status c_conv_bwd_data(backend *be, const conv_shape *s, const float *dy, const float *w, float *dx,
                                 float *ws)
{
    (void)be;
    cpu_conv_bwd_data(s, dy, w, dx, ws);
    return DT_OK;
}

static dt_status c_conv_bwd_filter(backend *be, const conv_shape *s, const float *x, const float *dy, float *dw,
                                   float *db, float *ws)
{
    (void)be;
    cpu_conv_bwd_filter(s, x, dy, dw, db, ws);
    return DT_OK;
}

static dt_status c_relu_fwd(backend *be, const float *x, float *y, size_t n)
{
    (void)be;
    cpu_relu_fwd(x, y, n);
    return DT_OK;
}

static dt_status c_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n)
{
    (void)be;
    cpu_relu_bwd(y, dy, dx, n);
    return DT_OK;
}

static dt_status c_maxpool_fwd(backend *be, const float *x, float *y, int32_t *idx, int batch, int c, int h, int w,
                               int k)
{
    (void)be;
    cpu_maxpool_fwd(x, y, idx, batch, c, h, w, k);
    return DT_OK;
}

static dt_status c_maxpool_bwd(backend *be, const float *dy, const int32_t *idx, float *dx, int batch, int c, int h,
                               int w, int k)
{
    (void)be;
    cpu_maxpool_bwd(dy, idx, dx, batch, c, h, w, k);
    return DT_OK;
}

static dt_status c_softmax_xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch,
                                int classes, float grad_scale, double *loss, int *correct)
{
    (void)be;
    *loss = cpu_softmax_xent(logits, labels, dlogits, batch, classes, grad_scale, correct);
    return DT_OK;
}

/* The optimizers read their gradients (backend.h, optim_grads) and write the 16-bit copy a block
 * at a time: fp32 gradients without factors in place, others widened or copied and scaled into a
 * block on the stack, and each block's copy cast right behind its update while it is still in
 * cache. Blocks are a multiple of the AdamW kernel's vector groups (cpu/optim.c), whose bits
 * depend on where a group starts, so a blocked step gives the bits of one whole step. */
#define OPTIM_BLOCK 2048

/* g *= m1, then g *= m2, each skipped when 1 (optim_grads' rule, backend.h). */
static void scale2(float *g, size_t n, float m1, float m2)
{
    if (m1 != 1.0f) cpu_scale(g, n, m1);
    if (m2 != 1.0f) cpu_scale(g, n, m2);
}

/* Gradients [o, o + c) as the step uses them: in place, or made in blk. */
static const float *grads_block(const optim_grads *g, size_t o, size_t c, float *blk)
{
    if (g->t == DT_F32 && g->m1 == 1.0f && g->m2 == 1.0f) return (const float *)g->g + o;
    if (g->t == DT_F32)
        memcpy(blk, (const float *)g->g + o, c * sizeof *blk);
    else
        cpu_cast_16_to_f32(g->t, (const uint16_t *)g->g + o, blk, c);
    scale2(blk, c, g->m1, g->m2);
    return blk;
}

static dt_status c_sgd(backend *be, float *p, const optim_grads *g, float *buf, size_t n, float lr, float momentum,
                       float wd, int first, dt_dtype copy_t, uint16_t *copy)
{
    (void)be;
    const dt_status ts = optim_args_check("sgd", g, copy_t, copy);
    if (ts) return ts;
    if (g->skip && *g->skip) return DT_OK; /* the verdict of found_inf_queue: overflowed */
    const optim_consts k = g->live ? *g->live : optim_consts_sgd(lr, first);
    float blk[OPTIM_BLOCK];
    for (size_t o = 0; o < n; o += OPTIM_BLOCK) {
        const size_t c = n - o < OPTIM_BLOCK ? n - o : OPTIM_BLOCK;
        cpu_sgd(p + o, grads_block(g, o, c, blk), buf ? buf + o : NULL, c, k.lr, momentum, wd, k.first);
        if (copy) cpu_cast_f32_to_16(copy_t, p + o, copy + o, c);
    }
    return DT_OK;
}

static dt_status c_adamw(backend *be, float *p, const optim_grads *g, float *m, float *v, size_t n, float lr, float b1,
                         float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    (void)be;
    const dt_status ts = optim_args_check("adamw", g, copy_t, copy);
    if (ts) return ts;
    if (g->skip && *g->skip) return DT_OK; /* the verdict of found_inf_queue: overflowed */
    const optim_consts k = g->live ? *g->live : optim_consts_adamw(lr, b1, b2, wd, t);
    float blk[OPTIM_BLOCK];
    for (size_t o = 0; o < n; o += OPTIM_BLOCK) {
        const size_t c = n - o < OPTIM_BLOCK ? n - o : OPTIM_BLOCK;
        cpu_adamw(p + o, grads_block(g, o, c, blk), m + o, v + o, c, &k, b1, b2, eps);
        if (copy) cpu_cast_f32_to_16(copy_t, p + o, copy + o, c);
    }
    return DT_OK;
}

/* ---------------------------------------------------------------- casts */

static dt_status c_cast_to16(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    (void)be;
    cpu_cast_f32_to_16(t, in, out, n);
    return DT_OK;
}

static dt_status c_cast_to32(backend *be, dt_dtype t, const uint16_t *in, float *out, size_t n)
{
    (void)be;
    cpu_cast_16_to_f32(t, in, out, n);
    return DT_OK;
}

static dt_status c_round16(backend *be, dt_dtype t, const float *in, float *out, size_t n)
{
    (void)be;
    cpu_round16(t, in, out, n);
    return DT_OK;
}

/* ---------------------------------------------------------------- finite checks and reductions */

static dt_status c_scale_count(backend *be, dt_dtype t, void *buf, size_t n, float mul, size_t *bad)
{
    (void)be;
    if (t == DT_F32) {
        *bad = mul == 1.0f ? cpu_count_nonfinite(buf, n) : cpu_unscale_count_nonfinite(buf, n, mul);
        return DT_OK;
    }
    if (mul == 1.0f) {
        *bad = cpu_count_nonfinite16(t, buf, n);
        return DT_OK;
    }
    float g[BLK];
    *bad = 0;
    for (size_t off = 0; off < n; off += BLK) {
        const size_t c = n - off < BLK ? n - off : BLK;
        uint16_t *p = (uint16_t *)buf + off;
        cpu_cast_16_to_f32(t, p, g, c);
        *bad += cpu_unscale_count_nonfinite(g, c, mul);
        cpu_cast_f32_to_16(t, g, p, c);
    }
    return DT_OK;
}

/* The verdict is computed at once (scale_count's count, mul 1: nothing written); the flag is host
 * memory, read back by found_inf_wait. */
static dt_status c_found_inf_queue(backend *be, dt_dtype t, const void *buf, size_t n, int *flag)
{
    size_t bad = 0;
    const dt_status s = c_scale_count(be, t, (void *)buf, n, 1.0f, &bad);
    *flag = bad != 0;
    return s;
}

static dt_status c_found_inf_wait(backend *be, const int *flag, int *found)
{
    (void)be;
    *found = *flag != 0;
    return DT_OK;
}

static dt_status c_flag_nonfinite(backend *be, dt_dtype t, const void *buf, size_t n, int *flag, int stamp, int since)
{
    (void)be;
    if (*flag >= since) return DT_OK; /* already found in this group: no need to look again */
    const size_t bad = t == DT_F32 ? cpu_count_nonfinite(buf, n) : cpu_count_nonfinite16(t, buf, n);
    if (bad) *flag = stamp;
    return DT_OK;
}

static dt_status c_sum_squares(backend *be, dt_dtype t, const void *buf, size_t n, float m1, float m2, double *out)
{
    (void)be;
    double lane[CPU_SUMSQ_LANES] = {0};
    if (t == DT_F32 && m1 == 1.0f && m2 == 1.0f) {
        cpu_sumsq_lanes(buf, n, lane);
    } else {
        /* Widened (or copied) a block at a time and scaled as the optimizer step will; blocks are
         * multiples of the lanes, so lanes line up with the plain fp32 path's. */
        float g[BLK];
        for (size_t off = 0; off < n; off += BLK) {
            const size_t c = n - off < BLK ? n - off : BLK;
            if (t == DT_F32)
                memcpy(g, (const float *)buf + off, c * sizeof *g);
            else
                cpu_cast_16_to_f32(t, (const uint16_t *)buf + off, g, c);
            scale2(g, c, m1, m2);
            cpu_sumsq_lanes(g, c, lane);
        }
    }
    *out = cpu_sumsq_total(lane);
    return DT_OK;
}

static dt_status c_accum_grads(backend *be, dt_dtype t, void *gv, float *acc, size_t n, int add, int store)
{
    (void)be;
    if (t == DT_F32) {
        float *g = gv;
        if (add) cpu_add_into(g, acc, n);
        if (store) memcpy(acc, g, n * sizeof *g);
        return DT_OK;
    }
    /* 16-bit gradients: widened in blocks, the sum added in fp32, rounded once back. */
    float g[BLK];
    uint16_t *g16 = gv;
    for (size_t o = 0; o < n; o += BLK) {
        const size_t c = n - o < BLK ? n - o : BLK;
        cpu_cast_16_to_f32(t, g16 + o, g, c);
        if (add) cpu_add_into(g, acc + o, c);
        if (store) memcpy(acc + o, g, c * sizeof *g);
        if (add) cpu_cast_f32_to_16(t, g, g16 + o, c);
    }
    return DT_OK;
}

/* ---------------------------------------------------------------- the table */

static const backend_ops cpu_ops = {
    .name = "cpu",
    .host_memory = 1,
    .keeps_params16 = 0,
    .grads16 = 1,
    .alloc = c_alloc,
    .free = c_free,
    .host_alloc = c_host_alloc,
    .host_free = c_host_free,
    .to_device = c_copy,
    .to_host = c_copy,
    .to_device_async = c_copy,
    /* Host memory: the batch is used where it is, nothing to stage. */
    .copy_in = NULL,
    .copy_in_join = NULL,
    .copy_in_release = NULL,
    .sync = c_ok,
    .settle = c_ok,
    .last_status = c_ok,
    .stream = c_stream,
    .set_stream = c_set_stream,
    /* Ops run at once: no side stream to fork or join. */
    .side_begin = NULL,
    .side_end = NULL,
    .side_join = NULL,
    .mem_info = c_mem_info,
    .owns = c_owns,
    .gemm = c_gemm,
    .linear_fwd = c_linear_fwd,
    .linear_bwd = c_linear_bwd,
    .conv_ws_floats = c_conv_ws_floats,
    .conv_fwd = c_conv_fwd,
    .conv_bwd_data = c_conv_bwd_data,
    .conv_bwd_filter = c_conv_bwd_filter,
    .relu_fwd = c_relu_fwd,
    .relu_bwd = c_relu_bwd,
    .maxpool_fwd = c_maxpool_fwd,
    .maxpool_bwd = c_maxpool_bwd,
    .softmax_xent = c_softmax_xent,
    .loss_wait = c_ok, /* the loss is computed before softmax_xent returns */
    .sgd = c_sgd,
    .adamw = c_adamw,
    .cast_to16 = c_cast_to16,
    .cast_to32 = c_cast_to32,
    .round16 = c_round16,
    .scale_count = c_scale_count,
    .found_inf_queue = c_found_inf_queue,
    .found_inf_wait = c_found_inf_wait,
    .flag_nonfinite = c_flag_nonfinite,
    .sum_squares = c_sum_squares,
    .accum_grads = c_accum_grads,
    .scratch16 = cpu_scratch16,
    .fc_relu_mask_bytes = NULL, /* the backward reads the relu's output */
    .layer_fc_fwd = cpu_layer_fc_fwd,
    .layer_fc_bwd = cpu_layer_fc_bwd,
    .layer_conv_fwd = cpu_layer_conv_fwd,
    .layer_conv_bwd = cpu_layer_conv_bwd,
    .layer_pool_fwd = cpu_layer_pool_fwd,
    .layer_pool_bwd = cpu_layer_pool_bwd,
    .layer_relu_fwd = cpu_layer_relu_fwd,
    .layer_relu_bwd = cpu_layer_relu_bwd,
    .layer_loss = pass_layer_loss,
    .layer_logits32 = pass_layer_logits32,
    /* No device timeline: the host spans are the CPU's run times. */
    .trace_mark = NULL,
    .trace_flush = NULL,
    /* Ops run at once: a replay would cost what running them costs. */
    .graph_begin = NULL,
    .graph_end = NULL,
    .graph_launch = NULL,
    .graph_free = NULL,
    .synth_batch = cpu_synth_batch,
};

static backend cpu_backend = {&cpu_ops, NULL};

/* The test hook's table (backend.h, backend_cpu_set_keep_params16): cpu_ops that keeps the 16-bit
 * parameter copy, which its 16-bit layer entries then widen (amp_layers.c reads lp->w16 when
 * given). Filled at the first switch; the environment is read at the first backend_cpu(). */
static backend_ops cpu_ops_params16;
static atomic_int keep16_read;

void backend_cpu_set_keep_params16(int on)
{
    atomic_store(&keep16_read, 1);
    cpu_ops_params16 = cpu_ops;
    cpu_ops_params16.keeps_params16 = 1;
    cpu_backend.ops = on ? &cpu_ops_params16 : &cpu_ops;
}

backend *backend_cpu(void)
{
    if (!atomic_load(&keep16_read)) {
        const char *v = getenv("DTRAIN_TEST_CPU_PARAMS16");
        if (v && !strcmp(v, "1")) backend_cpu_set_keep_params16(1);
        atomic_store(&keep16_read, 1);
    }
    return &cpu_backend;
}
