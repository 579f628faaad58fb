/*
 * ckpt_write_file.c - writes one version-4 checkpoint file so that a crash, a full disk, a quota
 * or a file-size limit leaves the previous checkpoint or the new one, never half of one: rank 0's
 * part of dt_ckpt_commit (see ckpt_format.h for the layout).
 *
 * DIR/ckpt-<step>.dtc.tmp.<pid> (O_EXCL: another name when that one is taken) is written, fsynced,
 * renamed into place and the directory fsynced; on any failure the temporary file is removed and
 * the error says what to do. The same writer
 * serves any file that must never be seen half written (ckpt_write_file.h: dtrain train's
 * --dump-params).
 */
#include "runtime/checkpoint/ckpt_format.h"
#include "runtime/checkpoint/ckpt_lock.h"
#include "runtime/checkpoint/ckpt_temps.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "base/io_error.h"
#include "base/log.h"
#include "base/path.h"
#include "base/status.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Where a file is written: what names it in messages, alt what the user can change instead. */
typedef struct write_target {
    const char *tmp, *what, *alt;
    uint64_t total;        /* the file's bytes */
    const ckpt_beat *beat; /* said before each chunk and the fsync, or NULL */
} write_target;

/* The test hook ckpt_test_fail_next_write (runtime/test_hooks.h): armed, the next checkpoint's
 * write fails (g_fail_now while ckpt_write_atomic writes it). One thread writes a checkpoint. */
static int g_fail_next_ckpt, g_fail_now;

void ckpt_test_fail_next_write(void) { g_fail_next_ckpt = 1; }

static dt_status write_all(int fd, const void *p, size_t n, const write_target *w)
{
    const char *b = p;
    char advice[IO_FIX_LEN], size[96] = "";
    while (n > 0) {
        ckpt_beat_now(w->beat);
        ssize_t k = g_fail_now ? (errno = ENOSPC, -1) : write(fd, b, n < CKPT_IO_CHUNK ? n : CKPT_IO_CHUNK);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int err = k < 0 ? errno : ENOSPC; /* a write of 0 bytes to a regular file: no room */
            struct rlimit rl;
            if (err == EFBIG && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                snprintf(size, sizeof size, " (limit %llu bytes, the %s is %llu bytes)",
                         (unsigned long long)rl.rlim_cur, w->what, (unsigned long long)w->total);
            return status_set_error(DT_ERR_IO, "writing %s %s failed: %s%s: %s", w->what, w->tmp, strerror(err), size,
                                    io_error_fix(err, w->what, w->alt, advice, sizeof advice));
        }
        b += k;
        n -= (size_t)k;
    }
    return DT_OK;
}

/* Writes the parts to fd. A file-size limit would kill the process with SIGXFSZ before write()
 * could return EFBIG; the signal is held back in this thread for the writes, and one that the
 * writes raised is taken off again, so the limit becomes an error message and the temporary file
 * can be removed. The process's signal dispositions stay as the application set them. */
static dt_status write_image(int fd, const ckpt_part *parts, size_t n, const write_target *w)
{
    sigset_t xfsz, old, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    int masked = pthread_sigmask(SIG_BLOCK, &xfsz, &old) == 0;
    dt_status s = DT_OK;
    for (size_t i = 0; !s && i < n; i++)
        if (parts[i].bytes) s = write_all(fd, parts[i].data, parts[i].bytes, w);
    if (masked) {
        if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR) {}
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return s;
}

/* fsync of a directory, so the entries made or renamed in it reach the disk; 0, or -1 with errno. */
static int sync_dir(const char *dir)
{
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    const int rc = fsync(fd);
    const int err = errno;
    close(fd);
    errno = err;
    return rc;
}

int ckpt_open_temp(const char *path, char *tmp, size_t n) { return ckpt_open_temp_as(path, ".tmp.", tmp, n); }

int ckpt_open_temp_as(const char *path, const char *stem, char *tmp, size_t n)
{
    /* O_EXCL: a name that exists, a link planted there included, is never opened (O_EXCL with
     * O_CREAT does not follow a link), so no file but this writer's own is written or truncated;
     * the next name is tried instead. The pid keeps the first name unique among this node's
     * processes; two jobs on two nodes with the same pid, or a killed job's left-over file, meet
     * EEXIST and the second takes .1, .2 and so on. 0666: the umask decides the file's mode, as
     * for any file the user makes (a group project directory with umask 002 gets 0664). */
    for (int k = 0; k < 1000; k++) {
        const int w = k ? snprintf(tmp, n, "%s%s%d.%d", path, stem, (int)getpid(), k)
                        : snprintf(tmp, n, "%s%s%d", path, stem, (int)getpid());
        if (w < 0 || (size_t)w >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1; /* errno EEXIST: a thousand names taken */
}

dt_status ckpt_write_file_atomic(const char *path, const char *what, const char *alt, const ckpt_part *parts, size_t n)
{
    return ckpt_write_file_beating(path, what, alt, parts, n, NULL);
}

/* A call that may block for long (an fsync that writes out gigabytes of the page cache, a
 * directory sync on NFS), run on a thread of its own while this thread says the beat every 50 ms
 * (MPI stays on the caller's thread). The thread signals its end, so a call that takes a
 * millisecond costs a millisecond: a fixed 50 ms sleep made every save at least 100 ms (two
 * syncs). Without a beat, or without a thread, it runs here. */
typedef struct blocking_call {
    int (*fn)(void *arg);
    void *arg;
    int rc, err, done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} blocking_call;

static void *blocking_thread(void *p)
{
    blocking_call *c = p;
    const int rc = c->fn(c->arg);
    const int err = errno;
    pthread_mutex_lock(&c->mu);
    c->rc = rc;
    c->err = err;
    c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The beat is said for at most limit_s: a call that takes longer is taken as stuck (a hung file
 * server), and its silence lets the waiting ranks' deadline end the job. */
int ckpt_call_beating(int (*fn)(void *), void *arg, const ckpt_beat *beat, double limit_s)
{
    if (!beat || !beat->fn) return fn(arg);
    blocking_call c = {.fn = fn, .arg = arg};
    pthread_condattr_t ca;
    int cv_ok = pthread_condattr_init(&ca) == 0;
    if (cv_ok) {
        cv_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&c.cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!cv_ok) return fn(arg);
    if (pthread_mutex_init(&c.mu, NULL) != 0) {
        pthread_cond_destroy(&c.cv);
        return fn(arg);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, blocking_thread, &c) != 0) {
        pthread_mutex_destroy(&c.mu);
        pthread_cond_destroy(&c.cv);
        return fn(arg);
    }
    const double t0 = monotonic_s();
    pthread_mutex_lock(&c.mu);
    while (!c.done) {
        if (monotonic_s() - t0 < limit_s) {
            /* Not under the lock: the beat may take a moment (an MPI send), and the thread's end
             * must not wait for it. */
            pthread_mutex_unlock(&c.mu);
            ckpt_beat_now(beat);
            pthread_mutex_lock(&c.mu);
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 50000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        /* Until the end or the 50 ms (a wake-up without either waits on). */
        for (int rc = 0; !c.done && rc == 0;) rc = pthread_cond_timedwait(&c.cv, &c.mu, &until);
    }
    pthread_mutex_unlock(&c.mu);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    errno = c.err;
    return c.rc;
}

/* How long a sync may take before it is taken as stuck: a minute, and for an fsync its bytes at
 * 10 MB/s on top (an 18 GB checkpoint: 31 minutes). */
#define CKPT_SYNC_BEAT_S 60.0
#define CKPT_SYNC_MIN_RATE 10e6
static int fsync_fd(void *arg) { return fsync(*(const int *)arg); }
static int sync_dir_call(void *arg) { return sync_dir(arg); }

/* A target that exists and is not a regular file (/dev/null, a FIFO, /dev/stdout's link): written
 * in place, as there is no file to replace atomically (a rename would put a regular file in the
 * device's place). */
static dt_status write_in_place(const char *path, const char *what, const ckpt_part *parts, size_t n,
                                const write_target *w)
{
    const int fd = ckpt_open_in_place(path);
    char advice[IO_FIX_LEN];
    if (fd < 0 && errno == ENXIO)
        return status_set_error(DT_ERR_IO, "cannot write %s %s: it is a FIFO that no process reads", what, path);
    const int err = errno;
    if (fd < 0)
        return status_set_error(DT_ERR_IO, "cannot write %s %s: %s: %s", what, path, strerror(err),
                                io_error_fix(err, what, w->alt, advice, sizeof advice));
    dt_status s = write_image(fd, parts, n, w);
    if (close(fd) != 0 && !s) s = status_set_error(DT_ERR_IO, "closing %s %s failed: %s", what, path, strerror(errno));
    return s;
}

dt_status ckpt_write_file_beating(const char *path, const char *what, const char *alt, const ckpt_part *parts, size_t n,
                                  const ckpt_beat *beat)
{
    char tmp[4200], dir[4096], real[PATH_MAX];
    const size_t len = strlen(path);
    if (len >= sizeof dir)
        return status_set_error(DT_ERR_INVALID_ARG, "the %s name is too long (%zu characters; at most %zu)", what, len,
                                sizeof dir - 1);
    int in_place = 0;
    path = ckpt_write_target(path, real, sizeof real, &in_place);
    write_target w = {path, what, alt, 0, beat}; /* .tmp: the file written, the temporary unless in place */
    for (size_t i = 0; i < n; i++) w.total += parts[i].bytes;
    if (in_place) return write_in_place(path, what, parts, n, &w);
    if (strlen(path) >= sizeof dir)
        return status_set_error(DT_ERR_INVALID_ARG, "the %s name is too long (%zu characters; at most %zu)", what,
                                strlen(path), sizeof dir - 1);
    path_parent_dir(path, dir, sizeof dir); /* whose entry the rename changes */
    w.tmp = tmp;

    char advice[IO_FIX_LEN];
    int fd = ckpt_open_temp(path, tmp, sizeof tmp);
    if (fd < 0) {
        const int err = errno;
        return status_set_error(DT_ERR_IO, "cannot write %s %s: %s: %s", what, tmp, strerror(err),
                                io_error_fix(err, what, alt, advice, sizeof advice));
    }
    const int noted = ckpt_temp_note(tmp); /* a second Ctrl-C takes the partial file along */
    ckpt_test_slow(beat);
    dt_status s = write_image(fd, parts, n, &w);
    ckpt_beat_now(beat);
    if (!s && ckpt_call_beating(fsync_fd, &fd, beat, CKPT_SYNC_BEAT_S + (double)w.total / CKPT_SYNC_MIN_RATE) != 0) {
        const int err = errno;
        s = status_set_error(DT_ERR_IO, "fsync of %s %s failed: %s: %s", what, tmp, strerror(err),
                             io_error_fix(err, what, alt, advice, sizeof advice));
    }
    if (close(fd) != 0 && !s) {
        const int err = errno;
        s = status_set_error(DT_ERR_IO, "closing %s %s failed: %s: %s", what, tmp, strerror(err),
                             io_error_fix(err, what, alt, advice, sizeof advice));
    }
    if (!s && rename(tmp, path) != 0) {
        const int err = errno;
        unsigned owner;
        if ((err == EPERM || err == EACCES) && ckpt_link_foreign(path, &owner))
            /* A sticky directory (/tmp) lets only its owner replace another user's link. */
            s = status_set_error(DT_ERR_IO,
                                 "cannot write %s %s: it is a symbolic link of another user (uid %u), which dtrain "
                                 "does not write through, in a directory where only its owner may replace it: have it "
                                 "removed, or use another %s",
                                 what, path, owner, alt);
        else
            s = status_set_error(DT_ERR_IO, "renaming %s %s to %s failed: %s: %s", what, tmp, path, strerror(err),
                                 io_error_fix(err, what, alt, advice, sizeof advice));
    }
    if (s) unlink(tmp);
    ckpt_temp_forget(noted);
    if (s) return s;
    /* The rename itself reaches the disk. The file is whole and in place either way: a file system
     * that cannot sync a directory is said, not failed. */
    if (ckpt_call_beating(sync_dir_call, dir, beat, CKPT_SYNC_BEAT_S) != 0)
        log_msg(LOG_LEVEL_WARN,
                "%s %s is written, but syncing its directory %s failed (%s): a power loss now may lose "
                "the rename",
                what, path, dir, strerror(errno));
    return DT_OK;
}

dt_status ckpt_write_file_try(const char *path, const char *flag)
{
    struct stat sb;
    if (!path[0]) return status_set_error(DT_ERR_INVALID_ARG, "%s is empty: give a file path", flag);
    const int exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        return status_set_error(DT_ERR_IO, "%s %s is a directory: give a file path (for example %s/out)", flag, path,
                                path);
    /* Another user's link: the writer would replace it rather than follow it, which a sticky
     * directory (/tmp) refuses, and which is not what a path given by this user means. */
    unsigned owner;
    if (ckpt_link_foreign(path, &owner))
        return status_set_error(DT_ERR_IO,
                                "%s %s is a symbolic link of another user (uid %u): dtrain does not write through "
                                "it (it could lead this run to replace any file this user may write) nor over it; "
                                "remove it, or give another path",
                                flag, path, owner);
    char real[PATH_MAX];
    int in_place;
    const char *target = ckpt_write_target(path, real, sizeof real, &in_place);
    /* Written in place (a device, a FIFO, a stream): it only has to be writable now. */
    char advice[IO_FIX_LEN];
    /* What to use instead: another value of the flag, or (a library call's name) another path. */
    const char *alt = !strncmp(flag, "--", 2) ? flag : "path";
    if (in_place) {
        if (access(path, W_OK) == 0) return DT_OK;
        const int err = errno;
        return status_set_error(DT_ERR_IO, "%s %s cannot be written: %s: %s", flag, path, strerror(err),
                                io_error_fix(err, "file", alt, advice, sizeof advice));
    }
    path = target;
    char tmp[4200];
    if (strlen(path) >= 4096)
        return status_set_error(DT_ERR_INVALID_ARG, "%s is too long (%zu characters; at most 4095)", flag,
                                strlen(path));
    /* The writer's own temporary file, made and removed: what it needs of the directory. */
    const int fd = ckpt_open_temp(path, tmp, sizeof tmp);
    if (fd < 0) {
        const int err = errno;
        return status_set_error(DT_ERR_IO, "%s %s cannot be written (%s: %s): %s", flag, path, tmp, strerror(err),
                                io_error_fix(err, "file", alt, advice, sizeof advice));
    }
    close(fd);
    unlink(tmp);
    return DT_OK;
}

/* Why mkdir(dir) failed (errno), said of what is there: a parent that does not exist is made
 * first, one that exists but cannot be written needs its permissions or another directory. */
static dt_status dir_make_error(const char *dir)
{
    const int err = errno;
    char parent[4096], advice[IO_FIX_LEN];
    struct stat sb;
    path_parent_dir(dir, parent, sizeof parent);
    const int parent_is = stat(parent, &sb) == 0;
    if (!parent_is && (err == ENOENT || err == ENOTDIR))
        return status_set_error(DT_ERR_IO,
                                "cannot create checkpoint directory %s: its parent %s does not exist: make it "
                                "(mkdir -p %s) or use another --checkpoint-dir",
                                dir, parent, parent);
    if (parent_is && !S_ISDIR(sb.st_mode))
        return status_set_error(DT_ERR_IO,
                                "cannot create checkpoint directory %s: its parent %s is not a directory: use "
                                "another --checkpoint-dir",
                                dir, parent);
    io_error_fix(err, "checkpoint", "--checkpoint-dir", advice, sizeof advice);
    if (parent_is && (err == EACCES || err == EPERM || err == EROFS))
        return status_set_error(
            DT_ERR_IO, "cannot create checkpoint directory %s: its parent %s exists but cannot be written (%s): %s",
            dir, parent, strerror(err), advice);
    return status_set_error(DT_ERR_IO, "cannot create checkpoint directory %s: %s: %s", dir, strerror(err), advice);
}

dt_status ckpt_write_atomic(const char *dir, long step, int world, ckpt4_entry *e, uint32_t n, const void *const *data,
                            const ckpt_beat *beat)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", dir, step) >= sizeof path)
        return status_set_error(DT_ERR_INVALID_ARG, "checkpoint directory name is too long (%zu characters)",
                                strlen(dir));
    ckpt4_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.step = step;
    h.world = (uint32_t)world;
    h.nsections = n;
    uint64_t total = sizeof h + (uint64_t)n * sizeof *e;
    for (uint32_t i = 0; i < n; i++) {
        /* By chunks, saying the beat: a 20 GB checkpoint's CRCs take 10-20 s. */
        uint32_t crc = ckpt_crc(NULL, 0);
        for (uint64_t at = 0; at < e[i].bytes; at += CKPT_IO_CHUNK) {
            ckpt_beat_now(beat);
            const uint64_t k = e[i].bytes - at < CKPT_IO_CHUNK ? e[i].bytes - at : CKPT_IO_CHUNK;
            crc = ckpt_crc_more(crc, (const char *)data[i] + at, (size_t)k);
        }
        e[i].crc = crc;
        total += e[i].bytes;
    }
    h.table_crc = ckpt_crc(e, (size_t)n * sizeof *e);
    h.header_crc = ckpt_crc(&h, sizeof h);

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return dir_make_error(dir);
    /* The file: the header, the table, then each section's bytes. */
    ckpt_part *parts = malloc(((size_t)n + 2) * sizeof *parts);
    if (!parts)
        return status_set_error(DT_ERR_NOMEM, "out of host memory for the table of a checkpoint of %u sections", n);
    parts[0] = (ckpt_part){&h, sizeof h};
    parts[1] = (ckpt_part){e, (size_t)n * sizeof *e};
    for (uint32_t i = 0; i < n; i++) parts[i + 2] = (ckpt_part){data[i], (size_t)e[i].bytes};
    g_fail_now = g_fail_next_ckpt, g_fail_next_ckpt = 0;
    dt_status s = ckpt_write_file_beating(path, "checkpoint", "--checkpoint-dir", parts, (size_t)n + 2, beat);
    g_fail_now = 0;
    free(parts);
    if (s) return s;
    log_msg(LOG_LEVEL_INFO, "checkpoint %s written (step %ld, %u section%s, %.1f MiB)", path, step, n,
            n == 1 ? "" : "s", (double)total / 1048576.0);
    return DT_OK;
}

/* An existing dir that this process can make files in. */
static dt_status dir_usable(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return status_set_error(DT_ERR_IO, "--checkpoint-dir %s is not a directory: give a directory path", dir);
    if (access(dir, W_OK | X_OK) != 0) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        return status_set_error(DT_ERR_IO, "cannot write in checkpoint directory %s: %s: %s", dir, strerror(err),
                                io_error_fix(err, "checkpoint", "--checkpoint-dir", advice, sizeof advice));
    }
    return DT_OK;
}

/* A name the writer would refuse at the first save (dt_ckpt_begin), refused before the run trains:
 * found there, it would cost the whole run's work. */
static dt_status dir_name_fits(const char *dir)
{
    if (strlen(dir) <= CKPT_DIR_MAX) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "--checkpoint-dir name is too long (%zu characters; at most %d): use a shorter path "
                            "(a symbolic link to the directory, or a relative path from a nearer working directory)",
                            strlen(dir), CKPT_DIR_MAX);
}

dt_status ckpt_dir_check(const char *dir, int *exists)
{
    *exists = 0;
    if (dir_name_fits(dir)) return DT_ERR_INVALID_ARG;
    struct stat sb;
    *exists = stat(dir, &sb) == 0 || errno != ENOENT;
    if (*exists) return dir_usable(dir);
    /* What mkdir(dir) would meet, asked without making it: the parent must be a directory that
     * this process can write in. */
    char parent[4096];
    path_parent_dir(dir, parent, sizeof parent);
    if (stat(parent, &sb) != 0) {
        errno = ENOENT;
        return dir_make_error(dir);
    }
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return dir_make_error(dir);
    }
    if (access(parent, W_OK | X_OK) != 0) return dir_make_error(dir); /* errno: EACCES, EROFS */
    return DT_OK;
}

dt_status ckpt_dir_prepare(const char *dir, int *lock_fd)
{
    *lock_fd = -1;
    if (dir_name_fits(dir)) return DT_ERR_INVALID_ARG;
    const int made = mkdir(dir, 0777) == 0;
    if (!made && errno != EEXIST) return dir_make_error(dir);
    if (made) {
        /* The new directory's entry reaches the disk with its parent's sync, before a checkpoint
         * is renamed into it. */
        char parent[4096];
        path_parent_dir(dir, parent, sizeof parent);
        (void)sync_dir(parent);
    }
    dt_status s = dir_usable(dir);
    /* The lock before the clean-up: another run's temporary file may be a save in progress. */
    if (s || (s = ckpt_dir_lock(dir, lock_fd))) return s;
    DIR *dh = opendir(dir);
    if (!dh) return status_set_error(DT_ERR_IO, "cannot read checkpoint directory %s: %s", dir, strerror(errno));
    int removed = 0;
    struct dirent *e;
    char path[4200];
    struct stat sb;
    /* Only regular files: a link or a directory named so is not a save of dtrain's. */
    while ((e = readdir(dh)) != NULL)
        if (!strncmp(e->d_name, "ckpt-", 5) && strstr(e->d_name, ".dtc.tmp.") &&
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path && lstat(path, &sb) == 0 &&
            S_ISREG(sb.st_mode) && unlink(path) == 0)
            removed++;
    closedir(dh);
    if (removed)
        log_msg(LOG_LEVEL_WARN, "%s: removed %d unfinished checkpoint file%s left by a save that was stopped", dir,
                removed, removed == 1 ? "" : "s");
    return DT_OK;
}
