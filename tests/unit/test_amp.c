/*
 * test_amp.c - mixed precision on the model (dt_model_set_precision and friends) and the CPU loops
 * behind it (kernels/amp.h).
 *
 *  - fp16 / bf16 forward+backward against the fp32 model on the same parameters and batch (MLPs,
 *    small CNNs, fc layers wide enough to be widened in row blocks, and a CNN large enough that the
 *    16-bit path runs its convolution and pooling in chunks of samples), with 16-bit and with fp32
 *    parameter gradients; exact checks that 16-bit gradients are the fp32-gradient run's rounded,
 *    that only the 16-bit values of parameters and inputs matter, and that the chunked batch equals
 *    the sum of its samples;
 *  - the precision API: which gradient buffer exists, switching back and forth, refusals;
 *  - loss-scaling arithmetic: scale then unscale, underflow of small fp16 gradients without a scale,
 *    fp16 overflow of a too-large scale (and bf16's immunity to both);
 *  - the overflow path: an injected inf, found_inf, and the per-layer check;
 *  - dt_model_optimizer_step on 16-bit gradients against dt_optimizer_step on the widened and
 *    unscaled gradients (SGD with momentum and weight decay, AdamW; two steps each);
 *  - dt_model_memory in fp32 and fp16;
 *  - cpu_round16, the 16-bit ReLU and the non-finite counters against cast.h's scalar converters.
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
#include "amp.h"
#include "cast.h"
#include "test_hooks.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnext(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* Every case starts from its own fixed seed, so that its data does not depend on which cases ran
 * before it (the measured errors quoted in the comments stay those of the same data). */
static void rng_seed(const char *name, int k)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)k;
    for (const char *c = name; *c; c++) h = (h ^ (uint64_t)(unsigned char)*c) * 1099511628211ull;
    rng_state = h ? h : 1;
}

/* Uniform in [-1, 1). */
static float urand(void) { return (float)((double)(rnext() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static dt_model *make_model(const char *spec, const char *input, int max_batch, dt_dtype compute, dt_dtype grads)
{
    dt_model *m = NULL;
    assert_int_equal(dt_model_create(NULL, spec, input, 11, max_batch, &m), DT_OK);
    assert_non_null(m);
    assert_int_equal(dt_model_set_precision(m, compute, grads), DT_OK);
    return m;
}

/* A batch: x uniform in [-scale, scale), labels uniform over the classes. */
static void make_batch(const dt_model *m, int batch, float scale, float **x, int32_t **y)
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
static void widen_grads(dt_model *m, float *g)
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
    memcpy(p, keep, np * sizeof *p);
    free(keep);
}

/* The gradients of the last backward as fp32 (unscale factor 1), through the public API. */
static void read_grads(dt_model *m, float *g)
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
static double rel_l2(const float *a, const float *b, size_t n)
{
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        d2 += d * d;
        r2 += (double)b[i] * (double)b[i];
    }
    return sqrt(d2 / r2);
}

static const char *tname(dt_dtype t) { return t == DT_F16 ? "fp16" : t == DT_BF16 ? "bf16" : "fp32"; }

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

    float *g_ref = xmalloc(np * sizeof(float)), *g16 = xmalloc(np * sizeof(float)),
          *g32 = xmalloc(np * sizeof(float));
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
                     "grads) >= %.1e", spec, tname(t), b, blocks[b], off, eb16, tname(t), eb32, tol);
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
        if (r[i] != g16[i]) fail_msg("%s %s: grad %zu: %s grads %.9g, fp32 grads %.9g rounded %.9g", spec, tname(t),
                                     i, tname(t), (double)g16[i], (double)g32[i], (double)r[i]);
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
#define F16_GRAD_TOL 2e-3
#define BF16_GRAD_TOL 1.5e-2
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
            if (la != lb) fail_msg("%s %s: loss %.17g with fp32 params/input, %.17g with rounded ones", specs[k][0], tname(t), la, lb);
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
        assert_true(l1 == ls); /* the loss does not depend on the scale */
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
    for (size_t i = 0; i < (size_t)B * 20; i++) x[i] = dt_f16_to_f32(dt_f32_to_f16(x[i]));
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

static void inject_case(const char *spec, const char *input, int batch, dt_dtype compute, dt_dtype grads,
                        int last_fc, const char *name)
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
                fail_msg("%s, optimizer %d, step %d: param %zu: model step %.9g, reference %.9g", tname(t), (int)cfg->kind,
                         step + 1, i, (double)p[i], (double)pref[i]);
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

/* ---------------------------------------------------------------- 7. the CPU loops */

/* A few hundred floats covering every class: zeros of both signs, fp16 subnormals and the values
 * around them, round-to-nearest-even ties of both formats, the overflow thresholds, fp32
 * subnormals, infinities, quiet and signalling NaNs with payloads in the kept and the dropped bits,
 * and random values over 2^-30 .. 2^20 of both signs. */
static size_t special_floats(float *v, size_t cap)
{
    const uint32_t bits[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, /* zeros, infinities */
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, /* quiet NaN, sNaN with payload only in the low bits */
        0x7fbfffffu, 0x7fe00000u, 0x7f802000u, 0x7f810000u, /* payload in the kept bits */
        0x00000001u, 0x807fffffu, 0x00400000u,              /* fp32 subnormals */
        0x7f7fffffu, 0xff7fffffu,                           /* FLT_MAX: bf16 rounds it to inf */
        0x7f7f7fffu, 0x7f7f8000u,                           /* just below / at bf16's rounding to inf */
        0x3f808000u, 0x3f818000u, 0x3f808001u,              /* bf16 ties (to even: down, up) and past */
    };
    const float vals[] = {
        65504.0f, -65504.0f, 65519.0f, 65520.0f, -65520.0f, 65536.0f, /* fp16 max, ties to inf */
        6.103515625e-05f,                                       /* 2^-14, smallest fp16 normal */
        6.0975551605224609e-05f,                                /* largest fp16 subnormal */
        5.9604644775390625e-08f, -5.9604644775390625e-08f,      /* 2^-24, smallest fp16 subnormal */
        2.98023223876953125e-08f,                               /* 2^-25: a tie, to 0 */
        3.0e-08f,                                               /* above 2^-25: to 2^-24 */
        8.9406967163085938e-08f,                                /* 1.5 * 2^-24: tie, to 2 * 2^-24 */
        1.00048828125f, 1.00146484375f, -1.00048828125f,        /* fp16 ties: 1 + 2^-11, 1 + 3 * 2^-11 */
        1.0f, -1.0f, 0.1f, -3.14159265f, 1e-10f, -1e-30f, 3e38f,
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof bits / sizeof *bits; i++) v[n++] = dt_cast_bits_f32_(bits[i]);
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) v[n++] = vals[i];
    while (n < cap) {
        const double e = -30.0 + 50.0 * (0.5 + 0.5 * (double)urand());
        v[n] = (float)((urand() < 0 ? -1.0 : 1.0) * exp2(e));
        n++;
    }
    return n;
}

static void round16_check(dt_dtype t)
{
    enum { N = 1300 }; /* past cpu_round16's 1024-element chunks */
    static float in[N], out[N], inplace[N];
    rng_seed("round16", (int)t);
    special_floats(in, N);
    cpu_round16(t, in, out, N);
    memcpy(inplace, in, sizeof in);
    cpu_round16(t, inplace, inplace, N);
    for (size_t i = 0; i < N; i++) {
        const float want = t == DT_F16 ? dt_f16_to_f32(dt_f32_to_f16(in[i])) : dt_bf16_to_f32(dt_f32_to_bf16(in[i]));
        const uint32_t w = dt_cast_f32_bits_(want), o = dt_cast_f32_bits_(out[i]), ip = dt_cast_f32_bits_(inplace[i]);
        if (o != w || ip != w)
            fail_msg("cpu_round16(%s) of %.9g (0x%08x): 0x%08x (in place 0x%08x), scalar 0x%08x", tname(t), (double)in[i],
                     dt_cast_f32_bits_(in[i]), o, ip, w);
    }
    /* Spot checks of the scalar reference itself, so that the comparison means something. */
    assert_true(isnan(out[6]) && isnan(out[7]) && signbit(out[7])); /* sNaN stays NaN, never inf */
    assert_true(dt_cast_f32_bits_(out[1]) == 0x80000000u);                        /* -0 stays -0 */
    if (t == DT_F16) {
        assert_true(out[22] == 65504.0f && out[24] == 65504.0f && isinf(out[25]) && out[26] == -INFINITY);
        assert_true(out[28] == 6.103515625e-05f && out[29] == 6.0975551605224609e-05f); /* exact */
        assert_true(out[30] == 5.9604644775390625e-08f && out[31] == -5.9604644775390625e-08f);
        assert_true(out[32] == 0.0f && out[33] == 5.9604644775390625e-08f && out[34] == 1.1920928955078125e-07f);
        assert_true(out[35] == 1.0f && out[36] == 1.001953125f && out[37] == -1.0f);
        assert_true(out[12] == 0.0f);                     /* an fp32 subnormal */
    } else {
        assert_true(out[15] == INFINITY && out[17] == dt_cast_bits_f32_(0x7f7f0000u) && out[18] == INFINITY);
        assert_true(out[19] == 1.0f && out[20] == dt_cast_bits_f32_(0x3f820000u) &&
                    out[21] == dt_cast_bits_f32_(0x3f810000u));
        /* bf16 keeps fp32 subnormals' top bits */
        assert_true(out[12] == 0.0f && out[14] == dt_cast_bits_f32_(0x00400000u));
    }
}

static void test_round16(void **st)
{
    (void)st;
    /* With the array casts' F16C path on and off (cpu_round16 may convert through them; if it has
     * a loop of its own, this runs it twice). */
    for (int f16c = 1; f16c >= 0; f16c--) {
        cpu_cast_use_f16c(f16c);
        round16_check(DT_F16);
        round16_check(DT_BF16);
    }
    cpu_cast_use_f16c(1);
}

static float widen16(dt_dtype t, uint16_t h) { return t == DT_F16 ? dt_f16_to_f32(h) : dt_bf16_to_f32(h); }

/* The 16-bit ReLU over all 65536 patterns of each format, against the float rule y = x < 0 ? 0 : x
 * on the widened value (NaN passes unchanged, -0 comes out +0) and dx = y > 0 ? dy : 0. */
static void test_relu16(void **st)
{
    (void)st;
    enum { N = 65536 };
    static uint16_t x[N], y[N], dy[N], dx[N], tmp[N];
    for (uint32_t i = 0; i < N; i++) {
        x[i] = (uint16_t)i;
        dy[i] = (uint16_t)((i * 2654435761u) >> 16);
    }
    const dt_dtype ts[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        const dt_dtype t = ts[k];
        cpu_relu16_fwd(t, x, y, N);
        memcpy(tmp, x, sizeof x);
        cpu_relu16_fwd(t, tmp, tmp, N); /* in place */
        assert_memory_equal(tmp, y, sizeof y);
        size_t zeroed = 0;
        for (uint32_t i = 0; i < N; i++) {
            const float f = widen16(t, x[i]);
            const uint16_t want = isnan(f) ? x[i] : (f < 0 || x[i] == 0x8000u) ? 0 : x[i];
            if (y[i] != want) fail_msg("relu16_fwd(%s) of 0x%04x (%g): 0x%04x, want 0x%04x", tname(t), i, (double)f, y[i], want);
            zeroed += y[i] == 0 && x[i] != 0;
        }
        /* the negatives (-inf included, NaNs excluded) and -0 */
        assert_int_equal(zeroed, t == DT_F16 ? 0x7c00 + 1 : 0x7f80 + 1);

        cpu_relu16_bwd(t, x, dy, dx, N);
        memcpy(tmp, dy, sizeof dy);
        cpu_relu16_bwd(t, x, tmp, tmp, N); /* dx aliasing dy */
        assert_memory_equal(tmp, dx, sizeof dx);
        for (uint32_t i = 0; i < N; i++) {
            const float f = widen16(t, x[i]);
            const uint16_t want = f > 0 ? dy[i] : 0;
            if (dx[i] != want)
                fail_msg("relu16_bwd(%s): y 0x%04x (%g), dy 0x%04x: 0x%04x, want 0x%04x", tname(t), i, (double)f, dy[i],
                         dx[i], want);
        }
    }
}

static void test_count_nonfinite(void **st)
{
    (void)st;
    /* 37 = two blocks of 16 and a tail of 5; 16 = one block, no tail; 5 = only a tail. */
    const size_t sizes[] = {37, 16, 5, 1};
    const uint32_t bad32[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffffffffu};
    const uint32_t good32[] = {0x7f7fffffu, 0xff7fffffu, 0x00000000u, 0x80000000u, 0x00000001u, 0x3f800000u};
    const uint16_t bad16[2][5] = {{0x7c00u, 0xfc00u, 0x7e00u, 0x7c01u, 0xffffu}, {0x7f80u, 0xff80u, 0x7fc0u, 0x7f81u, 0xffffu}};
    /* 0x7c00 is fp16's inf but a finite bf16 (2^121): the type must be honoured. */
    const uint16_t good16[2][5] = {{0x7bffu, 0xfbffu, 0x0000u, 0x8000u, 0x0001u}, {0x7f7fu, 0xff7fu, 0x7c00u, 0xfc00u, 0x0001u}};
    const dt_dtype ts[2] = {DT_F16, DT_BF16};
    float f[37], g[37];
    uint16_t h[37];
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const size_t n = sizes[si];
        for (size_t pos = 0; pos < n; pos++) {
            for (size_t i = 0; i < n; i++) f[i] = dt_cast_bits_f32_(good32[(i + pos) % 6]);
            assert_int_equal(cpu_count_nonfinite(f, n), 0);
            for (size_t b = 0; b < 6; b++) {
                f[pos] = dt_cast_bits_f32_(bad32[b]);
                if (cpu_count_nonfinite(f, n) != 1) fail_msg("n %zu: 0x%08x at %zu not counted once", n, bad32[b], pos);
                memcpy(g, f, n * sizeof *f);
                if (cpu_unscale_count_nonfinite(g, n, 0.5f) != 1)
                    fail_msg("unscale, n %zu: 0x%08x at %zu not counted once", n, bad32[b], pos);
            }
            for (int k = 0; k < 2; k++) {
                for (size_t i = 0; i < n; i++) h[i] = good16[k][(i + pos) % 5];
                assert_int_equal(cpu_count_nonfinite16(ts[k], h, n), 0);
                for (size_t b = 0; b < 5; b++) {
                    h[pos] = bad16[k][b];
                    if (cpu_count_nonfinite16(ts[k], h, n) != 1)
                        fail_msg("%s, n %zu: 0x%04x at %zu not counted once", tname(ts[k]), n, bad16[k][b], pos);
                }
            }
        }
        /* Several at once: every third element, the last one included. */
        size_t want = 0;
        for (size_t i = 0; i < n; i++) {
            const int b = (n - 1 - i) % 3 == 0;
            f[i] = b ? dt_cast_bits_f32_(bad32[i % 6]) : (float)i - 10.0f;
            h[i] = b ? bad16[0][i % 5] : good16[0][i % 5];
            want += (size_t)b;
        }
        assert_int_equal(cpu_count_nonfinite(f, n), want);
        assert_int_equal(cpu_count_nonfinite16(DT_F16, h, n), want);
        assert_int_equal(cpu_count_nonfinite(f, 0), 0);
    }

    /* Every 16-bit pattern: 2 x 1024 fp16 and 2 x 128 bf16 ones have the all-ones exponent; the last
     * pattern (0xffff, a NaN in both) is in the tail when n is odd. */
    enum { N = 65536 };
    static uint16_t all[N];
    for (uint32_t i = 0; i < N; i++) all[i] = (uint16_t)i;
    assert_int_equal(cpu_count_nonfinite16(DT_F16, all, N), 2048);
    assert_int_equal(cpu_count_nonfinite16(DT_BF16, all, N), 256);
    assert_int_equal(cpu_count_nonfinite16(DT_F16, all, N - 1), 2047);
    assert_int_equal(cpu_count_nonfinite16(DT_BF16, all, N - 1), 255);

    /* The fused unscale: every element multiplied (exactly, by a power of two), the tail included,
     * and results that overflow only after the multiplication are counted. */
    float u[37], v[37];
    for (size_t i = 0; i < 37; i++) u[i] = urand() * 100.0f;
    memcpy(v, u, sizeof u);
    assert_int_equal(cpu_unscale_count_nonfinite(v, 37, 0.25f), 0);
    for (size_t i = 0; i < 37; i++) assert_true(v[i] == u[i] * 0.25f);
    u[36] = FLT_MAX / 2;
    u[3] = NAN;
    u[20] = -FLT_MAX;
    memcpy(v, u, sizeof u);
    assert_int_equal(cpu_unscale_count_nonfinite(v, 37, 4.0f), 3);
    assert_true(v[36] == INFINITY && isnan(v[3]) && v[20] == -INFINITY && v[35] == u[35] * 4.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_vs_fp32),
        cmocka_unit_test(test_cnn_vs_fp32),
        cmocka_unit_test(test_chunked_conv16),
        cmocka_unit_test(test_sees_16bit_values),
        cmocka_unit_test(test_precision_api),
        cmocka_unit_test(test_scale_unscale_exact),
        cmocka_unit_test(test_scaling_prevents_underflow),
        cmocka_unit_test(test_scale_overflow),
        cmocka_unit_test(test_inject_inf),
        cmocka_unit_test(test_optimizer_step16),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_round16),
        cmocka_unit_test(test_relu16),
        cmocka_unit_test(test_count_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
