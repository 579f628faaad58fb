/*
 * hostlist_fail.c - the wording of the SLURM list parsers' refusals (hostlist_fail.h).
 */
#include "runtime/placement/hostlist_fail.h"

#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Inputs are quoted in full in messages up to this length; the 2 KiB last-error buffer must keep
 * room for the explanation that follows the quote. Positions still refer to the full string. */
#define HOSTLIST_MAX_QUOTED 1000

/* Describes one character for a message: printable ones quoted, others by code, so a stray
 * tab or newline is visible. */
const char *hostlist_char_desc(char c, char buf[24])
{
    unsigned char u = (unsigned char)c;
    if (u == ' ')
        snprintf(buf, 24, "a blank");
    else if (u > 0x20 && u < 0x7f)
        snprintf(buf, 24, "'%c'", c);
    else
        snprintf(buf, 24, "character 0x%02x", u);
    return buf;
}

dt_status hostlist_fail(const char *what, const char *kind, const char *example, const char *s, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);

    size_t n = strlen(s);
    int shown = n > HOSTLIST_MAX_QUOTED ? HOSTLIST_MAX_QUOTED : (int)n;
    const char *cut = n > HOSTLIST_MAX_QUOTED ? "..." : "";
    if (what != NULL)
        return status_set_error(DT_ERR_ENV, "%s='%.*s%s' is not a valid %s: %s (expected %s)", what, shown, s, cut,
                                kind, reason, example);
    return status_set_error(DT_ERR_ENV, "%s '%.*s%s' is not valid: %s (expected %s)", kind, shown, s, cut, reason,
                            example);
}
