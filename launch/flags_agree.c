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
 * each (cli_flags_line), and cli_flags_agree compares that text across the ranks
 * (rank_compare_struct: rank 0's text reaches every rank, which names the first line it differs in).
 */
#include "launch/cli.h"
#include "collectives/rank_verdict.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* 1 + the index of the first line where the texts a and b (cli_flags_text) differ, 0 when none. */
static int first_difference(const void *a, const void *b)
{
    const char *la, *lb;
    return 1 + first_different_line(((const cli_flags_text *)a)->s, ((const cli_flags_text *)b)->s, &la, &lb);
}

int cli_flags_agree(dt_ctx *ctx, const char *what, const cli_flags_text *text, int *shared)
{
    *shared = 0;
    if (dt_world_size(ctx) <= 1) return EXIT_OK;
    /* The whole buffer, zero past the text and a NUL at its end, so every rank sends and compares
     * the same bytes. */
    cli_flags_text mine = {{0}, 0}, zero, other;
    memcpy(mine.s, text->s, text->len < sizeof mine.s ? text->len : sizeof mine.s - 1);
    rank_verdict v;
    dt_status s = rank_compare_struct(ctx, &mine, sizeof mine, first_difference, &zero, &other, &v);
    if (!s && v.first_rank < 0) return EXIT_OK;
    if (!s) {
        /* Rank 0's text and the first differing rank's reached every rank, so that each words the
         * same verdict, said once for all. */
        zero.s[sizeof zero.s - 1] = other.s[sizeof other.s - 1] = '\0';
        const char *l0 = "", *lf = "";
        first_different_line(zero.s, other.s, &l0, &lf);
        char more[48] = "";
        if (v.failed > 1) snprintf(more, sizeof more, " (%d ranks differ from rank 0)", v.failed);
        s = status_mark_shared(status_set_error(DT_ERR_INVALID_ARG,
                                                "rank %d was given '%.*s' where rank 0 was given '%.*s'%s: every "
                                                "rank of a job must get the same %s; start them all with one "
                                                "command line",
                                                v.first_rank, line_len(lf), lf, line_len(l0), l0, more, what));
        return cli_say_shared_failure(ctx, s, NULL, shared);
    }
    *shared = status_shared(s);
    if (!cli_peer_failure(s)) cli_status_error(NULL, s);
    return s == DT_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
}
