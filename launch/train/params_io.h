/*
 * params_io.h - the flat parameter files of `dtrain train`: --dump-params writes them, and
 * --init-params reads them back (params_io.c).
 *
 * The layout is PyTorch's state_dict order (include/dtrain.h, dt_model_params): per layer in
 * order, an fc layer's weight [out][in] row-major then its bias (nn.Linear), a conv layer's
 * weight [out][in][k][k] then its bias (nn.Conv2d); raw little-endian fp32, nothing else, so
 * `numpy.fromfile(path, "<f4")` reads it and a few slices move it to or from a torch model.
 */
#ifndef DT_LAUNCH_PARAMS_IO_H
#define DT_LAUNCH_PARAMS_IO_H

#include "dtrain.h"

#include <stddef.h>

/* Writes n floats to path atomically, with the checkpoint's writer (ckpt_write_file_atomic: a
 * temporary file, fsync, rename, the directory fsynced): a reader or a crash never sees half a
 * file. EXIT_OK, or EXIT_FAIL after printing why (the file, the cause, the fix). */
int params_dump(const char *path, const float *p, size_t n);
/* Rank 0 reads path, which must hold exactly the model's parameter count of floats, and every
 * rank takes its values (collective). EXIT_OK, or EXIT_FAIL / EXIT_USAGE after printing why. When
 * the ranks agreed on a refusal (*agreed 1: each may end on its own), EXIT_USAGE for a path that
 * cannot be used (missing, unreadable, not a file, another model's size) or memory not had, and
 * EXIT_FAIL for a damaged file (a read error, a value that is not finite); *agreed 0 and
 * EXIT_FAIL when the exchange itself failed. */
int params_load(dt_ctx *ctx, dt_model *m, const char *path, int *agreed);

#endif
