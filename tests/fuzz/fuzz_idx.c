/*
 * fuzz_idx.c - the IDX reader (runtime/data/idx.c) and the file reading under it (file_io.c).
 *
 * Input: one mode byte, then a file. Mode bit 0 clear: the rest is an IDX image, parsed from
 * memory with idx_parse, then checked as labels (idx_check_labels) and for finite values. Bit 0
 * set: the rest is written to a file named *.gz and read back through ds_read_file (zlib: plain
 * data passes through, damaged streams must be refused), then parsed the same way.
 * Beyond ASan/UBSan: an accepted array's header plus values is exactly the input's length, its
 * dimensions are non-zero and a sample holds at most DS_MAX_SAMPLE_VALUES values; every value of
 * every sample can be read; accepted labels lie in [0, classes).
 */
#include "fuzz_common.h"
#include "runtime/data/file_io.h"
#include "runtime/data/idx.h"
#include "runtime/data/reader.h"

#include <unistd.h>

static void check(const unsigned char *b, size_t len)
{
    idx_array a;
    if (idx_parse("fuzz", b, len, &a) != DT_OK) return;
    FUZZ_CHECK(a.ndims >= 1 && a.ndims <= IDX_MAX_DIMS, "ndims %d", a.ndims);
    size_t per = 1;
    for (int d = 0; d < a.ndims; d++) {
        FUZZ_CHECK(a.dims[d] > 0, "dimension %d is 0", d);
        if (d) per *= a.dims[d];
    }
    FUZZ_CHECK(per == a.per_sample && per <= DS_MAX_SAMPLE_VALUES, "per_sample %zu", a.per_sample);
    FUZZ_CHECK(4 + 4 * (size_t)a.ndims + a.count * per * (size_t)a.elem == len, "length %zu", len);
    volatile float sink = 0;
    for (size_t i = 0; i < a.count; i++)
        for (size_t j = 0; j < per; j++) sink += idx_value(&a, i, j);
    (void)sink;
    int classes = 0;
    if (idx_check_labels("fuzz", &a, a.count, 0, &classes) == DT_OK) {
        FUZZ_CHECK(classes >= 1 && classes <= DS_MAX_CLASSES, "classes %d", classes);
        for (size_t i = 0; i < a.count; i++) {
            float v = idx_value(&a, i, 0);
            FUZZ_CHECK(v >= 0 && v < (float)classes, "label %g of %d classes", (double)v, classes);
        }
    }
    idx_check_finite("fuzz", &a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (!(data[0] & 1)) {
        /* A copy of exactly the input's length, so ASan sees any read past it. */
        unsigned char *b = malloc(size - 1 ? size - 1 : 1);
        FUZZ_CHECK(b, "out of memory");
        memcpy(b, data + 1, size - 1);
        check(b, size - 1);
        free(b);
        return 0;
    }
    static char path[64];
    if (!path[0]) fuzz_scratch_path(path, sizeof path, "idx", ".gz");
    fuzz_write_file(path, data + 1, size - 1);
    unsigned char *b;
    size_t len;
    /* A small bound: a few bytes of gzip may claim gigabytes, which must be refused, not read. */
    if (ds_read_file(path, 1u << 24, &b, &len) == DT_OK) {
        FUZZ_CHECK(len <= (1u << 24), "read %zu bytes past the bound", len);
        check(b, len);
        free(b);
    }
    unlink(path);
    return 0;
}
