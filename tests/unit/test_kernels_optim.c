/*
 * test_kernels_optim.c - the CPU table's optimizers, SGD (with and without momentum) and AdamW,
 * against 3-step sequences worked out by hand in the comments, the 16-bit parameter copy they
 * write in the same pass, and the gradients they read as kept (fp32 or 16-bit, with factors). Shared helpers: kernels_fixture.h.
 */
#include "kernels_fixture.h"
#include "kernels/cast.h"

/* ---------------------------------------------------------------- optimizers */

static void test_sgd(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    /* lr 0.1, momentum 0.9, weight decay 0.1, p0 = 1, gradients 0.5, 0.25, -1:
     *   step 1 (first): g = 0.5 + 0.1*1 = 0.6;       buf = 0.6;                       p = 1 - 0.06 = 0.94
     *   step 2:         g = 0.25 + 0.094 = 0.344;    buf = 0.9*0.6 + 0.344 = 0.884;   p = 0.94 - 0.0884 = 0.8516
     *   step 3:         g = -1 + 0.08516 = -0.91484; buf = 0.7956 - 0.91484 = -0.11924;
     *                                                                                 p = 0.8516 + 0.011924 = 0.863524
     * The buffer starts as garbage: the first step must not read it. 37 elements exercise the
     * vector blocks and the tail; all must agree. */
    enum { N = 37 };
    float p[N], g[N], buf[N];
    const float grads[3] = {0.5f, 0.25f, -1.0f};
    const double want_p[3] = {0.94, 0.8516, 0.863524}, want_buf[3] = {0.6, 0.884, -0.11924};
    for (int i = 0; i < N; i++) p[i] = 1.0f, buf[i] = NAN;
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < N; i++) g[i] = grads[t];
        k->sgd(be, p, &(optim_grads){g, DT_F32, 1.0f, 1.0f, NULL, NULL}, buf, N, 0.1f, 0.9f, 0.1f, t == 0, DT_F32,
               NULL);
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
        k->sgd(be, p, &(optim_grads){g, DT_F32, 1.0f, 1.0f, NULL, NULL}, NULL, N, 0.1f, 0.0f, 0.1f, t == 0, DT_F32,
               NULL);
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
        k->adamw(be, p, &(optim_grads){g, DT_F32, 1.0f, 1.0f, NULL, NULL}, m, v, N, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, t,
                 DT_F32, NULL);
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

/* AdamW's update of an element must not depend on where it lies: the vector loop's elements and
 * its scalar tail (and a CPU without AVX2, which steps everything in the tail's loop) use the same
 * fused multiply-adds, as the CUDA kernel does. Element i takes its p, g, m and v from pattern
 * i % 8, so the tail's 7 elements have twins in every vector group; 500 random pattern sets. */
static void test_adamw_tail(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    enum { N = 8 * 5 + 7 };
    float p[N], g[N], m[N], v[N];
    uint32_t seed = 12345;
    long differ = 0;
    for (int round = 0; round < 500; round++) {
        float pat[4][8];
        for (int j = 0; j < 8; j++)
            for (int q = 0; q < 4; q++) {
                seed = seed * 1664525u + 1013904223u;
                const float u = (float)(seed >> 8) / 16777216.0f;
                pat[q][j] = q == 3 ? u * u * 1e-3f : q == 2 ? (u - 0.5f) * 0.02f : (u - 0.5f) * 2.0f;
            }
        for (int i = 0; i < N; i++)
            p[i] = pat[0][i % 8], g[i] = pat[1][i % 8], m[i] = pat[2][i % 8], v[i] = pat[3][i % 8];
        be->ops->adamw(be, p, &(optim_grads){g, DT_F32, 1.0f, 1.0f, NULL, NULL}, m, v, N, 1e-3f, 0.9f, 0.999f, 1e-8f,
                       0.01f, 1 + round % 9, DT_F32, NULL);
        for (int i = 8; i < N; i++)
            differ += memcmp(&p[i], &p[i % 8], sizeof *p) || memcmp(&m[i], &m[i % 8], sizeof *m) ||
                      memcmp(&v[i], &v[i % 8], sizeof *v);
    }
    if (differ) fprintf(stderr, "adamw: %ld elements updated differently from their twins\n", differ);
    assert_int_equal(differ, 0);
}

/* The copy written with the step: the parameters bit for bit those of a step without it, and the
 * copy the cast of them, over sizes that end inside and across the table's blocks (a partial
 * AdamW vector group at the end included), for both 16-bit types and three steps. */
static void test_fused_copy(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    const size_t sizes[] = {1, 37, 4096, 10007};
    const dt_dtype types[] = {DT_F16, DT_BF16};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int ti = 0; ti < 2; ti++)
            for (int adam = 0; adam < 2; adam++) {
                const size_t n = sizes[z];
                tensor p = tensor_rand(n, 1.0, 0.0), g = tensor_rand(n, 0.1, 0.0);
                float *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb), *gr = malloc(n * sizeof *gr);
                float *s1a = calloc(n, sizeof(float)), *s2a = calloc(n, sizeof(float));
                float *s1b = calloc(n, sizeof(float)), *s2b = calloc(n, sizeof(float));
                uint16_t *copy = malloc(n * sizeof *copy), *cast = malloc(n * sizeof *cast);
                assert_true(pa && pb && gr && s1a && s2a && s1b && s2b && copy && cast);
                for (size_t i = 0; i < n; i++) pa[i] = pb[i] = p.f[i], gr[i] = g.f[i];
                const optim_grads g32 = {gr, DT_F32, 1.0f, 1.0f, NULL, NULL};
                for (int t = 1; t <= 3; t++) {
                    if (adam) {
                        assert_int_equal(
                            k->adamw(be, pa, &g32, s1a, s2a, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t, DT_F32, NULL),
                            DT_OK);
                        assert_int_equal(
                            k->adamw(be, pb, &g32, s1b, s2b, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t, types[ti], copy),
                            DT_OK);
                    } else {
                        assert_int_equal(k->sgd(be, pa, &g32, s1a, n, 0.1f, 0.9f, 5e-4f, t == 1, DT_F32, NULL), DT_OK);
                        assert_int_equal(k->sgd(be, pb, &g32, s1b, n, 0.1f, 0.9f, 5e-4f, t == 1, types[ti], copy),
                                         DT_OK);
                    }
                    assert_memory_equal(pa, pb, n * sizeof *pa);
                    cpu_cast_f32_to_16(types[ti], pb, cast, n);
                    assert_memory_equal(copy, cast, n * sizeof *copy);
                }
                free(pa), free(pb), free(gr), free(s1a), free(s2a), free(s1b), free(s2b), free(copy), free(cast);
                tensor_free(&p), tensor_free(&g);
            }
    /* A copy of another type is refused, naming it, and nothing is written. */
    float p1 = 1.0f, g1 = 0.5f, b1 = 0.0f;
    uint16_t c1 = 0;
    assert_int_equal(
        k->sgd(be, &p1, &(optim_grads){&g1, DT_F32, 1.0f, 1.0f, NULL, NULL}, &b1, 1, 0.1f, 0.9f, 0.0f, 1, DT_F32, &c1),
        DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "sgd: the parameter copy's type"));
    assert_true(p1 == 1.0f && c1 == 0);
}

/* The gradients as kept: fp32 or 16-bit, with the pending unscale and clip factors. A step on them
 * must give the bits of the gradients widened and multiplied first (in float, one rounding each)
 * followed by a
 * step on those, across the table's blocks and a partial AdamW group at the end. */
static void test_grad_kinds(void **st)
{
    (void)st;
    backend *be = backend_cpu();
    const backend_ops *k = be->ops;
    const size_t n = 5003;
    const dt_dtype types[] = {DT_F32, DT_F16, DT_BF16};
    const float mul[][2] = {{1.0f, 1.0f}, {1.0f / 1024.0f, 1.0f}, {1.0f / 3000.0f, 0.37f}};
    tensor p = tensor_rand(n, 1.0, 0.0), g = tensor_rand(n, 8.0, 0.0);
    float *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb), *wide = malloc(n * sizeof *wide);
    float *s1a = malloc(n * sizeof(float)), *s2a = malloc(n * sizeof(float));
    float *s1b = malloc(n * sizeof(float)), *s2b = malloc(n * sizeof(float));
    uint16_t *g16 = malloc(n * sizeof *g16);
    assert_true(pa && pb && wide && s1a && s2a && s1b && s2b && g16);
    for (int ti = 0; ti < 3; ti++)
        for (int mi = 0; mi < 3; mi++)
            for (int adam = 0; adam < 2; adam++) {
                const dt_dtype t = types[ti];
                const float m1 = mul[mi][0], m2 = mul[mi][1];
                const void *kept = g.f;
                if (t != DT_F32) {
                    cpu_cast_f32_to_16(t, g.f, g16, n);
                    cpu_cast_16_to_f32(t, g16, wide, n);
                    kept = g16;
                } else {
                    memcpy(wide, g.f, n * sizeof *wide);
                }
                for (size_t i = 0; i < n; i++) {
                    if (m1 != 1.0f) wide[i] *= m1;
                    if (m2 != 1.0f) wide[i] *= m2;
                }
                for (size_t i = 0; i < n; i++) pa[i] = pb[i] = p.f[i], s1a[i] = s1b[i] = 0.01f, s2a[i] = s2b[i] = 1e-4f;
                const optim_grads ga = {wide, DT_F32, 1.0f, 1.0f, NULL, NULL}, gb = {kept, t, m1, m2, NULL, NULL};
                if (adam) {
                    assert_int_equal(
                        k->adamw(be, pa, &ga, s1a, s2a, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 2, DT_F32, NULL), DT_OK);
                    assert_int_equal(
                        k->adamw(be, pb, &gb, s1b, s2b, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 2, DT_F32, NULL), DT_OK);
                } else {
                    assert_int_equal(k->sgd(be, pa, &ga, s1a, n, 0.1f, 0.9f, 5e-4f, 0, DT_F32, NULL), DT_OK);
                    assert_int_equal(k->sgd(be, pb, &gb, s1b, n, 0.1f, 0.9f, 5e-4f, 0, DT_F32, NULL), DT_OK);
                }
                if (memcmp(pa, pb, n * sizeof *pa) || memcmp(s1a, s1b, n * sizeof *s1a) ||
                    (adam && memcmp(s2a, s2b, n * sizeof *s2a)))
                    fail_msg("%s, gradients of type %d, factors %g and %g: the step on them differs from the step "
                             "on them widened and scaled first",
                             adam ? "adamw" : "sgd", (int)t, (double)m1, (double)m2);
            }
    /* A gradient type that is not one is refused. */
    assert_int_equal(k->sgd(be, pa, &(optim_grads){g.f, (dt_dtype)77, 1.0f, 1.0f, NULL, NULL}, s1a, 1, 0.1f, 0.9f, 0.0f,
                            1, DT_F32, NULL),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "sgd: the gradients' type 77"));
    free(pa), free(pb), free(wide), free(s1a), free(s2a), free(s1b), free(s2b), free(g16);
    tensor_free(&p), tensor_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),        cmocka_unit_test(test_adamw),      cmocka_unit_test(test_adamw_tail),
        cmocka_unit_test(test_fused_copy), cmocka_unit_test(test_grad_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
