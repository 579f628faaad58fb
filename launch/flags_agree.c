/*
 * flags_agree.c - a command's flags compared across the ranks before it starts (cli.h).
 *
 * Every rank parses its own command line. A launcher gives them one, but a wrapper script that
 * computes a flag per rank, an MPMD line or a node with another job script can give ranks
 * different ones, and a command that runs on the job then went wrong in ways that did not point
 * at the cause: ranks waiting in collectives the others never join until the watchdog's deadline
 * (another --steps, --iters, --no-comm), rows that mix two settings under rank 0's header (another
 * --batch, --n, --eval-data), or a verdict that blames the library ("the allreduce is broken" for
 * another --op). Each command writes the flags that must agree as text, one "--flag value" line
 * each (cli_flags_line), and cli_flags_agree compares that text across the ranks.
 */
#include "launch/cli.h"
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_flags_line(cli_flags_text *a, const char *fmt, ...)
{
    if (a->len >= sizeof a->s) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(a->s + a->len, sizeof a->s - a->len, fmt, ap);
    va_end(ap);
    if (n > 0) a->len += (size_t)n;
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
    for (int digits = 6; digits < 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, v);
        const double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) break;
    }
    return buf;
}

/* The first line where a and b differ (its start in each), or -1. */
static int first_different_line(const char *a, const char *b, const char **la, const char **lb)
{
    const char *p = a, *q = b;
    for (int k = 0; *p || *q; k++) {
        const char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
        const size_t pn = pe ? (size_t)(pe - p) : strlen(p), qn = qe ? (size_t)(qe - q) : strlen(q);
        if (pn != qn || memcmp(p, q, pn) != 0) {
            *la = p, *lb = q;
            return k;
        }
        p += pn + (pe != NULL), q += qn + (qe != NULL);
    }
    return -1;
}

static int line_len(const char *l)
{
    const char *e = strchr(l, '\n');
    return (int)(e ? (size_t)(e - l) : strlen(l));
}

int cli_flags_agree(dt_ctx *ctx, const char *what, const cli_flags_text *text, int *shared)
{
    *shared = 0;
    if (dt_world_size(ctx) <= 1) return EXIT_OK;
    /* The whole buffer, zero past the text, so every rank compares the same number of bytes. */
    cli_flags_text zero = {{0}, 0}, other;
    memcpy(zero.s, text->s, text->len < sizeof zero.s ? text->len : sizeof zero.s - 1);
    int differ = 0, first = -1;
    dt_status s = dt_check_replicas(ctx, zero.s, sizeof zero.s, &differ, &first);
    if (s == DT_ERR_NUMERIC) {
        /* Some rank differs (every rank knows which is first): rank 0's text and that rank's reach
         * every rank, so that each words the same verdict, said once for all. Failure path only. */
        other = zero;
        if (!(s = dt_broadcast(ctx, zero.s, sizeof zero.s, DT_U8, 0)))
            s = dt_broadcast(ctx, other.s, sizeof other.s, DT_U8, first);
        if (!s) {
            zero.s[sizeof zero.s - 1] = other.s[sizeof other.s - 1] = '\0';
            const char *l0 = "", *lf = "";
            first_different_line(zero.s, other.s, &l0, &lf);
            char more[48] = "";
            if (differ > 1) snprintf(more, sizeof more, " (%d ranks differ from rank 0)", differ);
            s = status_mark_shared(status_set_error(DT_ERR_INVALID_ARG,
                                                    "rank %d was given '%.*s' where rank 0 was given '%.*s'%s: every "
                                                    "rank of a job must get the same %s; start them all with one "
                                                    "command line",
                                                    first, line_len(lf), lf, line_len(l0), l0, more, what));
            return cli_say_shared_failure(ctx, s, NULL, shared);
        }
    }
    if (!s) return EXIT_OK;
    *shared = status_shared(s);
    if (!cli_peer_failure(s)) cli_status_error(NULL, s);
    return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
}
