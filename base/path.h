/*
 * path.h - the directory that holds a path's entry: the atomic writers fsync it after a rename,
 * and the output checks compare it, so every layer splits a path the same way.
 */
#ifndef DT_BASE_PATH_H
#define DT_BASE_PATH_H

#include <stddef.h>

/* Copies into dir (n bytes, truncated to fit) the directory whose entry path names: everything
 * before its last '/', trailing slashes dropped first (runs/ck/ is the entry ck of runs); "." for a
 * bare name, "/" for an entry of the root. Returns the entry's own name within path (after that
 * '/', trailing slashes kept; path itself for a bare name). */
const char *path_parent_dir(const char *path, char *dir, size_t n);

#endif
