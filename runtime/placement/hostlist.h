/*
 * hostlist.h - in-process parsing of SLURM's compressed host lists and task counts, so that
 * dtrain never has to run `scontrol show hostnames` (which may be missing on compute nodes and
 * costs a round trip to slurmctld per rank).
 *
 * Both parsers are strict: a malformed value fails with DT_ERR_ENV through status_set_error(), with a
 * message that names the variable (`what`, e.g. "SLURM_JOB_NODELIST"), quotes the whole input and
 * says what is wrong at which position (1-based character offset). On failure the output
 * parameters are set to NULL / 0 and nothing stays allocated.
 */
#ifndef DT_RUNTIME_PLACEMENT_HOSTLIST_H
#define DT_RUNTIME_PLACEMENT_HOSTLIST_H

#include "dtrain.h"

/* The most names or task counts one list may expand to: guards against a typo such as
 * node[1-100000000] allocating gigabytes. */
#define HOSTLIST_MAX_ENTRIES 1000000

/* The most bytes one expanded host list may take: its names, their terminators and the array of
 * pointers to them. The count alone does not bound it: one 100,000-character name with [1-1000000]
 * is a million names of 100 KB. 32 MiB holds a million names of 24 characters, while the lists of
 * the largest clusters (~10^5 nodes) take a few MiB. */
#define HOSTLIST_MAX_BYTES (32 << 20)

/* Expands a host list such as "node[01-04,07],gpu-a[1-2],login" into its names, in order
 * (node01 node02 node03 node04 node07 gpu-a1 gpu-a2 login).
 *  - Elements are separated by commas outside brackets; none may be empty.
 *  - A bracket group holds comma-separated numbers or ascending ranges lo-hi ("[5]", "[1-3,7]").
 *    Each number keeps the zero padding of its range's lower bound: n[008-011] -> n008 .. n011,
 *    n[1-10] -> n1 .. n10. Numbers have at most 18 digits.
 *  - Text may follow a group (a[1-2]-ib -> a1-ib a2-ib) and several groups in one element
 *    expand as a cartesian product, the last group varying fastest (r[1-2]n[1-2] -> r1n1 r1n2
 *    r2n1 r2n2).
 *  - Duplicates are kept, as SLURM keeps them.
 *  - Rejected: an empty list or element, unbalanced or nested brackets, empty ranges, descending
 *    ranges, non-digits inside brackets, blanks or control characters, more than
 *    HOSTLIST_MAX_ENTRIES names or HOSTLIST_MAX_BYTES bytes in total.
 * what names the source for messages (NULL: "host list"). s NULL fails with "<what> is not set".
 * On success *names holds *count (>= 1) strings; release them with hostlist_free(). */
dt_status hostlist_parse(const char *what, const char *s, char ***names, int *count);

/* Frees what hostlist_parse returned. NULL is a no-op. */
void hostlist_free(char **names, int count);

/* Expands SLURM_TASKS_PER_NODE, e.g. "2(x3),1" -> [2, 2, 2, 1], "4" -> [4].
 * Each element is a task count >= 1, optionally followed by "(xN)" with a repeat N >= 1; elements
 * are separated by commas. Digits only: no signs, blanks or other text; numbers must fit an int and
 * the total must not exceed HOSTLIST_MAX_ENTRIES entries. what names the source for messages (NULL:
 * "tasks per node"). On success *counts holds *n (>= 1) ints; release it with free(). */
dt_status hostlist_tasks_per_node_parse(const char *what, const char *s, int **counts, int *n);

#endif
