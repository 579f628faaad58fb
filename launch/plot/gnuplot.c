/*
 * gnuplot.c - running gnuplot for the commands that draw PNGs (`dtrain plot`, `dtrain model-perf
 * --plot`): finding it on PATH, quoting strings for its scripts, feeding it a script on stdin and
 * checking that what it wrote is a PNG. The script is built in memory by the caller, so gnuplot
 * never reads a user's file itself.
 */
#include "launch/plot/gnuplot.h"
#include "launch/cli.h"
#include "runtime/checkpoint/ckpt_write_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* gnuplot on PATH as a full path into buf, or -1. */
int gnuplot_find(char *buf, size_t n)
{
    const char *path = getenv("PATH");
    if (!path) return -1;
    for (const char *p = path;; p++) {
        const size_t len = strcspn(p, ":");
        if (snprintf(buf, n, "%.*s/gnuplot", len ? (int)len : 1, len ? p : ".") < (int)n) {
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return 0;
        }
        p += len;
        if (!*p) return -1;
    }
}

/* s as a gnuplot single-quoted string: ' doubled, control characters shown as '?'. */
void gnuplot_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
    }
    fputc('\'', f);
}

int gnuplot_temp_path(char *buf, size_t n, const char *out)
{
    /* Made here, O_EXCL (the checkpoint writer's ckpt_open_temp_as: a name that exists, a planted
     * link included, is never opened; the next is tried; mode 0666 less the umask), before gnuplot
     * opens it by name: gnuplot's own open follows links. */
    char path[4200];
    const int w = snprintf(path, sizeof path, "%s%s", out[0] == '/' ? "" : "./", out);
    if (w < 0 || (size_t)w >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const int fd = ckpt_open_temp_as(path, ".tmp-", buf, n);
    return fd < 0 ? -1 : close(fd);
}

/* Runs gnuplot (exe) on script. Returns 0, or -1 after printing why. */
int gnuplot_run(const char *who, const char *exe, const char *script, size_t len)
{
    int fd[2];
    if (pipe(fd) != 0) {
        cli_error("%s: pipe: %s", who, strerror(errno));
        return -1;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        cli_error("%s: fork: %s", who, strerror(errno));
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[0], STDIN_FILENO);
        close(fd[0]), close(fd[1]);
        /* gnuplot draws to its stdout when `set output` cannot open the file: a PNG must never
         * reach the user's terminal or job log. Its messages go to stderr, which it keeps. */
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO), close(null);
        execl(exe, "gnuplot", (char *)NULL);
        fprintf(stderr, "dtrain: error: %s: cannot run %s: %s\n", who, exe, strerror(errno));
        _exit(127);
    }
    close(fd[0]);
    /* gnuplot dying early must give its own message and status, not kill us with SIGPIPE. */
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    for (size_t off = 0; off < len;) {
        const ssize_t w = write(fd[1], script + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd[1]);
    signal(SIGPIPE, old);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            cli_error("%s: waiting for gnuplot: %s", who, strerror(errno));
            return -1;
        }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFEXITED(st))
        cli_error("%s: gnuplot (%s) failed with exit status %d (its messages are above)", who, exe, WEXITSTATUS(st));
    else
        cli_error("%s: gnuplot (%s) died of signal %d", who, exe, WTERMSIG(st));
    return -1;
}

/* The PNG at path begins with the PNG signature. */
int gnuplot_is_png(const char *path)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char got[8];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    const int ok = fread(got, 1, 8, f) == 8 && !memcmp(got, sig, 8);
    fclose(f);
    return ok;
}

int gnuplot_output_check(const char *who, const char *flag, const char *out, const char *const *inputs, int n,
                         const char *hint)
{
    /* The script hands gnuplot the PNG's temporary name, in which gnuplot_quoted must show a control
     * character as '?': gnuplot would draw a file of another name, which dtrain could neither
     * check nor remove. The path is shown with the character escaped, as the shell would write it. */
    for (const char *p = out; *p; p++) {
        const unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != 0x7f) continue;
        char shown[600];
        size_t k = 0;
        for (const char *q = out; *q && k + 5 < sizeof shown; q++) {
            const unsigned char d = (unsigned char)*q;
            if (d == '\n')
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\n");
            else if (d == '\t')
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\t");
            else if (d < 0x20 || d == 0x7f)
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", d);
            else
                shown[k++] = (char)d;
        }
        shown[k] = 0;
        cli_error("%s: %s '%s' holds a control character (byte %zu): gnuplot cannot write a file of that name; "
                  "give a path without one%s",
                  who, flag, shown, (size_t)(p - out) + 1, hint ? hint : "");
        return EXIT_USAGE;
    }
    for (int i = 0; i < n; i++)
        if (inputs[i] && cli_same_file(inputs[i], out)) {
            cli_error("%s: the PNG %s is the input %s itself: writing it would destroy that file; give another %s "
                      "(for example %s plot.png)",
                      who, out, inputs[i], flag, flag);
            return EXIT_USAGE;
        }
    /* gnuplot draws into a temporary file that replaces out: a device, FIFO or stream in its place
     * would become a regular file (the system's /dev/null, as root). */
    char real[4096];
    int in_place;
    ckpt_write_target(out, real, sizeof real, &in_place);
    if (in_place) {
        cli_error("%s: %s %s is not a regular file (a device, a FIFO or a stream): the PNG replaces its file; "
                  "give a file path",
                  who, flag, out);
        return EXIT_USAGE;
    }
    if (ckpt_write_file_try(out, flag)) {
        cli_error("%s: %s%s", who, dt_last_error(), hint ? hint : "");
        return EXIT_USAGE;
    }
    return 0;
}
