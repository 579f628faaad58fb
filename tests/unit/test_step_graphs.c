/*
 * test_step_graphs.c - step graphs (dt_model_set_graphs): passes recorded once and replayed as one
 * launch must give the bits of passes launched one by one, record nothing a launch could not
 * replay, and fall back to the usual pass wherever a graph does not fit.
 *
 * The CPU has no graphs (its ops run at once), so the model runs on graph_recorder.h's table,
 * which records the layer entries' arguments and replays them, and counts a misuse for any entry
 * that must not run while recording. Two models from the same seed train side by
 * side, `plain` with graphs off and `graphed` on the recorder, on batches the caller stages in two
 * pairs of buffers that take turns (as a GPU model's two input slots do), with a short batch and a
 * write of the parameters through the public API in between: losses, counts and parameters must
 * agree bit for bit, each key must be recorded once at its second pass, and replayed passes must
 * call no layer entry from the host. At one rank the graph holds the whole step: the optimizer
 * (and fp16's queued finite check) too, replayed with each step's learning rate and count, which
 * change at every pass here, and overflowing steps replayed as skipped ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "base/status.h"
#include "kernels/backend.h"
#include "runtime/model/model.h"
#include "runtime/test_hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_fixture.h"
#include "graph_recorder.h"

#define SPEC "conv:4:3:1:1,relu,pool:2,flatten,fc:13,relu,fc:7,relu,fc:5"
#define INPUT "3x4x4"
#define B 6
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

/* Two models from the same seed with an optimizer and (scc not NULL) a loss scaler each: `plain`
 * with graphs off, `graphed` on the recorder. */
typedef struct side_by_side {
    dt_model *plain, *graphed;
    dt_optimizer *op, *og;
    dt_scaler *sp, *sg;
} side_by_side;

static void pair_make(side_by_side *sb, dt_dtype prec, int keep16, const dt_optim_config *oc,
                      const dt_scaler_config *scc)
{
    memset(sb, 0, sizeof *sb);
    backend_cpu_set_keep_params16(keep16);
    backend *rec = graph_recorder_init(); /* on the table of this keep16 */
    sb->plain = make_model(SPEC, INPUT, B, prec, DT_F32);
    sb->graphed = make_model(SPEC, INPUT, B, prec, DT_F32);
    backend_cpu_set_keep_params16(0);
    model_test_set_backend(sb->graphed, rec);
    dt_model_set_graphs(sb->plain, DT_GRAPHS_OFF);
    const size_t np = dt_model_num_params(sb->plain);
    assert_int_equal(dt_optimizer_create(oc, np, &sb->op), DT_OK);
    assert_int_equal(dt_optimizer_create(oc, np, &sb->og), DT_OK);
    if (scc) {
        assert_int_equal(dt_scaler_create(scc, &sb->sp), DT_OK);
        assert_int_equal(dt_scaler_create(scc, &sb->sg), DT_OK);
    }
}

static void pair_free(side_by_side *sb)
{
    dt_scaler_free(sb->sp);
    dt_scaler_free(sb->sg);
    dt_optimizer_free(sb->op);
    dt_optimizer_free(sb->og);
    dt_model_free(sb->plain);
    dt_model_free(sb->graphed);
}

static void train_side_by_side(const run_cfg *c)
{
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = c->kind;
    oc.lr = c->kind == DT_OPTIM_SGD ? 0.05f : 2e-3f;
    oc.weight_decay = 1e-2f;
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    scc.init_scale = 1024; /* no overflow in these passes: the key stays */
    side_by_side sb;
    pair_make(&sb, c->prec, c->keep16, &oc, c->scaler ? &scc : NULL);
    graph_recorder *g = graph_recorder_state();
    dt_model *plain = sb.plain, *graphed = sb.graphed;
    dt_optimizer *op = sb.op, *og = sb.og;
    dt_scaler *sp = sb.sp, *sg = sb.sg;
    const size_t np = dt_model_num_params(plain), in = dt_model_input_size(plain);
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
        const long live0 = g->live_layer_calls, launches0 = g->launches, opt0 = g->live_optim_calls;
        const float gs = 1.0f / (float)batch;
        /* A schedule: the graph's step must read each pass's rate, not the recording's. */
        assert_int_equal(dt_optimizer_set_lr(op, oc.lr * (1.0f + 0.1f * (float)p)), DT_OK);
        assert_int_equal(dt_optimizer_set_lr(og, oc.lr * (1.0f + 0.1f * (float)p)), DT_OK);
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
        assert_int_equal(g->launches - launches0, as_graph);
        if (as_graph && p >= 4) assert_int_equal(g->live_layer_calls, live0); /* replayed: nothing from the host */
        if (!as_graph) assert_true(g->live_layer_calls > live0);
        /* The optimizer step in the graph, or from the host once when the pass was not one. */
        assert_int_equal(g->live_optim_calls - opt0, as_graph ? 0 : 1);
        free(x);
        free(y);
    }
    assert_int_equal(model_test_graph_records(graphed), 2);
    assert_int_equal(g->begins, 2);
    assert_false(g->recording);
    assert_int_equal(g->misuses, 0);
    /* A change of precision drops the graphs (they hold the buffers it replaces). */
    assert_int_equal(dt_model_set_precision(graphed, DT_F32, DT_F32), DT_OK);
    assert_int_equal(g->frees, 2);
    for (int i = 0; i < 2; i++) {
        free(st.x[i]);
        free(st.y[i]);
    }
    pair_free(&sb);
    assert_int_equal(g->frees, 2);
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

/* fp16 with a loss scaler: its queued check and the step in the graph, behind the pass. */
static void test_fp16_scaler(void **st)
{
    (void)st;
    rng_seed("graphs fp16", 0);
    train_side_by_side(&(run_cfg){.kind = DT_OPTIM_SGD, .prec = DT_F16, .keep16 = 1, .scaler = 1});
}

/* fp16 whose scale grows every step until an overflow halves it: the scale swings between two
 * values, each a key of its own, so overflowing steps replay too. The graph's queued check must
 * skip them as the host-first order does: the same bits, skipped flags, scales and step counts as
 * graphs off, with some skipped steps and some stepped ones replayed. deferred: the graphed model
 * returns before each verdict (dt_model_set_deferred_verdict), taken by dt_model_settle_step. */
static void overflow_replayed(int deferred)
{
    rng_seed("graphs fp16 overflow", 0);
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.lr = 1e-3f;
    dt_scaler_config scc;
    dt_scaler_defaults(&scc);
    scc.init_scale = 4096;
    scc.growth_interval = 1; /* grow at every good step: the next one overflows */
    scc.min_scale = 1e-6;
    scc.max_scale = 1e30;
    scc.max_overflow_fraction = 1.0; /* never give up: every other step overflows */
    side_by_side sb;
    pair_make(&sb, DT_F16, 1, &oc, &scc);
    dt_model_set_deferred_verdict(sb.graphed, deferred);
    graph_recorder *g = graph_recorder_state();
    const size_t np = dt_model_num_params(sb.plain);
    float *x;
    int32_t *y;
    make_batch(sb.plain, B, 2.0f, &x, &y);
    int replayed_skips = 0, replayed_steps = 0;
    for (int p = 0; p < 40; p++) {
        const long opt0 = g->live_optim_calls;
        dt_step_result rp, rg;
        assert_int_equal(dt_model_train_step(sb.plain, sb.op, sb.sp, x, y, B, 1.0f / B, &rp), DT_OK);
        assert_int_equal(dt_model_train_step(sb.graphed, sb.og, sb.sg, x, y, B, 1.0f / B, &rg), DT_OK);
        assert_int_equal(rg.pending, deferred);
        if (deferred) {
            assert_int_equal(dt_model_settle_step(sb.graphed, &rg.skipped), DT_OK);
            rg.stepped = !rg.skipped;
        }
        assert_memory_equal(&rp.loss_sum, &rg.loss_sum, sizeof rp.loss_sum);
        assert_int_equal(rp.skipped, rg.skipped);
        assert_int_equal(rp.stepped, rg.stepped);
        assert_true(dt_scaler_scale(sb.sp) == dt_scaler_scale(sb.sg));
        assert_int_equal(optimizer_state(sb.op).t, optimizer_state(sb.og).t);
        assert_memory_equal(dt_model_params(sb.plain), dt_model_params(sb.graphed), np * sizeof(float));
        if (dt_model_graphed(sb.graphed) == DT_GRAPHS_ON) {
            assert_int_equal(g->live_optim_calls, opt0);
            replayed_skips += rg.skipped;
            replayed_steps += rg.stepped;
        }
    }
    assert_true(replayed_skips >= 3);
    assert_true(replayed_steps >= 3);
    assert_int_equal(g->misuses, 0);
    free(x);
    free(y);
    pair_free(&sb);
}

static void test_fp16_overflow_replayed(void **st)
{
    (void)st;
    overflow_replayed(0);
    overflow_replayed(1);
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
    backend *rec = graph_recorder_init();
    dt_model *m = make_model(SPEC, INPUT, B, DT_F32, DT_F32);
    model_test_set_backend(m, rec);
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
        graph_recorder *g = graph_recorder_state();
        switch (c) {
            case 0: dt_model_set_graphs(m, DT_GRAPHS_OFF); break;
            case 1: assert_int_equal(dt_model_set_accum_steps(m, 2), DT_OK); break;
            case 2: assert_int_equal(dt_model_set_profile(m, 1), DT_OK); break;
            case 3: dt_model_set_nonfinite_check(m, DT_NONFINITE_CHECK_ON); break;
            case 4: dt_model_set_step_overlap(m, DT_STEP_OVERLAP_ON); break;
        }
        assert_int_equal(passes_graphed(m, o, 6), 0);
        assert_int_equal(g->begins, 0);
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

/* A graph holds the fused forwards or the relu layers' kernels: changing dt_model_set_fused_relu
 * drops it (a replay would run the other kernels), and the next passes record again; setting the
 * value it has changes nothing. */
static void test_fused_relu_redraws(void **st)
{
    (void)st;
    rng_seed("graphs fused relu", 0);
    dt_optimizer *o;
    dt_model *m = recorded_model(&o);
    graph_recorder *g = graph_recorder_state();
    assert_int_equal(passes_graphed(m, o, 3), 2);
    assert_int_equal(model_test_graph_records(m), 1);
    dt_model_set_fused_relu(m, 1); /* already on */
    assert_int_equal(g->frees, 0);
    dt_model_set_fused_relu(m, 0);
    assert_int_equal(g->frees, 1);
    assert_int_equal(passes_graphed(m, o, 3), 2); /* seen, recorded, replayed */
    assert_int_equal(model_test_graph_records(m), 2);
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
        graph_recorder *g = graph_recorder_state();
        dt_model *plain = make_model(SPEC, INPUT, B, DT_F32, DT_F32);
        dt_optim_config oc;
        dt_optim_defaults(&oc);
        assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(plain), &op), DT_OK);
        if (where)
            g->fail_op = 1;
        else
            g->fail_end = 1;
        assert_int_equal(passes_graphed(m, o, 5), 0);
        assert_int_equal(passes_graphed(plain, op, 5), 0);
        assert_int_equal(g->begins, 1); /* tried once, then off for good */
        assert_int_equal(g->launches, 0);
        assert_int_equal(g->misuses, 0);
        assert_int_equal(model_test_graph_records(m), 0);
        assert_memory_equal(dt_model_params(plain), dt_model_params(m), dt_model_num_params(m) * sizeof(float));
        dt_optimizer_free(o);
        dt_optimizer_free(op);
        dt_model_free(m);
        dt_model_free(plain);
    }
}

/* AUTO records for models under DT_GRAPHS_AUTO_PARAMS only; ON for any. */
static void test_auto_threshold(void **st)
{
    (void)st;
    for (int on = 0; on <= 1; on++) {
        backend *rec = graph_recorder_init();
        dt_model *m = make_model("fc:2048,relu,fc:5", "4096", B, DT_F32, DT_F32); /* 8.4M parameters */
        assert_true(dt_model_num_params(m) >= DT_GRAPHS_AUTO_PARAMS);
        model_test_set_backend(m, rec);
        dt_model_set_graphs(m, on ? DT_GRAPHS_ON : DT_GRAPHS_AUTO);
        dt_model_set_step_overlap(m, DT_STEP_OVERLAP_OFF); /* else one rank steps layer by layer */
        dt_optim_config oc;
        dt_optim_defaults(&oc);
        dt_optimizer *o;
        assert_int_equal(dt_optimizer_create(&oc, dt_model_num_params(m), &o), DT_OK);
        assert_int_equal(passes_graphed(m, o, 3), on ? 2 : 0);
        assert_int_equal(graph_recorder_state()->misuses, 0);
        dt_optimizer_free(o);
        dt_model_free(m);
    }
}

/* Both models of sb on one key: a new batch each pass, staged in the same buffers (xs, ys). */
typedef struct one_key {
    float *xs;
    int32_t *ys;
} one_key;

/* sb made from seed with SGD (momentum 0.9, lr 0.05) in oc, no scaler. */
static void pair_sgd(side_by_side *sb, const char *seed, dt_dtype prec, int keep16, dt_optim_config *oc)
{
    rng_seed(seed, 0);
    dt_optim_defaults(oc);
    oc->lr = 0.05f;
    pair_make(sb, prec, keep16, oc, NULL);
}

static one_key one_key_make(const side_by_side *sb)
{
    const size_t in = dt_model_input_size(sb->plain);
    return (one_key){xmalloc(B * in * sizeof(float)), xmalloc(B * sizeof(int32_t))};
}

static void one_key_free(one_key *k)
{
    free(k->xs);
    free(k->ys);
}

/* One step of each model of sb on the next batch, staged in k's buffers: the losses and the
 * parameters agree bit for bit. */
static void one_key_step(side_by_side *sb, one_key *k)
{
    const size_t np = dt_model_num_params(sb->plain), in = dt_model_input_size(sb->plain);
    float *x;
    int32_t *y;
    make_batch(sb->plain, B, 2.0f, &x, &y);
    memcpy(k->xs, x, B * in * sizeof *x);
    memcpy(k->ys, y, B * sizeof *y);
    dt_step_result rp, rg;
    assert_int_equal(dt_model_train_step(sb->plain, sb->op, NULL, k->xs, k->ys, B, 1.0f / B, &rp), DT_OK);
    assert_int_equal(dt_model_train_step(sb->graphed, sb->og, NULL, k->xs, k->ys, B, 1.0f / B, &rg), DT_OK);
    assert_memory_equal(&rp.loss_sum, &rg.loss_sum, sizeof rp.loss_sum);
    assert_memory_equal(dt_model_params(sb->plain), dt_model_params(sb->graphed), np * sizeof(float));
    free(x);
    free(y);
}

/* A 16-bit step layer by layer writes the spare 16-bit copy and swaps it in (model_overlap.c): a
 * graph recorded before reads and writes the other copy, so it is dropped and recorded again,
 * and every pass keeps the bits of plain passes (a stale replay would read the old copy). */
static void test_spare_copy_drops_graphs(void **st)
{
    (void)st;
    dt_optim_config oc;
    side_by_side sb;
    pair_sgd(&sb, "graphs spare copy", DT_BF16, 1, &oc);
    graph_recorder *g = graph_recorder_state();
    one_key k = one_key_make(&sb);
    for (int p = 0; p < 7; p++) {
        const dt_step_overlap ov = p == 3 ? DT_STEP_OVERLAP_ON : DT_STEP_OVERLAP_OFF;
        dt_model_set_step_overlap(sb.plain, ov);
        dt_model_set_step_overlap(sb.graphed, ov);
        const long frees0 = g->frees;
        one_key_step(&sb, &k);
        /* 1 and 5 record, 2 and 6 replay; 3 steps layer by layer, swaps the copies, drops the graph. */
        const int as_graph = p == 1 || p == 2 || p == 5 || p == 6;
        assert_int_equal(dt_model_graphed(sb.graphed), as_graph ? DT_GRAPHS_ON : DT_GRAPHS_OFF);
        assert_int_equal(dt_model_step_overlapped(sb.graphed), p == 3 ? DT_STEP_OVERLAP_ON : DT_STEP_OVERLAP_OFF);
        assert_int_equal(g->frees - frees0, p == 3);
    }
    assert_int_equal(model_test_graph_records(sb.graphed), 2);
    assert_int_equal(g->misuses, 0);
    one_key_free(&k);
    pair_free(&sb);
}

/* An optimizer freed between steps and another made in its place, often at the same address
 * (malloc hands back the chunk just freed): a graph recorded with the first holds its state
 * buffers and rule, so it must not be replayed for the second (a replay would step freed state
 * with the old rule). Each replacement changes the rule or the state: momentum SGD, then AdamW,
 * then plain SGD (no state), then momentum SGD again (new state at an old address, perhaps). */
static void test_optimizer_replaced(void **st)
{
    (void)st;
    dt_optim_config oc;
    side_by_side sb;
    pair_sgd(&sb, "graphs optimizer replaced", DT_F32, 0, &oc);
    graph_recorder *g = graph_recorder_state();
    const size_t np = dt_model_num_params(sb.plain);
    one_key k = one_key_make(&sb);
    int same_address = 0;
    for (int p = 0; p < 16; p++) {
        if (p % 4 == 0 && p) { /* a new optimizer for both, the graphed one perhaps at the old address */
            const uintptr_t was = (uintptr_t)sb.og;
            dt_optimizer_free(sb.op);
            dt_optimizer_free(sb.og);
            oc.kind = p == 4 ? DT_OPTIM_ADAMW : DT_OPTIM_SGD;
            oc.lr = p == 4 ? 2e-3f : 0.05f;
            oc.momentum = p == 8 ? 0.0f : 0.9f;
            assert_int_equal(dt_optimizer_create(&oc, np, &sb.og), DT_OK);
            assert_int_equal(dt_optimizer_create(&oc, np, &sb.op), DT_OK);
            same_address += (uintptr_t)sb.og == was;
        }
        const long launches0 = g->launches;
        one_key_step(&sb, &k); /* one key but the optimizer's */
        /* Each optimizer's second pass records (or replays a recording that holds the same state
         * and rule: momentum SGD's new state may come back at the first one's address), the next
         * two replay. */
        if (p % 4) assert_int_equal(g->launches - launches0, 1);
    }
    print_message("a new optimizer came back at the freed one's address %d of 3 times\n", same_address);
    assert_in_range(model_test_graph_records(sb.graphed), 3, 4);
    assert_int_equal(g->misuses, 0);
    one_key_free(&k);
    pair_free(&sb);
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
        cmocka_unit_test(test_fp16_overflow_replayed),
        cmocka_unit_test(test_not_recorded),
        cmocka_unit_test(test_failed_recording),
        cmocka_unit_test(test_auto_threshold),
        cmocka_unit_test(test_cpu_has_none),
        cmocka_unit_test(test_fused_relu_redraws),
        cmocka_unit_test(test_spare_copy_drops_graphs),
        cmocka_unit_test(test_optimizer_replaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
