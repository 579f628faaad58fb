/*
 * test_bucket.c - the reducer's bucket planner: ranges given in backward order, caps, the small
 * first bucket, oversized ranges, one bucket for everything, ranges that are not adjacent in ready
 * order, contiguous ranges given in forward order (one bucket), plans by size alone (a cap below
 * one element holds one), the lookups, the cross-rank fingerprint, and the tiling errors (a
 * range whose end passes SIZE_MAX named by offset and count, not a wrapped end); and
 * ZeRO-1's split of a device bucket over the ranks (coll_part).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "collectives/bucket.h"
#include "collectives/coll.h"

#include <stdio.h>
#include <string.h>

/* Layers of n[l] floats laid out contiguously in forward order, given in backward order. */
static void plan(const size_t *n, int nl, double first_mb, double cap_mb, bucket_plan *p)
{
    dt_range r[16];
    size_t off = 0, total = 0;
    for (int l = 0; l < nl; l++) total += n[l];
    for (int l = 0; l < nl; l++) {
        r[nl - 1 - l] = (dt_range){off, n[l]};
        off += n[l];
    }
    assert_int_equal(bucket_plan_ranges(total, r, nl, 4, (size_t)(first_mb * 1048576), (size_t)(cap_mb * 1048576), p),
                     DT_OK);
    /* Invariants: buckets tile the buffer backward, every range in exactly one bucket. */
    size_t end = total;
    for (int b = 0; b < p->nb; b++) {
        assert_int_equal(p->b[b].off + p->b[b].n, end);
        end = p->b[b].off;
        for (int k = 0; k < p->b[b].nranges; k++) assert_int_equal(p->of_range[p->b[b].first_range + k], b);
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
    assert_int_equal(p.b[0].first_range, 0);
    assert_int_equal(p.b[0].n, 10250);
    assert_int_equal(p.b[1].nranges, 2);
    bucket_plan_free(&p);
    plan(n, 3, 1, 4, &p); /* 4 MiB caps: fc2 (4.00 MiB + fc1 would overflow) and fc1 apart */
    assert_int_equal(p.nb, 3);
    bucket_plan_free(&p);
    plan(n, 3, 0, 0, &p); /* caps of 0: one bucket for everything */
    assert_int_equal(p.nb, 1);
    assert_int_equal(p.b[0].n, 803840 + 1049600 + 10250);
    bucket_plan_free(&p);
    plan(n, 3, 1e-6, 1e-6, &p); /* tiny caps: one bucket per range, oversized ranges alone */
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
    assert_int_equal(p.b[0].nranges, 4);
    assert_int_equal(p.b[0].off, 6 * 65536);
    assert_int_equal(p.b[1].nranges, 6);
    bucket_plan_free(&p);
}

static void test_not_adjacent(void **st)
{
    (void)st;
    /* Ready order 0..: [0,10), [20,30), [10,20): the second is not adjacent to the first, so it opens
     * a bucket; the third touches the second and joins it. */
    const dt_range r[3] = {{0, 10}, {20, 10}, {10, 10}};
    bucket_plan p;
    assert_int_equal(bucket_plan_ranges(30, r, 3, 4, 0, 0, &p), DT_OK);
    assert_int_equal(p.nb, 2);
    assert_int_equal(p.b[0].off, 0);
    assert_int_equal(p.b[0].n, 10);
    assert_int_equal(p.b[1].off, 10);
    assert_int_equal(p.b[1].n, 20);
    assert_int_equal(p.of_range[2], 1);
    int near;
    assert_int_equal(bucket_plan_find_range(&p, 20, &near), 1);
    assert_int_equal(bucket_plan_find_range(&p, 25, &near), -1);
    assert_int_equal(near, 1);
    assert_int_equal(bucket_plan_bucket_at(&p, 0), 0);
    assert_int_equal(bucket_plan_bucket_at(&p, 29), 1);
    bucket_plan_free(&p);
    /* Ready in forward order (a loop that marks its layers front to back): each range starts where
     * the bucket so far ends, so all three share one bucket instead of one bucket each. */
    const dt_range f[3] = {{0, 10}, {10, 10}, {20, 10}};
    assert_int_equal(bucket_plan_ranges(30, f, 3, 4, 0, 0, &p), DT_OK);
    assert_int_equal(p.nb, 1);
    assert_int_equal(p.b[0].off, 0);
    assert_int_equal(p.b[0].n, 30);
    assert_int_equal(p.b[0].nranges, 3);
    bucket_plan_free(&p);
}

static void test_auto(void **st)
{
    (void)st;
    bucket_plan p;
    /* 1000 floats, first cap 400 bytes (100 floats), then 1200 bytes (300): 100 + 300 + 300 + 300. */
    assert_int_equal(bucket_plan_auto(1000, 4, 400, 1200, &p), DT_OK);
    assert_int_equal(p.nb, 4);
    assert_int_equal(p.b[0].off, 900);
    assert_int_equal(p.b[0].n, 100);
    assert_int_equal(p.b[3].off, 0);
    assert_int_equal(p.b[3].n, 300);
    assert_int_equal(bucket_plan_bucket_at(&p, 899), 1);
    assert_int_equal(bucket_plan_bucket_at(&p, 900), 0);
    assert_null(p.r);
    bucket_plan_free(&p);
    assert_int_equal(bucket_plan_auto(1000, 4, 0, 0, &p), DT_OK);
    assert_int_equal(p.nb, 1);
    bucket_plan_free(&p);
    /* Caps below one element still hold one: 3 buckets of 1 float for a 1-byte cap, and a first
     * bucket of 1 float before an uncapped rest for a 1-byte first cap. */
    assert_int_equal(bucket_plan_auto(3, 4, 0, 1, &p), DT_OK);
    assert_int_equal(p.nb, 3);
    for (int b = 0; b < 3; b++) assert_int_equal(p.b[b].n, 1);
    bucket_plan_free(&p);
    assert_int_equal(bucket_plan_auto(3, 4, 1, 0, &p), DT_OK);
    assert_int_equal(p.nb, 2);
    assert_int_equal(p.b[0].n, 1);
    assert_int_equal(p.b[1].n, 2);
    bucket_plan_free(&p);
    assert_int_equal(bucket_plan_auto(0, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
}

/* A first cap of 0 caps the first bucket as the others, in both planners (with ranges it once
 * meant no cap: a contiguous model became one bucket whatever bucket_mb said). Four adjacent
 * ranges of 400 bytes in ready order, cap 800 bytes: two buckets of two ranges each. */
static void test_first_cap_zero(void **st)
{
    (void)st;
    const dt_range r[4] = {{300, 100}, {200, 100}, {100, 100}, {0, 100}};
    bucket_plan p, a;
    assert_int_equal(bucket_plan_ranges(400, r, 4, 4, 0, 800, &p), DT_OK);
    assert_int_equal(bucket_plan_auto(400, 4, 0, 800, &a), DT_OK);
    assert_int_equal(p.nb, 2);
    assert_int_equal(a.nb, 2);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(p.b[k].off, a.b[k].off);
        assert_int_equal(p.b[k].n, a.b[k].n);
        assert_int_equal(p.b[k].n, 200);
    }
    bucket_plan_free(&p);
    bucket_plan_free(&a);
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
    bucket_plan p;
    const dt_range gap[2] = {{0, 100}, {150, 10}};
    assert_int_equal(bucket_plan_ranges(160, gap, 2, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "[100, 150)"));
    const dt_range overlap[2] = {{0, 100}, {90, 70}};
    assert_int_equal(bucket_plan_ranges(160, overlap, 2, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "overlap"));
    const dt_range past[2] = {{0, 100}, {100, 70}};
    assert_int_equal(bucket_plan_ranges(160, past, 2, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "range 1 [100, 170) runs past the buffer of 160"));
    /* An end past SIZE_MAX is not printed wrapped ([50, 50) it was): the offset and count are. */
    const dt_range huge[2] = {{0, 50}, {50, SIZE_MAX - 10}};
    assert_int_equal(bucket_plan_ranges(160, huge, 2, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
    char want[128];
    snprintf(want, sizeof want,
             "range 1 (offset 50, count %zu) runs past the buffer of 160 elements: its end is past "
             "SIZE_MAX",
             (size_t)SIZE_MAX - 10);
    if (!strstr(dt_last_error(), want)) fail_msg("\"%s\" lacks \"%s\"", dt_last_error(), want);
    const dt_range short_[1] = {{0, 100}};
    assert_int_equal(bucket_plan_ranges(160, short_, 1, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "[100, 160)"));
    const dt_range empty[2] = {{0, 160}, {160, 0}};
    assert_int_equal(bucket_plan_ranges(160, empty, 2, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
    assert_int_equal(bucket_plan_ranges(160, gap, 0, 4, 0, 0, &p), DT_ERR_INVALID_ARG);
}

/* coll_part: the parts tile [0, n) in rank order; every rank but the last has n / W, the last the
 * rest (n / W + n % W): equal blocks for ncclReduceScatter, a tail under W on the last rank. */
static void test_coll_part(void **st)
{
    (void)st;
    const size_t ns[] = {0, 1, 2, 3, 7, 8, 1000, 100003};
    for (int w = 1; w <= 9; w++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const size_t n = ns[k];
            size_t at = 0;
            for (int j = 0; j < w; j++) {
                size_t off, cnt;
                coll_part(n, j, w, &off, &cnt);
                assert_int_equal(off, at);
                assert_int_equal(cnt, j < w - 1 ? n / (size_t)w : n - (size_t)(w - 1) * (n / (size_t)w));
                at += cnt;
            }
            assert_int_equal(at, n);
        }
    size_t off, cnt;
    coll_part(10, 2, 3, &off, &cnt); /* blocks of 3; the last rank also the 10th */
    assert_int_equal(off, 6);
    assert_int_equal(cnt, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_like),       cmocka_unit_test(test_first_bucket_small),
        cmocka_unit_test(test_not_adjacent),   cmocka_unit_test(test_auto),
        cmocka_unit_test(test_first_cap_zero), cmocka_unit_test(test_hash_and_errors),
        cmocka_unit_test(test_coll_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
