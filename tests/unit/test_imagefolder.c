/*
 * test_imagefolder.c - the image-folder reader (runtime/data/imagefolder.c), on folders this test
 * writes with TurboJPEG and libpng in a temp directory: class order and labels (strcmp order,
 * nested folders, ignored files, images of other formats counted), pixel values read back (PNG exactly, JPEG within the codec's
 * error), gray/RGBA conversions, the train/val split (val/ numbered by train/'s class names, as is
 * another folder numbered like it; a lone train/ refused; ds_has_test_split: val/ beside train/), reads from several threads at once, and
 * every refusal: empty class folder, no class folder, unreadable folder, no or bad --input shape,
 * undecodable / truncated / empty images (DT_ERR_CORRUPT naming the file), a FIFO named like an
 * image, a symlink loop. The decoder itself: test_image_decode.c.
 */
#include "image_fixture.h"
#include "runtime/data/imagefolder_scan.h"

static void make_layout(unsigned char **rgb10, unsigned char **rgb2, unsigned char **gray, unsigned char **rgba)
{
    mkdirs("b_dog");
    mkdirs("a_cat");
    mkdirs("C_bird/sub");
    *rgb10 = pattern(1, 8, 8, 3);
    *rgb2 = pattern(2, 8, 8, 3);
    *gray = pattern(3, 8, 8, 1);
    *rgba = pattern(4, 8, 8, 4);
    write_png("a_cat/2.png", 8, 8, PNG_FORMAT_RGB, *rgb2);
    write_png("a_cat/10.PNG", 8, 8, PNG_FORMAT_RGB, *rgb10);
    unsigned char flat[8 * 8 * 3];
    for (int i = 0; i < 8 * 8; i++) flat[3 * i] = 200, flat[3 * i + 1] = 100, flat[3 * i + 2] = 30;
    write_jpeg("b_dog/x.jpg", 8, 8, 3, flat);
    write_png("b_dog/y.png", 8, 8, PNG_FORMAT_GRAY, *gray);
    write_bytes("b_dog/notes.txt", "not an image", 12);
    write_bytes("b_dog/.hidden.jpg", "not an image", 12);
    write_png("C_bird/z.png", 8, 8, PNG_FORMAT_RGBA, *rgba);
    write_jpeg("C_bird/pic.JPEG", 8, 8, 3, flat);
    write_png("C_bird/sub/w.png", 8, 8, PNG_FORMAT_RGB, *rgb2);
    write_bytes("README.txt", "top-level files are not classes", 31);
    /* Images torchvision reads and dtrain does not: counted by extension, any case. */
    write_bytes("b_dog/a.webp", "RIFF", 4);
    write_bytes("C_bird/sub/b.BMP", "BM", 2);
    write_bytes("C_bird/c.bmp", "BM", 2);
    write_bytes("b_dog/.d.webp", "RIFF", 4); /* hidden: not counted, as no hidden file is */
    /* A link to an image that is gone: skipped and counted (a link to one that is there reads). */
    assert_int_equal(symlink("/nonexistent/dtrain-image.jpg", at("a_cat/gone.jpg")), 0);
}

static void test_layout_and_values(void **state)
{
    (void)state;
    unsigned char *rgb10, *rgb2, *gray, *rgba;
    make_layout(&rgb10, &rgb2, &gray, &rgba);
    ds_split *s = open_ok(root, NULL, 3, 8, 8);
    assert_string_equal(s->format, "imagefolder");
    assert_int_equal(s->classes, 3);
    assert_int_equal(s->count, 7);
    assert_int_equal(s->c, 3);
    assert_int_equal(s->h, 8);
    assert_int_equal(s->w, 8);
    assert_int_equal(s->uint8_values, 1);
    /* strcmp order: upper case before lower case */
    assert_string_equal(imagefolder_class_name(s, 0), "C_bird");
    assert_string_equal(imagefolder_class_name(s, 1), "a_cat");
    assert_string_equal(imagefolder_class_name(s, 2), "b_dog");
    assert_null(imagefolder_class_name(s, 3));
    /* The images skipped for their extension (imagefolder_other_exts: .webp, .bmp, ...). */
    const if_impl *f = s->impl;
    assert_int_equal(f->other_images[0], 1);
    assert_int_equal(f->other_images[1], 2);
    for (int i = 2; i < IF_OTHER_EXTS; i++) assert_int_equal(f->other_images[i], 0);
    assert_int_equal(f->broken, 1);
    assert_non_null(strstr(f->broken_first, "/a_cat/gone.jpg"));
    /* C_bird: pic.JPEG, z.png, then sub/w.png; a_cat: 10.PNG before 2.png; b_dog: x.jpg, y.png */
    const int labels[7] = {0, 0, 0, 1, 1, 2, 2};
    float x[3 * 8 * 8];
    int32_t label;
    for (size_t i = 0; i < 7; i++) {
        if (ds_read(s, i, x, &label)) fail_msg("read %zu: %s", i, dt_last_error());
        assert_int_equal(label, labels[i]);
        for (int ch = 0; ch < 3; ch++)
            for (int p = 0; p < 64; p++) {
                const float v = x[ch * 64 + p];
                float want;
                if (i == 0 || i == 5) { /* the flat JPEG: within the codec's rounding */
                    want = ch == 0 ? 200 : ch == 1 ? 100 : 30;
                    if (fabsf(v - want) > 3) fail_msg("sample %zu ch %d px %d: %g, want %g +- 3", i, ch, p, v, want);
                    continue;
                }
                if (i == 1)
                    want = rgba[p * 4 + ch]; /* alpha dropped */
                else if (i == 2 || i == 4)
                    want = rgb2[p * 3 + ch];
                else if (i == 3)
                    want = rgb10[p * 3 + ch];
                else
                    want = gray[p]; /* gray repeated in every plane */
                if (v != want) fail_msg("sample %zu ch %d px %d: %g, want %g exactly", i, ch, p, v, want);
            }
    }
    assert_int_equal(ds_read(s, 7, x, &label), DT_ERR_INVALID_ARG);
    ds_close(s);

    /* Gray target: PIL's convert("L") luma of the RGB PNG, exactly. */
    s = open_ok(root, NULL, 1, 8, 8);
    assert_int_equal(ds_read(s, 3, x, &label), DT_OK);
    for (int p = 0; p < 64; p++) {
        const unsigned char *q = rgb10 + 3 * p;
        const float want = (float)((q[0] * 19595u + q[1] * 38470u + q[2] * 7471u + 0x8000u) >> 16);
        assert_true(x[p] == want);
    }
    ds_close(s);
    free(rgb10), free(rgb2), free(gray), free(rgba);
}

/* Samples 0..n-1 of s read, with labels want[0..n-1] (images of at most 4x4x3 values). */
static void expect_labels(const ds_split *s, const int *want, int n)
{
    float x[48];
    int32_t label;
    for (int i = 0; i < n; i++) {
        assert_int_equal(ds_read(s, (size_t)i, x, &label), DT_OK);
        assert_int_equal(label, want[i]);
    }
}

static void test_train_val(void **state)
{
    (void)state;
    unsigned char *p = pattern(5, 4, 4, 3);
    mkdirs("train/a");
    mkdirs("train/b");
    mkdirs("val/a");
    mkdirs("val/b");
    write_png("train/a/1.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("train/a/2.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("train/b/1.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("val/b/1.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("val/a/9.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("val/b/2.png", 4, 4, PNG_FORMAT_RGB, p);
    free(p);
    ds_split *s = open_ok(root, "train", 3, 4, 4);
    assert_int_equal(s->count, 3);
    assert_int_equal(s->classes, 2);
    ds_close(s);
    s = open_ok(root, "test", 3, 4, 4);
    assert_int_equal(s->count, 3);
    assert_string_equal(s->split, "test");
    const int want[3] = {0, 1, 1};
    expect_labels(s, want, 3);
    ds_close(s);
    const ds_open_opts fmt = {.format = "imagefolder"};
    assert_int_equal(ds_has_test_split(root, NULL), 1);
    /* Without both train/ and val/ there is no test split. */
    char flat[128];
    snprintf(flat, sizeof flat, "%s/train", root);
    expect_fail(flat, NULL, "test", 3, 4, 4, DT_ERR_INVALID_ARG, "no held-out split");
    assert_int_equal(ds_has_test_split(flat, NULL), 0);
    assert_int_equal(ds_has_test_split(flat, &fmt), 0);

    /* A val/ without one of training's classes keeps training's numbering (c is 2 in train/, and
     * would be 1 counted in val/ alone), and its class count is training's. */
    unsigned char *q = pattern(7, 4, 4, 3);
    mkdirs("train/c");
    write_png("train/c/1.png", 4, 4, PNG_FORMAT_RGB, q);
    remove(at("val/b/1.png"));
    remove(at("val/b/2.png"));
    rmdir(at("val/b"));
    mkdirs("val/c");
    write_png("val/c/5.png", 4, 4, PNG_FORMAT_RGB, q);
    s = open_ok(root, "test", 3, 4, 4);
    assert_int_equal(s->count, 2);
    assert_int_equal(s->classes, 3);
    const int want_ac[2] = {0, 2};
    expect_labels(s, want_ac, 2);
    /* Another image folder numbered like this split's train/ (dtrain train --eval-data). */
    ds_split *tr = open_ok(root, "train", 3, 4, 4);
    char val[128];
    snprintf(val, sizeof val, "%s/val", root);
    ds_split *ev = open_ok(val, "train", 3, 4, 4);
    assert_int_equal(ev->classes, 2);
    assert_int_equal(imagefolder_number_like(ev, tr), DT_OK);
    assert_int_equal(ev->classes, 3);
    expect_labels(ev, want_ac, 2);
    ds_close(ev);
    /* A training set without class names (a .dts converted from train/): the held-out folder's own
     * sorted order stands when it has every class, and one lacking a class is refused, since its
     * labels after the gap would be another class's (val/ has a and c: c would read as b). */
    ev = open_ok(val, "train", 3, 4, 4);
    ds_split named = {.classes = 2, .format = "dts"};
    snprintf(named.source, sizeof named.source, "%s", "train.dts");
    assert_int_equal(imagefolder_number_like(ev, &named), DT_OK);
    assert_int_equal(ev->classes, 2);
    const int own[2] = {0, 1};
    expect_labels(ev, own, 2);
    named.classes = 3;
    assert_int_equal(imagefolder_number_like(ev, &named), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "/val has 2 class folders but the training set train.dts (dts) has 3"));
    ds_close(ev);
    ds_close(tr);
    ds_close(s);
    /* A held-out class training does not have fails, naming it. */
    mkdirs("val/d");
    write_png("val/d/1.png", 4, 4, PNG_FORMAT_RGB, q);
    expect_fail(root, NULL, "test", 3, 4, 4, DT_ERR_INVALID_ARG, "/val/d is a class folder that");
    assert_int_equal(ds_has_test_split(root, &fmt), 1); /* there, though it does not open */
    remove(at("val/d/1.png"));
    rmdir(at("val/d"));
    /* ROOT/train alone is not one class named "train". */
    remove(at("val/a/9.png"));
    remove(at("val/c/5.png"));
    rmdir(at("val/a"));
    rmdir(at("val/c"));
    rmdir(at("val"));
    expect_fail(root, NULL, NULL, 3, 4, 4, DT_ERR_INVALID_ARG, "holds only a train/ folder");
    assert_int_equal(ds_has_test_split(root, &fmt), 0);
    expect_fail(root, NULL, "test", 3, 4, 4, DT_ERR_INVALID_ARG,
                "has train/ but no val/, valid/, validation/ or test/ beside it");
    /* Beside train/, a test/ (or valid/, validation/) folder is the held-out split, not a second
     * class; val/ first when there are several. */
    mkdirs("test/a");
    write_png("test/a/1.png", 4, 4, PNG_FORMAT_RGB, q);
    s = open_ok(root, NULL, 3, 4, 4);
    assert_int_equal(s->classes, 3); /* train/'s a, b, c: not "test" and "train" */
    ds_close(s);
    s = open_ok(root, "test", 3, 4, 4);
    assert_int_equal(s->count, 1);
    ds_close(s);
    assert_int_equal(ds_has_test_split(root, &fmt), 1);
    mkdirs("valid/c");
    write_png("valid/c/1.png", 4, 4, PNG_FORMAT_RGB, q);
    write_png("valid/c/2.png", 4, 4, PNG_FORMAT_RGB, q);
    s = open_ok(root, "test", 3, 4, 4);
    assert_int_equal(s->count, 2); /* valid/ before test/ */
    const int want_c[2] = {2, 2};
    expect_labels(s, want_c, 2);
    ds_close(s);
    free(q);
}

/* A val/ with 2 of train/'s 10 classes: every read and name stays within val's own folders while
 * the labels and the class count are training's (under ASan, a bound taken from the 10 classes
 * would read past val's tables). */
static void test_val_subset_of_many(void **state)
{
    (void)state;
    unsigned char *p = pattern(9, 4, 4, 3);
    char rel[64];
    for (int k = 0; k < 10; k++) {
        snprintf(rel, sizeof rel, "train/c%d", k);
        mkdirs(rel);
        snprintf(rel, sizeof rel, "train/c%d/1.png", k);
        write_png(rel, 4, 4, PNG_FORMAT_RGB, p);
    }
    mkdirs("val/c3");
    mkdirs("val/c8");
    write_png("val/c3/1.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("val/c8/1.png", 4, 4, PNG_FORMAT_RGB, p);
    write_png("val/c8/2.png", 4, 4, PNG_FORMAT_RGB, p);
    free(p);
    ds_split *s = open_ok(root, "test", 3, 4, 4);
    assert_int_equal(s->classes, 10);
    assert_int_equal(s->count, 3);
    const int want[3] = {3, 8, 8};
    expect_labels(s, want, 3);
    assert_string_equal(imagefolder_class_name(s, 8), "c8");
    assert_null(imagefolder_class_name(s, 9)); /* training's class, none of its images here */
    /* Numbered again by the training split (dtrain train passes it): the same labels. */
    ds_split *tr = open_ok(root, "train", 3, 4, 4);
    assert_int_equal(imagefolder_number_like(s, tr), DT_OK);
    expect_labels(s, want, 3);
    ds_close(tr);
    ds_close(s);
}

typedef struct job {
    const ds_split *s;
    float *out; /* count x 3 x 16 x 16 */
    int bad;
} job;

static void *reader_thread(void *arg)
{
    job *j = arg;
    int32_t label;
    for (int rep = 0; rep < 5; rep++)
        for (size_t i = 0; i < j->s->count; i++) {
            float x[3 * 16 * 16];
            if (ds_read(j->s, i, x, &label) || memcmp(x, j->out + i * 768, sizeof x) != 0) j->bad++;
        }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    mkdirs("a");
    mkdirs("b");
    for (int k = 0; k < 6; k++) {
        unsigned char *p = pattern(k, 40, 30, 3);
        char name[32];
        snprintf(name, sizeof name, "%s/%d.%s", k % 2 ? "a" : "b", k, k % 3 ? "jpg" : "png");
        if (k % 3)
            write_jpeg(name, 40, 30, 3, p);
        else
            write_png(name, 40, 30, PNG_FORMAT_RGB, p);
        free(p);
    }
    ds_split *s = open_ok(root, NULL, 3, 16, 16);
    float *ref = malloc(sizeof *ref * 768 * s->count);
    int32_t label;
    for (size_t i = 0; i < s->count; i++) assert_int_equal(ds_read(s, i, ref + i * 768, &label), DT_OK);
    pthread_t t[4];
    job j[4];
    for (int k = 0; k < 4; k++) {
        j[k] = (job){s, ref, 0};
        assert_int_equal(pthread_create(&t[k], NULL, reader_thread, &j[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(t[k], NULL);
        assert_int_equal(j[k].bad, 0);
    }
    free(ref);
    ds_close(s);
}

/* ------------------------------------------------------------------ refusals */

static void test_layout_errors(void **state)
{
    (void)state;
    /* No --input shape, or a bad one. */
    mkdirs("a");
    unsigned char *p = pattern(6, 4, 4, 3);
    write_png("a/1.png", 4, 4, PNG_FORMAT_RGB, p);
    expect_fail(root, NULL, NULL, 0, 0, 0, DT_ERR_INVALID_ARG, "--input 3x224x224");
    expect_fail(root, NULL, NULL, 2, 8, 8, DT_ERR_INVALID_ARG, "C must be 1");
    expect_fail(root, NULL, NULL, 3, 0, 8, DT_ERR_INVALID_ARG, "--input");
    /* An empty class folder (only a non-image in it). */
    mkdirs("empty");
    write_bytes("empty/list.txt", "x", 1);
    expect_fail(root, NULL, NULL, 3, 8, 8, DT_ERR_INVALID_ARG, "/empty has no .jpg/.jpeg/.png file");
    remove(at("empty/list.txt"));
    rmdir(at("empty"));
    /* A symlink loop below a class. */
    assert_int_equal(symlink(".", at("a/loop")), 0);
    expect_fail(root, NULL, NULL, 3, 8, 8, DT_ERR_INVALID_ARG, "symlink loop");
    remove(at("a/loop"));
    /* A FIFO named like an image is skipped, without blocking. */
    assert_int_equal(mkfifo(at("a/fifo.jpg"), 0644), 0);
    block_guard_start(10);
    ds_split *s = open_ok(root, NULL, 3, 8, 8);
    block_guard_stop();
    assert_int_equal(s->count, 1);
    ds_close(s);
    remove(at("a/fifo.jpg"));
    /* Unreadable class folder (root reads anything: then say so and skip). */
    if (geteuid() == 0) {
        print_message("note: running as root, where chmod 000 does not stop reads: unreadable-folder check skipped\n");
    } else {
        chmod(at("a"), 0);
        expect_fail(root, NULL, NULL, 3, 8, 8, DT_ERR_IO, "permission denied");
        chmod(at("a"), 0755);
    }
    /* No class folder at all: not detected as an image folder, and refused when forced. */
    remove(at("a/1.png"));
    rmdir(at("a"));
    write_png("lonely.png", 4, 4, PNG_FORMAT_RGB, p);
    expect_fail(root, NULL, NULL, 3, 8, 8, DT_ERR_INVALID_ARG, "class folders");
    expect_fail(root, "imagefolder", NULL, 3, 8, 8, DT_ERR_INVALID_ARG, "holds no class folder");
    free(p);
}

static void expect_bad_sample(ds_split *s, size_t i, const char *name, const char *in_msg)
{
    float x[3 * 8 * 8];
    int32_t label = -7;
    const dt_status st = ds_read(s, i, x, &label);
    if (st != DT_ERR_CORRUPT || !strstr(dt_last_error(), name) || !strstr(dt_last_error(), in_msg))
        fail_msg("sample %zu: status %d, message '%s' (want DT_ERR_CORRUPT naming %s, with '%s')", i, st,
                 dt_last_error(), name, in_msg);
    assert_int_equal(label, -7);
}

static void test_bad_images(void **state)
{
    (void)state;
    mkdirs("k");
    unsigned char *p = pattern(7, 16, 16, 3);
    unsigned long n;
    unsigned char *jpg = jpeg_bytes(16, 16, 3, p, &n);
    write_bytes("k/a_text.jpg", "this is not a JPEG at all", 25);
    write_bytes("k/b_cut.jpg", jpg, n / 2);
    write_bytes("k/c_empty.png", "", 0);
    write_png("k/d_full.png", 16, 16, PNG_FORMAT_RGB, p);
    FILE *f = fopen(at("k/d_full.png"), "rb");
    unsigned char png[4096];
    const size_t pn = fread(png, 1, sizeof png, f);
    fclose(f);
    write_bytes("k/e_cut.png", png, pn - 30);
    unsigned char jhead[16];
    memcpy(jhead, jpg, sizeof jhead);
    write_bytes("k/f_head.jpg", jhead, sizeof jhead);
    ds_split *s = open_ok(root, NULL, 3, 8, 8);
    assert_int_equal(s->count, 6);
    expect_bad_sample(s, 0, "a_text.jpg", "neither JPEG");
    expect_bad_sample(s, 1, "b_cut.jpg", "cannot be decoded as JPEG");
    expect_bad_sample(s, 2, "c_empty.png", "empty");
    float x[3 * 8 * 8];
    int32_t label;
    assert_int_equal(ds_read(s, 3, x, &label), DT_OK);
    expect_bad_sample(s, 4, "e_cut.png", "cannot be decoded as PNG");
    expect_bad_sample(s, 5, "f_head.jpg", "cannot be decoded as JPEG");
    assert_non_null(strstr(dt_last_error(), "--bad-samples skip"));
    ds_close(s);
    tjFree(jpg);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layout_and_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_train_val, setup, teardown),
        cmocka_unit_test_setup_teardown(test_val_subset_of_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_images, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
