/*
 * test_dts.c - .dts shards (runtime/data/dts*.c) and split statistics (stats.c): a synthetic split
 * this test builds is written in each dtype and read back through ds_open value for value, with
 * the header's mean/std equal to a direct computation; every damaged file is refused with the
 * right error; the writer refuses what a dtype cannot hold, never overwrites without force and
 * leaves no file behind when it fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "block_guard.h"

#include "kernels/cast.h"
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "runtime/data/stats.h"
#include "tmp_dir.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char dir[64];

static char *path_of(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* ---------------------------------------------------------------- a synthetic split */

typedef struct mem_impl {
    int kind;       /* 0 bytes, 1 reals (negative, fractional), 2 one value too big for fp16, 3 resampled
                       bytes (fractions in 0..255, as an image folder's resize makes) */
    size_t fail_at; /* read fails at this sample (SIZE_MAX: never) */
} mem_impl;

static float mem_value(const mem_impl *m, size_t i, size_t j)
{
    if (m->kind == 0) return (float)((i * 31 + j * 7) % 256);
    if (m->kind == 2 && i == 3 && j == 1) return 70000.0f;
    if (m->kind == 3) return (float)((i * 31 + j * 7) % 256) * 0.998f + 0.37f;
    return (float)sin((double)(i * 13 + j)) * 3.5f + (float)(j % 3) - 1.0f;
}

static dt_status mem_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const mem_impl *m = s->impl;
    if (i == m->fail_at) return DT_ERR_CORRUPT; /* the message is the test's own */
    for (size_t j = 0; j < (size_t)s->c * s->h * s->w; j++) x[j] = mem_value(m, i, j);
    *label = (int32_t)((i * 7) % (size_t)s->classes);
    return DT_OK;
}

static const ds_ops mem_ops = {mem_read, NULL};

static ds_split mem_split(mem_impl *m, int kind, size_t count, int c, int h, int w, int classes)
{
    ds_split s = {0};
    m->kind = kind;
    m->fail_at = SIZE_MAX;
    s.ops = &mem_ops;
    s.impl = m;
    s.count = count;
    s.c = c, s.h = h, s.w = w;
    s.classes = classes;
    s.uint8_values = kind == 0 || kind == 3;
    snprintf(s.format, sizeof s.format, "mem");
    snprintf(s.split, sizeof s.split, "train");
    snprintf(s.source, sizeof s.source, "mem");
    return s;
}

/* The value a dtype stores for v. */
static float stored(int dtype, float v)
{
    return dtype == DTS_FP16 ? half_f16_to_f32(half_f32_to_f16(v)) : dtype == DTS_UINT8 ? floorf(v + 0.5f) : v;
}

/* ---------------------------------------------------------------- file helpers */

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spit(const char *p, const void *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Recomputes the header CRC (field at 44, zeroed while summing), as a buggy writer would have. */
static void fix_header_crc(unsigned char *b)
{
    const uint32_t hb = rd32(b + 12);
    wr32(b + 44, 0);
    wr32(b + 44, (uint32_t)crc32(0, b, hb));
}

static void expect_open_fails(const char *p, const char *format, dt_status want, const char *text)
{
    ds_open_opts o = {.format = format};
    ds_split *s = NULL;
    dt_status st = ds_open(p, &o, &s);
    if (st != want || !strstr(dt_last_error(), text))
        fail_msg("open %s: status %d (want %d), message \"%s\" lacks \"%s\"", p, st, want, dt_last_error(), text);
    assert_null(s);
}

static int setup(void **st)
{
    (void)st;
    return tmp_dir_make(dir, sizeof dir, "test_dts");
}

static int teardown(void **st)
{
    (void)st;
    return tmp_dir_remove(dir);
}

/* No temporary file of the writer is left in dir. */
static void assert_no_tmp(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) fail_msg("the writer left %s/%s behind", dir, e->d_name);
    closedir(d);
}

/* ---------------------------------------------------------------- tests */

static void round_trip(int kind, int dtype, int threads)
{
    mem_impl m;
    ds_split src = mem_split(&m, kind, 301, 3, 5, 4, 10);
    const char *p = path_of("rt.dts");
    unlink(p);
    dts_write_opts wo = {.dtype = dtype, .threads = threads};
    dts_write_result r;
    assert_int_equal(dts_write(&src, p, &wo, &r), DT_OK);
    const int want_dtype = dtype ? dtype : kind == 0 || kind == 3 ? DTS_UINT8 : DTS_FP32;
    assert_int_equal(r.dtype, want_dtype);
    assert_int_equal(r.count, 301);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal((uint64_t)sb.st_size, r.bytes);
    assert_int_equal(dts_verify(p), DT_OK);

    ds_split *s = NULL;
    assert_int_equal(ds_open(p, NULL, &s), DT_OK); /* detected by its magic */
    assert_string_equal(s->format, "dts");
    assert_int_equal(s->count, 301);
    assert_int_equal(s->c, 3), assert_int_equal(s->h, 5), assert_int_equal(s->w, 4);
    assert_int_equal(s->classes, 10);
    /* Bytes stay bytes in any dtype (the header's DTS_FLAG_BYTES for fp16/fp32, which --normalize
     * unit divides by 255); uint8 says it by its dtype and leaves the flags 0, as older readers want. */
    assert_int_equal(s->uint8_values, want_dtype == DTS_UINT8 || src.uint8_values);
    FILE *hf = fopen(p, "rb");
    unsigned char hdr[64];
    assert_non_null(hf);
    assert_int_equal(fread(hdr, 1, sizeof hdr, hf), sizeof hdr);
    fclose(hf);
    assert_int_equal(hdr[60], src.uint8_values && want_dtype != DTS_UINT8 ? DTS_FLAG_BYTES : 0);
    assert_int_equal(dts_sample_offset(s, 0) % DTS_ALIGN, 0); /* aligned rows in the mapping */
    float x[60];
    double sum[3] = {0}, sq[3] = {0};
    for (size_t i = 0; i < s->count; i++) {
        int32_t y;
        assert_int_equal(ds_read(s, i, x, &y), DT_OK);
        assert_int_equal(y, (int32_t)((i * 7) % 10));
        for (size_t j = 0; j < 60; j++) {
            const float want = stored(want_dtype, mem_value(&m, i, j));
            if (x[j] != want) fail_msg("sample %zu value %zu: read %g, wrote %g", i, j, (double)x[j], (double)want);
            sum[j / 20] += want;
            sq[j / 20] += (double)want * want;
        }
    }
    const double n = 301.0 * 20;
    for (int c = 0; c < 3; c++) {
        const double mean = sum[c] / n, sd = sqrt(sq[c] / n - mean * mean);
        assert_true(fabs(s->mean[c] - mean) <= 1e-6 * (fabs(mean) + 1));
        assert_true(fabs(s->std[c] - sd) <= 1e-6 * (sd + 1));
    }
    int32_t y;
    assert_int_equal(ds_read(s, 301, x, &y), DT_ERR_INVALID_ARG);
    ds_close(s);
}

static void test_round_trip(void **st)
{
    (void)st;
    round_trip(0, 0, 1); /* bytes -> uint8 by default */
    round_trip(0, 0, 3);
    round_trip(1, 0, 2);        /* reals -> fp32 by default */
    round_trip(1, DTS_FP16, 3); /* fp16 within its rounding */
    round_trip(0, DTS_FP16, 1);
    round_trip(0, DTS_FP32, 4);
    round_trip(3, 0, 2);        /* resampled bytes -> uint8, rounded to the nearest byte */
    round_trip(3, DTS_FP16, 1); /* ... or their fractions kept */
}

/* The VmFlags of the mapping of path in /proc/self/smaps, into out ("" when not mapped). */
static void map_flags(const char *path, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[4400];
    int in = 0;
    out[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        const size_t l = strlen(line), pl = strlen(path);
        if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' ')) /* a mapping's first line */
            in = l > pl && strncmp(line + l - pl - 1, path, pl) == 0;
        else if (in && strncmp(line, "VmFlags:", 8) == 0)
            snprintf(out, n, "%s", line + 8);
    }
    if (f) fclose(f);
}

/* Training reads a .dts in a shuffled order: the mapping has no read-around (the kernel's "rr"),
 * which read 1.4 GB of a 2.4 GB file for 20 steps of 16 samples; a pass in file order (the CRC,
 * the statistics) reads ahead ("sr") and gives the advice back. */
static void test_read_advice(void **st)
{
    (void)st;
    mem_impl m;
    ds_split src = mem_split(&m, 0, 301, 3, 5, 4, 10);
    char p[256];
    snprintf(p, sizeof p, "%s", path_of("adv.dts"));
    assert_int_equal(dts_write(&src, p, NULL, NULL), DT_OK);
    ds_split *s = NULL;
    assert_int_equal(ds_open(p, NULL, &s), DT_OK);
    char flags[4400];
    map_flags(p, flags, sizeof flags);
    if (!flags[0]) skip(); /* no /proc/self/smaps here */
    if (!strstr(flags, " rr")) fail_msg("the mapping of %s has no random-read advice: VmFlags:%s", p, flags);
    assert_int_equal(dts_check_payload(s), DT_OK);
    ds_stats sts;
    assert_int_equal(ds_compute_stats(s, 2, &sts), DT_OK);
    ds_stats_free(&sts);
    map_flags(p, flags, sizeof flags);
    if (!strstr(flags, " rr") || strstr(flags, " sr")) fail_msg("after passes in file order, VmFlags:%s", flags);
    ds_close(s);
}

/* Bytes sum exactly in double: the file does not depend on the thread count at all. */
static void test_threads_same_file(void **st)
{
    (void)st;
    mem_impl m;
    ds_split src = mem_split(&m, 0, 5000, 1, 28, 28, 10); /* several 1 MiB chunks */
    dts_write_opts w1 = {.threads = 1}, w3 = {.threads = 3};
    assert_int_equal(dts_write(&src, path_of("t1.dts"), &w1, NULL), DT_OK);
    assert_int_equal(dts_write(&src, path_of("t3.dts"), &w3, NULL), DT_OK);
    size_t n1, n3;
    unsigned char *a = slurp(path_of("t1.dts"), &n1), *b = slurp(path_of("t3.dts"), &n3);
    assert_int_equal(n1, n3);
    assert_memory_equal(a, b, n1);
    free(a), free(b);
}

static void test_stats(void **st)
{
    (void)st;
    mem_impl m;
    ds_split src = mem_split(&m, 1, 997, 2, 3, 3, 7);
    double sum[2] = {0}, sq[2] = {0};
    float lo = INFINITY, hi = -INFINITY;
    size_t counts[7] = {0};
    for (size_t i = 0; i < 997; i++) {
        counts[(i * 7) % 7]++;
        for (size_t j = 0; j < 18; j++) {
            const float v = mem_value(&m, i, j);
            sum[j / 9] += v, sq[j / 9] += (double)v * v;
            lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        }
    }
    /* Fixed blocks merged in block order: the same bits at any thread count, not only close. */
    double first[4];
    for (int t = 0; t <= 5; t++) {
        ds_stats s;
        assert_int_equal(ds_compute_stats(&src, t, &s), DT_OK);
        const double bits[4] = {s.mean[0], s.mean[1], s.std[0], s.std[1]};
        if (t == 0) memcpy(first, bits, sizeof first);
        assert_memory_equal(bits, first, sizeof first);
        for (int c = 0; c < 2; c++) {
            const double mean = sum[c] / (997 * 9.0), sd = sqrt(sq[c] / (997 * 9.0) - mean * mean);
            assert_true(fabs(s.mean[c] - mean) < 1e-12);
            assert_true(fabs(s.std[c] - sd) < 1e-12);
        }
        assert_true(s.lo == lo && s.hi == hi);
        for (int k = 0; k < 7; k++) assert_int_equal(s.class_counts[k], counts[k]);
        ds_stats_free(&s);
    }
    /* A read error passes through, naming the lowest failing sample of any thread's range. */
    m.fail_at = 600;
    ds_stats s;
    size_t bad = 0;
    assert_int_equal(ds_compute_stats_at(&src, 4, &s, &bad), DT_ERR_CORRUPT);
    assert_int_equal(bad, 600);
}

static void test_directory(void **st)
{
    (void)st;
    mem_impl m;
    ds_split tr = mem_split(&m, 0, 50, 1, 2, 2, 3), te = mem_split(&m, 0, 20, 1, 2, 2, 3);
    mkdir(path_of("ds"), 0755);
    assert_int_equal(dts_write(&tr, path_of("ds/train.dts"), NULL, NULL), DT_OK);
    assert_int_equal(dts_write(&te, path_of("ds/test.dts"), NULL, NULL), DT_OK);
    ds_open_opts o = {.split = "test"};
    ds_split *s = NULL;
    assert_int_equal(ds_open(path_of("ds"), &o, &s), DT_OK);
    assert_string_equal(s->format, "dts");
    assert_string_equal(s->split, "test");
    assert_int_equal(s->count, 20);
    ds_close(s);
    assert_int_equal(ds_open(path_of("ds"), NULL, &s), DT_OK);
    assert_int_equal(s->count, 50);
    ds_close(s);
    unlink(path_of("ds/test.dts"));
    ds_open_opts ot = {.split = "test", .format = "dts"};
    s = NULL;
    assert_int_equal(ds_open(path_of("ds"), &ot, &s), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "has no test split"));
    assert_null(s);
}

static void test_writer_refusals(void **st)
{
    (void)st;
    mem_impl m;
    ds_split src = mem_split(&m, 1, 10, 1, 2, 2, 3);
    const char *p = path_of("w.dts");
    dts_write_opts u8 = {.dtype = DTS_UINT8};
    assert_int_equal(dts_write(&src, p, &u8, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "not a byte 0..255: store this dataset with --dtype fp16 or fp32"));
    mem_impl mb;
    ds_split big = mem_split(&mb, 2, 10, 1, 2, 2, 3);
    dts_write_opts f16 = {.dtype = DTS_FP16};
    assert_int_equal(dts_write(&big, p, &f16, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "value 1 of sample 3 is 70000, past fp16's largest"));
    m.fail_at = 7;
    assert_int_equal(dts_write(&src, p, NULL, NULL), DT_ERR_CORRUPT); /* the source's failure passes through */
    assert_int_equal(access(p, F_OK), -1);
    assert_no_tmp();
    m.fail_at = SIZE_MAX;
    assert_int_equal(dts_write(&src, p, NULL, NULL), DT_OK);
    assert_int_equal(dts_write(&src, p, NULL, NULL), DT_ERR_INVALID_ARG);
    assert_non_null(strstr(dt_last_error(), "exists: give --force"));
    dts_write_opts force = {.force = 1, .dtype = DTS_FP16};
    if (dts_write(&src, p, &force, NULL)) fail_msg("%s", dt_last_error());
    ds_split *s = NULL;
    assert_int_equal(ds_open(p, NULL, &s), DT_OK);
    assert_int_equal(s->uint8_values, 0);
    ds_close(s);

    /* A file-size limit (EFBIG) in a child: a clear error and no temporary file left. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        ds_split many = mem_split(&m, 0, 100000, 1, 4, 4, 3);
        dt_status r = dts_write(&many, path_of("efbig.dts"), NULL, NULL);
        _exit(r == DT_ERR_IO && strstr(dt_last_error(), "file-size limit") && access(path_of("efbig.dts"), F_OK) != 0
                  ? 0
                  : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_no_tmp();
}

/* A valid file to damage: 40 samples of 2x3x3 fp32, 10 classes. */
static unsigned char *valid(size_t *n)
{
    mem_impl m;
    ds_split src = mem_split(&m, 1, 40, 2, 3, 3, 10);
    const char *p = path_of("good.dts");
    unlink(p);
    assert_int_equal(dts_write(&src, p, NULL, NULL), DT_OK);
    return slurp(p, n);
}

static void test_corruptions(void **st)
{
    (void)st;
    size_t n;
    unsigned char *good = valid(&n), *b = malloc(n + 8);
    assert_non_null(b);
    const char *p = path_of("bad.dts");
    const uint32_t hb = rd32(good + 12);
    const size_t labels_at = hb + (40 * 18 * 4 + 63) / 64 * 64;
    assert_int_equal(n, labels_at + 160);

    memcpy(b, good, n);
    b[3] ^= 1; /* magic */
    spit(p, b, n);
    expect_open_fails(p, "dts", DT_ERR_CORRUPT, "is not a .dts shard: it does not start with the magic");
    expect_open_fails(p, NULL, DT_ERR_INVALID_ARG, "is not a dataset file dtrain recognises");

    memcpy(b, good, n);
    b[DTS_FIXED_BYTES + 2] ^= 0x40; /* a byte of channel 0's mean */
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "the header's CRC-32 is");

    spit(p, good, n - 1); /* truncated payload */
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "need more than the file's");
    spit(p, good, 30); /* truncated header */
    expect_open_fails(p, "dts", DT_ERR_CORRUPT, "too short for a .dts header");

    memcpy(b, good, n);
    memset(b + n, 0, 8); /* data after the labels */
    spit(p, b, n + 8);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "data after the labels");

    memcpy(b, good, n);
    wr32(b + 32, 0), wr32(b + 36, 1u << 30); /* count 2^62: count * row overflows 64 bits */
    fix_header_crc(b);
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "4611686018427387904 samples of 2x3x3 fp32");

    memcpy(b, good, n);
    wr32(b + 20, 1u << 20), wr32(b + 24, 1u << 20); /* h * w past DS_MAX_SAMPLE_VALUES */
    fix_header_crc(b);
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "is not 1 to");

    memcpy(b, good, n);
    wr32(b + 28, 9); /* dtype */
    fix_header_crc(b);
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "dtype 9 (offset 28) is not 1 (uint8)");

    memcpy(b, good, n);
    wr32(b + 60, 3); /* flags: DTS_FLAG_BYTES and a bit of a newer writer */
    fix_header_crc(b);
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "flags field (offset 60) is 0x3, with bits this dtrain (");
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "written by a newer dtrain; read it with that one");

    memcpy(b, good, n);
    wr32(b + 8, 2); /* version */
    fix_header_crc(b);
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, ".dts version 2 (offset 8), written by a newer dtrain; this dtrain (");

    memcpy(b, good, n);
    wr32(b + 8, 0); /* a version no dtrain wrote: damage, not a newer writer */
    fix_header_crc(b);
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, ".dts version 0 (offset 8) is not one dtrain wrote");

    memcpy(b, good, n);
    wr32(b + labels_at + 4 * 3, 10); /* a label >= classes, found at open */
    spit(p, b, n);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "label 10 of sample 3");

    /* A flipped sample byte opens (the payload is not read at open) but fails verify. */
    memcpy(b, good, n);
    b[hb + 100] ^= 0x10;
    spit(p, b, n);
    ds_split *s = NULL;
    assert_int_equal(ds_open(p, NULL, &s), DT_OK);
    ds_close(s);
    assert_int_equal(dts_verify(p), DT_ERR_CORRUPT);
    assert_non_null(strstr(dt_last_error(), "samples or labels are damaged"));

    /* A NaN with a matching payload CRC (a writer's bug): verify names the sample and offset. */
    memcpy(b, good, n);
    wr32(b + hb + 4 * (18 * 5 + 2), 0x7fc00000u);
    wr32(b + 56, (uint32_t)crc32(0, b + hb, (uInt)(n - hb)));
    fix_header_crc(b);
    spit(p, b, n);
    assert_int_equal(dts_verify(p), DT_ERR_CORRUPT);
    char want[128];
    snprintf(want, sizeof want, "value 2 of sample 5 (offset %u) is nan", hb + 4 * (18 * 5 + 2));
    if (!strstr(dt_last_error(), want)) fail_msg("\"%s\" lacks \"%s\"", dt_last_error(), want);

    /* gzip-compressed: detected through zlib, refused with the fix. */
    gzFile z = gzopen(p, "wb");
    assert_non_null(z);
    assert_int_equal(gzwrite(z, good, (unsigned)n), (int)n);
    gzclose(z);
    expect_open_fails(p, NULL, DT_ERR_CORRUPT, "is gzip-compressed");
    free(good);
    free(b);
}

static void test_fifo(void **st)
{
    (void)st;
    assert_int_equal(mkfifo(path_of("x.dts"), 0644), 0);
    block_guard_start(20);
    expect_open_fails(path_of("x.dts"), "dts", DT_ERR_IO, "is not a regular file");
    expect_open_fails(path_of("x.dts"), NULL, DT_ERR_INVALID_ARG, "is not a dataset file");
    assert_int_equal(dts_verify(path_of("x.dts")), DT_ERR_IO);
    block_guard_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_same_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corruptions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_advice, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
