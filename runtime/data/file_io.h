/*
 * file_io.h - reading dataset files into memory for the format readers: whole files, plain or
 * gzip-compressed (zlib), with a size bound and errors that name the file.
 */
#ifndef DT_RUNTIME_DATA_FILE_IO_H
#define DT_RUNTIME_DATA_FILE_IO_H

#include "dtrain.h"

#include <stddef.h>

/* Reads the regular file at path whole into a new buffer (*buf, *len; free() it). A name ending
 * in ".gz", or contents starting with the gzip magic, is decompressed. More than max_bytes (after
 * decompression) is DT_ERR_CORRUPT naming the bound, found before it is all allocated. Not a
 * regular file (a FIFO, a directory) is DT_ERR_IO, without blocking. A damaged gzip stream is
 * DT_ERR_CORRUPT with zlib's message. */
dt_status ds_read_file(const char *path, size_t max_bytes, unsigned char **buf, size_t *len);

/* Finds path or, failing that, path.gz: returns 1 (out = path) or 2 (out = path.gz) when that one
 * exists, 0 when neither does (out = path). */
int ds_find_file(const char *path, char *out, size_t n);

#endif
