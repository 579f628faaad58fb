/*
 * conv.cu - convolutions of the CUDA backend: per group of images one GEMM in the (K, g*P) layout
 * (the images' columns side by side), with im2col into it, col2im out of it, dy gathered into its
 * (O, g*P) counterpart and the forward's result scattered back into the images (a pointwise
 * convolution, its input its own column matrix, takes strided-batched GEMMs instead); the bias
 * gradient in a fixed order. One templated driver per direction serves fp32 and 16-bit columns
 * (mixed precision: the GEMMs on the tensor cores, accumulated in fp32); outputs that a 16-bit
 * pass rounds once are fp32 until then (the forward result, rounded with its bias as it is
 * scattered; the column gradient, whose col2im sums are rounded as they are written).
 */
#include "kernels/cuda/cuda_internal.cuh"

/* The convolution bias gradient db[o] = sum over images n and pixels p of dy[(n*O + o)*P + p], in
 * double (as the CPU) and rounded to float once, in a fixed order whatever the timing: pass one
 * gives each (channel o, slice c of nb slices of the batch) a block that sums its slice's
 * elements thread by thread and then in a fixed shared-memory tree, into part[o*nb + c] (or, when
 * nb is 1, straight into db); pass two adds a channel's nb partials in order. dy is fp32 or
 * 16-bit (T), read where it lies. */
template <typename T>
static __global__ void conv_bias_part_kernel(const T *__restrict__ dy, int bf, int batch, int O, uint32_t P, int nb,
                                             double *__restrict__ part, float *__restrict__ db)
{
    __shared__ double sh[OPS_BLOCK];
    const int c = blockIdx.x;
    const int n0 = (int)((long long)batch * c / nb), n1 = (int)((long long)batch * (c + 1) / nb);
    const uint32_t cnt = (uint32_t)(n1 - n0) * P;     /* < 2^31: the launcher sizes the slices so */
    for (int o = blockIdx.y; o < O; o += gridDim.y) { /* the same o for every thread of the block */
        double acc = 0.0;
        for (uint32_t j = threadIdx.x; j < cnt; j += blockDim.x) {
            const uint32_t n = j / P, p = j - n * P;
            acc += as32(dy[((size_t)(n0 + n) * O + o) * P + p], bf);
        }
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int w = OPS_BLOCK / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (nb == 1)
                db[o] = (float)sh[0];
            else
                part[(size_t)o * nb + c] = sh[0];
        }
        __syncthreads(); /* sh is reused by the next channel */
    }
}

static __global__ void conv_bias_final_kernel(const double *__restrict__ part, int O, int nb, float *__restrict__ db)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= O) return;
    double acc = 0.0;
    for (int c = 0; c < nb; c++) acc += part[(size_t)o * nb + c];
    db[o] = (float)acc;
}

template <typename T>
static dt_status conv_bias_grad(const char *op, const T *dy, int bf, int batch, int O, size_t P, float *db)
{
    if (O <= 0 || batch <= 0) return DT_OK;
    /* Enough blocks to fill the GPU, at most one slice per image; and slices small enough for
     * 32-bit indices (more of them when batch x P is large). */
    int nb = (OPS_DB_BLOCKS + O - 1) / O;
    const size_t need = ((size_t)batch * P + (IDX32_LIMIT / 2) - 1) / (IDX32_LIMIT / 2);
    if ((size_t)nb < need) nb = (int)(need < (size_t)batch ? need : (size_t)batch);
    if (nb > batch) nb = batch;
    const size_t slice = ((size_t)batch + nb - 1) / nb * P;
    if (slice >= IDX32_LIMIT || (nb > 1 && (size_t)O * nb > OPS_DB_PARTS))
        return status_set_error(DT_ERR_UNSUPPORTED,
                                "cuda %s: the bias gradient of %d channels of %zu values over a "
                                "batch of %d is beyond this kernel (at most %d partial sums, 2^31 values a slice): use "
                                "a smaller --batch",
                                op, O, P, batch, OPS_DB_PARTS);
    ops_scratch *s = NULL;
    if (nb > 1) TRY(scratch(op, &s));
    const unsigned int gy = (unsigned int)(O < 65535 ? O : 65535);
    conv_bias_part_kernel<<<dim3((unsigned int)nb, gy), OPS_BLOCK, 0, g_stream>>>(dy, bf, batch, O, (uint32_t)P, nb,
                                                                                  s ? s->part_db : NULL, db);
    TRY(check_launch(op, "the bias-gradient partial sums", (size_t)O * nb));
    if (nb == 1) return DT_OK;
    conv_bias_final_kernel<<<(unsigned int)((O + OPS_BLOCK - 1) / OPS_BLOCK), OPS_BLOCK, 0, g_stream>>>(s->part_db, O,
                                                                                                        nb, db);
    return check_launch(op, "the bias-gradient sums", (size_t)O);
}

/* ---------------------------------------------------------------- convolution */

/* Shape numbers as the kernels want them. */
typedef struct conv_geo {
    int C, H, W, k, S, pad, Ho, Wo;
} conv_geo;

static conv_geo geo_of(const conv_shape *s)
{
    conv_geo g = {s->c_in, s->h, s->w, s->k, s->stride, s->pad, s->h_out, s->w_out};
    return g;
}

/* im2col of g images starting at x (NCHW, C*H*W apart): element (i, row, pix) with row =
 * (c*k + kh)*k + kw and pix = oh*Wo + ow goes to col[i*img_stride + row*ld + pix] and holds
 * x_i[c][oh*S - pad + kh][ow*S - pad + kw], or 0 in the padding (the CPU's definition, conv.c).
 * Layout (g, K, P): img_stride K*P, ld P; layout (K, g*P): img_stride P, ld g*P.
 * A row kernel: one (image, row) per block turn, its threads along the row's P pixels. */
template <typename T>
static __global__ void im2col_kernel(const T *__restrict__ x, T *__restrict__ col, conv_geo q, int g, size_t img_stride,
                                     size_t ld)
{
    const uint32_t K = (uint32_t)q.C * q.k * q.k, P = (uint32_t)q.Ho * q.Wo, Wo = (uint32_t)q.Wo;
    const size_t plane = (size_t)q.H * q.W, rows = (size_t)g * K;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint32_t row = (uint32_t)(r % K);
        const size_t i = r / K;
        const int kw = (int)(row % (uint32_t)q.k), kh = (int)((row / (uint32_t)q.k) % (uint32_t)q.k);
        const int c = (int)(row / ((uint32_t)q.k * q.k));
        const T *xp = x + ((size_t)i * q.C + c) * plane;
        T *cp = col + i * img_stride + (size_t)row * ld;
        for (uint32_t pix = threadIdx.x; pix < P; pix += blockDim.x) {
            const uint32_t oh = pix / Wo, ow = pix - oh * Wo;
            const int ih = (int)oh * q.S - q.pad + kh, iw = (int)ow * q.S - q.pad + kw;
            T v = (T)0; /* +0 in fp32, and the +0 pattern of fp16/bf16 */
            if (ih >= 0 && ih < q.H && iw >= 0 && iw < q.W) v = xp[(size_t)ih * q.W + iw];
            cp[pix] = v;
        }
    }
}

/* col2im as a gather into g images of dx (NCHW, overwritten): each input pixel (ih, iw) of channel
 * c sums col[(c*k + kh)*k + kw][oh*Wo + ow] over the (kh, kw) with ih = oh*S - pad + kh and
 * iw = ow*S - pad + kw for an output (oh, ow) inside the image, in increasing kh then kw, the order
 * in which the CPU's col2im adds them; pixels that no window reads get 0. The fp32 sum goes to dx32,
 * or (dx16 not NULL) is rounded once into dx16: the bits of the fp32 result rounded by
 * bias_round16 with no bias (its + 0.0f changes no sum that starts at +0). A row kernel: one
 * (image, channel) plane per block turn; S1 (stride 1, the common case) needs no divisions. */
template <bool S1>
static __global__ void col2im_kernel(const float *__restrict__ col, float *__restrict__ dx32,
                                     uint16_t *__restrict__ dx16, int bf, conv_geo q, int g, size_t img_stride,
                                     size_t ld)
{
    const uint32_t W = (uint32_t)q.W, HW = (uint32_t)q.H * q.W;
    const size_t rows = (size_t)g * q.C;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int c = (int)(r % (uint32_t)q.C);
        const size_t i = r / (uint32_t)q.C;
        const float *ci = col + i * img_stride + (size_t)c * q.k * q.k * ld;
        const size_t plane = r * HW;
        for (uint32_t p = threadIdx.x; p < HW; p += blockDim.x) {
            const int ih = (int)(p / W), iw = (int)(p - (uint32_t)ih * W);
            float sum = 0.0f;
            for (int kh = 0; kh < q.k; kh++) {
                const int y = ih + q.pad - kh; /* = oh*S; decreases with kh */
                if (y < 0) break;
                if (!S1 && y % q.S) continue;
                const int oh = S1 ? y : y / q.S;
                if (oh >= q.Ho) continue;
                for (int kw = 0; kw < q.k; kw++) {
                    const int xw = iw + q.pad - kw;
                    if (xw < 0) break;
                    if (!S1 && xw % q.S) continue;
                    const int ow = S1 ? xw : xw / q.S;
                    if (ow >= q.Wo) continue;
                    sum += ci[(size_t)(kh * q.k + kw) * ld + (size_t)oh * q.Wo + ow];
                }
            }
            if (dx16)
                dx16[plane + p] = narrow16(bf, sum);
            else
                dx32[plane + p] = sum;
        }
    }
}

/* Into dx32, or rounded into dx16 (bf: bf16, else fp16) when dx16 is not NULL. */
static dt_status col2im(const char *op, const conv_shape *s, const float *col, float *dx32, uint16_t *dx16, int bf,
                        int g, size_t img_stride, size_t ld)
{
    const size_t rows = (size_t)g * s->c_in, hw = (size_t)s->h * s->w;
    if (rows == 0 || hw == 0) return DT_OK;
    if (s->stride == 1)
        LAUNCH_ROWS(col2im_kernel<true>, rows, hw, col, dx32, dx16, bf, geo_of(s), g, img_stride, ld);
    else
        LAUNCH_ROWS(col2im_kernel<false>, rows, hw, col, dx32, dx16, bf, geo_of(s), g, img_stride, ld);
    return check_launch(op, "col2im", rows * hw);
}

/* dy of g images (NCHW (g, O, P)) -> the GEMM layout (O, g*P): out[o*g*P + i*P + p]. A row
 * kernel: one (image, channel) plane of P values per block turn. */
template <typename T>
static __global__ void gather_dy_kernel(const T *__restrict__ dy, T *__restrict__ out, int g, int O, uint32_t P)
{
    const size_t rows = (size_t)g * O, ld = (size_t)g * P;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const size_t o = r % (uint32_t)O, i = r / (uint32_t)O;
        const T *src = dy + r * P;
        T *dst = out + o * ld + i * P;
        for (uint32_t p = threadIdx.x; p < P; p += blockDim.x) dst[p] = src[p];
    }
}

template <typename T>
static dt_status gather_dy(const char *op, const T *dy, T *out, int g, int O, size_t P)
{
    const size_t rows = (size_t)g * O;
    if (rows == 0 || P == 0) return DT_OK;
    LAUNCH_ROWS(gather_dy_kernel, rows, P, dy, out, g, O, (uint32_t)P);
    return check_launch(op, "the dy gather", rows * P);
}

/* The reverse for a forward's result: the GEMM's (O, g*P) fp32 output yg into g images of NCHW
 * (g, O, P): MODE 0 assigned to acc; MODE 1 with the fp32 bias b32[o] added (the sum the CPU makes,
 * bias first, then the product added); MODE 2 with the 16-bit bias added and rounded into y16
 * (y16 = round(yg + b16[o]), b16 NULL: + 0.0f, the arithmetic of bias_round16_kernel). relu: the
 * value then through ReLU as the relu layer computes it (a conv layer's fused relu, MODE 1 and 2).
 * A row kernel: one (image, channel) plane per block turn. */
template <int MODE>
static __global__ void scatter_y_kernel(const float *__restrict__ yg, float *__restrict__ acc,
                                        const float *__restrict__ b32, uint16_t *__restrict__ y16,
                                        const uint16_t *__restrict__ b16, int bf, int relu, int g, int O, uint32_t P)
{
    const size_t rows = (size_t)g * O, ld = (size_t)g * P;
    const uint16_t inf = inf16_bits(bf);
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const size_t o = r % (uint32_t)O, i = r / (uint32_t)O;
        const float *src = yg + o * ld + i * P;
        const float br = MODE == 1 ? b32[o] : MODE == 2 && b16 ? wide16(bf, b16[o]) : 0.0f;
        for (uint32_t p = threadIdx.x; p < P; p += blockDim.x) {
            if (MODE == 0) acc[r * P + p] = src[p];
            if (MODE == 1) {
                const float v = br + src[p];
                acc[r * P + p] = relu && v < 0.0f ? 0.0f : v;
            }
            if (MODE == 2) {
                const uint16_t h = narrow16(bf, src[p] + br);
                y16[r * P + p] = relu ? relu16(h, inf) : h;
            }
        }
    }
}

template <int MODE>
static dt_status scatter_y(const char *op, const float *yg, float *acc, const float *b32, uint16_t *y16,
                           const uint16_t *b16, int bf, int relu, int g, int O, size_t P)
{
    const size_t rows = (size_t)g * O;
    if (rows == 0 || P == 0) return DT_OK;
    LAUNCH_ROWS(scatter_y_kernel<MODE>, rows, P, yg, acc, b32, y16, b16, bf, relu, g, O, (uint32_t)P);
    return check_launch(op, "the output scatter", rows * P);
}

/* The workspace's second region starts this many floats aligned: 16 bytes. */
#define WS_ALIGN_FLOATS 4

/* Images per group: depends on the shape and is capped by the batch, so a workspace sized for a
 * batch also serves every smaller one. */
static int conv_group(const conv_shape *s)
{
    const size_t K = (size_t)s->c_in * s->k * s->k, P = (size_t)s->h_out * s->w_out, O = (size_t)s->c_out;
    size_t g = CONV_WS_CAP / (P * (K + O));
    if (g < 1) g = 1;
    if (g > CONV_MAX_GROUP) g = CONV_MAX_GROUP;
    if (g > (size_t)s->batch) g = (size_t)s->batch;
    return (int)g;
}

/* Room for a group of G images in the (K, G*P) and (O, G*P) layouts, one GEMM each, as two
 * regions of K*G*P and O*G*P floats: forward, the columns (of T) then the fp32 (O, G*P) result;
 * backward-data, the fp32 column gradient then the gathered dy (of T); backward-filter, the
 * columns then the gathered dy (both of T). The second region starts 16 bytes aligned (a few
 * floats of padding counted here), as cuBLAS's tensor-core kernels want their operands: right
 * after an odd count of 16-bit columns it would sit 2 bytes off. A pointwise forward or
 * backward-data uses none. */
size_t cuda_conv_ws_floats(backend *be, const conv_shape *s)
{
    (void)be;
    const size_t K = (size_t)s->c_in * s->k * s->k, P = (size_t)s->h_out * s->w_out, O = (size_t)s->c_out;
    return (size_t)conv_group(s) * P * (K + O) + WS_ALIGN_FLOATS;
}

/* The second region of the workspace: after the first region's K*G*P floats, rounded up to 16
 * bytes (the workspace itself comes from the pool, aligned wider). */
static float *ws_second(float *ws, int K, int G, int P)
{
    const size_t first = (size_t)K * G * P;
    return ws + (first + WS_ALIGN_FLOATS - 1) / WS_ALIGN_FLOATS * WS_ALIGN_FLOATS;
}

template <typename T>
static dt_status im2col(const char *op, const conv_shape *s, const T *x, T *col, int g, size_t img_stride, size_t ld)
{
    const size_t rows = (size_t)g * s->c_in * s->k * s->k, P = (size_t)s->h_out * s->w_out;
    if (rows == 0 || P == 0) return DT_OK;
    LAUNCH_ROWS(im2col_kernel, rows, P, x, col, geo_of(s), g, img_stride, ld);
    return check_launch(op, "im2col", rows * P);
}

/* The GEMMs of the drivers for either storage: fp32 (cublasSgemm*) or 16-bit (cublasGemm*Ex on the
 * tensor cores), C in fp32 either way. count < 0: one plain GEMM. */
static dt_status gemm_t(const char *op, dt_dtype, int ta, int tb, int m, int n, int k, const float *a, int lda,
                        long long sa, const float *b, int ldb, long long sb, float beta, float *c, int ldc,
                        long long sc, int count)
{
    return rm_gemm_batched(op, ta, tb, m, n, k, 1.0f, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count);
}

static dt_status gemm_t(const char *op, dt_dtype t, int ta, int tb, int m, int n, int k, const uint16_t *a, int lda,
                        long long sa, const uint16_t *b, int ldb, long long sb, float beta, float *c, int ldc,
                        long long sc, int count)
{
    return rm_gemm16_batched(op, t, ta, tb, m, n, k, a, lda, sa, b, ldb, sb, beta, c, DT_F32, ldc, sc, count);
}

/* The forward: per group of images, im2col into the (K, g*P) layout and one GEMM, yg (O, g*P) =
 * W (O, K) col (K, g*P), whose result is scattered into the images: into acc (B, O, Ho, Wo),
 * assigned (MODE 0) or with the fp32 bias b32 added (MODE 1); or, MODE 2, with the bias b16 added
 * and rounded into y16; relu: through ReLU too (not for a pointwise convolution's GEMMs, which
 * write their result themselves: the caller passes that through afterwards). One GEMM over the
 * group rather than one per image: at the cnn's shapes a per-image GEMM (64 x 196 x 288) kept the
 * tensor cores about 1.5% busy. A pointwise convolution reads each image as its own column
 * matrix: a strided-batched GEMM straight into acc, which holds the bias already when MODE is 1
 * (beta 1). */
template <int MODE, typename T>
static dt_status conv_fwd_t(const char *op, dt_dtype t, const conv_shape *s, const T *x, const T *w, float *acc,
                            const float *b32, const uint16_t *b16, uint16_t *y16, float *ws, int relu)
{
    // x (B, C, H, W), w (O, C, k, k), acc or y16 (B, O, Ho, Wo)
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    T *colws = (T *)(void *)ws;
    float *yg = ws_second(ws, K, G, P);
    const int pointwise = conv_shape_pointwise(s);
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G, ld = g * P;
        const T *xb = x + (size_t)b0 * in_sz;
        if (pointwise) { /* acc_i (O, P) = W (O, K) x_i (K, P) [+ acc_i] */
            TRY(gemm_t(op, t, 0, 0, O, P, K, w, K, 0, xb, P, (long long)K * P, MODE == 1 ? 1.0f : 0.0f,
                       acc + (size_t)b0 * out_sz, P, (long long)out_sz, g));
            continue;
        }
        TRY(im2col(op, s, xb, colws, g, (size_t)P, (size_t)ld));
        TRY(gemm_t(op, t, 0, 0, O, ld, K, w, K, 0, colws, ld, 0, 0.0f, yg, ld, 0, -1));
        float *accb = acc ? acc + (size_t)b0 * out_sz : NULL; /* MODE 2 writes y16 instead */
        uint16_t *y16b = y16 ? y16 + (size_t)b0 * out_sz : NULL;
        TRY(scatter_y<MODE>(op, yg, accb, b32, y16b, b16, t == DT_BF16, relu, g, O, (size_t)P));
    }
    return DT_OK;
}

/* dx (B, C, H, W) = conv^T(dy, w): per group dy gathered into the (O, g*P) layout, one GEMM dcol
 * (K, g*P) = W^T (K, O) dy (O, g*P) in fp32, then col2im from that layout (one GEMM per group, as
 * the forward) into dx32, or rounded into dx16 when it is not NULL. Pointwise: per image dx_i (K,
 * P) = W^T dy_i, a strided-batched GEMM into dx32 (dx16 must be NULL: the caller rounds). */
template <typename T>
static dt_status conv_bwd_data_t(const char *op, dt_dtype t, const conv_shape *s, const T *dy, const T *w, float *dx32,
                                 uint16_t *dx16, float *ws)
{
    // dy (B, O, Ho, Wo), w (O, C, k, k), dx32 (B, C, H, W)
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    const int pointwise = conv_shape_pointwise(s);
    T *dyg = (T *)(void *)ws_second(ws, K, G, P);
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G, ld = g * P;
        float *dxb = dx16 ? NULL : dx32 + (size_t)b0 * in_sz;
        uint16_t *dxb16 = dx16 ? dx16 + (size_t)b0 * in_sz : NULL;
        const T *dyb = dy + (size_t)b0 * out_sz;
        if (pointwise) {
            if (dx16)
                return status_set_error(DT_ERR_INTERNAL, "cuda %s: a pointwise data gradient is made in fp32", op);
            TRY(gemm_t(op, t, 1, 0, K, P, O, w, K, 0, dyb, P, (long long)out_sz, 0.0f, dxb, P, (long long)K * P, g));
            continue;
        }
        TRY(gather_dy(op, dyb, dyg, g, O, (size_t)P));
        TRY(gemm_t(op, t, 1, 0, K, ld, O, w, K, 0, dyg, ld, 0, 0.0f, ws, ld, 0, -1));
        TRY(col2im(op, s, ws, dxb, dxb16, t == DT_BF16, g, (size_t)P, (size_t)ld));
    }
    return DT_OK;
}

/* dw (O, C, k, k) in fp32, overwritten, and db (O, NULL to skip) from x and dy: the bias gradient
 * from dy where it lies, then per group dW (+)= dy_g (O, g*P) col^T (g*P, K) over the columns and
 * the gathered dy ((K + O) * G * P values of T in the workspace). fp32 takes one plain GEMM a
 * group and 16-bit a batch of one: the calls each path was checked with. */
template <typename T>
static dt_status conv_bwd_filter_t(const char *op, dt_dtype t, const conv_shape *s, const T *x, const T *dy, float *dw,
                                   float *db, float *ws)
{
    // x (B, C, H, W), dy (B, O, Ho, Wo), dw (O, C, k, k), db (O) or NULL
    const int O = s->c_out, K = s->c_in * s->k * s->k, P = s->h_out * s->w_out, G = conv_group(s);
    const size_t in_sz = (size_t)s->c_in * s->h * s->w, out_sz = (size_t)O * P;
    if (db) TRY(conv_bias_grad(op, dy, t == DT_BF16, s->batch, O, (size_t)P, db));
    T *col = (T *)(void *)ws, *dyg = (T *)(void *)ws_second(ws, K, G, P);
    const int count = sizeof(T) == sizeof(float) ? -1 : 1;
    for (int b0 = 0; b0 < s->batch; b0 += G) {
        const int g = s->batch - b0 < G ? s->batch - b0 : G, ld = g * P;
        /* col (K, g*P): image i in columns [i*P, (i+1)*P) */
        TRY(im2col(op, s, x + (size_t)b0 * in_sz, col, g, (size_t)P, (size_t)ld));
        TRY(gather_dy(op, dy + (size_t)b0 * out_sz, dyg, g, O, (size_t)P));
        /* the first group overwrites */
        TRY(gemm_t(op, t, 0, 1, O, K, ld, dyg, ld, 0, col, ld, 0, b0 ? 1.0f : 0.0f, dw, K, 0, count));
    }
    return DT_OK;
}

dt_status cuda_conv_fwd_relu(const conv_shape *s, const float *x, const float *w, const float *b, float *y, float *ws,
                             int relu)
{
    const size_t n = (size_t)s->batch * s->c_out * s->h_out * s->w_out;
    /* Without a bias, or pointwise: the GEMMs write y themselves, ReLU a pass after. */
    if (!b) {
        TRY(conv_fwd_t<0>("conv_fwd", DT_F32, s, x, w, y, NULL, NULL, NULL, ws, 0));
        return relu ? cuda_relu_fwd(NULL, y, y, n) : DT_OK;
    }
    /* bias + product, as the CPU adds them: by the scatter, or (pointwise) the bias broadcast
     * first, group by group, and the GEMM adding to it (beta 1). */
    if (conv_shape_pointwise(s)) {
        const int O = s->c_out, P = s->h_out * s->w_out, G = conv_group(s);
        for (int b0 = 0; b0 < s->batch; b0 += G) {
            const int g = s->batch - b0 < G ? s->batch - b0 : G;
            TRY(bias_broadcast("conv_fwd", y + (size_t)b0 * O * P, b, (size_t)g * O, (size_t)P, (size_t)O, 1));
        }
        TRY(conv_fwd_t<1>("conv_fwd", DT_F32, s, x, w, y, b, NULL, NULL, ws, 0));
        return relu ? cuda_relu_fwd(NULL, y, y, n) : DT_OK;
    }
    return conv_fwd_t<1>("conv_fwd", DT_F32, s, x, w, y, b, NULL, NULL, ws, relu);
}

dt_status cuda_conv_fwd(backend *be, const conv_shape *s, const float *x, const float *w, const float *b, float *y,
                        float *ws)
{
    (void)be;
    return cuda_conv_fwd_relu(s, x, w, b, y, ws, 0);
}

dt_status cuda_conv_bwd_data(backend *be, const conv_shape *s, const float *dy, const float *w, float *dx, float *ws)
{
    (void)be;
    return conv_bwd_data_t("conv_bwd_data", DT_F32, s, dy, w, dx, NULL, ws);
}

dt_status cuda_conv_bwd_filter(backend *be, const conv_shape *s, const float *x, const float *dy, float *dw, float *db,
                               float *ws)
{
    (void)be;
    return conv_bwd_filter_t("conv_bwd_filter", DT_F32, s, x, dy, dw, db, ws);
}

/* ---------------------------------------------------------------- 16-bit convolutions (AMP) */

/* y16 = round(y32 + bias) as `rows` rows of `per` values, the bias as in bias_broadcast_kernel
 * (b16 NULL: + 0.0f, which is what rounding alone gives but for -0, made +0 as before); relu: then
 * through ReLU as the relu layer computes it. */
template <bool CHAN>
static __global__ void bias_round16_kernel(int bf, int relu, const float *__restrict__ y32,
                                           const uint16_t *__restrict__ b16, uint16_t *__restrict__ y16, size_t rows,
                                           uint32_t per, uint32_t outer)
{
    const uint16_t inf = inf16_bits(bf);
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *src = y32 + r * per;
        uint16_t *dst = y16 + r * per;
        const float br = CHAN && b16 ? wide16(bf, b16[r % outer]) : 0.0f;
        for (uint32_t p = threadIdx.x; p < per; p += blockDim.x) {
            const uint16_t h = narrow16(bf, src[p] + (CHAN || !b16 ? br : wide16(bf, b16[p])));
            dst[p] = relu ? relu16(h, inf) : h;
        }
    }
}

static dt_status bias_round16(const char *op, dt_dtype t, const float *y32, const uint16_t *b16, uint16_t *y16,
                              size_t rows, size_t per, size_t outer, int chan, int relu)
{
    if (rows == 0 || per == 0) return DT_OK;
    if (chan)
        LAUNCH_ROWS(bias_round16_kernel<true>, rows, per, t == DT_BF16, relu, y32, b16, y16, rows, (uint32_t)per,
                    (uint32_t)outer);
    else
        LAUNCH_ROWS(bias_round16_kernel<false>, rows, per, t == DT_BF16, relu, y32, b16, y16, rows, (uint32_t)per,
                    (uint32_t)outer);
    return check_launch(op, "bias and rounding", rows * per);
}

dt_status cuda_bias_to16(dt_dtype t, const float *y32, const uint16_t *b16, uint16_t *y16, int rows, int cols, int relu)
{
    if (rows <= 0 || cols <= 0) return DT_OK;
    return bias_round16("bias_to16", t, y32, b16, y16, (size_t)rows, (size_t)cols, (size_t)cols, 0, relu);
}

dt_status cuda_conv_fwd16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                          float *y32, uint16_t *y, float *ws, int relu)
{
    /* The bias, the rounding (and ReLU) as the GEMM's result is scattered into the images; a
     * pointwise convolution's GEMMs write y32, rounded after. */
    if (!conv_shape_pointwise(s)) return conv_fwd_t<2>("conv_fwd16", t, s, x, w, NULL, NULL, b, y, ws, relu);
    TRY(conv_fwd_t<0>("conv_fwd16", t, s, x, w, y32, NULL, NULL, NULL, ws, 0));
    if (s->batch <= 0) return DT_OK;
    return bias_round16("conv_fwd16", t, y32, b, y, (size_t)s->batch * s->c_out, (size_t)s->h_out * s->w_out,
                        (size_t)s->c_out, 1, relu);
}

dt_status cuda_conv_bwd_data16(dt_dtype t, const conv_shape *s, const uint16_t *dy, const uint16_t *w, float *dx32,
                               uint16_t *dx, float *ws)
{
    /* col2im rounds its sums into dx itself; a pointwise convolution's GEMMs write dx32, rounded
     * after. */
    if (!conv_shape_pointwise(s)) return conv_bwd_data_t("conv_bwd_data16", t, s, dy, w, NULL, dx, ws);
    TRY(conv_bwd_data_t("conv_bwd_data16", t, s, dy, w, dx32, NULL, ws));
    if (s->batch <= 0) return DT_OK;
    return bias_round16("conv_bwd_data16", t, dx32, NULL, dx, (size_t)s->batch * s->c_in, (size_t)s->h * s->w, 1, 1, 0);
}

dt_status cuda_conv_bwd_filter16(dt_dtype t, const conv_shape *s, const uint16_t *x, const uint16_t *dy, float *dw,
                                 float *db, float *ws)
{
    return conv_bwd_filter_t("conv_bwd_filter16", t, s, x, dy, dw, db, ws);
}
