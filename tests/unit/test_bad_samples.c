/*
 * test_bad_samples.c - the pass of `dtrain data verify` (ds_find_bad_samples in stats.c) and the
 * opens that leave labels to it (ds_open_opts.check_on_read): every bad sample of a split is
 * counted and listed in index order, the same list whatever the thread count, the first keep of
 * them when keep is set; out of memory stops the pass. A .dts, an IDX directory and a CIFAR-10 file
 * with several bad labels, refused at the first by a plain open, open with check_on_read and name
 * every one; an IDX file whose bad labels leave fewer than 2 classes is refused saying so. Each
 * calloc of the pass failing in turn (this test wraps calloc, tests/CMakeLists.txt) is an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/status.h"
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "runtime/data/stats.h"
#include "tmp_dir.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int setup(void **st)
{
    (void)st;
    return tmp_dir_make(dir, sizeof dir, "dtrain_bad_samples");
}

static int teardown(void **st)
{
    (void)st;
    return tmp_dir_remove(dir);
}

/* ------------------------------------------------- a split with bad samples at known places */

#define N 1000
#define CLASSES 5

/* What is wrong with sample i: 0 nothing, 1 its read fails, 2 its label is CLASSES, 3 a value is
 * NaN, 4 its read runs out of memory (only when nomem_at is i). */
static size_t nomem_at = SIZE_MAX;
static int bad_kind(size_t i)
{
    if (i == nomem_at) return 4;
    return i % 97 == 3 ? 1 : i % 101 == 50 ? 2 : i % 103 == 7 ? 3 : 0;
}

static dt_status odd_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const int k = bad_kind(i);
    if (k == 1) return status_set_error(DT_ERR_CORRUPT, "sample %zu cannot be decoded", i);
    if (k == 4) return status_set_error(DT_ERR_NOMEM, "out of memory decoding sample %zu", i);
    for (int j = 0; j < s->c; j++) x[j] = (float)(i + (size_t)j);
    if (k == 3) x[1] = NAN;
    *label = k == 2 ? CLASSES : (int32_t)(i % CLASSES);
    return DT_OK;
}

static const ds_ops odd_ops = {odd_read, NULL};

static ds_split odd_split(void)
{
    ds_split s = {.ops = &odd_ops, .count = N, .c = 3, .h = 1, .w = 1, .classes = CLASSES};
    snprintf(s.source, sizeof s.source, "odd");
    return s;
}

static void test_every_bad_sample(void **st)
{
    (void)st;
    nomem_at = SIZE_MAX;
    const ds_split s = odd_split();
    size_t want[N], nwant = 0;
    for (size_t i = 0; i < N; i++)
        if (bad_kind(i)) want[nwant++] = i;
    assert_true(nwant > 25); /* more than one thread's range holds some, more than a keep of 5 */
    ds_bad_samples one;
    assert_int_equal(ds_find_bad_samples(&s, 1, 0, &one), DT_OK);
    assert_int_equal(one.count, nwant);
    assert_int_equal(one.listed, nwant);
    for (size_t k = 0; k < nwant; k++) {
        assert_int_equal(one.items[k].index, want[k]);
        char tag[64];
        snprintf(tag, sizeof tag, "sample %zu ", want[k]);
        if (!strstr(one.items[k].why, tag)) fail_msg("entry %zu: \"%s\" lacks \"%s\"", k, one.items[k].why, tag);
        const int kind = bad_kind(want[k]);
        assert_non_null(strstr(one.items[k].why, kind == 1   ? "cannot be decoded"
                                                 : kind == 2 ? "is outside 0 to 4"
                                                             : "is nan"));
    }
    /* The same list whatever the thread count; keep cuts it to its first entries, not the count. */
    const int threads[] = {0, 2, 3, 4, 7, 64};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (size_t keep = 0; keep <= 5; keep += 5) {
            ds_bad_samples b;
            assert_int_equal(ds_find_bad_samples(&s, threads[t], keep, &b), DT_OK);
            assert_int_equal(b.count, nwant);
            assert_int_equal(b.listed, keep ? keep : nwant);
            for (size_t k = 0; k < b.listed; k++) {
                assert_int_equal(b.items[k].index, one.items[k].index);
                assert_int_equal(b.items[k].status, one.items[k].status);
                assert_string_equal(b.items[k].why, one.items[k].why);
            }
            ds_bad_samples_free(&b);
        }
    ds_bad_samples_free(&one);
    /* The statistics pass itself still stops at the first (data info, --normalize standard). */
    ds_stats stats;
    size_t first = 0;
    assert_int_equal(ds_compute_stats_at(&s, 4, &stats, &first), DT_ERR_CORRUPT);
    assert_int_equal(first, want[0]);
}

/* ------------------------------------------ the statistics of a subset, on the readers' threads */

/* Which samples were read, and whether off the caller's thread (each sample by one thread). */
static unsigned char pick_reads[N], pick_off_main[N];
static pthread_t pick_main;

static dt_status pick_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    pick_reads[i]++;
    pick_off_main[i] = !pthread_equal(pthread_self(), pick_main);
    if (i % 97 == 3) return status_set_error(DT_ERR_CORRUPT, "sample %zu cannot be decoded", i);
    for (int j = 0; j < s->c; j++) x[j] = (float)(i + (size_t)j);
    *label = (int32_t)(i % CLASSES);
    return DT_OK;
}

static const ds_ops pick_ops = {pick_read, NULL};

/* A holdout's training part (900 of the 1000 in a shuffled order) every 2nd, as --normalize
 * standard takes it, in its fixed blocks: exactly those samples are read, on more threads than the
 * caller's with 4 (the start-up of a run over 20000 images), the undecodable one left out (a
 * failure without skip_corrupt, naming the lowest), and the partials of all the blocks on 4
 * threads the same bits as those of 3 ranges read apart on 1 thread each (the ranks' shares), so
 * the merged figures are too, and they are the samples' figures. */
static void test_stats_blocks(void **st)
{
    (void)st;
    ds_split s = {.ops = &pick_ops, .count = N, .c = 2, .h = 1, .w = 1, .classes = CLASSES};
    snprintf(s.source, sizeof s.source, "pick");
    static uint32_t idx[N];
    for (size_t k = 0; k < N; k++) idx[k] = (uint32_t)(k * 7 % N);
    const ds_stats_pick pick = {.idx = idx, .n = 900, .stride = 2, .skip_corrupt = 1};
    const size_t nb = ds_stats_nblocks(&pick), width = DS_STATS_BLOCK_WIDTH(2);
    assert_int_equal(nb, (450 + DS_STATS_BLOCK - 1) / DS_STATS_BLOCK);
    double *whole = calloc(nb * width, sizeof *whole), *split = calloc(nb * width, sizeof *split);
    assert_non_null(whole);
    assert_non_null(split);
    memset(pick_reads, 0, sizeof pick_reads);
    memset(pick_off_main, 0, sizeof pick_off_main);
    pick_main = pthread_self();
    assert_int_equal(ds_stats_blocks(&s, &pick, 0, nb, 4, whole, NULL), DT_OK);
    size_t off_main = 0;
    for (size_t i = 0; i < N; i++) off_main += pick_off_main[i];
    assert_true(off_main > 0);
    const size_t cut[4] = {0, nb / 3, 2 * nb / 3, nb};
    for (int r = 0; r < 3; r++)
        assert_int_equal(ds_stats_blocks(&s, &pick, cut[r], cut[r + 1], 1, split + cut[r] * width, NULL), DT_OK);
    assert_memory_equal(whole, split, nb * width * sizeof *whole);
    double sum = 0, sq = 0, n = 0;
    for (size_t k = 0; k < N; k++) {
        const uint32_t i = idx[k];
        const int picked = k < 900 && k % 2 == 0;
        if (pick_reads[i] != 2 * picked) fail_msg("sample %u read %d times, want %d", i, pick_reads[i], 2 * picked);
        if (picked && i % 97 != 3) sum += i, sq += (double)i * i, n++;
    }
    double mean[2], std[2];
    ds_stats_blocks_merge(whole, nb, 2, 1, mean, std);
    const double m = sum / n, sd = sqrt(sq / n - m * m);
    assert_true(fabs(mean[0] - m) < 1e-6 && fabs(mean[1] - (m + 1)) < 1e-6);
    assert_true(fabs(std[0] - sd) < 1e-6 && fabs(std[1] - sd) < 1e-6);
    const ds_stats_pick strict = {.idx = idx, .n = 900, .stride = 2};
    size_t bad = 0;
    assert_int_equal(ds_stats_blocks(&s, &strict, 0, nb, 4, whole, &bad), DT_ERR_CORRUPT);
    for (size_t k = 0; k < 900; k += 2) /* the first picked sample that fails */
        if (idx[k] % 97 == 3) {
            assert_int_equal(bad, idx[k]);
            break;
        }
    free(whole);
    free(split);
}

static void test_nomem_stops(void **st)
{
    (void)st;
    nomem_at = 500;
    const ds_split s = odd_split();
    for (int t = 1; t <= 4; t += 3) {
        ds_bad_samples b;
        assert_int_equal(ds_find_bad_samples(&s, t, 0, &b), DT_ERR_NOMEM);
        assert_non_null(strstr(dt_last_error(), "out of memory decoding sample 500"));
        assert_int_equal(b.count, 0);
        assert_null(b.items);
    }
    nomem_at = SIZE_MAX;
}

/* Every calloc in dtrain's code comes here (-Wl,--wrap=calloc, tests/CMakeLists.txt); the one
 * numbered calloc_fail_at (0: the next) fails, the others are libc's. */
void *__real_calloc(size_t k, size_t n);
void *__wrap_calloc(size_t k, size_t n);
static long calloc_fail_at = -1;
void *__wrap_calloc(size_t k, size_t n)
{
    if (calloc_fail_at >= 0 && calloc_fail_at-- == 0) return NULL;
    return __real_calloc(k, n);
}

/* Each allocation of a pass on 4 threads failing in turn: DT_ERR_NOMEM saying so, nothing listed
 * (the thread bookkeeping's own failing once dereferenced NULL), until one past the last, which
 * passes; the same for the statistics pass over the split's good samples. */
static void test_nomem_each_calloc(void **st)
{
    (void)st;
    nomem_at = SIZE_MAX;
    const ds_split s = odd_split();
    long at = 0;
    for (;; at++) {
        ds_bad_samples b;
        calloc_fail_at = at;
        const dt_status rc = ds_find_bad_samples(&s, 4, 0, &b);
        const int failed = calloc_fail_at < 0; /* the numbered calloc came */
        calloc_fail_at = -1;
        if (!failed) {
            assert_int_equal(rc, DT_OK);
            ds_bad_samples_free(&b);
            break;
        }
        if (rc != DT_ERR_NOMEM) fail_msg("calloc %ld failing: status %d (%s)", at, (int)rc, dt_last_error());
        assert_non_null(strstr(dt_last_error(), "out of memory"));
        assert_int_equal(b.count, 0);
        assert_null(b.items);
    }
    assert_true(at >= 3); /* the jobs, their thread ids and the list */
    ds_split good = s;
    good.count = 3; /* below the first bad sample (3): one block, one job */
    for (at = 0;; at++) {
        ds_stats stats;
        calloc_fail_at = at;
        const dt_status rc = ds_compute_stats(&good, 4, &stats);
        const int failed = calloc_fail_at < 0;
        calloc_fail_at = -1;
        if (!failed) {
            assert_int_equal(rc, DT_OK);
            ds_stats_free(&stats);
            break;
        }
        if (rc != DT_ERR_NOMEM) fail_msg("stats: calloc %ld failing: status %d (%s)", at, (int)rc, dt_last_error());
        assert_null(stats.mean);
        assert_null(stats.class_counts);
    }
    assert_true(at >= 7); /* the figures (3), the blocks, the jobs, their thread ids, a job's counts */
}

/* ----------------------------------------------------------- opens that leave labels to reads */

static void spit(const char *p, const void *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Lists the bad samples of the split at path opened with check_on_read, and checks them against
 * want (nwant indices) and the fragment each message must hold. */
static void expect_bad(const char *path, const size_t *want, size_t nwant, const char *const *says)
{
    ds_open_opts o = {.check_on_read = 1};
    ds_split *s = NULL;
    if (ds_open(path, &o, &s) != DT_OK) fail_msg("check_on_read open of %s: %s", path, dt_last_error());
    for (int t = 1; t <= 3; t += 2) {
        ds_bad_samples b;
        assert_int_equal(ds_find_bad_samples(s, t, 0, &b), DT_OK);
        assert_int_equal(b.count, nwant);
        for (size_t k = 0; k < nwant; k++) {
            assert_int_equal(b.items[k].index, want[k]);
            if (!strstr(b.items[k].why, says[k])) fail_msg("\"%s\" lacks \"%s\"", b.items[k].why, says[k]);
        }
        ds_bad_samples_free(&b);
    }
    ds_close(s);
}

static dt_status good_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    for (int j = 0; j < s->c; j++) x[j] = (float)((i * 3 + (size_t)j) % 256);
    *label = (int32_t)(i % (size_t)s->classes);
    return DT_OK;
}

static const ds_ops good_ops = {good_read, NULL};

static void test_dts_labels(void **st)
{
    (void)st;
    ds_split src = {.ops = &good_ops, .count = 10, .c = 2, .h = 1, .w = 1, .classes = 3, .uint8_values = 1};
    char p[128];
    snprintf(p, sizeof p, "%s/l.dts", dir);
    assert_int_equal(dts_write(&src, p, NULL, NULL), DT_OK);
    /* A 128-byte header (64 + 8 x 2 channels, rounded up to 64), 20 bytes of samples rounded up to
     * 64: the labels at 192. */
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    const unsigned char seven[4] = {7, 0, 0, 0}, neg[4] = {0xff, 0xff, 0xff, 0xff};
    fseek(f, 192 + 4 * 2, SEEK_SET), fwrite(seven, 1, 4, f);
    fseek(f, 192 + 4 * 8, SEEK_SET), fwrite(neg, 1, 4, f);
    fclose(f);
    ds_split *s = NULL;
    assert_int_equal(ds_open(p, NULL, &s), DT_ERR_CORRUPT); /* a plain open: the first, at open */
    assert_non_null(strstr(dt_last_error(), "label 7 of sample 2 (offset 200)"));
    const size_t want[] = {2, 8};
    const char *says[] = {"label 7 of sample 2 (offset 200) is outside 0 to 2",
                          "label -1 of sample 8 (offset 224) is outside 0 to 2"};
    expect_bad(p, want, 2, says);
    /* The payload CRC is damaged too, and says so without naming a sample. */
    ds_open_opts o = {.check_on_read = 1};
    assert_int_equal(ds_open(p, &o, &s), DT_OK);
    assert_int_equal(dts_check_payload(s), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "samples or labels are damaged"));
    ds_close(s);
}

static void test_idx_labels(void **st)
{
    (void)st;
    char d[128], p[192];
    snprintf(d, sizeof d, "%s/mnist", dir);
    mkdir(d, 0755);
    /* 6 images of 1x1x2, labels as signed bytes (type 09): -1 at samples 1 and 4. */
    const unsigned char img[] = {0, 0, 8, 3, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    const unsigned char lab[] = {0, 0, 9, 1, 0, 0, 0, 6, 0, 0xff, 1, 2, 0xff, 1};
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", d);
    spit(p, img, sizeof img);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", d);
    spit(p, lab, sizeof lab);
    ds_split *s = NULL;
    assert_int_equal(ds_open(d, NULL, &s), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "label -1 of sample 1 is outside"));
    ds_open_opts o = {.check_on_read = 1};
    assert_int_equal(ds_open(d, &o, &s), DT_OK);
    assert_int_equal(s->classes, 3); /* from the labels in range */
    ds_close(s);
    const size_t want[] = {1, 4};
    const char *says[] = {"label -1 of sample 1 is outside", "label -1 of sample 4 is outside"};
    expect_bad(d, want, 2, says);
}

/* Bad labels that leave fewer than 2 valid classes: the check_on_read open cannot go on (no
 * classification has 1 class) and says what is wrong, not that every label is 0. */
static void test_idx_too_few_classes(void **st)
{
    (void)st;
    char d[128], p[192];
    snprintf(d, sizeof d, "%s/few", dir);
    mkdir(d, 0755);
    const unsigned char img[] = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 4};
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", d);
    spit(p, img, sizeof img);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", d);
    ds_open_opts o = {.check_on_read = 1};
    ds_split *s = NULL;
    /* Signed bytes 0, -1, 0, -128: the labels in range are all 0. */
    const unsigned char zeros[] = {0, 0, 9, 1, 0, 0, 0, 4, 0, 0xff, 0, 0x80};
    spit(p, zeros, sizeof zeros);
    assert_int_equal(ds_open(d, &o, &s), DT_ERR_CORRUPT);
    const char *e = dt_last_error();
    if (strstr(e, "every label is 0") || !strstr(e, "2 of its 4 labels are outside 0 to 1048575") ||
        !strstr(e, "the first: label -1 of sample 1") || !strstr(e, "the other 2 are all 0"))
        fail_msg("few classes: \"%s\"", e);
    /* Every label bad: none in range at all. */
    const unsigned char none[] = {0, 0, 9, 1, 0, 0, 0, 4, 0xff, 0xfe, 0xff, 0x80};
    spit(p, none, sizeof none);
    assert_int_equal(ds_open(d, &o, &s), DT_ERR_CORRUPT);
    e = dt_last_error();
    if (strstr(e, "every label is 0") || !strstr(e, "every one of its 4 labels is outside 0 to 1048575") ||
        !strstr(e, "the first: label -1 of sample 0"))
        fail_msg("no class: \"%s\"", e);
    /* Labels that are all in range and all 0 are what the plain message says. */
    const unsigned char all0[] = {0, 0, 8, 1, 0, 0, 0, 4, 0, 0, 0, 0};
    spit(p, all0, sizeof all0);
    for (int later = 0; later <= 1; later++) {
        o.check_on_read = later;
        assert_int_equal(ds_open(d, &o, &s), DT_ERR_CORRUPT);
        assert_non_null(strstr(dt_last_error(), "every label is 0"));
    }
}

static void test_cifar_labels(void **st)
{
    (void)st;
    /* CIFAR-10: 4 records, labels 0, 12, 3, 200 (10 classes). */
    static unsigned char rec[4 * 3073];
    const unsigned char labels[] = {0, 12, 3, 200};
    for (int r = 0; r < 4; r++) rec[r * 3073] = labels[r];
    char p[128];
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    spit(p, rec, sizeof rec);
    ds_split *s = NULL;
    assert_int_equal(ds_open(p, NULL, &s), DT_ERR_CORRUPT);
    const size_t want[] = {1, 3};
    const char *says[] = {"record 1 (sample 1, at byte 3073) has label 12",
                          "record 3 (sample 3, at byte 9219) has label 200"};
    expect_bad(p, want, 2, says);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_bad_sample),
        cmocka_unit_test(test_nomem_stops),
        cmocka_unit_test(test_nomem_each_calloc),
        cmocka_unit_test(test_stats_blocks),
        cmocka_unit_test_setup_teardown(test_dts_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idx_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idx_too_few_classes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cifar_labels, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
