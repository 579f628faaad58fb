/*
 * fuzz_hostlist.c - SLURM's compressed host lists and task counts (runtime/hostlist.c).
 *
 * Input: a host list ("a[01-04,07],b5"), then a NUL or newline, then a tasks-per-node value
 * ("2(x3),1"); without a separator both parsers get the whole input.
 * Beyond ASan/UBSan/leaks and the memory limits of run.sh (a list that expands to gigabytes is a
 * report): success gives 1..HOSTLIST_MAX_ENTRIES entries, names that are non-empty and hold no
 * ',', '[', ']' or blank, task counts >= 1; failure gives NULL / 0 as hostlist.h promises; a list
 * without brackets expands to exactly its comma-separated elements.
 */
#include "fuzz_common.h"
#include "runtime/placement/hostlist.h"

static void check_hosts(const char *s)
{
    char **names = (char **)1;
    int count = -7;
    if (hostlist_parse("SLURM_JOB_NODELIST", s, &names, &count) != DT_OK) {
        FUZZ_CHECK(names == NULL && count == 0, "a failure left names %p, count %d", (void *)names, count);
        return;
    }
    FUZZ_CHECK(names && count >= 1 && count <= HOSTLIST_MAX_ENTRIES, "count %d", count);
    for (int i = 0; i < count; i++) {
        FUZZ_CHECK(names[i] && names[i][0], "name %d is empty", i);
        FUZZ_CHECK(!strpbrk(names[i], ",[] \t\n\r\v\f"), "name %d '%s' kept list syntax or a blank", i, names[i]);
    }
    if (!strchr(s, '[')) {
        /* No brackets: the elements themselves, in order. */
        const char *p = s;
        for (int i = 0; i < count; i++) {
            size_t len = strcspn(p, ",");
            FUZZ_CHECK(strlen(names[i]) == len && memcmp(names[i], p, len) == 0,
                       "name %d '%s' is not element "
                       "'%.*s'",
                       i, names[i], (int)len, p);
            p += len;
            FUZZ_CHECK(i == count - 1 ? *p == '\0' : *p == ',', "%d names for '%s'", count, s);
            if (*p) p++;
        }
    }
    hostlist_free(names, count);
}

static void check_tasks(const char *s)
{
    int *counts = (int *)1;
    int n = -7;
    if (hostlist_tasks_per_node_parse("SLURM_TASKS_PER_NODE", s, &counts, &n) != DT_OK) {
        FUZZ_CHECK(counts == NULL && n == 0, "a failure left counts %p, n %d", (void *)counts, n);
        return;
    }
    FUZZ_CHECK(counts && n >= 1 && n <= HOSTLIST_MAX_ENTRIES, "n %d", n);
    for (int i = 0; i < n; i++) FUZZ_CHECK(counts[i] >= 1, "count %d is %d", i, counts[i]);
    free(counts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *hosts, *tasks;
    fuzz_split(data, size, &hosts, &tasks);
    check_hosts(hosts);
    check_tasks(tasks ? tasks : hosts);
    free(hosts);
    return 0;
}
