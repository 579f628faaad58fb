/*
 * fuzz_bucket_plan.c - the reducer's plan check and bucket planner (collectives/bucket.c:
 * bucket_plan_ranges, bucket_plan_auto and their lookups), which dt_reducer_create runs on the
 * caller's ranges.
 *
 * Input: a mode byte (bit 0: plan by size alone; bit 1: the ranges are a shuffled tiling with one
 * edit, so most are valid and the planner's bucketing is reached; bits 2-3: element size 1, 2, 4
 * or 8), a 16-bit element count, two 16-bit caps (in bytes), then the ranges as pairs of 16-bit
 * offset and count (with bit 1: pairs of cut point and position).
 * Beyond ASan/UBSan: ranges are accepted exactly when they tile [0, count) (decided here with a
 * bitmap); a refused plan is all zero and says why; an accepted one has buckets that are
 * contiguous slices of the ranges they list, consecutive in ready order, that tile the buffer,
 * within their cap unless they hold one range, split only where a cap or a gap in memory forces
 * it; of_range, the offset lookups and bucket_plan_bucket_at agree with them; planning twice
 * gives the same hash. A plan by size tiles the buffer backward within its caps.
 */
#include "fuzz_common.h"
#include "collectives/bucket.h"

#define MAX_COUNT 4096
#define MAX_RANGES 512

static unsigned rd16(const uint8_t *d, size_t size, size_t *pos)
{
    unsigned v = 0;
    if (*pos < size) v = d[(*pos)++];
    if (*pos < size) v |= (unsigned)d[(*pos)++] << 8;
    return v;
}

/* Every element of [0, count) in exactly one range. */
static int tiles(size_t count, const dt_range *r, int nr)
{
    static unsigned char seen[1 << 16];
    if (nr < 1) return 0;
    memset(seen, 0, count);
    for (int i = 0; i < nr; i++) {
        if (r[i].count == 0 || r[i].offset >= count || r[i].count > count - r[i].offset) return 0;
        for (size_t j = r[i].offset; j < r[i].offset + r[i].count; j++)
            if (seen[j]++) return 0;
    }
    for (size_t j = 0; j < count; j++)
        if (!seen[j]) return 0;
    return 1;
}

static void check_lookups(const bucket_plan *p)
{
    for (int k = 0; k < p->nb; k++) {
        const bucket *b = &p->b[p->b_by_off[k]];
        FUZZ_CHECK(k == 0 ? b->off == 0 : b->off == p->b[p->b_by_off[k - 1]].off + p->b[p->b_by_off[k - 1]].n,
                   "bucket %d at %zu does not follow the one before it in memory", p->b_by_off[k], b->off);
        for (size_t e = b->off; e < b->off + b->n; e++)
            FUZZ_CHECK(bucket_plan_bucket_at(p, e) == p->b_by_off[k], "element %zu is looked up in bucket %d, not %d",
                       e, bucket_plan_bucket_at(p, e), p->b_by_off[k]);
    }
    const bucket *last = &p->b[p->b_by_off[p->nb - 1]];
    FUZZ_CHECK(last->off + last->n == p->count, "the buckets end at %zu of %zu", last->off + last->n, p->count);
}

static void check_ranges(const bucket_plan *p, const dt_range *r, int nr, size_t esz, size_t first_cap, size_t cap)
{
    FUZZ_CHECK(p->nr == nr && p->nb >= 1 && p->nb <= nr, "%d buckets for %d ranges", p->nb, nr);
    int next = 0;
    for (int k = 0; k < p->nb; k++) {
        const bucket *b = &p->b[k];
        FUZZ_CHECK(b->first_range == next && b->nranges >= 1, "bucket %d holds ranges %d+%d, expected from %d", k,
                   b->first_range, b->nranges, next);
        size_t lo = SIZE_MAX, hi = 0, n = 0;
        for (int i = b->first_range; i < b->first_range + b->nranges; i++) {
            FUZZ_CHECK(p->r[i].offset == r[i].offset && p->r[i].count == r[i].count, "range %d was changed", i);
            FUZZ_CHECK(p->of_range[i] == k, "of_range[%d] is %d, not %d", i, p->of_range[i], k);
            if (r[i].offset < lo) lo = r[i].offset;
            if (r[i].offset + r[i].count > hi) hi = r[i].offset + r[i].count;
            n += r[i].count;
        }
        FUZZ_CHECK(b->off == lo && b->n == n && hi - lo == n, "bucket %d [%zu, +%zu) is not its ranges' slice", k,
                   b->off, b->n);
        const size_t c = k == 0 && first_cap ? first_cap : cap;
        FUZZ_CHECK(c == 0 || b->nranges == 1 || b->n * esz <= c, "bucket %d of %zu bytes passes its cap %zu", k,
                   b->n * esz, c);
        /* A new bucket only where the next range is not adjacent or would pass the cap. */
        if (k > 0) {
            const bucket *a = &p->b[k - 1];
            const dt_range *x = &r[b->first_range];
            const int adjacent = x->offset + x->count == a->off || a->off + a->n == x->offset;
            const size_t ac = k - 1 == 0 && first_cap ? first_cap : cap;
            FUZZ_CHECK(!adjacent || (ac > 0 && (a->n + x->count) * esz > ac),
                       "range %d starts bucket %d though it fits bucket %d", b->first_range, k, k - 1);
        }
        next += b->nranges;
    }
    FUZZ_CHECK(next == nr, "the buckets hold %d of %d ranges", next, nr);
    for (int i = 0; i < nr; i++) {
        int near = -2;
        FUZZ_CHECK(bucket_plan_find_range(p, r[i].offset, &near) == i && near == i, "range %d at %zu is not found", i,
                   r[i].offset);
        if (r[i].count > 1) {
            FUZZ_CHECK(bucket_plan_find_range(p, r[i].offset + 1, &near) == -1 && near == i,
                       "offset %zu inside range %d is found as a range start", r[i].offset + 1, i);
        }
    }
    check_lookups(p);
}

static void check_auto(const bucket_plan *p, size_t esz, size_t first_cap, size_t cap)
{
    FUZZ_CHECK(p->nr == 0 && p->r == NULL && p->nb >= 1, "a plan by size has %d ranges, %d buckets", p->nr, p->nb);
    size_t end = p->count;
    for (int k = 0; k < p->nb; k++) {
        const bucket *b = &p->b[k];
        FUZZ_CHECK(b->n >= 1 && b->off + b->n == end, "bucket %d [%zu, +%zu) does not end at %zu", k, b->off, b->n,
                   end);
        const size_t c = k == 0 && first_cap ? first_cap : cap;
        const size_t celems = c ? (c / esz ? c / esz : 1) : p->count;
        FUZZ_CHECK(b->n <= celems, "bucket %d of %zu elements passes its cap of %zu", k, b->n, celems);
        FUZZ_CHECK(k == p->nb - 1 || b->n == celems, "bucket %d is short (%zu of %zu) but not the last", k, b->n,
                   celems);
        end = b->off;
    }
    FUZZ_CHECK(end == 0, "the buckets leave [0, %zu) uncovered", end);
    check_lookups(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) quiet = 1, log_set_level(LOG_LEVEL_ERROR);
    size_t pos = 0;
    const unsigned mode = pos < size ? data[pos++] : 0;
    const size_t esz = (size_t)1 << ((mode >> 2) & 3);
    size_t count = rd16(data, size, &pos) % (MAX_COUNT + 1);
    const size_t first_cap = rd16(data, size, &pos), cap = rd16(data, size, &pos);
    bucket_plan p, q;

    if (mode & 1) {
        const int want = count > 0;
        const dt_status s = bucket_plan_auto(count, esz, first_cap, cap, &p);
        FUZZ_CHECK((s == DT_OK) == want, "bucket_plan_auto(%zu) gave %d", count, (int)s);
        if (s == DT_OK) {
            check_auto(&p, esz, first_cap, cap);
            bucket_plan_free(&p);
        }
        return 0;
    }

    static dt_range r[MAX_RANGES];
    int nr = 0;
    if (mode & 2) {
        /* A tiling: cut points from the input, shuffled by the positions that follow; then one
         * edit (none, or a range grown, shrunk, moved or duplicated) chosen by the mode's top bits. */
        if (count == 0) count = 1;
        size_t cut[MAX_RANGES + 1];
        int ncut = 0;
        while (pos + 2 <= size && ncut < MAX_RANGES - 1) cut[ncut++] = rd16(data, size, &pos) % count;
        cut[ncut++] = 0;
        cut[ncut] = count;
        /* Sorted distinct cuts become the ranges. */
        for (int i = 1; i < ncut; i++)
            for (int j = i; j > 0 && cut[j - 1] > cut[j]; j--) {
                size_t t = cut[j];
                cut[j] = cut[j - 1];
                cut[j - 1] = t;
            }
        for (int i = 0; i < ncut; i++)
            if (cut[i + 1] > cut[i]) r[nr++] = (dt_range){cut[i], cut[i + 1] - cut[i]};
        for (int i = nr - 1; i > 0; i--) { /* shuffle, seeded by the cuts themselves */
            const int j = (int)((cut[i] * 2654435761u + (size_t)i) % (size_t)(i + 1));
            dt_range t = r[i];
            r[i] = r[j];
            r[j] = t;
        }
        const int k = (int)(cut[0] % (size_t)nr);
        switch (mode >> 5) {
            case 1: r[k].count++; break;
            case 2: r[k].count--; break;
            case 3: r[k].offset++; break;
            case 4:
                if (nr < MAX_RANGES) r[nr++] = r[k];
                break;
            default: break;
        }
    } else {
        while (pos < size && nr < MAX_RANGES) {
            const size_t off = rd16(data, size, &pos), n = rd16(data, size, &pos);
            r[nr++] = (dt_range){off, n};
        }
    }

    const int want = tiles(count, r, nr);
    dt_status s = bucket_plan_ranges(count, nr ? r : NULL, nr, esz, first_cap, cap, &p);
    FUZZ_CHECK((s == DT_OK) == want, "%d ranges over %zu elements: %s", nr, count,
               s == DT_OK ? "accepted, but they do not tile the buffer" : dt_last_error());
    if (s != DT_OK) {
        static const bucket_plan zero;
        FUZZ_CHECK(memcmp(&p, &zero, sizeof p) == 0, "a refused plan is not all zero");
        FUZZ_CHECK(s == DT_ERR_INVALID_ARG && strstr(dt_last_error(), "range"),
                   "a refusal (%d) did not say which range: %s", (int)s, dt_last_error());
        return 0;
    }
    check_ranges(&p, r, nr, esz, first_cap, cap);
    FUZZ_CHECK(bucket_plan_ranges(count, r, nr, esz, first_cap, cap, &q) == DT_OK, "the same ranges refused again");
    FUZZ_CHECK(bucket_plan_hash(&p) == bucket_plan_hash(&q), "the same plan hashes differently");
    bucket_plan_free(&q);
    bucket_plan_free(&p);
    return 0;
}
