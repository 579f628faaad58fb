/*
 * fuzz_dts_roundtrip.c - the .dts writer and reader together (runtime/data/dts_write.c,
 * dts_read.c): any split the writer accepts reads back as it was written, bit for bit.
 *
 * Input: a mode byte (bits 0-1: dtype, 0 the writer's default, 1 uint8, 2 fp16, 3 fp32; bit 2: the
 * source's values are bytes, one input byte each, else raw little-endian fp32, four bytes each;
 * bit 3: the first write uses 2 threads, the second 1, else the other way round), then bytes for
 * C (1-3), H (1-4), W (1-4), count (1-16) and classes (1-256); then per sample a label (a signed
 * byte) and its values. Missing bytes read as 0.
 * Beyond ASan/UBSan: the writer refuses exactly the splits with a value the dtype cannot hold or a
 * label outside [0, classes) (decided here), and then leaves no file behind, not even its
 * temporary one; an accepted split gives a file that dts_verify accepts, that opens with the same
 * shape, count and classes and reads back every label, and every value as stored (fp32 bit for
 * bit, fp16 as the value rounded to fp16, uint8 the same byte); that file written again from its
 * own reader, with the other thread count, is the same file byte for byte.
 */
#include "fuzz_common.h"
#include "kernels/cast.h"
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"

#include <dirent.h>
#include <math.h>

typedef struct mem_split {
    float *x; /* count * per values */
    int32_t *y;
    size_t per;
} mem_split;

static dt_status mem_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const mem_split *m = s->impl;
    if (i >= s->count) return DT_ERR_INVALID_ARG;
    memcpy(x, m->x + i * m->per, m->per * sizeof *x);
    *label = m->y[i];
    return DT_OK;
}

static void mem_close(ds_split *s) { (void)s; }

static const ds_ops mem_ops = {mem_read, mem_close};

static unsigned take(const uint8_t *d, size_t size, size_t *pos) { return *pos < size ? d[(*pos)++] : 0; }

/* Entries of dir other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    FUZZ_CHECK(d, "cannot list %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    FUZZ_CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    fclose(f);
    *len = (size_t)n;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], a[96], b[96];
    if (!dir[0]) {
        fuzz_scratch_dir(dir, sizeof dir, "dts-roundtrip");
        snprintf(a, sizeof a, "%s/a.dts", dir);
        snprintf(b, sizeof b, "%s/b.dts", dir);
    }
    size_t pos = 0;
    const unsigned mode = take(data, size, &pos);
    const int bytes = (mode >> 2) & 1;
    const int threads_a = mode & 8 ? 2 : 1, threads_b = 3 - threads_a;
    ds_split src = {.ops = &mem_ops, .uint8_values = bytes};
    src.c = 1 + (int)(take(data, size, &pos) % 3);
    src.h = 1 + (int)(take(data, size, &pos) % 4);
    src.w = 1 + (int)(take(data, size, &pos) % 4);
    src.count = 1 + take(data, size, &pos) % 16;
    src.classes = 1 + (int)take(data, size, &pos);
    snprintf(src.format, sizeof src.format, "fuzz");
    snprintf(src.source, sizeof src.source, "fuzz input");
    const int dtype = mode & 3 ? (int)(mode & 3) : bytes ? DTS_UINT8 : DTS_FP32;

    mem_split m = {.per = (size_t)src.c * src.h * src.w};
    m.x = malloc(src.count * m.per * sizeof *m.x);
    m.y = malloc(src.count * sizeof *m.y);
    uint16_t *h16 = malloc(m.per * sizeof *h16);
    float *want = malloc(src.count * m.per * sizeof *want);
    FUZZ_CHECK(m.x && m.y && h16 && want, "out of memory");
    src.impl = &m;
    int ok = 1; /* what the writer must decide */
    for (size_t i = 0; i < src.count; i++) {
        m.y[i] = (int8_t)take(data, size, &pos);
        ok = ok && m.y[i] >= 0 && m.y[i] < src.classes;
        float *x = m.x + i * m.per, *wx = want + i * m.per;
        for (size_t j = 0; j < m.per; j++) {
            if (bytes) {
                x[j] = (float)take(data, size, &pos);
            } else {
                uint32_t u = 0;
                for (int k = 0; k < 4; k++) u |= (uint32_t)take(data, size, &pos) << (8 * k);
                memcpy(&x[j], &u, 4);
            }
            ok = ok && isfinite(x[j]);
            if (dtype == DTS_UINT8) ok = ok && x[j] >= 0 && x[j] <= 255 && x[j] == floorf(x[j]);
            wx[j] = x[j];
        }
        if (dtype == DTS_FP16) {
            cpu_cast_f32_to_16(DT_F16, x, h16, m.per);
            for (size_t j = 0; j < m.per; j++) ok = ok && (h16[j] & 0x7c00u) != 0x7c00u;
            cpu_cast_16_to_f32(DT_F16, h16, wx, m.per);
        }
    }

    unlink(a);
    unlink(b);
    dts_write_opts o = {.dtype = dtype, .threads = threads_a};
    dts_write_result res = {0};
    dt_status st = dts_write(&src, a, &o, &res);
    FUZZ_CHECK((st == DT_OK) == ok, "the writer %s %zu samples of %dx%dx%d, dtype %d: %s",
               st == DT_OK ? "accepted" : "refused", src.count, src.c, src.h, src.w, dtype,
               st == DT_OK ? "a value or label it cannot hold" : dt_last_error());
    if (st != DT_OK) {
        FUZZ_CHECK(strstr(dt_last_error(), "fuzz input") && strstr(dt_last_error(), "sample"),
                   "the refusal names no source and sample: %s", dt_last_error());
        FUZZ_CHECK(dir_entries(dir) == 0, "a refused write left a file in %s", dir);
        goto out;
    }
    FUZZ_CHECK(res.count == src.count && res.dtype == dtype, "result: %zu samples, dtype %d", res.count, res.dtype);
    FUZZ_CHECK(dts_verify(a) == DT_OK, "dts_verify refused what the writer wrote: %s", dt_last_error());
    ds_split r = {0};
    FUZZ_CHECK(dts_open(a, NULL, &r) == DT_OK, "the written file does not open: %s", dt_last_error());
    FUZZ_CHECK(r.count == src.count && r.c == src.c && r.h == src.h && r.w == src.w && r.classes == src.classes,
               "read back as %zu x %dx%dx%d, %d classes", r.count, r.c, r.h, r.w, r.classes);
    float *x = malloc(m.per * sizeof *x);
    FUZZ_CHECK(x, "out of memory");
    for (size_t i = 0; i < r.count; i++) {
        int32_t y = -1;
        FUZZ_CHECK(ds_read(&r, i, x, &y) == DT_OK, "sample %zu does not read: %s", i, dt_last_error());
        FUZZ_CHECK(y == m.y[i], "label %zu reads %d, written %d", i, (int)y, (int)m.y[i]);
        const float *wx = want + i * m.per;
        for (size_t j = 0; j < m.per; j++)
            FUZZ_CHECK(dtype == DTS_UINT8 ? x[j] == wx[j] : memcmp(&x[j], &wx[j], 4) == 0,
                       "value %zu of sample %zu reads %a, stored %a", j, i, (double)x[j], (double)wx[j]);
    }
    free(x);
    o.threads = threads_b;
    FUZZ_CHECK(dts_write(&r, b, &o, NULL) == DT_OK, "the file read back cannot be written again: %s", dt_last_error());
    r.ops->close(&r);
    size_t na, nb;
    unsigned char *fa = slurp(a, &na), *fb = slurp(b, &nb);
    FUZZ_CHECK(na == res.bytes, "the result says %llu bytes, the file has %zu", (unsigned long long)res.bytes, na);
    FUZZ_CHECK(na == nb && memcmp(fa, fb, na) == 0, "written again, the file differs (%zu and %zu bytes)", na, nb);
    free(fa);
    free(fb);
    unlink(a);
    unlink(b);
out:
    free(m.x);
    free(m.y);
    free(h16);
    free(want);
    return 0;
}
