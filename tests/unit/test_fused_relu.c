/*
 * test_fused_relu.c - dt_model_set_fused_relu: an fc or conv layer followed by a relu layer runs
 * the ReLU in its own forward (layer_fc_fwd / layer_conv_fwd with relu 1), a max pool or an fc
 * layer after such a relu runs its backward in its own (layer_pool_bwd with relu_y, layer_fc_bwd
 * with below), and the pass skips the relu layer's kernels. A model trained fused must match one trained with every relu a
 * layer of its own bit for bit (losses, counts, parameters), in fp32, bf16 and fp16, for fc and
 * conv layers (a pointwise one included), pools after relus (one on the model input too) and in
 * evaluation; the relu layers that cannot be fused (a forward reading the model input, one after
 * another relu) must still run. The tables count what ran, so a pass that fused nothing, or fused
 * and ran the relu anyway, fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "kernels/backend.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"

/* What the counting table saw since the last reset. */
static struct {
    const backend_ops *cpu;
    long relu_fwd, fused_fwd, relu_bwd, fused_bwd;
} g_count;

static dt_status count_relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n)
{
    g_count.relu_fwd++;
    return g_count.cpu->layer_relu_fwd(be, a, x, x_f32, y, n);
}

static void count_reset(void) { g_count.relu_fwd = g_count.fused_fwd = g_count.relu_bwd = g_count.fused_bwd = 0; }

static void count_fwd(int relu) { g_count.fused_fwd += relu != 0; }

static dt_status count_relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n)
{
    g_count.relu_bwd++;
    return g_count.cpu->layer_relu_bwd(be, a, y, dy, dx, n);
}

static dt_status count_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                              const void *dy, void *dx, int batch, int in, int out, const layer_params *below)
{
    g_count.fused_bwd += below != NULL;
    return g_count.cpu->layer_fc_bwd(be, a, lp, x, x_f32, dy, dx, batch, in, out, below);
}

static dt_status count_pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx,
                                int batch, int c, int h, int w, int k, const void *relu_y)
{
    g_count.fused_bwd += relu_y != NULL;
    return g_count.cpu->layer_pool_bwd(be, a, dy, idx, dx, batch, c, h, w, k, relu_y);
}

static dt_status count_fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                              void *y, int relu, int batch, int in, int out)
{
    count_fwd(relu);
    return g_count.cpu->layer_fc_fwd(be, a, lp, x, x_f32, y, relu, batch, in, out);
}

static dt_status count_conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s,
                                const void *x, int x_f32, void *y, int relu)
{
    count_fwd(relu);
    return g_count.cpu->layer_conv_fwd(be, a, lp, s, x, x_f32, y, relu);
}

typedef struct net {
    const char *spec, *input;
    int relus;       /* relu layers */
    int fusable;     /* of them, those an fc or conv layer runs forward when fused */
    int fusable_bwd; /* and those a max pool or an fc layer after them runs backward */
} net;

static const net g_nets[] = {
    {"fc:24,relu,fc:16,relu,fc:5", "12", 2, 2, 2},
    /* a 3x3 and a pointwise convolution, then an fc layer, each with its relu; a pool after one,
     * a flatten after one (not fused backward), an fc after one */
    {"conv:4:3:1:1,relu,pool:2,conv:6:1:1:0,relu,flatten,fc:12,relu,fc:5", "2x8x8", 3, 3, 2},
    /* a relu on the model input (its own buffer: runs), one after an fc (fused forward), one after
     * a relu (neither fused backward: no fc below the fc above them) */
    {"relu,fc:8,relu,relu,fc:4", "6", 3, 1, 0},
    /* pools after a relu on the model input and after a conv's relu (some windows all negative) */
    {"relu,pool:2,conv:3:3:1:1,relu,pool:2,flatten,fc:5", "2x8x8", 2, 1, 2},
};

/* Trains a fused and an unfused model side by side on the counting table: same bits throughout,
 * and the relu kernels each ran. */
static void train_pair(const net *n, dt_dtype prec)
{
    memset(&g_count, 0, sizeof g_count);
    g_count.cpu = backend_cpu()->ops;
    backend_ops ops = *g_count.cpu;
    ops.layer_relu_fwd = count_relu_fwd;
    ops.layer_fc_fwd = count_fc_fwd;
    ops.layer_conv_fwd = count_conv_fwd;
    ops.layer_relu_bwd = count_relu_bwd;
    ops.layer_pool_bwd = count_pool_bwd;
    ops.layer_fc_bwd = count_fc_bwd;
    backend counting = {&ops, NULL};
    const int B = 6;
    dt_model *f = make_model(n->spec, n->input, B, prec, prec);
    dt_model *u = make_model(n->spec, n->input, B, prec, prec);
    model_test_set_backend(f, &counting);
    model_test_set_backend(u, &counting);
    dt_model_set_fused_relu(u, 0);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_SGD;
    oc.lr = 0.05f;
    oc.momentum = 0.9f;
    dt_optimizer *of, *ou;
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(f), &of), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(u), &ou), DT_OK);
    for (int p = 0; p < 4; p++) {
        float *x;
        int32_t *y;
        make_batch(f, B, 2.0f, &x, &y);
        dt_step_result rf, ru;
        count_reset();
        assert_int_equal(dt_model_train_step(f, of, NULL, x, y, B, 1.0f / B, &rf), DT_OK);
        assert_int_equal(g_count.relu_fwd, n->relus - n->fusable);
        assert_int_equal(g_count.fused_fwd, n->fusable);
        assert_int_equal(g_count.relu_bwd, n->relus - n->fusable_bwd);
        assert_int_equal(g_count.fused_bwd, n->fusable_bwd);
        count_reset();
        assert_int_equal(dt_model_train_step(u, ou, NULL, x, y, B, 1.0f / B, &ru), DT_OK);
        assert_int_equal(g_count.relu_fwd, n->relus);
        assert_int_equal(g_count.fused_fwd, 0);
        assert_int_equal(g_count.relu_bwd, n->relus);
        assert_int_equal(g_count.fused_bwd, 0);
        assert_true(isfinite(rf.loss_sum));
        assert_memory_equal(&rf.loss_sum, &ru.loss_sum, sizeof rf.loss_sum);
        assert_int_equal(rf.correct, ru.correct);
        free(x);
        free(y);
    }
    const size_t np = dt_model_num_params(f);
    assert_memory_equal(dt_model_params(f), dt_model_params(u), np * sizeof(float));
    /* Evaluation runs the same forward. */
    float *x;
    int32_t *y;
    make_batch(f, B, 2.0f, &x, &y);
    double lf = 0, lu = 0;
    int cf = 0, cu = 0;
    assert_int_equal(dt_model_evaluate(f, x, y, B, &lf, &cf, NULL), DT_OK);
    assert_int_equal(dt_model_evaluate(u, x, y, B, &lu, &cu, NULL), DT_OK);
    assert_memory_equal(&lf, &lu, sizeof lf);
    assert_int_equal(cf, cu);
    free(x);
    free(y);
    dt_optimizer_free(of);
    dt_optimizer_free(ou);
    dt_model_free(f);
    dt_model_free(u);
}

static void test_fp32(void **st)
{
    (void)st;
    rng_seed("fused relu fp32", 0);
    for (size_t i = 0; i < sizeof g_nets / sizeof *g_nets; i++) train_pair(&g_nets[i], DT_F32);
}

static void test_bf16(void **st)
{
    (void)st;
    rng_seed("fused relu bf16", 0);
    for (size_t i = 0; i < sizeof g_nets / sizeof *g_nets; i++) train_pair(&g_nets[i], DT_BF16);
}

static void test_fp16(void **st)
{
    (void)st;
    rng_seed("fused relu fp16", 0);
    for (size_t i = 0; i < sizeof g_nets / sizeof *g_nets; i++) train_pair(&g_nets[i], DT_F16);
}

/* On the CPU the fused ReLU is the relu layer's function, which passes a NaN on (as torch.relu
 * does): a NaN weight in the first layer must still reach the loss. */
static void test_nan_reaches_loss(void **st)
{
    (void)st;
    rng_seed("fused relu nan", 0);
    for (int k = 0; k < 3; k++) {
        const dt_dtype prec = k == 0 ? DT_F32 : k == 1 ? DT_BF16 : DT_F16;
        dt_model *m = make_model("fc:8,relu,fc:3", "5", 4, prec, prec);
        dt_model_params(m)[0] = NAN;
        dt_model_params_changed(m);
        float *x;
        int32_t *y;
        make_batch(m, 4, 1.0f, &x, &y);
        double loss = 0;
        int correct = 0;
        assert_int_equal(dt_model_evaluate(m, x, y, 4, &loss, &correct, NULL), DT_OK);
        assert_true(isnan(loss));
        free(x);
        free(y);
        dt_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_nan_reaches_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
