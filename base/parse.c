/*
 * parse.c - strict decimal parsing of environment-variable and flag values (see parse.h).
 *
 * The syntax is checked by hand before strtol/strtod run, because those functions accept leading
 * whitespace, hex prefixes, "nan"/"inf" and stop quietly at trailing garbage; a value that
 * SLURM_PROCID or DTRAIN_TIMEOUT was not meant to hold must be reported, not silently truncated.
 * Flags (a name that starts with '-') go through the same checks as variables, so a value is taken
 * or refused alike wherever it is given; only the wording and the status code differ.
 */
#include "base/parse.h"

#include "base/status.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Values are quoted in full in messages, up to this many characters: the last-error buffer is
 * 2 KiB and the "expected ..." part after the value must not be cut off. */
#define PARSE_MAX_QUOTED 200

static int parse_is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Why a value that fails the syntax check failed, worded for the message. */
static const char *parse_syntax_reason(const char *value, const char *what)
{
    size_t n = strlen(value);
    if (n == 0) return "is empty";
    /* Blanks are the most common mistake (quoted shell assignments); name them explicitly. */
    if (parse_is_space(value[0]) || parse_is_space(value[n - 1])) return "has leading or trailing whitespace";
    return what;
}

/* Quotes at most PARSE_MAX_QUOTED characters of value, marking a cut with "...". */
static int parse_quoted_len(const char *value)
{
    return strlen(value) > PARSE_MAX_QUOTED ? PARSE_MAX_QUOTED : (int)strlen(value);
}

static const char *parse_quoted_tail(const char *value) { return strlen(value) > PARSE_MAX_QUOTED ? "..." : ""; }

/* A flag is quoted as typed on the command line ("--timeout 'x'"), a variable as assigned
 * ("DTRAIN_TIMEOUT='x'"). */
static int parse_is_flag(const char *name) { return name[0] == '-'; }
static const char *parse_joiner(const char *name) { return parse_is_flag(name) ? " " : "="; }
static const char *parse_unset(const char *name) { return parse_is_flag(name) ? "needs a value" : "is not set"; }

/* A bad flag is bad usage; a bad variable, a bad environment. */
static dt_status parse_bad(const char *name) { return parse_is_flag(name) ? DT_ERR_INVALID_ARG : DT_ERR_ENV; }

/* True when s is [+-]?[0-9]+ and nothing else. */
static int parse_int_syntax_ok(const char *s)
{
    if (*s == '+' || *s == '-') s++;
    if (!parse_is_digit(*s)) return 0;
    while (parse_is_digit(*s)) s++;
    return *s == '\0';
}

dt_status parse_long(const char *name, const char *value, long lo, long hi, long *out)
{
    if (name == NULL || out == NULL)
        return status_set_error(DT_ERR_INTERNAL, "parse_long called with a NULL %s",
                                name == NULL ? "name" : "output pointer");
    if (lo > hi) return status_set_error(DT_ERR_INTERNAL, "parse_long(%s): empty range [%ld, %ld]", name, lo, hi);
    if (value == NULL)
        return status_set_error(parse_bad(name), "%s %s (expected an integer from %ld to %ld)", name, parse_unset(name),
                                lo, hi);

    if (!parse_int_syntax_ok(value))
        return status_set_error(parse_bad(name), "%s%s'%.*s%s' %s (expected an integer from %ld to %ld)", name,
                                parse_joiner(name), parse_quoted_len(value), value, parse_quoted_tail(value),
                                parse_syntax_reason(value, "is not a whole number"), lo, hi);

    /* The syntax is known good, so strtol reads every character; ERANGE is its only failure. */
    errno = 0;
    long v = strtol(value, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        return status_set_error(parse_bad(name), "%s%s'%.*s%s' is out of range (expected an integer from %ld to %ld)",
                                name, parse_joiner(name), parse_quoted_len(value), value, parse_quoted_tail(value), lo,
                                hi);
    *out = v;
    return DT_OK;
}

dt_status parse_int(const char *name, const char *value, long lo, long hi, int *out)
{
    if (name == NULL || out == NULL)
        return status_set_error(DT_ERR_INTERNAL, "parse_int called with a NULL %s",
                                name == NULL ? "name" : "output pointer");
    /* *out is an int: a wider bound could accept a value that does not fit. */
    if (lo < INT_MIN) lo = INT_MIN;
    if (hi > INT_MAX) hi = INT_MAX;
    if (lo > hi) return status_set_error(DT_ERR_INTERNAL, "parse_int(%s): empty range [%ld, %ld]", name, lo, hi);
    long v = 0;
    dt_status s = parse_long(name, value, lo, hi, &v);
    if (s == DT_OK) *out = (int)v;
    return s;
}

/* True when s is [+-]?(digits[.digits*]|.digits)([eE][+-]?digits)? and nothing else. */
static int parse_double_syntax_ok(const char *s)
{
    int mantissa_digits = 0;
    if (*s == '+' || *s == '-') s++;
    while (parse_is_digit(*s)) {
        s++;
        mantissa_digits++;
    }
    if (*s == '.') {
        s++;
        while (parse_is_digit(*s)) {
            s++;
            mantissa_digits++;
        }
    }
    if (mantissa_digits == 0) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!parse_is_digit(*s)) return 0;
        while (parse_is_digit(*s)) s++;
    }
    return *s == '\0';
}

/* True for the spellings strtod would turn into a NaN or an infinity, to say "not finite" rather
 * than the vaguer "not a number" for them. */
static int parse_is_nonfinite_word(const char *s)
{
    if (*s == '+' || *s == '-') s++;
    return strncasecmp(s, "nan", 3) == 0 || strncasecmp(s, "inf", 3) == 0;
}

/* parse_double and parse_double_or_zero: zero_means NULL for the plain range [lo, hi]. */
static dt_status parse_double_in(const char *name, const char *value, double lo, double hi, const char *zero_means,
                                 double *out)
{
    if (name == NULL || out == NULL)
        return status_set_error(DT_ERR_INTERNAL, "parse_double called with a NULL %s",
                                name == NULL ? "name" : "output pointer");
    if (!(lo <= hi)) /* also catches a NaN bound */
        return status_set_error(DT_ERR_INTERNAL, "parse_double(%s): empty range [%g, %g]", name, lo, hi);
    char expected[160];
    if (zero_means)
        snprintf(expected, sizeof expected, "0 (%s) or a number from %.15g to %.15g", zero_means, lo, hi);
    else
        snprintf(expected, sizeof expected, "a number from %.15g to %.15g", lo, hi);
    if (value == NULL)
        return status_set_error(parse_bad(name), "%s %s (expected %s)", name, parse_unset(name), expected);

    if (!parse_double_syntax_ok(value)) {
        const char *why = parse_is_nonfinite_word(value) ? "is not a finite number" : "is not a number";
        return status_set_error(parse_bad(name), "%s%s'%.*s%s' %s (expected %s)", name, parse_joiner(name),
                                parse_quoted_len(value), value, parse_quoted_tail(value),
                                parse_syntax_reason(value, why), expected);
    }

    /* ERANGE covers both overflow (1e999) and underflow (1e-999): neither is the value the user
     * wrote, so both are reported instead of being rounded to infinity or zero. */
    errno = 0;
    double v = strtod(value, NULL);
    if (errno == ERANGE)
        return status_set_error(parse_bad(name),
                                "%s%s'%.*s%s' is out of range: too large or too small in magnitude for a "
                                "double (expected %s)",
                                name, parse_joiner(name), parse_quoted_len(value), value, parse_quoted_tail(value),
                                expected);
    if (!isfinite(v) || ((v < lo || v > hi) && !(zero_means && v == 0)))
        return status_set_error(parse_bad(name), "%s%s'%.*s%s' is out of range (expected %s)", name, parse_joiner(name),
                                parse_quoted_len(value), value, parse_quoted_tail(value), expected);
    *out = v;
    return DT_OK;
}

dt_status parse_double(const char *name, const char *value, double lo, double hi, double *out)
{
    return parse_double_in(name, value, lo, hi, NULL, out);
}

dt_status parse_double_or_zero(const char *name, const char *value, double lo, double hi, const char *zero_means,
                               double *out)
{
    return parse_double_in(name, value, lo, hi, zero_means ? zero_means : "off", out);
}

dt_status parse_step_range(const char *name, const char *value, long max, long *first, long *last)
{
    if (name == NULL || first == NULL || last == NULL || max < 1)
        return status_set_error(DT_ERR_INTERNAL, "parse_step_range called with a NULL argument or max %ld", max);
    if (value == NULL)
        return status_set_error(parse_bad(name), "%s %s (expected FIRST:LAST, such as 2:3)", name, parse_unset(name));
    const char *colon = strchr(value, ':');
    char a[32], b[32];
    const size_t na = colon ? (size_t)(colon - value) : 0, nb = colon ? strlen(colon + 1) : 0;
    long lo = 0, hi = 0;
    int ok = colon && na && nb && na < sizeof a && nb < sizeof b;
    if (ok) {
        memcpy(a, value, na), a[na] = '\0';
        memcpy(b, colon + 1, nb), b[nb] = '\0';
        ok = parse_int_syntax_ok(a) && parse_int_syntax_ok(b);
    }
    if (ok) {
        errno = 0;
        lo = strtol(a, NULL, 10);
        hi = strtol(b, NULL, 10);
        ok = errno == 0;
    }
    if (!ok)
        return status_set_error(parse_bad(name),
                                "%s%s'%.*s%s' is not a step range (expected FIRST:LAST, two whole numbers such as 2:3; "
                                "steps count from 1)",
                                name, parse_joiner(name), parse_quoted_len(value), value, parse_quoted_tail(value));
    if (lo < 1 || hi < lo)
        return status_set_error(parse_bad(name), "%s%s'%.*s%s': %s (expected 1 <= FIRST <= LAST; steps count from 1)",
                                name, parse_joiner(name), parse_quoted_len(value), value, parse_quoted_tail(value),
                                lo < 1 ? "the first step is below 1" : "the last step is before the first");
    if (hi > max)
        return status_set_error(parse_bad(name), "%s%s'%.*s%s': the last step is above %ld", name, parse_joiner(name),
                                parse_quoted_len(value), value, parse_quoted_tail(value), max);
    *first = lo;
    *last = hi;
    return DT_OK;
}
