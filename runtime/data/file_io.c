/*
 * file_io.c - dataset files into memory (see file_io.h). zlib reads both gzip and plain files
 * (gzread passes plain data through), so one path serves MNIST's .gz files and CIFAR's raw ones.
 */
#include "runtime/data/file_io.h"
#include "base/io_error.h"
#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int ds_find_file(const char *path, char *out, size_t n)
{
    struct stat sb;
    snprintf(out, n, "%s", path);
    if (stat(path, &sb) == 0) return 1;
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", path);
    if (stat(gz, &sb) == 0) {
        snprintf(out, n, "%s", gz);
        return 2;
    }
    return 0;
}

/* path opened for reading without blocking, so that a FIFO cannot hang the open, and refused
 * unless it is a regular file: its descriptor into *fd (the caller's to close), its stat into *sb. */
static dt_status open_regular(const char *path, int *fd, struct stat *sb)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        return status_set_error(DT_ERR_IO, "cannot open %s: %s: %s", path, strerror(err),
                                io_error_fix(err, "file", NULL, advice, sizeof advice));
    }
    if (fstat(*fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        close(*fd);
        return status_set_error(DT_ERR_IO,
                                "%s is not a regular file (a directory, FIFO or device): give the dataset's "
                                "files",
                                path);
    }
    return DT_OK;
}

/* The full buffer *b of *cap bytes doubled, up to max_bytes + 1 (one byte past the most a file may
 * hold, so that a larger file shows itself); DT_ERR_CORRUPT once it holds that byte already. */
static dt_status grow_buffer(const char *path, size_t max_bytes, unsigned char **b, size_t *cap)
{
    if (*cap > max_bytes)
        return status_set_error(DT_ERR_CORRUPT,
                                "%s holds more than %zu bytes (decompressed), the most a dataset "
                                "file may: split it, or convert it to a .dts shard",
                                path, max_bytes);
    size_t ncap = *cap * 2 > max_bytes + 1 ? max_bytes + 1 : *cap * 2;
    unsigned char *nb = realloc(*b, ncap);
    if (!nb) return status_set_error(DT_ERR_NOMEM, "out of memory reading %s (%zu bytes)", path, ncap);
    *b = nb;
    *cap = ncap;
    return DT_OK;
}

/* One gzread into b + n, at most 1 GiB and what is left of cap: the bytes it gave into *got (0 at
 * the end), or DT_ERR_CORRUPT where zlib found the data damaged, n bytes in. */
static dt_status read_chunk(gzFile z, const char *path, unsigned char *b, size_t n, size_t cap, size_t *got)
{
    size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
    int r = gzread(z, b + n, (unsigned)want);
    if (r < 0) {
        int zerr;
        const char *msg = gzerror(z, &zerr);
        return status_set_error(DT_ERR_CORRUPT,
                                "%s: the compressed data is damaged after %zu bytes (%s): download it "
                                "again",
                                path, n, zerr == Z_ERRNO ? strerror(errno) : msg);
    }
    if (r == 0) {
        /* A gzip stream cut short ends without an error from gzread: zlib says so here. */
        int zerr;
        const char *msg = gzerror(z, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END)
            return status_set_error(DT_ERR_CORRUPT,
                                    "%s: the compressed data is damaged after %zu bytes (%s): download "
                                    "it again",
                                    path, n, msg);
    }
    *got = (size_t)r;
    return DT_OK;
}

dt_status ds_read_file(const char *path, size_t max_bytes, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd;
    struct stat sb;
    dt_status s = open_regular(path, &fd, &sb);
    if (s) return s;
    gzFile z = gzdopen(fd, "rb");
    if (!z) {
        close(fd);
        return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    }
    gzbuffer(z, 1 << 17);
    /* A plain file's size is known; a compressed one grows the buffer as it inflates. */
    size_t cap = sb.st_size > 0 && (size_t)sb.st_size <= max_bytes ? (size_t)sb.st_size + 1 : 1u << 20, n = 0;
    unsigned char *b = malloc(cap);
    if (!b) s = status_set_error(DT_ERR_NOMEM, "out of memory reading %s (%zu bytes)", path, cap);
    size_t got = 1;
    while (!s && got > 0) {
        if (n == cap) s = grow_buffer(path, max_bytes, &b, &cap);
        if (!s) s = read_chunk(z, path, b, n, cap, &got);
        if (!s) n += got;
    }
    gzclose(z); /* closes fd */
    if (!s && n > max_bytes)
        s = status_set_error(DT_ERR_CORRUPT,
                             "%s holds more than %zu bytes (decompressed), the most a dataset file may: "
                             "split it, or convert it to a .dts shard",
                             path, max_bytes);
    if (s) {
        free(b);
        return s;
    }
    *buf = b;
    *len = n;
    return DT_OK;
}
