/*
 * doctor_rows.c - the rows of doctor's report: adding, merging the rows of many ranks into one
 * row per distinct verdict, and printing them as a table or as JSON (doctor.h).
 */
#include "launch/doctor/doctor.h"

#include "base/json.h"

#include <stdlib.h>
#include <string.h>

const char *doc_level_name(doc_level lv)
{
    static const char *const names[] = {"PASS", "SKIP", "WARN", "FAIL"};
    return lv >= DOC_PASS && lv <= DOC_FAIL ? names[lv] : "?";
}

void doc_list_init(doc_list *l, int world)
{
    memset(l, 0, sizeof *l);
    l->world = world;
}

void doc_list_free(doc_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->rows[i].ranks);
    free(l->rows);
    memset(l, 0, sizeof *l);
}

/* Copies src into dst (cap bytes), cutting a long text with "..." so the cut shows. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    const size_t n = strlen(src);
    if (n < cap) {
        memcpy(dst, src, n + 1);
        return;
    }
    /* Cut before a UTF-8 continuation byte would split a character: back up to its first byte. */
    size_t keep = cap - 4;
    while (keep > 0 && ((unsigned char)src[keep] & 0xC0) == 0x80) keep--;
    memcpy(dst, src, keep);
    memcpy(dst + keep, "...", 4);
}

void doc_append(char *buf, size_t cap, const char *fmt, ...)
{
    const size_t len = strlen(buf);
    /* Already cut (its "..." ends it within a character's bytes of the end): nothing after it. */
    if (len + 7 >= cap && len >= 3 && !memcmp(buf + len - 3, "...", 3)) return;
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (w < 0 || len + (size_t)w < cap) return;
    /* Cut: keep what fits before "...", backed up to a character's first byte. */
    size_t keep = cap - 4;
    while (keep > 0 && ((unsigned char)buf[keep] & 0xC0) == 0x80) keep--;
    memcpy(buf + keep, "...", 4);
}

static doc_row *row_new(doc_list *l)
{
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 16;
        doc_row *r = realloc(l->rows, (size_t)cap * sizeof *r);
        if (!r) {
            l->nomem = 1;
            return NULL;
        }
        l->rows = r;
        l->cap = cap;
    }
    doc_row *r = &l->rows[l->n++];
    memset(r, 0, sizeof *r);
    return r;
}

void doc_vadd(doc_list *l, const char *name, doc_level lv, const char *fix, const char *fmt, va_list ap)
{
    doc_row *r = row_new(l);
    if (!r) return;
    copy_cut(r->name, sizeof r->name, name);
    r->level = lv;
    char seen[2 * DOC_TEXT];
    vsnprintf(seen, sizeof seen, fmt, ap);
    copy_cut(r->seen, sizeof r->seen, seen);
    copy_cut(r->fix, sizeof r->fix, fix ? fix : "");
}

void doc_add(doc_list *l, const char *name, doc_level lv, const char *fix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    doc_vadd(l, name, lv, fix, fmt, ap);
    va_end(ap);
}

static size_t bitmap_bytes(int world) { return ((size_t)world + 7) / 8; }

static int set_rank(doc_list *job, doc_row *r, int rank)
{
    if (rank < 0 || rank >= job->world) return 1;
    if (!r->ranks && !(r->ranks = calloc(bitmap_bytes(job->world), 1))) {
        job->nomem = 1;
        return 0;
    }
    r->ranks[rank / 8] |= (unsigned char)(1u << (rank % 8));
    return 1;
}

void doc_add_ranks(doc_list *job, const int *ranks, int n, const char *name, doc_level lv, const char *fix,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    doc_vadd(job, name, lv, fix, fmt, ap);
    va_end(ap);
    if (job->n == 0 || job->nomem) return;
    doc_row *r = &job->rows[job->n - 1];
    if (strcmp(r->name, name) != 0) return; /* the row was not added */
    for (int i = 0; i < n; i++) set_rank(job, r, ranks[i]);
}

static int same_verdict(const doc_row *a, const doc_row *b)
{
    return a->level == b->level && !strcmp(a->name, b->name) && !strcmp(a->seen, b->seen) && !strcmp(a->fix, b->fix);
}

void doc_merge_rank(doc_list *job, const doc_list *one, int rank)
{
    if (one->nomem) job->nomem = 1;
    for (int i = 0; i < one->n; i++) {
        doc_row *to = NULL;
        for (int j = 0; j < job->n && !to; j++)
            if (job->rows[j].ranks && same_verdict(&job->rows[j], &one->rows[i])) to = &job->rows[j];
        if (!to) {
            if (!(to = row_new(job))) return;
            *to = one->rows[i];
            to->ranks = NULL;
        }
        if (!set_rank(job, to, rank)) return;
    }
}

doc_level doc_worst(const doc_list *l)
{
    doc_level w = DOC_PASS;
    for (int i = 0; i < l->n; i++)
        if (l->rows[i].level > w) w = l->rows[i].level;
    return w;
}

static int has_rank(const doc_row *r, int q) { return (r->ranks[q / 8] >> (q % 8)) & 1; }

void doc_ranks_text(const doc_list *l, const doc_row *r, char *out, size_t n)
{
    if (!n) return;
    out[0] = '\0';
    if (!r->ranks) {
        snprintf(out, n, "job");
        return;
    }
    int count = 0;
    for (int q = 0; q < l->world; q++) count += has_rank(r, q);
    if (count == l->world) {
        snprintf(out, n, "all");
        return;
    }
    size_t len = 0;
    for (int q = 0; q < l->world; q++) {
        if (!has_rank(r, q)) continue;
        int e = q;
        while (e + 1 < l->world && has_rank(r, e + 1)) e++;
        char part[32];
        if (e == q)
            snprintf(part, sizeof part, "%s%d", len ? "," : "", q);
        else
            snprintf(part, sizeof part, "%s%d-%d", len ? "," : "", q, e);
        if (len + strlen(part) + 4 >= n) {
            snprintf(out + len, n - len, "...");
            return;
        }
        len += (size_t)snprintf(out + len, n - len, "%s", part);
        q = e;
    }
}

static void counts(const doc_list *l, int c[4])
{
    memset(c, 0, 4 * sizeof *c);
    for (int i = 0; i < l->n; i++)
        if (l->rows[i].level >= DOC_PASS && l->rows[i].level <= DOC_FAIL) c[l->rows[i].level]++;
}

void doc_print_table(FILE *f, const doc_header *h, const doc_list *l)
{
    fprintf(f, "dtrain doctor %s: %d rank%s on %d node%s, devices: %s\n", h->version, h->world,
            h->world == 1 ? "" : "s", h->nodes, h->nodes == 1 ? "" : "s", h->devices);
    fprintf(f, "%-22s %-6s %-12s %s\n", "CHECK", "STATUS", "RANKS", "SEEN");
    for (int i = 0; i < l->n; i++) {
        const doc_row *r = &l->rows[i];
        char ranks[256];
        doc_ranks_text(l, r, ranks, sizeof ranks);
        fprintf(f, "%-22s %-6s %-12s %s\n", r->name, doc_level_name(r->level), ranks, r->seen);
        if (r->fix[0]) fprintf(f, "%-22s %-6s %-12s fix: %s\n", "", "", "", r->fix);
    }
    if (l->nomem) fprintf(f, "(out of memory: some rows are missing)\n");
    int c[4];
    counts(l, c);
    fprintf(f, "%d pass, %d warn, %d fail, %d skipped: %s\n", c[DOC_PASS], c[DOC_WARN], c[DOC_FAIL], c[DOC_SKIP],
            c[DOC_FAIL]   ? "the job has a problem to fix first (FAIL)"
            : c[DOC_WARN] ? "the job can run; the warnings cost time or may fail later"
                          : "nothing found wrong");
}

void doc_print_json(FILE *f, const doc_header *h, const doc_list *l)
{
    fprintf(f, "{\"dtrain\":");
    json_write_string(f, h->version);
    fprintf(f, ",\"world\":%d,\"nodes\":%d,\"devices\":", h->world, h->nodes);
    json_write_string(f, h->devices);
    fprintf(f, ",\"checks\":[");
    for (int i = 0; i < l->n; i++) {
        const doc_row *r = &l->rows[i];
        const char *dot = strchr(r->name, '.');
        char group[DOC_NAME];
        snprintf(group, sizeof group, "%.*s", dot ? (int)(dot - r->name) : (int)strlen(r->name), r->name);
        fprintf(f, "%s\n{\"name\":", i ? "," : "");
        json_write_string(f, r->name);
        fprintf(f, ",\"group\":");
        json_write_string(f, group);
        fprintf(f, ",\"status\":\"%s\",\"ranks\":",
                r->level == DOC_PASS   ? "pass"
                : r->level == DOC_SKIP ? "skip"
                : r->level == DOC_WARN ? "warn"
                                       : "fail");
        if (!r->ranks) {
            fprintf(f, "\"job\"");
        } else {
            fputc('[', f);
            int first = 1;
            for (int q = 0; q < l->world; q++)
                if (has_rank(r, q)) {
                    fprintf(f, "%s%d", first ? "" : ",", q);
                    first = 0;
                }
            fputc(']', f);
        }
        fprintf(f, ",\"seen\":");
        json_write_string(f, r->seen);
        fprintf(f, ",\"fix\":");
        json_write_string(f, r->fix);
        fputc('}', f);
    }
    int c[4];
    counts(l, c);
    const doc_level w = doc_worst(l);
    fprintf(f, "\n],\"summary\":{\"pass\":%d,\"skip\":%d,\"warn\":%d,\"fail\":%d},\"complete\":%s,\"status\":\"%s\"}\n",
            c[DOC_PASS], c[DOC_SKIP], c[DOC_WARN], c[DOC_FAIL], l->nomem ? "false" : "true",
            w == DOC_FAIL   ? "fail"
            : w == DOC_WARN ? "warn"
                            : "pass");
}
