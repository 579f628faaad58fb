/*
 * fuzz_dts.c - the .dts shard reader (runtime/data/dts_read.c) and ds_open's detection of it.
 *
 * Input: a whole .dts file, written to a temporary file (the reader maps files, it has no
 * from-memory path), opened through ds_open (auto-detected: the magic, or not) and, when that
 * fails, through dts_open directly; then every sample and label is read, the statistics pass run
 * and dts_verify run.
 * Beyond ASan/UBSan: an accepted file's size is exactly its header, samples (rounded up to 64
 * bytes) and labels; its shape and classes lie within the DS_MAX_* bounds; every label read lies
 * in [0, classes); the header's stats are finite with std >= 0.
 */
#include "fuzz_common.h"
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "runtime/data/stats.h"

#include <math.h>
#include <unistd.h>

static void check(const ds_split *s, size_t size)
{
    const size_t per = (size_t)s->c * s->h * s->w;
    FUZZ_CHECK(s->c >= 1 && s->h >= 1 && s->w >= 1 && per <= DS_MAX_SAMPLE_VALUES, "shape %dx%dx%d", s->c, s->h, s->w);
    FUZZ_CHECK(s->classes >= 1 && s->classes <= DS_MAX_CLASSES, "classes %d", s->classes);
    FUZZ_CHECK(s->count >= 1, "count 0 accepted");
    const size_t esize = s->uint8_values ? 1 : 0; /* fp16 or fp32: checked by the size below */
    const size_t hdr = (64 + 8 * (size_t)s->c + 63) / 64 * 64;
    const size_t lab = 4 * s->count;
    FUZZ_CHECK(size > hdr + lab, "size %zu for header %zu and labels %zu", size, hdr, lab);
    const size_t samples_padded = size - hdr - lab;
    FUZZ_CHECK(samples_padded % 64 == 0, "samples not padded to 64 (%zu)", samples_padded);
    if (esize) FUZZ_CHECK((s->count * per + 63) / 64 * 64 == samples_padded, "uint8 size %zu", samples_padded);
    FUZZ_CHECK(dts_sample_offset(s, 0) == hdr, "first sample at %llu, header %zu",
               (unsigned long long)dts_sample_offset(s, 0), hdr);
    for (int c = 0; c < s->c; c++)
        FUZZ_CHECK(isfinite(s->mean[c]) && isfinite(s->std[c]) && s->std[c] >= 0, "channel %d stats", c);
    float *x = malloc(per * sizeof *x);
    FUZZ_CHECK(x, "out of memory");
    volatile float sink = 0;
    for (size_t i = 0; i < s->count; i++) {
        int32_t y = -1;
        FUZZ_CHECK(ds_read(s, i, x, &y) == DT_OK, "read of sample %zu failed: %s", i, dt_last_error());
        FUZZ_CHECK(y >= 0 && y < s->classes, "label %d of %d classes", (int)y, s->classes);
        for (size_t j = 0; j < per; j++) sink += x[j];
    }
    (void)sink;
    int32_t y;
    FUZZ_CHECK(ds_read(s, s->count, x, &y) == DT_ERR_INVALID_ARG, "read past the end accepted");
    free(x);
    ds_stats st;
    if (ds_compute_stats(s, 1, &st) == DT_OK) ds_stats_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) fuzz_scratch_path(path, sizeof path, "dts", ".dts");
    fuzz_write_file(path, data, size);
    ds_split *s = NULL;
    ds_open_opts o = {0};
    if (ds_open(path, &o, &s) == DT_OK) {
        if (strcmp(s->format, "dts") == 0) check(s, size);
        ds_close(s);
    } else {
        ds_split d = {0};
        if (dts_open(path, NULL, &d) == DT_OK) check(&d, size);
        if (d.ops) d.ops->close(&d);
    }
    dts_verify(path);
    unlink(path);
    return 0;
}
