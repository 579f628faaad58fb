/*
 * io_error.h - the fix for a failed file operation, worded from its errno, so that every writer and
 * reader (checkpoints, --metrics, --trace, --dump-params, data convert, the dataset readers) says
 * the same thing for the same cause (io_error.c).
 */
#ifndef DT_BASE_IO_ERROR_H
#define DT_BASE_IO_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room enough for any fix io_error_fix writes. */
#define IO_FIX_LEN 320

/* Writes into buf (len bytes) what to do about err, the errno of a failed open, read, write, fsync,
 * rename or mkdir: the cause in words, then the fix, as one clause for after the strerror text
 * ("cannot write checkpoint X: Read-only file system: <this>"). what names the file ("checkpoint":
 * the file-size limit compares with its size), alt the setting the user can change instead
 * ("--checkpoint-dir"), or NULL for a file that is read where it is. The classes: EROFS; EACCES
 * and EPERM; EMFILE and ENFILE (saying this process's soft and hard RLIMIT_NOFILE, and fewer
 * --loader-threads); ENOSPC; EDQUOT; EFBIG (RLIMIT_FSIZE, or the file system's own bound); EIO;
 * ENOENT; ENOTDIR; anything else: check the path and its file system. Returns buf. */
const char *io_error_fix(int err, const char *what, const char *alt, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
