/*
 * test_cuda_ops_conv.c - the CUDA table's convolution (forward, backward data, backward
 * filter) against the CPU table: strided, padded and pointwise shapes, batches of 1 to 67, the
 * forward with a relu layer fused (the bits of the plain one through ReLU), a
 * convolution big enough to be split into image groups on the GPU (rerun with a smaller batch in
 * the same workspace, and its filter gradient rerun bit for bit), and the 16-bit filter gradient.
 *
 * Tolerances: y, dx, dW: max |gpu - cpu| <= 1e-4 * max |cpu| (fp32 GEMMs summing in different
 * orders). db: 1e-5 relative to max |db| (both sum in double, in different orders, then round
 * once). The 16-bit filter gradient against the fp32 GPU op on the widened values: db bit for bit
 * (the same fixed-order sums), dW within 1e-4.
 */
#include "cuda_ops_fixture.h"

/* ---------------------------------------------------------------- convolution */

/* One shape: forward, backward-data and backward-filter on both tables, with workspaces sized for
 * `ws_batch` (>= s.batch). Returns nothing; counts failures. With `twice`, the GPU backward-filter
 * runs again and must give the same bits. */
static void check_conv_shape(conv_shape s, int ws_batch, int bias, int twice)
{
    if (conv_shape_init(&s) != DT_OK) {
        check(0, "conv_shape_init: %s", dt_last_error());
        return;
    }
    conv_shape big = s;
    big.batch = ws_batch;
    const size_t cws = cpu_be->ops->conv_ws_floats(cpu_be, &big), gws = gpu_be->ops->conv_ws_floats(gpu_be, &big);
    const size_t nx = (size_t)s.batch * s.c_in * s.h * s.w, nw = (size_t)s.c_out * s.c_in * s.k * s.k;
    const size_t ny = (size_t)s.batch * s.c_out * s.h_out * s.w_out, O = (size_t)s.c_out;
    float *x = fmalloc(nx), *w = fmalloc(nw), *b = fmalloc(O), *dy = fmalloc(ny), *ws = fmalloc(cws);
    float *y = fmalloc(ny), *dx = fmalloc(nx), *dw = fmalloc(nw), *db = fmalloc(O);
    float *gy = fmalloc(ny), *gdx = fmalloc(nx), *gdw = fmalloc(nw), *gdb = fmalloc(O);
    fill(x, nx, 1.0f), fill(w, nw, 0.5f), fill(b, O, 1.0f), fill(dy, ny, 1.0f);
    float *d_x = dcopy(x, nx), *d_w = dcopy(w, nw), *d_b = dcopy(b, O), *d_dy = dcopy(dy, ny);
    float *d_y = dfloats(ny), *d_dx = dfloats(nx), *d_dw = dfloats(nw), *d_db = dfloats(O), *d_ws = dfloats(gws);
    /* poison the GPU outputs so that anything left unwritten shows */
    cuda_ok(cudaMemsetAsync(d_y, 0xff, ny * sizeof(float), stream), "memset");
    cuda_ok(cudaMemsetAsync(d_dx, 0xff, nx * sizeof(float), stream), "memset");
    cuda_ok(cudaMemsetAsync(d_dw, 0xff, nw * sizeof(float), stream), "memset");
    cuda_ok(cudaMemsetAsync(d_db, 0xff, O * sizeof(float), stream), "memset");

    CPU(conv_fwd, &s, x, w, bias ? b : NULL, y, ws);
    CPU(conv_bwd_data, &s, dy, w, dx, ws);
    CPU(conv_bwd_filter, &s, x, dy, dw, bias ? db : NULL, ws);
    GPU(conv_fwd, &s, d_x, d_w, bias ? d_b : NULL, d_y, d_ws);
    GPU(conv_bwd_data, &s, d_dy, d_w, d_dx, d_ws);
    GPU(conv_bwd_filter, &s, d_x, d_dy, d_dw, bias ? d_db : NULL, d_ws);
    ops_ok("conv");
    down(gy, d_y, ny * sizeof *gy);
    down(gdx, d_dx, nx * sizeof *gdx);
    down(gdw, d_dw, nw * sizeof *gdw);
    char tag[96], what[128];
    snprintf(tag, sizeof tag, "conv %dx%dx%dx%d->%d k%d s%d p%d%s", s.batch, s.c_in, s.h, s.w, s.c_out, s.k, s.stride,
             s.pad, ws_batch > s.batch ? " (big ws)" : "");
    snprintf(what, sizeof what, "%s y", tag);
    cmp_rel(what, gy, y, ny, 1e-4);
    snprintf(what, sizeof what, "%s dx", tag);
    cmp_rel(what, gdx, dx, nx, 1e-4);
    snprintf(what, sizeof what, "%s dW", tag);
    cmp_rel(what, gdw, dw, nw, 1e-4);
    if (bias) {
        down(gdb, d_db, O * sizeof *gdb);
        snprintf(what, sizeof what, "%s db", tag);
        cmp_rel(what, gdb, db, O, 1e-5);
    }
    /* The forward with the relu layer after it fused (in the scatter, or a pass after for the
     * pointwise and bias-less ones): the bits of the plain forward through ReLU. */
    {
        float *gyr = fmalloc(ny);
        G16(cuda_conv_fwd_relu(&s, d_x, d_w, bias ? d_b : NULL, d_y, d_ws, 1));
        ops_ok("conv relu");
        down(gyr, d_y, ny * sizeof *gyr);
        for (size_t i = 0; i < ny; i++) gy[i] = gy[i] < 0.0f ? 0.0f : gy[i];
        snprintf(what, sizeof what, "%s relu y", tag);
        cmp_bits(what, gyr, gy, ny, 4);
        free(gyr);
    }
    if (twice) {
        float *gdw2 = fmalloc(nw), *gdb2 = fmalloc(O);
        GPU(conv_bwd_filter, &s, d_x, d_dy, d_dw, bias ? d_db : NULL, d_ws);
        ops_ok("conv again");
        down(gdw2, d_dw, nw * sizeof *gdw2);
        down(gdb2, d_db, O * sizeof *gdb2);
        snprintf(what, sizeof what, "%s dW, db rerun", tag);
        cmp_bits(what, gdw2, gdw, nw, 4);
        if (bias) cmp_bits(what, gdb2, gdb, O, 4);
        free(gdw2), free(gdb2);
    }
    cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_dy);
    cudaFree(d_y), cudaFree(d_dx), cudaFree(d_dw), cudaFree(d_db), cudaFree(d_ws);
    free(x), free(w), free(b), free(dy), free(ws), free(y), free(dx), free(dw), free(db);
    free(gy), free(gdx), free(gdw), free(gdb);
}

/* The 16-bit convolution's filter gradient: db equals, bit for bit, the fp32 op's db on the
 * widened dy (the same fixed-order double sums, reading 16-bit dy in place); dW within 1e-4 of
 * the fp32 op's on the widened values (the products are exact either way, only the summation
 * order differs). */
static void check_conv16_filter(conv_shape s)
{
    if (conv_shape_init(&s) != DT_OK) {
        check(0, "conv_shape_init: %s", dt_last_error());
        return;
    }
    const size_t nx = (size_t)s.batch * s.c_in * s.h * s.w, ny = (size_t)s.batch * s.c_out * s.h_out * s.w_out;
    const size_t nw = (size_t)s.c_out * s.c_in * s.k * s.k, no = (size_t)s.c_out;
    float *x = fmalloc(nx), *dy = fmalloc(ny), *xr = fmalloc(nx), *dyr = fmalloc(ny);
    float *dw = fmalloc(nw), *db = fmalloc(no), *dw16 = fmalloc(nw), *db16 = fmalloc(no);
    uint16_t *x16 = xmalloc(nx * 2), *dy16 = xmalloc(ny * 2);
    fill(x, nx, 1.0f);
    fill(dy, ny, 1.0f);
    float *d_ws = dfloats(gpu_be->ops->conv_ws_floats(gpu_be, &s)), *d_dw = dfloats(nw), *d_db = dfloats(no),
          *d_dw16 = dfloats(nw), *d_db16 = dfloats(no);
    for (int bf = 0; bf <= 1; bf++) {
        const dt_dtype t = bf ? DT_BF16 : DT_F16;
        cpu_cast_f32_to_16(t, x, x16, nx);
        cpu_cast_16_to_f32(t, x16, xr, nx);
        cpu_cast_f32_to_16(t, dy, dy16, ny);
        cpu_cast_16_to_f32(t, dy16, dyr, ny);
        float *d_x = dcopy(xr, nx), *d_dy = dcopy(dyr, ny);
        uint16_t *d_x16 = dmalloc(nx * 2), *d_dy16 = dmalloc(ny * 2);
        up(d_x16, x16, nx * 2);
        up(d_dy16, dy16, ny * 2);
        GPU(conv_bwd_filter, &s, d_x, d_dy, d_dw, d_db, d_ws);
        G16(cuda_conv_bwd_filter16(t, &s, d_x16, d_dy16, d_dw16, d_db16, d_ws));
        ops_ok("conv16 filter gradient");
        down(dw, d_dw, nw * 4), down(db, d_db, no * 4), down(dw16, d_dw16, nw * 4), down(db16, d_db16, no * 4);
        char what[128];
        snprintf(what, sizeof what, "conv16 %s %dx%dx%dx%d->%d k%d db", bf ? "bf16" : "fp16", s.batch, s.c_in, s.h, s.w,
                 s.c_out, s.k);
        cmp_bits(what, db16, db, no, 4);
        snprintf(what, sizeof what, "conv16 %s %dx%dx%dx%d->%d k%d dW", bf ? "bf16" : "fp16", s.batch, s.c_in, s.h, s.w,
                 s.c_out, s.k);
        cmp_rel(what, dw16, dw, nw, 1e-4);
        cudaFree(d_x), cudaFree(d_dy), cudaFree(d_x16), cudaFree(d_dy16);
    }
    cudaFree(d_ws), cudaFree(d_dw), cudaFree(d_db), cudaFree(d_dw16), cudaFree(d_db16);
    free(x), free(dy), free(xr), free(dyr), free(dw), free(db), free(dw16), free(db16), free(x16), free(dy16);
}

static void check_conv(void)
{
    /* batch, c_in, h, w, c_out, k, stride, pad */
    const conv_shape shapes[] = {
        {3, 2, 9, 9, 4, 3, 2, 1, 0, 0},     /* stride 2, padding 1, batch 3 */
        {1, 3, 8, 8, 5, 3, 1, 1, 0, 0},     /* "same", batch 1 */
        {2, 4, 7, 7, 3, 1, 1, 0, 0, 0},     /* pointwise */
        {5, 3, 10, 11, 6, 4, 3, 2, 0, 0},   /* non-square, k 4, stride 3, padding 2 */
        {4, 1, 28, 28, 8, 5, 1, 0, 0, 0},   /* MNIST-like first layer */
        {2, 3, 6, 6, 2, 3, 2, 0, 0, 0},     /* stride 2, a trailing row/column no window reads */
        {67, 8, 14, 14, 32, 3, 1, 1, 0, 0}, /* the bias gradient in 33 uneven slices of the batch */
        {4, 16, 3, 3, 2048, 1, 1, 0, 0, 0}, /* 2048 channels: the bias gradient in one pass */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_conv_shape(shapes[i], shapes[i].batch, 1, 0);
    check_conv_shape(shapes[0], shapes[0].batch, 0, 0); /* no bias */
    /* 64x64x64 -> 64, k 3: 2.6M floats of columns per image, so the GPU runs groups of 6 images
     * (6 + 2 for batch 8); then batch 3 in the workspace of batch 8. */
    const conv_shape big = {8, 64, 64, 64, 64, 3, 1, 1, 0, 0};
    check_conv_shape(big, 8, 1, 1);
    conv_shape small = big;
    small.batch = 3;
    check_conv_shape(small, 8, 1, 0);
    const conv_shape f16[] = {
        {67, 8, 14, 14, 32, 3, 1, 1, 0, 0}, {4, 16, 3, 3, 2048, 1, 1, 0, 0, 0}, {5, 3, 10, 11, 6, 4, 3, 2, 0, 0}};
    for (size_t i = 0; i < sizeof f16 / sizeof *f16; i++) check_conv16_filter(f16[i]);
}

int main(void)
{
    const cuda_check_fn checks[] = {check_conv};
    return cuda_ops_main(NULL, checks, sizeof checks / sizeof *checks);
}
