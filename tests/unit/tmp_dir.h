/*
 * tmp_dir.h - a unit test's own scratch directory: made fresh under /tmp (mkdtemp, mode 0700) and
 * removed with everything in it at teardown.
 *
 * The removal walks the tree itself (nftw, children first, symbolic links removed, never
 * followed) rather than running `rm -rf` through a shell: no shell to start per test, no path
 * quoting, and a test that planted a link to a file outside the directory cannot get it deleted.
 */
#ifndef DTRAIN_TESTS_TMP_DIR_H
#define DTRAIN_TESTS_TMP_DIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes /tmp/STEM-XXXXXX into dir (len bytes, at least strlen(stem) + 13). 0, or -1 when the name
 * does not fit or mkdtemp fails (errno says why). */
static inline int tmp_dir_make(char *dir, size_t len, const char *stem)
{
    const int n = snprintf(dir, len, "/tmp/%s-XXXXXX", stem);
    if (n < 0 || (size_t)n >= len) return -1;
    return mkdtemp(dir) ? 0 : -1;
}

static inline int tmp_dir_remove(const char *dir);

static inline int tmp_dir_remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    /* A folder a test made unreadable (chmod 000, then failed before it restored the mode) is
     * opened up and walked on its own. */
    if (type == FTW_DNR) return chmod(path, 0700) == 0 ? tmp_dir_remove(path) : -1;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

/* Removes dir and all it holds; a dir that is not there (or an empty name) is already removed.
 * 0, or -1 when something in it could not be removed. */
static inline int tmp_dir_remove(const char *dir)
{
    struct stat sb;
    if (!dir || !*dir || lstat(dir, &sb) != 0) return 0;
    return nftw(dir, tmp_dir_remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

#endif
