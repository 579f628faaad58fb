/*
 * model_amp.c - forward and backward of a model in fp16 or bf16 (dt_model_set_precision).
 *
 * Storage is 16-bit: every layer output, the gradients flowing backward, and (unless fp32 was
 * asked for) the parameter gradients. Arithmetic is the fp32 op table: each op widens its inputs
 * into fp32 scratch, runs, and rounds its output once, which is what a GPU's 16-bit GEMM with fp32
 * accumulation computes. Weights are the fp32 master copy rounded to 16 bits as they are used (the
 * CPU path has no 16-bit GEMM to feed, so a stored 16-bit copy would only be widened again).
 *
 * The scratch is bounded so that 16-bit runs really hold less memory than fp32 ones: fc weights
 * are widened AMP_W_CHUNK floats (a block of output rows) at a time, and convolution, pooling and
 * ReLU layers run over the batch in chunks of samples that fit AMP_ACT_CHUNK floats. fc layers take
 * the whole batch (their activations are small, and GEMM wants the rows). Weight gradients of a
 * chunked convolution are summed over the chunks in fp32 and rounded once.
 *
 * On a GPU (m->cuda) the same passes run with GPU launchers, on whole batches, with fp32
 * parameter gradients; fc layers and convolutions multiply the 16-bit values themselves on the
 * tensor cores (a 16-bit parameter copy made at each forward, cuda_gemm16 and cuda_conv_*16).
 */
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "runtime/model/model_internal.h"
#include "base/status.h"
#ifdef DTRAIN_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif

#include <string.h>

#define AMP_ACT_CHUNK ((size_t)1 << 18) /* floats per activation scratch buffer (1 MiB) */
#define AMP_W_CHUNK ((size_t)1 << 18)   /* floats of fc weights widened at a time (1 MiB) */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }


/* Samples per chunk for layer l: the whole batch for fc, else what fits the chunk. */
static int layer_chunk_of(const layer *l, int batch, int gpu)
{
    if (l->kind == LAYER_FC || gpu) return batch; /* the GPU paths take whole batches */
    size_t c = AMP_ACT_CHUNK / zmax(zmax(layer_in_n(l), layer_out_n(l)), 1);
    if (c < 1) c = 1;
    return c > (size_t)batch ? batch : (int)c;
}
#define layer_chunk(l, batch) layer_chunk_of((l), (batch), m->cuda)

/* Output rows of fc layer l whose weights are widened at a time. */
static int fc_rows(const layer *l)
{
    size_t r = AMP_W_CHUNK / (size_t)(l->in_c > 0 ? l->in_c : 1);
    if (r < 1) r = 1;
    return r > (size_t)l->out ? l->out : (int)r;
}

void model_amp_scratch(const dt_model *m, size_t *sx, size_t *sy, size_t *sdy, size_t *w, size_t *t)
{
    const size_t B = (size_t)m->max_batch;
    size_t a = B * (size_t)m->spec.classes, ww = 1, tt = 1;
    for (int i = 0; i < m->spec.n; i++) {
        const layer *l = &m->spec.layers[i];
        const size_t per = zmax(layer_in_n(l), layer_out_n(l));
        switch (l->kind) {
        case LAYER_FC:
            a = zmax(a, B * per);
            ww = zmax(ww, (size_t)fc_rows(l) * (size_t)l->in_c + (size_t)l->out);
            tt = zmax(tt, (size_t)l->out);
            break;
        case LAYER_CONV:
            ww = zmax(ww, l->w_n + l->b_n);
            tt = zmax(tt, l->w_n + l->b_n);
            /* fall through */
        case LAYER_POOL:
        case LAYER_RELU:
            a = zmax(a, (size_t)layer_chunk(l, m->max_batch) * per);
            break;
        case LAYER_FLATTEN:
            break;
        }
    }
    /* The GPU paths run on the 16-bit values: sy takes the fp32 results of GEMMs (and the logits),
     * sdy only the loss gradient, and sx, like sw, sg and st (the CPU's widened fc weights and
     * chunked convolution sums), is not used: the GPU reads the 16-bit parameter copy and writes
     * fp32 gradients directly. */
    *sx = m->cuda ? 1 : a;
    *sy = a;
    *sdy = m->cuda ? B * (size_t)m->spec.classes : a;
    *w = m->cuda ? 1 : ww;
    *t = m->cuda ? 1 : tt;
}

/* The elementwise steps, on the model's device. On a GPU (fp32 gradients only) the fc layers take
 * their own path below (tensor-core GEMMs on the 16-bit values); the others share this code. */
#ifdef DTRAIN_HAVE_CUDA
#define ON_GPU(m) ((m)->cuda)
#else
#define ON_GPU(m) 0
#endif

static void to16(const dt_model *m, const float *in, uint16_t *out, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        cuda_cast_f32_to_16(m->prec, in, out, n, cuda_ops_stream());
        return;
    }
#endif
    cpu_cast_f32_to_16(m->prec, in, out, n);
}

static void to32(const dt_model *m, const uint16_t *in, float *out, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        cuda_cast_16_to_f32(m->prec, in, out, n, cuda_ops_stream());
        return;
    }
#endif
    cpu_cast_16_to_f32(m->prec, in, out, n);
}

static void round16(const dt_model *m, const float *in, float *out, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        cuda_round16(m->prec, in, out, n);
        return;
    }
#endif
    cpu_round16(m->prec, in, out, n);
}

static void relu16_fwd(const dt_model *m, const uint16_t *x, uint16_t *y, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        cuda_relu16_fwd(m->prec, x, y, n);
        return;
    }
#endif
    cpu_relu16_fwd(m->prec, x, y, n);
}

static void relu16_bwd(const dt_model *m, const uint16_t *y, const uint16_t *dy, uint16_t *dx, size_t n)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        cuda_relu16_bwd(m->prec, y, dy, dx, n);
        return;
    }
#endif
    cpu_relu16_bwd(m->prec, y, dy, dx, n);
}


/* Samples b0 .. b0+bs of layer i's input, widened into dst: the 16-bit output of the layer before,
 * or x rounded to 16 bits (as autocast rounds a layer's fp32 input). */
static void input32(const dt_model *m, int i, const float *x, int b0, int bs, float *dst)
{
    const size_t in_n = layer_in_n(&m->spec.layers[i]), off = (size_t)b0 * in_n, cnt = (size_t)bs * in_n;
    if (m->in16[i])
        to32(m, m->in16[i] + off, dst, cnt);
    else
        round16(m, x + off, dst, cnt);
}

/* Column sums of dy (batch, n) into db (fp32). */
static void col_sums(const float *dy, int batch, int n, float *db)
{
    memset(db, 0, (size_t)n * sizeof *db);
    for (int b = 0; b < batch; b++) {
        const float *row = dy + (size_t)b * (size_t)n;
        for (int j = 0; j < n; j++) db[j] += row[j];
    }
}

#ifdef DTRAIN_HAVE_CUDA
/* Layer i's input in 16 bits on the GPU: the layer before's output, or x rounded into x16. */
static const uint16_t *input16_gpu(dt_model *m, int i, const float *x, int batch)
{
    if (m->in16[i]) return m->in16[i];
    to16(m, x, m->x16, (size_t)batch * layer_in_n(&m->spec.layers[i]));
    return m->x16;
}

/* y = x W^T + b with x and W in 16 bits on the tensor cores, fp32 accumulation, one rounding. */
static void fc_fwd_gpu(dt_model *m, int i, const float *x, int batch, uint16_t *y)
{
    const layer *l = &m->spec.layers[i];
    const uint16_t *x16 = input16_gpu(m, i, x, batch);
    cuda_gemm16(m->prec, 0, 1, batch, l->out, l->in_c, x16, l->in_c, m->p16 + l->w_off, l->in_c, 0.0f, m->sy, DT_F32,
                l->out);
    cuda_bias_to16(m->prec, m->sy, m->p16 + l->b_off, y, batch, l->out);
}

/* dW = dy^T x and db into the fp32 gradients; dx = dy W in 16 bits. */
static void fc_bwd_gpu(dt_model *m, int i, const float *x, int batch, const uint16_t *dy, uint16_t *dx)
{
    const layer *l = &m->spec.layers[i];
    const uint16_t *x16 = input16_gpu(m, i, x, batch);
    cuda_gemm16(m->prec, 1, 0, l->out, l->in_c, batch, dy, l->out, x16, l->in_c, 0.0f, m->grads + l->w_off, DT_F32,
                l->in_c);
    cuda_col_sums16(m->prec, dy, batch, l->out, m->grads + l->b_off);
    if (dx)
        cuda_gemm16(m->prec, 0, 0, batch, l->in_c, l->out, dy, l->out, m->p16 + l->w_off, l->in_c, 0.0f, dx, m->prec,
                    l->in_c);
}
#endif

static void fc_fwd(dt_model *m, int i, const float *x, int batch, uint16_t *y)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        fc_fwd_gpu(m, i, x, batch, y);
        return;
    }
#endif
    const layer *l = &m->spec.layers[i];
    const kernel_ops *k = m->ops;
    const int in = l->in_c, out = l->out, R = fc_rows(l);
    input32(m, i, x, 0, batch, m->sx);
    for (int r0 = 0; r0 < out; r0 += R) {
        const int rows = out - r0 < R ? out - r0 : R;
        float *w = m->sw, *b = m->sw + (size_t)rows * (size_t)in;
        cpu_round16(m->prec, m->params + l->w_off + (size_t)r0 * (size_t)in, w, (size_t)rows * (size_t)in);
        cpu_round16(m->prec, m->params + l->b_off + r0, b, (size_t)rows);
        /* The bias goes into the output first and the GEMM adds to it (beta 1), as in cpu/ops.c. */
        for (int s = 0; s < batch; s++) memcpy(m->sy + (size_t)s * (size_t)out + r0, b, (size_t)rows * sizeof(float));
        k->gemm(0, 1, batch, rows, in, 1.0f, m->sx, in, w, in, 1.0f, m->sy + r0, out);
    }
    to16(m, m->sy, y, (size_t)batch * (size_t)out);
}

static void fc_bwd(dt_model *m, int i, const float *x, int batch, const uint16_t *dy, uint16_t *dx)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        fc_bwd_gpu(m, i, x, batch, dy, dx);
        return;
    }
#endif
    const layer *l = &m->spec.layers[i];
    const kernel_ops *k = m->ops;
    const int in = l->in_c, out = l->out, R = fc_rows(l);
    to32(m, dy, m->sdy, (size_t)batch * (size_t)out);
    input32(m, i, x, 0, batch, m->sx);
    for (int r0 = 0; r0 < out; r0 += R) {
        const int rows = out - r0 < R ? out - r0 : R;
        const size_t woff = l->w_off + (size_t)r0 * (size_t)in, wcnt = (size_t)rows * (size_t)in;
        /* dW rows r0.. = dy[:, r0..]^T x, straight into fp32 gradients or via sg into 16-bit ones. */
        float *dw = m->g16 ? m->sg : m->grads + woff;
        k->gemm(1, 0, rows, in, batch, 1.0f, m->sdy + r0, out, m->sx, in, 0.0f, dw, in);
        if (m->g16) cpu_cast_f32_to_16(m->grad_t, m->sg, m->g16 + woff, wcnt);
        if (dx) {
            /* dx = sum over row blocks of dy[:, r0..] W[r0.., :]. */
            cpu_round16(m->prec, m->params + woff, m->sw, wcnt);
            k->gemm(0, 0, batch, in, rows, 1.0f, m->sdy + r0, out, m->sw, in, r0 ? 1.0f : 0.0f, m->sy, in);
        }
    }
    if (m->g16) {
        col_sums(m->sdy, batch, out, m->st);
        cpu_cast_f32_to_16(m->grad_t, m->st, m->g16 + l->b_off, (size_t)out);
    } else {
        col_sums(m->sdy, batch, out, m->grads + l->b_off);
    }
    if (dx) to16(m, m->sy, dx, (size_t)batch * (size_t)in);
}

static void conv_fwd16(dt_model *m, int i, const float *x, int batch, uint16_t *y)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) { /* 16-bit columns and tensor-core GEMMs (cuda_ops.h) */
        const layer *lc = &m->spec.layers[i];
        conv_shape cs = lc->cs;
        cs.batch = batch;
        cuda_conv_fwd16(m->prec, &cs, input16_gpu(m, i, x, batch), m->p16 + lc->w_off, m->p16 + lc->b_off, m->sy, y,
                        m->ws);
        return;
    }
#endif
    const layer *l = &m->spec.layers[i];
    const size_t out_n = layer_out_n(l);
    const int C = layer_chunk(l, batch);
    round16(m, m->params + l->w_off, m->sw, l->w_n + l->b_n);
    for (int b0 = 0; b0 < batch; b0 += C) {
        const int bs = batch - b0 < C ? batch - b0 : C;
        conv_shape cs = l->cs;
        cs.batch = bs;
        input32(m, i, x, b0, bs, m->sx);
        m->ops->conv_fwd(&cs, m->sx, m->sw, m->sw + l->w_n, m->sy, m->ws);
        to16(m, m->sy, y + (size_t)b0 * out_n, (size_t)bs * out_n);
    }
}

static void conv_bwd16(dt_model *m, int i, const float *x, int batch, const uint16_t *dy, uint16_t *dx)
{
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) { /* fp32 parameter gradients on the GPU */
        const layer *lc = &m->spec.layers[i];
        conv_shape cs = lc->cs;
        cs.batch = batch;
        cuda_conv_bwd_filter16(m->prec, &cs, input16_gpu(m, i, x, batch), dy, m->grads + lc->w_off,
                               m->grads + lc->b_off, m->ws);
        if (dx) cuda_conv_bwd_data16(m->prec, &cs, dy, m->p16 + lc->w_off, m->sy, dx, m->ws);
        return;
    }
#endif
    const layer *l = &m->spec.layers[i];
    const size_t out_n = layer_out_n(l), in_n = layer_in_n(l), np = l->w_n + l->b_n;
    const int C = layer_chunk(l, batch);
    float *acc = m->g16 ? m->sg : m->grads + l->w_off; /* weights then bias, summed over chunks */
    if (dx) round16(m, m->params + l->w_off, m->sw, np);
    for (int b0 = 0; b0 < batch; b0 += C) {
        const int bs = batch - b0 < C ? batch - b0 : C;
        conv_shape cs = l->cs;
        cs.batch = bs;
        to32(m, dy + (size_t)b0 * out_n, m->sdy, (size_t)bs * out_n);
        input32(m, i, x, b0, bs, m->sx);
        float *g = b0 ? m->st : acc;
        m->ops->conv_bwd_filter(&cs, m->sx, m->sdy, g, g + l->w_n, m->ws);
        if (b0)
            for (size_t j = 0; j < np; j++) acc[j] += g[j];
        if (dx) {
            m->ops->conv_bwd_data(&cs, m->sdy, m->sw, m->sy, m->ws);
            to16(m, m->sy, dx + (size_t)b0 * in_n, (size_t)bs * in_n);
        }
    }
    if (m->g16) cpu_cast_f32_to_16(m->grad_t, m->sg, m->g16 + l->w_off, np);
}

static void pool_fwd16(dt_model *m, int i, const float *x, int batch, uint16_t *y)
{
    const layer *l = &m->spec.layers[i];
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) { /* on the 16-bit values themselves */
        cuda_maxpool16_fwd(m->prec, input16_gpu(m, i, x, batch), y, m->pool_idx[i], batch, l->in_c, l->in_h, l->in_w,
                           l->k);
        return;
    }
#endif
    const size_t out_n = layer_out_n(l);
    const int C = layer_chunk(l, batch);
    for (int b0 = 0; b0 < batch; b0 += C) {
        const int bs = batch - b0 < C ? batch - b0 : C;
        input32(m, i, x, b0, bs, m->sx);
        m->ops->maxpool_fwd(m->sx, m->sy, m->pool_idx[i] + (size_t)b0 * out_n, bs, l->in_c, l->in_h, l->in_w, l->k);
        to16(m, m->sy, y + (size_t)b0 * out_n, (size_t)bs * out_n); /* exact: a maximum of 16-bit values */
    }
}

static void pool_bwd16(dt_model *m, int i, int batch, const uint16_t *dy, uint16_t *dx)
{
    const layer *l = &m->spec.layers[i];
#ifdef DTRAIN_HAVE_CUDA
    if (m->cuda) {
        cuda_maxpool16_bwd(dy, m->pool_idx[i], dx, batch, l->in_c, l->in_h, l->in_w, l->k);
        return;
    }
#endif
    const size_t out_n = layer_out_n(l), in_n = layer_in_n(l);
    const int C = layer_chunk(l, batch);
    for (int b0 = 0; b0 < batch; b0 += C) {
        const int bs = batch - b0 < C ? batch - b0 : C;
        to32(m, dy + (size_t)b0 * out_n, m->sdy, (size_t)bs * out_n);
        m->ops->maxpool_bwd(m->sdy, m->pool_idx[i] + (size_t)b0 * out_n, m->sy, bs, l->in_c, l->in_h, l->in_w,
                            l->k);
        to16(m, m->sy, dx + (size_t)b0 * in_n, (size_t)bs * in_n); /* exact: copies of dy, and zeros */
    }
}

/* The 16-bit forward pass (x in fp32, on the model's device): every layer's input and output
 * kept for backward. Returns the 16-bit logits, or NULL when no layer computes anything. */
const uint16_t *model_forward16(dt_model *m, const float *x, int batch)
{
    const int n = m->spec.n;
    const size_t B = (size_t)batch;
    if (ON_GPU(m)) to16(m, m->params, m->p16, m->spec.num_params); /* what the tensor cores read */
    const uint16_t *in = NULL; /* NULL: x */
    for (int i = 0; i < n; i++) {
        const layer *l = &m->spec.layers[i];
        m->in16[i] = in;
        uint16_t *y = m->a16[i];
        if (l->kind == LAYER_RELU && !y) y = (uint16_t *)in; /* in place, as in fp32 */
        const size_t out_n = B * layer_out_n(l);
        switch (l->kind) {
        case LAYER_FC: fc_fwd(m, i, x, batch, y); break;
        case LAYER_CONV: conv_fwd16(m, i, x, batch, y); break;
        case LAYER_POOL: pool_fwd16(m, i, x, batch, y); break;
        case LAYER_RELU:
            if (!in) to16(m, x, y, out_n); /* ReLU straight on the input */
            relu16_fwd(m, in ? in : y, y, out_n);
            break;
        case LAYER_FLATTEN: break;
        }
        if (l->kind != LAYER_FLATTEN) in = y;
        if (m->prof) m->prof_fwd[i] += model_prof_mark(m);
    }
    return in;
}

const float *model_forward16_logits32(dt_model *m, const float *x, int batch)
{
    const uint16_t *logits = model_forward16(m, x, batch);
    if (!logits) return NULL;
    to32(m, logits, m->sy, (size_t)batch * (size_t)m->spec.classes);
    return m->sy;
}

dt_status model_fb16(dt_model *m, const float *x, const int32_t *labels, int batch, float grad_scale,
                     double *loss_sum, int *correct)
{
    const int n = m->spec.n;
    const size_t B = (size_t)batch;
    m->prof_step.input_s += model_prof_mark(m);

    const uint16_t *in = model_forward16(m, x, batch);
    if (!in) return status_set_error(DT_ERR_INVALID_ARG, "the model has no layer that computes anything");
    /* The loss in fp32 from the 16-bit logits; its gradient (times the loss scale) rounded to 16 bits. */
    const uint16_t *logits = in;
    const size_t nlog = B * (size_t)m->spec.classes;
    to32(m, logits, m->sy, nlog);
    int corr = 0;
    double loss = m->ops->softmax_xent(m->sy, labels, m->sdy, batch, m->spec.classes, grad_scale, &corr);
    uint16_t *dcur = m->d16[0];
    to16(m, m->sdy, dcur, nlog);
    m->prof_step.loss_s += model_prof_mark(m);

    for (int i = n - 1; i >= 0; i--) {
        const layer *l = &m->spec.layers[i];
        uint16_t *dprev = i ? (dcur == m->d16[0] ? m->d16[1] : m->d16[0]) : NULL;
        switch (l->kind) {
        case LAYER_FC: fc_bwd(m, i, x, batch, dcur, dprev); break;
        case LAYER_CONV: conv_bwd16(m, i, x, batch, dcur, dprev); break;
        case LAYER_POOL:
            if (dprev) pool_bwd16(m, i, batch, dcur, dprev);
            break;
        case LAYER_RELU:
            /* The output of layer i is the input of layer i + 1 (or the logits). */
            relu16_bwd(m, i + 1 < n ? m->in16[i + 1] : logits, dcur, dcur, B * layer_out_n(l));
            dprev = dcur;
            break;
        case LAYER_FLATTEN: dprev = dcur; break;
        }
        if (l->kind == LAYER_FC || l->kind == LAYER_CONV) {
            dt_status s = model_grads_done(m, i);
            if (s) return s;
        }
        if (m->prof) m->prof_bwd[i] += model_prof_mark(m);
        if (dprev) dcur = dprev;
    }
    *loss_sum = loss;
    *correct = corr;
    return DT_OK;
}
