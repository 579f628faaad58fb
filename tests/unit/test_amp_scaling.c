/*
 * test_amp_scaling.c - the loss-scaling side of mixed precision on the model:
 *  - loss-scaling arithmetic: scale then unscale, underflow of small fp16 gradients without a scale,
 *    fp16 overflow of a too-large scale (and bf16's immunity to both);
 *  - the overflow path: an injected inf, found_inf, and the per-layer check;
 *  - dt_model_optimizer_step on 16-bit gradients against dt_optimizer_step on the widened and
 *    unscaled gradients (SGD with momentum and weight decay, AdamW; two steps each);
 *  - dt_model_memory in fp32 and fp16.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/amp.h"
#include "kernels/cast.h"
#include "runtime/test_hooks.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"

/* ---------------------------------------------------------------- 3. loss scaling */

/* fp32 gradients: a power-of-two loss scale multiplies every gradient exactly (the backward is
 * linear in dlogits and scaling by 2^k commutes with fp32 rounding away from over/underflow), and
 * dt_model_unscale_grads divides it out exactly, so the result equals the unscaled run bit for bit.
 * The same holds for bf16 compute and gradients (fp32's exponent range: no subnormals at these
 * magnitudes). Not for fp16: activation gradients of ~1e-3 that nearly cancel fall into fp16's
 * subnormal range at S = 1 but not at S = 1024, where they keep more bits (the point of scaling). */
static void test_scale_unscale_exact(void **st)
{
    (void)st;
    const float S = 1024.0f;
    const dt_dtype kinds[][2] = {{DT_F32, DT_F32}, {DT_BF16, DT_F32}, {DT_BF16, DT_BF16}};
    for (int k = 0; k < 3; k++) {
        dt_model *m = make_model("conv:4:3:1:1,relu,pool:2,fc:10", "2x8x8", 4, kinds[k][0], kinds[k][1]);
        const size_t np = dt_model_num_params(m);
        float *x;
        int32_t *y;
        rng_seed("scale exact", k);
        make_batch(m, 4, 1.0f, &x, &y);
        float *g1 = xmalloc(np * sizeof *g1), *gs = xmalloc(np * sizeof *gs);
        double l1, ls;
        int c1, cs, inf = -1;
        assert_int_equal(dt_model_forward_backward(m, x, y, 4, 0.25f, &l1, &c1), DT_OK);
        read_grads(m, g1);
        assert_int_equal(dt_model_forward_backward(m, x, y, 4, 0.25f * S, &ls, &cs), DT_OK);
        assert_int_equal(dt_model_unscale_grads(m, 1.0f / S, &inf), DT_OK);
        assert_int_equal(inf, 0);
        if (dt_model_grads(m))
            memcpy(gs, dt_model_grads(m), np * sizeof *gs);
        else
            widen_grads(m, gs); /* applies the 1/S of dt_model_unscale_grads, as the optimizer does */
        assert_true(l1 == ls);  /* the loss does not depend on the scale */
        assert_int_equal(c1, cs);
        size_t nz = 0;
        for (size_t i = 0; i < np; i++) {
            if (g1[i] != gs[i])
                fail_msg("%s/%s grads: element %zu: unscaled run %.9g, scaled and unscaled %.9g", tname(kinds[k][0]),
                         tname(kinds[k][1]), i, (double)g1[i], (double)gs[i]);
            nz += g1[i] != 0;
        }
        assert_true(nz > np / 2); /* not trivially zero */
        free(g1);
        free(gs);
        free(x);
        free(y);
        dt_model_free(m);
    }
}

/* fp16 gradients that underflow: inputs of size ~2^-20 make the first layer's weight gradients
 * (dy^T x / batch, ~1e-8) smaller than half of fp16's smallest subnormal (2^-25 ~ 3e-8), so without
 * a loss scale most of them round to zero; with S = 65536 they land in fp16's normal range (~1e-3)
 * and come back after unscaling within fp16 rounding of the fp32 model's. The inputs are fp16
 * values themselves (rounded here), so the fp32 reference sees the same inputs as the fp16 model.
 * bf16 has fp32's exponent range: the same batch keeps its gradients without any scale. */
static void test_scaling_prevents_underflow(void **st)
{
    (void)st;
    const char *spec = "fc:32,relu,fc:10", *input = "20";
    const int B = 8;
    dt_model *ref = make_model(spec, input, B, DT_F32, DT_F32);
    dt_model *m = make_model(spec, input, B, DT_F16, DT_F16);
    dt_model *mb = make_model(spec, input, B, DT_BF16, DT_BF16);
    const size_t np = dt_model_num_params(m), nw = 20 * 32; /* the first layer's weights come first */
    float *x;
    int32_t *y;
    rng_seed("underflow", 0);
    make_batch(m, B, 1.0f / 1048576.0f, &x, &y);
    for (size_t i = 0; i < (size_t)B * 20; i++) x[i] = half_f16_to_f32(half_f32_to_f16(x[i]));
    float *g_ref = xmalloc(np * sizeof(float)), *g1 = xmalloc(np * sizeof(float)), *gS = xmalloc(np * sizeof(float)),
          *gb = xmalloc(np * sizeof(float));
    double l;
    int c, inf = -1;
    const float S = 65536.0f;
    assert_int_equal(dt_model_forward_backward(ref, x, y, B, 1.0f / B, &l, &c), DT_OK);
    read_grads(ref, g_ref);
    assert_int_equal(dt_model_forward_backward(m, x, y, B, 1.0f / B, &l, &c), DT_OK);
    read_grads(m, g1);
    assert_int_equal(dt_model_forward_backward(m, x, y, B, S / B, &l, &c), DT_OK);
    assert_int_equal(dt_model_unscale_grads(m, 1.0f / S, &inf), DT_OK);
    assert_int_equal(inf, 0);
    widen_grads(m, gS);
    assert_int_equal(dt_model_forward_backward(mb, x, y, B, 1.0f / B, &l, &c), DT_OK);
    read_grads(mb, gb);

    size_t nz_ref = 0, nz1 = 0, nzS = 0, nzb = 0;
    for (size_t i = 0; i < nw; i++) {
        nz_ref += g_ref[i] != 0;
        nz1 += g1[i] != 0;
        nzS += gS[i] != 0;
        nzb += gb[i] != 0;
    }
    const double e1 = rel_l2(g1, g_ref, nw), eS = rel_l2(gS, g_ref, nw), eb = rel_l2(gb, g_ref, nw);
    print_message("fp16 first-layer weight grads, inputs ~1e-6: nonzero %zu (fp32) %zu (S=1) %zu (S=65536) "
                  "%zu (bf16, S=1); rel err %.2e (S=1) %.2e (S=65536) %.2e (bf16)\n",
                  nz_ref, nz1, nzS, nzb, e1, eS, eb);
    /* Without the scale over half the nonzero gradients are lost and the error is of order 1; with
     * it none is lost and the error is fp16 rounding (bound 4x the measured value). */
    assert_true(nz_ref > nw / 4); /* about half the hidden units are dead (ReLU of the bias alone) */
    assert_true(nz1 < nz_ref / 2);
    assert_true(e1 > 0.5);
    assert_int_equal(nzS, nz_ref);
    assert_true(eS < F16_GRAD_TOL);
    assert_int_equal(nzb, nz_ref);
    assert_true(eb < BF16_GRAD_TOL);
    /* The whole vector (later layers are far from underflow) agrees too once scaled. */
    assert_true(rel_l2(gS, g_ref, np) < F16_GRAD_TOL);
    free(g_ref);
    free(g1);
    free(gS);
    free(gb);
    free(x);
    free(y);
    dt_model_free(ref);
    dt_model_free(m);
    dt_model_free(mb);
}

/* A too-large scale overflows fp16 (65504) but not bf16: with S = 2^24 the loss gradient alone is
 * ~2^24 / batch * O(0.1) > 65504. */
static void test_scale_overflow(void **st)
{
    (void)st;
    const float S = 16777216.0f;
    dt_model *m = make_model("fc:32,relu,fc:10", "20", 8, DT_F16, DT_F16);
    dt_model *mb = make_model("fc:32,relu,fc:10", "20", 8, DT_BF16, DT_BF16);
    float *x;
    int32_t *y;
    rng_seed("overflow", 0);
    make_batch(m, 8, 1.0f, &x, &y);
    double l;
    int c, inf = -1;
    dt_model_set_nonfinite_check(m, 1);
    assert_int_equal(dt_model_forward_backward(m, x, y, 8, S / 8, &l, &c), DT_OK);
    assert_int_equal(dt_model_unscale_grads(m, 1.0f / S, &inf), DT_OK);
    assert_int_equal(inf, 1);
    assert_int_equal(dt_model_nonfinite_layer(m), 2); /* found in the last fc, the first done */
    assert_true(isfinite(l));                         /* the forward is not scaled */
    inf = -1;
    assert_int_equal(dt_model_forward_backward(mb, x, y, 8, S / 8, &l, &c), DT_OK);
    assert_int_equal(dt_model_unscale_grads(mb, 1.0f / S, &inf), DT_OK);
    assert_int_equal(inf, 0);
    free(x);
    free(y);
    dt_model_free(m);
    dt_model_free(mb);
}

/* ---------------------------------------------------------------- 4. the overflow path */

static void inject_case(const char *spec, const char *input, int batch, dt_dtype compute, dt_dtype grads, int last_fc,
                        const char *name)
{
    dt_model *m = make_model(spec, input, batch, compute, grads);
    float *x;
    int32_t *y;
    rng_seed(spec, 4 * (int)compute + (int)grads);
    make_batch(m, batch, 1.0f, &x, &y);
    double l;
    int c, inf;
    char buf[64];
    const float gs = 1.0f / (float)batch;

    /* Check off: found_inf still says so, but no layer is named. */
    model_test_inject_inf(m);
    assert_int_equal(dt_model_forward_backward(m, x, y, batch, gs, &l, &c), DT_OK);
    inf = -1;
    assert_int_equal(dt_model_unscale_grads(m, 1.0f, &inf), DT_OK);
    assert_int_equal(inf, 1);
    assert_int_equal(dt_model_nonfinite_layer(m), -1);

    /* The injection is used up: the next step is clean. */
    assert_int_equal(dt_model_forward_backward(m, x, y, batch, gs, &l, &c), DT_OK);
    inf = -1;
    assert_int_equal(dt_model_unscale_grads(m, 1.0f, &inf), DT_OK);
    assert_int_equal(inf, 0);

    /* Check on: the first layer done in backward, the last fc, is named. Also with an unscale
     * factor other than 1 (fp32 gradients go through the fused unscale + count then). */
    dt_model_set_nonfinite_check(m, 1);
    model_test_inject_inf(m);
    assert_int_equal(dt_model_forward_backward(m, x, y, batch, gs, &l, &c), DT_OK);
    inf = -1;
    assert_int_equal(dt_model_unscale_grads(m, 0.5f, &inf), DT_OK);
    assert_int_equal(inf, 1);
    assert_int_equal(dt_model_nonfinite_layer(m), last_fc);
    dt_model_layer_name(m, dt_model_nonfinite_layer(m), buf, sizeof buf);
    assert_string_equal(buf, name);

    /* A normal step afterwards: nothing found, no layer named. */
    assert_int_equal(dt_model_forward_backward(m, x, y, batch, gs, &l, &c), DT_OK);
    inf = -1;
    assert_int_equal(dt_model_unscale_grads(m, 0.5f, &inf), DT_OK);
    assert_int_equal(inf, 0);
    assert_int_equal(dt_model_nonfinite_layer(m), -1);

    /* Switching the check off again. */
    dt_model_set_nonfinite_check(m, 0);
    model_test_inject_inf(m);
    assert_int_equal(dt_model_forward_backward(m, x, y, batch, gs, &l, &c), DT_OK);
    assert_int_equal(dt_model_nonfinite_layer(m), -1);
    free(x);
    free(y);
    dt_model_free(m);
}

static void test_inject_inf(void **st)
{
    (void)st;
    const dt_dtype kinds[][2] = {{DT_F32, DT_F32}, {DT_F16, DT_F16}, {DT_BF16, DT_BF16}, {DT_F16, DT_F32}};
    for (int k = 0; k < 4; k++) {
        inject_case("fc:32,relu,fc:10", "20", 8, kinds[k][0], kinds[k][1], 2, "layer 2 (fc:10)");
        /* conv, relu, pool, the implied flatten, fc */
        inject_case("conv:4:3:1:1,relu,pool:2,fc:10", "2x8x8", 4, kinds[k][0], kinds[k][1], 4, "layer 4 (fc:10)");
    }
    dt_model *m = make_model("conv:4:3:1:1,relu,pool:2,fc:10", "2x8x8", 4, DT_F32, DT_F32);
    char buf[64];
    dt_model_layer_name(m, 0, buf, sizeof buf);
    assert_string_equal(buf, "layer 0 (conv:4:3:1:1)");
    dt_model_layer_name(m, 2, buf, sizeof buf);
    assert_string_equal(buf, "layer 2 (pool:2)");
    dt_model_layer_name(m, -1, buf, sizeof buf);
    assert_string_equal(buf, "-");
    dt_model_layer_name(m, 5, buf, sizeof buf);
    assert_string_equal(buf, "-");
    dt_model_free(m);
}

/* ---------------------------------------------------------------- 5. the optimizer step */

/* dt_model_optimizer_step on 16-bit gradients must equal dt_optimizer_step on those gradients
 * widened and multiplied by inv_scale: the model runs the same elementwise kernel on blocks of 2048
 * elements, and an elementwise update does not depend on the blocking, so the results are expected
 * bit for bit (the library is built with -std=c11, where gcc does not contract a*b+c into an FMA,
 * so the vectorized body and the scalar tail of the kernel round the same way). 4810 parameters:
 * two full blocks and a partial one. */
static void opt_case(dt_dtype t, const dt_optim_config *cfg)
{
    const char *spec = "fc:64,relu,fc:10", *input = "64";
    const int B = 8;
    const float S = 1024.0f;
    dt_model *m = make_model(spec, input, B, t, t);
    const size_t np = dt_model_num_params(m);
    assert_int_equal(np, 64 * 64 + 64 + 64 * 10 + 10);
    dt_optimizer *o, *oref;
    assert_int_equal(dt_optimizer_create(cfg, np, &o), DT_OK);
    assert_int_equal(dt_optimizer_create(cfg, np, &oref), DT_OK);
    float *pref = xmalloc(np * sizeof *pref), *g = xmalloc(np * sizeof *g), *p0 = xmalloc(np * sizeof *p0);
    memcpy(pref, dt_model_params(m), np * sizeof *pref);
    memcpy(p0, pref, np * sizeof *p0);
    rng_seed(tname(t), (int)cfg->kind);
    for (int step = 0; step < 2; step++) {
        float *x;
        int32_t *y;
        make_batch(m, B, 1.0f, &x, &y);
        double l;
        int c, inf = -1;
        assert_int_equal(dt_model_forward_backward(m, x, y, B, S / B, &l, &c), DT_OK);
        read_grads(m, g); /* the scaled 16-bit gradients, widened */
        assert_int_equal(dt_model_unscale_grads(m, 1.0f / S, &inf), DT_OK);
        assert_int_equal(inf, 0);
        assert_int_equal(dt_model_optimizer_step(m, o), DT_OK);
        for (size_t i = 0; i < np; i++) g[i] *= 1.0f / S;
        assert_int_equal(dt_optimizer_step(oref, pref, g), DT_OK);
        const float *p = dt_model_params(m);
        for (size_t i = 0; i < np; i++)
            if (p[i] != pref[i])
                fail_msg("%s, optimizer %d, step %d: param %zu: model step %.9g, reference %.9g", tname(t),
                         (int)cfg->kind, step + 1, i, (double)p[i], (double)pref[i]);
        free(x);
        free(y);
    }
    /* The steps did move the parameters. */
    size_t moved = 0;
    for (size_t i = 0; i < np; i++) moved += dt_model_params(m)[i] != p0[i];
    assert_true(moved > np / 2);
    free(pref);
    free(g);
    free(p0);
    dt_optimizer_free(o);
    dt_optimizer_free(oref);
    dt_model_free(m);
}

static void test_optimizer_step16(void **st)
{
    (void)st;
    dt_optim_config c;
    dt_optim_defaults(&c);
    c.kind = DT_OPTIM_SGD;
    c.lr = 0.1f;
    c.momentum = 0.9f;
    c.weight_decay = 0.01f;
    opt_case(DT_F16, &c);
    opt_case(DT_BF16, &c);
    dt_optim_defaults(&c);
    c.kind = DT_OPTIM_ADAMW;
    c.lr = 1e-3f;
    c.weight_decay = 0.01f;
    opt_case(DT_F16, &c);
    opt_case(DT_BF16, &c);

    /* An optimizer of the wrong size is refused, for 16-bit gradients too. */
    dt_model *m = make_model("fc:64,relu,fc:10", "64", 8, DT_F16, DT_F16);
    dt_optimizer *o;
    assert_int_equal(dt_optimizer_create(&c, dt_model_num_params(m) - 1, &o), DT_OK);
    assert_int_equal(dt_model_optimizer_step(m, o), DT_ERR_INVALID_ARG);
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* ---------------------------------------------------------------- 6. memory */

static size_t mem_total(const dt_memory_summary *s)
{
    return s->params + s->grads + s->optimizer + s->activations + s->workspace;
}

static void mem_case(const char *spec, const char *input, int batch, int total_smaller)
{
    dt_model *m32 = make_model(spec, input, batch, DT_F32, DT_F32);
    dt_model *m16 = make_model(spec, input, batch, DT_F16, DT_F16);
    const size_t np = dt_model_num_params(m32);
    dt_optim_config c;
    dt_optim_defaults(&c); /* SGD with momentum: one fp32 buffer */
    dt_optimizer *o;
    assert_int_equal(dt_optimizer_create(&c, np, &o), DT_OK);
    dt_memory_summary a, b;
    dt_model_memory(m32, o, &a);
    dt_model_memory(m16, o, &b);
    print_message("%s on %s, batch %d, %zu params:\n"
                  "  fp32: params %zu grads %zu optimizer %zu activations %zu workspace %zu total %zu\n"
                  "  fp16: params %zu grads %zu optimizer %zu activations %zu workspace %zu total %zu\n",
                  spec, input, batch, np, a.params, a.grads, a.optimizer, a.activations, a.workspace, mem_total(&a),
                  b.params, b.grads, b.optimizer, b.activations, b.workspace, mem_total(&b));
    assert_int_equal(a.params, np * 4);
    assert_int_equal(b.params, a.params); /* the fp32 master copy; no stored 16-bit copy */
    assert_int_equal(a.grads, np * 4);
    assert_int_equal(b.grads, np * 2);
    assert_int_equal(a.optimizer, np * 4);
    assert_int_equal(b.optimizer, a.optimizer);
    assert_true(b.activations < a.activations);
    assert_true(b.workspace > a.workspace); /* the fp32 conversion scratch */
    if (total_smaller) assert_true(mem_total(&b) < mem_total(&a));
    /* Without an optimizer nothing is counted for it; fp32 gradients with fp16 compute are 4 bytes. */
    dt_model_memory(m16, NULL, &b);
    assert_int_equal(b.optimizer, 0);
    assert_int_equal(dt_model_set_precision(m16, DT_F16, DT_F32), DT_OK);
    dt_model_memory(m16, NULL, &b);
    assert_int_equal(b.grads, np * 4);
    dt_optimizer_free(o);
    dt_model_free(m32);
    dt_model_free(m16);
}

static void test_memory(void **st)
{
    (void)st;
    /* Small activations: the fixed conversion scratch outweighs what 16 bits save, so the total is
     * not compared. */
    mem_case("conv:4:3:1:1,relu,pool:2,fc:10", "2x8x8", 64, 0);
    /* 32x28x28 conv outputs at batch 64: halving them saves far more than the scratch costs. */
    mem_case("conv:32:3:1:1,relu,pool:2,fc:10", "1x28x28", 64, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_unscale_exact), cmocka_unit_test(test_scaling_prevents_underflow),
        cmocka_unit_test(test_scale_overflow),      cmocka_unit_test(test_inject_inf),
        cmocka_unit_test(test_optimizer_step16),    cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
