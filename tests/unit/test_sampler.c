/*
 * test_sampler.c - the data position and DistributedSampler properties (runtime/data/sampler.h,
 * through dt_dataset): over an epoch the multiset of sample indices seen by all ranks is exactly
 * the dataset (plus the wrap-around padding, or minus the dropped tail), for 1, 2 and 3 ranks,
 * and across a stop/resume that changes the rank count mid-epoch; epochs reshuffle; file order
 * is (i * W + r) * B...; augmentation does not depend on who makes the sample, and is torchvision's
 * RandomCrop(padding) and RandomHorizontalFlip; the 6 orders of 3 samples equally likely; the
 * bounds (2^32 samples, an anchor offset, a rank). Which samples the statistics pass of --normalize
 * standard reads (dataset_stats_stride).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dtrain.h"
#include "runtime/data/dataset.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Counts per sample of the steps [s0, s1) at world W and batch B, by every rank. */
static void take(ds_sampler *s, long s0, long s1, int W, int B, int *count)
{
    uint32_t idx[64];
    long epoch;
    for (long st = s0; st < s1; st++)
        for (int r = 0; r < W; r++) {
            assert_int_equal(sampler_batch(s, st, r, W, B, idx, &epoch), DT_OK);
            for (int j = 0; j < B; j++) count[idx[j]]++;
        }
}

static void test_epoch_is_the_dataset(void **state)
{
    (void)state;
    const size_t n = 101;
    for (int W = 1; W <= 3; W++)
        for (int drop = 0; drop <= 1; drop++) {
            ds_sampler s;
            assert_int_equal(sampler_init(&s, n, 7, 1, drop), DT_OK);
            const int B = 4;
            const size_t g = (size_t)W * B, per = sampler_steps_per_epoch(&s, g);
            assert_int_equal(per, drop ? n / g : (n + g - 1) / g);
            int count[101] = {0};
            take(&s, 0, (long)per, W, B, count);
            size_t seen = 0, twice = 0, never = 0;
            for (size_t i = 0; i < n; i++) {
                seen += count[i] > 0;
                twice += count[i] > 1;
                never += count[i] == 0;
                assert_true(count[i] <= 2);
            }
            if (drop) {
                assert_int_equal(twice, 0); /* no sample twice, the tail left out */
                assert_int_equal(never, n - per * g);
            } else {
                assert_int_equal(never, 0); /* every sample, and the padding wraps */
                assert_int_equal(twice, per * g - n);
            }
            /* The next epoch starts at offset 0 with another order. */
            long e;
            size_t off;
            assert_int_equal(sampler_locate(&s, (long)per, g, &e, &off), DT_OK);
            assert_int_equal(e, 1);
            assert_int_equal(off, 0);
            assert_true(sampler_at(&s, 0, 0) != sampler_at(&s, 1, 0) || sampler_at(&s, 0, 1) != sampler_at(&s, 1, 1));
            sampler_free(&s);
        }
}

/* A run of 2 ranks stops mid-epoch; it resumes on 3 ranks from the anchor the checkpoint holds:
 * the epoch is still exactly the dataset (n a multiple of neither global batch: the padding only
 * at the end). */
static void test_resume_on_other_ranks(void **state)
{
    (void)state;
    const size_t n = 120;
    const int B = 5;
    for (int W2 = 1; W2 <= 3; W2++) {
        ds_sampler a, b;
        assert_int_equal(sampler_init(&a, n, 3, 1, 0), DT_OK);
        assert_int_equal(sampler_init(&b, n, 3, 1, 0), DT_OK);
        int count[120] = {0};
        take(&a, 0, 7, 2, B, count); /* 7 steps of 10 */
        long e;
        size_t off;
        assert_int_equal(sampler_locate(&a, 7, 2 * B, &e, &off), DT_OK);
        assert_int_equal(e, 0);
        assert_int_equal(off, 70);
        assert_int_equal(sampler_set_anchor(&b, 7, e, off), DT_OK);
        /* 50 left: ceil(50 / (W2 * 5)) more steps; the last one pads past 120. */
        const size_t g2 = (size_t)W2 * B, left = (50 + g2 - 1) / g2;
        take(&b, 7, 7 + (long)left, W2, B, count);
        size_t twice = 0;
        for (size_t i = 0; i < n; i++) {
            assert_true(count[i] >= 1);
            twice += count[i] == 2;
        }
        assert_int_equal(twice, left * g2 - 50);
        assert_int_equal(sampler_locate(&b, 7 + (long)left, g2, &e, &off), DT_OK);
        assert_int_equal(e, 1);
        assert_int_equal(off, 0);
        /* Steps before the anchor are refused, with the reason. */
        uint32_t idx[8];
        assert_int_equal(sampler_batch(&b, 6, 0, W2, B, idx, &e), DT_ERR_INVALID_ARG);
        sampler_free(&a);
        sampler_free(&b);
    }
}

/* An anchor at an epoch near LONG_MAX (a crafted checkpoint's data block): the steps of the epochs
 * a long cannot count are refused, not given a wrapped, negative epoch. */
static void test_epoch_past_long_max(void **state)
{
    (void)state;
    ds_sampler s;
    assert_int_equal(sampler_init(&s, 10, 3, 1, 0), DT_OK);
    assert_int_equal(sampler_set_anchor(&s, 0, LONG_MAX - 1, 0), DT_OK);
    long e;
    size_t off;
    assert_int_equal(sampler_locate(&s, 9, 1, &e, &off), DT_OK); /* still the anchor's epoch */
    assert_int_equal(e, LONG_MAX - 1);
    assert_int_equal(sampler_locate(&s, 10, 1, &e, &off), DT_OK); /* the last a long counts */
    assert_int_equal(e, LONG_MAX);
    assert_int_equal(sampler_locate(&s, 20, 1, &e, &off), DT_ERR_INVALID_ARG);
    uint32_t idx[1];
    assert_int_equal(sampler_batch(&s, 25, 0, 1, 1, idx, &e), DT_ERR_INVALID_ARG);
    sampler_free(&s);
}

/* Shuffle off: batch i of rank r is samples (i * W + r) * B ... */
static void test_file_order(void **state)
{
    (void)state;
    ds_sampler s;
    assert_int_equal(sampler_init(&s, 50, 1, 0, 0), DT_OK);
    uint32_t idx[4];
    long e;
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 3; r++) {
            assert_int_equal(sampler_batch(&s, i, r, 3, 4, idx, &e), DT_OK);
            for (int j = 0; j < 4; j++) assert_int_equal(idx[j], (uint32_t)(((i * 3 + r) * 4 + j) % 50));
        }
    sampler_free(&s);
}

/* Augmentation is drawn from (seed, epoch, index): the same sample at the same epoch is the same
 * whether it comes in rank 0's batch of a 1-rank run or rank 1's of a 2-rank run. */
static void test_augment_independent_of_rank(void **state)
{
    (void)state;
    dt_data_config c;
    dt_data_defaults(&c);
    c.normalize = DT_NORMALIZE_NONE;
    c.crop_pad = 2, c.flip = 1, c.seed = 5;
    dt_dataset *d;
    assert_int_equal(dt_synthetic_open(1, 8, 8, 3, 16, 9, &c, &d), DT_OK);
    float one[16 * 64], two[8 * 64];
    int32_t l1[16], l2[8];
    assert_int_equal(dt_dataset_batch(d, 0, 0, 1, 16, one, l1), DT_OK);
    assert_int_equal(dt_dataset_batch(d, 0, 1, 2, 8, two, l2), DT_OK);
    assert_memory_equal(one + 8 * 64, two, sizeof two);
    assert_memory_equal(l1 + 8, l2, sizeof l2);
    /* And it changes the images: some sample differs from its plain read. */
    dt_dataset *plain;
    c.crop_pad = 0, c.flip = 0;
    assert_int_equal(dt_synthetic_open(1, 8, 8, 3, 16, 9, &c, &plain), DT_OK);
    float ref[16 * 64];
    int32_t lref[16];
    assert_int_equal(dt_dataset_batch(plain, 0, 0, 1, 16, ref, lref), DT_OK);
    assert_memory_equal(lref, l1, sizeof lref); /* the same samples, in the same order */
    assert_true(memcmp(ref, one, sizeof ref) != 0);
    dt_dataset_free(d);
    dt_dataset_free(plain);
}

/* The sampler's bounds: 2^32 samples and no more (indices are uint32), a dataset that fills one
 * drop_last step exactly, an anchor offset inside the dataset, a rank inside the world. */
static void test_bounds(void **state)
{
    (void)state;
    ds_sampler s;
    assert_int_equal(sampler_init(&s, (size_t)UINT32_MAX + 1, 1, 0, 0), DT_OK);
    sampler_free(&s);
    assert_int_equal(sampler_init(&s, (size_t)UINT32_MAX + 2, 1, 0, 0), DT_ERR_INVALID_ARG);
    assert_int_equal(sampler_init(&s, 8, 1, 1, 1), DT_OK);
    long e;
    size_t off;
    assert_int_equal(sampler_steps_per_epoch(&s, 8), 1);
    assert_int_equal(sampler_locate(&s, 3, 8, &e, &off), DT_OK);
    assert_int_equal(e, 3);
    assert_int_equal(sampler_locate(&s, 0, 9, &e, &off), DT_ERR_INVALID_ARG);
    assert_int_equal(sampler_set_anchor(&s, 0, 0, 7), DT_OK);
    assert_int_equal(sampler_set_anchor(&s, 0, 0, 8), DT_ERR_INVALID_ARG);
    uint32_t idx[4];
    assert_int_equal(sampler_batch(&s, 0, 1, 2, 4, idx, &e), DT_OK);
    assert_int_equal(sampler_batch(&s, 0, 2, 2, 4, idx, &e), DT_ERR_INVALID_ARG);
    sampler_free(&s);
}

/* Every order of 3 samples comes about equally often over the epochs (Fisher-Yates: 6 orders;
 * a shuffle that stops a swap early or never leaves a sample in place makes fewer). */
static void test_orders_uniform(void **state)
{
    (void)state;
    ds_sampler s;
    assert_int_equal(sampler_init(&s, 3, 11, 1, 0), DT_OK);
    int seen[27] = {0};
    for (long e = 0; e < 600; e++) seen[sampler_at(&s, e, 0) * 9 + sampler_at(&s, e, 1) * 3 + sampler_at(&s, e, 2)]++;
    const int orders[6] = {0 * 9 + 1 * 3 + 2, 0 * 9 + 2 * 3 + 1, 1 * 9 + 0 * 3 + 2,
                           1 * 9 + 2 * 3 + 0, 2 * 9 + 0 * 3 + 1, 2 * 9 + 1 * 3 + 0};
    for (int k = 0; k < 6; k++)
        if (seen[orders[k]] < 60 || seen[orders[k]] > 140)
            fail_msg("order %d came %d times in 600 epochs (100 expected)", orders[k], seen[orders[k]]);
    sampler_free(&s);
}

/* Each augmented sample is torchvision's RandomCrop(padding=P) then RandomHorizontalFlip of the
 * plain one: zero-padded by P, cut at an offset 0..2P in each direction, then mirrored or not;
 * every offset comes about, and the flip about half the time. */
static float torch_aug(const float *src, int H, int W, int P, int top, int left, int flip, int y, int x)
{
    const int xx = flip ? W - 1 - x : x; /* the flip is of the crop */
    const int sy = y + top - P, sx = xx + left - P;
    return sy >= 0 && sy < H && sx >= 0 && sx < W ? src[sy * W + sx] : 0.0f;
}

static void test_augment_is_torchvision(void **state)
{
    (void)state;
    enum { N = 300, H = 6, W = 5, P = 1 };
    dt_data_config c;
    dt_data_defaults(&c);
    c.normalize = DT_NORMALIZE_NONE, c.shuffle = 0, c.seed = 3;
    dt_dataset *plain, *aug;
    assert_int_equal(dt_synthetic_open(1, H, W, 3, N, 9, &c, &plain), DT_OK);
    c.crop_pad = P, c.flip = 1;
    assert_int_equal(dt_synthetic_open(1, H, W, 3, N, 9, &c, &aug), DT_OK);
    static float a[N * H * W], b[N * H * W];
    int32_t la[N], lb[N];
    assert_int_equal(dt_dataset_batch(plain, 0, 0, 1, N, a, la), DT_OK);
    assert_int_equal(dt_dataset_batch(aug, 0, 0, 1, N, b, lb), DT_OK);
    int tops[2 * P + 1] = {0}, lefts[2 * P + 1] = {0}, flips = 0;
    for (int i = 0; i < N; i++) {
        const float *src = a + i * H * W, *got = b + i * H * W;
        int found = 0;
        for (int t = 0; t <= 2 * P && !found; t++)
            for (int l = 0; l <= 2 * P && !found; l++)
                for (int f = 0; f <= 1 && !found; f++) {
                    int same = 1;
                    for (int y = 0; y < H && same; y++)
                        for (int x = 0; x < W && same; x++)
                            same = got[y * W + x] == torch_aug(src, H, W, P, t, l, f, y, x);
                    if (same) found = 1, tops[t]++, lefts[l]++, flips += f;
                }
        if (!found) fail_msg("sample %d is no crop of padding %d and flip of its plain read", i, P);
    }
    for (int k = 0; k <= 2 * P; k++)
        if (!tops[k] || !lefts[k]) fail_msg("crop offset %d never drawn (top %d, left %d times)", k, tops[k], lefts[k]);
    if (flips < N * 35 / 100 || flips > N * 65 / 100) fail_msg("%d flips in %d samples", flips, N);
    dt_dataset_free(plain);
    dt_dataset_free(aug);
}

/* A pad wider than the image (9 on 8x8, 3 channels) shifts whole rows and columns out: every
 * augmented sample is still one of torchvision's crops and flips of its plain read, channel by
 * channel, and some are shifted. */
static void test_augment_wide_pad(void **state)
{
    (void)state;
    enum { C = 3, H = 8, W = 8, N = 64, P = 9, PER = C * H * W };
    dt_data_config c;
    dt_data_defaults(&c);
    c.normalize = DT_NORMALIZE_NONE, c.seed = 11;
    dt_dataset *plain, *aug;
    assert_int_equal(dt_synthetic_open(C, H, W, 5, N, 9, &c, &plain), DT_OK);
    c.crop_pad = P, c.flip = 1;
    assert_int_equal(dt_synthetic_open(C, H, W, 5, N, 9, &c, &aug), DT_OK);
    static float ref[N * PER], got[N * PER];
    int32_t lref[N], lgot[N];
    assert_int_equal(dt_dataset_batch(plain, 0, 0, 1, N, ref, lref), DT_OK);
    assert_int_equal(dt_dataset_batch(aug, 0, 0, 1, N, got, lgot), DT_OK);
    int shifted = 0;
    for (int j = 0; j < N; j++) {
        int found = 0;
        for (int t = 0; t <= 2 * P && !found; t++)
            for (int l = 0; l <= 2 * P && !found; l++)
                for (int f = 0; f <= 1 && !found; f++) {
                    int same = 1;
                    for (int k = 0; k < C && same; k++)
                        for (int y = 0; y < H && same; y++)
                            for (int x = 0; x < W && same; x++)
                                same = got[(size_t)j * PER + (k * H + y) * W + x] ==
                                       torch_aug(ref + (size_t)j * PER + k * H * W, H, W, P, t, l, f, y, x);
                    if (same) found = 1, shifted += l != P;
                }
        if (!found) fail_msg("pad %d: augmented sample %d is no crop and flip of its plain read", P, j);
    }
    assert_true(shifted > 0);
    dt_dataset_free(plain);
    dt_dataset_free(aug);
}

static void test_stats_stride(void **state)
{
    (void)state;
    /* MNIST, CIFAR-10 and a small .dts: every sample, as torchvision's figures are computed. */
    assert_int_equal(dataset_stats_stride("idx", 60000, 784), 1);
    assert_int_equal(dataset_stats_stride("cifar10", 50000, 3072), 1);
    assert_int_equal(dataset_stats_stride("dts", 200000, 192), 1);
    /* An image folder: at most 20000 decodes. */
    assert_int_equal(dataset_stats_stride("imagefolder", 20000, 150528), 1);
    assert_int_equal(dataset_stats_stride("imagefolder", 1281167, 150528), 65);
    /* A .dts of ImageNet at 224 (193 GB) under --holdout: 20000 samples, not every byte on every
     * rank; the same past 2^30 values in small samples. */
    assert_int_equal(dataset_stats_stride("dts", 1281167, 150528), 65);
    assert_int_equal(dataset_stats_stride("dts", 8000000, 192), 400);
    assert_int_equal(dataset_stats_stride("dts", (1u << 30) / 192, 192), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_is_the_dataset),
        cmocka_unit_test(test_resume_on_other_ranks),
        cmocka_unit_test(test_file_order),
        cmocka_unit_test(test_augment_independent_of_rank),
        cmocka_unit_test(test_epoch_past_long_max),
        cmocka_unit_test(test_stats_stride),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_orders_uniform),
        cmocka_unit_test(test_augment_is_torchvision),
        cmocka_unit_test(test_augment_wide_pad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
