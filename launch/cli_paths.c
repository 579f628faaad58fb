/*
 * cli_paths.c - the paths a command line names: whether two of them are one file (an output that
 * would overwrite an input or another output), and the exit code of an input that would not open.
 */
#include "launch/cli.h"
#include "base/path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path with its parent directory resolved where it can be. */
static void resolved_path(const char *path, char *out, size_t n)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *base = path_parent_dir(path, dir, sizeof dir);
    if (realpath(dir, real))
        snprintf(out, n, "%s/%s", real, base);
    else
        snprintf(out, n, "%s", path);
}

int cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!strcmp(a, b)) return 1;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ra[PATH_MAX + NAME_MAX + 2], rb[PATH_MAX + NAME_MAX + 2];
    resolved_path(a, ra, sizeof ra);
    resolved_path(b, rb, sizeof rb);
    return !strcmp(ra, rb);
}

int cli_input_exit(dt_status s, const char *path)
{
    if (s == DT_ERR_INVALID_ARG) return EXIT_USAGE;
    if (s != DT_ERR_IO || !path) return EXIT_FAIL;
    /* Asked of the path after the open failed, so the reader's own message stays the one shown:
     * the path as named cannot be reached (missing, a file on its way, a loop, too long, no search
     * permission), or this user may not read what is there. */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ELOOP || errno == ENAMETOOLONG
                   ? EXIT_USAGE
                   : EXIT_FAIL;
    return access(path, R_OK) != 0 && (errno == EACCES || errno == EPERM) ? EXIT_USAGE : EXIT_FAIL;
}
