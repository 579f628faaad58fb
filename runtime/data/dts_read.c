/*
 * dts_read.c - the "dts" format of the reader interface: a .dts shard (layout in dts.h) mapped
 * read-only with mmap, so sample i is converted to float straight from the page cache with no
 * copy and no per-split allocation beyond the stats; any number of threads read it at once.
 *
 * Everything in the header is checked, in this order, before it is used: the file is a regular
 * file at least the fixed header long; the magic and version; header_bytes against C and the
 * file size; the header CRC (so a damaged header reads as damaged rather than as a wrong field);
 * then every field, sizes multiplied with overflow checks and compared with the real file size;
 * then every label. The samples are not read at open (dts_verify does that).
 */
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "base/io_error.h"
#include "base/status.h"
#include "kernels/cast.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dts_read.c reads fp32 samples in place: a big-endian host needs a byte-swapping read"
#endif

typedef struct dts_map {
    const unsigned char *base; /* the whole file, mapped */
    size_t size;
    size_t header_bytes, labels_offset, row_bytes;
    int dtype;
    int labels_on_read; /* ds_open_opts.check_on_read: labels checked by dts_read, not at open */
    float *mean, *std;  /* copied out of the header: c each */
} dts_map;

const char *dts_dtype_name(int dtype)
{
    return dtype == DTS_UINT8 ? "uint8" : dtype == DTS_FP16 ? "fp16" : dtype == DTS_FP32 ? "fp32" : NULL;
}

int dts_dtype_parse(const char *name)
{
    if (!name) return 0;
    return !strcmp(name, "uint8") ? DTS_UINT8 : !strcmp(name, "fp16") ? DTS_FP16 : !strcmp(name, "fp32") ? DTS_FP32 : 0;
}

size_t dts_dtype_size(int dtype) { return dtype == DTS_UINT8 ? 1 : dtype == DTS_FP16 ? 2 : dtype == DTS_FP32 ? 4 : 0; }

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static float lef32(const unsigned char *p)
{
    uint32_t u = le32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

/* crc32 over any length: zlib takes at most UINT_MAX bytes a call. */
static uint32_t crc_of(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n) {
        const size_t k = n > (1u << 30) ? (1u << 30) : n;
        crc = (uint32_t)crc32(crc, p, (uInt)k);
        p += k;
        n -= k;
    }
    return crc;
}

/* Label i of the mapped file f against classes (from the header), the message naming its offset. */
static dt_status check_label(const char *f, const dts_map *m, uint64_t i, uint32_t classes)
{
    const int32_t y = (int32_t)le32(m->base + m->labels_offset + 4 * i);
    if (y >= 0 && (uint32_t)y < classes) return DT_OK;
    return status_set_error(DT_ERR_CORRUPT,
                            "%s: label %d of sample %llu (offset %llu) is outside 0 to %u (the "
                            "header says %u classes): write it again with dtrain data convert",
                            f, (int)y, (unsigned long long)i, (unsigned long long)(m->labels_offset + 4 * i),
                            classes - 1, classes);
}

static dt_status dts_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const dts_map *m = s->impl;
    const size_t per = (size_t)s->c * s->h * s->w;
    const unsigned char *row = m->base + m->header_bytes + i * m->row_bytes;
    switch (m->dtype) {
        case DTS_UINT8: cpu_cast_u8_to_f32(row, x, per); break;
        case DTS_FP16: cpu_cast_16_to_f32(DT_F16, (const uint16_t *)(const void *)row, x, per); break;
        default: memcpy(x, row, per * sizeof *x); break;
    }
    *label = (int32_t)le32(m->base + m->labels_offset + 4 * i);
    return m->labels_on_read ? check_label(s->source, m, i, (uint32_t)s->classes) : DT_OK;
}

static void dts_close(ds_split *s)
{
    dts_map *m = s->impl;
    if (!m) return;
    if (m->base) munmap((void *)m->base, m->size);
    free(m->mean);
    free(m->std);
    free(m);
    s->impl = NULL;
    s->mean = s->std = NULL;
}

static const ds_ops dts_ops = {dts_read, dts_close};

uint64_t dts_sample_offset(const ds_split *s, size_t i)
{
    const dts_map *m = s->impl;
    return (uint64_t)m->header_bytes + (uint64_t)i * m->row_bytes;
}

/* A .dts header's fixed fields, as the file holds them (little-endian), before any check. */
typedef struct dts_fields {
    uint32_t version, header_bytes, c, h, w, dtype, classes, hcrc, flags;
    uint64_t count, payload_bytes;
} dts_fields;

/* That f (len bytes at b) is a whole .dts header of this version, its CRC right; reads its fields
 * into *d. */
static dt_status check_framing(const char *f, const unsigned char *b, size_t len, dts_fields *d)
{
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is gzip-compressed: a .dts shard is read by mmap, uncompressed; "
                                "gunzip it first",
                                f);
    if (len < DTS_FIXED_BYTES)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is %zu bytes, too short for a .dts header (%u bytes at least): "
                                "truncated; write it again with dtrain data convert",
                                f, len, DTS_FIXED_BYTES);
    if (memcmp(b, DTS_MAGIC, 8) != 0)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is not a .dts shard: it does not start with the magic \"%s\" "
                                "(offset 0); give --data-format to read it as another format",
                                f, DTS_MAGIC);
    *d = (dts_fields){.version = le32(b + 8),
                      .header_bytes = le32(b + 12),
                      .c = le32(b + 16),
                      .h = le32(b + 20),
                      .w = le32(b + 24),
                      .dtype = le32(b + 28),
                      .count = le64(b + 32),
                      .classes = le32(b + 40),
                      .hcrc = le32(b + 44),
                      .payload_bytes = le64(b + 48),
                      .flags = le32(b + 60)};
    const uint32_t version = d->version, header_bytes = d->header_bytes, c = d->c, hcrc = d->hcrc;
    if (version > DTS_VERSION)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: .dts version %u (offset 8), written by a newer dtrain; this dtrain (%s) "
                                "reads version %u: read it with the dtrain that wrote it (or a newer one), or "
                                "convert the source data again with this one",
                                f, version, dt_version_string(), DTS_VERSION);
    if (version != DTS_VERSION)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: .dts version %u (offset 8) is not one dtrain wrote (it reads version %u): "
                                "the header is damaged; convert the data again with dtrain data convert",
                                f, version, DTS_VERSION);
    if (c < 1 || c > DS_MAX_SAMPLE_VALUES)
        return status_set_error(DT_ERR_CORRUPT, "%s: %u channels (offset 16); a sample has 1 to %u", f, c,
                                DS_MAX_SAMPLE_VALUES);
    const uint64_t want_hdr = round_up(DTS_FIXED_BYTES + 8ull * c, DTS_ALIGN);
    if (header_bytes != want_hdr)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: header_bytes %u (offset 12) should be %llu for %u channels: the "
                                "header is damaged; write it again with dtrain data convert",
                                f, header_bytes, (unsigned long long)want_hdr, c);
    if (header_bytes > len)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is %zu bytes, shorter than its %u-byte header: truncated; write it "
                                "again with dtrain data convert",
                                f, len, header_bytes);
    /* The CRC of the header with its own field as 0, without writing to the read-only map. */
    static const unsigned char zero4[4];
    uint32_t crc = crc_of(0, b, 44);
    crc = crc_of(crc, zero4, 4);
    crc = crc_of(crc, b + 48, header_bytes - 48);
    if (crc != hcrc)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: the header's CRC-32 is %08x but the header (bytes 0 to %u) sums to "
                                "%08x: the header is damaged; copy the file again or write it again with dtrain data "
                                "convert",
                                f, hcrc, header_bytes, crc);
    return DT_OK;
}

/* That the fields describe samples dtrain reads and a file of exactly len bytes; the bytes of the
 * samples (without padding) into *samples, of a row into *row. */
static dt_status check_fields(const char *f, size_t len, const dts_fields *d, uint64_t *samples, uint64_t *row_out)
{
    const uint32_t header_bytes = d->header_bytes, c = d->c, h = d->h, w = d->w, dtype = d->dtype, classes = d->classes,
                   flags = d->flags;
    const uint64_t count = d->count, payload_bytes = d->payload_bytes;
    if (flags & ~DTS_FLAG_BYTES)
        return status_set_error(
            DT_ERR_CORRUPT,
            "%s: flags field (offset 60) is 0x%x, with bits this dtrain (%s) does not know (it knows 0x%x): "
            "written by a newer dtrain; read it with that one (or a newer one), or convert the source data "
            "again with this one",
            f, flags, dt_version_string(), DTS_FLAG_BYTES);
    if (h < 1 || w < 1 || (uint64_t)c * h > DS_MAX_SAMPLE_VALUES || (uint64_t)c * h * w > DS_MAX_SAMPLE_VALUES)
        return status_set_error(DT_ERR_CORRUPT, "%s: sample shape %ux%ux%u (offsets 16, 20, 24) is not 1 to %u values",
                                f, c, h, w, DS_MAX_SAMPLE_VALUES);
    const size_t esize = dts_dtype_size((int)dtype);
    if (!esize)
        return status_set_error(DT_ERR_CORRUPT, "%s: dtype %u (offset 28) is not 1 (uint8), 2 (fp16) or 3 (fp32)", f,
                                dtype);
    if (count < 1)
        return status_set_error(DT_ERR_CORRUPT, "%s: count (offset 32) is 0: a shard holds at least one sample", f);
    if (classes < 1 || classes > DS_MAX_CLASSES)
        return status_set_error(DT_ERR_CORRUPT, "%s: %u classes (offset 40); a dataset has 1 to %d", f, classes,
                                DS_MAX_CLASSES);
    const uint64_t row = (uint64_t)c * h * w * esize; /* <= 2^30 */
    uint64_t labels, total;
    if (__builtin_mul_overflow(count, row, samples) || *samples > UINT64_MAX - DTS_ALIGN ||
        __builtin_mul_overflow(count, 4u, &labels) ||
        __builtin_add_overflow(round_up(*samples, DTS_ALIGN), labels, &total) || total > (uint64_t)len - header_bytes)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: %llu samples of %ux%ux%u %s (offsets 32, 16-28) need more than "
                                "the file's %zu bytes: truncated or a damaged count; write it again with dtrain data "
                                "convert",
                                f, (unsigned long long)count, c, h, w, dts_dtype_name((int)dtype), len);
    if (payload_bytes != total || (uint64_t)len - header_bytes != total)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s is %zu bytes; its header (%u bytes) describes a payload of %llu "
                                "bytes (%llu samples and their labels) and payload_bytes (offset 48) says %llu: data "
                                "after the labels or a damaged header; write it again with dtrain data convert",
                                f, len, header_bytes, (unsigned long long)total, (unsigned long long)count,
                                (unsigned long long)payload_bytes);
    *row_out = row;
    return DT_OK;
}

/* Each of the c channels' mean and std from the header at b into m, checked. */
static dt_status read_channel_stats(const char *f, const unsigned char *b, uint32_t c, dts_map *m)
{
    m->mean = malloc(c * sizeof *m->mean);
    m->std = malloc(c * sizeof *m->std);
    if (!m->mean || !m->std) return status_set_error(DT_ERR_NOMEM, "out of memory opening %s (%u channels)", f, c);
    for (uint32_t k = 0; k < c; k++) {
        m->mean[k] = lef32(b + DTS_FIXED_BYTES + 4 * (size_t)k);
        m->std[k] = lef32(b + DTS_FIXED_BYTES + 4 * ((size_t)c + k));
        if (!isfinite(m->mean[k]) || !isfinite(m->std[k]) || m->std[k] < 0)
            return status_set_error(DT_ERR_CORRUPT,
                                    "%s: channel %u's mean %g / std %g (offset %zu) is not a finite mean "
                                    "and std >= 0: write it again with dtrain data convert",
                                    f, k, (double)m->mean[k], (double)m->std[k], DTS_FIXED_BYTES + 4 * (size_t)k);
    }
    return DT_OK;
}

/* Checks the mapped file f (len bytes) as a .dts and fills m's offsets and s's fields. */
static dt_status check_header(const char *f, const unsigned char *b, size_t len, dts_map *m, ds_split *s)
{
    dts_fields d = {0};
    uint64_t samples = 0, row = 0;
    dt_status st = check_framing(f, b, len, &d);
    if (!st) st = check_fields(f, len, &d, &samples, &row);
    if (st) return st;
    m->header_bytes = d.header_bytes;
    m->row_bytes = (size_t)row;
    m->labels_offset = (size_t)(d.header_bytes + round_up(samples, DTS_ALIGN));
    m->dtype = (int)d.dtype;
    s->count = (size_t)d.count;
    s->c = (int)d.c, s->h = (int)d.h, s->w = (int)d.w;
    s->classes = (int)d.classes;
    /* uint8 is bytes; an fp16/fp32 shard of an image source says so in its flags. */
    s->uint8_values = d.dtype == DTS_UINT8 || (d.flags & DTS_FLAG_BYTES);
    st = read_channel_stats(f, b, d.c, m);
    if (st) return st;
    s->mean = m->mean;
    s->std = m->std;
    for (uint64_t i = 0; !m->labels_on_read && !st && i < d.count; i++) st = check_label(f, m, i, d.classes);
    return st;
}

/* The file a "dts" path means: itself, or train.dts / test.dts in a directory. */
static dt_status shard_path(const char *path, const ds_open_opts *opts, char *out, size_t n)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return status_set_error(DT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(out, n, "%s", path);
        return DT_OK;
    }
    const char *split = opts && opts->split ? opts->split : "train";
    snprintf(out, n, "%s/%s.dts", path, split);
    if (stat(out, &sb) != 0)
        return status_set_error(DT_ERR_IO, "%s has no %s split: %s is missing (dtrain data convert writes it)", path,
                                split, out);
    return DT_OK;
}

dt_status dts_open(const char *path, const ds_open_opts *opts, ds_split *s)
{
    char f[4200];
    dt_status st = shard_path(path, opts, f, sizeof f);
    if (st) return st;
    /* Non-blocking, so a FIFO named x.dts cannot hang the open; then regular files only. */
    int fd = open(f, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        return status_set_error(DT_ERR_IO, "cannot open %s: %s: %s", f, strerror(err),
                                io_error_fix(err, "shard", NULL, advice, sizeof advice));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return status_set_error(DT_ERR_IO, "%s is not a regular file (a directory, FIFO or device): give a .dts file",
                                f);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return status_set_error(DT_ERR_CORRUPT, "%s: %lld bytes do not fit this machine's address space", f,
                                (long long)sb.st_size);
    }
    const size_t len = (size_t)sb.st_size;
    dts_map *m = calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", f);
    }
    s->ops = &dts_ops;
    s->impl = m;
    if (len == 0) {
        close(fd);
        return status_set_error(DT_ERR_CORRUPT, "%s is empty: a .dts shard has a %u-byte header at least", f,
                                DTS_FIXED_BYTES);
    }
    void *base = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (base == MAP_FAILED)
        return status_set_error(DT_ERR_IO, "cannot map %s (%zu bytes): %s", f, len, strerror(errno));
    m->base = base;
    m->size = len;
    m->labels_on_read = opts && opts->check_on_read;
    if ((st = check_header(f, m->base, len, m, s))) return st;
    /* Training reads samples in a shuffled order: the kernel's read-around (read_ahead_kb, 128 KiB
     * to MiBs, more on Lustre) would read that much around each sample, and a first epoch over a
     * .dts larger than the page cache would read the file many times over. Passes in file order
     * (dts_check_payload) ask for read-ahead themselves. Advice only: a failure changes no result. */
    (void)madvise(base, len, MADV_RANDOM);
    snprintf(s->format, sizeof s->format, "dts");
    if (!s->split[0]) snprintf(s->split, sizeof s->split, "%s", opts && opts->split ? opts->split : "train");
    snprintf(s->source, sizeof s->source, "%.*s", (int)sizeof s->source - 1, f);
    return DT_OK;
}

void dts_advise_in_order(const ds_split *s, int on)
{
    if (!s || s->ops != &dts_ops || !s->impl) return;
    const dts_map *m = s->impl;
    (void)madvise((void *)(uintptr_t)m->base, m->size, on ? MADV_SEQUENTIAL : MADV_RANDOM);
}

dt_status dts_check_payload(const ds_split *s)
{
    const dts_map *m = s->impl;
    const uint64_t payload = m->size - m->header_bytes;
    const uint32_t want = le32(m->base + 56);
    dts_advise_in_order(s, 1);
    const uint32_t got = crc_of(0, m->base + m->header_bytes, (size_t)payload);
    dts_advise_in_order(s, 0);
    if (got == want) return DT_OK;
    return status_set_error(DT_ERR_CORRUPT,
                            "%s: the payload (bytes %zu to %zu) sums to CRC-32 %08x, the header says "
                            "%08x: samples or labels are damaged; copy the file again or write it again with dtrain "
                            "data convert",
                            s->source, m->header_bytes, m->size, got, want);
}

dt_status dts_verify(const char *path)
{
    ds_split s = {0};
    dt_status st = dts_open(path, NULL, &s);
    if (st) {
        if (s.ops) s.ops->close(&s);
        return st;
    }
    const dts_map *m = s.impl;
    st = dts_check_payload(&s);
    if (!st && m->dtype != DTS_UINT8) {
        const size_t per = (size_t)s.c * s.h * s.w;
        float *x = malloc(per * sizeof *x);
        if (!x) st = status_set_error(DT_ERR_NOMEM, "out of memory verifying %s", s.source);
        for (size_t i = 0; !st && i < s.count; i++) {
            int32_t y;
            dts_read(&s, i, x, &y);
            for (size_t j = 0; j < per; j++)
                if (!isfinite(x[j])) {
                    st = status_set_error(DT_ERR_CORRUPT,
                                          "%s: value %zu of sample %zu (offset %llu) is %g: a dataset "
                                          "must hold finite values; write it again from a clean source",
                                          s.source, j, i,
                                          (unsigned long long)(dts_sample_offset(&s, i) + j * dts_dtype_size(m->dtype)),
                                          (double)x[j]);
                    break;
                }
        }
        free(x);
    }
    s.ops->close(&s);
    return st;
}
