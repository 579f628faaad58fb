/*
 * amp_fixture.h - what the 16-bit model tests (test_amp.c, test_amp_scaling.c) share: models in a
 * precision, random batches, reading 16-bit gradients through the public API, relative errors.
 */
#ifndef DT_TESTS_UNIT_AMP_FIXTURE_H
#define DT_TESTS_UNIT_AMP_FIXTURE_H

#include "test_rng.h"

/* Relative L2 error of 16-bit gradients against fp32 ones away from ReLU kinks (how they were
 * measured: the comment above amp_pair in test_amp.c). */
#define F16_GRAD_TOL 2e-3
#define BF16_GRAD_TOL 1.5e-2

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static inline dt_model *make_model(const char *spec, const char *input, int max_batch, dt_dtype compute, dt_dtype grads)
{
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, spec, input, 11, max_batch, &m), DT_OK);
    assert_non_null(m);
    assert_int_equal(dt_model_set_precision(m, compute, grads), DT_OK);
    return m;
}

/* A batch: x uniform in [-scale, scale), labels uniform over the classes. */
static inline void make_batch(const dt_model *m, int batch, float scale, float **x, int32_t **y)
{
    const size_t in = dt_model_input_size(m);
    const int classes = dt_model_num_classes(m);
    *x = xmalloc((size_t)batch * in * sizeof **x);
    *y = xmalloc((size_t)batch * sizeof **y);
    for (size_t i = 0; i < (size_t)batch * in; i++) (*x)[i] = scale * urand();
    for (int i = 0; i < batch; i++) (*y)[i] = (int32_t)(rnext() % (uint64_t)classes);
}

/* The gradients times the model's current unscale factor (the one dt_model_optimizer_step applies),
 * widened to fp32, whatever type they are kept in. Parameters are set to -0 and a plain SGD step
 * with lr 1 runs: p = -0 - 1 * ((g * inv) + 0 * -0) = -(g * inv) exactly, for zeros of either sign
 * too (x + -0 = x, and -0 - x = -x in round-to-nearest). The parameters are restored afterwards. */
static inline void widen_grads(dt_model *m, float *g)
{
    const size_t np = dt_model_num_params(m);
    float *p = dt_model_params(m), *keep = xmalloc(np * sizeof *keep);
    memcpy(keep, p, np * sizeof *p);
    for (size_t i = 0; i < np; i++) p[i] = -0.0f;
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.kind = DT_OPTIM_SGD;
    c.lr = 1.0f;
    c.momentum = 0.0f;
    c.weight_decay = 0.0f;
    dt_optimizer *o = NULL;
    assert_int_equal(dt_optimizer_create(&c, np, &o), DT_OK);
    assert_int_equal(dt_model_optimizer_step(m, o), DT_OK);
    for (size_t i = 0; i < np; i++) g[i] = -p[i];
    dt_optimizer_free(o);
    /* Written through a pointer kept across the step, which wrote the 16-bit copy: say so. */
    memcpy(p, keep, np * sizeof *p);
    dt_model_params_changed(m);
    free(keep);
}

/* The gradients of the last backward as fp32 (unscale factor 1), through the public API. */
static inline void read_grads(dt_model *m, float *g)
{
    const size_t np = dt_model_num_params(m);
    const float *G = dt_model_grads(m);
    if (G) {
        memcpy(g, G, np * sizeof *g);
        return;
    }
    int inf = -1;
    assert_int_equal(dt_model_unscale_grads(m, 1.0f, &inf), DT_OK);
    widen_grads(m, g);
}

/* ||a - b|| / ||b|| in double. */
static inline double rel_l2(const float *a, const float *b, size_t n)
{
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        d2 += d * d;
        r2 += (double)b[i] * (double)b[i];
    }
    return sqrt(d2 / r2);
}

static inline const char *tname(dt_dtype t) { return t == DT_F16 ? "fp16" : t == DT_BF16 ? "bf16" : "fp32"; }

#endif
