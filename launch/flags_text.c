/*
 * flags_text.c - the text of a command's flags that every rank must share (cli.h): one
 * "--flag value" line each, made from the parsed values, numbers in their shortest exact form, so
 * that equal settings give equal text and cli_flags_agree (flags_agree.c) can compare the texts.
 */
#include "launch/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cli_flags_line(cli_flags_text *a, const char *fmt, ...)
{
    if (a->len >= sizeof a->s) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(a->s + a->len, sizeof a->s - a->len, fmt, ap);
    va_end(ap);
    /* A line cut at the buffer's end leaves len at the text kept (vsnprintf counts the whole). */
    if (n > 0) a->len = a->len + (size_t)n < sizeof a->s - 1 ? a->len + (size_t)n : sizeof a->s - 1;
    if (a->len < sizeof a->s - 1) a->s[a->len++] = '\n';
}

void cli_flags_path(cli_flags_text *a, const char *flag, const char *path)
{
    if (path)
        cli_flags_line(a, "%s PATH", flag);
    else
        cli_flags_line(a, "no %s", flag);
}

const char *cli_flags_num(char buf[32], double v, int is_float)
{
    /* 17 significant digits read back as any double (and 9 as any float): the loop ends there. */
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, v);
        const double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) break;
    }
    return buf;
}
