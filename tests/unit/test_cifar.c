/*
 * test_cifar.c - the CIFAR-10 and CIFAR-100 binary readers (runtime/data/cifar.c): small files of
 * 7 records each, with a known pixel pattern and labels per file and record, written to a temp
 * directory (plain and gzip), read back through ds_open (detected and forced) and cifar_open:
 * count, shape, classes, every pixel and label, both splits, coarse and fine labels; and the
 * refusals: a size that is not a whole number of records, an empty file, a label out of range, a
 * missing batch file, a FIFO in a batch file's place (without blocking), a sample out of range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block_guard.h"

#include "runtime/data/reader.h"
#include "dtrain.h"
#include "tmp_dir.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define PIXELS 3072
#define PER_FILE 7

typedef struct fixture {
    char dir[64];
} fixture;

static char *path_in(const fixture *f, const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", f->dir, name);
    return p;
}

/* The pattern: pixel k of record r of file number fn; the labels of that record. */
static unsigned char pix(int fn, int r, int k) { return (unsigned char)(k * 7 + r * 13 + fn * 101 + (k >> 8)); }
static int label10(int fn, int r) { return (fn * 3 + r) % 10; }
static int coarse100(int fn, int r) { return (fn * 5 + r * 3) % 20; }
static int fine100(int fn, int r) { return (fn * 17 + r * 11 + 3) % 100; }

/* The bytes of a file of n records of file number fn (hdr = 1: CIFAR-10, 2: CIFAR-100). */
static unsigned char *records(int fn, int n, int hdr, size_t *len)
{
    const size_t rec = (size_t)hdr + PIXELS;
    *len = rec * (size_t)n;
    unsigned char *b = malloc(*len ? *len : 1);
    assert_non_null(b);
    for (int r = 0; r < n; r++) {
        unsigned char *p = b + (size_t)r * rec;
        if (hdr == 1) {
            p[0] = (unsigned char)label10(fn, r);
        } else {
            p[0] = (unsigned char)coarse100(fn, r);
            p[1] = (unsigned char)fine100(fn, r);
        }
        for (int k = 0; k < PIXELS; k++) p[hdr + k] = pix(fn, r, k);
    }
    return b;
}

static void write_bytes(const char *path, const void *p, size_t len, int gz)
{
    if (gz) {
        gzFile z = gzopen(path, "wb");
        assert_non_null(z);
        if (len) assert_int_equal(gzwrite(z, p, (unsigned)len), (int)len);
        assert_int_equal(gzclose(z), Z_OK);
        return;
    }
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (len) assert_int_equal(fwrite(p, 1, len, fp), len);
    fclose(fp);
}

/* Writes name in the fixture's directory: n records of file number fn (".gz" in name: gzip). */
static void write_file(const fixture *f, const char *name, int fn, int n, int hdr)
{
    size_t len;
    unsigned char *b = records(fn, n, hdr, &len);
    const size_t nl = strlen(name);
    write_bytes(path_in(f, name), b, len, nl > 3 && strcmp(name + nl - 3, ".gz") == 0);
    free(b);
}

/* The five CIFAR-10 train batches (file numbers 1..5) and the test batch (file number 9). */
static void write_cifar10(const fixture *f, int gz_batch)
{
    char name[64];
    for (int b = 1; b <= 5; b++) {
        snprintf(name, sizeof name, "data_batch_%d.bin%s", b, b == gz_batch ? ".gz" : "");
        write_file(f, name, b, PER_FILE, 1);
    }
    write_file(f, "test_batch.bin", 9, PER_FILE, 1);
}

/* Every sample of s against the pattern of the files fn0, fn0 + 1, ... of PER_FILE records each;
 * which: 0 CIFAR-10 labels, 1 CIFAR-100 fine, 2 CIFAR-100 coarse. */
static void check_samples(const ds_split *s, int fn0, int nfiles, int which)
{
    assert_int_equal(s->count, (size_t)(nfiles * PER_FILE));
    assert_int_equal(s->c, 3);
    assert_int_equal(s->h, 32);
    assert_int_equal(s->w, 32);
    assert_int_equal(s->classes, which == 0 ? 10 : which == 1 ? 100 : 20);
    float x[PIXELS];
    for (size_t i = 0; i < s->count; i++) {
        const int fn = fn0 + (int)(i / PER_FILE), r = (int)(i % PER_FILE);
        int32_t label = -1;
        memset(x, 0xff, sizeof x);
        assert_int_equal(ds_read(s, i, x, &label), DT_OK);
        const int want = which == 0 ? label10(fn, r) : which == 1 ? fine100(fn, r) : coarse100(fn, r);
        if (label != want) fail_msg("sample %zu: label %d, want %d", i, (int)label, want);
        assert_true(label >= 0 && label < s->classes);
        for (int k = 0; k < PIXELS; k++)
            if (x[k] != (float)pix(fn, r, k))
                fail_msg("sample %zu pixel %d: %g, want %d", i, k, (double)x[k], pix(fn, r, k));
    }
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (tmp_dir_make(f->dir, sizeof f->dir, "dtcifar")) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    const int rc = tmp_dir_remove(f->dir);
    free(f);
    return rc;
}

static void expect_error(const char *path, const char *format, const char *split, dt_status want, const char *a,
                         const char *b, const char *c)
{
    ds_open_opts o = {.format = format, .split = split};
    ds_split *s = (ds_split *)1;
    dt_status st = ds_open(path, &o, &s);
    if (st != want) fail_msg("%s: status %d, want %d (%s)", path, (int)st, (int)want, dt_last_error());
    assert_null(s);
    const char *e = dt_last_error();
    if (a && !strstr(e, a)) fail_msg("error '%s' does not say '%s'", e, a);
    if (b && !strstr(e, b)) fail_msg("error '%s' does not say '%s'", e, b);
    if (c && !strstr(e, c)) fail_msg("error '%s' does not say '%s'", e, c);
}

/* CIFAR-10 through ds_open, detected from data_batch_1.bin: the five batches in order, and the test
 * split; forced, the same. */
static void test_cifar10_dir(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    ds_split *s = NULL;
    assert_int_equal(ds_open(f->dir, NULL, &s), DT_OK);
    assert_string_equal(s->format, "cifar10");
    assert_string_equal(s->split, "train");
    check_samples(s, 1, 5, 0);
    ds_close(s);

    ds_open_opts o = {.split = "test"};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    assert_string_equal(s->split, "test");
    check_samples(s, 9, 1, 0);
    ds_close(s);

    o = (ds_open_opts){.format = "cifar10", .split = "train"};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    check_samples(s, 1, 5, 0);
    ds_close(s);

    /* The test split is there while test_batch.bin is, whether or not it opens; one file has none. */
    assert_int_equal(ds_has_test_split(f->dir, NULL), 1);
    assert_int_equal(ds_has_test_split(path_in(f, "data_batch_1.bin"), NULL), 0);
    write_bytes(path_in(f, "test_batch.bin"), "short", 5, 0);
    o = (ds_open_opts){.split = "test"};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_ERR_CORRUPT);
    assert_int_equal(ds_has_test_split(f->dir, &o), 1);
    remove(path_in(f, "test_batch.bin"));
    assert_int_equal(ds_open(f->dir, &o, &s), DT_ERR_IO);
    assert_int_equal(ds_has_test_split(f->dir, &o), 0);
    write_bytes(path_in(f, "test_batch.bin.gz"), "short", 5, 1);
    assert_int_equal(ds_has_test_split(f->dir, NULL), 1);
}

/* cifar_open itself, on a zeroed split as the fuzz harness uses it: a directory, and one file
 * (that file alone, whatever the split). */
static void test_cifar_open_direct(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    ds_split s = {0};
    ds_open_opts o = {.format = "cifar10"};
    assert_int_equal(cifar_open(f->dir, &o, &s), DT_OK);
    assert_string_equal(s.format, "cifar10");
    assert_string_equal(s.split, "train");
    assert_string_equal(s.source, f->dir);
    check_samples(&s, 1, 5, 0);
    s.ops->close(&s);

    memset(&s, 0, sizeof s);
    o.split = "test";
    assert_int_equal(cifar_open(path_in(f, "data_batch_4.bin"), &o, &s), DT_OK);
    check_samples(&s, 4, 1, 0);
    s.ops->close(&s);

    /* Forced through ds_open on one file. */
    ds_split *sp = NULL;
    o = (ds_open_opts){.format = "cifar10"};
    assert_int_equal(ds_open(path_in(f, "test_batch.bin"), &o, &sp), DT_OK);
    check_samples(sp, 9, 1, 0);
    ds_close(sp);
    /* Detected on one file by its size: whole records of 3073 bytes. */
    assert_int_equal(ds_open(path_in(f, "test_batch.bin"), NULL, &sp), DT_OK);
    assert_string_equal(sp->format, "cifar10");
    check_samples(sp, 9, 1, 0);
    ds_close(sp);

    /* A first record that starts 00 00 08 02 (label 0, then pixels 0, 8, 2) looks like an IDX
     * magic; the sizes its "header" gives are not the file's, so it is still CIFAR-10. */
    unsigned char rec[3 * 3073];
    for (size_t i = 0; i < sizeof rec; i++) rec[i] = (unsigned char)(i * 7 % 251);
    rec[0] = 0, rec[1] = 0, rec[2] = 8, rec[3] = 2, rec[3073] = 1, rec[2 * 3073] = 2;
    write_bytes(path_in(f, "looks_idx.bin"), rec, sizeof rec, 0);
    assert_int_equal(ds_open(path_in(f, "looks_idx.bin"), NULL, &sp), DT_OK);
    assert_string_equal(sp->format, "cifar10");
    assert_int_equal(sp->count, 3);
    ds_close(sp);

    /* No format, or another one, is refused. */
    memset(&s, 0, sizeof s);
    assert_int_equal(cifar_open(f->dir, NULL, &s), DT_ERR_INVALID_ARG);
    o = (ds_open_opts){.format = "idx"};
    assert_int_equal(cifar_open(f->dir, &o, &s), DT_ERR_INVALID_ARG);
    o = (ds_open_opts){.format = "cifar10", .split = "val"};
    assert_int_equal(cifar_open(f->dir, &o, &s), DT_ERR_INVALID_ARG);
    assert_null(s.ops);
    assert_null(s.impl);

    /* A path the system cannot take is named as too long, not as missing (stat's errno). */
    char longp[5000];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/', longp[sizeof longp - 1] = '\0';
    o = (ds_open_opts){.format = "cifar10"};
    assert_int_equal(cifar_open(longp, &o, &s), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "cannot reach CIFAR-10 dataset /aaa"));
    assert_non_null(strstr(dt_last_error(), strerror(ENAMETOOLONG)));
    assert_null(strstr(dt_last_error(), "does not exist"));
}

/* CIFAR-100, detected from train.bin: fine labels by default, coarse when asked; the test split. */
static void test_cifar100_dir(void **state)
{
    fixture *f = *state;
    write_file(f, "train.bin", 1, PER_FILE, 2);
    write_file(f, "test.bin", 2, PER_FILE, 2);
    ds_split *s = NULL;
    assert_int_equal(ds_open(f->dir, NULL, &s), DT_OK);
    assert_string_equal(s->format, "cifar100");
    check_samples(s, 1, 1, 1);
    ds_close(s);

    ds_open_opts o = {.cifar100_coarse = 1};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    check_samples(s, 1, 1, 2);
    ds_close(s);

    o = (ds_open_opts){.format = "cifar100", .split = "test"};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    check_samples(s, 2, 1, 1);
    ds_close(s);
    o.cifar100_coarse = 1;
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    check_samples(s, 2, 1, 2);
    ds_close(s);

    assert_int_equal(ds_has_test_split(f->dir, NULL), 1);
    remove(path_in(f, "test.bin"));
    assert_int_equal(ds_has_test_split(f->dir, NULL), 0);

    /* Forced as CIFAR-10, the CIFAR-100 directory lacks the batches. */
    expect_error(f->dir, "cifar10", NULL, DT_ERR_IO, "data_batch_1.bin", "does not exist", NULL);
}

/* Any file may be gzip-compressed: name.gz, found by ds_find_file (detection too). */
static void test_gzip(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 3); /* data_batch_3.bin.gz */
    unlink(path_in(f, "test_batch.bin"));
    write_file(f, "test_batch.bin.gz", 9, PER_FILE, 1);
    unlink(path_in(f, "data_batch_1.bin"));
    write_file(f, "data_batch_1.bin.gz", 1, PER_FILE, 1);
    ds_split *s = NULL;
    assert_int_equal(ds_open(f->dir, NULL, &s), DT_OK);
    assert_string_equal(s->format, "cifar10");
    check_samples(s, 1, 5, 0);
    ds_close(s);
    ds_open_opts o = {.split = "test"};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    check_samples(s, 9, 1, 0);
    ds_close(s);

    /* CIFAR-100 compressed, detected from train.bin.gz. */
    fixture g;
    memcpy(g.dir, f->dir, sizeof g.dir);
    assert_true(strlen(g.dir) + 6 <= sizeof g.dir);
    strcat(g.dir, "/c100");
    assert_int_equal(mkdir(g.dir, 0755), 0);
    write_file(&g, "train.bin.gz", 5, PER_FILE, 2);
    assert_int_equal(ds_open(g.dir, NULL, &s), DT_OK);
    assert_string_equal(s->format, "cifar100");
    check_samples(s, 5, 1, 1);
    ds_close(s);
}

/* A size that is not a whole number of records names the file, its size, the record size and what
 * is left over; an empty file is corrupt too. */
static void test_size_refused(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    size_t len;
    unsigned char *b = records(2, PER_FILE, 1, &len);
    b = realloc(b, len + 5);
    assert_non_null(b);
    memset(b + len, 0, 5);
    write_bytes(path_in(f, "data_batch_2.bin"), b, len + 5, 0);
    free(b);
    char size[32];
    snprintf(size, sizeof size, "is %zu bytes", len + 5);
    expect_error(f->dir, NULL, NULL, DT_ERR_CORRUPT, "data_batch_2.bin", size, "records of 3073 bytes");
    expect_error(f->dir, NULL, NULL, DT_ERR_CORRUPT, "7 records and 5 bytes left over", NULL, NULL);
    /* The test split does not read the train batches. */
    ds_split *s = NULL;
    ds_open_opts o = {.split = "test"};
    assert_int_equal(ds_open(f->dir, &o, &s), DT_OK);
    ds_close(s);

    /* Cut short inside the gzip stream's records: the same refusal. */
    unlink(path_in(f, "data_batch_2.bin"));
    b = records(2, PER_FILE, 1, &len);
    write_bytes(path_in(f, "data_batch_2.bin.gz"), b, len - 1, 1);
    free(b);
    expect_error(f->dir, NULL, NULL, DT_ERR_CORRUPT, "data_batch_2.bin.gz", "6 records and 3072 bytes left over", NULL);

    write_bytes(path_in(f, "test_batch.bin"), "", 0, 0);
    expect_error(f->dir, NULL, "test", DT_ERR_CORRUPT, "test_batch.bin", "is empty", NULL);

    /* A CIFAR-100 file read as CIFAR-10: 7 x 3074 bytes are 7 records of 3073 and 7 bytes. */
    write_file(f, "train.bin", 1, PER_FILE, 2);
    expect_error(path_in(f, "train.bin"), "cifar10", NULL, DT_ERR_CORRUPT, "21518 bytes", "7 bytes left over", NULL);
}

/* Every label is checked at open: the message names the file, the record and the label. */
static void test_label_refused(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    size_t len;
    unsigned char *b = records(3, PER_FILE, 1, &len);
    b[4 * 3073] = 10;
    write_bytes(path_in(f, "data_batch_3.bin"), b, len, 0);
    expect_error(f->dir, NULL, NULL, DT_ERR_CORRUPT, "data_batch_3.bin", "record 4 (sample 18", "label 10");
    b[4 * 3073] = 255;
    write_bytes(path_in(f, "data_batch_3.bin"), b, len, 0);
    expect_error(f->dir, NULL, NULL, DT_ERR_CORRUPT, "record 4", "label 255", "10 classes");
    free(b);

    /* CIFAR-100: a fine label of 100, a coarse one of 20; both are checked whichever is used. */
    b = records(1, PER_FILE, 2, &len);
    b[6 * 3074 + 1] = 100;
    write_bytes(path_in(f, "train.bin"), b, len, 0);
    expect_error(path_in(f, "train.bin"), "cifar100", NULL, DT_ERR_CORRUPT, "record 6", "fine label 100", NULL);
    b[6 * 3074 + 1] = 99;
    b[0] = 20;
    write_bytes(path_in(f, "train.bin"), b, len, 0);
    expect_error(path_in(f, "train.bin"), "cifar100", NULL, DT_ERR_CORRUPT, "record 0", "coarse label 20", NULL);
    b[0] = 19;
    write_bytes(path_in(f, "train.bin"), b, len, 0);
    ds_split *s = NULL;
    ds_open_opts o = {.format = "cifar100", .cifar100_coarse = 1};
    assert_int_equal(ds_open(path_in(f, "train.bin"), &o, &s), DT_OK);
    int32_t label;
    float x[PIXELS];
    assert_int_equal(ds_read(s, 0, x, &label), DT_OK);
    assert_int_equal(label, 19);
    assert_int_equal(ds_read(s, 6, x, &label), DT_OK);
    assert_int_equal(label, coarse100(1, 6));
    ds_close(s);
    free(b);
}

/* CIFAR-10 train needs all five batches: a missing one is named, not skipped. */
static void test_missing_batch(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    unlink(path_in(f, "data_batch_3.bin"));
    expect_error(f->dir, NULL, NULL, DT_ERR_IO, "data_batch_3.bin", "does not exist", "all five");
    unlink(path_in(f, "data_batch_5.bin"));
    expect_error(f->dir, "cifar10", "train", DT_ERR_IO, "data_batch_3.bin", NULL, NULL);
    unlink(path_in(f, "test_batch.bin"));
    expect_error(f->dir, NULL, "test", DT_ERR_IO, "test_batch.bin", "does not exist", NULL);
    expect_error(path_in(f, "nothing.bin"), "cifar10", NULL, DT_ERR_IO, "nothing.bin", "does not exist", NULL);
}

/* A FIFO named data_batch_1.bin (and one given as the path) is refused without blocking; so is a
 * directory in a batch file's place. */
static void test_fifo(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    unlink(path_in(f, "data_batch_1.bin"));
    assert_int_equal(mkfifo(path_in(f, "data_batch_1.bin"), 0644), 0);
    block_guard_start(20);
    expect_error(f->dir, NULL, NULL, DT_ERR_IO, "data_batch_1.bin", "not a regular file", NULL);
    expect_error(path_in(f, "data_batch_1.bin"), "cifar10", NULL, DT_ERR_IO, "not a regular file", NULL, NULL);
    block_guard_stop();
    unlink(path_in(f, "data_batch_1.bin"));
    assert_int_equal(mkdir(path_in(f, "data_batch_1.bin"), 0755), 0);
    expect_error(f->dir, NULL, NULL, DT_ERR_IO, "data_batch_1.bin", NULL, NULL);
}

/* read(i) for i >= count is DT_ERR_INVALID_ARG and writes nothing. */
static void test_read_range(void **state)
{
    fixture *f = *state;
    write_cifar10(f, 0);
    ds_split *s = NULL;
    assert_int_equal(ds_open(f->dir, NULL, &s), DT_OK);
    float x[PIXELS];
    int32_t label = -7;
    x[0] = -1;
    assert_int_equal(ds_read(s, s->count, x, &label), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "sample 35"));
    assert_int_equal(ds_read(s, SIZE_MAX, x, &label), DT_ERR_INVALID_ARG);
    assert_int_equal(label, -7);
    assert_true(x[0] == -1);
    assert_int_equal(ds_read(s, s->count - 1, x, &label), DT_OK);
    assert_int_equal(label, label10(5, PER_FILE - 1));
    ds_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cifar10_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cifar_open_direct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cifar100_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gzip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_range, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
