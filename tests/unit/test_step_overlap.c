/*
 * test_step_overlap.c - the optimizer step layer by layer (dt_model_set_step_overlap): each
 * parameter layer stepped the moment backward is done with it, on the backend's side stream,
 * must give the bits of one step over the whole buffer after backward.
 *
 * Two models from the same seed train side by side on the same batches: `whole` with the overlap
 * off, `layered` with it on, on the CPU table plus side-stream entries that count (the CPU has
 * none: its ops run at once, so these only watch the model's calls). Losses, counts and
 * parameters must agree bit for bit over SGD (momentum, weight decay) and AdamW (layers at
 * offsets that are not multiples of its vector groups), fp32, bf16 and fp16 (16-bit or fp32
 * gradients, the 16-bit parameter copy kept or not) and gradient accumulation. The counts prove
 * the layered path ran: one side_begin/side_end per parameter layer per step, every optimizer
 * call between them, one side_join per stepping pass. With a loss scaler or clipping the step
 * needs the whole gradient: no layer steps on its own, and the bits still agree. With the 16-bit
 * copy kept, each layer steps into the spare copy before its data gradient (the CPU's fc entry calls
 * the pass there; its dx must then read the copy the step left alone, or the bits differ), the
 * copies swap after backward, a write of the parameters from outside is cast into the one the
 * next forward reads, and dt_model_memory counts the spare.
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

/* 4 parameter layers: conv 4x3x3x3+4 = 112, fc 13x16+13 = 221, fc 7x13+7 = 98, fc 5x7+5 = 40. */
#define SPEC "conv:4:3:1:1,relu,pool:2,flatten,fc:13,relu,fc:7,relu,fc:5"
#define INPUT "3x4x4"
#define PARAM_LAYERS 4
#define B 6

static struct {
    const backend_ops *cpu;
    int on_side, begins, ends, joins, optim_calls, optim_off_side, param_casts, fc_early;
    size_t np;
    const layer_params *fc_lp; /* the fc entry running now */
} g;

/* The pass's grads_ready, called by the fc entry itself (it steps the layer there). */
static dt_status count_grads_ready(void *ctx)
{
    g.fc_early++;
    return g.fc_lp->grads_ready(ctx);
}

/* An fc layer's backward asked to hand its gradients on before its data gradient: the CPU's fc
 * entry calls the pass there, and its dx must then read the 16-bit copy the step leaves alone. */
static dt_status count_fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                              const void *dy, void *dx, int batch, int in, int out, const layer_params *below)
{
    if (!lp->grads_ready) return g.cpu->layer_fc_bwd(be, a, lp, x, x_f32, dy, dx, batch, in, out, below);
    layer_params counted = *lp;
    counted.grads_ready = count_grads_ready;
    g.fc_lp = lp;
    const dt_status s = g.cpu->layer_fc_bwd(be, a, &counted, x, x_f32, dy, dx, batch, in, out, below);
    g.fc_lp = NULL;
    return s;
}

/* Casts of the whole parameter buffer into the 16-bit copy (model_params16_ready). */
static dt_status count_cast(backend *be, dt_dtype t, const float *src, uint16_t *dst, size_t n)
{
    g.param_casts += n == g.np;
    return g.cpu->cast_to16(be, t, src, dst, n);
}

static dt_status side_begin(backend *be)
{
    (void)be;
    assert_false(g.on_side);
    g.on_side = 1;
    g.begins++;
    return DT_OK;
}

static dt_status side_end(backend *be)
{
    (void)be;
    assert_true(g.on_side);
    g.on_side = 0;
    g.ends++;
    return DT_OK;
}

static dt_status side_join(backend *be)
{
    (void)be;
    assert_false(g.on_side);
    g.joins++;
    return DT_OK;
}

static dt_status count_sgd(backend *be, float *p, const optim_grads *gr, float *buf, size_t n, float lr, float mom,
                           float wd, int first, dt_dtype copy_t, uint16_t *copy)
{
    g.optim_calls++;
    g.optim_off_side += !g.on_side;
    return g.cpu->sgd(be, p, gr, buf, n, lr, mom, wd, first, copy_t, copy);
}

static dt_status count_adamw(backend *be, float *p, const optim_grads *gr, float *m, float *v, size_t n, float lr,
                             float b1, float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    g.optim_calls++;
    g.optim_off_side += !g.on_side;
    return g.cpu->adamw(be, p, gr, m, v, n, lr, b1, b2, eps, wd, t, copy_t, copy);
}

typedef struct run_cfg {
    dt_optim_kind kind;
    dt_dtype prec, grads;
    int keep16, accum, scaler, clip;
} run_cfg;

static void train_side_by_side(const run_cfg *c)
{
    memset(&g, 0, sizeof g);
    backend_cpu_set_keep_params16(c->keep16);
    g.cpu = backend_cpu()->ops;
    backend_ops ops = *g.cpu;
    ops.side_begin = side_begin;
    ops.side_end = side_end;
    ops.side_join = side_join;
    ops.sgd = count_sgd;
    ops.adamw = count_adamw;
    ops.cast_to16 = count_cast;
    ops.layer_fc_bwd = count_fc_bwd;
    backend counting = {&ops, NULL};
    dt_model *whole = make_model(SPEC, INPUT, B, c->prec, c->grads);
    dt_model *layered = make_model(SPEC, INPUT, B, c->prec, c->grads);
    backend_cpu_set_keep_params16(0);
    model_test_set_backend(layered, &counting);
    dt_model_set_step_overlap(whole, DT_STEP_OVERLAP_OFF);
    dt_model_set_step_overlap(layered, DT_STEP_OVERLAP_ON); /* AUTO leaves a model this small alone */
    const size_t np = dt_model_num_params(whole);
    assert_int_equal(np, 112 + 221 + 98 + 40);
    g.np = np;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = c->kind;
    oc.lr = c->kind == DT_OPTIM_SGD ? 0.05f : 2e-3f;
    oc.weight_decay = 1e-2f;
    dt_optimizer *ow, *ol;
    assert_int_equal(dt_optimizer_create(&oc, np, &ow), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, np, &ol), DT_OK);
    dt_scaler *sw = NULL, *sl = NULL;
    if (c->scaler) {
        dt_scaler_config scc;
        dt_scaler_defaults(&scc);
        assert_int_equal(dt_scaler_create(&scc, &sw), DT_OK);
        assert_int_equal(dt_scaler_create(&scc, &sl), DT_OK);
    }
    for (dt_model *m = whole; m; m = m == whole ? layered : NULL) {
        assert_int_equal(dt_model_set_accum_steps(m, c->accum), DT_OK);
        if (c->clip) assert_int_equal(dt_model_set_clip_grad_norm(m, 0.05), DT_OK);
    }
    const int passes = 4 * c->accum;
    long stepped = 0;
    for (int p = 0; p < passes; p++) {
        float *x;
        int32_t *y;
        make_batch(whole, B, 2.0f, &x, &y);
        dt_step_result rw, rl;
        const float gs = 1.0f / (float)(B * c->accum);
        assert_int_equal(dt_model_train_step(whole, ow, sw, x, y, B, gs, &rw), DT_OK);
        assert_int_equal(dt_model_train_step(layered, ol, sl, x, y, B, gs, &rl), DT_OK);
        assert_memory_equal(&rw.loss_sum, &rl.loss_sum, sizeof rw.loss_sum);
        assert_int_equal(rw.correct, rl.correct);
        assert_int_equal(rw.stepped, rl.stepped);
        assert_int_equal(rw.skipped, rl.skipped);
        stepped += rl.stepped;
        free(x);
        free(y);
        /* Parameters written from outside between two groups: the copy is cast again, into the
         * buffer the next forward reads (after steps that swapped the two copies). */
        if (p == 2 * c->accum - 1) {
            dt_model_params_changed(whole);
            dt_model_params_changed(layered);
        }
    }
    assert_int_equal(stepped, 4);
    assert_memory_equal(dt_model_params(whole), dt_model_params(layered), np * sizeof(float));
    assert_false(g.on_side);
    if (c->scaler || c->clip) {
        /* The whole gradient first: the step after backward, off the side stream. */
        assert_int_equal(g.begins, 0);
        assert_int_equal(g.joins, 0);
        assert_true(g.optim_calls >= 4);
    } else {
        assert_int_equal(g.begins, PARAM_LAYERS * 4);
        assert_int_equal(g.ends, PARAM_LAYERS * 4);
        assert_int_equal(g.joins, 4);
        assert_true(g.optim_calls >= PARAM_LAYERS * 4);
        assert_int_equal(g.optim_off_side, 0);
        /* A kept copy is cast before the first forward and after the parameters were written
         * from outside: every other forward reads what the layers' steps wrote. */
        const int copy16 = c->keep16 && c->prec != DT_F32;
        assert_int_equal(g.param_casts, copy16 ? 2 : 0);
        /* With a copy, each layer steps before its data gradient, into the spare copy (2 bytes a
         * parameter more): the 3 fc layers called from inside their backward entries, every step. */
        assert_int_equal(g.fc_early, copy16 ? 3 * 4 : 0);
        dt_memory_summary ml;
        dt_model_memory(layered, NULL, &ml);
        assert_int_equal(ml.params, np * 4 + (copy16 ? 2 * np * 2 : 0));
    }
    dt_scaler_free(sw);
    dt_scaler_free(sl);
    dt_optimizer_free(ow);
    dt_optimizer_free(ol);
    dt_model_free(whole);
    dt_model_free(layered);
}

static void run_all(const run_cfg *base)
{
    const dt_optim_kind kinds[] = {DT_OPTIM_SGD, DT_OPTIM_ADAMW};
    for (int k = 0; k < 2; k++)
        for (int accum = 1; accum <= 3; accum += 2) {
            run_cfg c = *base;
            c.kind = kinds[k];
            c.accum = accum;
            train_side_by_side(&c);
        }
}

static void test_fp32(void **st)
{
    (void)st;
    rng_seed("overlap fp32", 0);
    run_all(&(run_cfg){.prec = DT_F32, .grads = DT_F32});
}

static void test_bf16(void **st)
{
    (void)st;
    rng_seed("overlap bf16", 0);
    run_all(&(run_cfg){.prec = DT_BF16, .grads = DT_BF16});
    run_all(&(run_cfg){.prec = DT_BF16, .grads = DT_F32});
}

/* The 16-bit parameter copy kept (a GPU's): each layer's part written by its own step, so the
 * next forward reads it without a cast. */
static void test_16bit_copy(void **st)
{
    (void)st;
    rng_seed("overlap copy", 0);
    run_all(&(run_cfg){.prec = DT_BF16, .grads = DT_F32, .keep16 = 1});
    run_all(&(run_cfg){.prec = DT_F16, .grads = DT_F16, .keep16 = 1});
}

static void test_whole_gradient_first(void **st)
{
    (void)st;
    rng_seed("overlap scaler", 0);
    run_all(&(run_cfg){.prec = DT_F16, .grads = DT_F16, .scaler = 1});
    run_all(&(run_cfg){.prec = DT_F32, .grads = DT_F32, .clip = 1});
}

/* A step whose pass fails before any layer stepped (a label out of range) counts no optimizer
 * step: AdamW's bias correction after it is the one of a model whose step comes after backward. */
static void test_failed_pass(void **st)
{
    (void)st;
    rng_seed("overlap failed pass", 0);
    dt_model *whole = make_model(SPEC, INPUT, B, DT_F32, DT_F32), *layered = make_model(SPEC, INPUT, B, DT_F32, DT_F32);
    dt_model_set_step_overlap(whole, DT_STEP_OVERLAP_OFF);
    dt_model_set_step_overlap(layered, DT_STEP_OVERLAP_ON);
    const size_t np = dt_model_num_params(whole);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.lr = 2e-3f;
    dt_optimizer *ow, *ol;
    assert_int_equal(dt_optimizer_create(&oc, np, &ow), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, np, &ol), DT_OK);
    for (int p = 0; p < 3; p++) {
        float *x;
        int32_t *y;
        make_batch(whole, B, 2.0f, &x, &y);
        dt_step_result r;
        if (p == 1) {
            const int32_t good = y[2];
            y[2] = 99; /* refused by the pass before anything runs */
            assert_int_equal(dt_model_train_step(whole, ow, NULL, x, y, B, 1.0f / B, &r), DT_ERR_INVALID_ARG);
            assert_int_equal(dt_model_train_step(layered, ol, NULL, x, y, B, 1.0f / B, &r), DT_ERR_INVALID_ARG);
            y[2] = good;
        }
        assert_int_equal(dt_model_train_step(whole, ow, NULL, x, y, B, 1.0f / B, &r), DT_OK);
        assert_int_equal(dt_model_train_step(layered, ol, NULL, x, y, B, 1.0f / B, &r), DT_OK);
        free(x);
        free(y);
    }
    assert_memory_equal(dt_model_params(whole), dt_model_params(layered), np * sizeof(float));
    dt_optimizer_free(ow);
    dt_optimizer_free(ol);
    dt_model_free(whole);
    dt_model_free(layered);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_16bit_copy),  cmocka_unit_test(test_whole_gradient_first),
        cmocka_unit_test(test_failed_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
