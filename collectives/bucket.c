/*
 * bucket.c - the bucket planner (see bucket.h).
 *
 * Parameters are laid out in forward order, so the layers backward finishes first sit at the end
 * of the buffer and a run of consecutive layers is one contiguous slice: a bucket needs no packing
 * copy. The first bucket is kept small (PyTorch DDP's 1 MiB) so communication starts early.
 */
#include "bucket.h"
#include "log.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

dt_status bucket_plan_build(const size_t *off, const size_t *n, int nlayers, size_t elem_bytes,
                            size_t first_cap_bytes, size_t cap_bytes, bucket_plan *out)
{
    memset(out, 0, sizeof *out);
    if (nlayers < 1) return dt_set_error(DT_ERR_INVALID_ARG, "bucket plan: the model has no parameters");
    for (int l = 0; l + 1 < nlayers; l++)
        if (off[l] + n[l] != off[l + 1])
            return dt_set_error(DT_ERR_INTERNAL, "bucket plan: parameter layer %d is not contiguous with %d", l,
                                l + 1);
    bucket *b = calloc((size_t)nlayers, sizeof *b);
    int *of_layer = calloc((size_t)nlayers, sizeof *of_layer);
    if (!b || !of_layer) {
        free(b);
        free(of_layer);
        return dt_set_error(DT_ERR_NOMEM, "out of memory planning %d buckets", nlayers);
    }
    int nb = 0;
    size_t bytes = 0;
    for (int l = nlayers - 1; l >= 0; l--) {
        size_t lb = n[l] * elem_bytes;
        /* A new bucket for the first layer, or when this layer would overflow the current one
         * (whose cap is first_cap_bytes for bucket 0; a cap of 0 never overflows). */
        size_t cap = nb == 1 ? first_cap_bytes : cap_bytes;
        int open = nb == 0 || (cap > 0 && bytes + lb > cap);
        if (open) {
            b[nb].first_layer = l;
            b[nb].nlayers = 0;
            b[nb].off = off[l];
            b[nb].n = 0;
            nb++;
            bytes = 0;
        }
        bucket *cur = &b[nb - 1];
        cur->first_layer = l;
        cur->nlayers++;
        cur->off = off[l];
        cur->n += n[l];
        bytes += lb;
        of_layer[l] = nb - 1;
    }
    out->b = b;
    out->nb = nb;
    out->of_layer = of_layer;
    out->nlayers = nlayers;
    if (log_enabled(DT_LOG_DEBUG)) {
        dt_log0(DT_LOG_DEBUG, "bucket plan: %d bucket(s) over %d parameter layers, %zu-byte elements, first cap %zu "
                "bytes, cap %zu bytes (0: no cap), filled in backward order", nb, nlayers, elem_bytes,
                first_cap_bytes, cap_bytes);
        for (int i = 0; i < nb; i++)
            dt_log0(DT_LOG_DEBUG, "bucket plan: bucket %d: parameter layers %d..%d, elements [%zu, %zu), %zu bytes", i,
                    b[i].first_layer, b[i].first_layer + b[i].nlayers - 1, b[i].off, b[i].off + b[i].n,
                    b[i].n * elem_bytes);
    }
    return DT_OK;
}

void bucket_plan_free(bucket_plan *p)
{
    if (!p) return;
    free(p->b);
    free(p->of_layer);
    memset(p, 0, sizeof *p);
}

unsigned long long bucket_plan_hash(const bucket_plan *p)
{
    unsigned long long h = 1469598103934665603ull; /* FNV-1a over the boundaries */
    for (int i = 0; i < p->nb; i++) {
        unsigned long long v[2] = {p->b[i].off, p->b[i].n};
        for (int k = 0; k < 2; k++)
            for (int byte = 0; byte < 8; byte++) {
                h ^= (v[k] >> (8 * byte)) & 0xff;
                h *= 1099511628211ull;
            }
    }
    return h ^ (unsigned long long)p->nb;
}
