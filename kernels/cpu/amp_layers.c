/*
 * cpu/amp_layers.c - the layer entries of the CPU backend in fp16 or bf16 (kernels/backend.h):
 * the 16-bit storage of a model emulated over the fp32 kernels. Each op widens its inputs into
 * fp32 scratch, runs the fp32 kernel (GEMMs accumulate in fp32), and rounds its output once, which
 * is what a GPU's 16-bit GEMM with fp32 accumulation computes. Weights are the fp32 master copy
 * rounded to 16 bits as they are used (there is no 16-bit GEMM here to feed, so a stored 16-bit
 * copy would only be widened again: keeps_params16 is 0), or, under the test hook that makes this
 * backend keep the copy (backend_cpu_set_keep_params16), that copy widened: the same values while
 * the copy is current, so tests see whether the model keeps it current. In fp32 the entries are
 * the fp32 kernels.
 *
 * The scratch is bounded so that 16-bit runs really hold less memory than fp32 ones: fc weights
 * are widened AMP_W_CHUNK floats (a block of output rows) at a time, and convolution, pooling and
 * ReLU layers run over the batch in chunks of samples that fit AMP_ACT_CHUNK floats. fc layers take
 * the whole batch (their activations are small, and GEMM wants the rows). Weight gradients of a
 * chunked convolution are summed over the chunks in fp32 and rounded once.
 */
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "kernels/cpu/ops_cpu.h"

#include <string.h>

#define AMP_ACT_CHUNK ((size_t)1 << 18) /* floats per activation scratch buffer (1 MiB) */
#define AMP_W_CHUNK ((size_t)1 << 18)   /* floats of fc weights widened at a time (1 MiB) */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* Samples per chunk of a layer with per-sample sizes in_n and out_n: what fits the chunk. */
static int chunk_of(size_t in_n, size_t out_n, int batch)
{
    size_t c = AMP_ACT_CHUNK / zmax(zmax(in_n, out_n), 1);
    if (c < 1) c = 1;
    return c > (size_t)batch ? batch : (int)c;
}

/* Samples in the chunk of C that starts at sample b0: C, or the rest of the batch. */
static int chunk_at(int batch, int b0, int C) { return batch - b0 < C ? batch - b0 : C; }

/* Output rows of an fc layer (in -> out) whose weights are widened at a time. */
static int fc_rows(int in, int out)
{
    size_t r = AMP_W_CHUNK / (size_t)(in > 0 ? in : 1);
    if (r < 1) r = 1;
    return r > (size_t)out ? out : (int)r;
}

void cpu_scratch16(backend *be, const layer_need *l, int batch, scratch_sizes *sz)
{
    (void)be;
    const size_t B = (size_t)batch, per = zmax(l->in_n, l->out_n);
    size_t a = 0;
    sz->sw = zmax(sz->sw, 1);
    sz->st = zmax(sz->st, 1);
    switch (l->kind) {
        case BE_LAYER_LOSS: a = B * l->out_n; break;
        case BE_LAYER_FC:
            a = B * per;
            sz->sw = zmax(sz->sw, (size_t)fc_rows(l->fc_in, l->fc_out) * (size_t)l->fc_in + (size_t)l->fc_out);
            sz->st = zmax(sz->st, (size_t)l->fc_out);
            break;
        case BE_LAYER_CONV:
            sz->sw = zmax(sz->sw, l->np);
            sz->st = zmax(sz->st, l->np);
            /* fall through */
        case BE_LAYER_POOL:
        case BE_LAYER_RELU: a = (size_t)chunk_of(l->in_n, l->out_n, batch) * per; break;
    }
    sz->sx = zmax(sz->sx, a);
    sz->sy = zmax(sz->sy, a);
    sz->sdy = zmax(sz->sdy, a);
}

/* Samples b0 .. b0+bs of the input (in_n values each), widened into dst: 16-bit activations, or
 * the fp32 model input rounded to 16 bits (as autocast rounds a layer's fp32 input). */
static void input32(const pass_args *a, const void *x, int x_f32, size_t in_n, int b0, int bs, float *dst)
{
    const size_t off = (size_t)b0 * in_n, cnt = (size_t)bs * in_n;
    if (x_f32)
        cpu_round16(a->prec, (const float *)x + off, dst, cnt);
    else
        cpu_cast_16_to_f32(a->prec, (const uint16_t *)x + off, dst, cnt);
}

/* Parameters p[off, off + n) as a 16-bit pass multiplies them, into dst: the model's 16-bit copy
 * p16 widened when it keeps one, else the fp32 master rounded now. */
static void params32(dt_dtype t, const float *p, const uint16_t *p16, size_t off, size_t n, float *dst)
{
    if (p16)
        cpu_cast_16_to_f32(t, p16 + off, dst, n);
    else
        cpu_round16(t, p + off, dst, n);
}

/* Column sums of dy (batch, n) into db (fp32). */
static void col_sums(const float *dy, int batch, int n, float *db)
{
    memset(db, 0, (size_t)n * sizeof *db);
    for (int b = 0; b < batch; b++) cpu_add_into(db, dy + (size_t)b * (size_t)n, (size_t)n);
}

/* ReLU in place over a layer output of a->prec (relu 0: nothing), as layer_relu_fwd computes it,
 * while the output is still in cache: the fused forward of an fc or conv layer and its relu. */
static void relu_out(const pass_args *a, int relu, void *y, size_t n)
{
    if (!relu) return;
    if (a->prec == DT_F32)
        cpu_relu_fwd(y, y, n);
    else
        cpu_relu16_fwd(a->prec, y, y, n);
}

dt_status cpu_layer_fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32, void *y,
                           int relu, int batch, int in, int out)
{
    (void)be;
    if (a->prec == DT_F32) {
        cpu_linear_fwd(x, lp->w, lp->b, y, batch, in, out);
        relu_out(a, relu, y, (size_t)batch * (size_t)out);
        return DT_OK;
    }
    const int R = fc_rows(in, out);
    input32(a, x, x_f32, (size_t)in, 0, batch, a->sx);
    for (int r0 = 0; r0 < out; r0 += R) {
        const int rows = out - r0 < R ? out - r0 : R;
        float *w = a->sw, *b = a->sw + (size_t)rows * (size_t)in;
        params32(a->prec, lp->w, lp->w16, (size_t)r0 * (size_t)in, (size_t)rows * (size_t)in, w);
        params32(a->prec, lp->b, lp->b16, (size_t)r0, (size_t)rows, b);
        /* The bias goes into the output first and the GEMM adds to it (beta 1), as in cpu/ops.c. */
        for (int s = 0; s < batch; s++) memcpy(a->sy + (size_t)s * (size_t)out + r0, b, (size_t)rows * sizeof(float));
        cpu_gemm(0, 1, batch, rows, in, 1.0f, a->sx, in, w, in, 1.0f, a->sy + r0, out);
    }
    cpu_cast_f32_to_16(a->prec, a->sy, y, (size_t)batch * (size_t)out);
    relu_out(a, relu, y, (size_t)batch * (size_t)out);
    return DT_OK;
}

/* The 16-bit bias gradient db of `out` columns from the widened dy in d: fp32, or summed in fp32
 * and rounded once into 16-bit gradients (grads16). */
static void bias_grad16(const pass_args *a, const float *d, int batch, int out, void *db)
{
    if (a->grad_t != DT_F32) {
        col_sums(d, batch, out, a->st);
        cpu_cast_f32_to_16(a->grad_t, a->st, db, (size_t)out);
    } else {
        col_sums(d, batch, out, db);
    }
}

/* The backward of the relu layer between the fc layer below and this one, whose input x is that
 * relu's output (layer_fc_bwd's below): dx zeroed where x is not positive, in place, as the relu
 * layer's backward would. */
static void relu_below_bwd(const pass_args *a, const void *x, void *dx, int batch, int in)
{
    const size_t n = (size_t)batch * (size_t)in;
    if (a->prec == DT_F32)
        cpu_relu_bwd(x, dx, dx, n);
    else
        cpu_relu16_bwd(a->prec, x, dx, dx, n);
}

dt_status cpu_layer_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                           const void *dy, void *dx, int batch, int in, int out, const layer_params *below)
{
    (void)be;
    if (a->prec == DT_F32) {
        cpu_linear_bwd(x, lp->w, dy, dx, lp->dw, lp->db, batch, in, out);
        if (below && dx) relu_below_bwd(a, x, dx, batch, in);
        return DT_OK;
    }
    const int g16 = a->grad_t != DT_F32, R = fc_rows(in, out);
    cpu_cast_16_to_f32(a->prec, dy, a->sdy, (size_t)batch * (size_t)out);
    input32(a, x, x_f32, (size_t)in, 0, batch, a->sx);
    for (int r0 = 0; r0 < out; r0 += R) {
        const int rows = out - r0 < R ? out - r0 : R;
        const size_t woff = (size_t)r0 * (size_t)in, wcnt = (size_t)rows * (size_t)in;
        /* dW rows r0.. = dy[:, r0..]^T x, straight into fp32 gradients or via sg into 16-bit ones. */
        float *dw = g16 ? a->sg : (float *)lp->dw + woff;
        cpu_gemm(1, 0, rows, in, batch, 1.0f, a->sdy + r0, out, a->sx, in, 0.0f, dw, in);
        if (g16) cpu_cast_f32_to_16(a->grad_t, a->sg, (uint16_t *)lp->dw + woff, wcnt);
    }
    bias_grad16(a, a->sdy, batch, out, lp->db);
    /* The parameter gradients are final: the pass may step the layer before dx, which then must
     * read the 16-bit copy the step leaves alone (as on a GPU, where the two run side by side). */
    if (lp->grads_ready) {
        const dt_status s = lp->grads_ready(lp->grads_ready_ctx);
        if (s) return s;
    }
    if (!dx) return DT_OK;
    for (int r0 = 0; r0 < out; r0 += R) {
        const int rows = out - r0 < R ? out - r0 : R;
        const size_t woff = (size_t)r0 * (size_t)in, wcnt = (size_t)rows * (size_t)in;
        /* dx = sum over row blocks of dy[:, r0..] W[r0.., :]. */
        params32(a->prec, lp->w, lp->w16, woff, wcnt, a->sw);
        cpu_gemm(0, 0, batch, in, rows, 1.0f, a->sdy + r0, out, a->sw, in, r0 ? 1.0f : 0.0f, a->sy, in);
    }
    cpu_cast_f32_to_16(a->prec, a->sy, dx, (size_t)batch * (size_t)in);
    if (below) relu_below_bwd(a, x, dx, batch, in);
    return DT_OK;
}

static size_t conv_in_n(const conv_shape *s) { return (size_t)s->c_in * s->h * s->w; }
static size_t conv_out_n(const conv_shape *s) { return (size_t)s->c_out * s->h_out * s->w_out; }

dt_status cpu_layer_conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                             const void *x, int x_f32, void *y, int relu)
{
    (void)be;
    if (a->prec == DT_F32) {
        cpu_conv_fwd(s, x, lp->w, lp->b, y, a->ws);
        relu_out(a, relu, y, (size_t)s->batch * conv_out_n(s));
        return DT_OK;
    }
    const size_t in_n = conv_in_n(s), out_n = conv_out_n(s), wn = (size_t)s->c_out * s->c_in * s->k * s->k;
    const int C = chunk_of(in_n, out_n, s->batch);
    params32(a->prec, lp->w, lp->w16, 0, wn, a->sw);
    params32(a->prec, lp->b, lp->b16, 0, (size_t)s->c_out, a->sw + wn);
    for (int b0 = 0; b0 < s->batch; b0 += C) {
        const int bs = chunk_at(s->batch, b0, C);
        conv_shape cs = *s;
        cs.batch = bs;
        input32(a, x, x_f32, in_n, b0, bs, a->sx);
        cpu_conv_fwd(&cs, a->sx, a->sw, a->sw + wn, a->sy, a->ws);
        cpu_cast_f32_to_16(a->prec, a->sy, (uint16_t *)y + (size_t)b0 * out_n, (size_t)bs * out_n);
        relu_out(a, relu, (uint16_t *)y + (size_t)b0 * out_n, (size_t)bs * out_n);
    }
    return DT_OK;
}

dt_status cpu_layer_conv_bwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                             const void *x, int x_f32, const void *dy, void *dx)
{
    (void)be;
    if (a->prec == DT_F32) {
        cpu_conv_bwd_filter(s, x, dy, lp->dw, lp->db, a->ws);
        if (dx) cpu_conv_bwd_data(s, dy, lp->w, dx, a->ws);
        return DT_OK;
    }
    const size_t in_n = conv_in_n(s), out_n = conv_out_n(s), wn = (size_t)s->c_out * s->c_in * s->k * s->k;
    const size_t bn = (size_t)s->c_out;
    const int C = chunk_of(in_n, out_n, s->batch), g16 = a->grad_t != DT_F32;
    /* The weight and bias gradients, summed over the chunks in fp32. */
    float *aw = g16 ? a->sg : lp->dw, *ab = g16 ? a->sg + wn : lp->db;
    if (dx) {
        params32(a->prec, lp->w, lp->w16, 0, wn, a->sw);
        params32(a->prec, lp->b, lp->b16, 0, bn, a->sw + wn);
    }
    for (int b0 = 0; b0 < s->batch; b0 += C) {
        const int bs = chunk_at(s->batch, b0, C);
        conv_shape cs = *s;
        cs.batch = bs;
        cpu_cast_16_to_f32(a->prec, (const uint16_t *)dy + (size_t)b0 * out_n, a->sdy, (size_t)bs * out_n);
        input32(a, x, x_f32, in_n, b0, bs, a->sx);
        cpu_conv_bwd_filter(&cs, a->sx, a->sdy, b0 ? a->st : aw, b0 ? a->st + wn : ab, a->ws);
        if (b0) {
            cpu_add_into(aw, a->st, wn);
            cpu_add_into(ab, a->st + wn, bn);
        }
        if (dx) {
            cpu_conv_bwd_data(&cs, a->sdy, a->sw, a->sy, a->ws);
            cpu_cast_f32_to_16(a->prec, a->sy, (uint16_t *)dx + (size_t)b0 * in_n, (size_t)bs * in_n);
        }
    }
    if (g16) {
        cpu_cast_f32_to_16(a->grad_t, a->sg, lp->dw, wn);
        cpu_cast_f32_to_16(a->grad_t, a->sg + wn, lp->db, bn);
    }
    return DT_OK;
}

/* A pool layer's values per sample: c planes of h x w in, of (h / k) x (w / k) windows out. */
static size_t pool_in_n(int c, int h, int w) { return (size_t)c * h * w; }
static size_t pool_out_n(int c, int h, int w, int k) { return (size_t)c * (h / k) * (w / k); }

dt_status cpu_layer_pool_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx,
                             int batch, int c, int h, int w, int k)
{
    (void)be;
    if (a->prec == DT_F32) {
        cpu_maxpool_fwd(x, y, idx, batch, c, h, w, k);
        return DT_OK;
    }
    const size_t in_n = pool_in_n(c, h, w), out_n = pool_out_n(c, h, w, k);
    const int C = chunk_of(in_n, out_n, batch);
    for (int b0 = 0; b0 < batch; b0 += C) {
        const int bs = chunk_at(batch, b0, C);
        input32(a, x, x_f32, in_n, b0, bs, a->sx);
        cpu_maxpool_fwd(a->sx, a->sy, idx + (size_t)b0 * out_n, bs, c, h, w, k);
        /* exact: a maximum of 16-bit values */
        cpu_cast_f32_to_16(a->prec, a->sy, (uint16_t *)y + (size_t)b0 * out_n, (size_t)bs * out_n);
    }
    return DT_OK;
}

/* The pool's backward with the relu layer's before it (layer_pool_bwd's relu_y), over `planes`
 * planes of `plane` inputs and `per` outputs: each window's dy goes to its argmax input only where
 * the window's output (the value at that argmax, relu_y, of prec) is positive, as the relu layer
 * would have passed it; every other input gets +0, as the relu or the pool would have given it. */
static void maxpool_relu_bwd(dt_dtype prec, const float *dy, const void *relu_y, const int32_t *idx, float *dx,
                             size_t planes, size_t per, size_t plane)
{
    const uint16_t inf = inf16_bits(prec == DT_BF16);
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * plane;
        const float *dyp = dy + pl * per;
        const int32_t *ip = idx + pl * per;
        memset(dxp, 0, plane * sizeof *dxp);
        if (prec == DT_F32) {
            const float *y = (const float *)relu_y + pl * per;
            for (size_t o = 0; o < per; o++)
                if (y[o] > 0.0f) dxp[ip[o]] = dyp[o];
        } else {
            const uint16_t *y = (const uint16_t *)relu_y + pl * per;
            for (size_t o = 0; o < per; o++)
                if (relu16_positive(y[o], inf)) dxp[ip[o]] = dyp[o];
        }
    }
}

dt_status cpu_layer_pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx, int batch,
                             int c, int h, int w, int k, const void *relu_y)
{
    (void)be;
    const size_t per_plane = (size_t)(h / k) * (w / k), plane = (size_t)h * w;
    if (a->prec == DT_F32) {
        if (relu_y)
            maxpool_relu_bwd(DT_F32, dy, relu_y, idx, dx, (size_t)batch * c, per_plane, plane);
        else
            cpu_maxpool_bwd(dy, idx, dx, batch, c, h, w, k);
        return DT_OK;
    }
    const size_t in_n = pool_in_n(c, h, w), out_n = pool_out_n(c, h, w, k);
    const int C = chunk_of(in_n, out_n, batch);
    for (int b0 = 0; b0 < batch; b0 += C) {
        const int bs = chunk_at(batch, b0, C);
        const size_t off = (size_t)b0 * out_n;
        cpu_cast_16_to_f32(a->prec, (const uint16_t *)dy + off, a->sdy, (size_t)bs * out_n);
        if (relu_y)
            maxpool_relu_bwd(a->prec, a->sdy, (const uint16_t *)relu_y + off, idx + off, a->sy, (size_t)bs * c,
                             per_plane, plane);
        else
            cpu_maxpool_bwd(a->sdy, idx + off, a->sy, bs, c, h, w, k);
        /* exact: copies of dy, and zeros */
        cpu_cast_f32_to_16(a->prec, a->sy, (uint16_t *)dx + (size_t)b0 * in_n, (size_t)bs * in_n);
    }
    return DT_OK;
}

dt_status cpu_layer_relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n)
{
    (void)be;
    if (a->prec == DT_F32) {
        cpu_relu_fwd(x, y, n);
        return DT_OK;
    }
    if (x_f32) { /* ReLU straight on the model input: rounded into y first, then in place */
        cpu_cast_f32_to_16(a->prec, x, y, n);
        x = y;
    }
    cpu_relu16_fwd(a->prec, x, y, n);
    return DT_OK;
}

dt_status cpu_layer_relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n)
{
    (void)be;
    if (a->prec == DT_F32)
        cpu_relu_bwd(y, dy, dx, n);
    else
        cpu_relu16_bwd(a->prec, y, dy, dx, n);
    return DT_OK;
}
