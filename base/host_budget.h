/*
 * host_budget.h - the host memory one rank may plan to use: the least of what the node has free
 * (MemAvailable), what its memory cgroup has left (the usual way a batch system such as Slurm
 * limits a job's memory: past it the kernel kills the process, with no message of ours) and what
 * its own ulimit -v / -d leaves (past it allocations fail). Each with its source in words, so a
 * plan that does not fit names the limit to raise. Doctor's memory.model row, `dtrain train`'s
 * check before its first step and the out-of-memory report all read it here.
 */
#ifndef DT_BASE_HOST_BUDGET_H
#define DT_BASE_HOST_BUDGET_H

#include <stddef.h>

/* Which of the three decided the budget. */
typedef enum host_budget_kind {
    HOST_BUDGET_NONE = 0,     /* none is known: no MemAvailable given, no cgroup limit, no rlimit */
    HOST_BUDGET_MEMAVAILABLE, /* the node's MemAvailable, split among the node's ranks */
    HOST_BUDGET_CGROUP,       /* a memory cgroup's limit less its use, split among the ranks in it */
    HOST_BUDGET_RLIMIT        /* this process's RLIMIT_AS or RLIMIT_DATA less what it counts now */
} host_budget_kind;

typedef struct host_budget {
    host_budget_kind kind;
    size_t bytes;       /* this rank's share of the deciding source (0 with HOST_BUDGET_NONE) */
    int enforced;       /* 1: the kernel enforces it (cgroup, rlimit); 0: MemAvailable, which swap and
                           reclaim may stretch */
    size_t cgroup_left; /* the tightest cgroup's room for all its ranks (SIZE_MAX: no cgroup limit) */
    char source[320];   /* the deciding source in words, e.g. "cgroup memory.max 1.0 GiB
                           (/sys/fs/cgroup/job): 0.7 GiB left, shared by 2 ranks" */
} host_budget;

/* Fills *out. avail: the node's MemAvailable in bytes (0: unknown); ranks: the ranks of this node,
 * which share its MemAvailable and (started by one launcher) its cgroup (< 1 counts as 1). root:
 * NULL or "" for the real /proc/self/cgroup and /sys/fs/cgroup, else a directory holding
 * proc/self/cgroup and sys/fs/cgroup/... to read instead (tests; with root NULL the environment's
 * DTRAIN_TEST_CGROUP_ROOT, runtime/test_hooks.h, is that directory when set). The cgroup is the
 * memory controller's (v1 memory.limit_in_bytes less memory.usage_in_bytes, v2 memory.max less
 * memory.current; the inactive file cache, which the kernel reclaims before it kills, not counted
 * as used) of this process's cgroup and each of its ancestors: the tightest decides. "max" and v1's
 * huge "unlimited" are no limit. Never fails: what cannot be read is no limit. */
void host_budget_get(host_budget *out, size_t avail, int ranks, const char *root);

/* bytes as "1.2 GiB", "12.0 MiB", "3.0 KiB", "512 B" into out (n bytes); returns out. */
const char *host_budget_bytes(size_t b, char *out, size_t n);

#endif
