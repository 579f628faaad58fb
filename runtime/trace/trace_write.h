/*
 * trace_write.h - dt_trace_write (include/dtrain/trace.h) for a caller that names the path
 * otherwise: the `dtrain` command speaks of its --trace flag, where the library speaks of the call.
 */
#ifndef DT_RUNTIME_TRACE_TRACE_WRITE_H
#define DT_RUNTIME_TRACE_TRACE_WRITE_H

#include "dtrain.h"

/* dt_trace_write(ctx, path), its messages naming the path as flag ("--trace") and giving the fix
 * of a command that ends on the failure (another flag value next run) rather than the library's
 * (call again with another path, the spans being kept). flag NULL: dt_trace_write's own wording. */
dt_status trace_write_named(dt_ctx *ctx, const char *path, const char *flag);

#endif
