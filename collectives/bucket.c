/*
 * bucket.c - the reducer's bucket planner (see bucket.h).
 *
 * A model lays its parameters out in forward order, so the ranges backward finishes first sit at
 * the end of the buffer and a run of consecutive ranges is one contiguous slice: a bucket needs
 * no packing copy. Ranges that are not adjacent in memory to the bucket being filled start a new
 * one, so any tiling in any order works, bucketing only what is contiguous. The first bucket is
 * kept small (PyTorch DDP's 1 MiB) so communication starts early.
 */
#include "collectives/bucket.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/status.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct range_key {
    size_t offset;
    int index;
} range_key;

static int cmp_range_key(const void *a, const void *b)
{
    const size_t x = ((const range_key *)a)->offset, y = ((const range_key *)b)->offset;
    return x < y ? -1 : x > y ? 1 : 0;
}

static void plan_log(const bucket_plan *p, size_t elem_bytes, size_t first_cap, size_t cap)
{
    if (!log_enabled(LOG_LEVEL_DEBUG)) return;
    log_msg0(LOG_LEVEL_DEBUG,
             "bucket plan: %d bucket(s) over %d range(s) of %zu elements, %zu-byte elements, first cap "
             "%zu bytes, cap %zu bytes (0: no cap), filled in backward order",
             p->nb, p->nr, p->count, elem_bytes, first_cap, cap);
    for (int i = 0; i < p->nb; i++)
        log_msg0(LOG_LEVEL_DEBUG, "bucket plan: bucket %d: ranges %d..%d, elements [%zu, %zu), %zu bytes", i,
                 p->b[i].first_range, p->b[i].first_range + p->b[i].nranges - 1, p->b[i].off, p->b[i].off + p->b[i].n,
                 p->b[i].n * elem_bytes);
}

/* Bucket indices sorted by offset (buckets never overlap, so by offset is a total order). */
static dt_status index_buckets(bucket_plan *p)
{
    p->b_by_off = malloc((size_t)p->nb * sizeof *p->b_by_off);
    if (!p->b_by_off) return status_set_error(DT_ERR_NOMEM, "out of memory planning %d buckets", p->nb);
    for (int i = 0; i < p->nb; i++) p->b_by_off[i] = i;
    /* Insertion sort: plans by size are already in reverse order, plans by ranges nearly so. */
    for (int i = 1; i < p->nb; i++) {
        int v = p->b_by_off[i], j = i - 1;
        while (j >= 0 && p->b[p->b_by_off[j]].off > p->b[v].off) p->b_by_off[j + 1] = p->b_by_off[j], j--;
        p->b_by_off[j + 1] = v;
    }
    return DT_OK;
}

/* The lookups, and the plan in the debug log; the plan is freed on failure. */
static dt_status finish_plan(bucket_plan *p, size_t elem_bytes, size_t first_cap, size_t cap)
{
    dt_status s = index_buckets(p);
    if (s) {
        bucket_plan_free(p);
        return s;
    }
    plan_log(p, elem_bytes, first_cap, cap);
    return DT_OK;
}

/* Each range non-empty and inside the buffer of count elements. */
static dt_status check_ranges(size_t count, const dt_range *r, int nr)
{
    for (int i = 0; i < nr; i++) {
        if (r[i].count == 0)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "range %d [%zu, %zu) is empty: every range holds at least one "
                                    "element",
                                    i, r[i].offset, r[i].offset);
        /* The end is printed only where offset + count fits in a size_t: a wrapped end would
         * show a range ending before it starts. */
        if ((r[i].offset >= count || r[i].count > count - r[i].offset) && r[i].count > SIZE_MAX - r[i].offset)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "range %d (offset %zu, count %zu) runs past the buffer of %zu elements: its end "
                                    "is past SIZE_MAX",
                                    i, r[i].offset, r[i].count, count);
        if (r[i].offset >= count || r[i].count > count - r[i].offset)
            return status_set_error(DT_ERR_INVALID_ARG, "range %d [%zu, %zu) runs past the buffer of %zu elements", i,
                                    r[i].offset, r[i].offset + r[i].count, count);
    }
    return DT_OK;
}

/* The plan's arrays, a copy of the ranges and their order by offset (out->by_off). */
static dt_status plan_arrays(size_t count, const dt_range *r, int nr, bucket_plan *out)
{
    out->count = count;
    out->nr = nr;
    out->r = malloc((size_t)nr * sizeof *out->r);
    out->by_off = malloc((size_t)nr * sizeof *out->by_off);
    out->of_range = malloc((size_t)nr * sizeof *out->of_range);
    out->b = calloc((size_t)nr, sizeof *out->b);
    range_key *key = malloc((size_t)nr * sizeof *key);
    if (!out->r || !out->by_off || !out->of_range || !out->b || !key) {
        free(key);
        return status_set_error(DT_ERR_NOMEM, "out of memory planning buckets over %d ranges", nr);
    }
    memcpy(out->r, r, (size_t)nr * sizeof *r);
    for (int i = 0; i < nr; i++) key[i] = (range_key){r[i].offset, i};
    qsort(key, (size_t)nr, sizeof *key, cmp_range_key);
    for (int i = 0; i < nr; i++) out->by_off[i] = key[i].index;
    free(key);
    return DT_OK;
}

/* The tiling: sorted by offset, each range starts where the previous one ends, the last at the
 * buffer's end. */
static dt_status check_tiling(const bucket_plan *p)
{
    size_t end = 0;
    for (int k = 0; k < p->nr; k++) {
        const int i = p->by_off[k];
        const dt_range *x = &p->r[i];
        if (x->offset < end) {
            const int j = p->by_off[k - 1];
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "ranges %d [%zu, %zu) and %d [%zu, %zu) overlap: each "
                                    "element of the buffer belongs to exactly one range",
                                    j, p->r[j].offset, p->r[j].offset + p->r[j].count, i, x->offset,
                                    x->offset + x->count);
        }
        if (x->offset > end)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "the ranges leave elements [%zu, %zu) of the buffer "
                                    "uncovered (before range %d): the ranges must tile [0, %zu) exactly",
                                    end, x->offset, i, p->count);
        end = x->offset + x->count;
    }
    if (end != p->count)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "the ranges leave elements [%zu, %zu) of the buffer uncovered "
                                "(after the last range): the ranges must tile [0, %zu) exactly",
                                end, p->count, p->count);
    return DT_OK;
}

/* Buckets in ready order: consecutive ranges adjacent in memory share one up to the cap. */
static void fill_buckets(bucket_plan *p, size_t elem_bytes, size_t first_cap_bytes, size_t cap_bytes)
{
    int nb = 0;
    size_t bytes = 0;
    for (int i = 0; i < p->nr; i++) {
        const dt_range *x = &p->r[i];
        const size_t rb = x->count * elem_bytes;
        bucket *cur = nb ? &p->b[nb - 1] : NULL;
        /* A first cap of 0: the first bucket is capped as the others (so is a plan by size). */
        const size_t cap = nb == 1 && first_cap_bytes ? first_cap_bytes : cap_bytes;
        const int adjacent = cur && (x->offset + x->count == cur->off || cur->off + cur->n == x->offset);
        if (!cur || !adjacent || (cap > 0 && bytes + rb > cap)) {
            cur = &p->b[nb++];
            cur->off = x->offset;
            cur->n = 0;
            cur->first_range = i;
            cur->nranges = 0;
            bytes = 0;
        }
        if (x->offset < cur->off) cur->off = x->offset;
        cur->n += x->count;
        cur->nranges++;
        bytes += rb;
        p->of_range[i] = nb - 1;
    }
    p->nb = nb;
}

dt_status bucket_plan_ranges(size_t count, const dt_range *r, int nr, size_t elem_bytes, size_t first_cap_bytes,
                             size_t cap_bytes, bucket_plan *out)
{
    memset(out, 0, sizeof *out);
    if (nr < 1 || !r) return status_set_error(DT_ERR_INVALID_ARG, "bucket plan: no ranges given");
    dt_status s = check_ranges(count, r, nr);
    if (s) return s;
    if ((s = plan_arrays(count, r, nr, out)) || (s = check_tiling(out))) {
        bucket_plan_free(out);
        return s;
    }
    fill_buckets(out, elem_bytes, first_cap_bytes, cap_bytes);
    return finish_plan(out, elem_bytes, first_cap_bytes, cap_bytes);
}

dt_status bucket_plan_auto(size_t count, size_t elem_bytes, size_t first_cap_bytes, size_t cap_bytes, bucket_plan *out)
{
    memset(out, 0, sizeof *out);
    if (count == 0) return status_set_error(DT_ERR_INVALID_ARG, "bucket plan: the buffer is empty");
    /* Caps in elements (at least one); a cap of 0 never closes a bucket, and a first cap of 0 caps
     * the first bucket as the others, as with ranges. */
    const size_t first = first_cap_bytes ? (first_cap_bytes / elem_bytes ? first_cap_bytes / elem_bytes : 1) : 0;
    const size_t each = cap_bytes ? (cap_bytes / elem_bytes ? cap_bytes / elem_bytes : 1) : count;
    size_t nb = 0;
    for (size_t end = count; end > 0; nb++) {
        const size_t cap = nb == 0 && first ? first : each;
        end -= end < cap ? end : cap;
        if (nb >= (size_t)1 << 20)
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "bucket caps of %zu / %zu bytes cut %zu elements into more than "
                                    "2^20 buckets: raise the caps",
                                    first_cap_bytes, cap_bytes, count);
    }
    out->b = calloc(nb, sizeof *out->b);
    if (!out->b) return status_set_error(DT_ERR_NOMEM, "out of memory planning %zu buckets", nb);
    out->count = count;
    int i = 0;
    for (size_t end = count; end > 0; i++) {
        const size_t cap = i == 0 && first ? first : each;
        const size_t n = end < cap ? end : cap;
        out->b[i].off = end - n;
        out->b[i].n = n;
        out->b[i].first_range = -1;
        end -= n;
    }
    out->nb = i;
    return finish_plan(out, elem_bytes, first_cap_bytes, cap_bytes);
}

dt_status bucket_caps_check(const char *fn, double bucket_mb, double first_bucket_mb)
{
    if (!(bucket_mb >= 0 && bucket_mb <= 1e6) || !(first_bucket_mb >= 0 && first_bucket_mb <= 1e6))
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "%s: bucket caps bucket_mb %g and first_bucket_mb %g MiB must be from 0 (no cap) to 1e6", fn, bucket_mb,
            first_bucket_mb);
    return DT_OK;
}

size_t bucket_cap_bytes(double mb) { return (size_t)ceil(mb * 1048576.0); }

void bucket_plan_free(bucket_plan *p)
{
    if (!p) return;
    free(p->b);
    free(p->r);
    free(p->of_range);
    free(p->by_off);
    free(p->b_by_off);
    memset(p, 0, sizeof *p);
}

int bucket_plan_find_range(const bucket_plan *p, size_t off, int *nearest)
{
    if (nearest) *nearest = -1;
    if (!p->nr) return -1;
    int lo = 0, hi = p->nr - 1;
    while (lo < hi) { /* the last range starting at or before off */
        int mid = (lo + hi + 1) / 2;
        if (p->r[p->by_off[mid]].offset <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int i = p->by_off[lo];
    if (nearest) *nearest = i;
    return p->r[i].offset == off ? i : -1;
}

int bucket_plan_bucket_at(const bucket_plan *p, size_t off)
{
    int lo = 0, hi = p->nb - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->b[p->b_by_off[mid]].off <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    return p->b_by_off[lo];
}

unsigned long long bucket_plan_hash(const bucket_plan *p)
{
    uint64_t h = fnv1a_int(fnv1a_int(FNV1A_OFFSET, p->count, 8), (uint64_t)p->nr, 8); /* the boundaries */
    for (int i = 0; i < p->nb; i++) h = fnv1a_int(fnv1a_int(h, p->b[i].off, 8), p->b[i].n, 8);
    for (int i = 0; i < p->nr; i++) h = fnv1a_int(fnv1a_int(h, p->r[i].offset, 8), p->r[i].count, 8);
    return h ^ (unsigned long long)p->nb;
}
