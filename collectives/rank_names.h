/*
 * rank_names.h - ranks named with their nodes, for the watchdog's verdicts: "4,5 on node3" tells
 * an operator which machine to look at (its link, its processes), which a rank number alone does
 * not once a job spans nodes.
 */
#ifndef DT_COLLECTIVES_RANK_NAMES_H
#define DT_COLLECTIVES_RANK_NAMES_H

#include "dtrain.h"

#include <stddef.h>

/* The node of a rank, for rank_names_format: its name, or NULL when unknown. */
typedef const char *(*rank_node_fn)(const void *arg, int rank);

/* Writes the n ranks as "4,5 on node3", grouping runs of consecutive entries on one node:
 * "0 on node1, 2,3 on node2"; a rank whose node is unknown (node_of NULL, or it returns NULL) is
 * written alone ("1,3"; "1, 4 on node3" before a known one). Never overflows out (cap bytes,
 * cap >= 8): a list too long ends in "...". Returns out. */
char *rank_names_format(rank_node_fn node_of, const void *arg, const int *ranks, int n, char *out, size_t cap);

/* rank_names_format with the nodes of a context (ctx_rank_node); ctx NULL names ranks only. */
char *rank_names_ctx(const dt_ctx *ctx, const int *ranks, int n, char *out, size_t cap);

#endif
