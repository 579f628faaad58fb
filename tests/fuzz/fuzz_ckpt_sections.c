/*
 * fuzz_ckpt_sections.c - the named-section checkpoint reader (runtime/checkpoint/ckpt_file.c,
 * ckpt_reader.c): a version-4 file from outside, opened and read section by section.
 *
 * Input: one mode byte, then the file's bytes. Mode bit 0: recompute every CRC first (ckpt_seal),
 * so the fuzzer reaches the checks of the table and the lengths behind them; bit 1: through
 * dt_ckpt_open_latest on the directory and dt_ckpt_read / dt_ckpt_read_rank (one process) instead
 * of ckpt_file_open_fd and ckpt_file_read.
 * Beyond ASan/UBSan (a read past a buffer, an allocation by a crafted size: -malloc_limit_mb), the
 * reader must keep its promises: an accepted file is exactly header + table + its sections, its
 * names are valid and unique, every section reads back as the bytes at its place in the file with
 * the CRC its entry says, and a read of another size, a missing name or a per-rank read of a plain
 * section is refused; a refused file opens nothing.
 */
#include "fuzz_common.h"
#include "runtime/checkpoint/ckpt_format.h"
#include "dtrain.h"

#include <unistd.h>

static char dir[64], path[128];

/* The promises about section i (bytes at img + off) that both paths share. */
static void check_entry(const ckpt4_entry *e, uint32_t i, const ckpt4_entry *all, const unsigned char *img, size_t off,
                        size_t len)
{
    FUZZ_CHECK(ckpt_name_valid(e->name), "accepted section %u with an invalid name", i);
    for (uint32_t k = 0; k < i; k++) FUZZ_CHECK(strcmp(all[k].name, e->name) != 0, "accepted a duplicate name");
    FUZZ_CHECK(e->bytes <= len && off <= len - e->bytes, "section %u reaches past the file", i);
    FUZZ_CHECK(ckpt_crc(img + off, (size_t)e->bytes) == e->crc, "accepted section %u with a wrong CRC", i);
}

static void through_reader(const unsigned char *img, size_t len)
{
    dt_ckpt_reader *r = NULL;
    long step = -1;
    dt_status s = dt_ckpt_open_latest(NULL, dir, &r, &step);
    /* A file of a newer format version (the version field within CKPT_VERSION_NEWER_MAX) stops the
     * search instead of being skipped: a resume from an older file would overwrite it. */
    ckpt4_header v = {{0}};
    memcpy(&v, img, len < sizeof v ? len : sizeof v);
    const int newer =
        len >= 16 && !memcmp(v.magic, CKPT_MAGIC, 8) && v.version > CKPT_VERSION && v.version <= CKPT_VERSION_NEWER_MAX;
    FUZZ_CHECK(s == DT_OK || s == DT_ERR_NOMEM || (newer && s == DT_ERR_INVALID_ARG), "open_latest failed with %d: %s",
               (int)s, dt_last_error());
    if (s == DT_ERR_INVALID_ARG) return;
    if (!r) {
        FUZZ_CHECK(step == 0, "nothing opened but step %ld", step);
        return;
    }
    ckpt4_header h;
    memcpy(&h, img, sizeof h);
    FUZZ_CHECK(dt_ckpt_num_sections(r) == (int)h.nsections && step == h.step, "table differs from the header");
    const ckpt4_entry *e = (const ckpt4_entry *)(const void *)(img + sizeof h);
    size_t off = sizeof h + h.nsections * sizeof *e;
    for (uint32_t i = 0; i < h.nsections; i++) {
        check_entry(&e[i], i, e, img, off, len);
        FUZZ_CHECK(strcmp(dt_ckpt_section_name(r, (int)i), e[i].name) == 0, "name %u differs", i);
        size_t bytes = 0;
        FUZZ_CHECK(dt_ckpt_section_size(r, e[i].name, &bytes) == DT_OK && bytes == e[i].bytes, "size of %u", i);
        unsigned char *buf = malloc(bytes + 1);
        FUZZ_CHECK(buf, "out of memory");
        FUZZ_CHECK(dt_ckpt_read(r, e[i].name, buf, bytes) == DT_OK, "read of %u: %s", i, dt_last_error());
        FUZZ_CHECK(memcmp(buf, img + off, bytes) == 0, "section %u read other bytes than the file holds", i);
        FUZZ_CHECK(dt_ckpt_read(r, e[i].name, buf, bytes + 1) == DT_ERR_INVALID_ARG, "a read of another size");
        dt_status rr = dt_ckpt_read_rank(r, e[i].name, buf, bytes);
        /* One blob per rank reads back only at the rank count that wrote it: here 1. */
        FUZZ_CHECK(e[i].ranks && h.world == 1 ? rr == DT_OK : rr == DT_ERR_INVALID_ARG, "per-rank read of %u gave %d",
                   i, (int)rr);
        free(buf);
        off += bytes;
    }
    FUZZ_CHECK(off == len, "accepted a file of %zu bytes whose sections end at %zu", len, off);
    FUZZ_CHECK(dt_ckpt_read(r, "no/such name", NULL, 0) == DT_ERR_INVALID_ARG, "a missing name was read");
    dt_ckpt_close(r);
}

static void through_file(const unsigned char *img, size_t len, long name_step)
{
    int fd;
    uint64_t size;
    uint32_t version;
    ckpt_file *f = NULL;
    dt_status s = ckpt_open_regular(path, &fd, &size, &version);
    FUZZ_CHECK(s == DT_OK && size == len, "cannot open what was written: %s", dt_last_error());
    s = ckpt_file_open_fd(fd, size, path, name_step, 1, &f);
    FUZZ_CHECK(s == DT_OK || s == DT_ERR_CORRUPT || s == DT_ERR_NOMEM, "refused with %d: %s", (int)s, dt_last_error());
    if (s) {
        FUZZ_CHECK(!f, "refused but a file handle returned");
        return;
    }
    FUZZ_CHECK(f->step == name_step && f->world >= 1, "accepted step %ld, world %d", f->step, f->world);
    size_t off = sizeof(ckpt4_header) + f->n * sizeof(ckpt4_entry);
    for (uint32_t i = 0; i < f->n; i++) {
        check_entry(&f->e[i], i, f->e, img, off, len);
        FUZZ_CHECK(f->off[i] == off, "section %u at %llu, not %zu", i, (unsigned long long)f->off[i], off);
        FUZZ_CHECK(!f->e[i].ranks || (f->e[i].ranks == (uint32_t)f->world && f->e[i].bytes % f->e[i].ranks == 0),
                   "per-rank section %u of %u ranks, world %d", i, f->e[i].ranks, f->world);
        unsigned char *buf = malloc((size_t)f->e[i].bytes + 1);
        FUZZ_CHECK(buf, "out of memory");
        FUZZ_CHECK(ckpt_file_read(f, i, buf) == DT_OK && memcmp(buf, img + off, (size_t)f->e[i].bytes) == 0,
                   "section %u does not read back", i);
        free(buf);
        off += (size_t)f->e[i].bytes;
    }
    FUZZ_CHECK(off == len, "accepted a file of %zu bytes whose sections end at %zu", len, off);
    ckpt_file_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_scratch_dir(dir, sizeof dir, "ckpt-sections");
    if (size < 1) return 0;
    const int mode = data[0];
    size_t len = size - 1;
    unsigned char *img = malloc(len ? len : 1);
    FUZZ_CHECK(img, "out of memory");
    memcpy(img, data + 1, len);
    if (mode & 1) ckpt_seal(img, len);
    /* The name carries the header's step when it can, so the name check does not stop the fuzzer. */
    long name_step = 7;
    if (len >= sizeof(ckpt4_header)) {
        ckpt4_header h;
        memcpy(&h, img, sizeof h);
        if (h.step >= 0 && h.step <= CKPT_MAX_STEP) name_step = (long)h.step;
    }
    snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, name_step);
    fuzz_write_file(path, img, len);
    if (mode & 2)
        through_reader(img, len);
    else
        through_file(img, len, name_step);
    unlink(path);
    free(img);
    return 0;
}
