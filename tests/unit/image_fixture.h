/*
 * image_fixture.h - what the image-folder and image-decode tests share: a temp root they write
 * into, writers of JPEG (TurboJPEG) and PNG (libpng) files, pixel patterns, and ds_open helpers
 * that expect success or a given refusal.
 */
#ifndef DT_TESTS_IMAGE_FIXTURE_H
#define DT_TESTS_IMAGE_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block_guard.h"

#include "runtime/data/image_decode.h"
#include "runtime/data/reader.h"
#include "dtrain.h"
#include "tmp_dir.h"

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

static inline const char *at(const char *rel)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", root, rel);
    return p[k];
}

static inline void mkdirs(const char *rel)
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

static inline void write_bytes(const char *rel, const void *b, size_t n)
{
    FILE *f = fopen(at(rel), "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* A PNG of w x h pixels in libpng's simplified format fmt (PNG_FORMAT_RGB, _GRAY, _RGBA, ...). */
static inline void write_png(const char *rel, int w, int h, png_uint_32 fmt, const void *px)
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
static inline unsigned char *jpeg_bytes(int w, int h, int nc, const unsigned char *px, unsigned long *len)
{
    tjhandle tj = tjInitCompress();
    assert_non_null(tj);
    unsigned char *out = NULL;
    *len = 0;
    assert_int_equal(tjCompress2(tj, px, w, 0, h, nc == 1 ? TJPF_GRAY : TJPF_RGB, &out, len,
                                 nc == 1 ? TJSAMP_GRAY : TJSAMP_444, 100, 0),
                     0);
    tjDestroy(tj);
    return out;
}

static inline void write_jpeg(const char *rel, int w, int h, int nc, const unsigned char *px)
{
    unsigned long n;
    unsigned char *b = jpeg_bytes(w, h, nc, px, &n);
    write_bytes(rel, b, n);
    tjFree(b);
}

/* The pattern of an 8x8 test image: value of channel ch at (x, y), seeded per image. */
static inline unsigned char pat(int seed, int x, int y, int ch)
{
    return (unsigned char)(seed * 37 + x * 29 + y * 11 + ch * 83);
}

static inline unsigned char *pattern(int seed, int w, int h, int nc)
{
    unsigned char *p = malloc((size_t)w * h * nc);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < nc; ch++) p[((size_t)y * w + x) * nc + ch] = pat(seed, x, y, ch);
    return p;
}

static inline int setup(void **state)
{
    (void)state;
    return tmp_dir_make(root, sizeof root, "dt-imgf");
}

static inline int teardown(void **state)
{
    (void)state;
    return tmp_dir_remove(root);
}

static inline ds_split *open_ok(const char *path, const char *split, int c, int h, int w)
{
    ds_open_opts o = {.split = split, .c = c, .h = h, .w = w};
    ds_split *s = NULL;
    dt_status st = ds_open(path, &o, &s);
    if (st) fail_msg("ds_open(%s): %s", path, dt_last_error());
    return s;
}

static inline void expect_fail(const char *path, const char *format, const char *split, int c, int h, int w,
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

#endif
