/*
 * image_decode.c - JPEG (TurboJPEG) and PNG (libpng) files from memory to C x H x W floats, resized
 * and centre-cropped as torchvision's Resize(S) + CenterCrop((H, W)) with S = min(H, W)
 * (image_decode.h).
 *
 * Three steps: decode to 8-bit interleaved pixels with 1 or 3 channels (gray when the target is
 * gray or the source is; RGB otherwise); resample the part of the resized image that the crop
 * keeps, separably, with PIL's bilinear filter (a triangle whose support grows with the downscale
 * factor, so downscaling averages every source pixel: antialiased, as PIL's Image.resize that
 * torchvision calls); write it channel-major, repeating a gray channel for an RGB target. The
 * resample runs in float without PIL's 8-bit rounding between the two passes, so values can
 * differ from PIL's by about one level.
 *
 * Everything a file says is untrusted: the pixel count is bounded before any allocation, libpng's
 * errors come back through setjmp with their message, TurboJPEG stops at the first warning (a
 * truncated file is an error, as PIL's "image file is truncated") and limits progressive scans.
 */
#include "runtime/data/image_decode.h"
#include "base/status.h"

#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Decoded pixels: w x h x nc bytes, rows packed; ow, oh: the image's own size before any DCT
 * scaling (the resized shape is computed from it, so scaling never changes the geometry). */
typedef struct img_raw {
    unsigned char *px;
    int w, h, nc;
    int ow, oh;
} img_raw;

/* Every command that decodes images says it (data convert, info, verify, bench data, eval, train);
 * only training takes --bad-samples, so the hint names the command that does. */
static const char fix_hint[] = "fix or remove the file, or train with --bad-samples skip";

/* ------------------------------------------------------------------ JPEG */

/* The smallest DCT scaling factor of 1/2, 1/4 or 1/8 whose scaled shorter side is still at least
 * twice target_short; 1/1 when none is. The factor 2 is PIL's reducing_gap: libjpeg's scaled IDCT
 * is a box-like reduction, and a resample from barely above the target lets it set the result (on
 * 320x240 photos to 100x100 from the 1/2 scale: up to 20 levels from torchvision's full-size
 * decode, mean 1.1); from twice the target the filter averages it out (measured on 200 such photos
 * against torchvision: at most 3.1 levels at 32x32, 1.0 at 64-160, mean 0.27-0.29, where the
 * full-size decode gives 0.8-1.0 and 0.26-0.29). */
static tjscalingfactor pick_scale(int w, int h, int target_short)
{
    tjscalingfactor best = {1, 1};
    int n = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&n);
    const int short_side = w < h ? w : h;
    for (int i = 0; sf && i < n; i++) {
        /* Only 1/2, 1/4 and 1/8, the reduced IDCTs libjpeg-turbo has in SIMD: the others (3/8,
         * 5/8..7/8) are plain C and decode a 500x375 photo no faster than 1/1 or slower (measured:
         * 1/1 1.9 ms, 7/8 3.4, 3/4 2.6, 5/8 2.0, 1/2 1.2, 1/4 1.1); factors above 1 would upscale. */
        if (sf[i].num != 1 || (sf[i].denom != 2 && sf[i].denom != 4 && sf[i].denom != 8)) continue;
        if (TJSCALED(short_side, sf[i]) < 2 * target_short) continue;
        if ((double)sf[i].num / sf[i].denom < (double)best.num / best.denom) best = sf[i];
    }
    return best;
}

/* CMYK as libjpeg returns it from Adobe files (inverted: 255 = no ink) to RGB in place. */
static void cmyk_to_rgb(unsigned char *px, size_t pixels)
{
    for (size_t i = 0; i < pixels; i++) {
        const unsigned k = px[4 * i + 3];
        for (int ch = 0; ch < 3; ch++) px[3 * i + ch] = (unsigned char)((px[4 * i + ch] * k + 127) / 255);
    }
}

static dt_status decode_jpeg(const char *name, const unsigned char *data, size_t len, int c, int target_short,
                             unsigned flags, img_raw *r)
{
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return status_set_error(DT_ERR_NOMEM, "cannot start a JPEG decoder for %s: %s", name, tjGetErrorStr2(NULL));
    dt_status st = DT_OK;
    int w = 0, h = 0, subsamp = 0, cs = 0;
    if (len > (unsigned long)-1 || tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &cs) != 0) {
        st = status_set_error(DT_ERR_CORRUPT, "%s cannot be decoded as JPEG: %s; %s", name, tjGetErrorStr2(tj),
                              fix_hint);
        goto done;
    }
    if (w < 1 || h < 1) { /* a header cut short before its frame marker can come back "fine" */
        st = status_set_error(DT_ERR_CORRUPT,
                              "%s cannot be decoded as JPEG: its header gives no image size (%d x %d; "
                              "cut short?); %s",
                              name, w, h, fix_hint);
        goto done;
    }
    if ((uint64_t)w * (uint64_t)h > IMG_MAX_PIXELS) {
        st = status_set_error(DT_ERR_CORRUPT,
                              "%s: a JPEG of %d x %d pixels is more than dtrain decodes (%u pixels); "
                              "shrink it, or %s",
                              name, w, h, IMG_MAX_PIXELS, fix_hint);
        goto done;
    }
    const tjscalingfactor sf = flags & IMG_NO_DCT_SCALE ? (tjscalingfactor){1, 1} : pick_scale(w, h, target_short);
    const int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    /* libjpeg converts YCbCr to gray by keeping Y: the same 601 luma as PIL's convert("L"). CMYK
     * cannot go to gray or RGB inside libjpeg, so it comes out as CMYK and is converted here. */
    const int pf = cmyk ? TJPF_CMYK : c == 1 ? TJPF_GRAY : TJPF_RGB;
    const int sw = TJSCALED(w, sf), sh = TJSCALED(h, sf);
    r->px = malloc((size_t)sw * (size_t)sh * (size_t)tjPixelSize[pf]);
    if (!r->px) {
        st = status_set_error(DT_ERR_NOMEM, "out of memory decoding %s (%d x %d pixels)", name, sw, sh);
        goto done;
    }
    if (tjDecompress2(tj, data, (unsigned long)len, r->px, sw, 0, sh, pf, TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)) {
        st = status_set_error(DT_ERR_CORRUPT, "%s cannot be decoded as JPEG: %s; %s", name, tjGetErrorStr2(tj),
                              fix_hint);
        goto done;
    }
    r->w = sw, r->h = sh, r->ow = w, r->oh = h;
    r->nc = pf == TJPF_GRAY ? 1 : 3;
    if (cmyk) cmyk_to_rgb(r->px, (size_t)sw * (size_t)sh);
done:
    tjDestroy(tj);
    if (st) {
        free(r->px);
        r->px = NULL;
    }
    return st;
}

/* ------------------------------------------------------------------ PNG */

/* What the libpng callbacks share; it lives in decode_png's frame, not in the frame that calls
 * setjmp, so its fields keep their values across the longjmp (C11 7.13.2.1). */
typedef struct png_ctx {
    const unsigned char *data;
    size_t len, at;
    char msg[200];
    unsigned char *px;
} png_ctx;

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    png_ctx *p = png_get_io_ptr(png);
    if (n > p->len - p->at) png_error(png, "the file ends early (truncated)");
    memcpy(out, p->data + p->at, n);
    p->at += n;
}

static void png_fail(png_structp png, png_const_charp msg)
{
    png_ctx *p = png_get_error_ptr(png);
    snprintf(p->msg, sizeof p->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* Reads the PNG into p->px; 0, or -1 with the reason in p->msg. */
static int png_run(png_ctx *p, img_raw *r)
{
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, p, png_fail, png_warn);
    if (!png) {
        snprintf(p->msg, sizeof p->msg, "out of memory");
        return -1;
    }
    png_infop info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) {
        if (!info) snprintf(p->msg, sizeof p->msg, "out of memory");
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        return -1;
    }
    png_set_read_fn(png, p, png_read_mem);
    png_read_info(png, info);
    const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((uint64_t)w * h > IMG_MAX_PIXELS) {
        snprintf(p->msg, sizeof p->msg, "%u x %u pixels is more than dtrain decodes (%u pixels)", (unsigned)w,
                 (unsigned)h, IMG_MAX_PIXELS);
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    const int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    /* To 8-bit gray or RGB, as PIL's convert("RGB") / convert("L") sees the file: palette
     * entries become their colours, transparency (an alpha channel or tRNS) is dropped, 16-bit
     * samples keep their high byte (PIL too, for RGB; a 16-bit gray file it clips to 255 instead,
     * which is no image: the high byte is what the file shows). */
    if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int nc = png_get_channels(png, info);
    const size_t rowbytes = png_get_rowbytes(png, info);
    if ((nc != 1 && nc != 3) || rowbytes != (size_t)w * (size_t)nc) {
        snprintf(p->msg, sizeof p->msg, "unexpected layout after conversion (%d channels, %zu bytes a row)", nc,
                 rowbytes);
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    p->px = malloc(rowbytes * h);
    if (!p->px) png_error(png, "out of memory");
    /* Row by row rather than png_read_image, whose row-pointer array would be 8 bytes a row: 2 GiB
     * for a 1-pixel-wide image of IMG_MAX_PIXELS rows. An interlaced file is read in its passes. */
    for (int pass = 0; pass < passes; pass++)
        for (png_uint_32 y = 0; y < h; y++) png_read_row(png, p->px + rowbytes * y, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    r->w = r->ow = (int)w, r->h = r->oh = (int)h, r->nc = nc;
    return 0;
}

static dt_status decode_png(const char *name, const unsigned char *data, size_t len, img_raw *r)
{
    png_ctx p = {.data = data, .len = len};
    const int rc = png_run(&p, r);
    if (rc) {
        free(p.px);
        return status_set_error(DT_ERR_CORRUPT, "%s cannot be decoded as PNG: %s; %s", name, p.msg, fix_hint);
    }
    r->px = p.px;
    return DT_OK;
}

/* ------------------------------------------------------------------ resize + crop */

/* RGB to gray in place, PIL's convert("L"): L = (19595 R + 38470 G + 7471 B + 2^15) >> 16. */
static void rgb_to_gray(unsigned char *px, size_t pixels)
{
    for (size_t i = 0; i < pixels; i++)
        px[i] = (unsigned char)((px[3 * i] * 19595u + px[3 * i + 1] * 38470u + px[3 * i + 2] * 7471u + 0x8000u) >> 16);
}

/* One axis of the resample: for output positions first .. first+n-1 of a resized length out_len
 * taken from in_len source pixels, each its first source pixel, tap count and k weights (PIL's
 * precompute_coeffs with the bilinear filter: support 1 scaled by the downscale factor). Every
 * position has k weights, those past its taps zero, so the horizontal pass runs one fixed-length
 * loop without branches; lo..hi: the source pixels any position reads. */
typedef struct axis {
    int n, k, lo, hi;
    int *start, *taps;
    float *wt; /* n x k */
} axis;

/* The tap count of an axis: 2 ceil(support) + 1 with support max(in_len / out_len, 1). */
static int axis_ksize(int in_len, double out_len)
{
    const double scale = in_len / out_len;
    return (int)ceil(scale > 1 ? scale : 1) * 2 + 1;
}

/* Fills a (its arrays given, k = axis_ksize weights a position) for positions first .. first+n-1. */
static void axis_fill(axis *a, int in_len, double out_len, int64_t first, int n)
{
    const double scale = in_len / out_len;
    const double fs = scale > 1 ? scale : 1;
    const double support = fs;
    const int ksize = a->k;
    a->n = n;
    a->lo = in_len, a->hi = 0;
    for (int i = 0; i < n; i++) {
        const double center = ((double)(first + i) + 0.5) * scale;
        int lo = (int)fmax(center - support + 0.5, 0);
        int hi = (int)fmin(center + support + 0.5, in_len);
        if (hi - lo > ksize) hi = lo + ksize;
        if (lo >= in_len) lo = in_len - 1, hi = in_len;
        float *wt = a->wt + (size_t)i * ksize;
        double sum = 0;
        for (int k = 0; k < hi - lo; k++) {
            const double x = fabs((lo + k - center + 0.5) / fs);
            wt[k] = x < 1 ? (float)(1 - x) : 0.f;
            sum += wt[k];
        }
        if (sum <= 0) { /* cannot happen for a triangle over its support; keep the nearest pixel */
            lo = (int)fmin(fmax(center, 0), in_len - 1), hi = lo + 1, wt[0] = 1, sum = 1;
        }
        for (int k = 0; k < hi - lo; k++) wt[k] = (float)(wt[k] / sum);
        for (int k = hi - lo; k < ksize; k++) wt[k] = 0;
        a->start[i] = lo;
        a->taps[i] = hi - lo;
        if (lo < a->lo) a->lo = lo;
        if (hi > a->hi) a->hi = hi;
    }
}
/* Where the crop of `crop` starts in a resized length `len`: torchvision's CenterCrop pads a short
 * side by (crop - len) // 2 before (a negative start here), else starts at round((len - crop) / 2)
 * with Python's round half to even. */
static int64_t crop_start(int64_t len, int crop)
{
    if (len < crop) return -((crop - len) / 2);
    const int64_t d = len - crop, k = d / 2;
    return d % 2 == 0 ? k : (k % 2 == 0 ? k : k + 1);
}

/* At most 255. A sum of the (non-negative) source values with non-negative weights is never below
 * 0, but the weights' float rounding can take it a hair above 255. Written as the comparison
 * minss makes, so it compiles to that, not a branch. */
static inline float clamp255(float v) { return v < 255.f ? v : 255.f; }

#if defined(__GNUC__)
typedef float v4f __attribute__((vector_size(16))); /* GCC/Clang generic vectors: SSE, NEON, ... */
#endif

/* The horizontal pass for one row of an RGB image: out_c[x] (c = 0, 1, 2: the three planes) from
 * the vertically resampled row v (interleaved RGB floats, K taps from each start). Each tap loads
 * four floats, the pixel and the next one's red, and weights all four at once: one vector
 * multiply-add where the compiler has GCC's vector types (the fourth lane is never stored), so v
 * needs one float past its last pixel. K is a constant where the caller has one, so the tap loop
 * unrolls; the taps past a position's own are zero weights on in-bounds pixels. */
static inline void hpass_rgb(const float *restrict v, const axis *ax, int K, float *restrict o0, float *restrict o1,
                             float *restrict o2)
{
    const float *wt = ax->wt;
    for (int x = 0; x < ax->n; x++, wt += K) {
        const float *p = v + (size_t)(ax->start[x] - ax->lo) * 3;
#if defined(__GNUC__)
        v4f a = {0, 0, 0, 0};
        for (int k = 0; k < K; k++) {
            v4f t;
            memcpy(&t, p + 3 * k, sizeof t);
            a += wt[k] * t;
        }
#else
        float a[4] = {0, 0, 0, 0};
        for (int k = 0; k < K; k++)
            for (int ch = 0; ch < 4; ch++) a[ch] += wt[k] * p[3 * k + ch];
#endif
        o0[x] = clamp255(a[0]), o1[x] = clamp255(a[1]), o2[x] = clamp255(a[2]);
    }
}

static inline void hpass_gray(const float *restrict v, const axis *ax, int K, float *restrict o)
{
    const float *wt = ax->wt;
    for (int x = 0; x < ax->n; x++, wt += K) {
        const float *p = v + (ax->start[x] - ax->lo);
        float a = 0;
        for (int k = 0; k < K; k++) a += wt[k] * p[k];
        o[x] = clamp255(a);
    }
}

#if defined(__SSE2__)
/* Four floats of a vertical tap: row[0..3] = w * q, or += it. */
static inline void vpass_quad(float *row, __m128i q, __m128 w, int first)
{
    __m128 x = _mm_mul_ps(_mm_cvtepi32_ps(q), w);
    if (!first) x = _mm_add_ps(_mm_loadu_ps(row), x);
    _mm_storeu_ps(row, x);
}
#endif

/* One tap of the vertical pass: row[j] = w * s[j] (the first tap) or row[j] += w * s[j], j < n.
 * With SSE2 (every x86-64), 16 samples a round, rather than left to the auto-vectorizer: at -O2
 * (the flags distributions build with) GCC 12's cost model keeps this uint8 -> float loop scalar,
 * and it was 70% of the decode's own time; GCC's generic vectors convert uint8 lane by lane. The
 * multiply and the add stay two roundings (-ffp-contract=off), so the row is the scalar loop's bit
 * for bit. Elsewhere (aarch64) the loop is the compiler's: vectorized at -O3, dtrain's default. */
static inline void vpass_tap(float *restrict row, const unsigned char *restrict s, float w, size_t n, int first)
{
    size_t j = 0;
#if defined(__SSE2__)
    const __m128 wv = _mm_set1_ps(w);
    const __m128i zero = _mm_setzero_si128();
    for (; j + 16 <= n; j += 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + j));
        const __m128i lo = _mm_unpacklo_epi8(b, zero), hi = _mm_unpackhi_epi8(b, zero);
        vpass_quad(row + j, _mm_unpacklo_epi16(lo, zero), wv, first);
        vpass_quad(row + j + 4, _mm_unpackhi_epi16(lo, zero), wv, first);
        vpass_quad(row + j + 8, _mm_unpacklo_epi16(hi, zero), wv, first);
        vpass_quad(row + j + 12, _mm_unpackhi_epi16(hi, zero), wv, first);
    }
#endif
    for (; j < n; j++) row[j] = first ? w * s[j] : row[j] + w * s[j];
}

/* Resamples r into out (c x oh x ow, CHW).
 *
 * Only the pixels the crop keeps are computed. Vertical pass first, per output row: the taps'
 * source rows (uint8) weighted and summed over the source columns the crop's horizontal taps
 * read (contiguous, so the compiler vectorizes it), into one float row; then the horizontal pass
 * from that row straight into the output planes. The vertical pass runs on 224 rows rather than
 * the ~375 source rows a horizontal-first order would filter, and the row stays in L1. Weights are
 * PIL's, in float; the order of the passes changes results only by float rounding (~1e-4). One
 * allocation a call holds the tap tables and the row. */
static dt_status resize_crop(const char *name, const img_raw *r, int c, int oh, int ow, float *out)
{
    /* torchvision's Resize(S): the shorter side becomes S, the other int(S * long / short). */
    const int S = oh < ow ? oh : ow;
    int64_t rw, rh;
    if (r->ow <= r->oh) {
        rw = S;
        rh = (int64_t)((double)S * r->oh / r->ow);
    } else {
        rh = S;
        rw = (int64_t)((double)S * r->ow / r->oh);
    }
    if (rw < 1) rw = 1;
    if (rh < 1) rh = 1;
    /* The output rows/columns that fall on the resized image (the rest is CenterCrop's padding). */
    const int64_t y0 = crop_start(rh, oh), x0 = crop_start(rw, ow);
    const int ys = y0 < 0 ? (int)-y0 : 0, xs = x0 < 0 ? (int)-x0 : 0;
    const int ny = (int)(rh < oh ? rh : oh), nx = (int)(rw < ow ? rw : ow);
    if (ny < oh || nx < ow) memset(out, 0, sizeof *out * (size_t)c * (size_t)oh * (size_t)ow);

    /* One scratch block: x and y tap tables, then the vertical pass's row (source columns
     * ax.lo .. ax.hi, plus kx pixels of zeros that the padded taps of the last columns read). The
     * sizes are bounded: n <= IMG_MAX_SIDE, k <= 2 * IMG_MAX_PIXELS / n_resized + 3, a row <=
     * r->w + k pixels. */
    const int nc = r->nc;
    axis ax = {.k = axis_ksize(r->w, (double)rw)}, ay = {.k = axis_ksize(r->h, (double)rh)};
    const size_t nwx = (size_t)nx * (size_t)ax.k, nwy = (size_t)ny * (size_t)ay.k;
    const size_t rowlen = ((size_t)r->w + (size_t)ax.k) * (size_t)nc + 1;
    const size_t bytes = sizeof(float) * (nwx + nwy + rowlen) + sizeof(int) * 2 * ((size_t)nx + (size_t)ny);
    float *block = malloc(bytes);
    if (!block) return status_set_error(DT_ERR_NOMEM, "out of memory resizing %s", name);
    ax.wt = block, ay.wt = block + nwx;
    float *row = ay.wt + nwy;
    /* cppcheck-suppress invalidPointerCast ; malloc'd memory past the floats, used only as ints (4-byte aligned) */
    int *ints = (int *)(row + rowlen);
    ax.start = ints, ax.taps = ints + nx, ay.start = ints + 2 * (size_t)nx, ay.taps = ay.start + ny;
    axis_fill(&ax, r->w, (double)rw, x0 + xs, nx);
    axis_fill(&ay, r->h, (double)rh, y0 + ys, ny);

    const size_t used = (size_t)(ax.hi - ax.lo) * (size_t)nc; /* floats of the row the taps weight */
    memset(row + used, 0, sizeof *row * (rowlen - used));
    const size_t stride = (size_t)r->w * (size_t)nc, plane = (size_t)oh * (size_t)ow;
    const unsigned char *base = r->px + (size_t)ax.lo * (size_t)nc;
    for (int y = 0; y < ny; y++) {
        const float *wt = ay.wt + (size_t)y * ay.k;
        const unsigned char *s0 = base + (size_t)ay.start[y] * stride;
        vpass_tap(row, s0, wt[0], used, 1);
        for (int k = 1; k < ay.taps[y]; k++) vpass_tap(row, s0 + (size_t)k * stride, wt[k], used, 0);
        const size_t at = (size_t)(ys + y) * (size_t)ow + (size_t)xs;
        if (nc == 3) {
            float *o0 = out + at, *o1 = o0 + plane, *o2 = o1 + plane;
            switch (ax.k) { /* the common tap counts get a constant loop length */
                case 3: hpass_rgb(row, &ax, 3, o0, o1, o2); break;
                case 5: hpass_rgb(row, &ax, 5, o0, o1, o2); break;
                case 7: hpass_rgb(row, &ax, 7, o0, o1, o2); break;
                default: hpass_rgb(row, &ax, ax.k, o0, o1, o2); break;
            }
        } else {
            switch (ax.k) {
                case 3: hpass_gray(row, &ax, 3, out + at); break;
                case 5: hpass_gray(row, &ax, 5, out + at); break;
                case 7: hpass_gray(row, &ax, 7, out + at); break;
                default: hpass_gray(row, &ax, ax.k, out + at); break;
            }
        }
    }
    if (nc == 1 && c == 3)
        for (int ch = 1; ch < 3; ch++) memcpy(out + (size_t)ch * plane, out, sizeof *out * plane);
    free(block);
    return DT_OK;
}

dt_status image_decode(const char *name, const unsigned char *data, size_t len, int c, int h, int w, unsigned flags,
                       float *out)
{
    if (!name) name = "(image)";
    if ((c != 1 && c != 3) || h < 1 || w < 1 || h > IMG_MAX_SIDE || w > IMG_MAX_SIDE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "image shape %dx%dx%d (CxHxW) cannot be decoded to: C must be 1 or 3, "
                                "H and W 1..%d; give --input like 3x224x224",
                                c, h, w, IMG_MAX_SIDE);
    if (!data || len == 0)
        return status_set_error(DT_ERR_CORRUPT, "%s is empty (0 bytes), so it holds no image; %s", name, fix_hint);
    static const unsigned char png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    img_raw r = {0};
    dt_status st;
    if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        st = decode_jpeg(name, data, len, c, h < w ? h : w, flags, &r);
    else if (len >= 8 && memcmp(data, png_magic, 8) == 0)
        st = decode_png(name, data, len, &r);
    else {
        unsigned char m[4] = {0};
        memcpy(m, data, len < 4 ? len : 4);
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is neither JPEG (starts ff d8 ff) nor PNG (starts 89 50 4e 47): it "
                                "starts %02x %02x %02x %02x (%zu bytes); %s",
                                name, m[0], m[1], m[2], m[3], len, fix_hint);
    }
    if (st) return st;
    if (c == 1 && r.nc == 3) {
        rgb_to_gray(r.px, (size_t)r.w * (size_t)r.h);
        r.nc = 1;
    }
    st = resize_crop(name, &r, c, h, w, out);
    free(r.px);
    return st;
}
