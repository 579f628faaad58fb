/*
 * close_stdout.c - the end of every command: standard output is flushed and closed, and output
 * that could not be written is an error rather than a silent loss with exit status 0 (`dtrain doctor
 * --json > report.json` on a full disk left an empty file and said nothing). The rule is that of
 * coreutils' close_stdout.
 *
 * Under a launcher (mpirun, srun) a rank's stdout is a pipe or a terminal of the launcher, which
 * writes the job's output where it goes: a full disk there is the launcher's to report (Open MPI's
 * mpirun drops it silently), so the job's stdout should be redirected per rank (mpirun
 * --output-filename, srun --output) where it must not be lost. A rank whose own stdout fails is
 * told after MPI is finalized and exits non-zero, which ends the launcher non-zero too.
 */
#include "launch/cli.h"
#include "base/io_error.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* The cause of an earlier failed write, whose errno is gone, from what stdout is now (before it
 * is closed): a pipe without a reader (EPIPE), a file on a file system with no room (ENOSPC); 0
 * when it cannot be told. */
static int earlier_cause(void)
{
    struct stat sb;
    struct pollfd pf = {.fd = STDOUT_FILENO, .events = POLLOUT};
    struct statvfs vf;
    if (fstat(STDOUT_FILENO, &sb) != 0) return 0;
    if (S_ISFIFO(sb.st_mode) && poll(&pf, 1, 0) == 1 && (pf.revents & POLLERR)) return EPIPE;
    if (S_ISREG(sb.st_mode) && fstatvfs(STDOUT_FILENO, &vf) == 0 && vf.f_bavail == 0) return ENOSPC;
    return 0;
}

int cli_close_stdout(int rc)
{
    const int pending = __fpending(stdout) != 0;
    const int failed_before = ferror(stdout) != 0;
    const int cause = failed_before ? earlier_cause() : 0;
    errno = 0;
    const int close_failed = fclose(stdout) != 0;
    const int err = close_failed ? errno : cause;
    /* A stdout closed by the caller (>&-) with nothing to write is no loss. */
    if (!failed_before && (!close_failed || (!pending && err == EBADF))) return rc;
    /* The reader went away (dtrain help | head -1): what it did not read it did not want. With
     * SIGPIPE at its default this is not reached; it is where the caller ignores SIGPIPE. */
    if (err == EPIPE) return rc;
    char fix[IO_FIX_LEN];
    if (err == EBADF)
        snprintf(fix, sizeof fix, "standard output is closed: run dtrain with it open (not >&-)");
    else if (err)
        io_error_fix(err, "output", "file for the output", fix, sizeof fix);
    else
        snprintf(fix, sizeof fix,
                 "part of the output was lost (a full disk or device, a quota, an I/O error): check where it goes");
    if (err)
        cli_error("writing standard output failed: %s: %s", strerror(err), fix);
    else
        cli_error("writing standard output failed: %s", fix);
    return rc ? rc : EXIT_FAIL;
}
