/*
 * test_kernels_gemm.c - the CPU table's GEMM (transposes, padded leading dimensions, alpha and
 * beta) and fully connected layer (forward against fp64, backward against central differences).
 * Shared helpers and references: kernels_fixture.h.
 */
#include "kernels_fixture.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
