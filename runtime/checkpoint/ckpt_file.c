/*
 * ckpt_file.c - one version-4 checkpoint file on one process: its header and section table checked
 * against the file's name and size before anything is allocated by a size the file gives, every
 * section's CRC when asked, and reads of a section by index (see ckpt_format.h).
 *
 * A file is input from outside: truncated, damaged, from another run, or crafted with valid CRCs.
 * The table is bounded by DT_CKPT_MAX_SECTIONS and by the file's size before it is allocated; the
 * sections' sizes must add up to the file's size exactly, so no section reaches past the end or
 * overlaps another, and no read can be longer than the file.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

/* 1 when all n bytes at offset `at` were read, else 0 (errno set, 0 at end of file). */
static int pread_exact(int fd, void *p, size_t n, uint64_t at)
{
    char *b = p;
    while (n > 0) {
        ssize_t r = pread(fd, b, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return 0;
        }
        b += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return 1;
}

static int name_cmp(const void *a, const void *b)
{
    const ckpt4_entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Every entry on its own, then names unique (sorted copies of pointers: n log n for 65536). */
static dt_status check_entries(const char *path, const ckpt4_header *h, const ckpt4_entry *e)
{
    for (uint32_t i = 0; i < h->nsections; i++) {
        const ckpt4_entry *x = &e[i];
        size_t len = strnlen(x->name, sizeof x->name);
        int tail_zero = 1;
        for (size_t k = len; k < sizeof x->name; k++) tail_zero &= x->name[k] == 0;
        if (len == sizeof x->name || !tail_zero || !ckpt_name_valid(x->name))
            return status_set_error(DT_ERR_CORRUPT,
                                    "checkpoint %s: the name of section %u is not 1 to %d characters of "
                                    "[A-Za-z0-9._-] followed by NULs",
                                    path, i, DT_CKPT_NAME_MAX);
        if (x->reserved != 0)
            return status_set_error(DT_ERR_CORRUPT,
                                    "checkpoint %s: section \"%s\" has reserved field %llu; it must be 0", path,
                                    x->name, (unsigned long long)x->reserved);
        if (x->ranks != 0 && x->ranks != h->world)
            return status_set_error(DT_ERR_CORRUPT,
                                    "checkpoint %s: section \"%s\" claims blobs of %u ranks; a per-rank "
                                    "section holds one for each of the %u ranks that wrote the file, or the field is 0",
                                    path, x->name, x->ranks, h->world);
        if (x->ranks != 0 && x->bytes % x->ranks != 0)
            return status_set_error(DT_ERR_CORRUPT,
                                    "checkpoint %s: per-rank section \"%s\" is %llu bytes, not a whole "
                                    "number of blobs for %u ranks",
                                    path, x->name, (unsigned long long)x->bytes, x->ranks);
        /* No writer makes a larger blob (dt_ckpt_add_per_rank), and dt_ckpt_read_rank hands one
         * blob to MPI_Scatter as an int count: a crafted size would be cut to another length. */
        if (x->ranks != 0 && x->bytes / x->ranks > DT_CKPT_PER_RANK_MAX)
            return status_set_error(DT_ERR_CORRUPT,
                                    "checkpoint %s: per-rank section \"%s\" claims blobs of %llu bytes; "
                                    "dt_ckpt_add_per_rank writes at most %zu (DT_CKPT_PER_RANK_MAX)",
                                    path, x->name, (unsigned long long)(x->bytes / x->ranks), DT_CKPT_PER_RANK_MAX);
    }
    if (h->nsections < 2) return DT_OK;
    const ckpt4_entry **sorted = malloc(h->nsections * sizeof *sorted);
    if (!sorted) return status_set_error(DT_ERR_NOMEM, "out of memory checking checkpoint %s", path);
    for (uint32_t i = 0; i < h->nsections; i++) sorted[i] = &e[i];
    qsort(sorted, h->nsections, sizeof *sorted, name_cmp);
    dt_status s = DT_OK;
    for (uint32_t i = 1; i < h->nsections && !s; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            s = status_set_error(DT_ERR_CORRUPT, "checkpoint %s: two sections are named \"%s\"", path, sorted[i]->name);
    free(sorted);
    return s;
}

/* Streams section i through the CRC, 1 MiB at a time. */
static dt_status verify_section(const ckpt_file *f, uint32_t i, unsigned char *buf, size_t cap)
{
    uint32_t c = ckpt_crc(NULL, 0);
    for (uint64_t at = 0; at < f->e[i].bytes;) {
        size_t n = f->e[i].bytes - at < cap ? (size_t)(f->e[i].bytes - at) : cap;
        dt_status s = ckpt_file_pread(f, i, at, buf, n);
        if (s) return s;
        c = ckpt_crc_more(c, buf, n);
        at += n;
    }
    if (c != f->e[i].crc)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section \"%s\" is damaged (CRC mismatch)", f->path,
                                f->e[i].name);
    return DT_OK;
}

void ckpt_beat_now(const ckpt_beat *beat)
{
    if (beat && beat->fn) beat->fn(beat->arg);
}

void ckpt_test_slow(const ckpt_beat *beat)
{
    const char *v = getenv("DTRAIN_TEST_SLOW_CKPT");
    const double s = v ? atof(v) : 0;
    for (double t = 0; t < s; t += 0.05) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
        ckpt_beat_now(beat);
    }
}

/* The header of the file fd (size bytes) into *h, checked: the magic and CRC, version 4, the step
 * of its name, a world in bounds, a table of at most DT_CKPT_MAX_SECTIONS that fits the file. */
static dt_status read_header(int fd, uint64_t size, const char *path, long name_step, ckpt4_header *h)
{
    if (size < sizeof *h || !pread_exact(fd, h, sizeof *h, 0))
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is truncated (%llu bytes, a header needs %zu)", path,
                                (unsigned long long)size, sizeof *h);
    const uint32_t want = h->header_crc;
    h->header_crc = 0;
    if (memcmp(h->magic, CKPT_MAGIC, 8) != 0 || ckpt_crc(h, sizeof *h) != want)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is not a dtrain checkpoint or its header is damaged",
                                path);
    if (h->version != 4)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s has version %u; this reader reads version 4", path,
                                h->version);
    if (h->step != name_step)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s: header field step is %lld but the file name says step %ld", path,
                                (long long)h->step, name_step);
    if (h->world < 1 || h->world > CKPT_MAX_WORLD)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field world is %u; it must be 1 to %u", path,
                                h->world, CKPT_MAX_WORLD);
    if (h->reserved != 0)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: reserved header field is %u; it must be 0", path,
                                h->reserved);
    /* The table's size from the count, bounded before it is allocated. */
    const uint64_t table = (uint64_t)h->nsections * sizeof(ckpt4_entry);
    if (h->nsections > DT_CKPT_MAX_SECTIONS)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: header field nsections is %u; a file holds at most %d",
                                path, h->nsections, DT_CKPT_MAX_SECTIONS);
    if (table > size - sizeof *h)
        return status_set_error(DT_ERR_CORRUPT,
                                "checkpoint %s is %llu bytes; its header describes a table of %u "
                                "sections, %llu bytes with the header (truncated)",
                                path, (unsigned long long)size, h->nsections, (unsigned long long)(sizeof *h + table));
    return DT_OK;
}

/* The section table that h describes into f (f->e, f->off), its CRC and entries checked, and each
 * section's offset: the sizes must add up to the file's exactly. */
static dt_status read_table(ckpt_file *f, const ckpt4_header *h)
{
    const uint64_t table = (uint64_t)h->nsections * sizeof(ckpt4_entry);
    f->e = malloc(table ? (size_t)table : 1);
    f->off = malloc(h->nsections ? h->nsections * sizeof *f->off : 1);
    if (!f->e || !f->off)
        return status_set_error(DT_ERR_NOMEM, "out of memory reading the section table of checkpoint %s", f->path);
    if (table && !pread_exact(f->fd, f->e, (size_t)table, sizeof *h))
        return status_set_error(DT_ERR_IO, "cannot read the section table of checkpoint %s: %s", f->path,
                                errno ? strerror(errno) : "end of file");
    if (ckpt_crc(f->e, (size_t)table) != h->table_crc)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: the section table is damaged (CRC mismatch)", f->path);
    dt_status s = check_entries(f->path, h, f->e);
    if (s) return s;
    /* Sizes add up to the file's exactly; a sum past 2^64 saturates (and is then far too big). */
    uint64_t total = sizeof *h + table;
    for (uint32_t i = 0; i < f->n; i++) {
        f->off[i] = total;
        total = f->e[i].bytes > UINT64_MAX - total ? UINT64_MAX : total + f->e[i].bytes;
    }
    if (total != f->size)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s is %llu bytes; its header describes %s%llu (%s)",
                                f->path, (unsigned long long)f->size, total == UINT64_MAX ? "at least " : "",
                                (unsigned long long)total,
                                f->size < total ? "truncated" : "data after its last section");
    return DT_OK;
}

/* Every section's CRC against its bytes, read through one 1 MiB buffer. */
static dt_status verify_sections(ckpt_file *f)
{
    const size_t cap = (size_t)1 << 20;
    unsigned char *buf = malloc(cap);
    if (!buf) return status_set_error(DT_ERR_NOMEM, "out of memory checking checkpoint %s", f->path);
    dt_status s = DT_OK;
    for (uint32_t i = 0; i < f->n && !s; i++) s = verify_section(f, i, buf, cap);
    free(buf);
    return s;
}

dt_status ckpt_file_open_fd(int fd, uint64_t size, const char *path, long name_step, int verify, ckpt_file **out)
{
    *out = NULL;
    ckpt_file *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return status_set_error(DT_ERR_NOMEM, "out of memory opening checkpoint %s", path);
    }
    f->fd = fd;
    f->path = path;
    f->size = size;
    ckpt4_header h;
    dt_status s = read_header(fd, size, path, name_step, &h);
    if (!s) {
        f->n = h.nsections;
        f->step = (long)h.step;
        f->world = (int)h.world;
        s = read_table(f, &h);
    }
    if (!s && verify && f->n) s = verify_sections(f);
    if (s) {
        ckpt_file_close(f);
        return s;
    }
    *out = f;
    return DT_OK;
}

int ckpt_file_find(const ckpt_file *f, const char *name)
{
    for (uint32_t i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return (int)i;
    return -1;
}

dt_status ckpt_file_pread(const ckpt_file *f, uint32_t i, uint64_t at, void *dst, size_t n)
{
    if (i >= f->n || at > f->e[i].bytes || n > f->e[i].bytes - at)
        return status_set_error(DT_ERR_INTERNAL, "ckpt_file_pread: bytes [%llu, +%zu) of section %u are outside it",
                                (unsigned long long)at, n, i);
    errno = 0;
    int whole = 1;
    for (size_t done = 0; whole && done < n; done += CKPT_IO_CHUNK) {
        ckpt_beat_now(f->beat);
        const size_t k = n - done < CKPT_IO_CHUNK ? n - done : CKPT_IO_CHUNK;
        whole = pread_exact(f->fd, (char *)dst + done, k, f->off[i] + at + done);
    }
    if (!whole)
        return status_set_error(errno ? DT_ERR_IO : DT_ERR_CORRUPT, "checkpoint %s: section \"%s\" cannot be read (%s)",
                                f->path, f->e[i].name,
                                errno ? strerror(errno) : "the file is shorter than when opened");
    return DT_OK;
}

dt_status ckpt_file_read(const ckpt_file *f, uint32_t i, void *dst)
{
    dt_status s = ckpt_file_pread(f, i, 0, dst, (size_t)f->e[i].bytes);
    if (s) return s;
    if (ckpt_crc(dst, (size_t)f->e[i].bytes) != f->e[i].crc)
        return status_set_error(DT_ERR_CORRUPT, "checkpoint %s: section \"%s\" is damaged (CRC mismatch)", f->path,
                                f->e[i].name);
    return DT_OK;
}

void ckpt_file_close(ckpt_file *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->e);
    free(f->off);
    free(f);
}

void ckpt_names_list(const ckpt4_entry *e, uint32_t n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    if (n == 0) {
        snprintf(buf, len, "none");
        return;
    }
    const uint32_t shown = n < 16 ? n : 16; /* the message stays readable, and inside 2 KiB */
    for (uint32_t i = 0; i < shown && at < len; i++) {
        int w = snprintf(buf + at, len - at, "%s\"%s\"", i ? ", " : "", e[i].name);
        if (w < 0) return;
        at += (size_t)w;
    }
    if (n > shown && at < len) snprintf(buf + at, len - at, " and %u more", n - shown);
}
