/*
 * reducer_plan_check.c - a reducer's plan and settings compared across the ranks (reducer_impl.h):
 * every rank must reduce the same buckets of the same buffer the same way, or the collectives
 * would pair wrong buffers and hang. The settings are compared by rank_compare_struct, so that
 * every rank's message names the first differing rank, the setting and both values.
 */
#include "collectives/reducer_impl.h"
#include "collectives/rank_verdict.h"
#include "base/hash.h"
#include "base/status.h"

#include <stdio.h>
#include <string.h>

/* What every rank must give alike, in the order compared: sent as bytes (the ranks of a job run
 * the same build). */
typedef struct plan_fields {
    uint64_t count;  /* elements in the buffer */
    uint64_t ranges; /* a fingerprint of the ranges given (0: none, buckets by size) */
    int64_t nranges;
    int64_t dtype, wire, op;
    double bucket_mb, first_bucket_mb;
    int64_t overlap, memory;
    uint64_t plan; /* bucket_plan_hash: what the settings above made of the buffer */
    int64_t nb;
} plan_fields;

static const char *const field_name[] = {"buffer size", "ranges",          "dtype",   "wire",   "op",
                                         "bucket_mb",   "first_bucket_mb", "overlap", "memory", "bucket plan"};
enum { NFIELDS = sizeof field_name / sizeof *field_name };

static void plan_fields_of(const dt_reducer *r, plan_fields *f)
{
    memset(f, 0, sizeof *f); /* no padding left unset: the struct goes as bytes */
    const bucket_plan *p = &r->plan;
    uint64_t h = p->nr ? FNV1A_OFFSET : 0;
    for (int i = 0; i < p->nr; i++) h = fnv1a_int(fnv1a_int(h, p->r[i].offset, 8), p->r[i].count, 8);
    f->count = r->count;
    f->ranges = h;
    f->nranges = p->nr;
    f->dtype = r->cfg.dtype, f->wire = r->cfg.wire, f->op = r->cfg.op;
    f->bucket_mb = r->cfg.bucket_mb, f->first_bucket_mb = r->cfg.first_bucket_mb;
    f->overlap = r->cfg.overlap, f->memory = r->cfg.memory;
    f->plan = bucket_plan_hash(p);
    f->nb = p->nb;
}

/* 1 + the index of the first field where a and b (plan_fields) differ, 0 when none does. */
static int first_difference(const void *pa, const void *pb)
{
    const plan_fields *a = pa, *b = pb;
    const int differ[NFIELDS] = {a->count != b->count,
                                 a->ranges != b->ranges || a->nranges != b->nranges,
                                 a->dtype != b->dtype,
                                 a->wire != b->wire,
                                 a->op != b->op,
                                 a->bucket_mb != b->bucket_mb,
                                 a->first_bucket_mb != b->first_bucket_mb,
                                 a->overlap != b->overlap,
                                 a->memory != b->memory,
                                 a->plan != b->plan || a->nb != b->nb};
    for (int i = 0; i < NFIELDS; i++)
        if (differ[i]) return i + 1;
    return 0;
}

/* Field i of f as text, for the message. */
static void field_text(const plan_fields *f, int i, char *buf, size_t n)
{
    switch (i) {
        case 0: snprintf(buf, n, "%llu elements", (unsigned long long)f->count); break;
        case 1:
            if (f->nranges == 0)
                snprintf(buf, n, "no ranges (buckets by size)");
            else
                snprintf(buf, n, "%lld ranges (fingerprint %016llx)", (long long)f->nranges,
                         (unsigned long long)f->ranges);
            break;
        case 2: snprintf(buf, n, "%s", dt_dtype_name((dt_dtype)f->dtype)); break;
        case 3: snprintf(buf, n, "%s", dt_dtype_name((dt_dtype)f->wire)); break;
        case 4: snprintf(buf, n, "%s", f->op == DT_SUM ? "DT_SUM" : "DT_AVG"); break;
        case 5: snprintf(buf, n, "%g", f->bucket_mb); break;
        case 6: snprintf(buf, n, "%g", f->first_bucket_mb); break;
        case 7: snprintf(buf, n, "%lld", (long long)f->overlap); break;
        case 8: snprintf(buf, n, "%s", f->memory == DT_MEMORY_DEVICE ? "DT_MEMORY_DEVICE" : "DT_MEMORY_HOST"); break;
        default:
            snprintf(buf, n, "%lld buckets (fingerprint %016llx)", (long long)f->nb, (unsigned long long)f->plan);
            break;
    }
}

dt_status reducer_check_plan_across_ranks(dt_reducer *r, const char *fn, const char *consequence)
{
    plan_fields mine, zero, other;
    plan_fields_of(r, &mine);
    rank_verdict v;
    const dt_status s = rank_compare_struct(r->ctx, &mine, sizeof mine, first_difference, &zero, &other, &v);
    if (s || v.first_rank < 0) return s;
    const int f = v.first_code - 1;
    char v0[64], vr[64];
    field_text(&zero, f, v0, sizeof v0);
    field_text(&other, f, vr, sizeof vr);
    /* Every rank took part in both broadcasts and words the same verdict: shared, so that each
     * ends on its own with it (said once) rather than the job being aborted. */
    return status_mark_shared(status_set_error(
        DT_ERR_INVALID_ARG,
        "%s: rank %d gave %s %s where rank 0 gave %s%s: every rank must give the reducer the same "
        "buffer size, ranges, types, reduction, caps (--bucket-mb / --first-bucket-mb), overlap "
        "and memory kind%s",
        fn, v.first_rank, field_name[f], vr, v0, v.failed > 1 ? " (and other ranks differ too)" : "", consequence));
}
