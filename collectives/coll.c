/*
 * coll.c - what every collective backend shares: argument checks, ZeRO-1's split of a device
 * bucket, the watchdog's test hook.
 */
#include "collectives/coll.h"
#include "collectives/ctx_comm.h"
#include "base/status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_status coll_check_args(const coll *c, const void *buf, size_t count, dt_dtype t, int op, int root)
{
    if (!c) return status_set_error(DT_ERR_INVALID_ARG, "collective called without a context");
    const int reduce = op != COLL_NO_REDUCTION;
    if (t == DT_U8 && reduce)
        return status_set_error(DT_ERR_INVALID_ARG, "allreduce of dtype DT_U8: raw bytes have no sum; DT_U8 is for "
                                                    "dt_broadcast only (reduce DT_F32, DT_F16 or DT_BF16 values)");
    if (t != DT_F32 && t != DT_F16 && t != DT_BF16 && t != DT_U8)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "unknown dtype %d (use DT_F32, DT_F16 or DT_BF16, or DT_U8 to "
                                "broadcast bytes)",
                                (int)t);
    if (reduce && op != DT_SUM && op != DT_AVG)
        return status_set_error(DT_ERR_INVALID_ARG, "unknown reduction %d (use DT_SUM or DT_AVG)", op);
    if (root < 0 || root >= c->size)
        return status_set_error(DT_ERR_INVALID_ARG, "root rank %d is not in the world of %d ranks", root, c->size);
    if (!buf && count > 0) return status_set_error(DT_ERR_INVALID_ARG, "NULL buffer for %zu elements", count);
    /* No buffer holds more than PTRDIFF_MAX bytes (C's limit on an object); a larger count would
     * wrap its byte size, or have the backends loop over memory that is not there. */
    const size_t esz = dt_dtype_size(t);
    dt_status s = status_count_fits(NULL, count, t, "elements");
    if (s) return s;
    if ((uintptr_t)buf + count * esz < (uintptr_t)buf)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "count %zu: %zu bytes from %p run past the end of the address space: pass the "
                                "number of elements of the buffer",
                                count, count * esz, buf);
    return DT_OK;
}

dt_status coll_enter(const coll *c, const char *what) { return c && c->ctx ? ctx_enter(c->ctx, what) : DT_OK; }

void coll_leave(const coll *c)
{
    if (c && c->ctx) ctx_leave(c->ctx);
}

void coll_part(size_t n, int j, int size, size_t *off, size_t *cnt)
{
    const size_t q = size > 0 ? n / (size_t)size : n;
    *off = (size_t)j * q;
    *cnt = j == size - 1 ? n - *off : q;
}

int coll_test_hang(const char *layer, int rank, unsigned long long seq)
{
    /* Read once: the variable is a test's, set before the job starts. */
    static int parsed, h_rank = -1;
    static unsigned long long h_seq;
    static char h_layer[16];
    if (!parsed) {
        const char *v = getenv("DTRAIN_TEST_HANG");
        int n = 0;
        if (!v || sscanf(v, "%15[a-z]:%d:%llu%n", h_layer, &h_rank, &h_seq, &n) != 3 || v[n]) h_rank = -1;
        parsed = 1;
    }
    return h_rank >= 0 && h_rank == rank && h_seq == seq && strcmp(h_layer, layer) == 0;
}
