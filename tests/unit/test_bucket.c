/*
 * test_bucket.c - the gradient bucket planner: backward order, caps, the small first bucket,
 * oversized layers, one bucket for everything, contiguity, and the cross-rank fingerprint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bucket.h"

#include <string.h>

/* Layers of n[l] floats laid out contiguously in forward order. */
static void plan(const size_t *n, int nl, double first_mb, double cap_mb, bucket_plan *p)
{
    size_t off[16];
    off[0] = 0;
    for (int l = 1; l < nl; l++) off[l] = off[l - 1] + n[l - 1];
    assert_int_equal(bucket_plan_build(off, n, nl, 4, (size_t)(first_mb * 1048576), (size_t)(cap_mb * 1048576), p),
                     DT_OK);
    /* Invariants: buckets tile the buffer backward, every layer in exactly one bucket. */
    size_t end = off[nl - 1] + n[nl - 1];
    for (int b = 0; b < p->nb; b++) {
        assert_int_equal(p->b[b].off + p->b[b].n, end);
        end = p->b[b].off;
        for (int k = 0; k < p->b[b].nlayers; k++) assert_int_equal(p->of_layer[p->b[b].first_layer + k], b);
    }
    assert_int_equal(end, 0);
}

static void test_mlp_like(void **st)
{
    (void)st;
    /* The mlp: 803840, 1049600, 10250 floats (3.07, 4.00, 0.04 MiB). */
    const size_t n[3] = {803840, 1049600, 10250};
    bucket_plan p;
    plan(n, 3, 1, 25, &p); /* defaults: fc3 alone (first bucket), then fc2 + fc1 */
    assert_int_equal(p.nb, 2);
    assert_int_equal(p.b[0].first_layer, 2);
    assert_int_equal(p.b[0].n, 10250);
    assert_int_equal(p.b[1].nlayers, 2);
    bucket_plan_free(&p);
    plan(n, 3, 1, 4, &p); /* 4 MiB caps: fc2 (4.00 MiB + fc1 would overflow) and fc1 apart */
    assert_int_equal(p.nb, 3);
    bucket_plan_free(&p);
    plan(n, 3, 0, 0, &p); /* caps of 0: one bucket for everything */
    assert_int_equal(p.nb, 1);
    assert_int_equal(p.b[0].n, 803840 + 1049600 + 10250);
    bucket_plan_free(&p);
    plan(n, 3, 1e-6, 1e-6, &p); /* tiny caps: one bucket per layer, oversized layers alone */
    assert_int_equal(p.nb, 3);
    bucket_plan_free(&p);
}

static void test_first_bucket_small(void **st)
{
    (void)st;
    /* 10 layers of 0.25 MiB: first bucket 1 MiB (4 layers), then 2 MiB caps (8 layers: only 6 left). */
    size_t n[10];
    for (int i = 0; i < 10; i++) n[i] = 65536;
    bucket_plan p;
    plan(n, 10, 1, 2, &p);
    assert_int_equal(p.nb, 2);
    assert_int_equal(p.b[0].nlayers, 4);
    assert_int_equal(p.b[0].first_layer, 6);
    assert_int_equal(p.b[1].nlayers, 6);
    bucket_plan_free(&p);
}

static void test_hash_and_errors(void **st)
{
    (void)st;
    const size_t n[3] = {100, 200, 300};
    bucket_plan a, b, c;
    plan(n, 3, 0, 0, &a);
    plan(n, 3, 0, 0, &b);
    plan(n, 3, 1e-6, 1e-6, &c);
    assert_true(bucket_plan_hash(&a) == bucket_plan_hash(&b));
    assert_true(bucket_plan_hash(&a) != bucket_plan_hash(&c));
    bucket_plan_free(&a);
    bucket_plan_free(&b);
    bucket_plan_free(&c);
    size_t off[2] = {0, 150}, cnt[2] = {100, 10}; /* a gap: not contiguous */
    bucket_plan p;
    assert_int_equal(bucket_plan_build(off, cnt, 2, 4, 0, 0, &p), DT_ERR_INTERNAL);
    assert_int_equal(bucket_plan_build(off, cnt, 0, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_like),
        cmocka_unit_test(test_first_bucket_small),
        cmocka_unit_test(test_hash_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
