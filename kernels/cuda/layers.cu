/*
 * layers.cu - the layer entries of the CUDA backend in any precision (kernels/backend.h). In fp32
 * they are the fp32 ops; in fp16/bf16 fc layers and convolutions multiply the 16-bit values
 * themselves on the tensor cores (reading the 16-bit parameter copy the model makes at each
 * forward, keeps_params16), accumulate in fp32 and round each output once, on whole batches.
 * Parameter gradients stay fp32 (grads16 is 0). Pooling and ReLU work on the 16-bit values.
 */
#include "kernels/cuda/cuda_internal.cuh"

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

void cuda_scratch16(backend *be, const layer_need *l, int batch, scratch_sizes *sz)
{
    (void)be;
    const size_t B = (size_t)batch;
    /* sy takes the fp32 results of GEMMs that are rounded after (and the logits), sdy only the
     * loss gradient; sx, sw and st (the CPU's widened weights and chunk sums) are not used; x16
     * holds the rounded input. An fc layer's forward without its cuBLASLt epilogue writes B x out
     * into sy; a pointwise convolution's GEMMs write its forward result and its data gradient
     * there; other convolutions round as they scatter and col2im (amp16.h), so they need none:
     * a 16-bit conv net does not hold an fp32 copy of its largest activation. */
    sz->sx = zmax(sz->sx, 1);
    sz->sw = zmax(sz->sw, 1);
    sz->st = zmax(sz->st, 1);
    if (l->kind == BE_LAYER_LOSS) {
        sz->sy = zmax(sz->sy, B * l->out_n);
        sz->sdy = zmax(sz->sdy, B * l->out_n);
        return;
    }
    if (l->kind == BE_LAYER_FC) sz->sy = zmax(sz->sy, B * l->out_n);
    if (l->kind == BE_LAYER_CONV && l->pointwise) sz->sy = zmax(sz->sy, B * zmax(l->in_n, l->out_n));
    if (l->first) sz->x16 = zmax(sz->x16, B * l->in_n);
}

static dt_status no_grads16(const pass_args *a, const char *op)
{
    if (a->grad_t == DT_F32) return DT_OK;
    return status_set_error(DT_ERR_UNSUPPORTED,
                            "cuda %s: the CUDA backend keeps parameter gradients in fp32 "
                            "(grads16 is 0): set DT_F32 gradients",
                            op);
}

/* The layer input in 16 bits: the layer before's output, or the fp32 model input rounded into x16. */
static dt_status input16(backend *be, const pass_args *a, const void *x, int x_f32, size_t n, const uint16_t **out)
{
    *out = (const uint16_t *)x;
    if (!x_f32) return DT_OK;
    *out = a->x16;
    return cuda_cast_to16(be, a->prec, (const float *)x, a->x16, n);
}

/* The same in backward: the fp32 model input was rounded into x16 by this layer's forward of the
 * same pass (only the first layer that computes reads it, and nothing else writes x16), so it is
 * read as it is, without casting it again. */
static const uint16_t *input16_bwd(const pass_args *a, const void *x, int x_f32)
{
    return x_f32 ? a->x16 : (const uint16_t *)x;
}

dt_status cuda_layer_fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32, void *y,
                            int relu, int batch, int in, int out)
{
    if (a->prec == DT_F32) {
        /* cuBLAS's GEMM is the last to write y here (beta 1 over the broadcast bias): ReLU is a
         * pass of its own, as the relu layer would run it. */
        TRY(cuda_linear_fwd(be, (const float *)x, lp->w, lp->b, (float *)y, batch, in, out));
        return relu ? cuda_relu_fwd(be, (const float *)y, (float *)y, (size_t)batch * out) : DT_OK;
    }
    /* y = x W^T + b with x and W in 16 bits on the tensor cores, fp32 accumulation, one rounding. */
    const uint16_t *x16;
    TRY(input16(be, a, x, x_f32, (size_t)batch * in, &x16));
    /* The bias, the rounding and ReLU in the GEMM's epilogue; else the fp32 result, then a kernel. */
    if (cuda_lt_fc_fwd16(a->prec, x16, lp->w16, lp->b16, (uint16_t *)y, relu, lp->relu_mask, batch, in, out))
        return DT_OK;
    TRY(rm_gemm16_batched("fc_fwd16", a->prec, 0, 1, batch, out, in, x16, in, 0, lp->w16, in, 0, 0.0f, a->sy, DT_F32,
                          out, 0, -1));
    return cuda_bias_to16(a->prec, a->sy, lp->b16, (uint16_t *)y, batch, out, relu);
}

dt_status cuda_layer_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                            const void *dy, void *dx, int batch, int in, int out, const layer_params *below)
{
    const size_t nx = (size_t)batch * in;
    if (a->prec == DT_F32) {
        TRY(cuda_linear_bwd(be, (const float *)x, lp->w, (const float *)dy, (float *)dx, (float *)lp->dw,
                            (float *)lp->db, batch, in, out));
        if (!below || !dx) return DT_OK;
        /* The relu below: the kernel the unfused pass runs (cuBLAS's fp32 GEMM has no epilogue). */
        return cuda_relu_bwd(be, (const float *)x, (const float *)dx, (float *)dx, nx);
    }
    TRY(no_grads16(a, "fc_bwd16"));
    /* dW = dy^T x and db into the fp32 gradients; dx = dy W in 16 bits. */
    const uint16_t *x16 = input16_bwd(a, x, x_f32), *dy16 = (const uint16_t *)dy;
    if (!cuda_lt_fc_wgrad16(a->prec, x16, dy16, (float *)lp->dw, (float *)lp->db, batch, in, out)) {
        /* The bias gradient in the weight gradient's epilogue (one read of dy); else a kernel of its own. */
        TRY(rm_gemm16_batched("fc_bwd16", a->prec, 1, 0, out, in, batch, dy16, out, 0, x16, in, 0, 0.0f, lp->dw, DT_F32,
                              in, 0, -1));
        TRY(cuda_col_sums16(a->prec, dy16, batch, out, (float *)lp->db));
    }
    /* dW and db are queued: the pass may step the layer now, beside dx (which reads w16 only). */
    if (lp->grads_ready) TRY(lp->grads_ready(lp->grads_ready_ctx));
    if (!dx) return DT_OK;
    /* Through the relu below in the GEMM's epilogue, from the mask its forward kept; else the GEMM
     * and the relu's kernel on x (its output). */
    if (below && cuda_lt_fc_dgrad_relu16(a->prec, dy16, lp->w16, (uint16_t *)dx, below->relu_mask, batch, in, out))
        return DT_OK;
    TRY(rm_gemm16_batched("fc_bwd16", a->prec, 0, 0, batch, in, out, dy16, out, 0, lp->w16, in, 0, 0.0f, dx, a->prec,
                          in, 0, -1));
    if (!below) return DT_OK;
    return cuda_relu16_bwd(a->prec, x16, (const uint16_t *)dx, (uint16_t *)dx, nx);
}

dt_status cuda_layer_conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                              const void *x, int x_f32, void *y, int relu)
{
    (void)be;
    if (a->prec == DT_F32) return cuda_conv_fwd_relu(s, (const float *)x, lp->w, lp->b, (float *)y, a->ws, relu);
    /* 16-bit columns and tensor-core GEMMs */
    const uint16_t *x16;
    TRY(input16(be, a, x, x_f32, (size_t)s->batch * s->c_in * s->h * s->w, &x16));
    return cuda_conv_fwd16(a->prec, s, x16, lp->w16, lp->b16, a->sy, (uint16_t *)y, a->ws, relu);
}

dt_status cuda_layer_conv_bwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                              const void *x, int x_f32, const void *dy, void *dx)
{
    if (a->prec == DT_F32) {
        TRY(cuda_conv_bwd_filter(be, s, (const float *)x, (const float *)dy, (float *)lp->dw, (float *)lp->db, a->ws));
        return dx ? cuda_conv_bwd_data(be, s, (const float *)dy, lp->w, (float *)dx, a->ws) : DT_OK;
    }
    TRY(no_grads16(a, "conv_bwd16"));
    const uint16_t *x16 = input16_bwd(a, x, x_f32), *dy16 = (const uint16_t *)dy;
    TRY(cuda_conv_bwd_filter16(a->prec, s, x16, dy16, (float *)lp->dw, (float *)lp->db, a->ws));
    if (lp->grads_ready) TRY(lp->grads_ready(lp->grads_ready_ctx)); /* as in the fc entry */
    return dx ? cuda_conv_bwd_data16(a->prec, s, dy16, lp->w16, a->sy, (uint16_t *)dx, a->ws) : DT_OK;
}

dt_status cuda_layer_pool_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx,
                              int batch, int c, int h, int w, int k)
{
    if (a->prec == DT_F32) return cuda_maxpool_fwd(be, (const float *)x, (float *)y, idx, batch, c, h, w, k);
    /* on the 16-bit values themselves: exact */
    const uint16_t *x16;
    TRY(input16(be, a, x, x_f32, (size_t)batch * c * h * w, &x16));
    return cuda_maxpool16_fwd(a->prec, x16, (uint16_t *)y, idx, batch, c, h, w, k);
}

dt_status cuda_layer_pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx, int batch,
                              int c, int h, int w, int k, const void *relu_y)
{
    (void)be;
    if (a->prec == DT_F32)
        return cuda_maxpool_relu_bwd((const float *)dy, idx, (const float *)relu_y, (float *)dx, batch, c, h, w, k);
    return cuda_maxpool16_bwd(a->prec, (const uint16_t *)dy, idx, (const uint16_t *)relu_y, (uint16_t *)dx, batch, c, h,
                              w, k);
}

dt_status cuda_layer_relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n)
{
    if (a->prec == DT_F32) return cuda_relu_fwd(be, (const float *)x, (float *)y, n);
    if (x_f32) { /* ReLU straight on the model input: rounded into y first, then in place */
        TRY(cuda_cast_to16(be, a->prec, (const float *)x, (uint16_t *)y, n));
        x = y;
    }
    return cuda_relu16_fwd(a->prec, (const uint16_t *)x, (uint16_t *)y, n);
}

dt_status cuda_layer_relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n)
{
    if (a->prec == DT_F32) return cuda_relu_bwd(be, (const float *)y, (const float *)dy, (float *)dx, n);
    return cuda_relu16_bwd(a->prec, (const uint16_t *)y, (const uint16_t *)dy, (uint16_t *)dx, n);
}
