/*
 * rank_names.c - ranks named with their nodes (see rank_names.h).
 */
#include "collectives/rank_names.h"
#include "collectives/ctx_comm.h"

#include <stdio.h>
#include <string.h>

/* Appends text at *used, or marks the list cut ("...") when it does not fit; 0 once cut. */
static int put(char *out, size_t cap, size_t *used, const char *text)
{
    const size_t len = strlen(text);
    if (*used + len + 4 > cap) {
        snprintf(out + *used, cap - *used, "...");
        *used = cap;
        return 0;
    }
    memcpy(out + *used, text, len + 1);
    *used += len;
    return 1;
}

char *rank_names_format(rank_node_fn node_of, const void *arg, const int *ranks, int n, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *node = node_of ? node_of(arg, ranks[i]) : NULL;
        const char *next = i + 1 < n && node_of ? node_of(arg, ranks[i + 1]) : NULL;
        const int same_as_next = node && next && strcmp(node, next) == 0;
        char item[64];
        snprintf(item, sizeof item, "%d", ranks[i]);
        if (!put(out, cap, &used, item)) break;
        /* A node is named once, after the last rank of its run. */
        if (node && !same_as_next && (!put(out, cap, &used, " on ") || !put(out, cap, &used, node))) break;
        /* ", " ends a node's run; an unknown rank before a known one is kept apart the same way. */
        if (i + 1 < n && !put(out, cap, &used, same_as_next || (!node && !next) ? "," : ", ")) break;
    }
    return out;
}

static const char *ctx_node_of(const void *arg, int rank) { return ctx_rank_node(arg, rank); }

char *rank_names_ctx(const dt_ctx *ctx, const int *ranks, int n, char *out, size_t cap)
{
    return rank_names_format(ctx ? ctx_node_of : NULL, ctx, ranks, n, out, cap);
}
