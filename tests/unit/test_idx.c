/*
 * test_idx.c - MNIST-style IDX datasets: files this test writes (every type code and rank, plain
 * and gzip) read back value for value through ds_open, and every malformed file refused with a
 * message naming the file and what is wrong (idx_parse on buffers of exactly the file's length, so
 * a read past a short header or a fifth dimension would be a read past the buffer); a parent folder
 * of datasets refused as one, without an image folder's class folders searched for dataset files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block_guard.h"

#include "runtime/data/idx.h"
#include "runtime/data/reader.h"
#include "tmp_dir.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[64];

/* stat() of the library counted when it looks for a dataset's marker file (train.bin, ...) in a
 * folder below watch: an image folder's open must not look for them in every class folder (16
 * lookups each, on every rank), only in the folder given. The library's calls bind to this
 * definition; the real lookup is fstatat's. */
static long marker_stats;
static char watch[256];

int stat(const char *restrict path, struct stat *restrict sb)
{
    const size_t wl = strlen(watch);
    const char *base = strrchr(path, '/');
    if (wl && strncmp(path, watch, wl) == 0 && strchr(path + wl, '/') && ds_marker_name(base + 1)) marker_stats++;
    return fstatat(AT_FDCWD, path, sb, 0);
}

/* dir/name in one of 4 rotating buffers: valid for the next three calls, so copy one kept longer. */
static char *path_of(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* An IDX image: type, dims, then values v(i) for i = 0.. in the type, big-endian. */
static size_t make_idx(unsigned char *out, int type, int nd, const uint32_t *dims, double (*v)(size_t))
{
    size_t n = 4;
    out[0] = out[1] = 0;
    out[2] = (unsigned char)type;
    out[3] = (unsigned char)nd;
    size_t total = 1;
    for (int d = 0; d < nd; d++) {
        for (int b = 0; b < 4; b++) out[n++] = (unsigned char)(dims[d] >> (24 - 8 * b));
        total *= dims[d];
    }
    for (size_t i = 0; i < total; i++) {
        double x = v(i);
        uint64_t u = 0;
        int size = type == 0x0B ? 2 : type == 0x0C || type == 0x0D ? 4 : type == 0x0E ? 8 : 1;
        if (type == 0x0D) {
            float f = (float)x;
            uint32_t w;
            memcpy(&w, &f, 4);
            u = w;
        } else if (type == 0x0E) {
            memcpy(&u, &x, 8);
        } else {
            u = (uint64_t)(int64_t)x;
        }
        for (int b = size - 1; b >= 0; b--) out[n++] = (unsigned char)(u >> (8 * b));
    }
    return n;
}

static void write_file(const char *name, const void *p, size_t n, int gz)
{
    if (gz) {
        gzFile z = gzopen(path_of(name), "wb");
        assert_non_null(z);
        assert_int_equal(gzwrite(z, p, (unsigned)n), (int)n);
        gzclose(z);
    } else {
        FILE *f = fopen(path_of(name), "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(p, 1, n, f), n);
        fclose(f);
    }
}

static double pix(size_t i) { return (double)((i * 37 + 11) % 256); }
static double lab(size_t i) { return (double)(i % 10); }
static double sgn(size_t i) { return (double)((int)(i % 200) - 100); }
static double real(size_t i) { return (double)i * 0.25 - 3.0; }
static double bad_lab(size_t i) { return i == 5 ? 10.0 : (double)(i % 10); }

static unsigned char buf[1 << 20];

/* N images of H x W (ubyte) and N labels, as split `stem`, plain or gzip. */
static void write_mnist(const char *stem, uint32_t n, uint32_t h, uint32_t w, int gz)
{
    char name[128];
    uint32_t di[3] = {n, h, w}, dl[1] = {n};
    size_t len = make_idx(buf, 0x08, 3, di, pix);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", stem, gz ? ".gz" : "");
    write_file(name, buf, len, gz);
    len = make_idx(buf, 0x08, 1, dl, lab);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", stem, gz ? ".gz" : "");
    write_file(name, buf, len, gz);
}

static int setup(void **st)
{
    (void)st;
    return tmp_dir_make(dir, sizeof dir, "dtidx");
}

static int teardown(void **st)
{
    (void)st;
    return tmp_dir_remove(dir);
}

static void expect_open_fails(const char *path, const ds_open_opts *o, dt_status want, const char *must)
{
    ds_split *s = NULL;
    dt_status r = ds_open(path, o, &s);
    if (r != want) fail_msg("%s: status %d, want %d: %s", path, (int)r, (int)want, dt_last_error());
    assert_null(s);
    if (!strstr(dt_last_error(), must)) fail_msg("message '%s' lacks '%s'", dt_last_error(), must);
}

static void test_mnist_layout(void **st)
{
    (void)st;
    write_mnist("train", 20, 4, 3, 0);
    write_mnist("t10k", 10, 4, 3, 1); /* the test split gzip-compressed */
    ds_split *s;
    assert_int_equal(ds_open(dir, NULL, &s), DT_OK);
    assert_string_equal(s->format, "idx");
    assert_int_equal(s->count, 20);
    assert_int_equal(s->c, 1);
    assert_int_equal(s->h, 4);
    assert_int_equal(s->w, 3);
    assert_int_equal(s->classes, 10);
    float x[12];
    int32_t y;
    for (size_t i = 0; i < 20; i++) {
        assert_int_equal(ds_read(s, i, x, &y), DT_OK);
        assert_int_equal(y, (int)(i % 10));
        for (size_t j = 0; j < 12; j++) assert_true(x[j] == (float)pix(i * 12 + j));
    }
    assert_int_equal(ds_read(s, 20, x, &y), DT_ERR_INVALID_ARG);
    ds_close(s);
    ds_open_opts o = {.split = "test"};
    assert_int_equal(ds_open(dir, &o, &s), DT_OK);
    assert_int_equal(s->count, 10);
    assert_int_equal(ds_read(s, 9, x, &y), DT_OK);
    assert_int_equal(y, 9);
    assert_true(x[11] == (float)pix(9 * 12 + 11));
    ds_close(s);
    /* One images file names its labels file beside it. */
    assert_int_equal(ds_open(path_of("train-images-idx3-ubyte"), NULL, &s), DT_OK);
    assert_int_equal(s->count, 20);
    ds_close(s);
    assert_int_equal(ds_open(path_of("t10k-images-idx3-ubyte.gz"), NULL, &s), DT_OK);
    assert_int_equal(s->count, 10);
    ds_close(s);
    /* A test split is there while a file of it is, whether or not it opens; one file has none. */
    assert_int_equal(ds_has_test_split(dir, NULL), 1);
    assert_int_equal(ds_has_test_split(path_of("train-images-idx3-ubyte"), NULL), 0);
    assert_int_equal(ds_has_test_split(path_of("nothing"), NULL), 0);
    remove(path_of("t10k-images-idx3-ubyte.gz"));
    expect_open_fails(dir, &o, DT_ERR_IO, "t10k-images-idx3-ubyte[.gz] is missing");
    assert_int_equal(ds_has_test_split(dir, &o), 1); /* its labels are still there */
    remove(path_of("t10k-labels-idx1-ubyte.gz"));
    assert_int_equal(ds_has_test_split(dir, &o), 0);
    write_file("t10k-labels-idx1-ubyte", "\0\0\x08\x01", 4, 0); /* cut short */
    assert_int_equal(ds_has_test_split(dir, NULL), 1);
}

/* Every type code and the ranks: N x F features, N x C x H x W, N. */
static void test_types_and_ranks(void **st)
{
    (void)st;
    struct {
        int type, nd;
        uint32_t dims[4];
        double (*v)(size_t);
        int c, h, w;
    } cases[] = {
        {0x09, 2, {6, 5}, sgn, 5, 1, 1},  {0x0B, 4, {6, 2, 3, 2}, sgn, 2, 3, 2}, {0x0C, 3, {6, 2, 2}, sgn, 1, 2, 2},
        {0x0D, 2, {6, 3}, real, 3, 1, 1}, {0x0E, 2, {6, 3}, real, 3, 1, 1},      {0x08, 1, {6}, pix, 1, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        size_t len = make_idx(buf, cases[k].type, cases[k].nd, cases[k].dims, cases[k].v);
        write_file("x-images-idx2-ubyte", buf, len, k % 2);
        uint32_t dl[1] = {6};
        len = make_idx(buf, k % 2 ? 0x0C : 0x08, 1, dl, lab); /* int32 labels too */
        write_file("x-labels-idx1-ubyte", buf, len, 0);
        ds_split *s;
        const char *p = path_of(k % 2 ? "x-images-idx2-ubyte.gz" : "x-images-idx2-ubyte");
        if (k % 2) rename(path_of("x-images-idx2-ubyte"), p);
        if (ds_open(p, NULL, &s)) fail_msg("case %zu: %s", k, dt_last_error());
        assert_int_equal(s->c, cases[k].c);
        assert_int_equal(s->h, cases[k].h);
        assert_int_equal(s->w, cases[k].w);
        size_t per = (size_t)s->c * s->h * s->w;
        float x[16];
        int32_t y;
        for (size_t i = 0; i < 6; i++) {
            assert_int_equal(ds_read(s, i, x, &y), DT_OK);
            for (size_t j = 0; j < per; j++)
                if (x[j] != (float)cases[k].v(i * per + j))
                    fail_msg("case %zu sample %zu value %zu: %g, want %g", k, i, j, (double)x[j],
                             cases[k].v(i * per + j));
        }
        ds_close(s);
        unlink(p);
    }
}

static void test_refusals(void **st)
{
    (void)st;
    uint32_t di[3] = {8, 2, 2}, dl[1] = {8};
    size_t il = make_idx(buf, 0x08, 3, di, pix);
    static unsigned char img[4096], labs[4096];
    memcpy(img, buf, il);
    size_t ll = make_idx(labs, 0x08, 1, dl, lab);
    const char *I = "r-images-idx3-ubyte", *L = "r-labels-idx1-ubyte";
    char P[256];
    snprintf(P, sizeof P, "%s", path_of(I));
    write_file(L, labs, ll, 0);

    write_file(I, img, il - 1, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "truncated");
    write_file(I, img, il + 1, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "data after the values");
    img[0] = 0x1f;
    write_file(I, img, il, 0);
    /* Detected as nothing known; forced to IDX, the IDX reader says what it expected. */
    expect_open_fails(P, NULL, DT_ERR_INVALID_ARG, "is not a dataset file dtrain recognises");
    ds_open_opts forced = {.format = "idx"};
    expect_open_fails(P, &forced, DT_ERR_CORRUPT, "is not an IDX file: its first bytes are 1f 00 08");
    img[0] = 0;
    img[3] = 7;
    write_file(I, img, il, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "byte 3 says 7 dimensions");
    img[3] = 3;
    img[7] = 0; /* N = 0 */
    write_file(I, img, il, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "dimension 0 (offset 4) is 0");
    img[7] = 8;
    /* Huge dimensions with a short file: refused from the header alone. */
    static unsigned char huge[16] = {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x40, 0, 0, 0, 0x40, 1};
    write_file(I, huge, sizeof huge, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "more than 268435456 values");

    write_file(I, img, il, 0);
    uint32_t dl7[1] = {7};
    ll = make_idx(labs, 0x08, 1, dl7, lab);
    write_file(L, labs, ll, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "holds 7 labels but its images file 8 images");
    ll = make_idx(labs, 0x08, 1, dl, bad_lab);
    write_file(L, labs, ll, 0); /* label 10 is fine (11 classes): a negative one is not */
    ll = make_idx(labs, 0x09, 1, dl, sgn);
    write_file(L, labs, ll, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "label -100 of sample 0 is outside 0 to");
    ll = make_idx(labs, 0x0D, 1, dl, lab);
    write_file(L, labs, ll, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "labels must be integers");
    unlink(path_of(L));
    expect_open_fails(P, NULL, DT_ERR_IO, "the labels of");

    /* A NaN pixel in float data. */
    uint32_t df[2] = {8, 2};
    il = make_idx(img, 0x0D, 2, df, real);
    memcpy(img + 4 + 8 + 4 * 5, "\x7f\xc0\x00\x00", 4);
    write_file(I, img, il, 0);
    ll = make_idx(labs, 0x08, 1, dl, lab);
    write_file(L, labs, ll, 0);
    expect_open_fails(P, NULL, DT_ERR_CORRUPT, "value 1 of sample 2 is nan");

    /* Damaged gzip. */
    il = make_idx(img, 0x08, 3, di, pix);
    write_file("g-images-idx3-ubyte.gz", img, il, 1);
    write_file("g-labels-idx1-ubyte", labs, ll, 0);
    FILE *f = fopen(path_of("g-images-idx3-ubyte.gz"), "r+b");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path_of("g-images-idx3-ubyte.gz"), n - 12), 0);
    expect_open_fails(path_of("g-images-idx3-ubyte.gz"), NULL, DT_ERR_CORRUPT, "compressed data is damaged");

    /* Directories: nothing recognisable; a split that is missing. */
    mkdir(path_of("empty"), 0755);
    expect_open_fails(path_of("empty"), NULL, DT_ERR_INVALID_ARG, "no dataset recognised in");
    mkdir(path_of("trainonly"), 0755);
    il = make_idx(img, 0x08, 3, di, pix);
    char nm[128];
    snprintf(nm, sizeof nm, "trainonly/train-images-idx3-ubyte");
    write_file(nm, img, il, 0);
    snprintf(nm, sizeof nm, "trainonly/train-labels-idx1-ubyte");
    write_file(nm, labs, ll, 0);
    ds_open_opts o = {.split = "test"};
    expect_open_fails(path_of("trainonly"), &o, DT_ERR_IO, "has no test split");
    ds_open_opts bad = {.format = "hdf5"};
    expect_open_fails(path_of("trainonly"), &bad, DT_ERR_INVALID_ARG,
                      "'hdf5' is not idx, cifar10, cifar100, imagefolder, dts or auto");
    ds_open_opts bads = {.split = "val"};
    expect_open_fails(path_of("trainonly"), &bads, DT_ERR_INVALID_ARG, "split 'val' is not train or test");

    /* A parent folder of datasets given by mistake: its datasets named, not taken for class folders
     * (the image-folder reader asked for --input, then to remove the dataset as a class without
     * images). */
    mkdir(path_of("parent"), 0755);
    mkdir(path_of("parent/mnist"), 0755);
    mkdir(path_of("parent/notes"), 0755);
    write_file("parent/mnist/train-images-idx3-ubyte", img, il, 0);
    write_file("parent/mnist/train-labels-idx1-ubyte", labs, ll, 0);
    expect_open_fails(path_of("parent"), NULL, DT_ERR_INVALID_ARG,
                      "parent holds a dataset in its folders, not an image folder's class folders: ");
    expect_open_fails(path_of("parent"), NULL, DT_ERR_INVALID_ARG, "parent/mnist (idx); give the dataset's own folder");
    /* With --input: the dataset is a class without images, refused as a dataset all the same; and
     * so is one that holds an image beside its marker file (the open itself succeeds there). */
    const ds_open_opts in = {.c = 3, .h = 8, .w = 8};
    mkdir(path_of("parent/cats"), 0755);
    write_file("parent/cats/1.png", "x", 1, 0);
    write_file("parent/notes/2.png", "x", 1, 0);
    expect_open_fails(path_of("parent"), &in, DT_ERR_INVALID_ARG, "parent/mnist (idx); give the dataset's own folder");
    write_file("parent/mnist/3.png", "x", 1, 0);
    expect_open_fails(path_of("parent"), &in, DT_ERR_INVALID_ARG, "parent/mnist (idx); give the dataset's own folder");

    /* An image folder without them: its class folders are not searched for marker files. */
    assert_int_equal(rename(path_of("parent/mnist/train-images-idx3-ubyte"), path_of("parent/mnist/images")), 0);
    assert_int_equal(rename(path_of("parent/mnist/train-labels-idx1-ubyte"), path_of("parent/mnist/labels")), 0);
    ds_split *s = NULL;
    snprintf(watch, sizeof watch, "%s/", path_of("parent"));
    marker_stats = 0;
    if (ds_open(path_of("parent"), &in, &s)) fail_msg("%s", dt_last_error());
    /* Nor for the test split training asks of it, which such a folder does not have. */
    const ds_open_opts test = {.split = "test", .c = 3, .h = 8, .w = 8};
    expect_open_fails(path_of("parent"), &test, DT_ERR_INVALID_ARG, "no held-out split");
    watch[0] = '\0';
    assert_int_equal(s->count, 3);
    assert_int_equal(marker_stats, 0);
    ds_close(s);
}

/* idx_parse on buffers of exactly the file's length (a header cut inside a dimension, a byte short
 * of the magic, one dimension too many: each read would go past the buffer or the dims array), and
 * the labels and values the checks refuse at their bounds. */
static unsigned char *exact; /* a->data points into it until the next call */

static dt_status parse_exact(const unsigned char *bytes, size_t len, idx_array *a)
{
    free(exact);
    exact = malloc(len ? len : 1); /* nothing after it to read by mistake */
    assert_non_null(exact);
    memcpy(exact, bytes, len);
    return idx_parse("f", exact, len, a);
}

static void expect_parse(const unsigned char *bytes, size_t len, const char *must)
{
    idx_array a;
    if (parse_exact(bytes, len, &a) != DT_ERR_CORRUPT || !strstr(dt_last_error(), must))
        fail_msg("%zu bytes: \"%s\" lacks \"%s\"", len, dt_last_error(), must);
}

static void test_parse_bounds(void **st)
{
    (void)st;
    const unsigned char head[] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    expect_parse(head, 3, "is 3 bytes, too short for an IDX header (4 bytes at least)");
    expect_parse(head, 12, "is truncated: 12 bytes, its header needs 16");
    const unsigned char five[] = {0, 0, 8, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 7};
    expect_parse(five, sizeof five, "byte 3 says 5 dimensions; dtrain reads 1 to 4");
    /* Labels: 2^20 is one past the last class; more labels than images; two dimensions. */
    idx_array a;
    int classes;
    const unsigned char top[] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0x10, 0, 0};
    assert_int_equal(parse_exact(top, sizeof top, &a), DT_OK);
    assert_int_equal(idx_check_labels("l", &a, 2, 0, &classes), DT_ERR_CORRUPT);
    if (!strstr(dt_last_error(), "label 1048576 of sample 1 is outside 0 to 1048575")) fail_msg("%s", dt_last_error());
    const unsigned char three[] = {0, 0, 8, 1, 0, 0, 0, 3, 0, 1, 1};
    assert_int_equal(parse_exact(three, sizeof three, &a), DT_OK);
    assert_int_equal(idx_check_labels("l", &a, 2, 0, &classes), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "holds 3 labels but its images file 2 images"));
    const unsigned char wide[] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1};
    assert_int_equal(parse_exact(wide, sizeof wide, &a), DT_OK);
    assert_int_equal(idx_check_labels("l", &a, 2, 0, &classes), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "a labels file has one dimension (N); this one has 2"));
    /* An infinity is no finite value any more than a NaN is. */
    const unsigned char inf[] = {0, 0, 0x0D, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0x7f, 0x80, 0, 0};
    assert_int_equal(parse_exact(inf, sizeof inf, &a), DT_OK);
    assert_int_equal(idx_check_finite("f", &a), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "value 0 of sample 1 is inf"));
    free(exact);
    exact = NULL;
}

static void test_fifo(void **st)
{
    (void)st;
    mkdir(path_of("fifo"), 0755);
    assert_int_equal(mkfifo(path_of("fifo/train-images-idx3-ubyte"), 0644), 0);
    uint32_t dl[1] = {8};
    size_t ll = make_idx(buf, 0x08, 1, dl, lab);
    write_file("fifo/train-labels-idx1-ubyte", buf, ll, 0);
    block_guard_start(20);
    expect_open_fails(path_of("fifo"), NULL, DT_ERR_IO, "is not a regular file");
    block_guard_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mnist_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_types_and_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test(test_parse_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
