/*
 * test_dts_header.c - the header fields of a .dts shard (runtime/data/dts_read.c) that a damaged or
 * crafted file can get wrong with its header CRC made valid again, each refused at open naming the
 * field: a channel count of 0, a header_bytes other than the channels', a header longer than the
 * file (whose CRC would be summed past the mapping), a count of 0, one class too many, a
 * payload_bytes that disagrees, a negative std; and a bad label on the last sample, which the
 * open's check of every label must reach. The other corruptions are test_dts.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "base/status.h"
#include "tmp_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static char dir[64], path[128];

static dt_status good_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    for (int j = 0; j < s->c; j++) x[j] = (float)((i * 3 + (size_t)j) % 256);
    *label = (int32_t)(i % (size_t)s->classes);
    return DT_OK;
}

static const ds_ops good_ops = {good_read, NULL};

/* 10 samples of 2x1x1 bytes, 3 classes: a 128-byte header (64 + 8 x 2 channels), 20 bytes of
 * samples rounded up to 64, the labels at 192; 232 bytes in all. */
static unsigned char good[232];

static int setup(void **st)
{
    (void)st;
    if (tmp_dir_make(dir, sizeof dir, "dtdtshdr")) return -1;
    snprintf(path, sizeof path, "%s/h.dts", dir);
    ds_split src = {.ops = &good_ops, .count = 10, .c = 2, .h = 1, .w = 1, .classes = 3, .uint8_values = 1};
    if (dts_write(&src, path, NULL, NULL)) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    const size_t n = fread(good, 1, sizeof good, f);
    const int more = fgetc(f);
    fclose(f);
    return n == sizeof good && more == EOF ? 0 : -1;
}

static int teardown(void **st)
{
    (void)st;
    return tmp_dir_remove(dir);
}

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The first len bytes of b, their header CRC (over header_bytes, or what the file has) made valid
 * as a buggy writer would, opened: want and a substring. */
static void expect_open(unsigned char *b, size_t len, dt_status want, const char *must)
{
    const uint32_t hb = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
    wr32(b + 44, 0);
    wr32(b + 44, (uint32_t)crc32(0, b, hb <= len ? hb : (uInt)len));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
    ds_split *s = NULL;
    const ds_open_opts o = {.format = "dts"};
    dt_status st = ds_open(path, &o, &s);
    if (st != want || (must && !strstr(dt_last_error(), must)))
        fail_msg("status %d (want %d): \"%s\" lacks \"%s\"", st, want, dt_last_error(), must ? must : "");
    ds_close(s);
}

static void test_fields(void **st)
{
    (void)st;
    unsigned char b[sizeof good];
    memcpy(b, good, sizeof b);
    expect_open(b, sizeof b, DT_OK, NULL);
    wr32(b + 16, 0);
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "0 channels (offset 16); a sample has 1 to");
    memcpy(b, good, sizeof b);
    wr32(b + 12, 192);
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "header_bytes 192 (offset 12) should be 128 for 2 channels");
    memcpy(b, good, sizeof b);
    wr32(b + 16, 1000), wr32(b + 12, 8064); /* 1000 channels' header, in a 232-byte file */
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "is 232 bytes, shorter than its 8064-byte header");
    memcpy(b, good, sizeof b);
    memset(b + 32, 0, 8);
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "count (offset 32) is 0");
    memcpy(b, good, sizeof b);
    wr32(b + 40, DS_MAX_CLASSES + 1);
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "1048577 classes (offset 40); a dataset has 1 to 1048576");
    memcpy(b, good, sizeof b);
    b[48] ^= 4;
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "payload_bytes (offset 48) says 108");
    memcpy(b, good, sizeof b);
    const float minus = -1.0f;
    memcpy(b + DTS_FIXED_BYTES + 8 + 4, &minus, 4); /* channel 1's std */
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "channel 1's mean");
    memcpy(b, good, sizeof b);
    wr32(b + 192 + 4 * 9, 3); /* the last sample's label: one past the classes */
    expect_open(b, sizeof b, DT_ERR_CORRUPT, "label 3 of sample 9 (offset 228) is outside 0 to 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
