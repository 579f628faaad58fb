/*
 * test_perfmodel.c - launch/perfmodel/: the allreduce formulas against their closed forms (ring,
 * tree, two levels), the ring fit recovering the alpha and bandwidth it was generated from, and
 * the step simulation on cases whose answer is known: one bucket without overlap is compute plus
 * the allreduce, an infinitely fast link is compute alone, and overlap hides what it can; the
 * engine's host model (host_model.h) against its closed forms and the engine's choice of algorithm.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/perfmodel/perfmodel.h"
#include "launch/perfmodel/perfmodel_input.h"
#include "launch/perfmodel/host_model.h"

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
    /* A profile from before bench step recorded the wait for the batch: none, and the row's data ms
     * to stand in for it. */
    assert_int_equal(p.has_data, 0);
    near(p.data_ms, 0), near(p.row_data_ms, 0.67);
    /* Today's profile line: the wait for the batch is its first phase. */
    static const char with_data[] =
        "# dtrain bench step: model mlp, 1 rank x batch 32, 20 timed steps after 3, SGD\n"
        "  fp32            2684.2     95.37      0.67     1.00\n"
        "    profile, ms per step over 10 steps (waiting for the device at each boundary): data 0.420, input 0.100, "
        "forward 14.469, loss 0.011, backward 18.971, allreduce 51.483, check 0.000, optimizer 1.209; total 86.563\n";
    assert_int_equal(pm_read_step_profile(with_data, &p), DT_OK);
    assert_int_equal(p.has_data, 1);
    near(p.data_ms, 0.42), near(p.input_ms, 0.1), near(p.forward_ms, 14.469), near(p.optimizer_ms, 1.209);
    near(p.row_data_ms, 0.67);
    assert_string_equal(p.input, ""); /* a header from before it recorded the input shape */
    /* Today's header records the input shape after the model, whose layer list holds commas. */
    static const char with_input[] =
        "# dtrain bench step: model fc:64,relu,fc:10, input 3x8x8, 2 ranks x batch 16, 20 timed steps after 3\n"
        "  fp32            2684.2     95.37      0.67     1.00\n"
        "    profile, ms per step over 10 steps (waiting for the device at each boundary): data 0.420, input 0.100, "
        "forward 14.469, loss 0.011, backward 18.971, allreduce 51.483, check 0.000, optimizer 1.209; total 86.563\n";
    assert_int_equal(pm_read_step_profile(with_input, &p), DT_OK);
    assert_string_equal(p.model, "fc:64,relu,fc:10");
    assert_string_equal(p.input, "3x8x8");
    assert_int_equal(p.ranks, 2);
    assert_int_equal(p.batch, 16);
    /* Without --profile, and not bench step output at all: the message says which. */
    char noprof[400];
    snprintf(noprof, sizeof noprof, "%.*s", (int)(strstr(step_text, "    profile") - step_text), step_text);
    assert_int_equal(pm_read_step_profile(noprof, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "--profile 10"));
    assert_int_equal(pm_read_step_profile("hello\n", &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "bench step"));
}

/* The measured step is the row's that the profile follows (bench step prints a profile after each
 * row), and output with several profiled rows (--precision fp32,bf16) is refused naming them: one
 * row's step beside another's profile is another precision's compute. */
static void test_read_step_profile_rows(void **st)
{
    (void)st;
    static const char head[] = "# dtrain bench step: model mlp, 1 rank x batch 32, 10 timed steps after 2, SGD\n"
                               "  fp32            7068.2      4.53      0.09     1.00\n";
    static const char bf16[] =
        "  bf16            5230.1      6.12      0.08     0.74\n"
        "    profile, ms per step over 5 steps (waiting for the device at each boundary): input 0.000, forward "
        "3.028, loss 0.006, backward 2.736, allreduce 0.001, check 0.000, optimizer 0.980; total 6.752\n"
        "      layer 2 (fc:1024)          forward    2.221  backward    1.999\n";
    static const char fp32_prof[] =
        "    profile, ms per step over 5 steps (waiting for the device at each boundary): input 0.000, forward "
        "1.403, loss 0.005, backward 2.087, allreduce 0.001, check 0.000, optimizer 0.937; total 4.432\n"
        "      layer 2 (fc:1024)          forward    0.814  backward    1.422\n";
    char text[2048];
    pm_profile p;
    snprintf(text, sizeof text, "%s%s", head, bf16); /* an fp32 row without a profile, then bf16's */
    assert_int_equal(pm_read_step_profile(text, &p), DT_OK);
    assert_string_equal(p.precision, "bf16");
    near(p.step_ms, 6.12), near(p.forward_ms, 3.028), near(p.bwd_ms[2], 1.999);
    snprintf(text, sizeof text, "%s%s%s", head, fp32_prof, bf16); /* bench step --precision fp32,bf16 */
    assert_int_equal(pm_read_step_profile(text, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "2 profiled rows (fp32, bf16)"));
    assert_non_null(strstr(dt_last_error(), "one --precision"));
    snprintf(text, sizeof text, "%s%s", head, fp32_prof); /* one precision: its own row */
    assert_int_equal(pm_read_step_profile(text, &p), DT_OK);
    assert_string_equal(p.precision, "fp32");
    near(p.step_ms, 4.53), near(p.forward_ms, 1.403), near(p.bwd_ms[2], 1.422);
    /* A profile before any row belongs to none. */
    snprintf(text, sizeof text, "%.*s%s", (int)(strchr(head, '\n') + 1 - head), head, fp32_prof);
    assert_int_equal(pm_read_step_profile(text, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "follows no precision row"));
    /* Times that are no times (an edited or damaged file), and a header of no ranks: refused, named,
     * rather than predicting negative or nan compute. */
    static const struct {
        const char *was, *now, *named;
    } bad[] = {{"backward 2.087", "backward -2.087", "backward -2.087 ms"},
               {"forward 1.403", "forward nan", "forward nan ms"},
               {"backward    1.422", "backward    -1e9", "backward -1e+09 ms"},
               {"4.53 ", "-4.53 ", "step -4.53 ms"},
               {"1 rank x", "0 rank x", "0 rank(s) x batch 32; both must be >= 1"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, "%s%s", head, fp32_prof);
        char *at = strstr(text, bad[i].was);
        assert_non_null(at);
        const size_t old = strlen(bad[i].was), rep = strlen(bad[i].now);
        memmove(at + rep, at + old, strlen(at + old) + 1);
        memcpy(at, bad[i].now, rep);
        assert_int_equal(pm_read_step_profile(text, &p), DT_ERR_INVALID_ARG);
        assert_non_null(strstr(dt_last_error(), bad[i].named));
    }
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
    /* A 16-bit wire's run: its times hold the conversions, so it is no fit of the link. */
    const char half[] = "# dtrain bench allreduce: 2 ranks, engine threaded, op sum, fp16\n"
                        "       65536      32768    half            120.0        0.546        0.546       0\n";
    assert_int_equal(pm_read_allreduce(half, &r), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "line 2: a row of type half, from bench allreduce --dtype fp16|bf16"));
    assert_int_equal(pm_read_allreduce("# dtrain bench allreduce: 0 ranks\n 65536 16384 float 93.3\n", &r),
                     DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "with N >= 1"));
}

/* The shaped cluster's links: 2 ranks a node, 24 MB/s and 200 us between nodes, 2 GB/s and 5 us
 * within, 10 us a message, the engine's 64000-byte segments. */
static hm_net shaped(int world, int per_node)
{
    return (hm_net){world, per_node, {5e-6, 2e9}, {200e-6, 24e6}, 10e-6, 64000};
}

static void near_rel(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want))) fail_msg("got %.17g, expected %.17g within %g", got, want, rel);
}

static void test_host_direct(void **st)
{
    (void)st;
    /* 2 x 2: a node's link carries G (W-G)/W n = n a phase, more than a rank's n/4 within: two
     * phases of n / inter_bw, each with one hop and 2 (W-1) = 6 messages. */
    const hm_net n22 = shaped(4, 2);
    assert_int_equal(hm_nodes(&n22), 2);
    const double n = 16 * 1048576.0;
    near(hm_allreduce_time(&n22, HM_DIRECT, n), 2 * (200e-6 + 6 * 10e-6 + n / 24e6));
    near_rel(hm_allreduce_time(&n22, HM_DIRECT, 1e12), 2 * 1e12 / 24e6, 1e-6);
    /* 3 x 2: 2 x 4/6 n a phase. */
    const hm_net n32 = shaped(6, 2);
    near(hm_allreduce_time(&n32, HM_DIRECT, n), 2 * (200e-6 + 10 * 10e-6 + 2.0 * 4 / 6 * n / 24e6));
    /* One node: no link between nodes, the intra alpha, (W-1)/W n a rank a phase. */
    const hm_net one = shaped(4, 8);
    assert_int_equal(hm_nodes(&one), 1);
    near(hm_allreduce_time(&one, HM_DIRECT, n), 2 * (5e-6 + 6 * 10e-6 + 3.0 / 4 * n / 2e9));
    const hm_net solo = shaped(1, 8);
    near(hm_allreduce_time(&solo, HM_DIRECT, n), 0);
    near(hm_allreduce_time(&n22, HM_DIRECT, 0), 0);
}

static void test_host_chain(void **st)
{
    (void)st;
    /* 2 x 2, ten whole segments: the first crosses 1 link and 2 shared-memory hops each way, the
     * other 9 follow one stage apart, a stage the link's s / inter_bw (c = 1 with 2 nodes). */
    const hm_net n22 = shaped(4, 2);
    const double s = 64000, seg_inter = s / 24e6;
    const double arrive = 6 * 10e-6; /* the arrival word to and from each of the 3 peers */
    const double fill = arrive + 2 * (200e-6 + seg_inter + 20e-6) + 2 * 2 * (5e-6 + s / 2e9 + 20e-6);
    near(hm_allreduce_time(&n22, HM_CHAIN, 10 * s), fill + 9 * seg_inter);
    /* A partial last segment counts as one: 10.5 segments are 11. */
    near(hm_allreduce_time(&n22, HM_CHAIN, 10.5 * s), fill + 10 * seg_inter);
    /* Huge buckets: the node's link once each way, n / inter_bw; 3 nodes: the middle node's link
     * twice, 2 n / inter_bw. */
    near_rel(hm_allreduce_time(&n22, HM_CHAIN, 1e12), 1e12 / 24e6, 1e-6);
    const hm_net n31 = shaped(3, 1);
    near_rel(hm_allreduce_time(&n31, HM_CHAIN, 1e12), 2e12 / 24e6, 1e-6);
    /* One rank a node has no hop within a node: however slow shared memory is, it does not count. */
    hm_net slow_shm = n31;
    slow_shm.intra.bw = 1e3;
    near(hm_allreduce_time(&slow_shm, HM_CHAIN, 10 * s), hm_allreduce_time(&n31, HM_CHAIN, 10 * s));
    /* A bucket below a segment is one segment of its size: the fill alone. */
    near(hm_allreduce_time(&n31, HM_CHAIN, 1000), 2 * 2 * 10e-6 + 2 * 2 * (200e-6 + 1000 / 24e6 + 20e-6));
    /* Messages as the bottleneck: at 1 ms a message each stage is 4 of them. */
    hm_net slow = n22;
    slow.msg_s = 1e-3;
    const double fill_slow = 2 * (200e-6 + seg_inter + 2e-3) + 2 * 2 * (5e-6 + s / 2e9 + 2e-3);
    near(hm_allreduce_time(&slow, HM_CHAIN, 10 * s), 6e-3 + fill_slow + 9 * 4e-3); /* 6 arrival words */
}

static void test_host_ring(void **st)
{
    (void)st;
    /* 2 x 2: 6 steps at the link's alpha, 2 (W-1)/W n at the slower bandwidth (the link). */
    const hm_net n22 = shaped(4, 2);
    const double n = 1048576.0;
    near(hm_allreduce_time(&n22, HM_RING, n), 6 * (200e-6 + 20e-6) + 1.5 * n / 24e6);
    /* One node: the intra link only. */
    const hm_net one = shaped(8, 8);
    near(hm_allreduce_time(&one, HM_RING, n), 14 * (5e-6 + 20e-6) + 14.0 / 8 * n / 2e9);
    /* A link faster than shared memory: the shared memory rules across nodes. */
    hm_net fast = n22;
    fast.inter.bw = 10e9;
    near(hm_allreduce_time(&fast, HM_RING, n), 6 * (200e-6 + 20e-6) + 1.5 * n / 2e9);
    near(hm_busbw(4, n, 1e-3), n / 1e-3 * 1.5);
    near(hm_busbw(4, n, 0), 0);
}

static void test_host_engine_pick(void **st)
{
    (void)st;
    const double mib16 = 16 * 1048576.0;
    /* 2 x 2: the chain sends 1 against direct's 2 over a node's link; 16 MiB fills its pipeline,
     * 16 KiB is below 64 KiB. */
    const hm_net n22 = shaped(4, 2);
    assert_true(hm_chain_pays(&n22));
    assert_int_equal(hm_engine_pick(&n22, mib16), HM_CHAIN);
    assert_int_equal(hm_engine_pick(&n22, 16384), HM_DIRECT);
    near(hm_allreduce_time(&n22, HM_ENGINE, mib16), hm_allreduce_time(&n22, HM_CHAIN, mib16));
    near(hm_allreduce_time(&n22, HM_ENGINE, 16384), hm_allreduce_time(&n22, HM_DIRECT, 16384));
    /* The fill rule: 2 (W-1) segments exactly take the chain, a byte less does not. */
    assert_int_equal(hm_engine_pick(&n22, 6 * 64000.0), HM_CHAIN);
    assert_int_equal(hm_engine_pick(&n22, 6 * 64000.0 - 1), HM_DIRECT);
    /* 3 x 1: the chain's 2 against direct's 4/3: direct, however large. */
    const hm_net n31 = shaped(3, 1);
    assert_false(hm_chain_pays(&n31));
    assert_int_equal(hm_engine_pick(&n31, mib16), HM_DIRECT);
    /* 3 x 2: 2 against 8/3: the chain. */
    const hm_net n32 = shaped(6, 2);
    assert_int_equal(hm_engine_pick(&n32, mib16), HM_CHAIN);
    /* One node: direct; 2 ranks: MPI_Allreduce (the ring); 1 rank: nothing. */
    const hm_net one = shaped(4, 8);
    assert_false(hm_chain_pays(&one));
    assert_int_equal(hm_engine_pick(&one, mib16), HM_DIRECT);
    const hm_net two = shaped(2, 1), solo = shaped(1, 8);
    assert_int_equal(hm_engine_pick(&two, mib16), HM_RING);
    assert_int_equal(hm_engine_pick(&solo, mib16), HM_NONE);
    near(hm_allreduce_time(&solo, HM_ENGINE, mib16), 0);
    /* 512 ranks, 8 a node: the chain pays (2 against 15.75), but 16 MiB is below its fill of
     * 2 x 511 segments (65.4 MB): direct; so is 32 MiB, and 64 MiB (67.1 MB) is above. */
    const hm_net big = {512, 8, {1e-6, 10e9}, {10e-6, 12.5e9}, 1e-6, 64000};
    assert_true(hm_chain_pays(&big));
    assert_int_equal(hm_engine_pick(&big, mib16), HM_DIRECT);
    assert_int_equal(hm_engine_pick(&big, 2 * mib16), HM_DIRECT);
    assert_int_equal(hm_engine_pick(&big, 4 * mib16), HM_CHAIN);
    assert_string_equal(hm_algo_name(HM_CHAIN), "chain");
    assert_string_equal(hm_algo_name(HM_NONE), "none");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_formula),
        cmocka_unit_test(test_tree_and_two_levels),
        cmocka_unit_test(test_fit_recovers),
        cmocka_unit_test(test_one_bucket_no_overlap),
        cmocka_unit_test(test_fast_link_is_compute),
        cmocka_unit_test(test_overlap_hides),
        cmocka_unit_test(test_bad_layers),
        cmocka_unit_test(test_read_step_profile),
        cmocka_unit_test(test_read_step_profile_rows),
        cmocka_unit_test(test_read_allreduce),
        cmocka_unit_test(test_host_direct),
        cmocka_unit_test(test_host_chain),
        cmocka_unit_test(test_host_ring),
        cmocka_unit_test(test_host_engine_pick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
