/*
 * ckpt_write_file.c - writes one version-4 checkpoint file so that a crash, a full disk, a quota
 * or a file-size limit leaves the previous checkpoint or the new one, never half of one: rank 0's
 * part of dt_ckpt_commit (see ckpt_format.h for the layout).
 *
 * DIR/ckpt-<step>.dtc.tmp.<pid> is written, fsynced, renamed into place and the directory fsynced;
 * on any failure the temporary file is removed and the error says what to do.
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "base/log.h"
#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The cause of a failed write, worded as what to do about it. */
static const char *write_advice(int err)
{
    switch (err) {
    case ENOSPC: return "the file system is full: free space or use another --checkpoint-dir";
    case EDQUOT: return "the disk quota is exhausted: free space or use another --checkpoint-dir";
    case EFBIG: return "the file-size limit (ulimit -f, RLIMIT_FSIZE) is below the checkpoint's size: raise it "
                       "(ulimit -f unlimited)";
    default: return "check the directory and the file system";
    }
}

static dt_status write_all(int fd, const void *p, size_t n, const char *path, uint64_t total)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = w < 0 ? errno : ENOSPC; /* a write of 0 bytes to a regular file: no room */
            struct rlimit rl;
            if (err == EFBIG && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                return status_set_error(DT_ERR_IO, "writing checkpoint %s failed: %s (limit %llu bytes, the checkpoint "
                                    "is %llu bytes): %s", path, strerror(err), (unsigned long long)rl.rlim_cur,
                                    (unsigned long long)total, write_advice(err));
            return status_set_error(DT_ERR_IO, "writing checkpoint %s failed: %s: %s", path, strerror(err),
                                write_advice(err));
        }
        b += w;
        n -= (size_t)w;
    }
    return DT_OK;
}

/* Writes header, table and sections to fd. A file-size limit would kill the process with SIGXFSZ
 * before write() could return EFBIG; the signal is held back in this thread for the writes, and one
 * that the writes raised is taken off again, so the limit becomes an error message and the
 * temporary file can be removed. The process's signal dispositions stay as the application set
 * them. */
static dt_status write_image(int fd, const char *tmp, const ckpt4_header *h, const ckpt4_entry *e,
                             const void *const *data, uint64_t total)
{
    sigset_t xfsz, old, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    int masked = pthread_sigmask(SIG_BLOCK, &xfsz, &old) == 0;
    dt_status s = write_all(fd, h, sizeof *h, tmp, total);
    if (!s) s = write_all(fd, e, (size_t)h->nsections * sizeof *e, tmp, total);
    for (uint32_t i = 0; !s && i < h->nsections; i++)
        if (e[i].bytes) s = write_all(fd, data[i], (size_t)e[i].bytes, tmp, total);
    if (masked) {
        if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return s;
}

dt_status ckpt_write_atomic(const char *dir, long step, int world, ckpt4_entry *e, uint32_t n,
                            const void *const *data)
{
    char path[4096], tmp[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, step) >= sizeof path)
        return status_set_error(DT_ERR_INVALID_ARG, "checkpoint directory name is too long (%zu characters)",
                            strlen(dir));
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    ckpt4_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.step = step;
    h.world = (uint32_t)world;
    h.nsections = n;
    uint64_t total = sizeof h + (uint64_t)n * sizeof *e;
    for (uint32_t i = 0; i < n; i++) {
        e[i].crc = ckpt_crc(data[i], (size_t)e[i].bytes);
        total += e[i].bytes;
    }
    h.table_crc = ckpt_crc(e, (size_t)n * sizeof *e);
    h.header_crc = ckpt_crc(&h, sizeof h);

    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return status_set_error(DT_ERR_IO, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return status_set_error(DT_ERR_IO, "cannot write checkpoint %s: %s", tmp, strerror(errno));
    dt_status s = write_image(fd, tmp, &h, e, data, total);
    if (!s && fsync(fd) != 0)
        s = status_set_error(DT_ERR_IO, "fsync of checkpoint %s failed: %s: %s", tmp, strerror(errno),
                         write_advice(errno));
    if (close(fd) != 0 && !s) s = status_set_error(DT_ERR_IO, "closing checkpoint %s failed: %s", tmp, strerror(errno));
    if (!s && rename(tmp, path) != 0)
        s = status_set_error(DT_ERR_IO, "renaming checkpoint %s to %s failed: %s", tmp, path, strerror(errno));
    if (s) {
        unlink(tmp);
        return s;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself reaches the disk */
        close(dfd);
    }
    log_msg(LOG_LEVEL_INFO, "checkpoint %s written (step %ld, %u section%s, %.1f MiB)", path, step, n, n == 1 ? "" : "s",
           (double)total / 1048576.0);
    return DT_OK;
}
