/*
 * fuzz_image.c - the image decode path of image folders (runtime/data/image_decode.c): TurboJPEG,
 * libpng and the resize + centre crop, on bytes from the fuzzer.
 *
 * Input: one shape byte, then the file. The shape byte picks C (bit 0: 1 or 3), the DCT scaling
 * (bit 1 set: IMG_NO_DCT_SCALE) and one of eight target sizes (bits 2-4), square and not, smaller
 * and larger than typical inputs, so downscaling, upscaling and CenterCrop's padding all run.
 * Beyond ASan/UBSan: the status is DT_OK, DT_ERR_CORRUPT or DT_ERR_NOMEM, never another; an
 * accepted image's every value is finite and in 0..255; a refusal leaves a message naming the file.
 */
#include "fuzz_common.h"
#include "runtime/data/image_decode.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const int shapes[8][2] = {{1, 1}, {4, 4}, {8, 5}, {3, 16}, {32, 32}, {7, 64}, {64, 9}, {128, 96}};
    const int c = data[0] & 1 ? 1 : 3;
    const unsigned flags = data[0] & 2 ? IMG_NO_DCT_SCALE : 0;
    const int h = shapes[(data[0] >> 2) & 7][0], w = shapes[(data[0] >> 2) & 7][1];
    const size_t len = size - 1;
    /* A copy of exactly the file's length, so ASan sees any read past it. */
    unsigned char *b = malloc(len ? len : 1);
    float *out = malloc(sizeof *out * (size_t)c * (size_t)h * (size_t)w);
    FUZZ_CHECK(b && out, "out of memory");
    memcpy(b, data + 1, len);
    const dt_status st = image_decode("fuzz.img", b, len, c, h, w, flags, out);
    FUZZ_CHECK(st == DT_OK || st == DT_ERR_CORRUPT || st == DT_ERR_NOMEM, "status %d: %s", st, dt_last_error());
    if (st == DT_OK) {
        for (size_t i = 0; i < (size_t)c * h * w; i++)
            FUZZ_CHECK(isfinite(out[i]) && out[i] >= 0 && out[i] <= 255, "value %zu is %g", i, (double)out[i]);
    } else {
        FUZZ_CHECK(strstr(dt_last_error(), "fuzz.img") != NULL, "message names no file: %s", dt_last_error());
    }
    free(out);
    free(b);
    return 0;
}
