/*
 * ckpt_write_target.c - where a write of a path goes (ckpt_write_file.h): a file to replace, the file
 * a link of this user's leads to, or a device, FIFO or stream written in place; another user's link
 * is never followed. Shared by every writer of a file a user names (checkpoints, --dump-params,
 * --trace, --metrics, --confusion-csv, PNGs).
 */
#include "runtime/checkpoint/ckpt_write_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether the file at path (stat sb) is this process's stdout or stderr: /dev/stdout redirected to
 * a job's log, say, which a rename would replace (and the log written so far with it). */
static int is_std_stream(const struct stat *sb)
{
    struct stat fs;
    for (int fd = 1; fd <= 2; fd++)
        if (fstat(fd, &fs) == 0 && fs.st_dev == sb->st_dev && fs.st_ino == sb->st_ino) return 1;
    return 0;
}

int ckpt_link_foreign(const char *path, unsigned *owner)
{
    struct stat lsb;
    if (lstat(path, &lsb) != 0 || !S_ISLNK(lsb.st_mode) || lsb.st_uid == geteuid() || lsb.st_uid == 0) return 0;
    if (owner) *owner = (unsigned)lsb.st_uid;
    return 1;
}

const char *ckpt_write_target(const char *path, char *real, size_t n, int *in_place)
{
    struct stat sb, lsb;
    /* Another user's link (planted in a shared checkpoint or output directory) is not followed:
     * it would make this run replace, or write into, any file or FIFO this user may write (its
     * home's files). realpath() reads links without following them, so the kernel's
     * protected_symlinks does not stop it. The rename then replaces the link itself, in its own
     * directory, where that directory allows. */
    *in_place = 0;
    if (ckpt_link_foreign(path, NULL)) return path;
    const int exists = stat(path, &sb) == 0;
    /* Not a file to replace: a device, a FIFO, a descriptor's name (/dev/stdout, /dev/fd/N,
     * /proc/...: its file is someone's open stream), or this process's own output. */
    *in_place =
        exists && !S_ISDIR(sb.st_mode) &&
        (!S_ISREG(sb.st_mode) || !strncmp(path, "/dev/", 5) || !strncmp(path, "/proc/", 6) || is_std_stream(&sb));
    if (*in_place) return path;
    char buf[PATH_MAX];
    if (lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode) && realpath(path, buf) && strlen(buf) < n) {
        memcpy(real, buf, strlen(buf) + 1);
        return real;
    }
    return path;
}

/* An in-place target opened for writing (ckpt_fopen_in_place's rules; a FIFO that no process
 * reads fails with ENXIO): the fd, or -1 with errno. */
int ckpt_open_in_place(const char *path)
{
    /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking for ever; then the
     * writes block as usual. O_APPEND: a log that is also another process's output keeps its lines. */
    const int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    /* This process's own stdout or stderr (/dev/stdout of `dtrain ... > log`): a second open has an
     * offset of its own, so the stream's next lines, written at its offset, would overwrite what
     * went in here (and O_APPEND does not help the stream, opened by the shell without it). Its own
     * descriptor shares its offset: the stream's buffered lines go first, then this, then its next. */
    struct stat sb, fs;
    for (int std = 1; std <= 2 && fstat(fd, &sb) == 0; std++) {
        if (fstat(std, &fs) != 0 || fs.st_dev != sb.st_dev || fs.st_ino != sb.st_ino ||
            (fcntl(std, F_GETFL) & O_ACCMODE) == O_RDONLY)
            continue;
        fflush(std == 1 ? stdout : stderr);
        const int own = fcntl(std, F_DUPFD_CLOEXEC, 3);
        if (own < 0) break; /* the fresh open still writes, appended */
        close(fd);
        return own;
    }
    return fd;
}

FILE *ckpt_fopen_in_place(const char *path)
{
    const int fd = ckpt_open_in_place(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (fd >= 0 && !f) close(fd);
    if (fd < 0 && errno == ENXIO) errno = EPIPE;
    return f;
}
