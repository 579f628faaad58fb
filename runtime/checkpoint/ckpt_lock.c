/*
 * ckpt_lock.c - one run at a time in a checkpoint directory (ckpt_lock.h).
 *
 * Two runs given one --checkpoint-dir (a copied job script, a requeued job whose first instance
 * still runs) write the same ckpt-<step>.dtc names over each other, prune each other's files with
 * --keep-checkpoints, and remove each other's temporary files at start; a later --resume auto then
 * goes on from whichever run saved last. The directory's lock file, DIR/.dtrain.lock, holds an
 * fcntl write lock for as long as the process lives: the kernel (and the NFS, Lustre or GPFS lock
 * manager) drops it when the process ends, however it ends, so a killed run leaves no stale lock
 * and the file itself is left in place (removing it would let a third run lock a new file while
 * the second still holds the old). Open file description locks (F_OFD_SETLK) are used where the
 * kernel has them, so that no other close of the file in this process drops the lock; the file
 * records who holds it, for the message of the run that is refused.
 */
#include "runtime/checkpoint/ckpt_lock.h"
#include "base/io_error.h"
#include "base/log.h"
#include "base/printable.h"
#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Takes (cmd F_SETLK) or asks about (F_GETLK) a write lock on the whole file; the OFD kind where
 * this kernel has it. 0, or -1 with errno (EAGAIN or EACCES: another process holds it). */
static int lock_call(int fd, int getlk, struct flock *fl)
{
    memset(fl, 0, sizeof *fl);
    fl->l_type = F_WRLCK;
    fl->l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
    if (fcntl(fd, getlk ? F_OFD_GETLK : F_OFD_SETLK, fl) == 0) return 0;
    if (errno != EINVAL) return -1; /* EINVAL: a kernel before 3.15 */
    memset(fl, 0, sizeof *fl);
    fl->l_type = F_WRLCK;
    fl->l_whence = SEEK_SET;
#endif
    return fcntl(fd, getlk ? F_GETLK : F_SETLK, fl);
}

/* The holder's own line from the lock file (pid, host, since when), or a plain phrase. */
static void holder_of(int fd, char *who, size_t n)
{
    snprintf(who, n, "another process");
    char buf[256];
    const ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    if (k <= 0) return;
    buf[k] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    /* Anyone who can write the lock file writes this line, and it reaches another user's terminal
     * (doctor prints it outside any status message): its control characters are written as
     * escapes, so no escape sequence in it can retitle, clear or recolour that terminal. */
    if (buf[0]) text_escape_controls(buf, who, n);
}

int ckpt_lock_held_elsewhere(const char *who)
{
    char mine[256] = "", theirs[256] = "";
    if (gethostname(mine, sizeof mine - 1) != 0 || sscanf(who, "pid %*d on %255s since", theirs) != 1) return 0;
    return strcmp(mine, theirs) != 0;
}

static dt_status refused(const char *dir, int fd)
{
    char who[256];
    holder_of(fd, who, sizeof who);
    /* A node that crashed cannot unlock: its file server drops the lock after the client's lease
     * (NFSv4: 90 s by default), NFSv3's lock manager only once the node is back. */
    const char *crashed = ckpt_lock_held_elsewhere(who)
                              ? "; if that run's node is down, its file server may hold the lock until the node's "
                                "lease ends or the node is back: then remove the lock file and run again"
                              : "";
    return status_set_error(DT_ERR_IO,
                            "--checkpoint-dir %s is in use by another dtrain run (%s): two runs saving into one "
                            "directory overwrite and prune each other's checkpoints, and --resume auto would go on "
                            "from whichever saved last; give this run its own --checkpoint-dir, or wait for that run "
                            "to end (its lock goes with its process; %s/" CKPT_LOCK_NAME " says who holds it%s)",
                            dir, who, dir, crashed);
}

/* The lock again each second while its holder is on another node, up to CKPT_LOCK_WAIT_ELSEWHERE_S
 * (DTRAIN_TEST_LOCK_WAIT_S: a test's shorter bound). 0 once taken, -1 with errno otherwise. */
static int wait_elsewhere(const char *dir, int fd, struct flock *fl)
{
    char who[256];
    holder_of(fd, who, sizeof who);
    if (!ckpt_lock_held_elsewhere(who)) return errno = EAGAIN, -1;
    int limit = CKPT_LOCK_WAIT_ELSEWHERE_S;
    const char *t = getenv("DTRAIN_TEST_LOCK_WAIT_S");
    if (t && *t) limit = atoi(t);
    log_msg(LOG_LEVEL_WARN,
            "--checkpoint-dir %s is locked by %s: waiting up to %d s for it (a run on a node that crashed "
            "keeps its lock until its file server's lease ends)",
            dir, who, limit);
    for (int waited = 0; waited < limit; waited++) {
        sleep(1);
        if (lock_call(fd, 0, fl) == 0) {
            log_msg(LOG_LEVEL_WARN, "--checkpoint-dir %s: the lock of %s was released after %d s; this run goes on",
                    dir, who, waited + 1);
            return 0;
        }
        if (errno != EAGAIN && errno != EACCES) return -1;
    }
    return errno = EAGAIN, -1;
}

/* Why the lock file cannot be opened (err), naming it and the fix; DT_ERR_IO. */
static dt_status open_error(const char *path, int err)
{
    char advice[IO_FIX_LEN];
    if (err == ELOOP)
        return status_set_error(DT_ERR_IO,
                                "%s is a symbolic link, not dtrain's lock file: remove it (dtrain makes the file "
                                "itself), or use another --checkpoint-dir",
                                path);
    return status_set_error(DT_ERR_IO, "cannot open the lock file %s of --checkpoint-dir: %s: %s", path, strerror(err),
                            io_error_fix(err, "checkpoint", "--checkpoint-dir", advice, sizeof advice));
}

/* A file system without locks (Lustre mounted without flock, some NFS setups): the run goes on,
 * as it did before the lock existed, and says what is not detected. */
static int no_locks_here(int err) { return err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP || err == EINVAL; }

/* dir/.dtrain.lock into path (n bytes); DT_ERR_INVALID_ARG when it does not fit. */
static dt_status lock_path(const char *dir, char *path, size_t n)
{
    if ((size_t)snprintf(path, n, "%s/%s", dir, CKPT_LOCK_NAME) < n) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG, "--checkpoint-dir name is too long (%zu characters)", strlen(dir));
}

dt_status ckpt_dir_lock(const char *dir, int *fd_out)
{
    *fd_out = -1;
    char path[4200];
    if (lock_path(dir, path, sizeof path)) return DT_ERR_INVALID_ARG;
    /* O_NOFOLLOW: a link planted under the lock's name must not make this run write where it leads.
     * 0666: the umask decides, so that a group's project directory stays usable by the group. */
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    struct flock fl;
    if (fd < 0 && errno == EACCES) {
        /* Another user's lock file that this user may not write (their umask): it can still say
         * whether its run is alive; if not, this run goes on without a lock of its own. */
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) goto open_failed;
        if (lock_call(fd, 1, &fl) == 0 && fl.l_type != F_UNLCK) {
            const dt_status s = refused(dir, fd);
            close(fd);
            return s;
        }
        close(fd);
        log_msg(LOG_LEVEL_WARN,
                "%s is another user's and this user cannot write it: no run holds it now, but a second run "
                "given --checkpoint-dir %s while this one runs is not detected; remove the file (its run has ended)",
                path, dir);
        return DT_OK;
    }
    if (fd < 0) goto open_failed;
    if (lock_call(fd, 0, &fl) != 0 && ((errno != EAGAIN && errno != EACCES) || wait_elsewhere(dir, fd, &fl) != 0)) {
        const int err = errno;
        if (err == EAGAIN || err == EACCES) {
            const dt_status s = refused(dir, fd);
            close(fd);
            return s;
        }
        close(fd);
        if (no_locks_here(err)) {
            log_msg(LOG_LEVEL_INFO,
                    "%s: the file system takes no locks (%s): a second run given this --checkpoint-dir at once is "
                    "not detected",
                    dir, strerror(err));
            return DT_OK;
        }
        errno = err;
        goto open_failed;
    }
    /* Who holds it, for a refused run's message. */
    char host[256] = "?", when[32] = "?", line[400];
    gethostname(host, sizeof host - 1);
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const int len = snprintf(line, sizeof line, "pid %ld on %s since %s\n", (long)getpid(), host, when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len)
        log_msg(LOG_LEVEL_DEBUG, "%s: could not record this run in the lock file: %s", path, strerror(errno));
    *fd_out = fd;
    return DT_OK;

open_failed:
    return open_error(path, errno);
}

dt_status ckpt_dir_lock_query(const char *dir, int *held, char *who, size_t n)
{
    *held = 0;
    if (n) who[0] = '\0';
    char path[4200];
    if (lock_path(dir, path, sizeof path)) return DT_ERR_INVALID_ARG;
    /* Read-only, and never made: asking takes nothing (F_GETLK needs no write access). O_NONBLOCK:
     * a FIFO under the name must not hang the question; a directory opens read-only, not for train. */
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? DT_OK : open_error(path, errno);
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return open_error(path, EISDIR);
    }
    struct flock fl;
    if (lock_call(fd, 1, &fl) != 0) {
        const int err = errno;
        close(fd);
        if (!no_locks_here(err)) return open_error(path, err);
        snprintf(who, n,
                 "the file system takes no locks (%s): a second run given this --checkpoint-dir at once is "
                 "not detected",
                 strerror(err));
        return DT_OK;
    }
    *held = fl.l_type != F_UNLCK;
    if (*held) holder_of(fd, who, n);
    close(fd);
    return DT_OK;
}
