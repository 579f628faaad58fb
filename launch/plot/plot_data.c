/*
 * plot_data.c - reads a --metrics file back for `dtrain plot` (plot_data.h): a small strict
 * parser of flat JSON objects, so a damaged file is named by line and column, never half drawn.
 */
#include "launch/plot/plot_data.h"

#include "launch/cli.h"
#include "base/io_error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const keys[PLOT_NCOL] = {"loss", "accuracy",      "eval_loss", "eval_accuracy",
                                            "lr",   "samples_per_s", "loss_scale"};

const char *plot_key(int i) { return i >= 0 && i < PLOT_NCOL ? keys[i] : "?"; }

typedef struct cursor {
    const char *s;
    size_t len, at;
    char *why;
    size_t n;
} cursor;

static int fail(cursor *c, const char *what)
{
    snprintf(c->why, c->n, "%s at column %zu", what, c->at + 1);
    return -1;
}

static int peek(const cursor *c) { return c->at < c->len ? (unsigned char)c->s[c->at] : -1; }

/* ch is one of set's characters; never NUL (strchr would find the terminator). */
static int in_set(int ch, const char *set) { return ch > 0 && strchr(set, ch); }

static void blanks(cursor *c)
{
    while (in_set(peek(c), " \t\r")) c->at++;
}

/* A JSON string; its text to out with escapes as written (at most cap-1 bytes, longer ones cut), so
 * a key spelled with an escape ("st\u0065p") is never taken for one of ours. */
static int string(cursor *c, char *out, size_t cap)
{
    if (peek(c) != '"') return fail(c, "expected '\"'");
    c->at++;
    size_t k = 0;
    for (;;) {
        const int ch = peek(c);
        if (ch < 0) return fail(c, "a string not closed");
        if (ch < 0x20) return fail(c, "a control character in a string");
        c->at++;
        if (ch == '"') break;
        if (ch == '\\') {
            const int e = peek(c);
            if (!in_set(e, "\"\\/bfnrtu")) return fail(c, "a bad escape in a string");
            c->at++;
            if (k + 1 < cap) out[k++] = '\\';
            if (k + 1 < cap) out[k++] = (char)e;
            if (e == 'u') {
                for (int i = 0; i < 4; i++, c->at++) {
                    const int h = peek(c);
                    if (!in_set(h, "0123456789abcdefABCDEF")) return fail(c, "a bad \\u escape");
                }
            }
            continue;
        }
        if (k + 1 < cap) out[k++] = (char)ch;
    }
    out[k] = '\0';
    return 0;
}

/* A JSON number, or nan / inf / -nan / -inf (what printf wrote for a diverged value in the metrics
 * of earlier versions; metrics.c now writes null). */
static int number(cursor *c, double *out)
{
    const size_t start = c->at;
    if (peek(c) == '-') c->at++;
    const char *rest = c->s + c->at;
    const size_t left = c->len - c->at;
    if (left >= 3 && (!memcmp(rest, "nan", 3) || !memcmp(rest, "inf", 3))) {
        c->at += 3;
        *out = rest[0] == 'n' ? NAN : (c->s[start] == '-' ? -INFINITY : INFINITY);
        return 0;
    }
    int digits = 0;
    const int lead0 = peek(c) == '0';
    while (peek(c) >= '0' && peek(c) <= '9') c->at++, digits++;
    if (!digits) return fail(c, "expected a number");
    if (lead0 && digits > 1) return fail(c, "a number with a leading zero");
    if (peek(c) == '.') {
        c->at++;
        digits = 0;
        while (peek(c) >= '0' && peek(c) <= '9') c->at++, digits++;
        if (!digits) return fail(c, "expected a digit after '.'");
    }
    if (peek(c) == 'e' || peek(c) == 'E') {
        c->at++;
        if (peek(c) == '+' || peek(c) == '-') c->at++;
        digits = 0;
        while (peek(c) >= '0' && peek(c) <= '9') c->at++, digits++;
        if (!digits) return fail(c, "expected a digit in the exponent");
    }
    char buf[64];
    const size_t k = c->at - start;
    if (k >= sizeof buf) return fail(c, "a number of over 63 characters");
    memcpy(buf, c->s + start, k);
    buf[k] = '\0';
    *out = strtod(buf, NULL);
    return 0;
}

/* Any other value: a string, a number, true, false or null (skipped). */
static int skip_value(cursor *c)
{
    char tmp[2];
    double d;
    const int ch = peek(c);
    if (ch == '"') return string(c, tmp, sizeof tmp);
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        const size_t w = strlen(words[i]);
        if (c->len - c->at >= w && !memcmp(c->s + c->at, words[i], w)) {
            c->at += w;
            return 0;
        }
    }
    if (ch == '{' || ch == '[') return fail(c, "a nested object or array (a metrics record is flat)");
    return number(c, &d);
}

/* One "key": value member of a record into row: a series' number (null: a gap), the step, the
 * precision (*mixed: fp16 or bf16), another key's value skipped. seen: the series and (bit
 * PLOT_NCOL) step, precision (PLOT_NCOL+1) read so far, none of them twice. */
static int parse_member(cursor *c, plot_row *row, unsigned *seen, int *mixed)
{
    char key[32];
    const size_t key_at = c->at;
    if (string(c, key, sizeof key) != 0) return -1;
    blanks(c);
    if (peek(c) != ':') return fail(c, "expected ':' after a key");
    c->at++;
    blanks(c);
    int col = -1;
    for (int i = 0; i < PLOT_NCOL; i++)
        if (!strcmp(key, keys[i])) col = i;
    const int is_step = !strcmp(key, "step"), is_prec = !strcmp(key, "precision");
    const unsigned bit = col >= 0 ? 1u << col : is_step ? 1u << PLOT_NCOL : is_prec ? 1u << (PLOT_NCOL + 1) : 0;
    if (bit & *seen) {
        c->at = key_at;
        snprintf(c->why, c->n, "\"%s\" given twice at column %zu", key, key_at + 1);
        return -1;
    }
    *seen |= bit;
    if (col >= 0 && c->len - c->at >= 4 && !memcmp(c->s + c->at, "null", 4)) {
        /* A non-finite figure (metrics.c writes null: JSON has no NaN): a gap in its series. */
        c->at += 4;
        row->v[col] = NAN;
        row->have |= 1u << col;
    } else if (col >= 0 || is_step) {
        const size_t at = c->at;
        double v;
        if (number(c, &v) != 0) {
            snprintf(c->why, c->n, "\"%s\" is not a number at column %zu", key, at + 1);
            return -1;
        }
        if (is_step) {
            if (!(v >= 0 && v <= 1e15) || v != floor(v)) {
                snprintf(c->why, c->n, "\"step\" %.*s is not a whole number >= 0 at column %zu", (int)(c->at - at),
                         c->s + at, at + 1);
                return -1;
            }
            row->step = (long)v;
        } else {
            row->v[col] = v;
            row->have |= 1u << col;
        }
    } else if (is_prec) {
        char p[16];
        if (peek(c) != '"') return fail(c, "\"precision\" is not a string");
        if (string(c, p, sizeof p) != 0) return -1;
        *mixed = !strcmp(p, "fp16") || !strcmp(p, "bf16");
    } else if (skip_value(c) != 0) {
        return -1;
    }
    return 0;
}

/* The line's one flat JSON object into row (and *mixed), with a step. */
static int parse_record(cursor *c, plot_row *row, int *mixed)
{
    unsigned seen = 0;
    blanks(c);
    if (c->at == c->len) return fail(c, "an empty line where a record should be");
    if (peek(c) != '{') return fail(c, "expected '{' (each line is one JSON object)");
    c->at++;
    blanks(c);
    if (peek(c) == '}') return fail(c, "an empty object, without \"step\"");
    for (;;) {
        blanks(c);
        if (parse_member(c, row, &seen, mixed) != 0) return -1;
        blanks(c);
        if (peek(c) == ',') {
            c->at++;
            continue;
        }
        if (peek(c) == '}') break;
        return fail(c, "expected ',' or '}' after a value");
    }
    c->at++;
    blanks(c);
    if (c->at != c->len) return fail(c, "text after the object");
    if (row->step < 0) {
        snprintf(c->why, c->n, "a record without \"step\"");
        return -1;
    }
    return 0;
}

/* row appended to d, or merged into the last row when it has the same step (an eval record after
 * a training one) as long as no series is given twice. -2: out of memory. */
static int add_row(plot_data *d, const plot_row *row, char *why, size_t n)
{
    plot_row *last = d->n ? &d->rows[d->n - 1] : NULL;
    if (last && row->step < last->step) {
        snprintf(why, n, "step %ld comes after step %ld (steps never go back in a metrics file)", row->step,
                 last->step);
        return -1;
    }
    if (last && row->step == last->step) {
        const unsigned both = last->have & row->have;
        if (both) {
            int i = 0;
            while (!(both & (1u << i))) i++;
            snprintf(why, n, "step %ld has \"%s\" again (the line before gave it)", row->step, keys[i]);
            return -1;
        }
        for (int i = 0; i < PLOT_NCOL; i++)
            if (row->have & (1u << i)) last->v[i] = row->v[i];
        last->have |= row->have;
        return 0;
    }
    if (d->n == d->cap) {
        const size_t cap = d->cap ? d->cap * 2 : 256;
        plot_row *rows = realloc(d->rows, cap * sizeof *rows);
        if (!rows) {
            snprintf(why, n, "out of memory");
            return -2;
        }
        d->rows = rows, d->cap = cap;
    }
    d->rows[d->n++] = *row;
    return 0;
}

int plot_parse_line(plot_data *d, const char *line, size_t len, char *why, size_t n)
{
    cursor c = {line, len, 0, why, n};
    plot_row row = {.step = -1};
    int mixed = 0;
    why[0] = '\0';
    if (parse_record(&c, &row, &mixed) != 0) return -1;
    const int rc = add_row(d, &row, why, n);
    if (rc) return rc;
    d->have |= row.have;
    d->mixed |= mixed;
    return 0;
}

int plot_read(const char *path, plot_data *d)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "r");
    if (!f) {
        const int err = errno;
        char fix[IO_FIX_LEN];
        cli_error("cannot read %s: %s: %s (dtrain train --metrics FILE writes the file to plot)", path, strerror(err),
                  io_error_fix(err, "metrics file", NULL, fix, sizeof fix));
        return -1;
    }
    char *line = NULL, why[256];
    size_t cap = 0;
    long lineno = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        const int whole = line[got - 1] == '\n';
        const size_t len = (size_t)got - whole;
        const int parsed = plot_parse_line(d, line, len, why, sizeof why);
        if (parsed == -1 && !whole && lineno > 1) {
            /* The last line, cut short: a run killed in a write, a full disk, or a run still
             * writing it. The records before it are whole: drawn, and the cut one said
             * (metrics_open drops it on --resume alike). */
            fprintf(stderr,
                    "dtrain: warning: %s: line %ld, the last, is cut short (%s; no newline: a write that was "
                    "interrupted, or a run still writing it): drawn without it\n",
                    path, lineno, why);
            break;
        }
        if (parsed != 0) {
            cli_error("%s: line %ld: %s", path, lineno, why);
            rc = -1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        cli_error("reading %s failed: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    if (!rc && d->n == 0) {
        cli_error("%s holds no step records (%ld line%s): write one with dtrain train --metrics %s", path, lineno,
                  cli_s(lineno), path);
        rc = -1;
    }
    if (rc) plot_data_free(d);
    return rc;
}

void plot_data_free(plot_data *d)
{
    free(d->rows);
    memset(d, 0, sizeof *d);
}
