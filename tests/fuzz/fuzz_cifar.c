/*
 * fuzz_cifar.c - the CIFAR-10 / CIFAR-100 reader (runtime/data/cifar.c): one file from outside,
 * opened through cifar_open as a single-file split.
 *
 * Input: one mode byte, then the file. Mode bit 0: CIFAR-100 (else CIFAR-10); bit 1: CIFAR-100's
 * coarse labels (else fine); bit 2: compact: the rest is label bytes only (1 per CIFAR-10 record,
 * 2 per CIFAR-100 record, at most COMPACT_MAX records, what is left over ignored), each group
 * expanded here into a whole record with a pixel pattern, so that inputs of many records fit in
 * libFuzzer's max_len (a raw record alone is 3073 or 3074 bytes); bit 3: written gzip-compressed (name.bin.gz).
 * Beyond ASan/UBSan/leaks (a refused file must leave nothing allocated: the split stays without
 * ops and impl), the reader must keep reader.h's promises: it accepts exactly the sound files (a
 * whole, non-zero number of records of the format's size, every label in range: CIFAR-100's
 * coarse and fine both), refusing the others with DT_ERR_CORRUPT and a message; an accepted one
 * has as many samples as records, shape 3x32x32 and the format's classes; every sample
 * reads with a label in [0, classes) and the stored bytes as values 0..255; count itself is out of
 * range (DT_ERR_INVALID_ARG).
 */
#include "fuzz_common.h"

#include "runtime/data/reader.h"
#include "dtrain.h"

#include <unistd.h>
#include <zlib.h>

#define PIXELS 3072
/* More records add nothing the reader's loops do not do at 64, and cost file I/O per run. */
#define COMPACT_MAX 64

static char dir[64], path[128];
static unsigned char *file;
static size_t file_cap;

static void setup(void) { fuzz_scratch_dir(dir, sizeof dir, "cifar"); }

/* The file's bytes for this input (in the static buffer `file`). */
static size_t build(const uint8_t *data, size_t size, int mode, size_t hdr)
{
    const size_t rec = hdr + PIXELS;
    const size_t groups = size / hdr < COMPACT_MAX ? size / hdr : COMPACT_MAX;
    size_t len = (mode & 4) ? groups * rec : size;
    if (len > file_cap) {
        free(file);
        file_cap = len;
        file = malloc(file_cap);
        FUZZ_CHECK(file, "out of memory");
    }
    if (!(mode & 4)) {
        if (size) memcpy(file, data, size);
        return len;
    }
    for (size_t r = 0; r < groups; r++) {
        unsigned char *p = file + r * rec;
        memcpy(p, data + r * hdr, hdr);
        for (size_t k = 0; k < PIXELS; k++) p[hdr + k] = (unsigned char)(k * 7 + r * 13 + p[0]);
    }
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) setup();
    if (size < 1) return 0;
    const int mode = data[0];
    const int cifar100 = mode & 1, coarse = (mode >> 1) & 1, gz = (mode >> 3) & 1;
    const size_t hdr = cifar100 ? 2 : 1, rec = hdr + PIXELS;
    const size_t len = build(data + 1, size - 1, mode, hdr);
    snprintf(path, sizeof path, "%s/batch.bin%s", dir, gz ? ".gz" : "");
    if (gz) {
        gzFile z = gzopen(path, "wb1");
        FUZZ_CHECK(z, "cannot write %s", path);
        FUZZ_CHECK(len == 0 || gzwrite(z, file, (unsigned)len) == (int)len, "short gzwrite");
        FUZZ_CHECK(gzclose(z) == Z_OK, "gzclose");
    } else {
        fuzz_write_file(path, file, len);
    }

    /* What the file is: sound when it is a whole, non-zero number of records with every label (both of
     * CIFAR-100's) in range. */
    int sound = len > 0 && len % rec == 0;
    /* Plain bytes that start with the gzip magic are inflated by the reader (file_io.h): what it
     * reads is then not these bytes, and only the general promises are checked. (Such a file is
     * never sound as it stands: 0x1f is no label of either format.) */
    const int known = gz || len < 2 || file[0] != 0x1f || file[1] != 0x8b;
    for (size_t r = 0; sound && r < len / rec; r++) {
        const unsigned char *p = file + r * rec;
        sound = cifar100 ? p[0] < 20 && p[1] < 100 : p[0] < 10;
    }

    ds_open_opts o = {.format = cifar100 ? "cifar100" : "cifar10", .split = "train", .cifar100_coarse = coarse};
    ds_split s;
    memset(&s, 0, sizeof s);
    dt_status st = cifar_open(path, &o, &s);
    if (st == DT_OK) {
        const int classes = cifar100 ? (coarse ? 20 : 100) : 10;
        FUZZ_CHECK(s.ops && s.ops->read && s.ops->close, "accepted without ops");
        FUZZ_CHECK(sound || !known, "accepted a file of %zu bytes (records of %zu) with a bad size or label", len, rec);
        FUZZ_CHECK(s.count == len / rec || !known, "count %zu for %zu bytes of %zu-byte records", s.count, len, rec);
        FUZZ_CHECK(s.c == 3 && s.h == 32 && s.w == 32, "shape %dx%dx%d", s.c, s.h, s.w);
        FUZZ_CHECK(s.classes == classes, "classes %d, want %d", s.classes, classes);
        static float x[PIXELS];
        for (size_t i = 0; i < s.count; i++) {
            int32_t label = -1;
            FUZZ_CHECK(ds_read(&s, i, x, &label) == DT_OK, "sample %zu of %zu: %s", i, s.count, dt_last_error());
            FUZZ_CHECK(label >= 0 && label < classes, "sample %zu: label %d of %d classes", i, (int)label, classes);
            if (!known) continue;
            const unsigned char *r = file + i * rec;
            FUZZ_CHECK(label == r[cifar100 && !coarse ? 1 : 0], "sample %zu: label %d, stored %d", i, (int)label,
                       r[cifar100 && !coarse ? 1 : 0]);
            for (size_t k = 0; k < PIXELS; k++)
                FUZZ_CHECK(x[k] == (float)r[hdr + k], "sample %zu pixel %zu: %g, stored %d", i, k, (double)x[k],
                           r[hdr + k]);
        }
        int32_t label = -1;
        FUZZ_CHECK(ds_read(&s, s.count, x, &label) == DT_ERR_INVALID_ARG, "read(count) accepted");
        s.ops->close(&s);
    } else {
        FUZZ_CHECK(!sound || st == DT_ERR_NOMEM, "a sound file of %zu records refused (%d): %s", len / rec, (int)st,
                   dt_last_error());
        FUZZ_CHECK(st == DT_ERR_CORRUPT || st == DT_ERR_NOMEM, "status %d: %s", (int)st, dt_last_error());
        FUZZ_CHECK(!s.ops && !s.impl && s.count == 0, "refused (%d) but the split was filled", (int)st);
        FUZZ_CHECK(dt_last_error()[0], "refused (%d) without a message", (int)st);
    }
    unlink(path);
    return 0;
}
