/*
 * test_kernels_pool.c - the CPU table's ReLU and max pooling: forward bit for bit against fp64
 * references, backward against central differences, in-place use, NaN, and where ties send the
 * gradient. Shared helpers and references: kernels_fixture.h.
 */
#include "kernels_fixture.h"

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
    pool_case(1, 1, 3, 3, 1);  /* k = 1 is the identity */
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
        1,  1,  0, 5, /* */
        1,  1,  2, 5, /* */
        -1, -3, 0, 9, /* */
        4,  4,  1, 2,
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_maxpool_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
