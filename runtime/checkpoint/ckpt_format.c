/*
 * ckpt_format.c - the pieces of the checkpoint format that writer, readers and tests share: the
 * CRC, the file-name and section-name rules, the directory listing, the guarded open, and the test
 * hook that re-seals a crafted image (see ckpt_format.h).
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "base/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

uint32_t ckpt_crc_more(uint32_t crc, const void *p, size_t bytes)
{
    uLong c = crc;
    const unsigned char *b = p;
    while (bytes > 0) { /* crc32 takes a uInt length */
        uInt chunk = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        c = crc32(c, b, chunk);
        b += chunk;
        bytes -= chunk;
    }
    return (uint32_t)c;
}

uint32_t ckpt_crc(const void *p, size_t bytes) { return ckpt_crc_more((uint32_t)crc32(0L, Z_NULL, 0), p, bytes); }

int ckpt_name_step(const char *name, long *step)
{
    /* Digits only: sscanf("%ld") would take signs, blanks and overflow ("ckpt-+5.dtc",
     * "ckpt-99999999999999999999.dtc") and make two names one step. */
    if (strncmp(name, "ckpt-", 5) != 0) return 0;
    const char *d = name + 5;
    long v = 0;
    int nd = 0;
    while (d[nd] >= '0' && d[nd] <= '9') {
        if (nd == CKPT_MAX_STEP_DIGITS) return 0;
        v = v * 10 + (d[nd] - '0');
        nd++;
    }
    if (nd == 0 || strcmp(d + nd, ".dtc") != 0) return 0;
    /* One name per step, the one the writer gives it: then "resumed from DIR/ckpt-<step>.dtc" is
     * always the file that was read, and two files can never claim one step. */
    char canon[64];
    snprintf(canon, sizeof canon, "ckpt-%010ld.dtc", v);
    if (strcmp(canon, name) != 0) return 0;
    *step = v;
    return 1;
}

int ckpt_name_valid(const char *name)
{
    size_t n = 0;
    for (; name[n]; n++) {
        const char c = name[n];
        if (n == DT_CKPT_NAME_MAX) return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return n > 0;
}

/* Newest first (a step has one name, so steps never tie). */
static int entry_cmp(const void *a, const void *b)
{
    const ckpt_entry *x = a, *y = b;
    return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

void ckpt_list_free(ckpt_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) free(e[i].name);
    free(e);
}

dt_status ckpt_list(const char *dir, ckpt_entry **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return DT_OK;
        return status_set_error(DT_ERR_IO, "cannot read checkpoint directory %s: %s", dir, strerror(errno));
    }
    ckpt_entry *e = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    long st;
    while ((de = readdir(d))) {
        if (!ckpt_name_step(de->d_name, &st)) continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            ckpt_entry *ne = realloc(e, ncap * sizeof *e);
            if (!ne) goto nomem;
            e = ne;
            cap = ncap;
        }
        if (!(e[n].name = strdup(de->d_name))) goto nomem;
        e[n++].step = st;
    }
    closedir(d);
    if (n) qsort(e, n, sizeof *e, entry_cmp);
    *out = e;
    *count = n;
    return DT_OK;
nomem:
    closedir(d);
    ckpt_list_free(e, n);
    return status_set_error(DT_ERR_NOMEM, "out of memory listing checkpoint directory %s", dir);
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

dt_status ckpt_open_regular(const char *path, int *fd, uint64_t *size, uint32_t *version)
{
    *fd = -1;
    *size = 0;
    *version = 0;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    /* A file this user may not read is no damage: skipping it would resume behind it and a later
     * save of the same step would write over it, so the search stops (DT_ERR_INVALID_ARG). */
    if (f < 0 && (errno == EACCES || errno == EPERM))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "checkpoint %s cannot be read: %s: this user may not read it; fix its permissions "
                                "(chmod u+r, or run as its owner), or move the file out of the directory to go on "
                                "from an older checkpoint",
                                path, strerror(errno));
    if (f < 0) return status_set_error(DT_ERR_IO, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        dt_status s = status_set_error(DT_ERR_IO, "cannot stat checkpoint %s: %s", path, strerror(errno));
        close(f);
        return s;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return status_set_error(DT_ERR_CORRUPT, "%s is %s, not a checkpoint file: rename or remove it", path,
                                file_kind(sb.st_mode));
    }
    unsigned char head[16];
    if (pread(f, head, sizeof head, 0) == (ssize_t)sizeof head && memcmp(head, CKPT_MAGIC, 8) == 0)
        memcpy(version, head + 8, sizeof *version);
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return DT_OK;
}

dt_status ckpt_refuse_newer(const char *path, uint32_t version)
{
    return status_set_error(DT_ERR_INVALID_ARG,
                            "checkpoint %s has format version %u, written by a newer dtrain; this dtrain (%s) "
                            "reads versions 1 to %u: go on with the dtrain that wrote it (or a newer one), or move "
                            "the file out of the directory to go on from an older checkpoint",
                            path, version, dt_version_string(), CKPT_VERSION);
}

/* Version 4: each section held in full, then the table, then the header. */
static void seal4(unsigned char *b, size_t len)
{
    ckpt4_header h;
    memcpy(&h, b, sizeof h);
    const size_t table = sizeof h;
    if (h.nsections <= DT_CKPT_MAX_SECTIONS && (size_t)h.nsections * sizeof(ckpt4_entry) <= len - table) {
        size_t off = table + (size_t)h.nsections * sizeof(ckpt4_entry);
        for (uint32_t i = 0; i < h.nsections; i++) {
            ckpt4_entry e;
            memcpy(&e, b + table + i * sizeof e, sizeof e);
            if (e.bytes > len - off) break;
            e.crc = ckpt_crc(b + off, (size_t)e.bytes);
            off += (size_t)e.bytes;
            memcpy(b + table + i * sizeof e, &e, sizeof e);
        }
        h.table_crc = ckpt_crc(b + table, (size_t)h.nsections * sizeof(ckpt4_entry));
    }
    h.header_crc = 0;
    h.header_crc = ckpt_crc(&h, sizeof h);
    memcpy(b, &h, sizeof h);
}

void ckpt_seal(void *buf, size_t len)
{
    unsigned char *b = buf;
    ckpt_header h;
    if (len >= sizeof(ckpt4_header) && memcmp(b + 8, &(uint32_t){4}, 4) == 0) {
        seal4(b, len);
        return;
    }
    if (len < sizeof h) return;
    memcpy(&h, b, sizeof h);
    size_t off = sizeof h;
    if (h.version >= 2 && len >= off + sizeof(ckpt_scaler)) {
        ckpt_scaler cs;
        memcpy(&cs, b + off, sizeof cs);
        cs.crc = 0;
        cs.crc = ckpt_crc(&cs, sizeof cs);
        memcpy(b + off, &cs, sizeof cs);
        off += sizeof cs;
    }
    if (h.version >= 3 && len >= off + sizeof(ckpt_data)) {
        ckpt_data cd;
        memcpy(&cd, b + off, sizeof cd);
        const size_t floats = 2 * (size_t)cd.channels;
        if (cd.channels <= CKPT_MAX_CHANNELS && floats * sizeof(float) <= len - off - sizeof cd) {
            cd.crc = 0;
            uint32_t c = ckpt_crc(&cd, sizeof cd);
            c = ckpt_crc_more(c, b + off + sizeof cd, floats * sizeof(float));
            cd.crc = c;
            memcpy(b + off, &cd, sizeof cd);
            off += sizeof cd + floats * sizeof(float);
        }
    }
    for (int i = 0; i < 3; i++) {
        /* Sections the image holds in full get their CRC; the rest keep the header's value. */
        uint64_t n = h.section_n[i];
        if (n > (len - off) / sizeof(float)) break;
        h.section_crc[i] = ckpt_crc(b + off, (size_t)n * sizeof(float));
        off += (size_t)n * sizeof(float);
    }
    h.header_crc = 0;
    h.header_crc = ckpt_crc(&h, sizeof h);
    memcpy(b, &h, sizeof h);
}
