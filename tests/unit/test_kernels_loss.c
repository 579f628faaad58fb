/*
 * test_kernels_loss.c - the CPU table's softmax cross-entropy: the loss, the correct count and
 * dlogits against fp64 and central differences, and logits of 1e4 that only the max-subtracted form
 * keeps finite. Shared helpers and references: kernels_fixture.h.
 */
#include "kernels_fixture.h"

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
    const float logits[12] = {1e4f, 0,    -1e4f, 0, /* label 0: loss ~ 0 */
                              1e4f, 0,    -1e4f, 0, /* label 2: loss ~ 2e4 */
                              1e4f, 1e4f, 1e4f,  1e4f /* all equal: loss log 4 */};
    const int32_t labels[3] = {0, 2, 1};
    float dl[12];
    int correct = -1;
    double loss = xent(be, logits, labels, dl, 3, 4, 1.0f, &correct);
    assert_true(isfinite(loss));
    expect_close("huge loss", 0, loss, 0.0 + 2e4 + log(4.0), 1e-9);
    for (int i = 0; i < 12; i++) assert_true(isfinite(dl[i]));
    expect_close("huge dl", 0, dl[0], 0.0, 1e-6);  /* softmax 1 - onehot 1 */
    expect_close("huge dl", 4, dl[4], 1.0, 1e-6);  /* softmax 1, not the label */
    expect_close("huge dl", 6, dl[6], -1.0, 1e-6); /* softmax 0 - onehot 1 */
    expect_close("huge dl", 9, dl[9], 0.25 - 1, 1e-6);
    expect_close("huge dl", 10, dl[10], 0.25, 1e-6);
    assert_int_equal(correct, 1); /* row 0 right; row 1 wrong; row 2's argmax is the first class */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_softmax_xent_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
