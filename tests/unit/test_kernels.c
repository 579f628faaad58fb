/*
 * test_kernels.c - the CPU op table (kernels/cpu/) against naive fp64 references written here.
 *
 * Forward ops are compared with direct double-precision loops (matmul, direct convolution, pooling,
 * softmax cross-entropy). Every backward op is checked against a central difference of a scalar
 * loss L = sum(y * r) (r random), where y comes from the fp64 reference forward: in double, with a
 * step of 1e-6, the difference quotient is exact to about 1e-9 (the ops are linear or smooth away
 * from ReLU/max kinks, which the inputs avoid), so the tolerance only has to cover the fp32
 * rounding of the op under test. The inputs are the same fp32 values in both, so there is no input
 * quantization mismatch either. The optimizers are checked against 3-step sequences worked out by
 * hand (in the comments), and a whole small network against central differences of its loss.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/backend.h"
#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table's softmax cross-entropy, which returns its loss through an argument, as a value. */
static double xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch, int classes,
                   float grad_scale, int *correct)
{
    double loss = 0;
    assert_int_equal(be->ops->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &loss, correct),
                     DT_OK);
    return loss;
}

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1) (xorshift64*, fixed seed: every run sees the same data). */
static double urand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545f4914f6cdd1dull;
    return (double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* A float array and its exact double copy. */
typedef struct tensor {
    size_t n;
    float *f;
    double *d;
} tensor;

static tensor tensor_new(size_t n)
{
    tensor t = {n, calloc(n ? n : 1, sizeof(float)), calloc(n ? n : 1, sizeof(double))};
    assert_non_null(t.f);
    assert_non_null(t.d);
    return t;
}

/* Random values in [-scale, scale); optionally at least `gap` away from 0 (to stay clear of the
 * ReLU kink by far more than the finite-difference step). */
static tensor tensor_rand(size_t n, double scale, double gap)
{
    tensor t = tensor_new(n);
    for (size_t i = 0; i < n; i++) {
        double v = urand() * scale;
        if (fabs(v) < gap) v = v < 0 ? -gap : gap;
        t.f[i] = (float)v;
        t.d[i] = t.f[i];
    }
    return t;
}

static void tensor_free(tensor *t)
{
    free(t->f);
    free(t->d);
    t->f = NULL;
    t->d = NULL;
}

/* A float buffer full of NaN: outputs must be overwritten, never accumulated into. */
static float *nan_buf(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

/* |got - want| <= tol * (1 + |want|), or a failure naming the check and the element. */
static void expect_close(const char *what, size_t i, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("%s[%zu]: got %.9g, want %.9g (diff %.3g, tol %.3g)", what, i, got, want, fabs(got - want),
                 tol * (1.0 + fabs(want)));
}

static void expect_all_close(const char *what, const float *got, const double *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) expect_close(what, i, got[i], want[i], tol);
}

/* Tolerances, relative to 1 + |value|. The fp32 ops sum at most a few hundred products of
 * magnitude <= 1 here; the largest error seen is 1.2e-6 (a conv gradient), the finite differences
 * themselves are good to ~1e-9. 2e-5 leaves a margin of over 10x while still catching any wrong
 * index, missing term or wrong padding (which errs by O(0.1)). */
#define TOL_FWD 2e-5
#define TOL_GRAD 2e-5
#define FD_STEP 1e-6

/* Central difference of loss(ctx) with respect to every element of param, against the analytic
 * fp32 gradient. */
typedef double (*loss_fn)(void *ctx);

static void check_grad(const char *what, loss_fn loss, void *ctx, double *param, size_t n, const float *analytic,
                       double tol)
{
    for (size_t i = 0; i < n; i++) {
        const double save = param[i];
        param[i] = save + FD_STEP;
        const double lp = loss(ctx);
        param[i] = save - FD_STEP;
        const double lm = loss(ctx);
        param[i] = save;
        expect_close(what, i, analytic[i], (lp - lm) / (2.0 * FD_STEP), tol);
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---------------------------------------------------------------- fp64 references */

static void ref_linear(const double *x, const double *w, const double *b, double *y, int batch, int in, int out)
{
    for (int i = 0; i < batch; i++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < in; j++) acc += x[(size_t)i * in + j] * w[(size_t)o * in + j];
            y[(size_t)i * out + o] = acc;
        }
}

/* Direct convolution: y[n][o][oh][ow] = b[o] + sum x[n][c][oh*s-p+kh][ow*s-p+kw] * w[o][c][kh][kw]. */
static void ref_conv(const conv_shape *s, const double *x, const double *w, const double *b, double *y)
{
    for (int n = 0; n < s->batch; n++)
        for (int o = 0; o < s->c_out; o++)
            for (int oh = 0; oh < s->h_out; oh++)
                for (int ow = 0; ow < s->w_out; ow++) {
                    double acc = b ? b[o] : 0.0;
                    for (int c = 0; c < s->c_in; c++)
                        for (int kh = 0; kh < s->k; kh++)
                            for (int kw = 0; kw < s->k; kw++) {
                                int ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
                                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                                acc += x[(((size_t)n * s->c_in + c) * s->h + ih) * s->w + iw] *
                                       w[(((size_t)o * s->c_in + c) * s->k + kh) * s->k + kw];
                            }
                    y[(((size_t)n * s->c_out + o) * s->h_out + oh) * s->w_out + ow] = acc;
                }
}

static size_t conv_in_n(const conv_shape *s) { return (size_t)s->batch * s->c_in * s->h * s->w; }
static size_t conv_out_n(const conv_shape *s) { return (size_t)s->batch * s->c_out * s->h_out * s->w_out; }
static size_t conv_w_n(const conv_shape *s) { return (size_t)s->c_out * s->c_in * s->k * s->k; }

static void ref_relu(const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0;
}

/* Max over each k x k window (first maximum in row-major order), floor division of H and W. */
static void ref_maxpool(const double *x, double *y, int32_t *idx, int planes, int h, int w, int k)
{
    const int ho = h / k, wo = w / k;
    for (int p = 0; p < planes; p++)
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++) {
                int bi = (oh * k) * w + ow * k;
                double best = x[(size_t)p * h * w + bi];
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        int at = (oh * k + i) * w + ow * k + j;
                        if (x[(size_t)p * h * w + at] > best) best = x[(size_t)p * h * w + at], bi = at;
                    }
                y[((size_t)p * ho + oh) * wo + ow] = best;
                if (idx) idx[((size_t)p * ho + oh) * wo + ow] = bi;
            }
}

/* Summed cross-entropy of softmax(logits) (log-sum-exp with the row max subtracted). */
static double ref_xent(const double *logits, const int32_t *labels, int batch, int classes)
{
    double total = 0.0;
    for (int i = 0; i < batch; i++) {
        const double *row = logits + (size_t)i * classes;
        double m = row[0], s = 0.0;
        for (int j = 1; j < classes; j++) m = row[j] > m ? row[j] : m;
        for (int j = 0; j < classes; j++) s += exp(row[j] - m);
        total += log(s) + m - row[labels[i]];
    }
    return total;
}

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
        {{.batch = 1, .c_in = 1, .h = 65536, .w = 65536, .c_out = 1, .k = 1, .stride = 1, .pad = 0},
         "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        conv_shape t = bad[i].s;
        status_clear_error();
        assert_int_equal(conv_shape_init(&t), DT_ERR_INVALID_ARG);
        if (!strstr(dt_last_error(), bad[i].msg)) fail_msg("case %zu: '%s' lacks '%s'", i, dt_last_error(), bad[i].msg);
    }
}

/* ---------------------------------------------------------------- gemm and linear */

static void test_gemm(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    const int m = 5, n = 7, kk = 3, pad = 2; /* leading dimensions larger than the rows */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int ar = ta ? kk : m, ac = ta ? m : kk, br = tb ? n : kk, bc = tb ? kk : n;
            tensor a = tensor_rand((size_t)ar * (ac + pad), 1.0, 0), b = tensor_rand((size_t)br * (bc + pad), 1.0, 0);
            tensor c = tensor_rand((size_t)m * (n + pad), 1.0, 0);
            double want[5 * 9];
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n + pad; j++) {
                    want[i * (n + pad) + j] = c.d[i * (n + pad) + j]; /* columns past n: untouched */
                    if (j >= n) continue;
                    double acc = 0.0;
                    for (int l = 0; l < kk; l++) {
                        double av = ta ? a.d[(size_t)l * (ac + pad) + i] : a.d[(size_t)i * (ac + pad) + l];
                        double bv = tb ? b.d[(size_t)j * (bc + pad) + l] : b.d[(size_t)l * (bc + pad) + j];
                        acc += av * bv;
                    }
                    want[i * (n + pad) + j] = 0.5 * acc + 2.0 * c.d[i * (n + pad) + j];
                }
            k->gemm(be, ta, tb, m, n, kk, 0.5f, a.f, ac + pad, b.f, bc + pad, 2.0f, c.f, n + pad);
            expect_all_close("gemm", c.f, want, (size_t)m * (n + pad), TOL_FWD);
            tensor_free(&a);
            tensor_free(&b);
            tensor_free(&c);
        }
}

typedef struct linear_ctx {
    tensor x, w, b, r;
    double *y;
    int batch, in, out;
} linear_ctx;

static double linear_loss(void *p)
{
    linear_ctx *c = p;
    ref_linear(c->x.d, c->w.d, c->b.d, c->y, c->batch, c->in, c->out);
    return dot(c->y, c->r.d, (size_t)c->batch * c->out);
}

static void linear_case(int batch, int in, int out)
{
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    linear_ctx c = {.batch = batch, .in = in, .out = out};
    c.x = tensor_rand((size_t)batch * in, 1.0, 0);
    c.w = tensor_rand((size_t)out * in, 1.0, 0);
    c.b = tensor_rand((size_t)out, 1.0, 0);
    c.r = tensor_rand((size_t)batch * out, 1.0, 0);
    c.y = calloc((size_t)batch * out, sizeof(double));
    float *y = nan_buf((size_t)batch * out);
    /* forward */
    k->linear_fwd(be, c.x.f, c.w.f, c.b.f, y, batch, in, out);
    ref_linear(c.x.d, c.w.d, c.b.d, c.y, batch, in, out);
    expect_all_close("linear y", y, c.y, (size_t)batch * out, TOL_FWD);
    /* backward with dy = r, so that dL/dparam of L = sum(y * r) is what the op returns */
    float *dx = nan_buf((size_t)batch * in), *dw = nan_buf((size_t)out * in), *db = nan_buf((size_t)out);
    k->linear_bwd(be, c.x.f, c.w.f, c.r.f, dx, dw, db, batch, in, out);
    check_grad("linear dx", linear_loss, &c, c.x.d, c.x.n, dx, TOL_GRAD);
    check_grad("linear dW", linear_loss, &c, c.w.d, c.w.n, dw, TOL_GRAD);
    check_grad("linear db", linear_loss, &c, c.b.d, c.b.n, db, TOL_GRAD);
    /* dx NULL skips the input gradient; the others are unchanged */
    float *dw2 = nan_buf((size_t)out * in), *db2 = nan_buf((size_t)out);
    k->linear_bwd(be, c.x.f, c.w.f, c.r.f, NULL, dw2, db2, batch, in, out);
    assert_memory_equal(dw, dw2, (size_t)out * in * sizeof *dw);
    assert_memory_equal(db, db2, (size_t)out * sizeof *db);
    free(dw2);
    free(db2);
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

static void test_linear(void **st)
{
    (void)st;
    linear_case(1, 1, 1);
    linear_case(1, 7, 3);
    linear_case(4, 5, 19); /* out > one vector block: the column sums' blocked loop and tail */
    linear_case(3, 33, 17);
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
    conv_ctx c = {.s = {.batch = batch, .c_in = c_in, .h = h, .w = w, .c_out = c_out, .k = kk, .stride = stride,
                        .pad = pad}};
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
    conv_case(1, 1, 5, 7, 1, 3, 1, 0);   /* batch 1, odd non-square input, no padding */
    conv_case(2, 3, 5, 7, 4, 3, 1, 1);   /* 3 channels, "same" padding */
    conv_case(2, 3, 7, 5, 2, 3, 2, 1);   /* stride 2 */
    conv_case(1, 2, 6, 6, 3, 5, 1, 2);   /* 5x5 kernel, padding 2 ("same") */
    conv_case(2, 3, 5, 7, 2, 5, 1, 1);   /* padding 1 with a 5x5 kernel: smaller output */
    conv_case(3, 3, 5, 7, 2, 1, 1, 0);   /* 1x1 kernel: no im2col */
    conv_case(2, 2, 5, 7, 3, 1, 2, 0);   /* 1x1 kernel, stride 2 */
    conv_case(2, 3, 4, 9, 2, 3, 2, 2);   /* padding 2, stride 2, wide input */
    conv_case(1, 1, 3, 3, 1, 5, 1, 1);   /* kernel larger than the input */
    conv_case(9, 2, 6, 5, 3, 3, 1, 1);   /* more images than one GEMM group, with a remainder */
    conv_case(2, 1, 2, 8, 2, 2, 2, 0);   /* even kernel, flat input */
    conv_case(2, 2, 8, 8, 3, 3, 3, 1);   /* stride 3 */
    conv_case(1, 4, 1, 1, 3, 1, 1, 0);   /* 1x1 image */
    conv_case(2, 1, 1, 6, 2, 3, 1, 1);   /* a single input row with padding */
    conv_case(3, 8, 3, 3, 4, 3, 1, 0);   /* 1x1 output of many channels (deep K, one pixel) */
    /* Outputs of 128 pixels or more: one image per GEMM, the bias inside the forward GEMM. */
    conv_case(2, 2, 12, 12, 3, 3, 1, 1); /* "same" 3x3 */
    conv_case(2, 1, 12, 12, 2, 5, 1, 2); /* "same" 5x5 */
    conv_case(2, 2, 18, 12, 2, 3, 1, 0); /* no padding: 16x10 */
    conv_case(1, 2, 25, 23, 2, 3, 2, 1); /* stride 2: 13x12 */
    conv_case(2, 3, 12, 11, 2, 1, 1, 0); /* 1x1 */
}

/* ---------------------------------------------------------------- ReLU */

typedef struct relu_ctx {
    tensor x, r;
    double *y;
} relu_ctx;

static double relu_loss(void *p)
{
    relu_ctx *c = p;
    ref_relu(c->x.d, c->y, c->x.n);
    return dot(c->y, c->r.d, c->x.n);
}

static void test_relu(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    const size_t n = 1003; /* whole vector blocks and a tail */
    relu_ctx c = {.x = tensor_rand(n, 1.0, 1e-3), .r = tensor_rand(n, 1.0, 0)};
    c.y = calloc(n, sizeof(double));
    float *y = nan_buf(n), *dx = nan_buf(n);
    k->relu_fwd(be, c.x.f, y, n);
    ref_relu(c.x.d, c.y, n);
    expect_all_close("relu y", y, c.y, n, 0);
    k->relu_bwd(be, y, c.r.f, dx, n);
    check_grad("relu dx", relu_loss, &c, c.x.d, n, dx, TOL_GRAD);
    /* in place: y over x, dx over dy */
    float *t = malloc(n * sizeof *t);
    memcpy(t, c.x.f, n * sizeof *t);
    k->relu_fwd(be, t, t, n);
    assert_memory_equal(t, y, n * sizeof *t);
    float *d = malloc(n * sizeof *d);
    memcpy(d, c.r.f, n * sizeof *d);
    k->relu_bwd(be, y, d, d, n);
    assert_memory_equal(d, dx, n * sizeof *d);
    /* NaN passes through the forward */
    float nan_in = NAN, nan_out = 0.0f;
    k->relu_fwd(be, &nan_in, &nan_out, 1);
    assert_true(isnan(nan_out));
    free(t);
    free(d);
    free(y);
    free(dx);
    free(c.y);
    tensor_free(&c.x);
    tensor_free(&c.r);
}

/* ---------------------------------------------------------------- max pooling */

typedef struct pool_ctx {
    tensor x, r;
    double *y;
    int planes, h, w, k;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    ref_maxpool(c->x.d, c->y, NULL, c->planes, c->h, c->w, c->k);
    return dot(c->y, c->r.d, c->r.n);
}

static void pool_case(int batch, int ch, int h, int w, int kk)
{
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    pool_ctx c = {.planes = batch * ch, .h = h, .w = w, .k = kk};
    const size_t nx = (size_t)batch * ch * h * w, ny = (size_t)batch * ch * (h / kk) * (w / kk);
    /* Distinct values 0.01 apart (a shuffled ramp), so no window has a near-tie that the
     * finite-difference step could flip. */
    c.x = tensor_new(nx);
    for (size_t i = 0; i < nx; i++) c.x.d[i] = (double)i;
    for (size_t i = nx; i > 1; i--) {
        size_t j = (size_t)((urand() + 1.0) * 0.5 * (double)i) % i;
        double t = c.x.d[i - 1];
        c.x.d[i - 1] = c.x.d[j];
        c.x.d[j] = t;
    }
    for (size_t i = 0; i < nx; i++) {
        c.x.f[i] = (float)((c.x.d[i] - nx / 2.0) * 0.01);
        c.x.d[i] = c.x.f[i];
    }
    c.r = tensor_rand(ny, 1.0, 0);
    c.y = calloc(ny ? ny : 1, sizeof(double));
    float *y = nan_buf(ny), *dx = nan_buf(nx);
    int32_t *idx = malloc((ny ? ny : 1) * sizeof *idx), *ridx = malloc((ny ? ny : 1) * sizeof *ridx);
    k->maxpool_fwd(be, c.x.f, y, idx, batch, ch, h, w, kk);
    ref_maxpool(c.x.d, c.y, ridx, c.planes, h, w, kk);
    expect_all_close("maxpool y", y, c.y, ny, 0);
    assert_memory_equal(idx, ridx, ny * sizeof *idx);
    k->maxpool_bwd(be, c.r.f, idx, dx, batch, ch, h, w, kk);
    check_grad("maxpool dx", pool_loss, &c, c.x.d, nx, dx, TOL_GRAD);
    free(y);
    free(dx);
    free(idx);
    free(ridx);
    free(c.y);
    tensor_free(&c.x);
    tensor_free(&c.r);
}

static void test_maxpool(void **st)
{
    (void)st;
    pool_case(2, 3, 6, 8, 2);
    pool_case(1, 2, 5, 7, 2); /* odd: the last row and column are dropped (floor) */
    pool_case(2, 2, 7, 8, 3); /* k = 3, 7x8 -> 2x2 */
    pool_case(1, 1, 9, 9, 3);
    pool_case(1, 1, 3, 3, 1); /* k = 1 is the identity */
    pool_case(1, 2, 4, 35, 2); /* rows of 17 outputs: whole blocks of 8 and a partial one */
    pool_case(2, 1, 7, 29, 3); /* k = 3, rows of 9 outputs */
}

static void test_maxpool_ties(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    /* One 4x4 plane, k = 2: window 0 all equal; window 1 ties at its second and fourth entries;
     * window 2 a tie of the bottom row; window 3 one clear maximum. Ties go to the first maximum in
     * row-major order, and only there does the gradient flow. */
    const float x[16] = {
        1, 1, 0, 5, /* */
        1, 1, 2, 5, /* */
        -1, -3, 0, 9, /* */
        4, 4, 1, 2,
    };
    float y[4], dx[16], dy[4] = {10, 20, 30, 40};
    int32_t idx[4];
    k->maxpool_fwd(be, x, y, idx, 1, 1, 4, 4, 2);
    const float want_y[4] = {1, 5, 4, 9};
    const int32_t want_idx[4] = {0, 3, 12, 11};
    assert_memory_equal(y, want_y, sizeof y);
    assert_memory_equal(idx, want_idx, sizeof idx);
    for (int i = 0; i < 16; i++) dx[i] = NAN;
    k->maxpool_bwd(be, dy, idx, dx, 1, 1, 4, 4, 2);
    for (int i = 0; i < 16; i++) {
        float want = i == 0 ? 10 : i == 3 ? 20 : i == 12 ? 30 : i == 11 ? 40 : 0;
        assert_true(dx[i] == want);
    }
    /* k = 3 on a 5x5 plane of equal values: one window, the first element; the dropped last two
     * rows and columns get zero gradient. */
    float x5[25], dx5[25], y5, dy5 = 1.5f;
    int32_t i5;
    for (int i = 0; i < 25; i++) x5[i] = 2.0f, dx5[i] = NAN;
    k->maxpool_fwd(be, x5, &y5, &i5, 1, 1, 5, 5, 3);
    assert_true(y5 == 2.0f);
    assert_int_equal(i5, 0);
    k->maxpool_bwd(be, &dy5, &i5, dx5, 1, 1, 5, 5, 3);
    for (int i = 0; i < 25; i++) assert_true(dx5[i] == (i == 0 ? 1.5f : 0.0f));
    /* All-equal planes wide enough for whole blocks of outputs, k = 2 and 3: every index is the
     * top-left of its window. */
    for (int kk = 2; kk <= 3; kk++) {
        enum { WW = 31 };
        float xe[3 * WW], ye[WW];
        int32_t ie[WW];
        for (int i = 0; i < 3 * WW; i++) xe[i] = -0.5f;
        k->maxpool_fwd(be, xe, ye, ie, 1, 1, kk, WW, kk);
        for (int o = 0; o < WW / kk; o++) {
            assert_true(ye[o] == -0.5f);
            assert_int_equal(ie[o], o * kk);
        }
    }
}

/* ---------------------------------------------------------------- softmax cross-entropy */

typedef struct xent_ctx {
    tensor logits;
    int32_t *labels;
    int batch, classes;
    double scale;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    return c->scale * ref_xent(c->logits.d, c->labels, c->batch, c->classes);
}

static void xent_case(int batch, int classes, double spread)
{
    backend *be = backend_cpu();
    xent_ctx c = {.batch = batch, .classes = classes, .scale = 1.0 / batch};
    c.logits = tensor_rand((size_t)batch * classes, spread, 0);
    c.labels = malloc((size_t)batch * sizeof *c.labels);
    for (int i = 0; i < batch; i++) c.labels[i] = (int32_t)((urand() + 1.0) * 0.5 * classes) % classes;
    float *dl = nan_buf((size_t)batch * classes);
    int correct = -1;
    double loss = xent(be, c.logits.f, c.labels, dl, batch, classes, (float)c.scale, &correct);
    expect_close("xent loss", 0, loss, ref_xent(c.logits.d, c.labels, batch, classes), 1e-6);
    int want_correct = 0;
    for (int i = 0; i < batch; i++) {
        int am = 0;
        for (int j = 1; j < classes; j++)
            if (c.logits.d[(size_t)i * classes + j] > c.logits.d[(size_t)i * classes + am]) am = j;
        want_correct += am == c.labels[i];
    }
    assert_int_equal(correct, want_correct);
    check_grad("xent dlogits", xent_loss, &c, c.logits.d, c.logits.n, dl, TOL_GRAD);
    /* no gradient and no count wanted: the same loss */
    double loss2 = xent(be, c.logits.f, c.labels, NULL, batch, classes, 1.0f, NULL);
    assert_true(loss2 == loss);
    free(dl);
    free(c.labels);
    tensor_free(&c.logits);
}

static void test_softmax_xent(void **st)
{
    (void)st;
    xent_case(1, 1, 1.0); /* one class: loss 0, gradient 0 */
    xent_case(4, 10, 3.0);
    xent_case(5, 37, 8.0);
}

static void test_softmax_xent_huge(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    /* exp(1e4) overflows any float or double: only the max-subtracted form stays finite. */
    const float logits[12] = {1e4f, 0, -1e4f, 0, /* label 0: loss ~ 0 */
                              1e4f, 0, -1e4f, 0, /* label 2: loss ~ 2e4 */
                              1e4f, 1e4f, 1e4f, 1e4f /* all equal: loss log 4 */};
    const int32_t labels[3] = {0, 2, 1};
    float dl[12];
    int correct = -1;
    double loss = xent(be, logits, labels, dl, 3, 4, 1.0f, &correct);
    assert_true(isfinite(loss));
    expect_close("huge loss", 0, loss, 0.0 + 2e4 + log(4.0), 1e-9);
    for (int i = 0; i < 12; i++) assert_true(isfinite(dl[i]));
    expect_close("huge dl", 0, dl[0], 0.0, 1e-6);     /* softmax 1 - onehot 1 */
    expect_close("huge dl", 4, dl[4], 1.0, 1e-6);     /* softmax 1, not the label */
    expect_close("huge dl", 6, dl[6], -1.0, 1e-6);    /* softmax 0 - onehot 1 */
    expect_close("huge dl", 9, dl[9], 0.25 - 1, 1e-6);
    expect_close("huge dl", 10, dl[10], 0.25, 1e-6);
    assert_int_equal(correct, 1); /* row 0 right; row 1 wrong; row 2's argmax is the first class */
}

/* ---------------------------------------------------------------- optimizers */

static void test_sgd(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    /* lr 0.1, momentum 0.9, weight decay 0.1, p0 = 1, gradients 0.5, 0.25, -1:
     *   step 1 (first): g = 0.5 + 0.1*1 = 0.6;          buf = 0.6;                    p = 1 - 0.06 = 0.94
     *   step 2:         g = 0.25 + 0.094 = 0.344;       buf = 0.9*0.6 + 0.344 = 0.884; p = 0.94 - 0.0884 = 0.8516
     *   step 3:         g = -1 + 0.08516 = -0.91484;    buf = 0.7956 - 0.91484 = -0.11924; p = 0.8516 + 0.011924 = 0.863524
     * The buffer starts as garbage: the first step must not read it. 37 elements exercise the
     * vector blocks and the tail; all must agree. */
    enum { N = 37 };
    float p[N], g[N], buf[N];
    const float grads[3] = {0.5f, 0.25f, -1.0f};
    const double want_p[3] = {0.94, 0.8516, 0.863524}, want_buf[3] = {0.6, 0.884, -0.11924};
    for (int i = 0; i < N; i++) p[i] = 1.0f, buf[i] = NAN;
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < N; i++) g[i] = grads[t];
        k->sgd(be, p, g, buf, N, 0.1f, 0.9f, 0.1f, t == 0);
        for (int i = 0; i < N; i++) {
            expect_close("sgd p", (size_t)i, p[i], want_p[t], 1e-6);
            expect_close("sgd buf", (size_t)i, buf[i], want_buf[t], 1e-6);
        }
    }
    /* momentum 0: plain (decayed) gradient step, no buffer at all: p = 1 - 0.1 * (0.5 + 0.1) = 0.94,
     * then 0.94 - 0.1 * (0.25 + 0.094) = 0.9056. */
    for (int i = 0; i < N; i++) p[i] = 1.0f;
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < N; i++) g[i] = grads[t];
        k->sgd(be, p, g, NULL, N, 0.1f, 0.0f, 0.1f, t == 0);
        for (int i = 0; i < N; i++) expect_close("sgd p (no momentum)", (size_t)i, p[i], t ? 0.9056 : 0.94, 1e-6);
    }
}

static void test_adamw(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    /* lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.1, p0 = 1, gradients 0.5, 0.25, -1:
     *   t=1: p = 1*(1 - 0.01) = 0.99; m = 0.05; v = 0.001*0.25 = 0.00025;
     *        m^ = 0.05/0.1 = 0.5; v^ = 0.00025/0.001 = 0.25, sqrt 0.5;
     *        p = 0.99 - 0.1*0.5/(0.5 + 1e-8) = 0.890000002
     *   t=2: p = 0.890000002*0.99 = 0.88110000198; m = 0.045 + 0.025 = 0.07;
     *        v = 0.00025*0.999 + 0.001*0.0625 = 0.00031225;
     *        m^ = 0.07/0.19 = 0.368421053; v^ = 0.00031225/0.001999 = 0.156203102, sqrt 0.395225381;
     *        p = 0.88110000198 - 0.1*0.932183981 = 0.787882040
     *   t=3: p = 0.787882040*0.99 = 0.780003220; m = 0.063 - 0.1 = -0.037;
     *        v = 0.00031225*0.999 + 0.001*1 = 0.00131193775;
     *        m^ = -0.037/0.271 = -0.136531365; v^ = 0.00131193775/0.002997001 = 0.437750188, sqrt 0.661626925;
     *        p = 0.780003220 + 0.1*0.206357023 = 0.800638922
     * (decoupled decay first, then the bias-corrected step, as torch.optim.AdamW). */
    enum { N = 37 };
    float p[N], g[N], m[N], v[N];
    const float grads[3] = {0.5f, 0.25f, -1.0f};
    const double want_p[3] = {0.890000002, 0.7878820404574624, 0.8006389224608368};
    const double want_m[3] = {0.05, 0.07, -0.037}, want_v[3] = {0.00025, 0.00031225, 0.00131193775};
    for (int i = 0; i < N; i++) p[i] = 1.0f, m[i] = 0.0f, v[i] = 0.0f;
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < N; i++) g[i] = grads[t - 1];
        k->adamw(be, p, g, m, v, N, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, t);
        for (int i = 0; i < N; i++) {
            expect_close("adamw p", (size_t)i, p[i], want_p[t - 1], 1e-6);
            expect_close("adamw m", (size_t)i, m[i], want_m[t - 1], 1e-6);
            /* v is ~1e-3: compare relative to itself. beta2 reaches the op as the float 0.999f =
             * 0.99900001287, so 1 - beta2 is 1.3e-5 smaller (relative) than in the exact hand
             * computation; the bias correction divides most of that out of p. */
            expect_close("adamw v", (size_t)i, v[i] / want_v[t - 1], 1.0, 3e-5);
        }
    }
}

/* ---------------------------------------------------------------- a whole network */

/* conv(1->2, k3 s1 p1) -> relu -> maxpool 2 -> fc(18 -> 3) -> softmax-xent (mean), batch 2 of 1x6x6. */
enum { NET_B = 2, NET_CO = 2, NET_H = 6, NET_CLS = 3, NET_FC_IN = NET_CO * 3 * 3 };

typedef struct net_ctx {
    conv_shape s;
    tensor x, cw, cb, fw, fb;
    int32_t labels[NET_B];
} net_ctx;

static double net_loss(void *p)
{
    net_ctx *c = p;
    double conv[NET_B * NET_CO * NET_H * NET_H], pooled[NET_B * NET_FC_IN], logits[NET_B * NET_CLS];
    ref_conv(&c->s, c->x.d, c->cw.d, c->cb.d, conv);
    ref_relu(conv, conv, sizeof conv / sizeof *conv);
    ref_maxpool(conv, pooled, NULL, NET_B * NET_CO, NET_H, NET_H, 2);
    ref_linear(pooled, c->fw.d, c->fb.d, logits, NET_B, NET_FC_IN, NET_CLS);
    return ref_xent(logits, c->labels, NET_B, NET_CLS) / NET_B;
}

static void test_network(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    net_ctx c = {.s = {.batch = NET_B, .c_in = 1, .h = NET_H, .w = NET_H, .c_out = NET_CO, .k = 3, .stride = 1,
                       .pad = 1},
                 .labels = {2, 0}};
    assert_int_equal(conv_shape_init(&c.s), DT_OK);
    c.x = tensor_rand(NET_B * NET_H * NET_H, 1.0, 0);
    c.cw = tensor_rand(NET_CO * 9, 0.5, 0);
    c.cb = tensor_rand(NET_CO, 0.2, 0);
    c.fw = tensor_rand(NET_CLS * NET_FC_IN, 0.5, 0);
    c.fb = tensor_rand(NET_CLS, 0.2, 0);
    float *ws = nan_buf(k->conv_ws_floats(be, &c.s));
    float act[NET_B * NET_CO * NET_H * NET_H], pooled[NET_B * NET_FC_IN], logits[NET_B * NET_CLS];
    float dlogits[NET_B * NET_CLS], dpooled[NET_B * NET_FC_IN], dact[NET_B * NET_CO * NET_H * NET_H];
    float dx[NET_B * NET_H * NET_H], dcw[NET_CO * 9], dcb[NET_CO], dfw[NET_CLS * NET_FC_IN], dfb[NET_CLS];
    int32_t idx[NET_B * NET_FC_IN];
    int correct;
    /* forward */
    k->conv_fwd(be, &c.s, c.x.f, c.cw.f, c.cb.f, act, ws);
    k->relu_fwd(be, act, act, sizeof act / sizeof *act);
    k->maxpool_fwd(be, act, pooled, idx, NET_B, NET_CO, NET_H, NET_H, 2);
    k->linear_fwd(be, pooled, c.fw.f, c.fb.f, logits, NET_B, NET_FC_IN, NET_CLS);
    double loss = xent(be, logits, c.labels, dlogits, NET_B, NET_CLS, 1.0f / NET_B, &correct) / NET_B;
    expect_close("net loss", 0, loss, net_loss(&c), 1e-5);
    /* backward */
    k->linear_bwd(be, pooled, c.fw.f, dlogits, dpooled, dfw, dfb, NET_B, NET_FC_IN, NET_CLS);
    k->maxpool_bwd(be, dpooled, idx, dact, NET_B, NET_CO, NET_H, NET_H, 2);
    k->relu_bwd(be, act, dact, dact, sizeof dact / sizeof *dact);
    k->conv_bwd_filter(be, &c.s, c.x.f, dact, dcw, dcb, ws);
    k->conv_bwd_data(be, &c.s, dact, c.cw.f, dx, ws);
    check_grad("net conv dW", net_loss, &c, c.cw.d, c.cw.n, dcw, TOL_GRAD);
    check_grad("net conv db", net_loss, &c, c.cb.d, c.cb.n, dcb, TOL_GRAD);
    check_grad("net fc dW", net_loss, &c, c.fw.d, c.fw.n, dfw, TOL_GRAD);
    check_grad("net fc db", net_loss, &c, c.fb.d, c.fb.n, dfb, TOL_GRAD);
    check_grad("net dx", net_loss, &c, c.x.d, c.x.n, dx, TOL_GRAD);
    /* The check is not vacuous: some conv gradient is far from zero. */
    double mx = 0;
    for (int i = 0; i < NET_CO * 9; i++) mx = fabs(dcw[i]) > mx ? fabs(dcw[i]) : mx;
    assert_true(mx > 1e-3);
    free(ws);
    tensor_free(&c.x);
    tensor_free(&c.cw);
    tensor_free(&c.cb);
    tensor_free(&c.fw);
    tensor_free(&c.fb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_shape_init),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_maxpool_ties),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_softmax_xent_huge),
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_network),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
