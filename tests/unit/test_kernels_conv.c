/*
 * test_kernels_conv.c - the CPU table's convolution: conv_shape_init's output sizes and
 * refusals, then forward against a direct fp64 convolution and both backward ops against central
 * differences, over strides, paddings, 1x1 and large kernels and the batch grouping of the GEMMs.
 * Shared helpers and references: kernels_fixture.h.
 */
#include "kernels_fixture.h"

static size_t conv_in_n(const conv_shape *s) { return (size_t)s->batch * s->c_in * s->h * s->w; }
static size_t conv_out_n(const conv_shape *s) { return (size_t)s->batch * s->c_out * s->h_out * s->w_out; }
static size_t conv_w_n(const conv_shape *s) { return (size_t)s->c_out * s->c_in * s->k * s->k; }

/* ---------------------------------------------------------------- conv_shape_init */

static void test_conv_shape_init(void **st)
{
    (void)st;
    conv_shape s = {.batch = 2, .c_in = 3, .h = 7, .w = 5, .c_out = 4, .k = 3, .stride = 2, .pad = 1};
    assert_int_equal(conv_shape_init(&s), DT_OK);
    assert_int_equal(s.h_out, 4); /* (7 + 2 - 3) / 2 + 1 */
    assert_int_equal(s.w_out, 3); /* (5 + 2 - 3) / 2 + 1 */
    s = (conv_shape){.batch = 1, .c_in = 1, .h = 3, .w = 3, .c_out = 1, .k = 5, .stride = 1, .pad = 1};
    assert_int_equal(conv_shape_init(&s), DT_OK);
    assert_int_equal(s.h_out, 1);
    assert_int_equal(s.w_out, 1);

    status_clear_error();
    s = (conv_shape){.batch = 1, .c_in = 1, .h = 3, .w = 3, .c_out = 1, .k = 5, .stride = 1, .pad = 0};
    assert_int_equal(conv_shape_init(&s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "conv kernel 5 does not fit input 3x3 with padding 0"));
    /* Non-square: fits the height, not the width. */
    s = (conv_shape){.batch = 1, .c_in = 1, .h = 7, .w = 3, .c_out = 1, .k = 5, .stride = 1, .pad = 0};
    assert_int_equal(conv_shape_init(&s), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "input 7x3"));
    const struct {
        conv_shape s;
        const char *msg;
    } bad[] = {
        {{.batch = 0, .c_in = 1, .h = 4, .w = 4, .c_out = 1, .k = 3, .stride = 1, .pad = 0}, "batch 0"},
        {{.batch = 1, .c_in = 0, .h = 4, .w = 4, .c_out = 1, .k = 3, .stride = 1, .pad = 0}, "input channels 0"},
        {{.batch = 1, .c_in = 1, .h = -2, .w = 4, .c_out = 1, .k = 3, .stride = 1, .pad = 0}, "height -2"},
        {{.batch = 1, .c_in = 1, .h = 4, .w = 0, .c_out = 1, .k = 3, .stride = 1, .pad = 0}, "width 0"},
        {{.batch = 1, .c_in = 1, .h = 4, .w = 4, .c_out = 0, .k = 3, .stride = 1, .pad = 0}, "output channels 0"},
        {{.batch = 1, .c_in = 1, .h = 4, .w = 4, .c_out = 1, .k = 0, .stride = 1, .pad = 0}, "kernel 0"},
        {{.batch = 1, .c_in = 1, .h = 4, .w = 4, .c_out = 1, .k = 3, .stride = 0, .pad = 0}, "stride 0"},
        {{.batch = 1, .c_in = 1, .h = 4, .w = 4, .c_out = 1, .k = 3, .stride = 1, .pad = -1}, "padding -1"},
        {{.batch = 1, .c_in = 1, .h = 65536, .w = 65536, .c_out = 1, .k = 1, .stride = 1, .pad = 0}, "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        conv_shape t = bad[i].s;
        status_clear_error();
        assert_int_equal(conv_shape_init(&t), DT_ERR_INVALID_ARG);
        if (!strstr(dt_last_error(), bad[i].msg)) fail_msg("case %zu: '%s' lacks '%s'", i, dt_last_error(), bad[i].msg);
    }
}

/* ---------------------------------------------------------------- convolution */

typedef struct conv_ctx {
    conv_shape s;
    tensor x, w, b, r;
    double *y;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    ref_conv(&c->s, c->x.d, c->w.d, c->b.d, c->y);
    return dot(c->y, c->r.d, conv_out_n(&c->s));
}

static void conv_case(int batch, int c_in, int h, int w, int c_out, int kk, int stride, int pad)
{
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    conv_ctx c = {
        .s = {.batch = batch, .c_in = c_in, .h = h, .w = w, .c_out = c_out, .k = kk, .stride = stride, .pad = pad}};
    assert_int_equal(conv_shape_init(&c.s), DT_OK);
    const size_t nx = conv_in_n(&c.s), ny = conv_out_n(&c.s), nw = conv_w_n(&c.s);
    c.x = tensor_rand(nx, 1.0, 0);
    c.w = tensor_rand(nw, 1.0, 0);
    c.b = tensor_rand((size_t)c_out, 1.0, 0);
    c.r = tensor_rand(ny, 1.0, 0);
    c.y = calloc(ny, sizeof(double));
    float *ws = nan_buf(k->conv_ws_floats(be, &c.s)); /* scratch of garbage must not matter */
    /* A workspace sized for a batch also serves every smaller one (callers size it once). */
    for (int bs = 1; bs < batch; bs++) {
        conv_shape sb = c.s;
        sb.batch = bs;
        assert_true(k->conv_ws_floats(be, &sb) <= k->conv_ws_floats(be, &c.s));
    }
    float *y = nan_buf(ny), *dx = nan_buf(nx), *dw = nan_buf(nw), *db = nan_buf((size_t)c_out);
    char what[128];

    k->conv_fwd(be, &c.s, c.x.f, c.w.f, c.b.f, y, ws);
    ref_conv(&c.s, c.x.d, c.w.d, c.b.d, c.y);
    snprintf(what, sizeof what, "conv y B%d C%d %dx%d O%d k%d s%d p%d", batch, c_in, h, w, c_out, kk, stride, pad);
    expect_all_close(what, y, c.y, ny, TOL_FWD);
    /* the first image alone (in the same workspace) gives the same output */
    if (batch > 1) {
        conv_shape s1 = c.s;
        s1.batch = 1;
        float *y1 = nan_buf(ny / batch);
        k->conv_fwd(be, &s1, c.x.f, c.w.f, c.b.f, y1, ws);
        expect_all_close(what, y1, c.y, ny / batch, TOL_FWD);
        free(y1);
    }
    /* without a bias */
    k->conv_fwd(be, &c.s, c.x.f, c.w.f, NULL, y, ws);
    ref_conv(&c.s, c.x.d, c.w.d, NULL, c.y);
    expect_all_close(what, y, c.y, ny, TOL_FWD);

    k->conv_bwd_data(be, &c.s, c.r.f, c.w.f, dx, ws);
    k->conv_bwd_filter(be, &c.s, c.x.f, c.r.f, dw, db, ws);
    snprintf(what, sizeof what, "conv dx B%d C%d %dx%d O%d k%d s%d p%d", batch, c_in, h, w, c_out, kk, stride, pad);
    check_grad(what, conv_loss, &c, c.x.d, nx, dx, TOL_GRAD);
    what[6] = 'W';
    check_grad(what, conv_loss, &c, c.w.d, nw, dw, TOL_GRAD);
    what[6] = 'b';
    check_grad(what, conv_loss, &c, c.b.d, (size_t)c_out, db, TOL_GRAD);
    /* db NULL: dw alone, the same values (up to rounding: the GEMMs may differ in shape) */
    float *dw2 = nan_buf(nw);
    k->conv_bwd_filter(be, &c.s, c.x.f, c.r.f, dw2, NULL, ws);
    what[6] = 'W';
    for (size_t i = 0; i < nw; i++) expect_close(what, i, dw2[i], dw[i], TOL_FWD);
    free(dw2);

    free(ws);
    free(y);
    free(dx);
    free(dw);
    free(db);
    free(c.y);
    tensor_free(&c.x);
    tensor_free(&c.w);
    tensor_free(&c.b);
    tensor_free(&c.r);
}

static void test_conv(void **st)
{
    (void)st;
    /* Small outputs: several images share one GEMM (fewer than 128 output pixels each). */
    conv_case(1, 1, 5, 7, 1, 3, 1, 0); /* batch 1, odd non-square input, no padding */
    conv_case(2, 3, 5, 7, 4, 3, 1, 1); /* 3 channels, "same" padding */
    conv_case(2, 3, 7, 5, 2, 3, 2, 1); /* stride 2 */
    conv_case(1, 2, 6, 6, 3, 5, 1, 2); /* 5x5 kernel, padding 2 ("same") */
    conv_case(2, 3, 5, 7, 2, 5, 1, 1); /* padding 1 with a 5x5 kernel: smaller output */
    conv_case(3, 3, 5, 7, 2, 1, 1, 0); /* 1x1 kernel: no im2col */
    conv_case(2, 2, 5, 7, 3, 1, 2, 0); /* 1x1 kernel, stride 2 */
    conv_case(2, 3, 4, 9, 2, 3, 2, 2); /* padding 2, stride 2, wide input */
    conv_case(1, 1, 3, 3, 1, 5, 1, 1); /* kernel larger than the input */
    conv_case(9, 2, 6, 5, 3, 3, 1, 1); /* more images than one GEMM group, with a remainder */
    conv_case(2, 1, 2, 8, 2, 2, 2, 0); /* even kernel, flat input */
    conv_case(2, 2, 8, 8, 3, 3, 3, 1); /* stride 3 */
    conv_case(1, 4, 1, 1, 3, 1, 1, 0); /* 1x1 image */
    conv_case(2, 1, 1, 6, 2, 3, 1, 1); /* a single input row with padding */
    conv_case(3, 8, 3, 3, 4, 3, 1, 0); /* 1x1 output of many channels (deep K, one pixel) */
    /* Outputs of 128 pixels or more: one image per GEMM, the bias inside the forward GEMM. */
    conv_case(2, 2, 12, 12, 3, 3, 1, 1); /* "same" 3x3 */
    conv_case(2, 1, 12, 12, 2, 5, 1, 2); /* "same" 5x5 */
    conv_case(2, 2, 18, 12, 2, 3, 1, 0); /* no padding: 16x10 */
    conv_case(1, 2, 25, 23, 2, 3, 2, 1); /* stride 2: 13x12 */
    conv_case(2, 3, 12, 11, 2, 1, 1, 0); /* 1x1 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_shape_init),
        cmocka_unit_test(test_conv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
