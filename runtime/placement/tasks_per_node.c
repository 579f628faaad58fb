/*
 * tasks_per_node.c - SLURM_TASKS_PER_NODE ("2(x3),1" -> 2 2 2 1) expanded in-process (hostlist.h),
 * in two passes as the host lists are: the first validates and counts without allocating, the
 * second fills the array and has only out-of-memory left to fail on.
 */
#include "runtime/placement/hostlist.h"
#include "runtime/placement/hostlist_fail.h"

#include "base/status.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define TPN_KIND "tasks-per-node list"
#define TPN_EXAMPLE "comma-separated task counts such as 2(x3),1"
#define TPN_FAIL(...) hostlist_fail(what, TPN_KIND, TPN_EXAMPLE, s, __VA_ARGS__)

/* Reads the positive int at s[*pos]; `role` names it in messages ("task count", "repeat count"). */
static dt_status tasks_per_node_number(const char *what, const char *s, size_t *pos, const char *role, int *out)
{
    char desc[24];
    size_t i = *pos;
    if (s[i] == '-') return TPN_FAIL("negative %s at position %zu", role, i + 1);
    if (!hostlist_is_digit(s[i]))
        return TPN_FAIL("%s at position %zu where a %s was expected",
                        s[i] == '\0' ? "the end" : hostlist_char_desc(s[i], desc), i + 1, role);
    long long v = 0;
    while (hostlist_is_digit(s[i])) {
        v = v * 10 + (s[i] - '0');
        if (v > INT_MAX) return TPN_FAIL("the %s at position %zu is too large (at most %d)", role, *pos + 1, INT_MAX);
        i++;
    }
    if (v == 0) return TPN_FAIL("the %s at position %zu is 0 (it must be at least 1)", role, *pos + 1);
    *out = (int)v;
    *pos = i;
    return DT_OK;
}

/* Validates s and counts its entries; when counts is not NULL also writes them (the second pass,
 * with counts sized from the first). */
static dt_status tasks_per_node_scan(const char *what, const char *s, int *counts, size_t *total)
{
    char desc[24];
    size_t i = 0;
    unsigned long long n = 0;

    if (s[0] == '\0') return TPN_FAIL("it is empty");
    for (;;) {
        if (s[i] == ',' || s[i] == '\0')
            return TPN_FAIL("empty element at position %zu (a comma at the start or end, or two in a "
                            "row)",
                            i + 1);
        if (s[i] == '(') return TPN_FAIL("the '(' at position %zu has no task count before it", i + 1);
        int tasks = 0, reps = 1;
        dt_status st = tasks_per_node_number(what, s, &i, "task count", &tasks);
        if (st != DT_OK) return st;
        if (s[i] == '(') {
            size_t open = i++;
            if (s[i] == '\0') return TPN_FAIL("the '(' at position %zu is never closed", open + 1);
            if (s[i] != 'x')
                return TPN_FAIL("%s at position %zu where 'x' was expected (repeats read like 2(x3))",
                                hostlist_char_desc(s[i], desc), i + 1);
            i++;
            if (s[i] == '\0') return TPN_FAIL("the '(' at position %zu is never closed", open + 1);
            st = tasks_per_node_number(what, s, &i, "repeat count", &reps);
            if (st != DT_OK) return st;
            if (s[i] == '\0') return TPN_FAIL("the '(' at position %zu is never closed", open + 1);
            if (s[i] != ')')
                return TPN_FAIL("%s at position %zu where ')' was expected", hostlist_char_desc(s[i], desc), i + 1);
            i++;
        }
        if (n + (unsigned long long)reps > HOSTLIST_MAX_ENTRIES)
            return TPN_FAIL("it expands to more than %d entries", HOSTLIST_MAX_ENTRIES);
        if (counts != NULL)
            for (int r = 0; r < reps; r++) counts[n + (unsigned long long)r] = tasks;
        n += (unsigned long long)reps;
        if (s[i] == '\0') break;
        if (s[i] != ',')
            return TPN_FAIL("%s at position %zu where ',' or '(xN)' was expected after a task count",
                            hostlist_char_desc(s[i], desc), i + 1);
        i++;
    }
    *total = (size_t)n;
    return DT_OK;
}

dt_status hostlist_tasks_per_node_parse(const char *what, const char *s, int **counts, int *n)
{
    if (counts == NULL || n == NULL)
        return status_set_error(DT_ERR_INTERNAL, "hostlist_tasks_per_node_parse called with a NULL output pointer");
    *counts = NULL;
    *n = 0;
    if (s == NULL) return status_set_error(DT_ERR_ENV, "%s is not set", what != NULL ? what : "tasks per node");

    size_t total;
    dt_status st = tasks_per_node_scan(what, s, NULL, &total);
    if (st != DT_OK) return st;
    int *out = malloc(total * sizeof *out);
    if (out == NULL)
        return status_set_error(DT_ERR_NOMEM, "out of memory expanding a tasks-per-node list of %zu entries", total);
    st = tasks_per_node_scan(what, s, out, &total); /* cannot fail: s was validated above */
    if (st != DT_OK) {
        free(out);
        return st;
    }
    *counts = out;
    *n = (int)total;
    return DT_OK;
}
