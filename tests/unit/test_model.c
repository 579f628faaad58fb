/*
 * test_model.c - a finite-difference gradient check of whole models through the public API, the
 * optimizers' formulas, the clipping coefficient (fp32, and pending on 16-bit gradients), and the
 * synthetic dataset's determinism and sharding (the layer-list grammar: test_model_spec.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whole-model gradient check: central differences of the mean loss around fp32 parameters.
 * This catches wiring mistakes (a wrong buffer, offset or layer order gives errors of order 1);
 * the per-op checks in test_kernels_*.c hold each op to fp64 references tightly. Here the forward
 * runs in fp32 and ReLU/max-pool kinks can fall inside a difference step, so the bound is on the
 * whole gradient vector (1%) plus a per-element sanity bound. */
static void grad_check(const char *spec, const char *input, int batch)
{
    dt_model *m;
    assert_int_equal(dt_model_create(NULL, spec, input, 7, batch, &m), DT_OK);
    size_t in = dt_model_input_size(m), np = dt_model_num_params(m);
    int classes = dt_model_num_classes(m);
    float *x = malloc(batch * in * sizeof *x);
    int32_t *y = malloc(batch * sizeof *y);
    for (size_t i = 0; i < batch * in; i++) x[i] = (float)sin(0.37 * (double)i + 0.1);
    for (int i = 0; i < batch; i++) y[i] = i % classes;
    double loss;
    int correct;
    assert_int_equal(dt_model_forward_backward(m, x, y, batch, 1.0f / batch, &loss, &correct), DT_OK);
    float *g = malloc(np * sizeof *g);
    memcpy(g, dt_model_grads(m), np * sizeof *g);
    double gmax = 0;
    for (size_t i = 0; i < np; i++) gmax = fmax(gmax, fabs(g[i]));
    float *p = dt_model_params(m);
    double diff2 = 0, ref2 = 0, worst = 0;
    for (size_t i = 0; i < np; i++) {
        float keep = p[i];
        const float h = 2e-3f;
        double lp, lm;
        p[i] = keep + h;
        dt_model_forward_backward(m, x, y, batch, 1.0f / batch, &lp, &correct);
        p[i] = keep - h;
        dt_model_forward_backward(m, x, y, batch, 1.0f / batch, &lm, &correct);
        p[i] = keep;
        double fd = (lp - lm) / batch / (2.0 * ((double)(keep + h) - (double)keep));
        double err = fabs(fd - g[i]);
        diff2 += err * err;
        ref2 += fd * fd;
        if (err > worst) worst = err;
        if (err > 0.05 * fmax(fabs(fd), fabs(g[i])) + 0.02 * gmax)
            fail_msg("%s: d loss/d p[%zu]: backward %.6g, finite difference %.6g", spec, i, g[i], fd);
    }
    double rel = sqrt(diff2 / ref2);
    print_message("%s on %s: %zu params, gradient relative error %.2e (worst element %.2e of max %.2e)\n", spec, input,
                  np, rel, worst, gmax);
    assert_true(rel < 1e-2);
    free(g);
    free(x);
    free(y);
    dt_model_free(m);
}

static void test_model_gradients(void **st)
{
    (void)st;
    grad_check("fc:7,relu,fc:5,relu,fc:3", "6", 4);
    grad_check("conv:3:3:1:1,relu,pool:2,conv:4:3:2:1,relu,fc:6,relu,fc:3", "2x8x7", 3);
    grad_check("flatten,relu,fc:3", "2x3x3", 2); /* ReLU straight on the (const) input */
    grad_check("relu,fc:4,relu,fc:2", "5", 2);
}

static void test_forward_backward_errors(void **st)
{
    (void)st;
    dt_model *m;
    assert_int_equal(dt_model_create(NULL, "fc:4,fc:3", "2", 1, 2, &m), DT_OK);
    float x[4] = {0};
    int32_t bad[2] = {0, 3};
    double loss;
    int c;
    assert_int_equal(dt_model_forward_backward(m, x, bad, 2, 0.5f, &loss, &c), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "label 3"));
    int32_t ok[2] = {0, 1};
    assert_int_equal(dt_model_forward_backward(m, x, ok, 3, 0.5f, &loss, &c), DT_ERR_INVALID_ARG);
    /* Staging ahead: refused arguments named; on the CPU a batch is read where it is, so a good one
     * is DT_OK and the pass after it as without. */
    assert_int_equal(dt_model_stage_batch(m, x, ok, 3), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "batch 3 is outside 1..2"));
    assert_int_equal(dt_model_stage_batch(m, x, ok, 0), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_stage_batch(m, NULL, ok, 1), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_stage_batch(NULL, x, ok, 1), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_stage_batch(m, x, ok, 2), DT_OK);
    assert_int_equal(dt_model_forward_backward(m, x, ok, 2, 0.5f, &loss, &c), DT_OK);
    /* Nothing queued on a device here: the wait returns at once; a NULL model is refused. */
    assert_int_equal(dt_model_synchronize(m), DT_OK);
    assert_int_equal(dt_model_synchronize(NULL), DT_ERR_INVALID_ARG);
    dt_model_free(m);
    assert_int_equal(dt_model_create(NULL, "fc:4,fc:3", "2", 1, 0, &m), DT_ERR_INVALID_ARG);
    assert_null(m);
}

/* dt_model_clip_grad_norm multiplies by PyTorch's clip_coef = max_norm / (norm + 1e-6), rounded to
 * fp32: at a norm of ~1e-5 the 1e-6 moves the coefficient by ~10%, so the gradients after clipping
 * are compared bit for bit with that product. */
static void test_clip_coef(void **st)
{
    (void)st;
    dt_model *m;
    assert_int_equal(dt_model_create(NULL, "fc:4,relu,fc:3", "5", 3, 2, &m), DT_OK);
    const size_t np = dt_model_num_params(m);
    const float x[10] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, 0.1f, -0.3f, 0.9f, -2.0f};
    const int32_t y[2] = {0, 2};
    double loss, norm = 0;
    int c;
    assert_int_equal(dt_model_forward_backward(m, x, y, 2, 1e-5f, &loss, &c), DT_OK);
    float *g = malloc(np * sizeof *g);
    memcpy(g, dt_model_grads(m), np * sizeof *g);
    double ss = 0;
    for (size_t i = 0; i < np; i++) ss += (double)g[i] * g[i];
    const double max = sqrt(ss) / 4;
    assert_int_equal(dt_model_clip_grad_norm(m, max, &norm), DT_OK);
    assert_true(fabs(norm - sqrt(ss)) <= 1e-9 * norm);
    assert_true(norm > 1e-7 && norm < 1e-4); /* where the 1e-6 shows */
    const float coef = (float)(max / (norm + 1e-6));
    for (size_t i = 0; i < np; i++)
        if (dt_model_grads(m)[i] != g[i] * coef)
            fail_msg("clipped gradient %zu: %.9g, want %.9g * %.9g", i, dt_model_grads(m)[i], g[i], coef);
    free(g);
    /* 16-bit gradients keep the coefficient pending: a second clip multiplies it in, so clipping
     * to half and then to a quarter of the norm leaves a quarter. */
    assert_int_equal(dt_model_set_precision(m, DT_BF16, DT_BF16), DT_OK);
    assert_int_equal(dt_model_forward_backward(m, x, y, 2, 0.5f, &loss, &c), DT_OK);
    double n0 = 0, n1 = 0, n2 = 0;
    assert_int_equal(dt_model_grad_norm(m, &n0), DT_OK);
    assert_int_equal(dt_model_clip_grad_norm(m, n0 / 2, NULL), DT_OK);
    assert_int_equal(dt_model_clip_grad_norm(m, n0 / 4, &n1), DT_OK);
    assert_int_equal(dt_model_grad_norm(m, &n2), DT_OK);
    assert_true(fabs(n1 - n0 / 2) <= 1e-5 * n0);
    assert_true(fabs(n2 - n0 / 4) <= 1e-5 * n0);
    dt_model_free(m);
}

static void test_optimizers(void **st)
{
    (void)st;
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.lr = 0.1f;
    c.momentum = 0.5f;
    c.weight_decay = 0.1f;
    dt_optimizer *o;
    assert_int_equal(dt_optimizer_create(&c, 1, &o), DT_OK);
    float p = 1.0f, g = 2.0f;
    /* step 1: g' = 2 + 0.1 = 2.1, buf = 2.1, p = 1 - 0.21 = 0.79
     * step 2: g' = 2 + 0.079 = 2.079, buf = 1.05 + 2.079 = 3.129, p = 0.79 - 0.3129 = 0.4771 */
    dt_optimizer_step(o, &p, &g);
    assert_float_equal(p, 0.79f, 1e-6);
    dt_optimizer_step(o, &p, &g);
    assert_float_equal(p, 0.4771f, 1e-6);
    dt_optimizer_free(o);

    dt_optim_defaults(&c);
    c.kind = DT_OPTIM_ADAMW;
    c.lr = 0.1f;
    c.weight_decay = 0.5f;
    assert_int_equal(dt_optimizer_create(&c, 1, &o), DT_OK);
    p = 1.0f;
    g = 2.0f;
    /* step 1: p = 1 - 0.1*0.5*1 = 0.95; m-hat = 2, v-hat = 4: p -= 0.1 * 2 / (2 + 1e-8) -> 0.85 */
    dt_optimizer_step(o, &p, &g);
    assert_float_equal(p, 0.85f, 1e-6);
    dt_optimizer_free(o);

    c.lr = -1;
    assert_int_equal(dt_optimizer_create(&c, 1, &o), DT_ERR_INVALID_ARG);
    dt_optim_defaults(&c);
    c.momentum = 1.5f;
    assert_int_equal(dt_optimizer_create(&c, 1, &o), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "momentum 1.5"));
}

static void test_dataset(void **st)
{
    (void)st;
    const size_t in = 20;
    dt_dataset *d, *d2;
    assert_int_equal(dt_synthetic_create(in, 1, 1, 10, 1000, 5, &d), DT_OK);
    assert_int_equal(dt_synthetic_create(in, 1, 1, 10, 1000, 5, &d2), DT_OK);
    enum { W = 4, B = 8 };
    float *all = malloc(40 * in * sizeof *all), *part = malloc(B * in * sizeof *part);
    int32_t la[W * B], lp[B];
    for (long step = 0; step < 70; step += 23) { /* 31 steps per epoch: crosses epochs */
        assert_int_equal(dt_dataset_batch(d, step, 0, 1, W * B, all, la), DT_OK);
        for (int r = 0; r < W; r++) {
            assert_int_equal(dt_dataset_batch(d2, step, r, W, B, part, lp), DT_OK);
            /* Rank r's batch is its contiguous slice of the global batch (DistributedSampler). */
            assert_memory_equal(part, all + (size_t)r * B * in, B * in * sizeof *part);
            assert_memory_equal(lp, la + r * B, sizeof lp);
        }
    }
    /* Every class shows up, none dominates, on 2000 samples. */
    int count[10] = {0};
    int32_t l40[40];
    for (long step = 0; step < 25; step++) {
        assert_int_equal(dt_dataset_batch(d, step, 0, 1, 40, all, l40), DT_OK);
        for (int i = 0; i < 40; i++) count[l40[i]]++;
    }
    for (int c = 0; c < 10; c++)
        if (count[c] == 0 || count[c] > 500) fail_msg("class %d drawn %d times of 1000", c, count[c]);
    /* Epochs are shuffled differently. */
    float *e0 = malloc(B * in * sizeof *e0);
    dt_dataset_batch(d, 0, 0, 1, B, e0, lp);
    dt_dataset_batch(d, 125, 0, 1, B, part, lp); /* 125 steps of 8 = epoch 1, step 0 */
    assert_true(memcmp(e0, part, B * in * sizeof *part) != 0);
    assert_int_equal(dt_dataset_batch(d, 0, 0, 200, 8, all, la), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "smaller than one global batch of 1600"));
    free(e0);
    free(all);
    free(part);
    dt_dataset_free(d);
    dt_dataset_free(d2);
    assert_int_equal(dt_synthetic_create(0, 1, 1, 10, 10, 1, &d), DT_ERR_INVALID_ARG);

    /* Images are smooth: neighbouring pixels differ far less than independent values would. */
    assert_int_equal(dt_synthetic_create(2, 9, 11, 10, 100, 5, &d), DT_OK);
    float img[2 * 9 * 11];
    int32_t lab;
    assert_int_equal(dt_dataset_batch(d, 0, 0, 1, 1, img, &lab), DT_OK);
    double step2 = 0, var = 0, mean = 0;
    for (int i = 0; i < 2 * 9 * 11; i++) mean += img[i] / (2 * 9 * 11);
    for (int i = 0; i < 2 * 9 * 11; i++) var += (img[i] - mean) * (img[i] - mean) / (2 * 9 * 11);
    for (int c = 0; c < 2; c++)
        for (int y = 0; y < 9; y++)
            for (int x = 0; x + 1 < 11; x++) {
                double dd = img[c * 99 + y * 11 + x + 1] - img[c * 99 + y * 11 + x];
                step2 += dd * dd / (2 * 9 * 10);
            }
    assert_true(step2 < 0.25 * 2 * var); /* independent pixels: E[step^2] = 2 var */
    dt_dataset_free(d);
}

/* The background loader hands out exactly dt_dataset_batch's batches, in step order, whatever the
 * number of threads and depth, across epochs and from any first step; a worker's error reaches
 * dt_loader_next after the good batches before it. */
static void test_loader(void **st)
{
    (void)st;
    enum { B = 12, STEPS = 40 };
    const int shapes[2][3] = {{1, 7, 9}, {30, 1, 1}};
    for (int sh = 0; sh < 2; sh++) {
        const int c = shapes[sh][0], h = shapes[sh][1], w = shapes[sh][2];
        const size_t in = (size_t)c * h * w;
        dt_dataset *ref, *d;
        assert_int_equal(dt_synthetic_create(c, h, w, 10, 100, 9, &ref), DT_OK); /* 4 steps per epoch at 2 x 12 */
        float *x = malloc(B * in * sizeof *x);
        int32_t lab[B];
        const int threads[] = {0, 1, 3, 7}, depths[] = {2, 3, 5, 2};
        for (int k = 0; k < 4; k++) {
            assert_int_equal(dt_synthetic_create(c, h, w, 10, 100, 9, &d), DT_OK);
            dt_loader *l;
            const long first = k == 2 ? 7 : 0;
            assert_int_equal(dt_loader_create(NULL, d, 1, 2, B, first, threads[k], depths[k], &l), DT_OK);
            for (long s = first; s < STEPS; s++) {
                long got;
                const float *lx;
                const int32_t *ll;
                assert_int_equal(dt_loader_next(l, &got, &lx, &ll), DT_OK);
                assert_int_equal(got, s);
                assert_int_equal(dt_dataset_batch(ref, s, 1, 2, B, x, lab), DT_OK);
                assert_memory_equal(lx, x, B * in * sizeof *x);
                assert_memory_equal(ll, lab, sizeof lab);
            }
            assert_true(dt_loader_wait_s(l) >= 0);
            dt_loader_free(l); /* with batches still being made ahead */
            dt_dataset_free(d);
        }
        free(x);
        dt_dataset_free(ref);
    }
    /* 100 samples cannot make a global batch of 4 x 30 (the synthetic set drops a partial step):
     * the loader is refused at its creation, with the fix, not by its first batch. */
    dt_dataset *d;
    assert_int_equal(dt_synthetic_create(5, 1, 1, 10, 100, 9, &d), DT_OK);
    for (int t = 0; t <= 2; t += 2) {
        dt_loader *l = (dt_loader *)&l;
        assert_int_equal(dt_loader_create(NULL, d, 0, 4, 30, 0, t, 3, &l), DT_ERR_INVALID_ARG);
        assert_null(l);
        assert_non_null(strstr(dt_last_error(), "smaller than one global batch of 120"));
    }
    /* 4 x 25 fills it exactly: made, and its first batch comes. */
    {
        dt_loader *l;
        assert_int_equal(dt_loader_create(NULL, d, 3, 4, 25, 0, 0, 3, &l), DT_OK);
        long got;
        const float *lx;
        const int32_t *ll;
        assert_int_equal(dt_loader_next(l, &got, &lx, &ll), DT_OK);
        assert_int_equal(got, 0);
        dt_loader_free(l);
    }
    /* A first step before the data position's anchor (a checkpoint's) has no batch either. */
    {
        dt_loader *l = (dt_loader *)&l;
        assert_int_equal(dt_dataset_set_position(d, 10, 0, 0), DT_OK);
        assert_int_equal(dt_loader_create(NULL, d, 0, 1, 4, 9, 0, 3, &l), DT_ERR_INVALID_ARG);
        assert_null(l);
        assert_non_null(strstr(dt_last_error(), "step 9 comes before the data position's anchor at step 10"));
        assert_int_equal(dt_dataset_set_position(d, 0, 0, 0), DT_OK);
    }
    dt_loader *l = NULL;
    assert_int_equal(dt_loader_create(NULL, d, 0, 1, 4, 0, 2, 1, &l), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "depth 1"));
    assert_int_equal(dt_loader_create(NULL, d, 0, 1, 4, 0, 300, 3, &l), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_loader_create(NULL, d, 2, 2, 4, 0, 1, 3, &l), DT_ERR_INVALID_ARG);
    assert_null(l);
    dt_loader_free(NULL);
    dt_dataset_free(d);
}

/* dt_softmax_xent, the public kernel of custom loops: its loss and gradient on a 2 x 3 batch, and a
 * label outside the classes (3, or -1) refused with NaN and nothing written, where it once wrote
 * past the row into the caller's next float. */
static void test_softmax_xent_labels(void **st)
{
    (void)st;
    const float logits[6] = {1, 2, 3, 0, 0, 0};
    float d[7];
    int32_t labels[2] = {2, 0};
    int correct = -1;
    const double loss = dt_softmax_xent(logits, labels, d, 2, 3, 1.0f, &correct);
    const double z = exp(1.0) + exp(2.0) + exp(3.0);
    assert_true(fabs(loss - (log(z) - 3.0 + log(3.0))) < 1e-5);
    assert_int_equal(correct, 2); /* row 0 predicts 2; row 1 ties, and argmax takes the first, 0 */
    assert_true(fabs(d[2] - (exp(3.0) / z - 1.0)) < 1e-6 && fabs(d[3] - (1.0 / 3 - 1.0)) < 1e-6);
    static const int32_t bad[] = {3, -1};
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < 7; i++) d[i] = 12345.0f;
        labels[1] = bad[b];
        const double l = dt_softmax_xent(logits, labels, d, 2, 3, 1.0f, NULL);
        assert_true(isnan(l));
        assert_non_null(strstr(dt_last_error(), "of sample 1 is outside 0..2"));
        for (int i = 0; i < 7; i++) assert_true(d[i] == 12345.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_gradients), cmocka_unit_test(test_forward_backward_errors),
        cmocka_unit_test(test_optimizers),      cmocka_unit_test(test_dataset),
        cmocka_unit_test(test_loader),          cmocka_unit_test(test_softmax_xent_labels),
        cmocka_unit_test(test_clip_coef),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
