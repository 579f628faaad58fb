/*
 * test_image_decode.c - the decoder under the image-folder reader (runtime/data/image_decode.c):
 * 16-bit PNGs, the resize + centre crop geometry against values worked out by hand and against a
 * double-precision reference of PIL's filter, DCT scaling close to a full decode, CMYK JPEGs.
 */
#include "image_fixture.h"

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
            if (y < 4 || y >= 12)
                assert_true(v == 0);
            else if (c < 3)
                assert_true(fabsf(v - 200) < 1e-3f);
            else if (c > 4)
                assert_true(fabsf(v - 40) < 1e-3f);
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
    static const int shapes[][5] = {
        /* source w, h, nc; target c, side (square) or -h x w below */
        {97, 61, 3, 3, 32},  {97, 61, 3, 3, 200},  {97, 61, 3, 1, 24}, {150, 90, 3, 3, 30},
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
                                                               px[3 * i + 2] * 7471u + 0x8000u) >>
                                                              16);
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
        if (worst > 0.01) fail_msg("%dx%dx%d to %dx%dx%d: %g levels from the reference", sw, sh, nc, c, oh, ow, worst);
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

/* DCT scaling only from twice the target (PIL's reducing_gap): a 320 x 240 photo to 3x100x100
 * would be 160 x 120 at 1/2, which is less, so it is decoded at full size, bit for bit the same as
 * with IMG_NO_DCT_SCALE (at 1/2 a detailed image came out up to 20 levels off torchvision's). */
static void test_dct_scaling_gap(void **state)
{
    (void)state;
    const int w = 320, h = 240;
    unsigned char *px = malloc((size_t)w * h * 3);
    assert_non_null(px);
    unsigned r = 12345;
    for (int i = 0; i < w * h * 3; i++) {
        r = r * 1664525u + 1013904223u; /* detail in every block: what the reduced IDCT drops */
        px[i] = (unsigned char)(r >> 24);
    }
    unsigned long n;
    unsigned char *jpg = jpeg_bytes(w, h, 3, px, &n);
    static float a[3 * 100 * 100], b[3 * 100 * 100];
    assert_int_equal(image_decode("photo.jpg", jpg, n, 3, 100, 100, 0, a), DT_OK);
    assert_int_equal(image_decode("photo.jpg", jpg, n, 3, 100, 100, IMG_NO_DCT_SCALE, b), DT_OK);
    for (int i = 0; i < 3 * 100 * 100; i++)
        if (a[i] != b[i]) fail_msg("value %d: %g with DCT scaling allowed, %g at full size", i, a[i], b[i]);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_png16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_crop_geometry, setup, teardown),
        cmocka_unit_test(test_resize_reference),
        cmocka_unit_test_setup_teardown(test_dct_scaling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dct_scaling_gap, setup, teardown),
        cmocka_unit_test(test_cmyk_jpeg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
