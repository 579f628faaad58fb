/*
 * path.c - see path.h.
 */
#include "base/path.h"

#include <stdio.h>
#include <string.h>

const char *path_parent_dir(const char *path, char *dir, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    const char *slash = len ? memrchr(path, '/', len) : NULL;
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == path)
        snprintf(dir, n, "/");
    else
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
    return slash ? slash + 1 : path;
}
