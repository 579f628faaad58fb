/*
 * status.c - status codes, their descriptions and the per-thread last-error message.
 */
#include "base/status.h"
#include "base/printable.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[2048];
/* 1 while the last error is another rank's failure, as a collective call reports it here. */
static _Thread_local int last_from_peer;
/* The status the last error is marked shared for (status_mark_shared), DT_OK when it is not. */
static _Thread_local dt_status last_shared;

const char *dt_strerror(dt_status s)
{
    switch (s) {
        case DT_OK: return "success";
        case DT_ERR_INVALID_ARG: return "invalid argument";
        case DT_ERR_ENV: return "bad environment variable";
        case DT_ERR_MPI: return "MPI error";
        case DT_ERR_DEVICE: return "device error";
        case DT_ERR_NOMEM: return "out of memory";
        case DT_ERR_IO: return "I/O error";
        case DT_ERR_CORRUPT: return "corrupt data";
        case DT_ERR_TIMEOUT: return "timeout";
        case DT_ERR_UNSUPPORTED: return "not supported by this build";
        case DT_ERR_INTERNAL: return "internal error";
        case DT_ERR_NUMERIC: return "numeric failure";
        case DT_ERR_COMM: return "NCCL error";
    }
    return "unknown status";
}

const char *dt_last_error(void) { return last_error; }

void status_clear_error(void)
{
    last_error[0] = '\0';
    last_shared = DT_OK;
}

_Static_assert(sizeof(((status_kept *)0)->msg) == sizeof last_error, "a kept message holds the whole last error");

void status_keep(status_kept *k)
{
    memcpy(k->msg, last_error, sizeof k->msg);
    k->from_peer = last_from_peer;
    k->shared = (int)last_shared;
}

dt_status status_restore(dt_status s, const status_kept *k)
{
    memcpy(last_error, k->msg, sizeof last_error);
    last_from_peer = k->from_peer;
    last_shared = (dt_status)k->shared;
    return s;
}

int status_from_peer(void) { return last_from_peer; }

dt_status status_mark_shared(dt_status s)
{
    last_shared = s;
    return s;
}

int status_shared(dt_status s) { return s != DT_OK && last_shared == s; }

/* The message as the last error, and whose failure it is. */
static dt_status set_error(dt_status s, int from_peer, const char *fmt, va_list ap)
{
    /* Formatted aside and then copied: callers often wrap the error they were given
     * (status_set_error(s, "...: %s", dt_last_error())), and vsnprintf into the buffer it is
     * reading from is undefined behaviour. */
    char msg[sizeof last_error];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* A message names files and values dtrain did not choose (a dataset's file names): one line
     * with no control character, whoever prints it (the command, the log, a library caller). */
    text_escape_controls(msg, last_error, sizeof last_error);
    last_from_peer = from_peer;
    last_shared = DT_OK;
    return s;
}

dt_status status_set_error(dt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(s, 0, fmt, ap);
    va_end(ap);
    return s;
}

dt_status status_prefix(dt_status s, const char *prefix)
{
    const int from_peer = last_from_peer;
    const dt_status shared = last_shared;
    status_set_error(s, "%s: %s", prefix, last_error);
    last_from_peer = from_peer;
    last_shared = shared;
    return s;
}

dt_status status_set_peer_error(dt_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(s, 1, fmt, ap);
    va_end(ap);
    return s;
}

dt_status status_null_arg(const char *fn, const char *arg, const char *fix)
{
    return status_set_error(DT_ERR_INVALID_ARG, "%s: %s is NULL: %s", fn, arg, fix);
}

dt_status status_count_fits(const char *fn, size_t count, dt_dtype t, const char *what)
{
    const size_t esz = dt_dtype_size(t), most = esz ? (size_t)PTRDIFF_MAX / esz : (size_t)PTRDIFF_MAX;
    if (count <= most) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "%s%scount %zu is more %s elements than any buffer can hold (at most %zu, PTRDIFF_MAX "
                            "bytes): pass the number of %s (a negative count converted to size_t looks like this)",
                            fn ? fn : "", fn ? ": " : "", count, dt_dtype_name(t), most, what);
}
