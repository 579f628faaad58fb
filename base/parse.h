/*
 * parse.h - strict parsing of numbers taken from environment variables and command-line flags.
 *
 * A launcher variable such as SLURM_PROCID=" 3" or DTRAIN_TIMEOUT="10s" must fail loudly instead of
 * being half-read by atoi/strtol: the whole string has to be a decimal number inside [lo, hi].
 * These are the one parser of numbers for variables and flags alike, so "\t1" or "0x1p3" is refused
 * the same way as DTRAIN_TIMEOUT and as --timeout.
 *
 * name is the variable ("SLURM_PROCID") or the flag ("--timeout": any name that starts with '-').
 * Every failure goes through status_set_error() with a message that names it, quotes the exact value
 * (SLURM_PROCID='abc', --timeout 'abc') and says what was expected, and leaves *out untouched. The
 * status is DT_ERR_ENV for a variable and DT_ERR_INVALID_ARG for a flag; a NULL value reads "NAME is
 * not set" or "--flag needs a value".
 */
#ifndef DT_BASE_PARSE_H
#define DT_BASE_PARSE_H

#include "dtrain.h"

/* Parses value as a decimal integer in [lo, hi] into *out.
 * Accepted: an optional '+' or '-' followed by one or more digits 0-9, nothing else (no blanks,
 * no hex, no trailing text). lo > hi, or name/out NULL, is a caller bug and fails with
 * DT_ERR_INTERNAL. */
dt_status parse_long(const char *name, const char *value, long lo, long hi, long *out);
/* parse_long into an int: lo and hi are clamped to the range of int. */
dt_status parse_int(const char *name, const char *value, long lo, long hi, int *out);

/* Parses value as a finite decimal floating-point number in [lo, hi] into *out.
 * Accepted: an optional sign, digits with an optional '.' and fraction (at least one digit in
 * all), then an optional exponent e/E, optional sign, digits: "600", "0.5", ".5", "1e3", "-2.5E-1".
 * Rejected: blanks, hex ("0x1p3"), "nan", "inf", trailing text, and values too large or too small
 * in magnitude for a double. Uses strtod, so the decimal point is '.' only under the C locale,
 * which is what a library process has unless the application calls setlocale(). */
dt_status parse_double(const char *name, const char *value, double lo, double hi, double *out);

/* parse_double for a setting where 0 turns something off and other values must be in [lo, hi]
 * (lo > 0): --timeout is 0 (never) or 1 to 1e7 seconds. zero_means words the 0 in messages
 * ("expected 0 (never) or a number from 1 to 10000000"); NULL reads "off". */
dt_status parse_double_or_zero(const char *name, const char *value, double lo, double hi, const char *zero_means,
                               double *out);

/* Parses value as a step range "A:B" (two integers as parse_long takes them, joined by one ':')
 * with 1 <= A <= B <= max into *first and *last: --trace-steps 2:3 is steps 2 and 3. A failure
 * names the value and says what was expected; *first and *last are then untouched. */
dt_status parse_step_range(const char *name, const char *value, long max, long *first, long *last);

#endif
