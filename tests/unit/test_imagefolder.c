/*
 * test_imagefolder.c - the image-folder reader (runtime/data/imagefolder.c) and the decoder under it
 * (image_decode.c), on folders this test writes with TurboJPEG and libpng in a temp directory:
 * class order and labels (strcmp order, nested folders, ignored files), pixel values read back
 * (PNG exactly, JPEG within the codec's error), gray/RGBA/16-bit conversions, the resize + centre
 * crop geometry against values worked out by hand, DCT scaling close to a full decode, the
 * train/val split, reads from several threads at once, and every refusal: empty class folder, no
 * class folder, unreadable folder, no or bad --input shape, undecodable / truncated / empty
 * images (DT_ERR_CORRUPT naming the file), a FIFO named like an image, a symlink loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block_guard.h"

#include "data/image_decode.h"
#include "data/reader.h"
#include "dtrain.h"

#include <ftw.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

static char root[64];

static const char *at(const char *rel)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", root, rel);
    return p[k];
}

static void mkdirs(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s", at(rel));
    for (char *s = p + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void write_bytes(const char *rel, const void *b, size_t n)
{
    FILE *f = fopen(at(rel), "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* A PNG of w x h pixels in libpng's simplified format fmt (PNG_FORMAT_RGB, _GRAY, _RGBA, ...). */
static void write_png(const char *rel, int w, int h, png_uint_32 fmt, const void *px)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = fmt;
    assert_int_not_equal(png_image_write_to_file(&im, at(rel), 0, px, 0, NULL), 0);
}

/* A JPEG at quality 100 (4:4:4 or gray): its bytes, tjFree() them. */
static unsigned char *jpeg_bytes(int w, int h, int nc, const unsigned char *px, unsigned long *len)
{
    tjhandle tj = tjInitCompress();
    assert_non_null(tj);
    unsigned char *out = NULL;
    *len = 0;
    assert_int_equal(tjCompress2(tj, px, w, 0, h, nc == 1 ? TJPF_GRAY : TJPF_RGB, &out, len,
                                 nc == 1 ? TJSAMP_GRAY : TJSAMP_444, 100, 0), 0);
    tjDestroy(tj);
    return out;
}

static void write_jpeg(const char *rel, int w, int h, int nc, const unsigned char *px)
{
    unsigned long n;
    unsigned char *b = jpeg_bytes(w, h, nc, px, &n);
    write_bytes(rel, b, n);
    tjFree(b);
}

/* The pattern of an 8x8 test image: value of channel ch at (x, y), seeded per image. */
static unsigned char pat(int seed, int x, int y, int ch) { return (unsigned char)(seed * 37 + x * 29 + y * 11 + ch * 83); }

static unsigned char *pattern(int seed, int w, int h, int nc)
{
    unsigned char *p = malloc((size_t)w * h * nc);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < nc; ch++) p[((size_t)y * w + x) * nc + ch] = pat(seed, x, y, ch);
    return p;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    chmod(p, 0755);
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/dt-imgf-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static ds_split *open_ok(const char *path, const char *split, int c, int h, int w)
{
    ds_open_opts o = {.split = split, .c = c, .h = h, .w = w};
    ds_split *s = NULL;
    dt_status st = ds_open(path, &o, &s);
    if (st) fail_msg("ds_open(%s): %s", path, dt_last_error());
    return s;
}

static void expect_fail(const char *path, const char *format, const char *split, int c, int h, int w,
                        dt_status want, const char *in_msg)
{
    ds_open_opts o = {.format = format, .split = split, .c = c, .h = h, .w = w};
    ds_split *s = NULL;
    dt_status st = ds_open(path, &o, &s);
    if (st != want || !strstr(dt_last_error(), in_msg))
        fail_msg("ds_open(%s): status %d (want %d), message '%s' (want '%s' in it)", path, st, want, dt_last_error(),
                 in_msg);
    assert_null(s);
}

/* ------------------------------------------------------------------ layout, order, values */

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
                if (i == 1) want = rgba[p * 4 + ch]; /* alpha dropped */
                else if (i == 2 || i == 4) want = rgb2[p * 3 + ch];
                else if (i == 3) want = rgb10[p * 3 + ch];
                else want = gray[p]; /* gray repeated in every plane */
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

/* 16-bit RGB PNG: the high byte of each sample (as PIL). */
static void test_png16(void **state)
{
    (void)state;
    uint16_t px[4 * 4 * 3];
    for (int i = 0; i < 48; i++) px[i] = (uint16_t)(i * 1361 + 77);
    mkdirs("k");
    write_png("k/a.png", 4, 4, PNG_FORMAT_LINEAR_RGB, px);
    ds_split *s = open_ok(root, NULL, 3, 4, 4);
    float x[48];
    int32_t label;
    assert_int_equal(ds_read(s, 0, x, &label), DT_OK);
    /* The simplified writer stores linear 16-bit values as they are: read them back from the
     * file with the simplified reader too (same bytes), and check image_decode kept the high byte. */
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    assert_int_not_equal(png_image_begin_read_from_file(&im, at("k/a.png")), 0);
    assert_int_equal(im.format & PNG_FORMAT_FLAG_LINEAR, PNG_FORMAT_FLAG_LINEAR);
    uint16_t back[48];
    im.format = PNG_FORMAT_LINEAR_RGB;
    assert_int_not_equal(png_image_finish_read(&im, NULL, back, 0, NULL), 0);
    for (int p = 0; p < 16; p++)
        for (int ch = 0; ch < 3; ch++) assert_true(x[ch * 16 + p] == (float)(back[p * 3 + ch] >> 8));
    ds_close(s);
}

/* ------------------------------------------------------------------ geometry */

static void test_resize_crop_geometry(void **state)
{
    (void)state;
    /* 64 wide, 32 high: left half 200, right half 40. */
    unsigned char px[64 * 32 * 3];
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 64; x++)
            for (int ch = 0; ch < 3; ch++) px[(y * 64 + x) * 3 + ch] = x < 32 ? 200 : 40;
    mkdirs("c");
    write_png("c/halves.png", 64, 32, PNG_FORMAT_RGB, px);
    ds_split *s = open_ok(root, NULL, 3, 16, 16);
    float x[3 * 16 * 16];
    int32_t label;
    assert_int_equal(ds_read(s, 0, x, &label), DT_OK);
    /* Resize(16): 32 x 16, crop columns 8..23; the edge at resized column 16 = output column 8.
     * Column 15's filter (support 2 at scale 2) takes source 29..32 with weights 1,3,3,1 / 8:
     * 200 * 7/8 + 40/8 = 180; column 16 mirrors it: 60. */
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 16; y++)
            for (int c = 0; c < 16; c++) {
                const float want = c < 7 ? 200 : c == 7 ? 180 : c == 8 ? 60 : 40;
                const float v = x[ch * 256 + y * 16 + c];
                if (fabsf(v - want) > 1e-3f) fail_msg("ch %d (%d, %d): %g, want %g", ch, c, y, v, want);
            }
    ds_close(s);
    /* 16 high, 8 wide: Resize(8) gives 16 x 8, so 4 zero rows above and below (CenterCrop pads),
     * columns 4..11 of the resized image. */
    s = open_ok(root, NULL, 3, 16, 8);
    float z[3 * 16 * 8];
    assert_int_equal(ds_read(s, 0, z, &label), DT_OK);
    for (int y = 0; y < 16; y++)
        for (int c = 0; c < 8; c++) {
            const float v = z[y * 8 + c];
            if (y < 4 || y >= 12) assert_true(v == 0);
            else if (c < 3) assert_true(fabsf(v - 200) < 1e-3f);
            else if (c > 4) assert_true(fabsf(v - 40) < 1e-3f);
        }
    ds_close(s);
}

/* The resample against a direct double-precision one of PIL's bilinear filter (a triangle whose
 * support grows with the downscale factor, weights normalized per output pixel), 2-D over the
 * whole resized image, then torchvision's centre crop: noise PNGs (RGB and gray) to shapes that
 * upscale (3 taps), downscale by up to 2, 3 and 6 (5, 7 and 13 taps: the last is the generic
 * loop), pad (CenterCrop larger than the resized side) and gray from RGB. */
static int ref_taps(int in_len, int64_t out_len, int64_t i, double *wt)
{
    const double scale = (double)in_len / (double)out_len, fs = scale > 1 ? scale : 1;
    const double center = ((double)i + 0.5) * scale;
    int lo = (int)floor(center - fs + 0.5), hi = (int)floor(center + fs + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in_len) hi = in_len;
    double sum = 0;
    for (int k = lo; k < hi; k++) {
        const double x = fabs((k - center + 0.5) / fs);
        wt[k - lo] = x < 1 ? 1 - x : 0;
        sum += wt[k - lo];
    }
    for (int k = lo; k < hi; k++) wt[k - lo] /= sum;
    wt[hi - lo] = -1; /* end mark */
    return lo;
}

static int64_t ref_crop(int64_t len, int crop)
{
    if (len < crop) return -((crop - len) / 2);
    const int64_t d = len - crop, k = d / 2;
    return d % 2 == 0 || k % 2 == 0 ? k : k + 1;
}

static void test_resize_reference(void **state)
{
    (void)state;
    static const int shapes[][5] = { /* source w, h, nc; target c, side (square) or -h x w below */
        {97, 61, 3, 3, 32}, {97, 61, 3, 3, 200}, {97, 61, 3, 1, 24}, {150, 90, 3, 3, 30},
        {90, 150, 1, 3, 15}, {300, 180, 3, 3, 30}, {61, 97, 3, 3, -1}, {400, 23, 1, 1, -2},
    };
    static const int rect[][2] = {{0, 0}, {40, 20}, {31, 50}}; /* -1, -2: h x w */
    uint32_t seed = 12345;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        const int sw = shapes[t][0], sh = shapes[t][1], nc = shapes[t][2], c = shapes[t][3];
        const int oh = shapes[t][4] > 0 ? shapes[t][4] : rect[-shapes[t][4]][0];
        const int ow = shapes[t][4] > 0 ? shapes[t][4] : rect[-shapes[t][4]][1];
        unsigned char *px = malloc((size_t)sw * sh * nc);
        assert_non_null(px);
        for (int i = 0; i < sw * sh * nc; i++) px[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 24);
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION, im.width = (png_uint_32)sw, im.height = (png_uint_32)sh;
        im.format = nc == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
        png_alloc_size_t n = 0;
        assert_int_not_equal(png_image_write_to_memory(&im, NULL, &n, 0, px, 0, NULL), 0);
        unsigned char *png = malloc(n);
        assert_non_null(png);
        assert_int_not_equal(png_image_write_to_memory(&im, png, &n, 0, px, 0, NULL), 0);
        float *out = malloc(sizeof *out * (size_t)c * oh * ow);
        assert_non_null(out);
        assert_int_equal(image_decode("ref.png", png, n, c, oh, ow, 0, out), DT_OK);
        /* The source as the resample sees it: gray by PIL's luma when the target is gray. */
        const int sc = c == 1 ? 1 : nc;
        unsigned char *src = malloc((size_t)sw * sh * sc);
        assert_non_null(src);
        for (int i = 0; i < sw * sh; i++)
            for (int ch = 0; ch < sc; ch++)
                src[i * sc + ch] = nc == sc ? px[i * nc + ch]
                                            : (unsigned char)((px[3 * i] * 19595u + px[3 * i + 1] * 38470u +
                                                               px[3 * i + 2] * 7471u + 0x8000u) >> 16);
        const int S = oh < ow ? oh : ow;
        const int64_t rw = sw <= sh ? S : (int64_t)((double)S * sw / sh);
        const int64_t rh = sw <= sh ? (int64_t)((double)S * sh / sw) : S;
        const int64_t y0 = ref_crop(rh, oh), x0 = ref_crop(rw, ow);
        double wy[64], wx[64], worst = 0;
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                for (int ch = 0; ch < c; ch++) {
                    const int64_t Y = y0 + y, X = x0 + x;
                    double want = 0;
                    if (Y >= 0 && Y < rh && X >= 0 && X < rw) {
                        const int ly = ref_taps(sh, rh, Y, wy), lx = ref_taps(sw, rw, X, wx);
                        for (int j = 0; wy[j] >= 0; j++)
                            for (int i = 0; wx[i] >= 0; i++)
                                want += wy[j] * wx[i] * src[((size_t)(ly + j) * sw + lx + i) * sc + (sc == 1 ? 0 : ch)];
                    }
                    const double d = fabs(out[((size_t)ch * oh + y) * ow + x] - want);
                    if (d > worst) worst = d;
                }
        if (worst > 0.01)
            fail_msg("%dx%dx%d to %dx%dx%d: %g levels from the reference", sw, sh, nc, c, oh, ow, worst);
        free(src);
        free(out);
        free(png);
        free(px);
    }
}

/* A 512 x 256 smooth JPEG to 3x32x32: DCT scaling (1/8 here) stays close to the full decode, and a
 * PNG of the same pixels upscaled 4 x 2 to 3x64x64... stays in 0..255. */
static void test_dct_scaling(void **state)
{
    (void)state;
    const int w = 512, h = 256;
    unsigned char *px = malloc((size_t)w * h * 3);
    assert_non_null(px);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            px[(y * w + x) * 3] = (unsigned char)(x / 2);
            px[(y * w + x) * 3 + 1] = (unsigned char)y;
            px[(y * w + x) * 3 + 2] = (unsigned char)((x + y) / 3);
        }
    unsigned long n;
    unsigned char *jpg = jpeg_bytes(w, h, 3, px, &n);
    float a[3 * 32 * 32], b[3 * 32 * 32];
    assert_int_equal(image_decode("big.jpg", jpg, n, 3, 32, 32, 0, a), DT_OK);
    assert_int_equal(image_decode("big.jpg", jpg, n, 3, 32, 32, IMG_NO_DCT_SCALE, b), DT_OK);
    double diff = 0;
    for (int i = 0; i < 3 * 32 * 32; i++) diff += fabs(a[i] - b[i]);
    diff /= 3 * 32 * 32;
    if (diff > 2) fail_msg("DCT-scaled decode differs from the full one by %g on average", diff);
    /* Red at the centre column of the crop: resized 64 x 32, columns 16..47; value ~ x/2 of the
     * source x = (16 + 16 + 0.5) * 8 = 260 -> 130. */
    assert_true(fabsf(b[16 * 32 + 16] - 130) < 3);
    tjFree(jpg);
    free(px);
}

/* A CMYK JPEG (TurboJPEG writes Adobe's inverted values as given, as YCCK) comes out as RGB with
 * R = C*K/255 on those values, as PIL converts it. */
static void test_cmyk_jpeg(void **state)
{
    (void)state;
    unsigned char px[8 * 8 * 4];
    for (int i = 0; i < 64; i++) px[4 * i] = 200, px[4 * i + 1] = 100, px[4 * i + 2] = 50, px[4 * i + 3] = 128;
    tjhandle tj = tjInitCompress();
    assert_non_null(tj);
    unsigned char *jpg = NULL;
    unsigned long n = 0;
    assert_int_equal(tjCompress2(tj, px, 8, 0, 8, TJPF_CMYK, &jpg, &n, TJSAMP_444, 100, 0), 0);
    tjDestroy(tj);
    float x[3 * 8 * 8];
    assert_int_equal(image_decode("cmyk.jpg", jpg, n, 3, 8, 8, 0, x), DT_OK);
    const float want[3] = {200 * 128 / 255.f, 100 * 128 / 255.f, 50 * 128 / 255.f};
    for (int ch = 0; ch < 3; ch++)
        for (int p = 0; p < 64; p++)
            if (fabsf(x[ch * 64 + p] - want[ch]) > 3) fail_msg("ch %d: %g, want %g", ch, x[ch * 64 + p], want[ch]);
    tjFree(jpg);
}

/* ------------------------------------------------------------------ splits, threads */

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
    float x[48];
    int32_t label;
    const int want[3] = {0, 1, 1};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ds_read(s, (size_t)i, x, &label), DT_OK);
        assert_int_equal(label, want[i]);
    }
    ds_close(s);
    /* Without both train/ and val/ there is no test split. */
    char flat[128];
    snprintf(flat, sizeof flat, "%s/train", root);
    expect_fail(flat, NULL, "test", 3, 4, 4, DT_ERR_INVALID_ARG, "no held-out split");
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
        if (k % 3) write_jpeg(name, 40, 30, 3, p);
        else write_png(name, 40, 30, PNG_FORMAT_RGB, p);
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
        cmocka_unit_test_setup_teardown(test_png16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_crop_geometry, setup, teardown),
        cmocka_unit_test(test_resize_reference),
        cmocka_unit_test_setup_teardown(test_dct_scaling, setup, teardown),
        cmocka_unit_test(test_cmyk_jpeg),
        cmocka_unit_test_setup_teardown(test_train_val, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_images, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
