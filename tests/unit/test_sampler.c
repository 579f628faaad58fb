/*
 * test_sampler.c - the data position and DistributedSampler properties (runtime/data/sampler.h,
 * through dt_dataset): over an epoch the multiset of sample indices seen by all ranks is exactly
 * the dataset (plus the wrap-around padding, or minus the dropped tail), for 1, 2 and 3 ranks,
 * and across a stop/resume that changes the rank count mid-epoch; epochs reshuffle; file order
 * is (i * W + r) * B...; augmentation does not depend on who makes the sample. Which samples the
 * statistics pass of --normalize standard reads (dataset_stats_stride).
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

/* Sample src (c x h x w) shifted by (dy, dx) with zeros where the padded source lies, flipped
 * first when flip: what --augment crop:P,flip means, one pixel at a time. */
static void crop_flip_ref(const float *src, float *dst, int c, int h, int w, int dy, int dx, int flip)
{
    for (int k = 0; k < c; k++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const int sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
                dst[((size_t)k * h + y) * w + x] =
                    sy >= 0 && sy < h && sx >= 0 && sx < w ? src[((size_t)k * h + sy) * w + sx] : 0.0f;
            }
}

/* Every augmented sample is one of the (2P + 1)^2 x 2 crops and flips of its plain read, exactly;
 * over 64 samples both flips and several shifts come up; a pad wider than the image (P 9 on 8x8)
 * shifts whole rows and columns out. */
static void test_augment_is_a_crop_and_flip(void **state)
{
    (void)state;
    enum { C = 3, H = 8, W = 8, N = 64, PER = C * H * W };
    for (int P = 2; P <= 9; P += 7) {
        dt_data_config c;
        dt_data_defaults(&c);
        c.normalize = DT_NORMALIZE_NONE;
        c.seed = 11;
        dt_dataset *plain, *aug;
        assert_int_equal(dt_synthetic_open(C, H, W, 5, N, 9, &c, &plain), DT_OK);
        c.crop_pad = P, c.flip = 1;
        assert_int_equal(dt_synthetic_open(C, H, W, 5, N, 9, &c, &aug), DT_OK);
        static float ref[N * PER], got[N * PER], cand[PER];
        int32_t lref[N], lgot[N];
        assert_int_equal(dt_dataset_batch(plain, 0, 0, 1, N, ref, lref), DT_OK);
        assert_int_equal(dt_dataset_batch(aug, 0, 0, 1, N, got, lgot), DT_OK);
        int flips = 0, shifts = 0;
        for (int j = 0; j < N; j++) {
            int found = 0;
            for (int f = 0; f <= 1 && !found; f++)
                for (int dy = -P; dy <= P && !found; dy++)
                    for (int dx = -P; dx <= P && !found; dx++) {
                        crop_flip_ref(ref + (size_t)j * PER, cand, C, H, W, dy, dx, f);
                        if (!memcmp(cand, got + (size_t)j * PER, sizeof cand)) {
                            found = 1;
                            flips += f;
                            shifts += dx != 0;
                        }
                    }
            if (!found) fail_msg("pad %d: augmented sample %d is no crop and flip of its plain read", P, j);
        }
        assert_true(flips > 0 && flips < N);
        assert_true(shifts > 0);
        dt_dataset_free(plain);
        dt_dataset_free(aug);
    }
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
        cmocka_unit_test(test_augment_is_a_crop_and_flip),
        cmocka_unit_test(test_epoch_past_long_max),
        cmocka_unit_test(test_stats_stride),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
