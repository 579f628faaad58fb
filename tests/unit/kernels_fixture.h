/*
 * kernels_fixture.h - what the CPU op-table tests (tests/unit/test_kernels_*.c) share: fixed-seed
 * random tensors held both as fp32 and as their exact fp64 copies, closeness checks, the central-
 * difference gradient check, and the naive fp64 references of the ops.
 *
 * Forward ops are compared with direct double-precision loops (matmul, direct convolution, pooling,
 * softmax cross-entropy). Every backward op is checked against a central difference of a scalar
 * loss L = sum(y * r) (r random), where y comes from the fp64 reference forward: in double, with a
 * step of 1e-6, the difference quotient is exact to about 1e-9 (the ops are linear or smooth away
 * from ReLU/max kinks, which the inputs avoid), so the tolerance only has to cover the fp32
 * rounding of the op under test. The inputs are the same fp32 values in both, so there is no input
 * quantization mismatch either.
 *
 * Each test executable includes this once; the helpers are static inline so that a file using only
 * some of them builds without unused-function warnings.
 */
#ifndef DT_TESTS_UNIT_KERNELS_FIXTURE_H
#define DT_TESTS_UNIT_KERNELS_FIXTURE_H

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

/* The table's softmax cross-entropy, which returns its loss through an argument once loss_wait
 * returns, as a value. */
static inline double xent(backend *be, const float *logits, const int32_t *labels, float *dlogits, int batch,
                          int classes, float grad_scale, int *correct)
{
    double loss = 0;
    assert_int_equal(be->ops->softmax_xent(be, logits, labels, dlogits, batch, classes, grad_scale, &loss, correct),
                     DT_OK);
    assert_int_equal(be->ops->loss_wait(be), DT_OK);
    return loss;
}

/* ---------------------------------------------------------------- helpers */

/* Uniform in [-1, 1) (xorshift64*, fixed seed: every run sees the same data). */
static inline double urand(void)
{
    static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
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

static inline tensor tensor_new(size_t n)
{
    tensor t = {n, calloc(n ? n : 1, sizeof(float)), calloc(n ? n : 1, sizeof(double))};
    assert_non_null(t.f);
    assert_non_null(t.d);
    return t;
}

/* Random values in [-scale, scale); optionally at least `gap` away from 0 (to stay clear of the
 * ReLU kink by far more than the finite-difference step). */
static inline tensor tensor_rand(size_t n, double scale, double gap)
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

static inline void tensor_free(tensor *t)
{
    free(t->f);
    free(t->d);
    t->f = NULL;
    t->d = NULL;
}

/* A float buffer full of NaN: outputs must be overwritten, never accumulated into. */
static inline float *nan_buf(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

/* |got - want| <= tol * (1 + |want|), or a failure naming the check and the element. */
static inline void expect_close(const char *what, size_t i, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("%s[%zu]: got %.9g, want %.9g (diff %.3g, tol %.3g)", what, i, got, want, fabs(got - want),
                 tol * (1.0 + fabs(want)));
}

static inline void expect_all_close(const char *what, const float *got, const double *want, size_t n, double tol)
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

static inline void check_grad(const char *what, loss_fn loss, void *ctx, double *param, size_t n, const float *analytic,
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

static inline double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---------------------------------------------------------------- fp64 references */

static inline void ref_linear(const double *x, const double *w, const double *b, double *y, int batch, int in, int out)
{
    for (int i = 0; i < batch; i++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < in; j++) acc += x[(size_t)i * in + j] * w[(size_t)o * in + j];
            y[(size_t)i * out + o] = acc;
        }
}

/* Direct convolution: y[n][o][oh][ow] = b[o] + sum x[n][c][oh*s-p+kh][ow*s-p+kw] * w[o][c][kh][kw]. */
static inline void ref_conv(const conv_shape *s, const double *x, const double *w, const double *b, double *y)
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

static inline void ref_relu(const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0;
}

/* Max over each k x k window (first maximum in row-major order), floor division of H and W. */
static inline void ref_maxpool(const double *x, double *y, int32_t *idx, int planes, int h, int w, int k)
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
static inline double ref_xent(const double *logits, const int32_t *labels, int batch, int classes)
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

#endif
