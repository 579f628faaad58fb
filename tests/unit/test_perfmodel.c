/*
 * test_perfmodel.c - launch/perfmodel/: the allreduce formulas against their closed forms (ring,
 * tree, two levels), the ring fit recovering the alpha and bandwidth it was generated from, and
 * the step simulation on cases whose answer is known: one bucket without overlap is compute plus
 * the allreduce, an infinitely fast link is compute alone, and overlap hides what it can.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/perfmodel/perfmodel.h"
#include "launch/perfmodel/perfmodel_input.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void near(double got, double want)
{
    if (!(fabs(got - want) <= 1e-9 * fabs(want) + 1e-15)) fail_msg("got %.17g, expected %.17g", got, want);
}

static pm_net one_node(int world, double alpha, double busbw)
{
    return (pm_net){world, world, {alpha, busbw}, {alpha, busbw}, 0};
}

static void test_ring_formula(void **st)
{
    (void)st;
    for (int w = 2; w <= 8; w++) {
        const pm_net n = one_node(w, 5e-6, 10e9);
        const double bytes = 64e6;
        near(pm_allreduce_time(&n, PM_RING, bytes), 2.0 * (w - 1) / w * bytes / 10e9 + 2.0 * (w - 1) * 5e-6);
    }
    const pm_net solo = one_node(1, 5e-6, 10e9);
    near(pm_allreduce_time(&solo, PM_RING, 1e6), 0);
    /* The fixed cost of a call adds to every allreduce, and makes one bucket beat many small ones. */
    pm_net called = one_node(4, 5e-6, 10e9);
    called.call_s = 20e-6;
    near(pm_allreduce_time(&called, PM_RING, 1e6), 20e-6 + 1.5e6 / 10e9 + 6 * 5e-6);
}

static void test_tree_and_two_levels(void **st)
{
    (void)st;
    /* 4 nodes x 8: ring latency 2*31 steps, 8 of them between nodes; the slower busbw rules. */
    const pm_net n = {32, 8, {1e-6, 370e9}, {10e-6, 50e9}, 0};
    assert_int_equal(pm_nodes(&n), 4);
    const double bytes = 100e6;
    near(pm_allreduce_time(&n, PM_RING, bytes), (62 - 8) * 1e-6 + 8 * 10e-6 + 2.0 * 31 / 32 * bytes / 50e9);
    near(pm_allreduce_time(&n, PM_TREE, bytes), 2 * (7 * 1e-6 + 2 * 10e-6) + 2 * bytes / (0.92 * 50e9));
    /* auto: the tree wins small messages (its latency grows with log2 of the nodes), the ring
     * large ones at moderate scale (its bandwidth term is 2 (W-1)/W against the tree's 2 / 0.92);
     * at 4096 ranks the ring's 8190 steps of latency make the tree win even at 1 GB. */
    near(pm_allreduce_time(&n, PM_AUTO, 1e3), pm_allreduce_time(&n, PM_TREE, 1e3));
    near(pm_allreduce_time(&n, PM_AUTO, 1e9), pm_allreduce_time(&n, PM_RING, 1e9));
    assert_true(pm_allreduce_time(&n, PM_TREE, 1e3) < pm_allreduce_time(&n, PM_RING, 1e3));
    const pm_net big = {4096, 8, {1e-6, 370e9}, {10e-6, 50e9}, 0};
    near(pm_allreduce_time(&big, PM_AUTO, 1e9), pm_allreduce_time(&big, PM_TREE, 1e9));
}

static void test_fit_recovers(void **st)
{
    (void)st;
    const int w = 4;
    double bytes[6], secs[6];
    for (int i = 0; i < 6; i++) {
        bytes[i] = 65536.0 * pow(4, i);
        secs[i] = 2.0 * (w - 1) * 20e-6 + 2.0 * (w - 1) / w * bytes[i] / 3e9;
    }
    pm_link l;
    assert_int_equal(pm_fit_ring(w, bytes, secs, 6, &l), DT_OK);
    near(l.alpha_s, 20e-6);
    near(l.busbw, 3e9);
    /* Refusals name the problem. */
    assert_int_equal(pm_fit_ring(1, bytes, secs, 6, &l), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "2 or more ranks"));
    assert_int_equal(pm_fit_ring(w, bytes, secs, 1, &l), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "two sizes"));
    secs[2] = 0;
    assert_int_equal(pm_fit_ring(w, bytes, secs, 6, &l), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "row 3"));
    const double flat_b[2] = {1e6, 2e6}, flat_t[2] = {2e-3, 1e-3};
    assert_int_equal(pm_fit_ring(2, flat_b, flat_t, 2, &l), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "no bandwidth"));
}

/* Three fc-like layers of 1 MiB of fp32 gradients each, a parameterless layer between. */
static const pm_layer layers3[4] = {
    {0.004, 0, 262144}, {0.001, 0, 0}, {0.003, 262144, 262144}, {0.002, 524288, 262144}};
static pm_model model3(void) { return (pm_model){layers3, 4, 786432, 4, 4, 0.005, 0.001}; }

static void test_one_bucket_no_overlap(void **st)
{
    (void)st;
    const pm_model m = model3();
    const pm_net n = one_node(2, 50e-6, 1e9);
    const pm_sync s = {0, 0, 0, PM_RING};
    pm_step r;
    assert_int_equal(pm_step_time(&m, &n, &s, &r), DT_OK);
    assert_int_equal(r.nbuckets, 1);
    const double compute = 0.005 + 0.010 + 0.001;
    near(r.compute_s, compute);
    near(r.step_s, compute + pm_allreduce_time(&n, PM_RING, 3.0 * 1048576));
    near(r.exposed_s, r.comm_s);
}

static void test_fast_link_is_compute(void **st)
{
    (void)st;
    const pm_model m = model3();
    const pm_net n = one_node(8, 0, INFINITY);
    const pm_sync s = {1, 1, 1, PM_AUTO};
    pm_step r;
    assert_int_equal(pm_step_time(&m, &n, &s, &r), DT_OK);
    assert_int_equal(r.nbuckets, 3);
    near(r.step_s, 0.016);
    near(r.efficiency, 1);
}

static void test_overlap_hides(void **st)
{
    (void)st;
    /* Buckets of one layer each; the link takes 1 ms a bucket. Backward: layer 3 done at 2 ms,
     * layer 2 at 5, layer 0 at 10 (layer 1 has no parameters). The last allreduce starts at 10
     * and ends at 11: 1 ms exposed; without overlap all 3 ms are. */
    const pm_model m = model3();
    const pm_net n1 = one_node(2, 0, 1048576.0 / 1e-3);
    pm_sync s = {1, 1, 1, PM_RING};
    pm_step r;
    assert_int_equal(pm_step_time(&m, &n1, &s, &r), DT_OK);
    assert_int_equal(r.nbuckets, 3);
    near(r.comm_s, 3e-3);
    near(r.step_s, 0.016 + 1e-3);
    s.overlap = 0;
    assert_int_equal(pm_step_time(&m, &n1, &s, &r), DT_OK);
    near(r.step_s, 0.016 + 3e-3);
    /* The best cap among these: the per-layer one (1 MiB) beats one bucket (0). */
    s.overlap = 1;
    const double caps[3] = {0, 1, 2};
    double best;
    assert_int_equal(pm_best_bucket(&m, &n1, &s, caps, 3, &best, &r), DT_OK);
    near(best, 1);
    near(r.step_s, 0.016 + 1e-3);
    /* A call costing 3 ms: three buckets pay it three times, one bucket (cap 0) once after 10 ms:
     * 10 + 3 + 3 = 16 against per-layer buckets' 10 + 3 + 1 (the last only; the link is busy
     * until 2 + 4 = 6, then 6 + 4 = 10 for layer 2's, then layer 0's 10 + 4 = 14). */
    pm_net slow_call = n1;
    slow_call.call_s = 3e-3;
    assert_int_equal(pm_best_bucket(&m, &slow_call, &s, caps, 3, &best, &r), DT_OK);
    near(best, 1);
    near(r.step_s, 0.006 + 0.014 + 0.001 - 0.005 + 0.004);
}

static void test_bad_layers(void **st)
{
    (void)st;
    pm_layer bad[2] = {{0.001, 0, 10}, {0.001, 20, 10}}; /* a gap at [10, 20) */
    const pm_model m = {bad, 2, 30, 4, 4, 0, 0};
    const pm_net n = one_node(2, 0, 1e9);
    const pm_sync s = {25, 1, 1, PM_RING};
    pm_step r;
    assert_int_equal(pm_step_time(&m, &n, &s, &r), DT_ERR_INVALID_ARG);
    bad[1] = (pm_layer){-1, 10, 20};
    assert_int_equal(pm_step_time(&m, &n, &s, &r), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "layer 1"));
}

/* The lines bench step prints (cmd_bench_step.c), with a layer list holding commas. */
static const char step_text[] =
    "noise before\n"
    "# dtrain bench step: model fc:64,relu,fc:10, 1 rank x batch 32, 20 timed steps after 3, SGD\n"
    "# precision    samples/s   step ms   data ms\n"
    "  fp32            2684.2     95.37      0.67     1.00\n"
    "    profile, ms per step over 10 steps (waiting for the device at each boundary): input 0.100, forward "
    "14.469, loss 0.011, backward 18.971, allreduce 51.483, check 0.000, optimizer 1.209; total 86.143\n"
    "      layer 0 (fc:64)            forward    4.266  backward    4.154\n"
    "      layer 2 (fc:10)            forward    0.063  backward    2.743\n";

static void test_read_step_profile(void **st)
{
    (void)st;
    pm_profile p;
    assert_int_equal(pm_read_step_profile(step_text, &p), DT_OK);
    assert_string_equal(p.model, "fc:64,relu,fc:10");
    assert_int_equal(p.ranks, 1);
    assert_int_equal(p.batch, 32);
    near(p.step_ms, 95.37);
    near(p.input_ms, 0.1), near(p.forward_ms, 14.469), near(p.backward_ms, 18.971), near(p.optimizer_ms, 1.209);
    assert_int_equal(p.nlayers, 3);
    near(p.bwd_ms[0], 4.154), near(p.bwd_ms[1], 0), near(p.bwd_ms[2], 2.743);
    /* Without --profile, and not bench step output at all: the message says which. */
    char noprof[400];
    snprintf(noprof, sizeof noprof, "%.*s", (int)(strstr(step_text, "    profile") - step_text), step_text);
    assert_int_equal(pm_read_step_profile(noprof, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "--profile 10"));
    assert_int_equal(pm_read_step_profile("hello\n", &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "bench step"));
}

static void test_read_allreduce(void **st)
{
    (void)st;
    const char text[] =
        "# dtrain bench allreduce: 3 ranks, engine threaded, op sum, fp32\n"
        "#       size      count    type  dtrain time(us)  algbw(GB/s)\n"
        "       65536      16384   float             93.3        0.703        0.703       0           91.4\n"
        "     1048576     262144   float            634.1        1.654        1.654       0          678.4\n"
        "# Avg bus bandwidth    : dtrain 0.946 GB/s, MPI 0.983 GB/s\n";
    pm_allreduce_rows r;
    assert_int_equal(pm_read_allreduce(text, &r), DT_OK);
    assert_int_equal(r.ranks, 3);
    assert_int_equal(r.n, 2);
    near(r.bytes[1], 1048576), near(r.secs[1], 634.1e-6);
    assert_int_equal(pm_read_allreduce("   65536 16384 float 93.3\n", &r), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "N ranks' header"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_formula),         cmocka_unit_test(test_tree_and_two_levels),
        cmocka_unit_test(test_fit_recovers),         cmocka_unit_test(test_one_bucket_no_overlap),
        cmocka_unit_test(test_fast_link_is_compute), cmocka_unit_test(test_overlap_hides),
        cmocka_unit_test(test_bad_layers),           cmocka_unit_test(test_read_step_profile),
        cmocka_unit_test(test_read_allreduce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
