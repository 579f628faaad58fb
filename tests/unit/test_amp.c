/*
 * test_amp.c - mixed precision on the model (dt_model_set_precision and friends).
 *
 *  - fp16 / bf16 forward+backward against the fp32 model on the same parameters and batch (MLPs,
 *    small CNNs, fc layers wide enough to be widened in row blocks, and a CNN large enough that the
 *    16-bit path runs its convolution and pooling in chunks of samples), with 16-bit and with fp32
 *    parameter gradients; exact checks that 16-bit gradients are the fp32-gradient run's rounded,
 *    that only the 16-bit values of parameters and inputs matter, and that the chunked batch equals
 *    the sum of its samples;
 *  - the precision API: which gradient buffer exists, switching back and forth, refusals;
 * Loss scaling, the overflow path, 16-bit optimizer steps and memory are test_amp_scaling.c's,
 * the CPU loops (cpu_round16, the 16-bit ReLU, the non-finite counters) test_amp_kernels.c's.
 *
 * 16-bit gradients are not reachable through dt_model_grads (NULL). The tests read them through the
 * public API: from parameters that are all -0, one plain SGD step (lr 1, no momentum, no weight
 * decay) via dt_model_optimizer_step leaves p = -0 - 1 * (g * inv_scale) = -(g * inv_scale), exactly
 * and with the sign of zeros kept (see widen_grads).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/amp.h"
#include "kernels/backend.h"
#include "kernels/cast.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"

/* ---------------------------------------------------------------- 1. 16-bit against fp32 */

/* Runs spec on one random batch in fp32 and in compute type t, with 16-bit gradients and with fp32
 * gradients, and compares the gradient vectors and the summed losses.
 *
 * Besides the tolerances, one exact relation: the (t, fp32-gradient) run and the (t, t) run do the
 * same forward and the same fp32 GEMMs/column sums on the same 16-bit inputs, and the latter only
 * rounds the result to t at the end, so round16(grads of the first) == grads of the second, element
 * for element, and their losses are bitwise equal. */
static void amp_case(const char *spec, const char *input, int batch, const size_t *blocks, int nblocks, dt_dtype t,
                     double bound_grad, double bound_layer, double bound_loss, int max_correct_diff)
{
    dt_model *ref = make_model(spec, input, batch, DT_F32, DT_F32);
    dt_model *m16 = make_model(spec, input, batch, t, t);
    dt_model *m32 = make_model(spec, input, batch, t, DT_F32);
    const size_t np = dt_model_num_params(ref);
    assert_memory_equal(dt_model_params(ref), dt_model_params(m16), np * sizeof(float)); /* same seed */
    rng_seed(spec, (int)t);
    float *x;
    int32_t *y;
    make_batch(ref, batch, 1.0f, &x, &y);
    double l_ref, l16, l32;
    int c_ref, c16, c32;
    const float gs = 1.0f / (float)batch;
    assert_int_equal(dt_model_forward_backward(ref, x, y, batch, gs, &l_ref, &c_ref), DT_OK);
    assert_int_equal(dt_model_forward_backward(m16, x, y, batch, gs, &l16, &c16), DT_OK);
    assert_int_equal(dt_model_forward_backward(m32, x, y, batch, gs, &l32, &c32), DT_OK);

    float *g_ref = xmalloc(np * sizeof(float)), *g16 = xmalloc(np * sizeof(float)), *g32 = xmalloc(np * sizeof(float));
    read_grads(ref, g_ref);
    read_grads(m16, g16);
    read_grads(m32, g32);
    assert_null(dt_model_grads(m16));
    assert_non_null(dt_model_grads(m32));

    const double e16 = rel_l2(g16, g_ref, np), e32 = rel_l2(g32, g_ref, np);
    const double el = fabs(l16 - l_ref) / fabs(l_ref);
    /* Each parameter layer on its own as well, so that a small layer (the first conv) cannot hide
     * behind a big one: a wrong chunk or offset there would barely move the whole-vector error. */
    double eb_max = 0;
    size_t off = 0;
    for (int b = 0; b < nblocks; b++) off += blocks[b];
    assert_int_equal(off, np); /* the layer sizes given add up */
    off = 0;
    for (int b = 0; b < nblocks; b++) {
        const double eb16 = rel_l2(g16 + off, g_ref + off, blocks[b]), eb32 = rel_l2(g32 + off, g_ref + off, blocks[b]);
        const double tol = bound_layer;
        if (!(eb16 < tol) || !(eb32 < tol))
            fail_msg("%s %s: parameter layer %d (%zu values at %zu): gradient rel error %.3e (%s grads) %.3e (fp32 "
                     "grads) >= %.1e",
                     spec, tname(t), b, blocks[b], off, eb16, tname(t), eb32, tol);
        eb_max = fmax(eb_max, fmax(eb16, eb32));
        off += blocks[b];
    }
    print_message("%-32s %s x%-2d: grads rel err %.2e (%s grads) %.2e (fp32 grads), worst layer %.2e; loss "
                  "%.5f vs %.5f (rel %.1e); correct %d vs %d\n",
                  spec, tname(t), batch, e16, tname(t), e32, eb_max, l16, l_ref, el, c16, c_ref);
    if (!(e16 < bound_grad)) fail_msg("%s %s: gradient rel error %.3e >= %.1e", spec, tname(t), e16, bound_grad);
    if (!(e32 < bound_grad)) fail_msg("%s %s: fp32-gradient rel error %.3e >= %.1e", spec, tname(t), e32, bound_grad);
    if (!(el < bound_loss)) fail_msg("%s %s: loss rel error %.3e >= %.1e", spec, tname(t), el, bound_loss);
    /* The 16-bit model really computed something different from fp32 (it is not silently fp32). */
    assert_true(e16 > 0 && l16 != l_ref);
    /* Same forward for both 16-bit models, and the 16-bit gradients are the fp32 ones rounded. */
    assert_true(l16 == l32);
    assert_int_equal(c16, c32);
    float *r = xmalloc(np * sizeof(float));
    cpu_round16(t, g32, r, np);
    for (size_t i = 0; i < np; i++)
        if (r[i] != g16[i])
            fail_msg("%s %s: grad %zu: %s grads %.9g, fp32 grads %.9g rounded %.9g", spec, tname(t), i, tname(t),
                     (double)g16[i], (double)g32[i], (double)r[i]);
    /* Accuracy counts: in range, and at most a near-tie or two flipped by the rounding. */
    assert_true(c16 >= 0 && c16 <= batch);
    if (abs(c16 - c_ref) > max_correct_diff) fail_msg("%s %s: %d correct vs %d in fp32", spec, tname(t), c16, c_ref);
    free(r);
    free(g_ref);
    free(g16);
    free(g32);
    free(x);
    free(y);
    dt_model_free(ref);
    dt_model_free(m16);
    dt_model_free(m32);
}

/* Tolerances, as relative L2 errors of gradient vectors and relative errors of the summed loss.
 * Every measured value below is printed by the test.
 *
 * Rounding: each 16-bit value carries a relative error of up to 2^-11 (fp16) or 2^-8 (bf16), and a
 * few layers of it accumulate, so bf16 is ~8x looser. Where no ReLU or max-pooling sits between
 * the layers this is all there is, and every parameter layer is held to it. Measured: at most
 * 6.8e-4 (fp16) and 4.5e-3 (bf16), over whole vectors and single layers; bounds 2e-3 and 1.5e-2
 * (about 3x).
 *
 * Kinks: with ReLU or max-pooling, the 16-bit forward (absolute error ~1e-4 in fp16, ~1e-3 in bf16,
 * on pre-activations ~0.5) moves the odd pre-activation across zero, or changes the argmax of a
 * near-tied pooling window. Such an element switches a whole dy term on or off in a weight's sum,
 * an O(1) change of that term, so a layer whose gradient sums few terms can differ from fp32 by a
 * few percent: the first conv of the 28x28 CNN (1.6M ReLU inputs per batch) measures 1.9e-2 (fp16)
 * and 4.5e-2 (bf16), 4e-4 / 3e-3 like the others once its ReLU and pooling are removed, and the
 * first conv of the two-conv CNN 7.1e-2 in bf16. How many elements flip depends on the data, not
 * on the code, so for these models each layer only gets the kink bound (6e-2 fp16, 0.25 bf16:
 * 3-3.5x the worst measured, still far below the O(1) of a wrong buffer or offset), while the whole
 * gradient vector, dominated by the many smoothly summed fc weights, keeps the rounding bound
 * (except where conv layers make up much of it, see amp_pair).
 *
 * The loss is continuous across kinks: rounding only. Expected ~2^-9 x |logit| ~ 1e-3 per sample
 * in bf16, ~1e-4 relative on a sum of 4-8 samples, 8x less in fp16. Measured at most 3.2e-5
 * (fp16) and 1.5e-4 (bf16); bounds 1e-4 and 5e-4 (3x).
 *
 * The data of each case comes from its own seed (rng_seed), so these values are those of fixed
 * inputs and only move with the BLAS build's order of summation, far less than the margins. */
/* F16_GRAD_TOL and BF16_GRAD_TOL (amp_fixture.h) bound smooth gradients. */
#define F16_KINK_TOL 6e-2
#define BF16_KINK_TOL 2.5e-1
#define F16_LOSS_TOL 1e-4
#define BF16_LOSS_TOL 5e-4

/* kinks 0: no ReLU/pooling, the rounding bound everywhere; 1: the kink bound per layer, the rounding
 * bound on the whole vector (fc weights dominate it); 2: the kink bound on both (conv layers are a
 * large share of the vector). */
static void amp_pair(const char *spec, const char *input, int batch, const size_t *blocks, int nblocks, int kinks,
                     int max_correct_diff)
{
    amp_case(spec, input, batch, blocks, nblocks, DT_F16, kinks > 1 ? F16_KINK_TOL : F16_GRAD_TOL,
             kinks ? F16_KINK_TOL : F16_GRAD_TOL, F16_LOSS_TOL, max_correct_diff);
    amp_case(spec, input, batch, blocks, nblocks, DT_BF16, kinks > 1 ? BF16_KINK_TOL : BF16_GRAD_TOL,
             kinks ? BF16_KINK_TOL : BF16_GRAD_TOL, BF16_LOSS_TOL, max_correct_diff);
}

static void test_mlp_vs_fp32(void **st)
{
    (void)st;
    const size_t blocks[] = {20 * 32 + 32, 32 * 10 + 10};
    amp_pair("fc:32,relu,fc:10", "20", 8, blocks, 2, 1, 1);
    amp_pair("fc:32,fc:10", "20", 8, blocks, 2, 0, 1);
    /* ReLU straight on the input (the 16-bit path rounds x into the layer's own buffer first). */
    const size_t rblocks[] = {12 * 16 + 16, 16 * 10 + 10};
    amp_pair("relu,fc:16,relu,fc:10", "12", 8, rblocks, 2, 1, 1);
    /* 500 x 600 and 600 x 600 weights: more than the 2^18 floats the 16-bit path widens at a time,
     * so these fc layers run in blocks of output rows (524 + 76, 436 + 164), forward and backward,
     * the second one's dx summed over its blocks (which the first one's gradient sees). */
    const size_t wblocks[] = {500 * 600 + 600, 600 * 600 + 600, 600 * 10 + 10};
    amp_pair("fc:600,fc:600,fc:10", "500", 8, wblocks, 3, 0, 1);
}

static void test_cnn_vs_fp32(void **st)
{
    (void)st;
    const size_t small[] = {4 * 2 * 9 + 4, 4 * 4 * 4 * 10 + 10};
    amp_pair("conv:4:3:1:1,relu,pool:2,fc:10", "2x8x8", 4, small, 2, 1, 1);
    /* Without the kinks, and with a second conv: the 16-bit convolution's data gradient. */
    const size_t flat[] = {4 * 2 * 9 + 4, 4 * 8 * 8 * 10 + 10};
    amp_pair("conv:4:3:1:1,fc:10", "2x8x8", 4, flat, 2, 0, 1);
    const size_t two[] = {4 * 2 * 9 + 4, 8 * 4 * 9 + 8, 8 * 8 * 8 * 10 + 10};
    amp_pair("conv:4:3:1:1,conv:8:3:1:1,fc:10", "2x8x8", 4, two, 3, 0, 1);
    /* and with it feeding a pooling layer's backward; here the conv layers are a third of the
     * gradient and bf16 flips a few kinks (whole vector 3.4e-2, first conv 7.1e-2; fp16 4.8e-4 and
     * 5.6e-4), so the kink bound applies to the whole vector too. */
    const size_t twop[] = {4 * 2 * 9 + 4, 8 * 4 * 9 + 8, 8 * 4 * 4 * 10 + 10};
    amp_pair("conv:4:3:1:1,relu,pool:2,conv:8:3:1:1,relu,fc:10", "2x8x8", 4, twop, 3, 2, 1);
    /* 32x28x28 outputs: the 16-bit path runs the convolution and the pooling 10 samples at a time
     * (7 chunks at batch 64, the last of 4) and sums the filter gradients over the chunks (held to
     * fp32 precision by test_chunked_conv16). */
    const size_t big[] = {32 * 9 + 32, 32 * 14 * 14 * 10 + 10};
    amp_pair("conv:32:3:1:1,relu,pool:2,fc:10", "1x28x28", 64, big, 2, 1, 3);
}

/* A 16-bit model computes with its parameters and its input rounded to 16 bits (autocast), so a
 * model whose fp32 master parameters are already 16-bit values (the rounded copy of another's)
 * gives the same loss and gradients bit for bit, and so does an input rounded beforehand. This
 * catches a path that reads the fp32 weights or input directly, which the tolerances above cannot
 * (such a path is, if anything, more accurate). */
static void test_sees_16bit_values(void **st)
{
    (void)st;
    const char *specs[][2] = {{"fc:32,relu,fc:10", "20"},
                              {"relu,fc:16,relu,fc:10", "12"},
                              {"conv:4:3:1:1,relu,pool:2,conv:8:3:1:1,relu,fc:10", "2x8x8"},
                              {"fc:600,fc:600,fc:10", "500"}};
    const dt_dtype ts[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 2; j++) {
            const dt_dtype t = ts[j];
            dt_model *a = make_model(specs[k][0], specs[k][1], 4, t, DT_F32);
            dt_model *b = make_model(specs[k][0], specs[k][1], 4, t, DT_F32);
            const size_t np = dt_model_num_params(a), in = dt_model_input_size(a);
            float *pb = dt_model_params(b);
            cpu_round16(t, pb, pb, np);
            size_t changed = 0;
            for (size_t i = 0; i < np; i++) changed += pb[i] != dt_model_params(a)[i];
            assert_true(changed > np / 2);
            rng_seed(specs[k][0], 10 + (int)t);
            float *x, *xr = xmalloc(4 * in * sizeof *xr);
            int32_t *y;
            make_batch(a, 4, 1.0f, &x, &y);
            cpu_round16(t, x, xr, 4 * in);
            double la, lb;
            int ca, cb;
            assert_int_equal(dt_model_forward_backward(a, x, y, 4, 0.25f, &la, &ca), DT_OK);
            assert_int_equal(dt_model_forward_backward(b, xr, y, 4, 0.25f, &lb, &cb), DT_OK);
            if (la != lb)
                fail_msg("%s %s: loss %.17g with fp32 params/input, %.17g with rounded ones", specs[k][0], tname(t), la,
                         lb);
            assert_int_equal(ca, cb);
            assert_memory_equal(dt_model_grads(a), dt_model_grads(b), np * sizeof(float));
            free(x);
            free(xr);
            free(y);
            dt_model_free(a);
            dt_model_free(b);
        }
}

/* The chunked 16-bit convolution and pooling (see above) against one sample at a time: the
 * gradient of a batch is the sum of the per-sample gradients (same grad_scale), and with fp32
 * gradients each sample goes through nearly the same 16-bit values either way (the ops work per
 * sample), so what differs is the fp32 order of summation, plus the fc GEMMs: BLAS may sum a
 * 1-row product in another order than a 64-row one, and an fp32 last-bit difference now and then
 * lands on the other side of an fp16 rounding boundary (bf16 products of 8-bit mantissas are exact
 * in fp32, so bf16 is immune). Measured: 7.9e-6 (fp16) and 1.6e-7 (bf16) on the conv layer. The
 * bound 1e-4 leaves room for other BLAS builds, stays 4x below one fp16 rounding (4e-4, see
 * test_cnn_vs_fp32), and is 1000x below what a chunk summed wrong or missed (1/7 of the gradient)
 * would give. */
static void test_chunked_conv16(void **st)
{
    (void)st;
    const char *spec = "conv:32:3:1:1,relu,pool:2,fc:10", *input = "1x28x28";
    enum { B = 64 };
    const dt_dtype ts[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        dt_model *m = make_model(spec, input, B, ts[k], DT_F32);
        const size_t np = dt_model_num_params(m), in = dt_model_input_size(m), nconv = 32 * 9 + 32;
        float *x;
        int32_t *y;
        rng_seed("chunked", (int)ts[k]);
        make_batch(m, B, 1.0f, &x, &y);
        double l, lsum = 0;
        int c, csum = 0;
        assert_int_equal(dt_model_forward_backward(m, x, y, B, 1.0f / B, &l, &c), DT_OK);
        float *gb = xmalloc(np * sizeof *gb), *gs = xmalloc(np * sizeof *gs);
        double *acc = calloc(np, sizeof *acc);
        assert_non_null(acc);
        memcpy(gb, dt_model_grads(m), np * sizeof *gb);
        for (int s = 0; s < B; s++) {
            double ls;
            int cs;
            assert_int_equal(dt_model_forward_backward(m, x + (size_t)s * in, y + s, 1, 1.0f / B, &ls, &cs), DT_OK);
            const float *g = dt_model_grads(m);
            for (size_t i = 0; i < np; i++) acc[i] += g[i];
            lsum += ls;
            csum += cs;
        }
        for (size_t i = 0; i < np; i++) gs[i] = (float)acc[i];
        const double econv = rel_l2(gb, gs, nconv), eall = rel_l2(gb, gs, np);
        print_message("%s batch %d vs %d single samples: conv grads rel err %.2e, all %.2e, loss %.6f vs %.6f\n",
                      tname(ts[k]), B, B, econv, eall, l, lsum);
        assert_true(econv < 1e-4);
        assert_true(eall < 1e-4);
        assert_true(fabs(l - lsum) < 1e-6 * fabs(l)); /* fp32 logits, summed in double */
        assert_int_equal(c, csum);
        free(acc);
        free(gb);
        free(gs);
        free(x);
        free(y);
        dt_model_free(m);
    }
}

/* ---------------------------------------------------------------- 2. the precision API */

static void test_precision_api(void **st)
{
    (void)st;
    const char *spec = "fc:32,relu,fc:10", *input = "20";
    dt_model *m = make_model(spec, input, 8, DT_F32, DT_F32);
    dt_model *fresh = make_model(spec, input, 8, DT_F32, DT_F32);
    const size_t np = dt_model_num_params(m);
    assert_int_equal(dt_model_precision(m), DT_F32);
    assert_int_equal(dt_model_grad_dtype(m), DT_F32);
    assert_non_null(dt_model_grads(m));

    assert_int_equal(dt_model_set_precision(m, DT_F16, DT_F16), DT_OK);
    assert_int_equal(dt_model_precision(m), DT_F16);
    assert_int_equal(dt_model_grad_dtype(m), DT_F16);
    assert_null(dt_model_grads(m));

    /* Refusals leave the model as it was. */
    assert_int_equal(dt_model_set_precision(m, DT_F16, DT_BF16), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_set_precision(m, DT_BF16, DT_F16), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_set_precision(m, DT_F32, DT_F16), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_set_precision(m, (dt_dtype)7, DT_F32), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "precision 7"));
    assert_int_equal(dt_model_set_precision(m, DT_F16, (dt_dtype)7), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_precision(m), DT_F16);
    assert_int_equal(dt_model_grad_dtype(m), DT_F16);
    assert_null(dt_model_grads(m));
    int inf = -1;
    assert_int_equal(dt_model_unscale_grads(m, 0.0f, &inf), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_unscale_grads(m, -1.0f, &inf), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_unscale_grads(m, NAN, &inf), DT_ERR_INVALID_ARG);
    assert_int_equal(dt_model_unscale_grads(m, INFINITY, &inf), DT_ERR_INVALID_ARG);
    assert_int_equal(inf, -1);

    /* fp16 compute with fp32 gradients. */
    assert_int_equal(dt_model_set_precision(m, DT_F16, DT_F32), DT_OK);
    assert_int_equal(dt_model_precision(m), DT_F16);
    assert_int_equal(dt_model_grad_dtype(m), DT_F32);
    assert_non_null(dt_model_grads(m));

    float *x;
    int32_t *y;
    rng_seed("precision api", 0);
    make_batch(m, 8, 1.0f, &x, &y);
    double l, lf;
    int c, cf;
    float *g = xmalloc(np * sizeof *g), *gf = xmalloc(np * sizeof *gf);

    /* Straight from fp16 to bf16 (both kinds of buffers change): the same as a model set to bf16
     * directly, bit for bit. */
    assert_int_equal(dt_model_set_precision(m, DT_F16, DT_F16), DT_OK);
    assert_int_equal(dt_model_forward_backward(m, x, y, 8, 0.125f, &l, &c), DT_OK);
    assert_int_equal(dt_model_set_precision(m, DT_BF16, DT_BF16), DT_OK);
    assert_int_equal(dt_model_grad_dtype(m), DT_BF16);
    assert_null(dt_model_grads(m));
    assert_int_equal(dt_model_set_precision(fresh, DT_BF16, DT_BF16), DT_OK);
    assert_int_equal(dt_model_forward_backward(m, x, y, 8, 0.125f, &l, &c), DT_OK);
    assert_int_equal(dt_model_forward_backward(fresh, x, y, 8, 0.125f, &lf, &cf), DT_OK);
    read_grads(m, g);
    read_grads(fresh, gf);
    assert_true(l == lf);
    assert_memory_equal(g, gf, np * sizeof *g);

    /* Back to fp32: fp32 gradients again, and the same numbers as a model that never left fp32. */
    assert_int_equal(dt_model_set_precision(m, DT_F32, DT_F32), DT_OK);
    assert_int_equal(dt_model_set_precision(fresh, DT_F32, DT_F32), DT_OK);
    assert_int_equal(dt_model_precision(m), DT_F32);
    assert_int_equal(dt_model_grad_dtype(m), DT_F32);
    assert_non_null(dt_model_grads(m));
    dt_model *never = make_model(spec, input, 8, DT_F32, DT_F32);
    assert_int_equal(dt_model_forward_backward(m, x, y, 8, 0.125f, &l, &c), DT_OK);
    assert_int_equal(dt_model_forward_backward(never, x, y, 8, 0.125f, &lf, &cf), DT_OK);
    assert_true(l == lf);
    assert_int_equal(c, cf);
    assert_memory_equal(dt_model_grads(m), dt_model_grads(never), np * sizeof(float));

    free(g);
    free(gf);
    free(x);
    free(y);
    dt_model_free(never);
    dt_model_free(fresh);
    dt_model_free(m);
}

/* Out of memory in the middle of a change (the CPU backend under a test limit, as a full GPU):
 * the model keeps the precision pair it had and still trains. bf16/bf16 to fp16/fp16 needs a
 * second 16-bit gradient buffer while the first is held: before, the activations had already
 * moved to fp16, and the model was left computing in fp16 with bf16 gradients, a pair the API
 * refuses. fp32 to bf16, where the 16-bit activations (with their fp32 scratch and the 16-bit
 * parameter copy) take more than the fp32 ones: with room for the new gradients only, the model
 * stays in fp32 and says so. */
static void test_precision_out_of_memory(void **st)
{
    (void)st;
    dt_model *m = make_model("fc:64,relu,fc:10", "32", 64, DT_BF16, DT_BF16);
    const size_t np = dt_model_num_params(m);
    float *x;
    int32_t *y;
    rng_seed("precision oom", 0);
    make_batch(m, 64, 1.0f, &x, &y);
    double l;
    int c;
    backend_cpu_set_limit(backend_cpu_held() + np * 2 - 1);
    assert_int_equal(dt_model_set_precision(m, DT_F16, DT_F16), DT_ERR_NOMEM);
    assert_int_equal(dt_model_precision(m), DT_BF16);
    assert_int_equal(dt_model_grad_dtype(m), DT_BF16);
    assert_int_equal(dt_model_forward_backward(m, x, y, 64, 1.0f / 64, &l, &c), DT_OK);

    backend_cpu_set_limit(0);
    assert_int_equal(dt_model_set_precision(m, DT_F32, DT_F32), DT_OK);
    const size_t held32 = backend_cpu_held();
    assert_int_equal(dt_model_set_precision(m, DT_BF16, DT_BF16), DT_OK);
    assert_true(backend_cpu_held() > held32 + np * 2); /* the premise: bf16 takes more */
    const size_t d = backend_cpu_held() - held32;
    assert_int_equal(dt_model_set_precision(m, DT_F32, DT_F32), DT_OK);
    /* One byte short of the change's peak (new gradients beside the old, 16-bit activations). */
    backend_cpu_set_limit(held32 + d + np * 4 - 1);
    assert_int_equal(dt_model_set_precision(m, DT_BF16, DT_BF16), DT_ERR_NOMEM);
    assert_non_null(strstr(dt_last_error(), "the model stays in fp32"));
    assert_int_equal(dt_model_precision(m), DT_F32);
    assert_int_equal(dt_model_grad_dtype(m), DT_F32);
    assert_int_equal(dt_model_forward_backward(m, x, y, 64, 1.0f / 64, &l, &c), DT_OK);
    backend_cpu_set_limit(0);
    free(x);
    free(y);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_vs_fp32),    cmocka_unit_test(test_cnn_vs_fp32),
        cmocka_unit_test(test_chunked_conv16), cmocka_unit_test(test_sees_16bit_values),
        cmocka_unit_test(test_precision_api),  cmocka_unit_test(test_precision_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
