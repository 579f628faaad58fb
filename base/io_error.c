/*
 * io_error.c - see io_error.h. One wording per errno class: a message that gives only the errno's
 * text ("Permission denied") leaves the user to guess whether the fix is the disk, the permissions
 * or a limit of this process.
 */
#include "base/io_error.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

/* A limit as the shell's ulimit shows it. */
static void limit_text(rlim_t v, char *buf, size_t len)
{
    if (v == RLIM_INFINITY)
        snprintf(buf, len, "unlimited");
    else
        snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* The open-files limits of this process, "soft limit 1024, hard limit 4096", so the fix can be
 * judged from the message (a soft limit below the hard one is raised without privileges). */
static void nofile_text(char *buf, size_t len)
{
    struct rlimit rl;
    char soft[24], hard[24];
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        snprintf(buf, len, "ulimit -n");
        return;
    }
    limit_text(rl.rlim_cur, soft, sizeof soft);
    limit_text(rl.rlim_max, hard, sizeof hard);
    snprintf(buf, len, "ulimit -n: soft limit %s, hard limit %s", soft, hard);
}

const char *io_error_fix(int err, const char *what, const char *alt, char *buf, size_t len)
{
    /* ", or use another --checkpoint-dir": the way around the cause, where there is one. */
    char other[128] = "";
    if (alt) snprintf(other, sizeof other, " or use another %s", alt);
    char lim[128];
    switch (err) {
        case EROFS: snprintf(buf, len, "the file system is mounted read-only: remount it read-write%s", other); break;
        case EACCES:
        case EPERM:
            if (alt)
                snprintf(buf, len,
                         "this user may not write there: fix the directory's permissions or owner (ls -ld, chmod)%s",
                         other);
            else
                snprintf(buf, len,
                         "this user may not read it: fix the permissions of the file and of the directories above "
                         "it (ls -l, chmod)");
            break;
        case EMFILE:
            nofile_text(lim, sizeof lim);
            snprintf(buf, len,
                     "this process has as many files open as it may (%s): raise the soft limit (ulimit -n, up to the "
                     "hard one) or use fewer --loader-threads",
                     lim);
            break;
        case ENFILE:
            nofile_text(lim, sizeof lim);
            snprintf(buf, len,
                     "the system has as many files open as it may (sysctl fs.file-max; this process's %s): close "
                     "other programs' files, raise fs.file-max, or use fewer --loader-threads",
                     lim);
            break;
        case ENOSPC: snprintf(buf, len, "the file system is full: free space%s", other); break;
        case EDQUOT: snprintf(buf, len, "the disk quota is exhausted: free space%s", other); break;
        case EFBIG: {
            struct rlimit rl;
            if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY)
                snprintf(buf, len, "the %s is larger than its file system allows (FAT: 4 GiB)%s%s",
                         what ? what : "file", alt ? ": use another " : "", alt ? alt : "");
            else
                snprintf(buf, len,
                         "the file-size limit (ulimit -f, RLIMIT_FSIZE) is below the %s's size: raise it (ulimit -f "
                         "unlimited)",
                         what ? what : "file");
            break;
        }
        case EIO:
            snprintf(buf, len, "the device failed the I/O: check the disk or the file server (dmesg)%s%s",
                     alt ? ", then retry" : "", other);
            break;
        /* A file read that is not there needs only its path checked. */
        case ENOENT:
            if (alt)
                snprintf(buf, len, "its directory does not exist (or was removed): make it%s", other);
            else
                snprintf(buf, len, "check the path");
            break;
        case ENOTDIR:
            if (alt)
                snprintf(buf, len, "a part of its path is a file, not a directory: use another %s", alt);
            else
                snprintf(buf, len, "a part of the path is a file, not a directory: check the path");
            break;
        default: snprintf(buf, len, "check the path and its file system"); break;
    }
    return buf;
}
