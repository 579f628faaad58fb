/*
 * hostlist.c - SLURM host lists ("node[01-04,07],login") expanded in-process (see hostlist.h;
 * SLURM_TASKS_PER_NODE's "2(x3),1" in tasks_per_node.c, with the same wording of refusals).
 *
 * Both parsers run in two passes over the string: the first validates everything and counts the
 * output without allocating, so a malformed or oversized list is refused before any memory is
 * taken and the second pass, which fills the output, has only out-of-memory left to fail on.
 */
#include "runtime/placement/hostlist.h"
#include "runtime/placement/hostlist_fail.h"

#include "base/status.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Numbers inside brackets: 18 decimal digits always fit an unsigned long long, and no real
 * cluster numbers its nodes beyond that. */
#define HOSTLIST_MAX_DIGITS 18

/* ================================================================ host lists */

#define HL_KIND "host list"
#define HL_EXAMPLE "comma-separated names such as node[01-04,07],gpu-a[1-2],login"
#define HL_FAIL(...) hostlist_fail(what, HL_KIND, HL_EXAMPLE, s, __VA_ARGS__)

/* What the validating pass learns, to size the expanding pass's buffers exactly. */
typedef struct hostlist_shape {
    size_t total;      /* names in all */
    size_t max_groups; /* most bracket groups in one element */
    size_t max_len;    /* longest name, without the terminator */
} hostlist_shape;

static size_t hostlist_num_digits(unsigned long long v)
{
    size_t d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Reads the run of digits at s[*pos] into *val and advances *pos past it. Returns the number of
 * digits (0 when s[*pos] is not a digit), or -1 when there are more than HOSTLIST_MAX_DIGITS
 * (then *pos is not moved). */
static int hostlist_read_number(const char *s, size_t *pos, unsigned long long *val)
{
    size_t i = *pos;
    unsigned long long v = 0;
    int n = 0;
    while (hostlist_is_digit(s[i])) {
        if (n == HOSTLIST_MAX_DIGITS) return -1;
        v = v * 10 + (unsigned long long)(s[i] - '0');
        n++;
        i++;
    }
    *pos = i;
    *val = v;
    return n;
}

/* Reads one bound of a range inside the group opened at s[open]; `upper` selects the wording of
 * the errors, and rpos is where the range starts. */
static dt_status hostlist_scan_bound(const char *what, const char *s, size_t *pos, size_t open, size_t rpos, int upper,
                                     unsigned long long *val, int *width)
{
    char desc[24];
    size_t i = *pos;
    char c = s[i];
    if (c == '\0') return HL_FAIL("the '[' at position %zu is never closed", open + 1);
    if (c == '[') return HL_FAIL("nested '[' at position %zu (brackets cannot nest)", i + 1);
    if (!upper && (c == ',' || c == ']')) return HL_FAIL("empty range at position %zu", i + 1);
    if (upper && (c == ',' || c == ']'))
        return HL_FAIL("the range at position %zu has no upper bound after its '-'", rpos + 1);
    if (!upper && c == '-') return HL_FAIL("the range at position %zu has no lower bound before its '-'", rpos + 1);
    if (!hostlist_is_digit(c))
        return HL_FAIL("%s at position %zu is not a digit (brackets hold numbers and ranges such as "
                       "01-04)",
                       hostlist_char_desc(c, desc), i + 1);
    int n = hostlist_read_number(s, &i, val);
    if (n < 0)
        return HL_FAIL("the number at position %zu is too large (at most %d digits)", i + 1, HOSTLIST_MAX_DIGITS);
    *width = n;
    *pos = i;
    return DT_OK;
}

/* Counts of names and bytes saturate here: only "over a limit" matters past it, and it is far above
 * both limits. */
#define HOSTLIST_SAT (1ULL << 62)

static unsigned long long hostlist_sat_add(unsigned long long a, unsigned long long b)
{
    return (a >= HOSTLIST_SAT || b >= HOSTLIST_SAT - a) ? HOSTLIST_SAT : a + b;
}

static unsigned long long hostlist_sat_mul(unsigned long long a, unsigned long long b)
{
    if (a == 0 || b == 0) return 0;
    return (a >= HOSTLIST_SAT || b >= HOSTLIST_SAT / a) ? HOSTLIST_SAT : a * b;
}

/* Characters that the numbers lo..hi take when printed at least `width` wide (zero padded). */
static unsigned long long hostlist_range_chars(unsigned long long lo, unsigned long long hi, int width)
{
    unsigned long long sum = 0, first = 0, last = 9; /* the numbers of d digits: [first, last] */
    for (int d = 1; d <= HOSTLIST_MAX_DIGITS && first <= hi; d++) {
        const unsigned long long a = lo > first ? lo : first, b = hi < last ? hi : last;
        if (a <= b)
            sum = hostlist_sat_add(sum, hostlist_sat_mul(b - a + 1, (unsigned long long)(d > width ? d : width)));
        first = last + 1;
        last = last * 10 + 9;
    }
    return sum;
}

/* What one bracket group expands to: its numbers, the characters they print, the widest. */
typedef struct hostlist_group_size {
    unsigned long long numbers, chars;
    size_t width;
} hostlist_group_size;

/* Scans the group opened at s[*pos] ('['), up to and past its ']', into *g. */
static dt_status hostlist_scan_group(const char *what, const char *s, size_t *pos, hostlist_group_size *g)
{
    char desc[24];
    size_t i = *pos;
    const size_t open = i++;
    *g = (hostlist_group_size){0};
    for (;;) {
        const size_t rpos = i;
        unsigned long long lo = 0, hi = 0;
        int wlo = 0, whi = 0;
        dt_status st = hostlist_scan_bound(what, s, &i, open, rpos, 0, &lo, &wlo);
        if (st != DT_OK) return st;
        hi = lo;
        if (s[i] == '-') {
            i++;
            st = hostlist_scan_bound(what, s, &i, open, rpos, 1, &hi, &whi);
            if (st != DT_OK) return st;
            if (hi < lo)
                return HL_FAIL("the range %.*s at position %zu is descending", (int)(i - rpos), s + rpos, rpos + 1);
        }
        g->numbers = hostlist_sat_add(g->numbers, hi - lo + 1);
        g->chars = hostlist_sat_add(g->chars, hostlist_range_chars(lo, hi, wlo));
        /* Padding comes from the lower bound's text; the upper bound may be wider. */
        size_t w = hostlist_num_digits(hi);
        if ((size_t)wlo > w) w = (size_t)wlo;
        if (w > g->width) g->width = w;

        const char c = s[i];
        if (c == ',') {
            i++;
            continue;
        }
        if (c == ']') {
            *pos = i + 1;
            return DT_OK;
        }
        if (c == '\0') return HL_FAIL("the '[' at position %zu is never closed", open + 1);
        if (c == '[') return HL_FAIL("nested '[' at position %zu (brackets cannot nest)", i + 1);
        if (c == '-') return HL_FAIL("the range at position %zu has more than one '-'", rpos + 1);
        return HL_FAIL("%s at position %zu is not a digit (brackets hold numbers and "
                       "ranges such as 01-04)",
                       hostlist_char_desc(c, desc), i + 1);
    }
}

/* What one element (up to the next ',' or the end) expands to. */
typedef struct hostlist_element {
    unsigned long long count; /* names */
    unsigned long long chars; /* characters of those names, terminators not counted */
    size_t groups, len;       /* its bracket groups; its longest name */
} hostlist_element;

/* Scans the element that starts at s[*pos] into *e, leaving *pos at the ',' or the end after it. */
static dt_status hostlist_scan_element(const char *what, const char *s, size_t *pos, hostlist_element *e)
{
    char desc[24];
    size_t i = *pos;
    *e = (hostlist_element){.count = 1};
    while (s[i] != '\0' && s[i] != ',') {
        const char c = s[i];
        const unsigned char u = (unsigned char)c;
        if (c == '[') {
            hostlist_group_size g;
            const dt_status st = hostlist_scan_group(what, s, &i, &g);
            if (st != DT_OK) return st;
            e->groups++;
            e->len += g.width;
            /* Each name so far is followed by each of the group's numbers. */
            e->chars = hostlist_sat_add(hostlist_sat_mul(e->chars, g.numbers), hostlist_sat_mul(g.chars, e->count));
            e->count = hostlist_sat_mul(e->count, g.numbers);
        } else if (c == ']') {
            return HL_FAIL("the ']' at position %zu has no matching '['", i + 1);
        } else if (u <= 0x20 || u == 0x7f) {
            /* A blank or control character can never be part of a host name; it is almost always
             * a quoting mistake, better caught here than by a failed connection. */
            return HL_FAIL("%s at position %zu cannot be part of a host name", hostlist_char_desc(c, desc), i + 1);
        } else {
            e->len++;
            e->chars = hostlist_sat_add(e->chars, e->count);
            i++;
        }
    }
    *pos = i;
    return DT_OK;
}

/* Pass 1: validates the whole list and measures it, allocating nothing. */
static dt_status hostlist_scan(const char *what, const char *s, hostlist_shape *shape)
{
    size_t i = 0;
    unsigned long long total = 0, bytes = 0;

    shape->total = shape->max_groups = shape->max_len = 0;
    if (s[0] == '\0') return HL_FAIL("it is empty");
    for (;;) {
        const size_t start = i;
        hostlist_element e;
        const dt_status st = hostlist_scan_element(what, s, &i, &e);
        if (st != DT_OK) return st;
        if (i == start)
            return HL_FAIL("empty element at position %zu (a comma at the start or end, or two in a "
                           "row)",
                           i + 1);
        total = hostlist_sat_add(total, e.count);
        if (total > HOSTLIST_MAX_ENTRIES)
            return HL_FAIL("it expands to more than %d names (the limit is passed by the element at "
                           "position %zu)",
                           HOSTLIST_MAX_ENTRIES, start + 1);
        /* What the output takes: the names, their terminators and the array of pointers. */
        bytes = hostlist_sat_add(bytes, hostlist_sat_add(e.chars, hostlist_sat_mul(e.count, 1 + sizeof(char *))));
        if (bytes > HOSTLIST_MAX_BYTES)
            return HL_FAIL("it expands to more than %d MiB of names (the limit is passed by the element at "
                           "position %zu: %llu names of up to %zu characters); real clusters' lists take a "
                           "few MiB at most",
                           HOSTLIST_MAX_BYTES >> 20, start + 1, e.count, e.len);
        if (e.groups > shape->max_groups) shape->max_groups = e.groups;
        if (e.len > shape->max_len) shape->max_len = e.len;
        if (s[i] == '\0') break;
        i++; /* the comma */
    }
    shape->total = (size_t)total;
    return DT_OK;
}

/* Where one bracket group stands during expansion. The group's text is known valid. */
typedef struct hostlist_group {
    size_t first;           /* index of its first range, just after the '[' */
    size_t next;            /* index just after the current range: ',' or ']' */
    unsigned long long val; /* current number */
    unsigned long long hi;  /* last number of the current range */
    int width;              /* zero padding of the current range */
} hostlist_group;

/* Makes the range starting at s[pos] the group's current one, at its lower bound. */
static void hostlist_group_load(const char *s, hostlist_group *g, size_t pos)
{
    unsigned long long lo = 0, hi = 0; /* always read: the text was validated by pass 1 */
    size_t i = pos;
    int w = hostlist_read_number(s, &i, &lo);
    hi = lo;
    if (s[i] == '-') {
        i++;
        (void)hostlist_read_number(s, &i, &hi);
    }
    g->val = lo;
    g->hi = hi;
    g->width = w;
    g->next = i;
}

/* Pass 2's state: the validated list, its groups, the names written so far, and the buffer each
 * name is composed in before it is copied out. */
typedef struct hostlist_writer {
    const char *s;
    hostlist_group *groups; /* the current element's, in order */
    char *buf;
    size_t cap; /* buf's size: the longest name and its terminator */
    char **names;
    size_t k;     /* names written */
    size_t total; /* names pass 1 counted: names[] holds no more */
} hostlist_writer;

/* Loads the groups of the element that starts at s[*pos] at their first numbers, leaving *pos at
 * the ',' or the end after it. Returns how many groups it has. */
static size_t hostlist_element_groups(const char *s, size_t *pos, hostlist_group *groups)
{
    size_t i = *pos, ng = 0;
    while (s[i] != '\0' && s[i] != ',') {
        if (s[i] == '[') {
            groups[ng].first = i + 1;
            hostlist_group_load(s, &groups[ng], i + 1);
            ng++;
            while (s[i] != ']') i++;
        }
        i++;
    }
    *pos = i;
    return ng;
}

/* Composes in w->buf the name the element s[start, end) stands for at its groups' current
 * numbers. Returns its length. */
static size_t hostlist_compose(hostlist_writer *w, size_t start, size_t end)
{
    size_t len = 0, g = 0;
    for (size_t j = start; j < end; j++) {
        if (w->s[j] == '[') {
            len += (size_t)snprintf(w->buf + len, w->cap - len, "%0*llu", w->groups[g].width, w->groups[g].val);
            g++;
            while (w->s[j] != ']') j++;
        } else {
            w->buf[len++] = w->s[j];
        }
    }
    w->buf[len] = '\0';
    return len;
}

/* Turns the odometer over the ng groups by one name, the last group turning fastest, as SLURM
 * orders them. Returns 0 once every group wrapped around: the element's names are all written. */
static int hostlist_odometer_turn(const char *s, hostlist_group *groups, size_t ng)
{
    for (size_t t = ng; t > 0; t--) {
        hostlist_group *gr = &groups[t - 1];
        if (gr->val < gr->hi) {
            gr->val++;
            return 1;
        }
        if (s[gr->next] == ',') {
            hostlist_group_load(s, gr, gr->next + 1);
            return 1;
        }
        hostlist_group_load(s, gr, gr->first); /* wrap around and carry */
    }
    return 0;
}

/* Writes every name of the element s[start, end), whose ng groups are loaded. Returns 1, 0 when out
 * of memory, -1 when the element has more names than pass 1 counted (a bug, never a bad input:
 * names[] ends there); the names written so far stay in w. */
static int hostlist_expand_element(hostlist_writer *w, size_t start, size_t end, size_t ng)
{
    do {
        if (w->k == w->total) return -1;
        const size_t len = hostlist_compose(w, start, end);
        w->names[w->k] = malloc(len + 1);
        if (w->names[w->k] == NULL) return 0;
        memcpy(w->names[w->k], w->buf, len + 1);
        w->k++;
    } while (hostlist_odometer_turn(w->s, w->groups, ng));
    return 1;
}

/* Pass 2: writes every name of the validated list s into names[0 .. shape->total). On failure the
 * names written so far are freed; the array itself stays the caller's. */
static dt_status hostlist_expand(const char *s, const hostlist_shape *shape, char **names)
{
    size_t ngroups_max = shape->max_groups > 0 ? shape->max_groups : 1;
    hostlist_writer w = {.s = s,
                         .groups = malloc(ngroups_max * sizeof *w.groups),
                         .buf = malloc(shape->max_len + 1),
                         .cap = shape->max_len + 1,
                         .names = names,
                         .total = shape->total};
    int ok = w.groups != NULL && w.buf != NULL;
    for (size_t i = 0; ok; i++) { /* i++ steps over the comma */
        const size_t start = i;
        const size_t ng = hostlist_element_groups(s, &i, w.groups);
        ok = hostlist_expand_element(&w, start, i, ng);
        if (ok < 0 || s[i] == '\0') break;
    }
    free(w.groups);
    free(w.buf);
    if (ok == 0) {
        for (size_t j = 0; j < w.k; j++) free(names[j]);
        return status_set_error(DT_ERR_NOMEM, "out of memory expanding a host list of %zu names", shape->total);
    }
    if (ok < 0 || w.k != shape->total) { /* the two passes disagree: a bug, never a bad input */
        for (size_t j = 0; j < w.k; j++) free(names[j]);
        return status_set_error(DT_ERR_INTERNAL, "host list '%.200s': expanded %zu names, counted %zu", s, w.k,
                                shape->total);
    }
    return DT_OK;
}

dt_status hostlist_parse(const char *what, const char *s, char ***names, int *count)
{
    if (names == NULL || count == NULL)
        return status_set_error(DT_ERR_INTERNAL, "hostlist_parse called with a NULL output pointer");
    *names = NULL;
    *count = 0;
    if (s == NULL) return status_set_error(DT_ERR_ENV, "%s is not set", what != NULL ? what : HL_KIND);

    hostlist_shape shape;
    dt_status st = hostlist_scan(what, s, &shape);
    if (st != DT_OK) return st;
    char **out = malloc(shape.total * sizeof *out);
    if (out == NULL)
        return status_set_error(DT_ERR_NOMEM, "out of memory expanding a host list of %zu names", shape.total);
    st = hostlist_expand(s, &shape, out);
    if (st != DT_OK) {
        free(out); /* hostlist_expand already freed the names in it */
        return st;
    }
    *names = out;
    *count = (int)shape.total;
    return DT_OK;
}

void hostlist_free(char **names, int count)
{
    if (names == NULL) return;
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}
