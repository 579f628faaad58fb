/*
 * test_kernels_network.c - a whole small network (conv, ReLU, max pooling, fc, softmax
 * cross-entropy) run through the CPU table, every gradient against central differences of the fp64
 * reference loss. Shared helpers and references: kernels_fixture.h.
 */
#include "kernels_fixture.h"

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
    net_ctx c = {
        .s = {.batch = NET_B, .c_in = 1, .h = NET_H, .w = NET_H, .c_out = NET_CO, .k = 3, .stride = 1, .pad = 1},
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
        cmocka_unit_test(test_network),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
