/*
 * test_layout.c - the flat parameter vector is PyTorch's state_dict layout (dtrain.h at
 * dt_model_params): per layer, an fc layer's weight [out][in] row-major then its bias
 * (nn.Linear), a conv layer's weight [out][in][k][k] then its bias (nn.Conv2d), and flatten in
 * (c, h, w) order. Each model's parameters are set through dt_model_params, and its forward pass
 * is compared with one computed here from the same flat vector read in PyTorch's layout; the
 * loss of dt_model_evaluate and the last fc layer's weight gradient are checked the same way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "runtime/model/model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Distinct values everywhere, so a permuted index gives another answer. */
static void fill(float *p, size_t n, double phase)
{
    for (size_t j = 0; j < n; j++) p[j] = (float)(0.5 * sin(0.37 * (double)j + phase) + 0.01 * (double)(j % 7));
}

/* y[o] = b[o] + sum_i W[o][i] x[i], W at p (out x in, row-major) and b right after it. */
static void fc_ref(const float *p, const double *x, int in, int out, double *y)
{
    for (int o = 0; o < out; o++) {
        double s = p[(size_t)out * in + o];
        for (int i = 0; i < in; i++) s += (double)p[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

/* y[o][oh][ow] (NCHW) from x[c][h][w], W[o][c][kh][kw] at p and the bias after it. */
static void conv_ref(const float *p, const double *x, int C, int H, int W, int O, int K, int S, int P, double *y,
                     int *Ho, int *Wo)
{
    *Ho = (H + 2 * P - K) / S + 1;
    *Wo = (W + 2 * P - K) / S + 1;
    for (int o = 0; o < O; o++)
        for (int oh = 0; oh < *Ho; oh++)
            for (int ow = 0; ow < *Wo; ow++) {
                double s = p[(size_t)O * C * K * K + o];
                for (int c = 0; c < C; c++)
                    for (int kh = 0; kh < K; kh++)
                        for (int kw = 0; kw < K; kw++) {
                            const int ih = oh * S - P + kh, iw = ow * S - P + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            s += (double)p[(((size_t)o * C + c) * K + kh) * K + kw] * x[((size_t)c * H + ih) * W + iw];
                        }
                y[((size_t)o * *Ho + oh) * *Wo + ow] = s;
            }
}

static void relu(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : 0;
}

static double xent(const double *z, int classes, int label)
{
    double mx = z[0], s = 0;
    for (int c = 1; c < classes; c++) mx = z[c] > mx ? z[c] : mx;
    for (int c = 0; c < classes; c++) s += exp(z[c] - mx);
    return log(s) + mx - z[label];
}

static void expect_close(const float *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-4 * (1 + fabs(want[i]))))
            fail_msg("%s[%zu] = %.7g, PyTorch's layout gives %.7g", what, i, (double)got[i], want[i]);
}

/* fc:5,relu,fc:3 on 4 inputs: logits and the last weight gradient, sample by sample. */
static void test_fc_layout(void **st)
{
    (void)st;
    enum { IN = 4, HID = 5, OUT = 3, B = 2 };
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, "fc:5,relu,fc:3", "4", 1, B, &m), DT_OK);
    assert_int_equal(dt_model_num_params(m), (size_t)(HID * IN + HID + OUT * HID + OUT));
    float *p = dt_model_params(m);
    fill(p, dt_model_num_params(m), 0.3);
    float x[B * IN];
    fill(x, B * IN, 1.1);
    const int32_t labels[B] = {2, 0};
    const void *out = NULL;
    assert_int_equal(model_forward(m, x, B, &out), DT_OK);
    const float *logits = out;
    const float *p2 = p + HID * IN + HID; /* the second fc: weight then bias */
    double want[B * OUT], h[B][HID], loss = 0;
    for (int b = 0; b < B; b++) {
        double xb[IN];
        for (int i = 0; i < IN; i++) xb[i] = x[b * IN + i];
        fc_ref(p, xb, IN, HID, h[b]);
        relu(h[b], HID);
        fc_ref(p2, h[b], HID, OUT, want + b * OUT);
        loss += xent(want + b * OUT, OUT, labels[b]);
    }
    expect_close(logits, want, B * OUT, "fc logits");

    double got_loss;
    int correct;
    assert_int_equal(dt_model_evaluate(m, x, labels, B, &got_loss, &correct, NULL), DT_OK);
    assert_true(fabs(got_loss - loss) <= 1e-5 * (1 + loss));

    /* dL/dW2[o][i] = sum_b (softmax_b - onehot_b)[o] * h_b[i] at [out][in], the bias gradient after it. */
    assert_int_equal(dt_model_forward_backward(m, x, labels, B, 1.0f, &got_loss, &correct), DT_OK);
    const float *g2 = dt_model_grads(m) + HID * IN + HID;
    double gw[OUT * HID] = {0}, gb[OUT] = {0};
    for (int b = 0; b < B; b++) {
        const double *z = want + b * OUT;
        double mx = z[0], s = 0, pr[OUT];
        for (int o = 1; o < OUT; o++) mx = z[o] > mx ? z[o] : mx;
        for (int o = 0; o < OUT; o++) s += (pr[o] = exp(z[o] - mx));
        for (int o = 0; o < OUT; o++) {
            const double d = pr[o] / s - (o == labels[b]);
            gb[o] += d;
            for (int i = 0; i < HID; i++) gw[o * HID + i] += d * h[b][i];
        }
    }
    expect_close(g2, gw, OUT * HID, "fc weight gradient");
    expect_close(g2 + OUT * HID, gb, OUT, "fc bias gradient");
    dt_model_free(m);
}

/* conv:3:3:2:1,relu,fc:4 on 2x5x6 (not square, stride 2, padding 1): the conv weight
 * [out][in][k][k], its bias, and the fc after the implied flatten reading (c, h, w). */
static void test_conv_layout(void **st)
{
    (void)st;
    enum { C = 2, H = 5, W = 6, O = 3, K = 3, S = 2, P = 1, CLS = 4, B = 2 };
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, "conv:3:3:2:1,relu,fc:4", "2x5x6", 1, B, &m), DT_OK);
    const int Ho = (H + 2 * P - K) / S + 1, Wo = (W + 2 * P - K) / S + 1; /* 3 x 3 */
    const size_t conv_n = (size_t)O * C * K * K + O, feat = (size_t)O * Ho * Wo;
    assert_int_equal(dt_model_num_params(m), conv_n + feat * CLS + CLS);
    float *p = dt_model_params(m);
    fill(p, dt_model_num_params(m), 0.7);
    float x[B * C * H * W];
    fill(x, B * C * H * W, 2.3);
    const int32_t labels[B] = {1, 3};
    const void *out = NULL;
    assert_int_equal(model_forward(m, x, B, &out), DT_OK);
    const float *logits = out;
    double want[B * CLS], loss = 0;
    for (int b = 0; b < B; b++) {
        double xb[C * H * W], y[O * 3 * 3];
        int ho, wo;
        for (int i = 0; i < C * H * W; i++) xb[i] = x[b * C * H * W + i];
        conv_ref(p, xb, C, H, W, O, K, S, P, y, &ho, &wo);
        assert_int_equal(ho, Ho);
        assert_int_equal(wo, Wo);
        relu(y, feat);
        fc_ref(p + conv_n, y, (int)feat, CLS, want + b * CLS);
        loss += xent(want + b * CLS, CLS, labels[b]);
    }
    expect_close(logits, want, B * CLS, "conv model logits");
    double got_loss;
    int correct;
    assert_int_equal(dt_model_evaluate(m, x, labels, B, &got_loss, &correct, NULL), DT_OK);
    assert_true(fabs(got_loss - loss) <= 1e-5 * (1 + loss));
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fc_layout), cmocka_unit_test(test_conv_layout)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
