/*
 * test_step_graphs.c - step graphs (dt_model_set_graphs): passes recorded once and replayed as one
 * launch must give the bits of passes launched one by one, record nothing a launch could not
 * replay, and fall back to the usual pass wherever a graph does not fit.
 *
 * The CPU has no graphs (its ops run at once), so the CPU table here gets a recorder: between
 * graph_begin and graph_end the layer entries and layer_loss only note their arguments (the
 * pointers and scalars, as a CUDA capture keeps them), graph_launch calls the CPU entries with
 * them. Every entry that must not run while recording (waits, copies, reductions to the host, the
 * optimizers, casts) fails the test when called then. Two models from the same seed train side by
 * side, `plain` with graphs off and `graphed` on the recorder, on batches the caller stages in two
 * pairs of buffers that take turns (as a GPU model's two input slots do), with a short batch and a
 * write of the parameters through the public API in between: losses, counts and parameters must
 * agree bit for bit, each key must be recorded once at its second pass, and replayed passes must
 * call no layer entry from the host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "base/status.h"
#include "kernels/backend.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"

#define SPEC "conv:4:3:1:1,relu,pool:2,flatten,fc:13,relu,fc:7,relu,fc:5"
#define INPUT "3x4x4"
#define B 6
#define MAX_RECS 64

typedef enum {
    R_FC_FWD,
    R_FC_BWD,
    R_CONV_FWD,
    R_CONV_BWD,
    R_POOL_FWD,
    R_POOL_BWD,
    R_RELU_FWD,
    R_RELU_BWD,
    R_LOSS
} rec_op;

/* One recorded call: every argument by value (the structs the model passes by pointer live on its
 * stack only during the call). */
typedef struct rec {
    rec_op op;
    pass_args a;
    layer_params lp;
    conv_shape cs;
    const void *x, *dy;
    void *y, *dx;
    int x_f32, batch, in, out, c, h, w, k;
    int32_t *idx;
    const int32_t *labels;
    size_t n;
    float grad_scale;
    double *loss;
    int *correct;
} rec;

typedef struct graph {
    rec r[MAX_RECS];
    int n;
} graph;

static struct {
    const backend_ops *cpu;
    graph cur;
    int recording, fail_end, fail_op;
    long live_layer_calls, launches, frees, begins;
} g;

static dt_status note(const rec *r)
{
    assert_true(g.cur.n < MAX_RECS);
    g.cur.r[g.cur.n++] = *r;
    if (g.fail_op) return status_set_error(DT_ERR_DEVICE, "test: an op that cannot be recorded");
    return DT_OK;
}

static dt_status run_rec(backend *be, const rec *r)
{
    const backend_ops *k = g.cpu;
    switch (r->op) {
        case R_FC_FWD: return k->layer_fc_fwd(be, &r->a, &r->lp, r->x, r->x_f32, r->y, r->batch, r->in, r->out);
        case R_FC_BWD: return k->layer_fc_bwd(be, &r->a, &r->lp, r->x, r->x_f32, r->dy, r->dx, r->batch, r->in, r->out);
        case R_CONV_FWD: return k->layer_conv_fwd(be, &r->a, &r->lp, &r->cs, r->x, r->x_f32, r->y);
        case R_CONV_BWD: return k->layer_conv_bwd(be, &r->a, &r->lp, &r->cs, r->x, r->x_f32, r->dy, r->dx);
        case R_POOL_FWD:
            return k->layer_pool_fwd(be, &r->a, r->x, r->x_f32, r->y, r->idx, r->batch, r->c, r->h, r->w, r->k);
        case R_POOL_BWD: return k->layer_pool_bwd(be, &r->a, r->dy, r->idx, r->dx, r->batch, r->c, r->h, r->w, r->k);
        case R_RELU_FWD: return k->layer_relu_fwd(be, &r->a, r->x, r->x_f32, r->y, r->n);
        case R_RELU_BWD: return k->layer_relu_bwd(be, &r->a, r->x, r->dy, r->dx, r->n);
        case R_LOSS:
            return k->layer_loss(be, &r->a, r->x, r->labels, r->dx, r->batch, r->c, r->grad_scale, r->loss, r->correct);
    }
    return DT_ERR_INTERNAL;
}

/* A layer entry: noted while recording, run (and counted) otherwise. */
#define RECORD_OR_RUN(...)                                                                                             \
    do {                                                                                                               \
        const rec r_ = {__VA_ARGS__};                                                                                  \
        if (g.recording) return note(&r_);                                                                             \
        g.live_layer_calls++;                                                                                          \
        return run_rec(be, &r_);                                                                                       \
    } while (0)

static dt_status fc_fwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32, void *y,
                        int batch, int in, int out)
{
    RECORD_OR_RUN(.op = R_FC_FWD, .a = *a, .lp = *lp, .x = x, .x_f32 = x_f32, .y = y, .batch = batch, .in = in,
                  .out = out);
}

static dt_status fc_bwd(backend *be, const pass_args *a, const layer_params *lp, const void *x, int x_f32,
                        const void *dy, void *dx, int batch, int in, int out)
{
    RECORD_OR_RUN(.op = R_FC_BWD, .a = *a, .lp = *lp, .x = x, .x_f32 = x_f32, .dy = dy, .dx = dx, .batch = batch,
                  .in = in, .out = out);
}

static dt_status conv_fwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s, const void *x,
                          int x_f32, void *y)
{
    RECORD_OR_RUN(.op = R_CONV_FWD, .a = *a, .lp = *lp, .cs = *s, .x = x, .x_f32 = x_f32, .y = y);
}

static dt_status conv_bwd(backend *be, const pass_args *a, const layer_params *lp, const conv_shape *s, const void *x,
                          int x_f32, const void *dy, void *dx)
{
    RECORD_OR_RUN(.op = R_CONV_BWD, .a = *a, .lp = *lp, .cs = *s, .x = x, .x_f32 = x_f32, .dy = dy, .dx = dx);
}

static dt_status pool_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, int32_t *idx, int batch,
                          int c, int h, int w, int k)
{
    RECORD_OR_RUN(.op = R_POOL_FWD, .a = *a, .x = x, .x_f32 = x_f32, .y = y, .idx = idx, .batch = batch, .c = c, .h = h,
                  .w = w, .k = k);
}

static dt_status pool_bwd(backend *be, const pass_args *a, const void *dy, const int32_t *idx, void *dx, int batch,
                          int c, int h, int w, int k)
{
    RECORD_OR_RUN(.op = R_POOL_BWD, .a = *a, .dy = dy, .idx = (int32_t *)idx, .dx = dx, .batch = batch, .c = c, .h = h,
                  .w = w, .k = k);
}

static dt_status relu_fwd(backend *be, const pass_args *a, const void *x, int x_f32, void *y, size_t n)
{
    RECORD_OR_RUN(.op = R_RELU_FWD, .a = *a, .x = x, .x_f32 = x_f32, .y = y, .n = n);
}

static dt_status relu_bwd(backend *be, const pass_args *a, const void *y, const void *dy, void *dx, size_t n)
{
    RECORD_OR_RUN(.op = R_RELU_BWD, .a = *a, .x = y, .dy = dy, .dx = dx, .n = n);
}

static dt_status loss(backend *be, const pass_args *a, const void *logits, const int32_t *labels, void *dlogits,
                      int batch, int classes, float grad_scale, double *l, int *correct)
{
    RECORD_OR_RUN(.op = R_LOSS, .a = *a, .x = logits, .labels = labels, .dx = dlogits, .batch = batch, .c = classes,
                  .grad_scale = grad_scale, .loss = l, .correct = correct);
}

/* Entries that wait, copy to or from the host, return a host value or step: never while recording. */
static dt_status loss_wait(backend *be)
{
    assert_false(g.recording);
    return g.cpu->loss_wait(be);
}
static dt_status sync(backend *be)
{
    assert_false(g.recording);
    return g.cpu->sync(be);
}
static dt_status to_host(backend *be, void *dst, const void *src, size_t bytes)
{
    assert_false(g.recording);
    return g.cpu->to_host(be, dst, src, bytes);
}
static dt_status to_device(backend *be, void *dst, const void *src, size_t bytes)
{
    assert_false(g.recording);
    return g.cpu->to_device(be, dst, src, bytes);
}
static dt_status cast_to16(backend *be, dt_dtype t, const float *in, uint16_t *out, size_t n)
{
    assert_false(g.recording);
    return g.cpu->cast_to16(be, t, in, out, n);
}
static dt_status scale_count(backend *be, dt_dtype t, void *buf, size_t n, float mul, size_t *bad)
{
    assert_false(g.recording);
    return g.cpu->scale_count(be, t, buf, n, mul, bad);
}
static dt_status flag_nonfinite(backend *be, dt_dtype t, const void *buf, size_t n, int *flag, int stamp, int since)
{
    assert_false(g.recording);
    return g.cpu->flag_nonfinite(be, t, buf, n, flag, stamp, since);
}
static dt_status sum_squares(backend *be, dt_dtype t, const void *buf, size_t n, float m1, float m2, double *out)
{
    assert_false(g.recording);
    return g.cpu->sum_squares(be, t, buf, n, m1, m2, out);
}
static dt_status accum_grads(backend *be, dt_dtype t, void *gr, float *acc, size_t n, int add, int store)
{
    assert_false(g.recording);
    return g.cpu->accum_grads(be, t, gr, acc, n, add, store);
}
static dt_status sgd(backend *be, float *p, const optim_grads *gr, float *buf, size_t n, float lr, float mom, float wd,
                     int first, dt_dtype copy_t, uint16_t *copy)
{
    assert_false(g.recording);
    return g.cpu->sgd(be, p, gr, buf, n, lr, mom, wd, first, copy_t, copy);
}
static dt_status adamw(backend *be, float *p, const optim_grads *gr, float *m, float *v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, int t, dt_dtype copy_t, uint16_t *copy)
{
    assert_false(g.recording);
    return g.cpu->adamw(be, p, gr, m, v, n, lr, b1, b2, eps, wd, t, copy_t, copy);
}

static dt_status graph_begin(backend *be)
{
    (void)be;
    assert_false(g.recording);
    g.recording = 1;
    g.cur.n = 0;
    g.begins++;
    return DT_OK;
}

static dt_status graph_end(backend *be, int keep, void **out)
{
    (void)be;
    assert_true(g.recording);
    g.recording = 0;
    *out = NULL;
    if (g.fail_end) return status_set_error(DT_ERR_DEVICE, "test: the recording failed");
    if (!keep) return DT_OK;
    graph *gr = malloc(sizeof *gr);
    assert_non_null(gr);
    *gr = g.cur;
    *out = gr;
    return DT_OK;
}

static dt_status graph_launch(backend *be, void *p)
{
    assert_false(g.recording);
    const graph *gr = p;
    g.launches++;
    for (int i = 0; i < gr->n; i++) {
        const dt_status s = run_rec(be, &gr->r[i]);
        if (s) return s;
    }
    return DT_OK;
}

static void graph_free(backend *be, void *p)
{
    (void)be;
    if (p) g.frees++;
    free(p);
}

static backend_ops g_ops;
static backend g_recorder = {&g_ops, NULL};

static void recorder_init(void)
{
    memset(&g, 0, sizeof g);
    g.cpu = backend_cpu()->ops;
    g_ops = *g.cpu;
    g_ops.layer_fc_fwd = fc_fwd;
    g_ops.layer_fc_bwd = fc_bwd;
    g_ops.layer_conv_fwd = conv_fwd;
    g_ops.layer_conv_bwd = conv_bwd;
    g_ops.layer_pool_fwd = pool_fwd;
    g_ops.layer_pool_bwd = pool_bwd;
    g_ops.layer_relu_fwd = relu_fwd;
    g_ops.layer_relu_bwd = relu_bwd;
    g_ops.layer_loss = loss;
    g_ops.loss_wait = loss_wait;
    g_ops.sync = sync;
    g_ops.to_host = to_host;
    g_ops.to_device = to_device;
    g_ops.cast_to16 = cast_to16;
    g_ops.scale_count = scale_count;
    g_ops.flag_nonfinite = flag_nonfinite;
    g_ops.sum_squares = sum_squares;
    g_ops.accum_grads = accum_grads;
    g_ops.sgd = sgd;
    g_ops.adamw = adamw;
    g_ops.graph_begin = graph_begin;
    g_ops.graph_end = graph_end;
    g_ops.graph_launch = graph_launch;
    g_ops.graph_free = graph_free;
}

typedef struct run_cfg {
    dt_optim_kind kind;
    dt_dtype prec;
    int keep16, scaler;
} run_cfg;

/* The batches of one pass, staged in buffer pair `pair` (a GPU model's input slots). */
typedef struct staging {
    float *x[2];
    int32_t *y[2];
} staging;

#define PASSES 12
#define SHORT_PASS 7 /* a batch of B - 2 in pair 1: its own key, seen once */
#define WRITE_PASS 9 /* the parameters written through the public API before this pass */

static void train_side_by_side(const run_cfg *c)
{
    backend_cpu_set_keep_params16(c->keep16);
    recorder_init(); /* on the table of this keep16 */
    dt_model *plain = make_model(SPEC, INPUT, B, c->prec, DT_F32);
    dt_model *graphed = make_model(SPEC, INPUT, B, c->prec, DT_F32);
    backend_cpu_set_keep_params16(0);
    model_test_set_backend(graphed, &g_recorder);
    dt_model_set_graphs(plain, DT_GRAPHS_OFF);
    const size_t np = dt_model_num_params(plain), in = dt_model_input_size(plain);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = c->kind;
    oc.lr = c->kind == DT_OPTIM_SGD ? 0.05f : 2e-3f;
    oc.weight_decay = 1e-2f;
    dt_optimizer *op, *og;
    assert_int_equal(dt_optimizer_create(&oc, np, &op), DT_OK);
    assert_int_equal(dt_optimizer_create(&oc, np, &og), DT_OK);
    dt_scaler *sp = NULL, *sg = NULL;
    if (c->scaler) {
        dt_scaler_config scc;
        dt_scaler_defaults(&scc);
        scc.init_scale = 1024; /* no overflow in these passes: the key stays */
        assert_int_equal(dt_scaler_create(&scc, &sp), DT_OK);
        assert_int_equal(dt_scaler_create(&scc, &sg), DT_OK);
    }
    staging st;
    for (int i = 0; i < 2; i++) {
        st.x[i] = xmalloc(B * in * sizeof(float));
        st.y[i] = xmalloc(B * sizeof(int32_t));
    }
    for (int p = 0; p < PASSES; p++) {
        const int pair = p & 1, batch = p == SHORT_PASS ? B - 2 : B;
        float *x;
        int32_t *y;
        make_batch(plain, batch, 2.0f, &x, &y);
        memcpy(st.x[pair], x, (size_t)batch * in * sizeof *x);
        memcpy(st.y[pair], y, (size_t)batch * sizeof *y);
        if (p == WRITE_PASS) /* a write the 16-bit copy must follow: cast before the launch */
            for (dt_model *m = plain; m; m = m == plain ? graphed : NULL) {
                float *w = dt_model_params(m);
                for (size_t i = 0; i < np; i += 7) w[i] *= 0.5f;
                dt_model_params_changed(m);
            }
        const long live0 = g.live_layer_calls, launches0 = g.launches;
        const float gs = 1.0f / (float)batch;
        dt_step_result rp, rg;
        assert_int_equal(dt_model_train_step(plain, op, sp, st.x[pair], st.y[pair], batch, gs, &rp), DT_OK);
        assert_int_equal(dt_model_train_step(graphed, og, sg, st.x[pair], st.y[pair], batch, gs, &rg), DT_OK);
        assert_memory_equal(&rp.loss_sum, &rg.loss_sum, sizeof rp.loss_sum);
        assert_int_equal(rp.correct, rg.correct);
        assert_int_equal(rp.stepped, rg.stepped);
        assert_int_equal(rp.skipped, rg.skipped);
        assert_memory_equal(dt_model_params(plain), dt_model_params(graphed), np * sizeof(float));
        assert_int_equal(dt_model_graphed(plain), DT_GRAPHS_OFF);
        /* Passes 0 and 1 see each pair's key first (as usual), 2 and 3 record, then replays; the
         * short batch is a key of its own, seen once. */
        const int as_graph = p >= 2 && p != SHORT_PASS;
        assert_int_equal(dt_model_graphed(graphed), as_graph ? DT_GRAPHS_ON : DT_GRAPHS_OFF);
        assert_int_equal(g.launches - launches0, as_graph);
        if (as_graph && p >= 4) assert_int_equal(g.live_layer_calls, live0); /* replayed: nothing from the host */
        if (!as_graph) assert_true(g.live_layer_calls > live0);
        free(x);
        free(y);
    }
    assert_int_equal(model_test_graph_records(graphed), 2);
    assert_int_equal(g.begins, 2);
    assert_false(g.recording);
    /* A change of precision drops the graphs (they hold the buffers it replaces). */
    assert_int_equal(dt_model_set_precision(graphed, DT_F32, DT_F32), DT_OK);
    assert_int_equal(g.frees, 2);
    for (int i = 0; i < 2; i++) {
        free(st.x[i]);
        free(st.y[i]);
    }
    dt_scaler_free(sp);
    dt_scaler_free(sg);
    dt_optimizer_free(op);
    dt_optimizer_free(og);
    dt_model_free(plain);
    dt_model_free(graphed);
    assert_int_equal(g.frees, 2);
}

static void test_fp32(void **st)
{
    (void)st;
    rng_seed("graphs fp32", 0);
    train_side_by_side(&(run_cfg){.kind = DT_OPTIM_SGD, .prec = DT_F32});
    train_side_by_side(&(run_cfg){.kind = DT_OPTIM_ADAMW, .prec = DT_F32});
}

/* bf16 with the 16-bit parameter copy kept (a GPU's): the write before WRITE_PASS must be cast
 * into it before the launch, or the replay reads stale weights. */
static void test_bf16(void **st)
{
    (void)st;
    rng_seed("graphs bf16", 0);
    train_side_by_side(&(run_cfg){.kind = DT_OPTIM_SGD, .prec = DT_BF16, .keep16 = 1});
    train_side_by_side(&(run_cfg){.kind = DT_OPTIM_ADAMW, .prec = DT_BF16});
}

/* fp16 with a loss scaler: its check and the step stay outside the graph. */
static void test_fp16_scaler(void **st)
{
    (void)st;
    rng_seed("graphs fp16", 0);
    train_side_by_side(&(run_cfg){.kind = DT_OPTIM_SGD, .prec = DT_F16, .keep16 = 1, .scaler = 1});
}

/* A few passes of m on fixed buffers; returns how many ran as graphs. */
static int passes_graphed(dt_model *m, dt_optimizer *o, int passes)
{
    const size_t in = dt_model_input_size(m);
    float *x = xmalloc(B * in * sizeof *x);
    int32_t *y = xmalloc(B * sizeof *y);
    for (size_t i = 0; i < B * in; i++) x[i] = sinf((float)i); /* the same batch for every model */
    for (int i = 0; i < B; i++) y[i] = i % 5;
    int n = 0;
    for (int p = 0; p < passes; p++) {
        dt_step_result r;
        assert_int_equal(dt_model_train_step(m, o, NULL, x, y, B, 1.0f / B, &r), DT_OK);
        n += dt_model_graphed(m) == DT_GRAPHS_ON;
    }
    free(x);
    free(y);
    return n;
}

static dt_model *recorded_model(dt_optimizer **o)
{
    recorder_init();
    dt_model *m = make_model(SPEC, INPUT, B, DT_F32, DT_F32);
    model_test_set_backend(m, &g_recorder);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(m), o), DT_OK);
    return m;
}

/* Passes that need the host between layers run as usual, and so does everything with graphs off. */
static void test_not_recorded(void **st)
{
    (void)st;
    rng_seed("graphs off", 0);
    for (int c = 0; c < 5; c++) {
        dt_optimizer *o;
        dt_model *m = recorded_model(&o);
        switch (c) {
            case 0: dt_model_set_graphs(m, DT_GRAPHS_OFF); break;
            case 1: assert_int_equal(dt_model_set_accum_steps(m, 2), DT_OK); break;
            case 2: assert_int_equal(dt_model_set_profile(m, 1), DT_OK); break;
            case 3: dt_model_set_nonfinite_check(m, DT_NONFINITE_CHECK_ON); break;
            case 4: dt_model_set_step_overlap(m, DT_STEP_OVERLAP_ON); break;
        }
        assert_int_equal(passes_graphed(m, o, 6), 0);
        assert_int_equal(g.begins, 0);
        assert_int_equal(model_test_graph_records(m), 0);
        dt_optimizer_free(o);
        dt_model_free(m);
    }
    /* The same model with graphs on records at its second pass (the cases above did not by chance). */
    dt_optimizer *o;
    dt_model *m = recorded_model(&o);
    assert_int_equal(passes_graphed(m, o, 6), 5);
    assert_int_equal(model_test_graph_records(m), 1);
    dt_optimizer_free(o);
    dt_model_free(m);
}

/* A recording that fails (at graph_end, or an op inside it) turns graphs off for the model and
 * runs the pass as usual: the same bits as a model that never tried. */
static void test_failed_recording(void **st)
{
    (void)st;
    for (int where = 0; where < 2; where++) {
        rng_seed("graphs fail", 0);
        dt_optimizer *o, *op;
        dt_model *m = recorded_model(&o);
        dt_model *plain = make_model(SPEC, INPUT, B, DT_F32, DT_F32);
        dt_optim_config oc;
        dt_optim_defaults(&oc);
        assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(plain), &op), DT_OK);
        if (where)
            g.fail_op = 1;
        else
            g.fail_end = 1;
        assert_int_equal(passes_graphed(m, o, 5), 0);
        assert_int_equal(passes_graphed(plain, op, 5), 0);
        assert_int_equal(g.begins, 1); /* tried once, then off for good */
        assert_int_equal(g.launches, 0);
        assert_int_equal(model_test_graph_records(m), 0);
        assert_memory_equal(dt_model_params(plain), dt_model_params(m), dt_model_num_params(m) * sizeof(float));
        dt_optimizer_free(o);
        dt_optimizer_free(op);
        dt_model_free(m);
        dt_model_free(plain);
    }
}

/* The CPU table records nothing: graphs on or not, its passes run as usual. */
static void test_cpu_has_none(void **st)
{
    (void)st;
    dt_model *m = make_model(SPEC, INPUT, B, DT_F32, DT_F32);
    dt_model_set_graphs(m, DT_GRAPHS_ON);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_optimizer *o;
    assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(m), &o), DT_OK);
    assert_int_equal(passes_graphed(m, o, 4), 0);
    dt_optimizer_free(o);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16_scaler),
        cmocka_unit_test(test_not_recorded),
        cmocka_unit_test(test_failed_recording),
        cmocka_unit_test(test_cpu_has_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
